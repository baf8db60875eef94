// Kernels added for ONNX node conformance: GroupNormalization (opset 21),
// LRN, MeanVarianceNormalization, LpPool. Arithmetic in double.
#include <cmath>
#include <type_traits>

#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {
namespace {

template <typename T>
double np_to_d(T v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

std::vector<double> np_load(const Tensor& t, const char* what) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  ORTLITE_DISPATCH_FLOAT(t.dtype(), what, [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = np_to_d(p[i]);
  });
  return v;
}

void np_store(Tensor& t, const std::vector<double>& v, const char* what) {
  ORTLITE_DISPATCH_FLOAT(t.dtype(), what, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
        p[i] = T(static_cast<float>(v[i]));
      } else {
        p[i] = static_cast<T>(v[i]);
      }
    }
  });
}

// GroupNormalization (opset 21): X [N, C, ...], scale and bias [C]; statistics over each
// group of C / num_groups channels and all spatial positions.
class GroupNorm final : public Kernel {
 public:
  explicit GroupNorm(const KernelInfo& info)
      : groups_(info.attr_int_required("num_groups")),
        eps_(info.attr_float("epsilon", 1e-5f)),
        per_group_scale_(info.opset() < 21) {
    if (groups_ < 1) info.fail(StatusCode::kInvalidArgument, "attribute 'num_groups' < 1");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& scale = ctx.required_input(1);
    const Tensor& bias = ctx.required_input(2);
    if (x.rank() < 2 || x.dim(1) % groups_ != 0) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'X' " + shape_to_string(x.shape()) +
                                                 " must be [N, C, ...] with C a multiple of " +
                                                 "num_groups = " + std::to_string(groups_));
    }
    const int64_t n = x.dim(0), c = x.dim(1);
    const int64_t want = per_group_scale_ ? groups_ : c;
    if (scale.numel() != want || bias.numel() != want || scale.dtype() != x.dtype() ||
        bias.dtype() != x.dtype()) {
      ctx.fail(StatusCode::kInvalidArgument, "inputs 'scale' and 'bias' must hold " +
                                                 std::to_string(want) + " values of the type of X");
    }
    int64_t sp = 1;
    for (size_t i = 2; i < x.rank(); ++i) sp *= x.dim(i);
    std::vector<double> v = np_load(x, "GroupNormalization");
    const std::vector<double> s = np_load(scale, "GroupNormalization");
    const std::vector<double> b = np_load(bias, "GroupNormalization");
    const int64_t cg = c / groups_;
    const int64_t len = cg * sp;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t g = 0; g < groups_; ++g) {
        double* p = &v[static_cast<size_t>((i * c + g * cg) * sp)];
        double mean = 0, var = 0;
        for (int64_t k = 0; k < len; ++k) mean += p[k];
        mean /= static_cast<double>(len);
        for (int64_t k = 0; k < len; ++k) var += (p[k] - mean) * (p[k] - mean);
        var /= static_cast<double>(len);
        const double inv = 1.0 / std::sqrt(var + eps_);
        for (int64_t k = 0; k < len; ++k) {
          const int64_t ch = per_group_scale_ ? g : g * cg + k / sp;
          p[k] = (p[k] - mean) * inv * s[static_cast<size_t>(ch)] + b[static_cast<size_t>(ch)];
        }
      }
    }
    np_store(ctx.allocate_output(0, x.dtype(), x.shape()), v, "GroupNormalization");
  }

 private:
  int64_t groups_;
  float eps_;
  bool per_group_scale_;
};

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
    const std::vector<double> v = np_load(x, "LRN");
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
    np_store(ctx.allocate_output(0, x.dtype(), x.shape()), out, "LRN");
  }

 private:
  float alpha_, beta_, bias_;
  int64_t size_;
};

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
    const std::vector<double> v = np_load(x, "MeanVarianceNormalization");
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
    np_store(ctx.allocate_output(0, x.dtype(), x.shape()), out, "MeanVarianceNormalization");
  }

 private:
  std::vector<int64_t> axes_;
};

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
    const std::vector<double> v = np_load(x, "LpPool");
    std::vector<double> out(static_cast<size_t>(x.dim(0) * x.dim(1) * out_sp));
    const double p = static_cast<double>(p_);
    std::vector<int64_t> oi(k), wi(k);
    for (int64_t nc = 0; nc < x.dim(0) * x.dim(1); ++nc) {
      const double* src = &v[static_cast<size_t>(nc * in_sp)];
      for (int64_t o = 0; o < out_sp; ++o) {
        int64_t rem = o;
        for (size_t i = k; i-- > 0;) {
          oi[i] = rem % g.out[i];
          rem /= g.out[i];
        }
        double acc = 0;
        for (int64_t w = 0; w < win; ++w) {
          int64_t wr = w, off = 0;
          bool inside = true;
          for (size_t i = k; i-- > 0;) {
            wi[i] = wr % g.kernel[i];
            wr /= g.kernel[i];
          }
          for (size_t i = 0; i < k; ++i) {
            const int64_t pos = oi[i] * g.stride[i] - g.pad_begin[i] + wi[i] * g.dilation[i];
            if (pos < 0 || pos >= g.in[i]) {
              inside = false;
              break;
            }
            off = off * g.in[i] + pos;
          }
          if (inside) acc += std::pow(std::fabs(src[off]), p);
        }
        out[static_cast<size_t>(nc * out_sp + o)] = std::pow(acc, 1.0 / p);
      }
    }
    np_store(ctx.allocate_output(0, x.dtype(), out_shape), out, "LpPool");
  }

 private:
  SpatialAttrs attrs_;
  int64_t p_;
  bool ceil_mode_;
};

}  // namespace

void register_norm_pool_conf(KernelRegistry& r) {
  r.add("", "GroupNormalization", 18, 20, make_factory<GroupNorm>());
  r.add("", "GroupNormalization", 21, kNewestOpset, make_factory<GroupNorm>());
  r.add("", "LRN", 1, 12, make_factory<Lrn>());
  r.add("", "LRN", 13, kNewestOpset, make_factory<Lrn>());
  r.add("", "MeanVarianceNormalization", 9, 12, make_factory<Mvn>());
  r.add("", "MeanVarianceNormalization", 13, kNewestOpset, make_factory<Mvn>());
  r.add("", "LpPool", 2, 10, make_factory<LpPool>());
  r.add("", "LpPool", 11, 17, make_factory<LpPool>());
  r.add("", "LpPool", 18, 21, make_factory<LpPool>());
  r.add("", "LpPool", 22, kNewestOpset, make_factory<LpPool>());
}

}  // namespace nn
}  // namespace ortlite
