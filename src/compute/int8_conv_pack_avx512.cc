// The packed B of the 8-bit GEMM (int8_gemm.h) for a convolution, gathered straight from
// channel planes padded beforehand (int8gemm::pack_b_conv): per 16 output positions and 4
// taps, four 32-byte loads, one two-source byte permute (vpermt2b) into the panel's 64-byte
// group, the sign flip, vpdpbusd by ones for the column sums and one store. Compiled for
// AVX-512 VBMI / VNNI; used only after a run-time CPU check (int8_gemm.cc).
#include <algorithm>
#include <cstdint>

#include "compute/int8_gemm.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
// GCC 12 reports the undefined upper half that _mm512_inserti64x4 passes on as
// (maybe-)uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,avx2")

namespace ortlite {
namespace int8gemm {
namespace {

// Positions [j0, j0 + n) of a panel that lie in one output row: loads from base + tap
// offset, bytes [j0 * step, (j0 + n) * step) of the 32 loaded.
struct Segment {
  const uint8_t* base;
  __mmask32 mask;
};

template <int STEP>
inline __m256i gather_tap(const Segment* seg, int nseg, int64_t off) {
  constexpr __mmask32 kFull = STEP == 1 ? 0xFFFFu : 0xFFFFFFFFu;
  if (nseg == 1 && seg[0].mask == kFull) {
    // Only the bytes in use: with STEP 1 the upper half is never read by the permute.
    if (STEP == 1)
      return _mm256_castsi128_si256(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(seg[0].base + off)));
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(seg[0].base + off));
  }
  __m256i v = _mm256_setzero_si256();
  for (int s = 0; s < nseg; ++s) v = _mm256_mask_loadu_epi8(v, seg[s].mask, seg[s].base + off);
  return v;
}

template <int STEP>
void pack(const uint8_t* src, const int64_t* tap_off, int64_t K, int64_t OW, int64_t row_step,
          int64_t p0, int64_t pc, PackedB* out) {
  const int64_t K4 = out->K4, full = K / 4, rem = K % 4;
  // Byte 4 j + t of a group is tap t of position j: byte j * STEP of the t-th 32-byte load
  // (loads 0 and 1 in the first source, 2 and 3 in the second).
  alignas(64) uint8_t idx[64];
  for (int j = 0; j < 16; ++j)
    for (int t = 0; t < 4; ++t) idx[4 * j + t] = static_cast<uint8_t>(32 * t + j * STEP);
  const __m512i vidx = _mm512_load_si512(idx);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(out->is_signed ? 0x00 : 0x80));
  const __m512i ones = _mm512_set1_epi8(1);
  // The last group's missing taps read as the packed zero.
  const __mmask64 keep = rem == 1   ? 0x1111111111111111ull
                         : rem == 2 ? 0x3333333333333333ull
                                    : 0x7777777777777777ull;
  const __mmask32 step_mask = STEP == 1 ? 0x1u : 0x3u;
  Segment seg[16];
  for (int64_t p = 0; p < out->N16; ++p) {
    const int64_t q0 = p0 + p * 16, valid = std::min<int64_t>(16, pc - p * 16);
    int nseg = 0;
    for (int64_t j = 0; j < valid;) {
      const int64_t q = q0 + j, oh = q / OW, ow = q % OW;
      const int64_t run = std::min(valid - j, OW - ow);
      // Byte j * STEP of the load is position j: the row's base moved back by j positions.
      seg[nseg].base = src + oh * row_step + (ow - j) * STEP;
      __mmask32 m = 0;
      for (int64_t i = j; i < j + run; ++i) m |= step_mask << (i * STEP);
      seg[nseg++].mask = m;
      j += run;
    }
    __m512i acc = _mm512_setzero_si512();
    int8_t* dst = out->data.data() + p * K4 * 64;
    auto group = [&](int64_t k4, const int64_t* to) {
      const __m256i r0 = gather_tap<STEP>(seg, nseg, to[0]);
      const __m256i r1 = gather_tap<STEP>(seg, nseg, to[1]);
      const __m256i r2 = gather_tap<STEP>(seg, nseg, to[2]);
      const __m256i r3 = gather_tap<STEP>(seg, nseg, to[3]);
      const __m512i a = _mm512_inserti64x4(_mm512_castsi256_si512(r0), r1, 1);
      const __m512i b = _mm512_inserti64x4(_mm512_castsi256_si512(r2), r3, 1);
      __m512i z = _mm512_xor_si512(_mm512_permutex2var_epi8(a, vidx, b), flip);
      if (k4 == full) z = _mm512_maskz_mov_epi8(keep, z);
      acc = _mm512_dpbusd_epi32(acc, ones, z);
      _mm512_storeu_si512(dst + k4 * 64, z);
    };
    for (int64_t k4 = 0; k4 < full; ++k4) group(k4, tap_off + 4 * k4);
    if (rem) {
      int64_t to[4] = {0, 0, 0, 0};
      for (int64_t t = 0; t < rem; ++t) to[t] = tap_off[4 * full + t];
      group(full, to);
    }
    // Columns past N keep the zero column sum of the padding.
    const __mmask16 vm = static_cast<__mmask16>((1u << valid) - 1u);
    _mm512_storeu_si512(out->colsum.data() + p * 16, _mm512_maskz_mov_epi32(vm, acc));
  }
}

