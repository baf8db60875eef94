// ortlite.SparseTensor and its views (docs/ownership.md "SparseTensor").
//
// A SparseTensor holds strong references to its values and index arrays: the caller's own
// arrays when they are C-contiguous and aligned (int64 for indices), contiguous copies
// otherwise. values() and the views' indices(), inner(), outer() are read-only numpy views
// whose base is the held array, as in onnxruntime. Indices are checked at construction:
// out of range, unsorted or duplicate indices are InvalidArgument naming the position.
#include "python/sparse_tensor.h"

#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <structmember.h>

#include "ortlite/provider.h"
#include "ortlite/status.h"
#include "python/errors.h"
#include "python/numpy_bridge.h"
#include "python/ortvalue.h"
#include "python/util.h"

namespace ortlite::py {

namespace {

SparseTensorObject* as_sp(PyObject* o) {
  return reinterpret_cast<SparseTensorObject*>(o);
}

struct SparseViewObject {
  PyObject_HEAD PyObject* tensor;  // the SparseTensor
};

PyArrayObject* as_arr(PyObject* o) {
  return reinterpret_cast<PyArrayObject*>(o);
}

Shape parse_dense_shape(PyObject* obj) {
  if (PyUnicode_Check(obj) || PyBytes_Check(obj)) {
    PyErr_SetString(PyExc_TypeError, "dense_shape must be a sequence of int");
    throw PythonErrorSet{};
  }
  Ref seq = Ref::steal(PySequence_Fast(obj, "dense_shape must be a sequence of int"));
  if (!seq) throw PythonErrorSet{};
  Shape shape;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
  for (Py_ssize_t i = 0; i < n; ++i) {
    const long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq.get(), i));
    if (v == -1 && PyErr_Occurred()) throw PythonErrorSet{};
    if (v < 0) ORTLITE_THROW(kInvalidArgument, "dense_shape has a negative dimension: ", v);
    shape.push_back(static_cast<int64_t>(v));
  }
  shape_size(shape);  // overflow check
  return shape;
}

// ort_device must be the CPU: an OrtDevice (ortlite's or anything with device_type()).
void require_cpu_device(PyObject* device) {
  if (device == Py_None) return;
  Ref type = Ref::steal(PyObject_CallMethod(device, "device_type", nullptr));
  if (!type) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw PythonErrorSet{};
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "ort_device must be an OrtDevice, not %.100s",
                 Py_TYPE(device)->tp_name);
    throw PythonErrorSet{};
  }
  const long t = PyLong_AsLong(type.get());
  if (t == -1 && PyErr_Occurred()) throw PythonErrorSet{};
  if (t != 0)
    ORTLITE_THROW(kNotImplemented, "ortlite's sparse tensors live on the CPU; ort_device has ",
                  "device type ", t);
}

Ref values_array(PyObject* obj) {
  Ref arr = Ref::steal(
      PyArray_FromAny(obj, nullptr, 0, 0, NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED, nullptr));
  if (!arr) throw PythonErrorSet{};
  PyArrayObject* a = as_arr(arr.get());
  if (PyArray_NDIM(a) != 1)
    ORTLITE_THROW(kInvalidArgument, "sparse values must be a 1-D array, got ", PyArray_NDIM(a),
                  " dimensions");
  const DataType dt = dtype_of_descr(PyArray_DESCR(a));
  if (dt == DataType::kUndefined)
    ORTLITE_THROW(kNotImplemented, "sparse values of numpy dtype ",
                  PyArray_DESCR(a)->typeobj->tp_name, " have no ONNX element type");
  if (!PyArray_ISNOTSWAPPED(a)) {
    arr = Ref::steal(PyArray_NewCopy(a, NPY_CORDER));
    if (!arr) throw PythonErrorSet{};
    PyArray_Descr* native = PyArray_DescrNewByteorder(PyArray_DESCR(as_arr(arr.get())), '=');
    if (!native) throw PythonErrorSet{};
    arr = Ref::steal(PyArray_CastToType(as_arr(arr.get()), native, 0));  // steals native
    if (!arr) throw PythonErrorSet{};
  }
  return arr;
}

