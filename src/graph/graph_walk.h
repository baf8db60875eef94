// Walks over a Graph that the load-time rewrites (optimizer.cc, fp16_rewrite.cc) share.
#pragma once

#include <string>
#include <unordered_set>
#include <vector>

#include "ortlite/model.h"

namespace ortlite {

// The ONNX default domain ("" or "ai.onnx").
inline bool default_domain(const std::string& d) {
  return d.empty() || d == "ai.onnx";
}

// Every name read anywhere inside a subgraph (an over-approximation of what it reads from
// the enclosing graph: enough to keep those values untouched). The reader and the inliner
// bound nesting at 64; the bound is checked again before each step down (kInvalidGraph).
void subgraph_reads(const Graph& g, std::unordered_set<std::string>& out, int depth = 0);

// subgraph_reads of every subgraph attribute of n.
void node_subgraph_reads(const Node& n, std::unordered_set<std::string>& out);

// Whether n has a subgraph attribute (of graph type, even an empty one).
bool has_subgraph(const Node& n);

// Node indices in an order where every node follows its producers (file order among ready
// nodes); false on a cycle.
bool topological_order(const Graph& g, std::vector<int>& order);

}  // namespace ortlite
