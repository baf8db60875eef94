// Gemm: Y = alpha * op(A) * op(B) + beta * C, A and B 2-D, C unidirectionally broadcast to
// (M, N). Opset 7-10: C required; 11+: C optional. A constant B is packed at load.
#include <cmath>
#include <vector>

#include "providers/shared/broadcast_shape.h"
#include "compute/fused_gemm.h"
#include "compute/gemm.h"
#include "compute/int_gemm.h"
#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {
namespace {

// Writes C broadcast to (M, N) into y (row-major, stride N), converted to Out.
template <typename In, typename Out>
void fill_broadcast_c(const Tensor& C, int64_t M, int64_t N, Out* y) {
  const Shape& cs = C.shape();
  const std::vector<int64_t> st = broadcast_strides(cs, Shape{M, N});
  const In* c = C.data<In>();
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) y[i * N + j] = static_cast<Out>(c[i * st[0] + j * st[1]]);
}

template <typename T>
void int_gemm_op(const Tensor& A, const Tensor& B, const Tensor* C, bool ta, bool tb, int64_t M,
                 int64_t N, int64_t K, float alpha, float beta, T* y, ThreadPool* pool) {
  int_gemm<T>(ta, tb, M, N, K, A.data<T>(), A.dim(1), B.data<T>(), B.dim(1), y, pool);
  const bool use_c = C && beta != 0.f;
  if (alpha == 1.f && (!use_c || beta == 1.f)) {
    if (use_c) {
      std::vector<T> c(static_cast<size_t>(M * N));
      fill_broadcast_c<T, T>(*C, M, N, c.data());
      using U = std::make_unsigned_t<T>;
      for (int64_t i = 0; i < M * N; ++i)
        y[i] = static_cast<T>(static_cast<U>(y[i]) + static_cast<U>(c[i]));
    }
    return;
  }
  std::vector<double> c(static_cast<size_t>(M * N), 0.0);
  if (use_c) fill_broadcast_c<T, double>(*C, M, N, c.data());
  for (int64_t i = 0; i < M * N; ++i)
    y[i] = static_cast<T>(std::trunc(static_cast<double>(alpha) * static_cast<double>(y[i]) +
                                     static_cast<double>(beta) * c[i]));
}

