"""CPU tests of the torch ops (fastlaunch/ops.py): schemas, opcheck, the CPU kernels against the fp32 reference, the
fake kernels' checks against the C extension's, and torch.compile(fullgraph=True) of a small mixture-of-experts
block over the masked op."""
import random
import time

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import fastlaunch
from fastlaunch import _C, ops
from fastlaunch import reference as R
from conftest import fresh_seed
from ops_support import moe_block, moe_expected, moe_inputs, opcheck_all, task_args

GG = torch.ops.fastlaunch.grouped_gemm.default
MM = torch.ops.fastlaunch.grouped_mm_masked.default


def test_schemas_and_exports():
    assert str(GG._schema) == ("fastlaunch::grouped_gemm(Tensor[] a, Tensor[] sfa, Tensor[] b, Tensor[] sfb, "
                               "Tensor(a!)[] c) -> ()")
    assert str(MM._schema) == ("fastlaunch::grouped_mm_masked(Tensor a, Tensor? sfa, Tensor b, Tensor sfb, "
                               "Tensor masked_m, Tensor(a!) out, Tensor? alpha=None) -> ()")
    for name in ("grouped_gemm", "grouped_mm_masked", "fast_launch"):
        assert name in fastlaunch.__all__ and callable(getattr(fastlaunch, name))
    assert fastlaunch.fast_launch is _C.fast_launch  # the raw fast path, untouched


# ============================================================================ opcheck

@pytest.mark.parametrize("fp4_dtype", [True, False], ids=["fp4", "uint8"])
def test_opcheck_grouped_gemm(fp4_dtype):
    data = R.generate_input([96, 40, 1], [128, 200, 72], [256, 512, 64], 3, fresh_seed(), device="cpu",
                            fp4_dtype=fp4_dtype)
    opcheck_all(GG, task_args(data))


@pytest.mark.parametrize("fp4_dtype", [True, False], ids=["fp4", "uint8"])
def test_opcheck_grouped_mm_masked(fp4_dtype):
    # out random (not NaN): the aot_dispatch checks compare the mutated out with assert_close, NaN != NaN.
    args = R.generate_masked_input(4, 130, 72, 128, [0, 130, 17, 1], fresh_seed(), device="cpu", out_init="randn",
                                   fp4_dtype=fp4_dtype)
    opcheck_all(MM, args)


def test_opcheck_grouped_mm_masked_bf16_out_and_alpha():
    a, sfa, b, sfb, mm, out = R.generate_masked_input(3, 40, 72, 128, [0, 40, 9], fresh_seed(), device="cpu",
                                                      out_init="randn")
    opcheck_all(MM, (a, sfa, b, sfb, mm, out.to(torch.bfloat16), torch.tensor([0.5, 2.0, 0.125])))


def test_opcheck_grouped_mm_masked_weight_only():
    _a, _sfa, b, sfb, mm, out = R.generate_masked_input(3, 40, 72, 128, [0, 40, 9], fresh_seed(), device="cpu",
                                                        out_init="randn")
    x = torch.randn(3, 40, 128, generator=torch.Generator().manual_seed(fresh_seed())).half()
    opcheck_all(MM, (x, None, b, sfb, mm, out.to(torch.bfloat16), torch.tensor([0.5, 2.0, 0.125])))
    opcheck_all(MM, (x.bfloat16(), None, b, sfb, mm, out))  # bf16 activations


def test_opcheck_schema_check_sees_a_float8_argument_mutated():
    # The byte-wise comparison opcheck_all puts in for float8 arguments must still catch an undeclared mutation.
    @torch.library.custom_op("fastlaunch_test::bumps_scales", mutates_args=(), device_types="cpu")
    def bumps_scales(sf: torch.Tensor, out: torch.Tensor) -> None:
        sf.view(torch.uint8).add_(1)

    @bumps_scales.register_fake
    def _(sf, out):
        return None

    sf = torch.ones(4, 4).to(torch.float8_e4m3fn)
    with pytest.raises(Exception, match="test_schema failed with Argument sf is not defined as mutable but was "
                                        "mutated"):
        opcheck_all(torch.ops.fastlaunch_test.bumps_scales.default, (sf, torch.zeros(4)))


# ============================================================================ CPU kernels against the reference

