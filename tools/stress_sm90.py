"""Repeats the sm90 GEMM under every forced kind of plan to catch what a single pass of the GPU tests
may miss: a launch that never completes (a hang) or a wrong element that shows only now and then.

For each setting (the environment test_gpu.py's test_every_width_cap_and_share forces: width cap, share
kind, half tiles; _:_:_ is the planner's own choice) a new process (settings are read at set-up) runs
the test's cases (or, with --cases, the task's test or benchmark shapes) `--reps` times, each call on
fresh random data with its output poisoned, and checks it against the fp32 reference. A call that has
not completed `--hang` seconds after its launch is reported as a hang with its setting, case and
repetition, and the process exits (a GPU grid that never ends cannot be recovered in-process). With
--trace the GEMM writes its per-CTA trace points (FASTLAUNCH_SM90_TRACE) to pinned host memory, and a hang
is reported with the CTAs grouped by the points they reached and the shares of the fewer (the trace
changes the kernel's timing a little).

  python tools/stress_sm90.py [--reps 20] [--hang 10] [--cases every|tests|bench|all] [--trace] [--narrow | --mid]
                              [--only 128:whole:1 _:split:2:_ ...]
  python tools/stress_sm90.py --skinny 0,1,2,4,8 [--lanes 8,32] [--reps 20] [--hang 10]

With --narrow every setting also forces the narrow build where a launch may take it
(FASTLAUNCH_SM90_NARROW=1), and the cases include test_gpu.py's narrow cases; --mid the same for the mid
build (FASTLAUNCH_SM90_MID=1, where it fits) and test_gpu.py's mid cases. With --skinny the settings
are instead the skinny kernel forced where allowed (FASTLAUNCH_SM90_SKINNY=1) with each K split of the
list (FASTLAUNCH_SM90_SKINNY_SPLIT; 0 the planner's) and each lanes per B row of --lanes
(FASTLAUNCH_SM90_SKINNY_LANES; 0 the planner's; default 8,32), on test_gpu.py's skinny cases: a split runs
cluster barriers, which hang if a CTA of the cluster misses one.

The last lines are a table: setting, calls, wrong outputs, hangs, seconds; the exit status is 1 if any
call was wrong or hung.
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
sys.path.insert(0, os.path.join(ROOT, "tools", "tuning"))
from trace_sm90 import EVENTS  # noqa: E402  (the GEMM's trace events, kernels/sm90/trace.cuh, in order)

CHILD = r"""
import faulthandler, json, os, sys, time, torch
seed, reps, hang, trace_on = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[5] == "1"
cases = json.loads(sys.argv[4])
if trace_on:  # the GEMM's trace points in pinned host memory: readable while a grid hangs
    tr = torch.zeros(1024 * 16 * 2, dtype=torch.int64).pin_memory()
    os.environ["FASTLAUNCH_SM90_TRACE"] = str(tr.data_ptr())
import fastlaunch
from fastlaunch import reference as R
sms = torch.cuda.get_device_properties(0).multi_processor_count
calls = wrong = 0
for rep in range(reps):
    for ci, (g, ms, ns, ks) in enumerate(cases):
        d = R.generate_input(ms, ns, ks, g, seed, device="cuda")
        seed += 1
        ref = R.ref_kernel(R.clone_outputs(d))
        R.poison(d)
        torch.cuda.synchronize()
        if trace_on:
            tr.zero_()
        faulthandler.dump_traceback_later(3 * hang, exit=True)  # a host-side hang: where it stopped
        out = fastlaunch.fast_launch(d)
        done = torch.cuda.Event()
        done.record()
        t0 = time.time()
        while not done.query():
            if time.time() - t0 > hang:
                print(f"HANG case {ci} rep {rep} after {calls} calls", flush=True)
                if trace_on:
                    t = tr.view(1024, 16, 2)[:, :, 0].tolist()
                    reached = {b: [e for e in range(15) if t[b][e]] for b in range(1024) if t[b][0]}
                    print("TRACE " + json.dumps({"case": ci, "sm_count": sms, "reached": reached}), flush=True)
                os._exit(3)
            time.sleep(0.0002)
        faulthandler.cancel_dump_traceback_later()
        ok, msg = R.check(out, ref)
        calls += 1
        if not ok:
            wrong += 1
            print(f"WRONG case {ci} rep {rep}: {msg[:300]}", flush=True)
