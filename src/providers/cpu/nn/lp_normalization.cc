// LpNormalization: float16 / bfloat16 / float / double; arithmetic in double.
#include <cmath>
#include <vector>

#include "providers/cpu/nn/double_io.h"

namespace ortlite {
namespace nn {
namespace {

// LpNormalization: y = x / ||x||_p along one axis (p = 1 or 2); 0 where the norm is 0.
class LpNorm final : public Kernel {
 public:
  explicit LpNorm(const KernelInfo& info)
      : axis_(info.attr_int("axis", -1)), p_(info.attr_int("p", 2)) {
    if (p_ != 1 && p_ != 2) {
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'p' = " + std::to_string(p_) + " must be 1 or 2");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const size_t axis = checked_axis(ctx, axis_, x);
    const int64_t outer = dims_product(x.shape(), 0, axis), n = x.dim(axis),
                  inner = dims_product(x.shape(), axis + 1, x.rank());
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    const int64_t p = p_;
    ORTLITE_DISPATCH_FLOAT(x.dtype(), "LpNormalization", [&](auto tag) {
      using T = decltype(tag);
      const T* src = x.data<T>();
      T* dst = y.data<T>();
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          double s = 0;
          for (int64_t k = 0; k < n; ++k) {
            const double v = to_double(src[(o * n + k) * inner + i]);
            s += p == 1 ? std::fabs(v) : v * v;
          }
          const double norm = p == 1 ? s : std::sqrt(s);
          for (int64_t k = 0; k < n; ++k) {
            const int64_t at = (o * n + k) * inner + i;
            dst[at] = from_double<T>(norm == 0 ? 0.0 : to_double(src[at]) / norm);  // 0 / 0 = 0
          }
        }
      }
    });
  }

 private:
  int64_t axis_;
  int64_t p_;
};

}  // namespace

void register_lp_normalization(KernelRegistry& r) {
  r.add("", "LpNormalization", 1, 21, make_factory<LpNorm>());
  r.add("", "LpNormalization", 22, kNewestOpset, make_factory<LpNorm>());
}

}  // namespace nn
}  // namespace ortlite
