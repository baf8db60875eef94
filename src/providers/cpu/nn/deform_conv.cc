// DeformConv (opsets 19, 22), added for ONNX node conformance: a convolution whose every
// kernel tap samples the input at its regular position plus a learned offset (bilinear,
// multilinear for other ranks, zero outside the input), optionally scaled by a mask. The
// samples are gathered into a column matrix per image, then one GEMM per group. float16 /
// bfloat16 compute in float, double in double.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "compute/gemm.h"
#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {
namespace {

template <typename C>
std::vector<C> load_as(const Tensor& t) {
  std::vector<C> v(static_cast<size_t>(t.numel()));
  ORTLITE_DISPATCH_FLOAT(t.dtype(), "DeformConv", [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
        v[i] = static_cast<C>(static_cast<float>(p[i]));
      } else {
        v[i] = static_cast<C>(p[i]);
      }
    }
  });
  return v;
}

class DeformConv final : public Kernel {
 public:
  explicit DeformConv(const KernelInfo& info)
      : group_(info.attr_int("group", 1)), offset_group_(info.attr_int("offset_group", 1)) {
    attrs_.load(info, false);
    if (attrs_.auto_pad != AutoPad::kNotSet) {
      info.fail(StatusCode::kInvalidGraph, "attribute 'auto_pad' is not defined for DeformConv");
    }
    if (group_ < 1) info.fail(StatusCode::kInvalidGraph, "attribute 'group' must be >= 1");
    if (offset_group_ < 1) {
      info.fail(StatusCode::kInvalidGraph, "attribute 'offset_group' must be >= 1");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& w = ctx.required_input(1);
    const Tensor& off = ctx.required_input(2);
    const Tensor* b = ctx.input(3);
    const Tensor* mask = ctx.input(4);
    if (x.rank() < 3 || w.rank() != x.rank()) {
      ctx.fail(StatusCode::kInvalidArgument, "inputs 'X' " + shape_to_string(x.shape()) +
                                                 " and 'W' " + shape_to_string(w.shape()) +
                                                 " must be [N, C, D1, ...] and [oC, C / group, " +
                                                 "k1, ...] of the same rank >= 3");
    }
    for (const Tensor* t : {&w, &off, b, mask}) {
      if (t && t->dtype() != x.dtype()) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "inputs W, offset, B and mask must have the element type of 'X' (" +
                     std::string(dtype_name(x.dtype())) + "), got " + dtype_name(t->dtype()));
      }
    }
    const size_t nd = x.rank() - 2;
    if (nd > 6) {
      ctx.fail(StatusCode::kNotImplemented,
               "inputs with more than 6 spatial axes are not supported, got " +
                   shape_to_string(x.shape()));
    }
    const int64_t batch = x.dim(0), channels = x.dim(1), oc = w.dim(0);
    if (channels != w.dim(1) * group_ || oc % group_ != 0 || channels % offset_group_ != 0) {
      ctx.fail(StatusCode::kInvalidArgument,
               "channels do not fit: X " + shape_to_string(x.shape()) + ", W " +
                   shape_to_string(w.shape()) + ", group " + std::to_string(group_) +
                   ", offset_group " + std::to_string(offset_group_) +
                   " (C must be W's dim 1 times group, and oC a multiple of group, C a " +
                   "multiple of offset_group)");
    }
    const std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
    const std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
    const SpatialGeometry g = conv_geometry(ctx, attrs_, in, kernel);
    int64_t kn = 1, on = 1, inn = 1;
    for (size_t i = 0; i < nd; ++i) {
      kn *= g.kernel[i];
      on *= g.out[i];
      inn *= g.in[i];
    }
    Shape off_shape = {batch, offset_group_ * kn * static_cast<int64_t>(nd)};
    off_shape.insert(off_shape.end(), g.out.begin(), g.out.end());
    if (off.shape() != off_shape) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'offset' " + shape_to_string(off.shape()) +
                                                 " must be " + shape_to_string(off_shape));
    }
    Shape mask_shape = off_shape;
    mask_shape[1] = offset_group_ * kn;
    if (mask && mask->shape() != mask_shape) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'mask' " + shape_to_string(mask->shape()) +
                                                 " must be " + shape_to_string(mask_shape));
    }
    if (b && (b->rank() != 1 || b->dim(0) != oc)) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'B' " + shape_to_string(b->shape()) +
                                                 " must be [" + std::to_string(oc) + "]");
    }
    Shape out_shape = {batch, oc};
    out_shape.insert(out_shape.end(), g.out.begin(), g.out.end());
    Tensor& y = ctx.allocate_output(0, x.dtype(), out_shape);
    if (y.numel() == 0) return;
    if (x.dtype() == DataType::kDouble) {
      run<double>(ctx, x, w, off, b, mask, g, kn, on, inn, y);
    } else {
      run<float>(ctx, x, w, off, b, mask, g, kn, on, inn, y);
    }
  }

 private:
  template <typename C>
  void run(const KernelContext& ctx, const Tensor& xt, const Tensor& wt, const Tensor& offt,
           const Tensor* bt, const Tensor* maskt, const SpatialGeometry& g, int64_t kn, int64_t on,
           int64_t inn, Tensor& yt) const {
    const size_t nd = g.rank;
    const int64_t batch = xt.dim(0), channels = xt.dim(1), oc = wt.dim(0);
    const int64_t icg = channels / group_, ocg = oc / group_;
    const int64_t cpo = channels / offset_group_;  // channels per offset group
    const std::vector<C> x = load_as<C>(xt);
    const std::vector<C> w = load_as<C>(wt);
    const std::vector<C> off = load_as<C>(offt);
    const std::vector<C> bias = bt ? load_as<C>(*bt) : std::vector<C>();
    const std::vector<C> mask = maskt ? load_as<C>(*maskt) : std::vector<C>();
    std::vector<int64_t> in_strides(nd, 1);
    for (size_t d = nd - 1; d-- > 0;) in_strides[d] = in_strides[d + 1] * g.in[d + 1];
    std::vector<C> cols(static_cast<size_t>(channels * kn * on));
    std::vector<C> out(static_cast<size_t>(oc * on));
    const size_t corners = size_t{1} << nd;
    const int64_t og = offset_group_;
    for (int64_t n = 0; n < batch; ++n) {
      const C* xn = x.data() + n * channels * inn;
      const C* offn = off.data() + n * og * kn * static_cast<int64_t>(nd) * on;
      const C* maskn = mask.empty() ? nullptr : mask.data() + n * og * kn * on;
      parallel_for(
          ctx.thread_pool(), og * kn, static_cast<double>(on * cpo * corners),
          [&](int64_t begin, int64_t end) {
            std::vector<int64_t> kidx(nd), oidx(nd), base(nd);
            std::vector<C> frac(nd);
            std::vector<int64_t> corner_off(corners);
            std::vector<C> corner_w(corners);
            for (int64_t gk = begin; gk < end; ++gk) {
              const int64_t go = gk / kn, kp = gk % kn;
              int64_t rem = kp;
              for (size_t d = nd; d-- > 0;) {
                kidx[d] = rem % g.kernel[d];
                rem /= g.kernel[d];
              }
              std::fill(oidx.begin(), oidx.end(), 0);
              for (int64_t o = 0; o < on; ++o) {
                bool any = false;
                bool outside = false;
                for (size_t d = 0; d < nd && !outside; ++d) {
                  const C delta =
                      offn[((gk * static_cast<int64_t>(nd)) + static_cast<int64_t>(d)) * on + o];
                  const C p = static_cast<C>(oidx[d] * g.stride[d] - g.pad_begin[d] +
                                             kidx[d] * g.dilation[d]) +
                              delta;
                  // Also false for NaN: such a tap reads nothing.
                  if (!(p > C(-1) && p < static_cast<C>(g.in[d]))) {
                    outside = true;
                    break;
                  }
                  const C fl = std::floor(p);
                  base[d] = static_cast<int64_t>(fl);
                  frac[d] = p - fl;
                }
                size_t used = 0;
                if (!outside) {
                  for (size_t c = 0; c < corners; ++c) {
                    int64_t at = 0;
                    C cw = C(1);
                    bool inside = true;
                    for (size_t d = 0; d < nd; ++d) {
                      const bool up = (c >> d) & 1;
                      const int64_t i = base[d] + (up ? 1 : 0);
                      if (i < 0 || i >= g.in[d]) {
                        inside = false;
                        break;
                      }
                      at += i * in_strides[d];
                      cw *= up ? frac[d] : C(1) - frac[d];
                    }
                    if (inside) {
                      corner_off[used] = at;
                      corner_w[used] = cw;
                      ++used;
                    }
                  }
                  any = used > 0;
                }
                const C m = maskn ? maskn[gk * on + o] : C(1);
                for (int64_t ci = 0; ci < cpo; ++ci) {
                  const int64_t c = go * cpo + ci;
                  C v = C(0);
                  if (any) {
                    const C* plane = xn + c * inn;
                    for (size_t q = 0; q < used; ++q) v += corner_w[q] * plane[corner_off[q]];
                  }
                  cols[static_cast<size_t>((c * kn + kp) * on + o)] = v * m;
                }
                for (size_t d = nd; d-- > 0;) {
                  if (++oidx[d] < g.out[d]) break;
                  oidx[d] = 0;
                }
              }
            }
          });
      for (int64_t gi = 0; gi < group_; ++gi) {
        gemm(false, false, ocg, on, icg * kn, C(1), w.data() + gi * ocg * icg * kn, icg * kn,
             cols.data() + gi * icg * kn * on, on, C(0), out.data() + gi * ocg * on, on,
             ctx.thread_pool());
      }
      if (!bias.empty()) {
        for (int64_t o = 0; o < oc; ++o) {
          C* row = out.data() + o * on;
          for (int64_t i = 0; i < on; ++i) row[i] += bias[static_cast<size_t>(o)];
        }
      }
      ORTLITE_DISPATCH_FLOAT(yt.dtype(), "DeformConv", [&](auto tag) {
        using T = decltype(tag);
        T* dst = yt.data<T>() + n * oc * on;
        for (size_t i = 0; i < out.size(); ++i) {
          if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
            dst[i] = T(static_cast<float>(out[i]));
          } else {
            dst[i] = static_cast<T>(out[i]);
          }
        }
      });
    }
  }

  SpatialAttrs attrs_;
  int64_t group_, offset_group_;
};

}  // namespace

void register_deform_conv(KernelRegistry& r) {
  r.add("", "DeformConv", 19, 21, make_factory<DeformConv>());
  r.add("", "DeformConv", 22, kMaxOpset, make_factory<DeformConv>());
}

}  // namespace nn
}  // namespace ortlite
