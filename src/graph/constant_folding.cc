// Constant folding at load (graph_optimization_level >= 1, as onnxruntime's ORT_ENABLE_BASIC).
//
// Which nodes fold: default-domain nodes of the ops in op_kinds() below (deterministic ops
// without subgraphs whose outputs are tensors; random ops, Dropout, control flow, sequence
// and optional ops are not listed) whose explicit inputs are all constants: initializers that
// are not graph inputs (a feed may replace those) and outputs of nodes already folded. A
// Constant node folds too, so what reads it sees an initializer.
//
// Caps, so that loading never allocates without bound: before the kernel runs, the number of
// elements the node will write is bounded from its inputs' shapes and values (op_kinds says
// how) and must be at most kMaxElems; after it runs, its outputs must total at most kMaxBytes.
// The ops that expand a small input into a large constant (Expand, Tile, ConstantOfShape,
// Range) fold only while they write at most max(2 x their inputs' elements, kExpandFloor)
// elements: storing a large broadcast costs memory that running it at each call does not.
//
// A folded output keeps its name and becomes an initializer held in a kConstant buffer: a
// new one when the kernel allocated it, the input's own when the kernel only forwarded it
// (Reshape, Identity over a weight). The binding therefore copies it when it is fetched.
#include "graph/constant_folding.h"

#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <new>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "graph/graph_walk.h"
#include "graph/planner.h"
#include "ortlite/kernel.h"
#include "ortlite/status.h"

