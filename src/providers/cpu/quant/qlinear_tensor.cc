// com.microsoft QLinearConcat and QLinearSoftmax (uint8, int8), as onnxruntime computes them.
//
// QLinearConcat(Y_scale, Y_zero_point, (X, X_scale, X_zero_point)...; axis): an input with
// the output's scale and zero point is copied; another is requantized through a 256-entry
// table (quantize(x_scale * (x - x_zp)) by y_scale, y_zp).
//
// QLinearSoftmax(X, X_scale, X_zp, Y_scale, Y_zp; axis, opset): onnxruntime's table method.
// table[x] = float(exp((x - 255 + shift) * x_scale)) in double, shift = max(0, log(FLT_MAX /
// D) - 5) / x_scale, D the reduced length; each row's entries are read shifted so its
// largest element maps to 255 (int8: 127 - max is added to each byte); the row's float sum
// is taken in order, and y = rint(table[x] * floor(1 / y_scale) / sum) + y_zp, saturated
// above at 255 (int8: wrapped to int8 below 256, 255 read as int8 above, as onnxruntime's).
// opset < 13 reduces over the flattened dims from axis, 13 over the axis alone (axis
// defaults to -1 for both).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "providers/cpu/quant/quant_common.h"

namespace ortlite {
namespace quant {
namespace {

class QLinearConcat final : public Kernel {
 public:
  explicit QLinearConcat(const KernelInfo& info) : axis_(info.attr_int_required("axis")) {
    const size_t n = info.num_inputs();
    if (n < 5 || (n - 2) % 3 != 0) {
      info.fail(StatusCode::kInvalidGraph,
                "QLinearConcat takes Y_scale, Y_zero_point and (tensor, scale, zero point) "
                "triples; got " +
                    std::to_string(n) + " inputs");
    }
  }

  void compute(KernelContext& ctx) const override {
    const float ys = qop_scale(ctx, ctx.required_input(0), "Y_scale");
    const Tensor& yzt = ctx.required_input(1);
    check_qop_int8(ctx, yzt, "Y_zero_point");
    const DataType t = yzt.dtype();
    const int32_t yz = qop_zero_point(ctx, &yzt, t, "Y_zero_point");
    const size_t count = (ctx.num_inputs() - 2) / 3;
    std::vector<const Tensor*> xs(count);
    const Tensor& first = ctx.required_input(2);
    const int64_t rank = static_cast<int64_t>(first.rank());
    const int64_t axis = normalize_axis(axis_, rank);
    Shape out = first.shape();
    out[axis] = 0;
    for (size_t k = 0; k < count; ++k) {
      const Tensor& x = ctx.required_input(2 + 3 * k);
      if (x.dtype() != t) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "input " + std::to_string(2 + 3 * k) + " must have the type of Y_zero_point (" +
                     dtype_name(t) + "), got " + dtype_name(x.dtype()));
      }
      bool ok = static_cast<int64_t>(x.rank()) == rank;
      for (int64_t d = 0; ok && d < rank; ++d) ok = d == axis || x.dim(d) == first.dim(d);
      if (!ok) {
        ctx.fail(StatusCode::kInvalidArgument, "input " + std::to_string(2 + 3 * k) + " of shape " +
                                                   shape_to_string(x.shape()) + " does not match " +
                                                   shape_to_string(first.shape()) +
                                                   " outside axis " + std::to_string(axis));
      }
      out[axis] += x.dim(axis);
      xs[k] = &x;
    }
    Tensor& y = ctx.allocate_output(0, t, out);
    if (y.numel() == 0) return;
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= out[d];
    const int64_t out_pitch = y.numel() / outer;
    uint8_t* yd = static_cast<uint8_t*>(y.raw_data());
    int64_t offset = 0;
    for (size_t k = 0; k < count; ++k) {
      const Tensor& x = *xs[k];
      const float sx = qop_scale(ctx, ctx.required_input(3 + 3 * k), "X_scale");
      const int32_t zx = qop_zero_point(ctx, &ctx.required_input(4 + 3 * k), t, "X_zero_point");
      const int64_t pitch = outer ? x.numel() / outer : 0;
      if (pitch == 0) continue;
      const bool copy = sx == ys && zx == yz;
      uint8_t table[256];
      if (!copy)
        build_qlinear_table(
            sx, zx, ys, yz, t == DataType::kInt8, [](float v) { return v; }, table);
      const uint8_t* xd = static_cast<const uint8_t*>(x.raw_data());
      parallel_for(ctx.thread_pool(), outer, 1.0 * static_cast<double>(pitch),
                   [&](int64_t s, int64_t e) {
                     for (int64_t o = s; o < e; ++o) {
                       const uint8_t* src = xd + o * pitch;
                       uint8_t* dst = yd + o * out_pitch + offset;
                       if (copy) {
                         std::memcpy(dst, src, static_cast<size_t>(pitch));
                       } else {
                         for (int64_t i = 0; i < pitch; ++i) dst[i] = table[src[i]];
                       }
                     }
                   });
      offset += pitch;
    }
  }

