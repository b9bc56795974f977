"""Where `fa2.attention` runs the Gluon kernel instead of chapter 6's: a shipped table of measured shape families.

    fa2/configs/<GPU name>.gluon.json   {"device", "command", "torch", "triton", "source", "others", "threshold",
                                         "configs": {key: config}, "families": [...]}
    family: {"D", "dtype", "causal", "N", "BH", "rung", "config", "fa2_ms", "provider", "gluon_ms", "speedup", ...}

There is one family per shape of the reference sweep (B·H = "BH" heads in all, N_Q = N_KV = "N") timed in one run
of ``python gpu/gluon_sweep.py OUT SECONDS NAMES reference fa2`` on that GPU ("source"), with "rung" and "config"
set where the fastest Gluon config beat chapter 6's kernel by at least ``threshold`` (time ratio) with its output
checked against SDPA FLASH, and the win held up against the other committed runs that timed chapter 6's kernel
at that shape ("others"; see build_families); None elsewhere. Interleaved-rounds runs (gpu/money_ab.py) decide
the shapes they timed, and a shape only they timed is a family of its own. Only configs that passed
gpu/gluon_check.py's fp64 check on every case (book/results/gluon_check.csv) may be chosen.
``python -m fa2.gluon.dispatch CSV OUT_JSON [OTHER_CSV ...]`` builds the table.

A call is dispatched when everything the measurement covered holds -- an sm_90 GPU, a Triton with the Gluon API,
fp16/bf16, D 64 or 128, N_Q == N_KV, as many KV heads as query heads, a positive scale, TMA-compatible tensors --
and the nearest measured shape (log distance in N and in B·H, same D, dtype and causal; no farther than a factor
of 2 in either) has a Gluon config. Everything else keeps chapter 6's kernel: the table never extrapolates past
the shapes it measured, and a shape between a Gluon win and a chapter-6 win goes to the nearer one.
"configs" repeats the Gluon families as {"gluon/D128/bf16/causal/N8192/BH256": {"rung": 4, ...}}, the form every
table under fa2/configs/ has. ``ENABLED = False`` (or the environment variable FA2_GLUON=0 at import) turns the
dispatch off. An H100 SXM reads the H200's prefill families (PREFILL_TABLE_OF, measured there);
FA2_GLUON_TABLE="NVIDIA H200" makes any other sm_90 GPU read the H200's table, windows included (table_device).
"""

import contextlib
import csv
import functools
import json
import math
import os
import statistics
import sys
from pathlib import Path

from fa2.chapters import autotune
from fa2.chapters.autotune import device_file_name
from fa2.varlen_configs import DTYPES

ENABLED = os.environ.get("FA2_GLUON", "1") != "0"
MAX_LOG2_DISTANCE = 1.0          # a call this far (a factor of 2) from a measured family's N or B·H is not covered
THRESHOLD = 1.03                 # chapter 6's time / the Gluon config's: listed only above this


def table_file_name(device_name):
    """'NVIDIA H200' -> 'NVIDIA_H200.gluon.json' (chapter 6's file name with a .gluon suffix)."""
    return device_file_name(device_name)[:-len(".json")] + ".gluon.json"


SHIPPED_DIR = autotune.SHIPPED_DIR   # fa2/configs/ (lookups call _shipped_dir(), which tests may redirect)


def _shipped_dir():
    """fa2/configs/, read where it is used (tests point autotune.SHIPPED_DIR at a folder of their own)."""
    return autotune.SHIPPED_DIR


@functools.lru_cache(maxsize=None)
def _table_at(path):
    return json.loads(path.read_text()) if path.exists() else {}


def _shipped_table(device_name):
    """The shipped table for this GPU, read once per file; {} when there is none."""
    return _table_at(_shipped_dir() / table_file_name(device_name))


# GPUs without a table of their own whose prefill calls read another GPU's families by default, each named with
# the run that measured it: the H100 SXM's headline sweep timed the H200's choices against chapter 6's kernel
# with the H100's own configs, every output checked (book/results/headline_h100.csv, gpu/new_gpu.sh). Their
# windowed calls keep chapter 10's kernel unless FA2_GLUON_TABLE says otherwise: those were not measured there.
PREFILL_TABLE_OF = {"NVIDIA H100 80GB HBM3": "NVIDIA H200"}