print(f"RESULT {calls} {wrong}", flush=True)
"""


def parse(text):
    """cap:share:half (share may hold a colon, as split:2), _ for none."""
    parts = ["" if x == "_" else x for x in text.split(":")]
    if len(parts) < 3:
        raise SystemExit(f"--only {text!r}: expected cap:share:half, e.g. 128:whole:1 or _:split:2:_")
    return parts[0], ":".join(parts[1:-1]), parts[-1]


def name(cap, share, half):
    return f"{cap or '_'}:{share or '_'}:{half or '_'}"


def skinny_splits(text):
    """--skinny's list: K splits 0 (the planner's) to 8 (kSkinnyMaxSplit)."""
    try:
        splits = [int(x) for x in text.split(",")]
    except ValueError:
        splits = []
    if not splits or any(s < 0 or s > 8 for s in splits):
        raise SystemExit(f"--skinny {text!r}: expected K splits 0-8, comma-separated, e.g. 0,1,2,4,8")
    return splits


def skinny_lanes(text):
    """--lanes' list: lanes per B row, 8 or 32 (kSkinnyLanes), or 0 (the planner's)."""
    try:
        lanes = [int(x) for x in text.split(",")]
    except ValueError:
        lanes = []
    if not lanes or any(x not in (0, 8, 32) for x in lanes):
        raise SystemExit(f"--lanes {text!r}: expected lanes per B row 0, 8 or 32, comma-separated, e.g. 8,32")
    return lanes


def plan_args(cap, share, half):
    """fastlaunch._C.plan's (share, cap, parts, half) for a setting's environment (kernels/sm90/plan/planner.h PlanForce)."""
    kind, _, parts = share.partition(":")
    code = {"": 0, "whole": 1, "split": 2, "reduce": 3, "wave": 4}[kind]
    return code, int(cap or 0), int(parts or 0), {"": 0, "1": 1, "0": 2}[half]


def hang_report(traced, case, setting, plan=None, narrow=False, mid=False):
    """Lines on a hung call's trace: the CTAs grouped by the trace points they reached, and the share of
    each CTA in the smaller groups. traced: the child's TRACE record; case: (g, ms, ns, ks); plan: a
    stand-in for fastlaunch._C.plan (tests)."""
    if plan is None:
        import fastlaunch

        plan = fastlaunch._C.plan
    g, ms, ns, ks = case
    share, cap, parts, half = plan_args(*setting)
    groups, starts, _est, rows, _reduce, _wave = plan(list(zip(ms, ns, ks)), traced["sm_count"], share, cap, parts, half,
                                               1 if narrow else 0, 1 if mid else 0)
    ctas = len(starts) - 1
    reached = {int(b): tuple(e) for b, e in traced["reached"].items()}
    by_sig = {}
    for b in range(ctas):
        by_sig.setdefault(reached.get(b, ()), []).append(b)
    lines = [f"hung call: {ctas} CTAs, tiles of {rows} B rows; groups (width, chunks, tiles_n, rank): {groups}"]
    for sig, bs in sorted(by_sig.items(), key=lambda kv: len(kv[1])):
        last = [EVENTS[e] for e in sig if e < len(EVENTS)]
        missing = [EVENTS[e] for e in range(len(EVENTS)) if e not in sig]
        lines.append(f"  {len(bs)} CTAs reached {', '.join(last) or 'nothing'}; not {', '.join(missing) or '-'}: "
                     f"{bs[:16]}{' ...' if len(bs) > 16 else ''}")
        if len(bs) <= ctas // 2:
            for b in bs[:8]:
                lines.append(f"    CTA {b}: steps from {tuple(starts[b])} to {tuple(starts[b + 1])}")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--hang", type=float, default=10.0, help="seconds after which a call counts as hung")
    ap.add_argument("--cases", choices=["every", "tests", "bench", "all"], default="every",
                    help="the test's cases (default), the task's test shapes, the benchmark shapes, or all three")
    ap.add_argument("--trace", action="store_true",
                    help="the GEMM's trace points in host memory; on a hang, which CTAs reached which point")
    ap.add_argument("--narrow", action="store_true",
                    help="every setting with the narrow build forced where allowed, and the narrow cases added")
    ap.add_argument("--mid", action="store_true",
                    help="every setting with the mid build forced where it fits, and the mid cases added")
    ap.add_argument("--only", nargs="*", default=None, help="settings as cap:share:half, _ for none, e.g. 128:whole:1 _:split:2:_")
    ap.add_argument("--skinny", default=None, metavar="SPLITS",
                    help="instead: the skinny kernel forced, with each K split of this comma-separated list (0: the planner's)")
    ap.add_argument("--lanes", default="8,32", metavar="LANES",
                    help="with --skinny: each K split with each lanes per B row of this list (0: the planner's)")
    args = ap.parse_args()
    # the test's cases and settings (cap, share, half), so that both stay one list
    from test_gpu import EVERY_SHAPE_CASES, MID_CASES, NARROW_CASES, SKINNY_CASES, test_every_width_cap_and_share
    from fastlaunch.shapes import BENCH_SHAPES, TEST_SHAPES

    cases = {"every": EVERY_SHAPE_CASES, "tests": list(TEST_SHAPES), "bench": list(BENCH_SHAPES),
             "all": EVERY_SHAPE_CASES + list(TEST_SHAPES) + list(BENCH_SHAPES)}[args.cases]
    if args.narrow and args.mid:
        ap.error("--narrow and --mid: one build at a time")
    if args.narrow:
        cases = NARROW_CASES + cases
    if args.mid:
        cases = MID_CASES + cases

    # each run: its label, its GEMM setting (cap, share, half) for a hang report, and its variables
    if args.skinny is not None:
        if args.trace or args.narrow or args.mid or args.only:
            ap.error("--skinny: not with --trace, --narrow, --mid or --only (the skinny kernel has no trace points)")
        cases = SKINNY_CASES
        runs = [(f"skinny:{s or 'planner'}:{lanes or 'planner'}", None,
                 {"FASTLAUNCH_SM90_SKINNY": "1", "FASTLAUNCH_SM90_SKINNY_SPLIT": str(s) if s else "",
                  "FASTLAUNCH_SM90_SKINNY_LANES": str(lanes) if lanes else ""})
                for s in skinny_splits(args.skinny) for lanes in skinny_lanes(args.lanes)]
    else:
        every = [m for m in test_every_width_cap_and_share.pytestmark if m.name == "parametrize"][0].args[1]
        runs = [(name(cap, share, half), (cap, share, half),
                 {"FASTLAUNCH_SM90_WCAP": cap, "FASTLAUNCH_SM90_SHARE": share, "FASTLAUNCH_SM90_HALF": half,
                  "FASTLAUNCH_SM90_NARROW": "1" if args.narrow else "", "FASTLAUNCH_SM90_MID": "1" if args.mid else ""})
                for cap, share, half in (every if not args.only else [parse(s) for s in args.only])]
    variables = ("FASTLAUNCH_SM90_WCAP", "FASTLAUNCH_SM90_SHARE", "FASTLAUNCH_SM90_HALF", "FASTLAUNCH_SM90_NARROW",
                 "FASTLAUNCH_SM90_MID",
                 "FASTLAUNCH_SM90_SKINNY", "FASTLAUNCH_SM90_SKINNY_SPLIT", "FASTLAUNCH_SM90_SKINNY_LANES")
    rows = []
    for label, setting, values in runs:
        env = {k: v for k, v in os.environ.items() if k not in variables}
        env.update({k: v for k, v in values.items() if v}, PYTHONPATH=ROOT)
        seed = int.from_bytes(os.urandom(4), "little") % (1 << 30)
        t0 = time.time()
        try:
            out = subprocess.run([sys.executable, "-c", CHILD, str(seed), str(args.reps), str(args.hang),
                                  json.dumps(cases), "1" if args.trace else "0"], env=env, capture_output=True, text=True,
                                 timeout=120 + args.reps * 20)
            text, rc = out.stdout + out.stderr, out.returncode
        except subprocess.TimeoutExpired as e:
            text, rc = f"TIMEOUT (host side) {e.stdout or ''}", -1
        secs = time.time() - t0
        calls = wrong = 0
        hung = []
        for line in text.splitlines():
            if line.startswith("RESULT"):
                calls, wrong = map(int, line.split()[1:])
            elif line.startswith("TRACE "):
                traced = json.loads(line[6:])
                print("\n".join(hang_report(traced, cases[traced["case"]], setting, narrow=args.narrow,
                                             mid=args.mid)), flush=True)
            elif line.startswith(("HANG", "TIMEOUT")):
                hung.append(line)
                if " after " in line:  # the calls checked before the hang
                    calls = int(line.split(" after ")[1].split()[0])
        if hung or rc != 0 or wrong:
            print(f"setting {label} seed {seed} rc {rc}:\n{text[-2000:]}", flush=True)
        rows.append((label, calls, wrong, len(hung), secs, rc))
    print("| setting | calls | wrong | hangs | s | rc |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.0f} | {r[5]} |")
    print(f"total: {sum(r[1] for r in rows)} calls checked, {sum(r[2] for r in rows)} wrong, "
          f"{sum(r[3] for r in rows)} hangs, {sum(1 for r in rows if r[5] != 0)} settings with a nonzero exit")
    return 1 if any(r[2] or r[3] or r[5] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
