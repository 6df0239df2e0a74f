"""GPU tests of the masked form (fastlaunch._C.grouped_mm_masked, kernels/sm90 nvfp4_group_gemm_masked; skipped
without CUDA): every call against the fp32 reference with out poisoned, rows at and past masked_m[g] left as they
were; decode and prefill sizes, G past one launch's 256 groups, counts written on the device by the kernel before,
and the planner's whole and split tiles and the narrow build forced."""
import json
import os
import random
import subprocess
import sys

import pytest
import torch

import fastlaunch
from fastlaunch import reference as R

from conftest import ROOT, fresh_seed, requires_cuda

pytestmark = requires_cuda


def run_masked(g, max_m, n, k, counts, seed, full_range=False):
    a, sfa, b, sfb, masked_m, out = R.generate_masked_input(g, max_m, n, k, counts, seed, device="cuda",
                                                            full_range=full_range, out_init="nan")
    before = out.clone()
    ref = R.ref_masked(a, sfa, b, sfb, masked_m)
    got = fastlaunch._C.grouped_mm_masked(a, sfa, b, sfb, masked_m, out)
    torch.cuda.synchronize()
    assert got is out
    return R.check_masked(out, ref, masked_m, before)


def _cases(rng):
    """(g, max_m, n, k, counts): decode steps (1-8 tokens per expert), prefill (64-512), edges, random."""
    cases = [
        (8, 8, 2048, 7168, [rng.randrange(1, 9) for _ in range(8)]),          # decode, narrow build
        (64, 8, 2048, 1024, [rng.randrange(0, 9) for _ in range(64)]),        # decode, 64 experts, some empty
        (8, 512, 2048, 1024, [rng.randrange(64, 513) for _ in range(8)]),     # prefill
        (4, 320, 1024, 512, [0, 320, 1, 193]),                                # empty, full, one row, 192 + 1
        (2, 64, 256, 64, [0, 0]),                                             # nothing to compute
        (1, 1, 8, 64, [1]),
        (300, 4, 128, 128, [rng.randrange(0, 5) for _ in range(300)]),        # two launches (256 + 44 groups)
        (8, 2, 4096, 14336, [0, 2, 0, 0, 1, 0, 0, 0]),                        # 2 experts' tiles split over all SMs
        (8, 512, 2048, 7168, [rng.randrange(64, 513) * (e % 2) for e in range(8)]),  # half the experts empty
    ]
    for _ in range(3):
        g, max_m = rng.randrange(1, 20), rng.randrange(1, 300)
        counts = [rng.randrange(0, max_m + 1) for _ in range(g)]
        cases.append((g, max_m, 8 * rng.randrange(1, 200), 64 * rng.randrange(1, 30), counts))
    return cases


def test_masked_against_the_reference():
    seed = fresh_seed()
    for i, case in enumerate(_cases(random.Random(seed))):
        ok, msg = run_masked(*case, seed + i, full_range=i % 3 == 2)
        assert ok, f"case {case[:4]} counts {case[4][:16]}: {msg}"


def test_masked_counts_from_the_kernel_before():
    # masked_m written on the device right before the call (no synchronisation): the kernels read it in stream order
    seed = fresh_seed()
    g, max_m, n, k = 8, 16, 1024, 512
    a, sfa, b, sfb, masked_m, out = R.generate_masked_input(g, max_m, n, k, 0, seed, device="cuda", out_init="nan")
    before = out.clone()
    experts = torch.randint(0, g, (40,), device="cuda", generator=torch.Generator("cuda").manual_seed(seed))
    counts = torch.bincount(experts, minlength=g).clamp(max=max_m).to(torch.int32)
    masked_m.copy_(counts)  # a device-to-device copy queued before the call
    fastlaunch._C.grouped_mm_masked(a, sfa, b, sfb, masked_m, out)
    torch.cuda.synchronize()
    ok, msg = R.check_masked(out, R.ref_masked(a, sfa, b, sfb, masked_m), masked_m, before)
    assert ok, msg


