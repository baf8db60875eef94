// Unary math: Neg Abs Sqrt Exp Log Reciprocal Floor Ceil Round Sign Erf, the
// trigonometric and hyperbolic functions, Tanh, IsNaN IsInf, BitwiseNot and Not.
// float16 / bfloat16 compute in float.
#include "compute/vectorize.h"  // first: compile options for the loops below
// No FMA contraction (GCC contracts a * b + c by default in C++, even with -std=c++17): the
// AVX-512, AVX2 and baseline versions of map_fast then give the same bits for the Sin / Cos
// and double Tanh polynomials. Before every include, like vectorize.h's options.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <cmath>
#include <cstring>
#include <type_traits>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#include "compute/fast_math.h"
#include "providers/cpu/math/math_kernels.h"

namespace ortlite {
namespace {

using math::NoAttrs;
using math::UnaryKernel;

struct NegOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 1.0;
  template <typename C>
  C operator()(C x) const {
    return ew::neg(x);
  }
  // The map loops (AVX-512 / AVX2 clones) for float, double and the integers.
  template <typename C>
  C fast(C x) const {
    return ew::neg(x);
  }
  // float16: the sign bit flipped, as IEEE negation (NaN payloads kept).
  uint16_t fast_half(uint16_t h) const { return static_cast<uint16_t>(h ^ 0x8000u); }
};

struct AbsOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 1.0;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) {
      return std::fabs(x);
    } else if constexpr (std::is_signed_v<C>) {
      return x < 0 ? ew::neg(x) : x;
    } else {
      return x;
    }
  }
  template <typename C>
  C fast(C x) const {
    return (*this)(x);
  }
  // float16: the sign bit cleared, as IEEE abs (NaN payloads kept).
  uint16_t fast_half(uint16_t h) const { return static_cast<uint16_t>(h & 0x7fffu); }
};

struct SignOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 1.0;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) {
      return x > 0 ? C{1} : (x < 0 ? C{-1} : (x == 0 ? C{0} : x));  // NaN stays NaN
    } else if constexpr (std::is_signed_v<C>) {
      return x > 0 ? C{1} : (x < 0 ? C{-1} : C{0});
    } else {
      return x > 0 ? C{1} : C{0};
    }
  }
};

struct BitwiseNotOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 1.0;
  template <typename C>
  C operator()(C x) const {
    return static_cast<C>(~x);
  }
};

struct NotOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 1.0;
  bool operator()(bool x) const { return !x; }
};

// Not over bool bytes (0 or 1) as x ^ 1 on restrict-qualified bytes, which vectorizes (the
// generic loop over bool did not).
class NotKernel final : public Kernel {
 public:
  explicit NotKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    if (x.dtype() != DataType::kBool)
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("Not takes tensor(bool), got tensor(") + dtype_name(x.dtype()) + ")");
    Tensor& y = ctx.allocate_output(0, DataType::kBool, x.shape());
    const uint8_t* xp = static_cast<const uint8_t*>(x.raw_data());
    uint8_t* yp = static_cast<uint8_t*>(y.raw_data());
    parallel_for(ctx.thread_pool(), x.numel(), 0.25, [xp, yp](int64_t b, int64_t e) {
      const uint8_t* __restrict xs = xp + b;
      uint8_t* __restrict ys = yp + b;
      for (int64_t i = 0; i < e - b; ++i) ys[i] = static_cast<uint8_t>(xs[i] ^ 1u);
    });
  }
};

// y = sqrt(x) over double with sqrtpd: 8 at a time with AVX-512, else 2 at a time (SSE2).
#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("avx512f"))) void sqrt_f64_avx512(const double* x, double* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm512_storeu_pd(y + i, _mm512_maskz_sqrt_pd(0xFF, _mm512_loadu_pd(x + i)));
  for (; i < n; ++i) y[i] = std::sqrt(x[i]);
}
void sqrt_f64(const double* x, double* y, int64_t n) {
  static const bool avx512 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  if (avx512) return sqrt_f64_avx512(x, y, n);
  int64_t i = 0;
  for (; i + 2 <= n; i += 2) _mm_storeu_pd(y + i, _mm_sqrt_pd(_mm_loadu_pd(x + i)));
  for (; i < n; ++i) y[i] = std::sqrt(x[i]);
}
#else
void sqrt_f64(const double* x, double* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::sqrt(x[i]);
}
#endif

}  // namespace

