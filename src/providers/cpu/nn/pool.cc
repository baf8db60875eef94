// MaxPool, AveragePool, GlobalMaxPool, GlobalAveragePool over 1-D, 2-D and 3-D spatial dims
// (internally every input is viewed as 3-D with leading dims of size 1).
//
// Semantics follow onnxruntime: padded positions never win a max and are excluded from an
// average unless count_include_pad; with count_include_pad the divisor is the full kernel
// size before opset 19 and the taps inside the padded input from opset 19 on; MaxPool's
// Indices are flat over the whole input (row-major, or column-major spatial when
// storage_order = 1).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#endif

#include "providers/cpu/nn/nn_common.h"
#include "providers/cpu/nn/pool_internal.h"
#include "providers/shared/pool_attrs.h"
#include "compute/simd.h"

namespace ortlite {
namespace nn {
namespace {

// Where a max starts: -inf for floating types (a window of -inf values has the maximum
// -inf), the lowest value for integers.
template <typename T>
constexpr T max_identity() {
  return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                              : std::numeric_limits<T>::lowest();
}

// Max or sum pooling, one output row (last axis) at a time: every tap of the window is
// applied to the whole row, which vectorizes. Padded positions are skipped.
template <typename T, typename Acc, bool kMax>
void pool_rows(const Geo3& g, const T* x, T* y, int64_t channels, bool include_pad,
               bool clip_divisor, ThreadPool* pool) {
  const double cost = static_cast<double>(g.out_size) * g.k[0] * g.k[1] * g.k[2];
  const int64_t rows = channels * g.out[0] * g.out[1];
  const int64_t out2 = g.out[2];
  // Taps of each window along the last axis that are inside the input (for averages).
  std::vector<int64_t> cnt2(static_cast<size_t>(out2), 0);
  std::vector<int64_t> los(static_cast<size_t>(g.k[2])), his(static_cast<size_t>(g.k[2]));
  for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
    valid_range(k2 * g.d[2] - g.pb[2], g.s[2], g.in[2], out2, los[k2], his[k2]);
    for (int64_t o = los[k2]; o < his[k2]; ++o) ++cnt2[o];
  }
  // Number of taps of a window starting at `start` that lie inside the padded input.
  auto taps = [&](int64_t start, int dim) {
    const int64_t end = std::min(start + g.k[dim] * g.d[dim], g.in[dim] + g.pe[dim]);
    return end > start ? 1 + (end - start - 1) / g.d[dim] : 0;
  };
  const int64_t full = g.k[0] * g.k[1] * g.k[2];
  parallel_for(
      pool, rows, cost / std::max<int64_t>(1, g.out[0] * g.out[1]), [&](int64_t rb, int64_t re) {
        std::vector<Acc> acc(static_cast<size_t>(out2));
        for (int64_t r = rb; r < re; ++r) {
          const int64_t o1 = r % g.out[1];
          const int64_t o0 = (r / g.out[1]) % g.out[0];
          const int64_t c = r / (g.out[0] * g.out[1]);
          const T* xc = x + c * g.in_size;
          const int64_t s0 = o0 * g.s[0] - g.pb[0], s1 = o1 * g.s[1] - g.pb[1];
          std::fill(acc.begin(), acc.end(), kMax ? max_identity<Acc>() : Acc(0));
          int64_t n01 = 0;
          for (int64_t k0 = 0; k0 < g.k[0]; ++k0) {
            const int64_t i0 = s0 + k0 * g.d[0];
            if (i0 < 0 || i0 >= g.in[0]) continue;
            for (int64_t k1 = 0; k1 < g.k[1]; ++k1) {
              const int64_t i1 = s1 + k1 * g.d[1];
              if (i1 < 0 || i1 >= g.in[1]) continue;
              ++n01;
              const T* row = xc + (i0 * g.in[1] + i1) * g.in[2];
              for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
                const int64_t off = k2 * g.d[2] - g.pb[2];
                const int64_t lo = los[k2], hi = his[k2];
                const int64_t s2 = g.s[2];
                Acc* a = acc.data();
                if (kMax) {
                  for (int64_t o = lo; o < hi; ++o) {
                    const Acc v = static_cast<Acc>(row[o * s2 + off]);
                    a[o] = v > a[o] ? v : a[o];
                  }
                } else {
                  for (int64_t o = lo; o < hi; ++o) a[o] += static_cast<Acc>(row[o * s2 + off]);
                }
              }
            }
          }
          T* yr = y + r * out2;
          if (kMax) {
            for (int64_t o = 0; o < out2; ++o) yr[o] = static_cast<T>(acc[o]);
          } else if (include_pad) {
            const int64_t t01 = clip_divisor ? taps(s0, 0) * taps(s1, 1) : 0;
            for (int64_t o = 0; o < out2; ++o) {
              const int64_t div = clip_divisor ? t01 * taps(o * g.s[2] - g.pb[2], 2) : full;
              yr[o] = div > 0 ? static_cast<T>(acc[o] / static_cast<Acc>(div)) : T(0);
            }
          } else {
            for (int64_t o = 0; o < out2; ++o) {
              const int64_t div = n01 * cnt2[o];
              yr[o] = div > 0 ? static_cast<T>(acc[o] / static_cast<Acc>(div)) : T(0);
            }
          }
        }
      });
}

// Float max / average pooling over one to three spatial axes (any kernel, stride, padding,
// dilation, ceil_mode), output rows [rb, re) of `channels * out[0] * out[1]`. Per output
// row the window's input rows (depth-major) are first reduced column by column (max, or sum
// in row order) into a row of the scratch whose padding and the positions past the input
// hold the identity (-inf or 0); then the horizontal taps run 16 outputs at a time: stride 1
// loads the row at each tap's offset, stride 2 without dilation takes the even and odd lanes
// of two loads (one pair for two taps), other strides split the row into its s[2] phases
// first. Sums are divided by rows * cdiv[o] (taps counted as pool_rows counts them); a
// window with no tap gives 0 (average) or -inf (max). Comparisons are `v > acc`: a NaN
// input never wins. Scratch: pool2d_scratch(g) floats, 64-byte aligned.
int64_t pool2d_extent(const Geo3& g) {
  return (g.k[2] - 1) * g.d[2] + 1;  // columns one window spans
}
int64_t pool2d_width(const Geo3& g) {
  const int64_t out2r = (g.out[2] + 15) / 16 * 16;
  const int64_t e2 = pool2d_extent(g);
  return ((out2r + e2 + 32) * g.s[2] + e2 + 64 + 15) / 16 * 16;
}
// Phase entries the horizontal taps read (16-lane loads from o = 0, 16, ... < out[2]).
int64_t pool2d_phase_len(const Geo3& g) {
  return ((g.out[2] + 15) / 16 * 16 + (pool2d_extent(g) - 1) / g.s[2] + 15) / 16 * 16;
}

int64_t pool2d_slot(const Geo3& g) {
  return pool2d_width(g) + g.s[2] * pool2d_phase_len(g) + 16;
}
constexpr int64_t kPoolGroup = 8;  // rows per group (below)
int64_t pool2d_scratch(const Geo3& g) {
  return kPoolGroup * pool2d_slot(g);
}

template <int N>
struct VecOf;
template <>
struct VecOf<16> {
  typedef float type __attribute__((vector_size(64)));
};
template <>
struct VecOf<8> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct VecOf<4> {
  typedef float type __attribute__((vector_size(16)));
};

// out = the even (odd = 0) or odd (odd = 1) lanes of the 2N floats lo, hi.
template <int N, typename V>
__attribute__((always_inline)) inline void lanes(const V& lo, const V& hi, int odd, V& out) {
  if constexpr (N == 16) {
    out = odd ? __builtin_shufflevector(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27,
                                        29, 31)
              : __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                        28, 30);
  } else if constexpr (N == 8) {
    out = odd ? __builtin_shufflevector(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15)
              : __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14);
  } else {
    out = odd ? __builtin_shufflevector(lo, hi, 1, 3, 5, 7)
              : __builtin_shufflevector(lo, hi, 0, 2, 4, 6);
  }
}

