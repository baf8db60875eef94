// Model-local function inlining: see function_inliner.h.
#include "onnx/function_inliner.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ortlite/status.h"

namespace ortlite {
namespace {

// Nested model-local function calls, and subgraphs nested in subgraphs once the calls are
// inlined (the reader's own bound for one graph or function body, kMaxGraphDepth in
// onnx/reader.cc, is the same). Both are checked before each recursive step, so the walks
// below never go deeper than kMaxCallDepth + kMaxGraphDepth frames.
constexpr int kMaxCallDepth = 64;
constexpr int kMaxGraphDepth = 64;
constexpr size_t kMaxInlinedNodes = size_t{1} << 20;

using OpsetsPtr = std::shared_ptr<const std::vector<OpsetImport>>;

bool same_opsets(const std::vector<OpsetImport>& a, const std::vector<OpsetImport>& b) {
  if (a.size() != b.size()) return false;
  for (const OpsetImport& x : a) {
    bool found = false;
    for (const OpsetImport& y : b)
      if (x.domain == y.domain && x.version == y.version) found = true;
    if (!found) return false;
  }
  return true;
}

class Inliner {
 public:
  explicit Inliner(Model& m) : model_(m) {
    for (const Function& f : m.functions) {
      auto key = std::make_pair(f.domain, f.name);
      auto it = functions_.find(key);
      // Several overloads: the one without an overload name wins (nodes carry none).
      if (it == functions_.end() || (!it->second->overload.empty() && f.overload.empty()))
        functions_[key] = &f;
    }
  }

  void run() {
    if (functions_.empty()) return;
    // Size and depth first (memoized per function), so that recursion and exponential
    // expansions are refused before anything is built.
    Depth below;
    size_t total = count_graph(model_.graph, &below);
    if (total > kMaxInlinedNodes)
      ORTLITE_THROW(kInvalidGraph, "inlining model-local functions would produce more than ",
                    kMaxInlinedNodes, " nodes");
    collect_names(model_.graph, 0);
    expand_graph(model_.graph, 0, 0, nullptr);
  }

 private:
  // One instantiation of a function body.
  struct Scope {
    const Node* call;
    const Function* fn;
    std::map<std::string, std::string> rename;
    std::string prefix;
    OpsetsPtr opsets;
  };

  // How deep the expansion of a function nests below its call: calls (the call itself
  // included) and subgraphs (relative to the graph that holds the call).
  struct Depth {
    int calls = 0;
    int graphs = 0;
  };

  struct Info {
    bool done = false;
    bool active = false;
    size_t nodes = 0;  // nodes of the full expansion (saturated)
    Depth depth;
  };

  static size_t sat_add(size_t a, size_t b) {
    return a + b > kMaxInlinedNodes ? kMaxInlinedNodes + 1 : a + b;
  }

  static std::string qualified(const Function& f) {
    return (f.domain.empty() ? std::string() : f.domain + ".") + f.name;
  }

  // "f0 -> f1 -> ... -> f63 -> ": the calls being counted or expanded, the middle elided
  // when long.
  std::string call_chain() const {
    std::string chain;
    const size_t n = stack_.size();
    for (size_t i = 0; i < n; ++i) {
      if (n > 8 && i == 3) {
        chain += "... -> ";
        i = n - 4;
        continue;
      }
      chain += stack_[i]->name + " -> ";
    }
    return chain;
  }

  [[noreturn]] void call_depth_error(const Node& call, const Function& f, int depth) const {
    ORTLITE_THROW(kNotImplemented, call.label(), ": model-local function call depth ", depth,
                  " exceeds the limit of ", kMaxCallDepth, " nested calls (calling function '",
                  qualified(f), "': ", call_chain(), f.name, ")");
  }

  [[noreturn]] void graph_depth_error(const Node& owner, int depth) const {
    ORTLITE_THROW(kNotImplemented, owner.label(),
                  ": with model-local functions inlined, subgraphs nest ", depth,
                  " deep, which exceeds the limit of ", kMaxGraphDepth, " nested subgraphs",
                  stack_.empty() ? std::string() : " (in " + call_chain() + "...)");
  }