 private:
  int64_t axis_;
};

class QLinearSoftmax final : public Kernel {
 public:
  explicit QLinearSoftmax(const KernelInfo& info) : opset_(info.attr_int_required("opset")) {
    // The schema's default (-1) applies whatever the opset: onnxruntime's opset-dependent
    // fallback is never reached.
    axis_ = info.attr_int("axis", -1);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    check_qop_int8(ctx, x, "X");
    const DataType t = x.dtype();
    const float xs = qop_scale(ctx, ctx.required_input(1), "X_scale");
    qop_zero_point(ctx, ctx.input(2), t, "x_zero_point");
    const float ysv = qop_scale(ctx, ctx.required_input(3), "y_scale");
    const int32_t yz = qop_zero_point(ctx, ctx.input(4), t, "y_zero_point");
    Tensor& y = ctx.allocate_output(0, t, x.shape());
    if (x.numel() == 0) return;
    const int64_t rank = static_cast<int64_t>(x.rank());
    const int64_t axis = normalize_axis(axis_, rank);
    int64_t outer = 1, D = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
    if (opset_ < 13) {
      D = x.numel() / outer;
    } else {
      D = x.dim(axis);
      inner = x.numel() / (outer * D);
    }
    const bool is_signed = t == DataType::kInt8;
    // The table (onnxruntime's QlinearBuildLookupTableUint32).
    float table[256];
    double shift = std::log(static_cast<double>(FLT_MAX / static_cast<float>(D)));
    shift = std::max(0.0, shift - 5.0) / static_cast<double>(xs);
    for (int i = 0; i < 256; ++i) {
      const double e = std::exp((static_cast<double>(i) - 255 + shift) * static_cast<double>(xs));
      table[static_cast<uint8_t>(is_signed ? i - 128 : i)] = static_cast<float>(e);
    }
    const float yscale = std::floor(1.0f / ysv);
    const uint8_t* xd = static_cast<const uint8_t*>(x.raw_data());
    uint8_t* yd = static_cast<uint8_t*>(y.raw_data());
    parallel_for(
        ctx.thread_pool(), outer * inner, 3.0 * static_cast<double>(D), [&](int64_t s, int64_t e) {
          for (int64_t r = s; r < e; ++r) {
            const int64_t o = r / inner, in = r % inner;
            const uint8_t* xr = xd + o * D * inner + in;
            uint8_t* yr = yd + o * D * inner + in;
            // The row's bytes mapped so its largest element reads table[255] (127).
            int32_t mx = is_signed ? -128 : 0;
            for (int64_t i = 0; i < D; ++i) {
              const int32_t v = is_signed ? static_cast<int8_t>(xr[i * inner]) : xr[i * inner];
              mx = std::max(mx, v);
            }
            const int32_t adj = is_signed ? 127 - mx : 255 - mx;
            auto entry = [&](int64_t i) {
              const int32_t v = is_signed ? static_cast<int8_t>(xr[i * inner]) : xr[i * inner];
              return table[static_cast<uint8_t>(v + adj)];
            };
            float sum = 0.0f;
            for (int64_t i = 0; i < D; ++i) sum += entry(i);
            if (sum == 0.0f) {  // onnxruntime leaves such a row unwritten
              for (int64_t i = 0; i < D; ++i) yr[i * inner] = 0;
              continue;
            }
            for (int64_t i = 0; i < D; ++i) {
              const float q = fp_barrier(entry(i) * yscale) / sum;
              const int32_t vq = static_cast<int32_t>(round_half_even(q)) + yz;
              uint8_t out;
              if (is_signed) {
                out = vq > 255 ? 0xff : static_cast<uint8_t>(vq & 0xff);
              } else {
                out = static_cast<uint32_t>(vq) > 255 ? 255 : static_cast<uint8_t>(vq);
              }
              yr[i * inner] = out;
            }
          }
        });
  }

 private:
  int64_t opset_;
  int64_t axis_;
};

}  // namespace

void register_qlinear_tensor(KernelRegistry& r) {
  r.add("com.microsoft", "QLinearConcat", 1, kMaxOpset, make_factory<QLinearConcat>());
  r.add("com.microsoft", "QLinearSoftmax", 1, kMaxOpset, make_factory<QLinearSoftmax>());
}

}  // namespace quant
}  // namespace ortlite
