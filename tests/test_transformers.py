"""attn_implementation="fa2" in Hugging Face transformers (fa2/integrations/transformers.py): tiny randomly initialised
models (no downloaded weights) give SDPA's logits and greedy tokens, with padding, packing, GQA, windows, softcap.

Logits are held to the rule of fa2.testing.check_attention: the bf16 model on fa2 is no more than twice as far from
the float64 model's logits as the same bf16 model on SDPA is (plus 1e-3 of the largest logit)."""
import copy
import os
import subprocess
import sys

import pytest
import torch

import fa2
from conftest import requires_gpu

transformers = pytest.importorskip("transformers")
try:                                     # an image whose transformers cannot load its models (missing extras)
    from transformers import AutoModelForCausalLM  # noqa: F401
except (ImportError, RuntimeError) as e:
    pytest.skip(f"transformers cannot import its models here: {e}", allow_module_level=True)
from transformers import AttentionInterface, LlamaConfig  # noqa: E402
from transformers.masking_utils import AttentionMaskInterface  # noqa: E402

import fa2.integrations.transformers as hf  # noqa: E402

DEVICE = fa2.runtime.DEVICE
hf.register()


def tiny(config_class=LlamaConfig, seed=0, **overrides):
    """A randomly initialised 2-layer model: hidden 64, 4 query heads, 2 KV heads (GQA), vocab 128."""
    torch.manual_seed(seed)
    config = config_class(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=16, vocab_size=128, max_position_embeddings=256,
                          **overrides)
    model_class = transformers.AutoModelForCausalLM.from_config(config).__class__
    return model_class(config).eval()


def logits(model, impl, dtype, **inputs):
    m = copy.deepcopy(model).to(device=DEVICE, dtype=dtype)
    m.set_attn_implementation(impl)
    with torch.no_grad():
        return m(**{k: v.to(DEVICE) if torch.is_tensor(v) else v for k, v in inputs.items()}).logits.double()


def assert_logits_match(model, baseline="sdpa", real=None, **inputs):
    """fa2 (bf16) vs the float64 model no worse than twice `baseline` (bf16); `real` (B, N) selects the positions
    compared (padding's logits are whatever each implementation leaves there)."""
    ref = logits(model, baseline, torch.float64, **inputs)
    base = logits(model, baseline, torch.bfloat16, **inputs)
    ours = logits(model, "fa2", torch.bfloat16, **inputs)
    if real is not None:
        ref, base, ours = (t[real.to(t.device)] for t in (ref, base, ours))
    scale = ref.abs().max()
    err, base_err = ((ours - ref).abs().max() / scale).item(), ((base - ref).abs().max() / scale).item()
    assert torch.isfinite(ours).all()
    assert err <= 2 * base_err + 1e-3, f"fa2's logits are {err:.2e} off the fp64 model's, {baseline}'s {base_err:.2e}"
    return err, base_err


def left_padded(batch=3, length=20, pads=(0, 5, 11), seed=1):
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 128, (batch, length), generator=gen)
    mask = torch.ones(batch, length, dtype=torch.long)
    for b, p in enumerate(pads):
        ids[b, :p], mask[b, :p] = 0, 0
    return ids, mask


def test_import_fa2_does_not_import_transformers():
    env = dict(os.environ, TRITON_INTERPRET=os.environ.get("TRITON_INTERPRET", "1"))
    code = "import sys, fa2; fa2.integrations; assert 'transformers' not in sys.modules, 'imported'; print('ok')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_register_adds_attention_and_mask_functions():
    assert AttentionInterface._global_mapping["fa2"] is hf.attention_forward
    assert AttentionMaskInterface._global_mapping["fa2"] is hf.padding_mask
    hf.register("fa2-again")
    assert "fa2-again" in AttentionInterface._global_mapping


def test_llama_logits_match_sdpa_without_padding():
    ids, _ = left_padded(pads=(0, 0, 0))
    assert_logits_match(tiny(), input_ids=ids)


