// describe_model: the registry's verdict on each node of a model, for the command line.
#include <string>
#include <vector>

#include "ortlite/kernel.h"
#include "ortlite/session.h"

namespace ortlite {

namespace {

const std::string& norm_domain(const std::string& d) {
  static const std::string empty;
  return d == "ai.onnx" ? empty : d;
}

class Reporter {
 public:
  explicit Reporter(const Model& m) : m_(m), registry_(KernelRegistry::instance()) {}

  void graph(const Graph& g, const std::string& scope, const std::vector<OpsetImport>* local,
             int depth) {
    for (const auto& init : g.initializers) {
      ++report.initializers;
      report.initializer_bytes += init.second.nbytes();
    }
    for (const Node& node : g.nodes) {
      report.nodes.push_back(node_report(node, scope, local));
      // The reader bounds subgraph nesting; this bound only guards the recursion.
      if (depth >= 64) continue;
      for (const Attribute& a : node.attributes) {
        const std::string sub_scope = node.label() + " " + a.name;
        if (a.g) graph(*a.g, sub_scope, local, depth + 1);
        for (size_t i = 0; i < a.graphs.size(); ++i)
          if (a.graphs[i]) graph(*a.graphs[i], sub_scope + "[" + std::to_string(i) + "]", local,
                                 depth + 1);
      }
    }
  }

  void functions() {
    for (const Function& f : m_.functions) {
      const std::string scope =
          "function '" + (f.domain.empty() ? std::string() : f.domain + ":") + f.name + "'";
      for (const Node& node : f.nodes) report.nodes.push_back(node_report(node, scope, &f.opset_imports));
    }
  }

  ModelReport report;

 private:
  int64_t opset_of(const std::string& domain, const std::vector<OpsetImport>* local) const {
    if (local)
      for (const OpsetImport& o : *local)
        if (norm_domain(o.domain) == domain) return o.version;
    for (const OpsetImport& o : m_.opset_imports)
      if (norm_domain(o.domain) == domain) return o.version;
    return -1;
  }

  bool is_local_function(const Node& node) const {
    for (const Function& f : m_.functions)
      if (norm_domain(f.domain) == norm_domain(node.domain) && f.name == node.op_type) return true;
    return false;
  }

  NodeReport node_report(const Node& node, const std::string& scope,
                         const std::vector<OpsetImport>* local) const {
    NodeReport r;
    r.scope = scope;
    r.name = node.name;
    r.domain = norm_domain(node.domain);
    r.op_type = node.op_type;
    r.opset = opset_of(r.domain, local);
    if (is_local_function(node)) return r;  // its body is reported on its own
    if (r.opset < 0)
      r.problem = "the model does not import domain '" + (r.domain.empty() ? "ai.onnx" : r.domain) + "'";
    else if (!registry_.find(r.domain, r.op_type, r.opset))
      r.problem = registry_.has_op(r.domain, r.op_type) ? "this opset version is not supported"
                                                        : "the operator is not implemented";
    return r;
  }

  const Model& m_;
  const KernelRegistry& registry_;
};

}  // namespace

ModelReport describe_model(const Model& model) {
  Reporter r(model);
  r.graph(model.graph, "", nullptr, 0);
  r.functions();
  return r.report;
}

}  // namespace ortlite
