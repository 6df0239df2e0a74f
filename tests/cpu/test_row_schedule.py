"""The masked form's device-side schedule (kernels/sm90/plan/row_schedule.h), on the CPU through
fastlaunch._C.row_schedule, the same code its kernels run: every K step of every tile that holds rows is run by
exactly one CTA, each tile is finished by the CTA holding its last step after the partial sums of every other CTA
holding its steps, no CTA idles while another holds more than its share, and an empty call schedules nothing."""
import random

import pytest

from fastlaunch import _C
from conftest import fresh_seed


def steps_of(tiles, kst, grid, wave_ok, force=0, a16_bytes=0):
    """Each CTA's steps as the kernel walks them (stream_k.cuh Share::unit): {(tile, k): cta}, the units each CTA
    runs, and the finishing CTA of each split tile with the CTAs whose sums it adds (RowCta::before)."""
    ctas, wave, shares = _C.row_schedule(tiles, kst, grid, wave_ok, force, a16_bytes)
    owner, units, finish = {}, {}, {}
    for b, (first_t, first_k, count, end_k, stride, before) in enumerate(shares):
        assert (stride != 0) == bool(wave)
        units[b] = count
        for u in range(count):
            t = first_t + u * stride if stride else first_t + count - 1 - u
            k1 = end_k if u == 0 and end_k > 0 else kst
            k0 = first_k if t == first_t else 0
            assert 0 <= k0 < k1 <= kst, (b, u, k0, k1)
            for k in range(k0, k1):
                assert (t, k) not in owner, f"step {(t, k)} on CTAs {owner[(t, k)]} and {b}"
                owner[(t, k)] = b
            if k1 == kst and k0 > 0:  # this CTA finishes tile t with the sums of CTAs b-1 .. b-before
                finish[t] = (b, before)
    return ctas, wave, shares, owner, units, finish


CASES = [(0, 112, 132, True), (1, 112, 132, True), (1, 2, 132, True), (64, 224, 132, True), (64, 224, 132, False),
         (448, 64, 132, True), (448, 64, 132, False), (128, 112, 132, False), (264, 112, 132, True),
         (192, 112, 132, True), (7, 3, 5, False), (1000, 1, 132, False)]


@pytest.mark.parametrize("tiles,kst,grid,wave_ok", CASES)
def test_every_step_once_and_split_tiles_finished_after_their_parts(tiles, kst, grid, wave_ok):
    check(tiles, kst, grid, wave_ok)


