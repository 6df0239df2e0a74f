"""GPU tests of empty groups (M = 0 or N = 0; skipped without CUDA, run on the H200 test GPU): mixtures of empty
and non-empty groups against the fp32 reference with every C poisoned with NaN first (on each path the launcher
takes: the skinny kernel, cut groups, more than 256 groups, C rows off 16 bytes), the empty groups' outputs left
alone, and a call whose groups are all empty launching nothing. Seeds are printed (pytest shows them with a
failure) and named in every assertion."""
import ctypes
import random
import warnings

import pytest
import torch

import fastlaunch
from fastlaunch import reference as R

from conftest import fresh_seed, requires_cuda

pytestmark = requires_cuda


def with_sentinel_outputs(data, sentinel):
    """data with each empty group's c (no elements) a view into `sentinel` (its data pointer inside live memory),
    so that a write through it would show there."""
    abc = []
    for g, (a, b, c) in enumerate(data[0]):
        if c.numel() == 0:
            m, n = c.shape[0], c.shape[1]
            c = torch.as_strided(sentinel, (m, n, 1), (n, 1, 1), storage_offset=64 * (g + 1))
        abc.append((a, b, c))
    return abc, data[1], data[2], data[3]


CASES = [
    ([0, 96, 128], [128, 0, 256], [256, 128, 512]),  # one non-empty group of three
    ([96, 0, 128, 0, 40], [128, 128, 256, 0, 72], [256, 512, 512, 64, 128]),
    ([1, 0, 2, 0, 1, 0, 0, 3], [512] * 8, [1024] * 8),  # decode-like: the skinny kernel's shapes
    ([192, 0, 320], [3072, 3072, 3072], [4096] * 3),  # benchmark 3 with an empty expert: a group cut into two
    ([0, 77, 0, 33], [100, 130, 0, 9], [64, 192, 256, 128]),  # C rows off 16 bytes (N % 8 != 0)
    ([m if i % 3 else 0 for i, m in enumerate(range(1, 301))], [64] * 300, [64] * 300),  # 300 groups, 200 not empty
    ([(i % 7) * 5 for i in range(600)], [128] * 600, [128] * 600),  # 600 groups, 514 not empty: two launches
]


@pytest.mark.parametrize("ms,ns,ks", CASES, ids=[f"{len(c[0])}groups-{i}" for i, c in enumerate(CASES)])
def test_mixed_empty_and_nonempty_groups(ms, ns, ks):
    seed = fresh_seed()
    data = R.generate_input(ms, ns, ks, len(ms), seed, device="cuda")
    sentinel = torch.full((64 * (len(ms) + 2),), float("nan"), dtype=torch.float16, device="cuda")
    data = with_sentinel_outputs(data, sentinel)
    ref = R.ref_kernel(R.clone_outputs(data))
    R.poison(data)
    before = sentinel.view(torch.int16).clone()
    torch.cuda.synchronize()
    out = fastlaunch.fast_launch(data)
    torch.cuda.synchronize()
    assert [o is c for o, (_a, _b, c) in zip(out, data[0])] == [True] * len(ms), seed
    ok, msg = R.check(out, ref)
    assert ok, (seed, msg)
    assert torch.equal(sentinel.view(torch.int16), before), (seed, "an empty group's output memory was written")


def test_all_empty_returns_the_outputs_and_writes_nothing():
    seed = fresh_seed()
    ms, ns, ks = [0, 5, 0], [64, 0, 0], [128, 64, 256]
    data = R.generate_input(ms, ns, ks, 3, seed, device="cuda")
    sentinel = torch.full((64 * 5,), float("nan"), dtype=torch.float16, device="cuda")
    data = with_sentinel_outputs(data, sentinel)
    before = sentinel.view(torch.int16).clone()
    torch.cuda.synchronize()
    for _ in range(3):
        out = fastlaunch.fast_launch(data)
        assert [o is c for o, (_a, _b, c) in zip(out, data[0])] == [True] * 3, seed
    torch.cuda.synchronize()
    assert torch.equal(sentinel.view(torch.int16), before), seed


def graph_nodes(fn):
    """The number of nodes of a CUDA graph captured around fn(), or None where this torch cannot show it."""
    try:
        graph = torch.cuda.CUDAGraph(keep_graph=True)
    except TypeError:
        return None
    if not hasattr(graph, "raw_cuda_graph"):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that a capture of nothing is empty
        with torch.cuda.graph(graph):
            fn()
    libcuda = ctypes.CDLL("libcuda.so.1")
    count = ctypes.c_size_t(0)
    rc = libcuda.cuGraphGetNodes(ctypes.c_void_p(graph.raw_cuda_graph()), None, ctypes.byref(count))
    assert rc == 0, f"cuGraphGetNodes: CUresult {rc}"
    return count.value


def test_all_empty_launches_nothing():
    seed = fresh_seed()
    empty = R.generate_input([0, 0, 7], [64, 0, 0], [128, 64, 64], 3, seed, device="cuda")
    some = R.generate_input([0, 64], [64, 64], [128, 128], 2, seed + 1, device="cuda")
    fastlaunch.fast_launch(some)  # set-up and plans outside the capture
    torch.cuda.synchronize()
    launched = graph_nodes(lambda: fastlaunch.fast_launch(some))
    if launched is None:
        pytest.skip("this torch cannot keep a captured graph to count its nodes (CUDAGraph(keep_graph=True))")
    assert launched >= 1, seed  # the count sees a call that launches
    assert graph_nodes(lambda: fastlaunch.fast_launch(empty)) == 0, seed


def test_empty_groups_inside_graph_capture_and_replay():
    seed = fresh_seed()
    ms, ns, ks = [0, 100, 0, 20], [256, 0, 128, 256], [512, 256, 256, 512]
    data = R.generate_input(ms, ns, ks, 4, seed, device="cuda")
    ref = R.ref_kernel(R.clone_outputs(data))
    fastlaunch.fast_launch(data)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fastlaunch.fast_launch(data)
    for _ in range(2):
        R.poison(data)
        graph.replay()
        torch.cuda.synchronize()
        ok, msg = R.check([c for _a, _b, c in data[0]], ref)
        assert ok, (seed, msg)


def test_changing_which_groups_are_empty_call_after_call():
    # a serving loop: the same experts, a different set of them idle at each step (the launcher's per-thread
    # plans and tensor maps are keyed by the non-empty groups)
    seed = fresh_seed()
    rng = random.Random(seed)
    for step in range(12):
        ms = [rng.choice([0, 0, 1, 3, 40, 130]) for _ in range(8)]
        data = R.generate_input(ms, [512] * 8, [1024] * 8, 8, seed * 100 + step, device="cuda")
        ref = R.ref_kernel(R.clone_outputs(data))
        R.poison(data)
        out = fastlaunch.fast_launch(data)
        torch.cuda.synchronize()
        ok, msg = R.check(out, ref)
        assert ok, (seed, step, ms, msg)
