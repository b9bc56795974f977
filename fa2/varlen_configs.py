"""Chapter 10's kernel configs on a GPU: candidates, pruning, the tuning key, the shipped table and its lookup.

The varlen/window kernel (`fa2/chapters/varlen.py`) does not share chapter 6's table: its loop runs up to three
key ranges per query tile and its tiles stop at each sequence's end, so a config tuned for the prefill kernel
does not carry over (chapter 10 §10.8 measured 10 % on the varlen batch). Its own table lives beside chapter 6's:

    fa2/configs/<GPU name>.varlen.json      {"device", "kernel": "varlen", "configs": {key: config}, "candidates", ...}

written by ``python -m fa2.tune --kernel varlen`` (`fa2/tune_varlen.py`), with the same document format as the
prefill table. A user's own run can write ``$FA2_CACHE_DIR/<GPU name>.varlen.json`` (default ``~/.cache/fa2``),
read before the shipped one. `tuning_key` is the one function that builds keys: the tuner writes with it and
`launch_config` looks up with it.

The lookup: the exact key, else the nearest key of the same family (kernel/width/dtype/mask) by length
buckets, else the fixed config the kernel was measured with before it had a table (`fixed_config`). Nothing is
autotuned on a first call.
"""

import json
import math
from pathlib import Path

import torch

from fa2 import runtime
from fa2.chapters.autotune import SHIPPED_DIR, cache_dir, device_file_name, length_bucket, prune
from fa2.chapters.kv_loop import block_d
from fa2.chapters.varlen import DEFAULT_CONFIG, window_flags

KERNEL = "varlen"

# Tile widths past 128 keep the accumulator in registers with 64-row tiles.
WIDE_CONFIG = dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=2)

# Every combination the kernel can be tuned over; `candidates` prunes it for a head dim and a GPU.
CANDIDATES = [dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=s)
              for bm in (64, 128) for bn in (32, 64, 128) for s in (2, 3, 4) for w in (4, 8)]
CONFIG_FIELDS = ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages")
MASKS = ("full", "causal", "window")
KEY_PARTS = 6          # varlen/D{width}/{dtype}/{mask}/q{bucket}/k{bucket}
DTYPES = {torch.float16: "fp16", torch.bfloat16: "bf16"}


def fixed_config(head_dim):
    """The config the kernel uses where its table has nothing: 128 x 64 tiles, 2 stages up to 128 columns
    (measured on the H200 before the kernel had a table), WIDE_CONFIG past them."""
    return dict(DEFAULT_CONFIG if block_d(head_dim) <= 128 else WIDE_CONFIG)


def candidates(head_dim, max_shared_bytes, pool=CANDIDATES):
    """The configs worth compiling for a head dim on a GPU with `max_shared_bytes` of shared memory per block:
    chapter 6's rules (shared memory for the Q tile and the pipelined K and V tiles, the score tile's and the
    accumulator's registers), with this kernel's tile width -- one power of two, block_d(head_dim), since it
    has no column pieces (96 runs 128 columns here)."""
    return prune("fast", pool, block_d(head_dim), max_shared_bytes)


def mask_kind(causal, window):
    """'full', 'causal' or 'window' (any window with a bound other than causal's right = 0)."""
    left, right = window_flags(causal, window)
    if left < 0 and right < 0:
        return "full"
    if left < 0 and right == 0:
        return "causal"
    return "window"


def keys_per_row(max_seqlen_k, causal, window):
    """The most keys one query row can see, as a window bounds it: left + right (an unbounded side counts as
    the longest sequence), never more than max_seqlen_k. Without a window: max_seqlen_k."""
    left, right = window_flags(causal, window)
    if left < 0 or right < 0:
        return max(1, max_seqlen_k)
    return max(1, min(max_seqlen_k, left + max(right, 0)))


def tuning_key(head_dim, dtype, causal, window, max_seqlen_q, max_seqlen_k):
    """The key a tuned config is stored and looked up under: kernel, tile width, dtype, mask, the bucket of the
    longest query sequence (the grid's rows) and the bucket of the keys one row sees (the window's width when a
    window bounds it). Buckets are chapter 6's powers of two, at least 128. The softcap is not in the key.

    >>> tuning_key(128, torch.bfloat16, True, (4096, 0), 32768, 32768)
    'varlen/D128/bf16/window/q32768/k4096'"""
    if dtype not in DTYPES:
        raise TypeError(f"fa2: the varlen kernel runs fp16 or bf16, not {dtype}")
    return (f"{KERNEL}/D{block_d(head_dim)}/{DTYPES[dtype]}/{mask_kind(causal, window)}/"
            f"q{length_bucket(max(1, max_seqlen_q))}/k{length_bucket(keys_per_row(max_seqlen_k, causal, window))}")