def _random_task_shapes(rng, count):
    shapes = [(1, [1], [1], [64]), (3, [129, 1, 255], [7, 256, 129], [64, 192, 128])]
    for _ in range(count):
        g = rng.randrange(1, 6)
        shapes.append((g, [rng.randrange(1, 300) for _ in range(g)], [rng.randrange(1, 300) for _ in range(g)],
                       [64 * rng.randrange(1, 6) for _ in range(g)]))
    return shapes


def test_grouped_gemm_cpu_matches_the_reference():
    seed = fresh_seed()
    rng = random.Random(seed)
    for i, (g, ms, ns, ks) in enumerate(_random_task_shapes(rng, 4)):
        data = R.generate_input(ms, ns, ks, g, seed + i, device="cpu", full_range=i % 2 == 1,
                                fp4_dtype=i % 3 != 0, scale_pad=0x7F)  # NaN scale bytes in the padding rows
        ref = R.ref_kernel(R.clone_outputs(data))
        R.poison(data)
        a, sfa, b, sfb, c = task_args(data)
        got = fastlaunch.grouped_gemm(a, sfa, b, sfb, c)
        assert [x.data_ptr() for x in got] == [x.data_ptr() for x in c]
        ok, msg = R.check(got, ref)
        assert ok, f"shape {(g, ms, ns, ks)}: {msg}"


def test_grouped_gemm_op_passes_fast_launch_the_same_buffers():
    data = R.generate_input([96, 40], [128, 200], [256, 512], 2, fresh_seed(), device="cpu")
    assert fastlaunch.pack(ops._task_data(*task_args(data))) == fastlaunch.pack(data)
    # The CUDA kernel builds the same tuple and hands it to fast_launch, which here stops at the device check.
    with pytest.raises(ValueError, match=r"^group 0: a must be on a CUDA device, got cpu$"):
        ops._grouped_gemm_cuda(*task_args(data))


def _masked_cases(rng, count):
    """(g, max_m, n, k, masked_m): masked_m holding 0 and max_m among random counts."""
    cases = [(1, 1, 8, 64, [1]), (1, 5, 16, 64, [0]), (2, 300, 136, 192, [300, 0])]
    for _ in range(count):
        g, max_m = rng.randrange(2, 7), rng.randrange(1, 260)
        mm = [rng.randrange(0, max_m + 1) for _ in range(g)]
        mm[rng.randrange(g)] = 0
        mm[rng.randrange(g)] = max_m
        cases.append((g, max_m, 8 * rng.randrange(1, 38), 64 * rng.randrange(1, 6), mm))
    return cases


@pytest.mark.parametrize("out_init", ["nan", "randn"])
def test_grouped_mm_masked_cpu_matches_the_reference_and_leaves_masked_rows(out_init):
    seed = fresh_seed()
    rng = random.Random(seed)
    for i, (g, max_m, n, k, mm) in enumerate(_masked_cases(rng, 4)):
        a, sfa, b, sfb, masked_m, out = R.generate_masked_input(
            g, max_m, n, k, mm, seed + i, device="cpu", full_range=i % 2 == 1, out_init=out_init,
            fp4_dtype=i % 3 != 0, scale_pad=0x7F)
        before = out.clone()
        ref = R.ref_masked(a, sfa, b, sfb, masked_m)
        got = fastlaunch.grouped_mm_masked(a, sfa, b, sfb, masked_m, out)
        assert got is out
        ok, msg = R.check_masked(out, ref, masked_m, before)
        assert ok, f"case {(g, max_m, n, k, mm)}: {msg}"


