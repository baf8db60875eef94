// The CUDA library's runtime half: errors, devices, the caching allocator, copies, stream
// and event pools, cuBLAS GEMM, cuDNN convolution, and the exported table
// (ortlite_cuda_api). See cuda_api.h for the contract and docs/cuda.md for the design.
//
// Global state (device pools, stream pools, handles, the convolution algorithm cache) is
// created on first use and deliberately never destroyed: tearing CUDA objects down from
// static destructors races the driver's own teardown at process exit.
#include <cublas_v2.h>
#include <cudnn.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "providers/cuda/common.cuh"
#include "providers/cuda/launchers.cuh"

namespace ortlite_cuda {

// ---- errors ---------------------------------------------------------------------------

namespace {
thread_local char t_error[1024] = "";
}

int fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(t_error, sizeof(t_error), fmt, ap);
  va_end(ap);
  return 1;
}

int cuda_fail(cudaError_t e, const char* what) {
  // Clears the (non-sticky) error so that the next launch check does not see it again.
  cudaGetLastError();
  return fail("%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

const char* last_error() {
  return t_error;
}

const char* dtype_name(int dtype) {
  switch (dtype) {
    case kFloat:
      return "float";
    case kUInt8:
      return "uint8";
    case kInt8:
      return "int8";
    case kUInt16:
      return "uint16";
    case kInt16:
      return "int16";
    case kInt32:
      return "int32";
    case kInt64:
      return "int64";
    case 8:
      return "string";
    case kBool:
      return "bool";
    case kFloat16:
      return "float16";
    case kDouble:
      return "double";
    case kUInt32:
      return "uint32";
    case kUInt64:
      return "uint64";
    case kBFloat16:
      return "bfloat16";
    default:
      return "(unknown type)";
  }
}

int dtype_size(int dtype) {
  switch (dtype) {
    case kUInt8:
    case kInt8:
    case kBool:
      return 1;
    case kUInt16:
    case kInt16:
    case kFloat16:
    case kBFloat16:
      return 2;
    case kFloat:
    case kInt32:
    case kUInt32:
      return 4;
    case kInt64:
    case kUInt64:
    case kDouble:
      return 8;
    default:
      return 0;
  }
}

// ---- merged dims ----------------------------------------------------------------------

int merge_dims(int rank, const int64_t* dims, int nops, const int64_t* const* strides, Geom* g) {
  if (rank < 0 || nops < 1 || nops > 3)
    return fail("bad geometry (rank %d, %d operands)", rank, nops);
  std::vector<int64_t> md;
  std::vector<int64_t> ms[3];
  for (int i = 0; i < rank; ++i) {
    if (dims[i] < 0) return fail("negative dimension %lld", static_cast<long long>(dims[i]));
    if (dims[i] == 0) {
      g->rank = 1;
      g->dims[0] = 0;
      for (int k = 0; k < 3; ++k) g->st[k][0] = 0;
      return 0;
    }
  }
  for (int i = 0; i < rank; ++i) {
    if (dims[i] == 1) continue;
    bool merge = !md.empty();
    for (int k = 0; k < nops && merge; ++k) merge = ms[k].back() == strides[k][i] * dims[i];
    if (merge) {
      md.back() *= dims[i];
      for (int k = 0; k < nops; ++k) ms[k].back() = strides[k][i];
    } else {
      md.push_back(dims[i]);
      for (int k = 0; k < nops; ++k) ms[k].push_back(strides[k][i]);
    }
  }
  if (md.empty()) {
    md.push_back(1);
    for (int k = 0; k < nops; ++k) ms[k].push_back(0);
  }
  if (md.size() > ORTLITE_CUDA_MAX_RANK)
    return fail("%zu dims remain after merging; at most %d are supported", md.size(),
                ORTLITE_CUDA_MAX_RANK);
  g->rank = static_cast<int>(md.size());
  for (size_t d = 0; d < md.size(); ++d) {
    g->dims[d] = md[d];
    for (int k = 0; k < 3; ++k) g->st[k][d] = k < nops ? ms[k][d] : 0;
  }
  return 0;
}

int64_t geom_count(const Geom& g) {
  int64_t n = 1;
  for (int d = 0; d < g.rank; ++d) n *= g.dims[d];
  return n;
}

bool geom_fits_int32(const Geom& g, int nops) {
  const int64_t lim = int64_t{1} << 31;
  // The count leaves room for the grid stride, so the loop index never overflows.
  if (geom_count(g) >= (int64_t{1} << 30)) return false;
  for (int k = 0; k < nops; ++k) {
    int64_t span = 0;
    for (int d = 0; d < g.rank; ++d) {
      const int64_t s = g.st[k][d] < 0 ? -g.st[k][d] : g.st[k][d];
      span += (g.dims[d] - 1) * s;
      if (span >= lim) return false;
    }
  }
  return true;
}

namespace {

// ---- devices --------------------------------------------------------------------------

constexpr int kMaxDevices = 64;
std::atomic<int> g_allow_tf32{0};

struct DeviceState {
  std::once_flag once;
  int init_status = 0;  // 0 ok, else failed (message in init_error)
  char init_error[512] = "";
  bool pools = false;
  cudaMemPool_t pool = nullptr;
  cudaStream_t internal = nullptr;
  std::mutex mu;
  std::vector<OrtliteCudaStream*> free_streams;
};

DeviceState g_devices[kMaxDevices];

int device_count_raw(int* count) {
  const cudaError_t e = cudaGetDeviceCount(count);
  if (e != cudaSuccess) {
    *count = 0;
    cudaGetLastError();
    fail("cudaGetDeviceCount: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    return 0;
  }
  if (*count > kMaxDevices) *count = kMaxDevices;
  if (*count == 0) fail("no CUDA device");
  return 0;
}

// Checks `device` and makes its state ready; nullptr with the error set otherwise.
DeviceState* device_state(int device) {
  int count = 0;
  device_count_raw(&count);
  if (device < 0 || device >= count) {
    fail("CUDA device %d does not exist (%d device%s)", device, count, count == 1 ? "" : "s");
    return nullptr;
  }
  DeviceState& st = g_devices[device];
  std::call_once(st.once, [&] {
    DeviceGuard guard(device);
    cudaError_t e = guard.status();
    int pools = 0;
    if (e == cudaSuccess)
      e = cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&st.internal, cudaStreamNonBlocking);
    // ORTLITE_CUDA_ALLOCATOR=plain: cudaMalloc / cudaFree per buffer, no cache (for
    // compute-sanitizer, which then checks every buffer's bounds exactly).
    const char* mode = std::getenv("ORTLITE_CUDA_ALLOCATOR");
    if (mode && std::strcmp(mode, "plain") == 0) pools = 0;
    if (e == cudaSuccess && pools) {
      cudaMemPoolProps props;
      std::memset(&props, 0, sizeof(props));
      props.allocType = cudaMemAllocationTypePinned;
      props.handleTypes = cudaMemHandleTypeNone;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = device;
      e = cudaMemPoolCreate(&st.pool, &props);
      // Keep freed memory reserved: the pool is the cache.
      uint64_t keep = UINT64_MAX;
      if (e == cudaSuccess)
        e = cudaMemPoolSetAttribute(st.pool, cudaMemPoolAttrReleaseThreshold, &keep);
      st.pools = e == cudaSuccess;
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      st.init_status = 1;
      std::snprintf(st.init_error, sizeof(st.init_error), "CUDA device %d: %s (%s)", device,
                    cudaGetErrorString(e), cudaGetErrorName(e));
    }
  });
  if (st.init_status) {
    fail("%s", st.init_error);
    return nullptr;
  }
  return &st;
}

int api_device_count(int* count) {
  if (!count) return fail("device_count: NULL argument");
  return device_count_raw(count);
}

int api_device_props(int device, OrtliteCudaDeviceProps* props) {
  if (!props) return fail("device_props: NULL argument");
  if (!device_state(device)) return 1;
  cudaDeviceProp p;
  OC_TRY(cudaGetDeviceProperties(&p, device));
  std::memset(props, 0, sizeof(*props));
  std::snprintf(props->name, sizeof(props->name), "%s", p.name);
  props->total_memory = p.totalGlobalMem;
  props->major = p.major;
  props->minor = p.minor;
  props->multiprocessor_count = p.multiProcessorCount;
  props->memory_pools_supported = g_devices[device].pools ? 1 : 0;
  return 0;
}

int api_set_allow_tf32(int allow) {
  g_allow_tf32.store(allow ? 1 : 0);
  return 0;
}

// ---- memory ---------------------------------------------------------------------------

int api_alloc(int device, size_t bytes, OrtliteCudaStream* stream, void** out) {
  if (!out) return fail("alloc: NULL argument");
  *out = nullptr;
  DeviceState* st = device_state(device);
  if (!st) return 1;
  if (stream && stream->device != device)
    return fail("alloc on device %d with a stream of device %d", device, stream->device);
  OC_DEVICE(device);
  if (bytes == 0) bytes = 1;
  cudaError_t e;
  if (st->pools) {
    cudaStream_t s = stream ? stream->stream : st->internal;
    e = cudaMallocFromPoolAsync(out, bytes, st->pool, s);
    if (e == cudaSuccess && !stream) e = cudaStreamSynchronize(st->internal);
  } else {
    e = cudaMalloc(out, bytes);
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    *out = nullptr;
    return fail("CUDA device %d: cannot allocate %zu bytes: %s", device, bytes,
                cudaGetErrorString(e));
  }
  return 0;
}

int api_free(int device, void* ptr, OrtliteCudaStream* stream) {
  if (!ptr) return 0;
  if (device < 0 || device >= kMaxDevices) return fail("free: bad device %d", device);
  DeviceState& st = g_devices[device];
  DeviceGuard guard(device);
  cudaError_t e = guard.status();
  if (e == cudaSuccess) {
    if (st.pools)
      e = cudaFreeAsync(ptr, stream ? stream->stream : st.internal);
    else
      e = cudaFree(ptr);
  }
  // At process exit the runtime may be gone before the last buffers are dropped.
  if (e == cudaErrorCudartUnloading || e == cudaErrorContextIsDestroyed) e = cudaSuccess;
  if (e != cudaSuccess) return cuda_fail(e, "free");
  return 0;
}

int api_memory_stats(int device, size_t* reserved, size_t* in_use) {
  DeviceState* st = device_state(device);
  if (!st) return 1;
  uint64_t r = 0, u = 0;
  if (st->pools) {
    OC_TRY(cudaMemPoolGetAttribute(st->pool, cudaMemPoolAttrReservedMemCurrent, &r));
    OC_TRY(cudaMemPoolGetAttribute(st->pool, cudaMemPoolAttrUsedMemCurrent, &u));
  }
  if (reserved) *reserved = static_cast<size_t>(r);
  if (in_use) *in_use = static_cast<size_t>(u);
  return 0;
}

int api_empty_cache(int device) {
  DeviceState* st = device_state(device);
  if (!st) return 1;
  if (!st->pools) return 0;
  OC_DEVICE(device);
  OC_TRY(cudaDeviceSynchronize());
  OC_TRY(cudaMemPoolTrimTo(st->pool, 0));
  return 0;
}

cudaMemcpyKind copy_kind(int kind) {
  switch (kind) {
    case ORTLITE_CUDA_H2D:
      return cudaMemcpyHostToDevice;
    case ORTLITE_CUDA_D2H:
      return cudaMemcpyDeviceToHost;
    default:
      return cudaMemcpyDeviceToDevice;
  }
}

int api_memcpy(int device, void* dst, const void* src, size_t bytes, int kind,
               OrtliteCudaStream* stream) {
  if (kind != ORTLITE_CUDA_H2D && kind != ORTLITE_CUDA_D2H && kind != ORTLITE_CUDA_D2D)
    return fail("memcpy: unknown kind %d", kind);
  if (bytes == 0) return 0;
  DeviceState* st = device_state(device);
  if (!st) return 1;
  if (stream && stream->device != device)
    return fail("memcpy on device %d with a stream of device %d", device, stream->device);
  OC_DEVICE(device);
  cudaStream_t s = stream ? stream->stream : st->internal;
  OC_TRY(cudaMemcpyAsync(dst, src, bytes, copy_kind(kind), s));
  if (!stream) OC_TRY(cudaStreamSynchronize(s));
  return 0;
}

int api_memset_zero(void* dst, size_t bytes, OrtliteCudaStream* stream) {
  OC_STREAM(stream);
  if (bytes == 0) return 0;
  OC_TRY(cudaMemsetAsync(dst, 0, bytes, stream->stream));
  return 0;
}

// ---- streams and events ---------------------------------------------------------------

int api_stream_acquire(int device, OrtliteCudaStream** out) {
  if (!out) return fail("stream_acquire: NULL argument");
  *out = nullptr;
  DeviceState* st = device_state(device);
  if (!st) return 1;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    if (!st->free_streams.empty()) {
      *out = st->free_streams.back();
      st->free_streams.pop_back();
      return 0;
    }
  }
  OC_DEVICE(device);
  cudaStream_t s = nullptr;
  OC_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto* stream = new OrtliteCudaStream();
  stream->device = device;
  stream->stream = s;
  *out = stream;
  return 0;
}

int api_stream_sync(OrtliteCudaStream* stream) {
  OC_STREAM(stream);
  OC_TRY(cudaStreamSynchronize(stream->stream));
  return 0;
}

int api_stream_release(OrtliteCudaStream* stream) {
  OC_STREAM(stream);
  const cudaError_t e = cudaStreamSynchronize(stream->stream);
  {
    std::lock_guard<std::mutex> lock(g_devices[stream->device].mu);
    g_devices[stream->device].free_streams.push_back(stream);
  }
  if (e != cudaSuccess) return cuda_fail(e, "stream_release: cudaStreamSynchronize");
  return 0;
}

int api_stream_device(OrtliteCudaStream* stream, int* device) {
  if (!stream || !device) return fail("stream_device: NULL argument");
  *device = stream->device;
  return 0;
}

int api_stream_wait_event(OrtliteCudaStream* stream, OrtliteCudaEvent* event) {
  OC_STREAM(stream);
  if (!event) return fail("stream_wait_event: NULL event");
  OC_TRY(cudaStreamWaitEvent(stream->stream, event->event, 0));
  return 0;
}

int api_event_create(int device, int timing, OrtliteCudaEvent** out) {
  if (!out) return fail("event_create: NULL argument");
  *out = nullptr;
  if (!device_state(device)) return 1;
  OC_DEVICE(device);
  cudaEvent_t e = nullptr;
  OC_TRY(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  auto* ev = new OrtliteCudaEvent();
  ev->device = device;
  ev->event = e;
  *out = ev;
  return 0;
}

int api_event_record(OrtliteCudaEvent* event, OrtliteCudaStream* stream) {
  OC_STREAM(stream);
  if (!event) return fail("event_record: NULL event");
  OC_TRY(cudaEventRecord(event->event, stream->stream));
  return 0;
}

int api_event_sync(OrtliteCudaEvent* event) {
  if (!event) return fail("event_sync: NULL event");
  OC_TRY(cudaEventSynchronize(event->event));
  return 0;
}

int api_event_query(OrtliteCudaEvent* event, int* done) {
  if (!event || !done) return fail("event_query: NULL argument");
  const cudaError_t e = cudaEventQuery(event->event);
  if (e == cudaErrorNotReady) {
    cudaGetLastError();  // not an error: keep it out of the next launch check
    *done = 0;
    return 0;
  }
  OC_TRY(e);
  *done = 1;
  return 0;
}

int api_event_elapsed_ms(OrtliteCudaEvent* start, OrtliteCudaEvent* end, float* ms) {
  if (!start || !end || !ms) return fail("event_elapsed_ms: NULL argument");
  OC_TRY(cudaEventElapsedTime(ms, start->event, end->event));
  return 0;
}

int api_event_destroy(OrtliteCudaEvent* event) {
  if (!event) return 0;
  DeviceGuard guard(event->device);
  const cudaError_t e = cudaEventDestroy(event->event);
  delete event;
  if (e != cudaSuccess && e != cudaErrorCudartUnloading) return cuda_fail(e, "cudaEventDestroy");
  return 0;
}

// ---- cuBLAS ---------------------------------------------------------------------------

int cublas_fail(cublasStatus_t s, const char* what) {
  return fail("cuBLAS %s: %s", what, cublasGetStatusString(s));
}

#define OC_CUBLAS(expr)                                                   \
  do {                                                                    \
    const cublasStatus_t oc_s_ = (expr);                                  \
    if (oc_s_ != CUBLAS_STATUS_SUCCESS) return cublas_fail(oc_s_, #expr); \
  } while (0)

// The stream's cuBLAS handle (the current device is the stream's).
int cublas_of(OrtliteCudaStream* stream, cublasHandle_t* out) {
  if (!stream->cublas) {
    cublasHandle_t h = nullptr;
    OC_CUBLAS(cublasCreate(&h));
    const cublasStatus_t s = cublasSetStream(h, stream->stream);
    if (s != CUBLAS_STATUS_SUCCESS) {
      cublasDestroy(h);
      return cublas_fail(s, "cublasSetStream");
    }
    stream->cublas = h;
  }
  *out = static_cast<cublasHandle_t>(stream->cublas);
  return 0;
}

int api_gemm(OrtliteCudaStream* stream, int dtype, int trans_a, int trans_b, int64_t m, int64_t n,
             int64_t k, double alpha, const void* a, int64_t lda, int64_t stride_a, const void* b,
             int64_t ldb, int64_t stride_b, double beta, void* c, int64_t ldc, int64_t stride_c,
             int64_t batch) {
  OC_STREAM(stream);
  const int64_t lim = 2147483647;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || m > lim || n > lim || k > lim || lda > lim ||
      ldb > lim || ldc > lim || batch > lim)
    return fail("gemm: sizes out of range (m %lld, n %lld, k %lld, batch %lld)",
                static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k),
                static_cast<long long>(batch));
  if (m == 0 || n == 0 || batch == 0) return 0;
  cublasHandle_t h = nullptr;
  if (cublas_of(stream, &h)) return 1;
  const bool tf32 = g_allow_tf32.load() != 0 && dtype == kFloat;
  OC_CUBLAS(cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  const cublasOperation_t oa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t ob = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(k);
  const int LA = static_cast<int>(lda), LB = static_cast<int>(ldb), LC = static_cast<int>(ldc);
  const int B = static_cast<int>(batch);
  switch (dtype) {
    case kFloat: {
      const float al = static_cast<float>(alpha), be = static_cast<float>(beta);
      const auto* A = static_cast<const float*>(a);
      const auto* Bm = static_cast<const float*>(b);
      auto* C = static_cast<float*>(c);
      if (B == 1)
        OC_CUBLAS(cublasSgemm(h, oa, ob, M, N, K, &al, A, LA, Bm, LB, &be, C, LC));
      else
        OC_CUBLAS(cublasSgemmStridedBatched(h, oa, ob, M, N, K, &al, A, LA, stride_a, Bm, LB,
                                            stride_b, &be, C, LC, stride_c, B));
      return 0;
    }
    case kDouble: {
      const double al = alpha, be = beta;
      OC_CUBLAS(cublasDgemmStridedBatched(h, oa, ob, M, N, K, &al, static_cast<const double*>(a),
                                          LA, stride_a, static_cast<const double*>(b), LB, stride_b,
                                          &be, static_cast<double*>(c), LC, stride_c, B));
      return 0;
    }
    case kFloat16:
    case kBFloat16: {
      const float al = static_cast<float>(alpha), be = static_cast<float>(beta);
      const cudaDataType_t t = dtype == kFloat16 ? CUDA_R_16F : CUDA_R_16BF;
      OC_CUBLAS(cublasGemmStridedBatchedEx(h, oa, ob, M, N, K, &al, a, t, LA, stride_a, b, t, LB,
                                           stride_b, &be, c, t, LC, stride_c, B, CUBLAS_COMPUTE_32F,
                                           CUBLAS_GEMM_DEFAULT));
      return 0;
    }
    default:
      return fail("gemm: element type %s is not supported on CUDA", dtype_name(dtype));
  }
}

// ---- cuDNN ----------------------------------------------------------------------------

int cudnn_fail(cudnnStatus_t s, const char* what) {
  return fail("cuDNN %s: %s", what, cudnnGetErrorString(s));
}

#define OC_CUDNN(expr)                                                  \
  do {                                                                  \
    const cudnnStatus_t oc_s_ = (expr);                                 \
    if (oc_s_ != CUDNN_STATUS_SUCCESS) return cudnn_fail(oc_s_, #expr); \
  } while (0)

int cudnn_of(OrtliteCudaStream* stream, cudnnHandle_t* out) {
  if (!stream->cudnn) {
    cudnnHandle_t h = nullptr;
    OC_CUDNN(cudnnCreate(&h));
    const cudnnStatus_t s = cudnnSetStream(h, stream->stream);
    if (s != CUDNN_STATUS_SUCCESS) {
      cudnnDestroy(h);
      return cudnn_fail(s, "cudnnSetStream");
    }
    stream->cudnn = h;
  }
  *out = static_cast<cudnnHandle_t>(stream->cudnn);
  return 0;
}

struct ConvDescs {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, b = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ~ConvDescs() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (b) cudnnDestroyTensorDescriptor(b);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

struct ConvChoice {
  cudnnConvolutionFwdAlgo_t algo;
  cudnnMathType_t math;
  size_t workspace;
};

std::mutex g_conv_mu;
std::map<std::string, ConvChoice>* g_conv_cache = new std::map<std::string, ConvChoice>();

constexpr size_t kMaxConvWorkspace = size_t{1} << 30;

int set_tensor(cudnnTensorDescriptor_t d, cudnnDataType_t t, int nd, const int* dims) {
  int strides[5];
  strides[nd - 1] = 1;
  for (int i = nd - 2; i >= 0; --i) strides[i] = strides[i + 1] * dims[i + 1];
  OC_CUDNN(cudnnSetTensorNdDescriptor(d, t, nd, dims, strides));
  return 0;
}

// Queues a workspace allocation and its release on the stream.
struct Workspace {
  int device;
  OrtliteCudaStream* stream;
  void* ptr = nullptr;
  ~Workspace() {
    if (ptr) api_free(device, ptr, stream);
  }
};

int api_conv_forward(OrtliteCudaStream* stream, const OrtliteCudaConvParams* p, const void* x,
                     const void* w, const void* bias, void* y) {
  OC_STREAM(stream);
  if (!p) return fail("conv_forward: NULL parameters");
  const int sr = p->spatial_rank;
  if (sr < 1 || sr > 3) return fail("Conv over %d spatial dims (1 to 3 supported)", sr);
  cudnnDataType_t dt;
  cudnnDataType_t compute;
  switch (p->dtype) {
    case kFloat:
      dt = CUDNN_DATA_FLOAT;
      compute = CUDNN_DATA_FLOAT;
      break;
    case kFloat16:
      dt = CUDNN_DATA_HALF;
      compute = CUDNN_DATA_FLOAT;
      break;
    case kDouble:
      dt = CUDNN_DATA_DOUBLE;
      compute = CUDNN_DATA_DOUBLE;
      break;
    default:
      return fail("Conv: element type %s is not supported on CUDA", dtype_name(p->dtype));
  }
  if (p->group < 1 || p->in_channels % p->group || p->out_channels % p->group)
    return fail("Conv: group %lld does not divide the channels", static_cast<long long>(p->group));
  // cuDNN wants at least 2 spatial dims: 1-D runs as 2-D with a leading spatial dim of 1.
  const int ns = sr < 2 ? 2 : sr;
  const int lead = ns - sr;
  const int nd = ns + 2;
  int xd[5], wd[5], yd[5], pad[3], str[3], dil[3];
  const int64_t lim = 2147483647;
  auto fits = [&](int64_t v) { return v >= 0 && v <= lim; };
  if (!fits(p->batch) || !fits(p->in_channels) || !fits(p->out_channels))
    return fail("Conv: sizes out of range");
  xd[0] = static_cast<int>(p->batch);
  xd[1] = static_cast<int>(p->in_channels);
  wd[0] = static_cast<int>(p->out_channels);
  wd[1] = static_cast<int>(p->in_channels / p->group);
  yd[0] = xd[0];
  yd[1] = wd[0];
  for (int i = 0; i < ns; ++i) {
    const int j = i - lead;  // index into p's spatial arrays, < 0 for the added dim
    const int64_t in = j < 0 ? 1 : p->in[j], k = j < 0 ? 1 : p->kernel[j],
                  out = j < 0 ? 1 : p->out[j], pd = j < 0 ? 0 : p->pad[j],
                  s = j < 0 ? 1 : p->stride[j], d = j < 0 ? 1 : p->dilation[j];
    if (!fits(in) || !fits(k) || !fits(out) || !fits(pd) || !fits(s) || !fits(d) || k < 1 ||
        s < 1 || d < 1)
      return fail("Conv: bad geometry on spatial axis %d", j);
    xd[2 + i] = static_cast<int>(in);
    wd[2 + i] = static_cast<int>(k);
    yd[2 + i] = static_cast<int>(out);
    pad[i] = static_cast<int>(pd);
    str[i] = static_cast<int>(s);
    dil[i] = static_cast<int>(d);
  }
  int64_t y_count = 1;
  for (int i = 0; i < nd; ++i) y_count *= yd[i];
  if (y_count == 0) return 0;

  cudnnHandle_t h = nullptr;
  if (cudnn_of(stream, &h)) return 1;
  ConvDescs D;
  OC_CUDNN(cudnnCreateTensorDescriptor(&D.x));
  OC_CUDNN(cudnnCreateTensorDescriptor(&D.y));
  OC_CUDNN(cudnnCreateFilterDescriptor(&D.w));
  OC_CUDNN(cudnnCreateConvolutionDescriptor(&D.conv));
  if (set_tensor(D.x, dt, nd, xd) || set_tensor(D.y, dt, nd, yd)) return 1;
  OC_CUDNN(cudnnSetFilterNdDescriptor(D.w, dt, CUDNN_TENSOR_NCHW, nd, wd));
  OC_CUDNN(
      cudnnSetConvolutionNdDescriptor(D.conv, ns, pad, str, dil, CUDNN_CROSS_CORRELATION, compute));
  OC_CUDNN(cudnnSetConvolutionGroupCount(D.conv, static_cast<int>(p->group)));
  const bool tf32 = g_allow_tf32.load() != 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  if (p->dtype == kFloat && !tf32) math = CUDNN_FMA_MATH;  // no TF32: fp32 results as on the CPU
  if (p->dtype == kFloat16) math = CUDNN_TENSOR_OP_MATH;
  OC_CUDNN(cudnnSetConvolutionMathType(D.conv, math));
  int check[5];
  OC_CUDNN(cudnnGetConvolutionNdForwardOutputDim(D.conv, D.x, D.w, nd, check));
  for (int i = 0; i < nd; ++i)
    if (check[i] != yd[i])
      return fail("Conv: cuDNN computes output dim %d = %d, expected %d", i, check[i], yd[i]);

  // The algorithm: cached per device and geometry; found once by cuDNN's benchmark.
  std::string key(reinterpret_cast<const char*>(xd), sizeof(xd));
  key.append(reinterpret_cast<const char*>(wd), sizeof(wd));
  key.append(reinterpret_cast<const char*>(pad), sizeof(pad));
  key.append(reinterpret_cast<const char*>(str), sizeof(str));
  key.append(reinterpret_cast<const char*>(dil), sizeof(dil));
  const int extra[5] = {stream->device, p->dtype, static_cast<int>(p->group), nd,
                        static_cast<int>(math)};
  key.append(reinterpret_cast<const char*>(extra), sizeof(extra));
  ConvChoice choice;
  bool cached = false;
  {
    std::lock_guard<std::mutex> lock(g_conv_mu);
    auto it = g_conv_cache->find(key);
    if (it != g_conv_cache->end()) {
      choice = it->second;
      cached = true;
    }
  }
  if (!cached) {
    size_t ws_size = 0;
    for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
      size_t s = 0;
      if (cudnnGetConvolutionForwardWorkspaceSize(h, D.x, D.w, D.conv, D.y,
                                                  static_cast<cudnnConvolutionFwdAlgo_t>(a),
                                                  &s) == CUDNN_STATUS_SUCCESS &&
          s <= kMaxConvWorkspace && s > ws_size)
        ws_size = s;
    }
    Workspace ws{stream->device, stream};
    if (ws_size > 0 && api_alloc(stream->device, ws_size, stream, &ws.ptr)) {
      // Not enough memory for the largest workspace: benchmark without one.
      ws.ptr = nullptr;
      ws_size = 0;
    }
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int returned = 0;
    OC_CUDNN(cudnnFindConvolutionForwardAlgorithmEx(h, D.x, x, D.w, w, D.conv, D.y, y,
                                                    CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned,
                                                    perf, ws.ptr, ws_size));
    bool found = false;
    for (int i = 0; i < returned && !found; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > ws_size) continue;
      if (p->dtype == kFloat && !tf32 && perf[i].mathType == CUDNN_TENSOR_OP_MATH) continue;
      choice.algo = perf[i].algo;
      choice.math = perf[i].mathType;
      choice.workspace = perf[i].memory;
      found = true;
    }
    if (!found) return fail("Conv: cuDNN found no algorithm for this geometry");
    std::lock_guard<std::mutex> lock(g_conv_mu);
    (*g_conv_cache)[key] = choice;
  }
  OC_CUDNN(cudnnSetConvolutionMathType(D.conv, choice.math));
  Workspace ws{stream->device, stream};
  if (choice.workspace > 0 && api_alloc(stream->device, choice.workspace, stream, &ws.ptr))
    return 1;
  const float f1 = 1.f, f0 = 0.f;
  const double d1 = 1.0, d0 = 0.0;
  const void* one = p->dtype == kDouble ? static_cast<const void*>(&d1) : &f1;
  const void* zero = p->dtype == kDouble ? static_cast<const void*>(&d0) : &f0;
  OC_CUDNN(cudnnConvolutionForward(h, one, D.x, x, D.w, w, D.conv, choice.algo, ws.ptr,
                                   choice.workspace, zero, D.y, y));
  if (bias) {
    int bd[5];
    for (int i = 0; i < nd; ++i) bd[i] = 1;
    bd[1] = yd[1];
    OC_CUDNN(cudnnCreateTensorDescriptor(&D.b));
    if (set_tensor(D.b, dt, nd, bd)) return 1;
    OC_CUDNN(cudnnAddTensor(h, one, D.b, bias, one, D.y, y));
  }
  return 0;
}

const char* api_last_error() {
  return last_error();
}

OrtliteCudaApi make_api() {
  OrtliteCudaApi a;
  std::memset(&a, 0, sizeof(a));
  a.abi_version = ORTLITE_CUDA_ABI_VERSION;
  a.struct_size = sizeof(OrtliteCudaApi);
  a.last_error = api_last_error;
  a.device_count = api_device_count;
  a.device_props = api_device_props;
  a.set_allow_tf32 = api_set_allow_tf32;
  a.alloc = api_alloc;
  a.free = api_free;
  a.memory_stats = api_memory_stats;
  a.empty_cache = api_empty_cache;
  a.memcpy = api_memcpy;
  a.memset_zero = api_memset_zero;
  a.stream_acquire = api_stream_acquire;
  a.stream_sync = api_stream_sync;
  a.stream_release = api_stream_release;
  a.stream_device = api_stream_device;
  a.stream_wait_event = api_stream_wait_event;
  a.event_create = api_event_create;
  a.event_record = api_event_record;
  a.event_sync = api_event_sync;
  a.event_query = api_event_query;
  a.event_elapsed_ms = api_event_elapsed_ms;
  a.event_destroy = api_event_destroy;
  a.gemm = api_gemm;
  a.conv_forward = api_conv_forward;
  a.binary = binary;
  a.unary = unary;
  a.where = where;
  a.cast = cast;
  a.strided_copy = strided_copy;
  a.concat = concat;
  a.gather = gather;
  a.softmax = softmax;
  a.layer_norm = layer_norm;
  a.batch_norm = batch_norm;
  a.reduce = reduce;
  a.pool = pool;
  return a;
}

const OrtliteCudaApi g_api = make_api();

}  // namespace
}  // namespace ortlite_cuda

extern "C" __attribute__((visibility("default"))) const OrtliteCudaApi* ortlite_cuda_api(
    int abi_version) {
  if (abi_version != ORTLITE_CUDA_ABI_VERSION) return nullptr;
  return &ortlite_cuda::g_api;
}