def table_device(q, prefill=True):
    """Whose shipped table a call on q's GPU reads: the GPU named by the environment variable FA2_GLUON_TABLE
    (e.g. "NVIDIA H200" on another sm_90 GPU: the same sm_90 code, checked on the H200, with the H200's ranking of
    the kernels, not one measured on this GPU; a name without a shipped table is an error), else that GPU's own,
    else for a prefill call the table PREFILL_TABLE_OF names for it."""
    import torch
    name = os.environ.get("FA2_GLUON_TABLE")
    if not name:
        own = torch.cuda.get_device_name(q.device.index)
        return PREFILL_TABLE_OF.get(own, own) if prefill and not _shipped_table(own) else own
    if not _shipped_table(name):
        shipped = sorted(path.name for path in _shipped_dir().glob("*.gluon.json"))
        raise ValueError(f"FA2_GLUON_TABLE={name!r}: there is no {table_file_name(name)} under fa2/configs/ "
                         f"(shipped: {', '.join(shipped)})")
    return name


def shipped_devices():
    """The GPUs that have a shipped table, by the name each table was measured on (its "device")."""
    names = [json.loads(path.read_text())["device"] for path in sorted(_shipped_dir().glob("*.gluon.json"))]
    return sorted(name for name in names if (_shipped_dir() / table_file_name(name)).exists())


def shipped_families(device_name):
    """The families of the shipped table for this GPU, [] when there is none."""
    return _shipped_table(device_name).get("families", [])


def _nearest(families, distances):
    """The family whose log2 distances (`distances(family)`: a tuple, or None for a family of another kind) sum
    least, each within MAX_LOG2_DISTANCE, a tie going to a family without a Gluon config; None when none is."""
    best, best_key = None, None
    for family in families:
        d = distances(family)
        if d is None or max(d) > MAX_LOG2_DISTANCE:
            continue
        key = (sum(d), family["rung"] is not None)
        if best is None or key < best_key:
            best, best_key = family, key
    return best


def _choice(family):
    """(rung, config) of a family that runs the Gluon kernel, else None."""
    if family is None or family["rung"] is None:
        return None
    return family["rung"], dict(family["config"])


def nearest_family(families, D, dtype, causal, N, BH):
    """The measured shape nearest to (N, B·H) among those of this D, dtype and causal (log distance, a tie going
    to a shape that stays on chapter 6's kernel), or None when none is within MAX_LOG2_DISTANCE in both."""
    return _nearest(families, lambda f: None if (f["D"], f["dtype"], f["causal"]) != (D, dtype, causal) else
                    (abs(math.log2(N / f["N"])), abs(math.log2(BH / f["BH"]))))


def gluon_choice(q, k, v, causal, scale, families):
    """(rung, config) for this call from `families`, or None (chapter 6's kernel). Shapes and flags only; a
    negative scale stays on chapter 6's kernel (the Gluon kernel's mask-free tiles take the row maximum of the raw
    scores and scale it afterwards, which is the maximum of the scaled scores only for scale > 0)."""
    if not _measured_kind(q, k, scale):
        return None
    B, H, N_Q, D = q.shape
    return _choice(nearest_family(families, D, DTYPES[q.dtype], bool(causal), N_Q, B * H))


def _measured_kind(q, k, scale):
    """Is the call of the kind every table measures: D 64 or 128, fp16/bf16, N_Q == N_KV, as many KV heads as
    query heads, a positive scale, not empty (an empty call has no distance to a measured shape)."""
    B, H, N_Q, D = q.shape
    return (D in (64, 128) and k.shape[2] == N_Q and k.shape[1] == H and q.dtype in DTYPES and scale > 0
            and B * H * N_Q > 0)


def choose(q, k, v, causal, scale):
    """gluon_choice against this GPU's shipped table, where the Gluon kernels can run at all (sm_90, Gluon API,
    TMA-compatible tensors); None elsewhere."""
    if not _can_run(q, k, v):
        return None
    return gluon_choice(q, k, v, causal, scale, shipped_families(table_device(q)))


