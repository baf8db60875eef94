// The AVX-512F kernels of conv_avx512.h but the direct dense ones (conv_avx512_direct.cc).
// Everything after the target pragma is compiled for AVX-512F and only runs after the CPU
// check in supported(), so no standard header is included below it.
#include "compute/conv_avx512.h"

#include <algorithm>

#include "compute/fused_gemm.h"

namespace ortlite {
namespace nn {
namespace cvx {

bool available() {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  static const bool ok = fgemm::cpu_has_avx512();
  return ok;
#else
  return false;
#endif
}

bool dw_supported(const DwGeometry& g) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  return available() && (g.sw == 1 || g.sw == 2) && g.KW >= 1 && g.KW <= 16 && g.KH >= 1 &&
         g.sh >= 1 && g.OW >= 1;
#else
  (void)g;
  return false;
#endif
}

bool dw_flat_ok(const DwGeometry& g) {
  return g.sh == 1 && g.sw == 1 && g.OW == g.W && g.OW <= 8;
}

std::vector<uint32_t> dw_masks(const DwGeometry& g) {
  const int64_t nv = (g.OW + 15) / 16;
  std::vector<uint32_t> m;
  if (g.flat) {
    const int64_t n = g.OH * g.OW, nvf = (n + 15) / 16, kk = g.KH * g.KW;
    m.assign(static_cast<size_t>(nvf * kk), 0);
    for (int64_t v = 0; v < nvf; ++v)
      for (int64_t i = 0; i < 16 && 16 * v + i < n; ++i) {
        const int64_t oy = (16 * v + i) / g.OW, ox = (16 * v + i) % g.OW;
        for (int64_t ky = 0; ky < g.KH; ++ky)
          for (int64_t kx = 0; kx < g.KW; ++kx) {
            const int64_t iy = oy - g.pt + ky, ix = ox - g.pl + kx;
            if (iy >= 0 && iy < g.H && ix >= 0 && ix < g.W)
              m[v * kk + ky * g.KW + kx] |= uint32_t(1) << i;
          }
      }
  } else if (g.sw == 1) {
    m.resize(static_cast<size_t>(nv * g.KW));
    for (int64_t v = 0; v < nv; ++v)
      for (int64_t kx = 0; kx < g.KW; ++kx) {
        const int64_t c0 = 16 * v - g.pl + kx;  // input column of lane 0
        m[v * g.KW + kx] = lane_bits(-c0, g.W - c0, 16);
      }
  } else {
    const int64_t np = (g.KW + 1) / 2;
    m.resize(static_cast<size_t>(nv * np));
    for (int64_t v = 0; v < nv; ++v)
      for (int64_t p = 0; p < np; ++p) {
        const int64_t c0 = 32 * v - g.pl + 2 * p;
        m[v * np + p] = lane_bits(-c0, g.W - c0, 32);
      }
  }
  return m;
}

Dw16Layout dw16_layout(const DwGeometry& g) {
  const int64_t kh = (g.KH - 1) * g.dh + 1, kw = (g.KW - 1) * g.dw + 1;  // dilated extents
  return {(g.OH - 1) * g.sh + kh, (g.OW - 1) * g.sw + kw};
}

}  // namespace cvx
}  // namespace nn
}  // namespace ortlite

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))

#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
// GCC 12 reports the _mm512_undefined_ps() that its own shuffle intrinsics pass as a
// don't-care source as (maybe-)uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

