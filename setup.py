"""Builds fastlaunch._C: the CPython fast path (fastlaunch/_C.cpp) and the CUDA launcher/kernels (kernels/).

pip install --no-build-isolation .        (or -e .; metadata in pyproject.toml)
python setup.py build_ext --inplace       (tools/setup.sh does this, for a clone)

Needs nvcc (CUDA 12.8+; 13.0 is what the project is tested with, and the only toolkit the sm_100a
source was compiled with) and torch; no GPU is needed to build. kernels/sm100/launch.cu is compiled
on its own for sm_100a and linked into fastlaunch._C (Sm100Build below).
FASTLAUNCH_PTXAS_VERBOSE=1 prints registers/spills per kernel.
FASTLAUNCH_BUILD_BENCH=1 also builds fastlaunch._bench, the competing launch paths that
benchmarks/bench_launch.py times and the bare-launch floor benchmarks/bench_serving.py measures
(tools/setup.sh sets it; wheels leave it out).
"""
import os
import shutil
import subprocess

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
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CUDAExtension

ROOT = os.path.dirname(os.path.abspath(__file__))

# Architecture-specific targets: wgmma/setmaxnreg/tensormap.replace need sm_90a exactly; tcgen05
# needs sm_100a. setuptools passes one flag set to every .cu of an extension, so the sm_100a source
# is compiled on its own (Sm100Build) and linked in as an object.
GENCODE = ["-gencode", "arch=compute_90a,code=sm_90a"]
GENCODE_SM100 = ["-gencode", "arch=compute_100a,code=sm_100a"]
SM100_SOURCES = ["kernels/sm100/launch.cu"]

common_nvcc_flags = ["-O3", "-std=c++17", "--expt-relaxed-constexpr", "-lineinfo", "-diag-suppress", "1160"]
if os.environ.get("FASTLAUNCH_PTXAS_VERBOSE"):
    common_nvcc_flags += ["-Xptxas", "-v"]
# Experiments only (tools/tuning/ab_prepare.sh REF@NAME=VALUE,...): build defines such as FL_PLAN_PASS_NS=300, given to
# both compilers (the host planner, kernels/sm90/plan/planner.h, is compiled into fastlaunch/_C.cpp and into the launcher). The
# objects do not record them: build a tree with new defines from scratch (rm -rf build), as tools/tuning/ab_run.sh does.
EXPERIMENT_DEFINES = ["-D" + d for d in os.environ.get("FASTLAUNCH_NVCC_DEFINES", "").split()]
common_nvcc_flags += EXPERIMENT_DEFINES
nvcc_flags = [*common_nvcc_flags, *GENCODE]


class Sm100Build(BuildExtension):
    """Compiles SM100_SOURCES for sm_100a only and links the objects into fastlaunch._C."""

    def build_extensions(self):
        nvcc = os.path.join(CUDA_HOME, "bin", "nvcc") if CUDA_HOME else "nvcc"
        headers = [os.path.join(d, f) for d, _, files in os.walk(os.path.join(ROOT, "kernels")) for f in files
                   if f.endswith((".h", ".cuh"))]
        newest_header = max(os.path.getmtime(h) for h in headers)
        for ext in self.extensions:
            if ext.name != "fastlaunch._C":
                continue
            for src in SM100_SOURCES:
                obj = os.path.join(self.build_temp, "sm100", os.path.basename(src) + ".o")
                os.makedirs(os.path.dirname(obj), exist_ok=True)
                path = os.path.join(ROOT, src)
                if not os.path.exists(obj) or os.path.getmtime(obj) < max(os.path.getmtime(path), newest_header):
                    cmd = [nvcc, "-c", path, "-o", obj, *common_nvcc_flags, *GENCODE_SM100, "-Xcompiler", "-fPIC",
                           "-I" + os.path.join(ROOT, "kernels")]
                    print(" ".join(cmd))
                    subprocess.check_call(cmd)
                if obj not in ext.extra_objects:
                    ext.extra_objects.append(obj)
        super().build_extensions()


ext_modules = [
    CUDAExtension(
        name="fastlaunch._C",
        sources=[
            "fastlaunch/_C.cpp",
            "kernels/launcher.cu",
            "kernels/sm90/launch.cu",
        ],
        include_dirs=[os.path.join(ROOT, "kernels")],
        extra_compile_args={"cxx": ["-O3", *EXPERIMENT_DEFINES], "nvcc": nvcc_flags},
    ),
]
if os.environ.get("FASTLAUNCH_BUILD_BENCH"):
    # Competing launch paths for benchmarks/bench_launch.py (pybind11, TORCH_LIBRARY) and the bare-launch floor for
    # benchmarks/bench_serving.py (empty kernels on the sm_90a parameter blocks); not used by fastlaunch.
    ext_modules.append(
        CUDAExtension(
            name="fastlaunch._bench",
            sources=["benchmarks/launch_variants/bench_ext.cpp", "benchmarks/launch_variants/bare_launch.cu"],
            include_dirs=[os.path.join(ROOT, "kernels"), os.path.join(ROOT, "benchmarks", "launch_variants")],
            extra_compile_args={"cxx": ["-O3"], "nvcc": nvcc_flags},
        )
    )

# Name, version, dependencies and package data live in pyproject.toml.
setup(
    packages=["fastlaunch"],
    ext_modules=ext_modules,
    cmdclass={"build_ext": Sm100Build},
)
