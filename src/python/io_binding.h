// ortlite.SessionIOBinding (InferenceSession.io_binding()): inputs and outputs bound ahead
// of InferenceSession.run_with_iobinding, as onnxruntime's IOBinding.
#pragma once

#include <Python.h>

#include "python/module_state.h"

namespace ortlite::py {

inline bool io_binding_check(ModuleState* st, PyObject* o) {
  return PyObject_TypeCheck(o, st->io_binding_type);
}

// A new binding of `session` (an InferenceSession with a model). Throws PythonErrorSet /
// ortlite::Error.
PyObject* io_binding_new(ModuleState* st, PyObject* session);

// InferenceSession.run_with_iobinding: runs `session` with the binding's inputs and stores
// the outputs in it (the GIL is released during the run). Throws PythonErrorSet /
// ortlite::Error.
void io_binding_run(ModuleState* st, PyObject* session, PyObject* binding, PyObject* run_options);

}  // namespace ortlite::py