CHILD = r"""
import json, sys, torch
from fastlaunch import _C, reference as R
seed, cases = int(sys.argv[1]), json.loads(sys.argv[2])
for i, (g, max_m, n, k, counts) in enumerate(cases):
    a, sfa, b, sfb, mm, out = R.generate_masked_input(g, max_m, n, k, counts, seed + i, device="cuda")
    before = out.clone()
    ref = R.ref_masked(a, sfa, b, sfb, mm)
    _C.grouped_mm_masked(a, sfa, b, sfb, mm, out)
    torch.cuda.synchronize()
    ok, msg = R.check_masked(out, ref, mm, before)
    print(f"case {i}: {'ok' if ok else 'FAIL ' + msg}", flush=True)
"""


@pytest.mark.parametrize("env", [{"FASTLAUNCH_SM90_SHARE": "whole"}, {"FASTLAUNCH_SM90_SHARE": "split"},
                                 {"FASTLAUNCH_SM90_SHARE": "split:4"}, {"FASTLAUNCH_SM90_NARROW": "1"},
                                 {"FASTLAUNCH_SM90_NARROW": "0"}, {"FASTLAUNCH_SM90_WCAP": "128"},
                                 {"FASTLAUNCH_SM90_SHARE": "wave"}, {"FASTLAUNCH_SM90_PREFETCH": "0"}],
                         ids=lambda e: ",".join(f"{k[15:]}={v}" for k, v in e.items()))
def test_masked_forced_plans(env):
    # whole tiles, split tiles and waves, forced on the host's plan and on the device's schedule alike (a split of
    # the tiles that hold rows must hand its partial sums over consistently), the narrow build
    seed = fresh_seed()
    rng = random.Random(seed)
    cases = [(8, 24, 1024, 2048, [rng.randrange(0, 25) for _ in range(8)]),
             (2, 400, 512, 4096, [0, 257]), (3, 200, 256, 7168, [200, 1, 64]), (16, 8, 2048, 512, [3] * 16),
             (8, 8, 4096, 7168, [0, 0, 5, 0, 0, 0, 8, 0])]
    out = subprocess.run([sys.executable, "-c", CHILD, str(seed), json.dumps(cases)], cwd=ROOT, capture_output=True,
                         text=True, timeout=600, env={**os.environ, **env})
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count(": ok") == len(cases), out.stdout


@pytest.mark.parametrize("env", [{"FASTLAUNCH_SM90_SKINNY": "1"}, {"FASTLAUNCH_SM90_SKINNY": "1",
                                                                   "FASTLAUNCH_SM90_SKINNY_SPLIT": "2"},
                                 {"FASTLAUNCH_SM90_SKINNY": "1", "FASTLAUNCH_SM90_SKINNY_LANES": "32"},
                                 {"FASTLAUNCH_SM90_SKINNY": "0"}],
                         ids=lambda e: ",".join(f"{k[15:]}={v}" for k, v in e.items()))
def test_masked_decode_on_the_skinny_kernel(env):
    # max_m <= 16: the skinny kernel forced (its K split, its lanes) or ruled out; experts of count 0 included, and
    # more than 16 experts (one skinny launch per 16)
    seed = fresh_seed()
    rng = random.Random(seed)
    cases = [(8, 8, 2048, 1024, [rng.randrange(0, 9) for _ in range(8)]), (3, 16, 512, 2048, [16, 0, 5]),
             (40, 4, 256, 512, [rng.randrange(0, 5) for _ in range(40)]), (1, 1, 8, 64, [1])]
    out = subprocess.run([sys.executable, "-c", CHILD, str(seed), json.dumps(cases)], cwd=ROOT, capture_output=True,
                         text=True, timeout=600, env={**os.environ, **env})
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count(": ok") == len(cases), out.stdout


