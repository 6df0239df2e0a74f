#!/usr/bin/env bash
# usage: tools/gpu_check.sh [--help] [diag] [tests] [stress] [main] [bench] [extra] [launch] [serving] [moe] [eval]
#                          [sweep] [sanitize] [soak]
# One call on a GPU machine: build, inspect SASS, then the named steps (default: diag tests stress main bench
# launch serving moe; moe: benchmarks/bench_moe.py, the MoE block against bf16).
# (extra: bench_kernels on the task's test shapes and EXTRA_RANDOM random shapes (default 8, seed
# EXTRA_SEED or a fresh one), against cuBLAS; stress: every forced kind of plan repeated on fresh data,
# tools/stress_sm90.py, STRESS_REPS times each, default 20; sanitize: compute-sanitizer's memcheck, racecheck,
# synccheck and initcheck over every plan family of tools/sanitize/cases.py (SANITIZE_TOOLS, SANITIZE_FAMILIES to
# narrow them), one table of error and hazard counts (also $OUT/sanitize.md), then racecheck over each variant of
# tools/sanitize/racecheck_probe.cu (PROBE_VARIANTS to narrow them), a line each; soak: tools/soak.py for SOAK_MINUTES
# (default 10) with SOAK_THREADS threads (default 3), seed SOAK_SEED or a fresh one, its JSON to $OUT/soak.json)
# JSON and PNG results go to $OUT (default ./out), logs (build, SASS, each step's output) to $LOGS
# (default: $OUT too). Uses the machine's own python3 and torch (PYTHON=<python> for another).
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;; esac
set -u -o pipefail  # a step fails when its command does, not only its tee
OUT=${OUT:-out}
LOGS=${LOGS:-$OUT}
mkdir -p "$OUT" "$LOGS"
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
steps=${*:-diag tests stress main bench launch serving moe}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader || true
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
t0=$(date +%s)
if ! FASTLAUNCH_BUILD_BENCH=1 FASTLAUNCH_PTXAS_VERBOSE=1 $PY setup.py build_ext --inplace > "$LOGS/build.log" 2>&1; then
  grep -n "error" "$LOGS/build.log" | head -30; tail -20 "$LOGS/build.log"; exit 1
fi
echo "build: $(( $(date +%s) - t0 )) s"
echo "ptxas wgmma serialisation notes (C751x): $(grep -c "C751" "$LOGS/build.log")"
grep -E "Compiling entry|registers|spill" "$LOGS/build.log" | sed 's/ptxas info *: //' | sort -u | head -20
so=$(ls fastlaunch/_C*.so | head -1)
if command -v cuobjdump >/dev/null; then
  cuobjdump --dump-sass "$so" > "$LOGS/sass.txt" 2>&1
  echo "SASS: HGMMA $(grep -c HGMMA "$LOGS/sass.txt"), LDL/STL $(grep -cE '\b(LDL|STL)\b' "$LOGS/sass.txt"), UTMALDG $(grep -c UTMALDG "$LOGS/sass.txt")"
fi
# compute-sanitizer over each plan family (its own process: the forcing variables are read at the device's first
# use); a row per family, a column per tool: errors (memcheck, synccheck, initcheck) or hazards (racecheck), and
# whether the calls' outputs were right under it.
# the first hazard of a racecheck log, as "Write access at <function> in <file>:<line> and Read access at ..."
first_race() {
  grep -m1 -A1 "Race reported between" "$1" | sed -E 's/^=+ *//; s/^ *//; s/^Error: Race reported between //;
    s/\(.*\)\+0x[0-9a-f]+//; s#in [^ ]*/#in #; s/ \[[0-9]+ hazards\]//' | tr '\n' ' ' | sed 's/ *$//'
}

