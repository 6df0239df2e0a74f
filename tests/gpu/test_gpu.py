"""GPU tests (skipped without CUDA; run on the H200 test GPU): fast_launch against the fp32 reference
with outputs poisoned to NaN and fresh data every time, plus the launch-path behaviours: new addresses,
changing shapes, streams, graph capture, refcounts."""
import gc
import json
import os
import random
import subprocess
import sys

import pytest
import torch

import fastlaunch
from fastlaunch import reference as R
from fastlaunch.shapes import BENCH_SHAPES, TEST_SHAPES, cut_sizes, describe

from conftest import fresh_seed, requires_cuda, tool_path

pytestmark = requires_cuda


def run_and_check(data, stream=None):
    """Two calls, each on poisoned outputs and checked: the first of new sizes may run on the device schedule
    (kernels/sm90/plan/row_plan.h), the second runs the plan made for them."""
    ref = R.ref_kernel(R.clone_outputs(data))
    for call in ("first", "second"):
        R.poison(data)
        torch.cuda.synchronize()
        if stream is None:
            out = fastlaunch.fast_launch(data)
        else:
            with torch.cuda.stream(stream):
                out = fastlaunch.fast_launch(data)
        torch.cuda.synchronize()
        assert [o.data_ptr() for o in out] == [c.data_ptr() for _a, _b, c in data[0]]
        ok, msg = R.check(out, ref)
        assert ok, f"{call} call: {msg}"


@pytest.mark.parametrize("shape", TEST_SHAPES + BENCH_SHAPES, ids=describe)
def test_task_shapes(shape):
    g, ms, ns, ks = shape
    run_and_check(R.generate_input(ms, ns, ks, g, fresh_seed(), device="cuda"))


def _varied_groups(g, seed, max_m, max_n, max_steps):
    """g groups of different M, N and K (one generator for the whole list, fixed by the seed)."""
    rng = random.Random(seed)
    ms = [rng.randrange(1, max_m) for _ in range(g)]
    ns = [rng.randrange(1, max_n) for _ in range(g)]
    ks = [64 * rng.randrange(1, max_steps + 1) for _ in range(g)]
    return (g, ms, ns, ks)


RANDOM_SHAPES = [
    (1, [1], [1], [64]),
    (1, [1000], [999], [320]),
    (1, [17], [4097], [64]),
    (1, [16], [1024], [4096]),  # reduced tiles (8 tiles of 64 steps, 16 parts each)
    (2, [118, 70], [104, 168], [192, 3072]),  # reduced tiles of 3 parts (3 K steps) beside ones of 24
    (2, [1, 255], [129, 7], [128, 192]),
    (3, [257, 513, 31], [131, 77, 1001], [64, 448, 1024]),
    _varied_groups(100, seed=4, max_m=200, max_n=400, max_steps=4),  # the 128-group parameter block
    _varied_groups(64, seed=1, max_m=300, max_n=600, max_steps=8),
]


@pytest.mark.parametrize("shape", RANDOM_SHAPES, ids=describe)
def test_edge_and_random_shapes(shape):
    g, ms, ns, ks = shape
    run_and_check(R.generate_input(ms, ns, ks, g, fresh_seed(), device="cuda"))


def check_views_leave_neighbours(ms, ns, ks, offsets, pad):
    """Each group's C replaced by a view at element offset offsets[g] into a buffer `pad` elements larger filled
    with a sentinel; the outputs checked, and the sentinel around each view unchanged, after each of two calls (the
    first of new sizes may run on the device schedule, kernels/sm90/plan/row_plan.h; the second runs the plan)."""
    d = R.generate_input(ms, ns, ks, len(ms), fresh_seed(), device="cuda")
    ref = R.ref_kernel(R.clone_outputs(d))
    bufs = []
    for i, (off, (a, b, c)) in enumerate(zip(offsets, d[0])):
        m, n = c.shape[0], c.shape[1]
        buf = torch.full((m * n + pad,), 7.0, dtype=c.dtype, device=c.device)
        d[0][i] = (a, b, buf[off:off + m * n].view(1, m, n).permute(1, 2, 0))
        bufs.append((buf, off, m * n))
    for call in ("first", "second"):
        R.poison(d)
        out = fastlaunch.fast_launch(d)
        torch.cuda.synchronize()
        ok, msg = R.check(out, ref)
        assert ok, f"{call} call: {msg}"
        for buf, off, size in bufs:
            assert (buf[:off] == 7).all() and (buf[off + size:] == 7).all(), f"{call} call"


