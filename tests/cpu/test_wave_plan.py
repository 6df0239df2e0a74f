"""The sm90 planner's wave plans (kernels/sm90/plan/planner.h share_wave), on the CPU: which launches take them, and
that the tile walk the kernel does (kernels/sm90/stream_k.cuh Share, decode_tile) covers every tile of every group
exactly once with balanced CTAs."""
import pytest

from fastlaunch import _C

SMS = 132
BENCHMARKS = [list(zip([80, 176, 128, 72, 64, 248, 96, 160], [4096] * 8, [7168] * 8)),
              list(zip([40, 76, 168, 72, 164, 148, 196, 160], [7168] * 8, [2048] * 8)),
              list(zip([192, 320], [3072] * 2, [4096] * 2)), list(zip([128, 384], [4096] * 2, [1536] * 2))]
PREFILL = [[(2048, 4096, 7168)] * 8, [(512, 4096, 7168)] * 8, [(8192, 4096, 7168)], [(512, 4096, 7168)] * 64,
           [(1024, 2048, 7168)] * 8, [(128, 4096, 7168)] * 64]


def walk(plan):
    """The kernel's walk of a wave plan: CTA b takes tiles b, b + ctas, ...; tile t's group from the groups' tile
    ends in launch order, its (M chunk, B block) along N fastest. Returns {cta: [(group, chunk, block), ...]}."""
    groups, starts, _est, _rows, _red, wave = plan
    assert wave
    ctas = len(starts) - 1
    order = sorted(range(len(groups)), key=lambda g: groups[g][3])  # launch order
    ends, total = [], 0
    for g in order:
        total += groups[g][1] * groups[g][2]
        ends.append(total)
    out = {}
    for b in range(ctas):
        t, gi, units = b, 0, []
        while t < total:
            while t >= ends[gi]:
                gi += 1
            g = order[gi]
            local = t - (ends[gi - 1] if gi else 0)
            units.append((g, local // groups[g][2], local % groups[g][2]))
            t += ctas
        out[b] = units
    return out


@pytest.mark.parametrize("sizes", PREFILL, ids=lambda s: f"{len(s)}x{s[0][0]}x{s[0][1]}x{s[0][2]}")
def test_prefill_launches_take_a_wave_plan_that_covers_every_tile_once(sizes):
    plan = _C.plan(sizes, SMS)
    groups, starts, _est, _rows, red, wave = plan
    assert wave and red == 0
    tiles = sum(w[1] * w[2] for w in groups)
    ctas = len(starts) - 1
    assert ctas == min(tiles, SMS) and starts[-1] == (tiles, 0) and starts[:-1] == tuple((b, 0) for b in range(ctas))
    seen = [u for units in walk(plan).values() for u in units]
    want = [(g, c, nb) for g, w in enumerate(groups) for c in range(w[1]) for nb in range(w[2])]
    assert sorted(seen) == sorted(want)  # every tile once
    counts = [len(u) for u in walk(plan).values()]
    assert max(counts) - min(counts) <= 1  # equal tiles: round-robin leaves at most one more on a CTA


def test_a_wave_runs_one_band_of_a_group():
    # the CTAs of one wave (unit u of every CTA) hold a few consecutive M chunks of one group against its B blocks:
    # 8 x 2048 x 4096: 32 B blocks, so 132 CTAs hold at most 6 chunks of at most 2 groups
    plan = _C.plan([(2048, 4096, 7168)] * 8, SMS)
    per_cta = walk(plan)
    for u in range(5):
        wave = [per_cta[b][u] for b in range(len(per_cta)) if u < len(per_cta[b])]
        assert len({(g, c) for g, c, _ in wave}) <= 6 and len({g for g, _, _ in wave}) <= 2


@pytest.mark.parametrize("sizes", BENCHMARKS, ids=["bm1", "bm2", "bm3", "bm4"])
def test_task_benchmarks_keep_stream_k_shares(sizes):
    # their fp16 A fits L2 many times over: the stream-K shares (and their split tiles) stay
    assert _C.plan(sizes, SMS)[5] is False


def test_forced_wave_plan_on_a_small_launch():
    # share 4 forces a wave plan where the planner would not take one: at most one CTA per tile
    sizes = [(100, 256, 512), (3, 512, 256)]
    groups, starts, _est, _rows, _red, wave = _C.plan(sizes, SMS, 4)
    tiles = sum(w[1] * w[2] for w in groups)
    assert wave and len(starts) - 1 == tiles and tiles < SMS
    assert _C.plan(sizes, SMS)[5] is False
