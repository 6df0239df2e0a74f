"""Fixed cost against per-K-step cost of the sm90 kernels: device us per call for one shape at several K,
for the whole call and for each of its two kernels alone (FASTLAUNCH_SM90_ONLY; those results are
wrong, timing only), with a least-squares line us = a + b * (K / 64). Also the harness floor: the same
event timing around one trivial kernel.

python tools/tuning/ksweep_sm90.py [--m 128,384] [--n 4096] [--k 64,256,768,1536,3072]
"""
import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, sys, torch, fastlaunch
from fastlaunch import reference as R
from fastlaunch.timing import device_us, l2_flush_buffer
ms, n, ks = json.loads(sys.argv[1])
flush = l2_flush_buffer()
tiny = torch.zeros(1, device="cuda")
out = {"floor": device_us(lambda: tiny.add_(1), flush, 50), "us": []}
for k in ks:
    sets = [R.generate_input(ms, [n] * len(ms), [k] * len(ms), len(ms), 7 + j, device="cuda") for j in range(2)]
    it = iter(range(1 << 30))
    out["us"].append(device_us(lambda: fastlaunch.fast_launch(sets[next(it) % 2]), flush, 40))
print(json.dumps(out))
"""


def fit(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", default="128,384")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", default="64,256,768,1536,3072")
    ap.add_argument("--cap", default=None, help="FASTLAUNCH_SM90_WCAP (widest tile) for every mode")
    a = ap.parse_args()
    ms = [int(x) for x in a.m.split(",")]
    ks = [int(x) for x in a.k.split(",")]
    rows = []
    for mode in ("whole", "gemm", "convert"):
        env = dict(os.environ)
        env.pop("FASTLAUNCH_SM90_ONLY", None)
        if a.cap:
            env["FASTLAUNCH_SM90_WCAP"] = a.cap
        if mode != "whole":
            env["FASTLAUNCH_SM90_ONLY"] = mode
        r = subprocess.run([sys.executable, "-c", CHILD, json.dumps([ms, a.n, ks])], env=env, capture_output=True,
                           text=True, timeout=600)
        if r.returncode:
            print(f"{mode}: failed\n{r.stderr[-2000:]}")
            continue
        rows.append((mode, json.loads(r.stdout.strip().splitlines()[-1])))
    print(f"M={a.m} N={a.n}; device us per call (L2 flushed); fit us = a + b * K/64")
    print("| mode | harness floor | " + " | ".join(f"K={k}" for k in ks) + " | a (us) | b (ns per K step) |")
    print("|---|---|" + "---|" * len(ks) + "---|---|")
    for mode, r in rows:
        a0, b0 = fit([k / 64 for k in ks], r["us"])
        print(f"| {mode} | {r['floor']:.1f} | " + " | ".join(f"{u:.1f}" for u in r["us"]) + f" | {a0:.1f} | {b0 * 1e3:.0f} |")


if __name__ == "__main__":
    main()
