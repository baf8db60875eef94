// com.microsoft QLinearWhere(condition, X, X_scale, X_zero_point, Y, Y_scale, Y_zero_point,
// Z_scale, Z_zero_point) -> Z (uint8 or int8, all of one type; what quantize_static writes in
// QOperator format for Where with ForceQuantizeNoInputCheck): Where(condition, X, Y) in Z's
// quantization, with numpy broadcasting of the three. As onnxruntime: X and Y are requantized
// to Z's scale and zero point through 256-entry tables (quantize(x_scale * (x - x_zp)) by
// z_scale, z_zp: build_qlinear_table), which copy the byte when the parameters are Z's.
// Scales are single floats; an omitted zero point is 0 (onnxruntime requires all nine
// inputs).
#include "providers/cpu/common/elementwise.h"
#include "providers/cpu/quant/quant_common.h"

namespace ortlite {
namespace quant {
namespace {

class QLinearWhere final : public Kernel {
 public:
  explicit QLinearWhere(const KernelInfo& info) {
    if (info.num_inputs() < 8)
      info.fail(StatusCode::kInvalidGraph,
                "QLinearWhere takes condition, X, X_scale, X_zero_point, Y, Y_scale, "
                "Y_zero_point, Z_scale and Z_zero_point; got " +
                    std::to_string(info.num_inputs()) + " inputs");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& c = ctx.required_input(0);
    const Tensor& x = ctx.required_input(1);
    const Tensor& y = ctx.required_input(4);
    if (c.dtype() != DataType::kBool)
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input 'condition' must be bool, got ") + dtype_name(c.dtype()));
    check_qop_int8(ctx, x, "X");
    if (y.dtype() != x.dtype())
      ctx.fail(StatusCode::kInvalidArgument, std::string("input 'Y' must have the type of 'X' (") +
                                                 dtype_name(x.dtype()) + "), got " +
                                                 dtype_name(y.dtype()));
    const DataType t = x.dtype();
    const float xs = qop_scale(ctx, ctx.required_input(2), "X_scale");
    const int32_t xz = qop_zero_point(ctx, ctx.input(3), t, "X_zero_point");
    const float ys = qop_scale(ctx, ctx.required_input(5), "Y_scale");
    const int32_t yz = qop_zero_point(ctx, ctx.input(6), t, "Y_zero_point");
    const float zs = qop_scale(ctx, ctx.required_input(7), "Z_scale");
    const int32_t zz = qop_zero_point(ctx, ctx.input(8), t, "Z_zero_point");
    const bool is_signed = t == DataType::kInt8;
    uint8_t tx[256], ty[256];
    auto identity = [](float v) { return v; };
    build_qlinear_table(xs, xz, zs, zz, is_signed, identity, tx);
    build_qlinear_table(ys, yz, zs, zz, is_signed, identity, ty);
    const Shape out =
        ew::broadcast_or_fail(ctx, ew::broadcast_or_fail(ctx, c.shape(), x.shape()), y.shape());
    Tensor& z = ctx.allocate_output(0, t, out);
    const ew::BroadcastPlan<3> plan =
        ew::make_broadcast_plan<3>(out, {&c.shape(), &x.shape(), &y.shape()});
    if (plan.total == 0) return;
    const bool* cd = c.data<bool>();
    const uint8_t* xd = static_cast<const uint8_t*>(x.raw_data());
    const uint8_t* yd = static_cast<const uint8_t*>(y.raw_data());
    uint8_t* zd = static_cast<uint8_t*>(z.raw_data());
    const int64_t sc = plan.inner_stride[0], sx = plan.inner_stride[1], sy = plan.inner_stride[2];
    parallel_for(ctx.thread_pool(), plan.total, 2.0, [&](int64_t begin, int64_t end) {
      ew::for_each_span<3>(plan, begin, end,
                           [&](int64_t oo, const std::array<int64_t, 3>& io, int64_t len) {
                             const bool* pc = cd + io[0];
                             const uint8_t* px = xd + io[1];
                             const uint8_t* py = yd + io[2];
                             uint8_t* po = zd + oo;
                             for (int64_t i = 0; i < len; ++i)
                               po[i] = pc[i * sc] ? tx[px[i * sx]] : ty[py[i * sy]];
                           });
    });
  }
};

}  // namespace

void register_qlinear_where(KernelRegistry& r) {
  r.add("com.microsoft", "QLinearWhere", 1, kMaxOpset, make_factory<QLinearWhere>());
}

}  // namespace quant
}  // namespace ortlite
