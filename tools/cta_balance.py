"""Why a plan's CTAs end apart: every CTA's time in traced calls (entry to the end of its consumers' work,
the median over the calls) grouped by what its share of the plan holds: partial sums read (one per CTA
before it that ends inside the tile it finishes), partial sums written (its share ends inside a tile) and
tiles stored. Kinds whose times differ by more than their steps do show where the planner's estimate
(kernels/plan.h) misprices a share.

Input: the JSON that `tools/trace_sm90.py --raw FILE` writes on the GPU. This needs no GPU: the plan the
launcher ran is found again from the shapes and the run's mode (plain C++, fastlaunch._C.plan), for the
traced GPU's SM count. Plans of half tiles are not covered (their shares hand nothing over).

python tools/cta_balance.py RAW.json [--sm-count 132]
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fit_sm90 import cta_us, features  # noqa: E402
from trace_sm90 import shape_list  # noqa: E402


def plan_args(mode):
    """(share, cap, half) of fastlaunch._C.plan for a trace mode (trace_sm90 / sweep_sm90 modes); ValueError
    for the share modes it does not cover (split:S, reduced tiles)."""
    kind, _, value = mode.partition(":")
    if kind == "share" and value not in ("whole", "split"):
        raise ValueError(f"mode {mode}: only share:whole and share:split are covered")
    share = {"whole": 1, "split": 2}.get(value, 0) if kind == "share" else 0
    cap = int(value) if kind == "cap" else 0
    half = {"0": 2, "1": 1}.get(value, 0) if kind == "half" else 0
    return share, cap, half


def kinds(traced, sm_count):
    """[(reads, writes, tiles stored, CTAs, median us, min us, max us, median steps)] of one traced shape
    (trace_sm90's raw entry: mode, set, shape, runs), by kind; None if the plan's CTAs are not the traced
    ones."""
    import fastlaunch

    g, ms, ns, ks = shape_list(traced.get("set", "bench"))[traced["shape"]]
    widths = list(fastlaunch._C.tile_widths)
    share, cap, half = plan_args(traced["mode"])
    rows = features(list(zip(ms, ns, ks)), sm_count, share, cap, widths, half)
    us = cta_us(traced["runs"])
    if len(rows) != len(us):
        return None
    nw = len(widths)
    by = {}
    for f, t in zip(rows, us):
        key = (int(f[-1]), int(f[-2]), int(sum(f[1 + nw:1 + 2 * nw])))
        by.setdefault(key, []).append((t, sum(f[1:1 + nw])))
    out = []
    for (reads, writes, stored), v in sorted(by.items()):
        ts = [t for t, _ in v]
        out.append((reads, writes, stored, len(v), statistics.median(ts), min(ts), max(ts),
                    statistics.median(s for _, s in v)))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("raw", help="JSON from tools/trace_sm90.py --raw")
    p.add_argument("--sm-count", type=int, default=132, help="SMs of the GPU the trace ran on (default 132)")
    a = p.parse_args(argv)
    with open(a.raw) as f:
        traced = json.load(f)
    for t in traced:
        label = f"{t['mode']} {t.get('set', 'bench')}[{t['shape']}]"
        try:
            table = kinds(t, a.sm_count)
        except ValueError as e:
            print(f"{label}: {e}")
            continue
        if table is None:
            print(f"{label}: the plan's CTAs are not the traced ones (another SM count or planner?)")
            continue
        print(f"\n{label}")
        print("| partial sums read | written | tiles stored | CTAs | median us | min us | max us | steps (median) |")
        print("|---|---|---|---|---|---|---|---|")
        for r in table:
            print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.2f} | {r[5]:.2f} | {r[6]:.2f} | {r[7]:g} |")


if __name__ == "__main__":
    main()
