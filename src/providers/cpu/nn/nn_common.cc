#include "providers/cpu/nn/nn_common.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#endif

#include "providers/shared/broadcast_shape.h"

namespace ortlite {
namespace nn {

namespace {

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
// float16 <-> float with the F16C instructions, 8 at a time (both round to nearest even and
// keep subnormals, as Float16's own conversions do). A group holding an inf or NaN goes
// through Float16's conversions, which fix NaN payloads the way the rest of ortlite does.
__attribute__((target("avx2,f16c"))) void f16_to_f32_f16c(const uint16_t* s, float* d, int64_t n) {
  int64_t i = 0;
  const __m128i expo = _mm_set1_epi16(0x7c00);
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    if (_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(h, expo), expo))) {
      for (int j = 0; j < 8; ++j) d[i + j] = Float16::to_float(s[i + j]);
      continue;
    }
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) d[i] = Float16::to_float(s[i]);
}

__attribute__((target("avx2,f16c"))) void f32_to_f16_f16c(const float* s, uint16_t* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(s + i);
    __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
      // NaN as Float16::from_float writes it, the quiet NaN 0x7e00 with x's sign (vcvtps2ph
      // keeps payload bits): the float16 NaN lanes (magnitude above 0x7c00) replaced.
      const __m128i nan =
          _mm_cmpgt_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7fff)), _mm_set1_epi16(0x7c00));
      const __m128i q = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16(static_cast<short>(0x8000))),
                                     _mm_set1_epi16(0x7e00));
      h = _mm_or_si128(_mm_andnot_si128(nan, h), _mm_and_si128(nan, q));
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), h);
  }
  for (; i < n; ++i) d[i] = Float16::from_float(s[i]);
}

bool have_f16c() {
  static const bool on = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") &&
           !std::getenv("ORTLITE_NO_F16C");
  }();
  return on;
}
#else
bool have_f16c() {
  return false;
}
void f16_to_f32_f16c(const uint16_t*, float*, int64_t) {}
void f32_to_f16_f16c(const float*, uint16_t*, int64_t) {}
#endif

}  // namespace

void convert_to_float(DataType dtype, const void* src, float* dst, int64_t n) {
  switch (dtype) {
    case DataType::kFloat:
      std::copy(static_cast<const float*>(src), static_cast<const float*>(src) + n, dst);
      return;
    case DataType::kDouble: {
      const double* s = static_cast<const double*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
      return;
    }
    case DataType::kFloat16: {
      const Float16* s = static_cast<const Float16*>(src);
      if (have_f16c()) return f16_to_f32_f16c(static_cast<const uint16_t*>(src), dst, n);
      for (int64_t i = 0; i < n; ++i) dst[i] = Float16::to_float(s[i].bits);
      return;
    }
    case DataType::kBFloat16: {
      const BFloat16* s = static_cast<const BFloat16*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
      return;
    }
    default:
      ORTLITE_THROW(kNotImplemented, "convert_to_float: element type ", dtype_name(dtype),
                    " is not a floating-point type");
  }
}

void convert_from_float(DataType dtype, const float* src, void* dst, int64_t n) {
  switch (dtype) {
    case DataType::kFloat:
      std::copy(src, src + n, static_cast<float*>(dst));
      return;
    case DataType::kDouble: {
      double* d = static_cast<double*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = src[i];
      return;
    }
    case DataType::kFloat16: {
      Float16* d = static_cast<Float16*>(dst);
      if (have_f16c()) return f32_to_f16_f16c(src, static_cast<uint16_t*>(dst), n);
      for (int64_t i = 0; i < n; ++i) d[i].bits = Float16::from_float(src[i]);
      return;
    }
    case DataType::kBFloat16: {
      BFloat16* d = static_cast<BFloat16*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i].bits = BFloat16::from_float(src[i]);
      return;
    }
    default:
      ORTLITE_THROW(kNotImplemented, "convert_from_float: element type ", dtype_name(dtype),
                    " is not a floating-point type");
  }
}

void check_gemm_ranks(const KernelContext& ctx, const Tensor& A, const Tensor& B) {
  if (A.rank() != 2 || B.rank() != 2)
    ctx.fail(StatusCode::kInvalidArgument, "Gemm needs 2-D A and B, got A " +
                                               shape_to_string(A.shape()) + " and B " +
                                               shape_to_string(B.shape()));
}

