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

struct Session::Impl {
  std::vector<std::string> value_names;
  std::unordered_map<std::string, int> slot_of;
  std::vector<PlannedNode> steps;                 // topological order
  std::vector<int> producer_step;                 // per slot: producing step or -1
  std::vector<std::pair<int, Tensor>> constants;  // initializer slots and their tensors
  std::unordered_map<std::string, const ValueInfo*> feedable;  // inputs + overridable
  std::vector<int> output_slots;                               // graph outputs in order
  std::unordered_set<int> pinned;  // slots never released (graph outputs)
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

}  // namespace

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

  auto new_slot = [&](const std::string& name) {
    const int slot = static_cast<int>(im.value_names.size());
    im.value_names.push_back(name);
    im.slot_of.emplace(name, slot);
    im.producer_step.push_back(-1);
    return slot;
  };

  // Graph inputs, then initializers. An initializer that is also an input is overridable.
  std::unordered_set<std::string> init_names;
  for (const auto& init : g.initializers) {
    if (init.first.empty()) ORTLITE_THROW(kInvalidGraph, "an initializer has no name");
    if (!init_names.insert(init.first).second)
      ORTLITE_THROW(kInvalidGraph, "duplicate initializer name '", init.first, "'");
  }
  for (const ValueInfo& vi : g.inputs) {
    if (vi.name.empty()) ORTLITE_THROW(kInvalidGraph, "a graph input has no name");
    if (im.slot_of.count(vi.name))
      ORTLITE_THROW(kInvalidGraph, "duplicate graph input '", vi.name, "'");
    new_slot(vi.name);
    if (init_names.count(vi.name)) {
      s->overridable_.push_back(vi);
    } else {
      s->inputs_.push_back(vi);
    }
  }
  for (const ValueInfo& vi : s->inputs_) im.feedable.emplace(vi.name, &vi);
  for (const ValueInfo& vi : s->overridable_) im.feedable.emplace(vi.name, &vi);
  for (const auto& init : g.initializers) {
    auto it = im.slot_of.find(init.first);
    const int slot = it == im.slot_of.end() ? new_slot(init.first) : it->second;
    im.constants.emplace_back(slot, init.second);
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
      if (im.slot_of.count(out)) {
        ORTLITE_THROW(kInvalidGraph, node.label(), ": output '", out,
                      "' is already defined (duplicate output name)");
      }
      out_slots[i].push_back(new_slot(out));
    }
  }
  // Which node produces each slot (by node index, before ordering).
  std::vector<int> producer_node(im.value_names.size(), -1);
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
      auto it = im.slot_of.find(in);
      if (it == im.slot_of.end()) {
        ORTLITE_THROW(kInvalidGraph, node.label(), ": input '", in,
                      "' is not a graph input, an initializer or the output of any node");
      }
      in_slots[i].push_back(it->second);
      const int p = producer_node[it->second];
      if (p >= 0) deps.insert(p);
    }
    pending[i] = static_cast<int>(deps.size());
    for (int p : deps) consumers[p].push_back(static_cast<int>(i));
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
    auto it = im.slot_of.find(vi.name);
    if (vi.name.empty() || it == im.slot_of.end())
      ORTLITE_THROW(kInvalidGraph, "graph output '", vi.name, "' is not produced by any node");
    im.output_slots.push_back(it->second);
    im.pinned.insert(it->second);
    s->outputs_.push_back(vi);
  }

  // Values known at load, for kernels that pre-pack weights: non-overridable initializers
  // and the value of Constant nodes.
  std::unordered_map<std::string, const Tensor*> known;
  for (const auto& init : g.initializers) {
    bool overridable = false;
    for (const ValueInfo& vi : s->overridable_) overridable |= vi.name == init.first;
    if (!overridable) known.emplace(init.first, &init.second);
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
  std::vector<int> last_use(im.value_names.size(), -1);
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
    KernelInfo info(node, opset, lookup);
    pn.kernel = (*factory)(info);
    pn.inputs = in_slots[i];
    pn.outputs = out_slots[i];
    for (int slot : pn.outputs)
      if (slot >= 0) im.producer_step[slot] = static_cast<int>(step);
    for (int slot : pn.inputs)
      if (slot >= 0) last_use[slot] = static_cast<int>(step);
    im.steps.push_back(std::move(pn));
  }
  // Release values after their last use; an unused output is released right away.
  for (size_t slot = 0; slot < last_use.size(); ++slot) {
    if (im.pinned.count(static_cast<int>(slot))) continue;
    int step = last_use[slot];
    if (step < 0) step = im.producer_step[slot];
    if (step >= 0) im.steps[step].release_after.push_back(static_cast<int>(slot));
  }

  const int threads =
      config.intra_op_num_threads > 0 ? config.intra_op_num_threads : default_thread_count();
  s->pool_ = std::make_unique<ThreadPool>(threads);
  return s;
}

