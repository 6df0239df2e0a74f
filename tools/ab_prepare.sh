#!/usr/bin/env bash
# A/B experiments on a GPU machine in one call (this machine has no GPU): writes the source tree of
# each named commit or branch to .ab/<name>/ (ignored by git; carry it to the GPU machine), where
# tools/ab_run.sh builds them all beside the working tree and times each.
#   tools/ab_prepare.sh main v17 f01592a
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .ab
for ref in "$@"; do
  name=$(echo "$ref" | tr -c 'A-Za-z0-9._\n-' '_')
  mkdir -p ".ab/$name"
  git archive "$ref" | tar -x -C ".ab/$name"
  echo ".ab/$name <- $(git rev-parse --short "$ref")"
done
du -sh .ab