// The loops over N-lane vectors (16: AVX-512, 8: AVX2, 4: SSE2), each instance compiled for
// its ISA below: GCC splits a vector wider than the ISA's registers element by element where
// it selects (`v > acc ? v : acc`), which made the AVX2 build of a 16-lane loop 3-4x slower
// than onnxruntime's MaxPool.
template <int N>
__attribute__((always_inline)) inline void pool2d_rows_impl(const Geo3& g, bool is_max,
                                                            int include_pad_mode, const float* cdiv,
                                                            const float* x, const float* x_end,
                                                            float* y, int64_t rb, int64_t re,
                                                            float* scratch) {
  using V = typename VecOf<N>::type;
  auto load = [](const float* p, V& v) __attribute__((always_inline)) {
    std::memcpy(&v, p, sizeof(V));
  };
  auto store = [](float* p, const V& v) __attribute__((always_inline)) {
    std::memcpy(p, &v, sizeof(V));
  };
  const float ident = is_max ? -std::numeric_limits<float>::infinity() : 0.0f;
  const int64_t in1 = g.in[1], in2 = g.in[2], out0 = g.out[0], out1 = g.out[1], out2 = g.out[2];
  const int64_t k1 = g.k[1], k2 = g.k[2], s1 = g.s[1], s2 = g.s[2], pb1 = g.pb[1], pb2 = g.pb[2];
  const int64_t d1 = g.d[1], d2 = g.d[2];
  const bool pairs = s2 == 2 && d2 == 1;  // the even / odd lanes path of stride 2
  const int64_t width = pool2d_width(g), plen = pool2d_phase_len(g), slot = pool2d_slot(g);
  for (int64_t b = 0; b < kPoolGroup; ++b)
    for (int64_t j = 0; j < width; ++j) scratch[b * slot + j] = ident;
  const int64_t valid = std::min(in2, width - pb2);
  const V vid = V{} + ident;
  const V zero = V{};
  // Whether a max output came out -inf: then the range is checked for all-NaN windows
  // after the loop (max_pool_nan_windows). Each group's outputs are tested just after they
  // were stored, from the cache (a test of each result in the loop below kept it out of a
  // register: 1.35x the time of a dilated 3x3 pool).
  bool hit = false;
  uint32_t ninf_bits;
  std::memcpy(&ninf_bits, &ident, sizeof(ninf_bits));
  // Tap q of output o reads slot[tap[q] + o]: phase q % s2 of the reduced row (the row
  // itself for stride 1), shifted by q / s2.
  int64_t tap[64];
  bool used_phase[64] = {};  // the phases some tap reads
  for (int64_t q = 0; q < k2; ++q) {
    const int64_t col = q * d2;
    tap[q] = (s2 == 1 ? 0 : width + (col % s2) * plen) + col / s2;
    used_phase[col % s2] = true;
  }
  float* const y_chunk_end = y + re * out2;
  int64_t o1 = rb % out1, o0 = (rb / out1) % out0, c = rb / (out1 * out0);
  // Rows go in groups of kPoolGroup, one pass at a time over the group, so that a pass reads
  // what the previous one stored several rows earlier (no store-to-load forwarding stalls).
  for (int64_t r0 = rb; r0 < re; r0 += kPoolGroup) {
    const int64_t nr = std::min<int64_t>(kPoolGroup, re - r0);
    float rowf[kPoolGroup];
    for (int64_t b = 0; b < nr; ++b, ++o1) {
      if (o1 == out1) {
        o1 = 0;
        if (++o0 == out0) {
          o0 = 0;
          ++c;
        }
      }
      float* t = scratch + b * slot + pb2;  // t[i] is input column i
      const float* xc = x + c * g.in_size;
      const int64_t start = o1 * s1 - pb1, start0 = o0 * g.s[0] - g.pb[0];
      int64_t i_lo, n1, j_lo, n0;
      inside_taps(start, k1, d1, in1, i_lo, n1);
      inside_taps(start0, g.k[0], g.d[0], g.in[0], j_lo, n0);
      if (include_pad_mode == 0) {
        rowf[b] = static_cast<float>(n0 * n1);
      } else if (include_pad_mode == 1) {
        rowf[b] = static_cast<float>(g.k[0] * k1);
      } else {
        rowf[b] = static_cast<float>(padded_taps(start0, g.k[0], g.d[0], g.in[0], g.pe[0]) *
                                     padded_taps(start, k1, d1, in1, g.pe[1]));
      }
      // Vertical pass over the n0 * n1 input rows of the window, depth-major.
      if (n0 * n1 == 0) {
        for (int64_t j = 0; j < valid; ++j) t[j] = ident;
        continue;
      }
      const int64_t step1 = d1 * in2, step0 = g.d[0] * in1 * in2;
      const float* xr = xc + (j_lo * in1 + i_lo) * in2;
      const float* x_last = xr + (n0 - 1) * step0 + (n1 - 1) * step1;
      // 16 columns at a time, reading past the end of the row (into the next one) except at
      // the end of the input; the lanes past `valid` are set back to the identity below.
      const int64_t vend = std::min((valid + N - 1) / N * N, x_end - x_last);
      int64_t j = 0;
      for (; j + N <= vend; j += N) {
        V acc;
        load(xr + j, acc);
        if (is_max) acc = acc > vid ? acc : vid;
        for (int64_t a = 0; a < n0; ++a) {
          const float* xp = xr + a * step0 + j;
          for (int64_t i = a == 0 ? 1 : 0; i < n1; ++i) {
            V v;
            load(xp + i * step1, v);
            if (is_max) {
              acc = v > acc ? v : acc;
            } else {
              acc += v;
            }
          }
        }
        store(t + j, acc);
      }
      for (; j < valid; ++j) {
        float acc = xr[j];
        if (is_max) acc = acc > ident ? acc : ident;
        for (int64_t a = 0; a < n0; ++a) {
          const float* xp = xr + a * step0 + j;
          for (int64_t i = a == 0 ? 1 : 0; i < n1; ++i) {
            const float v = xp[i * step1];
            acc = is_max ? (v > acc ? v : acc) : acc + v;
          }
        }
        t[j] = acc;
      }
      if (vend > valid) store(t + valid, vid);
    }
    // Phases (strides above 2, or 2 with dilation): each reduced row split into its s2
    // column phases.
    if (s2 > 1 && !pairs) {
      for (int64_t b = 0; b < nr; ++b) {
        const float* tmp = scratch + b * slot;
        float* ph0 = scratch + b * slot + width;
        if (s2 == 2) {
          for (int64_t i = 0; i < plen; i += N) {
            V lo, hi, v;
            load(tmp + 2 * i, lo);
            load(tmp + 2 * i + N, hi);
            if (used_phase[0]) {
              lanes<N>(lo, hi, 0, v);
              store(ph0 + i, v);
            }
            if (used_phase[1]) {
              lanes<N>(lo, hi, 1, v);
              store(ph0 + plen + i, v);
            }
          }
          continue;
        }
        for (int64_t p = 0; p < s2; ++p) {
          if (!used_phase[p]) continue;
          float* ph = ph0 + p * plen;
          for (int64_t i = 0; i < plen; ++i) ph[i] = tmp[i * s2 + p];
        }
      }
    }
    // Horizontal pass.
    for (int64_t b = 0; b < nr; ++b) {
      const float* base = scratch + b * slot;
      const V vrow = V{} + rowf[b];
      float* yr = y + (r0 + b) * out2;
      for (int64_t o = 0; o < out2; o += N) {
        V acc;
        if (pairs) {
          // Taps 2m and 2m + 1: the even and odd lanes of the 32 columns from 2 o + 2 m.
          for (int64_t q = 0; q < k2; q += 2) {
            V lo, hi;
            load(base + 2 * o + q, lo);
            load(base + 2 * o + q + N, hi);
            V ev;
            lanes<N>(lo, hi, 0, ev);
            if (q == 0) {
              acc = ev;
            } else if (is_max) {
              acc = ev > acc ? ev : acc;
            } else {
              acc += ev;
            }
            if (q + 1 < k2) {
              V od;
              lanes<N>(lo, hi, 1, od);
              if (is_max) {
                acc = od > acc ? od : acc;
              } else {
                acc += od;
              }
            }
          }
        } else {
          load(base + tap[0] + o, acc);
          for (int64_t q = 1; q < k2; ++q) {
            V v;
            load(base + tap[q] + o, v);
            if (is_max) {
              acc = v > acc ? v : acc;
            } else {
              acc += v;
            }
          }
        }
        if (!is_max) {
          V d;
          load(cdiv + o, d);
          d *= vrow;
          const V one = zero + 1.0f;
          const V qt = acc / (d > zero ? d : one);
          acc = d > zero ? qt : zero;
        }
        // A full store may spill into the next rows of [rb, re): they are written after it.
        if (yr + o + N <= y_chunk_end) {
          store(yr + o, acc);
        } else {
          for (int64_t j = 0; j < out2 - o; ++j) yr[o + j] = acc[j];
        }
      }
    }
    if (is_max && !hit) hit = any_bits_equal(y + r0 * out2, nr * out2, ninf_bits);
  }
  if (hit) max_pool_nan_windows(g, x, y, rb * out2, re * out2);
}

