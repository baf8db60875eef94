// com.microsoft QLinearGlobalAveragePool and QLinearAveragePool (uint8, int8; channels_last).
//
// QLinearGlobalAveragePool is onnxruntime's (MLAS): per channel the int32 sum of the image
// less x_zero_point * image_size, times x_scale / (y_scale * image_size) in float, rounded
// half to even, plus y_zero_point, saturated. MLAS refuses images of 2^24 elements or more
// and multipliers outside [2^-32, 256): so does ortlite (kInvalidArgument).
#include <algorithm>
#include <cmath>
#include <vector>

#include "compute/int8_gemm.h"
#include "providers/cpu/quant/quant_common.h"
#include "providers/shared/pool_attrs.h"

namespace ortlite {
namespace quant {
namespace {

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
    if (!channels_last_ || C == 1) {
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

 private:
  bool channels_last_;
};

}  // namespace

void register_qlinear_pool(KernelRegistry& r) {
  r.add("com.microsoft", "QLinearGlobalAveragePool", 1, kMaxOpset,
        make_factory<QLinearGlobalAveragePool>());
}

}  // namespace quant
}  // namespace ortlite
