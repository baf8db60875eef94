// Kernels added for ONNX node conformance: NegativeLogLikelihoodLoss,
// SoftmaxCrossEntropyLoss, RMSNormalization, LpNormalization, Hardmax.
// float16 / bfloat16 / float / double; arithmetic in double.
#include <cmath>
#include <limits>
#include <type_traits>

#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {
namespace {

template <typename T>
double to_d(T v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

template <typename T>
T from_d(double v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

std::vector<int64_t> read_int_tensor(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.dtype() != DataType::kInt64 && t.dtype() != DataType::kInt32) {
    ctx.fail(
        StatusCode::kInvalidArgument,
        std::string("input '") + what + "' must be int32 or int64, got " + dtype_name(t.dtype()));
  }
  return tensor_to_int64s(t);
}

int64_t product(const Shape& s, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e; ++i) p *= s[i];
  return p;
}

// ---------------------------------------------------------------------------------------
// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss share the loss computation.

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
    const int64_t n = in_shape[0], c = in_shape[1], d = product(in_shape, 2, in_shape.size());
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
        for (int64_t i = 0; i < c; ++i) w[static_cast<size_t>(i)] = to_d(p[i]);
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
        for (size_t i = 0; i < loss.size(); ++i) out[i] = from_d<T>(loss[i]);
      } else {
        Tensor& y = ctx.allocate_output(0, dt, {});
        double v = lsum;
        if (reduction_ == LossReduction::kMean) {
          v = lsum / wsum;  // 0 / 0 = NaN when every target is ignored, as in onnx
        }
        y.data<T>()[0] = from_d<T>(v);
      }
    });
  }

  bool has_ignore_;
  int64_t ignore_;
  LossReduction reduction_ = LossReduction::kMean;
};

std::vector<double> to_doubles(const Tensor& x, const char* what) {
  std::vector<double> v(static_cast<size_t>(x.numel()));
  ORTLITE_DISPATCH_FLOAT(x.dtype(), what, [&](auto tag) {
    using T = decltype(tag);
    const T* p = x.data<T>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = to_d(p[i]);
  });
  return v;
}

class NllLoss final : public LossBase {
 public:
  explicit NllLoss(const KernelInfo& info) : LossBase(info) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& target = ctx.required_input(1);
    write_loss(ctx, x.dtype(), to_doubles(x, "NegativeLogLikelihoodLoss"), x.shape(), target,
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
    std::vector<double> v = to_doubles(x, "SoftmaxCrossEntropyLoss");
    const int64_t n = x.dim(0), c = x.dim(1), d = product(x.shape(), 2, x.rank());
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
        for (size_t i = 0; i < v.size(); ++i) out[i] = from_d<T>(v[i]);
      });
    }
  }
};

// ---------------------------------------------------------------------------------------
// RMSNormalization (opset 23): y = x / sqrt(mean(x^2 over axes [axis, rank)) + eps) * scale

class RmsNorm final : public Kernel {
 public:
  explicit RmsNorm(const KernelInfo& info)
      : axis_(info.attr_int("axis", -1)), eps_(info.attr_float("epsilon", 1e-5f)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& scale = ctx.required_input(1);
    const int64_t rank = static_cast<int64_t>(x.rank());
    if (axis_ < -rank || axis_ >= rank) {
      ctx.fail(StatusCode::kInvalidArgument, "attribute 'axis' = " + std::to_string(axis_) +
                                                 " is out of range for input shape " +
                                                 shape_to_string(x.shape()));
    }
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    const Shape inner_shape(x.shape().begin() + static_cast<std::ptrdiff_t>(axis), x.shape().end());
    const int64_t inner = product(x.shape(), axis, x.rank());
    const int64_t outer = product(x.shape(), 0, axis);
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
      parallel_for(ctx.thread_pool(), outer, static_cast<double>(inner) * 4,
                   [&](int64_t b, int64_t e) {
                     for (int64_t o = b; o < e; ++o) {
                       const T* row = src + o * inner;
                       double ss2 = 0;
                       for (int64_t k = 0; k < inner; ++k) ss2 += to_d(row[k]) * to_d(row[k]);
                       const double inv = 1.0 / std::sqrt(ss2 / static_cast<double>(inner) + eps);
                       for (int64_t k = 0; k < inner; ++k) {
                         dst[o * inner + k] =
                             from_d<T>(to_d(row[k]) * inv * to_d(sc[sidx[static_cast<size_t>(k)]]));
                       }
                     }
                   });
    });
  }

 private:
  int64_t axis_;
  float eps_;
};