namespace ortlite {

namespace {

constexpr int64_t kMaxBytes = int64_t(64) << 20;  // a node's outputs, in total
constexpr int64_t kMaxElems = kMaxBytes / 4;      // bound on the elements, before running
constexpr int64_t kExpandFloor = 65536;           // elements an expanding op may always write
constexpr int64_t kHuge = std::numeric_limits<int64_t>::max();

// How the elements a node writes are bounded before it runs.
enum class Kind {
  kBounded,    // each output has at most as many elements as the inputs together
  kBroadcast,  // elementwise over the inputs' broadcast shape
  kConstant,   // the Constant op: its attribute
  kExpand,
  kTile,
  kConstantOfShape,
  kRange,
  kGather,
  kMatMul,
  kGemm,
  kNonZero,
};

const std::unordered_map<std::string, Kind>& op_kinds() {
  static const std::unordered_map<std::string, Kind> kinds = [] {
    std::unordered_map<std::string, Kind> k;
    for (const char* op : {"Identity",
                           "Reshape",
                           "Flatten",
                           "Squeeze",
                           "Unsqueeze",
                           "Transpose",
                           "Slice",
                           "Concat",
                           "Split",
                           "Shape",
                           "Size",
                           "Cast",
                           "CastLike",
                           "Neg",
                           "Abs",
                           "Sqrt",
                           "Reciprocal",
                           "Exp",
                           "Log",
                           "Floor",
                           "Ceil",
                           "Round",
                           "Sign",
                           "Not",
                           "BitwiseNot",
                           "Relu",
                           "Sigmoid",
                           "Tanh",
                           "Erf",
                           "Sin",
                           "Cos",
                           "Tan",
                           "Asin",
                           "Acos",
                           "Atan",
                           "Sinh",
                           "Cosh",
                           "Asinh",
                           "Acosh",
                           "Atanh",
                           "IsNaN",
                           "IsInf",
                           "Softplus",
                           "Softsign",
                           "LeakyRelu",
                           "Elu",
                           "Selu",
                           "Celu",
                           "HardSigmoid",
                           "HardSwish",
                           "Mish",
                           "Gelu",
                           "ThresholdedRelu",
                           "Shrink",
                           "Clip",
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
                           "ArgMax",
                           "ArgMin",
                           "Softmax",
                           "LogSoftmax",
                           "Hardmax",
                           "CumSum",
                           "DepthToSpace",
                           "SpaceToDepth",
                           "DequantizeLinear",
                           "QuantizeLinear",
                           "Trilu",
                           "GatherElements",
                           "ScatterElements",
                           "ScatterND",
                           "ReverseSequence",
                           "EyeLike",
                           "Compress",
                           "TopK",
                           "Unique"})
      k[op] = Kind::kBounded;
    for (const char* op : {"Add",
                           "Sub",
                           "Mul",
                           "Div",
                           "Pow",
                           "Mod",
                           "Equal",
                           "Less",
                           "Greater",
                           "LessOrEqual",
                           "GreaterOrEqual",
                           "And",
                           "Or",
                           "Xor",
                           "BitShift",
                           "BitwiseAnd",
                           "BitwiseOr",
                           "BitwiseXor",
                           "Where",
                           "Min",
                           "Max",
                           "Sum",
                           "Mean",
                           "PRelu"})
      k[op] = Kind::kBroadcast;
    k["Constant"] = Kind::kConstant;
    k["Expand"] = Kind::kExpand;
    k["Tile"] = Kind::kTile;
    k["ConstantOfShape"] = Kind::kConstantOfShape;
    k["Range"] = Kind::kRange;
    k["Gather"] = Kind::kGather;
    k["MatMul"] = Kind::kMatMul;
    k["Gemm"] = Kind::kGemm;
    k["NonZero"] = Kind::kNonZero;
    return k;
  }();
  return kinds;
}

int64_t mul_sat(int64_t a, int64_t b) {
  int64_t r;
  if (a < 0 || b < 0) return kHuge;
  return __builtin_mul_overflow(a, b, &r) ? kHuge : r;
}

int64_t add_sat(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? kHuge : r;
}

int64_t product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n = mul_sat(n, d);
  return n;
}

// The elements of the broadcast of shapes (the larger dim of each right-aligned axis: an
// upper bound when the shapes do not broadcast, which the kernel then rejects).
int64_t broadcast_elems(const std::vector<const std::vector<int64_t>*>& shapes) {
  size_t rank = 0;
  for (const auto* s : shapes) rank = std::max(rank, s->size());
  std::vector<int64_t> out(rank, 1);
  for (const auto* s : shapes)
    for (size_t k = 0; k < s->size(); ++k) {
      int64_t& o = out[rank - s->size() + k];
      o = std::max(o, (*s)[k]);
    }
  return product(out);
}

// The int64 values of a 1-D shape-like input; false when it is not one.
bool int64_values(const Tensor* t, std::vector<int64_t>& v) {
  if (!t || t->dtype() != DataType::kInt64 || t->rank() > 1) return false;
  v.assign(t->data<int64_t>(), t->data<int64_t>() + t->numel());
  return true;
}

bool scalar_value(const Tensor* t, double& v) {
  if (!t || t->numel() != 1) return false;
  switch (t->dtype()) {
    case DataType::kFloat:
      v = *t->data<float>();
      return true;
    case DataType::kDouble:
      v = *t->data<double>();
      return true;
    case DataType::kInt16:
      v = *t->data<int16_t>();
      return true;
    case DataType::kInt32:
      v = *t->data<int32_t>();
      return true;
    case DataType::kInt64:
      v = static_cast<double>(*t->data<int64_t>());
      return true;
    default:
      return false;
  }
}

int64_t attr_int(const Node& n, const char* name, int64_t dflt) {
  const Attribute* a = n.find_attr(name);
  return a && a->type == AttrType::kInt ? a->i : dflt;
}

// An upper bound on the elements `n` writes, all outputs together (kHuge: unknown).
int64_t elems_written(Kind kind, const Node& n, const std::vector<const Tensor*>& in,
                      int64_t in_elems) {
  auto input = [&](size_t i) { return i < in.size() ? in[i] : nullptr; };
  switch (kind) {
    case Kind::kBounded:
      return mul_sat(std::max<int64_t>(in_elems, 1), static_cast<int64_t>(n.outputs.size()));
    case Kind::kBroadcast: {
      std::vector<const std::vector<int64_t>*> shapes;
      for (const Tensor* t : in)
        if (t) shapes.push_back(&t->shape());
      return broadcast_elems(shapes);
    }
    case Kind::kConstant: {
      for (const Attribute& a : n.attributes) {
        if (a.type == AttrType::kTensor) return a.t.numel();
        if (a.type == AttrType::kFloats) return static_cast<int64_t>(a.floats.size());
        if (a.type == AttrType::kInts) return static_cast<int64_t>(a.ints.size());
        if (a.type == AttrType::kFloat || a.type == AttrType::kInt) return 1;
      }
      return kHuge;  // sparse or string values: left to the Constant kernel at run time
    }
    case Kind::kExpand: {
      std::vector<int64_t> shape;
      if (!input(0) || !int64_values(input(1), shape)) return kHuge;
      return broadcast_elems({&input(0)->shape(), &shape});
    }
    case Kind::kTile: {
      std::vector<int64_t> reps;
      if (!input(0) || !int64_values(input(1), reps)) return kHuge;
      return mul_sat(input(0)->numel(), product(reps));
    }
    case Kind::kConstantOfShape: {
      std::vector<int64_t> shape;
      return int64_values(input(0), shape) ? product(shape) : kHuge;
    }
    case Kind::kRange: {
      double start, limit, delta;
      if (!scalar_value(input(0), start) || !scalar_value(input(1), limit) ||
          !scalar_value(input(2), delta) || delta == 0)
        return kHuge;
      const double count = std::ceil((limit - start) / delta);
      if (!(count < 1e15)) return kHuge;  // also NaN
      return count > 0 ? static_cast<int64_t>(count) : 0;
    }
    case Kind::kGather: {
      const Tensor *data = input(0), *idx = input(1);
      if (!data || !idx || data->rank() == 0) return kHuge;
      int64_t axis = attr_int(n, "axis", 0);
      if (axis < 0) axis += static_cast<int64_t>(data->rank());
      if (axis < 0 || axis >= static_cast<int64_t>(data->rank())) return kHuge;
      int64_t rest = 1;
      for (size_t k = 0; k < data->rank(); ++k)
        if (static_cast<int64_t>(k) != axis) rest = mul_sat(rest, data->dim(k));
      return mul_sat(idx->numel(), rest);
    }
    case Kind::kMatMul: {
      const Tensor *a = input(0), *b = input(1);
      if (!a || !b || a->rank() == 0 || b->rank() == 0) return kHuge;
      const int64_t m = a->rank() >= 2 ? a->dim(a->rank() - 2) : 1;
      const int64_t cols = b->rank() >= 2 ? b->dim(b->rank() - 1) : 1;
      std::vector<int64_t> ba, bb;
      if (a->rank() > 2) ba.assign(a->shape().begin(), a->shape().end() - 2);
      if (b->rank() > 2) bb.assign(b->shape().begin(), b->shape().end() - 2);
      return mul_sat(broadcast_elems({&ba, &bb}), mul_sat(m, cols));
    }
    case Kind::kGemm: {
      const Tensor *a = input(0), *b = input(1);
      if (!a || !b || a->rank() != 2 || b->rank() != 2) return kHuge;
      const int64_t m = attr_int(n, "transA", 0) ? a->dim(1) : a->dim(0);
      const int64_t cols = attr_int(n, "transB", 0) ? b->dim(0) : b->dim(1);
      return mul_sat(m, cols);
    }
    case Kind::kNonZero:
      return input(0) ? mul_sat(input(0)->numel(), std::max<int64_t>(1, input(0)->rank())) : kHuge;
  }
  return kHuge;
}

bool expands(Kind kind) {
  return kind == Kind::kExpand || kind == Kind::kTile || kind == Kind::kConstantOfShape ||
         kind == Kind::kRange;
}

// A copy of `t` in memory of its own, marked constant like the model's initializers.
Tensor constant_copy(const Tensor& t) {
  const size_t bytes = t.nbytes();
  void* p = ::operator new (bytes == 0 ? 1 : bytes, std::align_val_t{64});
  Buffer* b = Buffer::wrap(p, bytes, BufferKind::kConstant,
                           [p] { ::operator delete (p, std::align_val_t{64}); });
  Tensor c(t.dtype(), t.shape(), BufferPtr::adopt(b));
  if (bytes > 0) std::memcpy(c.raw_data(), t.raw_data(), bytes);
  return c;
}

class Folder {
 public:
  // `outer`: the constants of the enclosing graphs, which a subgraph body reads as outer-scope
  // values (nullptr for the main graph).
  Folder(Model& m, Graph& g, const std::unordered_map<std::string, Tensor>* outer, int depth)
      : m_(m), g_(g), depth_(depth) {
    if (outer) outer_ = *outer;
  }