ORTLITE_NN_TARGET_AVX512 void pool2d_rows_avx512(const Geo3& g, bool is_max, int mode,
                                                 const float* cdiv, const float* x,
                                                 const float* x_end, float* y, int64_t rb,
                                                 int64_t re, float* scratch) {
  pool2d_rows_impl<16>(g, is_max, mode, cdiv, x, x_end, y, rb, re, scratch);
}
ORTLITE_NN_TARGET_AVX2 void pool2d_rows_avx2(const Geo3& g, bool is_max, int mode,
                                             const float* cdiv, const float* x, const float* x_end,
                                             float* y, int64_t rb, int64_t re, float* scratch) {
  pool2d_rows_impl<8>(g, is_max, mode, cdiv, x, x_end, y, rb, re, scratch);
}
void pool2d_rows_sse2(const Geo3& g, bool is_max, int mode, const float* cdiv, const float* x,
                      const float* x_end, float* y, int64_t rb, int64_t re, float* scratch) {
  pool2d_rows_impl<4>(g, is_max, mode, cdiv, x, x_end, y, rb, re, scratch);
}

void pool2d_rows_f32(const Geo3& g, bool is_max, int mode, const float* cdiv, const float* x,
                     const float* x_end, float* y, int64_t rb, int64_t re, float* scratch) {
  static const auto fn = pick_by_isa(pool2d_rows_avx512, pool2d_rows_avx2, pool2d_rows_sse2);
  fn(g, is_max, mode, cdiv, x, x_end, y, rb, re, scratch);
}

// Whether pool2d_rows_f32 handles the geometry.
bool pool2d_fast_ok(const Geo3& g) {
  return g.s[2] <= 64 && g.k[2] <= 64;
}

// pool2d_rows_f32 over all rows, in parallel. include_pad_mode: 0 excludes padding from the
// divisor, 1 divides by the kernel size, 2 by the taps inside the padded input (opset 19).
void pool2d_f32(const Geo3& g, bool is_max, int include_pad_mode, const float* x, float* y,
                int64_t channels, ThreadPool* pool) {
  const int64_t out2 = g.out[2];
  std::vector<float> cdiv(static_cast<size_t>((out2 + 15) / 16 * 16), 1.0f);
  if (!is_max) {
    for (int64_t o = 0; o < out2; ++o) {
      const int64_t st = o * g.s[2] - g.pb[2];
      int64_t n = 0, first = 0;
      if (include_pad_mode == 0) {
        inside_taps(st, g.k[2], g.d[2], g.in[2], first, n);
      } else if (include_pad_mode == 1) {
        n = g.k[2];
      } else {
        n = padded_taps(st, g.k[2], g.d[2], g.in[2], g.pe[2]);
      }
      cdiv[static_cast<size_t>(o)] = static_cast<float>(std::max<int64_t>(n, 0));
    }
  }
  const double cost =
      static_cast<double>(g.in[2]) * g.k[0] * g.k[1] + static_cast<double>(out2) * g.k[2];
  parallel_for(pool, channels * g.out[0] * g.out[1], cost, [&](int64_t rb, int64_t re) {
    // 64-byte aligned (slots, rows and phases are multiples of 16 floats): the stores of the
    // phase pass and the loads of the rows do not split cache lines.
    std::vector<float> scratch(static_cast<size_t>(pool2d_scratch(g) + 16));
    const uintptr_t a = reinterpret_cast<uintptr_t>(scratch.data());
    float* base = scratch.data() + ((64 - a % 64) % 64) / sizeof(float);
    pool2d_rows_f32(g, is_max, include_pad_mode, cdiv.data(), x, x + channels * g.in_size, y, rb,
                    re, base);
  });
}

// Max (the first maximum of NaN-free inputs; NaN never wins over x[0]) or sum of x[0, n).
template <int N>
__attribute__((always_inline)) inline float reduce_impl(bool is_max, const float* x, int64_t n) {
  using V = typename VecOf<N>::type;
  auto load = [](const float* p, V& v) __attribute__((always_inline)) {
    std::memcpy(&v, p, sizeof(V));
  };
  if (n <= 0) return 0.0f;
  int64_t i = 0;
  if (is_max) {
    V a0 = V{} + x[0], a1 = a0, a2 = a0, a3 = a0;
    for (; i + 4 * N <= n; i += 4 * N) {
      V v0, v1, v2, v3;
      load(x + i, v0);
      load(x + i + N, v1);
      load(x + i + 2 * N, v2);
      load(x + i + 3 * N, v3);
      a0 = v0 > a0 ? v0 : a0;
      a1 = v1 > a1 ? v1 : a1;
      a2 = v2 > a2 ? v2 : a2;
      a3 = v3 > a3 ? v3 : a3;
    }
    for (; i + N <= n; i += N) {
      V v;
      load(x + i, v);
      a0 = v > a0 ? v : a0;
    }
    a0 = a1 > a0 ? a1 : a0;
    a0 = a2 > a0 ? a2 : a0;
    a0 = a3 > a0 ? a3 : a0;
    float best = x[0];
    for (int j = 0; j < N; ++j) best = a0[j] > best ? a0[j] : best;
    for (; i < n; ++i) best = x[i] > best ? x[i] : best;
    return best;
  }
  V a0 = V{}, a1 = a0, a2 = a0, a3 = a0;
  for (; i + 4 * N <= n; i += 4 * N) {
    V v0, v1, v2, v3;
    load(x + i, v0);
    load(x + i + N, v1);
    load(x + i + 2 * N, v2);
    load(x + i + 3 * N, v3);
    a0 += v0;
    a1 += v1;
    a2 += v2;
    a3 += v3;
  }
  for (; i + N <= n; i += N) {
    V v;
    load(x + i, v);
    a0 += v;
  }
  a0 = (a0 + a1) + (a2 + a3);
  float sum = 0.0f;
  for (; i < n; ++i) sum += x[i];
  for (int j = 0; j < N; ++j) sum += a0[j];
  return sum;
}
ORTLITE_NN_TARGET_AVX512 float reduce_avx512(bool is_max, const float* x, int64_t n) {
  return reduce_impl<16>(is_max, x, n);
}
ORTLITE_NN_TARGET_AVX2 float reduce_avx2(bool is_max, const float* x, int64_t n) {
  return reduce_impl<8>(is_max, x, n);
}
float reduce_sse2(bool is_max, const float* x, int64_t n) {
  return reduce_impl<4>(is_max, x, n);
}

