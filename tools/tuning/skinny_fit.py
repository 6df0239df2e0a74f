"""Fits the skinny kernel's cost model (kernels/sm90/plan/skinny.h SkinnyCosts) to the kernel's times forced at each
lanes per B row and K split, and replays the launcher's choice with it, on this machine's CPU through the
planner's own code (tests/cpp/skinny_probe.cpp: its `costs` and `plan` queries; no GPU needed).

Data (tools/tuning/data/skinny_forced.json): `tools/tuning/sweep_sm90.py --shape ... --json FILE` with modes skinny:1:S:L (the
skinny kernel forced at S parts and L lanes per row), skinny:0 (the wgmma GEMM) and auto (the planner of the
tree that ran it). The fit: coordinate descent over SkinnyCosts' fields, minimising the squared log ratio of
estimate to measured time over every (launch, lanes, split) the planner may choose (splits 1, 2, 4 or 8 within
the longest K's chunks, each item's cluster in one wave). Printed: the fields, compiled and fitted (a C++
initializer), and per launch the replayed choice (the planner's skinny plan, or the wgmma GEMM where
skinny_wins says so) with its measured time against the fastest choice measured, for both sets of costs; then
their geomeans. --hold I,J: launches (indices in the data) left out of the fit and marked; --costs C1 .. C11
replays those costs instead of fitting; --fix F,G: fields kept at their compiled values (default unit_base[8] and
unit_per_row, the instruction counts read from the SASS).

python tools/tuning/skinny_fit.py [--data tools/tuning/data/skinny_forced.json] [--hold 3,7] [--fix F,G] [--costs 67 67 32 ...]
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from statistics import geometric_mean

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)  # the package of this clone
import fastlaunch._C  # noqa: E402  (its skinny_builds, and the wgmma plan's estimate for the replay)
DATA = os.path.join(ROOT, "tools", "tuning", "data", "skinny_forced.json")
SMS = 132
FIELDS = ("unit_base[8]", "unit_base[32]", "unit_per_row", "issue_one", "issue_two", "smem_waves_per_ns",
          "bytes_per_ns[8]", "bytes_per_ns[32]", "cta_bytes_per_ns", "fixed_ns", "split_ns")


class Probe:
    """tests/cpp/skinny_probe.cpp, built once with the host compiler."""

    def __init__(self):
        cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
        if cxx is None:
            raise SystemExit("no host C++ compiler (g++/c++) to build tests/cpp/skinny_probe.cpp")
        self.dir = tempfile.mkdtemp(prefix="skinny_fit")
        self.exe = os.path.join(self.dir, "skinny_probe")
        subprocess.run([cxx, "-std=c++17", "-O2", "-I", os.path.join(ROOT, "kernels"),
                        os.path.join(ROOT, "tests", "cpp", "skinny_probe.cpp"), "-o", self.exe], check=True)

    def ask(self, queries):
        r = subprocess.run([self.exe], input="\n".join(queries) + "\n", capture_output=True, text=True, check=True)
        return r.stdout.split("\n")[:len(queries)]

    def compiled(self):
        return [float(x) for x in self.ask(["costs"])[0].split()]

    def plans(self, costs, keys):
        """The plan (build split items ctas smem sums est_ns lanes planners, as strings; None where none) of each
        (sizes, split, lanes) of `keys` under `costs` (0, 0: the planner's own)."""
        head = "costs " + " ".join(repr(float(c)) for c in costs)
        out = self.ask([head] + [f"plan {SMS} {s} {lanes} {len(sizes)} " + " ".join(f"{m} {n} {k}" for m, n, k in sizes)
                                 for sizes, s, lanes in keys])
        assert out[0] == "ok", out[0]
        return [a.split() if a != "none" else None for a in out[1:]]


def load(path):
    """Launches [(name, sizes, {mode: us})] of a sweep_sm90.py --json file."""
    d = json.load(open(path))
    out = []
    for i, (g, ms, ns, ks) in enumerate(d["shapes"]):
        times = {mode: r["us"][i] for mode, r in d["modes"].items() if r["us"][i] is not None}
        out.append((d["names"][i], list(zip(ms, ns, ks)), times))
    return out


def may_choose(plan):
    """Whether the planner itself may take this forced plan (the probe's `planners` field: kernels/sm90/plan/skinny.h
    skinny_split_open)."""
    return plan[8] == "1"


def points(probe, costs, launches):
    """(launch index, measured us, estimated us) of each forced time the planner may choose."""
    keys, meta = [], []
    for i, (_name, sizes, times) in enumerate(launches):
        for mode, us in times.items():
            parts = mode.split(":")
            if len(parts) == 4 and parts[:2] == ["skinny", "1"] and us:
                keys.append((sizes, int(parts[2]), int(parts[3])))
                meta.append((i, us))
    out = []
    for (i, us), plan in zip(meta, probe.plans(costs, keys)):
        if plan is not None and may_choose(plan):
            out.append((i, us, float(plan[6]) / 1000))
    return out


def loss(probe, costs, launches, hold):
    return sum(math.log(est / us) ** 2 for i, us, est in points(probe, costs, launches) if i not in hold)


def fit(probe, start, launches, hold, fixed=(), rounds=25):
    best = list(start)
    cur = loss(probe, best, launches, hold)
    for _ in range(rounds):
        moved = False
        for f in (f for f in range(len(best)) if FIELDS[f] not in fixed):
            for factor in (0.6, 0.8, 0.9, 0.97, 1.03, 1.1, 1.25, 1.6):
                trial = list(best)
                trial[f] *= factor
                value = loss(probe, trial, launches, hold)
                if value < cur - 1e-9:
                    best, cur, moved = trial, value, True
        if not moved:
            break
    return best, cur


def replay(probe, costs, launches):
    """Per launch: (chosen label, its measured us or None where that choice was not timed, fastest measured us over
    the choices the planner may make, the skinny plan's estimate us)."""
    keys = [(sizes, 0, 0) for _n, sizes, _t in launches]
    plans = probe.plans(costs, keys)
    # the launcher's choice between the skinny plan's estimate and the wgmma plan's (kernels/sm90/plan/skinny.h skinny_wins)
    wins = probe.ask([f"wins {p[6]} {fastlaunch._C.plan(sizes, SMS)[2] * 1000!r}"
                      for (_n, sizes, _t), p in zip(launches, plans) if p is not None])
    wins = iter(wins)
    out = []
    for (_name, sizes, times), plan in zip(launches, plans):
        choices = {m: us for m, us in times.items() if m.startswith("skinny:1:") or m == "skinny:0"}
        if plan is not None and next(wins) == "1":
            label = f"skinny:1:{plan[1]}:{plan[7]}"
        else:
            label = "skinny:0"
        out.append((label, choices.get(label), min(choices.values()), float(plan[6]) / 1000 if plan else None))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--hold", default="", help="launch indices left out of the fit, comma-separated")
    ap.add_argument("--costs", nargs=len(FIELDS), type=float, help="replay these costs instead of fitting")
    ap.add_argument("--fix", default="unit_base[8],unit_per_row",
                    help="fields kept at their compiled values (default: the instruction counts read from the SASS)")
    args = ap.parse_args(argv)
    launches = load(args.data)
    hold = {int(x) for x in args.hold.split(",") if x}
    probe = Probe()
    compiled = probe.compiled()
    if args.costs:
        fitted, value = args.costs, loss(probe, args.costs, launches, hold)
    else:
        fixed = {x for x in args.fix.split(",") if x}
        unknown = fixed - set(FIELDS)
        if unknown:
            raise SystemExit(f"--fix: no such field {sorted(unknown)}; fields: {', '.join(FIELDS)}")
        fitted, value = fit(probe, compiled, launches, hold, fixed)
    print(f"loss (squared log ratio, fitted points): compiled {loss(probe, compiled, launches, hold):.3f}, "
          f"{'given' if args.costs else 'fitted'} {value:.3f}")
    print("| field | compiled | " + ("given" if args.costs else "fitted") + " |\n|---|---|---|")
    for name, a, b in zip(FIELDS, compiled, fitted):
        print(f"| {name} | {a:g} | {b:.4g} |")
    print("C++: {{" + ", ".join(f"{x:.4g}" for x in fitted[:2]) + "}, " + ", ".join(f"{x:.4g}" for x in fitted[2:6]) +
          ", {" + ", ".join(f"{x:.4g}" for x in fitted[6:8]) + "}, " + ", ".join(f"{x:.4g}" for x in fitted[8:]) + "}")
    old, new = replay(probe, compiled, launches), replay(probe, fitted, launches)
    print("\n| # | launch | auto measured | compiled: choice, us | fitted: choice, us, est | fastest |\n|---|---|---|---|---|---|")
    ratios = {"compiled": [], "fitted": [], "auto": []}
    for i, ((name, _sizes, times), o, n) in enumerate(zip(launches, old, new)):
        best = o[2]
        held = " (held out)" if i in hold else ""
        est = f"{n[3]:.1f}" if n[3] is not None else "-"
        print(f"| {i} | {name}{held} | {times.get('auto', 0):.1f} | {o[0]} {o[1] or 0:.1f} | {n[0]} {n[1] or 0:.1f} "
              f"est {est} | {best:.1f} |")
        for key, r in (("compiled", o), ("fitted", n)):
            if r[1]:
                ratios[key].append(r[1] / best)
        if times.get("auto"):
            ratios["auto"].append(times["auto"] / best)
    for key, r in ratios.items():
        if r:
            print(f"{key}: geomean {geometric_mean(r):.3f}x the fastest choice over {len(r)} launches, worst {max(r):.2f}x")


if __name__ == "__main__":
    main()
