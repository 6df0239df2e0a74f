#!/usr/bin/env bash
# The main job from a fresh clone: set up, build, then `python -m fastlaunch` (args are passed on).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(tools/setup.sh | tail -1)
exec "$PY" -m fastlaunch "$@"
