// MatMul (opset 1, 9, 13): numpy matmul semantics. 1-D operands are promoted (A: [1, K],
// B: [K, 1]) and the added dim removed from the result; leading (batch) dims broadcast.
// float / double go through the packed GEMM (a constant 2-D B is packed once at load; with
// AVX-512F, products of more than one row use the fused GEMM, B packed for it on first use);
// float16 / bfloat16 compute in float; int32 / int64 / uint32 / uint64 wrap around.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <vector>

#include "providers/shared/broadcast_shape.h"
#include "compute/fused_gemm.h"
#include "compute/gemm.h"
#include "compute/int_gemm.h"
#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {
namespace {

template <typename T>
void matmul_real(const MatMulPlan& p, const T* a, const T* b, T* c,
                 const PackedGemmMatrix<T>* packed, ThreadPool* pool) {
  const int64_t M = p.M, N = p.N, K = p.K;
  if (p.b_shared) {
    // All batches of A against one B: a single (batches * M) x K times K x N product.
    const int64_t rows = p.batches * M;
    if (packed) {
      gemm_packed_b<T>(false, rows, a, K, *packed, T(1), T(0), c, N, pool);
    } else {
      gemm(false, false, rows, N, K, T(1), a, K, b, N, T(0), c, N, pool);
    }
    return;
  }
  const double per = 2.0 * static_cast<double>(M) * static_cast<double>(N) * K;
  // The distinct B's of all batches, for the float GEMM's choice of reading B in place.
  int64_t b_count = 1;
  for (int64_t n = 0; n < p.batches; ++n) b_count = std::max(b_count, p.b_index[n] + 1);
  const double b_stream = static_cast<double>(b_count) * static_cast<double>(K * N) * sizeof(T);
  for_each_product(pool, p.batches, per, [&](int64_t n, ThreadPool* tp) {
    if constexpr (std::is_same_v<T, float>) {
      gemm(false, false, M, N, K, T(1), a + p.a_index[n] * M * K, K, b + p.b_index[n] * K * N, N,
           T(0), c + n * M * N, N, tp, b_stream);
    } else {
      gemm(false, false, M, N, K, T(1), a + p.a_index[n] * M * K, K, b + p.b_index[n] * K * N, N,
           T(0), c + n * M * N, N, tp);
    }
  });
}

template <typename T>
void matmul_int(const MatMulPlan& p, const T* a, const T* b, T* c, ThreadPool* pool) {
  const int64_t M = p.M, N = p.N, K = p.K;
  if (p.b_shared) {
    int_gemm<T>(false, false, p.batches * M, N, K, a, K, b, N, c, pool);
    return;
  }
  for (int64_t n = 0; n < p.batches; ++n)
    int_gemm<T>(false, false, M, N, K, a + p.a_index[n] * M * K, K, b + p.b_index[n] * K * N, N,
                c + n * M * N, pool);
}

class MatMul final : public Kernel {
 public:
  explicit MatMul(const KernelInfo& info) {
    const Tensor* w = info.has_input(1) ? info.constant_input(1) : nullptr;
    if (!w || w->rank() != 2 || w->numel() == 0) return;
    const int64_t K = w->dim(0), N = w->dim(1);
    switch (w->dtype()) {
      case DataType::kFloat:
        packed_f32_ = pack_gemm_b<float>(false, K, N, w->data<float>(), N);
        break;
      case DataType::kDouble:
        packed_f64_ = pack_gemm_b<double>(false, K, N, w->data<double>(), N);
        break;
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        std::vector<float> f(static_cast<size_t>(w->numel()));
        convert_to_float(w->dtype(), w->raw_data(), f.data(), w->numel());
        packed_f32_ = pack_gemm_b<float>(false, K, N, f.data(), N);
        break;
      }
      default:
        return;
    }
    packed_dtype_ = w->dtype();
    packed_shape_ = w->shape();
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& A = ctx.required_input(0);
    const Tensor& B = ctx.required_input(1);
    if (A.dtype() != B.dtype())
      ctx.fail(StatusCode::kInvalidArgument, std::string("MatMul inputs must have the same ") +
                                                 "element type, got A " + dtype_name(A.dtype()) +
                                                 " and B " + dtype_name(B.dtype()));
    const MatMulPlan p = make_matmul_plan(ctx, A.shape(), B.shape());
    Tensor& Y = ctx.allocate_output(0, A.dtype(), p.out);
    if (Y.numel() == 0) return;
    ThreadPool* pool = ctx.thread_pool();
    const bool use_packed = packed_dtype_ == B.dtype() && packed_shape_ == B.shape();
    switch (A.dtype()) {
      case DataType::kFloat:
        if (use_packed && p.b_shared && p.batches * p.M > 1 && !narrow_b(p.K, p.N) &&
            fgemm::available()) {
          // Products of more rows run the fused GEMM's kernel, B packed for it on the first
          // such run (not at load: a chain of one-row products, 100 MiB of weights, loaded
          // in 129 ms with it against 24 without). 1 thread, this CPU: 4 x 768 x 3072 606 ->
          // 201 us, 16 x 1024 x 1024 495 -> 307, 128 x 768 x 768 1457 -> 1343.
          std::call_once(fused_once_, [&] {
            fused_b_ = fgemm::Packed::pack(B.data<float>(), p.N, p.N, p.K, true);
          });
          fgemm::gemm_w_right(A.data<float>(), p.K, 1, p.batches * p.M, fused_b_, Y.data<float>(),
                              p.N, fgemm::Epilogue{}, pool);
          return;
        }
        matmul_real<float>(p, A.data<float>(), B.data<float>(), Y.data<float>(),
                           use_packed ? &packed_f32_ : nullptr, pool);
        return;
      case DataType::kDouble:
        matmul_real<double>(p, A.data<double>(), B.data<double>(), Y.data<double>(),
                            use_packed ? &packed_f64_ : nullptr, pool);
        return;
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        std::vector<float> a(static_cast<size_t>(A.numel()));
        std::vector<float> y(static_cast<size_t>(Y.numel()));
        convert_to_float(A.dtype(), A.raw_data(), a.data(), A.numel());
        std::vector<float> b;
        if (!use_packed) {
          b.resize(static_cast<size_t>(B.numel()));
          convert_to_float(B.dtype(), B.raw_data(), b.data(), B.numel());
        }
        matmul_real<float>(p, a.data(), b.data(), y.data(), use_packed ? &packed_f32_ : nullptr,
                           pool);
        convert_from_float(Y.dtype(), y.data(), Y.raw_data(), Y.numel());
        return;
      }
      case DataType::kInt32:
        return matmul_int<int32_t>(p, A.data<int32_t>(), B.data<int32_t>(), Y.data<int32_t>(),
                                   pool);
      case DataType::kInt64:
        return matmul_int<int64_t>(p, A.data<int64_t>(), B.data<int64_t>(), Y.data<int64_t>(),
                                   pool);
      case DataType::kUInt32:
        return matmul_int<uint32_t>(p, A.data<uint32_t>(), B.data<uint32_t>(), Y.data<uint32_t>(),
                                    pool);
      case DataType::kUInt64:
        return matmul_int<uint64_t>(p, A.data<uint64_t>(), B.data<uint64_t>(), Y.data<uint64_t>(),
                                    pool);
      default:
        ctx.fail(StatusCode::kNotImplemented, std::string("MatMul: element type ") +
                                                  dtype_name(A.dtype()) + " is not supported");
    }
  }

 private:
  mutable std::once_flag fused_once_;
  mutable fgemm::Packed fused_b_;  // float B for the fused GEMM (AVX-512F), on first use
  PackedGemmMatrix<float> packed_f32_;
  PackedGemmMatrix<double> packed_f64_;
  DataType packed_dtype_ = DataType::kUndefined;
  Shape packed_shape_;
};

}  // namespace

void register_matmul(KernelRegistry& r) {
  // Semantics are the same in every version (9 and 13 only widen the type list).
  r.add("", "MatMul", 1, 8, make_factory<MatMul>());
  r.add("", "MatMul", 9, 12, make_factory<MatMul>());
  r.add("", "MatMul", 13, kMaxOpset, make_factory<MatMul>());
}

}  // namespace nn
}  // namespace ortlite
