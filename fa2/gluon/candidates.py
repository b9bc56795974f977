"""The Gluon kernel's candidate configs (fa2/gluon/attention_hopper.py), by name: what gpu/gluon_sweep.py times and
fa2.gluon.dispatch may ship. Plain data: importing this needs no Gluon.

Why these: chapter 6's table picks one warpgroup (4 warps) with 64- or 128-row query tiles on the H200 (two or
three programs per SM, whose softmax and matrix products interleave), while the rungs' default is one 128-row
program of 8 warps per SM. Shared memory per program (D = 128, bf16): Q 16 KB per 64 rows, each buffer of K and V
16 KB per 64 keys.
"""

# name: (rung, config)   m: BLOCK_M, n: BLOCK_N, b: K/V buffers, w: consumer warps
CONFIGS = {
    "r1_m64n64b2w4": (1, dict(BLOCK_M=64, BLOCK_N=64, NUM_BUFFERS=2, num_warps=4)),
    "r1_m128n64b2w4": (1, dict(BLOCK_M=128, BLOCK_N=64, NUM_BUFFERS=2, num_warps=4)),
    "r1_m64n128b2w4": (1, dict(BLOCK_M=64, BLOCK_N=128, NUM_BUFFERS=2, num_warps=4)),
    # one 128-row program of 8 warps (two warpgroups of 64 rows) held to 128 registers: two programs per SM, as
    # chapter 6's 8-warp configs run
    "r1_m128n64b2w8": (1, dict(BLOCK_M=128, BLOCK_N=64, NUM_BUFFERS=2, num_warps=8, maxnreg=128)),
    "r2_m64n64b2w4": (2, dict(BLOCK_M=64, BLOCK_N=64, NUM_BUFFERS=2, num_warps=4)),
    # rung 2 on 128-row tiles: one warpgroup (255 registers, 88 bytes spilled; two programs per SM), two
    # warpgroups (152 registers: one program per SM) or two held to 128 registers (192 bytes spilled; two)
    "r2_m128n64b2w4": (2, dict(BLOCK_M=128, BLOCK_N=64, NUM_BUFFERS=2, num_warps=4)),
    "r2_m128n64b2w8": (2, dict(BLOCK_M=128, BLOCK_N=64, NUM_BUFFERS=2, num_warps=8)),
    "r2_m128n64b2w8r128": (2, dict(BLOCK_M=128, BLOCK_N=64, NUM_BUFFERS=2, num_warps=8, maxnreg=128)),
    "r2_m64n128b2w4": (2, dict(BLOCK_M=64, BLOCK_N=128, NUM_BUFFERS=2, num_warps=4)),
    "r3_m64n64b2w4": (3, dict(BLOCK_M=64, BLOCK_N=64, NUM_BUFFERS=2, num_warps=4, maxnreg=128)),
    "r3_m64n128b2w4": (3, dict(BLOCK_M=64, BLOCK_N=128, NUM_BUFFERS=2, num_warps=4, maxnreg=128)),
    # rung 4: two 64-row consumer warpgroups and the producer in one 128-row program (12 warps)
    "r4": (4, {}),
    "r4_pingpong": (4, dict(PINGPONG=1)),
    "r4_n64b2": (4, dict(BLOCK_N=64)),
    "r4_n64b3_pingpong": (4, dict(BLOCK_N=64, NUM_BUFFERS=3, PINGPONG=1)),
    "r4_n128b2_pingpong": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1)),
    # one program per SM looping over the query tiles (under causal in pairs of equal total length), the producer
    # at 32 registers so the consumers keep 240 without spills
    "r4_n64b3_pingpong_persistent": (4, dict(BLOCK_N=64, NUM_BUFFERS=3, PINGPONG=1, PERSISTENT=1, PRODUCER_REGS=32)),
    # the same with 128-key tiles in two buffers (half the tiles, so half the barrier round trips per key):
    # 197 KB of shared memory (Q and O buffers included), no spills on sm_90
    "r4_n128b2_pingpong_persistent": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1,
                                              PRODUCER_REGS=32)),
    # the same two, their work items dealt by the host's list schedule (attention_hopper.schedule_table: head by
    # head, the last rounds longest first) instead of round-robin units
    "r4_n64b3_pingpong_scheduled": (4, dict(BLOCK_N=64, NUM_BUFFERS=3, PINGPONG=1, PERSISTENT=1, SCHEDULED=1,
                                            PRODUCER_REGS=32)),
    "r4_n128b2_pingpong_scheduled": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1, SCHEDULED=1,
                                             PRODUCER_REGS=32)),
    # each consumer attends only to its own 64 rows' key range (OWN_RANGES: under causal the lower one skips the
    # diagonal's last 64-key tile and the upper one needs no mask on the one before; under a window the upper
    # one skips the first), one program per tile, paired units, or the host's schedule
    "r4_n64b3_pingpong_own": (4, dict(BLOCK_N=64, NUM_BUFFERS=3, PINGPONG=1, OWN_RANGES=1)),
    "r4_n64b3_pingpong_persistent_own": (4, dict(BLOCK_N=64, NUM_BUFFERS=3, PINGPONG=1, PERSISTENT=1,
                                                 PRODUCER_REGS=32, OWN_RANGES=1)),
    "r4_n64b3_pingpong_scheduled_own": (4, dict(BLOCK_N=64, NUM_BUFFERS=3, PINGPONG=1, PERSISTENT=1, SCHEDULED=1,
                                                PRODUCER_REGS=32, OWN_RANGES=1)),
    # Q_REGS: each consumer keeps its Q rows in registers (wgmma A operand) so S = Q·Kᵀ reads only K from shared
    # memory; 64-key tiles (the shipped causal choices) and 128-key tiles, whose 3-deep ring (224 KB with Q) fits
    # one-tile programs only (persistent ones stage O in 32 KB more)
    "r4_n64b3_pingpong_persistent_own_qregs": (4, dict(BLOCK_N=64, NUM_BUFFERS=3, PINGPONG=1, PERSISTENT=1,
                                                       PRODUCER_REGS=32, OWN_RANGES=1, Q_REGS=1)),
    "r4_n64b3_pingpong_scheduled_own_qregs": (4, dict(BLOCK_N=64, NUM_BUFFERS=3, PINGPONG=1, PERSISTENT=1,
                                                      SCHEDULED=1, PRODUCER_REGS=32, OWN_RANGES=1, Q_REGS=1)),
    "r4_n128b3_pingpong": (4, dict(BLOCK_N=128, NUM_BUFFERS=3, PINGPONG=1)),
    "r4_n128b3_pingpong_qregs": (4, dict(BLOCK_N=128, NUM_BUFFERS=3, PINGPONG=1, Q_REGS=1)),
    "r4_n128b2_pingpong_persistent_qregs": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1,
                                                    PRODUCER_REGS=32, Q_REGS=1)),
    # SPLIT_EMPTY: K and V have empty barriers of their own, K freed once S = Q·Kᵀ is done and loaded a step ahead
    # of V (FA3's separate K and V pipelines), so a 2-deep ring of 128-key tiles can keep the loads ahead; 128-key
    # tiles persistent (192 KB) and one-tile, and the shipped 64-key persistent config
    "r4_n128b2_pingpong_persistent_split": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1,
                                                    PRODUCER_REGS=32, SPLIT_EMPTY=1)),
    "r4_n128b2_pingpong_scheduled_split": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1,
                                                   SCHEDULED=1, PRODUCER_REGS=32, SPLIT_EMPTY=1)),
    "r4_n128b2_pingpong_split": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, SPLIT_EMPTY=1)),
    "r4_n128b3_pingpong_split": (4, dict(BLOCK_N=128, NUM_BUFFERS=3, PINGPONG=1, SPLIT_EMPTY=1)),
    "r4_n64b3_pingpong_persistent_own_split": (4, dict(BLOCK_N=64, NUM_BUFFERS=3, PINGPONG=1, PERSISTENT=1,
                                                       PRODUCER_REGS=32, OWN_RANGES=1, SPLIT_EMPTY=1)),
    # Q_AHEAD: two Q buffers per consumer, the next item's Q loaded when an item starts (a whole item of lead, where
    # the one-buffer configs load it during the epilogue); the 128-key configs above (224 KB of shared memory) and
    # the 64-key persistent one with own key ranges. Checked, measured slower (chapter 12 §12.11), not in a table
    "r4_n128b2_pingpong_persistent_split_qahead": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1,
                                                           PRODUCER_REGS=32, SPLIT_EMPTY=1, Q_AHEAD=1)),
    "r4_n128b2_pingpong_scheduled_split_qahead": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1,
                                                          SCHEDULED=1, PRODUCER_REGS=32, SPLIT_EMPTY=1, Q_AHEAD=1)),
    "r4_n64b3_pingpong_persistent_own_qahead": (4, dict(BLOCK_N=64, NUM_BUFFERS=3, PINGPONG=1, PERSISTENT=1,
                                                        PRODUCER_REGS=32, OWN_RANGES=1, Q_AHEAD=1)),
    # HALF_DIAGONAL: with 128-key tiles the lower consumer's rows see only the first 64 keys of the diagonal tile:
    # it computes that half (S and P·V at half width) where its rows see nothing past it
    "r4_n128b2_pingpong_persistent_split_half": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1,
                                                         PRODUCER_REGS=32, SPLIT_EMPTY=1, HALF_DIAGONAL=1)),
    "r4_n128b2_pingpong_scheduled_split_half": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1,
                                                        SCHEDULED=1, PRODUCER_REGS=32, SPLIT_EMPTY=1, HALF_DIAGONAL=1)),
    "r4_n128b2_pingpong_split_half": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, SPLIT_EMPTY=1,
                                              HALF_DIAGONAL=1)),
    # Q_EARLY: the next item's Q loaded before an item's last P·V instead of after it (one Q buffer still)
    "r4_n128b2_pingpong_persistent_split_half_early": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1,
                                                               PRODUCER_REGS=32, SPLIT_EMPTY=1, HALF_DIAGONAL=1,
                                                               Q_EARLY=1)),
    "r4_n128b2_pingpong_scheduled_split_half_early": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1,
                                                              SCHEDULED=1, PRODUCER_REGS=32, SPLIT_EMPTY=1,
                                                              HALF_DIAGONAL=1, Q_EARLY=1)),
    "r4_n128b2_pingpong_persistent_split_early": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1,
                                                          PRODUCER_REGS=32, SPLIT_EMPTY=1, Q_EARLY=1)),
    # CHAIN_RANGES: an item's key ranges (mask-free, then masked) as one pipeline, no drain between them
    "r4_n128b2_pingpong_persistent_split_half_chain": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1,
                                                               PRODUCER_REGS=32, SPLIT_EMPTY=1, HALF_DIAGONAL=1,
                                                               CHAIN_RANGES=1)),
    "r4_n128b2_pingpong_scheduled_split_chain": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1,
                                                         SCHEDULED=1, PRODUCER_REGS=32, SPLIT_EMPTY=1,
                                                         CHAIN_RANGES=1)),
    "r4_n128b2_pingpong_persistent_split_chain": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1,
                                                          PRODUCER_REGS=32, SPLIT_EMPTY=1, CHAIN_RANGES=1)),
    "r4_n64b3_pingpong_persistent_chain": (4, dict(BLOCK_N=64, NUM_BUFFERS=3, PINGPONG=1, PERSISTENT=1,
                                                   PRODUCER_REGS=32, CHAIN_RANGES=1)),
    # TABLE_AHEAD: a SCHEDULED program reads each item's table entry an item ahead (no table read on its path)
    "r4_n128b2_pingpong_scheduled_split_half_ahead": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1,
                                                              SCHEDULED=1, PRODUCER_REGS=32, SPLIT_EMPTY=1,
                                                              HALF_DIAGONAL=1, TABLE_AHEAD=1)),
    "r4_n128b2_pingpong_scheduled_split_ahead": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1,
                                                         SCHEDULED=1, PRODUCER_REGS=32, SPLIT_EMPTY=1,
                                                         TABLE_AHEAD=1)),
    "r4_n64b3_pingpong_scheduled_ahead": (4, dict(BLOCK_N=64, NUM_BUFFERS=3, PINGPONG=1, PERSISTENT=1, SCHEDULED=1,
                                                  PRODUCER_REGS=32, TABLE_AHEAD=1)),
    # the table's persistent config without PINGPONG: the two consumers issue their wgmmas without taking turns
    "r4_n128b2_persistent_split_half": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PERSISTENT=1, PRODUCER_REGS=32,
                                                SPLIT_EMPTY=1, HALF_DIAGONAL=1)),
    "r4_n128b2_persistent_split": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PERSISTENT=1, PRODUCER_REGS=32,
                                           SPLIT_EMPTY=1)),
    # without PINGPONG, with Q_EARLY (the no-ping-pong configs above without it were the fastest at (32, 32, 512, 128)
    # causal), and the 64-key persistent config with own key ranges without PINGPONG
    "r4_n128b2_persistent_split_half_early": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PERSISTENT=1, PRODUCER_REGS=32,
                                                      SPLIT_EMPTY=1, HALF_DIAGONAL=1, Q_EARLY=1)),
    "r4_n128b2_persistent_split_early": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PERSISTENT=1, PRODUCER_REGS=32,
                                                 SPLIT_EMPTY=1, Q_EARLY=1)),
    "r4_n64b3_persistent_own": (4, dict(BLOCK_N=64, NUM_BUFFERS=3, PERSISTENT=1, PRODUCER_REGS=32, OWN_RANGES=1)),
    # SCHEDULED=2: the paired order from a table whose last round is planned tile by tile (paired_schedule_table),
    # the table read an item ahead; the table's persistent config, the same without PINGPONG, and the 64-key one
    "r4_n128b2_pingpong_persistent_split_half_pairplan": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1,
                                                                  PERSISTENT=1, SCHEDULED=2, TABLE_AHEAD=1,
                                                                  PRODUCER_REGS=32, SPLIT_EMPTY=1,
                                                                  HALF_DIAGONAL=1)),
    "r4_n128b2_persistent_split_half_pairplan": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PERSISTENT=1, SCHEDULED=2,
                                                         TABLE_AHEAD=1, PRODUCER_REGS=32, SPLIT_EMPTY=1,
                                                         HALF_DIAGONAL=1)),
    "r4_n64b3_persistent_own_pairplan": (4, dict(BLOCK_N=64, NUM_BUFFERS=3, PERSISTENT=1, SCHEDULED=2, TABLE_AHEAD=1,
                                                 PRODUCER_REGS=32, OWN_RANGES=1)),
    # SPLIT_TAIL: the paired launch's last round dealt tile by tile in the kernel itself (no table): the table's
    # persistent config, the same without PINGPONG, and the money shot's without the halved diagonal
    "r4_n128b2_pingpong_persistent_split_half_tail": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1,
                                                              PRODUCER_REGS=32, SPLIT_EMPTY=1, HALF_DIAGONAL=1,
                                                              SPLIT_TAIL=1)),
    "r4_n128b2_persistent_split_half_tail": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PERSISTENT=1, PRODUCER_REGS=32,
                                                     SPLIT_EMPTY=1, HALF_DIAGONAL=1, SPLIT_TAIL=1)),
    # the (32, 32, 512, 128) table choice with the registers split otherwise between consumers and producer
    # (2·CONSUMER_REGS + PRODUCER_REGS = 512: 232/48, 224/64, 240/24; none spills)
    "r4_n128b2_persistent_split_half_pairplan_r232": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PERSISTENT=1, SCHEDULED=2,
                                                              TABLE_AHEAD=1, CONSUMER_REGS=232, PRODUCER_REGS=48,
                                                              SPLIT_EMPTY=1, HALF_DIAGONAL=1)),
    "r4_n128b2_persistent_split_half_pairplan_r224": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PERSISTENT=1, SCHEDULED=2,
                                                              TABLE_AHEAD=1, CONSUMER_REGS=224, PRODUCER_REGS=64,
                                                              SPLIT_EMPTY=1, HALF_DIAGONAL=1)),
    "r4_n128b2_persistent_split_half_pairplan_p24": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PERSISTENT=1, SCHEDULED=2,
                                                             TABLE_AHEAD=1, PRODUCER_REGS=24, SPLIT_EMPTY=1,
                                                             HALF_DIAGONAL=1)),
    # SWAP_ROWS: the consumers trade query-row halves on odd items, so the one whose rows see half a diagonal tile
    # fewer keys alternates (under causal consumer 0 otherwise runs ahead by half a tile an item, which the shared
    # ring lets it keep only a tile or two of): the (32, 32, 512, 128) table choice, the paired launch without and
    # with PINGPONG
    "r4_n128b2_persistent_split_half_pairplan_swap": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PERSISTENT=1, SCHEDULED=2,
                                                              TABLE_AHEAD=1, PRODUCER_REGS=32, SPLIT_EMPTY=1,
                                                              HALF_DIAGONAL=1, SWAP_ROWS=1)),
    "r4_n128b2_persistent_split_half_swap": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PERSISTENT=1, PRODUCER_REGS=32,
                                                     SPLIT_EMPTY=1, HALF_DIAGONAL=1, SWAP_ROWS=1)),
    "r4_n128b2_pingpong_persistent_split_half_swap": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1,
                                                              PRODUCER_REGS=32, SPLIT_EMPTY=1, HALF_DIAGONAL=1,
                                                              SWAP_ROWS=1)),
    # ONE_LOOP: an item's key range in one pipeline, its masked tiles picked at run time (_softmax_any), so an item
    # runs one copy of the pipeline's code instead of one per range: under Nsight Compute the persistent causal
    # kernel's warps wait for instructions (stall "no instruction") about as often as they issue, cuDNN's 0.06
    # times as often (book/appendix_short_items.ipynb). The (32, 32, 512, 128) table choice, the money shot's, and
    # the paired launches with the halved diagonal with and without PINGPONG
    "r4_n128b2_persistent_split_half_pairplan_oneloop": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PERSISTENT=1,
                                                                 SCHEDULED=2, TABLE_AHEAD=1, PRODUCER_REGS=32,
                                                                 SPLIT_EMPTY=1, HALF_DIAGONAL=1, ONE_LOOP=1)),
    "r4_n128b2_pingpong_persistent_split_oneloop": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1,
                                                            PRODUCER_REGS=32, SPLIT_EMPTY=1, ONE_LOOP=1)),
    "r4_n128b2_pingpong_persistent_split_half_oneloop": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1,
                                                                 PERSISTENT=1, PRODUCER_REGS=32, SPLIT_EMPTY=1,
                                                                 HALF_DIAGONAL=1, ONE_LOOP=1)),
    "r4_n128b2_persistent_split_half_oneloop": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PERSISTENT=1, PRODUCER_REGS=32,
                                                        SPLIT_EMPTY=1, HALF_DIAGONAL=1, ONE_LOOP=1)),
    # ONE_LOOP=2: the same with every tile masked (one softmax in the code; the mask's arithmetic on every tile)
    "r4_n128b2_persistent_split_half_pairplan_allmasked": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PERSISTENT=1,
                                                                   SCHEDULED=2, TABLE_AHEAD=1, PRODUCER_REGS=32,
                                                                   SPLIT_EMPTY=1, HALF_DIAGONAL=1, ONE_LOOP=2)),
    "r4_n128b2_pingpong_persistent_split_allmasked": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1,
                                                              PRODUCER_REGS=32, SPLIT_EMPTY=1, ONE_LOOP=2)),
    # rung 3 persistent: one 8-warp consumer of 128 rows (two warpgroups running the same code) beside the producer.
    # At (32, 32, 512, 128) causal the two consumers of rung 4 run 78 KB of straight-line code an item between them
    # and their warps wait for instructions in ~20 % of the stall samples (2 % at N = 8192); one consumer halves
    # that code, without the halved diagonal tile (both warpgroups take the same shapes)
    "r3_persistent_split": (3, dict(PERSISTENT=1, PRODUCER_REGS=32, SPLIT_EMPTY=1)),
    "r3_persistent_split_pairplan": (3, dict(PERSISTENT=1, SCHEDULED=2, TABLE_AHEAD=1, PRODUCER_REGS=32,
                                             SPLIT_EMPTY=1)),
    # a deeper ring of 64-key tiles (4 or 5 buffers: 192 / 224 KB with Q and O), so more of the next tiles' K and V
    # are in flight while a short item runs: at (32, 32, 512, 128) causal an item reads ~128 KB from HBM
    # (Q, O, its share of K and V) in about the time its products take, and 2 buffers of 128 keys keep about one
    # tile's loads ahead of the consumers. The 5-deep one runs at N = 512 bf16 causal, B·H 256 and 1024
    # (book/results/deep_ring.md)
    "r4_n64b4_persistent_own_pairplan": (4, dict(BLOCK_N=64, NUM_BUFFERS=4, PERSISTENT=1, SCHEDULED=2, TABLE_AHEAD=1,
                                                 PRODUCER_REGS=32, OWN_RANGES=1)),
    "r4_n64b5_persistent_own_pairplan": (4, dict(BLOCK_N=64, NUM_BUFFERS=5, PERSISTENT=1, SCHEDULED=2, TABLE_AHEAD=1,
                                                 PRODUCER_REGS=32, OWN_RANGES=1)),
    "r4_n64b5_persistent_own_split_pairplan": (4, dict(BLOCK_N=64, NUM_BUFFERS=5, PERSISTENT=1, SCHEDULED=2,
                                                       TABLE_AHEAD=1, PRODUCER_REGS=32, OWN_RANGES=1,
                                                       SPLIT_EMPTY=1)),
    "r4_n64b5_persistent_own": (4, dict(BLOCK_N=64, NUM_BUFFERS=5, PERSISTENT=1, PRODUCER_REGS=32, OWN_RANGES=1)),
    # the 5-deep ring with the two consumers' softmaxes taking turns (ping-pong), as at the long shapes
    "r4_n64b5_pingpong_persistent_own_pairplan": (4, dict(BLOCK_N=64, NUM_BUFFERS=5, PINGPONG=1, PERSISTENT=1,
                                                          SCHEDULED=2, TABLE_AHEAD=1, PRODUCER_REGS=32,
                                                          OWN_RANGES=1)),
    "r4_n64b4_pingpong_persistent_own_pairplan": (4, dict(BLOCK_N=64, NUM_BUFFERS=4, PINGPONG=1, PERSISTENT=1,
                                                          SCHEDULED=2, TABLE_AHEAD=1, PRODUCER_REGS=32,
                                                          OWN_RANGES=1)),
    # O_DIRECT: O stored from registers straight to global memory, so the persistent kernel needs no O staging
    # buffers (32 KB): the table's configs at (32, 32, 512, 128), the money shot and (1, 32, 8192, 128) with it,
    # and each with one K/V buffer more in the room it leaves (3 of 128 keys: 224 KB; 6 of 64 keys). Checked, measured
    # 0.64-0.97x the time without it (32 four-byte stores a thread from the wgmma layout), not in a table
    "r4_n128b2_persistent_split_half_pairplan_direct": (4, dict(BLOCK_N=128, NUM_BUFFERS=2, PERSISTENT=1,
                                                                SCHEDULED=2, TABLE_AHEAD=1, PRODUCER_REGS=32,
                                                                SPLIT_EMPTY=1, HALF_DIAGONAL=1, O_DIRECT=1)),
    "r4_n128b3_persistent_split_half_pairplan_direct": (4, dict(BLOCK_N=128, NUM_BUFFERS=3, PERSISTENT=1,
                                                                SCHEDULED=2, TABLE_AHEAD=1, PRODUCER_REGS=32,
                                                                SPLIT_EMPTY=1, HALF_DIAGONAL=1, O_DIRECT=1)),
    "r4_n64b4_persistent_own_pairplan_direct": (4, dict(BLOCK_N=64, NUM_BUFFERS=4, PERSISTENT=1, SCHEDULED=2,
                                                        TABLE_AHEAD=1, PRODUCER_REGS=32, OWN_RANGES=1, O_DIRECT=1)),
    "r4_n64b6_persistent_own_pairplan_direct": (4, dict(BLOCK_N=64, NUM_BUFFERS=6, PERSISTENT=1, SCHEDULED=2,
                                                        TABLE_AHEAD=1, PRODUCER_REGS=32, OWN_RANGES=1, O_DIRECT=1)),
    "r4_n128b3_pingpong_persistent_split_half_direct": (4, dict(BLOCK_N=128, NUM_BUFFERS=3, PINGPONG=1,
                                                                PERSISTENT=1, PRODUCER_REGS=32, SPLIT_EMPTY=1,
                                                                HALF_DIAGONAL=1, O_DIRECT=1)),
    "r4_n128b3_pingpong_scheduled_split_direct": (4, dict(BLOCK_N=128, NUM_BUFFERS=3, PINGPONG=1, PERSISTENT=1,
                                                          SCHEDULED=1, PRODUCER_REGS=32, SPLIT_EMPTY=1, O_DIRECT=1)),
    # Q_EARLY with OWN_RANGES: the next item's Q loaded before each consumer's last P·V of its own range (and its
    # trailing skips), in the deep rings of 64-key tiles the table runs at N = 512 causal
    "r4_n64b5_persistent_own_pairplan_early": (4, dict(BLOCK_N=64, NUM_BUFFERS=5, PERSISTENT=1, SCHEDULED=2,
                                                       TABLE_AHEAD=1, PRODUCER_REGS=32, OWN_RANGES=1, Q_EARLY=1)),
    "r4_n64b4_persistent_own_pairplan_early": (4, dict(BLOCK_N=64, NUM_BUFFERS=4, PERSISTENT=1, SCHEDULED=2,
                                                       TABLE_AHEAD=1, PRODUCER_REGS=32, OWN_RANGES=1, Q_EARLY=1)),
    # rung 3 on 64-row tiles, persistent, two programs per SM (PROGRAMS_PER_SM; 8 warps at 128 registers and 96 KB of
    # shared memory each): two consumer warpgroups per SM that run one copy of the code between them, as cuDNN's
    # do, and drift apart as two programs, where rung 4's two consumer partitions are two copies of the code
    "r3_m64n64b2_persistent_x2": (3, dict(BLOCK_M=64, BLOCK_N=64, NUM_BUFFERS=2, num_warps=4, maxnreg=128,
                                          PERSISTENT=1, PROGRAMS_PER_SM=2)),
    "r3_m64n64b2_persistent_split_x2": (3, dict(BLOCK_M=64, BLOCK_N=64, NUM_BUFFERS=2, num_warps=4, maxnreg=128,
                                                PERSISTENT=1, SPLIT_EMPTY=1, PROGRAMS_PER_SM=2)),
    "r3_m64n64b2_persistent_pairplan_x2": (3, dict(BLOCK_M=64, BLOCK_N=64, NUM_BUFFERS=2, num_warps=4, maxnreg=128,
                                                   PERSISTENT=1, SCHEDULED=2, TABLE_AHEAD=1, PROGRAMS_PER_SM=2)),
    "r3_m64n64b2_persistent_early_x2": (3, dict(BLOCK_M=64, BLOCK_N=64, NUM_BUFFERS=2, num_warps=4, maxnreg=128,
                                                PERSISTENT=1, Q_EARLY=1, PROGRAMS_PER_SM=2)),
    # O_IN_Q: O staged in the consumer's Q buffer (the next item's Q loads once the TMA store has read it), so no O
    # staging buffers: a third 64-key K/V buffer fits two programs per SM (112 KB each), a sixth the 64-key rung-4
    # ring, a third the 128-key one (224 KB)
    "r3_m64n64b3_persistent_oinq_x2": (3, dict(BLOCK_M=64, BLOCK_N=64, NUM_BUFFERS=3, num_warps=4, maxnreg=128,
                                               PERSISTENT=1, O_IN_Q=1, PROGRAMS_PER_SM=2)),
    "r3_m64n64b3_persistent_split_oinq_x2": (3, dict(BLOCK_M=64, BLOCK_N=64, NUM_BUFFERS=3, num_warps=4,
                                                     maxnreg=128, PERSISTENT=1, SPLIT_EMPTY=1, O_IN_Q=1,
                                                     PROGRAMS_PER_SM=2)),
    "r3_m64n64b2_persistent_split_oinq_x2": (3, dict(BLOCK_M=64, BLOCK_N=64, NUM_BUFFERS=2, num_warps=4,
                                                     maxnreg=128, PERSISTENT=1, SPLIT_EMPTY=1, O_IN_Q=1,
                                                     PROGRAMS_PER_SM=2)),
    # rung 3 at two programs per SM with D = 64 in mind: 128-key tiles, or a third 64-key buffer (at D = 64 a
    # program's Q, O and K/V ring take 48-112 KB; at D = 128 these run one program an SM)
    "r3_m64n128b2_persistent_split_x2": (3, dict(BLOCK_M=64, BLOCK_N=128, NUM_BUFFERS=2, num_warps=4, maxnreg=128,
                                                 PERSISTENT=1, SPLIT_EMPTY=1, PROGRAMS_PER_SM=2)),
    "r3_m64n128b3_persistent_split_x2": (3, dict(BLOCK_M=64, BLOCK_N=128, NUM_BUFFERS=3, num_warps=4, maxnreg=128,
                                                 PERSISTENT=1, SPLIT_EMPTY=1, PROGRAMS_PER_SM=2)),
    "r3_m64n64b3_persistent_split_x2": (3, dict(BLOCK_M=64, BLOCK_N=64, NUM_BUFFERS=3, num_warps=4, maxnreg=128,
                                                PERSISTENT=1, SPLIT_EMPTY=1, PROGRAMS_PER_SM=2)),
    "r4_n64b6_persistent_own_pairplan_oinq": (4, dict(BLOCK_N=64, NUM_BUFFERS=6, PERSISTENT=1, SCHEDULED=2,
                                                      TABLE_AHEAD=1, PRODUCER_REGS=32, OWN_RANGES=1, O_IN_Q=1)),
    "r4_n128b3_persistent_split_half_pairplan_oinq": (4, dict(BLOCK_N=128, NUM_BUFFERS=3, PERSISTENT=1,
                                                              SCHEDULED=2, TABLE_AHEAD=1, PRODUCER_REGS=32,
                                                              SPLIT_EMPTY=1, HALF_DIAGONAL=1, O_IN_Q=1)),
    # LATE_EPILOGUE: each work item's epilogue (O / l staged and sent out by TMA, the LSE) runs while the next
    # item's first S = Q·Kᵀ is computed, so the tensor cores do not wait on it. The next Q must then be there when
    # an item ends: Q_REGS loads it a whole item ahead (its buffer is free once Q is in registers; TABLE_AHEAD does
    # not combine with Q_REGS), Q_EARLY before the item's last P·V. The 5- and 4-deep 64-key rings that run at
    # N = 512 causal, and Q_REGS alone as the control
    "r4_n64b5_persistent_own_pairplan_qregs": (4, dict(BLOCK_N=64, NUM_BUFFERS=5, PERSISTENT=1, SCHEDULED=2,
                                                       PRODUCER_REGS=32, OWN_RANGES=1, Q_REGS=1)),
    "r4_n64b5_persistent_own_pairplan_qregs_late": (4, dict(BLOCK_N=64, NUM_BUFFERS=5, PERSISTENT=1, SCHEDULED=2,
                                                            PRODUCER_REGS=32, OWN_RANGES=1, Q_REGS=1,
                                                            LATE_EPILOGUE=1)),
    "r4_n64b5_persistent_own_pairplan_early_late": (4, dict(BLOCK_N=64, NUM_BUFFERS=5, PERSISTENT=1, SCHEDULED=2,
                                                            TABLE_AHEAD=1, PRODUCER_REGS=32, OWN_RANGES=1,
                                                            Q_EARLY=1, LATE_EPILOGUE=1)),
    "r4_n64b4_persistent_own_pairplan_qregs_late": (4, dict(BLOCK_N=64, NUM_BUFFERS=4, PERSISTENT=1, SCHEDULED=2,
                                                            PRODUCER_REGS=32, OWN_RANGES=1, Q_REGS=1,
                                                            LATE_EPILOGUE=1)),
    # OWN_RANGES=2: each consumer visits its own keys from the diagonal down, the producer loading the tiles last
    # first, so an item is one pipeline whose peeled first S is the masked diagonal tile and whose loop runs the
    # mask-free tiles: two copies of the step run per item instead of three, and one drain instead of two. The
    # 3-, 4- and 5-deep rings with the planned last round, and the 5-deep one with the paired launch. Checked;
    # level with the 5-deep ring in key order at N = 512, slower at longer items; not in a table
    # (book/results/own_down.md)
    "r4_n64b5_persistent_own_pairplan_down": (4, dict(BLOCK_N=64, NUM_BUFFERS=5, PERSISTENT=1, SCHEDULED=2,
                                                      TABLE_AHEAD=1, PRODUCER_REGS=32, OWN_RANGES=2)),
    "r4_n64b4_persistent_own_pairplan_down": (4, dict(BLOCK_N=64, NUM_BUFFERS=4, PERSISTENT=1, SCHEDULED=2,
                                                      TABLE_AHEAD=1, PRODUCER_REGS=32, OWN_RANGES=2)),
    "r4_n64b3_persistent_own_pairplan_down": (4, dict(BLOCK_N=64, NUM_BUFFERS=3, PERSISTENT=1, SCHEDULED=2,
                                                      TABLE_AHEAD=1, PRODUCER_REGS=32, OWN_RANGES=2)),
    "r4_n64b5_persistent_own_down": (4, dict(BLOCK_N=64, NUM_BUFFERS=5, PERSISTENT=1, PRODUCER_REGS=32,
                                             OWN_RANGES=2)),
}
