// com.microsoft QLinearGlobalAveragePool and QLinearAveragePool (uint8, int8; channels_last).
//
// QLinearGlobalAveragePool is onnxruntime's (MLAS): per channel the int32 sum of the image
// less x_zero_point * image_size, times x_scale / (y_scale * image_size) in float, rounded
// half to even, plus y_zero_point, saturated. MLAS refuses images of 2^24 elements or more
// and multipliers outside [2^-32, 256): so does ortlite (kInvalidArgument).
//
// QLinearAveragePool (1 to 3 spatial dims; auto_pad, kernel_shape, strides, pads, ceil_mode,
// count_include_pad) is onnxruntime's too: x dequantized to float (x_scale * (x - x_zp)), the
// window's float sum in row-major order divided by its element count (the kernel's size with
// count_include_pad, else the part inside the input), then rint(y / y_scale + y_zp)
// saturated. A window over the whole unpadded image runs as QLinearGlobalAveragePool, as in
// onnxruntime.
#include <algorithm>
#include <cmath>
#include <vector>

#include "compute/int8_gemm.h"
#include "providers/cpu/quant/quant_common.h"
#include "providers/shared/spatial_attrs.h"

namespace ortlite {
namespace quant {
namespace {

void global_average_pool(const KernelContext& ctx, const Tensor& x, float xs, int32_t xz, float ys,
                         int32_t yz, int64_t N, int64_t C, int64_t image, bool channels_last,
                         Tensor& y);

class QLinearGlobalAveragePool final : public Kernel {
 public:
  explicit QLinearGlobalAveragePool(const KernelInfo& info)
      : channels_last_(info.attr_int("channels_last", 0) != 0) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    check_qop_int8(ctx, x, "X");
    const float xs = qop_scale(ctx, ctx.required_input(1), "x_scale");
    const int32_t xz = qop_zero_point(ctx, ctx.input(2), x.dtype(), "x_zero_point");
    const float ys = qop_scale(ctx, ctx.required_input(3), "y_scale");
    const int32_t yz = qop_zero_point(ctx, ctx.input(4), x.dtype(), "y_zero_point");
    if (x.rank() < 3) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'X' needs rank >= 3, got " + shape_to_string(x.shape()));
    }
    const Shape& xsh = x.shape();
    const size_t s0 = channels_last_ ? 1 : 2, s1 = s0 + xsh.size() - 2;
    const int64_t N = xsh[0], C = channels_last_ ? xsh.back() : xsh[1];
    int64_t image = 1;
    for (size_t d = s0; d < s1; ++d) image *= xsh[d];
    Shape ysh = xsh;
    for (size_t d = s0; d < s1; ++d) ysh[d] = 1;
    Tensor& y = ctx.allocate_output(0, x.dtype(), ysh);
    if (y.numel() == 0) return;
    global_average_pool(ctx, x, xs, xz, ys, yz, N, C, image, channels_last_, y);
  }

