"""Diagnostics for the sm90 kernel on a GPU: structured inputs that show which K values the kernel
pairs, which outputs it writes, and how errors are distributed. Prints findings; exits 1 on a mismatch.
Needs a CUDA GPU (tools/gpu_check.sh runs it as its diag step)."""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this clone's package

import torch

import fastlaunch
from fastlaunch import reference as R


def onehot_case(m, n, k):
    """A row i = 1.0 at K = i % k, B row j = 1.0 at K = j % k, unit scales: C[i, j] = (i % k == j % k)."""
    dev = "cuda"
    data = R.generate_input(m, n, k, 1, 0, device=dev)
    (a, b, c), (sfa, sfb), _, _ = data[0][0], data[1][0], None, None
    def onehot(rows):
        raw = torch.zeros(rows, k // 2, dtype=torch.uint8)
        for i in range(rows):
            kk = i % k
            raw[i, kk // 2] = 0x2 if kk % 2 == 0 else 0x20  # code 2 = 1.0
        return raw
    a.view(torch.uint8)[:, :, 0] = onehot(m).to(dev)
    b.view(torch.uint8)[:, :, 0] = onehot(n).to(dev)
    one = torch.ones_like(sfa.float()).to(torch.float8_e4m3fn)
    data[1][0] = (one, torch.ones_like(sfb.float()).to(torch.float8_e4m3fn))
    data[2][0] = (R.reorder_scales(data[1][0][0]).to(dev), R.reorder_scales(data[1][0][1]).to(dev))
    R.poison(data)
    out = fastlaunch.fast_launch(data)[0][:, :, 0].float().cpu()
    torch.cuda.synchronize()
    expect = torch.tensor([[1.0 if i % k == j % k else 0.0 for j in range(n)] for i in range(m)])
    bad = (out != expect) | torch.isnan(out)
    print(f"onehot m={m} n={n} k={k}: {int(bad.sum())} wrong of {m * n}; NaN (unwritten) {int(torch.isnan(out).sum())}")
    if bad.any():
        for i in range(min(m, 8)):
            nz = (out[i] != 0).nonzero().flatten().tolist()[:8]
            print(f"  A row {i} (K={i % k}) pairs with B rows {nz}")
    return not bad.any()


def random_case(ms, ns, ks, full_range=False):
    g = len(ms)
    data = R.generate_input(ms, ns, ks, g, 1, device="cuda", full_range=full_range)
    R.poison(data)
    out = fastlaunch.fast_launch(data)
    ref = R.ref_kernel(R.clone_outputs(data))
    torch.cuda.synchronize()
    ok, msg = R.check(out, ref)
    print(f"random {ms}/{ns}/{ks} full_range={full_range}: {msg}")
    if not ok:
        for gi, (o, r) in enumerate(zip(out, ref)):
            o, r = o[:, :, 0].float(), r[:, :, 0].float()
            err = (o - r).abs()
            bad = ~(err <= 1e-3 + 1e-3 * r.abs())
            if bad.any():
                rows = bad.any(1).nonzero().flatten()
                cols = bad.any(0).nonzero().flatten()
                print(f"  group {gi}: bad rows {rows[:10].tolist()}.. ({len(rows)}), bad cols {cols[:10].tolist()}.. "
                      f"({len(cols)}), max err {err[bad].max().item():.3g}, nan {int(torch.isnan(o).sum())}")
    return ok


if __name__ == "__main__":
    argparse.ArgumentParser(prog="python tools/diag_sm90.py", description=__doc__).parse_args()
    results = [
        onehot_case(64, 64, 64),
        onehot_case(16, 128, 64),
        random_case([16], [128], [64]),
        random_case([256], [128], [64]),
        random_case([96, 128], [128, 256], [256, 512]),
        random_case([300], [200], [192], full_range=True),
    ]
    sys.exit(0 if all(results) else 1)
