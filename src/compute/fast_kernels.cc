#include "compute/vectorize.h"  // first: compile options for the loops below

#include "compute/fast_kernels.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "compute/fast_math.h"
#include "compute/simd.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define ORTLITE_FAST_X86 1
#include <immintrin.h>
#endif

namespace ortlite {
namespace fast {
#ifdef ORTLITE_FAST_X86
namespace avx512 {  // fast_avx512.cc
void unary(UnaryFn fn, const float* x, float* y, int64_t n);
float exp_sum(const float* x, float shift, float* y, int64_t n);
void softmax(const float* x, float* y, int64_t n, bool log);
bool softmax_columns(const float* x, float* y, int64_t dim, int64_t stride, int64_t j0, int64_t j1,
                     bool log);
bool softmax_short_rows(const float* x, float* y, int64_t rows, int64_t n, bool log);
}  // namespace avx512
#endif
namespace {

inline float gelu(float x) {
  return 0.5f * x * (1.0f + fast::erf(x * 0.70710678118654752f));
}
inline float gelu_tanh(float x) {
  const float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + fast::tanh(inner));
}

template <typename F>
inline void map(const float* x, float* y, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

// std::sqrt stays a scalar call under -fmath-errno (the default); sqrtps is the same
// correctly rounded operation without errno.
inline void sqrt_loop(const float* x, float* y, int64_t n) {
  int64_t i = 0;
#ifdef ORTLITE_FAST_X86
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
#endif
  for (; i < n; ++i) y[i] = std::sqrt(x[i]);
}

// One copy of the loops per instruction set; the inline functions above are compiled into
// each with that target.
#define ORTLITE_FAST_UNARY_LOOPS(ATTR, NAME)                           \
  ATTR void NAME(UnaryFn fn, const float* x, float* y, int64_t n) {    \
    switch (fn) {                                                      \
      case UnaryFn::kExp:                                              \
        return map(x, y, n, [](float v) { return fast::exp(v); });     \
      case UnaryFn::kLog:                                              \
        return map(x, y, n, [](float v) { return fast::log(v); });     \
      case UnaryFn::kSigmoid:                                          \
        return map(x, y, n, [](float v) { return fast::sigmoid(v); }); \
      case UnaryFn::kTanh:                                             \
        return map(x, y, n, [](float v) { return fast::tanh(v); });    \
      case UnaryFn::kErf:                                              \
        return map(x, y, n, [](float v) { return fast::erf(v); });     \
      case UnaryFn::kGelu:                                             \
        return map(x, y, n, [](float v) { return gelu(v); });          \
      case UnaryFn::kGeluTanh:                                         \
        return map(x, y, n, [](float v) { return gelu_tanh(v); });     \
      case UnaryFn::kSqrt:                                             \
        return sqrt_loop(x, y, n);                                     \
    }                                                                  \
  }

// exp_sum: sixteen partial sums (one vector of them), so that the sum vectorizes without
// reassociating a single accumulator.
#define ORTLITE_FAST_EXP_SUM(ATTR, NAME)                              \
  ATTR float NAME(const float* x, float shift, float* y, int64_t n) { \
    float part[16] = {};                                              \
    int64_t i = 0;                                                    \
    for (; i + 16 <= n; i += 16)                                      \
      for (int j = 0; j < 16; ++j) {                                  \
        const float e = fast::exp(x[i + j] - shift);                  \
        y[i + j] = e;                                                 \
        part[j] += e;                                                 \
      }                                                               \
    float sum = 0.f;                                                  \
    for (; i < n; ++i) {                                              \
      const float e = fast::exp(x[i] - shift);                        \
      y[i] = e;                                                       \
      sum += e;                                                       \
    }                                                                 \
    for (int j = 0; j < 16; ++j) sum += part[j];                      \
    return sum;                                                       \
  }

// Softmax of one row: the maximum in sixteen partial maxima (NaN ignored here; it
// propagates through the exponentials), then EXP_SUM and the normalization.
#define ORTLITE_FAST_SOFTMAX(ATTR, NAME, EXP_SUM)                                     \
  ATTR void NAME(const float* x, float* y, int64_t n, bool log) {                     \
    const float ninf = -std::numeric_limits<float>::infinity();                       \
    float part[16];                                                                   \
    for (int j = 0; j < 16; ++j) part[j] = ninf;                                      \
    int64_t i = 0;                                                                    \
    for (; i + 16 <= n; i += 16)                                                      \
      for (int j = 0; j < 16; ++j) part[j] = x[i + j] > part[j] ? x[i + j] : part[j]; \
    float m = ninf;                                                                   \
    for (; i < n; ++i) m = x[i] > m ? x[i] : m;                                       \
    for (int j = 0; j < 16; ++j) m = part[j] > m ? part[j] : m;                       \
    const float sum = EXP_SUM(x, m, y, n);                                            \
    if (log) {                                                                        \
      const float ls = std::log(sum);                                                 \
      for (i = 0; i < n; ++i) y[i] = (x[i] - m) - ls;                                 \
    } else {                                                                          \
      const float inv = 1.0f / sum;                                                   \
      for (i = 0; i < n; ++i) y[i] *= inv;                                            \
    }                                                                                 \
  }

ORTLITE_FAST_UNARY_LOOPS(, unary_base)
ORTLITE_FAST_EXP_SUM(, exp_sum_base)
ORTLITE_FAST_SOFTMAX(, softmax_base, exp_sum_base)

#ifdef ORTLITE_FAST_X86
ORTLITE_FAST_UNARY_LOOPS(__attribute__((target("avx2,fma"))), unary_avx2)
ORTLITE_FAST_EXP_SUM(__attribute__((target("avx2,fma"))), exp_sum_avx2)
ORTLITE_FAST_SOFTMAX(__attribute__((target("avx2,fma"))), softmax_avx2, exp_sum_avx2)
#endif

using UnaryImpl = void (*)(UnaryFn, const float*, float*, int64_t);
using ExpSumImpl = float (*)(const float*, float, float*, int64_t);
using SoftmaxImpl = void (*)(const float*, float*, int64_t, bool);
using SoftmaxColumnsImpl = bool (*)(const float*, float*, int64_t, int64_t, int64_t, int64_t, bool);

bool softmax_columns_none(const float*, float*, int64_t, int64_t, int64_t, int64_t, bool) {
  return false;
}

using SoftmaxShortRowsImpl = bool (*)(const float*, float*, int64_t, int64_t, bool);
bool softmax_short_rows_none(const float*, float*, int64_t, int64_t, bool) {
  return false;
}

struct Dispatch {
  UnaryImpl unary = unary_base;
  ExpSumImpl exp_sum = exp_sum_base;
  SoftmaxImpl softmax = softmax_base;
  SoftmaxColumnsImpl softmax_columns = softmax_columns_none;
  SoftmaxShortRowsImpl softmax_short_rows = softmax_short_rows_none;
  const char* isa = "sse2";
  Dispatch() {
#ifdef ORTLITE_FAST_X86
    __builtin_cpu_init();
    const int cap = nn::fast_isa_cap();
    if (cap >= 2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")) {
      unary = avx512::unary;
      exp_sum = avx512::exp_sum;
      softmax = avx512::softmax;
      softmax_columns = avx512::softmax_columns;
      softmax_short_rows = avx512::softmax_short_rows;
      isa = "avx512";
    } else if (cap >= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      unary = unary_avx2;
      exp_sum = exp_sum_avx2;
      softmax = softmax_avx2;
      isa = "avx2";
    }
#endif
  }
};

const Dispatch& dispatch() {
  static const Dispatch d;
  return d;
}

}  // namespace

void unary(UnaryFn fn, const float* x, float* y, int64_t n) {
  dispatch().unary(fn, x, y, n);
}

float exp_sum(const float* x, float shift, float* y, int64_t n) {
  return dispatch().exp_sum(x, shift, y, n);
}

void softmax(const float* x, float* y, int64_t n, bool log) {
  dispatch().softmax(x, y, n, log);
}

bool softmax_columns(const float* x, float* y, int64_t dim, int64_t stride, int64_t j0, int64_t j1,
                     bool log) {
  return dispatch().softmax_columns(x, y, dim, stride, j0, j1, log);
}

bool softmax_short_rows(const float* x, float* y, int64_t rows, int64_t n, bool log) {
  return dispatch().softmax_short_rows(x, y, rows, n, log);
}

const char* isa() {
  return dispatch().isa;
}

}  // namespace fast
}  // namespace ortlite
