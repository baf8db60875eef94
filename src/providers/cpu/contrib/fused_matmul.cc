// com.microsoft FusedMatMul (and TransposeMatMul, its older name): Y = alpha * op(A) op(B) with
// numpy batch broadcasting. Attributes alpha (1.0), transA / transB (swap the last two dims of
// an operand of rank >= 2; ignored for 1-D), transBatchA / transBatchB (an operand of rank >= 3,
// [d0, d1, .., dk, c], is read as [d1, .., dk, d0, c]: its first dim becomes the row dim and
// the former row dim a batch dim, before transA / transB apply). float and double through the GEMM
// of compute/gemm.h; float16 / bfloat16 computed in float.
#include <cstring>
#include <vector>

#include "compute/gemm.h"
#include "providers/cpu/contrib/contrib_common.h"

namespace ortlite {
namespace contrib {
namespace {

// x ([d0, d1, .., dk, c]) transposed to [d1, .., dk, d0, c] into out; returns the new shape.
template <typename T>
Shape batch_transpose(const T* x, const Shape& s, std::vector<T>* out) {
  const size_t rank = s.size();
  const int64_t d0 = s[0], c = s[rank - 1];
  int64_t mid = 1;
  for (size_t d = 1; d + 1 < rank; ++d) mid *= s[d];
  out->resize(static_cast<size_t>(d0 * mid * c));
  for (int64_t i = 0; i < d0; ++i)
    for (int64_t j = 0; j < mid; ++j)
      std::memcpy(out->data() + (j * d0 + i) * c, x + (i * mid + j) * c,
                  static_cast<size_t>(c) * sizeof(T));
  Shape r(s.begin() + 1, s.end() - 1);
  r.push_back(d0);
  r.push_back(c);
  return r;
}

class FusedMatMul final : public Kernel {
 public:
  explicit FusedMatMul(const KernelInfo& info)
      : alpha_(info.attr_float("alpha", 1.f)),
        trans_a_(info.attr_int("transA", 0) != 0),
        trans_b_(info.attr_int("transB", 0) != 0),
        trans_batch_a_(info.attr_int("transBatchA", 0) != 0),
        trans_batch_b_(info.attr_int("transBatchB", 0) != 0) {
    if (info.num_inputs() != 2)
      info.fail(StatusCode::kInvalidGraph,
                "takes 2 inputs (A, B), got " + std::to_string(info.num_inputs()));
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& A = ctx.required_input(0);
    const Tensor& B = ctx.required_input(1);
    check_type(ctx, A, "A",
               {DataType::kFloat, DataType::kDouble, DataType::kFloat16, DataType::kBFloat16});
    check_same_type(ctx, A, {{&B, "B"}});
    if (A.dtype() == DataType::kDouble) {
      run<double>(ctx, A, B);
    } else {
      run<float>(ctx, A, B);
    }
  }

 private:
  template <typename T>
  void run(KernelContext& ctx, const Tensor& A, const Tensor& B) const {
    if (A.rank() == 0 || B.rank() == 0)
      ctx.fail(StatusCode::kInvalidArgument, "needs inputs of rank >= 1, got A " +
                                                 shape_to_string(A.shape()) + " and B " +
                                                 shape_to_string(B.shape()));
    RealIn<T> ain(&A), bin(&B);
    const T* a = ain.get();
    const T* b = bin.get();
    Shape as = A.shape(), bs = B.shape();
    std::vector<T> at, bt;
    if (trans_batch_a_ && as.size() >= 3) {
      as = batch_transpose(a, as, &at);
      a = at.data();
    }
    if (trans_batch_b_ && bs.size() >= 3) {
      bs = batch_transpose(b, bs, &bt);
      b = bt.data();
    }
    const bool ta = trans_a_ && as.size() >= 2, tb = trans_b_ && bs.size() >= 2;
    if (ta) std::swap(as[as.size() - 1], as[as.size() - 2]);
    if (tb) std::swap(bs[bs.size() - 1], bs[bs.size() - 2]);
    const nn::MatMulPlan p = nn::make_matmul_plan(ctx, as, bs);
    Tensor& Y = ctx.allocate_output(0, A.dtype(), p.out);
    if (Y.numel() == 0) return;
    RealOut<T> yout(&Y);
    T* y = yout.get();
    const int64_t M = p.M, N = p.N, K = p.K;
    const T alpha = static_cast<T>(alpha_);
    ThreadPool* pool = ctx.thread_pool();
    if (K == 0) {
      std::fill(y, y + Y.numel(), T(0));
    } else if (p.b_shared && !ta) {
      gemm(false, tb, p.batches * M, N, K, alpha, a, K, b, tb ? K : N, T(0), y, N, pool);
    } else {
      const double per = 2.0 * static_cast<double>(M) * static_cast<double>(N) * K;
      nn::for_each_product(pool, p.batches, per, [&](int64_t n, ThreadPool* tp) {
        const int64_t ai = p.b_shared ? n : p.a_index[n], bi = p.b_shared ? 0 : p.b_index[n];
        gemm(ta, tb, M, N, K, alpha, a + ai * M * K, ta ? M : K, b + bi * K * N, tb ? K : N, T(0),
             y + n * M * N, N, tp);
      });
    }
    yout.commit();
  }

  float alpha_;
  bool trans_a_, trans_b_, trans_batch_a_, trans_batch_b_;
};

// com.microsoft SparseToDenseMatMul: Y = alpha * op(A) op(B) with A a 2-D sparse tensor and B
// a 2-D dense one. The binding densifies a sparse feed (src/python/sparse_tensor.cc), so A
// arrives dense and FusedMatMul's 2-D case computes it.
class SparseToDenseMatMul final : public Kernel {
 public:
  explicit SparseToDenseMatMul(const KernelInfo& info) : matmul_(info) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& A = ctx.required_input(0);
    const Tensor& B = ctx.required_input(1);
    if (A.rank() != 2 || B.rank() != 2)
      ctx.fail(StatusCode::kInvalidArgument, "A and B must be 2-D, got A " +
                                                 shape_to_string(A.shape()) + " and B " +
                                                 shape_to_string(B.shape()));
    check_type(ctx, A, "A", {DataType::kFloat, DataType::kDouble});
    matmul_.compute(ctx);
  }

 private:
  FusedMatMul matmul_;
};

}  // namespace

void register_fused_matmul(KernelRegistry& r) {
  r.add("com.microsoft", "FusedMatMul", 1, kMaxOpset, make_factory<FusedMatMul>());
  r.add("com.microsoft", "TransposeMatMul", 1, kMaxOpset, make_factory<FusedMatMul>());
  r.add("com.microsoft", "SparseToDenseMatMul", 1, kMaxOpset, make_factory<SparseToDenseMatMul>());
}

}  // namespace contrib
}  // namespace ortlite
