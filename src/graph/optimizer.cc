// Load-time rewrites of the main graph (level >= 1, ORT_ENABLE_BASIC and above):
//
//  0. Dead-node elimination, before and after the rest: nodes none of whose outputs reaches
//     a graph output are removed.
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
//     com.ortlite Gelu node.
//  4. Conv [+ Add] [+ activation, or x * Sigmoid(x) as Silu] becomes com.ortlite FusedConv
//     (conv.cc).
//  5. A 1x1 Conv / FusedConv (stride 1, no padding, no summed input) whose output only a
//     depthwise Conv / FusedConv (float weights, no summed input) reads becomes one
//     com.ortlite FusedExpandDepthwise (conv.cc), which makes and consumes the expanded
//     value in blocks of rows and channels that stay in cache.
//  6. MatMul [* scalar] [+ bias] [+ activation] becomes com.ortlite FusedMatMul, and
//     Gemm + activation com.ortlite FusedGemm (fused_ops.cc).
//  0b. (level >= 2, ORT_ENABLE_EXTENDED, as onnxruntime's QDQ fusions) QDQ groups run as the
//     integer operators they stand for: DequantizeLinear(x) and DequantizeLinear of a
//     constant W [and of a constant int32 bias] into Conv, its output read only by a
//     QuantizeLinear, become one QLinearConv; the same around MatMul, one QLinearMatMul.
//     The result is the integer operator's (requantized from the exact int32 sums), not the
//     float path's: it can differ from it by one quantization step, as onnxruntime's does.
//  7. Integer products scaled back to float, as dynamic quantization writes them:
//     ConvInteger [+ Add of an int32 bias per output channel] + Cast to float + Mul by one
//     float [+ activation, or x * Sigmoid(x)] becomes com.ortlite ConvIntegerToFloat
//     (qconv.cc); MatMulInteger + Cast to
//     float + Mul by one float [+ Add of a constant bias per column] becomes com.microsoft
//     MatMulIntegerToFloat with b_scale 1 (qmatmul.cc). The float operations and their
//     order are those of the nodes replaced.
//
// A fusion only removes values that have exactly one reader, are no graph output and are
// not read from inside a subgraph; the surviving node keeps the first node's name and the
// last node's output name, so graph outputs keep their names, values and types. Initializers
// that are also graph inputs (a feed may replace them) are never treated as constants.
// When a com.ortlite node is written, the model imports the com.ortlite domain.
#include "graph/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "graph/constant_folding.h"
#include "graph/fp16_rewrite.h"
#include "graph/graph_walk.h"
#include "graph/planner.h"
#include "graph/type_inference.h"
#include "ortlite/kernel.h"
#include "ortlite/status.h"

namespace ortlite {

namespace {

constexpr const char* kDomain = "com.ortlite";

bool is_op(const Node& n, const char* op) {
  return n.op_type == op && default_domain(n.domain);
}

// A tensor in memory of its own, marked constant like the model's initializers (so a
// binding never hands it out without a copy).
Tensor new_constant(DataType dtype, const Shape& shape) {
  const size_t bytes = static_cast<size_t>(shape_size(shape)) * dtype_size(dtype);
  void* p = ::operator new (bytes == 0 ? 1 : bytes, std::align_val_t{64});
  Buffer* b = Buffer::wrap(p, bytes, BufferKind::kConstant,
                           [p] { ::operator delete (p, std::align_val_t{64}); });
  return Tensor(dtype, shape, BufferPtr::adopt(b));
}

Attribute make_int_attr(const char* name, int64_t v) {
  Attribute a;
  a.name = name;
  a.type = AttrType::kInt;
  a.i = v;
  return a;
}
Attribute float_attr(const char* name, float v) {
  Attribute a;
  a.name = name;
  a.type = AttrType::kFloat;
  a.f = v;
  return a;
}
Attribute string_attr(const char* name, const std::string& v) {
  Attribute a;
  a.name = name;
  a.type = AttrType::kString;
  a.s = v;
  return a;
}
Attribute floats_attr(const char* name, const std::vector<float>& v) {
  Attribute a;
  a.name = name;
  a.type = AttrType::kFloats;
  a.floats = v;
  return a;
}

struct Activation {
  std::string name;  // "" when the node is not a fusable activation
  std::vector<float> params;
};

class Optimizer {
 public:
  Optimizer(Model& m, int level) : m_(m), g_(m.graph), level_(level) {}

  void run() {
    eliminate_dead_nodes();  // nothing dead is folded
    eliminate_noop_casts();
    if (level_ >= 2) {
      fuse_qdq();  // before folding turns the weights' DequantizeLinear to float
      eliminate_dead_nodes();
    }
    fold_constants(m_);
    compute_fp16_in_fp32(m_);
    push_transposes();
    fold_conv_affine();
    fold_batch_norms();
    fuse_gelu();
    fuse_layer_norms();
    fuse_convs();
    fuse_expand_depthwise();
    fuse_matmuls();
    fuse_gemms();
    fuse_integer_to_float();
    finish();
  }

 private:
  // ---- graph index --------------------------------------------------------------------

