// The pass object of the load-time graph optimizer (optimizer.cc), shared by the files
// that hold its rewrites: optimizer.cc (the pass order, the graph index, dead nodes and
// the final clean-up), optimizer_fold.cc (per-channel affine ops and BatchNormalization
// into Conv, no-op Casts, Transposes pushed down), optimizer_fuse.cc (GELU, layer norms,
// FusedConv, FusedExpandDepthwise, FusedMatMul / FusedGemm) and optimizer_quant.cc (QDQ
// groups, integer products scaled to float). Internal to src/graph.
#pragma once

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
namespace opt {

constexpr const char* kDomain = "com.ortlite";

inline bool is_op(const Node& n, const char* op) {
  return n.op_type == op && default_domain(n.domain);
}

// A tensor in memory of its own, marked constant like the model's initializers (so a
// binding never hands it out without a copy).
inline Tensor new_constant(DataType dtype, const Shape& shape) {
  const size_t bytes = static_cast<size_t>(shape_size(shape)) * dtype_size(dtype);
  void* p = ::operator new (bytes == 0 ? 1 : bytes, std::align_val_t{64});
  Buffer* b = Buffer::wrap(p, bytes, BufferKind::kConstant,
                           [p] { ::operator delete (p, std::align_val_t{64}); });
  return Tensor(dtype, shape, BufferPtr::adopt(b));
}

inline Attribute make_int_attr(const char* name, int64_t v) {
  Attribute a;
  a.name = name;
  a.type = AttrType::kInt;
  a.i = v;
  return a;
}
inline Attribute float_attr(const char* name, float v) {
  Attribute a;
  a.name = name;
  a.type = AttrType::kFloat;
  a.f = v;
  return a;
}
inline Attribute string_attr(const char* name, const std::string& v) {
  Attribute a;
  a.name = name;
  a.type = AttrType::kString;
  a.s = v;
  return a;
}
inline Attribute floats_attr(const char* name, const std::vector<float>& v) {
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
  void run();

 private:
  // ---- graph index --------------------------------------------------------------------

  void index();
  const Tensor* constant(const std::string& name) const;
  // Whether `value` is known to have rank 2 or more: a constant, a graph input or value_info
  // of that rank, or the output of a Transpose with such a perm or a Reshape to such a
  // constant shape. False when unknown.
  bool rank_at_least_2(const std::string& value) const;
  int sole_reader(const std::string& value) const;
  bool scalar(const std::string& name, float& v, size_t max_rank = 0) const;
  std::string unique_name(const std::string& base);

  // ---- Per-channel affine ops into Conv --------------------------------------------------

  void fold_conv_affine();

  // ---- BatchNormalization into Conv ------------------------------------------------------

  void fold_batch_norms();

  // ---- Casts to the type their input has --------------------------------------------------

  void eliminate_noop_casts();
  void expand_cast_likes();

  // ---- Transposes pushed down and cancelled --------------------------------------------

  static bool transparent_unary(const Node& n);
  static bool transparent_binary(const Node& n);
  static bool perm_of(const Node& n, std::vector<int64_t>& perm);
  bool untransposed_constant(const std::string& name, const std::vector<int64_t>& perm,
                             std::string& out);
  bool compose_into_readers(size_t i, const std::vector<int64_t>& perm);
  void push_transposes();

  // ---- GELU -----------------------------------------------------------------------------

  static std::string other_input(const Node& n, const std::string& v);
  bool is_binary(int k, const char* op) const;
  bool half_x_times(const std::string& a, const std::string& x, std::vector<int>& nodes,
                    std::string& out) const;
  void fuse_gelu();
  void fuse_fast_gelu();

  // ---- LayerNormalization ---------------------------------------------------------------

  bool mean_over_last_axis(int k) const;
  void fuse_layer_norms();

  // ---- activations ----------------------------------------------------------------------

  Activation activation(int k) const;
  int silu(const std::string& v, int& sig) const;
  int hard_swish_chain(const std::string& v, std::vector<int>& nodes) const;
  Activation absorb_activation(std::string& cur, std::vector<int>& gone) const;

  // ---- Conv -----------------------------------------------------------------------------

  void fuse_convs();

  // ---- 1x1 Conv + depthwise Conv ---------------------------------------------------------

  const Tensor* plain_conv(int k) const;
  static bool ints_all(const Node& n, const char* name, int64_t v);
  static int64_t int_attr(const Node& n, const char* name, int64_t def);
  void fuse_expand_depthwise();

  // ---- MatMul / Gemm --------------------------------------------------------------------

  void fuse_matmuls();
  void fuse_gemms();

  // ---- QDQ groups to QLinearConv / QLinearMatMul ------------------------------------------

  int dequantize_of(const std::string& v) const;
  bool single_const(const std::string& v) const;
  static int64_t axis_attr(const Node& n, int64_t dflt);
  void fuse_qdq();
  bool quantize_per_tensor(int k) const;
  int dequantize_per_tensor(const std::string& v) const;
  bool same_const(const std::string& a, const std::string& b) const;
  void fuse_qdq_ops();
  static bool is_int8(DataType t) { return t == DataType::kInt8 || t == DataType::kUInt8; }

  // ---- integer products scaled to float ---------------------------------------------------

  bool single_float(const std::string& v, int depth = 0) const;
  bool known_shape(const std::string& v, Shape& s) const;
  static bool along_axis(const Shape& s, size_t r, size_t axis, int64_t n);
  int cast_to_float(const std::string& v) const;
  void fuse_integer_to_float();

  // ---- MatMulNBits + Add -------------------------------------------------------------------

  void fuse_matmul_nbits_bias();

  // ---- bookkeeping ----------------------------------------------------------------------

  void compact();
  // Adds the com.microsoft opset import (version 1) when the model has none: after a rewrite
  // wrote one of that domain's nodes.
  void import_com_microsoft();
  void eliminate_dead_nodes();
  bool well_formed() const;
  void finish();

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

}  // namespace opt
}  // namespace ortlite
