/* fastlaunch launcher ABI: plain C, no Python and no torch types.
 *
 * The buffer holds 8 rows of G int64 each, in this order:
 *   a[G] b[G] c[G] sfa[G] sfb[G] m[G] n[G] k[G]
 * a, b: device pointers to packed NVFP4 [m, k/2] / [n, k/2] (16-byte aligned);
 * c: fp16 [m, n]; sfa, sfb: reordered E4M3 scales (16-byte aligned).
 * m or n may be 0 (an empty group: nothing is launched for it, its pointers are never read and its
 * c is not written); k is a positive multiple of 64.
 * The caller has checked the layouts; the launcher checks the limits that depend on the plan. */
#ifndef FASTLAUNCH_LAUNCHER_H_
#define FASTLAUNCH_LAUNCHER_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum fl_status {
  FL_OK = 0,
  FL_ERR_VALUE = 1,       /* the input is outside a supported limit (raise ValueError) */
  FL_ERR_CUDA = 2,        /* a CUDA call failed (raise RuntimeError) */
  FL_ERR_UNSUPPORTED = 3, /* no kernel for this GPU architecture (raise RuntimeError) */
  FL_ERR_OUT_OF_MEMORY = 4, /* the workspace could not be allocated: out of memory (raise torch.OutOfMemoryError) */
};

/* Why an allocation failed, filled in by the allocator when alloc returns NULL. The launcher sets
 * status to FL_ERR_CUDA, cuda_error to 0 and message to "" before each call. */
typedef struct fl_alloc_failure {
  int status;       /* FL_ERR_OUT_OF_MEMORY, or FL_ERR_CUDA for any other failure */
  int cuda_error;   /* the CUDA error behind it (a cudaError_t) where the allocator knows it, else 0 */
  char* message;    /* the allocator's own text, written to message[0 .. message_len) */
  size_t message_len;
} fl_alloc_failure;

/* Device memory a call needs for intermediate data (the sm_90a path's fp16 copy of A, a few MB
 * for typical shapes). The launcher calls alloc at most once per call, after every check passed,
 * and release right after queueing its kernels: both are stream-ordered on `stream` (the memory may
 * be reused by work queued later on that stream), with the device's primary context current. alloc
 * returns NULL on failure and says why in *failure. */
typedef struct fl_allocator {
  void* (*alloc)(size_t bytes, void* stream, void* ctx, fl_alloc_failure* failure);
  void (*release)(void* ptr, void* stream, void* ctx);
  void* ctx;
} fl_allocator;

/* Launches the grouped GEMM on `device`, on `stream` (a cudaStream_t of that device; 0 is the legacy
 * default stream). `alloc` may be NULL: then cudaMallocAsync / cudaFreeAsync on the stream. Empty
 * groups are left out; a call whose groups are all empty returns FL_OK without calling CUDA. The
 * launch runs in the device's primary context; the context current to the calling thread before
 * the call (possibly none) is current again after it. Returns FL_OK, or an error code with a
 * message written to err[0 .. errlen) that names the caller's group numbers. */
int fl_launch(const int64_t* buf, int num_groups, void* stream, int device, const fl_allocator* alloc, char* err,
              size_t errlen);

/* The masked form (a mixture-of-experts layer, experts stacked): G groups of the same N and K, each with room
 * for max_m rows of A, every operand contiguous:
 *   a   [G, max_m, K/2] packed E2M1          sfa [G, ceil(max_m/128), K/64, 32, 4, 4] reordered E4M3 scales
 *       or, with a_dtype FL_A_FP16 or FL_A_BF16 (weight-only), [G, max_m, K] fp16 or bf16 as it is, and sfa null
 *       (bf16 is rounded to fp16 on the device: exact for |x| in 2^-14 .. 65504, +-inf past 65504)
 *   b   [G, N, K/2] packed E2M1              sfb [G, ceil(N/128), K/64, 32, 4, 4]
 *   out [G, max_m, N] fp16 or bf16           masked_m: int32 [G] in device memory
 *   alpha: fp32 [G] in device memory, or null
 * Group g computes rows 0 .. masked_m[g] - 1 of out[g] (masked_m[g] clamped to 0 .. max_m, read on the device
 * after the work queued before on `stream`), multiplied by alpha[g] where alpha is given (read likewise), rounded
 * to out's dtype (nearest, ties to even), and writes no other row. The host never reads masked_m or alpha, so one
 * call can be captured in a CUDA graph and replayed with new contents. a, b, sfa, sfb, out 16-byte aligned;
 * N a multiple of 8. */
enum { FL_OUT_FP16 = 0, FL_OUT_BF16 = 1 };
enum { FL_A_NVFP4 = 0, FL_A_FP16 = 1, FL_A_BF16 = 2 };
typedef struct fl_masked_args {
  const void* a;
  const void* sfa;
  const void* b;
  const void* sfb;
  const int32_t* masked_m;
  void* out;
  int64_t groups, max_m, n, k;
  const float* alpha; /* or null */
  int32_t out_dtype;  /* FL_OUT_FP16 or FL_OUT_BF16 */
  int32_t a_dtype;    /* FL_A_NVFP4, FL_A_FP16 or FL_A_BF16 */
  /* The contiguous layout (else null): int32 [G] in device memory, expert g's rows are rows offs[g-1] .. offs[g]-1
   * (offs[-1] read as 0; each clamped to 0 .. T, the later no lower than the earlier) of a [T, K] fp16 or bf16
   * (a_dtype FL_A_FP16 or FL_A_BF16, sfa null) or [T, K/2] NVFP4 with sfa [ceil(T/128), K/64, 32, 4, 4], and of
   * out [T, N]; max_m is T, masked_m null; at most 256 experts. Read on the device like
   * masked_m: rows outside every expert's range are not written. */
  const int32_t* offs;
} fl_masked_args;

int fl_launch_masked(const fl_masked_args* args, void* stream, int device, const fl_allocator* alloc, char* err,
                     size_t errlen);

/* Benchmark floor: `iters` calls of fl_launch with the same prepacked buffer from a C loop. Writes
 * the host nanoseconds per call (mean over the loop, no synchronisation inside) to *ns_per_launch. */
int fl_launch_repeat(const int64_t* buf, int num_groups, void* stream, int device, const fl_allocator* alloc,
                     int iters, double* ns_per_launch, char* err, size_t errlen);

/* Sets `device` up as the first call on it does (on sm_100a: the kernel's self-check), launching nothing else.
 * Returns FL_OK with what the set-up found written to note[0 .. notelen) (the sm_100a self-check's outcome; ""
 * where there is nothing to report), or the error that every call on the device returns, written to err. */
int fl_setup_device(int device, char* note, size_t notelen, char* err, size_t errlen);

/* Architectures with a kernel in this build, e.g. "sm_90a". */
const char* fl_supported_archs(void);

#ifdef __cplusplus
}
#endif

#endif /* FASTLAUNCH_LAUNCHER_H_ */
