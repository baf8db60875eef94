// Vectorized reductions for the reduction engine (reduce_impl.h): the inner loops of
// ReduceSum / Mean / SumSquare / L1 / L2 over float and double (accumulated in double, over
// contiguous runs and down columns), of ReduceProd and ReduceLogSumExp over float and double
// runs (in double), of ReduceMax / Min over float and double, and of the sums and max / min
// over int32 and int64. Each is compiled for AVX-512, AVX2 and the baseline and picked at
// load time by the CPU; the lane layout (and so the order of the additions) is the same in
// all three, so the result does not depend on the CPU (up to the FMA contraction of the exp's
// polynomial).
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

// acc[i] += the sum over rows r of x[r * stride + i], x^2 or |x| (in that order, in
// double) for i in [0, n): the column-mode step of the sums.
enum class ColTerm { kPlain, kSquare, kAbs };
void add_columns(ColTerm term, const float* x, int64_t stride, int64_t rows, double* acc,
                 int64_t n);
void add_columns(ColTerm term, const double* x, int64_t stride, int64_t rows, double* acc,
                 int64_t n);

// acc[i] += the sum over chunks c and rows r of x[offs[c] + r * n + i], x^2 or |x| (in
// double) for i in [0, n), n < 8: the column-mode step when the innermost reduced dim lies
// right above a short innermost kept one, each chunk one run of the reduced dims above.
// Each column's values are summed in 8-lane groups, then the lanes in order.
void add_column_chunks(ColTerm term, const float* x, const int64_t* offs, int64_t chunks,
                       int64_t rows, double* acc, int64_t n);
void add_column_chunks(ColTerm term, const double* x, const int64_t* offs, int64_t chunks,
                       int64_t rows, double* acc, int64_t n);

// product over x[0..n) in double (32 lanes, combined in a fixed order).
double prod_f32(const float* x, int64_t n);
double prod_f64(const double* x, int64_t n);

// sum over x[0..n) of exp(x - p) in double: LogSumExp's terms, with an exp accurate to
// about 1 ulp (overflow gives inf, NaN stays NaN).
double sum_exp_f32(const float* x, int64_t n, double p);
double sum_exp_f64(const double* x, int64_t n, double p);

// acc[i] += the sum over rows r of exp(x[r * stride + i] - p[i]) (in that order, in double,
// the exp of sum_exp_*) for i in [0, n): LogSumExp's column-mode step.
void add_exp_columns(const float* x, int64_t stride, int64_t rows, const double* p, double* acc,
                     int64_t n);
void add_exp_columns(const double* x, int64_t stride, int64_t rows, const double* p, double* acc,
                     int64_t n);

// max / min over x[0..n), n >= 1; the first NaN of x when x holds one.
// y[i] = float(acc[i] / count) for i < n (ReduceMean's results; the division in double,
// rounded once to float).
void mean_to_f32(const double* acc, float* y, int64_t n, double count);

// acc[i] = max (kMax) or min of acc[i] and x[r * stride + i] for r < rows, i < n; a NaN
// wins and sticks (ReduceMax / ReduceMin's columns).
// Whether the float extremum_columns runs any number of columns as fast as 16 (AVX-512,
// the last columns in a masked vector).
bool extremum_columns_any_width();
void extremum_columns(bool kMax, const float* x, int64_t stride, int64_t rows, float* acc,
                      int64_t n);
void extremum_columns(bool kMax, const double* x, int64_t stride, int64_t rows, double* acc,
                      int64_t n);

// acc[i] = max (kMax) or min of acc[i] and x[offs[c] + r * n + i] over chunks c and rows r,
// for i < n < 16, a NaN winning and sticking: the column-mode step of float max / min when
// the innermost reduced dim lies right above a short innermost kept one (each chunk one run
// of the reduced dims above). False (acc untouched) where it has no kernel for this CPU or n.
bool extremum_column_chunks(bool kMax, const float* x, const int64_t* offs, int64_t chunks,
                            int64_t rows, float* acc, int64_t n);

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
