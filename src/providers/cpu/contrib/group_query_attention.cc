// com.microsoft GroupQueryAttention (onnxruntime's contrib semantics, CPU):
//
//   GroupQueryAttention(query, key?, value?, past_key?, past_value?, seqlens_k,
//                       total_sequence_length, cos_cache?, sin_cache?, position_ids?,
//                       attention_bias?, head_sink?)
//     -> (output [B, S, N H], present_key [B, kvN, T', H], present_value [B, kvN, T', H])
//
//   query [B, S, N H] with key / value [B, S, kvN H], or query packed [B, S, (N + 2 kvN) H]
//   with key and value omitted; past_key / past_value [B, kvN, P, H] (BNSH). seqlens_k [B]
//   (int32) is each batch's total length minus 1, total_sequence_length (int32 scalar) the
//   longest; T' = max(total_sequence_length, P).
//
// A first prompt (S == total_sequence_length) has no past; otherwise batch b's past is its
// first seqlens_k[b] + 1 - S rows of past_key / past_value. present_* is the past, then the
// new keys / values, then zeros. Query head n attends causally to kv head n / (N / kvN):
// softmax(scale q k^T + bias) v, scale 1 / sqrt(H) unless given, with softcap (c tanh(x / c))
// before the bias (onnxruntime's order), and local_window_size w > 0 keeping the last w + 1
// keys of each row. attention_bias [B or 1, N or 1, S, total_sequence_length] is added to
// the scores of the keys a row attends to. smooth_softmax adds an exp(0) term to each softmax
// denominator, head_sink [N] an exp(sink[n]) term (the largest score taken with it; it wins
// over smooth_softmax's 0). do_rotary rotates the new queries and keys (rotary_interleaved;
// rotary dimension 2 * cos_cache.shape[1]) at their positions: past length + s, or from
// position_ids [B, >= S] (int64; in a first prompt only its first value, the position of s =
// 0 in every batch, as onnxruntime reads it); position_ids without do_rotary change nothing.
// float, and float16 / bfloat16 computed in float. qk_output is NotImplemented; present_*
// never share past_*'s buffers.
#include "compute/vectorize.h"  // first: compile options for the loops below

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "compute/gemm.h"
#include "providers/cpu/contrib/contrib_common.h"

