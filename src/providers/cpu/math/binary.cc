// Broadcasting binary arithmetic: Add Sub Mul Div Pow Mod BitShift BitwiseAnd/Or/Xor.
//
// Integer semantics (all defined, never a trap): Add/Sub/Mul wrap around; Div truncates
// toward zero, x / 0 = 0 and INT_MIN / -1 = INT_MIN; Mod by 0 = 0; Pow with an integer
// exponent is exact (wrapping) and with a negative exponent gives 1 / x^n truncated
// (so 0 unless |x| == 1; 0 for x == 0); BitShift by >= the bit width gives 0.
#include "compute/vectorize.h"  // first: compile options for the loops below

#include <cmath>
#include <limits>
#include <type_traits>

#include "compute/cpu_avx512.h"
#include "providers/cpu/math/math_kernels.h"

namespace ortlite {
namespace {

using math::BinaryKernel;
using math::NoAttrs;

struct AddOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 1.0;
  template <typename C>
  C operator()(C a, C b) const {
    return ew::add(a, b);
  }
};

struct SubOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 1.0;
  template <typename C>
  C operator()(C a, C b) const {
    return ew::sub(a, b);
  }
};

struct MulOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 1.0;
  template <typename C>
  C operator()(C a, C b) const {
    return ew::mul(a, b);
  }
};

struct DivOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 2.0;
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (ew::is_int_v<C>) {
      return ew::int_div(a, b);
    } else {
      return a / b;
    }
  }
};

// ---- int32 Div ---------------------------------------------------------------------------

// int32 quotients through floating-point division: for |a| < 2^53 the correctly rounded
// quotient a / b never crosses an integer (a non-integer a / b lies at least 1 / |b| from
// one, the rounding error is below |a / b| 2^-53), so truncating it gives C's quotient. In
// float that holds when |a| and |b| are below 2^24 (16 lanes of vdivps), in double always.
// b == 0 gives 0; INT_MIN / -1 truncates 2^31, which the conversion turns into INT_MIN: the
// results of ew::int_div.
#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
#pragma GCC diagnostic push
// GCC 12's AVX-512 headers start some intrinsics from an undefined vector.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
ORTLITE_AVX512 inline void div_i32x16(__m512i a, __m512i b, int32_t* o) {
  const __mmask16 nz = _mm512_test_epi32_mask(b, b);
  const __m512i lim = _mm512_set1_epi32(1 << 24);
  const __mmask16 small = _mm512_cmplt_epu32_mask(_mm512_abs_epi32(a), lim) &
                          _mm512_cmplt_epu32_mask(_mm512_abs_epi32(b), lim);
  if (small == 0xFFFF) {
    const __m512 q = _mm512_div_ps(_mm512_cvtepi32_ps(a), _mm512_cvtepi32_ps(b));
    _mm512_storeu_si512(o, _mm512_maskz_cvttps_epi32(nz, q));
    return;
  }
  const __m512d qlo = _mm512_div_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(a)),
                                    _mm512_cvtepi32_pd(_mm512_castsi512_si256(b)));
  const __m512d qhi = _mm512_div_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(a, 1)),
                                    _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(b, 1)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(o),
                      _mm512_maskz_cvttpd_epi32(static_cast<__mmask8>(nz), qlo));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 8),
                      _mm512_maskz_cvttpd_epi32(static_cast<__mmask8>(nz >> 8), qhi));
}

