// Constant (opset 1, 9, 11, 12, 13, 19, 21, 23, 24, 25) and ConstantOfShape (opset 9, 20, 21,
// 23, 24, 25).
//
// Constant builds its tensor once at load; at run it hands out that tensor, whose buffer is
// kConstant, so the binding copies it before giving it to the user.
#include <string>
#include <vector>

#include "providers/cpu/tensor/creation_kernels.h"
#include "providers/cpu/tensor/tensor_kernels.h"

namespace ortlite {
namespace creation {
namespace {

// A tensor over the same memory whose buffer is marked kConstant (the original buffer is
// kept alive by the wrapper).
Tensor as_constant(const Tensor& t) {
  if (t.buffer() && t.buffer()->kind() == BufferKind::kConstant) return t;
  Tensor src = t;
  if (!src.buffer()) src = Tensor::empty(t.dtype(), t.shape());
  BufferPtr owner = src.buffer();
  Buffer* wrapped = Buffer::wrap(owner->data(), owner->size(), BufferKind::kConstant,
                                 [owner]() { /* keeps `owner` alive until released */ });
  return Tensor(src.dtype(), src.shape(), BufferPtr::adopt(wrapped), src.byte_offset());
}

// The ConstantOfShape opset that allows value type t (0: not allowed).
int64_t fill_type_since(DataType t) {
  switch (t) {
    case DataType::kBFloat16:
      return 20;
    case DataType::kFloat8E4M3FN:
    case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ:
    case DataType::kInt4:
    case DataType::kUInt4:
      return 21;
    case DataType::kFloat4E2M1:
      return 23;
    case DataType::kFloat8E8M0:
      return 24;
    case DataType::kInt2:
    case DataType::kUInt2:
      return 25;
    case DataType::kFloat:
    case DataType::kDouble:
    case DataType::kFloat16:
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
    case DataType::kUInt8:
    case DataType::kUInt16:
    case DataType::kUInt32:
    case DataType::kUInt64:
    case DataType::kBool:
      return 9;
    default:
      return 0;
  }
}

class ConstantKernel : public Kernel {
 public:
  explicit ConstantKernel(const KernelInfo& info) {
    static const char* const kForms[] = {"value",        "sparse_value", "value_float",
                                         "value_floats", "value_int",    "value_ints",
                                         "value_string", "value_strings"};
    std::vector<std::string> present;
    for (const char* f : kForms)
      if (info.has_attr(f)) present.push_back(f);
    if (present.size() != 1) {
      std::string list;
      for (const auto& p : present) list += (list.empty() ? "" : ", ") + p;
      info.fail(StatusCode::kInvalidGraph,
                "exactly one of the attributes value, sparse_value, value_float, value_floats, "
                "value_int, value_ints, value_string, value_strings must be set, found " +
                    std::to_string(present.size()) + (list.empty() ? "" : " (" + list + ")"));
    }
    const std::string& form = present[0];
    if (form != "value" && info.opset() < 12)
      info.fail(StatusCode::kInvalidGraph, "attribute '" + form +
                                               "' needs opset 12 or newer (model uses opset " +
                                               std::to_string(info.opset()) + ")");
    Tensor t;
    if (form == "value") {
      // A sparse tensor in 'value' (what onnx.helper.make_node writes for value=a
      // SparseTensorProto) is taken as 'sparse_value' is, as onnxruntime does.
      const Attribute* a = info.node().find_attr("value");
      const Tensor* v = a && a->type == AttrType::kSparseTensor ? &a->t : info.attr_tensor("value");
      if (!v || !v->defined())
        info.fail(StatusCode::kInvalidGraph, "attribute 'value' holds no tensor");
      if (!dtype_supported(v->dtype()))
        info.fail(StatusCode::kNotImplemented, std::string("attribute 'value' element type ") +
                                                   dtype_name(v->dtype()) + " is not supported");
      t = *v;
    } else if (form == "sparse_value") {
      // The reader densified it (and checked its indices); the output is dense, as in
      // onnxruntime.
      const Attribute* a = info.node().find_attr("sparse_value");
      const Tensor* v = a && a->type == AttrType::kSparseTensor ? &a->t : nullptr;
      if (!v || !v->defined())
        info.fail(StatusCode::kInvalidGraph, "attribute 'sparse_value' holds no tensor");
      if (!dtype_supported(v->dtype()))
        info.fail(StatusCode::kNotImplemented,
                  std::string("attribute 'sparse_value' element type ") + dtype_name(v->dtype()) +
                      " is not supported");
      t = *v;
    } else if (form == "value_float") {
      t = Tensor::from_vector<float>({info.attr_float("value_float", 0.f)}, {});
    } else if (form == "value_floats") {
      std::vector<float> v = info.attr_floats("value_floats");
      t = Tensor::from_vector<float>(v, {static_cast<int64_t>(v.size())});
    } else if (form == "value_int") {
      t = Tensor::from_vector<int64_t>({info.attr_int("value_int", 0)}, {});
    } else if (form == "value_ints") {
      std::vector<int64_t> v = info.attr_ints("value_ints");
      t = Tensor::from_vector<int64_t>(v, {static_cast<int64_t>(v.size())});
    } else if (form == "value_string") {
      t = Tensor::from_vector<std::string>({info.attr_string("value_string", "")}, {});
    } else {  // value_strings
      std::vector<std::string> v = info.attr_strings("value_strings");
      t = Tensor::from_vector<std::string>(v, {static_cast<int64_t>(v.size())});
    }
    value_ = as_constant(t);
  }

