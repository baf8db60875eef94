// The AVX-512F direct dense convolutions of conv_avx512.h (direct_run, direct_s2_run) and
// their padded copies. Everything after the target pragma is compiled for AVX-512F and only
// runs after the CPU check in direct_supported(), so no standard header is included below it.
#include <algorithm>
#include <vector>

#include "compute/conv_avx512.h"

namespace ortlite {
namespace nn {
namespace cvx {

bool direct_supported(const DirectGeometry& g) {
  return available() && (g.M == 16 || (g.M > 0 && g.M % 32 == 0)) && (g.s == 1 || g.s == 2) &&
         g.C >= 1 && g.KH >= 1 && g.KW >= 1 && g.OH >= 1 && g.OW >= 1;
}

std::vector<float> direct_pack(const float* w, int64_t M, int64_t C, int64_t KH, int64_t KW,
                               const float* scale) {
  const int64_t taps = C * KH * KW;
  std::vector<float> p(static_cast<size_t>(M * taps));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < taps; ++k)
      p[static_cast<size_t>(((m / 16) * taps + k) * 16 + m % 16)] =
          w[m * taps + k] * (scale ? scale[m] : 1.f);
  return p;
}

namespace {
// The padded copy: Hp rows of ld floats per channel, 64-byte aligned, padded column j of a
// row at offset shift + j, where shift puts the first input column on a 16-float boundary
// (so that the copy's stores are whole aligned vectors), and slack past the last channel for
// the reads of a tile's unused pixels (at most 15 per row, stride 2).
struct PadLayout {
  int64_t Hp, Wp, ld, shift;
};
PadLayout pad_layout(const DirectGeometry& g) {
  PadLayout L;
  L.Hp = (g.OH - 1) * g.s + g.KH;
  L.Wp = (g.OW - 1) * g.s + g.KW;
  const int64_t lo = std::max<int64_t>(g.pl, 0);
  L.shift = (16 - lo % 16) % 16;
  L.ld = (L.shift + L.Wp + 15) / 16 * 16;
  return L;
}
constexpr int64_t kDirectSlack = 32;
// The buffer's first 64-byte boundary.
uintptr_t pad_base(const float* xp) {
  return (reinterpret_cast<uintptr_t>(xp) + 63) & ~uintptr_t{63};
}
}  // namespace

int64_t direct_pad_size(const DirectGeometry& g) {
  const PadLayout L = pad_layout(g);
  return g.C * L.Hp * L.ld + kDirectSlack + 16;
}

int64_t direct_s2_phase_len(const DirectGeometry& g) {
  return ((g.OW + 15) / 16 * 16 + (g.KW - 1) / 2 + 15) / 16 * 16;
}

int64_t direct_s2_pad_size(const DirectGeometry& g) {
  return g.C * (2 * (g.OH - 1) + g.KH) * 2 * direct_s2_phase_len(g);
}

bool direct_s2_supported(const DirectGeometry& g) {
  return direct_supported(g) && g.s == 2;
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

// Lanes [lo, hi) of a 16-lane mask (clipped).
inline __mmask16 lanes16(int64_t lo, int64_t hi) {
  return static_cast<__mmask16>(lane_bits(lo, hi, 16));
}

// One tile of T pixels of an output row, NB blocks of 16 output channels: the products
// over every input channel and tap, plus the bias, stored as buf[t][NB * 16]. xr: the
// padded input at the tile's first pixel (channel 0, top kernel row). Predictive commoning
// would keep the inputs of the next tap column in registers and broadcast them there, on
// the FMAs' port; each broadcast from memory is a load.
template <int T, int NB, int S>
__attribute__((optimize("no-predictive-commoning"))) void direct_tile(
    const float* xr, int64_t plane, int64_t Wp, int64_t C, int64_t KH, int64_t KW, const float* wp,
    int64_t wblock, const float* bias, bool clamp, float lo, float hi, float* buf) {
  __m512 acc[NB][T];
#pragma GCC unroll 2
  for (int b = 0; b < NB; ++b) {
    const __m512 bv = bias ? _mm512_loadu_ps(bias + 16 * b) : _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[b][t] = bv;
  }
  const int64_t kt = KH * KW * 16;
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t ky = 0; ky < KH; ++ky) {
      const float* r = xr + c * plane + ky * Wp;
      const float* w = wp + c * kt + ky * KW * 16;
      for (int64_t kx = 0; kx < KW; ++kx, ++r, w += 16) {
        const __m512 w0 = _mm512_loadu_ps(w);
        if constexpr (NB == 1) {
#pragma GCC unroll 16
          for (int t = 0; t < T; ++t)
            acc[0][t] = _mm512_fmadd_ps(_mm512_set1_ps(r[t * S]), w0, acc[0][t]);
        } else {
          const __m512 w1 = _mm512_loadu_ps(w + wblock);
#pragma GCC unroll 16
          for (int t = 0; t < T; ++t) {
            const __m512 xv = _mm512_set1_ps(r[t * S]);
            acc[0][t] = _mm512_fmadd_ps(xv, w0, acc[0][t]);
            acc[1][t] = _mm512_fmadd_ps(xv, w1, acc[1][t]);
          }
        }
      }
    }
  }
  // max(lo, v) and min(hi, v) return v when it is NaN.
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
#pragma GCC unroll 2
  for (int b = 0; b < NB; ++b)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t)
      _mm512_storeu_ps(buf + t * NB * 16 + b * 16,
                       clamp ? _mm512_min_ps(vhi, _mm512_max_ps(vlo, acc[b][t])) : acc[b][t]);
}