namespace ortlite {
namespace contrib {
namespace {

class GroupQueryAttention final : public Kernel {
 public:
  explicit GroupQueryAttention(const KernelInfo& info)
      : N_(info.attr_int_required("num_heads")),
        kvN_(info.attr_int_required("kv_num_heads")),
        scale_(info.attr_float("scale", 0.f)),
        softcap_(info.attr_float("softcap", 0.f)),
        window_(info.attr_int("local_window_size", -1)),
        do_rotary_(info.attr_int("do_rotary", 0) == 1),
        interleaved_(info.attr_int("rotary_interleaved", 0) == 1),
        smooth_(info.attr_int("smooth_softmax", 0) == 1) {
    if (N_ <= 0 || kvN_ <= 0 || N_ % kvN_ != 0)
      info.fail(StatusCode::kInvalidGraph, "num_heads (" + std::to_string(N_) +
                                               ") must be a positive multiple of " +
                                               "kv_num_heads (" + std::to_string(kvN_) + ")");
    if (info.attr_int("qk_output", 0) != 0)
      info.fail(StatusCode::kNotImplemented, "the qk_output attribute is not supported");
    for (size_t i = 12; i < info.num_inputs(); ++i)
      if (info.has_input(i))
        info.fail(StatusCode::kNotImplemented,
                  "input " + std::to_string(i) + " (quantized KV cache scales) is not supported");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& Q = ctx.required_input(0);
    const Tensor* K = ctx.input(1);
    const Tensor* V = ctx.input(2);
    const Tensor* PK = ctx.input(3);
    const Tensor* PV = ctx.input(4);
    const Tensor& SL = ctx.required_input(5);
    const Tensor& TS = ctx.required_input(6);
    const Tensor* C = ctx.input(7);
    const Tensor* Sn = ctx.input(8);
    const Tensor* PI = ctx.input(9);
    const Tensor* AB = ctx.input(10);
    const Tensor* HS = ctx.input(11);
    check_type(ctx, Q, "query", {DataType::kFloat, DataType::kFloat16, DataType::kBFloat16});
    check_same_type(ctx, Q,
                    {{K, "key"},
                     {V, "value"},
                     {PK, "past_key"},
                     {PV, "past_value"},
                     {C, "cos_cache"},
                     {Sn, "sin_cache"},
                     {AB, "attention_bias"},
                     {HS, "head_sink"}});
    auto bad = [&](const std::string& m) { ctx.fail(StatusCode::kInvalidArgument, m); };
    if (Q.rank() != 3) bad("query must be 3-D [B, S, D], got " + shape_to_string(Q.shape()));
    const int64_t B = Q.dim(0), S = Q.dim(1);
    const bool packed = K == nullptr;
    if (packed != (V == nullptr)) bad("key and value must both be given or both omitted");
    int64_t H = 0;
    if (packed) {
      if (Q.dim(2) % (N_ + 2 * kvN_) != 0)
        bad("packed query width " + std::to_string(Q.dim(2)) +
            " is not a multiple of num_heads + 2 kv_num_heads");
      H = Q.dim(2) / (N_ + 2 * kvN_);
    } else {
      if (Q.dim(2) % N_ != 0)
        bad("query width " + std::to_string(Q.dim(2)) + " is not a multiple of num_heads");
      H = Q.dim(2) / N_;
      const Shape want{B, S, kvN_ * H};
      if (K->shape() != want || V->shape() != want)
        bad("key and value must be " + shape_to_string(want) + ", got " +
            shape_to_string(K->shape()) + " and " + shape_to_string(V->shape()));
    }
    if ((PK == nullptr) != (PV == nullptr))
      bad("past_key and past_value must both be given or both omitted");
    int64_t P = 0;
    if (PK) {
      P = PK->rank() == 4 ? PK->dim(2) : -1;
      const Shape want{B, kvN_, P, H};
      if (PK->shape() != want || PV->shape() != want)
        bad("past_key and past_value must be [B, kv_num_heads, P, H] = " + shape_to_string(want) +
            ", got " + shape_to_string(PK->shape()) + " and " + shape_to_string(PV->shape()));
    }
    if (SL.dtype() != DataType::kInt32 || SL.numel() != B)
      bad("seqlens_k must be int32 with B = " + std::to_string(B) + " elements");
    if (TS.dtype() != DataType::kInt32 || TS.numel() != 1)
      bad("total_sequence_length must be one int32");
    const int64_t total = *TS.data<int32_t>();
    if (total < 1) bad("total_sequence_length must be positive, got " + std::to_string(total));
    const int64_t Tp = std::max(total, P);
    const bool first_prompt = S == total;
    const int32_t* seqlens = SL.data<int32_t>();
    std::vector<int64_t> past(static_cast<size_t>(B)), kv_len(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) {
      const int64_t t = static_cast<int64_t>(seqlens[b]) + 1;
      const int64_t p = first_prompt ? 0 : t - S;
      if (t < 1 || t > Tp || p < 0 || p > P)
        bad("seqlens_k[" + std::to_string(b) + "] = " + std::to_string(seqlens[b]) +
            " does not fit sequence length " + std::to_string(S) + ", past length " +
            std::to_string(P) + " and total_sequence_length " + std::to_string(total));
      past[static_cast<size_t>(b)] = p;
      kv_len[static_cast<size_t>(b)] = p + S;
    }
    if (PI && (PI->dtype() != DataType::kInt64 || PI->rank() != 2 || PI->dim(0) != B ||
               PI->dim(1) < S || PI->numel() == 0))
      bad("position_ids must be int64 [B, >= S] = [" + std::to_string(B) +
          ", >= " + std::to_string(S) + "], got " + dtype_name(PI->dtype()) + " " +
          shape_to_string(PI->shape()));
    if (AB && (AB->rank() != 4 || (AB->dim(0) != B && AB->dim(0) != 1) ||
               (AB->dim(1) != N_ && AB->dim(1) != 1) || AB->dim(2) != S || AB->dim(3) != total))
      bad("attention_bias must be [B or 1, num_heads or 1, S, total_sequence_length] = [" +
          std::to_string(B) + " or 1, " + std::to_string(N_) + " or 1, " + std::to_string(S) +
          ", " + std::to_string(total) + "], got " + shape_to_string(AB->shape()));
    if (HS && (HS->rank() != 1 || HS->dim(0) != N_))
      bad("head_sink must be [num_heads] = [" + std::to_string(N_) + "], got " +
          shape_to_string(HS->shape()));
    // The rotary position of new token s of batch b.
    const int64_t* pids = PI ? PI->data<int64_t>() : nullptr;
    auto position = [&](int64_t b, int64_t s) -> int64_t {
      if (!pids) return past[static_cast<size_t>(b)] + s;
      return first_prompt ? pids[0] + s : pids[b * PI->dim(1) + s];
    };
    int64_t half = 0;
    if (do_rotary_) {
      if (!C || !Sn) bad("do_rotary needs cos_cache and sin_cache");
      if (C->rank() != 2 || C->shape() != Sn->shape())
        bad("cos_cache and sin_cache must be 2-D of one shape, got " + shape_to_string(C->shape()) +
            " and " + shape_to_string(Sn->shape()));
      half = C->dim(1);
      if (half == 0 || 2 * half > H)
        bad("cos_cache.shape[1] " + std::to_string(half) + " must be in [1, H / 2]");
      for (int64_t b = 0; b < B; ++b)
        for (int64_t s = 0; s < S; ++s) {
          const int64_t pos = position(b, s);
          if (pos < 0 || pos >= C->dim(0))
            bad("position " + std::to_string(pos) + " (batch " + std::to_string(b) + ", token " +
                std::to_string(s) + ") is outside the cos / sin cache of " +
                std::to_string(C->dim(0)) + " positions");
        }
    }

    Tensor& Y = ctx.allocate_output(0, Q.dtype(), {B, S, N_ * H});
    Tensor* YK =
        wants_output(ctx, 1) ? &ctx.allocate_output(1, Q.dtype(), {B, kvN_, Tp, H}) : nullptr;
    Tensor* YV =
        wants_output(ctx, 2) ? &ctx.allocate_output(2, Q.dtype(), {B, kvN_, Tp, H}) : nullptr;
    if (Y.numel() == 0) return;

    RealIn<float> q_in(&Q), k_in(K), v_in(V), pk_in(PK), pv_in(PV), c_in(C), s_in(Sn), ab_in(AB),
        hs_in(HS);
    // Row strides of the new query / key / value and where each starts within a row.
    const int64_t row = Q.dim(2), kv_row = packed ? row : kvN_ * H;
    const float* qsrc = q_in.get();
    const float* ksrc = packed ? qsrc + N_ * H : k_in.get();
    const float* vsrc = packed ? qsrc + (N_ + kvN_) * H : v_in.get();

    // q [B, N, S, H] and the caches [B, kvN, Tp, H] in float, rotated where asked.
    std::vector<float> q(static_cast<size_t>(B * N_ * S * H));
    std::vector<float> kc(static_cast<size_t>(B * kvN_ * Tp * H), 0.f);
    std::vector<float> vc(kc.size(), 0.f);
    const int64_t R = 2 * half;
    auto place = [&](const float* src, int64_t pos, float* dst) {
      if (do_rotary_) {
        rotate_half(src, c_in.get() + pos * half, s_in.get() + pos * half, R, interleaved_, dst);
        std::memcpy(dst + R, src + R, static_cast<size_t>(H - R) * sizeof(float));
      } else {
        std::memcpy(dst, src, static_cast<size_t>(H) * sizeof(float));
      }
    };
    for (int64_t b = 0; b < B; ++b) {
      const int64_t p = past[static_cast<size_t>(b)];
      for (int64_t s = 0; s < S; ++s) {
        const int64_t r = b * S + s;
        const int64_t pos = do_rotary_ ? position(b, s) : 0;
        for (int64_t n = 0; n < N_; ++n)
          place(qsrc + r * row + n * H, pos, q.data() + ((b * N_ + n) * S + s) * H);
        for (int64_t n = 0; n < kvN_; ++n) {
          const int64_t off = ((b * kvN_ + n) * Tp + p + s) * H;
          place(ksrc + r * kv_row + n * H, pos, kc.data() + off);
          std::memcpy(vc.data() + off, vsrc + r * kv_row + n * H,
                      static_cast<size_t>(H) * sizeof(float));
        }
      }
      if (p > 0)
        for (int64_t n = 0; n < kvN_; ++n) {
          const size_t bytes = static_cast<size_t>(p * H) * sizeof(float);
          std::memcpy(kc.data() + (b * kvN_ + n) * Tp * H, pk_in.get() + (b * kvN_ + n) * P * H,
                      bytes);
          std::memcpy(vc.data() + (b * kvN_ + n) * Tp * H, pv_in.get() + (b * kvN_ + n) * P * H,
                      bytes);
        }
    }

    RealOut<float> y(&Y);
    const float alpha = scale_ == 0.f ? 1.f / std::sqrt(static_cast<float>(H)) : scale_;
    const int64_t group = N_ / kvN_;
    parallel_for(
        ctx.thread_pool(), B * N_, 2.0 * static_cast<double>(S * Tp * H),
        [&](int64_t lo, int64_t hi) {
          std::vector<float> sc(static_cast<size_t>(S * Tp)), o(static_cast<size_t>(S * H));
          for (int64_t t = lo; t < hi; ++t) {
            const int64_t b = t / N_, n = t % N_;
            const int64_t p = past[static_cast<size_t>(b)], L = kv_len[static_cast<size_t>(b)];
            const float* kb = kc.data() + (b * kvN_ + n / group) * Tp * H;
            const float* vb = vc.data() + (b * kvN_ + n / group) * Tp * H;
            gemm(false, true, S, L, H, alpha, q.data() + t * S * H, H, kb, H, 0.f, sc.data(), Tp,
                 nullptr);
            // This (b, n)'s [S, total] block of the bias, when there is one.
            const float* bias = AB ? ab_in.get() + ((AB->dim(0) == 1 ? 0 : b * AB->dim(1)) +
                                                    (AB->dim(1) == 1 ? 0 : n)) *
                                                       S * total
                                   : nullptr;
            const float* sink = HS ? hs_in.get() + n : nullptr;
            for (int64_t s = 0; s < S; ++s) {
              float* r = sc.data() + s * Tp;
              const int64_t end = p + s + 1;
              const int64_t start = window_ > 0 && end > window_ + 1 ? end - window_ - 1 : 0;
              softmax_span(r + start, end - start, bias ? bias + s * total + start : nullptr, sink);
              std::fill(r, r + start, 0.f);
              std::fill(r + end, r + L, 0.f);
            }
            gemm(false, false, S, H, L, 1.f, sc.data(), Tp, vb, H, 0.f, o.data(), H, nullptr);
            for (int64_t s = 0; s < S; ++s)
              std::memcpy(y.get() + ((b * S + s) * N_ + n) * H, o.data() + s * H,
                          static_cast<size_t>(H) * sizeof(float));
          }
        });
    y.commit();
    for (auto [T, src] : {std::pair<Tensor*, const float*>{YK, kc.data()}, {YV, vc.data()}}) {
      if (!T) continue;
      RealOut<float> out(T);
      std::memcpy(out.get(), src, static_cast<size_t>(T->numel()) * sizeof(float));
      out.commit();
    }
  }

