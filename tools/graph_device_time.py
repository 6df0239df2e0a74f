"""Whether one call's device time shrinks when its launches reach the GPU as one CUDA graph: each shape
timed as bench_kernels times it (CUDA events around one call, the L2 flushed before each, median over
`--reps`, three input sets in turn), once as `fastlaunch.fast_launch(data)` and once as the replay of a
`torch.cuda.CUDAGraph` that captured that same call on the same input set (the graph holds the call's
kernels and its programmatic dependency; the captured pointers are the set's own, so nothing is updated
between replays). The two run alternately for `--rounds` rounds, the order reversed every other round.
Before timing, every replay's output is checked against the fp32 reference (outputs NaN-poisoned first).

What it answers: how much of a call's event time is the submission of two launches (the conversion, then
the GEMM) rather than the kernels' own work. It does not measure what a per-call graph would cost the host
(updating the captured pointers), only the device side.

python tools/graph_device_time.py [--reps 30] [--rounds 2] [--sets bench,tests] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
from statistics import geometric_mean, mean

import torch

import fastlaunch
from fastlaunch import reference as R
from fastlaunch.shapes import BENCH_SHAPES, TEST_SHAPES, describe
from fastlaunch.timing import device_us, l2_flush_buffer

SETS = {"bench": BENCH_SHAPES, "tests": TEST_SHAPES}


def capture(data):
    """A CUDAGraph of one fast_launch(data) call (warmed up on a side stream first, as torch asks)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fastlaunch.fast_launch(data)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fastlaunch.fast_launch(data)
    return graph


def shape_row(shape, flush, reps, rounds, sets=3):
    g, ms, ns, ks = shape
    inputs = [R.generate_input(ms, ns, ks, g, seed=9100 + j, device="cuda") for j in range(sets)]
    refs = [R.ref_kernel(R.clone_outputs(d)) for d in inputs]
    graphs = [capture(d) for d in inputs]
    ok = True
    for d, ref, graph in zip(inputs, refs, graphs):
        R.poison(d)
        graph.replay()
        torch.cuda.synchronize()
        good, _msg = R.check([c for _a, _b, c in d[0]], ref)
        ok = ok and good
    direct, replay = [], []
    for r in range(rounds):
        count = iter(range(1 << 40))
        runs = [(direct, lambda: fastlaunch.fast_launch(inputs[next(count) % sets])),
                (replay, lambda: graphs[next(count) % sets].replay())]
        for out, fn in runs if r % 2 == 0 else runs[::-1]:
            out.append(device_us(fn, flush, reps))
    return {"shape": describe(shape), "ok": ok, "direct_us": direct, "replay_us": replay}


def table(rows) -> list[str]:
    """The table's lines: per shape each round's direct and replay times, the mean difference, correctness;
    then the geomeans of the per-shape means."""
    lines = ["| shape | direct us | replay us | replay - direct us | correct |", "|---|---|---|---|---|"]
    for row in rows:
        d, g = row["direct_us"], row["replay_us"]
        lines.append(f"| {row['shape']} | {' / '.join(f'{x:.1f}' for x in d)} | "
                     f"{' / '.join(f'{x:.1f}' for x in g)} | {mean(g) - mean(d):+.2f} | {row['ok']} |")
    d = geometric_mean([mean(r["direct_us"]) for r in rows])
    g = geometric_mean([mean(r["replay_us"]) for r in rows])
    lines.append(f"| geomean | {d:.2f} | {g:.2f} | {g - d:+.2f} | {all(r['ok'] for r in rows)} |")
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--sets", default="bench,tests", help="comma-separated: bench, tests")
    p.add_argument("--json")
    a = p.parse_args()
    shapes = [s for name in a.sets.split(",") for s in SETS[name]]
    flush = l2_flush_buffer()
    rows = [shape_row(s, flush, a.reps, a.rounds) for s in shapes]
    print(f"{torch.cuda.get_device_name()}; device us per call (events, L2 flushed), direct / graph replay, "
          f"{a.rounds} rounds")
    print()
    print("\n".join(table(rows)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
