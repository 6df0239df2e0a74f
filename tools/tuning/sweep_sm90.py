"""Times the sm90 kernel with each cap on the tile width forced (FASTLAUNCH_SM90_WCAP=W, a compiled width;
the planner then cuts each group under it), with whole, split or reduced tiles forced (FASTLAUNCH_SM90_SHARE;
split:S cuts the steps into S CTAs per tile instead of one per SM; reduce:S each tile into S parts summed by
the reduce kernel), with half tiles (64 B rows) never or always where
allowed (FASTLAUNCH_SM90_HALF=0/1), with the narrow build (a narrower wgmma where a group's tiles hold few
rows) never or always where allowed (FASTLAUNCH_SM90_NARROW=0/1), with the mid build (the widest tiles' wgmma at
N = 176 where each holds at most that many rows) never or always where it fits (FASTLAUNCH_SM90_MID=0/1), with the
skinny kernel (CUDA cores, for
groups of a few rows) never or always where allowed (FASTLAUNCH_SM90_SKINNY=0/1; skinny:1:P also its K split into
P parts, FASTLAUNCH_SM90_SKINNY_SPLIT=P; skinny:1:P:L also L lanes per B row, FASTLAUNCH_SM90_SKINNY_LANES=L,
with P = 0 the planner's split), on the device schedule wherever it fits or never (FASTLAUNCH_SM90_ROWS=1/0:
kernels/sm90/plan/row_plan.h; the timed calls repeat, so by default they run the plan; rows:1:W with tiles of at
most W rows, FASTLAUNCH_SM90_WCAP=W), with the direct-A kernels (one launch where every tile is narrow) never or
where allowed (FASTLAUNCH_SM90_DIRECT=0/1) and with the planner's choice, each mode in
its own process, after a
correctness check on a few test shapes and on each timed shape; then the planner's choice with only the A
conversion or only the GEMM launched (FASTLAUNCH_SM90_ONLY; those results are wrong). Mode `cublas` times
torch's fp16 GEMM per group on operands of the same sizes. Shapes: the benchmark shapes, the task's test
shapes, or the hand-over set (one group of M = 16, 64, 128 or 192 rows, N = 1024, K = 4096: with
share:split:S, what a split tile's partial sums cost by its valid rows), or the slow set (two single groups
with few tiles and a long K that random draws found slower than cuBLAS), or the long-K set (random draws
the planner ran on half tiles with a long K), or the alignment set (random draws with N not a multiple of
8, each beside the same shape with N rounded up to one), or the far set (random draws far over their
estimate or slower than cuBLAS, the first three beside their N-rounded twins), or the rows set (one group of
40-128 rows, N = 16384, K = 7168: A boxes reaching past the group's rows), or the decode set (launches of
groups of 1-32 rows: the narrow build's target), or random:SEED (the 8 random shapes of that seed). Prints one table (the data behind kernels/sm90/plan/planner.h's cost model); --json also writes it.

With --shape G:M:N:K (as benchmarks/bench_kernels.py reads it; repeatable) the shapes given replace the set's,
and --align8 adds each one's twin with every N rounded up to a multiple of 8.

python tools/tuning/sweep_sm90.py [--set bench|tests|hand|slow|longk|any|far|rows|decode|random:SEED] [--shape G:M:N:K ...]
                           [--align8] [--json FILE] [mode ...]
  (modes: auto, cap:W, share:whole, share:split, share:split:S, share:reduce, share:reduce:S, half:0, half:1,
  narrow:0, narrow:1, mid:0, mid:1, skinny:0, skinny:1, skinny:1:P, skinny:1:P:L, rows:0, rows:1, rows:1:W,
  direct:0, direct:1, only:convert, only:gemm, cublas; default: all but split:S, reduce:S, skinny, rows:1:W, direct and
  cublas)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)  # the package of this clone
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))  # bench_kernels (--shape's reader)
from fastlaunch import shapes as S  # noqa: E402

HAND_SHAPES = [(1, [m], [1024], [4096]) for m in (16, 64, 128, 192)]
# single groups with few tiles and a long K, slower than cuBLAS in random draws (seed 255658716)
SLOW_SHAPES = [(1, [23], [409], [3392]), (1, [289], [1632], [1600])]
# random draws (seeds 255658716 and 1-10) on which the planner took half tiles with a long K, measured
# up to ~2x their estimate per K step (docs/history/sm90_kernel_notes.md): the data for
# refitting the half tiles' cost against reduced and split tiles
LONGK_SHAPES = [(1, [289], [1632], [1600]), (1, [464], [192], [1536]), (2, [193, 382], [400, 258], [512, 1728]),
                (3, [21, 301, 438], [1701, 488, 182], [384, 3136, 2752]),
                (3, [238, 156, 400], [63, 263, 653], [384, 2496, 256]),
                (6, [346, 305, 55, 41, 30, 206], [413, 190, 510, 834, 1116, 292],
                 [2432, 2560, 2368, 3328, 1280, 768]),
                (4, [380, 385, 130, 198], [180, 349, 561, 1014], [1728, 3328, 256, 3776]),
                (3, [59, 341, 358], [1227, 371, 694], [2560, 64, 1728])]

# random draws whose N are not multiples of 8 (C rows stored by the kernels compiled for any alignment),
# each beside the same shape with every N rounded up to a multiple of 8 (the same tiles): what storing
# unaligned C rows costs each kind of plan
ANY_BASES = [(1, [316], [1613], [1408]), (1, [393], [530], [1728]), (2, [168, 403], [1518, 2006], [256, 3904]),
             (3, [59, 263, 24], [1465, 1656, 75], [3456, 3008, 3136]),
             (6, [461, 110, 86, 43, 502, 367], [450, 1319, 958, 1044, 1261, 916], [1472, 3904, 64, 2688, 2816, 2880])]


def aligned8(shape):
    """`shape` with every N rounded up to a multiple of 8 (C rows 16-byte aligned; the same tiles)."""
    g, ms, ns, ks = shape
    return (g, ms, [-(-n // 8) * 8 for n in ns], ks)


def with_twins(bases):
    """Each shape of `bases` followed by its aligned8 twin."""
    return [x for b in bases for x in (b, aligned8(b))]


ANY_SHAPES = with_twins(ANY_BASES)


# random draws of seed 20261201 (benchmarks/bench_kernels.py --random 40) that ran far over their plan's estimate
# (G=7 448,..: 89.4 us against 35.2 estimated) or slower than cuBLAS (505 x 1552 x 2752: 17.6 against 12.7),
# each beside the same shape with every N rounded up to a multiple of 8
FAR_BASES = [(7, [448, 499, 512, 135, 503, 371, 398], [1574, 1945, 1817, 997, 1119, 1687, 1443],
              [64, 3392, 3456, 2496, 640, 704, 3648]),
             (7, [198, 443, 254, 244, 405, 381, 256], [1334, 523, 1450, 1202, 330, 915, 1506],
              [320, 2176, 192, 2368, 2496, 2944, 3200]),
             (6, [260, 492, 392, 287, 419, 460], [1582, 1911, 1751, 523, 276, 58], [960, 128, 2944, 4032, 2304, 960]),
             (1, [505], [1552], [2752])]
FAR_PAIRS = 3  # the first three beside their twins
FAR_SHAPES = with_twins(FAR_BASES[:FAR_PAIRS]) + FAR_BASES[FAR_PAIRS:]
# One group of 40-128 rows over 128 tiles of a long K: every tile's A box
# reaches past the group's rows; before the workspace's padding rows, past the tensor map too.
ROWS_SHAPES = [(1, [m], [16384], [7168]) for m in (40, 64, 96, 128)]
# Decode-like launches: groups of 1-32 rows (tokens routed to each
# expert), the benchmarks' N and K; their time is the B bytes and their dequantisation.
DECODE_SHAPES = [(8, [1] * 8, [4096] * 8, [7168] * 8), (8, [16] * 8, [4096] * 8, [7168] * 8),
                 (8, [1, 3, 7, 12, 18, 24, 29, 32], [7168] * 8, [2048] * 8), (32, [8] * 32, [2048] * 32, [7168] * 32),
                 (1, [4], [7168], [2048])]


def shape_sets():
    """--set's choices: name -> (shapes, column names)."""
    def twin_names(shapes):
        return [f"{short(x)} N%8{'=0' if i % 2 else '>0'}" for i, x in enumerate(shapes)]

    def short(shape):
        g, ms, ns, ks = shape
        return f"{ms[0]}x{ns[0]}x{ks[0]}" if g == 1 else f"G={g} M={ms[0]},.."

    return {"bench": (S.BENCH_SHAPES, [f"bench {i + 1}" for i in range(len(S.BENCH_SHAPES))]),
            "tests": (S.TEST_SHAPES, [f"test {i}" for i in range(len(S.TEST_SHAPES))]),
            "hand": (HAND_SHAPES, [f"M={ms[0]}" for _g, ms, _n, _k in HAND_SHAPES]),
            "slow": (SLOW_SHAPES, [short(x) for x in SLOW_SHAPES]),
            "longk": (LONGK_SHAPES, [short(x) for x in LONGK_SHAPES]),
            "any": (ANY_SHAPES, twin_names(ANY_SHAPES)),
            "rows": (ROWS_SHAPES, [f"M={ms[0]}" for _g, ms, _n, _k in ROWS_SHAPES]),
            "decode": (DECODE_SHAPES, [f"G={g} M={ms[0]}{'..' + str(ms[-1]) if ms[-1] != ms[0] else ''} "
                                       f"{ns[0]}x{ks[0]}" for g, ms, ns, ks in DECODE_SHAPES]),
            "far": (FAR_SHAPES, twin_names(FAR_SHAPES[:2 * FAR_PAIRS]) + [short(x) for x in FAR_SHAPES[2 * FAR_PAIRS:]])}


