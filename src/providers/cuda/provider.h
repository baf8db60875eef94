// The CUDA provider as the main extension sees it: loads the CUDA library
// (_ortlite_cuda.so, next to the extension module) with dlopen on first use and wraps its C
// table (cuda_api.h) in C++: availability, device buffers, copies, streams. Compiled by g++
// into the main extension: no CUDA header here, and no Python.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "providers/cuda/cuda_api.h"
#include "ortlite/status.h"
#include "ortlite/tensor.h"

namespace ortlite {

class KernelRegistry;

namespace cuda {

constexpr const char* kCudaProvider = "CUDAExecutionProvider";

// What loading found. `error` says why CUDA is not usable when available() is false.
struct LoadStatus {
  std::string library;  // the path tried
  bool loaded = false;  // the library loaded and its ABI matches
  int device_count = 0;
  std::string error;
};

// Loads the library and counts devices on the first call (thread-safe); cached after.
const LoadStatus& load_status();
// True when the library loaded and at least one device is present.
bool available();
// The table; throws Error(kEPFail) saying why CUDA is unavailable.
const OrtliteCudaApi& api();
// Throws Error(kEPFail) unless `device` is a present device.
void check_device(int device);
// Throws Error(code, "<what>: <library message>") when rc != 0.
void check(int rc, const std::string& what, StatusCode code = StatusCode::kFail);
// Device properties (name, memory, compute capability) of a present device.
OrtliteCudaDeviceProps device_props(int device);

// A stream from the library's per-device pool, returned (after its work is done) when
// destroyed.
class Stream {
 public:
  explicit Stream(int device);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  OrtliteCudaStream* get() const { return stream_; }
  int device() const { return device_; }
  // Waits for the stream's work; throws on a device error.
  void sync();

 private:
  OrtliteCudaStream* stream_ = nullptr;
  int device_;
};

// The stream CUDA kernels launch on. Phase 1: KernelContext has no stream, so the caller of
// Kernel::compute sets it for the thread with this scope (see docs/cuda.md: the planner
// will pass it in the context instead).
class StreamScope {
 public:
  explicit StreamScope(OrtliteCudaStream* stream);
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  OrtliteCudaStream* prev_;
};
// The thread's current stream; throws Error(kFail) when no StreamScope is active.
OrtliteCudaStream* current_stream();
int stream_device(OrtliteCudaStream* stream);

// ---- device memory --------------------------------------------------------------------

bool is_cuda(const Tensor& t);
// The CUDA device of t (t must be on one).
int device_of(const Tensor& t);
// `bytes` of device memory from the caching allocator, queued on `stream` (nullptr: usable
// at once by any stream). The buffer frees itself on the same stream when the last
// reference goes; the owner of the last reference must make sure no queued work still
// reads it (a run keeps its tensors until its stream is synchronized).
BufferPtr allocate(int device, size_t bytes, OrtliteCudaStream* stream);
// An uninitialized device tensor.
Tensor empty(DataType dtype, const Shape& shape, int device, OrtliteCudaStream* stream);
// Copies of a CPU tensor to the device / of a device tensor to a new owned CPU tensor.
// With stream == nullptr they complete before returning; to_host always waits.
Tensor to_device(const Tensor& host, int device, OrtliteCudaStream* stream);
Tensor to_host(const Tensor& dev, OrtliteCudaStream* stream);
// A new device tensor with a copy of `dev`'s bytes, on the same device (synchronous).
Tensor copy_on_device(const Tensor& dev);
// Copies host bytes into a device tensor of the same size (synchronous).
void copy_host_to(const Tensor& dev, const void* src, size_t bytes);
// Sets a device tensor's bytes to zero (synchronous).
void zero(const Tensor& dev);

// Per-device allocator figures (bytes): memory the pool holds and the part in use.
void memory_stats(int device, size_t* reserved, size_t* in_use);

}  // namespace cuda

// Registers the CUDA kernels (src/providers/cuda/kernels.cc) under kCudaProvider. They run only
// with a current CUDA stream and device-resident inputs (see input_on_host).
void register_cuda_kernels(KernelRegistry& r);

namespace cuda {
// True when input `index` of a CUDA kernel for op_type stays in CPU memory (shapes, axes,
// starts / ends, Clip bounds: values the kernel reads on the host). The planner copies every
// other input of a CUDA node to the device.
bool input_on_host(const std::string& op_type, int64_t opset, size_t index);
}  // namespace cuda

}  // namespace ortlite
