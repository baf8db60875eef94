// Variadic elementwise ops with multidirectional broadcasting over all inputs:
// Min Max Sum Mean. The result is folded into the output: y = op(x0, x1), then
// y = op(y, xk). Min/Max propagate NaN (like onnxruntime).
#include "compute/vectorize.h"  // first: compile options for the loops below

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "providers/cpu/math/math_kernels.h"

namespace ortlite {
namespace {

struct MaxOp {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      // a >= b ? a : b with NaN from either input, as a max instruction and a select: the
      // form `(a >= b || a != a) ? a : b` left the scalar loops (the last elements of a
      // span, every element of short broadcast spans) a branch an element, mispredicted on
      // random data (Max of [R, 1] and [R, 12]: 0.5 of onnxruntime's speed).
      const C m = b > a ? b : a;  // a when either is NaN
      return b != b ? b : m;
    } else {
      return a >= b ? a : b;
    }
  }
};

struct MinOp {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      const C m = b < a ? b : a;  // as MaxOp
      return b != b ? b : m;
    } else {
      return a <= b ? a : b;
    }
  }
};

struct SumOp {
  template <typename C>
  C operator()(C a, C b) const {
    return ew::add(a, b);
  }
};

template <typename Op, unsigned Types, bool kMean = false>
class VariadicKernel : public Kernel {
 public:
  explicit VariadicKernel(const KernelInfo& info) {
    if (info.num_inputs() < 1) info.fail(StatusCode::kInvalidGraph, "needs at least one input");
  }

  void compute(KernelContext& ctx) const override {
    const size_t n = ctx.num_inputs();
    if (n < 1) ctx.fail(StatusCode::kInvalidArgument, "needs at least one input");
    std::vector<const Tensor*> ins(n);
    for (size_t i = 0; i < n; ++i) ins[i] = &ctx.required_input(i);
    Shape out = ins[0]->shape();
    for (size_t i = 1; i < n; ++i) {
      if (ins[i]->dtype() != ins[0]->dtype()) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "all inputs must have the same element type, got " +
                     std::string(dtype_name(ins[0]->dtype())) + " for input 0 and " +
                     dtype_name(ins[i]->dtype()) + " for input " + std::to_string(i));
      }
      out = ew::broadcast_or_fail(ctx, out, ins[i]->shape());
    }
    Tensor& y = ctx.allocate_output(0, ins[0]->dtype(), out);
    ThreadPool* pool = ctx.thread_pool();
    const Op op;
    ew::dispatch<Types>(y.dtype(), ctx, ctx.node().op_type.c_str(), [&](auto tag) {
      using T = decltype(tag);
      T* py = y.data<T>();
      if (n == 1) {
        const T* px = ins[0]->data<T>();
        std::copy(px, px + y.numel(), py);
        return;
      }
      {
        const ew::BroadcastPlan<2> plan =
            ew::make_broadcast_plan<2>(out, {&ins[0]->shape(), &ins[1]->shape()});
        ew::run_binary(pool, plan, ins[0]->data<T>(), ins[1]->data<T>(), py, 1.0, op);
      }
      for (size_t i = 2; i < n; ++i) {
        const ew::BroadcastPlan<2> plan = ew::make_broadcast_plan<2>(out, {&out, &ins[i]->shape()});
        ew::run_binary(pool, plan, static_cast<const T*>(py), ins[i]->data<T>(), py, 1.0, op);
      }
      if constexpr (kMean) {
        const double count = static_cast<double>(n);
        ew::run_unary(pool, static_cast<const T*>(py), py, y.numel(), 1.0, [count](auto v) {
          using C = decltype(v);
          return static_cast<C>(v / static_cast<C>(count));
        });
      }
    });
  }
};

}  // namespace

void register_variadic_kernels(KernelRegistry& r) {
  r.add_versions("Max", {6, 8, 12, 13}, make_factory<VariadicKernel<MaxOp, ew::kTNumeric>>());
  r.add_versions("Min", {6, 8, 12, 13}, make_factory<VariadicKernel<MinOp, ew::kTNumeric>>());
  r.add_versions("Sum", {6, 8, 13}, make_factory<VariadicKernel<SumOp, ew::kTFloats>>());
  r.add_versions("Mean", {6, 8, 13}, make_factory<VariadicKernel<SumOp, ew::kTFloats, true>>());
}

}  // namespace ortlite
