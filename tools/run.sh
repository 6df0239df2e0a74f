#!/usr/bin/env bash
# usage: tools/run.sh [--help] [python -m fastlaunch's options]
# The main job from a fresh clone: set up (tools/setup.sh), build, then `python -m fastlaunch` (options passed on;
# `.venv/bin/python -m fastlaunch --help` lists them).
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;; esac
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(tools/setup.sh | tail -1)
exec "$PY" -m fastlaunch "$@"
