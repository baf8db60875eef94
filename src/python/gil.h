// Releasing and taking back the GIL around core work, safely at interpreter exit.
//
// CPython 3.11-3.13 end a thread that tries to take the GIL back while the interpreter
// finalizes (a daemon thread inside run() at exit) with pthread_exit: a forced unwind
// through ortlite's frames, whose destructors would then drop Python references without
// the GIL. ortlite never lets that unwind start or pass: such a thread parks for good
// instead (CPython 3.14 does the same), touching nothing of the interpreter.
#pragma once

#include <Python.h>

#include <cxxabi.h>

#include <exception>
#include <utility>

namespace ortlite::py {

// Whether the interpreter has begun finalizing (no thread may take the GIL then).
inline bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

// Blocks the calling thread until the process ends.
[[noreturn]] void park_forever() noexcept;

// PyEval_RestoreThread(ts), or parks the thread when the interpreter is finalizing
// (before the call, or while it waits for the GIL).
void take_gil_back(PyThreadState* ts);

// PyGILState_Ensure() for a thread ortlite started (async workers), under the same rule.
PyGILState_STATE ensure_gil();

// Runs fn() with the GIL released; an exception from fn is rethrown once the GIL is held
// again. fn must not touch Python objects.
template <typename Fn>
void without_gil(Fn&& fn) {
  std::exception_ptr err;
  PyThreadState* ts = PyEval_SaveThread();
  try {
    std::forward<Fn>(fn)();
  } catch (abi::__forced_unwind&) {
    throw;  // a thread being ended must unwind
  } catch (...) {
    err = std::current_exception();
  }
  take_gil_back(ts);
  if (err) std::rethrow_exception(err);
}

}  // namespace ortlite::py
