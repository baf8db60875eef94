// The CUDA kernels: Kernel classes registered under CUDAExecutionProvider that check their
// inputs and shapes on the host, allocate device outputs and call the CUDA library's
// launchers (cuda_api.h) on the thread's current stream (provider.h, StreamScope).
//
// Every device input must already be on the stream's device; the inputs named by
// input_on_host (shapes, axes, starts / ends, Clip bounds) must be CPU tensors. Attribute
// handling and error messages follow the CPU kernels of the same ops.
#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda/provider.h"
#include "ops/common/broadcast.h"
#include "ops/nn/nn_common.h"
#include "ops/reduce/reduce_impl.h"
#include "ops/tensor/tensor_kernels.h"
#include "ortlite/kernel.h"

namespace ortlite {
namespace cuda {
namespace {

using tensor_ops::ints_to_string;

// The newest opset whose semantics these kernels implement (as the CPU kernels).
constexpr int kCudaMaxOpset = 23;

int code(DataType t) {
  return static_cast<int>(t);
}

bool is_float(DataType t) {
  return t == DataType::kFloat || t == DataType::kDouble || t == DataType::kFloat16 ||
         t == DataType::kBFloat16;
}

// Types the arithmetic launchers handle.
bool is_arith(DataType t) {
  return is_float(t) || t == DataType::kInt8 || t == DataType::kUInt8 || t == DataType::kInt32 ||
         t == DataType::kInt64;
}

bool is_fixed_size(DataType t) {
  return t != DataType::kUndefined && t != DataType::kString && dtype_size(t) > 0;
}

bool in(const std::string& op, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (op == n) return true;
  return false;
}

// Whether the CUDA kernel of `info`'s op runs device input i of element type t (the same
// limits its compute() enforces with need()).
bool device_type_ok(const KernelInfo& info, size_t i, DataType t) {
  const std::string& op = info.op_type();
  if (in(op, {"Transpose", "Concat", "Slice", "Expand", "Reshape", "Flatten", "Squeeze",
              "Unsqueeze", "Identity"}))
    return is_fixed_size(t);
  if (op == "Gather")
    return i == 0 ? is_fixed_size(t) : (t == DataType::kInt32 || t == DataType::kInt64);
  if (op == "Where") return i == 0 ? t == DataType::kBool : is_fixed_size(t);
  if (op == "Cast")
    return t != DataType::kString && static_cast<int>(t) <= 16 && dtype_supported(t);
  if (in(op, {"And", "Or", "Xor", "Not"})) return t == DataType::kBool;
  if (op == "Equal") return is_arith(t) || t == DataType::kBool;
  if (in(op, {"Add", "Sub", "Mul", "Div", "PRelu", "Max", "Min", "Sum", "Less", "Greater",
              "LessOrEqual", "GreaterOrEqual"}))
    return is_arith(t);
  if (op == "Conv")
    return t == DataType::kFloat || t == DataType::kFloat16 || t == DataType::kDouble;
  if (in(op, {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceSumSquare"}))
    return is_float(t) || t == DataType::kInt32 || t == DataType::kInt64;
  return is_float(t);
}

// Declines (kNotImplemented, which sends the node to the CPU) a node whose device inputs
// have element types the kernel does not run, or are unknown at load. Only checked when the
// planner gave the types; the kernel test entry (_cuda_run_node) does not.
void check_placeable(const KernelInfo& info) {
  if (!info.has_input_types()) return;
  const bool same_types = in(info.op_type(), {"Add",
                                              "Sub",
                                              "Mul",
                                              "Div",
                                              "Pow",
                                              "PRelu",
                                              "Max",
                                              "Min",
                                              "Sum",
                                              "Equal",
                                              "Less",
                                              "Greater",
                                              "LessOrEqual",
                                              "GreaterOrEqual",
                                              "And",
                                              "Or",
                                              "Xor",
                                              "Concat",
                                              "MatMul",
                                              "Gemm",
                                              "Conv",
                                              "LayerNormalization",
                                              "BatchNormalization"});
  DataType first = DataType::kUndefined;
  for (size_t i = 0; i < info.num_inputs(); ++i) {
    if (!info.has_input(i) || input_on_host(info.op_type(), info.opset(), i)) continue;
    const DataType t = info.input_type(i);
    if (t == DataType::kUndefined)
      info.fail(StatusCode::kNotImplemented,
                "the element type of input " + std::to_string(i) + " is not known at load");
    if (!device_type_ok(info, i, t) || (same_types && first != DataType::kUndefined && t != first))
      info.fail(StatusCode::kNotImplemented,
                std::string("element type ") + dtype_name(t) + " is not supported on CUDA");
    if (first == DataType::kUndefined) first = t;
  }
}

void add(KernelRegistry& r, const char* op, std::vector<int> since, const KernelFactory& f) {
  const KernelFactory checked = [f](const KernelInfo& info) {
    check_placeable(info);
    return f(info);
  };
  for (size_t i = 0; i < since.size(); ++i) {
    const int until = i + 1 < since.size() ? since[i + 1] - 1 : kCudaMaxOpset;
    r.add("", op, since[i], until, checked, kCudaProvider);
  }
}

template <typename K, typename... Args>
KernelFactory factory(Args... args) {
  return [=](const KernelInfo& info) -> std::unique_ptr<Kernel> {
    return std::make_unique<K>(info, args...);
  };
}

std::vector<int64_t> dense_strides(const Shape& s) {
  return tensor_ops::dense_strides(s);
}

// Shared checks and helpers of the CUDA kernels.
class CudaKernel : public Kernel {
 protected:
  static OrtliteCudaStream* stream() { return current_stream(); }

  // Input i (required), which must be on the stream's device.
  static const Tensor& dev_input(const KernelContext& ctx, size_t i) {
    const Tensor& t = ctx.required_input(i);
    check_on_device(ctx, t, i);
    return t;
  }
  static const Tensor* dev_input_opt(const KernelContext& ctx, size_t i) {
    const Tensor* t = ctx.input(i);
    if (t) check_on_device(ctx, *t, i);
    return t;
  }
  // An input the kernel reads on the host (input_on_host).
  static const Tensor* host_input(const KernelContext& ctx, size_t i) {
    const Tensor* t = ctx.input(i);
    if (t && is_cuda(*t))
      ctx.fail(StatusCode::kInvalidArgument,
               "input " + std::to_string(i) + " must be in CPU memory for the CUDA kernel");
    return t;
  }

  // A new device tensor as output i.
  static Tensor& out(KernelContext& ctx, size_t i, DataType dt, const Shape& shape) {
    OrtliteCudaStream* s = stream();
    ctx.set_output(i, empty(dt, shape, stream_device(s), s));
    return ctx.output(i);
  }
  // A device temporary on the run's stream.
  static Tensor temp(DataType dt, const Shape& shape) {
    OrtliteCudaStream* s = stream();
    return empty(dt, shape, stream_device(s), s);
  }

  static void run(const KernelContext& ctx, int rc, const char* what) {
    if (rc != 0) ctx.fail(StatusCode::kFail, std::string(what) + ": " + api().last_error());
  }

  static void need(const KernelContext& ctx, bool ok, DataType dt) {
    if (!ok)
      ctx.fail(StatusCode::kNotImplemented,
               std::string("element type ") + dtype_name(dt) + " is not supported on CUDA");
  }

  // Dense copy of a device tensor viewed with `strides` over `shape` (broadcast strides
  // expand, permuted strides transpose).
  static void strided_into(const KernelContext& ctx, const Tensor& src,
                           const std::vector<int64_t>& strides, const Shape& shape, Tensor& dst,
                           const void* src_ptr = nullptr) {
    const std::vector<int64_t> ds = dense_strides(shape);
    run(ctx,
        api().strided_copy(stream(), static_cast<int>(dtype_size(src.dtype())),
                           static_cast<int>(shape.size()), shape.data(),
                           src_ptr ? src_ptr : src.raw_data(), strides.data(), dst.raw_data(),
                           ds.data()),
        "copy");
  }

  static Shape broadcast_or_fail(const KernelContext& ctx, const Shape& a, const Shape& b) {
    try {
      return broadcast_shapes(a, b, ctx.node().op_type.c_str());
    } catch (const Error& e) {
      ctx.fail(e.code(), e.what());
    }
  }

 private:
  static void check_on_device(const KernelContext& ctx, const Tensor& t, size_t i) {
    if (!is_cuda(t))
      ctx.fail(StatusCode::kInvalidArgument,
               "input " + std::to_string(i) +
                   " is in CPU memory; the CUDA kernel needs it on the device");
    const int d = stream_device(stream());
    if (device_of(t) != d)
      ctx.fail(StatusCode::kInvalidArgument, "input " + std::to_string(i) +
                                                 " is on cuda:" + std::to_string(device_of(t)) +
                                                 ", the run is on cuda:" + std::to_string(d));
  }
};

// ---- binary ---------------------------------------------------------------------------

void launch_binary(const KernelContext& ctx, int op, const Tensor& a, const Tensor& b, Tensor& y) {
  const Shape& shape = y.shape();
  const std::vector<int64_t> sa = broadcast_strides(a.shape(), shape);
  const std::vector<int64_t> sb = broadcast_strides(b.shape(), shape);
  const int rc =
      api().binary(current_stream(), op, code(a.dtype()), static_cast<int>(shape.size()),
                   shape.data(), a.raw_data(), sa.data(), b.raw_data(), sb.data(), y.raw_data());
  if (rc != 0) ctx.fail(StatusCode::kFail, std::string("binary op: ") + api().last_error());
}

class Binary final : public CudaKernel {
 public:
  Binary(const KernelInfo&, int op) : op_(op) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& a = dev_input(ctx, 0);
    const Tensor& b = dev_input(ctx, 1);
    if (a.dtype() != b.dtype())
      ctx.fail(StatusCode::kInvalidArgument, std::string("inputs have different element types ") +
                                                 dtype_name(a.dtype()) + " and " +
                                                 dtype_name(b.dtype()));
    const DataType dt = a.dtype();
    const bool logical = op_ >= ORTLITE_CUDA_AND;
    const bool comparison = op_ >= ORTLITE_CUDA_EQUAL;
    if (logical)
      need(ctx, dt == DataType::kBool, dt);
    else if (op_ == ORTLITE_CUDA_POW)
      need(ctx, is_float(dt), dt);
    else if (op_ == ORTLITE_CUDA_EQUAL)
      need(ctx, is_arith(dt) || dt == DataType::kBool, dt);
    else
      need(ctx, is_arith(dt), dt);
    const Shape shape = broadcast_or_fail(ctx, a.shape(), b.shape());
    Tensor& y = out(ctx, 0, comparison ? DataType::kBool : dt, shape);
    if (y.numel() == 0) return;
    launch_binary(ctx, op_, a, b, y);
  }

 private:
  int op_;
};

// Min / Max / Sum over any number of inputs, folded pairwise.
class Variadic final : public CudaKernel {
 public:
  Variadic(const KernelInfo&, int op) : op_(op) {}

  void compute(KernelContext& ctx) const override {
    const size_t n = ctx.num_inputs();
    if (n == 0) ctx.fail(StatusCode::kInvalidArgument, "needs at least one input");
    const Tensor& x0 = dev_input(ctx, 0);
    const DataType dt = x0.dtype();
    need(ctx, is_arith(dt), dt);
    Shape shape = x0.shape();
    for (size_t i = 1; i < n; ++i) {
      const Tensor& x = dev_input(ctx, i);
      if (x.dtype() != dt)
        ctx.fail(StatusCode::kInvalidArgument, "input " + std::to_string(i) + " has element type " +
                                                   dtype_name(x.dtype()) + ", input 0 has " +
                                                   dtype_name(dt));
      shape = broadcast_or_fail(ctx, shape, x.shape());
    }
    if (n == 1) {
      Tensor& y = out(ctx, 0, dt, shape);
      if (y.numel()) strided_into(ctx, x0, dense_strides(shape), shape, y);
      return;
    }
    Tensor cur = x0;
    for (size_t i = 1; i < n; ++i) {
      const Tensor& x = *ctx.input(i);
      const Shape s = broadcast_or_fail(ctx, cur.shape(), x.shape());
      Tensor next = i + 1 == n ? out(ctx, 0, dt, shape) : temp(dt, s);
      if (next.numel()) launch_binary(ctx, op_, cur, x, next);
      cur = std::move(next);
    }
  }

 private:
  int op_;
};

// ---- unary ----------------------------------------------------------------------------

class Unary final : public CudaKernel {
 public:
  Unary(const KernelInfo& info, int op) : op_(op) {
    switch (op) {
      case ORTLITE_CUDA_LEAKY_RELU:
        alpha_ = info.attr_float("alpha", 0.01f);
        break;
      case ORTLITE_CUDA_ELU:
        alpha_ = info.attr_float("alpha", 1.0f);
        break;
      case ORTLITE_CUDA_SELU:
        alpha_ = info.attr_float("alpha", 1.67326319217681884765625f);
        beta_ = info.attr_float("gamma", 1.05070102214813232421875f);
        break;
      case ORTLITE_CUDA_HARD_SIGMOID:
        alpha_ = info.attr_float("alpha", 0.2f);
        beta_ = info.attr_float("beta", 0.5f);
        break;
      case ORTLITE_CUDA_GELU: {
        const std::string approx = info.attr_string("approximate", "none");
        if (approx == "tanh")
          op_ = ORTLITE_CUDA_GELU_TANH;
        else if (approx != "none")
          info.fail(StatusCode::kInvalidGraph,
                    "attribute 'approximate' must be \"none\" or \"tanh\", got \"" + approx + "\"");
        break;
      }
      default:
        break;
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = dev_input(ctx, 0);
    need(ctx, op_ == ORTLITE_CUDA_NOT ? x.dtype() == DataType::kBool : is_float(x.dtype()),
         x.dtype());
    Tensor& y = out(ctx, 0, x.dtype(), x.shape());
    run(ctx,
        api().unary(stream(), op_, code(x.dtype()), x.numel(), x.raw_data(), y.raw_data(), alpha_,
                    beta_),
        "unary op");
  }

 private:
  int op_;
  double alpha_ = 0, beta_ = 0;
};

// Clip: bounds from attributes (opset < 11) or host scalar inputs 1 and 2. A missing bound
// is the type's lowest / highest value (float for the half types, as on the CPU).
class Clip final : public CudaKernel {
 public:
  explicit Clip(const KernelInfo& info) : opset_(info.opset()) {
    if (opset_ < 11) {
      has_min_ = info.has_attr("min");
      has_max_ = info.has_attr("max");
      min_ = info.attr_float("min", 0.f);
      max_ = info.attr_float("max", 0.f);
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = dev_input(ctx, 0);
    need(ctx, is_float(x.dtype()), x.dtype());
    const bool dbl = x.dtype() == DataType::kDouble;
    double lo = dbl ? -DBL_MAX : -FLT_MAX, hi = dbl ? DBL_MAX : FLT_MAX;
    if (opset_ < 11) {
      if (has_min_) lo = min_;
      if (has_max_) hi = max_;
    } else {
      const char* names[2] = {"min", "max"};
      for (size_t i = 1; i <= 2; ++i) {
        const Tensor* b = host_input(ctx, i);
        if (!b) continue;
        if (b->dtype() != x.dtype())
          ctx.fail(StatusCode::kInvalidArgument,
                   std::string("input '") + names[i - 1] + "' has element type " +
                       dtype_name(b->dtype()) + ", input has " + dtype_name(x.dtype()));
        if (b->numel() != 1)
          ctx.fail(StatusCode::kInvalidArgument, std::string("input '") + names[i - 1] +
                                                     "' must be a scalar, got shape " +
                                                     shape_to_string(b->shape()));
        (i == 1 ? lo : hi) = tensor_scalar_as_double(*b);
      }
    }
    Tensor& y = out(ctx, 0, x.dtype(), x.shape());
    run(ctx,
        api().unary(stream(), ORTLITE_CUDA_CLIP, code(x.dtype()), x.numel(), x.raw_data(),
                    y.raw_data(), lo, hi),
        "Clip");
  }

 private:
  int64_t opset_;
  bool has_min_ = false, has_max_ = false;
  float min_ = 0.f, max_ = 0.f;
};

// ---- Where, Cast ----------------------------------------------------------------------

class Where final : public CudaKernel {
 public:
  explicit Where(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& c = dev_input(ctx, 0);
    const Tensor& x = dev_input(ctx, 1);
    const Tensor& y = dev_input(ctx, 2);
    if (c.dtype() != DataType::kBool)
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input 'condition' must be bool, got ") + dtype_name(c.dtype()));
    if (x.dtype() != y.dtype())
      ctx.fail(StatusCode::kInvalidArgument, std::string("inputs X and Y have element types ") +
                                                 dtype_name(x.dtype()) + " and " +
                                                 dtype_name(y.dtype()));
    const Shape shape =
        broadcast_or_fail(ctx, broadcast_or_fail(ctx, c.shape(), x.shape()), y.shape());
    Tensor& o = out(ctx, 0, x.dtype(), shape);
    if (o.numel() == 0) return;
    const auto sc = broadcast_strides(c.shape(), shape), sx = broadcast_strides(x.shape(), shape),
               sy = broadcast_strides(y.shape(), shape);
    run(ctx,
        api().where(stream(), static_cast<int>(dtype_size(x.dtype())),
                    static_cast<int>(shape.size()), shape.data(), c.raw_data(), sc.data(),
                    x.raw_data(), sx.data(), y.raw_data(), sy.data(), o.raw_data()),
        "Where");
  }
};

class Cast final : public CudaKernel {
 public:
  explicit Cast(const KernelInfo& info) {
    const int64_t to = info.attr_int_required("to");
    to_ = static_cast<DataType>(to);
    if (to <= 0 || to > 16 || !dtype_supported(to_))
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'to' = " + std::to_string(to) + " is not a supported element type");
  }
  void compute(KernelContext& ctx) const override {
    const Tensor& x = dev_input(ctx, 0);
    need(ctx, x.dtype() != DataType::kString && dtype_size(x.dtype()) > 0, x.dtype());
    need(ctx, to_ != DataType::kString, to_);
    Tensor& y = out(ctx, 0, to_, x.shape());
    if (y.numel() == 0) return;
    if (to_ == x.dtype()) {
      strided_into(ctx, x, dense_strides(x.shape()), x.shape(), y);
      return;
    }
    run(ctx,
        api().cast(stream(), code(x.dtype()), code(to_), x.numel(), x.raw_data(), y.raw_data()),
        "Cast");
  }

 private:
  DataType to_;
};

// ---- Softmax, LayerNormalization, BatchNormalization ----------------------------------

class Softmax final : public CudaKernel {
 public:
  Softmax(const KernelInfo& info, bool log)
      : log_(log), opset_(info.opset()), axis_(info.attr_int("axis", info.opset() < 13 ? 1 : -1)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = dev_input(ctx, 0);
    need(ctx, is_float(x.dtype()), x.dtype());
    const int64_t rank = static_cast<int64_t>(x.rank());
    if (axis_ < -rank || axis_ >= rank)
      ctx.fail(StatusCode::kInvalidArgument, "attribute 'axis' " + std::to_string(axis_) +
                                                 " is out of range for input shape " +
                                                 shape_to_string(x.shape()));
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    const Shape& s = x.shape();
    const int64_t outer = tensor_ops::dims_product(s, 0, axis);
    int64_t n, inner;
    if (opset_ < 13) {
      n = tensor_ops::dims_product(s, axis, s.size());
      inner = 1;
    } else {
      n = s[axis];
      inner = tensor_ops::dims_product(s, axis + 1, s.size());
    }
    Tensor& y = out(ctx, 0, x.dtype(), s);
    run(ctx,
        api().softmax(stream(), code(x.dtype()), log_ ? 1 : 0, outer, n, inner, x.raw_data(),
                      y.raw_data()),
        log_ ? "LogSoftmax" : "Softmax");
  }

 private:
  bool log_;
  int64_t opset_;
  int64_t axis_;
};

class LayerNorm final : public CudaKernel {
 public:
  explicit LayerNorm(const KernelInfo& info)
      : axis_(info.attr_int("axis", -1)), epsilon_(info.attr_float("epsilon", 1e-5f)) {
    const int64_t stash = info.attr_int("stash_type", 1);
    if (stash != 1)
      info.fail(StatusCode::kNotImplemented,
                "stash_type " + std::to_string(stash) + " is not supported (only 1: float)");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = dev_input(ctx, 0);
    const Tensor& S = dev_input(ctx, 1);
    const Tensor* B = dev_input_opt(ctx, 2);
    need(ctx, is_float(X.dtype()), X.dtype());
    if (S.dtype() != X.dtype() || (B && B->dtype() != X.dtype()))
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("X, Scale and B must have the same element type, got X ") +
                   dtype_name(X.dtype()) + ", Scale " + dtype_name(S.dtype()) +
                   (B ? std::string(", B ") + dtype_name(B->dtype()) : std::string()));
    const int64_t rank = static_cast<int64_t>(X.rank());
    if (rank == 0) ctx.fail(StatusCode::kInvalidArgument, "X must have rank >= 1, got a scalar");
    if (axis_ < -rank || axis_ >= rank)
      ctx.fail(StatusCode::kInvalidArgument, "attribute 'axis' " + std::to_string(axis_) +
                                                 " is out of range for X " +
                                                 shape_to_string(X.shape()));
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    const Shape norm_shape(X.shape().begin() + static_cast<std::ptrdiff_t>(axis), X.shape().end());
    const int64_t outer = tensor_ops::dims_product(X.shape(), 0, axis);
    const int64_t norm = shape_size(norm_shape);
    if (norm == 0)
      ctx.fail(StatusCode::kInvalidArgument, "the normalized dims X.shape[axis:] " +
                                                 shape_to_string(norm_shape) + " of X " +
                                                 shape_to_string(X.shape()) + " are empty");
    Shape stat_shape(X.shape().begin(), X.shape().begin() + static_cast<std::ptrdiff_t>(axis));
    stat_shape.resize(static_cast<size_t>(rank), 1);
    Tensor& Y = out(ctx, 0, X.dtype(), X.shape());
    float* mean = nullptr;
    float* inv = nullptr;
    if (ctx.num_outputs() > 1 && !ctx.node().outputs[1].empty())
      mean = out(ctx, 1, DataType::kFloat, stat_shape).data<float>();
    if (ctx.num_outputs() > 2 && !ctx.node().outputs[2].empty())
      inv = out(ctx, 2, DataType::kFloat, stat_shape).data<float>();
    if (X.numel() == 0) return;
    const Tensor scale = expand(ctx, S, norm_shape, "Scale");
    Tensor bias;
    if (B) bias = expand(ctx, *B, norm_shape, "B");
    run(ctx,
        api().layer_norm(stream(), code(X.dtype()), outer, norm, epsilon_, X.raw_data(),
                         scale.raw_data(), B ? bias.raw_data() : nullptr, Y.raw_data(), mean, inv),
        "LayerNormalization");
  }

 private:
  // Scale / B broadcast to the normalized shape (a dense device copy when they are smaller).
  Tensor expand(const KernelContext& ctx, const Tensor& p, const Shape& target,
                const char* what) const {
    if (p.numel() == shape_size(target)) return p;
    bool ok = p.rank() <= target.size();
    for (size_t i = 0; ok && i < p.rank(); ++i) {
      const int64_t d = p.dim(p.rank() - 1 - i);
      const int64_t t = target[target.size() - 1 - i];
      ok = d == t || d == 1;
    }
    if (!ok)
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input ") + what + " " + shape_to_string(p.shape()) +
                   " cannot be broadcast to the normalized shape " + shape_to_string(target));
    Tensor t = temp(p.dtype(), target);
    strided_into(ctx, p, broadcast_strides(p.shape(), target), target, t);
    return t;
  }

  int64_t axis_;
  float epsilon_;
};

class BatchNorm final : public CudaKernel {
 public:
  explicit BatchNorm(const KernelInfo& info)
      : epsilon_(info.attr_float("epsilon", 1e-5f)), opset_(info.opset()) {
    if (opset_ >= 14) {
      if (info.attr_int("training_mode", 0) != 0)
        info.fail(StatusCode::kNotImplemented,
                  "training_mode = 1 is not supported (ortlite runs inference only)");
      for (size_t i = 1; i < info.num_outputs(); ++i)
        if (!info.node().outputs[i].empty())
          info.fail(StatusCode::kInvalidGraph,
                    "outputs running_mean / running_var are only produced in training mode");
    } else {
      for (size_t i = 1; i < info.num_outputs(); ++i)
        if (!info.node().outputs[i].empty())
          info.fail(StatusCode::kNotImplemented,
                    "the mean / var / saved_mean / saved_var outputs mean training mode, which "
                    "is not supported (ortlite runs inference only)");
    }
    if (opset_ < 9) spatial_ = info.attr_int("spatial", 1) != 0;
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = dev_input(ctx, 0);
    static const char* const kNames[4] = {"scale", "B", "input_mean", "input_var"};
    if (X.rank() < 2)
      ctx.fail(StatusCode::kInvalidArgument,
               "X must have rank >= 2 (N x C x ...), got " + shape_to_string(X.shape()));
    need(ctx, is_float(X.dtype()), X.dtype());
    const int64_t C = X.dim(1);
    const int64_t inner = tensor_ops::dims_product(X.shape(), 2, X.rank());
    const int64_t count = spatial_ ? C : C * inner;
    Tensor params[4];
    for (size_t i = 0; i < 4; ++i) {
      const Tensor& p = dev_input(ctx, i + 1);
      if (!is_float(p.dtype()) || (opset_ < 14 && p.dtype() != X.dtype()))
        ctx.fail(StatusCode::kInvalidArgument, std::string("input ") + kNames[i] +
                                                   " has element type " + dtype_name(p.dtype()) +
                                                   ", X has " + dtype_name(X.dtype()));
      if (p.numel() != count || (spatial_ && p.rank() != 1))
        ctx.fail(StatusCode::kInvalidArgument,
                 std::string("input ") + kNames[i] + " " + shape_to_string(p.shape()) +
                     " does not match X " + shape_to_string(X.shape()) + " (expected " +
                     (spatial_ ? "[" + std::to_string(C) + "]"
                               : std::to_string(count) + " elements (C x D1 x ...)") +
                     ")");
      params[i] = p;
      if (p.dtype() != X.dtype()) {  // opset 14+ allows other float types: compute in X's
        params[i] = temp(X.dtype(), p.shape());
        run(ctx,
            api().cast(stream(), code(p.dtype()), code(X.dtype()), p.numel(), p.raw_data(),
                       params[i].raw_data()),
            "BatchNormalization");
      }
    }
    Tensor& Y = out(ctx, 0, X.dtype(), X.shape());
    if (Y.numel() == 0) return;
    run(ctx,
        api().batch_norm(stream(), code(X.dtype()), X.numel(), spatial_ ? inner : 1, count,
                         epsilon_, X.raw_data(), params[0].raw_data(), params[1].raw_data(),
                         params[2].raw_data(), params[3].raw_data(), Y.raw_data()),
        "BatchNormalization");
  }

 private:
  float epsilon_;
  int64_t opset_;
  bool spatial_ = true;
};

// ---- reductions -----------------------------------------------------------------------

class Reduce final : public CudaKernel {
 public:
  Reduce(const KernelInfo& info, int op, int input_axes_since) : op_(op), opset_(info.opset()) {
    keepdims_ = info.attr_int("keepdims", 1) != 0;
    axes_from_input_ = info.opset() >= input_axes_since;
    if (axes_from_input_) {
      if (info.has_attr("axes"))
        info.fail(StatusCode::kInvalidGraph,
                  "attribute 'axes' is not allowed at opset " + std::to_string(info.opset()) +
                      " (axes are input 1 since opset " + std::to_string(input_axes_since) + ")");
      noop_ = info.attr_int("noop_with_empty_axes", 0) != 0;
    } else {
      axes_ = info.attr_ints("axes");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = dev_input(ctx, 0);
    const DataType dt = x.dtype();
    const bool integral = dt == DataType::kInt32 || dt == DataType::kInt64;
    const bool int_ok = op_ != ORTLITE_CUDA_REDUCE_L2 && op_ != ORTLITE_CUDA_REDUCE_LOG_SUM &&
                        op_ != ORTLITE_CUDA_REDUCE_LOG_SUM_EXP;
    need(ctx, is_float(dt) || (integral && int_ok), dt);
    std::vector<int64_t> axes = axes_;
    if (axes_from_input_) {
      if (const Tensor* a = host_input(ctx, 1)) {
        if (a->dtype() != DataType::kInt64 && a->dtype() != DataType::kInt32)
          ctx.fail(StatusCode::kInvalidArgument,
                   std::string("input 'axes' must be int64, got ") + dtype_name(a->dtype()));
        if (a->rank() > 1)
          ctx.fail(StatusCode::kInvalidArgument,
                   "input 'axes' must be 1-D, got shape " + shape_to_string(a->shape()));
        axes = tensor_to_int64s(*a);
      }
    }
    const int64_t rank = static_cast<int64_t>(x.rank());
    if (axes.empty() && noop_) {
      Tensor& y = out(ctx, 0, dt, x.shape());
      if (y.numel()) strided_into(ctx, x, dense_strides(x.shape()), x.shape(), y);
      return;
    }
    std::vector<bool> mask(static_cast<size_t>(rank), axes.empty());
    for (int64_t a : axes) {
      const int64_t lim = std::max<int64_t>(rank, 1);
      if (a < -lim || a >= lim)
        ctx.fail(StatusCode::kInvalidArgument,
                 "axes value " + std::to_string(a) + " is out of range for input 'data' of rank " +
                     std::to_string(rank) + " (shape " + shape_to_string(x.shape()) + ")");
      if (rank == 0) continue;
      const int64_t na = a < 0 ? a + rank : a;
      if (mask[static_cast<size_t>(na)])
        ctx.fail(StatusCode::kInvalidArgument, "axes " + ints_to_string(axes) + " name dim " +
                                                   std::to_string(na) + " more than once");
      mask[static_cast<size_t>(na)] = true;
    }
    Shape out_shape;
    for (int64_t d = 0; d < rank; ++d) {
      if (!mask[static_cast<size_t>(d)])
        out_shape.push_back(x.dim(static_cast<size_t>(d)));
      else if (keepdims_)
        out_shape.push_back(1);
    }
    Tensor& y = out(ctx, 0, dt, out_shape);
    if (y.numel() == 0) return;
    reduce::ReduceLayout L;
    if (x.numel() > 0) {
      L = reduce::make_layout(x.shape(), mask);
    } else {
      L.num_out = y.numel();
      L.red_count = 0;
      L.kdims = {y.numel()};
      L.kstrides = {0};
    }
    if (L.kdims.size() > ORTLITE_CUDA_MAX_RANK || L.rdims.size() > ORTLITE_CUDA_MAX_RANK)
      ctx.fail(StatusCode::kNotImplemented,
               "the reduction has too many separate dims for the CUDA kernel");
    run(ctx,
        api().reduce(stream(), op_, code(dt), static_cast<int>(L.kdims.size()), L.kdims.data(),
                     L.kstrides.data(), static_cast<int>(L.rdims.size()), L.rdims.data(),
                     L.rstrides.data(), L.red_count, x.raw_data(), y.raw_data()),
        ctx.node().op_type.c_str());
  }

 private:
  int op_;
  int64_t opset_;
  bool keepdims_ = true;
  bool axes_from_input_ = false;
  bool noop_ = false;
  std::vector<int64_t> axes_;
};

// ---- pooling --------------------------------------------------------------------------

class Pool final : public CudaKernel {
 public:
  Pool(const KernelInfo& info, bool is_max, bool global)
      : is_max_(is_max), global_(global), opset_(info.opset()) {
    if (global_) return;
    attrs_.load(info, true);
    if ((is_max && opset_ < 10) || (!is_max && opset_ < 19)) attrs_.dilations.clear();
    ceil_mode_ = opset_ >= 10 && info.attr_int("ceil_mode", 0) != 0;
    if (!is_max) count_include_pad_ = opset_ >= 7 && info.attr_int("count_include_pad", 0) != 0;
    if (is_max && opset_ >= 8) {
      storage_order_ = info.attr_int("storage_order", 0);
      if (storage_order_ != 0 && storage_order_ != 1)
        info.fail(StatusCode::kInvalidGraph, "attribute 'storage_order' must be 0 or 1, got " +
                                                 std::to_string(storage_order_));
    }
    if (attrs_.auto_pad == nn::AutoPad::kNotSet && !attrs_.pads.empty()) {
      const size_t n = attrs_.kernel_shape.size();
      for (size_t i = 0; i < 2 * n; ++i)
        if (attrs_.pads[i] >= attrs_.kernel_shape[i % n])
          info.fail(StatusCode::kInvalidGraph, "attribute 'pads' " +
                                                   nn::dims_to_string(attrs_.pads) +
                                                   " must be smaller than the kernel " +
                                                   nn::dims_to_string(attrs_.kernel_shape));
    }
    if (!is_max && info.num_outputs() > 1)
      info.fail(StatusCode::kInvalidGraph, "AveragePool has a single output");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = dev_input(ctx, 0);
    if (X.rank() < 3 || (!global_ && X.rank() > 5))
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("X must be N x C x D1 x ... with 1 to 3 spatial dims, got ") +
                   shape_to_string(X.shape()));
    need(ctx, is_float(X.dtype()), X.dtype());
    const int64_t channels = X.dim(0) * X.dim(1);
    const std::vector<int64_t> in(X.shape().begin() + 2, X.shape().end());
    if (global_) {
      Shape ys{X.dim(0), X.dim(1)};
      ys.resize(X.rank(), 1);
      Tensor& Y = out(ctx, 0, X.dtype(), ys);
      if (Y.numel() == 0) return;
      const int64_t size = tensor_ops::dims_product(X.shape(), 2, X.rank());
      const int64_t kd = channels, ks = size, rd = size, rs = 1;
      run(ctx,
          api().reduce(stream(), is_max_ ? ORTLITE_CUDA_REDUCE_MAX : ORTLITE_CUDA_REDUCE_MEAN,
                       code(X.dtype()), 1, &kd, &ks, 1, &rd, &rs, size, X.raw_data(), Y.raw_data()),
          ctx.node().op_type.c_str());
      return;
    }
    const nn::SpatialGeometry g = nn::pool_geometry(ctx, attrs_, in, ceil_mode_);
    Shape ys{X.dim(0), X.dim(1)};
    ys.insert(ys.end(), g.out.begin(), g.out.end());
    Tensor& Y = out(ctx, 0, X.dtype(), ys);
    int64_t* ind = nullptr;
    if (is_max_ && ctx.num_outputs() > 1 && !ctx.node().outputs[1].empty())
      ind = out(ctx, 1, DataType::kInt64, ys).data<int64_t>();
    if (Y.numel() == 0) return;
    OrtliteCudaPoolParams p;
    std::memset(&p, 0, sizeof(p));
    p.dtype = code(X.dtype());
    p.is_max = is_max_ ? 1 : 0;
    p.count_include_pad = count_include_pad_ ? 1 : 0;
    p.clip_divisor = opset_ >= 19 ? 1 : 0;
    p.storage_order = static_cast<int>(storage_order_);
    p.spatial_rank = static_cast<int>(g.rank);
    p.channels = channels;
    for (size_t i = 0; i < 3; ++i) {
      if (i < 3 - g.rank) {
        p.in[i] = p.out[i] = p.kernel[i] = p.stride[i] = p.dilation[i] = 1;
        p.pad_begin[i] = p.pad_end[i] = 0;
      } else {
        const size_t j = i - (3 - g.rank);
        p.in[i] = g.in[j];
        p.out[i] = g.out[j];
        p.kernel[i] = g.kernel[j];
        p.stride[i] = g.stride[j];
        p.dilation[i] = g.dilation[j];
        p.pad_begin[i] = g.pad_begin[j];
        p.pad_end[i] = g.pad_end[j];
      }
    }
    run(ctx, api().pool(stream(), &p, X.raw_data(), Y.raw_data(), ind), ctx.node().op_type.c_str());
  }

 private:
  bool is_max_;
  bool global_;
  int64_t opset_;
  nn::SpatialAttrs attrs_;
  bool ceil_mode_ = false;
  bool count_include_pad_ = false;
  int64_t storage_order_ = 0;
};

// ---- data movement --------------------------------------------------------------------

class Transpose final : public CudaKernel {
 public:
  explicit Transpose(const KernelInfo& info) {
    if (info.has_attr("perm")) {
      has_perm_ = true;
      perm_ = info.attr_ints("perm");
      std::vector<char> seen(perm_.size(), 0);
      for (int64_t p : perm_) {
        if (p < 0 || p >= static_cast<int64_t>(perm_.size()) || seen[static_cast<size_t>(p)])
          info.fail(StatusCode::kInvalidGraph,
                    "attribute 'perm' " + ints_to_string(perm_) + " is not a permutation");
        seen[static_cast<size_t>(p)] = 1;
      }
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = dev_input(ctx, 0);
    const size_t rank = x.rank();
    std::vector<int64_t> perm(rank);
    if (has_perm_) {
      if (perm_.size() != rank)
        ctx.fail(StatusCode::kInvalidArgument, "attribute 'perm' " + ints_to_string(perm_) +
                                                   " has " + std::to_string(perm_.size()) +
                                                   " entries but the input has shape " +
                                                   shape_to_string(x.shape()));
      perm = perm_;
    } else {
      for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(rank - 1 - i);
    }
    const std::vector<int64_t> in_strides = dense_strides(x.shape());
    Shape shape(rank);
    std::vector<int64_t> src(rank);
    for (size_t i = 0; i < rank; ++i) {
      shape[i] = x.dim(static_cast<size_t>(perm[i]));
      src[i] = in_strides[static_cast<size_t>(perm[i])];
    }
    Tensor& y = out(ctx, 0, x.dtype(), shape);
    if (y.numel()) strided_into(ctx, x, src, shape, y);
  }

 private:
  bool has_perm_ = false;
  std::vector<int64_t> perm_;
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
    if (opset_ < 10) {
      if (!info.has_attr("starts") || !info.has_attr("ends"))
        info.fail(StatusCode::kInvalidGraph, "missing attribute 'starts' or 'ends'");
      starts_ = info.attr_ints("starts");
      ends_ = info.attr_ints("ends");
      has_axes_ = info.has_attr("axes");
      axes_ = info.attr_ints("axes");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& data = dev_input(ctx, 0);
    const Shape& in = data.shape();
    const int64_t rank = static_cast<int64_t>(in.size());
    std::vector<int64_t> starts, ends, axes, steps;
    bool has_axes = has_axes_, has_steps = false;
    if (opset_ < 10) {
      starts = starts_;
      ends = ends_;
      axes = axes_;
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
    const size_t n = starts.size();
    if (ends.size() != n)
      ctx.fail(StatusCode::kInvalidArgument, "'starts' " + ints_to_string(starts) + " and 'ends' " +
                                                 ints_to_string(ends) + " differ in length");
    if (has_axes && axes.size() != n)
      ctx.fail(StatusCode::kInvalidArgument, "'axes' " + ints_to_string(axes) +
                                                 " must have as many entries as 'starts' " +
                                                 ints_to_string(starts));
    if (has_steps && steps.size() != n)
      ctx.fail(StatusCode::kInvalidArgument, "'steps' " + ints_to_string(steps) +
                                                 " must have as many entries as 'starts' " +
                                                 ints_to_string(starts));
    if (!has_axes) {
      if (static_cast<int64_t>(n) > rank)
        ctx.fail(StatusCode::kInvalidArgument, "'starts' " + ints_to_string(starts) +
                                                   " has more entries than the input rank " +
                                                   std::to_string(rank));
      axes.resize(n);
      for (size_t i = 0; i < n; ++i) axes[i] = static_cast<int64_t>(i);
    }
    if (!has_steps) steps.assign(n, 1);
    const std::vector<int64_t> norm = tensor_ops::normalize_axes(ctx, axes, rank, "axes");
    const std::vector<int64_t> in_strides = dense_strides(in);
    Shape shape = in;
    std::vector<int64_t> src_strides = in_strides;
    int64_t src_offset = 0;
    for (size_t i = 0; i < n; ++i) {
      const size_t a = static_cast<size_t>(norm[i]);
      const int64_t dim = in[a];
      const int64_t step = steps[i];
      if (step == 0)
        ctx.fail(StatusCode::kInvalidArgument,
                 "'steps' " + ints_to_string(steps) + " has a 0 (axis " + std::to_string(a) + ")");
      int64_t start = starts[i], end = ends[i];
      if (start < 0) start += dim;
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
          const uint64_t mag = static_cast<uint64_t>(-(step + 1)) + 1;
          count = 1 + static_cast<int64_t>(static_cast<uint64_t>(start - end - 1) / mag);
        }
      }
      shape[a] = count;
      if (count > 0) src_offset += start * in_strides[a];
      src_strides[a] = count > 1 ? step * in_strides[a] : 0;
    }
    Tensor& y = out(ctx, 0, data.dtype(), shape);
    if (y.numel() == 0) return;
    const char* src = static_cast<const char*>(data.raw_data()) +
                      src_offset * static_cast<int64_t>(dtype_size(data.dtype()));
    strided_into(ctx, data, src_strides, shape, y, src);
  }

 private:
  int64_t opset_;
  std::vector<int64_t> starts_, ends_, axes_;
  bool has_axes_ = false;
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

// ---- MatMul, Gemm, Conv ---------------------------------------------------------------

bool gemm_type(DataType t) {
  return is_float(t);
}

// Row-major C[M,N] = alpha * op(A) op(B) + beta * C for `batch` matrices at strides (in
// elements), through cuBLAS's column-major GEMM: C^T = op(B)^T op(A)^T.
void row_major_gemm(const KernelContext& ctx, DataType dt, bool ta, bool tb, int64_t M, int64_t N,
                    int64_t K, double alpha, const void* A, int64_t sa, const void* B, int64_t sb,
                    double beta, void* C, int64_t sc, int64_t batch) {
  // Leading dims are at least 1 even for empty operands (K == 0), as BLAS requires.
  const int64_t lda = std::max<int64_t>(ta ? M : K, 1), ldb = std::max<int64_t>(tb ? K : N, 1);
  const int rc = api().gemm(current_stream(), code(dt), tb ? 1 : 0, ta ? 1 : 0, N, M, K, alpha, B,
                            ldb, sb, A, lda, sa, beta, C, N, sc, batch);
  if (rc != 0) ctx.fail(StatusCode::kFail, std::string("GEMM: ") + api().last_error());
}

class MatMul final : public CudaKernel {
 public:
  explicit MatMul(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& a = dev_input(ctx, 0);
    const Tensor& b = dev_input(ctx, 1);
    if (a.dtype() != b.dtype())
      ctx.fail(StatusCode::kInvalidArgument, std::string("inputs have different element types ") +
                                                 dtype_name(a.dtype()) + " and " +
                                                 dtype_name(b.dtype()));
    need(ctx, gemm_type(a.dtype()), a.dtype());
    if (a.rank() == 0 || b.rank() == 0)
      ctx.fail(StatusCode::kInvalidArgument, "MatMul inputs must have rank >= 1, got " +
                                                 shape_to_string(a.shape()) + " and " +
                                                 shape_to_string(b.shape()));
    // 1-D operands become matrices ([K] -> [1, K] on the left, [K, 1] on the right).
    Shape as = a.shape(), bs = b.shape();
    if (as.size() == 1) as.insert(as.begin(), 1);
    if (bs.size() == 1) bs.push_back(1);
    const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
    if (bs[bs.size() - 2] != K)
      ctx.fail(StatusCode::kInvalidArgument, "MatMul shapes " + shape_to_string(a.shape()) +
                                                 " and " + shape_to_string(b.shape()) +
                                                 " do not match (inner dims " + std::to_string(K) +
                                                 " and " + std::to_string(bs[bs.size() - 2]) + ")");
    const Shape abatch(as.begin(), as.end() - 2), bbatch(bs.begin(), bs.end() - 2);
    const Shape batch = broadcast_or_fail(ctx, abatch, bbatch);
    Shape shape = batch;
    if (a.rank() > 1) shape.push_back(M);
    if (b.rank() > 1) shape.push_back(N);
    Tensor& y = out(ctx, 0, a.dtype(), shape);
    if (y.numel() == 0) return;
    if (K == 0) {
      run(ctx, api().memset_zero(y.raw_data(), y.nbytes(), stream()), "MatMul");
      return;
    }
    // Batch strides in matrices, then one strided-batched GEMM per run of the innermost
    // batch dim (one for the usual equal or fully broadcast batches).
    const std::vector<int64_t> ab = broadcast_strides(abatch, batch);
    const std::vector<int64_t> bb = broadcast_strides(bbatch, batch);
    const size_t esz = dtype_size(a.dtype());
    // B with no batch dims of its own: fold A's batch into M (one plain GEMM).
    if (shape_size(bbatch) == 1 && shape_size(abatch) == shape_size(batch)) {
      row_major_gemm(ctx, a.dtype(), false, false, M * shape_size(batch), N, K, 1.0, a.raw_data(),
                     0, b.raw_data(), 0, 0.0, y.raw_data(), 0, 1);
      return;
    }
    const size_t nb = batch.size();
    const int64_t inner_n = nb ? batch.back() : 1;
    const int64_t sa = nb ? ab.back() * M * K : 0, sb = nb ? bb.back() * K * N : 0;
    const int64_t outer = nb ? shape_size(batch) / std::max<int64_t>(inner_n, 1) : 1;
    std::vector<int64_t> idx(nb ? nb - 1 : 0, 0);
    for (int64_t o = 0; o < outer; ++o) {
      int64_t oa = 0, ob = 0;
      for (size_t d = 0; d + 1 < nb; ++d) {
        oa += idx[d] * ab[d];
        ob += idx[d] * bb[d];
      }
      const char* ap = static_cast<const char*>(a.raw_data()) + oa * M * K * esz;
      const char* bp = static_cast<const char*>(b.raw_data()) + ob * K * N * esz;
      char* yp = static_cast<char*>(y.raw_data()) + o * inner_n * M * N * esz;
      row_major_gemm(ctx, a.dtype(), false, false, M, N, K, 1.0, ap, sa, bp, sb, 0.0, yp, M * N,
                     inner_n);
      for (size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < batch[d]) break;
        idx[d] = 0;
      }
    }
  }
};

class Gemm final : public CudaKernel {
 public:
  explicit Gemm(const KernelInfo& info)
      : trans_a_(info.attr_int("transA", 0) != 0),
        trans_b_(info.attr_int("transB", 0) != 0),
        alpha_(info.attr_float("alpha", 1.0f)),
        beta_(info.attr_float("beta", 1.0f)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& A = dev_input(ctx, 0);
    const Tensor& B = dev_input(ctx, 1);
    const Tensor* C = dev_input_opt(ctx, 2);
    if (A.dtype() != B.dtype() || (C && C->dtype() != A.dtype()))
      ctx.fail(StatusCode::kInvalidArgument, "A, B and C must have the same element type");
    need(ctx, gemm_type(A.dtype()), A.dtype());
    if (A.rank() != 2 || B.rank() != 2)
      ctx.fail(StatusCode::kInvalidArgument, "A and B must be 2-D, got " +
                                                 shape_to_string(A.shape()) + " and " +
                                                 shape_to_string(B.shape()));
    const int64_t M = trans_a_ ? A.dim(1) : A.dim(0), K = trans_a_ ? A.dim(0) : A.dim(1);
    const int64_t KB = trans_b_ ? B.dim(1) : B.dim(0), N = trans_b_ ? B.dim(0) : B.dim(1);
    if (K != KB)
      ctx.fail(StatusCode::kInvalidArgument,
               "A " + shape_to_string(A.shape()) + " and B " + shape_to_string(B.shape()) +
                   " do not match for transA=" + std::to_string(trans_a_) +
                   ", transB=" + std::to_string(trans_b_));
    const Shape shape{M, N};
    Tensor& Y = out(ctx, 0, A.dtype(), shape);
    if (Y.numel() == 0) return;
    double beta = 0.0;
    if (C && beta_ != 0.f) {
      const Shape cs = C->shape();
      bool ok = cs.size() <= 2;
      for (size_t i = 0; ok && i < cs.size(); ++i) {
        const int64_t t = shape[2 - cs.size() + i];
        ok = cs[i] == t || cs[i] == 1;
      }
      if (!ok)
        ctx.fail(StatusCode::kInvalidArgument,
                 "C " + shape_to_string(cs) + " cannot be broadcast to " + shape_to_string(shape));
      strided_into(ctx, *C, broadcast_strides(cs, shape), shape, Y);
      beta = beta_;
    }
    // K == 0 included: BLAS semantics give Y = beta * C (zeros when beta is 0).
    row_major_gemm(ctx, A.dtype(), trans_a_, trans_b_, M, N, K, alpha_, A.raw_data(), 0,
                   B.raw_data(), 0, beta, Y.raw_data(), 0, 1);
  }

 private:
  bool trans_a_, trans_b_;
  float alpha_, beta_;
};

class Conv final : public CudaKernel {
 public:
  explicit Conv(const KernelInfo& info) : group_(info.attr_int("group", 1)) {
    attrs_.load(info, false);
    if (group_ < 1)
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'group' must be >= 1, got " + std::to_string(group_));
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = dev_input(ctx, 0);
    const Tensor& W = dev_input(ctx, 1);
    const Tensor* B = dev_input_opt(ctx, 2);
    const DataType dt = X.dtype();
    if (W.dtype() != dt || (B && B->dtype() != dt))
      ctx.fail(StatusCode::kInvalidArgument, "X, W and B must have the same element type");
    need(ctx, dt == DataType::kFloat || dt == DataType::kFloat16 || dt == DataType::kDouble, dt);
    if (X.rank() < 3 || X.rank() > 5 || W.rank() != X.rank())
      ctx.fail(StatusCode::kInvalidArgument,
               "X " + shape_to_string(X.shape()) + " and W " + shape_to_string(W.shape()) +
                   " must both be N x C x D1 x ... with 1 to 3 spatial dims");
    const int64_t N = X.dim(0), Cin = X.dim(1), M = W.dim(0);
    if (W.dim(1) * group_ != Cin || M % group_ != 0)
      ctx.fail(StatusCode::kInvalidArgument, "W " + shape_to_string(W.shape()) +
                                                 " does not match X " + shape_to_string(X.shape()) +
                                                 " with group " + std::to_string(group_));
    if (B && (B->rank() != 1 || B->dim(0) != M))
      ctx.fail(StatusCode::kInvalidArgument,
               "B " + shape_to_string(B->shape()) + " must be [" + std::to_string(M) + "]");
    const std::vector<int64_t> in(X.shape().begin() + 2, X.shape().end());
    const std::vector<int64_t> kernel(W.shape().begin() + 2, W.shape().end());
    if (!attrs_.kernel_shape.empty() && attrs_.kernel_shape != kernel)
      ctx.fail(StatusCode::kInvalidArgument, "attribute 'kernel_shape' " +
                                                 nn::dims_to_string(attrs_.kernel_shape) +
                                                 " does not match W " + shape_to_string(W.shape()));
    const nn::SpatialGeometry g = nn::conv_geometry(ctx, attrs_, in, kernel);
    Shape ys{N, M};
    ys.insert(ys.end(), g.out.begin(), g.out.end());
    Tensor& Y = out(ctx, 0, dt, ys);
    if (Y.numel() == 0) return;
    OrtliteCudaConvParams p;
    std::memset(&p, 0, sizeof(p));
    p.dtype = code(dt);
    p.spatial_rank = static_cast<int>(g.rank);
    p.batch = N;
    p.in_channels = Cin;
    p.out_channels = M;
    p.group = group_;
    bool symmetric = true;
    for (size_t i = 0; i < g.rank; ++i) symmetric = symmetric && g.pad_begin[i] == g.pad_end[i];
    // cuDNN pads symmetrically: otherwise the padded input is made here.
    Tensor padded;
    const void* xp = X.raw_data();
    for (size_t i = 0; i < g.rank; ++i) {
      p.in[i] = symmetric ? g.in[i] : g.in[i] + g.pad_begin[i] + g.pad_end[i];
      p.kernel[i] = g.kernel[i];
      p.out[i] = g.out[i];
      p.pad[i] = symmetric ? g.pad_begin[i] : 0;
      p.stride[i] = g.stride[i];
      p.dilation[i] = g.dilation[i];
    }
    if (!symmetric) {
      Shape ps{N, Cin};
      for (size_t i = 0; i < g.rank; ++i) ps.push_back(p.in[i]);
      padded = temp(dt, ps);
      run(ctx, api().memset_zero(padded.raw_data(), padded.nbytes(), stream()), "Conv");
      const std::vector<int64_t> dst = dense_strides(ps);
      int64_t offset = 0;
      for (size_t i = 0; i < g.rank; ++i) offset += g.pad_begin[i] * dst[2 + i];
      const std::vector<int64_t> src = dense_strides(X.shape());
      run(ctx,
          api().strided_copy(
              stream(), static_cast<int>(dtype_size(dt)), static_cast<int>(X.rank()),
              X.shape().data(), X.raw_data(), src.data(),
              static_cast<char*>(padded.raw_data()) + offset * static_cast<int64_t>(dtype_size(dt)),
              dst.data()),
          "Conv");
      xp = padded.raw_data();
    }
    run(ctx,
        api().conv_forward(stream(), &p, xp, W.raw_data(), B ? B->raw_data() : nullptr,
                           Y.raw_data()),
        "Conv");
  }

 private:
  int64_t group_;
  nn::SpatialAttrs attrs_;
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

struct ReduceSpec {
  const char* name;
  int op;
  std::vector<int> versions;
  int input_axes_since;
};

const ReduceSpec kReduceSpecs[] = {
    {"ReduceSum", ORTLITE_CUDA_REDUCE_SUM, {1, 11, 13}, 13},
    {"ReduceMean", ORTLITE_CUDA_REDUCE_MEAN, {1, 11, 13, 18}, 18},
    {"ReduceMax", ORTLITE_CUDA_REDUCE_MAX, {1, 11, 12, 13, 18, 20}, 18},
    {"ReduceMin", ORTLITE_CUDA_REDUCE_MIN, {1, 11, 12, 13, 18, 20}, 18},
    {"ReduceProd", ORTLITE_CUDA_REDUCE_PROD, {1, 11, 13, 18}, 18},
    {"ReduceL1", ORTLITE_CUDA_REDUCE_L1, {1, 11, 13, 18}, 18},
    {"ReduceL2", ORTLITE_CUDA_REDUCE_L2, {1, 11, 13, 18}, 18},
    {"ReduceLogSum", ORTLITE_CUDA_REDUCE_LOG_SUM, {1, 11, 13, 18}, 18},
    {"ReduceLogSumExp", ORTLITE_CUDA_REDUCE_LOG_SUM_EXP, {1, 11, 13, 18}, 18},
    {"ReduceSumSquare", ORTLITE_CUDA_REDUCE_SUM_SQUARE, {1, 11, 13, 18}, 18},
};

}  // namespace

bool input_on_host(const std::string& op, int64_t opset, size_t index) {
  if (index == 0) return false;
  if (op == "Reshape") return opset >= 5 && index == 1;
  if (op == "Squeeze" || op == "Unsqueeze") return opset >= 13 && index == 1;
  if (op == "Expand") return index == 1;
  if (op == "Slice") return opset >= 10 && index >= 1 && index <= 4;
  if (op == "Clip") return opset >= 11 && (index == 1 || index == 2);
  for (const ReduceSpec& s : kReduceSpecs)
    if (op == s.name) return opset >= s.input_axes_since && index == 1;
  return false;
}

}  // namespace cuda

void register_cuda_kernels(KernelRegistry& r) {
  using namespace cuda;  // NOLINT: the registration table below reads better unqualified
  const struct {
    const char* name;
    int op;
    std::vector<int> versions;
  } binaries[] = {
      {"Add", ORTLITE_CUDA_ADD, {7, 13, 14}},
      {"Sub", ORTLITE_CUDA_SUB, {7, 13, 14}},
      {"Mul", ORTLITE_CUDA_MUL, {7, 13, 14}},
      {"Div", ORTLITE_CUDA_DIV, {7, 13, 14}},
      {"Pow", ORTLITE_CUDA_POW, {7, 12, 13, 15}},
      {"PRelu", ORTLITE_CUDA_PRELU, {7, 9, 16}},
      {"Equal", ORTLITE_CUDA_EQUAL, {7, 11, 13, 19}},
      {"Less", ORTLITE_CUDA_LESS, {7, 9, 13}},
      {"Greater", ORTLITE_CUDA_GREATER, {7, 9, 13}},
      {"LessOrEqual", ORTLITE_CUDA_LESS_EQUAL, {12, 16}},
      {"GreaterOrEqual", ORTLITE_CUDA_GREATER_EQUAL, {12, 16}},
      {"And", ORTLITE_CUDA_AND, {7}},
      {"Or", ORTLITE_CUDA_OR, {7}},
      {"Xor", ORTLITE_CUDA_XOR, {7}},
  };
  for (const auto& b : binaries) add(r, b.name, b.versions, factory<Binary>(b.op));
  add(r, "Max", {8, 12, 13}, factory<Variadic>(static_cast<int>(ORTLITE_CUDA_MAX)));
  add(r, "Min", {8, 12, 13}, factory<Variadic>(static_cast<int>(ORTLITE_CUDA_MIN)));
  add(r, "Sum", {8, 13}, factory<Variadic>(static_cast<int>(ORTLITE_CUDA_ADD)));

  const struct {
    const char* name;
    int op;
    std::vector<int> versions;
  } unaries[] = {
      {"Relu", ORTLITE_CUDA_RELU, {6, 13, 14}},
      {"LeakyRelu", ORTLITE_CUDA_LEAKY_RELU, {6, 16}},
      {"Sigmoid", ORTLITE_CUDA_SIGMOID, {6, 13}},
      {"Tanh", ORTLITE_CUDA_TANH, {6, 13}},
      {"Gelu", ORTLITE_CUDA_GELU, {20}},
      {"Elu", ORTLITE_CUDA_ELU, {6, 22}},
      {"Selu", ORTLITE_CUDA_SELU, {6, 22}},
      {"HardSigmoid", ORTLITE_CUDA_HARD_SIGMOID, {6, 22}},
      {"HardSwish", ORTLITE_CUDA_HARD_SWISH, {14, 22}},
      {"Softplus", ORTLITE_CUDA_SOFTPLUS, {1, 22}},
      {"Softsign", ORTLITE_CUDA_SOFTSIGN, {1, 22}},
      {"Exp", ORTLITE_CUDA_EXP, {6, 13}},
      {"Log", ORTLITE_CUDA_LOG, {6, 13}},
      {"Sqrt", ORTLITE_CUDA_SQRT, {6, 13}},
      {"Abs", ORTLITE_CUDA_ABS, {6, 13}},
      {"Neg", ORTLITE_CUDA_NEG, {6, 13}},
      {"Reciprocal", ORTLITE_CUDA_RECIPROCAL, {6, 13}},
      {"Erf", ORTLITE_CUDA_ERF, {9, 13}},
      {"Sin", ORTLITE_CUDA_SIN, {7}},
      {"Cos", ORTLITE_CUDA_COS, {7}},
      {"Floor", ORTLITE_CUDA_FLOOR, {6, 13}},
      {"Ceil", ORTLITE_CUDA_CEIL, {6, 13}},
      {"Not", ORTLITE_CUDA_NOT, {1}},
  };
  for (const auto& u : unaries) add(r, u.name, u.versions, factory<Unary>(u.op));
  add(r, "Clip", {6, 11, 12, 13}, factory<Clip>());
  add(r, "Where", {9, 16}, factory<Where>());
  add(r, "Cast", {6, 9, 13, 19, 21}, factory<Cast>());

  add(r, "Softmax", {1, 11, 13}, factory<Softmax>(false));
  add(r, "LogSoftmax", {1, 11, 13}, factory<Softmax>(true));
  add(r, "LayerNormalization", {17}, factory<LayerNorm>());
  add(r, "BatchNormalization", {7, 9, 14, 15}, factory<BatchNorm>());
  for (const ReduceSpec& s : kReduceSpecs)
    add(r, s.name, s.versions, factory<Reduce>(s.op, s.input_axes_since));
  add(r, "MaxPool", {1, 8, 10, 11, 12, 22}, factory<Pool>(true, false));
  add(r, "AveragePool", {1, 7, 10, 11, 19, 22}, factory<Pool>(false, false));
  add(r, "GlobalMaxPool", {1, 22}, factory<Pool>(true, true));
  add(r, "GlobalAveragePool", {1, 22}, factory<Pool>(false, true));

  add(r, "Transpose", {1, 13, 21}, factory<Transpose>());
  add(r, "Concat", {1, 4, 11, 13}, factory<Concat>());
  add(r, "Slice", {1, 10, 11, 13}, factory<Slice>());
  add(r, "Gather", {1, 11, 13}, factory<Gather>());
  add(r, "Expand", {8, 13}, factory<Expand>());

  add(r, "MatMul", {1, 9, 13}, factory<MatMul>());
  add(r, "Gemm", {7, 9, 11, 13}, factory<Gemm>());
  add(r, "Conv", {1, 11, 22}, factory<Conv>());

  add(r, "Reshape", {5, 13, 14, 19, 21}, factory<View>());
  add(r, "Flatten", {1, 9, 11, 13, 21}, factory<View>());
  add(r, "Squeeze", {1, 11, 13, 21}, factory<View>());
  add(r, "Unsqueeze", {1, 11, 13, 21}, factory<View>());
  add(r, "Identity", {1, 13, 14, 16, 19, 21}, factory<View>());
}

}  // namespace ortlite
