"""Inputs, reference and checker for the NVFP4 grouped GEMM (the GPU MODE nvfp4_group_gemm contract).

generate_input(m, n, k, g, seed, device=...) -> data = (abc, sf, sf_reordered, sizes)
ref_kernel(data) -> list of c tensors, by fp32 dequantise-and-matmul (written in place)
check(out, ref) -> (ok, message) with |out - ref| <= 1e-3 + 1e-3 |ref| and NaN/Inf agreeing
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


def reorder_scales(sf: torch.Tensor, pad: int | None = None) -> torch.Tensor:
    """Plain scales [rows, K//16(, 1)] -> the 32x4x4 layout: a contiguous (1, ceil(rows/128), K//64, 32, 4, 4)
    array exposed as the permuted view (3, 4, 1, 5, 2, 0). Row i, K block j sits at storage index
    (i//128, j//4, i%32, (i%128)//32, j%4). Rows past `rows` in the last 128-row block get the byte `pad`
    (default: zero), standing for the arbitrary values the contract allows there."""
    if sf.dim() == 3:
        sf = sf[:, :, 0]
    rows, kb = sf.shape
    if kb % 4:
        raise ValueError(f"K//16 = {kb} is not a multiple of 4 (K must be a multiple of 64)")
    mt, kt = -(-rows // 128), kb // 4
    raw = sf.view(torch.uint8)
    padded = torch.full((mt * 128, kb), pad or 0, dtype=torch.uint8, device=sf.device)
    padded[:rows] = raw
    blocks = padded.view(mt, 4, 32, kt, 4).permute(0, 3, 2, 1, 4).contiguous()
    return blocks.view(torch.float8_e4m3fn).unsqueeze(0).permute(3, 4, 1, 5, 2, 0)


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


def check(out: Sequence[torch.Tensor], ref: Sequence[torch.Tensor], atol: float = ATOL, rtol: float = RTOL):
    """(ok, message): every element within atol + rtol*|ref|, NaN where ref is NaN, equal infinities."""
    if len(out) != len(ref):
        return False, f"{len(out)} outputs, expected {len(ref)}"
    for g, (o, r) in enumerate(zip(out, ref)):
        if o.shape != r.shape:
            return False, f"group {g}: output shape {tuple(o.shape)}, expected {tuple(r.shape)}"
        o, r = o.float(), r.float().to(o.device)
        nan_bad = torch.isnan(o) != torch.isnan(r)
        inf_bad = torch.isinf(r) & (o != r)
        finite = torch.isfinite(r)
        diff = (o - r).abs()
        tol_bad = finite & ~(diff <= atol + rtol * r.abs())
        bad = nan_bad | inf_bad | tol_bad
        nbad = int(bad.sum())
        if nbad:
            idx = tuple(int(i) for i in bad.nonzero()[0])
            return False, (f"group {g}: {nbad} of {o.numel()} elements differ; first at {idx}: "
                           f"got {o[idx].item()}, expected {r[idx].item()}")
    return True, "ok"


def clone_outputs(data):
    """The same input with fresh c tensors (for running a reference beside the kernel)."""
    abc, sf, sf_r, sizes = data
    return [(a, b, torch.empty_like(c)) for a, b, c in abc], sf, sf_r, sizes


def poison(data) -> None:
    """Fills every c with NaN, so an element the kernel does not write fails the check."""
    for _a, _b, c in data[0]:
        c.fill_(float("nan"))


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