float reduce_f32(bool is_max, const float* x, int64_t n) {
  static const auto fn = pick_by_isa(reduce_avx512, reduce_avx2, reduce_sse2);
  return fn(is_max, x, n);
}

// Max pooling with the Indices output (flat over the input; row-major, or column-major over
// the spatial dims when storage_order = 1).
template <typename T>
void max_pool_indices(const Geo3& g, const T* x, T* y, int64_t* ind, int64_t channels,
                      int64_t storage_order, ThreadPool* pool) {
  const double cost = static_cast<double>(g.out_size) * g.k[0] * g.k[1] * g.k[2];
  parallel_for(pool, channels, cost, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      const T* xc = x + c * g.in_size;
      int64_t o = c * g.out_size;
      for (int64_t o0 = 0; o0 < g.out[0]; ++o0) {
        const int64_t s0 = o0 * g.s[0] - g.pb[0];
        for (int64_t o1 = 0; o1 < g.out[1]; ++o1) {
          const int64_t s1 = o1 * g.s[1] - g.pb[1];
          for (int64_t o2 = 0; o2 < g.out[2]; ++o2, ++o) {
            const int64_t s2 = o2 * g.s[2] - g.pb[2];
            T best = std::numeric_limits<T>::lowest();
            int64_t bi = -1;
            for (int64_t k0 = 0; k0 < g.k[0]; ++k0) {
              const int64_t i0 = s0 + k0 * g.d[0];
              if (i0 < 0 || i0 >= g.in[0]) continue;
              for (int64_t k1 = 0; k1 < g.k[1]; ++k1) {
                const int64_t i1 = s1 + k1 * g.d[1];
                if (i1 < 0 || i1 >= g.in[1]) continue;
                const int64_t base = (i0 * g.in[1] + i1) * g.in[2];
                for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
                  const int64_t i2 = s2 + k2 * g.d[2];
                  if (i2 < 0 || i2 >= g.in[2]) continue;
                  const T v = xc[base + i2];
                  const bool gt = v > best;  // first maximum wins; NaN never does
                  best = gt ? v : best;
                  bi = gt ? base + i2 : bi;
                }
              }
            }
            y[o] = best;
            // No element above the type's lowest value: onnxruntime reports index -1 on every
            // real spatial axis.
            int64_t b0 = g.rank >= 3 ? -1 : 0, b1 = g.rank >= 2 ? -1 : 0, b2 = -1;
            if (bi >= 0) {
              b2 = bi % g.in[2];
              b1 = (bi / g.in[2]) % g.in[1];
              b0 = bi / (g.in[2] * g.in[1]);
            }
            const int64_t idx = storage_order == 0 ? (b0 * g.in[1] + b1) * g.in[2] + b2
                                                   : b0 + b1 * g.in[0] + b2 * g.in[0] * g.in[1];
            ind[o] = c * g.in_size + idx;
          }
        }
      }
    }
  });
}

// Floats of each of max_pool_3x3s2_avx512's kPoolGroup scratch rows: the columns its 16-output
// blocks read (2 * out2 rounded up to 32, and 18 more), a multiple of 16.
int64_t max_pool_3x3s2_width(const Geo3& g) {
  return std::max<int64_t>((g.out[2] + 15) / 16 * 32 + 32, (g.pb[2] + g.in[2] + 15) / 16 * 16);
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
// GCC 12 reports the _mm512_undefined_ps() inside its own intrinsics as maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// Max or average pooling 2x2 stride 2 without padding (2-D, float, AVX-512F): 16 outputs of
// a row from two rows of 32 inputs, the column pairs split by two permutes. The general row
// kernel reduces the rows into a scratch row and its column phases first; on the demo CNN's
// 1x16x32x32 pool that was 3.5 of a 45 us run. The same operations in the same order as the
// general kernel, so the same results: max(v, acc) keeps acc when v is NaN (a NaN never
// wins); an average is (x00 + x10) + (x01 + x11) over 4 (every window is whole), and x / 4
// is x * 0.25 exactly.
template <bool kMax>
ORTLITE_NN_TARGET_AVX512 void pool_2x2s2_avx512(const Geo3& g, const float* x, float* y, int64_t rb,
                                                int64_t re) {
  const int64_t in2 = g.in[2], out1 = g.out[1], out2 = g.out[2];
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512 quarter = _mm512_set1_ps(0.25f);
  __mmask16 hit = 0;  // lanes of max outputs that came out -inf
  for (int64_t r = rb; r < re; ++r) {
    const int64_t c = r / out1, oy = r % out1;
    const float* x0 = x + c * g.in_size + 2 * oy * in2;
    const float* x1 = x0 + in2;
    float* yr = y + r * out2;
    for (int64_t ox = 0; ox < out2; ox += 16) {
      const int64_t n = std::min<int64_t>(16, out2 - ox), m = 2 * n;
      const __mmask16 ma = m >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << m) - 1);
      const __mmask16 mb = m <= 16 ? __mmask16(0) : __mmask16((1u << (m - 16)) - 1);
      const __mmask16 mn = n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
      const float* p0 = x0 + 2 * ox;
      const float* p1 = x1 + 2 * ox;
      const __m512 a0 = _mm512_maskz_loadu_ps(ma, p0), a1 = _mm512_maskz_loadu_ps(ma, p1);
      const __m512 b0 = _mm512_maskz_loadu_ps(mb, p0 + 16), b1 = _mm512_maskz_loadu_ps(mb, p1 + 16);
      if (kMax) {
        // Per column: row 0 against -inf, then row 1 (the general kernel's vertical pass).
        const __m512 a = _mm512_max_ps(a1, _mm512_max_ps(a0, ninf));
        const __m512 b = _mm512_max_ps(b1, _mm512_max_ps(b0, ninf));
        const __m512 left = _mm512_permutex2var_ps(a, even, b);
        const __m512 right = _mm512_permutex2var_ps(a, odd, b);
        const __m512 v = _mm512_max_ps(right, left);
        hit |= _mm512_mask_cmp_ps_mask(mn, v, ninf, _CMP_EQ_OQ);
        _mm512_mask_storeu_ps(yr + ox, mn, v);
      } else {
        const __m512 a = _mm512_add_ps(a0, a1), b = _mm512_add_ps(b0, b1);
        const __m512 left = _mm512_permutex2var_ps(a, even, b);
        const __m512 right = _mm512_permutex2var_ps(a, odd, b);
        _mm512_mask_storeu_ps(yr + ox, mn, _mm512_mul_ps(_mm512_add_ps(left, right), quarter));
      }
    }
  }
  // A call in the row loop cost 45% of this pool's time (the constants no longer stayed in
  // registers); a row with -inf is rare: the range is checked again after the loop.
  if (kMax && hit) max_pool_nan_windows(g, x, y, rb * out2, re * out2);
}

