#include "providers/cpu/common/elementwise.h"

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

namespace {
// Whether b broadcasts into a with a as the result.
bool broadcasts_into(const Shape& b, const Shape& a) {
  if (b.size() > a.size()) return false;
  const size_t off = a.size() - b.size();
  for (size_t i = 0; i < b.size(); ++i)
    if (b[i] != a[off + i] && b[i] != 1) return false;
  return true;
}
}  // namespace

const Shape& broadcast_ref(const KernelContext& ctx, const Shape& a, const Shape& b,
                           Shape* storage) {
  if (broadcasts_into(b, a)) return a;
  if (broadcasts_into(a, b)) return b;
  *storage = broadcast_or_fail(ctx, a, b);
  return *storage;
}

}  // namespace ew
}  // namespace ortlite
