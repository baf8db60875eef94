// Vectorized contiguous reductions for the reduction engine (reduce_impl.h): the inner loops
// of ReduceSum / Mean / SumSquare / L1 / L2 over float and double (accumulated in double),
// of ReduceMax / Min over float and double, and of the sums and max / min over int32 and
// int64. Each is compiled for AVX-512, AVX2 and the
// baseline and picked at load time by the CPU; the lane layout (and so the order of the
// additions) is the same in all three, so the result does not depend on the CPU.
#pragma once

#include <cstdint>

namespace ortlite {
namespace reduce {
namespace simd {

// sum over x[0..n) of x, x*x or |x|, in double.
double sum_f32(const float* x, int64_t n);
double sum_sq_f32(const float* x, int64_t n);
double sum_abs_f32(const float* x, int64_t n);
double sum_f64(const double* x, int64_t n);
double sum_sq_f64(const double* x, int64_t n);
double sum_abs_f64(const double* x, int64_t n);

// max / min over x[0..n), n >= 1; the first NaN of x when x holds one.
float max_f32(const float* x, int64_t n);
float min_f32(const float* x, int64_t n);
double max_f64(const double* x, int64_t n);
double min_f64(const double* x, int64_t n);

// Wrapping sums and max / min (n >= 1) of int32 / int64 runs.
int32_t sum_i32(const int32_t* x, int64_t n);
int64_t sum_i64(const int64_t* x, int64_t n);
int32_t max_i32(const int32_t* x, int64_t n);
int32_t min_i32(const int32_t* x, int64_t n);
int64_t max_i64(const int64_t* x, int64_t n);
int64_t min_i64(const int64_t* x, int64_t n);

}  // namespace simd
}  // namespace reduce
}  // namespace ortlite
