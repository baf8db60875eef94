#include "ortlite/session.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <new>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "onnx/function_inliner.h"
#include "graph/optimizer.h"
#include "graph/executor.h"
#include "core/profiler.h"
#include "providers/cuda/provider.h"

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

struct Session::Impl {
  ~Impl() { delete spare_arena.load(); }
  GraphPlan plan;
  // An arena not in use by a run: a run takes it (or makes one when concurrent runs hold
  // the others) and puts it back; at most one is kept between runs.
  std::atomic<RunArena*> spare_arena{nullptr};
  std::unique_ptr<Profiler> profiler;  // with SessionConfig::enable_profiling
  // Inputs and overridable initializers: what a feed may name, and its value slot.
  struct Feedable {
    const ValueInfo* info;
    int slot;
    bool required;  // an input (not an overridable initializer)
  };
  std::unordered_map<std::string, Feedable> feedable;
  std::vector<Feedable> by_position;  // inputs_, then overridable_ (what feedable holds)
  std::vector<int> required_slots;    // slots of inputs_

  // The Feedable of `name`; `hint` is the position in by_position where it likely is (feeds
  // usually come in input order), compared first: a hit costs no hashing and reads memory
  // in order.
  const Feedable* find(const std::string& name, size_t hint) const {
    if (hint < by_position.size() && by_position[hint].info->name == name)
      return &by_position[hint];
    auto it = feedable.find(name);
    return it == feedable.end() ? nullptr : &it->second;
  }
  std::unordered_set<std::string> output_names;
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

bool op_in(const std::string& op, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (op == n) return true;
  return false;
}

// Element types of the graph's tensor values as far as declarations and a few per-op rules
// tell (no shape inference): enough for a provider's factory to decline nodes whose types
// it does not run. Unknown values are absent.
std::unordered_map<std::string, DataType> infer_elem_types(const Graph& g,
                                                           const std::vector<int>& order) {
  std::unordered_map<std::string, DataType> types;
  auto declare = [&](const ValueInfo& vi) {
    if (vi.type.kind == TypeInfo::Kind::kTensor && vi.type.elem_type != DataType::kUndefined)
      types.emplace(vi.name, vi.type.elem_type);
  };
  for (const auto& init : g.initializers) types[init.first] = init.second.dtype();
  for (const ValueInfo& vi : g.inputs) declare(vi);
  for (const ValueInfo& vi : g.value_info) declare(vi);
  for (const ValueInfo& vi : g.outputs) declare(vi);
  for (int i : order) {
    const Node& node = g.nodes[i];
    if (!norm_domain(node.domain).empty()) continue;
    auto in_type = [&](size_t k) {
      if (k >= node.inputs.size() || node.inputs[k].empty()) return DataType::kUndefined;
      auto it = types.find(node.inputs[k]);
      return it == types.end() ? DataType::kUndefined : it->second;
    };
    const std::string& op = node.op_type;
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      if (node.outputs[o].empty() || types.count(node.outputs[o])) continue;
      DataType t = DataType::kUndefined;
      if (op == "Constant") {
        const Attribute* a = node.find_attr("value");
        if (a && a->type == AttrType::kTensor) t = a->t.dtype();
        if (node.find_attr("value_float") || node.find_attr("value_floats")) t = DataType::kFloat;
        if (node.find_attr("value_int") || node.find_attr("value_ints")) t = DataType::kInt64;
      } else if (op == "Cast" && o == 0) {
        const Attribute* a = node.find_attr("to");
        if (a && a->type == AttrType::kInt) t = static_cast<DataType>(a->i);
      } else if (op == "CastLike" && o == 0) {
        t = in_type(1);
      } else if (op_in(op, {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And",
                            "Or", "Xor", "Not", "IsNaN", "IsInf"}) &&
                 o == 0) {
        t = DataType::kBool;
      } else if ((op_in(op, {"Shape", "Size", "NonZero", "ArgMax", "ArgMin"}) && o == 0) ||
                 (op_in(op, {"MaxPool", "TopK"}) && o == 1)) {
        t = DataType::kInt64;
      } else if (op == "Dropout" && o == 1) {
        t = DataType::kBool;
      } else if (op == "Where" && o == 0) {
        t = in_type(1);
      } else if (o == 0 || op == "Split") {
        static const std::unordered_set<std::string> same_as_input0 = {"Add",
                                                                       "Sub",
                                                                       "Mul",
                                                                       "Div",
                                                                       "Pow",
                                                                       "Mod",
                                                                       "PRelu",
                                                                       "Max",
                                                                       "Min",
                                                                       "Sum",
                                                                       "Mean",
                                                                       "Relu",
                                                                       "LeakyRelu",
                                                                       "Sigmoid",
                                                                       "Tanh",
                                                                       "Gelu",
                                                                       "Elu",
                                                                       "Selu",
                                                                       "HardSigmoid",
                                                                       "HardSwish",
                                                                       "Softplus",
                                                                       "Softsign",
                                                                       "Exp",
                                                                       "Log",
                                                                       "Sqrt",
                                                                       "Abs",
                                                                       "Neg",
                                                                       "Reciprocal",
                                                                       "Erf",
                                                                       "Sin",
                                                                       "Cos",
                                                                       "Floor",
                                                                       "Ceil",
                                                                       "Clip",
                                                                       "Softmax",
                                                                       "LogSoftmax",
                                                                       "LayerNormalization",
                                                                       "BatchNormalization",
                                                                       "InstanceNormalization",
                                                                       "MaxPool",
                                                                       "AveragePool",
                                                                       "GlobalMaxPool",
                                                                       "GlobalAveragePool",
                                                                       "Conv",
                                                                       "ConvTranspose",
                                                                       "MatMul",
                                                                       "Gemm",
                                                                       "ReduceSum",
                                                                       "ReduceMean",
                                                                       "ReduceMax",
                                                                       "ReduceMin",
                                                                       "ReduceProd",
                                                                       "ReduceL1",
                                                                       "ReduceL2",
                                                                       "ReduceLogSum",
                                                                       "ReduceLogSumExp",
                                                                       "ReduceSumSquare",
                                                                       "Transpose",
                                                                       "Concat",
                                                                       "Slice",
                                                                       "Gather",
                                                                       "GatherElements",
                                                                       "Expand",
                                                                       "Reshape",
                                                                       "Flatten",
                                                                       "Squeeze",
                                                                       "Unsqueeze",
                                                                       "Identity",
                                                                       "Dropout",
                                                                       "Split",
                                                                       "Tile",
                                                                       "Pad",
                                                                       "Resize",
                                                                       "Mish",
                                                                       "Swish",
                                                                       "Range",
                                                                       "CumSum",
                                                                       "Einsum",
                                                                       "Sign",
                                                                       "Round"};
        if (same_as_input0.count(op)) t = in_type(0);
      }
      if (t != DataType::kUndefined) types[node.outputs[o]] = t;
    }
  }
  return types;
}

