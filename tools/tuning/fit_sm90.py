"""Fits the sm90 planner's cost model (kernels/sm90/plan/planner.h) to per-CTA times measured on the GPU.

For each benchmark shape under each mode (planner's choice, split or whole tiles forced, each width cap),
one traced call (FASTLAUNCH_SM90_TRACE; median of 5, L2 flushed) gives every CTA's time from its entry to
the end of its consumers' work. The plan the kernel ran (fastlaunch._C.plan of the groups as
fastlaunch._C.cuts cuts them, same SM count and mode) gives what each CTA did: K steps per tile width,
tiles finished per width (epilogues), partial sums written and read. A least-squares fit of the times on
those counts gives ns per step and per epilogue of each width and per partial write and read; the table
shows the fit, and per run the spread of CTA times and of the fit's residuals, how far the CTAs'
differences repeat between the traced calls (the mean correlation over pairs of calls) and whether the
CTAs ran on the same SMs in every call; then the residuals of the CTAs whose share lies in one launch
group, by that group's rows.

--raw FILE fits the calls `tools/tuning/trace_sm90.py --raw FILE` traced instead (no GPU needed; its modes and shapes
filtered by --modes and --shapes, the plans found for --sm-count SMs).

python tools/tuning/fit_sm90.py [--shapes 0,1,2,3] [--modes auto,share:split,share:whole,cap:128] [--raw FILE [--sm-count 132]]
"""
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sweep_sm90 import mode_env  # noqa: E402
from trace_sm90 import EVENTS, shapes_modes_parser, traced_runs  # noqa: E402


def cta_us(runs):
    """Per CTA, the median over `runs` (trace_sm90's traced calls) of entry -> consumers done, us."""
    done, entry = EVENTS.index("consumer_done"), EVENTS.index("entry")
    per_run = [[(c[done][0] - c[entry][0]) / 1e3 for c in run["trace"] if c[entry][0] != 0] for run in runs]
    return [statistics.median(x) for x in zip(*per_run)]

