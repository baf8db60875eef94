// Winograd F(4x4, 3x3) and F(2x2, 3x3) for Conv / FusedConv (conv.cc picks them: 2-D 3x3
// stride-1 float convolutions with a constant W of 32 to 128 x 128 channels, and beyond
// that up to 256 x 256 channels with AVX-512F).
#include "compute/vectorize.h"  // first: compile options for the loops below

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "compute/conv_avx512.h"
#include "providers/cpu/nn/conv_internal.h"
#include "compute/gemm.h"
#include "compute/simd.h"

namespace ortlite {
namespace nn {
namespace {

// ---- Winograd F(4x4, 3x3) ----------------------------------------------------------------
//
// Y = A^T [(G g G^T) . (B^T d B)] A on 6x6 input tiles d giving 4x4 output tiles, with the
// interpolation points 0, +-1, +-2 (Lavin & Gray). The transforms are applied along whole
// rows of tiles at once: the input band is split into four column phases so that the six
// columns of every tile are contiguous across tiles, and the loops run over tiles.

// Calls f(xi, m, c, u) for every U[xi][m][c] = (G g_mc G^T)[xi] (point xi = i * P + j of
// the P x P transformed kernel), computed in double, for a P x 3 matrix G.
template <int P, typename F>
void kernel_transform(const double (&G)[P][3], const float* w, int64_t M, int64_t C, F f) {
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t c = 0; c < C; ++c) {
      const float* g = w + (m * C + c) * 9;
      double t[P][3];
      for (int i = 0; i < P; ++i)
        for (int j = 0; j < 3; ++j)
          t[i][j] = G[i][0] * g[0 * 3 + j] + G[i][1] * g[1 * 3 + j] + G[i][2] * g[2 * 3 + j];
      for (int i = 0; i < P; ++i)
        for (int j = 0; j < P; ++j)
          f(i * P + j, m, c, t[i][0] * G[j][0] + t[i][1] * G[j][1] + t[i][2] * G[j][2]);
    }
  }
}

// F(4x4, 3x3)'s G.
constexpr double kG4[6][3] = {{1.0 / 4, 0, 0},
                              {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                              {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                              {1.0 / 24, 1.0 / 12, 1.0 / 6},
                              {1.0 / 24, -1.0 / 12, 1.0 / 6},
                              {0, 0, 1}};

// v[k] = (B^T d)[k] for six input vectors d[0..5] of n elements each.
ORTLITE_NN_INLINE void wino_bt6(const float* __restrict d0, const float* __restrict d1,
                                const float* __restrict d2, const float* __restrict d3,
                                const float* __restrict d4, const float* __restrict d5,
                                float* __restrict v0, float* __restrict v1, float* __restrict v2,
                                float* __restrict v3, float* __restrict v4, float* __restrict v5,
                                int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float a = d4[i] - 4.f * d2[i];  // d4 - 4 d2
    const float b = d3[i] - 4.f * d1[i];  // d3 - 4 d1
    const float c = d4[i] - d2[i];
    const float e = 2.f * (d3[i] - d1[i]);
    v0[i] = 4.f * d0[i] - 5.f * d2[i] + d4[i];
    v1[i] = a + b;
    v2[i] = a - b;
    v3[i] = c + e;
    v4[i] = c - e;
    v5[i] = 4.f * d1[i] - 5.f * d3[i] + d5[i];
  }
}

// o[j] = (A^T s)[j] for six vectors s[0..5].
ORTLITE_NN_INLINE void wino_at6(const float* __restrict s0, const float* __restrict s1,
                                const float* __restrict s2, const float* __restrict s3,
                                const float* __restrict s4, const float* __restrict s5,
                                float* __restrict o0, float* __restrict o1, float* __restrict o2,
                                float* __restrict o3, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float p = s1[i] + s2[i], q = s1[i] - s2[i];
    const float r = s3[i] + s4[i], t = s3[i] - s4[i];
    o0[i] = s0[i] + p + r;
    o1[i] = q + 2.f * t;
    o2[i] = p + 4.f * r;
    o3[i] = q + 8.f * t + s5[i];
  }
}
ORTLITE_NN_INLINE void wino_bt(const float* const* d, float* const* v, int64_t n) {
  wino_bt6(d[0], d[1], d[2], d[3], d[4], d[5], v[0], v[1], v[2], v[3], v[4], v[5], n);
}
ORTLITE_NN_INLINE void wino_at(const float* const* s, float* const* o, int64_t n) {
  wino_at6(s[0], s[1], s[2], s[3], s[4], s[5], o[0], o[1], o[2], o[3], n);
}

struct WinoGeo {
  int64_t H, W, OH, OW, pt, pl, TH, TW;
  int64_t Q;  // tile pitch of a tile row: TW + 1 (the last tile of every row is a dummy)
};

// Input transform of tile rows [ty0, ty0 + nty) of one channel into V[xi * vstride + t]
// (t = ty * Q + tx). The band of input rows is split into 4 x 4 phases (row % 4, column % 4),
// so that for every tap of a 6x6 tile the values of all tiles of the block are one
// contiguous span, and each transform step is a single loop over the whole block.
ORTLITE_CONV_CLONES void wino_input_f32(const WinoGeo& g, const float* xc, int64_t ty0, int64_t nty,
                                        float* band, float* rows, float* V, int64_t vstride) {
  const int64_t Q = g.Q, RY = nty + 2, ph = RY * Q, span = nty * Q;
  std::fill(band, band + 16 * ph, 0.f);
  for (int64_t r = 0; r < 4 * nty + 2; ++r) {
    const int64_t iy = 4 * ty0 + r - g.pt;
    if (iy < 0 || iy >= g.H) continue;
    const float* src = xc + iy * g.W - g.pl;  // src[px] for padded column px
    float* d = band + (r & 3) * 4 * ph + (r >> 2) * Q;
    float* __restrict d0 = d;
    float* __restrict d1 = d + ph;
    float* __restrict d2 = d + 2 * ph;
    float* __restrict d3 = d + 3 * ph;
    const int64_t px0 = g.pl, px1 = std::min<int64_t>(4 * Q, g.W + g.pl);
    // Whole groups of four columns inside the input, then the edges one by one.
    const int64_t q0 = (px0 + 3) / 4, q1 = px1 / 4;
    for (int64_t q = q0; q < q1; ++q) {
      d0[q] = src[4 * q];
      d1[q] = src[4 * q + 1];
      d2[q] = src[4 * q + 2];
      d3[q] = src[4 * q + 3];
    }
    for (int64_t px = px0; px < std::min(px1, 4 * q0); ++px) d[(px & 3) * ph + (px >> 2)] = src[px];
    for (int64_t px = std::max(px0, 4 * q1); px < px1; ++px) d[(px & 3) * ph + (px >> 2)] = src[px];
  }
  // rows[k][p][t]: B^T down the columns (row i of a tile is row phase i % 4, offset i / 4).
  for (int64_t p = 0; p < 4; ++p) {
    const float* d[6];
    float* v[6];
    for (int i = 0; i < 6; ++i) d[i] = band + ((i & 3) * 4 + p) * ph + (i >> 2) * Q;
    for (int k = 0; k < 6; ++k) v[k] = rows + (k * 4 + p) * (span + 1);
    wino_bt(d, v, span);
  }
  for (int64_t kp = 0; kp < 24; ++kp) rows[kp * (span + 1) + span] = 0.f;  // read by the dummies
  // Then along the rows: column j of tile tx is column phase j % 4 at tx + j / 4.
  for (int k = 0; k < 6; ++k) {
    const float* d[6];
    float* v[6];
    for (int j = 0; j < 6; ++j) d[j] = rows + (k * 4 + (j & 3)) * (span + 1) + (j >> 2);
    for (int l = 0; l < 6; ++l) v[l] = V + (k * 6 + l) * vstride;
    wino_bt(d, v, span);
  }
}

// Output transform of one output channel for tile rows [ty0, ty0 + nty): Mo[xi * mstride +
// t] -> the channel's plane yc, then the epilogue on the finished rows.
ORTLITE_CONV_CLONES void wino_output_f32(const WinoGeo& g, const float* Mo, int64_t mstride,
                                         int64_t ty0, int64_t nty, float* tmp, float* yc,
                                         float bias, const float* zc, const ActSpec& act) {
  const int64_t Q = g.Q, span = nty * Q;
  float* s = tmp;              // [6][4][span]
  float* o = tmp + 24 * span;  // [4][4][span]
  for (int k = 0; k < 6; ++k) {
    const float* in[6];
    float* out[4];
    for (int l = 0; l < 6; ++l) in[l] = Mo + (k * 6 + l) * mstride;
    for (int j = 0; j < 4; ++j) out[j] = s + (k * 4 + j) * span;
    wino_at(in, out, span);
  }
  for (int j = 0; j < 4; ++j) {
    const float* in[6];
    float* out[4];
    for (int k = 0; k < 6; ++k) in[k] = s + (k * 4 + j) * span;
    for (int i = 0; i < 4; ++i) out[i] = o + (i * 4 + j) * span;
    wino_at(in, out, span);
  }
  const int64_t full = g.OW / 4;
  for (int64_t ty = 0; ty < nty; ++ty) {
    for (int64_t i = 0; i < 4; ++i) {
      const int64_t oy = 4 * (ty0 + ty) + i;
      if (oy >= g.OH) break;
      float* __restrict yr = yc + oy * g.OW;
      const float* oi = o + i * 4 * span + ty * Q;
      const float* __restrict o0 = oi;
      const float* __restrict o1 = oi + span;
      const float* __restrict o2 = oi + 2 * span;
      const float* __restrict o3 = oi + 3 * span;
      for (int64_t tx = 0; tx < full; ++tx) {
        yr[4 * tx] = o0[tx];
        yr[4 * tx + 1] = o1[tx];
        yr[4 * tx + 2] = o2[tx];
        yr[4 * tx + 3] = o3[tx];
      }
      for (int64_t ox = 4 * full; ox < g.OW; ++ox) yr[ox] = oi[(ox & 3) * span + (ox >> 2)];
    }
  }
  // The epilogue once over the finished rows (contiguous in the plane): per row, a Sigmoid /
  // SiLU called the vector kernel for every 20 values of a 20 x 20 plane (64 -> 64 at 20 x
  // 20 with SiLU: 188 us against 149 with Relu).
  const int64_t oy0 = 4 * ty0, oy1 = std::min(g.OH, 4 * (ty0 + nty));
  if (oy1 > oy0)
    bias_add_act(act, yc + oy0 * g.OW, (oy1 - oy0) * g.OW, bias, zc ? zc + oy0 * g.OW : nullptr);
}

// Scratch floats of one Winograd task over `nty` tile rows.
int64_t wino_scratch(int64_t C, int64_t M, int64_t Q, int64_t nty) {
  const int64_t span = nty * Q;
  return kWinoPts * (C + M) * span + 16 * (nty + 2) * Q + 24 * (span + 1) + 40 * span;
}

}  // namespace

