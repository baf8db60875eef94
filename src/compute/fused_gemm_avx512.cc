// The AVX-512F micro-kernel of the fused GEMM (fused_gemm.h): a 12 x 32 tile of C in 24
// registers; per k, two loads of B and twelve broadcasts of A feed 24 FMAs. Everything in
// this file after the target pragma is compiled for AVX-512F and only runs after a CPU
// check, so no standard header (whose inline functions could be shared with other
// translation units) is included below it.
#include "compute/fused_gemm.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))

namespace ortlite {
namespace nn {
namespace fgemm {

bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}

}  // namespace fgemm
}  // namespace nn
}  // namespace ortlite

#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#include <immintrin.h>

namespace ortlite {
namespace nn {
namespace fgemm {
namespace {

constexpr int64_t kPfA = 16;

// Whether the micro-kernel requests B's lines ahead of its k steps (kPfB below). Intel cores
// took them (the 2 MiB-L2 Xeon these kernels were tuned on); on AMD's Zen 4 the hardware
// prefetcher keeps up with the packed panels by itself and the prefetch instructions only
// took load slots and miss buffers: the batch-1 MLP of tools/bench.py (three 1 x 1024 @
// 1024 x 1024 Gemm, one row of A) 167-172 against 193-213 us at 1 thread and 84-96 against
// 112-114 at 2 (onnxruntime 185-222 / 106-139, same process), a stand-alone one-row loop
// over the same panels 141 against 173-197 us; BERT and MobileNetV2 within noise.
// (Asked on the first tile, not at load: this file is built for AVX-512.)
bool prefetch_b() {
  static const bool pf = [] {
    __builtin_cpu_init();
    return !__builtin_cpu_is("amd");
  }();
  return pf;
}

// The epilogue of row r of a tile: v0 / v1 hold its columns 0-15 / 16-31 (masks m0 / m1).
template <bool kFull, bool kHalf>
inline __attribute__((always_inline)) void finish_row(const TileArgs& t, int r, __m512 v0,
                                                      __m512 v1, __mmask16 m0, __mmask16 m1) {
  const __m512 zero = _mm512_setzero_ps();
  float* cr = t.c + r * t.ldc;
  if (t.accumulate) {
    v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, cr));
    v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, cr + 16));
  }
  if (t.last) {
    if (t.alpha != 1.f) {
      const __m512 al = _mm512_set1_ps(t.alpha);
      v0 = _mm512_mul_ps(v0, al);
      v1 = _mm512_mul_ps(v1, al);
    }
    if (t.bias_row) {
      const __m512 bv = _mm512_set1_ps(t.bias_row[r]);
      v0 = _mm512_add_ps(v0, bv);
      v1 = _mm512_add_ps(v1, bv);
    }
    if (t.bias_col) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, t.bias_col));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, t.bias_col + 16));
    }
    if (t.z) {
      const float* zr = t.z + r * t.ldz;
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, zr));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, zr + 16));
    }
    if (t.act == 1) {
      // x < lo ? lo : x, then > hi ? hi : x; NaN compares false and stays. vmaxps / vminps
      // are exactly these (max(a, b) = a > b ? a : b, its second operand on NaN), one
      // instruction each where a compare and a blend took two: with 16 input channels (a
      // 1x1 expansion's K), the epilogue was a quarter of the tile's vector instructions.
      const __m512 lo = _mm512_set1_ps(t.lo), hi = _mm512_set1_ps(t.hi);
      // (The masked forms: GCC 12's plain ones pass an undefined source it then warns on.)
      v0 = _mm512_mask_max_ps(v0, 0xFFFF, lo, v0);
      v1 = _mm512_mask_max_ps(v1, 0xFFFF, lo, v1);
      v0 = _mm512_mask_min_ps(v0, 0xFFFF, hi, v0);
      v1 = _mm512_mask_min_ps(v1, 0xFFFF, hi, v1);
    } else if (t.act == 2) {
      // x >= 0 ? x : slope * x.
      const __m512 s = _mm512_set1_ps(t.lo);
      v0 = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v0, zero, _CMP_GE_OQ), _mm512_mul_ps(v0, s), v0);
      v1 = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v1, zero, _CMP_GE_OQ), _mm512_mul_ps(v1, s), v1);
    }
  }
  if (kFull) {
    _mm512_storeu_ps(cr, v0);
    _mm512_storeu_ps(cr + 16, v1);
  } else {
    _mm512_mask_storeu_ps(cr, m0, v0);
    if (!kHalf) _mm512_mask_storeu_ps(cr + 16, m1, v1);
  }
}