// ---------------------------------------------------------------------------------------
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
    const int64_t rank = static_cast<int64_t>(x.rank());
    if (axis_ < -rank || axis_ >= rank) {
      ctx.fail(StatusCode::kInvalidArgument, "attribute 'axis' = " + std::to_string(axis_) +
                                                 " is out of range for input shape " +
                                                 shape_to_string(x.shape()));
    }
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    const int64_t outer = product(x.shape(), 0, axis), n = x.dim(axis),
                  inner = product(x.shape(), axis + 1, x.rank());
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    const int64_t p = p_;
    ORTLITE_DISPATCH_FLOAT(x.dtype(), "LpNormalization", [&](auto tag) {
      using T = decltype(tag);
      const T* src = x.data<T>();
      T* dst = y.data<T>();
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          double s = 0;
          for (int64_t k = 0; k < n; ++k) {
            const double v = to_d(src[(o * n + k) * inner + i]);
            s += p == 1 ? std::fabs(v) : v * v;
          }
          const double norm = p == 1 ? s : std::sqrt(s);
          for (int64_t k = 0; k < n; ++k) {
            const int64_t at = (o * n + k) * inner + i;
            dst[at] = from_d<T>(norm == 0 ? 0.0 : to_d(src[at]) / norm);  // 0 / 0 = 0
          }
        }
      }
    });
  }

 private:
  int64_t axis_;
  int64_t p_;
};

// ---------------------------------------------------------------------------------------
// Hardmax: 1 at the first maximum along the axis (opset 13), or over the flattened dims
// [axis, rank) (opsets 1-12), 0 elsewhere.

class Hardmax final : public Kernel {
 public:
  explicit Hardmax(const KernelInfo& info)
      : axis_(info.attr_int("axis", info.opset() >= 13 ? -1 : 1)), flatten_(info.opset() < 13) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const int64_t rank = static_cast<int64_t>(x.rank());
    if (axis_ < -rank || axis_ >= rank) {
      ctx.fail(StatusCode::kInvalidArgument, "attribute 'axis' = " + std::to_string(axis_) +
                                                 " is out of range for input shape " +
                                                 shape_to_string(x.shape()));
    }
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    int64_t outer = product(x.shape(), 0, axis), n, inner;
    if (flatten_) {
      n = product(x.shape(), axis, x.rank());
      inner = 1;
    } else {
      n = x.dim(axis);
      inner = product(x.shape(), axis + 1, x.rank());
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    ORTLITE_DISPATCH_FLOAT(x.dtype(), "Hardmax", [&](auto tag) {
      using T = decltype(tag);
      const T* src = x.data<T>();
      T* dst = y.data<T>();
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          int64_t best = 0;
          double bv = -std::numeric_limits<double>::infinity();
          for (int64_t k = 0; k < n; ++k) {
            const double v = to_d(src[(o * n + k) * inner + i]);
            if (k == 0 || v > bv) {
              bv = v;
              best = k;
            }
          }
          for (int64_t k = 0; k < n; ++k) {
            dst[(o * n + k) * inner + i] = from_d<T>(k == best ? 1.0 : 0.0);
          }
        }
      }
    });
  }

 private:
  int64_t axis_;
  bool flatten_;
};

}  // namespace

void register_loss_conf(KernelRegistry& r) {
  r.add("", "NegativeLogLikelihoodLoss", 12, 12, make_factory<NllLoss>());
  r.add("", "NegativeLogLikelihoodLoss", 13, 21, make_factory<NllLoss>());
  r.add("", "NegativeLogLikelihoodLoss", 22, kNewestOpset, make_factory<NllLoss>());
  r.add("", "SoftmaxCrossEntropyLoss", 12, 12, make_factory<SoftmaxCrossEntropy>());
  r.add("", "SoftmaxCrossEntropyLoss", 13, kNewestOpset, make_factory<SoftmaxCrossEntropy>());
  r.add("", "RMSNormalization", 23, kNewestOpset, make_factory<RmsNorm>());
  r.add("", "LpNormalization", 1, 21, make_factory<LpNorm>());
  r.add("", "LpNormalization", 22, kNewestOpset, make_factory<LpNorm>());
  r.add("", "Hardmax", 1, 10, make_factory<Hardmax>());
  r.add("", "Hardmax", 11, 12, make_factory<Hardmax>());
  r.add("", "Hardmax", 13, kNewestOpset, make_factory<Hardmax>());
}

}  // namespace nn
}  // namespace ortlite
