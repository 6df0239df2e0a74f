"""README.md's commands, as typed, in a fresh shell after the two set-up commands: no PYTHONPATH, no inherited
environment, only `source .venv/bin/activate` as the README says. Each command runs with `--help` added (its
usage, no work: the main job, the tests and the GPU benchmarks are not run again here), which still shows that
the interpreter, torch, fastlaunch and the script's path all resolve as typed. A script of the user's own, in a
directory outside the clone, imports fastlaunch; a test run prints its seed with -q.

Uses the .venv that tools/setup.sh made (CI: tools/test.sh made it moments before); skipped where there is none
(FASTLAUNCH_PYTHON set-ups, or pytest run by hand with another interpreter)."""
import concurrent.futures
import os
import shlex
import subprocess

import pytest

from conftest import ROOT
from tools_support import HAS_VENV, NOT_RUN, VENV, changes, program, readme_commands, snapshot

pytestmark = pytest.mark.skipif(not HAS_VENV, reason="no .venv in the clone (tools/setup.sh makes it)")


def fresh_shell(command, cwd=ROOT):
    """`command` in a new bash with nothing inherited but HOME and a plain PATH, after the README's activation."""
    script = f"source {shlex.quote(os.path.join(VENV, 'bin', 'activate'))} && cd {shlex.quote(cwd)} && {command}"
    env = {"HOME": os.environ.get("HOME", "/root"), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    return subprocess.run(["bash", "--noprofile", "--norc", "-c", script], env=env, capture_output=True, text=True,
                          timeout=600)


def test_readme_commands_run_as_typed_in_a_fresh_shell():
    commands = readme_commands()
    for expected in ("./tools/run.sh", "./tools/test.sh", "python benchmarks/bench_kernels.py",
                     "python benchmarks/bench_serving.py", "python tools/b200_check.py", "pip install --no-build-isolation ."):
        assert expected in commands, (expected, commands)
    to_run, seen = [], set()
    for c in commands:  # one command per program (bench_kernels.py and bench_kernels.py --png run the same code)
        if not c.startswith(NOT_RUN) and program(c) not in seen:
            seen.add(program(c))
            to_run.append(c if "--help" in c.split() else f"{c} --help")
    before = snapshot()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(fresh_shell, to_run))
    bad = [f"{c}: exit {r.returncode}\n{r.stdout[-300:]}{r.stderr[-1500:]}" for c, r in zip(to_run, results)
           if r.returncode != 0 or "usage:" not in r.stdout[:300]]
    assert not bad, "\n\n".join(bad)
    assert not changes(before, snapshot()), "--help changed files"


def test_a_users_own_script_finds_torch_and_fastlaunch(tmp_path):
    (tmp_path / "mine.py").write_text(
        "import torch, fastlaunch\n"
        "from fastlaunch import reference as R\n"
        "data = R.generate_input([8], [16], [64], 1, 1, device='cpu')\n"
        "print(torch.__version__, fastlaunch.unpack(data), fastlaunch.__file__)\n")
    r = fresh_shell("python mine.py", cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[1] == "1" and r.stdout.split()[2].startswith(ROOT), r.stdout


def test_a_quiet_test_run_prints_its_seed():
    r = fresh_shell("FASTLAUNCH_TEST_SEED=4242 python -m pytest -q -p no:cacheprovider tests/cpu/test_recent.py")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "FASTLAUNCH_TEST_SEED=4242" in r.stdout, r.stdout[-2000:]
