// fastlaunch._C: the hand-written CPython entry points.
//
//   fast_launch(data) -> list[Tensor]   unpack + check + launch (empty groups left out); returns the caller's C tensors
//   unpack(data) -> int                 the same unpack and checks without device checks or launch
//   pack(data) -> tuple[int, ...]       the int64 buffer unpack() fills, for tests and tools
//   launch_repeat(data, iters) -> float host ns per launcher call, from a C loop (benchmarks)
//   plan(sizes, sm_count[, share, cap, parts, half]) -> tuple   the sm90 plan of a launch: tiles and CTA shares (tests)
//   skinny(sizes, sm_count) -> tuple | None   the skinny kernel's plan of a launch, and whether the launcher takes it
//
// The walk reads the nested tuples/lists with borrowed references and runs no Python code (no
// __index__, no isinstance hooks, no tensor subclass dispatch), so nothing can change the input
// under it. Error text is only built in the cold functions of the "errors" section.

#define PY_SSIZE_T_CLEAN
#include <ATen/PythonTorchFunctionTLS.h>
#include <Python.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/version.h>

#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <vector>

#include "launcher.h"
#include "sm90/plan/group_cuts.h"
#include "sm90/plan/plan_memo.h"
#include "sm90/plan/planner.h"
#include "sm90/plan/row_plan.h"
#include "sm90/plan/row_schedule.h"
#include "sm90/plan/skinny.h"

#define FL_LIKELY(x) __builtin_expect(!!(x), 1)
#define FL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define FL_COLD __attribute__((cold, noinline))

namespace {

// ============================================================================ the buffer
// [a b c sfa sfb m n k] x G, int64. Static for up to kStaticGroups groups; larger G grows a heap
// buffer that is kept. The GIL serialises callers.
constexpr int kFields = 8;
constexpr Py_ssize_t kStaticGroups = 256;
int64_t g_static_buf[kFields * kStaticGroups];
int64_t* g_heap_buf = nullptr;
Py_ssize_t g_heap_groups = 0;

int64_t* buffer_for(Py_ssize_t groups) {
  if (FL_LIKELY(groups <= kStaticGroups)) return g_static_buf;
  if (groups > g_heap_groups) {
    int64_t* grown = static_cast<int64_t*>(PyMem_Realloc(g_heap_buf, sizeof(int64_t) * kFields * groups));
    if (!grown) {
      PyErr_NoMemory();
      return nullptr;
    }
    g_heap_buf = grown;
    g_heap_groups = groups;
  }
  return g_heap_buf;
}

// ============================================================================ errors
// One pattern: "group G: FIELD <what>, expected X, got Y". All cold and out of line.

FL_COLD PyObject* raise(PyObject* type, const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  PyErr_SetString(type, msg);
  return nullptr;
}

FL_COLD const char* dtype_name(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Byte: return "uint8";
    case c10::ScalarType::Char: return "int8";
    case c10::ScalarType::Short: return "int16";
    case c10::ScalarType::Int: return "int32";
    case c10::ScalarType::Long: return "int64";
    case c10::ScalarType::Half: return "float16";
    case c10::ScalarType::BFloat16: return "bfloat16";
    case c10::ScalarType::Float: return "float32";
    case c10::ScalarType::Double: return "float64";
    case c10::ScalarType::Bool: return "bool";
    case c10::ScalarType::Float8_e4m3fn: return "float8_e4m3fn";
    case c10::ScalarType::Float8_e5m2: return "float8_e5m2";
    case c10::ScalarType::Float8_e4m3fnuz: return "float8_e4m3fnuz";
    case c10::ScalarType::Float8_e5m2fnuz: return "float8_e5m2fnuz";
    case c10::ScalarType::Float8_e8m0fnu: return "float8_e8m0fnu";
    case c10::ScalarType::Float4_e2m1fn_x2: return "float4_e2m1fn_x2";
    default: return c10::toString(t);
  }
}

// "(96, 128, 1)"
FL_COLD void format_dims(char* out, size_t len, c10::IntArrayRef dims) {
  size_t used = (size_t)snprintf(out, len, "(");
  for (size_t i = 0; i < dims.size() && used < len; ++i)
    used += (size_t)snprintf(out + used, len - used, i ? ", %lld" : "%lld", (long long)dims[i]);
  if (used < len) snprintf(out + used, len - used, dims.size() == 1 ? ",)" : ")");
}

FL_COLD void format_dims(char* out, size_t len, const int64_t* dims, size_t n) {
  format_dims(out, len, c10::IntArrayRef(dims, n));
}

FL_COLD PyObject* err_sequence(const char* where, const char* what, PyObject* got) {
  return raise(PyExc_TypeError, "%s must be a tuple or list%s, got %s", where, what, Py_TYPE(got)->tp_name);
}

FL_COLD PyObject* err_length(const char* where, const char* what, Py_ssize_t expected, Py_ssize_t got) {
  return raise(PyExc_ValueError, "%s must have %zd items%s, got %zd", where, expected, what, got);
}

FL_COLD PyObject* err_not_tensor(Py_ssize_t g, const char* field, PyObject* got) {
  return raise(PyExc_TypeError, "group %zd: %s must be a torch.Tensor, got %s", g, field, Py_TYPE(got)->tp_name);
}

FL_COLD PyObject* err_dtype(Py_ssize_t g, const char* field, const char* expected, c10::ScalarType got) {
  return raise(PyExc_TypeError, "group %zd: %s must be %s, got %s", g, field, expected, dtype_name(got));
}

FL_COLD PyObject* err_kind(Py_ssize_t g, const char* field, const char* what) {
  return raise(PyExc_ValueError, "group %zd: %s %s", g, field, what);
}

FL_COLD PyObject* err_shape(Py_ssize_t g, const char* field, c10::IntArrayRef got, const int64_t* expected,
                            size_t ndim, const char* n0, int64_t v0, const char* n1, int64_t v1) {
  char e[160], a[160];
  format_dims(e, sizeof(e), expected, ndim);
  format_dims(a, sizeof(a), got);
  return raise(PyExc_ValueError, "group %zd: %s has shape %s, expected %s for %s=%lld, %s=%lld", g, field, a, e, n0,
               (long long)v0, n1, (long long)v1);
}

FL_COLD PyObject* err_strides(Py_ssize_t g, const char* field, c10::IntArrayRef got, const int64_t* expected,
                              size_t ndim, const char* layout) {
  char e[160], a[160];
  format_dims(e, sizeof(e), expected, ndim);
  format_dims(a, sizeof(a), got);
  return raise(PyExc_ValueError, "group %zd: %s has strides %s, expected %s (%s)", g, field, a, e, layout);
}

FL_COLD PyObject* err_size(Py_ssize_t g, const char* name, const char* rule, PyObject* got) {
  if (PyLong_Check(got) && !PyBool_Check(got)) {
    long long v = PyLong_AsLongLong(got);
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return raise(PyExc_ValueError, "group %zd: %s must be %s, got an int that does not fit int64", g, name, rule);
    }
    return raise(PyExc_ValueError, "group %zd: %s must be %s, got %lld", g, name, rule, v);
  }
  return raise(PyExc_TypeError, "group %zd: %s must be an int, got %s", g, name, Py_TYPE(got)->tp_name);
}

FL_COLD PyObject* err_device(Py_ssize_t g, const char* field, const c10::Device& got, const c10::Device& want,
                             Py_ssize_t want_group, const char* want_field) {
  return raise(PyExc_ValueError, "group %zd: %s is on %s, expected %s like group %zd's %s", g, field,
               got.str().c_str(), want.str().c_str(), want_group, want_field);
}

FL_COLD PyObject* err_not_cuda(Py_ssize_t g, const char* field, const c10::Device& got) {
  return raise(PyExc_ValueError, "group %zd: %s must be on a CUDA device, got %s", g, field, got.str().c_str());
}

FL_COLD PyObject* err_align(Py_ssize_t g, const char* field, uintptr_t ptr, int align) {
  return raise(PyExc_ValueError, "group %zd: %s data pointer 0x%llx must be %d-byte aligned", g, field,
               (unsigned long long)ptr, align);
}

// torch.OutOfMemoryError (torch.cuda.OutOfMemoryError), looked up at the first use and kept. Its C
// handle (THPException_OutOfMemoryError, torch/csrc/Exceptions.h) is not exported by libtorch_python.
FL_COLD PyObject* out_of_memory_type() {
  static PyObject* type = nullptr;
  if (!type) {
    PyObject* torch = PyImport_ImportModule("torch");
    PyObject* t = torch ? PyObject_GetAttrString(torch, "OutOfMemoryError") : nullptr;
    Py_XDECREF(torch);
    if (t && PyExceptionClass_Check(t)) type = t;  // kept for the life of the module
    else Py_XDECREF(t);
    PyErr_Clear();
  }
  return type ? type : PyExc_MemoryError;
}

// The launcher's status as a Python exception; the message is set whole (it may carry torch's text).
FL_COLD PyObject* err_launch(int rc, const char* msg) {
  PyObject* type = rc == FL_ERR_VALUE           ? PyExc_ValueError
                   : rc == FL_ERR_OUT_OF_MEMORY ? out_of_memory_type()
                                                : PyExc_RuntimeError;
  PyErr_SetString(type, msg);
  return nullptr;
}

FL_COLD PyObject* err_cpp(const char* what) { return raise(PyExc_RuntimeError, "fastlaunch: %s", what); }

// ============================================================================ input walk

// A tuple or list: its borrowed item array (null when empty) and length. False for anything else.
inline bool as_seq(PyObject* obj, PyObject* const** items, Py_ssize_t* n) {
  if (PyTuple_Check(obj)) {
    *n = PyTuple_GET_SIZE(obj);
    *items = &PyTuple_GET_ITEM(obj, 0);
    return true;
  }
  if (PyList_Check(obj)) {
    *n = PyList_GET_SIZE(obj);
    *items = *n ? &PyList_GET_ITEM(obj, 0) : nullptr;
    return true;
  }
  return false;
}

FL_COLD PyObject* err_group_sequence(Py_ssize_t g, const char* field, const char* what, PyObject* got,
                                     Py_ssize_t expected, Py_ssize_t len) {
  char where[64];
  snprintf(where, sizeof(where), "group %zd: %s", g, field);
  return len < 0 ? err_sequence(where, what, got) : err_length(where, what, expected, len);
}

// Group g's `field`: a tuple or list of exactly `len` (> 0) items, or null with the error set.
inline PyObject* const* group_seq(PyObject* obj, Py_ssize_t g, const char* field, const char* what, Py_ssize_t len) {
  PyObject* const* items;
  Py_ssize_t n;
  if (FL_UNLIKELY(!as_seq(obj, &items, &n))) {
    err_group_sequence(g, field, what, obj, len, -1);
    return nullptr;
  }
  if (FL_UNLIKELY(n != len)) {
    err_group_sequence(g, field, what, obj, len, n);
    return nullptr;
  }
  return items;
}

