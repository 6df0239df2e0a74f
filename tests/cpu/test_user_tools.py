"""The user's tools run exactly as README.md shows them: from the clone's root, `python <script>`, no
PYTHONPATH; every script answers `--help` with its usage and does nothing else; `--dry-run` (no GPU needed)
succeeds; every script README.md names exists. (tests/cpu/test_readme_commands.py runs the README's commands
in a fresh shell, in the environment set-up made.)"""
import concurrent.futures
import glob
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT
from tools_support import HAS_VENV, changes, program, readme_commands, snapshot

# a user's environment: nothing points Python at the clone
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
DRY_RUN = ["benchmarks/bench_kernels.py", "benchmarks/bench_launch.py", "benchmarks/bench_moe.py",
           "benchmarks/bench_scaling.py", "benchmarks/bench_serving.py",
           "benchmarks/eval.py", "tools/b200_check.py", "tools/soak.py"]
# Every script of the clone (tools/sanitize/ answers with its own usage line: `cases.py FAMILY | --list`).
SCRIPTS = sorted(os.path.relpath(p, ROOT) for pattern in ("benchmarks/*.py", "tools/*.py", "tools/*.sh",
                                                          "tools/tuning/*.py", "tools/tuning/*.sh", ".ci/run")
                 for p in glob.glob(os.path.join(ROOT, pattern)))


def run(*argv):
    return subprocess.run([sys.executable, *argv], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)


def _help(script):
    cmd = [sys.executable, script] if script.endswith(".py") else [os.path.join(ROOT, script)]
    out = subprocess.run([*cmd, "--help"], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
    return script, out


def test_every_script_answers_help_and_does_nothing_else():
    # The scripts the README shows are run with --help in a fresh shell by test_readme_commands.py where set-up's
    # .venv exists; the others here.
    assert len(SCRIPTS) >= 25, SCRIPTS
    shown = {program(c) for c in readme_commands()} if HAS_VENV else set()
    before = snapshot()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(_help, [s for s in SCRIPTS if s not in shown]))
    bad = [f"{s}: exit {o.returncode}, stdout {o.stdout[:200]!r}, stderr {o.stderr[-500:]!r}" for s, o in results
           if o.returncode != 0 or not o.stdout.startswith("usage:")]
    assert not bad, "\n".join(bad)
    changed = changes(before, snapshot())
    assert not changed, f"--help changed {changed}"


def test_generator_writes_only_when_asked():
    header = os.path.join(ROOT, "kernels", "ptx", "wgmma_rs.cuh")
    before = os.stat(header).st_mtime_ns
    out = run("tools/gen_wgmma.py")
    assert out.returncode == 0 and "up to date" in out.stdout, out.stdout + out.stderr
    out = run("tools/gen_wgmma.py", "--write")  # the same bytes: not rewritten
    assert out.returncode == 0 and "up to date" in out.stdout, out.stdout + out.stderr
    assert os.stat(header).st_mtime_ns == before


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


def test_source_commit_names_the_tree_a_run_measures(tmp_path):
    # the benchmarks' headers: the short commit, "+changes" where tracked files differ from it; None outside git
    from fastlaunch.timing import source_commit
    if subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    got = source_commit(ROOT)
    assert got and re.fullmatch(r"[0-9a-f]{4,40}(\+changes)?", got), got
    assert source_commit(str(tmp_path)) is None
    repo = tmp_path / "r"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["init", "-q"], check=True)
    (repo / "f").write_text("a")
    subprocess.run(git + ["add", "f"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "c"], check=True)
    clean = source_commit(str(repo))
    assert clean and not clean.endswith("+changes")
    (repo / "new").write_text("untracked files are not changes")
    assert source_commit(str(repo)) == clean
    (repo / "f").write_text("b")
    assert source_commit(str(repo)) == clean + "+changes"
