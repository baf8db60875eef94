// CUDA kernels that move data: Transpose, Concat, Slice, Gather, Expand, and the
// metadata-only views (Reshape, Flatten, Squeeze, Unsqueeze, Identity) that share their
// input's device buffer.
#include "providers/cuda/kernel_base.h"

namespace ortlite {
namespace cuda {
namespace {

using namespace kernels_detail;  // NOLINT: the shared helpers read better unqualified

// ---- data movement --------------------------------------------------------------------

class Transpose final : public CudaKernel {
 public:
  explicit Transpose(const KernelInfo& info) { attrs_.load(info); }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = dev_input(ctx, 0);
    const tensor_ops::StridedView view =
        tensor_ops::transpose_view(x.shape(), attrs_.resolve(ctx, x.shape()));
    Tensor& y = out(ctx, 0, x.dtype(), view.shape);
    if (y.numel()) strided_into(ctx, x, view.strides, view.shape, y);
  }

 private:
  tensor_ops::TransposeAttrs attrs_;
};

class Concat final : public CudaKernel {
 public:
  explicit Concat(const KernelInfo& info) {
    if (info.opset() >= 4 && !info.has_attr("axis"))
      info.fail(StatusCode::kInvalidGraph, "missing attribute 'axis'");
    axis_ = info.attr_int("axis", 1);
  }

  void compute(KernelContext& ctx) const override {
    const size_t n = ctx.num_inputs();
    std::vector<const Tensor*> parts;
    for (size_t i = 0; i < n; ++i)
      if (ctx.input(i)) parts.push_back(&dev_input(ctx, i));
    if (parts.empty()) ctx.fail(StatusCode::kInvalidArgument, "needs at least one input");
    const Tensor& first = *parts[0];
    const int64_t rank = static_cast<int64_t>(first.rank());
    if (rank == 0)
      ctx.fail(StatusCode::kInvalidArgument, "cannot concatenate scalars (rank-0 inputs)");
    if (axis_ < -rank || axis_ >= rank)
      ctx.fail(StatusCode::kInvalidArgument, "attribute 'axis' = " + std::to_string(axis_) +
                                                 " is out of range for inputs of rank " +
                                                 std::to_string(rank));
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    Shape shape = first.shape();
    shape[axis] = 0;
    std::vector<const void*> ptrs;
    std::vector<int64_t> sizes;
    for (size_t i = 0; i < parts.size(); ++i) {
      const Tensor& t = *parts[i];
      if (t.dtype() != first.dtype())
        ctx.fail(StatusCode::kInvalidArgument, "input " + std::to_string(i) + " has element type " +
                                                   dtype_name(t.dtype()) + ", input 0 has " +
                                                   dtype_name(first.dtype()));
      bool fits = t.rank() == first.rank();
      for (size_t d = 0; fits && d < t.rank(); ++d)
        if (d != axis && t.dim(d) != first.dim(d)) fits = false;
      if (!fits)
        ctx.fail(StatusCode::kInvalidArgument,
                 "input " + std::to_string(i) + " " + shape_to_string(t.shape()) +
                     " does not match input 0 " + shape_to_string(first.shape()) +
                     " in the dims other than axis " + std::to_string(axis));
      if (__builtin_add_overflow(shape[axis], t.dim(axis), &shape[axis]))
        ctx.fail(StatusCode::kInvalidArgument, "concatenated dimension overflows");
      ptrs.push_back(t.raw_data());
      sizes.push_back(t.dim(axis));
    }
    Tensor& y = out(ctx, 0, first.dtype(), shape);
    if (y.numel() == 0) return;
    need(ctx, dtype_size(first.dtype()) > 0 && first.dtype() != DataType::kString, first.dtype());
    const int64_t outer = tensor_ops::dims_product(shape, 0, axis);
    const int64_t inner = tensor_ops::dims_product(shape, axis + 1, shape.size());
    run(ctx,
        api().concat(stream(), static_cast<int>(dtype_size(first.dtype())),
                     static_cast<int>(ptrs.size()), ptrs.data(), sizes.data(), outer, inner,
                     y.raw_data()),
        "Concat");
  }