void pack_conv512(const uint8_t* src, const int64_t* tap_off, int64_t K, int64_t OW,
                  int64_t row_step, int64_t col_step, int64_t p0, int64_t pc, PackedB* out) {
  if (col_step == 1) {
    pack<1>(src, tap_off, K, OW, row_step, p0, pc, out);
  } else {
    pack<2>(src, tap_off, K, OW, row_step, p0, pc, out);
  }
}

// Bytes j * STEP (j < 16, masked to `left` positions) from p as int32, of the source type.
template <int STEP, bool SIGNED>
inline __m512i taps16(const uint8_t* p, int64_t left) {
  if (STEP == 1) {
    const __m128i v = left >= 16
                          ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))
                          : _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << left) - 1u), p);
    return SIGNED ? _mm512_cvtepi8_epi32(v) : _mm512_cvtepu8_epi32(v);
  }
  // Only the even bytes are used: the last odd byte is not read.
  const int64_t n = 2 * std::min<int64_t>(left, 16) - 1;  // bytes 0, 2, .., n - 1
  const __mmask32 m = static_cast<__mmask32>((1ull << n) - 1u);
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi8(m, p));
  return SIGNED ? _mm512_srai_epi32(_mm512_slli_epi32(w, 24), 24)
                : _mm512_and_si512(w, _mm512_set1_epi32(0xFF));
}

inline __mmask16 lanes(int64_t left) {
  return left >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
}

// NV blocks of up to 16 outputs, block v from x + xo[v] into y + yo[v] (left[v] > 0 of its
// columns valid): NV accumulators, so that the taps' multiply-adds do not wait on one
// another. The blocks are consecutive columns of a row, or of two or four rows of narrow
// planes.
template <int STEP, bool SIGNED, int NV>
inline void depthwise_block(const uint8_t* x, const int64_t* xo, int64_t PW, int64_t KH, int64_t KW,
                            int64_t dh, int64_t dw, const int32_t* wt, int32_t init,
                            const int64_t* left, int32_t* y, const int64_t* yo) {
  __m512i acc[NV];
  for (int v = 0; v < NV; ++v) acc[v] = _mm512_set1_epi32(init);
  for (int64_t kh = 0, k = 0; kh < KH; ++kh) {
    const uint8_t* xk = x + kh * dh * PW;
    for (int64_t kw = 0; kw < KW; ++kw, ++k) {
      // The tap in the low 16 bits of each lane, the high 16 of the weight 0: vpdpwssd adds
      // x * w exactly (|w| <= 255, the x bytes sign- or zero-extended).
      const __m512i w = _mm512_set1_epi32(static_cast<int32_t>(wt[k] & 0xFFFF));
      for (int v = 0; v < NV; ++v) {
        acc[v] =
            _mm512_dpwssd_epi32(acc[v], taps16<STEP, SIGNED>(xk + kw * dw + xo[v], left[v]), w);
      }
    }
  }
  for (int v = 0; v < NV; ++v) _mm512_mask_storeu_epi32(y + yo[v], lanes(left[v]), acc[v]);
}

