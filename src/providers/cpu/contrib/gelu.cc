// The GELU family of com.microsoft:
//
//   Gelu(X)               0.5 x (1 + erf(x / sqrt 2))
//   BiasGelu(A, B)        Gelu(A + B), B 1-D along A's last dimension
//   FastGelu(X, bias?)    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), x = X + bias
//   QuickGelu(X)          x sigmoid(alpha x), attribute alpha (1.702)
//
// float through the vectorized functions of compute/fast_kernels.h, double through libm,
// float16 / bfloat16 computed in float.
#include "compute/vectorize.h"  // first: compile options for the loops below

#include <algorithm>
#include <cmath>

#include "compute/fast_kernels.h"
#include "providers/cpu/contrib/contrib_common.h"

namespace ortlite {
namespace contrib {
namespace {

enum class GeluKind { kErf, kTanh, kQuick };

// y = f(x + bias) over n elements (bias: nullptr or a row of `bn` values repeated).
void gelu_block(GeluKind kind, float alpha, const float* x, const float* bias, int64_t bn,
                int64_t start, float* y, int64_t n) {
  if (bias) {
    // Row by row from the block's position in its row (no division per element: the
    // remainder per element took two thirds of BiasGelu at 4x32x512).
    int64_t j = start % bn;
    for (int64_t i = 0; i < n;) {
      const int64_t m = std::min(bn - j, n - i);
      const float* bj = bias + j;
      for (int64_t k = 0; k < m; ++k) y[i + k] = x[i + k] + bj[k];
      i += m;
      j = 0;
    }
  } else if (y != x) {
    std::copy(x, x + n, y);
  }
  switch (kind) {
    case GeluKind::kErf:
      fast::unary(fast::UnaryFn::kGelu, y, y, n);
      return;
    case GeluKind::kTanh:
      fast::unary(fast::UnaryFn::kGeluTanh, y, y, n);
      return;
    case GeluKind::kQuick: {
      float s[256];
      for (int64_t i0 = 0; i0 < n; i0 += 256) {
        const int64_t m = std::min<int64_t>(256, n - i0);
        for (int64_t i = 0; i < m; ++i) s[i] = alpha * y[i0 + i];
        fast::unary(fast::UnaryFn::kSigmoid, s, s, m);
        for (int64_t i = 0; i < m; ++i) y[i0 + i] *= s[i];
      }
      return;
    }
  }
}

void gelu_block(GeluKind kind, float alpha, const double* x, const double* bias, int64_t bn,
                int64_t start, double* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = bias ? x[i] + bias[(start + i) % bn] : x[i];
    switch (kind) {
      case GeluKind::kErf:
        y[i] = 0.5 * v * (1.0 + std::erf(v * 0.70710678118654752440));
        break;
      case GeluKind::kTanh:
        y[i] = 0.5 * v * (1.0 + std::tanh(0.79788456080286535588 * (v + 0.044715 * v * v * v)));
        break;
      case GeluKind::kQuick:
        y[i] = v / (1.0 + std::exp(-static_cast<double>(alpha) * v));
        break;
    }
  }
}

class GeluOp final : public Kernel {
 public:
  GeluOp(const KernelInfo& info, GeluKind kind, bool bias_required)
      : kind_(kind),
        bias_required_(bias_required),
        alpha_(kind == GeluKind::kQuick ? info.attr_float("alpha", 1.702f) : 0.f) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& X = ctx.required_input(0);
    const Tensor* bias = bias_required_ ? &ctx.required_input(1) : ctx.input(1);
    if (kind_ == GeluKind::kQuick || (kind_ == GeluKind::kErf && !bias_required_)) bias = nullptr;
    check_type(ctx, X, "input",
               {DataType::kFloat, DataType::kDouble, DataType::kFloat16, DataType::kBFloat16});
    check_same_type(ctx, X, {{bias, "bias"}});
    int64_t bn = 0;
    if (bias) {
      if (X.rank() == 0)
        ctx.fail(StatusCode::kInvalidArgument, "input must have rank >= 1 when a bias is given");
      bn = X.shape().back();
      check_vector(ctx, *bias, bn, "bias");
    }
    Tensor& Y = ctx.allocate_output(0, X.dtype(), X.shape());
    if (X.numel() == 0) return;
    if (X.dtype() == DataType::kDouble) {
      run<double>(ctx, X, bias, bn, Y);
    } else {
      run<float>(ctx, X, bias, bn, Y);
    }
  }

 private:
  template <typename T>
  void run(KernelContext& ctx, const Tensor& X, const Tensor* bias, int64_t bn, Tensor& Y) const {
    RealIn<T> x(&X), b(bias);
    RealOut<T> y(&Y);
    const int64_t n = X.numel();
    constexpr int64_t kBlock = 4096;
    parallel_for(ctx.thread_pool(), (n + kBlock - 1) / kBlock, 20.0 * kBlock,
                 [&](int64_t b0, int64_t b1) {
                   const int64_t lo = b0 * kBlock, hi = std::min(n, b1 * kBlock);
                   gelu_block(kind_, alpha_, x.get() + lo, b.get(), bn, lo, y.get() + lo, hi - lo);
                 });
    y.commit();
  }

  GeluKind kind_;
  bool bias_required_;
  float alpha_;
};

KernelFactory gelu_factory(GeluKind kind, bool bias_required) {
  return [kind, bias_required](const KernelInfo& info) -> std::unique_ptr<Kernel> {
    return std::make_unique<GeluOp>(info, kind, bias_required);
  };
}

}  // namespace

void register_gelu(KernelRegistry& r) {
  r.add("com.microsoft", "Gelu", 1, kMaxOpset, gelu_factory(GeluKind::kErf, false));
  r.add("com.microsoft", "BiasGelu", 1, kMaxOpset, gelu_factory(GeluKind::kErf, true));
  r.add("com.microsoft", "FastGelu", 1, kMaxOpset, gelu_factory(GeluKind::kTanh, false));
  r.add("com.microsoft", "QuickGelu", 1, kMaxOpset, gelu_factory(GeluKind::kQuick, false));
}

}  // namespace contrib
}  // namespace ortlite
