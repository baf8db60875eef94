/* The C ABI between ortlite's main extension and its CUDA library (_ortlite_cuda.so).
 *
 * The CUDA library is built by nvcc from the .cu files of src/providers/cuda, links cudart
 * (static), cuBLAS and cuDNN, and exports one symbol, ortlite_cuda_api(). The main extension never
 * links CUDA: it dlopens the library when the CUDA provider is first asked for
 * (src/providers/cuda/provider.cc) and calls through the table below. This header is plain C and
 * includes no CUDA header, so g++ compiles the main extension's side without the toolkit.
 *
 * Conventions:
 *   - Every function returns 0 on success. On failure it returns non-zero and last_error()
 *     gives a message (thread-local, valid until the next call on the same thread).
 *   - Element types are ONNX TensorProto numbers (1 float, 10 float16, 16 bfloat16, ...).
 *   - Shapes and strides are int64_t arrays, counted in elements, row-major; rank <= 8
 *     (ORTLITE_CUDA_MAX_RANK) after merging adjacent dims.
 *   - Work is queued on a stream and runs asynchronously; pointers handed to a launcher
 *     must stay valid until the stream has passed that work.
 *   - Bump ORTLITE_CUDA_ABI_VERSION on any change to this file.
 */
#ifndef ORTLITE_CUDA_API_H_
#define ORTLITE_CUDA_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ORTLITE_CUDA_ABI_VERSION 1
#define ORTLITE_CUDA_MAX_RANK 8
#define ORTLITE_CUDA_SYMBOL "ortlite_cuda_api"

/* A stream of one device, with its cuBLAS / cuDNN handles. Streams come from a per-device
 * pool: stream_acquire reuses a released one, so acquiring one per run is cheap. */
typedef struct OrtliteCudaStream OrtliteCudaStream;
typedef struct OrtliteCudaEvent OrtliteCudaEvent;

typedef struct OrtliteCudaDeviceProps {
  char name[256];
  size_t total_memory;
  int major;
  int minor;
  int multiprocessor_count;
  int memory_pools_supported;
} OrtliteCudaDeviceProps;

enum OrtliteCudaCopyKind {
  ORTLITE_CUDA_H2D = 1,
  ORTLITE_CUDA_D2H = 2,
  ORTLITE_CUDA_D2D = 3,
};

enum OrtliteCudaBinaryOp {
  /* arithmetic: out has the inputs' type */
  ORTLITE_CUDA_ADD = 0,
  ORTLITE_CUDA_SUB,
  ORTLITE_CUDA_MUL,
  ORTLITE_CUDA_DIV,   /* integers: truncation, x / 0 = 0, INT_MIN / -1 = INT_MIN */
  ORTLITE_CUDA_POW,   /* floating types only */
  ORTLITE_CUDA_MIN,   /* NaN wins */
  ORTLITE_CUDA_MAX,   /* NaN wins */
  ORTLITE_CUDA_PRELU, /* a < 0 ? a * b : a */
  /* comparisons: out is bool */
  ORTLITE_CUDA_EQUAL,
  ORTLITE_CUDA_LESS,
  ORTLITE_CUDA_GREATER,
  ORTLITE_CUDA_LESS_EQUAL,
  ORTLITE_CUDA_GREATER_EQUAL,
  /* logical: bool in, bool out */
  ORTLITE_CUDA_AND,
  ORTLITE_CUDA_OR,
  ORTLITE_CUDA_XOR,
  ORTLITE_CUDA_BINARY_OP_COUNT
};

