// Load-time rewrites of the main graph (level >= 1, ORT_ENABLE_BASIC and above):
//
//  0. Dead-node elimination, before and after the rest: nodes none of whose outputs reaches
//     a graph output are removed. Then Casts to their input's own type go, and CastLike
//     with a known target type becomes Cast (optimizer_fold.cc), as onnxruntime expands it.
//  1. Constant folding (constant_folding.cc): a default-domain node of a deterministic op
//     whose inputs are all constants (initializers no feed can replace, Constant nodes,
//     outputs of folded nodes) runs once with its CPU kernel; its outputs become
//     initializers of the same names, within caps on the memory they take.
//  1a. Float16 nodes computed in float, float16 weights converted once (fp16_rewrite.cc).
//  1b. Transposes pushed down through elementwise nodes and cancelled (push_transposes):
//     NHWC models run without the per-call layout transposes around each Conv.
//  1c. Add / Sub / Mul / Div by a per-channel constant after a Conv folded into its W and B.
//  2. BatchNormalization folded into the Conv before it (constant float weights, the Conv
//     output read by nothing else): Y = (W * s) X + (B - mean) * s + beta with
//     s = scale / sqrt(var + eps). The Conv becomes a FusedConv whose attribute w_scale holds
//     s: the kernel scales W while it prepares it at load, so no second copy of W is made.
//  3. erf-GELU, 0.5 x (1 + erf(x / sqrt 2)) spelled as Div/Erf/Add/Mul/Mul, becomes one
//     com.ortlite Gelu node; the tanh form, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715
//     x^3))), one com.microsoft FastGelu.
//  3b. A decomposed layer norm over the last axis (ReduceMean, Sub, Pow or Mul, ReduceMean,
//     Add eps, Sqrt, Div, Mul gamma [, Add beta]) becomes one LayerNormalization.
//  4. Conv [+ Add] [+ activation, x * Sigmoid(x) as Silu, or (x * Clip(x + 3, 0, 6)) / 6 as
//     HardSwishChain, its four nodes' arithmetic in their order] becomes com.ortlite
//     FusedConv (conv.cc).
//  5. A 1x1 Conv / FusedConv (stride 1, no padding, no summed input) whose output only a
//     depthwise Conv / FusedConv (float weights, no summed input) reads becomes one
//     com.ortlite FusedExpandDepthwise (conv.cc), which makes and consumes the expanded
//     value in blocks of rows and channels that stay in cache.
//  6. MatMul [* scalar, or / scalar as * (1 / scalar)] [+ bias] [+ activation, as in 4]
//     becomes com.ortlite FusedMatMul, and Gemm + activation (as in 4) com.ortlite FusedGemm
//     (fused_ops.cc).
//  0b. (level >= 2, ORT_ENABLE_EXTENDED, as onnxruntime's QDQ fusions) QDQ groups run as the
//     integer operators they stand for: DequantizeLinear(x) and DequantizeLinear of a
//     constant W [and of a constant int32 bias] into Conv, its output read only by a
//     QuantizeLinear, become one QLinearConv; the same around MatMul, one QLinearMatMul.
//     The result is the integer operator's (requantized from the exact int32 sums), not the
//     float path's: it can differ from it by one quantization step, as onnxruntime's does.
//     Likewise DequantizeLinear(a), DequantizeLinear(b) -> Add / Mul -> QuantizeLinear become
//     com.microsoft QLinearAdd / QLinearMul, DequantizeLinear -> GlobalAveragePool ->
//     QuantizeLinear QLinearGlobalAveragePool, and the Q/DQ pair around Flatten, Reshape,
//     Transpose, Squeeze or Unsqueeze with equal parameters is dropped (fuse_qdq_ops).
//  7. Integer products scaled back to float, as dynamic quantization writes them:
//     ConvInteger [+ Add of an int32 bias per output channel] + Cast to float + Mul by one
//     float [+ activation, or x * Sigmoid(x)] becomes com.ortlite ConvIntegerToFloat
//     (qconv.cc); MatMulInteger + Cast to
//     float + Mul by one float [+ Add of a constant bias per column] becomes com.microsoft
//     MatMulIntegerToFloat with b_scale 1 (qmatmul.cc). The float operations and their
//     order are those of the nodes replaced.
//  8. com.microsoft MatMulNBits without a bias + Add of a constant [N] takes it as its bias
//     input (onnxruntime's MatMulNBitsFusion); the kernel adds it after each sum, as the Add
//     did.
//
// A fusion only removes values that have exactly one reader, are no graph output and are
// not read from inside a subgraph; the surviving node keeps the first node's name and the
// last node's output name, so graph outputs keep their names, values and types. Initializers
// that are also graph inputs (a feed may replace them) are never treated as constants.
// When a com.ortlite node is written, the model imports the com.ortlite domain.
//
// The rewrites are methods of one pass object (optimizer_internal.h); this file holds the
// pass order, the graph index and the clean-up, optimizer_fold.cc the folds (1b, 1c, 2 and
// the no-op Casts), optimizer_fuse.cc the fusions (3 to 6) and optimizer_quant.cc 0b, 7 and 8.
#include "graph/optimizer.h"

