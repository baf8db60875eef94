// AVX-512 versions of the fast_kernels.h loops, written with intrinsics: range reduction and
// polynomials in FMA, vscalefps / vgetexpps / vgetmantps for the exponent work, vrcp14ps
// plus a Newton step instead of vdivps, masked loads and stores for the tails, four vectors
// per iteration. Selected at run time by fast_kernels.cc on CPUs with AVX-512 F and DQ.
// Results differ from the SSE2 / AVX2 loops by rounding only (FMA): all stay within a few
// ulp of the exact values (tests/ops/test_ops_math.py measures them).
//
// Only <cstdint>, <immintrin.h> and declarations are included before the target pragma, so
// that no inline function shared with other translation units is compiled for AVX-512.
#include <cstdint>

#include "compute/fast_kernels.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>

#pragma GCC target("avx512f,avx512dq,avx2,fma")
#pragma GCC diagnostic push
// GCC 12's AVX-512 headers start some intrinsics from an undefined vector.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#define ORTLITE_AI __attribute__((always_inline)) inline

namespace ortlite {
namespace fast {
namespace avx512 {
namespace {

ORTLITE_AI __m512 set1(float v) {
  return _mm512_set1_ps(v);
}
ORTLITE_AI __m512 abs_ps(__m512 x) {
  return _mm512_castsi512_ps(
      _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)));
}
// The magnitude of `mag` with the sign of `sgn`.
ORTLITE_AI __m512 copysign_ps(__m512 mag, __m512 sgn) {
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
      _mm512_set1_epi32(0x7fffffff), _mm512_castps_si512(mag), _mm512_castps_si512(sgn), 0xCA));
}
// 1 / d for d in [1, 4]: vrcp14ps (relative error < 2^-14) and one Newton step.
ORTLITE_AI __m512 recip(__m512 d) {
  const __m512 r = _mm512_rcp14_ps(d);
  return _mm512_fmadd_ps(_mm512_fnmadd_ps(d, r, set1(1.0f)), r, r);
}
// n / d for d in [1, 4]: the quotient from vrcp14ps corrected by its residual (error
// about 2^-28 before the last rounding).
ORTLITE_AI __m512 divide(__m512 n, __m512 d) {
  const __m512 r = _mm512_rcp14_ps(d);
  const __m512 q0 = _mm512_mul_ps(n, r);
  return _mm512_fmadd_ps(_mm512_fnmadd_ps(q0, d, n), r, q0);
}