WinoWeights winograd_weights(const float* w, int64_t M, int64_t C, const float* scale) {
  WinoWeights u;
  u.plain.resize(static_cast<size_t>(kWinoPts * M * C));
  kernel_transform(kG4, w, M, C, [&](int64_t xi, int64_t m, int64_t c, double v) {
    u.plain[(xi * M + m) * C + c] = static_cast<float>(scale ? v * scale[m] : v);
  });
  return u;
}

void winograd_conv(const SpatialGeometry& geo, const float* x, const WinoWeights& U,
                   const Epilogue<float>& ep, float* y, int64_t N, int64_t C, int64_t M,
                   ThreadPool* pool) {
  WinoGeo g{geo.in[0],        geo.in[1], geo.out[0], geo.out[1], geo.pad_begin[0],
            geo.pad_begin[1], 0,         0,          0};
  g.TH = (g.OH + 3) / 4;
  g.TW = (g.OW + 3) / 4;
  g.Q = g.TW + 1;
  const int64_t P = g.OH * g.OW;
  // Tile rows per task: V and Mo of a task stay within about 2 MiB (L2), and a single
  // image is split so that every thread gets a share.
  constexpr int64_t kBudget = int64_t(1) << 19;  // floats
  const int nthreads = pool ? pool->num_threads() : 1;
  int64_t nty = std::max<int64_t>(1, kBudget / (kWinoPts * (C + M) * g.Q));
  if (N < nthreads) nty = std::min(nty, (g.TH * N + nthreads - 1) / nthreads);
  nty = std::min(nty, g.TH);
  const int64_t blocks = (g.TH + nty - 1) / nty, tasks = N * blocks;
  const bool par = nthreads > 1 && tasks >= nthreads;
  auto run_task = [&](int64_t t, ThreadPool* tp) {
    const int64_t n = t / blocks, ty0 = (t % blocks) * nty;
    const int64_t cnt = std::min(nty, g.TH - ty0), span = cnt * g.Q;
    std::vector<float>& scratch = col_scratch<float>();
    const size_t need = static_cast<size_t>(wino_scratch(C, M, g.Q, nty));
    if (scratch.size() < need) scratch.resize(need);
    float* V = scratch.data();
    float* Mo = V + kWinoPts * C * span;
    float* band = Mo + kWinoPts * M * span;
    float* rows = band + 16 * (cnt + 2) * g.Q;
    float* tmp = rows + 24 * (span + 1);
    const float* xn = x + n * C * g.H * g.W;
    for (int64_t c = 0; c < C; ++c)
      wino_input_f32(g, xn + c * g.H * g.W, ty0, cnt, band, rows, V + c * span, C * span);
    for (int64_t xi = 0; xi < kWinoPts; ++xi) {
      gemm(false, false, M, span, C, 1.f, U.plain.data() + xi * M * C, C, V + xi * C * span, span,
           0.f, Mo + xi * M * span, span, tp);
    }
    for (int64_t m = 0; m < M; ++m) {
      const int64_t off = (n * M + m) * P;
      wino_output_f32(g, Mo + m * span, M * span, ty0, cnt, tmp, y + off,
                      ep.bias ? ep.bias[m] : 0.f, ep.z ? ep.z + off : nullptr, ep.act);
    }
  };
  if (par) {
    pool->parallel_for(tasks, [&](int64_t s, int64_t e) {
      for (int64_t t = s; t < e; ++t) run_task(t, nullptr);
    });
  } else {
    for (int64_t t = 0; t < tasks; ++t) run_task(t, pool);
  }
}

