"""CPU tests of the split plans' critical-path cuts (kernels/sm90/plan/planner.h fill_cp) against the walk that defines
a CTA's end and flag (cta_cp), through a probe built with the host compiler (tests/cpp/cp_probe.cpp)."""
import random

import pytest

from conftest import cpp_probe
from fastlaunch.shapes import BENCH_SHAPES


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    return cpp_probe(tmp_path_factory, "cp_probe")


def query(sms, sizes):
    return " ".join(map(str, [sms, len(sizes)] + [x for s in sizes for x in s]))


def test_fill_matches_the_critical_path_walk_on_the_benchmarks(probe):
    answers = probe([query(132, list(zip(ms, ns, ks))) for _, ms, ns, ks in BENCH_SHAPES])
    for (g, ms, _, _), a in zip(BENCH_SHAPES, answers):
        assert a.startswith("fits "), (g, ms, a)
        fit, checked = int(a.split()[1]), int(a.split()[3])
        assert checked == 41 and 0 < fit < checked, a  # the lowest limits cannot fit, the highest do


def test_fill_matches_the_critical_path_walk_on_random_launches(probe):
    # Every CTA of every fill that fits ends within its limit by cta_cp, leaves its tile's finisher time
    # for the reads and the store, and could not take one step more: fresh launches each run (few CTAs
    # per tile on 7-40 SMs, many on 114-132).
    seed = random.randrange(1 << 30)
    rnd = random.Random(seed)
    queries = []
    for _ in range(120):
        g = rnd.randint(1, 8)
        sizes = [(rnd.randint(1, 512), rnd.randint(1, 4096), 64 * rnd.randint(1, 112)) for _ in range(g)]
        queries.append(query(rnd.choice([132, 114, 40, 16, 7]), sizes))
    answers = probe(queries)
    bad = [(q, a) for q, a in zip(queries, answers) if not a.startswith("fits ")]
    assert not bad, (seed, bad[:3])
    assert sum(int(a.split()[1]) for a in answers) > len(answers)  # fills that fit were checked
    assert probe(["0 1 1 1 64", "132 17", "132 2 1 1"]) == ["bad query"] * 3