/* y = f(x); floating types (float, double, float16, bfloat16), except NOT (bool). */
enum OrtliteCudaUnaryOp {
  ORTLITE_CUDA_RELU = 0,
  ORTLITE_CUDA_LEAKY_RELU, /* alpha */
  ORTLITE_CUDA_SIGMOID,
  ORTLITE_CUDA_TANH,
  ORTLITE_CUDA_GELU,         /* erf form */
  ORTLITE_CUDA_GELU_TANH,    /* tanh approximation */
  ORTLITE_CUDA_ELU,          /* alpha */
  ORTLITE_CUDA_SELU,         /* alpha, beta = gamma */
  ORTLITE_CUDA_HARD_SIGMOID, /* alpha, beta */
  ORTLITE_CUDA_HARD_SWISH,
  ORTLITE_CUDA_SOFTPLUS,
  ORTLITE_CUDA_SOFTSIGN,
  ORTLITE_CUDA_EXP,
  ORTLITE_CUDA_LOG,
  ORTLITE_CUDA_SQRT,
  ORTLITE_CUDA_ABS,
  ORTLITE_CUDA_NEG,
  ORTLITE_CUDA_RECIPROCAL,
  ORTLITE_CUDA_ERF,
  ORTLITE_CUDA_SIN,
  ORTLITE_CUDA_COS,
  ORTLITE_CUDA_FLOOR,
  ORTLITE_CUDA_CEIL,
  ORTLITE_CUDA_CLIP, /* alpha = min, beta = max */
  ORTLITE_CUDA_NOT,  /* bool */
  ORTLITE_CUDA_UNARY_OP_COUNT
};

enum OrtliteCudaReduceOp {
  ORTLITE_CUDA_REDUCE_SUM = 0,
  ORTLITE_CUDA_REDUCE_MEAN,
  ORTLITE_CUDA_REDUCE_MAX,
  ORTLITE_CUDA_REDUCE_MIN,
  ORTLITE_CUDA_REDUCE_PROD,
  ORTLITE_CUDA_REDUCE_SUM_SQUARE,
  ORTLITE_CUDA_REDUCE_L1,
  ORTLITE_CUDA_REDUCE_L2,
  ORTLITE_CUDA_REDUCE_LOG_SUM,
  ORTLITE_CUDA_REDUCE_LOG_SUM_EXP,
  ORTLITE_CUDA_REDUCE_OP_COUNT
};

/* Convolution (cross-correlation) over 1 to 3 spatial dims, NCHW layout, symmetric pads
 * (the caller pads the input itself otherwise). */
typedef struct OrtliteCudaConvParams {
  int dtype; /* float, float16 or double; x, w, bias and y share it */
  int spatial_rank;
  int64_t batch, in_channels, out_channels, group;
  int64_t in[3], kernel[3], out[3], pad[3], stride[3], dilation[3];
} OrtliteCudaConvParams;

/* Max / average pooling over 1 to 3 spatial dims, viewed as 3-D (leading dims of size 1). */
typedef struct OrtliteCudaPoolParams {
  int dtype; /* float, double, float16, bfloat16 */
  int is_max;
  int count_include_pad; /* average: padded taps count in the divisor */
  int clip_divisor;      /* with count_include_pad: only taps inside the padded input count */
  int storage_order;     /* max with indices: 0 row-major, 1 column-major spatial */
  int spatial_rank;      /* real spatial axes (the last `spatial_rank` of the 3) */
  int64_t channels;      /* N * C */
  int64_t in[3], out[3], kernel[3], stride[3], dilation[3], pad_begin[3], pad_end[3];
} OrtliteCudaPoolParams;

