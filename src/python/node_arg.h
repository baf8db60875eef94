// ortlite.NodeArg (a graph input/output description) and ortlite.ModelMetadata.
#pragma once

#include <Python.h>

#include "ortlite/model.h"
#include "python/module_state.h"
#include "python/util.h"

namespace ortlite::py {

// Throw PythonErrorSet / std::bad_alloc on failure.
Ref node_arg_new(ModuleState* st, const ValueInfo& vi);
Ref model_metadata_new(ModuleState* st, const Model& model);

}  // namespace ortlite::py
