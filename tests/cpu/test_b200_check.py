"""tools/b200_check.py: its CPU dry run, and its refusal anywhere but on a GPU of compute capability 10.0."""
import os
import subprocess
import sys

import pytest
import torch

from conftest import ROOT

# as a user runs it: from the clone's root, no PYTHONPATH
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def _run(*args):
    return subprocess.run([sys.executable, "tools/b200_check.py", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env=ENV)


def test_dry_run():
    out = _run("--dry-run")
    assert out.returncode == 0, out.stderr
    assert "dry run: build has sm_90a" in out.stdout and "sm_100a" in out.stdout
    assert "checks 16 shapes and times 4" in out.stdout


@pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.get_device_capability() == (10, 0),
                    reason="on a B200 the check runs instead of refusing")
def test_refuses_off_b200():
    out = _run()
    assert out.returncode == 2
    assert "refused:" in out.stderr and "compute capability 10.0" in out.stderr
