"""Where a small call's device time goes: the task's smallest test shapes and benchmark 4, timed as in
bench_kernels (CUDA events, L2 flushed before each call, median), with the planner's choice, with only the
A conversion and with only the GEMM launched (FASTLAUNCH_SM90_ONLY, each mode in its own process; those
two compute wrong results), beside cuBLAS fp16 on operands of the same sizes (every group, and the first
group alone), the event harness with nothing inside and one and two trivial torch kernels inside.
Correctness of the planner's choice is checked on each shape first (NaN-poisoned output).

python tools/fixed_cost.py [--reps N] [--json out.json]
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sweep_sm90 import mode_env  # noqa: E402

# (label, source, index) into fastlaunch.shapes
SHAPES = [("test 0", "TEST_SHAPES", 0), ("test 1", "TEST_SHAPES", 1), ("test 2", "TEST_SHAPES", 2),
          ("test 7", "TEST_SHAPES", 7), ("bench 4", "BENCH_SHAPES", 3)]
MODES = ["auto", "only:convert", "only:gemm"]

CHILD = r"""
import json, sys, torch, fastlaunch
from fastlaunch import reference as R
from fastlaunch import shapes as S
from fastlaunch.timing import device_us, fp16_gemms, l2_flush_buffer
mode, reps, picks = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
flush = l2_flush_buffer()
out = {"ok": True, "shapes": {}}
for label, src, i in picks:
    g, ms, ns, ks = getattr(S, src)[i]
    sets = [R.generate_input(ms, ns, ks, g, 300 + j, device="cuda") for j in range(3)]
    if mode == "auto":
        ref = R.ref_kernel(R.clone_outputs(sets[0])); R.poison(sets[0])
        out["ok"] &= R.check(fastlaunch.fast_launch(sets[0]), ref)[0]
    fastlaunch.fast_launch(sets[0])
    it = iter(range(1 << 40))
    row = {"fastlaunch": device_us(lambda: fastlaunch.fast_launch(sets[next(it) % 3]), flush, reps)}
    if mode == "auto":
        every, one, _ = fp16_gemms(ms, ns, ks)
        row["cublas"] = device_us(every, flush, reps)
        row["cublas_one"] = device_us(lambda: one(0), flush, reps)
    out["shapes"][label] = row
if mode == "auto":
    z = torch.empty(16, device="cuda")
    out["empty"] = device_us(lambda: None, flush, reps)
    out["one_kernel"] = device_us(lambda: z.zero_(), flush, reps)
    out["two_kernels"] = device_us(lambda: (z.zero_(), z.zero_()), flush, reps)
print(json.dumps(out))
"""


def table(runs):
    """Markdown lines from {mode: child result}; auto's result carries cuBLAS and the baselines."""
    auto = runs["auto"]
    lines = ["| shape | fastlaunch us | A conversion only | GEMM only | cuBLAS fp16, every group | cuBLAS fp16, "
             "first group | fastlaunch / cuBLAS |", "|---|---|---|---|---|---|---|"]
    slower = []
    for label, _src, _i in SHAPES:
        r = auto["shapes"][label]
        conv = runs.get("only:convert", {}).get("shapes", {}).get(label, {}).get("fastlaunch", float("nan"))
        gemm = runs.get("only:gemm", {}).get("shapes", {}).get(label, {}).get("fastlaunch", float("nan"))
        ratio = r["fastlaunch"] / r["cublas"]
        if ratio > 1:
            slower.append(label)
        lines.append(f"| {label} | {r['fastlaunch']:.2f} | {conv:.2f} | {gemm:.2f} | {r['cublas']:.2f} | "
                     f"{r['cublas_one']:.2f} | {ratio:.2f} |")
    lines.append("")
    lines.append(f"event harness alone {auto['empty']:.2f} us; one trivial kernel {auto['one_kernel']:.2f}; "
                 f"two {auto['two_kernels']:.2f}")
    lines.append(f"correct (planner's choice): {auto['ok']}; slower than cuBLAS: {', '.join(slower) or 'none'}")
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=60)
    p.add_argument("--json")
    args = p.parse_args(argv)
    runs = {}
    for mode in MODES:
        res = subprocess.run([sys.executable, "-c", CHILD, mode, str(args.reps), json.dumps(SHAPES)],
                             env=mode_env(mode), capture_output=True, text=True, timeout=600)
        if res.returncode:
            print(f"mode {mode}: failed\n{res.stderr[-2000:]}")
            return 1
        runs[mode] = json.loads(res.stdout.strip().splitlines()[-1])
    print("\n".join(table(runs)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)
    return 0 if runs["auto"]["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
