// GroupNormalization: float16 / bfloat16 / float / double; arithmetic in double.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "providers/cpu/nn/double_io.h"
#include "providers/cpu/nn/norm_simd.h"
#include "providers/cpu/reduce/reduce_simd.h"

namespace ortlite {
namespace nn {
namespace {

// GroupNormalization (opset 21): X [N, C, ...], scale and bias [C]; statistics over each
// group of C / num_groups channels and all spatial positions.
class GroupNorm final : public Kernel {
 public:
  explicit GroupNorm(const KernelInfo& info)
      : groups_(info.attr_int_required("num_groups")),
        eps_(info.attr_float("epsilon", 1e-5f)),
        per_group_scale_(info.opset() < 21) {
    if (groups_ < 1) info.fail(StatusCode::kInvalidArgument, "attribute 'num_groups' < 1");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& scale = ctx.required_input(1);
    const Tensor& bias = ctx.required_input(2);
    if (x.rank() < 2 || x.dim(1) % groups_ != 0) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'X' " + shape_to_string(x.shape()) +
                                                 " must be [N, C, ...] with C a multiple of " +
                                                 "num_groups = " + std::to_string(groups_));
    }
    const int64_t n = x.dim(0), c = x.dim(1);
    const int64_t want = per_group_scale_ ? groups_ : c;
    if (scale.numel() != want || bias.numel() != want || scale.dtype() != x.dtype() ||
        bias.dtype() != x.dtype()) {
      ctx.fail(StatusCode::kInvalidArgument, "inputs 'scale' and 'bias' must hold " +
                                                 std::to_string(want) + " values of the type of X");
    }
    int64_t sp = 1;
    for (size_t i = 2; i < x.rank(); ++i) sp *= x.dim(i);
    if (x.dtype() == DataType::kFloat) return run_fast<float>(ctx, x, scale, bias, n, c, sp);
    if (x.dtype() == DataType::kDouble) return run_fast<double>(ctx, x, scale, bias, n, c, sp);
    std::vector<double> v = load_doubles(x, "GroupNormalization");
    const std::vector<double> s = load_doubles(scale, "GroupNormalization");
    const std::vector<double> b = load_doubles(bias, "GroupNormalization");
    const int64_t cg = c / groups_;
    const int64_t len = cg * sp;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t g = 0; g < groups_; ++g) {
        double* p = &v[static_cast<size_t>((i * c + g * cg) * sp)];
        double mean = 0, var = 0;
        for (int64_t k = 0; k < len; ++k) mean += p[k];
        mean /= static_cast<double>(len);
        for (int64_t k = 0; k < len; ++k) var += (p[k] - mean) * (p[k] - mean);
        var /= static_cast<double>(len);
        const double inv = 1.0 / std::sqrt(var + eps_);
        for (int64_t k = 0; k < len; ++k) {
          const int64_t ch = per_group_scale_ ? g : g * cg + k / sp;
          p[k] = (p[k] - mean) * inv * s[static_cast<size_t>(ch)] + b[static_cast<size_t>(ch)];
        }
      }
    }
    store_doubles(ctx.allocate_output(0, x.dtype(), x.shape()), v, "GroupNormalization");
  }

 private:
  // float / double: the same two-pass statistics with vectorized double sums, one group per
  // task, each channel written as one affine run.
  template <typename T>
  void run_fast(KernelContext& ctx, const Tensor& x, const Tensor& scale, const Tensor& bias,
                int64_t n, int64_t c, int64_t sp) const {
    Tensor& yt = ctx.allocate_output(0, x.dtype(), x.shape());
    const T* xp = x.data<T>();
    const T* sc = scale.data<T>();
    const T* bi = bias.data<T>();
    T* yp = yt.data<T>();
    const int64_t cg = c / groups_;
    const int64_t len = cg * sp;
    const bool per_group = per_group_scale_;
    const double eps = eps_;
    parallel_for(ctx.thread_pool(), n * groups_, 4.0 * static_cast<double>(len),
                 [&](int64_t b, int64_t e) {
                   for (int64_t ig = b; ig < e; ++ig) {
                     const int64_t g = ig % groups_;
                     const T* p = xp + ig * len;
                     T* q = yp + ig * len;
                     if (len == 0) continue;
                     double mean;
                     if constexpr (std::is_same_v<T, float>)
                       mean = reduce::simd::sum_f32(p, len);
                     else
                       mean = reduce::simd::sum_f64(p, len);
                     mean /= static_cast<double>(len);
                     const double var = sum_sq_dev(p, len, mean) / static_cast<double>(len);
                     const double inv = 1.0 / std::sqrt(var + eps);
                     for (int64_t k = 0; k < cg; ++k) {
                       const int64_t ch = per_group ? g : g * cg + k;
                       affine(p + k * sp, q + k * sp, sp, mean, inv * static_cast<double>(sc[ch]),
                              static_cast<double>(bi[ch]));
                     }
                   }
                 });
  }

  int64_t groups_;
  float eps_;
  bool per_group_scale_;
};

}  // namespace

void register_group_normalization(KernelRegistry& r) {
  r.add("", "GroupNormalization", 18, 20, make_factory<GroupNorm>());
  r.add("", "GroupNormalization", 21, kNewestOpset, make_factory<GroupNorm>());
}

}  // namespace nn
}  // namespace ortlite
