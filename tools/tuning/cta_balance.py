"""Why a plan's CTAs end apart: every CTA's time in traced calls (entry to the end of its consumers' work,
the median over the calls) grouped by what its share of the plan holds: partial sums read (one per CTA
before it that ends inside the tile it finishes), partial sums written (its share ends inside a tile) and
tiles stored; beside each kind, what two models predict for it:
- linear: the planner's way (kernels/sm90/plan/planner.h): every step, tile store, write and read at a fixed cost;
- critical path: the same costs, but a CTA that finishes a split tile reads its partners' sums only once
  their flags are up, and a partner raises its flag after its next unit's K loop, or at its end if it
  has no other unit (a middle part of a tile); so that CTA's end is the later of its own work and its
  latest partner's flag, plus the reads and the store.
The costs are tools/tuning/fit_sm90.py's fit on the traces of benchmarks 1-3 of commit fd8de6a's kernels (`--costs
37633fb` takes an earlier fit, on commit a0e69d6's kernels; the fits are logged in docs/history/); the critical
path reads at --read-ns (1300: its best on benchmark 3's traces, the cta_balance row).

Beside the table: each CTA's first unit's K loop over its K steps (ns and cycles per step, the median
over the CTAs), the K loop's own rate inside the GEMM.

Input: the JSON that `tools/tuning/trace_sm90.py --raw FILE` writes on the GPU. This needs no GPU: the plan the
launcher ran is found again from the shapes and the run's mode (plain C++, fastlaunch._C.plan), for the
traced GPU's SM count and with this checkout's planner (it must be the traced tree's). Plans of half
tiles, forced split:S and reduced tiles are not covered, nor plans of the narrow or mid build with a wgmma
narrower than its tiles (the planner's plans of benchmarks 1 and 2: trace them with mode mid:0).

python tools/tuning/cta_balance.py RAW.json [--sm-count 132] [--read-ns 1300] [--costs fd8de6a|37633fb]
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fit_sm90 import cta_units, cta_us, plan_args  # noqa: E402
from trace_sm90 import EVENTS, shape_list  # noqa: E402

# ns, tools/tuning/fit_sm90.py's fits: a CTA's start, a K step and a tile's store by tile width, a split tile's
# partial sums written and read. fd8de6a: 396 CTAs of benchmarks 1-3 under the planner; 37633fb: 2050 CTAs
# of benchmarks 1-4 under four modes (a0e69d6's kernels, whose 128-wide step was longer).
FITS = {
    "fd8de6a": {"const": 2470, "step": {128: 362, 192: 474}, "store": {128: 299, 192: 816}, "write": 1260, "read": 1977},
    "37633fb": {"const": 1456, "step": {128: 359, 192: 457}, "store": {128: 534, 192: 1108}, "write": 2761, "read": 2308},
}
DEFAULT_FIT = "fd8de6a"
COSTS = FITS[DEFAULT_FIT]


def predict(ctas, costs, read_ns):
    """Per CTA of cta_units(), us: (linear, critical path); `read_ns`: the critical path's cost of a read."""
    lin, cp, flag = [], [], []  # flag: when each CTA's handed-over sums are readable (critical path, ns)
    for units in ctas:
        lin_ns = t = costs["const"]
        raised, pending = None, False
        for w, lo, hi, kst, partners in units:
            t += (hi - lo) * costs["step"][w]
            lin_ns += (hi - lo) * costs["step"][w]
            if pending:  # the previous unit's sums: the flag goes up after this unit's K loop
                raised, pending = t, False
            if hi < kst:  # ends inside the tile: its sums handed over
                t += costs["write"]
                lin_ns += costs["write"]
                pending = True
                continue
            if partners:
                t = max([t] + [flag[c] for c in partners]) + len(partners) * read_ns
                lin_ns += len(partners) * costs["read"]
            t += costs["store"][w]
            lin_ns += costs["store"][w]
        flag.append(t if pending or raised is None else raised)
        lin.append(lin_ns / 1e3)
        cp.append(t / 1e3)
    return lin, cp