// e^x: k = round(x log2 e), r = x - k ln 2 (Cephes' two-part ln 2), e^r = 1 + r + r^2 P(r)
// with Cephes' degree-5 P (about 1 ulp), scaled by vscalefps: one rounding for subnormal
// results, inf above ln(FLT_MAX), 0 below. x is clamped to [-104, 88.8] first; NaN passes
// (vmaxps / vminps return the second operand when one is NaN).
ORTLITE_AI __m512 exp_ps(__m512 x) {
  x = _mm512_min_ps(set1(88.8f), _mm512_max_ps(set1(-104.0f), x));
  // k = round(x log2 e): 1.5 * 2^23 added rounds to an integer (|k| < 2^22).
  const __m512 k = _mm512_sub_ps(_mm512_fmadd_ps(x, set1(1.44269504088896341f), set1(12582912.0f)),
                                 set1(12582912.0f));
  __m512 r = _mm512_fnmadd_ps(k, set1(0.693359375f), x);
  r = _mm512_fnmadd_ps(k, set1(-2.12194440e-4f), r);
  __m512 p = _mm512_fmadd_ps(set1(1.9875691500e-4f), r, set1(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, set1(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, set1(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, set1(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, set1(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, r, set1(1.0f));
  p = _mm512_fmadd_ps(p, r, set1(1.0f));
  return _mm512_scalef_ps(p, k);
}

// 1 - e^x for x <= 0 (x >= -20 after clamping; 1 below): x = k ln 2 + r,
// 1 - e^x = (1 - 2^k) - 2^k (e^r - 1) with e^r - 1 = r + r^2 (1/2! + ... + r^5/7!)
// (truncation below 2e-8 relative for |r| <= ln2 / 2). Relative accuracy holds down to
// x = 0, which tanh needs. NaN passes.
ORTLITE_AI __m512 one_minus_exp_neg_ps(__m512 x) {
  x = _mm512_max_ps(set1(-20.0f), x);
  // kb = 1.5 * 2^23 + 127 + round(x log2 e): its low bits are the biased exponent of 2^k.
  const __m512 kb = _mm512_fmadd_ps(x, set1(1.44269504088896341f), set1(12583039.0f));
  const __m512 k = _mm512_sub_ps(kb, set1(12583039.0f));
  const __m512 s = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(kb), 23));
  __m512 r = _mm512_fnmadd_ps(k, set1(0.693359375f), x);
  r = _mm512_fnmadd_ps(k, set1(-2.12194440e-4f), r);
  __m512 p = _mm512_fmadd_ps(set1(1.98412698e-4f), r, set1(1.38888889e-3f));
  p = _mm512_fmadd_ps(p, r, set1(8.33333333e-3f));
  p = _mm512_fmadd_ps(p, r, set1(4.16666667e-2f));
  p = _mm512_fmadd_ps(p, r, set1(1.66666667e-1f));
  p = _mm512_fmadd_ps(p, r, set1(0.5f));
  const __m512 q = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);  // e^r - 1
  return _mm512_fnmadd_ps(s, q, _mm512_sub_ps(set1(1.0f), s));
}

// tanh |x| = n / (2 - n) with n = 1 - e^(-2|x|) in [0, 1], with the sign of x put back:
// one formula over the whole range (tanh(+-0) = +-0, +-1 from |x| = 10 on, NaN passes).
ORTLITE_AI __m512 tanh_ps(__m512 x) {
  const __m512 n = one_minus_exp_neg_ps(_mm512_mul_ps(set1(-2.0f), abs_ps(x)));
  return copysign_ps(divide(n, _mm512_sub_ps(set1(2.0f), n)), x);
}

// 1 / (1 + e) with e = e^-|x| in [0, 1]; e / (1 + e) for x < 0 (exact tiny values).
ORTLITE_AI __m512 sigmoid_ps(__m512 x) {
  const __m512 e = exp_ps(_mm512_or_ps(x, set1(-0.0f)));  // -|x|
  const __m512 s = recip(_mm512_add_ps(e, set1(1.0f)));
  const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_mask_mul_ps(s, neg, s, e);
}

// ln x (Cephes logf): x = m 2^e with m in [sqrt(1/2), sqrt(2)) from vgetmantps /
// vgetexpps (subnormals included), a degree-8 polynomial in t = m - 1; then vfixupimmps
// for the special inputs: 0 -> -inf, +inf -> +inf, negative or -inf -> NaN, NaN -> NaN,
// 1 -> +0.
ORTLITE_AI __m512 log_ps(__m512 x) {
  __m512 m = _mm512_getmant_ps(x, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_zero);
  __m512 e = _mm512_getexp_ps(x);
  const __mmask16 hi = _mm512_cmp_ps_mask(m, set1(1.41421356237309505f), _CMP_GT_OQ);
  m = _mm512_mask_mul_ps(m, hi, m, set1(0.5f));
  e = _mm512_mask_add_ps(e, hi, e, set1(1.0f));
  const __m512 t = _mm512_sub_ps(m, set1(1.0f));
  const __m512 z = _mm512_mul_ps(t, t);
  __m512 p = _mm512_fmadd_ps(set1(7.0376836292e-2f), t, set1(-1.1514610310e-1f));
  p = _mm512_fmadd_ps(p, t, set1(1.1676998740e-1f));
  p = _mm512_fmadd_ps(p, t, set1(-1.2420140846e-1f));
  p = _mm512_fmadd_ps(p, t, set1(1.4249322787e-1f));
  p = _mm512_fmadd_ps(p, t, set1(-1.6668057665e-1f));
  p = _mm512_fmadd_ps(p, t, set1(2.0000714765e-1f));
  p = _mm512_fmadd_ps(p, t, set1(-2.4999993993e-1f));
  p = _mm512_fmadd_ps(p, t, set1(3.3333331174e-1f));
  __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, t), z);
  y = _mm512_fmadd_ps(e, set1(-2.12194440e-4f), y);
  y = _mm512_fnmadd_ps(set1(0.5f), z, y);
  __m512 r = _mm512_add_ps(t, y);
  r = _mm512_fmadd_ps(e, set1(0.693359375f), r);
  // Responses by input class (4 bits each, class 0 lowest): QNaN 2 (quiet x), SNaN 2,
  // zero 4 (-inf), one 8 (+0), -inf 3 (NaN), +inf 5 (+inf), negative 3, positive 0 (r).
  return _mm512_fixupimm_ps(r, x, _mm512_set1_epi32(0x03538422), 0);
}