using DirectTile = void (*)(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, const float*,
                            int64_t, const float*, bool, float, float, float*);

template <int NB, int S>
DirectTile direct_tile_for(int64_t n) {
  if (n <= 4) return direct_tile<4, NB, S>;
  if (n <= 8) return direct_tile<8, NB, S>;
  if constexpr (NB == 1) {
    if (n > 12) return direct_tile<16, NB, S>;
  }
  return direct_tile<12, NB, S>;
}

template <int NB, int S>
void direct_rows(const DirectGeometry& g, const float* xp, const float* wp, const float* bias,
                 bool clamp, float lo, float hi, float* y, int64_t r0, int64_t r1) {
  constexpr int64_t kT = NB == 1 ? 16 : 12;  // pixels per tile: 16 or 24 accumulators
  const PadLayout L = pad_layout(g);
  const int64_t Wp = L.ld, plane = L.Hp * L.ld;  // Wp: the row stride
  xp = reinterpret_cast<const float*>(pad_base(xp)) + L.shift;
  const int64_t P = g.y_plane ? g.y_plane : g.OH * g.OW, wblock = g.C * g.KH * g.KW * 16;
  alignas(64) float buf[kT * NB * 16];
  const DirectTile full = direct_tile_for<NB, S>(kT);
  const int64_t rest = g.OW % kT;
  const DirectTile last = rest ? direct_tile_for<NB, S>(rest) : full;
  for (int64_t oy = r0; oy < r1; ++oy) {
    const float* xr = xp + oy * S * Wp;
    for (int64_t ox = 0; ox < g.OW; ox += kT) {
      const int64_t n = std::min(kT, g.OW - ox);
      (n == kT ? full : last)(xr + ox * S, plane, Wp, g.C, g.KH, g.KW, wp, wblock, bias, clamp, lo,
                              hi, buf);
      for (int b = 0; b < NB; ++b)
        transpose16(buf + 16 * b, NB * 16, static_cast<int>(n), 16, y + 16 * b * P + oy * g.OW + ox,
                    P);
    }
  }
}

}  // namespace