// Python int (not bool) in [lo, hi] with an optional multiple-of rule; writes it to *out.
inline bool read_size(PyObject* obj, Py_ssize_t g, const char* name, int64_t lo, int64_t hi, int64_t multiple,
                      const char* rule, int64_t* out) {
  if (FL_LIKELY(PyLong_CheckExact(obj)) || (PyLong_Check(obj) && !PyBool_Check(obj))) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (FL_LIKELY(!overflow && v >= lo && v <= hi && v % multiple == 0)) {
      *out = v;
      return true;
    }
  }
  err_size(g, name, rule, obj);
  return false;
}

enum class Want { kFp4, kScale, kHalf };

struct Expect {
  const char* field;
  Want kind;
  const int64_t* shape;
  const int64_t* strides;
  size_t ndim;
  const char* n0;  // the sizes the shape follows from, for messages: "M", m, "K", k
  int64_t v0;
  const char* n1;
  int64_t v1;
  const char* layout;  // for stride errors
  int align;
  bool empty;  // the shape has no elements (M or N is 0)
};

struct DeviceSeen {
  c10::Device device{c10::kCPU};
  const char* field = nullptr;  // the first CUDA tensor seen: group 0's a, for messages
  Py_ssize_t group = 0;
};

// Reads one tensor argument: type, kind, dtype, shape, strides, device, alignment; returns its data
// pointer in *ptr. `check_device`: all on one CUDA device (fast_launch) or anything with data (unpack).
inline bool read_tensor(PyObject* obj, Py_ssize_t g, const Expect& ex, bool check_device, DeviceSeen* seen,
                        int64_t* ptr) {
  if (FL_UNLIKELY(!PyObject_TypeCheck(obj, reinterpret_cast<PyTypeObject*>(THPVariableClass)))) {
    err_not_tensor(g, ex.field, obj);
    return false;
  }
  const at::Tensor& t = THPVariable_Unpack(obj);
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (FL_UNLIKELY(impl->is_python_dispatch())) {
    err_kind(g, ex.field, "is a tensor subclass with __torch_dispatch__, which fast_launch cannot read");
    return false;
  }
  if (FL_UNLIKELY(impl->is_nested() || impl->layout() != c10::kStrided)) {
    err_kind(g, ex.field, "must be a dense strided tensor");
    return false;
  }
  // A view with the neg or conj bit set (torch._neg_view, .conj()) stands for values other than its bytes.
  if (FL_UNLIKELY(impl->is_neg() || impl->is_conj())) {
    err_kind(g, ex.field,
             "is a negated or conjugated view (its neg or conj bit is set), whose values are not its bytes");
    return false;
  }
  const c10::ScalarType st = impl->dtype().toScalarType();
  switch (ex.kind) {
    case Want::kFp4:
      if (FL_UNLIKELY(st != c10::ScalarType::Float4_e2m1fn_x2 && st != c10::ScalarType::Byte)) {
        err_dtype(g, ex.field, "float4_e2m1fn_x2 or uint8", st);
        return false;
      }
      break;
    case Want::kScale:
      if (FL_UNLIKELY(st != c10::ScalarType::Float8_e4m3fn)) {
        err_dtype(g, ex.field, "float8_e4m3fn", st);
        return false;
      }
      break;
    case Want::kHalf:
      if (FL_UNLIKELY(st != c10::ScalarType::Half)) {
        err_dtype(g, ex.field, "float16", st);
        return false;
      }
      break;
  }
  const c10::Device dev = impl->device();
  if (check_device) {
    if (FL_UNLIKELY(dev.type() != c10::kCUDA)) {
      err_not_cuda(g, ex.field, dev);
      return false;
    }
  } else if (FL_UNLIKELY(dev.type() != c10::kCUDA && dev.type() != c10::kCPU)) {
    err_kind(g, ex.field, "must be a CPU or CUDA tensor (a tensor with data)");
    return false;
  }
  const c10::IntArrayRef sizes = impl->sizes();
  if (FL_UNLIKELY(sizes.size() != ex.ndim || std::memcmp(sizes.data(), ex.shape, ex.ndim * sizeof(int64_t)))) {
    err_shape(g, ex.field, sizes, ex.shape, ex.ndim, ex.n0, ex.v0, ex.n1, ex.v1);
    return false;
  }
  if (check_device) {
    if (FL_UNLIKELY(!seen->field)) {
      seen->device = dev;
      seen->field = ex.field;
      seen->group = g;
    } else if (FL_UNLIKELY(dev != seen->device)) {
      err_device(g, ex.field, dev, seen->device, seen->group, seen->field);
      return false;
    }
  }
  // A tensor with no elements is neither read nor written: its strides, storage and data pointer (torch
  // gives such tensors a null or an arbitrary one) do not matter, and the buffer holds 0 for it.
  if (FL_UNLIKELY(ex.empty)) {
    *ptr = 0;
    return true;
  }
  // Strides matter only along dimensions longer than 1. With shape and strides as expected, torch's
  // own invariant (every element lies inside the storage) guarantees the bytes the kernel reads.
  const c10::IntArrayRef strides = impl->strides();
  for (size_t d = 0; d < ex.ndim; ++d) {
    if (FL_UNLIKELY(ex.shape[d] > 1 && strides[d] != ex.strides[d])) {
      err_strides(g, ex.field, strides, ex.strides, ex.ndim, ex.layout);
      return false;
    }
  }
  if (FL_UNLIKELY(!impl->has_storage())) {
    err_kind(g, ex.field, "has no data (a storage-less tensor)");
    return false;
  }
  // A storage without memory: torch's zero tensors (torch._efficientzerotensor), functional wrappers.
  if (FL_UNLIKELY(!impl->unsafe_storage().data())) {
    err_kind(g, ex.field, "has no data (its storage holds no memory)");
    return false;
  }
  // Outputs are written: materialise copy-on-write storage rather than write into a shared one.
  const void* data = ex.kind == Want::kHalf ? impl->mutable_data() : impl->data();
  const uintptr_t p = reinterpret_cast<uintptr_t>(data);
  if (FL_UNLIKELY(p % ex.align)) {
    err_align(g, ex.field, p, ex.align);
    return false;
  }
  *ptr = (int64_t)p;
  return true;
}

struct Unpacked {
  Py_ssize_t groups = 0;
  Py_ssize_t nonempty = 0;  // groups with M and N both > 0
  int64_t* buf = nullptr;
  PyObject* const* abc = nullptr;  // borrowed, for building the result list
  c10::Device device{c10::kCPU};
};

// Walks data = (abc, sf, sf_reordered, sizes) into the buffer. Returns false with an exception set.
bool unpack_into(PyObject* data, bool check_device, Unpacked* out) {
  Py_ssize_t n = 0;
  PyObject* const* top = nullptr;
  if (FL_UNLIKELY(!as_seq(data, &top, &n))) {
    err_sequence("data", " (abc, sf, sf_reordered, sizes)", data);
    return false;
  }
  if (FL_UNLIKELY(n != 4)) {
    err_length("data", " (abc, sf, sf_reordered, sizes)", 4, n);
    return false;
  }
  static const char* const kTop[4] = {"abc", "sf", "sf_reordered", "sizes"};
  PyObject* const* lvl[4];
  Py_ssize_t G = -1;
  for (int i = 0; i < 4; ++i) {
    Py_ssize_t len = 0;
    if (FL_UNLIKELY(!as_seq(top[i], &lvl[i], &len))) {
      err_sequence(kTop[i], " with one item per group", top[i]);
      return false;
    }
    if (i == 0) {
      G = len;
      if (FL_UNLIKELY(G < 1)) {
        raise(PyExc_ValueError, "abc must hold at least one group, got 0");
        return false;
      }
    } else if (FL_UNLIKELY(len != G)) {
      raise(PyExc_ValueError, "%s has %zd groups, expected %zd like abc", kTop[i], len, G);
      return false;
    }
  }
  if (FL_UNLIKELY(G > INT32_MAX)) {
    raise(PyExc_ValueError, "abc has %zd groups, expected at most %d", G, INT32_MAX);
    return false;
  }
  int64_t* buf = buffer_for(G);
  if (!buf) return false;
  DeviceSeen seen;
  for (Py_ssize_t g = 0; g < G; ++g) {
    PyObject* const* sz = group_seq(lvl[3][g], g, "sizes", " (m, n, k, l)", 4);
    if (!sz) return false;
    int64_t m, nn, k, l;
    if (!read_size(sz[0], g, "m", 0, fl::kMaxExtent, 1, "an int in 0..2147483647", &m) ||
        !read_size(sz[1], g, "n", 0, fl::kMaxExtent, 1, "an int in 0..2147483647", &nn) ||
        !read_size(sz[2], g, "k", fl::kKMultiple, fl::kMaxExtent - 63, fl::kKMultiple,
                   "a positive multiple of 64 up to 2147483584", &k) ||
        !read_size(sz[3], g, "l", 1, 1, 1, "1", &l))
      return false;
    PyObject* const* abc = group_seq(lvl[0][g], g, "abc", " (a, b, c)", 3);
    if (!abc) return false;
    // sf[g] (plain scales on the CPU) is not read by the fast path; only its structure is checked.
    if (!group_seq(lvl[1][g], g, "sf", " (sfa, sfb)", 2)) return false;
    PyObject* const* sfr = group_seq(lvl[2][g], g, "sf_reordered", " (sfa, sfb)", 2);
    if (!sfr) return false;

    const int64_t kb = k / 2, kt = k / 64;
    const int64_t mt = fl::ceil_div(m, 128), nt = fl::ceil_div(nn, 128);
    const int64_t a_shape[3] = {m, kb, 1}, a_str[3] = {kb, 1, m * kb};
    const int64_t b_shape[3] = {nn, kb, 1}, b_str[3] = {kb, 1, nn * kb};
    const int64_t c_shape[3] = {m, nn, 1}, c_str[3] = {nn, 1, m * nn};
    const int64_t sa_shape[6] = {32, 4, mt, 4, kt, 1}, sa_str[6] = {16, 4, kt * 512, 1, 512, mt * kt * 512};
    const int64_t sb_shape[6] = {32, 4, nt, 4, kt, 1}, sb_str[6] = {16, 4, kt * 512, 1, 512, nt * kt * 512};
    static const char kRowMajor[] = "row-major, K contiguous";
    static const char kScaleLayout[] = "the permuted view of a contiguous (1, ceil(rows/128), K/64, 32, 4, 4) array";
    // M = 0 or N = 0: an empty group (a mixture-of-experts step that routes no token to an expert).
    // Its tensors without elements are not checked past shape, dtype and device; the launcher leaves
    // the group out, and its c (no elements) is not written.
    const Expect ea{"a", Want::kFp4, a_shape, a_str, 3, "M", m, "K", k, kRowMajor, 16, m == 0};
    const Expect eb{"b", Want::kFp4, b_shape, b_str, 3, "N", nn, "K", k, kRowMajor, 16, nn == 0};
    const Expect ec{"c", Want::kHalf, c_shape, c_str, 3, "M", m, "N", nn, "row-major, N contiguous", 2,
                    m == 0 || nn == 0};
    const Expect esa{"sfa", Want::kScale, sa_shape, sa_str, 6, "M", m, "K", k, kScaleLayout, 16, m == 0};
    const Expect esb{"sfb", Want::kScale, sb_shape, sb_str, 6, "N", nn, "K", k, kScaleLayout, 16, nn == 0};
    int64_t* row = buf + g;
    if (!read_tensor(abc[0], g, ea, check_device, &seen, &row[0 * G]) ||
        !read_tensor(abc[1], g, eb, check_device, &seen, &row[1 * G]) ||
        !read_tensor(abc[2], g, ec, check_device, &seen, &row[2 * G]) ||
        !read_tensor(sfr[0], g, esa, check_device, &seen, &row[3 * G]) ||
        !read_tensor(sfr[1], g, esb, check_device, &seen, &row[4 * G]))
      return false;
    row[5 * G] = m;
    row[6 * G] = nn;
    row[7 * G] = k;
    out->nonempty += m != 0 && nn != 0;
  }
  out->groups = G;
  out->buf = buf;
  out->abc = lvl[0];
  out->device = seen.device;
  return true;
}