GemmDims gemm_dims(const KernelContext& ctx, const Tensor& A, const Tensor& B, const Tensor* C,
                   bool trans_a, bool trans_b) {
  const int64_t M = trans_a ? A.dim(1) : A.dim(0);
  const int64_t K = trans_a ? A.dim(0) : A.dim(1);
  const int64_t KB = trans_b ? B.dim(1) : B.dim(0);
  const int64_t N = trans_b ? B.dim(0) : B.dim(1);
  if (K != KB)
    ctx.fail(StatusCode::kInvalidArgument,
             "Gemm inner dimensions do not match: A " + shape_to_string(A.shape()) +
                 (trans_a ? " (transA)" : "") + " and B " + shape_to_string(B.shape()) +
                 (trans_b ? " (transB)" : "") + " give K = " + std::to_string(K) + " and " +
                 std::to_string(KB));
  if (C) {
    bool ok = C->rank() <= 2;
    if (ok) {
      const Shape& cs = C->shape();
      const int64_t cm = cs.size() == 2 ? cs[0] : 1;
      const int64_t cn = cs.empty() ? 1 : cs.back();
      ok = (cm == M || cm == 1) && (cn == N || cn == 1);
    }
    if (!ok)
      ctx.fail(StatusCode::kInvalidArgument, "Gemm input C " + shape_to_string(C->shape()) +
                                                 " cannot be broadcast to the output shape [" +
                                                 std::to_string(M) + "," + std::to_string(N) + "]");
  }
  return {M, N, K};
}

MatMulPlan make_matmul_plan(const KernelContext& ctx, const Shape& a, const Shape& b) {
  if (a.empty() || b.empty())
    ctx.fail(StatusCode::kInvalidArgument, "MatMul needs inputs of rank >= 1, got A " +
                                               shape_to_string(a) + " and B " + shape_to_string(b));
  Shape a2 = a, b2 = b;
  if (a2.size() == 1) a2.insert(a2.begin(), 1);
  if (b2.size() == 1) b2.push_back(1);
  MatMulPlan p;
  p.M = a2[a2.size() - 2];
  p.K = a2.back();
  p.N = b2.back();
  if (b2[b2.size() - 2] != p.K)
    ctx.fail(StatusCode::kInvalidArgument,
             "MatMul inner dimensions do not match: A " + shape_to_string(a) + " and B " +
                 shape_to_string(b) + " (A's last dim " + std::to_string(p.K) + " != B's dim " +
                 std::to_string(b2[b2.size() - 2]) + ")");
  const Shape ab(a2.begin(), a2.end() - 2), bb(b2.begin(), b2.end() - 2);
  Shape batch;
  try {
    batch = broadcast_shapes(ab, bb, "MatMul");
  } catch (const Error&) {
    ctx.fail(StatusCode::kInvalidArgument, "MatMul batch dimensions cannot be broadcast: A " +
                                               shape_to_string(a) + " and B " + shape_to_string(b));
  }
  p.batches = shape_size(batch);
  p.out = batch;
  if (a.size() > 1) p.out.push_back(p.M);
  if (b.size() > 1) p.out.push_back(p.N);
  p.b_shared = shape_size(bb) == 1;
  if (!p.b_shared && p.batches > 0) {
    batch_matrix_indices(ab, bb, batch, &p.a_index, &p.b_index);
  }
  return p;
}

void batch_matrix_indices(const Shape& ab, const Shape& bb, const Shape& batch,
                          std::vector<int64_t>* a_index, std::vector<int64_t>* b_index) {
  const int64_t batches = shape_size(batch);
  const std::vector<int64_t> sa = broadcast_strides(ab, batch);
  const std::vector<int64_t> sb = broadcast_strides(bb, batch);
  a_index->resize(static_cast<size_t>(batches));
  b_index->resize(static_cast<size_t>(batches));
  std::vector<int64_t> idx(batch.size(), 0);
  int64_t ia = 0, ib = 0;
  for (int64_t n = 0; n < batches; ++n) {
    (*a_index)[n] = ia;
    (*b_index)[n] = ib;
    for (size_t d = batch.size(); d-- > 0;) {
      ++idx[d];
      ia += sa[d];
      ib += sb[d];
      if (idx[d] < batch[d]) break;
      ia -= sa[d] * idx[d];
      ib -= sb[d] * idx[d];
      idx[d] = 0;
    }
  }
}

}  // namespace nn
}  // namespace ortlite
