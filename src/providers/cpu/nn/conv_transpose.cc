// ConvTranspose (opsets 1-23), added for ONNX node conformance: N-D, groups, strides,
// dilations, pads / auto_pad, output_padding and output_shape, following onnx's reference
// for the output geometry. A direct scatter loop in double: correct, not fast.
#include <cmath>
#include <type_traits>

#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {
namespace {

template <typename T>
double ct_to_d(T v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

class ConvTranspose final : public Kernel {
 public:
  explicit ConvTranspose(const KernelInfo& info)
      : auto_pad_(info.attr_string("auto_pad", "NOTSET")),
        group_(info.attr_int("group", 1)),
        dilations_(info.attr_ints("dilations")),
        strides_(info.attr_ints("strides")),
        pads_(info.attr_ints("pads")),
        has_pads_(info.has_attr("pads")),
        output_padding_(info.attr_ints("output_padding")),
        output_shape_(info.attr_ints("output_shape")),
        has_output_shape_(info.has_attr("output_shape")) {
    if (auto_pad_ != "NOTSET" && auto_pad_ != "SAME_UPPER" && auto_pad_ != "SAME_LOWER" &&
        auto_pad_ != "VALID") {
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'auto_pad' = '" + auto_pad_ + "' is unknown");
    }
    if (group_ < 1) info.fail(StatusCode::kInvalidArgument, "attribute 'group' must be >= 1");
    for (int64_t v : strides_)
      if (v < 1) info.fail(StatusCode::kInvalidArgument, "attribute 'strides' must be >= 1");
    for (int64_t v : dilations_)
      if (v < 1) info.fail(StatusCode::kInvalidArgument, "attribute 'dilations' must be >= 1");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& w = ctx.required_input(1);
    const Tensor* b = ctx.input(2);
    const size_t r = x.rank();
    if (r < 3 || w.rank() != r) {
      ctx.fail(StatusCode::kInvalidArgument, "inputs 'X' " + shape_to_string(x.shape()) +
                                                 " and 'W' " + shape_to_string(w.shape()) +
                                                 " must be [N, C, D...] and [C, M/group, k...]");
    }
    const size_t k = r - 2;
    const int64_t n = x.dim(0), c = x.dim(1);
    if (w.dim(0) != c || c % group_ != 0 || w.dtype() != x.dtype()) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'W' " + shape_to_string(w.shape()) +
                                                 " does not match X " + shape_to_string(x.shape()) +
                                                 " with group " + std::to_string(group_));
    }
    const int64_t mg = w.dim(1), m = mg * group_, cg = c / group_;
    if (b && (b->numel() != m || b->dtype() != x.dtype())) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'B' must hold M = " + std::to_string(m) + " values of the type of X");
    }
    auto attr_or = [&](const std::vector<int64_t>& v, size_t len, int64_t def, const char* what) {
      if (v.empty()) return std::vector<int64_t>(len, def);
      if (v.size() != len) {
        ctx.fail(StatusCode::kInvalidArgument, std::string("attribute '") + what + "' has " +
                                                   std::to_string(v.size()) + " values, expected " +
                                                   std::to_string(len));
      }
      return v;
    };
    const std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
    const std::vector<int64_t> ks(w.shape().begin() + 2, w.shape().end());
    const std::vector<int64_t> s = attr_or(strides_, k, 1, "strides");
    const std::vector<int64_t> d = attr_or(dilations_, k, 1, "dilations");
    const std::vector<int64_t> op = attr_or(output_padding_, k, 0, "output_padding");
    std::vector<int64_t> pb(k, 0), pe(k, 0), out(k);
    const bool same = auto_pad_ == "SAME_UPPER" || auto_pad_ == "SAME_LOWER";
    if (!has_pads_ && same) {
      std::vector<int64_t> os(k);
      for (size_t i = 0; i < k; ++i) os[i] = in[i] * s[i];
      if (has_output_shape_) os = attr_or(output_shape_, k, 0, "output_shape");
      for (size_t i = 0; i < k; ++i) {
        const int64_t total = s[i] * (in[i] - 1) + op[i] + ((ks[i] - 1) * d[i] + 1) - os[i];
        const int64_t half = floor_div(total, 2);
        if (auto_pad_ == "SAME_UPPER") {
          pb[i] = half;
          pe[i] = total - half;
        } else {
          pb[i] = total - half;
          pe[i] = half;
        }
        out[i] = os[i];
      }
    } else {
      if (has_pads_) {
        if (pads_.size() != 2 * k) {
          ctx.fail(StatusCode::kInvalidArgument, "attribute 'pads' has " +
                                                     std::to_string(pads_.size()) +
                                                     " values, expected " + std::to_string(2 * k));
        }
        for (size_t i = 0; i < k; ++i) {
          pb[i] = pads_[i];
          pe[i] = pads_[k + i];
        }
      }
      if (has_output_shape_) {
        out = attr_or(output_shape_, k, 0, "output_shape");
      } else {
        for (size_t i = 0; i < k; ++i) {
          out[i] = s[i] * (in[i] - 1) + op[i] + ((ks[i] - 1) * d[i] + 1) - pb[i] - pe[i];
        }
      }
    }
    Shape out_shape = {n, m};
    int64_t out_sp = 1, in_sp = 1, k_sp = 1;
    for (size_t i = 0; i < k; ++i) {
      if (out[i] < 0) {
        ctx.fail(StatusCode::kInvalidArgument, "the output shape would be negative");
      }
      out_shape.push_back(out[i]);
      out_sp *= out[i];
      in_sp *= in[i];
      k_sp *= ks[i];
    }
    if (out_sp > (int64_t{1} << 28) || n * m * out_sp > (int64_t{1} << 28)) {
      ctx.fail(StatusCode::kInvalidArgument, "the output is too large");
    }
    std::vector<double> xv(static_cast<size_t>(x.numel())), wv(static_cast<size_t>(w.numel())),
        bv(static_cast<size_t>(m), 0.0);
    auto load = [](const Tensor& t, std::vector<double>& v) {
      ORTLITE_DISPATCH_FLOAT(t.dtype(), "ConvTranspose", [&](auto tag) {
        using T = decltype(tag);
        const T* p = t.data<T>();
        for (size_t i = 0; i < v.size(); ++i) v[i] = ct_to_d(p[i]);
      });
    };
    load(x, xv);
    load(w, wv);
    if (b) load(*b, bv);
    std::vector<double> y(static_cast<size_t>(n * m * out_sp));
    for (int64_t bi = 0; bi < n; ++bi)
      for (int64_t mi = 0; mi < m; ++mi)
        for (int64_t o = 0; o < out_sp; ++o)
          y[static_cast<size_t>((bi * m + mi) * out_sp + o)] = bv[static_cast<size_t>(mi)];
    std::vector<int64_t> ii(k), kk(k);
    for (int64_t bi = 0; bi < n; ++bi) {
      for (int64_t ci = 0; ci < c; ++ci) {
        const int64_t g = ci / cg;
        for (int64_t p = 0; p < in_sp; ++p) {
          int64_t rem = p;
          for (size_t i = k; i-- > 0;) {
            ii[i] = rem % in[i];
            rem /= in[i];
          }
          const double xval = xv[static_cast<size_t>((bi * c + ci) * in_sp + p)];
          if (xval == 0) continue;
          for (int64_t q = 0; q < k_sp; ++q) {
            int64_t rq = q;
            for (size_t i = k; i-- > 0;) {
              kk[i] = rq % ks[i];
              rq /= ks[i];
            }
            int64_t off = 0;
            bool inside = true;
            for (size_t i = 0; i < k; ++i) {
              const int64_t pos = ii[i] * s[i] - pb[i] + kk[i] * d[i];
              if (pos < 0 || pos >= out[i]) {
                inside = false;
                break;
              }
              off = off * out[i] + pos;
            }
            if (!inside) continue;
            for (int64_t ml = 0; ml < mg; ++ml) {
              const int64_t mi = g * mg + ml;
              y[static_cast<size_t>((bi * m + mi) * out_sp + off)] +=
                  xval * wv[static_cast<size_t>((ci * mg + ml) * k_sp + q)];
            }
          }
        }
      }
    }
    Tensor& yt = ctx.allocate_output(0, x.dtype(), out_shape);
    ORTLITE_DISPATCH_FLOAT(x.dtype(), "ConvTranspose", [&](auto tag) {
      using T = decltype(tag);
      T* p = yt.data<T>();
      for (size_t i = 0; i < y.size(); ++i) {
        if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
          p[i] = T(static_cast<float>(y[i]));
        } else {
          p[i] = static_cast<T>(y[i]);
        }
      }
    });
  }

 private:
  std::string auto_pad_;
  int64_t group_;
  std::vector<int64_t> dilations_, strides_, pads_;
  bool has_pads_;
  std::vector<int64_t> output_padding_, output_shape_;
  bool has_output_shape_;
};

}  // namespace

void register_conv_transpose(KernelRegistry& r) {
  r.add("", "ConvTranspose", 1, 10, make_factory<ConvTranspose>());
  r.add("", "ConvTranspose", 11, 21, make_factory<ConvTranspose>());
  r.add("", "ConvTranspose", 22, kNewestOpset, make_factory<ConvTranspose>());
}

}  // namespace nn
}  // namespace ortlite
