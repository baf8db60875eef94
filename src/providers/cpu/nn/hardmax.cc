// Hardmax: float16 / bfloat16 / float / double.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "providers/cpu/nn/double_io.h"

namespace ortlite {
namespace nn {
namespace {

// The element as the type it is compared in (exact: float16 / bfloat16 widen to float).
template <typename T>
using Key = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
Key<T> key_of(T v) {
  return static_cast<Key<T>>(v);
}

// The index of the first maximum of a contiguous run of n (>= 1) values, with the result
// of the sequential scan "best = 0; best = k wherever x[k] > x[best]": a NaN in front
// wins (nothing compares greater), NaNs further on are skipped. The maximum is found in
// 16 independent lanes (each ignoring NaNs the same way), then its first position.
template <typename T>
int64_t first_max(const T* x, int64_t n) {
  using K = Key<T>;
  const K first = key_of(x[0]);
  if (std::isnan(first)) return 0;
  constexpr int kLanes = 16;
  K lane[kLanes];
  for (int l = 0; l < kLanes; ++l) lane[l] = first;
  int64_t k = 0;
  for (; k + kLanes <= n; k += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const K v = key_of(x[k + l]);
      lane[l] = v > lane[l] ? v : lane[l];
    }
  }
  K m = first;
  for (; k < n; ++k) {
    const K v = key_of(x[k]);
    m = v > m ? v : m;
  }
  for (int l = 0; l < kLanes; ++l) m = lane[l] > m ? lane[l] : m;
  for (k = 0; k < n; ++k) {
    if (key_of(x[k]) == m) return k;
  }
  return 0;
}

#if defined(__SSE2__)
// first_max for float rows in SSE2: maxps(v, m) is exactly "v > m ? v : m" (a NaN v
// keeps m), and the running maxima never hold a NaN, so the lanes combine in any order;
// then the first element equal to the maximum (-0 equals +0, as in the scan).
inline int64_t first_max(const float* x, int64_t n) {
  const float first = x[0];
  if (std::isnan(first)) return 0;
  __m128 m0 = _mm_set1_ps(first), m1 = m0, m2 = m0, m3 = m0;
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    m0 = _mm_max_ps(_mm_loadu_ps(x + k), m0);
    m1 = _mm_max_ps(_mm_loadu_ps(x + k + 4), m1);
    m2 = _mm_max_ps(_mm_loadu_ps(x + k + 8), m2);
    m3 = _mm_max_ps(_mm_loadu_ps(x + k + 12), m3);
  }
  for (; k + 4 <= n; k += 4) m0 = _mm_max_ps(_mm_loadu_ps(x + k), m0);
  m0 = _mm_max_ps(_mm_max_ps(m0, m1), _mm_max_ps(m2, m3));
  float lanes[4];
  _mm_storeu_ps(lanes, m0);
  float m = std::max(std::max(lanes[0], lanes[1]), std::max(lanes[2], lanes[3]));
  for (; k < n; ++k) m = x[k] > m ? x[k] : m;
  const __m128 mv = _mm_set1_ps(m);
  for (k = 0; k + 4 <= n; k += 4) {
    const int bits = _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(x + k), mv));
    if (bits != 0) return k + __builtin_ctz(static_cast<unsigned>(bits));
  }
  for (; k < n; ++k) {
    if (x[k] == m) return k;
  }
  return 0;
}
#endif

// The index of the first maximum along the axis for `w` columns of a block of n rows
// `inner` apart, into best[0, w): the sequential scan of first_max per column, run on a
// row of columns at a time.
template <typename T, typename Idx>
void first_max_columns(const T* x, int64_t n, int64_t inner, int64_t w, Key<T>* bv, Idx* best) {
  using K = Key<T>;
  for (int64_t i = 0; i < w; ++i) {
    bv[i] = key_of(x[i]);
    best[i] = 0;
  }
  for (int64_t k = 1; k < n; ++k) {
    const T* row = x + k * inner;
    const Idx kk = static_cast<Idx>(k);
    for (int64_t i = 0; i < w; ++i) {
      const K v = key_of(row[i]);
      const bool gt = v > bv[i];
      bv[i] = gt ? v : bv[i];
      best[i] = gt ? kk : best[i];
    }
  }
}

// Hardmax: 1 at the first maximum along the axis (opset 13), or over the flattened dims
// [axis, rank) (opsets 1-12), 0 elsewhere.
class Hardmax final : public Kernel {
 public:
  explicit Hardmax(const KernelInfo& info)
      : axis_(info.attr_int("axis", info.opset() >= 13 ? -1 : 1)), flatten_(info.opset() < 13) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const size_t axis = checked_axis(ctx, axis_, x);
    int64_t outer = dims_product(x.shape(), 0, axis), n, inner;
    if (flatten_) {
      n = dims_product(x.shape(), axis, x.rank());
      inner = 1;
    } else {
      n = x.dim(axis);
      inner = dims_product(x.shape(), axis + 1, x.rank());
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    if (y.numel() == 0) return;
    ORTLITE_DISPATCH_FLOAT(x.dtype(), "Hardmax", [&](auto tag) {
      using T = decltype(tag);
      const T* src = x.data<T>();
      T* dst = y.data<T>();
      const T one = from_double<T>(1.0);
      // Zero is all-zero bits in every float type: rows are cleared with memset.
      if (inner == 1) {
        parallel_for(
            ctx.thread_pool(), outer, 2.0 * static_cast<double>(n), [&](int64_t b, int64_t e) {
              for (int64_t o = b; o < e; ++o) {
                const int64_t best = first_max(src + o * n, n);
                std::memset(static_cast<void*>(dst + o * n), 0, static_cast<size_t>(n) * sizeof(T));
                dst[o * n + best] = one;
              }
            });
        return;
      }
      constexpr int64_t kCols = 256;
      const int64_t blocks = (inner + kCols - 1) / kCols;
      parallel_for(ctx.thread_pool(), outer * blocks,
                   2.0 * static_cast<double>(n * std::min(inner, kCols)),
                   [&](int64_t b, int64_t e) {
                     Key<T> bv[kCols];
                     int64_t best[kCols];
                     int32_t best32[kCols];
                     for (int64_t item = b; item < e; ++item) {
                       const int64_t o = item / blocks, c0 = (item % blocks) * kCols;
                       const int64_t w = std::min(kCols, inner - c0);
                       const T* s = src + o * n * inner + c0;
                       T* d = dst + o * n * inner + c0;
                       if (n <= std::numeric_limits<int32_t>::max()) {
                         first_max_columns(s, n, inner, w, bv, best32);
                         for (int64_t i = 0; i < w; ++i) best[i] = best32[i];
                       } else {
                         first_max_columns(s, n, inner, w, bv, best);
                       }
                       for (int64_t k = 0; k < n; ++k)
                         std::memset(static_cast<void*>(d + k * inner), 0,
                                     static_cast<size_t>(w) * sizeof(T));
                       for (int64_t i = 0; i < w; ++i) d[best[i] * inner + i] = one;
                     }
                   });
    });
  }

 private:
  int64_t axis_;
  bool flatten_;
};

}  // namespace

void register_hardmax(KernelRegistry& r) {
  r.add("", "Hardmax", 1, 10, make_factory<Hardmax>());
  r.add("", "Hardmax", 11, 12, make_factory<Hardmax>());
  r.add("", "Hardmax", 13, kNewestOpset, make_factory<Hardmax>());
}

}  // namespace nn
}  // namespace ortlite
