// The AVX-512 VNNI kernel of the 8-bit GEMM (int8_gemm.h): vpdpbusd accumulates four
// u8 x s8 products per int32 lane without saturation. Compiled for that target; used only
// after a run-time CPU check (int8_gemm.cc).
#include <cstdint>
#include <cstring>

#include "compute/int8_gemm.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
// GCC 12 reports the _mm512_undefined_ps() that _mm512_min_ps / _mm512_max_ps pass as a
// don't-care source as (maybe-)uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vnni,avx2,fma")

namespace ortlite {
namespace int8gemm {
namespace {

constexpr int kMR = 6;

// R x (16 * NV) tile. Named accumulators: GCC keeps an array of them in registers only with
// a copy around every vpdpbusd.
template <int R, int NV>
void tile(const uint8_t* a, int64_t lda, const int8_t* b, int64_t ps, int64_t K4, int32_t* c,
          int64_t ldc, int cols, const int32_t* rsa, const int32_t* zap, const int32_t* zbp,
          const int32_t* ct) {
#define ORTLITE_ROW_ACC(r) \
  __m512i c##r##0 = _mm512_setzero_si512(), c##r##1 = c##r##0, c##r##2 = c##r##0, c##r##3 = c##r##0;
  ORTLITE_ROW_ACC(0)
  ORTLITE_ROW_ACC(1)
  ORTLITE_ROW_ACC(2)
  ORTLITE_ROW_ACC(3)
  ORTLITE_ROW_ACC(4)
  ORTLITE_ROW_ACC(5)
#undef ORTLITE_ROW_ACC
  const int8_t* b0 = b;
  const int8_t* b1 = b + (NV > 1 ? ps : 0);
  const int8_t* b2 = b + (NV > 2 ? 2 * ps : 0);
  const int8_t* b3 = b + (NV > 3 ? 3 * ps : 0);
  for (int64_t k4 = 0; k4 < K4; ++k4) {
    const __m512i v0 = _mm512_loadu_si512(b0 + 64 * k4);
    const __m512i v1 = NV > 1 ? _mm512_loadu_si512(b1 + 64 * k4) : v0;
    const __m512i v2 = NV > 2 ? _mm512_loadu_si512(b2 + 64 * k4) : v0;
    const __m512i v3 = NV > 3 ? _mm512_loadu_si512(b3 + 64 * k4) : v0;
#define ORTLITE_ROW_STEP(r)                                               \
  if constexpr (R > (r)) {                                                \
    int32_t a4;                                                           \
    std::memcpy(&a4, a + (r)*lda + 4 * k4, 4);                            \
    const __m512i av = _mm512_set1_epi32(a4);                             \
    c##r##0 = _mm512_dpbusd_epi32(c##r##0, av, v0);                       \
    if constexpr (NV > 1) c##r##1 = _mm512_dpbusd_epi32(c##r##1, av, v1); \
    if constexpr (NV > 2) c##r##2 = _mm512_dpbusd_epi32(c##r##2, av, v2); \
    if constexpr (NV > 3) c##r##3 = _mm512_dpbusd_epi32(c##r##3, av, v3); \
  }
    ORTLITE_ROW_STEP(0)
    ORTLITE_ROW_STEP(1)
    ORTLITE_ROW_STEP(2)
    ORTLITE_ROW_STEP(3)
    ORTLITE_ROW_STEP(4)
    ORTLITE_ROW_STEP(5)
#undef ORTLITE_ROW_STEP
  }
  const __m512i acc[6][4] = {{c00, c01, c02, c03}, {c10, c11, c12, c13}, {c20, c21, c22, c23},
                             {c30, c31, c32, c33}, {c40, c41, c42, c43}, {c50, c51, c52, c53}};
  for (int v = 0; v < NV; ++v) {
    const __m512i zv = _mm512_loadu_si512(zbp + 16 * v);
    const __m512i cv = _mm512_loadu_si512(ct + 16 * v);
    const int left = cols - 16 * v;
    const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
    for (int r = 0; r < R; ++r) {
      __m512i x = _mm512_sub_epi32(acc[r][v], _mm512_mullo_epi32(zv, _mm512_set1_epi32(rsa[r])));
      x = _mm512_sub_epi32(x, _mm512_mullo_epi32(_mm512_set1_epi32(zap[r]), cv));
      _mm512_mask_storeu_epi32(c + r * ldc + 16 * v, m, x);
    }
  }
}

template <int R>
void tile_nv(const uint8_t* a, int64_t lda, const int8_t* b, int64_t ps, int nv, int64_t K4,
             int32_t* c, int64_t ldc, int cols, const int32_t* rsa, const int32_t* zap,
             const int32_t* zbp, const int32_t* ct) {
  switch (nv) {
    case 1:
      return tile<R, 1>(a, lda, b, ps, K4, c, ldc, cols, rsa, zap, zbp, ct);
    case 2:
      return tile<R, 2>(a, lda, b, ps, K4, c, ldc, cols, rsa, zap, zbp, ct);
    case 3:
      return tile<R, 3>(a, lda, b, ps, K4, c, ldc, cols, rsa, zap, zbp, ct);
    default:
      return tile<R, 4>(a, lda, b, ps, K4, c, ldc, cols, rsa, zap, zbp, ct);
  }
}

void kernel(const uint8_t* a, int64_t lda, int rows, const int8_t* b, int64_t ps, int nv,
            int64_t K4, int32_t* c, int64_t ldc, int cols, const int32_t* rsa, const int32_t* zap,
            const int32_t* zbp, const int32_t* ct) {
  switch (rows) {
    case 1:
      return tile_nv<1>(a, lda, b, ps, nv, K4, c, ldc, cols, rsa, zap, zbp, ct);
    case 2:
      return tile_nv<2>(a, lda, b, ps, nv, K4, c, ldc, cols, rsa, zap, zbp, ct);
    case 3:
      return tile_nv<3>(a, lda, b, ps, nv, K4, c, ldc, cols, rsa, zap, zbp, ct);
    case 4:
      return tile_nv<4>(a, lda, b, ps, nv, K4, c, ldc, cols, rsa, zap, zbp, ct);
    case 5:
      return tile_nv<5>(a, lda, b, ps, nv, K4, c, ldc, cols, rsa, zap, zbp, ct);
    default:
      return tile_nv<kMR>(a, lda, b, ps, nv, K4, c, ldc, cols, rsa, zap, zbp, ct);
  }
}

// ---- element-wise helpers (AVX-512 F / BW) ----------------------------------------------

inline void store_bytes(void* y, int64_t left, __m128i v) {
  if (left >= 16) {
    _mm_storeu_si128(static_cast<__m128i*>(y), v);
  } else {
    alignas(16) uint8_t tmp[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(tmp), v);
    std::memcpy(y, tmp, static_cast<size_t>(left));
  }
}

void requantize512(const int32_t* c, int64_t n, int32_t bias, const float* mult, int64_t mstep,
                   int32_t zp, bool is_signed, void* y) {
  const float zf = static_cast<float>(zp);
  const __m512 lo = _mm512_set1_ps((is_signed ? -128.0f : 0.0f) - zf);
  const __m512 hi = _mm512_set1_ps((is_signed ? 127.0f : 255.0f) - zf);
  const __m512i bv = _mm512_set1_epi32(bias), zv = _mm512_set1_epi32(zp);
  const __m512 m0 = _mm512_set1_ps(mult[0]);
  for (int64_t i = 0; i < n; i += 16) {
    const int64_t left = n - i;
    const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
    const __m512i acc = _mm512_add_epi32(_mm512_maskz_loadu_epi32(m, c + i), bv);
    const __m512 mv = mstep ? _mm512_maskz_loadu_ps(m, mult + i) : m0;
    const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), mv);
    // max / min return their second operand for NaN: NaN goes to the low end.
    const __m512 cl = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(cl), zv);  // nearest, ties to even
    if (is_signed) {
      store_bytes(static_cast<int8_t*>(y) + i, left, _mm512_cvtsepi32_epi8(q));
    } else {
      store_bytes(static_cast<uint8_t*>(y) + i, left, _mm512_cvtusepi32_epi8(q));
    }
  }
}

