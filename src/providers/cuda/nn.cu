// Row-wise and windowed kernels: Softmax / LogSoftmax, LayerNormalization,
// BatchNormalization (inference), the Reduce* family, max / average pooling. Arithmetic
// follows the CPU kernels (src/providers/cpu/nn, src/providers/cpu/reduce): additive reductions of floating
// types accumulate in double, Max / Min reductions propagate NaN, max pooling ignores NaN,
// half types compute in float.
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "providers/cuda/common.cuh"
#include "providers/cuda/launchers.cuh"

namespace ortlite_cuda {
namespace {

constexpr unsigned kFull = 0xffffffffu;

template <typename A>
__device__ __forceinline__ A max_nan(A a, A b) {
  return (b > a || b != b) ? b : a;  // NaN wins and then sticks
}
template <typename A>
__device__ __forceinline__ A min_nan(A a, A b) {
  return (b < a || b != b) ? b : a;
}

template <typename A>
__device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

enum class Combine { kSum, kProd, kMax, kMin };

template <typename A>
__device__ __forceinline__ A combine(Combine c, A a, A b) {
  switch (c) {
    case Combine::kSum:
      if constexpr (std::is_integral<A>::value) {
        using U = typename std::make_unsigned<A>::type;
        return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
      } else {
        return a + b;
      }
    case Combine::kProd:
      if constexpr (std::is_integral<A>::value) {
        using U = typename std::make_unsigned<A>::type;
        return static_cast<A>(static_cast<U>(a) * static_cast<U>(b));
      } else {
        return a * b;
      }
    case Combine::kMax:
      return max_nan(a, b);
    default:
      return min_nan(a, b);
  }
}

template <typename A>
__device__ __forceinline__ A warp_combine(Combine c, A v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = combine(c, v, __shfl_xor_sync(kFull, v, o));
  return v;
}

// Combines v over the block (blockDim.x a multiple of 32, at most 1024); every thread gets
// the result. `shared` holds 32 values.
template <typename A>
__device__ A block_combine(Combine c, A v, A* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  v = warp_combine(c, v);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    A w = lane < warps ? shared[lane] : shared[0];
    // Lanes past the warp count repeat warp 0's value; that is harmless only for the
    // idempotent combines, so sum / product lanes past the count contribute the identity.
    if (lane >= warps && (c == Combine::kSum)) w = A(0);
    if (lane >= warps && (c == Combine::kProd)) w = A(1);
    w = warp_combine(c, w);
    if (lane == 0) shared[0] = w;
  }
  __syncthreads();
  const A r = shared[0];
  __syncthreads();
  return r;
}

template <typename A>
__device__ __forceinline__ A neg_inf() {
  return -static_cast<A>(INFINITY);
}

// Converts a double result to T the way the CPU kernels do (half types through float).
template <typename T>
__device__ __forceinline__ T from_double(double d) {
  if constexpr (std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value)
    return narrow<T>(static_cast<float>(d));
  else
    return static_cast<T>(d);
}

// ---- softmax --------------------------------------------------------------------------

// One warp per row of n (<= 1024 or so) contiguous elements.
template <typename T>
__global__ void softmax_warp_kernel(int log_mode, int64_t rows, int64_t n, const T* x, T* y) {
  using A = typename Acc<T>::type;
  const int lane = threadIdx.x & 31;
  const int64_t per_block = blockDim.x >> 5;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * per_block + (threadIdx.x >> 5); row < rows;
       row += static_cast<int64_t>(gridDim.x) * per_block) {
    const T* xr = x + row * n;
    T* yr = y + row * n;
    A m = neg_inf<A>();
    for (int64_t j = lane; j < n; j += 32) m = max_nan(m, widen(xr[j]));
    m = warp_combine(Combine::kMax, m);
    A sum = 0;
    for (int64_t j = lane; j < n; j += 32) sum += exp(widen(xr[j]) - m);
    sum = warp_sum(sum);
    if (log_mode) {
      const A ls = log(sum);
      for (int64_t j = lane; j < n; j += 32) yr[j] = narrow<T>(widen(xr[j]) - m - ls);
    } else {
      for (int64_t j = lane; j < n; j += 32) yr[j] = narrow<T>(exp(widen(xr[j]) - m) / sum);
    }
  }
}

