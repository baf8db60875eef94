// Branch-free float32 versions of exp, tanh, sigmoid and erf (and expm1, log, log1p below) built
// only from arithmetic, comparisons and bit operations, so that loops over them auto-vectorize (the
// libm calls do not). Accuracy, measured over all float inputs against double precision: exp <= 2
// ulp, tanh and sigmoid <= 3 ulp, erf <= 4 ulp (about 2.5e-7 relative). NaN propagates;
// overflow gives inf, underflow 0 (subnormal results are produced for exp).
// Also below: sin / cos of float computed in double (within 1 ulp) and tanh of double (within
// 2 ulp), for the map loops of src/providers/cpu/math/unary.cc.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace ortlite {
namespace fast {

inline float as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t as_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
// c ? a : b as bit operations: GCC (with the default -ftrapping-math) does not if-convert
// a ?: on floats whose condition is a float comparison, which blocks vectorization.
inline float select(bool c, float a, float b) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return as_float((as_bits(a) & m) | (as_bits(b) & ~m));
}
inline float copy_sign(float mag, float sgn) {
  return as_float((as_bits(mag) & 0x7fffffffu) | (as_bits(sgn) & 0x80000000u));
}

// e^x: x = n ln2 + r, |r| <= ln2/2, e^r by a degree-7 polynomial (Cephes coefficients),
// scaled by 2^n in two steps so that subnormal results are rounded once.
inline float exp(float x) {
  // Argument order matters: std::max(-104, NaN) is -104, so NaN never reaches the int
  // conversion; it is put back at the end.
  const float xc = std::min(88.8f, std::max(-104.0f, x));
  const float t = xc * 1.44269504088896341f;
  const float n = (t + 12582912.0f) - 12582912.0f;  // round to nearest (|t| < 2^22)
  const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = (p * r) * r + r + 1.0f;
  const int32_t ni = static_cast<int32_t>(n);
  const int32_t n1 = ni / 2;
  const int32_t n2 = ni - n1;
  const float s1 = as_float(static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = as_float(static_cast<uint32_t>(n2 + 127) << 23);
  const float res = (y * s1) * s2;
  return select((as_bits(x) & 0x7fffffffu) > 0x7f800000u, x, res);
}

// 1 / (1 + e^-x), as e / (1 + e) with e = e^x for x < 0 (no overflow, exact tiny values).
inline float sigmoid(float x) {
  const float e = fast::exp(-std::fabs(x));
  const float s = 1.0f / (1.0f + e);
  return select(x < 0.0f, e * s, s);
}

// tanh: odd polynomial below |x| = 0.625 (Cephes), 1 - 2 / (e^2|x| + 1) above.
inline float tanh(float x) {
  const float ax = std::fabs(x);
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = copy_sign((p * z) * x + x, x);     // tanh(-0) = -0
  const float e = fast::exp(2.0f * std::min(ax, 9.5f));  // NaN stays NaN
  const float large = copy_sign(1.0f - 2.0f / (e + 1.0f), x);
  return select(ax < 0.625f, small, large);
}

// erf: x P(x^2) below |x| = 1; 1 - e^-x^2 Q(1/|x|) for 1 <= |x| (clamped at 4, where
// erf rounds to 1). Coefficients are least-squares fits made for ortlite.
inline float erf(float x) {
  const float ax = std::fabs(x);
  const float z = x * x;
  float p = 7.89820988e-05f;
  p = p * z - 0.000802435388f;
  p = p * z + 0.00519005349f;
  p = p * z - 0.0268548094f;
  p = p * z + 0.112836123f;
  p = p * z - 0.376126289f;
  p = p * z + 1.12837923f;
  const float small = x * p;
  const float b = std::min(std::max(ax, 1.0f), 4.0f);  // NaN stays NaN
  const float u = 1.0f / b;
  float q = -0.0169467963f;
  q = q * u + 0.116897486f;
  q = q * u - 0.347588897f;
  q = q * u + 0.569493055f;
  q = q * u - 0.502415299f;
  q = q * u + 0.0498701483f;
  q = q * u + 0.557938337f;
  q = q * u + 0.000335604302f;
  const float large = copy_sign(1.0f - fast::exp(-(b * b)) * q, x);
  return select(ax < 1.0f, small, large);
}

// e^x - 1: x (1 + x/2 + ... + x^7/8!) below |x| = 0.5 (Taylor, truncation < 1e-8 relative),
// exp(x) - 1 above (<= 5 ulp near |x| = 0.5, cancellation-free further out).
inline float expm1(float x) {
  float p = 2.48015873e-5f;  // 1/8!
  p = p * x + 1.98412698e-4f;
  p = p * x + 1.38888889e-3f;
  p = p * x + 8.33333333e-3f;
  p = p * x + 4.16666667e-2f;
  p = p * x + 1.66666667e-1f;
  p = p * x + 0.5f;
  const float small = (x * x) * p + x;
  const float large = fast::exp(x) - 1.0f;
  return select(std::fabs(x) < 0.5f, small, large);
}

// ln x for positive normal x (Cephes logf: x = m 2^e, m in [sqrt(1/2), sqrt(2)), a degree-9
// polynomial in m - 1; about 1 ulp). Other inputs give unspecified values: callers keep
// to the domain or select around it.
inline float log_positive(float x) {
  const uint32_t b = as_bits(x);
  const float m0 = as_float((b & 0x007fffffu) | 0x3f000000u);  // [0.5, 1)
  const bool lo = m0 < 0.707106781186547524f;
  const float e = static_cast<float>(static_cast<int32_t>(b >> 23) - 126 - (lo ? 1 : 0));
  const float t = select(lo, m0 + m0, m0) - 1.0f;
  const float z = t * t;
  float p = 7.0376836292e-2f;
  p = p * t - 1.1514610310e-1f;
  p = p * t + 1.1676998740e-1f;
  p = p * t - 1.2420140846e-1f;
  p = p * t + 1.4249322787e-1f;
  p = p * t - 1.6668057665e-1f;
  p = p * t + 2.0000714765e-1f;
  p = p * t - 2.4999993993e-1f;
  p = p * t + 3.3333331174e-1f;
  float y = (p * t) * z;
  y = y + e * -2.12194440e-4f;
  y = y - 0.5f * z;
  return (t + y) + e * 0.693359375f;
}

// ln x for every float: subnormals scaled by 2^23 first; 0 -> -inf, +inf -> +inf,
// negative -> NaN, NaN -> NaN.
inline float log(float x) {
  const bool sub = x < 1.17549435e-38f;  // subnormal, zero or negative
  const float xs = select(sub, x * 8388608.0f, x);
  const float r = log_positive(xs) - select(sub, 15.9423851528787421f, 0.0f);  // 23 ln 2
  const float inf = as_float(0x7f800000u);
  float y = select(x == inf, inf, r);
  y = select(x == 0.0f, -inf, y);
  y = select(x < 0.0f, as_float(0x7fc00000u), y);
  return select(x != x, x, y);
}

// ln(1 + u) for 0 <= u <= 2^100: log(w) u / (w - 1) with w = 1 + u, which cancels the
// rounding of w (Goldberg), and u itself when w rounds to 1.
inline float log1p_nonneg(float u) {
  const float w = 1.0f + u;
  const float d = w - 1.0f;
  const float r = log_positive(w) * (u / select(d == 0.0f, 1.0f, d));
  return select(d == 0.0f, u, r);
}

// e^x for double, branch-free, as fdlibm's exp: x = n ln2 + r with |r| <= ln2/2 (ln 2 in
// two parts), e^r by its degree-5 rational form (below 1 ulp), scaled by 2^n in two steps
// (each factor a normal power of two) so that subnormal results are rounded once. x is
// clamped to [-746, 710] first: beyond, the result overflows to inf or underflows to 0.
// NaN propagates.
inline double exp_f64(double x) {
  const double xc = std::min(std::max(x, -746.0), 710.0);  // NaN stays NaN
  const double kMagic = 6755399441055744.0;                // 1.5 * 2^52
  const double t = xc * 1.44269504088896338700e+00 + kMagic;
  const double n = t - kMagic;
  uint64_t tb;
  std::memcpy(&tb, &t, 8);
  const int64_t ni = static_cast<int64_t>(tb - 0x4338000000000000ull);  // n, |n| <= 1077
  const double hi = xc - n * 6.93147180369123816490e-01;                // exact
  const double lo = n * 1.90821492927058770002e-10;
  const double r = hi - lo;
  const double r2 = r * r;
  const double c =
      r - r2 * (1.66666666666666019037e-01 +
                r2 * (-2.77777777770155933842e-03 +
                      r2 * (6.61375632143793436117e-05 +
                            r2 * (-1.65339022054652515390e-06 + r2 * 4.13813679705723846039e-08))));
  const double er = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi);
  const uint64_t n1 = (static_cast<uint64_t>(ni + 2048) >> 1) - 1024u;  // floor(n / 2)
  const uint64_t n2 = static_cast<uint64_t>(ni) - n1;
  const uint64_t b1 = (n1 + 1023u) << 52, b2 = (n2 + 1023u) << 52;
  double s1, s2;
  std::memcpy(&s1, &b1, 8);
  std::memcpy(&s2, &b2, 8);
  return (er * s1) * s2;
}

