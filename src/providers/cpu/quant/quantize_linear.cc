// QuantizeLinear and DequantizeLinear (opsets 10, 13, 19, 21, 23, 24, 25) with per-tensor,
// per-axis and blocked scales; DynamicQuantizeLinear (11).
//
// Quantized types: uint8, int8, uint16, int16 (and int32 as a DequantizeLinear input), the
// narrow ints int4, uint4, int2, uint2 (saturated like the others) and the narrow floats
// float8e4m3fn, float8e4m3fnuz, float8e5m2, float8e5m2fnuz and float4e2m1 (the quotient
// rounded to the nearest value, ties to even; 'saturate' chooses between the largest finite
// value and NaN / infinity for out-of-range float8 results). A float8e8m0 scale (24+) is
// read as the power of two it holds.
//
// QuantizeLinear divides in the precision the spec names (attribute 'precision', else the
// scale's type): float16 / bfloat16 round both operands and the quotient to that type, an
// int32 scale divides in double, a float8e8m0 one in float. DequantizeLinear multiplies in
// float and rounds once to the output type, like onnxruntime.
#include "compute/vectorize.h"  // first: compile options for the loops below

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "compute/cpu_avx512.h"
#include "compute/int8_gemm.h"
#include "providers/cpu/quant/quant_common.h"

namespace ortlite {
namespace quant {
namespace {

enum class Prec { kFloat, kHalf, kBf16, kDouble };

bool prec_of(DataType t, Prec* p) {
  switch (t) {
    case DataType::kFloat:
      *p = Prec::kFloat;
      return true;
    case DataType::kFloat16:
      *p = Prec::kHalf;
      return true;
    case DataType::kBFloat16:
      *p = Prec::kBf16;
      return true;
    case DataType::kFloat8E8M0:
      *p = Prec::kFloat;
      return true;
    case DataType::kInt32:
    case DataType::kDouble:
      *p = Prec::kDouble;
      return true;
    default:
      return false;
  }
}

inline float round_to(Prec p, float v) {
  if (p == Prec::kHalf) return Float16::to_float(Float16::from_float(v));
  if (p == Prec::kBf16) return static_cast<float>(BFloat16(v));
  return v;
}

// The quotients x[k] / s[k * step] in precision p, handed to store(k, quotient, k * step).
// Scales arrive already rounded to p.
template <typename X, typename Store>
void quantize_run(const X* x, int64_t count, const double* s, int64_t step, Prec p, Store&& store) {
  switch (p) {
    case Prec::kDouble:
      for (int64_t k = 0; k < count; ++k) store(k, to_double(x[k]) / s[k * step], k * step);
      return;
    case Prec::kFloat:
      for (int64_t k = 0; k < count; ++k)
        store(k, to_float(x[k]) / static_cast<float>(s[k * step]), k * step);
      return;
    default:
      for (int64_t k = 0; k < count; ++k) {
        const float q = round_to(p, round_to(p, to_float(x[k])) / static_cast<float>(s[k * step]));
        store(k, q, k * step);
      }
      return;
  }
}

// float x, float division, 8- or 16-bit integer output: the quotient clamped to the range
// less the zero point (NaN to the low end), rounded half to even in float (below 2^22 adding
// and taking off 1.5 * 2^23 does it), plus the zero point. The same values round_saturate
// gives, without a conversion to double per element. Compiled for AVX-512, AVX2 and the
// baseline (the same operations in each, so the same results), picked at load time: the
// baseline's 4-lane loop was 2.5x onnxruntime's time.
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && defined(__linux__)
#define ORTLITE_QUANT_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ORTLITE_QUANT_CLONES
#endif
// The per-tensor 8-bit case 16 lanes at a time with AVX-512 (GCC's AVX-512 clone above uses
// 8-lane vectors, and the division bounds the loop): the same operations in the same order,
// so the same results. Returns how many elements it did; the caller does the rest.
#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
#pragma GCC diagnostic push
// GCC 12's AVX-512 headers start some intrinsics from an undefined vector.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
template <typename Q>
ORTLITE_AVX512 int64_t quantize_f32_u8_avx512(const float* x, Q* y, int64_t count, float sv,
                                              float zv, float lo, float hi) {
  const __m512 vs = _mm512_set1_ps(sv), vz = _mm512_set1_ps(zv);
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  const __m512 magic = _mm512_set1_ps(12582912.0f);
  int64_t k = 0;
  for (; k + 16 <= count; k += 16) {
    const __m512 q = _mm512_div_ps(_mm512_loadu_ps(x + k), vs);
    const __m512 c = _mm512_min_ps(vhi, _mm512_max_ps(q, vlo));  // NaN: lo
    const __m512 r = _mm512_add_ps(_mm512_sub_ps(_mm512_add_ps(c, magic), magic), vz);
    const __m512i i = _mm512_maskz_cvttps_epi32(0xFFFF, r);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + k), _mm512_maskz_cvtepi32_epi8(0xFFFF, i));
  }
  return k;
}
#pragma GCC diagnostic pop
#endif

template <typename Q>
ORTLITE_QUANT_CLONES void quantize_f32(const float* x, Q* y, int64_t count, const double* s,
                                       const double* z, int64_t step, QRange r) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  if (step == 0) {
    const float sv = static_cast<float>(s[0]), zv = static_cast<float>(z[0]);
    const float lo = static_cast<float>(r.lo) - zv, hi = static_cast<float>(r.hi) - zv;
    int64_t k = 0;
#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
    if constexpr (sizeof(Q) == 1) {
      if (cpu_has_avx512()) k = quantize_f32_u8_avx512(x, y, count, sv, zv, lo, hi);
    }
#endif
    for (; k < count; ++k) {
      const float q = x[k] / sv;
      const float c = std::min(std::max(lo, q), hi);  // NaN: lo
      y[k] = static_cast<Q>(static_cast<int32_t>(((c + kMagic) - kMagic) + zv));
    }
    return;
  }
  for (int64_t k = 0; k < count; ++k) {
    const float zv = static_cast<float>(z[k]);
    const float lo = static_cast<float>(r.lo) - zv, hi = static_cast<float>(r.hi) - zv;
    const float q = x[k] / static_cast<float>(s[k]);
    const float c = q >= lo ? (q <= hi ? q : hi) : lo;
    y[k] = static_cast<Q>(static_cast<int32_t>(((c + kMagic) - kMagic) + zv));
  }
}