// One span of an int32 Div (stride 0: a broadcast operand). Returns how many elements it
// did: all of them, unless both operands are broadcast (the caller's loop does those). The
// last n % 16 go through one more vector, from masked loads (lanes past the end divide by
// 0 and give 0) into a buffer: with the scalar divisions there, spans of a few elements (a
// [R, 1] by [R, 12] broadcast) ran at 0.6 of onnxruntime's speed.
ORTLITE_AVX512 int64_t div_i32_avx512(const int32_t* a, const int32_t* b, int32_t* o, int64_t sa,
                                      int64_t sb, int64_t n) {
  if (sa == 0 && sb == 0) return 0;
  int64_t i = 0;
  if (sa != 0 && sb != 0) {
    for (; i + 16 <= n; i += 16)
      div_i32x16(_mm512_loadu_si512(a + i), _mm512_loadu_si512(b + i), o + i);
  } else if (sa != 0) {
    const __m512i vb = _mm512_set1_epi32(b[0]);
    for (; i + 16 <= n; i += 16) div_i32x16(_mm512_loadu_si512(a + i), vb, o + i);
  } else {
    const __m512i va = _mm512_set1_epi32(a[0]);
    for (; i + 16 <= n; i += 16) div_i32x16(va, _mm512_loadu_si512(b + i), o + i);
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512i va = sa != 0 ? _mm512_maskz_loadu_epi32(m, a + i) : _mm512_set1_epi32(a[0]);
    const __m512i vb =
        sb != 0 ? _mm512_maskz_loadu_epi32(m, b + i) : _mm512_maskz_set1_epi32(m, b[0]);
    alignas(64) int32_t q[16];
    div_i32x16(va, vb, q);
    for (int64_t k = 0; i + k < n; ++k) o[i + k] = q[k];
    i = n;
  }
  return i;
}
#pragma GCC diagnostic pop
#endif

void div_i32_span(const int32_t* a, const int32_t* b, int32_t* o, int64_t sa, int64_t sb,
                  int64_t n) {
  int64_t i = 0;
#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
  if (cpu_has_avx512()) i = div_i32_avx512(a, b, o, sa, sb, n);
#endif
  for (; i < n; ++i) o[i] = ew::int_div(a[i * sa], b[i * sb]);
}

struct BitwiseAndOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 1.0;
  template <typename C>
  C operator()(C a, C b) const {
    return static_cast<C>(a & b);
  }
};

struct BitwiseOrOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 1.0;
  template <typename C>
  C operator()(C a, C b) const {
    return static_cast<C>(a | b);
  }
};

struct BitwiseXorOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 1.0;
  template <typename C>
  C operator()(C a, C b) const {
    return static_cast<C>(a ^ b);
  }
};

// Div: int32 through div_i32_span, every other type through BinaryKernel.
class DivKernel : public BinaryKernel<DivOp, ew::kTNumeric> {
 public:
  using BinaryKernel<DivOp, ew::kTNumeric>::BinaryKernel;
  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.required_input(0);
    const Tensor& b = ctx.required_input(1);
    if (a.dtype() != DataType::kInt32 || b.dtype() != DataType::kInt32)
      return BinaryKernel<DivOp, ew::kTNumeric>::compute(ctx);
    Shape out_storage;
    const Shape& out = ew::broadcast_ref(ctx, a.shape(), b.shape(), &out_storage);
    Tensor& y = ctx.allocate_output(0, DataType::kInt32, out);
    const ew::BroadcastPlan<2> plan = ew::make_broadcast_plan<2>(out, {&a.shape(), &b.shape()});
    if (plan.total == 0) return;
    const int32_t* pa = a.data<int32_t>();
    const int32_t* pb = b.data<int32_t>();
    int32_t* py = y.data<int32_t>();
    parallel_for(ctx.thread_pool(), plan.total, 2.0, [&](int64_t begin, int64_t end) {
      ew::for_each_span<2>(plan, begin, end,
                           [&](int64_t oo, const std::array<int64_t, 2>& io, int64_t len) {
                             div_i32_span(pa + io[0], pb + io[1], py + oo, plan.inner_stride[0],
                                          plan.inner_stride[1], len);
                           });
    });
  }
};

// ---- Pow --------------------------------------------------------------------------------

// x^e for an integer base and exponent, by squaring, wrapping on overflow.
template <typename T, typename E>
T int_pow(T x, E e) {
  if constexpr (std::is_signed_v<E>) {
    if (e < 0) {
      if (x == T{1}) return T{1};
      if constexpr (std::is_signed_v<T>) {
        if (x == T{-1}) return (e & 1) ? T{-1} : T{1};
      }
      return T{0};
    }
  }
  T result{1};
  T base = x;
  uint64_t n = static_cast<uint64_t>(e);
  while (n != 0) {
    if (n & 1u) result = ew::mul(result, base);
    n >>= 1;
    if (n != 0) base = ew::mul(base, base);
  }
  return result;
}