// tanh for double, branch-free: below |x| = 0.625 the Cephes rational approximation
// x + x^3 P(x^2) / Q(x^2); above, 1 - 2 / (e^2|x| + 1) with exp_f64 above, |x| clamped
// at 22 (tanh rounds to 1 there). Within 2 ulp of the exact value (the largest
// errors just above |x| = 0.625); NaN propagates.
inline double tanh_f64(double x) {
  const double ax = std::fabs(x);
  const double z = x * x;
  const double p =
      (-9.64399179425052238628e-1 * z - 9.92877231001918586564e1) * z - 1.61468768441708447952e3;
  const double q = ((z + 1.12811678491632931402e2) * z + 2.23548839060100448583e3) * z +
                   4.84406305325125486048e3;
  const double small = std::copysign(x + (x * z) * (p / q), x);  // tanh(-0) = -0
  const double e = exp_f64(2.0 * std::min(ax, 22.0));            // NaN stays NaN
  const double large = std::copysign(1.0 - 2.0 / (e + 1.0), x);
  return ax < 0.625 ? small : large;
}

// 1 / (1 + e^-x) for x >= 0 and e^x / (1 + e^x) below (the forms of a scalar sigmoid, with
// e^-|x| from exp_f64), branch-free so that a loop over it vectorizes. NaN stays NaN,
// +-inf give 1 and 0.
inline double sigmoid_f64(double x) {
  const double e = exp_f64(-std::fabs(x));
  const double d = 1.0 + e;
  return x >= 0.0 ? 1.0 / d : e / d;
}

