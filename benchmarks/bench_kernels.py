"""Device time of the NVFP4 grouped GEMM against what a Hopper user could run instead, in one run.

For each benchmark shape (and any --shape), with the L2 flushed before every timed call and inputs
rotated among fresh sets:
  fastlaunch      fastlaunch.fast_launch (checked against the fp32 reference first)
  reference       dequantise in torch, then one fp16 mm per group (the task's Hopper reference path)
  cublas_fp16     one fp16 mm per group on operands dequantised ahead of time (no dequant cost)
  grouped_bf16    torch._grouped_mm in bf16 on operands dequantised ahead of time
and the floors from ceilings measured in the same run: fp16 tensor-core time (8192^3 matmul rate) and the
NVFP4 bytes at the device-to-device copy bandwidth.

With --tests (the task's 10 test shapes) and --random COUNT (random shapes, fastlaunch.shapes.
random_shapes; the seed is printed), it also lists the extra shapes on which fastlaunch is slower than
cuBLAS on pre-dequantised operands.

python benchmarks/bench_kernels.py [--shape G:M:N:K ...] [--tests] [--random COUNT [--seed S]]
                              [--only] [--json out.json] [--png chart.png]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this clone's package

import torch

import fastlaunch
from fastlaunch import reference as R
from fastlaunch.shapes import BENCH_SHAPES, TEST_SHAPES, column, describe, flops, nvfp4_bytes, random_shapes
from fastlaunch.timing import device_us, device_us_sets, l2_flush_buffer, load_pyplot


def parse_shape(text: str):
    """G:M:N:K, each of M, N and K one value for every group or a comma-separated list of G values."""
    g, *cols = text.split(":")
    g = int(g)
    if len(cols) != 3:
        raise SystemExit(f"--shape {text}: expected G:M:N:K")
    out = []
    for name, col in zip("MNK", cols):
        vals = [int(x) for x in col.split(",")]
        if len(vals) not in (1, g):
            raise SystemExit(f"--shape {text}: {name} has {len(vals)} values, expected 1 or {g}")
        out.append(vals * g if len(vals) == 1 else vals)
    return (g, *out)


def shape_arg(shape) -> str:
    """The --shape text of a shape (parse_shape reads it back)."""
    g, ms, ns, ks = shape
    return f"{g}:{column(ms)}:{column(ns)}:{column(ks)}"


def select_shapes(args) -> list:
    """The shapes to time: the benchmark shapes (unless --only), then --shape, --tests and --random ones."""
    shapes = [] if args.only else list(BENCH_SHAPES)
    shapes += [parse_shape(s) for s in args.shape]
    if args.tests:
        shapes += list(TEST_SHAPES)
    if args.random:
        shapes += random_shapes(args.random, args.seed)
    return shapes


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", action="append", default=[],
                   help="extra shape G:M:N:K (M, N, K: one value or a list of G)")
    p.add_argument("--tests", action="store_true", help="also the task's 10 test shapes")
    p.add_argument("--random", type=int, default=0, metavar="COUNT", help="also COUNT random shapes")
    p.add_argument("--seed", type=int, default=None, help="seed of the random shapes (default: a fresh one)")
    p.add_argument("--only", action="store_true", help="not the benchmark shapes, only the extra ones")
    p.add_argument("--json")
    p.add_argument("--png")
    p.add_argument("--dry-run", action="store_true",
                   help="no GPU needed: generate each selected shape's input on the CPU and check it unpacks")
    args = p.parse_args(argv)
    if args.random < 0:
        p.error(f"--random: expected a count >= 0, got {args.random}")
    if args.seed is None:
        args.seed = random.randrange(1 << 30)
    if args.only and not (args.shape or args.tests or args.random):
        p.error("--only needs --shape, --tests or --random")
    return args


def ceilings(flush):
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    for _ in range(3):
        a @ b
    t = device_us(lambda: a @ b, flush, reps=10)
    peak = 2 * 8192 ** 3 / (t * 1e-6)
    x = torch.empty(2 * 1024 ** 3, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    tc = device_us(lambda: y.copy_(x), flush, reps=10)
    bw = 2 * x.numel() / (tc * 1e-6)
    return peak, bw


def dequantised(data):
    """Every group's A and B of an input, dequantised to fp16 (exact): (list of [M, K], list of [N, K])."""
    a16 = [R.dequantize(a, sfa).half() for (a, _b, _c), (sfa, _sfb) in zip(data[0], data[1])]
    b16 = [R.dequantize(b, sfb).half() for (_a, b, _c), (_sfa, sfb) in zip(data[0], data[1])]
    return a16, b16


