// ortlite.SessionOptions: Python-side settings turned into a core SessionConfig when a
// session is created.
#pragma once

#include <Python.h>

#include <string>
#include <utility>
#include <vector>

#include "ortlite/model_io.h"
#include "ortlite/session.h"
#include "python/module_state.h"
#include "python/util.h"

namespace ortlite::py {

inline bool session_options_check(ModuleState* st, PyObject* o) {
  return PyObject_TypeCheck(o, st->session_options_type);
}

// A new SessionOptions with the settings of `src` (defaults when src is NULL), its
// added initializers included. Throws PythonErrorSet / ortlite::Error.
Ref session_options_copy(ModuleState* st, PyObject* src);

// The core config for `opts` (a SessionOptions). *held receives a tuple of the OrtValues
// whose memory the config's added initializers borrow: the session keeps it as long as
// the core session lives. Throws PythonErrorSet / ortlite::Error.
SessionConfig session_options_to_config(ModuleState* st, PyObject* opts, Ref* held);

// Buffer views of the in-memory external data files, held while the model loads (the
// loader copies what it reads). Released, with the GIL held, when destroyed.
class LoadViews {
 public:
  LoadViews() = default;
  ~LoadViews();
  LoadViews(const LoadViews&) = delete;
  LoadViews& operator=(const LoadViews&) = delete;
  void add(const Py_buffer& v) { views_.push_back(v); }

 private:
  std::vector<Py_buffer> views_;
};

// What the loader needs from `opts`: the names of its added initializers (their external
// data is not read) and the add_external_initializers_from_files_in_memory files, viewed
// through *views. Throws PythonErrorSet / ortlite::Error.
LoadOptions session_options_load_options(ModuleState* st, PyObject* opts, LoadViews* views);

// With the config entry session.load_config_from_model = "1" (or the environment variable
// ORT_LOAD_CONFIG_FROM_MODEL = "1", read at each call, as onnxruntime): the session options stored
// as JSON in the model's metadata_props["ort_config"] ({"session_options": {...}}), as
// onnxruntime reads them (intra_op_num_threads, inter_op_num_threads, execution_mode,
// graph_optimization_level, enable_profiling; other keys ignored), applied to `opts` (the
// session's own copy) and *config. Bad JSON or values: Error(kInvalidArgument).
void session_options_apply_model_config(
    ModuleState* st, PyObject* opts, const std::vector<std::pair<std::string, std::string>>& props,
    SessionConfig* config);

// ortlite.set_global_thread_pool_sizes(intra_op_num_threads=0, inter_op_num_threads=0).
PyObject* set_global_thread_pool_sizes(PyObject* module, PyObject* args, PyObject* kwds);

}  // namespace ortlite::py