# ----------------------------------------------------------------------------------------- sliding windows

def window_choice(q, k, v, causal, scale, left, right, softcap, windows):
    """(rung, config) for a windowed call from the table's "windows" families, or None (chapter 10's kernel).
    The Gluon kernel's window is flash-attn's (left, 0): a bounded left side, the causal diagonal on the right
    (causal, or right == 0 -- the same mask when N_Q == N_KV), no softcap. Beyond that the rules of gluon_choice
    hold, with the window's left size as a third distance: a measured family of the same D, dtype within a factor
    of 2 in N, B·H and left + 1."""
    if left < 0 or softcap > 0 or not (causal or right == 0) or not _measured_kind(q, k, scale):
        return None
    B, H, N_Q, D = q.shape
    return _choice(_nearest(windows, lambda f: None if (f["D"], f["dtype"]) != (D, DTYPES[q.dtype]) else (
        abs(math.log2(N_Q / f["N"])), abs(math.log2(B * H / f["BH"])),
        abs(math.log2((left + 1) / (f["window_left"] + 1))))))


def shipped_windows(device_name):
    """The window families of the shipped table for this GPU, [] when there are none."""
    return _shipped_table(device_name).get("windows", [])


def choose_window(q, k, v, causal, scale, left, right, softcap):
    """window_choice against this GPU's shipped table where the Gluon kernels can run (as choose)."""
    if not _can_run(q, k, v):
        return None
    return window_choice(q, k, v, causal, scale, left, right, softcap,
                         shipped_windows(table_device(q, prefill=False)))


def build_windows(rows, names, threshold=THRESHOLD):
    """The "windows" families of a `gpu/gluon_window.py sweep` run: per (D, dtype, N, B·H, window left), the
    fastest checked Gluon provider among `names` where it beats chapter 10's kernel ('fa2_ch10') by
    `threshold`, else rung None."""
    shapes = {}
    for row in rows:
        if row["check"] == "ok" and row["ms"]:
            key = (int(row["D"]), row["dtype"], int(row["N"]), int(row["B"]) * int(row["H"]),
                   int(row["window_left"]))
            shapes.setdefault(key, {})[row["provider"]] = float(row["ms"])
    families = []
    for (D, dtype, N, BH, left), times in sorted(shapes.items()):
        entry = dict(D=D, dtype=dtype, N=N, BH=BH, window_left=left, rung=None, config=None,
                     ch10_ms=times.get("fa2_ch10"))
        gluon = {p: ms for p, ms in times.items() if p in names}
        if "fa2_ch10" in times and gluon:
            best = min(gluon, key=gluon.get)
            speedup = times["fa2_ch10"] / gluon[best]
            entry.update(provider=best, gluon_ms=gluon[best], speedup=round(speedup, 4))
            if speedup >= threshold:
                entry.update(rung=names[best][0], config=names[best][1])
        families.append(entry)
    return families


def _can_run(q, k, v):
    """Can the Gluon kernels run on these tensors here: sm_90, the Gluon API, TMA-compatible, dispatch on."""
    from fa2 import gluon, runtime
    from fa2.chapters.fast import tma_compatible
    from fa2.validate import capability

    if not ENABLED or q.device.type != "cuda" or runtime.INTERPRET or capability(q.device.index) != (9, 0):
        return False
    return bool(gluon.available()[0]) and tma_compatible(q, k, v)


@contextlib.contextmanager
def disabled():
    """Plans made inside run chapter 6's kernel (to time it against the Gluon kernel; plans already cached for a
    signature keep the kernel they were made with)."""
    global ENABLED
    before, ENABLED = ENABLED, False
    try:
        yield
    finally:
        ENABLED = before


# ------------------------------------------------------------------------------------------- building a table

