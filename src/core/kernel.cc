#include "ortlite/kernel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ortlite/provider.h"

namespace ortlite {

// ---- KernelInfo -----------------------------------------------------------------------

const Tensor* KernelInfo::constant_input(size_t i) const {
  if (!has_input(i) || !constant_lookup_) return nullptr;
  return constant_lookup_(node_.inputs[i]);
}

const Attribute* KernelInfo::typed_attr(const char* name, AttrType type) const {
  const Attribute* a = node_.find_attr(name);
  if (a && a->type != type) {
    fail(StatusCode::kInvalidGraph, std::string("attribute '") + name + "' has type " +
                                        attr_type_name(a->type) + ", expected " +
                                        attr_type_name(type));
  }
  return a;
}

int64_t KernelInfo::attr_int(const char* name, int64_t default_value) const {
  const Attribute* a = typed_attr(name, AttrType::kInt);
  return a ? a->i : default_value;
}

int64_t KernelInfo::attr_int_required(const char* name) const {
  const Attribute* a = typed_attr(name, AttrType::kInt);
  if (!a)
    fail(StatusCode::kInvalidGraph, std::string("required attribute '") + name + "' is missing");
  return a->i;
}

float KernelInfo::attr_float(const char* name, float default_value) const {
  const Attribute* a = typed_attr(name, AttrType::kFloat);
  return a ? a->f : default_value;
}

float KernelInfo::attr_float_required(const char* name) const {
  const Attribute* a = typed_attr(name, AttrType::kFloat);
  if (!a)
    fail(StatusCode::kInvalidGraph, std::string("required attribute '") + name + "' is missing");
  return a->f;
}

std::string KernelInfo::attr_string(const char* name, const std::string& default_value) const {
  const Attribute* a = typed_attr(name, AttrType::kString);
  return a ? a->s : default_value;
}

std::vector<int64_t> KernelInfo::attr_ints(const char* name,
                                           std::vector<int64_t> default_value) const {
  const Attribute* a = typed_attr(name, AttrType::kInts);
  return a ? a->ints : default_value;
}

std::vector<float> KernelInfo::attr_floats(const char* name,
                                           std::vector<float> default_value) const {
  const Attribute* a = typed_attr(name, AttrType::kFloats);
  return a ? a->floats : default_value;
}

std::vector<std::string> KernelInfo::attr_strings(const char* name,
                                                  std::vector<std::string> default_value) const {
  const Attribute* a = typed_attr(name, AttrType::kStrings);
  return a ? a->strings : default_value;
}

const Tensor* KernelInfo::attr_tensor(const char* name) const {
  const Attribute* a = typed_attr(name, AttrType::kTensor);
  return a ? &a->t : nullptr;
}

std::shared_ptr<const Subgraph> KernelInfo::subgraph(const char* name) const {
  const Attribute* a = typed_attr(name, AttrType::kGraph);
  if (!a || !a->g)
    fail(StatusCode::kInvalidGraph, std::string("graph attribute '") + name + "' is missing");
  if (!subgraph_builder_)
    fail(StatusCode::kInvalidGraph, std::string("subgraph '") + name + "' cannot be planned here");
  return subgraph_builder_(*a);
}

void KernelInfo::fail(StatusCode code, const std::string& message) const {
  throw Error(code, node_.label() + ": " + message);
}

// ---- KernelContext --------------------------------------------------------------------

const Tensor& KernelContext::required_input(size_t i) const {
  const Tensor* t = input(i);
  if (!t) fail(StatusCode::kInvalidArgument, "required input " + std::to_string(i) + " is missing");
  return *t;
}

Tensor& KernelContext::allocate_output(size_t i, DataType dtype, const Shape& shape) {
  if (i >= n_outputs_)
    fail(StatusCode::kFail, "output index " + std::to_string(i) + " out of range");
  const int64_t n = shape_size(shape);
  const size_t elem = dtype_size(dtype);
  if (elem == 0)
    fail(StatusCode::kNotImplemented,
         std::string("element type ") + dtype_name(dtype) + " is not supported");
  // Byte sizes beyond int64 (numpy's and ptrdiff_t's bound) cannot be allocated: Fail, as
  // an allocation failure is.
  if (static_cast<uint64_t>(n) > static_cast<uint64_t>(INT64_MAX) / elem)
    fail(StatusCode::kFail, "output shape " + shape_to_string(shape) +
                                " is too large: " + std::to_string(n) + " elements of " +
                                std::to_string(elem) + " bytes overflow a 64-bit byte size");
  if (recycled_ && recycled_[i] && dtype != DataType::kString) {
    // The arena's tensor for this output: reused when this run is its only holder (a
    // buffer still referenced by a value, a view or a numpy array is never written).
    Tensor& r = *recycled_[i];
    const Buffer* b = r.buffer().get();
    if (b && b->ref_count() == 1 && b->size() >= static_cast<size_t>(n) * elem) {
      outputs_[i] = Value(std::move(r));
      Tensor& t = outputs_[i].tensor();
      t.reinit(dtype, shape);
      return t;
    }
  }
  BufferPtr buf = dtype == DataType::kString
                      ? BufferPtr::adopt(Buffer::allocate_strings(static_cast<size_t>(n)))
                      : BufferPtr::adopt(Buffer::allocate(static_cast<size_t>(n) * elem));
  outputs_[i] = Tensor(dtype, shape, std::move(buf));
  return outputs_[i].tensor();
}

const Tensor* KernelContext::non_tensor_input(size_t i) const {
  const Value* v = inputs_[i];
  if (v->is_none()) return nullptr;
  fail(StatusCode::kInvalidArgument, "input " + std::to_string(i) + " is a " + v->type_string() +
                                         "; this operator takes a tensor there");
}

void KernelContext::set_output_value(size_t i, Value v) {
  if (i >= n_outputs_)
    fail(StatusCode::kFail, "output index " + std::to_string(i) + " out of range");
  outputs_[i] = std::move(v);
}

void KernelContext::set_output(size_t i, Tensor t) {
  if (i >= n_outputs_)
    fail(StatusCode::kFail, "output index " + std::to_string(i) + " out of range");
  outputs_[i] = std::move(t);
}

void KernelContext::fail(StatusCode code, const std::string& message) const {
  throw Error(code, node_.label() + ": " + message);
}

// ---- Registry -------------------------------------------------------------------------

// src/providers/cpu/contrib: onnxruntime's com.microsoft operators.
void register_contrib_kernels(KernelRegistry& r);

namespace {
bool same_domain(const std::string& a, const std::string& b) {
  auto norm = [](const std::string& d) -> const std::string& {
    static const std::string empty;
    return d == "ai.onnx" ? empty : d;
  };
  return norm(a) == norm(b);
}
}  // namespace

const KernelRegistry& KernelRegistry::instance() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    register_math_kernels(r);
    register_nn_kernels(r);
    register_tensor_kernels(r);
    register_reduce_kernels(r);
    register_sequence_kernels(r);
    register_controlflow_kernels(r);
    register_quant_kernels(r);
    register_ml_kernels(r);
    register_contrib_kernels(r);
    // Device providers' kernels (the CUDA ones: g++ wrappers; the device code is in the
    // separately loaded CUDA library).
    cuda_provider_entry().register_kernels(r);
    return r;
  }();
  return registry;
}

