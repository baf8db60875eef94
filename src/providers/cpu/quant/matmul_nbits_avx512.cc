// AVX-512 loops of MatMulNBits (matmul_nbits.cc) for 4-bit codes in blocks of a multiple of
// 32: 16 bytes become 32 codes (low nibble first) as two vectors of 16 floats, minus the zero
// point, times A and the block's scale. Compiled for that target; used only after a run-time
// CPU check (matmul_nbits.cc).
#include "providers/cpu/quant/matmul_nbits_simd.h"

#if defined(__GNUC__) && defined(__x86_64__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx2,fma")

namespace ortlite {
namespace quant {
namespace {

// The 32 codes of 16 bytes as two float vectors (codes 0-15, 16-31).
inline void unpack32(const uint8_t* q, __m512& lo, __m512& hi) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  const __m128i m = _mm_set1_epi8(0x0F);
  const __m128i l = _mm_and_si128(v, m);
  const __m128i h = _mm_and_si128(_mm_srli_epi16(v, 4), m);
  // Byte i holds codes 2i (low nibble) and 2i + 1 (high nibble).
  const __m128i c0 = _mm_unpacklo_epi8(l, h), c1 = _mm_unpackhi_epi8(l, h);
  lo = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(c0));
  hi = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(c1));
}

inline float zero_point(const uint8_t* z, int64_t blk) {
  return static_cast<float>((z[blk >> 1] >> ((blk & 1) * 4)) & 15);
}

template <int R>
void dot_rows(const Nbits4Column& c, const float* a, int64_t lda, float* out) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t blk = 0; blk < c.kb; ++blk) {
    const __m512 sc = _mm512_set1_ps(c.scales[blk]);
    const __m512 zp = _mm512_set1_ps(c.zp ? zero_point(c.zp, blk) : 8.0f);
    const uint8_t* q = c.codes + blk * (c.block / 2);
    const int64_t k0 = blk * c.block;
    for (int64_t j = 0; j < c.block; j += 32) {
      __m512 lo, hi;
      unpack32(q + j / 2, lo, hi);
      // (code - zp) * scale, then times A: the dequantized weight as the scalar code does.
      lo = _mm512_mul_ps(_mm512_sub_ps(lo, zp), sc);
      hi = _mm512_mul_ps(_mm512_sub_ps(hi, zp), sc);
      for (int r = 0; r < R; ++r) {
        const float* ar = a + r * lda + k0 + j;
        acc[r] = _mm512_fmadd_ps(_mm512_loadu_ps(ar), lo, acc[r]);
        acc[r] = _mm512_fmadd_ps(_mm512_loadu_ps(ar + 16), hi, acc[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(acc[r]);
}

void dot_rows_avx512(const Nbits4Column& c, const float* a, int64_t rows, int64_t lda, float* out) {
  switch (rows) {
    case 1:
      return dot_rows<1>(c, a, lda, out);
    case 2:
      return dot_rows<2>(c, a, lda, out);
    case 3:
      return dot_rows<3>(c, a, lda, out);
    case 4:
      return dot_rows<4>(c, a, lda, out);
    case 5:
      return dot_rows<5>(c, a, lda, out);
    case 6:
      return dot_rows<6>(c, a, lda, out);
    case 7:
      return dot_rows<7>(c, a, lda, out);
    default:
      return dot_rows<8>(c, a, lda, out);
  }
}

void dequant_avx512(const Nbits4Column& c, float* w) {
  for (int64_t blk = 0; blk < c.kb; ++blk) {
    const __m512 sc = _mm512_set1_ps(c.scales[blk]);
    const __m512 zp = _mm512_set1_ps(c.zp ? zero_point(c.zp, blk) : 8.0f);
    const uint8_t* q = c.codes + blk * (c.block / 2);
    float* wb = w + blk * c.block;
    for (int64_t j = 0; j < c.block; j += 32) {
      __m512 lo, hi;
      unpack32(q + j / 2, lo, hi);
      _mm512_storeu_ps(wb + j, _mm512_mul_ps(_mm512_sub_ps(lo, zp), sc));
      _mm512_storeu_ps(wb + j + 16, _mm512_mul_ps(_mm512_sub_ps(hi, zp), sc));
    }
  }
}

// r[j] (16 values of row j) becomes r[k] (value k of rows 0..15): a 16 x 16 transpose in
// registers (pairs of rows interleaved, then pairs of pairs, then 128-bit lanes twice).
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // r[4i + c], 128-bit lane l: rows 4i .. 4i + 3 at k = 4l + c.
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 2]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 1]), d = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
  }
  for (int c = 0; c < 4; ++c) {
    t[c] = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88);      // lanes 0, 2 of row groups 0, 1
    t[4 + c] = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xdd);  // lanes 1, 3
    t[8 + c] = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88);
    t[12 + c] = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xdd);
  }
  for (int c = 0; c < 4; ++c) {
    r[c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88);
    r[8 + c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0xdd);
    r[4 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0xdd);
  }
}

// 32 codes (k0 .. k0 + 31 of one block) of up to 16 columns, dequantized and stored k-major
// into lanes `lane0` .. lane0 + 15 of the panel.
inline void panel_chunk(const Nbits4Column* cols, int nc, int64_t blk, int64_t j, float* w,
                        int lane0) {
  __m512 lo[16], hi[16];
  for (int c = 0; c < 16; ++c) {
    if (c >= nc) {
      lo[c] = hi[c] = _mm512_setzero_ps();
      continue;
    }
    const Nbits4Column& col = cols[c];
    const __m512 sc = _mm512_set1_ps(col.scales[blk]);
    const __m512 zp = _mm512_set1_ps(col.zp ? zero_point(col.zp, blk) : 8.0f);
    __m512 l, h;
    unpack32(col.codes + blk * (col.block / 2) + j / 2, l, h);
    lo[c] = _mm512_mul_ps(_mm512_sub_ps(l, zp), sc);
    hi[c] = _mm512_mul_ps(_mm512_sub_ps(h, zp), sc);
  }
  transpose16(lo);
  transpose16(hi);
  for (int k = 0; k < 16; ++k) {
    _mm512_storeu_ps(w + k * 32 + lane0, lo[k]);
    _mm512_storeu_ps(w + (k + 16) * 32 + lane0, hi[k]);
  }
}

void dequant_panel_avx512(const Nbits4Column* cols, int nc, float* w) {
  const int64_t kb = cols[0].kb, block = cols[0].block;
  for (int64_t blk = 0; blk < kb; ++blk)
    for (int64_t j = 0; j < block; j += 32) {
      float* wk = w + (blk * block + j) * 32;
      panel_chunk(cols, nc < 16 ? nc : 16, blk, j, wk, 0);
      if (nc > 16) panel_chunk(cols + 16, nc - 16, blk, j, wk, 16);
    }
}

}  // namespace

Nbits4Simd nbits4_avx512() {
  return {dot_rows_avx512, dequant_avx512, dequant_panel_avx512};
}

}  // namespace quant
}  // namespace ortlite

#pragma GCC pop_options
#pragma GCC diagnostic pop

#else

namespace ortlite {
namespace quant {
Nbits4Simd nbits4_avx512() {
  return {};
}
}  // namespace quant
}  // namespace ortlite

#endif
