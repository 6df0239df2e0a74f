// Which part of an unaligned C row segment each of the sm_90a epilogue's eight threads of that row
// stores (the kernels compiled for C rows at any alignment, kernels/sm90/epilogue.cuh). Plain C++, so CPU
// tests reach it (tests/test_row_pieces.py); the kernels call the same function.
//
// A segment holds `end` (1..64) fp16 elements, its first `mis` (0..7) elements past a 16-byte boundary:
// aligned chunk j (16 bytes) holds elements 8 j - mis .. 8 j - mis + 7. Thread q stores chunk
// q + (mis != 0) in one 16-byte store where the chunk lies wholly inside the segment. The at most two
// chunks the segment covers only in part (the first, where the row starts inside one; the last, where
// it ends inside one) go out one element per thread, thread q storing the chunk's element q: one warp
// instruction per partial chunk, whose lanes' bytes of a row fall in one 32-byte sector. Eight
// single-element stores from one thread per partial chunk had cost an unaligned half tile's epilogue
// 3.2 us against 0.9 us aligned.
#pragma once

#if defined(__CUDACC__)
#define FL_ROW_FN __host__ __device__ __forceinline__
#else
#define FL_ROW_FN inline
#endif

namespace fl::sm90 {

// Thread q's part: the first element of its whole 16-byte chunk, and its element of the first and of the
// last partial chunk; -1 where it has none.
struct RowPiece {
  int full, head, tail;
};

FL_ROW_FN RowPiece row_piece(int mis, int end, int q) {
  RowPiece p{-1, -1, -1};
  const int e0 = 8 * (q + (mis != 0)) - mis;
  if (e0 + 8 <= end) p.full = e0;
  if (mis != 0 && q >= mis && q - mis < end) p.head = q - mis;  // the first chunk, partial when mis != 0
  const int last = (end - 1 + mis) / 8;                          // the chunk holding the last element
  const int l0 = 8 * last - mis;                                  // its first element
  if (l0 + 8 > end && (last != 0 || mis == 0) && l0 + q < end) p.tail = l0 + q;
  return p;
}

}  // namespace fl::sm90
