// Det (opsets 11-22): the determinant of each trailing [M, M] matrix.
#include <cmath>
#include <vector>

#include "providers/cpu/math/math_kernels.h"

namespace ortlite {
namespace {

// Det: determinant of the trailing [M, M] matrices (LU with partial pivoting, double).
class Det final : public Kernel {
 public:
  explicit Det(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    if (x.rank() < 2 || x.dim(x.rank() - 1) != x.dim(x.rank() - 2)) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'X' must be [..., M, M], got " + shape_to_string(x.shape()));
    }
    const int64_t m = x.dim(x.rank() - 1);
    const Shape out_shape(x.shape().begin(), x.shape().end() - 2);
    const int64_t mats = shape_size(out_shape);
    std::vector<double> v(static_cast<size_t>(x.numel()));
    ORTLITE_DISPATCH_FLOAT(x.dtype(), "Det", [&](auto tag) {
      using T = decltype(tag);
      const T* p = x.data<T>();
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(static_cast<float>(p[i]));
      if constexpr (std::is_same_v<T, double>) {
        for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
      }
    });
    std::vector<double> det(static_cast<size_t>(mats));
    for (int64_t b = 0; b < mats; ++b) {
      double* a = &v[static_cast<size_t>(b * m * m)];
      double d = 1;
      for (int64_t c = 0; c < m && d != 0; ++c) {
        int64_t piv = c;
        for (int64_t r = c + 1; r < m; ++r)
          if (std::fabs(a[r * m + c]) > std::fabs(a[piv * m + c])) piv = r;
        if (a[piv * m + c] == 0) {
          d = 0;
          break;
        }
        if (piv != c) {
          for (int64_t k = 0; k < m; ++k) std::swap(a[c * m + k], a[piv * m + k]);
          d = -d;
        }
        d *= a[c * m + c];
        for (int64_t r = c + 1; r < m; ++r) {
          const double f = a[r * m + c] / a[c * m + c];
          for (int64_t k = c; k < m; ++k) a[r * m + k] -= f * a[c * m + k];
        }
      }
      det[static_cast<size_t>(b)] = d;
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), out_shape);
    ORTLITE_DISPATCH_FLOAT(x.dtype(), "Det", [&](auto tag) {
      using T = decltype(tag);
      T* p = y.data<T>();
      for (size_t i = 0; i < det.size(); ++i) {
        if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
          p[i] = T(static_cast<float>(det[i]));
        } else {
          p[i] = static_cast<T>(det[i]);
        }
      }
    });
  }
};

}  // namespace

void register_det_kernels(KernelRegistry& r) {
  r.add("", "Det", 11, 21, make_factory<Det>());
  r.add("", "Det", 22, kNewestOpset, make_factory<Det>());
}

}  // namespace ortlite