sanitize() {
  local tools=${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck} fam env line t n bad=0
  command -v compute-sanitizer >/dev/null || { echo "compute-sanitizer not found"; return 1; }
  { printf '| family |'; for t in $tools; do printf ' %s |' "$t"; done; echo
    printf '|---|'; for t in $tools; do printf -- '---|'; done; echo; } | tee "$OUT/sanitize.md"
  while read -r fam env; do
    [ -n "${SANITIZE_FAMILIES:-}" ] && [[ " $SANITIZE_FAMILIES " != *" $fam "* ]] && continue
    line="| $fam |"
    for t in $tools; do
      env $env timeout 900 compute-sanitizer --tool "$t" --print-limit 5 $PY tools/sanitize/cases.py "$fam" \
        > "$LOGS/sanitize_${fam}_$t.log" 2>&1
      local status=$?
      n=$(grep -oE '(ERROR|RACECHECK) SUMMARY: [0-9]+' "$LOGS/sanitize_${fam}_$t.log" | grep -oE '[0-9]+$' | head -1)
      grep -q "WRONG" "$LOGS/sanitize_${fam}_$t.log" && n="$n, WRONG output"
      [ "$status" = 0 ] || n="${n:-?}, exit $status"
      [ "${n%%,*}" = 0 ] && [ "$status" = 0 ] || bad=1
      line="$line ${n:-?} |"
    done
    echo "$line" | tee -a "$OUT/sanitize.md"
  done < <($PY tools/sanitize/cases.py --list)
  for f in "$LOGS"/sanitize_*_racecheck.log; do  # where racecheck reported: its first hazard, a line per family
    [ -e "$f" ] && grep -q "Race reported" "$f" || continue
    fam=${f#"$LOGS"/sanitize_}; fam=${fam%_racecheck.log}
    echo "racecheck $fam, first hazard: $(first_race "$f")" | tee -a "$OUT/sanitize.md"
  done
  # the stage hand-off alone (tools/sanitize/racecheck_probe.cu): the kernel's protocol (lane0, elected) and
  # variants of the consumers' release, each under racecheck in a process of its own; a line per variant
  if nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I kernels -o /tmp/fl_racecheck_probe \
      tools/sanitize/racecheck_probe.cu > "$LOGS/sanitize_probe_build.log" 2>&1; then
    local v
    for v in ${PROBE_VARIANTS:-lane0 elected all_lanes no_delay proxy_fence}; do
      timeout 600 compute-sanitizer --tool racecheck --print-limit 5 /tmp/fl_racecheck_probe "$v" \
        > "$LOGS/sanitize_probe_$v.log" 2>&1
      local status=$?
      n=$(grep -oE 'RACECHECK SUMMARY: [0-9]+' "$LOGS/sanitize_probe_$v.log" | grep -oE '[0-9]+$' | head -1)
      line="racecheck probe $v: ${n:-?} hazards; $(grep -E "^probe $v:" "$LOGS/sanitize_probe_$v.log" | cut -d' ' -f3-) (exit $status)"
      grep -q "Race reported" "$LOGS/sanitize_probe_$v.log" && line="$line; first hazard: $(first_race "$LOGS/sanitize_probe_$v.log")"
      echo "$line" | tee -a "$OUT/sanitize.md"
      grep -q "^probe $v: ok" "$LOGS/sanitize_probe_$v.log" || bad=1
    done
  else
    echo "racecheck probe: build failed ($LOGS/sanitize_probe_build.log)"; bad=1
  fi
  return $bad
}

rc=0
for s in $steps; do
  echo "=== $s"
  case $s in
    diag) timeout 300 $PY tools/diag_sm90.py 2>&1 | tee "$LOGS/diag.log" || rc=1 ;;
    tests) timeout 900 $PY -m pytest -q --maxfail=5 -rf tests -p no:cacheprovider 2>&1 | tail -40 | tee "$LOGS/tests.log" || rc=1 ;;
    stress) timeout 900 $PY tools/stress_sm90.py --reps "${STRESS_REPS:-20}" 2>&1 | tee "$LOGS/stress.log" | tail -40 || rc=1 ;;
    main) timeout 600 $PY -m fastlaunch --json "$OUT/main.json" 2>&1 | tee "$LOGS/main.log" || rc=1 ;;
    bench) [ -f benchmarks/bench_kernels.py ] && { timeout 900 $PY benchmarks/bench_kernels.py --json "$OUT/bench_kernels.json" --png "$OUT/bench_kernels.png" 2>&1 | tee "$LOGS/bench.log" || rc=1; } ;;
    extra) timeout 900 $PY benchmarks/bench_kernels.py --only --tests --random "${EXTRA_RANDOM:-8}" ${EXTRA_SEED:+--seed "$EXTRA_SEED"} --json "$OUT/bench_extra.json" 2>&1 | tee "$LOGS/extra.log" || rc=1 ;;
    eval) timeout 900 $PY benchmarks/eval.py --json "$OUT/eval.json" 2>&1 | tee "$LOGS/eval.log" || rc=1 ;;
    sweep) timeout 900 $PY tools/tuning/sweep_sm90.py 2>&1 | tee "$LOGS/sweep.log" || rc=1 ;;
    launch) [ -f benchmarks/bench_launch.py ] && { timeout 600 $PY benchmarks/bench_launch.py --json "$OUT/bench_launch.json" --png "$OUT/bench_launch.png" 2>&1 | tee "$LOGS/launch.log" || rc=1; } ;;
    serving) [ -f benchmarks/bench_serving.py ] && { timeout 900 $PY benchmarks/bench_serving.py --json "$OUT/bench_serving.json" --png "$OUT/bench_serving.png" 2>&1 | tee "$LOGS/serving.log" || rc=1; } ;;
    moe) timeout 900 $PY benchmarks/bench_moe.py --json "$OUT/bench_moe.json" 2>&1 | tee "$LOGS/moe.log" || rc=1 ;;
    sanitize) sanitize || rc=1 ;;
    soak) timeout $(( ${SOAK_MINUTES:-10} * 60 + 600 )) $PY tools/soak.py --minutes "${SOAK_MINUTES:-10}" \
            --threads "${SOAK_THREADS:-3}" ${SOAK_SEED:+--seed "$SOAK_SEED"} --json "$OUT/soak.json" 2>&1 \
            | tee "$LOGS/soak.log" || rc=1 ;;
    *) echo "unknown step: $s (tools/gpu_check.sh --help lists them)"; rc=1 ;;
  esac
done
exit $rc
