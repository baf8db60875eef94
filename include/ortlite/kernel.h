// Kernel interface and registry. A kernel is created once per node at session load
// (attributes parsed and validated, constant weights pre-packed) and computes its outputs
// at run time, shapes included. Kernels are const at run time: one session runs on many
// threads at once, so per-run state lives in the KernelContext only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ortlite/model.h"
#include "ortlite/status.h"
#include "ortlite/tensor.h"
#include "ortlite/thread_pool.h"
#include "ortlite/value.h"

namespace ortlite {

struct RunConfig;
class KernelContext;

// A graph-valued attribute (If branches, Loop and Scan bodies, SequenceMap's body), planned
// once at load like the main graph. Values the body reads from enclosing graphs (outer
// scope) reach it as implicit inputs of the node that owns it: the planner appends their
// names to Node::inputs (Node::implicit_inputs counts them), so they stay alive and ordered
// like any other input.
class Subgraph {
 public:
  virtual ~Subgraph() = default;
  // The body's formal inputs and outputs, in order.
  virtual const std::vector<std::string>& input_names() const = 0;
  virtual const std::vector<std::string>& output_names() const = 0;
  // The declared type of output i (kind kUnknown when the body does not say).
  virtual const TypeInfo& output_type(size_t i) const = 0;
  // Runs the body. `inputs` are the formal inputs in order (a missing optional input is an
  // undefined Value); outer-scope values come from `ctx`, the owning node's context.
  // Errors name the body and the failing node inside it.
  virtual std::vector<Value> run(std::vector<Value> inputs, const KernelContext& ctx) const = 0;
};

// What a kernel factory sees of its node at load time.
class KernelInfo {
 public:
  using SubgraphBuilder = std::function<std::shared_ptr<const Subgraph>(const Attribute&)>;
  KernelInfo(const Node& node, int64_t opset,
             std::function<const Tensor*(const std::string&)> constant_lookup,
             SubgraphBuilder subgraph_builder = nullptr)
      : node_(node),
        opset_(opset),
        constant_lookup_(std::move(constant_lookup)),
        subgraph_builder_(std::move(subgraph_builder)) {}

  const Node& node() const { return node_; }
  const std::string& op_type() const { return node_.op_type; }
  // The opset version of the node's domain in effect for this node.
  int64_t opset() const { return opset_; }

  // Explicit inputs only (implicit outer-scope inputs of control-flow nodes excluded).
  size_t num_inputs() const { return node_.inputs.size() - node_.implicit_inputs; }
  size_t num_outputs() const { return node_.outputs.size(); }
  bool has_input(size_t i) const { return i < node_.inputs.size() && !node_.inputs[i].empty(); }
  // The value of input i when it is a constant (a non-overridable initializer or a
  // Constant node output) known at load, else nullptr. For pre-packing weights. Valid only
  // while the factory runs: a kernel copies what it keeps (copying a Tensor is cheap).
  const Tensor* constant_input(size_t i) const;

  bool has_attr(const char* name) const { return node_.find_attr(name) != nullptr; }
  // Getters check the attribute's type and throw Error(kInvalidGraph) naming the node and
  // the attribute on a mismatch; *_required throw when the attribute is absent.
  int64_t attr_int(const char* name, int64_t default_value) const;
  int64_t attr_int_required(const char* name) const;
  float attr_float(const char* name, float default_value) const;
  float attr_float_required(const char* name) const;
  std::string attr_string(const char* name, const std::string& default_value) const;
  std::vector<int64_t> attr_ints(const char* name, std::vector<int64_t> default_value = {}) const;
  std::vector<float> attr_floats(const char* name, std::vector<float> default_value = {}) const;
  std::vector<std::string> attr_strings(const char* name,
                                        std::vector<std::string> default_value = {}) const;
  const Tensor* attr_tensor(const char* name) const;  // nullptr when absent
  // The planned body of graph attribute `name`; throws kInvalidGraph when it is absent or
  // not a graph, or when the body does not plan (unknown op, cycle, ...).
  std::shared_ptr<const Subgraph> subgraph(const char* name) const;

