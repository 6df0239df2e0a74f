"""GPU tests of the contiguous layout (fastlaunch.grouped_mm_contiguous; skipped without CUDA): against the fp32
reference with out poisoned and rows of no expert left as they were; empty experts, offsets at 0 and at T, rows
past the last offset; fp16 and bf16 activations and out, alpha; 8, 20 and 64 experts; two kernels a call; a CUDA
graph replayed with new offsets; agreeing with the masked weight-only form on the same rows; bf16 activations past
fp16's range."""
import random

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

import fastlaunch
from fastlaunch import reference as R

from conftest import fresh_seed, requires_cuda

pytestmark = requires_cuda


def _inputs(G, T, n, k, seed):
    _a, _sfa, b, sfb, _m, _out = R.generate_masked_input(G, 1, n, k, 0, seed, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = (torch.randn(T, k, generator=gen, device="cuda") / 4).half()
    return x, b, sfb


def _ends(rng, G, T, last=None):
    """Nondecreasing ends, some experts empty; the last `last` (default T), rows past it owned by no expert."""
    last = T if last is None else last
    return sorted(rng.randrange(0, last + 1) for _ in range(G - 1)) + [last]


@pytest.mark.parametrize("G,T,n,k", [(8, 1000, 512, 1024), (20, 700, 256, 512), (64, 300, 256, 256),
                                     (4, 4096, 2048, 2048), (1, 129, 64, 64), (8, 2, 4096, 14336)],
                         ids=lambda v: str(v))
def test_contiguous_against_the_reference(G, T, n, k):
    seed = fresh_seed()
    rng = random.Random(seed)
    x, b, sfb = _inputs(G, T, n, k, seed)
    for trial, dtype in enumerate((torch.float16, torch.bfloat16, torch.float16, torch.bfloat16)):
        a = x.bfloat16() if trial == 3 else x  # bf16 activations (fp16 values rounded again)
        ends = _ends(rng, G, T, last=T - rng.randrange(0, T // 4 + 1) if trial == 2 else None)
        if trial == 1:
            ends[0] = 0  # the first expert empty
        offs = torch.tensor(ends, dtype=torch.int32, device="cuda")
        alpha = torch.exp2(torch.randint(-3, 3, (G,), device="cuda").float()) if dtype == torch.bfloat16 else None
        out = torch.full((T, n), float("nan"), dtype=dtype, device="cuda")
        before = out.clone()
        got = fastlaunch.grouped_mm_contiguous(a, None, b, sfb, offs, out, alpha=alpha)
        torch.cuda.synchronize()
        ok, msg = R.check_contiguous(out, R.ref_contiguous(a, b, sfb, offs, alpha), before,
                                     rtol=4e-3 if dtype == torch.bfloat16 else R.RTOL)
        assert got is out and ok, f"seed {seed}, ends {ends}, a {a.dtype}, out {dtype}: {msg}"


def test_contiguous_agrees_with_the_masked_weight_only_form():
    # the same rows of each expert, once contiguous and once padded into the masked layout: both right against the
    # reference and within its tolerance of each other (bit for bit where both take the same plan: printed)
    seed = fresh_seed()
    rng = random.Random(seed)
    G, n, k = 8, 1024, 2048
    counts = [rng.randrange(0, 300) for _ in range(G)]
    T, max_m = sum(counts), max(counts)
    x, b, sfb = _inputs(G, T, n, k, seed)
    offs = torch.tensor(counts, device="cuda").cumsum(0).to(torch.int32)
    y = fastlaunch.grouped_mm_contiguous(x, None, b, sfb, offs)
    padded = torch.zeros(G, max_m, k, dtype=torch.float16, device="cuda")
    start = 0
    for e, c in enumerate(counts):
        padded[e, :c] = x[start:start + c]
        start += c
    ref = R.ref_contiguous(x, b, sfb, offs)
    ok, msg = R.check_contiguous(y, ref, torch.empty_like(y))
    assert ok, f"seed {seed}: {msg}"
    masked = fastlaunch.grouped_mm_masked(padded, None, b, sfb, torch.tensor(counts, dtype=torch.int32,
                                                                               device="cuda"))
    torch.cuda.synchronize()
    start = 0
    for e, c in enumerate(counts):
        same = torch.equal(y[start:start + c].view(torch.int16), masked[e, :c].view(torch.int16))
        close = torch.allclose(y[start:start + c].float(), masked[e, :c].float(), rtol=1e-3, atol=1e-3)
        assert close, f"seed {seed}: expert {e} differs from the masked form"
        print(f"expert {e}: {c} rows, bit-identical to the masked form: {same}")
        start += c


def test_contiguous_two_kernels_and_graph_replay_with_new_offsets():
    seed = fresh_seed()
    rng = random.Random(seed)
    for G, kernels in ((8, 2), (40, 2)):  # A's permutation (and, past 16 experts, the B maps), then the GEMM
        T, n, k = 600, 512, 1024
        x, b, sfb = _inputs(G, T, n, k, seed + G)
        offs = torch.tensor(_ends(rng, G, T), dtype=torch.int32, device="cuda")
        out = torch.full((T, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        fastlaunch.grouped_mm_contiguous(x, None, b, sfb, offs, out)  # set-up off the profile and the capture
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fastlaunch.grouped_mm_contiguous(x, None, b, sfb, offs, out)
            torch.cuda.synchronize()
        ran = [e.name for e in prof.events() if e.device_type == DeviceType.CUDA and
               not e.name.startswith(("Memcpy", "Memset"))]
        assert len(ran) == kernels, (G, ran)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fastlaunch.grouped_mm_contiguous(x, None, b, sfb, offs, out)
        for replay in range(3):
            offs.copy_(torch.tensor(_ends(rng, G, T, last=rng.randrange(0, T + 1) if replay == 2 else None),
                                    dtype=torch.int32))
            out.fill_(float("nan"))
            before = out.clone()
            graph.replay()
            torch.cuda.synchronize()
            ok, msg = R.check_contiguous(out, R.ref_contiguous(x, b, sfb, offs), before, rtol=4e-3)
            assert ok, f"seed {seed}, G={G}, replay {replay}, offs {offs.tolist()}: {msg}"


def test_bf16_activations_past_fp16_range():
    # bf16 activations are rounded to fp16 on the device: a value past 65504 becomes inf, so its row's outputs are
    # inf or NaN (never a finite wrong value), as in the CPU implementation; every other row right
    seed = fresh_seed()
    G, T, n, k = 4, 256, 256, 512
    x, b, sfb = _inputs(G, T, n, k, seed)
    a = x.bfloat16()
    a[70, 100] = 1.0e5  # expert 1's rows are 64 .. 127
    a[200, 3] = -3.0e38
    offs = torch.tensor([64, 128, 192, 256], dtype=torch.int32, device="cuda")
    out = torch.full((T, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    fastlaunch.grouped_mm_contiguous(a, None, b, sfb, offs, out)
    torch.cuda.synchronize()
    assert not out[70].isfinite().any() and not out[200].isfinite().any(), f"seed {seed}"
    rest = torch.ones(T, dtype=torch.bool)
    rest[[70, 200]] = False
    ok, msg = R.check_contiguous(out[rest], R.ref_contiguous(a, b, sfb, offs)[rest], out[rest], rtol=4e-3)
    assert ok, f"seed {seed}: {msg}"
    cpu = fastlaunch.grouped_mm_contiguous(a.cpu(), None, b.cpu(), sfb.cpu(), offs.cpu(), out_dtype=torch.bfloat16)
    assert not cpu[70].isfinite().any() and not cpu[200].isfinite().any()


def test_contiguous_nvfp4_activations():
    # NVFP4 a [T, K//2] with its blocked scales (fastlaunch.quantize of the rows), experts starting anywhere: against
    # the reference of the dequantised rows, and bit for bit the weight-only call on those values in fp16 (exact)
    seed = fresh_seed()
    rng = random.Random(seed)
    for G, T, n, k in ((8, 1000, 512, 1024), (20, 130, 256, 512)):
        x, b, sfb = _inputs(G, T, n, k, seed + G)
        q, _plain, blocked = fastlaunch.quantize(x)
        values = R.dequantize(q, R.unblock_scales(blocked, T)).half()
        offs = torch.tensor(_ends(rng, G, T), dtype=torch.int32, device="cuda")
        for dtype in (torch.float16, torch.bfloat16):
            alpha = torch.exp2(torch.randint(-3, 3, (G,), device="cuda").float()) if dtype == torch.bfloat16 else None
            out = torch.full((T, n), float("nan"), dtype=dtype, device="cuda")
            before = out.clone()
            fastlaunch.grouped_mm_contiguous(q, blocked, b, sfb, offs, out, alpha=alpha)
            plain = fastlaunch.grouped_mm_contiguous(values, None, b, sfb, offs, out_dtype=dtype, alpha=alpha)
            torch.cuda.synchronize()
            ok, msg = R.check_contiguous(out, R.ref_contiguous(q, b, sfb, offs, alpha, sfa=blocked), before,
                                         rtol=4e-3 if dtype == torch.bfloat16 else R.RTOL)
            assert ok, f"seed {seed}, G={G}, {dtype}: {msg}"
            rows = int(offs[-1])
            assert torch.equal(out[:rows].view(torch.int16), plain[:rows].view(torch.int16)), f"seed {seed}, G={G}"
