// Float32 loops over the vectorizable functions of fast_math.h, compiled for SSE2 (the
// baseline), AVX2 + FMA and AVX-512, and picked by a run-time CPU check. FMA contraction
// stays off (-std=c++17), so every variant gives bit-identical results.
#pragma once

#include <cstdint>

namespace ortlite {
namespace fast {

enum class UnaryFn : int {
  kExp,
  kSigmoid,
  kTanh,
  kErf,
  kGelu,      // x/2 (1 + erf(x / sqrt 2))
  kGeluTanh,  // x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  kSqrt,      // correctly rounded, like std::sqrt
};

// y[i] = fn(x[i]) for i < n. x and y may be the same array.
void unary(UnaryFn fn, const float* x, float* y, int64_t n);

// y[i] = exp(x[i] - shift) for i < n; returns the sum of the y[i] (Softmax's numerator and
// denominator in one pass). x and y may be the same array.
float exp_sum(const float* x, float shift, float* y, int64_t n);

// The instruction set unary() uses: "avx512", "avx2" or "sse2".
const char* isa();

}  // namespace fast
}  // namespace ortlite
