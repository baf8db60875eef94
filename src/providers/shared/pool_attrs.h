// The attributes of MaxPool and AveragePool by opset (dilations, ceil_mode,
// count_include_pad, storage_order) and the check of their input, shared by the CPU and
// the CUDA pooling kernels.
#pragma once

#include <cstdint>

#include "ortlite/kernel.h"
#include "providers/shared/spatial_attrs.h"

namespace ortlite {
namespace nn {

struct PoolAttrs {
  SpatialAttrs spatial;
  bool ceil_mode = false;
  bool count_include_pad = false;  // AveragePool 7+
  int64_t storage_order = 0;       // MaxPool 8+: 0 row-major, 1 column-major Indices

  // Reads the attributes the op has at info.opset() (kernel_shape required; dilations
  // MaxPool 10+ / AveragePool 19+, ceil_mode 10+) and fails with kInvalidGraph on invalid
  // ones: a storage_order other than 0 / 1, explicit pads not smaller than the kernel, or
  // a second output of AveragePool.
  void load(const KernelInfo& info, bool is_max);
};

// X must be N x C x D1 x ...; with 1 to 3 spatial dims unless global (kInvalidArgument).
void check_pool_input(const KernelContext& ctx, const Tensor& X, bool global);

}  // namespace nn
}  // namespace ortlite
