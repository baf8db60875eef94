// The additive reductions: ReduceSum, ReduceMean, ReduceSumSquare, ReduceL1, ReduceL2.
#include "providers/cpu/reduce/reduce_impl.h"

namespace ortlite {
namespace reduce {

namespace {

template <template <typename> class OpT>
void dispatch(const ReduceLayout& L, const Tensor& x, Tensor& y, ThreadPool* pool,
              const char* what) {
  ORTLITE_DISPATCH_NUMERIC(x.dtype(), what, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      ORTLITE_THROW(kNotImplemented, what, ": element type bool is not supported");
    } else {
      (run_typed<OpT, T>)(L, x, y, pool);
    }
  });
}

}  // namespace

void run_sum_family(ReduceKind kind, const ReduceLayout& L, const Tensor& x, Tensor& y,
                    ThreadPool* pool, const char* what) {
  switch (kind) {
    case ReduceKind::kSum:
      return dispatch<SumOp>(L, x, y, pool, what);
    case ReduceKind::kMean:
      return dispatch<MeanOp>(L, x, y, pool, what);
    case ReduceKind::kSumSquare:
      return dispatch<SumSquareOp>(L, x, y, pool, what);
    case ReduceKind::kL1:
      return dispatch<L1Op>(L, x, y, pool, what);
    case ReduceKind::kL2:
      return dispatch<L2Op>(L, x, y, pool, what);
    default:
      ORTLITE_THROW(kFail, what, ": internal error: not an additive reduction");
  }
}

}  // namespace reduce
}  // namespace ortlite
