// Swish (opset 24), added for ONNX node conformance: y = x * sigmoid(alpha * x), on the
// float types, through the shared elementwise unary kernel (float16 / bfloat16 in float).
#include <cmath>

#include "providers/cpu/math/math_kernels.h"
#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {
namespace {

struct SwishOp {
  explicit SwishOp(const KernelInfo& info) : alpha(info.attr_float("alpha", 1.0f)) {}
  static constexpr double kCost = 14.0;
  template <typename C>
  C operator()(C x) const {
    const C t = static_cast<C>(alpha) * x;
    // exp of a large positive argument overflows to inf; this form never divides inf by inf.
    if (t >= C{0}) return x / (C{1} + std::exp(-t));
    const C e = std::exp(t);
    return x * e / (C{1} + e);
  }
  float alpha;
};

}  // namespace

void register_swish(KernelRegistry& r) {
  r.add("", "Swish", 24, kMaxOpset, make_factory<math::UnaryKernel<SwishOp, ew::kTFloats>>());
}

}  // namespace nn
}  // namespace ortlite
