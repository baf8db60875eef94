#include "graph/type_inference.h"

#include <unordered_set>

namespace ortlite {

namespace {

const std::string& norm_domain(const std::string& d) {
  static const std::string empty;
  return d == "ai.onnx" ? empty : d;
}

// Whether the per-op rules below cover `node`: the default domain, and the one operator of
// another domain that they know (ai.onnx.preview FlexAttention, whose Y has Q's type).
bool typed_domain(const Node& node) {
  const std::string& d = norm_domain(node.domain);
  return d.empty() || (d == "ai.onnx.preview" && node.op_type == "FlexAttention");
}

}  // namespace

bool op_in(const std::string& op, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (op == n) return true;
  return false;
}

// The element type of output `o` of a node typed_domain covers by the per-op rules, from its
// inputs' types (kUndefined where the rules do not tell).
template <typename InType>
DataType output_type(const Node& node, size_t o, const InType& in_type) {
  const std::string& op = node.op_type;
  DataType t = DataType::kUndefined;
  if (op == "Constant") {
    // Only with exactly one value attribute (the kernel refuses the others, naming them).
    int values = 0;
    for (const Attribute& a : node.attributes) values += a.name.rfind("value", 0) == 0;
    const Attribute* a = node.find_attr("value");
    if (a && a->type == AttrType::kTensor) t = a->t.dtype();
    if (node.find_attr("value_float") || node.find_attr("value_floats")) t = DataType::kFloat;
    if (node.find_attr("value_int") || node.find_attr("value_ints")) t = DataType::kInt64;
    if (values != 1) t = DataType::kUndefined;
  } else if (op == "Cast" && o == 0) {
    const Attribute* a = node.find_attr("to");
    if (a && a->type == AttrType::kInt) t = static_cast<DataType>(a->i);
  } else if (op == "CastLike" && o == 0) {
    t = in_type(1);
  } else if (op_in(op, {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or",
                        "Xor", "Not", "IsNaN", "IsInf"}) &&
             o == 0) {
    t = DataType::kBool;
  } else if ((op_in(op, {"Shape", "Size", "NonZero", "ArgMax", "ArgMin"}) && o == 0) ||
             (op_in(op, {"MaxPool", "TopK"}) && o == 1)) {
    t = DataType::kInt64;
  } else if (op == "Dropout" && o == 1) {
    t = DataType::kBool;
  } else if (op == "BatchNormalization" && o >= 1) {
    // The statistics outputs (running_mean / running_var from opset 14, mean / var /
    // saved_mean / saved_var before) have input_mean's type.
    t = in_type(3);
  } else if (op == "Where" && o == 0) {
    t = in_type(1);
  } else if (op == "CausalConvWithState" && o == 1) {
    t = in_type(0);
  } else if (op == "LinearAttention" && o == 1) {
    // present_state: the type of past_state, or of query when past_state is omitted.
    t = node.inputs.size() > 3 && !node.inputs[3].empty() ? in_type(3) : in_type(0);
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
                                                                   "Round",
                                                                   "CausalConvWithState",
                                                                   "LinearAttention",
                                                                   "FlexAttention"};
    if (same_as_input0.count(op)) t = in_type(0);
  }
  return t;
}

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
    if (!typed_domain(node)) continue;
    auto in_type = [&](size_t k) {
      if (k >= node.inputs.size() || node.inputs[k].empty()) return DataType::kUndefined;
      auto it = types.find(node.inputs[k]);
      return it == types.end() ? DataType::kUndefined : it->second;
    };
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      if (node.outputs[o].empty() || types.count(node.outputs[o])) continue;
      const DataType t = output_type(node, o, in_type);
      if (t != DataType::kUndefined) types[node.outputs[o]] = t;
    }
  }
  return types;
}

void check_declared_types(const Graph& g, const std::vector<int>& order) {
  const std::unordered_map<std::string, DataType> types = infer_elem_types(g, order);
  std::unordered_map<std::string, DataType> declared;
  for (const auto* list : {&g.value_info, &g.outputs})
    for (const ValueInfo& vi : *list)
      if (vi.type.kind == TypeInfo::Kind::kTensor && vi.type.elem_type != DataType::kUndefined)
        declared.emplace(vi.name, vi.type.elem_type);
  if (declared.empty()) return;
  for (int i : order) {
    const Node& node = g.nodes[i];
    // Dropout's mask is bool from opset 10 and the input's type before: not checked.
    if (!typed_domain(node) || node.op_type == "Dropout") continue;
    auto in_type = [&](size_t k) {
      if (k >= node.inputs.size() || node.inputs[k].empty()) return DataType::kUndefined;
      auto it = types.find(node.inputs[k]);
      return it == types.end() ? DataType::kUndefined : it->second;
    };
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      auto d = declared.find(node.outputs[o]);
      if (node.outputs[o].empty() || d == declared.end()) continue;
      const DataType t = output_type(node, o, in_type);
      if (t != DataType::kUndefined && t != d->second)
        ORTLITE_THROW(kInvalidGraph, "type error: output '", node.outputs[o], "' of ", node.label(),
                      " is ", dtype_name(t), ", but the model declares it ", dtype_name(d->second));
    }
  }
}

}  // namespace ortlite
