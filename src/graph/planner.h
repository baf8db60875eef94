// The planner (graph/planner.cc): turns a graph into a GraphPlan (graph/executor.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "graph/executor.h"
#include "ortlite/model.h"
#include "ortlite/provider.h"

namespace ortlite {

// Where the planner may place nodes.
struct Placement {
  // The session's providers in order of preference, the CPU last. Nodes go to the first
  // device provider that has a kernel for them (one device provider per plan), the rest to
  // the CPU.
  std::vector<std::shared_ptr<const ExecutionProvider>> providers;
  int log_severity_level = 2;  // <= 0: print each node's placement to stderr
};

// Plans `g`: `input_names` are the slots given values before any node runs (the graph's
// inputs; for a subgraph also its outer-scope names). Nodes with subgraphs get their
// outer-scope references appended as implicit inputs, and their bodies are planned too
// (on the CPU). Throws Error: kInvalidGraph (cycle, value nothing produces, duplicate
// output), kNotImplemented (op or opset without a kernel), ...
void plan_graph(GraphPlan& p, Graph& g, const Model& m, const std::vector<std::string>& input_names,
                bool is_subgraph, const Placement* placement = nullptr);

// The opset of the node's domain in effect for `node` (its function's imports first, then
// the model's), or -1 when the model does not import the domain.
int64_t node_opset(const Model& model, const Node& node);

}  // namespace ortlite
