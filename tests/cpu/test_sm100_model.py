"""A CPU model of the sm_100a kernel's data path, run against fastlaunch.reference.

No Blackwell GPU runs here. A C++ probe (tests/cpp/sm100_model_probe.cpp, built with the host compiler)
lists what one launch of the kernel issues, warp role by warp role: barrier waits and arrivals, TMA tile
loads and bulk copies into shared memory, tcgen05.cp of scale blocks into tensor memory, tcgen05.mma with
the descriptor words the kernel's header (kernels/sm100/desc.h) encodes, tcgen05.ld and the epilogue's fp16
stores. This file executes those operations on simulated shared memory (bytes), tensor memory (128 lanes x
512 columns of 32 bits) and mbarriers, interpreting every word the way the PTX ISA (9.0: its section and
table numbers below) describes the hardware doing it, with decoders written here from the ISA tables (never
the encoders read backwards):

  - TMA tiled 2D load, 128-byte swizzle (5.5.7 "Swizzling Modes": in each 1024-byte aligned
    8 x 128-byte pattern, 16-byte chunk q of row r lands at position q ^ r; 5.5.3.3: zero fill outside
    the tensor), complete_tx of the whole box;
  - shared-memory descriptor (9.7.16.4.1, Table 40: start, LBO, SBO >> 4, fixed 0b001 at 46-48, base
    offset, swizzle mode at 61-63; Table 41: base offset 0 = the pattern starts on its aligned boundary)
    and the K-major canonical layouts (9.7.16.3.3: ((8,m),(T,2k)), T elements = 16 bytes: rows as many
    bytes apart as the swizzle is wide, 8-row groups SBO apart, Swizzle<3,4,3> for 128 bytes, applied to
    the byte address);
  - instruction descriptor of .kind::mxf4nvf4 (9.7.16.4.2, Table 44) and the shapes of Table 39;
  - tcgen05.cp .32x128b.warpx4 (9.7.16.9.2, 9.7.16.2.3: 32 lanes x 128 bits, copied to all four 32-lane
    partitions); tcgen05.ld .32x32b (9.7.16.2.3.1.1; warp w of a warpgroup reaches lanes 32w..32w+31,
    9.7.16.8.1); tensor-memory addresses (9.7.16.1.1: lane in bits 31-16, column in 15-0);
  - block scaling (9.7.16.10.7): D = (A x scale_A) (B x scale_B) + D, scale_A M x 4, scale_B 4 x N for
    .block16, duplicated to every 32-lane partition. The placement of a scale inside tensor memory is
    drawn in the ISA's figures only; the model takes it from CUTLASS's tmem_sf_frg (cute/atom/
    mma_traits_sm100.hpp, the 4x1 datapath): row i's scale for K block j sits in lane 32p + i % 32
    (every partition p), column i // 32, byte j. The accumulator of M = 128, cta_group::1 (Layout D,
    9.7.16.10.5.4) puts D row i in lane i and column n in column n (CUTLASS tmem_frg, M = 128).

The simulated C is poisoned with NaN, so an element the epilogue does not write fails. With the task's
own data every product and every partial sum is exact in fp32, so the model must equal the reference bit
for bit. The warp roles run interleaved by a scheduler that honours the mbarriers (eager: producers as far
ahead as the barriers let them; random: a seeded random order), so the pipeline's parities are exercised
as well. Mutated words (a field of a descriptor changed) must make the model disagree: the model checks
each field it interprets.

The random seed is the run's (tests/conftest.py): printed, and FASTLAUNCH_TEST_SEED repeats a run.
"""
import functools
import pathlib
import random
import re
import zlib

import pytest
import torch

from conftest import BASE_SEED, cpp_probe
from fastlaunch import reference as R

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The kernel sources the probe mirrors and the PTX wrappers whose instructions the model executes: the one
# place to update if they move.
SOURCES = {
    "kernel": ROOT / "kernels" / "sm100" / "gemm.cuh",
    "host": ROOT / "kernels" / "sm100" / "launch.cu",
    "tcgen05": ROOT / "kernels" / "ptx" / "tcgen05.cuh",
    "tma": ROOT / "kernels" / "ptx" / "tma.cuh",
    "mbarrier": ROOT / "kernels" / "ptx" / "mbarrier.cuh",
}
PROBE = "sm100_model_probe"

SEED = BASE_SEED
SMEM_WINDOW = 1 << 18  # descriptor start addresses carry bits 4..17 (Table 40: (x & 0x3FFFF) >> 4)
TMEM_LANES, TMEM_COLS = 128, 512
EPILOGUE_ROLES, TMA_ROLE, MMA_ROLE, SETUP_ROLE = (0, 1, 2, 3), 4, 5, 9


# ------------------------------------------------------------------------------------------ number formats
def _e2m1_table():
    """E2M1 code -> value: sign bit 3, exponent bits 2-1 (bias 1), mantissa bit 0; exponent 0 is subnormal."""
    out = []
    for code in range(16):
        s, e, m = code >> 3, (code >> 1) & 3, code & 1
        mag = m * 0.5 if e == 0 else (1 + m / 2) * 2.0 ** (e - 1)
        out.append(-mag if s else mag)
    return torch.tensor(out, dtype=torch.float64)


def _e4m3_table():
    """E4M3 (fn) byte -> value: sign bit 7, exponent bits 6-3 (bias 7), mantissa bits 2-0; S.1111.111 is NaN."""
    out = []
    for code in range(256):
        s, e, m = code >> 7, (code >> 3) & 15, code & 7
        if e == 15 and m == 7:
            out.append(float("nan"))
            continue
        mag = m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
        out.append(-mag if s else mag)
    return torch.tensor(out, dtype=torch.float64)


