"""The extension and its torch (fastlaunch/_torch_fit.py, setup.py): a torch other than the one the extension was
built against, or a CPU-only torch, is an ImportError that names what to install, before the loader's error."""
import os
import subprocess
import sys

import torch

from fastlaunch import _torch_fit
from conftest import ROOT

ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", _torch_fit.SKIP_ENV)}


def test_a_matching_or_unrecorded_torch_fits():
    assert _torch_fit.problem("2.14.1+cu130", "13.0", "2.14.1+cu130") is None
    assert _torch_fit.problem("2.14.1+cu130", "13.0", None) is None  # a build that recorded nothing: not checked


def test_another_torch_is_named_with_the_one_needed():
    msg = _torch_fit.problem("2.11.0+cu128", "12.8", "2.14.1+cu130")
    assert "built against torch 2.14.1+cu130, but torch 2.11.0+cu128 is installed" in msg
    assert "Install torch 2.14.1+cu130" in msg and "--no-build-isolation" in msg and _torch_fit.SKIP_ENV in msg


def test_a_cpu_only_torch_is_told_it_needs_a_cuda_build():
    msg = _torch_fit.problem("2.14.1+cpu", None, "2.14.1+cu130")
    assert "needs a CUDA build of torch" in msg and "torch 2.14.1+cpu is CPU-only" in msg
    assert "Install torch 2.14.1+cu130" in msg


def _import(prelude, env=ENV):
    code = prelude + "\nimport fastlaunch\nprint('imported')"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def test_import_raises_before_loading_the_extension():
    # a recorded torch that is not this one
    r = _import("import sys, types; sys.modules['fastlaunch._build_info'] = "
                "types.SimpleNamespace(TORCH_VERSION='2.11.0+cu128')")
    assert r.returncode != 0 and "ImportError: fastlaunch's extension was built against torch 2.11.0+cu128" in r.stderr
    # a CPU-only torch
    r = _import("import torch; torch.version.cuda = None")
    assert r.returncode != 0 and "ImportError: fastlaunch's extension needs a CUDA build of torch" in r.stderr
    # the escape hatch
    r = _import("import sys, types; sys.modules['fastlaunch._build_info'] = "
                "types.SimpleNamespace(TORCH_VERSION='2.11.0+cu128')", env={**ENV, _torch_fit.SKIP_ENV: "1"})
    assert r.returncode == 0 and "imported" in r.stdout, r.stderr[-2000:]


def test_the_build_records_this_torch():
    path = os.path.join(ROOT, "fastlaunch", "_build_info.py")
    if not os.path.exists(path):  # an extension copied in, not built here
        return
    info = {}
    exec(open(path).read(), info)
    assert info["TORCH_VERSION"] == torch.__version__ and info["TORCH_CUDA"] == torch.version.cuda


def test_building_against_a_cpu_only_torch_says_so():
    # setup.py with a torch that reports no CUDA: a plain message before anything is compiled or written
    code = ("import runpy, sys, torch; torch.version.cuda = None; sys.argv = ['setup.py', 'build_ext', '--inplace']; "
            "runpy.run_path('setup.py', run_name='__main__')")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0, r.stdout[-2000:]
    assert f"torch {torch.__version__}" in r.stderr and "is a CPU-only build. Install a CUDA build of torch" in r.stderr, \
        r.stderr[-2000:]
