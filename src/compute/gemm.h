// Dense matrix multiply used by MatMul, Gemm and Conv (CPU).
//
//   C = alpha * op(A) * op(B) + beta * C      (row-major; op(X) = X or X^T)
//
// op(A) is M x K, op(B) is K x N, C is M x N with row stride ldc. When beta == 0, C is not
// read (it may hold garbage or NaN). A cache-blocked, packed implementation with
// register-blocked micro-kernels selected at run time (SSE2 baseline, AVX2+FMA, AVX-512F);
// parallelized over tiles of C with parallel_for. The entry points are kept BLAS-shaped so
// that a tuned BLAS can be swapped in behind them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "ortlite/thread_pool.h"

namespace ortlite {

// b_stream: bytes of B the caller's loop reads over all its products (a batched MatMul's
// matrices, one per batch), when more than this call's B; products of a few rows read B in
// place only while it stays in the caches (gemm.cc kFewRows).
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
          ThreadPool* pool, double b_stream = 0);
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
          int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc,
          ThreadPool* pool);

// An operand packed once (constant weights, at session load) in the layout the selected
// micro-kernel reads. Immutable after packing: shared by concurrent runs.
template <typename T>
class PackedGemmMatrix {
 public:
  PackedGemmMatrix() = default;
  bool empty() const { return data_ == nullptr && plain_ == nullptr; }
  bool is_a() const { return is_a_; }
  // Logical op(X) dimensions: rows x cols (A: M x K, B: K x N).
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  const T* data() const { return data_.get(); }

  struct Free {
    void operator()(T* p) const;
  };

 private:
  template <typename U>
  friend PackedGemmMatrix<U> pack_gemm_a(bool, int64_t, int64_t, const U*, int64_t);
  template <typename U>
  friend PackedGemmMatrix<U> pack_gemm_b(bool, int64_t, int64_t, const U*, int64_t);
  template <typename U>
  friend void gemm_packed_a(const PackedGemmMatrix<U>&, bool, int64_t, const U*, int64_t, U, U, U*,
                            int64_t, ThreadPool*);
  template <typename U>
  friend void gemm_packed_b(bool, int64_t, const U*, int64_t, const PackedGemmMatrix<U>&, U, U, U*,
                            int64_t, ThreadPool*);
  bool is_a_ = false;
  int64_t rows_ = 0, cols_ = 0;
  // A (filters) with the BLAS enabled: a plain row-major copy of op(A) for the BLAS, which
  // packs per call. B (weights of MatMul / Gemm): the micro-kernels' panels, packed once;
  // a second, plain copy for the BLAS made products of many rows a little faster but
  // doubled load time and weight memory (docs/performance.md). A float B of at most
  // kNarrowColumns columns: plain_ holds them as rows (gemm_narrow_rows).
  std::unique_ptr<T[], Free> data_;
  std::unique_ptr<T[], Free> plain_;
};

// Packs op(A) (M x K) or op(B) (K x N) for repeated use.
template <typename T>
PackedGemmMatrix<T> pack_gemm_a(bool transA, int64_t M, int64_t K, const T* A, int64_t lda);
template <typename T>
PackedGemmMatrix<T> pack_gemm_b(bool transB, int64_t K, int64_t N, const T* B, int64_t ldb);

// C = alpha * A * op(B) + beta * C with A pre-packed (M x K taken from A).
template <typename T>
void gemm_packed_a(const PackedGemmMatrix<T>& A, bool transB, int64_t N, const T* B, int64_t ldb,
                   T alpha, T beta, T* C, int64_t ldc, ThreadPool* pool);
// C = alpha * op(A) * B + beta * C with B pre-packed (K x N taken from B).
template <typename T>
void gemm_packed_b(bool transA, int64_t M, const T* A, int64_t lda, const PackedGemmMatrix<T>& B,
                   T alpha, T beta, T* C, int64_t ldc, ThreadPool* pool);

// B with at most this many columns: pack_gemm_b<float> also keeps B's columns as rows (K
// contiguous values each), and gemm_packed_b<float> runs the product as dot products along
// K (gemm_narrow_rows) where the CPU has AVX-512: the micro-kernels computed a whole panel
// of columns for each one (512 x 1000 times 1000 x 1: 163 us, as onnxruntime; 5.4x faster
// as dot products).
constexpr int64_t kNarrowColumns = 4;
// Whether a K x N B takes that path (at least 16 values a row: below, the reductions cost
// more than the products; 100000 x 8 times 8 x 2 with a bias: 288 against 239 us).
inline bool narrow_b(int64_t K, int64_t N) {
  return N >= 1 && N <= kNarrowColumns && K >= 16;
}
// C (M x N) = alpha * A * B + beta * C (beta 0: C not read) for N <= kNarrowColumns, with Bt
// holding B's columns as rows (N x K); A row-major with leading dimension lda. False (nothing
// done) where it has no kernel for the CPU or narrow_b(K, N) does not hold.
bool gemm_narrow_rows(int64_t M, int64_t K, int64_t N, float alpha, const float* A, int64_t lda,
                      const float* Bt, float beta, float* C, int64_t ldc, ThreadPool* pool);

// Name of the micro-kernel set in use: "sse2", "avx2", "avx512". The environment variable
// ORTLITE_GEMM_ISA (read once) caps the choice, e.g. ORTLITE_GEMM_ISA=sse2.
const char* gemm_isa_name();

}  // namespace ortlite