void min_max512(const float* x, int64_t n, float* mn, float* mx) {
  __m512 a = _mm512_setzero_ps(), b = a, c = a, d = a;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
    // min / max(v, acc) keep acc where v is NaN.
    a = _mm512_min_ps(v0, a);
    b = _mm512_max_ps(v0, b);
    c = _mm512_min_ps(v1, c);
    d = _mm512_max_ps(v1, d);
  }
  for (; i < n; i += 16) {
    const int64_t left = n - i;
    const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);  // zeros past the end: 0 is in range
    a = _mm512_min_ps(v, a);
    b = _mm512_max_ps(v, b);
  }
  alignas(64) float lo[16], hi[16];
  _mm512_store_ps(lo, _mm512_min_ps(a, c));
  _mm512_store_ps(hi, _mm512_max_ps(b, d));
  float l = 0.0f, h = 0.0f;
  for (int j = 0; j < 16; ++j) {
    l = lo[j] < l ? lo[j] : l;
    h = hi[j] > h ? hi[j] : h;
  }
  *mn = l;
  *mx = h;
}

void quantize_u8_512(const float* x, int64_t n, float scale, float zp, uint8_t* y) {
  const __m512 sv = _mm512_set1_ps(scale);
  const __m512 lo = _mm512_set1_ps(0.0f - zp), hi = _mm512_set1_ps(255.0f - zp);
  const __m512i zv = _mm512_set1_epi32(static_cast<int32_t>(zp));
  for (int64_t i = 0; i < n; i += 16) {
    const int64_t left = n - i;
    const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
    const __m512 q = _mm512_div_ps(_mm512_maskz_loadu_ps(m, x + i), sv);
    const __m512 cl = _mm512_min_ps(_mm512_max_ps(q, lo), hi);
    const __m512i r = _mm512_add_epi32(_mm512_cvtps_epi32(cl), zv);
    store_bytes(y + i, left, _mm512_cvtusepi32_epi8(r));
  }
}

