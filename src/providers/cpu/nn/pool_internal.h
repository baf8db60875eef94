// Pieces the pooling kernels share (pool.cc: MaxPool, AveragePool, GlobalMaxPool,
// GlobalAveragePool; pool_small.cc: the small-plane kernel). Internal to
// src/providers/cpu/nn.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "compute/simd.h"
#include "ortlite/thread_pool.h"
#include "providers/shared/spatial_attrs.h"

namespace ortlite {
namespace nn {

// Geometry viewed as 3-D.
struct Geo3 {
  size_t rank;  // real spatial axes (the last `rank` of the 3)
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
  int64_t in_size, out_size;
};

inline Geo3 to_geo3(const SpatialGeometry& g) {
  Geo3 r;
  const size_t n = g.rank;
  r.rank = n;
  for (size_t i = 0; i < 3; ++i) {
    if (i < 3 - n) {
      r.in[i] = r.out[i] = r.k[i] = r.s[i] = r.d[i] = 1;
      r.pb[i] = r.pe[i] = 0;
    } else {
      const size_t j = i - (3 - n);
      r.in[i] = g.in[j];
      r.out[i] = g.out[j];
      r.k[i] = g.kernel[j];
      r.s[i] = g.stride[j];
      r.d[i] = g.dilation[j];
      r.pb[i] = g.pad_begin[j];
      r.pe[i] = g.pad_end[j];
    }
  }
  r.in_size = r.in[0] * r.in[1] * r.in[2];
  r.out_size = r.out[0] * r.out[1] * r.out[2];
  return r;
}

// The taps k in [0, k) of a window starting at input index `start` (tap k at start + k * d)
// that lie inside [0, in): the first one's index and their count.
inline void inside_taps(int64_t start, int64_t k, int64_t d, int64_t in, int64_t& first,
                        int64_t& count) {
  const int64_t k_lo = start < 0 ? (-start + d - 1) / d : 0;
  const int64_t k_hi = start < in ? std::min(k, (in - start + d - 1) / d) : 0;
  first = start + k_lo * d;
  count = std::max<int64_t>(0, k_hi - k_lo);
}
// The taps of that window inside the padded input [.., in + pad_end) (opset 19's divisor).
inline int64_t padded_taps(int64_t start, int64_t k, int64_t d, int64_t in, int64_t pad_end) {
  const int64_t end = std::min(start + k * d, in + pad_end);
  return end > start ? std::min(k, 1 + (end - start - 1) / d) : 0;
}
// Whether the bits of any of p[0, n) are v: -inf found by its bit pattern, an integer compare that
// vectorizes (a float compare into a bool did not, and took twice the pool's time), in
// blocks of kBitsBlock values.
constexpr int64_t kBitsBlock = 256;
template <typename T, typename U>
ORTLITE_NN_CLONES512 bool any_bits_equal(const T* p, int64_t n, U v) {
  static_assert(sizeof(T) == sizeof(U), "one value, one integer");
  U hit = 0;
  for (int64_t i = 0; i < n; ++i) {
    U u;
    std::memcpy(&u, p + i, sizeof(U));
    hit |= static_cast<U>(u == v);
  }
  return hit != 0;
}

// The windowed max pools skip NaN inputs (a comparison `v > acc` never lets a NaN win) and
// start from -inf, so an all-NaN window comes out -inf; onnxruntime and onnx's MaxPool
// give NaN there. Outputs of -inf are rare: each one's window is read again, and set to NaN
// when it has taps and all of them are NaN. The kernels call it on outputs [o_begin, o_end)
// only when they saw a -inf there (the AVX-512 ones compare their results with -inf in
// registers, the row kernel tests each group of rows from the cache; a pass over the whole
// output after the pool added 14% to a 2x2 pool of 1x64x112x112), blocks of kBitsBlock
// checked at once.
template <typename T>
void max_pool_nan_windows(const Geo3& g, const T* x, T* y, int64_t o_begin, int64_t o_end) {
  if constexpr (std::is_floating_point_v<T>) {
    const T ninf = -std::numeric_limits<T>::infinity();
    using U = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
    U ninf_bits;
    std::memcpy(&ninf_bits, &ninf, sizeof(U));
    for (int64_t b = o_begin; b < o_end; b += kBitsBlock) {
      const int64_t e = std::min<int64_t>(b + kBitsBlock, o_end);
      if (!any_bits_equal(y + b, e - b, ninf_bits)) continue;
      for (int64_t i = b; i < e; ++i) {
        if (!(y[i] == ninf)) continue;
        const int64_t c = i / g.out_size, r = i % g.out_size;
        const int64_t o2 = r % g.out[2], o1 = (r / g.out[2]) % g.out[1],
                      o0 = r / (g.out[2] * g.out[1]);
        const T* xc = x + c * g.in_size;
        bool tap = false, number = false;
        for (int64_t k0 = 0; k0 < g.k[0] && !number; ++k0) {
          const int64_t i0 = o0 * g.s[0] - g.pb[0] + k0 * g.d[0];
          if (i0 < 0 || i0 >= g.in[0]) continue;
          for (int64_t k1 = 0; k1 < g.k[1] && !number; ++k1) {
            const int64_t i1 = o1 * g.s[1] - g.pb[1] + k1 * g.d[1];
            if (i1 < 0 || i1 >= g.in[1]) continue;
            for (int64_t k2 = 0; k2 < g.k[2] && !number; ++k2) {
              const int64_t i2 = o2 * g.s[2] - g.pb[2] + k2 * g.d[2];
              if (i2 < 0 || i2 >= g.in[2]) continue;
              const T v = xc[(i0 * g.in[1] + i1) * g.in[2] + i2];
              tap = true;
              number = v == v;
            }
          }
        }
        if (tap && !number) y[i] = std::numeric_limits<T>::quiet_NaN();
      }
    }
  } else {
    (void)g, (void)x, (void)y, (void)o_begin, (void)o_end;
  }
}

// Whether the AVX-512F pooling kernels may run on this CPU (and ORTLITE_FAST_ISA lets them).
bool max_pool_avx512_cpu();

// pool_small.cc: 2-D float MaxPool / AveragePool on planes of up to 4096 pixels, 16
// channels at a time with the channels in the lanes. include_pad_mode as pool2d_f32's: 0
// excludes padding from the divisor, 1 divides by the kernel size, 2 by the taps inside the
// padded input (opset 19).
bool pool_small_ok(const Geo3& g, int64_t channels);
// Whether it also goes before the 2x2 / 3x3 stride-2 kernels (rows of up to 8 outputs).
bool pool_small_first(const Geo3& g, int64_t channels);
// Whether it goes before pool_s1 for a stride-1 window it takes (with `pool`'s threads).
bool pool_small_over_s1(const Geo3& g, int64_t channels, const ThreadPool* pool);
void pool_small(const Geo3& g, bool is_max, int include_pad_mode, const float* x, float* y,
                int64_t channels, ThreadPool* pool);

}  // namespace nn
}  // namespace ortlite