E2M1 = _e2m1_table()
E4M3 = _e4m3_table()


def _bits(x, lo, n):
    return (x >> lo) & ((1 << n) - 1)


# ------------------------------------------------------------------------------------------ ISA decoders
SWIZZLE_MODES = {0: 0, 2: 128, 4: 64, 6: 32}  # Table 40 bits 61-63 -> swizzle bytes (1, 128B/32B atoms: not used)


def decode_smem_desc(d):
    """Table 40. Returns start, LBO, SBO (bytes), base offset, LBO mode and swizzle bytes (0 = none)."""
    assert _bits(d, 14, 2) == 0 and _bits(d, 30, 2) == 0, f"bits outside the address fields set: {d:#x}"
    assert _bits(d, 46, 3) == 0b001, f"fixed constant 0b001 at bits 46-48 missing: {d:#x}"
    assert _bits(d, 53, 8) == 0, f"bits 53-60 must be 0: {d:#x}"
    mode = _bits(d, 61, 3)
    assert mode in SWIZZLE_MODES, f"swizzle mode {mode} not modelled or invalid: {d:#x}"
    return dict(start=_bits(d, 0, 14) << 4, lbo=_bits(d, 16, 14) << 4, sbo=_bits(d, 32, 14) << 4,
                base_offset=_bits(d, 49, 3), lbo_mode=_bits(d, 52, 1), swizzle=SWIZZLE_MODES[mode])


def decode_idesc(x):
    """Table 44 (.kind::mxf4 / .kind::mxf4nvf4)."""
    reserved = _bits(x, 0, 2) | _bits(x, 3, 1) | _bits(x, 6, 1) | _bits(x, 12, 1) | _bits(x, 24, 3)
    assert reserved == 0, f"reserved instruction-descriptor bits set: {x:#010x}"
    return dict(sparse=_bits(x, 2, 1), sfb_id=_bits(x, 4, 2), atype=_bits(x, 7, 3), btype=_bits(x, 10, 2),
                neg_a=_bits(x, 13, 1), neg_b=_bits(x, 14, 1), trans_a=_bits(x, 15, 1), trans_b=_bits(x, 16, 1),
                n=_bits(x, 17, 6) << 3, scale_ue8m0=_bits(x, 23, 1), m=_bits(x, 27, 2) << 7,
                sfa_id=_bits(x, 29, 2), k96=_bits(x, 31, 1))


def decode_taddr(t):
    """9.7.16.1.1: lane in bits 31-16, column in bits 15-0."""
    return t >> 16, t & 0xFFFF


