// Internal to the GEMM engine: one table of packing routines and micro-kernels per
// instruction set. Each table is compiled in its own translation unit
// (gemm_kernels_<isa>.cc) from the same template body (gemm_kernel_body.inc).
#pragma once

#include <cstdint>

namespace ortlite {
namespace gemm_detail {

template <typename T>
struct GemmKernelTable {
  const char* name;
  int mr, nr;          // micro-tile
  int64_t mc, nc, kc;  // cache blocks (mc % mr == 0, nc % nr == 0)
  // Packs rows [i0, i0+mc) x k [k0, k0+kc) of op(A) into panels of mr rows, each
  // kc * mr elements (k-major), zero-padded to a multiple of mr rows.
  void (*pack_a)(bool trans, const T* A, int64_t lda, int64_t i0, int64_t mc, int64_t k0,
                 int64_t kc, T* out);
  // Packs k [k0, k0+kc) x columns [j0, j0+nc) of op(B) into panels of nr columns, each
  // kc * nr elements (k-major), zero-padded to a multiple of nr columns.
  void (*pack_b)(bool trans, const T* B, int64_t ldb, int64_t k0, int64_t kc, int64_t j0,
                 int64_t nc, T* out);
  // C[mc x nc] = alpha * Ap * Bp + beta * C (beta == 0: C not read). Panel i of Ap starts
  // at Ap + i * a_stride, panel j of Bp at Bp + j * b_stride.
  void (*macro)(int64_t mc, int64_t nc, int64_t kc, const T* Ap, int64_t a_stride, const T* Bp,
                int64_t b_stride, T* C, int64_t ldc, T alpha, T beta);
  // y[i * incy] = alpha * dot(A[i, 0:k], x) + beta * y[i * incy], i < m (x contiguous).
  void (*dot_rows)(int64_t m, int64_t k, const T* A, int64_t lda, const T* x, T* y, int64_t incy,
                   T alpha, T beta);
  // y[j] = alpha * sum_k x[k * incx] * B[k * ldb + j] + beta * y[j], j < n.
  void (*axpy_rows)(int64_t k, int64_t n, const T* B, int64_t ldb, const T* x, int64_t incx, T* y,
                    T alpha, T beta);
  // y[j] = alpha * sum_k x[k * incx] * Bp(k, j) + beta * y[j] over n columns of packed
  // panels (panel j / nr at Bp + (j / nr) * b_stride).
  void (*row_packed_b)(int64_t k, const T* x, int64_t incx, const T* Bp, int64_t b_stride,
                       int64_t n, T* y, T alpha, T beta);
};

const GemmKernelTable<float>* sse2_table_f32();
const GemmKernelTable<double>* sse2_table_f64();
const GemmKernelTable<float>* avx2_table_f32();
const GemmKernelTable<double>* avx2_table_f64();
const GemmKernelTable<float>* avx512_table_f32();
const GemmKernelTable<double>* avx512_table_f64();

}  // namespace gemm_detail
}  // namespace ortlite
