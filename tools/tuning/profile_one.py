"""Runs one benchmark shape, G groups of M x N x K, or a masked-form step of G experts, a few times on the GPU (for
ncu, tools/tuning/ncu_sm90.sh)."""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # this clone's package

import torch

import fastlaunch
from fastlaunch import reference as R
from fastlaunch.shapes import BENCH_SHAPES


def shape(text):
    """'GxMxNxK' -> (G, [M] * G, [N] * G, [K] * G)."""
    try:
        g, m, n, k = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected GxMxNxK, e.g. 8x2048x4096x7168, got {text!r}")
    return g, [m] * g, [n] * g, [k] * g


ap = argparse.ArgumentParser(prog="python tools/tuning/profile_one.py", description=__doc__)
ap.add_argument("index", nargs="?", type=int, default=0, choices=range(len(BENCH_SHAPES)),
                help="the benchmark shape (fastlaunch.shapes.BENCH_SHAPES), default 0")
ap.add_argument("--shape", type=shape, help="G groups of M x N x K instead, as GxMxNxK")
ap.add_argument("--masked", type=shape, help="a masked-form step instead: G experts of max_m M, N x K, as GxMxNxK, "
                "each expert's count drawn from 1 .. M (--full: M)")
ap.add_argument("--full", action="store_true", help="--masked: every expert holds M rows")
ap.add_argument("--bf16", action="store_true", help="--masked: bf16 activations (the weight-only form)")
ap.add_argument("--seed", type=int, default=1, help="the inputs' seed (default 1)")
args = ap.parse_args()
if args.masked:
    g, ms, ns, ks = args.masked
    m, n, k = ms[0], ns[0], ks[0]
    gen = torch.Generator().manual_seed(args.seed)
    counts = [m] * g if args.full else torch.randint(1, m + 1, (g,), generator=gen).tolist()
    a, sfa, b, sfb, mm, out = R.generate_masked_input(g, m, n, k, counts, args.seed, device="cuda")
    if args.bf16:
        a, sfa = (torch.randn(g, m, k, generator=gen) / 4).bfloat16().cuda(), None
    print(f"masked: G={g} max_m={m} N={n} K={k} counts={counts} a {'bf16' if args.bf16 else 'NVFP4'}")
    call = lambda: fastlaunch.grouped_mm_masked(a, sfa, b, sfb, mm, out)
else:
    g, ms, ns, ks = args.shape or BENCH_SHAPES[args.index]
    data = R.generate_input(ms, ns, ks, g, args.seed, device="cuda")
    call = lambda: fastlaunch.fast_launch(data)
for _ in range(3):
    call()
torch.cuda.synchronize()