def parse_key(key):
    """(family, log2 q bucket, log2 k bucket) of a key in tuning_key's format; ValueError for any other."""
    parts = key.split("/")
    if (len(parts) != KEY_PARTS or parts[0] != KERNEL or parts[3] not in MASKS or parts[4][:1] != "q"
            or parts[5][:1] != "k"):
        raise ValueError(f"not a {KERNEL} tuning key: {key!r}")
    q, k = int(parts[4][1:]), int(parts[5][1:])
    return "/".join(parts[:4]), math.log2(q), math.log2(k)


def valid_config(cfg):
    """A table entry the kernel can launch with: the four fields, positive ints, tiles powers of two."""
    return (isinstance(cfg, dict) and all(isinstance(cfg.get(f), int) and not isinstance(cfg.get(f), bool)
                                          and cfg[f] > 0 for f in CONFIG_FIELDS)
            and all(cfg[f] & (cfg[f] - 1) == 0 for f in ("BLOCK_M", "BLOCK_N", "num_warps")))


def table_file_name(device_name):
    """'NVIDIA H200' -> 'NVIDIA_H200.varlen.json' (chapter 6's file name with a .varlen suffix)."""
    return device_file_name(device_name)[:-len(".json")] + ".varlen.json"


def read_configs(path):
    """The file's configs whose keys and values have this version's format; {} if it is missing or broken."""
    try:
        configs = json.loads(Path(path).read_text())["configs"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    kept = {}
    for key, cfg in configs.items() if isinstance(configs, dict) else ():
        try:
            parse_key(key)
        except ValueError:
            continue
        if valid_config(cfg):
            kept[key] = {f: cfg[f] for f in CONFIG_FIELDS}
    return kept


class VarlenTable:
    """One GPU's tuned configs for the varlen kernel: the user's cache file before the shipped one."""

    def __init__(self, device_name, shipped_dir=None, user_dir=None):
        self.device_name = device_name
        name = table_file_name(device_name)
        self.shipped_path = Path(shipped_dir or SHIPPED_DIR) / name
        self.cache_path = Path(user_dir or cache_dir()) / name
        self.shipped = read_configs(self.shipped_path)
        self.cached = read_configs(self.cache_path)

    def nearest(self, key):
        """The exact key, else the nearest key of its family (sum of the two buckets' log2 distances; ties go
        to the first in sorted order); None if the family has no key."""
        if key in self.cached or key in self.shipped:
            return key
        family, q, k = parse_key(key)
        same = sorted(t for table in (self.cached, self.shipped) for t in table if parse_key(t)[0] == family)
        if not same:
            return None
        return min(same, key=lambda t: abs(parse_key(t)[1] - q) + abs(parse_key(t)[2] - k))

    def lookup(self, key):
        """A copy of nearest(key)'s config, the cache's before the shipped one; None if the family is unknown."""
        found = self.nearest(key)
        if found is None:
            return None
        return dict(self.cached[found] if found in self.cached else self.shipped[found])


_TABLES = {}   # GPU name -> VarlenTable
_CHOSEN = {}   # (GPU name, key) -> config: a repeat call costs one key and one dict lookup
_NAMES = {}    # torch.device -> GPU name


def device_name(device):
    if device not in _NAMES:
        _NAMES[device] = torch.cuda.get_device_name(device)
    return _NAMES[device]


def table_for(name):
    if name not in _TABLES:
        _TABLES[name] = VarlenTable(name)
    return _TABLES[name]


def forget():
    """Drop the tables and choices read so far (after a table file changed, and in tests)."""
    _TABLES.clear()
    _CHOSEN.clear()
    _NAMES.clear()


def launch_config(q, max_seqlen_q, max_seqlen_k, causal=False, window=None):
    """The kernel's config for a call on q's GPU: the table's for this key (or its nearest), else
    fixed_config; None under the interpreter (the kernel's own small default)."""
    if runtime.INTERPRET:
        return None
    key = tuning_key(q.shape[-1], q.dtype, causal, window, max_seqlen_q, max_seqlen_k)
    name = device_name(q.device)
    memo = (name, key)
    cfg = _CHOSEN.get(memo)
    if cfg is None:
        cfg = _CHOSEN[memo] = table_for(name).lookup(key) or fixed_config(q.shape[-1])
    return dict(cfg)
