// The Reduce* kernels: ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2
// ReduceLogSum ReduceLogSumExp ReduceSumSquare.
//
// Axes: the `axes` attribute before opset 13 (ReduceSum) / 18 (the others), the optional
// second input from then on; `noop_with_empty_axes` from that opset too. Empty axes reduce
// every dim (or, with noop_with_empty_axes=1, copy the input). Axes may be negative;
// out-of-range or repeated axes are InvalidArgument errors.
#include <string>
#include <vector>

#include "providers/cpu/reduce/reduce_impl.h"
#include "providers/cpu/reduce/reduce_kernels.h"
#include "providers/cpu/tensor/tensor_kernels.h"

namespace ortlite {
namespace reduce {

void run_reduction(ReduceKind kind, const ReduceLayout& layout, const Tensor& x, Tensor& y,
                   ThreadPool* pool, const char* what) {
  switch (kind) {
    case ReduceKind::kSum:
    case ReduceKind::kMean:
    case ReduceKind::kSumSquare:
    case ReduceKind::kL1:
    case ReduceKind::kL2:
      return run_sum_family(kind, layout, x, y, pool, what);
    default:
      return run_other_family(kind, layout, x, y, pool, what);
  }
}

namespace {

bool is_supported_type(DataType t, ReduceKind kind, int64_t opset) {
  switch (t) {
    case DataType::kFloat:
    case DataType::kDouble:
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
    case DataType::kUInt8:
    case DataType::kUInt16:
    case DataType::kUInt32:
    case DataType::kUInt64:
      return true;
    case DataType::kBool:
      return (kind == ReduceKind::kMax || kind == ReduceKind::kMin) && opset >= 20;
    default:
      return false;
  }
}

class ReduceKernel : public Kernel {
 public:
  ReduceKernel(const KernelInfo& info, ReduceKind kind, int input_axes_since)
      : kind_(kind), opset_(info.opset()) {
    attrs_.load(info, input_axes_since);
    if (attrs_.axes_from_input) {
      if (info.num_inputs() > 2)
        info.fail(StatusCode::kInvalidGraph, "expects at most 2 inputs (data, axes), got " +
                                                 std::to_string(info.num_inputs()));
      if (const Tensor* a = info.constant_input(1)) {
        const std::string bad = axes_input_error(*a);
        if (!bad.empty()) info.fail(StatusCode::kInvalidGraph, bad);
        const_axes_ = tensor_to_int64s(*a);
        have_const_axes_ = true;
      }
    } else {
      if (info.num_inputs() > 1)
        info.fail(StatusCode::kInvalidGraph,
                  "expects 1 input at opset " + std::to_string(info.opset()) + ", got " +
                      std::to_string(info.num_inputs()) + " (axes as an input needs opset " +
                      std::to_string(input_axes_since) + ")");
      const_axes_ = attrs_.axes;
      have_const_axes_ = true;
    }
    if (info.num_inputs() < 1 || !info.has_input(0))
      info.fail(StatusCode::kInvalidGraph, "input 'data' is missing");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    if (!is_supported_type(x.dtype(), kind_, opset_))
      ctx.fail(StatusCode::kNotImplemented,
               std::string("input 'data' element type ") + dtype_name(x.dtype()) +
                   " is not supported" +
                   (x.dtype() == DataType::kBool &&
                            (kind_ == ReduceKind::kMax || kind_ == ReduceKind::kMin)
                        ? " before opset 20"
                        : ""));
    std::vector<int64_t> axes;
    if (have_const_axes_) {
      axes = const_axes_;
    } else if (const Tensor* a = ctx.input(1)) {
      const std::string bad = axes_input_error(*a);
      if (!bad.empty()) ctx.fail(StatusCode::kInvalidArgument, bad);
      axes = tensor_to_int64s(*a);
    }
    if (axes.empty() && attrs_.noop) {
      Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
      tensor_ops::parallel_copy(x.dtype(), x.raw_data(), y.raw_data(), x.numel(),
                                ctx.thread_pool());
      return;
    }
    const std::vector<bool> mask = reduce_mask(ctx, axes, x.shape());
    const Shape out_shape = reduced_shape(x.shape(), mask, attrs_.keepdims);
    Tensor& y = ctx.allocate_output(0, x.dtype(), out_shape);
    ReduceLayout layout;
    if (x.numel() > 0) {
      layout = make_layout(x.shape(), mask);
    } else {
      layout.num_out = y.numel();
    }
    run_reduction(kind_, layout, x, y, ctx.thread_pool(), ctx.node().op_type.c_str());
  }

 private:
  ReduceKind kind_;
  int64_t opset_;
  ReduceAxesAttrs attrs_;
  bool have_const_axes_ = false;
  std::vector<int64_t> const_axes_;
};

struct OpSpec {
  const char* name;
  ReduceKind kind;
  std::vector<int> versions;
  int input_axes_since;
};

}  // namespace

void register_reduce_ops(KernelRegistry& r) {
  const OpSpec specs[] = {
      {"ReduceSum", ReduceKind::kSum, {1, 11, 13}, 13},
      {"ReduceMean", ReduceKind::kMean, {1, 11, 13, 18}, 18},
      {"ReduceMax", ReduceKind::kMax, {1, 11, 12, 13, 18, 20}, 18},
      {"ReduceMin", ReduceKind::kMin, {1, 11, 12, 13, 18, 20}, 18},
      {"ReduceProd", ReduceKind::kProd, {1, 11, 13, 18}, 18},
      {"ReduceL1", ReduceKind::kL1, {1, 11, 13, 18}, 18},
      {"ReduceL2", ReduceKind::kL2, {1, 11, 13, 18}, 18},
      {"ReduceLogSum", ReduceKind::kLogSum, {1, 11, 13, 18}, 18},
      {"ReduceLogSumExp", ReduceKind::kLogSumExp, {1, 11, 13, 18}, 18},
      {"ReduceSumSquare", ReduceKind::kSumSquare, {1, 11, 13, 18}, 18},
  };
  for (const OpSpec& s : specs) {
    const ReduceKind kind = s.kind;
    const int since = s.input_axes_since;
    r.add_versions(s.name, s.versions,
                   [kind, since](const KernelInfo& info) -> std::unique_ptr<Kernel> {
                     return std::make_unique<ReduceKernel>(info, kind, since);
                   });
  }
}

}  // namespace reduce
}  // namespace ortlite
