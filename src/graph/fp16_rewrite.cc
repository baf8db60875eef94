// Float16 models as onnxruntime's float16 converter writes them (every float tensor
// float16, Casts at the graph's edges with keep_io_types) compute each node in float on
// x86: float16 arithmetic has no fast path there, and a float16 kernel converts its
// operands to float and its result back on every call. Converting once at load and dropping
// the conversions between consecutive nodes makes the graph the float one, which the later
// fusions (FusedMatMul, FusedConv, BatchNormalization folding) then handle as usual.
//
// Which roundings go: those of intermediate values read only by rewritten nodes, as in
// onnxruntime (its inserted Casts and their removal). Which stay: every float16 value the
// graph exposes (graph outputs, values read by subgraphs or by nodes that are not
// rewritten, such as comparisons, ArgMax, Floor / Round, whose results a last-bit
// difference would change) is the float16 rounding of the float result, as a float16
// kernel writes it.
#include "graph/fp16_rewrite.h"

#include <new>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "graph/graph_walk.h"
#include "graph/type_inference.h"
#include "ortlite/dtype.h"

namespace ortlite {

namespace {

// Ops whose float kernel computes what their float16 kernel does before it rounds the
// result to float16. Not here: ops whose result a last-bit change of an operand can change
// by more than float16 rounding (Floor, Ceil, Round, Sign, comparisons, ArgMax, TopK), and
// ops whose float16 semantics differ from float's in other ways (Cast, CastLike).
bool computes_in_float(const std::string& op) {
  static const std::unordered_set<std::string> kOps = {
      "Add",
      "Sub",
      "Mul",
      "Div",
      "Pow",
      "Max",
      "Min",
      "Sum",
      "Mean",
      "PRelu",
      "Relu",
      "LeakyRelu",
      "Sigmoid",
      "Tanh",
      "Gelu",
      "Elu",
      "Selu",
      "Celu",
      "HardSigmoid",
      "HardSwish",
      "Softplus",
      "Softsign",
      "Mish",
      "Exp",
      "Log",
      "Sqrt",
      "Abs",
      "Neg",
      "Reciprocal",
      "Erf",
      "Sin",
      "Cos",
      "Clip",
      "Where",
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
  };
  return kOps.count(op) != 0;
}

// Unary ops whose float16 kernel converts its input to float and its result back in blocks
// (F16C) within one pass, or works on the float16 bits: alone, such a node runs faster as
// written than as Cast -> float op -> Cast (three passes over the tensor).
bool converts_in_blocks(const std::string& op) {
  static const std::unordered_set<std::string> kOps = {
      "Relu", "LeakyRelu", "HardSigmoid", "HardSwish", "Sigmoid", "Tanh",
      "Elu",  "Softplus",  "Exp",         "Erf",       "Sin",     "Cos",
      "Abs",  "Neg",       "Reciprocal",  "Sqrt",      "Log"};
  return kOps.count(op) != 0;
}

// Ops that only move or select elements: the same in any float type. They run in float when
// an operand already has a float version (no new Cast before them).
bool moves_elements(const std::string& op) {
  static const std::unordered_set<std::string> kOps = {
      "Reshape", "Flatten",      "Squeeze",      "Unsqueeze", "Transpose",     "Identity",
      "Concat",  "Slice",        "Gather",       "Split",     "Expand",        "Tile",
      "Pad",     "DepthToSpace", "SpaceToDepth", "Dropout",   "GatherElements"};
  return kOps.count(op) != 0;
}

// The float copy of a float16 constant, in memory of its own marked constant like the
// model's initializers.
Tensor float_copy(const Tensor& h) {
  const size_t bytes = static_cast<size_t>(h.numel()) * sizeof(float);
  void* p = ::operator new (bytes == 0 ? 1 : bytes, std::align_val_t{64});
  Buffer* b = Buffer::wrap(p, bytes, BufferKind::kConstant,
                           [p] { ::operator delete (p, std::align_val_t{64}); });
  Tensor t(DataType::kFloat, h.shape(), BufferPtr::adopt(b));
  const uint16_t* s = static_cast<const uint16_t*>(h.raw_data());
  float* d = t.data<float>();
  for (int64_t i = 0; i < h.numel(); ++i) d[i] = Float16::to_float(s[i]);
  return t;
}

Node cast_node(const std::string& name, const std::string& in, const std::string& out,
               DataType to) {
  Node c;
  c.name = name;
  c.op_type = "Cast";
  c.inputs = {in};
  c.outputs = {out};
  Attribute a;
  a.name = "to";
  a.type = AttrType::kInt;
  a.i = static_cast<int64_t>(to);
  c.attributes.push_back(a);
  return c;
}

class Fp16Rewrite {
 public:
  explicit Fp16Rewrite(Graph& g) : g_(g) {}