// kUnitRs: the rows of A are adjacent (a_rs == 1), so the twelve broadcasts use constant
// displacements instead of twelve row offsets held in registers. kOff: B's rows are at
// b + b_off[k] (an implicit im2col), not b_ks apart. kHalf: at most 16 columns, one vector
// a row (a partial last panel: 14 x 14 images have 196 = 6 x 32 + 4 positions, and that
// panel took 15% of MobileNetV2's 14 x 14 expand-depthwise products with both vectors;
// 96 -> 576 and 64 -> 384 there 1.06-1.08x faster with one, the whole network 1.02x).
template <int R, bool kFull, bool kUnitRs, bool kOff = false, bool kHalf = false>
inline void tile(const TileArgs& t) {
  __m512 c0[R], c1[R];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    c0[r] = _mm512_setzero_ps();
    c1[r] = _mm512_setzero_ps();
  }
  const int cols = t.cols;
  const __mmask16 m0 = kFull || cols >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << cols) - 1);
  const __mmask16 m1 = kFull || cols >= 32 ? 0xFFFF
                       : cols > 16         ? static_cast<__mmask16>((1u << (cols - 16)) - 1)
                                           : 0;
  const float* a = t.a;
  const float* b = t.b;
  const int64_t* off = t.b_off;
  const int64_t a_rs = kUnitRs ? 1 : t.a_rs, a_ks = t.a_ks, b_ks = t.b_ks;
  const float* base[4];
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) base[q] = a + 3 * q * a_rs;
  // A read down its columns (a convolution's input, transposed: one line per k step), not
  // packed: its lines are requested kPfA steps ahead, so that lines another core has just
  // written (the previous layer's output) arrive in time.
  const bool pf_a = kUnitRs && a_ks != kNR && !t.a_copied;
  // B's lines are requested about 100 cycles ahead: 8 k steps of 2R FMAs for R >= 8 rows,
  // more steps for fewer rows (one row: 96 steps, 12 KiB of a packed B).
  constexpr int64_t kPfB = R >= 8 ? 8 : 96 / R;
  const bool pf_b = prefetch_b();
  auto step = [&]() __attribute__((always_inline)) {
    if (kOff) b = t.b + *off++;
    if (pf_a) _mm_prefetch(reinterpret_cast<const char*>(a + kPfA * a_ks), _MM_HINT_T0);
    __m512 b0, b1;
    if (kOff) {
      // Row k + kPfB (the table runs on past K for this).
      const float* bp = t.b + off[kPfB - 1];
      _mm_prefetch(reinterpret_cast<const char*>(bp), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(bp + 16), _MM_HINT_T0);
    }
    if (kFull && !kOff) {
      if (pf_b) {
        _mm_prefetch(reinterpret_cast<const char*>(b + kPfB * b_ks), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(b + kPfB * b_ks + 16), _MM_HINT_T0);
      }
      b0 = _mm512_loadu_ps(b);
      b1 = _mm512_loadu_ps(b + 16);
    } else if (kFull) {
      b0 = _mm512_loadu_ps(b);
      b1 = _mm512_loadu_ps(b + 16);
    } else if (kHalf) {
      b0 = _mm512_maskz_loadu_ps(m0, b);
      b1 = b0;
    } else {
      b0 = _mm512_maskz_loadu_ps(m0, b);
      b1 = _mm512_maskz_loadu_ps(m1, b + 16);
    }
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      // Rows apart: row r is base (r / 3) plus 0, 1 or 2 row strides, so that the twelve
      // addresses need four base registers and two strides instead of twelve offsets.
      const float* ar = kUnitRs ? a + r : base[r / 3] + (r % 3) * a_rs;
      const __m512 av = _mm512_set1_ps(*ar);
      c0[r] = _mm512_fmadd_ps(av, b0, c0[r]);
      if (!kHalf) c1[r] = _mm512_fmadd_ps(av, b1, c1[r]);
    }
    a += a_ks;
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) base[q] += a_ks;
    if (!kOff) b += b_ks;
  };
  // The first pf_lines steps also pull one line each of the B the thread needs next into L2.
  const int64_t kpf = t.pf ? (t.pf_lines < t.k ? t.pf_lines : t.k) : 0;
  const char* pf = reinterpret_cast<const char*>(t.pf);
  int64_t k = 0;
  for (; k < kpf; ++k) {
    _mm_prefetch(pf + 64 * k, _MM_HINT_T1);
    step();
  }
  for (; k < t.k; ++k) step();
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) finish_row<kFull, kHalf>(t, r, c0[r], c1[r], m0, m1);
}

