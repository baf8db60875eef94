#include "graph/executor.h"

#include <algorithm>
#include <new>

namespace ortlite {

namespace {

// A released value's tensor goes back to its arena slot when its buffer is CPU memory
// ortlite allocated (never a feed's, a weight's or a device buffer) and the value was its
// last holder: a buffer that a view still shares (say an output that reshapes this value)
// is left to that holder, which then stays its only owner (zero-copy to numpy). Even so,
// the next run writes it only if by then nothing else references it
// (KernelContext::allocate_output).
void recycle(Value& v, Tensor* slot) {
  if (!v.is_tensor()) return;
  const Buffer* b = v.tensor().buffer().get();
  if (!b || b->ref_count() != 1 || b->kind() != BufferKind::kOwned ||
      b->device().type != DeviceType::kCPU || b->holds_strings())
    return;
  *slot = std::move(v.tensor());
}

// The steps a fetch needs, and the fetched slots (kept until the end of the run) unless it
// fetches every graph output: that common case uses the plan made at load, and its slots
// are pinned, so nothing fetched is ever released.
struct FetchSet {
  bool all;
  std::vector<char> needed_some, fetched;
  const std::vector<char>* needed;

  FetchSet(const GraphPlan& p, const std::vector<int>& fetch) : all(fetch == p.output_slots) {
    if (!all) {
      needed_some = p.needed_for(fetch);
      fetched.assign(p.value_names.size(), 0);
      for (int slot : fetch) fetched[slot] = 1;
    }
    needed = all ? &p.needed_all : &needed_some;
  }
  bool kept(int slot) const { return !all && fetched[slot]; }
};

void check_terminate(const RunConfig* run_config, const PlannedNode& pn) {
  if (run_config && run_config->terminate.load(std::memory_order_relaxed)) {
    ORTLITE_THROW(kFail,
                  "Exiting due to terminate flag being set to true: the run was "
                  "terminated before ",
                  pn.node->label());
  }
}

// Runs `body` (a step's kernel, with whatever prepares its inputs); on failure empties the
// step's outputs and rethrows as an Error that starts with the node's label, followed by
// `where` (": ", or " (CUDA): " for a node on the device).
template <typename F>
void guarded(const PlannedNode& pn, Value* outs, const char* where, F&& body) {
  const size_t n_out = pn.outputs.size();
  try {
    body();
  } catch (const Error& e) {
    for (size_t o = 0; o < n_out; ++o) outs[o] = Value();
    const std::string label = pn.node->label();
    if (std::string(e.what()).rfind(label, 0) == 0) throw;
    throw Error(e.code(), label + where + e.what());
  } catch (const std::bad_alloc&) {
    for (size_t o = 0; o < n_out; ++o) outs[o] = Value();
    ORTLITE_THROW(kFail, pn.node->label(), ": out of memory");
  } catch (const std::exception& e) {
    for (size_t o = 0; o < n_out; ++o) outs[o] = Value();
    ORTLITE_THROW(kRuntimeException, pn.node->label(), ": ", e.what());
  }
}

// Moves the step's outputs into their slots, calling stored(slot) for each; a declared
// output the kernel did not produce is an error.
template <typename F>
void store_outputs(const GraphPlan& p, const PlannedNode& pn, Value* outs,
                   std::vector<Value>& values, F&& stored) {
  for (size_t o = 0; o < pn.outputs.size(); ++o) {
    const int slot = pn.outputs[o];
    if (slot < 0) {
      outs[o] = Value();
      continue;
    }
    if (!outs[o].defined()) {
      ORTLITE_THROW(kFail, pn.node->label(), ": the kernel did not produce output '",
                    p.value_names[slot], "'");
    }
    values[slot] = std::move(outs[o]);
    outs[o] = Value();
    stored(slot);
  }
}

// A fetched slot's value; an error when it has none.
Value& fetched_value(const GraphPlan& p, std::vector<Value>& values, int slot) {
  if (!values[slot].defined()) {
    ORTLITE_THROW(kInvalidArgument, "output '", p.value_names[slot],
                  "' has no value (an omitted optional graph input?)");
  }
  return values[slot];
}

}  // namespace

void GraphPlan::plan_arena() {
  arena_id.assign(value_names.size(), -1);
  // Greedy over the steps in order: an output takes the arena slot freed most recently (its
  // memory is the likeliest to be in cache); a step's outputs are assigned before its
  // released inputs give theirs back, so a kernel never writes over what it reads.
  std::vector<int> free_slots;
  for (PlannedNode& pn : steps) {
    pn.arena_ids.assign(pn.outputs.size(), -1);
    for (size_t o = 0; o < pn.outputs.size(); ++o) {
      const int slot = pn.outputs[o];
      if (slot < 0 || pinned.count(slot) || arena_id[slot] >= 0) continue;
      int id;
      if (free_slots.empty()) {
        id = arena_slots++;
      } else {
        id = free_slots.back();
        free_slots.pop_back();
      }
      arena_id[slot] = pn.arena_ids[o] = id;
    }
    for (int slot : pn.release_after)
      if (arena_id[slot] >= 0) free_slots.push_back(arena_id[slot]);
  }
}

std::vector<char> GraphPlan::needed_for(const std::vector<int>& fetch) const {
  std::vector<char> needed(steps.size(), 0);
  std::vector<int> stack(fetch.begin(), fetch.end());
  std::vector<char> seen(value_names.size(), 0);
  while (!stack.empty()) {
    const int slot = stack.back();
    stack.pop_back();
    if (seen[slot]) continue;
    seen[slot] = 1;
    const int step = producer_step[slot];
    if (step < 0 || needed[step]) continue;
    needed[step] = 1;
    for (int in : steps[step].inputs)
      if (in >= 0) stack.push_back(in);
  }
  return needed;
}

std::vector<Value> GraphPlan::execute(std::vector<Value>& values, const std::vector<int>& fetch,
                                      ThreadPool* pool, const RunConfig* run_config,
                                      RunArena* arena, bool device_outputs) const {
  const FetchSet fs(*this, fetch);
  // Node events go to the arena's list when the session profiles (Session::run_feeds).
  std::vector<Profiler::Event>* profile = arena && arena->profiling ? &arena->events : nullptr;
  // One scratch array for every step's input pointers and outputs (the arena's, if any).
  std::vector<const Value*> own_in_ptrs;
  std::vector<Value> own_outs;
  std::vector<const Value*>& in_ptrs = arena ? arena->in_ptrs : own_in_ptrs;
  std::vector<Value>& outs = arena ? arena->outs : own_outs;
  if (in_ptrs.size() < max_inputs) in_ptrs.resize(max_inputs);
  if (outs.size() < max_outputs) outs.resize(max_outputs);
  if (arena) {
    if (arena->recycled.size() < max_outputs) arena->recycled.resize(max_outputs);
    if (arena->tensors.size() < static_cast<size_t>(arena_slots))
      arena->tensors.resize(static_cast<size_t>(arena_slots));
  }

  // A plan with device nodes: the run's stream (kernels on this thread launch on it), and
  // per slot the value's copy on the other side (device copy of a host value or host copy
  // of a device one), made on first need and dropped with the value.
  const ExecutionProvider* dev = device_provider.get();
  std::unique_ptr<ProviderStream> stream = dev ? dev->open_stream() : nullptr;
  std::vector<Value> other;
  if (dev) {
    other.resize(value_names.size());
    for (const auto& [slot, t] : device_constants) other[slot] = t;
  }
  // Queued work may still read the run's buffers or the feeds' host memory: an error exit
  // waits for the stream before any of them is released.
  struct SyncOnExit {
    ProviderStream* s;
    ~SyncOnExit() {
      if (s) s->sync_quietly();
    }
  } sync_on_exit{stream.get()};
  // The value of `slot` on the host (on_device false) or on the device.
  auto located = [&](int slot, bool on_device) -> const Value* {
    const Value& v = values[slot];
    if (!v.is_tensor() || dev->holds(v.tensor()) == on_device) return &v;
    Value& c = other[slot];
    if (!c.defined()) {
      c = on_device ? Value(dev->to_device(v.tensor(), stream.get()))
                    : Value(dev->to_host(v.tensor(), stream.get()));
    }
    return &c;
  };

  for (size_t step = 0; step < steps.size(); ++step) {
    if (!(*fs.needed)[step]) continue;
    const PlannedNode& pn = steps[step];
    check_terminate(run_config, pn);
    const size_t n_in = pn.inputs.size(), n_out = pn.outputs.size();
    const bool on_device = dev && pn.provider == dev;
    if (arena) {
      for (size_t o = 0; o < n_out; ++o)
        arena->recycled[o] = pn.arena_ids[o] >= 0 ? &arena->tensors[pn.arena_ids[o]] : nullptr;
    }
    // The input copies are inside the guard: a failed copy names the node.
    guarded(pn, outs.data(), on_device ? " (CUDA): " : ": ", [&] {
      for (size_t i = 0; i < n_in; ++i) {
        const int slot = pn.inputs[i];
        if (slot < 0) {
          in_ptrs[i] = nullptr;
        } else if (!dev || pn.shape_only) {
          in_ptrs[i] = &values[slot];
        } else {
          in_ptrs[i] = located(slot, on_device && !pn.host_inputs[i]);
        }
      }
      KernelContext ctx(*pn.node, in_ptrs.data(), n_in, outs.data(), n_out, pool, run_config);
      if (arena) ctx.set_recycled(arena->recycled.data());
      if (!profile) return pn.kernel->compute(ctx);
      const auto t0 = Profiler::Clock::now();
      pn.kernel->compute(ctx);
      profile->push_back({pn.node, nullptr, pn.provider->name(), t0, Profiler::Clock::now()});
    });
    if (dev) {
      store_outputs(*this, pn, outs.data(), values, [&](int slot) { other[slot] = Value(); });
    } else {
      store_outputs(*this, pn, outs.data(), values, [](int) {});
    }
    for (int slot : pn.release_after) {
      if (fs.kept(slot)) continue;
      if (arena && arena_id[slot] >= 0) recycle(values[slot], &arena->tensors[arena_id[slot]]);
      values[slot] = Value();
      if (dev) other[slot] = Value();
    }
  }

  // The last fetch of a slot takes its value (the run drops `values` next), unless it is a
  // constant, which the arena keeps. Which fetch is a slot's last: a scan for a few
  // fetches, marks over the slots for many (no quadratic cost).
  const size_t n_fetch = fetch.size();
  constexpr size_t kScan = 16;
  std::vector<char> last(n_fetch, 1);
  if (n_fetch > kScan) {
    std::vector<char> fetched_later(value_names.size(), 0);
    for (size_t i = n_fetch; i-- > 0;) {
      last[i] = !fetched_later[fetch[i]];
      fetched_later[fetch[i]] = 1;
    }
  } else {
    for (size_t i = 0; i < n_fetch; ++i)
      last[i] = std::find(fetch.begin() + i + 1, fetch.end(), fetch[i]) == fetch.end();
  }
  std::vector<Value> results;
  results.reserve(n_fetch);
  for (size_t i = 0; i < n_fetch; ++i) {
    const int slot = fetch[i];
    Value& v = fetched_value(*this, values, slot);
    if (dev && !device_outputs && v.is_tensor() && dev->holds(v.tensor())) {
      try {
        results.push_back(*located(slot, false));
      } catch (const Error& e) {
        throw Error(e.code(), "output '" + value_names[slot] + "': " + e.what());
      }
    } else if (!last[i] || is_constant[slot]) {
      results.push_back(v);
    } else {
      results.push_back(std::move(v));
    }
  }
  if (stream) {
    sync_on_exit.s = nullptr;
    stream->sync();
  }
  return results;
}

}  // namespace ortlite