void Session::check_feeds(const std::vector<std::pair<std::string, Tensor>>& feeds) const {
  for (const auto& [name, t] : feeds) {
    auto it = impl_->feedable.find(name);
    if (it == impl_->feedable.end()) {
      std::vector<std::string> names;
      for (const ValueInfo& vi : inputs_) names.push_back(vi.name);
      ORTLITE_THROW(kInvalidArgument, "Invalid input name: ", name,
                    " (the model's inputs: ", join(names), ")");
    }
    const TypeInfo& type = it->second->type;
    if (type.kind != TypeInfo::Kind::kTensor && type.kind != TypeInfo::Kind::kUnknown) {
      ORTLITE_THROW(kNotImplemented, "input '", name, "' has type ", type.to_string(),
                    ", which is not supported yet");
    }
    if (type.elem_type != DataType::kUndefined && type.elem_type != t.dtype()) {
      ORTLITE_THROW(kInvalidArgument, "Unexpected input data type for input '", name,
                    "'. Actual: (tensor(", dtype_name(t.dtype()), ")) , expected: (tensor(",
                    dtype_name(type.elem_type), "))");
    }
    if (!type.has_shape) continue;
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

std::vector<Tensor> Session::run(const std::vector<std::pair<std::string, Tensor>>& feeds,
                                 const std::vector<std::string>& output_names,
                                 const RunConfig* run_config) const {
  const Impl& im = *impl_;
  std::vector<Tensor> values(im.value_names.size());
  std::vector<char> have(im.value_names.size(), 0);
  for (const auto& [slot, t] : im.constants) {
    values[slot] = t;
    have[slot] = 1;
  }
  for (const auto& [name, t] : feeds) {
    auto it = im.slot_of.find(name);
    if (it == im.slot_of.end() || !im.feedable.count(name))
      ORTLITE_THROW(kInvalidArgument, "Invalid input name: ", name);
    values[it->second] = t;
    have[it->second] = 1;
  }
  for (const ValueInfo& vi : inputs_) {
    if (!have[im.slot_of.at(vi.name)])
      ORTLITE_THROW(kInvalidArgument, "required input '", vi.name, "' is missing");
  }

  // Requested outputs; only the steps they depend on run.
  std::vector<int> fetch;
  if (output_names.empty()) {
    fetch = im.output_slots;
  } else {
    check_output_names(output_names);
    for (const std::string& n : output_names) fetch.push_back(im.slot_of.at(n));
  }
  std::vector<char> needed(im.steps.size(), 0);
  {
    std::vector<int> stack;
    std::vector<char> seen(im.value_names.size(), 0);
    for (int slot : fetch) stack.push_back(slot);
    while (!stack.empty()) {
      const int slot = stack.back();
      stack.pop_back();
      if (seen[slot]) continue;
      seen[slot] = 1;
      if (have[slot]) continue;  // fed or constant
      const int step = im.producer_step[slot];
      if (step < 0 || needed[step]) continue;
      needed[step] = 1;
      for (int in : im.steps[step].inputs)
        if (in >= 0) stack.push_back(in);
    }
  }
  std::vector<char> fetched(im.value_names.size(), 0);
  for (int slot : fetch) fetched[slot] = 1;

  ThreadPool* pool = pool_.get();
  for (size_t step = 0; step < im.steps.size(); ++step) {
    if (!needed[step]) continue;
    const PlannedNode& pn = im.steps[step];
    if (run_config && run_config->terminate.load(std::memory_order_relaxed)) {
      ORTLITE_THROW(kFail,
                    "Exiting due to terminate flag being set to true: the run was "
                    "terminated before ",
                    pn.node->label());
    }
    std::vector<const Tensor*> inputs;
    inputs.reserve(pn.inputs.size());
    for (int slot : pn.inputs) inputs.push_back(slot >= 0 ? &values[slot] : nullptr);
    KernelContext ctx(*pn.node, std::move(inputs), pn.outputs.size(), pool);
    try {
      pn.kernel->compute(ctx);
    } catch (const Error& e) {
      const std::string label = pn.node->label();
      if (std::string(e.what()).rfind(label, 0) == 0) throw;
      throw Error(e.code(), label + ": " + e.what());
    } catch (const std::bad_alloc&) {
      ORTLITE_THROW(kFail, pn.node->label(), ": out of memory");
    } catch (const std::exception& e) {
      ORTLITE_THROW(kRuntimeException, pn.node->label(), ": ", e.what());
    }
    for (size_t o = 0; o < pn.outputs.size(); ++o) {
      const int slot = pn.outputs[o];
      if (slot < 0) continue;
      Tensor& t = ctx.output(o);
      if (!t.defined()) {
        ORTLITE_THROW(kFail, pn.node->label(), ": the kernel did not produce output '",
                      im.value_names[slot], "'");
      }
      values[slot] = std::move(t);
    }
    for (int slot : pn.release_after)
      if (!fetched[slot]) values[slot] = Tensor();
  }

  std::vector<Tensor> results;
  results.reserve(fetch.size());
  for (int slot : fetch) results.push_back(values[slot]);
  return results;
}

}  // namespace ortlite
