"""Soak run: the task form, the masked form and CUDA-graph replays of both, mixed, from several threads at once, for
minutes to hours, with sizes drawn anew for every call; every Nth output checked against the fp32 reference and the
device's and the host's memory sampled throughout. A tool for long runs on a GPU machine, not a CI test.

  python tools/soak.py [--minutes 10] [--threads 3] [--check-every 5] [--seed S] [--json PATH]
                       [--sample-every 5] [--warmup S] [--max-device-growth-mib 256] [--max-host-growth-mib 128]
  python tools/soak.py --dry-run      (no GPU: the draws and their inputs on the CPU, the arguments checked)

Each thread has its own torch.cuda.Stream and random draws (seed + thread index) and runs, until the time is up:
  task      fastlaunch.fast_launch(data), data from fastlaunch.reference.generate_input: decode-like (1-16 rows per
            group), mixed (0-256), prefill-like (up to 1024) and many-group (64-128 groups of 0-8 rows) draws, N and K
            from a few sizes, shared by the groups or drawn per group;
  masked    fastlaunch._C.grouped_mm_masked(a, sfa, b, sfb, masked_m, out) on reference.generate_masked_input;
  graph     a replay of a CUDA graph the thread captured (task or masked form, in turn), with new inputs copied into
            the captured tensors first (for the masked form: new rows, scales and masked_m); a graph is replayed
            5-40 times, then dropped and another captured with new sizes (captures are serialised across threads and
            use thread-local capture mode, so the other threads keep working).
Every --check-every-th call of a thread has its output poisoned with NaN before the call and is compared with the
reference (reference.ref_kernel on the bytes the kernel reads, reference.ref_masked / check_masked; computed on the
GPU in fp32) once its stream is done. The other calls are checked for errors only.

Memory: a sampler reads torch.cuda.memory_allocated / memory_reserved, the device's used memory (torch.cuda.
mem_get_info) and the process's VmRSS every --sample-every seconds. At the end of the warm-up (--warmup seconds,
default a tenth of the run between 20 and 120) and at the end of the run every thread pauses between calls with its
stream drained, and the sampler reads once more: those two readings are the start and the end of the table.

Prints the seed first, then a line per minute; the last lines are a table of calls, checked outputs, mismatches and
errors per form, and of memory at start and end with the growth. Exits 1 on a mismatch, an error or growth past
--max-device-growth-mib (device used memory) or --max-host-growth-mib (VmRSS); 3 when a thread does not finish within
--hang seconds of the end (a grid that never completes).
"""
import argparse
import gc
import json
import os
import random
import sys
import threading
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402

from fastlaunch import reference as R  # noqa: E402

