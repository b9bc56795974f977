"""How much of a tile step is O's rescale? An upper bound for rescaling O only when a row's max has grown enough.

    python gpu/rescale_probe.py OUT [ROUNDS]          # OUT/rescale_probe.csv: a row per (shape, round, provider)

Each step of the pipelined key loop (`_overlap_step` of fa2/gluon/attention_hopper.py) waits for the previous tile's
P·V and then multiplies O by alpha = 2^(m_old - m_new) per row, on the way to the next P·V. FlashAttention-4 keeps
a stale row max until the new one exceeds it by a margin (O and l then grow by at most 2^margin, exact in fp32),
so most steps skip the multiply. A mutant (fa2.testing.mutant) guards that multiply with a run-time condition
that is never true (`N_KV < 0`): the code stays in the kernel, but no step pays for it. Its output is wrong, so it
is timed, never checked. The table's config at each shape, as shipped and as the mutant, beside SDPA's cuDNN
backend, in ROUNDS interleaved rounds (gpu/epilogue_probe.py's probe). The time it saves bounds what skipping the
rescale could save, before the cost of deciding when to skip it (a reduction over the warpgroup's rows).
"""

import sys
from pathlib import Path

from epilogue_probe import HEADLINE_SHAPES, guarded, probe
from fa2.gluon import attention_hopper
from fa2.testing import mutant

# the steady-state step's rescale (the line before makes it unique: _score_tile's is the first tile's, O = 0)
RESCALE = "             BLOCK_N, NUM_BUFFERS, PRODUCER, base)\n    acc = _rescale(acc, alpha, o_layout)\n"
EDIT = {RESCALE: "             BLOCK_N, NUM_BUFFERS, PRODUCER, base)\n"
                 + guarded("    acc = _rescale(acc, alpha, o_layout)", never="N_KV < 0")}
MUTANTS = {"no_rescale": mutant(attention_hopper, EDIT)}       # built on import (tests/test_gpu_scripts.py)


def main(out, rounds=5):
    return probe(Path(out) / "rescale_probe.csv", HEADLINE_SHAPES, MUTANTS, rounds,
                 f"python gpu/rescale_probe.py OUT {rounds}")


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:3]))
