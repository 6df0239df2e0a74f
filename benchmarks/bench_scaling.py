"""How the kernel's device time scales with the rows per group, against cuBLAS and the floors, in one run.

The sweep: every (N, K) of --nk (default 4096:7168 and 2048:7168), every group count G of --g (default 1, 8, 64)
and every M rows per group of --m (default 1, 2, 4, ..., 8192), each of the G groups M x N x K. Per shape:
  fastlaunch   fastlaunch.fast_launch, checked once against the fp32 reference with its output poisoned (NaN)
  cuBLAS       fp16 on operands dequantised before timing (the dequantisation is not timed): for G = 1 one torch.mm;
               for G > 1 the faster of one torch.mm per group and one torch.bmm over all groups (cuBLAS's
               strided-batched GEMM: every group has M rows, so one batch holds them); the table names the one
  floors       the fp16 tensor-core time at the rate of an 8192^3 fp16 torch.mm and the NVFP4 bytes (A, B, scales,
               fp16 C) at the device copy rate, both measured in this run; "x floor" is over the larger of the two
Device time is taken as benchmarks/bench_kernels.py takes it, with its helpers: CUDA events around one call, the
L2 flushed before every timed call, the median of --reps calls that take --sets input sets in turn.

Many groups against one group: for every timed shape with G > 1 the run also times one group of G*M rows with
the same N and K (the same FLOPs, a G-th of the weights) and gives the ratio of the two times beside the ratio of
their floors. Shapes with G*M > --max-rows (default 65536) are skipped and listed. Each (G, N, K)'s weights (B)
are generated once per input set and shared by its shapes; A is generated per shape.

--quick: M in 1, 16, 128, 1024, 4096 and the first (N, K) only, 2 input sets, 20 timed calls (unless given).
--check-rows R: in groups of more than R rows, check R random rows against the reference (and every element for
NaN) instead of every row; the seed is printed.
--dram: also the DRAM bytes one call moves (all its kernels: the A conversion and the GEMM), read by Nsight Compute
(ncu, its dram__bytes_read/write counters, caches flushed before each kernel) in a child process per shape, against
the unique bytes (NVFP4 A and B, their scales, fp16 C): the column shows how often operands are read again from DRAM
for want of L2 hits. Needs ncu on the PATH; about 10 s per shape.
--dry-run (no GPU needed): lists the shapes the run would time and the skipped ones, generates one input of each
(G, N, K) with M = 1 on the CPU and checks that it unpacks.

python benchmarks/bench_scaling.py [--nk N:K ...] [--g G,G,..] [--m M,M,..] [--max-rows R] [--quick]
                                   [--dram] [--json out.json] [--png chart.png] [--dry-run]
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import csv
import io
import os
import shutil
import subprocess
import sys
from typing import NamedTuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this clone's package
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_kernels, beside this script

import torch

import fastlaunch
from bench_kernels import ceilings, dequantised
from fastlaunch import reference as R
from fastlaunch.shapes import flops, nvfp4_bytes
from fastlaunch.timing import device_us_sets, l2_flush_buffer, load_pyplot, source_commit

M_VALUES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
G_VALUES = (1, 8, 64)
NK_PAIRS = ((4096, 7168), (2048, 7168))
QUICK_M = (1, 16, 128, 1024, 4096)
A_SEED, B_SEED, CHECK_SEED = 7000, 8000, 9000  # input set j: A from A_SEED + j, B from B_SEED + j
BIG_M = 256  # the summary's "prefill" rows per group
NEAR_FLOOR = 1.15  # the summary's "near the floor"


class Plan(NamedTuple):
    timed: list  # (G, M, N, K) to time, ordered by (N, K) as given, then G, then M
    extra: set  # those of them timed only as the one group of a many-vs-one pair
    skipped: list  # (G, M, N, K) of the sweep with G*M over --max-rows
    pairs: list  # ((G, M, N, K), (1, G*M, N, K)) for every timed shape with G > 1


def int_list(text: str) -> list:
    """"1,8,64" -> [1, 8, 64], each at least 1, sorted, without repeats."""
    try:
        vals = sorted({int(x) for x in text.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if vals[0] < 1:
        raise argparse.ArgumentTypeError(f"expected integers >= 1, got {text!r}")
    return vals


def nk_pair(text: str) -> tuple:
    """"4096:7168" -> (4096, 7168); N >= 1, K a positive multiple of 64."""
    try:
        n, k = (int(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N:K, got {text!r}") from None
    if n < 1 or k < 64 or k % 64:
        raise argparse.ArgumentTypeError(f"expected N >= 1 and K a positive multiple of 64, got {text!r}")
    return n, k


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nk", type=nk_pair, action="append", metavar="N:K",
                   help="an (N, K) pair, repeatable (default: 4096:7168 and 2048:7168; with --quick the first)")
    p.add_argument("--g", type=int_list, metavar="G,G,..", help="group counts (default: 1,8,64)")
    p.add_argument("--m", type=int_list, metavar="M,M,..",
                   help="rows per group (default: 1,2,4,...,8192; with --quick 1,16,128,1024,4096)")
    p.add_argument("--max-rows", type=int, default=65536, metavar="R",
                   help="skip shapes with more than R rows in all (G*M; default 65536)")
    p.add_argument("--sets", type=int, help="input sets taken in turn by the timed calls (default 3; --quick 2)")
    p.add_argument("--reps", type=int, help="timed calls per median (default 30; --quick 20)")
    p.add_argument("--check-rows", type=int, default=0, metavar="R",
                   help="check R random rows of each group of more than R rows (default 0: every row)")
    p.add_argument("--quick", action="store_true", help="a subset: fewer M values, the first (N, K), fewer calls")
    p.add_argument("--dram", action="store_true",
                   help="also the DRAM bytes per call, read by ncu in a child process per shape (ncu on the PATH)")
    p.add_argument("--dram-child", nargs=4, type=int, metavar=("G", "M", "N", "K"), help=argparse.SUPPRESS)
    p.add_argument("--json")
    p.add_argument("--png")
    p.add_argument("--dry-run", action="store_true",
                   help="no GPU needed: list the shapes, generate one input of each (G, N, K) on the CPU, unpack it")
    args = p.parse_args(argv)
    args.nk = list(dict.fromkeys(args.nk)) if args.nk else list(NK_PAIRS[:1] if args.quick else NK_PAIRS)
    args.g = args.g or list(G_VALUES)
    args.m = args.m or list(QUICK_M if args.quick else M_VALUES)
    args.sets = args.sets if args.sets is not None else (2 if args.quick else 3)
    args.reps = args.reps if args.reps is not None else (20 if args.quick else 30)
    for name in ("max_rows", "sets", "reps"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')}: expected an integer >= 1, got {getattr(args, name)}")
    if args.check_rows < 0:
        p.error(f"--check-rows: expected an integer >= 0, got {args.check_rows}")
    return args


def plan(args) -> Plan:
    """The shapes of the sweep the run times, the one-group shapes of the many-vs-one pairs, the skipped ones."""
    sweep, skipped, pairs = set(), [], []
    for n, k in args.nk:
        for g in args.g:
            for m in args.m:
                if g * m > args.max_rows:
                    skipped.append((g, m, n, k))
                    continue
                sweep.add((g, m, n, k))
                if g > 1:
                    pairs.append(((g, m, n, k), (1, g * m, n, k)))
    extra = {one for _many, one in pairs} - sweep
    order = {nk: i for i, nk in enumerate(args.nk)}
    timed = sorted(sweep | extra, key=lambda s: (order[s[2], s[3]], s[0], s[1]))
    return Plan(timed, extra, skipped, pairs)


def blocks(shapes) -> list:
    """The distinct (G, N, K) of `shapes`, in their order: each block shares its weights."""
    return list(dict.fromkeys((g, n, k) for g, _m, n, k in shapes))


def full(shape) -> tuple:
    """(G, M, N, K) as fastlaunch.shapes writes a shape: (G, [M] * G, [N] * G, [K] * G)."""
    g, m, n, k = shape
    return g, [m] * g, [n] * g, [k] * g


def describe(shape) -> str:
    g, m, n, k = shape
    return f"G={g} M={m} N={n} K={k}"


def print_plan(p: Plan, args) -> None:
    print(f"{len(p.timed)} shapes to time ({len(p.extra)} of them only as the one group of G*M rows of a "
          f"many-vs-one pair; *), {len(p.pairs)} many-vs-one pairs; {args.sets} input sets, {args.reps} timed "
          f"calls per median:")
    for g, n, k in blocks(p.timed):
        ms = [f"{m}{'*' if (g, m, n, k) in p.extra else ''}" for g2, m, n2, k2 in p.timed if (g2, n2, k2) == (g, n, k)]
        print(f"  N={n} K={k} G={g}: M = {' '.join(ms)}")
    if p.skipped:
        print(f"skipped ({len(p.skipped)}, G*M > --max-rows {args.max_rows}):")
        for g, n, k in blocks(p.skipped):
            ms = [str(m) for g2, m, n2, k2 in p.skipped if (g2, n2, k2) == (g, n, k)]
            print(f"  N={n} K={k} G={g}: M = {' '.join(ms)}")
    else:
        print(f"skipped: none (no shape has G*M > --max-rows {args.max_rows})")


# ------------------------------------------------------------------------------------------------------- inputs

def b_sides(g: int, n: int, k: int, sets: int, device) -> list:
    """Each input set's weights for (G, N, K): generate_input's output with one row of A per group, of which only
    the B side is used."""
    return [R.generate_input(1, n, k, g, seed=B_SEED + j, device=device) for j in range(sets)]


def a_sides(g: int, m: int, k: int, sets: int, device) -> list:
    """Each input set's A for G groups of M x K: generate_input's output with one row of B per group, of which only
    the A side is used."""
    return [R.generate_input(m, 1, k, g, seed=A_SEED + j, device=device) for j in range(sets)]


def compose(a_side, b_side, device):
    """The contract's input tuple with A (and its scales) from `a_side`, B (and its scales) from `b_side` (two
    generate_input outputs of the same G and K) and fresh C tensors of random normals, strides (N, 1, M*N)."""
    abc, sf, sf_r, sizes = [], [], [], []
    for i in range(len(a_side[0])):
        m, _, k, _ = a_side[3][i]
        _, n, kb, _ = b_side[3][i]
        if k != kb:
            raise ValueError(f"group {i}: A has K={k}, B has K={kb}")
        c = torch.randn((1, m, n), dtype=torch.float16, device=device).permute(1, 2, 0)
        abc.append((a_side[0][i][0], b_side[0][i][1], c))
        sf.append((a_side[1][i][0], b_side[1][i][1]))
        sf_r.append((a_side[2][i][0], b_side[2][i][1]))
        sizes.append((m, n, k, 1))
    return abc, sf, sf_r, sizes


def check_output(data, out, rows: int, seed: int):
    """(ok, message, what was checked) for fastlaunch's output `out` of input `data` against the fp32 reference:
    every row when rows == 0 or no group has more than `rows` rows; else, in each group of more than `rows` rows,
    `rows` random rows (drawn from `seed`; a mismatch's indices count the checked rows) and every element for NaN
    (an element the kernel did not write keeps the poison)."""
    sizes = data[3]
    if rows == 0 or all(m <= rows for m, _n, _k, _l in sizes):
        ok, msg = R.check(out, R.ref_kernel(R.clone_outputs(data)))
        return ok, msg, "every row"
    checked = f"{rows} random rows of each group of more (seed {seed}), every element for NaN"
    gen = torch.Generator().manual_seed(seed)
    got, ref = [], []
    for g, ((a, b, _c), (sfa, sfb), o, (m, _n, _k, _l)) in enumerate(zip(data[0], data[1], out, sizes)):
        nan = int(torch.isnan(o).sum())
        if nan:
            return False, f"group {g}: {nan} of {o.numel()} elements are NaN (not written)", checked
        idx = torch.randperm(m, generator=gen)[:rows].sort().values if m > rows else torch.arange(m)
        a_rows = a.view(torch.uint8)[idx.to(a.device)]
        sfa_rows = sfa.view(torch.uint8)[idx.to(sfa.device)].view(sfa.dtype)
        ref.append((R.dequantize(a_rows, sfa_rows) @ R.dequantize(b, sfb).T).to(torch.float16))
        got.append(o[idx.to(o.device), :, 0])
    ok, msg = R.check(got, ref)
    return ok, msg, checked


# ------------------------------------------------------------------------------------------------------- timing

CUBLAS_AGREES = 1e-2  # cuBLAS's fp16 result and fastlaunch's within this relative (Frobenius) error


def relative_error(x: torch.Tensor, ref: torch.Tensor) -> float:
    """||x - ref|| / ||ref|| over all elements, in fp32."""
    ref = ref.float()
    return float((x.float() - ref).norm() / ref.norm().clamp_min(1e-30))


def bench_shape(shape, b_set, b16, flush, peak, bw, args, device="cuda") -> dict:
    """One shape's row: `b_set` its block's weight sets (b_sides), `b16` each set's B dequantised, [G, N, K]."""
    g, m, n, k = shape
    a_set = a_sides(g, m, k, args.sets, device)
    inputs = [compose(a_side, b_side, device) for a_side, b_side in zip(a_set, b_set)]
    R.poison(inputs[0])
    ok, msg, checked = check_output(inputs[0], fastlaunch.fast_launch(inputs[0]), args.check_rows, CHECK_SEED)
    t_fl = device_us_sets(lambda i: fastlaunch.fast_launch(inputs[i]), args.sets, flush, args.reps)
    fl_out = torch.stack([c[:, :, 0] for _a, _b, c in inputs[0][0]])  # set 0's (checked) result, [G, M, N]
    del inputs

    a16 = [torch.stack(dequantised(a_side)[0]) for a_side in a_set]  # [G, M, K] fp16 per set
    del a_set
    outs = [torch.empty(g, m, n, dtype=torch.float16, device=device) for _ in range(args.sets)]
    # each group's operands and output as views made once, so the timed loop runs nothing but the G torch.mm calls
    views = [list(zip(x.unbind(0), y.unbind(0), o.unbind(0))) for x, y, o in zip(a16, b16, outs)]

    def per_group(i):
        for x, y, o in views[i]:
            torch.mm(x, y.t(), out=o)

    def batched(i):
        torch.bmm(a16[i], b16[i].transpose(1, 2), out=outs[i])

    # each cuBLAS path's result of set 0 against fastlaunch's: the anchor computes the same product
    per_group(0)
    err = relative_error(outs[0], fl_out)
    t_loop = device_us_sets(per_group, args.sets, flush, args.reps)
    t_bmm = float("nan")
    if g > 1:
        batched(0)
        err = max(err, relative_error(outs[0], fl_out))
        t_bmm = device_us_sets(batched, args.sets, flush, args.reps)
    t_cub = min(t_loop, t_bmm) if g > 1 else t_loop
    path = "bmm" if t_bmm < t_loop else ("mm" if g == 1 else "mm per group")
    s = full(shape)
    fl_floor = flops(s) / peak * 1e6
    by_floor = nvfp4_bytes(s) / bw * 1e6
    floor = max(fl_floor, by_floor)
    return {
        "g": g, "m": m, "n": n, "k": k, "ok": ok, "message": msg, "checked": checked,
        "fastlaunch_us": t_fl, "tflops": flops(s) / (t_fl * 1e-6) / 1e12,
        "floor_compute_us": fl_floor, "floor_bytes_us": by_floor, "floor_us": floor,
        "floor_kind": "fp16" if fl_floor >= by_floor else "bytes", "x_floor": t_fl / floor,
        "cublas_us": t_cub, "cublas_path": path, "cublas_mm_us": t_loop, "cublas_bmm_us": t_bmm,
        "speedup": t_cub / t_fl, "cublas_error": err,
    }


DRAM_METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")


def dram_child(g: int, m: int, n: int, k: int) -> None:
    """Under ncu (--profile-from-start off): one call of the shape inside the profiled range, after a first call
    outside it (set-up, plans and tensor maps)."""
    data = compose(a_sides(g, m, k, 1, "cuda")[0], b_sides(g, n, k, 1, "cuda")[0], "cuda")
    fastlaunch.fast_launch(data)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    fastlaunch.fast_launch(data)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def parse_ncu_bytes(text: str) -> tuple:
    """ncu --csv --page raw --print-units base output -> (kernels, DRAM bytes read + written over them)."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    kernels, total = 0, 0.0
    for r in rows:
        vals = [r.get(name, "") for name in DRAM_METRICS]
        try:
            nums = [float(v.replace(",", "")) for v in vals]
        except ValueError:
            continue  # the units row
        kernels += 1
        total += sum(nums)
    return kernels, total


def dram_bytes(shape) -> tuple:
    """(kernels, DRAM bytes) of one call of `shape` under ncu, or (0, nan) where ncu is missing or fails."""
    ncu = shutil.which("ncu")
    if ncu is None:
        return 0, float("nan")
    g, m, n, k = shape
    cmd = [ncu, "--profile-from-start", "off", "--metrics", ",".join(DRAM_METRICS), "--csv", "--page", "raw",
           "--print-units", "base", sys.executable, os.path.abspath(__file__), "--dram-child", str(g), str(m), str(n),
           str(k)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return 0, float("nan")
    kernels, total = parse_ncu_bytes(out.stdout)
    return (kernels, total) if out.returncode == 0 and kernels else (0, float("nan"))


def failed_row(shape, err: Exception) -> dict:
    g, m, n, k = shape
    nan = float("nan")
    return {"g": g, "m": m, "n": n, "k": k, "ok": False, "message": f"{type(err).__name__}: {err}", "checked": "",
            "fastlaunch_us": nan, "tflops": nan, "floor_compute_us": nan, "floor_bytes_us": nan, "floor_us": nan,
            "floor_kind": "", "x_floor": nan, "cublas_us": nan, "cublas_path": "", "cublas_mm_us": nan,
            "cublas_bmm_us": nan, "speedup": nan, "cublas_error": nan}


def sweep(p: Plan, args, flush, peak, bw, device="cuda") -> list:
    """Every timed shape's row, block by block (each block's weights generated and dequantised once per set)."""
    rows = []
    for g, n, k in blocks(p.timed):
        b_set = b_sides(g, n, k, args.sets, device)
        b16 = [torch.stack(dequantised(b_side)[1]) for b_side in b_set]  # [G, N, K] fp16 per set
        for shape in [s for s in p.timed if (s[0], s[2], s[3]) == (g, n, k)]:
            try:
                r = bench_shape(shape, b_set, b16, flush, peak, bw, args, device)
            except RuntimeError as e:  # out of memory or a failed launch: recorded, the sweep goes on
                r = failed_row(shape, e)
            r["role"] = "one group" if shape in p.extra else "sweep"
            rows.append(r)
            print(f"[{len(rows)}/{len(p.timed)}] {describe(shape)}: fastlaunch {r['fastlaunch_us']:.1f} us, cuBLAS "
                  f"{r['cublas_us']:.1f} us{'' if r['ok'] else ' FAIL: ' + r['message']}", file=sys.stderr, flush=True)
        del b_set, b16
        if device == "cuda":
            torch.cuda.empty_cache()
    return rows


def pair_rows(p: Plan, by_shape: dict) -> list:
    """Each many-vs-one pair's times and ratios (many / one)."""
    out = []
    for many, one in p.pairs:
        r, o = by_shape[many], by_shape[one]
        out.append({"g": many[0], "m": many[1], "n": many[2], "k": many[3], "rows": one[1],
                    "many_us": r["fastlaunch_us"], "one_us": o["fastlaunch_us"],
                    "ratio": r["fastlaunch_us"] / o["fastlaunch_us"], "floor_ratio": r["floor_us"] / o["floor_us"],
                    "cublas_many_us": r["cublas_us"], "cublas_one_us": o["cublas_us"],
                    "cublas_ratio": r["cublas_us"] / o["cublas_us"]})
    return out


