// Elementwise kernels: broadcasting binary arithmetic / comparisons / logic, unary
// activations and math, Where, Cast. Results follow the CPU kernels (src/providers/cpu/math,
// src/providers/cpu/tensor/cast_convert.h): integer arithmetic wraps, integer division truncates with
// x / 0 = 0, Min / Max propagate NaN, half types compute in float.
//
// One kernel per element type and index width; the op is a runtime switch (uniform over the
// grid, so it costs a few instructions per element and keeps the number of instantiations,
// and so the compile time, small).
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "providers/cuda/common.cuh"
#include "providers/cuda/launchers.cuh"

namespace ortlite_cuda {
namespace {

// ---- binary ---------------------------------------------------------------------------

template <typename C>
__device__ __forceinline__ C arith(int op, C a, C b) {
  if constexpr (std::is_integral<C>::value) {
    using U = typename std::make_unsigned<C>::type;
    switch (op) {
      case ORTLITE_CUDA_ADD:
        return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      case ORTLITE_CUDA_SUB:
        return static_cast<C>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
      case ORTLITE_CUDA_MUL:
        return static_cast<C>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
      case ORTLITE_CUDA_DIV:
        if (b == 0) return 0;
        if (std::is_signed<C>::value && b == static_cast<C>(-1))
          return static_cast<C>(static_cast<U>(U(0) - static_cast<U>(a)));
        return static_cast<C>(a / b);
      case ORTLITE_CUDA_MIN:
        return a <= b ? a : b;
      case ORTLITE_CUDA_MAX:
        return a >= b ? a : b;
      case ORTLITE_CUDA_PRELU:
        if constexpr (std::is_signed<C>::value)
          return a < 0 ? static_cast<C>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b))) : a;
        else
          return a;
      default:
        return 0;
    }
  } else {
    switch (op) {
      case ORTLITE_CUDA_ADD:
        return a + b;
      case ORTLITE_CUDA_SUB:
        return a - b;
      case ORTLITE_CUDA_MUL:
        return a * b;
      case ORTLITE_CUDA_DIV:
        return a / b;
      case ORTLITE_CUDA_POW:
        return pow(a, b);
      case ORTLITE_CUDA_MIN:
        return (a <= b || a != a) ? a : b;
      case ORTLITE_CUDA_MAX:
        return (a >= b || a != a) ? a : b;
      case ORTLITE_CUDA_PRELU:
        return a < C(0) ? a * b : a;
      default:
        return C(0);
    }
  }
}

template <typename C>
__device__ __forceinline__ bool compare(int op, C a, C b) {
  switch (op) {
    case ORTLITE_CUDA_EQUAL:
      return a == b;
    case ORTLITE_CUDA_LESS:
      return a < b;
    case ORTLITE_CUDA_GREATER:
      return a > b;
    case ORTLITE_CUDA_LESS_EQUAL:
      return a <= b;
    case ORTLITE_CUDA_GREATER_EQUAL:
      return a >= b;
    case ORTLITE_CUDA_AND:
      return a && b;
    case ORTLITE_CUDA_OR:
      return a || b;
    case ORTLITE_CUDA_XOR:
      return (a != C(0)) != (b != C(0));
    default:
      return false;
  }
}

template <typename T, typename I>
__global__ void arith_kernel(int op, Geom g, I n, const T* a, const T* b, T* out) {
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<I>(gridDim.x) * blockDim.x) {
    I off[2];
    geom_offsets<2>(g, i, off);
    out[i] = narrow<T>(arith(op, widen(a[off[0]]), widen(b[off[1]])));
  }
}

template <typename T, typename I>
__global__ void compare_kernel(int op, Geom g, I n, const T* a, const T* b, bool* out) {
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<I>(gridDim.x) * blockDim.x) {
    I off[2];
    geom_offsets<2>(g, i, off);
    out[i] = compare(op, widen(a[off[0]]), widen(b[off[1]]));
  }
}

