#include "providers/shared/transpose_slice.h"

#include <algorithm>
#include <string>

#include "providers/shared/shape_ops.h"

namespace ortlite {
namespace tensor_ops {

void TransposeAttrs::load(const KernelInfo& info) {
  if (!info.has_attr("perm")) return;
  has_perm = true;
  perm = info.attr_ints("perm");
  std::vector<char> seen(perm.size(), 0);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(perm.size()) || seen[static_cast<size_t>(p)])
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'perm' " + ints_to_string(perm) + " is not a permutation");
    seen[static_cast<size_t>(p)] = 1;
  }
}

std::vector<int64_t> TransposeAttrs::resolve(const KernelContext& ctx, const Shape& shape) const {
  const size_t rank = shape.size();
  if (has_perm) {
    if (perm.size() != rank)
      ctx.fail(StatusCode::kInvalidArgument,
               "attribute 'perm' " + ints_to_string(perm) + " has " + std::to_string(perm.size()) +
                   " entries but the input has shape " + shape_to_string(shape));
    return perm;
  }
  std::vector<int64_t> reversed(rank);
  for (size_t i = 0; i < rank; ++i) reversed[i] = static_cast<int64_t>(rank - 1 - i);
  return reversed;
}

StridedView transpose_view(const Shape& shape, const std::vector<int64_t>& perm) {
  const std::vector<int64_t> in_strides = dense_strides(shape);
  StridedView v;
  v.shape.resize(perm.size());
  v.strides.resize(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    v.shape[i] = shape[static_cast<size_t>(perm[i])];
    v.strides[i] = in_strides[static_cast<size_t>(perm[i])];
  }
  return v;
}

void SliceAttrs::load(const KernelInfo& info) {
  if (!info.has_attr("starts") || !info.has_attr("ends"))
    info.fail(StatusCode::kInvalidGraph, "missing attribute 'starts' or 'ends'");
  starts = info.attr_ints("starts");
  ends = info.attr_ints("ends");
  has_axes = info.has_attr("axes");
  axes = info.attr_ints("axes");
}

StridedView slice_view(const KernelContext& ctx, const Shape& in,
                       const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                       std::vector<int64_t> axes, bool has_axes, std::vector<int64_t> steps,
                       bool has_steps) {
  const int64_t rank = static_cast<int64_t>(in.size());
  const size_t n = starts.size();
  if (ends.size() != n)
    ctx.fail(StatusCode::kInvalidArgument, "'starts' " + ints_to_string(starts) + " and 'ends' " +
                                               ints_to_string(ends) + " differ in length");
  if (has_axes && axes.size() != n)
    ctx.fail(StatusCode::kInvalidArgument, "'axes' " + ints_to_string(axes) +
                                               " must have as many entries as 'starts' " +
                                               ints_to_string(starts));
  if (has_steps && steps.size() != n)
    ctx.fail(StatusCode::kInvalidArgument, "'steps' " + ints_to_string(steps) +
                                               " must have as many entries as 'starts' " +
                                               ints_to_string(starts));
  if (!has_axes) {
    if (static_cast<int64_t>(n) > rank)
      ctx.fail(StatusCode::kInvalidArgument, "'starts' " + ints_to_string(starts) +
                                                 " has more entries than the input rank " +
                                                 std::to_string(rank));
    axes.resize(n);
    for (size_t i = 0; i < n; ++i) axes[i] = static_cast<int64_t>(i);
  }
  if (!has_steps) steps.assign(n, 1);
  const std::vector<int64_t> norm = normalize_axes(ctx, axes, rank, "axes");

  const std::vector<int64_t> in_strides = dense_strides(in);
  StridedView v;
  v.shape = in;
  v.strides = in_strides;
  for (size_t i = 0; i < n; ++i) {
    const size_t a = static_cast<size_t>(norm[i]);
    const int64_t dim = in[a];
    const int64_t step = steps[i];
    if (step == 0)
      ctx.fail(StatusCode::kInvalidArgument,
               "'steps' " + ints_to_string(steps) + " has a 0 (axis " + std::to_string(a) + ")");
    int64_t start = starts[i];
    int64_t end = ends[i];
    if (start < 0) start += dim;  // no overflow: dim >= 0
    if (end < 0) end += dim;
    int64_t count = 0;
    if (step > 0) {
      start = std::min(std::max<int64_t>(start, 0), dim);
      end = std::min(std::max<int64_t>(end, 0), dim);
      if (end > start) count = 1 + (end - start - 1) / step;
    } else {
      start = std::min(std::max<int64_t>(start, 0), dim - 1);
      end = std::min(std::max<int64_t>(end, -1), dim - 1);
      if (start > end) {
        const uint64_t mag = static_cast<uint64_t>(-(step + 1)) + 1;  // |step| without overflow
        count = 1 + static_cast<int64_t>(static_cast<uint64_t>(start - end - 1) / mag);
      }
    }
    v.shape[a] = count;
    if (count > 0) v.offset += start * in_strides[a];
    // The stride of the view: step * stride. |step| * stride can only overflow when at
    // most one element is taken, where the stride does not matter.
    v.strides[a] = count > 1 ? step * in_strides[a] : 0;
  }
  return v;
}

}  // namespace tensor_ops
}  // namespace ortlite
