"""Where a call's time goes inside the sm90 GEMM kernel: per-CTA trace points (globaltimer and clock64,
FASTLAUNCH_SM90_TRACE) on one call per benchmark shape, L2 flushed before it, beside the CUDA-event time
of the same call. Prints, per shape, the medians over CTAs of each phase (us) and the spread of CTA
start and end times. Mode "whole" is the planner's choice, "gemm" launches the GEMM alone
(FASTLAUNCH_SM90_ONLY; wrong results); any mode of tools/tuning/sweep_sm90.py (half:0, share:split, ...) works
too. --set tests takes the shape indices into the task's test shapes instead of the benchmark shapes (as do
tools/tuning/sweep_sm90.py's other sets: hand, slow, longk, any), --set random:SEED into the 8 random shapes of that
seed (benchmarks/bench_kernels.py --random 8 --seed SEED).
Besides the phases: the busiest CTA's time from entry to its consumers' end, and the median CTA's.

--raw FILE also writes every traced call (per mode and shape: event us and each CTA's trace points) as JSON.

python tools/tuning/trace_sm90.py [--shapes 3,2,0] [--modes whole,gemm] [--set bench|tests|hand|slow|longk|any|random:SEED]
    [--raw FILE] [--data task|full|zeros]
--data full draws every E2M1 code and E4M3 scale; zeros runs all-zero operands (the same work, nothing
toggling: the SM clock row then shows what the data's power costs).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# (sweep_sm90 also puts this clone's package on the path)
from sweep_sm90 import mode_env, resolve_set  # noqa: E402


EVENTS = ["entry", "init", "gridwait", "maps", "first_tma", "first_full", "first_mainloop", "first_epilogue",
          "consumer_done", "exit", "b_share", "b_first_tma"]
PHASES = [("barrier init", "entry", "init"), ("B maps: griddepcontrol.wait + acquire", "init", "maps"),
          ("B: its share's bounds read", "init", "b_share"), ("B: its first tile's group", "b_share", "maps"),
          ("B: first TMA issued", "maps", "b_first_tma"), ("B's first TMA to the first stage", "b_first_tma", "first_full"),
          ("griddepcontrol.wait (A producer)", "init", "gridwait"), ("first A TMA issued", "gridwait", "first_tma"),
          ("first stage lands", "first_tma", "first_full"), ("first tile K loop", "first_full", "first_mainloop"),
          ("first tile epilogue", "first_mainloop", "first_epilogue"), ("other tiles", "first_epilogue", "consumer_done"),
          ("exit", "consumer_done", "exit")]

CHILD = r"""
import json, os, sys, torch
trace = torch.zeros(1024 * 16 * 2, dtype=torch.int64, device="cuda")
os.environ["FASTLAUNCH_SM90_TRACE"] = str(trace.data_ptr())
import fastlaunch
from fastlaunch import reference as R
from fastlaunch.timing import l2_flush_buffer
SHAPES = json.loads(sys.argv[2])
DATA = sys.argv[3]
flush = l2_flush_buffer()
out = []
for i in json.loads(sys.argv[1]):
    g, ms, ns, ks = SHAPES[i]
    d = R.generate_input(ms, ns, ks, g, 3, device="cuda", full_range=DATA == "full")
    if DATA == "zeros":
        R.zero_operands(d)
    for _ in range(3):
        fastlaunch.fast_launch(d)
    runs = []
    for rep in range(5):
        flush.zero_(); trace.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fastlaunch.fast_launch(d); e.record(); torch.cuda.synchronize()
        runs.append({"us": s.elapsed_time(e) * 1e3, "trace": trace.view(1024, 16, 2).cpu().tolist()})
    out.append({"shape": i, "runs": runs})
