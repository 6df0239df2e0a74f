"""Times the sm90 kernel with each compiled tile width forced (FASTLAUNCH_SM90_WIDTH) and with the
planner's choice, on the benchmark shapes, each in its own process, after a correctness check on a few
test shapes. Prints one table (the data behind plan.h's cost model).

python tools/sweep_sm90.py [width ...]      (default: auto and every compiled width)
python tools/sweep_sm90.py --diag           (W = 128 and 256, each whole and with parts of the K step
                                             left out: FASTLAUNCH_SM90_DIAG; those results are wrong)
"""
import json
import os
import statistics
import subprocess
import sys

MODES = {"auto": "planner", "64": "W=64", "128": "W=128", "192": "W=192", "256": "W=256"}
DIAGS = {"0": "whole", "1": "no A conversion", "2": "no B dequantisation", "3": "neither conversion",
         "4": "no wgmma", "8": "no wait for the converted A"}

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


def main():
    args = sys.argv[1:]
    if args == ["--diag"]:
        modes = [f"{w}:{d}" for w in ("128", "256") for d in DIAGS]
    else:
        modes = args or list(MODES)
    rows = []
    for m in modes:
        width, _, diag = m.partition(":")
        env = dict(os.environ)
        env.pop("FASTLAUNCH_SM90_WIDTH", None)
        env.pop("FASTLAUNCH_SM90_DIAG", None)
        if width != "auto":
            env["FASTLAUNCH_SM90_WIDTH"] = width
        if diag not in ("", "0"):
            env["FASTLAUNCH_SM90_DIAG"] = diag
        out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600)
        if out.returncode:
            print(f"mode {m}: failed\n{out.stderr[-2000:]}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append((m, r))
    print("| width | variant | correct | bench 1 | bench 2 | bench 3 | bench 4 | geomean us |")
    print("|---|---|---|---|---|---|---|---|")
    for m, r in rows:
        us = r["us"]
        width, _, diag = m.partition(":")
        variant = MODES.get(width, "?") + (f", {DIAGS.get(diag, '?')}" if diag else "")
        print(f"| {m} | {variant} | {r['ok']} | " + " | ".join(f"{u:.1f}" for u in us) +
              f" | {statistics.geometric_mean(us):.1f} |")


if __name__ == "__main__":
    main()
