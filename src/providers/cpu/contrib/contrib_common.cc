#include "providers/cpu/contrib/contrib_common.h"

#include <algorithm>
#include <limits>

#include "compute/fast_kernels.h"

namespace ortlite {
namespace contrib {

void check_same_type(const KernelContext& ctx, const Tensor& X,
                     std::initializer_list<std::pair<const Tensor*, const char*>> others) {
  for (const auto& o : others) {
    if (o.first && o.first->dtype() != X.dtype())
      ctx.fail(StatusCode::kInvalidArgument, std::string(o.second) + " has element type " +
                                                 dtype_name(o.first->dtype()) + ", input has " +
                                                 dtype_name(X.dtype()));
  }
}

void check_type(const KernelContext& ctx, const Tensor& t, const char* what,
                std::initializer_list<DataType> types) {
  for (DataType d : types)
    if (t.dtype() == d) return;
  std::string list;
  for (DataType d : types) list += std::string(list.empty() ? "" : ", ") + dtype_name(d);
  ctx.fail(StatusCode::kNotImplemented, std::string(what) + ": element type " +
                                            dtype_name(t.dtype()) +
                                            " is not supported (supported: " + list + ")");
}

void check_vector(const KernelContext& ctx, const Tensor& p, int64_t n, const char* what) {
  if (p.rank() != 1 || p.dim(0) != n)
    ctx.fail(StatusCode::kInvalidArgument, std::string(what) + " must be 1-D with " +
                                               std::to_string(n) + " elements, got shape " +
                                               shape_to_string(p.shape()));
}

void softmax_rows(float* x, int64_t rows, int64_t n) {
  if (n <= 0) return;
  for (int64_t r = 0; r < rows; ++r) fast::softmax(x + r * n, x + r * n, n, false);
}

}  // namespace contrib
}  // namespace ortlite