// Pow(X: T, Y: T1) -> T. T: float, double, float16, bfloat16, int32, int64 (opset 12+ also
// ints); T1: any numeric type (opset 12+), the same as T before.
class PowKernel : public Kernel {
 public:
  explicit PowKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& e = ctx.required_input(1);
    Shape out_storage;
    const Shape& out = ew::broadcast_ref(ctx, x.shape(), e.shape(), &out_storage);
    Tensor& y = ctx.allocate_output(0, x.dtype(), out);
    ThreadPool* pool = ctx.thread_pool();
    constexpr unsigned kBaseTypes = ew::kTFloats | ew::kTInt32 | ew::kTInt64;
    ew::dispatch<kBaseTypes>(x.dtype(), ctx, "Pow (base X)", [&](auto btag) {
      using TB = decltype(btag);
      ew::dispatch<ew::kTNumeric>(e.dtype(), ctx, "Pow (exponent Y)", [&](auto etag) {
        using TE = decltype(etag);
        const TB* px = x.data<TB>();
        TB* py = y.data<TB>();
        if constexpr (ew::is_float_v<TB>) {
          // A scalar exponent of 0.5, 1, 2, 3 or -1 (sqrt, copy, x*x, x*x*x, 1/x) is common:
          // skip pow(). The loops vectorize; results differ from pow() by at most an ulp
          // (x^3: two roundings), as in onnxruntime, which does the same.
          if (e.numel() == 1 && out == x.shape()) {
            const double ev = static_cast<double>(ew::load(*e.data<TE>()));
            const int64_t n = x.numel();
            if (ev == 2.0) {
              ew::run_unary(pool, px, py, n, 1.0, [](auto v) { return v * v; });
              return;
            }
            if (ev == 3.0) {
              ew::run_unary(pool, px, py, n, 1.0, [](auto v) { return v * v * v; });
              return;
            }
            if (ev == 1.0) {
              ew::run_unary(pool, px, py, n, 0.5, [](auto v) { return v; });
              return;
            }
            if (ev == -1.0) {
              ew::run_unary(pool, px, py, n, 2.0, [](auto v) { return decltype(v){1} / v; });
              return;
            }
            if (ev == 0.5) {
              if constexpr (std::is_same_v<TB, double>) {
                ew::run_unary(pool, px, py, n, 4.0, [](auto v) { return std::sqrt(v); });
              } else {  // float and the 16-bit floats: sqrtps, correctly rounded like sqrt()
                math::run_fast_unary(pool, fast::UnaryFn::kSqrt, px, py, n, 4.0);
              }
              return;
            }
          }
        }
        if constexpr (!ew::is_float_v<TB> && !ew::is_float_v<TE>) {
          // An integer base with a scalar integer exponent of 2 or 3 (squares in index
          // arithmetic): wrapping products, vectorized, instead of the exponent loop per
          // element (which wraps the same way).
          if (e.numel() == 1 && out == x.shape()) {
            const double ev = static_cast<double>(ew::load(*e.data<TE>()));
            const int64_t n = x.numel();
            if (ev == 2.0) {
              ew::run_unary(pool, px, py, n, 1.0, [](auto v) { return ew::mul(v, v); });
              return;
            }
            if (ev == 3.0) {
              ew::run_unary(pool, px, py, n, 1.0, [](auto v) { return ew::mul(ew::mul(v, v), v); });
              return;
            }
          }
        }
        const ew::BroadcastPlan<2> plan = ew::make_broadcast_plan<2>(out, {&x.shape(), &e.shape()});
        ew::run_binary(pool, plan, px, e.data<TE>(), py, 20.0, [](auto a, auto b) {
          using CB = decltype(a);
          using CE = decltype(b);
          if constexpr (ew::is_float_v<CB>) {
            if constexpr (ew::is_float_v<CE>) {
              using W = std::common_type_t<CB, CE>;
              return static_cast<CB>(std::pow(static_cast<W>(a), static_cast<W>(b)));
            } else {
              return static_cast<CB>(std::pow(static_cast<double>(a), static_cast<double>(b)));
            }
          } else if constexpr (ew::is_float_v<CE>) {
            return ew::saturate_cast_int<CB>(
                std::pow(static_cast<double>(a), static_cast<double>(b)));
          } else {
            return int_pow<CB, CE>(a, b);
          }
        });
      });
    });
  }
};