template <typename F>
int dispatch_numeric(int dtype, const char* what, F&& f) {
  switch (dtype) {
    case kFloat:
      return f(float{});
    case kDouble:
      return f(double{});
    case kFloat16:
      return f(__half{});
    case kBFloat16:
      return f(__nv_bfloat16{});
    case kInt8:
      return f(int8_t{});
    case kUInt8:
      return f(uint8_t{});
    case kInt32:
      return f(int32_t{});
    case kInt64:
      return f(int64_t{});
    default:
      return fail("%s: element type %s is not supported on CUDA", what, dtype_name(dtype));
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

// ---- unary ----------------------------------------------------------------------------

template <typename C>
__device__ __forceinline__ C sigmoid(C x) {
  if (x >= C(0)) return C(1) / (C(1) + exp(-x));
  const C e = exp(x);
  return e / (C(1) + e);
}

template <typename C>
__device__ __forceinline__ C clamp01(C v) {
  return v < C(0) ? C(0) : (v > C(1) ? C(1) : v);
}

template <typename C>
__device__ __forceinline__ C unary_op(int op, C x, C alpha, C beta) {
  switch (op) {
    case ORTLITE_CUDA_RELU:
      return x < C(0) ? C(0) : x;
    case ORTLITE_CUDA_LEAKY_RELU:
      return x >= C(0) ? x : alpha * x;
    case ORTLITE_CUDA_SIGMOID:
      return sigmoid(x);
    case ORTLITE_CUDA_TANH:
      return tanh(x);
    case ORTLITE_CUDA_GELU:
      return C(0.5) * x * (C(1) + erf(x * C(0.70710678118654752440)));
    case ORTLITE_CUDA_GELU_TANH: {
      const C inner = C(0.79788456080286535588) * (x + C(0.044715) * x * x * x);
      return C(0.5) * x * (C(1) + tanh(inner));
    }
    case ORTLITE_CUDA_ELU:
      return x >= C(0) ? x : alpha * expm1(x);
    case ORTLITE_CUDA_SELU:
      return x > C(0) ? beta * x : beta * (alpha * exp(x) - alpha);
    case ORTLITE_CUDA_HARD_SIGMOID:
      return clamp01(alpha * x + beta);
    case ORTLITE_CUDA_HARD_SWISH:
      return x * clamp01(x * C(1.0 / 6.0) + C(0.5));
    case ORTLITE_CUDA_SOFTPLUS:
      return x > C(0) ? x + log1p(exp(-x)) : log1p(exp(x));
    case ORTLITE_CUDA_SOFTSIGN:
      return x / (C(1) + fabs(x));
    case ORTLITE_CUDA_EXP:
      return exp(x);
    case ORTLITE_CUDA_LOG:
      return log(x);
    case ORTLITE_CUDA_SQRT:
      return sqrt(x);
    case ORTLITE_CUDA_ABS:
      return fabs(x);
    case ORTLITE_CUDA_NEG:
      return -x;
    case ORTLITE_CUDA_RECIPROCAL:
      return C(1) / x;
    case ORTLITE_CUDA_ERF:
      return erf(x);
    case ORTLITE_CUDA_SIN:
      return sin(x);
    case ORTLITE_CUDA_COS:
      return cos(x);
    case ORTLITE_CUDA_FLOOR:
      return floor(x);
    case ORTLITE_CUDA_CEIL:
      return ceil(x);
    case ORTLITE_CUDA_CLIP: {
      const C r = x < alpha ? alpha : x;  // NaN compares false: stays NaN
      return r > beta ? beta : r;
    }
    default:
      return x;
  }
}

template <typename T>
__global__ void unary_kernel(int op, int64_t n, const T* x, T* y, double alpha, double beta) {
  using C = typename Acc<T>::type;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = narrow<T>(unary_op<C>(op, widen(x[i]), static_cast<C>(alpha), static_cast<C>(beta)));
}

__global__ void not_kernel(int64_t n, const bool* x, bool* y) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = !x[i];
}

// ---- where ----------------------------------------------------------------------------

template <typename S, typename I>
__global__ void where_kernel(Geom g, I n, const bool* cond, const S* x, const S* y, S* out) {
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<I>(gridDim.x) * blockDim.x) {
    I off[3];
    geom_offsets<3>(g, i, off);
    out[i] = cond[off[0]] ? x[off[1]] : y[off[2]];
  }
}