def test_grouped_mm_masked_cpu_bf16_out_and_alpha():
    # out_dtype bf16 (allocated) and bf16 out given, each with a scale per expert: the fp32 product times alpha[g],
    # rounded once to bf16
    seed = fresh_seed()
    a, sfa, b, sfb, masked_m, _out = R.generate_masked_input(3, 20, 16, 128, [20, 0, 7], seed, device="cpu")
    alpha = torch.tensor([0.75, 3.0, 2.0**-9])
    ref = R.ref_masked(a, sfa, b, sfb, masked_m, alpha)
    out = fastlaunch.grouped_mm_masked(a, sfa, b, sfb, masked_m, alpha=alpha, out_dtype=torch.bfloat16)
    assert out.dtype == torch.bfloat16 and out.shape == (3, 20, 16)
    for e, m in enumerate(masked_m.tolist()):
        assert torch.equal(out[e, :m], ref[e, :m].to(torch.bfloat16)), e
    plain = R.ref_masked(a, sfa, b, sfb, masked_m)
    assert torch.equal(ref[2, :7], plain[2, :7] * 2.0**-9)  # alpha scales the product (a power of two: exactly)
    given = torch.full((3, 20, 16), float("nan"), dtype=torch.bfloat16)
    before = given.clone()
    got = fastlaunch.grouped_mm_masked(a, sfa, b, sfb, masked_m, given, alpha=alpha)
    ok, msg = R.check_masked(got, ref, masked_m, before, rtol=4e-3)
    assert got is given and ok, msg
    with pytest.raises(TypeError, match=r"^out is bfloat16 but out_dtype is float16"):
        fastlaunch.grouped_mm_masked(a, sfa, b, sfb, masked_m, given, out_dtype=torch.float16)
    with pytest.raises(TypeError, match=r"^out_dtype must be float16 or bfloat16, got torch.float32$"):
        fastlaunch.grouped_mm_masked(a, sfa, b, sfb, masked_m, out_dtype=torch.float32)
    with pytest.raises(TypeError, match=r"^alpha must be float32, got float16$"):
        fastlaunch.grouped_mm_masked(a, sfa, b, sfb, masked_m, alpha=alpha.half())


def test_grouped_mm_masked_cpu_weight_only():
    # a float16 [G, max_m, K] as it is, sfa None: rows < masked_m[g] are a's rows times B[g]^T (fp32, times alpha),
    # rounded once; the other rows untouched
    seed = fresh_seed()
    _a, _sfa, b, sfb, masked_m, _out = R.generate_masked_input(3, 20, 16, 128, [20, 0, 7], seed, device="cpu")
    x = torch.randn(3, 20, 128, generator=torch.Generator().manual_seed(seed)).half()
    alpha = torch.tensor([0.75, 3.0, 2.0**-9])
    ref = R.ref_masked(x, None, b, sfb, masked_m, alpha)
    wb = R.dequantize(b[0], R.unblock_scales(sfb, 16)[0])
    assert torch.equal(ref[0], (x[0].float() @ wb.T) * 0.75)  # the reference: a's values as they are
    for dtype in (torch.float16, torch.bfloat16):
        given = torch.full((3, 20, 16), float("nan"), dtype=dtype)
        before = given.clone()
        got = fastlaunch.grouped_mm_masked(x, None, b, sfb, masked_m, given, alpha=alpha)
        ok, msg = R.check_masked(got, ref, masked_m, before, rtol=4e-3 if dtype == torch.bfloat16 else R.RTOL)
        assert got is given and ok, (dtype, msg)
        for e, m in enumerate(masked_m.tolist()):
            assert torch.equal(got[e, :m], ref[e, :m].to(dtype)), (dtype, e)
    out = fastlaunch.grouped_mm_masked(x, None, b, sfb, masked_m)
    assert out.dtype == torch.float16 and out.shape == (3, 20, 16)


def test_grouped_mm_masked_cpu_rejects_counts_outside_0_to_max_m():
    a, sfa, b, sfb, masked_m, out = R.generate_masked_input(2, 8, 16, 64, 3, fresh_seed(), device="cpu")
    for bad, msg in ((9, r"^masked_m\[1\] is 9, expected 0\.\.8 \(max_m\)$"),
                     (-1, r"^masked_m\[1\] is -1, expected 0\.\.8 \(max_m\)$")):
        masked_m[1] = bad
        with pytest.raises(ValueError, match=msg):
            fastlaunch.grouped_mm_masked(a, sfa, b, sfb, masked_m, out)