class Gemm final : public Kernel {
 public:
  explicit Gemm(const KernelInfo& info)
      : trans_a_(info.attr_int("transA", 0) != 0),
        trans_b_(info.attr_int("transB", 0) != 0),
        alpha_(info.attr_float("alpha", 1.f)),
        beta_(info.attr_float("beta", 1.f)) {
    if (info.opset() < 11 && !info.has_input(2))
      info.fail(StatusCode::kInvalidGraph,
                "input C is required before opset 11 (opset " + std::to_string(info.opset()) + ")");
    const Tensor* w = info.has_input(1) ? info.constant_input(1) : nullptr;
    if (!w || w->rank() != 2 || w->numel() == 0) return;
    fused_.pack(w, trans_b_);
    if (fused_.packed()) return;
    const int64_t K = trans_b_ ? w->dim(1) : w->dim(0);
    const int64_t N = trans_b_ ? w->dim(0) : w->dim(1);
    switch (w->dtype()) {
      case DataType::kFloat:
        packed_f32_ = pack_gemm_b<float>(trans_b_, K, N, w->data<float>(), w->dim(1));
        break;
      case DataType::kDouble:
        packed_f64_ = pack_gemm_b<double>(trans_b_, K, N, w->data<double>(), w->dim(1));
        break;
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        std::vector<float> f(static_cast<size_t>(w->numel()));
        convert_to_float(w->dtype(), w->raw_data(), f.data(), w->numel());
        packed_f32_ = pack_gemm_b<float>(trans_b_, K, N, f.data(), w->dim(1));
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
    const Tensor* C = ctx.input(2);
    check_gemm_ranks(ctx, A, B);
    if (A.dtype() != B.dtype() || (C && C->dtype() != A.dtype()))
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("Gemm inputs must have the same element type, got A ") +
                   dtype_name(A.dtype()) + ", B " + dtype_name(B.dtype()) +
                   (C ? std::string(", C ") + dtype_name(C->dtype()) : std::string()));
    const GemmDims dims = gemm_dims(ctx, A, B, C, trans_a_, trans_b_);
    const int64_t M = dims.M, N = dims.N, K = dims.K;
    const bool use_c = C != nullptr && beta_ != 0.f;
    Tensor& Y = ctx.allocate_output(0, A.dtype(), Shape{M, N});
    if (Y.numel() == 0) return;
    ThreadPool* pool = ctx.thread_pool();
    const bool use_packed = packed_dtype_ == B.dtype() && packed_shape_ == B.shape();
    const int64_t lda = A.dim(1), ldb = B.dim(1);
    switch (A.dtype()) {
      case DataType::kFloat: {
        float* y = Y.data<float>();
        const float beta = use_c ? beta_ : 0.f;
        if (K > 0 && fused_.accepts(B, C, beta, M, N)) {
          fused_.run(A, trans_a_, use_c ? C : nullptr, alpha_, beta, ActSpec{}, y, pool);
          return;
        }
        if (use_c) fill_broadcast_c<float, float>(*C, M, N, y);
        if (use_packed) {
          gemm_packed_b<float>(trans_a_, M, A.data<float>(), lda, packed_f32_, alpha_, beta, y, N,
                               pool);
        } else {
          gemm(trans_a_, trans_b_, M, N, K, alpha_, A.data<float>(), lda, B.data<float>(), ldb,
               beta, y, N, pool);
        }
        return;
      }
      case DataType::kDouble: {
        double* y = Y.data<double>();
        if (use_c) fill_broadcast_c<double, double>(*C, M, N, y);
        const double beta = use_c ? static_cast<double>(beta_) : 0.0;
        if (use_packed) {
          gemm_packed_b<double>(trans_a_, M, A.data<double>(), lda, packed_f64_, alpha_, beta, y, N,
                                pool);
        } else {
          gemm(trans_a_, trans_b_, M, N, K, static_cast<double>(alpha_), A.data<double>(), lda,
               B.data<double>(), ldb, beta, y, N, pool);
        }
        return;
      }
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        std::vector<float> a(static_cast<size_t>(A.numel())), y(static_cast<size_t>(M * N));
        convert_to_float(A.dtype(), A.raw_data(), a.data(), A.numel());
        if (use_c) {
          std::vector<float> c(static_cast<size_t>(C->numel()));
          convert_to_float(C->dtype(), C->raw_data(), c.data(), C->numel());
          const std::vector<int64_t> st = broadcast_strides(C->shape(), Shape{M, N});
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) y[i * N + j] = c[i * st[0] + j * st[1]];
        }
        const float beta = use_c ? beta_ : 0.f;
        if (use_packed) {
          gemm_packed_b<float>(trans_a_, M, a.data(), lda, packed_f32_, alpha_, beta, y.data(), N,
                               pool);
        } else {
          std::vector<float> b(static_cast<size_t>(B.numel()));
          convert_to_float(B.dtype(), B.raw_data(), b.data(), B.numel());
          gemm(trans_a_, trans_b_, M, N, K, alpha_, a.data(), lda, b.data(), ldb, beta, y.data(), N,
               pool);
        }
        convert_from_float(Y.dtype(), y.data(), Y.raw_data(), Y.numel());
        return;
      }
      case DataType::kInt32:
        return int_gemm_op<int32_t>(A, B, C, trans_a_, trans_b_, M, N, K, alpha_, beta_,
                                    Y.data<int32_t>(), pool);
      case DataType::kInt64:
        return int_gemm_op<int64_t>(A, B, C, trans_a_, trans_b_, M, N, K, alpha_, beta_,
                                    Y.data<int64_t>(), pool);
      case DataType::kUInt32:
        return int_gemm_op<uint32_t>(A, B, C, trans_a_, trans_b_, M, N, K, alpha_, beta_,
                                     Y.data<uint32_t>(), pool);
      case DataType::kUInt64:
        return int_gemm_op<uint64_t>(A, B, C, trans_a_, trans_b_, M, N, K, alpha_, beta_,
                                     Y.data<uint64_t>(), pool);
      default:
        ctx.fail(StatusCode::kNotImplemented,
                 std::string("Gemm: element type ") + dtype_name(A.dtype()) + " is not supported");
    }
  }

 private:
  bool trans_a_, trans_b_;
  float alpha_, beta_;
  fgemm::ConstB fused_;  // float B for the fused GEMM (instead of packed_f32_)
  PackedGemmMatrix<float> packed_f32_;
  PackedGemmMatrix<double> packed_f64_;
  DataType packed_dtype_ = DataType::kUndefined;
  Shape packed_shape_;
};

}  // namespace

void register_gemm(KernelRegistry& r) {
  // 7: C required, unidirectional broadcast; 9: more types; 11: C optional; 13: bfloat16.
  r.add("", "Gemm", 7, 8, make_factory<Gemm>());
  r.add("", "Gemm", 9, 10, make_factory<Gemm>());
  r.add("", "Gemm", 11, 12, make_factory<Gemm>());
  r.add("", "Gemm", 13, kMaxOpset, make_factory<Gemm>());
}

}  // namespace nn
}  // namespace ortlite
