// ortlite.InferenceSession.
#pragma once

#include <Python.h>

#include <memory>

#include "ortlite/session.h"
#include "python/module_state.h"

namespace ortlite::py {

struct SessionObject {
  PyObject_HEAD std::shared_ptr<const Session>
      sess;                     // placement-constructed; empty until __init__ succeeds
  PyObject* sess_options;       // the SessionOptions copy the session was created with
  PyObject* held_initializers;  // tuple of OrtValues whose memory the core session borrows
  PyObject* providers;          // list of str
  PyObject* provider_options;   // dict: provider name -> dict of str
  PyObject* model_path;         // bytes (the file system path) or NULL: set_providers reloads
  PyObject* weakreflist;
  // Where the model came from, for pickling (ortlite/_pickle.py): the path (str) and the
  // file's (size, mtime_ns, inode) at load, or a read-only uint8 ndarray over the model
  // bytes the core session keeps (no copy). Unused ones are NULL.
  PyObject* source_path;
  PyObject* source_stat;
  PyObject* source_bytes;
  // The external data files a load from a file read: tuple of (path, (size, mtime_ns,
  // inode)) when opened, sorted by path; NULL for a model from bytes.
  PyObject* source_external;
};

// The core session of `self` (an InferenceSession); throws Error(kNoModel) when __init__
// has not succeeded. While the result lives, so does the core session; the memory of the
// session's added initializers lives as long as `self` does.
std::shared_ptr<const Session> session_shared(PyObject* self);

inline bool session_check(ModuleState* st, PyObject* o) {
  return PyObject_TypeCheck(o, st->session_type);
}

}  // namespace ortlite::py