def test_ops_share_one_argument_order_and_allocate_out_when_absent():
    # (a, sfa, b, sfb, <sizes>, out) for both wrappers; out optional, allocated on a's device.
    data = R.generate_input([40, 1], [72, 16], [128, 64], 2, fresh_seed(), device="cpu")
    ref = R.ref_kernel(R.clone_outputs(data))
    a, sfa, b, sfb, _c = task_args(data)
    got = fastlaunch.grouped_gemm(a, sfa, b, sfb)
    assert [tuple(x.shape) for x in got] == [(40, 72, 1), (1, 16, 1)] and all(x.dtype == torch.float16 for x in got)
    ok, msg = R.check(got, ref)
    assert ok, msg
    a, sfa, b, sfb, masked_m, _out = R.generate_masked_input(3, 20, 16, 128, [20, 0, 7], fresh_seed(), device="cpu")
    ref = R.ref_masked(a, sfa, b, sfb, masked_m)
    out = fastlaunch.grouped_mm_masked(a, sfa, b, sfb, masked_m)
    assert out.shape == (3, 20, 16) and out.dtype == torch.float16 and out.is_contiguous()
    ok, msg = R.check_masked(out, ref, masked_m, out.clone())
    assert ok, msg


def test_grouped_mm_masked_takes_int64_counts():
    # a count made with sum() is int64: the op takes it as it is (the CUDA kernel converts it on the device).
    a, sfa, b, sfb, masked_m, out = R.generate_masked_input(3, 20, 16, 128, [5, 20, 0], fresh_seed(), device="cpu")
    want = fastlaunch.grouped_mm_masked(a, sfa, b, sfb, masked_m, out.clone())
    counts = torch.stack([torch.ones(int(m), dtype=torch.int32).sum() for m in masked_m])
    assert counts.dtype == torch.int64
    got = fastlaunch.grouped_mm_masked(a, sfa, b, sfb, counts, out.clone())
    assert torch.equal(got[0, :5], want[0, :5]) and torch.equal(got[1], want[1])
    assert _fake_error(MM, [a, sfa, b, sfb, counts, out]) is None
    assert _fake_error(MM, [a, sfa, b, sfb, counts, out], device="cuda") is None
    # the CUDA kernel's conversion keeps the checks: a bad count shape is named before any device work
    with pytest.raises(ValueError, match=r"^masked_m has shape \(2,\), expected \(3,\) for G=3$"):
        ops._grouped_mm_masked_cuda(a, sfa, b, sfb, counts[:2], out)


def test_masked_cuda_kernel_missing_from_the_extension_raises():
    if hasattr(_C, "grouped_mm_masked"):
        pytest.skip("this build of fastlaunch._C has grouped_mm_masked (tests/gpu/test_ops_gpu.py runs it)")
    args = R.generate_masked_input(2, 8, 16, 64, 3, fresh_seed(), device="cpu")
    with pytest.raises(RuntimeError, match=r"^fastlaunch\._C has no grouped_mm_masked"):
        ops._grouped_mm_masked_cuda(*args)


# ============================================================================ the fake kernels' checks

def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001  (the test compares whatever is raised)
        return type(e), str(e)
    return None


def _fake_error(op, args, device="cpu"):
    """What op raises on fake copies of args (on `device`): its fake kernel's checks, from metadata alone."""
    mode = FakeTensorMode()

    def fake(x):
        if isinstance(x, list):
            return [fake(t) for t in x]
        if x is None:
            return None
        return mode.from_tensor(x).to(device) if device != "cpu" else mode.from_tensor(x)

    with mode:
        fargs = [fake(x) for x in args]
        return _error(lambda: op(*fargs))