  size_t count_subgraph(const Graph& g, const Node& owner, Depth* below) {
    if (graph_depth_ >= kMaxGraphDepth) graph_depth_error(owner, graph_depth_ + 1);
    ++graph_depth_;
    Depth inner;
    const size_t total = count_graph(g, &inner);
    --graph_depth_;
    below->calls = std::max(below->calls, inner.calls);
    below->graphs = std::max(below->graphs, inner.graphs + 1);
    return total;
  }

  size_t count_node(const Node& n, Depth* below) {
    size_t total = 0;
    for (const Attribute& a : n.attributes) {
      if (a.g) total = sat_add(total, count_subgraph(*a.g, n, below));
      for (const auto& sg : a.graphs)
        if (sg) total = sat_add(total, count_subgraph(*sg, n, below));
    }
    if (const Function* f = find_function(n)) {
      const Info& callee = info_of(*f, n);
      below->calls = std::max(below->calls, callee.depth.calls);
      below->graphs = std::max(below->graphs, callee.depth.graphs);
      return sat_add(total, callee.nodes);
    }
    return sat_add(total, 1);
  }

  size_t count_graph(const Graph& g, Depth* below) {
    size_t total = 0;
    for (const Node& n : g.nodes) total = sat_add(total, count_node(n, below));
    return total;
  }

  // The size and depth of f's expansion, memoized. `call` is a node calling f at the
  // current depth (stack_, graph_depth_), which the expansion must fit under.
  const Info& info_of(const Function& f, const Node& call) {
    Info& info = infos_[&f];
    const int calls = static_cast<int>(stack_.size());
    if (info.done) {
      if (calls + info.depth.calls > kMaxCallDepth)
        call_depth_error(call, f, calls + info.depth.calls);
      if (graph_depth_ + info.depth.graphs > kMaxGraphDepth)
        graph_depth_error(call, graph_depth_ + info.depth.graphs);
      return info;
    }
    if (info.active) {
      ORTLITE_THROW(kInvalidGraph, call.label(), ": function '", f.name,
                    "' calls itself recursively (", call_chain(), f.name, ")");
    }
    if (calls >= kMaxCallDepth) call_depth_error(call, f, calls + 1);
    info.active = true;
    stack_.push_back(&f);
    size_t nodes = 0;
    Depth below;
    for (const Node& n : f.nodes) nodes = sat_add(nodes, count_node(n, &below));
    stack_.pop_back();
    Info& again = infos_[&f];  // (the map is node-based: references stay valid)
    again.active = false;
    again.done = true;
    again.nodes = nodes;
    again.depth.calls = below.calls + 1;
    again.depth.graphs = below.graphs;
    return again;
  }

  const Function* find_function(const Node& n) const {
    auto it = functions_.find(std::make_pair(n.domain, n.op_type));
    return it == functions_.end() ? nullptr : it->second;
  }

  void collect_names(const Graph& g, int level) {
    for (const auto& [name, _] : g.initializers) used_.insert(name);
    for (const auto* list : {&g.inputs, &g.outputs, &g.value_info})
      for (const ValueInfo& v : *list) used_.insert(v.name);
    for (const Node& n : g.nodes) {
      used_.insert(n.name);
      for (const std::string& s : n.inputs) used_.insert(s);
      for (const std::string& s : n.outputs) used_.insert(s);
      for (const Attribute& a : n.attributes) {
        if ((a.g || !a.graphs.empty()) && level >= kMaxGraphDepth) graph_depth_error(n, level + 1);
        if (a.g) collect_names(*a.g, level + 1);
        for (const auto& sg : a.graphs)
          if (sg) collect_names(*sg, level + 1);
      }
    }
  }

  // A name no other value or node of the model uses.
  std::string fresh(const std::string& base) {
    if (!base.empty() && used_.insert(base).second) return base;
    for (;;) {
      std::string s = base + "__" + std::to_string(++counter_);
      if (used_.insert(s).second) return s;
    }
  }

