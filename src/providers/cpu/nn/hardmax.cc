// Hardmax: float16 / bfloat16 / float / double.
#include <vector>

#include "providers/cpu/nn/double_io.h"

namespace ortlite {
namespace nn {
namespace {

// Hardmax: 1 at the first maximum along the axis (opset 13), or over the flattened dims
// [axis, rank) (opsets 1-12), 0 elsewhere.
class Hardmax final : public Kernel {
 public:
  explicit Hardmax(const KernelInfo& info)
      : axis_(info.attr_int("axis", info.opset() >= 13 ? -1 : 1)), flatten_(info.opset() < 13) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const size_t axis = checked_axis(ctx, axis_, x);
    int64_t outer = dims_product(x.shape(), 0, axis), n, inner;
    if (flatten_) {
      n = dims_product(x.shape(), axis, x.rank());
      inner = 1;
    } else {
      n = x.dim(axis);
      inner = dims_product(x.shape(), axis + 1, x.rank());
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    ORTLITE_DISPATCH_FLOAT(x.dtype(), "Hardmax", [&](auto tag) {
      using T = decltype(tag);
      const T* src = x.data<T>();
      T* dst = y.data<T>();
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          int64_t best = 0;
          double bv = -std::numeric_limits<double>::infinity();
          for (int64_t k = 0; k < n; ++k) {
            const double v = to_double(src[(o * n + k) * inner + i]);
            if (k == 0 || v > bv) {
              bv = v;
              best = k;
            }
          }
          for (int64_t k = 0; k < n; ++k) {
            dst[(o * n + k) * inner + i] = from_double<T>(k == best ? 1.0 : 0.0);
          }
        }
      }
    });
  }

 private:
  int64_t axis_;
  bool flatten_;
};

}  // namespace

void register_hardmax(KernelRegistry& r) {
  r.add("", "Hardmax", 1, 10, make_factory<Hardmax>());
  r.add("", "Hardmax", 11, 12, make_factory<Hardmax>());
  r.add("", "Hardmax", 13, kNewestOpset, make_factory<Hardmax>());
}

}  // namespace nn
}  // namespace ortlite
