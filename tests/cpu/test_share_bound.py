"""CPU tests of the bound by which the sm_90a planner leaves out shares that cannot beat its best plan
(kernels/sm90/plan/planner.h share_bound): every share it could build estimates at least the bound, so leaving
them out never changes a plan (tests/cpp/share_bound_probe.cpp)."""
import random

import pytest

from conftest import cpp_probe
from fastlaunch.shapes import BENCH_SHAPES, TEST_SHAPES


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    return cpp_probe(tmp_path_factory, "share_bound_probe")


def query(sms, sizes):
    return " ".join(map(str, [sms, len(sizes)] + [x for s in sizes for x in s]))


def test_the_bound_holds_on_the_task_shapes(probe):
    shapes = BENCH_SHAPES + TEST_SHAPES
    answers = probe([query(132, list(zip(ms, ns, ks))) for _, ms, ns, ks in shapes])
    for shape, a in zip(shapes, answers):
        assert a.startswith("ok ") and int(a.split()[1]) >= 4, (shape, a)


def test_the_bound_holds_on_random_launches(probe):
    seed = random.randrange(1 << 30)
    rnd = random.Random(seed)
    queries = []
    for _ in range(300):
        g = rnd.choice([1, 2, 4, 8, 16, 40])
        hi = rnd.choice([8, 64, 512, 4096])
        sizes = [(rnd.randint(1, hi), rnd.randint(1, 7168), 64 * rnd.randint(1, 112)) for _ in range(g)]
        queries.append(query(rnd.choice([132, 114, 40, 7]), sizes))
    answers = probe(queries)
    bad = [(q, a) for q, a in zip(queries, answers) if not a.startswith("ok ")]
    assert not bad, (seed, bad[:3])
    assert probe(["0 1 1 1 64", "132 1 1 1 65"]) == ["bad query"] * 2
