"""Runs one benchmark shape a few times (for ncu): python tools/profile_one.py [index]"""
import sys

import torch

import fastlaunch
from fastlaunch import reference as R
from fastlaunch.shapes import BENCH_SHAPES

i = int(sys.argv[1]) if len(sys.argv) > 1 else 0
g, ms, ns, ks = BENCH_SHAPES[i]
data = R.generate_input(ms, ns, ks, g, 1, device="cuda")
for _ in range(3):
    fastlaunch.fast_launch(data)
torch.cuda.synchronize()