  void index() {
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

  const Tensor* constant(const std::string& name) const {
    auto it = constants_.find(name);
    return it == constants_.end() ? nullptr : it->second;
  }

  // The node that alone reads `value` (once), when `value` may disappear in a rewrite.
  int sole_reader(const std::string& value) const {
    if (value.empty() || pinned_.count(value)) return -1;
    auto it = readers_.find(value);
    if (it == readers_.end() || it->second.size() != 1) return -1;
    const int r = it->second[0];
    return dead_[r] ? -1 : r;
  }

  // A float scalar constant (one element, rank <= max_rank).
  bool scalar(const std::string& name, float& v, size_t max_rank = 0) const {
    const Tensor* t = constant(name);
    if (!t || t->dtype() != DataType::kFloat || t->numel() != 1 || t->rank() > max_rank)
      return false;
    v = *t->data<float>();
    return true;
  }

  std::string unique_name(const std::string& base) {
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

  // ---- Per-channel affine ops into Conv --------------------------------------------------

  // A Conv (constant float W, constant or no B) whose output only an Add, Sub, Mul or Div
  // with a constant reads, the constant a scalar or one value per output channel ([M, 1..]
  // or [1, M, 1..]), takes that op into W and B: a normalization written as separate nodes
  // (an NHWC export's Add bias, Sub mean, Mul scale, Add beta) costs one pass over the output
  // per op otherwise. Repeats down the chain.
  void fold_conv_affine() {
    index();
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_[i] || !is_op(g_.nodes[i], "Conv")) continue;
      for (int step = 0; step < 16; ++step) {
        Node& conv = g_.nodes[i];
        if (conv.outputs.size() != 1 || conv.inputs.size() < 2 || conv.inputs.size() > 3) break;
        const Tensor* W = constant(conv.inputs[1]);
        if (!W || W->dtype() != DataType::kFloat || W->rank() < 3 || W->dim(0) <= 0) break;
        const int64_t M = W->dim(0);
        const bool has_b = conv.inputs.size() == 3 && !conv.inputs[2].empty();
        const Tensor* B = has_b ? constant(conv.inputs[2]) : nullptr;
        if (has_b && (!B || B->dtype() != DataType::kFloat || B->rank() != 1 || B->dim(0) != M))
          break;
        const int r = sole_reader(conv.outputs[0]);
        if (r < 0) break;
        const Node& e = g_.nodes[static_cast<size_t>(r)];
        const bool add = is_op(e, "Add"), sub = is_op(e, "Sub"), mul = is_op(e, "Mul"),
                   div = is_op(e, "Div");
        if (!(add || sub || mul || div) || e.inputs.size() != 2 || e.outputs.size() != 1) break;
        const size_t k = e.inputs[0] == conv.outputs[0] ? 1 : 0;
        if (e.inputs[1 - k] != conv.outputs[0] || e.inputs[k] == conv.outputs[0]) break;
        if ((sub || div) && k != 1) break;  // c - conv, c / conv: not affine in W
        const Tensor* c = constant(e.inputs[k]);
        if (!c || c->dtype() != DataType::kFloat || c->rank() > W->rank()) break;
        // Per channel: every dim 1 but axis 1 of the output (axis rank(c) - rank(W) + 1 of c).
        bool ok = c->numel() == 1 || c->numel() == M;
        if (ok && c->numel() == M && M > 1) {
          const int64_t axis =
              static_cast<int64_t>(c->rank()) - static_cast<int64_t>(W->rank()) + 1;
          ok = axis >= 0 && c->dim(static_cast<size_t>(axis)) == M;
        }
        if (!ok) break;
        const float* cv = c->data<float>();
        auto cm = [&](int64_t m) { return c->numel() == 1 ? cv[0] : cv[m]; };
        if (div)
          for (int64_t m = 0; m < M && ok; ++m) ok = cm(m) != 0.f && std::isfinite(cm(m));
        if (!ok) break;
        Tensor B2 = new_constant(DataType::kFloat, {M});
        float* b2 = B2.data<float>();
        for (int64_t m = 0; m < M; ++m) {
          const float b = B ? B->data<float>()[m] : 0.f;
          b2[m] = add ? b + cm(m) : sub ? b - cm(m) : mul ? b * cm(m) : b / cm(m);
        }
        const std::string base = conv.name.empty() ? e.outputs[0] : conv.name;
        if (mul || div) {
          Tensor W2 = new_constant(DataType::kFloat, W->shape());
          const int64_t per = W->numel() / M;
          const float* w = W->data<float>();
          float* w2 = W2.data<float>();
          for (int64_t m = 0; m < M; ++m)
            for (int64_t j = 0; j < per; ++j)
              w2[m * per + j] = mul ? w[m * per + j] * cm(m) : w[m * per + j] / cm(m);
          const std::string wname = unique_name(base + "_W_affine");
          g_.initializers.emplace_back(wname, W2);
          conv.inputs[1] = wname;
        }
        const std::string bname = unique_name(base + "_B_affine");
        g_.initializers.emplace_back(bname, B2);
        conv.inputs.resize(3);
        conv.inputs[2] = bname;
        conv.outputs[0] = e.outputs[0];
        dead_[static_cast<size_t>(r)] = 1;
        index();  // the new initializers, and the Conv's new output
      }
    }
    compact();
  }

  // ---- BatchNormalization into Conv ------------------------------------------------------

  void fold_batch_norms() {
    index();
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_[i]) continue;
      const Node& bn = g_.nodes[i];
      if (!is_op(bn, "BatchNormalization") || bn.inputs.size() != 5 || bn.outputs.empty()) continue;
      const int64_t opset = node_opset(m_, bn);
      if (opset < 7) continue;
      bool extra = false;
      for (size_t k = 1; k < bn.outputs.size(); ++k) extra = extra || !bn.outputs[k].empty();
      if (extra) continue;
      const Attribute* tm = bn.find_attr("training_mode");
      if (opset >= 14 && tm && (tm->type != AttrType::kInt || tm->i != 0)) continue;
      const Attribute* sp = bn.find_attr("spatial");
      if (opset < 9 && sp && (sp->type != AttrType::kInt || sp->i != 1)) continue;
      const Attribute* ep = bn.find_attr("epsilon");
      if (ep && ep->type != AttrType::kFloat) continue;
      const double eps = ep ? ep->f : 1e-5;
      auto it = producer_.find(bn.inputs[0]);
      if (it == producer_.end() || sole_reader(bn.inputs[0]) != static_cast<int>(i)) continue;
      Node& conv = g_.nodes[it->second];
      if (!is_op(conv, "Conv") || conv.outputs.size() != 1 || conv.inputs.size() < 2 ||
          conv.inputs.size() > 3)
        continue;
      const Tensor* W = constant(conv.inputs[1]);
      if (!W || W->dtype() != DataType::kFloat || W->rank() < 3) continue;
      const int64_t M = W->dim(0);
      const Tensor* Bc =
          conv.inputs.size() == 3 && !conv.inputs[2].empty() ? constant(conv.inputs[2]) : nullptr;
      if (conv.inputs.size() == 3 && !conv.inputs[2].empty() &&
          (!Bc || Bc->dtype() != DataType::kFloat || Bc->rank() != 1 || Bc->dim(0) != M))
        continue;
      const Tensor* p[4];
      bool ok = true;
      for (int k = 0; k < 4; ++k) {
        p[k] = constant(bn.inputs[k + 1]);
        ok = ok && p[k] && p[k]->dtype() == DataType::kFloat && p[k]->rank() == 1 &&
             p[k]->dim(0) == M;
      }
      if (!ok) continue;
      const float *scale = p[0]->data<float>(), *beta = p[1]->data<float>(),
                  *mean = p[2]->data<float>(), *var = p[3]->data<float>();
      std::vector<float> ws(static_cast<size_t>(M));
      Tensor B2 = new_constant(DataType::kFloat, {M});
      for (int64_t m = 0; m < M; ++m) {
        const double s =
            static_cast<double>(scale[m]) / std::sqrt(static_cast<double>(var[m]) + eps);
        ws[m] = static_cast<float>(s);
        const double b = Bc ? Bc->data<float>()[m] : 0.0;
        B2.data<float>()[m] = static_cast<float>((b - mean[m]) * s + beta[m]);
      }
      const std::string base = conv.name.empty() ? bn.outputs[0] : conv.name;
      const std::string bname = unique_name(base + "_B_bn");
      g_.initializers.emplace_back(bname, B2);
      conv.op_type = "FusedConv";
      conv.domain = kDomain;
      conv.inputs.resize(3);
      conv.inputs[2] = bname;
      conv.outputs[0] = bn.outputs[0];
      conv.attributes.push_back(floats_attr("w_scale", ws));
      conv.attributes.push_back(string_attr("activation", ""));
      used_domain_ = true;
      dead_[i] = 1;
      index();
    }
    compact();
  }

  // ---- Casts to the type their input has --------------------------------------------------

  // A Cast to the element type its input already has (tf2onnx writes one after most ops of
  // an NHWC model): its readers read the input instead, and the Cast goes. Only where the
  // input's type is known (declarations, initializers, the op rules of type_inference.cc),
  // and not for graph outputs or values a subgraph reads.
  void eliminate_noop_casts() {
    if (!well_formed()) return;
    index();
    std::vector<int> order;
    if (!topological_order(g_, order)) return;
    const std::unordered_map<std::string, DataType> types = infer_elem_types(g_, order);
    std::unordered_map<std::string, std::string> alias;  // Cast output -> what it reads
    auto resolve = [&alias](const std::string& v) -> const std::string& {
      auto it = alias.find(v);
      return it == alias.end() ? v : it->second;
    };
    for (int i : order) {
      Node& n = g_.nodes[static_cast<size_t>(i)];
      for (std::string& in : n.inputs)
        if (!in.empty()) in = resolve(in);
      if (!is_op(n, "Cast") || n.inputs.size() != 1 || n.outputs.size() != 1 ||
          n.inputs[0].empty() || n.outputs[0].empty() || pinned_.count(n.outputs[0]))
        continue;
      const Attribute* to = n.find_attr("to");
      auto it = types.find(n.inputs[0]);
      if (!to || to->type != AttrType::kInt || it == types.end() ||
          static_cast<int64_t>(it->second) != to->i)
        continue;
      alias[n.outputs[0]] = n.inputs[0];
      dead_[static_cast<size_t>(i)] = 1;
    }
    if (!alias.empty()) compact();
  }