// ---- Mod --------------------------------------------------------------------------------

// Integer remainder with the sign of the divisor (Python's %); x % 0 = 0.
template <typename T>
T floor_mod(T a, T b) {
  if constexpr (std::is_signed_v<T>) {
    if (b == 0 || b == T{-1}) return T{0};
    T r = static_cast<T>(a % b);
    if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
    return r;
  } else {
    return b == 0 ? T{0} : static_cast<T>(a % b);
  }
}

// fmod for float, exact, computed in double. With q = a / b correctly rounded, |q| < 2^29
// means the true quotient is below 2^29 too, and then trunc(q) is the true quotient's
// integer part (a / b = 2^k A / B with 24-bit integers A, B: a non-integer one lies at least
// 2^min(k, 0) / B from an integer, more than the rounding error |a / b| 2^-53 while
// |a / b| < 2^29); the product
// trunc(q) b is exact (29 + 24 bits) and so is a - trunc(q) b, the float remainder. Other
// inputs (b == 0, infinities, NaN, larger quotients) give NaN here and go through
// std::fmod afterwards (fmod_f32_fix).
inline float fmod_f32_fast(float a, float b) {
  const double ad = a, bd = b;
  const double q = ad / bd;
  const double t = std::trunc(q);
  const double r = ad - t * bd;
  const float rf = std::copysign(static_cast<float>(r), a);  // a zero remainder keeps a's sign
  return std::fabs(q) < 536870912.0 ? rf : std::numeric_limits<float>::quiet_NaN();
}
void fmod_f32_fix(const float* a, const float* b, float* o, int64_t sa, int64_t sb, int64_t n) {
  int64_t nan = 0;
  for (int64_t i = 0; i < n; ++i) nan += o[i] != o[i] ? 1 : 0;
  if (nan == 0) return;
  for (int64_t i = 0; i < n; ++i) {
    if (o[i] != o[i]) o[i] = std::fmod(a[i * sa], b[i * sb]);
  }
}

class ModKernel : public Kernel {
 public:
  explicit ModKernel(const KernelInfo& info) : fmod_(info.attr_int("fmod", 0)) {
    if (fmod_ != 0 && fmod_ != 1)
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'fmod' must be 0 or 1, got " + std::to_string(fmod_));
  }
  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.required_input(0);
    const Tensor& b = ctx.required_input(1);
    ew::check_same_type(ctx, a, b);
    Shape out_storage;
    const Shape& out = ew::broadcast_ref(ctx, a.shape(), b.shape(), &out_storage);
    Tensor& y = ctx.allocate_output(0, a.dtype(), out);
    const ew::BroadcastPlan<2> plan = ew::make_broadcast_plan<2>(out, {&a.shape(), &b.shape()});
    ThreadPool* pool = ctx.thread_pool();
    ew::dispatch<ew::kTNumeric>(a.dtype(), ctx, "Mod", [&](auto tag) {
      using T = decltype(tag);
      const T* pa = a.data<T>();
      const T* pb = b.data<T>();
      T* py = y.data<T>();
      if constexpr (ew::is_float_v<T>) {
        if (fmod_ == 0)
          ctx.fail(StatusCode::kInvalidArgument,
                   std::string("attribute 'fmod' must be 1 for floating point type ") +
                       dtype_name(a.dtype()));
        if constexpr (std::is_same_v<T, float>) {
          if (plan.total == 0) return;
          parallel_for(pool, plan.total, 4.0, [&](int64_t begin, int64_t end) {
            ew::for_each_span<2>(
                plan, begin, end, [&](int64_t oo, const std::array<int64_t, 2>& io, int64_t len) {
                  const int64_t sa = plan.inner_stride[0], sb = plan.inner_stride[1];
                  ew::binary_span(pa + io[0], pb + io[1], py + oo, sa, sb, len,
                                  [](float u, float v) { return fmod_f32_fast(u, v); });
                  fmod_f32_fix(pa + io[0], pb + io[1], py + oo, sa, sb, len);
                });
          });
          return;
        }
        ew::run_binary(pool, plan, pa, pb, py, 10.0,
                       [](auto u, auto v) { return std::fmod(u, v); });
      } else {
        if (fmod_ == 1) {
          ew::run_binary(pool, plan, pa, pb, py, 2.0, [](T u, T v) { return ew::int_rem(u, v); });
        } else {
          ew::run_binary(pool, plan, pa, pb, py, 2.0, [](T u, T v) { return floor_mod(u, v); });
        }
      }
    });
  }

 private:
  int64_t fmod_;
};