// The product and the sum rounded each (no contraction into a fused multiply-add).
inline __m512 rounded(__m512 v) {
  __asm__("" : "+v"(v));
  return v;
}

void to_float512(float* y, int64_t ldy, int rows, int cols, const float* rs, const float* cs,
                 const float* bias) {
  for (int j = 0; j < cols; j += 16) {
    const int left = cols - j;
    const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
    const __m512 cv = _mm512_maskz_loadu_ps(m, cs + j);
    const __m512 bv = bias ? _mm512_maskz_loadu_ps(m, bias + j) : _mm512_setzero_ps();
    for (int r = 0; r < rows; ++r) {
      float* p = y + r * ldy + j;
      const __m512 x = _mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(m, p));
      __m512 v = rounded(_mm512_mul_ps(x, rounded(_mm512_mul_ps(_mm512_set1_ps(rs[r]), cv))));
      if (bias) v = _mm512_add_ps(v, bv);
      _mm512_mask_storeu_ps(p, m, v);
    }
  }
}

}  // namespace

namespace detail {
KernelSet avx512vnni_kernel() {
  return {kernel, kMR};
}
Helpers avx512_helpers() {
  Helpers h;
  h.requantize = requantize512;
  h.min_max = min_max512;
  h.quantize_u8 = quantize_u8_512;
  h.to_float = to_float512;
  return h;
}
}  // namespace detail

}  // namespace int8gemm
}  // namespace ortlite

#pragma GCC pop_options
#pragma GCC diagnostic pop
#else
namespace ortlite {
namespace int8gemm {
namespace detail {
KernelSet avx512vnni_kernel() {
  return {};
}
Helpers avx512_helpers() {
  return {};
}
}  // namespace detail
}  // namespace int8gemm
}  // namespace ortlite
#endif
