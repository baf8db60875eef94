#include "providers/shared/shape_ops.h"

#include <algorithm>
#include <sstream>

namespace ortlite {
namespace tensor_ops {

std::vector<int64_t> dense_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i] > 0 ? shape[i] : 1;
  }
  return strides;
}

std::string ints_to_string(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << ']';
  return os.str();
}

std::vector<int64_t> read_int_list(const KernelContext& ctx, const Tensor& t, const char* what,
                                   bool allow_scalar) {
  if (t.dtype() != DataType::kInt64 && t.dtype() != DataType::kInt32) {
    ctx.fail(
        StatusCode::kInvalidArgument,
        std::string("input '") + what + "' must be int64 or int32, got " + dtype_name(t.dtype()));
  }
  if (!(t.rank() == 1 || (allow_scalar && t.rank() == 0))) {
    ctx.fail(StatusCode::kInvalidArgument, std::string("input '") + what + "' must be " +
                                               (allow_scalar ? "a scalar or " : "") +
                                               "1-D, got shape " + shape_to_string(t.shape()));
  }
  return tensor_to_int64s(t);
}

std::vector<int64_t> normalize_axes(const KernelContext& ctx, const std::vector<int64_t>& axes,
                                    int64_t rank, const char* what, bool allow_duplicates) {
  std::vector<int64_t> out;
  out.reserve(axes.size());
  std::vector<char> seen(static_cast<size_t>(std::max<int64_t>(rank, 0)), 0);
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("'") + what + "' value " + std::to_string(a) + " is out of range [" +
                   std::to_string(-rank) + ", " + std::to_string(rank - 1) + "] (" + what + " = " +
                   ints_to_string(axes) + ")");
    }
    const int64_t n = a < 0 ? a + rank : a;
    if (seen[static_cast<size_t>(n)] && !allow_duplicates) {
      ctx.fail(StatusCode::kInvalidArgument, std::string("'") + what + "' has a repeated axis " +
                                                 std::to_string(a) + " (" + what + " = " +
                                                 ints_to_string(axes) + ")");
    }
    seen[static_cast<size_t>(n)] = 1;
    out.push_back(n);
  }
  return out;
}

int64_t dims_product(const Shape& shape, size_t begin, size_t end) {
  return shape_size(Shape(shape.begin() + begin, shape.begin() + end));
}

}  // namespace tensor_ops
}  // namespace ortlite