namespace math {
// Sigmoid over double (activations.cc's SigmoidOp), here for this file's compile options: no
// FMA contraction, so every instruction set's loop gives the same bits.
namespace {
struct SigmoidF64 {
  double fast(double x) const { return fast::sigmoid_f64(x); }
};
}  // namespace
void sigmoid_f64_block(const double* x, double* y, int64_t n) {
  map_fast(SigmoidF64{}, x, y, n);
}
}  // namespace math

namespace {

// Float functions: one std:: call per element.
#define ORTLITE_FLOAT_UNARY(NAME, COST, EXPR) \
  struct NAME : NoAttrs {                     \
    using NoAttrs::NoAttrs;                   \
    static constexpr double kCost = COST;     \
    template <typename C>                     \
    C operator()(C x) const {                 \
      return EXPR;                            \
    }                                         \
  };

ORTLITE_FLOAT_UNARY(SqrtOp, 4.0, std::sqrt(x))
ORTLITE_FLOAT_UNARY(ExpOp, 10.0, std::exp(x))
ORTLITE_FLOAT_UNARY(LogOp, 10.0, std::log(x))
ORTLITE_FLOAT_UNARY(ReciprocalOp, 2.0, C{1} / x)
// 1 / x through the map loops (divps / divpd in the AVX-512 and AVX2 clones; the 16-bit
// floats through float blocks).
struct FastReciprocalOp : ReciprocalOp {
  using ReciprocalOp::ReciprocalOp;
  template <typename C>
  C fast(C x) const {
    return C{1} / x;
  }
};
ORTLITE_FLOAT_UNARY(FloorOp, 1.0, std::floor(x))
ORTLITE_FLOAT_UNARY(CeilOp, 1.0, std::ceil(x))
ORTLITE_FLOAT_UNARY(RoundOp, 1.0, std::nearbyint(x))  // halves to even
ORTLITE_FLOAT_UNARY(ErfOp, 10.0, std::erf(x))
ORTLITE_FLOAT_UNARY(TanOp, 10.0, std::tan(x))
ORTLITE_FLOAT_UNARY(AsinOp, 10.0, std::asin(x))
ORTLITE_FLOAT_UNARY(AcosOp, 10.0, std::acos(x))
ORTLITE_FLOAT_UNARY(AtanOp, 10.0, std::atan(x))
ORTLITE_FLOAT_UNARY(SinhOp, 10.0, std::sinh(x))
ORTLITE_FLOAT_UNARY(CoshOp, 10.0, std::cosh(x))
ORTLITE_FLOAT_UNARY(AsinhOp, 10.0, std::asinh(x))
ORTLITE_FLOAT_UNARY(AcoshOp, 10.0, std::acosh(x))
ORTLITE_FLOAT_UNARY(AtanhOp, 10.0, std::atanh(x))
ORTLITE_FLOAT_UNARY(TanhOp, 10.0, std::tanh(x))
#undef ORTLITE_FLOAT_UNARY

// float, float16 and bfloat16 use the vectorized loops of fast_kernels.h.
struct FastExpOp : ExpOp {
  using ExpOp::ExpOp;
  static constexpr fast::UnaryFn kFast = fast::UnaryFn::kExp;
  double fast(double x) const { return fast::exp_f64(x); }
};
struct FastLogOp : LogOp {
  using LogOp::LogOp;
  static constexpr fast::UnaryFn kFast = fast::UnaryFn::kLog;
};
struct FastErfOp : ErfOp {
  using ErfOp::ErfOp;
  static constexpr fast::UnaryFn kFast = fast::UnaryFn::kErf;
};
struct FastSqrtOp : SqrtOp {
  using SqrtOp::SqrtOp;
  static constexpr fast::UnaryFn kFast = fast::UnaryFn::kSqrt;
  // double: sqrtpd, correctly rounded like std::sqrt (which stays a scalar call under
  // -fmath-errno).
  void block(const double* x, double* y, int64_t n) const { sqrt_f64(x, y, n); }
};
// Rounding to integers: the AVX-512 / AVX2 clones of map_fast inline these as vrndscaleps /
// vrndscalepd / vroundps (the baseline calls libm).
struct FastFloorOp : FloorOp {
  using FloorOp::FloorOp;
  template <typename C>
  C fast(C x) const {
    return std::floor(x);
  }
};
struct FastCeilOp : CeilOp {
  using CeilOp::CeilOp;
  template <typename C>
  C fast(C x) const {
    return std::ceil(x);
  }
};
struct FastRoundOp : RoundOp {
  using RoundOp::RoundOp;
  template <typename C>
  C fast(C x) const {
    return std::nearbyint(x);
  }
};
// sin / cos: fast::sincos_reduced for |x| <= 2^20 in the vectorized loop; the rare larger,
// infinite or NaN inputs are then redone with libm's double sin / cos (exact argument
// reduction at any size), rounded to float.
template <bool kCos>
struct FastSinCosOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 10.0;
  template <typename C>
  C operator()(C x) const {
    return kCos ? std::cos(x) : std::sin(x);
  }
  float fast(float x) const { return fast::sincos_reduced(x, kCos ? 1u : 0u); }
  void fix(const float* x, float* y, int64_t n) const {
    int64_t out = 0;
    for (int64_t i = 0; i < n; ++i) out += fast::sincos_in_range(x[i]) ? 0 : 1;
    if (out == 0) return;
    for (int64_t i = 0; i < n; ++i) {
      if (!fast::sincos_in_range(x[i])) {
        const double d = static_cast<double>(x[i]);
        y[i] = static_cast<float>(kCos ? std::cos(d) : std::sin(d));
      }
    }
  }
};