FORMS_CHILD = r"""
import json, sys, torch
import fastlaunch
from fastlaunch import reference as R
seed, cases = int(sys.argv[1]), json.loads(sys.argv[2])
for i, (g, max_m, n, k, counts, dtype, scaled) in enumerate(cases):
    a, sfa, b, sfb, mm, out = R.generate_masked_input(g, max_m, n, k, counts, seed + i, device="cuda")
    out = torch.full(out.shape, float("nan"), dtype=getattr(torch, dtype), device="cuda")
    alpha = None
    if scaled:  # a scale per expert, 2^-6 .. 2^3 (fp16 outputs stay finite), one expert's exactly 1
        gen = torch.Generator().manual_seed(seed + i)
        alpha = (torch.rand(g, generator=gen) + 0.5) * torch.exp2(torch.randint(-6, 3, (g,), generator=gen).float())
        alpha[0] = 1.0
        alpha = alpha.cuda()
    before = out.clone()
    ref = R.ref_masked(a, sfa, b, sfb, mm, alpha)
    got = fastlaunch.grouped_mm_masked(a, sfa, b, sfb, mm, out, alpha=alpha)
    torch.cuda.synchronize()
    # bf16 keeps 8 significant bits: half an ulp is 2^-9 of the value
    rtol = 4e-3 if dtype == "bfloat16" else R.RTOL
    ok, msg = R.check_masked(out, ref, mm, before, rtol=rtol)
    ok = ok and got is out
    print(f"case {i} {dtype} alpha={scaled}: {'ok' if ok else 'FAIL ' + msg}", flush=True)
"""


@pytest.mark.parametrize("env", [{}, {"FASTLAUNCH_SM90_SKINNY": "1"}, {"FASTLAUNCH_SM90_SKINNY": "1",
                                                                       "FASTLAUNCH_SM90_SKINNY_SPLIT": "2"},
                                 {"FASTLAUNCH_SM90_SKINNY": "0", "FASTLAUNCH_SM90_NARROW": "1"},
                                 {"FASTLAUNCH_SM90_SHARE": "split"}, {"FASTLAUNCH_SM90_SHARE": "wave"}],
                         ids=lambda e: ",".join(f"{k[15:]}={v}" for k, v in e.items()) or "planner")