[[noreturn]] void type_attr_error(const KernelInfo& info, const char* attr, int64_t code,
                                  const char* allowed) {
  info.fail(StatusCode::kInvalidGraph,
            std::string("attribute '") + attr + "' = " + std::to_string(code) + " (" +
                onnx_type_label(code) + ") is not supported; expected one of " + allowed);
}

constexpr const char* kQuantTypes =
    "uint8, int8, uint16, int16, int4, uint4, int2, uint2, float8e4m3fn, float8e4m3fnuz, "
    "float8e5m2, float8e5m2fnuz, float4e2m1";

class QuantizeLinear final : public Kernel {
 public:
  explicit QuantizeLinear(const KernelInfo& info)
      : axis_(info.attr_int("axis", 1)), block_size_(info.attr_int("block_size", 0)) {
    if (block_size_ < 0) {
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'block_size' must be >= 0, got " + std::to_string(block_size_));
    }
    const int64_t od = info.attr_int("output_dtype", 0);
    if (od != 0) {
      if (od < 0 || od > kMaxDataType || !is_quant_output_type(static_cast<DataType>(od))) {
        type_attr_error(info, "output_dtype", od, kQuantTypes);
      }
      out_dtype_ = static_cast<DataType>(od);
    }
    const int64_t prec = info.attr_int("precision", 0);
    if (prec != 0) {
      if (prec < 0 || prec > kMaxDataType || prec == static_cast<int64_t>(DataType::kDouble) ||
          prec == static_cast<int64_t>(DataType::kFloat8E8M0) ||
          !prec_of(static_cast<DataType>(prec), &prec_)) {
        type_attr_error(info, "precision", prec, "float, float16, bfloat16, int32");
      }
      has_prec_ = true;
    }
    saturate_ = info.attr_int("saturate", 1) != 0;
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& scale = ctx.required_input(1);
    const Tensor* zp = ctx.input(2);
    const DataType xt = x.dtype(), st = scale.dtype();
    Prec scale_prec;
    if ((!dtype_is_float(xt) && xt != DataType::kInt32) || xt == DataType::kDouble) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input 'x' must be float, float16, bfloat16 or int32, got ") +
                   dtype_name(xt));
    }
    if (!prec_of(st, &scale_prec) || st == DataType::kDouble) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input 'y_scale' must be float, float16, bfloat16, int32 or ") +
                   "float8e8m0, got " + dtype_name(st));
    }
    DataType qt = out_dtype_ != DataType::kUndefined ? out_dtype_ : DataType::kUInt8;
    if (zp) {
      if (!is_quant_output_type(zp->dtype())) {
        ctx.fail(StatusCode::kInvalidArgument, std::string("input 'y_zero_point' must be one of ") +
                                                   kQuantTypes + ", got " +
                                                   dtype_name(zp->dtype()));
      }
      if (out_dtype_ != DataType::kUndefined && out_dtype_ != zp->dtype()) {
        ctx.fail(StatusCode::kInvalidArgument,
                 std::string("attribute 'output_dtype' (") + dtype_name(out_dtype_) +
                     ") differs from the type of 'y_zero_point' (" + dtype_name(zp->dtype()) + ")");
      }
      qt = zp->dtype();
    }
    const QdqLayout l =
        qdq_layout(ctx, x.shape(), scale, zp, axis_, block_size_, "y_scale", "y_zero_point");
    const Prec p = has_prec_ ? prec_ : scale_prec;
    std::vector<double> s = param_values(scale, "QuantizeLinear");
    for (double& v : s) {
      if (p != Prec::kDouble) v = static_cast<double>(round_to(p, static_cast<float>(v)));
    }
    std::vector<double> z = zp ? param_values(*zp, "QuantizeLinear") : std::vector<double>();
    z.resize(s.size(), 0.0);
    Tensor& y = ctx.allocate_output(0, qt, x.shape());
    const bool saturate = saturate_;
    auto run_x = [&](auto xtag) {
      using X = decltype(xtag);
      const X* xd = x.data<X>();
      // store(i, quotient, zero point) writes element i of y.
      auto go = [&](auto&& store) {
        for_each_run(l, x.numel(), ctx.thread_pool(), 4.0,
                     [&](int64_t b, int64_t n, int64_t pi, int64_t step) {
                       quantize_run<X>(xd + b, n, s.data() + pi, step, p,
                                       [&](int64_t k, double q, int64_t pk) {
                                         store(b + k, q, z[static_cast<size_t>(pi + pk)]);
                                       });
                     });
      };
      if (dtype_is_narrow_float(qt)) {
        uint8_t* yd = y.data<uint8_t>();
        return go([&](int64_t i, double q, double zv) {
          yd[i] = narrow_float_from_double(qt, q + zv, saturate);
        });
      }
      const QRange r = quant_range(qt);
      if (dtype_is_narrow_int(qt)) {
        uint8_t* yd = y.data<uint8_t>();
        return go([&](int64_t i, double q, double zv) {
          const double v = round_saturate(q, zv, r);
          yd[i] = narrow_int_from_bits(qt, static_cast<uint64_t>(static_cast<int64_t>(v)));
        });
      }
      dispatch_quant_int(ctx, qt, "QuantizeLinear output", [&](auto qtag) {
        using Q = decltype(qtag);
        Q* yd = y.data<Q>();
        if constexpr (std::is_same_v<X, float>) {
          if (p == Prec::kFloat) {
            // The common case, in a loop the compiler vectorizes.
            for_each_run(l, x.numel(), ctx.thread_pool(), 1.0,
                         [&](int64_t b, int64_t n, int64_t pi, int64_t step) {
                           quantize_f32<Q>(xd + b, yd + b, n, s.data() + pi, z.data() + pi, step,
                                           r);
                         });
            return;
          }
        }
        go([&](int64_t i, double q, double zv) {
          yd[i] = static_cast<Q>(round_saturate(q, zv, r));
        });
      });
    };
    switch (xt) {
      case DataType::kFloat:
        return run_x(float{});
      case DataType::kFloat16:
        return run_x(Float16{});
      case DataType::kBFloat16:
        return run_x(BFloat16{});
      default:
        return run_x(int32_t{});
    }
  }

 private:
  int64_t axis_, block_size_;
  DataType out_dtype_ = DataType::kUndefined;
  Prec prec_ = Prec::kFloat;
  bool has_prec_ = false;
  bool saturate_ = true;
};

