#include "providers/cpu/reduce/reduce_simd.h"

#include <cstdint>
#include <cmath>
#include <cstring>
#include <algorithm>
#include <limits>
#include <numeric>
#include <type_traits>
#include <utility>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#include "compute/simd.h"

namespace ortlite {
namespace reduce {
namespace simd {

namespace {

using nn::load_wide;
using nn::v8df;
typedef int64_t v8di __attribute__((vector_size(64)));

enum Term { kPlain, kSquare, kAbs };

template <Term kTerm>
ORTLITE_NN_INLINE double term(double v) {
  if constexpr (kTerm == kSquare) return v * v;
  if constexpr (kTerm == kAbs) return std::fabs(v);  // not a branch (mispredicted on signs)
  return v;
}

// Vectors are passed by reference: passing 64-byte vectors by value changes the ABI
// between the clones.
template <Term kTerm, typename T>
ORTLITE_NN_INLINE void add_term8(v8df& acc, const T* p) {
  v8df v;
  load_wide(p, v);
  if constexpr (kTerm == kSquare) v = v * v;
  if constexpr (kTerm == kAbs) {
    const v8di mask = ~(v8di{} + (int64_t{1} << 63));
    v = reinterpret_cast<v8df>(reinterpret_cast<v8di>(v) & mask);
  }
  acc += v;
}

// Four 8-lane double accumulators over blocks of 32, one over the blocks of 8 that remain,
// then the scalar tail.
template <Term kTerm, typename T>
ORTLITE_NN_INLINE double sum_body(const T* x, int64_t n) {
  v8df a0 = {}, a1 = {}, a2 = {}, a3 = {};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    add_term8<kTerm>(a0, x + i);
    add_term8<kTerm>(a1, x + i + 8);
    add_term8<kTerm>(a2, x + i + 16);
    add_term8<kTerm>(a3, x + i + 24);
  }
  for (; i + 8 <= n; i += 8) add_term8<kTerm>(a0, x + i);
  const v8df a = (a0 + a1) + (a2 + a3);
  double s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  for (; i < n; ++i) s += term<kTerm>(static_cast<double>(x[i]));
  return s;
}

// kVB-byte vectors of T: 64 for AVX-512, 32 for AVX2, 16 for SSE2. Each ISA gets its own
// width: GCC splits a vector wider than the ISA's registers element by element where it
// selects (`v > m ? v : m`), which made the AVX2 build of a 64-byte ReduceMax 10-16x slower
// than onnxruntime's.
template <typename T, int kVB>
struct Vec;
#define ORTLITE_REDUCE_VEC(T, B)                                   \
  template <>                                                      \
  struct Vec<T, B> {                                               \
    typedef T v __attribute__((vector_size(B)));                   \
    static constexpr int kLanes = B / static_cast<int>(sizeof(T)); \
  };
ORTLITE_REDUCE_VEC(float, 64)
ORTLITE_REDUCE_VEC(float, 32)
ORTLITE_REDUCE_VEC(float, 16)
ORTLITE_REDUCE_VEC(double, 64)
ORTLITE_REDUCE_VEC(double, 32)
ORTLITE_REDUCE_VEC(double, 16)
#undef ORTLITE_REDUCE_VEC

// out = v rotated down by H lanes (lane l of out is lane (l + H) % W of v).
template <int H, typename V, size_t... I>
ORTLITE_NN_INLINE void rotate_lanes(const V& v, V& out, std::index_sequence<I...>) {
  out = __builtin_shufflevector(v, v, static_cast<int>((I + H) % sizeof...(I))...);
}

// Lane 0 of m becomes the max (kMax) or min of its W lanes, lane 0 of z their sum: in
// halves, by rotations (a fold through memory stalled on store forwarding).
template <bool kMax, int H, int W, typename V>
ORTLITE_NN_INLINE void fold_lanes(V& m, V& z) {
  if constexpr (H >= 1) {
    V r;
    rotate_lanes<H>(m, r, std::make_index_sequence<W>{});
    m = kMax ? (r > m ? r : m) : (r < m ? r : m);
    rotate_lanes<H>(z, r, std::make_index_sequence<W>{});
    z += r;
    fold_lanes<kMax, H / 2, W>(m, z);
  }
}

// Max (kMax) or min of x[0..n), n >= 1: two vector accumulators seeded with the first
// vector, the last vector loaded over the end of the one before (picking an element twice
// changes nothing), then the lanes folded in halves. NaNs are detected by summing x - x (0
// for finite x, NaN for NaN and infinities, so the rare infinity only costs a rescan); a
// NaN anywhere returns the first one. Rows of 77 spent most of their time in the scalar
// tail and a lane-by-lane fold, each step waiting on the one before (0.44 of onnxruntime).
template <bool kMax, typename T, int kVB>
ORTLITE_NN_INLINE T extremum_body(const T* x, int64_t n) {
  using V = typename Vec<T, kVB>::v;
  constexpr int W = Vec<T, kVB>::kLanes;
  // The first NaN, else r (the sum of x - x was NaN from an infinity).
  const auto first_nan_or = [x, n](T r) {
    for (int64_t j = 0; j < n; ++j)
      if (x[j] != x[j]) return x[j];
    return r;
  };
  if (n < W) {
    T r = x[0];
    bool any_nan = false;
    for (int64_t i = 0; i < n; ++i) {
      const T v = x[i];
      any_nan = any_nan || v != v;
      r = kMax ? (v > r ? v : r) : (v < r ? v : r);
    }
    return any_nan ? first_nan_or(r) : r;
  }
  V m0, m1, v0, v1;
  std::memcpy(&m0, x, sizeof(V));
  m1 = m0;
  V z0 = m0 - m0, z1 = {};
  int64_t i = W;
  for (; i + 2 * W <= n; i += 2 * W) {
    std::memcpy(&v0, x + i, sizeof(V));
    std::memcpy(&v1, x + i + W, sizeof(V));
    m0 = kMax ? (v0 > m0 ? v0 : m0) : (v0 < m0 ? v0 : m0);
    m1 = kMax ? (v1 > m1 ? v1 : m1) : (v1 < m1 ? v1 : m1);
    z0 += v0 - v0;
    z1 += v1 - v1;
  }
  for (; i < n; i += W) {
    std::memcpy(&v0, x + std::min(i, n - W), sizeof(V));
    m0 = kMax ? (v0 > m0 ? v0 : m0) : (v0 < m0 ? v0 : m0);
    z0 += v0 - v0;
  }
  m0 = kMax ? (m1 > m0 ? m1 : m0) : (m1 < m0 ? m1 : m0);
  z0 += z1;
  fold_lanes<kMax, W / 2, W>(m0, z0);
  return z0[0] != z0[0] ? first_nan_or(m0[0]) : m0[0];
}

#if defined(__GNUC__) && defined(__x86_64__)
// sum_body over float with AVX-512 intrinsics: GCC splits the generic 8-lane float -> double
// conversion into two halves. Same lanes and order of additions as sum_body.
template <Term kTerm>
__attribute__((target("avx512f"), always_inline)) inline void add_term_avx512(__m512d& acc,
                                                                              const float* p) {
  __m512d v = _mm512_maskz_cvtps_pd(
      0xFF, _mm256_loadu_ps(p));  // (maskz: GCC 12 warns on the unmasked form)
  if constexpr (kTerm == kSquare) v = _mm512_mul_pd(v, v);
  if constexpr (kTerm == kAbs)
    v = _mm512_castsi512_pd(_mm512_and_epi64(_mm512_castpd_si512(v), _mm512_set1_epi64(INT64_MAX)));
  acc = _mm512_add_pd(acc, v);
}

template <Term kTerm>
__attribute__((target("avx512f"))) double sum_f32_avx512(const float* x, int64_t n) {
  __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    add_term_avx512<kTerm>(a0, x + i);
    add_term_avx512<kTerm>(a1, x + i + 8);
    add_term_avx512<kTerm>(a2, x + i + 16);
    add_term_avx512<kTerm>(a3, x + i + 24);
  }
  for (; i + 8 <= n; i += 8) add_term_avx512<kTerm>(a0, x + i);
  double a[8];
  _mm512_storeu_pd(a, _mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3)));
  double s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  for (; i < n; ++i) s += term<kTerm>(static_cast<double>(x[i]));
  return s;
}