def _times(rows):
    """{(D, dtype, causal, N, B*H): {provider: ms}} of a benchmark CSV's checked rows (N_Q = N_KV, H = H_kv).
    Chapter 6's time is 'fa2': a run made with the dispatch on has it as 'fa2_ch6' (its 'fa2' rows may be the
    Gluon kernel) and then that is taken instead; a run without 'fa2_ch6' rows predates the dispatch."""
    shapes = {}
    with_ch6 = any(row["provider"] == "fa2_ch6" for row in rows)
    for row in rows:
        if row["check"] == "ok" and row["ms"] and row["Hkv"] == row["H"] and row["N_Q"] == row["N_KV"]:
            key = (int(row["D"]), row["dtype"], row["causal"] == "True", int(row["N_Q"]),
                   int(row["B"]) * int(row["H"]))
            provider = row["provider"]
            if with_ch6 and provider == "fa2":
                continue
            shapes.setdefault(key, {})["fa2" if provider == "fa2_ch6" else provider] = float(row["ms"])
    return shapes


def _medians(rows):
    """{(D, dtype, causal, N, B*H): {provider: median ms}} of an interleaved-rounds CSV (gpu/money_ab.py: every
    provider timed once per round, the order rotated). Chapter 6's kernel ('fa2_ch6') is 'fa2'; the run's 'fa2'
    rows (fa2.attention: whatever the table of the day chose) are left out."""
    times = {}
    for row in rows:
        if row["provider"] == "fa2" or not row["ms"]:
            continue
        key = (int(row["D"]), row["dtype"], row["causal"] == "True", int(row["N"]), int(row["B"]) * int(row["H"]))
        provider = "fa2" if row["provider"] == "fa2_ch6" else row["provider"]
        times.setdefault(key, {}).setdefault(provider, []).append(float(row["ms"]))
    return {key: {p: statistics.median(ms) for p, ms in found.items()} for key, found in times.items()}


def build_families(rows, names, threshold=THRESHOLD, others=(), interleaved=(), newer=()):
    """The table's entries from a gluon_sweep.py reference run's rows: every measured shape, with "rung" and
    "config" where the fastest Gluon provider among `names` ({provider: (rung, config)}, the fp64-checked configs)
    beats the run's 'fa2' row by `threshold`, and None elsewhere.

    `others`: the rows of other committed runs that timed chapter 6's kernel ('fa2') at some of the same shapes.
    A win must hold up against them too: the Gluon config's time must not exceed chapter 6's time in any of them,
    and where one of them timed the same config beside it, the config must be faster there as well. (One run's
    times move by a few per cent, now and then by ten: a single run's 3 % is not enough to switch kernels.)

    `interleaved`: the rows of interleaved-rounds runs (gpu/money_ab.py). Where they timed chapter 6's kernel and
    candidates at a shape, they decide it instead. Each run gives a candidate its speedup there (chapter 6's
    median / the candidate's); of the candidates timed in at least two of those runs (in one, where no candidate
    was timed in two), the one with the best median speedup over its runs ("interleaved_provider") runs there if
    its worst run's speedup ("interleaved_speedup"; "interleaved": the runs) is at least `threshold`, and chapter
    6's kernel otherwise, whatever the single run said. (Each run is its own baseline, so runs that timed different
    candidates can be pooled: a candidate added in later runs is not outranked by one that was merely timed more
    often.) Rounds that
    alternate the providers see the same clocks and temperatures, which a run of one provider after another
    (the H200 is power-bound under sustained attention) does not.

    `newer`: interleaved runs made after those, with candidates the older runs did not time: at the shapes where
    they timed chapter 6's kernel they decide in place of `interleaved` ("interleaved_newer": True); elsewhere
    the older runs still do.

    A shape that only interleaved runs timed (with chapter 6's kernel) is a family too ("interleaved_only": True,
    no single-run fields), decided by them: a measured point between the reference sweep's, where the nearest
    reference shape's config would otherwise be taken on trust (N = 1024 lies as near N = 512 as N = 2048)."""
    measured = _times(rows)
    other = [_times(r) for r in others]
    rounds = [_medians(r) for r in interleaved]
    newer_rounds = [_medians(r) for r in newer]
    families = []
    beyond = {key for r in rounds + newer_rounds for key, t in r.items() if "fa2" in t} - set(measured)
    for (D, dtype, causal, N, BH) in sorted(set(measured) | beyond):
        times = measured.get((D, dtype, causal, N, BH), {})
        entry = dict(D=D, dtype=dtype, causal=causal, N=N, BH=BH, rung=None, config=None, fa2_ms=times.get("fa2"))
        if (D, dtype, causal, N, BH) in beyond:
            entry.update(interleaved_only=True)
        gluon = {p: ms for p, ms in times.items() if p in names}
        if "fa2" in times and gluon:
            best = min(gluon, key=gluon.get)
            speedup = times["fa2"] / gluon[best]
            seen = [t for t in (o.get((D, dtype, causal, N, BH), {}) for o in other) if "fa2" in t]
            holds = all(gluon[best] <= t["fa2"] and (best not in t or t[best] < t["fa2"]) for t in seen)
            entry.update(provider=best, gluon_ms=gluon[best], speedup=round(speedup, 4), confirmed_by=len(seen))
            if speedup >= threshold and holds:
                entry.update(rung=names[best][0], config=names[best][1])
        key = (D, dtype, causal, N, BH)
        runs = [r[key] for r in newer_rounds if "fa2" in r.get(key, {})]
        if runs:
            entry.update(interleaved_newer=True)
        else:
            runs = [r[key] for r in rounds if "fa2" in r.get(key, {})]
        speedups = {p: [run["fa2"] / run[p] for run in runs if p in run] for p in names}
        most = max(map(len, speedups.values()), default=0)
        enough = {p: s for p, s in speedups.items() if s and len(s) >= min(2, most)}   # two runs, where any has
        if enough:
            chosen = max(enough, key=lambda p: statistics.median(enough[p]))   # best median over its runs
            worst = min(enough[chosen])
            entry.update(interleaved=len(runs), interleaved_provider=chosen,
                         interleaved_speedup=round(worst, 4), rung=None, config=None)
            if worst >= threshold:
                entry.update(rung=names[chosen][0], config=names[chosen][1])
        families.append(entry)
    return families