namespace ortlite {
namespace nn {
namespace cvx {
namespace {

// One vector of 16 outputs of row oy: taps of kernel rows [ky0, ky1). kK: the kernel is
// kK x kK (0: any, from g); kFull: no load of this vector needs a mask. At stride 1 kernel
// row ky adds into accumulator ky % 4 (four independent FMA chains: a 7x7 kernel's 49 taps
// in one chain waited on the FMA latency), summed at the end; stride 2 (bound by its
// permutes) keeps one chain.
template <int kS, int kK, bool kFull>
inline __m512 out_vec(const DwGeometry& g, const uint32_t* mv, const float* x0, int64_t ky0,
                      int64_t ky1, const float* w, __m512 acc) {
  const int64_t KW = kK ? kK : g.KW, W = g.W;
  __m512 part[4] = {acc, _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  if (kS == 1) {
    for (int64_t ky = ky0; ky < ky1; ++ky) {
      const float* r = x0 + ky * W;
      const float* wk = w + ky * KW;
      __m512 a = part[(ky - ky0) & 3];
#pragma GCC unroll 16
      for (int64_t kx = 0; kx < KW; ++kx) {
        const __m512 v = kFull ? _mm512_loadu_ps(r + kx)
                               : _mm512_maskz_loadu_ps(static_cast<__mmask16>(mv[kx]), r + kx);
        a = _mm512_fmadd_ps(_mm512_set1_ps(wk[kx]), v, a);
      }
      part[(ky - ky0) & 3] = a;
    }
  } else {
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd =
        _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const int64_t np = (KW + 1) / 2;
    for (int64_t ky = ky0; ky < ky1; ++ky) {
      const float* r = x0 + ky * W;
      const float* wk = w + ky * KW;
#pragma GCC unroll 8
      for (int64_t p = 0; p < np; ++p) {
        __m512 a, c;
        if (kFull) {
          a = _mm512_loadu_ps(r + 2 * p);
          c = _mm512_loadu_ps(r + 2 * p + 16);
        } else {
          a = _mm512_maskz_loadu_ps(static_cast<__mmask16>(mv[p] & 0xFFFF), r + 2 * p);
          c = _mm512_maskz_loadu_ps(static_cast<__mmask16>(mv[p] >> 16), r + 2 * p + 16);
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(wk[2 * p]), _mm512_permutex2var_ps(a, even, c), acc);
        if (2 * p + 1 < KW)
          acc = _mm512_fmadd_ps(_mm512_set1_ps(wk[2 * p + 1]), _mm512_permutex2var_ps(a, odd, c),
                                acc);
      }
    }
    return acc;
  }
  return _mm512_add_ps(_mm512_add_ps(part[0], part[1]), _mm512_add_ps(part[2], part[3]));
}

// One kernel row of a 3x3 tap set for one output vector, added to acc: w0 x[c] + w1 x[c+1] +
// w2 x[c+2] at the columns of the vector's lanes (c = lane * kS), r the load address of tap
// column 0.
template <int kS, bool kFull>
inline __m512 row3(const float* r, const uint32_t* mv, __m512 w0, __m512 w1, __m512 w2,
                   __m512 acc) {
  if (kS == 1) {
    const __m512 a = kFull ? _mm512_loadu_ps(r) : _mm512_maskz_loadu_ps(mv[0], r);
    const __m512 b = kFull ? _mm512_loadu_ps(r + 1) : _mm512_maskz_loadu_ps(mv[1], r + 1);
    const __m512 c = kFull ? _mm512_loadu_ps(r + 2) : _mm512_maskz_loadu_ps(mv[2], r + 2);
    acc = _mm512_fmadd_ps(w0, a, acc);
    acc = _mm512_fmadd_ps(w1, b, acc);
    return _mm512_fmadd_ps(w2, c, acc);
  }
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  __m512 a, b, c, d;
  if (kFull) {
    a = _mm512_loadu_ps(r);
    b = _mm512_loadu_ps(r + 16);
    c = _mm512_loadu_ps(r + 2);
    d = _mm512_loadu_ps(r + 18);
  } else {
    a = _mm512_maskz_loadu_ps(static_cast<__mmask16>(mv[0] & 0xFFFF), r);
    b = _mm512_maskz_loadu_ps(static_cast<__mmask16>(mv[0] >> 16), r + 16);
    c = _mm512_maskz_loadu_ps(static_cast<__mmask16>(mv[1] & 0xFFFF), r + 2);
    d = _mm512_maskz_loadu_ps(static_cast<__mmask16>(mv[1] >> 16), r + 18);
  }
  acc = _mm512_fmadd_ps(w0, _mm512_permutex2var_ps(a, even, b), acc);
  acc = _mm512_fmadd_ps(w1, _mm512_permutex2var_ps(a, odd, b), acc);
  return _mm512_fmadd_ps(w2, _mm512_permutex2var_ps(c, even, d), acc);
}

// A 3x3 output vector with all three input rows inside the image: one accumulator per
// kernel row (three independent FMA chains instead of one of nine).
template <int kS, bool kFull>
inline __m512 vec3x3(const float* r, int64_t W, const uint32_t* mv, const __m512* wv, __m512 b) {
  const __m512 z = _mm512_setzero_ps();
  const __m512 a0 = row3<kS, kFull>(r, mv, wv[0], wv[1], wv[2], b);
  const __m512 a1 = row3<kS, kFull>(r + W, mv, wv[3], wv[4], wv[5], z);
  const __m512 a2 = row3<kS, kFull>(r + 2 * W, mv, wv[6], wv[7], wv[8], z);
  return _mm512_add_ps(_mm512_add_ps(a0, a1), a2);
}

// RN output rows (row r at input row offset r * sh) times VN vectors of 16 columns, stride
// 1, every kernel row inside the image: tap column kx outer (its VN load masks loaded once),
// kernel row ky inner, each broadcast weight feeding RN * VN independent FMA chains. x0: the
// load address of tap (0, 0) for the first row and vector; mv: the masks of that vector
// (KW per vector).
template <int RN, int VN>
inline void block_s1(const DwGeometry& g, const uint32_t* mv, const float* x0, const float* w,
                     __m512 vb, __m512 (&acc)[RN][VN]) {
  const int64_t KW = g.KW, KH = g.KH, W = g.W, rs = g.sh * g.W;
  for (int r = 0; r < RN; ++r)
    for (int j = 0; j < VN; ++j) acc[r][j] = vb;
  for (int64_t kx = 0; kx < KW; ++kx) {
    __mmask16 m[VN];
    for (int j = 0; j < VN; ++j) m[j] = static_cast<__mmask16>(mv[j * KW + kx]);
    const float* xk = x0 + kx;
    for (int64_t ky = 0; ky < KH; ++ky, xk += W) {
      const __m512 wv = _mm512_set1_ps(w[ky * KW + kx]);
      for (int r = 0; r < RN; ++r)
        for (int j = 0; j < VN; ++j)
          acc[r][j] =
              _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m[j], xk + r * rs + 16 * j), acc[r][j]);
    }
  }
}

// block_s1 for kernels of kKH rows and row stride 1, RN output rows sharing their input
// rows: per tap column kx the kKH weights stay in registers and each of the RN + kKH - 1
// input rows is loaded once and feeds every output row it is a tap of (a load per FMA made
// the 7x7 kernel wait on the load ports). The taps of an output are added in another order
// than block_s1's.
template <int RN, int VN, int kKH>
inline void block_s1_shared(const DwGeometry& g, const uint32_t* mv, const float* x0,
                            const float* w, __m512 vb, __m512 (&acc)[RN][VN]) {
  const int64_t KW = g.KW, W = g.W;
  for (int r = 0; r < RN; ++r)
    for (int j = 0; j < VN; ++j) acc[r][j] = vb;
  for (int64_t kx = 0; kx < KW; ++kx) {
    __mmask16 m[VN];
    for (int j = 0; j < VN; ++j) m[j] = static_cast<__mmask16>(mv[j * KW + kx]);
    __m512 wk[kKH];
    for (int ky = 0; ky < kKH; ++ky) wk[ky] = _mm512_set1_ps(w[ky * KW + kx]);
    const float* xk = x0 + kx;
#pragma GCC unroll 16
    for (int i = 0; i < RN + kKH - 1; ++i) {
      __m512 v[VN];
      for (int j = 0; j < VN; ++j) v[j] = _mm512_maskz_loadu_ps(m[j], xk + i * W + 16 * j);
#pragma GCC unroll 8
      for (int r = 0; r < RN; ++r) {
        if (i - r < 0 || i - r >= kKH) continue;
        for (int j = 0; j < VN; ++j) acc[r][j] = _mm512_fmadd_ps(wk[i - r], v[j], acc[r][j]);
      }
    }
  }
}

// The stride-2 form of block_s1_shared (both strides 2): output row r reads input rows
// 2 r + ky. Per tap column, each input row of the block is loaded and its even or odd
// columns permuted out once, feeding every output row it is a tap of (the permutes bounded
// the one-vector loop).
template <int RN, int VN, int kKH>
inline void block_s2_shared(const DwGeometry& g, const uint32_t* mv, const float* x0,
                            const float* w, __m512 vb, __m512 (&acc)[RN][VN]) {
  const int64_t KW = g.KW, W = g.W, np = (KW + 1) / 2;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  for (int r = 0; r < RN; ++r)
    for (int j = 0; j < VN; ++j) acc[r][j] = vb;
  for (int64_t kx = 0; kx < KW; ++kx) {
    const int64_t p = kx / 2;
    const __m512i idx = kx & 1 ? odd : even;
    __mmask16 ml[VN], mh[VN];
    for (int j = 0; j < VN; ++j) {
      ml[j] = static_cast<__mmask16>(mv[j * np + p] & 0xFFFF);
      mh[j] = static_cast<__mmask16>(mv[j * np + p] >> 16);
    }
    __m512 wk[kKH];
    for (int ky = 0; ky < kKH; ++ky) wk[ky] = _mm512_set1_ps(w[ky * KW + kx]);
    const float* xk = x0 + 2 * p;
#pragma GCC unroll 16
    for (int i = 0; i < 2 * (RN - 1) + kKH; ++i) {
      __m512 v[VN];
      for (int j = 0; j < VN; ++j) {
        const __m512 a = _mm512_maskz_loadu_ps(ml[j], xk + i * W + 32 * j);
        const __m512 c = _mm512_maskz_loadu_ps(mh[j], xk + i * W + 32 * j + 16);
        v[j] = _mm512_permutex2var_ps(a, idx, c);
      }
#pragma GCC unroll 8
      for (int r = 0; r < RN; ++r) {
        if (i - 2 * r < 0 || i - 2 * r >= kKH) continue;
        for (int j = 0; j < VN; ++j) acc[r][j] = _mm512_fmadd_ps(wk[i - 2 * r], v[j], acc[r][j]);
      }
    }
  }
}

// Interior output rows of a kernel larger than 3x3: RN rows, VN vectors at a time. Stride
// 1: block_s1 (block_s1_shared for 5 and 7 kernel rows at row stride 1); stride 2 (both
// axes, 5 or 7 kernel rows): block_s2_shared. Clamp and store as run_impl does.
template <int kS, int RN, int VN>
inline void rows_blk(const DwGeometry& g, const uint32_t* masks, const float* x0, const float* w,
                     __m512 vb, bool clamp, __m512 vlo, __m512 vhi, __mmask16 tail_mask, int64_t v0,
                     int64_t nv, float* yr) {
  __m512 acc[RN][VN];
  if (kS == 2) {
    const uint32_t* mv = masks + v0 * ((g.KW + 1) / 2);
    if (g.KH == 7) {
      block_s2_shared<RN, VN, 7>(g, mv, x0 + 32 * v0, w, vb, acc);
    } else {
      block_s2_shared<RN, VN, 5>(g, mv, x0 + 32 * v0, w, vb, acc);
    }
  } else {
    const uint32_t* mv = masks + v0 * g.KW;
    if (g.sh == 1 && g.KH == 7) {
      block_s1_shared<RN, VN, 7>(g, mv, x0 + 16 * v0, w, vb, acc);
    } else if (g.sh == 1 && g.KH == 5) {
      block_s1_shared<RN, VN, 5>(g, mv, x0 + 16 * v0, w, vb, acc);
    } else {
      block_s1<RN, VN>(g, mv, x0 + 16 * v0, w, vb, acc);
    }
  }
  for (int r = 0; r < RN; ++r) {
    for (int j = 0; j < VN; ++j) {
      __m512 a = acc[r][j];
      if (clamp) {
        a = _mm512_mask_max_ps(a, 0xFFFF, vlo, a);
        a = _mm512_mask_min_ps(a, 0xFFFF, vhi, a);
      }
      float* out = yr + r * g.OW + 16 * (v0 + j);
      if (v0 + j + 1 < nv) {
        _mm512_storeu_ps(out, a);
      } else {
        _mm512_mask_storeu_ps(out, tail_mask, a);
      }
    }
  }
}

// All the vectors of RN interior rows: four at a time at stride 1, two at stride 2 (whose
// weights of two kernel columns and permuted rows need more registers).
template <int kS, int RN>
inline void row_block(const DwGeometry& g, const uint32_t* masks, const float* x0, const float* w,
                      __m512 vb, bool clamp, __m512 vlo, __m512 vhi, __mmask16 tail_mask,
                      int64_t nv, float* yr) {
  constexpr int kVN = kS == 1 ? 4 : 2;
  int64_t v0 = 0;
  for (; v0 + kVN <= nv; v0 += kVN)
    rows_blk<kS, RN, kVN>(g, masks, x0, w, vb, clamp, vlo, vhi, tail_mask, v0, nv, yr);
  switch (nv - v0) {
    case 3:
      rows_blk<kS, RN, 3>(g, masks, x0, w, vb, clamp, vlo, vhi, tail_mask, v0, nv, yr);
      break;
    case 2:
      rows_blk<kS, RN, 2>(g, masks, x0, w, vb, clamp, vlo, vhi, tail_mask, v0, nv, yr);
      break;
    case 1:
      rows_blk<kS, RN, 1>(g, masks, x0, w, vb, clamp, vlo, vhi, tail_mask, v0, nv, yr);
      break;
    default:
      break;
  }
}

template <int kS, int kK>
void run_impl(const DwGeometry& g, const uint32_t* masks, const float* xc, const float* w, float b,
              bool clamp, float lo, float hi, float* yc) {
  const int64_t nv = (g.OW + 15) / 16, KW = kK ? kK : g.KW, KH = kK ? kK : g.KH;
  const int64_t mper = kS == 1 ? KW : (KW + 1) / 2;  // masks per vector
  const uint32_t full = kS == 1 ? 0xFFFFu : 0xFFFFFFFFu;
  // Vectors [vf0, vf1) need no mask (all their loads inside the row).
  int64_t vf0 = nv, vf1 = nv;
  for (int64_t v = 0; v < nv; ++v) {
    bool all = true;
    for (int64_t k = 0; k < mper; ++k) all = all && masks[v * mper + k] == full;
    if (all && vf0 == nv) vf0 = v;
    if (!all && vf0 != nv) {
      vf1 = v;
      break;
    }
  }
  const __m512 vb = _mm512_set1_ps(b), vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  const int64_t tail = g.OW - 16 * (nv - 1);
  const __mmask16 tail_mask = static_cast<__mmask16>((1u << tail) - 1);
  __m512 wv[9];
  if (kK == 3)
    for (int t = 0; t < 9; ++t) wv[t] = _mm512_set1_ps(w[t]);
  // Interior rows go in blocks (rows_blk): at stride 1 for kernels above 3x3, at stride 2
  // (both axes) for 5 or 7 kernel rows.
  const bool blocks = kK == 0 && (kS == 1 ? KH * KW > 9 : g.sh == 2 && (KH == 5 || KH == 7));
  // Output rows whose kernel rows all lie inside the image: [oy_in0, oy_in1).
  const int64_t oy_in0 = std::min<int64_t>(g.OH, (g.pt + g.sh - 1) / g.sh);
  const int64_t oy_in1 =
      std::max<int64_t>(oy_in0, std::min<int64_t>(g.OH, (g.H - KH + g.pt) / g.sh + 1));
  for (int64_t oy = 0; oy < g.OH; ++oy) {
    const int64_t iy0 = oy * g.sh - g.pt;
    const int64_t ky0 = iy0 < 0 ? -iy0 : 0, ky1 = g.H - iy0 < KH ? g.H - iy0 : KH;
    float* yr = yc + oy * g.OW;
    if (blocks && oy >= oy_in0 && oy < oy_in1) {
      const float* x0 = xc + iy0 * g.W - g.pl;
      if (oy + 3 < oy_in1) {
        row_block<kS, 4>(g, masks, x0, w, vb, clamp, vlo, vhi, tail_mask, nv, yr);
        oy += 3;
      } else if (oy + 1 < oy_in1) {
        row_block<kS, 2>(g, masks, x0, w, vb, clamp, vlo, vhi, tail_mask, nv, yr);
        ++oy;
      } else {
        row_block<kS, 1>(g, masks, x0, w, vb, clamp, vlo, vhi, tail_mask, nv, yr);
      }
      continue;
    }
    // x0 + ky * W + (column of lane 0 for tap 0) = the load address of tap (ky, 0).
    const float* x0 = xc + iy0 * g.W - g.pl;
    const bool rows3 = kK == 3 && ky0 == 0 && ky1 == 3;
    for (int64_t v = 0; v < nv; ++v) {
      const float* xv = x0 + 16 * kS * v;
      __m512 acc;
      if (rows3) {
        if (v >= vf0 && v < vf1) {
          acc = vec3x3<kS, true>(xv, g.W, nullptr, wv, vb);
        } else {
          acc = vec3x3<kS, false>(xv, g.W, masks + v * mper, wv, vb);
        }
      } else if (v >= vf0 && v < vf1) {
        acc = out_vec<kS, kK, true>(g, nullptr, xv, ky0, ky1, w, vb);
      } else {
        acc = out_vec<kS, kK, false>(g, masks + v * mper, xv, ky0, ky1, w, vb);
      }
      if (clamp) {
        // max / min return their second operand when either is NaN: NaN stays.
        acc = _mm512_mask_max_ps(acc, 0xFFFF, vlo, acc);
        acc = _mm512_mask_min_ps(acc, 0xFFFF, vhi, acc);
      }
      if (v + 1 < nv) {
        _mm512_storeu_ps(yr + 16 * v, acc);
      } else {
        _mm512_mask_storeu_ps(yr + 16 * v, tail_mask, acc);
      }
    }
  }
}

// A 3x3 kernel's nine weights, the bias and the clamp bounds, broadcast once per plane.
struct Dw3x3 {
  __m512 w[9], vb, vlo, vhi;
  Dw3x3(const float* wt, float b, float lo, float hi)
      : vb(_mm512_set1_ps(b)), vlo(_mm512_set1_ps(lo)), vhi(_mm512_set1_ps(hi)) {
    for (int t = 0; t < 9; ++t) w[t] = _mm512_set1_ps(wt[t]);
  }
  // The three kernel rows' sums added, then clamped when `clamp` (max / min return their
  // second operand when either is NaN: NaN stays).
  __attribute__((always_inline)) __m512 sum(__m512 a0, __m512 a1, __m512 a2, bool clamp) const {
    __m512 acc = _mm512_add_ps(_mm512_add_ps(a0, a1), a2);
    if (clamp) {
      acc = _mm512_mask_max_ps(acc, 0xFFFF, vlo, acc);
      acc = _mm512_mask_min_ps(acc, 0xFFFF, vhi, acc);
    }
    return acc;
  }
};

// 3x3, strides 1, output rows of at most 16 (MobileNetV2's 14 x 14 planes): one vector a row,
// the three tap-column masks in mask registers for the whole plane, the nine weights in
// registers, one accumulator per kernel row, and two output rows an iteration sharing the
// loads of their two common input rows. run_impl's per-row bookkeeping (its vector ranges
// and masks from memory) cost more than the taps here: a Conv of 384 planes of 14 x 14,
// 92 -> 52 us a run; MobileNetV2 2-3.5% faster at 1 and 2 threads.
void run_narrow3(const DwGeometry& g, const uint32_t* masks, const float* xc, const float* w,
                 float b, bool clamp, float lo, float hi, float* yc) {
  const __mmask16 m0 = static_cast<__mmask16>(masks[0]), m1 = static_cast<__mmask16>(masks[1]),
                  m2 = static_cast<__mmask16>(masks[2]);
  const __mmask16 st = static_cast<__mmask16>((1u << g.OW) - 1);
  const Dw3x3 k(w, b, lo, hi);
  const __m512 z = _mm512_setzero_ps();
  const int64_t W = g.W, H = g.H;
  // Input row iy's three shifted loads times one kernel row's weights, added to acc; rows
  // outside the image add nothing.
  auto taps = [&](int64_t iy, __m512 k0, __m512 k1, __m512 k2, __m512 acc) {
    if (iy < 0 || iy >= H) return acc;
    const float* r = xc + iy * W - g.pl;
    acc = _mm512_fmadd_ps(k0, _mm512_maskz_loadu_ps(m0, r), acc);
    acc = _mm512_fmadd_ps(k1, _mm512_maskz_loadu_ps(m1, r + 1), acc);
    return _mm512_fmadd_ps(k2, _mm512_maskz_loadu_ps(m2, r + 2), acc);
  };
  auto finish = [&](__m512 a0, __m512 a1, __m512 a2, float* yr) {
    _mm512_mask_storeu_ps(yr, st, k.sum(a0, a1, a2, clamp));
  };
  int64_t oy = 0;
  for (; oy + 2 <= g.OH; oy += 2) {
    const int64_t iy = oy - g.pt;
    // Output oy reads input rows iy .. iy + 2, output oy + 1 rows iy + 1 .. iy + 3.
    __m512 a0 = taps(iy, k.w[0], k.w[1], k.w[2], k.vb),
           b0 = taps(iy + 1, k.w[0], k.w[1], k.w[2], k.vb);
    __m512 a1 = taps(iy + 1, k.w[3], k.w[4], k.w[5], z),
           b1 = taps(iy + 2, k.w[3], k.w[4], k.w[5], z);
    __m512 a2 = taps(iy + 2, k.w[6], k.w[7], k.w[8], z),
           b2 = taps(iy + 3, k.w[6], k.w[7], k.w[8], z);
    finish(a0, a1, a2, yc + oy * g.OW);
    finish(b0, b1, b2, yc + (oy + 1) * g.OW);
  }
  if (oy < g.OH) {
    const int64_t iy = oy - g.pt;
    finish(taps(iy, k.w[0], k.w[1], k.w[2], k.vb), taps(iy + 1, k.w[3], k.w[4], k.w[5], z),
           taps(iy + 2, k.w[6], k.w[7], k.w[8], z), yc + oy * g.OW);
  }
}

// Output rows [oy0, oy1) of run_wide3, two at a time (kTwo) or one: every vector of each.
// kInside: all the input rows they read lie in the image, else the rows outside add nothing.
// (One call for all the rows: per row pair, the setup below and a call cost as much as a
// 56-wide row pair's four vectors took.)
template <int kS, bool kTwo, bool kInside, bool kClamp>
inline void wide3_rows(const float* xc, const DwGeometry& g, const uint32_t* masks, int64_t nv,
                       __mmask16 tail, const Dw3x3& k, float* yc, int64_t oy0, int64_t oy1) {
  const int64_t W = g.W, OW = g.OW;
  const __m512 z = _mm512_setzero_ps();
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  // A local copy, kept in registers: through the reference, each store to Y could have
  // changed the weights.
  const Dw3x3 kc = k;
  const __m512* kw = kc.w;
  const __m512 vb = kc.vb;
  auto sum = [&](__m512 s0, __m512 s1, __m512 s2) __attribute__((always_inline)) {
    return kc.sum(s0, s1, s2, kClamp);
  };
  for (int64_t oy = oy0; oy < oy1; oy += kTwo ? 2 : 1) {
    const int64_t iy = kS * oy - g.pt;
    const float* r = xc + iy * W - g.pl;
    float* yr = yc + oy * OW;
    auto in = [&](int64_t i) { return kInside || (iy + i >= 0 && iy + i < g.H); };
    // Output row 0 reads input rows 0-2, output row 1 rows kS to kS + 2.
    const bool in0 = in(0), in1 = in(1), in2 = in(2), in3 = kTwo && in(3),
               in4 = kTwo && kS == 2 && in(4);
    for (int64_t v = 0; v < nv; ++v, r += 16 * kS, yr += 16) {
      const __mmask16 st = v + 1 < nv ? static_cast<__mmask16>(0xFFFF) : tail;
      // The tap columns' load masks: stride 1 one per tap column, stride 2 two per pair of
      // tap columns (even / odd phases).
      const uint32_t* mv = masks + (kS == 1 ? 3 : 2) * v;
      const __mmask16 m0 = static_cast<__mmask16>(mv[0]), m1 = static_cast<__mmask16>(mv[1]),
                      m2 = static_cast<__mmask16>(kS == 1 ? mv[2] : mv[0] >> 16),
                      m3 = static_cast<__mmask16>(kS == 1 ? 0 : mv[1] >> 16);
      __m512 a0 = vb, a1 = z, a2 = z, b0 = vb, b1 = z, b2 = z;
      // Input row i's three taps (at stride 2 the even and odd columns of two loads each,
      // permuted out as run_impl's row3 does), each feeding the kernel rows that read it.
      auto row = [&](int i, bool on) __attribute__((always_inline)) {
        if (!on) return;
        const float* ri = r + i * W;
        __m512 x0, x1, x2;
        if (kS == 1) {
          x0 = _mm512_maskz_loadu_ps(m0, ri);
          x1 = _mm512_maskz_loadu_ps(m1, ri + 1);
          x2 = _mm512_maskz_loadu_ps(m2, ri + 2);
        } else {
          const __m512 l0 = _mm512_maskz_loadu_ps(m0, ri), h0 = _mm512_maskz_loadu_ps(m2, ri + 16);
          const __m512 l1 = _mm512_maskz_loadu_ps(m1, ri + 2),
                       h1 = _mm512_maskz_loadu_ps(m3, ri + 18);
          x0 = _mm512_permutex2var_ps(l0, even, h0);
          x1 = _mm512_permutex2var_ps(l0, odd, h0);
          x2 = _mm512_permutex2var_ps(l1, even, h1);
        }
        if (i <= 2) {
          __m512& a = i == 0 ? a0 : i == 1 ? a1 : a2;
          a = _mm512_fmadd_ps(kw[3 * i], x0, a);
          a = _mm512_fmadd_ps(kw[3 * i + 1], x1, a);
          a = _mm512_fmadd_ps(kw[3 * i + 2], x2, a);
        }
        const int j = i - kS;  // output row 1's kernel row
        if (kTwo && j >= 0 && j <= 2) {
          __m512& c = j == 0 ? b0 : j == 1 ? b1 : b2;
          c = _mm512_fmadd_ps(kw[3 * j], x0, c);
          c = _mm512_fmadd_ps(kw[3 * j + 1], x1, c);
          c = _mm512_fmadd_ps(kw[3 * j + 2], x2, c);
        }
      };
      row(0, in0);
      row(1, in1);
      row(2, in2);
      if (kTwo) row(3, in3);
      if (kTwo && kS == 2) row(4, in4);
      _mm512_mask_storeu_ps(yr, st, sum(a0, a1, a2));
      if (kTwo) _mm512_mask_storeu_ps(yr + OW, st, sum(b0, b1, b2));
    }
  }
}

// 3x3 with strides 1, or 2 in both axes, and rows of more than 16 outputs:
// run_narrow3's scheme over every vector of a pair of output rows. The pair's input rows (4
// at stride 1, 5 at stride 2) are each loaded once per vector at the three tap columns (12 /
// 20 loads for two output vectors; run_impl loaded the 9 / 12 of each output vector); the
// sums are run_impl's, in its order (one chain per kernel row from the bias or zero, (row 0
// + row 1) + row 2), so its rows inside the image give the same bits.
// Depthwise Conv + Clip alone, 1 thread, against run_impl (two builds interleaved in one
// process, both orders): strides 1, 144 planes of 56 x 56 1.37-1.41x, 192 of 28 x 28 1.34x,
// 32 of 112 x 112 1.31-1.43x; strides 2, 96 planes of 112 x 112 1.25x, 144 of 56 x 56 1.12x
// (with 14 outputs a row, one vector, it was 0.86x: left to run_impl). The weights are
// copied into registers first (through the reference every FMA reloaded them: a store to Y
// could have changed them; 10-20% slower than run_impl that way), and one call takes all
// the rows (a call per row pair cost 8-16% at 56 wide).
template <int kS, bool kClamp>
void run_wide3(const DwGeometry& g, const uint32_t* masks, const float* xc, const Dw3x3& k,
               float* yc) {
  const int64_t nv = (g.OW + 15) / 16, H = g.H;
  const __mmask16 tail = static_cast<__mmask16>(lane_bits(0, g.OW - 16 * (nv - 1), 16));
  // Output rows whose input rows all lie inside the image, [in0, in1): kS * oy - pt >= 0 and
  // kS * oy - pt + 2 < H.
  const int64_t in0 = std::min<int64_t>(g.OH, (g.pt + kS - 1) / kS);
  const int64_t last = H - 3 + g.pt;  // kS * oy <= last
  const int64_t in1 = std::max(in0, std::min(g.OH, last < 0 ? 0 : last / kS + 1));
  const int64_t pairs_end = in0 + (in1 - in0) / 2 * 2;
  wide3_rows<kS, false, false, kClamp>(xc, g, masks, nv, tail, k, yc, 0, in0);
  wide3_rows<kS, true, true, kClamp>(xc, g, masks, nv, tail, k, yc, in0, pairs_end);
  wide3_rows<kS, false, false, kClamp>(xc, g, masks, nv, tail, k, yc, pairs_end, g.OH);
}

// 3x3, strides 2, output rows of at most 8 (14 x 14 -> 7 x 7): two output rows a vector
// (lanes 0-7 row oy, 8-15 row oy + 1). Per kernel row, the two input rows are each loaded at
// tap columns 0 and 2 and their even / odd lanes gathered by two-source permutes. Rows
// outside the image load as zeros (their mask is 0), as columns outside it do. A Conv of
// 576 planes 14 x 14 -> 7 x 7: 58 -> 43 us a run (onnxruntime 44).
void run_narrow3_s2(const DwGeometry& g, const float* xc, const float* w, float b, bool clamp,
                    float lo, float hi, float* yc) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  // Lane j of a load at tap column kx reads input column j - pl + kx.
  auto col_mask = [&](int64_t kx) {
    uint32_t m = 0;
    for (int64_t j = 0; j < 16; ++j)
      if (j - g.pl + kx >= 0 && j - g.pl + kx < g.W) m |= 1u << j;
    return static_cast<__mmask16>(m);
  };
  const __mmask16 c0 = col_mask(0), c2 = col_mask(2);
  const __mmask16 lo_out = static_cast<__mmask16>((1u << g.OW) - 1);
  const Dw3x3 k(w, b, lo, hi);
  const __m512 z = _mm512_setzero_ps();
  const int64_t W = g.W, H = g.H;
  // Kernel row taps for input rows ia (output row oy) and ib (oy + 1; -1: none).
  auto taps = [&](int64_t ia, int64_t ib, __m512 k0, __m512 k1, __m512 k2, __m512 acc) {
    const bool va = ia >= 0 && ia < H, vb_row = ib >= 0 && ib < H;
    const float* ra = xc + (va ? ia : 0) * W - g.pl;
    const float* rb = xc + (vb_row ? ib : 0) * W - g.pl;
    const __m512 a0 = _mm512_maskz_loadu_ps(va ? c0 : 0, ra);
    const __m512 a2 = _mm512_maskz_loadu_ps(va ? c2 : 0, ra + 2);
    const __m512 b0 = _mm512_maskz_loadu_ps(vb_row ? c0 : 0, rb);
    const __m512 b2 = _mm512_maskz_loadu_ps(vb_row ? c2 : 0, rb + 2);
    acc = _mm512_fmadd_ps(k0, _mm512_permutex2var_ps(a0, even, b0), acc);
    acc = _mm512_fmadd_ps(k1, _mm512_permutex2var_ps(a0, odd, b0), acc);
    return _mm512_fmadd_ps(k2, _mm512_permutex2var_ps(a2, even, b2), acc);
  };
  for (int64_t oy = 0; oy < g.OH; oy += 2) {
    const bool two = oy + 1 < g.OH;
    const int64_t ia = oy * 2 - g.pt, ib = two ? ia + 2 : -1;
    const __m512 r0 = taps(ia, ib, k.w[0], k.w[1], k.w[2], k.vb);
    const __m512 r1 = taps(ia + 1, two ? ib + 1 : -1, k.w[3], k.w[4], k.w[5], z);
    const __m512 r2 = taps(ia + 2, two ? ib + 2 : -1, k.w[6], k.w[7], k.w[8], z);
    const __m512 acc = k.sum(r0, r1, r2, clamp);
    float* yr = yc + oy * g.OW;
    _mm512_mask_storeu_ps(yr, lo_out, acc);
    // Lanes 8.. to row oy + 1 (the store's masked-off lanes touch no memory).
    if (two) _mm512_mask_storeu_ps(yr + g.OW - 8, static_cast<__mmask16>(lo_out << 8), acc);
  }
}

inline __m512 shuf(__m512 a, __m512 b, bool lo_pairs) {
  return lo_pairs ? _mm512_shuffle_f32x4(a, b, 0x88) : _mm512_shuffle_f32x4(a, b, 0xdd);
}
inline __m512 unpd(__m512 a, __m512 b, bool lo) {
  const __m512d x = _mm512_castps_pd(a), y = _mm512_castps_pd(b);
  return _mm512_castpd_ps(lo ? _mm512_unpacklo_pd(x, y) : _mm512_unpackhi_pd(x, y));
}

// The plane as one span (DwGeometry::flat): output p reads input p + (ky - pt) W + kx - pl
// for tap (ky, kx), where its mask lets it. One accumulator per kernel row.
void run_flat(const DwGeometry& g, const uint32_t* masks, const float* xc, const float* w, float b,
              bool clamp, float lo, float hi, float* yc) {
  const int64_t n = g.OH * g.OW, nvf = (n + 15) / 16, kk = g.KH * g.KW;
  const __m512 vb = _mm512_set1_ps(b), vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  for (int64_t v = 0; v < nvf; ++v) {
    const uint32_t* mv = masks + v * kk;
    __m512 acc = vb;
    for (int64_t ky = 0; ky < g.KH; ++ky) {
      const float* r = xc + 16 * v + (ky - g.pt) * g.W - g.pl;
      __m512 a = _mm512_setzero_ps();
      for (int64_t kx = 0; kx < g.KW; ++kx)
        a = _mm512_fmadd_ps(
            _mm512_set1_ps(w[ky * g.KW + kx]),
            _mm512_maskz_loadu_ps(static_cast<__mmask16>(mv[ky * g.KW + kx]), r + kx), a);
      acc = _mm512_add_ps(acc, a);
    }
    if (clamp) {
      acc = _mm512_mask_max_ps(acc, 0xFFFF, vlo, acc);
      acc = _mm512_mask_min_ps(acc, 0xFFFF, vhi, acc);
    }
    const int64_t left = n - 16 * v;
    if (left >= 16) {
      _mm512_storeu_ps(yc + 16 * v, acc);
    } else {
      _mm512_mask_storeu_ps(yc + 16 * v, static_cast<__mmask16>((1u << left) - 1), acc);
    }
  }
}

}  // namespace

namespace {
// transpose16 of src, or of src + src2 (the same layout) where src2 is given.
inline void transpose16_of(const float* src, const float* src2, int64_t lds, int rows, int cols,
                           float* dst, int64_t ldd) {
  const __mmask16 cm = static_cast<__mmask16>((1u << cols) - 1);
  const __mmask16 rm = static_cast<__mmask16>((1u << rows) - 1);
  __m512 r[16], t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i)
    r[i] = i >= rows ? _mm512_setzero_ps()
           : src2    ? _mm512_add_ps(_mm512_maskz_loadu_ps(cm, src + i * lds),
                                     _mm512_maskz_loadu_ps(cm, src2 + i * lds))
                     : _mm512_maskz_loadu_ps(cm, src + i * lds);
    // 32-bit, 64-bit, then 128-bit and 256-bit lanes: the classic 4-step 16 x 16 transpose.
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 16; i += 4) {
    r[i] = unpd(t[i], t[i + 2], true);
    r[i + 1] = unpd(t[i], t[i + 2], false);
    r[i + 2] = unpd(t[i + 1], t[i + 3], true);
    r[i + 3] = unpd(t[i + 1], t[i + 3], false);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 16; h += 8) {
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      t[h + i] = shuf(r[h + i], r[h + i + 4], true);
      t[h + i + 4] = shuf(r[h + i], r[h + i + 4], false);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    r[i] = shuf(t[i], t[i + 8], true);
    r[i + 8] = shuf(t[i], t[i + 8], false);
  }
#pragma GCC unroll 16
  for (int c = 0; c < 16; ++c)
    if (c < cols) _mm512_mask_storeu_ps(dst + c * ldd, rm, r[c]);
}
}  // namespace

