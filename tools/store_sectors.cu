// What it costs to write 32-byte sectors of global memory in pieces: the unaligned C rows of the sm90
// epilogue write the 16-byte chunks at their ends in parts (kernels/row_pieces.h), and those parts cost
// far more than their bytes (docs/sm90_kernel_notes.md, the diag rows after v70). Each pattern writes
// every byte of a 4 MB buffer exactly once, each warp a 1 KB region (64 chunks of 16 bytes, 32 sectors);
// CUDA events around one kernel, a 512 MB memset (the L2 flush) before each repetition, median of 50:
//   whole      lane l stores chunk l (and 32 + l): one instruction writes 16 whole sectors
//   halves     even chunks in one instruction, odd chunks in the next: each sector in two halves
//   half+2B    even chunks whole; each odd chunk as eight 2-byte stores of one instruction (8 lanes)
//   half+4B    even chunks whole; each odd chunk as four 4-byte stores of one instruction (4 lanes)
//   2 CTAs     even chunks by one CTA, odd chunks (whole) by another
//   2 CTAs 2B  even chunks and the first 3 elements of each odd chunk by one CTA (2-byte stores), the
//              other 5 elements by another CTA: the pattern of an unaligned row's end, where two tiles meet
//
//   nvcc -O2 -std=c++17 -arch=sm_90a -o /tmp/store_sectors tools/store_sectors.cu && /tmp/store_sectors
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_check.h"

namespace {

constexpr int kBytes = 4 << 20;
constexpr int kChunksPerWarp = 64;
constexpr int kThreads = 256;
constexpr int kWarps = kBytes / 16 / kChunksPerWarp;  // 4096
constexpr int kBlocks = kWarps / (kThreads / 32);     // 512

enum Pattern { kWhole, kHalves, kHalf2B, kHalf4B, kTwoCtas, kTwoCtas2B, kPatterns };
const char* kNames[kPatterns] = {"whole", "halves", "half+2B", "half+4B", "2 CTAs", "2 CTAs 2B"};

// Pair patterns use twice the blocks: block b and b + kBlocks write the same region.
__global__ void write(uint4* buf, int pattern) {
  const int lane = threadIdx.x % 32;
  const int pair = blockIdx.x >= kBlocks;
  const int warp = (blockIdx.x % kBlocks) * (kThreads / 32) + threadIdx.x / 32;
  uint4* region = buf + (size_t)warp * kChunksPerWarp;
  const uint4 v = make_uint4(warp, lane, 1u, 2u);
  const uint16_t h = (uint16_t)(warp + lane);
  switch (pattern) {
    case kWhole:
      region[lane] = v;
      region[32 + lane] = v;
      break;
    case kHalves:
      region[2 * lane] = v;
      region[2 * lane + 1] = v;
      break;
    case kHalf2B:
      region[2 * lane] = v;
      for (int i = 0; i < 8; ++i)  // 4 odd chunks per instruction, 8 lanes each
        reinterpret_cast<uint16_t*>(region + 2 * (4 * i + lane / 8) + 1)[lane % 8] = h;
      break;
    case kHalf4B:
      region[2 * lane] = v;
      for (int i = 0; i < 4; ++i)  // 8 odd chunks per instruction, 4 lanes each
        reinterpret_cast<uint32_t*>(region + 2 * (8 * i + lane / 4) + 1)[lane % 4] = h;
      break;
    case kTwoCtas:
      region[2 * lane + pair] = v;
      break;
    case kTwoCtas2B:
      if (!pair) {
        region[2 * lane] = v;
        for (int i = 0; i < 8; ++i)
          if (lane % 8 < 3) reinterpret_cast<uint16_t*>(region + 2 * (4 * i + lane / 8) + 1)[lane % 8] = h;
      } else {
        for (int i = 0; i < 8; ++i)
          if (lane % 8 >= 3) reinterpret_cast<uint16_t*>(region + 2 * (4 * i + lane / 8) + 1)[lane % 8] = h;
      }
      break;
  }
}

}  // namespace

int main() {
  uint4* buf;
  void* flush;
  const size_t flush_bytes = size_t{512} << 20;
  CHECK(cudaMalloc(&buf, kBytes));
  CHECK(cudaMalloc(&flush, flush_bytes));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::printf("| pattern | us, L2 flushed | us, buffer in L2 |\n|---|---|---|\n");
  for (int p = 0; p < kPatterns; ++p) {
    const int blocks = p == kTwoCtas || p == kTwoCtas2B ? 2 * kBlocks : kBlocks;
    double med[2];
    for (int flushed = 1; flushed >= 0; --flushed) {
      std::vector<float> t;
      for (int r = 0; r < 55; ++r) {
        if (flushed) CHECK(cudaMemsetAsync(flush, r, flush_bytes));
        CHECK(cudaEventRecord(a));
        write<<<blocks, kThreads>>>(buf, p);
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        if (r >= 5) t.push_back(ms * 1e3f);
      }
      std::sort(t.begin(), t.end());
      med[flushed] = t[t.size() / 2];
    }
    std::printf("| %s | %.2f | %.2f |\n", kNames[p], med[1], med[0]);
  }
  CHECK(cudaGetLastError());
  return 0;
}