// Float output from 8-, 16- and 32-bit integers: y[k] = float(x[k] - z) * s with the
// difference in int32 (8- and 16-bit differences fit; an int32 input has no zero point),
// per tensor (step 0) or with a scale and zero point per element (step 1). Compiled for
// AVX-512, AVX2 and the baseline: the int64 difference of the general loop below kept it
// scalar (a block-quantized weight at 0.4 of onnxruntime's speed).
template <typename X>
ORTLITE_QUANT_CLONES void dequantize_f32(const X* x, float* y, int64_t count, const float* s,
                                         const int32_t* z, int64_t step) {
  if (step == 0) {
    const int32_t zv = z[0];
    const float sv = s[0];
    for (int64_t k = 0; k < count; ++k)
      y[k] = static_cast<float>(static_cast<int32_t>(x[k]) - zv) * sv;
    return;
  }
  for (int64_t k = 0; k < count; ++k)
    y[k] = static_cast<float>(static_cast<int32_t>(x[k]) - z[k]) * s[k];
}

// y[k] = (x(k) - z) * s in float, rounded once to O; x(k) is element k as an integer.
template <typename O, typename Get>
void dequantize_run(Get&& x, O* y, int64_t count, const float* s, const int64_t* z, int64_t step) {
  for (int64_t k = 0; k < count; ++k) {
    const float d = static_cast<float>(x(k) - z[k * step]);
    y[k] = from_float<O>(d * s[k * step]);
  }
}

