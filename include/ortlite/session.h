// Session: a loaded, planned model. Immutable after create(); run() may be called from
// many threads at once. All per-run state lives in the run's own RunContext.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ortlite/kernel.h"
#include "ortlite/model.h"
#include "ortlite/tensor.h"
#include "ortlite/thread_pool.h"
#include "ortlite/value.h"

namespace ortlite {

// SessionOptions.add_free_dimension_override_by_name / _by_denotation: a symbolic dimension
// of the graph's inputs fixed to a value.
struct FreeDimensionOverride {
  bool by_denotation =
      false;  // `id` is a dimension denotation (case-insensitive), else a dim_param
  std::string id;
  int64_t value = 0;
};

struct SessionConfig {
  int intra_op_num_threads = 0;  // 0: one per core (at most 8)
  int inter_op_num_threads = 0;
  int graph_optimization_level = 99;
  int execution_mode = 0;
  int log_severity_level = 2;
  std::map<std::string, std::string> config_entries;
  // From SessionOptions.add_initializer: replace or add initializers by name. The binding
  // keeps the memory alive for the session's lifetime (buffers are kBorrowed).
  std::vector<std::pair<std::string, Tensor>> added_initializers;
  // Execution providers in order of preference, each with its options (str -> str, e.g.
  // device_id), already checked usable by the binding (empty: the CPU only). The planner
  // places the main graph's nodes that a device provider's kernel accepts on that device
  // (docs/cuda.md); the CPU runs the rest.
  std::vector<std::pair<std::string, std::map<std::string, std::string>>> providers;
  // Applied at load as onnxruntime's FreeDimensionOverrideTransformer does: a dimension of a
  // graph input (not an initializer) whose denotation or dim_param matches becomes that
  // value (get_inputs() reports it, a feed of another size is InvalidArgument). A dimension
  // matched by both with different values, or a fixed dimension matched with another
  // value: InvalidArgument at load. For one id the first override given wins. Graph
  // outputs' dimensions named by a dim_param override get the value too.
  std::vector<FreeDimensionOverride> free_dimension_overrides;
  // Records a profile of initialization and of every run (Session::end_profiling).
  bool enable_profiling = false;
  std::string profile_file_prefix = "onnxruntime_profile_";
  // SessionOptions.optimized_model_filepath: where create() writes the graph it will run
  // (after inlining, SessionOptions initializers and the optimizer) as an ONNX model. The
  // config entries session.optimized_model_external_initializers_file_name and
  // ..._min_size_in_bytes (default 1024) put large initializers in a file beside it.
  std::string optimized_model_filepath;
  // SessionOptions.use_per_session_threads = False: the process-wide pool
  // (set_global_thread_pool_sizes) the session runs on instead of a pool of its own.
  std::shared_ptr<ThreadPool> shared_thread_pool;
};

struct RunConfig {
  std::atomic<bool> terminate{false};
  bool only_execute_path_to_fetches = false;
  int log_severity_level = 2;
  int log_verbosity_level = 0;
  std::string logid;
  std::map<std::string, std::string> config_entries;
};

// Named input values of a run.
using Feeds = std::vector<std::pair<std::string, Value>>;

// Whether Session::run checks its feeds (kChecked: the caller ran check_run on them).
enum class FeedCheck { kCheck, kChecked };

// Checks a tensor of `dtype` and shape dims[0, rank) against input `name`'s declared tensor
// `type` (element type, rank, static dims): Error(kInvalidArgument) naming the input, what
// was expected and what was given, as Session::check_run. The binding calls it before it
// copies an array (a broadcast view may expand to terabytes).
void check_tensor_feed(const std::string& name, const TypeInfo& type, DataType dtype,
                       const int64_t* dims, size_t rank);

// What `ortlite info` and `ortlite check` report of a model without planning it: every
// node as the file writes it (subgraph bodies and model-local function bodies included), the
// opset in effect for it, and whether the CPU registry has a kernel for that opset. Kernels
// that refuse an element type do so when a session is created; this report cannot see that.
struct NodeReport {
  std::string scope;  // "" for the main graph, else e.g. "If node 'c' then_branch"
  std::string name, domain, op_type;  // domain "" is the default domain
  int64_t opset = -1;                 // -1: the model does not import the node's domain
  std::string problem;                // "" when a kernel (or a model-local function) serves it
};

struct ModelReport {
  std::vector<NodeReport> nodes;
  size_t initializers = 0;  // of the main graph and every subgraph
  size_t initializer_bytes = 0;
};

ModelReport describe_model(const Model& model);

class Session {
 public:
  // Topologically sorts the graph (model-local functions inlined), checks it, creates
  // one kernel per node. Throws Error: kInvalidGraph (cycle, value nothing produces,
  // duplicate output), kNotImplemented (op/opset with no kernel), ...
  static std::shared_ptr<const Session> create(Model model, const SessionConfig& config);
  ~Session();

