"""Multi-GPU tests (skipped unless CUDA sees at least two devices): data on a device other than the current one is
computed correctly and leaves torch's current device as it was, devices alternate call after call, and a call
creates no CUDA context on a device it does not use (checked through the driver's cuDevicePrimaryCtxGetState in a
fresh process). Seeds are printed (pytest shows them with a failure) and named in every assertion."""
import json
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

import fastlaunch
from fastlaunch import reference as R

from conftest import HAS_CUDA, fresh_seed, requires_cuda

pytestmark = [requires_cuda,
              pytest.mark.skipif(not HAS_CUDA or torch.cuda.device_count() < 2, reason="needs two CUDA devices")]


SHAPES = [([96, 0, 200], [128, 64, 256], [256, 128, 512]),  # the GEMM (a workspace from torch's allocator)
          ([1, 2, 0, 1], [512] * 4, [1024] * 4)]  # few rows: the skinny kernel (no workspace)


def make(shape, device, seed):
    ms, ns, ks = shape
    data = R.generate_input(ms, ns, ks, len(ms), seed, device=device)
    return data, R.ref_kernel(R.clone_outputs(data))


@pytest.mark.parametrize("shape", SHAPES, ids=["gemm", "skinny"])
def test_data_on_another_device_than_the_current_one(shape):
    seed = fresh_seed()
    torch.cuda.set_device(0)
    data, ref = make(shape, "cuda:1", seed)
    R.poison(data)
    torch.cuda.synchronize(1)
    out = fastlaunch.fast_launch(data)
    assert torch.cuda.current_device() == 0, seed
    torch.cuda.synchronize(1)
    ok, msg = R.check(out, ref)
    assert ok, (seed, msg)
    assert torch.empty(1, device="cuda").device.index == 0, seed  # the current device's work still goes there


def test_devices_alternate_call_after_call():
    seed = fresh_seed()
    calls = [make(SHAPES[i % 2], f"cuda:{i % 2 if i < 4 else 1 - i % 2}", seed + i) for i in range(8)]
    for current in (0, 1):
        torch.cuda.set_device(current)
        for data, _ref in calls:
            R.poison(data)
        torch.cuda.synchronize(0)
        torch.cuda.synchronize(1)
        outs = [fastlaunch.fast_launch(data) for data, _ref in calls]
        assert torch.cuda.current_device() == current, seed
        torch.cuda.synchronize(0)
        torch.cuda.synchronize(1)
        for i, (out, (_data, ref)) in enumerate(zip(outs, calls)):
            ok, msg = R.check(out, ref)
            assert ok, (seed, current, i, msg)
    torch.cuda.set_device(0)


def test_a_thread_that_never_used_cuda():
    # a new thread has no current context: the call runs in the device's and leaves the thread without one
    seed = fresh_seed()
    data, ref = make(SHAPES[0], "cuda:1", seed)
    R.poison(data)
    torch.cuda.synchronize(1)
    got = {}

    def work():
        try:
            got["out"] = fastlaunch.fast_launch(data)
            got["current"] = torch.cuda.current_device()
        except Exception as e:  # noqa: BLE001 (reported below)
            got["error"] = e

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert "error" not in got, (seed, got.get("error"))
    torch.cuda.synchronize(1)
    ok, msg = R.check(got["out"], ref)
    assert ok and got["current"] == 0, (seed, msg, got["current"])


CHILD = textwrap.dedent("""
    import ctypes, json, sys, threading
    import torch, fastlaunch
    from fastlaunch import reference as R

    cu = ctypes.CDLL("libcuda.so.1")
    assert cu.cuInit(0) == 0

    def active(i):  # whether device i's primary context exists (cuDevicePrimaryCtxGetState)
        dev, flags, on = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()
        assert cu.cuDeviceGet(ctypes.byref(dev), i) == 0
        assert cu.cuDevicePrimaryCtxGetState(dev, ctypes.byref(flags), ctypes.byref(on)) == 0
        return on.value

    seed = int(sys.argv[1])
    report = {}
    for name, (ms, ns, ks) in json.loads(sys.argv[2]).items():
        data = R.generate_input(ms, ns, ks, len(ms), seed, device="cuda:1")
        ref = R.ref_kernel(R.clone_outputs(data))
        R.poison(data)
        torch.cuda.synchronize(1)
        report[name + " before"] = [active(0), torch.cuda.current_device()]
        out = fastlaunch.fast_launch(data)
        torch.cuda.synchronize(1)
        report[name] = [active(0), active(1), torch.cuda.current_device(), R.check(out, ref)[0]]
        got = {}
        def work():
            R.poison(data)
            o = fastlaunch.fast_launch(data)
            torch.cuda.synchronize(1)
            got["ok"], got["current"] = R.check(o, ref)[0], torch.cuda.current_device()
        t = threading.Thread(target=work)
        t.start()
        t.join()
        report[name + " thread"] = [active(0), got.get("current"), got.get("ok")]
    print(json.dumps(report))
""")


def test_no_context_on_a_device_the_call_does_not_use():
    # A fresh process whose data lives on cuda:1 only: torch leaves cuda:0 without a context (it defers the switch
    # to its current device until that device is used), and so must fast_launch, its set-up, its workspace (from
    # torch's allocator) and its device switching, from the main thread and from a new one.
    seed = fresh_seed()
    shapes = {"gemm": SHAPES[0], "skinny": SHAPES[1]}
    r = subprocess.run([sys.executable, "-c", CHILD, str(seed), json.dumps(shapes)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, (seed, r.stderr[-4000:])
    report = json.loads(r.stdout.strip().splitlines()[-1])
    if report["gemm before"][0]:
        pytest.skip("this torch creates a context on cuda:0 by itself when data is made on cuda:1")
    for name in shapes:
        assert report[name + " before"] == [0, 0], (seed, report)
        assert report[name] == [0, 1, 0, True], (seed, name, report)  # no context on 0, correct, current 0
        assert report[name + " thread"] == [0, 0, True], (seed, name, report)