// sin x (cos_shift 0) or cos x (cos_shift 1) for |x| <= 2^20, computed in double: x = n pi/2
// + r with |r| <= pi/4 (Cody-Waite with pi/2 in three parts of 33, 33 and 53 bits, so that
// n * part is exact for |n| < 2^20 and the first subtraction is exact), then Taylor
// polynomials in r (to r^11 for sin, r^12 for cos: truncation below 1e-11 relative) and one
// rounding to float, which keeps the result within 1 ulp (nearly always correctly rounded).
// Larger |x|, infinities and NaN give unspecified values: callers patch them
// (sincos_in_range says which).
inline bool sincos_in_range(float x) {
  return (as_bits(x) & 0x7fffffffu) <= 0x49800000u;  // |x| <= 2^20
}
inline float sincos_reduced(float xf, uint64_t cos_shift) {
  const double x = static_cast<double>(xf);
  const double kMagic = 6755399441055744.0;  // 1.5 * 2^52: rounds |t| < 2^51 to an integer
  const double t = x * 0.63661977236758134308 + kMagic;
  const double n = t - kMagic;
  uint64_t q;
  std::memcpy(&q, &t, 8);  // the low bits of t's significand hold n (two's complement)
  q += cos_shift;
  const double r = ((x - n * 1.57079632673412561417e+00) - n * 6.07710050630396597660e-11) -
                   n * 2.02226624879595063154e-21;
  const double z = r * r;
  double s = -2.5052108385441718775e-08;  // -1/11!
  s = s * z + 2.7557319223985890653e-06;  // 1/9!
  s = s * z - 1.9841269841269841270e-04;  // -1/7!
  s = s * z + 8.3333333333333333333e-03;  // 1/5!
  s = s * z - 1.6666666666666666667e-01;  // -1/3!
  s = std::copysign(r + (r * z) * s, r);  // sin(-0) = -0
  double c = 2.0876756987868098979e-09;   // 1/12!
  c = c * z - 2.7557319223985890653e-07;  // -1/10!
  c = c * z + 2.4801587301587301587e-05;  // 1/8!
  c = c * z - 1.3888888888888888889e-03;  // -1/6!
  c = c * z + 4.1666666666666666667e-02;  // 1/4!
  c = c * z - 0.5;
  c = c * z + 1.0;
  uint64_t sb, cb;
  std::memcpy(&sb, &s, 8);
  std::memcpy(&cb, &c, 8);
  const uint64_t pick = 0u - (q & 1u);  // odd quadrant: the other function
  uint64_t v = (cb & pick) | (sb & ~pick);
  v ^= (q & 2u) << 62;  // quadrants 2 and 3: negated
  double y;
  std::memcpy(&y, &v, 8);
  return static_cast<float>(y);
}

}  // namespace fast
}  // namespace ortlite
