"""CPU tests of the CPython unpacker: buffer contents, every check's exact message, refcounts, and
malformed input of every kind (which must raise, never crash)."""
import gc
import random
import sys

import pytest
import torch

import fastlaunch
from conftest import load_tool, with_group
from fastlaunch import reference as R
from fastlaunch import shapes as S
from fastlaunch.shapes import cut_sizes


def make(ms=(96, 128), ns=(128, 256), ks=(256, 512), seed=0, **kw):
    return R.generate_input(list(ms), list(ns), list(ks), len(ms), seed, device="cpu", **kw)


def test_pack_matches_pointers_and_sizes():
    data = make(ms=(96, 128, 40), ns=(128, 256, 384), ks=(256, 512, 64))
    buf = fastlaunch.pack(data)
    g = 3
    assert len(buf) == 8 * g
    for i, ((a, b, c), (sfa, sfb), (m, n, k, _)) in enumerate(zip(data[0], data[2], data[3])):
        assert buf[0 * g + i] == a.data_ptr()
        assert buf[1 * g + i] == b.data_ptr()
        assert buf[2 * g + i] == c.data_ptr()
        assert buf[3 * g + i] == sfa.data_ptr()
        assert buf[4 * g + i] == sfb.data_ptr()
        assert (buf[5 * g + i], buf[6 * g + i], buf[7 * g + i]) == (m, n, k)
    assert fastlaunch.unpack(data) == g


def test_levels_may_be_lists_or_tuples_and_uint8_fp4():
    data = make(fp4_dtype=False)
    as_tuples = tuple(tuple(tuple(x) for x in lvl) for lvl in data)
    assert fastlaunch.pack(as_tuples) == fastlaunch.pack(data)
    assert data[0][0][0].dtype == torch.uint8


def test_many_groups_use_a_larger_buffer():
    g = 300
    data = R.generate_input(8, 16, 64, g, 0, device="cpu")
    buf = fastlaunch.pack(data)
    assert len(buf) == 8 * g and buf[5 * g:6 * g] == (8,) * g
    # and the static buffer still serves small inputs afterwards
    small = make()
    assert fastlaunch.pack(small)[5 * 2:5 * 2 + 2] == (96, 128)


