#!/usr/bin/env bash
# Set-up on a fresh machine: a Python with torch, then the extension built in place.
# Uses python3 as it is when it already has torch (e.g. a GPU machine's own torch); otherwise makes
# .venv and installs requirements.txt there. Prints the interpreter to use on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${FASTLAUNCH_PYTHON:-}" ]; then
  if python3 -c "import torch, setuptools" >/dev/null 2>&1 && [ -z "${FASTLAUNCH_VENV:-}" ]; then
    FASTLAUNCH_PYTHON=python3
  else
    if [ ! -x .venv/bin/python ]; then
      python3 -m venv .venv
    fi
    .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt >&2
    FASTLAUNCH_PYTHON=.venv/bin/python
  fi
fi
# In place, with the benchmark extension (benchmarks/bench_launch.py times its launch paths).
if ! FASTLAUNCH_BUILD_BENCH=1 "$FASTLAUNCH_PYTHON" setup.py build_ext --inplace > build.log 2>&1; then
  grep -n "error" build.log >&2 || true
  tail -20 build.log >&2
  echo "build failed; full log in build.log" >&2
  exit 1
fi
echo "$FASTLAUNCH_PYTHON"
