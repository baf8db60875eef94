#include "providers/shared/pool_attrs.h"

#include <string>

namespace ortlite {
namespace nn {

void PoolAttrs::load(const KernelInfo& info, bool is_max) {
  const int64_t opset = info.opset();
  spatial.load(info, true);
  // dilations: MaxPool 10+, AveragePool 19+; ceil_mode: 10+ for both.
  if ((is_max && opset < 10) || (!is_max && opset < 19)) spatial.dilations.clear();
  ceil_mode = opset >= 10 && info.attr_int("ceil_mode", 0) != 0;
  if (!is_max) count_include_pad = opset >= 7 && info.attr_int("count_include_pad", 0) != 0;
  if (is_max && opset >= 8) {
    storage_order = info.attr_int("storage_order", 0);
    if (storage_order != 0 && storage_order != 1)
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'storage_order' must be 0 or 1, got " + std::to_string(storage_order));
  }
  if (spatial.auto_pad == AutoPad::kNotSet && !spatial.pads.empty()) {
    const size_t n = spatial.kernel_shape.size();
    for (size_t i = 0; i < 2 * n; ++i)
      if (spatial.pads[i] >= spatial.kernel_shape[i % n])
        info.fail(StatusCode::kInvalidGraph, "attribute 'pads' " + dims_to_string(spatial.pads) +
                                                 " must be smaller than the kernel " +
                                                 dims_to_string(spatial.kernel_shape));
  }
  if (!is_max && info.num_outputs() > 1)
    info.fail(StatusCode::kInvalidGraph, "AveragePool has a single output");
}

void check_pool_input(const KernelContext& ctx, const Tensor& X, bool global) {
  if (X.rank() < 3 || (!global && X.rank() > 5))
    ctx.fail(StatusCode::kInvalidArgument,
             std::string("X must be N x C x D1 x ... with 1 to 3 spatial dims, got ") +
                 shape_to_string(X.shape()));
}

}  // namespace nn
}  // namespace ortlite
