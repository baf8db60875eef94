// numpy-style (multidirectional) broadcasting helpers shared by the kernels.
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

}  // namespace ortlite
