// InferenceSession.run_async: runs queued on ortlite's async workers, each with a
// completion record that holds strong references to everything the run and its callback
// need (session, run options, feeds, callback, user_data) until the callback has run.
#pragma once

#include <Python.h>

namespace ortlite::py {

// InferenceSession.run_async(output_names, input_feed, callback=None, user_data=None,
// run_options=None). With a callback: returns None. Without: a concurrent.futures.Future.
PyObject* session_run_async(PyObject* self, PyObject* args, PyObject* kwds);

// _ortlite._async_shutdown(): stops accepting runs, cancels queued ones (their callbacks
// get an error), waits for running ones to finish their callbacks, joins the workers.
// Registered with atexit by ortlite/__init__.py, so nothing is left to call into a
// finalizing interpreter.
PyObject* async_shutdown(PyObject* module, PyObject* unused);

// _ortlite._async_in_flight(): number of runs queued or running (for tests).
PyObject* async_in_flight(PyObject* module, PyObject* unused);

// Called from the module's exec: accept runs again (after an embedding host finalized and
// re-initialized Python).
void async_reset();

}  // namespace ortlite::py
