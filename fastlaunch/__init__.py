"""fastlaunch: launch an NVFP4 grouped GEMM from Python at the driver's own cost.

    import fastlaunch
    custom_kernel = fastlaunch.fast_launch      # GPU MODE nvfp4_group_gemm submissions

fast_launch(data) takes data = (abc, sf, sf_reordered, sizes) as the GPU MODE task defines it,
checks it, launches one kernel on the current stream of the tensors' device and returns the list
of the groups' c tensors, written in place.

For torch.compile, CUDA graphs and serving engines, the same work as torch ops (fastlaunch/ops.py), one
argument convention, (a, sfa, b, sfb, <sizes>, out), out optional:
grouped_gemm(a, sfa, b, sfb, c=None) (torch.ops.fastlaunch.grouped_gemm, the task layout as lists) and
grouped_mm_masked(a, sfa, b, sfb, masked_m, out=None) (torch.ops.fastlaunch.grouped_mm_masked, the serving
layout with per-expert row counts, int32 or int64, on the device) and grouped_mm_contiguous(a, None, b, sfb, offs,
out=None) (torch.ops.fastlaunch.grouped_mm_contiguous, fp16 token rows of all experts with per-expert end offsets on
the device); all also run on the CPU (the fp32 reference).
"""
import torch  # noqa: F401  (loads libtorch, which the extension links against)

from . import _torch_fit

_torch_fit.check()  # a torch that does not fit the build: a clear ImportError rather than the loader's

from ._C import fast_launch, pack, unpack, supported_archs  # noqa: E402
from .ops import grouped_gemm, grouped_mm_contiguous, grouped_mm_masked  # noqa: E402  (registers the ops)
from .quantize import quantize  # noqa: E402

__all__ = ["fast_launch", "pack", "unpack", "supported_archs", "custom_kernel", "grouped_gemm", "grouped_mm_masked",
           "grouped_mm_contiguous", "quantize"]
__version__ = "0.1.0"

custom_kernel = fast_launch
