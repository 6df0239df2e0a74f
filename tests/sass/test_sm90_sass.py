"""The built extension's sm_90a GEMM kernels, from their SASS (cuobjdump; no GPU needed): every variant is
there (16, 64, 128 and 256 groups; half tiles for up to 16; each also for C rows at any alignment; reduced tiles
for up to 16 groups; the narrow and mid builds for 16-256 groups, each also for C rows at any alignment), each
with a wgmma main loop per compiled tile width (the narrow build: one more at its narrow N; the mid build: its
widest at the mid N), TMA loads and no local memory (a register spill in a main loop costs several percent;
the narrow build keeps one 4-byte value in local memory outside its K loops: none inside them), no
special-register read in a K loop, and in the main and mid builds the split tiles' hand-over reads with a half's
loads in flight; and the skinny kernel's builds
(kernels/sm90/plan/skinny.h), each with its unit loop of fp16 multiply-adds, no local memory, and B's first loads
before A's barrier."""
import re

import fastlaunch._C as _C
from conftest import load_tool

sass_loops = load_tool("sass_loops")

GEMM = "nvfp4_group_gemm"
# template arguments <MAXG, HALF, ANY, RED, BUILD> as mangled (up to the end of the list: "EE"); BUILD: kernels/sm90/plan/planner.h
# kBuildMain 0, kBuildNarrow 1, kBuildMid 2
VARIANTS = {f"ILi{g}ELb{h}ELb{a}ELb0ELi0EE": f"{g} groups{', half tiles' if h else ''}{', C at any alignment' if a else ''}"
            for g, h in ((16, 0), (64, 0), (128, 0), (256, 0), (16, 1)) for a in (0, 1)}
VARIANTS["ILi16ELb0ELb0ELb1ELi0EE"] = "16 groups, reduced tiles"
NARROW = {f"ILi{g}ELb0ELb{a}ELb0ELi1EE": f"{g} groups, narrow build{', C at any alignment' if a else ''}"
          for g in (16, 64, 128, 256) for a in (0, 1)}
MID = {f"ILi{g}ELb0ELb{a}ELb0ELi2EE": f"{g} groups, mid build{', C at any alignment' if a else ''}"
       for g in (16, 64, 128, 256) for a in (0, 1)}
VARIANTS.update(NARROW)
VARIANTS.update(MID)


def _gemms(sass):
    funcs = sass_loops.functions(sass["sm_90a"])
    return {tag: body for name, body in funcs.items() if GEMM in name for tag in VARIANTS if tag in name}


def _widths(tag):
    """The wgmma N of each K loop: the widths; the narrow build's N beside them; the mid build's in place of the
    widest."""
    if tag in MID:
        return set(_C.tile_widths) - {_C.max_width} | {_C.mid_n}
    return set(_C.tile_widths) | ({_C.narrow_n} if tag in NARROW else set())


def test_every_sm90_gemm_variant_is_built(sass):
    assert set(_gemms(sass)) == set(VARIANTS), sorted(sass_loops.functions(sass["sm_90a"]))


def test_sm90_gemms_have_a_wgmma_loop_per_width_and_no_local_memory(sass):
    for tag, body in _gemms(sass).items():
        widths = _widths(tag)
        shapes = set(re.findall(r"\bHGMMA\.64x(\d+)x16\.F32\b", body))
        assert shapes == {str(w) for w in widths}, (VARIANTS[tag], shapes)
        # four k16 wgmma per 64-wide K step, two fragment sets (the loop body is unrolled twice)
        assert len(re.findall(r"\bHGMMA\b", body)) == 8 * len(widths), VARIANTS[tag]
        if tag in NARROW:  # local memory outside the K loops only (each width's innermost wgmma loop)
            inner = sass_loops.inner_loops(body)
            assert set(inner) == widths, VARIANTS[tag]
            for width, (_hgmma, _n, _r2ur, text) in inner.items():
                assert not re.search(r"\b(LDL|STL)\b", text), f"{VARIANTS[tag]} W={width}: local memory in a K loop"
        else:
            assert not re.search(r"\b(LDL|STL)\b", body), f"{VARIANTS[tag]}: local memory (a spill)"
        assert re.search(r"\bUTMALDG\b", body), f"{VARIANTS[tag]}: no TMA load"


# the masked form's GEMM <MAXG, BUILD>: main and narrow builds for every parameter-block size
MASKED = {f"ILi{g}ELi{b}EE": f"masked, {g} groups{', narrow build' if b else ''}" for g in (16, 64, 128, 256)
          for b in (0, 1)}


def _masked(sass):
    funcs = sass_loops.functions(sass["sm_90a"])
    return {tag: body for name, body in funcs.items() if GEMM + "_masked" in name for tag in MASKED if tag in name}