// One block per row, for long rows.
template <typename T>
__global__ void softmax_block_kernel(int log_mode, int64_t rows, int64_t n, const T* x, T* y) {
  using A = typename Acc<T>::type;
  __shared__ A shared[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    T* yr = y + row * n;
    A m = neg_inf<A>();
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = max_nan(m, widen(xr[j]));
    m = block_combine(Combine::kMax, m, shared);
    A sum = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += exp(widen(xr[j]) - m);
    sum = block_combine(Combine::kSum, sum, shared);
    if (log_mode) {
      const A ls = log(sum);
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
        yr[j] = narrow<T>(widen(xr[j]) - m - ls);
    } else {
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
        yr[j] = narrow<T>(exp(widen(xr[j]) - m) / sum);
    }
  }
}

// inner > 1: one thread per (outer, inner) column; neighbouring threads read neighbouring
// elements.
template <typename T>
__global__ void softmax_strided_kernel(int log_mode, int64_t outer, int64_t n, int64_t inner,
                                       const T* x, T* y) {
  using A = typename Acc<T>::type;
  const int64_t total = outer * inner;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t p = i / inner, q = i - p * inner;
    const T* xc = x + p * n * inner + q;
    T* yc = y + p * n * inner + q;
    A m = neg_inf<A>();
    for (int64_t j = 0; j < n; ++j) m = max_nan(m, widen(xc[j * inner]));
    A sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += exp(widen(xc[j * inner]) - m);
    if (log_mode) {
      const A ls = log(sum);
      for (int64_t j = 0; j < n; ++j) yc[j * inner] = narrow<T>(widen(xc[j * inner]) - m - ls);
    } else {
      for (int64_t j = 0; j < n; ++j)
        yc[j * inner] = narrow<T>(exp(widen(xc[j * inner]) - m) / sum);
    }
  }
}

// ---- layer normalization --------------------------------------------------------------

// Mean and 1 / sqrt(var + eps) of a row, two passes (as the CPU kernel), over a group of
// `lanes` threads (a warp, or the block when lanes == 0).
template <typename T, typename A>
__device__ void row_moments(const T* xr, int64_t n, A eps, int lane, int lanes, A* shared, A* mean,
                            A* inv) {
  A s = 0;
  for (int64_t j = lane; j < n; j += lanes) s += static_cast<A>(widen(xr[j]));
  s = shared ? block_combine(Combine::kSum, s, shared) : warp_sum(s);
  const A mu = s / static_cast<A>(n);
  A v = 0;
  for (int64_t j = lane; j < n; j += lanes) {
    const A d = static_cast<A>(widen(xr[j])) - mu;
    v += d * d;
  }
  v = shared ? block_combine(Combine::kSum, v, shared) : warp_sum(v);
  *mean = mu;
  *inv = A(1) / sqrt(v / static_cast<A>(n) + eps);
}

template <typename T>
__device__ void layer_norm_row(const T* xr, T* yr, int64_t n, int lane, int lanes,
                               typename Acc<T>::type mean, typename Acc<T>::type inv,
                               const T* scale, const T* bias) {
  using C = typename Acc<T>::type;
  for (int64_t j = lane; j < n; j += lanes) {
    C v = (widen(xr[j]) - mean) * inv * widen(scale[j]);
    if (bias) v += widen(bias[j]);
    yr[j] = narrow<T>(v);
  }
}

// Statistics in double for double, float otherwise (the CPU kernel's accumulation is
// double throughout; float sums over a warp tree are within its tolerance).
template <typename T>
using StatT = typename std::conditional<std::is_same<T, double>::value, double, float>::type;

template <typename T>
__global__ void layer_norm_warp_kernel(int64_t rows, int64_t n, float eps, const T* x,
                                       const T* scale, const T* bias, T* y, float* mean_out,
                                       float* inv_out) {
  using A = StatT<T>;
  const int lane = threadIdx.x & 31;
  const int64_t per_block = blockDim.x >> 5;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * per_block + (threadIdx.x >> 5); row < rows;
       row += static_cast<int64_t>(gridDim.x) * per_block) {
    A mean, inv;
    row_moments<T, A>(x + row * n, n, static_cast<A>(eps), lane, 32, nullptr, &mean, &inv);
    layer_norm_row<T>(x + row * n, y + row * n, n, lane, 32, mean, inv, scale, bias);
    if (lane == 0) {
      if (mean_out) mean_out[row] = static_cast<float>(mean);
      if (inv_out) inv_out[row] = static_cast<float>(inv);
    }
  }
}

