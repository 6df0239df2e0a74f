"""Score a `custom_kernel` the way the GPU MODE nvfp4_group_gemm evaluation does.

  test mode       every task test shape: fresh input, outputs poisoned with NaN, check against the
                  fp32 reference (|out - ref| <= 1e-3 + 1e-3 |ref|)
  benchmark mode  per benchmark shape: 15 distinct inputs generated up front (the first checked
                  against the reference); each repetition clears the L2, then CUDA events around 15
                  back-to-back calls, one per input; repeated until the standard error of the mean is
                  under 0.1% of the mean (at least 10, at most 200 repetitions, 10 s per shape);
                  reports us per call and the geomean over the shapes

python benchmarks/eval.py [--kernel fastlaunch:fast_launch | path/to/submission.py] [--mode test|benchmark|both]
                     [--json out.json] [--dry-run]
A submission file must define custom_kernel(data). --dry-run (no GPU): loads the kernel and generates
and checks the harness's inputs on the CPU, running nothing.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this clone's package

import torch

from fastlaunch import reference as R
from fastlaunch.shapes import BENCH_SHAPES, TEST_SHAPES, describe


def load_kernel(spec: str):
    if spec.endswith(".py"):
        mod_spec = importlib.util.spec_from_file_location("submission", spec)
        mod = importlib.util.module_from_spec(mod_spec)
        mod_spec.loader.exec_module(mod)
        return mod.custom_kernel
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name or "custom_kernel")


def test_mode(kernel, device="cuda"):
    rows = []
    for i, (g, ms, ns, ks) in enumerate(TEST_SHAPES):
        data = R.generate_input(ms, ns, ks, g, seed=4242 + i, device=device)
        ref = R.ref_kernel(R.clone_outputs(data))
        R.poison(data)
        out = kernel(data)
        torch.cuda.synchronize()
        ok, msg = R.check(out, ref)
        rows.append({"shape": describe((g, ms, ns, ks)), "ok": ok, "message": msg})
        print(f"test {i}: {describe((g, ms, ns, ks)):55s} {'pass' if ok else 'FAIL: ' + msg}")
    return rows


def benchmark_mode(kernel, inputs_per_shape=15, max_reps=200, min_reps=10, budget_s=10.0):
    flush = torch.empty(512 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    rows = []
    for i, (g, ms, ns, ks) in enumerate(BENCH_SHAPES):
        inputs = [R.generate_input(ms, ns, ks, g, seed=9000 + 100 * i + j, device="cuda")
                  for j in range(inputs_per_shape)]
        ref = R.ref_kernel(R.clone_outputs(inputs[0]))
        R.poison(inputs[0])
        ok, msg = R.check(kernel(inputs[0]), ref)
        for d in inputs:  # warm-up
            kernel(d)
        torch.cuda.synchronize()
        per_call = []
        t_end = time.time() + budget_s
        while len(per_call) < max_reps:
            flush.zero_()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for d in inputs:
                kernel(d)
            e.record()
            torch.cuda.synchronize()
            per_call.append(s.elapsed_time(e) * 1e3 / len(inputs))
            if len(per_call) >= min_reps:
                mean = statistics.fmean(per_call)
                sem = statistics.stdev(per_call) / math.sqrt(len(per_call))
                if sem < 1e-3 * mean or time.time() > t_end:
                    break
        mean = statistics.fmean(per_call)
        std = statistics.stdev(per_call)
        rows.append({"shape": describe((g, ms, ns, ks)), "ok": ok, "message": msg, "mean_us": mean, "std_us": std,
                     "reps": len(per_call)})
        print(f"benchmark {i}: {describe((g, ms, ns, ks)):55s} {mean:8.1f} +- {std:.1f} us/call "
              f"({len(per_call)} x {len(inputs)} calls){'' if ok else '  WRONG: ' + msg}")
    gm = statistics.geometric_mean([r["mean_us"] for r in rows])
    print(f"geomean: {gm:.1f} us")
    return rows, gm


def dry_run(kernel) -> int:
    for g, ms, ns, ks in TEST_SHAPES[:2] + BENCH_SHAPES[-1:]:
        data = R.generate_input(ms, ns, ks, g, 0, device="cpu")
        ref = R.ref_kernel(R.clone_outputs(data))
        ok, msg = R.check(R.ref_kernel(data), ref)
        assert ok, msg
    print(f"dry run: loaded {kernel.__module__}.{getattr(kernel, '__name__', kernel)}; inputs and reference "
          "checked on the CPU; no GPU, nothing timed")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kernel", default="fastlaunch:fast_launch")
    p.add_argument("--mode", choices=["test", "benchmark", "both"], default="both")
    p.add_argument("--json")
    p.add_argument("--dry-run", action="store_true")
    args = p.parse_args(argv)
    kernel = load_kernel(args.kernel)
    if args.dry_run or not torch.cuda.is_available():
        return dry_run(kernel)
    result = {"device": torch.cuda.get_device_name(), "kernel": args.kernel}
    ok = True
    if args.mode in ("test", "both"):
        result["test"] = test_mode(kernel)
        ok &= all(r["ok"] for r in result["test"])
    if args.mode in ("benchmark", "both"):
        result["benchmark"], result["geomean_us"] = benchmark_mode(kernel)
        ok &= all(r["ok"] for r in result["benchmark"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
