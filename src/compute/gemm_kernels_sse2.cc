// Baseline GEMM micro-kernels (SSE2: 16 vector registers of 128 bits).
#include <cstdint>

#include "compute/gemm_kernels.h"

namespace ortlite {
namespace gemm_detail {
namespace {

typedef float v4f __attribute__((vector_size(16)));
typedef double v2d __attribute__((vector_size(16)));

template <typename T>
struct VT;

template <>
struct VT<float> {
  using V = v4f;
  static constexpr int MR = 6, NV = 2;  // 6 x 8: 12 accumulators
  static constexpr int64_t MC = 96, NC = 512, KC = 256;
  static inline V madd(V acc, V a, V b) { return acc + a * b; }
};

template <>
struct VT<double> {
  using V = v2d;
  static constexpr int MR = 6, NV = 2;  // 6 x 4
  static constexpr int64_t MC = 96, NC = 256, KC = 256;
  static inline V madd(V acc, V a, V b) { return acc + a * b; }
};

#include "compute/gemm_kernel_body.inc"

}  // namespace

const GemmKernelTable<float>* sse2_table_f32() {
  static const GemmKernelTable<float> t = make_table<float>("sse2");
  return &t;
}
const GemmKernelTable<double>* sse2_table_f64() {
  static const GemmKernelTable<double> t = make_table<double>("sse2");
  return &t;
}

}  // namespace gemm_detail
}  // namespace ortlite