def test_reordered_scales_agree_with_plain():
    data = make(ms=(300,), ns=(200,), ks=(192,), full_range=True)
    for plain, reord in zip(data[1][0], data[2][0]):
        rows, kb = plain.shape[0], plain.shape[1]
        storage = reord.permute(5, 2, 4, 0, 1, 3).contiguous().view(torch.uint8)  # (1, mt, kt, 32, 4, 4)
        p = plain[:, :, 0].view(torch.uint8)
        i = torch.arange(rows)[:, None]
        j = torch.arange(kb)[None, :]
        got = storage[0, i // 128, j // 4, i % 32, (i % 128) // 32, j % 4]
        assert torch.equal(got, p)
        assert reord.shape == (32, 4, -(-rows // 128), 4, kb // 4, 1)


# ------------------------------------------------------------------------------ exact messages

def _t(shape, dtype=torch.uint8, strides=None):
    t = torch.zeros(shape, dtype=torch.uint8).view(dtype) if dtype in (torch.uint8, torch.float4_e2m1fn_x2) \
        else torch.zeros(shape, dtype=dtype)
    return t if strides is None else torch.empty_strided(shape, strides, dtype=t.dtype)


CASES = [
    # (group, field, replacement factory, exception, message)
    (1, "a", lambda d: torch.zeros(128, 128, 1, dtype=torch.uint8), ValueError,
     "group 1: a has shape (128, 128, 1), expected (128, 256, 1) for M=128, K=512"),
    (0, "b", lambda d: torch.zeros(128, 128, 1, dtype=torch.int8), TypeError,
     "group 0: b must be float4_e2m1fn_x2 or uint8, got int8"),
    (1, "sfb", lambda d: d[2][1][1].view(torch.uint8), TypeError,
     "group 1: sfb must be float8_e4m3fn, got uint8"),
    (0, "c", lambda d: torch.zeros(96, 128, 1, dtype=torch.float32), TypeError,
     "group 0: c must be float16, got float32"),
    (0, "c", lambda d: torch.zeros(1, 96, 128, dtype=torch.float16).permute(1, 2, 0).transpose(0, 1)
     .contiguous().transpose(0, 1), ValueError,
     "group 0: c has strides (1, 96, 1), expected (128, 1, 12288) (row-major, N contiguous)"),
    (0, "a", lambda d: [1, 2], TypeError, "group 0: a must be a torch.Tensor, got list"),
    (1, "sfa", lambda d: None, TypeError, "group 1: sfa must be a torch.Tensor, got NoneType"),
    (0, "sfa", lambda d: d[2][0][0][:, :, :, :, :2], ValueError,
     "group 0: sfa has shape (32, 4, 1, 4, 2, 1), expected (32, 4, 1, 4, 4, 1) for M=96, K=256"),
    (0, "a", lambda d: torch.zeros(96 * 128 + 1, dtype=torch.uint8)[1:].view(96, 128, 1), ValueError,
     None),  # misaligned: message names the pointer, checked below
    (1, "sizes", lambda d: (128, 256, 500, 1), ValueError,
     "group 1: k must be a positive multiple of 64 up to 2147483584, got 500"),
    (1, "sizes", lambda d: (128, 256, 512, 2), ValueError, "group 1: l must be 1, got 2"),
    (0, "sizes", lambda d: (-1, 128, 256, 1), ValueError, "group 0: m must be an int in 0..2147483647, got -1"),
    (0, "sizes", lambda d: (96, 2**40, 256, 1), ValueError,
     "group 0: n must be an int in 0..2147483647, got 1099511627776"),
    (0, "sizes", lambda d: (96, 128, 2**70, 1), ValueError,
     "group 0: k must be a positive multiple of 64 up to 2147483584, got an int that does not fit int64"),
    (0, "sizes", lambda d: (96.0, 128, 256, 1), TypeError, "group 0: m must be an int, got float"),
    (0, "sizes", lambda d: (96, 128, 256, True), TypeError, "group 0: l must be an int, got bool"),
    (0, "sizes", lambda d: (96, 128, 256), ValueError, "group 0: sizes must have 4 items (m, n, k, l), got 3"),
    (0, "sizes", lambda d: "abcd", TypeError, "group 0: sizes must be a tuple or list (m, n, k, l), got str"),
]


@pytest.mark.parametrize("g,field,factory,exc,message", CASES)
def test_each_check_raises_its_message(g, field, factory, exc, message):
    data = make()
    bad = with_group(data, g, field, factory(data))
    with pytest.raises(exc) as info:
        fastlaunch.unpack(bad)
    if message is None:
        assert str(info.value).startswith(f"group {g}: {field} data pointer 0x")
        assert str(info.value).endswith("must be 16-byte aligned")
    else:
        assert str(info.value) == message


def test_structure_messages():
    data = make()
    cases = [
        (None, TypeError, "data must be a tuple or list (abc, sf, sf_reordered, sizes), got NoneType"),
        (data[:3], ValueError, "data must have 4 items (abc, sf, sf_reordered, sizes), got 3"),
        ((data[0], data[1], data[2], data[3][:1]), ValueError, "sizes has 1 groups, expected 2 like abc"),
        (([], [], [], []), ValueError, "abc must hold at least one group, got 0"),
        ((data[0], 5, data[2], data[3]), TypeError, "sf must be a tuple or list with one item per group, got int"),
        (([data[0][0], data[0][1][:2]], data[1], data[2], data[3]), ValueError,
         "group 1: abc must have 3 items (a, b, c), got 2"),
        ((data[0], data[1], [data[2][0], "xy"], data[3]), TypeError,
         "group 1: sf_reordered must be a tuple or list (sfa, sfb), got str"),
        ((data[0], [None, None], data[2], data[3]), TypeError,
         "group 0: sf must be a tuple or list (sfa, sfb), got NoneType"),
        ((data[0], [data[1][0], data[1][1] + (None,)], data[2], data[3]), ValueError,
         "group 1: sf must have 2 items (sfa, sfb), got 3"),
    ]
    for obj, exc, msg in cases:
        with pytest.raises(exc) as info:
            fastlaunch.unpack(obj)
        assert str(info.value) == msg


def test_cpu_tensors_are_refused_by_fast_launch():
    with pytest.raises(ValueError, match=r"^group 0: a must be on a CUDA device, got cpu$"):
        fastlaunch.fast_launch(make())


def test_meta_and_sparse_tensors_raise():
    data = make()
    meta = torch.empty(96, 128, 1, dtype=torch.uint8, device="meta")
    with pytest.raises(ValueError, match=r"^group 0: a must be a CPU or CUDA tensor"):
        fastlaunch.unpack(with_group(data, 0, "a", meta))
    with pytest.raises(ValueError, match=r"^group 0: a must be on a CUDA device, got meta$"):
        fastlaunch.fast_launch(with_group(data, 0, "a", meta))
    sparse = torch.zeros(96, 128, dtype=torch.float16).to_sparse()
    with pytest.raises(ValueError, match=r"^group 0: c must be a dense strided tensor$"):
        fastlaunch.unpack(with_group(data, 0, "c", sparse))


def test_tensor_subclass_with_torch_dispatch_is_refused():
    class Sub(torch.Tensor):
        @staticmethod
        def __new__(cls, t):
            return torch.Tensor._make_wrapper_subclass(cls, t.shape, dtype=t.dtype, strides=t.stride())

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            raise AssertionError("must not be called")

    data = make()
    with pytest.raises(ValueError, match="tensor subclass with __torch_dispatch__"):
        fastlaunch.unpack(with_group(data, 0, "b", Sub(data[0][0][1])))


MALFORMED = [
    None, 0, 1.5, "abc", b"abc", {}, set(), object(), (x for x in range(4)), iter([]),
    (), (None,), (None, None, None, None), ([], [], [], []), ("a", "b", "c", "d"),
    ([None], [None], [None], [None]), ([(1, 2, 3)], [(1, 2)], [(1, 2)], [(1, 2, 3, 4)]),
    ([[None, None, None]], [[None, None]], [[None, None]], [[96, 128, 256, 1]]),
    ([[torch.zeros(1)] * 3], [[None] * 2], [[torch.zeros(1)] * 2], [[1, 1, 64, 1]]),
    ([[torch.zeros(1)] * 3], [[None] * 2], [[torch.zeros(1)] * 2], [[-1, 1, 64, 1]]),
    ([[torch.zeros(1)] * 3], [[None] * 2], [[torch.zeros(1)] * 2], [[1, 1, 64, "1"]]),
    [[1] * 3, [1] * 3, [1] * 3, [1] * 3],
]


@pytest.mark.parametrize("obj", MALFORMED, ids=range(len(MALFORMED)))
def test_malformed_inputs_raise(obj):
    for fn in (fastlaunch.unpack, fastlaunch.pack, fastlaunch.fast_launch):
        with pytest.raises((TypeError, ValueError)):
            fn(obj)


def test_refcounts_unchanged_after_many_calls_and_failures():
    data = make()
    # tensors and containers (small ints are shared by the interpreter and change for unrelated reasons)
    leaves = [x for lvl in data for grp in lvl for x in grp if not isinstance(x, int)]
    leaves += [grp for lvl in data for grp in lvl] + list(data)
    before = [sys.getrefcount(x) for x in leaves]
    for _ in range(10_000):
        fastlaunch.unpack(data)
    bad = with_group(data, 1, "sizes", (128, 256, 500, 1))
    for _ in range(1000):
        with pytest.raises(ValueError):
            fastlaunch.unpack(bad)
        with pytest.raises(ValueError):
            fastlaunch.fast_launch(data)  # CPU tensors: refused after the walk
    del bad
    gc.collect()
    assert [sys.getrefcount(x) for x in leaves] == before


PLAN_CASES = [
    [(1000, 4096, 256)],
    [(m, 4096, 7168) for m in (80, 176, 128, 72, 64, 248, 96, 160)],  # benchmark 1
    [(m, 7168, 2048) for m in (40, 76, 168, 72, 164, 148, 196, 160)],  # benchmark 2
    [(192, 3072, 4096), (320, 3072, 4096)],  # benchmark 3
    [(128, 4096, 1536), (384, 4096, 1536)],  # benchmark 4
    [(1, 1, 64)],
    [(m, 256 * (1 + m % 3), 64 * (1 + m % 5)) for m in range(1, 600, 37)],  # mixed N and K
    [(118, 104, 192), (70, 168, 3072)],  # a short K beside a long one: reduced tiles of 3 and of more parts
    [(16, 512, 64), (200, 300, 4096), (5, 64, 128)],
]


COST = fastlaunch._C.cost_model  # kernels/sm90/plan/planner.h's cost model, ns


def step_cost(w, mma_n=None):
    # per 64-wide K step; the narrow and mid builds' narrower wgmma N each at a fixed share of its width's step
    step = max(COST["step_ns_dequant"], COST["step_ns_per_row"] * w)
    if mma_n is None or mma_n == w:
        return step
    return COST["mid_step_ratio" if mma_n == fastlaunch._C.mid_n else "narrow_step_ratio"] * step


def epilogue_cost(w, n, half=False):
    # ... and per tile finished, each pass dearer where C rows are not 16-byte aligned (N % 8 != 0); a half
    # tile's warpgroups take every other pass
    passes = -(-w // 64)
    return COST["pass_ns"] * passes + (COST["unaligned_pass_ns"] * (-(-passes // 2) if half else passes) if n % 8 else 0)


def tile_cost(steps, w, rows, n, mma_n=None):
    # a half tile (64 B rows): its steps two at a time, and the exchange of the warpgroups' sums
    if rows == 64:
        return -(-steps // 2) * step_cost(w) + epilogue_cost(w, n, True) + COST["half_add_ns"]
    return steps * step_cost(w, mma_n) + epilogue_cost(w, n)


@pytest.mark.parametrize("parts", [2, 3])
def test_split_shares_stay_in_order_when_the_last_group_is_short(parts):
    # split:S (FASTLAUNCH_SM90_SHARE=split:S) on launches whose last group (in launch order: cheapest tiles
    # last) has one-step tiles: a cut held back so that each later CTA keeps a step falls before that
    # group, into the last tile of the group before, and must be placed there (it once came out as a
    # start behind the previous one: CTAs with overlapping or negative shares).
    plan = fastlaunch._C.plan
    for sizes in ([(196, 2066, 320), (339, 204, 64)], [(36, 85, 192), (332, 2853, 64), (48, 2305, 448), (231, 2075, 256)],
                  [(304, 2444, 64), (93, 2035, 1280)], [(388, 2853, 64), (127, 710, 1792), (475, 546, 128)]):
        groups, starts, _, rows, red, _wave = plan(sizes, 132, 2, 0, parts)
        assert rows == 128 and not red
        order = sorted(range(len(sizes)), key=lambda g: groups[g][3])
        tile_steps = [sizes[g][2] // 64 for g in order for _ in range(groups[g][1] * groups[g][2])]
        assert starts[0] == (0, 0) and starts[-1] == (len(tile_steps), 0)
        assert all(a < b for a, b in zip(starts, starts[1:]))  # every share non-empty, in order
        assert all(k < tile_steps[t] for t, k in starts[:-1])
        assert len(starts) - 1 == min(132, parts * len(tile_steps), sum(tile_steps))


def test_plan_prices_unaligned_c_rows():
    # N % 8 != 0 (C rows not 16-byte aligned): every epilogue pass of a whole tile costs unaligned_pass_ns
    # more, of a half tile every other pass (its warpgroups share them); the plan of the N-rounded twin has
    # the same tiles. One CTA, so the estimate is the sum over its tiles.
    plan, extra = fastlaunch._C.plan, COST["unaligned_pass_ns"]
    assert extra > 0
    for half, passes_per_tile in ((0, 2), (1, 1)):  # 200 rows: two 128-wide chunks (2 passes each)
        odd = plan([(200, 129, 64)], 1, 1 if not half else 0, 0, 0, half)
        even = plan([(200, 136, 64)], 1, 1 if not half else 0, 0, 0, half)
        assert odd[:2] == even[:2] and odd[3] == even[3] == (64 if half else 128)
        tiles = odd[1][-1][0]
        load = 1 + COST["half_load"] if half else 1  # a half plan's load factor: one CTA on one SM
        assert odd[2] * 1000 == pytest.approx(even[2] * 1000 + tiles * passes_per_tile * extra * load)


def test_half_plans_priced_by_the_ctas_sharing_the_chip():
    # A half-tile plan's estimate is its tiles' cost times 1 + half_load x CTAs / SMs: with one tile per
    # CTA, the busiest CTA's tile.
    plan, load = fastlaunch._C.plan, COST["half_load"]
    assert 0 < load < 1
    for sizes, sms in (([(100, 640, 1024)], 132), ([(100, 640, 1024)], 20), ([(200, 256, 512)], 132)):
        groups, starts, est, rows, _, _wave = plan(sizes, sms, 0, 0, 0, 1)
        ctas = len(starts) - 1
        assert rows == 64 and ctas == groups[0][1] * groups[0][2]  # one half tile per CTA
        w, k, n = groups[0][0], sizes[0][2], sizes[0][1]
        assert est * 1000 == pytest.approx(tile_cost(k // 64, w, 64, n) * (1 + load * ctas / sms))
    # Where many CTAs would share the chip the planner leaves half tiles for whole ones: the random draw
    # G=6 461,.. (tools/tuning/sweep_sm90.py's alignment set, N rounded up to 8) ran 32.1 us on half tiles against
    # 27.1 on whole ones; the task's test shapes (at most 40 CTAs) keep their half tiles.
    g6 = [(461, 456, 1472), (110, 1320, 3904), (86, 960, 64), (43, 1048, 2688), (502, 1264, 2816), (367, 920, 2880)]
    assert plan(g6, 132)[3] == 128
    for g, ms, ns, ks in S.TEST_SHAPES:
        assert plan(list(zip(ms, ns, ks)), 132)[3] == 64


def test_plan_widths_chunks_and_order():
    plan = fastlaunch._C.plan
    widths = fastlaunch._C.tile_widths  # compiled (kernels/sm90/plan/planner.h kWidths)
    assert widths == tuple(sorted(widths)) and widths[-1] == fastlaunch._C.max_width
    for sizes in PLAN_CASES:
        out, _starts, _est, _rows, _red, _wave = plan(sizes, 132)
        assert sorted(r for *_, r in out) == list(range(len(sizes)))  # a permutation
        cap = max(w for w, *_ in out)
        cost = {}
        for (m, n, k), (w, chunks, tn, rank) in zip(sizes, out):
            assert w in widths and tn == -(-n // 128)
            assert chunks == -(-m // cap) and w * chunks >= m  # even cuts under the launch's cap ...
            assert w == min(x for x in widths if x >= -(-m // chunks))  # ... each the narrowest that holds them
            cost[rank] = (k // 64) * step_cost(w) + epilogue_cost(w, n)
        assert all(cost[r] >= cost[r + 1] for r in range(len(sizes) - 1))  # costliest tiles first
    # one tiny group: one tile of the narrowest width, one CTA
    assert plan([(1, 1, 64)], 132)[:2] == (((128, 1, 1, 0),), ((0, 0), (1, 0)))
    # benchmark 4: one round of 128 whole tiles (no tile split: splitting them over the 4 other SMs
    # would save less than the partial sums cost)
    groups, starts, _, _, _, _wave = plan([(128, 4096, 1536), (384, 4096, 1536)], 132)
    assert groups == ((128, 1, 32, 0), (128, 3, 32, 1)) and starts == tuple((t, 0) for t in range(129))
    # one SM: the cheapest cut wins (320 rows: two tiles of 192 or three of 128)
    w, chunks = (192, 2) if 2 * step_cost(192) < 3 * step_cost(128) else (128, 3)
    assert plan([(320, 4096, 1536)], 1)[:2] == (((w, chunks, 32, 0),), ((0, 0), (32 * chunks, 0)))


def test_cuts_where_the_cut_launch_is_estimated_cheaper():
    # _C.cuts is the launcher's own choice (kernels/sm90/plan/group_cuts.h choose_cuts): benchmark 3's 320 rows as
    # 128 + 192 (no padding, against 2 x 192); the other benchmarks uncut
    plan, cuts = fastlaunch._C.plan, fastlaunch._C.cuts
    b3 = [(m, n, k) for m, n, k in zip(*S.BENCH_SHAPES[2][1:])]
    assert cuts(b3, 132) == (0, 128)
    for g, ms, ns, ks in (S.BENCH_SHAPES[0], S.BENCH_SHAPES[1], S.BENCH_SHAPES[3]):
        assert cuts(list(zip(ms, ns, ks)), 132) == (0,) * g
    seen = 0
    for seed in (255658716, 1, 5):
        for g, ms, ns, ks in S.random_shapes(8, seed):
            sizes = list(zip(ms, ns, ks))
            for args in ((), (0, 0, 0, 2), (3, 0, 0, 0)):
                heads = cuts(sizes, 132, *args)
                assert len(heads) == g and all(h == 0 or (h % 128 == 0 and 0 < h < m) for h, m in zip(heads, ms))
                if any(heads):  # at least 1% cheaper than uncut, in the same settings
                    seen += 1
                    assert plan(cut_sizes(sizes, heads), 132, *args)[2] < 0.99 * plan(sizes, 132, *args)[2]
    assert seen >= 5
    # launches of more than 16 groups are never cut
    assert cuts([(320, 3072, 4096)] * 17, 132) == (0,) * 17


@pytest.mark.parametrize("fn", ["plan", "cuts"])
@pytest.mark.parametrize("args, exc, text", [
    (([(1, 1, 64)], 132, 5), ValueError, "share must be"), (([(1, 1, 64)], 132, 0, 100), ValueError, "cap 100"),
    (([(1, 1, 64)], 132, 0, 0, 2), ValueError, "parts must be"), (([(1, 1, 64)], 132, 0, 0, 0, 3), ValueError, "half"),
    (([], 132), ValueError, "need 1.."), (([(1, 1, 64)], 0), ValueError, "sm_count"),
    (([(1, 1, 63)], 132), ValueError, "group 0 has unsupported sizes"),
    ((5, 132), TypeError, "sizes must be a tuple or list"),
    (([(1, 1)], 132), TypeError, "3 arguments"),
])
def test_plan_and_cuts_reject_bad_arguments(fn, args, exc, text):
    with pytest.raises(exc, match=text):
        getattr(fastlaunch._C, fn)(*args)


@pytest.mark.parametrize("share, parts", [(0, 0), (1, 0), (2, 0), (2, 1), (2, 2), (2, 3), (3, 0), (3, 1), (3, 5)])
@pytest.mark.parametrize("sm_count", [1, 7, 132, 200])
def test_plan_shares_cover_every_step_once(sm_count, share, parts):
    # The CTAs' shares (stream-K) cut the step sequence (tiles in order, each tile's K steps) into
    # non-empty consecutive ranges that cover it exactly, of about equal estimated time; split tiles
    # with `parts` (FASTLAUNCH_SM90_SHARE=split:S) use that many CTAs per tile where steps and SMs allow.
    # Reduced tiles (share 3 forces them where a launch may take them: up to 16 groups, their CTAs
    # within the SMs) cut every tile into min(`reduce`, its K steps) parts of about equal length, one CTA
    # each.
    plan = fastlaunch._C.plan
    for sizes in PLAN_CASES:
        groups, starts, est, rows, red, _wave = plan(sizes, sm_count, share, 0, parts)
        mma_n = fastlaunch._C.mma_n(sizes, sm_count, share, 0, parts)
        order = sorted(range(len(sizes)), key=lambda g: groups[g][3])
        tile_steps, tile_width, tile_n, tile_mma_n = [], [], [], []
        for g in order:
            w, chunks, tn, _ = groups[g]
            assert tn == -(-sizes[g][1] // rows)  # tiles of `rows` B rows along N
            # the narrow build's N: only where every tile of the group fits it (the first holds min(m, w) rows)
            assert mma_n[g] == w or (rows == 128 and not red and min(sizes[g][0], w) <= mma_n[g] < w)
            tile_steps += [sizes[g][2] // 64] * (chunks * tn)
            tile_width += [w] * (chunks * tn)
            tile_n += [sizes[g][1]] * (chunks * tn)
            tile_mma_n += [mma_n[g]] * (chunks * tn)
        assert rows == 128 or (rows == 64 and len(sizes) <= 16 and share != 2 and all(k == 0 for _, k in starts))
        tiles = len(tile_steps)
        ctas = len(starts) - 1
        assert 1 <= ctas <= min(sm_count, fastlaunch._C.max_ctas, sum(tile_steps))
        if parts and share == 2:
            assert ctas == min(sm_count, fastlaunch._C.max_ctas, sum(tile_steps), parts * tiles)
        assert starts[0] == (0, 0) and starts[-1] == (tiles, 0)
        # a tile of fewer K steps than the parts takes one part per step
        tile_parts = [min(red, s) for s in tile_steps]
        if red:
            assert share in (0, 3) and rows == 128 and len(sizes) <= 16 and ctas == sum(tile_parts)
            assert red == parts or not parts
            assert red <= max(tile_steps)
            assert list(starts[:-1]) == [(t, tile_steps[t] * i // n) for t, n in enumerate(tile_parts) for i in range(n)]
            part_ns = max(-(-s // n) * step_cost(w) for s, n, w in zip(tile_steps, tile_parts, tile_width))
            assert est * 1000 >= part_ns + COST["reduce_ns"] - 1
            continue
        forced_ctas = sum(min(parts, s) for s in tile_steps)
        assert share != 3 or not parts or len(sizes) > 16 or forced_ctas > min(sm_count, fastlaunch._C.max_ctas) \
            or parts > max(tile_steps)  # forced reduced tiles are taken wherever allowed
        if share == 3:
            parts = 0  # the fallback: the planner's plan of whole or split tiles
        first = [sum(tile_steps[:t]) for t in range(tiles + 1)]  # global index of each tile's first step
        pos = []
        for t, k in starts:
            assert 0 <= t <= tiles and (t == tiles and k == 0 or 0 <= k < tile_steps[t])
            pos.append(first[t] + k)
        assert all(a < b for a, b in zip(pos, pos[1:]))  # every share non-empty, in order
        # whole tiles only: no cut inside a tile; else every part of a split tile has at least two steps
        # (unless the shares are so short that cuts are pushed apart by whole steps)
        for t, k in starts[1:-1]:
            assert k == 0 or share != 1
            assert k == 0 or (k >= 2 and tile_steps[t] - k >= 2) or sum(tile_steps) < 8 * ctas
        # the busiest share is within one tile (and its partial sums) of the average
        tile_ns = [tile_cost(s, w, rows, n, mn) for s, w, n, mn in zip(tile_steps, tile_width, tile_n, tile_mma_n)]
        assert est * 1000 >= sum(tile_ns) / ctas - 1
        widest = max(fastlaunch._C.tile_widths)  # partial sums cost by valid rows: at most the widest tile's
        few = COST["few_write_ns"] + COST["few_read_ns"] + widest * (COST["few_write_row_ns"] + COST["few_read_row_ns"])
        hand_over = max(COST["part_write_ns"] + COST["part_read_ns"], few)
        assert est * 1000 <= sum(tile_ns) / ctas + max(tile_ns) + hand_over


# benchmarks 1 and 2 (the task's lists), each as a list of (m, n, k)
BENCH_12 = [list(zip(ms, ns, ks)) for _g, ms, ns, ks in S.BENCH_SHAPES[:2]]


def test_mid_build_runs_every_widest_tile_at_its_n_or_none():
    # The mid build (kernels/sm90/plan/planner.h kMidN) compiles the widest width's K loop at N = mid_n only, so a plan on it has every
    # tile of that width at mid_n (each holds at most mid_n rows) and its other tiles at their width.
    mma_n, plan, mid_n, widest = fastlaunch._C.mma_n, fastlaunch._C.plan, fastlaunch._C.mid_n, fastlaunch._C.max_width
    seed = random.SystemRandom().randrange(2**32)  # fresh draws each run, named in any failure
    draw = random.Random(seed)
    cases = BENCH_12 + PLAN_CASES
    cases += [[(draw.randint(1, 600), 64 * draw.randint(1, 64), 64 * draw.randint(1, 64))
               for _ in range(draw.randint(1, 12))] for _ in range(40)]
    for sizes in cases:
        for mid in (0, 1):
            groups = plan(sizes, 132, 0, 0, 0, 0, 0, mid)[0]
            ns = mma_n(sizes, 132, 0, 0, 0, 0, 0, mid)
            if mid_n not in ns:
                continue
            for (m, _n, _k), (w, chunks, _tn, _r), n in zip(sizes, groups, ns):
                if w == widest:
                    assert n == mid_n and -(-m // chunks) <= mid_n, (seed, sizes, m, w, n)
                else:
                    assert n == w, (seed, sizes, m, w, n)
    # benchmarks 1 and 2: their 192-wide tiles hold 148-176 rows, so the planner takes the mid build for them; never
    # (mid 2) leaves every tile at its width, and the estimate is then higher
    for sizes in BENCH_12:
        widths = [w for w, _c, _t, _r in plan(sizes, 132)[0]]
        assert mma_n(sizes, 132) == tuple(mid_n if w == widest else w for w in widths)
        assert mma_n(sizes, 132, 0, 0, 0, 0, 0, 2) == tuple(widths)
        assert plan(sizes, 132)[2] < plan(sizes, 132, 0, 0, 0, 0, 0, 2)[2]
    # forced (mid 1, tiles of the widest width, no half tiles) where a widest tile holds more rows than mid_n: the
    # build cannot run it, the others do
    assert mma_n([(177, 512, 1024), (150, 512, 1024)], 132, 0, widest, 0, 2, 0, 1) == (widest, widest)
    assert mma_n([(176, 512, 1024), (150, 512, 1024)], 132, 0, widest, 0, 2, 0, 1) == (mid_n, mid_n)
    with pytest.raises(ValueError, match="mid must be"):
        plan([(176, 512, 1024)], 132, 0, 0, 0, 0, 0, 3)


def test_plan_partial_sums_cost_by_valid_rows():
    # A split tile hands over its sums in two halves of W / 2 A rows, only those holding valid rows
    # (kernels/sm90/stream_k.cuh), so, over fewer CTAs than SMs, the planner's estimate of the same split is the same
    # for every M up to W / 2, and higher past it by at most the per-row costs of half a tile (without the
    # narrow build, whose narrower wgmma would change the steps' cost).
    plan = fastlaunch._C.plan
    per_row = COST["few_write_row_ns"] + COST["few_read_row_ns"]
    ests = {m: plan([(m, 512, 4096)], 132, 2, 0, 2, 0, 2)[2] * 1000 for m in (16, 64, 65, 128)}
    assert all(plan([(m, 512, 4096)], 132, 2, 0, 2, 0, 2)[0][0][0] == 128 for m in ests)  # one width: same steps
    assert ests[16] == ests[64] < ests[65] == ests[128] <= ests[16] + per_row * 64 + 1
    # The planner's own choice is no worse (by its estimate) than any forced number of CTAs per split tile,
    # and a long K over few narrow tiles is split over fewer CTAs than SMs.
    for sizes in ([(16, 1024, 4096)], [(23, 409, 3392)], [(100, 300, 2048), (20, 700, 1024)], [(64, 4096, 512)]):
        _, starts, est, rows, _, _wave = plan(sizes, 132)
        assert all(est <= plan(sizes, 132, 2, 0, parts)[2] * 1.001 for parts in range(1, 17))
    _, starts, _, rows, red, _wave = plan([(16, 1024, 4096)], 132, 2)
    assert rows == 128 and red == 0 and 8 < len(starts) - 1 < 132 and any(k for _, k in starts)


    with pytest.raises(ValueError):
        plan([(0, 5, 64)], 132)
    with pytest.raises(ValueError):
        plan([(1, 1, 64)], 132, 5)
    with pytest.raises(ValueError):
        plan([(1, 1, 64)], 132, 0, 100)  # not a compiled width
    for share, parts in ((2, -1), (2, 65), (3, 65), (0, 2), (1, 2)):  # parts: 1..64, split or reduced tiles only
        with pytest.raises(ValueError):
            plan([(1, 1, 64)], 132, share, 0, parts)
    assert {w for w, *_ in plan([(m, 64, 64) for m in (100, 150, 300)], 132, 0, 128)[0]} == {128}


def test_plan_reduced_tiles_where_a_long_k_meets_few_tiles():
    # Reduced tiles (every tile cut into parts, one CTA each, summed by a third kernel) pay a launch and
    # the partial sums' traffic: the planner takes them for single groups with few tiles and a long K
    # (one of 23 x 409 x 3392: 4 tiles of 53 steps), never for the benchmark or task test shapes, never
    # for more than 16 groups, and its estimate of them counts the bytes of the partial sums.
    from fastlaunch.shapes import BENCH_SHAPES, TEST_SHAPES
    plan = fastlaunch._C.plan
    for sizes in ([(23, 409, 3392)], [(16, 1024, 4096)]):
        _, starts, est, rows, red, _wave = plan(sizes, 132)
        assert red >= 2 and rows == 128 and est <= plan(sizes, 132, 2)[2]
    for g, ms, ns, ks in BENCH_SHAPES + TEST_SHAPES:
        assert plan(list(zip(ms, ns, ks)), 132)[4] == 0
    assert plan([(16, 128, 4096)] * 17, 132, 3)[4] == 0 and plan([(16, 128, 4096)] * 16, 132, 3)[4] > 0
    wide, narrow = (plan([(m, 1024, 4096)], 132, 3, 0, 8)[2] for m in (192, 64))
    per_kb = COST["reduce_ns_per_kb"]  # 8 tiles x 8 parts x 128 B rows x 4 bytes per A row: 4 KB per row
    assert wide - narrow >= per_kb * 8 * 8 * (192 - 64) * 512 / 1024 / 1000 - 0.001


@pytest.mark.parametrize("sm_count", [3, 7, 20])
def test_plan_whole_tiles_smallest_busiest_share(sm_count):
    # Whole tiles: the planner's cut of the tile sequence into at most sm_count consecutive shares has the
    # smallest busiest share (checked against a brute-force partition over the tiles' estimated costs).
    plan = fastlaunch._C.plan
    cases = [[(64, 512, 256), (200, 384, 128), (150, 256, 512)], [(m, 128 * (1 + m % 4), 64 * (1 + m % 3)) for m in
                                                                  range(8, 400, 53)]]
    for sizes in cases:
        groups, starts, est, rows, _, _wave = plan(sizes, sm_count, 1)
        mma_n = fastlaunch._C.mma_n(sizes, sm_count, 1)
        order = sorted(range(len(sizes)), key=lambda g: groups[g][3])
        cost = []
        for g in order:
            w, chunks, tn, _ = groups[g]
            cost += [tile_cost(sizes[g][2] // 64, w, rows, sizes[g][1], mma_n[g])] * (chunks * tn)
        n = len(cost)
        prefix = [0.0]
        for c in cost:
            prefix.append(prefix[-1] + c)
        # best[j][b]: the smallest busiest share of the first j tiles in b shares
        inf = float("inf")
        best = [[inf] * (sm_count + 1) for _ in range(n + 1)]
        best[0][0] = 0.0
        for j in range(1, n + 1):
            for b in range(1, sm_count + 1):
                best[j][b] = min(max(best[i][b - 1], prefix[j] - prefix[i]) for i in range(j))
        optimum = min(best[n][1:])
        assert all(k == 0 for _, k in starts)
        shares = [prefix[t1] - prefix[t0] for (t0, _), (t1, _) in zip(starts, starts[1:])]
        assert max(shares) <= optimum * 1.0001 + 2  # ns: the planner's binary search stops within 1 ns
        assert abs(est * 1000 - max(shares)) < 1


def test_sweep_tool_knows_the_compiled_widths():
    sweep = load_tool("sweep_sm90")
    assert sweep.WIDTHS == fastlaunch._C.tile_widths


def test_fit_tool_counts_each_ctas_work():
    # tools/tuning/fit_sm90.py describes each CTA of a plan by its K steps and epilogues per width and its partial
    # sums written and read; summed over the CTAs these are the launch's steps, tiles and split cuts, of the
    # groups as the launcher cuts them. Its model is the one of 128-row tiles of the main build: plans without
    # half tiles and without a wgmma narrower than its tiles (the mid build's, which the planner takes for
    # benchmarks 1 and 2, raises ValueError; mid 2 keeps it off).
    fit = load_tool("fit_sm90")
    widths = list(fastlaunch._C.tile_widths)
    nw = len(widths)
    with pytest.raises(ValueError, match="only the main build"):
        fit.features(PLAN_CASES[2], 132, 2, 0, widths)
    cut_any = False
    for given in PLAN_CASES[:5] + [[(192, 3072, 4096), (320, 3072, 4096)]]:  # the last: benchmark 3, cut
        for share in (1, 2):
            heads = fastlaunch._C.cuts(given, 132, share, 0, 0, 2, 0, 2)
            cut_any |= any(heads)
            sizes = cut_sizes(given, heads)
            groups, starts, _, rows_n, _, _ = fastlaunch._C.plan(sizes, 132, share, 0, 0, 2, 0, 2)
            assert rows_n == 128
            rows = fit.features(given, 132, share, 0, widths, 0, 2)
            assert len(rows) == len(starts) - 1
            total = [sum(r[j] for r in rows) for j in range(len(rows[0]))]
            steps = sum(ch * tn * (k // 64) for (m, n, k), (w, ch, tn, _) in zip(sizes, groups))
            tiles = sum(ch * tn for w, ch, tn, _ in groups)
            cuts = sum(1 for _, k in starts if k > 0)
            assert sum(total[1:1 + nw]) == steps and sum(total[1 + nw:1 + 2 * nw]) == tiles
            assert total[-2] == cuts and total[-1] == cuts  # every partial written is read once
            assert share == 2 or cuts == 0
    assert cut_any


def test_split_plans_cut_for_the_critical_path():
    # Benchmark 3's launch (its 320-row group cut as 128 + 192) on 132 SMs: the even cuts split 52 tiles in
    # three (a middle part whose flag comes at its CTA's end, which the tile's finisher waits for); the
    # critical-path cuts (kernels/sm90/plan/planner.h cut_for_critical_path) split every tile in at most two, each part
    # at least two K steps, and still cover every step once (test_plan_shares_cover_every_step_once).
    from fastlaunch.shapes import BENCH_SHAPES, cut_sizes

    g, ms, ns, ks = BENCH_SHAPES[2]
    sizes = cut_sizes(list(zip(ms, ns, ks)), fastlaunch._C.cuts(list(zip(ms, ns, ks)), 132))
    groups, starts, _, rows, red, _ = fastlaunch._C.plan(sizes, 132)
    assert rows == 128 and not red and len(starts) - 1 <= 132
    parts = {}
    for (t0, k0), (t1, k1) in zip(starts, starts[1:]):
        if k1 > 0:
            parts[t1] = parts.get(t1, 1) + 1
            lo = k0 if t0 == t1 else 0
            assert k1 - lo >= 2 and 64 - k1 >= 2
    assert parts and max(parts.values()) == 2


def test_fit_tool_residuals_by_group_and_call_to_call():
    # tools/tuning/fit_sm90.py's readings of a traced run: the CTAs whose share lies in one launch group, by that
    # group's rows (after the launcher's cut), and how far the CTAs' differences repeat between calls.
    fit = load_tool("fit_sm90")
    ev = load_tool("trace_sm90").EVENTS
    entry, done = ev.index("entry"), ev.index("consumer_done")
    sizes = [(192, 3072, 4096), (320, 3072, 4096)]  # benchmark 3: the 320-row group cut as 128 + 192
    _, tile_k, tile_m, starts = fit.plan_tiles(sizes, 132)
    assert set(tile_m) == {128, 192} and len(tile_m) == len(tile_k) == starts[-1][0]
    n = len(starts) - 1
    by = fit.residual_by_group(sizes, 132, 0, 0, [0.5 + b for b in range(n)])
    assert set(by) <= {128, 192} and 0 < sum(c for c, *_ in by.values()) <= n
    for m, (c, mean, lo, hi) in by.items():
        mine = [0.5 + b for b in range(n)
                if {tile_m[t] for t in range(starts[b][0], starts[b + 1][0] + (starts[b + 1][1] > 0))} == {m}]
        assert c == len(mine) and (lo, hi) == (min(mine), max(mine)) and mean == pytest.approx(sum(mine) / c)

    def call(times):
        cs = [[[0, 0] for _ in range(16)] for _ in times]
        for c, t in zip(cs, times):
            c[entry], c[done] = [1000, 1], [1000 + int(1000 * t), 2]
        return {"us": 1.0, "trace": cs + [[[0, 0]] * 16]}  # an unused slot stays zero

    times = [10.0, 12.0, 11.0, 15.0]
    assert fit.call_to_call([call(times), call([t + 3 for t in times])]) == pytest.approx(1.0)
    assert fit.call_to_call([call(times), call([30 - t for t in times])]) == pytest.approx(-1.0)
    a, b = call(times), call(times)
    assert fit.same_sms([a, b])
    b["trace"][1][fit.SM_SLOT] = [7, 0]  # CTA 1 on another SM in the second call
    assert not fit.same_sms([a, b])