  void run() {
    fold_nodes();
    // Bodies of If / Loop / Scan read this graph's constants (now including what folded) as
    // outer-scope values: an LSTM's gate reordering of weights in an If branch (silero-vad)
    // folds there. The nesting is bounded at load (64 levels); the bound is kept here too.
    if (depth_ >= 64) return;
    for (Node& n : g_.nodes)
      for (Attribute& a : n.attributes) {
        if (a.type == AttrType::kGraph && a.g) Folder(m_, *a.g, &constants_, depth_ + 1).run();
        if (a.type == AttrType::kGraphs)
          for (auto& sub : a.graphs)
            if (sub) Folder(m_, *sub, &constants_, depth_ + 1).run();
      }
  }

 private:
  void fold_nodes() {
    std::unordered_set<std::string> fed;
    for (const ValueInfo& vi : g_.inputs) {
      fed.insert(vi.name);
      taken_.insert(vi.name);
    }
    // A body's own inputs shadow outer names.
    for (auto& [name, t] : outer_)
      if (!fed.count(name)) constants_.emplace(name, t);
    for (const auto& init : g_.initializers) {
      taken_.insert(init.first);
      if (!fed.count(init.first)) constants_[init.first] = init.second;
    }
    std::unordered_map<std::string, std::vector<size_t>> readers;
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      for (const std::string& in : g_.nodes[i].inputs)
        if (!in.empty()) readers[in].push_back(i);

    // A worklist in file order: a node that folds queues its readers again.
    std::vector<char> folded(g_.nodes.size(), 0), queued(g_.nodes.size(), 1);
    std::deque<size_t> work;
    for (size_t i = 0; i < g_.nodes.size(); ++i) work.push_back(i);
    std::vector<std::pair<std::string, Tensor>> added;
    while (!work.empty()) {
      const size_t i = work.front();
      work.pop_front();
      queued[i] = 0;
      if (folded[i] || !fold(g_.nodes[i], added)) continue;
      folded[i] = 1;
      for (const std::string& o : g_.nodes[i].outputs) {
        auto it = readers.find(o);
        if (o.empty() || it == readers.end()) continue;
        for (size_t r : it->second)
          if (!folded[r] && !queued[r]) {
            queued[r] = 1;
            work.push_back(r);
          }
      }
    }
    if (added.empty()) return;
    std::vector<Node> kept;
    kept.reserve(g_.nodes.size());
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (!folded[i]) kept.push_back(std::move(g_.nodes[i]));
    g_.nodes = std::move(kept);
    for (auto& a : added) g_.initializers.push_back(std::move(a));
  }