def swizzle(addr, nbytes):
    """Swizzle<log2(nbytes / 16), 4, 3> on byte addresses: the 16-byte chunk index (bits 4..) XOR the
    128-byte row index within the pattern (bits 7..); 128 bytes: 8 chunks x 8 rows per 1024 bytes."""
    if nbytes == 0:
        return addr
    return addr ^ (((addr >> 7) & (nbytes // 16 - 1)) << 4)


def kmajor_addresses(desc, rows, row_bytes):
    """Byte addresses [rows, row_bytes] of a K-major operand as the descriptor describes it (9.7.16.3.3):
    ((8,m),(T,2k)) with T elements = 16 bytes; swizzled: rows `swizzle` bytes apart inside an 8-row group,
    the 16-byte K columns adjacent, LBO unused; no swizzle: rows 16 bytes apart, K columns LBO apart; 8-row
    groups SBO apart; then the swizzle on the address."""
    assert desc["base_offset"] == 0 and desc["lbo_mode"] == 0, desc
    r = torch.arange(rows, dtype=torch.int64)[:, None]
    b = torch.arange(row_bytes, dtype=torch.int64)[None, :]
    if desc["swizzle"]:
        row_stride, col_stride = desc["swizzle"], 16
    else:
        row_stride, col_stride = 16, desc["lbo"]
    off = (r % 8) * row_stride + (r // 8) * desc["sbo"] + (b // 16) * col_stride + b % 16
    return swizzle(desc["start"] + off, desc["swizzle"])


@functools.lru_cache(maxsize=None)
def operand_addresses(word, rows, row_bytes):
    """kmajor_addresses of a descriptor word, with its lowest and highest address (cached: a launch reuses
    a few dozen words)."""
    addr = kmajor_addresses(decode_smem_desc(word), rows, row_bytes)
    return addr, int(addr.min()), int(addr.max())


@functools.lru_cache(maxsize=None)
def box_addresses(dst, box_rows, box_bytes, swz):
    """Where a TMA box's bytes (row-major) land: dst + offset, swizzled by address."""
    addr = swizzle(dst + torch.arange(box_rows * box_bytes, dtype=torch.int64), swz)
    return addr, int(addr.min()), int(addr.max())


# ------------------------------------------------------------------------------------------ the machine
class ModelError(AssertionError):
    pass


class Barrier:
    """mbarrier (PTX 9.7.13.15): a phase completes when its pending arrivals and its transaction count
    both reach zero; try_wait.parity(P) succeeds once the phase of parity P has completed, which a fresh
    barrier reports for P = 1."""

    def __init__(self, count):
        self.count, self.pending, self.tx, self.phase = count, count, 0, 0

    def _maybe_complete(self):
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count

    def arrive(self, expect_tx=0):
        if self.pending == 0:
            raise ModelError("arrival on a barrier with no pending arrival")
        self.tx += expect_tx
        self.pending -= 1
        self._maybe_complete()

    def complete_tx(self, nbytes):
        self.tx -= nbytes
        if self.tx < 0:
            raise ModelError(f"transaction count below zero ({self.tx}): more bytes landed than expected")
        self._maybe_complete()

    def passed(self, parity):
        return (self.phase & 1) != parity


class Cta:
    """One CTA's shared memory, tensor memory and barriers, executing the probe's operations."""

    def __init__(self, cfg, data, out, gen):
        self.cfg, self.data, self.out = cfg, data, out
        self.smem = torch.randint(0, 256, (SMEM_WINDOW,), dtype=torch.uint8, generator=gen)  # garbage
        self.tmem = torch.randint(-2**31, 2**31, (TMEM_LANES, TMEM_COLS), dtype=torch.int64,
                                  generator=gen).to(torch.int32)  # garbage
        self.bars = {}
        self.maps = {}
        self.regs = {}

    # --- helpers: `where` is (addresses, lowest, highest)
    def _check_smem(self, lowest, highest):
        lo, hi = self.cfg["base"], self.cfg["base"] + self.cfg["smem_bytes"]
        if lowest < lo or highest >= hi:
            raise ModelError(f"shared-memory access {lowest}..{highest} outside the CTA's allocation [{lo}, {hi})")

    def _smem_read(self, where):
        self._check_smem(*where[1:])
        return self.smem[where[0]]

    def _smem_write(self, where, values):
        self._check_smem(*where[1:])
        self.smem[where[0]] = values

    def _tmem_cols(self, col, ncols):
        if col < 0 or col + ncols > TMEM_COLS:
            raise ModelError(f"tensor-memory columns {col}..{col + ncols - 1} outside the 512 allocated")

    # --- operations
    def init(self, bar, count):
        self.bars[bar] = Barrier(count)

    def expect(self, bar, nbytes):
        self.bars[bar].arrive(expect_tx=nbytes)

    def arrive(self, bar):
        self.bars[bar].arrive()

    def commit(self, bar):
        # Every tcgen05 operation of the issuing thread ran when it was issued: arrive now.
        self.bars[bar].arrive()

    def patch(self, ring, operand, group, row_bytes, rows):
        self.maps[(ring, operand)] = (group, row_bytes, rows)

    def tma(self, dst, ring, operand, x, y, bar):
        """cp.async.bulk.tensor.2d tile load through map (ring, operand): a box of box_bytes x box_rows at
        (x bytes, y rows), zero outside the tensor, 128-byte swizzled into shared memory."""
        group, row_bytes, rows = self.maps[(ring, operand)]
        if row_bytes % 16:
            raise ModelError(f"tensor-map row stride {row_bytes} not a multiple of 16 bytes")
        box_bytes, box_rows, swz = self.cfg["box_bytes"], self.cfg["box_rows"], self.cfg["swizzle"]
        if dst % 1024:
            raise ModelError(f"TMA destination {dst} not on a 1024-byte boundary (the swizzle pattern's start)")
        src = self.data[operand][group]  # [rows, row_bytes] uint8
        assert src.shape == (rows, row_bytes), (src.shape, rows, row_bytes)
        box = torch.zeros((box_rows, box_bytes), dtype=torch.uint8)
        r1, c1 = min(box_rows, rows - y), min(box_bytes, row_bytes - x)
        if r1 > 0 and c1 > 0:
            box[:r1, :c1] = src[y:y + r1, x:x + c1]
        self._smem_write(box_addresses(dst, box_rows, box_bytes, swz), box.reshape(-1))
        self.bars[bar].complete_tx(box_rows * box_bytes)

    def bulk(self, dst, operand, group, src_off, nbytes, bar):
        src = self.data[operand][group]  # flat uint8 storage of the reordered scales
        if dst % 16 or src_off % 16 or nbytes % 16:
            raise ModelError("bulk copy not 16-byte aligned")
        if src_off < 0 or src_off + nbytes > src.numel():
            raise ModelError(f"bulk copy reads {src_off}..{src_off + nbytes} of a {src.numel()}-byte scale buffer")
        self._smem_write((torch.arange(dst, dst + nbytes), dst, dst + nbytes - 1), src[src_off:src_off + nbytes])
        self.bars[bar].complete_tx(nbytes)

    def cp(self, taddr, sdesc):
        """tcgen05.cp.cta_group::1.32x128b.warpx4: 32 rows of 128 bits, row r into lane r of each 32-lane
        partition, its 16 bytes over 4 consecutive 32-bit columns (bytes 4c..4c+3 -> column c, low byte first)."""
        lane, col = decode_taddr(taddr)
        if lane != 0:
            raise ModelError(f"tcgen05.cp .32x128b.warpx4 to lane {lane}")
        self._tmem_cols(col, 4)
        rows = self._smem_read(operand_addresses(sdesc, 32, 16)).to(torch.int64)  # [32, 16]
        words = rows.reshape(32, 4, 4)
        words = words[..., 0] | words[..., 1] << 8 | words[..., 2] << 16 | words[..., 3] << 24
        words = torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)
        for p in range(4):
            self.tmem[32 * p:32 * p + 32, col:col + 4] = words

    def _operand(self, adesc, rows):
        """E2M1 values [rows, 64] of one MMA's K-major operand (two per byte, the lower K in the low nibble)."""
        raw = self._smem_read(operand_addresses(adesc, rows, 32)).to(torch.int64)
        codes = torch.stack([raw & 0xF, raw >> 4], dim=-1).reshape(rows, 64)
        return E2M1[codes]

    def _scale_bytes(self, lanes, cols):
        words = self.tmem[lanes, cols].to(torch.int64) & 0xFFFFFFFF
        return torch.stack([(words >> (8 * j)) & 0xFF for j in range(4)], dim=-1)

    def mma(self, d_addr, adesc, bdesc, idesc, sfa_addr, sfb_addr, accumulate):
        """tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16: D[M x N] (+)= (A scale_A)(B scale_B)^T
        over K = 64, A (M rows) and B (N rows) K-major in shared memory, fp32 D in tensor memory."""
        f = decode_idesc(idesc)
        assert f["sparse"] == 0 and f["k96"] == 0, f"not a dense K = 64 MMA: {f}"
        assert f["atype"] == 1 and f["btype"] == 1, f"operands not E2M1: {f}"
        assert f["scale_ue8m0"] == 0, f"scale type not UE4M3: {f}"
        assert f["sfa_id"] == 0 and f["sfb_id"] == 0, f"block16 takes scale-factor ids 0 only: {f}"
        assert not (f["neg_a"] or f["neg_b"] or f["trans_a"] or f["trans_b"]), f"negate/transpose set: {f}"
        m, n = f["m"], f["n"]
        assert m == 128 and 8 <= n <= 256 and n % 8 == 0, f"shape {m}x{n} outside Table 39 (cta_group::1)"
        d_lane, d_col = decode_taddr(d_addr)
        if d_lane != 0:
            raise ModelError(f"accumulator at lane {d_lane}")
        self._tmem_cols(d_col, n)
        a = self._operand(adesc, m)
        b = self._operand(bdesc, n)
        a_lane, a_col = decode_taddr(sfa_addr)
        b_lane, b_col = decode_taddr(sfb_addr)
        if a_lane != 0 or b_lane != 0:
            raise ModelError("scale factors not at lane 0")
        self._tmem_cols(a_col, (m + 31) // 32)
        self._tmem_cols(b_col, (n + 31) // 32)
        i = torch.arange(m)
        sa = E4M3[self._scale_bytes(i, a_col + i // 32)]  # [M, 4]: row i in its own lane
        a_scaled = a * sa.repeat_interleave(16, dim=1)
        # Each 32-lane partition p computes D rows 32p..32p+31 with its own copy of scale_B.
        nn = torch.arange(n)
        p = torch.arange(4)[:, None]
        sb = E4M3[self._scale_bytes(32 * p + nn % 32, b_col + nn // 32)]  # [4, N, 4]
        b_scaled = b * sb.repeat_interleave(16, dim=2)  # [4, N, 64]
        d = torch.bmm(a_scaled.view(4, 32, 64), b_scaled.transpose(1, 2)).reshape(m, n)
        acc = self.tmem[:m, d_col:d_col + n].view(torch.float32)
        res = acc + d.to(torch.float32) if accumulate else d.to(torch.float32)
        self.tmem[:m, d_col:d_col + n] = res.view(torch.int32)

    def ld(self, warp, taddr):
        """tcgen05.ld.32x32b.x16: thread t of the warp gets 16 consecutive 32-bit columns of lane base + t."""
        lane, col = decode_taddr(taddr)
        if lane != 32 * (warp % 4):
            raise ModelError(f"warp {warp} reads lanes from {lane}: it may only reach {32 * (warp % 4)}..+31")
        self._tmem_cols(col, 16)
        self.regs[warp] = self.tmem[lane:lane + 32, col:col + 16].view(torch.float32).clone()

    def st(self, warp, group, row0, col0, m, n):
        """The epilogue's stores after an ld: lane l, register j -> C[row0 + j][col0 + l] as fp16 (round to
        nearest even), where row < m and col < n, at element row * n + col of the group's C."""
        v = self.regs[warp]  # [32 lanes, 16 registers]
        rows = row0 + torch.arange(16)[None, :]
        cols = col0 + torch.arange(32)[:, None]
        keep = (rows < m) & (cols < n)
        idx = (rows * n + cols)[keep]
        c = self.out[group]
        assert c.numel() == m * n
        c[idx] = v[keep].to(torch.float16)


OPS = {"init": (int, int), "wait": (int, int), "expect": (int, int), "arrive": (int,), "commit": (int,),
       "patch": (int, str, int, int, int), "tma": (int, int, str, int, int, int),
       "bulk": (int, str, int, int, int, int), "cp": (int, int), "mma": (int, int, int, int, int, int, int),
       "ld": (int,), "st": (int, int, int, int, int)}


def parse(line):
    """The probe's answer -> (cfg, {cta: {role: [(op, args)]}})."""
    cfg, streams = None, {}
    for item in line.split(";"):
        if not item:
            continue
        f = item.split()
        cta, role, op = int(f[0]), int(f[1]), f[2]
        if op == "cfg":
            base, smem_bytes, grid, persistent, tiles, box_bytes, box_rows, swz = map(int, f[3:])
            cfg = dict(base=base, smem_bytes=smem_bytes, grid=grid, persistent=bool(persistent), tiles=tiles,
                       box_bytes=box_bytes, box_rows=box_rows, swizzle=swz)
            continue
        args = tuple(t(x) for t, x in zip(OPS[op], f[3:]))
        assert len(args) == len(OPS[op]) == len(f) - 3, item
        streams.setdefault(cta, {}).setdefault(role, []).append((op, args))
    return cfg, streams


def run_cta(cta, streams, policy, rng):
    """Runs the set-up, then the warp roles' streams interleaved: a role blocked on a wait does not move;
    `eager` always runs the first runnable role in the order TMA, MMA, epilogue (producers as far ahead as
    the barriers allow), `random` a random runnable one."""
    for op, args in streams.get(SETUP_ROLE, []):
        getattr(cta, op)(*args)
    order = [TMA_ROLE, MMA_ROLE, *EPILOGUE_ROLES]
    pos = {r: 0 for r in order}
    ops = {r: streams.get(r, []) for r in order}

    def runnable(r):
        if pos[r] >= len(ops[r]):
            return False
        op, args = ops[r][pos[r]]
        return op != "wait" or cta.bars[args[0]].passed(args[1])

    while True:
        ready = [r for r in order if runnable(r)]
        if not ready:
            stuck = {r: ops[r][pos[r]] for r in order if pos[r] < len(ops[r])}
            if stuck:
                raise ModelError(f"deadlock: every unfinished role waits: {stuck}")
            return
        r = ready[0] if policy == "eager" else rng.choice(ready)
        op, args = ops[r][pos[r]]
        pos[r] += 1
        if op == "wait":
            continue
        if op in ("ld", "st"):
            getattr(cta, op)(r, *args)
        else:
            getattr(cta, op)(*args)


# ------------------------------------------------------------------------------------------ inputs, runs
def _storage_bytes(sf_r):
    """The contiguous (1, ceil(rows/128), K/64, 32, 4, 4) storage behind the reordered scale view: the
    bytes the kernel's scale pointer addresses."""
    base = sf_r.permute(5, 2, 4, 0, 1, 3)  # inverse of the view's permute(3, 4, 1, 5, 2, 0)
    assert base.is_contiguous() and base.data_ptr() == sf_r.data_ptr()
    return base.view(torch.uint8).reshape(-1)


def operands(data):
    abc, _sf, sf_r, _sizes = data
    return {"a": [a.view(torch.uint8)[:, :, 0].contiguous() for a, _b, _c in abc],
            "b": [b.view(torch.uint8)[:, :, 0].contiguous() for _a, b, _c in abc],
            "sfa": [_storage_bytes(sa) for sa, _sb in sf_r],
            "sfb": [_storage_bytes(sb) for _sa, sb in sf_r]}


def simulate(line, data, policy, seed, mutate=None):
    """Executes the probe's answer on the inputs; returns (cfg, the groups' C as [m, n] fp16)."""
    cfg, streams = parse(line)
    if mutate is not None:
        mutate(streams)
    sizes = data[3]
    out = [torch.full((m * n,), float("nan"), dtype=torch.float16) for m, n, _k, _l in sizes]
    gen = torch.Generator().manual_seed(seed)
    rng = random.Random(seed)
    src = operands(data)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # thousands of tiny tensor operations: threads only add overhead
    try:
        for c in range(cfg["grid"]):
            run_cta(Cta(cfg, src, out, gen), streams.get(c, {}), policy, rng)
    finally:
        torch.set_num_threads(threads)
    return cfg, [o.view(m, n) for o, (m, n, _k, _l) in zip(out, sizes)]


def reference(data):
    return [c[:, :, 0] for c in R.ref_kernel(R.clone_outputs(data))]


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    print(f"sm100 model seed: {SEED} (FASTLAUNCH_TEST_SEED={SEED} repeats it)")
    ask = cpp_probe(tmp_path_factory, PROBE)

    def launch(ms, ns, ks, sm_count, smem_base=1024):
        query = " ".join(f"{m} {n} {k}" for m, n, k in zip(ms, ns, ks))
        (line,) = ask([f"{smem_base} {sm_count} {query}"])
        assert line and line != "bad query", line
        return line

    return launch


def _case_seed(*parts):
    return (SEED * 1000003 + zlib.crc32(repr(parts).encode())) % 2**31


# (G; M, N, K per group; SM count): one tile; K of one chunk, a partial last stage and more stages than the
# ring; several N tiles; M not a multiple of 128 or 16 (MMA N 16..128); several groups; persistent (more
# tiles than SMs: two accumulator buffers, CTAs striding over the table) and one tile per CTA.
CASES = {
    "one_tile": ([128], [128], [256], 148),
    "k64_single_chunk": ([128], [128], [64], 148),
    "k_partial_last_stage": ([96], [200], [448], 148),
    "k_more_stages_than_ring": ([128], [130], [1856], 148),
    "n_tiles_m_ragged": ([200], [300], [320], 148),
    "m1_n1": ([1], [1], [64], 148),
    "groups_mixed": ([40, 128, 257], [384, 72, 130], [256, 512, 192], 148),
    "contract_shape": ([64, 72, 96], [128, 384, 512], [512, 512, 256], 148),
    "persistent_one_sm": ([200, 72], [300, 136], [576, 256], 1),
    "persistent_three_sms": ([40, 56, 384, 130], [512, 384, 256, 128], [256, 256, 320, 192], 3),
}


@pytest.mark.parametrize("policy", ["eager", "random"])
@pytest.mark.parametrize("name", list(CASES))
def test_model_matches_reference(probe, name, policy):
    ms, ns, ks, sms = CASES[name]
    seed = _case_seed(name, policy)
    data = R.generate_input(ms, ns, ks, len(ms), seed, device="cpu", scale_pad=0x7F)  # E4M3 NaN past M, N
    cfg, got = simulate(probe(ms, ns, ks, sms), data, policy, seed)
    tiles = sum(-(-m // 128) * -(-n // 128) for m, n in zip(ms, ns))
    assert cfg["tiles"] == tiles and cfg["persistent"] == (tiles > sms), cfg
    ref = reference(data)
    ok, msg = R.check(got, ref)
    assert ok, f"{name} ({policy}, seed {SEED}): {msg}"
    # The task's data makes every product and partial sum exact in fp32: bit-equal, not just within tolerance.
    for g, (x, y) in enumerate(zip(got, ref)):
        assert torch.equal(x, y), f"{name} group {g} ({policy}, seed {SEED}): not bit-equal"


def _bounded_full_range(ms, ns, ks, seed):
    """Every E2M1 code, and scales drawn from E4M3 codes 0x01..0x40 (2^-9 .. 2, subnormals included), so no
    output exceeds fp16's range; the reordered scales rebuilt from the plain ones."""
    abc, sf, _sf_r, sizes = R.generate_input(ms, ns, ks, len(ms), seed, device="cpu", full_range=True)
    sf = [tuple((1 + (s.view(torch.uint8).long() - 1) % 0x40).to(torch.uint8).view(torch.float8_e4m3fn)
                for s in pair) for pair in sf]
    return abc, sf, [(R.reorder_scales(sa), R.reorder_scales(sb)) for sa, sb in sf], sizes


def test_model_matches_reference_full_range(probe):
    # Sums round in fp32 here: within fp16 rounding plus a small multiple of fp32's epsilon of the sum of
    # |terms| of a float64 product of fastlaunch.reference.dequantize's operands.
    ms, ns, ks = [72, 130], [136, 200], [320, 256]
    seed = _case_seed("full_range")
    data = _bounded_full_range(ms, ns, ks, seed)
    _cfg, got = simulate(probe(ms, ns, ks, 2), data, "random", seed)
    for g, ((a, b, _c), (sfa, sfb)) in enumerate(zip(data[0], data[1])):
        x, y = R.dequantize(a, sfa).double(), R.dequantize(b, sfb).double()
        want = x @ y.T
        terms = x.abs() @ y.abs().T
        err = (got[g].double() - want).abs()
        bound = 2.0 ** -11 * want.abs() + 2.0 ** -20 * terms + 2.0 ** -24
        assert bool((err <= bound).all()), f"group {g} (seed {SEED}): {int((err > bound).sum())} elements off"


def test_smem_base_on_another_1024_byte_boundary(probe):
    # The layout holds for any 1024-byte aligned base of dynamic shared memory.
    ms, ns, ks = [130], [136], [320]
    seed = _case_seed("base")
    data = R.generate_input(ms, ns, ks, 1, seed, device="cpu")
    _cfg, got = simulate(probe(ms, ns, ks, 148, smem_base=3072), data, "random", seed)
    assert torch.equal(got[0], reference(data)[0])


# ------------------------------------------------------------------------------------------ the model's power
def _map_ops(streams, op_name, fn):
    for roles in streams.values():
        for r, ops in roles.items():
            roles[r] = [(op, fn(args)) if op == op_name else (op, args) for op, args in ops]


def _with_field(word, lo, n, value):
    return (word & ~(((1 << n) - 1) << lo)) | (value << lo)


def _mut_desc(fn):
    return lambda s: _map_ops(s, "mma", lambda a: (a[0], fn(a[1]), fn(a[2]), *a[3:]))


MUTATIONS = {
    # operand descriptors: no swizzle; SBO halved; no K advance inside the swizzle atom
    "operand_swizzle_none": _mut_desc(lambda d: _with_field(d, 61, 3, 0)),
    "operand_sbo_512": _mut_desc(lambda d: _with_field(d, 32, 14, 512 >> 4)),
    "operand_no_k_advance": _mut_desc(lambda d: _with_field(d, 0, 14, (_bits(d, 0, 14) << 4 & ~127) >> 4)),
    # instruction descriptor: N one step smaller; scale type UE8M0 is refused by the model's check
    "idesc_n_minus_8": lambda s: _map_ops(s, "mma", lambda a: (*a[:3], a[3] - (1 << 17), *a[4:])),
    # scales: A's and B's tensor-memory columns swapped; the neighbouring chunk's columns
    "scales_swapped": lambda s: _map_ops(s, "mma", lambda a: (*a[:4], a[5], a[4], a[6])),
    "scales_other_chunk": lambda s: _map_ops(s, "mma", lambda a: (*a[:4], a[4] ^ 4, a[5], a[6])),
    # scale copy: the source read 128-byte swizzled
    "cp_swizzled": lambda s: _map_ops(s, "cp", lambda a: (a[0], _with_field(a[1], 61, 3, 2))),
    # the first MMA of a tile accumulating onto what tensor memory held
    "accumulate_first": lambda s: _map_ops(s, "mma", lambda a: (*a[:6], 1)),
    # epilogue: one column off
    "ld_column_plus_1": lambda s: _map_ops(s, "ld", lambda a: (a[0] + 1,)),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_model_rejects_a_changed_word(probe, name):
    ms, ns, ks = [128, 64], [256, 128], [512, 320]
    seed = _case_seed("mutation", name)
    data = R.generate_input(ms, ns, ks, 2, seed, device="cpu")
    line = probe(ms, ns, ks, 148)
    _cfg, good = simulate(line, data, "random", seed)
    ref = reference(data)
    assert all(torch.equal(x, y) for x, y in zip(good, ref))
    try:
        _cfg, bad = simulate(line, data, "random", seed, mutate=MUTATIONS[name])
    except AssertionError:
        return  # the model refused the word (a range or field check)
    assert not all(torch.equal(x, y) for x, y in zip(bad, ref)), f"{name}: the model did not notice (seed {SEED})"


def _drop_waits(role, counts):
    """A mutation: `role` no longer waits on the barriers set up with an arrival count in `counts`."""
    def mutate(streams):
        for roles in streams.values():
            bars = {args[0] for op, args in roles.get(SETUP_ROLE, []) if op == "init" and args[1] in counts}
            roles[role] = [(op, args) for op, args in roles.get(role, []) if not (op == "wait" and args[0] in bars)]
    return mutate


PROTOCOL_MUTATIONS = {
    # the MMA warp refills an accumulator buffer without waiting for the four epilogue warps to drain it
    "mma_skips_acc_empty": _drop_waits(MMA_ROLE, {4}),
    # the TMA warp refills a stage without waiting for the MMAs that read it
    "tma_skips_stage_empty": _drop_waits(TMA_ROLE, {1}),
}


@pytest.mark.parametrize("name", list(PROTOCOL_MUTATIONS))
def test_model_catches_a_missing_wait(probe, name):
    # Persistent kernel on one SM (6 tiles, 2 stages each: the stage ring and both accumulator buffers wrap),
    # producers run ahead: a refill overwrites data not yet consumed, or a consumer waits on a barrier whose
    # phase went round twice (a hang).
    ms, ns, ks = [256], [384], [512]
    seed = _case_seed("protocol", name)
    data = R.generate_input(ms, ns, ks, 1, seed, device="cpu")
    line = probe(ms, ns, ks, 1)
    _cfg, good = simulate(line, data, "eager", seed)
    assert torch.equal(good[0], reference(data)[0])
    try:
        _cfg, bad = simulate(line, data, "eager", seed, mutate=PROTOCOL_MUTATIONS[name])
    except ModelError as e:
        assert "deadlock" in str(e) or "no pending arrival" in str(e), e
        return
    assert not torch.equal(bad[0], reference(data)[0]), f"{name}: the model did not notice (seed {SEED})"


# ------------------------------------------------------------------------------------------ decoders, mirror
def test_number_format_tables():
    assert E2M1.tolist() == list(R.E2M1_VALUES)
    want = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).double()
    assert torch.equal(E4M3.isnan(), want.isnan()) and torch.equal(E4M3.nan_to_num(), want.nan_to_num())


def test_swizzle_matches_the_tma_table():
    # PTX ISA 5.5.7, 128-byte swizzle: position p of row r (1024-byte aligned start) holds chunk p ^ r.
    for r in range(8):
        for q in range(8):
            assert swizzle(2048 + r * 128 + q * 16, 128) == 2048 + r * 128 + (q ^ r) * 16


def test_decoders_read_the_isa_examples():
    # Table 40 fields from a word composed by hand: start 0x1400, LBO 16, SBO 1024, 128-byte swizzle.
    word = (0x1400 >> 4) | (1 << 16) | (64 << 32) | (1 << 46) | (2 << 61)
    assert decode_smem_desc(word) == dict(start=0x1400, lbo=16, sbo=1024, base_offset=0, lbo_mode=0, swizzle=128)
    # Table 44: E2M1 x E2M1, N = 48, M = 128 (M >> 7 at bits 27-28), UE4M3.
    f = decode_idesc((1 << 7) | (1 << 10) | (6 << 17) | (1 << 27))
    assert (f["m"], f["n"], f["atype"], f["btype"], f["scale_ue8m0"]) == (128, 48, 1, 1, 0)
    with pytest.raises(AssertionError):
        decode_idesc(1 << 24)  # reserved for .kind::mxf4nvf4


# The kernel lines the probe mirrors (whitespace-insensitive). If one changes, update
# tests/cpp/sm100_model_probe.cpp to match and then this list.
MIRRORED = {
    "kernel": [
        "constexpr uint32_t kTileBytes = kTileB * kBlockK / 2;",
        "constexpr uint32_t kOffA = 0; constexpr uint32_t kOffB = kOffA + kTileBytes;",
        "constexpr uint32_t kOffSfa = kOffB + kTileBytes;",
        "constexpr uint32_t kOffSfb = kOffSfa + kChunks * kSfBlockBytes;",
        "constexpr uint32_t kStageBytes = kOffSfb + kChunks * kSfBlockBytes;",
        "constexpr uint32_t kOffBars = 256;",
        "constexpr uint32_t kHeaderBytes = 1024;",
        "constexpr uint32_t kSmemBytes = kHeaderBytes + kStages * kStageBytes;",
        "constexpr int kEpilogueWarps = 4; constexpr int kTmaWarp = 4; constexpr int kMmaWarp = 5;",
        "uint32_t full(int s) const { return base + kOffBars + 8u * s; }",
        "uint32_t empty(int s) const { return base + kOffBars + 8u * (kStages + s); }",
        "uint32_t acc_full(int b) const { return base + kOffBars + 8u * (2 * kStages + b); }",
        "uint32_t acc_empty(int b) const { return base + kOffBars + 8u * (2 * kStages + kAccBuffers + b); }",
        "uint32_t stage(int s) const { return base + kHeaderBytes + s * kStageBytes; }",
        "uint32_t acc_buf(uint32_t i) { return kPersistent ? i % kAccBuffers : 0; }",
        # tma_warp
        "int cur_g = -1, ring = kMapRing - 1, hint = 0;",
        "ring = (ring + 1) % kMapRing;",
        "pool::patch_map_2d(smem + kOffMapStage, p.tmpl, pair, gr.a, gr.k / 2, gr.m, lane);",
        "pool::patch_map_2d(smem + kOffMapStage + 128, p.tmpl, pair + 128, gr.b, gr.k / 2, gr.n, lane);",
        "const void* map_a = g_pool_maps[slot][ring]; const void* map_b = g_pool_maps[slot][ring] + 128;",
        "const uint8_t* sfa = gr.sfa + (int64_t)(tc.m0 / kTileA) * blocks_k * kSfBlockBytes;",
        "const uint8_t* sfb = gr.sfb + (int64_t)(tc.n0 / kTileB) * blocks_k * kSfBlockBytes;",
        "ptx::mbar_wait_bounded(sm.empty(s), ((it / kStages) & 1) ^ 1, p.wait_cycles);",
        "const uint32_t sf_bytes = (kc + 1 < ks ? kChunks : last_chunks(gr.k)) * kSfBlockBytes;",
        "const int64_t sf_off = (int64_t)kc * kChunks * kSfBlockBytes;",
        "ptx::mbar_arrive_expect_tx(sm.full(s), 2 * kTileBytes + 2 * sf_bytes);",
        "ptx::tma_load_2d(st + kOffA, map_a, kc * (kBlockK / 2), tc.m0, sm.full(s), gr.policy_a);",
        "ptx::tma_load_2d(st + kOffB, map_b, kc * (kBlockK / 2), tc.n0, sm.full(s), gr.policy_b);",
        "ptx::bulk_load(st + kOffSfa, sfa + sf_off, sf_bytes, sm.full(s), gr.policy_a);",
        "ptx::bulk_load(st + kOffSfb, sfb + sf_off, sf_bytes, sm.full(s), gr.policy_b);",
        # mma_warp
        "const uint32_t idesc = idesc_mxf4nvf4(kTileB, mma_n(gr.m, tc.m0));",
        "if (kPersistent) ptx::mbar_wait_bounded(sm.acc_empty(buf), ((i / kAccBuffers) & 1) ^ 1, p.wait_cycles);",
        "const uint32_t d = tmem + acc_col(buf);",
        "ptx::mbar_wait_bounded(sm.full(s), (it / kStages) & 1, p.wait_cycles);",
        "const int chunks = kc + 1 < ks ? kChunks : last_chunks(gr.k);",
        "ptx::tmem_cp_32x128b_warpx4(tmem + sf_col(s, 0, c), smem_desc_scales(st + kOffSfb + c * kSfBlockBytes));",
        "ptx::tmem_cp_32x128b_warpx4(tmem + sf_col(s, 1, c), smem_desc_scales(st + kOffSfa + c * kSfBlockBytes));",
        "ptx::mma_mxf4nvf4(d, smem_desc_operand(st + kOffB, c), smem_desc_operand(st + kOffA, c), idesc, "
        "tmem + sf_col(s, 0, c), tmem + sf_col(s, 1, c), kc > 0 || c > 0);",
        "ptx::tcgen05_commit(sm.empty(s));",
        "if (lane == 0) ptx::tcgen05_commit(sm.acc_full(buf));",
        # epilogue_warps
        "ptx::mbar_wait_bounded(sm.acc_full(buf), (i / kAccBuffers) & 1, "
        "p.wait_cycles * (uint64_t)(kstages(gr.k) + 1));",
        "const int n = mma_n(gr.m, tc.m0);",
        "const int64_t col = (int64_t)tc.n0 + 32 * warp + lane;",
        "for (int j0 = 0; j0 < n; j0 += 16) {",
        "ptx::tmem_ld_32x32b_x16(tmem + tmem_addr(32 * warp, acc_col(buf) + j0), v);",
        "if (col < gr.n) {",
        "const int64_t row = (int64_t)tc.m0 + j0 + j;",
        "if (row < gr.m) gr.c[row * gr.n + col] = __float2half_rn(__uint_as_float(v[j]));",
        "if (kPersistent && lane == 0) ptx::mbar_arrive(sm.acc_empty(buf));",
        # the kernel: barrier counts, the roles' loops
        "ptx::mbar_init(sm.full(s), 1); ptx::mbar_init(sm.empty(s), 1);",
        "ptx::mbar_init(sm.acc_full(b), 1); ptx::mbar_init(sm.acc_empty(b), kEpilogueWarps);",
        "const int step = kPersistent ? (int)gridDim.x : p.num_tiles;",
        "for (int t = blockIdx.x; t < p.num_tiles; t += step) {",
        "for (int t = blockIdx.x; t < p.num_tiles; t += step, ++i) {",
        "extern __shared__ __align__(1024) uint8_t smem[];",
    ],
    "host": [
        "tiles += sm100::group_tiles(m, n);",
        "gr.tile_end = (int32_t)tiles;",
        "const bool one_tile = sm100::one_tile_per_cta(tiles, dev.sm_count);",
        "cfg.gridDimX = (unsigned)sm100::grid_size(tiles, dev.sm_count);",
        "dev.sm100.fn[which][one_tile ? 0 : 1]",
        "prepare<sm100::kGroupsSmall, false>(&st.fn[0][0], err)",
        "encode_byte_map_template(dev.drv, &st.tmpl, sm100::kBlockK / 2, sm100::kTileB, "
        "CU_TENSOR_MAP_SWIZZLE_128B,",
    ],
    # the instructions the model executes, with their operand order
    "tcgen05": [
        "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16 [%0], %1, %2, %3, [%5], [%6], p;",
        '"r"(taddr_d), "l"(adesc), "l"(bdesc), "r"(idesc), "r"((uint32_t)accumulate), "r"(taddr_sfa), '
        '"r"(taddr_sfb)',
        'tcgen05.cp.cta_group::1.32x128b.warpx4 [%0], %1;" ::"r"(taddr), "l"(sdesc)',
        "tcgen05.ld.sync.aligned.32x32b.x16.b32",
        "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32",
    ],
    "tma": [
        'cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint" '
        '" [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst), "l"(tmap), "r"(x), "r"(y), "r"(bar), "l"(policy)',
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint",
    ],
    "mbarrier": [
        "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;",
        "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;",
    ],
}


def _squash(text):
    return re.sub(r"\s+", "", text)


@pytest.mark.parametrize("source", list(MIRRORED))
def test_probe_mirrors_the_kernel(source):
    text = _squash(SOURCES[source].read_text())
    missing = [line for line in MIRRORED[source] if _squash(line) not in text]
    assert not missing, (f"{SOURCES[source].relative_to(ROOT)} changed where tests/cpp/{PROBE}.cpp mirrors it: "
                         f"{missing}")
