#include "compute/vectorize.h"  // first: compile options for the loops below

#include "compute/fast_kernels.h"

#include <cmath>

#include "compute/fast_math.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define ORTLITE_FAST_X86 1
#include <immintrin.h>
#endif

namespace ortlite {
namespace fast {
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

ORTLITE_FAST_UNARY_LOOPS(, unary_base)
ORTLITE_FAST_EXP_SUM(, exp_sum_base)

#ifdef ORTLITE_FAST_X86
ORTLITE_FAST_UNARY_LOOPS(__attribute__((target("avx2,fma"))), unary_avx2)
ORTLITE_FAST_UNARY_LOOPS(__attribute__((target("avx512f,avx2,fma"))), unary_avx512)
ORTLITE_FAST_EXP_SUM(__attribute__((target("avx2,fma"))), exp_sum_avx2)
// AVX-512: exp(t) = 2^n p(r) with n = round(t log2 e), r = t - n ln 2 (in two parts) and
// Cephes' degree-6 polynomial for e^r (about 1 ulp), scaled by vscalefps, which gives 0 below
// the denormals and needs no exponent bit tricks: about 16 instructions per 16 values
// against 40 for the vectorized fast::exp with its selects (64 rows of 1024: the
// exponential pass 2.5x faster). t is clamped to [-104, 88.7] first (NaN kept: exp(-104)
// rounds to 0, so -inf still gives 0).
#pragma GCC diagnostic push
// GCC 12's AVX-512 headers start some intrinsics from an undefined vector.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f"))) float exp_sum_avx512(const float* x, float shift, float* y,
                                                        int64_t n) {
  const __m512 vs = _mm512_set1_ps(shift), lo = _mm512_set1_ps(-104.0f), hi = _mm512_set1_ps(88.7f),
               log2e = _mm512_set1_ps(1.44269504088896341f), c1 = _mm512_set1_ps(0.693359375f),
               c2 = _mm512_set1_ps(-2.12194440e-4f), p0 = _mm512_set1_ps(1.9875691500e-4f),
               p1 = _mm512_set1_ps(1.3981999507e-3f), p2 = _mm512_set1_ps(8.3334519073e-3f),
               p3 = _mm512_set1_ps(4.1665795894e-2f), p4 = _mm512_set1_ps(1.6666665459e-1f),
               p5 = _mm512_set1_ps(5.0000001201e-1f), one = _mm512_set1_ps(1.0f);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m =
        n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    __m512 t = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vs);
    t = _mm512_min_ps(hi, _mm512_max_ps(lo, t));  // NaN: max / min return the second operand
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(t, log2e),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, c1, t);
    r = _mm512_fnmadd_ps(k, c2, r);
    __m512 p = _mm512_fmadd_ps(p0, r, p1);
    p = _mm512_fmadd_ps(p, r, p2);
    p = _mm512_fmadd_ps(p, r, p3);
    p = _mm512_fmadd_ps(p, r, p4);
    p = _mm512_fmadd_ps(p, r, p5);
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, one));
    const __m512 e = _mm512_scalef_ps(p, k);
    _mm512_mask_storeu_ps(y + i, m, e);
    acc = _mm512_add_ps(acc, _mm512_maskz_mov_ps(m, e));
  }
  return _mm512_reduce_add_ps(acc);
}
#pragma GCC diagnostic pop
#endif

using UnaryImpl = void (*)(UnaryFn, const float*, float*, int64_t);
using ExpSumImpl = float (*)(const float*, float, float*, int64_t);

struct Dispatch {
  UnaryImpl unary = unary_base;
  ExpSumImpl exp_sum = exp_sum_base;
  const char* isa = "sse2";
  Dispatch() {
#ifdef ORTLITE_FAST_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
      unary = unary_avx512;
      exp_sum = exp_sum_avx512;
      isa = "avx512";
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      unary = unary_avx2;
      exp_sum = exp_sum_avx2;
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

const char* isa() {
  return dispatch().isa;
}

}  // namespace fast
}  // namespace ortlite