bool has_avx512f() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return has;
}
#endif

ORTLITE_NN_CLONES double sum_f32_generic(const float* x, int64_t n) {
  return sum_body<kPlain>(x, n);
}
ORTLITE_NN_CLONES double sum_sq_f32_generic(const float* x, int64_t n) {
  return sum_body<kSquare>(x, n);
}
ORTLITE_NN_CLONES double sum_abs_f32_generic(const float* x, int64_t n) {
  return sum_body<kAbs>(x, n);
}

}  // namespace

double sum_f32(const float* x, int64_t n) {
#if defined(__GNUC__) && defined(__x86_64__)
  if (has_avx512f()) return sum_f32_avx512<kPlain>(x, n);
#endif
  return sum_f32_generic(x, n);
}
double sum_sq_f32(const float* x, int64_t n) {
#if defined(__GNUC__) && defined(__x86_64__)
  if (has_avx512f()) return sum_f32_avx512<kSquare>(x, n);
#endif
  return sum_sq_f32_generic(x, n);
}
double sum_abs_f32(const float* x, int64_t n) {
#if defined(__GNUC__) && defined(__x86_64__)
  if (has_avx512f()) return sum_f32_avx512<kAbs>(x, n);
#endif
  return sum_abs_f32_generic(x, n);
}
namespace {

// Strips of 64 columns keep their sums in eight 8-lane registers down all the rows; then
// strips of 8, then single columns.
// Fewer than 8 columns in contiguous rows [rows][n] as a flat array: V vectors (lcm(n, 8)
// doubles) a step, rows_per rows, lane l of vector j always column (8 j + l) mod n. Taken
// from two groups of rows (with one, setting it up cost more than it saved).
struct LaneGroups {
  int64_t V, rows_per;
  explicit LaneGroups(int64_t n) : V(n / std::gcd(n, int64_t{8})), rows_per(8 * V / n) {}
};
// acc[column] += each lane of a[0..g.V).
ORTLITE_NN_INLINE void fold_lane_groups(const LaneGroups& g, const v8df* a, int64_t n,
                                        double* acc) {
  int64_t col = 0;
  for (int64_t j = 0; j < g.V; ++j) {
    double t[8];
    std::memcpy(t, &a[j], sizeof(t));
    for (int l = 0; l < 8; ++l, col = col + 1 == n ? 0 : col + 1) acc[col] += t[l];
  }
}

// add_column_chunks' body: n < 8 columns, chunks of rows x n contiguous values; the lane
// groups of add_columns_body held across all the chunks (a call a chunk set them up and
// folded them each time: [77, 77, 16, 4] over axes 0 and 2 at 0.5 of onnxruntime's speed).
template <ColTerm kTerm, typename T>
ORTLITE_NN_INLINE void add_column_chunks_body(const T* x, const int64_t* offs, int64_t chunks,
                                              int64_t rows, double* acc, int64_t n) {
  constexpr Term kT = kTerm == ColTerm::kSquare ? kSquare : kTerm == ColTerm::kAbs ? kAbs : kPlain;
  const LaneGroups g(n);
  const int64_t full = rows / g.rows_per * g.rows_per;
  v8df a[7];
  for (int64_t j = 0; j < g.V; ++j) a[j] = v8df{};
  for (int64_t c = 0; c < chunks; ++c) {
    const T* p = x + offs[c];
    for (int64_t r = 0; r < full; r += g.rows_per, p += 8 * g.V)
      for (int64_t j = 0; j < g.V; ++j) add_term8<kT>(a[j], p + 8 * j);
    for (int64_t r = full; r < rows; ++r, p += n)
      for (int64_t i = 0; i < n; ++i) acc[i] += term<kT>(static_cast<double>(p[i]));
  }
  fold_lane_groups(g, a, n, acc);
}

template <ColTerm kTerm, typename T>
ORTLITE_NN_INLINE void add_columns_body(const T* x, int64_t stride, int64_t rows, double* acc,
                                        int64_t n) {
  constexpr Term kT = kTerm == ColTerm::kSquare ? kSquare : kTerm == ColTerm::kAbs ? kAbs : kPlain;
  if (n < 8 && stride == n) {
    // LaneGroups: column by column, each addition waited on the one before (3 columns:
    // 0.74 of onnxruntime's speed).
    const LaneGroups g(n);
    if (rows >= 2 * g.rows_per) {
      v8df a[7];
      for (int64_t j = 0; j < g.V; ++j) a[j] = v8df{};
      int64_t r = 0;
      for (; r + g.rows_per <= rows; r += g.rows_per, x += 8 * g.V)
        for (int64_t j = 0; j < g.V; ++j) add_term8<kT>(a[j], x + 8 * j);
      fold_lane_groups(g, a, n, acc);
      rows -= r;
    }
  }
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    v8df a[8];
    std::memcpy(a, acc + i, sizeof(a));
    const T* p = x + i;
    for (int64_t r = 0; r < rows; ++r, p += stride)
      for (int j = 0; j < 8; ++j) add_term8<kT>(a[j], p + 8 * j);
    std::memcpy(acc + i, a, sizeof(a));
  }
  for (; i + 8 <= n; i += 8) {
    v8df a;
    std::memcpy(&a, acc + i, sizeof(a));
    const T* p = x + i;
    for (int64_t r = 0; r < rows; ++r, p += stride) add_term8<kT>(a, p);
    std::memcpy(acc + i, &a, sizeof(a));
  }
  for (; i < n; ++i) {
    double a = acc[i];
    for (int64_t r = 0; r < rows; ++r) a += term<kT>(static_cast<double>(x[r * stride + i]));
    acc[i] = a;
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
#pragma GCC diagnostic push
// GCC 12's AVX-512 headers start some intrinsics from an undefined vector.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// NV vectors of 8 columns down `rows` rows into acc, the last vector's lanes `tail`.
template <Term kT, int NV>
__attribute__((target("avx512f"))) void add_last_columns_avx512(const float* x, int64_t stride,
                                                                int64_t rows, double* acc,
                                                                __mmask16 tail) {
  __m512d a[NV];
#pragma GCC unroll 4
  for (int j = 0; j < NV; ++j)
    a[j] = _mm512_maskz_loadu_pd(
        j + 1 < NV ? static_cast<__mmask8>(0xFF) : static_cast<__mmask8>(tail), acc + 8 * j);
  for (int64_t r = 0; r < rows; ++r, x += stride) {
#pragma GCC unroll 4
    for (int j = 0; j + 1 < NV; ++j) add_term_avx512<kT>(a[j], x + 8 * j);
    __m512d v = _mm512_maskz_cvtps_pd(
        0xFF, _mm512_castps512_ps256(_mm512_maskz_loadu_ps(tail, x + 8 * (NV - 1))));
    if constexpr (kT == kSquare) v = _mm512_mul_pd(v, v);
    if constexpr (kT == kAbs)
      v = _mm512_castsi512_pd(
          _mm512_and_epi64(_mm512_castpd_si512(v), _mm512_set1_epi64(INT64_MAX)));
    a[NV - 1] = _mm512_add_pd(a[NV - 1], v);
  }
#pragma GCC unroll 4
  for (int j = 0; j < NV; ++j)
    _mm512_mask_storeu_pd(
        acc + 8 * j, j + 1 < NV ? static_cast<__mmask8>(0xFF) : static_cast<__mmask8>(tail), a[j]);
}

// add_columns_body over float with AVX-512 intrinsics (the generic conversion is split in
// two, see sum_f32_avx512); the same additions.
template <ColTerm kTerm>
__attribute__((target("avx512f"))) void add_columns_f32_avx512(const float* x, int64_t stride,
                                                               int64_t rows, double* acc,
                                                               int64_t n) {
  constexpr Term kT = kTerm == ColTerm::kSquare ? kSquare : kTerm == ColTerm::kAbs ? kAbs : kPlain;
  int64_t i = 0;
  for (; i + 128 <= n; i += 128) {
    __m512d a[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) a[j] = _mm512_loadu_pd(acc + i + 8 * j);
    const float* p = x + i;
    for (int64_t r = 0; r < rows; ++r, p += stride) {
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) add_term_avx512<kT>(a[j], p + 8 * j);
    }
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) _mm512_storeu_pd(acc + i + 8 * j, a[j]);
  }
  for (; i + 32 <= n; i += 32) {
    __m512d a[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) a[j] = _mm512_loadu_pd(acc + i + 8 * j);
    const float* p = x + i;
    for (int64_t r = 0; r < rows; ++r, p += stride) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) add_term_avx512<kT>(a[j], p + 8 * j);
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) _mm512_storeu_pd(acc + i + 8 * j, a[j]);
  }
  if (i == n) return;
  // The last (fewer than 32) columns in one pass down the rows: up to four vectors, the
  // last masked, each an independent chain of additions (a vector, then a scalar loop a
  // column, each waiting on its own additions, left [197, 256, 12] over 256 at 0.8 of
  // onnxruntime's speed). Each column's additions stay in row order.
  const int64_t m = n - i, nv = (m + 7) / 8;
  const __mmask16 tail = static_cast<__mmask16>((1u << (m - 8 * (nv - 1))) - 1);
  switch (nv) {
    case 1:
      return add_last_columns_avx512<kT, 1>(x + i, stride, rows, acc + i, tail);
    case 2:
      return add_last_columns_avx512<kT, 2>(x + i, stride, rows, acc + i, tail);
    case 3:
      return add_last_columns_avx512<kT, 3>(x + i, stride, rows, acc + i, tail);
    default:
      return add_last_columns_avx512<kT, 4>(x + i, stride, rows, acc + i, tail);
  }
}
#pragma GCC diagnostic pop
#endif