class DequantizeLinear final : public Kernel {
 public:
  explicit DequantizeLinear(const KernelInfo& info)
      : axis_(info.attr_int("axis", 1)), block_size_(info.attr_int("block_size", 0)) {
    if (block_size_ < 0) {
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'block_size' must be >= 0, got " + std::to_string(block_size_));
    }
    const int64_t od = info.attr_int("output_dtype", 0);
    if (od != 0) {
      const DataType t = static_cast<DataType>(od);
      if (t != DataType::kFloat && t != DataType::kFloat16 && t != DataType::kBFloat16) {
        type_attr_error(info, "output_dtype", od, "float, float16, bfloat16");
      }
      out_dtype_ = t;
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& scale = ctx.required_input(1);
    const Tensor* zp = ctx.input(2);
    const DataType xt = x.dtype(), st = scale.dtype();
    const bool narrow_float = dtype_is_narrow_float(xt);
    if (!is_quant_output_type(xt) && xt != DataType::kInt32) {
      ctx.fail(StatusCode::kInvalidArgument, std::string("input 'x' must be int32 or one of ") +
                                                 kQuantTypes + ", got " + dtype_name(xt));
    }
    if (zp && zp->dtype() != xt) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input 'x_zero_point' must have the type of 'x' (") + dtype_name(xt) +
                   "), got " + dtype_name(zp->dtype()));
    }
    if (st != DataType::kFloat && st != DataType::kFloat16 && st != DataType::kBFloat16 &&
        st != DataType::kFloat8E8M0) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input 'x_scale' must be float, float16, bfloat16 or float8e8m0, got ") +
                   dtype_name(st));
    }
    if (out_dtype_ == DataType::kUndefined && st == DataType::kFloat8E8M0) {
      ctx.fail(StatusCode::kInvalidArgument,
               "a float8e8m0 'x_scale' needs attribute 'output_dtype' (float, float16 or "
               "bfloat16)");
    }
    const DataType ot = out_dtype_ != DataType::kUndefined ? out_dtype_ : st;
    const QdqLayout l =
        qdq_layout(ctx, x.shape(), scale, zp, axis_, block_size_, "x_scale", "x_zero_point");
    const std::vector<double> sd = param_values(scale, "DequantizeLinear");
    const std::vector<float> s(sd.begin(), sd.end());
    std::vector<int64_t> z(s.size(), 0);
    if (zp) {
      const std::vector<double> zd = param_values(*zp, "DequantizeLinear");
      const bool nonzero = std::any_of(zd.begin(), zd.end(), [](double v) { return v != 0; });
      if (nonzero && (xt == DataType::kInt32 || narrow_float)) {
        ctx.fail(StatusCode::kInvalidArgument,
                 std::string("an ") + dtype_name(xt) +
                     " 'x' is dequantized without a zero point: 'x_zero_point' must be 0");
      }
      if (!narrow_float)
        for (size_t i = 0; i < zd.size(); ++i) z[i] = static_cast<int64_t>(zd[i]);
    }
    const std::vector<int32_t> z32(z.begin(), z.end());  // 8- / 16-bit values, or 0
    Tensor& y = ctx.allocate_output(0, ot, x.shape());
    dispatch_float3(ctx, ot, "DequantizeLinear output", [&](auto otag) {
      using O = decltype(otag);
      O* yd = y.data<O>();
      auto go = [&](auto&& run) {
        for_each_run(l, x.numel(), ctx.thread_pool(), 2.0,
                     [&](int64_t b, int64_t n, int64_t pi, int64_t step) {
                       run(b, yd + b, n, s.data() + pi, z.data() + pi, step);
                     });
      };
      if (narrow_float) {
        const float* table = narrow_float_values(xt);
        const uint8_t* xd = x.data<uint8_t>();
        return go([&](int64_t b, O* yo, int64_t n, const float* sp, const int64_t*, int64_t st2) {
          for (int64_t k = 0; k < n; ++k) yo[k] = from_float<O>(table[xd[b + k]] * sp[k * st2]);
        });
      }
      if (dtype_is_narrow_int(xt)) {
        const int8_t* table = narrow_int_values(xt);
        const uint8_t* xd = x.data<uint8_t>();
        return go(
            [&](int64_t b, O* yo, int64_t n, const float* sp, const int64_t* zp2, int64_t st2) {
              dequantize_run<O>([&](int64_t k) { return int64_t{table[xd[b + k]]}; }, yo, n, sp,
                                zp2, st2);
            });
      }
      auto typed = [&](auto xtag) {
        using X = decltype(xtag);
        const X* xd = x.data<X>();
        // 8- and 16-bit differences fit int32, which keeps the loop vectorizable.
        using W = std::conditional_t<(sizeof(X) < 4), int32_t, int64_t>;
        go([&](int64_t b, O* yo, int64_t n, const float* sp, const int64_t* zp2, int64_t st2) {
          const X* xs = xd + b;
          if constexpr (std::is_same_v<O, float>) {
            if (st2 <= 1)
              return dequantize_f32<X>(xs, yo, n, sp, z32.data() + (zp2 - z.data()), st2);
          }
          if (st2 == 0) {
            const W zv = static_cast<W>(zp2[0]);
            const float sv = sp[0];
            for (int64_t k = 0; k < n; ++k)
              yo[k] = from_float<O>(static_cast<float>(static_cast<W>(xs[k]) - zv) * sv);
            return;
          }
          dequantize_run<O>([&](int64_t k) { return static_cast<int64_t>(xs[k]); }, yo, n, sp, zp2,
                            st2);
        });
      };
      switch (xt) {
        case DataType::kUInt8:
          return typed(uint8_t{});
        case DataType::kInt8:
          return typed(int8_t{});
        case DataType::kUInt16:
          return typed(uint16_t{});
        case DataType::kInt16:
          return typed(int16_t{});
        default:
          return typed(int32_t{});
      }
    });
  }

 private:
  int64_t axis_, block_size_;
  DataType out_dtype_ = DataType::kUndefined;
};

