// Slice: starts/ends/axes attributes (opset 1-9), inputs with steps (opset 10+). Indices
// are clamped as the ONNX spec says; the copy is a strided view (negative steps give
// negative strides), with memcpy of contiguous rows.
#include <utility>

#include "providers/cpu/tensor/tensor_kernels.h"
#include "providers/shared/transpose_slice.h"

namespace ortlite {
namespace {

class Slice final : public Kernel {
 public:
  explicit Slice(const KernelInfo& info) : opset_(info.opset()) {
    if (opset_ < 10) attrs_.load(info);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.required_input(0);
    std::vector<int64_t> starts, ends, axes, steps;
    bool has_axes = attrs_.has_axes, has_steps = false;
    if (opset_ < 10) {
      starts = attrs_.starts;
      ends = attrs_.ends;
      axes = attrs_.axes;
    } else {
      starts = tensor_ops::read_int_list(ctx, ctx.required_input(1), "starts");
      ends = tensor_ops::read_int_list(ctx, ctx.required_input(2), "ends");
      if (ctx.input(3) != nullptr) {
        axes = tensor_ops::read_int_list(ctx, *ctx.input(3), "axes");
        has_axes = true;
      }
      if (ctx.input(4) != nullptr) {
        steps = tensor_ops::read_int_list(ctx, *ctx.input(4), "steps");
        has_steps = true;
      }
    }
    const tensor_ops::StridedView view = tensor_ops::slice_view(
        ctx, data.shape(), starts, ends, std::move(axes), has_axes, std::move(steps), has_steps);
    const Shape& out = view.shape;
    Tensor& y = ctx.allocate_output(0, data.dtype(), out);
    if (y.numel() == 0) return;
    const char* src = static_cast<const char*>(data.raw_data()) +
                      view.offset * static_cast<int64_t>(dtype_size(data.dtype()));
    tensor_ops::strided_copy_dense(data.dtype(), src, view.strides, y.raw_data(), out,
                                   ctx.thread_pool());
  }

 private:
  int64_t opset_;
  tensor_ops::SliceAttrs attrs_;
};

}  // namespace

void register_slice_kernels(KernelRegistry& r) {
  r.add_versions("Slice", {1, 10, 11, 13}, make_factory<Slice>());
}

}  // namespace ortlite
