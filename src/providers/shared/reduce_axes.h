// The axes of the Reduce* ops: the `axes` attribute (before the opset that made them an
// input) or input, keepdims and noop_with_empty_axes, the reduced dims and output shape
// they give, and the merged-dims layout a reduction runs over. Shared by the CPU and the
// CUDA Reduce* kernels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ortlite/kernel.h"

namespace ortlite {
namespace reduce {

struct ReduceAxesAttrs {
  bool keepdims = true;
  bool axes_from_input = false;  // info.opset() >= input_axes_since
  bool noop = false;             // noop_with_empty_axes (axes from the input only)
  std::vector<int64_t> axes;     // the attribute's (axes from the attribute only)

  // Reads keepdims and, by opset, axes or noop_with_empty_axes; an `axes` attribute where
  // axes are an input is kInvalidGraph.
  void load(const KernelInfo& info, int input_axes_since);
};

// What is wrong with an axes input tensor (not int64 / int32, not 1-D), or "" when nothing.
std::string axes_input_error(const Tensor& a);

// Which dims of `shape` the axes reduce (all when axes is empty). Axes may be negative;
// out-of-range or repeated axes fail with kInvalidArgument.
std::vector<bool> reduce_mask(const KernelContext& ctx, const std::vector<int64_t>& axes,
                              const Shape& shape);

// The output shape: the kept dims, and 1 for each reduced dim when keepdims.
Shape reduced_shape(const Shape& shape, const std::vector<bool>& mask, bool keepdims);

struct ReduceLayout {
  int64_t num_out = 1;    // outputs (product of the kept dims)
  int64_t red_count = 1;  // input elements reduced into each output
  // Merged dims of size > 1, outermost first, with their input strides (elements).
  std::vector<int64_t> kdims, kstrides;  // kept, in output order
  std::vector<int64_t> rdims, rstrides;  // reduced
  bool inner_reduced = false;            // innermost merged dim is reduced (row mode)
};

// `reduce_mask[d]` tells whether input dim d is reduced. Input must be non-empty.
ReduceLayout make_layout(const Shape& in, const std::vector<bool>& reduce_mask);

}  // namespace reduce
}  // namespace ortlite
