// Shared by the CUDA library's .cu files (compiled by nvcc only; the main extension never
// includes this): the stream / event structs behind the C ABI's opaque types, error
// reporting, element types, launch geometry and merged-dims offset arithmetic.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "providers/cuda/cuda_api.h"

struct OrtliteCudaStream {
  int device = 0;
  cudaStream_t stream = nullptr;
  void* cublas = nullptr;  // cublasHandle_t, made on first use (runtime.cu)
  void* cudnn = nullptr;   // cudnnHandle_t, made on first use
};

struct OrtliteCudaEvent {
  int device = 0;
  cudaEvent_t event = nullptr;
};

namespace ortlite_cuda {

// Element types, numbered as ONNX's TensorProto.DataType.
enum DType : int {
  kFloat = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kBFloat16 = 16,
};

const char* dtype_name(int dtype);
int dtype_size(int dtype);  // 0 for types the library does not handle

// The thread's last error message. Each returns 1 so that callers can `return fail(...)`.
int fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
int cuda_fail(cudaError_t e, const char* what);
const char* last_error();

#define OC_TRY(expr)                                                              \
  do {                                                                            \
    const cudaError_t oc_err_ = (expr);                                           \
    if (oc_err_ != cudaSuccess) return ::ortlite_cuda::cuda_fail(oc_err_, #expr); \
  } while (0)

// A kernel launch reports a bad configuration through cudaGetLastError.
#define OC_LAUNCHED() OC_TRY(cudaGetLastError())

// Makes `device` current for the scope and restores the caller's device afterwards, so
// that the library never changes which device a host thread works on.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&prev_) != cudaSuccess) prev_ = -1;
    if (prev_ != device) {
      status_ = cudaSetDevice(device);
      changed_ = status_ == cudaSuccess;
    }
  }
  ~DeviceGuard() {
    if (changed_ && prev_ >= 0) cudaSetDevice(prev_);
  }
  cudaError_t status() const { return status_; }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
  bool changed_ = false;
  cudaError_t status_ = cudaSuccess;
};

#define OC_DEVICE(device)                        \
  ::ortlite_cuda::DeviceGuard oc_guard_(device); \
  OC_TRY(oc_guard_.status())

// Checks a stream argument and makes its device current.
#define OC_STREAM(s)                                                     \
  if (!(s)) return ::ortlite_cuda::fail("%s: stream is NULL", __func__); \
  OC_DEVICE((s)->device)

constexpr int kBlock = 256;

inline unsigned grid_for(int64_t n, int block = kBlock) {
  const int64_t g = (n + block - 1) / block;
  // Kernels loop over the rest (grid-stride), so the grid can stay moderate.
  return static_cast<unsigned>(g < 1 ? 1 : (g > 65535 * 16 ? 65535 * 16 : g));
}

// ---- element types on the device ------------------------------------------------------

// Arithmetic type of an element type: half types compute in float.
template <typename T>
struct Acc {
  using type = T;
};
template <>
struct Acc<__half> {
  using type = float;
};
template <>
struct Acc<__nv_bfloat16> {
  using type = float;
};

template <typename T>
__device__ __forceinline__ typename Acc<T>::type widen(T v) {
  return v;
}
template <>
__device__ __forceinline__ float widen<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float widen<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T, typename C>
__device__ __forceinline__ T narrow(C v) {
  return static_cast<T>(v);
}
template <>
__device__ __forceinline__ __half narrow<__half, float>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16, float>(float v) {
  return __float2bfloat16_rn(v);
}

// Fixed-size storage for kernels that only move elements.
template <int N>
struct Storage;
template <>
struct Storage<1> {
  using type = uint8_t;
};
template <>
struct Storage<2> {
  using type = uint16_t;
};
template <>
struct Storage<4> {
  using type = uint32_t;
};
template <>
struct Storage<8> {
  using type = uint64_t;
};

// ---- merged dims ----------------------------------------------------------------------

// Up to 3 operands over one index space of `rank` dims (outermost first).
struct Geom {
  int rank = 0;
  int64_t dims[ORTLITE_CUDA_MAX_RANK];
  int64_t st[3][ORTLITE_CUDA_MAX_RANK];
};

// Drops dims of size 1 and merges neighbours that are contiguous for every operand, so a
// bias add over [N, C, H, W] + [C, 1, 1] becomes 3 dims and a same-shape op becomes 1.
// Fails (returns 1) when more than ORTLITE_CUDA_MAX_RANK dims remain.
int merge_dims(int rank, const int64_t* dims, int nops, const int64_t* const* strides, Geom* g);

// Total element count of the merged index space.
int64_t geom_count(const Geom& g);

// True when every offset of every operand, and the element count, fits in int32.
bool geom_fits_int32(const Geom& g, int nops);

// Offsets of linear index `idx` for the first NOPS operands. The outermost dim needs no
// division: what is left of idx is its coordinate.
template <int NOPS, typename I>
__device__ __forceinline__ void geom_offsets(const Geom& g, I idx, I* off) {
#pragma unroll
  for (int k = 0; k < NOPS; ++k) off[k] = 0;
  for (int d = g.rank - 1; d > 0; --d) {
    const I dim = static_cast<I>(g.dims[d]);
    const I q = idx / dim;
    const I r = idx - q * dim;
    idx = q;
#pragma unroll
    for (int k = 0; k < NOPS; ++k) off[k] += r * static_cast<I>(g.st[k][d]);
  }
#pragma unroll
  for (int k = 0; k < NOPS; ++k) off[k] += idx * static_cast<I>(g.st[k][0]);
}

}  // namespace ortlite_cuda
