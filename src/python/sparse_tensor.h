// ortlite.SparseTensor: a COO or CSR(C) sparse tensor over numpy arrays it keeps alive,
// and its SparseCooView / SparseCsrView (onnxruntime's SparseTensor Python API).
#pragma once

#include <Python.h>

#include <string>

#include "ortlite/tensor.h"
#include "python/module_state.h"
#include "python/util.h"

namespace ortlite::py {

enum SparseFormat : int { kSparseUndefined = 0, kSparseCoo = 1, kSparseCsrc = 2 };

struct SparseTensorObject {
  PyObject_HEAD int format;
  Shape* dense_shape;  // owned
  PyObject* values;    // 1-D, C-contiguous, aligned ndarray (the caller's or a copy)
  PyObject* indices;   // COO: int64 [nnz] or [nnz, rank]; CSR: the inner (column) indices
  PyObject* outer;     // CSR: int64 [rows + 1] (or empty when nnz == 0); NULL for COO
  PyObject* weakreflist;
};

inline bool sparse_tensor_check(ModuleState* st, PyObject* o) {
  return st->sparse_tensor_type && PyObject_TypeCheck(o, st->sparse_tensor_type);
}

// "sparse_tensor(float)".
PyObject* sparse_tensor_data_type(PyObject* sparse);
// The dense shape as a list of int.
PyObject* sparse_tensor_dense_shape_list(PyObject* sparse);

// The dense form of a SparseTensor: a new owned CPU tensor (`name` for messages). Throws
// NotImplemented for string values.
Tensor sparse_tensor_densify(PyObject* sparse, const std::string& name);

// An OrtValue holding a COO SparseTensor (linear indices) of the non-zero elements of `dense`
// (copied to the host first when it is on a device): how run_with_ort_values returns an
// output declared sparse_tensor. `name` for messages; string values are NotImplemented.
Ref sparse_coo_ortvalue_from_dense(ModuleState* st, const Tensor& dense, const std::string& name);

// OrtValue methods registered in ortvalue.cc's method table.
PyObject* ortvalue_from_sparse_tensor(PyTypeObject* cls, PyObject* arg);
PyObject* ortvalue_as_sparse_tensor(PyObject* self, PyObject* unused);
PyObject* ortvalue_is_sparse_tensor(PyObject* self, PyObject* unused);
// The SparseTensor an OrtValue holds (borrowed), or NULL (no exception set).
PyObject* ortvalue_sparse(PyObject* ortvalue);

}  // namespace ortlite::py
