// The one translation point from C++ exceptions to Python exceptions.
//
// Every C entry point of the binding wraps its C++ work in `try { ... }
// ORTLITE_PY_CATCH(state, error_value)`; nothing else builds ortlite exceptions.
#pragma once

#include <Python.h>

#include <cxxabi.h>

#include <exception>
#include <string>

#include "ortlite/status.h"
#include "python/module_state.h"

namespace ortlite::py {

// Sets the Python exception for `e`:
//   ortlite::Error        -> the class of its code (Fail, InvalidArgument, ...)
//   PythonErrorSet        -> the Python exception already set is kept
//   std::bad_alloc        -> MemoryError
//   other std::exception  -> ortlite.RuntimeException
//   anything else         -> ortlite.RuntimeException ("unknown C++ exception")
// Needs the GIL. Never throws.
void set_error(ModuleState* st, std::exception_ptr e) noexcept;

// set_error(st, std::current_exception()); call inside a catch block.
void set_current_error(ModuleState* st) noexcept;

// For completions that report an error instead of raising it (async runs):
// the exception instance set_error would raise, as a new reference, with no exception left
// pending (for PythonErrorSet: the pending one). Needs the GIL.
PyObject* error_object(ModuleState* st, std::exception_ptr e) noexcept;

}  // namespace ortlite::py

// A forced unwind (pthread_exit, thread cancellation) is never swallowed: it must go on.
#define ORTLITE_PY_CATCH(STATE, RET)         \
  catch (abi::__forced_unwind&) {            \
    throw;                                   \
  }                                          \
  catch (...) {                              \
    ::ortlite::py::set_current_error(STATE); \
    return RET;                              \
  }
