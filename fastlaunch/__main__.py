"""python -m fastlaunch: the main job.

With a CUDA GPU: checks fast_launch on the task's 10 test shapes against the fp32 reference (outputs
poisoned with NaN first) and times the 4 benchmark shapes: device us per call (CUDA events, L2 flushed
before each call, median), host us per call (median over batches), and the ratio to the fp32 reference.
Without a GPU: says so and times the host path (unpack + checks) on CPU tensors.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch

import fastlaunch
from fastlaunch import reference as R
from fastlaunch.shapes import BENCH_SHAPES, TEST_SHAPES, describe, flops, nvfp4_bytes
from fastlaunch.timing import device_us, host_ns


def run_gpu(args) -> int:
    dev = torch.device("cuda")
    name = torch.cuda.get_device_name(dev)
    print(f"device: {name}, torch {torch.__version__}, fastlaunch kernels for {fastlaunch.supported_archs}")
    failures = 0
    rows = []
    for i, shape in enumerate(TEST_SHAPES):
        g, ms, ns, ks = shape
        ok, msg = R.run_checked(fastlaunch.fast_launch, R.generate_input(ms, ns, ks, g, seed=1000 + i, device=dev))
        failures += not ok
        rows.append({"shape": describe(shape), "ok": ok, "message": msg})
        print(f"test {i}: {describe(shape):55s} {'PASS' if ok else 'FAIL ' + msg}")

    flush = torch.empty(512 * 1024 * 1024, dtype=torch.uint8, device=dev)
    bench = []
    for i, shape in enumerate(BENCH_SHAPES):
        g, ms, ns, ks = shape
        sets = [R.generate_input(ms, ns, ks, g, seed=2000 + 10 * i + j, device=dev) for j in range(3)]
        ref = R.ref_kernel(R.clone_outputs(sets[0]))
        R.poison(sets[0])
        ok, msg = R.check(fastlaunch.fast_launch(sets[0]), ref)
        failures += not ok
        it = iter(range(1 << 30))
        t_fl = device_us(lambda: fastlaunch.fast_launch(sets[next(it) % len(sets)]), flush)
        t_ref = device_us(lambda: R.ref_kernel(sets[0]), flush, reps=5)
        h_fl = host_ns(lambda: fastlaunch.fast_launch(sets[0]), sync=torch.cuda.synchronize) / 1e3
        tflops = flops(shape) / (t_fl * 1e-6) / 1e12
        gbs = nvfp4_bytes(shape) / (t_fl * 1e-6) / 1e9
        bench.append({"shape": describe(shape), "ok": ok, "device_us": t_fl, "host_us": h_fl, "ref_us": t_ref,
                      "tflops": tflops, "gbs": gbs})
        if not ok:
            print(f"bench {i}: FAIL {msg}")
    gm = statistics.geometric_mean
    print()
    print(f"| benchmark | shape | fastlaunch device us | host us/call | TFLOP/s | GB/s | fp32 reference us | speed-up |")
    print(f"|---|---|---|---|---|---|---|---|")
    for i, b in enumerate(bench):
        print(f"| {i + 1} | {b['shape']} | {b['device_us']:.1f} | {b['host_us']:.2f} | {b['tflops']:.0f} | "
              f"{b['gbs']:.0f} | {b['ref_us']:.0f} | {b['ref_us'] / b['device_us']:.0f}x |")
    print(f"| geomean | | {gm([b['device_us'] for b in bench]):.1f} | {gm([b['host_us'] for b in bench]):.2f} | | | "
          f"{gm([b['ref_us'] for b in bench]):.0f} | {gm([b['ref_us'] / b['device_us'] for b in bench]):.0f}x |")
    print(f"\ncorrectness: {sum(r['ok'] for r in rows)}/{len(rows)} test shapes, "
          f"{sum(b['ok'] for b in bench)}/{len(bench)} benchmark shapes pass")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name, "tests": rows, "bench": bench}, f, indent=1)
    return 1 if failures else 0


def run_cpu(args) -> int:
    print("no CUDA GPU here: fast_launch needs one (kernels for "
          f"{fastlaunch.supported_archs}); timing the host path (unpack + checks) on CPU tensors instead.")
    print("| benchmark | shape | unpack us/call | ns/group |")
    print("|---|---|---|---|")
    out = []
    for i, shape in enumerate(BENCH_SHAPES):
        g, ms, ns, ks = shape
        data = R.generate_input(ms, ns, ks, g, seed=i, device="cpu")
        t = host_ns(lambda: fastlaunch.unpack(data), batches=200, per_batch=200) / 1e3
        out.append({"shape": describe(shape), "unpack_us": t})
        print(f"| {i + 1} | {describe(shape)} | {t:.2f} | {t * 1e3 / g:.0f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": "cpu", "unpack": out}, f, indent=1)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m fastlaunch", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("--cpu", action="store_true", help="time the host path on CPU tensors even with a GPU")
    args = p.parse_args(argv)
    if torch.cuda.is_available() and not args.cpu:
        return run_gpu(args)
    return run_cpu(args)


if __name__ == "__main__":
    sys.exit(main())
