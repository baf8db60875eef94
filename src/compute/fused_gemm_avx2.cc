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
  const __m256 zero = _mm256_setzero_ps();
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    float* cr = t.c + (r0 + r) * t.ldc + c0;
    __m256 v0 = acc0[r], v1 = acc1[r];
    if (t.accumulate) {
      v0 = _mm256_add_ps(v0, _mm256_maskload_ps(cr, m0));
      v1 = _mm256_add_ps(v1, _mm256_maskload_ps(cr + 8, m1));
    }
    if (t.last) {
      if (t.alpha != 1.f) {
        const __m256 al = _mm256_set1_ps(t.alpha);
        v0 = _mm256_mul_ps(v0, al);
        v1 = _mm256_mul_ps(v1, al);
      }
      if (t.bias_row) {
        const __m256 bv = _mm256_set1_ps(t.bias_row[r0 + r]);
        v0 = _mm256_add_ps(v0, bv);
        v1 = _mm256_add_ps(v1, bv);
      }
      if (t.bias_col) {
        v0 = _mm256_add_ps(v0, _mm256_maskload_ps(t.bias_col + c0, m0));
        v1 = _mm256_add_ps(v1, _mm256_maskload_ps(t.bias_col + c0 + 8, m1));
      }
      if (t.z) {
        const float* zr = t.z + (r0 + r) * t.ldz + c0;
        v0 = _mm256_add_ps(v0, _mm256_maskload_ps(zr, m0));
        v1 = _mm256_add_ps(v1, _mm256_maskload_ps(zr + 8, m1));
      }
      if (t.act == 1) {
        // x < lo ? lo : x, then > hi ? hi : x; NaN compares false and stays.
        const __m256 lo = _mm256_set1_ps(t.lo), hi = _mm256_set1_ps(t.hi);
        v0 = _mm256_blendv_ps(v0, lo, _mm256_cmp_ps(v0, lo, _CMP_LT_OQ));
        v1 = _mm256_blendv_ps(v1, lo, _mm256_cmp_ps(v1, lo, _CMP_LT_OQ));
        v0 = _mm256_blendv_ps(v0, hi, _mm256_cmp_ps(v0, hi, _CMP_GT_OQ));
        v1 = _mm256_blendv_ps(v1, hi, _mm256_cmp_ps(v1, hi, _CMP_GT_OQ));
      } else if (t.act == 2) {
        // x >= 0 ? x : slope * x.
        const __m256 s = _mm256_set1_ps(t.lo);
        v0 = _mm256_blendv_ps(_mm256_mul_ps(v0, s), v0, _mm256_cmp_ps(v0, zero, _CMP_GE_OQ));
        v1 = _mm256_blendv_ps(_mm256_mul_ps(v1, s), v1, _mm256_cmp_ps(v1, zero, _CMP_GE_OQ));
      }
    }
    if (kFull) {
      _mm256_storeu_ps(cr, v0);
      _mm256_storeu_ps(cr + 8, v1);
    } else {
      _mm256_maskstore_ps(cr, m0, v0);
      _mm256_maskstore_ps(cr + 8, m1, v1);
    }
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