def test_masked_gemms_are_built_with_their_k_loops_and_no_tma_store(sass):
    # every variant; a wgmma K loop per width (the narrow build: and its narrow N), no local memory inside the K
    # loops, descriptors in uniform registers there; TMA loads of A and B but no TMA store of C: a store box would
    # write rows past the group's masked_m
    got = _masked(sass)
    assert set(got) == set(MASKED), sorted(n for n in sass_loops.functions(sass["sm_90a"]) if "masked" in n)
    for tag, body in got.items():
        widths = set(_C.tile_widths) | ({_C.narrow_n} if tag.endswith("ELi1EE") else set())
        inner = sass_loops.inner_loops(body)
        assert set(inner) == widths, MASKED[tag]
        for width, (hgmma, _n, r2ur, text) in inner.items():
            assert hgmma == 8 and r2ur == 0, (MASKED[tag], width, hgmma, r2ur)
            assert not re.search(r"\b(LDL|STL)\b", text), f"{MASKED[tag]} W={width}: local memory in a K loop"
        assert re.search(r"\bUTMALDG\b", body), f"{MASKED[tag]}: no TMA load"
        assert not re.search(r"\bUTMASTG\b", body), f"{MASKED[tag]}: a TMA store of C"


def test_sm90_k_loops_keep_descriptors_in_uniform_registers(sass):
    # tools/tuning/sass_loops.py: each variant's innermost wgmma loop per width holds its two unrolled K steps
    # (8 HGMMA) and no R2UR, i.e. its ring position and wgmma descriptors stay in uniform registers (a
    # divergent branch before the loop costs 9% more instructions per step)
    for tag, body in _gemms(sass).items():
        widths = _widths(tag)
        inner = sass_loops.inner_loops(body)
        assert set(inner) == widths, VARIANTS[tag]
        for width, (hgmma, n, r2ur, text) in inner.items():
            assert hgmma == 8 and n > hgmma, (VARIANTS[tag], width, hgmma, n)
            assert r2ur == 0, f"{VARIANTS[tag]} W={width}: {r2ur} R2UR in the K loop"
            # nor a special-register read (reading %tid every step for the stage's release by lane 0, where
            # the registers run short, costs ~4%)
            assert not re.search(r"\bS2R\b", text), f"{VARIANTS[tag]} W={width}: S2R in the K loop"


def test_sm90_hand_overs_keep_a_halfs_loads_in_flight(sass):
    # kernels/sm90/stream_k.cuh add_partials: the CTA that finishes a split tile reads each partner's sums a half at a time,
    # every load of the half (8 float4 at W = 128, 12 at 192) before its adds. In the main and mid builds ptxas
    # keeps 8 or more in flight; the narrow build, short of registers there, keeps 1-5, and its split plans'
    # finishing CTAs take 1.3-1.7 us longer over that phase. Runs of hand-over loads before
    # the next add:
    checked = 0
    for tag, body in _gemms(sass).items():
        half, _any, red, build = (int(x) for x in re.fullmatch(r"ILi\d+ELb(\d)ELb(\d)ELb(\d)ELi(\d)EE", tag).groups())
        if half or red or build == 1:
            continue  # half and reduced tiles hand nothing over inside the GEMM; the narrow build: above
        checked += 1
        runs = sass_loops.hand_over_runs(body)
        assert runs and max(runs) >= 8, (VARIANTS[tag], runs)
    assert checked == 16  # main and mid builds: 16, 64, 128 and 256 groups, each also for C at any alignment


# the direct-A kernels (kernels/sm90/gemm.cuh direct_a_producer): the task form's, aligned C and C at any alignment, and
# the masked form's, for up to 16 groups
DIRECT = {"nvfp4_group_gemm_directILi16ELb0EE": "direct A", "nvfp4_group_gemm_directILi16ELb1EE": "direct A, C any",
          "nvfp4_group_gemm_masked_directILi16EE": "masked, direct A"}


def test_direct_a_kernels_copy_a_by_cp_async_and_run_one_narrow_loop(sass):
    # one wgmma K loop at the narrow N (every tile narrow), descriptors in uniform registers, no local memory; A's row
    # copied by cp.async (LDGSTS): NVFP4, its two 16-byte halves and its scale word, and in the masked form's kernel
    # (weight-only calls) also fp16 or bf16, eight 16-byte copies; the only TMA load B's
    funcs = sass_loops.functions(sass["sm_90a"])
    got = {tag: body for name, body in funcs.items() for tag in DIRECT if tag in name}
    assert set(got) == set(DIRECT), sorted(n for n in funcs if "direct" in n)
    for tag, body in got.items():
        inner = sass_loops.inner_loops(body)
        assert set(inner) == {_C.narrow_n}, (DIRECT[tag], sorted(inner))
        for _width, (hgmma, _n, r2ur, _text) in inner.items():
            assert hgmma == 8 and r2ur == 0, (DIRECT[tag], hgmma, r2ur)
        assert not re.search(r"\b(LDL|STL)\b", body), f"{DIRECT[tag]}: local memory"
        assert len(re.findall(r"\bLDGSTS\b", body)) == (11 if "masked" in tag else 3), DIRECT[tag]
        assert len(re.findall(r"\bUTMALDG\b", body)) == 1, DIRECT[tag]