def test_llama_greedy_generate_matches_sdpa_without_padding():
    model = tiny()
    ids, _ = left_padded(batch=2, length=9, pads=(0, 0))
    tokens = {}
    for impl in ("sdpa", "fa2"):
        m = copy.deepcopy(model).to(device=DEVICE, dtype=torch.bfloat16)
        m.set_attn_implementation(impl)
        with torch.no_grad():
            tokens[impl] = m.generate(input_ids=ids.to(DEVICE), max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert tokens["fa2"].shape == (2, 15)
    assert torch.equal(tokens["fa2"], tokens["sdpa"])


def test_llama_logits_match_sdpa_with_left_padding():
    ids, mask = left_padded()
    assert_logits_match(tiny(), real=mask.bool(), input_ids=ids, attention_mask=mask)


def test_llama_greedy_generate_matches_sdpa_with_left_padding():
    """Greedy tokens with left padding (the mask carried through the KV cache) are the float64 model's, step by
    step, up to the first step where the float64 model's two best logits lie within 1 % of its largest logit:
    there bf16 rounding may pick either of the two, and from there on the sequences may part. (At this seed one
    row has such a step: its two best logits 0.38434 and 0.38276 round to the same bf16 value under fa2 and under
    transformers' eager attention, which both take the lower token id, and to two under bf16 SDPA.)"""
    model = tiny()
    ids, mask = left_padded(length=12, pads=(0, 3, 7))
    runs = {}
    for impl, dtype in (("sdpa", torch.float64), ("fa2", torch.bfloat16)):
        m = copy.deepcopy(model).to(device=DEVICE, dtype=dtype)
        m.set_attn_implementation(impl)
        with torch.no_grad():
            runs[impl] = m.generate(input_ids=ids.to(DEVICE), attention_mask=mask.to(DEVICE), max_new_tokens=6,
                                    do_sample=False, pad_token_id=0, output_scores=True,
                                    return_dict_in_generate=True)
    ref, ours = runs["sdpa"], runs["fa2"]
    assert ours.sequences.shape == ref.sequences.shape == (3, 18)
    assert torch.equal(ours.sequences[:, :12], ids.to(DEVICE))
    compared = 0
    for row in range(3):
        for step, scores in enumerate(ref.scores):
            best, second = scores[row].topk(2).values.tolist()
            token = ours.sequences[row, 12 + step].item()
            if best - second < 0.01 * scores[row].abs().max().item():     # a near tie: either token will do
                assert token in scores[row].topk(2).indices.tolist()
                break
            assert token == ref.sequences[row, 12 + step].item(), (row, step)
            compared += 1
    assert compared >= 12                       # most steps are no near ties


def test_packed_sequences_from_position_ids():
    """One row holding sequences of 7, 9 and 4 tokens (position_ids restart, no mask): no attention across them.
    (transformers' SDPA path looks for packing only without a cache, hence use_cache=False; its flash path, and
    fa2's, look at position_ids either way.)"""
    ids, _ = left_padded(batch=1, length=20, pads=(0,))
    position_ids = torch.cat([torch.arange(7), torch.arange(9), torch.arange(4)])[None]
    assert_logits_match(tiny(), input_ids=ids, position_ids=position_ids, use_cache=False)


def test_sliding_window_config():
    """Mistral-style: every layer sees the last `sliding_window` tokens (the query included), as SDPA's mask."""
    ids, _ = left_padded(pads=(0, 0, 0), length=24)
    assert_logits_match(tiny(transformers.MistralConfig, sliding_window=5), input_ids=ids)


def test_sliding_window_config_with_padding():
    ids, mask = left_padded(length=24)
    assert_logits_match(tiny(transformers.MistralConfig, sliding_window=5), real=mask.bool(), input_ids=ids,
                        attention_mask=mask)


def test_gemma2_softcap_and_alternating_windows():
    """Gemma 2: softcap on the scores, sliding and full layers in turn; SDPA has no softcap, so eager attention is
    the baseline. Weights 10x the default's spread make scores of a few units, so a softcap of 0.5 bites."""
    config = dict(attn_logit_softcapping=0.5, sliding_window=6, query_pre_attn_scalar=16, final_logit_softcapping=None,
                  initializer_range=0.2)
    ids, _ = left_padded(pads=(0, 0, 0), length=24)
    assert_logits_match(tiny(transformers.Gemma2Config, **config), baseline="eager", input_ids=ids)


def test_unsupported_uses_raise_naming_them():
    model = tiny().to(device=DEVICE, dtype=torch.bfloat16)
    model.set_attn_implementation("fa2")
    ids, _ = left_padded(pads=(0, 0, 0))
    ids = ids.to(DEVICE)
    model.float()
    with pytest.raises(TypeError, match="float32"), torch.no_grad():
        model(input_ids=ids)
    model.to(torch.bfloat16)
    mask4d = torch.ones(3, 1, 20, 20, dtype=torch.bool, device=DEVICE).tril()
    with pytest.raises(NotImplementedError, match="attention_mask of shape"), torch.no_grad():
        model(input_ids=ids, attention_mask=mask4d)
    for layer in model.model.layers:
        layer.self_attn.attention_dropout = 0.1           # what config.attention_dropout=0.1 gives
    model.train()
    with pytest.raises(NotImplementedError, match="dropout=0.1"), torch.no_grad():
        model(input_ids=ids)
    with pytest.raises(NotImplementedError, match="s_aux"):
        hf.attention_forward(model.model.layers[0].self_attn, *(torch.zeros(1, 2, 3, 16, dtype=torch.bfloat16),) * 3,
                             None, s_aux=torch.zeros(2))


def test_float32_model_under_autocast():
    ids, _ = left_padded(pads=(0, 0, 0))
    model = tiny().to(DEVICE)
    with torch.no_grad(), torch.autocast(DEVICE, dtype=torch.bfloat16):
        model.set_attn_implementation("sdpa")
        base = model(input_ids=ids.to(DEVICE)).logits.double()
        model.set_attn_implementation("fa2")
        ours = model(input_ids=ids.to(DEVICE)).logits.double()
    ref = logits(model, "sdpa", torch.float64, input_ids=ids)
    scale = ref.abs().max()
    assert (ours - ref).abs().max() / scale <= 2 * (base - ref).abs().max() / scale + 1e-3


@requires_gpu
def test_generate_on_gpu_matches_sdpa_with_padding():
    """The issue's GPU check: greedy tokens of a tiny Llama in bf16 on the GPU, left-padded batch, fa2 == SDPA."""
    model = tiny()
    ids, mask = left_padded(length=32, pads=(0, 9, 20))
    tokens = {}
    for impl in ("sdpa", "fa2"):
        m = copy.deepcopy(model).to(device="cuda", dtype=torch.bfloat16)
        m.set_attn_implementation(impl)
        with torch.no_grad():
            tokens[impl] = m.generate(input_ids=ids.cuda(), attention_mask=mask.cuda(), max_new_tokens=16,
                                      do_sample=False, pad_token_id=0)
    assert torch.equal(tokens["fa2"], tokens["sdpa"])