// DynamicQuantizeLinear: uint8 with scale = (max(0, max x) - min(0, min x)) / 255 and a
// zero point that maps 0 exactly. NaN elements are left out of the range (as onnxruntime's
// min / max search does) and quantize to 0.
class DynamicQuantizeLinear final : public Kernel {
 public:
  explicit DynamicQuantizeLinear(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    if (x.dtype() != DataType::kFloat) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input 'x' must be float, got ") + dtype_name(x.dtype()));
    }
    const float* xd = x.data<float>();
    const int64_t n = x.numel();
    float mn = 0.0f, mx = 0.0f;
    int8gemm::min_max(xd, n, &mn, &mx);
    const float scale = mx == mn ? 1.0f : (mx - mn) / 255.0f;
    const float initial_zp = 0.0f - mn / scale;
    // An infinite range gives a NaN zero point; it saturates like onnxruntime's clamp.
    const float clamped = std::isnan(initial_zp) ? 255.0f : std::clamp(initial_zp, 0.0f, 255.0f);
    const double zp = std::nearbyint(static_cast<double>(clamped));
    Tensor& y = ctx.allocate_output(0, DataType::kUInt8, x.shape());
    uint8_t* yd = y.data<uint8_t>();
    QdqLayout l;
    l.outer = n;
    const float zf = static_cast<float>(zp);
    for_each_run(l, n, ctx.thread_pool(), 1.0, [&](int64_t b, int64_t cnt, int64_t, int64_t) {
      int8gemm::quantize_u8(xd + b, cnt, scale, zf, yd + b);
    });
    ctx.allocate_output(1, DataType::kFloat, {}).data<float>()[0] = scale;
    ctx.allocate_output(2, DataType::kUInt8, {}).data<uint8_t>()[0] = static_cast<uint8_t>(zp);
  }
};

}  // namespace

void register_quantize_linear(KernelRegistry& r) {
  // 13 adds per-axis; 19 float16 / bfloat16 and float8; 21 blocked, int16 / uint16, 4-bit,
  // 'output_dtype' (QuantizeLinear); 23 'precision' and 'output_dtype' (DequantizeLinear);
  // 24 float8e8m0 scales; 25 2-bit types. One kernel reads the attributes of each.
  const std::vector<int> since = {10, 13, 19, 21, 23, 24, 25};
  r.add_versions("QuantizeLinear", since, make_factory<QuantizeLinear>());
  r.add_versions("DequantizeLinear", since, make_factory<DequantizeLinear>());
  r.add("", "DynamicQuantizeLinear", 11, kMaxOpset, make_factory<DynamicQuantizeLinear>());
  // com.microsoft's versions (quantize_static with UseQDQContribOps): the same operators,
  // axis and the 8-, 16- and 4-bit integer types included.
  r.add("com.microsoft", "QuantizeLinear", 1, kMaxOpset, make_factory<QuantizeLinear>());
  r.add("com.microsoft", "DequantizeLinear", 1, kMaxOpset, make_factory<DequantizeLinear>());
}

}  // namespace quant
}  // namespace ortlite