// ============================================================================ workspace allocator

FL_COLD void alloc_failed(fl_alloc_failure* failure, int status, int cuda_error, const char* what) {
  failure->status = status;
  failure->cuda_error = cuda_error;
  if (failure->message && failure->message_len) snprintf(failure->message, failure->message_len, "%s", what);
}

// The launcher's workspace (kernels/launcher.h, fl_allocator) comes from torch's caching allocator:
// no cudaMalloc on the hot path, stream-ordered reuse, and CUDA-graph capture works as for any tensor.
// A failure says why: out of memory with torch's own text (raised as torch.OutOfMemoryError), else the
// exception's text and, for a CUDA error, its number.
void* torch_ws_alloc(size_t bytes, void* stream, void*, fl_alloc_failure* failure) noexcept {
  try {
    const auto s = static_cast<cudaStream_t>(stream);
    // The launcher calls with the launch device's context current, so the runtime's device is the
    // launch's. torch allocates on its own notion of the current device (c10::cuda::GetDevice), which
    // differs where torch has deferred a switch to a device without a context (c10::cuda::MaybeSetDevice):
    // then a device guard points torch at the launch's device for the allocation, as for any torch op on
    // it, and its exit restores torch's notion. Where that exit makes torch's device current (it has
    // gained a context meanwhile), the launch's device is made current again for the rest of the launch.
    int runtime_dev = -1;
    c10::DeviceIndex torch_dev = -1;
    if (FL_LIKELY(cudaGetDevice(&runtime_dev) != cudaSuccess || c10::cuda::GetDevice(&torch_dev) != cudaSuccess ||
                  torch_dev == runtime_dev))
      return c10::cuda::CUDACachingAllocator::raw_alloc_with_stream(bytes, s);
    void* ptr = nullptr;
    {
      c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(runtime_dev));
      ptr = c10::cuda::CUDACachingAllocator::raw_alloc_with_stream(bytes, s);
    }
    int now = -1;
    if (cudaGetDevice(&now) == cudaSuccess && now != runtime_dev) cudaSetDevice(runtime_dev);
    return ptr;
  } catch (const c10::OutOfMemoryError& e) {
    alloc_failed(failure, FL_ERR_OUT_OF_MEMORY, 0, e.what_without_backtrace());
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 8)
  } catch (const c10::AcceleratorError& e) {
    alloc_failed(failure, FL_ERR_CUDA, e.get_error_code(), e.what_without_backtrace());
#endif
  } catch (const c10::Error& e) {
    alloc_failed(failure, FL_ERR_CUDA, 0, e.what_without_backtrace());
  } catch (const std::exception& e) {
    alloc_failed(failure, FL_ERR_CUDA, 0, e.what());
  } catch (...) {
    alloc_failed(failure, FL_ERR_CUDA, 0, "an exception that is not a std::exception");
  }
  return nullptr;
}

void torch_ws_release(void* ptr, void*, void*) noexcept {
  try {
    c10::cuda::CUDACachingAllocator::raw_delete(ptr);
  } catch (...) {
  }
}

}  // namespace

// Exported for the other launch paths of benchmarks/bench_launch.py, so that every path allocates alike.
extern "C" const fl_allocator fl_torch_allocator = {torch_ws_alloc, torch_ws_release, nullptr};

