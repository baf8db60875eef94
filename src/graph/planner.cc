// The planner: orders a graph, binds each node to a provider's kernel (the first provider
// of the session's list that has one, the CPU last), inserts the copies between devices,
// decides when each value is released and which values share a buffer (graph/executor.h).
#include "graph/planner.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "graph/type_inference.h"

namespace ortlite {

namespace {

const std::string& norm_domain(const std::string& d) {
  static const std::string empty;
  return d == "ai.onnx" ? empty : d;
}

template <typename F>
void for_each_subgraph(const Node& node, F&& f) {
  for (const Attribute& a : node.attributes) {
    if (a.type == AttrType::kGraph && a.g) f(*a.g);
    if (a.type == AttrType::kGraphs)
      for (const auto& g : a.graphs)
        if (g) f(*g);
  }
}

// Names that `g` (or a subgraph nested in it) reads but does not define: its outer-scope
// references, in first-use order.
// `depth`: how deep `g` is below the graph the walk started from; the bound is checked
// before each step down.
std::vector<std::string> free_names(const Graph& g, int depth = 0) {
  std::unordered_set<std::string> defined;
  for (const ValueInfo& vi : g.inputs) defined.insert(vi.name);
  for (const auto& init : g.initializers) defined.insert(init.first);
  for (const Node& node : g.nodes)
    for (const std::string& out : node.outputs) defined.insert(out);
  std::vector<std::string> names;
  std::unordered_set<std::string> seen;
  auto use = [&](const std::string& n) {
    if (!n.empty() && !defined.count(n) && seen.insert(n).second) names.push_back(n);
  };
  for (const Node& node : g.nodes) {
    const size_t explicit_inputs = node.inputs.size() - node.implicit_inputs;
    for (size_t i = 0; i < explicit_inputs; ++i) use(node.inputs[i]);
    for_each_subgraph(node, [&](const Graph& sub) {
      if (depth >= 64)
        ORTLITE_THROW(kInvalidGraph, node.label(), ": subgraphs are nested more than 64 deep");
      for (const std::string& n : free_names(sub, depth + 1)) use(n);
    });
  }
  for (const ValueInfo& vi : g.outputs) use(vi.name);
  return names;
}

std::string graph_label(const Graph& g) {
  return g.name.empty() ? std::string("a subgraph") : "subgraph '" + g.name + "'";
}

KernelInfo::SubgraphBuilder subgraph_builder(const Model& model, const Node& owner);

// The first provider of the list that is not the CPU (the planner places nodes on one
// device provider at most), or nullptr.
const ExecutionProvider* device_provider(const Placement& placement) {
  for (const auto& p : placement.providers) {
    if (p->on_host()) return nullptr;
    return p.get();
  }
  return nullptr;
}

// Chooses the device provider's kernel for each node it accepts (a factory that throws
// declines), then sends back to the CPU, consumers first, every node whose outputs are read
// only on the host (shape arithmetic feeding Reshape's shape, ...), so such values never
// travel to the device and back. `kernels` gets one entry per step (null: CPU).
template <typename Lookup>
void place_on_device(GraphPlan& p, const Graph& g, const Model& m, const std::vector<int>& order,
                     const std::vector<std::vector<int>>& in_slots,
                     const std::vector<std::vector<int>>& out_slots, const Lookup& lookup,
                     const Placement& placement, std::vector<std::unique_ptr<Kernel>>& kernels) {
  const ExecutionProvider* dev = device_provider(placement);
  if (!dev) return;
  for (const auto& sp : placement.providers)
    if (sp.get() == dev) p.device_provider = sp;
  const std::unordered_map<std::string, DataType> types = infer_elem_types(g, order);
  // "CUDA" for CUDAExecutionProvider, in the placement log and the reasons.
  std::string label = dev->name();
  if (const size_t k = label.find("ExecutionProvider"); k != std::string::npos) label.resize(k);
  const size_t n = order.size();
  kernels.resize(n);
  std::vector<std::string> why(n);
  std::vector<int64_t> opsets(n);
  for (size_t step = 0; step < n; ++step) {
    const Node& node = g.nodes[order[step]];
    opsets[step] = node_opset(m, node);
    if (opsets[step] < 0) continue;
    const KernelFactory* f = dev->find_kernel(node.domain, node.op_type, opsets[step]);
    if (!f) {
      why[step] = "no " + label + " kernel";
      continue;
    }
    KernelInfo info(node, opsets[step], lookup);
    std::vector<DataType> ts(info.num_inputs(), DataType::kUndefined);
    for (size_t k = 0; k < ts.size(); ++k) {
      auto it = types.find(node.inputs[k]);
      if (it != types.end()) ts[k] = it->second;
    }
    info.set_input_types(std::move(ts));
    try {
      kernels[step] = (*f)(info);
    } catch (const Error& e) {
      // Any refusal (types, attributes) leaves the node to the CPU kernel, which reports
      // a genuinely bad node itself.
      why[step] = e.what();
    }
  }
  std::vector<std::vector<std::pair<size_t, size_t>>> uses(p.value_names.size());
  for (size_t step = 0; step < n; ++step) {
    const std::vector<int>& ins = in_slots[order[step]];
    for (size_t k = 0; k < ins.size(); ++k)
      if (ins[k] >= 0) uses[ins[k]].emplace_back(step, k);
  }
  for (size_t r = n; r-- > 0;) {
    if (!kernels[r]) continue;
    bool used = false, device_use = false;
    for (int slot : out_slots[order[r]]) {
      if (slot < 0) continue;
      if (p.pinned.count(slot)) device_use = true;
      for (const auto& [c, k] : uses[slot]) {
        const Node& cn = g.nodes[order[c]];
        if (!kernels[c] && norm_domain(cn.domain).empty() && op_in(cn.op_type, {"Shape", "Size"}))
          continue;  // reads only the shape, on either side
        used = true;
        const size_t n_explicit = cn.inputs.size() - cn.implicit_inputs;
        if (kernels[c] && k < n_explicit && !dev->input_on_host(cn.op_type, opsets[c], k))
          device_use = true;
      }
    }
    if (used && !device_use) {
      kernels[r].reset();
      why[r] = "its outputs are read only on the host";
    }
  }
  if (placement.log_severity_level <= 0) {
    std::fprintf(stderr, "[ortlite] node placement (%s device %d%s):\n", dev->name(),
                 dev->device().id, dev->can_run() ? "" : ", plan only");
    for (size_t step = 0; step < n; ++step) {
      const std::string label = g.nodes[order[step]].label();
      std::fprintf(stderr, "[ortlite]   %s: %s%s%s%s\n", label.c_str(),
                   kernels[step] ? label.c_str() : "CPU", why[step].empty() ? "" : " (",
                   why[step].c_str(), why[step].empty() ? "" : ")");
    }
  }
}

// Device copies of the load-time constants that device nodes read on the device.
// Overridable initializers are not in `known`: a feed may replace them.
void upload_device_constants(GraphPlan& p,
                             const std::unordered_map<std::string, const Tensor*>& known) {
  const ExecutionProvider* dev = p.device_provider.get();
  if (!dev->can_run()) return;
  std::vector<char> device_use(p.value_names.size(), 0);
  for (const PlannedNode& pn : p.steps) {
    if (pn.provider != dev) continue;
    for (size_t k = 0; k < pn.inputs.size(); ++k)
      if (pn.inputs[k] >= 0 && !pn.host_inputs[k]) device_use[pn.inputs[k]] = 1;
  }
  for (const auto& [name, t] : known) {
    const int slot = p.slot_of.at(name);
    if (device_use[slot]) p.device_constants.emplace_back(slot, dev->to_device(*t, nullptr));
  }
}

// The CPU kernel of `node`; kNotImplemented naming the op, its domain and opset when there
// is none.
template <typename Lookup>
std::unique_ptr<Kernel> cpu_kernel(const KernelRegistry& registry, const Model& m, const Node& node,
                                   int64_t opset, const std::string& domain_label,
                                   const Lookup& lookup) {
  const KernelFactory* factory = registry.find(node.domain, node.op_type, opset);
  if (!factory) {
    ORTLITE_THROW(kNotImplemented, "no kernel for op '", node.op_type, "' (domain '", domain_label,
                  "', opset ", opset, ") needed by ", node.label(),
                  registry.has_op(node.domain, node.op_type)
                      ? ": this opset version is not supported"
                      : ": the operator is not implemented");
  }
  KernelInfo info(node, opset, lookup, subgraph_builder(m, node));
  return (*factory)(info);
}

// Plans `g`: `input_names` are the slots given values before any node runs (the graph's
// inputs; for a subgraph also its outer-scope names). Nodes with subgraphs get their
// outer-scope references appended as implicit inputs.
void plan_graph_impl(GraphPlan& p, Graph& g, const Model& m,
                     const std::vector<std::string>& input_names, bool is_subgraph,
                     const Placement* placement) {
  auto new_slot = [&](const std::string& name) {
    const int slot = static_cast<int>(p.value_names.size());
    p.value_names.push_back(name);
    p.slot_of.emplace(name, slot);
    p.producer_step.push_back(-1);
    return slot;
  };
  for (const std::string& name : input_names) {
    if (name.empty()) ORTLITE_THROW(kInvalidGraph, "a graph input has no name");
    if (p.slot_of.count(name)) ORTLITE_THROW(kInvalidGraph, "duplicate graph input '", name, "'");
    new_slot(name);
  }
  for (const auto& init : g.initializers) {
    auto it = p.slot_of.find(init.first);
    const int slot = it == p.slot_of.end() ? new_slot(init.first) : it->second;
    p.constants.emplace_back(slot, init.second);
  }

  // Outer-scope values read by subgraphs become implicit inputs of their node.
  for (Node& node : g.nodes) {
    if (node.implicit_inputs != 0) continue;
    std::vector<std::string> outer;
    for_each_subgraph(node, [&](const Graph& sub) {
      for (const std::string& n : free_names(sub))
        if (std::find(outer.begin(), outer.end(), n) == outer.end()) outer.push_back(n);
    });
    node.inputs.insert(node.inputs.end(), outer.begin(), outer.end());
    node.implicit_inputs = outer.size();
  }

  // Node outputs: each value has exactly one producer.
  const size_t n_nodes = g.nodes.size();
  std::vector<std::vector<int>> out_slots(n_nodes);
  for (size_t i = 0; i < n_nodes; ++i) {
    const Node& node = g.nodes[i];
    for (const std::string& out : node.outputs) {
      if (out.empty()) {
        out_slots[i].push_back(-1);
        continue;
      }
      if (p.slot_of.count(out)) {
        ORTLITE_THROW(kInvalidGraph, node.label(), ": output '", out,
                      "' is already defined (duplicate output name)");
      }
      out_slots[i].push_back(new_slot(out));
    }
  }
  // Which node produces each slot (by node index, before ordering).
  std::vector<int> producer_node(p.value_names.size(), -1);
  for (size_t i = 0; i < n_nodes; ++i)
    for (int slot : out_slots[i])
      if (slot >= 0) producer_node[slot] = static_cast<int>(i);

  // Inputs must be produced by something; build the dependency graph.
  std::vector<std::vector<int>> in_slots(n_nodes);
  std::vector<int> pending(n_nodes, 0);
  std::vector<std::vector<int>> consumers(n_nodes);
  for (size_t i = 0; i < n_nodes; ++i) {
    const Node& node = g.nodes[i];
    std::set<int> deps;
    for (const std::string& in : node.inputs) {
      if (in.empty()) {
        in_slots[i].push_back(-1);
        continue;
      }
      auto it = p.slot_of.find(in);
      if (it == p.slot_of.end()) {
        ORTLITE_THROW(kInvalidGraph, node.label(), ": input '", in,
                      "' is not a graph input, an initializer or the output of any node",
                      is_subgraph ? " (in " + graph_label(g) + ")" : std::string());
      }
      in_slots[i].push_back(it->second);
      const int pr = producer_node[it->second];
      if (pr >= 0) deps.insert(pr);
    }
    pending[i] = static_cast<int>(deps.size());
    for (int pr : deps) consumers[pr].push_back(static_cast<int>(i));
  }

  // Kahn's algorithm, keeping file order among ready nodes.
  std::vector<int> order;
  order.reserve(n_nodes);
  std::deque<int> ready;
  for (size_t i = 0; i < n_nodes; ++i)
    if (pending[i] == 0) ready.push_back(static_cast<int>(i));
  while (!ready.empty()) {
    const int i = ready.front();
    ready.pop_front();
    order.push_back(i);
    for (int c : consumers[i])
      if (--pending[c] == 0) ready.push_back(c);
  }
  if (order.size() != n_nodes) {
    std::vector<std::string> stuck;
    for (size_t i = 0; i < n_nodes && stuck.size() < 8; ++i)
      if (pending[i] > 0) stuck.push_back(g.nodes[i].label());
    ORTLITE_THROW(kInvalidGraph, "the graph has a cycle through: ", join_strings(stuck));
  }

  // Graph outputs must exist.
  for (const ValueInfo& vi : g.outputs) {
    auto it = p.slot_of.find(vi.name);
    if (vi.name.empty() || it == p.slot_of.end()) {
      ORTLITE_THROW(kInvalidGraph, "graph output '", vi.name, "' is not produced by any node",
                    is_subgraph ? " (in " + graph_label(g) + ")" : std::string());
    }
    p.output_slots.push_back(it->second);
    p.pinned.insert(it->second);
  }

  // Values known at load, for kernels that pre-pack weights: initializers that no feed
  // can replace and the value of Constant nodes.
  std::unordered_map<std::string, const Tensor*> known;
  for (const auto& init : g.initializers) {
    if (std::find(input_names.begin(), input_names.end(), init.first) == input_names.end())
      known.emplace(init.first, &init.second);
  }
  for (const Node& node : g.nodes) {
    if (node.op_type == "Constant" && norm_domain(node.domain).empty() &&
        node.outputs.size() == 1) {
      const Attribute* a = node.find_attr("value");
      if (a && a->type == AttrType::kTensor) known.emplace(node.outputs[0], &a->t);
    }
  }
  auto lookup = [&known](const std::string& name) -> const Tensor* {
    auto it = known.find(name);
    return it == known.end() ? nullptr : it->second;
  };

  // Kernels, in order.
  const KernelRegistry& registry = KernelRegistry::instance();
  std::vector<std::unique_ptr<Kernel>> device_kernels;
  if (placement)
    place_on_device(p, g, m, order, in_slots, out_slots, lookup, *placement, device_kernels);
  const ExecutionProvider* dev = p.device_provider.get();
  std::vector<int> last_use(p.value_names.size(), -1);
  for (size_t step = 0; step < order.size(); ++step) {
    const int i = order[step];
    const Node& node = g.nodes[i];
    const int64_t opset = node_opset(m, node);
    const std::string domain_label = norm_domain(node.domain).empty() ? "ai.onnx" : node.domain;
    if (opset < 0) {
      ORTLITE_THROW(kInvalidGraph, node.label(), ": the model does not import domain '",
                    domain_label, "'");
    }
    PlannedNode pn;
    pn.node = &node;
    pn.inputs = in_slots[i];
    pn.outputs = out_slots[i];
    if (step < device_kernels.size() && device_kernels[step]) {
      pn.kernel = std::move(device_kernels[step]);
      pn.provider = dev;
      const size_t n_explicit = node.inputs.size() - node.implicit_inputs;
      for (size_t k = 0; k < pn.inputs.size(); ++k)
        pn.host_inputs.push_back(k >= n_explicit || dev->input_on_host(node.op_type, opset, k));
    } else {
      pn.provider = &cpu_provider();
      pn.kernel = cpu_kernel(registry, m, node, opset, domain_label, lookup);
      pn.shape_only = norm_domain(node.domain).empty() && op_in(node.op_type, {"Shape", "Size"});
    }
    for (int slot : pn.outputs)
      if (slot >= 0) p.producer_step[slot] = static_cast<int>(step);
    for (int slot : pn.inputs)
      if (slot >= 0) last_use[slot] = static_cast<int>(step);
    p.max_inputs = std::max(p.max_inputs, pn.inputs.size());
    p.max_outputs = std::max(p.max_outputs, pn.outputs.size());
    p.steps.push_back(std::move(pn));
  }
  // Release values after their last use; an unused output is released right away.
  // Constants stay: the plan holds them anyway, and a run's arena keeps them set.
  p.is_constant.assign(p.value_names.size(), 0);
  for (const auto& c : p.constants) p.is_constant[c.first] = 1;
  for (size_t slot = 0; slot < last_use.size(); ++slot) {
    if (p.pinned.count(static_cast<int>(slot)) || p.is_constant[slot]) continue;
    int step = last_use[slot];
    if (step < 0) step = p.producer_step[slot];
    if (step >= 0) p.steps[step].release_after.push_back(static_cast<int>(slot));
  }
  p.needed_all = p.needed_for(p.output_slots);
  p.plan_arena();
  if (dev) {
    bool any = false;
    for (const PlannedNode& pn : p.steps) any = any || pn.provider == dev;
    if (any) {
      upload_device_constants(p, known);
    } else {
      p.device_provider.reset();  // nothing placed there: a CPU-only plan
    }
  }
}

// A planned subgraph attribute. Its outer-scope names are read from the owning node's
// implicit inputs.
class PlannedSubgraph final : public Subgraph {
 public:
  PlannedSubgraph(const Model& m, Graph& g, const Node& owner) : graph_(g) {
    for (const ValueInfo& vi : g.inputs) inputs_.push_back(vi.name);
    for (const ValueInfo& vi : g.outputs) outputs_.push_back(vi.name);
    std::vector<std::string> slots = inputs_;
    const size_t first_implicit = owner.inputs.size() - owner.implicit_inputs;
    for (const std::string& n : free_names(g)) {
      size_t idx = owner.inputs.size();
      for (size_t i = first_implicit; i < owner.inputs.size(); ++i)
        if (owner.inputs[i] == n) idx = i;
      if (idx == owner.inputs.size()) {
        ORTLITE_THROW(kInvalidGraph, owner.label(), ": ", graph_label(g), " reads '", n,
                      "', which the enclosing graph does not define");
      }
      if (std::find(slots.begin(), slots.end(), n) != slots.end()) continue;
      slots.push_back(n);
      outer_.emplace_back(n, idx);
    }
    plan_graph_impl(plan_, g, m, slots, true, nullptr);
  }

