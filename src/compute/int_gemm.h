// Integer matrix multiply for MatMul / Gemm on int32, int64, uint32, uint64 (wrap-around
// arithmetic, like onnxruntime's Eigen path): rows of C as sums of B's rows, vectorized.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "ortlite/thread_pool.h"

namespace ortlite {
namespace nn {

// row[0:n] += a * b[0:n], wrapping (int_gemm.cc).
void int_axpy(uint32_t* row, uint32_t a, const uint32_t* b, int64_t n);
void int_axpy(uint64_t* row, uint64_t a, const uint64_t* b, int64_t n);
// sum a[k] * b[k] over k < n, wrapping (int_gemm.cc).
uint32_t int_dot(const uint32_t* a, const uint32_t* b, int64_t n);
uint64_t int_dot(const uint64_t* a, const uint64_t* b, int64_t n);

// C[M x N] (row stride N) = op(A) * op(B), op(A) M x K, op(B) K x N.
template <typename T>
void int_gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda,
              const T* B, int64_t ldb, T* C, ThreadPool* pool) {
  using U = std::make_unsigned_t<T>;
  parallel_for(pool, M, static_cast<double>(N) * static_cast<double>(K),
               [&](int64_t begin, int64_t end) {
                 std::vector<U> row(static_cast<size_t>(N));
                 for (int64_t i = begin; i < end; ++i) {
                   std::fill(row.begin(), row.end(), U(0));
                   for (int64_t k = 0; k < K; ++k) {
                     const U a = static_cast<U>(transA ? A[k * lda + i] : A[i * lda + k]);
                     if (!transB) {
                       // T and its unsigned type may alias.
                       int_axpy(row.data(), a, reinterpret_cast<const U*>(B + k * ldb), N);
                     } else {
                       for (int64_t j = 0; j < N; ++j) row[j] += a * static_cast<U>(B[j * ldb + k]);
                     }
                   }
                   T* c = C + i * N;
                   for (int64_t j = 0; j < N; ++j) c[j] = static_cast<T>(row[j]);
                 }
               });
}

}  // namespace nn
}  // namespace ortlite