  OpsetsPtr merged_opsets(const Function& f, const OpsetsPtr& caller) {
    if (f.opset_imports.empty()) return caller;
    std::vector<OpsetImport> merged = caller ? *caller : model_.opset_imports;
    for (const OpsetImport& o : f.opset_imports) {
      bool replaced = false;
      for (OpsetImport& m : merged)
        if (m.domain == o.domain) {
          m.version = o.version;
          replaced = true;
        }
      if (!replaced) merged.push_back(o);
    }
    if (!caller && same_opsets(merged, model_.opset_imports)) return nullptr;
    return std::make_shared<const std::vector<OpsetImport>>(std::move(merged));
  }

  // `calls`: the calls being expanded around `n`; `graphs`: the subgraph depth of the
  // graph `n` ends up in.
  void expand_subgraphs(Node& n, int calls, int graphs, const OpsetsPtr& opsets) {
    if (!has_subgraph(n)) return;
    if (graphs >= kMaxGraphDepth) graph_depth_error(n, graphs + 1);
    for (Attribute& a : n.attributes) {
      if (a.g) expand_graph(*a.g, calls, graphs + 1, opsets);
      for (auto& sg : a.graphs)
        if (sg) expand_graph(*sg, calls, graphs + 1, opsets);
    }
  }

  void emit(Node&& n, std::vector<Node>& out, int calls, int graphs, const OpsetsPtr& opsets) {
    const OpsetsPtr& eff = n.opset_imports ? n.opset_imports : opsets;
    expand_subgraphs(n, calls, graphs, eff);
    if (find_function(n)) {
      expand_call(n, out, calls, graphs, eff);
      return;
    }
    if (++emitted_ > kMaxInlinedNodes)
      ORTLITE_THROW(kInvalidGraph, "inlining model-local functions produces more than ",
                    kMaxInlinedNodes, " nodes");
    out.push_back(std::move(n));
  }

  void expand_graph(Graph& g, int calls, int graphs, const OpsetsPtr& opsets) {
    bool any = false;
    for (const Node& n : g.nodes)
      if (find_function(n) || has_subgraph(n)) any = true;
    if (!any) {
      emitted_ += g.nodes.size();
      return;
    }
    std::vector<Node> out;
    out.reserve(g.nodes.size());
    for (Node& n : g.nodes) emit(std::move(n), out, calls, graphs, opsets);
    g.nodes = std::move(out);
  }

  static bool has_subgraph(const Node& n) {
    for (const Attribute& a : n.attributes)
      if (a.g || !a.graphs.empty()) return true;
    return false;
  }

  const std::string& map_name(Scope& s, const std::string& name) {
    static const std::string kEmpty;
    if (name.empty()) return kEmpty;
    auto it = s.rename.find(name);
    if (it != s.rename.end()) return it->second;
    return s.rename.emplace(name, fresh(s.prefix + "/" + name)).first->second;
  }

  // Resolves a body attribute: ref_attr_name takes the call's value or the default; false
  // when there is neither (the attribute is dropped).
  // `level`: the subgraph depth of the body node `owner` within the function body.
  bool resolve_attr(const Attribute& a, const Node& owner, int level, Scope& s, Attribute& out) {
    if (a.ref_attr_name.empty()) {
      out = a;
      if ((a.g || !a.graphs.empty()) && level >= kMaxGraphDepth)
        graph_depth_error(owner, level + 1);
      if (a.g) out.g = instantiate_graph(*a.g, level + 1, s);
      for (auto& sg : out.graphs)
        if (sg) sg = instantiate_graph(*sg, level + 1, s);
      return true;
    }
    const Attribute* v = s.call->find_attr(a.ref_attr_name);
    if (!v)
      for (const Attribute& d : s.fn->attribute_defaults)
        if (d.name == a.ref_attr_name) v = &d;
    if (!v) return false;
    out = *v;
    out.name = a.name;
    out.ref_attr_name.clear();
    return true;
  }

