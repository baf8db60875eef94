// LRN (local response normalization): float16 / bfloat16 / float / double; arithmetic in
// double.
#include <algorithm>
#include <cmath>
#include <vector>

#include "providers/cpu/nn/double_io.h"

namespace ortlite {
namespace nn {
namespace {

// LRN: y = x / (bias + alpha / size * sum of x^2 over neighbouring channels) ^ beta.
class Lrn final : public Kernel {
 public:
  explicit Lrn(const KernelInfo& info)
      : alpha_(info.attr_float("alpha", 1e-4f)),
        beta_(info.attr_float("beta", 0.75f)),
        bias_(info.attr_float("bias", 1.0f)),
        size_(info.attr_int_required("size")) {
    if (size_ < 1) info.fail(StatusCode::kInvalidArgument, "attribute 'size' must be >= 1");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    if (x.rank() < 2) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'X' must be [N, C, ...], got " + shape_to_string(x.shape()));
    }
    const int64_t n = x.dim(0), c = x.dim(1);
    int64_t sp = 1;
    for (size_t i = 2; i < x.rank(); ++i) sp *= x.dim(i);
    const std::vector<double> v = load_doubles(x, "LRN");
    std::vector<double> out(v.size());
    const int64_t c1 = (size_ - 1) / 2, c2 = size_ / 2;  // floor / ceil of (size - 1) / 2
    const double scale = alpha_ / static_cast<double>(size_), bias = bias_, beta = beta_;
    // d^0.75 (the usual beta) as sqrt(d * sqrt(d)): within about 2 ulp of pow in double,
    // and several times faster than pow.
    const bool three_quarters = beta_ == 0.75f;
    // Tasks of one (image, channel) plane: the squares of its window's channels summed in
    // channel order per position (as a plain loop over the window adds them).
    const double cost =
        static_cast<double>(sp) * static_cast<double>(size_ + (three_quarters ? 10 : 40));
    parallel_for(ctx.thread_pool(), n * c, cost, [&](int64_t b, int64_t e) {
      std::vector<double> ss(static_cast<size_t>(sp));
      for (int64_t t = b; t < e; ++t) {
        const int64_t i = t / c, ch = t % c;
        const int64_t lo = std::max<int64_t>(0, ch - c1), hi = std::min(c - 1, ch + c2);
        std::fill(ss.begin(), ss.end(), 0.0);
        for (int64_t j = lo; j <= hi; ++j) {
          const double* vj = v.data() + (i * c + j) * sp;
          for (int64_t k = 0; k < sp; ++k) ss[static_cast<size_t>(k)] += vj[k] * vj[k];
        }
        const double* vc = v.data() + t * sp;
        double* oc = out.data() + t * sp;
        if (three_quarters) {
          for (int64_t k = 0; k < sp; ++k) {
            const double d = bias + scale * ss[static_cast<size_t>(k)];
            oc[k] = vc[k] / std::sqrt(d * std::sqrt(d));
          }
        } else {
          for (int64_t k = 0; k < sp; ++k)
            oc[k] = vc[k] / std::pow(bias + scale * ss[static_cast<size_t>(k)], beta);
        }
      }
    });
    store_doubles(ctx.allocate_output(0, x.dtype(), x.shape()), out, "LRN");
  }

 private:
  float alpha_, beta_, bias_;
  int64_t size_;
};

}  // namespace

void register_lrn(KernelRegistry& r) {
  r.add("", "LRN", 1, 12, make_factory<Lrn>());
  r.add("", "LRN", 13, kNewestOpset, make_factory<Lrn>());
}

}  // namespace nn
}  // namespace ortlite
