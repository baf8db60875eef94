// Clip: y = min(max(x, lo), hi). Opset 6-10 reads the bounds from the float attributes
// min / max; opset 11+ from the optional single-element inputs 1 and 2 (same element type
// as x). A missing bound is the type's lowest / highest value; NaN in x stays NaN; when
// lo > hi every element becomes hi.
#include "compute/vectorize.h"  // first: compile options for the loops below

#include <limits>

#include "providers/cpu/math/math_kernels.h"

namespace ortlite {
namespace {

class ClipKernel : public Kernel {
 public:
  explicit ClipKernel(const KernelInfo& info) : attr_bounds_(info.opset() < 11) {
    if (attr_bounds_) {
      has_min_ = info.has_attr("min");
      has_max_ = info.has_attr("max");
      min_ = info.attr_float("min", 0.0f);
      max_ = info.attr_float("max", 0.0f);
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    if (attr_bounds_) {
      ew::dispatch<ew::kTFloats>(x.dtype(), ctx, "Clip", [&](auto tag) {
        using T = decltype(tag);
        using C = ew::compute_t<T>;
        const C lo = has_min_ ? static_cast<C>(min_) : std::numeric_limits<C>::lowest();
        const C hi = has_max_ ? static_cast<C>(max_) : std::numeric_limits<C>::max();
        run<T>(ctx, x, y, lo, hi);
      });
      return;
    }
    ew::dispatch<ew::kTNumeric>(x.dtype(), ctx, "Clip", [&](auto tag) {
      using T = decltype(tag);
      using C = ew::compute_t<T>;
      const C lo = bound<T>(ctx, x, 1, "min", std::numeric_limits<C>::lowest());
      const C hi = bound<T>(ctx, x, 2, "max", std::numeric_limits<C>::max());
      run<T>(ctx, x, y, lo, hi);
    });
  }

 private:
  template <typename T>
  static ew::compute_t<T> bound(const KernelContext& ctx, const Tensor& x, size_t i,
                                const char* name, ew::compute_t<T> dflt) {
    const Tensor* t = ctx.input(i);
    if (!t) return dflt;
    if (t->dtype() != x.dtype())
      ctx.fail(StatusCode::kInvalidArgument, std::string("input '") + name + "' has element type " +
                                                 dtype_name(t->dtype()) + ", expected " +
                                                 dtype_name(x.dtype()) + " like input 'input'");
    if (t->numel() != 1)
      ctx.fail(StatusCode::kInvalidArgument, std::string("input '") + name +
                                                 "' must be a scalar, got shape " +
                                                 shape_to_string(t->shape()));
    return ew::load(*t->data<T>());
  }

  template <typename T, typename C>
  static void run(const KernelContext& ctx, const Tensor& x, Tensor& y, C lo, C hi) {
    ew::run_unary(ctx.thread_pool(), x.data<T>(), y.data<T>(), x.numel(), 1.0, [lo, hi](C v) {
      const C r = v < lo ? lo : v;  // NaN compares false: stays NaN
      return r > hi ? hi : r;
    });
  }

  bool attr_bounds_;
  bool has_min_ = false, has_max_ = false;
  float min_ = 0.0f, max_ = 0.0f;
};

}  // namespace

void register_clip_kernels(KernelRegistry& r) {
  r.add_versions("Clip", {6, 11, 12, 13}, make_factory<ClipKernel>());
}

}  // namespace ortlite
