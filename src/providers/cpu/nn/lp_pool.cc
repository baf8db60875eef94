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
    Tensor& y = ctx.allocate_output(0, x.dtype(), out_shape);
    const int64_t planes = x.dim(0) * x.dim(1);
    if (y.numel() == 0) return;
    // Per plane: |x|^p once per input element (in double: x * x for p = 2, exact from
    // float), then the window sums row by row along the last axis, the taps of each
    // output added in the same (row-major) order as a direct loop, then the p-th root.
    const double p = static_cast<double>(p_);
    const int64_t p_int = p_;
    const int64_t in_last = g.in[k - 1], out_last = g.out[k - 1];
    const int64_t s_last = g.stride[k - 1], d_last = g.dilation[k - 1],
                  pb_last = g.pad_begin[k - 1];
    const int64_t out_rows = out_sp / out_last, lead_win = win / g.kernel[k - 1];
    // Outputs along the last axis whose tap j lies inside the input: [lo[j], hi[j]).
    std::vector<int64_t> lo(static_cast<size_t>(g.kernel[k - 1])), hi(lo);
    for (int64_t j = 0; j < g.kernel[k - 1]; ++j) {
      valid_range(j * d_last - pb_last, s_last, in_last, out_last, lo[j], hi[j]);
    }
    ORTLITE_DISPATCH_FLOAT(x.dtype(), "LpPool", [&](auto tag) {
      using T = decltype(tag);
      const T* xs = x.data<T>();
      T* ys = y.data<T>();
      parallel_for(
          ctx.thread_pool(), planes,
          static_cast<double>(in_sp) * (p_int <= 2 ? 1.0 : 20.0) +
              static_cast<double>(out_sp * win),
          [&](int64_t b, int64_t e) {
            std::vector<double> t(static_cast<size_t>(in_sp));
            std::vector<double> acc(static_cast<size_t>(out_last));
            std::vector<int64_t> oi(k), wi(k);
            for (int64_t nc = b; nc < e; ++nc) {
              const T* src = xs + nc * in_sp;
              for (int64_t i = 0; i < in_sp; ++i) {
                const double v = to_double(src[i]);
                t[i] = p_int == 1 ? std::fabs(v) : p_int == 2 ? v * v : std::pow(std::fabs(v), p);
              }
              T* dst = ys + nc * out_sp;
              for (int64_t r = 0; r < out_rows; ++r) {
                int64_t rem = r;
                for (size_t a = k - 1; a-- > 0;) {
                  oi[a] = rem % g.out[a];
                  rem /= g.out[a];
                }
                std::fill(acc.begin(), acc.end(), 0.0);
                for (int64_t w = 0; w < lead_win; ++w) {
                  int64_t wr = w, off = 0;
                  for (size_t a = k - 1; a-- > 0;) {
                    wi[a] = wr % g.kernel[a];
                    wr /= g.kernel[a];
                  }
                  bool inside = true;
                  for (size_t a = 0; a + 1 < k; ++a) {
                    const int64_t pos =
                        oi[a] * g.stride[a] - g.pad_begin[a] + wi[a] * g.dilation[a];
                    if (pos < 0 || pos >= g.in[a]) {
                      inside = false;
                      break;
                    }
                    off = off * g.in[a] + pos;
                  }
                  if (!inside) continue;
                  const double* row = t.data() + off * in_last;
                  for (int64_t j = 0; j < g.kernel[k - 1]; ++j) {
                    const int64_t off_j = j * d_last - pb_last;
                    for (int64_t o = lo[j]; o < hi[j]; ++o) acc[o] += row[o * s_last + off_j];
                  }
                }
                T* yr = dst + r * out_last;
                for (int64_t o = 0; o < out_last; ++o) {
                  const double a = acc[o];
                  yr[o] = from_double<T>(p_int == 1   ? a
                                         : p_int == 2 ? std::sqrt(a)
                                                      : std::pow(a, 1.0 / p));
                }
              }
            }
          });
    });
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