#include "graph/optimizer_internal.h"

namespace ortlite {
namespace opt {

void Optimizer::run() {
  eliminate_dead_nodes();  // nothing dead is folded
  eliminate_noop_casts();
  expand_cast_likes();
  if (level_ >= 2) {
    fuse_qdq();  // before folding turns the weights' DequantizeLinear to float
    fuse_qdq_ops();
    eliminate_dead_nodes();
  }
  fold_constants(m_);
  compute_fp16_in_fp32(m_);
  push_transposes();
  fold_conv_affine();
  fold_batch_norms();
  fuse_gelu();
  fuse_fast_gelu();
  fuse_layer_norms();
  fuse_convs();
  fuse_expand_depthwise();
  fuse_matmuls();
  fuse_gemms();
  fuse_integer_to_float();
  fuse_matmul_nbits_bias();
  finish();
}

// ---- graph index --------------------------------------------------------------------

void Optimizer::index() {
  producer_.clear();
  readers_.clear();
  constants_.clear();
  pinned_.clear();
  dead_.resize(g_.nodes.size(), 0);
  for (const ValueInfo& vi : g_.outputs) pinned_.insert(vi.name);
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if (dead_[i]) continue;
    const Node& n = g_.nodes[i];
    for (const std::string& o : n.outputs)
      if (!o.empty()) producer_[o] = static_cast<int>(i);
    for (const std::string& in : n.inputs)
      if (!in.empty()) readers_[in].push_back(static_cast<int>(i));
    node_subgraph_reads(n, pinned_);
    if (is_op(n, "Constant") && n.outputs.size() == 1) {
      const Attribute* v = n.find_attr("value");
      if (v && v->type == AttrType::kTensor) constants_[n.outputs[0]] = &v->t;
    }
  }
  std::unordered_set<std::string> inputs;
  for (const ValueInfo& vi : g_.inputs) inputs.insert(vi.name);
  for (const auto& init : g_.initializers)
    if (!inputs.count(init.first)) constants_[init.first] = &init.second;
}

const Tensor* Optimizer::constant(const std::string& name) const {
  auto it = constants_.find(name);
  return it == constants_.end() ? nullptr : it->second;
}

// The node that alone reads `value` (once), when `value` may disappear in a rewrite.
int Optimizer::sole_reader(const std::string& value) const {
  if (value.empty() || pinned_.count(value)) return -1;
  auto it = readers_.find(value);
  if (it == readers_.end() || it->second.size() != 1) return -1;
  const int r = it->second[0];
  return dead_[r] ? -1 : r;
}

bool Optimizer::rank_at_least_2(const std::string& value) const {
  if (const Tensor* t = constant(value)) return t->rank() >= 2;
  for (const auto* infos : {&g_.inputs, &g_.value_info})
    for (const ValueInfo& vi : *infos)
      if (vi.name == value && vi.type.kind == TypeInfo::Kind::kTensor && vi.type.has_shape)
        return vi.type.dims.size() >= 2;
  auto it = producer_.find(value);
  if (it == producer_.end() || dead_[it->second]) return false;
  const Node& n = g_.nodes[it->second];
  if (n.outputs.empty() || n.outputs[0] != value) return false;
  // Outputs of the input's rank, which is 3 or more (a batch, channels, a spatial axis) or,
  // for BatchNormalization, 2 or more.
  if (is_op(n, "Conv") || is_op(n, "ConvTranspose") || is_op(n, "BatchNormalization") ||
      (n.op_type == "FusedConv" && n.domain == kDomain))
    return true;
  if (is_op(n, "Transpose")) {
    const Attribute* perm = n.find_attr("perm");
    return perm && perm->ints.size() >= 2;
  }
  if (is_op(n, "Reshape") && n.inputs.size() >= 2) {
    const Tensor* shape = constant(n.inputs[1]);
    return shape && shape->rank() == 1 && shape->dim(0) >= 2;
  }
  return false;
}

// A float scalar constant (one element, rank <= max_rank).
bool Optimizer::scalar(const std::string& name, float& v, size_t max_rank) const {
  const Tensor* t = constant(name);
  if (!t || t->dtype() != DataType::kFloat || t->numel() != 1 || t->rank() > max_rank) return false;
  v = *t->data<float>();
  return true;
}

std::string Optimizer::unique_name(const std::string& base) {
  if (names_.empty()) {
    for (const ValueInfo& vi : g_.inputs) names_.insert(vi.name);
    for (const auto& init : g_.initializers) names_.insert(init.first);
    for (const Node& n : g_.nodes)
      for (const std::string& o : n.outputs) names_.insert(o);
  }
  std::string name = base;
  for (int k = 1; names_.count(name); ++k) name = base + "_" + std::to_string(k);
  names_.insert(name);
  return name;
}

// ---- bookkeeping ----------------------------------------------------------------------

void Optimizer::import_com_microsoft() {
  for (const OpsetImport& o : m_.opset_imports)
    if (o.domain == "com.microsoft") return;
  m_.opset_imports.push_back(OpsetImport{"com.microsoft", 1});
}

void Optimizer::compact() {
  std::vector<Node> kept;
  kept.reserve(g_.nodes.size());
  for (size_t i = 0; i < g_.nodes.size(); ++i)
    if (i >= dead_.size() || !dead_[i]) kept.push_back(std::move(g_.nodes[i]));
  g_.nodes = std::move(kept);
  dead_.assign(g_.nodes.size(), 0);
}

// Removes the nodes none of whose outputs reaches a graph output, directly, through other
// nodes or through what a subgraph reads (ONNX nodes have no side effects).
void Optimizer::eliminate_dead_nodes() {
  if (!well_formed()) return;  // the planner reports what is wrong, dead node or not
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < g_.nodes.size(); ++i)
    for (const std::string& o : g_.nodes[i].outputs)
      if (!o.empty()) producer.emplace(o, i);
  std::vector<char> live(g_.nodes.size(), 0);
  std::vector<std::string> needed;
  for (const ValueInfo& vi : g_.outputs) needed.push_back(vi.name);
  while (!needed.empty()) {
    const std::string v = std::move(needed.back());
    needed.pop_back();
    auto it = producer.find(v);
    if (it == producer.end() || live[it->second]) continue;
    live[it->second] = 1;
    const Node& n = g_.nodes[it->second];
    std::unordered_set<std::string> reads(n.inputs.begin(), n.inputs.end());
    node_subgraph_reads(n, reads);
    for (const std::string& r : reads)
      if (!r.empty()) needed.push_back(r);
  }
  dead_.assign(g_.nodes.size(), 0);
  for (size_t i = 0; i < g_.nodes.size(); ++i) dead_[i] = !live[i];
  compact();
}

