"""GPU tests of the fused masked kernels (FASTLAUNCH_SM90_FUSE=1: kernels/sm90/gemm.cuh nvfp4_group_gemm_masked_fused,
one launch whose own warps convert A; skipped without CUDA): against the fp32 reference with out poisoned, bit for
bit the two-launch path's output on the same inputs and schedule (the same fp16 A, the same tiles), one kernel a
call, CUDA graphs replayed with new counts and new activations (the ready flags are put back after every launch),
the masked layout (NVFP4, fp16 and bf16 activations), the contiguous layout and the task form on the device schedule,
under each forced shape of the device schedule; the task form's planned launches (nvfp4_group_gemm_fused) under
each width cap and shape of share, and one kernel a call."""
import json
import os
import random
import subprocess
import sys

import pytest

from conftest import ROOT, fresh_seed, requires_cuda
from test_gpu import EVERY_SHAPE_CASES, ROWS_CASES, check_in_child

pytestmark = requires_cuda

CHILD = r"""
import hashlib, json, sys, torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
import fastlaunch
from fastlaunch import reference as R
seed, cases = int(sys.argv[1]), json.loads(sys.argv[2])

def kernels(fn):
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events()
            if e.device_type == DeviceType.CUDA and not e.name.startswith(("Memcpy", "Memset"))]

for i, (layout, g, max_m, n, k, counts, a_kind) in enumerate(cases):
    a, sfa, b, sfb, mm, _ = R.generate_masked_input(g, max_m, n, k, counts, seed + i, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(seed + i)
    if layout == "masked":
        x, xs = (a, sfa) if a_kind == "nvfp4" else ((torch.randn(g, max_m, k, generator=gen, device="cuda") / 4).to(
            getattr(torch, a_kind)), None)
        out = torch.full((g, max_m, n), float("nan"), dtype=torch.float16, device="cuda")
        call = lambda: fastlaunch.grouped_mm_masked(x, xs, b, sfb, mm, out)
        ref = lambda: R.ref_masked(x, xs, b, sfb, mm)
        check = lambda before: R.check_masked(out, ref(), mm, before)
        def renew():
            mm.copy_(torch.randint(0, max_m + 1, (g,), generator=gen, device="cuda", dtype=torch.int32))
            if xs is None:
                x.copy_((torch.randn(g, max_m, k, generator=gen, device="cuda") / 4).to(x.dtype))
    else:
        T = max_m
        x = (torch.randn(T, k, generator=gen, device="cuda") / 4).to(getattr(torch, a_kind))
        mm.copy_(torch.tensor(sorted(counts), dtype=torch.int32))  # the experts' end offsets
        out = torch.full((T, n), float("nan"), dtype=torch.float16, device="cuda")
        call = lambda: fastlaunch.grouped_mm_contiguous(x, None, b, sfb, mm, out)
        check = lambda before: R.check_contiguous(out, R.ref_contiguous(x, b, sfb, mm), before)
        def renew():
            mm.copy_(torch.sort(torch.randint(0, T + 1, (g,), generator=gen, device="cuda", dtype=torch.int32))[0])
            x.copy_((torch.randn(T, k, generator=gen, device="cuda") / 4).to(x.dtype))
    before = out.clone()
    call()
    torch.cuda.synchronize()
    ok, msg = check(before)
    digest = hashlib.sha1(out.view(torch.int16).cpu().numpy().tobytes()).hexdigest()
    ran = kernels(call)
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        with torch.cuda.graph(graph):
            call()
    for replay in range(3):
        if not ok:
            break
        renew()
        out.fill_(float("nan"))
        before = out.clone()
        graph.replay()
        torch.cuda.synchronize()
        ok, msg = check(before)
        msg = f"graph replay {replay}: {msg}"
    print(json.dumps({"case": i, "ok": ok, "msg": msg, "digest": digest, "kernels": len(ran)}), flush=True)
"""


