// Products with a narrow constant B (1 to 4 columns): each row of A against B's columns as
// dot products along K, 16 lanes at a time (compute/gemm.h's gemm_narrow_rows).
#include <algorithm>
#include <cstdint>

#include "compute/cpu_avx512.h"
#include "compute/gemm.h"
#include "ortlite/thread_pool.h"

namespace ortlite {
namespace {

#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// Rows [m0, m1) of C = alpha * A * B + beta * C, B given as Bt (NB x K, row n = column n of
// B): R rows at a time with R x NB accumulators, K in steps of 16 (the last one masked).
template <int NB, int R>
ORTLITE_AVX512 inline __attribute__((always_inline)) void narrow_block(const float* A, int64_t lda,
                                                                       const float* Bt, int64_t K,
                                                                       int64_t m, float alpha,
                                                                       float beta, float* C,
                                                                       int64_t ldc) {
  __m512 acc[R][NB];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int n = 0; n < NB; ++n) acc[r][n] = _mm512_setzero_ps();
  const float* a = A + m * lda;
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    __m512 b[NB];
#pragma GCC unroll 4
    for (int n = 0; n < NB; ++n) b[n] = _mm512_loadu_ps(Bt + n * K + k);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 v = _mm512_loadu_ps(a + r * lda + k);
#pragma GCC unroll 4
      for (int n = 0; n < NB; ++n) acc[r][n] = _mm512_fmadd_ps(v, b[n], acc[r][n]);
    }
  }
  if (k < K) {
    const __mmask16 t = static_cast<__mmask16>((1u << (K - k)) - 1);
    __m512 b[NB];
#pragma GCC unroll 4
    for (int n = 0; n < NB; ++n) b[n] = _mm512_maskz_loadu_ps(t, Bt + n * K + k);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 v = _mm512_maskz_loadu_ps(t, a + r * lda + k);
#pragma GCC unroll 4
      for (int n = 0; n < NB; ++n) acc[r][n] = _mm512_fmadd_ps(v, b[n], acc[r][n]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int n = 0; n < NB; ++n) {
      float* c = C + (m + r) * ldc + n;
      const float s = alpha * _mm512_reduce_add_ps(acc[r][n]);
      *c = beta == 0.0f ? s : s + beta * *c;  // beta 0: C is not read (it may hold NaN)
    }
}

template <int NB>
ORTLITE_AVX512 void narrow_rows(const float* A, int64_t lda, const float* Bt, int64_t K, int64_t m0,
                                int64_t m1, float alpha, float beta, float* C, int64_t ldc) {
  int64_t m = m0;
  for (; m + 4 <= m1; m += 4) narrow_block<NB, 4>(A, lda, Bt, K, m, alpha, beta, C, ldc);
  for (; m < m1; ++m) narrow_block<NB, 1>(A, lda, Bt, K, m, alpha, beta, C, ldc);
}
#pragma GCC diagnostic pop
#endif

}  // namespace

bool gemm_narrow_rows(int64_t M, int64_t K, int64_t N, float alpha, const float* A, int64_t lda,
                      const float* Bt, float beta, float* C, int64_t ldc, ThreadPool* pool) {
#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
  if (!narrow_b(K, N) || M < 1 || !cpu_has_avx512()) return false;
  using Fn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, int64_t, float, float,
                      float*, int64_t);
  static constexpr Fn kFns[kNarrowColumns] = {narrow_rows<1>, narrow_rows<2>, narrow_rows<3>,
                                              narrow_rows<4>};
  const Fn fn = kFns[N - 1];
  // Blocks of 4 rows, each about K * (N + 4) loads.
  const int64_t blocks = (M + 3) / 4;
  parallel_for(pool, blocks, 4.0 * static_cast<double>(K) * static_cast<double>(N + 1),
               [&](int64_t b0, int64_t b1) {
                 fn(A, lda, Bt, K, 4 * b0, std::min(M, 4 * b1), alpha, beta, C, ldc);
               });
  return true;
#else
  (void)M, (void)K, (void)N, (void)alpha, (void)A, (void)lda, (void)Bt, (void)beta, (void)C,
      (void)ldc, (void)pool;
  return false;
#endif
}

}  // namespace ortlite