// ---- cast -----------------------------------------------------------------------------
// cast_convert.h's rules (onnxruntime on x86-64): float -> narrow ints truncates to int32
// (NaN / out of range: INT32_MIN) and wraps; -> int64 NaN / out of range gives INT64_MIN;
// -> uint32 / uint64 offsets large values; anything -> bool is x != 0; integer narrowing
// wraps; float16 / bfloat16 targets round from float.

template <typename T>
constexpr bool is_half_v = std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value;
template <typename T>
constexpr bool is_floatish_v = std::is_floating_point<T>::value || is_half_v<T>;

__device__ __forceinline__ int32_t trunc_i32(double f) {
  return (f > -2147483649.0 && f < 2147483648.0) ? static_cast<int32_t>(f) : INT32_MIN;
}
__device__ __forceinline__ int64_t trunc_i64(double f) {
  return (f >= -9223372036854775808.0 && f < 9223372036854775808.0) ? static_cast<int64_t>(f)
                                                                    : INT64_MIN;
}

template <typename To, bool kFromHalf>
__device__ __forceinline__ To float_to_int(double f) {
  if constexpr (std::is_same<To, bool>::value) {
    return f != 0.0;
  } else if constexpr (std::is_same<To, int64_t>::value) {
    return trunc_i64(f);
  } else if constexpr (std::is_same<To, uint64_t>::value) {
    if (f >= 9223372036854775808.0)
      return static_cast<uint64_t>(trunc_i64(f - 9223372036854775808.0)) ^ (uint64_t{1} << 63);
    return static_cast<uint64_t>(trunc_i64(f));
  } else if constexpr (std::is_same<To, uint32_t>::value) {
    if constexpr (kFromHalf) {
      return static_cast<uint32_t>(static_cast<uint64_t>(trunc_i64(f)));
    } else {
      if (f >= 2147483648.0)
        return static_cast<uint32_t>(trunc_i32(f - 2147483648.0)) ^ 0x80000000u;
      return static_cast<uint32_t>(trunc_i32(f));
    }
  } else {
    return static_cast<To>(static_cast<uint32_t>(trunc_i32(f)));
  }
}

template <typename To, typename From>
__device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same<To, From>::value) {
    return v;
  } else if constexpr (is_floatish_v<From>) {
    const double w = static_cast<double>(widen(v));
    if constexpr (is_half_v<To>) {
      return narrow<To>(static_cast<float>(w));
    } else if constexpr (std::is_floating_point<To>::value) {
      return static_cast<To>(w);
    } else {
      return float_to_int<To, is_half_v<From>>(w);
    }
  } else {
    if constexpr (std::is_same<To, bool>::value) {
      return v != 0;
    } else if constexpr (is_half_v<To>) {
      return narrow<To>(static_cast<float>(v));
    } else if constexpr (std::is_integral<To>::value && !std::is_same<From, bool>::value) {
      return static_cast<To>(static_cast<typename std::make_unsigned<To>::type>(v));
    } else {
      return static_cast<To>(v);
    }
  }
}

template <typename From>
__global__ void cast_kernel(int dst, int64_t n, const From* x, void* y) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const From v = x[i];
    switch (dst) {
      case kFloat:
        static_cast<float*>(y)[i] = convert<float>(v);
        break;
      case kDouble:
        static_cast<double*>(y)[i] = convert<double>(v);
        break;
      case kFloat16:
        static_cast<__half*>(y)[i] = convert<__half>(v);
        break;
      case kBFloat16:
        static_cast<__nv_bfloat16*>(y)[i] = convert<__nv_bfloat16>(v);
        break;
      case kInt8:
        static_cast<int8_t*>(y)[i] = convert<int8_t>(v);
        break;
      case kUInt8:
        static_cast<uint8_t*>(y)[i] = convert<uint8_t>(v);
        break;
      case kInt16:
        static_cast<int16_t*>(y)[i] = convert<int16_t>(v);
        break;
      case kUInt16:
        static_cast<uint16_t*>(y)[i] = convert<uint16_t>(v);
        break;
      case kInt32:
        static_cast<int32_t*>(y)[i] = convert<int32_t>(v);
        break;
      case kUInt32:
        static_cast<uint32_t*>(y)[i] = convert<uint32_t>(v);
        break;
      case kInt64:
        static_cast<int64_t*>(y)[i] = convert<int64_t>(v);
        break;
      case kUInt64:
        static_cast<uint64_t*>(y)[i] = convert<uint64_t>(v);
        break;
      case kBool:
        static_cast<bool*>(y)[i] = convert<bool>(v);
        break;
      default:
        break;
    }
  }
}

