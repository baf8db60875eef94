// The layer normalizations onnxruntime's transformers optimizer writes:
//
//   SkipLayerNormalization (com.microsoft)            (input, skip, gamma, beta?, bias?) ->
//                                                      (output, mean?, inv_std_var?,
//                                                       input_skip_bias_sum?)
//   SkipSimplifiedLayerNormalization (com.microsoft)  (input, skip, gamma, bias?) -> same outputs
//                                                      (RMS norm: no mean subtracted, no beta)
//   SimplifiedLayerNormalization (default domain)     (X, scale) -> (Y, inv_std_var?), axis
//   LayerNormalization (default domain, opsets 1-16)  the contrib op onnxruntime accepts before
//                                                      ONNX added it at 17 (nn/normalization.cc)
//
// Statistics are computed in double over each normalized row; mean / inv_std_var outputs are
// float (onnxruntime's U), shaped like the input with the normalized dims set to 1. float,
// double, float16 and bfloat16 (computed in float).
#include "compute/vectorize.h"  // first: compile options for the loops below

#include <cmath>
#include <cstring>
#include <vector>

#include "providers/cpu/contrib/contrib_common.h"
#include "providers/shared/broadcast_shape.h"
#include "providers/shared/norm_attrs.h"

namespace ortlite {
namespace contrib {
namespace {

// y = norm(v) * gamma (+ beta) for one row of n values; v and y may be the same row.
// simplified: v / sqrt(mean(v^2) + eps) * gamma.
template <typename T>
void norm_row(const T* v, T* y, int64_t n, bool simplified, double eps, const T* gamma,
              const T* beta, float* mean_out, float* inv_out) {
  // Sums in kLanes independent partial sums (vectorized; one serial chain of double adds
  // took 60% of SkipLayerNormalization at hidden 128), added up at the end.
  constexpr int64_t kLanes = 8;
  double mean = 0;
  double sq = 0;
  const int64_t nv = n - n % kLanes;
  if (simplified) {
    double p[kLanes] = {};
    for (int64_t i = 0; i < nv; i += kLanes)
      for (int64_t l = 0; l < kLanes; ++l)
        p[l] += static_cast<double>(v[i + l]) * static_cast<double>(v[i + l]);
    for (int64_t i = nv; i < n; ++i) p[0] += static_cast<double>(v[i]) * static_cast<double>(v[i]);
    for (int64_t l = 0; l < kLanes; ++l) sq += p[l];
  } else {
    double p[kLanes] = {};
    for (int64_t i = 0; i < nv; i += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) p[l] += static_cast<double>(v[i + l]);
    for (int64_t i = nv; i < n; ++i) p[0] += static_cast<double>(v[i]);
    double s = 0;
    for (int64_t l = 0; l < kLanes; ++l) s += p[l];
    mean = s / static_cast<double>(n);
    double q[kLanes] = {};
    for (int64_t i = 0; i < nv; i += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) {
        const double d = static_cast<double>(v[i + l]) - mean;
        q[l] += d * d;
      }
    for (int64_t i = nv; i < n; ++i) {
      const double d = static_cast<double>(v[i]) - mean;
      q[0] += d * d;
    }
    for (int64_t l = 0; l < kLanes; ++l) sq += q[l];
  }
  const double inv = 1.0 / std::sqrt(sq / static_cast<double>(n) + eps);
  const T m = static_cast<T>(mean), iv = static_cast<T>(inv);
  if (simplified) {
    for (int64_t i = 0; i < n; ++i) y[i] = v[i] * iv * gamma[i];
  } else if (beta) {
    for (int64_t i = 0; i < n; ++i) y[i] = (v[i] - m) * iv * gamma[i] + beta[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = (v[i] - m) * iv * gamma[i];
  }
  if (mean_out) *mean_out = static_cast<float>(mean);
  if (inv_out) *inv_out = static_cast<float>(inv);
}

// ---- SkipLayerNormalization / SkipSimplifiedLayerNormalization ----------------------------

class SkipLayerNorm final : public Kernel {
 public:
  SkipLayerNorm(const KernelInfo& info, bool simplified)
      : simplified_(simplified), epsilon_(info.attr_float("epsilon", 1e-12f)) {
    if (epsilon_ < 0)
      info.fail(StatusCode::kInvalidGraph, "epsilon must be >= 0, got " + std::to_string(epsilon_));
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = ctx.required_input(0);
    const Tensor& skip = ctx.required_input(1);
    const Tensor& gamma = ctx.required_input(2);
    // SkipSimplifiedLayerNormalization has no beta: its bias is input 3.
    const Tensor* beta = simplified_ ? nullptr : ctx.input(3);
    const Tensor* bias = ctx.input(simplified_ ? 3 : 4);
    check_type(ctx, X, "input",
               {DataType::kFloat, DataType::kDouble, DataType::kFloat16, DataType::kBFloat16});
    check_same_type(ctx, X, {{&skip, "skip"}, {&gamma, "gamma"}, {beta, "beta"}, {bias, "bias"}});
    if (X.rank() != 2 && X.rank() != 3)
      ctx.fail(StatusCode::kInvalidArgument,
               "input must be 2-D or 3-D, got shape " + shape_to_string(X.shape()));
    const int64_t H = X.shape().back();
    // skip: X's shape, or (when X is 3-D) [1, S, H] or [S, H], broadcast over the batch.
    const bool same = skip.shape() == X.shape();
    const bool batch_bcast =
        X.rank() == 3 &&
        ((skip.rank() == 2 && skip.dim(0) == X.dim(1) && skip.dim(1) == H) ||
         (skip.rank() == 3 && skip.dim(0) == 1 && skip.dim(1) == X.dim(1) && skip.dim(2) == H));
    if (!same && !batch_bcast)
      ctx.fail(StatusCode::kInvalidArgument,
               "skip " + shape_to_string(skip.shape()) + " must have the input's shape " +
                   shape_to_string(X.shape()) +
                   " or, for a 3-D input, its last two dimensions (batch 1 or none)");
    check_vector(ctx, gamma, H, "gamma");
    if (beta) check_vector(ctx, *beta, H, "beta");
    if (bias) check_vector(ctx, *bias, H, "bias");

    Tensor& Y = ctx.allocate_output(0, X.dtype(), X.shape());
    Shape stat_shape = X.shape();
    stat_shape.back() = 1;
    float* mean_out = wants_output(ctx, 1)
                          ? ctx.allocate_output(1, DataType::kFloat, stat_shape).data<float>()
                          : nullptr;
    float* inv_out = wants_output(ctx, 2)
                         ? ctx.allocate_output(2, DataType::kFloat, stat_shape).data<float>()
                         : nullptr;
    Tensor* sum = wants_output(ctx, 3) ? &ctx.allocate_output(3, X.dtype(), X.shape()) : nullptr;
    if (X.numel() == 0) return;
    if (X.dtype() == DataType::kDouble) {
      run<double>(ctx, X, skip, gamma, beta, bias, Y, sum, mean_out, inv_out);
    } else {
      run<float>(ctx, X, skip, gamma, beta, bias, Y, sum, mean_out, inv_out);
    }
  }

 private:
  template <typename T>
  void run(KernelContext& ctx, const Tensor& X, const Tensor& skip, const Tensor& gamma,
           const Tensor* beta, const Tensor* bias, Tensor& Y, Tensor* sum, float* mean_out,
           float* inv_out) const {
    const int64_t H = X.shape().back(), rows = X.numel() / H, skip_rows = skip.numel() / H;
    RealIn<T> x(&X), s(&skip), g(&gamma), b(beta), bi(bias);
    RealOut<T> y(&Y), su(sum);
    const T* xp = x.get();
    const T* sp = s.get();
    const T* bp = bi.get();
    parallel_for(
        ctx.thread_pool(), rows, 6.0 * static_cast<double>(H), [&](int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; ++r) {
            const T* xr = xp + r * H;
            const T* sr = sp + (r % skip_rows) * H;
            T* yr = y.get() + r * H;
            if (bp) {
              for (int64_t i = 0; i < H; ++i) yr[i] = xr[i] + sr[i] + bp[i];
            } else {
              for (int64_t i = 0; i < H; ++i) yr[i] = xr[i] + sr[i];
            }
            if (su.get()) std::memcpy(su.get() + r * H, yr, H * sizeof(T));
            norm_row(yr, yr, H, simplified_, static_cast<double>(epsilon_), g.get(), b.get(),
                     mean_out ? mean_out + r : nullptr, inv_out ? inv_out + r : nullptr);
          }
        });
    y.commit();
    su.commit();
  }

  bool simplified_;
  float epsilon_;
};

// ---- LayerNormalization (opsets 1-16) / SimplifiedLayerNormalization ----------------------

class AxisLayerNorm final : public Kernel {
 public:
  AxisLayerNorm(const KernelInfo& info, bool simplified)
      : simplified_(simplified),
        axis_(info.attr_int("axis", -1)),
        epsilon_(info.attr_float("epsilon", 1e-5f)) {
    const int64_t stash = info.attr_int("stash_type", 1);
    if (stash != 1 && stash != 0)
      info.fail(StatusCode::kNotImplemented,
                "stash_type " + std::to_string(stash) + " is not supported (0 or 1)");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = ctx.required_input(0);
    const Tensor& S = ctx.required_input(1);
    const Tensor* B = simplified_ ? nullptr : ctx.input(2);
    check_type(ctx, X, "X",
               {DataType::kFloat, DataType::kDouble, DataType::kFloat16, DataType::kBFloat16});
    check_same_type(ctx, X, {{&S, "Scale"}, {B, "B"}});
    if (X.rank() == 0)
      ctx.fail(StatusCode::kInvalidArgument, "X must have rank >= 1, got a scalar");
    const int64_t axis = normalize_axis(axis_, static_cast<int64_t>(X.rank()));
    int64_t norm = 1;
    for (size_t d = static_cast<size_t>(axis); d < X.rank(); ++d) norm *= X.dim(d);
    if (norm == 0 && X.numel() != 0)
      ctx.fail(StatusCode::kInvalidArgument, "the normalized dimensions are empty");
    const int64_t rows = norm ? X.numel() / norm : 0;
    const Shape norm_shape(X.shape().begin() + axis, X.shape().end());
    nn::check_norm_param(ctx, S, norm_shape, "Scale");
    if (B) nn::check_norm_param(ctx, *B, norm_shape, "B");
    Tensor& Y = ctx.allocate_output(0, X.dtype(), X.shape());
    Shape stat_shape = X.shape();
    for (size_t d = static_cast<size_t>(axis); d < X.rank(); ++d) stat_shape[d] = 1;
    const size_t mean_idx = simplified_ ? SIZE_MAX : 1, inv_idx = simplified_ ? 1 : 2;
    float* mean_out =
        !simplified_ && wants_output(ctx, mean_idx)
            ? ctx.allocate_output(mean_idx, DataType::kFloat, stat_shape).data<float>()
            : nullptr;
    float* inv_out = wants_output(ctx, inv_idx)
                         ? ctx.allocate_output(inv_idx, DataType::kFloat, stat_shape).data<float>()
                         : nullptr;
    if (X.numel() == 0) return;
    if (X.dtype() == DataType::kDouble) {
      run<double>(ctx, X, S, B, Y, norm_shape, rows, norm, mean_out, inv_out);
    } else {
      run<float>(ctx, X, S, B, Y, norm_shape, rows, norm, mean_out, inv_out);
    }
  }

