#!/usr/bin/env bash
# usage: tools/tuning/ncu_sm90.sh [--help] [shape index | --shape GxMxNxK | --masked GxMxNxK [--full] [--bf16]]
# Nsight Compute on the sm90 GEMM for one benchmark shape, G groups of M x N x K, or a masked-form step of G experts
# of max_m M (counts 1 .. M, --full: M; --bf16: bf16 activations) (needs a machine where ncu reads counters); reports
# under $OUT (default out).
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;; esac
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
idx=${1:-0}
if [ "$idx" = --masked ]; then
  idx=m${2:?--masked needs GxMxNxK}; args=(--masked "${idx#m}" "${@:3}")
else
  [ "$idx" = --shape ] && idx=${2:?--shape needs GxMxNxK}
  args=("$idx"); case "$idx" in *x*) args=(--shape "$idx") ;; esac
fi
ncu --clock-control none -k regex:nvfp4 -s 2 -c 1 --set full --import-source no -o "$OUT/ncu_b$idx" -f \
  $PY tools/tuning/profile_one.py "${args[@]}" > "$OUT/ncu_run.log" 2>&1 || { tail -20 "$OUT/ncu_run.log"; exit 1; }
ncu --import "$OUT/ncu_b$idx.ncu-rep" --page details > "$OUT/ncu_details_b$idx.txt" 2>&1
ncu --import "$OUT/ncu_b$idx.ncu-rep" --page source --print-source sass --csv > "$OUT/ncu_source_b$idx.csv" 2>&1
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots|Tensor|Warp Cycles Per Issued|No Eligible|Active Warps|L2 Hit|DRAM Throughput|Stall" "$OUT/ncu_details_b$idx.txt" | head -60
