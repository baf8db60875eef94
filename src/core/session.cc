#include "ortlite/session.h"

#include <algorithm>
#include <deque>
#include <new>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "core/function_inliner.h"
#include "core/graph_optimizer.h"

namespace ortlite {

namespace {

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

const std::string& norm_domain(const std::string& d) {
  static const std::string empty;
  return d == "ai.onnx" ? empty : d;
}

}  // namespace

// One step of the plan: a node, its kernel and where its values live.
struct PlannedNode {
  const Node* node = nullptr;
  std::unique_ptr<Kernel> kernel;
  std::vector<int> inputs;         // value slots; -1 for an omitted optional input
  std::vector<int> outputs;        // value slots; -1 for an omitted optional output
  std::vector<int> release_after;  // slots whose last use is this step
};

// A planned graph: the main graph of a session, or a subgraph (If branch, Loop body, ...).
struct GraphPlan {
  std::vector<std::string> value_names;
  std::unordered_map<std::string, int> slot_of;
  std::vector<PlannedNode> steps;                 // topological order
  std::vector<int> producer_step;                 // per slot: producing step or -1
  std::vector<std::pair<int, Tensor>> constants;  // initializer slots and their tensors
  std::vector<int> output_slots;                  // graph outputs in order
  std::unordered_set<int> pinned;                 // slots never released (graph outputs)
  std::vector<char> needed_all;                   // per step: needed for every graph output
  size_t max_inputs = 0, max_outputs = 0;         // over the steps, for the per-run scratch

