"""GPU tests of the torch ops (fastlaunch/ops.py; skipped without CUDA, run on the H200 test GPU): opcheck of both ops
on CUDA tensors, the ops against the fp32 reference with poisoned outputs, CUDA-graph capture and replay with new
data, and torch.compile(fullgraph=True) of a small mixture-of-experts block on CUDA. The masked op's tests need
fastlaunch._C.grouped_mm_masked and skip where the built extension lacks it."""
import contextlib
import importlib.util
import pathlib
import random
import sys
import time

import pytest
import torch

import fastlaunch
from fastlaunch import _C
from fastlaunch import reference as R
from fastlaunch.shapes import TEST_SHAPES, describe

from conftest import HAS_CUDA, fresh_seed, requires_cuda


def _load_support():
    """tests/cpu/ops_support.py (what the CPU and GPU op tests share), loaded by its path."""
    if "ops_support" in sys.modules:
        return sys.modules["ops_support"]
    path = pathlib.Path(__file__).resolve().parent.parent / "cpu" / "ops_support.py"
    spec = importlib.util.spec_from_file_location("ops_support", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["ops_support"] = module
    spec.loader.exec_module(module)
    return module


S = _load_support()
pytestmark = requires_cuda
needs_masked = pytest.mark.skipif(HAS_CUDA and not hasattr(_C, "grouped_mm_masked"),
                                  reason="this build of fastlaunch._C has no grouped_mm_masked (the masked kernel)")
GG = torch.ops.fastlaunch.grouped_gemm.default
MM = torch.ops.fastlaunch.grouped_mm_masked.default


def _u8(t):
    return t.view(torch.uint8)


# ============================================================================ grouped_gemm (the task layout)

@pytest.mark.parametrize("fp4_dtype", [True, False], ids=["fp4", "uint8"])
def test_opcheck_grouped_gemm_cuda(fp4_dtype):
    data = R.generate_input([96, 40, 1], [128, 200, 72], [256, 512, 64], 3, fresh_seed(), device="cuda",
                            fp4_dtype=fp4_dtype)
    S.opcheck_all(GG, S.task_args(data))


@pytest.mark.parametrize("shape", TEST_SHAPES, ids=describe)
def test_grouped_gemm_op_cuda_matches_the_reference(shape):
    g, ms, ns, ks = shape
    data = R.generate_input(ms, ns, ks, g, fresh_seed(), device="cuda")
    ref = R.ref_kernel(R.clone_outputs(data))
    R.poison(data)
    a, sfa, b, sfb, c = S.task_args(data)
    out = fastlaunch.grouped_gemm(a, sfa, b, sfb, c)
    torch.cuda.synchronize()
    assert [x.data_ptr() for x in out] == [x.data_ptr() for x in c]
    ok, msg = R.check(out, ref)
    assert ok, msg


def test_grouped_gemm_op_replays_in_a_cuda_graph_with_new_data():
    ms, ns, ks = [96, 40, 200], [128, 200, 256], [256, 512, 128]
    seed = fresh_seed()
    data = R.generate_input(ms, ns, ks, 3, seed, device="cuda")
    a, sfa, b, sfb, c = S.task_args(data)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fastlaunch.grouped_gemm(a, sfa, b, sfb, c)  # warm-up off the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fastlaunch.grouped_gemm(a, sfa, b, sfb, c)
    for step in range(1, 4):
        new = R.generate_input(ms, ns, ks, 3, seed + step, device="cuda")
        for dst, src in zip(S.task_args(data)[:4], S.task_args(new)[:4]):
            for d, s in zip(dst, src):
                _u8(d).copy_(_u8(s))
        for x in c:
            x.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ok, msg = R.check(c, R.ref_kernel(R.clone_outputs(new)))
        assert ok, f"replay {step}: {msg}"


# ============================================================================ grouped_mm_masked (the serving layout)

@needs_masked
@pytest.mark.parametrize("fp4_dtype", [True, False], ids=["fp4", "uint8"])
def test_opcheck_grouped_mm_masked_cuda(fp4_dtype):
    args = R.generate_masked_input(4, 130, 72, 128, [0, 130, 17, 1], fresh_seed(), device="cuda", out_init="randn",
                                   fp4_dtype=fp4_dtype)
    S.opcheck_all(MM, args)


def _masked_cases(rng):
    """(g, max_m, n, k, masked_m): the serving shapes of the contract's benchmarks at decode sizes, edges, random."""
    cases = [(8, 64, 4096, 7168, [0, 1, 64, 7, 33, 64, 2, 0]), (8, 16, 7168, 2048, [16] * 8),
             (8, 16, 7168, 2048, [0] * 8), (1, 1, 8, 64, [1]), (2, 300, 136, 192, [300, 129]),
             (3, 256, 256, 512, [128, 255, 256])]
    for _ in range(4):
        g, max_m = rng.randrange(1, 17), rng.randrange(1, 400)
        mm = [rng.randrange(0, max_m + 1) for _ in range(g)]
        mm[rng.randrange(g)] = max_m
        cases.append((g, max_m, 8 * rng.randrange(1, 250), 64 * rng.randrange(1, 40), mm))
    return cases


@needs_masked
def test_grouped_mm_masked_cuda_matches_the_reference_and_leaves_masked_rows():
    seed = fresh_seed()
    rng = random.Random(seed)
    for i, (g, max_m, n, k, mm) in enumerate(_masked_cases(rng)):
        a, sfa, b, sfb, masked_m, out = R.generate_masked_input(g, max_m, n, k, mm, seed + i, device="cuda",
                                                                full_range=i % 2 == 1, scale_pad=0x7F)
        before = out.clone()
        ref = R.ref_masked(a, sfa, b, sfb, masked_m)
        got = fastlaunch.grouped_mm_masked(a, sfa, b, sfb, masked_m, out)
        torch.cuda.synchronize()
        assert got is out
        ok, msg = R.check_masked(out, ref, masked_m, before)
        assert ok, f"case {(g, max_m, n, k, mm)}: {msg}"


@needs_masked
def test_grouped_mm_masked_replays_in_a_cuda_graph_with_new_counts():
    g, max_m, n, k = 8, 64, 2048, 1024
    seed = fresh_seed()
    a, sfa, b, sfb, masked_m, out = R.generate_masked_input(g, max_m, n, k, [3, 0, 64, 1, 17, 64, 40, 9], seed,
                                                            device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fastlaunch.grouped_mm_masked(a, sfa, b, sfb, masked_m, out)  # warm-up off the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fastlaunch.grouped_mm_masked(a, sfa, b, sfb, masked_m, out)
    rng = random.Random(seed)
    steps = [[0] * g, [max_m] * g, [rng.randrange(0, max_m + 1) for _ in range(g)], [1, 2, 3, 4, 5, 6, 7, 8]]
    for step, counts in enumerate(steps, 1):
        # A new decode step: new token rows and scales and new counts copied into the captured tensors.
        new_a, new_sfa, _b, _sfb, new_m, _out = R.generate_masked_input(g, max_m, n, k, counts, seed + step,
                                                                        device="cuda")
        _u8(a).copy_(_u8(new_a))
        _u8(sfa).copy_(_u8(new_sfa))
        masked_m.copy_(new_m)
        out.fill_(float("nan"))
        before = out.clone()
        graph.replay()
        torch.cuda.synchronize()
        ok, msg = R.check_masked(out, R.ref_masked(a, sfa, b, sfb, masked_m), masked_m, before)
        assert ok, f"replay {step} (masked_m {counts}): {msg}"


def _moe_bound(rows_ref, weights):
    """Elementwise bound on |y - y_ref|, y_ref the gate-weighted sum of the reference rows: each row within the
    checker's 1e-3 + 1e-3 |ref| (fp16 output), the weights within a few fp32 roundings."""
    per_row = R.ATOL + R.RTOL * rows_ref.abs()
    return (weights[..., None] * per_row).sum(1) + 1e-5 * (weights[..., None] * rows_ref.abs()).sum(1)


@needs_masked
def test_compiled_moe_block_cuda():
    torch._dynamo.reset()
    seed = fresh_seed()
    tokens, hidden, experts, n, k = 64, 32, 8, 512, 1024
    inputs = S.moe_inputs(tokens, hidden, experts, n, k, seed, "cuda")
    # Eager first, with any host synchronisation an error: the block decides every size on the device.
    torch.cuda.set_sync_debug_mode("error")
    try:
        eager = S.moe_block(*inputs)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    from torch._dynamo.backends.registry import lookup_backend
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return lookup_backend("inductor")(gm, example_inputs)

    compiled = torch.compile(S.moe_block, fullgraph=True, backend=backend)
    t0 = time.perf_counter()
    got = compiled(*inputs)
    torch.cuda.synchronize()
    print(f"inductor compile + first call: {time.perf_counter() - t0:.1f} s")
    assert len(graphs) == 1
    assert any("fastlaunch.grouped_mm_masked" in str(nd.target) for nd in graphs[0].graph.nodes)

    counts, rows_ref, weights = S.moe_expected(*inputs, eager[2])
    rows_ref, weights = rows_ref.cuda(), weights.cuda()
    y_ref = (rows_ref * weights[..., None]).sum(1)
    bound = _moe_bound(rows_ref, weights)
    for name, (y, masked_m, chosen, rows) in (("eager", eager), ("compiled", got)):
        assert torch.equal(chosen, eager[2]), f"{name}: other experts chosen"  # exact router arithmetic
        assert torch.equal(masked_m.cpu(), counts), f"{name}: masked_m {masked_m.tolist()}, expected {counts.tolist()}"
        ok, msg = R.check([rows.reshape(-1, n)], [rows_ref.reshape(-1, n)])
        assert ok, f"{name} rows: {msg}"
        assert ((y - y_ref).abs() <= bound).all(), f"{name}: y off by {(y - y_ref).abs().max().item()}"
    # New router input: other counts, the same graph.
    inputs2 = (inputs[0].roll(5, dims=1),) + inputs[1:]
    y2, m2, chosen2, rows2 = compiled(*inputs2)
    assert len(graphs) == 1
    counts2, rows_ref2, _w2 = S.moe_expected(*inputs2, chosen2)
    assert torch.equal(m2.cpu(), counts2) and not torch.equal(counts2, counts)
    ok, msg = R.check([rows2.reshape(-1, n)], [rows_ref2.cuda().reshape(-1, n)])
    assert ok, f"second call rows: {msg}"


def test_eager_wrapper_calls_skip_the_dispatcher():
    # an eager call of the public wrapper on plain CUDA tensors goes straight to the extension (no fastlaunch:: op in
    # the profile) and writes what the op writes
    seed = fresh_seed()
    a, sfa, b, sfb, mm, out = R.generate_masked_input(4, 40, 256, 512, [40, 0, 7, 33], seed, device="cuda")
    via_op = out.clone()
    torch.ops.fastlaunch.grouped_mm_masked(a, sfa, b, sfb, mm, via_op)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fastlaunch.grouped_mm_masked(a, sfa, b, sfb, mm, out)
    torch.cuda.synchronize()
    assert not [e.name for e in prof.events() if e.name.startswith("fastlaunch::")]
    assert torch.equal(out.nan_to_num(7.0), via_op.nan_to_num(7.0)), f"seed {seed}"


def test_eager_entries_launch_only_plain_cuda_calls():
    # fastlaunch._C.grouped_mm_masked_eager launches (returns out) for plain CUDA tensors with int32 counts, and
    # declines (NotImplemented, nothing written) under a torch function mode, with a tensor needing a gradient or
    # with int64 counts; the public wrapper is right in every case (the op takes the declined ones)
    seed = fresh_seed()
    a, sfa, b, sfb, mm, out = R.generate_masked_input(4, 40, 256, 512, [40, 0, 7, 33], seed, device="cuda")
    ref = R.ref_masked(a, sfa, b, sfb, mm)
    alpha = torch.ones(4, device="cuda")
    before = out.clone()
    assert fastlaunch._C.grouped_mm_masked_eager(a, sfa, b, sfb, mm, out, None) is out
    torch.cuda.synchronize()
    ok, msg = R.check_masked(out, ref, mm, before)
    assert ok, f"seed {seed}: {msg}"

    class Mode(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    for name, args, mode in (("function mode", (a, sfa, b, sfb, mm), Mode()),
                             ("int64 counts", (a, sfa, b, sfb, mm.long()), None),
                             ("alpha needs grad", (a, sfa, b, sfb, mm), None)):
        fresh = torch.full_like(out, float("nan"))
        al = alpha.clone().requires_grad_(True) if name == "alpha needs grad" else None
        with mode or contextlib.nullcontext():
            got = fastlaunch._C.grouped_mm_masked_eager(*args, fresh, al)
        torch.cuda.synchronize()
        assert got is NotImplemented and fresh.isnan().all(), name
        if name != "alpha needs grad":  # (the op has no autograd formula: a grad-requiring alpha is refused there)
            with mode or contextlib.nullcontext():
                fastlaunch.grouped_mm_masked(*args, fresh)
            torch.cuda.synchronize()
            ok, msg = R.check_masked(fresh, ref, mm, torch.full_like(out, float("nan")))
            assert ok, f"{name}, seed {seed}: {msg}"


def test_task_wrapper_eager_skips_the_dispatcher():
    # fastlaunch.grouped_gemm eagerly on plain CUDA tensors: fastlaunch._C.grouped_gemm_eager, no fastlaunch:: op in
    # the profile, every c right; lists of different lengths decline to the op, which names the field
    seed = fresh_seed()
    data = R.generate_input([96, 40, 1], [128, 200, 72], [256, 512, 64], 3, seed, device="cuda")
    ref = R.ref_kernel(R.clone_outputs(data))
    R.poison(data)
    a, sfa, b, sfb, c = S.task_args(data)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        got = fastlaunch.grouped_gemm(a, sfa, b, sfb, c)
    torch.cuda.synchronize()
    assert not [e.name for e in prof.events() if e.name.startswith("fastlaunch::")]
    assert [x.data_ptr() for x in got] == [x.data_ptr() for x in c]
    ok, msg = R.check(got, ref)
    assert ok, f"seed {seed}: {msg}"
    with pytest.raises(ValueError, match=r"b has 2 groups, expected 3 like a"):
        fastlaunch.grouped_gemm(a, sfa, b[:2], sfb, c)