// MaxPool 3x3 stride 2 (2-D, float, no dilation, pads of 0-2, ceil_mode; AVX-512F): the
// pool after ResNet's stem. Per output row the vertical maximum of its (up to) three input
// rows goes into a scratch row padded with -inf, then 16 outputs at a time take their three
// taps from the even / odd lanes of two pairs of loads (taps 0 and 1 from one pair, tap 2
// from the pair two columns on). The general row kernel does the same with per-row
// bookkeeping that cost more than the maxima (1x64x112x112: 2.5 us a channel). The same
// order of selects as there: max(v, acc) keeps acc when v is NaN, so a NaN never wins, and
// of equal values (+0 / -0) the first in the window stays.
ORTLITE_NN_TARGET_AVX512 void max_pool_3x3s2_avx512(const Geo3& g, const float* x, float* y,
                                                    int64_t rb, int64_t re, float* t) {
  const int64_t in1 = g.in[1], in2 = g.in[2], out1 = g.out[1], out2 = g.out[2];
  const int64_t pt = g.pb[1], pl = g.pb[2];
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  auto mask = [](int64_t n) {
    return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n > 0 ? n : 0)) - 1);
  };
  // Row b of a group at t + b * width; its t[pl + j] is input column j. The rest (the
  // padding, ceil_mode's columns past the input, the lanes past out2) stays -inf: the
  // vertical pass writes only columns [0, in2).
  const int64_t width = max_pool_3x3s2_width(g);
  for (int64_t j = 0; j < kPoolGroup * width; j += 16) _mm512_storeu_ps(t + j, ninf);
  __mmask16 hit = 0;  // lanes of outputs that came out -inf
  // Rows in groups, one pass at a time over the group, so that the horizontal loads (two
  // columns apart) read stores made rows earlier (no store-to-load forwarding stalls).
  for (int64_t r0 = rb; r0 < re; r0 += kPoolGroup) {
    const int64_t nr = std::min<int64_t>(kPoolGroup, re - r0);
    for (int64_t b = 0; b < nr; ++b) {
      const int64_t r = r0 + b, c = r / out1, oy = r % out1;
      const float* xc = x + c * g.in_size;
      const int64_t i0 = 2 * oy - pt;
      const float* rows[3];
      int n = 0;
      for (int64_t a = 0; a < 3; ++a)
        if (i0 + a >= 0 && i0 + a < in1) rows[n++] = xc + (i0 + a) * in2;
      float* tc = t + b * width + pl;
      int64_t j = 0;
      if (n == 3) {
        for (; j + 16 <= in2; j += 16) {
          __m512 acc = _mm512_max_ps(_mm512_loadu_ps(rows[0] + j), ninf);
          acc = _mm512_max_ps(_mm512_loadu_ps(rows[1] + j), acc);
          _mm512_storeu_ps(tc + j, _mm512_max_ps(_mm512_loadu_ps(rows[2] + j), acc));
        }
      }
      for (; j < in2; j += 16) {
        const __mmask16 m = mask(in2 - j);
        __m512 acc = ninf;
        for (int a = 0; a < n; ++a) acc = _mm512_max_ps(_mm512_maskz_loadu_ps(m, rows[a] + j), acc);
        _mm512_mask_storeu_ps(tc + j, m, acc);
      }
    }
    for (int64_t b = 0; b < nr; ++b) {
      const float* tb = t + b * width;
      float* yr = y + (r0 + b) * out2;
      for (int64_t o = 0; o < out2; o += 16) {
        const float* p = tb + 2 * o;
        const __m512 lo = _mm512_loadu_ps(p), hi = _mm512_loadu_ps(p + 16);
        const __m512 lo2 = _mm512_loadu_ps(p + 2), hi2 = _mm512_loadu_ps(p + 18);
        __m512 acc = _mm512_permutex2var_ps(lo, even, hi);
        acc = _mm512_max_ps(_mm512_permutex2var_ps(lo, odd, hi), acc);
        acc = _mm512_max_ps(_mm512_permutex2var_ps(lo2, even, hi2), acc);
        const __mmask16 m = mask(out2 - o);
        hit |= _mm512_mask_cmp_ps_mask(m, acc, ninf, _CMP_EQ_OQ);
        _mm512_mask_storeu_ps(yr + o, m, acc);
      }
    }
  }
  if (hit) max_pool_nan_windows(g, x, y, rb * out2, re * out2);  // rare: as pool_2x2s2_avx512
}

// dst[f] = the maximum of src[f + t * step] over taps t < taps, for f < n: four vectors at a
// time (each maximum is a chain of dependent maxes). max(v, acc) keeps acc when v is NaN.
ORTLITE_NN_TARGET_AVX512 void max_taps_avx512(const float* src, int64_t step, int64_t taps,
                                              float* dst, int64_t n) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t f = 0;
  for (; f + 64 <= n; f += 64) {
    __m512 a0 = ninf, a1 = ninf, a2 = ninf, a3 = ninf;
    for (int64_t t = 0; t < taps; ++t) {
      const float* q = src + f + t * step;
      a0 = _mm512_max_ps(_mm512_loadu_ps(q), a0);
      a1 = _mm512_max_ps(_mm512_loadu_ps(q + 16), a1);
      a2 = _mm512_max_ps(_mm512_loadu_ps(q + 32), a2);
      a3 = _mm512_max_ps(_mm512_loadu_ps(q + 48), a3);
    }
    _mm512_storeu_ps(dst + f, a0);
    _mm512_storeu_ps(dst + f + 16, a1);
    _mm512_storeu_ps(dst + f + 32, a2);
    _mm512_storeu_ps(dst + f + 48, a3);
  }
  for (; f < n; f += 16) {
    const __mmask16 m = n - f >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - f)) - 1);
    __m512 acc = ninf;
    for (int64_t t = 0; t < taps; ++t)
      acc = _mm512_max_ps(_mm512_maskz_loadu_ps(m, src + f + t * step), acc);
    _mm512_mask_storeu_ps(dst + f, m, acc);
  }
}

