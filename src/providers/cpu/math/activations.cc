// Activations: Sigmoid Relu LeakyRelu Elu Selu PRelu HardSigmoid HardSwish Gelu Softplus
// Softsign Mish ThresholdedRelu Celu Shrink.
#include "compute/vectorize.h"  // first: compile options for the loops below

#include <cmath>
#include <type_traits>

#include "compute/fast_math.h"
#include "providers/cpu/math/math_kernels.h"

namespace ortlite {
namespace {

using math::BinaryKernel;
using math::NoAttrs;
using math::UnaryKernel;

template <typename C>
inline C sigmoid(C x) {
  if (x >= C{0}) return C{1} / (C{1} + std::exp(-x));
  const C e = std::exp(x);
  return e / (C{1} + e);
}

template <typename C>
inline C softplus(C x) {
  return x > C{0} ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

struct SigmoidOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 12.0;
  static constexpr fast::UnaryFn kFast = fast::UnaryFn::kSigmoid;
  template <typename C>
  C operator()(C x) const {
    return sigmoid(x);
  }
  // double: vectorized, with a vectorized exp (0.88 of onnxruntime's speed with std::exp).
  void block(const double* x, double* y, int64_t n) const { math::sigmoid_f64_block(x, y, n); }
};

struct ReluOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 1.0;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>) {
      return x;
    } else {
      return x < C{0} ? C{0} : x;  // NaN stays NaN
    }
  }
  float fast(float x) const { return x < 0.0f ? 0.0f : x; }
};

struct LeakyReluOp {
  explicit LeakyReluOp(const KernelInfo& info) : alpha(info.attr_float("alpha", 0.01f)) {}
  static constexpr double kCost = 1.0;
  template <typename C>
  C operator()(C x) const {
    return x >= C{0} ? x : static_cast<C>(alpha) * x;
  }
  float fast(float x) const { return x >= 0.0f ? x : alpha * x; }
  float alpha;
};

struct EluOp {
  explicit EluOp(const KernelInfo& info) : alpha(info.attr_float("alpha", 1.0f)) {}
  static constexpr double kCost = 10.0;
  template <typename C>
  C operator()(C x) const {
    return x >= C{0} ? x : static_cast<C>(alpha) * std::expm1(x);
  }
  float fast(float x) const { return fast::select(x >= 0.0f, x, alpha * fast::expm1(x)); }
  float alpha;
};

struct SeluOp {
  explicit SeluOp(const KernelInfo& info)
      : alpha(info.attr_float("alpha", 1.67326319217681884765625f)),
        gamma(info.attr_float("gamma", 1.05070102214813232421875f)) {}
  static constexpr double kCost = 10.0;
  template <typename C>
  C operator()(C x) const {
    const C g = static_cast<C>(gamma);
    return x > C{0} ? g * x : g * (static_cast<C>(alpha) * std::exp(x) - static_cast<C>(alpha));
  }
  float fast(float x) const {
    return fast::select(x > 0.0f, gamma * x, gamma * (alpha * fast::expm1(x)));
  }
  float alpha, gamma;
};

struct HardSigmoidOp {
  explicit HardSigmoidOp(const KernelInfo& info)
      : alpha(info.attr_float("alpha", 0.2f)), beta(info.attr_float("beta", 0.5f)) {}
  static constexpr double kCost = 2.0;
  template <typename C>
  C operator()(C x) const {
    const C v = static_cast<C>(alpha) * x + static_cast<C>(beta);
    return std::max(C{0}, std::min(C{1}, v));
  }
  float fast(float x) const { return (*this)(x); }
  float alpha, beta;
};

struct HardSwishOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 3.0;
  template <typename C>
  C operator()(C x) const {
    const C v = x * static_cast<C>(1.0 / 6.0) + static_cast<C>(0.5);
    return x * std::max(C{0}, std::min(C{1}, v));
  }
  float fast(float x) const { return (*this)(x); }
};

struct SoftplusOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 20.0;
  template <typename C>
  C operator()(C x) const {
    return softplus(x);
  }
  // max(x, 0) + log1p(e^-|x|); NaN stays NaN.
  float fast(float x) const {
    const float r = std::max(x, 0.0f) + fast::log1p_nonneg(fast::exp(-std::fabs(x)));
    return fast::select(x != x, x, r);
  }
};

struct SoftsignOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 3.0;
  template <typename C>
  C operator()(C x) const {
    return x / (C{1} + std::fabs(x));
  }
  float fast(float x) const { return x / (1.0f + std::fabs(x)); }
};

struct MishOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 30.0;
  template <typename C>
  C operator()(C x) const {
    return x * std::tanh(softplus(x));
  }
  // tanh(log(1 + e)) = n / (n + 2) with n = e (e + 2), e = e^x; 1 from x = 20 on (the
  // fraction rounds to 1 there) so that n never overflows. NaN stays NaN.
  float fast(float x) const {
    const float e = fast::exp(std::min(x, 20.0f));
    const float n = e * (e + 2.0f);
    return fast::select(x >= 20.0f, x, x * (n / (n + 2.0f)));
  }
};

struct ThresholdedReluOp {
  explicit ThresholdedReluOp(const KernelInfo& info) : alpha(info.attr_float("alpha", 1.0f)) {}
  static constexpr double kCost = 1.0;
  template <typename C>
  C operator()(C x) const {
    return x > static_cast<C>(alpha) ? x : C{0};
  }
  float fast(float x) const { return x > alpha ? x : 0.0f; }
  float alpha;
};