// Sign without branches, for float, double and the 16-bit floats (through float).
struct FastSignOp : SignOp {
  using SignOp::SignOp;
  float fast(float x) const {
    return fast::select(x > 0.0f, 1.0f, fast::select(x < 0.0f, -1.0f, x != x ? x : 0.0f));
  }
  double fast(double x) const {
    const double r = x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : 0.0);
    return x != x ? x : r;  // NaN stays NaN
  }
  // float16 on its bits, no conversion: +-1 with the sign of x, 0 for +-0, and NaN as the
  // float path gives it (the quiet NaN 0x7e00 with x's sign).
  uint16_t fast_half(uint16_t h) const {
    const uint32_t mag = h & 0x7fffu;
    const uint32_t sign = h & 0x8000u;
    const uint32_t r = mag > 0x7c00u ? (sign | 0x7e00u) : (mag == 0 ? 0u : (sign | 0x3c00u));
    return static_cast<uint16_t>(r);
  }
};
struct FastTanhOp : TanhOp {
  using TanhOp::TanhOp;
  static constexpr fast::UnaryFn kFast = fast::UnaryFn::kTanh;
  double fast(double x) const { return fast::tanh_f64(x); }
};

// y: bool = pred(x) for float inputs.
template <typename Derived>
class FloatPredicateKernel : public Kernel {
 public:
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    Tensor& y = ctx.allocate_output(0, DataType::kBool, x.shape());
    const Derived& self = static_cast<const Derived&>(*this);
    ew::dispatch<ew::kTFloats>(x.dtype(), ctx, ctx.node().op_type.c_str(), [&](auto tag) {
      using T = decltype(tag);
      ew::run_unary(ctx.thread_pool(), x.data<T>(), y.data<bool>(), x.numel(), 1.0,
                    [&self](auto v) { return self.pred(v); });
    });
  }
};

class IsNaNKernel : public FloatPredicateKernel<IsNaNKernel> {
 public:
  explicit IsNaNKernel(const KernelInfo&) {}
  template <typename C>
  bool pred(C v) const {
    return std::isnan(v);
  }
};

// IsInf over float as a comparison of the bits with +inf / -inf (the std::isinf loop stayed
// scalar). pos / neg: nonzero to detect that sign.
ORTLITE_EW_CLONES void isinf_f32(const float* __restrict x, bool* __restrict y, int64_t n,
                                 uint32_t pos, uint32_t neg) {
  uint8_t* __restrict yb = reinterpret_cast<uint8_t*>(y);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, 4);
    yb[i] =
        static_cast<uint8_t>(((u == 0x7f800000u) & (pos != 0)) | ((u == 0xff800000u) & (neg != 0)));
  }
}

