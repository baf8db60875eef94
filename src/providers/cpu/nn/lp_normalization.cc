// LpNormalization: float16 / bfloat16 / float / double; arithmetic in double.
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
    if (x.dtype() == DataType::kFloat) return run_fast<float>(ctx, x, y, outer, n, inner);
    if (x.dtype() == DataType::kDouble) return run_fast<double>(ctx, x, y, outer, n, inner);
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
  // float / double: the norms accumulated in double as vectorized sums (a contiguous run
  // when the axis is innermost, else `inner` norms at once, row by row), then
  // y = x * (1 / norm) in double.
  template <typename T>
  void run_fast(KernelContext& ctx, const Tensor& x, Tensor& y, int64_t outer, int64_t n,
                int64_t inner) const {
    const T* src = x.data<T>();
    T* dst = y.data<T>();
    const bool l1 = p_ == 1;
    parallel_for(
        ctx.thread_pool(), outer, 3.0 * static_cast<double>(n * inner), [&](int64_t b, int64_t e) {
          std::vector<double> acc(static_cast<size_t>(inner)), inv(acc);
          for (int64_t o = b; o < e; ++o) {
            const T* xs = src + o * n * inner;
            T* ys = dst + o * n * inner;
            if (inner == 1) {
              double s;
              if constexpr (std::is_same_v<T, float>)
                s = l1 ? reduce::simd::sum_abs_f32(xs, n) : reduce::simd::sum_sq_f32(xs, n);
              else
                s = l1 ? reduce::simd::sum_abs_f64(xs, n) : reduce::simd::sum_sq_f64(xs, n);
              acc[0] = s;
            } else {
              std::fill(acc.begin(), acc.end(), 0.0);
              reduce::simd::add_columns(
                  l1 ? reduce::simd::ColTerm::kAbs : reduce::simd::ColTerm::kSquare, xs, inner, n,
                  acc.data(), inner);
            }
            // 1 / norm. A zero norm (0 / 0 = +0, as the scalar path writes it), a NaN
            // one or one so small that 1 / norm overflows (double subnormals) takes
            // the scalar division.
            bool tiny = false;
            for (size_t i = 0; i < acc.size(); ++i) {
              const double norm = l1 ? acc[i] : std::sqrt(acc[i]);
              tiny = tiny || !(norm >= 1e-300);
              acc[i] = norm;
              inv[i] = 1.0 / norm;
            }
            if (tiny) {
              for (int64_t k = 0; k < n; ++k) {
                for (int64_t i = 0; i < inner; ++i) {
                  const double norm = acc[static_cast<size_t>(i)];
                  const double v = static_cast<double>(xs[k * inner + i]);
                  ys[k * inner + i] = static_cast<T>(norm == 0 ? 0.0 : v / norm);
                }
              }
            } else if (inner == 1) {
              affine(xs, ys, n, 0.0, inv[0], -0.0);
            } else {
              for (int64_t k = 0; k < n; ++k)
                scale_rows(xs + k * inner, inv.data(), ys + k * inner, inner);
            }
          }
        });
  }

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