// ---- BitShift ---------------------------------------------------------------------------

class BitShiftKernel : public Kernel {
 public:
  explicit BitShiftKernel(const KernelInfo& info) {
    const std::string dir = info.attr_string("direction", "");
    if (dir == "LEFT") {
      left_ = true;
    } else if (dir == "RIGHT") {
      left_ = false;
    } else {
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'direction' must be \"LEFT\" or \"RIGHT\", got \"" + dir + "\"");
    }
  }
  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.required_input(0);
    const Tensor& b = ctx.required_input(1);
    ew::check_same_type(ctx, a, b, "X", "Y");
    Shape out_storage;
    const Shape& out = ew::broadcast_ref(ctx, a.shape(), b.shape(), &out_storage);
    Tensor& y = ctx.allocate_output(0, a.dtype(), out);
    const ew::BroadcastPlan<2> plan = ew::make_broadcast_plan<2>(out, {&a.shape(), &b.shape()});
    ew::dispatch<ew::kTUnsigned>(a.dtype(), ctx, "BitShift", [&](auto tag) {
      using T = decltype(tag);
      using U = ew::wide_unsigned_t<T>;
      constexpr T kBits = static_cast<T>(sizeof(T) * 8);
      if (left_) {
        ew::run_binary(ctx.thread_pool(), plan, a.data<T>(), b.data<T>(), y.data<T>(), 1.0,
                       [](T u, T v) { return v >= kBits ? T{0} : static_cast<T>(U{u} << v); });
      } else {
        ew::run_binary(ctx.thread_pool(), plan, a.data<T>(), b.data<T>(), y.data<T>(), 1.0,
                       [](T u, T v) { return v >= kBits ? T{0} : static_cast<T>(U{u} >> v); });
      }
    });
  }

 private:
  bool left_ = true;
};

}  // namespace

void register_binary_kernels(KernelRegistry& r) {
  constexpr unsigned kArith = ew::kTNumeric;
  r.add_versions("Add", {7, 13, 14}, make_factory<BinaryKernel<AddOp, kArith>>());
  r.add_versions("Sub", {7, 13, 14}, make_factory<BinaryKernel<SubOp, kArith>>());
  r.add_versions("Mul", {7, 13, 14}, make_factory<BinaryKernel<MulOp, kArith>>());
  r.add_versions("Div", {7, 13, 14}, make_factory<DivKernel>());
  r.add_versions("Pow", {7, 12, 13, 15}, make_factory<PowKernel>());
  r.add_versions("Mod", {10, 13}, make_factory<ModKernel>());
  r.add_versions("BitShift", {11}, make_factory<BitShiftKernel>());
  r.add_versions("BitwiseAnd", {18}, make_factory<BinaryKernel<BitwiseAndOp, ew::kTInts>>());
  r.add_versions("BitwiseOr", {18}, make_factory<BinaryKernel<BitwiseOrOp, ew::kTInts>>());
  r.add_versions("BitwiseXor", {18}, make_factory<BinaryKernel<BitwiseXorOp, ew::kTInts>>());
}

}  // namespace ortlite
