"""Host cost of one grouped-GEMM launch from Python, by every common mechanism, in one run.

All variants launch the same kernel on the same data (the G=8 benchmark-1 input by default); each one's
output is checked against the fp32 reference once before timing. Host time per call is the median over
batches of calls with no synchronisation inside a batch (the GPU is drained between batches so its
queue never fills), with p10 and p90 over the batches.

  fast_launch        fastlaunch.fast_launch(data): the CPython fast path
  floor              the same launcher called from a C loop on a buffer unpacked once (launch_repeat)
  pybind11           std::vector<at::Tensor> + size lists through pybind11, then the launcher
  torch.ops          a TORCH_LIBRARY custom op taking Tensor[] (torch.ops.fastlaunch_bench.launch)
  ctypes+tensor      Python packs a CPU int64 tensor of pointers and sizes, one ctypes call
  cudagraph          torch.cuda.CUDAGraph capturing one fast_launch call, then replay()
  python+ctypes      pure-Python data_ptr() extraction into a ctypes array, then the launcher

Also: end-to-end latency of one call from an idle GPU (CUDA events around the Python call), the host cost of
fast_launch and of the floor for G = 1, 2, 8, 32, 64, and the GPU kernels a fast_launch call runs (torch.profiler).

python benchmarks/bench_launch.py [--json out.json] [--png chart.png] [--dry-run]
--dry-run (no GPU needed): checks the harness on CPU tensors (unpack only), as CI does.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this clone's package

import torch

import fastlaunch
from fastlaunch import reference as R
from fastlaunch.shapes import BENCH_SHAPES
from fastlaunch.timing import events_us, host_ns_stats, kernels_per_call, load_pyplot


def batches_ns(fn, batches=200, per_batch=20, sync=torch.cuda.synchronize):
    return host_ns_stats(fn, batches, per_batch, sync, warmup=3)


def flat(data):
    abc, _sf, sfr, sizes = data
    g = len(abc)
    a = [x[0] for x in abc]
    b = [x[1] for x in abc]
    c = [x[2] for x in abc]
    sfa = [x[0] for x in sfr]
    sfb = [x[1] for x in sfr]
    m = [s[0] for s in sizes]
    n = [s[1] for s in sizes]
    k = [s[2] for s in sizes]
    return g, a, b, c, sfa, sfb, m, n, k


def make_variants(data):
    import fastlaunch._bench as bench_ext
    bench_ext.bind(fastlaunch._C.__file__)
    lib = ctypes.CDLL(fastlaunch._C.__file__)
    addr = ctypes.cast(lib.fl_launch, ctypes.c_void_p).value
    rest = (ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t)
    alloc = ctypes.cast(lib.fl_torch_allocator, ctypes.c_void_p).value  # the workspace allocator fast_launch uses
    fl_launch = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *rest)(addr)  # buffer as an address
    fl_launch_arr = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int64), *rest)(addr)  # ctypes array
    errbuf = ctypes.create_string_buffer(512)
    g, a, b, c, sfa, sfb, m, n, k = flat(data)
    dev = a[0].device.index

    def check_rc(rc):
        if rc:
            raise RuntimeError(errbuf.value.decode())

    def v_fast():
        fastlaunch.fast_launch(data)

    def v_pybind():
        bench_ext.launch_vec(a, b, c, sfa, sfb, m, n, k)

    op = torch.ops.fastlaunch_bench.launch

    def v_ops():
        op(a, b, c, sfa, sfb, m, n, k)

    def v_ctypes_tensor():
        abc, _sf, sfr, sizes = data
        vals = ([t[0].data_ptr() for t in abc] + [t[1].data_ptr() for t in abc] + [t[2].data_ptr() for t in abc]
                + [t[0].data_ptr() for t in sfr] + [t[1].data_ptr() for t in sfr]
                + [s[0] for s in sizes] + [s[1] for s in sizes] + [s[2] for s in sizes])
        buf = torch.tensor(vals, dtype=torch.int64)
        check_rc(fl_launch(buf.data_ptr(), len(abc), torch.cuda.current_stream().cuda_stream, dev, alloc, errbuf, 512))

    arr_t = ctypes.c_int64 * (8 * g)

    def v_python_ctypes():
        abc, _sf, sfr, sizes = data
        ptrs = []
        for i in range(3):
            for t in abc:
                ptrs.append(t[i].data_ptr())
        for i in range(2):
            for t in sfr:
                ptrs.append(t[i].data_ptr())
        for i in range(3):
            for s in sizes:
                ptrs.append(s[i])
        buf = arr_t(*ptrs)
        check_rc(fl_launch_arr(buf, len(abc), torch.cuda.current_stream().cuda_stream, dev, alloc, errbuf, 512))

    fastlaunch.fast_launch(data)  # set-up outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fastlaunch.fast_launch(data)

    return {
        "fast_launch": v_fast,
        "pybind11": v_pybind,
        "torch.ops": v_ops,
        "ctypes+tensor": v_ctypes_tensor,
        "cudagraph": graph.replay,
        "python+ctypes": v_python_ctypes,
    }


def event_latency_us(fn, reps=50):
    def idle():
        torch.cuda.synchronize()
        time.sleep(0.0005)  # let the GPU go idle
    return events_us(fn, idle, reps)


def dry_run() -> int:
    """No GPU: exercise the harness on CPU tensors (unpack instead of launch)."""
    g, ms, ns, ks = BENCH_SHAPES[0]
    data = R.generate_input(ms, ns, ks, g, 0, device="cpu")
    stats = batches_ns(lambda: fastlaunch.unpack(data), batches=20, per_batch=20, sync=lambda: None)
    print("| variant | host us/call median | p10 | p90 |")
    print("|---|---|---|---|")
    print(f"| unpack (CPU tensors, no launch) | {stats['median'] / 1e3:.2f} | {stats['p10'] / 1e3:.2f} | "
          f"{stats['p90'] / 1e3:.2f} |")
    print("dry run: no GPU, nothing launched")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json")
    p.add_argument("--png")
    p.add_argument("--dry-run", action="store_true")
    args = p.parse_args(argv)
    if args.dry_run or not torch.cuda.is_available():
        return dry_run()

    g, ms, ns, ks = BENCH_SHAPES[0]
    data = R.generate_input(ms, ns, ks, g, 11, device="cuda")
    ref = R.ref_kernel(R.clone_outputs(data))
    variants = make_variants(data)
    ok_all = True
    for name, fn in variants.items():
        R.poison(data)
        fn()
        torch.cuda.synchronize()
        ok, msg = R.check([c for _a, _b, c in data[0]], ref)
        ok_all &= ok
        if not ok:
            print(f"{name}: WRONG OUTPUT {msg}")

    results = {}
    iters = 2000
    floor_runs = []
    for _ in range(200):  # the floor in batches, like the others
        floor_runs.append(fastlaunch._C.launch_repeat(data, 20))
        torch.cuda.synchronize()
    floor_runs.sort()
    results["floor (C loop)"] = {"median": floor_runs[100], "p10": floor_runs[20], "p90": floor_runs[180]}
    for name, fn in variants.items():
        results[name] = batches_ns(fn)
    # where fast_launch's time over the floor goes: the checks alone, and checks + stream + one launch
    results["unpack only (checks, no launch)"] = batches_ns(lambda: fastlaunch.unpack(data))
    results["launch_repeat(data, 1)"] = batches_ns(lambda: fastlaunch._C.launch_repeat(data, 1))
    floor = results["floor (C loop)"]["median"]

    e2e = {name: event_latency_us(variants[name]) for name in ("fast_launch", "cudagraph", "torch.ops")}
    kernels = kernels_per_call([variants["fast_launch"]] * 16)  # after the timing: the profiler stays out of it

    scaling = []
    for gg in (1, 2, 8, 32, 64):
        d = R.generate_input(64, 256, 256, gg, 100 + gg, device="cuda")
        fl = batches_ns(lambda: fastlaunch.fast_launch(d), batches=100)["median"]
        runs = []
        for _ in range(100):
            runs.append(fastlaunch._C.launch_repeat(d, 20))
            torch.cuda.synchronize()
        runs.sort()
        scaling.append({"G": gg, "fast_launch_ns": fl, "floor_ns": runs[50]})

    name = torch.cuda.get_device_name()
    print(f"{name}, torch {torch.__version__}; G=8 benchmark-1 input; outputs correct: {ok_all}")
    print()
    print("| mechanism | host us/call (median) | p10 | p90 | x floor |")
    print("|---|---|---|---|---|")
    for k_, v in results.items():
        print(f"| {k_} | {v['median'] / 1e3:.2f} | {v['p10'] / 1e3:.2f} | {v['p90'] / 1e3:.2f} | "
              f"{v['median'] / floor:.2f} |")
    print()
    print("| G | fast_launch us/call | floor us/call | fast_launch - floor, ns per group |")
    print("|---|---|---|---|")
    for s in scaling:
        print(f"| {s['G']} | {s['fast_launch_ns'] / 1e3:.2f} | {s['floor_ns'] / 1e3:.2f} | "
              f"{(s['fast_launch_ns'] - s['floor_ns']) / s['G']:.0f} |")
    print()
    print("end-to-end latency of one call from an idle GPU (CUDA events around the Python call, us): " +
          ", ".join(f"{k_} {v:.1f}" for k_, v in e2e.items()))
    print(f"GPU kernels per fast_launch call (torch.profiler, 16 calls): {kernels:.1f}")
    fl = results["fast_launch"]["median"]
    print(f"\nfast_launch / floor = {fl / floor:.2f} (goal <= 1.10); torch.ops / fast_launch = "
          f"{results['torch.ops']['median'] / fl:.1f} (goal >= 5); cudagraph replay / fast_launch = "
          f"{results['cudagraph']['median'] / fl:.2f} (goal > 1)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name, "host_ns": results, "scaling": scaling, "e2e_us": e2e,
                       "kernels_per_call": kernels, "ok": ok_all}, f,
                      indent=1)
    plt = load_pyplot() if args.png else None
    if plt:
        names = list(results)
        vals = [results[n_]["median"] / 1e3 for n_ in names]
        fig, ax = plt.subplots(figsize=(9, 4))
        ax.barh(names, vals, color=["#888" if n_.startswith("floor") else "#3a7" for n_ in names])
        ax.axvline(floor / 1e3, color="k", ls="--", lw=1, label="floor: launcher from C")
        ax.set_xlabel("host us per call (median)")
        ax.set_title(f"Launching the NVFP4 grouped GEMM (G=8) on {name}")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.png, dpi=120)
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
