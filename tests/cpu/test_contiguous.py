"""CPU tests of the contiguous layout (fastlaunch.grouped_mm_contiguous, torch.ops.fastlaunch.grouped_mm_contiguous,
fastlaunch._C.grouped_mm_contiguous): schema, opcheck, the CPU implementation against the reference, every malformed
argument with the same message from the fake implementation, the CPU kernel and the C extension (which then stops
at the CUDA-device check), and torch.compile tracing it whole."""
import pytest
import torch

import fastlaunch
from fastlaunch import ops
from fastlaunch import reference as R

from conftest import fresh_seed
from ops_support import opcheck_all
from test_ops import _error, _fake_error, _op_calls, _recording

CM = torch.ops.fastlaunch.grouped_mm_contiguous.default


def _args(T=50, G=3, n=72, k=128, ends=(10, 10, 37), seed=None):
    """(a fp16 [T, K], None, b, sfb, offs int32 [G], out fp16 [T, N] of NaN)."""
    seed = fresh_seed() if seed is None else seed
    _a, _sfa, b, sfb, _m, _out = R.generate_masked_input(G, 1, n, k, 0, seed, device="cpu")
    x = torch.randn(T, k, generator=torch.Generator().manual_seed(seed)).half()
    return [x, None, b, sfb, torch.tensor(ends, dtype=torch.int32), torch.full((T, n), float("nan")).half()]


def test_schema_and_export():
    assert str(CM._schema) == ("fastlaunch::grouped_mm_contiguous(Tensor a, Tensor? sfa, Tensor b, Tensor sfb, "
                               "Tensor offs, Tensor(a!) out, Tensor? alpha=None) -> ()")
    assert "grouped_mm_contiguous" in fastlaunch.__all__


def test_opcheck():
    args = _args()
    args[5] = torch.randn(args[5].shape).to(torch.bfloat16)  # not NaN: aot_dispatch compares out with assert_close
    opcheck_all(CM, tuple(args) + (torch.tensor([0.5, 2.0, 0.125]),))
    args[0] = args[0].bfloat16()  # bf16 activations
    opcheck_all(CM, tuple(args))


@pytest.mark.parametrize("ends", [(10, 10, 37), (0, 0, 50), (50, 50, 50), (0, 0, 0), (17, 33, 49)],
                         ids=["empty middle", "all last", "all first", "none", "row 49 unowned"])
def test_cpu_matches_the_reference_and_leaves_other_rows(ends):
    x, sfa, b, sfb, offs, out = _args(ends=ends)
    alpha = torch.tensor([0.75, 3.0, 2.0**-5])
    ref = R.ref_contiguous(x, b, sfb, offs, alpha)
    start = 0
    for e, end in enumerate(ends):  # the reference itself: the expert's rows, its own weights
        if end > start:
            w = R.dequantize(b[e], R.unblock_scales(sfb, b.shape[1])[e])
            assert torch.equal(ref[start:end], (x[start:end].float() @ w.T) * float(alpha[e]))
        start = end
    for dtype in (torch.float16, torch.bfloat16):
        given = torch.full(out.shape, float("nan"), dtype=dtype)
        before = given.clone()
        got = fastlaunch.grouped_mm_contiguous(x, None, b, sfb, offs, given, alpha=alpha)
        ok, msg = R.check_contiguous(got, ref, before, rtol=4e-3 if dtype == torch.bfloat16 else R.RTOL)
        assert got is given and ok, (dtype, msg)
    got = fastlaunch.grouped_mm_contiguous(x, None, b, sfb, offs.long(), out_dtype=torch.bfloat16)
    assert got.dtype == torch.bfloat16 and got.shape == out.shape


