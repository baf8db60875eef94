// The attributes and input checks of BatchNormalization, LayerNormalization
// and InstanceNormalization, shared by the CPU and the CUDA kernels. Each provider checks
// first that it runs X's element type; these checks follow.
#pragma once

#include <cstdint>

#include "ortlite/kernel.h"

namespace ortlite {
namespace nn {

// float, double, float16 or bfloat16: the element types the normalizations take.
bool is_float_type(DataType t);

struct BatchNormAttrs {
  float epsilon = 1e-5f;
  int64_t opset = 0;
  bool spatial = true;    // opset < 9: per-channel (true) or per-element parameters
  bool training = false;  // opset 14+ training_mode = 1 (only when load allows it)
  float momentum = 0.9f;  // training mode: the running statistics' decay

  // Reads epsilon and spatial. training_mode = 1 (opset 14+) sets `training` and reads
  // momentum when `allow_training` (a provider that implements it), else fails with
  // kNotImplemented. Outside training mode the running outputs (opset 14+) fail with
  // kInvalidGraph; the training outputs of opsets 7-13 (mean, var, saved_mean, saved_var)
  // fail with kNotImplemented.
  void load(const KernelInfo& info, bool allow_training = false);

  // X must have rank >= 2 (kInvalidArgument).
  void check_x(const KernelContext& ctx, const Tensor& X) const;

  // Elements each parameter has: C, or C x D1 x ... when not spatial.
  int64_t param_count(const Tensor& X) const;

  // Parameter i (0 scale, 1 B, 2 input_mean, 3 input_var): a floating-point type (X's
  // before opset 14) and param_count(X) elements, 1-D when spatial (kInvalidArgument).
  void check_param(const KernelContext& ctx, const Tensor& X, const Tensor& p, size_t i) const;
};

struct LayerNormAttrs {
  int64_t axis = -1;
  float epsilon = 1e-5f;

  // Reads axis, epsilon and stash_type (only 1 is supported: kNotImplemented otherwise).
  void load(const KernelInfo& info);
};

// The shapes of one LayerNormalization run.
struct LayerNormDims {
  size_t axis = 0;
  int64_t outer = 1;  // rows: product of X.shape[:axis]
  int64_t norm = 1;   // elements per row: product of X.shape[axis:]
  Shape norm_shape;   // X.shape[axis:]
  Shape stat_shape;   // X.shape[:axis] then 1s (Mean, InvStdDev)
};

// Checks X, Scale and B (one element type, X of rank >= 1, axis in range, non-empty
// normalized dims; kInvalidArgument) and returns the shapes.
LayerNormDims layer_norm_dims(const KernelContext& ctx, const LayerNormAttrs& a, const Tensor& X,
                              const Tensor& S, const Tensor* B);

// Scale / B must broadcast unidirectionally to the normalized shape (kInvalidArgument
// naming `what`), unless it has exactly as many elements.
void check_norm_param(const KernelContext& ctx, const Tensor& p, const Shape& target,
                      const char* what);

// InstanceNormalization: X of rank >= 3 (check_instance_norm_x); scale and B of X's type,
// 1-D with C elements (check_instance_norm_params). kInvalidArgument.
void check_instance_norm_x(const KernelContext& ctx, const Tensor& X);
void check_instance_norm_params(const KernelContext& ctx, const Tensor& X, const Tensor& S,
                                const Tensor& B);

}  // namespace nn
}  // namespace ortlite
