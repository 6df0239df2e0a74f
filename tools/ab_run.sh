#!/usr/bin/env bash
# On a GPU machine: builds the working tree and every tree under .ab/ (tools/ab_prepare.sh) at the
# same time, checks each (GPU tests; AB_TESTS=0: none, AB_TESTS="worktree v17": those trees only), then
# times each with tools/sweep_sm90.py
# (modes: the arguments, default "auto"), one after the other, and prints one table.
#   bash tools/ab_run.sh [mode ...]        e.g. bash tools/ab_run.sh auto cap:128
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
modes=${*:-auto}
trees=("$root")
for d in "$root"/.ab/*/; do [ -d "$d" ] && trees+=("${d%/}"); done
out=${OUT:-/tmp}
for t in "${trees[@]}"; do
  name=$([ "$t" = "$root" ] && echo worktree || basename "$t")
  (cd "$t" && python3 setup.py build_ext --inplace > "$out/build_$name.log" 2>&1; echo "built $name: rc $? C751x $(grep -c C751 "$out/build_$name.log")") &
done
wait
rows=()
for t in "${trees[@]}"; do
  name=$([ "$t" = "$root" ] && echo worktree || basename "$t")
  if [ "${AB_TESTS:-1}" = 1 ] || [[ " ${AB_TESTS:-} " == *" $name "* ]]; then
    echo "tests $name: $(cd "$t" && PYTHONPATH="$t" timeout 300 python3 -m pytest -q -x tests/test_gpu.py -p no:cacheprovider 2>&1 | tail -1)"
  fi
  while IFS= read -r line; do rows+=("| $name $line"); done < <(cd "$t" && PYTHONPATH="$t" timeout 300 python3 tools/sweep_sm90.py $modes 2>&1 | grep -E '^\| (auto|cap:|share:|half:|only:|cublas)')
done
echo "| tree | mode | variant | correct | bench 1 | bench 2 | bench 3 | bench 4 | geomean us |"
echo "|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