// GCC would turn the zero-store loops into memset calls, one or two a row: 3-4% of the demo
// CNN's run, the calls' overhead on runs of 1-3 vectors.
__attribute__((optimize("no-tree-loop-distribute-patterns"))) void direct_pad(
    const DirectGeometry& g, const float* x, float* xp) {
  // Every row is written as whole aligned vectors: zeros, then the input row (its last part
  // read as a whole vector and masked in registers, or lane by lane at the end of x), then
  // zeros. Masked loads, unaligned stores and library calls per row (fill, copy) each cost
  // this CPU (AMD EPYC) a tenth of a 16-channel layer at 16 x 16.
  const PadLayout L = pad_layout(g);
  float* base = reinterpret_cast<float*>(pad_base(xp));
  const int64_t c0 = std::max<int64_t>(0, -g.pl), c1 = std::min(g.W, L.Wp - g.pl);
  const int64_t n = c1 > c0 ? c1 - c0 : 0;
  const int64_t v0 = (L.shift + std::max<int64_t>(g.pl, 0)) / 16;  // the first data vector
  const int64_t nvec = L.ld / 16, full = n / 16, rest = n % 16;
  const __mmask16 rest_mask = static_cast<__mmask16>((1u << rest) - 1);
  const int64_t x_plane = g.x_plane ? g.x_plane : g.H * g.W;
  const float* x_end = x + (g.C - 1) * x_plane + g.H * g.W;
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t c = 0; c < g.C; ++c) {
    for (int64_t r = 0; r < L.Hp; ++r) {
      float* dr = base + (c * L.Hp + r) * L.ld;
      const int64_t ir = r - g.pt;
      int64_t v = 0;
      if (ir >= 0 && ir < g.H && n > 0) {
        for (; v < v0; ++v) _mm512_store_ps(dr + 16 * v, zero);
        const float* sr = x + c * x_plane + ir * g.W + c0;
        for (int64_t q = 0; q < full; ++q, ++v)
          _mm512_store_ps(dr + 16 * v, _mm512_loadu_ps(sr + 16 * q));
        if (rest) {
          const float* st = sr + 16 * full;
          __m512 val;
          if (st + 16 <= x_end) {
            val = _mm512_maskz_mov_ps(rest_mask, _mm512_loadu_ps(st));
          } else {
            alignas(64) float tmp[16] = {};
            for (int64_t q = 0; q < rest; ++q) tmp[q] = st[q];
            val = _mm512_load_ps(tmp);
          }
          _mm512_store_ps(dr + 16 * v, val);
          ++v;
        }
      }
      for (; v < nvec; ++v) _mm512_store_ps(dr + 16 * v, zero);
    }
  }
  float* slack = base + g.C * L.Hp * L.ld;
  _mm512_storeu_ps(slack, zero);
  _mm512_storeu_ps(slack + 16, zero);
}

void direct_run(const DirectGeometry& g, const float* xp, const float* wp, const float* bias,
                bool clamp, float lo, float hi, float* y, int64_t r0, int64_t r1) {
  // Strides 1 with rows that fill their 16-lane vectors to 7/8 or more: the pixels in the
  // lanes (no transposes; 8 weights broadcast a tap for 24 FMAs where direct_rows
  // broadcasts an input per FMA). Against direct_rows, one process, 1 / 2 threads, with
  // Relu: 3 -> 32 at 160 x 160 1.43 / 1.42x faster, 3 -> 64 7x7 at 64 x 64 1.12 / 1.12x,
  // the demo's 3 -> 16 at 32 x 32 1.10 / 1.09x, 32 -> 32 at 28 x 28 1.05x, 16 -> 16 at
  // 16 x 16 1.02-1.05x; 8 -> 16 at 160, 16 -> 32 at 80, 256 -> 16 at 14 within 1%. Rows
  // that leave more lanes empty were slower (16 -> 16 5x5 at 20 x 20 0.65x, 8 x 8 0.65x).
  const int64_t lanes = (g.OW + 15) / 16 * 16;
  if (g.s == 1 && 7 * lanes <= 8 * g.OW) {
    direct_s1_run(g, xp, wp, bias, clamp, lo, hi, y, r0, r1);
    return;
  }
  if (g.M == 16) {
    (g.s == 1 ? direct_rows<1, 1> : direct_rows<1, 2>)(g, xp, wp, bias, clamp, lo, hi, y, r0, r1);
    return;
  }
  // 32 output channels a pass (a stem's 64 from 3 input channels: two passes over the
  // padded input, which stays in L2).
  const int64_t block = g.C * g.KH * g.KW * 16, P = g.y_plane ? g.y_plane : g.OH * g.OW;
  DirectGeometry g32 = g;
  g32.M = 32;
  g32.y_plane = P;
  for (int64_t m = 0; m < g.M; m += 32)
    (g.s == 1 ? direct_rows<2, 1> : direct_rows<2, 2>)(g32, xp, wp + (m / 16) * block,
                                                       bias ? bias + m : nullptr, clamp, lo, hi,
                                                       y + m * P, r0, r1);
}

