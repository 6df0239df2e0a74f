"""torch ops over fastlaunch's kernels, for torch.compile, CUDA graphs and serving engines.

    torch.ops.fastlaunch.grouped_gemm(Tensor[] a, Tensor[] sfa, Tensor[] b, Tensor[] sfb, Tensor(a!)[] c) -> ()
        The task layout, one group per list entry: a[g] [M, K//2, 1] and b[g] [N, K//2, 1] NVFP4 bytes, sfa[g] and
        sfb[g] the task's sf_reordered views, c[g] [M, N, 1] float16, written in place: c[g] = A[g] B[g]^T.
    torch.ops.fastlaunch.grouped_mm_masked(Tensor a, Tensor? sfa, Tensor b, Tensor sfb, Tensor masked_m,
                                           Tensor(a!) out, Tensor? alpha=None) -> ()
        The serving layout: a [G, max_m, K//2], sfa [G, ceil(max_m/128), K//64, 32, 4, 4] (or weight-only: a float16
        [G, max_m, K], sfa None), b [G, N, K//2],
        sfb [G, ceil(N/128), K//64, 32, 4, 4], masked_m int32 or int64 [G] on the device, out [G, max_m, N] float16
        or bfloat16, alpha None or float32 [G] on the device; expert g writes rows 0 .. masked_m[g]-1 of out[g]
        (times alpha[g]) and leaves the others as they were.

One argument convention for every op: (a, sfa, b, sfb, <sizes>, out), each operand followed by its scales, then the
sizes that live on the device (masked_m; the task layout has none: its lists give every size), then the output.
The wrappers take out as optional (allocated when absent, which the ops' schemas cannot express for a mutated
argument) and return it. An eager call of a wrapper on plain CUDA tensors calls the extension itself (through the
_C.<name>_eager entries, which check that in C), as the op's CUDA kernel would, without the dispatcher's cost;
under torch.compile, fake tensors or any mode, the op.

Each op has three kernels. CUDA: fastlaunch._C (fast_launch for grouped_gemm, _C.grouped_mm_masked for the masked
op), whose C checks raise the errors. CPU: the fp32 reference of fastlaunch.reference (dequantise, fp32 matmul,
round to the output dtype; slow, meant for tests and CPU users), after the same checks. Fake (meta): nothing to
compute (the ops only mutate), only the checks that metadata allows (dtypes, shapes, strides, devices), with the C
extension's messages ("group 2: a has shape (96, 128, 1), expected (96, 256, 1) for M=96, K=512"); it never reads
a tensor's values, masked_m's included.

The public wrappers grouped_gemm() and grouped_mm_masked() call the ops, so that Dynamo traces them into the graph
(fastlaunch.fast_launch, a C builtin reading a nested tuple, is opaque to it).
"""
from __future__ import annotations

from typing import Sequence

import torch

from . import _C
from . import reference as _R

# The public wrappers' eager entries: the extension's call where every tensor is a plain CUDA tensor needing no
# gradient and no torch mode (fake tensors, functionalisation, ...) is active, checked in C; else NotImplemented,
# and the wrapper takes the op (~15 us of host time more a call). None in a build of the extension without them.
_GEMM_EAGER = getattr(_C, "grouped_gemm_eager", None)
_MASKED_EAGER = getattr(_C, "grouped_mm_masked_eager", None)
_CONTIGUOUS_EAGER = getattr(_C, "grouped_mm_contiguous_eager", None)

__all__ = ["grouped_gemm", "grouped_mm_masked"]

_FP4_DTYPES = (torch.float4_e2m1fn_x2, torch.uint8)
_MASKED_OUT_DTYPES = (torch.float16, torch.bfloat16)
_ACT_DTYPES, _ACT_NAMES = (torch.float16, torch.bfloat16), "float16 or bfloat16"  # the weight-only forms' a


def _as_kernel_reads(a: torch.Tensor) -> torch.Tensor:
    """Weight-only activations as the CUDA kernel computes with them: bf16 rounded to fp16 (exact where |x| is in
    2^-14 .. 65504, +-inf past it), fp16 and NVFP4 bytes as they are."""
    return a.to(torch.float16) if a.dtype == torch.bfloat16 else a