  // ---- Transposes pushed down and cancelled --------------------------------------------

  // A model exported from an NHWC framework wraps every Conv in a Transpose to NCHW and one
  // back, with the bias, normalization and activation in NHWC between them. A Transpose read
  // only by an elementwise node moves below it (a constant operand is transposed once,
  // here, by the inverse permutation; an operand that is the same Transpose of another value
  // is replaced by that value), and two Transposes in a row become one, or none when they
  // compose to the identity. Between two Convs the pair then meets and vanishes, and the
  // Conv's bias and activation can be fused.
  static bool transparent_unary(const Node& n) {
    static const char* const kOps[] = {
        "Relu",     "LeakyRelu", "Sigmoid",     "Tanh",      "Exp",
        "Log",      "Neg",       "Abs",         "Sqrt",      "Elu",
        "Selu",     "Softplus",  "HardSigmoid", "HardSwish", "Erf",
        "Floor",    "Ceil",      "Round",       "Sign",      "Not",
        "Cast",     "Identity",  "Reciprocal",  "Celu",      "ThresholdedRelu",
        "Softsign", "Mish",      "Gelu"};
    if (!default_domain(n.domain) || n.outputs.size() != 1) return false;
    for (const char* op : kOps)
      if (n.op_type == op) return n.inputs.size() == 1;
    return false;
  }
  static bool transparent_binary(const Node& n) {
    static const char* const kOps[] = {"Add", "Sub", "Mul", "Div", "Pow", "PRelu"};
    if (!default_domain(n.domain) || n.outputs.size() != 1 || n.inputs.size() != 2) return false;
    for (const char* op : kOps)
      if (n.op_type == op) return true;
    return false;
  }

  // The permutation of a Transpose node with an explicit, valid perm attribute.
  static bool perm_of(const Node& n, std::vector<int64_t>& perm) {
    if (!is_op(n, "Transpose") || n.inputs.size() != 1 || n.outputs.size() != 1 ||
        n.inputs[0].empty())
      return false;
    const Attribute* a = n.find_attr("perm");
    if (!a || a->type != AttrType::kInts || a->ints.empty() || a->ints.size() > 8) return false;
    perm = a->ints;
    std::vector<char> seen(perm.size(), 0);
    for (int64_t v : perm) {
      if (v < 0 || v >= static_cast<int64_t>(perm.size()) || seen[static_cast<size_t>(v)])
        return false;
      seen[static_cast<size_t>(v)] = 1;
    }
    return true;
  }

  // c (rank <= perm's, numpy-broadcast against the transposed value) as the constant c'
  // with Transpose(c', perm) == c broadcast the same way: c left-padded with ones to the
  // rank, then permuted by the inverse permutation. A one-element c stays as it is.
  bool untransposed_constant(const std::string& name, const std::vector<int64_t>& perm,
                             std::string& out) {
    const Tensor* c = constant(name);
    if (!c || c->dtype() == DataType::kString || c->dtype() == DataType::kUndefined ||
        c->rank() > perm.size() || c->numel() > (int64_t(1) << 20))
      return false;
    if (c->numel() == 1 && c->rank() <= 1) {
      out = name;
      return true;
    }
    const size_t r = perm.size();
    Shape cs(r - c->rank(), 1);
    for (size_t i = 0; i < c->rank(); ++i) cs.push_back(c->dim(i));
    std::vector<int64_t> inv(r);
    for (size_t k = 0; k < r; ++k) inv[static_cast<size_t>(perm[k])] = static_cast<int64_t>(k);
    Shape os(r);
    for (size_t j = 0; j < r; ++j) os[j] = cs[static_cast<size_t>(inv[j])];
    Tensor t = new_constant(c->dtype(), os);
    // Output axis j walks input axis inv[j].
    std::vector<int64_t> in_stride(r, 1), idx(r, 0);
    for (size_t k = r - 1; k-- > 0;) in_stride[k] = in_stride[k + 1] * cs[k + 1];
    const size_t es = dtype_size(c->dtype());
    const char* src = static_cast<const char*>(c->raw_data());
    char* dst = static_cast<char*>(t.raw_data());
    for (int64_t e = 0; e < t.numel(); ++e) {
      int64_t off = 0;
      for (size_t j = 0; j < r; ++j) off += idx[j] * in_stride[static_cast<size_t>(inv[j])];
      std::memcpy(dst + static_cast<size_t>(e) * es, src + static_cast<size_t>(off) * es, es);
      for (size_t j = r; j-- > 0;) {
        if (++idx[j] < os[j]) break;
        idx[j] = 0;
      }
    }
    out = unique_name(name + "_untransposed");
    g_.initializers.emplace_back(out, t);  // constants_ is rebuilt before its next use
    return true;
  }

  // A Transpose read only by Transposes (of the same rank; two or more, as where an NHWC
  // value feeds two Convs) folds into each of them: Transpose(Transpose(x, p), q) is
  // Transpose(x, p[q[k]]), and an identity composition reads x itself.
  bool compose_into_readers(size_t i, const std::vector<int64_t>& perm) {
    const std::string x = g_.nodes[i].inputs[0], t = g_.nodes[i].outputs[0];
    if (pinned_.count(t)) return false;
    auto it = readers_.find(t);
    if (it == readers_.end() || it->second.size() < 2) return false;
    for (int r : it->second) {
      std::vector<int64_t> q;
      if (dead_[static_cast<size_t>(r)] || !perm_of(g_.nodes[static_cast<size_t>(r)], q) ||
          q.size() != perm.size())
        return false;
    }
    std::vector<int> readers = it->second;
    std::sort(readers.begin(), readers.end());
    readers.erase(std::unique(readers.begin(), readers.end()), readers.end());
    for (int r : readers) {
      Node& e = g_.nodes[static_cast<size_t>(r)];
      std::vector<int64_t> q, c(perm.size());
      perm_of(e, q);
      bool identity = true;
      for (size_t k = 0; k < q.size(); ++k) {
        c[k] = perm[static_cast<size_t>(q[k])];
        identity = identity && c[k] == static_cast<int64_t>(k);
      }
      e.inputs[0] = x;
      if (identity) {
        e.op_type = "Identity";
        e.attributes.clear();
      } else {
        for (Attribute& a : e.attributes)
          if (a.name == "perm") a.ints = c;
      }
    }
    dead_[i] = 1;
    return true;
  }

