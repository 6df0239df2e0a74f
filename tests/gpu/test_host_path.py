"""GPU tests of what the launcher keeps between calls (skipped without CUDA): plans found by each group's class of M
(kernels/sm90/plan/plan_memo.h), tensor maps found per group (kernels/common/keyed_memo.h), the A workspace sized
to rows rounded up (kernels/sm90/plan/geometry.h a16_extent_rows). Every call is checked against the fp32
reference with its outputs poisoned first: a plan or map served for the wrong call shows as a wrong output."""
import random

import pytest
import torch

import fastlaunch
from fastlaunch import reference as R

from conftest import fresh_seed, requires_cuda

pytestmark = requires_cuda


def _check(data):
    ok, msg = R.run_checked(fastlaunch.fast_launch, data)
    assert ok, msg


@pytest.mark.parametrize("lo,hi", [(1, 8), (1, 64), (1, 512)], ids=["decode", "small", "prefill"])
def test_sizes_drawn_anew_every_call(lo, hi):
    # rows per group change every call; decode draws share one plan (one class of M), the others plan anew
    seed = fresh_seed()
    rng = random.Random(seed)
    for i in range(12):
        ms = [rng.randint(lo, hi) for _ in range(8)]
        _check(R.generate_input(ms, [1024] * 8, [512] * 8, 8, seed + i, device="cuda"))


def test_weight_sets_in_rotation():
    # more weight sets than the old whole-launch memo held (4), taken in turn three times: every group's B map
    # must be the one of its own B (a stale map reads another set's weights)
    seed = fresh_seed()
    ms, ns, ks = [24, 8, 64, 1], [256, 512, 256, 384], [512, 512, 256, 512]
    sets = [R.generate_input(ms, ns, ks, 4, seed + s, device="cuda") for s in range(9)]
    for _round in range(3):
        for data in sets:
            _check(data)


def test_rows_that_round_to_one_workspace_extent():
    # launches whose rows differ a little share the A workspace's extent (and its maps); each must read its own A
    seed = fresh_seed()
    for i, total in enumerate((1000, 1001, 1017, 1024, 1000)):
        ms = [total - 3 * 200, 200, 200, 200]
        _check(R.generate_input(ms, [256] * 4, [256] * 4, 4, seed + i, device="cuda"))


def test_graph_capture_after_memoised_calls():
    # a call captured once its plan and maps are kept, replayed with new data in the same tensors
    seed = fresh_seed()
    ms, ns, ks = [5, 3, 8, 1, 2, 7, 4, 6], [1024] * 8, [512] * 8
    data = R.generate_input(ms, ns, ks, 8, seed, device="cuda")
    _check(data)  # plans and maps kept; the workspace block known to the allocator
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fastlaunch.fast_launch(data)
    for step in range(3):
        fresh = R.generate_input(ms, ns, ks, 8, seed + 1 + step, device="cuda")
        for (a, b, c), (fa, fb, _fc) in zip(data[0], fresh[0]):
            a.copy_(fa), b.copy_(fb)
        for (sa, sb), (fsa, fsb) in zip(data[2], fresh[2]):
            sa.copy_(fsa), sb.copy_(fsb)
        # the reference reads what the kernel reads: the captured tensors, their plain scales rebuilt from the
        # reordered ones just copied in (data's own plain scales are still the first input's); it is fresh's
        ref = R.ref_kernel(R.clone_outputs(R.scales_as_read(data)))
        ok, msg = R.check(ref, R.ref_kernel(R.clone_outputs(fresh)))
        assert ok, f"replay {step}: the copied-in data is not fresh's: {msg}"
        R.poison(data)
        graph.replay()
        torch.cuda.synchronize()
        ok, msg = R.check([c for _a, _b, c in data[0]], ref)
        assert ok, f"replay {step}: {msg}"