// An int64 C-contiguous array of `name` (the caller's when it already is one).
Ref index_array(PyObject* obj, const char* name) {
  Ref arr = Ref::steal(PyArray_FROM_OTF(obj, NPY_INT64, NPY_ARRAY_IN_ARRAY));
  if (!arr) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_ValueError))
      throw PythonErrorSet{};
    PyErr_Clear();
    ORTLITE_THROW(kInvalidArgument, name, " must be an array of integers (int64)");
  }
  return arr;
}

std::string shape_str(const Shape& s) {
  return shape_to_string(s);
}

void check_coo(const Shape& dense, int64_t nnz, PyArrayObject* idx) {
  const int64_t* ix = static_cast<const int64_t*>(PyArray_DATA(idx));
  const int64_t numel = shape_size(dense);
  const int rank = static_cast<int>(dense.size());
  if (PyArray_NDIM(idx) == 1) {
    if (PyArray_DIM(idx, 0) != nnz)
      ORTLITE_THROW(kInvalidArgument, "coo_indices has ", PyArray_DIM(idx, 0),
                    " linear indices for ", nnz, " values");
    for (int64_t k = 0; k < nnz; ++k) {
      if (ix[k] < 0 || ix[k] >= numel)
        ORTLITE_THROW(kInvalidArgument, "coo index ", ix[k], " at position ", k,
                      " is out of range for dense_shape ", shape_str(dense), " (", numel,
                      " elements)");
      if (k > 0 && ix[k] <= ix[k - 1])
        ORTLITE_THROW(kInvalidArgument, "coo indices must be sorted without duplicates: ", "index ",
                      ix[k], " at position ", k, " follows ", ix[k - 1]);
    }
    return;
  }
  if (PyArray_NDIM(idx) != 2 || PyArray_DIM(idx, 0) != nnz || PyArray_DIM(idx, 1) != rank)
    ORTLITE_THROW(kInvalidArgument, "coo_indices must be [", nnz, "] linear indices or [", nnz,
                  ", ", rank, "] coordinates for ", nnz, " values of dense_shape ",
                  shape_str(dense));
  int64_t prev = -1;
  for (int64_t k = 0; k < nnz; ++k) {
    int64_t lin = 0;
    for (int d = 0; d < rank; ++d) {
      const int64_t v = ix[k * rank + d];
      if (v < 0 || v >= dense[d])
        ORTLITE_THROW(kInvalidArgument, "coo index ", v, " on axis ", d, " of entry ", k,
                      " is out of range for dense_shape ", shape_str(dense));
      lin = lin * dense[d] + v;
    }
    if (lin <= prev)
      ORTLITE_THROW(kInvalidArgument,
                    "coo indices must be sorted (row-major) without duplicates: entry ", k,
                    " does not come after entry ", k - 1);
    prev = lin;
  }
}

void check_csr(const Shape& dense, int64_t nnz, PyArrayObject* inner, PyArrayObject* outer) {
  if (dense.size() != 2)
    ORTLITE_THROW(kInvalidArgument, "a CSR sparse tensor is 2-D; dense_shape is ",
                  shape_str(dense));
  if (PyArray_NDIM(inner) != 1 || PyArray_NDIM(outer) != 1)
    ORTLITE_THROW(kInvalidArgument, "inner_indices and outer_indices must be 1-D");
  const int64_t rows = dense[0], cols = dense[1];
  const int64_t n_inner = PyArray_DIM(inner, 0), n_outer = PyArray_DIM(outer, 0);
  if (nnz == 0 && n_inner == 0 && n_outer == 0) return;
  if (n_inner != nnz)
    ORTLITE_THROW(kInvalidArgument, "inner_indices has ", n_inner, " entries for ", nnz, " values");
  if (n_outer != rows + 1)
    ORTLITE_THROW(kInvalidArgument, "outer_indices has ", n_outer, " entries; dense_shape ",
                  shape_str(dense), " needs rows + 1 = ", rows + 1);
  const int64_t* in = static_cast<const int64_t*>(PyArray_DATA(inner));
  const int64_t* out = static_cast<const int64_t*>(PyArray_DATA(outer));
  if (out[0] != 0) ORTLITE_THROW(kInvalidArgument, "outer_indices[0] is ", out[0], ", not 0");
  if (out[rows] != nnz)
    ORTLITE_THROW(kInvalidArgument, "outer_indices[", rows, "] is ", out[rows],
                  ", not the number of values ", nnz);
  for (int64_t r = 0; r < rows; ++r) {
    if (out[r + 1] < out[r])
      ORTLITE_THROW(kInvalidArgument, "outer_indices must not decrease: outer_indices[", r + 1,
                    "] = ", out[r + 1], " < outer_indices[", r, "] = ", out[r]);
    for (int64_t k = out[r]; k < out[r + 1]; ++k) {
      if (in[k] < 0 || in[k] >= cols)
        ORTLITE_THROW(kInvalidArgument, "inner index ", in[k], " at position ", k, " (row ", r,
                      ") is out of range for ", cols, " columns");
      if (k > out[r] && in[k] <= in[k - 1])
        ORTLITE_THROW(kInvalidArgument,
                      "inner indices must be sorted without duplicates within a row: ", "index ",
                      in[k], " at position ", k, " (row ", r, ") follows ", in[k - 1]);
    }
  }
}

