"""The reduce kernel's grid (kernels/sm90/plan/planner.h reduce_chunks, read back by kernels/sm90/reduce.cuh), through
a small C++ probe built with the host compiler (tests/cpp/reduce_probe.cpp): per tile and consumer warp,
`chunks` CTAs of 8 warps that together cover every float4 of valid rows with at most 8 float4s per CTA,
the fewest float4s per CTA whose grid fits one round of 5 CTAs per SM."""
import pytest

from conftest import cpp_probe

WARPS = 8           # kernels/sm90/plan/planner.h kReduceWarps
CTAS_PER_SM = 5     # kernels/sm90/plan/planner.h kReduceCtasPerSm
CONSUMER_WARPS = 8  # the GEMM's consumer warps: the grid's y
MAX_JV = 24         # kMaxWidth / 8


@pytest.fixture(scope="module")
def ask(tmp_path_factory):
    return cpp_probe(tmp_path_factory, "reduce_probe")


def chunks_of(ask, cases):
    answers = ask([f"{t} {jv} {sms}" for t, jv, sms in cases])
    assert "bad query" not in answers
    return [int(a) for a in answers]


def test_every_float4_is_covered_by_at_most_eight_per_cta(ask):
    cases = [(t, jv, sms) for sms in (8, 132) for t in (1, 3, 8, 26, 64, 132, 1000) for jv in range(1, MAX_JV + 1)]
    for (t, jv, sms), chunks in zip(cases, chunks_of(ask, cases)):
        per = -(-jv // chunks)  # what the kernel derives from gridDim.z
        assert 1 <= chunks <= jv and per <= WARPS and per * chunks >= jv, (t, jv, sms, chunks)


def test_fewest_float4s_per_cta_that_fit_one_round(ask):
    cases = [(t, jv, 132) for t in (1, 4, 8, 16, 26, 40, 132) for jv in range(1, MAX_JV + 1)]
    for (t, jv, sms), chunks in zip(cases, chunks_of(ask, cases)):
        per = -(-jv // chunks)
        fits = t * CONSUMER_WARPS * chunks <= sms * CTAS_PER_SM
        assert fits or per == WARPS or chunks == -(-jv // WARPS), (t, jv, chunks)
        if per > 1 and fits:  # half as many float4s per CTA would not have fitted
            assert t * CONSUMER_WARPS * -(-jv // (per // 2)) > sms * CTAS_PER_SM, (t, jv, chunks)


@pytest.mark.parametrize("tiles, jv, chunks", [
    (26, 24, 3),   # 289 x 1632 x 1600's wide tiles: 8 float4s per CTA, 624 CTAs
    (8, 8, 8),     # one group of 64 rows, N = 1024: one float4 per CTA, its parts over 8 warps
    (8, 24, 6),    # ... of 192 rows: four per CTA (two would need 768 CTAs)
    (4, 3, 3),     # 23 x 409 x 3392
])
def test_known_launches(ask, tiles, jv, chunks):
    assert chunks_of(ask, [(tiles, jv, 132)]) == [chunks]