template <typename T>
__global__ void layer_norm_block_kernel(int64_t rows, int64_t n, float eps, const T* x,
                                        const T* scale, const T* bias, T* y, float* mean_out,
                                        float* inv_out) {
  using A = StatT<T>;
  __shared__ A shared[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    A mean, inv;
    row_moments<T, A>(x + row * n, n, static_cast<A>(eps), threadIdx.x, blockDim.x, shared, &mean,
                      &inv);
    layer_norm_row<T>(x + row * n, y + row * n, n, threadIdx.x, blockDim.x, mean, inv, scale, bias);
    if (threadIdx.x == 0) {
      if (mean_out) mean_out[row] = static_cast<float>(mean);
      if (inv_out) inv_out[row] = static_cast<float>(inv);
    }
  }
}

// ---- batch normalization --------------------------------------------------------------

template <typename T>
__global__ void batch_norm_kernel(int64_t n, int64_t div, int64_t period, float eps, const T* x,
                                  const T* scale, const T* bias, const T* mean, const T* var,
                                  T* y) {
  using C = typename Acc<T>::type;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t p = (i / div) % period;
    const C inv_std = C(1) / sqrt(widen(var[p]) + static_cast<C>(eps));
    const C a = inv_std * widen(scale[p]);
    const C b = widen(bias[p]) - widen(mean[p]) * a;
    y[i] = narrow<T>(widen(x[i]) * a + b);
  }
}

// ---- reductions -----------------------------------------------------------------------

struct RGeom {
  int kept_rank, red_rank;
  int64_t kd[ORTLITE_CUDA_MAX_RANK], ks[ORTLITE_CUDA_MAX_RANK];
  int64_t rd[ORTLITE_CUDA_MAX_RANK], rs[ORTLITE_CUDA_MAX_RANK];
};

__device__ __forceinline__ int64_t dims_offset(int rank, const int64_t* dims,
                                               const int64_t* strides, int64_t i) {
  if (rank == 1) return i * strides[0];
  int64_t off = 0;
  for (int d = rank - 1; d > 0; --d) {
    const int64_t q = i / dims[d];
    off += (i - q * dims[d]) * strides[d];
    i = q;
  }
  return off + i * strides[0];
}

template <typename T>
struct ReduceAcc {  // additive accumulator: double for floating types, T for integers
  using type = typename std::conditional<std::is_integral<T>::value, T, double>::type;
};

template <typename A>
__device__ __forceinline__ A lowest();
template <>
__device__ __forceinline__ double lowest<double>() {
  return -static_cast<double>(INFINITY);
}
template <>
__device__ __forceinline__ int32_t lowest<int32_t>() {
  return INT32_MIN;
}
template <>
__device__ __forceinline__ int64_t lowest<int64_t>() {
  return INT64_MIN;
}
template <typename A>
__device__ __forceinline__ A highest();
template <>
__device__ __forceinline__ double highest<double>() {
  return static_cast<double>(INFINITY);
}
template <>
__device__ __forceinline__ int32_t highest<int32_t>() {
  return INT32_MAX;
}
template <>
__device__ __forceinline__ int64_t highest<int64_t>() {
  return INT64_MAX;
}

__device__ __forceinline__ Combine combine_of(int op) {
  switch (op) {
    case ORTLITE_CUDA_REDUCE_MAX:
      return Combine::kMax;
    case ORTLITE_CUDA_REDUCE_MIN:
      return Combine::kMin;
    case ORTLITE_CUDA_REDUCE_PROD:
      return Combine::kProd;
    default:
      return Combine::kSum;
  }
}

template <typename A>
__device__ __forceinline__ A seed_of(int op) {
  switch (op) {
    case ORTLITE_CUDA_REDUCE_MAX:
      return lowest<A>();
    case ORTLITE_CUDA_REDUCE_MIN:
      return highest<A>();
    case ORTLITE_CUDA_REDUCE_PROD:
      return A(1);
    default:
      return A(0);
  }
}