  void push_transposes() {
    if (!well_formed()) return;
    bool any = false;
    for (int round = 0; round < 4096; ++round) {
      index();
      bool changed = false;
      for (size_t i = 0; i < g_.nodes.size() && !changed; ++i) {
        if (dead_[i]) continue;
        std::vector<int64_t> perm;
        if (!perm_of(g_.nodes[i], perm)) continue;
        const std::string x = g_.nodes[i].inputs[0], t = g_.nodes[i].outputs[0];
        if (compose_into_readers(i, perm)) {
          changed = true;
          continue;
        }
        const int r = sole_reader(t);
        if (r < 0) continue;
        Node& e = g_.nodes[static_cast<size_t>(r)];
        std::vector<int64_t> q;
        if (perm_of(e, q) && q.size() == perm.size()) {
          // Transpose(Transpose(x, p), q) = Transpose(x, p[q[k]]).
          std::vector<int64_t> c(q.size());
          bool identity = true;
          for (size_t k = 0; k < q.size(); ++k) {
            c[k] = perm[static_cast<size_t>(q[k])];
            identity = identity && c[k] == static_cast<int64_t>(k);
          }
          const std::string u = e.outputs[0];
          dead_[i] = 1;
          if (identity && !pinned_.count(u)) {
            dead_[static_cast<size_t>(r)] = 1;
            for (Node& n : g_.nodes)
              for (std::string& in : n.inputs)
                if (in == u) in = x;
          } else if (identity) {
            e.op_type = "Identity";
            e.attributes.clear();
            e.inputs[0] = x;
          } else {
            e.inputs[0] = x;
            for (Attribute& a : e.attributes)
              if (a.name == "perm") a.ints = c;
          }
          changed = true;
          continue;
        }
        std::vector<std::string> ins = e.inputs;
        if (transparent_unary(e)) {
          ins[0] = x;
        } else if (transparent_binary(e)) {
          const size_t k = e.inputs[0] == t ? 1 : 0;
          const std::string& other = e.inputs[k];
          if (e.op_type == "PRelu" && k == 0) continue;  // the slope must stay the second
          ins[1 - k] = x;
          auto pit = producer_.find(other);
          std::vector<int64_t> p2;
          if (other == t) {
            ins[k] = x;
          } else if (pit != producer_.end() &&
                     perm_of(g_.nodes[static_cast<size_t>(pit->second)], p2) && p2 == perm) {
            // The same Transpose of another value: e reads that value. The Transpose stays
            // for its other readers (an NHWC shortcut that also feeds the next Conv's
            // Transpose, which it then meets alone).
            ins[k] = g_.nodes[static_cast<size_t>(pit->second)].inputs[0];
            if (sole_reader(other) == r) dead_[static_cast<size_t>(pit->second)] = 1;
          } else if (!untransposed_constant(other, perm, ins[k])) {
            continue;
          }
        } else {
          continue;
        }
        // e reads the untransposed values and the Transpose moves below it, keeping e's
        // output name (a graph output stays one).
        Node& tr = g_.nodes[i];
        const std::string u = e.outputs[0];
        const std::string u2 = unique_name(u + "_untransposed");
        e.inputs = ins;
        e.outputs[0] = u2;
        tr.inputs[0] = u2;
        tr.outputs[0] = u;
        changed = true;
      }
      if (!changed) break;
      any = true;
      compact();
    }
    if (!any) return;
    // The identities the compositions left (their output no graph output, no subgraph read).
    index();
    std::unordered_map<std::string, std::string> alias;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      if (!is_op(n, "Identity") || n.inputs.size() != 1 || n.outputs.size() != 1 ||
          n.inputs[0].empty() || pinned_.count(n.outputs[0]))
        continue;
      alias[n.outputs[0]] = n.inputs[0];
      dead_[i] = 1;
    }
    auto resolve = [&alias](std::string v) {
      for (auto it = alias.find(v); it != alias.end(); it = alias.find(v)) v = it->second;
      return v;
    };
    for (Node& n : g_.nodes)
      for (std::string& in : n.inputs)
        if (!in.empty()) in = resolve(in);
    compact();
  }

  // ---- GELU -----------------------------------------------------------------------------

  // The other input of binary node n (the one that is not `v`), or "" when both are `v`.
  static std::string other_input(const Node& n, const std::string& v) {
    if (n.inputs.size() != 2) return "";
    if (n.inputs[0] == v && n.inputs[1] != v) return n.inputs[1];
    if (n.inputs[1] == v && n.inputs[0] != v) return n.inputs[0];
    return "";
  }

  bool is_binary(int k, const char* op) const {
    return k >= 0 && is_op(g_.nodes[k], op) && g_.nodes[k].inputs.size() == 2 &&
           g_.nodes[k].outputs.size() == 1;
  }

  void fuse_gelu() {
    index();
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_[i] || !is_op(g_.nodes[i], "Erf") || g_.nodes[i].inputs.size() != 1 ||
          g_.nodes[i].outputs.size() != 1)
        continue;
      const Node& erf = g_.nodes[i];
      // t = x / sqrt(2) or x * (1 / sqrt(2)).
      auto pt = producer_.find(erf.inputs[0]);
      if (pt == producer_.end() || sole_reader(erf.inputs[0]) != static_cast<int>(i)) continue;
      const int div = pt->second;
      const Node& dn = g_.nodes[div];
      std::string x;
      float c = 0.f;
      if (is_binary(div, "Div") && scalar(dn.inputs[1], c, 1) &&
          std::fabs(c - 1.41421356f) < 1e-4f) {
        x = dn.inputs[0];
      } else if (is_binary(div, "Mul")) {
        for (int k = 0; k < 2 && x.empty(); ++k)
          if (scalar(dn.inputs[k], c, 1) && std::fabs(c - 0.70710678f) < 1e-5f)
            x = dn.inputs[1 - k];
      }
      if (x.empty()) continue;
      // a = erf + 1.
      const int add = sole_reader(erf.outputs[0]);
      if (!is_binary(add, "Add")) continue;
      const std::string one = other_input(g_.nodes[add], erf.outputs[0]);
      if (!scalar(one, c, 1) || c != 1.f) continue;
      const std::string a = g_.nodes[add].outputs[0];
      // Then x * a * 0.5 in one of three orders.
      const int m1 = sole_reader(a);
      if (!is_binary(m1, "Mul")) continue;
      const std::string m1o = g_.nodes[m1].outputs[0];
      const std::string f1 = other_input(g_.nodes[m1], a);
      std::vector<int> nodes = {div, static_cast<int>(i), add, m1};
      std::string out;
      if (f1 == x) {  // (x * a) * 0.5
        const int m2 = sole_reader(m1o);
        if (!is_binary(m2, "Mul") || !scalar(other_input(g_.nodes[m2], m1o), c, 1) || c != 0.5f)
          continue;
        nodes.push_back(m2);
        out = g_.nodes[m2].outputs[0];
      } else if (scalar(f1, c, 1) && c == 0.5f) {  // x * (a * 0.5)
        const int m2 = sole_reader(m1o);
        if (!is_binary(m2, "Mul") || other_input(g_.nodes[m2], m1o) != x) continue;
        nodes.push_back(m2);
        out = g_.nodes[m2].outputs[0];
      } else {  // (x * 0.5) * a
        auto ph = producer_.find(f1);
        if (ph == producer_.end() || sole_reader(f1) != m1) continue;
        const int h = ph->second;
        if (!is_binary(h, "Mul") || other_input(g_.nodes[h], x).empty() ||
            !scalar(other_input(g_.nodes[h], x), c, 1) || c != 0.5f)
          continue;
        nodes.push_back(h);
        out = m1o;
      }
      Node gelu;
      gelu.name = erf.name;
      gelu.op_type = "Gelu";
      gelu.domain = kDomain;
      gelu.inputs = {x};
      gelu.outputs = {out};
      for (int k : nodes) dead_[k] = 1;
      dead_[i] = 0;
      g_.nodes[i] = std::move(gelu);
      used_domain_ = true;
      index();
    }
    compact();
  }

  // ---- LayerNormalization ---------------------------------------------------------------

  // Whether node k is a ReduceMean over the last axis only, keeping it (axes [-1], as an
  // attribute or, from opset 18, a constant input).
  bool mean_over_last_axis(int k) const {
    if (k < 0 || !is_op(g_.nodes[k], "ReduceMean") || g_.nodes[k].outputs.size() != 1) return false;
    const Node& n = g_.nodes[k];
    const Attribute* kd = n.find_attr("keepdims");
    if (kd && (kd->type != AttrType::kInt || kd->i != 1)) return false;
    const Attribute* ax = n.find_attr("axes");
    if (ax)
      return n.inputs.size() == 1 && ax->type == AttrType::kInts && ax->ints.size() == 1 &&
             ax->ints[0] == -1;
    if (n.inputs.size() != 2) return false;
    const Tensor* t = constant(n.inputs[1]);
    return t && t->dtype() == DataType::kInt64 && t->numel() == 1 && *t->data<int64_t>() == -1;
  }

  // The layer norm exporters write decomposed,
  //   m = ReduceMean(x); d = x - m; v = ReduceMean(d ^ 2 or d * d);
  //   y = d / Sqrt(v + eps) * gamma (+ beta)
  // with means over the last axis and constant float gamma / beta of one row, becomes
  // LayerNormalization(x, gamma, beta, axis = -1, epsilon = eps) (onnxruntime's
  // LayerNormFusion; below opset 17 ortlite, as onnxruntime, runs the op as the contrib one).
  // The statistics are then computed in double instead of float.
  void fuse_layer_norms() {
    index();
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_[i] || !mean_over_last_axis(static_cast<int>(i))) continue;
      const std::string x = g_.nodes[i].inputs[0], m = g_.nodes[i].outputs[0];
      const int sub = sole_reader(m);
      if (!is_binary(sub, "Sub") || g_.nodes[sub].inputs[0] != x || g_.nodes[sub].inputs[1] != m)
        continue;
      const std::string d = g_.nodes[sub].outputs[0];
      auto rd = readers_.find(d);
      if (pinned_.count(d) || rd == readers_.end()) continue;
      std::vector<int> rs = rd->second;  // Mul(d, d) reads d twice
      std::sort(rs.begin(), rs.end());
      rs.erase(std::unique(rs.begin(), rs.end()), rs.end());
      if (rs.size() != 2) continue;
      int sq = -1, div = -1;
      for (int r : rs) {
        const Node& n = g_.nodes[r];
        float c = 0.f;
        if (is_binary(r, "Pow") && n.inputs[0] == d && scalar(n.inputs[1], c, 1) && c == 2.f)
          sq = r;
        else if (is_binary(r, "Mul") && n.inputs[0] == d && n.inputs[1] == d)
          sq = r;
        else if (is_binary(r, "Div") && n.inputs[0] == d && n.inputs[1] != d)
          div = r;
      }
      if (sq < 0 || div < 0 || dead_[sq] || dead_[div]) continue;
      const int var = sole_reader(g_.nodes[sq].outputs[0]);
      if (!mean_over_last_axis(var) || g_.nodes[var].inputs[0] != g_.nodes[sq].outputs[0]) continue;
      const std::string v = g_.nodes[var].outputs[0];
      const int add = sole_reader(v);
      float eps = 0.f;
      if (!is_binary(add, "Add") || !scalar(other_input(g_.nodes[add], v), eps, 1) || !(eps >= 0.f))
        continue;
      const int sqrt = sole_reader(g_.nodes[add].outputs[0]);
      if (sqrt < 0 || !is_op(g_.nodes[sqrt], "Sqrt") || g_.nodes[sqrt].outputs.size() != 1 ||
          g_.nodes[div].inputs[1] != g_.nodes[sqrt].outputs[0] ||
          sole_reader(g_.nodes[sqrt].outputs[0]) != div)
        continue;
      const std::string nrm = g_.nodes[div].outputs[0];
      const int mul = sole_reader(nrm);
      if (!is_binary(mul, "Mul")) continue;
      const std::string gamma = other_input(g_.nodes[mul], nrm);
      const Tensor* gt = constant(gamma);
      if (!gt || gt->dtype() != DataType::kFloat || gt->rank() != 1 || gt->numel() < 2) continue;
      std::vector<int> nodes = {static_cast<int>(i), sub, sq, var, add, sqrt, div, mul};
      std::string beta, out = g_.nodes[mul].outputs[0];
      const int badd = sole_reader(out);
      if (is_binary(badd, "Add")) {
        const std::string b = other_input(g_.nodes[badd], out);
        const Tensor* bt = constant(b);
        if (bt && bt->dtype() == DataType::kFloat && bt->shape() == gt->shape()) {
          beta = b;
          out = g_.nodes[badd].outputs[0];
          nodes.push_back(badd);
        }
      }
      Node ln;
      ln.name = g_.nodes[i].name;
      ln.op_type = "LayerNormalization";
      ln.inputs = {x, gamma};
      if (!beta.empty()) ln.inputs.push_back(beta);
      ln.outputs = {out};
      ln.attributes = {make_int_attr("axis", -1), float_attr("epsilon", eps)};
      for (int k : nodes) dead_[k] = 1;
      dead_[i] = 0;
      g_.nodes[i] = std::move(ln);
      index();
    }
    compact();
  }

  // ---- activations ----------------------------------------------------------------------

  // Whether node k is an activation a fused node can apply, and which.
  Activation activation(int k) const {
    Activation a;
    if (k < 0) return a;
    const Node& n = g_.nodes[k];
    if (n.outputs.size() != 1 || n.inputs.empty() || n.inputs[0].empty()) return a;
    if (n.op_type == "Gelu" && n.domain == kDomain && n.inputs.size() == 1) {
      a.name = "Gelu";
      return a;
    }
    if (!default_domain(n.domain)) return a;
    auto attr_f = [&](const char* name, float dflt, bool& ok) {
      const Attribute* at = n.find_attr(name);
      if (!at) return dflt;
      if (at->type != AttrType::kFloat) ok = false;
      return at->f;
    };
    bool ok = true;
    if (n.inputs.size() == 1 && (n.op_type == "Relu" || n.op_type == "Sigmoid" ||
                                 n.op_type == "Tanh" || n.op_type == "HardSwish")) {
      a.name = n.op_type;
    } else if (n.inputs.size() == 1 && n.op_type == "LeakyRelu") {
      a.name = n.op_type;
      a.params = {attr_f("alpha", 0.01f, ok)};
    } else if (n.inputs.size() == 1 && n.op_type == "HardSigmoid") {
      a.name = n.op_type;
      a.params = {attr_f("alpha", 0.2f, ok), attr_f("beta", 0.5f, ok)};
    } else if (n.op_type == "Clip") {
      float lo = -3.40282347e38f, hi = 3.40282347e38f;
      if (node_opset(m_, n) < 11) {
        ok = n.inputs.size() == 1;
        lo = attr_f("min", lo, ok);
        hi = attr_f("max", hi, ok);
      } else {
        if (n.inputs.size() > 3) ok = false;
        if (ok && n.inputs.size() > 1 && !n.inputs[1].empty()) ok = scalar(n.inputs[1], lo, 1);
        if (ok && n.inputs.size() > 2 && !n.inputs[2].empty()) ok = scalar(n.inputs[2], hi, 1);
      }
      a.name = "Clip";
      a.params = {lo, hi};
    }
    if (!ok) a.name.clear();
    return a;
  }

  // The Mul of x * Sigmoid(x) when v (x) is read by exactly that Sigmoid and that Mul, and
  // the Sigmoid's output only by the Mul (SiLU, as YOLO exports write it); -1 otherwise.
  int silu(const std::string& v, int& sig) const {
    if (v.empty() || pinned_.count(v)) return -1;
    auto it = readers_.find(v);
    if (it == readers_.end() || it->second.size() != 2 || it->second[0] == it->second[1]) return -1;
    for (int pass = 0; pass < 2; ++pass) {
      const int s = it->second[pass], m = it->second[1 - pass];
      if (dead_[s] || dead_[m]) return -1;
      const Node& sn = g_.nodes[s];
      const Node& mn = g_.nodes[m];
      if (!is_op(sn, "Sigmoid") || sn.inputs.size() != 1 || sn.outputs.size() != 1) continue;
      if (!is_op(mn, "Mul") || mn.inputs.size() != 2 || mn.outputs.size() != 1) continue;
      const std::string& so = sn.outputs[0];
      const bool pair =
          (mn.inputs[0] == v && mn.inputs[1] == so) || (mn.inputs[1] == v && mn.inputs[0] == so);
      if (!pair || sole_reader(so) != m) continue;
      sig = s;
      return m;
    }
    return -1;
  }

  // ---- Conv -----------------------------------------------------------------------------

  void fuse_convs() {
    index();
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_[i]) continue;
      const Node& conv = g_.nodes[i];
      // A Conv, or a FusedConv that only has a BatchNormalization folded in so far.
      const bool folded = conv.op_type == "FusedConv" && conv.domain == kDomain;
      if ((!is_op(conv, "Conv") && !folded) || conv.outputs.size() != 1 || conv.inputs.size() < 2 ||
          conv.inputs.size() > 3)
        continue;
      std::string cur = conv.outputs[0], z;
      std::vector<int> gone;
      int k = sole_reader(cur);
      if (is_binary(k, "Add")) {
        z = other_input(g_.nodes[k], cur);
        if (!z.empty()) {
          gone.push_back(k);
          cur = g_.nodes[k].outputs[0];
          k = sole_reader(cur);
        }
      }
      Activation act = activation(k);
      int sig = -1;
      const int mul = act.name.empty() ? silu(cur, sig) : -1;
      if (mul >= 0) {
        act.name = "Silu";
        gone.push_back(sig);
        gone.push_back(mul);
        cur = g_.nodes[mul].outputs[0];
      } else if (!act.name.empty()) {
        gone.push_back(k);
        cur = g_.nodes[k].outputs[0];
      } else if (gone.empty()) {
        continue;
      }
      Node f;
      f.name = conv.name;
      f.op_type = "FusedConv";
      f.domain = kDomain;
      f.inputs = conv.inputs;
      f.inputs.resize(3);
      if (!z.empty()) f.inputs.push_back(z);
      f.outputs = {cur};
      for (const Attribute& at : conv.attributes)
        if (at.name != "activation") f.attributes.push_back(at);
      f.attributes.push_back(string_attr("activation", act.name));
      if (!act.params.empty()) f.attributes.push_back(floats_attr("activation_params", act.params));
      for (int d : gone) dead_[d] = 1;
      g_.nodes[i] = std::move(f);
      used_domain_ = true;
      index();
    }
    compact();
  }

  // ---- 1x1 Conv + depthwise Conv ---------------------------------------------------------

  // A Conv, or a FusedConv without a summed input, with a constant 4-D float W and only
  // the attributes FusedExpandDepthwise can carry over.
  const Tensor* plain_conv(int k) const {
    if (k < 0) return nullptr;
    const Node& n = g_.nodes[k];
    const bool fused = n.op_type == "FusedConv" && n.domain == kDomain;
    if ((!is_op(n, "Conv") && !fused) || n.outputs.size() != 1 || n.inputs.size() < 2 ||
        n.inputs.size() > 3)
      return nullptr;
    static const char* const kKnown[] = {"group",      "strides",           "pads",
                                         "dilations",  "auto_pad",          "kernel_shape",
                                         "activation", "activation_params", "w_scale"};
    for (const Attribute& a : n.attributes) {
      bool known = false;
      for (const char* name : kKnown) known = known || a.name == name;
      if (!known || !a.ref_attr_name.empty()) return nullptr;
    }
    const Tensor* w = constant(n.inputs[1]);
    if (!w || w->dtype() != DataType::kFloat || w->rank() != 4) return nullptr;
    return w;
  }

  static bool ints_all(const Node& n, const char* name, int64_t v) {
    const Attribute* a = n.find_attr(name);
    if (!a) return true;
    if (a->type != AttrType::kInts) return false;
    for (int64_t x : a->ints)
      if (x != v) return false;
    return true;
  }

  static int64_t int_attr(const Node& n, const char* name, int64_t def) {
    const Attribute* a = n.find_attr(name);
    if (!a) return def;
    return a->type == AttrType::kInt ? a->i : -1;
  }

  void fuse_expand_depthwise() {
    index();
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_[i]) continue;
      const Tensor* we = plain_conv(static_cast<int>(i));
      if (!we || we->dim(2) != 1 || we->dim(3) != 1) continue;
      const Node& e = g_.nodes[i];
      const Attribute* ap = e.find_attr("auto_pad");
      if (ap && (ap->type != AttrType::kString || (ap->s != "NOTSET" && ap->s != "VALID")))
        continue;
      if (int_attr(e, "group", 1) != 1 || !ints_all(e, "strides", 1) || !ints_all(e, "pads", 0) ||
          !ints_all(e, "dilations", 1) || !ints_all(e, "kernel_shape", 1))
        continue;
      const int k = sole_reader(e.outputs[0]);
      const Tensor* wd = plain_conv(k);
      const int64_t Ce = we->dim(0);
      if (!wd || wd->dim(0) != Ce || wd->dim(1) != 1 || g_.nodes[k].inputs[0] != e.outputs[0] ||
          int_attr(g_.nodes[k], "group", 1) != Ce)
        continue;
      const Node& d = g_.nodes[k];
      // The fused node takes the 1x1 node's place: the depthwise bias must exist there.
      if (d.inputs.size() > 2 && !d.inputs[2].empty() && !constant(d.inputs[2])) continue;
      Node f;
      f.name = e.name;
      f.op_type = "FusedExpandDepthwise";
      f.domain = kDomain;
      f.inputs = {e.inputs[0], e.inputs[1], e.inputs.size() > 2 ? e.inputs[2] : "", d.inputs[1],
                  d.inputs.size() > 2 ? d.inputs[2] : ""};
      f.outputs = d.outputs;
      for (const Attribute& a : d.attributes) f.attributes.push_back(a);
      for (const Attribute& a : e.attributes) {
        if (a.name != "activation" && a.name != "activation_params" && a.name != "w_scale")
          continue;
        f.attributes.push_back(a);
        f.attributes.back().name = "expand_" + a.name;
      }
      dead_[k] = 1;
      g_.nodes[i] = std::move(f);
      used_domain_ = true;
      index();
    }
    compact();
  }

  // ---- MatMul / Gemm --------------------------------------------------------------------

  void fuse_matmuls() {
    index();
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_[i]) continue;
      const Node& mm = g_.nodes[i];
      if (!is_op(mm, "MatMul") || mm.inputs.size() != 2 || mm.outputs.size() != 1) continue;
      const Tensor* B = constant(mm.inputs[1]);
      const bool b2 = B && B->rank() == 2 && B->dtype() == DataType::kFloat;
      // Whether the product is known to be float (a constant operand of a float op says so).
      bool is_float = b2;
      std::string cur = mm.outputs[0], bias;
      float alpha = 1.f;
      std::vector<int> gone;
      int k = sole_reader(cur);
      float c = 0.f;
      // A scalar factor: rank 0 keeps any output shape; rank 1 only with a rank-2 B (the
      // product then has rank >= 1).
      if (is_binary(k, "Mul") && scalar(other_input(g_.nodes[k], cur), c, b2 ? 1 : 0)) {
        alpha = c;
        is_float = true;
        gone.push_back(k);
        cur = g_.nodes[k].outputs[0];
        k = sole_reader(cur);
      }
      if (b2 && is_binary(k, "Add")) {
        const std::string o = other_input(g_.nodes[k], cur);
        const Tensor* t = o.empty() ? nullptr : constant(o);
        if (t && t->dtype() == DataType::kFloat && t->rank() == 1 && t->dim(0) == B->dim(1)) {
          bias = o;
          gone.push_back(k);
          cur = g_.nodes[k].outputs[0];
          k = sole_reader(cur);
        }
      }
      const Activation act = is_float ? activation(k) : Activation();
      if (!act.name.empty()) {
        gone.push_back(k);
        cur = g_.nodes[k].outputs[0];
      }
      if (gone.empty()) continue;
      Node f;
      f.name = mm.name;
      f.op_type = "FusedMatMul";
      f.domain = kDomain;
      f.inputs = mm.inputs;
      if (!bias.empty()) f.inputs.push_back(bias);
      f.outputs = {cur};
      f.attributes.push_back(float_attr("alpha", alpha));
      f.attributes.push_back(string_attr("activation", act.name));
      if (!act.params.empty()) f.attributes.push_back(floats_attr("activation_params", act.params));
      for (int d : gone) dead_[d] = 1;
      g_.nodes[i] = std::move(f);
      used_domain_ = true;
      index();
    }
    compact();
  }

  void fuse_gemms() {
    index();
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_[i]) continue;
      const Node& gm = g_.nodes[i];
      // Opset 11 on: C optional and broadcast one way (what FusedGemm implements).
      if (!is_op(gm, "Gemm") || gm.outputs.size() != 1 || gm.inputs.size() < 2 ||
          gm.inputs.size() > 3 || node_opset(m_, gm) < 11)
        continue;
      const Tensor* B = constant(gm.inputs[1]);
      if (!B || B->dtype() != DataType::kFloat) continue;
      const int k = sole_reader(gm.outputs[0]);
      const Activation act = activation(k);
      if (act.name.empty()) continue;
      Node f = gm;
      f.op_type = "FusedGemm";
      f.domain = kDomain;
      f.outputs = {g_.nodes[k].outputs[0]};
      f.attributes.push_back(string_attr("activation", act.name));
      if (!act.params.empty()) f.attributes.push_back(floats_attr("activation_params", act.params));
      dead_[k] = 1;
      g_.nodes[i] = std::move(f);
      used_domain_ = true;
      index();
    }
    compact();
  }

  // ---- QDQ groups to QLinearConv / QLinearMatMul ------------------------------------------

  // The DequantizeLinear producing v: per-tensor or per-axis (`axis` as given), no blocks,
  // three inputs (the zero point present); -1 otherwise.
  int dequantize_of(const std::string& v) const {
    auto it = producer_.find(v);
    if (it == producer_.end() || dead_[it->second]) return -1;
    const Node& n = g_.nodes[it->second];
    if (!is_op(n, "DequantizeLinear") || n.inputs.size() != 3 || n.inputs[2].empty() ||
        n.outputs.size() != 1)
      return -1;
    const Attribute* bs = n.find_attr("block_size");
    if (bs && bs->i != 0) return -1;
    return it->second;
  }

  // A one-value constant (scale or zero point), or any value when `runtime_ok`.
  bool single_const(const std::string& v) const {
    const Tensor* t = constant(v);
    return t && t->numel() == 1;
  }

  static int64_t axis_attr(const Node& n, int64_t dflt) {
    const Attribute* a = n.find_attr("axis");
    return a && a->type == AttrType::kInt ? a->i : dflt;
  }

  void fuse_qdq() {
    index();
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_[i]) continue;
      const Node& op = g_.nodes[i];
      const bool conv = is_op(op, "Conv"), mm = is_op(op, "MatMul");
      if ((!conv && !mm) || op.outputs.size() != 1 || op.inputs.size() < 2 ||
          op.inputs.size() > (conv ? 3u : 2u))
        continue;
      const int dx = dequantize_of(op.inputs[0]), dw = dequantize_of(op.inputs[1]);
      if (dx < 0 || dw < 0) continue;
      const Node& X = g_.nodes[dx];
      const Node& W = g_.nodes[dw];
      // Activations per tensor; weights constant, per tensor or per output channel (Conv:
      // axis 0 of W; MatMul: one per column, axis 1 of a 2-D W).
      if (!single_const(X.inputs[1]) || !single_const(X.inputs[2])) continue;
      const Tensor* wq = constant(W.inputs[0]);
      const Tensor* ws = constant(W.inputs[1]);
      const Tensor* wz = constant(W.inputs[2]);
      if (!wq || !ws || !wz || ws->numel() != wz->numel() ||
          (wq->dtype() != DataType::kInt8 && wq->dtype() != DataType::kUInt8))
        continue;
      if (ws->numel() > 1) {
        const int64_t ax = axis_attr(W, 1), r = static_cast<int64_t>(wq->rank());
        const int64_t want = conv ? 0 : 1;
        if (ws->rank() != 1 || (ax < 0 ? ax + r : ax) != want || r < 2 || (mm && r != 2) ||
            ws->numel() != wq->dim(static_cast<size_t>(want)))
          continue;
      }
      std::string bq;
      if (conv && op.inputs.size() == 3 && !op.inputs[2].empty()) {
        const int db = dequantize_of(op.inputs[2]);
        if (db < 0) continue;
        const Node& B = g_.nodes[db];
        const Tensor* b = constant(B.inputs[0]);
        const Tensor* bz = constant(B.inputs[2]);
        if (!b || b->dtype() != DataType::kInt32 || b->rank() != 1 || !bz) continue;
        bool zero = true;
        for (int64_t k = 0; k < bz->numel() && zero; ++k) zero = bz->data<int32_t>()[k] == 0;
        if (!zero) continue;
        bq = B.inputs[0];
      }
      const int q = sole_reader(op.outputs[0]);
      if (q < 0) continue;
      const Node& Q = g_.nodes[q];
      if (!is_op(Q, "QuantizeLinear") || Q.inputs.size() != 3 || Q.inputs[2].empty() ||
          Q.outputs.size() != 1 || !single_const(Q.inputs[1]) || !single_const(Q.inputs[2]))
        continue;
      const Attribute* qs = Q.find_attr("saturate");
      const Attribute* qd = Q.find_attr("output_dtype");
      const Attribute* qb = Q.find_attr("block_size");
      if ((qs && qs->i != 1) || (qd && qd->i != 0) || (qb && qb->i != 0)) continue;
      const Tensor* yz = constant(Q.inputs[2]);
      const Tensor* xz = constant(X.inputs[2]);
      if (!is_int8(yz->dtype()) || !is_int8(xz->dtype())) continue;
      Node f;
      f.name = op.name;
      f.outputs = Q.outputs;
      f.op_type = conv ? "QLinearConv" : "QLinearMatMul";
      f.inputs = {X.inputs[0], X.inputs[1], X.inputs[2], W.inputs[0],
                  W.inputs[1], W.inputs[2], Q.inputs[1], Q.inputs[2]};
      if (!bq.empty()) f.inputs.push_back(bq);
      if (conv) f.attributes = op.attributes;
      dead_[q] = 1;
      g_.nodes[i] = std::move(f);
      index();
    }
    compact();
  }

  static bool is_int8(DataType t) { return t == DataType::kInt8 || t == DataType::kUInt8; }

  // ---- integer products scaled to float ---------------------------------------------------

  // Whether v holds one float at run time (rank <= 1): a one-element float constant, the
  // scale output of a DynamicQuantizeLinear, or a Mul of two such values.
  bool single_float(const std::string& v, int depth = 0) const {
    if (v.empty() || depth > 2) return false;
    if (const Tensor* t = constant(v))
      return t->dtype() == DataType::kFloat && t->numel() == 1 && t->rank() <= 1;
    auto it = producer_.find(v);
    if (it == producer_.end()) return false;
    const Node& n = g_.nodes[it->second];
    if (is_op(n, "DynamicQuantizeLinear")) return n.outputs.size() > 1 && n.outputs[1] == v;
    return is_op(n, "Mul") && n.inputs.size() == 2 && single_float(n.inputs[0], depth + 1) &&
           single_float(n.inputs[1], depth + 1);
  }

  // The shape v has at run time when it is a constant or a Reshape to a constant shape of
  // positive sizes and at most one -1 (left as -1: any size there); false otherwise.
  bool known_shape(const std::string& v, Shape& s) const {
    if (const Tensor* t = constant(v)) {
      s = t->shape();
      return true;
    }
    auto it = producer_.find(v);
    if (it == producer_.end()) return false;
    const Node& n = g_.nodes[it->second];
    if (!is_op(n, "Reshape") || n.inputs.size() != 2) return false;
    const Tensor* t = constant(n.inputs[1]);
    if (!t || t->dtype() != DataType::kInt64 || t->rank() != 1) return false;
    s.assign(t->data<int64_t>(), t->data<int64_t>() + t->numel());
    int unknown = 0;
    for (int64_t d : s) {
      if (d == 0 || d < -1) return false;
      unknown += d == -1;
    }
    return unknown <= 1;
  }

  // Whether a value of shape s broadcast against a rank-r result gives one value per index
  // of axis `axis` (size n) and changes nothing else: right-aligned, n (or -1, which the
  // kernel checks) at that axis, 1 at every other one.
  static bool along_axis(const Shape& s, size_t r, size_t axis, int64_t n) {
    if (s.size() > r || s.size() + axis < r) return false;
    for (size_t d = 0; d < s.size(); ++d) {
      const bool at = d + r - s.size() == axis;
      if (!(at ? s[d] == n || s[d] == -1 : s[d] == 1)) return false;
    }
    return true;
  }

  // The sole reader k of v when it is a Cast to float.
  int cast_to_float(const std::string& v) const {
    const int k = sole_reader(v);
    if (k < 0 || !is_op(g_.nodes[k], "Cast") || g_.nodes[k].inputs.size() != 1 ||
        g_.nodes[k].outputs.size() != 1)
      return -1;
    const Attribute* to = g_.nodes[k].find_attr("to");
    return to && to->type == AttrType::kInt && to->i == 1 ? k : -1;
  }

  void fuse_integer_to_float() {
    index();
    bool ms_domain = false;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_[i]) continue;
      const Node& q = g_.nodes[i];
      const bool conv = is_op(q, "ConvInteger"), mm = is_op(q, "MatMulInteger");
      if ((!conv && !mm) || q.outputs.size() != 1 || q.inputs.size() < 2 || q.inputs.size() > 4)
        continue;
      const Tensor* w = constant(q.inputs[1]);
      if (!w || (conv && w->rank() < 3) || (mm && w->rank() != 2)) continue;
      std::vector<int> gone;
      std::string cur = q.outputs[0], ibias, fbias;
      int k = sole_reader(cur);
      Shape bs;
      if (conv && is_binary(k, "Add")) {
        const std::string z = other_input(g_.nodes[k], cur);
        if (!z.empty() && known_shape(z, bs) && along_axis(bs, w->rank(), 1, w->dim(0))) {
          ibias = z;
          gone.push_back(k);
          cur = g_.nodes[k].outputs[0];
        }
      }
      k = cast_to_float(cur);
      if (k < 0) continue;
      gone.push_back(k);
      cur = g_.nodes[k].outputs[0];
      k = sole_reader(cur);
      if (!is_binary(k, "Mul")) continue;
      const std::string scale = other_input(g_.nodes[k], cur);
      if (!single_float(scale)) continue;
      gone.push_back(k);
      cur = g_.nodes[k].outputs[0];
      if (mm) {
        k = sole_reader(cur);
        if (is_binary(k, "Add")) {
          const std::string z = other_input(g_.nodes[k], cur);
          const Tensor* b = constant(z);
          if (b && b->dtype() == DataType::kFloat && b->rank() == 1 && b->dim(0) == w->dim(1)) {
            fbias = z;
            gone.push_back(k);
            cur = g_.nodes[k].outputs[0];
          }
        }
      }
      Activation act;
      if (conv) {
        k = sole_reader(cur);
        act = activation(k);
        int sig = -1;
        const int mul = act.name.empty() ? silu(cur, sig) : -1;
        if (mul >= 0) {
          act.name = "Silu";
          gone.push_back(sig);
          gone.push_back(mul);
          cur = g_.nodes[mul].outputs[0];
        } else if (!act.name.empty()) {
          gone.push_back(k);
          cur = g_.nodes[k].outputs[0];
        }
      }
      Node f;
      f.name = q.name;
      f.outputs = {cur};
      std::vector<std::string> in = q.inputs;
      in.resize(4);
      if (conv) {
        f.op_type = "ConvIntegerToFloat";
        f.domain = kDomain;
        f.inputs = {in[0], in[1], in[2], in[3], ibias, scale};
        f.attributes = q.attributes;
        if (!act.name.empty()) f.attributes.push_back(string_attr("activation", act.name));
        if (!act.params.empty())
          f.attributes.push_back(floats_attr("activation_params", act.params));
        used_domain_ = true;
      } else {
        Tensor one = new_constant(DataType::kFloat, Shape{});
        *one.data<float>() = 1.0f;
        const std::string oname = unique_name((q.name.empty() ? cur : q.name) + "_b_scale");
        g_.initializers.emplace_back(oname, one);
        f.op_type = "MatMulIntegerToFloat";
        f.domain = "com.microsoft";
        f.inputs = {in[0], in[1], scale, oname, in[2], in[3]};
        if (!fbias.empty()) f.inputs.push_back(fbias);
        ms_domain = true;
      }
      for (int d : gone) dead_[d] = 1;
      g_.nodes[i] = std::move(f);
      index();
    }
    compact();
    if (ms_domain) {
      bool have = false;
      for (const OpsetImport& o : m_.opset_imports) have = have || o.domain == "com.microsoft";
      if (!have) m_.opset_imports.push_back(OpsetImport{"com.microsoft", 1});
    }
  }

  // ---- bookkeeping ----------------------------------------------------------------------

  void compact() {
    std::vector<Node> kept;
    kept.reserve(g_.nodes.size());
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (i >= dead_.size() || !dead_[i]) kept.push_back(std::move(g_.nodes[i]));
    g_.nodes = std::move(kept);
    dead_.assign(g_.nodes.size(), 0);
  }

  // Removes the nodes none of whose outputs reaches a graph output, directly, through other
  // nodes or through what a subgraph reads (ONNX nodes have no side effects).
  void eliminate_dead_nodes() {
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
  bool well_formed() const {
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

  void finish() {
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

  Model& m_;
  Graph& g_;
  std::unordered_map<std::string, int> producer_;
  std::unordered_map<std::string, std::vector<int>> readers_;
  std::unordered_map<std::string, const Tensor*> constants_;
  std::unordered_set<std::string> pinned_;  // graph outputs and values subgraphs read
  std::unordered_set<std::string> names_;   // every value name, for new initializers
  std::vector<char> dead_;
  bool used_domain_ = false;
  int level_ = 1;
};

}  // namespace

void optimize_graph(Model& model, int level) {
  if (level < 1) return;
  Optimizer(model, level).run();
}

}  // namespace ortlite
