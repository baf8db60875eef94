// MeanVarianceNormalization: float16 / bfloat16 / float / double; arithmetic in double.
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
    if (x.dtype() == DataType::kFloat) return run_fast<float>(ctx, x, reduce);
    if (x.dtype() == DataType::kDouble) return run_fast<double>(ctx, x, reduce);
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
  // float / double: the dims split into rows (the leading dims) of the longest trailing run
  // of dims that are all reduced or all kept, so every row is one contiguous run. A reduced
  // run adds its vectorized sums to one group; a kept run adds element-wise to `inner`
  // consecutive groups. Sums in double, and each output computed in double as above.
  template <typename T>
  void run_fast(KernelContext& ctx, const Tensor& x, const std::vector<char>& reduce) const {
    const Shape& s = x.shape();
    const size_t rank = s.size();
    Tensor& yt = ctx.allocate_output(0, x.dtype(), s);
    if (x.numel() == 0) return;
    size_t t = rank;
    const char tail = rank == 0 ? 0 : reduce[rank - 1];
    while (t > 0 && reduce[t - 1] == tail) --t;
    const int64_t inner = dims_product(s, t, rank);
    const int64_t rows = dims_product(s, 0, t);
    int64_t groups = tail ? 1 : inner;
    for (size_t d = 0; d < t; ++d)
      if (!reduce[d]) groups *= s[d];
    const int64_t count = x.numel() / groups;
    // The group (first group for a kept run) of each row.
    std::vector<int64_t> row_group(static_cast<size_t>(rows));
    {
      std::vector<int64_t> idx(t, 0);
      for (int64_t r = 0; r < rows; ++r) {
        int64_t k = 0;
        for (size_t d = 0; d < t; ++d)
          if (!reduce[d]) k = k * s[d] + idx[d];
        row_group[static_cast<size_t>(r)] = tail ? k : k * inner;
        for (size_t d = t; d-- > 0;) {
          if (++idx[d] < s[d]) break;
          idx[d] = 0;
        }
      }
    }
    const T* xp = x.data<T>();
    T* yp = yt.data<T>();
    std::vector<double> sum(static_cast<size_t>(groups), 0.0), sq(sum);
    ThreadPool* pool = ctx.thread_pool();
    if (tail) {
      std::vector<double> rs(static_cast<size_t>(rows)), rq(rs);
      parallel_for(pool, rows, 2.0 * static_cast<double>(inner), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          const T* row = xp + r * inner;
          if constexpr (std::is_same_v<T, float>) {
            rs[r] = reduce::simd::sum_f32(row, inner);
            rq[r] = reduce::simd::sum_sq_f32(row, inner);
          } else {
            rs[r] = reduce::simd::sum_f64(row, inner);
            rq[r] = reduce::simd::sum_sq_f64(row, inner);
          }
        }
      });
      for (int64_t r = 0; r < rows; ++r) {
        sum[row_group[r]] += rs[r];
        sq[row_group[r]] += rq[r];
      }
    } else {
      for (int64_t r = 0; r < rows; ++r) {
        const T* row = xp + r * inner;
        reduce::simd::add_columns(reduce::simd::ColTerm::kPlain, row, 0, 1, &sum[row_group[r]],
                                  inner);
        reduce::simd::add_columns(reduce::simd::ColTerm::kSquare, row, 0, 1, &sq[row_group[r]],
                                  inner);
      }
    }
    // Per group: the mean and 1 / (standard deviation + 1e-9).
    const double n = static_cast<double>(count);
    for (int64_t g = 0; g < groups; ++g) {
      const double mean = sum[g] / n;
      const double var = sq[g] / n - mean * mean;
      sum[g] = mean;
      sq[g] = 1.0 / (std::sqrt(std::max(var, 0.0)) + 1e-9);
    }
    parallel_for(pool, rows, 2.0 * static_cast<double>(inner), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t g = row_group[r];
        if (tail) {
          affine(xp + r * inner, yp + r * inner, inner, sum[g], sq[g], -0.0);
        } else {
          for (int64_t i = 0; i < inner; ++i) {
            yp[r * inner + i] =
                static_cast<T>((static_cast<double>(xp[r * inner + i]) - sum[g + i]) * sq[g + i]);
          }
        }
      }
    });
  }

  std::vector<int64_t> axes_;
};

}  // namespace

void register_mean_variance_normalization(KernelRegistry& r) {
  r.add("", "MeanVarianceNormalization", 9, 12, make_factory<Mvn>());
  r.add("", "MeanVarianceNormalization", 13, kNewestOpset, make_factory<Mvn>());
}

}  // namespace nn
}  // namespace ortlite
