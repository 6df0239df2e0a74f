"""The built extension's sm_90a GEMM kernels, from their SASS (cuobjdump; no GPU needed): every variant is
there (16, 64, 128 and 256 groups; half tiles for up to 16; each also for C rows at any alignment; reduced tiles
for up to 16 groups), each with a wgmma main loop per compiled tile
width, TMA loads and no local memory (a register spill in a main loop costs several percent: notes v50c)."""
import re

import fastlaunch._C as _C
from conftest import load_tool

sass_loops = load_tool("sass_loops")

GEMM = "nvfp4_group_gemm"
# template arguments <MAXG, HALF, ANY, RED> as mangled
VARIANTS = {f"ILi{g}ELb{h}ELb{a}ELb0E": f"{g} groups{', half tiles' if h else ''}{', C at any alignment' if a else ''}"
            for g, h in ((16, 0), (64, 0), (128, 0), (256, 0), (16, 1)) for a in (0, 1)}
VARIANTS["ILi16ELb0ELb0ELb1E"] = "16 groups, reduced tiles"


def _gemms(sass):
    funcs = sass_loops.functions(sass["sm_90a"])
    return {tag: body for name, body in funcs.items() if GEMM in name for tag in VARIANTS if tag in name}


def test_every_sm90_gemm_variant_is_built(sass):
    assert set(_gemms(sass)) == set(VARIANTS), sorted(sass_loops.functions(sass["sm_90a"]))


def test_sm90_gemms_have_a_wgmma_loop_per_width_and_no_local_memory(sass):
    widths = _C.tile_widths
    for tag, body in _gemms(sass).items():
        shapes = set(re.findall(r"\bHGMMA\.64x(\d+)x16\.F32\b", body))
        assert shapes == {str(w) for w in widths}, (VARIANTS[tag], shapes)
        # four k16 wgmma per 64-wide K step, two fragment sets (the loop body is unrolled twice)
        assert len(re.findall(r"\bHGMMA\b", body)) == 8 * len(widths), VARIANTS[tag]
        assert not re.search(r"\b(LDL|STL)\b", body), f"{VARIANTS[tag]}: local memory (a spill)"
        assert re.search(r"\bUTMALDG\b", body), f"{VARIANTS[tag]}: no TMA load"


def test_sm90_k_loops_keep_descriptors_in_uniform_registers(sass):
    # tools/sass_loops.py: each variant's innermost wgmma loop per width holds its two unrolled K steps
    # (8 HGMMA) and no R2UR, i.e. its ring position and wgmma descriptors stay in uniform registers (a
    # divergent branch before the loop once cost 9% more instructions per step: v87 in the notes)
    widths = set(_C.tile_widths)
    for tag, body in _gemms(sass).items():
        loops = sass_loops.k_loops(body)
        inner = {}
        for width, hgmma, n, r2ur in loops:  # shortest first
            inner.setdefault(width, (hgmma, n, r2ur))
        assert set(inner) == widths, VARIANTS[tag]
        for width, (hgmma, n, r2ur) in inner.items():
            assert hgmma == 8 and n > hgmma, (VARIANTS[tag], width, hgmma, n)
            assert r2ur == 0, f"{VARIANTS[tag]} W={width}: {r2ur} R2UR in the K loop"


def test_sm90_conversions_are_built_without_local_memory(sass):
    # the A conversion: on Params for launches of 17-256 groups (it writes their B maps), on its own small
    # parameter block (ConvertParams) for up to 16 (v90 in the notes: the call's first launch carries its
    # parameter bytes on the call's path)
    funcs = sass_loops.functions(sass["sm_90a"])
    conv = {name: body for name, body in funcs.items() if "convert_a" in name}
    tags = {"convert_a_smallENS0_13ConvertParams": "up to 16 groups", "convert_aILi64": "64",
            "convert_aILi128": "128", "convert_aILi256": "256"}
    found = {tag for tag in tags for name in conv if tag in name}
    assert found == set(tags) and len(conv) == len(tags), sorted(conv)
    for name, body in conv.items():
        assert not re.search(r"\b(LDL|STL)\b", body), f"{name}: local memory"
