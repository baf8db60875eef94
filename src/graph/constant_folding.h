// Load-time constant folding (graph_optimization_level >= 1), run by optimize_graph
// (optimizer.cc) on the main graph.
#pragma once

#include "ortlite/model.h"

namespace ortlite {

// Runs once, with its CPU kernel, every default-domain node of a deterministic op whose
// inputs are all constants (initializers no feed can replace, outputs of folded nodes) and
// whose outputs stay within the caps of constant_folding.cc, and replaces its outputs by
// initializers of the same names (kConstant buffers the session owns). A node whose kernel
// throws is left as it is: the error surfaces when the graph runs, as without folding.
// Subgraph bodies fold too, with the enclosing graphs' constants as their outer-scope values.
void fold_constants(Model& model);

}  // namespace ortlite