Ref sparse_new(ModuleState* st, int format, Shape dense, Ref values, Ref indices, Ref outer) {
  PyTypeObject* tp = st->sparse_tensor_type;
  PyObject* obj = tp->tp_alloc(tp, 0);
  if (!obj) throw PythonErrorSet{};
  SparseTensorObject* sp = as_sp(obj);
  sp->format = format;
  sp->dense_shape = new (std::nothrow) Shape(std::move(dense));
  sp->values = values.release();
  sp->indices = indices.release();
  sp->outer = outer.release();
  Ref r = Ref::steal(obj);
  if (!sp->dense_shape) throw std::bad_alloc();
  return r;
}

// A read-only view of a held array; its base is that array.
PyObject* read_only_view(PyObject* arr) {
  PyObject* view = PyArray_View(as_arr(arr), nullptr, nullptr);
  if (view) PyArray_CLEARFLAGS(as_arr(view), NPY_ARRAY_WRITEABLE);
  return view;
}

// --- SparseTensor ---------------------------------------------------------------------------

PyObject* sparse_coo_from_numpy(PyTypeObject* cls, PyObject* args, PyObject* kwds) {
  ModuleState* st = state_from_type(cls);
  if (!st) return nullptr;
  static const char* kwlist[] = {"dense_shape", "values", "coo_indices", "ort_device", nullptr};
  PyObject *shape_obj, *values_obj, *indices_obj, *device = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|O:sparse_coo_from_numpy",
                                   const_cast<char**>(kwlist), &shape_obj, &values_obj,
                                   &indices_obj, &device))
    return nullptr;
  try {
    require_cpu_device(device);
    Shape dense = parse_dense_shape(shape_obj);
    Ref values = values_array(values_obj);
    Ref indices = index_array(indices_obj, "coo_indices");
    check_coo(dense, PyArray_DIM(as_arr(values.get()), 0), as_arr(indices.get()));
    return sparse_new(st, kSparseCoo, std::move(dense), std::move(values), std::move(indices),
                      Ref())
        .release();
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* sparse_csr_from_numpy(PyTypeObject* cls, PyObject* args, PyObject* kwds) {
  ModuleState* st = state_from_type(cls);
  if (!st) return nullptr;
  static const char* kwlist[] = {"dense_shape",   "values",     "inner_indices",
                                 "outer_indices", "ort_device", nullptr};
  PyObject *shape_obj, *values_obj, *inner_obj, *outer_obj, *device = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO|O:sparse_csr_from_numpy",
                                   const_cast<char**>(kwlist), &shape_obj, &values_obj, &inner_obj,
                                   &outer_obj, &device))
    return nullptr;
  try {
    require_cpu_device(device);
    Shape dense = parse_dense_shape(shape_obj);
    Ref values = values_array(values_obj);
    Ref inner = index_array(inner_obj, "inner_indices");
    Ref outer = index_array(outer_obj, "outer_indices");
    check_csr(dense, PyArray_DIM(as_arr(values.get()), 0), as_arr(inner.get()),
              as_arr(outer.get()));
    return sparse_new(st, kSparseCsrc, std::move(dense), std::move(values), std::move(inner),
                      std::move(outer))
        .release();
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* sparse_values(PyObject* self, PyObject*) {
  return read_only_view(as_sp(self)->values);
}

PyObject* sparse_dense_shape(PyObject* self, PyObject*) {
  return sparse_tensor_dense_shape_list(self);
}

PyObject* sparse_format(PyObject* self, PyObject*) {
  // Members of ortlite.OrtSparseFormat (ortlite/_enums.py), as onnxruntime's format().
  Ref mod = Ref::steal(PyImport_ImportModule("ortlite"));
  if (!mod) return nullptr;
  Ref e = Ref::steal(PyObject_GetAttrString(mod.get(), "OrtSparseFormat"));
  if (!e) return nullptr;
  return PyObject_CallFunction(e.get(), "i", as_sp(self)->format);
}

PyObject* sparse_device_name(PyObject*, PyObject*) {
  return PyUnicode_FromString("cpu");
}

PyObject* sparse_to_cuda(PyObject* self, PyObject*) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  try {
    ORTLITE_THROW(kNotImplemented,
                  "SparseTensor.to_cuda: ortlite's sparse tensors live on the CPU only");
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* sparse_get_c_tensor(PyObject* self, PyObject*) {
  return Py_NewRef(self);
}

PyObject* make_view(PyObject* self, int want, PyTypeObject* tp, const char* what) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  try {
    if (as_sp(self)->format != want)
      ORTLITE_THROW(kInvalidArgument, "This sparse tensor does not contain ", what, " format");
    PyObject* v = tp->tp_alloc(tp, 0);
    if (!v) throw PythonErrorSet{};
    reinterpret_cast<SparseViewObject*>(v)->tensor = Py_NewRef(self);
    return v;
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* sparse_as_coo_view(PyObject* self, PyObject*) {
  ModuleState* st = state_of(self);
  return st ? make_view(self, kSparseCoo, st->sparse_coo_view_type, "COO") : nullptr;
}

PyObject* sparse_as_csrc_view(PyObject* self, PyObject*) {
  ModuleState* st = state_of(self);
  return st ? make_view(self, kSparseCsrc, st->sparse_csr_view_type, "CSR(C)") : nullptr;
}

PyObject* sparse_as_blocksparse_view(PyObject* self, PyObject*) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  try {
    ORTLITE_THROW(kNotImplemented, "ortlite has no block-sparse tensors");
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* sparse_repr(PyObject* self) {
  SparseTensorObject* sp = as_sp(self);
  const std::string shape = shape_to_string(*sp->dense_shape);
  const DataType dt = dtype_of_descr(PyArray_DESCR(as_arr(sp->values)));
  return PyUnicode_FromFormat("<ortlite.SparseTensor %s sparse_tensor(%s) dense_shape=%s nnz=%zd>",
                              sp->format == kSparseCoo ? "COO" : "CSRC", dtype_name(dt),
                              shape.c_str(), PyArray_DIM(as_arr(sp->values), 0));
}

int sparse_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(as_sp(self)->values);
  Py_VISIT(as_sp(self)->indices);
  Py_VISIT(as_sp(self)->outer);
  return 0;
}

int sparse_clear(PyObject* self) {
  Py_CLEAR(as_sp(self)->values);
  Py_CLEAR(as_sp(self)->indices);
  Py_CLEAR(as_sp(self)->outer);
  return 0;
}

void sparse_dealloc(PyObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  if (as_sp(self)->weakreflist) PyObject_ClearWeakRefs(self);
  sparse_clear(self);
  delete std::exchange(as_sp(self)->dense_shape, nullptr);
  tp->tp_free(self);
  Py_DECREF(tp);
}

PyMethodDef sparse_methods[] = {
    {"sparse_coo_from_numpy", as_cfunc(sparse_coo_from_numpy),
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     PyDoc_STR("sparse_coo_from_numpy($type, dense_shape, values, coo_indices, ort_device)\n--\n\n"
               "A COO sparse tensor: values [nnz] and int64 coo_indices, [nnz] linear or\n"
               "[nnz, rank] coordinates, sorted without duplicates. The arrays are kept\n"
               "alive (C-contiguous int64 ones are not copied).")},
    {"sparse_csr_from_numpy", as_cfunc(sparse_csr_from_numpy),
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     PyDoc_STR("sparse_csr_from_numpy($type, dense_shape, values, inner_indices, "
               "outer_indices, ort_device)\n--\n\n"
               "A 2-D CSR sparse tensor: inner_indices [nnz] are the columns, outer_indices\n"
               "[rows + 1] the row starts.")},
    {"values", as_cfunc(sparse_values), METH_NOARGS,
     PyDoc_STR("values($self, /)\n--\n\nThe non-zero values: a read-only view.")},
    {"dense_shape", as_cfunc(sparse_dense_shape), METH_NOARGS,
     PyDoc_STR("dense_shape($self, /)\n--\n\nThe dense shape as a list of int.")},
    {"format", as_cfunc(sparse_format), METH_NOARGS,
     PyDoc_STR("format($self, /)\n--\n\nortlite.OrtSparseFormat.ORT_SPARSE_COO or "
               "ORT_SPARSE_CSRC.")},
    {"data_type", as_cfunc(sparse_tensor_data_type), METH_NOARGS,
     PyDoc_STR("data_type($self, /)\n--\n\nThe type string, e.g. 'sparse_tensor(float)'.")},
    {"device_name", as_cfunc(sparse_device_name), METH_NOARGS,
     PyDoc_STR("device_name($self, /)\n--\n\n'cpu'.")},
    {"to_cuda", as_cfunc(sparse_to_cuda), METH_O,
     PyDoc_STR("to_cuda($self, ort_device, /)\n--\n\nNotImplemented: sparse tensors stay on "
               "the CPU.")},
    {"as_coo_view", as_cfunc(sparse_as_coo_view), METH_NOARGS,
     PyDoc_STR("as_coo_view($self, /)\n--\n\nA SparseCooView (indices()); COO only.")},
    {"as_csrc_view", as_cfunc(sparse_as_csrc_view), METH_NOARGS,
     PyDoc_STR("as_csrc_view($self, /)\n--\n\nA SparseCsrView (inner(), outer()); CSR only.")},
    {"as_blocksparse_view", as_cfunc(sparse_as_blocksparse_view), METH_NOARGS,
     PyDoc_STR("as_blocksparse_view($self, /)\n--\n\nNotImplemented.")},
    {"_get_c_tensor", as_cfunc(sparse_get_c_tensor), METH_NOARGS,
     PyDoc_STR("_get_c_tensor($self, /)\n--\n\nThe tensor itself (onnxruntime's wrapper "
               "API).")},
    {nullptr, nullptr, 0, nullptr},
};

PyMemberDef sparse_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(SparseTensorObject, weakreflist), READONLY,
     nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyType_Slot sparse_slots[] = {
    {Py_tp_dealloc, as_slot(sparse_dealloc)},
    {Py_tp_traverse, as_slot(sparse_traverse)},
    {Py_tp_clear, as_slot(sparse_clear)},
    {Py_tp_repr, as_slot(sparse_repr)},
    {Py_tp_methods, sparse_methods},
    {Py_tp_members, sparse_members},
    {Py_tp_doc,
     const_cast<char*>("A COO or CSR sparse tensor over numpy arrays it keeps alive. Create one\n"
                       "with SparseTensor.sparse_coo_from_numpy or sparse_csr_from_numpy.")},
    {0, nullptr},
};

PyType_Spec sparse_spec = {
    "ortlite.SparseTensor",
    sizeof(SparseTensorObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE |
        Py_TPFLAGS_DISALLOW_INSTANTIATION,
    sparse_slots,
};

// --- views ----------------------------------------------------------------------------------

SparseTensorObject* view_tensor(PyObject* v) {
  return as_sp(reinterpret_cast<SparseViewObject*>(v)->tensor);
}

PyObject* view_indices(PyObject* self, PyObject*) {
  return read_only_view(view_tensor(self)->indices);
}

PyObject* view_outer(PyObject* self, PyObject*) {
  return read_only_view(view_tensor(self)->outer);
}

int view_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(reinterpret_cast<SparseViewObject*>(self)->tensor);
  return 0;
}

int view_clear(PyObject* self) {
  Py_CLEAR(reinterpret_cast<SparseViewObject*>(self)->tensor);
  return 0;
}

void view_dealloc(PyObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  view_clear(self);
  tp->tp_free(self);
  Py_DECREF(tp);
}

PyMethodDef coo_view_methods[] = {
    {"indices", as_cfunc(view_indices), METH_NOARGS,
     PyDoc_STR("indices($self, /)\n--\n\nThe int64 COO indices: a read-only view.")},
    {nullptr, nullptr, 0, nullptr},
};

PyMethodDef csr_view_methods[] = {
    {"inner", as_cfunc(view_indices), METH_NOARGS,
     PyDoc_STR("inner($self, /)\n--\n\nThe int64 inner (column) indices: a read-only view.")},
    {"outer", as_cfunc(view_outer), METH_NOARGS,
     PyDoc_STR("outer($self, /)\n--\n\nThe int64 outer (row start) indices: a read-only view.")},
    {nullptr, nullptr, 0, nullptr},
};

PyType_Slot coo_view_slots[] = {
    {Py_tp_dealloc, as_slot(view_dealloc)},
    {Py_tp_traverse, as_slot(view_traverse)},
    {Py_tp_clear, as_slot(view_clear)},
    {Py_tp_methods, coo_view_methods},
    {Py_tp_doc, const_cast<char*>("The COO indices of a SparseTensor.")},
    {0, nullptr},
};

PyType_Slot csr_view_slots[] = {
    {Py_tp_dealloc, as_slot(view_dealloc)},
    {Py_tp_traverse, as_slot(view_traverse)},
    {Py_tp_clear, as_slot(view_clear)},
    {Py_tp_methods, csr_view_methods},
    {Py_tp_doc, const_cast<char*>("The CSR indices of a SparseTensor.")},
    {0, nullptr},
};

PyType_Spec coo_view_spec = {
    "ortlite.SparseCooView",
    sizeof(SparseViewObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE |
        Py_TPFLAGS_DISALLOW_INSTANTIATION,
    coo_view_slots,
};

PyType_Spec csr_view_spec = {
    "ortlite.SparseCsrView",
    sizeof(SparseViewObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE |
        Py_TPFLAGS_DISALLOW_INSTANTIATION,
    csr_view_slots,
};

}  // namespace

PyObject* sparse_tensor_data_type(PyObject* sparse) {
  const DataType dt = dtype_of_descr(PyArray_DESCR(as_arr(as_sp(sparse)->values)));
  return PyUnicode_FromFormat("sparse_tensor(%s)", dtype_name(dt));
}

PyObject* sparse_tensor_dense_shape_list(PyObject* sparse) {
  const Shape& s = *as_sp(sparse)->dense_shape;
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(s.size()));
  if (!list) return nullptr;
  for (size_t i = 0; i < s.size(); ++i) {
    PyObject* d = PyLong_FromLongLong(s[i]);
    if (!d) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), d);
  }
  return list;
}

Tensor sparse_tensor_densify(PyObject* sparse, const std::string& name) {
  SparseTensorObject* sp = as_sp(sparse);
  PyArrayObject* values = as_arr(sp->values);
  const DataType dt = dtype_of_descr(PyArray_DESCR(values));
  if (dt == DataType::kString)
    ORTLITE_THROW(kNotImplemented, "input '", name,
                  "': a sparse tensor of strings cannot be densified for a run");
  Tensor t = Tensor::empty(dt, *sp->dense_shape);
  const size_t item = dtype_size(dt);
  const char* src = static_cast<const char*>(PyArray_DATA(values));
  char* dst = static_cast<char*>(t.raw_data());
  const int64_t nnz = PyArray_DIM(values, 0);
  const int64_t* ix = static_cast<const int64_t*>(PyArray_DATA(as_arr(sp->indices)));
  // The indices were checked at construction: every position is in range.
  if (sp->format == kSparseCoo) {
    const Shape& dense = *sp->dense_shape;
    const bool linear = PyArray_NDIM(as_arr(sp->indices)) == 1;
    for (int64_t k = 0; k < nnz; ++k) {
      int64_t pos = 0;
      if (linear) {
        pos = ix[k];
      } else {
        for (size_t d = 0; d < dense.size(); ++d) pos = pos * dense[d] + ix[k * dense.size() + d];
      }
      std::memcpy(dst + pos * item, src + k * item, item);
    }
  } else if (nnz > 0) {
    const int64_t* outer = static_cast<const int64_t*>(PyArray_DATA(as_arr(sp->outer)));
    const int64_t rows = (*sp->dense_shape)[0], cols = (*sp->dense_shape)[1];
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = outer[r]; k < outer[r + 1]; ++k)
        std::memcpy(dst + (r * cols + ix[k]) * item, src + k * item, item);
  }
  return t;
}

