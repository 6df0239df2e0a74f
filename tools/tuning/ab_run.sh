#!/usr/bin/env bash
# usage: tools/tuning/ab_run.sh [--help] [mode ...]
# On a GPU machine: builds the working tree and every tree under .ab/ (tools/tuning/ab_prepare.sh) at the
# same time, checks each (GPU tests; AB_TESTS=0: none, AB_TESTS="worktree v17": those trees only), then
# times each with tools/tuning/sweep_sm90.py (modes: the arguments, default "auto") on each shape set of
# AB_SETS (default "bench"; e.g. "bench tests"), AB_ROUNDS times (default 1), the trees one after the
# other in each round and in reverse order every other round (so no tree always runs first), and
# prints one table per set.
#   bash tools/tuning/ab_run.sh [mode ...]        e.g. AB_ROUNDS=3 AB_SETS="bench tests" bash tools/tuning/ab_run.sh auto
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;; esac
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
modes=${*:-auto}
rounds=${AB_ROUNDS:-1}
sets=${AB_SETS:-bench}
trees=("$root")
for d in "$root"/.ab/*/; do [ -d "$d" ] && trees+=("${d%/}"); done
out=${OUT:-/tmp}
tree_name() { [ "$1" = "$root" ] && echo worktree || basename "$1"; }
for t in "${trees[@]}"; do
  name=$(tree_name "$t")
  defs=$(cat "$t/AB_DEFINES" 2>/dev/null || true)  # tools/tuning/ab_prepare.sh REF@DEFINES
  (cd "$t" && FASTLAUNCH_NVCC_DEFINES="$defs" python3 setup.py build_ext --inplace > "$out/build_$name.log" 2>&1
   echo "built $name${defs:+ ($defs)}: rc $? C751x $(grep -c C751 "$out/build_$name.log")") &
done
wait
for t in "${trees[@]}"; do
  name=$(tree_name "$t")
  if [ "${AB_TESTS:-1}" = 1 ] || [[ " ${AB_TESTS:-} " == *" $name "* ]]; then
    echo "tests $name: $(cd "$t" && PYTHONPATH="$t" timeout 300 python3 -m pytest -q -x tests/gpu/test_gpu.py -p no:cacheprovider 2>&1 | tail -1)"
  fi
done
for set in $sets; do
  header="" rows=()
  for ((r = 1; r <= rounds; r++)); do
    order=("${trees[@]}")
    if ((r % 2 == 0)); then
      order=()
      for ((i = ${#trees[@]} - 1; i >= 0; i--)); do order+=("${trees[i]}"); done
    fi
    for t in "${order[@]}"; do
      name=$(tree_name "$t")
      while IFS= read -r line; do
        if [[ "$line" == "| mode |"* ]]; then header=${header:-$line}
        elif [[ "$line" =~ ^\|\ (auto|cap:|share:|half:|narrow:|only:|cublas) ]]; then rows+=("| $name r$r $line")
        fi
      done < <(cd "$t" && PYTHONPATH="$t" timeout 300 python3 tools/tuning/sweep_sm90.py --set "$set" $modes 2>&1)
    done
  done
  echo
  echo "set $set:"
  if [ -n "$header" ]; then
    echo "| tree round |${header#|}"
    echo "|$(echo "$header" | sed 's/[^|]//g; s/|/---|/g')"
  fi
  printf '%s\n' "${rows[@]}"
done
