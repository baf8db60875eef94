#include "providers/shared/conv_attrs.h"

#include <string>

namespace ortlite {
namespace nn {

void ConvAttrs::load(const KernelInfo& info) {
  spatial.load(info, false);
  group = info.attr_int("group", 1);
  if (group < 1)
    info.fail(StatusCode::kInvalidGraph,
              "attribute 'group' must be >= 1, got " + std::to_string(group));
}

void ConvAttrs::check_constant_w(const KernelInfo& info, const Tensor& w) const {
  if (w.rank() < 3)
    info.fail(StatusCode::kInvalidGraph,
              "W must have rank >= 3 (M x C/group x k1 x ...), got " + shape_to_string(w.shape()));
  const size_t n = spatial.implied_rank();
  if (n != 0 && n != w.rank() - 2)
    info.fail(StatusCode::kInvalidGraph,
              "W " + shape_to_string(w.shape()) + " has " + std::to_string(w.rank() - 2) +
                  " spatial axes but the attributes imply " + std::to_string(n));
  const int64_t M = w.dim(0);
  if (M % group != 0)
    info.fail(StatusCode::kInvalidGraph,
              "W " + shape_to_string(w.shape()) + ": " + std::to_string(M) +
                  " output channels are not divisible by group " + std::to_string(group));
}

void ConvAttrs::check_inputs(const KernelContext& ctx, const Tensor& X, const Tensor& W,
                             const Tensor* B) const {
  if (X.rank() < 3)
    ctx.fail(StatusCode::kInvalidArgument,
             "X must have rank >= 3 (N x C x D1 x ...), got " + shape_to_string(X.shape()));
  if (W.rank() != X.rank())
    ctx.fail(StatusCode::kInvalidArgument, "X " + shape_to_string(X.shape()) + " and W " +
                                               shape_to_string(W.shape()) +
                                               " must have the same rank");
  if (W.dtype() != X.dtype() || (B && B->dtype() != X.dtype()))
    ctx.fail(StatusCode::kInvalidArgument,
             std::string("X, W and B must have the same element type, got X ") +
                 dtype_name(X.dtype()) + ", W " + dtype_name(W.dtype()) +
                 (B ? std::string(", B ") + dtype_name(B->dtype()) : std::string()));
  const int64_t C = X.dim(1), M = W.dim(0);
  if (C != W.dim(1) * group)
    ctx.fail(StatusCode::kInvalidArgument,
             "X " + shape_to_string(X.shape()) + " has " + std::to_string(C) + " channels but W " +
                 shape_to_string(W.shape()) + " expects " + std::to_string(W.dim(1)) +
                 " per group x group " + std::to_string(group));
  if (M % group != 0)
    ctx.fail(StatusCode::kInvalidArgument,
             "W " + shape_to_string(W.shape()) + ": " + std::to_string(M) +
                 " output channels are not divisible by group " + std::to_string(group));
  if (B && (B->rank() != 1 || B->dim(0) != M))
    ctx.fail(StatusCode::kInvalidArgument, "B " + shape_to_string(B->shape()) +
                                               " must be 1-D with " + std::to_string(M) +
                                               " elements (W " + shape_to_string(W.shape()) + ")");
}

}  // namespace nn
}  // namespace ortlite