def _task_cases():
    """(name, args, expected message): grouped_gemm inputs with one thing wrong each."""
    data = R.generate_input([96, 40], [128, 200], [256, 512], 2, 11, device="cpu")
    other = R.generate_input([40, 300], [72, 200], [128, 128], 2, 12, device="cpu")
    cases = []

    def case(name, field, g, value, expected):
        args = [list(x) for x in task_args(data)]
        idx = ("a", "sfa", "b", "sfb", "c").index(field)
        if g is None:
            args[idx] = value
        else:
            args[idx][g] = value
        cases.append((name, args, expected))

    case("a K", "a", 1, torch.zeros(40, 128, 1, dtype=torch.uint8),
         "group 1: a has shape (40, 128, 1), expected (40, 256, 1) for M=40, K=512")
    case("a 2-D", "a", 1, torch.zeros(40, 256, dtype=torch.uint8),
         "group 1: a has shape (40, 256), expected (40, 256, 1) for M=40, K=512")
    # an empty group (M = 0) is valid; its c must then have no rows either
    case("a no rows", "a", 0, torch.zeros(0, 128, 1, dtype=torch.uint8),
         "group 0: c has shape (96, 128, 1), expected (0, 128, 1) for M=0, N=128")
    case("b K", "b", 0, torch.zeros(128, 40, 1, dtype=torch.uint8),
         "group 0: k must be a positive multiple of 64 up to 2147483584, got 80")
    case("c dtype", "c", 0, torch.zeros(96, 128, 1, dtype=torch.float32),
         "group 0: c must be float16, got float32")
    case("c strides", "c", 1, torch.zeros(200, 40, 1, dtype=torch.float16).permute(1, 0, 2),
         "group 1: c has strides (1, 40, 1), expected (200, 1, 8000) (row-major, N contiguous)")
    case("a dtype", "a", 0, torch.zeros(96, 128, 1, dtype=torch.int8),
         "group 0: a must be float4_e2m1fn_x2 or uint8, got int8")
    case("sfa rows", "sfa", 1, other[2][1][0],  # the scales of a 300-row operand (3 tiles) for M=40 (1 tile)
         "group 1: sfa has shape (32, 4, 3, 4, 2, 1), expected (32, 4, 1, 4, 8, 1) for M=40, K=512")
    case("sfb contiguous", "sfb", 0, data[2][0][1].contiguous(),
         "group 0: sfb has strides (64, 16, 16, 4, 1, 1), expected (16, 4, 2048, 1, 512, 2048) "
         "(the permuted view of a contiguous (1, ceil(rows/128), K/64, 32, 4, 4) array)")
    case("sfb dtype", "sfb", 1, data[2][1][1].view(torch.uint8),
         "group 1: sfb must be float8_e4m3fn, got uint8")
    case("groups", "c", None, task_args(data)[4][:1], "c has 1 groups, expected 2 like a")
    return cases


@pytest.mark.parametrize("case", _task_cases(), ids=lambda c: c[0])
def test_grouped_gemm_fake_and_cpu_raise_the_extension_messages(case):
    _name, args, expected = case
    cpu = _error(lambda: GG(*args))
    fake = _fake_error(GG, args)
    assert cpu is not None and cpu[1] == expected
    assert fake == cpu
    kind = TypeError if "must be float" in expected or "must be uint8" in expected else ValueError
    assert cpu[0] is kind


def test_grouped_gemm_fake_on_cuda_checks_devices_like_fast_launch():
    data = R.generate_input([96, 40], [128, 200], [256, 512], 2, 11, device="cpu")
    args = task_args(data)
    assert _fake_error(GG, args, device="cuda") is None  # all on one CUDA device: accepted
    mode = FakeTensorMode()
    with mode:
        fa, fsa, fb, fsb, fc = ([mode.from_tensor(t).to("cuda") for t in x] for x in args)
        fc[1] = mode.from_tensor(args[4][1])  # group 1's c left on the CPU
        assert _error(lambda: GG(fa, fsa, fb, fsb, fc)) == (
            ValueError, "group 1: c must be on a CUDA device, got cpu")
        fc[1] = mode.from_tensor(args[4][1]).to("cuda:1")
        assert _error(lambda: GG(fa, fsa, fb, fsb, fc)) == (
            ValueError, "group 1: c is on cuda:1, expected cuda:0 like group 0's a")
    # fast_launch's own text for a CPU tensor, the same pattern
    assert _error(lambda: fastlaunch.fast_launch(data)) == (ValueError, "group 0: a must be on a CUDA device, got cpu")


