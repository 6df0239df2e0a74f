from typing import Any, Sequence

import torch

supported_archs: str
max_width: int
tile_widths: tuple[int, ...]
skinny_builds: tuple[int, ...]  # the skinny kernel's compiled A row counts (kernels/sm90/plan/skinny.h kSkinnyBuilds)
narrow_n: int  # the narrow build's wgmma N (and A box rows) for groups of at most that many rows
mid_n: int  # the mid build's wgmma N in its 192-wide K loop, for launches whose every such tile fits it
block_n: int
max_ctas: int
max_groups_per_launch: int
cost_model: dict[str, float]

def fast_launch(data: Sequence[Any]) -> list[torch.Tensor]: ...
def unpack(data: Sequence[Any]) -> int: ...
def pack(data: Sequence[Any]) -> tuple[int, ...]: ...
def launch_repeat(data: Sequence[Any], iters: int) -> float: ...
def plan(
    sizes: Sequence[tuple[int, int, int]], sm_count: int, share: int = 0, cap: int = 0, parts: int = 0,
    half: int = 0, narrow: int = 0, mid: int = 0,
) -> tuple[tuple[tuple[int, int, int, int], ...], tuple[tuple[int, int], ...], float, int, int, bool]: ...
def cuts(
    sizes: Sequence[tuple[int, int, int]], sm_count: int, share: int = 0, cap: int = 0, parts: int = 0,
    half: int = 0, narrow: int = 0, mid: int = 0,
) -> tuple[int, ...]: ...
def row_plan(
    sizes: Sequence[tuple[int, int, int]], cap: int = 0,
) -> tuple[int, tuple[tuple[int, int, int, int], ...]] | None: ...
def sizes_seen(launches: Sequence[Sequence[tuple[int, int, int]]]) -> tuple[int, ...]: ...
def mma_n(
    sizes: Sequence[tuple[int, int, int]], sm_count: int, share: int = 0, cap: int = 0, parts: int = 0,
    half: int = 0, narrow: int = 0, mid: int = 0,
) -> tuple[int, ...]: ...
def skinny(
    sizes: Sequence[tuple[int, int, int]], sm_count: int,
) -> tuple[int, int, int, int, float, bool, int, int] | None: ...
# The serving layout's masked grouped GEMM, called by torch.ops.fastlaunch.grouped_mm_masked on CUDA (fastlaunch/ops.py
# documents the layout and the checks); builds without the masked kernel lack it, and the op then raises RuntimeError.
def grouped_mm_masked(
    a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor, sfb: torch.Tensor, masked_m: torch.Tensor, out: torch.Tensor,
    alpha: torch.Tensor | None = None, /,
) -> torch.Tensor: ...
# The contiguous layout, called by torch.ops.fastlaunch.grouped_mm_contiguous on CUDA.
def grouped_mm_contiguous(
    a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor, sfb: torch.Tensor, offs: torch.Tensor,
    out: torch.Tensor, alpha: torch.Tensor | None = None, /,
) -> torch.Tensor: ...
# The public wrappers' eager calls: the call above where every tensor is a plain CUDA tensor needing no gradient, the
# sizes int32 and no torch mode active; else NotImplemented, launching nothing.
def grouped_mm_masked_eager(
    a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor, sfb: torch.Tensor, masked_m: torch.Tensor,
    out: torch.Tensor, alpha: torch.Tensor | None, /,
) -> Any: ...
def grouped_mm_contiguous_eager(
    a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor, sfb: torch.Tensor, offs: torch.Tensor,
    out: torch.Tensor, alpha: torch.Tensor | None, /,
) -> Any: ...
def setup_device(device: int) -> str: ...
def plan_m(m: int) -> int: ...
def plan_memo_ns(launches: Sequence[Sequence[tuple[int, int, int]]], sm_count: int, reps: int) -> tuple[float, int]: ...
def skinny_memo_ns(launches: Sequence[Sequence[tuple[int, int, int]]], sm_count: int, reps: int) -> tuple[float, int]: ...
def row_schedule(
    tiles: int, kst: int, grid: int, wave_ok: bool, force: int = 0, a16_bytes: int = 0,
) -> tuple[int, int, tuple[tuple[int, int, int, int, int, int], ...]]: ...
