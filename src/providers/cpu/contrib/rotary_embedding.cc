// com.microsoft RotaryEmbedding (onnxruntime's contrib semantics, CPU):
//
//   RotaryEmbedding(input, position_ids, cos_cache, sin_cache) -> output (input's shape)
//     input        [B, S, N * H] or [B, N, S, H]
//     position_ids [B, S] (int64), or one element p0: token s of every batch is at p0 + s
//     cos / sin    [max_position, R / 2]
//
// Per (batch, token, head) the first R = rotary_embedding_dim elements (default: the head
// size; then H = 2 * cos_cache's second dimension in the 3-D form) are rotated by the cache
// row of the token's position, the rest copied:
//   interleaved = 0:  y[i] = x[i] c[i] - x[i + R/2] s[i],  y[i + R/2] = x[i + R/2] c[i] + x[i] s[i]
//   interleaved = 1:  pairs (x[2i], x[2i + 1]) rotated by (c[i], s[i])
// num_heads is needed with rotary_embedding_dim in the 3-D form. scale and is_packed_batching
// are read by onnxruntime's CUDA kernel only; its CPU kernel (and this one) ignores them.
// float, and float16 / bfloat16 computed in float. A position outside the cache is an
// InvalidArgument error (onnxruntime reads past the cache).
#include "compute/vectorize.h"  // first: compile options for the loops below

#include <algorithm>
#include <cstring>
#include <string>

#include "providers/cpu/contrib/contrib_common.h"

namespace ortlite {
namespace contrib {

void rotate_half(const float* x, const float* cos, const float* sin, int64_t rot, bool interleaved,
                 float* y) {
  const int64_t half = rot / 2;
  if (interleaved) {
    for (int64_t i = 0; i < half; ++i) {
      const float a = x[2 * i], b = x[2 * i + 1];
      y[2 * i] = a * cos[i] - b * sin[i];
      y[2 * i + 1] = b * cos[i] + a * sin[i];
    }
  } else {
    for (int64_t i = 0; i < half; ++i) {
      const float a = x[i], b = x[i + half];
      y[i] = a * cos[i] - b * sin[i];
      y[i + half] = b * cos[i] + a * sin[i];
    }
  }
}

namespace {

class RotaryEmbedding final : public Kernel {
 public:
  explicit RotaryEmbedding(const KernelInfo& info)
      : num_heads_(info.attr_int("num_heads", 0)),
        rotary_dim_(info.attr_int("rotary_embedding_dim", 0)),
        interleaved_(info.attr_int("interleaved", 0) == 1) {
    if (num_heads_ < 0 || rotary_dim_ < 0)
      info.fail(StatusCode::kInvalidGraph, "num_heads and rotary_embedding_dim must be >= 0");
    if (rotary_dim_ > 0 && num_heads_ == 0)
      info.fail(StatusCode::kInvalidGraph,
                "num_heads must be provided if rotary_embedding_dim is specified");
    if (rotary_dim_ % 2 != 0)
      info.fail(StatusCode::kInvalidGraph,
                "rotary_embedding_dim must be even, got " + std::to_string(rotary_dim_));
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = ctx.required_input(0);
    const Tensor& P = ctx.required_input(1);
    const Tensor& C = ctx.required_input(2);
    const Tensor& Sn = ctx.required_input(3);
    check_type(ctx, X, "input", {DataType::kFloat, DataType::kFloat16, DataType::kBFloat16});
    check_same_type(ctx, X, {{&C, "cos_cache"}, {&Sn, "sin_cache"}});
    if (P.dtype() != DataType::kInt64)
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("position_ids must be int64, got ") + dtype_name(P.dtype()));
    if (X.rank() != 3 && X.rank() != 4)
      ctx.fail(StatusCode::kInvalidArgument,
               "input must be 3-D [B, S, hidden] or 4-D "
               "[B, N, S, H], got shape " +
                   shape_to_string(X.shape()));
    if (C.rank() != 2 || C.shape() != Sn.shape())
      ctx.fail(StatusCode::kInvalidArgument,
               "cos_cache and sin_cache must be 2-D of one shape, got " +
                   shape_to_string(C.shape()) + " and " + shape_to_string(Sn.shape()));
    const bool bnsh = X.rank() == 4;
    const int64_t B = X.dim(0), S = bnsh ? X.dim(2) : X.dim(1);
    const int64_t max_pos = C.dim(0), half = C.dim(1);
    int64_t N = 0, H = 0;
    if (bnsh) {
      N = X.dim(1);
      H = X.dim(3);
    } else {
      const int64_t hidden = X.dim(2);
      if (rotary_dim_ > 0) {
        N = num_heads_;
        if (hidden % N != 0)
          ctx.fail(StatusCode::kInvalidArgument, "hidden size " + std::to_string(hidden) +
                                                     " is not a multiple of num_heads " +
                                                     std::to_string(N));
        H = hidden / N;
      } else {
        H = 2 * half;
        if (H == 0 || hidden % H != 0)
          ctx.fail(StatusCode::kInvalidArgument,
                   "hidden size " + std::to_string(hidden) +
                       " is not a multiple of the head size 2 * cos_cache.shape[1] = " +
                       std::to_string(H));
        N = hidden / H;
        if (num_heads_ > 0 && num_heads_ != N)
          ctx.fail(StatusCode::kInvalidArgument,
                   "num_heads " + std::to_string(num_heads_) + " times the head size " +
                       std::to_string(H) + " is not the hidden size " + std::to_string(hidden));
      }
    }
    const int64_t R = rotary_dim_ > 0 ? rotary_dim_ : H;
    if (R > H)
      ctx.fail(StatusCode::kInvalidArgument, "rotary_embedding_dim " + std::to_string(R) +
                                                 " is larger than the head size " +
                                                 std::to_string(H));
    if (half * 2 != R)
      ctx.fail(StatusCode::kInvalidArgument,
               "cos_cache.shape[1] must be rotary_embedding_dim / 2 = " + std::to_string(R / 2) +
                   ", got " + std::to_string(half));
    const bool offset_form = P.numel() == 1 && P.rank() <= 1;
    if (!offset_form && (P.rank() != 2 || P.dim(0) != B || P.dim(1) != S))
      ctx.fail(StatusCode::kInvalidArgument,
               "position_ids must be [B, S] = [" + std::to_string(B) + ", " + std::to_string(S) +
                   "] or one element, got shape " + shape_to_string(P.shape()));
    const int64_t* pos = P.data<int64_t>();
    if (B * S > 0) {
      int64_t lo = pos[0], hi = pos[0] + (offset_form ? S - 1 : 0);
      if (!offset_form)
        for (int64_t i = 0; i < B * S; ++i) {
          lo = std::min(lo, pos[i]);
          hi = std::max(hi, pos[i]);
        }
      if (lo < 0 || hi >= max_pos)
        ctx.fail(StatusCode::kInvalidArgument, "position id " + std::to_string(lo < 0 ? lo : hi) +
                                                   " is outside the cos / sin cache of " +
                                                   std::to_string(max_pos) + " positions");
    }