def bench_shape(shape, flush, peak, bw, sets=3):
    g, ms, ns, ks = shape
    inputs = [R.generate_input(ms, ns, ks, g, seed=7000 + j, device="cuda") for j in range(sets)]
    ref = R.ref_kernel(R.clone_outputs(inputs[0]))
    R.poison(inputs[0])
    ok, msg = R.check(fastlaunch.fast_launch(inputs[0]), ref)
    t_fl = device_us_sets(lambda i: fastlaunch.fast_launch(inputs[i]), sets, flush)

    deq = [dequantised(d) for d in inputs]
    outs = [[torch.empty(m, n, dtype=torch.float16, device="cuda") for m, n in zip(ms, ns)] for _ in inputs]

    def reference(i):
        data = inputs[i]
        for (a, b, _c), (sfa, sfb), o in zip(data[0], data[1], outs[i]):
            torch.mm(R.dequantize(a, sfa).half(), R.dequantize(b, sfb).half().t(), out=o)

    def cublas(i):
        a16, b16 = deq[i]
        for x, y, o in zip(a16, b16, outs[i]):
            torch.mm(x, y.t(), out=o)

    same_nk = len(set(ns)) == 1 and len(set(ks)) == 1
    grouped_inputs = []
    if same_nk:
        for a16, b16 in deq:
            offs = torch.tensor(ms, device="cuda").cumsum(0).to(torch.int32)
            grouped_inputs.append((torch.cat(a16).bfloat16(), torch.stack(b16).bfloat16(), offs))

    def grouped(i):
        a, b, offs = grouped_inputs[i]
        return torch._grouped_mm(a, b.transpose(-2, -1), offs=offs)

    t_ref = device_us_sets(reference, sets, flush, reps=5)
    t_cub = device_us_sets(cublas, sets, flush)
    t_grp = float("nan")
    if same_nk:
        try:
            grouped(0)
            t_grp = device_us_sets(grouped, sets, flush)
        except Exception as e:  # no grouped_mm for this torch/GPU
            print(f"grouped_mm unavailable: {e}", file=sys.stderr)
    fl_floor = flops(shape) / peak * 1e6
    by_floor = nvfp4_bytes(shape) / bw * 1e6
    return {
        "shape": describe(shape), "arg": shape_arg(shape), "ok": ok, "message": msg,
        "fastlaunch_us": t_fl, "reference_us": t_ref, "cublas_fp16_us": t_cub, "grouped_bf16_us": t_grp,
        "tflops": flops(shape) / (t_fl * 1e-6) / 1e12, "gbs": nvfp4_bytes(shape) / (t_fl * 1e-6) / 1e9,
        "floor_compute_us": fl_floor, "floor_bytes_us": by_floor, "floor_us": max(fl_floor, by_floor),
    }


