// LpPool: float16 / bfloat16 / float / double; arithmetic in double.
#include <cmath>
#include <vector>

#include "providers/cpu/nn/double_io.h"

namespace ortlite {
namespace nn {
namespace {

// LpPool: (sum over the window of |x|^p)^(1/p), with pool geometry (pads count as 0).
class LpPool final : public Kernel {
 public:
  explicit LpPool(const KernelInfo& info)
      : p_(info.attr_int("p", 2)), ceil_mode_(info.attr_int("ceil_mode", 0) != 0) {
    attrs_.load(info, true);
    if (p_ < 1) info.fail(StatusCode::kInvalidArgument, "attribute 'p' must be >= 1");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    if (x.rank() < 3) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'X' must be [N, C, D1, ...], got " + shape_to_string(x.shape()));
    }
    const std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
    const SpatialGeometry g = pool_geometry(ctx, attrs_, in, ceil_mode_);
    const size_t k = g.rank;
    Shape out_shape = {x.dim(0), x.dim(1)};
    out_shape.insert(out_shape.end(), g.out.begin(), g.out.end());
    int64_t in_sp = 1, out_sp = 1, win = 1;
    for (size_t i = 0; i < k; ++i) {
      in_sp *= g.in[i];
      out_sp *= g.out[i];
      win *= g.kernel[i];
    }
    const std::vector<double> v = load_doubles(x, "LpPool");
    std::vector<double> out(static_cast<size_t>(x.dim(0) * x.dim(1) * out_sp));
    const double p = static_cast<double>(p_);
    std::vector<int64_t> oi(k), wi(k);
    for (int64_t nc = 0; nc < x.dim(0) * x.dim(1); ++nc) {
      const double* src = &v[static_cast<size_t>(nc * in_sp)];
      for (int64_t o = 0; o < out_sp; ++o) {
        int64_t rem = o;
        for (size_t i = k; i-- > 0;) {
          oi[i] = rem % g.out[i];
          rem /= g.out[i];
        }
        double acc = 0;
        for (int64_t w = 0; w < win; ++w) {
          int64_t wr = w, off = 0;
          bool inside = true;
          for (size_t i = k; i-- > 0;) {
            wi[i] = wr % g.kernel[i];
            wr /= g.kernel[i];
          }
          for (size_t i = 0; i < k; ++i) {
            const int64_t pos = oi[i] * g.stride[i] - g.pad_begin[i] + wi[i] * g.dilation[i];
            if (pos < 0 || pos >= g.in[i]) {
              inside = false;
              break;
            }
            off = off * g.in[i] + pos;
          }
          if (inside) acc += std::pow(std::fabs(src[off]), p);
        }
        out[static_cast<size_t>(nc * out_sp + o)] = std::pow(acc, 1.0 / p);
      }
    }
    store_doubles(ctx.allocate_output(0, x.dtype(), out_shape), out, "LpPool");
  }

 private:
  SpatialAttrs attrs_;
  int64_t p_;
  bool ceil_mode_;
};

}  // namespace

void register_lp_pool(KernelRegistry& r) {
  r.add("", "LpPool", 2, 10, make_factory<LpPool>());
  r.add("", "LpPool", 11, 17, make_factory<LpPool>());
  r.add("", "LpPool", 18, 21, make_factory<LpPool>());
  r.add("", "LpPool", 22, kNewestOpset, make_factory<LpPool>());
}

}  // namespace nn
}  // namespace ortlite
