#!/usr/bin/env bash
# Packaging check (CI runs it after the tests): the sdist carries every source the extension compiles, a
# wheel builds from that sdist alone, declares torch, leaves the benchmark-only extension out, and installs
# and imports away from the clone.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(tools/setup.sh | tail -1)
case $PY in */*) PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")" ;; esac  # absolute: a step runs elsewhere
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PY" -m build --sdist --no-isolation --outdir "$tmp/dist" . > "$tmp/sdist.log" 2>&1 || { tail -20 "$tmp/sdist.log"; exit 1; }
sdist=$(ls "$tmp"/dist/fastlaunch-*.tar.gz)
tar tzf "$sdist" | sed 's@^[^/]*/@@' > "$tmp/contents"
missing=0
for f in $(git ls-files kernels fastlaunch benchmarks/launch_variants setup.py pyproject.toml README.md | grep -vE '\.py[i]?$|py\.typed$'); do
  grep -qx "$f" "$tmp/contents" || { echo "sdist lacks $f"; missing=1; }
done
[ "$missing" = 0 ] || exit 1
echo "sdist: $(basename "$sdist"), $(wc -l < "$tmp/contents") files, every kernel source present"
"$PY" -m pip wheel -q --no-build-isolation --no-deps -w "$tmp/wheel" "$sdist" > "$tmp/wheel.log" 2>&1 || { tail -30 "$tmp/wheel.log"; exit 1; }
wheel=$(ls "$tmp"/wheel/fastlaunch-*.whl)
"$PY" - "$wheel" <<'PYEOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
meta = zipfile.ZipFile(sys.argv[1]).read(next(n for n in names if n.endswith("METADATA"))).decode()
assert any(n.startswith("fastlaunch/_C") and n.endswith(".so") for n in names), names
assert not any("_bench" in n for n in names), "the wheel ships the benchmark-only extension"
assert any(l.startswith("Requires-Dist: torch") for l in meta.splitlines()), "the wheel does not declare torch"
print(f"wheel: {sys.argv[1].rsplit('/', 1)[1]}, {len(names)} files, declares torch, no _bench")
PYEOF
"$PY" -m pip install -q --no-deps --target "$tmp/site" "$wheel"
(cd "$tmp" && PYTHONPATH="$tmp/site" "$PY" -c "
import fastlaunch
from fastlaunch import reference as R
assert fastlaunch.__file__.startswith('$tmp/site'), fastlaunch.__file__
data = R.generate_input([96, 40], [128, 72], [256, 128], 2, 1, device='cpu')
assert fastlaunch.unpack(data) == 2
print('installed wheel imports from', fastlaunch.__file__.rsplit('/', 2)[0], 'and unpacks on the CPU')
")
