// numpy-style (multidirectional and unidirectional) broadcasting shape arithmetic, used by
// the CPU and the CUDA kernels alike.
#pragma once

#include <vector>

#include "ortlite/tensor.h"

namespace ortlite {

// Output shape of broadcasting a with b; throws Error(kInvalidArgument) naming `what`
// and both shapes when they are incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* what);

// Element strides of a tensor of shape `in` viewed as shape `out` (right-aligned; 0 on the
// broadcast dims). The result has out.size() entries. `in` must broadcast to `out`.
std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out);

// Whether `from` broadcasts unidirectionally to `to` (right-aligned; each dim of `from`
// equals the dim of `to` or is 1, and `from` has no more dims than `to`).
bool broadcasts_to(const Shape& from, const Shape& to);

}  // namespace ortlite