// ---- Winograd F(2x2, 3x3) ----------------------------------------------------------------
//
// Y = A^T [(G g G^T) . (B^T d B)] A on 4x4 input tiles d giving 2x2 output tiles (points 0,
// +-1): 2.25x fewer multiplications than im2col + GEMM, with U 16/9 the size of W (F(4x4)'s
// is 4x). The transforms are cvx::wino2_input / wino2_output (16 tiles a vector); the
// products run transposed (tiles x output channels: full 32-wide tiles whatever the tile
// count), one per point and block of output channels, and are turned back with
// cvx::transpose16.

Wino2Weights winograd2_weights(const float* w, int64_t M, int64_t C, const float* scale) {
  static constexpr double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  std::vector<float> u(static_cast<size_t>(kWino2Pts * M * C));
  kernel_transform(G, w, M, C, [&](int64_t xi, int64_t m, int64_t c, double v) {
    u[static_cast<size_t>((xi * M + m) * C + c)] = static_cast<float>(scale ? v * scale[m] : v);
  });
  Wino2Weights U;
  U.u.reserve(kWino2Pts);
  for (int64_t xi = 0; xi < kWino2Pts; ++xi)
    U.u.push_back(fgemm::Packed::pack(u.data() + xi * M * C, C, M, C, false));
  return U;
}

