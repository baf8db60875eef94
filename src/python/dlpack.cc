// DLPack for ortlite.OrtValue (docs/ownership.md "DLPack").
//
// Import (from_dlpack): the OrtValue's tensor is a kBorrowed view of the producer's memory.
// The DLManagedTensor is adopted by a private capsule that is the OrtValue's `source`, so
// the producer's deleter runs exactly once, from that capsule's destructor, when the
// OrtValue goes (with the GIL held). The producer's capsule is renamed "used_dltensor" only
// after everything that can fail has succeeded; until then its own destructor still owns
// the tensor.
//
// Export (__dlpack__ / to_dlpack): the DLManagedTensor's manager_ctx holds a strong
// reference to the OrtValue and a copy of its Tensor (one more reference to the buffer), so
// the memory outlives the OrtValue's Python name for as long as the consumer holds it.
#include "python/dlpack.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ortlite/provider.h"
#include "ortlite/status.h"
#include "python/errors.h"
#include "python/numpy_api.h"
#include "python/ortvalue.h"

namespace ortlite::py {

namespace {

constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";
constexpr const char* kImportName = "ortlite.dlpack_import";

const char* device_type_name(int32_t t) {
  switch (t) {
    case dl::kCPU:
      return "CPU";
    case dl::kCUDA:
      return "CUDA";
    case dl::kCUDAHost:
      return "CUDAHost";
    case 4:
      return "OpenCL";
    case 7:
      return "Vulkan";
    case 8:
      return "Metal";
    case 10:
      return "ROCM";
    default:
      return "unknown";
  }
}

std::string dl_dtype_string(const dl::DataType& d) {
  static const char* const kCodes[] = {"int",    "uint",    "float", "opaque_handle",
                                       "bfloat", "complex", "bool"};
  std::string s = d.code < 7 ? kCodes[d.code] : "code " + std::to_string(d.code);
  s += std::to_string(d.bits);
  if (d.lanes != 1) s += "x" + std::to_string(d.lanes);
  return s;
}

DataType dtype_from_dl(const dl::DataType& d, bool is_bool_tensor) {
  if (d.lanes != 1)
    ORTLITE_THROW(kNotImplemented, "OrtValue.from_dlpack: DLPack element type ", dl_dtype_string(d),
                  " has ", d.lanes, " lanes; ortlite tensors have one lane per element");
  DataType t = DataType::kUndefined;
  switch (d.code) {
    case dl::kInt:
      t = d.bits == 8    ? DataType::kInt8
          : d.bits == 16 ? DataType::kInt16
          : d.bits == 32 ? DataType::kInt32
          : d.bits == 64 ? DataType::kInt64
                         : DataType::kUndefined;
      break;
    case dl::kUInt:
      t = d.bits == 8    ? DataType::kUInt8
          : d.bits == 16 ? DataType::kUInt16
          : d.bits == 32 ? DataType::kUInt32
          : d.bits == 64 ? DataType::kUInt64
                         : DataType::kUndefined;
      break;
    case dl::kFloat:
      t = d.bits == 16   ? DataType::kFloat16
          : d.bits == 32 ? DataType::kFloat
          : d.bits == 64 ? DataType::kDouble
                         : DataType::kUndefined;
      break;
    case dl::kBfloat:
      t = d.bits == 16 ? DataType::kBFloat16 : DataType::kUndefined;
      break;
    case dl::kBool:
      t = d.bits == 8 ? DataType::kBool : DataType::kUndefined;
      break;
    default:
      break;
  }
  if (t == DataType::kUndefined)
    ORTLITE_THROW(kNotImplemented, "OrtValue.from_dlpack: DLPack element type ", dl_dtype_string(d),
                  " has no ortlite equivalent");
  if (is_bool_tensor) {
    if (t != DataType::kUInt8 && t != DataType::kBool)
      ORTLITE_THROW(kInvalidArgument,
                    "OrtValue.from_dlpack: is_bool_tensor=True needs uint8 (or bool) data, "
                    "not DLPack ",
                    dl_dtype_string(d));
    t = DataType::kBool;
  }
  return t;
}

bool dl_dtype_of(DataType t, dl::DataType* out) {
  const uint8_t bits = static_cast<uint8_t>(8 * dtype_size(t));
  switch (t) {
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
      *out = {dl::kInt, bits, 1};
      return true;
    case DataType::kUInt8:
    case DataType::kUInt16:
    case DataType::kUInt32:
    case DataType::kUInt64:
    case DataType::kBool:  // as onnxruntime: bool leaves as uint8 (from_dlpack's is_bool_tensor)
      *out = {dl::kUInt, bits, 1};
      return true;
    case DataType::kFloat16:
    case DataType::kFloat:
    case DataType::kDouble:
      *out = {dl::kFloat, bits, 1};
      return true;
    case DataType::kBFloat16:
      *out = {dl::kBfloat, 16, 1};
      return true;
    default:
      return false;
  }
}

// The DLTensor as a kBorrowed ortlite tensor over the same memory. Refuses what ortlite
// cannot view in place (other devices, strides that are not C order).
Tensor tensor_from_dl(const dl::Tensor& d, bool is_bool_tensor) {
  if (d.device.device_type != dl::kCPU)
    ORTLITE_THROW(kNotImplemented, "OrtValue.from_dlpack: the DLPack tensor is on device ",
                  device_type_name(d.device.device_type), " (DLPack device type ",
                  d.device.device_type, ", id ", d.device.device_id,
                  "); ortlite imports CPU tensors only");
  const DataType dtype = dtype_from_dl(d.dtype, is_bool_tensor);
  if (d.ndim < 0 || d.ndim > 64)
    ORTLITE_THROW(kInvalidArgument, "OrtValue.from_dlpack: the DLPack tensor has ", d.ndim,
                  " dimensions");
  if (d.ndim > 0 && !d.shape)
    ORTLITE_THROW(kInvalidArgument, "OrtValue.from_dlpack: the DLPack tensor has no shape");
  Shape shape(d.shape, d.shape + d.ndim);
  for (int64_t v : shape)
    if (v < 0)
      ORTLITE_THROW(kInvalidArgument, "OrtValue.from_dlpack: the DLPack tensor's shape ",
                    shape_to_string(shape), " has a negative dimension");
  const int64_t numel = shape_size(shape);
  if (d.strides && numel > 0) {
    int64_t expected = 1;
    for (int i = d.ndim - 1; i >= 0; --i) {
      if (shape[i] != 1 && d.strides[i] != expected) {
        Shape strides(d.strides, d.strides + d.ndim);
        ORTLITE_THROW(kInvalidArgument, "OrtValue.from_dlpack: the DLPack tensor of shape ",
                      shape_to_string(shape), " has strides ", shape_to_string(strides),
                      " (in elements), which are not C-contiguous; ortlite shares memory "
                      "with contiguous tensors only (numpy.ascontiguousarray makes one)");
      }
      expected *= shape[i];
    }
  }
  if (numel > 0 && !d.data)
    ORTLITE_THROW(kInvalidArgument, "OrtValue.from_dlpack: the DLPack tensor's data is NULL");
  const size_t nbytes = static_cast<size_t>(numel) * dtype_size(dtype);
  void* data = d.data ? static_cast<char*>(d.data) + d.byte_offset : nullptr;
  if (numel == 0) return Tensor::empty(dtype, shape);
  return Tensor(dtype, std::move(shape),
                BufferPtr::adopt(Buffer::wrap(data, nbytes, BufferKind::kBorrowed, {})));
}

// Destructor of the capsule that adopted an imported DLManagedTensor: the OrtValue's
// source. Runs once, when the OrtValue lets go of it.
void import_destructor(PyObject* capsule) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  auto* mt = static_cast<dl::ManagedTensor*>(PyCapsule_GetPointer(capsule, kImportName));
  if (!mt)
    PyErr_WriteUnraisable(capsule);
  else if (mt->deleter)
    mt->deleter(mt);
  PyErr_Restore(type, value, tb);
}

struct ExportContext {
  PyObject* owner;  // the OrtValue (strong reference)
  Tensor tensor;    // one more reference to its buffer
  std::vector<int64_t> shape;
};

void export_deleter(dl::ManagedTensor* mt) {
  if (!mt) return;
  auto* ctx = static_cast<ExportContext*>(mt->manager_ctx);
  // A consumer may drop the tensor after Python is gone; then the memory is left to the
  // process's end rather than touching a finalized interpreter.
  if (!Py_IsInitialized()) return;
  PyGILState_STATE g = PyGILState_Ensure();
  Py_XDECREF(ctx->owner);
  delete ctx;
  delete mt;
  PyGILState_Release(g);
}

// Destructor of an exported capsule: frees the tensor when no consumer took it.
void export_capsule_destructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kUsedCapsuleName)) return;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  auto* mt = static_cast<dl::ManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (!mt)
    PyErr_WriteUnraisable(capsule);
  else
    mt->deleter(mt);
  PyErr_Restore(type, value, tb);
}