namespace {

// ============================================================================ module functions

PyObject* fast_launch(PyObject*, PyObject* data) {
  try {
    Unpacked u;
    if (!unpack_into(data, true, &u)) return nullptr;
    if (FL_LIKELY(u.nonempty)) {  // every group empty: nothing to launch, and no CUDA call at all
      const c10::DeviceIndex dev = u.device.index();
      cudaStream_t stream = c10::cuda::getCurrentCUDAStream(dev).stream();
      char err[1024];
      const int rc = fl_launch(u.buf, (int)u.groups, stream, dev, &fl_torch_allocator, err, sizeof(err));
      if (FL_UNLIKELY(rc != FL_OK)) return err_launch(rc, err);
    }
    PyObject* out = PyList_New(u.groups);
    if (!out) return nullptr;
    for (Py_ssize_t g = 0; g < u.groups; ++g) {
      PyObject* abc = u.abc[g];
      PyObject* c = PyTuple_Check(abc) ? PyTuple_GET_ITEM(abc, 2) : PyList_GET_ITEM(abc, 2);
      Py_INCREF(c);
      PyList_SET_ITEM(out, g, c);
    }
    return out;
  } catch (const std::exception& e) {
    return err_cpp(e.what());
  }
}

PyObject* unpack(PyObject*, PyObject* data) {
  try {
    Unpacked u;
    if (!unpack_into(data, false, &u)) return nullptr;
    return PyLong_FromSsize_t(u.groups);
  } catch (const std::exception& e) {
    return err_cpp(e.what());
  }
}

// A tuple of n Python ints, value(i) the i-th; nullptr with a Python error set.
template <class F>
PyObject* int_tuple(Py_ssize_t n, F value) {
  PyObject* out = PyTuple_New(n);
  for (Py_ssize_t i = 0; out && i < n; ++i) {
    PyObject* v = PyLong_FromLongLong((long long)value(i));
    if (!v) Py_CLEAR(out);
    else PyTuple_SET_ITEM(out, i, v);
  }
  return out;
}

PyObject* pack(PyObject*, PyObject* data) {
  try {
    Unpacked u;
    if (!unpack_into(data, false, &u)) return nullptr;
    return int_tuple(kFields * u.groups, [&](Py_ssize_t i) { return u.buf[i]; });
  } catch (const std::exception& e) {
    return err_cpp(e.what());
  }
}

// launch_repeat(data, iters): the launcher driven from a C loop on the buffer unpacked once.
PyObject* launch_repeat(PyObject*, PyObject* args) {
  PyObject* data;
  int iters;
  if (!PyArg_ParseTuple(args, "Oi:launch_repeat", &data, &iters)) return nullptr;
  try {
    Unpacked u;
    if (!unpack_into(data, true, &u)) return nullptr;
    if (!u.nonempty) return PyFloat_FromDouble(0.0);  // nothing to launch
    const c10::DeviceIndex dev = u.device.index();
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream(dev).stream();
    char err[1024];
    double ns = 0;
    const int rc = fl_launch_repeat(u.buf, (int)u.groups, stream, dev, &fl_torch_allocator, iters, &ns, err,
                                    sizeof(err));
    if (rc != FL_OK) return err_launch(rc, err);
    return PyFloat_FromDouble(ns);
  } catch (const std::exception& e) {
    return err_cpp(e.what());
  }
}

// plan(sizes, sm_count, share=0, cap=0, parts=0, half=0) -> (groups, starts, est_us, rows, reduce, wave): the
// sm90 kernel's plan for sizes = [(m, n, k), ...] on a GPU with sm_count multiprocessors (share: 1 whole
// tiles only, 2 split only, 3 reduced tiles where allowed, 4 a wave plan where allowed; cap: the widest tile, as
// FASTLAUNCH_SM90_WCAP;
// parts: with share 2, CTAs per tile, as FASTLAUNCH_SM90_SHARE=split:S, with share 3 parts per tile, as
// reduce:S; half: 1 half tiles where allowed, 2 never, as FASTLAUNCH_SM90_HALF=1/0).
// groups: per group (width, chunks, tiles_n, rank): `chunks` tiles of `width` A rows along M, `tiles_n`
// of `rows` B rows along N, `rank` the group's place in the tile order (0 first). starts: ((tile, k),
// ...) one per CTA and a last (tiles, 0): CTA b runs the K steps from starts[b] up to starts[b + 1].
// est_us: the estimated time of the busiest CTA (reduced tiles: and of the reduce kernel). rows: 128, or 64
// for half tiles. reduce: reduced tiles' parts per tile (a tile of fewer K steps: one per step; each
// tile's parts are consecutive CTAs), 0 for none. wave: a wave plan (kernels/sm90/plan/planner.h share_wave:
// tile t on CTA t mod len(starts) - 1, a group's tiles along N fastest; starts[b] is then (b, 0), CTA b's first).
// The arguments plan(), cuts() and mma_n() share: (sizes, sm_count, share=0, cap=0, parts=0, half=0, narrow=0,
// mid=0; narrow: 1 the narrow build where allowed, 2 never, as FASTLAUNCH_SM90_NARROW=1/0; mid: the same for
// the mid build, as FASTLAUNCH_SM90_MID=1/0).
struct PlanArgs {
  int64_t m[fl::sm90::kGroupsPerLaunch], n[fl::sm90::kGroupsPerLaunch], k[fl::sm90::kGroupsPerLaunch];
  int groups = 0, sm_count = 0;
  fl::sm90::PlanForce force;
};

bool plan_sizes(PyObject* sizes, const char* name, PlanArgs& a);

// Parses and checks them into `a`; false with a Python error set.
bool plan_args(PyObject* args, const char* format, PlanArgs& a) {
  PyObject* sizes;
  int share = 0, cap = 0, parts = 0, half = 0, narrow = 0, mid = 0;
  const char* name = std::strchr(format, ':') + 1;
  if (!PyArg_ParseTuple(args, format, &sizes, &a.sm_count, &share, &cap, &parts, &half, &narrow, &mid))
    return false;
  if (narrow < 0 || narrow > 2)
    return raise(PyExc_ValueError, "%s: narrow must be 0 (either), 1 (the narrow build) or 2 (never)", name), false;
  if (mid < 0 || mid > 2)
    return raise(PyExc_ValueError, "%s: mid must be 0 (either), 1 (the mid build) or 2 (never)", name), false;
  if (half < 0 || half > 2)
    return raise(PyExc_ValueError, "%s: half must be 0 (either), 1 (half tiles) or 2 (never)", name), false;
  if (share < 0 || share > 4)
    return raise(PyExc_ValueError, "%s: share must be 0 (any), 1 (whole), 2 (split), 3 (reduced) or 4 (wave)", name),
           false;
  if (parts < 0 || parts > 64 || (parts && share != 2 && share != 3))
    return raise(PyExc_ValueError, "%s: parts must be 0, or 1..64 with share 2 (split) or 3 (reduced)", name), false;
  if (cap != 0 && fl::sm90::width_index(cap) < 0)
    return raise(PyExc_ValueError, "%s: cap %d is not a compiled tile width", name, cap), false;
  if (a.sm_count < 1)
    return raise(PyExc_ValueError, "%s: need 1..%d groups and sm_count >= 1", name, fl::sm90::kGroupsPerLaunch), false;
  if (!plan_sizes(sizes, name, a)) return false;
  a.force = fl::sm90::PlanForce{cap, share, parts, half, narrow, mid};
  return true;
}

// The sizes part of plan_args: `sizes` ((m, n, k), ...) of 1..kGroupsPerLaunch valid groups into a.m, a.n, a.k and
// a.groups; false with a Python error set (messages named `name`).
bool plan_sizes(PyObject* sizes, const char* name, PlanArgs& a) {
  Py_ssize_t G = 0;
  PyObject* const* items = nullptr;
  if (!as_seq(sizes, &items, &G)) return err_sequence("sizes", " of (m, n, k)", sizes), false;
  if (G < 1 || G > fl::sm90::kGroupsPerLaunch)
    return raise(PyExc_ValueError, "%s: need 1..%d groups and sm_count >= 1", name, fl::sm90::kGroupsPerLaunch), false;
  int64_t tiles = 0;
  for (Py_ssize_t g = 0; g < G; ++g) {
    long long x, y, z;  // m, n, k
    if (!PyArg_ParseTuple(items[g], "LLL", &x, &y, &z)) return false;
    if (x < 1 || y < 1 || z < fl::kKMultiple || z % fl::kKMultiple || x > fl::kMaxExtent || y > fl::kMaxExtent ||
        z > fl::kMaxExtent)
      return raise(PyExc_ValueError, "%s: group %zd has unsupported sizes", name, g), false;
    a.m[g] = x, a.n[g] = y, a.k[g] = z;
    tiles += fl::sm90::max_tiles(x, y);
    if (tiles > fl::kMaxTilesPerLaunch) return raise(PyExc_ValueError, "%s: group %zd: too many tiles", name, g), false;
  }
  a.groups = (int)G;
  return true;
}

PyObject* plan(PyObject*, PyObject* args) {
  PlanArgs a;
  if (!plan_args(args, "Oi|iiiiii:plan", a)) return nullptr;
  const int G = a.groups;
  fl::sm90::LaunchPlan p;
  fl::sm90::plan_launch(a.m, a.n, a.k, G, a.sm_count, a.force, p);
  int rank[fl::sm90::kGroupsPerLaunch];
  for (Py_ssize_t i = 0; i < G; ++i) rank[p.order[i]] = (int)i;
  PyObject* groups = PyTuple_New(G);
  PyObject* starts = PyTuple_New(p.ctas + 1);
  PyObject* out = groups && starts ? PyTuple_New(6) : nullptr;
  bool ok = out != nullptr;
  for (Py_ssize_t g = 0; ok && g < G; ++g) {
    const fl::sm90::GroupTiles& gt = p.group[g];
    PyObject* item = Py_BuildValue("(iLLi)", gt.width, (long long)gt.chunks, (long long)gt.tiles_n, rank[g]);
    if (!item) ok = false;
    else PyTuple_SET_ITEM(groups, g, item);
  }
  for (int b = 0; ok && b <= p.ctas; ++b) {
    PyObject* item = Py_BuildValue("(ii)", (int)p.start_tile[b], (int)p.start_k[b]);
    if (!item) ok = false;
    else PyTuple_SET_ITEM(starts, b, item);
  }
  PyObject* est = ok ? PyFloat_FromDouble(p.est_ns / 1000.0) : nullptr;
  PyObject* rows = est ? PyLong_FromLong(p.half ? fl::sm90::kHalfBlockN : fl::sm90::kBlockN) : nullptr;
  PyObject* reduce = rows ? PyLong_FromLong(p.reduce) : nullptr;
  PyObject* wave = reduce ? PyBool_FromLong(p.wave) : nullptr;
  if (!wave) {
    Py_XDECREF(reduce);
    Py_XDECREF(rows);
    Py_XDECREF(est);
    Py_XDECREF(groups);
    Py_XDECREF(starts);
    Py_XDECREF(out);
    return nullptr;
  }
  PyTuple_SET_ITEM(out, 0, groups);
  PyTuple_SET_ITEM(out, 1, starts);
  PyTuple_SET_ITEM(out, 2, est);
  PyTuple_SET_ITEM(out, 3, rows);
  PyTuple_SET_ITEM(out, 4, reduce);
  PyTuple_SET_ITEM(out, 5, wave);
  return out;
}

// mma_n(sizes, sm_count, ...) -> (n, ...): each group's wgmma N in plan()'s plan (its tile width, or in
// the narrow and mid builds kernels/sm90/plan/planner.h kNarrowN, kMidN).
PyObject* mma_n(PyObject*, PyObject* args) {
  PlanArgs a;
  if (!plan_args(args, "Oi|iiiiii:mma_n", a)) return nullptr;
  fl::sm90::LaunchPlan p;
  fl::sm90::plan_launch(a.m, a.n, a.k, a.groups, a.sm_count, a.force, p);
  return int_tuple(a.groups, [&](Py_ssize_t g) { return p.group[g].mma_n; });
}

// row_plan(sizes, cap=0) -> (build, ((width, chunks, tiles_n, mma_n), ...)) or None: how the launcher tiles a
// task-form launch it runs on the device schedule (kernels/sm90/plan/row_plan.h), None where such a launch does not
// fit it; build: 0 main, 1 narrow (kBuildMain, kBuildNarrow); cap: a compiled width, as FASTLAUNCH_SM90_WCAP with
// FASTLAUNCH_SM90_ROWS=1, or 0 (the rules').
PyObject* row_plan(PyObject*, PyObject* args) {
  PyObject* sizes;
  int cap = 0;
  if (!PyArg_ParseTuple(args, "O|i:row_plan", &sizes, &cap)) return nullptr;
  if (cap != 0 && fl::sm90::width_index(cap) < 0)
    return raise(PyExc_ValueError, "row_plan: cap %d is not a compiled tile width", cap);
  const Py_ssize_t count = PySequence_Check(sizes) ? PySequence_Size(sizes) : -1;
  if (count > fl::sm90::kGroupsPerLaunch) Py_RETURN_NONE;  // several launches, planned
  PlanArgs a;
  if (!plan_sizes(sizes, "row_plan", a)) return nullptr;
  if (!fl::sm90::row_plan_fits(a.m, a.n, a.k, a.groups)) Py_RETURN_NONE;
  fl::sm90::LaunchPlan p;
  fl::sm90::row_plan(a.m, a.n, a.k, a.groups, p, cap);
  PyObject* groups = PyTuple_New(a.groups);
  if (!groups) return nullptr;
  for (int g = 0; g < a.groups; ++g) {
    const fl::sm90::GroupTiles& gt = p.group[g];
    PyObject* item = Py_BuildValue("(iLLi)", gt.width, (long long)gt.chunks, (long long)gt.tiles_n, gt.mma_n);
    if (!item) {
      Py_DECREF(groups);
      return nullptr;
    }
    PyTuple_SET_ITEM(groups, g, item);
  }
  return Py_BuildValue("(iN)", p.build, groups);
}

// sizes_seen(launches) -> (int, ...): for each launch's sizes ((m, n, k), ...) in turn, its sighting in the launcher's
// table of sizes seen (kernels/sm90/plan/row_plan.h SizesSeen, a fresh one): 0 first, 1 second, 2 later.
PyObject* sizes_seen(PyObject*, PyObject* args) {
  PyObject* launches;
  if (!PyArg_ParseTuple(args, "O:sizes_seen", &launches)) return nullptr;
  Py_ssize_t count = 0;
  PyObject* const* items = nullptr;
  if (!as_seq(launches, &items, &count)) return err_sequence("launches", " of sizes", launches);
  auto table = std::make_unique<fl::sm90::SizesSeen<fl::sm90::kSizesSeenEntries>>();
  std::vector<int64_t> key;
  PyObject* out = PyTuple_New(count);
  if (!out) return nullptr;
  for (Py_ssize_t i = 0; i < count; ++i) {
    PyObject* const* groups = nullptr;
    Py_ssize_t G = 0;
    if (!as_seq(items[i], &groups, &G)) {
      Py_DECREF(out);
      return err_sequence("a launch", " of (m, n, k)", items[i]);
    }
    key.assign((size_t)(3 * G), 0);
    for (Py_ssize_t g = 0; g < G; ++g) {
      long long m, n, k;
      if (!PyArg_ParseTuple(groups[g], "LLL", &m, &n, &k)) {
        Py_DECREF(out);
        return nullptr;
      }
      key[(size_t)g] = m, key[(size_t)(G + g)] = n, key[(size_t)(2 * G + g)] = k;
    }
    PyTuple_SET_ITEM(out, i, PyLong_FromLong(table->sight(key.data(), (int)(3 * G))));
  }
  return out;
}

// cuts(sizes, sm_count, share=0, cap=0, parts=0, half=0, narrow=0, mid=0) -> (head, ...): the rows at
// which the sm90 launcher cuts each group into two (kernels/sm90/plan/group_cuts.h choose_cuts; 0: not cut, and all 0
// where the launch is not cut), with the same settings as plan(). plan() shows a launch uncut; the launcher
// plans the cut groups (each group's head rows, then the rest) where this says so.
PyObject* cuts(PyObject*, PyObject* args) {
  PlanArgs a;
  if (!plan_args(args, "Oi|iiiiii:cuts", a)) return nullptr;
  const int G = a.groups;
  int64_t head[fl::sm90::kGroupsPerLaunch] = {};
  if (G <= fl::sm90::kGroupsSmall) {
    fl::sm90::LaunchPlan p;
    fl::sm90::choose_cuts(a.m, a.n, a.k, G,
                          [&](const int64_t* pm, const int64_t* pn, const int64_t* pk, int groups) {
                            fl::sm90::plan_launch(pm, pn, pk, groups, a.sm_count, a.force, p);
                            return p.est_ns;
                          },
                          head);
  }
  return int_tuple(G, [&](Py_ssize_t g) { return head[g]; });
}

// skinny(sizes, sm_count) -> (rows, items, ctas, smem, est_us, chosen, split, lanes) or None: the skinny kernel's
// plan (kernels/sm90/plan/skinny.h) for a launch of up to kGroupsPerLaunch groups, one skinny launch per run of up
// to kGroupsSmall groups (rows, ctas, smem and split: the largest run's; items and est_us: summed), None
// where it may not take it; chosen: whether the launcher takes it with no experiment setting (its estimate
// against the wgmma plan's); lanes: lanes per B row (the largest run's).
PyObject* skinny(PyObject*, PyObject* args) {
  PlanArgs a;
  if (!plan_args(args, "Oi:skinny", a)) return nullptr;
  fl::sm90::SkinnyPlan runs[fl::sm90::kMaxSkinnyRuns];
  double est = 0;
  const int count = fl::sm90::skinny_runs(a.m, a.n, a.k, a.groups, a.sm_count, runs, &est);
  if (count == 0) Py_RETURN_NONE;
  int rows = 0, ctas = 0, split = 0, lanes = 0;
  long long items = 0, smem = 0;
  for (int r = 0; r < count; ++r) {
    const fl::sm90::SkinnyPlan& sp = runs[r];
    if (fl::sm90::kSkinnyBuilds[sp.build] > rows) rows = fl::sm90::kSkinnyBuilds[sp.build];
    if (sp.ctas > ctas) ctas = sp.ctas;
    if (sp.smem > smem) smem = sp.smem;
    if (sp.split > split) split = sp.split;
    if (sp.lanes > lanes) lanes = sp.lanes;
    items += sp.items;
  }
  fl::sm90::LaunchPlan p;
  fl::sm90::plan_launch(a.m, a.n, a.k, a.groups, a.sm_count, a.force, p);
  const bool chosen = fl::sm90::skinny_wins(est, p.est_ns);
  return Py_BuildValue("(iLiLdOii)", rows, items, ctas, smem, est / 1000.0, chosen ? Py_True : Py_False, split,
                       lanes);
}

// ============================================================================ the masked form

// grouped_mm_masked(a, sfa, b, sfb, masked_m, out[, alpha]) -> out: the serving layout (kernels/launcher.h
// fl_launch_masked); a NVFP4 with its scales sfa, or fp16 or bf16 [G, max_m, K] with sfa None (weight-only); out fp16
// or bf16, alpha None or fp32 [G] on the device.
// Messages as fastlaunch/ops.py's fake implementation words them: "<field> has shape (..), expected (..) for G=..".
enum class Kind { kFp4, kScale, kOut, kInt32, kFloat, kAct };  // the dtypes below, in this order (kAct: weight-only a)

struct MaskedExpect {
  const char* field;
  Kind kind;
  int64_t shape[6];
  size_t ndim;
  const char* names;  // "G=3, max_m=200, K=256"
  int align;
};

// fl_masked_args.a_dtype of a checked a: NVFP4 bytes, or the weight-only forms' fp16 or bf16.
int32_t a_dtype_of(c10::ScalarType st) {
  return st == c10::ScalarType::Half ? FL_A_FP16 : st == c10::ScalarType::BFloat16 ? FL_A_BF16 : FL_A_NVFP4;
}

FL_COLD PyObject* err_masked_dtype(const char* field, const char* expected, c10::ScalarType got) {
  return raise(PyExc_TypeError, "%s must be %s, got %s", field, expected, dtype_name(got));
}

// One tensor's layout: a dense tensor of the dtype and shape, contiguous (strides along dimensions longer than 1).
bool check_masked_layout(PyObject* obj, const MaskedExpect& ex) {
  if (FL_UNLIKELY(!PyObject_TypeCheck(obj, reinterpret_cast<PyTypeObject*>(THPVariableClass)))) {
    raise(PyExc_TypeError, "%s must be a torch.Tensor, got %s", ex.field, Py_TYPE(obj)->tp_name);
    return false;
  }
  c10::TensorImpl* impl = THPVariable_Unpack(obj).unsafeGetTensorImpl();
  if (FL_UNLIKELY(impl->is_python_dispatch() || impl->is_nested() || impl->layout() != c10::kStrided)) {
    raise(PyExc_ValueError, "%s must be a dense strided tensor without __torch_dispatch__", ex.field);
    return false;
  }
  if (FL_UNLIKELY(impl->is_neg() || impl->is_conj())) {
    raise(PyExc_ValueError, "%s is a negated or conjugated view (its neg or conj bit is set), whose values are not "
          "its bytes", ex.field);
    return false;
  }
  const c10::ScalarType st = impl->dtype().toScalarType();
  const bool dtype_ok = ex.kind == Kind::kFp4 ? st == c10::ScalarType::Float4_e2m1fn_x2 || st == c10::ScalarType::Byte
                        : ex.kind == Kind::kScale ? st == c10::ScalarType::Float8_e4m3fn
                        : ex.kind == Kind::kInt32 ? st == c10::ScalarType::Int
                        : ex.kind == Kind::kFloat ? st == c10::ScalarType::Float
                                                  : st == c10::ScalarType::Half || st == c10::ScalarType::BFloat16;
  if (FL_UNLIKELY(!dtype_ok)) {
    static const char* const kNames[] = {"float4_e2m1fn_x2 or uint8", "float8_e4m3fn", "float16 or bfloat16", "int32",
                                         "float32", "float16 or bfloat16"};
    err_masked_dtype(ex.field, kNames[(int)ex.kind], st);
    return false;
  }
  const c10::IntArrayRef sizes = impl->sizes();
  if (FL_UNLIKELY(sizes.size() != ex.ndim || std::memcmp(sizes.data(), ex.shape, ex.ndim * sizeof(int64_t)))) {
    char e[160], a[160];
    format_dims(e, sizeof(e), ex.shape, ex.ndim);
    format_dims(a, sizeof(a), sizes);
    raise(PyExc_ValueError, "%s has shape %s, expected %s for %s", ex.field, a, e, ex.names);
    return false;
  }
  int64_t strides[6], step = 1;
  for (size_t d = ex.ndim; d-- > 0;) strides[d] = step, step *= ex.shape[d];
  const c10::IntArrayRef got = impl->strides();
  for (size_t d = 0; d < ex.ndim; ++d) {
    if (FL_UNLIKELY(ex.shape[d] > 1 && got[d] != strides[d])) {
      char e[160], a[160];
      format_dims(e, sizeof(e), strides, ex.ndim);
      format_dims(a, sizeof(a), got);
      raise(PyExc_ValueError, "%s has strides %s, expected %s (contiguous)", ex.field, a, e);
      return false;
    }
  }
  return true;
}

// Its place, once every layout passed: on the CUDA device of `a` (the first), with data, aligned; its data pointer
// into *ptr.
bool read_masked_data(PyObject* obj, const MaskedExpect& ex, c10::Device* device, int64_t* ptr) {
  c10::TensorImpl* impl = THPVariable_Unpack(obj).unsafeGetTensorImpl();
  const c10::Device dev = impl->device();
  if (FL_UNLIKELY(dev.type() != c10::kCUDA)) {
    raise(PyExc_ValueError, "%s must be on a CUDA device, got %s", ex.field, dev.str().c_str());
    return false;
  }
  if (ex.field[0] == 'a' && ex.field[1] == 0) {  // a, the first: its device is the call's
    *device = dev;
  } else if (FL_UNLIKELY(dev != *device)) {
    raise(PyExc_ValueError, "%s is on %s, expected %s like a", ex.field, dev.str().c_str(), device->str().c_str());
    return false;
  }
  if (FL_UNLIKELY(!impl->has_storage() || !impl->unsafe_storage().data())) {
    raise(PyExc_ValueError, "%s has no data (a storage-less tensor, or one whose storage holds no memory)", ex.field);
    return false;
  }
  const void* data = ex.kind == Kind::kOut ? impl->mutable_data() : impl->data();
  if (FL_UNLIKELY(reinterpret_cast<uintptr_t>(data) % ex.align)) {
    raise(PyExc_ValueError, "%s data pointer 0x%llx must be %d-byte aligned", ex.field,
          (unsigned long long)reinterpret_cast<uintptr_t>(data), ex.align);
    return false;
  }
  *ptr = (int64_t)reinterpret_cast<uintptr_t>(data);
  return true;
}

// The dims of a tensor argument for messages before its full check, or null with an error set.
FL_COLD PyObject* err_masked_dims(const char* field, PyObject* obj, const char* expected) {
  if (!PyObject_TypeCheck(obj, reinterpret_cast<PyTypeObject*>(THPVariableClass)))
    return raise(PyExc_TypeError, "%s must be a torch.Tensor, got %s", field, Py_TYPE(obj)->tp_name);
  char a[160];
  format_dims(a, sizeof(a), THPVariable_Unpack(obj).sizes());
  return raise(PyExc_ValueError, "%s has shape %s, expected %s", field, a, expected);
}

// obj's sizes into d[0 .. nd) if it is a tensor of nd dimensions (else false).
bool tensor_dims(PyObject* obj, size_t nd, int64_t* d) {
  if (!PyObject_TypeCheck(obj, reinterpret_cast<PyTypeObject*>(THPVariableClass))) return false;
  const c10::IntArrayRef s = THPVariable_Unpack(obj).sizes();
  if (s.size() != nd) return false;
  for (size_t i = 0; i < nd; ++i) d[i] = s[i];
  return true;
}

// The masked and contiguous calls' tensors args[0 .. count) but args[skip] (None): every layout first, then (device
// not null) every place (device, data, alignment), their data pointers into ptr[i]. False with the error set.
bool check_masked_tensors(PyObject* const* args, const MaskedExpect* ex, int count, int skip, c10::Device* device,
                          int64_t* ptr) {
  for (int i = 0; i < count; ++i)
    if (i != skip && !check_masked_layout(args[i], ex[i])) return false;
  for (int i = 0; device && i < count; ++i)
    if (i != skip && !read_masked_data(args[i], ex[i], device, &ptr[i])) return false;
  return true;
}

// The masked and contiguous calls' launch: returns `out` (a new reference), or null with the launcher's error set.
PyObject* launch_masked(const fl_masked_args& margs, cudaStream_t stream, c10::DeviceIndex dev, PyObject* out) {
  char err[1024];
  const int rc = fl_launch_masked(&margs, stream, dev, &fl_torch_allocator, err, sizeof(err));
  if (FL_UNLIKELY(rc != FL_OK)) return err_launch(rc, err);
  Py_INCREF(out);
  return out;
}

// a's form from its dtype, with sfa (args[1]) agreeing: fp16 or bf16 (weight-only, sfa None: *plain) or NVFP4 bytes
// (with sfa); *a_dtype its fl_masked_args.a_dtype. False with the error set.
bool a_form(PyObject* const* args, bool* plain, int32_t* a_dtype) {
  if (FL_UNLIKELY(!PyObject_TypeCheck(args[0], reinterpret_cast<PyTypeObject*>(THPVariableClass)))) {
    raise(PyExc_TypeError, "a must be a torch.Tensor, got %s", Py_TYPE(args[0])->tp_name);
    return false;
  }
  const c10::ScalarType a_type = THPVariable_Unpack(args[0]).scalar_type();
  *plain = a_type == c10::ScalarType::Half || a_type == c10::ScalarType::BFloat16;
  if (FL_UNLIKELY(!*plain && a_type != c10::ScalarType::Float4_e2m1fn_x2 && a_type != c10::ScalarType::Byte)) {
    err_masked_dtype("a", "float4_e2m1fn_x2 or uint8 (NVFP4, with sfa) or float16 or bfloat16 (weight-only, sfa None)",
                     a_type);
    return false;
  }
  *a_dtype = a_dtype_of(a_type);
  if (FL_UNLIKELY(*plain != (args[1] == Py_None))) {
    if (*plain)
      raise(PyExc_TypeError, "sfa must be None where a is float16 or bfloat16 (weight-only: a's values are used as they "
            "are)");
    else
      raise(PyExc_TypeError, "sfa must be a torch.Tensor of a's scales where a is NVFP4, got None");
    return false;
  }
  return true;
}

PyObject* grouped_mm_masked(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (FL_UNLIKELY(nargs != 6 && nargs != 7))
    return raise(PyExc_TypeError, "grouped_mm_masked(a, sfa, b, sfb, masked_m, out, alpha=None) takes 6 or 7 "
                 "arguments, got %zd", nargs);
  const bool scaled = nargs == 7 && args[6] != Py_None;  // alpha given
  try {
    // a's dtype picks the form: fp16 or bf16 (weight-only: [G, max_m, K], sfa None) or NVFP4 bytes ([G, max_m, K//2])
    bool a_fp16 = false;
    int32_t a_dtype = FL_A_NVFP4;
    if (!a_form(args, &a_fp16, &a_dtype)) return nullptr;
    // G, max_m, K from a; N from b: both must be 3-D tensors first.
    int64_t ad[3], bd[3];
    const char* const a_dims = a_fp16 ? "(G, max_m, K)" : "(G, max_m, K//2)";
    if (FL_UNLIKELY(!tensor_dims(args[0], 3, ad))) return err_masked_dims("a", args[0], a_dims);
    if (FL_UNLIKELY(!tensor_dims(args[2], 3, bd))) return err_masked_dims("b", args[2], "(G, N, K//2)");
    const int64_t G = ad[0], max_m = ad[1], k = a_fp16 ? ad[2] : 2 * ad[2], kb = k / 2, n = bd[1];
    if (FL_UNLIKELY(G < 1 || max_m < 1 || k < 64 || k % 64 || k > fl::kMaxExtent || max_m > fl::kMaxExtent))
      return err_masked_dims("a", args[0], a_fp16 ? "(G, max_m, K) with G >= 1, max_m >= 1 and K a positive multiple "
                             "of 64 up to 2147483584" : "(G, max_m, K//2) with G >= 1, max_m >= 1 and K a positive "
                             "multiple of 64 up to 2147483584");
    if (FL_UNLIKELY(n < 1 || n > fl::kMaxExtent || n % 8))
      return err_masked_dims("b", args[2], "(G, N, K//2) with N in 1..2147483647 a multiple of 8 (out's rows are "
                             "stored in 16-byte chunks)");
    char gmk[96], gnk[96], gm[64], gmn[96];
    snprintf(gmk, sizeof(gmk), "G=%lld, max_m=%lld, K=%lld", (long long)G, (long long)max_m, (long long)k);
    snprintf(gnk, sizeof(gnk), "G=%lld, N=%lld, K=%lld", (long long)G, (long long)n, (long long)k);
    snprintf(gm, sizeof(gm), "G=%lld", (long long)G);
    snprintf(gmn, sizeof(gmn), "G=%lld, max_m=%lld, N=%lld", (long long)G, (long long)max_m, (long long)n);
    const int64_t kt = k / 64;
    const MaskedExpect ex[7] = {
        a_fp16 ? MaskedExpect{"a", Kind::kAct, {G, max_m, k}, 3, gmk, 16}
               : MaskedExpect{"a", Kind::kFp4, {G, max_m, kb}, 3, gmk, 16},
        {"sfa", Kind::kScale, {G, fl::ceil_div(max_m, 128), kt, 32, 4, 4}, 6, gmk, 16},
        {"b", Kind::kFp4, {G, n, kb}, 3, gnk, 16},
        {"sfb", Kind::kScale, {G, fl::ceil_div(n, 128), kt, 32, 4, 4}, 6, gnk, 16},
        {"masked_m", Kind::kInt32, {G}, 1, gm, 4},
        {"out", Kind::kOut, {G, max_m, n}, 3, gmn, 16},
        {"alpha", Kind::kFloat, {G}, 1, gm, 4},
    };
    const int count = scaled ? 7 : 6;
    int64_t ptr[7] = {};
    c10::Device device{c10::kCPU};
    if (!check_masked_tensors(args, ex, count, a_fp16 ? 1 : -1, &device, ptr)) return nullptr;  // (weight-only: no sfa)
    const bool bf16 = THPVariable_Unpack(args[5]).scalar_type() == c10::ScalarType::BFloat16;
    const c10::DeviceIndex dev = device.index();
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream(dev).stream();
    const fl_masked_args margs{reinterpret_cast<const void*>(ptr[0]), reinterpret_cast<const void*>(ptr[1]),
                               reinterpret_cast<const void*>(ptr[2]), reinterpret_cast<const void*>(ptr[3]),
                               reinterpret_cast<const int32_t*>(ptr[4]), reinterpret_cast<void*>(ptr[5]),
                               G, max_m, n, k, reinterpret_cast<const float*>(ptr[6]),
                               bf16 ? FL_OUT_BF16 : FL_OUT_FP16, a_dtype, nullptr};
    return launch_masked(margs, stream, dev, args[5]);
  } catch (const std::exception& e) {
    return err_cpp(e.what());
  }
}

// setup_device(device) -> str: the device set up as its first call does (on sm_100a: the kernel's self-check); what
// the set-up found, or the error every call on the device raises.
PyObject* setup_device(PyObject*, PyObject* arg) {
  const long device = PyLong_AsLong(arg);
  if (device == -1 && PyErr_Occurred()) return nullptr;
  if (device < 0 || device > 1 << 20) return raise(PyExc_ValueError, "setup_device: no device %ld", device);
  char note[512] = "", err[1024] = "";
  const int rc = fl_setup_device((int)device, note, sizeof(note), err, sizeof(err));
  if (rc != FL_OK) return err_launch(rc, err);
  return PyUnicode_FromString(note);
}

// plan_m(m) -> int: the representative of m's planning class (kernels/sm90/plan/plan_class.h): launches whose
// groups' M's share classes (and N, K) get the same plan, which the launcher's memo keys on.
PyObject* plan_m(PyObject*, PyObject* arg) {
  const long long m = PyLong_AsLongLong(arg);
  if (m == -1 && PyErr_Occurred()) return nullptr;
  if (m < 0 || m > fl::kMaxExtent) return raise(PyExc_ValueError, "plan_m: m must be in 0..2147483647, got %lld", m);
  return PyLong_FromLongLong((long long)fl::sm90::plan_m(m));
}

// A launcher memo timed on this CPU over `reps` passes through `launches` ([[(m, n, k), ...], ...], each valid, at
// most 256 groups), one fresh memo: (ns per launch, misses). get(memo, launch) looks one launch up and returns a
// number read from the result (so the lookups are not optimised away).
template <class Memo, class Get>
PyObject* memo_ns(PyObject* args, const char* name, Get get) {
  PyObject* launches;
  int sm_count = 0, reps = 0;
  if (!PyArg_ParseTuple(args, "Oii", &launches, &sm_count, &reps)) return nullptr;
  PyObject* const* items = nullptr;
  Py_ssize_t count = 0;
  if (!as_seq(launches, &items, &count) || count < 1 || reps < 1 || sm_count < 1)
    return raise(PyExc_ValueError, "%s: need a non-empty list of launches, sm_count >= 1 and reps >= 1", name);
  try {
    std::vector<PlanArgs> all((size_t)count);
    for (Py_ssize_t i = 0; i < count; ++i) {
      PyObject* one = Py_BuildValue("(Oi)", items[i], sm_count);
      if (!one) return nullptr;
      const bool ok = plan_args(one, "Oi|iiiiii:memo_ns", all[(size_t)i]);
      Py_DECREF(one);
      if (!ok) return nullptr;
    }
    auto memo = std::make_unique<Memo>();
    int64_t read = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r)
      for (const PlanArgs& a : all) read += get(*memo, a);
    const auto t1 = std::chrono::steady_clock::now();
    const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / ((double)reps * (double)count);
    return Py_BuildValue("(dL)", read > 0 ? ns : -1.0, (long long)memo->misses());
  } catch (const std::exception& e) {
    return err_cpp(e.what());
  }
}

