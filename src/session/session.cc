#include "ortlite/session.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <new>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "core/profiler.h"
#include "graph/executor.h"
#include "graph/graph_walk.h"
#include "graph/optimizer.h"
#include "graph/planner.h"
#include "graph/type_inference.h"
#include "onnx/function_inliner.h"
#include "ortlite/model_io.h"
#include "ortlite/provider.h"

namespace ortlite {

struct Session::Impl {
  ~Impl() { delete spare_arena.load(); }
  GraphPlan plan;
  // An arena not in use by a run: a run takes it (or makes one when concurrent runs hold
  // the others) and puts it back; at most one is kept between runs.
  std::atomic<RunArena*> spare_arena{nullptr};
  std::unique_ptr<Profiler> profiler;  // with SessionConfig::enable_profiling
  // Inputs and overridable initializers: what a feed may name, and its value slot.
  struct Feedable {
    const ValueInfo* info;
    int slot;
    bool required;  // an input (not an overridable initializer)
  };
  std::unordered_map<std::string, Feedable> feedable;
  std::vector<Feedable> by_position;  // inputs_, then overridable_ (what feedable holds)
  std::vector<int> required_slots;    // slots of inputs_

  // The Feedable of `name`; `hint` is the position in by_position where it likely is (feeds
  // usually come in input order), compared first: a hit costs no hashing and reads memory
  // in order.
  const Feedable* find(const std::string& name, size_t hint) const {
    if (hint < by_position.size() && by_position[hint].info->name == name)
      return &by_position[hint];
    auto it = feedable.find(name);
    return it == feedable.end() ? nullptr : &it->second;
  }
  std::unordered_set<std::string> output_names;
};

Session::~Session() = default;

namespace {

// The session's providers up to the first CPU one (the CPU is appended when absent). The
// session config entry "ortlite.test.cuda_plan_only" = "1" (a test hook) plans for CUDA
// without a device: such a session reports its placement but cannot run.
Placement make_placement(const SessionConfig& config) {
  Placement placement;
  placement.log_severity_level = config.log_severity_level;
  auto it = config.config_entries.find("ortlite.test.cuda_plan_only");
  const bool plan_only = it != config.config_entries.end() && it->second == "1";
  std::vector<std::pair<std::string, std::map<std::string, std::string>>> providers =
      config.providers;
  if (plan_only) providers = {{"CUDAExecutionProvider", {}}, {kCpuProvider, {}}};
  for (const auto& [name, values] : providers) {
    ProviderOptions options;
    options.values = values;
    options.plan_only = plan_only && name != kCpuProvider;
    placement.providers.push_back(make_provider(name, options));
    if (name == kCpuProvider) break;
  }
  if (placement.providers.empty() || !placement.providers.back()->on_host())
    placement.providers.push_back(make_provider(kCpuProvider));
  return placement;
}

int default_thread_count() {
  const unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp<unsigned>(hw == 0 ? 1 : hw, 1, 8));
}

std::string lower_ascii(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

// SessionConfig::free_dimension_overrides, applied to the graph's declared inputs (those
// that are not initializers) and, by dim_param, to its declared outputs.
void apply_free_dimension_overrides(Graph& g, const std::vector<FreeDimensionOverride>& overrides) {
  if (overrides.empty()) return;
  std::unordered_map<std::string, int64_t> by_name, by_denotation;
  for (const FreeDimensionOverride& o : overrides) {
    if (o.value < 0)
      ORTLITE_THROW(kInvalidArgument, "free dimension override '", o.id, "' has a negative value ",
                    o.value);
    // emplace: for one id the first override given wins, as in onnxruntime.
    if (o.by_denotation) {
      by_denotation.emplace(lower_ascii(o.id), o.value);
    } else {
      by_name.emplace(o.id, o.value);
    }
  }
  std::unordered_set<std::string> init_names;
  for (const auto& init : g.initializers) init_names.insert(init.first);
  for (ValueInfo& vi : g.inputs) {
    if (init_names.count(vi.name) || vi.type.kind != TypeInfo::Kind::kTensor || !vi.type.has_shape)
      continue;
    for (size_t d = 0; d < vi.type.dims.size(); ++d) {
      Dim& dim = vi.type.dims[d];
      bool overridden = false;
      int64_t value = 0;
      if (!dim.denotation.empty()) {
        auto it = by_denotation.find(lower_ascii(dim.denotation));
        if (it != by_denotation.end()) {
          overridden = true;
          value = it->second;
        }
      }
      if (!dim.has_value && !dim.param.empty()) {
        auto it = by_name.find(dim.param);
        if (it != by_name.end()) {
          if (overridden && value != it->second)
            ORTLITE_THROW(kInvalidArgument, "Conflicting free dimension overrides: dimension ", d,
                          " of input '", vi.name, "' (dim_param '", dim.param, "', denotation '",
                          dim.denotation, "') is overridden to ", value, " by denotation and to ",
                          it->second, " by name");
          overridden = true;
          value = it->second;
        }
      }
      if (!overridden) continue;
      if (dim.has_value) {
        if (dim.value != value)
          ORTLITE_THROW(kInvalidArgument, "Invalid free dimension override: input '", vi.name,
                        "' has a fixed dimension ", d, " of size ", dim.value,
                        ", which does not equal the override ", value, " (denotation '",
                        dim.denotation, "')");
        continue;
      }
      dim.has_value = true;
      dim.value = value;
    }
  }
  for (ValueInfo& vi : g.outputs) {
    if (vi.type.kind != TypeInfo::Kind::kTensor || !vi.type.has_shape) continue;
    for (Dim& dim : vi.type.dims) {
      if (dim.has_value || dim.param.empty()) continue;
      auto it = by_name.find(dim.param);
      if (it == by_name.end()) continue;
      dim.has_value = true;
      dim.value = it->second;
    }
  }
}

// SessionConfig::optimized_model_filepath, with onnxruntime's config entries for external
// initializers.
void save_optimized_model(const Model& m, const SessionConfig& config) {
  SaveOptions opts;
  const auto& entries = config.config_entries;
  auto file = entries.find("session.optimized_model_external_initializers_file_name");
  if (file != entries.end()) opts.external_data_file = file->second;
  auto min = entries.find("session.optimized_model_external_initializers_min_size_in_bytes");
  if (min != entries.end()) {
    const std::string& v = min->second;
    size_t used = 0;
    unsigned long long n = 0;
    bool ok = !v.empty() && v[0] >= '0' && v[0] <= '9';
    if (ok) {
      try {
        n = std::stoull(v, &used);
      } catch (const std::exception&) {
        ok = false;
      }
    }
    if (!ok || used != v.size())
      ORTLITE_THROW(kInvalidArgument,
                    "session.optimized_model_external_initializers_min_size_in_bytes must be a "
                    "non-negative integer, got '",
                    v, "'");
    opts.external_min_bytes = static_cast<size_t>(n);
  }
  save_model(m, config.optimized_model_filepath, opts);
}

}  // namespace

std::shared_ptr<const Session> Session::create(Model model, const SessionConfig& config) {
  std::shared_ptr<Session> s(new Session());
  s->config_ = config;
  s->model_ = std::move(model);
  s->impl_ = std::make_unique<Impl>();
  if (config.enable_profiling)
    s->impl_->profiler = std::make_unique<Profiler>(config.profile_file_prefix);
  const auto created = Profiler::Clock::now();
  Model& m = s->model_;
  Graph& g = m.graph;
  Impl& im = *s->impl_;

  inline_model_functions(m);
  apply_free_dimension_overrides(g, config.free_dimension_overrides);

  // Initializers added through SessionOptions replace those of the same name.
  for (const auto& [name, tensor] : config.added_initializers) {
    bool replaced = false;
    for (auto& init : g.initializers) {
      if (init.first == name) {
        init.second = tensor;
        replaced = true;
      }
    }
    if (!replaced) g.initializers.emplace_back(name, tensor);
  }
  {
    // A node output declared with another element type than its op gives: refused here,
    // before any rewrite, as onnxruntime refuses it (a graph with a cycle is reported by
    // the planner).
    std::vector<int> order;
    if (topological_order(g, order)) check_declared_types(g, order);
  }
  const Placement placement = make_placement(config);
  // The optimizer's fusions make com.ortlite nodes that only the CPU runs: with a device
  // provider the graph is planned as written.
  if (placement.providers.front()->on_host()) optimize_graph(m, config.graph_optimization_level);
  if (!config.optimized_model_filepath.empty()) save_optimized_model(m, config);

  // Graph inputs, then initializers. An initializer that is also an input is overridable.
  std::unordered_set<std::string> init_names;
  for (const auto& init : g.initializers) {
    if (init.first.empty()) ORTLITE_THROW(kInvalidGraph, "an initializer has no name");
    if (!init_names.insert(init.first).second)
      ORTLITE_THROW(kInvalidGraph, "duplicate initializer name '", init.first, "'");
  }
  std::vector<std::string> input_names;
  for (const ValueInfo& vi : g.inputs) {
    input_names.push_back(vi.name);
    if (init_names.count(vi.name)) {
      s->overridable_.push_back(vi);
    } else {
      s->inputs_.push_back(vi);
    }
  }
  plan_graph(im.plan, g, m, input_names, false, &placement);
  // The kernels have made what they prepare from the initializers (packed weights): the
  // model file's pages go back to the page cache, and those still read at run time (biases,
  // unpacked weights) are mapped again when a run touches them. ResNet-18's packed copies
  // are then not held twice (its peak RSS over 10 runs: 185 -> 145 MiB).
  if (m.backing_is_file && m.backing) drop_file_pages(m.backing->data(), m.backing->size());
  for (const auto* list : {&s->inputs_, &s->overridable_}) {
    for (const ValueInfo& vi : *list) {
      const Impl::Feedable f{&vi, im.plan.slot_of.at(vi.name), list == &s->inputs_};
      im.feedable.emplace(vi.name, f);
      im.by_position.push_back(f);
    }
  }
  for (const ValueInfo& vi : s->inputs_) im.required_slots.push_back(im.plan.slot_of.at(vi.name));
  for (const ValueInfo& vi : g.outputs) {
    s->outputs_.push_back(vi);
    im.output_names.insert(vi.name);
  }

  const int threads =
      config.intra_op_num_threads > 0 ? config.intra_op_num_threads : default_thread_count();
  // onnxruntime's session.intra_op.allow_spinning: "0" makes idle workers block at once.
  auto spin = config.config_entries.find("session.intra_op.allow_spinning");
  const bool allow_spinning = spin == config.config_entries.end() || spin->second != "0";
  if (config.shared_thread_pool) {
    s->pool_ = config.shared_thread_pool;
  } else {
    s->pool_ = std::make_shared<ThreadPool>(threads, allow_spinning);
  }
  if (im.profiler)
    im.profiler->add({nullptr, "session_initialization", nullptr, created, Profiler::Clock::now()});
  return s;
}

const ValueInfo* Session::find_feedable(const std::string& name, bool* required,
                                        size_t hint) const {
  const Impl::Feedable* f = impl_->find(name, hint);
  if (!f) return nullptr;
  if (required) *required = f->required;
  return f->info;
}

bool Session::has_output(const std::string& name) const {
  return impl_->output_names.count(name) != 0;
}

bool Session::uses_device() const {
  return impl_->plan.device_provider != nullptr;
}

std::vector<std::pair<std::string, std::string>> Session::node_placement() const {
  std::vector<std::pair<std::string, std::string>> r;
  for (const PlannedNode& pn : impl_->plan.steps)
    r.emplace_back(pn.node->label(), pn.provider->name());
  return r;
}

std::vector<Session::NodeAssignment> Session::node_assignment() const {
  std::vector<NodeAssignment> r;
  for (const PlannedNode& pn : impl_->plan.steps)
    r.push_back({pn.node->name, pn.node->op_type, pn.node->domain, pn.provider->name()});
  return r;
}

namespace {
// A run's hold on an arena (Session::Impl::spare_arena): taken at the start, emptied of the
// run's values and put back at the end, on every exit path.
class ArenaLease {
 public:
  ArenaLease(const GraphPlan& plan, std::atomic<RunArena*>& spare)
      : plan_(plan), spare_(spare), a_(spare.exchange(nullptr, std::memory_order_acq_rel)) {
    if (!a_) a_ = new RunArena;
  }
  ~ArenaLease() {
    std::vector<Value>& values = a_->values;
    for (size_t i = 0; i < values.size(); ++i)
      if (!a_->constants_set || a_->constant_fed || !plan_.is_constant[i]) values[i] = Value();
    if (a_->constant_fed) a_->constants_set = a_->constant_fed = false;
    for (Value& v : a_->outs) v = Value();
    delete spare_.exchange(a_, std::memory_order_acq_rel);
  }
  ArenaLease(const ArenaLease&) = delete;
  ArenaLease& operator=(const ArenaLease&) = delete;
  RunArena& operator*() const { return *a_; }

