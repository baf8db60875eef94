// Vectorized loops of the normalizations that compute in double (mean-variance, group and
// Lp normalization): float / double runs read and written with the statistics and the
// affine step in double, so they give the results of the scalar double arithmetic up to
// the order of the additions. Each is compiled for AVX-512, AVX2 and the baseline
// (ORTLITE_NN_CLONES512); the lane layout, and so the order of the additions, is the same
// in all three (the AVX2 and AVX-512 builds may fuse a multiply and add, a last-bit
// difference in double).
#pragma once

#include <cstdint>

namespace ortlite {
namespace nn {

// sum over x[0..n) of (x - mean)^2, in double.
double sum_sq_dev(const float* x, int64_t n, double mean);
double sum_sq_dev(const double* x, int64_t n, double mean);

// y[i] = (x[i] - sub) * mul + add, computed in double and rounded once (add = -0.0 adds
// nothing, negative zeros included).
void affine(const float* x, float* y, int64_t n, double sub, double mul, double add);
void affine(const double* x, double* y, int64_t n, double sub, double mul, double add);

// y[i] = x[i] * mul[i] in double, rounded once.
void scale_rows(const float* x, const double* mul, float* y, int64_t n);
void scale_rows(const double* x, const double* mul, double* y, int64_t n);

}  // namespace nn
}  // namespace ortlite
