#include "providers/cuda/provider.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>

namespace ortlite {
namespace cuda {

namespace {

const OrtliteCudaApi* g_api = nullptr;
LoadStatus* g_status = nullptr;
std::once_flag g_once;

// _ortlite_cuda.so next to the shared object this code is in (the extension module), or
// the path in ORTLITE_CUDA_LIBRARY.
std::string library_path() {
  if (const char* env = std::getenv("ORTLITE_CUDA_LIBRARY")) return env;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&library_path), &info) == 0 || !info.dli_fname) return "";
  std::string self = info.dli_fname;
  const size_t slash = self.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : self.substr(0, slash);
  return dir + "/_ortlite_cuda.so";
}

void load() {
  auto* st = new LoadStatus();  // lives until exit, as the library does
  g_status = st;
  st->library = library_path();
  struct stat sb;
  if (st->library.empty() || stat(st->library.c_str(), &sb) != 0) {
    st->error = "this ortlite was built without CUDA (no " +
                (st->library.empty() ? std::string("_ortlite_cuda.so") : st->library) + ")";
    return;
  }
  // Never closed: the CUDA runtime does not support being unloaded.
  void* handle = dlopen(st->library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = dlerror();
    st->error = "cannot load the CUDA library " + st->library + ": " + (e ? e : "unknown error");
    return;
  }
  auto fn = reinterpret_cast<OrtliteCudaApiFn>(dlsym(handle, ORTLITE_CUDA_SYMBOL));
  if (!fn) {
    st->error = st->library + " does not export " + ORTLITE_CUDA_SYMBOL;
    return;
  }
  const OrtliteCudaApi* api = fn(ORTLITE_CUDA_ABI_VERSION);
  if (!api || api->abi_version != ORTLITE_CUDA_ABI_VERSION ||
      api->struct_size < sizeof(OrtliteCudaApi)) {
    st->error = st->library + " was built for another version of ortlite (C ABI version " +
                std::to_string(ORTLITE_CUDA_ABI_VERSION) + " expected): rebuild it";
    return;
  }
  st->loaded = true;
  int count = 0;
  if (api->device_count(&count) != 0 || count <= 0) {
    st->error = std::string("no usable CUDA device: ") + api->last_error();
    count = 0;
  }
  st->device_count = count;
  g_api = api;
}

thread_local OrtliteCudaStream* t_stream = nullptr;

}  // namespace

const LoadStatus& load_status() {
  std::call_once(g_once, load);
  return *g_status;
}

bool available() {
  const LoadStatus& st = load_status();
  return st.loaded && st.device_count > 0;
}

const OrtliteCudaApi& api() {
  const LoadStatus& st = load_status();
  if (!st.loaded) ORTLITE_THROW(kEPFail, "CUDA is not available: ", st.error);
  return *g_api;
}

void check_device(int device) {
  const LoadStatus& st = load_status();
  if (!st.loaded || st.device_count == 0)
    ORTLITE_THROW(kEPFail, "CUDA is not available: ", st.error);
  if (device < 0 || device >= st.device_count)
    ORTLITE_THROW(kEPFail, "CUDA device ", device, " does not exist (", st.device_count,
                  st.device_count == 1 ? " device" : " devices", ")");
}

void check(int rc, const std::string& what, StatusCode code) {
  if (rc == 0) return;
  throw Error(code, what + ": " + api().last_error());
}

OrtliteCudaDeviceProps device_props(int device) {
  check_device(device);
  OrtliteCudaDeviceProps p;
  check(api().device_props(device, &p), "device properties");
  return p;
}

// ---- streams --------------------------------------------------------------------------

Stream::Stream(int device) : device_(device) {
  check_device(device);
  check(api().stream_acquire(device, &stream_), "cannot create a CUDA stream");
}

Stream::~Stream() {
  // Errors surface at the owner's sync(); here the stream only goes back to the pool.
  if (stream_) api().stream_release(stream_);
}

void Stream::sync() {
  check(api().stream_sync(stream_), "CUDA stream");
}

StreamScope::StreamScope(OrtliteCudaStream* stream) : prev_(t_stream) {
  t_stream = stream;
}

StreamScope::~StreamScope() {
  t_stream = prev_;
}

OrtliteCudaStream* current_stream() {
  if (!t_stream) ORTLITE_THROW(kFail, "a CUDA kernel ran without a CUDA stream");
  return t_stream;
}

