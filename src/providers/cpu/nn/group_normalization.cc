// GroupNormalization: float16 / bfloat16 / float / double; arithmetic in double.
#include <cmath>
#include <vector>

#include "providers/cpu/nn/double_io.h"

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
