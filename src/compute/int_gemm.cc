#include "compute/int_gemm.h"

#include "compute/simd.h"

namespace ortlite {
namespace nn {

// Compiled for AVX-512F and AVX2 as well as the baseline (resolved once, at load): wrapping
// integer multiply-adds vectorize there (vpmulld; 64-bit lanes from 32-bit products).
ORTLITE_NN_CLONES512 void int_axpy(uint32_t* row, uint32_t a, const uint32_t* b, int64_t n) {
  for (int64_t j = 0; j < n; ++j) row[j] += a * b[j];
}

ORTLITE_NN_CLONES512 void int_axpy(uint64_t* row, uint64_t a, const uint64_t* b, int64_t n) {
  for (int64_t j = 0; j < n; ++j) row[j] += a * b[j];
}

ORTLITE_NN_CLONES512 uint32_t int_dot(const uint32_t* a, const uint32_t* b, int64_t n) {
  uint32_t acc = 0;
  for (int64_t k = 0; k < n; ++k) acc += a[k] * b[k];
  return acc;
}

ORTLITE_NN_CLONES512 uint64_t int_dot(const uint64_t* a, const uint64_t* b, int64_t n) {
  uint64_t acc = 0;
  for (int64_t k = 0; k < n; ++k) acc += a[k] * b[k];
  return acc;
}

}  // namespace nn
}  // namespace ortlite