namespace {

// An element is a zero of the dense form when its bytes are zero, or, for floating types,
// when only the sign bit is set (-0.0): what a dense zero means to a sparse tensor.
bool is_zero_element(const unsigned char* p, size_t item, bool floating) {
  for (size_t b = 0; b + 1 < item; ++b)
    if (p[b] != 0) return false;
  const unsigned char top = p[item - 1];
  return top == 0 || (floating && top == 0x80);
}

}  // namespace

Ref sparse_coo_ortvalue_from_dense(ModuleState* st, const Tensor& dense, const std::string& name) {
  Tensor t = dense;
  if (t.buffer() && t.buffer()->device().type != DeviceType::kCPU)
    t = provider_of(t)->to_host(t, nullptr);
  const DataType dt = t.dtype();
  if (dt == DataType::kString || !has_numpy_dtype(dt))
    ORTLITE_THROW(kNotImplemented, "output '", name, "' is declared sparse_tensor(", dtype_name(dt),
                  "): sparse outputs of that element type are not supported");
  const size_t item = dtype_size(dt);
  const bool floating = dtype_is_float(dt);
  const auto* src = static_cast<const unsigned char*>(t.raw_data());
  const int64_t n = t.numel();
  std::vector<int64_t> nz;
  for (int64_t i = 0; i < n; ++i)
    if (!is_zero_element(src + i * item, item, floating)) nz.push_back(i);
  npy_intp len = static_cast<npy_intp>(nz.size());
  Ref values = Ref::steal(PyArray_SimpleNew(1, &len, npy_type_of(dt)));
  if (!values) throw PythonErrorSet{};
  Ref indices = Ref::steal(PyArray_SimpleNew(1, &len, NPY_INT64));
  if (!indices) throw PythonErrorSet{};
  auto* vdst = static_cast<unsigned char*>(PyArray_DATA(as_arr(values.get())));
  for (size_t k = 0; k < nz.size(); ++k) std::memcpy(vdst + k * item, src + nz[k] * item, item);
  if (!nz.empty())
    std::memcpy(PyArray_DATA(as_arr(indices.get())), nz.data(), nz.size() * sizeof(int64_t));
  Ref sparse = sparse_new(st, kSparseCoo, t.shape(), std::move(values), std::move(indices), Ref());
  return ortvalue_new(st, Tensor(), sparse.get());
}

