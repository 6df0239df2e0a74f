"""The build-define experiments of the sm90 GEMM still compile (setup.py passes FASTLAUNCH_NVCC_DEFINES to nvcc; see
tools/tuning/ab_prepare.sh): the masked kernels instantiated with each define, ptxas run, no GPU needed."""
import os
import subprocess

import pytest

from conftest import ROOT, nvcc_or_skip

SOURCE = """#include "sm90/gemm.cuh"
template __global__ void fl::sm90::nvfp4_group_gemm_masked<16, 1>(const __grid_constant__ fl::sm90::MaskedParams<16>);
template __global__ void fl::sm90::nvfp4_group_gemm_masked<16, 0>(const __grid_constant__ fl::sm90::MaskedParams<16>);
template __global__ void fl::sm90::nvfp4_group_gemm<16, 1, 0, 0, 0>(const __grid_constant__ fl::sm90::Params<16>);
"""


@pytest.mark.parametrize("define", ["FL_SM90_B_PAIR=1"])
def test_experiment_define_compiles(tmp_path, define):
    nvcc = nvcc_or_skip()
    src = tmp_path / "one.cu"
    src.write_text(SOURCE)
    out = subprocess.run([nvcc, "-c", str(src), "-o", str(tmp_path / "one.o"), "-O3", "-std=c++17",
                          "--expt-relaxed-constexpr", "-diag-suppress", "1160", "-gencode",
                          "arch=compute_90a,code=sm_90a", "-I", os.path.join(ROOT, "kernels"), "-D" + define,
                          "-Xptxas", "-v"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "C751" not in out.stderr, "ptxas serialised the wgmma"