def resolve_set(shape_set):
    """(shapes, column names) of a --set: one of shape_sets() or random:SEED (the 8 random shapes of that
    seed, as benchmarks/bench_kernels.py --random 8 --seed SEED draws them)."""
    if shape_set.startswith("random:"):
        seed = shape_set.split(":", 1)[1]
        if not seed.isdigit():
            raise SystemExit(f"--set {shape_set}: expected random:SEED with SEED a non-negative integer")
        shapes = S.random_shapes(8, int(seed))
        return shapes, [f"r{i} G={g} M={ms[0]}{',..' if g > 1 else ''}" for i, (g, ms, _n, _k) in enumerate(shapes)]
    sets = shape_sets()
    if shape_set not in sets:
        raise SystemExit(f"--set {shape_set}: expected one of {', '.join(sets)} or random:SEED")
    return sets[shape_set]


def given_shapes(texts, align8=False):
    """(shapes, column names) of --shape texts; with align8 each followed by its N-rounded-to-8 twin."""
    from bench_kernels import parse_shape, shape_arg
    shapes = [parse_shape(t) for t in texts]
    if align8:
        shapes = with_twins(shapes)
    names = [shape_arg(x) if len(shape_arg(x)) <= 24 else shape_arg(x)[:21] + "..." for x in shapes]
    if align8:
        names = [n + (" N%8=0" if i % 2 else " (as given)") for i, n in enumerate(names)]
    return shapes, names


