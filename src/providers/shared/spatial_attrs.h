// The spatial attributes of Conv and the pooling ops (auto_pad, kernel_shape, strides,
// pads, dilations), their validation at load, and the geometry they resolve to for one
// input: what the CPU and the CUDA kernels of those ops compute their output shapes from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ortlite/kernel.h"
#include "providers/shared/shape_ops.h"

namespace ortlite {
namespace nn {

enum class AutoPad { kNotSet, kValid, kSameUpper, kSameLower };

struct SpatialAttrs {
  AutoPad auto_pad = AutoPad::kNotSet;
  std::vector<int64_t> kernel_shape;  // empty when not given (Conv infers it from W)
  std::vector<int64_t> strides;       // empty: all 1
  std::vector<int64_t> pads;          // empty: all 0 (begins then ends)
  std::vector<int64_t> dilations;     // empty: all 1

  // Reads and validates auto_pad, kernel_shape, strides, pads, dilations; throws
  // kInvalidGraph (via info.fail) on unknown auto_pad, non-positive strides / dilations /
  // kernel dims, negative pads, an odd pads length or lengths that disagree.
  void load(const KernelInfo& info, bool kernel_required);

  // Spatial rank the attributes imply (0 when none of them fixes it).
  size_t implied_rank() const;
};

// The attributes resolved for one input: per spatial dim.
struct SpatialGeometry {
  size_t rank = 0;
  std::vector<int64_t> in, out, kernel, stride, dilation, pad_begin, pad_end;
};

// Resolves the geometry of a Conv: `in` are the input spatial dims, `kernel` the kernel
// dims (from W). Fails with kInvalidArgument (via ctx.fail) when attribute lengths do not
// match the input rank or the (dilated) kernel does not fit the padded input.
SpatialGeometry conv_geometry(const KernelContext& ctx, const SpatialAttrs& a,
                              const std::vector<int64_t>& in, const std::vector<int64_t>& kernel);

// Pooling geometry (onnxruntime's rules: ceil_mode, and with ceil_mode the last window must
// start inside the input or its begin padding).
SpatialGeometry pool_geometry(const KernelContext& ctx, const SpatialAttrs& a,
                              const std::vector<int64_t>& in, bool ceil_mode);

// "[1,2,3]" for messages.
inline std::string dims_to_string(const std::vector<int64_t>& v) {
  return tensor_ops::ints_to_string(v);
}

}  // namespace nn
}  // namespace ortlite
