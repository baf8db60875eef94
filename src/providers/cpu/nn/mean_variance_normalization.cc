// MeanVarianceNormalization: float16 / bfloat16 / float / double; arithmetic in double.
#include <cmath>
#include <vector>

#include "providers/cpu/nn/double_io.h"

namespace ortlite {
namespace nn {
namespace {

// MeanVarianceNormalization: (x - mean) / (sqrt(E[x^2] - mean^2) + 1e-9) over `axes`.
class Mvn final : public Kernel {
 public:
  explicit Mvn(const KernelInfo& info) : axes_(info.attr_ints("axes", {0, 2, 3})) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const int64_t rank = static_cast<int64_t>(x.rank());
    std::vector<char> reduce(static_cast<size_t>(rank), 0);
    for (int64_t a : axes_) {
      reduce[static_cast<size_t>(normalize_axis(a, rank, "attribute 'axes'"))] = 1;
    }
    const std::vector<double> v = load_doubles(x, "MeanVarianceNormalization");
    // Group key of each element: its index over the kept axes.
    const Shape& s = x.shape();
    std::vector<int64_t> key(v.size());
    int64_t groups = 1;
    for (int64_t d = 0; d < rank; ++d) {
      if (!reduce[static_cast<size_t>(d)]) groups *= s[static_cast<size_t>(d)];
    }
    std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
    for (size_t f = 0; f < v.size(); ++f) {
      int64_t k = 0;
      for (int64_t d = 0; d < rank; ++d) {
        if (!reduce[static_cast<size_t>(d)])
          k = k * s[static_cast<size_t>(d)] + idx[static_cast<size_t>(d)];
      }
      key[f] = k;
      for (int64_t d = rank; d-- > 0;) {
        if (++idx[static_cast<size_t>(d)] < s[static_cast<size_t>(d)]) break;
        idx[static_cast<size_t>(d)] = 0;
      }
    }
    std::vector<double> sum(static_cast<size_t>(groups), 0), sq(static_cast<size_t>(groups), 0),
        cnt(static_cast<size_t>(groups), 0);
    for (size_t f = 0; f < v.size(); ++f) {
      const size_t k = static_cast<size_t>(key[f]);
      sum[k] += v[f];
      sq[k] += v[f] * v[f];
      cnt[k] += 1;
    }
    std::vector<double> out(v.size());
    for (size_t f = 0; f < v.size(); ++f) {
      const size_t k = static_cast<size_t>(key[f]);
      const double mean = sum[k] / cnt[k];
      const double var = sq[k] / cnt[k] - mean * mean;
      out[f] = (v[f] - mean) / (std::sqrt(std::max(var, 0.0)) + 1e-9);
    }
    store_doubles(ctx.allocate_output(0, x.dtype(), x.shape()), out, "MeanVarianceNormalization");
  }

 private:
  std::vector<int64_t> axes_;
};

}  // namespace

void register_mean_variance_normalization(KernelRegistry& r) {
  r.add("", "MeanVarianceNormalization", 9, 12, make_factory<Mvn>());
  r.add("", "MeanVarianceNormalization", 13, kNewestOpset, make_factory<Mvn>());
}

}  // namespace nn
}  // namespace ortlite