// The term element x contributes (before combining).
template <typename A>
__device__ __forceinline__ A term_of(int op, A v, A p) {
  switch (op) {
    case ORTLITE_CUDA_REDUCE_SUM_SQUARE:
    case ORTLITE_CUDA_REDUCE_L2:
      if constexpr (std::is_integral<A>::value) {
        using U = typename std::make_unsigned<A>::type;
        return static_cast<A>(static_cast<U>(v) * static_cast<U>(v));
      } else {
        return v * v;
      }
    case ORTLITE_CUDA_REDUCE_L1:
      if constexpr (std::is_integral<A>::value) {
        using U = typename std::make_unsigned<A>::type;
        return v < 0 ? static_cast<A>(U(0) - static_cast<U>(v)) : v;
      } else {
        return fabs(v);
      }
    case ORTLITE_CUDA_REDUCE_LOG_SUM_EXP:
      if constexpr (std::is_integral<A>::value) {
        return v;
      } else {
        return exp(v - p);
      }
    default:
      return v;
  }
}

template <typename T, typename A>
__device__ __forceinline__ T finalize(int op, A a, int64_t count, A p) {
  if constexpr (std::is_integral<A>::value) {
    if (op == ORTLITE_CUDA_REDUCE_MEAN) return static_cast<T>(static_cast<int64_t>(a) / count);
    return static_cast<T>(a);
  } else {
    switch (op) {
      case ORTLITE_CUDA_REDUCE_MEAN:
        return from_double<T>(a / static_cast<double>(count));
      case ORTLITE_CUDA_REDUCE_L2:
        return from_double<T>(sqrt(a));
      case ORTLITE_CUDA_REDUCE_LOG_SUM:
        return from_double<T>(log(a));
      case ORTLITE_CUDA_REDUCE_LOG_SUM_EXP:
        return from_double<T>(log(a) + p);
      default:
        return from_double<T>(a);
    }
  }
}

template <typename T, typename A>
__device__ __forceinline__ T empty_value(int op) {
  if constexpr (std::is_integral<A>::value) {
    return op == ORTLITE_CUDA_REDUCE_PROD ? T(1) : T(0);
  } else {
    switch (op) {
      case ORTLITE_CUDA_REDUCE_PROD:
        return from_double<T>(1.0);
      case ORTLITE_CUDA_REDUCE_MAX:
      case ORTLITE_CUDA_REDUCE_LOG_SUM:
      case ORTLITE_CUDA_REDUCE_LOG_SUM_EXP:
        return from_double<T>(-static_cast<double>(INFINITY));
      case ORTLITE_CUDA_REDUCE_MIN:
        return from_double<T>(static_cast<double>(INFINITY));
      default:
        return from_double<T>(0.0);
    }
  }
}

// LANES threads cooperate on one output: 1 (a thread per output, for many outputs over
// strided columns), 32 (a warp) or the whole block (LANES == 0, for few long reductions).
template <typename T, int LANES>
__global__ void reduce_kernel(int op, RGeom g, int64_t num_out, int64_t count, const T* x, T* y) {
  using A = typename ReduceAcc<T>::type;
  __shared__ A shared[32];
  const int lanes = LANES == 0 ? static_cast<int>(blockDim.x) : LANES;
  const int lane = LANES == 1 ? 0 : static_cast<int>(threadIdx.x) % lanes;
  const int64_t groups = blockDim.x / lanes;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * groups + threadIdx.x / lanes;
  const Combine c = combine_of(op);
  for (int64_t o = first; o < num_out; o += static_cast<int64_t>(gridDim.x) * groups) {
    if (count == 0) {
      if (lane == 0) y[o] = empty_value<T, A>(op);
      continue;
    }
    const T* xo = x + dims_offset(g.kept_rank, g.kd, g.ks, o);
    A p = 0;
    if (op == ORTLITE_CUDA_REDUCE_LOG_SUM_EXP) {
      A m = lowest<A>();
      for (int64_t r = lane; r < count; r += lanes)
        m = max_nan(m, static_cast<A>(widen(xo[dims_offset(g.red_rank, g.rd, g.rs, r)])));
      if (LANES == 32) m = warp_combine(Combine::kMax, m);
      if (LANES == 0) m = block_combine(Combine::kMax, m, shared);
      if constexpr (!std::is_integral<A>::value) p = isinf(m) ? A(0) : m;
    }
    A acc = seed_of<A>(op);
    for (int64_t r = lane; r < count; r += lanes) {
      const A v = static_cast<A>(widen(xo[dims_offset(g.red_rank, g.rd, g.rs, r)]));
      acc = combine(c, acc, term_of(op, v, p));
    }
    if (LANES == 32) acc = warp_combine(c, acc);
    if (LANES == 0) acc = block_combine(c, acc, shared);
    if (lane == 0) y[o] = finalize<T, A>(op, acc, count, p);
  }
}

