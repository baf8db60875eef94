// AVX-512 loops of MatMulNBits (matmul_nbits.cc) for 4-bit codes, any block size (16 to 256),
// K a multiple of 32 covered by whole blocks. 32 codes (16 bytes) at a time: the bytes widened
// to 16 dwords, the low nibbles (codes 0, 2, ..., 30) and the high ones (1, 3, ..., 31) as two
// float vectors, dequantized by one fused multiply-add each (code * scale - zero point *
// scale; a block of 16 codes fills half a vector, so its scale and zero point do too). A is
// read with each group of 32 values stored evens first, the order of the codes. Compiled for
// that target; used only after a run-time CPU check (matmul_nbits.cc).
#include "providers/cpu/quant/matmul_nbits_simd.h"

#if defined(__GNUC__) && defined(__x86_64__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx2,fma")

namespace ortlite {
namespace quant {
namespace {

inline float zero_point(const uint8_t* z, int64_t blk) {
  return static_cast<float>((z[blk >> 1] >> ((blk & 1) * 4)) & 15);
}

// The scale and -zero point * scale of the 32 codes from k (a multiple of 32) on: one block's
// for blocks of 32 or more, two blocks' (lanes 0-7 and 8-15) for blocks of 16.
struct ChunkScale {
  __m512 s, nzs;
};
inline ChunkScale chunk_scale(const Nbits4Column& c, int64_t k) {
  const int64_t blk = k / c.block;
  if (c.block >= 32) {
    const float s = c.scales[blk], z = c.zp ? zero_point(c.zp, blk) : 8.0f;
    return {_mm512_set1_ps(s), _mm512_set1_ps(-z * s)};
  }
  const float s0 = c.scales[blk], s1 = c.scales[blk + 1];
  const float z0 = c.zp ? zero_point(c.zp, blk) : 8.0f,
              z1 = c.zp ? zero_point(c.zp, blk + 1) : 8.0f;
  const __m512 s = _mm512_insertf32x8(_mm512_set1_ps(s0), _mm256_set1_ps(s1), 1);
  const __m512 nzs = _mm512_insertf32x8(_mm512_set1_ps(-z0 * s0), _mm256_set1_ps(-z1 * s1), 1);
  return {s, nzs};
}

// Codes per group of one scale vector: a block, or two blocks of 16.
inline int64_t group_codes(const Nbits4Column& c) {
  return c.block < 32 ? 32 : c.block;
}

// The 32 codes of 16 bytes from k on, dequantized with the group's scale: even = codes k, k +
// 2, ..., k + 30, odd = codes k + 1, ..., k + 31. (With a block of 16, lanes 0-7 are the first
// block's codes.)
inline void dequant32(const Nbits4Column& c, int64_t k, const ChunkScale& cs, __m512& even,
                      __m512& odd) {
  const __m512i x =
      _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c.codes + k / 2)));
  const __m512 lo = _mm512_cvtepi32_ps(_mm512_and_si512(x, _mm512_set1_epi32(15)));
  const __m512 hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(x, 4));
  even = _mm512_fmadd_ps(lo, cs.s, cs.nzs);
  odd = _mm512_fmadd_ps(hi, cs.s, cs.nzs);
}

// Lane j of the result = the sum of the lanes of v[j]: a tree of lane shuffles and adds (45
// operations for 16 sums, where 16 separate reductions take about 130).
inline __m512 sum16(const __m512 v[16]) {
  // The tree leaves sum j in lane 4 (j % 4) + j / 4: the inputs go in transposed.
  __m512 s[8], u[4], x[2];
  for (int i = 0; i < 8; ++i) {
    const __m512 a = v[(2 * i) % 4 * 4 + (2 * i) / 4], b = v[(2 * i + 1) % 4 * 4 + (2 * i + 1) / 4];
    s[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  }
  for (int i = 0; i < 4; ++i)
    u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], 0xDD));
  for (int i = 0; i < 2; ++i) {
    const __m512d a = _mm512_castps_pd(u[2 * i]), b = _mm512_castps_pd(u[2 * i + 1]);
    x[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  return _mm512_add_ps(_mm512_shuffle_ps(x[0], x[1], 0x88), _mm512_shuffle_ps(x[0], x[1], 0xDD));
}

// out[r * ldo + j] for R rows and C columns (R * C <= 16): each row's values are loaded once
// per 32 codes for all the columns, each column's scale once per block.
template <int R, int C>
void dot_tile(const Nbits4Column* c, const float* a, int64_t lda, float* out, int64_t ldo) {
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < C; ++j) acc[r][j] = _mm512_setzero_ps();
  const int64_t K = c[0].kb * c[0].block, step = group_codes(c[0]);
  for (int64_t k0 = 0; k0 < K; k0 += step) {
    ChunkScale cs[C];
    for (int j = 0; j < C; ++j) cs[j] = chunk_scale(c[j], k0);
    for (int64_t k = k0; k < k0 + step; k += 32) {
      __m512 even[C], odd[C];
      for (int j = 0; j < C; ++j) dequant32(c[j], k, cs[j], even[j], odd[j]);
      for (int r = 0; r < R; ++r) {
        const float* ar = a + r * lda + k;
        const __m512 a0 = _mm512_loadu_ps(ar), a1 = _mm512_loadu_ps(ar + 16);
        for (int j = 0; j < C; ++j) {
          acc[r][j] = _mm512_fmadd_ps(a0, even[j], acc[r][j]);
          acc[r][j] = _mm512_fmadd_ps(a1, odd[j], acc[r][j]);
        }
      }
    }
  }
  __m512 v[16];
  for (int i = 0; i < 16; ++i) v[i] = i < R * C ? acc[i / C][i % C] : _mm512_setzero_ps();
  float sums[16];
  _mm512_storeu_ps(sums, sum16(v));
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < C; ++j) out[r * ldo + j] = sums[r * C + j];
}

