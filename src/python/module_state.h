// Per-module state of ortlite._ortlite: every exception class and every type object,
// reached from a type through PyType_GetModuleByDef (never through a C global).
#pragma once

#include <Python.h>

namespace ortlite::py {

// One slot per ortlite::StatusCode; slot 0 (kOk) stays NULL.
constexpr int kNumStatusCodes = 12;

struct ModuleState {
  PyObject* error_base;  // ortlite.OrtliteError (a RuntimeError)
  PyObject* errors[kNumStatusCodes];

  PyTypeObject* session_type;
  PyTypeObject* session_options_type;
  PyTypeObject* run_options_type;
  PyTypeObject* ortvalue_type;
  PyTypeObject* node_arg_type;
  PyTypeObject* model_metadata_type;
  PyTypeObject* buffer_owner_type;
  PyTypeObject* io_binding_type;
  PyTypeObject* sparse_tensor_type;
  PyTypeObject* sparse_coo_view_type;
  PyTypeObject* sparse_csr_view_type;

  // The IntEnum classes of ortlite/__init__.py (registered after import, may be NULL);
  // SessionOptions getters return members of them.
  PyObject* graph_optimization_level_enum;
  PyObject* execution_mode_enum;

  // ortlite._logging's session hook while a logger callback is set (else NULL): called
  // with each session made, it sends the session's messages to the callback.
  PyObject* log_sink;
};

extern PyModuleDef module_def;

inline ModuleState* get_module_state(PyObject* module) {
  return static_cast<ModuleState*>(PyModule_GetState(module));
}

// State of the module that defined `tp` (or a base of it). Sets TypeError and returns
// NULL when `tp` is not one of ours.
inline ModuleState* state_from_type(PyTypeObject* tp) {
  PyObject* m = PyType_GetModuleByDef(tp, &module_def);
  return m ? get_module_state(m) : nullptr;
}

inline ModuleState* state_of(PyObject* self) {
  return state_from_type(Py_TYPE(self));
}

// Type setup functions, one per type file; each creates its heap type(s) with
// PyType_FromModuleAndSpec and stores them in the module state.
int errors_setup(PyObject* module);
int numpy_bridge_setup_types(PyObject* module);
int ortvalue_setup_types(PyObject* module);
int run_options_setup_types(PyObject* module);
int session_options_setup_types(PyObject* module);
int node_arg_setup_types(PyObject* module);
int session_setup_types(PyObject* module);
int io_binding_setup_types(PyObject* module);
int sparse_tensor_setup_types(PyObject* module);

}  // namespace ortlite::py
