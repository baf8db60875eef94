// Shape and integer-list helpers of the kernels of both providers: dense strides, dim
// products, reading a 1-D int tensor (shapes, axes, starts / ends), normalizing axes, and
// the "[1,2,3]" form used in messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ortlite/kernel.h"

namespace ortlite {
namespace tensor_ops {

// Element strides of a dense row-major tensor of `shape`.
std::vector<int64_t> dense_strides(const Shape& shape);

// Product of dims [begin, end) of shape (checked: throws on overflow).
int64_t dims_product(const Shape& shape, size_t begin, size_t end);

// "[1,2,3]" for messages.
std::string ints_to_string(const std::vector<int64_t>& v);

// Reads a 1-D (or scalar when allow_scalar) int32/int64 tensor named `what` of node `ctx`,
// failing with kInvalidArgument naming it otherwise.
std::vector<int64_t> read_int_list(const KernelContext& ctx, const Tensor& t, const char* what,
                                   bool allow_scalar = false);

// Normalizes axes into [0, rank): fails naming `what` and the values when one is out of
// range, or, unless allow_duplicates, repeated.
std::vector<int64_t> normalize_axes(const KernelContext& ctx, const std::vector<int64_t>& axes,
                                    int64_t rank, const char* what, bool allow_duplicates = false);

}  // namespace tensor_ops
}  // namespace ortlite
