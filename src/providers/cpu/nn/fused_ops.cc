// ortlite-internal operators (domain com.ortlite, opset 1) written by the graph optimizer
// (src/graph/optimizer.cc); FusedConv lives in conv.cc.
//
//   Gelu(X)                    0.5 X (1 + erf(X / sqrt 2)), float / double / float16 / bfloat16
//   FusedMatMul(A, B, bias?)   act(alpha * MatMul(A, B) + bias); bias is 1-D with B's last dim.
//                              Attributes alpha (1.0), activation, activation_params.
//   FusedGemm(A, B, C?)        act(Gemm(A, B, C)) with Gemm's attributes (opset 11 semantics)
//                              plus activation, activation_params. float only.
//
// The bias goes into the output before the product (the GEMM then accumulates onto it, beta
// = 1), so the only extra pass over the output is the activation's, split over the threads.
#include "compute/vectorize.h"  // first: compile options for the loops below

#include <cmath>
#include <cstring>
#include <vector>

#include "providers/shared/broadcast_shape.h"
#include "compute/activation.h"
#include "compute/fused_gemm.h"
#include "compute/gemm.h"
#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {
namespace {

// act over the rows of an (rows x n) output, split over the threads.
template <typename T>
void act_rows(const ActSpec& act, T* y, int64_t rows, int64_t n, ThreadPool* pool) {
  if (act.kind == ActKind::kNone) return;
  const double cost =
      act.kind == ActKind::kGelu || act.kind == ActKind::kSigmoid || act.kind == ActKind::kTanh
          ? 20.0
          : 1.0;
  parallel_for(pool, rows, cost * static_cast<double>(n), [&](int64_t b, int64_t e) {
    if constexpr (std::is_same_v<T, float>) {
      apply_act_f32(act, y + b * n, (e - b) * n);
    } else {
      apply_act(act, y + b * n, (e - b) * n);
    }
  });
}

// ---- Gelu ---------------------------------------------------------------------------------

class Gelu final : public Kernel {
 public:
  explicit Gelu(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& X = ctx.required_input(0);
    Tensor& Y = ctx.allocate_output(0, X.dtype(), X.shape());
    const int64_t n = X.numel();
    if (n == 0) return;
    ActSpec gelu;
    gelu.kind = ActKind::kGelu;
    ThreadPool* pool = ctx.thread_pool();
    constexpr int64_t kBlock = 4096;
    const int64_t blocks = (n + kBlock - 1) / kBlock;
    switch (X.dtype()) {
      case DataType::kFloat:
      case DataType::kDouble:
        parallel_for(pool, blocks, 20.0 * kBlock, [&](int64_t b, int64_t e) {
          const int64_t lo = b * kBlock, hi = std::min(n, e * kBlock);
          if (X.dtype() == DataType::kFloat) {
            std::memcpy(Y.data<float>() + lo, X.data<float>() + lo, (hi - lo) * sizeof(float));
            apply_act(gelu, Y.data<float>() + lo, hi - lo);
          } else {
            std::memcpy(Y.data<double>() + lo, X.data<double>() + lo, (hi - lo) * sizeof(double));
            apply_act(gelu, Y.data<double>() + lo, hi - lo);
          }
        });
        return;
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        std::vector<float> y(static_cast<size_t>(n));
        convert_to_float(X.dtype(), X.raw_data(), y.data(), n);
        apply_act(gelu, y.data(), n);
        convert_from_float(Y.dtype(), y.data(), Y.raw_data(), n);
        return;
      }
      default:
        ctx.fail(StatusCode::kNotImplemented,
                 std::string("Gelu: element type ") + dtype_name(X.dtype()) + " is not supported");
    }
  }
};

// ---- FusedMatMul --------------------------------------------------------------------------

// Y = act(alpha * A B + bias) for real T.
template <typename T>
void fused_matmul(const MatMulPlan& p, const T* a, const T* b, const T* bias, T alpha,
                  const ActSpec& act, T* c, const PackedGemmMatrix<T>* packed, ThreadPool* pool) {
  const int64_t M = p.M, N = p.N, K = p.K, rows = p.batches * M;
  const T beta = bias ? T(1) : T(0);
  if (bias)
    for (int64_t r = 0; r < rows; ++r) std::memcpy(c + r * N, bias, N * sizeof(T));
  if (K == 0) {
    if (!bias) std::fill(c, c + rows * N, T(0));
  } else if (p.b_shared) {
    // All batches of A against one B: a single (batches * M) x K times K x N product.
    if (packed) {
      gemm_packed_b<T>(false, rows, a, K, *packed, alpha, beta, c, N, pool);
    } else {
      gemm(false, false, rows, N, K, alpha, a, K, b, N, beta, c, N, pool);
    }
  } else {
    // One GEMM per batch slice: over the slices when they are small enough that splitting a
    // single product would not keep the threads busy, else each product splits itself.
    const double per = 2.0 * static_cast<double>(M) * static_cast<double>(N) * K;
    auto one = [&](int64_t n, ThreadPool* tp) {
      gemm(false, false, M, N, K, alpha, a + p.a_index[n] * M * K, K, b + p.b_index[n] * K * N, N,
           beta, c + n * M * N, N, tp);
    };
    if (p.batches > 1 && pool && pool->num_threads() > 1 && per < 4e6) {
      parallel_for(pool, p.batches, per, [&](int64_t s, int64_t e) {
        for (int64_t n = s; n < e; ++n) one(n, nullptr);
      });
    } else {
      for (int64_t n = 0; n < p.batches; ++n) one(n, pool);
    }
  }
  act_rows(act, c, rows, N, pool);
}