void transpose16(const float* src, int64_t lds, int rows, int cols, float* dst, int64_t ldd) {
  transpose16_of(src, nullptr, lds, rows, cols, dst, ldd);
}

void transpose16_sum(const float* a, const float* b, int64_t lds, int rows, int cols, float* dst,
                     int64_t ldd) {
  transpose16_of(a, b, lds, rows, cols, dst, ldd);
}

void dw_nhwc(const DwGeometry& g, const float* x, int64_t ldx, const float* wt, int64_t ldw,
             const float* bias, bool clamp, float lo, float hi, int64_t c0, int64_t c1, float* y,
             int64_t ldy) {
  const int64_t P = g.OH * g.OW;
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  alignas(64) float tile[16 * 16];
  for (int64_t c = c0; c < c1; c += 16) {
    const int cn = static_cast<int>(std::min<int64_t>(16, c1 - c));
    const __mmask16 cm = static_cast<__mmask16>((1u << cn) - 1);
    const __m512 vb = bias ? _mm512_maskz_loadu_ps(cm, bias + c) : _mm512_setzero_ps();
    for (int64_t p0 = 0; p0 < P; p0 += 16) {
      const int pn = static_cast<int>(std::min<int64_t>(16, P - p0));
      for (int q = 0; q < pn; ++q) {
        const int64_t oy = (p0 + q) / g.OW, ox = (p0 + q) % g.OW;
        const int64_t iy0 = oy * g.sh - g.pt, ix0 = ox * g.sw - g.pl;
        __m512 acc = vb;
        for (int64_t ky = 0; ky < g.KH; ++ky) {
          const int64_t iy = iy0 + ky;
          if (iy < 0 || iy >= g.H) continue;
          const float* xr = x + iy * g.W * ldx + c;
          const float* wr = wt + ky * g.KW * ldw + c;
          for (int64_t kx = 0; kx < g.KW; ++kx) {
            const int64_t ix = ix0 + kx;
            if (ix < 0 || ix >= g.W) continue;
            acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(cm, xr + ix * ldx),
                                  _mm512_maskz_loadu_ps(cm, wr + kx * ldw), acc);
          }
        }
        // max(lo, v) and min(hi, v) return v when it is NaN.
        if (clamp) acc = _mm512_min_ps(vhi, _mm512_max_ps(vlo, acc));
        _mm512_store_ps(tile + q * 16, acc);
      }
      transpose16(tile, 16, pn, cn, y + c * ldy + p0, ldy);
    }
  }
}

