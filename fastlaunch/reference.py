"""Inputs, reference and checker for the NVFP4 grouped GEMM (the GPU MODE nvfp4_group_gemm contract).

generate_input(m, n, k, g, seed, device=...) -> data = (abc, sf, sf_reordered, sizes)
ref_kernel(data) -> list of c tensors, by fp32 dequantise-and-matmul (written in place)
scales_as_read(data) -> data with its plain scales rebuilt from the reordered ones (the bytes the kernel reads)
check(out, ref) -> (ok, message) with |out - ref| <= 1e-3 + 1e-3 |ref| and NaN/Inf agreeing

The serving (masked) layout: a [G, max_m, K//2], sfa [G, ceil(max_m/128), K//64, 32, 4, 4], b [G, N, K//2],
sfb [G, ceil(N/128), K//64, 32, 4, 4], masked_m int32 [G], out fp16 [G, max_m, N]; expert g computes rows
0 .. masked_m[g]-1 of out[g] and leaves the others as they were.
generate_masked_input(g, max_m, n, k, masked_m, seed, device=...) -> (a, sfa, b, sfb, masked_m, out)
ref_masked(a, sfa, b, sfb, masked_m) -> fp32 [G, max_m, N]
ref_contiguous(a, b, sfb, offs, alpha=None) -> fp32 [T, N]; check_contiguous(out, ref, before) -> (ok, message)
check_masked(out, ref, masked_m, before) -> (ok, message)

Scale layouts: block_scales / unblock_scales convert plain [rows, K//16] scales to and from the blocked
[ceil(rows/128), K//64, 32, 4, 4] array; reorder_scales / unreorder_scales to and from the task's permuted view
of it.
"""
from __future__ import annotations

from typing import Sequence

import torch

# E2M1 code -> value; code bit 3 is the sign.
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
ATOL = 1e-3
RTOL = 1e-3


def _per_group(v, g: int, name: str) -> list[int]:
    if isinstance(v, int):
        return [v] * g
    v = list(v)
    if len(v) != g:
        raise ValueError(f"{name} has {len(v)} entries, expected g={g}")
    return [int(x) for x in v]


# Plain scales padded to whole 128-row tiles, viewed as (tile, (i%128)//32, i%32, j//4, j%4) for row i and K
# block j, and the blocked array (tile, j//4, i%32, (i%128)//32, j%4) are each other's permutation (0, 3, 2, 1, 4),
# which is its own inverse: the one rule serves both directions.
_BLOCK_PERM = (0, 3, 2, 1, 4)


