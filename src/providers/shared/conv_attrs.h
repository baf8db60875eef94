// Conv's attributes (the spatial ones and group) and the checks of its inputs, shared by
// the CPU Conv / FusedConv kernels and the CUDA Conv kernel.
#pragma once

#include <cstdint>

#include "ortlite/kernel.h"
#include "providers/shared/spatial_attrs.h"

namespace ortlite {
namespace nn {

struct ConvAttrs {
  SpatialAttrs spatial;
  int64_t group = 1;

  // Reads the spatial attributes (kernel_shape optional) and group; kInvalidGraph when
  // group < 1 or a spatial attribute is invalid.
  void load(const KernelInfo& info);

  // Checks a constant W against the attributes at load: rank >= 3, as many spatial axes as
  // the attributes imply, output channels divisible by group (kInvalidGraph).
  void check_constant_w(const KernelInfo& info, const Tensor& w) const;

  // Checks the inputs of one run: X of rank >= 3, W of X's rank, X, W and B of one element
  // type, X's channels = W.dim(1) * group, W's output channels divisible by group, B 1-D
  // with one value per output channel (kInvalidArgument).
  void check_inputs(const KernelContext& ctx, const Tensor& X, const Tensor& W,
                    const Tensor* B) const;
};

}  // namespace nn
}  // namespace ortlite