  // Element types of the explicit inputs as the planner inferred them (kUndefined where
  // unknown or omitted). Only a session that places nodes on another provider sets them:
  // that provider's factories decline (kNotImplemented) nodes whose types they cannot run.
  bool has_input_types() const { return !input_types_.empty(); }
  DataType input_type(size_t i) const {
    return i < input_types_.size() ? input_types_[i] : DataType::kUndefined;
  }
  void set_input_types(std::vector<DataType> types) { input_types_ = std::move(types); }

  // Throws Error(code) with the message prefixed by the node's label.
  [[noreturn]] void fail(StatusCode code, const std::string& message) const;

 private:
  const Attribute* typed_attr(const char* name, AttrType type) const;
  const Node& node_;
  int64_t opset_;
  std::vector<DataType> input_types_;
  std::function<const Tensor*(const std::string&)> constant_lookup_;
  SubgraphBuilder subgraph_builder_;
};

// What a kernel sees at run time.
class KernelContext {
 public:
  // `inputs` (num_inputs entries, nullptr for an omitted input) and `outputs` (num_outputs
  // empty values the kernel fills) are owned by the caller and outlive the context: the
  // session reuses one scratch array per run instead of allocating per node.
  KernelContext(const Node& node, const Value* const* inputs, size_t num_inputs, Value* outputs,
                size_t num_outputs, ThreadPool* pool, const RunConfig* run_config = nullptr)
      : node_(node),
        inputs_(inputs),
        n_inputs_(num_inputs),
        outputs_(outputs),
        n_outputs_(num_outputs),
        pool_(pool),
        run_config_(run_config) {}

  const Node& node() const { return node_; }
  // Explicit inputs only; implicit (outer-scope) inputs follow them in input_value().
  size_t num_inputs() const { return n_inputs_ - node_.implicit_inputs; }
  // nullptr when the input was omitted ("" name), is an optional without a value, or i is
  // past the node's inputs. Throws Error(kInvalidArgument) when the input is a sequence.
  const Tensor* input(size_t i) const {
    if (i >= n_inputs_ || !inputs_[i]) return nullptr;
    if (inputs_[i]->is_tensor()) return &inputs_[i]->tensor();
    return non_tensor_input(i);
  }
  // Throws Error(kInvalidArgument) naming the node when the input is missing.
  const Tensor& required_input(size_t i) const;
  // Any kind of value (sequence and optional ops); nullptr when omitted. Indices past
  // num_inputs() are the implicit inputs.
  const Value* input_value(size_t i) const { return i < n_inputs_ ? inputs_[i] : nullptr; }

  size_t num_outputs() const { return n_outputs_; }
  // Allocates output i in an owned buffer: a new one, or one of the run's arena that
  // nothing else references. The memory is NOT cleared (strings are constructed empty):
  // the kernel writes every element.
  Tensor& allocate_output(size_t i, DataType dtype, const Shape& shape);
  // Makes output i an existing tensor (a view of an input: Reshape, Identity, ...). The
  // binding copies any output that is not a buffer this run allocated.
  void set_output(size_t i, Tensor t);
  // Any kind of value (sequence and optional ops, control flow).
  void set_output_value(size_t i, Value v);
  Tensor& output(size_t i) { return output_value(i).tensor(); }
  Value& output_value(size_t i) {
    if (i >= n_outputs_)
      fail(StatusCode::kFail, "output index " + std::to_string(i) + " out of range");
    return outputs_[i];
  }

  ThreadPool* thread_pool() const { return pool_; }
  const RunConfig* run_config() const { return run_config_; }

  // The run's arena (set by the session): per output, a tensor kept from an earlier use of
  // the same arena slot (or nullptr). allocate_output takes its buffer instead of a new one
  // when nothing else references it and it is large enough.
  void set_recycled(Tensor* const* recycled) { recycled_ = recycled; }

  // Throws Error(code) with the message prefixed by the node's label.
  [[noreturn]] void fail(StatusCode code, const std::string& message) const;