// Whether the session asks for CUDA placement: CUDAExecutionProvider before the CPU.
bool wants_cuda(const SessionConfig& c) {
  for (const std::string& p : c.providers) {
    if (p == kCpuProvider) return false;
    if (p == cuda::kCudaProvider) return true;
  }
  return false;
}

// Chooses the CUDA kernel of each node the CUDA provider accepts (a factory that throws
// declines), then sends back to the CPU, consumers first, every node whose outputs are read
// only on the host (shape arithmetic feeding Reshape's shape, ...), so such values never
// travel to the device and back. `kernels` gets one entry per step (null: CPU).
template <typename Lookup>
void place_on_cuda(GraphPlan& p, const Graph& g, const Model& m, const std::vector<int>& order,
                   const std::vector<std::vector<int>>& in_slots,
                   const std::vector<std::vector<int>>& out_slots, const Lookup& lookup,
                   const SessionConfig& config, std::vector<std::unique_ptr<Kernel>>& kernels) {
  if (!wants_cuda(config)) return;
  p.device = config.cuda_device_id;
  p.cuda_plan_only = config.cuda_plan_only;
  const KernelRegistry& registry = KernelRegistry::instance();
  const std::unordered_map<std::string, DataType> types = infer_elem_types(g, order);
  const size_t n = order.size();
  kernels.resize(n);
  std::vector<std::string> why(n);
  std::vector<int64_t> opsets(n);
  for (size_t step = 0; step < n; ++step) {
    const Node& node = g.nodes[order[step]];
    opsets[step] = node_opset(m, node);
    if (opsets[step] < 0) continue;
    const KernelFactory* f =
        registry.find(node.domain, node.op_type, opsets[step], cuda::kCudaProvider);
    if (!f) {
      why[step] = "no CUDA kernel";
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
        if (kernels[c] && k < n_explicit && !cuda::input_on_host(cn.op_type, opsets[c], k))
          device_use = true;
      }
    }
    if (used && !device_use) {
      kernels[r].reset();
      why[r] = "its outputs are read only on the host";
    }
  }
  if (config.log_severity_level <= 0) {
    std::fprintf(stderr, "[ortlite] node placement (CUDAExecutionProvider device %d%s):\n",
                 p.device, p.cuda_plan_only ? ", plan only" : "");
    for (size_t step = 0; step < n; ++step) {
      const std::string label = g.nodes[order[step]].label();
      std::fprintf(stderr, "[ortlite]   %s: %s%s%s%s\n", label.c_str(),
                   kernels[step] ? "CUDA" : "CPU", why[step].empty() ? "" : " (", why[step].c_str(),
                   why[step].empty() ? "" : ")");
    }
  }
}

