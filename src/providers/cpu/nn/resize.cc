// Resize (opsets 11-23), added for ONNX node conformance. Separable: the input is resized
// one axis at a time (in double), each output coordinate of an axis being a weighted sum
// of n neighbours of its source coordinate, as in onnx's reference implementation:
// modes nearest (4 rounding modes) / linear / cubic (cubic_coeff_a, exclude_outside),
// antialias for linear and cubic, the six coordinate transformation modes
// (tf_crop_and_resize with roi and extrapolation_value), axes, and
// keep_aspect_ratio_policy. Integer outputs are rounded (half to even) and saturated.
#include "compute/vectorize.h"  // first: compile options for the loops below

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <type_traits>

#include "compute/cpu_avx512.h"
#include "compute/simd.h"
#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {
namespace {

enum class RMode { kNearest, kLinear, kCubic };
enum class Ctm {
  kHalfPixel,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfCropAndResize,
  kTfHalfPixelForNn  // opsets 11-12 (onnxruntime still takes it): (x + 0.5) / scale
};
enum class NearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };
enum class Aspect { kStretch, kNotLarger, kNotSmaller };

// One plane of nearest resizing: y[yo][xo] = x[th.i0[yo]][tw.i0[xo]]; a row whose source
// row repeats the previous one is copied.
template <typename U>
ORTLITE_NN_CLONES void gather_row(const U* src, const int64_t* ix, U* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[ix[i]];
}

// k when ix[i] == i / k for every i < n = k * in (an integer upscale: each source element
// repeated k times), else 0.
inline int64_t upscale_factor(const int64_t* ix, int64_t n, int64_t in) {
  if (in <= 0 || n % in != 0 || n / in < 2) return 0;
  const int64_t k = n / in;
  for (int64_t i = 0; i < n; ++i)
    if (ix[i] != i / k) return 0;
  return k;
}

template <typename U>
ORTLITE_NN_CLONES void repeat_row(const U* src, U* dst, int64_t in, int64_t k) {
  if (k == 2) {
    for (int64_t i = 0; i < in; ++i) dst[2 * i] = dst[2 * i + 1] = src[i];
    return;
  }
  for (int64_t i = 0; i < in; ++i)
    for (int64_t j = 0; j < k; ++j) dst[i * k + j] = src[i];
}

#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
// Outputs from this size on are written with non-temporal stores (repeat2_planes_u32).
constexpr int64_t kStreamBytes = int64_t{8} << 20;

// The lanes of a 2x width upscale of rows of `in` 4-byte elements: `full` whole source
// vectors, then one of `rest` elements (load mask m, store masks mlo / mhi of its two halves).
struct Widen2 {
  int64_t full, rest;
  __mmask16 m, mlo, mhi;
};
Widen2 widen2_lanes(int64_t in) {
  const int64_t rest = in % 16;
  return {in / 16, rest, static_cast<__mmask16>((1u << rest) - 1),
          static_cast<__mmask16>(rest >= 8 ? 0xFFFFu : (1u << (2 * rest)) - 1),
          static_cast<__mmask16>(rest > 8 ? (1u << (2 * rest - 16)) - 1 : 0)};
}

