"""CPU tests of fastlaunch.reference and of the generated wgmma header."""
import os
import pathlib
import subprocess
import sys

import torch

from conftest import ROOT as _ROOT
from fastlaunch import reference as R

ROOT = pathlib.Path(_ROOT)
# a user's environment: the tools must find the clone's package without PYTHONPATH
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_generator_layouts_match_the_contract():
    (a, b, c), (sfa, sfb), (sfa_r, sfb_r), size = (x[0] for x in R.generate_input([96], [200], [256], 1, 3, device="cpu"))
    assert a.dtype == torch.float4_e2m1fn_x2 and a.shape == (96, 128, 1) and a.stride() == (128, 1, 96 * 128)
    assert b.shape == (200, 128, 1) and b.stride() == (128, 1, 200 * 128)
    assert c.dtype == torch.float16 and c.shape == (96, 200, 1) and c.stride() == (200, 1, 96 * 200)
    assert sfa.dtype == torch.float8_e4m3fn and sfa.shape == (96, 16, 1) and sfa.device.type == "cpu"
    assert sfb_r.shape == (32, 4, 2, 4, 4, 1) and sfb_r.stride() == (16, 4, 2048, 1, 512, 4096)
    assert size == (96, 200, 256, 1)
    nib = torch.cat([a.view(torch.uint8) & 0xF, a.view(torch.uint8) >> 4])
    assert set(nib.unique().tolist()) <= {0, 1, 2, 3, 8, 9, 10, 11}
    assert set(sfa.float().unique().tolist()) <= {1.0, 2.0}


def test_seed_determines_the_data():
    x = R.generate_input(64, 128, 128, 2, 7, device="cpu")
    y = R.generate_input(64, 128, 128, 2, 7, device="cpu")
    z = R.generate_input(64, 128, 128, 2, 8, device="cpu")
    assert torch.equal(x[0][1][0].view(torch.uint8), y[0][1][0].view(torch.uint8))
    assert not torch.equal(x[0][1][0].view(torch.uint8), z[0][1][0].view(torch.uint8))


def test_dequantize_every_code_and_nibble_order():
    codes = torch.arange(16, dtype=torch.uint8)
    packed = (codes | (codes.flip(0) << 4)).view(1, 16)  # low nibble = lower K
    sf = torch.full((1, 2), 2.0).to(torch.float8_e4m3fn)
    vals = R.dequantize(packed, sf)[0]
    expect = []
    for lo, hi in zip(range(16), reversed(range(16))):
        expect += [2 * R.E2M1_VALUES[lo], 2 * R.E2M1_VALUES[hi]]
    assert vals.tolist() == expect


def test_ref_kernel_against_float64():
    data = R.generate_input([33, 64], [17, 40], [128, 64], 2, 5, device="cpu", full_range=True)
    out = R.ref_kernel(data)
    for (a, b, _c), (sfa, sfb), o in zip(data[0], data[1], out):
        exact = R.dequantize(a, sfa).double() @ R.dequantize(b, sfb).double().T
        ok, msg = R.check([o[:, :, 0]], [exact.half()])
        assert ok, msg


def test_check_flags_nan_inf_and_tolerance():
    r = torch.tensor([[1.0, 2.0, float("inf"), float("nan")]]).half()
    assert R.check([r.clone()], [r])[0]
    for i, v in [(0, 1.01), (1, float("nan")), (2, 65504.0), (3, 0.0)]:
        o = r.clone()
        o[0, i] = v
        ok, msg = R.check([o], [r])
        assert not ok and "differ" in msg
    o = r.clone()
    o[0, 0] = 1.0 + 1.5e-3  # inside 1e-3 + 1e-3 * 1
    assert R.check([o], [r])[0]


def test_generated_wgmma_header_is_current():
    header = ROOT / "kernels" / "ptx" / "wgmma_rs.cuh"
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import gen_wgmma
    finally:
        sys.path.pop(0)
    assert header.read_text() == gen_wgmma.render(), "run: python tools/gen_wgmma.py --write"


