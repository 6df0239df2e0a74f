"""The sm_90a planner's classes of M (kernels/sm90/plan/plan_class.h): M's of one class plan alike, so the
launcher's memo, keyed by the class's representative, serves launches it has not seen. Checked against the
planner itself (fastlaunch._C.plan, mma_n, cuts' estimates) on random launches under every kind of setting."""
import random

import pytest

import fastlaunch._C as C

from conftest import fresh_seed

SMS = 132
SETTINGS = [{}, {"share": 1}, {"share": 2}, {"share": 2, "parts": 3}, {"share": 3}, {"half": 1}, {"half": 2},
            {"narrow": 1}, {"narrow": 2}, {"mid": 1}, {"mid": 2}, {"cap": 128}]


def _args(settings):
    return [settings.get(k, 0) for k in ("share", "cap", "parts", "half", "narrow", "mid")]


def _launch(rng):
    g = rng.choice([1, 2, 3, 8, 16, 40])
    hi = rng.choice([8, 32, 200, 600, 4096])
    n = rng.choice([64, 200, 1024, 2048, 4096, 7168])
    k = 64 * rng.choice([1, 4, 32, 112])
    return [(rng.randint(1, hi), n if rng.random() < 0.7 else 8 * rng.randint(1, 600), k) for _ in range(g)]


def _canonical(sizes):
    return [(C.plan_m(m), n, k) for m, n, k in sizes]


def test_representatives():
    # every M up to the table's end maps to the largest M of its run, planned alike; larger M's to themselves
    last = 0
    for m in range(1, 4097):
        r = C.plan_m(m)
        assert r >= m and C.plan_m(r) == r
        assert r >= last  # runs are consecutive
        last = r
    assert C.plan_m(0) == 0 and C.plan_m(5000) == 5000 and C.plan_m(2**31 - 1) == 2**31 - 1
    # a decode step's 1-8 rows per group: one class, so one plan however the rows fall
    assert len({C.plan_m(m) for m in range(1, 33)}) == 1
    with pytest.raises(ValueError, match="plan_m: m must be in 0..2147483647, got -1"):
        C.plan_m(-1)


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()) or "auto")
def test_members_of_a_class_plan_alike(settings):
    seed = fresh_seed()
    rng = random.Random(seed)
    for _ in range(120):
        sizes = _launch(rng)
        args = _args(settings)
        exact, canon = C.plan(sizes, SMS, *args), C.plan(_canonical(sizes), SMS, *args)
        assert exact == canon, (seed, sizes)  # tiles, order, every CTA's share, the estimate (bit for bit)
        assert C.mma_n(sizes, SMS, *args) == C.mma_n(_canonical(sizes), SMS, *args), (seed, sizes)


def test_launches_the_launcher_cuts_plan_alike_after_the_cut():
    # the cut launch's groups (a head of 128 j rows and the rest) are planned through the memo too
    seed = fresh_seed()
    rng = random.Random(seed)
    checked = 0
    for _ in range(200):
        sizes = [(rng.randint(129, 1536), rng.choice([1024, 3072, 4096]), 64 * rng.choice([8, 24, 64]))
                 for _ in range(rng.randint(1, 4))]
        heads = C.cuts(sizes, SMS)
        if not any(heads):
            continue
        checked += 1
        cut = []
        for (m, n, k), h in zip(sizes, heads):
            cut += [(h, n, k), (m - h, n, k)] if h else [(m, n, k)]
        assert C.plan(cut, SMS) == C.plan(_canonical(cut), SMS), (seed, sizes, heads)
    assert checked >= 10, checked


def test_the_launchers_memo_plans_a_decode_step_once():
    # rows per group drawn anew every launch, all in one class: one plan for all (the launcher's memo)
    seed = fresh_seed()
    rng = random.Random(seed)
    decode = [[(rng.randint(1, 8), 2048, 7168) for _ in range(8)] for _ in range(50)]
    ns, misses = C.plan_memo_ns(decode, SMS, 3)
    assert misses == 1 and ns > 0
    # 33 launches of different classes in turn: more than the memo's 32 entries, so every one is planned again
    rotating = [[(64 * (i + 1), 2048, 7168)] for i in range(33)]
    assert len({C.plan_m(m) for ((m, _n, _k),) in rotating}) == 33
    assert C.plan_memo_ns(rotating, SMS, 2)[1] == 66
    assert C.plan_memo_ns(rotating[:32], SMS, 2)[1] == 32  # 32 fit: planned once each
    # the GPU MODE pattern, 15 test inputs back to back, is planned once per input
    assert C.plan_memo_ns(rotating[:15], SMS, 5)[1] == 15
    with pytest.raises(ValueError, match="plan_memo_ns: need a non-empty list"):
        C.plan_memo_ns([], SMS, 1)


def test_the_launchers_skinny_memo_estimates_a_masked_step_once():
    # a masked decode step asks the launcher the same skinny question every call (every expert at max_m rows):
    # estimated once, then found
    for G in (8, 64):
        step = [[(8, 2048, 7168)] * G]
        ns, misses = C.skinny_memo_ns(step, SMS, 50)
        assert misses == 1 and ns > 0
        shapes = [[(m, 2048, 7168)] * G for m in range(1, 10)]  # 9 in turn: more than the memo's 8 entries
        assert C.skinny_memo_ns(shapes, SMS, 2)[1] == 18
        assert C.skinny_memo_ns(shapes[:8], SMS, 3)[1] == 8
    with pytest.raises(ValueError, match="skinny_memo_ns: need a non-empty list"):
        C.skinny_memo_ns([], SMS, 1)


SKINNY_BUILDS = (1, 2, 3, 4, 5, 6, 7, 8, 12, 16)  # kernels/sm90/plan/skinny.h kSkinnyBuilds


def test_the_skinny_memo_keys_a_run_by_its_build_so_rows_drawn_anew_hit():
    # a decode step's rows drawn anew (1-8 per group) are estimated once per build their largest takes, not per call
    seed = fresh_seed()
    rng = random.Random(seed)
    for G, top in ((8, 8), (64, 16)):
        steps = [[(rng.randint(1, top), 2048, 7168) for _ in range(G)] for _ in range(60)]
        builds = {tuple(min(b for b in SKINNY_BUILDS if b >= max(m for m, _n, _k in s[r:r + 16]))
                        for r in range(0, G, 16)) for s in steps}
        assert C.skinny_memo_ns(steps, SMS, 3)[1] == len(builds) <= 8, (G, seed)
    # the premise: a run's plan reads its rows only through its largest's build, so every group at that build's
    # rows plans the same (rows, items, CTAs, shared memory, estimate, ...); past 16 rows neither may take it
    for _ in range(200):
        g = rng.randint(1, 16)
        sizes = [(rng.randint(1, 16), rng.choice([128, 2048, 4100]), rng.choice([64, 1024, 7168]))
                 for _ in range(g)]
        top = max(m for m, _n, _k in sizes)
        rows = min(b for b in SKINNY_BUILDS if b >= top)
        assert C.skinny(sizes, SMS) == C.skinny([(rows, n, k) for _m, n, k in sizes], SMS), (sizes, seed)
    assert C.skinny([(17, 2048, 7168), (3, 2048, 7168)], SMS) is None
