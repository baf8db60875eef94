// Region-of-interest pooling kernels added for ONNX node conformance: RoiAlign (opsets
// 10, 16, 22) and MaxRoiPool (opsets 1, 22). float16 / bfloat16 compute in float, like
// float; double in double.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {
namespace {

template <typename T>
using ComputeOf = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename C, typename T>
C to_c(T v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return static_cast<C>(static_cast<float>(v));
  } else {
    return static_cast<C>(v);
  }
}

template <typename T, typename C>
T from_c(C v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// Checks X is [N, C, H, W] with H, W > 0 and rois is [num_rois, cols] of X's type.
void check_roi_inputs(const KernelContext& ctx, const Tensor& x, const Tensor& rois, int64_t cols) {
  if (x.rank() != 4) {
    ctx.fail(StatusCode::kInvalidArgument,
             "input 'X' must be [N, C, H, W], got " + shape_to_string(x.shape()));
  }
  if (rois.dtype() != x.dtype() || rois.rank() != 2 || rois.dim(1) != cols) {
    ctx.fail(StatusCode::kInvalidArgument,
             "input 'rois' must be [num_rois, " + std::to_string(cols) + "] of the type of 'X' (" +
                 dtype_name(x.dtype()) + "), got " + dtype_name(rois.dtype()) + " " +
                 shape_to_string(rois.shape()));
  }
  if (rois.dim(0) > 0 && x.dim(1) > 0 && (x.dim(2) == 0 || x.dim(3) == 0)) {
    ctx.fail(StatusCode::kInvalidArgument,
             "input 'X' " + shape_to_string(x.shape()) + " has an empty spatial dim");
  }
}

// RoiAlign: each output bin averages (or takes the max of) a grid of bilinear samples;
// onnx's reference implementation and onnxruntime agree on every detail reproduced here
// (samples more than one pixel outside the map count as 0, max mode takes the max of the
// weighted corner values).
class RoiAlign final : public Kernel {
 public:
  explicit RoiAlign(const KernelInfo& info)
      : out_h_(info.attr_int("output_height", 1)),
        out_w_(info.attr_int("output_width", 1)),
        sampling_ratio_(info.attr_int("sampling_ratio", 0)),
        spatial_scale_(info.attr_float("spatial_scale", 1.0f)) {
    const std::string mode = info.attr_string("mode", "avg");
    if (mode == "avg") {
      max_mode_ = false;
    } else if (mode == "max") {
      max_mode_ = true;
    } else {
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'mode' = '" + mode + "' must be 'avg' or 'max'");
    }
    // Opset 10 has no attribute and behaves as output_half_pixel.
    const std::string ctm = info.attr_string(
        "coordinate_transformation_mode", info.opset() < 16 ? "output_half_pixel" : "half_pixel");
    if (ctm == "half_pixel") {
      half_pixel_ = true;
    } else if (ctm == "output_half_pixel") {
      half_pixel_ = false;
    } else {
      info.fail(StatusCode::kInvalidArgument, "attribute 'coordinate_transformation_mode' = '" +
                                                  ctm +
                                                  "' must be 'half_pixel' or 'output_half_pixel'");
    }
    if (out_h_ < 1 || out_w_ < 1 || out_h_ > kMaxBins || out_w_ > kMaxBins) {
      info.fail(StatusCode::kInvalidArgument,
                "attributes 'output_height' and 'output_width' must be positive");
    }
    if (sampling_ratio_ < 0 || sampling_ratio_ > kMaxBins) {
      info.fail(
          StatusCode::kInvalidArgument,
          "attribute 'sampling_ratio' = " + std::to_string(sampling_ratio_) + " must be >= 0");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& rois = ctx.required_input(1);
    const Tensor& bi = ctx.required_input(2);
    check_roi_inputs(ctx, x, rois, 4);
    const int64_t num_rois = rois.dim(0);
    if ((bi.dtype() != DataType::kInt64 && bi.dtype() != DataType::kInt32) || bi.rank() != 1 ||
        bi.dim(0) != num_rois) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'batch_indices' must be a 1-D int64 tensor of " + std::to_string(num_rois) +
                   " values, got " + dtype_name(bi.dtype()) + " " + shape_to_string(bi.shape()));
    }
    const std::vector<int64_t> batch = tensor_to_int64s(bi);
    for (int64_t b : batch) {
      if (b < 0 || b >= x.dim(0)) {
        ctx.fail(StatusCode::kInvalidArgument, "input 'batch_indices' holds " + std::to_string(b) +
                                                   ", out of range for batch size " +
                                                   std::to_string(x.dim(0)));
      }
    }
    const int64_t channels = x.dim(1);
    Tensor& y = ctx.allocate_output(0, x.dtype(), {num_rois, channels, out_h_, out_w_});
    if (y.numel() == 0) return;
    ORTLITE_DISPATCH_FLOAT(x.dtype(), "RoiAlign", [&](auto tag) {
      using T = decltype(tag);
      run<T>(ctx, x, rois, batch, y);
    });
  }

 private:
  static constexpr int64_t kMaxBins = int64_t{1} << 20;
  // Bound on the samples of one roi over all its bins: a roi far larger than the map
  // (or a non-finite one) must fail instead of sampling without end.
  static constexpr double kMaxSamples = double(int64_t{1} << 26);

  template <typename C>
  struct Sample {
    int64_t pos[4];
    C w[4];
  };

  template <typename T>
  void run(const KernelContext& ctx, const Tensor& x, const Tensor& rois,
           const std::vector<int64_t>& batch, Tensor& y) const {
    using C = ComputeOf<T>;
    const int64_t num_rois = rois.dim(0), channels = x.dim(1);
    const int64_t height = x.dim(2), width = x.dim(3);
    const T* xd = x.data<T>();
    const T* rd = rois.data<T>();
    T* yd = y.data<T>();
    const C scale = static_cast<C>(spatial_scale_);
    const C offset = half_pixel_ ? C(0.5) : C(0);
    const int64_t ph_n = out_h_, pw_n = out_w_;
    for (int64_t n = 0; n < num_rois; ++n) {
      const T* r = rd + n * 4;
      const C start_w = to_c<C>(r[0]) * scale - offset;
      const C start_h = to_c<C>(r[1]) * scale - offset;
      const C end_w = to_c<C>(r[2]) * scale - offset;
      const C end_h = to_c<C>(r[3]) * scale - offset;
      C roi_w = end_w - start_w, roi_h = end_h - start_h;
      if (!half_pixel_) {
        // Malformed rois become 1x1.
        roi_w = std::max(roi_w, C(1));
        roi_h = std::max(roi_h, C(1));
      }
      const C bin_h = roi_h / static_cast<C>(ph_n);
      const C bin_w = roi_w / static_cast<C>(pw_n);
      const C grid_hf = sampling_ratio_ > 0 ? static_cast<C>(sampling_ratio_) : std::ceil(bin_h);
      const C grid_wf = sampling_ratio_ > 0 ? static_cast<C>(sampling_ratio_) : std::ceil(bin_w);
      if (!std::isfinite(start_w) || !std::isfinite(start_h) || !std::isfinite(grid_hf) ||
          !std::isfinite(grid_wf) ||
          static_cast<double>(std::max(grid_hf, C(0))) * static_cast<double>(ph_n) *
                  static_cast<double>(std::max(grid_wf, C(0))) * static_cast<double>(pw_n) >
              kMaxSamples) {
        ctx.fail(StatusCode::kInvalidArgument, "roi " + std::to_string(n) +
                                                   " of input 'rois' is not finite or needs too " +
                                                   "many samples for the feature map");
      }
      // A negative size (a reversed roi in half_pixel mode) gives an empty grid.
      const int64_t grid_h = std::max<int64_t>(static_cast<int64_t>(grid_hf), 0);
      const int64_t grid_w = std::max<int64_t>(static_cast<int64_t>(grid_wf), 0);
      const C count = static_cast<C>(std::max<int64_t>(grid_h * grid_w, 1));
      // Sample positions and weights, shared by every channel.
      std::vector<Sample<C>> pre(static_cast<size_t>(ph_n * pw_n * grid_h * grid_w));
      size_t at = 0;
      for (int64_t ph = 0; ph < ph_n; ++ph) {
        for (int64_t pw = 0; pw < pw_n; ++pw) {
          for (int64_t iy = 0; iy < grid_h; ++iy) {
            const C yy = start_h + static_cast<C>(ph) * bin_h +
                         (static_cast<C>(iy) + C(0.5)) * bin_h / static_cast<C>(grid_h);
            for (int64_t ix = 0; ix < grid_w; ++ix) {
              const C xx = start_w + static_cast<C>(pw) * bin_w +
                           (static_cast<C>(ix) + C(0.5)) * bin_w / static_cast<C>(grid_w);
              pre[at++] = bilinear(yy, xx, height, width);
            }
          }
        }
      }
      const T* plane0 = xd + batch[static_cast<size_t>(n)] * channels * height * width;
      const bool max_mode = max_mode_;
      parallel_for(ctx.thread_pool(), channels, static_cast<double>(pre.size()) * 8,
                   [&](int64_t cb, int64_t ce) {
                     for (int64_t c = cb; c < ce; ++c) {
                       const T* plane = plane0 + c * height * width;
                       T* out = yd + (n * channels + c) * ph_n * pw_n;
                       const Sample<C>* s = pre.data();
                       for (int64_t b = 0; b < ph_n * pw_n; ++b) {
                         C acc = C(0);
                         bool first = true;
                         for (int64_t g = 0; g < grid_h * grid_w; ++g, ++s) {
                           if (max_mode) {
                             C v = s->w[0] * to_c<C>(plane[s->pos[0]]);
                             for (int q = 1; q < 4; ++q)
                               v = std::max(v, s->w[q] * to_c<C>(plane[s->pos[q]]));
                             acc = first ? v : std::max(acc, v);
                             first = false;
                           } else {
                             for (int q = 0; q < 4; ++q) acc += s->w[q] * to_c<C>(plane[s->pos[q]]);
                           }
                         }
                         out[b] = from_c<T>(max_mode ? acc : acc / count);
                       }
                     }
                   });
    }
  }

  template <typename C>
  static Sample<C> bilinear(C y, C x, int64_t height, int64_t width) {
    Sample<C> s{};
    // Written so that NaN also lands here.
    if (!(y >= C(-1) && y <= static_cast<C>(height) && x >= C(-1) && x <= static_cast<C>(width))) {
      return s;  // all weights 0
    }
    y = std::max(y, C(0));
    x = std::max(x, C(0));
    int64_t y_lo = static_cast<int64_t>(y), x_lo = static_cast<int64_t>(x), y_hi, x_hi;
    if (y_lo >= height - 1) {
      y_hi = y_lo = height - 1;
      y = static_cast<C>(y_lo);
    } else {
      y_hi = y_lo + 1;
    }
    if (x_lo >= width - 1) {
      x_hi = x_lo = width - 1;
      x = static_cast<C>(x_lo);
    } else {
      x_hi = x_lo + 1;
    }
    const C ly = y - static_cast<C>(y_lo), lx = x - static_cast<C>(x_lo);
    const C hy = C(1) - ly, hx = C(1) - lx;
    s.pos[0] = y_lo * width + x_lo;
    s.pos[1] = y_lo * width + x_hi;
    s.pos[2] = y_hi * width + x_lo;
    s.pos[3] = y_hi * width + x_hi;
    s.w[0] = hy * hx;
    s.w[1] = hy * lx;
    s.w[2] = ly * hx;
    s.w[3] = ly * lx;
    return s;
  }

  int64_t out_h_, out_w_, sampling_ratio_;
  float spatial_scale_;
  bool max_mode_ = false;
  bool half_pixel_ = true;
};

