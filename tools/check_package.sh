#!/usr/bin/env bash
# usage: tools/check_package.sh [--help]
# Packaging check (CI runs it after the tests): the sdist carries every source the extension compiles, a
# wheel builds from that sdist alone, requires exactly the torch it was built with, records it, carries the
# licence, leaves the benchmark-only extension out, and installs and imports away from the clone.
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;; esac
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
grep -qx "LICENSE" "$tmp/contents" || { echo "sdist lacks LICENSE"; exit 1; }
! grep -qx "fastlaunch/_build_info.py" "$tmp/contents" || { echo "sdist carries a build's _build_info.py"; exit 1; }
pkg_info=$(tar xzf "$sdist" -O --wildcards '*/PKG-INFO')
grep -qx "Requires-Dist: torch>=2.11" <<< "$pkg_info" || { echo "sdist does not require torch>=2.11"; exit 1; }
echo "sdist: $(basename "$sdist"), $(wc -l < "$tmp/contents") files, every kernel source present, torch>=2.11"
"$PY" -m pip wheel -q --no-build-isolation --no-deps -w "$tmp/wheel" "$sdist" > "$tmp/wheel.log" 2>&1 || { tail -30 "$tmp/wheel.log"; exit 1; }
wheel=$(ls "$tmp"/wheel/fastlaunch-*.whl)
# A wheel from this clone as it is after set-up (objects in build/ from the in-place build), with an earlier
# build's benchmark extension planted in build/lib: the wheel must leave it out.
lib=$("$PY" -c 'import sysconfig, sys; print(f"build/lib.{sysconfig.get_platform()}-{sys.implementation.cache_tag}")')
mkdir -p "$lib/fastlaunch"
planted="$lib/fastlaunch/_bench$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
touch "$planted"
"$PY" -m pip wheel -q --no-build-isolation --no-deps -w "$tmp/clone_wheel" . > "$tmp/clone_wheel.log" 2>&1 || { tail -30 "$tmp/clone_wheel.log"; exit 1; }
[ ! -e "$planted" ] || { echo "a build from the clone kept $planted"; exit 1; }
"$PY" - "$wheel" "$tmp"/clone_wheel/fastlaunch-*.whl <<'PYEOF'
import importlib.metadata, sys, zipfile
import torch
for path in sys.argv[1:]:
    z = zipfile.ZipFile(path)
    names = z.namelist()
    meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode().splitlines()
    info = z.read("fastlaunch/_build_info.py").decode()
    assert any(n.startswith("fastlaunch/_C") and n.endswith(".so") for n in names), names
    assert not any("_bench" in n for n in names), "the wheel ships the benchmark-only extension"
    pin = f"Requires-Dist: torch=={importlib.metadata.version('torch')}"
    assert pin in meta, ("the wheel does not pin the torch it was built with", pin, meta)
    assert f"TORCH_VERSION = {torch.__version__!r}" in info, info
    assert "License-Expression: Apache-2.0" in meta and any(n.endswith("licenses/LICENSE") for n in names), meta
    print(f"wheel: {path.rsplit('/', 1)[1]}, {len(names)} files, {pin.split(': ')[1]}, built with torch "
          f"{torch.__version__} (recorded), licence, no _bench")
PYEOF
"$PY" -m pip install -q --no-deps --target "$tmp/site" "$wheel"
(cd "$tmp" && PYTHONPATH="$tmp/site" "$PY" -c "
import fastlaunch
from fastlaunch import reference as R
from fastlaunch import _build_info
assert fastlaunch.__file__.startswith('$tmp/site'), fastlaunch.__file__
data = R.generate_input([96, 40], [128, 72], [256, 128], 2, 1, device='cpu')
assert fastlaunch.unpack(data) == 2
print('installed wheel imports from', fastlaunch.__file__.rsplit('/', 2)[0], 'and unpacks on the CPU')
")
