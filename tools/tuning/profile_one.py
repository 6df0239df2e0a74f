"""Runs one benchmark shape a few times on the GPU (for ncu, tools/tuning/ncu_sm90.sh)."""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # this clone's package

import torch

import fastlaunch
from fastlaunch import reference as R
from fastlaunch.shapes import BENCH_SHAPES

ap = argparse.ArgumentParser(prog="python tools/tuning/profile_one.py", description=__doc__)
ap.add_argument("index", nargs="?", type=int, default=0, choices=range(len(BENCH_SHAPES)),
                help="the benchmark shape (fastlaunch.shapes.BENCH_SHAPES), default 0")
i = ap.parse_args().index
g, ms, ns, ks = BENCH_SHAPES[i]
data = R.generate_input(ms, ns, ks, g, 1, device="cuda")
for _ in range(3):
    fastlaunch.fast_launch(data)
torch.cuda.synchronize()
