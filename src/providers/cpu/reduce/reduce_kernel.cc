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
    keepdims_ = info.attr_int("keepdims", 1) != 0;
    axes_from_input_ = info.opset() >= input_axes_since;
    if (axes_from_input_) {
      if (info.has_attr("axes"))
        info.fail(StatusCode::kInvalidGraph,
                  "attribute 'axes' is not allowed at opset " + std::to_string(info.opset()) +
                      " (axes are input 1 since opset " + std::to_string(input_axes_since) + ")");
      if (info.num_inputs() > 2)
        info.fail(StatusCode::kInvalidGraph, "expects at most 2 inputs (data, axes), got " +
                                                 std::to_string(info.num_inputs()));
      noop_ = info.attr_int("noop_with_empty_axes", 0) != 0;
      if (const Tensor* a = info.constant_input(1)) {
        const_axes_ = read_axes_tensor(
            *a, [&](const std::string& m) { info.fail(StatusCode::kInvalidGraph, m); });
        have_const_axes_ = true;
      }
    } else {
      if (info.num_inputs() > 1)
        info.fail(StatusCode::kInvalidGraph,
                  "expects 1 input at opset " + std::to_string(info.opset()) + ", got " +
                      std::to_string(info.num_inputs()) + " (axes as an input needs opset " +
                      std::to_string(input_axes_since) + ")");
      const_axes_ = info.attr_ints("axes");
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
      axes = read_axes_tensor(
          *a, [&](const std::string& m) { ctx.fail(StatusCode::kInvalidArgument, m); });
    }
    const int64_t rank = static_cast<int64_t>(x.rank());
    if (axes.empty() && noop_) {
      Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
      tensor_ops::parallel_copy(x.dtype(), x.raw_data(), y.raw_data(), x.numel(),
                                ctx.thread_pool());
      return;
    }
    std::vector<bool> mask(static_cast<size_t>(rank), axes.empty());
    for (int64_t a : axes) {
      const int64_t lim = std::max<int64_t>(rank, 1);
      if (a < -lim || a >= lim)
        ctx.fail(StatusCode::kInvalidArgument,
                 "axes value " + std::to_string(a) + " is out of range for input 'data' of rank " +
                     std::to_string(rank) + " (shape " + shape_to_string(x.shape()) + ")");
      if (rank == 0) continue;
      const int64_t na = a < 0 ? a + rank : a;
      if (mask[static_cast<size_t>(na)])
        ctx.fail(StatusCode::kInvalidArgument, "axes " + tensor_ops::ints_to_string(axes) +
                                                   " name dim " + std::to_string(na) +
                                                   " more than once");
      mask[static_cast<size_t>(na)] = true;
    }
    Shape out_shape;
    for (int64_t d = 0; d < rank; ++d) {
      if (!mask[static_cast<size_t>(d)])
        out_shape.push_back(x.dim(static_cast<size_t>(d)));
      else if (keepdims_)
        out_shape.push_back(1);
    }
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
  template <typename Fail>
  static std::vector<int64_t> read_axes_tensor(const Tensor& a, const Fail& fail) {
    if (a.dtype() != DataType::kInt64 && a.dtype() != DataType::kInt32)
      fail(std::string("input 'axes' must be int64, got ") + dtype_name(a.dtype()));
    if (a.rank() > 1) fail("input 'axes' must be 1-D, got shape " + shape_to_string(a.shape()));
    return tensor_to_int64s(a);
  }

  ReduceKind kind_;
  int64_t opset_;
  bool keepdims_ = true;
  bool axes_from_input_ = false;
  bool noop_ = false;
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
    r.add_versions(
        s.name, s.versions,
        [kind, since](const KernelInfo& info) -> std::unique_ptr<Kernel> {
          return std::make_unique<ReduceKernel>(info, kind, since);
        },
        kTensorMaxOpset);
  }
}

}  // namespace reduce
}  // namespace ortlite
