import importlib.util
import os
import shutil
import subprocess
import warnings

import pytest
import torch

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

HAS_CUDA = torch.cuda.is_available()
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU (runs on the H200 test GPU)")


def pytest_report_header(config):
    if HAS_CUDA:
        return f"CUDA: {torch.cuda.get_device_name()}; GPU tests run"
    return "CUDA: none; GPU tests are skipped"


def cpp_probe(tmp_path_factory, name):
    """Builds tests/cpp/<name>.cpp (against kernels/) with the host C++ compiler and returns a function
    that sends it queries, one per line, and returns its answer lines; skips if no compiler is found."""
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip(f"no host C++ compiler (g++/c++) to build tests/cpp/{name}.cpp")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    exe = str(tmp_path_factory.mktemp("probe") / name)
    subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Werror", "-I", os.path.join(root, "kernels"),
                    os.path.join(root, "tests", "cpp", name + ".cpp"), "-o", exe], check=True)

    def ask(queries):
        r = subprocess.run([exe], input="\n".join(queries) + "\n", capture_output=True, text=True, check=True)
        return r.stdout.split("\n")[:len(queries)]

    return ask


def load_tool(name):
    """The module tools/<name>.py, loaded from its path (tools/ is not a package)."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools", name + ".py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _find_cuobjdump():
    """cuobjdump from the nvidia-cuda-cuobjdump wheel (nvidia/cu13/bin), else from PATH. Returns the path and
    the directory to put first on PATH (nvdisasm sits next to cuobjdump in the wheels)."""
    spec = importlib.util.find_spec("nvidia")
    for root in (list(spec.submodule_search_locations) if spec and spec.submodule_search_locations else []):
        for sub in sorted(os.listdir(root)):
            cand = os.path.join(root, sub, "bin", "cuobjdump")
            if os.access(cand, os.X_OK):
                return cand, os.path.dirname(cand)
    found = shutil.which("cuobjdump")
    return (found, os.path.dirname(found)) if found else (None, None)


@pytest.fixture(scope="module")
def sass():
    """The built extension's SASS per architecture ({"sm_100a": text, "sm_90a": text}), by cuobjdump."""
    import fastlaunch._C as _C

    tool, bindir = _find_cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump not found: pip install -r requirements.txt (nvidia-cuda-cuobjdump) or put it on PATH")
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""))

    def dump(arch):
        r = subprocess.run([tool, "--dump-sass", "--gpu-architecture", arch, _C.__file__], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"cuobjdump failed for {arch}: {r.stderr[-2000:]}"
        return r.stdout

    return {"sm_100a": dump("sm_100a"), "sm_90a": dump("sm_90a")}