void dw16_pack(const DwGeometry& g, const Dw16Layout& L, const float* x, int64_t x_plane, int cn,
               int64_t r0, int64_t r1, float* buf) {
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t r = r0; r < r1; ++r) {
    float* row = buf + (r - r0) * L.Wb * 16;
    const int64_t iy = r - g.pt;
    if (iy < 0 || iy >= g.H) {
      for (int64_t j = 0; j < L.Wb; ++j) _mm512_store_ps(row + 16 * j, zero);
      continue;
    }
    // Columns [0, pl) and [pl + W, Wb) are zeros; the image's columns are transposed in, 16
    // pixels x cn channels a block (lanes past cn zeroed first).
    // (A left pad can reach past every column the windows read: strides wider than the image.)
    const int64_t c0 = std::min<int64_t>(std::max<int64_t>(g.pl, 0), L.Wb);
    const int64_t c1 = std::max<int64_t>(c0, std::min<int64_t>(L.Wb, g.pl + g.W));
    for (int64_t j = 0; j < c0; ++j) _mm512_store_ps(row + 16 * j, zero);
    for (int64_t j = c1; j < L.Wb; ++j) _mm512_store_ps(row + 16 * j, zero);
    if (cn < 16)
      for (int64_t j = c0; j < c1; ++j) _mm512_store_ps(row + 16 * j, zero);
    for (int64_t j = c0; j < c1; j += 16) {
      const int n = static_cast<int>(std::min<int64_t>(16, c1 - j));
      transpose16(x + iy * g.W + (j - g.pl), x_plane, cn, n, row + 16 * j, 16);
    }
  }
}