WIDTHS = (128, 192)  # kernels/sm90/plan/planner.h kWidths (fastlaunch._C.tile_widths); a cap must be one of them
MODES = {"auto": "planner", **{f"cap:{w}": f"widths <= {w}" for w in WIDTHS},
         "share:whole": "whole tiles only", "share:split": "split tiles only",
         "share:reduce": "reduced tiles where allowed",
         "half:0": "no half tiles", "half:1": "half tiles where allowed",
         "narrow:0": "no narrow build", "narrow:1": "narrow build where allowed",
         "mid:0": "no mid build", "mid:1": "mid build where it fits",
         "skinny:0": "no skinny kernel", "skinny:1": "skinny kernel where allowed",
         "rows:0": "no device schedule", "rows:1": "device schedule where it fits",
         "direct:0": "no direct-A kernels", "direct:1": "direct-A kernels where allowed",
         "only:convert": "planner, A conversion only", "only:gemm": "planner, GEMM only"}


def describe(mode):
    """The table's description of `mode`."""
    if mode.startswith("share:split:"):
        return f"split tiles, {mode.rsplit(':', 1)[1]} CTAs per tile"
    if mode.startswith("share:reduce:"):
        return f"reduced tiles, {mode.rsplit(':', 1)[1]} parts per tile"
    if mode.startswith("skinny:1:"):
        split, _, lanes = mode[len("skinny:1:"):].partition(":")
        parts = "the planner's K split" if split == "0" else f"K in {split} parts"
        return f"skinny kernel where allowed, {parts}" + (f", {lanes} lanes per row" if lanes else "")
    if mode.startswith("rows:1:"):
        return f"device schedule where it fits, widths <= {mode.rsplit(':', 1)[1]}"
    if mode == "cublas":
        return "cuBLAS fp16 per group"
    return MODES.get(mode, "?")