 private:
  bool channels_last_;
};

// Sums per channel as int32 and requantizes them (MLAS's QLinearGlobalAveragePool).
void global_average_pool(const KernelContext& ctx, const Tensor& x, float xs, int32_t xz, float ys,
                         int32_t yz, int64_t N, int64_t C, int64_t image, bool channels_last,
                         Tensor& y) {
  const float mult = xs / (ys * static_cast<float>(image));
  if (image >= (int64_t(1) << 24) || !(mult >= 0x1.0p-32f) || !(mult < 256.0f)) {
    ctx.fail(StatusCode::kInvalidArgument,
             "parameters out of onnxruntime's computation range: image size " +
                 std::to_string(image) + ", x_scale / (y_scale * image size) = " +
                 std::to_string(mult) + " (needs < 2^24 elements and a value in [2^-32, 256))");
  }
  const bool is_signed = x.dtype() == DataType::kInt8;
  const int32_t bias = -xz * static_cast<int32_t>(image);
  const uint8_t* xd = static_cast<const uint8_t*>(x.raw_data());
  uint8_t* yd = static_cast<uint8_t*>(y.raw_data());
  if (!channels_last || C == 1) {
    parallel_for(ctx.thread_pool(), N * C, 1.0 * static_cast<double>(image),
                 [&](int64_t s, int64_t e) {
                   std::vector<int32_t> acc(static_cast<size_t>(e - s));
                   for (int64_t c = s; c < e; ++c) {
                     const uint8_t* p = xd + c * image;
                     int32_t sum = 0;
                     if (is_signed) {
                       const int8_t* q = reinterpret_cast<const int8_t*>(p);
                       for (int64_t i = 0; i < image; ++i) sum += q[i];
                     } else {
                       for (int64_t i = 0; i < image; ++i) sum += p[i];
                     }
                     acc[c - s] = sum;
                   }
                   int8gemm::requantize(acc.data(), e - s, bias, &mult, 0, yz, is_signed, yd + s);
                 });
    return;
  }
  parallel_for(ctx.thread_pool(), N, 1.0 * static_cast<double>(image * C),
               [&](int64_t s, int64_t e) {
                 std::vector<int32_t> acc(static_cast<size_t>(C));
                 for (int64_t n = s; n < e; ++n) {
                   std::fill(acc.begin(), acc.end(), 0);
                   const uint8_t* p = xd + n * image * C;
                   for (int64_t i = 0; i < image; ++i, p += C) {
                     if (is_signed) {
                       const int8_t* q = reinterpret_cast<const int8_t*>(p);
                       for (int64_t c = 0; c < C; ++c) acc[c] += q[c];
                     } else {
                       for (int64_t c = 0; c < C; ++c) acc[c] += p[c];
                     }
                   }
                   int8gemm::requantize(acc.data(), C, bias, &mult, 0, yz, is_signed, yd + n * C);
                 }
               });
}

class QLinearAveragePool final : public Kernel {
 public:
  explicit QLinearAveragePool(const KernelInfo& info)
      : ceil_mode_(info.attr_int("ceil_mode", 0) != 0),
        count_include_pad_(info.attr_int("count_include_pad", 0) != 0),
        channels_last_(info.attr_int("channels_last", 0) != 0) {
    attrs_.load(info, true);
    for (int64_t d : attrs_.dilations) {
      if (d != 1) info.fail(StatusCode::kInvalidGraph, "attribute 'dilations' must be all 1");
    }
    if (attrs_.kernel_shape.empty() || attrs_.kernel_shape.size() > 3) {
      info.fail(StatusCode::kInvalidGraph, "attribute 'kernel_shape' needs 1 to 3 dims");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    check_qop_int8(ctx, x, "X");
    const float xs = qop_scale(ctx, ctx.required_input(1), "x_scale");
    const int32_t xz = qop_zero_point(ctx, ctx.input(2), x.dtype(), "x_zero_point");
    const float ys = qop_scale(ctx, ctx.required_input(3), "y_scale");
    const int32_t yz = qop_zero_point(ctx, ctx.input(4), x.dtype(), "y_zero_point");
    const size_t sr = attrs_.kernel_shape.size();
    if (x.rank() != sr + 2) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'X' " + shape_to_string(x.shape()) + " must have rank " +
                   std::to_string(sr + 2) + " for kernel_shape of " + std::to_string(sr) + " dims");
    }
    const Shape& xsh = x.shape();
    const int64_t N = xsh[0], C = channels_last_ ? xsh.back() : xsh[1];
    std::vector<int64_t> in(sr);
    for (size_t d = 0; d < sr; ++d) in[d] = xsh[channels_last_ ? 1 + d : 2 + d];
    const nn::SpatialGeometry g = nn::pool_geometry(ctx, attrs_, in, ceil_mode_);
    Shape ysh = xsh;
    for (size_t d = 0; d < sr; ++d) ysh[channels_last_ ? 1 + d : 2 + d] = g.out[d];
    Tensor& y = ctx.allocate_output(0, x.dtype(), ysh);
    if (y.numel() == 0) return;
    bool global = true;
    for (size_t d = 0; d < sr; ++d)
      global = global && g.kernel[d] == in[d] && g.pad_begin[d] == 0 && g.pad_end[d] == 0;
    int64_t image = 1, kernel_size = 1;
    for (size_t d = 0; d < sr; ++d) {
      image *= in[d];
      kernel_size *= g.kernel[d];
    }
    if (global) return global_average_pool(ctx, x, xs, xz, ys, yz, N, C, image, channels_last_, y);
    // Up to three spatial dims as (H, W, D), missing ones of size 1.
    int64_t H[3] = {1, 1, 1}, K[3] = {1, 1, 1}, S[3] = {1, 1, 1}, P[3] = {0, 0, 0},
            O[3] = {1, 1, 1};
    for (size_t d = 0; d < sr; ++d) {
      H[d] = in[d];
      K[d] = g.kernel[d];
      S[d] = g.stride[d];
      P[d] = g.pad_begin[d];
      O[d] = g.out[d];
    }
    const bool is_signed = x.dtype() == DataType::kInt8;
    float deq[256];
    for (int i = 0; i < 256; ++i) {
      const int32_t q = is_signed ? static_cast<int8_t>(i) : i;
      deq[i] = xs * static_cast<float>(q - xz);
    }
    const float lo = is_signed ? -128.0f : 0.0f, hi = is_signed ? 127.0f : 255.0f;
    const float yzf = static_cast<float>(yz);
    const uint8_t* xd = static_cast<const uint8_t*>(x.raw_data());
    uint8_t* yd = static_cast<uint8_t*>(y.raw_data());
    const int64_t out_image = O[0] * O[1] * O[2];
    // Element (c, h, w, d) of image n at xd[n * image * C + off]: NCHW puts c outermost.
    const int64_t cs = channels_last_ ? 1 : image, es = channels_last_ ? C : 1;
    const int64_t ocs = channels_last_ ? 1 : out_image, oes = channels_last_ ? C : 1;
    parallel_for(ctx.thread_pool(), N * C, 1.0 * static_cast<double>(out_image * kernel_size),
                 [&](int64_t s, int64_t e) {
                   for (int64_t nc = s; nc < e; ++nc) {
                     const int64_t n = nc / C, c = nc % C;
                     const uint8_t* xc = xd + n * image * C + c * cs;
                     uint8_t* yc = yd + n * out_image * C + c * ocs;
                     for (int64_t oh = 0; oh < O[0]; ++oh) {
                       int64_t h0 = oh * S[0] - P[0];
                       const int64_t h1 = std::min(h0 + K[0], H[0]);
                       h0 = std::max<int64_t>(h0, 0);
                       for (int64_t ow = 0; ow < O[1]; ++ow) {
                         int64_t w0 = ow * S[1] - P[1];
                         const int64_t w1 = std::min(w0 + K[1], H[1]);
                         w0 = std::max<int64_t>(w0, 0);
                         for (int64_t od = 0; od < O[2]; ++od) {
                           int64_t d0 = od * S[2] - P[2];
                           const int64_t d1 = std::min(d0 + K[2], H[2]);
                           d0 = std::max<int64_t>(d0, 0);
                           float sum = 0.0f;
                           for (int64_t h = h0; h < h1; ++h)
                             for (int64_t w = w0; w < w1; ++w)
                               for (int64_t d = d0; d < d1; ++d)
                                 sum += deq[xc[((h * H[1] + w) * H[2] + d) * es]];
                           const int64_t count =
                               count_include_pad_ ? kernel_size : (h1 - h0) * (w1 - w0) * (d1 - d0);
                           const float avg = sum / static_cast<float>(count);
                           // onnxruntime's quantize_value: rint(y / y_scale + y_zp), saturated.
                           float q = fp_barrier(avg / ys) + yzf;
                           q = q >= lo ? q : lo;  // NaN: the low end
                           q = q <= hi ? q : hi;
                           const int32_t r = static_cast<int32_t>(round_half_even(q));
                           yc[((oh * O[1] + ow) * O[2] + od) * oes] =
                               static_cast<uint8_t>(r & 0xff);
                         }
                       }
                     }
                   }
                 });
  }

 private:
  nn::SpatialAttrs attrs_;
  bool ceil_mode_, count_include_pad_, channels_last_;
};

}  // namespace

void register_qlinear_pool(KernelRegistry& r) {
  r.add("com.microsoft", "QLinearGlobalAveragePool", 1, kMaxOpset,
        make_factory<QLinearGlobalAveragePool>());
  r.add("com.microsoft", "QLinearAveragePool", 1, kMaxOpset, make_factory<QLinearAveragePool>());
}

}  // namespace quant
}  // namespace ortlite