// plan_memo_ns(launches, sm_count, reps) -> (ns per launch, misses): the launcher's way to its plans (a memo of
// 32, kernels/sm90/plan/plan_memo.h); misses: the launches it planned.
PyObject* plan_memo_ns(PyObject*, PyObject* args) {
  return memo_ns<fl::sm90::PlanMemo<fl::sm90::kPlanMemoEntries>>(args, "plan_memo_ns", [](auto& memo, const PlanArgs& a) {
    return (int64_t)memo.get(a.m, a.n, a.k, a.groups, a.sm_count, a.force).ctas;
  });
}

// skinny_memo_ns(launches, sm_count, reps) -> (ns per launch, misses): the launcher's way to its skinny runs (a memo
// of 8, kernels/sm90/plan/plan_memo.h, the planner's own split and lanes); misses: the launches it estimated.
PyObject* skinny_memo_ns(PyObject*, PyObject* args) {
  return memo_ns<fl::sm90::SkinnyMemo<fl::sm90::kSkinnyMemoEntries>>(args, "skinny_memo_ns",
                                                                   [](auto& memo, const PlanArgs& a) {
    return (int64_t)memo.get(a.m, a.n, a.k, a.groups, a.sm_count, 0, 0).count + 1;
  });
}

// row_schedule(tiles, kst, grid, wave_ok, force=0, a16_bytes=0) -> (ctas, wave, shares): the masked form's schedule
// as its kernels make it on the device (kernels/sm90/plan/row_schedule.h), every CTA's part (RowCta) as a tuple.
PyObject* row_schedule(PyObject*, PyObject* args) {
  long long tiles = 0, a16_bytes = 0;
  int kst = 0, grid = 0, wave_ok = 0, force = 0;
  if (!PyArg_ParseTuple(args, "Liip|iL", &tiles, &kst, &grid, &wave_ok, &force, &a16_bytes)) return nullptr;
  if (tiles < 0 || tiles > (1LL << 31) - 1 || kst < 0 || grid < 0 || grid > 4096 || a16_bytes < 0)
    return raise(PyExc_ValueError, "row_schedule: tiles in 0..2^31-1, kst >= 0, grid in 0..4096, a16_bytes >= 0, got "
                 "%lld, %d, %d, %lld", tiles, kst, grid, a16_bytes);
  if (force != 0 && force != fl::sm90::kRowWhole && force != fl::sm90::kRowSplit && force != fl::sm90::kRowWave)
    return raise(PyExc_ValueError, "row_schedule: force must be 0, 1 (whole), 2 (split) or 4 (wave), got %d", force);
  const fl::sm90::RowSchedule s = fl::sm90::row_schedule(tiles, kst, grid, wave_ok != 0, force, a16_bytes);
  PyObject* shares = PyTuple_New(grid);
  if (!shares) return nullptr;
  for (int b = 0; b < grid; ++b) {
    const fl::sm90::RowCta c = fl::sm90::row_cta(s, b);
    PyObject* t = Py_BuildValue("(iiiiii)", c.share.first_t, c.share.first_k, c.share.count, c.share.end_k, c.stride,
                                c.before);
    if (!t) {
      Py_DECREF(shares);
      return nullptr;
    }
    PyTuple_SET_ITEM(shares, b, t);
  }
  return Py_BuildValue("(iiN)", s.ctas, s.wave, shares);
}