def _masked_cases_bad():
    a, sfa, b, sfb, masked_m, out = R.generate_masked_input(3, 200, 72, 256, 5, 13, device="cpu")
    base = [a, sfa, b, sfb, masked_m, out]
    cases = []

    def case(name, idx, value, kind, expected):
        args = list(base)
        args[idx] = value
        cases.append((name, args, kind, expected))

    case("a K", 0, a.view(torch.uint8)[:, :, :100], ValueError,
         "a has shape (3, 200, 100), expected (G, max_m, K//2) with G >= 1, max_m >= 1 and K a positive multiple "
         "of 64 up to 2147483584")
    case("a 2-D", 0, a[0], ValueError, "a has shape (200, 128), expected (G, max_m, K//2)")
    case("sfa tiles", 1, sfa[:, :1], ValueError,
         "sfa has shape (3, 1, 4, 32, 4, 4), expected (3, 2, 4, 32, 4, 4) for G=3, max_m=200, K=256")
    case("sfa dtype", 1, sfa.view(torch.uint8), TypeError, "sfa must be float8_e4m3fn, got uint8")
    case("b experts", 2, b[:2], ValueError, "b has shape (2, 72, 128), expected (3, 72, 128) for G=3, N=72, K=256")
    case("b strides", 2, b.view(torch.uint8).transpose(0, 1).contiguous().transpose(0, 1), ValueError,
         "b has strides (128, 384, 1), expected (9216, 128, 1) (contiguous)")
    case("sfb shape", 3, sfb[:, :, :2], ValueError,
         "sfb has shape (3, 1, 2, 32, 4, 4), expected (3, 1, 4, 32, 4, 4) for G=3, N=72, K=256")
    case("masked_m dtype", 4, masked_m.short(), TypeError, "masked_m must be int32 or int64, got int16")
    case("masked_m shape", 4, masked_m[:2], ValueError, "masked_m has shape (2,), expected (3,) for G=3")
    case("out dtype", 5, out.float(), TypeError, "out must be float16 or bfloat16, got float32")
    case("out shape", 5, out[:, :100], ValueError,
         "out has shape (3, 100, 72), expected (3, 200, 72) for G=3, max_m=200, N=72")
    x = torch.zeros(3, 200, 256, dtype=torch.float16)  # weight-only a
    cases.append(("weight-only sfa given", [x, sfa, b, sfb, masked_m, out], TypeError,
                  "sfa must be None where a is float16 or bfloat16 (weight-only: a's values are used as they are)"))
    cases.append(("NVFP4 a without sfa", [a, None, b, sfb, masked_m, out], TypeError,
                  "sfa must be a torch.Tensor of a's scales where a is NVFP4, got None"))
    cases.append(("a float32", [x.float(), None, b, sfb, masked_m, out], TypeError,
                  "a must be float4_e2m1fn_x2 or uint8 (NVFP4, with sfa) or float16 or bfloat16 (weight-only, sfa "
                  "None), got float32"))
    cases.append(("weight-only a K", [x[:, :, :96], None, b, sfb, masked_m, out], ValueError,
                  "a has shape (3, 200, 96), expected (G, max_m, K) with G >= 1, max_m >= 1 and K a positive multiple "
                  "of 64 up to 2147483584"))
    cases.append(("weight-only b K", [x[:, :, :128].contiguous(), None, b, sfb, masked_m, out], ValueError,
                  "b has shape (3, 72, 128), expected (3, 72, 64) for G=3, N=72, K=128"))
    cases.append(("alpha dtype", base + [torch.ones(3, dtype=torch.float16)], TypeError,
                  "alpha must be float32, got float16"))
    cases.append(("alpha shape", base + [torch.ones(1, 3)], ValueError,
                  "alpha has shape (1, 3), expected (3,) for G=3"))
    return cases


@pytest.mark.parametrize("case", _masked_cases_bad(), ids=lambda c: c[0])
def test_grouped_mm_masked_fake_and_cpu_checks(case):
    _name, args, kind, expected = case
    assert _error(lambda: MM(*args)) == (kind, expected)
    assert _fake_error(MM, args) == (kind, expected)


def test_grouped_mm_masked_fake_on_cuda_checks_devices_and_never_reads_masked_m():
    args = R.generate_masked_input(3, 200, 72, 256, 5, 13, device="cpu")
    mode = FakeTensorMode()
    with mode:
        fargs = [mode.from_tensor(t).to("cuda") for t in args]
        MM(*fargs)  # fake masked_m has no values: the fake kernel reads metadata only
        fargs[4] = mode.from_tensor(args[4])
        assert _error(lambda: MM(*fargs)) == (ValueError, "masked_m is on cpu, expected cuda:0 like a")


# ============================================================================ torch.compile

def _recording(backend, graphs):
    from torch._dynamo.backends.registry import lookup_backend

    def compile_fn(gm, example_inputs):
        graphs.append(gm)
        return lookup_backend(backend)(gm, example_inputs)

    return compile_fn