def block_scales(sf: torch.Tensor, pad: int | None = None) -> torch.Tensor:
    """Plain scales [rows, K//16(, 1)] -> the contiguous blocked array [ceil(rows/128), K//64, 32, 4, 4] (same dtype):
    row i, K block j (16 elements) at index (i//128, j//4, i%32, (i%128)//32, j%4); each 128-row x 64-K block is 512
    contiguous bytes. Rows past `rows` in the last 128-row block get the byte `pad` (default: zero), standing for the
    arbitrary values the contract allows there."""
    if sf.dim() == 3:
        sf = sf[:, :, 0]
    rows, kb = sf.shape
    if kb % 4:
        raise ValueError(f"K//16 = {kb} is not a multiple of 4 (K must be a multiple of 64)")
    mt, kt = -(-rows // 128), kb // 4
    raw = sf.view(torch.uint8)
    padded = torch.full((mt * 128, kb), pad or 0, dtype=torch.uint8, device=sf.device)
    padded[:rows] = raw
    blocks = padded.view(mt, 4, 32, kt, 4).permute(_BLOCK_PERM).contiguous()
    return blocks.view(sf.dtype)


def unblock_scales(blocked: torch.Tensor, rows: int) -> torch.Tensor:
    """The blocked array [tiles, K//64, 32, 4, 4] -> plain scales [rows, K//16] (the inverse of block_scales, padding
    rows dropped); with a leading expert dimension, [G, tiles, K//64, 32, 4, 4] -> [G, rows, K//16]."""
    if blocked.dim() == 6:
        return torch.stack([unblock_scales(x, rows) for x in blocked])
    if blocked.dim() != 5 or tuple(blocked.shape[2:]) != (32, 4, 4):
        raise ValueError(f"blocked scales have shape {tuple(blocked.shape)}, expected (tiles, K//64, 32, 4, 4)")
    mt, kt = blocked.shape[0], blocked.shape[1]
    if rows > mt * 128:
        raise ValueError(f"{rows} rows do not fit {mt} tiles of 128")
    raw = blocked.view(torch.uint8).permute(_BLOCK_PERM).reshape(mt * 128, kt * 4)
    return raw[:rows].view(blocked.dtype)


def reorder_scales(sf: torch.Tensor, pad: int | None = None) -> torch.Tensor:
    """Plain scales [rows, K//16(, 1)] -> the 32x4x4 layout: a contiguous (1, ceil(rows/128), K//64, 32, 4, 4)
    array exposed as the permuted view (3, 4, 1, 5, 2, 0). Row i, K block j sits at storage index
    (i//128, j//4, i%32, (i%128)//32, j%4). Rows past `rows` in the last 128-row block get the byte `pad`
    (default: zero), standing for the arbitrary values the contract allows there."""
    return block_scales(sf, pad).view(torch.float8_e4m3fn).unsqueeze(0).permute(3, 4, 1, 5, 2, 0)


def unreorder_scales(sf_r: torch.Tensor, rows: int) -> torch.Tensor:
    """The task's permuted view [32, 4, ceil(rows/128), 4, K//64, 1] -> plain scales [rows, K//16] (the inverse of
    reorder_scales, padding rows dropped)."""
    if sf_r.dim() != 6:
        raise ValueError(f"reordered scales have shape {tuple(sf_r.shape)}, expected (32, 4, tiles, 4, K//64, 1)")
    return unblock_scales(sf_r.permute(5, 2, 4, 0, 1, 3)[0], rows)


def _fp4_bytes(rows: int, k: int, gen: torch.Generator, device) -> torch.Tensor:
    # Each nibble masked to sign + 2 low bits: values in {0, +-0.5, +-1, +-1.5}, as the task generates them.
    b = torch.randint(0, 256, (1, rows, k // 2), dtype=torch.uint8, generator=gen) & 0b1011_1011
    return b.permute(1, 2, 0).to(device)  # [rows, k//2, 1], strides (k//2, 1, rows*k//2)


def generate_input(m, n, k, g: int, seed: int, device: str | torch.device = "cuda", *, full_range: bool = False,
                   scale_pad: int | None = None, fp4_dtype: bool = True):
    """The contract's input tuple. m, n, k: an int for every group or one value per group.

    full_range: draw A/B from all 16 E2M1 codes and scales from every finite positive E4M3 value (a harder
    test than the task's own data). scale_pad: byte for scale rows past M/N inside the last 128-row block.
    fp4_dtype: A/B as float4_e2m1fn_x2 (else the same bytes as uint8)."""
    ms, ns, ks = _per_group(m, g, "m"), _per_group(n, g, "n"), _per_group(k, g, "k")
    gen = torch.Generator().manual_seed(seed)
    abc, sf, sf_r, sizes = [], [], [], []
    for mi, ni, ki in zip(ms, ns, ks):
        if full_range:
            a = torch.randint(0, 256, (1, mi, ki // 2), dtype=torch.uint8, generator=gen).permute(1, 2, 0).to(device)
            b = torch.randint(0, 256, (1, ni, ki // 2), dtype=torch.uint8, generator=gen).permute(1, 2, 0).to(device)
            # E4M3 codes 0x01..0x7e: every finite positive value, subnormals included.
            sfa = torch.randint(1, 0x7F, (mi, ki // 16, 1), dtype=torch.uint8, generator=gen).view(torch.float8_e4m3fn)
            sfb = torch.randint(1, 0x7F, (ni, ki // 16, 1), dtype=torch.uint8, generator=gen).view(torch.float8_e4m3fn)
        else:
            a = _fp4_bytes(mi, ki, gen, device)
            b = _fp4_bytes(ni, ki, gen, device)
            sfa = torch.randint(1, 3, (mi, ki // 16, 1), generator=gen).to(torch.float8_e4m3fn)
            sfb = torch.randint(1, 3, (ni, ki // 16, 1), generator=gen).to(torch.float8_e4m3fn)
        if fp4_dtype:
            a, b = a.view(torch.float4_e2m1fn_x2), b.view(torch.float4_e2m1fn_x2)
        c = torch.randn((1, mi, ni), dtype=torch.float16, generator=gen).permute(1, 2, 0).to(device)
        abc.append((a, b, c))
        sf.append((sfa, sfb))  # plain scales stay on the CPU, as in the task
        sf_r.append((reorder_scales(sfa, scale_pad).to(device), reorder_scales(sfb, scale_pad).to(device)))
        sizes.append((mi, ni, ki, 1))
    return abc, sf, sf_r, sizes


def dequantize(packed: torch.Tensor, sf: torch.Tensor) -> torch.Tensor:
    """[rows, K//2(, 1)] packed E2M1 (low nibble = lower K) and [rows, K//16(, 1)] E4M3 scales -> fp32 [rows, K]."""
    if packed.dim() == 3:
        packed = packed[:, :, 0]
    if sf.dim() == 3:
        sf = sf[:, :, 0]
    raw = packed.view(torch.uint8)
    table = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=raw.device)
    vals = torch.stack([table[(raw & 0xF).long()], table[(raw >> 4).long()]], dim=-1).reshape(raw.shape[0],
                                                                                            2 * raw.shape[1])
    scale = sf.to(raw.device).float().repeat_interleave(16, dim=1)
    return vals * scale


def ref_kernel(data) -> list[torch.Tensor]:
    """fp32 dequantise-and-matmul per group, written into the groups' c tensors (fp16)."""
    abc, sf, _, sizes = data
    out = []
    for (a, b, c), (sfa, sfb), (m, n, k, _l) in zip(abc, sf, sizes):
        prod = dequantize(a, sfa) @ dequantize(b, sfb).T
        c[:, :, 0] = prod.to(torch.float16)
        out.append(c)
    return out


def _mismatch(o: torch.Tensor, r: torch.Tensor, atol: float, rtol: float):
    """(count, index of the first) of the elements of o outside atol + rtol*|r| of r, NaN where r is not NaN (or the
    other way round), or unequal to an infinite r."""
    o, r = o.float(), r.float().to(o.device)
    nan_bad = torch.isnan(o) != torch.isnan(r)
    inf_bad = torch.isinf(r) & (o != r)
    finite = torch.isfinite(r)
    diff = (o - r).abs()
    tol_bad = finite & ~(diff <= atol + rtol * r.abs())
    bad = nan_bad | inf_bad | tol_bad
    nbad = int(bad.sum())
    return nbad, (tuple(int(i) for i in bad.nonzero()[0]) if nbad else None)


def check(out: Sequence[torch.Tensor], ref: Sequence[torch.Tensor], atol: float = ATOL, rtol: float = RTOL):
    """(ok, message): every element within atol + rtol*|ref|, NaN where ref is NaN, equal infinities."""
    if len(out) != len(ref):
        return False, f"{len(out)} outputs, expected {len(ref)}"
    for g, (o, r) in enumerate(zip(out, ref)):
        if o.shape != r.shape:
            return False, f"group {g}: output shape {tuple(o.shape)}, expected {tuple(r.shape)}"
        nbad, idx = _mismatch(o, r, atol, rtol)
        if nbad:
            return False, (f"group {g}: {nbad} of {o.numel()} elements differ; first at {idx}: "
                           f"got {o[idx].item()}, expected {r[idx].item()}")
    return True, "ok"


def scales_as_read(data):
    """The same input with its plain scales rebuilt from its reordered ones (on their device): the scale bytes the
    kernel reads. A reference built from this stays right after the reordered scales were rewritten in place (a CUDA
    graph replayed on new data), where ref_kernel on the input as generated would still read its first plain scales."""
    abc, _sf, sf_r, sizes = data
    sf = [(unreorder_scales(sa, m).unsqueeze(-1), unreorder_scales(sb, n).unsqueeze(-1))
          for (sa, sb), (m, n, _k, _l) in zip(sf_r, sizes)]
    return abc, sf, sf_r, sizes


def clone_outputs(data):
    """The same input with fresh c tensors (for running a reference beside the kernel)."""
    abc, sf, sf_r, sizes = data
    return [(a, b, torch.empty_like(c)) for a, b, c in abc], sf, sf_r, sizes


def poison(data) -> None:
    """Fills every c with NaN, so an element the kernel does not write fails the check."""
    for _a, _b, c in data[0]:
        c.fill_(float("nan"))


def run_checked(kernel, data):
    """kernel(data) (e.g. fastlaunch.fast_launch) with every output poisoned with NaN first, checked against the fp32
    reference once the device is done: (ok, message)."""
    ref = ref_kernel(clone_outputs(data))
    poison(data)
    out = kernel(data)
    if out and out[0].is_cuda:
        torch.cuda.synchronize()
    return check(out, ref)


E4M3_ONE = 0x38  # the E4M3 encoding of 1.0


def zero_operands(data):
    """Sets every A/B byte of `data` to zero and every reordered scale to 1.0, in place (every product zero: the
    same work on data that toggles nothing, for the tools that measure what the data's power costs); returns it."""
    for (a, b, _c), (sa, sb) in zip(data[0], data[2]):
        a.view(torch.uint8).zero_()
        b.view(torch.uint8).zero_()
        sa.view(torch.uint8).fill_(E4M3_ONE)
        sb.view(torch.uint8).fill_(E4M3_ONE)
    return data


# ============================================================================ the serving (masked) layout

FP16_MAX = 65504.0
E2M1_MAX = 6.0


def full_range_scale_codes(k: int) -> torch.Tensor:
    """The E4M3 codes (uint8) full-range masked data draws its scales from: every E4M3 value in [hi/64, hi], hi the
    largest E4M3 value with K * (6 hi)^2 <= 65504. A dot product of K terms, each an E2M1 value (|v| <= 6) times a
    scale on each side, then stays within fp16's range: every output is finite."""
    values = torch.arange(0x7F, dtype=torch.uint8).view(torch.float8_e4m3fn).float()  # codes 0..0x7e: 0 and positives
    limit = (FP16_MAX / (k * E2M1_MAX * E2M1_MAX)) ** 0.5
    hi = values[values <= limit].max().item()
    if hi <= 0:
        raise ValueError(f"K={k}: no E4M3 scale keeps K products finite in fp16")
    codes = torch.nonzero((values >= hi / 64) & (values <= hi)).flatten()
    return codes.to(torch.uint8)


def generate_masked_input(g: int, max_m: int, n: int, k: int, masked_m, seed: int,
                          device: str | torch.device = "cuda", full_range: bool = False, *, out_init: str = "nan",
                          fp4_dtype: bool = True, scale_pad: int | None = None):
    """The serving layout's inputs: (a, sfa, b, sfb, masked_m, out), every tensor on `device`.

    a [g, max_m, k//2] and b [g, n, k//2]: NVFP4 bytes (float4_e2m1fn_x2, or uint8 with fp4_dtype=False), each nibble
    masked to sign + 2 low bits (values in {0, +-0.5, +-1, +-1.5}) as the task generates them; every row of a is
    filled, also rows at and past masked_m[g]. sfa [g, ceil(max_m/128), k//64, 32, 4, 4] and
    sfb [g, ceil(n/128), k//64, 32, 4, 4]: float8_e4m3fn scales, random integers 1..2, blocked by block_scales
    (rows past max_m / n in the last 128-row block: the byte scale_pad, default zero). masked_m: one int for every
    expert or g ints, each in 0..max_m; returned as int32 [g]. out [g, max_m, n] float16: NaN (out_init="nan", so an
    element that should be written and is not fails the check) or random normals (out_init="randn").
    full_range: A/B bytes from all 16 E2M1 codes in both nibbles and scales from full_range_scale_codes(k) (a 64x
    range of E4M3 values, every output finite)."""
    ms = _per_group(masked_m, g, "masked_m")
    for e, m in enumerate(ms):
        if not 0 <= m <= max_m:
            raise ValueError(f"masked_m[{e}] is {m}, expected 0..{max_m} (max_m)")
    if g < 1 or max_m < 1 or n < 1 or k < 64 or k % 64:
        raise ValueError(f"need g >= 1, max_m >= 1, n >= 1 and k a positive multiple of 64, got g={g}, max_m={max_m}, "
                         f"n={n}, k={k}")
    if out_init not in ("nan", "randn"):
        raise ValueError(f"out_init must be 'nan' or 'randn', got {out_init!r}")
    gen = torch.Generator().manual_seed(seed)
    a = torch.randint(0, 256, (g, max_m, k // 2), dtype=torch.uint8, generator=gen)
    b = torch.randint(0, 256, (g, n, k // 2), dtype=torch.uint8, generator=gen)
    if full_range:
        codes = full_range_scale_codes(k)
        sfa = codes[torch.randint(0, len(codes), (g, max_m, k // 16), generator=gen)].view(torch.float8_e4m3fn)
        sfb = codes[torch.randint(0, len(codes), (g, n, k // 16), generator=gen)].view(torch.float8_e4m3fn)
    else:
        a &= 0b1011_1011
        b &= 0b1011_1011
        sfa = torch.randint(1, 3, (g, max_m, k // 16), generator=gen).to(torch.float8_e4m3fn)
        sfb = torch.randint(1, 3, (g, n, k // 16), generator=gen).to(torch.float8_e4m3fn)
    sfa = torch.stack([block_scales(x, scale_pad) for x in sfa])
    sfb = torch.stack([block_scales(x, scale_pad) for x in sfb])
    if out_init == "nan":
        out = torch.full((g, max_m, n), float("nan"), dtype=torch.float16)
    else:
        out = torch.randn((g, max_m, n), dtype=torch.float16, generator=gen)
    if fp4_dtype:
        a, b = a.view(torch.float4_e2m1fn_x2), b.view(torch.float4_e2m1fn_x2)
    masked = torch.tensor(ms, dtype=torch.int32)
    return tuple(t.to(device) for t in (a, sfa, b, sfb, masked, out))


def ref_masked(a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor, sfb: torch.Tensor,
               masked_m: torch.Tensor, alpha: torch.Tensor | None = None) -> torch.Tensor:
    """fp32 [G, max_m, N]: row r of expert g is dequantize(a[g, r]) @ dequantize(b[g])^T (times alpha[g] where alpha
    is given) for r < masked_m[g], rows at and past masked_m[g] are NaN (no part of the result; check_masked compares
    them with the output's old contents instead). a float16 or bfloat16 [G, max_m, K] with sfa None (weight-only): a's
    rows as they are in place of dequantize(a[g, r]). Reads masked_m and alpha on the host; computed on a's device."""
    G, max_m, _kb = a.shape
    n = b.shape[1]
    ms = [int(x) for x in masked_m.tolist()]
    if len(ms) != G:
        raise ValueError(f"masked_m has {len(ms)} entries, expected G={G}")
    ref = torch.full((G, max_m, n), float("nan"), dtype=torch.float32, device=a.device)
    weight_only = a.dtype in (torch.float16, torch.bfloat16)
    plain_a, plain_b = None if weight_only else unblock_scales(sfa, max_m), unblock_scales(sfb, n)
    for e, m in enumerate(ms):
        if not 0 <= m <= max_m:
            raise ValueError(f"masked_m[{e}] is {m}, expected 0..{max_m} (max_m)")
        if m:
            rows = a[e, :m].float() if weight_only else dequantize(a[e, :m], plain_a[e, :m])
            ref[e, :m] = rows @ dequantize(b[e], plain_b[e]).T
            if alpha is not None:
                ref[e, :m] *= float(alpha[e])
    return ref


def ref_contiguous(a: torch.Tensor, b: torch.Tensor, sfb: torch.Tensor, offs: torch.Tensor,
                   alpha: torch.Tensor | None = None, sfa: torch.Tensor | None = None) -> torch.Tensor:
    """fp32 [T, N] of the contiguous layout: rows offs[g-1] .. offs[g]-1 (offs[-1] read as 0) of a (float16 or
    bfloat16 [T, K] as it is; or NVFP4 [T, K//2] dequantised with its blocked scales sfa) times dequantize(b[g])^T (times alpha[g] where given); rows in no expert's range are NaN.
    Raises unless 0 <= offs[0] <= offs[1] <= ... <= T. Reads offs and alpha on the host; computed on a's device."""
    T = a.shape[0]
    G, n = b.shape[0], b.shape[1]
    ends = [int(x) for x in offs.tolist()]
    if len(ends) != G:
        raise ValueError(f"offs has {len(ends)} entries, expected G={G}")
    ref = torch.full((T, n), float("nan"), dtype=torch.float32, device=a.device)
    plain_b = unblock_scales(sfb, n)
    plain_a = None if sfa is None else unblock_scales(sfa, T)
    start = 0
    for e, end in enumerate(ends):
        if not start <= end <= T:
            raise ValueError(f"offs[{e}] is {end}, expected {start}..{T} (offs[{e - 1}] or 0 .. T, the rows of a)")
        if end > start:
            rows = a[start:end].float() if sfa is None else dequantize(a[start:end], plain_a[start:end])
            ref[start:end] = rows @ dequantize(b[e], plain_b[e]).T
            if alpha is not None:
                ref[start:end] *= float(alpha[e])
        start = end
    return ref


def check_contiguous(out: torch.Tensor, ref: torch.Tensor, before: torch.Tensor, atol: float = ATOL,
                     rtol: float = RTOL):
    """(ok, message) for a contiguous call: rows where ref holds values within atol + rtol*|ref|, the NaN rows of
    ref (in no expert's range) bit-identical to `before`, out's contents before the call."""
    if out.shape != ref.shape or out.shape != before.shape:
        return False, f"out has shape {tuple(out.shape)}, expected {tuple(ref.shape)} (before: {tuple(before.shape)})"
    mine_r = ~torch.isnan(ref).all(1)
    mine = mine_r.to(out.device)
    nbad, idx = _mismatch(out[mine], ref[mine_r], atol, rtol)
    if nbad:
        return False, (f"{nbad} elements in experts' rows differ; first at (row {int(mine.nonzero()[idx[0]])}, col "
                       f"{idx[1]}): got {out[mine][idx].item()}, expected {ref[mine_r][idx].item()}")
    changed = _bits(out[~mine]) != _bits(before.to(out.device)[~mine])
    if int(changed.sum()):
        return False, f"{int(changed.sum())} elements in rows of no expert were written"
    return True, "ok"


def _bits(t: torch.Tensor) -> torch.Tensor:
    """t's bytes as integers of its element size (NaN payloads compare equal to themselves)."""
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def check_masked(out: torch.Tensor, ref: torch.Tensor, masked_m: torch.Tensor, before: torch.Tensor,
                 atol: float = ATOL, rtol: float = RTOL):
    """(ok, message) for a masked call: in rows < masked_m[g] of out[g], every element within atol + rtol*|ref| of
    ref (NaN where ref is NaN, equal infinities, as check); rows at and past masked_m[g] bit-identical to `before`,
    a copy of out taken before the call (untouched)."""
    if out.shape != ref.shape or out.shape != before.shape:
        return False, (f"out has shape {tuple(out.shape)}, expected {tuple(ref.shape)} like ref "
                       f"(before: {tuple(before.shape)})")
    ms = [int(x) for x in masked_m.tolist()]
    if len(ms) != out.shape[0]:
        return False, f"masked_m has {len(ms)} entries, expected G={out.shape[0]}"
    before = before.to(out.device)
    for e, m in enumerate(ms):
        if not 0 <= m <= out.shape[1]:
            return False, f"masked_m[{e}] is {m}, expected 0..{out.shape[1]} (max_m)"
        o, r = out[e, :m], ref[e, :m]
        nbad, idx = _mismatch(o, r, atol, rtol)
        if nbad:
            return False, (f"expert {e}: {nbad} of {o.numel()} elements in rows < masked_m={m} differ; first at "
                           f"(row {idx[0]}, col {idx[1]}): got {o[idx].item()}, expected {r[idx].item()}")
        tail, old = out[e, m:], before[e, m:]
        changed = _bits(tail) != _bits(old)
        nchanged = int(changed.sum())
        if nchanged:
            i, j = (int(x) for x in changed.nonzero()[0])
            return False, (f"expert {e}: {nchanged} elements in rows >= masked_m={m} were written; first at "
                           f"(row {m + i}, col {j}): got {tail[i, j].item()}, was {old[i, j].item()}")
    return True, "ok"