// grouped_mm_contiguous(a, sfa, b, sfb, offs, out[, alpha]) -> out: the contiguous layout (kernels/launcher.h
// fl_masked_args.offs): a fp16 or bf16 [T, K] with sfa None (weight-only), or NVFP4 [T, K//2] with its scales sfa
// [ceil(T/128), K//64, 32, 4, 4]; offs int32 [G] on the device, out [T, N] fp16 or bf16.
PyObject* grouped_mm_contiguous(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (FL_UNLIKELY(nargs != 6 && nargs != 7))
    return raise(PyExc_TypeError, "grouped_mm_contiguous(a, sfa, b, sfb, offs, out, alpha=None) takes 6 or 7 "
                 "arguments, got %zd", nargs);
  const bool scaled = nargs == 7 && args[6] != Py_None;
  try {
    bool plain = false;  // a fp16 or bf16 (weight-only), else NVFP4 with sfa
    int32_t a_dtype = FL_A_NVFP4;
    if (!a_form(args, &plain, &a_dtype)) return nullptr;
    int64_t ad[2], bd[3];
    const char* const a_dims = plain ? "(T, K)" : "(T, K//2)";
    if (FL_UNLIKELY(!tensor_dims(args[0], 2, ad))) return err_masked_dims("a", args[0], a_dims);
    if (FL_UNLIKELY(!tensor_dims(args[2], 3, bd))) return err_masked_dims("b", args[2], "(G, N, K//2)");
    const int64_t T = ad[0], k = plain ? ad[1] : 2 * ad[1], kb = k / 2, G = bd[0], n = bd[1];
    if (FL_UNLIKELY(T < 0 || k < 64 || k % 64 || k > fl::kMaxExtent || T > fl::kMaxExtent))
      return err_masked_dims("a", args[0], plain ? "(T, K) with K a positive multiple of 64 up to 2147483584"
                                                 : "(T, K//2) with K a positive multiple of 64 up to 2147483584");
    if (FL_UNLIKELY(G < 1 || G > 256))
      return err_masked_dims("b", args[2], "(G, N, K//2) with G in 1..256");
    if (FL_UNLIKELY(n < 1 || n > fl::kMaxExtent || n % 8))
      return err_masked_dims("b", args[2], "(G, N, K//2) with N in 1..2147483647 a multiple of 8 (out's rows are "
                             "stored in 16-byte chunks)");
    char tk[96], gnk[96], gm[64], tn[96];
    snprintf(tk, sizeof(tk), "T=%lld, K=%lld", (long long)T, (long long)k);
    snprintf(gnk, sizeof(gnk), "G=%lld, N=%lld, K=%lld", (long long)G, (long long)n, (long long)k);
    snprintf(gm, sizeof(gm), "G=%lld", (long long)G);
    snprintf(tn, sizeof(tn), "T=%lld, N=%lld", (long long)T, (long long)n);
    const int64_t kt = k / 64;
    const MaskedExpect ex[7] = {
        plain ? MaskedExpect{"a", Kind::kAct, {T, k}, 2, tk, 16} : MaskedExpect{"a", Kind::kFp4, {T, kb}, 2, tk, 16},
        {"sfa", Kind::kScale, {fl::ceil_div(T, 128), kt, 32, 4, 4}, 5, tk, 16},  // (None where plain: not checked)
        {"b", Kind::kFp4, {G, n, kb}, 3, gnk, 16},
        {"sfb", Kind::kScale, {G, fl::ceil_div(n, 128), kt, 32, 4, 4}, 6, gnk, 16},
        {"offs", Kind::kInt32, {G}, 1, gm, 4},
        {"out", Kind::kOut, {T, n}, 2, tn, 16},
        {"alpha", Kind::kFloat, {G}, 1, gm, 4},
    };
    const int count = scaled ? 7 : 6;
    int64_t ptr[7] = {};
    c10::Device device{c10::kCPU};
    // (no row: the layouts checked, nothing to compute, no CUDA call)
    if (!check_masked_tensors(args, ex, count, plain ? 1 : -1, T > 0 ? &device : nullptr, ptr)) return nullptr;
    if (T == 0) {
      Py_INCREF(args[5]);
      return args[5];
    }
    const bool bf16 = THPVariable_Unpack(args[5]).scalar_type() == c10::ScalarType::BFloat16;
    const c10::DeviceIndex dev = device.index();
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream(dev).stream();
    const fl_masked_args margs{reinterpret_cast<const void*>(ptr[0]), reinterpret_cast<const void*>(ptr[1]),
                               reinterpret_cast<const void*>(ptr[2]), reinterpret_cast<const void*>(ptr[3]),
                               nullptr, reinterpret_cast<void*>(ptr[5]), G, T, n, k,
                               reinterpret_cast<const float*>(ptr[6]), bf16 ? FL_OUT_BF16 : FL_OUT_FP16, a_dtype,
                               reinterpret_cast<const int32_t*>(ptr[4])};
    return launch_masked(margs, stream, dev, args[5]);
  } catch (const std::exception& e) {
    return err_cpp(e.what());
  }
}