PyObject* export_capsule(PyObject* self, bool copy) {
  OrtValueObject* ov = reinterpret_cast<OrtValueObject*>(self);
  Tensor t = ov->tensor;
  if (!t.defined()) ORTLITE_THROW(kInvalidArgument, "the OrtValue holds no value");
  if (!cpu_provider().holds(t))
    ORTLITE_THROW(kNotImplemented,
                  "OrtValue.__dlpack__: the tensor is on a CUDA device; ortlite exports CPU "
                  "tensors only");
  dl::DataType dtype{};
  if (!dl_dtype_of(t.dtype(), &dtype))
    ORTLITE_THROW(kNotImplemented, "OrtValue.__dlpack__: element type tensor(",
                  dtype_name(t.dtype()), ") has no DLPack equivalent ortlite exports");
  if (!copy && ov->source && PyArray_Check(ov->source) &&
      !PyArray_ISWRITEABLE(reinterpret_cast<PyArrayObject*>(ov->source))) {
    PyErr_SetString(PyExc_BufferError,
                    "the OrtValue views a read-only array, and DLPack cannot say read-only");
    throw PythonErrorSet{};
  }
  if (copy) t = t.clone();
  auto* ctx = new ExportContext{self, t, t.shape()};
  ctx->shape.reserve(1);
  auto* mt = new dl::ManagedTensor{};
  static char empty_data[64] alignas(64);
  mt->dl_tensor.data = t.numel() > 0 && t.raw_data() ? t.raw_data() : empty_data;
  mt->dl_tensor.device = {dl::kCPU, 0};
  mt->dl_tensor.ndim = static_cast<int32_t>(t.rank());
  mt->dl_tensor.dtype = dtype;
  mt->dl_tensor.shape = ctx->shape.data();
  mt->dl_tensor.strides = nullptr;
  mt->dl_tensor.byte_offset = 0;
  mt->manager_ctx = ctx;
  mt->deleter = export_deleter;
  PyObject* capsule = PyCapsule_New(mt, kCapsuleName, export_capsule_destructor);
  if (!capsule) {
    delete ctx;
    delete mt;
    throw PythonErrorSet{};
  }
  Py_INCREF(self);  // taken last: nothing after this can fail
  return capsule;
}

}  // namespace

