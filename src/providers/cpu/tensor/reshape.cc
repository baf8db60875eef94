// Reshape, Flatten, Squeeze, Unsqueeze, Identity: metadata-only ops. The output shares the
// input's buffer (Tensor::reshaped); the binding copies outputs it does not own.
#include <algorithm>

#include "providers/cpu/tensor/tensor_kernels.h"

namespace ortlite {
namespace {

using tensor_ops::ints_to_string;

class Reshape final : public Kernel {
 public:
  explicit Reshape(const KernelInfo& info) : opset_(info.opset()) {
    if (opset_ >= 14) allowzero_ = info.attr_int("allowzero", 0) == 1;
    if (opset_ < 5) {
      if (!info.has_attr("shape"))
        info.fail(StatusCode::kInvalidGraph, "missing attribute 'shape'");
      shape_attr_ = info.attr_ints("shape");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.required_input(0);
    const std::vector<int64_t> requested =
        opset_ < 5 ? shape_attr_ : tensor_ops::read_int_list(ctx, ctx.required_input(1), "shape");
    const Shape& in = data.shape();
    Shape out(requested.size());
    int64_t unknown = -1;
    int64_t known = 1;
    bool known_overflow = false;
    for (size_t i = 0; i < requested.size(); ++i) {
      int64_t v = requested[i];
      if (v == -1) {
        if (unknown >= 0) {
          ctx.fail(StatusCode::kInvalidArgument,
                   "input 'shape' " + ints_to_string(requested) + " has more than one -1");
        }
        unknown = static_cast<int64_t>(i);
        continue;
      }
      if (v < -1) {
        ctx.fail(StatusCode::kInvalidArgument, "input 'shape' " + ints_to_string(requested) +
                                                   " has an invalid value " + std::to_string(v));
      }
      if (v == 0 && !allowzero_) {
        if (i >= in.size()) {
          ctx.fail(StatusCode::kInvalidArgument,
                   "input 'shape' " + ints_to_string(requested) + " has 0 at index " +
                       std::to_string(i) + " but the data has rank " + std::to_string(in.size()) +
                       " (shape " + shape_to_string(in) + ")");
        }
        v = in[i];
      }
      out[i] = v;
      if (__builtin_mul_overflow(known, v, &known)) known_overflow = true;
    }
    const int64_t numel = data.numel();
    if (known_overflow) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'shape' " + ints_to_string(requested) +
                                                 " has an element count that overflows");
    }
    if (unknown >= 0) {
      if (known == 0 || numel % known != 0) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "cannot reshape data of shape " + shape_to_string(in) + " to " +
                     ints_to_string(requested) + ": the -1 dimension cannot be inferred");
      }
      out[static_cast<size_t>(unknown)] = numel / known;
    } else if (known != numel) {
      ctx.fail(StatusCode::kInvalidArgument, "cannot reshape data of shape " + shape_to_string(in) +
                                                 " (" + std::to_string(numel) + " elements) to " +
                                                 ints_to_string(requested) + " (resolved " +
                                                 shape_to_string(out) + ")");
    }
    ctx.set_output(0, data.reshaped(out));
  }

 private:
  int64_t opset_;
  bool allowzero_ = false;
  std::vector<int64_t> shape_attr_;
};