// Max or average pooling with strides 1 (2-D, float, no dilation, pads below the kernel:
// every window holds an input; AVX-512F). Max: per channel the plane is copied into a buffer
// padded with -inf (rows of Wp = OW + kw - 1), the vertical maximum of kh rows runs as one
// flat loop over the buffer, and the horizontal one of kw columns per output row. Sums: the
// vertical sums are read from the input into rows of Wp with zeros in the pads, then the
// horizontal ones. YOLO's SPPF pools (5x5, pads 2, 1x128x20x20) and the 3x3 averages
// of Inception-style blocks spent most of their time in the general kernel's per-row
// bookkeeping. The same operations in the same order as the general kernel, so the same
// results: max(v, acc) keeps acc when v is NaN; a sum starts from the first row of the window
// inside the input and adds the others, then the kw columns from the first (padding columns
// are zeros), and is divided by (rows inside) x (columns inside) without count_include_pad,
// else by kh x kw (with pads below the kernel every window lies inside the padded input).
template <bool kMax>
ORTLITE_NN_TARGET_AVX512 void pool_s1_avx512(const Geo3& g, const float* x, float* y, int64_t c0,
                                             int64_t c1, bool include_pad, float* buf) {
  const int64_t H = g.in[1], W = g.in[2], OH = g.out[1], OW = g.out[2];
  const int64_t kh = g.k[1], kw = g.k[2], pt = g.pb[1], pl = g.pb[2];
  const int64_t Wp = OW + kw - 1, Hp = OH + kh - 1;
  float* P = buf;            // Hp x Wp, padded input
  float* V = buf + Hp * Wp;  // OH x Wp (+ kw - 1), vertical maxima / sums
  const float ident = kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
  const __m512 vid = _mm512_set1_ps(ident);
  auto mask = [](int64_t n) {
    return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n > 0 ? n : 0)) - 1);
  };
  // The columns of a padded row that hold input: [j_lo, j_hi).
  const int64_t j_lo = std::min<int64_t>(pl, Wp), j_hi = std::min<int64_t>(Wp, W + pl);
  // Averages: the divisor of each output's window and its reciprocal, by the window's rows
  // inside the input (1 to kh) and column: dr[(rows - 1) * OWv + o] (rows x columns inside
  // the input, or kh x kw with count_include_pad), dr[kh * OWv + ...] the reciprocals.
  const int64_t OWv = (OW + 15) / 16 * 16;
  thread_local std::vector<float> dr;
  if (!kMax) {
    dr.assign(static_cast<size_t>(2 * kh * OWv), 1.0f);
    for (int64_t rows = 1; rows <= kh; ++rows)
      for (int64_t o = 0; o < OW; ++o) {
        const int64_t cols = include_pad ? kw : std::min(o + kw, j_hi) - std::max(o, j_lo);
        const float d = static_cast<float>((include_pad ? kh : rows) * cols);
        dr[(rows - 1) * OWv + o] = d;
        dr[(kh + rows - 1) * OWv + o] = 1.0f / d;
      }
  }
  const float* const divs = dr.data();
  const __m512 inf = _mm512_set1_ps(std::numeric_limits<float>::infinity());
  const __m512 tiny = _mm512_set1_ps(0x1p-100f);
  const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  __mmask16 hit = 0;  // lanes of max outputs that came out -inf
  for (int64_t c = c0; c < c1; ++c) {
    const float* xc = x + c * g.in_size;
    float* yc = y + c * g.out_size;
    const int64_t n = OH * Wp;
    if (kMax) {
      for (int64_t i = 0; i < Hp; ++i) {
        float* pr = P + i * Wp;
        const int64_t iy = i - pt;
        if (iy < 0 || iy >= H) {
          for (int64_t j = 0; j < Wp; j += 16) _mm512_mask_storeu_ps(pr + j, mask(Wp - j), vid);
          continue;
        }
        for (int64_t j = 0; j < j_lo; ++j) pr[j] = ident;
        const float* xr = xc + iy * W - pl;
        for (int64_t j = j_lo; j < j_hi; j += 16)
          _mm512_mask_storeu_ps(pr + j, mask(j_hi - j),
                                _mm512_maskz_loadu_ps(mask(j_hi - j), xr + j));
        for (int64_t j = j_hi; j < Wp; ++j) pr[j] = ident;
      }
      // Vertical, then horizontal (into P, free again: O[i][j] at P[i * Wp + j] for j < OW).
      max_taps_avx512(P, Wp, kh, V, n);
      // The last row's window runs kw - 1 columns past V's end: -inf there (never stored out).
      for (int64_t j = 0; j < kw - 1; ++j) V[n + j] = ident;
      max_taps_avx512(V, 1, kw, P, n);
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t o = 0; o < OW; o += 16) {
          const __m512 v = _mm512_maskz_loadu_ps(mask(OW - o), P + i * Wp + o);
          hit |= _mm512_mask_cmp_ps_mask(mask(OW - o), v, vid, _CMP_EQ_OQ);
          _mm512_mask_storeu_ps(yc + i * OW + o, mask(OW - o), v);
        }
      continue;
    }
    // Sums: all rows' vertical sums, read from the input (columns [pl, pl + W) of V's rows of
    // Wp; zeros in the pads), before the horizontal pass (a pass reading what the one before
    // stored just now, at other offsets, waits on store forwarding).
    for (int64_t i = 0; i < OH; ++i) {
      // The window's rows inside the input: [iy0, iy1).
      const int64_t iy0 = std::max<int64_t>(i - pt, 0), iy1 = std::min(i - pt + kh, H);
      float* vr = V + i * Wp;
      for (int64_t j = 0; j < j_lo; ++j) vr[j] = 0.0f;
      for (int64_t j = j_hi; j < Wp; ++j) vr[j] = 0.0f;
      const float* xr = xc + iy0 * W;
      for (int64_t j = 0; j < W; j += 16) {
        const __mmask16 m = mask(W - j);
        __m512 acc = _mm512_maskz_loadu_ps(m, xr + j);
        for (int64_t r = 1; r < iy1 - iy0; ++r)
          acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(m, xr + r * W + j));
        _mm512_mask_storeu_ps(vr + pl + j, m, acc);
      }
    }
    // The last row's loads run up to 15 + kw - 1 columns past V's end: zeros there.
    for (int64_t j = 0; j < 16 + kw; ++j) V[OH * Wp + j] = 0.0f;
    for (int64_t i = 0; i < OH; ++i) {
      const int64_t r0 = std::max(i, pt), r1 = std::min(i + kh, pt + H);  // padded rows
      const float* vr = V + i * Wp;
      const float* dv = divs + (r1 - r0 - 1) * OWv;
      const float* rv = divs + (kh + r1 - r0 - 1) * OWv;
      float* yr = yc + i * OW;
      for (int64_t o = 0; o < OW; o += 16) {
        // Full loads stay inside V (kw - 1 columns of slack past its last row).
        __m512 acc = _mm512_loadu_ps(vr + o);
        for (int64_t t = 1; t < kw; ++t) acc = _mm512_add_ps(acc, _mm512_loadu_ps(vr + o + t));
        // acc / d without a division (a zmm division takes 10-20 cycles on some cores, and
        // was most of the kernel's time): q0 = acc * (1 / d) is within an ulp, the remainder
        // acc - q0 * d is exact in an FMA, and q0 + remainder / d rounded once is the
        // correctly rounded quotient (Markstein's correction; checked against the division
        // for every float significand of two binades with divisors 1-200 and some up to 4096,
        // no difference). Lanes where the steps would not hold (infinities, NaN, -0,
        // magnitudes below 2^-100, where the remainder would be subnormal) take the division.
        const __m512 d = _mm512_loadu_ps(dv + o), r = _mm512_loadu_ps(rv + o);
        const __m512 q0 = _mm512_mul_ps(acc, r);
        __m512 q = _mm512_fmadd_ps(_mm512_fnmadd_ps(q0, d, acc), r, q0);
        const __m512 ax = _mm512_castsi512_ps(_mm512_andnot_si512(sign, _mm512_castps_si512(acc)));
        const __mmask16 neg = _mm512_test_epi32_mask(_mm512_castps_si512(acc), sign);
        const __mmask16 ok = _mm512_cmp_ps_mask(ax, inf, _CMP_LT_OQ) &
                             (_mm512_cmp_ps_mask(ax, tiny, _CMP_GE_OQ) |
                              (_mm512_cmp_ps_mask(ax, _mm512_setzero_ps(), _CMP_EQ_OQ) & ~neg));
        const __mmask16 m = mask(OW - o);
        if ((ok & m) != m) q = _mm512_div_ps(acc, d);
        if (o + 16 <= OW)
          _mm512_storeu_ps(yr + o, q);
        else
          _mm512_mask_storeu_ps(yr + o, mask(OW - o), q);
      }
    }
  }
  if (kMax && hit) max_pool_nan_windows(g, x, y, c0 * g.out_size, c1 * g.out_size);
}
#pragma GCC diagnostic pop
#endif

// Whether pool_2x2s2_avx512 takes the geometry, on this CPU.
bool pool_2x2s2_ok(const Geo3& g) {
  return max_pool_avx512_cpu() && g.k[0] == 1 && g.in[0] == 1 && g.k[1] == 2 && g.k[2] == 2 &&
         g.s[1] == 2 && g.s[2] == 2 && g.d[1] == 1 && g.d[2] == 1 && g.pb[1] == 0 && g.pb[2] == 0 &&
         g.pe[1] == 0 && g.pe[2] == 0 && g.out[1] == g.in[1] / 2 && g.out[2] == g.in[2] / 2 &&
         g.out[1] > 0 && g.out[2] > 0;
}

// Whether max_pool_3x3s2_avx512 takes the geometry, on this CPU.
bool max_pool_3x3s2_ok(const Geo3& g) {
  return max_pool_avx512_cpu() && g.k[0] == 1 && g.in[0] == 1 && g.k[1] == 3 && g.k[2] == 3 &&
         g.s[1] == 2 && g.s[2] == 2 && g.d[1] == 1 && g.d[2] == 1 && g.pb[1] <= 2 && g.pb[2] <= 2 &&
         g.out[1] > 0 && g.out[2] > 0;
}

