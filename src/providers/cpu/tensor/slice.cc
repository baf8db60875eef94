// Slice: starts/ends/axes attributes (opset 1-9), inputs with steps (opset 10+). Indices
// are clamped as the ONNX spec says; the copy is a strided view (negative steps give
// negative strides), with memcpy of contiguous rows.
#include <algorithm>
#include <limits>

#include "providers/cpu/tensor/tensor_kernels.h"

namespace ortlite {
namespace {

using tensor_ops::ints_to_string;

class Slice final : public Kernel {
 public:
  explicit Slice(const KernelInfo& info) : opset_(info.opset()) {
    if (opset_ < 10) {
      if (!info.has_attr("starts") || !info.has_attr("ends")) {
        info.fail(StatusCode::kInvalidGraph, "missing attribute 'starts' or 'ends'");
      }
      starts_ = info.attr_ints("starts");
      ends_ = info.attr_ints("ends");
      has_axes_ = info.has_attr("axes");
      axes_ = info.attr_ints("axes");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.required_input(0);
    const Shape& in = data.shape();
    const int64_t rank = static_cast<int64_t>(in.size());
    std::vector<int64_t> starts, ends, axes, steps;
    bool has_axes = has_axes_, has_steps = false;
    if (opset_ < 10) {
      starts = starts_;
      ends = ends_;
      axes = axes_;
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
    const size_t n = starts.size();
    if (ends.size() != n) {
      ctx.fail(StatusCode::kInvalidArgument, "'starts' " + ints_to_string(starts) + " and 'ends' " +
                                                 ints_to_string(ends) + " differ in length");
    }
    if (has_axes && axes.size() != n) {
      ctx.fail(StatusCode::kInvalidArgument, "'axes' " + ints_to_string(axes) +
                                                 " must have as many entries as 'starts' " +
                                                 ints_to_string(starts));
    }
    if (has_steps && steps.size() != n) {
      ctx.fail(StatusCode::kInvalidArgument, "'steps' " + ints_to_string(steps) +
                                                 " must have as many entries as 'starts' " +
                                                 ints_to_string(starts));
    }
    if (!has_axes) {
      if (static_cast<int64_t>(n) > rank) {
        ctx.fail(StatusCode::kInvalidArgument, "'starts' " + ints_to_string(starts) +
                                                   " has more entries than the input rank " +
                                                   std::to_string(rank));
      }
      axes.resize(n);
      for (size_t i = 0; i < n; ++i) axes[i] = static_cast<int64_t>(i);
    }
    if (!has_steps) steps.assign(n, 1);
    const std::vector<int64_t> norm = tensor_ops::normalize_axes(ctx, axes, rank, "axes");

    const std::vector<int64_t> in_strides = tensor_ops::dense_strides(in);
    Shape out = in;
    std::vector<int64_t> src_strides = in_strides;
    int64_t src_offset = 0;
    for (size_t i = 0; i < n; ++i) {
      const size_t a = static_cast<size_t>(norm[i]);
      const int64_t dim = in[a];
      const int64_t step = steps[i];
      if (step == 0) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "'steps' " + ints_to_string(steps) + " has a 0 (axis " + std::to_string(a) + ")");
      }
      int64_t start = starts[i];
      int64_t end = ends[i];
      if (start < 0) start += dim;  // no overflow: dim >= 0
      if (end < 0) end += dim;
      int64_t count = 0;
      if (step > 0) {
        start = std::min(std::max<int64_t>(start, 0), dim);
        end = std::min(std::max<int64_t>(end, 0), dim);
        if (end > start) count = 1 + (end - start - 1) / step;
      } else {
        start = std::min(std::max<int64_t>(start, 0), dim - 1);
        end = std::min(std::max<int64_t>(end, -1), dim - 1);
        if (start > end) {
          const uint64_t mag = static_cast<uint64_t>(-(step + 1)) + 1;  // |step| without overflow
          count = 1 + static_cast<int64_t>(static_cast<uint64_t>(start - end - 1) / mag);
        }
      }
      out[a] = count;
      if (count > 0) src_offset += start * in_strides[a];
      // The stride of the view: step * stride. |step| * stride can only overflow when at
      // most one element is taken, where the stride does not matter.
      int64_t st = 0;
      if (count > 1) st = step * in_strides[a];
      src_strides[a] = st;
    }
    Tensor& y = ctx.allocate_output(0, data.dtype(), out);
    if (y.numel() == 0) return;
    const char* src = static_cast<const char*>(data.raw_data()) +
                      src_offset * static_cast<int64_t>(dtype_size(data.dtype()));
    tensor_ops::strided_copy_dense(data.dtype(), src, src_strides, y.raw_data(), out,
                                   ctx.thread_pool());
  }

 private:
  int64_t opset_;
  std::vector<int64_t> starts_, ends_, axes_;
  bool has_axes_ = false;
};

}  // namespace

void register_slice_kernels(KernelRegistry& r) {
  r.add_versions("Slice", {1, 10, 11, 13}, make_factory<Slice>(), kTensorMaxOpset);
}

}  // namespace ortlite