// One source row widened in registers and stored to `copies` output rows, ld apart. With
// `stream`, rows that start on a 64-byte boundary are written with non-temporal stores
// (the caller fences).
ORTLITE_AVX512 inline __attribute__((always_inline)) void widen2_row(const uint32_t* src,
                                                                     uint32_t* dst, const Widen2& w,
                                                                     int64_t copies, int64_t ld,
                                                                     bool stream = false) {
  const __m512i ilo = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  const __m512i ihi = _mm512_setr_epi32(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
  const bool nt = stream && reinterpret_cast<uintptr_t>(dst) % 64 == 0 && ld % 16 == 0;
  for (int64_t q = 0; q < w.full; ++q) {
    const __m512i a = _mm512_loadu_si512(src + 16 * q);
    const __m512i lo = _mm512_maskz_permutexvar_epi32(0xFFFF, ilo, a);
    const __m512i hi = _mm512_maskz_permutexvar_epi32(0xFFFF, ihi, a);
    for (int64_t c = 0; c < copies; ++c) {
      uint32_t* d = dst + c * ld + 32 * q;
      if (nt) {
        _mm512_stream_si512(reinterpret_cast<__m512i*>(d), lo);
        _mm512_stream_si512(reinterpret_cast<__m512i*>(d + 16), hi);
      } else {
        _mm512_storeu_si512(d, lo);
        _mm512_storeu_si512(d + 16, hi);
      }
    }
  }
  if (w.rest) {
    const __m512i a = _mm512_maskz_loadu_epi32(w.m, src + 16 * w.full);
    const __m512i lo = _mm512_maskz_permutexvar_epi32(0xFFFF, ilo, a);
    const __m512i hi = _mm512_maskz_permutexvar_epi32(0xFFFF, ihi, a);
    for (int64_t c = 0; c < copies; ++c) {
      _mm512_mask_storeu_epi32(dst + c * ld + 32 * w.full, w.mlo, lo);
      _mm512_mask_storeu_epi32(dst + c * ld + 32 * w.full + 16, w.mhi, hi);
    }
  }
}

// A 2x width upscale of one source row of 4-byte elements written to `copies` output rows
// (ld apart) straight from registers: the rows of a 2x height upscale, without copying
// the first one back.
ORTLITE_AVX512 void repeat2_rows_u32(const uint32_t* src, uint32_t* dst, int64_t in, int64_t copies,
                                     int64_t ld) {
  widen2_row(src, dst, widen2_lanes(in), copies, ld);
}

// A 2x upscale of both axes of `planes` planes of ih x iw 4-byte elements, in one call for
// all the planes: the per-row work of nearest_plane (its table lookups, a call a row) was a
// third of the time on rows of 20 (1x256x20x20). `stream`: non-temporal stores, for outputs
// larger than the caches hold. A 13 MB output (1x128x80x80) written with plain stores,
// while the previous run's output was still held, read each line in before writing it:
// 1.0-1.4 ms against 0.46 streamed. Outputs that stay in the L3 are faster with plain
// stores (3.2 MB: 39 against 92 us), and the next node reads them from there.
ORTLITE_AVX512 void repeat2_planes_u32(const uint32_t* src, uint32_t* dst, int64_t planes,
                                       int64_t ih, int64_t iw, bool stream) {
  const Widen2 w = widen2_lanes(iw);
  for (int64_t row = 0; row < planes * ih; ++row)
    widen2_row(src + row * iw, dst + row * 4 * iw, w, 2, 2 * iw, stream);
  if (stream) _mm_sfence();
}
#endif

// k: the integer upscale of the width (upscale_factor of tw, computed once per call), or 0.
template <typename U, typename Table>
void nearest_plane(const U* x, int64_t iw_n, U* y, int64_t oh_n, int64_t ow_n, const Table& th,
                   const Table& tw, U ev, int64_t k) {
  for (int64_t yo = 0; yo < oh_n; ++yo) {
    U* dst = y + yo * ow_n;
    const size_t h = static_cast<size_t>(yo);
    if (th.ex[h]) {
      std::fill(dst, dst + ow_n, ev);
      continue;
    }
    if (yo > 0 && !th.ex[h - 1] && th.i0[h] == th.i0[h - 1]) {
      std::memcpy(dst, dst - ow_n, static_cast<size_t>(ow_n) * sizeof(U));
      continue;
    }
    const U* src = x + th.i0[h] * iw_n;
#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
    if constexpr (sizeof(U) == 4) {
      if (k == 2 && cpu_has_avx512()) {
        int64_t copies = 1;  // following rows with the same source row
        while (yo + copies < oh_n && !th.ex[h + static_cast<size_t>(copies)] &&
               th.i0[h + static_cast<size_t>(copies)] == th.i0[h])
          ++copies;
        repeat2_rows_u32(reinterpret_cast<const uint32_t*>(src), reinterpret_cast<uint32_t*>(dst),
                         iw_n, copies, ow_n);
        yo += copies - 1;
        continue;
      }
    }
#endif
    if (!tw.resized) {
      std::memcpy(dst, src, static_cast<size_t>(ow_n) * sizeof(U));
    } else if (k) {
      repeat_row(src, dst, iw_n, k);
    } else {
      gather_row(src, tw.i0.data(), dst, ow_n);
      if (tw.any_ex) {
        for (int64_t i = 0; i < ow_n; ++i)
          if (tw.ex[static_cast<size_t>(i)]) dst[i] = ev;
      }
    }
  }
}

ORTLITE_NN_CLONES void lerp_row(const float* src, const int64_t* i0, const int64_t* i1,
                                const float* w0, const float* w1, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = w0[i] * src[i0[i]] + w1[i] * src[i1[i]];
}

ORTLITE_NN_CLONES void blend_rows(const float* a, const float* b, float w0, float w1, float* dst,
                                  int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = w0 * a[i] + w1 * b[i];
}

// One plane of linear resizing: each source row resampled along the last axis once (two
// rows cached in buf), then output rows blended from two of them.
template <typename Table>
void linear_plane(const float* x, int64_t iw_n, float* y, int64_t oh_n, int64_t ow_n,
                  const Table& th, const Table& tw, float ev, float* buf) {
  int64_t tag[2] = {-1, -1};
  // The resampled source row `row`, never overwriting slot `keep` (the other operand).
  auto hrow = [&](int64_t row, int keep, int* slot) -> const float* {
    if (!tw.resized) return x + row * iw_n;
    for (int s = 0; s < 2; ++s) {
      if (tag[s] == row) {
        *slot = s;
        return buf + s * ow_n;
      }
    }
    const int s = keep == 0 ? 1 : (keep == 1 ? 0 : (tag[0] == -1 ? 0 : 1));
    tag[s] = row;
    *slot = s;
    float* dst = buf + s * ow_n;
    lerp_row(x + row * iw_n, tw.i0.data(), tw.i1.data(), tw.w0.data(), tw.w1.data(), dst, ow_n);
    return dst;
  };
  for (int64_t yo = 0; yo < oh_n; ++yo) {
    float* dst = y + yo * ow_n;
    const size_t h = static_cast<size_t>(yo);
    if (th.ex[h]) {
      std::fill(dst, dst + ow_n, ev);
      continue;
    }
    if (!th.resized) {
      if (tw.resized) {
        lerp_row(x + yo * iw_n, tw.i0.data(), tw.i1.data(), tw.w0.data(), tw.w1.data(), dst, ow_n);
      } else {
        std::memcpy(dst, x + yo * iw_n, static_cast<size_t>(ow_n) * sizeof(float));
      }
    } else {
      int sa = -1, sb = -1;
      const float* a = hrow(th.i0[h], -1, &sa);
      const float* b = hrow(th.i1[h], sa, &sb);
      blend_rows(a, b, th.w0[h], th.w1[h], dst, ow_n);
    }
    if (tw.any_ex) {
      for (int64_t i = 0; i < ow_n; ++i)
        if (tw.ex[static_cast<size_t>(i)]) dst[i] = ev;
    }
  }
}

// One plane of linear resizing of integers, with the general path's arithmetic (double, the
// height axis first, each output the sum of its two weighted neighbours in order, rounded
// half to even and saturated), so that both give the same integers. Left to the baseline
// ISA: contracting a product and a sum into one FMA would round differently.
template <typename T, typename Table>
void int_linear_plane(const T* x, int64_t iw_n, T* y, int64_t oh_n, int64_t ow_n, const Table& th,
                      const Table& tw, double* row) {
  constexpr double lo = static_cast<double>(std::numeric_limits<T>::lowest());
  constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
  for (int64_t yo = 0; yo < oh_n; ++yo) {
    const size_t h = static_cast<size_t>(yo);
    const T* a = x + th.i0[h] * iw_n;
    if (th.resized) {
      const T* b = x + th.i1[h] * iw_n;
      const double c0 = th.d0[h], c1 = th.d1[h];
      for (int64_t i = 0; i < iw_n; ++i)
        row[i] = c0 * static_cast<double>(a[i]) + c1 * static_cast<double>(b[i]);
    } else {
      for (int64_t i = 0; i < iw_n; ++i) row[i] = static_cast<double>(a[i]);
    }
    T* dst = y + yo * ow_n;
    for (int64_t i = 0; i < ow_n; ++i) {
      const size_t w = static_cast<size_t>(i);
      const double v = tw.resized ? tw.d0[w] * row[tw.i0[w]] + tw.d1[w] * row[tw.i1[w]] : row[i];
      dst[i] = static_cast<T>(std::min(std::max(std::nearbyint(v), lo), hi));
    }
  }
}

class Resize final : public Kernel {
 public:
  explicit Resize(const KernelInfo& info)
      : cubic_a_(info.attr_float("cubic_coeff_a", -0.75f)),
        exclude_outside_(info.attr_int("exclude_outside", 0) != 0),
        extrapolation_(info.attr_float("extrapolation_value", 0.0f)),
        antialias_(info.attr_int("antialias", 0) != 0),
        axes_(info.attr_ints("axes")),
        has_axes_(info.has_attr("axes")) {
    const std::string mode = info.attr_string("mode", "nearest");
    if (mode == "nearest") {
      mode_ = RMode::kNearest;
    } else if (mode == "linear") {
      mode_ = RMode::kLinear;
    } else if (mode == "cubic") {
      mode_ = RMode::kCubic;
    } else {
      info.fail(StatusCode::kInvalidArgument, "attribute 'mode' = '" + mode + "' is unknown");
    }
    const std::string ctm = info.attr_string("coordinate_transformation_mode", "half_pixel");
    if (ctm == "half_pixel") {
      ctm_ = Ctm::kHalfPixel;
    } else if (ctm == "half_pixel_symmetric") {
      ctm_ = Ctm::kHalfPixelSymmetric;
    } else if (ctm == "pytorch_half_pixel") {
      ctm_ = Ctm::kPytorchHalfPixel;
    } else if (ctm == "align_corners") {
      ctm_ = Ctm::kAlignCorners;
    } else if (ctm == "asymmetric") {
      ctm_ = Ctm::kAsymmetric;
    } else if (ctm == "tf_crop_and_resize") {
      ctm_ = Ctm::kTfCropAndResize;
    } else if (ctm == "tf_half_pixel_for_nn") {
      ctm_ = Ctm::kTfHalfPixelForNn;
    } else {
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'coordinate_transformation_mode' = '" + ctm + "' is unknown");
    }
    const std::string nm = info.attr_string("nearest_mode", "round_prefer_floor");
    if (nm == "round_prefer_floor") {
      nearest_ = NearestMode::kRoundPreferFloor;
    } else if (nm == "round_prefer_ceil") {
      nearest_ = NearestMode::kRoundPreferCeil;
    } else if (nm == "floor") {
      nearest_ = NearestMode::kFloor;
    } else if (nm == "ceil") {
      nearest_ = NearestMode::kCeil;
    } else {
      info.fail(StatusCode::kInvalidArgument, "attribute 'nearest_mode' = '" + nm + "' is unknown");
    }
    const std::string kp = info.attr_string("keep_aspect_ratio_policy", "stretch");
    if (kp == "stretch") {
      aspect_ = Aspect::kStretch;
    } else if (kp == "not_larger") {
      aspect_ = Aspect::kNotLarger;
    } else if (kp == "not_smaller") {
      aspect_ = Aspect::kNotSmaller;
    } else {
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'keep_aspect_ratio_policy' = '" + kp + "' is unknown");
    }
    if (antialias_ && mode_ == RMode::kNearest) {
      info.fail(StatusCode::kInvalidArgument, "antialias is not defined for mode 'nearest'");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Shape& in = x.shape();
    const size_t r = in.size();
    if (r == 0) ctx.fail(StatusCode::kInvalidArgument, "input 'X' must have rank >= 1");
    std::vector<int64_t> axes;
    if (has_axes_) {
      std::vector<char> seen(r, 0);
      for (int64_t a : axes_) {
        const int64_t na = normalize_axis(a, static_cast<int64_t>(r), "attribute 'axes'");
        if (seen[static_cast<size_t>(na)]) {
          ctx.fail(StatusCode::kInvalidArgument, "attribute 'axes' repeats an axis");
        }
        seen[static_cast<size_t>(na)] = 1;
        axes.push_back(na);
      }
    } else {
      for (size_t i = 0; i < r; ++i) axes.push_back(static_cast<int64_t>(i));
    }
    const size_t na = axes.size();
    auto read_floats = [&](const Tensor* t) {
      std::vector<double> v;
      if (!t) return v;
      ORTLITE_DISPATCH_FLOAT(t->dtype(), "Resize roi/scales", [&](auto tag) {
        using T = decltype(tag);
        const T* p = t->data<T>();
        for (int64_t i = 0; i < t->numel(); ++i)
          v.push_back(static_cast<double>(static_cast<float>(p[i])));
      });
      return v;
    };
    std::vector<double> roi_in = read_floats(ctx.input(1));
    std::vector<double> scales_in = read_floats(ctx.input(2));
    std::vector<int64_t> sizes_in;
    if (const Tensor* s = ctx.input(3)) {
      if (s->dtype() != DataType::kInt64) {
        ctx.fail(StatusCode::kInvalidArgument, "input 'sizes' must be int64");
      }
      sizes_in = tensor_to_int64s(*s);
    }
    if (!scales_in.empty() && !sizes_in.empty()) {
      ctx.fail(StatusCode::kInvalidArgument, "only one of 'scales' and 'sizes' may be given");
    }
    if (scales_in.empty() && sizes_in.empty()) {
      ctx.fail(StatusCode::kInvalidArgument, "one of 'scales' and 'sizes' must be given");
    }
    std::vector<double> scale(r, 1.0);
    std::vector<int64_t> out(in.begin(), in.end());
    if (!scales_in.empty()) {
      if (scales_in.size() != na) {
        ctx.fail(StatusCode::kInvalidArgument, "input 'scales' has " +
                                                   std::to_string(scales_in.size()) +
                                                   " values for " + std::to_string(na) + " axes");
      }
      for (size_t i = 0; i < na; ++i) {
        const size_t a = static_cast<size_t>(axes[i]);
        if (!(scales_in[i] > 0) || scales_in[i] > 1e6) {
          ctx.fail(StatusCode::kInvalidArgument, "input 'scales' must be positive");
        }
        scale[a] = scales_in[i];
        out[a] = static_cast<int64_t>(scales_in[i] * static_cast<double>(in[a]));
      }
    } else {
      if (sizes_in.size() != na) {
        ctx.fail(StatusCode::kInvalidArgument, "input 'sizes' has " +
                                                   std::to_string(sizes_in.size()) +
                                                   " values for " + std::to_string(na) + " axes");
      }
      for (size_t i = 0; i < na; ++i) {
        const size_t a = static_cast<size_t>(axes[i]);
        if (sizes_in[i] < 0 || sizes_in[i] > (int64_t{1} << 31) || in[a] == 0) {
          ctx.fail(StatusCode::kInvalidArgument, "input 'sizes' is out of range");
        }
        out[a] = sizes_in[i];
        scale[a] = static_cast<double>(sizes_in[i]) / static_cast<double>(in[a]);
      }
      if (aspect_ != Aspect::kStretch) {
        double s = scale[static_cast<size_t>(axes[0])];
        for (int64_t a : axes) {
          s = aspect_ == Aspect::kNotLarger ? std::min(s, scale[static_cast<size_t>(a)])
                                            : std::max(s, scale[static_cast<size_t>(a)]);
        }
        for (int64_t a : axes) {
          scale[static_cast<size_t>(a)] = s;
          out[static_cast<size_t>(a)] =
              static_cast<int64_t>(s * static_cast<double>(in[static_cast<size_t>(a)]) + 0.5);
        }
      }
    }
    // roi: [starts..., ends...] for the axes.
    std::vector<double> roi(2 * r);
    for (size_t i = 0; i < r; ++i) {
      roi[i] = 0.0;
      roi[r + i] = 1.0;
    }
    const bool has_roi = !roi_in.empty();
    if (has_roi) {
      if (roi_in.size() != 2 * na) {
        ctx.fail(StatusCode::kInvalidArgument, "input 'roi' has " + std::to_string(roi_in.size()) +
                                                   " values, expected " + std::to_string(2 * na));
      }
      for (size_t i = 0; i < na; ++i) {
        roi[static_cast<size_t>(axes[i])] = roi_in[i];
        roi[r + static_cast<size_t>(axes[i])] = roi_in[na + i];
      }
    }
    if (ctm_ == Ctm::kTfCropAndResize && !has_roi) {
      ctx.fail(StatusCode::kInvalidArgument,
               "coordinate_transformation_mode tf_crop_and_resize needs input 'roi'");
    }
    Shape out_shape(out.begin(), out.end());
    // Every intermediate (one axis resized at a time) is bounded by max(in, out) per dim.
    double biggest = 1;
    for (size_t i = 0; i < r; ++i) {
      biggest *= static_cast<double>(std::max(in[i], out_shape[i]));
    }
    if (biggest > static_cast<double>(int64_t{1} << 28)) {
      ctx.fail(StatusCode::kInvalidArgument,
               "output shape " + shape_to_string(out_shape) + " is too large");
    }
    if (try_fast(ctx, x, axes, scale, out, roi, has_roi, out_shape)) return;
    // Work in double.
    std::vector<double> cur(static_cast<size_t>(x.numel()));
    ORTLITE_DISPATCH_NUMERIC(x.dtype(), "Resize", [&](auto tag) {
      using T = decltype(tag);
      const T* p = x.data<T>();
      for (size_t i = 0; i < cur.size(); ++i) {
        if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
          cur[i] = static_cast<double>(static_cast<float>(p[i]));
        } else {
          cur[i] = static_cast<double>(p[i]);
        }
      }
    });
    Shape cur_shape = in;
    for (int64_t a64 : axes) {
      const size_t a = static_cast<size_t>(a64);
      const bool default_roi =
          !has_roi || (std::fabs(roi[a]) < 1e-9 && std::fabs(roi[r + a] - 1) < 1e-9);
      if (std::fabs(scale[a] - 1.0) < 1e-9 && out[a] == cur_shape[a] && default_roi) continue;
      cur = resize_axis(ctx, cur, cur_shape, a, scale[a], out[a], roi[a], roi[r + a]);
      cur_shape[a] = out[a];
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), out_shape);
    ORTLITE_DISPATCH_NUMERIC(x.dtype(), "Resize", [&](auto tag) {
      using T = decltype(tag);
      T* p = y.data<T>();
      for (size_t i = 0; i < cur.size(); ++i) {
        if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
          p[i] = T(static_cast<float>(cur[i]));
        } else if constexpr (std::is_floating_point_v<T>) {
          p[i] = static_cast<T>(cur[i]);
        } else if constexpr (std::is_same_v<T, bool>) {
          p[i] = cur[i] != 0;
        } else {
          double v = std::nearbyint(cur[i]);
          v = std::min(std::max(v, static_cast<double>(std::numeric_limits<T>::lowest())),
                       static_cast<double>(std::numeric_limits<T>::max()));
          p[i] = std::isnan(v) ? T(0) : static_cast<T>(v);
        }
      }
    });
  }

 private:
  // Per axis of the fast path: for nearest the source index, for linear two indices and
  // weights; -1 (nearest) / extrap (linear) where extrapolation_value is written.
  struct Table {
    bool resized = false;
    std::vector<int64_t> i0, i1;
    std::vector<float> w0, w1;
    std::vector<double> d0, d1;  // the weights in double (linear, integer elements)
    std::vector<char> ex;
    bool any_ex = false;
  };

  void make_table(int64_t in_w, int64_t out_w, bool resized, double scale, double roi_start,
                  double roi_end, Table& t) const {
    t.resized = resized;
    t.i0.resize(static_cast<size_t>(out_w));
    t.i1.resize(static_cast<size_t>(out_w));
    t.w0.assign(static_cast<size_t>(out_w), 0.f);
    t.w1.assign(static_cast<size_t>(out_w), 1.f);
    t.ex.assign(static_cast<size_t>(out_w), 0);
    if (!resized) {
      for (int64_t i = 0; i < out_w; ++i)
        t.i0[static_cast<size_t>(i)] = t.i1[static_cast<size_t>(i)] = i;
      return;
    }
    std::vector<std::vector<int64_t>> idx;
    std::vector<std::vector<double>> cf;
    axis_table(in_w, out_w, scale, roi_start, roi_end, idx, cf, t.ex);
    for (size_t i = 0; i < static_cast<size_t>(out_w); ++i) {
      t.any_ex = t.any_ex || t.ex[i];
      if (mode_ == RMode::kNearest) {
        t.i0[i] = t.i1[i] = cf[i][0] != 0 ? idx[i][0] : idx[i][1];
      } else {
        t.i0[i] = idx[i][0];
        t.i1[i] = idx[i][1];
        t.w0[i] = static_cast<float>(cf[i][0]);
        t.w1[i] = static_cast<float>(cf[i][1]);
        t.d0.push_back(cf[i][0]);
        t.d1.push_back(cf[i][1]);
      }
    }
  }

  // The table of one axis, built once per set of arguments: a model calls Resize with the
  // same sizes on every run, and building a table allocated two small vectors per output
  // coordinate (a 2x nearest upscale of 1x16x80x80: a fifth of the call). The last kTables
  // tables are kept (the two axes of up to two shapes), behind a lock for concurrent runs.
  struct TableKey {
    int64_t in_w, out_w;
    bool resized;
    double scale, roi_start, roi_end;
    bool operator==(const TableKey& o) const {
      // Bitwise equality of the doubles (NaN scales are rejected before this point).
      return in_w == o.in_w && out_w == o.out_w && resized == o.resized &&
             std::memcmp(&scale, &o.scale, sizeof scale) == 0 &&
             std::memcmp(&roi_start, &o.roi_start, sizeof roi_start) == 0 &&
             std::memcmp(&roi_end, &o.roi_end, sizeof roi_end) == 0;
    }
  };
  static constexpr int kTables = 4;

  std::shared_ptr<const Table> cached_table(int64_t in_w, int64_t out_w, bool resized, double scale,
                                            double roi_start, double roi_end) const {
    const TableKey key{in_w, out_w, resized, scale, roi_start, roi_end};
    {
      std::lock_guard<std::mutex> lock(tables_mu_);
      for (int i = 0; i < kTables; ++i)
        if (tables_[i].second && tables_[i].first == key) return tables_[i].second;
    }
    auto t = std::make_shared<Table>();
    make_table(in_w, out_w, resized, scale, roi_start, roi_end, *t);
    std::lock_guard<std::mutex> lock(tables_mu_);
    tables_[next_table_] = {key, t};
    next_table_ = (next_table_ + 1) % kTables;
    return t;
  }

  // Nearest (any element type) and linear (float) resizing only the last two axes, without
  // antialias or exclude_outside: per-axis tables, then row copies / one vectorized blend.
  bool try_fast(KernelContext& ctx, const Tensor& x, const std::vector<int64_t>& axes,
                const std::vector<double>& scale, const std::vector<int64_t>& out,
                const std::vector<double>& roi, bool has_roi, const Shape& out_shape) const {
    const Shape& in = x.shape();
    const size_t r = in.size();
    if (r < 2 || antialias_ || exclude_outside_ || mode_ == RMode::kCubic) return false;
    const bool is_float = x.dtype() == DataType::kFloat;
    // 8- and 16-bit integers are exact in float, and so are the products by the table's
    // weights up to float's rounding of the sum; wider integers keep the double path.
    const DataType dt = x.dtype();
    const bool small_int = dt == DataType::kUInt8 || dt == DataType::kInt8 ||
                           dt == DataType::kUInt16 || dt == DataType::kInt16;
    if (mode_ == RMode::kLinear && !is_float && !small_int) return false;
    if (ctm_ == Ctm::kTfCropAndResize && !is_float) return false;
    const size_t esize = dtype_size(x.dtype());
    if (esize != 1 && esize != 2 && esize != 4 && esize != 8) return false;
    if (x.dtype() == DataType::kString) return false;
    std::vector<char> resized(r, 0);
    for (int64_t a64 : axes) {
      const size_t a = static_cast<size_t>(a64);
      const bool default_roi =
          !has_roi || (std::fabs(roi[a]) < 1e-9 && std::fabs(roi[r + a] - 1) < 1e-9);
      if (std::fabs(scale[a] - 1.0) < 1e-9 && out[a] == in[a] && default_roi) continue;
      if (a + 2 < r) return false;
      resized[a] = 1;
    }
    const int64_t ih_n = in[r - 2], iw_n = in[r - 1], oh_n = out[r - 2], ow_n = out[r - 1];
    int64_t outer = 1;
    for (size_t i = 0; i + 2 < r; ++i) outer *= in[i];
    if ((resized[r - 2] && ih_n == 0 && oh_n > 0) || (resized[r - 1] && iw_n == 0 && ow_n > 0)) {
      return false;  // the general path reports it
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), out_shape);
    if (y.numel() == 0) return true;
    const std::shared_ptr<const Table> thp =
        cached_table(ih_n, oh_n, resized[r - 2], scale[r - 2], roi[r - 2], roi[2 * r - 2]);
    const std::shared_ptr<const Table> twp =
        cached_table(iw_n, ow_n, resized[r - 1], scale[r - 1], roi[r - 1], roi[2 * r - 1]);
    const Table &th = *thp, &tw = *twp;
    const float ev = static_cast<float>(static_cast<double>(extrapolation_));
    ThreadPool* pool = ctx.thread_pool();
    const double cost = static_cast<double>(oh_n * ow_n) * (mode_ == RMode::kLinear ? 4 : 1);
    if (mode_ == RMode::kLinear && !is_float) {
      auto run_int = [&](auto tag) {
        using T = decltype(tag);
        const T* xp = x.data<T>();
        T* yp = y.data<T>();
        parallel_for(pool, outer, cost, [&](int64_t o0, int64_t o1) {
          std::vector<double> row(static_cast<size_t>(iw_n));
          for (int64_t o = o0; o < o1; ++o)
            int_linear_plane(xp + o * ih_n * iw_n, iw_n, yp + o * oh_n * ow_n, oh_n, ow_n, th, tw,
                             row.data());
        });
      };
      if (dt == DataType::kUInt8) run_int(uint8_t{});
      if (dt == DataType::kInt8) run_int(int8_t{});
      if (dt == DataType::kUInt16) run_int(uint16_t{});
      if (dt == DataType::kInt16) run_int(int16_t{});
      return true;
    }
    if (mode_ == RMode::kLinear) {
      const float* xp = x.data<float>();
      float* yp = y.data<float>();
      parallel_for(pool, outer, cost, [&](int64_t o0, int64_t o1) {
        std::vector<float> buf(static_cast<size_t>(2 * ow_n));
        for (int64_t o = o0; o < o1; ++o) {
          linear_plane(xp + o * ih_n * iw_n, iw_n, yp + o * oh_n * ow_n, oh_n, ow_n, th, tw, ev,
                       buf.data());
        }
      });
      return true;
    }
    auto run = [&](auto tag) {
      using U = decltype(tag);
      const U* xp = static_cast<const U*>(x.raw_data());
      U* yp = static_cast<U*>(y.raw_data());
      U evu{};
      if constexpr (sizeof(U) == sizeof(float)) {
        if (is_float) std::memcpy(&evu, &ev, sizeof(float));
      }
      const int64_t k = tw.resized && !tw.any_ex ? upscale_factor(tw.i0.data(), ow_n, iw_n) : 0;
#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
      if constexpr (sizeof(U) == 4) {
        if (k == 2 && th.resized && !th.any_ex && upscale_factor(th.i0.data(), oh_n, ih_n) == 2 &&
            cpu_has_avx512()) {
          const bool stream = outer * oh_n * ow_n * 4 >= kStreamBytes;
          parallel_for(pool, outer, cost, [&](int64_t o0, int64_t o1) {
            repeat2_planes_u32(reinterpret_cast<const uint32_t*>(xp + o0 * ih_n * iw_n),
                               reinterpret_cast<uint32_t*>(yp + o0 * oh_n * ow_n), o1 - o0, ih_n,
                               iw_n, stream);
          });
          return;
        }
      }
#endif
      parallel_for(pool, outer, cost, [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o) {
          nearest_plane<U>(xp + o * ih_n * iw_n, iw_n, yp + o * oh_n * ow_n, oh_n, ow_n, th, tw,
                           evu, k);
        }
      });
    };
    if (esize == 1) run(uint8_t{});
    if (esize == 2) run(uint16_t{});
    if (esize == 4) run(uint32_t{});
    if (esize == 8) run(uint64_t{});
    return true;
  }

  std::vector<double> coeffs(double ratio, double scale) const {
    if (mode_ == RMode::kNearest) {
      if (ratio == 1.0) return {0, 1};
      switch (nearest_) {
        case NearestMode::kRoundPreferFloor:
          return {ratio <= 0.5 ? 1.0 : 0.0, ratio > 0.5 ? 1.0 : 0.0};
        case NearestMode::kRoundPreferCeil:
          return {ratio < 0.5 ? 1.0 : 0.0, ratio >= 0.5 ? 1.0 : 0.0};
        case NearestMode::kFloor:
          return {1, 0};
        case NearestMode::kCeil:
          return {0, 1};
      }
    }
    const double a = cubic_a_;
    if (mode_ == RMode::kLinear) {
      if (!antialias_) return {1 - ratio, ratio};
      const double s = std::min(scale, 1.0);
      const int64_t start = static_cast<int64_t>(std::floor(-1 / s) + 1);
      const int64_t footprint = 2 - 2 * start;
      std::vector<double> c;
      double sum = 0;
      for (int64_t i = start; i < start + footprint; ++i) {
        const double v =
            std::min(std::max(1 - std::fabs((static_cast<double>(i) - ratio) * s), 0.0), 1.0);
        c.push_back(v);
        sum += v;
      }
      for (double& v : c) v /= sum;
      return c;
    }
    if (!antialias_) {
      const double r1 = ratio + 1, q = 1 - ratio, q1 = q + 1;
      return {((a * r1 - 5 * a) * r1 + 8 * a) * r1 - 4 * a,
              ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1, ((a + 2) * q - (a + 3)) * q * q + 1,
              ((a * q1 - 5 * a) * q1 + 8 * a) * q1 - 4 * a};
    }
    const double s = std::min(scale, 1.0);
    const int64_t i_start = static_cast<int64_t>(std::floor(-2 / s) + 1);
    const int64_t i_end = 2 - i_start;
    std::vector<double> c;
    double sum = 0;
    for (int64_t i = i_start; i < i_end; ++i) {
      const double xx = std::fabs(s * (static_cast<double>(i) - ratio));
      double v = 0;
      if (xx <= 1) {
        v = (a + 2) * xx * xx * xx - (a + 3) * xx * xx + 1;
      } else if (xx < 2) {
        v = a * xx * xx * xx - 5 * a * xx * xx + 8 * a * xx - 4 * a;
      }
      c.push_back(v);
      sum += v;
    }
    for (double& v : c) v /= sum;
    return c;
  }

  // Per output coordinate of one axis: the source indices (clamped), their weights, and
  // whether the coordinate falls outside the roi (tf_crop_and_resize: extrapolation_value).
  void axis_table(int64_t in_w, int64_t out_w, double scale, double roi_start, double roi_end,
                  std::vector<std::vector<int64_t>>& idx, std::vector<std::vector<double>>& cf,
                  std::vector<char>& extrap) const {
    idx.assign(static_cast<size_t>(out_w), {});
    cf.assign(static_cast<size_t>(out_w), {});
    extrap.assign(static_cast<size_t>(out_w), 0);
    const double out_wf = scale * static_cast<double>(in_w);
    const double in_wf = static_cast<double>(in_w);
    for (int64_t yo = 0; yo < out_w; ++yo) {
      const double yv = static_cast<double>(yo);
      double xo = 0;
      switch (ctm_) {
        case Ctm::kAlignCorners:
          xo = out_wf == 1 ? 0.0 : yv * (in_wf - 1) / (out_wf - 1);
          break;
        case Ctm::kAsymmetric:
          xo = yv / scale;
          break;
        case Ctm::kTfHalfPixelForNn:
          xo = (yv + 0.5) / scale;
          break;
        case Ctm::kTfCropAndResize:
          xo = out_wf == 1 ? (roi_end - roi_start) * (in_wf - 1) / 2
                           : yv * (roi_end - roi_start) * (in_wf - 1) / (out_wf - 1);
          xo += roi_start * (in_wf - 1);
          extrap[static_cast<size_t>(yo)] = xo < 0 || xo > in_wf - 1;
          break;
        case Ctm::kPytorchHalfPixel:
          xo = out_wf == 1 ? -0.5 : (yv + 0.5) / scale - 0.5;
          break;
        case Ctm::kHalfPixel:
          xo = (yv + 0.5) / scale - 0.5;
          break;
        case Ctm::kHalfPixelSymmetric: {
          const double adjustment = static_cast<double>(out_w) / out_wf;
          const double center = in_wf / 2;
          xo = center * (1 - adjustment) + (yv + 0.5) / scale - 0.5;
          break;
        }
      }
      const double fl = std::floor(xo);
      const double ratio = xo == fl ? 1.0 : xo - fl;
      std::vector<double> c = coeffs(ratio, scale);
      const int64_t n = static_cast<int64_t>(c.size());
      const int64_t pad = (n + 1) / 2;
      const double xp = xo + static_cast<double>(pad);
      const double pp = std::floor(xp);
      const double frac = xp - pp;
      int64_t off;
      if (n % 2 == 0) {
        off = frac == 0 ? -(n / 2) : -(n / 2) + 1;
      } else {
        const int64_t base = -((n - 1) / 2);
        off = frac <= 0.5 ? base : base + 1;
      }
      const int64_t start = static_cast<int64_t>(pp) + off;
      std::vector<int64_t> ix(static_cast<size_t>(n));
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        const int64_t i = start + k - pad;
        if (exclude_outside_ && (i < 0 || i >= in_w)) c[static_cast<size_t>(k)] = 0;
        sum += c[static_cast<size_t>(k)];
        ix[static_cast<size_t>(k)] = std::min(std::max(i, int64_t{0}), in_w - 1);
      }
      if (exclude_outside_) {
        if (sum == 0) sum = 1;
        for (double& v : c) v /= sum;
      }
      idx[static_cast<size_t>(yo)] = std::move(ix);
      cf[static_cast<size_t>(yo)] = std::move(c);
    }
  }

  std::vector<double> resize_axis(const KernelContext& ctx, const std::vector<double>& data,
                                  const Shape& shape, size_t axis, double scale, int64_t out_w,
                                  double roi_start, double roi_end) const {
    const int64_t in_w = shape[axis];
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < axis; ++d) outer *= shape[d];
    for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
    std::vector<double> res(static_cast<size_t>(outer * out_w * inner));
    if (res.empty()) return res;
    if (in_w == 0) ctx.fail(StatusCode::kInvalidArgument, "cannot resize an empty axis");
    std::vector<std::vector<int64_t>> idx;
    std::vector<std::vector<double>> cf;
    std::vector<char> extrap;
    axis_table(in_w, out_w, scale, roi_start, roi_end, idx, cf, extrap);
    const double ev = extrapolation_;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t yo = 0; yo < out_w; ++yo) {
        double* dst = &res[static_cast<size_t>((o * out_w + yo) * inner)];
        if (extrap[static_cast<size_t>(yo)]) {
          for (int64_t i = 0; i < inner; ++i) dst[i] = ev;
          continue;
        }
        for (int64_t i = 0; i < inner; ++i) dst[i] = 0;
        const auto& ix = idx[static_cast<size_t>(yo)];
        const auto& c = cf[static_cast<size_t>(yo)];
        for (size_t k = 0; k < ix.size(); ++k) {
          const double* src = &data[static_cast<size_t>((o * in_w + ix[k]) * inner)];
          for (int64_t i = 0; i < inner; ++i) dst[i] += c[k] * src[i];
        }
      }
    }
    return res;
  }

  RMode mode_ = RMode::kNearest;
  Ctm ctm_ = Ctm::kHalfPixel;
  NearestMode nearest_ = NearestMode::kRoundPreferFloor;
  Aspect aspect_ = Aspect::kStretch;
  float cubic_a_;
  bool exclude_outside_;
  float extrapolation_;
  bool antialias_;
  std::vector<int64_t> axes_;
  bool has_axes_;
  mutable std::mutex tables_mu_;
  mutable std::pair<TableKey, std::shared_ptr<const Table>> tables_[kTables];
  mutable int next_table_ = 0;
};

}  // namespace

void register_resize(KernelRegistry& r) {
  r.add("", "Resize", 11, 12, make_factory<Resize>());
  r.add("", "Resize", 13, 17, make_factory<Resize>());
  r.add("", "Resize", 18, 18, make_factory<Resize>());
  r.add("", "Resize", 19, kNewestOpset, make_factory<Resize>());
}

}  // namespace nn
}  // namespace ortlite
