// The AVX2 + FMA micro-kernel of the fused GEMM (fused_gemm.h), for CPUs without AVX-512F.
// It takes the same 12 x 32 tiles (TileArgs) as the AVX-512 kernel and computes each as
// sub-tiles of at most 6 rows x 16 columns: 12 accumulators in ymm registers, two loads of
// B and six broadcasts of A per k step, which leaves room for one broadcast register among
// the 16 (a 3 x 32 sub-tile would need 17). The packed layouts are the same, so weights
// packed once serve either kernel. Everything in this file after the target pragma is
// compiled for AVX2 and FMA and only runs after a CPU check; no standard header is
// included below it.
#include "compute/fused_gemm.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))

namespace ortlite {
namespace nn {
namespace fgemm {

bool cpu_has_avx2_fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

}  // namespace fgemm
}  // namespace nn
}  // namespace ortlite

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#include <immintrin.h>

namespace ortlite {
namespace nn {
namespace fgemm {
namespace {

// Lanes [0, n) of an 8-float vector set (n clamped to 0..8), for maskload / maskstore.
inline __m256i lane_mask(int n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}

// The end of one 8-column vector v of C at row r, columns [c, c + 8) (lanes past the
// tile's columns masked off by m unless kFull): add what C holds when accumulating, then on
// the last k block alpha, the biases, Z and the activation, and store.
template <bool kFull>
__attribute__((always_inline)) inline void finish(const TileArgs& t, int r, int c, __m256 v,
                                                  __m256i m) {
  float* cr = t.c + r * t.ldc + c;
  if (t.accumulate) v = _mm256_add_ps(v, _mm256_maskload_ps(cr, m));
  if (t.last) {
    if (t.alpha != 1.f) v = _mm256_mul_ps(v, _mm256_set1_ps(t.alpha));
    if (t.bias_row) v = _mm256_add_ps(v, _mm256_set1_ps(t.bias_row[r]));
    if (t.bias_col) v = _mm256_add_ps(v, _mm256_maskload_ps(t.bias_col + c, m));
    if (t.z) v = _mm256_add_ps(v, _mm256_maskload_ps(t.z + r * t.ldz + c, m));
    if (t.act == 1) {
      // x < lo ? lo : x, then > hi ? hi : x; NaN compares false and stays.
      const __m256 lo = _mm256_set1_ps(t.lo), hi = _mm256_set1_ps(t.hi);
      v = _mm256_blendv_ps(v, lo, _mm256_cmp_ps(v, lo, _CMP_LT_OQ));
      v = _mm256_blendv_ps(v, hi, _mm256_cmp_ps(v, hi, _CMP_GT_OQ));
    } else if (t.act == 2) {
      // x >= 0 ? x : slope * x.
      v = _mm256_blendv_ps(_mm256_mul_ps(v, _mm256_set1_ps(t.lo)), v,
                           _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GE_OQ));
    }
  }
  if (kFull) {
    _mm256_storeu_ps(cr, v);
  } else {
    _mm256_maskstore_ps(cr, m, v);
  }
}

// A tile of one row (a GEMV: a batch-1 Gemm or MatMul with a constant B), all 32 columns
// at once and the k steps in two interleaved chains: 8 accumulators keep the FMA unit busy
// where the 6 x 16 sub-tile's two would wait on each FMA's latency, and B streams 128
// bytes a step. No software prefetch: the hardware's keeps up with the one stream (the
// batch-1 MLP of make bench on a Zen 1 CPU: 0.83 with prefetches 8 k steps ahead, 0.92-1.17
// at 48-200 steps, 0.99-1.01 with none).
template <bool kFull>
inline void row1(const TileArgs& t, const char* pf, int64_t pf_n) {
  __m256 x0[4], x1[4];
  __m256i m[4];
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    x0[q] = _mm256_setzero_ps();
    x1[q] = _mm256_setzero_ps();
    m[q] = lane_mask(t.cols - 8 * q);
  }
  const float* a = t.a;
  const float* b = t.b;
  const int64_t a_ks = t.a_ks, b_ks = t.b_ks;
  auto load = [&](const float* p, int q) __attribute__((always_inline)) {
    return kFull ? _mm256_loadu_ps(p + 8 * q) : _mm256_maskload_ps(p + 8 * q, m[q]);
  };
  int64_t k = 0;
  for (; k + 2 <= t.k; k += 2) {
    if (k < pf_n) _mm_prefetch(pf + 64 * k, _MM_HINT_T1);
    if (k + 1 < pf_n) _mm_prefetch(pf + 64 * (k + 1), _MM_HINT_T1);
    const __m256 a0 = _mm256_broadcast_ss(a), a1 = _mm256_broadcast_ss(a + a_ks);
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      x0[q] = _mm256_fmadd_ps(a0, load(b, q), x0[q]);
      x1[q] = _mm256_fmadd_ps(a1, load(b + b_ks, q), x1[q]);
    }
    a += 2 * a_ks;
    b += 2 * b_ks;
  }
  if (k < t.k) {
    if (k < pf_n) _mm_prefetch(pf + 64 * k, _MM_HINT_T1);
    const __m256 a0 = _mm256_broadcast_ss(a);
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) x0[q] = _mm256_fmadd_ps(a0, load(b, q), x0[q]);
  }
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q)
    if (kFull || 8 * q < t.cols) finish<kFull>(t, 0, 8 * q, _mm256_add_ps(x0[q], x1[q]), m[q]);
}

