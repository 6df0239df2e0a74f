"""One command for a B200 (compute capability 10.0): is the sm_100a kernel right, and how fast is it?

  self-check   first: the outcome of the kernel's own check, which the set-up of a device's first call runs
               (kernels/sm100/self_check.h: every kernel variant on small groups whose exact C is known). Where it
               fails, every call on the device raises its message, and nothing else is run
  correctness  every task test shape (fastlaunch.shapes.TEST_SHAPES) plus shapes that reach the sm_100a
               kernel's own paths (partial last K stage, one tile per CTA vs persistent, more than 16 and
               more than 256 groups, M = 1, rows past a 128-row tile): fresh input, outputs poisoned with
               NaN, compared with the fp32 reference (|out - ref| <= 1e-3 + 1e-3 |ref|)
  timing       the benchmark shapes: device us per call with the L2 flushed before each (CUDA events),
               TFLOP/s and GB/s of the NVFP4 bytes

python tools/b200_check.py [--json out.json] [--dry-run]
Refuses to run on any other GPU (the sm_100a code would not be what runs). --dry-run (no GPU): checks
that the extension was built with the sm_100a kernel and that the inputs and reference of every shape
can be made, on the CPU, running nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this clone's package

import torch

import fastlaunch
from fastlaunch import reference as R
from fastlaunch.shapes import BENCH_SHAPES, TEST_SHAPES, describe, flops, nvfp4_bytes
from fastlaunch.timing import device_us, l2_flush_buffer

# (G, M, N, K) reaching the sm_100a kernel's own cases; full-range data (all E2M1 codes, all E4M3 scales).
EXTRA_SHAPES = [
    (1, [1], [1], [64]),                      # one row, one column, one 64-wide K chunk
    (1, [129], [257], [320]),                 # one row past a tile each way; last K stage 1 chunk of 4
    (2, [200, 40], [384, 130], [448, 192]),   # last stage of 3 chunks; one stage only
    (1, [1024], [4096], [2048]),              # more tiles than SMs: the persistent variant
    (20, [72] * 20, [256] * 20, [256] * 20),  # more than 16 groups: the 256-group parameter block
    (300, [16] * 300, [128] * 300, [64] * 300),  # more than 256 groups: two launches
]


def refuse_unless_b200() -> str | None:
    if not torch.cuda.is_available():
        return "no CUDA GPU: this check needs a GPU of compute capability 10.0 (B200); --dry-run runs on the CPU"
    cc = torch.cuda.get_device_capability()
    if cc != (10, 0):
        return (f"{torch.cuda.get_device_name()} is compute capability {cc[0]}.{cc[1]}; this check needs compute "
                "capability 10.0 (B200): other GPUs run other code")
    return None


def self_check(device: int, setup=None) -> tuple[bool, str]:
    """(passed, message) of the sm_100a kernel's self-check on `device`: fastlaunch._C.setup_device sets the device up
    as a first call does, which runs the check once per process (FASTLAUNCH_SM100_SELF_CHECK=0 skips it: then the
    message says so)."""
    setup = setup or fastlaunch._C.setup_device
    try:
        return True, setup(device)
    except (RuntimeError, ValueError) as e:
        return False, str(e)


def check_shape(shape, seed, full_range):
    g, ms, ns, ks = shape
    data = R.generate_input(ms, ns, ks, g, seed=seed, device="cuda", full_range=full_range)
    ref = R.ref_kernel(R.clone_outputs(data))
    R.poison(data)
    out = fastlaunch.fast_launch(data)
    torch.cuda.synchronize()
    return R.check(out, ref)


def time_shape(shape, seed, flush):
    g, ms, ns, ks = shape
    data = R.generate_input(ms, ns, ks, g, seed=seed, device="cuda")
    ref = R.ref_kernel(R.clone_outputs(data))
    R.poison(data)
    ok, msg = R.check(fastlaunch.fast_launch(data), ref)
    us = device_us(lambda: fastlaunch.fast_launch(data), flush)
    return ok, msg, us


def run(json_path=None, setup=None, device=None) -> int:
    device = torch.cuda.current_device() if device is None else device
    passed, message = self_check(device, setup)
    print(f"sm_100a self-check on cuda:{device}: {'pass' if passed else 'FAIL'}: {message}")
    if not passed:
        print("every call on this device raises that error: no shape was checked or timed")
        if json_path:
            with open(json_path, "w") as f:
                json.dump({"self_check": {"ok": False, "message": message}, "rows": []}, f, indent=1)
        return 1
    rows = []
    for i, shape in enumerate(TEST_SHAPES):
        ok, msg = check_shape(shape, 4242 + i, False)
        rows.append({"kind": "test", "shape": describe(shape), "ok": ok, "message": msg})
    for i, shape in enumerate(EXTRA_SHAPES):
        ok, msg = check_shape(shape, 7000 + i, True)
        rows.append({"kind": "sm100", "shape": describe(shape)[:60], "ok": ok, "message": msg})
    flush = l2_flush_buffer()
    for i, shape in enumerate(BENCH_SHAPES):
        ok, msg, us = time_shape(shape, 9000 + i, flush)
        rows.append({"kind": "bench", "shape": describe(shape), "ok": ok, "message": msg, "us": us,
                     "tflops": flops(shape) / us / 1e6, "gbps": nvfp4_bytes(shape) / us / 1e3})

    print(f"device: {torch.cuda.get_device_name()}, fastlaunch kernels for {fastlaunch.supported_archs}")
    print(f"| {'kind':5s} | {'shape':60s} | check | {'us':>8s} | {'TFLOP/s':>8s} | {'GB/s':>7s} |")
    print(f"|{'-' * 7}|{'-' * 62}|-------|{'-' * 10}|{'-' * 10}|{'-' * 9}|")
    for r in rows:
        timing = (f"{r['us']:8.1f} | {r['tflops']:8.1f} | {r['gbps']:7.0f}" if "us" in r
                  else f"{'':8s} | {'':8s} | {'':7s}")
        print(f"| {r['kind']:5s} | {r['shape']:60s} | {'pass' if r['ok'] else 'FAIL'}  | {timing} |")
    for r in rows:
        if not r["ok"]:
            print(f"FAIL {r['shape']}: {r['message']}")
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "self_check": {"ok": True, "message": message},
                       "rows": rows}, f, indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


def dry_run() -> int:
    if "sm_100a" not in fastlaunch.supported_archs or not hasattr(fastlaunch._C, "setup_device"):
        print(f"this build has no sm_100a kernel or no self-check: {fastlaunch.supported_archs}")
        return 1
    for i, (g, ms, ns, ks) in enumerate(TEST_SHAPES + EXTRA_SHAPES[:3]):
        data = R.generate_input(ms, ns, ks, g, seed=i, device="cpu", full_range=i >= len(TEST_SHAPES))
        ref = R.ref_kernel(R.clone_outputs(data))
        ok, msg = R.check(R.ref_kernel(data), ref)
        assert ok, msg
    print(f"dry run: build has {fastlaunch.supported_archs}; inputs and reference of {len(TEST_SHAPES) + 3} "
          f"shapes checked on the CPU; on a B200 this reports the kernel's self-check, then checks "
          f"{len(TEST_SHAPES) + len(EXTRA_SHAPES)} shapes and times {len(BENCH_SHAPES)}; no GPU, nothing run")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json")
    p.add_argument("--dry-run", action="store_true")
    args = p.parse_args(argv)
    if args.dry_run:
        return dry_run()
    reason = refuse_unless_b200()
    if reason:
        print(f"refused: {reason}", file=sys.stderr)
        return 2
    return run(args.json)


if __name__ == "__main__":
    sys.exit(main())
