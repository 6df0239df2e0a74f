"""GPU tests of the direct-A kernels (kernels/sm90/gemm.cuh direct_a_producer; skipped without CUDA): launches of up
to 16 groups whose every tile is a narrow tile (at most 32 A rows) run as one kernel that converts A itself
(FASTLAUNCH_SM90_DIRECT=1). Each case is checked against the fp32 reference with its outputs poisoned, its outputs
must be bit for bit those of the conversion kernel and the GEMM (FASTLAUNCH_SM90_DIRECT=0, the same plan), and the
kernels one call runs are counted: one where every tile is narrow, two otherwise. The task form planned and on the
device schedule, and the masked form (NVFP4, bf16 and fp16 activations) with counts of 0 and max_m, replayed in a CUDA
graph with new counts."""
import json
import os
import random
import subprocess
import sys

import pytest
import torch

import fastlaunch._C as _C

from conftest import ROOT, fresh_seed, requires_cuda

pytestmark = requires_cuda

CHILD = r"""
import hashlib, json, sys, torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
import fastlaunch
from fastlaunch import _C, reference as R
seed, cases = int(sys.argv[1]), json.loads(sys.argv[2])


def kernels(call):
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    return [e.name for e in prof.events()
            if e.device_type == DeviceType.CUDA and not e.name.startswith(("Memcpy", "Memset"))]


def digest(tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.contiguous().view(torch.int16).cpu().numpy().tobytes())
    return h.hexdigest()


for i, case in enumerate(cases):
    if case[0] == "task":
        _, g, ms, ns, ks = case
        d = R.generate_input(ms, ns, ks, g, seed + i, device="cuda")
        ok, msg = R.run_checked(fastlaunch.fast_launch, d)
        outs = [c for _a, _b, c in d[0]]
        h = digest(outs)
        ran = kernels(lambda: fastlaunch.fast_launch(d))
    else:
        _, g, max_m, n, k, counts, a_dtype = case
        a, sfa, b, sfb, mm, out = R.generate_masked_input(g, max_m, n, k, counts, seed + i, device="cuda",
                                                          out_init="nan")
        if a_dtype:  # weight-only: any values of that dtype, sfa None
            gen = torch.Generator(device="cuda").manual_seed(seed + i)
            a = (torch.randn(g, max_m, k, generator=gen, device="cuda") / 4).to(getattr(torch, a_dtype))
            sfa = None
        before = out.clone()
        _C.grouped_mm_masked(a, sfa, b, sfb, mm, out)
        torch.cuda.synchronize()
        ok, msg = R.check_masked(out, R.ref_masked(a, sfa, b, sfb, mm), mm, before)
        h = digest(out[e, :c] for e, c in enumerate(mm.tolist()))
        ran = kernels(lambda: _C.grouped_mm_masked(a, sfa, b, sfb, mm, out))
        if ok:  # a graph replayed with new counts computes the new step
            graph = torch.cuda.CUDAGraph()
            side = torch.cuda.Stream()
            with torch.cuda.stream(side):
                with torch.cuda.graph(graph):
                    _C.grouped_mm_masked(a, sfa, b, sfb, mm, out)
            gen = torch.Generator(device="cuda").manual_seed(seed + i)
            mm.copy_(torch.randint(0, max_m + 1, (g,), generator=gen, device="cuda", dtype=torch.int32))
            out.fill_(float("nan"))
            before = out.clone()
            graph.replay()
            torch.cuda.synchronize()
            ok, msg = R.check_masked(out, R.ref_masked(a, sfa, b, sfb, mm), mm, before)
            msg = "graph replay: " + msg
    print(json.dumps({"case": i, "ok": bool(ok), "msg": msg, "hash": h, "kernels": ran}), flush=True)
"""


def run_cases(cases, seed, env):
    out = subprocess.run([sys.executable, "-c", CHILD, str(seed), json.dumps(cases)], cwd=ROOT, capture_output=True,
                         text=True, timeout=600, env={**os.environ, **env})
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == len(cases), out.stdout[-3000:]
    for r in rows:
        assert r["ok"], (cases[r["case"]], r["msg"])
    return rows


def _task_cases(rng):
    # (every group at most 32 rows: one launch, else two) decode steps of 1-8 and 1-32 rows, the narrow N's edge,
    # unaligned C rows (N % 8 != 0), long K split over CTAs, a launch of 16 groups, then 33 rows and 17 groups
    return [
        ("task", 8, [rng.randrange(1, 9) for _ in range(8)], [2048] * 8, [7168] * 8),
        ("task", 8, [1, 2, 5, 8, 13, 16, 31, 32], [512, 256, 384, 128, 520, 256, 128, 1024], [1536] * 8),
        ("task", 3, [32, 7, 1], [1001, 136, 8], [256, 512, 64]),
        ("task", 1, [4], [256], [14336]),
        ("task", 16, [rng.randrange(1, 33) for _ in range(16)], [256] * 16, [512] * 16),
        ("task", 2, [33, 4], [256, 256], [512, 512]),
        ("task", 17, [rng.randrange(1, 33) for _ in range(17)], [128] * 17, [256] * 17),
    ]