// Whether pool_s1_avx512 takes the geometry, on this CPU.
bool pool_s1_ok(const Geo3& g) {
  return max_pool_avx512_cpu() && g.k[0] == 1 && g.in[0] == 1 && g.s[1] == 1 && g.s[2] == 1 &&
         g.d[1] == 1 && g.d[2] == 1 && g.k[1] >= 1 && g.k[2] >= 1 && g.pb[1] < g.k[1] &&
         g.pe[1] < g.k[1] && g.pb[2] < g.k[2] && g.pe[2] < g.k[2] && g.out[1] > 0 && g.out[2] > 0 &&
         g.out[1] == g.in[1] + g.pb[1] + g.pe[1] - g.k[1] + 1 &&
         g.out[2] == g.in[2] + g.pb[2] + g.pe[2] - g.k[2] + 1;
}

// pool_s1_avx512 over the channels, in parallel (pool_s1_ok(g) holds).
template <bool kMax>
void pool_s1(const Geo3& g, const float* x, float* y, int64_t channels, bool include_pad,
             ThreadPool* pool) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  const int64_t Wp = g.out[2] + g.k[2] - 1, Hp = g.out[1] + g.k[1] - 1;
  const size_t need = static_cast<size_t>((Hp + g.out[1]) * Wp + g.k[2] + 64);
  parallel_for(pool, channels, static_cast<double>(g.out_size * (g.k[1] + g.k[2])),
               [&](int64_t cb, int64_t ce) {
                 thread_local std::vector<float> buf;
                 if (buf.size() < need) buf.resize(need);
                 pool_s1_avx512<kMax>(g, x, y, cb, ce, include_pad, buf.data());
               });
#else
  (void)g, (void)x, (void)y, (void)channels, (void)include_pad, (void)pool;
#endif
}

// A window that is the whole input, unpadded (a classifier's 7x7 pool over a 7x7 map):
// one output a channel, reduced flat as the global pools do.
bool whole_window(const Geo3& g) {
  for (int i = 0; i < 3; ++i)
    if (g.out[i] != 1 || g.k[i] != g.in[i] || g.pb[i] != 0 || g.pe[i] != 0 || g.d[i] != 1)
      return false;
  return true;
}

// The maximum of the non-NaN values of x[0, n), NaN when there is none. The global max
// reductions seed with x[0] and never let a later NaN win, so they come out NaN only when
// x[0] is; such a channel is read again here (onnxruntime's GlobalMaxPool and onnx's MaxPool
// skip NaN inputs).
template <typename T>
T max_skip_nan(const T* x, int64_t n) {
  T r = std::numeric_limits<T>::quiet_NaN();
  for (int64_t i = 0; i < n; ++i)
    if (x[i] == x[i] && !(x[i] <= r)) r = x[i];
  return r;
}

template <typename T, typename Acc>
void global_pool(bool is_max, const T* x, T* y, int64_t channels, int64_t size, ThreadPool* pool) {
  if (size == 1) {  // 1x1 planes: the input (a call a channel took 12 ns: 1024 channels 0.79x)
    std::memcpy(y, x, static_cast<size_t>(channels) * sizeof(T));
    return;
  }
  // Split over the threads from a quarter of the general threshold's size: the input is
  // usually the output of a layer split over the channels, and the thread that reads the
  // channels another core wrote waits on that core's cache (MobileNetV2's 1280 x 7 x 7 at 2
  // threads: 18 us on one thread, as against 12 us at 1 thread; 10 us split).
  parallel_for(pool, channels, 4.0 * static_cast<double>(size), [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      const T* xc = x + c * size;
      if constexpr (std::is_same_v<T, float>) {
        const float r = reduce_f32(is_max, xc, size);
        y[c] = is_max || size == 0 ? r : r / static_cast<float>(size);
        if (is_max && r != r) y[c] = max_skip_nan(xc, size);
        continue;
      }
      if (is_max) {
        T best = size > 0 ? xc[0] : T(0);
        for (int64_t i = 1; i < size; ++i)
          if (xc[i] > best) best = xc[i];
        y[c] = best != best ? max_skip_nan(xc, size) : best;
      } else {
        Acc sum = 0;
        for (int64_t i = 0; i < size; ++i) sum += static_cast<Acc>(xc[i]);
        y[c] = size > 0 ? static_cast<T>(sum / static_cast<Acc>(size)) : T(0);
      }
    }
  });
}

// whole_window pools of floats: the global pools' reduction (NaN rule included). Through the
// row kernels a 7x7 window over 512 channels took 24 us, 2.4x onnxruntime's time.
void whole_window_pool(bool is_max, const float* x, float* y, int64_t channels, int64_t size,
                       ThreadPool* pool) {
  global_pool<float, float>(is_max, x, y, channels, size, pool);
}

template <typename T>
void max_pool(const Geo3& g, const T* x, T* y, int64_t* ind, int64_t channels,
              int64_t storage_order, ThreadPool* pool) {
  if (std::is_same_v<T, float> && !ind && whole_window(g)) {
    whole_window_pool(true, reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y),
                      channels, g.in_size, pool);
  } else if (ind) {
    max_pool_indices<T>(g, x, y, ind, channels, storage_order, pool);
  } else if (std::is_same_v<T, float> && pool_small_first(g, channels)) {
    pool_small(g, true, 0, reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), channels,
               pool);
  } else if (std::is_same_v<T, float> && pool_2x2s2_ok(g)) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    const float* xf = reinterpret_cast<const float*>(x);
    float* yf = reinterpret_cast<float*>(y);
    parallel_for(pool, channels * g.out[1], 4.0 * static_cast<double>(g.out[2]),
                 [&](int64_t rb, int64_t re) { pool_2x2s2_avx512<true>(g, xf, yf, rb, re); });
#endif
  } else if (std::is_same_v<T, float> && max_pool_3x3s2_ok(g)) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    const float* xf = reinterpret_cast<const float*>(x);
    float* yf = reinterpret_cast<float*>(y);
    const size_t need = static_cast<size_t>(kPoolGroup * max_pool_3x3s2_width(g));
    parallel_for(pool, channels * g.out[1], 4.0 * static_cast<double>(g.in[2]),
                 [&](int64_t rb, int64_t re) {
                   thread_local std::vector<float> buf;
                   if (buf.size() < need) buf.resize(need);
                   max_pool_3x3s2_avx512(g, xf, yf, rb, re, buf.data());
                 });
#endif
  } else if (std::is_same_v<T, float> && pool_small_ok(g, channels) &&
             (!pool_s1_ok(g) || pool_small_over_s1(g, channels, pool))) {
    pool_small(g, true, 0, reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), channels,
               pool);
  } else if (std::is_same_v<T, float> && pool_s1_ok(g)) {
    pool_s1<true>(g, reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), channels,
                  false, pool);
  } else if (std::is_same_v<T, float> && pool2d_fast_ok(g)) {
    pool2d_f32(g, true, 0, reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), channels,
               pool);
  } else {
    pool_rows<T, T, true>(g, x, y, channels, false, false, pool);
    max_pool_nan_windows(g, x, y, 0, channels * g.out_size);
  }
}

template <typename T, typename Acc>
void avg_pool(const Geo3& g, const T* x, T* y, int64_t channels, bool include_pad,
              bool clip_divisor, ThreadPool* pool) {
  if constexpr (std::is_same_v<T, float>) {
    if (whole_window(g)) return whole_window_pool(false, x, y, channels, g.in_size, pool);
    if (pool_small_first(g, channels))
      return pool_small(g, false, include_pad ? (clip_divisor ? 2 : 1) : 0, x, y, channels, pool);
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    if (pool_2x2s2_ok(g)) {
      parallel_for(pool, channels * g.out[1], 4.0 * static_cast<double>(g.out[2]),
                   [&](int64_t rb, int64_t re) { pool_2x2s2_avx512<false>(g, x, y, rb, re); });
      return;
    }
#endif
    if (pool_small_ok(g, channels) && (!pool_s1_ok(g) || pool_small_over_s1(g, channels, pool)))
      return pool_small(g, false, include_pad ? (clip_divisor ? 2 : 1) : 0, x, y, channels, pool);
    if (pool_s1_ok(g)) return pool_s1<false>(g, x, y, channels, include_pad, pool);
    if (pool2d_fast_ok(g))
      return pool2d_f32(g, false, include_pad ? (clip_divisor ? 2 : 1) : 0, x, y, channels, pool);
  }
  pool_rows<T, Acc, false>(g, x, y, channels, include_pad, clip_divisor, pool);
}

