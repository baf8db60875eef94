// LRN (local response normalization): float16 / bfloat16 / float / double; arithmetic in
// double.
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
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t ch = 0; ch < c; ++ch) {
        const int64_t lo = std::max<int64_t>(0, ch - c1), hi = std::min(c - 1, ch + c2);
        for (int64_t k = 0; k < sp; ++k) {
          double ss = 0;
          for (int64_t j = lo; j <= hi; ++j) {
            const double e = v[static_cast<size_t>((i * c + j) * sp + k)];
            ss += e * e;
          }
          const size_t at = static_cast<size_t>((i * c + ch) * sp + k);
          out[at] = v[at] / std::pow(bias_ + alpha_ / static_cast<double>(size_) * ss,
                                     static_cast<double>(beta_));
        }
      }
    }
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
