#!/usr/bin/env bash
# usage: tools/setup.sh [--help]
# Set-up on a fresh machine: .venv, a Python with torch; the extension built in place; the clone put on .venv's
# path. Then `.venv/bin/python` (or `python` after `source .venv/bin/activate`) finds torch and fastlaunch from
# any directory, the user's own scripts included. Prints the interpreter to use on its last line.
# .venv: where python3 already has torch (e.g. a GPU machine's own CUDA torch), .venv sees python3's packages and
# gets nothing installed but setuptools>=77 where python3's is older; otherwise it gets requirements.txt.
# FASTLAUNCH_PYTHON=<python>: that interpreter as it is (no .venv, nothing installed or added to its path).
# FASTLAUNCH_VENV=1: .venv from requirements.txt even where python3 has torch.
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;; esac
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${FASTLAUNCH_PYTHON:-}" ]; then
  PY=$FASTLAUNCH_PYTHON
else
  if [ ! -x .venv/bin/python ]; then
    if [ -z "${FASTLAUNCH_VENV:-}" ] && python3 -c "import torch, setuptools" >/dev/null 2>&1; then
      python3 -m venv --system-site-packages .venv
      # python3's own packages too where python3 is itself a virtual environment (--system-site-packages reaches
      # only its base installation's)
      python3 -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' \
        > "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/_fastlaunch_base.pth"
    else
      python3 -m venv .venv
    fi
  fi
  if grep -q "include-system-site-packages = true" .venv/pyvenv.cfg; then
    .venv/bin/python -c 'import setuptools, sys; sys.exit(int(setuptools.__version__.split(".")[0]) < 77)' ||
      .venv/bin/python -m pip install -q --disable-pip-version-check "setuptools>=77" >&2
  else
    .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt >&2
  fi
  # the clone on .venv's path: `import fastlaunch` finds the in-place build from any directory
  pwd > "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/fastlaunch_clone.pth"
  PY=.venv/bin/python
fi
# In place, with the benchmark extension (benchmarks/bench_launch.py times its launch paths).
if ! FASTLAUNCH_BUILD_BENCH=1 "$PY" setup.py build_ext --inplace > build.log 2>&1; then
  grep -n "error" build.log >&2 || true
  tail -20 build.log >&2
  echo "build failed; full log in build.log" >&2
  exit 1
fi
echo "$PY"
