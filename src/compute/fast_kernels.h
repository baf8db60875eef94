// Float32 loops over the vectorizable functions of fast_math.h, compiled for SSE2 (the
// baseline) and AVX2 + FMA (FMA contraction off: the two give bit-identical results), plus
// AVX-512 versions written with intrinsics (fast_avx512.cc: FMA, so they differ by
// rounding), picked by a run-time CPU check. The environment variable
// ORTLITE_FAST_ISA=sse2|avx2|avx512, read once, caps the choice (for tests; a level the
// CPU lacks is not taken).
#pragma once

#include <cstdint>

namespace ortlite {
namespace fast {

enum class UnaryFn : int {
  kExp,
  kLog,  // ln x; 0 -> -inf, negative -> NaN
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

// Softmax (log = false) or LogSoftmax (log = true) of one contiguous row of n > 0 values.
// x and y may be the same array only when log is false.
void softmax(const float* x, float* y, int64_t n, bool log);

// Softmax (log = false) or LogSoftmax of columns [j0, j1) of a block of `dim` rows
// `stride` floats apart, along the rows; x and y may be the same array only when log is
// false. Returns false, doing nothing, where the AVX-512 version is not used (the caller
// has a loop of its own).
bool softmax_columns(const float* x, float* y, int64_t dim, int64_t stride, int64_t j0, int64_t j1,
                     bool log);

// Softmax (log = false) or LogSoftmax of `rows` contiguous rows of n (<= 16) values; x and
// y may be the same array. Returns false, doing nothing, where the AVX-512 version is not
// used or n > 16.
bool softmax_short_rows(const float* x, float* y, int64_t rows, int64_t n, bool log);

// The instruction set unary() uses: "avx512", "avx2" or "sse2".
const char* isa();

}  // namespace fast
}  // namespace ortlite