CHILD = r"""
import json, sys, torch, fastlaunch
from fastlaunch import reference as R
from fastlaunch import shapes as S
from fastlaunch.timing import device_us, fp16_gemms, l2_flush_buffer
mode, shapes = sys.argv[1], json.loads(sys.argv[2])
ok = True
for shape in S.TEST_SHAPES[3:5] + [(2, [1, 300], [129, 77], [64, 448])]:
    g, ms, ns, ks = shape
    d = R.generate_input(ms, ns, ks, g, 5, device="cuda")
    ref = R.ref_kernel(R.clone_outputs(d)); R.poison(d)
    ok &= R.check(fastlaunch.fast_launch(d), ref)[0]
flush = l2_flush_buffer()
times = []
for i, (g, ms, ns, ks) in enumerate(shapes):
    if mode == "cublas":
        times.append(device_us(fp16_gemms(ms, ns, ks)[0], flush))
        continue
    sets = [R.generate_input(ms, ns, ks, g, 100 + j, device="cuda") for j in range(2)]
    ref = R.ref_kernel(R.clone_outputs(sets[0])); R.poison(sets[0])
    ok &= R.check(fastlaunch.fast_launch(sets[0]), ref)[0]
    it = iter(range(1 << 30))
    times.append(device_us(lambda: fastlaunch.fast_launch(sets[next(it) % 2]), flush))
print(json.dumps({"ok": bool(ok), "us": times}))
"""


def mode_env(mode):
    """The environment of a child process run in `mode` (auto, cap:W, share:whole|split|split:S|reduce|reduce:S,
    half:0|1, narrow:0|1, mid:0|1, skinny:0|1|1:P|1:P:L, rows:0|1|1:W, direct:0|1, only:convert|gemm; others, such as
    cublas, leave the settings unset)."""
    env = dict(os.environ)
    for k in ("FASTLAUNCH_SM90_WCAP", "FASTLAUNCH_SM90_ONLY", "FASTLAUNCH_SM90_SHARE", "FASTLAUNCH_SM90_HALF",
              "FASTLAUNCH_SM90_NARROW", "FASTLAUNCH_SM90_MID", "FASTLAUNCH_SM90_SKINNY", "FASTLAUNCH_SM90_SKINNY_SPLIT",
              "FASTLAUNCH_SM90_SKINNY_LANES", "FASTLAUNCH_SM90_ROWS", "FASTLAUNCH_SM90_DIRECT"):
        env.pop(k, None)
    kind, _, value = mode.partition(":")
    if kind == "skinny" and value.startswith("1:"):
        split, _, lanes = value[2:].partition(":")
        value = "1"
        if split != "0":
            env["FASTLAUNCH_SM90_SKINNY_SPLIT"] = split
        if lanes:
            env["FASTLAUNCH_SM90_SKINNY_LANES"] = lanes
    if kind == "rows" and value.startswith("1:"):
        env["FASTLAUNCH_SM90_WCAP"] = value[2:]
        value = "1"
    var = {"share": "FASTLAUNCH_SM90_SHARE", "only": "FASTLAUNCH_SM90_ONLY", "cap": "FASTLAUNCH_SM90_WCAP",
           "half": "FASTLAUNCH_SM90_HALF", "narrow": "FASTLAUNCH_SM90_NARROW", "mid": "FASTLAUNCH_SM90_MID",
           "skinny": "FASTLAUNCH_SM90_SKINNY", "rows": "FASTLAUNCH_SM90_ROWS",
           "direct": "FASTLAUNCH_SM90_DIRECT"}.get(kind)
    if var:
        env[var] = value
    return env


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sets = shape_sets()
    p.add_argument("--set", default="bench", help=f"{', '.join(sets)} or random:SEED")
    p.add_argument("--shape", action="append", default=[], help="G:M:N:K (lists comma-separated), instead of --set")
    p.add_argument("--align8", action="store_true", help="with --shape: also each shape with N rounded up to 8")
    p.add_argument("--json", help="also write the shapes, modes and times (us) to this file")
    p.add_argument("modes", nargs="*")
    args = p.parse_args(argv)
    if args.shape:
        shapes, names = given_shapes(args.shape, args.align8)
    else:
        shapes, names = resolve_set(args.set)
    rows = []
    for m in args.modes or [m for m in MODES if not m.startswith(("skinny", "direct"))]:
        out = subprocess.run([sys.executable, "-c", CHILD, m, json.dumps(shapes)], env=mode_env(m), capture_output=True,
                             text=True, timeout=600)
        if out.returncode:
            print(f"mode {m}: failed\n{out.stderr[-2000:]}")
            continue
        rows.append((m, json.loads(out.stdout.strip().splitlines()[-1])))
    print("| mode | variant | correct | " + " | ".join(names) + " | geomean us |")
    print("|---|---|---|" + "---|" * (len(names) + 1))
    for m, r in rows:
        us = r["us"]
        correct = "-" if m == "cublas" else r["ok"]
        print(f"| {m} | {describe(m)} | {correct} | " + " | ".join(f"{u:.1f}" for u in us) +
              f" | {statistics.geometric_mean(us):.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"set": args.set, "shapes": shapes, "names": names,
                       "modes": {m: r for m, r in rows}}, f, indent=1)


if __name__ == "__main__":
    main()