// ---- pooling --------------------------------------------------------------------------

// The CPU kernel's seed: the type's lowest finite value (so a window with no tap inside the
// input gives it, and float16 outputs round it to -inf).
template <typename A>
__device__ __forceinline__ A pool_lowest() {
  if constexpr (std::is_same<A, double>::value)
    return -DBL_MAX;
  else
    return -FLT_MAX;
}

__device__ __forceinline__ int64_t taps(int64_t start, int64_t k, int64_t d, int64_t in,
                                        int64_t pe) {
  int64_t end = start + k * d;
  if (end > in + pe) end = in + pe;
  return end > start ? 1 + (end - start - 1) / d : 0;
}

template <typename T>
__global__ void pool_kernel(OrtliteCudaPoolParams p, int64_t total, const T* x, T* y,
                            int64_t* indices) {
  using A = typename Acc<T>::type;
  const int64_t in_size = p.in[0] * p.in[1] * p.in[2];
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < total;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t t = o;
    const int64_t o2 = t % p.out[2];
    t /= p.out[2];
    const int64_t o1 = t % p.out[1];
    t /= p.out[1];
    const int64_t o0 = t % p.out[0];
    const int64_t c = t / p.out[0];
    const int64_t s0 = o0 * p.stride[0] - p.pad_begin[0];
    const int64_t s1 = o1 * p.stride[1] - p.pad_begin[1];
    const int64_t s2 = o2 * p.stride[2] - p.pad_begin[2];
    const T* xc = x + c * in_size;
    A acc = p.is_max ? pool_lowest<A>() : A(0);
    int64_t n = 0, best = -1;
    for (int64_t k0 = 0; k0 < p.kernel[0]; ++k0) {
      const int64_t i0 = s0 + k0 * p.dilation[0];
      if (i0 < 0 || i0 >= p.in[0]) continue;
      for (int64_t k1 = 0; k1 < p.kernel[1]; ++k1) {
        const int64_t i1 = s1 + k1 * p.dilation[1];
        if (i1 < 0 || i1 >= p.in[1]) continue;
        const int64_t base = (i0 * p.in[1] + i1) * p.in[2];
        for (int64_t k2 = 0; k2 < p.kernel[2]; ++k2) {
          const int64_t i2 = s2 + k2 * p.dilation[2];
          if (i2 < 0 || i2 >= p.in[2]) continue;
          const A v = widen(xc[base + i2]);
          if (p.is_max) {
            if (v > acc) {  // first maximum wins; NaN never does
              acc = v;
              best = base + i2;
            }
          } else {
            acc += v;
          }
          ++n;
        }
      }
    }
    if (p.is_max) {
      y[o] = narrow<T>(acc);
      if (indices) {
        int64_t b0 = p.spatial_rank >= 3 ? -1 : 0, b1 = p.spatial_rank >= 2 ? -1 : 0, b2 = -1;
        if (best >= 0) {
          b2 = best % p.in[2];
          b1 = (best / p.in[2]) % p.in[1];
          b0 = best / (p.in[2] * p.in[1]);
        }
        const int64_t idx = p.storage_order == 0 ? (b0 * p.in[1] + b1) * p.in[2] + b2
                                                 : b0 + b1 * p.in[0] + b2 * p.in[0] * p.in[1];
        indices[o] = c * in_size + idx;
      }
    } else {
      int64_t div = n;
      if (p.count_include_pad) {
        div = p.clip_divisor ? taps(s0, p.kernel[0], p.dilation[0], p.in[0], p.pad_end[0]) *
                                   taps(s1, p.kernel[1], p.dilation[1], p.in[1], p.pad_end[1]) *
                                   taps(s2, p.kernel[2], p.dilation[2], p.in[2], p.pad_end[2])
                             : p.kernel[0] * p.kernel[1] * p.kernel[2];
      }
      y[o] = div > 0 ? narrow<T>(acc / static_cast<A>(div)) : narrow<T>(A(0));
    }
  }
}