_MAX_EXTENT = 2**31 - 1  # M, N: 1..2147483647 (kernels/launcher.h kMaxExtent)
_MAX_K = _MAX_EXTENT - 63  # the largest multiple of 64 that fits
_ROW_MAJOR = "row-major, K contiguous"
_SCALE_LAYOUT = "the permuted view of a contiguous (1, ceil(rows/128), K/64, 32, 4, 4) array"


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _dims(t: torch.Tensor) -> tuple:
    return tuple(t.shape)


def _ceil128(x):
    return (x + 127) // 128


# ============================================================================ the task layout (grouped_gemm)

def _task_data(a, sfa, b, sfb, c):
    """The four-level input of fast_launch for the op's lists: abc, sf (the reordered scales again: the fast path
    checks only that level's structure), sf_reordered and sizes, M from a[g]'s rows, N from b[g]'s rows, K from
    b[g]'s row bytes."""
    G = len(a)
    if G < 1:
        raise ValueError("a must hold at least one group, got 0")
    for field, lst in (("sfa", sfa), ("b", b), ("sfb", sfb), ("c", c)):
        if len(lst) != G:
            raise ValueError(f"{field} has {len(lst)} groups, expected {G} like a")
    sizes = []
    for g in range(G):
        if a[g].dim() < 1:
            raise ValueError(f"group {g}: a has shape {_dims(a[g])}, expected (M, K//2, 1)")
        if b[g].dim() < 2:
            raise ValueError(f"group {g}: b has shape {_dims(b[g])}, expected (N, K//2, 1)")
        sizes.append((a[g].shape[0], b[g].shape[0], 2 * b[g].shape[1], 1))
    pairs = [(x, y) for x, y in zip(sfa, sfb)]
    return [(x, y, z) for x, y, z in zip(a, b, c)], pairs, pairs, sizes


def _check_tensor(g, field, t, dtypes, expected_dtype, shape, strides, names, layout, device):
    """fastlaunch/_C.cpp read_tensor's checks that metadata allows, in its order and with its messages: a negated or
    conjugated view, dtype, CUDA device (when the op runs on CUDA), shape, one device, then (a tensor with elements)
    strides along dimensions longer than 1. `device`: [device of the first tensor seen, its group, its field],
    filled on first use; None off CUDA."""
    if t.is_neg() or t.is_conj():
        raise ValueError(f"group {g}: {field} is a negated or conjugated view (its neg or conj bit is set), whose "
                         f"values are not its bytes")
    if t.dtype not in dtypes:
        raise TypeError(f"group {g}: {field} must be {expected_dtype}, got {_name(t.dtype)}")
    if device is not None and t.device.type != "cuda":
        raise ValueError(f"group {g}: {field} must be on a CUDA device, got {t.device}")
    if _dims(t) != shape:
        (n0, v0), (n1, v1) = names
        raise ValueError(f"group {g}: {field} has shape {_dims(t)}, expected {shape} for {n0}={v0}, {n1}={v1}")
    if device is not None:
        if not device:
            device.extend((t.device, g, field))
        elif t.device != device[0]:
            raise ValueError(f"group {g}: {field} is on {t.device}, expected {device[0]} like group {device[1]}'s "
                             f"{device[2]}")
    if t.numel() == 0:  # neither read nor written: its strides do not matter
        return
    if any(s > 1 and st != e for s, st, e in zip(shape, t.stride(), strides)):
        raise ValueError(f"group {g}: {field} has strides {tuple(t.stride())}, expected {strides} ({layout})")


def _check_size(g, name, v, lo, hi, multiple, rule):
    if not (lo <= v <= hi and v % multiple == 0):
        raise ValueError(f"group {g}: {name} must be {rule}, got {v}")


