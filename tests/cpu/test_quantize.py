"""fastlaunch.quantize against an element-by-element reference of the NVFP4 rounding rules (exhaustive nearest
search over the E4M3 and E2M1 values, ties to the even code), on fresh random data (the seed is printed), and the
layouts it returns against fastlaunch.reference's."""
import pytest
import torch

import fastlaunch
from fastlaunch import reference as R

from conftest import fresh_seed

E4M3_POS = sorted({(c, float(torch.tensor([c], dtype=torch.uint8).view(torch.float8_e4m3fn).float()))
                   for c in range(0x7F)}, key=lambda cv: cv[1])  # finite non-negative codes, by value
E2M1_POS = [(c, R.E2M1_VALUES[c]) for c in range(8)]


def nearest(x: float, table) -> int:
    """The code of the value in `table` ((code, value), by value) nearest to x >= 0, ties to the even code,
    saturated at the largest."""
    best = min(table, key=lambda cv: (abs(cv[1] - x), cv[0] % 2))
    return best[0]


def ref_quantize(x: torch.Tensor, s: float = 1.0):
    """Per row and block of 16: (codes [rows, K], scale codes [rows, K//16]) by the rules, in float64."""
    v = x.double() / s
    rows, k = v.shape
    codes = torch.zeros(rows, k, dtype=torch.uint8)
    sc = torch.zeros(rows, k // 16, dtype=torch.uint8)
    for r in range(rows):
        for j in range(k // 16):
            blk = v[r, 16 * j:16 * j + 16]
            amax = float(blk.abs().max())
            # the scale: E4M3 nearest to amax / 6 (computed in fp32 as the quantiser does), saturated at 448
            target = float(torch.tensor(amax, dtype=torch.float32) / 6)
            c = nearest(min(target, 448.0), E4M3_POS)
            sc[r, j] = c
            scale = dict(E4M3_POS)[c]
            for i in range(16):
                val = float(blk[i])
                q = 0 if scale == 0 else nearest(abs(float(torch.tensor(val, dtype=torch.float32) /
                                                           torch.tensor(scale, dtype=torch.float32))), E2M1_POS)
                codes[r, 16 * j + i] = q | (8 if val < 0 and q else 0)
    return codes, sc


def unpack_codes(packed: torch.Tensor) -> torch.Tensor:
    raw = packed.view(torch.uint8)
    return torch.stack([raw & 0xF, raw >> 4], dim=-1).reshape(*raw.shape[:-1], 2 * raw.shape[-1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_matches_the_rounding_rules(dtype):
    seed = fresh_seed()
    g = torch.Generator().manual_seed(seed)
    rows, k = 5, 128
    # magnitudes over many octaves, exact ties (multiples of 0.25 of a power-of-two scale), a zero block
    x = (torch.randn(rows, k, generator=g) * 2.0 ** torch.randint(-12, 12, (rows, 1), generator=g)).to(dtype)
    x[1, :16] = torch.tensor([6, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, -0.25, -0.75, -5, -3.5, 0, 0.1, 4, 3],
                             dtype=dtype)
    x[2, 16:32] = 0
    packed, scales, blocked = fastlaunch.quantize(x)
    codes, sc = ref_quantize(x.float())
    assert packed.dtype == torch.float4_e2m1fn_x2 and packed.shape == (rows, k // 2)
    assert scales.dtype == torch.float8_e4m3fn and scales.shape == (rows, k // 16)
    assert torch.equal(scales.view(torch.uint8), sc), f"seed {seed}"
    assert torch.equal(unpack_codes(packed), codes), f"seed {seed}"
    assert torch.equal(blocked.view(torch.uint8), R.block_scales(scales).view(torch.uint8))
    # the row of ties: 6 sets the scale to 1; each midpoint goes to its even neighbour
    assert [R.E2M1_VALUES[c] for c in codes[1, :16].tolist()] == [6, 0, 1, 1, 2, 2, 4, 4, 0, -1, -4, -4, 0, 0, 4, 3]


def test_global_scale_and_saturation():
    seed = fresh_seed()
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 64, generator=g) * 1000
    x[0, 0] = 6 * 448 * 4  # a block whose scale saturates: its largest values clamp at +-6 x 448
    s = float(x.abs().max()) / (6 * 448)
    packed, scales, _ = fastlaunch.quantize(x, s)
    codes, sc = ref_quantize(x, s)
    assert torch.equal(scales.view(torch.uint8), sc) and torch.equal(unpack_codes(packed), codes), f"seed {seed}"
    _p, sat, _b = fastlaunch.quantize(x)
    assert float(sat[0, 0].float()) == 448.0 and unpack_codes(_p)[0, 0] == 7


def test_round_trip_error_is_within_half_a_step():
    # dequantised values within half an E2M1 step of the input, relative to the block scale (ties included)
    seed = fresh_seed()
    x = torch.randn(64, 256, generator=torch.Generator().manual_seed(seed))
    packed, scales, _ = fastlaunch.quantize(x)
    deq = R.dequantize(packed.view(torch.uint8), scales)
    step = scales.float().repeat_interleave(16, dim=1)  # the widest E2M1 step (4 -> 6) is 2 scale units
    assert bool(((deq - x).abs() <= step * 1.0 + 1e-6).all()), f"seed {seed}"


def test_stacked_weights_give_the_serving_layouts():
    # [G, N, K] -> b [G, N, K//2], sfb [G, ceil(N/128), K//64, 32, 4, 4], as generate_masked_input lays them out
    seed = fresh_seed()
    w = torch.randn(3, 200, 128, generator=torch.Generator().manual_seed(seed), dtype=torch.bfloat16)
    packed, scales, blocked = fastlaunch.quantize(w)
    assert packed.shape == (3, 200, 64) and scales.shape == (3, 200, 8) and blocked.shape == (3, 2, 2, 32, 4, 4)
    for e in range(3):
        one = fastlaunch.quantize(w[e])
        assert torch.equal(packed[e].view(torch.uint8), one[0].view(torch.uint8))
        assert torch.equal(blocked[e].view(torch.uint8), one[2].view(torch.uint8))
        assert torch.equal(R.unblock_scales(blocked[e], 200).view(torch.uint8), scales[e].view(torch.uint8))


@pytest.mark.parametrize("x, kw, exc, text", [
    ("list", {}, TypeError, "x must be a torch.Tensor, got list"),
    (torch.zeros(4, 64, dtype=torch.int32), {}, ValueError, "x must be bfloat16, float16 or float32, got int32"),
    (torch.zeros(64), {}, ValueError, "at least 2 dimensions"),
    (torch.zeros(4, 48), {}, ValueError, "K = 48 values per row, expected a positive multiple of 64"),
    (torch.full((2, 64), float("nan")), {}, ValueError, "NaN or infinite"),
    (torch.zeros(2, 64), {"global_scale": 0.0}, ValueError, "global_scale must be finite and positive, got 0.0"),
    (torch.zeros(2, 64), {"global_scale": torch.ones(2)}, ValueError, "global_scale must be one value, got 2"),
])
def test_bad_input_is_named(x, kw, exc, text):
    with pytest.raises(exc, match=text):
        fastlaunch.quantize([] if isinstance(x, str) else x, **kw)