class FusedMatMul final : public Kernel {
 public:
  explicit FusedMatMul(const KernelInfo& info)
      : alpha_(info.attr_float("alpha", 1.f)), act_(load_act(info)) {
    if (info.num_inputs() < 2 || info.num_inputs() > 3)
      info.fail(StatusCode::kInvalidGraph, "FusedMatMul takes 2 or 3 inputs (A, B, bias), got " +
                                               std::to_string(info.num_inputs()));
    const Tensor* w = info.constant_input(1);
    if (!w || w->rank() != 2 || w->numel() == 0) return;
    const int64_t K = w->dim(0), N = w->dim(1);
    if (w->dtype() == DataType::kFloat && fgemm::available() && !narrow_b(K, N)) {
      fused_b_ = fgemm::Packed::pack(w->data<float>(), N, N, K, true);
      packed_dtype_ = w->dtype();
      packed_shape_ = w->shape();
      return;
    }
    switch (w->dtype()) {
      case DataType::kFloat:
        packed_f32_ = pack_gemm_b<float>(false, K, N, w->data<float>(), N);
        break;
      case DataType::kDouble:
        packed_f64_ = pack_gemm_b<double>(false, K, N, w->data<double>(), N);
        break;
      default:
        return;
    }
    packed_dtype_ = w->dtype();
    packed_shape_ = w->shape();
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& A = ctx.required_input(0);
    const Tensor& B = ctx.required_input(1);
    const Tensor* bias = ctx.input(2);
    if (A.dtype() != B.dtype() || (bias && bias->dtype() != A.dtype()))
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("FusedMatMul inputs must have the same element type, got A ") +
                   dtype_name(A.dtype()) + ", B " + dtype_name(B.dtype()) +
                   (bias ? std::string(", bias ") + dtype_name(bias->dtype()) : std::string()));
    const MatMulPlan p = make_matmul_plan(ctx, A.shape(), B.shape());
    if (bias && (bias->rank() != 1 || bias->dim(0) != p.N || p.out.empty()))
      ctx.fail(StatusCode::kInvalidArgument, "bias " + shape_to_string(bias->shape()) +
                                                 " must be 1-D with " + std::to_string(p.N) +
                                                 " elements (the product is " +
                                                 shape_to_string(p.out) + ")");
    Tensor& Y = ctx.allocate_output(0, A.dtype(), p.out);
    if (Y.numel() == 0) return;
    ThreadPool* pool = ctx.thread_pool();
    const bool use_packed = packed_dtype_ == B.dtype() && packed_shape_ == B.shape();
    if (use_packed && !fused_b_.empty() && p.b_shared) {
      // One (batches * M) x K times K x N product, epilogue in registers.
      fgemm::Epilogue ep;
      ep.alpha = alpha_;
      ep.bias_col = bias ? bias->data<float>() : nullptr;
      ep.act = act_;
      fgemm::gemm_w_right(A.data<float>(), p.K, 1, p.batches * p.M, fused_b_, Y.data<float>(), p.N,
                          ep, pool);
      return;
    }
    switch (A.dtype()) {
      case DataType::kFloat:
        fused_matmul<float>(p, A.data<float>(), B.data<float>(),
                            bias ? bias->data<float>() : nullptr, alpha_, act_, Y.data<float>(),
                            use_packed && !packed_f32_.empty() ? &packed_f32_ : nullptr, pool);
        return;
      case DataType::kDouble:
        fused_matmul<double>(p, A.data<double>(), B.data<double>(),
                             bias ? bias->data<double>() : nullptr, static_cast<double>(alpha_),
                             act_, Y.data<double>(), use_packed ? &packed_f64_ : nullptr, pool);
        return;
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        std::vector<float> a(static_cast<size_t>(A.numel())), b(static_cast<size_t>(B.numel()));
        std::vector<float> y(static_cast<size_t>(Y.numel())), bv;
        convert_to_float(A.dtype(), A.raw_data(), a.data(), A.numel());
        convert_to_float(B.dtype(), B.raw_data(), b.data(), B.numel());
        if (bias) {
          bv.resize(static_cast<size_t>(bias->numel()));
          convert_to_float(bias->dtype(), bias->raw_data(), bv.data(), bias->numel());
        }
        fused_matmul<float>(p, a.data(), b.data(), bias ? bv.data() : nullptr, alpha_, act_,
                            y.data(), nullptr, pool);
        convert_from_float(Y.dtype(), y.data(), Y.raw_data(), Y.numel());
        return;
      }
      default:
        ctx.fail(StatusCode::kNotImplemented, std::string("FusedMatMul: element type ") +
                                                  dtype_name(A.dtype()) + " is not supported");
    }
  }

 private:
  float alpha_;
  ActSpec act_;
  PackedGemmMatrix<float> packed_f32_;
  PackedGemmMatrix<double> packed_f64_;
  fgemm::Packed fused_b_;  // float B for the fused GEMM (instead of packed_f32_)
  DataType packed_dtype_ = DataType::kUndefined;
  Shape packed_shape_;
};