void KernelRegistry::add(const std::string& domain, const std::string& op_type, int since,
                         int until, KernelFactory factory, const std::string& provider) {
  entries_.push_back(Entry{domain == "ai.onnx" ? "" : domain, op_type, provider, since, until,
                           std::move(factory)});
}

void KernelRegistry::add_versions(const std::string& op_type, const std::vector<int>& since,
                                  const KernelFactory& factory, int until,
                                  const std::string& provider) {
  for (size_t i = 0; i < since.size(); ++i)
    add("", op_type, since[i], i + 1 < since.size() ? since[i + 1] - 1 : until, factory, provider);
}

const KernelFactory* KernelRegistry::find(const std::string& domain, const std::string& op_type,
                                          int64_t opset, const std::string& provider) const {
  for (const Entry& e : entries_) {
    if (e.op_type == op_type && e.provider == provider && same_domain(e.domain, domain) &&
        opset >= e.since && opset <= e.until)
      return &e.factory;
  }
  return nullptr;
}

bool KernelRegistry::has_op(const std::string& domain, const std::string& op_type) const {
  for (const Entry& e : entries_)
    if (e.op_type == op_type && same_domain(e.domain, domain)) return true;
  return false;
}

std::vector<std::string> KernelRegistry::op_names(const std::string& provider) const {
  std::vector<std::string> names;
  for (const Entry& e : entries_) {
    if (e.provider != provider) continue;
    std::string n = e.domain.empty() ? e.op_type : e.domain + "." + e.op_type;
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<KernelRegistry::Registration> KernelRegistry::registrations() const {
  std::vector<Registration> out;
  out.reserve(entries_.size());
  for (const Entry& e : entries_)
    out.push_back(Registration{e.domain, e.op_type, e.provider, e.since, e.until});
  return out;
}

// ---- helpers --------------------------------------------------------------------------

int64_t normalize_axis(int64_t axis, int64_t rank, const char* what) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1)) {
    ORTLITE_THROW(kInvalidArgument, what, " ", axis, " is out of range for rank ", rank);
  }
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> tensor_to_int64s(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  if (t.dtype() == DataType::kInt64) {
    const int64_t* d = t.data<int64_t>();
    std::copy(d, d + t.numel(), v.begin());
  } else if (t.dtype() == DataType::kInt32) {
    const int32_t* d = t.data<int32_t>();
    std::copy(d, d + t.numel(), v.begin());
  } else {
    ORTLITE_THROW(kInvalidArgument, "expected an int32 or int64 tensor, got ",
                  dtype_name(t.dtype()));
  }
  return v;
}

double tensor_scalar_as_double(const Tensor& t) {
  if (t.numel() != 1)
    ORTLITE_THROW(kInvalidArgument, "expected a single value, got shape ",
                  shape_to_string(t.shape()));
  return ORTLITE_DISPATCH_NUMERIC(t.dtype(), "scalar", [&](auto tag) -> double {
    using T = decltype(tag);
    return static_cast<double>(*reinterpret_cast<const T*>(t.raw_data()));
  });
}

}  // namespace ortlite