// erf core for a = |v| >= 1: exp(-b^2) Q(1/b) ~ erfc(b), b = min(a, 4) (the fit's range:
// erf rounds to 1 from 4 on). Coefficients as fast::erf (fast_math.h).
ORTLITE_AI __m512 erfc_big_ps(__m512 a) {
  const __m512 b = _mm512_min_ps(_mm512_max_ps(a, set1(1.0f)), set1(4.0f));  // NaN: 4
  const __m512 u = recip(b);
  __m512 q = _mm512_fmadd_ps(set1(-0.0169467963f), u, set1(0.116897486f));
  q = _mm512_fmadd_ps(q, u, set1(-0.347588897f));
  q = _mm512_fmadd_ps(q, u, set1(0.569493055f));
  q = _mm512_fmadd_ps(q, u, set1(-0.502415299f));
  q = _mm512_fmadd_ps(q, u, set1(0.0498701483f));
  q = _mm512_fmadd_ps(q, u, set1(0.557938337f));
  q = _mm512_fmadd_ps(q, u, set1(0.000335604302f));
  return _mm512_mul_ps(exp_ps(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), b), b)), q);
}
// erf v / v for |v| < 1 (fast::erf's polynomial in v^2).
ORTLITE_AI __m512 erf_small_ratio_ps(__m512 v) {
  const __m512 z = _mm512_mul_ps(v, v);
  __m512 p = _mm512_fmadd_ps(set1(7.89820988e-05f), z, set1(-0.000802435388f));
  p = _mm512_fmadd_ps(p, z, set1(0.00519005349f));
  p = _mm512_fmadd_ps(p, z, set1(-0.0268548094f));
  p = _mm512_fmadd_ps(p, z, set1(0.112836123f));
  p = _mm512_fmadd_ps(p, z, set1(-0.376126289f));
  return _mm512_fmadd_ps(p, z, set1(1.12837923f));
}

ORTLITE_AI __m512 erf_ps(__m512 x) {
  const __m512 a = abs_ps(x);
  const __m512 small = _mm512_mul_ps(x, erf_small_ratio_ps(x));
  const __m512 big = copysign_ps(_mm512_sub_ps(set1(1.0f), erfc_big_ps(a)), x);
  const __mmask16 is_small = _mm512_cmp_ps_mask(a, set1(1.0f), _CMP_LT_OQ);
  const __mmask16 is_nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  return _mm512_mask_mov_ps(_mm512_mask_mov_ps(big, is_small, small), is_nan, x);
}