// Device copies of the load-time constants that CUDA nodes read on the device. Overridable
// initializers are not in `known`: a feed may replace them.
void upload_device_constants(GraphPlan& p,
                             const std::unordered_map<std::string, const Tensor*>& known) {
  if (p.cuda_plan_only) return;
  std::vector<char> device_use(p.value_names.size(), 0);
  for (const PlannedNode& pn : p.steps) {
    if (!pn.cuda) continue;
    for (size_t k = 0; k < pn.inputs.size(); ++k)
      if (pn.inputs[k] >= 0 && !pn.host_inputs[k]) device_use[pn.inputs[k]] = 1;
  }
  for (const auto& [name, t] : known) {
    const int slot = p.slot_of.at(name);
    if (device_use[slot])
      p.device_constants.emplace_back(slot, cuda::to_device(*t, p.device, nullptr));
  }
}

// Plans `g`: `input_names` are the slots given values before any node runs (the graph's
// inputs; for a subgraph also its outer-scope names). Nodes with subgraphs get their
// outer-scope references appended as implicit inputs.
void plan_graph(GraphPlan& p, Graph& g, const Model& m, const std::vector<std::string>& input_names,
                bool is_subgraph, const SessionConfig* placement = nullptr) {
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
  std::vector<std::unique_ptr<Kernel>> cuda_kernels;
  if (placement)
    place_on_cuda(p, g, m, order, in_slots, out_slots, lookup, *placement, cuda_kernels);
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
    if (step < cuda_kernels.size() && cuda_kernels[step]) {
      PlannedNode pn;
      pn.node = &node;
      pn.kernel = std::move(cuda_kernels[step]);
      pn.cuda = true;
      pn.inputs = in_slots[i];
      pn.outputs = out_slots[i];
      const size_t n_explicit = node.inputs.size() - node.implicit_inputs;
      for (size_t k = 0; k < pn.inputs.size(); ++k)
        pn.host_inputs.push_back(k >= n_explicit || cuda::input_on_host(node.op_type, opset, k));
      for (int slot : pn.outputs)
        if (slot >= 0) p.producer_step[slot] = static_cast<int>(step);
      for (int slot : pn.inputs)
        if (slot >= 0) last_use[slot] = static_cast<int>(step);
      p.max_inputs = std::max(p.max_inputs, pn.inputs.size());
      p.max_outputs = std::max(p.max_outputs, pn.outputs.size());
      p.has_cuda = true;
      p.steps.push_back(std::move(pn));
      continue;
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
    pn.shape_only = norm_domain(node.domain).empty() && op_in(node.op_type, {"Shape", "Size"});
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
  if (p.has_cuda) upload_device_constants(p, known);
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

std::shared_ptr<const Session> Session::create(Model model, const SessionConfig& config) {
  std::shared_ptr<Session> s(new Session());
  s->config_ = config;
  s->model_ = std::move(model);
  s->impl_ = std::make_unique<Impl>();
  if (config.enable_profiling)
    s->impl_->profiler = std::make_unique<Profiler>(config.profile_file_prefix);
  const auto created = Profiler::Clock::now();
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
  SessionConfig& cfg = s->config_;
  if (auto it = cfg.config_entries.find("ortlite.test.cuda_plan_only");
      it != cfg.config_entries.end() && it->second == "1") {
    cfg.cuda_plan_only = true;
    cfg.providers = {cuda::kCudaProvider, kCpuProvider};
  }
  if (wants_cuda(cfg) && !cfg.cuda_plan_only) cuda::check_device(cfg.cuda_device_id);
  // The optimizer's fusions make com.ortlite nodes that only the CPU runs: with CUDA
  // placement the graph is planned as written.
  if (!wants_cuda(cfg)) optimize_graph(m, config.graph_optimization_level);

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
  plan_graph(im.plan, g, m, input_names, false, &cfg);
  // The kernels have made what they prepare from the initializers (packed weights): the
  // model file's pages go back to the page cache, and those still read at run time (biases,
  // unpacked weights) are mapped again when a run touches them. ResNet-18's packed copies
  // are then not held twice (its peak RSS over 10 runs: 185 -> 145 MiB).
  if (m.backing_is_file && m.backing) drop_file_pages(m.backing->data(), m.backing->size());
  for (const auto* list : {&s->inputs_, &s->overridable_}) {
    for (const ValueInfo& vi : *list) {
      const Impl::Feedable f{&vi, im.plan.slot_of.at(vi.name), list == &s->inputs_};
      im.feedable.emplace(vi.name, f);
      im.by_position.push_back(f);
    }
  }
  for (const ValueInfo& vi : s->inputs_) im.required_slots.push_back(im.plan.slot_of.at(vi.name));
  for (const ValueInfo& vi : g.outputs) {
    s->outputs_.push_back(vi);
    im.output_names.insert(vi.name);
  }

  const int threads =
      config.intra_op_num_threads > 0 ? config.intra_op_num_threads : default_thread_count();
  s->pool_ = std::make_unique<ThreadPool>(threads);
  if (im.profiler)
    im.profiler->add({nullptr, "session_initialization", nullptr, created, Profiler::Clock::now()});
  return s;
}

namespace {

void check_value_feed(const std::string& name, const TypeInfo& declared, const Value& v) {
  using K = TypeInfo::Kind;
  // optional(optional(...(T))) takes None or what T takes (unwrapped without recursion).
  const TypeInfo* t = &declared;
  while (t->kind == K::kOptional) {
    if (v.is_none() || !t->elem) return;
    t = t->elem.get();
  }
  const TypeInfo& type = *t;
  switch (type.kind) {
    case K::kUnknown:
    case K::kOptional:
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
      check_tensor_feed(name, type, v.tensor().dtype(), v.tensor().shape().data(),
                        v.tensor().rank());
      return;
    default:
      ORTLITE_THROW(kNotImplemented, "input '", name, "' has type ", type.to_string(),
                    ", which is not supported yet");
  }
}

}  // namespace

void check_tensor_feed(const std::string& name, const TypeInfo& type, DataType dtype,
                       const int64_t* dims, size_t rank) {
  if (type.elem_type != DataType::kUndefined && type.elem_type != dtype) {
    ORTLITE_THROW(kInvalidArgument, "Unexpected input data type for input '", name,
                  "'. Actual: (tensor(", dtype_name(dtype), ")) , expected: (tensor(",
                  dtype_name(type.elem_type), "))");
  }
  if (!type.has_shape) return;
  if (type.dims.size() != rank) {
    ORTLITE_THROW(kInvalidArgument, "Invalid rank for input: ", name, " Got: ", rank,
                  " Expected: ", type.dims.size(),
                  " Please fix either the inputs/outputs or the model.");
  }
  bool mismatch = false;
  for (size_t d = 0; d < type.dims.size(); ++d)
    mismatch |= type.dims[d].has_value && type.dims[d].value != dims[d];
  if (mismatch) {
    // Built only on failure: a stream costs more than the whole check.
    std::ostringstream bad;
    for (size_t d = 0; d < type.dims.size(); ++d) {
      if (type.dims[d].has_value && type.dims[d].value != dims[d])
        bad << " index: " << d << " Got: " << dims[d] << " Expected: " << type.dims[d].value;
    }
    ORTLITE_THROW(kInvalidArgument, "Got invalid dimensions for input: ", name,
                  " for the following indices", bad.str(),
                  " Please fix either the inputs/outputs or the model.");
  }
}

void Session::check_feeds(const Feeds& feeds) const {
  for (size_t i = 0; i < feeds.size(); ++i)
    check_feed(feeds[i].first, find_feedable(feeds[i].first, nullptr, i), feeds[i].second);
}

void Session::check_feed(const std::string& name, const ValueInfo* declared, const Value& v) const {
  if (!declared) {
    std::vector<std::string> names;
    for (const ValueInfo& vi : inputs_) names.push_back(vi.name);
    ORTLITE_THROW(kInvalidArgument, "Invalid input name: ", name,
                  " (the model's inputs: ", join(names), ")");
  }
  check_value_feed(name, declared->type, v);
}

std::vector<std::string> Session::missing_inputs(const std::vector<std::string>& feed_names) const {
  const std::unordered_set<std::string_view> fed(feed_names.begin(), feed_names.end());
  std::vector<std::string> missing;
  for (const ValueInfo& vi : inputs_)
    if (!fed.count(vi.name)) missing.push_back(vi.name);
  return missing;
}

const ValueInfo* Session::find_feedable(const std::string& name, bool* required,
                                        size_t hint) const {
  const Impl::Feedable* f = impl_->find(name, hint);
  if (!f) return nullptr;
  if (required) *required = f->required;
  return f->info;
}

void Session::check_output_names(const std::vector<std::string>& output_names) const {
  for (const std::string& name : output_names) {
    if (!impl_->output_names.count(name)) {
      std::vector<std::string> names;
      for (const ValueInfo& vi : outputs_) names.push_back(vi.name);
      ORTLITE_THROW(kInvalidArgument, "Invalid output name: ", name,
                    " (the model's outputs: ", join(names), ")");
    }
  }
}

bool Session::uses_cuda() const {
  return impl_->plan.has_cuda;
}

std::vector<std::pair<std::string, std::string>> Session::node_placement() const {
  std::vector<std::pair<std::string, std::string>> r;
  for (const PlannedNode& pn : impl_->plan.steps)
    r.emplace_back(pn.node->label(), pn.cuda ? cuda::kCudaProvider : kCpuProvider);
  return r;
}

namespace {
// A run's hold on an arena (Session::Impl::spare_arena): taken at the start, emptied of the
// run's values and put back at the end, on every exit path.
class ArenaLease {
 public:
  ArenaLease(const GraphPlan& plan, std::atomic<RunArena*>& spare)
      : plan_(plan), spare_(spare), a_(spare.exchange(nullptr, std::memory_order_acq_rel)) {
    if (!a_) a_ = new RunArena;
  }
  ~ArenaLease() {
    std::vector<Value>& values = a_->values;
    for (size_t i = 0; i < values.size(); ++i)
      if (!a_->constants_set || a_->constant_fed || !plan_.is_constant[i]) values[i] = Value();
    if (a_->constant_fed) a_->constants_set = a_->constant_fed = false;
    for (Value& v : a_->outs) v = Value();
    delete spare_.exchange(a_, std::memory_order_acq_rel);
  }
  ArenaLease(const ArenaLease&) = delete;
  ArenaLease& operator=(const ArenaLease&) = delete;
  RunArena& operator*() const { return *a_; }

 private:
  const GraphPlan& plan_;
  std::atomic<RunArena*>& spare_;
  RunArena* a_;
};
}  // namespace

std::vector<Value> Session::run(const Feeds& feeds, const std::vector<std::string>& output_names,
                                const RunConfig* run_config, bool device_outputs) const {
  return run_feeds(const_cast<Feeds&>(feeds), false, output_names, run_config, device_outputs);
}

std::vector<Value> Session::run(Feeds&& feeds, const std::vector<std::string>& output_names,
                                const RunConfig* run_config, bool device_outputs) const {
  return run_feeds(feeds, true, output_names, run_config, device_outputs);
}

std::vector<Value> Session::run_feeds(Feeds& feeds, bool take_feeds,
                                      const std::vector<std::string>& output_names,
                                      const RunConfig* run_config, bool device_outputs) const {
  const GraphPlan& p = impl_->plan;
  ArenaLease lease(p, impl_->spare_arena);
  RunArena& arena = *lease;
  std::vector<Value>& values = arena.values;
  if (values.size() < p.value_names.size()) values.resize(p.value_names.size());
  std::vector<char>& have = arena.have;
  have.assign(p.value_names.size(), 0);
  if (!arena.constants_set) {
    for (const auto& [slot, t] : p.constants) values[slot] = t;
    arena.constants_set = true;
  }
  for (const auto& c : p.constants) have[c.first] = 1;
  for (size_t i = 0; i < feeds.size(); ++i) {
    auto& [name, v] = feeds[i];
    const Impl::Feedable* f = impl_->find(name, i);
    if (!f) ORTLITE_THROW(kInvalidArgument, "Invalid input name: ", name);
    const int slot = f->slot;
    if (p.is_constant[slot]) arena.constant_fed = true;
    if (take_feeds) {
      values[slot] = std::move(v);
    } else {
      values[slot] = v;
    }
    have[slot] = 1;
  }
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (!have[impl_->required_slots[i]])
      ORTLITE_THROW(kInvalidArgument, "required input '", inputs_[i].name, "' is missing");
  }

  // Requested outputs; only the steps they depend on run.
  std::vector<int> some;
  if (!output_names.empty()) {
    check_output_names(output_names);
    for (const std::string& n : output_names) some.push_back(p.slot_of.at(n));
  }
  const std::vector<int>& fetch = output_names.empty() ? p.output_slots : some;
  if (p.has_cuda) {
    if (p.cuda_plan_only)
      ORTLITE_THROW(kNotImplemented,
                    "this session was planned for CUDA without a device (test hook); it "
                    "cannot run");
    return p.execute_cuda(values, fetch, pool_.get(), run_config, device_outputs);
  }
  Profiler* prof = impl_->profiler.get();
  if (!prof || !prof->active()) return p.execute(values, fetch, pool_.get(), run_config, &arena);
  // Profiling: a model_run event, then one per node (execute() adds them); recorded only
  // for runs that finish.
  std::vector<Profiler::Event>& events = arena.events;
  events.clear();
  events.push_back({nullptr, "model_run", nullptr, Profiler::Clock::now(), {}});
  arena.profiling = true;
  struct Off {
    RunArena& a;
    ~Off() { a.profiling = false; }
  } off{arena};
  std::vector<Value> results = p.execute(values, fetch, pool_.get(), run_config, &arena);
  events.front().end = Profiler::Clock::now();
  prof->add(events);
  events.clear();
  return results;
}

std::string Session::end_profiling() const {
  return impl_->profiler ? impl_->profiler->end() : std::string();
}

int64_t Session::profiling_start_ns() const {
  return impl_->profiler ? impl_->profiler->start_ns() : 0;
}

}  // namespace ortlite
