// Shared base of the CUDA kernel files (src/providers/cuda/kernels_*.cc): type predicates, the
// placement check a CUDA factory runs before the kernel is built, the registration helper,
// and CudaKernel, the base class with the host/device input checks.
//
// Every device input must already be on the stream's device; the inputs named by
// input_on_host (shapes, axes, starts / ends, Clip bounds) must be CPU tensors. Attribute
// parsing and the checks both providers make live in src/providers/shared, so errors are
// the CPU kernels' of the same ops.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ortlite/kernel.h"
#include "providers/cuda/provider.h"
#include "providers/shared/broadcast_shape.h"
#include "providers/shared/conv_attrs.h"
#include "providers/shared/norm_attrs.h"
#include "providers/shared/pool_attrs.h"
#include "providers/shared/reduce_axes.h"
#include "providers/shared/shape_ops.h"
#include "providers/shared/transpose_slice.h"

namespace ortlite {
namespace cuda {
namespace kernels_detail {

using tensor_ops::ints_to_string;

inline int code(DataType t) {
  return static_cast<int>(t);
}

inline bool is_float(DataType t) {
  return t == DataType::kFloat || t == DataType::kDouble || t == DataType::kFloat16 ||
         t == DataType::kBFloat16;
}

// Types the arithmetic launchers handle.
inline bool is_arith(DataType t) {
  return is_float(t) || t == DataType::kInt8 || t == DataType::kUInt8 || t == DataType::kInt32 ||
         t == DataType::kInt64;
}

inline bool is_fixed_size(DataType t) {
  return t != DataType::kUndefined && t != DataType::kString && dtype_size(t) > 0;
}

inline bool in(const std::string& op, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (op == n) return true;
  return false;
}

// Whether the CUDA kernel of `info`'s op runs device input i of element type t (the same
// limits its compute() enforces with need()).
inline bool device_type_ok(const KernelInfo& info, size_t i, DataType t) {
  const std::string& op = info.op_type();
  if (in(op, {"Transpose", "Concat", "Slice", "Expand", "Reshape", "Flatten", "Squeeze",
              "Unsqueeze", "Identity"}))
    return is_fixed_size(t);
  if (op == "Gather")
    return i == 0 ? is_fixed_size(t) : (t == DataType::kInt32 || t == DataType::kInt64);
  if (op == "Where") return i == 0 ? t == DataType::kBool : is_fixed_size(t);
  if (op == "Cast")
    return t != DataType::kString && static_cast<int>(t) <= 16 && dtype_supported(t);
  if (in(op, {"And", "Or", "Xor", "Not"})) return t == DataType::kBool;
  if (op == "Equal") return is_arith(t) || t == DataType::kBool;
  if (in(op, {"Add", "Sub", "Mul", "Div", "PRelu", "Max", "Min", "Sum", "Less", "Greater",
              "LessOrEqual", "GreaterOrEqual"}))
    return is_arith(t);
  if (op == "Conv")
    return t == DataType::kFloat || t == DataType::kFloat16 || t == DataType::kDouble;
  if (in(op, {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceSumSquare"}))
    return is_float(t) || t == DataType::kInt32 || t == DataType::kInt64;
  return is_float(t);
}

// Declines (kNotImplemented, which sends the node to the CPU) a node whose device inputs
// have element types the kernel does not run, or are unknown at load. Only checked when the
// planner gave the types.
inline void check_placeable(const KernelInfo& info) {
  if (!info.has_input_types()) return;
  const bool same_types = in(info.op_type(), {"Add",
                                              "Sub",
                                              "Mul",
                                              "Div",
                                              "Pow",
                                              "PRelu",
                                              "Max",
                                              "Min",
                                              "Sum",
                                              "Equal",
                                              "Less",
                                              "Greater",
                                              "LessOrEqual",
                                              "GreaterOrEqual",
                                              "And",
                                              "Or",
                                              "Xor",
                                              "Concat",
                                              "MatMul",
                                              "Gemm",
                                              "Conv",
                                              "LayerNormalization",
                                              "BatchNormalization"});
  DataType first = DataType::kUndefined;
  for (size_t i = 0; i < info.num_inputs(); ++i) {
    if (!info.has_input(i) || input_on_host(info.op_type(), info.opset(), i)) continue;
    const DataType t = info.input_type(i);
    if (t == DataType::kUndefined)
      info.fail(StatusCode::kNotImplemented,
                "the element type of input " + std::to_string(i) + " is not known at load");
    if (!device_type_ok(info, i, t) || (same_types && first != DataType::kUndefined && t != first))
      info.fail(StatusCode::kNotImplemented,
                std::string("element type ") + dtype_name(t) + " is not supported on CUDA");
    if (first == DataType::kUndefined) first = t;
  }
}

inline void add(KernelRegistry& r, const char* op, std::vector<int> since, const KernelFactory& f) {
  const KernelFactory checked = [f](const KernelInfo& info) {
    check_placeable(info);
    return f(info);
  };
  // The kernels implement the semantics up to kNewestOpset, as the CPU kernels do.
  r.add_versions(op, since, checked, kNewestOpset, kCudaProvider);
}

template <typename K, typename... Args>
KernelFactory factory(Args... args) {
  return [=](const KernelInfo& info) -> std::unique_ptr<Kernel> {
    return std::make_unique<K>(info, args...);
  };
}

inline std::vector<int64_t> dense_strides(const Shape& s) {
  return tensor_ops::dense_strides(s);
}

// Shared checks and helpers of the CUDA kernels.
class CudaKernel : public Kernel {
 protected:
  static OrtliteCudaStream* stream() { return current_stream(); }

  // Input i (required), which must be on the stream's device.
  static const Tensor& dev_input(const KernelContext& ctx, size_t i) {
    const Tensor& t = ctx.required_input(i);
    check_on_device(ctx, t, i);
    return t;
  }
  static const Tensor* dev_input_opt(const KernelContext& ctx, size_t i) {
    const Tensor* t = ctx.input(i);
    if (t) check_on_device(ctx, *t, i);
    return t;
  }
  // An input the kernel reads on the host (input_on_host).
  static const Tensor* host_input(const KernelContext& ctx, size_t i) {
    const Tensor* t = ctx.input(i);
    if (t && is_cuda(*t))
      ctx.fail(StatusCode::kInvalidArgument,
               "input " + std::to_string(i) + " must be in CPU memory for the CUDA kernel");
    return t;
  }

  // A new device tensor as output i.
  static Tensor& out(KernelContext& ctx, size_t i, DataType dt, const Shape& shape) {
    OrtliteCudaStream* s = stream();
    ctx.set_output(i, empty(dt, shape, stream_device(s), s));
    return ctx.output(i);
  }
  // A device temporary on the run's stream.
  static Tensor temp(DataType dt, const Shape& shape) {
    OrtliteCudaStream* s = stream();
    return empty(dt, shape, stream_device(s), s);
  }

  static void run(const KernelContext& ctx, int rc, const char* what) {
    if (rc != 0) ctx.fail(StatusCode::kFail, std::string(what) + ": " + api().last_error());
  }

  static void need(const KernelContext& ctx, bool ok, DataType dt) {
    if (!ok)
      ctx.fail(StatusCode::kNotImplemented,
               std::string("element type ") + dtype_name(dt) + " is not supported on CUDA");
  }

  // Dense copy of a device tensor viewed with `strides` over `shape` (broadcast strides
  // expand, permuted strides transpose).
  static void strided_into(const KernelContext& ctx, const Tensor& src,
                           const std::vector<int64_t>& strides, const Shape& shape, Tensor& dst,
                           const void* src_ptr = nullptr) {
    const std::vector<int64_t> ds = dense_strides(shape);
    run(ctx,
        api().strided_copy(stream(), static_cast<int>(dtype_size(src.dtype())),
                           static_cast<int>(shape.size()), shape.data(),
                           src_ptr ? src_ptr : src.raw_data(), strides.data(), dst.raw_data(),
                           ds.data()),
        "copy");
  }

  static Shape broadcast_or_fail(const KernelContext& ctx, const Shape& a, const Shape& b) {
    try {
      return broadcast_shapes(a, b, ctx.node().op_type.c_str());
    } catch (const Error& e) {
      ctx.fail(e.code(), e.what());
    }
  }

 private:
  static void check_on_device(const KernelContext& ctx, const Tensor& t, size_t i) {
    if (!is_cuda(t))
      ctx.fail(StatusCode::kInvalidArgument,
               "input " + std::to_string(i) +
                   " is in CPU memory; the CUDA kernel needs it on the device");
    const int d = stream_device(stream());
    if (device_of(t) != d)
      ctx.fail(StatusCode::kInvalidArgument, "input " + std::to_string(i) +
                                                 " is on cuda:" + std::to_string(device_of(t)) +
                                                 ", the run is on cuda:" + std::to_string(d));
  }
};

struct ReduceSpec {
  const char* name;
  int op;
  std::vector<int> versions;
  int input_axes_since;
};

inline const ReduceSpec kReduceSpecs[] = {
    {"ReduceSum", ORTLITE_CUDA_REDUCE_SUM, {1, 11, 13}, 13},
    {"ReduceMean", ORTLITE_CUDA_REDUCE_MEAN, {1, 11, 13, 18}, 18},
    {"ReduceMax", ORTLITE_CUDA_REDUCE_MAX, {1, 11, 12, 13, 18, 20}, 18},
    {"ReduceMin", ORTLITE_CUDA_REDUCE_MIN, {1, 11, 12, 13, 18, 20}, 18},
    {"ReduceProd", ORTLITE_CUDA_REDUCE_PROD, {1, 11, 13, 18}, 18},
    {"ReduceL1", ORTLITE_CUDA_REDUCE_L1, {1, 11, 13, 18}, 18},
    {"ReduceL2", ORTLITE_CUDA_REDUCE_L2, {1, 11, 13, 18}, 18},
    {"ReduceLogSum", ORTLITE_CUDA_REDUCE_LOG_SUM, {1, 11, 13, 18}, 18},
    {"ReduceLogSumExp", ORTLITE_CUDA_REDUCE_LOG_SUM_EXP, {1, 11, 13, 18}, 18},
    {"ReduceSumSquare", ORTLITE_CUDA_REDUCE_SUM_SQUARE, {1, 11, 13, 18}, 18},
};

}  // namespace kernels_detail
}  // namespace cuda
}  // namespace ortlite
