#!/usr/bin/env bash
# usage: tools/test.sh [--help] [pytest's options]
# The test suite from a fresh clone: set up (tools/setup.sh), build, then pytest -q tests (CPU tests always; GPU
# tests with CUDA), options passed on, e.g. tools/test.sh -m "not gpu" -k ops.
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;; esac
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(tools/setup.sh | tail -1)
exec "$PY" -m pytest -q tests -p no:cacheprovider "$@"