template <typename F>
int dispatch_float(int dtype, const char* what, F&& f) {
  switch (dtype) {
    case kFloat:
      return f(float{});
    case kDouble:
      return f(double{});
    case kFloat16:
      return f(__half{});
    case kBFloat16:
      return f(__nv_bfloat16{});
    default:
      return fail("%s: element type %s is not supported on CUDA", what, dtype_name(dtype));
  }
}

}  // namespace

int softmax(OrtliteCudaStream* stream, int dtype, int log_mode, int64_t outer, int64_t n,
            int64_t inner, const void* x, void* y) {
  OC_STREAM(stream);
  if (outer * n * inner == 0) return 0;
  cudaStream_t s = stream->stream;
  return dispatch_float(dtype, "Softmax", [&](auto tag) -> int {
    using T = decltype(tag);
    const T* xx = static_cast<const T*>(x);
    T* yy = static_cast<T*>(y);
    if (inner > 1) {
      softmax_strided_kernel<T>
          <<<grid_for(outer * inner), kBlock, 0, s>>>(log_mode, outer, n, inner, xx, yy);
    } else if (n <= 1024) {
      softmax_warp_kernel<T><<<grid_for(outer * 32), kBlock, 0, s>>>(log_mode, outer, n, xx, yy);
    } else {
      const unsigned grid = static_cast<unsigned>(outer < 65535 * 16 ? outer : 65535 * 16);
      softmax_block_kernel<T><<<grid, 512, 0, s>>>(log_mode, outer, n, xx, yy);
    }
    OC_LAUNCHED();
    return 0;
  });
}

int layer_norm(OrtliteCudaStream* stream, int dtype, int64_t rows, int64_t cols, float epsilon,
               const void* x, const void* scale, const void* bias, void* y, float* mean,
               float* inv_std) {
  OC_STREAM(stream);
  if (rows == 0) return 0;
  if (cols <= 0) return fail("LayerNormalization: empty rows");
  cudaStream_t s = stream->stream;
  return dispatch_float(dtype, "LayerNormalization", [&](auto tag) -> int {
    using T = decltype(tag);
    const T* xx = static_cast<const T*>(x);
    const T* sc = static_cast<const T*>(scale);
    const T* bb = static_cast<const T*>(bias);
    T* yy = static_cast<T*>(y);
    if (cols <= 1024) {
      layer_norm_warp_kernel<T><<<grid_for(rows * 32), kBlock, 0, s>>>(rows, cols, epsilon, xx, sc,
                                                                       bb, yy, mean, inv_std);
    } else {
      const unsigned grid = static_cast<unsigned>(rows < 65535 * 16 ? rows : 65535 * 16);
      layer_norm_block_kernel<T>
          <<<grid, 512, 0, s>>>(rows, cols, epsilon, xx, sc, bb, yy, mean, inv_std);
    }
    OC_LAUNCHED();
    return 0;
  });
}

int batch_norm(OrtliteCudaStream* stream, int dtype, int64_t n, int64_t param_div,
               int64_t param_period, float epsilon, const void* x, const void* scale,
               const void* bias, const void* mean, const void* var, void* y) {
  OC_STREAM(stream);
  if (n == 0) return 0;
  if (param_div <= 0 || param_period <= 0) return fail("BatchNormalization: bad parameter layout");
  cudaStream_t s = stream->stream;
  return dispatch_float(dtype, "BatchNormalization", [&](auto tag) -> int {
    using T = decltype(tag);
    batch_norm_kernel<T><<<grid_for(n), kBlock, 0, s>>>(
        n, param_div, param_period, epsilon, static_cast<const T*>(x), static_cast<const T*>(scale),
        static_cast<const T*>(bias), static_cast<const T*>(mean), static_cast<const T*>(var),
        static_cast<T*>(y));
    OC_LAUNCHED();
    return 0;
  });
}