void dw16_run(const DwGeometry& g, const Dw16Layout& L, const float* buf, const float* wt16,
              const float* bias, bool clamp, float lo, float hi, int cn, int64_t oy0, int64_t oy1,
              float* y, int64_t y_plane) {
  const __mmask16 cm = static_cast<__mmask16>((1u << cn) - 1);
  const __m512 vb = bias ? _mm512_maskz_loadu_ps(cm, bias) : _mm512_setzero_ps();
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  alignas(64) float tile[16 * 16];
  // 16 consecutive outputs of the flattened band, across row ends, each read from its own
  // offset into the copy: row by row, a 17-wide row filled 17 lanes of 32 (the same or
  // faster at every width measured, 7 to 112).
  const int64_t p_end = oy1 * g.OW;
  for (int64_t p0 = oy0 * g.OW; p0 < p_end; p0 += 16) {
    const int n = static_cast<int>(std::min<int64_t>(16, p_end - p0));
    int64_t off[16];
    int64_t oy = p0 / g.OW, ox = p0 % g.OW;
    for (int q = 0; q < n; ++q) {
      off[q] = ((oy - oy0) * g.sh * L.Wb + ox * g.sw) * 16;
      if (++ox == g.OW) {
        ox = 0;
        ++oy;
      }
    }
    for (int q = n; q < 16; ++q) off[q] = off[0];
    __m512 acc[16];
#pragma GCC unroll 16
    for (int q = 0; q < 16; ++q) acc[q] = vb;
    for (int64_t ky = 0; ky < g.KH; ++ky) {
      const float* r = buf + ky * g.dh * L.Wb * 16;
      const float* w = wt16 + ky * g.KW * 16;
      for (int64_t kx = 0; kx < g.KW; ++kx, r += 16 * g.dw, w += 16) {
        const __m512 wv = _mm512_load_ps(w);
#pragma GCC unroll 16
        for (int q = 0; q < 16; ++q)
          acc[q] = _mm512_fmadd_ps(_mm512_load_ps(r + off[q]), wv, acc[q]);
      }
    }
    // max(lo, v) and min(hi, v) return v when it is NaN.
#pragma GCC unroll 16
    for (int q = 0; q < 16; ++q)
      _mm512_store_ps(tile + 16 * q,
                      clamp ? _mm512_min_ps(vhi, _mm512_max_ps(vlo, acc[q])) : acc[q]);
    transpose16(tile, 16, n, cn, y + p0, y_plane);
  }
}