class IsInfKernel : public FloatPredicateKernel<IsInfKernel> {
 public:
  explicit IsInfKernel(const KernelInfo& info)
      : neg_(info.attr_int("detect_negative", 1) != 0),
        pos_(info.attr_int("detect_positive", 1) != 0) {}
  template <typename C>
  bool pred(C v) const {
    return std::isinf(v) && (v > 0 ? pos_ : neg_);
  }
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    if (x.dtype() != DataType::kFloat) return FloatPredicateKernel<IsInfKernel>::compute(ctx);
    Tensor& y = ctx.allocate_output(0, DataType::kBool, x.shape());
    const float* px = x.data<float>();
    bool* py = y.data<bool>();
    const uint32_t pos = pos_ ? ~0u : 0u, neg = neg_ ? ~0u : 0u;
    parallel_for(ctx.thread_pool(), x.numel(), 1.0,
                 [=](int64_t b, int64_t e) { isinf_f32(px + b, py + b, e - b, pos, neg); });
  }

 private:
  bool neg_, pos_;
};

}  // namespace

void register_unary_kernels(KernelRegistry& r) {
  constexpr unsigned kF = ew::kTFloats;
  r.add_versions("Neg", {6, 13}, make_factory<UnaryKernel<NegOp, ew::kTSignedNumeric>>());
  r.add_versions("Abs", {6, 13}, make_factory<UnaryKernel<AbsOp, ew::kTNumeric>>());
  r.add_versions("Sign", {9, 13}, make_factory<UnaryKernel<FastSignOp, ew::kTNumeric>>());
  r.add_versions("Sqrt", {6, 13}, make_factory<UnaryKernel<FastSqrtOp, kF>>());
  r.add_versions("Exp", {6, 13}, make_factory<UnaryKernel<FastExpOp, kF>>());
  r.add_versions("Log", {6, 13}, make_factory<UnaryKernel<FastLogOp, kF>>());
  r.add_versions("Reciprocal", {6, 13}, make_factory<UnaryKernel<FastReciprocalOp, kF>>());
  r.add_versions("Floor", {6, 13}, make_factory<UnaryKernel<FastFloorOp, kF>>());
  r.add_versions("Ceil", {6, 13}, make_factory<UnaryKernel<FastCeilOp, kF>>());
  r.add_versions("Round", {11, 22}, make_factory<UnaryKernel<FastRoundOp, kF>>());
  r.add_versions("Erf", {9, 13}, make_factory<UnaryKernel<FastErfOp, kF>>());
  r.add_versions("Sin", {7, 22}, make_factory<UnaryKernel<FastSinCosOp<false>, kF>>());
  r.add_versions("Cos", {7, 22}, make_factory<UnaryKernel<FastSinCosOp<true>, kF>>());
  r.add_versions("Tan", {7, 22}, make_factory<UnaryKernel<TanOp, kF>>());
  r.add_versions("Asin", {7, 22}, make_factory<UnaryKernel<AsinOp, kF>>());
  r.add_versions("Acos", {7, 22}, make_factory<UnaryKernel<AcosOp, kF>>());
  r.add_versions("Atan", {7, 22}, make_factory<UnaryKernel<AtanOp, kF>>());
  r.add_versions("Sinh", {9, 22}, make_factory<UnaryKernel<SinhOp, kF>>());
  r.add_versions("Cosh", {9, 22}, make_factory<UnaryKernel<CoshOp, kF>>());
  r.add_versions("Asinh", {9, 22}, make_factory<UnaryKernel<AsinhOp, kF>>());
  r.add_versions("Acosh", {9, 22}, make_factory<UnaryKernel<AcoshOp, kF>>());
  r.add_versions("Atanh", {9, 22}, make_factory<UnaryKernel<AtanhOp, kF>>());
  r.add_versions("Tanh", {6, 13}, make_factory<UnaryKernel<FastTanhOp, kF>>());
  r.add_versions("IsNaN", {9, 13, 20}, make_factory<IsNaNKernel>());
  r.add_versions("IsInf", {10, 20}, make_factory<IsInfKernel>());
  r.add_versions("BitwiseNot", {18}, make_factory<UnaryKernel<BitwiseNotOp, ew::kTInts>>());
  r.add_versions("Not", {1}, make_factory<NotKernel>());
}

}  // namespace ortlite