// The direct convolution with strides 2 and the output pixels in the lanes (direct_s2_*):
// each padded input row split into its even and odd columns, so that tap (ky, kx) of 16
// consecutive outputs of a row is one load from phase kx % 2 at kx / 2 on. A tile: T vectors
// of outputs (consecutive in the band, across rows) x MB output channels, the MB weights of a
// tap broadcast one at a time. The results go to y's rows as they are (no transposes, which
// took 8% of ResNet's stem in direct_rows).
void direct_s2_pad(const DirectGeometry& g, const float* x, float* buf) {
  const __m512i ie = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i io = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const int64_t lph = direct_s2_phase_len(g), rows = 2 * (g.OH - 1) + g.KH;
  const int64_t x_plane = g.x_plane ? g.x_plane : g.H * g.W;
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t r = 0; r < rows; ++r) {
      float* ev = buf + (c * rows + r) * 2 * lph;
      float* od = ev + lph;
      const int64_t iy = r - g.pt;
      if (iy < 0 || iy >= g.H) {
        for (int64_t j = 0; j < lph; j += 16) {
          _mm512_storeu_ps(ev + j, zero);
          _mm512_storeu_ps(od + j, zero);
        }
        continue;
      }
      // Integer addresses: the masked-off lanes may lie outside the row.
      const uintptr_t row = reinterpret_cast<uintptr_t>(x + c * x_plane + iy * g.W);
      for (int64_t j = 0; j < lph; j += 16) {
        const int64_t col = 2 * j - g.pl;  // input column of lane 0 of the pair
        const __m512 a = _mm512_maskz_loadu_ps(lanes16(-col, g.W - col),
                                               reinterpret_cast<const float*>(row + 4 * col));
        const __m512 b =
            _mm512_maskz_loadu_ps(lanes16(-col - 16, g.W - col - 16),
                                  reinterpret_cast<const float*>(row + 4 * (col + 16)));
        _mm512_storeu_ps(ev + j, _mm512_permutex2var_ps(a, ie, b));
        _mm512_storeu_ps(od + j, _mm512_permutex2var_ps(a, io, b));
      }
    }
}

