"""The SM clock and board power while one kernel runs back to back: is a call held by the clock?

For each phase a workload runs back to back for --seconds while `nvidia-smi` samples the SM clock,
power draw, temperature and the active clock-event (throttle) reasons every 50 ms; the phase reports
the median of the samples after its first 30%, and the mean device us per call over the whole loop
(CUDA events; no L2 flush between calls, so these times are not the benchmarks' flushed ones).

Phases: idle; cuBLAS fp16 8192^3 on randn operands (the ceiling the floor is measured from) and on
zeros; each benchmark shape on the task's data (two input sets taking turns); benchmark 1 on
full-range data (every E2M1 code, every E4M3 scale) and on all-zero operands.

    python tools/clock_power.py [--seconds 3] [--json out.json]

The clocks and limits are read, never set.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time

import torch

import fastlaunch
from fastlaunch import reference as R
from fastlaunch.shapes import BENCH_SHAPES, flops

FIELDS = ["clocks.sm", "power.draw", "temperature.gpu"]
REASON_FIELDS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")  # its newer and older name


# nvidia-smi's clock-event reason bits (nvmlClocksEventReasons).
REASONS = {0x1: "idle", 0x2: "app clocks", 0x4: "sw power cap", 0x8: "hw slowdown", 0x10: "sync boost",
           0x20: "sw thermal", 0x40: "hw thermal", 0x80: "hw power brake", 0x100: "display clocks"}


def decode_reasons(text: str) -> str:
    try:
        bits = int(text, 16)
    except ValueError:
        return text
    names = [name for bit, name in REASONS.items() if bits & bit]
    return "+".join(names) if names else "none"


def query_fields() -> list[str]:
    """The fields this driver's nvidia-smi answers (the reasons field has had two names)."""
    for reasons in REASON_FIELDS + (None,):
        fields = FIELDS + ([reasons] if reasons else [])
        r = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"],
                           capture_output=True, text=True)
        if r.returncode == 0 and "Field" not in r.stdout:
            return fields
    raise SystemExit("nvidia-smi answers none of the clock fields")


class Sampler:
    def __init__(self, fields: list[str]):
        self.fields = fields
        self.file = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits",
                                      "-lms", "50"], stdout=self.file, stderr=subprocess.DEVNULL, text=True)

    def stop(self) -> dict:
        self.proc.terminate()
        self.proc.wait()
        self.file.seek(0)
        rows = [line.split(",") for line in self.file.read().splitlines() if line.strip()]
        rows = [r for r in rows if len(r) == len(self.fields)]
        rows = rows[int(len(rows) * 0.3):]
        out = {"samples": len(rows)}
        if not rows:
            return out

        def column(i):  # the samples of field i that read as numbers ("[N/A]" and the like left out)
            vals = []
            for r in rows:
                try:
                    vals.append(float(r[i]))
                except ValueError:
                    pass
            return vals or [float("nan")]

        mhz = column(0)
        out["sm_mhz"] = statistics.median(mhz)
        out["sm_mhz_min"] = min(mhz)
        out["power_w"] = statistics.median(column(1))
        out["temp_c"] = max(column(2))
        if len(self.fields) > len(FIELDS):
            reasons = [r[3].strip() for r in rows]
            top = max(set(reasons), key=reasons.count)
            out["reasons"] = f"{decode_reasons(top)} ({reasons.count(top)}/{len(reasons)})"
        return out


def run_phase(name: str, fn, flop: float, seconds: float, fields: list[str]) -> dict:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    sampler = Sampler(fields)
    time.sleep(0.2)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    calls = 0
    t_end = time.perf_counter() + seconds
    s.record()
    while time.perf_counter() < t_end:
        for _ in range(20):
            fn()
        calls += 20
        e.record()
        e.synchronize()  # keeps the queue short, so the loop ends when the phase does
    ms = s.elapsed_time(e)
    row = {"phase": name, "calls": calls, "us_per_call": ms * 1e3 / calls if calls else float("nan")}
    row["tflops"] = flop / (row["us_per_call"] * 1e-6) / 1e12 if flop else float("nan")
    row.update(sampler.stop())
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--json")
    args = p.parse_args()
    fields = query_fields()
    lim = subprocess.run(["nvidia-smi", "--query-gpu=name,power.limit,clocks.max.sm", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    print(f"GPU: {lim}; fields: {', '.join(fields)}")
    rows = []
    sampler = Sampler(fields)
    time.sleep(max(1.0, args.seconds / 2))
    rows.append({"phase": "idle", "calls": 0, "us_per_call": float("nan"), "tflops": float("nan"), **sampler.stop()})

    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.half)
    b = torch.randn(n, n, device="cuda", dtype=torch.half)
    c = torch.empty(n, n, device="cuda", dtype=torch.half)
    rows.append(run_phase("cublas fp16 8192^3 randn", lambda: torch.mm(a, b, out=c), 2.0 * n ** 3, args.seconds, fields))
    a.zero_()
    b.zero_()
    rows.append(run_phase("cublas fp16 8192^3 zeros", lambda: torch.mm(a, b, out=c), 2.0 * n ** 3, args.seconds, fields))
    del a, b, c

    for i, shape in enumerate(BENCH_SHAPES):
        g, ms, ns, ks = shape
        sets = [R.generate_input(ms, ns, ks, g, seed, device="cuda") for seed in (1, 2)]
        turn = [0]

        def call(sets=sets, turn=turn):
            turn[0] ^= 1
            fastlaunch.fast_launch(sets[turn[0]])

        rows.append(run_phase(f"fastlaunch bench {i + 1} task data", call, flops(shape), args.seconds, fields))
        if i == 0:
            full = R.generate_input(ms, ns, ks, g, 3, device="cuda", full_range=True)
            rows.append(run_phase("fastlaunch bench 1 full range", lambda: fastlaunch.fast_launch(full), flops(shape),
                                  args.seconds, fields))
            zero = R.zero_operands(R.generate_input(ms, ns, ks, g, 4, device="cuda"))
            rows.append(run_phase("fastlaunch bench 1 zeros", lambda: fastlaunch.fast_launch(zero), flops(shape),
                                  args.seconds, fields))
        del sets

    print(f"{'phase':32s} {'us/call':>9s} {'TFLOP/s':>8s} {'SM MHz':>7s} {'min':>6s} {'W':>6s} {'C':>4s}  reasons")
    for r in rows:
        print(f"{r['phase']:32s} {r['us_per_call']:9.1f} {r['tflops']:8.1f} {r.get('sm_mhz', float('nan')):7.0f} "
              f"{r.get('sm_mhz_min', float('nan')):6.0f} {r.get('power_w', float('nan')):6.1f} "
              f"{r.get('temp_c', float('nan')):4.0f}  {r.get('reasons', '-')}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": lim, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
