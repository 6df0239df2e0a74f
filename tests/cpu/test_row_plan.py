"""The task form's launches on the device schedule (kernels/sm90/plan/row_plan.h), on the CPU through
fastlaunch._C.row_plan and sizes_seen: which launches fit it, each group tiled by its own rows as the planner would
tile it under the same cap and build (so every row lies in exactly one tile and every tile's first rows fit its wgmma
N), the narrow build exactly where every group is one tile of the narrowest width, and the table of sizes seen that
tells a launch's first call from its second and later ones."""
import random

import pytest

from fastlaunch import _C
from conftest import fresh_seed

WIDTHS, NARROW_N, MAIN, NARROW = (128, 192), 32, 0, 1


def random_launch(rng, most_m):
    g = rng.randint(1, 24)
    k = 64 * rng.randint(1, 64)
    return [(rng.randint(1, most_m), 8 * rng.randint(1, 600), k) for _ in range(g)]


@pytest.mark.parametrize("most_m", [8, 32, 128, 129, 512, 5000])
def test_groups_tiled_as_the_planner_tiles_them(most_m):
    seed = fresh_seed()
    rng = random.Random(seed)
    for _ in range(60):
        sizes = random_launch(rng, most_m)
        narrow = all(m <= WIDTHS[0] for m, _, _ in sizes)
        for forced in (0,) + WIDTHS:  # the rules' cap, or one forced (FASTLAUNCH_SM90_WCAP with ROWS=1)
            build, groups = _C.row_plan(sizes, forced)
            assert build == (NARROW if narrow else MAIN), (seed, sizes)
            cap = forced or (WIDTHS[0] if narrow else WIDTHS[-1])
            # the planner with that cap and build, no half tiles, no mid build: the same widths and chunks
            planned = _C.plan(sizes, 132, 0, cap, 0, 2, 1 if narrow else 2, 2)[0]
            mma = _C.mma_n(sizes, 132, 0, cap, 0, 2, 1 if narrow else 2, 2)
            for (m, n, _), (width, chunks, tiles_n, mma_n), (pw, pc, ptn, _), pn in zip(sizes, groups, planned, mma):
                assert (width, chunks, tiles_n, mma_n) == (pw, pc, ptn, pn), (seed, sizes, forced)
                assert width in WIDTHS and width <= cap and (chunks - 1) * width < m <= chunks * width, (seed, m, width)
                assert tiles_n == -(-n // 128)
                assert min(m, width) <= mma_n <= width and (mma_n == NARROW_N) == (narrow and m <= NARROW_N)


@pytest.mark.parametrize("sizes", [[(100, 256, 256), (200, 256, 512)],  # two K's
                                   [(100, 250, 256)],  # C rows of N % 8 != 0 elements: not 16-byte aligned
                                   [(1, 8, 64)] * 257])  # more groups than one launch holds
def test_launches_it_does_not_fit(sizes):
    assert _C.row_plan(sizes) is None


def test_a_cap_that_is_not_a_width_is_refused():
    with pytest.raises(ValueError, match="cap 100 is not a compiled tile width"):
        _C.row_plan([(100, 256, 256)], 100)


FIRST, SECOND, LATER = 0, 1, 2


def test_sightings_of_a_launchs_sizes():
    seed = fresh_seed()
    rng = random.Random(seed)
    launches = [random_launch(rng, 512) for _ in range(3000)]
    distinct = list({tuple(x): x for x in launches}.values())
    # every launch new: each a first sighting (3000 sizes in 1024 slots push each other out, never count as one)
    assert set(_C.sizes_seen(distinct)) == {FIRST}, seed
    # each called three times in a row: first, second, later
    thrice = [x for x in distinct[:400] for _ in range(3)]
    assert _C.sizes_seen(thrice) == (FIRST, SECOND, LATER) * 400, seed
    # the task's 15 inputs in turn, four rounds: the first round new, the second planned, later ones served
    fifteen = distinct[:15]
    assert _C.sizes_seen(fifteen * 4) == (FIRST,) * 15 + (SECOND,) * 15 + (LATER,) * 30, seed
    # the table's whole capacity in use: 512 launches in its 1024 entries, then the same again in the same order;
    # with the hashes spread evenly over its 256 sets ~86% are still held (a set given 5 or more of them loses all
    # of them, least recent first); with half the sets in use ~43% would be
    launches = [[(rng.randint(1, 10 ** 6), 8 * rng.randint(1, 600), 64 * rng.randint(1, 64))] * rng.randint(1, 4)
                for _ in range(512)]
    again = _C.sizes_seen(launches + launches)[512:]
    assert sum(s == SECOND for s in again) >= 0.75 * 512, (seed, sum(s == SECOND for s in again))
    # the same rows with another N or K, or in another order, are other sizes
    base = [(64, 256, 512), (32, 512, 512)]
    assert _C.sizes_seen([base, [(64, 256, 512), (32, 512, 1024)], [(32, 512, 512), (64, 256, 512)], base]) == \
        (FIRST, FIRST, FIRST, SECOND)
