"""Builds fastlaunch._C: the CPython fast path (fastlaunch/_C.cpp) and the CUDA launcher/kernels (kernels/).

pip install --no-build-isolation .        (or -e .; metadata in pyproject.toml)
python setup.py build_ext --inplace       (tools/setup.sh does this, for a clone)

Needs nvcc (CUDA 12.8+; 13.0 is what the project is tested with, and the only toolkit the sm_100a
source was compiled with) and torch; no GPU is needed to build. kernels/sm100/launch.cu is compiled
on its own for sm_100a and linked into fastlaunch._C (Sm100Build below).
FASTLAUNCH_PTXAS_VERBOSE=1 prints registers/spills per kernel.
FASTLAUNCH_BUILD_BENCH=1 also builds fastlaunch._bench, the competing launch paths that
benchmarks/bench_launch.py times and the bare-launch floor benchmarks/bench_serving.py measures
(tools/setup.sh sets it; wheels leave it out, and a build without it drops a _bench left in build/lib by an
earlier one).

The extension runs only with the torch it was compiled against. The build records that torch in
fastlaunch/_build_info.py (beside the built _C; `import fastlaunch` compares it with the torch it finds and
raises ImportError on a mismatch), and a wheel requires exactly that torch (Requires-Dist: torch==<version>;
an sdist keeps torch>=2.11). A CPU-only torch cannot build it (the extension links torch's CUDA libraries).
"""
import glob
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys

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
import torch  # noqa: E402
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CUDAExtension  # noqa: E402


def _build_problem():
    """Why the extension cannot be built with this torch and toolkit, in words (None when it can). torch's own
    messages for both cases ("CUDA_HOME environment variable is not set") do not say what to change."""
    if torch.version.cuda is None:
        return (f"fastlaunch's extension links torch's CUDA libraries, and torch {torch.__version__} (in "
                f"{os.path.dirname(torch.__file__)}) is a CPU-only build. Install a CUDA build of torch (no GPU is "
                f"needed to build or import), e.g. `pip install torch --index-url "
                f"https://download.pytorch.org/whl/cu130`, then build with `pip install --no-build-isolation .` so "
                f"that the extension is built against that torch.")
    if CUDA_HOME is None:
        return ("nvcc not found: fastlaunch's kernels need the CUDA toolkit (12.8 or newer; tested with 13.0). Put "
                "its bin/ on PATH or set CUDA_HOME to the toolkit's directory.")
    return None


def _torch_requirement():
    """What the built distribution requires of torch: in a wheel (and an in-place build) exactly the torch built
    against, by its installed distribution's version (a PyPI wheel's torch.__version__ may carry a local label,
    +cu128, that its metadata lacks); in an sdist, which is built later against whichever torch is there,
    torch>=2.11."""
    if "sdist" in sys.argv:
        return "torch>=2.11"
    try:
        return f"torch=={importlib.metadata.version('torch')}"
    except importlib.metadata.PackageNotFoundError:  # a torch built from source, not installed as a distribution
        return f"torch=={torch.__version__.split('+')[0]}"


def _nvcc_version():
    try:
        out = subprocess.run([os.path.join(CUDA_HOME, "bin", "nvcc"), "--version"], capture_output=True,
                             text=True).stdout
    except OSError:
        return None
    found = re.search(r"release (\d+\.\d+)", out)
    return found.group(1) if found else None

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
    """Compiles SM100_SOURCES for sm_100a only and links the objects into fastlaunch._C; drops extensions of an
    earlier build that this one does not make (fastlaunch._bench) and records the torch the extension is built
    against (_build_info.py)."""

    def run(self):
        names = {ext.name.rsplit(".", 1)[-1] for ext in self.extensions}
        for stale in glob.glob(os.path.join(self.build_lib, "fastlaunch", "_*.so")):
            if os.path.basename(stale).split(".", 1)[0] not in names:
                print(f"removing {stale}: an earlier build's extension that this build does not make")
                os.remove(stale)
        super().run()
        info = (f'"""Written by setup.py with fastlaunch._C; not tracked. import fastlaunch checks TORCH_VERSION."""\n'
                f"TORCH_VERSION = {torch.__version__!r}\n"
                f"TORCH_CUDA = {torch.version.cuda!r}\n"
                f"NVCC = {_nvcc_version()!r}\n")
        dirs = {os.path.dirname(self.get_ext_fullpath("fastlaunch._C"))}
        if getattr(self, "editable_mode", False):  # the extension is also copied into the source tree
            dirs.add(os.path.join(ROOT, "fastlaunch"))
        for d in dirs:
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "_build_info.py"), "w") as f:
                f.write(info)

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


# Before CUDAExtension, which fails on either with torch's own message.
if _build_problem():
    sys.exit(f"error: {_build_problem()}")
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

# Name, version and package data live in pyproject.toml; the torch requirement is set here (_torch_requirement).
setup(
    packages=["fastlaunch"],
    install_requires=[_torch_requirement()],
    ext_modules=ext_modules,
    cmdclass={"build_ext": Sm100Build},
)