#if defined(__GNUC__) && defined(__x86_64__)
#pragma GCC diagnostic push
// GCC 12's AVX-512 headers start some intrinsics from an undefined vector.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// extremum_columns_body over float with AVX-512 intrinsics: four, then one vector of
// columns at a time go down all the rows with their state in registers, the last columns in
// a masked vector. In the generic body the state went through acc, each row's load waiting
// for the previous row's store: [197, 256, 16] over 256 ran at 0.31 of onnxruntime's speed.
// The same selection: max(v, a) is v > a ? v : a (a where either is NaN), then a NaN v wins.
template <bool kMax>
__attribute__((target("avx512f"))) inline __attribute__((always_inline)) __m512 extremum_step(
    __m512 a, __m512 v) {
  const __m512 m = kMax ? _mm512_max_ps(v, a) : _mm512_min_ps(v, a);
  return _mm512_mask_mov_ps(m, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v);
}
template <bool kMax>
__attribute__((target("avx512f"))) void extremum_columns_f32_avx512(const float* x, int64_t stride,
                                                                    int64_t rows, float* acc,
                                                                    int64_t n) {
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512 a[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) a[j] = _mm512_loadu_ps(acc + i + 16 * j);
    const float* p = x + i;
    for (int64_t r = 0; r < rows; ++r, p += stride) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) a[j] = extremum_step<kMax>(a[j], _mm512_loadu_ps(p + 16 * j));
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) _mm512_storeu_ps(acc + i + 16 * j, a[j]);
  }
  for (; i < n; i += 16) {
    // One vector: four accumulators over the rows in turn (one waited on each step's
    // latency), combined with the same step (a NaN in either wins).
    const __mmask16 m =
        n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    __m512 a = _mm512_maskz_loadu_ps(m, acc + i);
    const float* p = x + i;
    int64_t r = 0;
    if (rows >= 8) {
      __m512 b = _mm512_maskz_loadu_ps(m, p), c = _mm512_maskz_loadu_ps(m, p + stride),
             d = _mm512_maskz_loadu_ps(m, p + 2 * stride);
      a = extremum_step<kMax>(a, _mm512_maskz_loadu_ps(m, p + 3 * stride));
      for (r = 4, p += 4 * stride; r + 4 <= rows; r += 4, p += 4 * stride) {
        b = extremum_step<kMax>(b, _mm512_maskz_loadu_ps(m, p));
        c = extremum_step<kMax>(c, _mm512_maskz_loadu_ps(m, p + stride));
        d = extremum_step<kMax>(d, _mm512_maskz_loadu_ps(m, p + 2 * stride));
        a = extremum_step<kMax>(a, _mm512_maskz_loadu_ps(m, p + 3 * stride));
      }
      a = extremum_step<kMax>(a, extremum_step<kMax>(b, extremum_step<kMax>(c, d)));
    }
    for (; r < rows; ++r, p += stride) a = extremum_step<kMax>(a, _mm512_maskz_loadu_ps(m, p));
    _mm512_mask_storeu_ps(acc + i, m, a);
  }
}
// extremum_column_chunks over AVX-512: NV vectors a group of 16 NV / n rows (each vector's
// lane l holds column (16 j + l) % n, NV a multiple of n / gcd(n, 16)), the state in
// registers across all the chunks, the rows after a chunk's last group in masked vectors;
// then each lane into its column's acc, the same step. Through a call a run of rows (or the
// scalar loop below 16 rows) [16, 8, 16, 8, 4] over axes 1 and 3 ran at 0.53 of
// onnxruntime's speed.
template <bool kMax, int NV>
__attribute__((target("avx512f"))) void extremum_column_chunks_f32_avx512(
    const float* x, const int64_t* offs, int64_t chunks, int64_t rows, float* acc, int64_t n) {
  const int64_t per = 16 * NV / n, full = rows / per * per, rem = (rows - full) * n;
  const __m512 id = _mm512_set1_ps(kMax ? -std::numeric_limits<float>::infinity()
                                        : std::numeric_limits<float>::infinity());
  __m512 a[NV];
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j) a[j] = id;
  for (int64_t c = 0; c < chunks; ++c) {
    const float* p = x + offs[c];
    for (int64_t r = 0; r < full; r += per, p += 16 * NV) {
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) a[j] = extremum_step<kMax>(a[j], _mm512_loadu_ps(p + 16 * j));
    }
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) {
      if (16 * j >= rem) break;
      const __mmask16 m = rem - 16 * j >= 16 ? static_cast<__mmask16>(0xFFFF)
                                             : static_cast<__mmask16>((1u << (rem - 16 * j)) - 1);
      a[j] = _mm512_mask_mov_ps(a[j], m,
                                extremum_step<kMax>(a[j], _mm512_maskz_loadu_ps(m, p + 16 * j)));
    }
  }
  int nv = NV;
  if constexpr (NV == 4) {
    // n divides 16: the four vectors into one, then the lanes of a column into its first
    // lanes by halving (lanes l and l + 8, l + 4, l + 2, l + 1 while n is below that).
    __m512 v =
        extremum_step<kMax>(extremum_step<kMax>(a[0], a[1]), extremum_step<kMax>(a[2], a[3]));
    if (n <= 8) v = extremum_step<kMax>(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
    if (n <= 4) v = extremum_step<kMax>(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
    if (n <= 2) v = extremum_step<kMax>(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
    if (n <= 1) v = extremum_step<kMax>(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
    a[0] = v;
    nv = 1;
  }
  int64_t col = 0;
  for (int j = 0; j < nv; ++j) {
    float t[16];
    _mm512_storeu_ps(t, a[j]);
    const int lanes = NV == 4 ? static_cast<int>(n) : 16;
    for (int l = 0; l < lanes; ++l, col = col + 1 == n ? 0 : col + 1) {
      const float v = t[l], prev = acc[col];
      const float m = kMax ? (v > prev ? v : prev) : (v < prev ? v : prev);
      acc[col] = v != v ? v : m;
    }
  }
}
template <bool kMax>
__attribute__((target("avx512f"))) bool extremum_column_chunks_f32(const float* x,
                                                                   const int64_t* offs,
                                                                   int64_t chunks, int64_t rows,
                                                                   float* acc, int64_t n) {
  switch (n / std::gcd(n, int64_t{16})) {
    case 1:  // four vectors: four steps in flight
      extremum_column_chunks_f32_avx512<kMax, 4>(x, offs, chunks, rows, acc, n);
      return true;
    case 3:
      extremum_column_chunks_f32_avx512<kMax, 3>(x, offs, chunks, rows, acc, n);
      return true;
    case 5:
      extremum_column_chunks_f32_avx512<kMax, 5>(x, offs, chunks, rows, acc, n);
      return true;
    case 7:
      extremum_column_chunks_f32_avx512<kMax, 7>(x, offs, chunks, rows, acc, n);
      return true;
    default:
      return false;
  }
}
#pragma GCC diagnostic pop
#endif

template <typename T>
ORTLITE_NN_INLINE void add_columns_any(ColTerm t, const T* x, int64_t stride, int64_t rows,
                                       double* acc, int64_t n) {
  if (t == ColTerm::kSquare)
    add_columns_body<ColTerm::kSquare>(x, stride, rows, acc, n);
  else if (t == ColTerm::kAbs)
    add_columns_body<ColTerm::kAbs>(x, stride, rows, acc, n);
  else
    add_columns_body<ColTerm::kPlain>(x, stride, rows, acc, n);
}

ORTLITE_NN_CLONES void add_columns_f32_generic(ColTerm t, const float* x, int64_t stride,
                                               int64_t rows, double* acc, int64_t n) {
  add_columns_any(t, x, stride, rows, acc, n);
}

// Four 8-lane products over blocks of 32, one over the blocks of 8 left, then the tail.
template <typename T>
ORTLITE_NN_INLINE double prod_body(const T* x, int64_t n) {
  v8df a0 = v8df{} + 1.0, a1 = a0, a2 = a0, a3 = a0, v0, v1, v2, v3;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    load_wide(x + i, v0);
    load_wide(x + i + 8, v1);
    load_wide(x + i + 16, v2);
    load_wide(x + i + 24, v3);
    a0 *= v0;
    a1 *= v1;
    a2 *= v2;
    a3 *= v3;
  }
  for (; i + 8 <= n; i += 8) {
    load_wide(x + i, v0);
    a0 *= v0;
  }
  const v8df a = (a0 * a1) * (a2 * a3);
  double s = ((a[0] * a[1]) * (a[2] * a[3])) * ((a[4] * a[5]) * (a[6] * a[7]));
  for (; i < n; ++i) s *= static_cast<double>(x[i]);
  return s;
}

// exp(t) of 8 doubles: t = k ln2 + r (Cody-Waite, |r| <= ln2 / 2), exp(r) by its Taylor
// series to degree 13 (error below 2^-53 relative), times 2^k applied in two halves so that
// overflow gives inf and underflow 0 (through the subnormals). NaN stays NaN.
ORTLITE_NN_INLINE void exp8(v8df& t) {
  typedef int64_t v8di_t __attribute__((vector_size(64)));
  t = t < -750.0 ? v8df{} - 750.0 : t;  // exp gives 0 / inf from here on; NaN passes
  t = t > 750.0 ? v8df{} + 750.0 : t;
  const v8df magic = v8df{} + 6755399441055744.0;  // 1.5 * 2^52: rounds to an integer
  const v8df kd = t * 1.4426950408889634 + magic;
  const v8df k = kd - magic;
  const v8df r = (t - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
  v8df p = v8df{} + 1.0 / 6227020800.0;  // 1/13!
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  const v8di_t ki = reinterpret_cast<v8di_t>(kd) - reinterpret_cast<v8di_t>(magic);
  const v8di_t k1 = ki >> 1, k2 = ki - k1;  // |k1|, |k2| <= 542: normal powers of 2
  const v8df s1 = reinterpret_cast<v8df>((k1 + 1023) << 52);
  const v8df s2 = reinterpret_cast<v8df>((k2 + 1023) << 52);
  t = (p * s1) * s2;
}

template <typename T>
ORTLITE_NN_INLINE double sum_exp_body(const T* x, int64_t n, double p) {
  v8df a0 = {}, a1 = {}, v0, v1;
  const v8df pv = v8df{} + p;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    load_wide(x + i, v0);
    load_wide(x + i + 8, v1);
    v0 -= pv;
    v1 -= pv;
    exp8(v0);
    exp8(v1);
    a0 += v0;
    a1 += v1;
  }
  if (i + 8 <= n) {
    load_wide(x + i, v0);
    v0 -= pv;
    exp8(v0);
    a0 += v0;
    i += 8;
  }
  if (i < n) {  // the tail as one padded vector: lanes past n add exp(-inf) = 0
    double tail[8];
    for (int l = 0; l < 8; ++l)
      tail[l] =
          i + l < n ? static_cast<double>(x[i + l]) - p : -std::numeric_limits<double>::infinity();
    std::memcpy(&v0, tail, sizeof(v0));
    exp8(v0);
    a1 += v0;
  }
  const v8df a = a0 + a1;
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

// Columns 8 at a time down all the rows, then the rest as one padded vector a row. Fewer
// than 8 columns in contiguous rows ([rows][n]) first go through as a flat array, lcm(n, 8)
// elements (V vectors) a step, each lane always the same column: a padded vector a row did
// one exp8 for n useful lanes (3 columns: 0.34 of onnxruntime's speed).
template <typename T>
ORTLITE_NN_INLINE void add_exp_columns_body(const T* x, int64_t stride, int64_t rows,
                                            const double* p, double* acc, int64_t n) {
  if (n < 8 && stride == n) {
    const LaneGroups g(n);
    if (rows >= 2 * g.rows_per) {
      v8df a[7], pv[7], v;
      int64_t col = 0;
      for (int64_t j = 0; j < g.V; ++j) {
        double t[8];
        for (int l = 0; l < 8; ++l, col = col + 1 == n ? 0 : col + 1) t[l] = p[col];
        std::memcpy(&pv[j], t, sizeof(t));
        a[j] = v8df{};
      }
      int64_t r = 0;
      for (; r + g.rows_per <= rows; r += g.rows_per, x += 8 * g.V) {
        for (int64_t j = 0; j < g.V; ++j) {
          load_wide(x + 8 * j, v);
          v -= pv[j];
          exp8(v);
          a[j] += v;
        }
      }
      fold_lane_groups(g, a, n, acc);
      rows -= r;
    }
  }
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    v8df a, pv, v;
    std::memcpy(&a, acc + i, sizeof(a));
    std::memcpy(&pv, p + i, sizeof(pv));
    const T* q = x + i;
    for (int64_t r = 0; r < rows; ++r, q += stride) {
      load_wide(q, v);
      v -= pv;
      exp8(v);
      a += v;
    }
    std::memcpy(acc + i, &a, sizeof(a));
  }
  if (i < n) {  // the last columns as one padded vector: lanes past n are dropped
    double pt[8], at[8], vt[8];
    const int64_t m = n - i;
    for (int l = 0; l < 8; ++l) {
      pt[l] = l < m ? p[i + l] : 0.0;
      at[l] = l < m ? acc[i + l] : 0.0;
    }
    v8df a, pv, v;
    std::memcpy(&a, at, sizeof(a));
    std::memcpy(&pv, pt, sizeof(pv));
    for (int64_t r = 0; r < rows; ++r) {
      for (int l = 0; l < 8; ++l) vt[l] = l < m ? static_cast<double>(x[r * stride + i + l]) : 0.0;
      std::memcpy(&v, vt, sizeof(v));
      v -= pv;
      exp8(v);
      a += v;
    }
    std::memcpy(at, &a, sizeof(a));
    for (int64_t l = 0; l < m; ++l) acc[i + l] = at[l];
  }
}

}  // namespace

void add_columns(ColTerm term, const float* x, int64_t stride, int64_t rows, double* acc,
                 int64_t n) {
#if defined(__GNUC__) && defined(__x86_64__)
  if (has_avx512f() && nn::fast_isa_cap() >= 2 && !(n < 8 && stride == n)) {
    if (term == ColTerm::kSquare)
      return add_columns_f32_avx512<ColTerm::kSquare>(x, stride, rows, acc, n);
    if (term == ColTerm::kAbs)
      return add_columns_f32_avx512<ColTerm::kAbs>(x, stride, rows, acc, n);
    return add_columns_f32_avx512<ColTerm::kPlain>(x, stride, rows, acc, n);
  }
#endif
  add_columns_f32_generic(term, x, stride, rows, acc, n);
}
ORTLITE_NN_CLONES512 void add_columns(ColTerm term, const double* x, int64_t stride, int64_t rows,
                                      double* acc, int64_t n) {
  add_columns_any(term, x, stride, rows, acc, n);
}
template <typename T>
ORTLITE_NN_INLINE void add_column_chunks_any(ColTerm t, const T* x, const int64_t* offs,
                                             int64_t chunks, int64_t rows, double* acc, int64_t n) {
  if (t == ColTerm::kSquare)
    add_column_chunks_body<ColTerm::kSquare>(x, offs, chunks, rows, acc, n);
  else if (t == ColTerm::kAbs)
    add_column_chunks_body<ColTerm::kAbs>(x, offs, chunks, rows, acc, n);
  else
    add_column_chunks_body<ColTerm::kPlain>(x, offs, chunks, rows, acc, n);
}
ORTLITE_NN_CLONES512 void add_column_chunks(ColTerm term, const float* x, const int64_t* offs,
                                            int64_t chunks, int64_t rows, double* acc, int64_t n) {
  add_column_chunks_any(term, x, offs, chunks, rows, acc, n);
}
ORTLITE_NN_CLONES512 void add_column_chunks(ColTerm term, const double* x, const int64_t* offs,
                                            int64_t chunks, int64_t rows, double* acc, int64_t n) {
  add_column_chunks_any(term, x, offs, chunks, rows, acc, n);
}
ORTLITE_NN_CLONES512 double prod_f32(const float* x, int64_t n) {
  return prod_body(x, n);
}
ORTLITE_NN_CLONES512 double prod_f64(const double* x, int64_t n) {
  return prod_body(x, n);
}
ORTLITE_NN_CLONES512 void add_exp_columns(const float* x, int64_t stride, int64_t rows,
                                          const double* p, double* acc, int64_t n) {
  add_exp_columns_body(x, stride, rows, p, acc, n);
}
ORTLITE_NN_CLONES512 void add_exp_columns(const double* x, int64_t stride, int64_t rows,
                                          const double* p, double* acc, int64_t n) {
  add_exp_columns_body(x, stride, rows, p, acc, n);
}
ORTLITE_NN_CLONES512 double sum_exp_f32(const float* x, int64_t n, double p) {
  return sum_exp_body(x, n, p);
}
ORTLITE_NN_CLONES512 double sum_exp_f64(const double* x, int64_t n, double p) {
  return sum_exp_body(x, n, p);
}

template <bool kMax, typename T>
ORTLITE_NN_INLINE void extremum_columns_body(const T* x, int64_t stride, int64_t rows, T* acc,
                                             int64_t n) {
  for (int64_t r = 0; r < rows; ++r, x += stride) {
    for (int64_t i = 0; i < n; ++i) {
      const T a = acc[i], v = x[i];
      const T m = kMax ? (v > a ? v : a) : (v < a ? v : a);
      acc[i] = v != v ? v : m;
    }
  }
}
template <typename T>
ORTLITE_NN_INLINE void extremum_columns_any(bool kMax, const T* x, int64_t stride, int64_t rows,
                                            T* acc, int64_t n) {
  if (kMax)
    extremum_columns_body<true>(x, stride, rows, acc, n);
  else
    extremum_columns_body<false>(x, stride, rows, acc, n);
}
ORTLITE_NN_CLONES512 void extremum_columns_f32_generic(bool kMax, const float* x, int64_t stride,
                                                       int64_t rows, float* acc, int64_t n) {
  extremum_columns_any(kMax, x, stride, rows, acc, n);
}
bool extremum_columns_any_width() {
#if defined(__GNUC__) && defined(__x86_64__)
  return has_avx512f() && nn::fast_isa_cap() >= 2;
#else
  return false;
#endif
}
void extremum_columns(bool kMax, const float* x, int64_t stride, int64_t rows, float* acc,
                      int64_t n) {
#if defined(__GNUC__) && defined(__x86_64__)
  if (has_avx512f() && nn::fast_isa_cap() >= 2) {
    if (kMax) return extremum_columns_f32_avx512<true>(x, stride, rows, acc, n);
    return extremum_columns_f32_avx512<false>(x, stride, rows, acc, n);
  }
#endif
  extremum_columns_f32_generic(kMax, x, stride, rows, acc, n);
}
bool extremum_column_chunks(bool kMax, const float* x, const int64_t* offs, int64_t chunks,
                            int64_t rows, float* acc, int64_t n) {
#if defined(__GNUC__) && defined(__x86_64__)
  if (n >= 1 && n < 16 && extremum_columns_any_width())
    return kMax ? extremum_column_chunks_f32<true>(x, offs, chunks, rows, acc, n)
                : extremum_column_chunks_f32<false>(x, offs, chunks, rows, acc, n);
#endif
  (void)kMax, (void)x, (void)offs, (void)chunks, (void)rows, (void)acc, (void)n;
  return false;
}
ORTLITE_NN_CLONES512 void extremum_columns(bool kMax, const double* x, int64_t stride, int64_t rows,
                                           double* acc, int64_t n) {
  extremum_columns_any(kMax, x, stride, rows, acc, n);
}

ORTLITE_NN_CLONES512 void mean_to_f32(const double* acc, float* y, int64_t n, double count) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(acc[i] / count);
}

