"""tools/sanitize/cases.py: each family's shapes run the plan kind the family is named for (checked through the
planner on the CPU with the same settings its variables force), and the racecheck probe builds for sm_90a."""
import os
import re
import subprocess

import pytest

import fastlaunch._C as C

from conftest import ROOT, load_tool, nvcc_or_skip

cases = load_tool("cases")
SMS = 132


def _sizes(shape):
    g, ms, ns, ks = shape
    return list(zip(ms, ns, ks))


def _plan(family, **settings):
    _env, shapes = cases.FAMILIES[family]
    args = [settings.get(k, 0) for k in ("share", "cap", "parts", "half", "narrow", "mid")]
    return [(_sizes(s), C.plan(_sizes(s), SMS, *args), C.mma_n(_sizes(s), SMS, *args)) for s in shapes]


def test_each_family_runs_its_kind():
    for sizes, (_groups, starts, _est, _rows, reduce, _wave), _mma in _plan("split", share=2):
        assert any(k > 0 for _t, k in starts), sizes  # a CTA starts inside a tile
    for sizes, (_groups, starts, _est, _rows, reduce, _wave), _mma in _plan("whole", share=1):
        assert all(k == 0 for _t, k in starts) and reduce == 0, sizes
    for sizes, plan, _mma in _plan("wave", share=4):
        assert plan[5] and len(plan[1]) - 1 < sum(w[1] * w[2] for w in plan[0]), sizes  # a CTA takes 2+ tiles
    for sizes, plan, _mma in _plan("reduce", share=3):
        assert plan[4] > 0, sizes
    for sizes, plan, _mma in _plan("half", half=1):
        assert plan[3] == 64, sizes  # B rows per tile: half tiles
    for sizes, _plan_, mma in _plan("narrow", narrow=1, half=2):
        assert C.narrow_n in mma, (sizes, mma)
    for sizes, _plan_, mma in _plan("mid", mid=1, cap=192, half=2):
        assert C.mid_n in mma, (sizes, mma)
    for family, split in (("skinny", None), ("skinny-split", 2)):
        for shape in cases.FAMILIES[family][1]:
            sk = C.skinny(_sizes(shape), SMS)
            assert sk is not None, (family, shape)
    assert any(n % 8 for s in cases.FAMILIES["unaligned"][1] for n in s[2])  # C rows off 16 bytes
    assert cases.FAMILIES["groups-70"][1][0][0] > 64  # the 128-group parameter block


def test_list_and_refusals(capsys):
    assert cases.main(["cases.py", "--list"]) == 0
    listed = capsys.readouterr().out.split("\n")
    assert [line.split(" ")[0] for line in listed if line] == list(cases.FAMILIES)
    assert cases.main(["cases.py", "nonesuch"]) == 2
    os.environ.pop("FASTLAUNCH_SM90_SHARE", None)
    assert cases.main(["cases.py", "whole"]) == 2  # its variable not set: refused, nothing run
    assert "set FASTLAUNCH_SM90_SHARE=whole" in capsys.readouterr().out


def test_racecheck_probe_builds(tmp_path):
    nvcc = nvcc_or_skip()
    subprocess.run([nvcc, "-O3", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-I",
                    os.path.join(ROOT, "kernels"),
                    os.path.join(ROOT, "tools", "sanitize", "racecheck_probe.cu"), "-o", str(tmp_path / "probe")],
                   check=True)
    assert (tmp_path / "probe").stat().st_size > 0


def test_gpu_check_runs_every_probe_variant():
    # tools/gpu_check.sh sanitize runs the probe once per variant the probe knows, the kernel's own first
    src = open(os.path.join(ROOT, "tools", "sanitize", "racecheck_probe.cu")).read()
    names = re.search(r"kVariantNames\[kNumVariants\] = \{([^}]*)\}", src).group(1)
    variants = re.findall(r'"(\w+)"', names)
    script = open(os.path.join(ROOT, "tools", "gpu_check.sh")).read()
    ran = re.search(r"PROBE_VARIANTS:-([\w ]+)\}", script).group(1).split()
    assert ran == variants and ran[0] == "lane0", (ran, variants)
    assert f"[{'|'.join(variants)}|all]" in src  # the usage line names them all