 private:
  int64_t axis_;
};

class Slice final : public CudaKernel {
 public:
  explicit Slice(const KernelInfo& info) : opset_(info.opset()) {
    if (opset_ < 10) attrs_.load(info);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& data = dev_input(ctx, 0);
    std::vector<int64_t> starts, ends, axes, steps;
    bool has_axes = attrs_.has_axes, has_steps = false;
    if (opset_ < 10) {
      starts = attrs_.starts;
      ends = attrs_.ends;
      axes = attrs_.axes;
    } else {
      const Tensor* st = host_input(ctx, 1);
      const Tensor* en = host_input(ctx, 2);
      if (!st || !en)
        ctx.fail(StatusCode::kInvalidArgument, "inputs 'starts' and 'ends' are required");
      starts = tensor_ops::read_int_list(ctx, *st, "starts");
      ends = tensor_ops::read_int_list(ctx, *en, "ends");
      if (const Tensor* a = host_input(ctx, 3)) {
        axes = tensor_ops::read_int_list(ctx, *a, "axes");
        has_axes = true;
      }
      if (const Tensor* s = host_input(ctx, 4)) {
        steps = tensor_ops::read_int_list(ctx, *s, "steps");
        has_steps = true;
      }
    }
    const tensor_ops::StridedView view = tensor_ops::slice_view(
        ctx, data.shape(), starts, ends, std::move(axes), has_axes, std::move(steps), has_steps);
    Tensor& y = out(ctx, 0, data.dtype(), view.shape);
    if (y.numel() == 0) return;
    const char* src = static_cast<const char*>(data.raw_data()) +
                      view.offset * static_cast<int64_t>(dtype_size(data.dtype()));
    strided_into(ctx, data, view.strides, view.shape, y, src);
  }

 private:
  int64_t opset_;
  tensor_ops::SliceAttrs attrs_;
};

class Gather final : public CudaKernel {
 public:
  explicit Gather(const KernelInfo& info) : axis_(info.attr_int("axis", 0)) {
    // Constant indices are checked on the host; others through a device flag (a sync).
    if (const Tensor* c = info.constant_input(1)) {
      if (c->dtype() == DataType::kInt32 || c->dtype() == DataType::kInt64) {
        const_indices_ = tensor_to_int64s(*c);
        have_const_ = true;
      }
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& data = dev_input(ctx, 0);
    const Tensor& indices = dev_input(ctx, 1);
    if (indices.dtype() != DataType::kInt64 && indices.dtype() != DataType::kInt32)
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input 'indices' must be int32 or int64, got ") +
                   dtype_name(indices.dtype()));
    const Shape& in = data.shape();
    const int64_t rank = static_cast<int64_t>(in.size());
    if (rank == 0) ctx.fail(StatusCode::kInvalidArgument, "input 'data' must have rank >= 1");
    if (axis_ < -rank || axis_ >= rank)
      ctx.fail(StatusCode::kInvalidArgument, "attribute 'axis' = " + std::to_string(axis_) +
                                                 " is out of range [" + std::to_string(-rank) +
                                                 ", " + std::to_string(rank - 1) +
                                                 "] for data shape " + shape_to_string(in));
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    const int64_t dim = in[axis];
    const bool host_checked =
        have_const_ && static_cast<int64_t>(const_indices_.size()) == indices.numel();
    if (host_checked)
      for (int64_t v : const_indices_)
        if (v < -dim || v >= dim) bad_index(ctx, v, dim, axis, in);
    Shape shape(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(axis));
    shape.insert(shape.end(), indices.shape().begin(), indices.shape().end());
    shape.insert(shape.end(), in.begin() + static_cast<std::ptrdiff_t>(axis) + 1, in.end());
    Tensor& y = out(ctx, 0, data.dtype(), shape);
    if (y.numel() == 0) return;
    need(ctx, dtype_size(data.dtype()) > 0 && data.dtype() != DataType::kString, data.dtype());
    const int64_t outer = tensor_ops::dims_product(in, 0, axis);
    const int64_t inner = tensor_ops::dims_product(in, axis + 1, in.size());
    Tensor flag;
    if (!host_checked) {
      flag = temp(DataType::kInt32, {1});
      run(ctx, api().memset_zero(flag.raw_data(), 4, stream()), "Gather");
    }
    run(ctx,
        api().gather(stream(), static_cast<int>(dtype_size(data.dtype())), code(indices.dtype()),
                     outer, dim, inner, indices.numel(), data.raw_data(), indices.raw_data(),
                     y.raw_data(), host_checked ? nullptr : flag.data<int>()),
        "Gather");
    if (!host_checked) {
      int bad = 0;
      run(ctx,
          api().memcpy(device_of(flag), &bad, flag.raw_data(), sizeof(bad), ORTLITE_CUDA_D2H,
                       stream()),
          "Gather");
      run(ctx, api().stream_sync(stream()), "Gather");
      if (bad)
        ctx.fail(StatusCode::kInvalidArgument,
                 "an index in input 'indices' is out of range [" + std::to_string(-dim) + ", " +
                     std::to_string(dim - 1) + "] (axis " + std::to_string(axis) +
                     " of data shape " + shape_to_string(in) + ")");
    }
  }

