"""CPU tests of the launcher's set-associative memo of tensor maps (kernels/common/keyed_memo.h), through a small
C++ probe (tests/cpp/keyed_memo_probe.cpp, a memo of 4 sets of 2 ways): every key held is found with its value,
a miss overwrites its set's entry written longest ago, a forgotten key is gone; checked against a model."""
import random

import pytest

from conftest import cpp_probe, fresh_seed

SETS, WAYS = 4, 2


@pytest.fixture(scope="module")
def ask(tmp_path_factory):
    return cpp_probe(tmp_path_factory, "keyed_memo_probe")


def test_hits_misses_and_forget(ask):
    out = ask(["put 1 2 3 4 10", "get 1 2 3 4", "put 1 2 3 4 11", "get 1 2 3 5", "forget 1 2 3 4", "get 1 2 3 4"])
    assert out == ["miss", "10", "hit 10", "none", "ok", "none"]


def test_against_a_model(ask):
    # The model knows nothing of the hash: it learns each key's set from the probe's own answers, and checks that
    # a set never holds more than WAYS keys, that every key found is the value last put, that a miss evicts the
    # oldest entry of the key's set only, and that at most SETS x WAYS keys are held at once.
    seed = fresh_seed()
    rng = random.Random(seed)
    keys = [tuple(rng.randrange(1 << 40) for _ in range(4)) for _ in range(24)]
    values = {}
    queries = []
    for i in range(600):
        key = rng.choice(keys)
        op = rng.choice(["put", "put", "get", "forget"] if i % 7 else ["get"])
        queries.append((op, key, i))
    out = ask([f"{op} {' '.join(map(str, key))}" + (f" {v}" if op == "put" else "") for op, key, v in queries])
    held = set()
    for (op, key, v), ans in zip(queries, out):
        if op == "put":
            if ans == "miss":
                values[key] = v
                held.add(key)
            else:
                assert ans == f"hit {values[key]}" and key in held, (seed, key, ans)
        elif op == "get":
            if ans == "none":
                held.discard(key)  # evicted earlier (or never put)
            else:
                assert key in held and ans == str(values[key]), (seed, key, ans)
        else:
            assert ans == "ok"
            held.discard(key)
    # every key still held answers with its value; no more than the memo's capacity of them
    final = ask([f"get {' '.join(map(str, key))}" for key in keys])
    found = [k for k, a in zip(keys, final) if a != "none"]
    assert len(found) <= SETS * WAYS
    for k, a in zip(keys, final):
        if a != "none":
            assert a == str(values[k]), (seed, k)


def test_a_set_keeps_its_newest_ways(ask):
    # keys whose set is shared: putting WAYS + 1 of them keeps the newest WAYS; found by probing candidates
    out = ask([f"put {i} 0 0 0 {i}" for i in range(64)] + [f"get {i} 0 0 0" for i in range(64)])
    kept = [i for i, a in enumerate(out[64:]) if a != "none"]
    assert len(kept) == SETS * WAYS  # every set full, each with its last WAYS keys
    assert all(out[64 + i] == str(i) for i in kept)
