// Shared helpers of the quantization kernels.
#include "providers/cpu/quant/quant_common.h"

#include <type_traits>

namespace ortlite {
namespace quant {

bool is_quant_int_type(DataType t) {
  return t == DataType::kUInt8 || t == DataType::kInt8 || t == DataType::kUInt16 ||
         t == DataType::kInt16;
}

QRange quant_range(DataType t) {
  switch (t) {
    case DataType::kUInt8:
      return {0, 255};
    case DataType::kInt8:
      return {-128, 127};
    case DataType::kUInt16:
      return {0, 65535};
    case DataType::kInt16:
      return {-32768, 32767};
    case DataType::kInt32:
      return {-2147483648.0, 2147483647.0};
    case DataType::kInt4:
      return {-8, 7};
    case DataType::kUInt4:
      return {0, 15};
    case DataType::kInt2:
      return {-2, 1};
    case DataType::kUInt2:
      return {0, 3};
    default:
      ORTLITE_THROW(kFail, "quant_range: ", dtype_name(t), " is not a quantized integer type");
  }
}

std::string onnx_type_label(int64_t code) {
  if (code > 0 && code <= kMaxDataType) {
    const DataType t = static_cast<DataType>(code);
    if (dtype_supported(t)) return dtype_name(t);
  }
  return "type code " + std::to_string(code);
}

bool is_quant_output_type(DataType t) {
  return is_quant_int_type(t) || dtype_is_narrow_int(t) ||
         (dtype_is_narrow_float(t) && t != DataType::kFloat8E8M0);
}

std::vector<double> tensor_values(const Tensor& t, const char* what) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  ORTLITE_DISPATCH_NUMERIC(t.dtype(), what, [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
        v[i] = static_cast<double>(static_cast<float>(p[i]));
      } else {
        v[i] = static_cast<double>(p[i]);
      }
    }
  });
  return v;
}

std::vector<double> param_values(const Tensor& t, const char* what) {
  const DataType dt = t.dtype();
  if (!dtype_is_narrow(dt)) return tensor_values(t, what);
  std::vector<double> v(static_cast<size_t>(t.numel()));
  const uint8_t* p = t.data<uint8_t>();
  if (const int8_t* ints = narrow_int_values(dt)) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = ints[p[i]];
  } else {
    const float* floats = narrow_float_values(dt);
    for (size_t i = 0; i < v.size(); ++i) v[i] = floats[p[i]];
  }
  return v;
}

QdqLayout qdq_layout(const KernelContext& ctx, const Shape& x, const Tensor& scale,
                     const Tensor* zero_point, int64_t axis, int64_t block_size,
                     const char* scale_name, const char* zp_name) {
  QdqLayout l;
  auto shape_of = [](const Tensor& t) { return shape_to_string(t.shape()); };
  if (is_single(scale)) {
    if (block_size != 0) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("attribute 'block_size' = ") + std::to_string(block_size) +
                   " needs a blocked '" + scale_name + "' but it has shape " + shape_of(scale) +
                   " (per-tensor quantization takes block_size 0)");
    }
    if (zero_point && !is_single(*zero_point)) {
      ctx.fail(StatusCode::kInvalidArgument, std::string("'") + zp_name + "' of shape " +
                                                 shape_of(*zero_point) + " must match '" +
                                                 scale_name + "' of shape " + shape_of(scale));
    }
    l.outer = shape_size(x);
    return l;
  }
  const int64_t rank = static_cast<int64_t>(x.size());
  if (axis < -rank || axis >= rank) {
    ctx.fail(StatusCode::kInvalidArgument, "attribute 'axis' = " + std::to_string(axis) +
                                               " is out of range for input 'x' " +
                                               shape_to_string(x) + " (per-axis or blocked '" +
                                               scale_name + "' of shape " + shape_of(scale) + ")");
  }
  const size_t ax = static_cast<size_t>(axis < 0 ? axis + rank : axis);
  for (size_t d = 0; d < ax; ++d) l.outer *= x[d];
  l.dim = x[ax];
  for (size_t d = ax + 1; d < x.size(); ++d) l.inner *= x[d];
  if (block_size == 0) {
    if (scale.rank() != 1 || scale.dim(0) != l.dim) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("per-axis quantization needs '") + scale_name + "' 1-D with " +
                   std::to_string(l.dim) + " elements (input 'x' " + shape_to_string(x) +
                   ", axis " + std::to_string(ax) + "), got shape " + shape_of(scale) +
                   "; blocked quantization needs attribute 'block_size'");
    }
    l.kind = QdqLayout::kPerAxis;
  } else {
    bool ok = scale.rank() == x.size();
    for (size_t d = 0; ok && d < x.size(); ++d) {
      // ceil without overflow for any positive block_size.
      const int64_t blocks = x[d] > 0 ? (x[d] - 1) / block_size + 1 : 0;
      ok = d == ax ? scale.dim(d) == blocks : scale.dim(d) == x[d];
    }
    if (!ok) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("blocked quantization with block_size ") + std::to_string(block_size) +
                   " on axis " + std::to_string(ax) + " of input 'x' " + shape_to_string(x) +
                   " needs '" + scale_name + "' of x's shape with ceil(" + std::to_string(l.dim) +
                   " / " + std::to_string(block_size) + ") on the axis, got shape " +
                   shape_of(scale));
    }
    l.kind = QdqLayout::kBlocked;
    l.block = block_size;
    l.blocks = scale.dim(ax);
  }
  if (zero_point && zero_point->shape() != scale.shape()) {
    ctx.fail(StatusCode::kInvalidArgument, std::string("'") + zp_name + "' of shape " +
                                               shape_of(*zero_point) + " must have the shape of '" +
                                               scale_name + "' " + shape_of(scale));
  }
  return l;
}

float qop_scale(const KernelContext& ctx, const Tensor& t, const char* name) {
  if (t.dtype() != DataType::kFloat || !is_single(t)) {
    ctx.fail(StatusCode::kInvalidArgument,
             std::string("input '") + name + "' must be a float scalar or 1-element tensor, got " +
                 dtype_name(t.dtype()) + " " + shape_to_string(t.shape()));
  }
  return *t.data<float>();
}

int32_t qop_zero_point(const KernelContext& ctx, const Tensor* t, DataType want, const char* name) {
  if (!t) return 0;
  if (t->dtype() != want || !is_single(*t)) {
    ctx.fail(StatusCode::kInvalidArgument,
             std::string("input '") + name + "' must be a " + dtype_name(want) +
                 " scalar or 1-element tensor, got " + dtype_name(t->dtype()) + " " +
                 shape_to_string(t->shape()));
  }
  if (want == DataType::kInt8) return *t->data<int8_t>();
  if (want == DataType::kUInt8) return *t->data<uint8_t>();
  if (want == DataType::kInt16) return *t->data<int16_t>();
  if (want == DataType::kUInt16) return *t->data<uint16_t>();
  ctx.fail(StatusCode::kInvalidArgument,
           std::string("input '") + name + "': unsupported type " + dtype_name(want));
}

void check_qop_int8(const KernelContext& ctx, const Tensor& t, const char* name) {
  if (t.dtype() != DataType::kUInt8 && t.dtype() != DataType::kInt8) {
    ctx.fail(
        StatusCode::kInvalidArgument,
        std::string("input '") + name + "' must be uint8 or int8, got " + dtype_name(t.dtype()));
  }
}

}  // namespace quant
}  // namespace ortlite