int reduce(OrtliteCudaStream* stream, int op, int dtype, int kept_rank, const int64_t* kept_dims,
           const int64_t* kept_strides, int red_rank, const int64_t* red_dims,
           const int64_t* red_strides, int64_t red_count, const void* x, void* y) {
  OC_STREAM(stream);
  if (op < 0 || op >= ORTLITE_CUDA_REDUCE_OP_COUNT) return fail("reduce: unknown op %d", op);
  if (kept_rank < 0 || kept_rank > ORTLITE_CUDA_MAX_RANK || red_rank < 0 ||
      red_rank > ORTLITE_CUDA_MAX_RANK)
    return fail("reduce: %d kept and %d reduced dims (at most %d each)", kept_rank, red_rank,
                ORTLITE_CUDA_MAX_RANK);
  RGeom g;
  g.kept_rank = kept_rank > 0 ? kept_rank : 1;
  g.red_rank = red_rank > 0 ? red_rank : 1;
  int64_t num_out = 1;
  g.kd[0] = 1;
  g.ks[0] = 0;
  g.rd[0] = 1;
  g.rs[0] = 0;
  for (int d = 0; d < kept_rank; ++d) {
    g.kd[d] = kept_dims[d];
    g.ks[d] = kept_strides[d];
    num_out *= kept_dims[d];
  }
  for (int d = 0; d < red_rank; ++d) {
    g.rd[d] = red_dims[d];
    g.rs[d] = red_strides[d];
  }
  if (num_out == 0) return 0;
  const bool integral = dtype == kInt32 || dtype == kInt64;
  if (integral && (op == ORTLITE_CUDA_REDUCE_L2 || op == ORTLITE_CUDA_REDUCE_LOG_SUM ||
                   op == ORTLITE_CUDA_REDUCE_LOG_SUM_EXP))
    return fail("reduce: this reduction of %s is not supported on CUDA", dtype_name(dtype));
  // Threads per output: a whole block for few long reductions, one thread for many outputs
  // whose reduced elements are strided (neighbouring outputs are neighbours in memory),
  // a warp otherwise.
  const bool column = kept_rank > 0 && kept_strides[kept_rank - 1] == 1;
  int lanes = 32;
  if (num_out < 512 && red_count >= 8192)
    lanes = 0;
  else if (column && num_out >= 2048)
    lanes = 1;
  cudaStream_t s = stream->stream;
  auto launch = [&](auto tag) -> int {
    using T = decltype(tag);
    const T* xx = static_cast<const T*>(x);
    T* yy = static_cast<T*>(y);
    if (lanes == 0) {
      const unsigned grid = static_cast<unsigned>(num_out < 65535 * 16 ? num_out : 65535 * 16);
      reduce_kernel<T, 0><<<grid, 512, 0, s>>>(op, g, num_out, red_count, xx, yy);
    } else if (lanes == 1) {
      reduce_kernel<T, 1><<<grid_for(num_out), kBlock, 0, s>>>(op, g, num_out, red_count, xx, yy);
    } else {
      reduce_kernel<T, 32>
          <<<grid_for(num_out * 32), kBlock, 0, s>>>(op, g, num_out, red_count, xx, yy);
    }
    OC_LAUNCHED();
    return 0;
  };
  switch (dtype) {
    case kFloat:
      return launch(float{});
    case kDouble:
      return launch(double{});
    case kFloat16:
      return launch(__half{});
    case kBFloat16:
      return launch(__nv_bfloat16{});
    case kInt32:
      return launch(int32_t{});
    case kInt64:
      return launch(int64_t{});
    default:
      return fail("reduce: element type %s is not supported on CUDA", dtype_name(dtype));
  }
}

int pool(OrtliteCudaStream* stream, const OrtliteCudaPoolParams* p, const void* x, void* y,
         int64_t* indices) {
  OC_STREAM(stream);
  if (p->spatial_rank < 1 || p->spatial_rank > 3)
    return fail("pooling over %d spatial dims (1 to 3 supported)", p->spatial_rank);
  for (int i = 0; i < 3; ++i)
    if (p->in[i] < 0 || p->out[i] < 0 || p->kernel[i] < 1 || p->stride[i] < 1 || p->dilation[i] < 1)
      return fail("pooling: bad geometry on axis %d", i);
  const int64_t total = p->channels * p->out[0] * p->out[1] * p->out[2];
  if (total == 0) return 0;
  cudaStream_t s = stream->stream;
  const OrtliteCudaPoolParams params = *p;
  return dispatch_float(p->dtype, p->is_max ? "MaxPool" : "AveragePool", [&](auto tag) -> int {
    using T = decltype(tag);
    pool_kernel<T><<<grid_for(total), kBlock, 0, s>>>(params, total, static_cast<const T*>(x),
                                                      static_cast<T*>(y), indices);
    OC_LAUNCHED();
    return 0;
  });
}

}  // namespace ortlite_cuda