// No torch dispatch or function mode is active (fake tensors, functionalisation, ...).
bool no_torch_mode() {
  return c10::impl::TorchDispatchModeTLS::stack_len() == 0 && !at::impl::torch_function_mode_enabled();
}

// An exact torch.Tensor on a CUDA device that needs no gradient.
bool plain_cuda(PyObject* o) {
  if (reinterpret_cast<PyObject*>(Py_TYPE(o)) != THPVariableClass) return false;
  const at::Tensor& t = THPVariable_Unpack(o);
  return t.is_cuda() && !t.requires_grad();
}

// The wrappers' eager path (fastlaunch/ops.py _wrapper_call): whether a call of (a, sfa, b, sfb, sizes, out, alpha)
// may skip the torch op: no torch mode active, every tensor a plain CUDA one (sfa and alpha may be None), the sizes
// int32 (the op converts int64 ones). Anything else takes the op, whose checks word the errors.
bool eager_args(PyObject* const* args) {
  if (!no_torch_mode()) return false;
  for (int i = 0; i < 7; ++i)
    if (!(args[i] == Py_None && (i == 1 || i == 6)) && !plain_cuda(args[i])) return false;
  return THPVariable_Unpack(args[4]).scalar_type() == c10::ScalarType::Int;
}

template <PyObject* (*CALL)(PyObject*, PyObject* const*, Py_ssize_t)>
PyObject* eager_entry(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (FL_UNLIKELY(nargs != 7))
    return raise(PyExc_TypeError, "takes 7 arguments (a, sfa, b, sfb, sizes, out, alpha), got %zd", nargs);
  if (!eager_args(args)) Py_RETURN_NOTIMPLEMENTED;
  return CALL(self, args, nargs);
}

// grouped_gemm_eager(a, sfa, b, sfb, c) -> list or NotImplemented: the task layout's wrapper
// (fastlaunch.grouped_gemm) eagerly: where no torch mode is active and the five lists (or tuples) are G >= 1
// plain CUDA tensors each, a[g] at least 1-D and b[g] at least 2-D, fast_launch on (abc, sf, sf_reordered, sizes)
// built from them (M = a[g]'s rows, N = b[g]'s rows, K = twice b[g]'s row bytes), which checks the rest and
// raises its errors; anything else NotImplemented (the wrapper takes the op, whose checks word the errors).
PyObject* grouped_gemm_eager(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (FL_UNLIKELY(nargs != 5)) return raise(PyExc_TypeError, "grouped_gemm_eager takes 5 arguments, got %zd", nargs);
  if (!no_torch_mode()) Py_RETURN_NOTIMPLEMENTED;
  PyObject* const* lists[5];
  Py_ssize_t G = -1;
  for (int f = 0; f < 5; ++f) {
    Py_ssize_t n = 0;
    if (!as_seq(args[f], &lists[f], &n) || n < 1 || (G >= 0 && n != G)) Py_RETURN_NOTIMPLEMENTED;
    G = n;
    for (Py_ssize_t g = 0; g < n; ++g)
      if (!plain_cuda(lists[f][g])) Py_RETURN_NOTIMPLEMENTED;
  }
  PyObject* const* a = lists[0];
  PyObject* const* sfa = lists[1];
  PyObject* const* b = lists[2];
  PyObject* const* sfb = lists[3];
  PyObject* const* c = lists[4];
  for (Py_ssize_t g = 0; g < G; ++g)
    if (THPVariable_Unpack(a[g]).dim() < 1 || THPVariable_Unpack(b[g]).dim() < 2) Py_RETURN_NOTIMPLEMENTED;
  PyObject* abc = PyList_New(G);
  PyObject* pairs = PyList_New(G);
  PyObject* sizes = PyList_New(G);
  PyObject* data = nullptr;
  PyObject* out = nullptr;
  if (abc && pairs && sizes) {
    bool ok = true;
    for (Py_ssize_t g = 0; ok && g < G; ++g) {
      const at::Tensor& bt = THPVariable_Unpack(b[g]);
      PyObject* t3 = PyTuple_Pack(3, a[g], b[g], c[g]);
      PyObject* t2 = PyTuple_Pack(2, sfa[g], sfb[g]);
      PyObject* mnk = Py_BuildValue("(LLLi)", (long long)THPVariable_Unpack(a[g]).size(0), (long long)bt.size(0),
                                    (long long)(2 * bt.size(1)), 1);
      ok = t3 && t2 && mnk;
      if (ok) {
        PyList_SET_ITEM(abc, g, t3);
        PyList_SET_ITEM(pairs, g, t2);
        PyList_SET_ITEM(sizes, g, mnk);
      } else {
        Py_XDECREF(t3);
        Py_XDECREF(t2);
        Py_XDECREF(mnk);
      }
    }
    if (ok) data = PyTuple_Pack(4, abc, pairs, pairs, sizes);
    if (data) out = fast_launch(self, data);
  }
  Py_XDECREF(abc);
  Py_XDECREF(pairs);
  Py_XDECREF(sizes);
  Py_XDECREF(data);
  return out;
}

