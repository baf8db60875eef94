#include "providers/shared/norm_attrs.h"

#include <string>

#include "providers/shared/broadcast_shape.h"
#include "providers/shared/shape_ops.h"

namespace ortlite {
namespace nn {

bool is_float_type(DataType t) {
  return t == DataType::kFloat || t == DataType::kDouble || t == DataType::kFloat16 ||
         t == DataType::kBFloat16;
}

void BatchNormAttrs::load(const KernelInfo& info, bool allow_training) {
  epsilon = info.attr_float("epsilon", 1e-5f);
  opset = info.opset();
  if (opset >= 14 && info.attr_int("training_mode", 0) != 0) {
    if (!allow_training)
      info.fail(StatusCode::kNotImplemented,
                "training_mode = 1 is implemented by the CPU provider only");
    training = true;
    momentum = info.attr_float("momentum", 0.9f);
  } else if (opset >= 14) {
    for (size_t i = 1; i < info.num_outputs(); ++i)
      if (!info.node().outputs[i].empty())
        info.fail(StatusCode::kInvalidGraph,
                  "outputs running_mean / running_var are only produced in training mode");
  } else {
    for (size_t i = 1; i < info.num_outputs(); ++i)
      if (!info.node().outputs[i].empty())
        info.fail(StatusCode::kNotImplemented,
                  "the mean / var / saved_mean / saved_var outputs mean training mode, which "
                  "is not supported before opset 14 (training_mode = 1 from opset 14 is)");
  }
  if (opset < 9) spatial = info.attr_int("spatial", 1) != 0;
}

void BatchNormAttrs::check_x(const KernelContext& ctx, const Tensor& X) const {
  if (X.rank() < 2)
    ctx.fail(StatusCode::kInvalidArgument,
             "X must have rank >= 2 (N x C x ...), got " + shape_to_string(X.shape()));
}

int64_t BatchNormAttrs::param_count(const Tensor& X) const {
  const int64_t C = X.dim(1);
  return spatial ? C : C * tensor_ops::dims_product(X.shape(), 2, X.rank());
}

void BatchNormAttrs::check_param(const KernelContext& ctx, const Tensor& X, const Tensor& p,
                                 size_t i) const {
  static const char* const kNames[4] = {"scale", "B", "input_mean", "input_var"};
  if (!is_float_type(p.dtype()) || (opset < 14 && p.dtype() != X.dtype()))
    ctx.fail(StatusCode::kInvalidArgument, std::string("input ") + kNames[i] +
                                               " has element type " + dtype_name(p.dtype()) +
                                               ", X has " + dtype_name(X.dtype()));
  const int64_t count = param_count(X);
  if (p.numel() != count || (spatial && p.rank() != 1))
    ctx.fail(StatusCode::kInvalidArgument,
             std::string("input ") + kNames[i] + " " + shape_to_string(p.shape()) +
                 " does not match X " + shape_to_string(X.shape()) + " (expected " +
                 (spatial ? "[" + std::to_string(X.dim(1)) + "]"
                          : std::to_string(count) + " elements (C x D1 x ...)") +
                 ")");
}

void LayerNormAttrs::load(const KernelInfo& info) {
  axis = info.attr_int("axis", -1);
  epsilon = info.attr_float("epsilon", 1e-5f);
  const int64_t stash = info.attr_int("stash_type", 1);
  if (stash != 1)
    info.fail(StatusCode::kNotImplemented,
              "stash_type " + std::to_string(stash) + " is not supported (only 1: float)");
}

LayerNormDims layer_norm_dims(const KernelContext& ctx, const LayerNormAttrs& a, const Tensor& X,
                              const Tensor& S, const Tensor* B) {
  if (S.dtype() != X.dtype() || (B && B->dtype() != X.dtype()))
    ctx.fail(StatusCode::kInvalidArgument,
             std::string("X, Scale and B must have the same element type, got X ") +
                 dtype_name(X.dtype()) + ", Scale " + dtype_name(S.dtype()) +
                 (B ? std::string(", B ") + dtype_name(B->dtype()) : std::string()));
  const int64_t rank = static_cast<int64_t>(X.rank());
  if (rank == 0) ctx.fail(StatusCode::kInvalidArgument, "X must have rank >= 1, got a scalar");
  if (a.axis < -rank || a.axis >= rank)
    ctx.fail(StatusCode::kInvalidArgument, "attribute 'axis' " + std::to_string(a.axis) +
                                               " is out of range for X " +
                                               shape_to_string(X.shape()));
  LayerNormDims d;
  d.axis = static_cast<size_t>(a.axis < 0 ? a.axis + rank : a.axis);
  const auto split = X.shape().begin() + static_cast<std::ptrdiff_t>(d.axis);
  d.norm_shape.assign(split, X.shape().end());
  d.outer = tensor_ops::dims_product(X.shape(), 0, d.axis);
  d.norm = shape_size(d.norm_shape);
  if (d.norm == 0)
    ctx.fail(StatusCode::kInvalidArgument, "the normalized dims X.shape[axis:] " +
                                               shape_to_string(d.norm_shape) + " of X " +
                                               shape_to_string(X.shape()) + " are empty");
  d.stat_shape.assign(X.shape().begin(), split);
  d.stat_shape.resize(static_cast<size_t>(rank), 1);
  return d;
}

void check_norm_param(const KernelContext& ctx, const Tensor& p, const Shape& target,
                      const char* what) {
  if (p.numel() == shape_size(target)) return;
  if (!broadcasts_to(p.shape(), target))
    ctx.fail(StatusCode::kInvalidArgument,
             std::string("input ") + what + " " + shape_to_string(p.shape()) +
                 " cannot be broadcast to the normalized shape " + shape_to_string(target));
}

void check_instance_norm_x(const KernelContext& ctx, const Tensor& X) {
  if (X.rank() < 3)
    ctx.fail(StatusCode::kInvalidArgument,
             "X must have rank >= 3 (N x C x D1 x ...), got " + shape_to_string(X.shape()));
}

void check_instance_norm_params(const KernelContext& ctx, const Tensor& X, const Tensor& S,
                                const Tensor& B) {
  const int64_t C = X.dim(1);
  for (const Tensor* p : {&S, &B}) {
    if (p->dtype() != X.dtype())
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("scale and B must have X's element type ") + dtype_name(X.dtype()) +
                   ", got " + dtype_name(p->dtype()));
    if (p->rank() != 1 || p->dim(0) != C)
      ctx.fail(StatusCode::kInvalidArgument,
               std::string(p == &S ? "scale " : "B ") + shape_to_string(p->shape()) +
                   " must be 1-D with C = " + std::to_string(C) + " elements (X " +
                   shape_to_string(X.shape()) + ")");
  }
}

}  // namespace nn
}  // namespace ortlite
