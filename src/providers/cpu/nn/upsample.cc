// Upsample (opsets 7 and 9; deprecated from 10 in favour of Resize), added for ONNX node
// conformance. Output dim = floor(input dim * scale) with every scale >= 1; each output
// coordinate x maps back to x / scale (Resize's "asymmetric" transform). Nearest takes
// the floor of that, linear interpolates between the two neighbours (clamped at the
// end), over every axis whose scale is not 1. Arithmetic as onnxruntime's Upsample:
// in float (double for double), integer results truncated toward zero.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {
namespace {

// No single output dim beyond this; the element count is checked by allocate_output.
constexpr float kMaxOutDim = 2147483648.0f;

template <typename Fn>
void dispatch_copy_type(DataType dt, Fn&& fn) {
  if (dt == DataType::kString) return fn(std::string());
  switch (dtype_size(dt)) {
    case 1:
      return fn(uint8_t{});
    case 2:
      return fn(uint16_t{});
    case 4:
      return fn(uint32_t{});
    case 8:
      return fn(uint64_t{});
    default:
      ORTLITE_THROW(kNotImplemented, "Upsample: element type ", dtype_name(dt),
                    " is not supported");
  }
}

class Upsample final : public Kernel {
 public:
  explicit Upsample(const KernelInfo& info) : scales_from_input_(info.opset() >= 9) {
    const std::string mode = info.attr_string("mode", "nearest");
    if (mode == "nearest") {
      linear_ = false;
    } else if (mode == "linear") {
      linear_ = true;
    } else {
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'mode' = '" + mode + "' must be 'nearest' or 'linear'");
    }
    if (!scales_from_input_) {
      if (!info.has_attr("scales")) {
        info.fail(StatusCode::kInvalidGraph, "attribute 'scales' is required");
      }
      scales_ = info.attr_floats("scales");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    std::vector<float> scales = scales_;
    if (scales_from_input_) {
      const Tensor& s = ctx.required_input(1);
      if (s.dtype() != DataType::kFloat || s.rank() != 1) {
        ctx.fail(StatusCode::kInvalidArgument, "input 'scales' must be a 1-D float tensor, got " +
                                                   std::string(dtype_name(s.dtype())) + " " +
                                                   shape_to_string(s.shape()));
      }
      scales.assign(s.data<float>(), s.data<float>() + s.numel());
    }
    const size_t r = x.rank();
    if (scales.size() != r) {
      ctx.fail(StatusCode::kInvalidArgument, "'scales' has " + std::to_string(scales.size()) +
                                                 " values for input 'X' of rank " +
                                                 std::to_string(r));
    }
    Shape out(r);
    for (size_t i = 0; i < r; ++i) {
      if (!(scales[i] >= 1.0f)) {
        ctx.fail(StatusCode::kInvalidArgument, "'scales' value " + std::to_string(scales[i]) +
                                                   " on axis " + std::to_string(i) +
                                                   " must be >= 1");
      }
      const float d = scales[i] * static_cast<float>(x.dim(i));
      if (!(d < kMaxOutDim)) {
        ctx.fail(StatusCode::kInvalidArgument, "output dim " + std::to_string(d) + " of axis " +
                                                   std::to_string(i) + " is too large");
      }
      out[i] = static_cast<int64_t>(d);
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), out);
    if (y.numel() == 0) return;
    // Source index (nearest) or the two neighbours and the weight of the upper one
    // (linear) of every output coordinate, per axis.
    std::vector<std::vector<int64_t>> lo(r), hi(r);
    std::vector<std::vector<float>> frac(r);
    for (size_t a = 0; a < r; ++a) {
      const int64_t in = x.dim(a);
      for (int64_t o = 0; o < out[a]; ++o) {
        float src = static_cast<float>(o) / scales[a];
        if (!linear_) {
          lo[a].push_back(std::min(static_cast<int64_t>(src), in - 1));
          continue;
        }
        src = std::min(src, static_cast<float>(in - 1));
        const int64_t l = std::min(static_cast<int64_t>(src), in - 1);
        const int64_t h = std::min(l + 1, in - 1);
        lo[a].push_back(l);
        hi[a].push_back(h);
        frac[a].push_back(l == h ? 0.0f : src - static_cast<float>(l));
      }
    }
    const std::vector<int64_t> in_strides = strides_of(x.shape());
    if (!linear_) {
      dispatch_copy_type(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* src = static_cast<const T*>(x.raw_data());
        T* dst = static_cast<T*>(y.raw_data());
        for_each_output(ctx, out, [&](const std::vector<int64_t>& idx, int64_t flat) {
          int64_t off = 0;
          for (size_t a = 0; a < r; ++a) off += lo[a][static_cast<size_t>(idx[a])] * in_strides[a];
          dst[flat] = src[off];
        });
      });
      return;
    }
    std::vector<size_t> active;
    for (size_t a = 0; a < r; ++a) {
      if (scales[a] != 1.0f) active.push_back(a);
    }
    if (active.size() > 6) {
      ctx.fail(StatusCode::kNotImplemented,
               "mode 'linear' resizes at most 6 axes, 'scales' resizes " +
                   std::to_string(active.size()));
    }
    const size_t corners = size_t{1} << active.size();
    auto run = [&](auto tag) {
      using T = decltype(tag);
      using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
      const T* src = x.data<T>();
      T* dst = y.data<T>();
      for_each_output(ctx, out, [&](const std::vector<int64_t>& idx, int64_t flat) {
        int64_t base = 0;
        for (size_t a = 0; a < r; ++a) base += lo[a][static_cast<size_t>(idx[a])] * in_strides[a];
        C acc = C(0);
        for (size_t c = 0; c < corners; ++c) {
          int64_t off = base;
          C w = C(1);
          for (size_t j = 0; j < active.size(); ++j) {
            const size_t a = active[j];
            const size_t o = static_cast<size_t>(idx[a]);
            const C f = static_cast<C>(frac[a][o]);
            if (c & (size_t{1} << j)) {
              off += (hi[a][o] - lo[a][o]) * in_strides[a];
              w *= f;
            } else {
              w *= C(1) - f;
            }
          }
          acc += w * load<C>(src[off]);
        }
        dst[flat] = store<T>(acc);
      });
    };
    return ORTLITE_DISPATCH_ARITHMETIC(x.dtype(), "mode 'linear'", run);
  }

