// GraphPlan: a graph ordered, placed on providers and bound to kernels at load (the planner,
// graph/planner.cc, makes it), and its execution (graph/executor.cc): one loop for every
// plan, which runs the steps a fetch needs, releases values after their last use, reuses
// intermediate buffers between runs (the run arena) and, in a plan with nodes on a device
// provider, copies values between host and device where a step needs the other side.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/profiler.h"
#include "ortlite/kernel.h"
#include "ortlite/provider.h"
#include "ortlite/session.h"
#include "ortlite/thread_pool.h"
#include "ortlite/value.h"

namespace ortlite {

// One step of the plan: a node, its kernel and where its values live.
struct PlannedNode {
  const Node* node = nullptr;
  std::unique_ptr<Kernel> kernel;
  std::vector<int> inputs;         // value slots; -1 for an omitted optional input
  std::vector<int> outputs;        // value slots; -1 for an omitted optional output
  std::vector<int> release_after;  // slots whose last use is this step
  std::vector<int> arena_ids;      // per output: its buffer's arena slot, or -1
  // The provider that runs it: the CPU, or the plan's device provider.
  const ExecutionProvider* provider = nullptr;
  // Node on the device provider: per input, whether it stays in host memory
  // (ExecutionProvider::input_on_host, implicit inputs).
  std::vector<char> host_inputs;
  // CPU node that reads only its inputs' shapes (Shape, Size): a device input needs no copy.
  bool shape_only = false;
};

// What one run of a plan keeps between runs so that a warmed-up run allocates nothing but
// its outputs: the value table and kernel scratch arrays, and per arena slot the tensor
// whose buffer the next run may write again (docs/architecture.md, "Memory").
struct RunArena {
  // The value table. Constant slots keep their tensors between runs (constants_set) unless
  // a feed replaced one (an overridable initializer); every other slot is emptied after a run.
  std::vector<Value> values;
  bool constants_set = false, constant_fed = false;
  std::vector<char> have;
  std::vector<const Value*> in_ptrs;
  std::vector<Value> outs;
  std::vector<Tensor*> recycled;        // per output of the current step
  std::vector<Tensor> tensors;          // per arena slot
  bool profiling = false;               // record each step's kernel time in `events`
  std::vector<Profiler::Event> events;  // the run's events while profiling
};

// A planned graph: the main graph of a session, or a subgraph (If branch, Loop body, ...).
struct GraphPlan {
  std::vector<std::string> value_names;
  std::unordered_map<std::string, int> slot_of;
  std::vector<PlannedNode> steps;                 // topological order
  std::vector<int> producer_step;                 // per slot: producing step or -1
  std::vector<std::pair<int, Tensor>> constants;  // initializer slots and their tensors
  std::vector<int> output_slots;                  // graph outputs in order
  std::unordered_set<int> pinned;                 // slots never released (graph outputs)
  std::vector<char> needed_all;                   // per step: needed for every graph output
  size_t max_inputs = 0, max_outputs = 0;         // over the steps, for the per-run scratch
  // Per slot: the arena slot of the buffer a step writes it to, or -1 (graph inputs,
  // constants, graph outputs). Slots whose lifetimes do not overlap share an arena slot.
  std::vector<int> arena_id;
  int arena_slots = 0;
  std::vector<char> is_constant;  // per slot: an initializer (or folded constant) slot
  // The provider of the nodes placed on a device (main graph only; nullptr: every node
  // runs on the CPU). device_constants: device copies of the constants (initializers,
  // Constant outputs) that those nodes read, made once at load.
  std::shared_ptr<const ExecutionProvider> device_provider;
  std::vector<std::pair<int, Tensor>> device_constants;

  // Per step: whether computing `fetch` needs it. Fed and constant slots have no
  // producer, so the answer does not depend on the feeds.
  std::vector<char> needed_for(const std::vector<int>& fetch) const;
  // Runs the steps that `fetch` needs. `values` holds the feeds and constants on entry
  // (feeds may be device tensors); returns the fetched values in order.
  // With an arena, outputs are written to its recycled buffers where possible and released
  // values go back to it; `values` and the scratch arrays may be the arena's own.
  // With a device provider: one stream for the run, copies between host and device where a
  // consumer needs the other side, a sync before returning; `device_outputs` keeps fetched
  // values that are on the device there (else they are copied to the host).
  std::vector<Value> execute(std::vector<Value>& values, const std::vector<int>& fetch,
                             ThreadPool* pool, const RunConfig* run_config,
                             RunArena* arena = nullptr, bool device_outputs = false) const;
  // Assigns arena_id from the steps' outputs and release points.
  void plan_arena();
};

}  // namespace ortlite
