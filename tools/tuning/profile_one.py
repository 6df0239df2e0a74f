"""Runs one benchmark shape a few times (for ncu): python tools/tuning/profile_one.py [index]"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # this clone's package

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
