"""The user's tools run exactly as README.md shows them: from the clone's root, `python <script>`, no
PYTHONPATH; `--help` and `--dry-run` (no GPU needed) succeed, and every script README.md names exists."""
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

# a user's environment: nothing points Python at the clone
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
DRY_RUN = ["benchmarks/bench_kernels.py", "benchmarks/bench_launch.py", "benchmarks/bench_scaling.py",
           "benchmarks/bench_serving.py",
           "benchmarks/eval.py", "tools/b200_check.py", "tools/soak.py"]
HELP = DRY_RUN + ["tools/stress_sm90.py"]


def run(*argv):
    return subprocess.run([sys.executable, *argv], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("script", HELP)
def test_help(script):
    out = run(script, "--help")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("usage:"), out.stdout[:200]


@pytest.mark.parametrize("script", DRY_RUN)
def test_dry_run(script):
    out = run(script, "--dry-run")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "dry run" in out.stdout.lower(), out.stdout[-2000:]


def test_every_path_the_readme_names_exists():
    text = open(os.path.join(ROOT, "README.md")).read()
    paths = set(re.findall(r"(?<![\w/.])((?:benchmarks|tools|tests|kernels|docs|fastlaunch)/[\w./-]*\w)", text))
    assert len(paths) >= 10, paths
    missing = sorted(p for p in paths if not os.path.exists(os.path.join(ROOT, p)))
    assert not missing, missing


def test_readme_stays_a_users_document():
    assert os.path.getsize(os.path.join(ROOT, "README.md")) <= 12 * 1024
