"""Replays the sm90 planner's choice between half tiles and the other kinds of plan (kernels/sm90/plan/planner.h) on draws
measured both ways on the GPU (tools/tuning/data/half_whole_draws.json: each draw's device time on half tiles
where allowed and on the planner's best plan without them), on this machine's CPU (no GPU needed).

For each draw it plans the launch as the launcher does (fastlaunch._C.cuts, then fastlaunch._C.plan on the
cut groups) once with half tiles forced and once with them ruled out, takes the kind of the lower estimate,
and scores that choice by the time measured for that kind. Printed: the geomean of the replayed choice
beside the measured planner column of the data (the planner of its commit), the best of the two kinds per
draw (the oracle) and each draw whose replayed choice is over 3% slower than the other kind. --load L also
replays a half-tile load factor of L in place of the compiled one (kernels/sm90/plan/planner.h kHalfLoad: a half plan's
estimate x 1 + L x CTAs / SMs), so a refit can be tried here before a GPU call. --plans lists each draw's
two plans (kind, CTAs, estimate) beside their measured times less FIXED_US of fixed cost, over the estimate.

python tools/tuning/half_fit.py [--data tools/tuning/data/half_whole_draws.json] [--load 0.2 --load 0.3 ...] [--plans]
"""
import argparse
import json
import os
import sys
from statistics import geometric_mean

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)  # the package of this clone
import fastlaunch  # noqa: E402
from fastlaunch.shapes import cut_sizes  # noqa: E402

DATA = os.path.join(ROOT, "tools", "tuning", "data", "half_whole_draws.json")
FIXED_US = 6.5  # a call's time outside the GEMM's K loops and epilogues, roughly (two launches, the A conversion)


def kind_plan(sizes, sm_count, half):
    """(estimate us, CTAs, B rows per tile, kind: half, whole, split or reduce:PARTS) of the launcher's plan
    with half tiles forced (half=1) or ruled out (half=2): the group cuts it would take, then the plan of the
    cut groups."""
    plan, cuts = fastlaunch._C.plan, fastlaunch._C.cuts
    cut = cut_sizes(sizes, cuts(sizes, sm_count, 0, 0, 0, half))
    _groups, starts, est, rows, red, _wave = plan(cut, sm_count, 0, 0, 0, half)
    split = any(k > 0 for _t, k in starts[:-1]) or len(starts) - 1 > starts[-1][0]
    kind = "half" if rows == 64 else f"reduce:{red}" if red else "split" if split else "whole"
    return est, len(starts) - 1, rows, kind


def replay(data, load=None):
    """Per draw: (draw, chose_half, replayed us, other kind's us). load: a factor in place of the compiled
    one (None: as compiled)."""
    sms = data["sm_count"]
    compiled = fastlaunch._C.cost_model["half_load"]
    out = []
    for d in data["draws"]:
        sizes = list(zip(d["m"], d["n"], d["k"]))
        est_h, ctas_h, rows_h, _kind = kind_plan(sizes, sms, 1)
        est_w = kind_plan(sizes, sms, 2)[0]
        if load is not None and rows_h == 64:  # undo the compiled factor, apply the one asked for
            est_h = est_h / (1 + compiled * ctas_h / sms) * (1 + load * ctas_h / sms)
        half = rows_h == 64 and est_h < est_w * 0.999  # the planner's tie rule: other kinds first
        t_half, t_whole = d["us"]["half:1"], d["us"]["half:0"]
        out.append((d, half, t_half if half else t_whole, t_whole if half else t_half))
    return out


def summary(rows):
    """(replayed geomean, draws on half tiles, worst ratio to the other kind)."""
    return (geometric_mean([r[2] for r in rows]), sum(1 for r in rows if r[1]),
            max(r[2] / min(r[2], r[3]) for r in rows))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=DATA, help="the measured draws (JSON)")
    p.add_argument("--load", type=float, action="append", default=[], help="a half-tile load factor to replay")
    p.add_argument("--plans", action="store_true", help="list each draw's two plans against their times")
    args = p.parse_args(argv)
    with open(args.data) as f:
        data = json.load(f)
    draws = data["draws"]
    print(f"{len(draws)} draws measured on {data['device']} at {data['commit']} ({data['date']})")
    print(f"measured planner (of that commit): {geometric_mean([d['us']['auto'] for d in draws]):.2f} us geomean; "
          f"best kind per draw: {geometric_mean([min(d['us']['half:0'], d['us']['half:1']) for d in draws]):.2f}")
    rows = replay(data)
    g, n_half, worst = summary(rows)
    print(f"this build's planner (half_load {fastlaunch._C.cost_model['half_load']}): {g:.2f} us geomean, "
          f"{n_half} draws on half tiles, worst {worst:.2f}x the other kind")
    for d, half, t, other in rows:
        if t > other * 1.03:
            print(f"  seed {d['seed']} r{d['index']} G={d['g']}: {'half' if half else 'whole'} tiles {t:.1f} us, "
                  f"the other kind {other:.1f}")
    if args.plans:
        print(f"| draw | half plan | CTAs | est us | measured - {FIXED_US} over est | other plan | CTAs | est us "
              f"| measured - {FIXED_US} over est |")
        print("|---|---|---|---|---|---|---|---|---|")
        for d in draws:
            sizes = list(zip(d["m"], d["n"], d["k"]))
            cells = []
            for half, mode in ((1, "half:1"), (2, "half:0")):
                est, ctas, _rows, kind = kind_plan(sizes, data["sm_count"], half)
                cells += [kind, str(ctas), f"{est:.1f}", f"{(d['us'][mode] - FIXED_US) / est:.2f}"]
            print(f"| seed {d['seed']} r{d['index']} G={d['g']} | " + " | ".join(cells) + " |")
    for load in args.load:
        g, n_half, worst = summary(replay(data, load))
        print(f"half_load {load}: {g:.2f} us geomean, {n_half} draws on half tiles, worst {worst:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
