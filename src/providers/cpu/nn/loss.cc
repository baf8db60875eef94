// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, which share the loss computation:
// float16 / bfloat16 / float / double; arithmetic in double.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "providers/cpu/nn/double_io.h"

namespace ortlite {
namespace nn {
namespace {

enum class LossReduction { kNone, kSum, kMean };

class LossBase : public Kernel {
 public:
  explicit LossBase(const KernelInfo& info)
      : has_ignore_(info.has_attr("ignore_index")), ignore_(info.attr_int("ignore_index", 0)) {
    const std::string r = info.attr_string("reduction", "mean");
    if (r == "none") {
      reduction_ = LossReduction::kNone;
    } else if (r == "sum") {
      reduction_ = LossReduction::kSum;
    } else if (r == "mean") {
      reduction_ = LossReduction::kMean;
    } else {
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'reduction' = '" + r + "' must be none, sum or mean");
    }
  }

 protected:
  // logp: [N, C, D] values (as double) of the log-probabilities; writes output 0.
  void write_loss(KernelContext& ctx, DataType dt, const std::vector<double>& logp,
                  const Shape& in_shape, const Tensor& target, const Tensor* weight) const {
    const Shape& ts = target.shape();
    if (in_shape.size() < 2 || ts.size() + 1 != in_shape.size() || ts[0] != in_shape[0]) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input shape " + shape_to_string(in_shape) + " must be [N, C, d1, ...] and " +
                   "the target shape " + shape_to_string(ts) + " [N, d1, ...]");
    }
    for (size_t i = 1; i < ts.size(); ++i) {
      if (ts[i] != in_shape[i + 1]) {
        ctx.fail(StatusCode::kInvalidArgument, "target shape " + shape_to_string(ts) +
                                                   " does not match input shape " +
                                                   shape_to_string(in_shape));
      }
    }
    const int64_t n = in_shape[0], c = in_shape[1], d = dims_product(in_shape, 2, in_shape.size());
    std::vector<int64_t> tgt = read_int_tensor(ctx, target, "target");
    std::vector<double> w;
    if (weight) {
      if (weight->rank() != 1 || weight->dim(0) != c || weight->dtype() != dt) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "input 'weight' must be 1-D of C = " + std::to_string(c) +
                     " values of the input type, got " + shape_to_string(weight->shape()));
      }
      w.resize(static_cast<size_t>(c));
      ORTLITE_DISPATCH_FLOAT(dt, "loss weight", [&](auto tag) {
        using T = decltype(tag);
        const T* p = weight->data<T>();
        for (int64_t i = 0; i < c; ++i) w[static_cast<size_t>(i)] = to_double(p[i]);
      });
    }
    std::vector<double> loss(static_cast<size_t>(n * d));
    double wsum = 0, lsum = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < d; ++j) {
        const size_t at = static_cast<size_t>(i * d + j);
        const int64_t t = tgt[at];
        if (has_ignore_ && t == ignore_) {
          loss[at] = 0;
          continue;
        }
        if (t < 0 || t >= c) {
          ctx.fail(StatusCode::kInvalidArgument, "target value " + std::to_string(t) +
                                                     " is out of range [0, " + std::to_string(c) +
                                                     ")");
        }
        const double wt = weight ? w[static_cast<size_t>(t)] : 1.0;
        loss[at] = -logp[static_cast<size_t>((i * c + t) * d + j)] * wt;
        wsum += wt;
        lsum += loss[at];
      }
    }
    ORTLITE_DISPATCH_FLOAT(dt, "loss", [&](auto tag) {
      using T = decltype(tag);
      if (reduction_ == LossReduction::kNone) {
        Tensor& y = ctx.allocate_output(0, dt, ts);
        T* out = y.data<T>();
        for (size_t i = 0; i < loss.size(); ++i) out[i] = from_double<T>(loss[i]);
      } else {
        Tensor& y = ctx.allocate_output(0, dt, {});
        double v = lsum;
        if (reduction_ == LossReduction::kMean) {
          v = lsum / wsum;  // 0 / 0 = NaN when every target is ignored, as in onnx
        }
        y.data<T>()[0] = from_double<T>(v);
      }
    });
  }

  bool has_ignore_;
  int64_t ignore_;
  LossReduction reduction_ = LossReduction::kMean;
};

class NllLoss final : public LossBase {
 public:
  explicit NllLoss(const KernelInfo& info) : LossBase(info) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& target = ctx.required_input(1);
    write_loss(ctx, x.dtype(), load_doubles(x, "NegativeLogLikelihoodLoss"), x.shape(), target,
               ctx.input(2));
  }
};

class SoftmaxCrossEntropy final : public LossBase {
 public:
  explicit SoftmaxCrossEntropy(const KernelInfo& info) : LossBase(info) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& target = ctx.required_input(1);
    if (x.rank() < 2) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'scores' must be [N, C, ...], got " + shape_to_string(x.shape()));
    }
    std::vector<double> v = load_doubles(x, "SoftmaxCrossEntropyLoss");
    const int64_t n = x.dim(0), c = x.dim(1), d = dims_product(x.shape(), 2, x.rank());
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < d; ++j) {
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t k = 0; k < c; ++k)
          mx = std::max(mx, v[static_cast<size_t>((i * c + k) * d + j)]);
        double s = 0;
        for (int64_t k = 0; k < c; ++k)
          s += std::exp(v[static_cast<size_t>((i * c + k) * d + j)] - mx);
        const double ls = std::log(s) + mx;
        for (int64_t k = 0; k < c; ++k) v[static_cast<size_t>((i * c + k) * d + j)] -= ls;
      }
    }
    write_loss(ctx, x.dtype(), v, x.shape(), target, ctx.input(2));
    if (ctx.num_outputs() > 1) {
      ORTLITE_DISPATCH_FLOAT(x.dtype(), "SoftmaxCrossEntropyLoss", [&](auto tag) {
        using T = decltype(tag);
        Tensor& lp = ctx.allocate_output(1, x.dtype(), x.shape());
        T* out = lp.data<T>();
        for (size_t i = 0; i < v.size(); ++i) out[i] = from_double<T>(v[i]);
      });
    }
  }
};

}  // namespace

void register_loss(KernelRegistry& r) {
  r.add("", "NegativeLogLikelihoodLoss", 12, 12, make_factory<NllLoss>());
  r.add("", "NegativeLogLikelihoodLoss", 13, 21, make_factory<NllLoss>());
  r.add("", "NegativeLogLikelihoodLoss", 22, kNewestOpset, make_factory<NllLoss>());
  r.add("", "SoftmaxCrossEntropyLoss", 12, 12, make_factory<SoftmaxCrossEntropy>());
  r.add("", "SoftmaxCrossEntropyLoss", 13, kNewestOpset, make_factory<SoftmaxCrossEntropy>());
}

}  // namespace nn
}  // namespace ortlite