enum class Kind { kMax, kAverage };

class Pool final : public Kernel {
 public:
  Pool(const KernelInfo& info, Kind kind, bool global)
      : kind_(kind), global_(global), opset_(info.opset()) {
    if (!global_) attrs_.load(info, kind_ == Kind::kMax);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = ctx.required_input(0);
    check_pool_input(ctx, X, global_);
    const DataType dt = X.dtype();
    const bool is_max = kind_ == Kind::kMax;
    const bool ok_type = dt == DataType::kFloat || dt == DataType::kDouble ||
                         dt == DataType::kFloat16 || dt == DataType::kBFloat16 ||
                         (is_max && !global_ && (dt == DataType::kInt8 || dt == DataType::kUInt8));
    if (!ok_type)
      ctx.fail(StatusCode::kNotImplemented,
               std::string("element type ") + dtype_name(dt) + " is not supported");
    const int64_t channels = X.dim(0) * X.dim(1);
    const std::vector<int64_t> in(X.shape().begin() + 2, X.shape().end());
    ThreadPool* pool = ctx.thread_pool();

    if (global_) {
      Shape ys{X.dim(0), X.dim(1)};
      ys.resize(X.rank(), 1);
      Tensor& Y = ctx.allocate_output(0, dt, ys);
      if (Y.numel() == 0) return;
      int64_t size = 1;
      for (int64_t v : in) size *= v;
      switch (dt) {
        case DataType::kFloat:
          return global_pool<float, float>(is_max, X.data<float>(), Y.data<float>(), channels, size,
                                           pool);
        case DataType::kDouble:
          return global_pool<double, double>(is_max, X.data<double>(), Y.data<double>(), channels,
                                             size, pool);
        default: {
          std::vector<float> x(static_cast<size_t>(X.numel())), y(static_cast<size_t>(channels));
          convert_to_float(dt, X.raw_data(), x.data(), X.numel());
          global_pool<float, float>(is_max, x.data(), y.data(), channels, size, pool);
          convert_from_float(dt, y.data(), Y.raw_data(), Y.numel());
          return;
        }
      }
    }

    const SpatialGeometry sg = pool_geometry(ctx, attrs_.spatial, in, attrs_.ceil_mode);
    Shape ys{X.dim(0), X.dim(1)};
    ys.insert(ys.end(), sg.out.begin(), sg.out.end());
    Tensor& Y = ctx.allocate_output(0, dt, ys);
    int64_t* ind = nullptr;
    if (is_max && ctx.num_outputs() > 1 && !ctx.node().outputs[1].empty())
      ind = ctx.allocate_output(1, DataType::kInt64, ys).data<int64_t>();
    if (Y.numel() == 0) return;
    const Geo3 g = to_geo3(sg);
    if (is_max) {
      switch (dt) {
        case DataType::kFloat:
          return max_pool<float>(g, X.data<float>(), Y.data<float>(), ind, channels,
                                 attrs_.storage_order, pool);
        case DataType::kDouble:
          return max_pool<double>(g, X.data<double>(), Y.data<double>(), ind, channels,
                                  attrs_.storage_order, pool);
        case DataType::kInt8:
          return max_pool<int8_t>(g, X.data<int8_t>(), Y.data<int8_t>(), ind, channels,
                                  attrs_.storage_order, pool);
        case DataType::kUInt8:
          return max_pool<uint8_t>(g, X.data<uint8_t>(), Y.data<uint8_t>(), ind, channels,
                                   attrs_.storage_order, pool);
        default: {
          std::vector<float> x(static_cast<size_t>(X.numel())), y(static_cast<size_t>(Y.numel()));
          convert_to_float(dt, X.raw_data(), x.data(), X.numel());
          max_pool<float>(g, x.data(), y.data(), ind, channels, attrs_.storage_order, pool);
          convert_from_float(dt, y.data(), Y.raw_data(), Y.numel());
          return;
        }
      }
    }
    const bool clip = opset_ >= 19;
    switch (dt) {
      case DataType::kFloat:
        return avg_pool<float, float>(g, X.data<float>(), Y.data<float>(), channels,
                                      attrs_.count_include_pad, clip, pool);
      case DataType::kDouble:
        return avg_pool<double, double>(g, X.data<double>(), Y.data<double>(), channels,
                                        attrs_.count_include_pad, clip, pool);
      default: {
        std::vector<float> x(static_cast<size_t>(X.numel())), y(static_cast<size_t>(Y.numel()));
        convert_to_float(dt, X.raw_data(), x.data(), X.numel());
        avg_pool<float, float>(g, x.data(), y.data(), channels, attrs_.count_include_pad, clip,
                               pool);
        convert_from_float(dt, y.data(), Y.raw_data(), Y.numel());
        return;
      }
    }
  }

 private:
  Kind kind_;
  bool global_;
  int64_t opset_;
  PoolAttrs attrs_;
};

template <Kind K, bool Global>
KernelFactory pool_factory() {
  return [](const KernelInfo& info) -> std::unique_ptr<Kernel> {
    return std::make_unique<Pool>(info, K, Global);
  };
}

}  // namespace

bool max_pool_avx512_cpu() {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  static const bool cpu = fast_isa_cap() >= 2 && __builtin_cpu_supports("avx512f");
  return cpu;
#else
  return false;
#endif
}

void register_pool(KernelRegistry& r) {
  // MaxPool: 8 adds Indices + storage_order, 10 dilations + ceil_mode, 11 pads doc,
  // 12 int8/uint8, 22 bfloat16.
  r.add("", "MaxPool", 1, 7, pool_factory<Kind::kMax, false>());
  r.add("", "MaxPool", 8, 9, pool_factory<Kind::kMax, false>());
  r.add("", "MaxPool", 10, 10, pool_factory<Kind::kMax, false>());
  r.add("", "MaxPool", 11, 11, pool_factory<Kind::kMax, false>());
  r.add("", "MaxPool", 12, 21, pool_factory<Kind::kMax, false>());
  r.add("", "MaxPool", 22, kMaxOpset, pool_factory<Kind::kMax, false>());
  // AveragePool: 7 count_include_pad, 10 ceil_mode, 11 pads doc, 19 dilations, 22 bfloat16.
  r.add("", "AveragePool", 1, 6, pool_factory<Kind::kAverage, false>());
  r.add("", "AveragePool", 7, 9, pool_factory<Kind::kAverage, false>());
  r.add("", "AveragePool", 10, 10, pool_factory<Kind::kAverage, false>());
  r.add("", "AveragePool", 11, 18, pool_factory<Kind::kAverage, false>());
  r.add("", "AveragePool", 19, 21, pool_factory<Kind::kAverage, false>());
  r.add("", "AveragePool", 22, kMaxOpset, pool_factory<Kind::kAverage, false>());
  r.add("", "GlobalMaxPool", 1, 21, pool_factory<Kind::kMax, true>());
  r.add("", "GlobalMaxPool", 22, kMaxOpset, pool_factory<Kind::kMax, true>());
  r.add("", "GlobalAveragePool", 1, 21, pool_factory<Kind::kAverage, true>());
  r.add("", "GlobalAveragePool", 22, kMaxOpset, pool_factory<Kind::kAverage, true>());
}

}  // namespace nn
}  // namespace ortlite
