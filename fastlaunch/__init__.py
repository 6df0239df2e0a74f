"""fastlaunch: launch an NVFP4 grouped GEMM from Python at the driver's own cost.

    import fastlaunch
    custom_kernel = fastlaunch.fast_launch      # GPU MODE nvfp4_group_gemm submissions

fast_launch(data) takes data = (abc, sf, sf_reordered, sizes) as the GPU MODE task defines it,
checks it, launches one kernel on the current stream of the tensors' device and returns the list
of the groups' c tensors, written in place.
"""
import torch  # noqa: F401  (loads libtorch, which the extension links against)

from ._C import fast_launch, pack, unpack, supported_archs  # noqa: E402

__all__ = ["fast_launch", "pack", "unpack", "supported_archs", "custom_kernel"]
__version__ = "0.1.0"

custom_kernel = fast_launch