def kinds(traced, sm_count, read_ns=1300.0, costs=COSTS):
    """One traced shape (trace_sm90's raw entry: mode, set, shape, runs) by kind: [(reads, writes, tiles
    stored, CTAs, median us, min us, max us, median steps, median linear us, median critical-path us)],
    and per model (linear, critical path) the residuals' spread and standard deviation (us); None if the
    plan's CTAs are not the traced ones."""
    g, ms, ns, ks = shape_list(traced.get("set", "bench"))[traced["shape"]]
    ctas = cta_units(list(zip(ms, ns, ks)), sm_count, *plan_args(traced["mode"]))
    us = cta_us(traced["runs"])
    if len(ctas) != len(us):
        return None
    lin, cp = predict(ctas, costs, read_ns)
    by = {}
    for b, units in enumerate(ctas):
        key = (sum(len(u[4]) for u in units), sum(u[2] < u[3] for u in units), sum(u[2] == u[3] for u in units))
        by.setdefault(key, []).append(b)
    table = []
    for key, bs in sorted(by.items()):
        ts = [us[b] for b in bs]
        table.append(key + (len(bs), statistics.median(ts), min(ts), max(ts),
                            statistics.median(sum(u[2] - u[1] for u in ctas[b]) for b in bs),
                            statistics.median(lin[b] for b in bs), statistics.median(cp[b] for b in bs)))
    fit = []
    for pred in (lin, cp):
        res = [u - p for u, p in zip(us, pred)]
        fit.append((max(res) - min(res), statistics.pstdev(res)))
    return table, fit, (max(us), max(lin), max(cp))


def first_steps(traced, sm_count):
    """One traced shape: each CTA's first unit's K loop (its first stage landed to the loop's end) over that
    unit's K steps, as (median ns per step, median cycles per step, median steps) over the CTAs (each CTA
    the median over the calls); None if the plan's CTAs are not the traced ones."""
    g, ms, ns, ks = shape_list(traced.get("set", "bench"))[traced["shape"]]
    ctas = cta_units(list(zip(ms, ns, ks)), sm_count, *plan_args(traced["mode"]))
    full, loop = EVENTS.index("first_full"), EVENTS.index("first_mainloop")
    if len(cta_us(traced["runs"])) != len(ctas):
        return None
    per_ns, per_cyc = [], []
    for b, units in enumerate(ctas):
        steps = units[0][2] - units[0][1]
        calls = [run["trace"][b] for run in traced["runs"]]
        per_ns.append(statistics.median((c[loop][0] - c[full][0]) / steps for c in calls))
        per_cyc.append(statistics.median((c[loop][1] - c[full][1]) / steps for c in calls))
    return (statistics.median(per_ns), statistics.median(per_cyc),
            statistics.median(u[0][2] - u[0][1] for u in ctas))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("raw", help="JSON from tools/tuning/trace_sm90.py --raw")
    p.add_argument("--sm-count", type=int, default=132, help="SMs of the GPU the trace ran on (default 132)")
    p.add_argument("--read-ns", type=float, default=1300.0, help="the critical path's cost of a read (default 1300)")
    p.add_argument("--costs", choices=sorted(FITS), default=DEFAULT_FIT, help=f"which fit's costs (default {DEFAULT_FIT})")
    a = p.parse_args(argv)
    with open(a.raw) as f:
        traced = json.load(f)
    for t in traced:
        label = f"{t['mode']} {t.get('set', 'bench')}[{t['shape']}]"
        try:
            got = kinds(t, a.sm_count, a.read_ns, FITS[a.costs])
        except ValueError as e:
            print(f"{label}: {e}")
            continue
        if got is None:
            print(f"{label}: the plan's CTAs are not the traced ones (another SM count or planner?)")
            continue
        table, fit, busiest = got
        print(f"\n{label}: busiest CTA {busiest[0]:.2f} us; predicted {busiest[1]:.2f} (linear), "
              f"{busiest[2]:.2f} (critical path)")
        step_ns, step_cyc, steps = first_steps(t, a.sm_count)
        print(f"first unit's K loop per step (median over CTAs): {step_ns:.0f} ns, {step_cyc:.0f} cycles "
              f"(its steps: median {steps:g})")
        print("| partial sums read | written | tiles stored | CTAs | median us | min us | max us | steps (median) "
              "| linear us | critical path us |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in table:
            print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.2f} | {r[5]:.2f} | {r[6]:.2f} | {r[7]:g} | {r[8]:.2f} "
                  f"| {r[9]:.2f} |")
        for name, (spread, sd) in zip(("linear", "critical path"), fit):
            print(f"{name}: residuals spread {spread:.2f} us, standard deviation {sd:.2f}")


if __name__ == "__main__":
    main()
