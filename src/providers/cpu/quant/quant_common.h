// Shared helpers of the quantization kernels (src/providers/cpu/quant).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "ortlite/kernel.h"

namespace ortlite {
namespace quant {

// Per-file registration, called by register_quant_kernels (register.cc).
void register_quantize_linear(KernelRegistry& r);  // quantize_linear.cc: QuantizeLinear,
                                                   // DequantizeLinear, DynamicQuantizeLinear
void register_qmatmul(KernelRegistry& r);          // qmatmul.cc: QLinearMatMul, MatMulInteger
void register_qconv(KernelRegistry& r);            // qconv.cc: QLinearConv, ConvInteger
void register_matmul_nbits(KernelRegistry& r);     // matmul_nbits.cc: com.microsoft MatMulNBits
void register_gather_block_quantized(KernelRegistry& r);  // com.microsoft GatherBlockQuantized
// com.microsoft QOperator kernels (what onnxruntime's quantize_static with QOperator writes):
void register_qlinear_elementwise(KernelRegistry& r);  // QLinearAdd, Mul, Sigmoid, LeakyRelu
void register_qlinear_pool(KernelRegistry& r);         // QLinearGlobalAveragePool, AveragePool
void register_qlinear_tensor(KernelRegistry& r);       // QLinearConcat, QLinearSoftmax
void register_qlinear_where(KernelRegistry& r);        // QLinearWhere
void register_qgemm(KernelRegistry& r);                // QGemm
void register_qembed_layer_norm(KernelRegistry& r);    // QEmbedLayerNormalization

// ---- quantized integer types -------------------------------------------------------------

// Saturation bounds of an integer quantized type.
struct QRange {
  double lo = 0, hi = 0;
};

// uint8, int8, uint16, int16: the byte-aligned integer quantized types.
bool is_quant_int_type(DataType t);
// Every type QuantizeLinear may produce: the above, int4, uint4, int2, uint2, the float8
// types but float8e8m0, and float4e2m1 (the narrow types hold one element a byte).
bool is_quant_output_type(DataType t);
// Saturation bounds of an integer quantized type: the above, int32 and the narrow ints.
QRange quant_range(DataType t);

// ONNX's name of a TensorProto element type code, for error messages.
std::string onnx_type_label(int64_t code);

// rint(v) (ties to even) + zp, saturated to r. NaN gives r.lo, as onnxruntime does. The
// value is clamped first (the bounds are integers, so clamping and rounding commute), which
// keeps it below 2^51, where adding and taking off 1.5 * 2^52 rounds to the nearest integer,
// ties to even, in the default rounding mode: no libm call, and no out-of-range cast.
inline double round_saturate(double v, double zp, QRange r) {
  const double lo = r.lo - zp, hi = r.hi - zp;
  const double c = v >= lo ? (v <= hi ? v : hi) : lo;
  constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
  return ((c + kMagic) - kMagic) + zp;
}

// The integer products of the 8-bit operators (MatMulInteger, ConvInteger, QLinearMatMul,
// QLinearConv) run on the 8-bit integer GEMM, compute/int8_gemm.h.

// Every element of a numeric tensor as double (float16 / bfloat16 widened exactly).
std::vector<double> tensor_values(const Tensor& t, const char* what);

// Same, also for the narrow types (int4 / uint4 / int2 / uint2 / float8* / float4e2m1) that
// quantization parameters may have.
std::vector<double> param_values(const Tensor& t, const char* what);

// True when t holds a single value as a scalar or a 1-element 1-D tensor.
inline bool is_single(const Tensor& t) {
  return t.rank() == 0 || (t.rank() == 1 && t.dim(0) == 1);
}

// ---- per-tensor parameters of the com.microsoft QOperator kernels ------------------------

// The value of a float scale that must hold a single value (scalar or 1-element); fails
// with kInvalidArgument naming `name` otherwise.
float qop_scale(const KernelContext& ctx, const Tensor& t, const char* name);
// The value of a single-valued zero point of element type `want` (0 when t is null); fails
// with kInvalidArgument naming `name` on another type or shape.
int32_t qop_zero_point(const KernelContext& ctx, const Tensor* t, DataType want, const char* name);
// Fails unless t is uint8 or int8.
void check_qop_int8(const KernelContext& ctx, const Tensor& t, const char* name);

// Float operations in the order onnxruntime's MLAS kernels write them: the compiler must
// neither fuse a product into a following sum nor reorder (ortlite builds with the default
// -ffp-contract=fast), so values pass through this barrier where MLAS rounds.
inline float fp_barrier(float v) {
#if defined(__GNUC__)
  __asm__("" : "+x"(v));
#endif
  return v;
}

// onnxruntime's QlinearBuildLookupTable: out[byte] = quantize(f(x_scale * (x - x_zp))) for
// every x (the byte read as uint8, or as int8 when is_signed), quantize being
// MlasQuantizeLinear: the float quotient by y_scale clamped to the range less y_zp, rounded
// half to even, plus y_zp (NaN to the low end).
template <typename F>
void build_qlinear_table(float xs, int32_t xz, float ys, int32_t yz, bool is_signed, F&& f,
                         uint8_t* out) {
  const float lo = is_signed ? -128.0f : 0.0f, hi = is_signed ? 127.0f : 255.0f;
  const float dlo = lo - static_cast<float>(yz), dhi = hi - static_cast<float>(yz);
  for (int i = 0; i < 256; ++i) {
    const int32_t q = is_signed ? static_cast<int8_t>(i) : i;
    const float v = fp_barrier(xs * static_cast<float>(q - xz));
    float d = fp_barrier(f(v)) / ys;
    d = d < dlo ? dlo : (d > dhi ? dhi : d);
    const int32_t r =
        d == d ? static_cast<int32_t>(std::nearbyint(d)) + yz : static_cast<int32_t>(lo);
    out[i] = static_cast<uint8_t>(r & 0xff);
  }
}

// rint(v), ties to even, in the default rounding mode, without a libm call: below 2^23
// adding and taking off 2^23 rounds; at or above, v is already an integer (or NaN / inf).
inline float round_half_even(float v) {
  const float a = std::fabs(v);
  if (!(a < 8388608.0f)) return v;
  return std::copysign((a + 8388608.0f) - 8388608.0f, v);
}

// ---- QuantizeLinear / DequantizeLinear granularity ---------------------------------------

// x viewed as [outer, dim, inner] around the quantization axis. Per-tensor: one parameter;
// per-axis: parameter d for every element at index d along the axis; blocked: parameters
// shaped [outer, blocks, inner], element (o, d, i) using (o, d / block, i).
struct QdqLayout {
  enum Kind { kPerTensor, kPerAxis, kBlocked } kind = kPerTensor;
  int64_t outer = 1, dim = 1, inner = 1, block = 0, blocks = 1;
};

// Resolves the granularity from the scale's shape (onnxruntime's rules): a scalar or
// 1-element scale is per-tensor (block_size must then be 0); otherwise block_size 0 means
// per-axis (scale 1-D with x.shape[axis] elements) and block_size > 0 blocked (scale of x's
// rank, ceil(x.shape[axis] / block_size) on the axis, equal elsewhere). The zero point, when
// given, must match the scale. Fails with kInvalidArgument naming the inputs.
QdqLayout qdq_layout(const KernelContext& ctx, const Shape& x, const Tensor& scale,
                     const Tensor* zero_point, int64_t axis, int64_t block_size,
                     const char* scale_name, const char* zp_name);

// Calls fn(begin, count, param, step) over runs of x's elements: elements begin + k
// (k < count) use parameter param + k * step. Runs are spread over the pool; `cost` is the
// rough work per element.
template <typename Fn>
void for_each_run(const QdqLayout& l, int64_t numel, ThreadPool* pool, double cost, Fn&& fn) {
  if (numel == 0) return;
  if (l.kind == QdqLayout::kPerTensor) {
    constexpr int64_t kChunk = 4096;
    const int64_t chunks = (numel + kChunk - 1) / kChunk;
    parallel_for(pool, chunks, cost * kChunk, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        const int64_t begin = c * kChunk;
        fn(begin, std::min(kChunk, numel - begin), int64_t(0), int64_t(0));
      }
    });
    return;
  }
  const int64_t rows = l.outer * l.dim;
  parallel_for(pool, rows, cost * static_cast<double>(l.inner), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      if (l.kind == QdqLayout::kPerAxis) {
        fn(r * l.inner, l.inner, r % l.dim, int64_t(0));
      } else {
        const int64_t o = r / l.dim, d = r % l.dim;
        fn(r * l.inner, l.inner, (o * l.blocks + d / l.block) * l.inner, int64_t(1));
      }
    }
  });
}