  const Tensor* constant(const std::string& name) const {
    auto it = constants_.find(name);
    return it == constants_.end() ? nullptr : &it->second;
  }

  bool fold(const Node& n, std::vector<std::pair<std::string, Tensor>>& added) {
    if (!default_domain(n.domain) || n.implicit_inputs != 0 || has_subgraph(n)) return false;
    auto kind_it = op_kinds().find(n.op_type);
    if (kind_it == op_kinds().end()) return false;
    const Kind kind = kind_it->second;
    bool any_output = false;
    for (const std::string& o : n.outputs) {
      if (o.empty()) continue;
      if (taken_.count(o)) return false;  // a second producer: the planner reports it
      any_output = true;
    }
    if (!any_output) return false;
    std::vector<const Tensor*> in(n.inputs.size(), nullptr);
    int64_t in_elems = 0;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      if (n.inputs[k].empty()) continue;
      in[k] = constant(n.inputs[k]);
      if (!in[k] || in[k]->dtype() == DataType::kString) return false;
      in_elems = add_sat(in_elems, in[k]->numel());
    }
    const int64_t elems = elems_written(kind, n, in, in_elems);
    if (elems > kMaxElems) return false;
    if (expands(kind) && elems > std::max(kExpandFloor, mul_sat(in_elems, 2))) return false;

    const int64_t opset = node_opset(m_, n);
    if (opset < 0) return false;
    const KernelFactory* f = KernelRegistry::instance().find("", n.op_type, opset);
    if (!f) return false;
    std::vector<Value> in_values(in.size());
    std::vector<const Value*> ptrs(in.size(), nullptr);
    for (size_t k = 0; k < in.size(); ++k)
      if (in[k]) {
        in_values[k] = Value(*in[k]);
        ptrs[k] = &in_values[k];
      }
    std::vector<Value> out(n.outputs.size());
    try {
      KernelInfo info(n, opset, [this](const std::string& name) { return constant(name); });
      std::unique_ptr<Kernel> kernel = (*f)(info);
      KernelContext ctx(n, ptrs.data(), ptrs.size(), out.data(), out.size(), nullptr);
      kernel->compute(ctx);
    } catch (...) {
      return false;  // the error surfaces when the graph runs, as without folding
    }
    int64_t bytes = 0;
    for (size_t k = 0; k < out.size(); ++k) {
      if (n.outputs[k].empty()) continue;
      if (!out[k].is_tensor() || out[k].tensor().dtype() == DataType::kString) return false;
      bytes = add_sat(bytes, static_cast<int64_t>(out[k].tensor().nbytes()));
    }
    if (bytes > kMaxBytes) return false;
    for (size_t k = 0; k < out.size(); ++k) {
      const std::string& name = n.outputs[k];
      if (name.empty()) continue;
      const Tensor& t = out[k].tensor();
      // A forwarded constant (Reshape of a weight) keeps its buffer; a kernel's own output
      // is copied into a kConstant one.
      const Buffer* b = t.buffer().get();
      Tensor c = b && b->kind() == BufferKind::kConstant ? t : constant_copy(t);
      taken_.insert(name);
      constants_.emplace(name, c);
      added.emplace_back(name, std::move(c));
    }
    return true;
  }

  Model& m_;
  Graph& g_;
  int depth_;
  std::unordered_map<std::string, Tensor> outer_;
  std::unordered_map<std::string, Tensor> constants_;  // stable addresses for KernelInfo
  std::unordered_set<std::string> taken_;              // inputs, initializers, folded values
};

}  // namespace

void fold_constants(Model& model) {
  Folder(model, model.graph, nullptr, 0).run();
}

}  // namespace ortlite
