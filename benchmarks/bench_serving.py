"""Cost per call of the NVFP4 grouped GEMM in a serving loop, where inputs change every call, in one run.

Cases (rows), each timed the same way; inputs are made beforehand (the host never times their generation) and
a case with several inputs runs them in rotation, one per call:
  a fixed        the task's G=8 benchmark-1 input through fast_launch, the same data every call
  i public task  a's input through the task layout's public wrapper, fastlaunch.grouped_gemm(a, sfa, b, sfb, c) (an
                 eager call on CUDA tensors goes through fastlaunch._C.grouped_gemm_eager, past the dispatcher)
  b decode       fast_launch on G=8, N=2048, K=7168 with 1-8 rows per group drawn anew for every input (64 inputs,
                 sharing one weight set, as one layer's experts do)
  b prefill      the same with 1-512 rows per group
  c test shapes  15 inputs of the task's 10 test shapes through fast_launch
  d weight sets  64 weight sets of G=8, N=2048, K=7168 (3.8 GB of B), 8 rows per group, through fast_launch:
                 every call reads B from new addresses
  e masked       fastlaunch._C.grouped_mm_masked (the serving layout) with masked_m changing every call on the
                 device: 64 count vectors in device memory, rotated, never read by the host; decode G=8 (1-8
                 tokens per expert, max_m 8), prefill G=8 (64-512, max_m 512), the same prefill with a random
                 half of each vector's experts at 0 rows ("half empty"), decode G=64 (1-8)
  g public       e's decode rows through the entry a user calls, fastlaunch.grouped_mm_masked (an eager call on
                 CUDA tensors goes straight to fastlaunch._C.grouped_mm_masked, past the torch dispatcher), with
                 bf16 output and a per-expert alpha: the full serving call
  h weight-only  e's decode rows with the activations in bf16 (e's values, exactly), sfa None: the conversion
                 kernel rounds them to fp16 and permutes them into the GEMM's K order (two launches)
  f torch        the peer: torch._grouped_mm in bf16 on the same experts' weights dequantised, with device-side
                 group offsets from the same counts as e

Columns:
  check          the case's output against the fp32 reference once before timing (fastlaunch rows)
  kernels/call   GPU kernels per call, counted by torch.profiler over the case's inputs after all timing
  host           time.perf_counter_ns around 20 calls with no synchronisation inside, per call: median, p10, p90
                 over 200 batches; the GPU is drained between batches, so its queue never fills
  C loop         fastlaunch._C.launch_repeat: the launcher driven from a C loop on an input unpacked once (no
                 Python), 20 launches per batch, one of the case's inputs per batch (task-layout rows)
  bare           one cuLaunchKernelEx of an empty kernel taking the sm_90a GEMM's parameter block for the row's G
                 (fastlaunch._bench.bare_launch_ns, a C loop, the same stream, measured in this run). A fastlaunch
                 call makes two launches (the A conversion, then the GEMM; three with split-K, one for the skinny
                 kernel: see kernels/call); "2 bare" adds a bare launch of the conversion's block. torch rows show
                 the same anchors for their G, for scale
  back-to-back   CUDA events around 64 or more calls queued back to back, per call: what a caller waits for
  graph          the same calls captured into one torch.cuda.CUDAGraph (a rotating case: its whole rotation; a
                 fixed one: 16 calls), replays timed by CUDA events, per call: the device time with no host in
                 the way
  host/bare, b2b/graph   the ratios (host over one bare launch; back-to-back over graph device time)
Nothing flushes the L2 between calls: these are the costs of calls that follow each other. The masked rows are
timed last, so that a fault there leaves the others measured; each row's figures also go to stderr as it completes,
and a case still running after 5 minutes (a kernel that never finishes) ends the run with a traceback.

python benchmarks/bench_serving.py [--json out.json] [--png chart.png] [--dry-run]
--dry-run (no GPU needed): one input of each case generated on the CPU; task-layout inputs unpacked
(fastlaunch.unpack), masked arguments checked up to the device check, torch._grouped_mm run on the CPU.
"""
from __future__ import annotations

import argparse
import datetime
import faulthandler
import functools
import itertools
import json
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this clone's package

import torch

import fastlaunch
from fastlaunch import reference as R
from fastlaunch.shapes import BENCH_SHAPES, TEST_SHAPES, describe
from fastlaunch.timing import events_us, host_ns_stats, kernels_per_call, load_pyplot, source_commit

