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

// Small planes with short rows (2-D, float, any kernel, stride, padding, dilation,
// ceil_mode): 16 channels at a time with the channels in the lanes. The block's planes are
// transposed into rows of 16 channels a pixel, each output is its window's taps (a table of
// pixel offsets made once a call) combined as whole vectors, and the outputs are transposed
// back. The row kernels' per-row set-up cost more than the pooling on rows of up to 32
// outputs (1x256x14x14 2x2 stride 2 pads 1, 1x64x56x56 3x3 stride 3 pads 1: 0.5-0.6x
// onnxruntime's speed). The same taps in the same order as the row kernels (column by
// column, the rows of a column in order): max(v, acc) keeps acc when v is NaN, and sums are
// the row kernels' sums, divided the same way.
namespace {

struct PoolTaps {
  std::vector<int32_t> off;  // per output, k1 * k2 slots: a tap's pixel, or -1 (outside)
  std::vector<float> div;    // per output: the divisor (average), or 0 where no tap counts
  int64_t k = 0;             // slots per output
};
PoolTaps pool_taps(const Geo3& g, bool is_max, int include_pad_mode) {
  PoolTaps t;
  t.k = g.k[1] * g.k[2];
  const int64_t n = g.out[1] * g.out[2];
  t.off.assign(static_cast<size_t>(n * t.k), -1);
  t.div.assign(static_cast<size_t>(n), 0.0f);
  for (int64_t o1 = 0; o1 < g.out[1]; ++o1) {
    const int64_t st1 = o1 * g.s[1] - g.pb[1];
    int64_t f1, n1;
    inside_taps(st1, g.k[1], g.d[1], g.in[1], f1, n1);
    for (int64_t o2 = 0; o2 < g.out[2]; ++o2) {
      const int64_t st2 = o2 * g.s[2] - g.pb[2], o = o1 * g.out[2] + o2;
      int64_t f2, n2;
      inside_taps(st2, g.k[2], g.d[2], g.in[2], f2, n2);
      // Column-major slots: tap (r, q) at q * k1 + r.
      for (int64_t q = 0; q < g.k[2]; ++q) {
        const int64_t i2 = st2 + q * g.d[2];
        if (i2 < 0 || i2 >= g.in[2]) continue;
        for (int64_t r = 0; r < g.k[1]; ++r) {
          const int64_t i1 = st1 + r * g.d[1];
          if (i1 < 0 || i1 >= g.in[1]) continue;
          t.off[static_cast<size_t>(o * t.k + q * g.k[1] + r)] =
              static_cast<int32_t>(i1 * g.in[2] + i2);
        }
      }
      if (is_max) continue;
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
      t.div[static_cast<size_t>(o)] = n1 * n2 > 0 ? static_cast<float>(d) : 0.0f;
    }
  }
  return t;
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// Channels [c0, c1) (c1 - c0 <= 16) of x into y; buf holds (in_size + out_size) * 16 floats.
// Returns whether a max output came out -inf.
ORTLITE_NN_TARGET_AVX512 bool pool_small_block(const Geo3& g, const PoolTaps& t, bool is_max,
                                               const float* x, float* y, int64_t c0, int64_t c1,
                                               float* buf) {
  const int cn = static_cast<int>(c1 - c0);
  const int64_t in_size = g.in_size, out_size = g.out[1] * g.out[2];
  float* T = buf;                 // in_size x 16: pixel p's channels at T + 16 p
  float* O = buf + 16 * in_size;  // out_size x 16
  for (int64_t p = 0; p < in_size; p += 16)
    nn::cvx::transpose16(x + c0 * in_size + p, in_size, cn,
                         static_cast<int>(std::min<int64_t>(16, in_size - p)), T + 16 * p, 16);
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __mmask16 lanes = static_cast<__mmask16>((1u << cn) - 1);
  __mmask16 hit = 0;
  const int64_t k = t.k, k1 = g.k[1];
  for (int64_t o = 0; o < out_size; ++o) {
    const int32_t* off = t.off.data() + o * k;
    __m512 acc;
    if (is_max) {
      acc = ninf;
      for (int64_t j = 0; j < k; ++j)
        if (off[j] >= 0) acc = _mm512_max_ps(_mm512_loadu_ps(T + 16 * off[j]), acc);
      hit |= _mm512_mask_cmp_ps_mask(lanes, acc, ninf, _CMP_EQ_OQ);
    } else {
      // Each column's rows summed in order, then the columns from the first: the row
      // kernels' order.
      acc = _mm512_setzero_ps();
      bool first = true;
      for (int64_t q = 0; q < k; q += k1) {
        __m512 col = _mm512_setzero_ps();
        bool any = false;
        for (int64_t r = 0; r < k1; ++r) {
          if (off[q + r] < 0) continue;
          const __m512 v = _mm512_loadu_ps(T + 16 * off[q + r]);
          col = any ? _mm512_add_ps(col, v) : v;
          any = true;
        }
        if (!any) continue;
        acc = first ? col : _mm512_add_ps(acc, col);
        first = false;
      }
      const float d = t.div[static_cast<size_t>(o)];
      acc = d > 0.0f ? _mm512_div_ps(acc, _mm512_set1_ps(d)) : _mm512_setzero_ps();
    }
    _mm512_storeu_ps(O + 16 * o, acc);
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
  return max_pool_avx512_cpu() && g.k[0] == 1 && g.in[0] == 1 && g.out[0] == 1 && g.out[2] <= 32 &&
         g.in_size <= 4096 && channels >= 16 && g.k[1] * g.k[2] <= 64 && g.out[1] * g.out[2] > 0;
}

// Rows of up to 8 outputs take pool_small before the 2x2 / 3x3 stride-2 and stride-1
// kernels too (1 thread, 1x512x7x7 3x3 stride 2 pads 1: 6.7 against 35 us; 1x256x14x14 2x2
// stride 2: 16 against 21; longer rows were faster there: 1x128x28x28 3x3 stride 2 30
// against 36, 2x2 18 against 31, 1x128x20x20 5x5 stride 1 82 against 115).
bool pool_small_first(const Geo3& g, int64_t channels) {
  return pool_small_ok(g, channels) && g.out[2] <= 8;
}

void pool_small(const Geo3& g, bool is_max, int include_pad_mode, const float* x, float* y,
                int64_t channels, ThreadPool* pool) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  const PoolTaps t = pool_taps(g, is_max, include_pad_mode);
  const int64_t out_size = g.out[1] * g.out[2], blocks = (channels + 15) / 16;
  const size_t need = static_cast<size_t>(16 * (g.in_size + out_size));
  parallel_for(pool, blocks, 16.0 * static_cast<double>(g.in_size + out_size * t.k),
               [&](int64_t b0, int64_t b1) {
                 thread_local std::vector<float> buf;
                 if (buf.size() < need) buf.resize(need);
                 for (int64_t b = b0; b < b1; ++b) {
                   const int64_t c0 = 16 * b, c1 = std::min(c0 + 16, channels);
                   if (pool_small_block(g, t, is_max, x, y, c0, c1, buf.data()))
                     max_pool_nan_windows(g, x, y, c0 * out_size, c1 * out_size);
                 }
               });
#else
  (void)g, (void)is_max, (void)include_pad_mode, (void)x, (void)y, (void)channels, (void)pool;
#endif
}

}  // namespace nn
}  // namespace ortlite
