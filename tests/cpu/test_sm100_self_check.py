"""CPU tests of the sm_100a kernel's self-check (kernels/sm100/self_check.h), through a C++ probe built with the host
compiler (tests/cpp/sm100_self_check_probe.cpp): what its launches cover, that its expected C is exact and agrees with
fastlaunch.reference on the same bytes, that a wrong or missing element or a write outside C is named with its launch,
group, row and column, and the failure messages. The device side (kernels/sm100/self_check_run.h) needs a GPU:
tests/gpu/test_sm100_self_check_host.py runs it with stand-in kernels; the sm_100a kernel itself only a B200 runs.
"""
import math

import pytest
import torch

from fastlaunch import reference as R

from conftest import cpp_probe

TILE = 128      # A rows and B rows per tile
BLOCK_K = 256   # K per pipeline stage
CHUNK_K = 64    # K per MMA


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    ask = cpp_probe(tmp_path_factory, "sm100_self_check_probe")
    return lambda *queries: ask(list(queries))


@pytest.fixture(scope="module")
def cases(probe):
    head, *rest = probe("cases")[0].split(";")
    g, launches, tiles = (int(x) for x in head.split())
    groups = [tuple(int(x) for x in item.split()) for item in rest[:g]]
    runs = [tuple(int(x) for x in item.split()) for item in rest[g:]]
    assert len(runs) == launches
    stages, map_ring, groups_small, groups_large = (int(x) for x in probe("ring")[0].split())
    return dict(groups=groups, launches=runs, tiles=tiles, stages=stages, map_ring=map_ring,
                groups_small=groups_small, groups_large=groups_large)