def _check_task_meta(data) -> None:
    """fast_launch's checks (fastlaunch/_C.cpp unpack_into) on metadata alone: sizes, then each group's a, b, c,
    sfa, sfb. Alignment is not checked (no data pointer)."""
    abc, _sf, sf_r, sizes = data
    on_cuda = any(t.device.type == "cuda" for group in abc for t in group) or \
        any(t.device.type == "cuda" for group in sf_r for t in group)
    device = [] if on_cuda else None
    fp4, e4m3, half = _FP4_DTYPES, (torch.float8_e4m3fn,), (torch.float16,)
    for g, ((a, b, c), (sa, sb), (m, n, k, _l)) in enumerate(zip(abc, sf_r, sizes)):
        _check_size(g, "m", m, 0, _MAX_EXTENT, 1, "an int in 0..2147483647")
        _check_size(g, "n", n, 0, _MAX_EXTENT, 1, "an int in 0..2147483647")
        _check_size(g, "k", k, 64, _MAX_K, 64, "a positive multiple of 64 up to 2147483584")
        kb, kt, mt, nt = k // 2, k // 64, _ceil128(m), _ceil128(n)
        _check_tensor(g, "a", a, fp4, "float4_e2m1fn_x2 or uint8", (m, kb, 1), (kb, 1, m * kb),
                      (("M", m), ("K", k)), _ROW_MAJOR, device)
        _check_tensor(g, "b", b, fp4, "float4_e2m1fn_x2 or uint8", (n, kb, 1), (kb, 1, n * kb),
                      (("N", n), ("K", k)), _ROW_MAJOR, device)
        _check_tensor(g, "c", c, half, "float16", (m, n, 1), (n, 1, m * n), (("M", m), ("N", n)),
                      "row-major, N contiguous", device)
        _check_tensor(g, "sfa", sa, e4m3, "float8_e4m3fn", (32, 4, mt, 4, kt, 1),
                      (16, 4, kt * 512, 1, 512, mt * kt * 512), (("M", m), ("K", k)), _SCALE_LAYOUT, device)
        _check_tensor(g, "sfb", sb, e4m3, "float8_e4m3fn", (32, 4, nt, 4, kt, 1),
                      (16, 4, kt * 512, 1, 512, nt * kt * 512), (("N", n), ("K", k)), _SCALE_LAYOUT, device)


_GROUPED_GEMM_SCHEMA = "(Tensor[] a, Tensor[] sfa, Tensor[] b, Tensor[] sfb, Tensor(a!)[] c) -> ()"


@torch.library.custom_op("fastlaunch::grouped_gemm", mutates_args=("c",), device_types="cpu",
                         schema=_GROUPED_GEMM_SCHEMA)
def _grouped_gemm_op(a: list[torch.Tensor], sfa: list[torch.Tensor], b: list[torch.Tensor], sfb: list[torch.Tensor],
                     c: list[torch.Tensor]) -> None:
    # CPU: fast_launch's own checks (without the device ones: _C.unpack), then the fp32 reference into each c.
    data = _task_data(a, sfa, b, sfb, c)
    _C.unpack(data)
    for (ag, bg, cg), (sag, sbg), (m, n, _k, _l) in zip(data[0], data[2], data[3]):
        prod = _R.dequantize(ag, _R.unreorder_scales(sag, m)) @ _R.dequantize(bg, _R.unreorder_scales(sbg, n)).T
        cg[:, :, 0] = prod.to(cg.dtype)


@_grouped_gemm_op.register_kernel("cuda")
def _grouped_gemm_cuda(a, sfa, b, sfb, c) -> None:
    _C.fast_launch(_task_data(a, sfa, b, sfb, c))


@_grouped_gemm_op.register_fake
def _grouped_gemm_fake(a, sfa, b, sfb, c) -> None:
    _check_task_meta(_task_data(a, sfa, b, sfb, c))