template <int R>
inline void tile_rows(const TileArgs& t) {
  const bool half = t.cols <= 16;
  if (t.b_off) {
    if (t.cols == 32) {
      tile<R, true, true, true>(t);
    } else if (half) {
      tile<R, false, true, true, true>(t);
    } else {
      tile<R, false, true, true>(t);
    }
  } else if (t.a_rs == 1) {
    if (t.cols == 32) {
      tile<R, true, true>(t);
    } else if (half) {
      tile<R, false, true, false, true>(t);
    } else {
      tile<R, false, true>(t);
    }
  } else if (t.cols == 32) {
    tile<R, true, false>(t);
  } else if (half) {
    tile<R, false, false, false, true>(t);
  } else {
    tile<R, false, false>(t);
  }
}

// One to three rows of A against two adjacent full panels: 64 columns, four independent
// accumulators a row and two streams of B. A product of so few rows reads all of a large B
// once, from L3 or memory, and two streams kept more of its lines in flight than one: the
// batch-1 MLP of tools/bench.py (three 1 x 1024 @ 1024 x 1024 Gemm) in a stand-alone loop
// 164-177 against 172-200 us.
template <int R>
void tile_rows_pair(const TileArgs& t, const float* b2) {
  __m512 c[R][4];
#pragma GCC unroll 3
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < 4; ++q) c[r][q] = _mm512_setzero_ps();
  const float* a = t.a;
  const float* b = t.b;
  const int64_t a_rs = t.a_rs, a_ks = t.a_ks, b_ks = t.b_ks;
  for (int64_t k = 0; k < t.k; ++k) {
    const __m512 v0 = _mm512_loadu_ps(b), v1 = _mm512_loadu_ps(b + 16);
    const __m512 v2 = _mm512_loadu_ps(b2), v3 = _mm512_loadu_ps(b2 + 16);
#pragma GCC unroll 3
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * a_rs]);
      c[r][0] = _mm512_fmadd_ps(av, v0, c[r][0]);
      c[r][1] = _mm512_fmadd_ps(av, v1, c[r][1]);
      c[r][2] = _mm512_fmadd_ps(av, v2, c[r][2]);
      c[r][3] = _mm512_fmadd_ps(av, v3, c[r][3]);
    }
    a += a_ks;
    b += b_ks;
    b2 += b_ks;
  }
  TileArgs u = t;
  u.c += 32;
  if (u.bias_col) u.bias_col += 32;
  if (u.z) u.z += 32;
#pragma GCC unroll 3
  for (int r = 0; r < R; ++r) {
    finish_row<true, false>(t, r, c[r][0], c[r][1], 0xFFFF, 0xFFFF);
    finish_row<true, false>(u, r, c[r][2], c[r][3], 0xFFFF, 0xFFFF);
  }
}

}  // namespace

void tile_row_pair_avx512(const TileArgs& t, const float* b2) {
  switch (t.rows) {
    case 3:
      return tile_rows_pair<3>(t, b2);
    case 2:
      return tile_rows_pair<2>(t, b2);
    default:
      return tile_rows_pair<1>(t, b2);
  }
}

void tile_avx512(const TileArgs& t) {
  switch (t.rows) {
    case 12:
      return tile_rows<12>(t);
    case 11:
      return tile_rows<11>(t);
    case 10:
      return tile_rows<10>(t);
    case 9:
      return tile_rows<9>(t);
    case 8:
      return tile_rows<8>(t);
    case 7:
      return tile_rows<7>(t);
    case 6:
      return tile_rows<6>(t);
    case 5:
      return tile_rows<5>(t);
    case 4:
      return tile_rows<4>(t);
    case 3:
      return tile_rows<3>(t);
    case 2:
      return tile_rows<2>(t);
    default:
      return tile_rows<1>(t);
  }
}

}  // namespace fgemm
}  // namespace nn
}  // namespace ortlite

#pragma GCC pop_options

#else

namespace ortlite {
namespace nn {
namespace fgemm {
bool cpu_has_avx512() {
  return false;
}
void tile_avx512(const TileArgs&) {}
void tile_row_pair_avx512(const TileArgs&, const float*) {}
}  // namespace fgemm
}  // namespace nn
}  // namespace ortlite

#endif
