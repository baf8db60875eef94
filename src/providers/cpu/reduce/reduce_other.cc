// ReduceProd, ReduceMax, ReduceMin, ReduceLogSum, ReduceLogSumExp.
#include "providers/cpu/reduce/reduce_impl.h"

namespace ortlite {
namespace reduce {

namespace {

template <template <typename> class OpT, bool kAllowBool>
void dispatch(const ReduceLayout& L, const Tensor& x, Tensor& y, ThreadPool* pool,
              const char* what) {
  ORTLITE_DISPATCH_NUMERIC(x.dtype(), what, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool> && !kAllowBool) {
      ORTLITE_THROW(kNotImplemented, what, ": element type bool is not supported");
    } else {
      (run_typed<OpT, T>)(L, x, y, pool);
    }
  });
}

}  // namespace

void run_other_family(ReduceKind kind, const ReduceLayout& L, const Tensor& x, Tensor& y,
                      ThreadPool* pool, const char* what) {
  switch (kind) {
    case ReduceKind::kProd:
      return dispatch<ProdOp, false>(L, x, y, pool, what);
    case ReduceKind::kMax:
      return dispatch<MaxOp, true>(L, x, y, pool, what);
    case ReduceKind::kMin:
      return dispatch<MinOp, true>(L, x, y, pool, what);
    case ReduceKind::kLogSum:
      return dispatch<LogSumOp, false>(L, x, y, pool, what);
    case ReduceKind::kLogSumExp:
      return dispatch<LogSumExpOp, false>(L, x, y, pool, what);
    default:
      ORTLITE_THROW(kFail, what, ": internal error: not a reduction of this family");
  }
}

}  // namespace reduce
}  // namespace ortlite