template <int STEP, bool SIGNED>
void depthwise(const uint8_t* x, int64_t PW, int64_t sh, int64_t KH, int64_t KW, int64_t dh,
               int64_t dw, const int32_t* wt, int32_t init, int64_t OW, int64_t r0, int64_t r1,
               int32_t* y) {
  const int64_t rs = sh * PW;  // input bytes from one output row to the next
  int64_t oh = r0;
  if (OW <= 16) {
    // One block a row: four rows at a time.
    const int64_t left[4] = {OW, OW, OW, OW}, xo[4] = {0, rs, 2 * rs, 3 * rs};
    const int64_t yo[4] = {0, OW, 2 * OW, 3 * OW};
    for (; oh + 4 <= r1; oh += 4) {
      depthwise_block<STEP, SIGNED, 4>(x + oh * rs, xo, PW, KH, KW, dh, dw, wt, init, left,
                                       y + (oh - r0) * OW, yo);
    }
  } else if (OW <= 32) {
    // Two blocks a row: two rows at a time.
    const int64_t left[4] = {OW, OW - 16, OW, OW - 16};
    const int64_t xo[4] = {0, 16 * STEP, rs, rs + 16 * STEP}, yo[4] = {0, 16, OW, OW + 16};
    for (; oh + 2 <= r1; oh += 2) {
      depthwise_block<STEP, SIGNED, 4>(x + oh * rs, xo, PW, KH, KW, dh, dw, wt, init, left,
                                       y + (oh - r0) * OW, yo);
    }
  }
  const int64_t xo[4] = {0, 16 * STEP, 32 * STEP, 48 * STEP}, yo[4] = {0, 16, 32, 48};
  for (; oh < r1; ++oh) {
    const uint8_t* xr = x + oh * rs;
    int32_t* yr = y + (oh - r0) * OW;
    for (int64_t ow = 0; ow < OW; ow += 64) {
      const int64_t n = OW - ow;
      const int64_t left[4] = {n, n - 16, n - 32, n - 48};
      const uint8_t* xb = xr + ow * STEP;
      if (n > 48) {
        depthwise_block<STEP, SIGNED, 4>(xb, xo, PW, KH, KW, dh, dw, wt, init, left, yr + ow, yo);
      } else if (n > 32) {
        depthwise_block<STEP, SIGNED, 3>(xb, xo, PW, KH, KW, dh, dw, wt, init, left, yr + ow, yo);
      } else if (n > 16) {
        depthwise_block<STEP, SIGNED, 2>(xb, xo, PW, KH, KW, dh, dw, wt, init, left, yr + ow, yo);
      } else {
        depthwise_block<STEP, SIGNED, 1>(xb, xo, PW, KH, KW, dh, dw, wt, init, left, yr + ow, yo);
      }
    }
  }
}

void depthwise512(const uint8_t* x, bool is_signed, int64_t PW, int64_t sh, int64_t sw, int64_t KH,
                  int64_t KW, int64_t dh, int64_t dw, const int32_t* wt, int32_t init, int64_t OW,
                  int64_t r0, int64_t r1, int32_t* y) {
  if (sw == 1) {
    (is_signed ? depthwise<1, true> : depthwise<1, false>)(x, PW, sh, KH, KW, dh, dw, wt, init, OW,
                                                           r0, r1, y);
  } else {
    (is_signed ? depthwise<2, true> : depthwise<2, false>)(x, PW, sh, KH, KW, dh, dw, wt, init, OW,
                                                           r0, r1, y);
  }
}

}  // namespace

namespace detail {
ConvPackFn avx512_conv_pack() {
  return pack_conv512;
}
DepthwiseFn avx512_depthwise() {
  return depthwise512;
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
ConvPackFn avx512_conv_pack() {
  return nullptr;
}
DepthwiseFn avx512_depthwise() {
  return nullptr;
}
}  // namespace detail
}  // namespace int8gemm
}  // namespace ortlite
#endif
