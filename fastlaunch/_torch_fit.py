"""Does this torch fit the built extension? `import fastlaunch` asks before it loads fastlaunch._C, so that a
mismatch is an ImportError that says what to do rather than a loader error (`libc10_cuda.so: cannot open shared
object file`) or undefined symbols.

The build records the torch it compiled against in fastlaunch/_build_info.py (setup.py); an extension built
without that record (an older build) is not checked. FASTLAUNCH_SKIP_TORCH_CHECK=1 skips the check.
"""
from __future__ import annotations

import os

SKIP_ENV = "FASTLAUNCH_SKIP_TORCH_CHECK"


def problem(torch_version: str, torch_cuda: str | None, built_with: str | None) -> str | None:
    """The ImportError message for running the extension with torch `torch_version` (torch.version.cuda
    `torch_cuda`, None for a CPU-only build) when it was built against `built_with` (None: not recorded); None when
    it fits."""
    wanted = f"torch {built_with}" if built_with else "the CUDA build of torch it was built against"
    rebuild = ("or rebuild fastlaunch against this torch (`pip install --no-build-isolation --no-deps "
               "--force-reinstall .` in its source, or `./tools/setup.sh` in a clone)")
    if torch_cuda is None:
        return (f"fastlaunch's extension needs a CUDA build of torch (it links torch's CUDA libraries, "
                f"libc10_cuda.so among them; no GPU is needed to import it), but torch {torch_version} is CPU-only. "
                f"Install {wanted}, {rebuild}. ({SKIP_ENV}=1 skips this check.)")
    if built_with is not None and built_with != torch_version:
        return (f"fastlaunch's extension was built against torch {built_with}, but torch {torch_version} is "
                f"installed, and a C++ extension runs only with the torch it was compiled against. Install torch "
                f"{built_with}, {rebuild}. ({SKIP_ENV}=1 skips this check.)")
    return None


def check() -> None:
    """Raises ImportError when this torch does not fit the built extension (problem())."""
    if os.environ.get(SKIP_ENV, "") not in ("", "0"):
        return
    import torch

    try:
        from ._build_info import TORCH_VERSION as built_with
    except ImportError:
        built_with = None
    message = problem(torch.__version__, torch.version.cuda, built_with)
    if message:
        raise ImportError(message)