void deinterleave2(const float* s, int64_t n, float* even, float* odd) {
  const __m512i ie = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i io = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  int64_t o = 0;
  for (; o + 16 <= n; o += 16) {
    const __m512 a = _mm512_loadu_ps(s + 2 * o), b = _mm512_loadu_ps(s + 2 * o + 16);
    _mm512_storeu_ps(even + o, _mm512_permutex2var_ps(a, ie, b));
    _mm512_storeu_ps(odd + o, _mm512_permutex2var_ps(a, io, b));
  }
  if (o < n) {
    const int64_t m = n - o, in = 2 * m;  // inputs s[2o, 2o + in)
    const __mmask16 ma = static_cast<__mmask16>(in >= 16 ? 0xFFFF : (1u << in) - 1);
    const __mmask16 mb = static_cast<__mmask16>(in > 16 ? (1u << (in - 16)) - 1 : 0);
    const __m512 a = _mm512_maskz_loadu_ps(ma, s + 2 * o);
    const __m512 b = _mm512_maskz_loadu_ps(mb, s + 2 * o + 16);
    const __mmask16 mo = static_cast<__mmask16>((1u << m) - 1);
    _mm512_mask_storeu_ps(even + o, mo, _mm512_permutex2var_ps(a, ie, b));
    _mm512_mask_storeu_ps(odd + o, mo, _mm512_permutex2var_ps(a, io, b));
  }
}