def _expect_direct(case, rows):
    """Whether the launcher takes the direct-A kernel for a task-form case: up to 16 groups, every tile narrow (the
    planner's choice on the CPU, with the settings the test forces; on the device schedule where the launch fits it,
    kernels/sm90/plan/row_plan.h, every group of at most 32 rows), no reduced tiles."""
    _, g, ms, ns, ks = case
    sizes = list(zip(ms, ns, ks))
    if g > 16:
        return False
    if rows == "1" and _C.row_plan(sizes) is not None:
        return max(ms) <= _C.narrow_n
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    force = (0, 0, 0, 2, 1, 0) if rows == "0" else (0, 0, 0, 0, 0, 0)  # share cap parts half narrow mid
    return set(_C.mma_n(sizes, sms, *force)) == {_C.narrow_n} and _C.plan(sizes, sms, *force)[4] == 0


@pytest.mark.parametrize("rows", ["0", "1"], ids=["planned", "device-schedule"])
def test_task_form_direct_a(rows):
    # the narrow build forced where the planner weighs it (ROWS=0, half tiles off), or every launch that fits on the
    # device schedule (ROWS=1, the masked kernels); the skinny kernel ruled out
    seed = fresh_seed()
    cases = _task_cases(random.Random(seed))
    env = {"FASTLAUNCH_SM90_SKINNY": "0", "FASTLAUNCH_SM90_ROWS": rows, "FASTLAUNCH_SM90_DIRECT": "1"}
    if rows == "0":
        env.update(FASTLAUNCH_SM90_NARROW="1", FASTLAUNCH_SM90_HALF="0")
    direct = run_cases(cases, seed, env)
    split = run_cases(cases, seed, {**env, "FASTLAUNCH_SM90_DIRECT": "0"})
    taken = 0
    for case, d, s in zip(cases, direct, split):
        assert d["hash"] == s["hash"], (case, "outputs differ from the conversion kernel's path")
        assert len(s["kernels"]) >= 2, (case, s["kernels"])
        if _expect_direct(case, rows):
            taken += 1
            assert len(d["kernels"]) == 1 and "direct" in d["kernels"][0], (case, d["kernels"])
        else:
            assert d["kernels"] == s["kernels"], (case, d["kernels"])
    assert taken >= 4, taken  # the decode steps at least


def test_masked_form_direct_a():
    # decode steps of up to 32 tokens per expert, experts with 0 and max_m tokens, a long K, 16 experts, then 40
    # experts (more than one launch's 16: two kernels) and max_m 33; NVFP4 activations and the weight-only forms
    seed = fresh_seed()
    rng = random.Random(seed)
    cases = [("masked", 8, 8, 2048, 7168, [0] + [rng.randrange(1, 9) for _ in range(6)] + [8], None),
             ("masked", 4, 32, 1024, 2048, [32, 0, 31, 1], None),
             ("masked", 16, 16, 512, 4096, [rng.randrange(0, 17) for _ in range(16)], None),
             ("masked", 2, 24, 256, 14336, [24, 5], None),
             ("masked", 40, 8, 256, 512, [rng.randrange(0, 9) for _ in range(40)], None),
             ("masked", 3, 33, 512, 1024, [33, 0, 17], None)]
    # weight-only (bf16 and fp16 activations, sfa None) alike
    cases += [("masked", 8, 8, 2048, 7168, [0] + [rng.randrange(1, 9) for _ in range(6)] + [8], "bfloat16"),
              ("masked", 4, 32, 1024, 2048, [32, 0, 31, 1], "float16"),
              ("masked", 16, 16, 512, 4096, [rng.randrange(0, 17) for _ in range(16)], "bfloat16"),
              ("masked", 3, 33, 512, 1024, [33, 0, 17], "float16")]
    env = {"FASTLAUNCH_SM90_SKINNY": "0", "FASTLAUNCH_SM90_NARROW": "1", "FASTLAUNCH_SM90_DIRECT": "1"}
    direct = run_cases(cases, seed, env)
    split = run_cases(cases, seed, {**env, "FASTLAUNCH_SM90_DIRECT": "0"})
    for case, d, s in zip(cases, direct, split):
        assert d["hash"] == s["hash"], (case, "outputs differ from the conversion kernel's path")
        if case[1] <= 16 and case[2] <= 32:
            assert len(d["kernels"]) == 1 and "direct" in d["kernels"][0], (case, d["kernels"])
            assert len(s["kernels"]) == 2, (case, s["kernels"])
        else:
            assert d["kernels"] == s["kernels"], (case, d["kernels"])
