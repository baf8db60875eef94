#include "python/numpy_bridge.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>

#include "ortlite/status.h"
#include "python/errors.h"

namespace ortlite::py {

// ---------------------------------------------------------------------------------------
// BufferOwner: the base object of a numpy view over a buffer ortlite allocated. It holds
// one reference to the Buffer and drops it in its dealloc (with the GIL held, but the
// Buffer itself never calls into Python).

namespace {

struct BufferOwnerObject {
  PyObject_HEAD Buffer* buffer;
};

void buffer_owner_dealloc(BufferOwnerObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  if (Buffer* b = std::exchange(self->buffer, nullptr)) b->release_ref();
  tp->tp_free(self);
  Py_DECREF(tp);
}

PyObject* buffer_owner_repr(BufferOwnerObject* self) {
  const size_t n = self->buffer ? self->buffer->size() : 0;
  return PyUnicode_FromFormat("<ortlite buffer of %zu bytes>", n);
}

PyType_Slot buffer_owner_slots[] = {
    {Py_tp_dealloc, as_slot(buffer_owner_dealloc)},
    {Py_tp_repr, as_slot(buffer_owner_repr)},
    {Py_tp_doc, const_cast<char*>("Keeps an ortlite buffer alive while numpy arrays view it.")},
    {0, nullptr},
};

PyType_Spec buffer_owner_spec = {
    "ortlite._ortlite.BufferOwner",
    sizeof(BufferOwnerObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    buffer_owner_slots,
};

// ---------------------------------------------------------------------------------------
// Element types numpy lacks (bfloat16 and the narrow types) travel as ml_dtypes' numpy
// dtypes (the package onnx itself uses), whose memory layout is ortlite's: one element per
// byte (two for bfloat16). ml_dtypes is imported only when such a tensor crosses.

// numpy's own dtypes, by kind and item size.
DataType builtin_dtype_of_descr(PyArray_Descr* descr) {
  const npy_intp size = PyDataType_ELSIZE(descr);
  switch (descr->kind) {
    case 'b':
      return size == 1 ? DataType::kBool : DataType::kUndefined;
    case 'f':
      if (size == 2) return DataType::kFloat16;
      if (size == 4) return DataType::kFloat;
      if (size == 8) return DataType::kDouble;
      return DataType::kUndefined;
    case 'i':
      if (size == 1) return DataType::kInt8;
      if (size == 2) return DataType::kInt16;
      if (size == 4) return DataType::kInt32;
      if (size == 8) return DataType::kInt64;
      return DataType::kUndefined;
    case 'u':
      if (size == 1) return DataType::kUInt8;
      if (size == 2) return DataType::kUInt16;
      if (size == 4) return DataType::kUInt32;
      if (size == 8) return DataType::kUInt64;
      return DataType::kUndefined;
    case 'U':
    case 'S':
    case 'O':
      return DataType::kString;
    case 'V':
      // Unstructured np.void: each element's bytes are one string, as in onnxruntime.
      // Structured and subarray dtypes have no ONNX type, and ml_dtypes' types (kind 'V'
      // too, with scalar types of their own) are looked up by ml_dtype_of.
      return descr->typeobj == &PyVoidArrType_Type && !PyDataType_HASFIELDS(descr) &&
                     !PyDataType_HASSUBARRAY(descr)
                 ? DataType::kString
                 : DataType::kUndefined;
    default:
      return DataType::kUndefined;
  }
}

const char* ml_dtypes_name(DataType t) {
  switch (t) {
    case DataType::kBFloat16:
      return "bfloat16";
    case DataType::kFloat8E4M3FN:
      return "float8_e4m3fn";
    case DataType::kFloat8E4M3FNUZ:
      return "float8_e4m3fnuz";
    case DataType::kFloat8E5M2:
      return "float8_e5m2";
    case DataType::kFloat8E5M2FNUZ:
      return "float8_e5m2fnuz";
    case DataType::kFloat8E8M0:
      return "float8_e8m0fnu";
    case DataType::kFloat4E2M1:
      return "float4_e2m1fn";
    case DataType::kInt4:
      return "int4";
    case DataType::kUInt4:
      return "uint4";
    case DataType::kInt2:
      return "int2";
    case DataType::kUInt2:
      return "uint2";
    default:
      return nullptr;
  }
}

constexpr DataType kMlDtypesTypes[] = {
    DataType::kBFloat16,   DataType::kFloat8E4M3FN,   DataType::kFloat8E4M3FNUZ,
    DataType::kFloat8E5M2, DataType::kFloat8E5M2FNUZ, DataType::kFloat8E8M0,
    DataType::kFloat4E2M1, DataType::kInt4,           DataType::kUInt4,
    DataType::kInt2,       DataType::kUInt2};

// The DataType of an ml_dtypes dtype; kUndefined for anything else. Looks only at an
// ml_dtypes that is already imported (an array of its dtypes implies it is).
DataType ml_dtype_of(PyArray_Descr* descr) {
  Ref name = Ref::steal(PyUnicode_FromString("ml_dtypes"));
  if (!name) throw PythonErrorSet{};
  Ref mod = Ref::steal(PyImport_GetModule(name.get()));
  if (!mod) {
    if (PyErr_Occurred()) throw PythonErrorSet{};
    return DataType::kUndefined;
  }
  for (DataType t : kMlDtypesTypes) {
    Ref type = Ref::steal(PyObject_GetAttrString(mod.get(), ml_dtypes_name(t)));
    if (!type) {
      PyErr_Clear();  // an older ml_dtypes without this type
      continue;
    }
    if (type.get() == reinterpret_cast<PyObject*>(descr->typeobj)) return t;
  }
  return DataType::kUndefined;
}

// A new reference to the numpy dtype of t (imports ml_dtypes for the types numpy lacks).
PyArray_Descr* descr_of(DataType t) {
  const int tn = npy_type_of(t);
  if (tn >= 0) {
    PyArray_Descr* d = PyArray_DescrFromType(tn);
    if (!d) throw PythonErrorSet{};
    return d;
  }
  const char* name = ml_dtypes_name(t);
  if (!name)
    ORTLITE_THROW(kNotImplemented, "element type ", dtype_name(t), " has no numpy equivalent");
  Ref mod = Ref::steal(PyImport_ImportModule("ml_dtypes"));
  if (!mod) {
    if (!PyErr_ExceptionMatches(PyExc_ImportError)) throw PythonErrorSet{};
    PyErr_Clear();
    ORTLITE_THROW(kNotImplemented, "element type ", dtype_name(t),
                  " has no numpy dtype; install ml_dtypes to exchange it with numpy");
  }
  Ref type = Ref::steal(PyObject_GetAttrString(mod.get(), name));
  if (!type) {
    PyErr_Clear();
    ORTLITE_THROW(kNotImplemented, "element type ", dtype_name(t), " needs ml_dtypes.", name,
                  ", which the installed ml_dtypes lacks");
  }
  PyArray_Descr* d = nullptr;
  if (!PyArray_DescrConverter(type.get(), &d)) throw PythonErrorSet{};
  return d;
}

void shape_to_dims(const Tensor& t, npy_intp* dims) {
  if (t.rank() > static_cast<size_t>(NPY_MAXDIMS))
    ORTLITE_THROW(kInvalidArgument, "tensor of rank ", t.rank(),
                  " has more dimensions than numpy's ", NPY_MAXDIMS);
  // numpy refuses ("array is too big") an array whose nonzero dims times the item size
  // exceed its largest size, even when another dim is 0 and the array is empty.
  const size_t item = t.dtype() == DataType::kString ? sizeof(PyObject*) : dtype_size(t.dtype());
  uint64_t nbytes = item == 0 ? 1 : item;
  for (size_t i = 0; i < t.rank(); ++i) {
    const uint64_t d = static_cast<uint64_t>(t.dim(i));
    if (d == 0) continue;
    if (nbytes > static_cast<uint64_t>(NPY_MAX_INTP) / d) {
      ORTLITE_THROW(kFail, "a tensor(", dtype_name(t.dtype()), ") of shape ",
                    shape_to_string(t.shape()),
                    " cannot be a numpy array: numpy needs the product of its nonzero "
                    "dimensions times the element size (",
                    item, " bytes) to fit in ", NPY_MAX_INTP, " bytes");
    }
    nbytes *= d;
  }
  for (size_t i = 0; i < t.rank(); ++i) dims[i] = static_cast<npy_intp>(t.dim(i));
}

void require_cpu(const Tensor& t) {
  if (t.buffer() && t.buffer()->device().type != DeviceType::kCPU)
    ORTLITE_THROW(kEPFail, "tensor is on a device whose memory numpy cannot read");
}

std::string python_str(PyObject* o) {
  Ref s = Ref::steal(PyObject_Str(o));
  if (!s) throw PythonErrorSet{};
  std::string out;
  if (!str_to_utf8(s.get(), "str()", &out)) throw PythonErrorSet{};
  return out;
}

// Encodes one element of an object array into a std::string: str as UTF-8, bytes as is.
// Returns false for other objects (the caller converts those with str()).
bool element_to_string(PyObject* item, std::string* out) {
  if (item && PyUnicode_Check(item)) {
    Ref b = Ref::steal(PyUnicode_AsEncodedString(item, "utf-8", "surrogateescape"));
    if (!b) throw PythonErrorSet{};
    out->assign(PyBytes_AS_STRING(b.get()), static_cast<size_t>(PyBytes_GET_SIZE(b.get())));
    return true;
  }
  if (item && PyBytes_Check(item)) {
    out->assign(PyBytes_AS_STRING(item), static_cast<size_t>(PyBytes_GET_SIZE(item)));
    return true;
  }
  return false;
}

// np.void elements: every element is its item size of bytes, trailing NULs included
// (onnxruntime keeps them too; an 'S' array's elements end at their first NUL instead).
Tensor voids_to_tensor(PyArrayObject* a) {
  // A C-contiguous array of the same dtype: `a` itself when it is one, else a copy.
  PyArray_Descr* descr = PyArray_DESCR(a);
  Py_INCREF(descr);  // PyArray_FromAny steals it
  Ref c = Ref::steal(PyArray_FromAny(reinterpret_cast<PyObject*>(a), descr, 0, 0,
                                     NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ENSUREARRAY, nullptr));
  if (!c) throw PythonErrorSet{};
  auto* ca = reinterpret_cast<PyArrayObject*>(c.get());
  const npy_intp n = PyArray_SIZE(ca);
  const size_t item = static_cast<size_t>(PyArray_ITEMSIZE(ca));
  Shape shape(PyArray_DIMS(ca), PyArray_DIMS(ca) + PyArray_NDIM(ca));
  BufferPtr buf = BufferPtr::adopt(Buffer::allocate_strings(static_cast<size_t>(n)));
  auto* dst = static_cast<std::string*>(buf->data());
  const char* src = static_cast<const char*>(PyArray_DATA(ca));
  for (npy_intp i = 0; i < n; ++i) dst[i].assign(src + static_cast<size_t>(i) * item, item);
  return Tensor(DataType::kString, std::move(shape), std::move(buf));
}

Tensor strings_to_tensor(PyArrayObject* a) {
  if (PyArray_DESCR(a)->typeobj == &PyVoidArrType_Type) return voids_to_tensor(a);
  Ref obj = Ref::steal(
      PyArray_FromAny(reinterpret_cast<PyObject*>(a), PyArray_DescrFromType(NPY_OBJECT), 0, 0,
                      NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_ENSUREARRAY, nullptr));
  if (!obj) throw PythonErrorSet{};
  auto* oa = reinterpret_cast<PyArrayObject*>(obj.get());
  const npy_intp n = PyArray_SIZE(oa);
  auto** items = static_cast<PyObject**>(PyArray_DATA(oa));
  bool plain = true;
  for (npy_intp i = 0; i < n && plain; ++i)
    plain = items[i] && (PyUnicode_Check(items[i]) || PyBytes_Check(items[i]));
  if (!plain) {
    // str() runs Python code that could mutate the caller's array: work on a private copy
    // whose items we own.
    obj = Ref::steal(PyArray_NewCopy(oa, NPY_CORDER));
    if (!obj) throw PythonErrorSet{};
    oa = reinterpret_cast<PyArrayObject*>(obj.get());
    items = static_cast<PyObject**>(PyArray_DATA(oa));
  }
  Shape shape(PyArray_DIMS(oa), PyArray_DIMS(oa) + PyArray_NDIM(oa));
  BufferPtr buf = BufferPtr::adopt(Buffer::allocate_strings(static_cast<size_t>(n)));
  auto* dst = static_cast<std::string*>(buf->data());
  for (npy_intp i = 0; i < n; ++i) {
    if (!element_to_string(items[i], &dst[i])) dst[i] = python_str(items[i] ? items[i] : Py_None);
  }
  return Tensor(DataType::kString, std::move(shape), std::move(buf));
}

Tensor array_to_tensor(PyArrayObject* a, const std::string& name, Ref* keepalive) {
  PyArray_Descr* descr = PyArray_DESCR(a);
  const DataType dt = dtype_of_descr(descr);
  if (dt == DataType::kUndefined) {
    const std::string desc = python_str(reinterpret_cast<PyObject*>(descr));
    ORTLITE_THROW(kInvalidArgument, "input '", name, "': numpy dtype ", desc,
                  " has no ONNX element type ortlite supports");
  }
  if (dt == DataType::kString) {
    *keepalive = Ref();
    return strings_to_tensor(a);
  }
  // Returns `a` itself when it is already a C-contiguous, aligned, native-order base-class
  // ndarray of the canonical dtype; a fresh copy otherwise. The caller's array is never
  // written.
  // PyArray_FromAny steals the descr, also on failure.
  Ref c = Ref::steal(PyArray_FromAny(reinterpret_cast<PyObject*>(a), descr_of(dt), 0, 0,
                                     NPY_ARRAY_CARRAY_RO | NPY_ARRAY_ENSUREARRAY, nullptr));
  if (!c) throw PythonErrorSet{};
  auto* ca = reinterpret_cast<PyArrayObject*>(c.get());
  Shape shape(PyArray_DIMS(ca), PyArray_DIMS(ca) + PyArray_NDIM(ca));
  const size_t nbytes = static_cast<size_t>(PyArray_NBYTES(ca));
  BufferPtr buf =
      BufferPtr::adopt(Buffer::wrap(PyArray_DATA(ca), nbytes, BufferKind::kBorrowed, {}));
  Tensor t(dt, std::move(shape), std::move(buf));
  *keepalive = std::move(c);
  return t;
}

}  // namespace

// ---------------------------------------------------------------------------------------

DataType dtype_of_descr(PyArray_Descr* descr) {
  const DataType t = builtin_dtype_of_descr(descr);
  return t != DataType::kUndefined ? t : ml_dtype_of(descr);
}

int npy_type_of(DataType t) {
  switch (t) {
    case DataType::kFloat:
      return NPY_FLOAT32;
    case DataType::kDouble:
      return NPY_FLOAT64;
    case DataType::kFloat16:
      return NPY_FLOAT16;
    case DataType::kInt8:
      return NPY_INT8;
    case DataType::kInt16:
      return NPY_INT16;
    case DataType::kInt32:
      return NPY_INT32;
    case DataType::kInt64:
      return NPY_INT64;
    case DataType::kUInt8:
      return NPY_UINT8;
    case DataType::kUInt16:
      return NPY_UINT16;
    case DataType::kUInt32:
      return NPY_UINT32;
    case DataType::kUInt64:
      return NPY_UINT64;
    case DataType::kBool:
      return NPY_BOOL;
    case DataType::kString:
      return NPY_OBJECT;
    default:
      return -1;
  }
}

DataType dtype_from_python(PyObject* element_type) {
  if (PyLong_Check(element_type) && !PyBool_Check(element_type)) {
    const long v = PyLong_AsLong(element_type);
    if (v == -1 && PyErr_Occurred()) throw PythonErrorSet{};
    const auto dt = static_cast<DataType>(v);
    if (v <= 0 || v > kMaxDataType || !dtype_supported(dt) || !has_numpy_dtype(dt))
      ORTLITE_THROW(kInvalidArgument, "element type ", v,
                    " is not an ONNX element type ortlite supports");
    return dt;
  }
  PyArray_Descr* descr = nullptr;
  if (!PyArray_DescrConverter(element_type, &descr)) throw PythonErrorSet{};
  Ref hold = Ref::steal(reinterpret_cast<PyObject*>(descr));
  const DataType dt = dtype_of_descr(descr);
  if (dt == DataType::kUndefined)
    ORTLITE_THROW(kInvalidArgument, "numpy dtype ", python_str(hold.get()),
                  " has no ONNX element type ortlite supports");
  return dt;
}

Tensor object_to_tensor(PyObject* obj, DataType want, const std::string& name, Ref* keepalive) {
  if (PyArray_Check(obj))
    return array_to_tensor(reinterpret_cast<PyArrayObject*>(obj), name, keepalive);
  PyArray_Descr* descr = nullptr;
  if (want != DataType::kUndefined) {
    if (!has_numpy_dtype(want))
      ORTLITE_THROW(kNotImplemented, "input '", name, "' has element type ", dtype_name(want),
                    ", which numpy cannot represent: feed an OrtValue");
    descr = descr_of(want);
  }
  // PyArray_FromAny steals descr, also on failure.
  Ref arr = Ref::steal(PyArray_FromAny(obj, descr, 0, 0, NPY_ARRAY_CARRAY, nullptr));
  if (!arr) throw PythonErrorSet{};
  return array_to_tensor(reinterpret_cast<PyArrayObject*>(arr.get()), name, keepalive);
}

bool has_numpy_dtype(DataType t) {
  return npy_type_of(t) >= 0 || ml_dtypes_name(t) != nullptr;
}

bool can_view(const Tensor& t) {
  if (t.dtype() == DataType::kString || !has_numpy_dtype(t.dtype())) return false;
  if (t.numel() == 0 || !t.buffer() || t.buffer()->device().type != DeviceType::kCPU) return false;
  const size_t align = dtype_size(t.dtype());
  return align != 0 && reinterpret_cast<uintptr_t>(t.raw_data()) % align == 0;
}

Ref tensor_to_numpy_copy(const Tensor& t) {
  require_cpu(t);
  npy_intp dims[NPY_MAXDIMS];
  shape_to_dims(t, dims);
  const int nd = static_cast<int>(t.rank());
  if (t.dtype() == DataType::kString) {
    Ref arr = Ref::steal(PyArray_SimpleNew(nd, dims, NPY_OBJECT));
    if (!arr) throw PythonErrorSet{};
    auto** items =
        static_cast<PyObject**>(PyArray_DATA(reinterpret_cast<PyArrayObject*>(arr.get())));
    const std::string* src = t.data<std::string>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      PyObject* s = str_from_utf8(src[i]);
      if (!s) throw PythonErrorSet{};
      Py_XSETREF(items[i], s);
    }
    return arr;
  }
  // Steals the descr.
  Ref arr = Ref::steal(PyArray_NewFromDescr(&PyArray_Type, descr_of(t.dtype()), nd, dims, nullptr,
                                            nullptr, 0, nullptr));
  if (!arr) throw PythonErrorSet{};
  const size_t n = t.nbytes();
  if (n) std::memcpy(PyArray_DATA(reinterpret_cast<PyArrayObject*>(arr.get())), t.raw_data(), n);
  return arr;
}

Ref tensor_to_numpy_view(const Tensor& t, PyObject* base, bool writeable) {
  Ref owner = Ref::steal(base);
  if (!can_view(t)) ORTLITE_THROW(kEngineError, "internal error: tensor cannot be viewed by numpy");
  npy_intp dims[NPY_MAXDIMS];
  shape_to_dims(t, dims);
  PyArray_Descr* descr = descr_of(t.dtype());
  PyObject* arr = PyArray_NewFromDescr(&PyArray_Type, descr, static_cast<int>(t.rank()), dims,
                                       nullptr, t.raw_data(),
                                       writeable ? NPY_ARRAY_CARRAY : NPY_ARRAY_CARRAY_RO, nullptr);
  if (!arr) throw PythonErrorSet{};
  // Steals the owner even when it fails; the array does not own its data, so dropping it
  // frees nothing of ours.
  if (PyArray_SetBaseObject(reinterpret_cast<PyArrayObject*>(arr), owner.release()) < 0) {
    Py_DECREF(arr);
    throw PythonErrorSet{};
  }
  return Ref::steal(arr);
}

Ref tensor_to_numpy_owned(ModuleState* st, const Tensor& t) {
  PyTypeObject* tp = st->buffer_owner_type;
  auto* owner = reinterpret_cast<BufferOwnerObject*>(tp->tp_alloc(tp, 0));
  if (!owner) throw PythonErrorSet{};
  owner->buffer = t.buffer().get();
  owner->buffer->add_ref();
  return tensor_to_numpy_view(t, reinterpret_cast<PyObject*>(owner), true);
}

bool exclusive_output(const Tensor* const* outs, size_t n, size_t i) {
  // Quadratic in the number of outputs, which is small; no hash tables on the per-call path.
  const Buffer* b = outs[i]->buffer().get();
  if (!b) return false;
  int32_t refs_in_outs = 0;
  for (size_t j = 0; j < n; ++j) {
    if (outs[j]->buffer().get() != b) continue;
    if (j < i) return false;  // an earlier output already takes this buffer
    ++refs_in_outs;
  }
  return b->kind() == BufferKind::kOwned && b->device().type == DeviceType::kCPU &&
         b->ref_count() == refs_in_outs && can_view(*outs[i]);
}

std::vector<bool> exclusive_outputs(const std::vector<Tensor>& outs) {
  const size_t n = outs.size();
  std::vector<bool> result(n, false);
  constexpr size_t kQuadratic = 16;  // up to this many, exclusive_output's scans are cheaper
  if (n <= kQuadratic) {
    std::vector<const Tensor*> ptrs(n);
    for (size_t i = 0; i < n; ++i) ptrs[i] = &outs[i];
    for (size_t i = 0; i < n; ++i) result[i] = exclusive_output(ptrs.data(), n, i);
    return result;
  }
  // The same judgement in linear time: per buffer, its first output and how many share it.
  struct Use {
    size_t first;
    int32_t count;
  };
  std::unordered_map<const Buffer*, Use> uses;
  uses.reserve(n);
  for (size_t i = 0; i < n; ++i)
    if (const Buffer* b = outs[i].buffer().get())
      ++uses.try_emplace(b, Use{i, 0}).first->second.count;
  for (size_t i = 0; i < n; ++i) {
    const Buffer* b = outs[i].buffer().get();
    if (!b) continue;
    const Use& u = uses.at(b);
    result[i] = u.first == i && b->kind() == BufferKind::kOwned &&
                b->device().type == DeviceType::kCPU && b->ref_count() == u.count &&
                can_view(outs[i]);
  }
  return result;
}

int numpy_bridge_setup_types(PyObject* module) {
  ModuleState* st = get_module_state(module);
  st->buffer_owner_type = reinterpret_cast<PyTypeObject*>(
      PyType_FromModuleAndSpec(module, &buffer_owner_spec, nullptr));
  return st->buffer_owner_type ? 0 : -1;
}

}  // namespace ortlite::py