def _op_calls(gm, name):
    return [n for n in gm.graph.nodes if n.op == "call_function" and name in str(n.target)]


def test_compiled_moe_block_matches_eager_without_graph_breaks():
    torch._dynamo.reset()
    seed = fresh_seed()
    tokens, hidden, experts, n, k = 40, 16, 6, 136, 256
    inputs = moe_inputs(tokens, hidden, experts, n, k, seed, "cpu")
    graphs = []
    compiled = torch.compile(moe_block, fullgraph=True, backend=_recording("inductor", graphs))
    t0 = time.perf_counter()
    got = compiled(*inputs)
    print(f"inductor compile + first call: {time.perf_counter() - t0:.1f} s")
    assert len(graphs) == 1 and len(_op_calls(graphs[0], "fastlaunch.grouped_mm_masked")) == 1
    want = moe_block(*inputs)
    for name, x, y in zip(("y", "masked_m", "experts", "rows"), got, want):
        assert x.dtype == y.dtype and torch.equal(x, y), f"compiled {name} differs from eager"
    y, masked_m, chosen, rows = want
    counts, ref_rows, weights = moe_expected(*inputs, chosen)
    assert torch.equal(masked_m, counts) and int(masked_m.sum()) == 2 * tokens
    ok, msg = R.check([rows.reshape(-1, n)], [ref_rows.reshape(-1, n)])
    assert ok, msg
    # New router inputs: other counts, the same graph (sizes live in masked_m's values, not in guards).
    h2 = inputs[0].roll(7, dims=1)
    inputs2 = (h2,) + inputs[1:]
    got2, want2 = compiled(*inputs2), moe_block(*inputs2)
    assert len(graphs) == 1
    assert not torch.equal(got2[1], masked_m)
    for x, y in zip(got2, want2):
        assert torch.equal(x, y)


def test_compiled_grouped_gemm_matches_eager():
    torch._dynamo.reset()
    data = R.generate_input([40, 1, 130], [72, 128, 16], [128, 64, 192], 3, fresh_seed(), device="cpu")
    ref = R.ref_kernel(R.clone_outputs(data))
    R.poison(data)
    a, sfa, b, sfb, c = task_args(data)

    def step(a, sfa, b, sfb, c):
        out = fastlaunch.grouped_gemm(a, sfa, b, sfb, c)
        return [x.sum() for x in out]

    graphs = []
    sums = torch.compile(step, fullgraph=True, backend=_recording("inductor", graphs))(a, sfa, b, sfb, c)
    assert len(graphs) == 1 and len(_op_calls(graphs[0], "fastlaunch.grouped_gemm")) == 1
    ok, msg = R.check(c, ref)  # written in place through the compiled graph
    assert ok, msg
    assert [s.item() for s in sums] == [x.sum().item() for x in c]


def test_compiled_masked_op_without_out_and_with_int64_counts_traces_whole():
    # The wrappers' conveniences (out allocated, int64 counts) stay inside one graph.
    torch._dynamo.reset()
    a, sfa, b, sfb, masked_m, _out = R.generate_masked_input(3, 20, 16, 128, [5, 20, 0], fresh_seed(), device="cpu")

    def step(a, sfa, b, sfb, onehot):
        out = fastlaunch.grouped_mm_masked(a, sfa, b, sfb, onehot.sum(0))  # int64 counts
        return out[:2, :5]  # experts 0 and 1 have at least 5 rows; expert 2's rows are never written

    onehot = (torch.arange(3).repeat_interleave(masked_m.long())[:, None] == torch.arange(3)).int()
    graphs = []
    got = torch.compile(step, fullgraph=True, backend=_recording("aot_eager", graphs))(a, sfa, b, sfb, onehot)
    assert len(graphs) == 1 and len(_op_calls(graphs[0], "fastlaunch.grouped_mm_masked")) == 1
    ref = R.ref_masked(a, sfa, b, sfb, masked_m)
    assert torch.equal(got, ref[:2, :5].half())


