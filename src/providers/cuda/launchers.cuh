// The kernel launchers of the CUDA library, defined in elementwise.cu, nn.cu and tensor.cu
// and put into the OrtliteCudaApi table by runtime.cu. Signatures are the table's.
#pragma once

#include "providers/cuda/cuda_api.h"

namespace ortlite_cuda {

// elementwise.cu
int binary(OrtliteCudaStream* stream, int op, int dtype, int rank, const int64_t* out_dims,
           const void* a, const int64_t* a_strides, const void* b, const int64_t* b_strides,
           void* out);
int unary(OrtliteCudaStream* stream, int op, int dtype, int64_t n, const void* x, void* y,
          double alpha, double beta);
int where(OrtliteCudaStream* stream, int elem_size, int rank, const int64_t* out_dims,
          const void* cond, const int64_t* cond_strides, const void* x, const int64_t* x_strides,
          const void* y, const int64_t* y_strides, void* out);
int cast(OrtliteCudaStream* stream, int src_dtype, int dst_dtype, int64_t n, const void* x,
         void* y);

// tensor.cu
int strided_copy(OrtliteCudaStream* stream, int elem_size, int rank, const int64_t* dims,
                 const void* src, const int64_t* src_strides, void* dst,
                 const int64_t* dst_strides);
int concat(OrtliteCudaStream* stream, int elem_size, int count, const void* const* inputs,
           const int64_t* axis_sizes, int64_t outer, int64_t inner, void* out);
int gather(OrtliteCudaStream* stream, int elem_size, int index_dtype, int64_t outer, int64_t axis,
           int64_t inner, int64_t m, const void* data, const void* indices, void* out,
           int* bad_index);

// nn.cu
int softmax(OrtliteCudaStream* stream, int dtype, int log, int64_t outer, int64_t n, int64_t inner,
            const void* x, void* y);
int layer_norm(OrtliteCudaStream* stream, int dtype, int64_t rows, int64_t cols, float epsilon,
               const void* x, const void* scale, const void* bias, void* y, float* mean,
               float* inv_std);
int batch_norm(OrtliteCudaStream* stream, int dtype, int64_t n, int64_t param_div,
               int64_t param_period, float epsilon, const void* x, const void* scale,
               const void* bias, const void* mean, const void* var, void* y);
int reduce(OrtliteCudaStream* stream, int op, int dtype, int kept_rank, const int64_t* kept_dims,
           const int64_t* kept_strides, int red_rank, const int64_t* red_dims,
           const int64_t* red_strides, int64_t red_count, const void* x, void* y);
int pool(OrtliteCudaStream* stream, const OrtliteCudaPoolParams* p, const void* x, void* y,
         int64_t* indices);

}  // namespace ortlite_cuda
