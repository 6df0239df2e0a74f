"""CPU tests of the launcher's and the workspace allocator's error reports (kernels/launcher.h): a set-up that
fails for good is kept and named on every later call; the torch allocator's callback carries torch's own text and
CUDA error number instead of a bare NULL. (The GPU side, out of memory and errors left by earlier work, is
tests/gpu/test_launch_errors.py.)"""
import ctypes
import subprocess
import sys
import textwrap

import pytest

import fastlaunch

from conftest import HAS_CUDA

FL_ERR_CUDA = 2


class Failure(ctypes.Structure):  # fl_alloc_failure
    _fields_ = [("status", ctypes.c_int), ("cuda_error", ctypes.c_int), ("message", ctypes.c_char_p),
                ("message_len", ctypes.c_size_t)]


ALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(Failure))
RELEASE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


class Allocator(ctypes.Structure):  # fl_allocator
    _fields_ = [("alloc", ALLOC), ("release", RELEASE), ("ctx", ctypes.c_void_p)]


def torch_allocator():
    return Allocator.in_dll(ctypes.CDLL(fastlaunch._C.__file__), "fl_torch_allocator")


def ask(alloc, nbytes):
    """alloc(nbytes) on the default stream: (pointer or None, status, cuda_error, message)."""
    text = ctypes.create_string_buffer(768)
    failure = Failure(FL_ERR_CUDA, 0, ctypes.cast(text, ctypes.c_char_p), len(text))
    ptr = alloc.alloc(nbytes, None, None, ctypes.byref(failure))
    return ptr, failure.status, failure.cuda_error, text.value.decode()


@pytest.mark.skipif(HAS_CUDA, reason="checks the failure of torch's allocator where CUDA cannot run")
def test_torch_allocator_callback_reports_torchs_text_and_the_cuda_error():
    ptr, status, cuda_error, message = ask(torch_allocator(), 4096)
    assert ptr is None and status == FL_ERR_CUDA
    assert cuda_error != 0 and message.startswith("CUDA error: "), (cuda_error, message)
    assert "Exception raised from" not in message  # torch's text without its C++ backtrace


def run_child(code):
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    return r.stdout.splitlines()


def test_a_failed_set_up_is_kept_and_named_on_later_calls():
    # Device 63 exists on no machine: the set-up fails (no driver, or an invalid device), a failure that does not
    # go away, so the second and third calls report the first one's error, saying it is not tried again. (A fresh
    # process: the launcher's per-device state lives as long as the process.)
    lines = run_child("""
        import ctypes, torch, fastlaunch
        fn = ctypes.CDLL(fastlaunch._C.__file__).fl_launch
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                       ctypes.c_char_p, ctypes.c_size_t]
        buf = (ctypes.c_int64 * 8)(0, 0, 0, 0, 0, 1, 1, 64)
        for _ in range(3):
            err = ctypes.create_string_buffer(1024)
            print(fn(buf, 1, None, 63, None, err, 1024), err.value.decode())
    """)
    first, second, third = (line.split(" ", 1) for line in lines)
    assert first[0] == second[0] == third[0] == str(FL_ERR_CUDA)
    assert first[1].startswith("could not set up cuda:63: ") and " failed: " in first[1], first[1]
    assert second[1] == third[1] == first[1] + " (the set-up failed on an earlier call and is not tried again)"


def test_setup_device_reports_the_kept_set_up_failure():
    # fastlaunch._C.setup_device (tools/b200_check.py's first step) sets a device up as a first call does and raises
    # what every call on it raises: here the failed set-up of device 63, kept.
    lines = run_child("""
        import fastlaunch
        for device in (63, 63):
            try:
                fastlaunch._C.setup_device(device)
            except RuntimeError as e:
                print(str(e))
        try:
            fastlaunch._C.setup_device(-1)
        except ValueError as e:
            print(str(e))
    """)
    first, second, bad = lines
    assert first.startswith("could not set up cuda:63: ") and " failed: " in first, first
    assert second == first + " (the set-up failed on an earlier call and is not tried again)"
    assert bad == "setup_device: no device -1"


class MaskedArgs(ctypes.Structure):  # fl_masked_args (kernels/launcher.h)
    _fields_ = [("a", ctypes.c_void_p), ("sfa", ctypes.c_void_p), ("b", ctypes.c_void_p), ("sfb", ctypes.c_void_p),
                ("masked_m", ctypes.c_void_p), ("out", ctypes.c_void_p), ("groups", ctypes.c_int64),
                ("max_m", ctypes.c_int64), ("n", ctypes.c_int64), ("k", ctypes.c_int64), ("alpha", ctypes.c_void_p),
                ("out_dtype", ctypes.c_int32), ("a_dtype", ctypes.c_int32), ("offs", ctypes.c_void_p)]


def test_launch_masked_checks_its_forms_before_any_cuda_call():
    # fl_launch_masked's checks of the form (a_dtype, sfa, masked_m or offs) come before any device is touched, so
    # they answer here; a plausible non-null address stands for each device pointer (none is dereferenced)
    lib = ctypes.CDLL(fastlaunch._C.__file__)
    lib.fl_launch_masked.restype = ctypes.c_int
    p = 1 << 20

    def call(**fields):
        base = dict(a=p, sfa=p, b=p, sfb=p, masked_m=p, out=p, groups=2, max_m=8, n=64, k=128, alpha=None,
                    out_dtype=0, a_dtype=0, offs=None)
        base.update(fields)
        err = ctypes.create_string_buffer(512)
        rc = lib.fl_launch_masked(ctypes.byref(MaskedArgs(**base)), None, 63, None, err, len(err))
        return rc, err.value.decode()

    assert call(a_dtype=3) == (1, "masked form: a_dtype must be FL_A_NVFP4 (0), FL_A_FP16 (1) or FL_A_BF16 (2), got 3")
    for a_dtype in (1, 2):  # fp16 and bf16 a: weight-only, no scales
        assert call(a_dtype=a_dtype) == (1, "masked form: sfa must be null where a is fp16 or bf16 (weight-only: a "
                                            "is taken as it is)")
    assert call(sfa=None) == (1, "masked form: NVFP4 a needs its scales sfa")
    assert call(offs=p) == (1, "contiguous layout: masked_m must be null where offs is given")
    assert call(masked_m=None) == (1, "masked form: masked_m (or, for the contiguous layout, offs) must be given")
    assert call(out_dtype=2)[1].startswith("masked form: out_dtype must be FL_OUT_FP16 (0) or FL_OUT_BF16 (1), got 2")
