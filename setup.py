"""Builds fastlaunch._C: the CPython fast path (fastlaunch/_C.cpp) and the CUDA launcher/kernels (kernels/).

python setup.py build_ext --inplace   (tools/setup.sh does this)

Needs nvcc (CUDA 12.8+; 13.0 is what the project is tested with) and torch; no GPU is needed to build.
FASTLAUNCH_PTXAS_VERBOSE=1 prints registers/spills per kernel.
"""
import os
import shutil

from setuptools import setup


def _find_cuda_home():
    """torch derives CUDA_HOME from `which nvcc`; a wrapper or link in /usr/local/bin points it at /usr/local.
    Take the first candidate that holds the toolkit's headers."""
    nvcc = shutil.which("nvcc")
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    if nvcc:
        candidates.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    for c in candidates:
        if c and os.path.exists(os.path.join(c, "include", "cuda_runtime_api.h")):
            return c
    return None


if _find_cuda_home():
    os.environ["CUDA_HOME"] = _find_cuda_home()
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

ROOT = os.path.dirname(os.path.abspath(__file__))

# Architecture-specific targets: wgmma/setmaxnreg/tensormap.replace need sm_90a exactly.
GENCODE = ["-gencode", "arch=compute_90a,code=sm_90a"]

nvcc_flags = ["-O3", "-std=c++17", "--expt-relaxed-constexpr", "-lineinfo", *GENCODE,
              "-diag-suppress", "1160"]
if os.environ.get("FASTLAUNCH_PTXAS_VERBOSE"):
    nvcc_flags += ["-Xptxas", "-v"]

setup(
    name="fastlaunch",
    version="0.1.0",
    description="NVFP4 grouped GEMM behind a hand-written CPython launch path",
    packages=["fastlaunch"],
    package_data={"fastlaunch": ["_C.pyi", "py.typed"]},
    python_requires=">=3.10",
    ext_modules=[
        CUDAExtension(
            name="fastlaunch._C",
            sources=[
                "fastlaunch/_C.cpp",
                "kernels/launcher.cu",
                "kernels/sm90_group_gemm.cu",
            ],
            include_dirs=[os.path.join(ROOT, "kernels")],
            extra_compile_args={"cxx": ["-O3"], "nvcc": nvcc_flags},
        ),
        # Competing launch paths for tools/bench_launch.py (pybind11, TORCH_LIBRARY); not used by fastlaunch.
        CUDAExtension(
            name="fastlaunch._bench",
            sources=["tools/launch_variants/bench_ext.cpp"],
            include_dirs=[os.path.join(ROOT, "kernels")],
            extra_compile_args={"cxx": ["-O3"]},
        ),
    ],
    cmdclass={"build_ext": BuildExtension},
)