void im2col_shifted(const float* x, int64_t in_size, int64_t C, int64_t ksize, const int64_t* shift,
                    const uint16_t* bits, int64_t pc, float* col) {
  const int64_t nv = (pc + 15) / 16, full = pc / 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (pc % 16)) - 1);
  for (int64_t c = 0; c < C; ++c) {
    const float* xc = x + c * in_size;
    for (int64_t kf = 0; kf < ksize; ++kf, col += pc) {
      // Integer offsets: the masked-off lanes may lie outside the input.
      const uintptr_t src = reinterpret_cast<uintptr_t>(xc) + shift[kf] * 4;
      const uint16_t* m = bits + kf * nv;
      int64_t v = 0;
      for (; v < full; ++v)
        _mm512_storeu_ps(col + 16 * v,
                         _mm512_maskz_loadu_ps(m[v], reinterpret_cast<const float*>(src + 64 * v)));
      if (v < nv)
        _mm512_mask_storeu_ps(
            col + 16 * v, tail,
            _mm512_maskz_loadu_ps(m[v] & tail, reinterpret_cast<const float*>(src + 64 * v)));
    }
  }
}

void dw_run(const DwGeometry& g, const uint32_t* masks, const float* xc, const float* w, float b,
            bool clamp, float lo, float hi, float* yc) {
  const bool k3 = g.KH == 3 && g.KW == 3;
  if (g.KH == 1 && g.KW == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 && g.OH == g.H &&
      g.OW == g.W) {
    // 1x1, no padding: the plane times the weight plus the bias, as one span (run_impl went
    // vector by vector through its kernel-row bookkeeping: 144 planes of 20 x 20 took 0.54x
    // onnxruntime's time).
    const int64_t n = g.OH * g.OW;
    const __m512 vw = _mm512_set1_ps(w[0]), vb = _mm512_set1_ps(b);
    const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF)
                                      : static_cast<__mmask16>((1u << (n - i)) - 1);
      __m512 v = _mm512_fmadd_ps(vw, _mm512_maskz_loadu_ps(m, xc + i), vb);
      // max(lo, v) and min(hi, v) return v when it is NaN.
      if (clamp) v = _mm512_min_ps(vhi, _mm512_max_ps(vlo, v));
      _mm512_mask_storeu_ps(yc + i, m, v);
    }
    return;
  }
  if (g.flat) {
    run_flat(g, masks, xc, w, b, clamp, lo, hi, yc);
  } else if (g.sw == 1) {
    if (k3 && g.sh == 1 && g.OW <= 16) {
      run_narrow3(g, masks, xc, w, b, clamp, lo, hi, yc);
    } else if (k3 && g.sh == 1) {
      const Dw3x3 k(w, b, lo, hi);
      (clamp ? run_wide3<1, true> : run_wide3<1, false>)(g, masks, xc, k, yc);
    } else if (k3) {
      run_impl<1, 3>(g, masks, xc, w, b, clamp, lo, hi, yc);
    } else {
      run_impl<1, 0>(g, masks, xc, w, b, clamp, lo, hi, yc);
    }
  } else if (k3 && g.sh == 2 && g.OW <= 8) {
    run_narrow3_s2(g, xc, w, b, clamp, lo, hi, yc);
  } else if (k3 && g.sh == 2 && g.OW > 16) {
    const Dw3x3 k(w, b, lo, hi);
    (clamp ? run_wide3<2, true> : run_wide3<2, false>)(g, masks, xc, k, yc);
  } else if (k3) {
    run_impl<2, 3>(g, masks, xc, w, b, clamp, lo, hi, yc);
  } else {
    run_impl<2, 0>(g, masks, xc, w, b, clamp, lo, hi, yc);
  }
}

