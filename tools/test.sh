#!/usr/bin/env bash
# The test suite from a fresh clone: set up, build, then pytest (CPU tests always; GPU tests with CUDA).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(tools/setup.sh | tail -1)
exec "$PY" -m pytest -q tests -p no:cacheprovider "$@"
