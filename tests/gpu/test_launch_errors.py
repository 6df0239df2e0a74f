"""GPU tests of the launcher's error reports (skipped without CUDA; run on the H200 test GPU), each in a fresh
process: a workspace the allocator cannot give raises torch.OutOfMemoryError with the bytes asked and torch's own
text (and the next call, with memory back, works); a sticky CUDA error left by an earlier, unrelated kernel is
named as such, not as fastlaunch's failure (and a call with nothing to launch still returns); a set-up that fails
inside a graph capture is tried again on the next call; the allocator callback reports out of memory as such."""
import ctypes
import json
import re
import subprocess
import sys
import textwrap

import torch

import fastlaunch

from conftest import fresh_seed, requires_cuda

pytestmark = requires_cuda

FL_ERR_CUDA, FL_ERR_OUT_OF_MEMORY = 2, 4


def child(code, *args, env=None):
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_out_of_memory_for_the_workspace_raises_torchs_error():
    seed = fresh_seed()
    got = child("""
        import json, sys, torch, fastlaunch
        from fastlaunch import reference as R
        # 1024 rows x K 7168: the GEMM, whose workspace holds A as fp16 (2 x 1024 x 7168 bytes and more)
        data = R.generate_input([1024], [256], [7168], 1, int(sys.argv[1]), device="cuda")
        ref = R.ref_kernel(R.clone_outputs(data))
        fastlaunch.fast_launch(data)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()  # the workspace's block given back: the next call must ask for memory
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction((torch.cuda.memory_reserved() + (1 << 20)) / total)
        out = {}
        try:
            fastlaunch.fast_launch(data)
        except Exception as e:
            out["type"], out["is_oom"], out["message"] = type(e).__name__, isinstance(e, torch.OutOfMemoryError), str(e)
        torch.cuda.set_per_process_memory_fraction(1.0)
        R.poison(data)
        out["after"] = R.check(fastlaunch.fast_launch(data), ref)[0]
        torch.cuda.synchronize()
        print(json.dumps(out))
    """, seed)
    assert got.get("is_oom"), (seed, got)
    m = re.match(r"could not allocate a workspace of (\d+) bytes: CUDA out of memory\. Tried to allocate ",
                 got["message"])
    assert m and int(m.group(1)) >= 2 * 1024 * 7168, (seed, got["message"])
    assert got["after"], seed  # nothing left behind: the next call with memory works


def test_a_sticky_error_from_earlier_work_is_named_as_such():
    seed = fresh_seed()
    got = child("""
        import json, os, sys, torch, fastlaunch
        from fastlaunch import reference as R
        seed = int(sys.argv[1])
        calls = {"skinny": R.generate_input([1, 2], [512, 512], [1024, 1024], 2, seed, device="cuda"),
                 "gemm": R.generate_input([256], [512], [1024], 1, seed + 1, device="cuda")}
        empty = R.generate_input([0, 0], [64, 0], [64, 64], 2, seed + 2, device="cuda")
        for data in calls.values():  # set-up, plans and workspace blocks in place (a second call of new sizes plans)
            fastlaunch.fast_launch(data)
            fastlaunch.fast_launch(data)
        torch.cuda.synchronize()
        out = {}
        x, index = torch.zeros(4, device="cuda"), torch.tensor([10], device="cuda")
        try:
            x[index]  # an index out of range: a device-side assert, which leaves the context unusable
            torch.cuda.synchronize()
        except Exception as e:
            out["earlier"] = str(e).splitlines()[0]
        out["empty"] = len(fastlaunch.fast_launch(empty))  # nothing to launch: no CUDA call, so it returns
        for name, data in calls.items():
            try:
                fastlaunch.fast_launch(data)
            except Exception as e:
                out[name] = [type(e).__name__, str(e)]
        print(json.dumps(out), flush=True)
        os._exit(0)  # (no teardown in the unusable context)
    """, seed)
    assert "earlier" in got, (seed, "the out-of-range index raised no device-side assert", got)
    assert got["empty"] == 2, (seed, got)
    for name in ("skinny", "gemm"):
        kind, message = got[name]
        assert kind == "RuntimeError", (seed, name, got)
        assert message.startswith("a CUDA error from earlier work on cuda:0 is pending: "), (seed, name, message)
        assert "(cudaErrorAssert); not caused by this call, which had queued nothing" in message, (seed, message)


def test_a_set_up_inside_a_graph_capture_is_tried_again():
    # The call that sets a device up may be the first one inside a capture, where CUDA refuses some of the set-up's
    # calls: then it fails saying it is tried again, and the next call, outside the capture, sets up and computes.
    seed = fresh_seed()
    got = child("""
        import json, sys, torch, fastlaunch
        from fastlaunch import reference as R
        data = R.generate_input([96, 40], [256, 128], [512, 256], 2, int(sys.argv[1]), device="cuda")
        ref = R.ref_kernel(R.clone_outputs(data))
        torch.cuda.synchronize()
        out = {}
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                fastlaunch.fast_launch(data)
            R.poison(data)
            graph.replay()
            torch.cuda.synchronize()
            out["captured"] = R.check([c for _a, _b, c in data[0]], ref)[0]
        except Exception as e:
            chain = []
            while e is not None:
                chain.append(str(e))
                e = e.__cause__ or e.__context__
            out["failed"] = chain
        torch.cuda.synchronize()
        R.poison(data)
        out["after"] = R.check(fastlaunch.fast_launch(data), ref)[0]
        torch.cuda.synchronize()
        print(json.dumps(out))
    """, seed)
    if "failed" in got:
        assert any("tried again on the next call" in m for m in got["failed"]), (seed, got)
    else:
        assert got["captured"], (seed, got)
    assert got["after"], (seed, got)


class Failure(ctypes.Structure):  # fl_alloc_failure
    _fields_ = [("status", ctypes.c_int), ("cuda_error", ctypes.c_int), ("message", ctypes.c_char_p),
                ("message_len", ctypes.c_size_t)]


class Allocator(ctypes.Structure):  # fl_allocator
    _fields_ = [("alloc", ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p,
                                           ctypes.POINTER(Failure))),
                ("release", ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)),
                ("ctx", ctypes.c_void_p)]


def test_torch_allocator_callback_out_of_memory_and_success():
    torch.cuda.init()
    alloc = Allocator.in_dll(ctypes.CDLL(fastlaunch._C.__file__), "fl_torch_allocator")
    stream = torch.cuda.current_stream().cuda_stream

    def ask(nbytes):
        text = ctypes.create_string_buffer(768)
        failure = Failure(FL_ERR_CUDA, 0, ctypes.cast(text, ctypes.c_char_p), len(text))
        return alloc.alloc(nbytes, stream, None, ctypes.byref(failure)), failure.status, text.value.decode()

    ptr, status, message = ask(2 * torch.cuda.get_device_properties(0).total_memory)
    assert ptr is None and status == FL_ERR_OUT_OF_MEMORY, (status, message)
    assert message.startswith("CUDA out of memory. Tried to allocate "), message
    ptr, status, message = ask(1 << 20)
    assert ptr and message == ""
    alloc.release(ptr, stream, None)
    torch.cuda.synchronize()