def grouped_gemm(a: Sequence[torch.Tensor], sfa: Sequence[torch.Tensor], b: Sequence[torch.Tensor],
                 sfb: Sequence[torch.Tensor], c: Sequence[torch.Tensor] | None = None) -> list[torch.Tensor]:
    """NVFP4 grouped GEMM in the task layout, through torch.ops.fastlaunch.grouped_gemm; returns the c tensors,
    written in place (allocated first when c is None).

    For each group g, with M = a[g].shape[0], N = b[g].shape[0], K = 2 * b[g].shape[1] (the lists give every size:
    there is no sizes argument):
      a[g]: [M, K//2, 1] float4_e2m1fn_x2 (or uint8), strides (K//2, 1, M*K//2); b[g]: [N, K//2, 1] likewise;
      sfa[g], sfb[g]: float8_e4m3fn scales as the task's sf_reordered views ([32, 4, ceil(M/128), 4, K//64, 1], the
        permuted view (3, 4, 1, 5, 2, 0) of a contiguous (1, ceil(M/128), K//64, 32, 4, 4) array);
      c[g]: [M, N, 1] float16, strides (N, 1, M*N): every element written with A[g] B[g]^T (fp32 accumulation).
        When c is None, each c[g] is a new float16 [M, N, 1] tensor on a[g]'s device.
    K must be a multiple of 64. On CUDA this is fastlaunch.fast_launch (all tensors on one device, data 16-byte
    aligned, c 2-byte aligned); on the CPU the fp32 reference. Errors name the group, the field, what was expected
    and what was given. Works under torch.compile (fullgraph) and in CUDA graph capture."""
    a, sfa, b, sfb = list(a), list(sfa), list(b), list(sfb)
    if c is None:
        if len(b) != len(a):
            raise ValueError(f"b has {len(b)} groups, expected {len(a)} like a")
        c = [torch.empty((x.shape[0], y.shape[0], 1), dtype=torch.float16, device=x.device) if x.dim() >= 1 and
             y.dim() >= 1 else torch.empty(0, dtype=torch.float16, device=x.device) for x, y in zip(a, b)]
    else:
        c = list(c)
    _wrapper_call(_GEMM_EAGER, torch.ops.fastlaunch.grouped_gemm, a, sfa, b, sfb, c)
    return c


# ============================================================================ the serving layout (grouped_mm_masked)

def _masked_check(field, t, dtypes, expected_dtype, shape, names, device):
    """One tensor of the masked op: not a negated or conjugated view, dtype, shape, contiguous strides (along
    dimensions longer than 1), a's device."""
    if t.is_neg() or t.is_conj():
        raise ValueError(f"{field} is a negated or conjugated view (its neg or conj bit is set), whose values are not "
                         f"its bytes")
    if t.dtype not in dtypes:
        raise TypeError(f"{field} must be {expected_dtype}, got {_name(t.dtype)}")
    if _dims(t) != shape:
        sizes = ", ".join(f"{n}={v}" for n, v in names)
        raise ValueError(f"{field} has shape {_dims(t)}, expected {shape} for {sizes}")
    strides, step = [], 1
    for s in reversed(shape):
        strides.append(step)
        step *= s
    strides = tuple(reversed(strides))
    if any(s > 1 and st != e for s, st, e in zip(shape, t.stride(), strides)):
        raise ValueError(f"{field} has strides {tuple(t.stride())}, expected {strides} (contiguous)")
    if t.device != device:
        raise ValueError(f"{field} is on {t.device}, expected {device} like a")


_COUNT_DTYPES = (torch.int32, torch.int64)  # masked_m in the ops (fastlaunch._C.grouped_mm_masked: int32 only)


def _a_form(a, sfa) -> bool:
    """Whether a is the weight-only forms' fp16 or bf16 (with sfa None) rather than NVFP4 bytes (with sfa); raises the
    extension's TypeError for any other dtype or an sfa that does not agree."""
    weight_only = a.dtype in _ACT_DTYPES
    if a.dtype not in _FP4_DTYPES and not weight_only:
        raise TypeError(f"a must be float4_e2m1fn_x2 or uint8 (NVFP4, with sfa) or float16 or bfloat16 (weight-only, "
                        f"sfa None), got {_name(a.dtype)}")
    if weight_only != (sfa is None):
        raise TypeError("sfa must be None where a is float16 or bfloat16 (weight-only: a's values are used as they are)"
                        if weight_only else
                        "sfa must be a torch.Tensor of a's scales where a is NVFP4, got None")
    return weight_only


