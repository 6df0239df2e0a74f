"""Times the sm90 kernel in each MMA form (FASTLAUNCH_SM90_MMA: rs = B fragments from registers, ss = B
through shared memory) with each compiled tile width forced (FASTLAUNCH_SM90_WIDTH) and with the
planner's choice, on the benchmark shapes, each in its own process, after a correctness check on a few
test shapes. Prints one table (the data behind plan.h's cost model).

python tools/sweep_sm90.py [form:width ...]   (default: rs and ss, each with auto and every compiled width)
"""
import json
import os
import statistics
import subprocess
import sys

WIDTHS = {"auto": "planner", "64": "W=64", "128": "W=128", "192": "W=192", "256": "W=256"}
FORMS = ("rs", "ss")

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
    modes = sys.argv[1:] or [f"{f}:{w}" for f in FORMS for w in WIDTHS]
    rows = []
    for m in modes:
        form, _, width = m.rpartition(":")
        env = dict(os.environ)
        env.pop("FASTLAUNCH_SM90_WIDTH", None)
        env["FASTLAUNCH_SM90_MMA"] = form or "rs"
        if width != "auto":
            env["FASTLAUNCH_SM90_WIDTH"] = width
        out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600)
        if out.returncode:
            print(f"mode {m}: failed\n{out.stderr[-2000:]}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append((m, r))
    print("| form:width | variant | correct | bench 1 | bench 2 | bench 3 | bench 4 | geomean us |")
    print("|---|---|---|---|---|---|---|---|")
    for m, r in rows:
        us = r["us"]
        print(f"| {m} | {WIDTHS.get(m.rpartition(':')[2], '?')} | {r['ok']} | " + " | ".join(f"{u:.1f}" for u in us) +
              f" | {statistics.geometric_mean(us):.1f} |")


if __name__ == "__main__":
    main()