namespace {
struct S2Tile {
  const float* x[3];  // the padded phase buffer at each vector's first output (c 0, ky 0)
  float* y[3];        // each vector's first output, channel 0 of the tile
  __mmask16 m[3];     // its lanes inside the row
};

// Predictive commoning would keep the next tap's inputs in registers across the kx loop; the
// accumulators need them. kS2: the input is direct_s2_pad's phases (tap kx at phase kx % 2,
// kx / 2 on); else direct_pad's rows (tap kx at kx on).
template <int T, int MB, bool kS2>
__attribute__((optimize("no-predictive-commoning"))) void lanes_tile(
    const S2Tile& t, int64_t cs, int64_t rs, int64_t lph, int64_t C, int64_t KH, int64_t KW,
    const float* w, const float* bias, bool clamp, float lo, float hi, int64_t P) {
  __m512 acc[MB][T];
#pragma GCC unroll 8
  for (int i = 0; i < MB; ++i) {
    const __m512 bv = bias ? _mm512_set1_ps(bias[i]) : _mm512_setzero_ps();
#pragma GCC unroll 3
    for (int v = 0; v < T; ++v) acc[i][v] = bv;
  }
  for (int64_t c = 0; c < C; ++c)
    for (int64_t ky = 0; ky < KH; ++ky) {
      const int64_t base = c * cs + ky * rs;
      const float* wt = w + (c * KH + ky) * KW * 16;
      for (int64_t kx = 0; kx < KW; ++kx, wt += 16) {
        const int64_t off = kS2 ? base + (kx & 1) * lph + (kx >> 1) : base + kx;
        __m512 xv[T];
#pragma GCC unroll 3
        for (int v = 0; v < T; ++v) xv[v] = _mm512_loadu_ps(t.x[v] + off);
#pragma GCC unroll 8
        for (int i = 0; i < MB; ++i) {
          const __m512 wb = _mm512_set1_ps(wt[i]);
#pragma GCC unroll 3
          for (int v = 0; v < T; ++v) acc[i][v] = _mm512_fmadd_ps(xv[v], wb, acc[i][v]);
        }
      }
    }
  // max(lo, v) and min(hi, v) return v when it is NaN.
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
#pragma GCC unroll 8
  for (int i = 0; i < MB; ++i)
#pragma GCC unroll 3
    for (int v = 0; v < T; ++v)
      _mm512_mask_storeu_ps(t.y[v] + i * P, t.m[v],
                            clamp ? _mm512_min_ps(vhi, _mm512_max_ps(vlo, acc[i][v])) : acc[i][v]);
}

// Output rows [r0, r1) with the pixels in the lanes, from x (row oy's tap row 0 at x + oy *
// row_step, channels cs apart, tap rows rs apart).
template <bool kS2>
void lanes_run(const DirectGeometry& g, const float* x, int64_t row_step, int64_t cs, int64_t rs,
               int64_t lph, const float* wp, const float* bias, bool clamp, float lo, float hi,
               float* y, int64_t r0, int64_t r1) {
  constexpr int kT = 3, kMB = 8;  // 24 accumulators
  // Output vectors a band: each group of kMB channels goes over the band's tiles before the
  // next group, so that kMB output planes are written at a time, each in runs of the band's
  // rows, rather than every plane a few lines at a time. Inside a network the output's lines
  // come from memory, and 32 interleaved streams of 3 lines a tile outran what the hardware
  // fetched ahead: MobileNetV2's stem (3 -> 32 at 224 x 224) inside the network at 1 thread
  // 495-531 -> 337-360 us (per-node profile), alone 263 -> 257 us; the whole network 0.96 of
  // the time (12 paired processes, median). Its padded input rows are read once per group,
  // from L1 / L2 (a band of 84 vectors: 12 rows of a 112-wide output).
  constexpr int64_t kBand = 28 * kT;
  const int64_t P = g.y_plane ? g.y_plane : g.OH * g.OW;
  const int64_t wblock = g.C * g.KH * g.KW * 16, vpr = (g.OW + 15) / 16, nq = (r1 - r0) * vpr;
  for (int64_t b0 = 0; b0 < nq; b0 += kBand) {
    const int64_t b1 = std::min(nq, b0 + kBand);
    for (int64_t m = 0; m < g.M; m += kMB) {
      const float* w = wp + (m / 16) * wblock + m % 16;
      const float* b = bias ? bias + m : nullptr;
      for (int64_t q0 = b0; q0 < b1; q0 += kT) {
        const int n = static_cast<int>(std::min<int64_t>(kT, b1 - q0));
        S2Tile t{};
        for (int v = 0; v < n; ++v) {
          const int64_t q = q0 + v, oy = r0 + q / vpr, ox = (q % vpr) * 16;
          t.x[v] = x + oy * row_step + ox;
          t.y[v] = y + m * P + oy * g.OW + ox;
          t.m[v] = lanes16(0, g.OW - ox);
        }
        if (n == 3) {
          lanes_tile<3, kMB, kS2>(t, cs, rs, lph, g.C, g.KH, g.KW, w, b, clamp, lo, hi, P);
        } else if (n == 2) {
          lanes_tile<2, kMB, kS2>(t, cs, rs, lph, g.C, g.KH, g.KW, w, b, clamp, lo, hi, P);
        } else {
          lanes_tile<1, kMB, kS2>(t, cs, rs, lph, g.C, g.KH, g.KW, w, b, clamp, lo, hi, P);
        }
      }
    }
  }
}
}  // namespace

void direct_s2_run(const DirectGeometry& g, const float* buf, const float* wp, const float* bias,
                   bool clamp, float lo, float hi, float* y, int64_t r0, int64_t r1) {
  const int64_t lph = direct_s2_phase_len(g), rows = 2 * (g.OH - 1) + g.KH, rs = 2 * lph;
  lanes_run<true>(g, buf, 2 * rs, rows * rs, rs, lph, wp, bias, clamp, lo, hi, y, r0, r1);
}

void direct_s1_run(const DirectGeometry& g, const float* xp, const float* wp, const float* bias,
                   bool clamp, float lo, float hi, float* y, int64_t r0, int64_t r1) {
  const PadLayout L = pad_layout(g);
  const float* x = reinterpret_cast<const float*>(pad_base(xp)) + L.shift;
  lanes_run<false>(g, x, L.ld, L.Hp * L.ld, L.ld, 0, wp, bias, clamp, lo, hi, y, r0, r1);
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
void direct_run(const DirectGeometry&, const float*, const float*, const float*, bool, float, float,
                float*, int64_t, int64_t) {}
void direct_s2_pad(const DirectGeometry&, const float*, float*) {}
void direct_s2_run(const DirectGeometry&, const float*, const float*, const float*, bool, float,
                   float, float*, int64_t, int64_t) {}
}  // namespace cvx
}  // namespace nn
}  // namespace ortlite

#endif
