// Shared helpers of the neural-network kernels (src/providers/cpu/nn).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ortlite/kernel.h"
#include "providers/shared/spatial_attrs.h"

namespace ortlite {
namespace nn {

// ---- element conversion (float16 / bfloat16 compute through float) ----------------------

// Converts n elements of `src` (float, double, float16 or bfloat16 by dtype) into `dst`.
void convert_to_float(DataType dtype, const void* src, float* dst, int64_t n);
void convert_from_float(DataType dtype, const float* src, void* dst, int64_t n);

// Expands the input of one group (Cg channels, in[] image each) for output positions
// [p0, p0 + pc) into col[(c * ksize + k) * pc + (p - p0)], zero where a tap falls in the
// padding (conv.cc; instantiated for float, other types inside conv.cc).
template <typename T>
void im2col(const T* x, const SpatialGeometry& g, int64_t Cg, int64_t p0, int64_t pc, T* col);

inline int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// Output positions o along an axis whose tap at input offset `off` (input index o * s + off)
// lies inside [0, in), clipped to [0, out): the range [lo, hi).
inline void valid_range(int64_t off, int64_t s, int64_t in, int64_t out, int64_t& lo, int64_t& hi) {
  lo = floor_div(-off + s - 1, s);
  if (lo < 0) lo = 0;
  hi = floor_div(in - 1 - off, s) + 1;
  if (hi > out) hi = out;
  if (hi < lo) hi = lo;
}

// numpy matmul shapes for MatMul and com.ortlite FusedMatMul: 1-D operands promoted (A:
// [1, K], B: [K, 1]) and the added dim dropped from `out`; batch dims broadcast.
struct MatMulPlan {
  Shape out;
  int64_t M = 0, N = 0, K = 0;
  int64_t batches = 1;
  bool b_shared = false;                  // B has no batch (or all-1 batch dims)
  std::vector<int64_t> a_index, b_index;  // matrix index of A / B per output batch
};
// Throws InvalidArgument (naming both shapes) for rank-0 operands, mismatched inner
// dimensions or batch dimensions that do not broadcast.
MatMulPlan make_matmul_plan(const KernelContext& ctx, const Shape& a, const Shape& b);
// Runs fn(n, tp) for the products n in [0, batches) of a batched MatMul, each of about
// `flops` operations: whole products per thread (tp null) when they are small or share out
// evenly (12 attention heads over 2 threads, 12 x (384 x 384 x 64) against onnxruntime: 0.55
// with each product split over the threads, 0.75-1.16 whole), else one after another, each
// split over the pool (tp = pool).
template <typename Fn>
void for_each_product(ThreadPool* pool, int64_t batches, double flops, const Fn& fn) {
  const int64_t threads = pool ? pool->num_threads() : 1;
  if (batches > 1 && threads > 1 &&
      (flops < 4e6 || batches % threads == 0 || batches >= 4 * threads)) {
    parallel_for(pool, batches, flops, [&](int64_t s, int64_t e) {
      for (int64_t n = s; n < e; ++n) fn(n, static_cast<ThreadPool*>(nullptr));
    });
  } else {
    for (int64_t n = 0; n < batches; ++n) fn(n, pool);
  }
}

// For each output batch of a batched product (the broadcast `batch` of a's batch dims `ab`
// and b's `bb`): the index of the matrix of a and of b it multiplies.
void batch_matrix_indices(const Shape& ab, const Shape& bb, const Shape& batch,
                          std::vector<int64_t>* a_index, std::vector<int64_t>* b_index);

// Gemm / FusedGemm shapes. check_gemm_ranks: A and B must be 2-D. gemm_dims: op(A) is
// M x K and op(B) K x N with the same K, and C (when given) broadcasts unidirectionally to
// [M, N]. Both fail with kInvalidArgument naming the shapes.
struct GemmDims {
  int64_t M, N, K;
};
void check_gemm_ranks(const KernelContext& ctx, const Tensor& A, const Tensor& B);
GemmDims gemm_dims(const KernelContext& ctx, const Tensor& A, const Tensor& B, const Tensor* C,
                   bool trans_a, bool trans_b);

}  // namespace nn
}  // namespace ortlite
