#include "ops/common/elementwise.h"

namespace ortlite {
namespace ew {

void check_same_type(const KernelContext& ctx, const Tensor& a, const Tensor& b, const char* name_a,
                     const char* name_b) {
  if (a.dtype() != b.dtype()) {
    ctx.fail(StatusCode::kInvalidArgument, std::string("inputs ") + name_a + " and " + name_b +
                                               " must have the same element type, got " +
                                               dtype_name(a.dtype()) + " and " +
                                               dtype_name(b.dtype()));
  }
}

Shape broadcast_or_fail(const KernelContext& ctx, const Shape& a, const Shape& b) {
  if (a == b) return a;
  try {
    return broadcast_shapes(a, b, "");
  } catch (const Error&) {
    // The node's label is only built on failure: it costs more than the check itself.
    const std::string label = ctx.node().label();
    return broadcast_shapes(a, b, label.c_str());
  }
}

}  // namespace ew
}  // namespace ortlite
