"""Runs one benchmark shape, or G groups of M x N x K, a few times on the GPU (for ncu, tools/tuning/ncu_sm90.sh)."""
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
args = ap.parse_args()
g, ms, ns, ks = args.shape or BENCH_SHAPES[args.index]
data = R.generate_input(ms, ns, ks, g, 1, device="cuda")
for _ in range(3):
    fastlaunch.fast_launch(data)
torch.cuda.synchronize()