def family_key(family):
    """'gluon/D128/bf16/causal/N8192/BH256': a family as a key of the table's "configs" (the shape of chapter 6's
    and chapter 10's tables, which `fa2/configs/*.json` readers share)."""
    return (f"gluon/D{family['D']}/{family['dtype']}/{'causal' if family['causal'] else 'full'}/N{family['N']}/"
            f"BH{family['BH']}")


def configs_of(families):
    """{family key: {"rung", **config}} of the families that run the Gluon kernel."""
    return {family_key(f): dict(rung=f["rung"], **f["config"]) for f in families if f["rung"] is not None}


CHECKED = Path(__file__).resolve().parents[2] / "book" / "results" / "gluon_check.csv"
CHECK_CASES = 96                 # gpu/gluon_check.py check: 12 shapes x D 64/128 x fp16/bf16 x causal or not


def config_text(config):
    """A candidate config as gpu/gluon_check.py writes it in its config column: 'BLOCK_N=64 PINGPONG=1'."""
    return " ".join(f"{key}={int(value)}" for key, value in config.items())


def _sorted_text(text):
    """A config text with its KEY=VALUE items sorted: the check's command line may list them in another order."""
    return " ".join(sorted(text.split()))


def checked(path=CHECKED):
    """{(rung, config text)} of the configs that passed every one of gpu/gluon_check.py's fp64 cases in `path`:
    every run of the check that `path` holds for the config whole (CHECK_CASES rows each; a config checked again
    has two runs) and every row ok. A run cut short by its time limit, or one failure in any run, leaves it out."""
    cases = {}
    for row in csv.DictReader(open(path, newline="")):
        cases.setdefault((int(row["rung"]), _sorted_text(row["config"])), []).append(row["check"] == "ok")
    return {key for key, oks in cases.items() if oks and len(oks) % CHECK_CASES == 0 and all(oks)}


def candidates(checked_configs):
    """{provider name in a gluon_sweep.py CSV: (rung, config)} of the candidates that passed the fp64 check."""
    from fa2.gluon.candidates import CONFIGS
    return {f"gluon_{name}": (rung, config) for name, (rung, config) in CONFIGS.items()
            if (rung, _sorted_text(config_text(config))) in checked_configs}