print(json.dumps(out))
"""


def shape_list(shape_set):
    """The shapes a --set names: one of tools/tuning/sweep_sm90.py's sets (bench, tests, hand, slow, longk, any) or
    random:SEED (8 random shapes of that seed)."""
    return resolve_set(shape_set)[0]


def traced_runs(shapes, env, label, shape_set="bench", data="task"):
    """Runs CHILD in its own process with `env`: per shape index (into the --set's shapes), 5 traced calls
    (event us and every CTA's trace points). None, after printing why, if the child failed."""
    r = subprocess.run([sys.executable, "-c", CHILD, json.dumps(shapes), json.dumps(shape_list(shape_set)), data], env=env,
                       capture_output=True, text=True, timeout=600)
    if r.returncode:
        print(f"{label}: failed\n{r.stderr[-2000:]}")
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def summarise(run, ncta_max=1024):
    ctas = [c for c in run["trace"] if c[0][0] != 0]
    t0 = min(c[0][0] for c in ctas)
    res = {"event_us": run["us"], "ctas": len(ctas)}
    res["span_us"] = (max(c[9][0] for c in ctas) - t0) / 1e3
    res["entry_spread_us"] = (max(c[0][0] for c in ctas) - t0) / 1e3
    res["exit_spread_us"] = (max(c[9][0] for c in ctas) - min(c[9][0] for c in ctas)) / 1e3
    for name, a, b in PHASES:
        # over the CTAs that recorded both events (the half-tile kernel records no first_full)
        ia, ib = EVENTS.index(a), EVENTS.index(b)
        both = [(c[ib][0] - c[ia][0]) / 1e3 for c in ctas if c[ia][0] and c[ib][0]]
        res[name] = statistics.median(both) if both else float("nan")
    busy = sorted((c[8][0] - c[0][0]) / 1e3 for c in ctas if c[8][0])  # entry to consumer_done
    res["busiest CTA"] = busy[-1] if busy else float("nan")
    res["median CTA"] = statistics.median(busy) if busy else float("nan")
    res["cycles_per_us"] = statistics.median((c[9][1] - c[0][1]) / max(1, (c[9][0] - c[0][0]) / 1e3) for c in ctas)
    return res


def shapes_modes_parser(doc, shapes, modes):
    """The options the trace-based tools share: shape indices and modes, comma-separated."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=shapes, help="shape indices, comma-separated")
    ap.add_argument("--modes", default=modes, help="modes, comma-separated")
    return ap


def trace_env(mode):
    """The child's environment for a mode: whole (the planner's choice), gemm or convert (one kernel only),
    or a tools/tuning/sweep_sm90.py mode."""
    return mode_env({"whole": "auto", "gemm": "only:gemm", "convert": "only:convert"}.get(mode, mode))


def main():
    ap = shapes_modes_parser(__doc__, "3,2,0", "whole,gemm")
    ap.add_argument("--set", default="bench", dest="shape_set",
                    help="bench, tests, hand, slow, longk, any (tools/tuning/sweep_sm90.py's sets) or random:SEED")
    ap.add_argument("--raw", help="write every traced call here (JSON)")
    ap.add_argument("--data", default="task", choices=["task", "full", "zeros"],
                    help="the task's data (default), full-range data, or all-zero operands (scales 1.0)")
    a = ap.parse_args()
    shape_list(a.shape_set)  # a bad --set fails here
    shapes = [int(x) for x in a.shapes.split(",")]
    table, raw = [], []
    for mode in a.modes.split(","):
        for sh in traced_runs(shapes, trace_env(mode), mode, a.shape_set, a.data) or []:
            raw.append({"mode": mode, "set": a.shape_set, **sh})
            sums = [summarise(x) for x in sh["runs"]]
            med = {k: statistics.median(s[k] for s in sums) for k in sums[0]}
            table.append((mode, sh["shape"], med))
    if a.raw:
        with open(a.raw, "w") as f:
            json.dump(raw, f)
    keys = ["event_us", "span_us", "entry_spread_us", "exit_spread_us", "busiest CTA", "median CTA"] + [
        p[0] for p in PHASES]
    print("medians over 5 calls (us); phases: median over CTAs; span: first CTA entry to last CTA exit")
    tag = a.shape_set[0]  # b(ench), t(ests), h(and), s(low), l(ongk), a(ny), r(andom); benchmarks from 1
    print("| quantity | " + " | ".join(f"{m} {tag}{s + (tag == 'b')}" for m, s, _ in table) + " |")
    print("|---|" + "---|" * len(table))
    for k in keys:
        print(f"| {k} | " + " | ".join(f"{t[k]:.2f}" for _, _, t in table) + " |")
    print("| SM clock (GHz) | " + " | ".join(f"{t['cycles_per_us'] / 1e3:.2f}" for _, _, t in table) + " |")


if __name__ == "__main__":
    main()