def _check_operands(a, sfa, weight_only, lead, a_names, b, sfb, G, n, k, sizes_field, sizes, count_dtypes, out,
                    out_shape, out_names, alpha) -> None:
    """The masked and contiguous ops' tensor checks, in argument order (a, sfa, b, sfb, the sizes, out, alpha), once
    their sizes are known: a of leading dims `lead` (its rows last) and K inputs, fp16/bf16 (weight-only) or NVFP4
    with sfa of the rows' scale tiles; b and sfb of G experts, N outputs (checked first: a multiple of 8); the sizes
    int [G]; out of `out_shape`."""
    if not 1 <= n <= _MAX_EXTENT or n % 8:
        raise ValueError(f"b has shape {_dims(b)}, expected (G, N, K//2) with N in 1..2147483647 a multiple of 8 "
                         f"(out's rows are stored in 16-byte chunks)")
    dev = a.device
    fp4, e4m3 = "float4_e2m1fn_x2 or uint8", (torch.float8_e4m3fn,)
    if weight_only:
        _masked_check("a", a, _ACT_DTYPES, _ACT_NAMES, (*lead, k), a_names, dev)
    else:
        _masked_check("a", a, _FP4_DTYPES, fp4, (*lead, k // 2), a_names, dev)
        _masked_check("sfa", sfa, e4m3, "float8_e4m3fn", (*lead[:-1], _ceil128(lead[-1]), k // 64, 32, 4, 4),
                      a_names, dev)
    gnk = (("G", G), ("N", n), ("K", k))
    _masked_check("b", b, _FP4_DTYPES, fp4, (G, n, k // 2), gnk, dev)
    _masked_check("sfb", sfb, e4m3, "float8_e4m3fn", (G, _ceil128(n), k // 64, 32, 4, 4), gnk, dev)
    _masked_check(sizes_field, sizes, count_dtypes, " or ".join(_name(d) for d in count_dtypes), (G,), (("G", G),),
                  dev)
    _masked_check("out", out, _MASKED_OUT_DTYPES, " or ".join(_name(d) for d in _MASKED_OUT_DTYPES), out_shape,
                  out_names, dev)
    if alpha is not None:
        _masked_check("alpha", alpha, (torch.float32,), "float32", (G,), (("G", G),), dev)


def _check_masked_meta(a, sfa, b, sfb, masked_m, out, count_dtypes=(torch.int32,), alpha=None) -> None:
    """The masked op's checks on metadata alone (masked_m's and alpha's values are never read), in argument order: a,
    sfa, b, sfb, masked_m, out, alpha (when given); each: dtype, shape, contiguous strides, device. G, max_m and K come
    from a, N from b. a float16 or bfloat16 [G, max_m, K] (weight-only) goes with sfa None, NVFP4 a with its scales.
    count_dtypes: what masked_m may be (the default, int32, is what fastlaunch._C.grouped_mm_masked takes)."""
    weight_only = _a_form(a, sfa)
    a_dims = "(G, max_m, K)" if weight_only else "(G, max_m, K//2)"
    if a.dim() != 3:
        raise ValueError(f"a has shape {_dims(a)}, expected {a_dims}")
    if b.dim() != 3:
        raise ValueError(f"b has shape {_dims(b)}, expected (G, N, K//2)")
    G, max_m, ka = a.shape
    n = b.shape[1]
    k = ka if weight_only else 2 * ka
    if not (G >= 1 and max_m >= 1 and 64 <= k <= _MAX_K and k % 64 == 0):
        raise ValueError(f"a has shape {_dims(a)}, expected {a_dims} with G >= 1, max_m >= 1 and K a "
                         f"positive multiple of 64 up to 2147483584")
    _check_operands(a, sfa, weight_only, (G, max_m), (("G", G), ("max_m", max_m), ("K", k)), b, sfb, G, n, k,
                    "masked_m", masked_m, count_dtypes, out, (G, max_m, n), (("G", G), ("max_m", max_m), ("N", n)),
                    alpha)


_MASKED_SCHEMA = "(Tensor a, Tensor? sfa, Tensor b, Tensor sfb, Tensor masked_m, Tensor(a!) out, Tensor? alpha=None) -> ()"


@torch.library.custom_op("fastlaunch::grouped_mm_masked", mutates_args=("out",), device_types="cpu",
                         schema=_MASKED_SCHEMA)
def _grouped_mm_masked_op(a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor, sfb: torch.Tensor,
                          masked_m: torch.Tensor, out: torch.Tensor, alpha: torch.Tensor | None = None) -> None:
    # CPU: the checks, then the fp32 reference (times alpha) into rows < masked_m[g] only (reading masked_m here is a
    # host read of host memory; ref_masked raises on values outside 0..max_m).
    _check_masked_meta(a, sfa, b, sfb, masked_m, out, _COUNT_DTYPES, alpha)
    ref = _R.ref_masked(_as_kernel_reads(a), sfa, b, sfb, masked_m, alpha)
    for e, m in enumerate(masked_m.tolist()):
        if m:
            out[e, :m] = ref[e, :m].to(out.dtype)


def _cuda_call(name, check_meta, a, sfa, b, sfb, sizes, out, alpha) -> None:
    """The CUDA kernel of the masked and contiguous ops: fastlaunch._C.<name> (a missing one raises), int64 sizes
    (masked_m, offs) converted to the int32 it reads on the device, after check_meta saw their shape and device."""
    kernel = getattr(_C, name, None)
    if kernel is None:
        raise RuntimeError(f"fastlaunch._C has no {name}: this build of the extension lacks that kernel (rebuild "
                           f"fastlaunch from a source tree that has it); the CPU implementation of "
                           f"torch.ops.fastlaunch.{name} still works")
    if sizes.dtype == torch.int64:  # one small device-side conversion, no sync
        check_meta(a, sfa, b, sfb, sizes, out, _COUNT_DTYPES, alpha)
        sizes = sizes.to(torch.int32)
    kernel(a, sfa, b, sfb, sizes, out, alpha)


def _wrapper_call(eager, op, *args) -> None:
    """What a wrapper runs: outside torch.compile's tracing, `eager` (fastlaunch._C.<name>_eager, or None in a build
    without it), which makes the call the op's CUDA kernel makes where every tensor is a plain CUDA tensor needing no
    gradient, the sizes int32 and no torch mode active, and else returns NotImplemented (those checks made in C, not
    here, are most of what an eager call costs beyond the extension's); otherwise, or then, the op."""
    if eager is None or torch.compiler.is_compiling() or eager(*args) is NotImplemented:
        op(*args)


@_grouped_mm_masked_op.register_kernel("cuda")
def _grouped_mm_masked_cuda(a, sfa, b, sfb, masked_m, out, alpha=None) -> None:
    _cuda_call("grouped_mm_masked", _check_masked_meta, a, sfa, b, sfb, masked_m, out, alpha)


@_grouped_mm_masked_op.register_fake
def _grouped_mm_masked_fake(a, sfa, b, sfb, masked_m, out, alpha=None) -> None:
    _check_masked_meta(a, sfa, b, sfb, masked_m, out, _COUNT_DTYPES, alpha)


def _out_for(out, out_dtype, shape, device) -> torch.Tensor:
    """The wrappers' out: `out` if given (its dtype agreeing with out_dtype, if that is given too), else a new
    uninitialised tensor of shape() and out_dtype (float16 unless given) on `device`."""
    if out is None:
        dtype = torch.float16 if out_dtype is None else out_dtype
        if dtype not in _MASKED_OUT_DTYPES:
            raise TypeError(f"out_dtype must be float16 or bfloat16, got {dtype}")
        return torch.empty(shape(), dtype=dtype, device=device)
    if out_dtype is not None and out.dtype != out_dtype:
        raise TypeError(f"out is {_name(out.dtype)} but out_dtype is {_name(out_dtype)}: give one or make them agree")
    return out


def grouped_mm_masked(a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor, sfb: torch.Tensor,
                      masked_m: torch.Tensor, out: torch.Tensor | None = None, *, alpha: torch.Tensor | None = None,
                      out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """Masked NVFP4 grouped GEMM in the serving layout, through torch.ops.fastlaunch.grouped_mm_masked; returns out
    (allocated first when None, as out_dtype: float16 unless given).

    With G experts, max_m rows of capacity per expert, N outputs and K (a multiple of 64) inputs:
      a: [G, max_m, K//2] float4_e2m1fn_x2 (or uint8), contiguous: NVFP4 activations, two values a byte (the lower
        K index in the low nibble);
      sfa: [G, ceil(max_m/128), K//64, 32, 4, 4] float8_e4m3fn, contiguous: a's scales, one per 16 K elements of a
        row, row i and K block j of expert g at [g, i//128, j//4, i%32, (i%128)//32, j%4]
        (fastlaunch.reference.block_scales builds it from plain [rows, K//16] scales);
      or weight-only: a [G, max_m, K] float16 or bfloat16, contiguous, the activations as they come (not quantised;
        bf16 is rounded to fp16 on the device: exact for |x| in 2^-14 .. 65504, +-inf beyond), with sfa None;
      b: [G, N, K//2] and sfb: [G, ceil(N/128), K//64, 32, 4, 4] likewise (the stacked expert weights);
      masked_m: int32 or int64 [G] on the same device: expert g computes rows 0 .. masked_m[g]-1,
        0 <= masked_m[g] <= max_m (int64 counts, e.g. from a sum, cost one small int32 conversion on the device);
      out: [G, max_m, N] float16 or bfloat16, contiguous: out[g, :masked_m[g]] = alpha[g] A[g, :masked_m[g]] B[g]^T
        (fp32 accumulation, then one rounding to out's dtype, to nearest); rows at and past masked_m[g] are not
        written. When None, a new uninitialised tensor of out_dtype (default float16) on a's device (its rows past
        masked_m[g] hold whatever the allocator left there);
      alpha: optional float32 [G] on the same device, read there like masked_m: each expert's global scale (NVFP4
        checkpoints carry one per weight tensor besides the E4M3 block scales), applied in fp32 before the rounding.
        Without it, alpha[g] = 1.
    The host never reads masked_m on CUDA (no synchronisation: the call can be captured in a CUDA graph once and
    replayed with new masked_m contents); the CPU implementation reads it. Works under torch.compile (fullgraph).
    An eager call on plain CUDA tensors (int32 counts) goes straight to the extension; traced, fake or CPU tensors
    go through the op."""
    if out is None and (a.dim() != 3 or b.dim() != 3):
        _check_masked_meta(a, sfa, b, sfb, masked_m, a, _COUNT_DTYPES)  # raises the shape error
    out = _out_for(out, out_dtype, lambda: (a.shape[0], a.shape[1], b.shape[1]), a.device)
    _wrapper_call(_MASKED_EAGER, torch.ops.fastlaunch.grouped_mm_masked, a, sfa, b, sfb, masked_m, out, alpha)
    return out


# ============================================================================ the contiguous layout (grouped_mm_contiguous)

def _check_contiguous_meta(a, sfa, b, sfb, offs, out, count_dtypes=(torch.int32,), alpha=None) -> None:
    """The contiguous op's checks on metadata alone (offs' and alpha's values are never read), in argument order, with
    fastlaunch._C.grouped_mm_contiguous's messages. T and K come from a, G and N from b."""
    weight_only = _a_form(a, sfa)
    a_dims = "(T, K)" if weight_only else "(T, K//2)"
    if a.dim() != 2:
        raise ValueError(f"a has shape {_dims(a)}, expected {a_dims}")
    if b.dim() != 3:
        raise ValueError(f"b has shape {_dims(b)}, expected (G, N, K//2)")
    T, ka = a.shape
    k = ka if weight_only else 2 * ka
    G, n = b.shape[0], b.shape[1]
    if not (64 <= k <= _MAX_K and k % 64 == 0 and T <= _MAX_EXTENT):
        raise ValueError(f"a has shape {_dims(a)}, expected {a_dims} with K a positive multiple of 64 up to "
                         f"2147483584")
    if not 1 <= G <= 256:
        raise ValueError(f"b has shape {_dims(b)}, expected (G, N, K//2) with G in 1..256")
    _check_operands(a, sfa, weight_only, (T,), (("T", T), ("K", k)), b, sfb, G, n, k, "offs", offs, count_dtypes,
                    out, (T, n), (("T", T), ("N", n)), alpha)


_CONTIGUOUS_SCHEMA = ("(Tensor a, Tensor? sfa, Tensor b, Tensor sfb, Tensor offs, Tensor(a!) out, Tensor? alpha=None)"
                      " -> ()")


@torch.library.custom_op("fastlaunch::grouped_mm_contiguous", mutates_args=("out",), device_types="cpu",
                         schema=_CONTIGUOUS_SCHEMA)
def _grouped_mm_contiguous_op(a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor, sfb: torch.Tensor,
                              offs: torch.Tensor, out: torch.Tensor, alpha: torch.Tensor | None = None) -> None:
    # CPU: the checks, then the fp32 reference (times alpha) into the experts' rows only (ref_contiguous raises on
    # offs out of order or past T)
    _check_contiguous_meta(a, sfa, b, sfb, offs, out, _COUNT_DTYPES, alpha)
    ref = _R.ref_contiguous(_as_kernel_reads(a), b, sfb, offs, alpha, sfa)
    start = 0
    for end in offs.tolist():
        if end > start:
            out[start:end] = ref[start:end].to(out.dtype)
        start = end


@_grouped_mm_contiguous_op.register_kernel("cuda")
def _grouped_mm_contiguous_cuda(a, sfa, b, sfb, offs, out, alpha=None) -> None:
    _cuda_call("grouped_mm_contiguous", _check_contiguous_meta, a, sfa, b, sfb, offs, out, alpha)


@_grouped_mm_contiguous_op.register_fake
def _grouped_mm_contiguous_fake(a, sfa, b, sfb, offs, out, alpha=None) -> None:
    _check_contiguous_meta(a, sfa, b, sfb, offs, out, _COUNT_DTYPES, alpha)


def grouped_mm_contiguous(a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor, sfb: torch.Tensor,
                          offs: torch.Tensor, out: torch.Tensor | None = None, *, alpha: torch.Tensor | None = None,
                          out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """NVFP4-weight grouped GEMM in the contiguous (prefill) layout, through
    torch.ops.fastlaunch.grouped_mm_contiguous; returns out (allocated first when None, as out_dtype: float16 unless
    given).

    With T token rows of all experts, expert by expert, G experts, N outputs and K (a multiple of 64) inputs:
      a: [T, K] float16 or bfloat16, contiguous: the activations as they come (bf16 rounded to fp16 on the device, as
        in grouped_mm_masked), with sfa None; or NVFP4 activations a [T, K//2] float4_e2m1fn_x2 (or uint8) with
        their scales sfa [ceil(T/128), K//64, 32, 4, 4] float8_e4m3fn (fastlaunch.quantize of the [T, K] rows gives
        both); experts need not start at a multiple of 128 rows;
      b: [G, N, K//2] float4_e2m1fn_x2 (or uint8) and sfb: [G, ceil(N/128), K//64, 32, 4, 4] float8_e4m3fn, the
        stacked expert weights (as grouped_mm_masked takes them);
      offs: int32 or int64 [G] on the same device, each expert's end row (cumulative, as torch._grouped_mm's offs):
        expert g owns rows offs[g-1] .. offs[g]-1 (offs[-1] read as 0), 0 <= offs[0] <= ... <= offs[G-1] <= T;
      out: [T, N] float16 or bfloat16, contiguous: each expert's rows = alpha[g] a[rows] B[g]^T (fp32 accumulation,
        one rounding); rows past offs[G-1] are not written;
      alpha: optional float32 [G] on the same device: each expert's global scale.
    At most 256 experts. The host never reads offs on CUDA (a CUDA graph replays with new offsets); the CUDA kernel
    clamps offsets out of order to the rows before them, the CPU implementation raises. Tiles are counted on the device
    from offs, so a call costs the rows the experts have, not G times T."""
    if out is None and (a.dim() != 2 or b.dim() != 3):
        _check_contiguous_meta(a, sfa, b, sfb, offs, a, _COUNT_DTYPES)  # raises the shape error
    out = _out_for(out, out_dtype, lambda: (a.shape[0], b.shape[1]), a.device)
    _wrapper_call(_CONTIGUOUS_EAGER, torch.ops.fastlaunch.grouped_mm_contiguous, a, sfa, b, sfb, offs, out, alpha)
    return out