def check(tiles, kst, grid, wave_ok):
    ctas, wave, shares, owner, units, finish = steps_of(tiles, kst, grid, wave_ok)
    assert len(shares) == grid and 0 <= ctas <= grid
    assert len(owner) == tiles * kst, "every step of every tile that holds rows, once"
    assert all(units[b] == 0 for b in range(ctas, grid)), "CTAs past `ctas` have no work"
    if tiles == 0:
        assert ctas == 0
        return
    steps = tiles * kst
    cut = min(grid, max(1, steps // _kRowMinSteps()))
    split_cost = -(-steps // cut) + max(kst // 8, _kRowMinSteps())  # the busiest split run, charged its trip
    if wave:
        assert wave_ok and ctas == grid and tiles > grid
        per = [units[b] for b in range(grid)]
        assert max(per) - min(per) <= 1
        assert -(-tiles // grid) * kst <= split_cost, "waves only where no split is estimated faster"
        return
    per = [sum(1 for v in owner.values() if v == b) for b in range(ctas)]
    assert max(per) - min(per) <= 1, "runs differ by at most one step"
    if ctas == tiles and tiles <= grid and all(p == kst for p in per):  # a whole tile each
        assert kst <= split_cost, "a tile each only where no split is estimated faster"
        assert not finish
    else:
        assert min(per) >= min(_kRowMinSteps(), steps), "no split run shorter than the fewest steps worth a split"
        assert tiles > grid and not wave_ok or max(per) + max(kst // 8, _kRowMinSteps()) < (
            kst if tiles <= grid else -(-tiles // grid) * kst), "a split only where it is estimated faster"
    for t in range(tiles):
        holders = sorted({owner[(t, k)] for k in range(kst)})
        last = owner[(t, kst - 1)]
        assert last == holders[-1]
        if len(holders) == 1:
            assert t not in finish
        else:
            b, before = finish[t]
            assert b == last and holders == list(range(b - before, b + 1)), (t, holders, finish[t])


def _kRowMinSteps():
    """kRowMinSteps, read back: a split of steps into as many runs as possible gives runs of that length."""
    ctas, _wave, _shares = _C.row_schedule(1, 8000, 4096, False)
    return 8000 // ctas


def test_random_schedules():
    rng = random.Random(fresh_seed())
    for _ in range(300):
        tiles = rng.choice([0, 1, 2, rng.randint(1, 40), rng.randint(1, 600)])
        check(tiles, rng.choice([1, 2, 16, 56, 112, 224]), rng.choice([1, 7, 114, 132]), rng.random() < 0.5)


def test_the_cases_the_issue_names():
    """Decode of 2 experts of 8 at N 4096, K 14336 (64 tiles of 224 steps): split over all 132 CTAs, not 64 whole
    tiles; half of a prefill step's tiles (192 of 384 at K 7168): split, not two waves of which one is half empty;
    a full prefill step (384 tiles): waves (2.9 waves); a decode step of 8 experts at N 2048 (128 tiles): a tile
    each, not split over 132 CTAs."""
    assert _C.row_schedule(64, 224, 132, True)[:2] == (132, 0)
    assert _C.row_schedule(192, 112, 132, True)[:2] == (132, 0)
    assert _C.row_schedule(384, 112, 132, True)[:2] == (132, 1)
    ctas, wave, shares = _C.row_schedule(128, 112, 132, False)
    assert (ctas, wave) == (128, 0) and all(s[:4] == (b, 0, 1, 0) for b, s in enumerate(shares[:128]))


def test_past_l2_prefers_waves():
    """Past L2 (the tiles' fp16 A over 24 MB, as the host planner's wave plans) waves are taken up to 5/4 of the
    split's busiest CTA: a full prefill step of 8 experts (333 tiles of 112 steps, 38.5 MB of A as tiled: three
    waves, 336 steps, against a split's 297 with its sums' trip) runs waves; the same tiles within L2 split; a wave
    walk more than 5/4 of the split (133 tiles: two waves, 224 steps, against 127) or a build without wave walks
    still splits; and the choice keeps every step once (checked by steps_of's walk)."""
    mb = 1 << 20
    assert _C.row_schedule(333, 112, 132, True)[:2] == (132, 0)
    assert _C.row_schedule(333, 112, 132, True, 0, int(38.5 * mb))[:2] == (132, 1)
    assert _C.row_schedule(333, 112, 132, True, 0, 24 * mb)[:2] == (132, 0)  # (over 24 MB, not at it)
    assert _C.row_schedule(133, 112, 132, True, 0, 100 * mb)[:2] == (132, 0)
    assert _C.row_schedule(333, 112, 132, False, 0, 100 * mb)[:2] == (132, 0)
    assert _C.row_schedule(333, 112, 132, True, SPLIT, 100 * mb)[:2] == (132, 0)  # forcing still wins
    rng = random.Random(fresh_seed())
    for _ in range(200):
        tiles, kst, grid = rng.randint(1, 2000), rng.choice([16, 56, 112, 224]), rng.choice([7, 114, 132])
        ctas, wave, _shares, owner, _units, _finish = steps_of(tiles, kst, grid, True, 0, 100 * mb)
        assert len(owner) == tiles * kst
        if wave:
            split = _C.row_schedule(tiles, kst, grid, True, SPLIT)[0]
            assert -(-tiles // grid) * kst * 4 <= (-(-tiles * kst // split) + max(kst // 8, _kRowMinSteps())) * 5


WHOLE, SPLIT, WAVE = 1, 2, 4  # row_schedule.h kRowWhole, kRowSplit, kRowWave (FASTLAUNCH_SM90_SHARE's codes)


def covered(tiles, kst, grid, wave_ok, force):
    """The forced schedule's walk: every step once, split tiles finished after all their parts; (ctas, wave, the
    steps of the busiest CTA)."""
    ctas, wave, _shares, owner, _units, finish = steps_of(tiles, kst, grid, wave_ok, force)
    assert len(owner) == tiles * kst
    for t, (b, before) in finish.items():
        assert sorted({owner[(t, k)] for k in range(kst)}) == list(range(b - before, b + 1))
    per = [sum(1 for v in owner.values() if v == b) for b in range(grid)]
    return ctas, wave, max(per, default=0)


def test_forced_shapes():
    """FASTLAUNCH_SM90_SHARE=whole, split, wave force the device schedule too: whole tiles (waves where they
    outnumber the grid of a wave-walking build, else a split: there is no other way to cover them), an even split
    whatever it costs, waves where the build walks them (else whole tiles)."""
    rng = random.Random(fresh_seed())
    for _ in range(300):
        tiles, kst = rng.choice([1, 2, rng.randint(1, 200), rng.randint(100, 600)]), rng.choice([1, 8, 56, 112, 224])
        grid, wave_ok = rng.choice([1, 7, 132]), rng.random() < 0.5
        ctas, wave, busiest = covered(tiles, kst, grid, wave_ok, WHOLE)
        if tiles <= grid:
            assert (ctas, wave, busiest) == (tiles, 0, kst)
        else:
            assert wave == wave_ok and (not wave or busiest == -(-tiles // grid) * kst)
        ctas, wave, busiest = covered(tiles, kst, grid, wave_ok, SPLIT)
        assert not wave and ctas == min(grid, max(1, tiles * kst // _kRowMinSteps()))
        assert busiest == -(-tiles * kst // ctas)
        ctas, wave, busiest = covered(tiles, kst, grid, wave_ok, WAVE)
        assert wave == wave_ok or tiles > grid or (ctas, busiest) == (tiles, kst)


def test_bad_arguments():
    with pytest.raises(ValueError, match="row_schedule"):
        _C.row_schedule(-1, 1, 1, False)
    with pytest.raises(ValueError, match="force must be"):
        _C.row_schedule(1, 1, 1, False, 3)