bool cast_type_ok(int t) {
  switch (t) {
    case kFloat:
    case kDouble:
    case kFloat16:
    case kBFloat16:
    case kInt8:
    case kUInt8:
    case kInt16:
    case kUInt16:
    case kInt32:
    case kUInt32:
    case kInt64:
    case kUInt64:
    case kBool:
      return true;
    default:
      return false;
  }
}

}  // namespace

int binary(OrtliteCudaStream* stream, int op, int dtype, int rank, const int64_t* out_dims,
           const void* a, const int64_t* a_strides, const void* b, const int64_t* b_strides,
           void* out) {
  OC_STREAM(stream);
  if (op < 0 || op >= ORTLITE_CUDA_BINARY_OP_COUNT) return fail("binary: unknown op %d", op);
  const int64_t* strides[2] = {a_strides, b_strides};
  Geom g;
  if (merge_dims(rank, out_dims, 2, strides, &g)) return 1;
  const int64_t n = geom_count(g);
  if (n == 0) return 0;
  const bool small = geom_fits_int32(g, 2);
  const unsigned grid = grid_for(n);
  cudaStream_t s = stream->stream;
  const bool logical = op >= ORTLITE_CUDA_AND;
  const bool comparison = op >= ORTLITE_CUDA_EQUAL;
  if (logical) {
    if (dtype != kBool)
      return fail("And / Or / Xor: element type %s, expected bool", dtype_name(dtype));
    auto* o = static_cast<bool*>(out);
    if (small)
      compare_kernel<bool, int32_t><<<grid, kBlock, 0, s>>>(op, g, static_cast<int32_t>(n),
                                                            static_cast<const bool*>(a),
                                                            static_cast<const bool*>(b), o);
    else
      compare_kernel<bool, int64_t><<<grid, kBlock, 0, s>>>(op, g, n, static_cast<const bool*>(a),
                                                            static_cast<const bool*>(b), o);
    OC_LAUNCHED();
    return 0;
  }
  if (comparison && dtype == kBool) {
    if (op != ORTLITE_CUDA_EQUAL) return fail("comparison of bool tensors is not supported");
    const auto* aa = static_cast<const uint8_t*>(a);
    const auto* bb = static_cast<const uint8_t*>(b);
    auto* o = static_cast<bool*>(out);
    if (small)
      compare_kernel<uint8_t, int32_t>
          <<<grid, kBlock, 0, s>>>(op, g, static_cast<int32_t>(n), aa, bb, o);
    else
      compare_kernel<uint8_t, int64_t><<<grid, kBlock, 0, s>>>(op, g, n, aa, bb, o);
    OC_LAUNCHED();
    return 0;
  }
  return dispatch_numeric(dtype, "binary", [&](auto tag) -> int {
    using T = decltype(tag);
    const T* aa = static_cast<const T*>(a);
    const T* bb = static_cast<const T*>(b);
    if (comparison) {
      auto* o = static_cast<bool*>(out);
      if (small)
        compare_kernel<T, int32_t>
            <<<grid, kBlock, 0, s>>>(op, g, static_cast<int32_t>(n), aa, bb, o);
      else
        compare_kernel<T, int64_t><<<grid, kBlock, 0, s>>>(op, g, n, aa, bb, o);
    } else {
      if (op == ORTLITE_CUDA_POW && !is_floatish_v<T>)
        return fail("Pow: element type %s is not supported on CUDA", dtype_name(dtype));
      T* o = static_cast<T*>(out);
      if (small)
        arith_kernel<T, int32_t><<<grid, kBlock, 0, s>>>(op, g, static_cast<int32_t>(n), aa, bb, o);
      else
        arith_kernel<T, int64_t><<<grid, kBlock, 0, s>>>(op, g, n, aa, bb, o);
    }
    OC_LAUNCHED();
    return 0;
  });
}