// x/2 (1 + erf(x / sqrt 2)); for x / sqrt 2 <= -1 as x/2 erfc(|x| / sqrt 2) (no
// cancellation; 0 from |x| / sqrt 2 = 4 on, where the fit ends).
ORTLITE_AI __m512 gelu_ps(__m512 x) {
  const __m512 v = _mm512_mul_ps(x, set1(0.70710678118654752f));
  const __m512 a = abs_ps(v);
  const __m512 h = _mm512_mul_ps(x, set1(0.5f));
  const __m512 small = _mm512_mul_ps(h, _mm512_fmadd_ps(v, erf_small_ratio_ps(v), set1(1.0f)));
  __m512 c = erfc_big_ps(a);
  c = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a, set1(4.0f), _CMP_LT_OQ), c);
  const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 f = _mm512_mask_mov_ps(_mm512_sub_ps(set1(2.0f), c), neg, c);
  const __m512 big = _mm512_mul_ps(h, f);
  const __mmask16 is_small = _mm512_cmp_ps_mask(a, set1(1.0f), _CMP_LT_OQ);
  const __mmask16 is_nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  return _mm512_mask_mov_ps(_mm512_mask_mov_ps(big, is_small, small), is_nan, x);
}

// x/2 (1 + tanh(w/2)) = x sigmoid(w), w = 2 sqrt(2/pi) (x + 0.044715 x^3).
ORTLITE_AI __m512 gelu_tanh_ps(__m512 x) {
  const __m512 x2 = _mm512_mul_ps(x, x);
  const __m512 w = _mm512_mul_ps(
      x, _mm512_fmadd_ps(x2, set1(1.5957691216057308f * 0.044715f), set1(1.5957691216057308f)));
  return _mm512_mul_ps(x, sigmoid_ps(w));
}

ORTLITE_AI __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
}

// y[i] = f(x[i]): four vectors per iteration, then single ones (the last masked). x and y may be
// the same array (each block is loaded before it is stored).
template <typename F>
ORTLITE_AI void map(const float* x, float* y, int64_t n, const F& f) {
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
    const __m512 c = _mm512_loadu_ps(x + i + 32), d = _mm512_loadu_ps(x + i + 48);
    const __m512 ra = f(a), rb = f(b), rc = f(c), rd = f(d);
    _mm512_storeu_ps(y + i, ra);
    _mm512_storeu_ps(y + i + 16, rb);
    _mm512_storeu_ps(y + i + 32, rc);
    _mm512_storeu_ps(y + i + 48, rd);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, f(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

// exp(x[i] - shift) into y, returning the sum (Softmax).
ORTLITE_AI float exp_sum_impl(const float* x, float shift, float* y, int64_t n) {
  const __m512 vs = set1(shift);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = exp_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), vs));
    const __m512 b = exp_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), vs));
    _mm512_storeu_ps(y + i, a);
    _mm512_storeu_ps(y + i + 16, b);
    acc0 = _mm512_add_ps(acc0, a);
    acc1 = _mm512_add_ps(acc1, b);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 a = exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vs));
    _mm512_mask_storeu_ps(y + i, m, a);
    acc0 = _mm512_add_ps(acc0, _mm512_maskz_mov_ps(m, a));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

// Functors for map (lambdas taking __m512 trip GCC's -Wpsabi).
#define ORTLITE_V512_FN(NAME, EXPR)                               \
  struct NAME {                                                   \
    ORTLITE_AI __m512 operator()(__m512 v) const { return EXPR; } \
  };
ORTLITE_V512_FN(ExpF, exp_ps(v))
ORTLITE_V512_FN(LogF, log_ps(v))
ORTLITE_V512_FN(SigmoidF, sigmoid_ps(v))
ORTLITE_V512_FN(TanhF, tanh_ps(v))
ORTLITE_V512_FN(ErfF, erf_ps(v))
ORTLITE_V512_FN(GeluF, gelu_ps(v))
ORTLITE_V512_FN(GeluTanhF, gelu_tanh_ps(v))
ORTLITE_V512_FN(SqrtF, _mm512_sqrt_ps(v))
#undef ORTLITE_V512_FN
struct Sub2F {
  __m512 a, b;
  ORTLITE_AI __m512 operator()(__m512 v) const { return _mm512_sub_ps(_mm512_sub_ps(v, a), b); }
};
struct MulF {
  __m512 c;
  ORTLITE_AI __m512 operator()(__m512 v) const { return _mm512_mul_ps(v, c); }
};

}  // namespace

