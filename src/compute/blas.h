// The tuned BLAS behind ortlite's dense matrix multiply: OpenBLAS from the scipy-openblas32
// wheel (symbols prefixed scipy_, so it never clashes with numpy's or another library's
// BLAS in the same process). Built in when setup.py finds the wheel (ORTLITE_HAVE_BLAS), but
// not linked: the library is dlopened on the first product large enough for it (the
// wheel's copy next to ortlite/ in site-packages, else the one built against), so importing
// ortlite does not load it; when it cannot be opened ortlite's own kernels do the work. The
// environment variable ORTLITE_GEMM=own (read once) turns it off at run time.
//
// OpenBLAS is set to one thread (process-wide, for this library only); ortlite's intra-op pool
// splits a large product into column (or row) blocks, one sgemm per block, so the BLAS never starts
// threads of its own and intra_op_num_threads bounds the cores a session uses.
#pragma once

#include <cstdint>

#include "ortlite/thread_pool.h"

namespace ortlite::blas {

// Whether the BLAS path is compiled in and enabled.
bool enabled();
// "openblas 0.3.x ..." or "none".
const char* description();

// C = alpha * op(A) * op(B) + beta * C (row-major) through the BLAS when it is enabled and
// the product is large enough to gain from it; returns false (C untouched) otherwise.
bool gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
          ThreadPool* pool);
bool gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
          int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc,
          ThreadPool* pool);

}  // namespace ortlite::blas