ORTLITE_NN_CLONES512 double sum_f64(const double* x, int64_t n) {
  return sum_body<kPlain>(x, n);
}
ORTLITE_NN_CLONES512 double sum_sq_f64(const double* x, int64_t n) {
  return sum_body<kSquare>(x, n);
}
ORTLITE_NN_CLONES512 double sum_abs_f64(const double* x, int64_t n) {
  return sum_body<kAbs>(x, n);
}
namespace {
#define ORTLITE_REDUCE_EXTREMUM(name, T, kMax)                      \
  ORTLITE_NN_TARGET_AVX512 T name##_avx512(const T* x, int64_t n) { \
    return extremum_body<kMax, T, 64>(x, n);                        \
  }                                                                 \
  ORTLITE_NN_TARGET_AVX2 T name##_avx2(const T* x, int64_t n) {     \
    return extremum_body<kMax, T, 32>(x, n);                        \
  }                                                                 \
  T name##_sse2(const T* x, int64_t n) {                            \
    return extremum_body<kMax, T, 16>(x, n);                        \
  }
ORTLITE_REDUCE_EXTREMUM(max_f32, float, true)
ORTLITE_REDUCE_EXTREMUM(min_f32, float, false)
ORTLITE_REDUCE_EXTREMUM(max_f64, double, true)
ORTLITE_REDUCE_EXTREMUM(min_f64, double, false)
#undef ORTLITE_REDUCE_EXTREMUM
}  // namespace

