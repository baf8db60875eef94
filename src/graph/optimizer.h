// Load-time graph rewrites (SessionOptions.graph_optimization_level, onnxruntime's
// numbering): run by Session::create on the main graph after model-local functions are
// inlined and SessionOptions initializers are applied, before the graph is planned.
#pragma once

#include "ortlite/model.h"

namespace ortlite {

// Rewrites `model.graph` in place. Level 0 (ORT_DISABLE_ALL) leaves it untouched. A
// rewrite never changes a graph output's name, value or type, nor touches an initializer
// a feed may override (one that is also a graph input).
void optimize_graph(Model& model, int level);

}  // namespace ortlite