namespace {
// Lanes [lo, hi) of a 16-lane mask (clipped).
inline __mmask16 lanes16(int64_t lo, int64_t hi) {
  return static_cast<__mmask16>(lane_bits(lo, hi, 16));
}

// (d B) of one input row for 16 tiles from column ix0 on: r[k] for tile column tx0 + l in
// lane l reads columns ix0 + 2 l .. ix0 + 2 l + 3; columns outside [0, W) read as 0.
inline void wino2_row(const float* row, int64_t ix0, int64_t W, __m512 r[4]) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512 a = _mm512_maskz_loadu_ps(lanes16(-ix0, W - ix0), row + ix0);
  const __m512 b = _mm512_maskz_loadu_ps(lanes16(-ix0 - 16, W - ix0 - 16), row + ix0 + 16);
  const __m512 c = _mm512_maskz_loadu_ps(lanes16(-ix0 - 2, W - ix0 - 2), row + ix0 + 2);
  const __m512 e = _mm512_maskz_loadu_ps(lanes16(-ix0 - 18, W - ix0 - 18), row + ix0 + 18);
  const __m512 d0 = _mm512_permutex2var_ps(a, even, b), d1 = _mm512_permutex2var_ps(a, odd, b);
  const __m512 d2 = _mm512_permutex2var_ps(c, even, e), d3 = _mm512_permutex2var_ps(c, odd, e);
  r[0] = _mm512_sub_ps(d0, d2);
  r[1] = _mm512_add_ps(d1, d2);
  r[2] = _mm512_sub_ps(d2, d1);
  r[3] = _mm512_sub_ps(d1, d3);
}
}  // namespace

void wino2_input(const Wino2Geometry& g, const float* xc, int64_t ty0, int64_t nty, float* v,
                 int64_t vs) {
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t tx0 = 0; tx0 < g.TW; tx0 += 16) {
    const __mmask16 st = lanes16(0, g.TW - tx0);
    const int64_t ix0 = 2 * tx0 - g.pl;
    // Row iy's (d B), zero outside the image. The pointer is formed only for rows inside:
    // the loads' masks keep every read inside the row.
    auto row = [&](int64_t iy, __m512 r[4]) {
      if (iy < 0 || iy >= g.H) {
        r[0] = r[1] = r[2] = r[3] = zero;
      } else {
        wino2_row(xc + iy * g.W, ix0, g.W, r);
      }
    };
    __m512 ra[4], rb[4], rc[4], rd[4];
    const int64_t iy0 = 2 * ty0 - g.pt;
    row(iy0, ra);
    row(iy0 + 1, rb);
    for (int64_t u = 0; u < nty; ++u) {
      const int64_t iy = iy0 + 2 * u;
      row(iy + 2, rc);
      row(iy + 3, rd);
      float* o = v + u * g.TW + tx0;
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        _mm512_mask_storeu_ps(o + k * vs, st, _mm512_sub_ps(ra[k], rc[k]));
        _mm512_mask_storeu_ps(o + (4 + k) * vs, st, _mm512_add_ps(rb[k], rc[k]));
        _mm512_mask_storeu_ps(o + (8 + k) * vs, st, _mm512_sub_ps(rc[k], rb[k]));
        _mm512_mask_storeu_ps(o + (12 + k) * vs, st, _mm512_sub_ps(rb[k], rd[k]));
        ra[k] = rc[k];
        rb[k] = rd[k];
      }
    }
  }
}

void wino2_output(const Wino2Geometry& g, const float* mo, int64_t ms, int64_t ty0, int64_t nty,
                  float bias, bool clamp, float lo, float hi, float* yc) {
  const __m512i lo_idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi_idx =
      _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const __m512 vb = _mm512_set1_ps(bias), vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  // max(lo, v) and min(hi, v) return v when it is NaN.
  auto fin = [&](__m512 v) { return clamp ? _mm512_min_ps(vhi, _mm512_max_ps(vlo, v)) : v; };
  for (int64_t u = 0; u < nty; ++u) {
    const int64_t oy = 2 * (ty0 + u);
    for (int64_t tx0 = 0; tx0 < g.TW; tx0 += 16) {
      const __mmask16 ld = lanes16(0, g.TW - tx0);
      const float* m = mo + u * g.TW + tx0;
      __m512 s0[4], s1[4];
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m512 m0 = _mm512_maskz_loadu_ps(ld, m + k * ms);
        const __m512 m1 = _mm512_maskz_loadu_ps(ld, m + (4 + k) * ms);
        const __m512 m2 = _mm512_maskz_loadu_ps(ld, m + (8 + k) * ms);
        const __m512 m3 = _mm512_maskz_loadu_ps(ld, m + (12 + k) * ms);
        s0[k] = _mm512_add_ps(_mm512_add_ps(m0, m1), m2);
        s1[k] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3);
      }
      const int64_t ox0 = 2 * tx0;
      const __mmask16 w0 = lanes16(0, g.OW - ox0), w1 = lanes16(0, g.OW - ox0 - 16);
      for (int p = 0; p < 2 && oy + p < g.OH; ++p) {
        const __m512* s = p == 0 ? s0 : s1;
        const __m512 y0 = fin(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s[0], s[1]), s[2]), vb));
        const __m512 y1 = fin(_mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(s[1], s[2]), s[3]), vb));
        float* yr = yc + (oy + p) * g.OW + ox0;
        _mm512_mask_storeu_ps(yr, w0, _mm512_permutex2var_ps(y0, lo_idx, y1));
        _mm512_mask_storeu_ps(yr + 16, w1, _mm512_permutex2var_ps(y0, hi_idx, y1));
      }
    }
  }
}

}  // namespace cvx
}  // namespace nn
}  // namespace ortlite

#pragma GCC diagnostic pop
#pragma GCC pop_options

#else

namespace ortlite {
namespace nn {
namespace cvx {
void dw_run(const DwGeometry&, const uint32_t*, const float*, const float*, float, bool, float,
            float, float*) {}
void deinterleave2(const float*, int64_t, float*, float*) {}
void dw16_pack(const DwGeometry&, const Dw16Layout&, const float*, int64_t, int, int64_t, int64_t,
               float*) {}
void dw16_run(const DwGeometry&, const Dw16Layout&, const float*, const float*, const float*, bool,
              float, float, int, int64_t, int64_t, float*, int64_t) {}
void im2col_shifted(const float*, int64_t, int64_t, int64_t, const int64_t*, const uint16_t*,
                    int64_t, float*) {}
void transpose16(const float*, int64_t, int, int, float*, int64_t) {}
void transpose16_sum(const float*, const float*, int64_t, int, int, float*, int64_t) {}
void dw_nhwc(const DwGeometry&, const float*, int64_t, const float*, int64_t, const float*, bool,
             float, float, int64_t, int64_t, float*, int64_t) {}
void wino2_input(const Wino2Geometry&, const float*, int64_t, int64_t, float*, int64_t) {}
void wino2_output(const Wino2Geometry&, const float*, int64_t, int64_t, int64_t, float, bool, float,
                  float, float*) {}
}  // namespace cvx
}  // namespace nn
}  // namespace ortlite

#endif
