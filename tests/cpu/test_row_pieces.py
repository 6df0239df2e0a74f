"""The epilogue's split of an unaligned C row segment among its eight threads (kernels/common/row_pieces.h), through a
small C++ probe built with the host compiler (tests/cpp/row_pieces_probe.cpp): for every misalignment (0..7
elements past a 16-byte boundary) and every segment length (1..64 elements), every element is stored exactly
once, whole-chunk stores are 16-byte aligned and inside the segment, and each partial chunk's elements come one
per thread, thread q taking the chunk's element q (one warp instruction, one sector per row)."""
import pytest

from conftest import cpp_probe


@pytest.fixture(scope="module")
def pieces(tmp_path_factory):
    ask = cpp_probe(tmp_path_factory, "row_pieces_probe")
    cases = [(mis, end, q) for mis in range(8) for end in range(1, 65) for q in range(8)]
    answers = ask([f"{mis} {end} {q}" for mis, end, q in cases])
    assert "bad query" not in answers
    return {c: tuple(int(x) for x in a.split()) for c, a in zip(cases, answers)}


def test_every_element_stored_exactly_once(pieces):
    for mis in range(8):
        for end in range(1, 65):
            stored = []
            for q in range(8):
                full, head, tail = pieces[(mis, end, q)]
                if full >= 0:
                    stored += range(full, full + 8)
                stored += [e for e in (head, tail) if e >= 0]
            assert sorted(stored) == list(range(end)), (mis, end)


def test_whole_chunks_are_aligned_and_inside(pieces):
    for (mis, end, q), (full, _head, _tail) in pieces.items():
        if full >= 0:
            assert (full + mis) % 8 == 0 and 0 <= full and full + 8 <= end, (mis, end, q)


def test_partial_chunks_go_one_element_per_thread(pieces):
    for (mis, end, q), (_full, head, tail) in pieces.items():
        for e in (head, tail):
            if e >= 0:
                assert (e + mis) % 8 == q, (mis, end, q, e)  # element q of its aligned chunk
        if head >= 0 and tail >= 0:
            assert (head + mis) // 8 != (tail + mis) // 8, (mis, end, q)  # two different chunks


@pytest.mark.parametrize("mis, end, expect", [
    (0, 64, [(8 * q, -1, -1) for q in range(8)]),  # aligned: eight whole chunks
    (3, 64, [(5 + 8 * q if q < 7 else -1, q - 3 if q >= 3 else -1, 61 + q if q < 3 else -1) for q in range(8)]),
    (0, 5, [(-1, -1, q if q < 5 else -1) for q in range(8)]),  # a short row's end inside chunk 0
    (6, 2, [(-1, q - 6 if q >= 6 else -1, -1) for q in range(8)]),  # all of it inside the first chunk
])
def test_known_rows(pieces, mis, end, expect):
    assert [pieces[(mis, end, q)] for q in range(8)] == expect