    Tensor& Y = ctx.allocate_output(0, X.dtype(), X.shape());
    if (X.numel() == 0) return;
    RealIn<float> x(&X), c(&C), sn(&Sn);
    RealOut<float> y(&Y);
    const int64_t head_stride = bnsh ? S * H : H, seq_stride = bnsh ? H : N * H;
    const int64_t batch_stride = N * S * H;
    const float* xp = x.get();
    float* yp = y.get();
    // Over (batch, position) pairs, every head of one in turn (one position's cos / sin).
    parallel_for(ctx.thread_pool(), B * S, 4.0 * static_cast<double>(N * H),
                 [&](int64_t lo, int64_t hi) {
                   for (int64_t t = lo; t < hi; ++t) {
                     const int64_t b = t / S, s = t % S;
                     const int64_t p = offset_form ? pos[0] + s : pos[b * S + s];
                     const float* cp = c.get() + p * half;
                     const float* sp = sn.get() + p * half;
                     int64_t off = b * batch_stride + s * seq_stride;
                     for (int64_t n = 0; n < N; ++n, off += head_stride) {
                       rotate_half(xp + off, cp, sp, R, interleaved_, yp + off);
                       if (R < H) std::memcpy(yp + off + R, xp + off + R, (H - R) * sizeof(float));
                     }
                   }
                 });
    y.commit();
  }

 private:
  int64_t num_heads_;
  int64_t rotary_dim_;
  bool interleaved_;
};

}  // namespace

void register_rotary_embedding(KernelRegistry& r) {
  r.add("com.microsoft", "RotaryEmbedding", 1, kMaxOpset, make_factory<RotaryEmbedding>());
}

}  // namespace contrib
}  // namespace ortlite