def _cases(rng):
    """(layout, g, max_m or T, n, k, counts or ends, activations): decode (the narrow build), prefill (the main
    build, past L2: waves), half the experts empty, two experts' tiles split over the SMs, a long K, 16 experts,
    fp16 and bf16 activations, the contiguous layout."""
    return [("masked", 8, 24, 2048, 7168, [rng.randrange(0, 25) for _ in range(8)], "nvfp4"),
            ("masked", 8, 512, 2048, 7168, [rng.randrange(64, 513) for _ in range(8)], "nvfp4"),
            ("masked", 8, 512, 2048, 1024, [rng.randrange(64, 513) * (e % 2) for e in range(8)], "nvfp4"),
            ("masked", 8, 40, 4096, 14336, [0, 40, 0, 0, 1, 0, 0, 0], "nvfp4"),
            ("masked", 16, 200, 1024, 512, [rng.randrange(0, 201) for _ in range(16)], "nvfp4"),
            ("masked", 3, 300, 256, 7168, [300, 1, 129], "nvfp4"),
            ("masked", 8, 64, 2048, 2048, [rng.randrange(0, 65) for _ in range(8)], "bfloat16"),
            ("masked", 4, 300, 512, 2048, [300, 0, 129, rng.randrange(1, 301)], "float16"),
            ("contiguous", 8, 1000, 512, 1024, [rng.randrange(0, 1001) for _ in range(8)], "float16"),
            ("contiguous", 8, 2048, 2048, 2048, [rng.randrange(0, 2049) for _ in range(7)] + [2048], "bfloat16")]


def _run(seed, cases, env):
    out = subprocess.run([sys.executable, "-c", CHILD, str(seed), json.dumps(cases)], cwd=ROOT, capture_output=True,
                         text=True, timeout=600, env={**os.environ, "FASTLAUNCH_SM90_SKINNY": "0", **env})
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == len(cases), out.stdout[-3000:]
    return rows


@pytest.mark.parametrize("share", ["", "whole", "split", "wave"])
def test_fused_against_the_reference_and_the_two_launches(share):
    seed = fresh_seed()
    cases = _cases(random.Random(seed))
    env = {"FASTLAUNCH_SM90_SHARE": share} if share else {}
    fused = _run(seed, cases, {**env, "FASTLAUNCH_SM90_FUSE": "1"})
    plain = _run(seed, cases, {**env, "FASTLAUNCH_SM90_FUSE": "0"})
    for case, f, p in zip(cases, fused, plain):
        assert f["ok"], f"{case[:5]}: {f['msg']}"
        assert p["ok"], f"{case[:5]} (two launches): {p['msg']}"
        assert f["kernels"] == 1 and p["kernels"] == 2, f"{case[:5]}: kernels a call {f['kernels']}, {p['kernels']}"
        assert f["digest"] == p["digest"], f"{case[:5]}: the fused output differs from the two launches' output"


def test_fused_task_form_on_the_device_schedule():
    # the task form's launches of up to 16 groups on the device schedule (FASTLAUNCH_SM90_ROWS=1) run fused; each
    # called twice, the outputs poisoned each time
    check_in_child(ROWS_CASES, dict(os.environ, FASTLAUNCH_SM90_ROWS="1", FASTLAUNCH_SM90_FUSE="1"), calls=2)



@pytest.mark.parametrize("cap, share", [("", ""), ("128", ""), ("", "whole"), ("", "split"), ("128", "split:2"),
                                        ("", "wave"), ("", "reduce")])
def test_fused_task_form_planned(cap, share):
    # the planner's launches (FASTLAUNCH_SM90_ROWS=0) in one launch where they are whole or split tiles of aligned C
    # rows; reduced and half tiles, and unaligned C, keep two launches (their checks run the same)
    env = dict(os.environ, FASTLAUNCH_SM90_ROWS="0", FASTLAUNCH_SM90_FUSE="1")
    if cap:
        env["FASTLAUNCH_SM90_WCAP"] = cap
    if share:
        env["FASTLAUNCH_SM90_SHARE"] = share
    check_in_child(EVERY_SHAPE_CASES + ROWS_CASES, env, calls=2)


KERNELS_CHILD = r"""
import json, sys, torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
import fastlaunch
from fastlaunch import reference as R
seed = int(sys.argv[1])
counts = []
for i, (ms, n, k) in enumerate([([80, 176, 128, 72, 64, 248, 96, 160], 4096, 7168), ([192, 320], 3072, 4096)]):
    data = R.generate_input(ms, [n] * len(ms), [k] * len(ms), len(ms), seed + i)
    for call in range(3):  # the device schedule, then the plan (FASTLAUNCH_SM90_ROWS=first), then the plan held
        R.poison(data)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            out = fastlaunch.fast_launch(data)
            torch.cuda.synchronize()
        ok, msg = R.check(out, R.ref_kernel(data))
        assert ok, msg
        counts.append(len([e for e in prof.events() if e.device_type == DeviceType.CUDA and
                           not e.name.startswith(("Memcpy", "Memset"))]))
print(json.dumps(counts))
"""


def test_fused_task_form_is_one_kernel_a_call():
    out = subprocess.run([sys.executable, "-c", KERNELS_CHILD, str(fresh_seed())], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "FASTLAUNCH_SM90_FUSE": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [1] * 6, out.stdout
