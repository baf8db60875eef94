// RMSNormalization: float16 / bfloat16 / float / double; arithmetic in double.
#include <cmath>
#include <vector>

#include "providers/cpu/nn/double_io.h"

namespace ortlite {
namespace nn {
namespace {

// RMSNormalization (opset 23): y = x / sqrt(mean(x^2 over axes [axis, rank)) + eps) * scale
class RmsNorm final : public Kernel {
 public:
  explicit RmsNorm(const KernelInfo& info)
      : axis_(info.attr_int("axis", -1)), eps_(info.attr_float("epsilon", 1e-5f)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& scale = ctx.required_input(1);
    const size_t axis = checked_axis(ctx, axis_, x);
    const Shape inner_shape(x.shape().begin() + static_cast<std::ptrdiff_t>(axis), x.shape().end());
    const int64_t inner = dims_product(x.shape(), axis, x.rank());
    const int64_t outer = dims_product(x.shape(), 0, axis);
    // scale broadcasts (numpy rules) to the normalized dims.
    const Shape& ss = scale.shape();
    if (ss.size() > inner_shape.size() || scale.dtype() != x.dtype()) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'scale' " + shape_to_string(ss) +
                                                 " does not broadcast to the normalized dims " +
                                                 shape_to_string(inner_shape));
    }
    std::vector<int64_t> sidx(static_cast<size_t>(inner));
    {
      const size_t off = inner_shape.size() - ss.size();
      std::vector<int64_t> sstride(inner_shape.size(), 0);
      int64_t acc = 1;
      for (size_t k = ss.size(); k-- > 0;) {
        const int64_t dim = inner_shape[off + k];
        if (ss[k] != dim && ss[k] != 1) {
          ctx.fail(StatusCode::kInvalidArgument, "input 'scale' " + shape_to_string(ss) +
                                                     " does not broadcast to the normalized dims " +
                                                     shape_to_string(inner_shape));
        }
        sstride[off + k] = ss[k] == 1 ? 0 : acc;
        acc *= ss[k];
      }
      std::vector<int64_t> ix(inner_shape.size(), 0);
      for (int64_t f = 0; f < inner; ++f) {
        int64_t o = 0;
        for (size_t k = 0; k < ix.size(); ++k) o += ix[k] * sstride[k];
        sidx[static_cast<size_t>(f)] = o;
        for (size_t k = ix.size(); k-- > 0;) {
          if (++ix[k] < inner_shape[k]) break;
          ix[k] = 0;
        }
      }
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    const double eps = eps_;
    ORTLITE_DISPATCH_FLOAT(x.dtype(), "RMSNormalization", [&](auto tag) {
      using T = decltype(tag);
      const T* src = x.data<T>();
      const T* sc = scale.data<T>();
      T* dst = y.data<T>();
      parallel_for(
          ctx.thread_pool(), outer, static_cast<double>(inner) * 4, [&](int64_t b, int64_t e) {
            for (int64_t o = b; o < e; ++o) {
              const T* row = src + o * inner;
              double ss2 = 0;
              for (int64_t k = 0; k < inner; ++k) ss2 += to_double(row[k]) * to_double(row[k]);
              const double inv = 1.0 / std::sqrt(ss2 / static_cast<double>(inner) + eps);
              for (int64_t k = 0; k < inner; ++k) {
                dst[o * inner + k] = from_double<T>(to_double(row[k]) * inv *
                                                    to_double(sc[sidx[static_cast<size_t>(k)]]));
              }
            }
          });
    });
  }

 private:
  int64_t axis_;
  float eps_;
};

}  // namespace

void register_rms_normalization(KernelRegistry& r) {
  r.add("", "RMSNormalization", 23, kNewestOpset, make_factory<RmsNorm>());
}

}  // namespace nn
}  // namespace ortlite