  // Graph inputs that are not initializers, in graph order.
  const std::vector<ValueInfo>& inputs() const { return inputs_; }
  const std::vector<ValueInfo>& outputs() const { return outputs_; }
  // Initializers that are also graph inputs (a feed may replace them).
  const std::vector<ValueInfo>& overridable_initializers() const { return overridable_; }
  const Model& model() const { return model_; }
  const SessionConfig& config() const { return config_; }
  ThreadPool* thread_pool() const { return pool_.get(); }

  // The one check of a run's feeds and fetches: every required input fed (else
  // MissingInputsError), every feed name an input or overridable initializer, each value of
  // the declared kind (tensor, sequence, optional), element type, rank and static dims, every
  // output name known. Errors are Error(kInvalidArgument) naming the input or output, what
  // was expected and what was given. Linear time. run() calls it unless told the feeds were
  // checked (FeedCheck::kChecked: run_async checks when it is called, then runs later).
  void check_run(const Feeds& feeds, const std::vector<std::string>& output_names) const;
  bool has_output(const std::string& name) const;
  // The declaration of a name a feed may use (a required input or an overridable
  // initializer), nullptr for any other name; `*required` (when given) tells whether it is a
  // required input. `hint`: the name's likely position in inputs() then
  // overridable_initializers() (feeds usually come in that order), compared first; else a
  // hash lookup.
  const ValueInfo* find_feedable(const std::string& name, bool* required = nullptr,
                                 size_t hint = static_cast<size_t>(-1)) const;

  // Runs the graph. `output_names` empty means every graph output, in graph order. The
  // returned tensors may share memory with feeds or initializers (see Buffer::kind): the
  // caller decides whether to copy. Throws Error(kRuntimeException / kFail / ...) naming
  // the failing node, or Error(kFail, "... terminated") when run_config->terminate is set.
  // With nodes on a CUDA device, `device_outputs` keeps outputs produced there on the
  // device (run_with_ort_values); otherwise they are copied to the host. Feeds may be device
  // tensors. The run's stream is synchronized before returning.
  std::vector<Value> run(const Feeds& feeds, const std::vector<std::string>& output_names,
                         const RunConfig* run_config, bool device_outputs = false,
                         FeedCheck check = FeedCheck::kCheck) const;
  // The same, taking the feeds' values instead of copying them.
  std::vector<Value> run(Feeds&& feeds, const std::vector<std::string>& output_names,
                         const RunConfig* run_config, bool device_outputs = false,
                         FeedCheck check = FeedCheck::kCheck) const;

  // With SessionConfig::enable_profiling: writes what was recorded since the session was
  // created (onnxruntime's JSON trace format) to "<prefix>_<date>.json", stops recording
  // and returns the file name; "" when profiling is off or already ended.
  std::string end_profiling() const;
  // When profiling started, in nanoseconds since the epoch (0 when profiling is off).
  int64_t profiling_start_ns() const;

  // Whether some node runs on a device provider (CUDA).
  bool uses_device() const;
  // The main graph's nodes in plan order: (node label, provider name).
  std::vector<std::pair<std::string, std::string>> node_placement() const;
  // The same nodes by name, op type and domain, with their provider.
  struct NodeAssignment {
    std::string name, op_type, domain, provider;
  };
  std::vector<NodeAssignment> node_assignment() const;

  struct Impl;

 private:
  Session() = default;
  // check_run for one feed, given what find_feedable(name) returned (nullptr: the name is
  // unknown).
  void check_feed(const std::string& name, const ValueInfo* declared, const Value& v) const;
  void check_output_names(const std::vector<std::string>& output_names) const;
  std::vector<Value> run_feeds(Feeds& feeds, bool take_feeds,
                               const std::vector<std::string>& output_names,
                               const RunConfig* run_config, bool device_outputs) const;
  Model model_;
  SessionConfig config_;
  std::vector<ValueInfo> inputs_, outputs_, overridable_;
  std::shared_ptr<ThreadPool> pool_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ortlite