  void run() {
    bool any = false;
    for (const auto& init : g_.initializers) any = any || init.second.dtype() == DataType::kFloat16;
    for (const ValueInfo& vi : g_.inputs)
      any = any ||
            (vi.type.kind == TypeInfo::Kind::kTensor && vi.type.elem_type == DataType::kFloat16);
    if (!any) {
      for (const Node& n : g_.nodes) {
        const Attribute* to = n.op_type == "Cast" ? n.find_attr("to") : nullptr;
        any = any || (to && to->type == AttrType::kInt &&
                      to->i == static_cast<int64_t>(DataType::kFloat16));
      }
    }
    if (!any) return;
    std::vector<int> order;
    if (!topological_order(g_, order)) return;
    types_ = infer_elem_types(g_, order);
    for (const ValueInfo& vi : g_.outputs) pinned_.insert(vi.name);
    std::unordered_set<std::string> inputs;
    for (const ValueInfo& vi : g_.inputs) inputs.insert(vi.name), names_.insert(vi.name);
    for (const auto& init : g_.initializers) {
      names_.insert(init.first);
      if (!inputs.count(init.first)) constants_[init.first] = &init.second;
    }
    for (const Node& n : g_.nodes) {
      names_.insert(n.name);
      for (const std::string& o : n.outputs) names_.insert(o);
      node_subgraph_reads(n, pinned_);
    }

    names_.insert(pinned_.begin(), pinned_.end());
    const std::vector<char> lone = lone_nodes(order);
    std::vector<Node> nodes;
    nodes.reserve(g_.nodes.size() * 2);
    bool changed = false;
    for (int i : order) {
      Node& n = g_.nodes[static_cast<size_t>(i)];
      if (is_half_cast_of_float(n)) float_of_[n.outputs[0]] = n.inputs[0];
      if (!lone[static_cast<size_t>(i)] && rewritable(n)) {
        rewrite(n, nodes);
        changed = true;
      } else {
        nodes.push_back(std::move(n));
      }
    }
    // In dependency order now, which the planner would choose anyway.
    if (!changed) {
      g_.nodes = std::move(nodes);
      return;
    }
    g_.nodes = remove_unread_casts(std::move(nodes));
    for (auto& init : new_inits_) g_.initializers.push_back(std::move(init));
  }

 private:
  DataType type_of(const std::string& v) const {
    auto it = types_.find(v);
    return it == types_.end() ? DataType::kUndefined : it->second;
  }

  bool is_half_cast_of_float(const Node& n) const {
    if (n.op_type != "Cast" || !default_domain(n.domain) || n.inputs.size() != 1 ||
        n.outputs.size() != 1 || n.outputs[0].empty() || type_of(n.inputs[0]) != DataType::kFloat)
      return false;
    const Attribute* to = n.find_attr("to");
    return to && to->type == AttrType::kInt && to->i == static_cast<int64_t>(DataType::kFloat16);
  }

  // Every operand and result of a known type, at least one of them float16, none of
  // another float type (double, bfloat16: left as written).
  bool rewritable(const Node& n) const {
    if (!default_domain(n.domain) || n.opset_imports || has_subgraph(n)) return false;
    const bool compute = computes_in_float(n.op_type);
    if (!compute && !moves_elements(n.op_type)) return false;
    bool half = false, has_float_version = false;
    auto check = [&](const std::string& v, bool is_input) {
      if (v.empty()) return true;
      const DataType t = type_of(v);
      if (t == DataType::kUndefined || t == DataType::kDouble || t == DataType::kBFloat16)
        return false;
      if (t == DataType::kFloat16) {
        half = true;
        if (is_input && !constants_.count(v) && !float_of_.count(v)) return compute;
        if (is_input && float_of_.count(v)) has_float_version = true;
      }
      return true;
    };
    for (const std::string& in : n.inputs)
      if (!check(in, true)) return false;
    for (const std::string& o : n.outputs)
      if (!check(o, false)) return false;
    return half && (compute || has_float_version);
  }

