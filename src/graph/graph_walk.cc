#include "graph/graph_walk.h"

#include <unordered_map>

#include "ortlite/status.h"

namespace ortlite {

void subgraph_reads(const Graph& g, std::unordered_set<std::string>& out, int depth) {
  for (const Node& n : g.nodes) {
    for (const std::string& i : n.inputs) out.insert(i);
    for (const Attribute& a : n.attributes) {
      if (depth >= 64 && (a.g || !a.graphs.empty()))
        ORTLITE_THROW(kInvalidGraph, n.label(), ": subgraphs are nested more than 64 deep");
      if (a.type == AttrType::kGraph && a.g) subgraph_reads(*a.g, out, depth + 1);
      if (a.type == AttrType::kGraphs)
        for (const auto& sg : a.graphs)
          if (sg) subgraph_reads(*sg, out, depth + 1);
    }
  }
  for (const ValueInfo& vi : g.outputs) out.insert(vi.name);
}

void node_subgraph_reads(const Node& n, std::unordered_set<std::string>& out) {
  for (const Attribute& a : n.attributes) {
    if (a.type == AttrType::kGraph && a.g) subgraph_reads(*a.g, out);
    if (a.type == AttrType::kGraphs)
      for (const auto& sg : a.graphs)
        if (sg) subgraph_reads(*sg, out);
  }
}

bool has_subgraph(const Node& n) {
  for (const Attribute& a : n.attributes)
    if (a.type == AttrType::kGraph || a.type == AttrType::kGraphs || a.g || !a.graphs.empty())
      return true;
  return false;
}

bool topological_order(const Graph& g, std::vector<int>& order) {
  std::unordered_map<std::string, int> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const std::string& o : g.nodes[i].outputs)
      if (!o.empty()) producer.emplace(o, static_cast<int>(i));
  std::vector<int> pending(g.nodes.size(), 0);
  std::vector<std::vector<int>> next(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const std::string& in : g.nodes[i].inputs) {
      auto it = in.empty() ? producer.end() : producer.find(in);
      if (it == producer.end()) continue;
      ++pending[i];
      next[static_cast<size_t>(it->second)].push_back(static_cast<int>(i));
    }
  std::vector<int> ready;
  for (size_t i = g.nodes.size(); i-- > 0;)
    if (!pending[i]) ready.push_back(static_cast<int>(i));
  order.clear();
  while (!ready.empty()) {
    const int i = ready.back();
    ready.pop_back();
    order.push_back(i);
    for (int r : next[static_cast<size_t>(i)])
      if (--pending[static_cast<size_t>(r)] == 0) ready.push_back(r);
  }
  return order.size() == g.nodes.size();
}

}  // namespace ortlite
