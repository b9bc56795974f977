"""What does the causal mask cost the Gluon kernel's masked key tiles? Two mutants of fa2/gluon/attention_hopper.py.

    python gpu/mask_probe.py OUT [ROUNDS]             # OUT/mask_probe.csv: a row per (shape, round, provider)

`_softmax_step` masks a tile's scores with `key < N_KV`, and under causal also `key <= row + N_KV - N_Q`. Under
causal the first bound follows from the second for every real row (row < N_Q), and rows past N_Q are never
stored, so `causal_only` keeps the causal bound alone there (a correct kernel, with one compare and one `and` less
per score of a masked tile). `no_mask` runs every masked tile through the mask-free code (wrong output; an upper
bound for any cheaper mask). Both timed, never checked here, beside the shipped config and SDPA's cuDNN backend
at the Gluon kernel's headline shapes (gpu/epilogue_probe.py's probe), in ROUNDS interleaved rounds.
"""

import sys
from pathlib import Path

from epilogue_probe import HEADLINE_SHAPES, probe
from fa2.gluon import attention_hopper
from fa2.testing import mutant

BOUNDS = ("        visible = offs_n[None, :] < N_KV\n        if IS_CAUSAL:\n"
          "            visible = visible & (offs_n[None, :] <= offs_m[:, None] + diagonal)\n")
CAUSAL_ONLY = ("        if IS_CAUSAL:                # key <= row + N_KV - N_Q < N_KV for every real row\n"
               "            visible = offs_n[None, :] <= offs_m[:, None] + diagonal\n"
               "        else:\n            visible = offs_n[None, :] < N_KV\n")
MASKED = "    if MASKED:\n        offs_n = kv + gl.arange"
MUTANTS = {"causal_only": mutant(attention_hopper, {BOUNDS: CAUSAL_ONLY}),
           "no_mask": mutant(attention_hopper, {MASKED: "    if False:\n        offs_n = kv + gl.arange"})}


def main(out, rounds=5):
    return probe(Path(out) / "mask_probe.csv", HEADLINE_SHAPES, MUTANTS, rounds,
                 f"python gpu/mask_probe.py OUT {rounds}")


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:3]))