def test_cpu_nvfp4_activations():
    # NVFP4 a [T, K//2] with its blocked scales (fastlaunch.quantize of the rows), experts starting anywhere: each
    # expert's rows are the dequantised rows times its weights; the reference of the same dequantised values in fp16
    # (exact) agrees bit for bit
    x, _sfa, b, sfb, offs, out = _args(T=300, ends=(77, 77, 260))
    q, _plain, blocked = fastlaunch.quantize(x)
    assert tuple(blocked.shape) == (3, 2, 32, 4, 4)
    values = R.dequantize(q, R.unblock_scales(blocked, 300))
    ref = R.ref_contiguous(q, b, sfb, offs, sfa=blocked)
    assert torch.allclose(ref, R.ref_contiguous(values.half(), b, sfb, offs), rtol=0, atol=0, equal_nan=True)
    got = fastlaunch.grouped_mm_contiguous(q, blocked, b, sfb, offs, out.clone())
    ok, msg = R.check_contiguous(got, ref, out)
    assert ok, msg
    opcheck_all(CM, (q, blocked, b, sfb, offs, torch.randn(out.shape).to(torch.bfloat16)))


def test_cpu_rejects_offsets_out_of_order_or_past_t():
    x, sfa, b, sfb, _offs, out = _args()
    for bad, msg in (((10, 5, 37), r"^offs\[1\] is 5, expected 10\.\.50"), ((10, 20, 51), r"^offs\[2\] is 51"),
                     ((-1, 5, 9), r"^offs\[0\] is -1, expected 0\.\.50")):
        with pytest.raises(ValueError, match=msg):
            fastlaunch.grouped_mm_contiguous(x, None, b, sfb, torch.tensor(bad, dtype=torch.int32), out)


def _bad_cases():
    x, sfa, b, sfb, offs, out = _args()
    _a, real_sfa, *_ = R.generate_masked_input(3, 50, 72, 128, 0, 1, device="cpu")
    base = [x, sfa, b, sfb, offs, out]
    cases = []

    def case(name, idx, value, kind, expected):
        args = list(base)
        args[idx] = value
        cases.append((name, args, kind, expected))

    case("sfa given", 1, real_sfa, TypeError,
         "sfa must be None where a is float16 or bfloat16 (weight-only: a's values are used as they are)")
    case("a dtype", 0, x.float(), TypeError,
         "a must be float4_e2m1fn_x2 or uint8 (NVFP4, with sfa) or float16 or bfloat16 (weight-only, sfa None), got "
         "float32")
    q, _plain, blocked = fastlaunch.quantize(x)  # NVFP4 activations: a [T, K//2] with sfa [ceil(T/128), K//64, ...]
    case("NVFP4 a without sfa", 0, q, TypeError, "sfa must be a torch.Tensor of a's scales where a is NVFP4, got None")
    nv = [q, blocked, b, sfb, offs, out]
    cases.append(("NVFP4 a K", [q[:, :40].contiguous()] + nv[1:], ValueError,
                  "a has shape (50, 40), expected (T, K//2) with K a positive multiple of 64 up to 2147483584"))
    cases.append(("NVFP4 sfa shape", [q, blocked[:, :1].contiguous()] + nv[2:], ValueError,
                  "sfa has shape (1, 1, 32, 4, 4), expected (1, 2, 32, 4, 4) for T=50, K=128"))
    cases.append(("NVFP4 sfa dtype", [q, blocked.view(torch.uint8)] + nv[2:], TypeError,
                  "sfa must be float8_e4m3fn, got uint8"))
    cases.append(("NVFP4 b K", [q, blocked, b[:, :, :32].contiguous()] + nv[3:], ValueError,
                  "b has shape (3, 72, 32), expected (3, 72, 64) for G=3, N=72, K=128"))
    case("a 3-D", 0, x[None], ValueError, "a has shape (1, 50, 128), expected (T, K)")
    case("a K", 0, x[:, :96].contiguous(), ValueError,
         "a has shape (50, 96), expected (T, K) with K a positive multiple of 64 up to 2147483584")
    case("a strides", 0, x.t().contiguous().t(), ValueError, "a has strides (1, 50), expected (128, 1) (contiguous)")
    case("b K", 2, b[:, :, :32].contiguous(), ValueError,
         "b has shape (3, 72, 32), expected (3, 72, 64) for G=3, N=72, K=128")
    case("b N", 2, torch.zeros(3, 76, 64, dtype=torch.uint8), ValueError,
         "b has shape (3, 76, 64), expected (G, N, K//2) with N in 1..2147483647 a multiple of 8 (out's rows are "
         "stored in 16-byte chunks)")
    case("sfb shape", 3, sfb[:2], ValueError,
         "sfb has shape (2, 1, 2, 32, 4, 4), expected (3, 1, 2, 32, 4, 4) for G=3, N=72, K=128")
    case("offs dtype", 4, offs.short(), TypeError, "offs must be int32 or int64, got int16")
    case("offs shape", 4, offs[:2], ValueError, "offs has shape (2,), expected (3,) for G=3")
    case("out rows", 5, out[:40], ValueError, "out has shape (40, 72), expected (50, 72) for T=50, N=72")
    case("out dtype", 5, out.float(), TypeError, "out must be float16 or bfloat16, got float32")
    cases.append(("alpha dtype", base + [torch.ones(3, dtype=torch.float64)], TypeError,
                  "alpha must be float32, got float64"))
    return cases