 private:
  template <typename T>
  void run(KernelContext& ctx, const Tensor& X, const Tensor& S, const Tensor* B, Tensor& Y,
           const Shape& norm_shape, int64_t rows, int64_t norm, float* mean_out,
           float* inv_out) const {
    RealIn<T> x(&X), sin(&S), bin(B);
    RealOut<T> y(&Y);
    const std::vector<T> s = expand(sin.get(), S.shape(), norm_shape);
    const std::vector<T> b = B ? expand(bin.get(), B->shape(), norm_shape) : std::vector<T>();
    parallel_for(ctx.thread_pool(), rows, 5.0 * static_cast<double>(norm),
                 [&](int64_t r0, int64_t r1) {
                   for (int64_t r = r0; r < r1; ++r)
                     norm_row(x.get() + r * norm, y.get() + r * norm, norm, simplified_,
                              static_cast<double>(epsilon_), s.data(), B ? b.data() : nullptr,
                              mean_out ? mean_out + r : nullptr, inv_out ? inv_out + r : nullptr);
                 });
    y.commit();
  }

  // p (broadcasting unidirectionally to `target`) as a dense row of shape_size(target) values.
  template <typename T>
  static std::vector<T> expand(const T* p, const Shape& pshape, const Shape& target) {
    const int64_t n = shape_size(target);
    if (shape_size(pshape) == n) return std::vector<T>(p, p + n);
    const std::vector<int64_t> st = broadcast_strides(pshape, target);
    std::vector<T> out(static_cast<size_t>(n));
    std::vector<int64_t> idx(target.size(), 0);
    int64_t off = 0;
    for (int64_t i = 0; i < n; ++i) {
      out[i] = p[off];
      for (size_t d = target.size(); d-- > 0;) {
        ++idx[d];
        off += st[d];
        if (idx[d] < target[d]) break;
        off -= st[d] * idx[d];
        idx[d] = 0;
      }
    }
    return out;
  }

  bool simplified_;
  int64_t axis_;
  float epsilon_;
};

template <bool kSimplified>
KernelFactory skip_factory() {
  return [](const KernelInfo& info) -> std::unique_ptr<Kernel> {
    return std::make_unique<SkipLayerNorm>(info, kSimplified);
  };
}

template <bool kSimplified>
KernelFactory axis_factory() {
  return [](const KernelInfo& info) -> std::unique_ptr<Kernel> {
    return std::make_unique<AxisLayerNorm>(info, kSimplified);
  };
}

}  // namespace

void register_layer_norm(KernelRegistry& r) {
  r.add("com.microsoft", "SkipLayerNormalization", 1, kMaxOpset, skip_factory<false>());
  r.add("com.microsoft", "SkipSimplifiedLayerNormalization", 1, kMaxOpset, skip_factory<true>());
  r.add("", "SimplifiedLayerNormalization", 1, kMaxOpset, axis_factory<true>());
  // Opset 17 and later: nn/normalization.cc.
  r.add("", "LayerNormalization", 1, 16, axis_factory<false>());
}

}  // namespace contrib
}  // namespace ortlite