// ---- element access ------------------------------------------------------------------------

template <typename T>
inline float to_float(T v) {
  return static_cast<float>(v);
}
template <typename T>
inline double to_double(T v) {
  return static_cast<double>(to_float(v));
}
template <>
inline double to_double<int32_t>(int32_t v) {
  return static_cast<double>(v);
}
template <>
inline double to_double<double>(double v) {
  return v;
}

// Calls fn(T{}) for T the C++ type of an 8- or 16-bit integer quantized type.
template <typename Fn>
void dispatch_quant_int(const KernelContext& ctx, DataType t, const char* what, Fn&& fn) {
  switch (t) {
    case DataType::kUInt8:
      return fn(uint8_t{});
    case DataType::kInt8:
      return fn(int8_t{});
    case DataType::kUInt16:
      return fn(uint16_t{});
    case DataType::kInt16:
      return fn(int16_t{});
    default:
      ctx.fail(StatusCode::kInvalidArgument, std::string(what) + ": element type " + dtype_name(t) +
                                                 " is not a supported quantized type " +
                                                 "(uint8, int8, uint16, int16)");
  }
}

// Same for the float types a scale or a dequantized output may have.
template <typename Fn>
void dispatch_float3(const KernelContext& ctx, DataType t, const char* what, Fn&& fn) {
  switch (t) {
    case DataType::kFloat:
      return fn(float{});
    case DataType::kFloat16:
      return fn(Float16{});
    case DataType::kBFloat16:
      return fn(BFloat16{});
    default:
      ctx.fail(StatusCode::kInvalidArgument, std::string(what) + ": element type " + dtype_name(t) +
                                                 " is not supported (float, float16, bfloat16)");
  }
}

template <typename T>
inline T from_float(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return T(v);
  }
}

}  // namespace quant
}  // namespace ortlite