 private:
  const Tensor* non_tensor_input(size_t i) const;
  const Node& node_;
  const Value* const* inputs_;
  size_t n_inputs_;
  Value* outputs_;
  size_t n_outputs_;
  ThreadPool* pool_;
  const RunConfig* run_config_;
  Tensor* const* recycled_ = nullptr;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void compute(KernelContext& ctx) const = 0;
};

using KernelFactory = std::function<std::unique_ptr<Kernel>(const KernelInfo&)>;

constexpr const char* kCpuProvider = "CPUExecutionProvider";
// The upper bound of an open-ended registration: the kernel serves every opset from its
// `since` on (no later opset changed the operator).
constexpr int kMaxOpset = 1 << 30;
// The newest default-domain opset whose operators ortlite registers and checks: a bounded
// registration ending here implements this opset's semantics and claims no later one. A
// few ops also register later versions (the tensor and reduce families, Swish, CumProd,
// BitCast, ...). Python sees it as ortlite.NEWEST_OPSET.
constexpr int kNewestOpset = 23;

class KernelRegistry {
 public:
  // The registry of every kernel compiled in, filled on first use.
  static const KernelRegistry& instance();

  // Registers op_type in `domain` ("" = default) for opsets since..until inclusive.
  void add(const std::string& domain, const std::string& op_type, int since, int until,
           KernelFactory factory, const std::string& provider = kCpuProvider);
  // Registers op_type in the default domain once per version range: `since` lists, in
  // ascending order, the opsets where the op changed; entry i covers [since[i],
  // since[i+1] - 1] and the last one [since.back(), until]. One factory serves every range
  // (it reads KernelInfo::opset() for the differences).
  void add_versions(const std::string& op_type, const std::vector<int>& since,
                    const KernelFactory& factory, int until = kMaxOpset,
                    const std::string& provider = kCpuProvider);
  // Factory for the given opset, or nullptr.
  const KernelFactory* find(const std::string& domain, const std::string& op_type, int64_t opset,
                            const std::string& provider = kCpuProvider) const;
  bool has_op(const std::string& domain, const std::string& op_type) const;
  std::vector<std::string> op_names(const std::string& provider = kCpuProvider) const;

  struct Registration {
    std::string domain, op_type, provider;
    int since, until;
  };
  // Every registration, in registration order (for docs and tests).
  std::vector<Registration> registrations() const;

 private:
  struct Entry {
    std::string domain, op_type, provider;
    int since, until;
    KernelFactory factory;
  };
  std::vector<Entry> entries_;
};

// Helper to register a kernel class K constructible from const KernelInfo&.
template <typename K>
KernelFactory make_factory() {
  return
      [](const KernelInfo& info) -> std::unique_ptr<Kernel> { return std::make_unique<K>(info); };
}

// Small shared helpers for kernels.
// Normalizes a possibly negative axis into [0, rank); throws kInvalidArgument naming `what`.
int64_t normalize_axis(int64_t axis, int64_t rank, const char* what = "axis");
// Reads an int32/int64 tensor as int64 values (shape, axes, pads inputs, ...).
std::vector<int64_t> tensor_to_int64s(const Tensor& t);
// Reads a scalar of any numeric type as double.
double tensor_scalar_as_double(const Tensor& t);

// Registration entry points, one per op family (src/providers/cpu/<family>/...). Called once by
// KernelRegistry::instance().
void register_math_kernels(KernelRegistry& r);         // src/providers/cpu/math
void register_nn_kernels(KernelRegistry& r);           // src/providers/cpu/nn
void register_tensor_kernels(KernelRegistry& r);       // src/providers/cpu/tensor
void register_reduce_kernels(KernelRegistry& r);       // src/providers/cpu/reduce
void register_sequence_kernels(KernelRegistry& r);     // src/providers/cpu/sequence
void register_controlflow_kernels(KernelRegistry& r);  // src/providers/cpu/controlflow
void register_quant_kernels(KernelRegistry& r);        // src/providers/cpu/quant
void register_ml_kernels(KernelRegistry& r);           // src/providers/cpu/ml (ai.onnx.ml)

}  // namespace ortlite
