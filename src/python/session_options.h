// ortlite.SessionOptions: Python-side settings turned into a core SessionConfig when a
// session is created.
#pragma once

#include <Python.h>

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

}  // namespace ortlite::py