def test_outputs_at_any_alignment_leave_their_neighbours():
    # C's rows may start anywhere (N not a multiple of 8, or C's pointer off a 16-byte boundary): such a
    # launch runs the kernel compiled for it, whose epilogue writes the aligned 16-byte chunks inside each
    # row and single elements at its ends, never an element outside C. C here: views into larger buffers
    # at element offsets 1, 3, 7 (odd) and 8 (16 bytes: with N = 136 the aligned path of that kernel),
    # the rest a sentinel.
    check_views_leave_neighbours([70, 129, 200, 33], [64, 77, 1000, 136], [128, 256, 192, 64], (1, 3, 7, 8), 16)


def test_aligned_outputs_stored_by_tma_leave_their_neighbours():
    # Launches of up to 16 groups whose C rows are all aligned store each 64-row epilogue pass by one TMA
    # store of a 64 x 64 box, which the C map's extents clip at M rows and N columns. C here: views into
    # larger buffers at 16-byte offsets, M and N not multiples of 64 (a box past both ends), the rest a sentinel.
    check_views_leave_neighbours([70, 200, 33], [72, 1000, 200], [128, 256, 192], (8, 16, 64), 128)


CASES_CHILD = r"""
import json, sys, torch, fastlaunch
from fastlaunch import reference as R
seed, calls = int(sys.argv[1]), int(sys.argv[3])
for g, ms, ns, ks in json.loads(sys.argv[2]):
    d = R.generate_input(ms, ns, ks, g, seed, device="cuda")
    for call in range(calls):
        ok, msg = R.run_checked(fastlaunch.fast_launch, d)
        assert ok, f"{g} groups {ms} {ns} {ks}, call {call + 1}: {msg}"
    seed += 1
print("ok")
"""


