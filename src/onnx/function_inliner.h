// Inlines model-local functions (ModelProto.functions) into the graph.
#pragma once

#include "ortlite/model.h"

namespace ortlite {

// Replaces every node of the model's graph (and of its subgraphs) whose (domain, op_type)
// names a model-local function by the function's body, recursively. Body values get fresh
// names (prefixed with the call node's name) so they cannot collide; formal inputs and
// outputs become the call's actual names (a missing optional input becomes ""); attributes
// with ref_attr_name take the call's value or the function's default, or are dropped.
// Inlined nodes carry the function's opset imports (merged over the caller's) in
// Node::opset_imports. Throws Error(kInvalidGraph) on recursion, a call with more
// inputs/outputs than the function declares, or an expansion that grows too large;
// Error(kNotImplemented) when calls nest more than 64 deep, or subgraphs do once the calls
// are inlined (both bounds are checked before each recursive step).
void inline_model_functions(Model& model);

}  // namespace ortlite