template <int C>
void dot_tile_rows(const Nbits4Column* c, const float* a, int64_t rows, int64_t lda, float* out,
                   int64_t ldo) {
  switch (rows) {
    case 1:
      return dot_tile<1, C>(c, a, lda, out, ldo);
    case 2:
      return dot_tile<2, C>(c, a, lda, out, ldo);
    case 3:
      return dot_tile<3, C>(c, a, lda, out, ldo);
    case 4:
      return dot_tile<4, C>(c, a, lda, out, ldo);
    case 5:
      return dot_tile < 5, C < 3 ? C : 3 > (c, a, lda, out, ldo);
    case 6:
      return dot_tile < 6, C < 2 ? C : 2 > (c, a, lda, out, ldo);
    case 7:
      return dot_tile < 7, C < 2 ? C : 2 > (c, a, lda, out, ldo);
    default:
      return dot_tile < 8, C < 2 ? C : 2 > (c, a, lda, out, ldo);
  }
}

void dot_rows_avx512(const Nbits4Column* c, int cols, const float* a, int64_t rows, int64_t lda,
                     float* out, int64_t ldo) {
  switch (cols) {
    case 4:
      return dot_tile_rows<4>(c, a, rows, lda, out, ldo);
    case 3:
      return dot_tile_rows<3>(c, a, rows, lda, out, ldo);
    case 2:
      return dot_tile_rows<2>(c, a, rows, lda, out, ldo);
    default:
      return dot_tile_rows<1>(c, a, rows, lda, out, ldo);
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

// Codes k .. k + 31 of up to 16 columns, dequantized with their group scales and stored
// k-major into lanes lane0 .. lane0 + 15 of the panel (w: row k of the panel).
inline void panel_chunk(const Nbits4Column* cols, const ChunkScale* cs, int nc, int64_t k, float* w,
                        int lane0) {
  __m512 even[16], odd[16];
  for (int c = 0; c < 16; ++c) {
    if (c < nc) {
      dequant32(cols[c], k, cs[c], even[c], odd[c]);
    } else {
      even[c] = odd[c] = _mm512_setzero_ps();
    }
  }
  transpose16(even);
  transpose16(odd);
  for (int i = 0; i < 16; ++i) {
    _mm512_storeu_ps(w + (2 * i) * 32 + lane0, even[i]);
    _mm512_storeu_ps(w + (2 * i + 1) * 32 + lane0, odd[i]);
  }
}

void dequant_panel_avx512(const Nbits4Column* cols, int nc, int64_t k0, int64_t k1, float* w) {
  const int64_t step = group_codes(cols[0]);
  ChunkScale cs[32];
  int64_t group = -1;
  for (int64_t k = k0; k < k1; k += 32) {
    if (k / step != group) {  // the columns' scales for the group k is in
      group = k / step;
      for (int c = 0; c < nc; ++c) cs[c] = chunk_scale(cols[c], group * step);
    }
    float* wk = w + (k - k0) * 32;
    panel_chunk(cols, cs, nc < 16 ? nc : 16, k, wk, 0);
    if (nc > 16) panel_chunk(cols + 16, cs + 16, nc - 16, k, wk, 16);
  }
}

}  // namespace

Nbits4Simd nbits4_avx512() {
  return {dot_rows_avx512, dequant_panel_avx512};
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