 private:
  [[noreturn]] static void bad_index(const KernelContext& ctx, int64_t v, int64_t dim, size_t axis,
                                     const Shape& in) {
    ctx.fail(StatusCode::kInvalidArgument,
             "index " + std::to_string(v) + " in input 'indices' is out of range [" +
                 std::to_string(-dim) + ", " + std::to_string(dim - 1) + "] (axis " +
                 std::to_string(axis) + " of data shape " + shape_to_string(in) + ")");
  }

  int64_t axis_;
  bool have_const_ = false;
  std::vector<int64_t> const_indices_;
};

class Expand final : public CudaKernel {
 public:
  explicit Expand(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& x = dev_input(ctx, 0);
    const Tensor* s = host_input(ctx, 1);
    if (!s) ctx.fail(StatusCode::kInvalidArgument, "input 'shape' is required");
    const std::vector<int64_t> req = tensor_ops::read_int_list(ctx, *s, "shape");
    const Shape shape = broadcast_or_fail(ctx, x.shape(), req);
    Tensor& y = out(ctx, 0, x.dtype(), shape);
    if (y.numel()) strided_into(ctx, x, broadcast_strides(x.shape(), shape), shape, y);
  }
};

// ---- metadata-only ops ----------------------------------------------------------------

// Reshape, Flatten, Squeeze, Unsqueeze, Identity: the CPU kernel computes the shape (it
// reads only input 0's shape, and the host inputs); the output shares input 0's device
// buffer.
class View final : public CudaKernel {
 public:
  explicit View(const KernelInfo& info) {
    const KernelFactory* f = KernelRegistry::instance().find(info.node().domain, info.op_type(),
                                                             info.opset(), kCpuProvider);
    if (!f)
      info.fail(StatusCode::kNotImplemented, "no kernel at opset " + std::to_string(info.opset()));
    cpu_ = (*f)(info);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = dev_input(ctx, 0);
    for (size_t i = 1; i < ctx.num_inputs(); ++i) host_input(ctx, i);
    cpu_->compute(ctx);
    if (ctx.output(0).buffer().get() != x.buffer().get())
      ctx.fail(StatusCode::kFail, "internal error: the view does not share its input's memory");
  }

 private:
  std::unique_ptr<Kernel> cpu_;
};

}  // namespace

bool input_on_host(const std::string& op, int64_t opset, size_t index) {
  if (index == 0) return false;
  if (op == "Reshape") return opset >= 5 && index == 1;
  if (op == "Squeeze" || op == "Unsqueeze") return opset >= 13 && index == 1;
  if (op == "Expand") return index == 1;
  if (op == "Slice") return opset >= 10 && index >= 1 && index <= 4;
  if (op == "Clip") return opset >= 11 && (index == 1 || index == 2);
  for (const kernels_detail::ReduceSpec& s : kernels_detail::kReduceSpecs)
    if (op == s.name) return opset >= s.input_axes_since && index == 1;
  return false;
}

void register_tensor_kernels(KernelRegistry& r) {
  using namespace kernels_detail;  // NOLINT
  add(r, "Transpose", {1, 13, 21}, factory<Transpose>());
  add(r, "Concat", {1, 4, 11, 13}, factory<Concat>());
  add(r, "Slice", {1, 10, 11, 13}, factory<Slice>());
  add(r, "Gather", {1, 11, 13}, factory<Gather>());
  add(r, "Expand", {8, 13}, factory<Expand>());

  add(r, "Reshape", {5, 13, 14, 19, 21}, factory<View>());
  add(r, "Flatten", {1, 9, 11, 13, 21}, factory<View>());
  add(r, "Squeeze", {1, 11, 13, 21}, factory<View>());
  add(r, "Unsqueeze", {1, 11, 13, 21}, factory<View>());
  add(r, "Identity", {1, 13, 14, 16, 19, 21}, factory<View>());
}

}  // namespace cuda
}  // namespace ortlite
