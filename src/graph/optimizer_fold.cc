// Folds of the load-time optimizer (optimizer_internal.h): per-channel affine ops and
// BatchNormalization into Conv, Casts to the type their input has, Transposes pushed
// down and cancelled.
#include "graph/optimizer_internal.h"

namespace ortlite {
namespace opt {

// ---- Per-channel affine ops into Conv --------------------------------------------------

// A Conv (constant float W, constant or no B) whose output only an Add, Sub, Mul or Div
// with a constant reads, the constant a scalar or one value per output channel ([M, 1..]
// or [1, M, 1..]), takes that op into W and B: a normalization written as separate nodes
// (an NHWC export's Add bias, Sub mean, Mul scale, Add beta) costs one pass over the output
// per op otherwise. Repeats down the chain.
void Optimizer::fold_conv_affine() {
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
        const int64_t axis = static_cast<int64_t>(c->rank()) - static_cast<int64_t>(W->rank()) + 1;
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

void Optimizer::fold_batch_norms() {
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
      ok =
          ok && p[k] && p[k]->dtype() == DataType::kFloat && p[k]->rank() == 1 && p[k]->dim(0) == M;
    }
    if (!ok) continue;
    const float *scale = p[0]->data<float>(), *beta = p[1]->data<float>(),
                *mean = p[2]->data<float>(), *var = p[3]->data<float>();
    std::vector<float> ws(static_cast<size_t>(M));
    Tensor B2 = new_constant(DataType::kFloat, {M});
    for (int64_t m = 0; m < M; ++m) {
      const double s = static_cast<double>(scale[m]) / std::sqrt(static_cast<double>(var[m]) + eps);
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
void Optimizer::eliminate_noop_casts() {
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
    if (!is_op(n, "Cast") || n.inputs.size() != 1 || n.outputs.size() != 1 || n.inputs[0].empty() ||
        n.outputs[0].empty() || pinned_.count(n.outputs[0]))
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

// ---- CastLike as Cast -----------------------------------------------------------------

// CastLike(x, like) whose `like` has a known element type (not one of the narrow float8 /
// int4 / float4 / int2 types) becomes Cast(x, to = that type)
// (saturate kept), as onnxruntime expands it (CastLike is a function of Cast): the model
// written by optimized_model_filepath then has onnxruntime's Cast. It runs after
// eliminate_noop_casts, so a CastLike to x's own type stays a (copying) Cast, as in
// onnxruntime.
void Optimizer::expand_cast_likes() {
  if (!well_formed()) return;
  std::vector<int> order;
  if (!topological_order(g_, order)) return;
  std::unordered_map<std::string, DataType> types;
  bool typed = false;
  for (int i : order) {
    Node& n = g_.nodes[static_cast<size_t>(i)];
    if (!is_op(n, "CastLike") || n.inputs.size() != 2 || n.inputs[1].empty() ||
        n.outputs.size() != 1)
      continue;
    if (!typed) {
      types = infer_elem_types(g_, order);
      typed = true;
    }
    auto it = types.find(n.inputs[1]);
    // Narrow targets stay CastLike: its kernel names the node and input a narrow type
    // used before its opset refers to.
    if (it == types.end() || it->second == DataType::kUndefined || dtype_is_narrow(it->second))
      continue;
    n.op_type = "Cast";
    n.inputs.pop_back();
    std::vector<Attribute> attrs{make_int_attr("to", static_cast<int64_t>(it->second))};
    for (const Attribute& a : n.attributes)
      if (a.name == "saturate") attrs.push_back(a);
    n.attributes = std::move(attrs);
  }
}

// ---- Transposes pushed down and cancelled --------------------------------------------

// A model exported from an NHWC framework wraps every Conv in a Transpose to NCHW and one
// back, with the bias, normalization and activation in NHWC between them. A Transpose read
// only by an elementwise node moves below it (a constant operand is transposed once,
// here, by the inverse permutation; an operand that is the same Transpose of another value
// is replaced by that value), and two Transposes in a row become one, or none when they
// compose to the identity. Between two Convs the pair then meets and vanishes, and the
// Conv's bias and activation can be fused.
bool Optimizer::transparent_unary(const Node& n) {
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

bool Optimizer::transparent_binary(const Node& n) {
  static const char* const kOps[] = {"Add", "Sub", "Mul", "Div", "Pow", "PRelu"};
  if (!default_domain(n.domain) || n.outputs.size() != 1 || n.inputs.size() != 2) return false;
  for (const char* op : kOps)
    if (n.op_type == op) return true;
  return false;
}

// The permutation of a Transpose node with an explicit, valid perm attribute.
bool Optimizer::perm_of(const Node& n, std::vector<int64_t>& perm) {
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
bool Optimizer::untransposed_constant(const std::string& name, const std::vector<int64_t>& perm,
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
bool Optimizer::compose_into_readers(size_t i, const std::vector<int64_t>& perm) {
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

void Optimizer::push_transposes() {
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

}  // namespace opt
}  // namespace ortlite