PyObject* ortvalue_sparse(PyObject* ortvalue) {
  ModuleState* st = state_of(ortvalue);
  if (!st) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject* src = reinterpret_cast<OrtValueObject*>(ortvalue)->source;
  return src && sparse_tensor_check(st, src) ? src : nullptr;
}

PyObject* ortvalue_from_sparse_tensor(PyTypeObject* cls, PyObject* arg) {
  ModuleState* st = state_from_type(cls);
  if (!st) return nullptr;
  try {
    if (!sparse_tensor_check(st, arg)) {
      PyErr_Format(PyExc_TypeError,
                   "ort_value_from_sparse_tensor expects a SparseTensor, not "
                   "%.100s",
                   Py_TYPE(arg)->tp_name);
      throw PythonErrorSet{};
    }
    // The OrtValue holds no dense tensor: its source is the SparseTensor.
    return ortvalue_new(st, Tensor(), arg).release();
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* ortvalue_as_sparse_tensor(PyObject* self, PyObject*) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  try {
    PyObject* sp = ortvalue_sparse(self);
    if (!sp) ORTLITE_THROW(kInvalidArgument, "the OrtValue holds a tensor, not a sparse tensor");
    return Py_NewRef(sp);
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* ortvalue_is_sparse_tensor(PyObject* self, PyObject*) {
  return PyBool_FromLong(ortvalue_sparse(self) != nullptr);
}

int sparse_tensor_setup_types(PyObject* module) {
  ModuleState* st = get_module_state(module);
  st->sparse_tensor_type =
      reinterpret_cast<PyTypeObject*>(PyType_FromModuleAndSpec(module, &sparse_spec, nullptr));
  if (!st->sparse_tensor_type || PyModule_AddType(module, st->sparse_tensor_type) < 0) return -1;
  st->sparse_coo_view_type =
      reinterpret_cast<PyTypeObject*>(PyType_FromModuleAndSpec(module, &coo_view_spec, nullptr));
  if (!st->sparse_coo_view_type || PyModule_AddType(module, st->sparse_coo_view_type) < 0)
    return -1;
  st->sparse_csr_view_type =
      reinterpret_cast<PyTypeObject*>(PyType_FromModuleAndSpec(module, &csr_view_spec, nullptr));
  if (!st->sparse_csr_view_type || PyModule_AddType(module, st->sparse_csr_view_type) < 0)
    return -1;
  return 0;
}

}  // namespace ortlite::py