void unary(UnaryFn fn, const float* x, float* y, int64_t n) {
  switch (fn) {
    case UnaryFn::kExp:
      return map(x, y, n, ExpF{});
    case UnaryFn::kLog:
      return map(x, y, n, LogF{});
    case UnaryFn::kSigmoid:
      return map(x, y, n, SigmoidF{});
    case UnaryFn::kTanh:
      return map(x, y, n, TanhF{});
    case UnaryFn::kErf:
      return map(x, y, n, ErfF{});
    case UnaryFn::kGelu:
      return map(x, y, n, GeluF{});
    case UnaryFn::kGeluTanh:
      return map(x, y, n, GeluTanhF{});
    case UnaryFn::kSqrt:
      return map(x, y, n, SqrtF{});
  }
}

float exp_sum(const float* x, float shift, float* y, int64_t n) {
  return exp_sum_impl(x, shift, y, n);
}

namespace {

// softmax below for a row of at most 256 floats held in 16 registers: one load, the exps
// independent of each other (the three passes over memory of the general loop left short
// rows, attention's 128-wide ones, waiting on each exp's latency). The same operations in
// the same order as the general loop (its sums alternate two accumulators over 32-float
// blocks, the tail in the first), so the results are the same bits.
template <int NV>
void softmax_short(const float* x, float* y, int64_t n, bool log) {
  const float ninf = -__builtin_inff();
  const int pairs = static_cast<int>(n / 32);  // vectors 0 .. 2 * pairs - 1 alternate
  const __mmask16 last = tail_mask(n - 16 * (NV - 1));
  __m512 v[NV];
  __m512 m0 = set1(ninf), m1 = set1(ninf);
#pragma GCC unroll 16
  for (int i = 0; i < NV; ++i) {
    // The lanes past the row hold 0 (their exp stays a normal number: a subnormal there
    // made each multiply below a microcode assist) and are left out of the max.
    v[i] = i + 1 < NV ? _mm512_loadu_ps(x + 16 * i) : _mm512_maskz_loadu_ps(last, x + 16 * i);
    const __mmask16 k = i + 1 < NV ? static_cast<__mmask16>(0xFFFF) : last;
    if (i & 1)
      m1 = _mm512_mask_max_ps(m1, k, v[i], m1);
    else
      m0 = _mm512_mask_max_ps(m0, k, v[i], m0);
  }
  const float mx = _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
  const __m512 vs = set1(mx);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int i = 0; i < NV; ++i) {
    v[i] = exp_ps(_mm512_sub_ps(v[i], vs));
    const __m512 t = i + 1 < NV ? v[i] : _mm512_maskz_mov_ps(last, v[i]);
    if (i < 2 * pairs && (i & 1))
      acc1 = _mm512_add_ps(acc1, t);
    else
      acc0 = _mm512_add_ps(acc0, t);
  }
  const float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
  if (log) {
    // (x - max) - ln sum: x - (max + ln sum) lost the low bits of ln sum next to a large max.
    const __m512 ls = log_ps(set1(sum));
#pragma GCC unroll 16
    for (int i = 0; i < NV; ++i) {
      if (i + 1 < NV)
        _mm512_storeu_ps(y + 16 * i,
                         _mm512_sub_ps(_mm512_sub_ps(_mm512_loadu_ps(x + 16 * i), vs), ls));
      else
        _mm512_mask_storeu_ps(
            y + 16 * i, last,
            _mm512_sub_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(last, x + 16 * i), vs), ls));
    }
  } else {
    const __m512 inv = set1(1.0f / sum);
#pragma GCC unroll 16
    for (int i = 0; i < NV; ++i) {
      if (i + 1 < NV)
        _mm512_storeu_ps(y + 16 * i, _mm512_mul_ps(v[i], inv));
      else
        _mm512_mask_storeu_ps(y + 16 * i, last, _mm512_mul_ps(v[i], inv));
    }
  }
}

