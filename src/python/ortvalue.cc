#include "python/ortvalue.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include <structmember.h>

#include "ortlite/provider.h"
#include "ortlite/status.h"
#include "python/dlpack.h"
#include "python/errors.h"
#include "python/numpy_bridge.h"
#include "python/sparse_tensor.h"

namespace ortlite::py {

namespace {

OrtValueObject* as_ov(PyObject* o) {
  return reinterpret_cast<OrtValueObject*>(o);
}

// The provider of ortvalue_from_*(..., device_type, device_id)'s device: the CPU, or a
// present CUDA device (EPFail saying why not otherwise).
std::shared_ptr<const ExecutionProvider> parse_device(PyObject* device_type, PyObject* device_id) {
  std::string dev;
  if (!str_to_utf8(device_type, "device_type", &dev)) throw PythonErrorSet{};
  if (!PyLong_Check(device_id)) {
    PyErr_Format(PyExc_TypeError, "device_id must be int, not %.100s", Py_TYPE(device_id)->tp_name);
    throw PythonErrorSet{};
  }
  for (char& c : dev) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (dev == "cpu") return provider_for_device(dev, 0);
  if (dev != "cuda" && dev != "gpu")
    ORTLITE_THROW(kInvalidArgument, "unsupported device_type '", dev,
                  "' (expected 'cpu' or 'cuda')");
  const long long id = PyLong_AsLongLong(device_id);
  if (id == -1 && PyErr_Occurred()) throw PythonErrorSet{};
  if (id < 0 || id > 1 << 20) ORTLITE_THROW(kInvalidArgument, "device_id ", id, " is not valid");
  return provider_for_device(dev, id);
}

// The device of ortvalue_from_*(..., device_type=None, device_id=None): "cpu" and 0 when
// absent; device_type may be a name or an OrtDevice (onnxruntime's C-level signature: its
// type and id, which a device_id argument may not contradict).
std::shared_ptr<const ExecutionProvider> device_arg(PyObject* device_type, PyObject* device_id) {
  Ref cpu = Ref::steal(PyUnicode_FromString("cpu"));
  Ref zero = Ref::steal(PyLong_FromLong(0));
  if (!cpu || !zero) throw PythonErrorSet{};
  Ref dev_name, dev_id;
  if (device_type && !PyUnicode_Check(device_type) &&
      PyObject_HasAttrString(device_type, "device_type") &&
      PyObject_HasAttrString(device_type, "device_id")) {
    Ref type = Ref::steal(PyObject_CallMethod(device_type, "device_type", nullptr));
    if (!type) throw PythonErrorSet{};
    dev_id = Ref::steal(PyObject_CallMethod(device_type, "device_id", nullptr));
    if (!dev_id) throw PythonErrorSet{};
    const long kind = PyLong_AsLong(type.get());
    if (kind == -1 && PyErr_Occurred()) throw PythonErrorSet{};
    if (kind != 0 && kind != 1)
      ORTLITE_THROW(kInvalidArgument, "OrtDevice of device type ", kind,
                    " is not one ortlite places values on (cpu 0, cuda 1)");
    if (device_id && PyObject_RichCompareBool(device_id, dev_id.get(), Py_EQ) != 1) {
      if (PyErr_Occurred()) throw PythonErrorSet{};
      ORTLITE_THROW(kInvalidArgument, "device_id differs from the OrtDevice's id");
    }
    dev_name = Ref::steal(PyUnicode_FromString(kind == 0 ? "cpu" : "cuda"));
    if (!dev_name) throw PythonErrorSet{};
    device_type = dev_name.get();
    device_id = dev_id.get();
  }
  return parse_device(device_type ? device_type : cpu.get(), device_id ? device_id : zero.get());
}

// numpy() without the protocol checks; *copied tells whether the array is a copy.
Ref to_numpy(ModuleState* st, OrtValueObject* self, bool* copied) {
  const Tensor& t = self->tensor;
  if (!t.defined() && ortvalue_sparse(reinterpret_cast<PyObject*>(self)))
    ORTLITE_THROW(kInvalidArgument,
                  "the OrtValue holds a sparse tensor, which has no numpy form; "
                  "as_sparse_tensor() gives its values and indices");
  if (!t.defined()) ORTLITE_THROW(kInvalidArgument, "the OrtValue holds no value");
  if (!cpu_provider().holds(t)) {
    // Device memory: copied into a host buffer ortlite owns, which the array then views.
    *copied = true;
    const Tensor host = provider_of(t)->to_host(t, nullptr);
    return can_view(host) ? tensor_to_numpy_owned(st, host) : tensor_to_numpy_copy(host);
  }
  *copied = false;
  if (self->source && can_view(t)) {
    // The OrtValue keeps the source (an array, or an imported DLPack tensor) alive, so it
    // can be the view's base.
    const bool writeable = !PyArray_Check(self->source) ||
                           PyArray_ISWRITEABLE(reinterpret_cast<PyArrayObject*>(self->source));
    Py_INCREF(self);
    return tensor_to_numpy_view(t, reinterpret_cast<PyObject*>(self), writeable);
  }
  if (!self->source && t.buffer() && t.buffer()->kind() == BufferKind::kOwned && can_view(t))
    return tensor_to_numpy_owned(st, t);
  *copied = true;
  return tensor_to_numpy_copy(t);
}

// --- construction -------------------------------------------------------------------------

PyObject* ortvalue_from_numpy(PyTypeObject* cls, PyObject* args, PyObject* kwds) {
  ModuleState* st = state_from_type(cls);
  if (!st) return nullptr;
  static const char* kwlist[] = {"numpy_obj", "device_type", "device_id", nullptr};
  PyObject* obj = nullptr;
  PyObject* device_type = nullptr;
  PyObject* device_id = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|OO:ortvalue_from_numpy",
                                   const_cast<char**>(kwlist), &obj, &device_type, &device_id))
    return nullptr;
  try {
    const std::shared_ptr<const ExecutionProvider> device = device_arg(device_type, device_id);
    Ref keep;
    Tensor t = object_to_tensor(obj, DataType::kUndefined, "numpy_obj", &keep);
    if (!device->on_host())
      return ortvalue_new(st, device->to_device(t, nullptr), nullptr).release();
    return ortvalue_new(st, std::move(t), keep.get()).release();
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

// The array's memory seen as another element type of the same size (bfloat16 or float8 data
// in uint16 / uint8 arrays); shares the memory as ortvalue_from_numpy does.
PyObject* ortvalue_from_numpy_with_onnx_type(PyTypeObject* cls, PyObject* args, PyObject* kwds) {
  ModuleState* st = state_from_type(cls);
  if (!st) return nullptr;
  static const char* kwlist[] = {"data", "onnx_element_type", nullptr};
  PyObject* arr = nullptr;
  PyObject* type = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:ortvalue_from_numpy_with_onnx_type",
                                   const_cast<char**>(kwlist), &arr, &type))
    return nullptr;
  if (!PyArray_Check(arr)) {
    PyErr_Format(PyExc_TypeError,
                 "ortvalue_from_numpy_with_onnx_type: data must be a numpy.ndarray, not %.100s",
                 Py_TYPE(arr)->tp_name);
    return nullptr;
  }
  if (!PyLong_Check(type) || PyBool_Check(type)) {
    PyErr_Format(PyExc_TypeError,
                 "ortvalue_from_numpy_with_onnx_type: onnx_element_type must be an int "
                 "(TensorProto.DataType), not %.100s",
                 Py_TYPE(type)->tp_name);
    return nullptr;
  }
  try {
    int overflow = 0;
    const long code = PyLong_AsLongAndOverflow(type, &overflow);
    if (code == -1 && PyErr_Occurred()) throw PythonErrorSet{};
    const DataType want = static_cast<DataType>(code);
    if (overflow || code <= 0 || code > kMaxDataType || !dtype_supported(want))
      ORTLITE_THROW(kInvalidArgument, "ortvalue_from_numpy_with_onnx_type: ", code,
                    " is not an ONNX element type ortlite supports");
    if (want == DataType::kString)
      ORTLITE_THROW(kInvalidArgument,
                    "ortvalue_from_numpy_with_onnx_type: string tensors cannot be reinterpreted; "
                    "use ortvalue_from_numpy");
    Ref keep;
    Tensor t = object_to_tensor(arr, DataType::kUndefined, "data", &keep);
    if (t.dtype() == DataType::kString || dtype_size(t.dtype()) != dtype_size(want))
      ORTLITE_THROW(kInvalidArgument, "ortvalue_from_numpy_with_onnx_type: the array's elements (",
                    dtype_name(t.dtype()), ", ", dtype_size(t.dtype()),
                    " bytes) are not the size of ", dtype_name(want), "'s (", dtype_size(want),
                    " bytes)");
    Tensor as(want, t.shape(), t.buffer(), t.byte_offset());
    return ortvalue_new(st, std::move(as), keep.get()).release();
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* ortvalue_from_shape_and_type(PyTypeObject* cls, PyObject* args, PyObject* kwds) {
  ModuleState* st = state_from_type(cls);
  if (!st) return nullptr;
  static const char* kwlist[] = {"shape", "element_type", "device_type", "device_id", nullptr};
  PyObject* shape_obj = nullptr;
  PyObject* element_type = nullptr;
  PyObject* device_type = nullptr;
  PyObject* device_id = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|OO:ortvalue_from_shape_and_type",
                                   const_cast<char**>(kwlist), &shape_obj, &element_type,
                                   &device_type, &device_id))
    return nullptr;
  try {
    const std::shared_ptr<const ExecutionProvider> device = device_arg(device_type, device_id);
    if (PyUnicode_Check(shape_obj) || PyBytes_Check(shape_obj)) {
      PyErr_SetString(PyExc_TypeError, "shape must be a sequence of int");
      throw PythonErrorSet{};
    }
    Ref seq = Ref::steal(PySequence_Fast(shape_obj, "shape must be a sequence of int"));
    if (!seq) throw PythonErrorSet{};
    Shape shape;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* d = PySequence_Fast_GET_ITEM(seq.get(), i);
      const long long v = PyLong_AsLongLong(d);
      if (v == -1 && PyErr_Occurred()) throw PythonErrorSet{};
      if (v < 0) ORTLITE_THROW(kInvalidArgument, "shape has a negative dimension: ", v);
      shape.push_back(static_cast<int64_t>(v));
    }
    const DataType dt = dtype_from_python(element_type);
    if (!device->on_host()) {
      Tensor t = device->allocate(dt, shape, nullptr);
      device->zero(t);
      return ortvalue_new(st, std::move(t), nullptr).release();
    }
    return ortvalue_new(st, Tensor::empty(dt, shape), nullptr).release();
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

// --- methods ------------------------------------------------------------------------------

PyObject* ortvalue_numpy(PyObject* self, PyObject*) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  try {
    bool copied = false;
    return to_numpy(st, as_ov(self), &copied).release();
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* ortvalue_array(PyObject* self, PyObject* args, PyObject* kwds) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  static const char* kwlist[] = {"dtype", "copy", nullptr};
  PyObject* dtype = Py_None;
  PyObject* copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "|OO:__array__", const_cast<char**>(kwlist), &dtype,
                                   &copy))
    return nullptr;
  try {
    const int want_copy = copy == Py_None ? -1 : PyObject_IsTrue(copy);
    if (copy != Py_None && want_copy < 0) throw PythonErrorSet{};
    bool copied = false;
    Ref arr = to_numpy(st, as_ov(self), &copied);
    if (dtype != Py_None) {
      PyArray_Descr* descr = nullptr;
      if (!PyArray_DescrConverter(dtype, &descr)) throw PythonErrorSet{};
      if (PyArray_EquivTypes(PyArray_DESCR(reinterpret_cast<PyArrayObject*>(arr.get())), descr)) {
        Py_DECREF(descr);
      } else {
        if (want_copy == 0) {
          Py_DECREF(descr);
          PyErr_SetString(PyExc_ValueError,
                          "Unable to avoid copy while creating an array as requested.");
          throw PythonErrorSet{};
        }
        // Steals descr.
        arr = Ref::steal(PyArray_CastToType(reinterpret_cast<PyArrayObject*>(arr.get()), descr, 0));
        if (!arr) throw PythonErrorSet{};
        copied = true;
      }
    }
    if (want_copy == 0 && copied) {
      PyErr_SetString(PyExc_ValueError,
                      "Unable to avoid copy while creating an array as requested.");
      throw PythonErrorSet{};
    }
    if (want_copy == 1 && !copied) {
      arr = Ref::steal(PyArray_NewCopy(reinterpret_cast<PyArrayObject*>(arr.get()), NPY_CORDER));
      if (!arr) throw PythonErrorSet{};
    }
    return arr.release();
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* ortvalue_shape(PyObject* self, PyObject*) {
  if (PyObject* sp = ortvalue_sparse(self)) return sparse_tensor_dense_shape_list(sp);
  const Tensor& t = as_ov(self)->tensor;
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(t.rank()));
  if (!list) return nullptr;
  for (size_t i = 0; i < t.rank(); ++i) {
    PyObject* d = PyLong_FromLongLong(t.dim(i));
    if (!d) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), d);
  }
  return list;
}

