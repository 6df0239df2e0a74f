"""CPU tests of the sm_100a encoders (kernels/sm100/desc.h), through a small C++ probe built with the host
compiler (tests/cpp/sm100_desc_probe.cpp).

Every expected value is composed here by hand from the PTX ISA bit layouts (PTX ISA 9.x, chapter 9.7.16
"TensorCore 5th Generation Family Instructions"), never by calling the code under test:
  - 9.7.16.4.1 Shared Memory Descriptor, Table 40 (bit fields) and Table 41 (swizzle pattern starts);
  - 9.7.16.3.1.1 Leading dimension stride, relative offset mode (LBO unused for swizzled K-major);
  - 9.7.16.4.2 Instruction Descriptor, the table for .kind::mxf8f6f4 / .kind::mxf4 / .kind::mxf4nvf4
    (Table 43; Table 42 is the dense kinds' table);
  - 9.7.16.2 Tensor Memory (32-bit address: lane in bits 31-16, column in bits 15-0; 128 lanes x 512
    columns of 32 bits) and 9.7.16.2.3 Data Movement Shape (.32x128b for tcgen05.cp: 128 bits = 4 columns).
"""
import pytest

from conftest import cpp_probe


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    ask = cpp_probe(tmp_path_factory, "sm100_desc_probe")

    def parsed(*queries):
        return [tuple(int(x) for x in line.split()) if " " in line else int(line) for line in ask(queries)]

    return parsed


# ---------------------------------------------------------------- instruction descriptor (Table 43)
# Fields for .kind::mxf4nvf4: 0-1 sparsity selector, 2 sparsity (dense 0), 4-5 matrix B scale-factor id,
# 7-9 atype (E2M1 = 1 for this kind), 10-12 btype (E2M1 = 1), 13/14 negate A/B, 15/16 transpose A/B
# (0 = K-major), 17-22 N >> 3, 23 scale type (UE4M3 = 0, UE8M0 = 1), 24-28 M >> 4,
# 29-30 matrix A scale-factor id, 31 K dimension (0 = dense K 64).
def _idesc(m, n):
    atype = 1 << 7
    btype = 1 << 10
    n_field = (n >> 3) << 17
    m_field = (m >> 4) << 24
    return atype | btype | n_field | m_field  # scale type UE4M3 = 0, ids 0, K-major, dense


@pytest.mark.parametrize("n", [16, 48, 80, 128])
def test_idesc_fields(probe, n):
    assert probe(f"idesc 128 {n}") == [_idesc(128, n)]


def test_idesc_literals(probe):
    # M = 128 -> 8 << 24 = 0x08000000; N = 128 -> 16 << 17 = 0x00200000; E2M1 both -> 0x480.
    assert probe("idesc 128 128", "idesc 128 16") == [0x08200480, 0x08040480]


# ---------------------------------------------------------------- shared-memory descriptors (Table 40)
# 0-13 start address >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 46-48 fixed 0b001, 49-51 base offset,
# 52 LBO mode, 61-63 swizzle (0 none, 2 = 128-byte). Encoding of a byte value: (x & 0x3FFFF) >> 4.
def _enc(x):
    return (x & 0x3FFFF) >> 4


def _sdesc(start, lbo, sbo, swizzle):
    return _enc(start) | _enc(lbo) << 16 | _enc(sbo) << 32 | 1 << 46 | swizzle << 61


def test_operand_desc_128b_swizzle(probe):
    # A stage at 0x1400 (1024-aligned, so base offset 0 per Table 41). 8 rows x 128 bytes per swizzle
    # atom -> SBO = 1024; LBO unused for swizzled K-major (encoded as 1 = 16 bytes); K chunk c of a
    # 256-wide stage starts 64 E2M1 values = 32 bytes further.
    assert probe("opdesc 5120 0", "opdesc 5120 3") == [0x4000404000010140, 0x4000404000010146]
    assert probe("opdesc 41984 2") == [_sdesc(41984 + 64, 16, 1024, 2)]


