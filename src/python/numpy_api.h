// The one way a binding file includes numpy's C API. module.cc defines
// ORTLITE_NUMPY_IMPORT before including this header and imports the API in Py_mod_exec;
// every other translation unit sees the same table through PY_ARRAY_UNIQUE_SYMBOL.
#pragma once

#include <Python.h>

#define PY_ARRAY_UNIQUE_SYMBOL ortlite_ARRAY_API
#ifndef ORTLITE_NUMPY_IMPORT
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>