int stream_device(OrtliteCudaStream* stream) {
  int d = 0;
  check(api().stream_device(stream, &d), "stream device");
  return d;
}

// ---- memory ---------------------------------------------------------------------------

bool is_cuda(const Tensor& t) {
  return t.buffer() && t.buffer()->device().type == DeviceType::kCUDA;
}

int device_of(const Tensor& t) {
  return t.buffer() ? t.buffer()->device().id : 0;
}

BufferPtr allocate(int device, size_t bytes, OrtliteCudaStream* stream) {
  const OrtliteCudaApi& a = api();
  void* p = nullptr;
  check(a.alloc(device, bytes, stream, &p), "CUDA allocation");
  const OrtliteCudaApi* table = &a;
  try {
    return BufferPtr::adopt(
        Buffer::wrap_device(p, bytes, Device{DeviceType::kCUDA, device},
                            [table, device, p, stream] { table->free(device, p, stream); }));
  } catch (...) {
    a.free(device, p, stream);
    throw;
  }
}

Tensor empty(DataType dtype, const Shape& shape, int device, OrtliteCudaStream* stream) {
  if (dtype == DataType::kString)
    ORTLITE_THROW(kNotImplemented, "string tensors cannot be placed on a CUDA device");
  const size_t elem = dtype_size(dtype);
  if (elem == 0)
    ORTLITE_THROW(kNotImplemented, "element type ", dtype_name(dtype), " is not supported");
  const int64_t n = shape_size(shape);
  if (static_cast<uint64_t>(n) > SIZE_MAX / elem)
    ORTLITE_THROW(kInvalidArgument, "tensor of shape ", shape_to_string(shape), " is too large");
  return Tensor(dtype, shape, allocate(device, static_cast<size_t>(n) * elem, stream));
}

Tensor to_device(const Tensor& host, int device, OrtliteCudaStream* stream) {
  if (is_cuda(host)) ORTLITE_THROW(kFail, "to_device: the tensor is already on a CUDA device");
  Tensor t = empty(host.dtype(), host.shape(), device, stream);
  if (t.nbytes())
    check(api().memcpy(device, t.raw_data(), host.raw_data(), t.nbytes(), ORTLITE_CUDA_H2D, stream),
          "copy to the CUDA device");
  return t;
}

Tensor to_host(const Tensor& dev, OrtliteCudaStream* stream) {
  if (!is_cuda(dev)) ORTLITE_THROW(kFail, "to_host: the tensor is not on a CUDA device");
  const int device = device_of(dev);
  const size_t n = dev.nbytes();
  Tensor t(dev.dtype(), dev.shape(), BufferPtr::adopt(Buffer::allocate(n)));
  if (n) {
    check(api().memcpy(device, t.raw_data(), dev.raw_data(), n, ORTLITE_CUDA_D2H, stream),
          "copy from the CUDA device");
    if (stream) check(api().stream_sync(stream), "copy from the CUDA device");
  }
  return t;
}

Tensor copy_on_device(const Tensor& dev) {
  if (!is_cuda(dev)) ORTLITE_THROW(kFail, "copy_on_device: the tensor is not on a CUDA device");
  const int device = device_of(dev);
  Tensor t = empty(dev.dtype(), dev.shape(), device, nullptr);
  if (t.nbytes())
    check(api().memcpy(device, t.raw_data(), dev.raw_data(), t.nbytes(), ORTLITE_CUDA_D2D, nullptr),
          "copy on the CUDA device");
  return t;
}

void copy_host_to(const Tensor& dev, const void* src, size_t bytes) {
  if (!is_cuda(dev) || bytes > dev.nbytes()) ORTLITE_THROW(kFail, "copy_host_to: bad destination");
  if (bytes)
    check(api().memcpy(device_of(dev), dev.raw_data(), src, bytes, ORTLITE_CUDA_H2D, nullptr),
          "copy to the CUDA device");
}

void zero(const Tensor& dev) {
  if (!is_cuda(dev)) ORTLITE_THROW(kFail, "zero: the tensor is not on a CUDA device");
  if (!dev.nbytes()) return;
  Stream s(device_of(dev));
  check(api().memset_zero(dev.raw_data(), dev.nbytes(), s.get()), "CUDA memset");
  s.sync();
}

void memory_stats(int device, size_t* reserved, size_t* in_use) {
  check_device(device);
  check(api().memory_stats(device, reserved, in_use), "CUDA memory statistics");
}

}  // namespace cuda
}  // namespace ortlite