FORMS = ("task", "masked", "graph-task", "graph-masked")
N_CHOICES = (128, 256, 512, 1024, 2048, 3072, 4096, 7168)
K_CHOICES = (256, 512, 1024, 2048, 4096, 7168)
MASKED_N = (256, 512, 1024, 2048, 4096, 7168)
MASKED_MAX_M = (1, 8, 16, 64, 128, 256, 512)
# bytes of one call's inputs and outputs a draw may take (inputs are generated on the CPU: this bounds that time)
BUDGET = 24 << 20
MIB = 1 << 20
DEVICE = "cuda"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Soak run: task form, masked form and graph replays, mixed, from several "
                                            "threads; outputs checked, memory sampled.")
    p.add_argument("--minutes", type=float, default=10.0, help="length of the run (default 10)")
    p.add_argument("--threads", type=int, default=3, help="threads, each with its own stream (default 3)")
    p.add_argument("--check-every", type=int, default=5, help="check every Nth call of a thread (default 5)")
    p.add_argument("--seed", type=int, default=None, help="base seed (default: a fresh one, printed)")
    p.add_argument("--json", default=None, help="write counts, memory samples and failures to this file")
    p.add_argument("--sample-every", type=float, default=5.0, help="seconds between memory samples (default 5)")
    p.add_argument("--warmup", type=float, default=None,
                   help="seconds before the start reading (default a tenth of the run, 20 to 120)")
    p.add_argument("--max-device-growth-mib", type=float, default=256.0,
                   help="most growth of the device's used memory from start to end (default 256)")
    p.add_argument("--max-host-growth-mib", type=float, default=128.0,
                   help="most growth of the process's VmRSS from start to end (default 128)")
    p.add_argument("--max-errors", type=int, default=20, help="stop the run after this many errors (default 20)")
    p.add_argument("--hang", type=float, default=120.0,
                   help="seconds past the end a thread may take to finish before the run counts as hung (default 120)")
    p.add_argument("--forms", default=",".join(FORMS),
                   help=f"the forms to mix, comma-separated (default {','.join(FORMS)})")
    p.add_argument("--dry-run", action="store_true", help="no GPU: draw sizes and generate inputs on the CPU")
    args = p.parse_args(argv)
    forms = [f for f in args.forms.split(",") if f]
    bad = [f for f in forms if f not in FORMS]
    if bad or not forms:
        p.error(f"--forms: unknown {bad} (choose from {', '.join(FORMS)})")
    args.forms = forms
    if args.minutes <= 0 or args.threads < 1 or args.check_every < 1 or args.sample_every <= 0:
        p.error("--minutes and --sample-every must be positive, --threads and --check-every at least 1")
    if args.warmup is None:
        args.warmup = min(120.0, max(20.0, 6.0 * args.minutes))
    if args.seed is None:
        args.seed = random.randrange(1 << 30)
    return args


# ============================================================================ draws

def smaller_k(k):
    """The next K below k that K_CHOICES holds (K stays a multiple of 64)."""
    return max([c for c in K_CHOICES if c < k], default=k)


