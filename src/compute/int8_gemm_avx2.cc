// The AVX2 kernels of the 8-bit GEMM (int8_gemm.h): with AVX-VNNI, vpdpbusd on 256-bit
// vectors; without it, the bytes are widened to int16 and multiplied with vpmaddwd, whose
// pair sums (at most 2 * 255 * 128) cannot saturate, unlike vpmaddubsw's. Compiled for those
// targets; used only after a run-time CPU check (int8_gemm.cc).
#include <cstdint>
#include <cstring>

#include "compute/int8_gemm.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,avxvnni")

namespace ortlite {
namespace int8gemm {
namespace {

constexpr int kMR = 4;

inline void store_tile(__m256i x, int32_t* c, int left, const int32_t* zbp, const int32_t* ct,
                       int32_t rs, int32_t za) {
  const __m256i zv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(zbp));
  const __m256i cv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ct));
  x = _mm256_sub_epi32(x, _mm256_mullo_epi32(zv, _mm256_set1_epi32(rs)));
  x = _mm256_sub_epi32(x, _mm256_mullo_epi32(_mm256_set1_epi32(za), cv));
  if (left >= 8) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c), x);
  } else if (left > 0) {
    alignas(32) int32_t tmp[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), x);
    std::memcpy(c, tmp, sizeof(int32_t) * static_cast<size_t>(left));
  }
}

// AVX-VNNI: R rows x one 16-column panel (two vectors).
template <int R>
void tile_vnni(const uint8_t* a, int64_t lda, const int8_t* b, int64_t K4, int32_t* c, int64_t ldc,
               int cols, const int32_t* rsa, const int32_t* zap, const int32_t* zbp,
               const int32_t* ct) {
  __m256i acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t k4 = 0; k4 < K4; ++k4) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 64 * k4));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 64 * k4 + 32));
    for (int r = 0; r < R; ++r) {
      int32_t a4;
      std::memcpy(&a4, a + r * lda + 4 * k4, 4);
      const __m256i av = _mm256_set1_epi32(a4);
      acc[r][0] = _mm256_dpbusd_avx_epi32(acc[r][0], av, b0);
      acc[r][1] = _mm256_dpbusd_avx_epi32(acc[r][1], av, b1);
    }
  }
  for (int r = 0; r < R; ++r) {
    store_tile(acc[r][0], c + r * ldc, cols, zbp, ct, rsa[r], zap[r]);
    store_tile(acc[r][1], c + r * ldc + 8, cols - 8, zbp + 8, ct + 8, rsa[r], zap[r]);
  }
}

// Plain AVX2: R rows x one 16-column panel. Four bytes of a row as int16, repeated; each
// 8 bytes of b (2 columns x 4 k) widened to int16 and multiplied pairwise.
template <int R>
void tile_widen(const uint8_t* a, int64_t lda, const int8_t* b, int64_t K4, int32_t* c, int64_t ldc,
                int cols, const int32_t* rsa, const int32_t* zap, const int32_t* zbp,
                const int32_t* ct) {
  // acc[r][q]: columns 4q..4q+3, two partial sums each.
  __m256i acc[R][4];
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < 4; ++q) acc[r][q] = _mm256_setzero_si256();
  for (int64_t k4 = 0; k4 < K4; ++k4) {
    __m256i bw[4];
    for (int q = 0; q < 4; ++q) {
      bw[q] = _mm256_cvtepi8_epi16(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 64 * k4 + 16 * q)));
    }
    for (int r = 0; r < R; ++r) {
      int32_t a4;
      std::memcpy(&a4, a + r * lda + 4 * k4, 4);
      const __m256i av = _mm256_cvtepu8_epi16(_mm_set1_epi32(a4));
      for (int q = 0; q < 4; ++q)
        acc[r][q] = _mm256_add_epi32(acc[r][q], _mm256_madd_epi16(av, bw[q]));
    }
  }
  for (int r = 0; r < R; ++r) {
    // hadd within lanes gives [c0 c1 c4 c5 | c2 c3 c6 c7] of each pair of quarters.
    const __m256i lo = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[r][0], acc[r][1]), 0xD8);
    const __m256i hi = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[r][2], acc[r][3]), 0xD8);
    store_tile(lo, c + r * ldc, cols, zbp, ct, rsa[r], zap[r]);
    store_tile(hi, c + r * ldc + 8, cols - 8, zbp + 8, ct + 8, rsa[r], zap[r]);
  }
}

template <bool Vnni, int R>
void run_rows(const uint8_t* a, int64_t lda, const int8_t* b, int64_t ps, int nv, int64_t K4,
              int32_t* c, int64_t ldc, int cols, const int32_t* rsa, const int32_t* zap,
              const int32_t* zbp, const int32_t* ct) {
  for (int v = 0; v < nv; ++v) {
    if constexpr (Vnni) {
      tile_vnni<R>(a, lda, b + v * ps, K4, c + 16 * v, ldc, cols - 16 * v, rsa, zap, zbp + 16 * v,
                   ct + 16 * v);
    } else {
      tile_widen<R>(a, lda, b + v * ps, K4, c + 16 * v, ldc, cols - 16 * v, rsa, zap, zbp + 16 * v,
                    ct + 16 * v);
    }
  }
}

template <bool Vnni>
void kernel(const uint8_t* a, int64_t lda, int rows, const int8_t* b, int64_t ps, int nv,
            int64_t K4, int32_t* c, int64_t ldc, int cols, const int32_t* rsa, const int32_t* zap,
            const int32_t* zbp, const int32_t* ct) {
  switch (rows) {
    case 1:
      return run_rows<Vnni, 1>(a, lda, b, ps, nv, K4, c, ldc, cols, rsa, zap, zbp, ct);
    case 2:
      return run_rows<Vnni, 2>(a, lda, b, ps, nv, K4, c, ldc, cols, rsa, zap, zbp, ct);
    case 3:
      return run_rows<Vnni, 3>(a, lda, b, ps, nv, K4, c, ldc, cols, rsa, zap, zbp, ct);
    default:
      return run_rows<Vnni, kMR>(a, lda, b, ps, nv, K4, c, ldc, cols, rsa, zap, zbp, ct);
  }
}

}  // namespace

namespace detail {
KernelSet avx2_kernel(bool vnni) {
  if (vnni) return {kernel<true>, kMR};
  return {kernel<false>, kMR};
}
}  // namespace detail

}  // namespace int8gemm
}  // namespace ortlite

#pragma GCC pop_options
#else
namespace ortlite {
namespace int8gemm {
namespace detail {
KernelSet avx2_kernel(bool) {
  return {};
}
}  // namespace detail
}  // namespace int8gemm
}  // namespace ortlite
#endif
