// Quantized fusions of the load-time optimizer (optimizer_internal.h): QDQ groups to
// QLinearConv / QLinearMatMul, integer products scaled back to float, the bias Add after a
// MatMulNBits.
#include "graph/optimizer_internal.h"

namespace ortlite {
namespace opt {

// ---- QDQ groups to QLinearConv / QLinearMatMul ------------------------------------------

// The DequantizeLinear producing v: per-tensor or per-axis (`axis` as given), no blocks,
// three inputs (the zero point present); -1 otherwise.
int Optimizer::dequantize_of(const std::string& v) const {
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
bool Optimizer::single_const(const std::string& v) const {
  const Tensor* t = constant(v);
  return t && t->numel() == 1;
}

int64_t Optimizer::axis_attr(const Node& n, int64_t dflt) {
  const Attribute* a = n.find_attr("axis");
  return a && a->type == AttrType::kInt ? a->i : dflt;
}

void Optimizer::fuse_qdq() {
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

// Whether node k is a QuantizeLinear to uint8 or int8 with per-tensor constant parameters
// (zero point given), as the QDQ groups end.
bool Optimizer::quantize_per_tensor(int k) const {
  if (k < 0) return false;
  const Node& Q = g_.nodes[k];
  if (!is_op(Q, "QuantizeLinear") || Q.inputs.size() != 3 || Q.inputs[2].empty() ||
      Q.outputs.size() != 1 || !single_const(Q.inputs[1]) || !single_const(Q.inputs[2]))
    return false;
  const Attribute* qs = Q.find_attr("saturate");
  const Attribute* qd = Q.find_attr("output_dtype");
  const Attribute* qb = Q.find_attr("block_size");
  if ((qs && qs->i != 1) || (qd && qd->i != 0) || (qb && qb->i != 0)) return false;
  return is_int8(constant(Q.inputs[2])->dtype());
}

// The per-tensor DequantizeLinear (constant scale and zero point, uint8 or int8) producing v;
// -1 otherwise.
int Optimizer::dequantize_per_tensor(const std::string& v) const {
  const int d = dequantize_of(v);
  if (d < 0) return -1;
  const Node& n = g_.nodes[d];
  if (!single_const(n.inputs[1]) || !single_const(n.inputs[2])) return -1;
  const Tensor* z = constant(n.inputs[2]);
  return is_int8(z->dtype()) ? d : -1;
}

// Whether two one-value constants hold the same bytes and type.
bool Optimizer::same_const(const std::string& a, const std::string& b) const {
  const Tensor* x = constant(a);
  const Tensor* y = constant(b);
  return x && y && x->dtype() == y->dtype() && x->numel() == 1 && y->numel() == 1 &&
         std::memcmp(x->raw_data(), y->raw_data(), dtype_size(x->dtype())) == 0;
}

// The other QDQ groups onnxruntime's QDQ transformer runs as integer operators, with
// per-tensor uint8 / int8 parameters (level >= 2, after fuse_qdq):
//  - DequantizeLinear(a), DequantizeLinear(b) -> Add / Mul -> QuantizeLinear: com.microsoft
//    QLinearAdd / QLinearMul (all three of one type), whose arithmetic is onnxruntime's;
//  - DequantizeLinear -> GlobalAveragePool -> QuantizeLinear: QLinearGlobalAveragePool;
//  - DequantizeLinear -> Flatten / Reshape / Transpose / Squeeze / Unsqueeze -> QuantizeLinear
//    with the same scale and zero point: the operator on the quantized tensor (exact: the
//    dequantized values quantize back to themselves).
void Optimizer::fuse_qdq_ops() {
  index();
  bool ms_domain = false;
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if (dead_[i]) continue;
    const Node& op = g_.nodes[i];
    if (op.outputs.size() != 1 || op.inputs.empty()) continue;
    const bool binary =
        is_binary(static_cast<int>(i), "Add") || is_binary(static_cast<int>(i), "Mul");
    const bool gap = is_op(op, "GlobalAveragePool") && op.inputs.size() == 1;
    const bool move = (is_op(op, "Flatten") || is_op(op, "Reshape") || is_op(op, "Transpose") ||
                       is_op(op, "Squeeze") || is_op(op, "Unsqueeze"));
    if (!binary && !gap && !move) continue;
    const int q = sole_reader(op.outputs[0]);
    if (!quantize_per_tensor(q)) continue;
    const Node& Q = g_.nodes[q];
    const DataType qt = constant(Q.inputs[2])->dtype();
    const int da = dequantize_per_tensor(op.inputs[0]);
    if (da < 0 || constant(g_.nodes[da].inputs[2])->dtype() != qt) continue;
    const Node& A = g_.nodes[da];
    Node f;
    f.name = op.name;
    f.outputs = Q.outputs;
    if (binary) {
      const int db = dequantize_per_tensor(op.inputs[1]);
      if (db < 0 || constant(g_.nodes[db].inputs[2])->dtype() != qt) continue;
      const Node& B = g_.nodes[db];
      f.op_type = is_op(op, "Add") ? "QLinearAdd" : "QLinearMul";
      f.domain = "com.microsoft";
      f.inputs = {A.inputs[0], A.inputs[1], A.inputs[2], B.inputs[0],
                  B.inputs[1], B.inputs[2], Q.inputs[1], Q.inputs[2]};
      ms_domain = true;
    } else if (gap) {
      f.op_type = "QLinearGlobalAveragePool";
      f.domain = "com.microsoft";
      f.inputs = {A.inputs[0], A.inputs[1], A.inputs[2], Q.inputs[1], Q.inputs[2]};
      f.attributes.push_back(make_int_attr("channels_last", 0));
      ms_domain = true;
    } else {
      if (!same_const(A.inputs[1], Q.inputs[1]) || !same_const(A.inputs[2], Q.inputs[2])) continue;
      f = op;
      f.inputs[0] = A.inputs[0];
      f.outputs = Q.outputs;
    }
    dead_[q] = 1;
    g_.nodes[i] = std::move(f);
    index();
  }
  compact();
  if (ms_domain) import_com_microsoft();
}

// ---- integer products scaled to float ---------------------------------------------------

// Whether v holds one float at run time (rank <= 1): a one-element float constant, the
// scale output of a DynamicQuantizeLinear, or a Mul of two such values.
bool Optimizer::single_float(const std::string& v, int depth) const {
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
bool Optimizer::known_shape(const std::string& v, Shape& s) const {
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
bool Optimizer::along_axis(const Shape& s, size_t r, size_t axis, int64_t n) {
  if (s.size() > r || s.size() + axis < r) return false;
  for (size_t d = 0; d < s.size(); ++d) {
    const bool at = d + r - s.size() == axis;
    if (!(at ? s[d] == n || s[d] == -1 : s[d] == 1)) return false;
  }
  return true;
}

// The sole reader k of v when it is a Cast to float.
int Optimizer::cast_to_float(const std::string& v) const {
  const int k = sole_reader(v);
  if (k < 0 || !is_op(g_.nodes[k], "Cast") || g_.nodes[k].inputs.size() != 1 ||
      g_.nodes[k].outputs.size() != 1)
    return -1;
  const Attribute* to = g_.nodes[k].find_attr("to");
  return to && to->type == AttrType::kInt && to->i == 1 ? k : -1;
}

void Optimizer::fuse_integer_to_float() {
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
    if (conv) act = absorb_activation(cur, gone);
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
      if (!act.params.empty()) f.attributes.push_back(floats_attr("activation_params", act.params));
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
  if (ms_domain) import_com_microsoft();
}

// ---- MatMulNBits + Add -------------------------------------------------------------------

// MatMulNBits without a bias whose output only an Add of a constant [N] of the scales'
// type reads takes that constant as its bias input (onnxruntime's MatMulNBitsFusion): the
// kernel adds it to each finished sum, as the Add did, without another pass over Y.
void Optimizer::fuse_matmul_nbits_bias() {
  index();
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if (dead_[i]) continue;
    const Node& mm = g_.nodes[i];
    if (mm.op_type != "MatMulNBits" || mm.domain != "com.microsoft" || mm.outputs.size() != 1 ||
        mm.inputs.size() < 3 || (mm.inputs.size() > 5 && !mm.inputs[5].empty()) ||
        mm.inputs.size() > 6)
      continue;
    const Attribute* na = mm.find_attr("N");
    const Tensor* scales = constant(mm.inputs[2]);
    if (!na || na->type != AttrType::kInt || !scales) continue;
    const int k = sole_reader(mm.outputs[0]);
    if (!is_binary(k, "Add")) continue;
    const std::string o = other_input(g_.nodes[k], mm.outputs[0]);
    const Tensor* b = o.empty() ? nullptr : constant(o);
    if (!b || b->dtype() != scales->dtype() || b->rank() != 1 || b->dim(0) != na->i) continue;
    Node f = mm;
    f.inputs.resize(6);
    f.inputs[5] = o;
    f.outputs = g_.nodes[k].outputs;
    dead_[k] = 1;
    g_.nodes[i] = std::move(f);
    index();
  }
  compact();
}

}  // namespace opt
}  // namespace ortlite
