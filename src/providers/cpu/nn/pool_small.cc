// MaxPool / AveragePool on small planes with short rows (pool_internal.h's pool_small).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#endif

#include "compute/conv_avx512.h"
#include "providers/cpu/nn/nn_common.h"
#include "providers/cpu/nn/pool_internal.h"

namespace ortlite {
namespace nn {

// Small planes (2-D, float, up to 4096 input pixels and 8192 padded ones; any kernel,
// stride, padding, dilation, ceil_mode): 16 channels at a time with the channels in the lanes. The
// block's planes are transposed into a padded plane of 16 channels a pixel (the identity in the
// pads: -inf for max, 0 for sums), each output row's window rows are combined column by column (the
// vertical pass, into one row of columns), then each output's window columns from that row
// (the horizontal pass), and the outputs are transposed back. The row kernels' per-row set-up
// cost more than the pooling on rows of up to 32 outputs (1x256x14x14 2x2 stride 2 pads 1,
// 1x64x56x56 3x3 stride 3 pads 1: 0.5-0.6x onnxruntime's speed); a table of each output's
// k1 x k2 taps (the first design) read every tap of every output, 5x5 stride 2 on
// 1x64x40x40 0.5x onnxruntime's speed. The same order as the row kernels: each column's rows,
// then the columns from the first; max(v, acc) keeps acc when v is NaN, the pads add
// zeros (a sum of -0 inputs only can come out +0), and averages are divided the same way.
namespace {

// Per output: its divisor (average), or 0 where no tap lies inside the input.
std::vector<float> pool_divisors(const Geo3& g, int include_pad_mode) {
  std::vector<float> div(static_cast<size_t>(g.out[1] * g.out[2]), 0.0f);
  for (int64_t o1 = 0; o1 < g.out[1]; ++o1) {
    const int64_t st1 = o1 * g.s[1] - g.pb[1];
    int64_t f1, n1;
    inside_taps(st1, g.k[1], g.d[1], g.in[1], f1, n1);
    for (int64_t o2 = 0; o2 < g.out[2]; ++o2) {
      const int64_t st2 = o2 * g.s[2] - g.pb[2];
      int64_t f2, n2;
      inside_taps(st2, g.k[2], g.d[2], g.in[2], f2, n2);
      int64_t d;
      if (include_pad_mode == 0) {
        d = n1 * n2;
      } else if (include_pad_mode == 1) {
        d = g.k[1] * g.k[2];
      } else {
        d = padded_taps(st1, g.k[1], g.d[1], g.in[1], g.pe[1]) *
            padded_taps(st2, g.k[2], g.d[2], g.in[2], g.pe[2]);
      }
      // The row kernels give 0 for a window with no input row or column.
      div[static_cast<size_t>(o1 * g.out[2] + o2)] = n1 * n2 > 0 ? static_cast<float>(d) : 0.0f;
    }
  }
  return div;
}

// The padded plane's rows and columns: every window's taps, from -pb.
int64_t padded_rows(const Geo3& g) {
  return (g.out[1] - 1) * g.s[1] + (g.k[1] - 1) * g.d[1] + 1;
}
int64_t padded_cols(const Geo3& g) {
  return (g.out[2] - 1) * g.s[2] + (g.k[2] - 1) * g.d[2] + 1;
}
// Floats of a block's scratch: the padded plane, one vertical row and the outputs, 16 lanes.
int64_t pool_small_scratch(const Geo3& g) {
  return 16 * (padded_rows(g) * padded_cols(g) + padded_cols(g) + g.out[1] * g.out[2]);
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
ORTLITE_NN_TARGET_AVX512 __attribute__((always_inline)) inline __m512 pool_comb(bool is_max,
                                                                                __m512 acc,
                                                                                __m512 v) {
  return is_max ? _mm512_max_ps(v, acc) : _mm512_add_ps(acc, v);
}
// Stores one output's 16 lanes: a max as it is (returns its lanes that are -inf), a sum
// divided by *d (0 where *d is 0).
ORTLITE_NN_TARGET_AVX512 __attribute__((always_inline)) inline __mmask16 pool_finish(
    bool is_max, __m512 acc, __m512 id, __mmask16 lanes, const float* d, float* out) {
  __mmask16 hit = 0;
  if (is_max) {
    hit = _mm512_mask_cmp_ps_mask(lanes, acc, id, _CMP_EQ_OQ);
  } else {
    acc = *d > 0.0f ? _mm512_div_ps(acc, _mm512_set1_ps(*d)) : _mm512_setzero_ps();
  }
  _mm512_storeu_ps(out, acc);
  return hit;
}
// Channels [c0, c1) (c1 - c0 <= 16) of x into y; buf holds pool_small_scratch(g) floats.
// Returns whether a max output came out -inf.
ORTLITE_NN_TARGET_AVX512 bool pool_small_block(const Geo3& g, const float* div, bool is_max,
                                               const float* x, float* y, int64_t c0, int64_t c1,
                                               float* buf) {
  const int cn = static_cast<int>(c1 - c0);
  const int64_t Hp = padded_rows(g), Wp = padded_cols(g);
  const int64_t in1 = g.in[1], in2 = g.in[2], out1 = g.out[1], out2 = g.out[2];
  const int64_t k1 = g.k[1], k2 = g.k[2], s1 = g.s[1], s2 = g.s[2], d1 = g.d[1], d2 = g.d[2];
  const int64_t pb1 = g.pb[1], pb2 = g.pb[2], out_size = out1 * out2;
  float* P = buf;               // Hp x Wp x 16: padded pixel (i, j) at P + 16 (i Wp + j)
  float* V = P + 16 * Hp * Wp;  // Wp x 16: one output row's vertical maxima / sums
  float* O = V + 16 * Wp;       // out_size x 16
  const __m512 id =
      is_max ? _mm512_set1_ps(-std::numeric_limits<float>::infinity()) : _mm512_setzero_ps();
  // Input columns [0, nc) land in padded columns [pb2, pb2 + nc); the rest are pads.
  const int64_t nc = std::max<int64_t>(0, std::min(in2, Wp - pb2));
  for (int64_t i = 0; i < Hp; ++i) {
    float* pr = P + 16 * i * Wp;
    const int64_t i1 = i - pb1;
    if (i1 < 0 || i1 >= in1 || nc == 0) {
      for (int64_t j = 0; j < Wp; ++j) _mm512_storeu_ps(pr + 16 * j, id);
      continue;
    }
    for (int64_t j = 0; j < pb2 && j < Wp; ++j) _mm512_storeu_ps(pr + 16 * j, id);
    for (int64_t j = pb2 + nc; j < Wp; ++j) _mm512_storeu_ps(pr + 16 * j, id);
    const float* xr = x + c0 * g.in_size + i1 * in2;
    for (int64_t p = 0; p < nc; p += 16)
      nn::cvx::transpose16(xr + p, g.in_size, cn, static_cast<int>(std::min<int64_t>(16, nc - p)),
                           pr + 16 * (pb2 + p), 16);
  }
  __mmask16 hit = 0;
  const __mmask16 lanes = static_cast<__mmask16>((1u << cn) - 1);
  for (int64_t o1 = 0; o1 < out1; ++o1) {
    // Vertical: V[j] = the window's rows of column j, in order (max from -inf: a NaN never
    // wins), four columns at a time.
    const float* top = P + 16 * o1 * s1 * Wp;
    const int64_t rstep = 16 * d1 * Wp;
    int64_t j = 0;
    for (; j + 4 <= Wp; j += 4) {
      const float* p = top + 16 * j;
      __m512 a0 = id, a1 = id, a2 = id, a3 = id;
      if (!is_max) {
        a0 = _mm512_loadu_ps(p);
        a1 = _mm512_loadu_ps(p + 16);
        a2 = _mm512_loadu_ps(p + 32);
        a3 = _mm512_loadu_ps(p + 48);
      }
      for (int64_t r = is_max ? 0 : 1; r < k1; ++r) {
        const float* q = p + r * rstep;
        a0 = pool_comb(is_max, a0, _mm512_loadu_ps(q));
        a1 = pool_comb(is_max, a1, _mm512_loadu_ps(q + 16));
        a2 = pool_comb(is_max, a2, _mm512_loadu_ps(q + 32));
        a3 = pool_comb(is_max, a3, _mm512_loadu_ps(q + 48));
      }
      _mm512_storeu_ps(V + 16 * j, a0);
      _mm512_storeu_ps(V + 16 * j + 16, a1);
      _mm512_storeu_ps(V + 16 * j + 32, a2);
      _mm512_storeu_ps(V + 16 * j + 48, a3);
    }
    for (; j < Wp; ++j) {
      const float* p = top + 16 * j;
      __m512 a = is_max ? id : _mm512_loadu_ps(p);
      for (int64_t r = is_max ? 0 : 1; r < k1; ++r)
        a = pool_comb(is_max, a, _mm512_loadu_ps(p + r * rstep));
      _mm512_storeu_ps(V + 16 * j, a);
    }
    // Horizontal: each output's window columns from the first, four outputs at a time.
    float* orow = O + 16 * o1 * out2;
    const float* drow = div + o1 * out2;
    const int64_t cstep = 16 * d2;
    int64_t o2 = 0;
    for (; o2 + 4 <= out2; o2 += 4) {
      const float* p = V + 16 * o2 * s2;
      const int64_t ostep = 16 * s2;
      __m512 a0 = _mm512_loadu_ps(p), a1 = _mm512_loadu_ps(p + ostep);
      __m512 a2 = _mm512_loadu_ps(p + 2 * ostep), a3 = _mm512_loadu_ps(p + 3 * ostep);
      for (int64_t q = 1; q < k2; ++q) {
        const float* t = p + q * cstep;
        a0 = pool_comb(is_max, a0, _mm512_loadu_ps(t));
        a1 = pool_comb(is_max, a1, _mm512_loadu_ps(t + ostep));
        a2 = pool_comb(is_max, a2, _mm512_loadu_ps(t + 2 * ostep));
        a3 = pool_comb(is_max, a3, _mm512_loadu_ps(t + 3 * ostep));
      }
      hit |= pool_finish(is_max, a0, id, lanes, drow + o2, orow + 16 * o2);
      hit |= pool_finish(is_max, a1, id, lanes, drow + o2 + 1, orow + 16 * o2 + 16);
      hit |= pool_finish(is_max, a2, id, lanes, drow + o2 + 2, orow + 16 * o2 + 32);
      hit |= pool_finish(is_max, a3, id, lanes, drow + o2 + 3, orow + 16 * o2 + 48);
    }
    for (; o2 < out2; ++o2) {
      const float* p = V + 16 * o2 * s2;
      __m512 a = _mm512_loadu_ps(p);
      for (int64_t q = 1; q < k2; ++q) a = pool_comb(is_max, a, _mm512_loadu_ps(p + q * cstep));
      hit |= pool_finish(is_max, a, id, lanes, drow + o2, orow + 16 * o2);
    }
  }
  for (int64_t o = 0; o < out_size; o += 16)
    nn::cvx::transpose16(O + 16 * o, 16, static_cast<int>(std::min<int64_t>(16, out_size - o)), cn,
                         y + c0 * out_size + o, out_size);
  return hit != 0;
}
#pragma GCC diagnostic pop
#endif

}  // namespace

bool pool_small_ok(const Geo3& g, int64_t channels) {
  return max_pool_avx512_cpu() && g.k[0] == 1 && g.in[0] == 1 && g.out[0] == 1 &&
         g.in_size <= 4096 && channels >= 16 && g.out[1] * g.out[2] > 0 &&
         padded_rows(g) * padded_cols(g) <= 8192;
}

// Rows of up to 8 outputs take pool_small before the 2x2 / 3x3 stride-2 kernels too (1
// thread, 1x512x7x7 3x3 stride 2 pads 1: 6.7 against 35 us; 1x256x14x14 2x2 stride 2: 16
// against 21); on longer rows those were faster (1x64x64x64 2x2 stride 2: 29 against 97 us,
// 3x3 42 against 68). It takes stride-1 windows before pool_s1 where pool_small_over_s1 says
// so (1x128x20x20 5x5 pads 2: 42 against 74 us for max, 35 against 86 for averages;
// 1x768x17x17 3x3 average 113 against 216).
bool pool_small_first(const Geo3& g, int64_t channels) {
  return pool_small_ok(g, channels) && g.out[2] <= 8;
}

// Stride 1: planes of up to 56x56 pixels with at least two blocks of 16 channels a thread
// (1x64x56x56 3x3 average: 95 against 102 us). Larger planes ran faster through pool_s1, a
// plane at a time in L1 (1x16x64x64 3x3: 61 against 47 us), and so did fewer blocks at two
// threads, which pool_s1 splits by channel (1x16x56x56 3x3 max: 21.5 against 14.5 us;
// 2x20x30x30: 15.3 against 12.2).
bool pool_small_over_s1(const Geo3& g, int64_t channels, const ThreadPool* pool) {
  const int64_t threads = pool ? pool->num_threads() : 1;
  return g.in_size <= 56 * 56 && (channels + 15) / 16 >= 2 * threads;
}

void pool_small(const Geo3& g, bool is_max, int include_pad_mode, const float* x, float* y,
                int64_t channels, ThreadPool* pool) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  const std::vector<float> div = is_max ? std::vector<float>() : pool_divisors(g, include_pad_mode);
  const int64_t out_size = g.out[1] * g.out[2], blocks = (channels + 15) / 16;
  const size_t need = static_cast<size_t>(pool_small_scratch(g));
  parallel_for(pool, blocks, 16.0 * static_cast<double>(g.in_size + out_size * g.k[1] * g.k[2]),
               [&](int64_t b0, int64_t b1) {
                 thread_local std::vector<float> buf;
                 if (buf.size() < need) buf.resize(need);
                 for (int64_t b = b0; b < b1; ++b) {
                   const int64_t c0 = 16 * b, c1 = std::min(c0 + 16, channels);
                   if (pool_small_block(g, div.data(), is_max, x, y, c0, c1, buf.data()))
                     max_pool_nan_windows(g, x, y, c0 * out_size, c1 * out_size);
                 }
               });
#else
  (void)g, (void)is_max, (void)include_pad_mode, (void)x, (void)y, (void)channels, (void)pool;
#endif
}

}  // namespace nn
}  // namespace ortlite
