"""CPU tests of empty groups (M = 0 or N = 0, as a mixture-of-experts step routes no token to an expert): the
unpacker accepts them with tensors of no elements (their strides, storage and data pointers unchecked, 0 in the
buffer), still checks their shapes, dtypes and non-empty tensors, and rejects negative sizes; the launcher ABI
leaves them out before anything reaches CUDA or the planner, and names the caller's groups in its messages."""
import ctypes

import pytest
import torch

import fastlaunch
from fastlaunch import reference as R

from conftest import HAS_CUDA, with_group

FL_OK, FL_ERR_VALUE = 0, 1


def make(ms, ns, ks, seed=0):
    return R.generate_input(list(ms), list(ns), list(ks), len(ms), seed, device="cpu")


def test_pack_shows_empty_groups_with_zero_pointers_for_their_empty_tensors():
    ms, ns, ks = (0, 96, 5, 0), (128, 0, 64, 0), (256, 128, 64, 64)
    data = make(ms, ns, ks)
    buf = fastlaunch.pack(data)
    G = len(ms)
    assert fastlaunch.unpack(data) == G and len(buf) == 8 * G
    assert buf[5 * G:] == ms + ns + ks
    for g, ((a, b, c), (sfa, sfb)) in enumerate(zip(data[0], data[2])):
        for f, t in enumerate((a, b, c, sfa, sfb)):
            assert buf[f * G + g] == (0 if t.numel() == 0 else t.data_ptr()), (g, f)
    # group 0 (M = 0): its b and sfb hold N = 128 rows and are real pointers; group 1 (N = 0): a and sfa are
    assert buf[1 * G + 0] == data[0][0][1].data_ptr() != 0 and buf[0 * G + 0] == 0 and buf[2 * G + 0] == 0
    assert buf[0 * G + 1] == data[0][1][0].data_ptr() != 0 and buf[1 * G + 1] == 0 and buf[4 * G + 1] == 0
    assert buf[:G * 5].count(0) == 3 + 3 + 0 + 5  # a, c, sfa of group 0; b, c, sfb of group 1; all of group 3


def _odd_empty(shape, dtype, strides, byte_offset):
    """A tensor of no elements whose data pointer is `byte_offset` bytes into a buffer, with arbitrary strides."""
    base = torch.zeros(64, dtype=torch.uint8)
    if dtype.itemsize == 1:
        return torch.as_strided(base[byte_offset:].view(dtype), shape, strides)
    raw = torch.frombuffer(bytearray(64), dtype=dtype, offset=byte_offset, count=4)
    return torch.as_strided(raw, shape, strides)


def test_empty_tensors_need_no_strides_storage_offset_or_alignment():
    data = make((0, 40), (64, 0), (128, 64))
    odd = {  # group 0 has M = 0 (a, c, sfa empty); group 1 has N = 0 (b, c, sfb empty)
        (0, "a"): _odd_empty((0, 64, 1), torch.float4_e2m1fn_x2, (3, 7, 0), 1),
        (0, "c"): _odd_empty((0, 64, 1), torch.float16, (0, 5, 1), 3),  # an odd address, off fp16's 2 bytes
        (0, "sfa"): _odd_empty((32, 4, 0, 4, 2, 1), torch.float8_e4m3fn, (1, 1, 1, 1, 1, 1), 9),
        (1, "b"): _odd_empty((0, 32, 1), torch.uint8, (1, 1, 1), 5),
        (1, "c"): _odd_empty((40, 0, 1), torch.float16, (1, 1, 1), 1),
        (1, "sfb"): _odd_empty((32, 4, 0, 4, 1, 1), torch.float8_e4m3fn, (0, 0, 0, 0, 0, 0), 15),
    }
    for (g, field), t in odd.items():
        assert t.numel() == 0 and (t.untyped_storage().data_ptr() + t.storage_offset() * t.element_size()) % 16
        data = with_group(data, g, field, t)
    buf = fastlaunch.pack(data)
    assert [buf[f * 2 + g] for g, f in ((0, 0), (0, 2), (0, 3), (1, 1), (1, 2), (1, 4))] == [0] * 6


def test_empty_groups_still_check_shapes_dtypes_and_their_non_empty_tensors():
    data = make((0, 40), (64, 8), (128, 64))
    cases = [
        # an empty tensor of the wrong shape, or dtype
        (0, "a", torch.zeros(0, 32, 1, dtype=torch.uint8), ValueError,
         "group 0: a has shape (0, 32, 1), expected (0, 64, 1) for M=0, K=128"),
        (0, "c", torch.zeros(0, 64, 1, dtype=torch.float32), TypeError, "group 0: c must be float16, got float32"),
        (0, "sfa", torch.zeros(32, 4, 1, 4, 2, 1, dtype=torch.float8_e4m3fn), ValueError,
         "group 0: sfa has shape (32, 4, 1, 4, 2, 1), expected (32, 4, 0, 4, 2, 1) for M=0, K=128"),
        # the M = 0 group's b (N = 64 rows) is read by nobody, yet it is a full tensor: checked as one
        (0, "b", torch.zeros(64 * 64 + 1, dtype=torch.uint8)[1:].view(64, 64, 1), ValueError, None),
        (0, "sfb", data[2][0][1].contiguous(), ValueError,
         "group 0: sfb has strides (32, 8, 8, 2, 1, 1), expected (16, 4, 1024, 1, 512, 1024) (the permuted view of a "
         "contiguous (1, ceil(rows/128), K/64, 32, 4, 4) array)"),
        # empty tensors of an unusable kind
        (0, "a", torch.empty(0, 64, 1, dtype=torch.uint8, device="meta"), ValueError,
         "group 0: a must be a CPU or CUDA tensor (a tensor with data)"),
        (0, "c", torch._neg_view(torch.zeros(0, 64, 1, dtype=torch.float16)), ValueError,
         "group 0: c is a negated or conjugated view (its neg or conj bit is set), whose values are not its bytes"),
    ]
    for g, field, value, exc, message in cases:
        with pytest.raises(exc) as info:
            fastlaunch.pack(with_group(data, g, field, value))
        if message is None:
            assert str(info.value).startswith(f"group {g}: {field} data pointer 0x")
            assert str(info.value).endswith("must be 16-byte aligned")
        else:
            assert str(info.value) == message


