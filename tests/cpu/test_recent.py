"""CPU tests of the launcher's per-thread memo of plans and tensor maps (kernels/common/recent.h), through a
small C++ probe built with the host compiler (tests/cpp/recent_probe.cpp): hits return what was stored,
a miss overwrites the entry written longest ago (a hit does not make an entry younger)."""
import random

import pytest

from conftest import cpp_probe


@pytest.fixture(scope="module")
def ask(tmp_path_factory):
    return cpp_probe(tmp_path_factory, "recent_probe")


def test_hits_and_oldest_first_replacement(ask):
    out = ask(["put 1 10", "put 2 20", "put 3 30", "put 4 40",  # fills the 4 entries
               "get 1", "get 4", "put 2 99",                    # a hit keeps its value
               "put 5 50",                                      # replaces 1, the oldest
               "get 1", "get 2", "get 5",
               "put 6 60",                                      # replaces 2 (hit earlier, still older)
               "get 2", "get 3", "get 6"])
    assert out == ["miss"] * 4 + ["10", "40", "hit 20", "miss", "none", "20", "50", "miss", "none", "30", "60"]


def test_against_a_model(ask):
    seed = random.randrange(1 << 30)
    rnd = random.Random(seed)
    queries, expected, held = [], [], []  # held: (key, value), oldest first
    for _ in range(400):
        key = rnd.randrange(8)
        if rnd.random() < 0.5:
            value = rnd.randrange(1000)
            queries.append(f"put {key} {value}")
            found = [v for k, v in held if k == key]
            if found:
                expected.append(f"hit {found[0]}")
            else:
                expected.append("miss")
                held = (held + [(key, value)])[-4:]
        else:
            queries.append(f"get {key}")
            found = [v for k, v in held if k == key]
            expected.append(str(found[0]) if found else "none")
    assert ask(queries) == expected, f"seed {seed}"


def test_bad_query(ask):
    assert ask(["take 1", "put x 1", "get"]) == ["bad query"] * 3