  void compute(KernelContext& ctx) const override { ctx.set_output(0, value_); }

 private:
  Tensor value_;
};

class ConstantOfShapeKernel : public Kernel {
 public:
  explicit ConstantOfShapeKernel(const KernelInfo& info) {
    if (const Tensor* v = info.attr_tensor("value")) {
      if (v->numel() != 1)
        info.fail(StatusCode::kInvalidGraph,
                  "attribute 'value' must hold exactly one element, got shape " +
                      shape_to_string(v->shape()));
      const int64_t since = fill_type_since(v->dtype());
      if (since == 0 || info.opset() < since)
        info.fail(StatusCode::kNotImplemented,
                  std::string("attribute 'value' element type ") + dtype_name(v->dtype()) +
                      " is not supported at opset " + std::to_string(info.opset()));
      value_ = v->clone();
    } else {
      value_ = Tensor::from_vector<float>({0.f}, {1});
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& s = ctx.required_input(0);
    if (s.dtype() != DataType::kInt64 && s.dtype() != DataType::kInt32)
      ctx.fail(
          StatusCode::kInvalidArgument,
          std::string("input 'input' (the shape) must be int64, got ") + dtype_name(s.dtype()));
    if (s.rank() > 1)
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'input' (the shape) must be 1-D, got shape " + shape_to_string(s.shape()));
    Shape shape = tensor_to_int64s(s);
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] < 0)
        ctx.fail(StatusCode::kInvalidArgument, "input 'input' (the shape) has negative dim " +
                                                   std::to_string(shape[i]) + " at index " +
                                                   std::to_string(i));
    }
    const int64_t n = tensor_ops::checked_numel(ctx, value_.dtype(), shape, "output");
    Tensor& y = ctx.allocate_output(0, value_.dtype(), shape);
    if (n > 0) tensor_ops::fill_elements(value_.dtype(), value_.raw_data(), y.raw_data(), n);
  }

 private:
  Tensor value_;
};

}  // namespace

void register_constant_kernels(KernelRegistry& r) {
  r.add_versions("Constant", {1, 9, 11, 12, 13, 19, 21, 23, 24, 25},
                 make_factory<ConstantKernel>());
  r.add_versions("ConstantOfShape", {9, 20, 21, 23, 24, 25}, make_factory<ConstantOfShapeKernel>());
}

}  // namespace creation
}  // namespace ortlite