def task_bytes(ms, ns, ks):
    return sum((m + n) * k // 2 + (m + n) * k // 16 + 2 * m * n for m, n, k in zip(ms, ns, ks))


def draw_task(rng):
    """(g, ms, ns, ks) for one task-form call: sizes the contract allows (K a multiple of 64), within BUDGET (or the
    least sizes of the kind: one group of N 128 and the smallest K)."""
    kind = rng.choices(("decode", "mixed", "prefill", "many"), weights=(4, 3, 2, 1))[0]
    if kind == "many":
        g = rng.choice((64, 72, 96, 128))
        n, k = rng.choice((128, 256, 512)), rng.choice((128, 256, 512))
        return g, [rng.randint(0, 8) for _ in range(g)], [n] * g, [k] * g
    g = rng.randint(1, 16) if kind != "prefill" else rng.randint(1, 8)
    top = {"decode": 16, "mixed": 256, "prefill": 1024}[kind]
    lo = 1 if kind == "decode" else 0
    ms = [rng.randint(lo, top) for _ in range(g)]
    if kind == "prefill":
        ms[rng.randrange(g)] = rng.randint(top // 2, top)
    if rng.random() < 0.7:  # one N and K for every group, as experts of one layer
        ns, ks = [rng.choice(N_CHOICES)] * g, [rng.choice(K_CHOICES)] * g
    else:
        ns, ks = [rng.choice(N_CHOICES) for _ in range(g)], [rng.choice(K_CHOICES) for _ in range(g)]
    while task_bytes(ms, ns, ks) > BUDGET:  # shrink the largest group's N or K, else its rows
        i = max(range(g), key=lambda j: (ms[j] + ns[j]) * ks[j])
        if ks[i] > K_CHOICES[0]:
            ks[i] = smaller_k(ks[i])
        elif ns[i] > 128:
            ns[i] //= 2
        elif ms[i] > 0:
            ms[i] //= 2
        elif g > 1:  # the group at its least: one group fewer
            del ms[i], ns[i], ks[i]
            g -= 1
        else:
            break
    return g, ms, ns, ks


def masked_bytes(g, max_m, n, k):
    return g * ((max_m + n) * k // 2 + (max_m + n) * k // 16 + 2 * max_m * n)


def draw_masked(rng):
    """(g, max_m, n, k, masked_m) for one masked-form call (N a multiple of 8, K of 64), within BUDGET."""
    g = rng.choice((64, 128)) if rng.random() < 0.1 else rng.randint(1, 16)
    max_m, n, k = rng.choice(MASKED_MAX_M), rng.choice(MASKED_N), rng.choice(K_CHOICES)
    while masked_bytes(g, max_m, n, k) > BUDGET:
        if k > K_CHOICES[0]:
            k = smaller_k(k)
        elif n > 256:
            n //= 2
        elif max_m > 1:
            max_m //= 2
        elif g > 1:
            g //= 2
        else:
            break
    counts = [rng.randint(0, max_m) for _ in range(g)]
    shape = rng.random()
    if shape < 0.1:
        counts = [0] * g  # no expert has a row
    elif shape < 0.2:
        counts = [max_m] * g
    return g, max_m, n, k, counts


# ============================================================================ the run

class Stats:
    """Counts per form and the first failures, shared by the threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls = {f: 0 for f in FORMS}
        self.checked = {f: 0 for f in FORMS}
        self.mismatches = {f: 0 for f in FORMS}
        self.errors = {f: 0 for f in FORMS}
        self.captures = 0
        self.other_errors = 0  # outside a call (a thread's set-up or its stream)
        self.failures = []

    def add(self, form, checked=False, mismatch=None, error=None, what=None):
        with self.lock:
            self.calls[form] += 1
            self.checked[form] += checked
            if mismatch is not None:
                self.mismatches[form] += 1
            if error is not None:
                self.errors[form] += 1
            if (mismatch or error) and len(self.failures) < 20:
                self.failures.append({"form": form, "what": what, "mismatch": mismatch, "error": error})

    def thread_error(self, message):
        with self.lock:
            self.other_errors += 1
            if len(self.failures) < 20:
                self.failures.append({"form": None, "what": None, "mismatch": None, "error": message})

    def error_count(self):
        with self.lock:
            return sum(self.errors.values()) + self.other_errors

    def total(self, d):
        return sum(d.values())


def vm_rss():
    """The process's resident set size in bytes (/proc/self/status VmRSS), or None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def memory_sample(t0):
    free, total = torch.cuda.mem_get_info()
    return {"t": round(time.monotonic() - t0, 2), "allocated": torch.cuda.memory_allocated(),
            "reserved": torch.cuda.memory_reserved(), "device_used": total - free, "rss": vm_rss()}


class Pause:
    """Every worker stops between calls with its stream drained, while the main thread takes a reading."""

    def __init__(self, workers):
        self.requested = threading.Event()
        self.arrived = threading.Barrier(workers + 1)
        self.resume = threading.Barrier(workers + 1)

    def point(self, stream):
        if self.requested.is_set():
            stream.synchronize()
            try:
                self.arrived.wait()
                self.resume.wait()
            except threading.BrokenBarrierError:  # the reading was given up (a worker did not come): go on
                pass

    def take(self, reading, timeout):
        """reading() with every worker paused, or None where one did not pause within `timeout` seconds (ended,
        or waiting on the device)."""
        self.arrived.reset()
        self.resume.reset()
        self.requested.set()
        try:
            self.arrived.wait(timeout)
        except threading.BrokenBarrierError:
            self.requested.clear()
            self.resume.abort()
            return None
        self.requested.clear()
        try:
            gc.collect()
            torch.cuda.synchronize()
            return reading()
        finally:
            self.resume.wait()


class Worker(threading.Thread):
    def __init__(self, index, args, stats, stop, pause, capture_lock, has_masked):
        super().__init__(name=f"soak-{index}", daemon=True)
        self.index, self.args, self.stats, self.stop, self.pause = index, args, stats, stop, pause
        self.capture_lock, self.has_masked = capture_lock, has_masked
        self.rng = random.Random(args.seed * 1000 + index)
        self.calls = 0
        self.graph = None  # (form, graph, static inputs, replays left)
        self.graph_kind = 0
        forms = [f for f in args.forms if has_masked or "masked" not in f]
        weights = {"task": 4, "masked": 3, "graph-task": 2, "graph-masked": 2}
        self.forms, self.weights = forms, [weights[f] for f in forms]
        self.done = False
        self.device = DEVICE

    def seed(self):
        return self.rng.randrange(1 << 30)

    def run(self):
        try:
            import fastlaunch
            self.fl = fastlaunch
            self.stream = torch.cuda.Stream(self.device)
            with torch.cuda.stream(self.stream):
                self.loop()
                self.stream.synchronize()
        except Exception as e:  # noqa: BLE001  (outside a call: counted as the thread's error, the thread ends)
            self.stats.thread_error(f"{self.name}: {type(e).__name__}: {e}"[:2000])
        finally:
            self.graph = None
            self.done = True

    def loop(self):
        while not self.stop.is_set():
            self.pause.point(self.stream)
            if self.stop.is_set():
                break
            form = self.rng.choices(self.forms, weights=self.weights)[0]
            self.calls += 1
            check = self.calls % self.args.check_every == 0
            what = None
            try:
                if form == "task":
                    what, mismatch = self.task(check)
                elif form == "masked":
                    what, mismatch = self.masked(check)
                else:
                    what, mismatch = self.replay(form, check)
                self.stats.add(form, checked=check, mismatch=mismatch, what=what)
            except Exception as e:  # noqa: BLE001  (counted and reported; the run goes on)
                self.graph = None
                self.stats.add(form, error=f"{type(e).__name__}: {e}"[:2000], what=what)
            if self.stats.error_count() >= self.args.max_errors:
                self.stop.set()
            if not check and self.calls % 8 == 0:
                self.stream.synchronize()  # bounds the work queued ahead of the host

    # ---------------------------------------------------------------- the task form
    def task(self, check):
        g, ms, ns, ks = draw_task(self.rng)
        seed = self.seed()
        what = {"g": g, "m": ms, "n": ns, "k": ks, "seed": seed}
        data = R.generate_input(ms, ns, ks, g, seed, device=self.device)
        if not check:
            self.fl.fast_launch(data)
            return what, None
        ref = R.ref_kernel(R.clone_outputs(R.scales_as_read(data)))
        R.poison(data)
        out = self.fl.fast_launch(data)
        self.stream.synchronize()
        ok, msg = R.check(out, ref)
        return what, None if ok else msg

    # ---------------------------------------------------------------- the masked form
    def masked(self, check):
        g, max_m, n, k, counts = draw_masked(self.rng)
        seed = self.seed()
        what = {"g": g, "max_m": max_m, "n": n, "k": k, "masked_m": counts, "seed": seed}
        a, sfa, b, sfb, masked_m, out = R.generate_masked_input(g, max_m, n, k, counts, seed, device=self.device,
                                                                out_init="randn")
        if not check:
            self.fl._C.grouped_mm_masked(a, sfa, b, sfb, masked_m, out)
            return what, None
        ref = R.ref_masked(a, sfa, b, sfb, masked_m)
        out.fill_(float("nan"))
        before = out.clone()
        self.fl._C.grouped_mm_masked(a, sfa, b, sfb, masked_m, out)
        self.stream.synchronize()
        ok, msg = R.check_masked(out, ref, masked_m, before)
        return what, None if ok else msg

    # ---------------------------------------------------------------- graph replays
    def capture(self, form):
        """A new graph of `form` on new sizes: a call outside the capture first (the launcher's set-up and plans),
        then the capture on this thread's stream."""
        graph = torch.cuda.CUDAGraph()
        if form == "graph-task":
            g, ms, ns, ks = draw_task(self.rng)
            static = R.generate_input(ms, ns, ks, g, self.seed(), device=self.device)
            what = {"g": g, "m": ms, "n": ns, "k": ks}
            call = lambda: self.fl.fast_launch(static)  # noqa: E731
        else:
            g, max_m, n, k, counts = draw_masked(self.rng)
            static = R.generate_masked_input(g, max_m, n, k, counts, self.seed(), device=self.device,
                                             out_init="randn")
            what = {"g": g, "max_m": max_m, "n": n, "k": k}
            call = lambda: self.fl._C.grouped_mm_masked(*static)  # noqa: E731
        call()
        self.stream.synchronize()
        with self.capture_lock:
            with torch.cuda.graph(graph, stream=self.stream, capture_error_mode="thread_local"):
                call()
        with self.stats.lock:
            self.stats.captures += 1
        self.graph = [form, graph, static, self.rng.randint(5, 40), what]

    def replay(self, form, check):
        if self.graph is None or self.graph[0] != form or self.graph[3] <= 0:
            self.graph = None
            self.capture(form)
        self.graph[3] -= 1
        _form, graph, static, _left, shape = self.graph
        seed = self.seed()
        what = dict(shape, seed=seed)
        if form == "graph-task":
            g, ms, ns, ks = len(static[0]), *(list(x) for x in zip(*[s[:3] for s in static[3]]))
            fresh = R.generate_input(ms, ns, ks, g, seed, device=self.device)
            for (a, b, _c), (fa, fb, _fc) in zip(static[0], fresh[0]):
                _u8(a).copy_(_u8(fa)), _u8(b).copy_(_u8(fb))
            for (sa, sb), (fsa, fsb) in zip(static[2], fresh[2]):
                _u8(sa).copy_(_u8(fsa)), _u8(sb).copy_(_u8(fsb))
            if not check:
                graph.replay()
                return what, None
            ref = R.ref_kernel(R.clone_outputs(R.scales_as_read(static)))  # the bytes the replay reads
            R.poison(static)
            graph.replay()
            self.stream.synchronize()
            ok, msg = R.check([c for _a, _b, c in static[0]], ref)
            return what, None if ok else msg
        a, sfa, b, sfb, masked_m, out = static
        g, max_m, n, k = a.shape[0], a.shape[1], b.shape[1], 2 * a.shape[2]
        counts = [self.rng.randint(0, max_m) for _ in range(g)]
        what["masked_m"] = counts
        na, nsfa, nb, nsfb, nm, _ = R.generate_masked_input(g, max_m, n, k, counts, seed, device=self.device)
        _u8(a).copy_(_u8(na)), _u8(sfa).copy_(_u8(nsfa))
        if self.rng.random() < 0.3:  # new weights too
            _u8(b).copy_(_u8(nb)), _u8(sfb).copy_(_u8(nsfb))
        masked_m.copy_(nm)
        if not check:
            graph.replay()
            return what, None
        ref = R.ref_masked(a, sfa, b, sfb, masked_m)
        out.fill_(float("nan"))
        before = out.clone()
        graph.replay()
        self.stream.synchronize()
        ok, msg = R.check_masked(out, ref, masked_m, before)
        return what, None if ok else msg


def _u8(t):
    return t.view(torch.uint8)


def mib(x):
    return "-" if x is None else f"{x / MIB:.1f}"


def report(args, stats, start, end, seconds, hung):
    """The final table; returns (ok, reasons)."""
    print(f"\nsoak: seed {args.seed}, {seconds / 60:.1f} min, {args.threads} threads, every {args.check_every}th "
          f"call checked, {stats.captures} graphs captured")
    print("| form | calls | checked | mismatches | errors |")
    print("|---|---|---|---|---|")
    for f in FORMS:
        print(f"| {f} | {stats.calls[f]} | {stats.checked[f]} | {stats.mismatches[f]} | {stats.errors[f]} |")
    if stats.other_errors:
        print(f"| (outside calls) | | | | {stats.other_errors} |")
    print(f"| all | {stats.total(stats.calls)} | {stats.total(stats.checked)} | {stats.total(stats.mismatches)} | "
          f"{stats.error_count()} |")
    print("\n| memory (MiB) | start | end | growth |")
    print("|---|---|---|---|")
    growth = {}
    for key, name in (("device_used", "device used (mem_get_info)"), ("allocated", "torch allocated"),
                      ("reserved", "torch reserved"), ("rss", "host VmRSS")):
        s, e = (start or {}).get(key), (end or {}).get(key)
        growth[key] = None if s is None or e is None else e - s
        print(f"| {name} | {mib(s)} | {mib(e)} | {mib(growth[key])} |")
    reasons = []
    if stats.total(stats.mismatches):
        reasons.append(f"{stats.total(stats.mismatches)} mismatches")
    if stats.error_count():
        reasons.append(f"{stats.error_count()} errors")
    if hung:
        reasons.append(f"threads not finished {args.hang:.0f} s after the end: {', '.join(hung)}")
    if start is None or end is None:
        reasons.append("no start or end reading (the run ended before its warm-up did)")
    if growth.get("device_used") is not None and growth["device_used"] > args.max_device_growth_mib * MIB:
        reasons.append(f"device memory grew {mib(growth['device_used'])} MiB (limit {args.max_device_growth_mib})")
    if growth.get("rss") is not None and growth["rss"] > args.max_host_growth_mib * MIB:
        reasons.append(f"host memory grew {mib(growth['rss'])} MiB (limit {args.max_host_growth_mib})")
    for f in stats.failures[:5]:
        print(f"failure: {json.dumps(f)[:1500]}")
    print("result: " + ("ok" if not reasons else "FAILED: " + "; ".join(reasons)))
    return not reasons, reasons, growth


def run(args):
    if not torch.cuda.is_available():
        print("no CUDA device (use --dry-run on a machine without one)")
        return 2
    import fastlaunch
    has_masked = hasattr(fastlaunch._C, "grouped_mm_masked")
    if not has_masked:
        print("this build of fastlaunch._C has no grouped_mm_masked: the masked forms are left out")
    torch.backends.cuda.matmul.allow_tf32 = False  # the reference's matmul in full fp32
    torch.backends.cudnn.allow_tf32 = False
    stats, stop, capture_lock = Stats(), threading.Event(), threading.Lock()
    pause = Pause(args.threads)
    workers = [Worker(i, args, stats, stop, pause, capture_lock, has_masked) for i in range(args.threads)]
    t0 = time.monotonic()
    samples, start, end = [memory_sample(t0)], None, None
    for w in workers:
        w.start()
    deadline = t0 + 60 * args.minutes
    warm_end = t0 + min(args.warmup, 60 * args.minutes / 2)
    next_sample, next_line = t0 + args.sample_every, t0 + 60
    while time.monotonic() < deadline and not stop.is_set() and not all(w.done for w in workers):
        now = time.monotonic()
        if start is None and now >= warm_end:
            start = pause.take(lambda: memory_sample(t0), args.hang)
            if start is None:
                print("no start reading: a thread did not pause")
                break
            start["quiesced"] = True
            samples.append(start)
            print(f"[{start['t']:.0f} s] start reading: device used {mib(start['device_used'])} MiB, allocated "
                  f"{mib(start['allocated'])}, reserved {mib(start['reserved'])}, VmRSS {mib(start['rss'])}")
        if now >= next_sample:
            samples.append(memory_sample(t0))
            next_sample += args.sample_every
        if now >= next_line:
            s = samples[-1]
            print(f"[{s['t']:.0f} s] calls {stats.total(stats.calls)}, checked {stats.total(stats.checked)}, "
                  f"mismatches {stats.total(stats.mismatches)}, errors {stats.error_count()}; device used "
                  f"{mib(s['device_used'])} MiB, reserved {mib(s['reserved'])}, VmRSS {mib(s['rss'])}", flush=True)
            next_line += 60
        time.sleep(min(0.25, args.sample_every))
    hung = []
    if not stop.is_set() and all(not w.done for w in workers) and start is not None:
        end = pause.take(lambda: memory_sample(t0), args.hang)
        if end is not None:
            end["quiesced"] = True
            samples.append(end)
    stop.set()
    for w in workers:
        w.join(timeout=max(1.0, deadline + args.hang - time.monotonic()))
        if w.is_alive():
            hung.append(w.name)
    seconds = time.monotonic() - t0
    if end is None and start is not None and not hung:
        torch.cuda.synchronize()
        end = memory_sample(t0)  # the run stopped early (errors): a reading after the threads ended
        samples.append(end)
    ok, reasons, growth = report(args, stats, start, end, seconds, hung)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seed": args.seed, "minutes": args.minutes, "threads": args.threads,
                       "check_every": args.check_every, "seconds": round(seconds, 1), "calls": stats.calls,
                       "checked": stats.checked, "mismatches": stats.mismatches, "errors": stats.errors,
                       "errors_outside_calls": stats.other_errors,
                       "captures": stats.captures, "start": start, "end": end, "growth": growth,
                       "samples": samples, "failures": stats.failures, "hung": hung, "ok": ok,
                       "reasons": reasons}, f, indent=1)
    if hung:
        sys.stdout.flush()
        os._exit(3)  # a thread is stuck in a wait on the device: no clean way out
    return 0 if ok else 1


def dry_run(args):
    """The draws of a few calls of each form with their inputs generated on the CPU, and each checked against the
    package's argument checks where the built extension is there."""
    rng = random.Random(args.seed)
    try:
        import fastlaunch
        from fastlaunch import ops
    except ImportError as e:  # the extension not built: the draws alone
        fastlaunch = ops = None
        print(f"dry run: fastlaunch not importable ({e}); inputs generated without the argument checks")
    tasks = [draw_task(rng) for _ in range(200)]
    masked = [draw_masked(rng) for _ in range(200)]
    for g, ms, ns, ks in tasks:
        assert len(ms) == len(ns) == len(ks) == g and all(k % 64 == 0 and k >= 64 for k in ks), (g, ms, ns, ks)
        assert task_bytes(ms, ns, ks) <= BUDGET, (g, ms, ns, ks)
    for g, max_m, n, k, counts in masked:
        assert n % 8 == 0 and k % 64 == 0 and len(counts) == g and all(0 <= c <= max_m for c in counts)
        assert masked_bytes(g, max_m, n, k) <= BUDGET
    # inputs for the smallest few of each (the CPU generates them slowly)
    small_tasks = sorted(tasks, key=lambda s: task_bytes(*s[1:]))[:3]
    small_masked = sorted(masked, key=lambda s: masked_bytes(*s[:4]))[:3]
    for g, ms, ns, ks in small_tasks:
        data = R.generate_input(ms, ns, ks, g, rng.randrange(1 << 30), device="cpu")
        R.ref_kernel(R.clone_outputs(R.scales_as_read(data)))
        if fastlaunch is not None:
            assert fastlaunch.unpack(data) == g
    for g, max_m, n, k, counts in small_masked:
        args_ = R.generate_masked_input(g, max_m, n, k, counts, rng.randrange(1 << 30), device="cpu")
        R.ref_masked(*args_[:5])
        if ops is not None and hasattr(ops, "_check_masked_meta"):
            ops._check_masked_meta(*args_)
    kinds = {"decode": sum(max(ms) <= 16 and len(ms) <= 16 for _g, ms, _n, _k in tasks),
             "many groups": sum(g >= 64 for g, *_ in tasks), "prefill": sum(max(ms) > 256 for _g, ms, _n, _k in tasks)}
    print(f"dry run: seed {args.seed}; {len(tasks)} task draws ({', '.join(f'{v} {k}' for k, v in kinds.items())}), "
          f"{len(masked)} masked draws, all within {BUDGET // MIB} MiB; inputs of {len(small_tasks)} + "
          f"{len(small_masked)} generated on the CPU; would run {args.minutes:g} min on {args.threads} threads "
          f"({', '.join(args.forms)}), every {args.check_every}th call checked")
    return 0


def main(argv=None):
    args = parse_args(argv)
    print(f"soak: seed {args.seed} (repeat the draws with --seed {args.seed})", flush=True)
    if args.dry_run:
        return dry_run(args)
    try:
        return run(args)
    except KeyboardInterrupt:
        traceback.print_exc()
        return 130


if __name__ == "__main__":
    sys.exit(main())