float max_f32(const float* x, int64_t n) {
  static const auto fn = nn::pick_by_isa(max_f32_avx512, max_f32_avx2, max_f32_sse2);
  return fn(x, n);
}
float min_f32(const float* x, int64_t n) {
  static const auto fn = nn::pick_by_isa(min_f32_avx512, min_f32_avx2, min_f32_sse2);
  return fn(x, n);
}
double max_f64(const double* x, int64_t n) {
  static const auto fn = nn::pick_by_isa(max_f64_avx512, max_f64_avx2, max_f64_sse2);
  return fn(x, n);
}
double min_f64(const double* x, int64_t n) {
  static const auto fn = nn::pick_by_isa(min_f64_avx512, min_f64_avx2, min_f64_sse2);
  return fn(x, n);
}

namespace {

// Plain loops the vectorizer turns into lane-wise reductions (integer addition and max / min
// are associative, so the lane split changes no result).
template <typename T>
ORTLITE_NN_INLINE T wrap_sum_body(const T* x, int64_t n) {
  using U = std::make_unsigned_t<T>;
  U s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<U>(x[i]);
  return static_cast<T>(s);
}
template <bool kMax, typename T>
ORTLITE_NN_INLINE T int_extremum_body(const T* x, int64_t n) {
  T m = x[0];
  for (int64_t i = 1; i < n; ++i) {
    if constexpr (kMax)
      m = x[i] > m ? x[i] : m;
    else
      m = x[i] < m ? x[i] : m;
  }
  return m;
}

}  // namespace

ORTLITE_NN_CLONES512 int32_t sum_i32(const int32_t* x, int64_t n) {
  return wrap_sum_body(x, n);
}
ORTLITE_NN_CLONES512 int64_t sum_i64(const int64_t* x, int64_t n) {
  return wrap_sum_body(x, n);
}
ORTLITE_NN_CLONES512 int32_t max_i32(const int32_t* x, int64_t n) {
  return int_extremum_body<true>(x, n);
}
ORTLITE_NN_CLONES512 int32_t min_i32(const int32_t* x, int64_t n) {
  return int_extremum_body<false>(x, n);
}
ORTLITE_NN_CLONES512 int64_t max_i64(const int64_t* x, int64_t n) {
  return int_extremum_body<true>(x, n);
}
ORTLITE_NN_CLONES512 int64_t min_i64(const int64_t* x, int64_t n) {
  return int_extremum_body<false>(x, n);
}

}  // namespace simd
}  // namespace reduce
}  // namespace ortlite