  // The nodes the rewrite would convert alone, indexed like g_.nodes: ops of
  // converts_in_blocks whose float16 inputs have no float version (graph inputs, results of
  // nodes left in float16) and whose float16 results no other converted node reads. Each
  // would gain a Cast before and after for nothing; they keep their float16 kernel. Decided
  // on a first pass over the same choices rewrite() makes; chains are converted as before.
  std::vector<char> lone_nodes(const std::vector<int>& order) {
    const size_t count = g_.nodes.size();
    std::vector<char> converted(count, 0), lone(count, 0);
    std::vector<char> has_float_input(count, 0);
    for (int i : order) {
      const Node& n = g_.nodes[static_cast<size_t>(i)];
      if (is_half_cast_of_float(n)) float_of_[n.outputs[0]] = n.inputs[0];
      if (!rewritable(n)) continue;
      converted[static_cast<size_t>(i)] = 1;
      for (const std::string& in : n.inputs)
        if (!in.empty() && type_of(in) == DataType::kFloat16 && float_of_.count(in))
          has_float_input[static_cast<size_t>(i)] = 1;
      for (const std::string& o : n.outputs)
        if (!o.empty() && type_of(o) == DataType::kFloat16) float_of_[o] = o;
    }
    float_of_.clear();
    std::unordered_set<std::string> read_by_converted;
    for (size_t i = 0; i < count; ++i)
      if (converted[i])
        for (const std::string& in : g_.nodes[i].inputs) read_by_converted.insert(in);
    for (size_t i = 0; i < count; ++i) {
      const Node& n = g_.nodes[i];
      if (!converted[i] || has_float_input[i] || !converts_in_blocks(n.op_type)) continue;
      bool alone = true;
      for (const std::string& o : n.outputs) alone = alone && !read_by_converted.count(o);
      lone[i] = alone ? 1 : 0;
    }
    return lone;
  }

  std::string unique(const std::string& base) {
    std::string name = base;
    for (int k = 1; names_.count(name); ++k) name = base + "_" + std::to_string(k);
    names_.insert(name);
    return name;
  }

  // The float version of float16 value `v`: the float value a rewritten node or a float16
  // Cast of a float value made, a float copy of a constant, or a new Cast.
  const std::string& float_version(const std::string& v, std::vector<Node>& nodes) {
    auto it = float_of_.find(v);
    if (it != float_of_.end()) return it->second;
    auto c = constants_.find(v);
    const std::string name = unique(v + "_fp32");
    if (c != constants_.end()) {
      new_inits_.emplace_back(name, float_copy(*c->second));
    } else {
      nodes.push_back(cast_node(unique(v + "_to_fp32"), v, name, DataType::kFloat));
    }
    return float_of_[v] = name;
  }

  void rewrite(Node& n, std::vector<Node>& nodes) {
    for (std::string& in : n.inputs)
      if (!in.empty() && type_of(in) == DataType::kFloat16) in = float_version(in, nodes);
    std::vector<Node> after;
    for (std::string& o : n.outputs) {
      if (o.empty() || type_of(o) != DataType::kFloat16) continue;
      const std::string f = unique(o + "_fp32");
      after.push_back(cast_node(unique(o + "_to_fp16"), f, o, DataType::kFloat16));
      float_of_[o] = f;
      inserted_.insert(o);
      o = f;
    }
    nodes.push_back(std::move(n));
    for (Node& c : after) nodes.push_back(std::move(c));
  }

  // Drops the Casts back to float16 no one reads (every reader now reads the float value),
  // and float16 Casts of float values whose readers all moved to the float value.
  std::vector<Node> remove_unread_casts(std::vector<Node> nodes) const {
    std::unordered_set<std::string> read(pinned_);
    for (const Node& n : nodes)
      for (const std::string& in : n.inputs) read.insert(in);
    std::vector<Node> kept;
    kept.reserve(nodes.size());
    for (Node& n : nodes) {
      const bool cast = n.op_type == "Cast" && default_domain(n.domain) && n.outputs.size() == 1;
      if (cast && !read.count(n.outputs[0]) &&
          (inserted_.count(n.outputs[0]) || is_half_cast_of_float(n)))
        continue;
      kept.push_back(std::move(n));
    }
    return kept;
  }

  Graph& g_;
  std::unordered_map<std::string, DataType> types_;
  std::unordered_map<std::string, const Tensor*> constants_;  // initializers no feed replaces
  std::unordered_map<std::string, std::string> float_of_;     // float16 value -> float one
  std::unordered_set<std::string> pinned_;    // graph outputs and values subgraphs read
  std::unordered_set<std::string> names_;     // every value and node name
  std::unordered_set<std::string> inserted_;  // outputs of the Casts back to float16
  std::vector<std::pair<std::string, Tensor>> new_inits_;
};

}  // namespace

void compute_fp16_in_fp32(Model& model) {
  // Cast's `to` is an int from opset 6 (a type name before): the Casts written here need it.
  for (const OpsetImport& o : model.opset_imports)
    if (default_domain(o.domain) && o.version < 6) return;
  Fp16Rewrite(model.graph).run();
}

}  // namespace ortlite
