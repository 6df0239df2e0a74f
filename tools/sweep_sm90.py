"""Times the sm90 kernel with each cap on the tile width forced (FASTLAUNCH_SM90_WCAP=W, a compiled width;
the planner then cuts each group under it), with whole or split tiles forced (FASTLAUNCH_SM90_SHARE) and
with the planner's choice, on the benchmark shapes, each in its own process, after a correctness check on a few
test shapes; then the planner's choice with only the A conversion or only the GEMM launched
(FASTLAUNCH_SM90_ONLY; those results are wrong). Prints one table (the data behind plan.h's cost model).

python tools/sweep_sm90.py [mode ...]   (modes: auto, cap:W, share:whole, share:split, only:convert,
  only:gemm; default: all)
"""
import json
import os
import statistics
import subprocess
import sys

WIDTHS = (128, 192)  # plan.h kWidths (fastlaunch._C.tile_widths); a cap must be one of them
MODES = {"auto": "planner", **{f"cap:{w}": f"widths <= {w}" for w in WIDTHS},
         "share:whole": "whole tiles only", "share:split": "split tiles only",
         "only:convert": "planner, A conversion only", "only:gemm": "planner, GEMM only"}

CHILD = r"""
import json, torch, fastlaunch
from fastlaunch import reference as R
from fastlaunch.shapes import BENCH_SHAPES, TEST_SHAPES
from fastlaunch.timing import device_us, l2_flush_buffer
ok = True
for shape in TEST_SHAPES[3:5] + [(2, [1, 300], [129, 77], [64, 448])]:
    g, ms, ns, ks = shape
    d = R.generate_input(ms, ns, ks, g, 5, device="cuda")
    ref = R.ref_kernel(R.clone_outputs(d)); R.poison(d)
    ok &= R.check(fastlaunch.fast_launch(d), ref)[0]
flush = l2_flush_buffer()
times = []
for i, (g, ms, ns, ks) in enumerate(BENCH_SHAPES):
    sets = [R.generate_input(ms, ns, ks, g, 100 + j, device="cuda") for j in range(2)]
    ref = R.ref_kernel(R.clone_outputs(sets[0])); R.poison(sets[0])
    ok &= R.check(fastlaunch.fast_launch(sets[0]), ref)[0]
    it = iter(range(1 << 30))
    times.append(device_us(lambda: fastlaunch.fast_launch(sets[next(it) % 2]), flush))
print(json.dumps({"ok": bool(ok), "us": times}))
"""


def mode_env(mode):
    """The environment of a child process run in `mode` (auto, cap:W, share:whole|split, only:convert|gemm)."""
    env = dict(os.environ)
    for k in ("FASTLAUNCH_SM90_WCAP", "FASTLAUNCH_SM90_ONLY", "FASTLAUNCH_SM90_SHARE"):
        env.pop(k, None)
    kind, _, value = mode.partition(":")
    var = {"share": "FASTLAUNCH_SM90_SHARE", "only": "FASTLAUNCH_SM90_ONLY", "cap": "FASTLAUNCH_SM90_WCAP"}.get(kind)
    if var:
        env[var] = value
    return env


def main():
    modes = sys.argv[1:] or list(MODES)
    rows = []
    for m in modes:
        env = mode_env(m)
        out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600)
        if out.returncode:
            print(f"mode {m}: failed\n{out.stderr[-2000:]}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append((m, r))
    print("| mode | variant | correct | bench 1 | bench 2 | bench 3 | bench 4 | geomean us |")
    print("|---|---|---|---|---|---|---|---|")
    for m, r in rows:
        us = r["us"]
        print(f"| {m} | {MODES.get(m, '?')} | {r['ok']} | " + " | ".join(f"{u:.1f}" for u in us) +
              f" | {statistics.geometric_mean(us):.1f} |")


if __name__ == "__main__":
    main()
