"""Timing helpers shared by the main job, the benchmarks and the tools."""
from __future__ import annotations

import itertools
import os
import statistics
import subprocess
import time

import torch


def host_ns_stats(fn, batches: int = 50, per_batch: int = 20, sync=None, warmup: int = 1) -> dict:
    """Host ns per call over `batches` batches of `per_batch` calls, no synchronisation inside a batch
    (`sync` runs between batches, so a GPU queue never fills): median, p10 and p90 over the batches."""
    for _ in range(warmup * per_batch):
        fn()
    if sync:
        sync()
    per = []
    for _ in range(batches):
        t0 = time.perf_counter_ns()
        for _ in range(per_batch):
            fn()
        per.append((time.perf_counter_ns() - t0) / per_batch)
        if sync:
            sync()
    per.sort()
    return {"median": statistics.median(per), "p10": per[len(per) // 10], "p90": per[9 * len(per) // 10]}


def host_ns(fn, batches: int = 50, per_batch: int = 20, sync=None) -> float:
    """Median host ns per call (see host_ns_stats)."""
    return host_ns_stats(fn, batches, per_batch, sync)["median"]


def events_us(fn, before, reps: int) -> float:
    """Median us of one call between two CUDA events, running `before()` ahead of each repetition."""
    times = []
    for _ in range(reps):
        before()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    return statistics.median(times)


def device_us(fn, flush: torch.Tensor, reps: int = 30) -> float:
    """Median device us of one call, L2 flushed before each."""
    return events_us(fn, flush.zero_, reps)


def device_us_sets(fn, sets: int, flush: torch.Tensor, reps: int = 30) -> float:
    """Median device us of one call of `fn(i)`, L2 flushed before each, with i cycling through 0 .. sets-1: each
    call reads another input set than the call before it."""
    calls = itertools.count()
    return device_us(lambda: fn(next(calls) % sets), flush, reps)


def kernels_per_call(calls, sync=torch.cuda.synchronize) -> float:
    """GPU kernels per call over one pass of `calls` (zero-argument callables), counted by torch.profiler; memory
    copies and sets are not kernels."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for c in calls:
            c()
        sync()
    kernels = [e for e in prof.events() if e.device_type == DeviceType.CUDA and not e.name.startswith(("Memcpy",
                                                                                                     "Memset"))]
    return len(kernels) / len(calls)


def fp16_gemms(ms, ns, ks, device="cuda"):
    """torch's fp16 GEMM (cuBLAS) on random operands of each group's sizes, C = A B^T per group, the
    anchor the small-call tools time beside fastlaunch: (run every group, run group `g`, (A, B, C))."""
    a = [torch.randn(m, k, device=device, dtype=torch.half) for m, k in zip(ms, ks)]
    b = [torch.randn(n, k, device=device, dtype=torch.half) for n, k in zip(ns, ks)]
    c = [torch.empty(m, n, device=device, dtype=torch.half) for m, n in zip(ms, ns)]

    def one(g):
        torch.mm(a[g], b[g].t(), out=c[g])

    def every():
        for g in range(len(a)):
            one(g)

    return every, one, (a, b, c)


def load_pyplot():
    """matplotlib.pyplot with a file-only backend, or None (with a message) when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no chart")
        return None
    return plt


def l2_flush_buffer(device="cuda") -> torch.Tensor:
    """512 MB, several times the H200's 60 MB L2: zeroing it evicts everything else."""
    return torch.empty(512 * 1024 * 1024, dtype=torch.uint8, device=device)


def source_commit(root: str | None = None) -> str | None:
    """The git commit of the source tree a run measures (`root`: the repository; default: the one holding this
    package), short, with "+changes" where tracked files differ from it; None outside a git checkout (an installed
    wheel) or without git."""
    root = root or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        if head.returncode != 0 or not head.stdout.strip():
            return None
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+changes" if dirty.returncode == 0 and dirty.stdout.strip() else "")