using ShortFn = void (*)(const float*, float*, int64_t, bool);
constexpr ShortFn kShort[16] = {
    softmax_short<1>,  softmax_short<2>,  softmax_short<3>,  softmax_short<4>,
    softmax_short<5>,  softmax_short<6>,  softmax_short<7>,  softmax_short<8>,
    softmax_short<9>,  softmax_short<10>, softmax_short<11>, softmax_short<12>,
    softmax_short<13>, softmax_short<14>, softmax_short<15>, softmax_short<16>};

}  // namespace

namespace {

// 16 floats at p, or the lanes of `last` (the others 0) where not `full`; the store writes
// only those lanes.
ORTLITE_AI __m512 load_lanes(const float* p, bool full, __mmask16 last) {
  return full ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(last, p);
}
ORTLITE_AI void store_lanes(float* p, const __m512& v, bool full, __mmask16 last) {
  if (full)
    _mm512_storeu_ps(p, v);
  else
    _mm512_mask_storeu_ps(p, last, v);
}

// N vectors of 16 columns from x / y (column j of row 0 of a block with rows `stride`
// apart), the last one masked to `last`, normalized down `dim` rows: the max, the exps and
// their sums, then the scale or the log form, each a pass down the rows with the columns'
// state in registers. The masked-off lanes load 0 and are never stored.
template <int N, bool Masked>
ORTLITE_AI void softmax_cols16(const float* x, float* y, int64_t dim, int64_t stride, bool log,
                               __mmask16 last) {
  __m512 m[N], s[N];
  const auto load = [&](int64_t d, int k) {
    return load_lanes(x + d * stride + 16 * k, k + 1 < N || !Masked, last);
  };
  const auto store = [&](int64_t d, int k, const __m512& v) {
    store_lanes(y + d * stride + 16 * k, v, k + 1 < N || !Masked, last);
  };
#pragma GCC unroll 4
  for (int k = 0; k < N; ++k) m[k] = load(0, k);
  // max(v, m) keeps m where v is NaN (a NaN in the first row stays): as `v > m ? v : m`.
  for (int64_t d = 1; d < dim; ++d) {
#pragma GCC unroll 4
    for (int k = 0; k < N; ++k) m[k] = _mm512_max_ps(load(d, k), m[k]);
  }
#pragma GCC unroll 4
  for (int k = 0; k < N; ++k) s[k] = _mm512_setzero_ps();
  for (int64_t d = 0; d < dim; ++d) {
#pragma GCC unroll 4
    for (int k = 0; k < N; ++k) {
      const __m512 e = exp_ps(_mm512_sub_ps(load(d, k), m[k]));
      if (!log && (k + 1 < N || !Masked)) store(d, k, e);
      s[k] = _mm512_add_ps(s[k], e);
    }
  }
  if (log) {
    // (x - max) - ln sum: x - (max + ln sum) lost the low bits of ln sum next to a large max.
#pragma GCC unroll 4
    for (int k = 0; k < N; ++k) s[k] = log_ps(s[k]);
    for (int64_t d = 0; d < dim; ++d) {
#pragma GCC unroll 4
      for (int k = 0; k < N; ++k) store(d, k, _mm512_sub_ps(_mm512_sub_ps(load(d, k), m[k]), s[k]));
    }
  } else {
#pragma GCC unroll 4
    for (int k = 0; k < N; ++k) s[k] = _mm512_div_ps(set1(1.0f), s[k]);
    for (int64_t d = 0; d < dim; ++d) {
#pragma GCC unroll 4
      for (int k = 0; k < N; ++k) {
        const __m512 e = k + 1 < N || !Masked ? _mm512_loadu_ps(y + d * stride + 16 * k)
                                              : exp_ps(_mm512_sub_ps(load(d, k), m[k]));
        store(d, k, _mm512_mul_ps(e, s[k]));
      }
    }
  }
}

}  // namespace

