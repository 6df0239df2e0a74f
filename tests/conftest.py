import importlib.util
import os
import random
import shutil
import subprocess
import warnings

import pytest
import torch

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

# The clone's root (tests live in tests/cpu, tests/gpu and tests/sass).
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Where the scripts that tests load or run live: the user's benchmarks, the project's tools, the tuning tools.
TOOL_DIRS = ("benchmarks", "tools", os.path.join("tools", "tuning"), os.path.join("tools", "sanitize"))

HAS_CUDA = torch.cuda.is_available()
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU (runs on the H200 test GPU)")


def pytest_collection_modifyitems(config, items):
    """Every test under tests/gpu/ carries the `gpu` marker (`pytest -m "not gpu"` leaves them out)."""
    for item in items:
        if os.sep + "gpu" + os.sep in str(item.fspath):
            item.add_marker(pytest.mark.gpu)


# Random tests draw their seeds from one base seed per run: printed in the report header and at the end of
# every run (with -q too), set with
# FASTLAUNCH_TEST_SEED=N to repeat a run, and each drawn seed printed by fresh_seed (pytest shows it with a
# failure's output).
BASE_SEED = int(os.environ.get("FASTLAUNCH_TEST_SEED") or random.randrange(1 << 30))
_last_seed = BASE_SEED


def fresh_seed():
    """The next seed of this run, printed."""
    global _last_seed
    _last_seed += 1
    print(f"seed {_last_seed} (run with FASTLAUNCH_TEST_SEED={BASE_SEED})")
    return _last_seed


def pytest_terminal_summary(terminalreporter):
    """The base seed at the end of every run, -q included (-q hides the report header)."""
    terminalreporter.write_line(f"random seeds from FASTLAUNCH_TEST_SEED={BASE_SEED} (set it to repeat this run)")


def pytest_report_header(config):
    seeds = f"random seeds from FASTLAUNCH_TEST_SEED={BASE_SEED}"
    if HAS_CUDA:
        return f"CUDA: {torch.cuda.get_device_name()}; GPU tests run; {seeds}"
    return f"CUDA: none; GPU tests are skipped; {seeds}"


def nvcc_or_skip(why="no nvcc"):
    """nvcc on PATH, else $CUDA_HOME/bin/nvcc (/usr/local/cuda without CUDA_HOME); skips the test, saying `why`,
    where there is none."""
    nvcc = shutil.which("nvcc") or os.path.join(os.environ.get("CUDA_HOME") or "/usr/local/cuda", "bin", "nvcc")
    if not os.access(nvcc, os.X_OK):
        pytest.skip(why)
    return nvcc


def cpp_probe(tmp_path_factory, name):
    """Builds tests/cpp/<name>.cpp (against kernels/) with the host C++ compiler and returns a function
    that sends it queries, one per line, and returns its answer lines; skips if no compiler is found."""
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip(f"no host C++ compiler (g++/c++) to build tests/cpp/{name}.cpp")
    exe = str(tmp_path_factory.mktemp("probe") / name)
    subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Werror", "-I", os.path.join(ROOT, "kernels"),
                    os.path.join(ROOT, "tests", "cpp", name + ".cpp"), "-o", exe], check=True)

    def ask(queries):
        r = subprocess.run([exe], input="\n".join(queries) + "\n", capture_output=True, text=True, check=True)
        return r.stdout.split("\n")[:len(queries)]

    return ask


def with_group(data, g, field, value):
    """A copy of data (lists at every level) with one leaf replaced. field: a, b, c, sfa, sfb, sizes."""
    abc = [list(t) for t in data[0]]
    sf = [list(t) for t in data[1]]
    sfr = [list(t) for t in data[2]]
    sizes = [list(t) for t in data[3]]
    if field in ("a", "b", "c"):
        abc[g]["abc".index(field)] = value
    elif field in ("sfa", "sfb"):
        sfr[g][("sfa", "sfb").index(field)] = value
    else:
        sizes[g] = value
    return abc, sf, sfr, sizes


def tool_path(name):
    """The path of script <name> (e.g. "bench_launch.py") in one of TOOL_DIRS."""
    for d in TOOL_DIRS:
        path = os.path.join(ROOT, d, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"{name} is in none of {TOOL_DIRS}")


def load_tool(name):
    """The module <name>.py of one of TOOL_DIRS, loaded from its path (they are not packages)."""
    path = tool_path(name + ".py")
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