def test_sm90_conversions_are_built_without_local_memory(sass):
    # the A conversion: on Params for launches of 17-256 groups (it writes their B maps), on its own small
    # parameter block (ConvertParams) for up to 16 (the call's first launch carries its parameter bytes on
    # the call's path)
    funcs = sass_loops.functions(sass["sm_90a"])
    conv = {name: body for name, body in funcs.items() if "convert_a" in name}
    tags = {"convert_a_smallENS0_13ConvertParams": "up to 16 groups", "convert_aILi64": "64",
            "convert_aILi128": "128", "convert_aILi256": "256"}
    found = {tag for tag in tags for name in conv if tag in name}
    assert found == set(tags) and len(conv) == len(tags), sorted(conv)
    for name, body in conv.items():
        assert not re.search(r"\b(LDL|STL)\b", body), f"{name}: local memory"


def test_skinny_kernels_are_built_with_their_unit_loop_in_registers(sass):
    # kernels/sm90/plan/skinny.h kSkinnyBuilds x kSkinnyLanes: one build per A row count and lanes per B row (8 or
    # 32), each with an innermost loop of fp16 multiply-adds (HFMA2; 2 blocks x 8 per unit and A row, four
    # units per trip) and B's 16-byte loads, and no local memory anywhere (the builds of up to 3 rows are bound
    # to 64 registers for two CTAs per SM)
    # The masked form's builds (skinny_gemm_masked) alike, but for local memory outside the unit loop (its count of
    # rows and counts pointer take registers; the build of 3 rows at 32 lanes, bound to 64 registers, spills a few
    # values outside the loop).
    funcs = sass_loops.functions(sass["sm_90a"])
    for kernel in ("skinny_gemm", "skinny_gemm_masked"):
        builds = {(int(m.group(1)), int(m.group(2))): body for name, body in funcs.items()
                  for m in [re.search(kernel + r"ILi(\d+)ELi(\d+)E", name)] if m}
        assert sorted(builds) == sorted((rows, lanes) for rows in _C.skinny_builds for lanes in (8, 32)), kernel
        _check_skinny_builds(builds, kernel == "skinny_gemm")


def _check_skinny_builds(builds, no_local_memory):
    for (rows, lanes), body in builds.items():
        if no_local_memory:
            assert not re.search(r"\b(LDL|STL)\b", body), f"skinny build of {rows} rows, {lanes} lanes: local memory (a spill)"
        every = sass_loops.loops(body)
        innermost = [ins for start, end, ins in every if not any(s2 > start and e2 < end for s2, e2, _i in every)]
        inner = ["\n".join(ins) for ins in innermost if any("LDG.E.128.CONSTANT" in t for t in ins)]
        assert len(inner) == 1, (rows, lanes, len(inner))
        text = inner[0]
        assert len(re.findall(r"\bHFMA2\b", text)) == 4 * 2 * 8 * rows, (rows, lanes)
        assert len(re.findall(r"\bLDG\.E\.128\.CONSTANT\b", text)) == 4, (rows, lanes)
        assert not re.search(r"\b(LDL|STL)\b", text), f"skinny build of {rows} rows, {lanes} lanes: local memory in its unit loop"
        # the chain of small launches: B's first units are loaded before the barrier that publishes A's rows,
        # the prologue calls no division routine (64-bit divisions), and the trace points are empty here
        first_b, first_bar = body.find("LDG.E.128.CONSTANT"), body.find("BAR.SYNC")
        assert 0 <= first_b < first_bar, f"skinny build of {rows} rows, {lanes} lanes: B's first load after A's barrier"
        assert not re.search(r"\bCALL\b", body), f"skinny build of {rows} rows, {lanes} lanes: a call (a division routine?)"
        assert "GLOBALTIMER" not in body, f"skinny build of {rows} rows, {lanes} lanes: a trace point left in the library"


def test_hand_over_runs_counts_the_loads_before_each_add(tmp_path, capsys):
    # tools/tuning/sass_loops.py --hand-over on a made-up listing: two loads, an add, one load, two adds, a load
    # with no add after it (not a run), and the other loads and adds that do not count
    lines = ["LDG.E.128.STRONG.GPU R8, desc[UR4][R2.64]", "LDG.E.128.STRONG.GPU R12, desc[UR4][R2.64+0x200]",
             "FADD R24, R24, R8", "LDG.E.128.CONSTANT R16, desc[UR4][R4.64]", "LDG.E.128.STRONG.GPU R8, desc[UR4][R2.64+0x400]",
             "FADD R25, R25, R9", "FADD R26, R26, R10", "FADD R27, R27, R11", "LDG.E.128.STRONG.GPU R8, desc[UR4][R6.64]"]
    body = "".join(f"        /*{16 * i:04x}*/                   {t} ;\n" for i, t in enumerate(lines))
    assert sass_loops.hand_over_runs(body) == [2, 1]
    listing = tmp_path / "sass.txt"
    listing.write_text("\tcode for sm_90a\n\t\tFunction : _ZN2fl4sm9016nvfp4_group_gemmILi16ELb0ELb0ELb0ELi0EEEvNS0_6ParamsIXT_EEE\n"
                       + body)
    sass_loops.main([str(listing), "--hand-over"])
    assert "| Li16ELb0ELb0ELb0ELi0E | 2 1 |" in capsys.readouterr().out