N_SERVE, K_SERVE, G_SERVE = 2048, 7168, 8  # the serving cases' expert sizes
POOL = 64              # inputs in a rotating case (b, d) and count vectors in e and f
TEST_INPUTS = 15       # c: inputs over the 10 test shapes
BATCHES, PER_BATCH = 200, 20
B2B_CALLS = 64         # at least this many calls (whole rotations) between the back-to-back events
GRAPH_FIXED_CALLS = 16  # calls captured into the graph of a fixed-input case
REPS = 10              # event-timed repetitions (back-to-back, graph)
CASE_LIMIT_S = 300     # a case takes seconds; one that takes this long is hung
# the masked cases (and their torch peers): name, G, max_m, counts lo..hi
# (name, G, max_m, lo, hi, empty): empty, each count vector's experts at zero rows (a random half, or none)
MASKED = (("decode", G_SERVE, 8, 1, 8, False), ("prefill", G_SERVE, 512, 64, 512, False),
          ("prefill half empty", G_SERVE, 512, 64, 512, True), ("decode", 64, 8, 1, 8, False))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Case:
    """One row: its inputs as calls, what the checks need, and the measurements (r)."""

    def __init__(self, key: str, label: str, kind: str, groups: int, short: str, calls: list, *, datas=(),
                 check_idx=(0,), masked=(), counts=(), alpha=None, note: str = ""):
        self.key, self.label, self.short = key, label, short
        self.kind = kind              # "task" (fast_launch), "masked" (grouped_mm_masked) or "torch" (_grouped_mm)
        self.groups = groups          # G: picks the parameter block of the bare anchor
        self.calls = calls            # zero-argument callables, one per input, in rotation order
        self.datas = list(datas)      # task: the inputs (for the checks and the C loop)
        self.check_idx = check_idx    # task: which inputs are checked against the reference
        self.masked = masked          # masked: (a, sfa, b, sfb, out) ...
        self.counts = list(counts)    # ... and the count vectors, one per call
        self.alpha = alpha            # masked: the per-expert alpha the calls pass, if any
        self.note = note              # why the case was not timed, if it was not
        self.r = {}                   # the measurements


def rotation(calls):
    """One call per invocation, the inputs in turn (the same Python overhead whatever the pool's size)."""
    nxt = itertools.cycle(calls).__next__

    def step():
        nxt()()
    return step


# ============================================================================ inputs

