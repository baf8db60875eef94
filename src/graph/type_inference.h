// Element types of a graph's tensor values as far as declarations and a few per-op rules
// tell (no shape inference): enough for a provider's kernel factory to decline nodes whose
// types it does not run (the planner's placement).
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "ortlite/model.h"

namespace ortlite {

// Types of the values of `g`, walking its nodes in `order` (a topological order of
// g.nodes' indices). Unknown values are absent.
std::unordered_map<std::string, DataType> infer_elem_types(const Graph& g,
                                                           const std::vector<int>& order);

// Throws InvalidGraph when an output of one of g's default-domain nodes (or of an
// ai.onnx.preview FlexAttention node) has a declared element type (a graph output or a
// value_info) other than the one its op gives from its inputs' types, as far as
// infer_elem_types' rules tell (onnxruntime refuses such a model at load too).
void check_declared_types(const Graph& g, const std::vector<int>& order);

// Whether `op` is one of `names`.
bool op_in(const std::string& op, std::initializer_list<const char*> names);

}  // namespace ortlite
