"""GPU tests of the masked form's one-launch decode (kernels/sm90/gemm.cuh nvfp4_group_gemm_masked_self: the GEMM
stages A itself, no conversion kernel; FASTLAUNCH_SM90_SELF=1 takes it wherever it may run, 0 never): NVFP4, fp16
and bf16 activations in the masked layout and fp16 / bf16 ones in the contiguous layout, decode sizes with empty and
full experts, 64 experts and 300 (two launches), whole tiles and split ones; each call against the fp32 reference
with out poisoned, one kernel a call against the two of the conversion path, bit for bit that path's output, calls
back to back with new counts, and a CUDA graph replayed with new counts (skipped without CUDA)."""
import json
import os
import random
import subprocess
import sys

import pytest

from conftest import ROOT, fresh_seed, requires_cuda

pytestmark = requires_cuda

CHILD = r"""
import hashlib, json, sys, torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
import fastlaunch
from fastlaunch import reference as R
seed, cases = int(sys.argv[1]), json.loads(sys.argv[2])
for i, (layout, a_kind, g, max_m, n, k, counts, out_dtype) in enumerate(cases):
    gen = torch.Generator(device="cuda").manual_seed(seed + i)
    odt = getattr(torch, out_dtype)
    alpha = torch.exp2(torch.randint(-3, 3, (g,), generator=gen, device="cuda").float()) if out_dtype == "bfloat16" else None
    rtol = 4e-3 if out_dtype == "bfloat16" else R.RTOL
    if layout == "masked":
        a, sfa, b, sfb, mm, _o = R.generate_masked_input(g, max_m, n, k, counts, seed + i, device="cuda",
                                                         full_range=i % 2 == 1)
        if a_kind != "nvfp4":
            a = (torch.randn(g, max_m, k, generator=gen, device="cuda") / 4).to(getattr(torch, a_kind))
            sfa = None
        out = torch.full((g, max_m, n), float("nan"), dtype=odt, device="cuda")
        call = lambda: fastlaunch.grouped_mm_masked(a, sfa, b, sfb, mm, out, alpha=alpha)
        check = lambda: R.check_masked(out, R.ref_masked(a, sfa, b, sfb, mm, alpha), mm, before, rtol=rtol)
        renew = lambda: mm.copy_(torch.randint(0, max_m + 1, (g,), generator=gen, device="cuda", dtype=torch.int32))
    else:
        _a, _sfa, b, sfb, _m, _o = R.generate_masked_input(g, 1, n, k, 0, seed + i, device="cuda")
        T = max_m
        a = (torch.randn(T, k, generator=gen, device="cuda") / 4).to(getattr(torch, a_kind))
        mm = torch.tensor(counts, dtype=torch.int32, device="cuda")  # the experts' end offsets
        out = torch.full((T, n), float("nan"), dtype=odt, device="cuda")
        call = lambda: fastlaunch.grouped_mm_contiguous(a, None, b, sfb, mm, out, alpha=alpha)
        check = lambda: R.check_contiguous(out, R.ref_contiguous(a, b, sfb, mm, alpha), before, rtol=rtol)
        renew = lambda: mm.copy_(torch.sort(torch.randint(0, T + 1, (g,), generator=gen, device="cuda"))[0].to(torch.int32))
    before = out.clone()
    call()
    torch.cuda.synchronize()
    ok, msg = check()
    digest = hashlib.sha256(out.view(torch.int16).cpu().numpy().tobytes()).hexdigest()[:16]
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    ran = [e.name for e in prof.events() if e.device_type == DeviceType.CUDA and not e.name.startswith(("Memcpy", "Memset"))]
    for _ in range(3):  # calls back to back, new counts each (the flags of split tiles taken and put back every call)
        renew()
        out.fill_(float("nan"))
        before = out.clone()
        call()
        torch.cuda.synchronize()
        if ok:
            ok, msg = check()
            msg = "again: " + msg
    if ok:  # graph capture, replayed with new counts
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            with torch.cuda.graph(graph):
                call()
        for _ in range(2):
            renew()
            out.fill_(float("nan"))
            before = out.clone()
            graph.replay()
            torch.cuda.synchronize()
            ok, msg = check()
            msg = "graph replay: " + msg
            if not ok:
                break
    print(json.dumps({"case": i, "ok": ok, "msg": msg, "digest": digest, "kernels": len(ran), "names": ran}), flush=True)
"""


