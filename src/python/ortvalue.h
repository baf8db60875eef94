// ortlite.OrtValue: a core Tensor seen from Python.
#pragma once

#include <Python.h>

#include "ortlite/tensor.h"
#include "python/module_state.h"
#include "python/util.h"

namespace ortlite::py {

struct OrtValueObject {
  PyObject_HEAD Tensor tensor;  // placement-constructed in tp_alloc'd memory
  PyObject* source;             // the ndarray whose memory `tensor` borrows, or NULL
  PyObject* weakreflist;
};

// A new OrtValue holding `t`. `source` (may be NULL) is the array whose memory t borrows;
// the OrtValue takes its own reference. Throws PythonErrorSet on failure.
Ref ortvalue_new(ModuleState* st, Tensor t, PyObject* source);

inline bool ortvalue_check(ModuleState* st, PyObject* o) {
  return PyObject_TypeCheck(o, st->ortvalue_type);
}

// The OrtValue's tensor for a consumer on the CPU (a session feed, an added initializer): a
// tensor on a CUDA device is copied to the host, as sessions run every node on the CPU
// until the planner places nodes on the GPU (docs/cuda.md). Throws ortlite::Error.
Tensor ortvalue_tensor(PyObject* o);
// The tensor as it is, also when it lives on a CUDA device. Both throw NotImplemented for
// an OrtValue that holds a SparseTensor (no dense tensor).
const Tensor& ortvalue_raw_tensor(PyObject* o);

}  // namespace ortlite::py
