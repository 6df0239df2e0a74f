"""The sm_100a self-check's device side on the GPU at hand, with stand-in kernels where the sm_100a kernel would run
(tests/gpu/sm100_self_check_host.cu, built here with nvcc): its allocation, inputs, launches, bounded wait, outputs and
comparison pass with a right GEMM and name a wrong element, an unwritten one, a write past C, a refused launch; a
barrier wait of kernels/ptx/mbarrier.cuh mbar_wait_bounded that never completes traps within its limit and is reported
as a sticky error; an unbounded hang is reported after the host's time limit. (What this cannot show: the sm_100a
kernel itself passing; that needs a B200.)"""
import os
import subprocess

import pytest
import torch

from conftest import ROOT, nvcc_or_skip, requires_cuda

pytestmark = requires_cuda

TAIL = ("; fastlaunch does not run the sm_100a kernel on this device (FASTLAUNCH_SM100_SELF_CHECK=0 skips the check, "
        "for testing the kernel itself)")
HEAD = "the sm_100a kernel failed its self-check on cuda:0: "
FL_ERR_UNSUPPORTED = 3


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    if torch.cuda.get_device_capability(0) < (9, 0):
        pytest.skip("mbarrier try_wait.parity needs compute capability 9.0 or later")
    nvcc = nvcc_or_skip("no nvcc to build tests/gpu/sm100_self_check_host.cu")
    exe = str(tmp_path_factory.mktemp("harness") / "sm100_self_check_host")
    subprocess.run([nvcc, "-std=c++17", "-O2", "-arch=native", "-diag-suppress", "1160", "-I",
                    os.path.join(ROOT, "kernels"), os.path.join(ROOT, "tests", "gpu", "sm100_self_check_host.cu"),
                    "-o", exe], check=True, timeout=600)

    def run(scenario):
        r = subprocess.run([exe, scenario], capture_output=True, text=True, timeout=120)
        status, message, ms = r.stdout.splitlines()[:3]
        return int(status.split()[1]), message, float(ms.split()[1])

    return run


def test_a_right_gemm_passes(harness):
    status, note, _ = harness("pass")
    assert status == 0, note
    assert note.startswith("the sm_100a kernel passed its self-check on cuda:0: 4 launches (one tile per CTA and "
                           "persistent, 16- and 256-group parameter blocks) of 9 groups, 18 tiles, K up to 1856; all "
                           "70817 C elements of each equal to the exact values, the guards around them untouched ("), note


def test_a_wrong_element_is_named(harness):
    status, msg, _ = harness("wrong")
    assert status == FL_ERR_UNSUPPORTED
    assert msg.startswith(HEAD + "launch 2 of 4 (the persistent kernel, 16-group parameter block, 1 CTA for 18 tiles), "
                          "group 1 (M=40, N=257, K=192): C[3, 17] = 2.5 (fp16 0x4100), expected "), msg
    assert msg.endswith("; 1 element of the group differs, 1 of the launch" + TAIL)


def test_an_unwritten_element_is_named(harness):
    status, msg, _ = harness("unwritten")
    assert status == FL_ERR_UNSUPPORTED
    assert (HEAD + "launch 3 of 4 (the one-tile-per-CTA kernel, 256-group parameter block, 18 CTAs), group 7 (M=128, "
            "N=64, K=64): C[127, 63] was not written (it holds the fill 0xffff), expected ") in msg, msg


def test_a_write_past_c_is_named(harness):
    status, msg, _ = harness("guard")
    assert status == FL_ERR_UNSUPPORTED
    assert msg == (HEAD + "launch 4 of 4 (the persistent kernel, 256-group parameter block, 3 CTAs for 18 tiles), "
                   "group 8 (M=5, N=300, K=320): a write outside C: element 0 of the 64-element guard after C holds "
                   "0x3c00, expected the fill 0xffff; 1 element of the group differs, 1 of the launch" + TAIL)


def test_a_refused_launch_is_named(harness):
    status, msg, _ = harness("refuse")
    assert status == FL_ERR_UNSUPPORTED
    assert msg.startswith(HEAD + "launch 2 of 4 (the persistent kernel, 16-group parameter block, 1 CTA for 18 "
                          "tiles) could not be queued: plain_gemm<<<...>>> failed: invalid argument "
                          "(cudaErrorInvalidValue)"), msg
    assert msg.endswith(TAIL)


def test_a_bounded_wait_traps_and_is_reported_as_sticky(harness):
    status, msg, ms = harness("trap")
    assert status == FL_ERR_UNSUPPORTED
    assert msg.startswith(HEAD + "its launches ended in a CUDA error: "), msg
    assert ("from a trap of the kernel's bounded barrier waits (a hang) or a fault; the error is sticky: the device's "
            "CUDA context is unusable") in msg and msg.endswith(TAIL)
    assert ms < 5000, ms  # 2^27 cycles is well under a second at any clock the GPU runs kernels at


def test_an_unbounded_hang_times_out(harness):
    status, msg, ms = harness("hang")
    assert status == FL_ERR_UNSUPPORTED
    assert msg.startswith(HEAD + "its 4 launches had not finished after 2 s: a hang."), msg
    assert 2000 <= ms < 4000, ms  # the 2 s wait, after the inputs and the expected C (about 0.1 s)
