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
