#include "providers/shared/reduce_axes.h"

#include <algorithm>

#include "providers/shared/shape_ops.h"

namespace ortlite {
namespace reduce {

void ReduceAxesAttrs::load(const KernelInfo& info, int input_axes_since) {
  keepdims = info.attr_int("keepdims", 1) != 0;
  axes_from_input = info.opset() >= input_axes_since;
  if (axes_from_input) {
    if (info.has_attr("axes"))
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'axes' is not allowed at opset " + std::to_string(info.opset()) +
                    " (axes are input 1 since opset " + std::to_string(input_axes_since) + ")");
    noop = info.attr_int("noop_with_empty_axes", 0) != 0;
  } else {
    axes = info.attr_ints("axes");
  }
}

std::string axes_input_error(const Tensor& a) {
  if (a.dtype() != DataType::kInt64 && a.dtype() != DataType::kInt32)
    return std::string("input 'axes' must be int64, got ") + dtype_name(a.dtype());
  if (a.rank() > 1) return "input 'axes' must be 1-D, got shape " + shape_to_string(a.shape());
  return std::string();
}

std::vector<bool> reduce_mask(const KernelContext& ctx, const std::vector<int64_t>& axes,
                              const Shape& shape) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<bool> mask(static_cast<size_t>(rank), axes.empty());
  for (int64_t a : axes) {
    const int64_t lim = std::max<int64_t>(rank, 1);
    if (a < -lim || a >= lim)
      ctx.fail(StatusCode::kInvalidArgument,
               "axes value " + std::to_string(a) + " is out of range for input 'data' of rank " +
                   std::to_string(rank) + " (shape " + shape_to_string(shape) + ")");
    if (rank == 0) continue;
    const int64_t na = a < 0 ? a + rank : a;
    if (mask[static_cast<size_t>(na)])
      ctx.fail(StatusCode::kInvalidArgument, "axes " + tensor_ops::ints_to_string(axes) +
                                                 " name dim " + std::to_string(na) +
                                                 " more than once");
    mask[static_cast<size_t>(na)] = true;
  }
  return mask;
}

Shape reduced_shape(const Shape& shape, const std::vector<bool>& mask, bool keepdims) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!mask[d])
      out.push_back(shape[d]);
    else if (keepdims)
      out.push_back(1);
  }
  return out;
}

ReduceLayout make_layout(const Shape& in, const std::vector<bool>& mask) {
  ReduceLayout L;
  const size_t n = in.size();
  std::vector<int64_t> strides(n);
  int64_t stride = 1;
  for (size_t d = n; d-- > 0;) {
    strides[d] = stride;
    stride *= in[d];
  }
  int last = -1;  // kind of the previous dim of size > 1: 0 kept, 1 reduced
  for (size_t d = 0; d < n; ++d) {
    if (in[d] == 1) continue;
    const int kind = mask[d] ? 1 : 0;
    std::vector<int64_t>& dims = kind ? L.rdims : L.kdims;
    std::vector<int64_t>& st = kind ? L.rstrides : L.kstrides;
    if (kind == last) {
      dims.back() *= in[d];
      st.back() = strides[d];
    } else {
      dims.push_back(in[d]);
      st.push_back(strides[d]);
    }
    last = kind;
    (kind ? L.red_count : L.num_out) *= in[d];
  }
  L.inner_reduced = last == 1;
  return L;
}

}  // namespace reduce
}  // namespace ortlite
