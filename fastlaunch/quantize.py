"""NVFP4 quantisation: bf16 / fp16 / fp32 values to E2M1 codes and E4M3 block scales, in the layouts the calls take.

quantize(x, global_scale=None) -> (packed, scales, blocked)
  x            [..., rows, K] bf16, fp16 or fp32, K a multiple of 64 (one scale per 16 values, one blocked
               scale tile per 64); on any device: the work is torch operations, so it runs where x is (a GPU
               for weights at load time, the CPU in tests)
  global_scale optional fp32 scalar (a Python float or a one-element tensor) s: the values are quantised as
               x / s, so that x ~= s * scale * e2m1 (NVFP4 checkpoints carry such a per-tensor scale; the
               grouped GEMMs' optional per-expert alpha is where it goes back in)
  packed       [..., rows, K//2] torch.float4_e2m1fn_x2: two E2M1 codes a byte, the lower K in the low nibble
  scales       [..., rows, K//16] torch.float8_e4m3fn, plain: scale j of a row covers its values 16j .. 16j+15
  blocked      [..., ceil(rows/128), K//64, 32, 4, 4] torch.float8_e4m3fn: the 128-row x 64-K blocked layout of
               the serving calls' sfa/sfb (fastlaunch.reference.block_scales; rows past `rows` hold 0)

Rounding, as the formats define it:
  the block scale   = the block's absolute maximum / 6 (after the global scale), rounded to the nearest E4M3
                      value, ties to even, saturated at 448 (a block whose maximum needs more has its values
                      clamped at +-6 x 448)
  each value        / its dequantised block scale, rounded to the nearest E2M1 value (0, 0.5, 1, 1.5, 2, 3, 4,
                      6), ties to the even code (the one whose mantissa bit is 0), saturated at +-6; a block of
                      zeros has scale 0 and codes 0; NaN or infinite input raises ValueError (a check that waits
                      for the device: quantise weights once, at load time)
"""
from __future__ import annotations

import torch

from .reference import block_scales

E4M3_MAX = 448.0
E2M1_MAX = 6.0
# Boundaries between consecutive E2M1 magnitudes (codes 0..7: 0, 0.5, 1, 1.5, 2, 3, 4, 6), the midpoints. A value
# at a midpoint goes to the neighbour with the even code: down at 0.25, 1.25, 2.5 and 5 (codes 0, 2, 4, 6), up at
# 0.75, 1.75 and 3.5 (codes 2, 4, 6); torch.bucketize puts a value equal to a boundary in the lower bucket, so the
# boundaries that round up are moved just below their midpoint.
_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
_TIES_UP = (False, True, False, True, False, True, False)


def _boundaries(device) -> torch.Tensor:
    mid = torch.tensor(_MIDPOINTS, dtype=torch.float32, device=device)
    down = torch.nextafter(mid, torch.zeros_like(mid))
    return torch.where(torch.tensor(_TIES_UP, device=device), down, mid)


def e2m1_codes(v: torch.Tensor) -> torch.Tensor:
    """fp32 values -> E2M1 codes (uint8 0..15, bit 3 the sign), each the nearest E2M1 value, ties to the even code,
    saturated at +-6."""
    mag = torch.bucketize(v.abs(), _boundaries(v.device)).to(torch.uint8)  # 0..7
    return mag | (torch.signbit(v) & (mag > 0)).to(torch.uint8) << 3


def quantize(x: torch.Tensor, global_scale: float | torch.Tensor | None = None):
    """NVFP4 quantisation of x [..., rows, K] (see the module's docstring): returns (packed, scales, blocked)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise ValueError(f"x must be bfloat16, float16 or float32, got {str(x.dtype).replace('torch.', '')}")
    if x.dim() < 2:
        raise ValueError(f"x must have at least 2 dimensions [..., rows, K], got shape {tuple(x.shape)}")
    rows, k = x.shape[-2], x.shape[-1]
    if k == 0 or k % 64:
        raise ValueError(f"x has K = {k} values per row, expected a positive multiple of 64")
    v = x.float()
    if global_scale is not None:
        s = torch.as_tensor(global_scale, dtype=torch.float32, device=x.device)
        if s.numel() != 1:
            raise ValueError(f"global_scale must be one value, got {s.numel()}")
        if not bool(torch.isfinite(s)) or float(s) <= 0:
            raise ValueError(f"global_scale must be finite and positive, got {float(s)}")
        v = v / s.reshape(())
    if not bool(torch.isfinite(v).all()):
        raise ValueError("x holds NaN or infinite values (after the global scale): NVFP4 has no encoding for them")
    lead = v.shape[:-2]
    blocks = v.reshape(*lead, rows, k // 16, 16)
    amax = blocks.abs().amax(dim=-1)
    scales = (amax / E2M1_MAX).clamp(max=E4M3_MAX).to(torch.float8_e4m3fn)
    sdeq = scales.float().unsqueeze(-1)
    q = torch.where(sdeq > 0, blocks / torch.where(sdeq > 0, sdeq, torch.ones_like(sdeq)), torch.zeros_like(blocks))
    codes = e2m1_codes(q).reshape(*lead, rows, k)
    packed = (codes[..., 0::2] | codes[..., 1::2] << 4).view(torch.float4_e2m1fn_x2)
    flat = scales.reshape(-1, rows, k // 16)
    blocked = torch.stack([block_scales(s) for s in flat]) if flat.shape[0] else None
    mt = -(-rows // 128)
    blocked = (blocked if blocked is not None else torch.empty(0, mt, k // 64, 32, 4, 4, dtype=torch.float8_e4m3fn,
                                                               device=x.device)).reshape(*lead, mt, k // 64, 32, 4, 4)
    return packed, scales, blocked