@pytest.mark.parametrize("sizes,message", [
    ((-1, 64, 128, 1), "group 1: m must be an int in 0..2147483647, got -1"),
    ((0, -5, 128, 1), "group 1: n must be an int in 0..2147483647, got -5"),
    ((0, 0, 0, 1), "group 1: k must be a positive multiple of 64 up to 2147483584, got 0"),
    ((0, 0, 64, 0), "group 1: l must be 1, got 0"),
    ((-2**63, 0, 64, 1), "group 1: m must be an int in 0..2147483647, got -9223372036854775808"),
    ((0, -2**64, 64, 1), "group 1: n must be an int in 0..2147483647, got an int that does not fit int64"),
])
def test_negative_and_other_bad_sizes_raise_exactly(sizes, message):
    data = make((8, 0), (64, 64), (128, 128))
    with pytest.raises(ValueError) as info:
        fastlaunch.unpack(with_group(data, 1, "sizes", sizes))
    assert str(info.value) == message


def test_fast_launch_checks_the_devices_of_empty_tensors_too():
    # every tensor of a call on one CUDA device, empty or not: CPU tensors are refused at the first one read
    data = make((0, 0), (0, 64), (64, 64))
    with pytest.raises(ValueError) as info:
        fastlaunch.fast_launch(data)
    assert str(info.value) == "group 0: a must be on a CUDA device, got cpu"


@pytest.mark.parametrize("fn", ["plan", "cuts", "mma_n", "skinny"])
def test_the_planner_entry_points_refuse_empty_groups(fn):
    # The planner (plan.h, skinny_plan.h, group_cuts.h) is given non-empty groups only: the launcher leaves
    # empty ones out before it plans (test_launcher_leaves_empty_groups_out_*), and the planner's own entry
    # points refuse them.
    call = getattr(fastlaunch._C, fn)
    call([(8, 128, 256)], 132)  # (non-empty: planned)
    for sizes in ([(0, 128, 256)], [(96, 0, 256)], [(96, 128, 256), (0, 0, 64)]):
        with pytest.raises(ValueError, match="unsupported sizes"):
            call(sizes, 132)


# ------------------------------------------------------------------------------------------------ the launcher ABI

def _launcher():
    lib = ctypes.CDLL(fastlaunch._C.__file__)
    fn = lib.fl_launch
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p,
                   ctypes.c_size_t]
    return fn


def fl_launch(sizes, device):
    """fl_launch on a buffer of the given (m, n, k) and null pointers; (status, message)."""
    G = len(sizes)
    vals = [0] * (5 * G) + [s[0] for s in sizes] + [s[1] for s in sizes] + [s[2] for s in sizes]
    buf = (ctypes.c_int64 * (8 * G))(*vals)
    err = ctypes.create_string_buffer(b"untouched", 1024)
    rc = _launcher()(buf, G, None, device, None, err, len(err))
    return rc, err.value.decode()


# An index past any machine's GPUs (the launcher knows 0..63): a call that reaches the set-up fails there, on
# machines with and without GPUs, before any pointer of these buffers is used.
NO_SUCH_DEVICE = 63


def test_launcher_returns_at_once_when_every_group_is_empty():
    for sizes in ([(0, 128, 64)], [(0, 0, 64), (5, 0, 128), (0, 7, 192)]):
        assert fl_launch(sizes, NO_SUCH_DEVICE) == (FL_OK, "untouched")  # no set-up, no CUDA, no message


def test_launcher_leaves_empty_groups_out_but_reaches_the_device_for_the_others():
    # one non-empty group among empty ones: the call goes on to the device (and fails at its set-up there)
    rc, msg = fl_launch([(0, 128, 64), (1, 1, 64), (3, 0, 64)], NO_SUCH_DEVICE)
    assert rc != FL_OK and msg.startswith(f"could not set up cuda:{NO_SUCH_DEVICE}: "), msg


def test_launcher_checks_every_group_and_names_the_callers_number():
    # sizes are checked for every group, empty or not, before any group is left out; messages name the caller's
    # group (its place in the caller's buffer), not its place among the non-empty ones
    cases = [
        ([(0, 128, 64), (0, 0, 64), (1, 1, 100)], 2, "m=1 n=1 k=100"),
        ([(0, 128, 64), (-1, 4, 64)], 1, "m=-1 n=4 k=64"),
        ([(0, 0, 0), (1, 1, 64)], 0, "m=0 n=0 k=0"),
        ([(1, 1, 64), (0, 2**31, 64)], 1, "m=0 n=2147483648 k=64"),
    ]
    for sizes, g, got in cases:
        assert fl_launch(sizes, NO_SUCH_DEVICE) == (
            FL_ERR_VALUE, f"group {g}: sizes must be m, n in 0..2147483647 and k a positive multiple of 64 up to "
                          f"2147483584, got {got}")


@pytest.mark.skipif(HAS_CUDA, reason="on a GPU machine this call would launch on device 0's real kernels")
def test_launcher_without_a_usable_gpu_fails_at_set_up_not_in_a_group():
    rc, msg = fl_launch([(0, 128, 64), (1, 1, 64)], 0)
    assert rc != FL_OK and msg.startswith("could not set up cuda:0: "), msg
