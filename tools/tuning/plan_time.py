"""What planning a launch costs the host on a miss of the launcher's plan memo (kernels/sm90/plan/planner.h, through
fastlaunch._C.plan and fastlaunch._C.cuts): per launch the best of REPS runs, on this machine's CPU (no
GPU needed), of its plan and of the group cuts' choice (which plans the launch cut and uncut where a cut
is possible; the launcher serves those plans from its memo, so a miss costs at most the sum). Launches:
the four benchmark shapes, the task's test shapes, COUNT random shapes of SEED, and MoE-like draws (G=8,
N=4096, K=7168, M per group 1..512 at random: a serving loop whose group sizes change every call plans
every call); and such draws through the launcher's memo of plans (keyed by each group's class of M, so a
decode step's plan is found whatever its rows).

python tools/tuning/plan_time.py [--reps 20] [--count 40] [--seed 7] [--sm-count 132]
"""
import argparse
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # the package of this clone
import fastlaunch  # noqa: E402
from fastlaunch import shapes as S  # noqa: E402


def best_us(f, reps):
    """Best of `reps` calls of f(), us."""
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best * 1e6


def rows(reps, count, seed, sm_count):
    """[(label, launches, plan us median, max, cuts us median, max)]: the plan of the launch as the
    launcher cuts it, and the cuts' choice."""
    def sizes(shape):
        _g, ms, ns, ks = shape
        return list(zip(ms, ns, ks))

    rnd = random.Random(seed)
    moe = [[(rnd.randint(1, 512), 4096, 7168) for _ in range(8)] for _ in range(count)]
    sets = [(f"benchmark {i + 1}", [sizes(s)]) for i, s in enumerate(S.BENCH_SHAPES)]
    sets += [("test shapes", [sizes(s) for s in S.TEST_SHAPES]),
             (f"random shapes (seed {seed})", [sizes(s) for s in S.random_shapes(count, seed)]),
             ("G=8 N=4096 K=7168, random M", moe)]
    out = []
    for label, launches in sets:
        plan, cuts = [], []
        for x in launches:
            cut = S.cut_sizes(x, fastlaunch._C.cuts(x, sm_count))
            plan.append(best_us(lambda: fastlaunch._C.plan(cut, sm_count), reps))
            cuts.append(best_us(lambda: fastlaunch._C.cuts(x, sm_count), reps))
        out.append((label, len(launches), statistics.median(plan), max(plan), statistics.median(cuts), max(cuts)))
    return out


def memo_rows(count, seed, sm_count, reps=50):
    """[(label, launches, memo ns per launch, misses of count x reps)]: serving draws (G=8, N=2048, K=7168, rows per
    group drawn anew every launch) through the launcher's memo of plans, keyed by each group's class of M."""
    rnd = random.Random(seed)
    out = []
    for label, hi in (("decode, 1-8 rows per group", 8), ("1-64 rows per group", 64), ("prefill, 1-512", 512)):
        launches = [[(rnd.randint(1, hi), 2048, 7168) for _ in range(8)] for _ in range(count)]
        ns, misses = fastlaunch._C.plan_memo_ns(launches, sm_count, reps)
        out.append((label, count * reps, ns, misses))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--count", type=int, default=40)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--sm-count", type=int, default=132)
    a = ap.parse_args(argv)
    if a.reps < 1 or a.count < 1 or a.sm_count < 1:
        ap.error("--reps, --count and --sm-count must be at least 1")
    print("| launches | count | plan us (median) | plan us (max) | cuts us (median) | cuts us (max) |")
    print("|---|---|---|---|---|---|")
    for label, n, pm, px, cm, cx in rows(a.reps, a.count, a.seed, a.sm_count):
        print(f"| {label} | {n} | {pm:.1f} | {px:.1f} | {cm:.1f} | {cx:.1f} |")
    print()
    print("| G=8 N=2048 K=7168, drawn anew every launch | launches | through the launcher's memo, ns per launch | "
          "planned (misses) |")
    print("|---|---|---|---|")
    for label, n, ns, misses in memo_rows(a.count, a.seed, a.sm_count):
        print(f"| {label} | {n} | {ns:.0f} | {misses} |")


if __name__ == "__main__":
    main()