class Flatten final : public Kernel {
 public:
  explicit Flatten(const KernelInfo& info) : opset_(info.opset()), axis_(info.attr_int("axis", 1)) {
    if (opset_ < 11 && axis_ < 0) {
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'axis' = " + std::to_string(axis_) + " must be >= 0 before opset 11");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.required_input(0);
    const int64_t rank = static_cast<int64_t>(data.rank());
    int64_t axis = axis_;
    if (axis < -rank || axis > rank) {
      ctx.fail(StatusCode::kInvalidArgument,
               "attribute 'axis' = " + std::to_string(axis_) + " is out of range [" +
                   std::to_string(-rank) + ", " + std::to_string(rank) + "] for input shape " +
                   shape_to_string(data.shape()));
    }
    if (axis < 0) axis += rank;
    const Shape& s = data.shape();
    const int64_t outer = tensor_ops::dims_product(s, 0, static_cast<size_t>(axis));
    const int64_t inner = tensor_ops::dims_product(s, static_cast<size_t>(axis), s.size());
    ctx.set_output(0, data.reshaped({outer, inner}));
  }

 private:
  int64_t opset_;
  int64_t axis_;
};

class Squeeze final : public Kernel {
 public:
  explicit Squeeze(const KernelInfo& info) : opset_(info.opset()) {
    if (opset_ < 13 && info.has_attr("axes")) {
      has_axes_attr_ = true;
      axes_attr_ = info.attr_ints("axes");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.required_input(0);
    const Shape& in = data.shape();
    const int64_t rank = static_cast<int64_t>(in.size());
    bool has_axes = has_axes_attr_;
    std::vector<int64_t> axes = axes_attr_;
    if (opset_ >= 13 && ctx.input(1) != nullptr) {
      has_axes = true;
      axes = tensor_ops::read_int_list(ctx, *ctx.input(1), "axes", /*allow_scalar=*/true);
    }
    Shape out;
    if (!has_axes) {
      for (int64_t d : in) {
        if (d != 1) out.push_back(d);
      }
    } else {
      // onnxruntime accepts a repeated axis here; so do we.
      const std::vector<int64_t> norm =
          tensor_ops::normalize_axes(ctx, axes, rank, "axes", /*allow_duplicates=*/true);
      std::vector<char> drop(in.size(), 0);
      for (int64_t a : norm) {
        if (in[static_cast<size_t>(a)] != 1) {
          ctx.fail(StatusCode::kInvalidArgument,
                   "cannot squeeze axis " + std::to_string(a) + " of input shape " +
                       shape_to_string(in) +
                       ": its dimension is not 1 (axes = " + ints_to_string(axes) + ")");
        }
        drop[static_cast<size_t>(a)] = 1;
      }
      for (size_t i = 0; i < in.size(); ++i) {
        if (!drop[i]) out.push_back(in[i]);
      }
    }
    ctx.set_output(0, data.reshaped(out));
  }

 private:
  int64_t opset_;
  bool has_axes_attr_ = false;
  std::vector<int64_t> axes_attr_;
};

class Unsqueeze final : public Kernel {
 public:
  // com.microsoft ExpandDims(X, axis) is Unsqueeze-13 with one (int32) axis.
  explicit Unsqueeze(const KernelInfo& info)
      : opset_(info.node().domain == "com.microsoft" ? 13 : info.opset()) {
    if (opset_ < 13) {
      if (!info.has_attr("axes")) info.fail(StatusCode::kInvalidGraph, "missing attribute 'axes'");
      axes_attr_ = info.attr_ints("axes");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.required_input(0);
    const std::vector<int64_t> axes =
        opset_ < 13 ? axes_attr_
                    : tensor_ops::read_int_list(ctx, ctx.required_input(1), "axes", true);
    const Shape& in = data.shape();
    const int64_t out_rank = static_cast<int64_t>(in.size() + axes.size());
    const std::vector<int64_t> norm = tensor_ops::normalize_axes(ctx, axes, out_rank, "axes");
    std::vector<char> inserted(static_cast<size_t>(out_rank), 0);
    for (int64_t a : norm) inserted[static_cast<size_t>(a)] = 1;
    Shape out(static_cast<size_t>(out_rank));
    size_t j = 0;
    for (size_t i = 0; i < out.size(); ++i) out[i] = inserted[i] ? 1 : in[j++];
    ctx.set_output(0, data.reshaped(out));
  }

 private:
  int64_t opset_;
  std::vector<int64_t> axes_attr_;
};

class Identity final : public Kernel {
 public:
  explicit Identity(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    // Sequences (opset 14) and optionals (opset 16) pass through unchanged as well.
    const Value* v = ctx.input_value(0);
    if (v && !v->is_tensor()) {
      ctx.set_output_value(0, *v);
      return;
    }
    ctx.set_output(0, ctx.required_input(0));
  }
};

}  // namespace

void register_reshape_kernels(KernelRegistry& r) {
  r.add_versions("Reshape", {1, 5, 13, 14, 19, 21, 23}, make_factory<Reshape>());
  r.add_versions("Flatten", {1, 9, 11, 13, 21, 23}, make_factory<Flatten>());
  r.add_versions("Squeeze", {1, 11, 13, 21, 23}, make_factory<Squeeze>());
  r.add_versions("Unsqueeze", {1, 11, 13, 21, 23}, make_factory<Unsqueeze>());
  r.add("com.microsoft", "ExpandDims", 1, kMaxOpset, make_factory<Unsqueeze>());
  r.add_versions("Identity", {1, 13, 14, 16, 19, 21, 23}, make_factory<Identity>());
}

}  // namespace ortlite
