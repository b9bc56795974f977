#!/bin/bash
# On an sm_90 GPU that has no shipped tables yet (first run: an H100 SXM; under 9 min): tune chapter 6's kernel
# for it, then time the money and headline sweeps with `fa2` reading the Gluon table of the GPU named by
# $GLUON_TABLE (default "NVIDIA H200": the same sm_90 code) beside chapter 6's kernel with this GPU's new configs
# (`fa2_ch6`) and SDPA's FLASH and cuDNN backends, every output checked first. `bash gpu/new_gpu.sh b` is the second
# call: the reference sweep in one round with the same providers, then the quick decode sweep.
# Results under $OUT: gpu.txt, tune.log, <GPU>.json (copy to fa2/configs/), money_<tag>.csv, headline_<tag>.csv
# and their logs; with b: reference_<tag>.{csv,log}, decode_<tag>.{csv,log}. <tag> is h100 unless $TAG says.
source gpu/env.sh || exit 1
export FA2_GLUON_TABLE=${GLUON_TABLE:-NVIDIA H200}
TAG=${TAG:-h100}
SECONDS=0
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw,power.limit --format=csv | tee -a $OUT/gpu.txt
P=fa2,fa2_ch6,sdpa_flash,sdpa_cudnn
if [ "${1:-a}" = a ]; then
  name=$(python3 -c "import torch; from fa2.chapters.autotune import device_file_name as f; print(f(torch.cuda.get_device_name()))")
  # --cases writes the table after every key, so a run cut short keeps what it finished
  timeout -k 10 330 python3 -m fa2.tune --cases reference,tail,headdim --jobs 14 2>&1 | grep -v Warning > $OUT/tune.log
  echo "[${SECONDS}s] tune rc ${PIPESTATUS[0]}, $(grep -c passed $OUT/tune.log) keys" | tee -a $OUT/gpu.txt
  cp "fa2/configs/$name" $OUT/ || exit 1
  timeout -k 10 120 python3 -m fa2.bench --sweep money --providers $P,flex --name money_$TAG --out $OUT \
    > $OUT/money_$TAG.log 2>&1
  echo "[${SECONDS}s] money rc $?" | tee -a $OUT/gpu.txt
  timeout -k 10 150 python3 -m fa2.bench --sweep headline --providers $P --name headline_$TAG --out $OUT --no-plot \
    > $OUT/headline_$TAG.log 2>&1
  echo "[${SECONDS}s] headline rc $?" | tee -a $OUT/gpu.txt
else
  timeout -k 10 270 python3 -m fa2.bench --sweep reference --rounds 1 --providers $P --name reference_$TAG --out $OUT \
    --no-plot > $OUT/reference_$TAG.log 2>&1
  echo "[${SECONDS}s] reference rc $?" | tee -a $OUT/gpu.txt
  timeout -k 10 120 python3 -m fa2.bench --sweep decode --quick --no-tune --providers copy,fa2,sdpa_flash,sdpa_cudnn \
    --name decode_$TAG --out $OUT --no-plot > $OUT/decode_$TAG.log 2>&1
  echo "[${SECONDS}s] decode rc $?" | tee -a $OUT/gpu.txt
fi