// ---- FusedGemm ----------------------------------------------------------------------------

class FusedGemm final : public Kernel {
 public:
  explicit FusedGemm(const KernelInfo& info)
      : trans_a_(info.attr_int("transA", 0) != 0),
        trans_b_(info.attr_int("transB", 0) != 0),
        alpha_(info.attr_float("alpha", 1.f)),
        beta_(info.attr_float("beta", 1.f)),
        act_(info.node().domain == "com.microsoft" ? load_act_alpha_beta(info) : load_act(info)) {
    if (info.num_inputs() < 2 || info.num_inputs() > 3)
      info.fail(StatusCode::kInvalidGraph, "FusedGemm takes 2 or 3 inputs (A, B, C), got " +
                                               std::to_string(info.num_inputs()));
    const Tensor* w = info.constant_input(1);
    if (!w || w->rank() != 2 || w->numel() == 0 || w->dtype() != DataType::kFloat) return;
    fused_.pack(w, trans_b_);
    if (fused_.packed()) return;
    const int64_t K = trans_b_ ? w->dim(1) : w->dim(0);
    const int64_t N = trans_b_ ? w->dim(0) : w->dim(1);
    packed_ = pack_gemm_b<float>(trans_b_, K, N, w->data<float>(), w->dim(1));
    packed_shape_ = w->shape();
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& A = ctx.required_input(0);
    const Tensor& B = ctx.required_input(1);
    const Tensor* C = ctx.input(2);
    check_gemm_ranks(ctx, A, B);
    if (A.dtype() != DataType::kFloat || B.dtype() != DataType::kFloat ||
        (C && C->dtype() != DataType::kFloat))
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("FusedGemm takes float A, B and C, got A ") + dtype_name(A.dtype()) +
                   ", B " + dtype_name(B.dtype()) +
                   (C ? std::string(", C ") + dtype_name(C->dtype()) : std::string()));
    const GemmDims dims = gemm_dims(ctx, A, B, C, trans_a_, trans_b_);
    const int64_t M = dims.M, N = dims.N, K = dims.K;
    Tensor& Y = ctx.allocate_output(0, A.dtype(), Shape{M, N});
    if (Y.numel() == 0) return;
    float* y = Y.data<float>();
    const bool use_c = C && beta_ != 0.f;
    ThreadPool* pool = ctx.thread_pool();
    if (K > 0 && fused_.accepts(B, C, use_c ? beta_ : 0.f, M, N)) {
      fused_.run(A, trans_a_, use_c ? C : nullptr, alpha_, use_c ? beta_ : 0.f, act_, y, pool);
      return;
    }
    if (use_c) {
      const std::vector<int64_t> st = broadcast_strides(C->shape(), Shape{M, N});
      const float* c = C->data<float>();
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) y[i * N + j] = c[i * st[0] + j * st[1]];
    }
    const float beta = use_c ? beta_ : 0.f;
    if (K == 0) {
      for (int64_t i = 0; i < M * N; ++i) y[i] = use_c ? beta * y[i] : 0.f;
    } else if (!packed_.empty() && packed_shape_ == B.shape()) {
      gemm_packed_b<float>(trans_a_, M, A.data<float>(), A.dim(1), packed_, alpha_, beta, y, N,
                           pool);
    } else {
      gemm(trans_a_, trans_b_, M, N, K, alpha_, A.data<float>(), A.dim(1), B.data<float>(),
           B.dim(1), beta, y, N, pool);
    }
    act_rows(act_, y, M, N, pool);
  }

 private:
  bool trans_a_, trans_b_;
  float alpha_, beta_;
  ActSpec act_;
  fgemm::ConstB fused_;             // B for the fused GEMM (instead of packed_)
  PackedGemmMatrix<float> packed_;  // B when the fused GEMM is not available
  Shape packed_shape_;
};

}  // namespace

void register_fused_ops(KernelRegistry& r) {
  r.add("com.ortlite", "Gelu", 1, kMaxOpset, make_factory<Gelu>());
  r.add("com.ortlite", "FusedMatMul", 1, kMaxOpset, make_factory<FusedMatMul>());
  r.add("com.ortlite", "FusedGemm", 1, kMaxOpset, make_factory<FusedGemm>());
  // onnxruntime's FusedGemm: the activation's parameters as activation_alpha / _beta.
  r.add("com.microsoft", "FusedGemm", 1, kMaxOpset, make_factory<FusedGemm>());
}

}  // namespace nn
}  // namespace ortlite