 private:
  const GraphPlan& plan_;
  std::atomic<RunArena*>& spare_;
  RunArena* a_;
};
}  // namespace

std::vector<Value> Session::run(const Feeds& feeds, const std::vector<std::string>& output_names,
                                const RunConfig* run_config, bool device_outputs,
                                FeedCheck check) const {
  if (check == FeedCheck::kCheck) check_run(feeds, output_names);
  return run_feeds(const_cast<Feeds&>(feeds), false, output_names, run_config, device_outputs);
}

std::vector<Value> Session::run(Feeds&& feeds, const std::vector<std::string>& output_names,
                                const RunConfig* run_config, bool device_outputs,
                                FeedCheck check) const {
  if (check == FeedCheck::kCheck) check_run(feeds, output_names);
  return run_feeds(feeds, true, output_names, run_config, device_outputs);
}

std::vector<Value> Session::run_feeds(Feeds& feeds, bool take_feeds,
                                      const std::vector<std::string>& output_names,
                                      const RunConfig* run_config, bool device_outputs) const {
  const GraphPlan& p = impl_->plan;
  ArenaLease lease(p, impl_->spare_arena);
  RunArena& arena = *lease;
  std::vector<Value>& values = arena.values;
  if (values.size() < p.value_names.size()) values.resize(p.value_names.size());
  std::vector<char>& have = arena.have;
  have.assign(p.value_names.size(), 0);
  if (!arena.constants_set) {
    for (const auto& [slot, t] : p.constants) values[slot] = t;
    arena.constants_set = true;
  }
  for (const auto& c : p.constants) have[c.first] = 1;
  for (size_t i = 0; i < feeds.size(); ++i) {
    auto& [name, v] = feeds[i];
    const Impl::Feedable* f = impl_->find(name, i);
    // check_run refused unknown names.
    if (!f) ORTLITE_THROW(kFail, "internal: unchecked input name '", name, "'");
    const int slot = f->slot;
    if (p.is_constant[slot]) arena.constant_fed = true;
    if (take_feeds) {
      values[slot] = std::move(v);
    } else {
      values[slot] = v;
    }
    // A CPU-only plan reads device feeds from a host copy.
    if (!p.device_provider && values[slot].is_tensor() &&
        !cpu_provider().holds(values[slot].tensor())) {
      const Tensor& t = values[slot].tensor();
      values[slot] = provider_of(t)->to_host(t, nullptr);
    }
    have[slot] = 1;
  }
  // Requested outputs; only the steps they depend on run.
  std::vector<int> some;
  for (const std::string& n : output_names) some.push_back(p.slot_of.at(n));
  const std::vector<int>& fetch = output_names.empty() ? p.output_slots : some;
  Profiler* prof = impl_->profiler.get();
  if (!prof || !prof->active())
    return p.execute(values, fetch, pool_.get(), run_config, &arena, device_outputs);
  // Profiling: a model_run event, then one per node (execute() adds them); recorded only
  // for runs that finish.
  std::vector<Profiler::Event>& events = arena.events;
  events.clear();
  events.push_back({nullptr, "model_run", nullptr, Profiler::Clock::now(), {}});
  arena.profiling = true;
  struct Off {
    RunArena& a;
    ~Off() { a.profiling = false; }
  } off{arena};
  std::vector<Value> results =
      p.execute(values, fetch, pool_.get(), run_config, &arena, device_outputs);
  events.front().end = Profiler::Clock::now();
  prof->add(events);
  events.clear();
  return results;
}

std::string Session::end_profiling() const {
  return impl_->profiler ? impl_->profiler->end() : std::string();
}

int64_t Session::profiling_start_ns() const {
  return impl_->profiler ? impl_->profiler->start_ns() : 0;
}

}  // namespace ortlite