def test_wrappers_take_the_op_unless_plain_cuda_tensors():
    # the wrappers call the extension directly only for plain CUDA tensors outside tracing and modes; here (CPU
    # tensors, fake tensors) they keep to the op, whose CPU kernel is the reference
    from torch._subclasses.fake_tensor import FakeTensorMode

    x = torch.zeros(2, 64, 1)
    assert _C.grouped_gemm_eager([x], [x], [x], [x], [x]) is NotImplemented
    with FakeTensorMode():
        y = torch.zeros(2, 64, 1)
        assert _C.grouped_gemm_eager([y], [y], [y], [y], [y]) is NotImplemented
    assert _C.grouped_gemm_eager([x], [x], [x, x], [x], [x]) is NotImplemented  # lengths differ: the op's message
    assert _C.grouped_gemm_eager([], [], [], [], []) is NotImplemented
    with pytest.raises(TypeError, match=r"^grouped_gemm_eager takes 5 arguments, got 4$"):
        _C.grouped_gemm_eager([x], [x], [x], [x])
    assert ops._GEMM_EAGER is _C.grouped_gemm_eager


def test_eager_entries_decline_what_is_not_a_plain_cuda_call():
    # fastlaunch._C.<name>_eager launches only for plain CUDA tensors (checked in C); anything else, CPU tensors, a
    # missing tensor, a subclass, returns NotImplemented (the wrapper then takes the op), never raises or crashes
    a, sfa, b, sfb, mm, out = R.generate_masked_input(2, 8, 16, 64, 3, fresh_seed(), device="cpu")
    for eager in (fastlaunch._C.grouped_mm_masked_eager, fastlaunch._C.grouped_mm_contiguous_eager):
        assert eager(a, sfa, b, sfb, mm, out, None) is NotImplemented
        assert eager(a, sfa, b, sfb, None, out, None) is NotImplemented
        assert eager([a], sfa, b, sfb, mm, out, None) is NotImplemented
        assert eager(torch.nn.Parameter(torch.zeros(2, 8, 64)), None, b, sfb, mm, out, None) is NotImplemented
        with pytest.raises(TypeError, match=r"takes 7 arguments \(a, sfa, b, sfb, sizes, out, alpha\), got 6$"):
            eager(a, sfa, b, sfb, mm, out)
    assert ops._MASKED_EAGER is fastlaunch._C.grouped_mm_masked_eager
    assert ops._CONTIGUOUS_EAGER is fastlaunch._C.grouped_mm_contiguous_eager


def test_grouped_mm_weight_only_cpu_bf16_activations():
    # bf16 a, as the CUDA kernel computes with it: rounded to fp16 first (exact within fp16's normal range), so the
    # output is the reference of a's values; a value past 65504 becomes inf and its row's outputs inf or NaN
    seed = fresh_seed()
    _a, _sfa, b, sfb, masked_m, _out = R.generate_masked_input(3, 20, 16, 128, [20, 0, 7], seed, device="cpu")
    x = torch.randn(3, 20, 128, generator=torch.Generator().manual_seed(seed)).bfloat16()
    x = torch.where(x.abs() < 2 ** -10, torch.full_like(x, 2 ** -10), x)  # fp16's normal range: no value rounds
    assert torch.equal(x.half().float(), x.float())
    ref = R.ref_masked(x, None, b, sfb, masked_m)
    got = fastlaunch.grouped_mm_masked(x, None, b, sfb, masked_m, out_dtype=torch.bfloat16)
    for e, m in enumerate(masked_m.tolist()):
        assert torch.equal(got[e, :m], ref[e, :m].to(torch.bfloat16)), e
    x[2, 3, 5] = 7.0e4
    got = fastlaunch.grouped_mm_masked(x, None, b, sfb, masked_m)
    assert not got[2, 3].isfinite().any() and got[2, :3].isfinite().all() and got[0].isfinite().all()
    offs = torch.tensor([20, 20, 27], dtype=torch.int32)
    flat = torch.cat([x[0], x[2, :7]])
    y = fastlaunch.grouped_mm_contiguous(flat, None, b, sfb, offs)
    assert not y[23].isfinite().any()  # the contiguous layout alike
    assert torch.allclose(y[:20].float(), got[0].float(), rtol=1e-3, atol=1e-3)
    assert torch.allclose(y[20:23].float(), got[2, :3].float(), rtol=1e-3, atol=1e-3)
