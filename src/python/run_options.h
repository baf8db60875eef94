// ortlite.RunOptions: wraps a core RunConfig that runs read without the GIL.
#pragma once

#include <Python.h>

#include <memory>

#include "ortlite/session.h"
#include "python/module_state.h"

namespace ortlite::py {

// The RunConfig a run started now must use (shared: setting `terminate` later reaches
// it). `run_options` must be a RunOptions instance.
std::shared_ptr<RunConfig> run_options_config(PyObject* run_options);

inline bool run_options_check(ModuleState* st, PyObject* o) {
  return PyObject_TypeCheck(o, st->run_options_type);
}

}  // namespace ortlite::py