 private:
  // softcap, then the bias (when given), then softmax (with an exp(sink) term in the
  // denominator: sink the head's, else 0 with smooth_softmax), in place.
  void softmax_span(float* x, int64_t n, const float* bias, const float* head_sink) const {
    if (softcap_ > 0.f)
      for (int64_t i = 0; i < n; ++i) x[i] = softcap_ * std::tanh(x[i] / softcap_);
    if (bias)
      for (int64_t i = 0; i < n; ++i) x[i] += bias[i];
    const bool has_sink = head_sink || smooth_;
    const float sink = head_sink ? *head_sink : 0.f;
    float m = has_sink ? sink : -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
    float sum = has_sink ? std::exp(sink - m) : 0.f;
    for (int64_t i = 0; i < n; ++i) {
      x[i] = std::exp(x[i] - m);
      sum += x[i];
    }
    const float inv = 1.f / sum;
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
  }

  int64_t N_, kvN_;
  float scale_, softcap_;
  int64_t window_;
  bool do_rotary_, interleaved_, smooth_;
};

}  // namespace

void register_group_query_attention(KernelRegistry& r) {
  r.add("com.microsoft", "GroupQueryAttention", 1, kMaxOpset, make_factory<GroupQueryAttention>());
}

}  // namespace contrib
}  // namespace ortlite
