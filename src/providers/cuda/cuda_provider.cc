// CUDAExecutionProvider behind the core's ExecutionProvider interface (ortlite/provider.h):
// one provider object per device, its allocator, copies and streams, and the entry the
// core's provider list calls. The planner and the binding reach CUDA only through here.
#include <array>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "ortlite/provider.h"
#include "providers/cuda/provider.h"

namespace ortlite {

namespace {

class CudaStream final : public ProviderStream {
 public:
  explicit CudaStream(int device) : stream_(device), scope_(stream_.get()) {}
  void sync() override {
    try {
      stream_.sync();
    } catch (const Error& e) {
      throw Error(e.code(), std::string("the run's CUDA work failed: ") + e.what());
    }
  }
  void sync_quietly() noexcept override { cuda::api().stream_sync(stream_.get()); }
  OrtliteCudaStream* get() const { return stream_.get(); }

 private:
  cuda::Stream stream_;
  // CUDA kernels launch on the thread's current stream: the executor runs every node of a
  // run on the thread that opened the stream.
  cuda::StreamScope scope_;
};

OrtliteCudaStream* raw(ProviderStream* s) {
  return s ? static_cast<CudaStream*>(s)->get() : nullptr;
}

class CudaProvider final : public ExecutionProvider {
 public:
  CudaProvider(int device, bool plan_only) : device_(device), plan_only_(plan_only) {}
  const char* name() const override { return cuda::kCudaProvider; }
  Device device() const override { return {DeviceType::kCUDA, device_}; }
  bool can_run() const override { return !plan_only_; }
  bool input_on_host(const std::string& op_type, int64_t opset, size_t index) const override {
    return cuda::input_on_host(op_type, opset, index);
  }
  Tensor allocate(DataType dtype, const Shape& shape, ProviderStream* stream) const override {
    return cuda::empty(dtype, shape, device_, raw(stream));
  }
  Tensor to_device(const Tensor& host, ProviderStream* stream) const override {
    return cuda::to_device(host, device_, raw(stream));
  }
  Tensor to_host(const Tensor& t, ProviderStream* stream) const override {
    return cuda::to_host(t, raw(stream));
  }
  Tensor copy(const Tensor& t) const override { return cuda::copy_on_device(t); }
  void write_from_host(const Tensor& dst, const void* src, size_t bytes) const override {
    cuda::copy_host_to(dst, src, bytes);
  }
  void zero(const Tensor& dst) const override { cuda::zero(dst); }
  std::unique_ptr<ProviderStream> open_stream() const override {
    if (plan_only_)
      ORTLITE_THROW(kNotImplemented,
                    "this session was planned for CUDA without a device (test hook); it "
                    "cannot run");
    return std::make_unique<CudaStream>(device_);
  }
  void memory_stats(size_t* reserved, size_t* in_use) const override {
    cuda::memory_stats(device_, reserved, in_use);
  }

 private:
  int device_;
  bool plan_only_;
};

bool available(std::string* why) {
  if (cuda::available()) return true;
  if (why) *why = cuda::load_status().error;
  return false;
}

// One provider object per device, made on first use.
std::shared_ptr<const ExecutionProvider> for_device(int device_id) {
  cuda::check_device(device_id);
  static std::mutex mu;
  static std::array<std::shared_ptr<const ExecutionProvider>, 64> made;
  if (device_id >= static_cast<int>(made.size()))
    return std::make_shared<CudaProvider>(device_id, false);
  std::lock_guard<std::mutex> lock(mu);
  auto& p = made[static_cast<size_t>(device_id)];
  if (!p) p = std::make_shared<CudaProvider>(device_id, false);
  return p;
}

// device_id must name a present device (onnxruntime's other CUDA options, gpu_mem_limit,
// cudnn_conv_algo_search, ..., are accepted and have no effect yet).
std::shared_ptr<const ExecutionProvider> make(const ProviderOptions& options) {
  int device = 0;
  auto it = options.values.find("device_id");
  if (it != options.values.end()) {
    const std::string& text = it->second;
    char* end = nullptr;
    const long id = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || id < 0 || id > 1 << 20)
      ORTLITE_THROW(kEPFail, "CUDAExecutionProvider option device_id = '", text,
                    "' is not a device number");
    device = static_cast<int>(id);
  }
  if (options.plan_only) return std::make_shared<CudaProvider>(device, true);
  return for_device(device);
}

ProviderReport report() {
  const cuda::LoadStatus& ls = cuda::load_status();
  ProviderReport r;
  r.fields = {ReportField::of("library", ls.library), ReportField::flag("loaded", ls.loaded),
              ReportField::of("device_count", int64_t{ls.device_count}),
              ReportField::of("error", ls.error),
              ReportField::of("abi_version", int64_t{ORTLITE_CUDA_ABI_VERSION})};
  for (int d = 0; d < ls.device_count; ++d) {
    const OrtliteCudaDeviceProps p = cuda::device_props(d);
    r.devices.push_back({ReportField::of("id", int64_t{d}), ReportField::of("name", p.name),
                         ReportField::of("total_memory", static_cast<int64_t>(p.total_memory)),
                         ReportField::tuple("compute_capability", {p.major, p.minor}),
                         ReportField::of("multiprocessor_count", int64_t{p.multiprocessor_count}),
                         ReportField::flag("memory_pools", p.memory_pools_supported != 0)});
  }
  return r;
}

void set_option(const std::string& key, const std::string& value) {
  if (key != "allow_tf32")
    ORTLITE_THROW(kInvalidArgument, "CUDAExecutionProvider has no process option '", key, "'");
  cuda::check(cuda::api().set_allow_tf32(value == "1"), "set_allow_tf32");
}

}  // namespace

const ProviderEntry& cuda_provider_entry() {
  static const ProviderEntry entry{
      cuda::kCudaProvider, DeviceType::kCUDA,    available, make, for_device, report,
      set_option,          register_cuda_kernels};
  return entry;
}

}  // namespace ortlite