bool softmax_short_rows(const float* x, float* y, int64_t rows, int64_t n, bool log) {
  if (n > 16) return false;
  // 16 rows at a time, transposed through a scratch block so that each of the n columns is
  // one register across 16 rows: the rows' max, exps, sums and scale run lane-wise. A call
  // a row (fast::softmax's short-row kernel and its horizontal reductions) took about 25 ns
  // for a row of 3, 1.4x onnxruntime's time.
  alignas(64) float t[16 * 16];
  for (int64_t r0 = 0; r0 < rows; r0 += 16) {
    const int64_t nr = rows - r0 < 16 ? rows - r0 : 16;
    const float* xb = x + r0 * n;
    for (int64_t r = 0; r < nr; ++r)
      for (int64_t d = 0; d < n; ++d) t[d * 16 + r] = xb[r * n + d];
    for (int64_t r = nr; r < 16; ++r)
      for (int64_t d = 0; d < n; ++d) t[d * 16 + r] = 0.0f;
    softmax_cols16<1, false>(t, t, n, 16, log, 0xFFFF);
    float* yb = y + r0 * n;
    for (int64_t r = 0; r < nr; ++r)
      for (int64_t d = 0; d < n; ++d) yb[r * n + d] = t[d * 16 + r];
  }
  return true;
}

bool softmax_columns(const float* x, float* y, int64_t dim, int64_t stride, int64_t j0, int64_t j1,
                     bool log) {
  int64_t j = j0;
  for (; j + 64 <= j1; j += 64) softmax_cols16<4, false>(x + j, y + j, dim, stride, log, 0xFFFF);
  const int64_t left = j1 - j;
  if (left <= 0) return true;
  const __mmask16 last = tail_mask(left - (left - 1) / 16 * 16);
  using Fn = void (*)(const float*, float*, int64_t, int64_t, bool, __mmask16);
  static constexpr Fn kFull[4] = {softmax_cols16<1, false>, softmax_cols16<2, false>,
                                  softmax_cols16<3, false>, softmax_cols16<4, false>};
  static constexpr Fn kMasked[4] = {softmax_cols16<1, true>, softmax_cols16<2, true>,
                                    softmax_cols16<3, true>, softmax_cols16<4, true>};
  (left % 16 == 0 ? kFull : kMasked)[(left - 1) / 16](x + j, y + j, dim, stride, log, last);
  return true;
}

void softmax(const float* x, float* y, int64_t n, bool log) {
  if (n <= 0) return;
  if (n <= 256) return kShort[(n + 15) / 16 - 1](x, y, n, log);
  const float ninf = -__builtin_inff();
  __m512 m0 = set1(ninf), m1 = set1(ninf);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm512_max_ps(_mm512_loadu_ps(x + i), m0);  // NaN: the second operand, ignored
    m1 = _mm512_max_ps(_mm512_loadu_ps(x + i + 16), m1);
  }
  for (; i < n; i += 16)
    m0 = _mm512_max_ps(_mm512_mask_loadu_ps(set1(ninf), tail_mask(n - i), x + i), m0);
  const float mx = _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
  const float sum = exp_sum_impl(x, mx, y, n);
  if (log) {
    // y = x - (max + ln sum)
    // (x - max) - ln sum, as above.
    map(x, y, n, Sub2F{set1(mx), log_ps(set1(sum))});
  } else {
    const __m512 inv = set1(1.0f / sum);
    map(y, y, n, MulF{inv});
  }
}

}  // namespace avx512
}  // namespace fast
}  // namespace ortlite

#pragma GCC diagnostic pop
#endif