def nvfp4_operand(rows: int, k: int, gen: torch.Generator, device):
    """One operand drawn on `device` by the rule the task's generator uses (fastlaunch.reference.generate_input):
    packed E2M1 [rows, k//2, 1] with each nibble masked to sign + 2 low bits, plain E4M3 scales [rows, k//16, 1]
    (1 or 2) and their reordered view. On the GPU, so that a pool of inputs takes no host time to make."""
    raw = torch.randint(0, 256, (1, rows, k // 2), dtype=torch.uint8, generator=gen, device=device) & 0b1011_1011
    sf = torch.randint(1, 3, (rows, k // 16, 1), generator=gen, device=device).to(torch.float8_e4m3fn)
    return raw.permute(1, 2, 0).view(torch.float4_e2m1fn_x2), sf, R.reorder_scales(sf)


def task_input(ms, weights, n: int, k: int, gen, device):
    """The task's input tuple for rows `ms` per group on the given weights [(b, sfb, sfb_r)] per group."""
    abc, sf, sfr, sizes = [], [], [], []
    for m, (b, sfb, sfb_r) in zip(ms, weights):
        a, sfa, sfa_r = nvfp4_operand(m, k, gen, device)
        c = torch.randn((1, m, n), dtype=torch.float16, generator=gen, device=device).permute(1, 2, 0)
        abc.append((a, b, c))
        sf.append((sfa, sfb))
        sfr.append((sfa_r, sfb_r))
        sizes.append((m, n, k, 1))
    return abc, sf, sfr, sizes


def on_weights(data, weights):
    """The same activations and outputs on other weights."""
    abc, sf, sfr, sizes = data
    return ([(a, w[0], c) for (a, _b, c), w in zip(abc, weights)], [(sa, w[1]) for (sa, _sb), w in zip(sf, weights)],
            [(sa, w[2]) for (sa, _sb), w in zip(sfr, weights)], sizes)


def task_case(key, label, short, datas, check_idx=(0,)):
    calls = [functools.partial(fastlaunch.fast_launch, d) for d in datas]
    return Case(key, label, "task", len(datas[0][0]), short, calls, datas=datas, check_idx=check_idx)


def fixed_case(device):
    g, ms, ns, ks = BENCH_SHAPES[0]
    data = R.generate_input(ms, ns, ks, g, 11, device=device)
    return task_case("a", f"fixed: benchmark 1, {describe(BENCH_SHAPES[0])}", "fixed G=8", [data])


def public_task_case(fixed):
    """a's input through fastlaunch.grouped_gemm, the lists taken from it once."""
    data = fixed.datas[0]
    a, b, c = ([x[i] for x in data[0]] for i in range(3))
    sfa, sfb = [p[0] for p in data[2]], [p[1] for p in data[2]]
    call = functools.partial(fastlaunch.grouped_gemm, a, sfa, b, sfb, c)
    return Case("i", f"public task: {fixed.label.split(': ', 1)[1]}, fastlaunch.grouped_gemm", "task", len(a),
                "public task G=8", [call], datas=[data], check_idx=(0,))


def random_rows_case(name, hi, pool, device, seed):
    gen = torch.Generator(device=device).manual_seed(seed)
    rnd = random.Random(seed)
    weights = [nvfp4_operand(N_SERVE, K_SERVE, gen, device) for _ in range(G_SERVE)]
    datas = [task_input([rnd.randint(1, hi) for _ in range(G_SERVE)], weights, N_SERVE, K_SERVE, gen, device)
             for _ in range(pool)]
    return task_case("b", f"{name}: G={G_SERVE} N={N_SERVE} K={K_SERVE}, 1-{hi} rows per group, new every call",
                     f"{name} G={G_SERVE}", datas, (0, pool - 1) if pool > 1 else (0,))


def test_shapes_case(count, device):
    datas = []
    for i in range(count):
        g, ms, ns, ks = TEST_SHAPES[i % len(TEST_SHAPES)]
        datas.append(R.generate_input(ms, ns, ks, g, 300 + i, device=device))
    return task_case("c", f"test shapes: {count} inputs of the {len(TEST_SHAPES)} task test shapes, G=2-4",
                     "test shapes", datas, tuple(range(count)))


def weight_sets_case(sets, device, seed=400, rows=8):
    gen = torch.Generator(device=device).manual_seed(seed)
    first = [nvfp4_operand(N_SERVE, K_SERVE, gen, device) for _ in range(G_SERVE)]
    base = task_input([rows] * G_SERVE, first, N_SERVE, K_SERVE, gen, device)
    datas = [base] + [on_weights(base, [nvfp4_operand(N_SERVE, K_SERVE, gen, device) for _ in range(G_SERVE)])
                      for _ in range(sets - 1)]
    return task_case("d", f"weight sets: {sets} x G={G_SERVE} N={N_SERVE} K={K_SERVE}, {rows} rows per group",
                     f"{sets} weight sets G={G_SERVE}", datas, (0, sets - 1) if sets > 1 else (0,))


def serving_inputs(g, max_m, lo, hi, pool, device, seed, empty=False):
    """The masked layout's tensors (reference.generate_masked_input) and `pool` count vectors int32 [g] in lo..hi
    on the device; empty: a random half of each vector's experts at 0 (the others as without it, the same seed)."""
    a, sfa, b, sfb, _m, out = R.generate_masked_input(g, max_m, N_SERVE, K_SERVE, max_m, seed, device=device)
    gen = torch.Generator(device=device).manual_seed(seed)
    counts = torch.randint(lo, hi + 1, (pool, g), generator=gen, device=device, dtype=torch.int32)
    if empty:
        order = torch.rand((pool, g), generator=gen, device=device).argsort(dim=1)
        counts = counts.scatter(1, order[:, : g // 2], 0)
    return (a, sfa, b, sfb, out), list(counts.unbind(0))


def masked_case(name, g, max_m, lo, hi, tensors, counts, gmm):
    a, sfa, b, sfb, out = tensors
    label = f"masked {name}: G={g} N={N_SERVE} K={K_SERVE}, {lo}-{hi} tokens per expert, max_m {max_m}"
    calls = [functools.partial(gmm, a, sfa, b, sfb, m, out) for m in counts] if gmm else []
    note = "" if gmm else "not in this build: fastlaunch._C has no grouped_mm_masked"
    return Case("e", label, "masked", g, f"masked {name} G={g}", calls, masked=tensors, counts=counts, note=note)


def public_case(name, g, max_m, lo, hi, tensors, counts, gmm):
    """e's inputs through fastlaunch.grouped_mm_masked with a bf16 out and alpha (powers of two, so the check's
    reference scaled the same way is exact)."""
    a, sfa, b, sfb, _out = tensors
    out = torch.empty((g, max_m, N_SERVE), dtype=torch.bfloat16, device=a.device)
    alpha = torch.tensor([2.0 ** (e % 3 - 1) for e in range(g)], dtype=torch.float32, device=a.device)
    label = (f"public grouped_mm_masked {name}: G={g} N={N_SERVE} K={K_SERVE}, {lo}-{hi} tokens per expert, "
             f"max_m {max_m}, bf16 out, alpha")
    calls = [functools.partial(fastlaunch.grouped_mm_masked, a, sfa, b, sfb, m, out, alpha=alpha) for m in counts]
    note = "" if gmm else "not in this build: fastlaunch._C has no grouped_mm_masked"
    return Case("g", label, "masked", g, f"public {name} G={g}", calls if gmm else [], masked=(a, sfa, b, sfb, out),
                counts=counts, alpha=alpha, note=note)


def weight_only_case(name, g, max_m, lo, hi, tensors, counts, gmm):
    """e's inputs with a as bf16 [G, max_m, K] (the NVFP4 activations' values, exact in bf16), sfa None: activations
    as a bf16 model hands them over."""
    a, sfa, b, sfb, out = tensors
    x = dequantised(a, sfa, max_m, g).to(torch.bfloat16)
    label = (f"weight-only grouped_mm_masked {name}: G={g} N={N_SERVE} K={K_SERVE}, {lo}-{hi} tokens per expert, "
             f"max_m {max_m}, bf16 activations")
    calls = [functools.partial(fastlaunch.grouped_mm_masked, x, None, b, sfb, m, out) for m in counts] if gmm else []
    note = "" if gmm else "not in this build: fastlaunch._C has no grouped_mm_masked"
    return Case("h", label, "masked", g, f"weight-only {name} G={g}", calls, masked=(x, None, b, sfb, out),
                counts=counts, note=note)


def dequantised(packed: torch.Tensor, blocked: torch.Tensor, rows: int, experts: int) -> torch.Tensor:
    """[G, rows, K] bf16 (exact: every E2M1 x E4M3 product is a bf16 value) of the first `experts` experts of a
    masked-layout operand; with fewer experts than G, the last is repeated as a view."""
    g = packed.shape[0]
    plain = R.unblock_scales(blocked[:experts], rows)
    out = torch.stack([R.dequantize(packed[e], plain[e]).to(torch.bfloat16) for e in range(experts)])
    return out if experts == g else out[-1:].expand(g, *out.shape[1:])


def torch_case(name, g, max_m, lo, hi, tensors, counts, experts):
    """torch._grouped_mm on the experts' weights dequantised ([G, N, K] bf16, passed as its [G, K, N] transpose) and
    activations [G*max_m, K]; offsets: the cumulative counts, computed on the device."""
    a, sfa, b, sfb, _out = tensors
    weights_t = dequantised(b, sfb, N_SERVE, experts).transpose(-2, -1)
    acts = dequantised(a, sfa, max_m, experts).reshape(g * max_m, K_SERVE)
    offsets = [c.cumsum(0, dtype=torch.int32) for c in counts]
    calls = [functools.partial(torch._grouped_mm, acts, weights_t, offs=o) for o in offsets]
    return Case("f", f"torch._grouped_mm bf16 {name}: G={g} N={N_SERVE} K={K_SERVE}, {lo}-{hi} rows per expert",
                "torch", g, f"torch {name} G={g}", calls)


# ============================================================================ measurements

def sync():
    torch.cuda.synchronize()


def check_case(case) -> str:
    """One call per checked input against the fp32 reference: "ok" or what differs."""
    if case.kind == "task":
        for i in case.check_idx:
            data = case.datas[i]
            ref = R.ref_kernel(R.clone_outputs(data))
            R.poison(data)
            case.calls[i]()  # (a task row's calls are its inputs' calls, in order)
            sync()
            ok, msg = R.check([c for _a, _b, c in data[0]], ref)
            if not ok:
                return f"WRONG (input {i}: {msg})"
        return "ok"
    if case.kind == "masked":
        a, sfa, b, sfb, out = case.masked
        m = case.counts[0]
        out.fill_(float("nan"))
        before = out.clone()
        case.calls[0]()
        sync()
        rtol = 4e-3 if out.dtype == torch.bfloat16 else R.RTOL  # bf16 keeps 8 significant bits, fp16 11
        ok, msg = R.check_masked(out, R.ref_masked(a, sfa, b, sfb, m, alpha=case.alpha), m, before, rtol=rtol)
        return "ok" if ok else f"WRONG ({msg})"
    return "-"


def c_loop_ns(datas) -> dict:
    per = []
    for i in range(BATCHES):
        per.append(fastlaunch._C.launch_repeat(datas[i % len(datas)], PER_BATCH))
        sync()
    per.sort()
    return {"median": statistics.median(per), "p10": per[len(per) // 10], "p90": per[9 * len(per) // 10]}


def graph_us(calls) -> float:
    seq = calls if len(calls) > 1 else calls * GRAPH_FIXED_CALLS
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for c in seq:
            c()
    graph.replay()
    sync()
    return events_us(graph.replay, sync, REPS) / len(seq)


def measure(case) -> None:
    """Fills case.r: check, host, C loop, back-to-back and graph figures (each that fails says why)."""
    r = case.r
    for c in case.calls:  # set-up (per-device state, caches) outside the timing and the capture
        c()
    sync()
    r["check"] = check_case(case)
    step = rotation(case.calls)
    r["host_ns"] = host_ns_stats(step, BATCHES, PER_BATCH, sync, warmup=3)
    if case.kind == "task":
        r["c_loop_ns"] = c_loop_ns(case.datas)
    n = len(case.calls) * -(-B2B_CALLS // len(case.calls))

    def queued():
        for _ in range(n):
            step()
    r["b2b_us"] = events_us(queued, sync, REPS) / n
    try:
        r["graph_us"] = graph_us(case.calls)
    except Exception as e:  # noqa: BLE001 - the row says why
        r["graph_error"] = f"{type(e).__name__}: {e}"
        sync()


def case_kernels_per_call(case):
    """GPU kernels per call over one pass of the case's inputs (a fixed case: GRAPH_FIXED_CALLS calls)."""
    return kernels_per_call(case.calls if len(case.calls) > 1 else case.calls * GRAPH_FIXED_CALLS)


def bare_anchors(bench, blocks) -> dict:
    """Host ns per bare launch for every parameter block size: {bytes: {"plain": stats, "pdl": stats}}."""
    stream = torch.cuda.current_stream().cuda_stream
    out = {}
    for nbytes in sorted({b for _k, _g, b in blocks}):
        out[nbytes] = {}
        for name, pdl in (("plain", False), ("pdl", True)):
            med, p10, p90 = bench.bare_launch_ns(nbytes, PER_BATCH, BATCHES, stream, pdl)
            out[nbytes][name] = {"median": med, "p10": p10, "p90": p90}
    return out


def block_bytes(blocks, kernel: str, groups: int):
    """The parameter block a launch of `groups` groups takes (the smallest that holds them; larger G is split into
    launches of the largest)."""
    sizes = sorted((g, b) for k, g, b in blocks if k == kernel)
    return next((b for g, b in sizes if g >= groups), sizes[-1][1])


def load_bench():
    """fastlaunch._bench with the bare-launch entry points, or (None, why)."""
    try:
        import fastlaunch._bench as bench
    except ImportError as e:
        return None, f"fastlaunch._bench is not built ({e}); build with FASTLAUNCH_BUILD_BENCH=1"
    if not hasattr(bench, "bare_launch_ns"):
        return None, "fastlaunch._bench has no bare_launch_ns (an older build); rebuild with FASTLAUNCH_BUILD_BENCH=1"
    return bench, ""


# ============================================================================ output

COLUMNS = ["case", "inputs", "check", "kernels/call", "host us/call", "p10", "p90", "C loop us",
           "bare us (1 launch, GEMM block)", "2 bare us (a call = 2 launches)", "back-to-back us/call",
           "graph device us/call", "host/bare", "b2b/graph"]


def header_row() -> str:
    return "| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS)


def fmt(v, digits=2):
    return "-" if v is None else f"{v:.{digits}f}"


def row_cells(case) -> list:
    r = case.r
    host = r.get("host_ns")
    bare, bare2 = r.get("bare_ns"), r.get("bare2_ns")
    b2b, graph = r.get("b2b_us"), r.get("graph_us")
    label = f"{case.key} {case.label}" + (f" ({case.note})" if case.note else "")
    kpc = r.get("kernels_per_call")
    return [label, str(len(case.calls) or len(case.counts)), r.get("check", "-"), fmt(kpc, 1),
            fmt(host and host["median"] / 1e3), fmt(host and host["p10"] / 1e3), fmt(host and host["p90"] / 1e3),
            fmt(r.get("c_loop_ns") and r["c_loop_ns"]["median"] / 1e3),
            "-" if bare is None else f"{bare / 1e3:.2f} ({r['bare_bytes']} B)", fmt(bare2 and bare2 / 1e3),
            fmt(b2b, 1), fmt(graph, 1) if graph is not None else ("failed" if "graph_error" in r else "-"),
            fmt(host and bare and host["median"] / bare), fmt(b2b and graph and b2b / graph)]


def summary(cases) -> str:
    fl = [c for c in cases if c.kind != "torch" and c.r.get("host_ns") and c.r.get("bare_ns")]
    parts = []
    if fl:
        ratios = sorted(c.r["host_ns"]["median"] / c.r["bare_ns"] for c in fl)
        ratios2 = sorted(c.r["host_ns"]["median"] / c.r["bare2_ns"] for c in fl)
        parts.append(f"fastlaunch host per call {ratios[0]:.2f}-{ratios[-1]:.2f}x one bare launch "
                     f"({ratios2[0]:.2f}-{ratios2[-1]:.2f}x two) over {len(fl)} rows")
    masked = [c for c in cases if c.key == "e"]
    peers = [c for c in cases if c.kind == "torch"]
    public = [(c, next((m for m in masked if m.groups == c.groups and m.label.split(":")[0].split()[-1] ==
                        c.label.split(":")[0].split()[-1]), None)) for c in cases if c.key == "g"]
    pub = [f"{c.r['host_ns']['median'] / m.r['host_ns']['median']:.2f}x ({c.short})" for c, m in public
           if m and c.r.get("host_ns") and m.r.get("host_ns")]
    task_pub = [(c, m) for c in cases if c.key == "i" for m in cases if m.key == "a"]
    pub += [f"{c.r['host_ns']['median'] / m.r['host_ns']['median']:.2f}x (public task wrapper over fast_launch)"
            for c, m in task_pub if c.r.get("host_ns") and m.r.get("host_ns")]
    if pub:
        parts.append("host per call of the public entry over fastlaunch._C: " + "; ".join(pub))
    pairs = [f"{p.r['host_ns']['median'] / m.r['host_ns']['median']:.1f}x host, "
             f"{p.r['b2b_us'] / m.r['b2b_us']:.1f}x back-to-back ({m.short})"
             for m, p in zip(masked, peers) if m.r.get("b2b_us") and p.r.get("b2b_us")]
    if pairs:
        parts.append("torch._grouped_mm over masked fastlaunch: " + "; ".join(pairs))
    halves = [(h, f) for h in masked if "half empty" in h.label for f in masked
              if f.label == h.label.replace(" half empty", "")]
    halves = [f"{h.r['graph_us'] / f.r['graph_us']:.2f}x ({h.short.replace(' half empty', '')})" for h, f in halves
              if h.r.get("graph_us") and f.r.get("graph_us")]
    if halves:
        parts.append("a masked step with half the experts empty over the full step (graph): " + "; ".join(halves))
    both = [c.r["b2b_us"] / c.r["graph_us"] for c in cases if c.r.get("b2b_us") and c.r.get("graph_us")]
    if both:
        parts.append(f"back-to-back over graph device time {min(both):.2f}-{max(both):.2f}x")
    checks = [c.r["check"] for c in cases if c.r.get("check") not in (None, "-")]
    parts.append(f"outputs checked: {sum(x == 'ok' for x in checks)} of {len(checks)} ok")
    return "summary: " + "; ".join(parts)


def chart(cases, path, title):
    plt = load_pyplot()
    if not plt:
        return
    rows = [c for c in cases if c.r.get("host_ns")]
    names = [f"{c.key} {c.short}" for c in rows][::-1]
    series = [("host us/call", lambda c: c.r["host_ns"]["median"] / 1e3, "#3a7"),
              ("back-to-back us/call", lambda c: c.r.get("b2b_us"), "#37a"),
              ("graph device us/call", lambda c: c.r.get("graph_us"), "#a73")]
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(rows) + 2))
    h = 0.27
    for i, (label, get, color) in enumerate(series):
        vals = [get(c) or 0 for c in rows][::-1]
        ax.barh([y + (1 - i) * h for y in range(len(rows))], vals, height=h, label=label, color=color)
    bare = [c.r["bare_ns"] for c in rows if c.r.get("bare_ns")]
    if bare:
        ax.axvline(min(bare) / 1e3, color="k", ls="--", lw=1, label="one bare cuLaunchKernelEx")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(names)
    ax.set_xscale("log")
    ax.set_xlabel("us per call (log)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def commit() -> str:
    return source_commit(ROOT) or "unknown"


# ============================================================================ runs

def dry_run() -> int:
    """No GPU: one input of each case on the CPU; the task layout unpacked, the masked arguments checked up to the
    device check, torch._grouped_mm run on the CPU. Nothing is timed."""
    print(f"bench_serving dry run, {datetime.datetime.now().isoformat(timespec='seconds')}, torch {torch.__version__}"
          f", fastlaunch {commit()}: no GPU, nothing launched or timed")
    print()
    print(header_row())
    failures = []
    cases = [fixed_case("cpu"), random_rows_case("decode", 8, 1, "cpu", 100),
             random_rows_case("prefill", 512, 1, "cpu", 200), test_shapes_case(len(TEST_SHAPES), "cpu"),
             weight_sets_case(1, "cpu")]
    for case in cases:
        groups = [fastlaunch.unpack(d) for d in case.datas]
        expected = [len(d[0]) for d in case.datas]
        ok = groups == expected
        failures += [] if ok else [case.key]
        print(f"{case.key} {case.label}: {len(case.datas)} input(s) unpacked, G = {groups}" + ("" if ok else " WRONG"))
    pub = public_task_case(cases[0])  # its lists: the fixed input's, which the eager entry declines on the CPU
    ok = pub.calls[0].args[0][0] is cases[0].datas[0][0][0][0] and fastlaunch._C.grouped_gemm_eager(
        *pub.calls[0].args) is NotImplemented
    failures += [] if ok else [pub.key]
    print(f"{pub.key} {pub.label}: lists of the fixed input, declined on CPU tensors" + ("" if ok else " WRONG"))
    gmm = getattr(fastlaunch._C, "grouped_mm_masked", None)
    for i, (name, g, max_m, lo, hi, empty) in enumerate(MASKED):
        tensors, counts = serving_inputs(g, max_m, lo, hi, 1, "cpu", 500 + i - empty, empty)
        case = masked_case(name, g, max_m, lo, hi, tensors, counts, gmm)
        if not gmm:
            print(f"e {case.label}: {case.note}")
        else:
            try:
                case.calls[0]()
                msg, ok = "ran on CPU tensors (expected the device check to refuse them)", False
            except ValueError as e:
                ok = str(e) == "a must be on a CUDA device, got cpu"
                msg = f"argument checks passed up to the device check ({e})" if ok else f"refused: {e}"
            failures += [] if ok else [case.key]
            print(f"e {case.label}: {msg}")
        if name == "decode" and g == G_SERVE:  # the public entry on the CPU is the fp32 reference: G=8 only (~1 s)
            pub = public_case(name, g, max_m, lo, hi, tensors, counts, True)
            pub.masked[4].fill_(float("nan"))
            before = pub.masked[4].clone()
            pub.calls[0]()
            ok, msg = R.check_masked(pub.masked[4], R.ref_masked(*tensors[:4], counts[0], alpha=pub.alpha), counts[0],
                                     before, rtol=4e-3)
            failures += [] if ok else [pub.key]
            print(f"g {pub.label}: one call on the CPU (its fp32 reference implementation), bf16 out: {msg}")
            wo = weight_only_case(name, g, max_m, lo, hi, tensors, counts, True)
            wo.masked[4].fill_(float("nan"))
            before = wo.masked[4].clone()
            wo.calls[0]()
            ok, msg = R.check_masked(wo.masked[4], R.ref_masked(*tensors[:4], counts[0]), counts[0], before)
            failures += [] if ok else [wo.key]
            print(f"h {wo.label}: one call on the CPU (its fp32 reference implementation), against the NVFP4 "
                  f"activations' reference: {msg}")
        peer = torch_case(name, g, max_m, lo, hi, tensors, counts, experts=1)
        out = peer.calls[0]()
        ok = tuple(out.shape) == (g * max_m, N_SERVE) and counts[0].dtype == torch.int32
        failures += [] if ok else [peer.key]
        print(f"f {peer.label}: offsets {counts[0].cumsum(0).tolist()[-1]} of {g * max_m} rows, one call on the "
              f"CPU (one expert's weights dequantised, repeated as a view) -> {tuple(out.shape)}")
    bench, why = load_bench()
    if bench:
        blocks = bench.param_blocks()
        print("parameter blocks (bytes, sizeof in the build): " +
              ", ".join(f"{k} <= {g} groups {b}" for k, g, b in blocks))
    else:
        print(f"bare-launch anchor: {why}")
    print(f"dry run: no GPU; checked one input of each case on the CPU: {sum(len(c.datas) for c in cases)} "
          f"task-layout inputs unpacked (a-d), {len(MASKED)} masked argument sets up to the device check (e), "
          f"{len(MASKED)} torch._grouped_mm calls on the CPU (f), one public and one weight-only masked call on the CPU (g, h); " + ("all passed" if not failures else
                                                                       f"FAILED: {failures}"))
    return 1 if failures else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", help="write every figure to this file")
    p.add_argument("--png", help="draw host, back-to-back and graph time per case into this file")
    p.add_argument("--dry-run", action="store_true", help="no GPU: check one input of each case on the CPU")
    args = p.parse_args(argv)
    if args.dry_run:
        return dry_run()
    if not torch.cuda.is_available():
        print("bench_serving needs a CUDA GPU (--dry-run checks the cases on the CPU)")
        return 2

    dev = "cuda"
    props = torch.cuda.get_device_properties(0)
    started = datetime.datetime.now()
    harness = host_ns_stats(rotation([functools.partial(len, ())]), BATCHES, PER_BATCH)
    bench, why = load_bench()
    blocks = bench.param_blocks() if bench else []
    anchors = bare_anchors(bench, blocks) if bench else {}

    # Timed one after another; the masked rows last, so that a fault in them leaves the other rows measured.
    gmm = getattr(fastlaunch._C, "grouped_mm_masked", None)
    fixed = fixed_case(dev)
    cases = [fixed, public_task_case(fixed), random_rows_case("decode", 8, POOL, dev, 100),
             random_rows_case("prefill", 512, POOL, dev, 200), test_shapes_case(TEST_INPUTS, dev),
             weight_sets_case(POOL, dev)]
    masked, public, peers = [], [], []
    for i, (name, g, max_m, lo, hi, empty) in enumerate(MASKED):
        tensors, counts = serving_inputs(g, max_m, lo, hi, POOL, dev, 500 + i - empty, empty)
        masked.append(masked_case(name, g, max_m, lo, hi, tensors, counts, gmm))
        if name == "decode":
            public.append(public_case(name, g, max_m, lo, hi, tensors, counts, gmm))
            public.append(weight_only_case(name, g, max_m, lo, hi, tensors, counts, gmm))
        peers.append(torch_case(name, g, max_m, lo, hi, tensors, counts, experts=g))
    order = cases + peers + masked + public
    cases += masked + public + peers  # the table's order

    # Progress and each row's figures go to stderr as they come (stdout is the table, printed at the end); a case
    # that runs past CASE_LIMIT_S (a kernel that never finishes) ends the run with every thread's traceback.
    for case in order:
        if case.note:
            continue
        print(f"timing {case.key} {case.label}", file=sys.stderr, flush=True)
        faulthandler.dump_traceback_later(CASE_LIMIT_S, exit=True)
        try:
            measure(case)
            r = case.r
            print(f"  check {r['check']}, host {r['host_ns']['median'] / 1e3:.2f} us, back-to-back {r['b2b_us']:.1f} "
                  f"us, graph {fmt(r.get('graph_us'), 1)} us", file=sys.stderr, flush=True)
        except Exception as e:  # noqa: BLE001 - the row says why; later rows may fail the same way
            case.note = f"failed: {type(e).__name__}: {e}"
            print(f"  {case.note}", file=sys.stderr, flush=True)
    for case in order:  # after all timing: the profiler stays out of the timed calls
        if case.note:
            continue
        faulthandler.dump_traceback_later(CASE_LIMIT_S, exit=True)
        try:
            case.r["kernels_per_call"] = case_kernels_per_call(case)
        except Exception as e:  # noqa: BLE001
            case.r["kernels_error"] = f"{type(e).__name__}: {e}"
    faulthandler.cancel_dump_traceback_later()
    for case in cases:
        if anchors:
            gemm = block_bytes(blocks, "gemm", case.groups)
            conv = block_bytes(blocks, "conversion", case.groups)
            case.r["bare_bytes"] = gemm
            case.r["bare_ns"] = anchors[gemm]["plain"]["median"]
            case.r["bare2_ns"] = anchors[gemm]["plain"]["median"] + anchors[conv]["plain"]["median"]

    name = torch.cuda.get_device_name()
    print(f"bench_serving {started.isoformat(timespec='seconds')}: {name} ({props.multi_processor_count} SMs), "
          f"torch {torch.__version__} (CUDA {torch.version.cuda}), fastlaunch {commit()}")
    print(f"host: perf_counter_ns around {PER_BATCH} calls with no sync inside, per call, median (p10, p90) over "
          f"{BATCHES} batches, GPU drained between batches; the harness's own rotation costs "
          f"{harness['median']:.0f} ns per call (a no-op in its place). back-to-back: CUDA events around >= "
          f"{B2B_CALLS} calls queued together; graph: the same calls replayed as one CUDA graph; both per call, median "
          f"of {REPS}.")
    if anchors:
        print("bare: one cuLaunchKernelEx of an empty kernel taking the GEMM's parameter block for the row's G, from "
              "a C loop on the same stream (median). A fastlaunch call makes TWO launches (A conversion + GEMM; 3 with "
              "split-K, 1 for the skinny kernel: kernels/call); '2 bare' = the conversion's block + the GEMM's.")
    else:
        print(f"bare: not measured: {why}")
    print()
    print(header_row())
    for case in cases:
        print("| " + " | ".join(row_cells(case)) + " |")
    print()
    if anchors:
        print("bare launches from C, host us per launch, median (p10, p90); PDL: with the programmatic-stream-"
              "serialisation attribute fastlaunch's launches carry:")
        for nbytes, a in anchors.items():
            users = ", ".join(f"{k} <= {g}" for k, g, b in blocks if b == nbytes)
            print(f"  {nbytes:6d} B ({users} groups): " + "; ".join(
                f"{label} {a[label]['median'] / 1e3:.2f} ({a[label]['p10'] / 1e3:.2f}, {a[label]['p90'] / 1e3:.2f})"
                for label in ("plain", "pdl")))
    for case in cases:
        for k in ("graph_error", "kernels_error"):
            if k in case.r:
                print(f"{case.key} {case.label}: {k.split('_')[0]}: {case.r[k]}")
    print(summary(cases))

    ok = all(c.r.get("check") in (None, "-", "ok") for c in cases) and not any(c.note.startswith("failed")
                                                                              for c in cases)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": started.isoformat(timespec="seconds"), "device": name,
                       "sms": props.multi_processor_count, "torch": torch.__version__, "cuda": torch.version.cuda,
                       "commit": commit(), "harness_ns": harness, "param_blocks": blocks,
                       "bare_ns": {str(b): a for b, a in anchors.items()},
                       "cases": [{"key": c.key, "label": c.label, "kind": c.kind, "groups": c.groups,
                                  "inputs": len(c.calls) or len(c.counts), "note": c.note, **c.r} for c in cases],
                       "ok": ok}, f, indent=1)
    if args.png:
        chart(cases, args.png, f"Serving-loop calls on {name}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
