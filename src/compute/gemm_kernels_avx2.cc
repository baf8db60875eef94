// GEMM micro-kernels for AVX2 + FMA (16 vector registers of 256 bits). Everything in this
// file is compiled for that target; it is only called after a run-time CPU check
// (compute/gemm.cc).
#include <cstdint>

#include "compute/gemm_kernels.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>

#define ORTLITE_HAVE_AVX2_KERNELS 1
#pragma GCC push_options
#pragma GCC target("avx2,fma")

namespace ortlite {
namespace gemm_detail {
namespace {

template <typename T>
struct VT;

template <>
struct VT<float> {
  using V = __m256;
  static constexpr int MR = 6, NV = 2;  // 6 x 16: 12 accumulators
  static constexpr int64_t MC = 96, NC = 512, KC = 256;
  static inline V madd(V acc, V a, V b) { return _mm256_fmadd_ps(a, b, acc); }
};

template <>
struct VT<double> {
  using V = __m256d;
  static constexpr int MR = 6, NV = 2;  // 6 x 8
  static constexpr int64_t MC = 96, NC = 256, KC = 256;
  static inline V madd(V acc, V a, V b) { return _mm256_fmadd_pd(a, b, acc); }
};

#include "compute/gemm_kernel_body.inc"

}  // namespace

const GemmKernelTable<float>* avx2_table_f32() {
  static const GemmKernelTable<float> t = make_table<float>("avx2");
  return &t;
}
const GemmKernelTable<double>* avx2_table_f64() {
  static const GemmKernelTable<double> t = make_table<double>("avx2");
  return &t;
}

}  // namespace gemm_detail
}  // namespace ortlite

#pragma GCC pop_options
#else
namespace ortlite {
namespace gemm_detail {
const GemmKernelTable<float>* avx2_table_f32() {
  return nullptr;
}
const GemmKernelTable<double>* avx2_table_f64() {
  return nullptr;
}
}  // namespace gemm_detail
}  // namespace ortlite
#endif
