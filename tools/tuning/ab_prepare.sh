#!/usr/bin/env bash
# usage: tools/tuning/ab_prepare.sh [--help] REF[@NAME=VALUE,...] ...
# A/B experiments on a GPU machine in one call (this machine has no GPU): writes the source tree of
# each named commit or branch to .ab/<name>/ (ignored by git; carry it to the GPU machine), where
# tools/tuning/ab_run.sh builds them all beside the working tree and times each.
#   tools/tuning/ab_prepare.sh main v17 f01592a
# REF@NAME=VALUE[,NAME=VALUE...] builds REF's tree with those build defines (setup.py's FASTLAUNCH_NVCC_DEFINES,
# kept in the tree's AB_DEFINES), e.g. main@FL_PLAN_PASS_NS=300 (the experiment defines are in the kernels' headers).
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;; esac
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .ab
for arg in "$@"; do
  ref=${arg%%@*}
  name=$(echo "$arg" | tr -c 'A-Za-z0-9._\n-' '_')
  mkdir -p ".ab/$name"
  git archive "$ref" | tar -x -C ".ab/$name"
  if [[ "$arg" == *@* ]]; then echo "${arg#*@}" | tr ',' ' ' > ".ab/$name/AB_DEFINES"; fi
  echo ".ab/$name <- $(git rev-parse --short "$ref")${arg#"$ref"}"
done
du -sh .ab