int unary(OrtliteCudaStream* stream, int op, int dtype, int64_t n, const void* x, void* y,
          double alpha, double beta) {
  OC_STREAM(stream);
  if (op < 0 || op >= ORTLITE_CUDA_UNARY_OP_COUNT) return fail("unary: unknown op %d", op);
  if (n <= 0) return 0;
  cudaStream_t s = stream->stream;
  if (op == ORTLITE_CUDA_NOT) {
    if (dtype != kBool) return fail("Not: element type %s, expected bool", dtype_name(dtype));
    not_kernel<<<grid_for(n), kBlock, 0, s>>>(n, static_cast<const bool*>(x),
                                              static_cast<bool*>(y));
    OC_LAUNCHED();
    return 0;
  }
  return dispatch_float(dtype, "unary", [&](auto tag) -> int {
    using T = decltype(tag);
    unary_kernel<T><<<grid_for(n), kBlock, 0, s>>>(op, n, static_cast<const T*>(x),
                                                   static_cast<T*>(y), alpha, beta);
    OC_LAUNCHED();
    return 0;
  });
}

int where(OrtliteCudaStream* stream, int elem_size, int rank, const int64_t* out_dims,
          const void* cond, const int64_t* cond_strides, const void* x, const int64_t* x_strides,
          const void* y, const int64_t* y_strides, void* out) {
  OC_STREAM(stream);
  const int64_t* strides[3] = {cond_strides, x_strides, y_strides};
  Geom g;
  if (merge_dims(rank, out_dims, 3, strides, &g)) return 1;
  const int64_t n = geom_count(g);
  if (n == 0) return 0;
  const bool small = geom_fits_int32(g, 3);
  cudaStream_t s = stream->stream;
  const auto* c = static_cast<const bool*>(cond);
  auto launch = [&](auto tag) -> int {
    using S = decltype(tag);
    const S* xx = static_cast<const S*>(x);
    const S* yy = static_cast<const S*>(y);
    S* o = static_cast<S*>(out);
    if (small)
      where_kernel<S, int32_t>
          <<<grid_for(n), kBlock, 0, s>>>(g, static_cast<int32_t>(n), c, xx, yy, o);
    else
      where_kernel<S, int64_t><<<grid_for(n), kBlock, 0, s>>>(g, n, c, xx, yy, o);
    OC_LAUNCHED();
    return 0;
  };
  switch (elem_size) {
    case 1:
      return launch(uint8_t{});
    case 2:
      return launch(uint16_t{});
    case 4:
      return launch(uint32_t{});
    case 8:
      return launch(uint64_t{});
    default:
      return fail("Where: element size %d is not supported", elem_size);
  }
}

int cast(OrtliteCudaStream* stream, int src_dtype, int dst_dtype, int64_t n, const void* x,
         void* y) {
  OC_STREAM(stream);
  if (!cast_type_ok(src_dtype) || !cast_type_ok(dst_dtype))
    return fail("Cast from %s to %s is not supported on CUDA", dtype_name(src_dtype),
                dtype_name(dst_dtype));
  if (n <= 0) return 0;
  cudaStream_t s = stream->stream;
  auto launch = [&](auto tag) -> int {
    using From = decltype(tag);
    cast_kernel<From><<<grid_for(n), kBlock, 0, s>>>(dst_dtype, n, static_cast<const From*>(x), y);
    OC_LAUNCHED();
    return 0;
  };
  switch (src_dtype) {
    case kFloat:
      return launch(float{});
    case kDouble:
      return launch(double{});
    case kFloat16:
      return launch(__half{});
    case kBFloat16:
      return launch(__nv_bfloat16{});
    case kInt8:
      return launch(int8_t{});
    case kUInt8:
      return launch(uint8_t{});
    case kInt16:
      return launch(int16_t{});
    case kUInt16:
      return launch(uint16_t{});
    case kInt32:
      return launch(int32_t{});
    case kUInt32:
      return launch(uint32_t{});
    case kInt64:
      return launch(int64_t{});
    case kUInt64:
      return launch(uint64_t{});
    case kBool:
      return launch(bool{});
    default:
      return fail("Cast: element type %s is not supported on CUDA", dtype_name(src_dtype));
  }
}

}  // namespace ortlite_cuda
