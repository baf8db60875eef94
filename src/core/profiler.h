// Profiler: what SessionConfig::enable_profiling records. Events in onnxruntime's format
// (Chrome trace "X" events: a session_initialization event, one model_run event per run
// and one <node>_kernel_time event per executed node with its op type and provider),
// written to a JSON file by end_profiling().
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "ortlite/model.h"

namespace ortlite {

class Profiler {
 public:
  using Clock = std::chrono::steady_clock;

  struct Event {
    const Node* node;  // nullptr: a session event named by `name`
    const char* name;
    const char* provider;
    Clock::time_point start, end;
  };

  explicit Profiler(std::string prefix);
  bool active() const { return active_; }
  // Nanoseconds since the epoch (system clock) when recording started.
  int64_t start_ns() const { return start_ns_; }
  void add(const std::vector<Event>& events);
  void add(const Event& e) { add(std::vector<Event>{e}); }
  // Writes "<prefix>_<YYYY-MM-DD_HH-MM-SS>.json" in the working directory, stops recording
  // and returns the file name ("" when not active). Throws Error(kFail) when the file cannot
  // be written.
  std::string end();

 private:
  std::mutex mu_;
  bool active_ = true;
  std::string prefix_;
  Clock::time_point start_;
  int64_t start_ns_;
  std::vector<Event> events_;
  std::vector<int> tids_;  // per event: a small id of the recording thread
};

}  // namespace ortlite
