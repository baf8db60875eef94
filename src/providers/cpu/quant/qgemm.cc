// com.microsoft QGemm: Y = alpha * (A - a_zp) x (B - b_zp) (+ C, int32) with transA / transB,
// A uint8 or int8 (int8 A takes int8 B), a per tensor, b per tensor or per column ([N]).
//
// As onnxruntime: the int32 bias C (broadcast from a scalar, [N], [1, N], [M, 1] or [M, N]) is
// added to the exact, int32-wrapped product; the multiplier of column j is
// alpha * a_scale * b_scale[j] in float (left to right), divided by y_scale when given. With
// y_zero_point the output is requantized to its type (rounded half to even, saturated);
// without, it is float (multiplier times the int32 sum). A constant B is packed at load.
#include <algorithm>
#include <vector>

#include "compute/int8_gemm.h"
#include "providers/cpu/quant/quant_common.h"

namespace ortlite {
namespace quant {
namespace {

void transpose_bytes(const uint8_t* src, int64_t rows, int64_t cols, std::vector<uint8_t>* dst) {
  dst->resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) (*dst)[c * rows + r] = src[r * cols + c];
}

class QGemm final : public Kernel {
 public:
  explicit QGemm(const KernelInfo& info)
      : trans_a_(info.attr_int("transA", 0) != 0),
        trans_b_(info.attr_int("transB", 0) != 0),
        alpha_(info.attr_float("alpha", 1.0f)) {
    const Tensor* b = info.has_input(3) ? info.constant_input(3) : nullptr;
    if (!b || b->rank() != 2 || b->numel() == 0) return;
    if (b->dtype() != DataType::kUInt8 && b->dtype() != DataType::kInt8) return;
    pack(*b, &packed_);
    packed_dtype_ = b->dtype();
    packed_shape_ = b->shape();
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.required_input(0);
    const Tensor& b = ctx.required_input(3);
    check_qop_int8(ctx, a, "A");
    check_qop_int8(ctx, b, "B");
    if (a.dtype() == DataType::kInt8 && b.dtype() != DataType::kInt8) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'B' must be int8 when 'A' is int8, got " +
                                                 std::string(dtype_name(b.dtype())));
    }
    if (a.rank() != 2 || b.rank() != 2) {
      ctx.fail(StatusCode::kInvalidArgument, "inputs 'A' " + shape_to_string(a.shape()) +
                                                 " and 'B' " + shape_to_string(b.shape()) +
                                                 " must be 2-D");
    }
    const int64_t M = trans_a_ ? a.dim(1) : a.dim(0), K = trans_a_ ? a.dim(0) : a.dim(1);
    const int64_t KB = trans_b_ ? b.dim(1) : b.dim(0), N = trans_b_ ? b.dim(0) : b.dim(1);
    if (K != KB) {
      ctx.fail(StatusCode::kInvalidArgument,
               "inner dimensions of 'A' " + shape_to_string(a.shape()) + " and 'B' " +
                   shape_to_string(b.shape()) + " differ (transA " + std::to_string(trans_a_) +
                   ", transB " + std::to_string(trans_b_) + ")");
    }
    const float as = qop_scale(ctx, ctx.required_input(1), "a_scale");
    const int32_t za = qop_zero_point(ctx, &ctx.required_input(2), a.dtype(), "a_zero_point");
    const Tensor& bs = ctx.required_input(4);
    const Tensor& bzt = ctx.required_input(5);
    const bool per_col = !is_single(bs);
    if (bs.dtype() != DataType::kFloat || (per_col && (bs.rank() != 1 || bs.dim(0) != N)) ||
        bs.rank() > 1) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'b_scale' must be float, a scalar or 1-D with 1 or N = " + std::to_string(N) +
                   " elements, got " + dtype_name(bs.dtype()) + " " + shape_to_string(bs.shape()));
    }
    if (bzt.dtype() != b.dtype() || bzt.shape() != bs.shape()) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'b_zero_point' must have the type of 'B' (" +
                   std::string(dtype_name(b.dtype())) + ") and the shape of 'b_scale' " +
                   shape_to_string(bs.shape()) + ", got " + dtype_name(bzt.dtype()) + " " +
                   shape_to_string(bzt.shape()));
    }
    const Tensor* c = ctx.input(6);
    const Tensor* ys = ctx.input(7);
    const Tensor* yz = ctx.input(8);
    if (yz && !ys) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'y_zero_point' needs 'y_scale'");
    }
    const float ysv = ys ? qop_scale(ctx, *ys, "y_scale") : 1.0f;
    int32_t yzv = 0;
    if (yz) {
      if (yz->dtype() != a.dtype()) {
        ctx.fail(StatusCode::kInvalidArgument, "input 'y_zero_point' must have the type of 'A' (" +
                                                   std::string(dtype_name(a.dtype())) + "), got " +
                                                   dtype_name(yz->dtype()));
      }
      yzv = qop_zero_point(ctx, yz, a.dtype(), "y_zero_point");
    }
    // Bias element (i, j) at c[i * cs_i + j * cs_j].
    int64_t cs_i = 0, cs_j = 0;
    if (c) {
      if (c->dtype() != DataType::kInt32) {
        ctx.fail(StatusCode::kInvalidArgument,
                 std::string("input 'C' must be int32, got ") + dtype_name(c->dtype()));
      }
      const Shape& cs = c->shape();
      if (c->numel() == 1) {
      } else if ((cs.size() == 1 && cs[0] == N) || (cs.size() == 2 && cs[0] == 1 && cs[1] == N)) {
        cs_j = 1;
      } else if (cs.size() == 2 && cs[0] == M && cs[1] == 1) {
        cs_i = 1;
      } else if (cs.size() == 2 && cs[0] == M && cs[1] == N) {
        cs_i = N;
        cs_j = 1;
      } else {
        ctx.fail(StatusCode::kInvalidArgument,
                 "input 'C' " + shape_to_string(cs) + " does not broadcast to [M, N] = [" +
                     std::to_string(M) + "," + std::to_string(N) + "]");
      }
    }
    const DataType out_type = yz ? yz->dtype() : DataType::kFloat;
    Tensor& y = ctx.allocate_output(0, out_type, {M, N});
    if (M == 0 || N == 0) return;

    std::vector<int32_t> acc(static_cast<size_t>(M * N), 0);
    if (K > 0) {
      const bool use_packed =
          !packed_.data.empty() && b.dtype() == packed_dtype_ && b.shape() == packed_shape_;
      int8gemm::PackedB local;
      if (!use_packed) pack(b, &local);
      std::vector<uint8_t> at;
      const uint8_t* ad = static_cast<const uint8_t*>(a.raw_data());
      if (trans_a_) {
        transpose_bytes(ad, K, M, &at);
        ad = at.data();
      }
      int8gemm::PackedA pa;
      int8gemm::pack_a(ad, a.dtype() == DataType::kInt8, M, K, K, &pa);
      std::vector<int32_t> zb(static_cast<size_t>(per_col ? N : 1));
      for (size_t j = 0; j < zb.size(); ++j)
        zb[j] = b.dtype() == DataType::kInt8 ? bzt.data<int8_t>()[j] : bzt.data<uint8_t>()[j];
      int8gemm::gemm(pa, use_packed ? packed_ : local, &za, 0, zb.data(), per_col ? 1 : 0,
                     acc.data(), N, ctx.thread_pool());
    }
    if (c) {
      const int32_t* cd = c->data<int32_t>();
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          uint32_t& v = reinterpret_cast<uint32_t&>(acc[i * N + j]);
          v += static_cast<uint32_t>(cd[i * cs_i + j * cs_j]);
        }
    }
    const float* bsd = bs.data<float>();
    std::vector<float> mult(static_cast<size_t>(per_col ? N : 1));
    for (size_t j = 0; j < mult.size(); ++j) {
      mult[j] = alpha_ * as * bsd[j];
      if (ys) mult[j] = fp_barrier(mult[j]) / ysv;
    }
    const int64_t mstep = per_col ? 1 : 0;
    if (yz) {
      const bool is_signed = out_type == DataType::kInt8;
      uint8_t* yd = static_cast<uint8_t*>(y.raw_data());
      parallel_for(ctx.thread_pool(), M, 4.0 * static_cast<double>(N), [&](int64_t s, int64_t e) {
        for (int64_t i = s; i < e; ++i)
          int8gemm::requantize(acc.data() + i * N, N, 0, mult.data(), mstep, yzv, is_signed,
                               yd + i * N);
      });
      return;
    }
    float* yd = y.data<float>();
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        yd[i * N + j] = static_cast<float>(acc[i * N + j]) * mult[j * mstep];
  }

 private:
  void pack(const Tensor& b, int8gemm::PackedB* out) const {
    const uint8_t* bd = static_cast<const uint8_t*>(b.raw_data());
    const bool is_signed = b.dtype() == DataType::kInt8;
    if (trans_b_) {
      std::vector<uint8_t> bt;
      transpose_bytes(bd, b.dim(0), b.dim(1), &bt);
      int8gemm::pack_b(bt.data(), is_signed, b.dim(1), b.dim(0), b.dim(0), out);
    } else {
      int8gemm::pack_b(bd, is_signed, b.dim(0), b.dim(1), b.dim(1), out);
    }
  }

  bool trans_a_, trans_b_;
  float alpha_;
  int8gemm::PackedB packed_;
  DataType packed_dtype_ = DataType::kUndefined;
  Shape packed_shape_;
};

}  // namespace

void register_qgemm(KernelRegistry& r) {
  r.add("com.microsoft", "QGemm", 1, kMaxOpset, make_factory<QGemm>());
}

}  // namespace quant
}  // namespace ortlite
