// Transpose's `perm` and Slice's starts / ends / axes / steps: their validation and the
// strided view of the input they select (shape, element strides, element offset), shared
// by the CPU and the CUDA kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "ortlite/kernel.h"

namespace ortlite {
namespace tensor_ops {

// A view of a dense input: output shape, the input's element stride per output dim, and
// the element offset of the output's first element.
struct StridedView {
  Shape shape;
  std::vector<int64_t> strides;
  int64_t offset = 0;
};

struct TransposeAttrs {
  bool has_perm = false;
  std::vector<int64_t> perm;

  // Reads `perm` when given; one that is not a permutation is kInvalidArgument.
  void load(const KernelInfo& info);

  // The permutation for an input of `shape` (reversed dims without `perm`); a `perm` of
  // another length is kInvalidArgument.
  std::vector<int64_t> resolve(const KernelContext& ctx, const Shape& shape) const;
};

// The transposed view of an input of `shape` by `perm`.
StridedView transpose_view(const Shape& shape, const std::vector<int64_t>& perm);

// Slice's starts / ends / axes as attributes (opset < 10; read only then).
struct SliceAttrs {
  std::vector<int64_t> starts, ends, axes;
  bool has_axes = false;

  void load(const KernelInfo& info);
};

// The sliced view of an input of `shape`. `axes` / `steps` are used when has_axes /
// has_steps; lengths that disagree, axes out of range or repeated, and a step of 0 are
// kInvalidArgument. Indices are clamped as the ONNX specification says.
StridedView slice_view(const KernelContext& ctx, const Shape& shape,
                       const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                       std::vector<int64_t> axes, bool has_axes, std::vector<int64_t> steps,
                       bool has_steps);

}  // namespace tensor_ops
}  // namespace ortlite