def test_main_job_without_gpu_times_the_host_path():
    if torch.cuda.is_available():
        args = ["--cpu"]
    else:
        args = []
    out = subprocess.run([sys.executable, "-m", "fastlaunch", *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    assert "timing the host path" in out.stdout and out.stdout.count("| ") >= 4


def test_launch_benchmark_dry_run():
    # run as the README shows it, from the clone's root with no PYTHONPATH
    out = subprocess.run([sys.executable, "benchmarks/bench_launch.py", "--dry-run"], cwd=ROOT, capture_output=True,
                         text=True, timeout=600, env=ENV)
    assert out.returncode == 0, out.stderr
    assert "unpack (CPU tensors, no launch)" in out.stdout


def test_eval_harness_dry_run():
    out = subprocess.run([sys.executable, "benchmarks/eval.py", "--dry-run"], cwd=ROOT, capture_output=True,
                         text=True, timeout=600, env=ENV)
    assert out.returncode == 0, out.stderr
    assert "dry run: loaded fastlaunch._C.fast_launch" in out.stdout


def test_zero_operands_leaves_every_product_zero():
    data = R.generate_input([3, 5], [128, 256], 64, 2, seed=7, device="cpu")
    assert R.zero_operands(data) is data
    for (a, b, _c), (sa, sb) in zip(data[0], data[2]):
        assert not a.view(torch.uint8).any() and not b.view(torch.uint8).any()
        for s in (sa, sb):
            assert (s.float() == 1.0).all()
    for (a, b, _c), (sa, sb) in zip(data[0], data[1]):  # with any scales, every value is zero
        assert (R.dequantize(a, sa) == 0).all() and (R.dequantize(b, sb) == 0).all()


def test_run_checked_poisons_outputs_then_checks():
    data = R.generate_input([40, 8], [72, 16], [128, 64], 2, 5, device="cpu")
    assert R.run_checked(R.ref_kernel, data) == (True, R.check(R.ref_kernel(R.clone_outputs(data)),
                                                               R.ref_kernel(R.clone_outputs(data)))[1])
    ok, msg = R.run_checked(lambda d: [c for _a, _b, c in d[0]], data)  # a kernel that writes nothing
    assert not ok and msg


def test_scales_as_read_follows_reordered_scales_rewritten_in_place():
    # a graph replayed on new data: new A, B and reordered scales copied into the captured tensors, the plain scales
    # left as they were; scales_as_read rebuilds them from the reordered bytes, so its reference is the new data's
    ms, ns, ks = [5, 0, 130], [256, 128, 72], [128, 64, 256]
    data = R.generate_input(ms, ns, ks, 3, 11, device="cpu", scale_pad=0x7F)
    fresh = R.generate_input(ms, ns, ks, 3, 12, device="cpu")
    for (sa, sb), (plain_a, plain_b) in zip(R.scales_as_read(data)[1], data[1]):  # as generated: the same bytes
        assert torch.equal(sa.view(torch.uint8), plain_a.view(torch.uint8))
        assert torch.equal(sb.view(torch.uint8), plain_b.view(torch.uint8))
        assert sa.shape == plain_a.shape and sa.dtype == plain_a.dtype
    for (a, b, _c), (fa, fb, _fc) in zip(data[0], fresh[0]):
        a.copy_(fa), b.copy_(fb)
    for (sa, sb), (fsa, fsb) in zip(data[2], fresh[2]):
        sa.copy_(fsa), sb.copy_(fsb)
    want = R.ref_kernel(R.clone_outputs(fresh))
    assert R.check(R.ref_kernel(R.clone_outputs(R.scales_as_read(data))), want) == (True, "ok")
    assert not R.check(R.ref_kernel(R.clone_outputs(data)), want)[0]  # the stale plain scales give another result
