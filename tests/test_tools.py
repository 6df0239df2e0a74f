"""CPU tests of the benchmark tools' shape selection (the timing itself needs a GPU)."""
import random

import pytest

import fastlaunch
from conftest import load_tool
from fastlaunch import reference as R
from fastlaunch.shapes import BENCH_SHAPES, TEST_SHAPES, random_shapes


def test_random_shapes_are_valid_and_repeatable():
    seed = random.randrange(1 << 30)
    shapes = random_shapes(50, seed)
    assert len(shapes) == 50 and shapes == random_shapes(50, seed), f"seed {seed}"
    for g, ms, ns, ks in shapes:
        assert 1 <= g <= 8 and len(ms) == len(ns) == len(ks) == g, f"seed {seed}"
        assert all(1 <= m <= 512 for m in ms) and all(1 <= n <= 2048 for n in ns), f"seed {seed}"
        assert all(k % 64 == 0 and 64 <= k <= 4096 for k in ks), f"seed {seed}"
    assert random_shapes(20, 1) != random_shapes(20, 2)


def test_random_shapes_pass_the_unpacker():
    seed = random.randrange(1 << 30)
    for g, ms, ns, ks in random_shapes(4, seed):
        data = R.generate_input(ms, ns, ks, g, seed, device="cpu")
        assert fastlaunch.unpack(data) == g, f"seed {seed}"


def test_bench_kernels_shape_selection():
    bk = load_tool("bench_kernels")
    args = bk.parse_args(["--tests", "--random", "3", "--seed", "5", "--shape", "2:64,128:256:512"])
    shapes = bk.select_shapes(args)
    extra = [(2, [64, 128], [256, 256], [512, 512])]
    assert shapes == list(BENCH_SHAPES) + extra + list(TEST_SHAPES) + random_shapes(3, 5)
    only = bk.select_shapes(bk.parse_args(["--only", "--random", "2", "--seed", "9"]))
    assert only == random_shapes(2, 9)
    fresh = bk.parse_args(["--random", "1"])
    assert isinstance(fresh.seed, int)  # drawn fresh, printed by the run


@pytest.mark.parametrize("argv", [["--only"], ["--random", "-1"], ["--random", "x"]])
def test_bench_kernels_rejects_bad_options(argv, capsys):
    bk = load_tool("bench_kernels")
    with pytest.raises(SystemExit) as e:
        bk.parse_args(argv)
    assert e.value.code == 2
    assert "error" in capsys.readouterr().err