def dry_run(args) -> int:
    """The harness without a GPU: every selected shape's input generated on the CPU and unpacked."""
    shapes = select_shapes(args)
    for i, (g, ms, ns, ks) in enumerate(shapes):
        data = R.generate_input(ms, ns, ks, g, seed=7000 + i, device="cpu")
        assert fastlaunch.unpack(data) == g
        print(f"| {describe((g, ms, ns, ks))} | unpacks: G={g} |")
    print(f"dry run: {len(shapes)} shapes generated and unpacked on the CPU")
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.dry_run:
        return dry_run(args)
    if not torch.cuda.is_available():
        print("bench_kernels needs a CUDA GPU (--dry-run checks the shapes on the CPU)")
        return 2
    flush = l2_flush_buffer()
    peak, bw = ceilings(flush)
    name = torch.cuda.get_device_name()
    print(f"{name}: measured ceilings fp16 {peak / 1e12:.0f} TFLOP/s, copy {bw / 1e12:.2f} TB/s")
    if args.random:
        print(f"random shapes: --random {args.random} --seed {args.seed}")
    shapes = select_shapes(args)
    rows = [bench_shape(s, flush, peak, bw) for s in shapes]
    # the geomean is over the benchmark shapes (with --only, over all); the others are checked against cuBLAS
    nb = len(BENCH_SHAPES)
    bench, extra = (rows, rows) if args.only else (rows[:nb], rows[nb:])

    print()
    print("| shape | fastlaunch us | TFLOP/s | GB/s | % compute floor | % bytes floor | reference us | "
          "cuBLAS fp16 us | grouped bf16 us | vs reference | vs cuBLAS | vs grouped | x floor |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['shape']}{'' if r['ok'] else ' **FAIL**'} | {r['fastlaunch_us']:.1f} | {r['tflops']:.0f} | "
              f"{r['gbs']:.0f} | {100 * r['floor_compute_us'] / r['fastlaunch_us']:.0f}% | "
              f"{100 * r['floor_bytes_us'] / r['fastlaunch_us']:.0f}% | {r['reference_us']:.0f} | "
              f"{r['cublas_fp16_us']:.1f} | {r['grouped_bf16_us']:.1f} | "
              f"{r['reference_us'] / r['fastlaunch_us']:.0f}x | {r['cublas_fp16_us'] / r['fastlaunch_us']:.2f}x | "
              f"{r['grouped_bf16_us'] / r['fastlaunch_us']:.2f}x | {r['fastlaunch_us'] / r['floor_us']:.2f} |")
    gm = statistics.geometric_mean
    g_fl = gm([r["fastlaunch_us"] for r in bench])
    g_cub = gm([r["cublas_fp16_us"] for r in bench])
    g_grp = gm([r["grouped_bf16_us"] for r in bench]) if all(r["grouped_bf16_us"] == r["grouped_bf16_us"]
                                                              for r in bench) else float("nan")
    g_floor = gm([r["floor_us"] for r in bench])
    g_ref = gm([r["reference_us"] for r in bench])
    print(f"| geomean | {g_fl:.1f} | | | | | {g_ref:.0f} | {g_cub:.1f} | {g_grp:.1f} | {g_ref / g_fl:.0f}x | "
          f"{g_cub / g_fl:.2f}x | {g_grp / g_fl:.2f}x | {g_fl / g_floor:.2f} |")
    print(f"\nfloor geomean {g_floor:.1f} us; fastlaunch {g_fl:.1f} us = {g_fl / g_floor:.2f}x floor; "
          f"best torch path {min(g_cub, g_grp if g_grp == g_grp else g_cub):.1f} us; "
          f"all outputs correct: {all(r['ok'] for r in rows)}")
    if extra:
        slower = [r for r in extra if r["fastlaunch_us"] > r["cublas_fp16_us"]]
        print(f"extra shapes slower than cuBLAS fp16 on pre-dequantised operands: {len(slower)} of {len(extra)}"
              + "".join(f"\n  {r['shape']}: {r['fastlaunch_us']:.1f} us against {r['cublas_fp16_us']:.1f}"
                        + f" (--shape {r['arg']})" for r in slower))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name, "peak_flops": peak, "copy_bw": bw, "seed": args.seed if args.random else None,
                       "rows": rows}, f, indent=1)
    plt = load_pyplot() if args.png else None
    if plt:
        fig, ax = plt.subplots(figsize=(max(10, 1.1 * len(rows)), 4.5))
        keys = [("fastlaunch_us", "fastlaunch"), ("cublas_fp16_us", "cuBLAS fp16 (pre-dequantised)"),
                ("grouped_bf16_us", "grouped_mm bf16 (pre-dequantised)"), ("floor_us", "floor")]
        w = 0.2
        for j, (key, label) in enumerate(keys):
            ax.bar([i + (j - 1.5) * w for i in range(len(rows))], [r[key] for r in rows], w, label=label)
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels([r["shape"].replace(" N=", "\nN=") for r in rows], fontsize=7)
        ax.set_ylabel("device us per call (L2 flushed)")
        ax.set_title(f"NVFP4 grouped GEMM on {name}")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(args.png, dpi=120)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