def test_scale_desc_no_swizzle(probe):
    # One 512-byte scale block: 32 rows x 16 bytes, 8-row core matrices 128 bytes apart (SBO = 128),
    # a single 16-byte column (LBO 0), no swizzle.
    assert probe("sfdesc 37888") == [0x0000400800000940]
    assert probe("sfdesc 1056") == [_sdesc(1056, 0, 128, 0)]


def test_descriptor_address_field_wraps_at_18_bits(probe):
    # Only address bits 4..17 are kept (shared memory is below 256 KB).
    assert probe("sfdesc 262160") == [_sdesc(16, 0, 128, 0)]


# ---------------------------------------------------------------- tensor memory
def test_tmem_address(probe):
    assert probe("tmem 0 0", "tmem 32 16", "tmem 96 511") == [0, (32 << 16) | 16, (96 << 16) | 511]


def test_tmem_column_map(probe):
    # Two fp32 accumulators of 128 columns (one per A row) at columns 0 and 128; then per stage
    # (6 stages) 32 columns of scales: 4 blocks of B (the MMA's A side), then 4 of A, 4 columns
    # each (.32x128b = 128 bits per lane). Everything below the 512-column allocation.
    assert probe("acccol 0", "acccol 1") == [0, 128]
    assert probe("sfcol 0 0 0", "sfcol 0 0 1", "sfcol 0 1 0", "sfcol 1 0 0", "sfcol 5 1 3") == [
        256, 260, 272, 288, 256 + 5 * 32 + 16 + 12]
    assert 256 + 5 * 32 + 16 + 12 + 4 <= 512


# ---------------------------------------------------------------- K stages and MMA N
@pytest.mark.parametrize("k, stages, last", [(64, 1, 1), (192, 1, 3), (256, 1, 4), (320, 2, 1), (448, 2, 3),
                                             (512, 2, 4), (1536, 6, 4), (7168, 28, 4), (2112, 9, 1),
                                             (2**31 - 64, 2**23, 3)])
def test_k_stages(probe, k, stages, last):
    # 256 K per stage, 64 per MMA: the last stage holds the remaining 64-wide chunks (1..4).
    assert probe(f"kstages {k}", f"lastchunks {k}") == [stages, last]


@pytest.mark.parametrize("m, m0, n", [(1, 0, 16), (40, 0, 48), (72, 0, 80), (128, 0, 128), (200, 128, 80),
                                      (384, 256, 128), (129, 128, 16)])
def test_mma_n(probe, m, m0, n):
    # Valid A rows of the tile (at most 128) rounded up to 16; a multiple of 8 in 8..256 as M = 128 needs.
    assert probe(f"mman {m} {m0}") == [n]


# ---------------------------------------------------------------- tile table
@pytest.mark.parametrize("m, n, tiles", [(1, 1, 1), (80, 4096, 32), (384, 3072, 72), (129, 129, 4),
                                         (2**31 - 1, 128, 2**24)])
def test_group_tiles(probe, m, n, tiles):
    assert probe(f"tiles {m} {n}") == [tiles]


def test_decode_tile_order(probe):
    # Group 0: m = 256, n = 256 -> 2 A tiles x 2 B tiles; group 1: m = 72, n = 384 -> 1 x 3.
    # A tiles of one B tile are adjacent: t -> (group, first A row, first B row).
    groups = "256 256 72 384"
    got = probe(*[f"decode {t} {groups}" for t in range(7)])
    assert got == [(0, 0, 0), (0, 128, 0), (0, 0, 128), (0, 128, 128), (1, 0, 0), (1, 0, 128), (1, 0, 256)]


def test_decode_largest_m(probe):
    # m = 2^31 - 1 has 2^24 A tiles (the last with 127 rows); tile 2^24 + 5 is B tile 1, A tile 5.
    assert probe(f"decode {2**24 + 5} {2**31 - 1} 256") == [(0, 5 * 128, 128)]
    assert probe(f"mman {2**31 - 1} {(2**24 - 1) * 128}") == [128]


def test_decode_skips_to_later_groups(probe):
    # Groups with one tile each, then a large one: tile 5 is the large group's second A tile.
    assert probe("decode 5 1 1 1 1 1 1 1 1 300 128") == [(4, 128, 0)]