  // Per step: whether computing `fetch` needs it. Fed and constant slots have no
  // producer, so the answer does not depend on the feeds.
  std::vector<char> needed_for(const std::vector<int>& fetch) const;
  // Runs the steps that `fetch` needs. `values` holds the feeds and constants on entry;
  // returns the fetched values in order.
  std::vector<Value> execute(std::vector<Value>& values, const std::vector<int>& fetch,
                             ThreadPool* pool, const RunConfig* run_config) const;
};

struct Session::Impl {
  GraphPlan plan;
  std::unordered_map<std::string, const ValueInfo*> feedable;  // inputs + overridable
  std::vector<int> required_slots;                             // slots of inputs_
};

Session::~Session() = default;

namespace {

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

int default_thread_count() {
  const unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp<unsigned>(hw == 0 ? 1 : hw, 1, 8));
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
std::vector<std::string> free_names(const Graph& g, int depth = 0) {
  if (depth > 64) ORTLITE_THROW(kInvalidGraph, "subgraphs are nested more than 64 deep");
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

// Plans `g`: `input_names` are the slots given values before any node runs (the graph's
// inputs; for a subgraph also its outer-scope names). Nodes with subgraphs get their
// outer-scope references appended as implicit inputs.
void plan_graph(GraphPlan& p, Graph& g, const Model& m, const std::vector<std::string>& input_names,
                bool is_subgraph) {
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
    ORTLITE_THROW(kInvalidGraph, "the graph has a cycle through: ", join(stuck));
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
    const KernelFactory* factory = registry.find(node.domain, node.op_type, opset);
    if (!factory) {
      ORTLITE_THROW(kNotImplemented, "no kernel for op '", node.op_type, "' (domain '",
                    domain_label, "', opset ", opset, ") needed by ", node.label(),
                    registry.has_op(node.domain, node.op_type)
                        ? ": this opset version is not supported"
                        : ": the operator is not implemented");
    }
    PlannedNode pn;
    pn.node = &node;
    KernelInfo info(node, opset, lookup, subgraph_builder(m, node));
    pn.kernel = (*factory)(info);
    pn.inputs = in_slots[i];
    pn.outputs = out_slots[i];
    for (int slot : pn.outputs)
      if (slot >= 0) p.producer_step[slot] = static_cast<int>(step);
    for (int slot : pn.inputs)
      if (slot >= 0) last_use[slot] = static_cast<int>(step);
    p.max_inputs = std::max(p.max_inputs, pn.inputs.size());
    p.max_outputs = std::max(p.max_outputs, pn.outputs.size());
    p.steps.push_back(std::move(pn));
  }
  // Release values after their last use; an unused output is released right away.
  for (size_t slot = 0; slot < last_use.size(); ++slot) {
    if (p.pinned.count(static_cast<int>(slot))) continue;
    int step = last_use[slot];
    if (step < 0) step = p.producer_step[slot];
    if (step >= 0) p.steps[step].release_after.push_back(static_cast<int>(slot));
  }
  p.needed_all = p.needed_for(p.output_slots);
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
    plan_graph(plan_, g, m, slots, true);
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

std::vector<char> GraphPlan::needed_for(const std::vector<int>& fetch) const {
  std::vector<char> needed(steps.size(), 0);
  std::vector<int> stack(fetch.begin(), fetch.end());
  std::vector<char> seen(value_names.size(), 0);
  while (!stack.empty()) {
    const int slot = stack.back();
    stack.pop_back();
    if (seen[slot]) continue;
    seen[slot] = 1;
    const int step = producer_step[slot];
    if (step < 0 || needed[step]) continue;
    needed[step] = 1;
    for (int in : steps[step].inputs)
      if (in >= 0) stack.push_back(in);
  }
  return needed;
}

std::vector<Value> GraphPlan::execute(std::vector<Value>& values, const std::vector<int>& fetch,
                                      ThreadPool* pool, const RunConfig* run_config) const {
  // Fetching every graph output (the common case) uses the plan made at load; those slots
  // are pinned, so nothing fetched is ever released.
  const bool all = fetch == output_slots;
  std::vector<char> needed_some, fetched;
  if (!all) {
    needed_some = needed_for(fetch);
    fetched.assign(value_names.size(), 0);
    for (int slot : fetch) fetched[slot] = 1;
  }
  const std::vector<char>& needed = all ? needed_all : needed_some;

  // One scratch array for every step's input pointers and outputs.
  std::vector<const Value*> in_ptrs(max_inputs);
  std::vector<Value> outs(max_outputs);
  for (size_t step = 0; step < steps.size(); ++step) {
    if (!needed[step]) continue;
    const PlannedNode& pn = steps[step];
    if (run_config && run_config->terminate.load(std::memory_order_relaxed)) {
      ORTLITE_THROW(kFail,
                    "Exiting due to terminate flag being set to true: the run was "
                    "terminated before ",
                    pn.node->label());
    }
    const size_t n_in = pn.inputs.size(), n_out = pn.outputs.size();
    for (size_t i = 0; i < n_in; ++i)
      in_ptrs[i] = pn.inputs[i] >= 0 ? &values[pn.inputs[i]] : nullptr;
    KernelContext ctx(*pn.node, in_ptrs.data(), n_in, outs.data(), n_out, pool, run_config);
    try {
      pn.kernel->compute(ctx);
    } catch (const Error& e) {
      for (size_t o = 0; o < n_out; ++o) outs[o] = Value();
      const std::string label = pn.node->label();
      if (std::string(e.what()).rfind(label, 0) == 0) throw;
      throw Error(e.code(), label + ": " + e.what());
    } catch (const std::bad_alloc&) {
      for (size_t o = 0; o < n_out; ++o) outs[o] = Value();
      ORTLITE_THROW(kFail, pn.node->label(), ": out of memory");
    } catch (const std::exception& e) {
      for (size_t o = 0; o < n_out; ++o) outs[o] = Value();
      ORTLITE_THROW(kRuntimeException, pn.node->label(), ": ", e.what());
    }
    for (size_t o = 0; o < n_out; ++o) {
      const int slot = pn.outputs[o];
      if (slot < 0) {
        outs[o] = Value();
        continue;
      }
      if (!outs[o].defined()) {
        ORTLITE_THROW(kFail, pn.node->label(), ": the kernel did not produce output '",
                      value_names[slot], "'");
      }
      values[slot] = std::move(outs[o]);
      outs[o] = Value();
    }
    for (int slot : pn.release_after)
      if (all || !fetched[slot]) values[slot] = Value();
  }

  std::vector<Value> results;
  results.reserve(fetch.size());
  for (int slot : fetch) {
    if (!values[slot].defined()) {
      ORTLITE_THROW(kInvalidArgument, "output '", value_names[slot],
                    "' has no value (an omitted optional graph input?)");
    }
    results.push_back(values[slot]);
  }
  return results;
}

std::shared_ptr<const Session> Session::create(Model model, const SessionConfig& config) {
  std::shared_ptr<Session> s(new Session());
  s->config_ = config;
  s->model_ = std::move(model);
  s->impl_ = std::make_unique<Impl>();
  Model& m = s->model_;
  Graph& g = m.graph;
  Impl& im = *s->impl_;

  inline_model_functions(m);

  // Initializers added through SessionOptions replace those of the same name.
  for (const auto& [name, tensor] : config.added_initializers) {
    bool replaced = false;
    for (auto& init : g.initializers) {
      if (init.first == name) {
        init.second = tensor;
        replaced = true;
      }
    }
    if (!replaced) g.initializers.emplace_back(name, tensor);
  }
  optimize_graph(m, config.graph_optimization_level);

  // Graph inputs, then initializers. An initializer that is also an input is overridable.
  std::unordered_set<std::string> init_names;
  for (const auto& init : g.initializers) {
    if (init.first.empty()) ORTLITE_THROW(kInvalidGraph, "an initializer has no name");
    if (!init_names.insert(init.first).second)
      ORTLITE_THROW(kInvalidGraph, "duplicate initializer name '", init.first, "'");
  }
  std::vector<std::string> input_names;
  for (const ValueInfo& vi : g.inputs) {
    input_names.push_back(vi.name);
    if (init_names.count(vi.name)) {
      s->overridable_.push_back(vi);
    } else {
      s->inputs_.push_back(vi);
    }
  }
  plan_graph(im.plan, g, m, input_names, false);
  for (const ValueInfo& vi : s->inputs_) im.feedable.emplace(vi.name, &vi);
  for (const ValueInfo& vi : s->overridable_) im.feedable.emplace(vi.name, &vi);
  for (const ValueInfo& vi : s->inputs_) im.required_slots.push_back(im.plan.slot_of.at(vi.name));
  for (const ValueInfo& vi : g.outputs) s->outputs_.push_back(vi);

  const int threads =
      config.intra_op_num_threads > 0 ? config.intra_op_num_threads : default_thread_count();
  s->pool_ = std::make_unique<ThreadPool>(threads);
  return s;
}

namespace {

void check_tensor_feed(const std::string& name, const TypeInfo& type, const Tensor& t) {
  if (type.elem_type != DataType::kUndefined && type.elem_type != t.dtype()) {
    ORTLITE_THROW(kInvalidArgument, "Unexpected input data type for input '", name,
                  "'. Actual: (tensor(", dtype_name(t.dtype()), ")) , expected: (tensor(",
                  dtype_name(type.elem_type), "))");
  }
  if (!type.has_shape) return;
  if (type.dims.size() != t.rank()) {
    ORTLITE_THROW(kInvalidArgument, "Invalid rank for input: ", name, " Got: ", t.rank(),
                  " Expected: ", type.dims.size(),
                  " Please fix either the inputs/outputs or the model.");
  }
  std::ostringstream bad;
  for (size_t d = 0; d < type.dims.size(); ++d) {
    if (type.dims[d].has_value && type.dims[d].value != t.dim(d))
      bad << " index: " << d << " Got: " << t.dim(d) << " Expected: " << type.dims[d].value;
  }
  if (!bad.str().empty()) {
    ORTLITE_THROW(kInvalidArgument, "Got invalid dimensions for input: ", name,
                  " for the following indices", bad.str(),
                  " Please fix either the inputs/outputs or the model.");
  }
}

void check_value_feed(const std::string& name, const TypeInfo& type, const Value& v) {
  using K = TypeInfo::Kind;
  switch (type.kind) {
    case K::kUnknown:
      return;
    case K::kOptional:
      if (v.is_none() || !type.elem) return;
      check_value_feed(name, *type.elem, v);
      return;
    case K::kSequence:
      // seq(map(...)) inputs (DictVectorizer-style models) have no feed form yet.
      if (type.elem && type.elem->kind == K::kMap) {
        ORTLITE_THROW(kNotImplemented, "input '", name, "' is a ", type.to_string(),
                      ": feeding maps is not supported");
      }
      if (!v.is_sequence()) {
        ORTLITE_THROW(kInvalidArgument, "input '", name, "' is a ", type.to_string(),
                      ": feed a list of arrays, not a ", v.type_string());
      }
      if (type.elem) {
        for (const Tensor& t : v.items()) {
          if (type.elem->kind == K::kTensor && type.elem->elem_type != DataType::kUndefined &&
              type.elem->elem_type != t.dtype()) {
            ORTLITE_THROW(kInvalidArgument, "input '", name, "' is a ", type.to_string(),
                          " but an element has type tensor(", dtype_name(t.dtype()), ")");
          }
        }
      }
      return;
    case K::kTensor:
      if (!v.is_tensor()) {
        ORTLITE_THROW(kInvalidArgument, "input '", name, "' is a ", type.to_string(), ", not a ",
                      v.type_string());
      }
      check_tensor_feed(name, type, v.tensor());
      return;
    default:
      ORTLITE_THROW(kNotImplemented, "input '", name, "' has type ", type.to_string(),
                    ", which is not supported yet");
  }
}

}  // namespace

void Session::check_feeds(const Feeds& feeds) const {
  for (const auto& [name, v] : feeds) {
    auto it = impl_->feedable.find(name);
    if (it == impl_->feedable.end()) {
      std::vector<std::string> names;
      for (const ValueInfo& vi : inputs_) names.push_back(vi.name);
      ORTLITE_THROW(kInvalidArgument, "Invalid input name: ", name,
                    " (the model's inputs: ", join(names), ")");
    }
    check_value_feed(name, it->second->type, v);
  }
}

std::vector<std::string> Session::missing_inputs(const std::vector<std::string>& feed_names) const {
  std::vector<std::string> missing;
  for (const ValueInfo& vi : inputs_) {
    if (std::find(feed_names.begin(), feed_names.end(), vi.name) == feed_names.end())
      missing.push_back(vi.name);
  }
  return missing;
}

void Session::check_output_names(const std::vector<std::string>& output_names) const {
  for (const std::string& name : output_names) {
    bool found = false;
    for (const ValueInfo& vi : outputs_) found |= vi.name == name;
    if (!found) {
      std::vector<std::string> names;
      for (const ValueInfo& vi : outputs_) names.push_back(vi.name);
      ORTLITE_THROW(kInvalidArgument, "Invalid output name: ", name,
                    " (the model's outputs: ", join(names), ")");
    }
  }
}

std::vector<Value> Session::run(const Feeds& feeds, const std::vector<std::string>& output_names,
                                const RunConfig* run_config) const {
  const GraphPlan& p = impl_->plan;
  std::vector<Value> values(p.value_names.size());
  std::vector<char> have(p.value_names.size(), 0);
  for (const auto& [slot, t] : p.constants) {
    values[slot] = t;
    have[slot] = 1;
  }
  for (const auto& [name, v] : feeds) {
    if (!impl_->feedable.count(name)) ORTLITE_THROW(kInvalidArgument, "Invalid input name: ", name);
    const int slot = p.slot_of.at(name);
    values[slot] = v;
    have[slot] = 1;
  }
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (!have[impl_->required_slots[i]])
      ORTLITE_THROW(kInvalidArgument, "required input '", inputs_[i].name, "' is missing");
  }

  // Requested outputs; only the steps they depend on run.
  std::vector<int> fetch;
  if (output_names.empty()) {
    fetch = p.output_slots;
  } else {
    check_output_names(output_names);
    for (const std::string& n : output_names) fetch.push_back(p.slot_of.at(n));
  }
  return p.execute(values, fetch, pool_.get(), run_config);
}

}  // namespace ortlite
