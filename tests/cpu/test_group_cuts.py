"""The sm90 launcher's group cuts (kernels/sm90/plan/group_cuts.h), through a small C++ probe built with the host
compiler (tests/cpp/cuts_probe.cpp): a group cut at a 128-row boundary becomes two views of the same
operands whose rows, pointers and scale blocks follow the contract's layouts, only where the two parts'
tiles are estimated cheaper, and never past the room it is given."""
import pytest

from conftest import cpp_probe

FIELDS = ("a", "b", "c", "sfa", "sfb", "m", "n", "k")


@pytest.fixture(scope="module")
def ask(tmp_path_factory):
    return cpp_probe(tmp_path_factory, "cuts_probe")


def cut(ask, groups, max_out=16):
    """groups: dicts of FIELDS; returns (src, dict) per group of the rewritten buffer."""
    q = f"{len(groups)} {max_out} " + " ".join(" ".join(str(g[f]) for f in FIELDS) for g in groups)
    (answer,) = ask([q])
    assert answer != "bad query"
    out = []
    for part in answer.split(";"):
        src, *vals = (int(x) for x in part.split())
        out.append((src, dict(zip(FIELDS, vals))))
    return out


def group(i, m, n, k):
    base = (i + 1) << 36  # far apart, 16-byte aligned
    return {"a": base, "b": base + (1 << 32), "c": base + (2 << 32), "sfa": base + (3 << 32),
            "sfb": base + (4 << 32), "m": m, "n": n, "k": k}


def test_a_cut_group_is_two_views_of_the_same_operands(ask):
    # 320 rows: 2 x 192 (64 rows of padding) or 128 + 192 (none): cut at 128
    g = group(0, 320, 3072, 4096)
    (s0, head), (s1, tail) = cut(ask, [g])
    assert s0 == s1 == 0
    assert head == g | {"m": 128}
    h = 128
    assert tail == g | {"m": 320 - h, "a": g["a"] + h * 4096 // 2, "c": g["c"] + h * 3072 * 2,
                        "sfa": g["sfa"] + (h // 128) * (4096 // 64) * 512}


def test_only_groups_that_save_are_cut_and_order_is_kept(ask):
    # benchmark 3 (192, 320 rows): the second group is cut; 128, 250 (2 x 128 already tight), 384 (2 x 192)
    # and 64 rows are left whole
    sizes = [(192, 3072, 4096), (320, 3072, 4096), (128, 512, 256), (250, 512, 256), (384, 512, 256), (64, 128, 64)]
    out = cut(ask, [group(i, *s) for i, s in enumerate(sizes)])
    assert [s for s, _ in out] == [0, 1, 1, 2, 3, 4, 5]
    assert [d["m"] for _, d in out] == [192, 128, 192, 128, 250, 384, 64]
    # the benchmark shapes 1, 2 and 4 and the task's test shapes have no group that a cut would save on
    for ms, n, k in (([80, 176, 128, 72, 64, 248, 96, 160], 4096, 7168), ([40, 76, 168, 72, 164, 148, 196, 160], 7168,
                                                                          2048), ([128, 384], 4096, 1536)):
        assert len(cut(ask, [group(i, m, n, k) for i, m in enumerate(ms)])) == len(ms)


def test_no_cut_beyond_the_room(ask):
    groups = [group(i, 300, 1024, 1024) for i in range(3)]
    assert len(cut(ask, groups, max_out=6)) == 6
    out = cut(ask, groups, max_out=5)  # all or none: five would not hold the six parts
    assert [(s, d) for s, d in out] == [(i, g) for i, g in enumerate(groups)]


def test_task_shapes_are_not_cut_and_benchmark_3_is(ask):
    # The launcher takes a cut launch where its plan's estimate is at least 1% lower: benchmark 3's
    # (its 320-row group as 128 + 192 rows: 72 tiles, 24 of them 128 rows wide, for 72 of 192), none of
    # the task's test shapes (their plans' busiest CTA holds one half tile either way).
    import fastlaunch._C as _C
    from fastlaunch.shapes import TEST_SHAPES
    for g, ms, ns, ks in TEST_SHAPES:
        sizes = list(zip(ms, ns, ks))
        parts = [(d["m"], d["n"], d["k"]) for _, d in cut(ask, [group(i, *s) for i, s in enumerate(sizes)])]
        assert len(parts) == g or _C.plan(parts, 132)[2] >= 0.99 * _C.plan(sizes, 132)[2]
    sizes = [(192, 3072, 4096), (320, 3072, 4096)]
    parts = [(d["m"], d["n"], d["k"]) for _, d in cut(ask, [group(i, *s) for i, s in enumerate(sizes)])]
    assert parts == [(192, 3072, 4096), (128, 3072, 4096), (192, 3072, 4096)]
    assert _C.plan(parts, 132)[2] < 0.99 * _C.plan(sizes, 132)[2]