PyMethodDef kMethods[] = {
    {"fast_launch", fast_launch, METH_O,
     "fast_launch(data) -> list[Tensor]\n\nRuns the NVFP4 grouped GEMM on the GPU MODE nvfp4_group_gemm input "
     "and returns the c tensors, written in place. A group with M or N = 0 is empty: nothing is launched for it "
     "(a call whose groups are all empty calls no CUDA function)."},
    {"grouped_mm_masked", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(grouped_mm_masked)),
     METH_FASTCALL,
     "grouped_mm_masked(a, sfa, b, sfb, masked_m, out, alpha=None) -> out\n\nThe masked NVFP4 grouped GEMM in the "
     "serving layout (fastlaunch.grouped_mm_masked has the contract; a NVFP4 with sfa, or float16 or bfloat16 [G, max_m, "
     "K] with sfa None: weight-only): expert g writes rows 0 .. masked_m[g]-1 of "
     "out[g] (fp16 or bf16), times alpha[g] where alpha (fp32 [G]) is given, both read on the device; launches on "
     "the current stream of the tensors' device and returns out."},
    {"grouped_mm_contiguous",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(grouped_mm_contiguous)), METH_FASTCALL,
     "grouped_mm_contiguous(a, sfa, b, sfb, offs, out, alpha=None) -> out\n\nThe contiguous layout "
     "(fastlaunch.grouped_mm_contiguous has the contract): a float16 or bfloat16 [T, K] with sfa None, or NVFP4 with "
     "sfa; expert g's rows offs[g-1] .. "
     "offs[g]-1 of a and out (offs int32 [G], read on the device); launches on the current stream of the tensors' "
     "device and returns out."},
    {"grouped_mm_masked_eager",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(eager_entry<grouped_mm_masked>)), METH_FASTCALL,
     "grouped_mm_masked_eager(a, sfa, b, sfb, masked_m, out, alpha) -> out or NotImplemented\n\nThe public "
     "wrapper's eager call: grouped_mm_masked where no torch dispatch or function mode is active, every tensor is a "
     "plain CUDA torch.Tensor needing no gradient and masked_m is int32; else NotImplemented, launching nothing."},
    {"grouped_gemm_eager", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(grouped_gemm_eager)),
     METH_FASTCALL,
     "grouped_gemm_eager(a, sfa, b, sfb, c) -> list or NotImplemented\n\nThe task layout's wrapper eagerly: "
     "fast_launch on the five lists where no torch mode is active and every entry is a plain CUDA tensor needing no "
     "gradient; else NotImplemented, launching nothing."},
    {"grouped_mm_contiguous_eager",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(eager_entry<grouped_mm_contiguous>)),
     METH_FASTCALL,
     "grouped_mm_contiguous_eager(a, sfa, b, sfb, offs, out, alpha) -> out or NotImplemented\n\nAs "
     "grouped_mm_masked_eager, for grouped_mm_contiguous."},
    {"unpack", unpack, METH_O, "unpack(data) -> int\n\nChecks and unpacks like fast_launch (no device checks, no "
                               "launch); returns the number of groups."},
    {"pack", pack, METH_O, "pack(data) -> tuple[int, ...]\n\nThe int64 buffer [a b c sfa sfb m n k] x G (the "
                           "pointer of a tensor without elements: 0)."},
    {"launch_repeat", launch_repeat, METH_VARARGS,
     "launch_repeat(data, iters) -> float\n\nHost ns per launch of the launcher called from a C loop on a "
     "buffer unpacked once (the floor for fast_launch)."},
    {"plan", plan, METH_VARARGS,
     "plan(sizes, sm_count, share=0, cap=0, parts=0, half=0, narrow=0, mid=0) -> (groups, starts, est_us, rows, "
     "reduce, wave)\n\nThe sm90 kernel's plan for sizes [(m, n, k), ...] on a GPU with sm_count multiprocessors "
     "(share: 0 any, 1 whole tiles only, 2 split tiles only, 3 reduced tiles where allowed (up to 16 groups), 4 a "
     "wave plan; cap: 0 any, else the widest "
     "tile; parts: 0 one CTA per SM, else with share 2 that many CTAs per tile, with share 3 that many parts per "
     "tile; half: 0 either, 1 half tiles where allowed (up to 16 groups, not split), 2 never; narrow: 0 either, 1 "
     "the narrow build (a narrower wgmma N where a group's tiles hold few rows; not with half or reduced tiles), "
     "2 never; mid: 0 either, 1 the mid build where it fits (the widest tiles' wgmma at N = mid_n where every "
     "such tile holds at most that many rows; not with half or reduced tiles), 2 never). "
     "groups: per group (width, chunks, tiles_n, rank): chunks tiles of width A rows along M, tiles_n of `rows` "
     "B rows along N, rank the group's place in the tile order. starts: ((tile, k), ...), CTA b runs the K steps "
     "from starts[b] up to starts[b + 1]. est_us: the estimated time of the busiest CTA (with reduced tiles, plus "
     "the reduce kernel). rows: B rows per tile (128, or 64 for half tiles). reduce: parts per tile of reduced "
     "tiles (a tile of fewer K steps: one per step; each tile's parts are consecutive CTAs, their sums added "
     "by a third kernel), 0 for none. wave: a wave plan (share 4, or the planner's choice where the launch's A "
     "outgrows L2): tile t runs on CTA t mod (len(starts) - 1), a group's tiles along N fastest, starts[b] = (b, 0)."},
    {"setup_device", setup_device, METH_O,
     "setup_device(device) -> str\n\nSets CUDA device `device` up as the first call on it does, launching nothing "
     "else (on sm_100a this runs the kernel's self-check), and returns what the set-up found (the self-check's "
     "outcome; '' where there is nothing to report); raises the error every call on the device raises."},
    {"plan_m", plan_m, METH_O,
     "plan_m(m) -> int\n\nThe representative M of m's planning class: groups whose M's share a class (and N, K) are "
     "planned alike, and the launcher's memo of plans is keyed by it (m itself above 4096)."},
    {"plan_memo_ns", plan_memo_ns, METH_VARARGS,
     "plan_memo_ns(launches, sm_count, reps) -> (ns, misses)\n\nThe launcher's memo of plans timed on this CPU: ns per "
     "launch over reps passes through launches ([[(m, n, k), ...], ...]), and how many it planned."},
    {"row_schedule", row_schedule, METH_VARARGS,
     "row_schedule(tiles, kst, grid, wave_ok, force=0, a16_bytes=0) -> (ctas, wave, shares)\n\nThe masked form's "
     "schedule as its kernels make it on the device from the tiles that hold rows this call (tiles of kst K steps "
     "each, a grid of `grid` CTAs; wave_ok: the kernel build runs wave walks; force: 1 whole tiles, 2 a split, 4 "
     "waves, as FASTLAUNCH_SM90_SHARE forces them, 0 the cheaper; a16_bytes: the fp16 A the tiles read, as tiled, "
     "past L2's share of which waves are preferred): the CTAs with work, whether tiles run whole (tile t on "
     "CTA t mod ctas) or the K steps are split evenly, and per CTA (first_tile, first_k, units, end_k, stride, "
     "before): its share (end_k 0: its steps end at a tile's end), the wave walk's stride (0: a split run, walked "
     "backwards) and how many CTAs below it hold steps of its first tile."},
    {"skinny_memo_ns", skinny_memo_ns, METH_VARARGS,
     "skinny_memo_ns(launches, sm_count, reps) -> (ns, misses)\n\nThe launcher's memo of skinny runs timed on this "
     "CPU: ns per launch over reps passes through launches ([[(m, n, k), ...], ...]), and how many it estimated."},
    {"cuts", cuts, METH_VARARGS,
     "cuts(sizes, sm_count, share=0, cap=0, parts=0, half=0, narrow=0, mid=0) -> tuple[int, ...]\n\nThe rows at which the sm90 "
     "launcher cuts each group of sizes [(m, n, k), ...] into two launch groups (its head rows, then the rest; "
     "0: not cut; all 0 where the launch is not cut), with plan()'s settings. plan() shows the launch uncut; "
     "the launcher plans the cut groups where this says so."},
    {"row_plan", row_plan, METH_VARARGS,
     "row_plan(sizes, cap=0) -> tuple[int, tuple[tuple[int, int, int, int], ...]] | None\n\nHow the launcher "
     "tiles a task-form launch on the device schedule: (build, ((width, chunks, tiles_n, mma_n), ...)); None where "
     "it does not fit one. cap: the widest tile (FASTLAUNCH_SM90_WCAP with FASTLAUNCH_SM90_ROWS=1), 0: the rules'."},
    {"sizes_seen", sizes_seen, METH_VARARGS,
     "sizes_seen(launches) -> tuple[int, ...]\n\nFor each launch's ((m, n, k), ...) in turn, its sighting in a "
     "fresh table of sizes seen (the launcher's): 0 first, 1 second, 2 later."},
    {"mma_n", mma_n, METH_VARARGS,
     "mma_n(sizes, sm_count, share=0, cap=0, parts=0, half=0, narrow=0, mid=0) -> tuple[int, ...]\n\nEach "
     "group's wgmma N in plan()'s plan with the same settings: its tile width, or in the narrow or mid build a "
     "narrower N."},
    {"skinny", skinny, METH_VARARGS,
     "skinny(sizes, sm_count) -> tuple | None\n\nThe skinny kernel's plan (rows, items, ctas, smem, est_us, "
     "chosen, split, lanes) for sizes [(m, n, k), ...] on a GPU with sm_count multiprocessors, one skinny launch per "
     "16 groups, or None where a launch may not take it: rows the compiled A rows, items the (group, 512 / lanes B "
     "rows) items, ctas the grid, smem its dynamic shared memory (rows, ctas, smem: the largest launch's), est_us "
     "its estimate (summed); chosen: whether the launcher takes it (its estimate against the wgmma plan's); split: "
     "the CTAs (one cluster) that share each item's K; lanes: the lanes per B row, 8 or 32 (these two: the "
     "largest launch's)."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "fastlaunch._C", "fastlaunch's CPython fast path.", -1, kMethods};

}  // namespace

PyMODINIT_FUNC PyInit__C(void) {
  PyObject* m = PyModule_Create(&kModule);
  if (!m) return nullptr;
  if (PyModule_AddStringConstant(m, "supported_archs", fl_supported_archs()) < 0 ||
      PyModule_AddIntConstant(m, "max_width", fl::sm90::kMaxWidth) < 0 ||
      PyModule_AddIntConstant(m, "narrow_n", fl::sm90::kNarrowN) < 0 ||
      PyModule_AddIntConstant(m, "mid_n", fl::sm90::kMidN) < 0 ||
      PyModule_AddIntConstant(m, "block_n", fl::sm90::kBlockN) < 0 ||
      PyModule_AddIntConstant(m, "max_ctas", fl::sm90::kMaxCtas) < 0 ||
      PyModule_AddIntConstant(m, "max_groups_per_launch", fl::sm90::kGroupsPerLaunch) < 0) {
    Py_DECREF(m);
    return nullptr;
  }
  PyObject* widths = int_tuple(fl::sm90::kNumWidths, [](Py_ssize_t i) { return fl::sm90::kWidths[i]; });
  if (!widths || PyModule_AddObject(m, "tile_widths", widths) < 0) {  // steals widths on success
    Py_XDECREF(widths);
    Py_DECREF(m);
    return nullptr;
  }
  PyObject* builds = int_tuple(fl::sm90::kNumSkinnyBuilds, [](Py_ssize_t i) { return fl::sm90::kSkinnyBuilds[i]; });
  if (!builds || PyModule_AddObject(m, "skinny_builds", builds) < 0) {  // steals builds on success
    Py_XDECREF(builds);
    Py_DECREF(m);
    return nullptr;
  }
  // The planner's cost model (kernels/sm90/plan/planner.h), ns, so tests and tools check plans against the same numbers.
  PyObject* cost = Py_BuildValue(
      "{s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d}", "step_ns_dequant", fl::sm90::kStepNsDequant,
      "step_ns_per_row", fl::sm90::kStepNsPerRow, "pass_ns", fl::sm90::kPassNs, "unaligned_pass_ns",
      fl::sm90::kUnalignedPassNs, "part_write_ns", fl::sm90::kPartWriteNs,
      "part_read_ns", fl::sm90::kPartReadNs, "few_write_ns", fl::sm90::kFewWriteNs, "few_write_row_ns",
      fl::sm90::kFewWriteRowNs, "few_read_ns", fl::sm90::kFewReadNs, "few_read_row_ns", fl::sm90::kFewReadRowNs,
      "half_add_ns", fl::sm90::kHalfAddNs, "half_load", fl::sm90::kHalfLoad, "reduce_ns", fl::sm90::kReduceNs, "reduce_ns_per_kb", fl::sm90::kReduceNsPerKB,
      "narrow_step_ratio", fl::sm90::kNarrowStepRatio, "mid_step_ratio", fl::sm90::kMidStepRatio);
  if (!cost || PyModule_AddObject(m, "cost_model", cost) < 0) {  // steals cost on success
    Py_XDECREF(cost);
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