PyObject* ortvalue_from_dlpack(PyTypeObject* cls, PyObject* args, PyObject* kwds) {
  ModuleState* st = state_from_type(cls);
  if (!st) return nullptr;
  static const char* kwlist[] = {"data", "is_bool_tensor", nullptr};
  PyObject* data = nullptr;
  int is_bool = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|p:from_dlpack", const_cast<char**>(kwlist), &data,
                                   &is_bool))
    return nullptr;
  try {
    Ref capsule;
    if (PyCapsule_CheckExact(data)) {
      capsule = Ref::borrow(data);
    } else {
      Ref method = Ref::steal(PyObject_GetAttrString(data, "__dlpack__"));
      if (!method) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw PythonErrorSet{};
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "from_dlpack expects a DLPack capsule or an object with __dlpack__, "
                     "not %.100s",
                     Py_TYPE(data)->tp_name);
        throw PythonErrorSet{};
      }
      capsule = Ref::steal(PyObject_CallNoArgs(method.get()));
      if (!capsule) throw PythonErrorSet{};
      if (!PyCapsule_CheckExact(capsule.get())) {
        PyErr_Format(PyExc_TypeError, "%.100s.__dlpack__() returned %.100s, not a capsule",
                     Py_TYPE(data)->tp_name, Py_TYPE(capsule.get())->tp_name);
        throw PythonErrorSet{};
      }
    }
    if (!PyCapsule_IsValid(capsule.get(), kCapsuleName)) {
      const char* name = PyCapsule_GetName(capsule.get());
      if (!name) PyErr_Clear();
      const std::string n = name ? name : "";
      if (n == kUsedCapsuleName)
        ORTLITE_THROW(kInvalidArgument,
                      "OrtValue.from_dlpack: the DLPack capsule was already consumed "
                      "(its name is 'used_dltensor'); a capsule can be imported once");
      ORTLITE_THROW(kInvalidArgument, "OrtValue.from_dlpack: the capsule is named '", n,
                    "', not 'dltensor' (ortlite reads unversioned DLPack capsules)");
    }
    auto* mt = static_cast<dl::ManagedTensor*>(PyCapsule_GetPointer(capsule.get(), kCapsuleName));
    if (!mt) throw PythonErrorSet{};
    Tensor t = tensor_from_dl(mt->dl_tensor, is_bool != 0);
    // No destructor until the OrtValue exists: before that the producer's capsule owns mt.
    Ref holder = Ref::steal(PyCapsule_New(mt, kImportName, nullptr));
    if (!holder) throw PythonErrorSet{};
    Ref ov = ortvalue_new(st, std::move(t), holder.get());
    // Nothing below can fail: mt changes hands.
    PyCapsule_SetDestructor(holder.get(), import_destructor);
    PyCapsule_SetName(capsule.get(), kUsedCapsuleName);
    return ov.release();
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* ortvalue_dunder_dlpack(PyObject* self, PyObject* args, PyObject* kwds) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  // numpy >= 2 passes the keywords of the 2023 array API; stream and max_version are
  // accepted and need nothing on the CPU (the capsule is always an unversioned one, which
  // consumers must accept).
  static const char* kwlist[] = {"stream", "max_version", "dl_device", "copy", nullptr};
  PyObject* stream = Py_None;
  PyObject* max_version = Py_None;
  PyObject* dl_device = Py_None;
  PyObject* copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O$OOO:__dlpack__", const_cast<char**>(kwlist),
                                   &stream, &max_version, &dl_device, &copy))
    return nullptr;
  try {
    if (dl_device != Py_None) {
      int32_t type = 0, id = 0;
      if (!PyArg_ParseTuple(dl_device, "ii", &type, &id)) throw PythonErrorSet{};
      if (type != dl::kCPU || id != 0) {
        PyErr_Format(PyExc_BufferError,
                     "OrtValue.__dlpack__: dl_device (%d, %d) is not the tensor's device (1, 0)",
                     type, id);
        throw PythonErrorSet{};
      }
    }
    const int want_copy = copy == Py_None ? 0 : PyObject_IsTrue(copy);
    if (want_copy < 0) throw PythonErrorSet{};
    return export_capsule(self, want_copy == 1);
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* ortvalue_to_dlpack(PyObject* self, PyObject*) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  try {
    return export_capsule(self, false);
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* ortvalue_dlpack_device(PyObject* self, PyObject*) {
  const Tensor& t = reinterpret_cast<OrtValueObject*>(self)->tensor;
  if (t.buffer() && t.buffer()->device().type == DeviceType::kCUDA)
    return Py_BuildValue("(ii)", static_cast<int>(dl::kCUDA), t.buffer()->device().id);
  return Py_BuildValue("(ii)", static_cast<int>(dl::kCPU), 0);
}

}  // namespace ortlite::py