// MaxRoiPool: rois are [batch_index, x1, y1, x2, y2] in input coordinates (times
// spatial_scale, rounded); each of the pooled_shape bins takes the max over its cells,
// 0 for a bin that falls outside the map. Follows onnxruntime, except that the max starts
// from the lowest value of the type (onnxruntime starts from the smallest positive float,
// so a bin of negative values gives ~1e-38 there).
class MaxRoiPool final : public Kernel {
 public:
  explicit MaxRoiPool(const KernelInfo& info)
      : spatial_scale_(info.attr_float("spatial_scale", 1.0f)) {
    if (!info.has_attr("pooled_shape")) {
      info.fail(StatusCode::kInvalidGraph, "attribute 'pooled_shape' is required");
    }
    const std::vector<int64_t> ps = info.attr_ints("pooled_shape");
    if (ps.size() != 2 || ps[0] < 1 || ps[1] < 1 || ps[0] > kMaxBins || ps[1] > kMaxBins) {
      info.fail(StatusCode::kInvalidArgument, "attribute 'pooled_shape' = " + dims_to_string(ps) +
                                                  " must hold two positive values");
    }
    pooled_h_ = ps[0];
    pooled_w_ = ps[1];
    if (!(spatial_scale_ > 0) || !std::isfinite(spatial_scale_)) {
      info.fail(StatusCode::kInvalidArgument, "attribute 'spatial_scale' must be positive");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& rois = ctx.required_input(1);
    check_roi_inputs(ctx, x, rois, 5);
    Tensor& y = ctx.allocate_output(0, x.dtype(), {rois.dim(0), x.dim(1), pooled_h_, pooled_w_});
    if (y.numel() == 0) return;
    ORTLITE_DISPATCH_FLOAT(x.dtype(), "MaxRoiPool", [&](auto tag) {
      using T = decltype(tag);
      run<T>(ctx, x, rois, y);
    });
  }

 private:
  static constexpr int64_t kMaxBins = int64_t{1} << 20;

  template <typename T>
  void run(const KernelContext& ctx, const Tensor& x, const Tensor& rois, Tensor& y) const {
    using C = ComputeOf<T>;
    const int64_t channels = x.dim(1), height = x.dim(2), width = x.dim(3);
    const T* xd = x.data<T>();
    const T* rd = rois.data<T>();
    T* yd = y.data<T>();
    const C scale = static_cast<C>(spatial_scale_);
    // Coordinates are clipped to the map, so anything beyond this bound behaves alike.
    const C limit = C(1) * static_cast<C>(int64_t{1} << 40);
    auto coord = [&](T v) {
      const C c = std::round(to_c<C>(v) * scale);
      return static_cast<int64_t>(std::min(std::max(c, -limit), limit));
    };
    for (int64_t n = 0; n < rois.dim(0); ++n) {
      const T* r = rd + n * 5;
      const C bf = to_c<C>(r[0]);
      for (int q = 0; q < 5; ++q) {
        if (!std::isfinite(to_c<C>(r[q]))) {
          ctx.fail(StatusCode::kInvalidArgument,
                   "roi " + std::to_string(n) + " of input 'rois' is not finite");
        }
      }
      const int64_t b = static_cast<int64_t>(std::max(std::min(bf, limit), -limit));
      if (b < 0 || b >= x.dim(0)) {
        ctx.fail(StatusCode::kInvalidArgument, "roi " + std::to_string(n) +
                                                   " of input 'rois' has batch index " +
                                                   std::to_string(b) + ", out of range for " +
                                                   "batch size " + std::to_string(x.dim(0)));
      }
      const int64_t sw = coord(r[1]), sh = coord(r[2]), ew = coord(r[3]), eh = coord(r[4]);
      const int64_t roi_h = std::max<int64_t>(eh - sh + 1, 1);
      const int64_t roi_w = std::max<int64_t>(ew - sw + 1, 1);
      const C bin_h = static_cast<C>(roi_h) / static_cast<C>(pooled_h_);
      const C bin_w = static_cast<C>(roi_w) / static_cast<C>(pooled_w_);
      auto clip = [](int64_t v, int64_t hi) { return std::min(std::max(v, int64_t{0}), hi); };
      for (int64_t c = 0; c < channels; ++c) {
        const T* plane = xd + (b * channels + c) * height * width;
        T* out = yd + (n * channels + c) * pooled_h_ * pooled_w_;
        for (int64_t ph = 0; ph < pooled_h_; ++ph) {
          const int64_t hs =
              clip(static_cast<int64_t>(std::floor(static_cast<C>(ph) * bin_h)) + sh, height);
          const int64_t he =
              clip(static_cast<int64_t>(std::ceil(static_cast<C>(ph + 1) * bin_h)) + sh, height);
          for (int64_t pw = 0; pw < pooled_w_; ++pw) {
            const int64_t ws =
                clip(static_cast<int64_t>(std::floor(static_cast<C>(pw) * bin_w)) + sw, width);
            const int64_t we =
                clip(static_cast<int64_t>(std::ceil(static_cast<C>(pw + 1) * bin_w)) + sw, width);
            C m = C(0);
            if (he > hs && we > ws) {
              m = std::numeric_limits<C>::lowest();
              for (int64_t h = hs; h < he; ++h) {
                for (int64_t w = ws; w < we; ++w) m = std::max(m, to_c<C>(plane[h * width + w]));
              }
            }
            out[ph * pooled_w_ + pw] = from_c<T>(m);
          }
        }
      }
    }
  }

  float spatial_scale_;
  int64_t pooled_h_ = 1, pooled_w_ = 1;
};

}  // namespace

void register_roi_pool_align(KernelRegistry& r) {
  r.add("", "RoiAlign", 10, 15, make_factory<RoiAlign>());
  r.add("", "RoiAlign", 16, 21, make_factory<RoiAlign>());
  r.add("", "RoiAlign", 22, kMaxOpset, make_factory<RoiAlign>());
  r.add("", "MaxRoiPool", 1, 21, make_factory<MaxRoiPool>());
  r.add("", "MaxRoiPool", 22, kMaxOpset, make_factory<MaxRoiPool>());
}

}  // namespace nn
}  // namespace ortlite
