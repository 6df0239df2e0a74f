"""The task's shapes: (G, M per group, N per group, K per group)."""
import random

TEST_SHAPES = [
    (2, [96, 128], [128, 256], [256, 512]),
    (2, [256, 72], [512, 384], [256, 256]),
    (2, [128, 128], [128, 256], [512, 256]),
    (3, [80, 128, 256], [384, 256, 128], [256, 512, 256]),
    (3, [64, 72, 96], [128, 384, 512], [512, 512, 256]),
    (3, [64, 256, 128], [768, 128, 256], [512, 256, 512]),
    (3, [128, 128, 64], [256, 512, 512], [768, 256, 768]),
    (4, [128] * 4, [128] * 4, [512, 256, 512, 256]),
    (4, [40, 56, 384, 512], [512, 384, 256, 128], [256] * 4),
    (4, [512, 384, 256, 128], [256] * 4, [512, 768, 512, 768]),
]

BENCH_SHAPES = [
    (8, [80, 176, 128, 72, 64, 248, 96, 160], [4096] * 8, [7168] * 8),
    (8, [40, 76, 168, 72, 164, 148, 196, 160], [7168] * 8, [2048] * 8),
    (2, [192, 320], [3072] * 2, [4096] * 2),
    (2, [128, 384], [4096] * 2, [1536] * 2),
]


def column(values) -> str:
    """One value if every group has it, else the groups' values joined by commas."""
    return str(values[0]) if len(set(values)) == 1 else ",".join(map(str, values))


def cut_sizes(sizes, heads):
    """The groups the sm90 launcher plans for `sizes` [(m, n, k), ...] cut at `heads` (fastlaunch._C.cuts):
    each cut group as its head rows, then the rest."""
    return [x for (m, n, k), h in zip(sizes, heads) for x in ([(h, n, k), (m - h, n, k)] if h else [(m, n, k)])]


def describe(shape) -> str:
    g, ms, ns, ks = shape
    return f"G={g} M={column(ms)} N={column(ns)} K={column(ks)}"


def flops(shape) -> int:
    _g, ms, ns, ks = shape
    return sum(2 * m * n * k for m, n, k in zip(ms, ns, ks))


def nvfp4_bytes(shape) -> int:
    """Bytes every implementation must move: NVFP4 A and B, their E4M3 scales, the fp16 output."""
    _g, ms, ns, ks = shape
    return sum(m * k // 2 + n * k // 2 + (m + n) * k // 16 + 2 * m * n for m, n, k in zip(ms, ns, ks))


def random_shapes(count: int, seed: int) -> list:
    """`count` random shapes, the same for the same seed: G 1..8; per group M 1..512, N 1..2048 and K a
    multiple of 64 up to 4096 (the sizes a grouped MoE layer sends, beyond the task's lists)."""
    rnd = random.Random(seed)
    shapes = []
    for _ in range(count):
        g = rnd.randint(1, 8)
        shapes.append((g, [rnd.randint(1, 512) for _ in range(g)], [rnd.randint(1, 2048) for _ in range(g)],
                       [64 * rnd.randint(1, 64) for _ in range(g)]))
    return shapes
