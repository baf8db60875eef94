// Execution providers: where kernels run and where their values live. The planner assigns
// each node to the first provider of the session's list that has a kernel for it, inserts
// the copies between devices, and one executor loop runs the plan (docs/architecture.md).
// The core holds providers only through this interface: the CPU provider is built in
// (src/core/provider.cc), the CUDA provider implements it in src/providers/cuda and no
// core, graph, session or binding file includes a CUDA header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ortlite/buffer.h"
#include "ortlite/kernel.h"
#include "ortlite/tensor.h"

namespace ortlite {

// The ordered work of one run on a provider's device (a CUDA stream). Made by the
// executor for a run and synchronized before the run returns; while it exists, kernels on
// the creating thread launch their work on it.
class ProviderStream {
 public:
  virtual ~ProviderStream() = default;
  // Waits for the queued work; throws Error on a device failure.
  virtual void sync() = 0;
  // Waits without throwing (error paths: queued work may still read the run's buffers).
  virtual void sync_quietly() noexcept = 0;
};

class ExecutionProvider {
 public:
  virtual ~ExecutionProvider() = default;

  // onnxruntime's name ("CPUExecutionProvider", "CUDAExecutionProvider").
  virtual const char* name() const = 0;
  // The device its kernels read and write.
  virtual Device device() const = 0;
  bool on_host() const { return device().type == DeviceType::kCPU; }
  // Whether `t` lives on this provider's device.
  bool holds(const Tensor& t) const {
    const Buffer* b = t.buffer().get();
    return (b ? b->device() : Device{}) == device();
  }
  // Whether this provider may run kernels (false for a plan-only provider: see
  // ProviderOptions::plan_only).
  virtual bool can_run() const { return true; }

  // ---- kernel lookup ----------------------------------------------------------------
  // The factory of this provider's kernel for (domain, op_type) at `opset`, or nullptr.
  const KernelFactory* find_kernel(const std::string& domain, const std::string& op_type,
                                   int64_t opset) const {
    return KernelRegistry::instance().find(domain, op_type, opset, name());
  }
  // Whether explicit input `index` of this provider's kernel for op_type stays in host
  // memory (shapes, axes, bounds the kernel reads on the host). The planner copies every
  // other input of the node to the provider's device.
  virtual bool input_on_host(const std::string& op_type, int64_t opset, size_t index) const {
    (void)op_type, (void)opset, (void)index;
    return on_host();
  }

  // ---- allocator and copies ---------------------------------------------------------
  // An uninitialized tensor on the device (stream: where the memory is first used, or
  // nullptr for memory usable at once by any stream).
  virtual Tensor allocate(DataType dtype, const Shape& shape, ProviderStream* stream) const = 0;
  // A device copy of a host tensor / an owned host copy of a device tensor. With
  // stream == nullptr they complete before returning; to_host always waits.
  virtual Tensor to_device(const Tensor& host, ProviderStream* stream) const = 0;
  virtual Tensor to_host(const Tensor& t, ProviderStream* stream) const = 0;
  // A new tensor with a copy of `t`'s bytes on the same device (synchronous).
  virtual Tensor copy(const Tensor& t) const = 0;
  // Copies `bytes` host bytes into `dst` (on this device; synchronous).
  virtual void write_from_host(const Tensor& dst, const void* src, size_t bytes) const = 0;
  // Sets dst's bytes to zero (synchronous).
  virtual void zero(const Tensor& dst) const = 0;

  // ---- streams ----------------------------------------------------------------------
  // The stream of one run (nullptr: kernels run synchronously, as on the CPU).
  virtual std::unique_ptr<ProviderStream> open_stream() const { return nullptr; }

  // ---- introspection ----------------------------------------------------------------
  // Memory the provider's allocator holds and the part in use, in bytes.
  virtual void memory_stats(size_t* reserved, size_t* in_use) const { *reserved = *in_use = 0; }
};

// Options of one provider as the session was given them (str -> str).
struct ProviderOptions {
  std::map<std::string, std::string> values;
  // A provider that plans without a device: kernels are chosen as if the device were there,
  // nothing is copied and the session cannot run (placement tests on machines without a
  // GPU). Set only from the "ortlite.test.plan_only_provider" session config entry.
  bool plan_only = false;
};

// ---- the providers compiled in ----------------------------------------------------------

// The CPU provider (always available).
const ExecutionProvider& cpu_provider();
// Whether the provider `name` can be used here; `*why` says why not (loading its library,
// no device, not compiled in).
bool provider_available(const std::string& name, std::string* why = nullptr);
// Providers usable here, in onnxruntime's order of preference (the CPU last).
std::vector<std::string> available_provider_names();
// The provider `name` with `options` (device_id, ...); throws Error(kEPFail) saying why it
// cannot be used, Error(kInvalidArgument) for a malformed option.
std::shared_ptr<const ExecutionProvider> make_provider(const std::string& name,
                                                       const ProviderOptions& options = {});
// The provider whose device holds `t` (the CPU for host memory); throws Error(kEPFail)
// when that provider is not available.
std::shared_ptr<const ExecutionProvider> provider_of(const Tensor& t);
// The provider for a device named as OrtValue does ("cpu", "cuda"/"gpu") and its id.
std::shared_ptr<const ExecutionProvider> provider_for_device(const std::string& device_type,
                                                             int64_t device_id);
// Diagnostics of provider `name` (_cuda_info): named fields, and the same per device.
struct ReportField {
  enum class Kind { kText, kInt, kBool, kInts };
  std::string key;
  Kind kind = Kind::kText;
  std::string text;           // kText
  std::vector<int64_t> ints;  // kInt, kBool: one value; kInts: a tuple
  static ReportField of(std::string k, std::string v) {
    return {std::move(k), Kind::kText, std::move(v), {}};
  }
  static ReportField of(std::string k, int64_t v) { return {std::move(k), Kind::kInt, {}, {v}}; }
  static ReportField flag(std::string k, bool v) { return {std::move(k), Kind::kBool, {}, {v}}; }
  static ReportField tuple(std::string k, std::vector<int64_t> v) {
    return {std::move(k), Kind::kInts, {}, std::move(v)};
  }
};
struct ProviderReport {
  std::vector<ReportField> fields;
  std::vector<std::vector<ReportField>> devices;
};
ProviderReport provider_report(const std::string& name);
// Sets a process-wide option of provider `name` ("allow_tf32" for CUDA).
void set_provider_option(const std::string& name, const std::string& key, const std::string& value);

// A device provider's entry points, registered once (KernelRegistry::instance and the
// provider list call it). Defined by the provider's own directory.
struct ProviderEntry {
  const char* name;
  DeviceType device_type;
  bool (*available)(std::string* why);
  std::shared_ptr<const ExecutionProvider> (*make)(const ProviderOptions& options);
  std::shared_ptr<const ExecutionProvider> (*for_device)(int device_id);
  ProviderReport (*report)();
  void (*set_option)(const std::string& key, const std::string& value);
  void (*register_kernels)(KernelRegistry& r);
};
// The CUDA provider (src/providers/cuda/cuda_provider.cc).
const ProviderEntry& cuda_provider_entry();

}  // namespace ortlite
