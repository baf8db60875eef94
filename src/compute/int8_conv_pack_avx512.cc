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

}  // namespace

namespace detail {
ConvPackFn avx512_conv_pack() {
  return pack_conv512;
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
}  // namespace detail
}  // namespace int8gemm
}  // namespace ortlite
#endif