def _cases(rng):
    """(layout, activations, G, max_m or T, N, K, counts or end offsets, out dtype): decode steps."""
    cases = []
    for a_kind, out_dtype in (("nvfp4", "float16"), ("nvfp4", "bfloat16"), ("float16", "float16"),
                              ("bfloat16", "bfloat16")):
        cases += [("masked", a_kind, 8, 8, 2048, 7168, [0] + [rng.randrange(1, 9) for _ in range(6)] + [8], out_dtype),
                  ("masked", a_kind, 16, 32, 256, 512, [rng.randrange(0, 33) for _ in range(15)] + [32], out_dtype),
                  ("masked", a_kind, 1, 3, 128, 64, [3], out_dtype),
                  ("masked", a_kind, 8, 2, 4096, 14336, [0, 2, 0, 0, 1, 0, 0, 0], out_dtype),  # split over the SMs
                  ("masked", a_kind, 4, 20, 520, 1216, [rng.randrange(0, 21) for _ in range(4)], out_dtype),
                  ("masked", a_kind, 64, 8, 256, 1024, [rng.randrange(0, 9) for _ in range(64)], out_dtype)]
    cases.append(("masked", "bfloat16", 300, 4, 128, 128, [rng.randrange(0, 5) for _ in range(300)], "float16"))
    for a_kind, out_dtype in (("float16", "float16"), ("bfloat16", "bfloat16")):
        cases += [("contiguous", a_kind, 8, 2, 4096, 7168, [0, 0, 1, 1, 1, 2, 2, 2], out_dtype),  # 1-token top-2
                  ("contiguous", a_kind, 8, 16, 1024, 2048, sorted(rng.randrange(0, 17) for _ in range(7)) + [16],
                   out_dtype),
                  ("contiguous", a_kind, 3, 32, 136, 128, [0, 32, 32], out_dtype)]
    return cases


def _run(seed, cases, env):
    proc = subprocess.run([sys.executable, "-c", CHILD, str(seed), json.dumps(cases)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, **env})
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == len(cases), proc.stdout[-3000:]
    return rows


@pytest.mark.parametrize("share", ["", "whole", "split"], ids=["schedule", "whole", "split"])
def test_one_launch_decode_matches_the_conversion_path(share):
    seed = fresh_seed()
    cases = _cases(random.Random(seed))
    env = {"FASTLAUNCH_SM90_NARROW": "1", "FASTLAUNCH_SM90_SKINNY": "0"}
    if share:
        env["FASTLAUNCH_SM90_SHARE"] = share
    one = _run(seed, cases, {**env, "FASTLAUNCH_SM90_SELF": "1"})
    two = _run(seed, cases, {**env, "FASTLAUNCH_SM90_SELF": "0"})
    for case, x, y in zip(cases, one, two):
        where = f"seed {seed}, case {case[:6]} counts {case[6][:16]} out {case[7]}"
        assert x["ok"], f"{where}, one launch: {x['msg']}"
        assert y["ok"], f"{where}, conversion path: {y['msg']}"
        launches = -(-case[2] // 256)  # (a launch holds up to 256 experts)
        assert x["kernels"] == launches and y["kernels"] == 2 * launches, f"{where}: kernels {x['names']} and {y['names']}"
        assert x["digest"] == y["digest"], f"{where}: the one-launch output differs from the conversion path's"