PyObject* ortvalue_data_type(PyObject* self, PyObject*) {
  if (PyObject* sp = ortvalue_sparse(self)) return sparse_tensor_data_type(sp);
  const Tensor& t = as_ov(self)->tensor;
  return PyUnicode_FromFormat("tensor(%s)", dtype_name(t.dtype()));
}

PyObject* ortvalue_element_type(PyObject* self, PyObject*) {
  return PyLong_FromLong(static_cast<long>(as_ov(self)->tensor.dtype()));
}

PyObject* ortvalue_device_name(PyObject* self, PyObject*) {
  const Tensor& t = as_ov(self)->tensor;
  const bool cuda = t.buffer() && t.buffer()->device().type == DeviceType::kCUDA;
  return PyUnicode_FromString(cuda ? "cuda" : "cpu");
}

PyObject* ortvalue_is_tensor(PyObject* self, PyObject*) {
  return PyBool_FromLong(as_ov(self)->tensor.defined());
}

PyObject* ortvalue_has_value(PyObject* self, PyObject*) {
  return PyBool_FromLong(as_ov(self)->tensor.defined() || ortvalue_sparse(self));
}

PyObject* ortvalue_false(PyObject*, PyObject*) {
  Py_RETURN_FALSE;
}

PyObject* ortvalue_data_ptr(PyObject* self, PyObject*) {
  return PyLong_FromUnsignedLongLong(reinterpret_cast<uintptr_t>(as_ov(self)->tensor.raw_data()));
}