void winograd2_conv(const SpatialGeometry& geo, const float* x, const Wino2Weights& U,
                    const Epilogue<float>& ep, float* y, int64_t N, int64_t C, int64_t M,
                    ThreadPool* pool) {
  cvx::Wino2Geometry g{geo.in[0],        geo.in[1],        geo.out[0], geo.out[1],
                       geo.pad_begin[0], geo.pad_begin[1], 0};
  g.TW = (g.OW + 1) / 2;
  const int64_t TH = (g.OH + 1) / 2, P = g.OH * g.OW, in_size = g.H * g.W;
  constexpr int64_t kNR = fgemm::kNR;
  const int nthreads = pool ? pool->num_threads() : 1;
  // Blocks of two 32-channel panels (one where there are fewer than two a thread): the
  // threads of one band share them out.
  const int64_t panels = (M + kNR - 1) / kNR;
  const int64_t block_panels = panels >= 2 * nthreads ? 2 : 1;
  const int64_t nblocks = (panels + block_panels - 1) / block_panels;
  // Tile rows a band: V (16 points x C) within about 1 MiB, and bands enough for the threads
  // where the images' blocks are fewer.
  int64_t nty = std::clamp<int64_t>((int64_t(1) << 18) / (kWino2Pts * C * g.TW), 1, TH);
  const int64_t per_image = (nthreads + N * nblocks - 1) / (N * nblocks);
  if (per_image > 1) nty = std::min(nty, std::max<int64_t>(1, (TH + per_image - 1) / per_image));
  const int64_t bands = (TH + nty - 1) / nty, jobs = N * bands;
  // Fewer bands than threads: the threads share each band's blocks of output channels, each
  // transforming the band's input itself (a cheap pass) and reading its own part of U.
  const int64_t groups =
      jobs >= nthreads ? 1 : std::min<int64_t>(nblocks, (nthreads + jobs - 1) / jobs);
  const int64_t tasks = jobs * groups;
  // Relu and Clip in registers; Z and the other activations on the band's finished rows.
  const RegisterAct<float> ra = register_act<float>(ep.act, ep.z != nullptr);
  auto run_task = [&](int64_t t) {
    const int64_t job = t / groups, gi = t % groups;
    const int64_t n = job / bands, ty0 = (job % bands) * nty;
    const int64_t cnt = std::min(nty, TH - ty0), span = cnt * g.TW;
    const int64_t b0 = nblocks * gi / groups, b1 = nblocks * (gi + 1) / groups;
    const int64_t mmax = block_panels * kNR;
    std::vector<float>& scratch = col_scratch<float>();
    const size_t need = static_cast<size_t>(kWino2Pts * (C + 2 * mmax) * span);
    if (scratch.size() < need) scratch.resize(need);
    float* V = scratch.data();
    float* Mo = V + kWino2Pts * C * span;
    float* MoT = Mo + kWino2Pts * mmax * span;
    const float* xn = x + n * C * in_size;
    for (int64_t c = 0; c < C; ++c)
      cvx::wino2_input(g, xn + c * in_size, ty0, cnt, V + c * span, C * span);
    const fgemm::Epilogue none;
    const int64_t oy0 = 2 * ty0, oy1 = std::min(g.OH, 2 * (ty0 + cnt));
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t p0 = b * block_panels, m0 = p0 * kNR, mb = std::min(mmax, M - m0);
      for (int64_t xi = 0; xi < kWino2Pts; ++xi) {
        float* ct = MoT + xi * span * mb;
        const float* u = U.u[static_cast<size_t>(xi)].data() + p0 * C * kNR;
        // 13 to 16 tiles: 12 rows, then the rest reading U again from L2 (an even split
        // gave two 8-row passes that each read U, the first from memory at twice the rate
        // one core gets: 5-10% slower at 8 x 8).
        if (span > 12 && span <= 16) {
          fgemm::gemm_w_right_panels(V + xi * C * span, 1, span, 12, u, mb, C, ct, mb, none, false);
          fgemm::gemm_w_right_panels(V + xi * C * span + 12, 1, span, span - 12, u, mb, C,
                                     ct + 12 * mb, mb, none, false);
        } else {
          fgemm::gemm_w_right_panels(V + xi * C * span, 1, span, span, u, mb, C, ct, mb, none,
                                     false);
        }
        for (int64_t t0 = 0; t0 < span; t0 += 16)
          for (int64_t c0 = 0; c0 < mb; c0 += 16)
            cvx::transpose16(ct + t0 * mb + c0, mb,
                             static_cast<int>(std::min<int64_t>(16, span - t0)),
                             static_cast<int>(std::min<int64_t>(16, mb - c0)),
                             Mo + xi * mb * span + c0 * span + t0, span);
      }
      for (int64_t m = m0; m < m0 + mb; ++m) {
        float* yc = y + (n * M + m) * P;
        cvx::wino2_output(g, Mo + (m - m0) * span, mb * span, ty0, cnt, ep.bias ? ep.bias[m] : 0.f,
                          ra.clamp, ra.lo, ra.hi, yc);
        if (ra.after && oy1 > oy0)  // once over the band's rows, contiguous in the plane
          epilogue(ep.act, yc + oy0 * g.OW, (oy1 - oy0) * g.OW, 0.f,
                   ep.z ? ep.z + (n * M + m) * P + oy0 * g.OW : nullptr);
      }
    }
  };
  if (nthreads > 1 && tasks > 1) {
    pool->parallel_for(
        tasks,
        [&](int64_t s, int64_t e) {
          for (int64_t t = s; t < e; ++t) run_task(t);
        },
        1);
  } else {
    for (int64_t t = 0; t < tasks; ++t) run_task(t);
  }
}

}  // namespace nn
}  // namespace ortlite
