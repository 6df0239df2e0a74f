"""CPU tests of the E2M1 (NVFP4) -> fp16 decoders of the sm_90a kernels (kernels/common/nvfp4.cuh), through a small
C++ probe built with the host compiler (tests/cpp/nvfp4_probe.cpp).

The expected fp16 bits are composed here from the E2M1 format itself (sign bit, then the magnitudes
0, 0.5, 1, 1.5, 2, 3, 4, 6 of the three value bits), scaled by 2^-14 and packed as IEEE binary16 by
Python's struct ("e"), never by calling the code under test. Each pair J of a 32-bit word holds nibble J
in its low half and nibble J + 4 in its high half.
"""
import random
import struct

import pytest

from conftest import cpp_probe

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def fp16_bits(nibble):
    value = E2M1[nibble & 7] * 2.0 ** -14
    return struct.unpack("<H", struct.pack("<e", -value if nibble & 8 else value))[0]


def expected(j, w):
    return fp16_bits((w >> (4 * j)) & 0xF) | fp16_bits((w >> (4 * j + 16)) & 0xF) << 16


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    ask = cpp_probe(tmp_path_factory, "nvfp4_probe")

    def answers(queries):
        out = ask(queries)
        assert len(out) == len(queries) and "bad query" not in out
        return [int(x) for x in out]

    return answers


def test_fp16_bits_by_hand():
    # the expectation's own anchors: +0.5 * 2^-14 = 2^-15 is the fp16 subnormal 2^9 * 2^-24 (0x0200),
    # +6 * 2^-14 = 1.5 * 2^-12 (biased exponent 3, mantissa 0.5: 0x0E00), +2 * 2^-14 = 2^-13 (0x0800)
    assert fp16_bits(0x1) == 0x0200 and fp16_bits(0x7) == 0x0E00 and fp16_bits(0x8) == 0x8000
    assert fp16_bits(0xF) == 0x8E00 and fp16_bits(0x4) == 0x0800


@pytest.mark.parametrize("op", ["pair", "bytes"])
def test_every_nibble_pair_in_every_position(probe, op):
    # all 256 (nibble J, nibble J + 4) combinations for each J, the other six nibbles random (fresh
    # each run), and words with every other nibble set to its extremes
    rng = random.Random()
    queries, want = [], []
    for j in range(4):
        for lo in range(16):
            for hi in range(16):
                for fill in (rng.getrandbits(32), 0x00000000, 0xFFFFFFFF, 0x88888888, 0x77777777):
                    w = fill & ~((0xF << (4 * j)) | (0xF << (4 * j + 16))) & 0xFFFFFFFF
                    w |= lo << (4 * j) | hi << (4 * j + 16)
                    queries.append(f"{op} {j} {w}")
                    want.append(expected(j, w))
    got = probe(queries)
    bad = [(q, hex(g), hex(e)) for q, g, e in zip(queries, got, want) if g != e]
    assert not bad, bad[:5]
    assert len(got) == 4 * 256 * 5


def test_both_decoders_agree_on_random_words(probe):
    # the GEMM's B (bytes) and the A conversion (shifts) must give the same fragments, or the K
    # permutation that pairs them would pair different values
    rng = random.Random()
    words = [rng.getrandbits(32) for _ in range(2000)]
    for j in range(4):
        a = probe([f"pair {j} {w}" for w in words])
        b = probe([f"bytes {j} {w}" for w in words])
        assert a == b == [expected(j, w) for w in words]


def korder_query(q, c, halves):
    words = [halves[2 * i] | halves[2 * i + 1] << 16 for i in range(32)]
    return f"korder {q} {c} " + " ".join(map(str, words))


def test_fp16_rows_take_the_documented_k_order(probe):
    # an fp16 A row (the weight-only forms) permuted for the GEMM: chunk q = 2s + b, word c holds K 16c + 8b + s in
    # its low half and K 16c + 8b + s + 4 in its high half; random bit patterns, fresh each run
    rng = random.Random()
    for _ in range(20):
        halves = [rng.getrandbits(16) for _ in range(64)]
        cells = [(q, c) for q in range(8) for c in range(4)]
        got = probe([korder_query(q, c, halves) for q, c in cells])
        for (q, c), word in zip(cells, got):
            k = 16 * c + 8 * (q % 2) + q // 2
            assert word == halves[k] | halves[k + 4] << 16, (q, c)


def test_fp16_rows_meet_the_nvfp4_rows_k_order(probe):
    # the same 64 values given as a packed NVFP4 row (nibble t of word i: K 8i + t) and as fp16 in natural order
    # land in the same places: the NVFP4 conversion's chunk q, word c is pair q // 2 of packed word 2c + q % 2
    # (before its scale), so a weight-only row meets the B fragments exactly where an NVFP4 row does
    rng = random.Random()
    for _ in range(20):
        packed = [rng.getrandbits(32) for _ in range(8)]
        halves = [fp16_bits((packed[k // 8] >> (4 * (k % 8))) & 0xF) for k in range(64)]
        cells = [(q, c) for q in range(8) for c in range(4)]
        got = probe([korder_query(q, c, halves) for q, c in cells])
        assert got == [expected(q // 2, packed[2 * c + q % 2]) for q, c in cells]