# ------------------------------------------------------------------------------------------------------- output

def print_tables(rows: list, pairs: list) -> None:
    ratio = {(q["g"], q["m"], q["n"], q["k"]): q["ratio"] for q in pairs}
    print()
    dram = any("dram_bytes" in r for r in rows)
    print("| N | K | G | M | fastlaunch us | TFLOP/s | x floor | floor us | cuBLAS fp16 us | cuBLAS path | "
          "speed-up over cuBLAS | x one group of G*M |" + (" DRAM GB | x unique bytes |" if dram else ""))
    print("|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if dram else ""))
    for r in rows:
        key = (r["g"], r["m"], r["n"], r["k"])
        print(f"| {r['n']} | {r['k']} | {r['g']} | {r['m']}{'' if r['ok'] else ' **FAIL**'} | "
              f"{r['fastlaunch_us']:.1f} | {r['tflops']:.0f} | {r['x_floor']:.2f} | "
              f"{r['floor_us']:.1f} ({r['floor_kind']}) | {r['cublas_us']:.1f} | {r['cublas_path']} | "
              f"{r['speedup']:.2f}x | {f'{ratio[key]:.2f}' if key in ratio else ''} |"
              + (f" {r['dram_bytes'] / 1e9:.3f} | {r['dram_bytes'] / r['unique_bytes']:.2f} |" if dram else ""))
    if pairs:
        print()
        print("many groups against one group of as many rows (ratio: G groups' time / one group's time)")
        print("| N | K | G x M | fastlaunch G groups us | one group us | ratio | floors' ratio | "
              "cuBLAS G groups us | cuBLAS one group us | cuBLAS ratio |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for q in pairs:
            print(f"| {q['n']} | {q['k']} | {q['g']} x {q['m']} | {q['many_us']:.1f} | {q['one_us']:.1f} | "
                  f"{q['ratio']:.2f} | {q['floor_ratio']:.2f} | {q['cublas_many_us']:.1f} | "
                  f"{q['cublas_one_us']:.1f} | {q['cublas_ratio']:.2f} |")


def summary(rows: list, pairs: list, p: Plan, args) -> dict:
    big = [r for r in rows if r["m"] >= BIG_M]
    fast = {id(r) for r in big if r["fastlaunch_us"] <= r["cublas_us"]}
    near = {id(r) for r in big if r["x_floor"] <= NEAR_FLOOR}
    out = {"big_m": BIG_M, "near_floor": NEAR_FLOOR, "big_shapes": len(big), "as_fast_as_cublas": len(fast),
           "near_floor_shapes": len(near), "both": len(fast & near), "skipped": len(p.skipped),
           "all_ok": all(r["ok"] for r in rows),
           "cublas_agrees": all(r["cublas_error"] <= CUBLAS_AGREES for r in rows if r["ok"])}
    print()
    print(f"shapes with >= {BIG_M} rows per group: {len(fast & near)} of {len(big)} at least as fast as cuBLAS and "
          f"within {NEAR_FLOOR}x of the floor ({len(fast)} at least as fast as cuBLAS, {len(near)} within "
          f"{NEAR_FLOOR}x of the floor)")
    finite = [q for q in pairs if math.isfinite(q["ratio"])]
    if finite:
        worst = max(finite, key=lambda q: q["ratio"])
        rel = max(finite, key=lambda q: q["ratio"] / q["floor_ratio"])
        out["worst_ratio"], out["worst_ratio_over_floors"] = worst, rel
        print(f"worst many-vs-one ratio: {worst['ratio']:.2f}, G={worst['g']} x M={worst['m']} against one group of "
              f"{worst['rows']} rows, N={worst['n']} K={worst['k']} (the floors' ratio there: "
              f"{worst['floor_ratio']:.2f}; cuBLAS's: {worst['cublas_ratio']:.2f})")
        print(f"worst many-vs-one ratio over the floors' ratio: {rel['ratio'] / rel['floor_ratio']:.2f}, "
              f"G={rel['g']} x M={rel['m']} N={rel['n']} K={rel['k']} ({rel['ratio']:.2f} against the floors' "
              f"{rel['floor_ratio']:.2f})")
    print(f"skipped: {len(p.skipped)} shapes with G*M > --max-rows {args.max_rows}")
    print(f"cuBLAS's results agree with fastlaunch's (relative error <= {CUBLAS_AGREES}): {out['cublas_agrees']}"
          + "".join(f"\n  {describe((r['g'], r['m'], r['n'], r['k']))}: {r['cublas_error']:.2e}" for r in rows
                    if r["ok"] and not r["cublas_error"] <= CUBLAS_AGREES))
    print(f"all outputs correct: {out['all_ok']}"
          + "".join(f"\n  {describe((r['g'], r['m'], r['n'], r['k']))}: {r['message']}" for r in rows if not r["ok"]))
    return out


def chart(path: str, rows: list, pairs: list, name: str) -> None:
    plt = load_pyplot()
    if plt is None:
        return
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(14, 5.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (g, n, k) in enumerate(blocks([(r["g"], r["m"], r["n"], r["k"]) for r in rows])):
        sel = [r for r in rows if (r["g"], r["n"], r["k"]) == (g, n, k)]
        col = colors[i % len(colors)]
        ms = [r["m"] for r in sel]
        ax.plot(ms, [r["x_floor"] for r in sel], "-o", ms=3, color=col, label=f"G={g} N={n} K={k}")
        ax.plot(ms, [r["cublas_us"] / r["floor_us"] for r in sel], "--", color=col)
        sel = [q for q in pairs if (q["g"], q["n"], q["k"]) == (g, n, k)]
        if sel:
            ms = [q["m"] for q in sel]
            ax2.plot(ms, [q["ratio"] for q in sel], "-o", ms=3, color=col, label=f"G={g} N={n} K={k}")
            ax2.plot(ms, [q["floor_ratio"] for q in sel], ":", color=col)
    ax.plot([], [], "--", color="gray", label="cuBLAS fp16, pre-dequantised (dashed)")
    ax.axhline(1.0, color="black", lw=0.6)
    from matplotlib.ticker import FormatStrFormatter
    for a in (ax, ax2):
        a.set_xscale("log", base=2)
        a.set_yscale("log")
        a.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        a.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
        a.tick_params(axis="y", which="minor", labelsize=7)
        a.set_xlabel("rows per group M")
        a.legend(fontsize=7)
    ax.set_ylabel("device time / floor (L2 flushed)")
    ax.set_title(f"NVFP4 grouped GEMM against its floor on {name}", fontsize=10)
    ax2.plot([], [], ":", color="gray", label="the floors' ratio (dotted)")
    ax2.legend(fontsize=7)
    ax2.set_ylabel("G groups of M rows / one group of G*M rows")
    ax2.set_title("many groups against one group", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def commit() -> str | None:
    return source_commit(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# --------------------------------------------------------------------------------------------------------- main

def dry_run(args) -> int:
    """The harness without a GPU: the plan, and one input of each (G, N, K) with M = 1 generated and unpacked."""
    p = plan(args)
    print_plan(p, args)
    for g, n, k in blocks(p.timed):
        data = compose(a_sides(g, 1, k, 1, "cpu")[0], b_sides(g, n, k, 1, "cpu")[0], "cpu")
        assert fastlaunch.unpack(data) == g
        print(f"G={g} N={n} K={k}: one input (M=1) generated on the CPU, unpacks: G={g}")
    print(f"dry run: {len(blocks(p.timed))} (G, N, K) inputs generated and unpacked on the CPU; "
          f"{len(p.timed)} shapes would be timed, {len(p.skipped)} skipped")
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.dram_child:
        dram_child(*args.dram_child)
        return 0
    if args.dry_run:
        return dry_run(args)
    if not torch.cuda.is_available():
        print("bench_scaling needs a CUDA GPU (--dry-run checks the shapes on the CPU)")
        return 2
    p = plan(args)
    flush = l2_flush_buffer()
    peak, bw = ceilings(flush)
    name = torch.cuda.get_device_name()
    date = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    print(f"{date}; {name}; torch {torch.__version__} (CUDA {torch.version.cuda}); commit {commit() or 'unknown'}")
    print(f"measured ceilings: fp16 {peak / 1e12:.0f} TFLOP/s (8192^3 torch.mm), copy {bw / 1e12:.2f} TB/s")
    print("checked against the fp32 reference: "
          + (f"{args.check_rows} random rows of each group of more (seed {CHECK_SEED}), every element for NaN"
             if args.check_rows else "every row"))
    print_plan(p, args)

    rows = sweep(p, args, flush, peak, bw)
    if args.dram:
        for r in rows:
            shape = (r["g"], r["m"], r["n"], r["k"])
            r["dram_kernels"], r["dram_bytes"] = dram_bytes(shape)
            r["unique_bytes"] = nvfp4_bytes(full(shape))
            print(f"{describe(shape)}: {r['dram_bytes'] / 1e9:.3f} GB moved by {r['dram_kernels']} kernels, "
                  f"{r['dram_bytes'] / r['unique_bytes']:.2f}x the unique {r['unique_bytes'] / 1e9:.3f} GB",
                  file=sys.stderr, flush=True)
    pairs = pair_rows(p, {(r["g"], r["m"], r["n"], r["k"]): r for r in rows})
    print_tables(rows, pairs)
    summ = summary(rows, pairs, p, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": date, "device": name, "torch": torch.__version__, "cuda": torch.version.cuda,
                       "commit": commit(), "peak_flops": peak, "copy_bw": bw,
                       "args": {"nk": args.nk, "g": args.g, "m": args.m, "max_rows": args.max_rows, "sets": args.sets,
                                "reps": args.reps, "check_rows": args.check_rows, "check_seed": CHECK_SEED},
                       "skipped": p.skipped, "rows": rows, "pairs": pairs, "summary": summ}, f, indent=1)
    if args.png:
        chart(args.png, rows, pairs, name)
    return 0 if summ["all_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