typedef struct OrtliteCudaApi {
  int abi_version;
  size_t struct_size;

  const char* (*last_error)(void);

  /* ---- devices ---- */
  /* 0 devices (with success) when there is no driver or no GPU; last_error() then says why. */
  int (*device_count)(int* count);
  int (*device_props)(int device, OrtliteCudaDeviceProps* props);
  /* 0: fp32 matrix products and convolutions are computed in fp32 (the default);
   * 1: they may use TF32 tensor cores (faster, ~1e-3 relative error). */
  int (*set_allow_tf32)(int allow);

  /* ---- memory: a caching, stream-ordered allocator per device ----
   * alloc queues the allocation on `stream` (NULL: the device's internal stream, and the
   * call waits until the memory is usable everywhere). free queues the release on `stream`
   * (NULL: the internal stream; the caller guarantees no queued work still uses it). Freed
   * blocks stay reserved for reuse until empty_cache. */
  int (*alloc)(int device, size_t bytes, OrtliteCudaStream* stream, void** out);
  int (*free)(int device, void* ptr, OrtliteCudaStream* stream);
  int (*memory_stats)(int device, size_t* reserved, size_t* in_use);
  int (*empty_cache)(int device);
  /* Copies on `stream` (NULL: synchronous on the device's internal stream). Host memory may
   * be pageable. */
  int (*memcpy)(int device, void* dst, const void* src, size_t bytes, int kind,
                OrtliteCudaStream* stream);
  int (*memset_zero)(void* dst, size_t bytes, OrtliteCudaStream* stream);

  /* ---- streams and events ---- */
  int (*stream_acquire)(int device, OrtliteCudaStream** out);
  int (*stream_sync)(OrtliteCudaStream* stream);
  /* Waits for the stream's work, then returns it to the pool. */
  int (*stream_release)(OrtliteCudaStream* stream);
  int (*stream_device)(OrtliteCudaStream* stream, int* device);
  int (*stream_wait_event)(OrtliteCudaStream* stream, OrtliteCudaEvent* event);
  int (*event_create)(int device, int timing, OrtliteCudaEvent** out);
  int (*event_record)(OrtliteCudaEvent* event, OrtliteCudaStream* stream);
  int (*event_sync)(OrtliteCudaEvent* event);
  int (*event_query)(OrtliteCudaEvent* event, int* done);
  int (*event_elapsed_ms)(OrtliteCudaEvent* start, OrtliteCudaEvent* end, float* ms);
  int (*event_destroy)(OrtliteCudaEvent* event);

  /* ---- cuBLAS: column-major C[i] = alpha * op(A[i]) op(B[i]) + beta * C[i], i < batch,
   * with op = transpose when trans_* != 0. dtype: float (cublasSgemmStridedBatched),
   * float16 / bfloat16 (fp32 accumulation) or double. alpha / beta as double. */
  int (*gemm)(OrtliteCudaStream* stream, int dtype, int trans_a, int trans_b, int64_t m, int64_t n,
              int64_t k, double alpha, const void* a, int64_t lda, int64_t stride_a, const void* b,
              int64_t ldb, int64_t stride_b, double beta, void* c, int64_t ldc, int64_t stride_c,
              int64_t batch);

  /* ---- cuDNN: y = conv(x, w) (+ bias per output channel when bias != NULL). The
   * algorithm is chosen once per (device, parameters) by cuDNN's benchmark and cached. */
  int (*conv_forward)(OrtliteCudaStream* stream, const OrtliteCudaConvParams* p, const void* x,
                      const void* w, const void* bias, void* y);

  /* ---- ortlite's kernels ---- */
  /* out[i] = op(a[i . a_strides], b[i . b_strides]) over out_dims (broadcast dims have
   * stride 0). a and b have type `dtype`; out has it too, or bool for comparisons. */
  int (*binary)(OrtliteCudaStream* stream, int op, int dtype, int rank, const int64_t* out_dims,
                const void* a, const int64_t* a_strides, const void* b, const int64_t* b_strides,
                void* out);
  int (*unary)(OrtliteCudaStream* stream, int op, int dtype, int64_t n, const void* x, void* y,
               double alpha, double beta);
  /* out[i] = cond[i] ? x[i] : y[i] with broadcasting; x, y, out have elem_size bytes. */
  int (*where)(OrtliteCudaStream* stream, int elem_size, int rank, const int64_t* out_dims,
               const void* cond, const int64_t* cond_strides, const void* x,
               const int64_t* x_strides, const void* y, const int64_t* y_strides, void* out);
  /* Converts n elements (numeric types and bool), with the CPU kernel's rules. */
  int (*cast)(OrtliteCudaStream* stream, int src_dtype, int dst_dtype, int64_t n, const void* x,
              void* y);
  /* For every multi-index i over dims: dst[i . dst_strides] = src[i . src_strides]
   * (src strides may be 0 or negative; pointers at the element of index 0). Transpose,
   * Slice, Expand, padding and making a view dense all go through this. */
  int (*strided_copy)(OrtliteCudaStream* stream, int elem_size, int rank, const int64_t* dims,
                      const void* src, const int64_t* src_strides, void* dst,
                      const int64_t* dst_strides);
  /* Concatenation along an axis: the output is [outer, sum(axis_sizes) * inner]; input j is
   * [outer, axis_sizes[j] * inner]. */
  int (*concat)(OrtliteCudaStream* stream, int elem_size, int count, const void* const* inputs,
                const int64_t* axis_sizes, int64_t outer, int64_t inner, void* out);
  /* out[p, j, q] = data[p, idx[j], q] for data [outer, axis, inner] and m indices of type
   * index_dtype (int32 / int64; negative ones count from the end). An index out of
   * [-axis, axis) writes zeros and sets *bad_index (device memory, may be NULL) to 1. */
  int (*gather)(OrtliteCudaStream* stream, int elem_size, int index_dtype, int64_t outer,
                int64_t axis, int64_t inner, int64_t m, const void* data, const void* indices,
                void* out, int* bad_index);
  /* Softmax (or LogSoftmax when log != 0) over the middle dim of [outer, n, inner]. */
  int (*softmax)(OrtliteCudaStream* stream, int dtype, int log, int64_t outer, int64_t n,
                 int64_t inner, const void* x, void* y);
  /* Rows of `cols` elements: y = (x - mean) / sqrt(var + eps) * scale + bias (bias may be
   * NULL); scale / bias hold `cols` elements of x's type; mean / inv_std (float, one per
   * row) may be NULL. */
  int (*layer_norm)(OrtliteCudaStream* stream, int dtype, int64_t rows, int64_t cols, float epsilon,
                    const void* x, const void* scale, const void* bias, void* y, float* mean,
                    float* inv_std);
  /* Inference batch normalization of x [N, C, inner]: parameter index (i / param_div) %
   * param_period (spatial: div = inner, period = C; else div = 1, period = C * inner).
   * The four parameters have x's type. */
  int (*batch_norm)(OrtliteCudaStream* stream, int dtype, int64_t n, int64_t param_div,
                    int64_t param_period, float epsilon, const void* x, const void* scale,
                    const void* bias, const void* mean, const void* var, void* y);
  /* Reduces over merged dims: output o covers the kept multi-index (kept_dims / kept_strides,
   * outermost first), reducing the reduced multi-index (red_dims / red_strides). Strides are
   * into x. An empty reduction (red_count 0) writes the op's empty value. */
  int (*reduce)(OrtliteCudaStream* stream, int op, int dtype, int kept_rank,
                const int64_t* kept_dims, const int64_t* kept_strides, int red_rank,
                const int64_t* red_dims, const int64_t* red_strides, int64_t red_count,
                const void* x, void* y);
  /* indices (int64, may be NULL): max pooling's flat argmax indices. */
  int (*pool)(OrtliteCudaStream* stream, const OrtliteCudaPoolParams* p, const void* x, void* y,
              int64_t* indices);
} OrtliteCudaApi;

/* The table, or NULL when abi_version differs from the library's. The table and what it
 * hands out (streams, cached blocks, handles) live until the process exits. */
typedef const OrtliteCudaApi* (*OrtliteCudaApiFn)(int abi_version);

#ifdef __cplusplus
}
#endif

#endif /* ORTLITE_CUDA_API_H_ */