struct CeluOp {
  explicit CeluOp(const KernelInfo& info) : alpha(info.attr_float("alpha", 1.0f)) {
    if (alpha == 0.0f) info.fail(StatusCode::kInvalidArgument, "attribute 'alpha' must not be 0");
  }
  static constexpr double kCost = 10.0;
  template <typename C>
  C operator()(C x) const {
    const C a = static_cast<C>(alpha);
    return std::max(C{0}, x) + std::min(C{0}, a * std::expm1(x / a));
  }
  float fast(float x) const {
    return std::max(0.0f, x) + std::min(0.0f, alpha * fast::expm1(x / alpha));
  }
  float alpha;
};

// y = x + bias if x < -lambd; x - bias if x > lambd; else 0. Integer types compute in
// double and convert back (truncating).
struct ShrinkOp {
  explicit ShrinkOp(const KernelInfo& info)
      : lambd(info.attr_float("lambd", 0.5f)), bias(info.attr_float("bias", 0.0f)) {}
  static constexpr double kCost = 2.0;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) {
      const C l = static_cast<C>(lambd), b = static_cast<C>(bias);
      return x < -l ? x + b : (x > l ? x - b : C{0});
    } else {
      const double v = static_cast<double>(x);
      const double l = lambd, b = bias;
      return ew::saturate_cast_int<C>(v < -l ? v + b : (v > l ? v - b : 0.0));
    }
  }
  float lambd, bias;
};

struct PReluOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 1.0;
  template <typename C>
  C operator()(C x, C slope) const {
    if constexpr (std::is_unsigned_v<C>) {
      (void)slope;
      return x;
    } else {
      return x < C{0} ? ew::mul(slope, x) : x;
    }
  }
};

// Gelu (opset 20): approximate = "none": x/2 (1 + erf(x/sqrt(2))); "tanh":
// x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
class GeluKernel : public Kernel {
 public:
  explicit GeluKernel(const KernelInfo& info) {
    const std::string approx = info.attr_string("approximate", "none");
    if (approx == "none") {
      use_tanh_ = false;
    } else if (approx == "tanh") {
      use_tanh_ = true;
    } else {
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'approximate' must be \"none\" or \"tanh\", got \"" + approx + "\"");
    }
  }
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    ew::dispatch<ew::kTFloats>(x.dtype(), ctx, "Gelu", [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, double>) {  // float, float16, bfloat16: vectorized
        math::run_fast_unary(ctx.thread_pool(),
                             use_tanh_ ? fast::UnaryFn::kGeluTanh : fast::UnaryFn::kGelu,
                             x.data<T>(), y.data<T>(), x.numel(), 15.0);
      } else if (use_tanh_) {
        ew::run_unary(ctx.thread_pool(), x.data<T>(), y.data<T>(), x.numel(), 15.0, [](T v) {
          const T inner = 0.7978845608028654 * (v + 0.044715 * v * v * v);  // sqrt(2/pi)
          return 0.5 * v * (1.0 + std::tanh(inner));
        });
      } else {
        ew::run_unary(ctx.thread_pool(), x.data<T>(), y.data<T>(), x.numel(), 12.0,
                      [](T v) { return 0.5 * v * (1.0 + std::erf(v * 0.70710678118654752440)); });
      }
    });
  }

 private:
  bool use_tanh_ = false;
};

}  // namespace

void register_activation_kernels(KernelRegistry& r) {
  constexpr unsigned kF = ew::kTFloats;
  r.add_versions("Sigmoid", {6, 13}, make_factory<UnaryKernel<SigmoidOp, kF>>());
  r.add_versions("Relu", {6, 13, 14}, make_factory<UnaryKernel<ReluOp, ew::kTSignedNumeric>>());
  r.add_versions("LeakyRelu", {6, 16}, make_factory<UnaryKernel<LeakyReluOp, kF>>());
  r.add_versions("Elu", {6, 22}, make_factory<UnaryKernel<EluOp, kF>>());
  r.add_versions("Selu", {6, 22}, make_factory<UnaryKernel<SeluOp, kF>>());
  r.add_versions("HardSigmoid", {6, 22}, make_factory<UnaryKernel<HardSigmoidOp, kF>>());
  r.add_versions("HardSwish", {14, 22}, make_factory<UnaryKernel<HardSwishOp, kF>>());
  r.add_versions("Softplus", {1, 22}, make_factory<UnaryKernel<SoftplusOp, kF>>());
  r.add_versions("Softsign", {1, 22}, make_factory<UnaryKernel<SoftsignOp, kF>>());
  r.add_versions("Mish", {18, 22}, make_factory<UnaryKernel<MishOp, kF>>());
  r.add_versions("ThresholdedRelu", {10, 22}, make_factory<UnaryKernel<ThresholdedReluOp, kF>>());
  r.add_versions("Celu", {12}, make_factory<UnaryKernel<CeluOp, kF>>());
  r.add_versions("Shrink", {9}, make_factory<UnaryKernel<ShrinkOp, ew::kTNumeric>>());
  r.add_versions("PRelu", {7, 9, 16}, make_factory<BinaryKernel<PReluOp, ew::kTNumeric>>());
  r.add_versions("Gelu", {20}, make_factory<GeluKernel>());
}

}  // namespace ortlite
