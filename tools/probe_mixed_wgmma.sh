#!/usr/bin/env bash
# Compiles tools/probe_mixed_wgmma.cu for sm_90a both ways and reports ptxas's wgmma serialisation
# notes (C751x) and the wgmma waits in the SASS. No GPU needed. Usage: tools/probe_mixed_wgmma.sh
set -eu
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
objdump=$(command -v cuobjdump || python3 -c "import os, nvidia.cu13 as m; print(os.path.join(m.__path__[0], 'bin', 'cuobjdump'))")
for shared in 0 1 2; do
  log=$(nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I kernels -DSHARED_ACC=$shared -Xptxas -v \
        -c tools/probe_mixed_wgmma.cu -o "$tmp/p$shared.o" 2>&1)
  sass=$("$objdump" --dump-sass "$tmp/p$shared.o")
  echo "SHARED_ACC=$shared: C751x notes $(grep -c 'C751' <<<"$log" || true)," \
       "wgmma waits (WARPGROUP.DEPBAR) $(grep -c 'WARPGROUP.DEPBAR' <<<"$sass" || true)," \
       "HGMMA widths: $(grep -oE 'HGMMA\.64x[0-9]+x16' <<<"$sass" | sort -u | tr '\n' ' ')"
  grep 'C751' <<<"$log" | sed 's/.*(C751/  (C751/' | cut -c1-140 || true
done
rm -rf "$tmp"