 private:
  static std::vector<int64_t> strides_of(const Shape& s) {
    std::vector<int64_t> st(s.size(), 1);
    for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
    return st;
  }

  template <typename C, typename T>
  static C load(T v) {
    if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
      return static_cast<float>(v);
    } else {
      return static_cast<C>(v);
    }
  }

  template <typename T, typename C>
  static T store(C v) {
    if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
      return T(static_cast<float>(v));
    } else if constexpr (std::is_floating_point_v<T>) {
      return static_cast<T>(v);
    } else {
      // Truncation toward zero, saturated (the weights are convex, so only rounding can
      // step past the type's range).
      const double d = std::trunc(static_cast<double>(v));
      if (!(d > static_cast<double>(std::numeric_limits<T>::lowest())))
        return std::numeric_limits<T>::lowest();
      if (!(d < static_cast<double>(std::numeric_limits<T>::max())))
        return std::numeric_limits<T>::max();
      return static_cast<T>(d);
    }
  }

  // Calls fn(index, flat) for every output element, rows split over the pool.
  template <typename Fn>
  static void for_each_output(const KernelContext& ctx, const Shape& out, Fn&& fn) {
    const size_t r = out.size();
    if (r == 0) {
      fn(std::vector<int64_t>(), 0);
      return;
    }
    const int64_t last = out[r - 1];
    const int64_t rows = shape_size(out) / last;
    parallel_for(ctx.thread_pool(), rows, static_cast<double>(last) * 4,
                 [&](int64_t begin, int64_t end) {
                   std::vector<int64_t> idx(r, 0);
                   for (int64_t row = begin; row < end; ++row) {
                     int64_t rem = row;
                     for (size_t d = r - 1; d-- > 0;) {
                       idx[d] = rem % out[d];
                       rem /= out[d];
                     }
                     for (int64_t i = 0; i < last; ++i) {
                       idx[r - 1] = i;
                       fn(idx, row * last + i);
                     }
                   }
                 });
  }

  bool scales_from_input_;
  bool linear_ = false;
  std::vector<float> scales_;
};

}  // namespace

void register_upsample(KernelRegistry& r) {
  r.add("", "Upsample", 7, 8, make_factory<Upsample>());
  r.add("", "Upsample", 9, 9, make_factory<Upsample>());
}

}  // namespace nn
}  // namespace ortlite