// Whether the planner's checks hold for every node: each value has one producer (a node,
// a graph input or an initializer), each input is produced, and there is no cycle.
bool Optimizer::well_formed() const {
  std::unordered_map<std::string, size_t> producer;
  std::unordered_set<std::string> given;
  for (const ValueInfo& vi : g_.inputs) given.insert(vi.name);
  for (const auto& init : g_.initializers) given.insert(init.first);
  for (size_t i = 0; i < g_.nodes.size(); ++i)
    for (const std::string& o : g_.nodes[i].outputs)
      if (!o.empty() && (given.count(o) || !producer.emplace(o, i).second)) return false;
  // Kahn's algorithm over the explicit inputs.
  std::vector<size_t> pending(g_.nodes.size(), 0);
  std::unordered_map<size_t, std::vector<size_t>> next;
  for (size_t i = 0; i < g_.nodes.size(); ++i)
    for (const std::string& in : g_.nodes[i].inputs) {
      if (in.empty() || given.count(in)) continue;
      auto it = producer.find(in);
      if (it == producer.end()) return false;
      ++pending[i];
      next[it->second].push_back(i);
    }
  std::vector<size_t> ready;
  for (size_t i = 0; i < g_.nodes.size(); ++i)
    if (!pending[i]) ready.push_back(i);
  size_t done = 0;
  while (!ready.empty()) {
    const size_t i = ready.back();
    ready.pop_back();
    ++done;
    auto it = next.find(i);
    if (it == next.end()) continue;
    for (size_t r : it->second)
      if (--pending[r] == 0) ready.push_back(r);
  }
  return done == g_.nodes.size();
}

void Optimizer::finish() {
  eliminate_dead_nodes();
  // Drop initializers nothing reads any more (the folded weights replaced them).
  std::unordered_set<std::string> used;
  for (const ValueInfo& vi : g_.inputs) used.insert(vi.name);
  for (const ValueInfo& vi : g_.outputs) used.insert(vi.name);
  for (const Node& n : g_.nodes) {
    for (const std::string& in : n.inputs) used.insert(in);
    node_subgraph_reads(n, used);
  }
  std::vector<std::pair<std::string, Tensor>> inits;
  for (auto& init : g_.initializers)
    if (used.count(init.first)) inits.push_back(std::move(init));
  g_.initializers = std::move(inits);
  if (used_domain_) {
    bool have = false;
    for (const OpsetImport& o : m_.opset_imports) have = have || o.domain == kDomain;
    if (!have) m_.opset_imports.push_back(OpsetImport{kDomain, 1});
  }
}

}  // namespace opt

void optimize_graph(Model& model, int level) {
  if (level < 1) return;
  opt::Optimizer(model, level).run();
}

}  // namespace ortlite