def test_masked_bf16_out_and_alpha(env):
    # out in bf16 and fp16, with and without a global scale per expert, on every kernel of the masked form: the skinny
    # kernel (its K split), the wgmma kernel's narrow build, split tiles and wave plans; counts of 0 and max_m
    seed = fresh_seed()
    rng = random.Random(seed)
    cases = []
    for dtype in ("bfloat16", "float16"):
        for scaled in (False, True):
            cases += [(8, 8, 2048, 1024, [0] + [rng.randrange(1, 9) for _ in range(6)] + [8], dtype, scaled),
                      (4, 300, 512, 2048, [300, 0, 129, rng.randrange(1, 301)], dtype, scaled),
                      (20, 16, 256, 512, [rng.randrange(0, 17) for _ in range(20)], dtype, scaled)]
    out = subprocess.run([sys.executable, "-c", FORMS_CHILD, str(seed), json.dumps(cases)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600, env={**os.environ, **env})
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count(": ok") == len(cases), out.stdout


WEIGHT_ONLY_CHILD = r"""
import json, sys, torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
import fastlaunch
from fastlaunch import reference as R
seed, cases, kernels = int(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
for i, (g, max_m, n, k, counts, dtype, scaled, exact, a_dtype) in enumerate(cases):
    a, sfa, b, sfb, mm, _out = R.generate_masked_input(g, max_m, n, k, counts, seed + i, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(seed + i)
    if exact:  # the NVFP4 activations' values in fp16 (exact): the same products as the NVFP4 form's
        plain = R.unblock_scales(sfa, max_m)
        x = torch.stack([R.dequantize(a[e], plain[e]) for e in range(g)]).half()
    else:  # any fp16 values, rows past the counts included (they feed only rows never stored)
        x = (torch.randn(g, max_m, k, generator=gen, device="cuda") / 4).half()
    x = x.to(getattr(torch, a_dtype))  # (bf16: the NVFP4 values are bf16 values too; random ones rounded again)
    out = torch.full((g, max_m, n), float("nan"), dtype=getattr(torch, dtype), device="cuda")
    alpha = None
    if scaled:
        alpha = torch.exp2(torch.randint(-3, 3, (g,), generator=gen, device="cuda").float())
    before = out.clone()
    ref = R.ref_masked(x, None, b, sfb, mm, alpha)
    got = fastlaunch.grouped_mm_masked(x, None, b, sfb, mm, out, alpha=alpha)
    torch.cuda.synchronize()
    ok, msg = R.check_masked(out, ref, mm, before, rtol=4e-3 if dtype == "bfloat16" else R.RTOL)
    ok = ok and got is out
    if ok and exact and max_m > 16:  # bit for bit the NVFP4 form's output on the same values (its A converted to
        # the same fp16, the same plan; at most 16 rows the NVFP4 form may take the skinny kernel instead)
        nv = torch.full_like(out, float("nan"))
        fastlaunch.grouped_mm_masked(a, sfa, b, sfb, mm, nv, alpha=alpha)
        torch.cuda.synchronize()
        rows = [out[e, :c] for e, c in enumerate(mm.tolist())]
        nv_rows = [nv[e, :c] for e, c in enumerate(mm.tolist())]
        same = all(torch.equal(p.view(torch.int16), q.view(torch.int16)) for p, q in zip(rows, nv_rows))
        ok, msg = same, "differs from the NVFP4 form's output"
    if ok and kernels is not None:  # GPU kernels one call runs
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fastlaunch.grouped_mm_masked(x, None, b, sfb, mm, out, alpha=alpha)
            torch.cuda.synchronize()
        ran = [e.name for e in prof.events() if e.device_type == DeviceType.CUDA and not e.name.startswith(("Memcpy", "Memset"))]
        expect = kernels
        ok, msg = len(ran) == expect, f"{len(ran)} kernels ({ran}), expected {expect}"
    # graph capture: replayed with new counts, the new step
    if ok:
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            with torch.cuda.graph(graph):
                fastlaunch.grouped_mm_masked(x, None, b, sfb, mm, out, alpha=alpha)
        mm.copy_(torch.randint(0, max_m + 1, (g,), generator=gen, device="cuda", dtype=torch.int32))
        out.fill_(float("nan"))
        before = out.clone()
        graph.replay()
        torch.cuda.synchronize()
        ok, msg = R.check_masked(out, R.ref_masked(x, None, b, sfb, mm, alpha), mm, before,
                                 rtol=4e-3 if dtype == "bfloat16" else R.RTOL)
        msg = "graph replay: " + msg
    print(f"case {i} g={g} max_m={max_m} a {a_dtype} out {dtype} alpha={scaled} exact={exact}: "
          f"{'ok' if ok else 'FAIL ' + msg}",
          flush=True)
"""


@pytest.mark.parametrize("env,kernels", [({}, None), ({"FASTLAUNCH_SM90_SHARE": "whole"}, 2),
                                         ({"FASTLAUNCH_SM90_SHARE": "split"}, 2),
                                         ({"FASTLAUNCH_SM90_SHARE": "wave"}, 2),
                                         ({"FASTLAUNCH_SM90_NARROW": "1"}, None)],
                         ids=["planner", "whole", "split", "wave", "narrow"])
def test_masked_weight_only(env, kernels):
    # a float16 or bfloat16 [G, max_m, K], sfa None: against the reference of a's values, bit for bit the NVFP4 form's
    # output where a holds the NVFP4 activations' values, two kernels a call (a's permutation into the GEMM's K order, the
    # GEMM), and a graph replayed with new counts; bf16 and fp16 out, with and without alpha
    seed = fresh_seed()
    rng = random.Random(seed)
    cases = []
    for dtype, scaled in (("float16", False), ("bfloat16", True)):
        for exact in (True, False):
            a_dtype = "bfloat16" if exact == scaled else "float16"  # each a dtype with each out dtype, exact or not
            cases += [(8, 8, 2048, 1024, [0] + [rng.randrange(1, 9) for _ in range(6)] + [8], dtype, scaled, exact,
                       a_dtype),
                      (4, 300, 512, 2048, [300, 0, 129, rng.randrange(1, 301)], dtype, scaled, exact, a_dtype),
                      (20, 64, 256, 512, [rng.randrange(0, 65) for _ in range(20)], dtype, scaled, exact, a_dtype)]
    out = subprocess.run([sys.executable, "-c", WEIGHT_ONLY_CHILD, str(seed), json.dumps(cases), json.dumps(kernels)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, **env})
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count(": ok") == len(cases), out.stdout


SCHEDULE_CHILD = r"""
import json, os, sys, torch
# the GEMM's trace buffer (read once, when fastlaunch first sets the device up): per CTA 16 events of 2 uint64
sms = torch.cuda.get_device_properties(0).multi_processor_count
trace = torch.zeros(sms * 16 * 2, dtype=torch.int64, device="cuda")
os.environ["FASTLAUNCH_SM90_TRACE"] = str(trace.data_ptr())
from fastlaunch import _C, reference as R
seed, cases = int(sys.argv[1]), json.loads(sys.argv[2])
for i, (g, max_m, n, k, counts) in enumerate(cases):
    a, sfa, b, sfb, mm, out = R.generate_masked_input(g, max_m, n, k, counts, seed + i, device="cuda")
    trace.zero_()
    _C.grouped_mm_masked(a, sfa, b, sfb, mm, out)
    torch.cuda.synchronize()
    ev = trace.view(sms, 16, 2).cpu()
    grid = int((ev[:, 0, 0] != 0).sum())  # CTAs that ran (each writes its entry event)
    pair = lambda v: (int(v) & 0xFFFFFFFF, (int(v) >> 32) & 0xFFFFFFFF)  # two non-negative int32 (gemm.cuh)
    device = [pair(ev[b, 12, 0]) + pair(ev[b, 12, 1]) + pair(ev[b, 13, 0]) for b in range(grid)]
    print(json.dumps({"case": i, "grid": grid, "device": device,
                      "walks": sorted({pair(ev[b, 13, 1]) for b in range(grid)}),
                      "a16": sorted({int(ev[b, 14, 0]) for b in range(grid)})}), flush=True)
"""


def test_device_schedule_matches_the_cpu_model():
    # The schedule each CTA made on the device (its trace points) is the CPU model's (fastlaunch._C.row_schedule,
    # the same header), for the tiles that hold rows this call: widths and B blocks from the launch's plan at max_m,
    # rows from the counts. NVFP4 activations at max_m > 16 and G > 16 (neither the skinny kernel nor reduced tiles).
    seed = fresh_seed()
    rng = random.Random(seed)
    cases = [(20, 64, 2048, 2048, [rng.randrange(0, 65) for _ in range(20)]),
             (20, 512, 2048, 7168, [rng.randrange(64, 513) * (e % 2) for e in range(20)]),
             (20, 512, 2048, 7168, [rng.randrange(256, 513) for e in range(20)]),  # past L2: waves
             (24, 32, 4096, 14336, [0] * 22 + [3, 17]), (17, 300, 1024, 512, [0] * 17)]
    proc = subprocess.run([sys.executable, "-c", SCHEDULE_CHILD, str(seed), json.dumps(cases)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(s) for s in proc.stdout.splitlines() if s.startswith("{")]
    assert len(lines) == len(cases), proc.stdout
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for (g, max_m, n, k, counts), r in zip(cases, lines):
        groups = fastlaunch._C.plan([(max_m, n, k)] * g, sms, 0, 0, 0, 2, 0, 2)[0]
        expected_tiles = sum(-(-c // w) * tiles_n for c, (w, _chunks, tiles_n, _rank) in zip(counts, groups))
        a16 = sum(-(-c // w) * w for c, (w, _chunks, _tiles_n, _rank) in zip(counts, groups)) * k * 2
        assert r["walks"] == [[expected_tiles, k // 64]], (counts, r["walks"])
        assert r["a16"] == [a16], (counts, r["a16"])
        models = [fastlaunch._C.row_schedule(expected_tiles, k // 64, r["grid"], wave_ok, 0, a16)[2]
                  for wave_ok in (1, 0)]
        device = [tuple(s) for s in r["device"]]
        assert device in [list(m) for m in models], f"case {counts}: device {device[:4]}... model {models[0][:4]}..."
