"""tools/b200_check.py: its CPU dry run, its refusal anywhere but on a GPU of compute capability 10.0, and its report
of the sm_100a kernel's self-check, first (with the device's set-up replaced by a stand-in: no B200 here)."""
import json
import os
import subprocess
import sys

import pytest
import torch

from conftest import ROOT, load_tool

# as a user runs it: from the clone's root, no PYTHONPATH
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def _run(*args):
    return subprocess.run([sys.executable, "tools/b200_check.py", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env=ENV)


def test_dry_run():
    out = _run("--dry-run")
    assert out.returncode == 0, out.stderr
    assert "dry run: build has sm_90a" in out.stdout and "sm_100a" in out.stdout
    assert "reports the kernel's self-check, then checks 16 shapes and times 4" in out.stdout


@pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.get_device_capability() == (10, 0),
                    reason="on a B200 the check runs instead of refusing")
def test_refuses_off_b200():
    out = _run()
    assert out.returncode == 2
    assert "refused:" in out.stderr and "compute capability 10.0" in out.stderr


FAILED = ("the sm_100a kernel failed its self-check on cuda:0: launch 2 of 4 (the persistent kernel, 16-group parameter "
          "block, 1 CTA for 18 tiles), group 1 (M=40, N=257, K=192): C[3, 17] = 2.5 (fp16 0x4100), expected 14.75; ...")


def test_a_failed_self_check_is_reported_first_and_stops_the_run(tmp_path, capsys):
    tool = load_tool("b200_check")
    asked = []

    def setup(device):
        asked.append(device)
        raise RuntimeError(FAILED)

    out = tmp_path / "out.json"
    assert tool.run(str(out), setup=setup, device=0) == 1
    assert asked == [0]
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "sm_100a self-check on cuda:0: FAIL: " + FAILED
    assert lines[1:] == ["every call on this device raises that error: no shape was checked or timed"]
    assert json.loads(out.read_text()) == {"self_check": {"ok": False, "message": FAILED}, "rows": []}


def test_self_check_outcomes():
    tool = load_tool("b200_check")
    assert tool.self_check(3, setup=lambda d: f"passed on cuda:{d}") == (True, "passed on cuda:3")

    def bad_setting(device):
        raise ValueError("FASTLAUNCH_SM100_SELF_CHECK=2: expected 0 (skip the sm_100a kernel's self-check) or 1")

    assert tool.self_check(0, setup=bad_setting) == (
        False, "FASTLAUNCH_SM100_SELF_CHECK=2: expected 0 (skip the sm_100a kernel's self-check) or 1")