// Rows [r0, r0 + R) x columns [c0, c0 + 16) of the tile (columns past t.cols neither read
// from B nor stored). kFull: all 16 columns are in the tile. kUnitRs: A's rows adjacent.
// kOff: B's rows at b + b_off[k]. `pf` (nullable): lines of the next B to pull into L2, one
// per k step.
template <int R, bool kFull, bool kUnitRs, bool kOff>
inline void sub(const TileArgs& t, int r0, int c0, const char* pf, int64_t pf_n) {
  __m256 acc0[R], acc1[R];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    acc0[r] = _mm256_setzero_ps();
    acc1[r] = _mm256_setzero_ps();
  }
  const int ncols = t.cols - c0;  // >= 1
  const __m256i m0 = lane_mask(ncols), m1 = lane_mask(ncols - 8);
  const int64_t a_rs = kUnitRs ? 1 : t.a_rs, a_ks = t.a_ks, b_ks = t.b_ks;
  const float* a = t.a + r0 * a_rs;
  const float* b = t.b + c0;
  const int64_t* off = t.b_off;
  const float* base[2] = {a, a + 3 * a_rs};
  constexpr int64_t kPfB = R >= 4 ? 8 : 24 / R;
  const bool pf_a = kUnitRs && a_ks != kNR;
  auto step = [&]() __attribute__((always_inline)) {
    if (kOff) b = t.b + c0 + *off++;
    if (pf_a) _mm_prefetch(reinterpret_cast<const char*>(a + 16 * a_ks), _MM_HINT_T0);
    __m256 b0, b1;
    if (kOff) {
      _mm_prefetch(reinterpret_cast<const char*>(t.b + c0 + off[kPfB - 1]), _MM_HINT_T0);
    } else if (kFull) {
      _mm_prefetch(reinterpret_cast<const char*>(b + kPfB * b_ks), _MM_HINT_T0);
    }
    if (kFull) {
      b0 = _mm256_loadu_ps(b);
      b1 = _mm256_loadu_ps(b + 8);
    } else {
      b0 = _mm256_maskload_ps(b, m0);
      b1 = _mm256_maskload_ps(b + 8, m1);
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const float* ar = kUnitRs ? a + r : base[r / 3] + (r % 3) * a_rs;
      const __m256 av = _mm256_broadcast_ss(ar);
      acc0[r] = _mm256_fmadd_ps(av, b0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(av, b1, acc1[r]);
    }
    a += a_ks;
    base[0] += a_ks;
    base[1] += a_ks;
    if (!kOff) b += b_ks;
  };
  int64_t k = 0;
  for (; k < pf_n; ++k) {
    _mm_prefetch(pf + 64 * k, _MM_HINT_T1);
    step();
  }
  for (; k < t.k; ++k) step();
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    finish<kFull>(t, r0 + r, c0, acc0[r], m0);
    finish<kFull>(t, r0 + r, c0 + 8, acc1[r], m1);
  }
}

template <int R, bool kUnitRs, bool kOff>
inline void sub_cols(const TileArgs& t, int r0, int c0, const char* pf, int64_t pf_n) {
  if (t.cols - c0 >= 16) {
    sub<R, true, kUnitRs, kOff>(t, r0, c0, pf, pf_n);
  } else {
    sub<R, false, kUnitRs, kOff>(t, r0, c0, pf, pf_n);
  }
}

template <int R>
inline void sub_rows(const TileArgs& t, int r0, int c0, const char* pf, int64_t pf_n) {
  if (t.b_off) {
    sub_cols<R, true, true>(t, r0, c0, pf, pf_n);
  } else if (t.a_rs == 1) {
    sub_cols<R, true, false>(t, r0, c0, pf, pf_n);
  } else {
    sub_cols<R, false, false>(t, r0, c0, pf, pf_n);
  }
}

}  // namespace

void tile_avx2(const TileArgs& t) {
  // The L2 prefetch of the next B rides on the first sub-tile's k steps.
  const char* pf = reinterpret_cast<const char*>(t.pf);
  int64_t pf_n = t.pf ? (t.pf_lines < t.k ? t.pf_lines : t.k) : 0;
  if (t.rows == 1 && !t.b_off) {
    if (t.cols == 32) {
      row1<true>(t, pf, pf_n);
    } else {
      row1<false>(t, pf, pf_n);
    }
    return;
  }
  for (int c0 = 0; c0 < t.cols; c0 += 16) {
    for (int r0 = 0; r0 < t.rows; r0 += 6) {
      switch (t.rows - r0 < 6 ? t.rows - r0 : 6) {
        case 6:
          sub_rows<6>(t, r0, c0, pf, pf_n);
          break;
        case 5:
          sub_rows<5>(t, r0, c0, pf, pf_n);
          break;
        case 4:
          sub_rows<4>(t, r0, c0, pf, pf_n);
          break;
        case 3:
          sub_rows<3>(t, r0, c0, pf, pf_n);
          break;
        case 2:
          sub_rows<2>(t, r0, c0, pf, pf_n);
          break;
        default:
          sub_rows<1>(t, r0, c0, pf, pf_n);
          break;
      }
      pf_n = 0;
    }
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
bool cpu_has_avx2_fma() {
  return false;
}
void tile_avx2(const TileArgs&) {}
}  // namespace fgemm
}  // namespace nn
}  // namespace ortlite

#endif