  const std::vector<std::string>& input_names() const override { return inputs_; }
  const std::vector<std::string>& output_names() const override { return outputs_; }
  const TypeInfo& output_type(size_t i) const override { return graph_.outputs.at(i).type; }

  std::vector<Value> run(std::vector<Value> inputs, const KernelContext& ctx) const override {
    if (inputs.size() != inputs_.size()) {
      ORTLITE_THROW(kInvalidArgument, graph_label(graph_), " takes ", inputs_.size(),
                    " inputs, got ", inputs.size());
    }
    std::vector<Value> values(plan_.value_names.size());
    for (const auto& [slot, t] : plan_.constants) values[slot] = t;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].defined()) values[i] = std::move(inputs[i]);
    for (size_t k = 0; k < outer_.size(); ++k) {
      const Value* v = ctx.input_value(outer_[k].second);
      if (v && v->defined()) values[inputs_.size() + k] = *v;
    }
    return plan_.execute(values, plan_.output_slots, ctx.thread_pool(), ctx.run_config());
  }

 private:
  Graph& graph_;
  std::vector<std::string> inputs_, outputs_;
  std::vector<std::pair<std::string, size_t>> outer_;  // name, index in the owner's inputs
  GraphPlan plan_;
};

KernelInfo::SubgraphBuilder subgraph_builder(const Model& model, const Node& owner) {
  bool has_graph = false;
  for_each_subgraph(owner, [&](const Graph&) { has_graph = true; });
  if (!has_graph) return nullptr;
  const Model* m = &model;
  const Node* node = &owner;
  return [m, node](const Attribute& a) -> std::shared_ptr<const Subgraph> {
    return std::make_shared<PlannedSubgraph>(*m, *a.g, *node);
  };
}

}  // namespace

void plan_graph(GraphPlan& p, Graph& g, const Model& m, const std::vector<std::string>& input_names,
                bool is_subgraph, const Placement* placement) {
  plan_graph_impl(p, g, m, input_names, is_subgraph, placement);
}

int64_t node_opset(const Model& model, const Node& node) {
  const std::string& domain = norm_domain(node.domain);
  if (node.opset_imports) {
    for (const OpsetImport& o : *node.opset_imports)
      if (norm_domain(o.domain) == domain) return o.version;
  }
  for (const OpsetImport& o : model.opset_imports)
    if (norm_domain(o.domain) == domain) return o.version;
  return -1;
}

}  // namespace ortlite
