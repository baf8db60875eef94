#include "providers/cpu/nn/norm_simd.h"

#include <cstring>

#include "compute/simd.h"

namespace ortlite {
namespace nn {
namespace {

// Four 8-lane accumulators over blocks of 32, one over the blocks of 8 that remain, then
// the scalar tail (the layout of the reductions' sums).
template <typename T>
ORTLITE_NN_INLINE double sum_sq_dev_body(const T* x, int64_t n, double mean) {
  v8df a0 = {}, a1 = {}, a2 = {}, a3 = {};
  const v8df m = v8df{} + mean;
  int64_t i = 0;
  v8df v0, v1, v2, v3;
  for (; i + 32 <= n; i += 32) {
    load_wide(x + i, v0);
    load_wide(x + i + 8, v1);
    load_wide(x + i + 16, v2);
    load_wide(x + i + 24, v3);
    v0 -= m;
    v1 -= m;
    v2 -= m;
    v3 -= m;
    a0 += v0 * v0;
    a1 += v1 * v1;
    a2 += v2 * v2;
    a3 += v3 * v3;
  }
  for (; i + 8 <= n; i += 8) {
    load_wide(x + i, v0);
    v0 -= m;
    a0 += v0 * v0;
  }
  const v8df a = (a0 + a1) + (a2 + a3);
  double s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  for (; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - mean;
    s += d * d;
  }
  return s;
}

template <typename T>
ORTLITE_NN_INLINE void affine_body(const T* x, T* y, int64_t n, double sub, double mul,
                                   double add) {
  const v8df s = v8df{} + sub, m = v8df{} + mul, a = v8df{} + add;
  int64_t i = 0;
  v8df v;
  for (; i + 8 <= n; i += 8) {
    load_wide(x + i, v);
    v = (v - s) * m + a;
    store_narrow(y + i, v);
  }
  for (; i < n; ++i) y[i] = static_cast<T>((static_cast<double>(x[i]) - sub) * mul + add);
}

template <typename T>
ORTLITE_NN_INLINE void scale_body(const T* x, const double* mul, T* y, int64_t n) {
  int64_t i = 0;
  v8df v, m;
  for (; i + 8 <= n; i += 8) {
    load_wide(x + i, v);
    std::memcpy(&m, mul + i, sizeof(m));
    v *= m;
    store_narrow(y + i, v);
  }
  for (; i < n; ++i) y[i] = static_cast<T>(static_cast<double>(x[i]) * mul[i]);
}

}  // namespace

ORTLITE_NN_CLONES512 double sum_sq_dev(const float* x, int64_t n, double mean) {
  return sum_sq_dev_body(x, n, mean);
}
ORTLITE_NN_CLONES512 double sum_sq_dev(const double* x, int64_t n, double mean) {
  return sum_sq_dev_body(x, n, mean);
}
ORTLITE_NN_CLONES512 void affine(const float* x, float* y, int64_t n, double sub, double mul,
                                 double add) {
  affine_body(x, y, n, sub, mul, add);
}
ORTLITE_NN_CLONES512 void affine(const double* x, double* y, int64_t n, double sub, double mul,
                                 double add) {
  affine_body(x, y, n, sub, mul, add);
}
ORTLITE_NN_CLONES512 void scale_rows(const float* x, const double* mul, float* y, int64_t n) {
  scale_body(x, mul, y, n);
}
ORTLITE_NN_CLONES512 void scale_rows(const double* x, const double* mul, double* y, int64_t n) {
  scale_body(x, mul, y, n);
}

}  // namespace nn
}  // namespace ortlite