def plan_tiles(sizes, sm_count, share=0, cap=0, half=2, narrow=0, mid=0):
    """The plan the launcher runs for `sizes` (groups cut at 128 rows where it cuts them: benchmark 3's 320
    rows), with plan()'s share, cap, half, narrow and mid settings: each tile's width, K steps and launch group's rows
    (M, after the cut) in the launch's tile order, and the CTAs' starts. ValueError for plans of half or reduced tiles (their shares hand nothing
    over the way split tiles do), and for plans of the narrow or mid build with a wgmma narrower than its tile
    (their steps cost less than the width's: the model here has one step cost per width)."""
    import fastlaunch
    from fastlaunch.shapes import cut_sizes

    sizes = cut_sizes(sizes, fastlaunch._C.cuts(sizes, sm_count, share, cap, 0, half, narrow, mid))
    groups, starts, _, rows, red, _ = fastlaunch._C.plan(sizes, sm_count, share, cap, 0, half, narrow, mid)
    if rows != 128 or red:
        raise ValueError(f"a plan of {'reduced tiles' if red else f'{rows}-row tiles'}: only 128-row tiles are covered")
    mma_n = fastlaunch._C.mma_n(sizes, sm_count, share, cap, 0, half, narrow, mid)
    if any(n != g[0] for n, g in zip(mma_n, groups)):
        raise ValueError(f"a plan with a wgmma narrower than its tiles (N {sorted(set(mma_n))}, the narrow or mid build): "
                         "only the main build's plans are covered (trace with the modes narrow:0 and mid:0)")
    tile_w, tile_k, tile_m = [], [], []
    for g in sorted(range(len(sizes)), key=lambda g: groups[g][3]):
        w, chunks, tn, _ = groups[g]
        tile_w += [w] * (chunks * tn)
        tile_k += [sizes[g][2] // 64] * (chunks * tn)
        tile_m += [sizes[g][0]] * (chunks * tn)
    return tile_w, tile_k, tile_m, starts


def cta_units(sizes, sm_count, share=0, cap=0, half=2, narrow=0, mid=0):
    """The plan the launcher runs for `sizes` (plan_tiles), as one list per CTA of its units in the order
    the kernel runs them (its last tile first): (width, K steps from, to, the tile's K steps, partners),
    partners being the CTAs before it that end inside that tile when this unit finishes it from inside
    (their sums are read), else ()."""
    tile_w, tile_k, _, starts = plan_tiles(sizes, sm_count, share, cap, half, narrow, mid)
    out = []
    for b in range(len(starts) - 1):
        (t0, k0), (t1, k1) = starts[b], starts[b + 1]
        units = []
        for t in range(t1 if k1 > 0 else t1 - 1, t0 - 1, -1):
            lo, hi = (k0 if t == t0 else 0), (k1 if t == t1 and k1 > 0 else tile_k[t])
            partners = []
            if lo > 0 and hi == tile_k[t]:
                c = b - 1
                while c >= 0 and starts[c + 1][0] == t and starts[c + 1][1] > 0:
                    partners.append(c)
                    c -= 1
            units.append((tile_w[t], lo, hi, tile_k[t], tuple(partners)))
        out.append(units)
    return out


def features(sizes, sm_count, share, cap, widths, narrow=0, mid=0):
    """Per CTA of the plan: [1, steps per width..., epilogues per width..., partial writes, partial reads].
    The model is the one of 128-row tiles of the main build: plans without half tiles and without a narrower
    wgmma (the runs traced here set FASTLAUNCH_SM90_HALF=0, and _NARROW=0 and _MID=0 unless the mode sets
    them, to match)."""
    rows = []
    for units in cta_units(sizes, sm_count, share, cap, 2, narrow, mid):
        f = [1.0] + [0.0] * (2 * len(widths) + 2)
        for w, lo, hi, kst, partners in units:
            wi = widths.index(w)
            f[1 + wi] += hi - lo
            if hi == kst:
                f[1 + len(widths) + wi] += 1
                f[-1] += len(partners)  # a split tile finished: its partners' partial sums read
            else:
                f[-2] += 1
        rows.append(f)
    return rows


def call_to_call(runs):
    """How far the CTAs' differences repeat between traced calls: each call's CTA times (entry to the
    consumers' end) less that call's mean, the Pearson correlation of every pair of calls, their mean."""
    done, entry = EVENTS.index("consumer_done"), EVENTS.index("entry")
    devs = []
    for run in runs:
        t = [(c[done][0] - c[entry][0]) / 1e3 for c in run["trace"] if c[entry][0] != 0]
        mean = statistics.fmean(t)
        devs.append([x - mean for x in t])
    rs = [statistics.correlation(a, b) for i, a in enumerate(devs) for b in devs[i + 1:]]
    return statistics.fmean(rs) if rs else float("nan")


SM_SLOT = 15  # the trace slot holding each CTA's SM id (kernels/sm90/trace.cuh kTrSm)


def same_sms(runs):
    """Whether every traced call put each CTA on the same SM as the first call."""
    entry = EVENTS.index("entry")
    sms = [[c[SM_SLOT][0] for c in run["trace"] if c[entry][0] != 0] for run in runs]
    return all(x == sms[0] for x in sms)


def residual_by_group(sizes, sm_count, share, cap, res, narrow=0, mid=0):
    """The fit's residuals (us) of the CTAs whose share lies in one launch group, by that group's rows:
    {M: (CTAs, mean, min, max)}."""
    _, tile_k, tile_m, starts = plan_tiles(sizes, sm_count, share, cap, 2, narrow, mid)
    by = {}
    for b, r in enumerate(res):
        (t0, _), (t1, k1) = starts[b], starts[b + 1]
        ms = {tile_m[t] for t in range(t0, t1 + 1 if k1 > 0 else t1)}
        if len(ms) == 1:
            by.setdefault(ms.pop(), []).append(r)
    return {m: (len(v), statistics.fmean(v), min(v), max(v)) for m, v in sorted(by.items())}


def build_args(mode, off=False):
    """(narrow, mid) of fastlaunch._C.plan for a trace mode: narrow:0/1 and mid:0/1 as they force the build,
    other modes the planner's choice, or with `off` (runs traced here, with both builds off) never."""
    kind, _, value = mode.partition(":")
    narrow = {"0": 2, "1": 1}.get(value, 0) if kind == "narrow" else 2 if off else 0
    mid = {"0": 2, "1": 1}.get(value, 0) if kind == "mid" else 2 if off else 0
    return narrow, mid


def plan_args(mode):
    """(share, cap, half, narrow, mid) of fastlaunch._C.plan for a trace mode (trace_sm90 / sweep_sm90 modes);
    ValueError for the share modes it does not cover (split:S, reduced tiles). Plans of the narrow or mid build
    with a wgmma narrower than its tiles (the planner's choice on benchmarks 1 and 2) are not covered either:
    cta_units raises ValueError for them (trace with mid:0)."""
    kind, _, value = mode.partition(":")
    if kind == "share" and value not in ("whole", "split"):
        raise ValueError(f"mode {mode}: only share:whole and share:split are covered")
    share = {"whole": 1, "split": 2}.get(value, 0) if kind == "share" else 0
    cap = int(value) if kind == "cap" else 0
    half = {"0": 2, "1": 1}.get(value, 0) if kind == "half" else 0
    narrow, mid = build_args(mode)
    return share, cap, half, narrow, mid


def traced(a, shapes):
    """(mode, one shape's traced calls, (narrow, mid) of its plan) for every mode and shape: traced now, or
    read from --raw."""
    if a.raw:
        with open(a.raw) as f:
            for sh in json.load(f):
                if sh["mode"] in a.modes.split(",") and sh["shape"] in shapes and sh.get("set", "bench") == "bench":
                    yield sh["mode"], sh, build_args(sh["mode"])
        return
    for mode in a.modes.split(","):
        env = dict(mode_env(mode), FASTLAUNCH_SM90_HALF="0")  # the model's tiles (features): the main build's
        for var, kind in (("FASTLAUNCH_SM90_NARROW", "narrow:"), ("FASTLAUNCH_SM90_MID", "mid:")):
            if not mode.startswith(kind):
                env[var] = "0"
        for sh in traced_runs(shapes, env, mode) or []:
            yield mode, sh, build_args(mode, off=True)


def main():
    ap = shapes_modes_parser(__doc__, "0,1,2,3", "auto,share:split,share:whole,cap:128")
    ap.add_argument("--raw", help="JSON from tools/tuning/trace_sm90.py --raw: fit its calls, trace none")
    ap.add_argument("--sm-count", type=int, default=132, help="with --raw: the traced GPU's SMs (default 132)")
    a = ap.parse_args()
    import fastlaunch
    from fastlaunch.shapes import BENCH_SHAPES

    widths = list(fastlaunch._C.tile_widths)
    sm_count = a.sm_count if a.raw else torch.cuda.get_device_properties(0).multi_processor_count
    shapes = [int(x) for x in a.shapes.split(",")]
    X, y, runs = [], [], []
    for mode, sh, build in traced(a, shapes):
        g, ms, ns, ks = BENCH_SHAPES[sh["shape"]]
        try:
            share, cap = plan_args(mode)[:2]  # (the model's tiles: half tiles off, the build from `traced`)
            f = features(list(zip(ms, ns, ks)), sm_count, share, cap, widths, *build)
        except ValueError as e:
            print(f"{mode} b{sh['shape'] + 1}: skipped: {e}")
            continue
        us = cta_us(sh["runs"])
        if len(f) != len(us):
            print(f"{mode} b{sh['shape'] + 1}: {len(us)} CTAs traced, the plan has {len(f)}: skipped")
            continue
        runs.append((mode, sh["shape"], len(X), len(f), sh["runs"], share, cap, build))
        X += f
        y += us
    Xt, yt = torch.tensor(X, dtype=torch.float64), torch.tensor(y, dtype=torch.float64)
    coef = torch.linalg.lstsq(Xt, yt.unsqueeze(1)).solution.squeeze(1)
    res = yt - Xt @ coef
    names = (["constant"] + [f"step W={w}" for w in widths] + [f"epilogue W={w}" for w in widths]
             + ["partial write", "partial read"])
    print(f"fit over {len(y)} CTAs of {len(runs)} runs (SM count {sm_count}); ns:")
    print("| term | ns |")
    print("|---|---|")
    for n, c in zip(names, coef.tolist()):
        print(f"| {n} | {c * 1e3:.0f} |")
    print("| mode | bench | CTAs | busiest CTA us | CTA spread us | residual spread us | call-to-call r | same SMs |")
    print("|---|---|---|---|---|---|---|---|")
    for mode, s, i0, n, calls, _, _, _ in runs:
        ys, rs = yt[i0:i0 + n], res[i0:i0 + n]
        print(f"| {mode} | {s + 1} | {n} | {ys.max():.1f} | {ys.max() - ys.min():.1f} | {rs.max() - rs.min():.1f} "
              f"| {call_to_call(calls):.2f} | {'yes' if same_sms(calls) else 'no'} |")
    print("residuals (us) of the CTAs whose share lies in one group, by the group's rows: CTAs, mean [min, max]")
    for mode, s, i0, n, _, share, cap, build in runs:
        g, ms, ns, ks = BENCH_SHAPES[s]
        by = residual_by_group(list(zip(ms, ns, ks)), sm_count, share, cap, res[i0:i0 + n].tolist(), *build)
        print(f"{mode} b{s + 1}: " + "; ".join(f"M={m}: {c}, {mu:+.1f} [{lo:+.1f}, {hi:+.1f}]"
                                               for m, (c, mu, lo, hi) in by.items()))


if __name__ == "__main__":
    main()