def _tiles(m, n):
    return -(-m // TILE) * -(-n // TILE)


# ---------------------------------------------------------------- what the launches cover
def test_launches_cover_both_kernels_both_parameter_blocks(cases):
    runs = cases["launches"]
    assert {(large, persistent) for large, persistent, _ in runs} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    groups = cases["groups"]
    assert 2 <= len(groups) <= cases["groups_small"]  # every launch holds every group, in either parameter block
    assert cases["tiles"] == sum(_tiles(m, n) for m, n, *_ in groups)
    for large, persistent, grid in runs:
        if persistent:  # the persistent kernel on fewer CTAs than tiles: CTAs take several tiles
            assert 1 <= grid < cases["tiles"] // 2


def test_a_persistent_cta_wraps_the_stage_ring_and_the_map_ring(cases):
    # Tiles are numbered group by group; CTA b of a persistent grid takes tiles b, b + grid, ... Some CTA must take
    # tiles of more groups than the tensor-map ring holds (so map pairs are reused), more K stages than the stage
    # ring (so stages are reused across tiles), and more tiles than the two accumulator buffers.
    owner = [gi for gi, (m, n, *_) in enumerate(cases["groups"]) for _ in range(_tiles(m, n))]
    ks = [k for (_, _, k, *_) in cases["groups"]]
    best = (0, 0, 0)
    for _, persistent, grid in cases["launches"]:
        if not persistent:
            continue
        for b in range(grid):
            mine = owner[b::grid]
            changes = sum(1 for i, g in enumerate(mine) if i == 0 or g != mine[i - 1])
            stages = sum(-(-ks[g] // BLOCK_K) for g in mine)
            best = max(best, (changes, stages, len(mine)))
    changes, stages, tiles = best
    assert changes > cases["map_ring"] and stages > cases["stages"] and tiles > 2, best


def test_groups_cover_k_stages_and_edges(cases):
    groups = cases["groups"]
    ks = [k for _, _, k, *_ in groups]
    assert max(-(-k // BLOCK_K) for k in ks) > cases["stages"]      # more K stages than the pipeline ring
    assert any(k % BLOCK_K for k in ks) and any(k % BLOCK_K == 0 for k in ks)  # partial and full last stages
    assert {(k % BLOCK_K) // CHUNK_K for k in ks if k % BLOCK_K} == {1, 2, 3}   # last stages of 1, 2 and 3 chunks
    assert CHUNK_K in ks
    ms = [m for m, *_ in groups]
    ns = [n for _, n, *_ in groups]
    assert 1 in ms and any(m % TILE for m in ms if m > TILE) and any(m % TILE == 0 for m in ms)
    assert any(n % TILE for n in ns if n > TILE) and any(n % TILE == 0 for n in ns)
    # a tile's MMA N is its valid A rows rounded up to 16: from 16 to 128 across the tiles
    rows = {min(TILE, m - m0) for m in ms for m0 in range(0, m, TILE)}
    mma_n = {-(-r // 16) * 16 for r in rows}
    assert min(mma_n) == 16 and max(mma_n) == 128 and len(mma_n) >= 5, mma_n


# ---------------------------------------------------------------- exactness and the values
def test_expected_c_is_exact(probe, cases):
    assert probe("exact") == ["ok"]
    for g, (m, n, k, fam_a, fam_b) in enumerate(cases["groups"]):
        low, max_c, nonzero, *_ = probe(f"stats {g}")[0].split()
        low, max_c, nonzero = int(low), float(max_c), float(nonzero)
        # every product is a multiple of 2^low; the sum of a C element's |products| is at most K x the largest one
        largest = (1.0 if fam_a == 1 else 1.5) * (1.0 if fam_b == 1 else 1.5)
        assert k * largest <= math.ldexp(2048, low), (g, k, largest, low)
        assert 0 < max_c <= k * largest
        assert 0.45 < nonzero < 0.65  # about (3/4)^2 of the products are nonzero: a lost or extra term shows


def test_every_code_and_several_scales_in_both_operands(probe, cases):
    codes_a = codes_b = 0
    scales_a, scales_b = set(), set()
    for g in range(len(cases["groups"])):
        _, _, _, ca, cb, sa, sb = probe(f"stats {g}")[0].split()
        codes_a |= int(ca, 16)
        codes_b |= int(cb, 16)
        scales_a |= {int(x, 16) for x in sa.split(",")}
        scales_b |= {int(x, 16) for x in sb.split(",")}
    assert codes_a == codes_b == 0xFFFF  # all 16 E2M1 codes, -0 included
    # E4M3 0.25, 0.375, 0.5, 0.75, 1, 1.5, 2, 3: powers of two and values with a mantissa bit set
    assert scales_a == scales_b == {0x28, 0x2C, 0x30, 0x34, 0x38, 0x3C, 0x40, 0x44}


def _dump(probe, g, cases):
    m, n, k, *_ = cases["groups"][g]
    a, b, sfa, sfb, *c = probe(f"dump {g}")[0].split()

    def tensor(text, shape):
        return torch.tensor(list(bytes.fromhex(text)), dtype=torch.uint8).view(shape)

    mt, nt, kt = -(-m // 128), -(-n // 128), k // 64
    return (m, n, k, tensor(a, (m, k // 2)), tensor(b, (n, k // 2)), tensor(sfa, (mt, kt, 32, 4, 4)),
            tensor(sfb, (nt, kt, 32, 4, 4)), torch.tensor([float(x) for x in c], dtype=torch.float64).view(m, n))


@pytest.mark.parametrize("g", [1, 2, 5, 6, 8])
def test_expected_c_matches_fastlaunch_reference(probe, cases, g):
    # The same bytes through the project's Python reference: the blocked scale layout undone by unblock_scales, E2M1
    # and E4M3 decoded by torch, products summed in float64.
    m, n, k, a, b, sfa, sfb, want = _dump(probe, g, cases)
    sa = R.unblock_scales(sfa.view(torch.float8_e4m3fn), m)
    sb = R.unblock_scales(sfb.view(torch.float8_e4m3fn), n)
    da = R.dequantize(a, sa).double()
    db = R.dequantize(b, sb).double()
    ref = da @ db.T
    assert torch.equal(ref, want)
    assert torch.equal(want.half().double(), want)  # exact in fp16
    # the scales of rows past M and N (the last 128-row block's padding) are E4M3 NaN; the valid ones are finite
    for blocked, rows in ((sfa, m), (sfb, n)):
        plain = blocked.permute(0, 3, 2, 1, 4).reshape(-1, k // 16)
        assert bool((plain[rows:] == 0x7F).all()) and not bool((plain[:rows] == 0x7F).any())


def test_inexact_inputs_are_refused(probe, cases):
    m, n, k, *_ = cases["groups"][0]
    # A scale of 1.875 (E4M3 0x3f) for one block of group 0's A: its products need 2^-3 units, and a C element's
    # 1856 products no longer fit 2048 of them.
    assert probe("perturb 0 sfa 0 63")[0].startswith(
        "fail group 0: C[0, 0]: the sum of |products| is ")
    assert probe("perturb 0 sfa 0 127")[0] == "fail group 0: an operand value is not finite"
    # the padding of group 0's A scales (row 140, past M = 136) is never read
    pad = ((1 * (k // 64) + 0) * 32 + 140 % 32) * 16 + ((140 % 128) // 32) * 4
    assert probe(f"perturb 0 sfa {pad} 63") == ["ok"]


# ---------------------------------------------------------------- comparison and messages
TAIL = ("; fastlaunch does not run the sm_100a kernel on this device (FASTLAUNCH_SM100_SELF_CHECK=0 skips the check, "
        "for testing the kernel itself)")
LAUNCH = ["launch 1 of 4 (the one-tile-per-CTA kernel, 16-group parameter block, 18 CTAs)",
          "launch 2 of 4 (the persistent kernel, 16-group parameter block, 1 CTA for 18 tiles)",
          "launch 3 of 4 (the one-tile-per-CTA kernel, 256-group parameter block, 18 CTAs)",
          "launch 4 of 4 (the persistent kernel, 256-group parameter block, 3 CTAs for 18 tiles)"]


def _group(cases, g):
    m, n, k, *_ = cases["groups"][g]
    return f"group {g} (M={m}, N={n}, K={k})"


def test_launch_names_follow_the_cases(cases):
    for i, (large, persistent, grid) in enumerate(cases["launches"]):
        assert ("256-group" if large else "16-group") in LAUNCH[i]
        assert ("persistent" if persistent else "one-tile-per-CTA") in LAUNCH[i]
        if persistent:
            assert f"{grid} CTA" in LAUNCH[i]


def test_correct_output_passes(probe):
    assert probe("compare") == ["none"]


def test_a_wrong_element_is_named(probe, cases):
    want = _dump(probe, 1, cases)[-1]
    out = probe("compare 1 1 0 3 17 4100")[0]  # C[3, 17] of group 1 in launch 2 set to 2.5
    assert out == ("the sm_100a kernel failed its self-check on cuda:0: " + LAUNCH[1] + ", " + _group(cases, 1) +
                   ": C[3, 17] = 2.5 (fp16 0x4100), expected %.9g; 1 element of the group differs, 1 of the launch"
                   % want[3, 17].item() + TAIL)
    assert want[3, 17].item() != 2.5


def test_the_first_difference_is_named_with_counts(probe, cases):
    # one in launch 4, two in launch 3 (groups 4 and 0, listed in that order): the first is launch 3's group 0
    out = probe("compare 3 8 0 4 299 7e00 2 4 0 71 199 7e00 2 0 0 135 128 7c00")[0]
    assert out.startswith("the sm_100a kernel failed its self-check on cuda:0: " + LAUNCH[2] + ", " +
                          _group(cases, 0) + ": C[135, 128] = inf (fp16 0x7c00), expected "), out
    assert out.endswith("; 1 element of the group differs, 2 of the launch" + TAIL)


def test_nan_and_unwritten_elements(probe, cases):
    nan = probe("compare 0 2 0 0 99 7fff")[0]
    assert ": C[0, 99] = nan (fp16 0x7fff), expected " in nan and LAUNCH[0] in nan and _group(cases, 2) in nan
    unwritten = probe("compare 0 7 0 127 63 ffff")[0]
    assert ": C[127, 63] was not written (it holds the fill 0xffff), expected " in unwritten


def test_negative_zero_equals_zero(probe, cases):
    want = _dump(probe, 1, cases)[-1]
    zeros = (want == 0).nonzero().tolist()
    assert zeros, "group 1 has a zero in C"
    r, c = zeros[0]
    assert probe(f"compare 0 1 0 {r} {c} 8000") == ["none"]  # -0 for an expected 0: the same value
    assert probe(f"compare 0 1 0 {r} {c} 0001")[0].endswith(
        f"C[{r}, {c}] = 5.96046448e-08 (fp16 0x0001), expected 0; 1 element of the group differs, 1 of the launch"
        + TAIL)  # the smallest subnormal is not


def test_writes_outside_c_are_named(probe, cases):
    before = probe("compare 3 8 -1 0 63 0")[0]
    assert (LAUNCH[3] + ", " + _group(cases, 8) + ": a write outside C: element 63 of the 64-element guard before C "
            "holds 0x0000, expected the fill 0xffff; 1 element of the group differs, 1 of the launch") in before
    after = probe("compare 1 0 1 0 0 3c00 1 0 0 5 5 7c00")[0]
    # the guard after C comes after C's elements: C[5, 5] is the group's first difference
    assert ": C[5, 5] = inf (fp16 0x7c00), expected " in after and "2 elements of the group differ, 2 of" in after
    only_after = probe("compare 1 0 1 0 0 3c00")[0]
    assert ": a write outside C: element 0 of the 64-element guard after C holds 0x3c00, expected the fill" in (
        only_after)


def test_timeout_and_cuda_error_messages(probe):
    timeout = probe("timeout 10")[0]
    assert timeout.startswith("the sm_100a kernel failed its self-check on cuda:0: its 4 launches had not finished "
                              "after 10 s: a hang.") and timeout.endswith(TAIL)
    assert "unusable" in timeout
    sticky = probe("cudaerr cudaErrorLaunchFailure 1 unspecified launch failure")[0]
    assert ("its launches ended in a CUDA error: unspecified launch failure (cudaErrorLaunchFailure), from a trap of "
            "the kernel's bounded barrier waits (a hang) or a fault; the error is sticky: the device's CUDA context is "
            "unusable") in sticky and sticky.endswith(TAIL)
    plain = probe("cudaerr cudaErrorInvalidValue 0 invalid argument")[0]
    assert plain == ("the sm_100a kernel failed its self-check on cuda:0: its launches ended in a CUDA error: invalid "
                     "argument (cudaErrorInvalidValue)" + TAIL)