PyObject* ortvalue_tensor_size_in_bytes(PyObject* self, PyObject*) {
  return PyLong_FromSize_t(as_ov(self)->tensor.nbytes());
}

PyObject* ortvalue_update_inplace(PyObject* self, PyObject* arg) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  OrtValueObject* ov = as_ov(self);
  try {
    Tensor& dst = ov->tensor;
    if (!dst.defined()) ORTLITE_THROW(kInvalidArgument, "the OrtValue holds no value");
    if (!PyArray_Check(arg)) {
      PyErr_Format(PyExc_TypeError, "update_inplace expects a numpy array, not %.100s",
                   Py_TYPE(arg)->tp_name);
      throw PythonErrorSet{};
    }
    if (ov->source && PyArray_Check(ov->source) &&
        !PyArray_ISWRITEABLE(reinterpret_cast<PyArrayObject*>(ov->source)))
      ORTLITE_THROW(kInvalidArgument, "the OrtValue views a read-only array");
    Ref keep;
    Tensor src = object_to_tensor(arg, dst.dtype(), "np_arr", &keep);
    if (src.dtype() != dst.dtype())
      ORTLITE_THROW(kInvalidArgument, "update_inplace: element type tensor(",
                    dtype_name(src.dtype()), ") does not match the OrtValue's tensor(",
                    dtype_name(dst.dtype()), ")");
    if (src.shape() != dst.shape())
      ORTLITE_THROW(kInvalidArgument, "update_inplace: shape ", shape_to_string(src.shape()),
                    " does not match the OrtValue's shape ", shape_to_string(dst.shape()));
    if (!cpu_provider().holds(dst)) {
      provider_of(dst)->write_from_host(dst, src.raw_data(), dst.nbytes());
    } else if (dst.dtype() == DataType::kString) {
      const std::string* s = src.data<std::string>();
      std::string* d = dst.data<std::string>();
      for (int64_t i = 0; i < dst.numel(); ++i) d[i] = s[i];
    } else if (dst.nbytes()) {
      std::memmove(dst.raw_data(), src.raw_data(), dst.nbytes());
    }
    Py_RETURN_NONE;
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* ortvalue_repr(PyObject* self) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  try {
    const Tensor& t = as_ov(self)->tensor;
    const std::string shape = shape_to_string(t.shape());
    if (!cpu_provider().holds(t))
      return PyUnicode_FromFormat("<ortlite.OrtValue tensor(%s) shape=%s device=cuda:%d>",
                                  dtype_name(t.dtype()), shape.c_str(), t.buffer()->device().id);
    return PyUnicode_FromFormat("<ortlite.OrtValue tensor(%s) shape=%s>", dtype_name(t.dtype()),
                                shape.c_str());
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

// --- GC -----------------------------------------------------------------------------------

int ortvalue_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(as_ov(self)->source);
  return 0;
}

int ortvalue_clear(PyObject* self) {
  OrtValueObject* ov = as_ov(self);
  // The tensor goes first: it must never outlive the memory it borrows.
  ov->tensor = Tensor();
  Py_CLEAR(ov->source);
  return 0;
}

void ortvalue_dealloc(PyObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  if (as_ov(self)->weakreflist) PyObject_ClearWeakRefs(self);
  ortvalue_clear(self);
  as_ov(self)->tensor.~Tensor();
  tp->tp_free(self);
  Py_DECREF(tp);
}

PyMethodDef ortvalue_methods[] = {
    {"ortvalue_from_numpy", as_cfunc(ortvalue_from_numpy),
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     PyDoc_STR("ortvalue_from_numpy($type, numpy_obj, device_type='cpu', device_id=0)\n--\n\n"
               "An OrtValue over a numpy array (or anything numpy.asarray accepts). On the CPU\n"
               "it shares the array's memory when the array is C-contiguous, aligned and in\n"
               "native byte order, and keeps the array alive; otherwise it holds a copy.\n"
               "device_type may also be an OrtDevice (cpu or cuda).")},
    {"ortvalue_from_numpy_with_onnx_type", as_cfunc(ortvalue_from_numpy_with_onnx_type),
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     PyDoc_STR("ortvalue_from_numpy_with_onnx_type($type, data, onnx_element_type)\n--\n\n"
               "An OrtValue over a numpy array whose elements are read as the ONNX element type\n"
               "onnx_element_type (a TensorProto.DataType number) of the same size: bfloat16 in a\n"
               "uint16 array, float8 in a uint8 one. Shares the memory (keeping the array alive)\n"
               "as ortvalue_from_numpy does.")},
    {"ortvalue_from_shape_and_type", as_cfunc(ortvalue_from_shape_and_type),
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     PyDoc_STR("ortvalue_from_shape_and_type($type, shape, element_type, device_type='cpu', "
               "device_id=0)\n--\n\n"
               "A zero-filled OrtValue of the given shape. element_type is a numpy dtype or type\n"
               "(numpy.float32, ...) or an ONNX TensorProto element type number.")},
    {"numpy", as_cfunc(ortvalue_numpy), METH_NOARGS,
     PyDoc_STR("numpy($self, /)\n--\n\n"
               "The value as a numpy array: a view when the OrtValue owns or keeps alive the\n"
               "memory, a copy otherwise (strings: an object array of str).")},
    {"__array__", as_cfunc(ortvalue_array), METH_VARARGS | METH_KEYWORDS,
     PyDoc_STR("__array__($self, dtype=None, copy=None)\n--\n\nnumpy's array protocol.")},
    {"shape", as_cfunc(ortvalue_shape), METH_NOARGS,
     PyDoc_STR("shape($self, /)\n--\n\nThe tensor's shape as a list of int.")},
    {"data_type", as_cfunc(ortvalue_data_type), METH_NOARGS,
     PyDoc_STR("data_type($self, /)\n--\n\nThe type string, e.g. 'tensor(float)'.")},
    {"element_type", as_cfunc(ortvalue_element_type), METH_NOARGS,
     PyDoc_STR("element_type($self, /)\n--\n\nThe ONNX TensorProto element type number.")},
    {"device_name", as_cfunc(ortvalue_device_name), METH_NOARGS,
     PyDoc_STR("device_name($self, /)\n--\n\nThe device holding the data: 'cpu' or 'cuda'.")},
    {"is_tensor", as_cfunc(ortvalue_is_tensor), METH_NOARGS,
     PyDoc_STR("is_tensor($self, /)\n--\n\nTrue: ortlite OrtValues hold tensors.")},
    {"is_tensor_sequence", as_cfunc(ortvalue_false), METH_NOARGS,
     PyDoc_STR("is_tensor_sequence($self, /)\n--\n\nFalse: ortlite OrtValues hold tensors.")},
    {"is_sparse_tensor", as_cfunc(ortvalue_is_sparse_tensor), METH_NOARGS,
     PyDoc_STR("is_sparse_tensor($self, /)\n--\n\nTrue when the OrtValue holds a SparseTensor.")},
    {"has_value", as_cfunc(ortvalue_has_value), METH_NOARGS,
     PyDoc_STR("has_value($self, /)\n--\n\nTrue when the OrtValue holds a value.")},
    {"data_ptr", as_cfunc(ortvalue_data_ptr), METH_NOARGS,
     PyDoc_STR("data_ptr($self, /)\n--\n\nThe address of the first element, as an int.")},
    {"tensor_size_in_bytes", as_cfunc(ortvalue_tensor_size_in_bytes), METH_NOARGS,
     PyDoc_STR("tensor_size_in_bytes($self, /)\n--\n\nThe size of the tensor's data in bytes.")},
    {"update_inplace", as_cfunc(ortvalue_update_inplace), METH_O,
     PyDoc_STR("update_inplace($self, np_arr, /)\n--\n\n"
               "Copies a numpy array of the same element type and shape into the OrtValue's\n"
               "memory.")},
    // Sparse tensors (src/python/sparse_tensor.cc)
    {"ort_value_from_sparse_tensor", as_cfunc(ortvalue_from_sparse_tensor), METH_O | METH_CLASS,
     PyDoc_STR("ort_value_from_sparse_tensor($type, sparse_tensor, /)\n--\n\n"
               "An OrtValue holding (a reference to) a SparseTensor.")},
    {"as_sparse_tensor", as_cfunc(ortvalue_as_sparse_tensor), METH_NOARGS,
     PyDoc_STR("as_sparse_tensor($self, /)\n--\n\nThe SparseTensor the OrtValue holds.")},
    // DLPack (src/python/dlpack.cc)
    {"from_dlpack", as_cfunc(ortvalue_from_dlpack), METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     PyDoc_STR("from_dlpack($type, data, is_bool_tensor=False)\n--\n\n"
               "An OrtValue sharing the memory of a DLPack tensor: an object with __dlpack__\n"
               "or a 'dltensor' capsule (renamed 'used_dltensor'). CPU, C-contiguous only.\n"
               "is_bool_tensor=True reads uint8 data as tensor(bool).")},
    {"__dlpack__", as_cfunc(ortvalue_dunder_dlpack), METH_VARARGS | METH_KEYWORDS,
     PyDoc_STR("__dlpack__($self, stream=None, *, max_version=None, dl_device=None, "
               "copy=None)\n--\n\n"
               "A 'dltensor' capsule over the tensor's memory, which stays alive as long as\n"
               "the consumer holds it. tensor(bool) leaves as uint8, as in onnxruntime.")},
    {"__dlpack_device__", as_cfunc(ortvalue_dlpack_device), METH_NOARGS,
     PyDoc_STR("__dlpack_device__($self, /)\n--\n\n(device type, device id): (1, 0) is the "
               "CPU.")},
    {"to_dlpack", as_cfunc(ortvalue_to_dlpack), METH_NOARGS,
     PyDoc_STR("to_dlpack($self, /)\n--\n\nThe same capsule as __dlpack__().")},
    {nullptr, nullptr, 0, nullptr},
};

PyMemberDef ortvalue_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(OrtValueObject, weakreflist), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyType_Slot ortvalue_slots[] = {
    {Py_tp_dealloc, as_slot(ortvalue_dealloc)},
    {Py_tp_traverse, as_slot(ortvalue_traverse)},
    {Py_tp_clear, as_slot(ortvalue_clear)},
    {Py_tp_repr, as_slot(ortvalue_repr)},
    {Py_tp_methods, ortvalue_methods},
    {Py_tp_members, ortvalue_members},
    {Py_tp_doc, const_cast<char*>(
                    "A tensor value for run_with_ort_values and SessionOptions.add_initializer.\n"
                    "Create one with OrtValue.ortvalue_from_numpy or\n"
                    "OrtValue.ortvalue_from_shape_and_type.")},
    {0, nullptr},
};

PyType_Spec ortvalue_spec = {
    "ortlite.OrtValue",
    sizeof(OrtValueObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE |
        Py_TPFLAGS_DISALLOW_INSTANTIATION,
    ortvalue_slots,
};

}  // namespace

Tensor ortvalue_tensor(PyObject* o) {
  const Tensor& t = reinterpret_cast<OrtValueObject*>(o)->tensor;
  if (!t.defined() && ortvalue_sparse(o))
    ORTLITE_THROW(kNotImplemented,
                  "an OrtValue holding a sparse tensor cannot be a feed or be an initializer: "
                  "ortlite's run path takes dense tensors (densify it first)");
  return cpu_provider().holds(t) ? t : provider_of(t)->to_host(t, nullptr);
}

const Tensor& ortvalue_raw_tensor(PyObject* o) {
  const Tensor& t = reinterpret_cast<OrtValueObject*>(o)->tensor;
  if (!t.defined() && ortvalue_sparse(o))
    ORTLITE_THROW(kNotImplemented,
                  "an OrtValue holding a sparse tensor cannot be a feed or be bound: "
                  "ortlite's run path takes dense tensors (densify it first)");
  return t;
}

Ref ortvalue_new(ModuleState* st, Tensor t, PyObject* source) {
  PyTypeObject* tp = st->ortvalue_type;
  PyObject* obj = tp->tp_alloc(tp, 0);
  if (!obj) throw PythonErrorSet{};
  OrtValueObject* ov = as_ov(obj);
  new (&ov->tensor) Tensor(std::move(t));
  Py_XINCREF(source);
  ov->source = source;
  return Ref::steal(obj);
}

int ortvalue_setup_types(PyObject* module) {
  ModuleState* st = get_module_state(module);
  st->ortvalue_type =
      reinterpret_cast<PyTypeObject*>(PyType_FromModuleAndSpec(module, &ortvalue_spec, nullptr));
  if (!st->ortvalue_type) return -1;
  return PyModule_AddType(module, st->ortvalue_type);
}

}  // namespace ortlite::py
