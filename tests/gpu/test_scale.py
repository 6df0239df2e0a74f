"""GPU tests at prefill scale (skipped without CUDA): 8 x 2048, 1 x 8192 and 64 x 512 rows per group at N 4096,
K 7168, on values drawn from every E2M1 code, every output checked for NaN and 256 rows per group (the first, the
last, random ones) against a float64 reference. Each shape runs under the planner's own
choice (a wave plan at these sizes: kernels/sm90/plan/planner.h share_wave), with wave plans ruled out
(FASTLAUNCH_SM90_WAVE=0: the stream-K shares) and on the device schedule (FASTLAUNCH_SM90_ROWS=1:
kernels/sm90/plan/row_plan.h, which a first call of new sizes takes), each setting in a new process (settings are
read at set-up)."""
import json
import os
import subprocess
import sys

import pytest

from fastlaunch import _C

from conftest import fresh_seed, requires_cuda

pytestmark = requires_cuda

SHAPES = [(8, 2048), (1, 8192), (64, 512)]  # (groups, rows per group)
N, K = 4096, 7168

# Every E2M1 code in A and B; scales 2^-3 .. 2^3 (E4M3 codes 0x20..0x50, every mantissa), so the sums of 7168
# products stay finite in fp16. The reference is float64; the kernel sums fp32 in its own order, so the bound is the
# contract's tolerance plus K * 2^-24 of the sum of |products| (a bound on any order of fp32 summation).
CHILD = r"""
import sys, torch, fastlaunch
from fastlaunch import reference as R
seed, g, m, n, k = (int(x) for x in sys.argv[1:6])
gen = torch.Generator(device="cuda").manual_seed(seed)
def fp4(rows):
    return torch.randint(0, 256, (rows, k // 2, 1), dtype=torch.uint8, device="cuda", generator=gen)
def scales(rows):
    return torch.randint(0x20, 0x51, (rows, k // 16, 1), dtype=torch.uint8, device="cuda",
                         generator=gen).view(torch.float8_e4m3fn)
abc, sf, sfr, sizes, dev_sf = [], [], [], [], []
for _ in range(g):
    a, b, sa, sb = fp4(m), fp4(n), scales(m), scales(n)
    c = torch.full((m, n, 1), float("nan"), dtype=torch.float16, device="cuda")
    abc.append((a, b, c))
    sf.append((sa.cpu(), sb.cpu()))  # the plain scales live on the CPU, as the task's do
    dev_sf.append((sa, sb))
    sfr.append((R.reorder_scales(sa[:, :, 0]), R.reorder_scales(sb[:, :, 0])))
    sizes.append((m, n, k, 1))
out = fastlaunch.fast_launch((abc, sf, sfr, sizes))
torch.cuda.synchronize()
worst = 0.0
for gi, ((a, b, _c), (sa, sb), o) in enumerate(zip(abc, dev_sf, out)):
    # every element for NaN (unwritten); 256 rows in float64: random ones, the first and the last
    rows = torch.cat([torch.tensor([0, m - 1], device="cuda"),
                      torch.randint(0, m, (254,), device="cuda", generator=gen)]).unique()
    assert not torch.isnan(o).any(), f"group {gi}: {int(torch.isnan(o).sum())} NaN (unwritten)"
    da, db = R.dequantize(a[rows], sa[rows]).double(), R.dequantize(b, sb).double()
    o = o[rows]
    ref = (da @ db.T).half().double()
    mag = da.abs() @ db.abs().T
    o = o[:, :, 0].double()
    assert torch.isfinite(ref).all(), "reference overflowed fp16: the scales are too wide for this K"
    bad_nan = 0
    tol = 1e-3 + 1e-3 * ref.abs() + k * 2.0 ** -24 * mag
    excess = ((o - ref).abs() - tol)
    bad = int((excess > 0).sum())
    worst = max(worst, float(((o - ref).abs() / (ref.abs() + 1e-3)).max()))
    assert bad_nan == 0 and bad == 0, f"group {gi}: {bad_nan} NaN (unwritten), {bad} outside tolerance, max excess " \
        f"{float(excess.max())}"
print(f"ok seed {seed} max relative error {worst:.2e}")
"""


def _run(g, m, env):
    seed = fresh_seed()
    out = subprocess.run([sys.executable, "-c", CHILD, str(seed), str(g), str(m), str(N), str(K)],
                         env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and "ok seed" in out.stdout, f"seed {seed}: " + out.stderr[-3000:]


@pytest.mark.parametrize("g, m", SHAPES, ids=[f"{g}x{m}" for g, m in SHAPES])
@pytest.mark.parametrize("setting", [{"FASTLAUNCH_SM90_ROWS": "0"}, {"FASTLAUNCH_SM90_WAVE": "0"},
                                     {"FASTLAUNCH_SM90_ROWS": "1"}], ids=["planner", "no-wave", "device-schedule"])
def test_prefill_scale_full_range(g, m, setting):
    plan = _C.plan([(m, N, K)] * g, 132)
    assert plan[5] is True, "the planner takes a wave plan at this size (the test's premise)"
    assert _C.row_plan([(m, N, K)] * g) is not None, "the device schedule fits this launch (the test's premise)"
    _run(g, m, setting)
