// Fusions of the load-time optimizer (optimizer_internal.h): GELU, layer norms,
// FusedConv, FusedExpandDepthwise, FusedMatMul and FusedGemm.
#include "graph/optimizer_internal.h"

#include <cmath>

namespace ortlite {
namespace opt {

// ---- GELU -----------------------------------------------------------------------------

// The other input of binary node n (the one that is not `v`), or "" when both are `v`.
std::string Optimizer::other_input(const Node& n, const std::string& v) {
  if (n.inputs.size() != 2) return "";
  if (n.inputs[0] == v && n.inputs[1] != v) return n.inputs[1];
  if (n.inputs[1] == v && n.inputs[0] != v) return n.inputs[0];
  return "";
}

bool Optimizer::is_binary(int k, const char* op) const {
  return k >= 0 && is_op(g_.nodes[k], op) && g_.nodes[k].inputs.size() == 2 &&
         g_.nodes[k].outputs.size() == 1;
}

// x * a * 0.5 in one of three orders, read from a = 1 + erf(..) or 1 + tanh(..): its nodes
// are added to `nodes` and `out` becomes its output; false when it is not there.
bool Optimizer::half_x_times(const std::string& a, const std::string& x, std::vector<int>& nodes,
                             std::string& out) const {
  float c = 0.f;
  const int m1 = sole_reader(a);
  if (!is_binary(m1, "Mul")) return false;
  const std::string m1o = g_.nodes[m1].outputs[0];
  const std::string f1 = other_input(g_.nodes[m1], a);
  nodes.push_back(m1);
  if (f1 == x) {  // (x * a) * 0.5
    const int m2 = sole_reader(m1o);
    if (!is_binary(m2, "Mul") || !scalar(other_input(g_.nodes[m2], m1o), c, 1) || c != 0.5f)
      return false;
    nodes.push_back(m2);
    out = g_.nodes[m2].outputs[0];
  } else if (scalar(f1, c, 1) && c == 0.5f) {  // x * (a * 0.5)
    const int m2 = sole_reader(m1o);
    if (!is_binary(m2, "Mul") || other_input(g_.nodes[m2], m1o) != x) return false;
    nodes.push_back(m2);
    out = g_.nodes[m2].outputs[0];
  } else {  // (x * 0.5) * a
    auto ph = producer_.find(f1);
    if (ph == producer_.end() || sole_reader(f1) != m1) return false;
    const int h = ph->second;
    if (!is_binary(h, "Mul") || other_input(g_.nodes[h], x).empty() ||
        !scalar(other_input(g_.nodes[h], x), c, 1) || c != 0.5f)
      return false;
    nodes.push_back(h);
    out = m1o;
  }
  return true;
}

void Optimizer::fuse_gelu() {
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
    if (is_binary(div, "Div") && scalar(dn.inputs[1], c, 1) && std::fabs(c - 1.41421356f) < 1e-4f) {
      x = dn.inputs[0];
    } else if (is_binary(div, "Mul")) {
      for (int k = 0; k < 2 && x.empty(); ++k)
        if (scalar(dn.inputs[k], c, 1) && std::fabs(c - 0.70710678f) < 1e-5f) x = dn.inputs[1 - k];
    }
    if (x.empty()) continue;
    // a = erf + 1.
    const int add = sole_reader(erf.outputs[0]);
    if (!is_binary(add, "Add")) continue;
    const std::string one = other_input(g_.nodes[add], erf.outputs[0]);
    if (!scalar(one, c, 1) || c != 1.f) continue;
    std::vector<int> nodes = {div, static_cast<int>(i), add};
    std::string out;
    if (!half_x_times(g_.nodes[add].outputs[0], x, nodes, out)) continue;
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

// The tanh approximation exporters write for GPT-2's gelu_new,
//   0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
// (x^3 as Pow(x, 3), x * x * x or x * (x * x); the outer product in any of the erf form's
// orders), becomes com.microsoft FastGelu(x), as onnxruntime's FastGeluFusion does.
void Optimizer::fuse_fast_gelu() {
  index();
  bool fused = false;
  auto is_const = [&](const std::string& v, float want, float tol) {
    float c = 0.f;
    return scalar(v, c, 1) && std::fabs(c - want) <= tol;
  };
  // The node producing v when v is read by it alone.
  auto only_from = [&](const std::string& v, int reader) {
    auto it = producer_.find(v);
    return it != producer_.end() && sole_reader(v) == reader ? it->second : -1;
  };
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    const int ti = static_cast<int>(i);
    if (dead_[i] || !is_op(g_.nodes[i], "Tanh") || g_.nodes[i].inputs.size() != 1 ||
        g_.nodes[i].outputs.size() != 1)
      continue;
    // Tanh(u * sqrt(2 / pi)).
    const int ms = only_from(g_.nodes[i].inputs[0], ti);
    if (!is_binary(ms, "Mul")) continue;
    std::string u;
    for (int k = 0; k < 2 && u.empty(); ++k)
      if (is_const(g_.nodes[ms].inputs[k], 0.7978845608f, 1e-4f)) u = g_.nodes[ms].inputs[1 - k];
    // u = x + 0.044715 x^3.
    const int ua = u.empty() ? -1 : only_from(u, ms);
    if (!is_binary(ua, "Add")) continue;
    std::string x;
    std::vector<int> nodes = {ms, ua};
    for (int k = 0; k < 2 && x.empty(); ++k) {
      const std::string cand = g_.nodes[ua].inputs[1 - k];
      const int mc = only_from(g_.nodes[ua].inputs[k], ua);
      if (!is_binary(mc, "Mul")) continue;
      for (int j = 0; j < 2 && x.empty(); ++j) {
        if (!is_const(g_.nodes[mc].inputs[j], 0.044715f, 1e-6f)) continue;
        const int cube = only_from(g_.nodes[mc].inputs[1 - j], mc);
        if (cube < 0 || g_.nodes[cube].outputs.size() != 1) continue;
        const Node& cn = g_.nodes[cube];
        bool ok = false;
        std::vector<int> extra = {mc, cube};
        if (is_binary(cube, "Pow")) {
          ok = cn.inputs[0] == cand && is_const(cn.inputs[1], 3.0f, 0.f);
        } else if (is_binary(cube, "Mul")) {
          // x * (x * x) or (x * x) * x.
          for (int q = 0; q < 2 && !ok; ++q) {
            if (cn.inputs[q] != cand) continue;
            const int sq = only_from(cn.inputs[1 - q], cube);
            ok = is_binary(sq, "Mul") && g_.nodes[sq].inputs[0] == cand &&
                 g_.nodes[sq].inputs[1] == cand;
            if (ok) extra.push_back(sq);
          }
        }
        if (ok) {
          x = cand;
          nodes.insert(nodes.end(), extra.begin(), extra.end());
        }
      }
    }
    if (x.empty()) continue;
    // a = tanh + 1, then x * a * 0.5.
    const int add = sole_reader(g_.nodes[i].outputs[0]);
    if (!is_binary(add, "Add") ||
        !is_const(other_input(g_.nodes[add], g_.nodes[i].outputs[0]), 1.f, 0.f))
      continue;
    nodes.push_back(add);
    std::string out;
    if (!half_x_times(g_.nodes[add].outputs[0], x, nodes, out)) continue;
    Node gelu;
    gelu.name = g_.nodes[i].name;
    gelu.op_type = "FastGelu";
    gelu.domain = "com.microsoft";
    gelu.inputs = {x};
    gelu.outputs = {out};
    for (int k : nodes) dead_[k] = 1;
    g_.nodes[i] = std::move(gelu);
    fused = true;
    index();
  }
  compact();
  if (fused) import_com_microsoft();
}

// ---- LayerNormalization ---------------------------------------------------------------

// Whether node k is a ReduceMean over the last axis only, keeping it (axes [-1], as an
// attribute or, from opset 18, a constant input).
bool Optimizer::mean_over_last_axis(int k) const {
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
void Optimizer::fuse_layer_norms() {
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
Activation Optimizer::activation(int k) const {
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
int Optimizer::silu(const std::string& v, int& sig) const {
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

// The Div of (v * Clip(v + 3, 0, 6)) / 6 when v is read by exactly that Add and that Mul,
// and each value after it by the next node only (HardSwish as Paddle exports write it:
// PP-OCR's detection, recognition and direction models); its four nodes are added to
// `nodes`. -1 otherwise. The constants are float scalars (rank 1 only where v is of rank 2
// or more, so that the broadcast changes no shape).
int Optimizer::hard_swish_chain(const std::string& v, std::vector<int>& nodes) const {
  if (v.empty() || pinned_.count(v)) return -1;
  auto it = readers_.find(v);
  if (it == readers_.end() || it->second.size() != 2 || it->second[0] == it->second[1]) return -1;
  const size_t max_rank = rank_at_least_2(v) ? 1 : 0;
  auto is_const = [&](const std::string& name, float want) {
    float c = 0.f;
    return scalar(name, c, max_rank) && c == want;
  };
  for (int pass = 0; pass < 2; ++pass) {
    const int a = it->second[pass], m = it->second[1 - pass];
    if (dead_[a] || dead_[m] || !is_binary(a, "Add") || !is_binary(m, "Mul")) continue;
    if (!is_const(other_input(g_.nodes[a], v), 3.f)) continue;
    const int c = sole_reader(g_.nodes[a].outputs[0]);
    const Activation clip = activation(c);
    if (clip.name != "Clip" || g_.nodes[c].inputs[0] != g_.nodes[a].outputs[0] ||
        clip.params != std::vector<float>{0.f, 6.f})
      continue;
    const std::string& co = g_.nodes[c].outputs[0];
    if (sole_reader(co) != m || other_input(g_.nodes[m], v) != co) continue;
    const int d = sole_reader(g_.nodes[m].outputs[0]);
    if (!is_binary(d, "Div") || g_.nodes[d].inputs[0] != g_.nodes[m].outputs[0] ||
        !is_const(g_.nodes[d].inputs[1], 6.f))
      continue;
    nodes.insert(nodes.end(), {a, c, m, d});
    return d;
  }
  return -1;
}

// The activation, x * Sigmoid(x) as Silu, or HardSwish's four nodes as HardSwishChain,
// that alone reads `cur`: its nodes are added to `gone` and `cur` becomes its output. An
// empty name when there is none.
Activation Optimizer::absorb_activation(std::string& cur, std::vector<int>& gone) const {
  const int k = sole_reader(cur);
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
  } else {
    const int div = hard_swish_chain(cur, gone);
    if (div >= 0) {
      act.name = "HardSwishChain";
      cur = g_.nodes[div].outputs[0];
    }
  }
  return act;
}

// ---- Conv -----------------------------------------------------------------------------

void Optimizer::fuse_convs() {
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
    const Activation act = absorb_activation(cur, gone);
    if (act.name.empty() && gone.empty()) continue;
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
const Tensor* Optimizer::plain_conv(int k) const {
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

bool Optimizer::ints_all(const Node& n, const char* name, int64_t v) {
  const Attribute* a = n.find_attr(name);
  if (!a) return true;
  if (a->type != AttrType::kInts) return false;
  for (int64_t x : a->ints)
    if (x != v) return false;
  return true;
}

int64_t Optimizer::int_attr(const Node& n, const char* name, int64_t def) {
  const Attribute* a = n.find_attr(name);
  if (!a) return def;
  return a->type == AttrType::kInt ? a->i : -1;
}

void Optimizer::fuse_expand_depthwise() {
  index();
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if (dead_[i]) continue;
    const Tensor* we = plain_conv(static_cast<int>(i));
    if (!we || we->dim(2) != 1 || we->dim(3) != 1) continue;
    const Node& e = g_.nodes[i];
    const Attribute* ap = e.find_attr("auto_pad");
    if (ap && (ap->type != AttrType::kString || (ap->s != "NOTSET" && ap->s != "VALID"))) continue;
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
      if (a.name != "activation" && a.name != "activation_params" && a.name != "w_scale") continue;
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

void Optimizer::fuse_matmuls() {
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
    // A scalar factor: rank 0 keeps any output shape; rank 1 only when an operand is known
    // to have rank 2 or more (the product then has rank >= 1): a constant 2-D B, or
    // attention's per-head operands (Transposes to rank 4).
    const size_t factor_rank =
        b2 || rank_at_least_2(mm.inputs[0]) || rank_at_least_2(mm.inputs[1]) ? 1 : 0;
    // A Div by a scalar becomes the factor 1 / c (onnxruntime's MatMulScaleFusion does the
    // same; the product may differ from the quotient in its last bit: BERT's scores /
    // sqrt(head size)).
    const bool div = is_binary(k, "Div") && g_.nodes[k].inputs[0] == cur &&
                     g_.nodes[k].inputs[1] != cur &&
                     scalar(g_.nodes[k].inputs[1], c, factor_rank) && c != 0.f &&
                     std::isfinite(c) && std::isfinite(1.f / c);
    if (div || (is_binary(k, "Mul") && scalar(other_input(g_.nodes[k], cur), c, factor_rank))) {
      alpha = div ? 1.f / c : c;
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
    const Activation act = is_float ? absorb_activation(cur, gone) : Activation();
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

void Optimizer::fuse_gemms() {
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
    std::string cur = gm.outputs[0];
    std::vector<int> gone;
    const Activation act = absorb_activation(cur, gone);
    if (act.name.empty()) continue;
    Node f = gm;
    f.op_type = "FusedGemm";
    f.domain = kDomain;
    f.outputs = {cur};
    f.attributes.push_back(string_attr("activation", act.name));
    if (!act.params.empty()) f.attributes.push_back(floats_attr("activation_params", act.params));
    for (int d : gone) dead_[d] = 1;
    g_.nodes[i] = std::move(f);
    used_domain_ = true;
    index();
  }
  compact();
}

}  // namespace opt
}  // namespace ortlite