def main(argv=None):
    """python -m fa2.gluon.dispatch CSV OUT_JSON [OTHER_CSV ...] [--interleaved AB_CSV ...] [--newer AB_CSV ...]:
    the table of a gluon_sweep.py reference run, its wins held up against the other runs' times of chapter 6's
    kernel, and the shapes that interleaved rounds (gpu/money_ab.py) timed decided by those (by the --newer ones
    where they timed the shape). A table made before has the rest."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--windows":
        return main_windows(*argv[1:])
    newer_paths = []
    if "--newer" in argv:
        at = argv.index("--newer")
        argv, newer_paths = argv[:at], [Path(p) for p in argv[at + 1:]]
    ab_paths = []
    if "--interleaved" in argv:
        at = argv.index("--interleaved")
        argv, ab_paths = argv[:at], [Path(p) for p in argv[at + 1:]]
    csv_path, out, other_paths = Path(argv[0]), Path(argv[1]), [Path(p) for p in argv[2:]]
    read = lambda path: list(csv.DictReader(open(path, newline="")))
    rows = read(csv_path)
    families = build_families(rows, candidates(checked()), others=[read(p) for p in other_paths],
                              interleaved=[read(p) for p in ab_paths], newer=[read(p) for p in newer_paths])
    previous = json.loads(out.read_text()) if out.exists() else {}
    table = dict(device=rows[0]["device"], command=rows[0]["command"], torch=rows[0]["torch"],
                 triton=rows[0]["triton"], source=csv_path.name, others=[p.name for p in other_paths],
                 interleaved=[p.name for p in ab_paths], interleaved_newer=[p.name for p in newer_paths],
                 threshold=THRESHOLD, configs=configs_of(families),
                 families=families)
    table.update({k: v for k, v in previous.items() if k.startswith("windows")})   # the window families stay
    out.write_text(json.dumps(table, indent=1) + "\n")
    listed = [f for f in families if f["rung"] is not None]
    print(f"{len(listed)} of {len(families)} measured shapes run the Gluon kernel -> {out}")
    for f in families:
        if "interleaved" in f:
            verdict = "Gluon" if f["rung"] is not None else "chapter 6's kernel"
            single = ("timed by them alone" if f.get("interleaved_only") else
                      f"one run: {f.get('speedup', math.nan):.4f}x")
            print(f"  D={f['D']} {f['dtype']} causal={f['causal']} N={f['N']} B*H={f['BH']}: "
                  f"{f['interleaved_provider']} {f['interleaved_speedup']:.4f}x chapter 6's kernel in the worst of "
                  f"{f['interleaved']} interleaved runs ({single}): {verdict}")
        elif "speedup" in f and (f["rung"] is not None or f["speedup"] >= THRESHOLD):
            verdict = "Gluon" if f["rung"] is not None else "kept on chapter 6 (not confirmed by the other runs)"
            print(f"  D={f['D']} {f['dtype']} causal={f['causal']} N={f['N']} B*H={f['BH']}: {f['provider']} "
                  f"{f['speedup']:.3f}x chapter 6's kernel: {verdict}")
    return 0


def main_windows(csv_path, table_path):
    """python -m fa2.gluon.dispatch --windows CSV TABLE_JSON: the table's "windows" families (and
    "windows_source") from a `gpu/gluon_window.py sweep` run, the rest of the table kept."""
    rows = list(csv.DictReader(open(csv_path, newline="")))
    windows = build_windows(rows, candidates(checked()))
    table = json.loads(Path(table_path).read_text())
    table.update(windows_source=Path(csv_path).name, windows_command=rows[0]["command"], windows=windows)
    Path(table_path).write_text(json.dumps(table, indent=1) + "\n")
    for f in windows:
        verdict = "Gluon" if f["rung"] is not None else "chapter 10's kernel"
        print(f"  D={f['D']} {f['dtype']} N={f['N']} B*H={f['BH']} left={f['window_left']}: "
              f"{f.get('provider')} {f.get('speedup', float('nan')):.3f}x chapter 10's kernel: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