@pytest.mark.parametrize("case", _bad_cases(), ids=lambda c: c[0])
def test_fake_cpu_and_extension_raise_the_same_messages(case):
    _name, args, kind, expected = case
    assert _error(lambda: CM(*args)) == (kind, expected)
    assert _fake_error(CM, args) == (kind, expected)
    c_expected = "offs must be int32, got int16" if _name == "offs dtype" else expected  # (the extension: int32)
    assert _error(lambda: fastlaunch._C.grouped_mm_contiguous(*args)) == (kind, c_expected)


def test_well_formed_cpu_tensors_stop_at_the_device_check():
    for extra in ([], [None], [torch.ones(3)]):
        with pytest.raises(ValueError, match=r"^a must be on a CUDA device, got cpu$"):
            fastlaunch._C.grouped_mm_contiguous(*_args(), *extra)
    x, _sfa, b, sfb, offs, out = _args()
    q, _plain, blocked = fastlaunch.quantize(x)  # NVFP4 activations
    with pytest.raises(ValueError, match=r"^a must be on a CUDA device, got cpu$"):
        fastlaunch._C.grouped_mm_contiguous(q, blocked, b, sfb, offs, out)
    args = _args(T=0, ends=(0, 0, 0))  # no rows: nothing to compute, out returned as it is
    assert fastlaunch._C.grouped_mm_contiguous(*args) is args[5]
    with pytest.raises(TypeError, match=r"takes 6 or 7 arguments, got 5"):
        fastlaunch._C.grouped_mm_contiguous(*_args()[:5])


def test_compiled_block_traces_whole():
    # a prefill step's shape: token rows sorted by expert, offsets from the counts on the device, out allocated
    torch._dynamo.reset()
    x, _sfa, b, sfb, _offs, _out = _args()
    experts = torch.tensor([0] * 10 + [2] * 27 + [1] * 13)

    def step(x, b, sfb, experts):
        order = torch.argsort(experts, stable=True)
        counts = (experts[:, None] == torch.arange(3)).sum(0)
        y = fastlaunch.grouped_mm_contiguous(x[order], None, b, sfb, counts.cumsum(0))  # int64 offsets
        return y[torch.argsort(order)]

    graphs = []
    got = torch.compile(step, fullgraph=True, backend=_recording("aot_eager", graphs))(x, b, sfb, experts)
    assert len(graphs) == 1 and len(_op_calls(graphs[0], "fastlaunch.grouped_mm_contiguous")) == 1
    order = torch.argsort(experts, stable=True)
    ref = R.ref_contiguous(x[order], b, sfb, torch.tensor([10, 23, 50]))[torch.argsort(order)]
    assert torch.equal(got, ref.half())


def test_fake_on_cuda_never_reads_offs():
    from torch._subclasses.fake_tensor import FakeTensorMode
    args = _args()
    mode = FakeTensorMode()
    with mode:
        fargs = [None if t is None else mode.from_tensor(t).to("cuda") for t in args]
        fastlaunch.grouped_mm_contiguous(*fargs)  # metadata only: no value of offs is read
        out = fastlaunch.grouped_mm_contiguous(*fargs[:5], out_dtype=torch.bfloat16)
    assert out.shape == (50, 72) and out.dtype == torch.bfloat16
    assert ops._check_contiguous_meta(*args) is None
