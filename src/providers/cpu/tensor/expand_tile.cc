// Expand (bidirectional broadcast to a shape) and Tile (repeat along every axis), both as
// strided copies: Expand reads with zero strides on the broadcast dims; Tile views the
// output of shape [r0*d0, r1*d1, ...] as [r0, d0, r1, d1, ...] with zero strides on the
// repeat dims.
#include "providers/shared/broadcast_shape.h"
#include "providers/cpu/tensor/tensor_kernels.h"

namespace ortlite {
namespace {

using tensor_ops::ints_to_string;

class Expand final : public Kernel {
 public:
  explicit Expand(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.required_input(0);
    const std::vector<int64_t> shape =
        tensor_ops::read_int_list(ctx, ctx.required_input(1), "shape");
    for (int64_t d : shape) {
      if (d < 0) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "input 'shape' " + ints_to_string(shape) + " has a negative dimension");
      }
    }
    Shape out;
    try {
      out = broadcast_shapes(data.shape(), shape, "input 'shape'");
    } catch (const Error& e) {
      ctx.fail(StatusCode::kInvalidArgument, std::string(e.what()) + " (data shape " +
                                                 shape_to_string(data.shape()) + ", shape " +
                                                 ints_to_string(shape) + ")");
    }
    tensor_ops::checked_numel(ctx, data.dtype(), out, "Expand");
    if (out == data.shape()) {
      ctx.set_output(0, data);
      return;
    }
    Tensor& y = ctx.allocate_output(0, data.dtype(), out);
    if (y.numel() == 0) return;
    tensor_ops::strided_copy_dense(data.dtype(), data.raw_data(),
                                   broadcast_strides(data.shape(), out), y.raw_data(), out,
                                   ctx.thread_pool());
  }
};

class Tile final : public Kernel {
 public:
  explicit Tile(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.required_input(0);
    const std::vector<int64_t> repeats =
        tensor_ops::read_int_list(ctx, ctx.required_input(1), "repeats");
    const Shape& in = data.shape();
    if (repeats.size() != in.size()) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'repeats' " + ints_to_string(repeats) +
                                                 " must have one entry per dim of " +
                                                 "the input shape " + shape_to_string(in));
    }
    Shape out(in.size());
    bool all_one = true;
    for (size_t i = 0; i < in.size(); ++i) {
      if (repeats[i] < 0) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "input 'repeats' " + ints_to_string(repeats) + " has a negative value");
      }
      if (__builtin_mul_overflow(in[i], repeats[i], &out[i])) {
        ctx.fail(StatusCode::kInvalidArgument, "input 'repeats' " + ints_to_string(repeats) +
                                                   " overflows the output shape for input " +
                                                   shape_to_string(in));
      }
      if (repeats[i] != 1) all_one = false;
    }
    tensor_ops::checked_numel(ctx, data.dtype(), out, "Tile");
    if (all_one) {
      ctx.set_output(0, data);
      return;
    }
    Tensor& y = ctx.allocate_output(0, data.dtype(), out);
    if (y.numel() == 0) return;
    const std::vector<int64_t> in_strides = tensor_ops::dense_strides(in);
    Shape view;
    std::vector<int64_t> strides;
    for (size_t i = 0; i < in.size(); ++i) {
      view.push_back(repeats[i]);
      strides.push_back(0);
      view.push_back(in[i]);
      strides.push_back(in_strides[i]);
    }
    tensor_ops::strided_copy_dense(data.dtype(), data.raw_data(), strides, y.raw_data(), view,
                                   ctx.thread_pool());
  }
};

}  // namespace

void register_expand_tile_kernels(KernelRegistry& r) {
  r.add_versions("Expand", {8, 13}, make_factory<Expand>());
  r.add_versions("Tile", {6, 13}, make_factory<Tile>());
}

}  // namespace ortlite