def check_in_child(cases, env, calls=1):
    """Each of `cases` (g, ms, ns, ks) checked in a new process with `env` (experiment settings are read
    at set-up), fresh data and poisoned outputs, `calls` times."""
    out = subprocess.run([sys.executable, "-c", CASES_CHILD, str(fresh_seed()), json.dumps(cases), str(calls)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


EVERY_SHAPE_CASES = [(3, [257, 1, 100], [131, 384, 1001], [64, 448, 1024]), (2, [180, 64], [256, 512], [256, 128]),
                     (2, [300, 40], [8192, 4096], [256, 128]),  # more tiles than SMs
                     (1, [64], [128], [7168]),  # one tile; split: one step per CTA, the last adds 111 CTAs' sums
                     (2, [100, 200], [256, 130], [2048, 4096]),  # a few tiles, each split over several CTAs
                     (3, [5, 130, 64], [64, 200, 130], [64, 64, 192])]  # half tiles: 1 and 3 steps, N % 64 != 0


@pytest.mark.parametrize("cap, share, half", [("128", "", ""), ("192", "", ""), ("", "whole", ""), ("", "split", ""),
                                              ("128", "split", ""), ("", "split:2", ""), ("", "split:3", ""),
                                              ("", "", "1"), ("", "", "0"), ("128", "whole", "1"), ("", "reduce", ""),
                                              ("", "reduce:1", ""), ("", "reduce:5", ""), ("128", "reduce:3", ""),
                                              ("", "wave", ""), ("128", "wave", "")])
def test_every_width_cap_and_share(cap, share, half):
    # The planner picks the widest tile, whether to split tiles between CTAs and whether to take half
    # tiles (64 B rows) per launch from the costs; force each (a new process: they are read at set-up;
    # split:S cuts S CTAs per tile; half 1: half tiles for every launch of up to 16 groups; reduce:S
    # reduced tiles, S parts each summed by the reduce kernel, where the launch may take them; wave: whole tiles
    # round-robin over the CTAs, a group's tiles along N fastest). With cap
    # 192 the groups of 257, 180 and 100 rows get tiles of 192 (2), 192 (1) and 128 rows.
    env = dict(os.environ)
    if cap:
        env["FASTLAUNCH_SM90_WCAP"] = cap
    if share:
        env["FASTLAUNCH_SM90_SHARE"] = share
    if half:
        env["FASTLAUNCH_SM90_HALF"] = half
    check_in_child(EVERY_SHAPE_CASES, env)


# The task form on the device schedule (kernels/sm90/plan/row_plan.h; FASTLAUNCH_SM90_ROWS=1: wherever it fits): the
# masked kernels with every group's own rows. The four benchmarks, narrow launches (every group one 128-row tile:
# 1, 32 and 33..128 rows), groups of one and several tiles of 128 and 192 rows, a launch past L2 (wave walks), 20 and
# 40 groups (the next parameter blocks; past 16 the conversion writes the B maps), and launches it does not fit
# (two K's, N % 8 != 0), which the planner takes.
ROWS_CASES = [(8, [80, 176, 128, 72, 64, 248, 96, 160], [4096] * 8, [7168] * 8),
              (8, [40, 76, 168, 72, 164, 148, 196, 160], [7168] * 8, [2048] * 8),
              (2, [192, 320], [3072] * 2, [4096] * 2), (2, [128, 384], [4096] * 2, [1536] * 2),
              (4, [1, 32, 33, 128], [256, 512, 136, 1024], [512] * 4), (3, [129, 193, 385], [384, 8, 256], [256] * 3),
              (1, [2048], [4096], [7168]), (8, [3, 100, 1, 57, 2, 512, 9, 31], [2048] * 8, [7168] * 8),
              (20, [1 + 37 * i for i in range(20)], [128 + 8 * i for i in range(20)], [192] * 20),
              (40, [1 + 11 * i for i in range(40)], [256] * 40, [128] * 40),
              (2, [100, 200], [256, 256], [256, 512]), (2, [100, 200], [250, 256], [256, 256])]


@pytest.mark.parametrize("cap", ["", "128", "192"])
def test_device_schedule_of_the_task_form(cap):
    # cap: the widest tile forced on the device schedule's tiling (experiments: FASTLAUNCH_SM90_WCAP with ROWS=1)
    env = dict(os.environ, FASTLAUNCH_SM90_ROWS="1")
    if cap:
        env["FASTLAUNCH_SM90_WCAP"] = cap
    check_in_child(ROWS_CASES, env)


def test_first_call_on_the_device_schedule_then_planned():
    # FASTLAUNCH_SM90_ROWS=first: sizes not called before run on the device schedule, and from their second call on
    # the plan made for them; both calls of each input right, the outputs poisoned each time
    check_in_child(ROWS_CASES, dict(os.environ, FASTLAUNCH_SM90_ROWS="first"), calls=2)


# The narrow build (kernels/sm90/plan/planner.h kNarrowN): groups whose tiles hold few enough rows run a narrower wgmma in
# their width's K loop. Rows at the narrow N's edge and one past it, one row, a group cut into two tiles
# under cap 128 (190 rows: tiles of 128 and 62, so not narrow), unaligned C rows (N % 8 != 0), split
# tiles over long K, a decode-like launch of 8 groups of 1-32 rows, and a launch of 20 groups (the next
# parameter block).
NARROW_CASES = [(3, [32, 33, 1], [256, 136, 1001], [256, 512, 128]), (2, [190, 20], [1024, 384], [1024, 2048]),
                (8, [1, 2, 5, 8, 13, 16, 31, 32], [512, 256, 384, 128, 520, 256, 128, 1024], [1536] * 8),
                (20, [1 + 13 * i for i in range(20)], [128 + 8 * i for i in range(20)],
                 [64 * (1 + i % 3) for i in range(20)])]


@pytest.mark.parametrize("cap, share", [("", ""), ("128", "whole"), ("", "split"), ("", "split:2")])
def test_narrow_build(cap, share):
    env = dict(os.environ, FASTLAUNCH_SM90_NARROW="1", FASTLAUNCH_SM90_HALF="0")
    if cap:
        env["FASTLAUNCH_SM90_WCAP"] = cap
    if share:
        env["FASTLAUNCH_SM90_SHARE"] = share
    check_in_child(NARROW_CASES + EVERY_SHAPE_CASES, env)


# The mid build (kernels/sm90/plan/planner.h kMidN): launches whose every 192-wide tile holds at most kMidN rows run that loop's
# wgmma at N = kMidN. Forced (FASTLAUNCH_SM90_MID=1) with tiles up to 192 rows wide (FASTLAUNCH_SM90_WCAP=192:
# else the planner may take 128-wide plans, where the build has nothing to run). Rows at its edge and far
# below it (129: the narrowest group of 192-wide tiles) beside a 128-wide group and unaligned C rows; one row
# past it (177) and a group of 352 rows (its first 192-wide tile is full): the build cannot run these two
# launches, so the main build does; benchmark 1's rows over a long K (split tiles); and a launch of 20 groups
# (the next parameter block). MID_RUNS: whether the planner puts the launch on the mid build (checked below).
MID_CASES = [(3, [176, 129, 40], [256, 1001, 512], [512, 256, 1024]), (2, [177, 150], [384, 256], [256, 512]),
             (2, [352, 100], [640, 136], [1024, 2048]),
             (8, [80, 176, 128, 72, 64, 248, 96, 160], [512] * 8, [2048] * 8),
             (20, [129 + 2 * i for i in range(20)], [128 + 8 * i for i in range(20)], [64 * (1 + i % 3) for i in range(20)])]
MID_RUNS = (True, False, False, True, True)


@pytest.mark.parametrize("share", ["", "whole", "split", "split:2"])
def test_mid_build(share):
    # the plans the launcher makes under these settings (it cuts launches of up to 16 groups where that pays)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    kind, _, parts = share.partition(":")
    force = ({"": 0, "whole": 1, "split": 2}[kind], 192, int(parts or 0), 2, 0, 1)  # plan()'s settings
    for (g, ms, ns, ks), runs in zip(MID_CASES, MID_RUNS):
        sizes = list(zip(ms, ns, ks))
        if g <= 16:
            sizes = cut_sizes(sizes, fastlaunch._C.cuts(sizes, sms, *force))
        planned = fastlaunch._C.mma_n(sizes, sms, *force)
        assert (fastlaunch._C.mid_n in planned) == runs, (ms, share, planned)
    env = dict(os.environ, FASTLAUNCH_SM90_MID="1", FASTLAUNCH_SM90_HALF="0", FASTLAUNCH_SM90_WCAP="192")
    if share:
        env["FASTLAUNCH_SM90_SHARE"] = share
    check_in_child(MID_CASES + EVERY_SHAPE_CASES, env)


# The skinny kernel (kernels/sm90/plan/skinny.h): launches of up to 16 groups of at most 16 rows each, on the CUDA
# cores. Every compiled row count (1-8, 12, 16) with rows past M, N below, at and past one item (64 B rows)
# and not a multiple of 8, the shortest K, groups of different K (each CTA converts the A rows of every group
# its items reach), a decode-like launch with more items than the grid's CTAs, 16 groups, 40 (three
# launches of up to 16 groups), and three launches of few items whose K the planner splits.
SKINNY_CASES = [(1, [1], [1], [64]), (2, [2, 3], [31, 33], [128, 64]), (3, [4, 5, 1], [64, 100, 7], [448, 64, 1024]),
                (2, [6, 7], [520, 77], [1536, 192]), (1, [8], [4097], [256]), (2, [12, 9], [300, 64], [640, 2048]),
                (3, [16, 10, 1], [129, 712, 1000], [64, 1152, 3136]),
                (8, [1, 2, 3, 4, 1, 2, 3, 4], [4096] * 8, [7168] * 8),
                (16, [1 + i % 8 for i in range(16)], [96 + 40 * i for i in range(16)], [64 * (1 + i % 5) for i in range(16)]),
                (40, [1 + i % 3 for i in range(40)], [200 + 24 * i for i in range(40)], [64 * (1 + i % 4) for i in range(40)]),
                (1, [10], [712], [1152]), (2, [16, 7], [1000, 24], [4096, 4032]), (1, [1], [1000], [4096])]


@pytest.mark.parametrize("lanes", ["", "8", "32"])
@pytest.mark.parametrize("split", ["", "1", "2", "3", "8"])
def test_skinny_kernel(split, lanes):
    # split: every item's K cut into that many parts, one CTA each, a cluster per item (kernels/sm90/plan/skinny.h; the
    # planner's choice where unset). Forced, it also runs launches of more items than clusters (each cluster
    # then takes several items, and the groups' A rows change under it) and parts with no units (K shorter
    # than `split` chunks of `lanes` units). lanes: lanes per B row (items of 64 or 16 B rows; the planner's
    # where unset).
    env = dict(os.environ, FASTLAUNCH_SM90_SKINNY="1")
    if split:
        env["FASTLAUNCH_SM90_SKINNY_SPLIT"] = split
    if lanes:
        env["FASTLAUNCH_SM90_SKINNY_LANES"] = lanes
    check_in_child(SKINNY_CASES, env)


def test_skinny_kernel_chosen_over_many_groups():
    # a decode step over 24 experts of 1-2 rows: the launcher's own choice, two skinny launches
    g, ms, ns, ks = 24, [1 + i % 2 for i in range(24)], [1024] * 24, [2048] * 24
    plan = fastlaunch._C.skinny(list(zip(ms, ns, ks)), torch.cuda.get_device_properties(0).multi_processor_count)
    assert plan is not None and plan[5], "this launch should take the skinny kernel"
    run_and_check(R.generate_input(ms, ns, ks, g, fresh_seed(), device="cuda"))


def test_forced_plans_repeated_without_a_wrong_output_or_a_hang():
    # One pass of test_every_width_cap_and_share catches a hang that comes now and then only by luck (a
    # change to the B producer's first loads hung about one call in five of the case with more tiles
    # than SMs on half tiles, yet passed that test). tools/stress_sm90.py repeats its cases on fresh data
    # under the settings where that showed (half tiles) and under split tiles, watching every call.
    tool = tool_path("stress_sm90.py")
    out = subprocess.run([sys.executable, tool, "--reps", "4", "--only", "_:_:1", "128:whole:1", "_:split:_"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "total: 72 calls checked, 0 wrong, 0 hangs" in out.stdout, out.stdout[-3000:]


# Wide launches of reduced tiles whose reduce kernel takes several float4s per CTA (kernels/sm90/plan/planner.h
# reduce_chunks): 24 tiles of 100 rows (13 float4s per CTA: one warp idle), 30 tiles of 40 rows (3 float4s
# per CTA, two warps each, two idle), both groups in one launch (the 40-row tiles' second chunk of CTAs
# returns at once); reduce:7 gives them 5, 4 and 2 parts (more loads per warp than one round of four).
REDUCE_GRID_CASES = [(1, [100], [3072], [1024]), (1, [40], [3840], [512]), (2, [40, 100], [3840, 3072], [512, 1024])]


@pytest.mark.parametrize("share", ["reduce:2", "reduce:7"])
def test_reduce_kernel_grids(share):
    check_in_child(REDUCE_GRID_CASES, dict(os.environ, FASTLAUNCH_SM90_SHARE=share))


def check_full_range(ms, ns, ks):
    """Every E2M1 code, every finite positive E4M3 scale (subnormals included), and NaN bytes (0x7f) in the
    scale rows past M/N that the contract leaves arbitrary. Products reach 2688^2 and cancel, so the fp32
    sums of the kernel and of the reference round differently: compare with float64 and allow the
    contract's tolerance plus 2^-20 of the sum of |products| (fp32 accumulation over K <= 256 terms)."""
    data = R.generate_input(ms, ns, ks, len(ms), fresh_seed(), device="cuda", full_range=True, scale_pad=0x7F)
    R.poison(data)
    out = fastlaunch.fast_launch(data)
    torch.cuda.synchronize()
    for (a, b, _c), (sfa, sfb), o in zip(data[0], data[1], out):
        da, db = R.dequantize(a, sfa).double(), R.dequantize(b, sfb).double()
        exact = da @ db.T
        magnitude = da.abs() @ db.abs().T
        ref = exact.half().double()  # what an exact kernel returns (inf where fp16 overflows)
        o = o[:, :, 0].double()
        finite = torch.isfinite(ref)
        assert not torch.isnan(o).any()
        assert torch.equal(o[~finite], ref[~finite])
        tol = 1e-3 + 1e-3 * ref.abs() + 2.0 ** -20 * magnitude
        err = (o - ref).abs()
        assert bool((err[finite] <= tol[finite]).all()), f"max excess {(err - tol)[finite].max().item()}"


def test_full_range_values_and_garbage_scale_padding():
    check_full_range([100, 300], [70, 129], [192, 256])


@pytest.mark.parametrize("ms, ns, ks, lanes", [([3, 16], [70, 129], [192, 256], 8), ([3, 5], [700, 129], [1024, 256], 32)])
def test_skinny_kernel_full_range_values(ms, ns, ks, lanes):
    # The skinny kernel (the launcher's own choice for these sizes, unsplit, at 8 and 32 lanes per B row): its
    # fp16 sums of 8 products per 16-wide block must be exact for every code and scale.
    plan = fastlaunch._C.skinny(list(zip(ms, ns, ks)), torch.cuda.get_device_properties(0).multi_processor_count)
    assert plan is not None and plan[5] and plan[6] == 1 and plan[7] == lanes, \
        f"these sizes should take the skinny kernel, unsplit, {lanes} lanes per row: {plan}"
    check_full_range(ms, ns, ks)


@pytest.mark.parametrize("n, k, lanes", [(1000, 4096, 8), (512, 8192, 32)])
def test_skinny_kernel_split_full_range_values(n, k, lanes):
    # The skinny kernel with K split over a cluster (the launcher's own choice for these sizes, at 8 and 32
    # lanes per B row): the parts' sums added through shared memory.
    ms, ns, ks = [2], [n], [k]
    plan = fastlaunch._C.skinny(list(zip(ms, ns, ks)), torch.cuda.get_device_properties(0).multi_processor_count)
    assert plan is not None and plan[5] and plan[6] > 1 and plan[7] == lanes, \
        f"these sizes should take the skinny kernel, K split, {lanes} lanes per row: {plan}"
    check_full_range(ms, ns, ks)


def test_uint8_views_of_fp4():
    run_and_check(R.generate_input([96, 40], [256, 72], [256, 128], 2, fresh_seed(), device="cuda", fp4_dtype=False))


def test_more_groups_than_one_launch_holds():
    g = 300
    rnd = random.Random(fresh_seed())
    ms = [rnd.randrange(1, 70) for _ in range(g)]
    ns = [rnd.randrange(1, 200) for _ in range(g)]
    run_and_check(R.generate_input(ms, ns, 128, g, fresh_seed(), device="cuda"))


def test_new_addresses_and_changing_shapes_between_calls():
    keep = []  # keep old inputs alive so new ones land at new addresses
    for shape in [TEST_SHAPES[0], TEST_SHAPES[0], TEST_SHAPES[4], BENCH_SHAPES[3], TEST_SHAPES[0], TEST_SHAPES[8]]:
        g, ms, ns, ks = shape
        data = R.generate_input(ms, ns, ks, g, fresh_seed(), device="cuda")
        keep.append(data)
        run_and_check(data)
    assert len({d[0][0][0].data_ptr() for d in keep}) == len(keep)


def test_non_default_stream():
    s = torch.cuda.Stream()
    g, ms, ns, ks = TEST_SHAPES[5]
    run_and_check(R.generate_input(ms, ns, ks, g, fresh_seed(), device="cuda"), stream=s)


# Plans of each kind: split tiles (benchmark 3), half tiles (test 3), reduced tiles over a third kernel
# (one group of 23 x 409 x 3392: 4 tiles cut into 27 parts each; N % 8 != 0).
PLAN_KINDS = [BENCH_SHAPES[2], TEST_SHAPES[3], (1, [23], [409], [3392])]


@pytest.mark.parametrize("shape", PLAN_KINDS, ids=describe)
def test_two_streams_at_once(shape):
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    g, ms, ns, ks = shape
    d1 = R.generate_input(ms, ns, ks, g, fresh_seed(), device="cuda")
    d2 = R.generate_input(ms, ns, ks, g, fresh_seed(), device="cuda")
    r1, r2 = R.ref_kernel(R.clone_outputs(d1)), R.ref_kernel(R.clone_outputs(d2))
    R.poison(d1)
    R.poison(d2)
    torch.cuda.synchronize()
    for _ in range(20):  # many overlapping launches on both streams
        with torch.cuda.stream(s1):
            o1 = fastlaunch.fast_launch(d1)
        with torch.cuda.stream(s2):
            o2 = fastlaunch.fast_launch(d2)
    torch.cuda.synchronize()
    assert R.check(o1, r1)[0] and R.check(o2, r2)[0]


@pytest.mark.parametrize("shape", PLAN_KINDS, ids=describe)
def test_cuda_graph_capture_and_replay(shape):
    g, ms, ns, ks = shape
    data = R.generate_input(ms, ns, ks, g, fresh_seed(), device="cuda")
    ref = R.ref_kernel(R.clone_outputs(data))
    fastlaunch.fast_launch(data)  # shapes seen once outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fastlaunch.fast_launch(data)
    for _ in range(3):
        R.poison(data)
        graph.replay()
        torch.cuda.synchronize()
        assert R.check([c for _a, _b, c in data[0]], ref)[0]
    # new inputs written into the captured tensors are picked up by the replay
    fresh = R.generate_input(ms, ns, ks, g, fresh_seed(), device="cuda")
    for (a, b, _c), (a2, b2, _c2) in zip(data[0], fresh[0]):
        a.copy_(a2)
        b.copy_(b2)
    for (sa, sb), (sa2, sb2) in zip(data[2], fresh[2]):
        sa.copy_(sa2)
        sb.copy_(sb2)
    ref2 = R.ref_kernel(R.clone_outputs(fresh))
    R.poison(data)
    graph.replay()
    torch.cuda.synchronize()
    assert R.check([c for _a, _b, c in data[0]], ref2)[0]


def test_first_call_of_new_shapes_inside_capture():
    g, ms, ns, ks = 2, [77, 300], [333, 129], [192, 640]  # shapes used nowhere else
    data = R.generate_input(ms, ns, ks, g, fresh_seed(), device="cuda")
    ref = R.ref_kernel(R.clone_outputs(data))
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fastlaunch.fast_launch(data)
    R.poison(data)
    graph.replay()
    torch.cuda.synchronize()
    assert R.check([c for _a, _b, c in data[0]], ref)[0]


def test_refcounts_after_many_launches():
    data = R.generate_input([16, 32], [64, 64], [64, 64], 2, fresh_seed(), device="cuda")
    leaves = [x for lvl in data for grp in lvl for x in grp if not isinstance(x, int)]
    leaves += [grp for lvl in data for grp in lvl] + list(data)
    before = [sys.getrefcount(x) for x in leaves]
    for i in range(10_000):
        out = fastlaunch.fast_launch(data)
        if i % 1000 == 0:
            torch.cuda.synchronize()
    del out
    gc.collect()
    torch.cuda.synchronize()
    assert [sys.getrefcount(x) for x in leaves] == before


def test_tensors_on_two_devices_are_refused():
    data = R.generate_input([16, 32], [64, 64], [64, 64], 2, fresh_seed(), device="cuda")
    abc = [list(t) for t in data[0]]
    abc[1][2] = abc[1][2].cpu()
    with pytest.raises(ValueError, match=r"^group 1: c must be on a CUDA device, got cpu$"):
        fastlaunch.fast_launch((abc, data[1], data[2], data[3]))
    if torch.cuda.device_count() > 1:
        abc[1][2] = data[0][1][2].to("cuda:1")
        with pytest.raises(ValueError, match=r"^group 1: c is on cuda:1, expected cuda:0 like group 0's a$"):
            fastlaunch.fast_launch((abc, data[1], data[2], data[3]))


@pytest.mark.parametrize("setting", ["WCAP=100", "SHARE=halves", "SHARE=split:0", "SHARE=split:2x", "SHARE=reduce:65",
                                     "HALF=yes", "NARROW=2", "WAVE=2", "SKINNY=on", "SKINNY_SPLIT=9",
                                     "SKINNY_SPLIT=0", "SKINNY_LANES=16", "SKINNY_LANES=8x", "ONLY=both",
                                     "PREFETCH=yes", "ROWS=firsts"])
def test_bad_experiment_setting_is_reported(setting):
    # The experiment settings are read when the device is first used; a bad one is a ValueError naming it.
    name, _, value = setting.partition("=")
    env = dict(os.environ, **{"FASTLAUNCH_SM90_" + name: value})
    child = ("import fastlaunch\nfrom fastlaunch import reference as R\n"
             "d = R.generate_input([64], [128], [64], 1, 1, device='cuda')\n"
             "try:\n    fastlaunch.fast_launch(d)\nexcept ValueError as e:\n    print('ValueError:', e)\n")
    out = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "ValueError:" in out.stdout and f"FASTLAUNCH_SM90_{name}={value}" in out.stdout, out.stdout