  Node instantiate_node(const Node& b, size_t index, int level, Scope& s) {
    Node n;
    n.op_type = b.op_type;
    n.domain = b.domain;
    n.doc_string = b.doc_string;
    n.name =
        fresh(s.prefix + "/" + (b.name.empty() ? b.op_type + "_" + std::to_string(index) : b.name));
    n.inputs.reserve(b.inputs.size());
    for (const std::string& x : b.inputs) n.inputs.push_back(map_name(s, x));
    n.outputs.reserve(b.outputs.size());
    for (const std::string& y : b.outputs) n.outputs.push_back(map_name(s, y));
    for (const Attribute& a : b.attributes) {
      Attribute r;
      if (resolve_attr(a, b, level, s, r)) n.attributes.push_back(std::move(r));
    }
    n.opset_imports = s.opsets;
    return n;
  }

  // A renamed copy of a subgraph inside a function body.
  std::shared_ptr<Graph> instantiate_graph(const Graph& body, int level, Scope& s) {
    auto g = std::make_shared<Graph>();
    g->name = body.name;
    g->doc_string = body.doc_string;
    for (const auto& [name, t] : body.initializers)
      g->initializers.emplace_back(map_name(s, name), t);
    auto copy_values = [&](const std::vector<ValueInfo>& from, std::vector<ValueInfo>& to) {
      for (const ValueInfo& v : from) {
        ValueInfo c = v;
        c.name = map_name(s, v.name);
        to.push_back(std::move(c));
      }
    };
    copy_values(body.inputs, g->inputs);
    copy_values(body.outputs, g->outputs);
    copy_values(body.value_info, g->value_info);
    g->nodes.reserve(body.nodes.size());
    for (size_t i = 0; i < body.nodes.size(); ++i)
      g->nodes.push_back(instantiate_node(body.nodes[i], i, level, s));
    return g;
  }

  void expand_call(const Node& call, std::vector<Node>& out, int calls, int graphs,
                   const OpsetsPtr& opsets) {
    const Function& f = *find_function(call);
    std::string fname = qualified(f);
    if (calls >= kMaxCallDepth) call_depth_error(call, f, calls + 1);
    for (const Function* active : stack_) {
      if (active == &f) {
        ORTLITE_THROW(kInvalidGraph, call.label(), ": function '", fname,
                      "' calls itself recursively (", call_chain(), f.name, ")");
      }
    }
    if (call.inputs.size() > f.inputs.size())
      ORTLITE_THROW(kInvalidGraph, call.label(), ": passes ", call.inputs.size(),
                    " inputs to function '", fname, "', which declares ", f.inputs.size());
    if (call.outputs.size() > f.outputs.size())
      ORTLITE_THROW(kInvalidGraph, call.label(), ": expects ", call.outputs.size(),
                    " outputs from function '", fname, "', which declares ", f.outputs.size());

    Scope s;
    s.call = &call;
    s.fn = &f;
    // Every name made below goes through fresh(), so the prefix need not be unique itself.
    s.prefix = call.name.empty() ? fresh(f.name + "_call") : call.name;
    s.opsets = merged_opsets(f, opsets);
    for (size_t i = 0; i < f.inputs.size(); ++i)
      s.rename[f.inputs[i]] = i < call.inputs.size() ? call.inputs[i] : std::string();
    for (size_t i = 0; i < f.outputs.size(); ++i)
      if (i < call.outputs.size() && !call.outputs[i].empty())
        s.rename[f.outputs[i]] = call.outputs[i];

    stack_.push_back(&f);
    for (size_t i = 0; i < f.nodes.size(); ++i)
      emit(instantiate_node(f.nodes[i], i, 0, s), out, calls + 1, graphs, s.opsets);
    stack_.pop_back();
  }

  Model& model_;
  std::map<std::pair<std::string, std::string>, const Function*> functions_;
  std::set<std::string> used_;
  std::vector<const Function*> stack_;  // the calls being counted or expanded
  int graph_depth_ = 0;                 // subgraph depth of the graph being counted
  std::map<const Function*, Info> infos_;
  size_t counter_ = 0;
  size_t emitted_ = 0;
};

}  // namespace

void inline_model_functions(Model& model) {
  Inliner(model).run();
}

}  // namespace ortlite
