// com.microsoft Attention and MultiHeadAttention (onnxruntime's contrib semantics, CPU):
//
//   Attention(input [B, S, Din], weights [Din, Dq + Dk + Dv], bias?, mask_index?, past?,
//             attention_bias?) -> (output [B, S, Dv], present?)
//     Q, K, V = input @ weights (+ bias), split at qkv_hidden_sizes (default three equal
//     parts); past [2, B, N, P, H] is prepended to K and V, present = [2, B, N, P + S, H].
//   MultiHeadAttention(query [B, S, D], key?, value?, bias?, key_padding_mask?,
//                      attention_bias?, past_key?, past_value?) -> (output [B, S, Dv],
//                      present_key?, present_value?)
//     key / value [B, L, D] / [B, L, Dv] (bias added, past_key / past_value [B, N, P, H]
//     prepended, present_* = [B, N, P + L, H]), or [B, N, L, H] used as they are (no bias,
//     no past).
//
// Per batch and head: softmax(scale Q K^T + mask + attention_bias) V, scale 1 / sqrt(H) unless
// the scale attribute says otherwise. The mask (mask_index / key_padding_mask, int32) is one of
//   [B]            key lengths: keys at or after mask[b] are masked
//   [2B]           key end positions then start positions (left padding too)
//   [B, T]         0 / 1 per key;  [B, S, T]  0 / 1 per query and key
//   [B, 1, M, M]   0 / 1, M >= T, rows P .. P + S - 1 and keys 0 .. T - 1 used (Attention only)
// QAttention (below) is Attention over the 8-bit integer product of its input and weight.
// where masked scores get mask_filter_value (-10000) added in place of 0; unidirectional
// masks keys after P + s for query s with the lowest float. attention_bias is
// [B or 1, N or 1, S, T]. float only (as onnxruntime's CPU kernels); the products go through
// compute/gemm.h, one (batch, head) pair per task.
#include "compute/vectorize.h"  // first: compile options for the loops below

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "compute/fused_gemm.h"
#include "compute/gemm.h"
#include "compute/int8_gemm.h"
#include "providers/cpu/contrib/contrib_common.h"

namespace ortlite {
namespace contrib {
namespace {

// A [B, N, rows, H] operand read through strides: the (b, n) matrix starts at
// base + b * batch + n * head, its rows ld apart.
struct View {
  const float* base = nullptr;
  int64_t batch = 0, head = 0, ld = 0;
  const float* at(int64_t b, int64_t n) const { return base + b * batch + n * head; }
};

View bsd_view(const float* base, int64_t S, int64_t row_width, int64_t H) {
  return View{base, S * row_width, H, row_width};
}
View bnsh_view(const float* base, int64_t N, int64_t S, int64_t H) {
  return View{base, N * S * H, S * H, H};
}

struct AttnDims {
  int64_t B = 0, N = 0, S = 0, L = 0, P = 0, T = 0, H = 0, Hv = 0;
};

struct AttnAttrs {
  int64_t num_heads = 0;
  bool unidirectional = false;
  float mask_filter = -10000.f;
  float scale = 0.f;

  void load(const KernelInfo& info) {
    num_heads = info.attr_int_required("num_heads");
    if (num_heads <= 0)
      info.fail(StatusCode::kInvalidGraph,
                "num_heads must be positive, got " + std::to_string(num_heads));
    unidirectional = info.attr_int("unidirectional", 0) != 0;
    mask_filter = info.attr_float("mask_filter_value", -10000.f);
    scale = info.attr_float("scale", 0.f);
  }
};

// The additive [B, S, T] mask of mask_index (nullptr) and the causal rule, or an empty vector
// when neither applies.
std::vector<float> build_mask(const KernelContext& ctx, const Tensor* mask, const AttnDims& d,
                              const AttnAttrs& a, const char* what, bool allow_4d) {
  const bool causal = a.unidirectional && d.S > 1;
  std::vector<float> m;
  if (!mask && !causal) return m;
  const int64_t B = d.B, S = d.S, T = d.T;
  m.assign(static_cast<size_t>(B * S * T), 0.f);
  const float filt = a.mask_filter;
  if (mask) {
    if (mask->dtype() != DataType::kInt32)
      ctx.fail(StatusCode::kInvalidArgument,
               std::string(what) + " must be int32, got " + dtype_name(mask->dtype()));
    const int32_t* mi = mask->data<int32_t>();
    const Shape& s = mask->shape();
    auto bad = [&](const std::string& expected) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string(what) + " " + shape_to_string(s) + " must be " + expected + " (batch " +
                   std::to_string(B) + ", sequence " + std::to_string(S) + ", total sequence " +
                   std::to_string(T) + ")");
    };
    const std::string forms =
        std::string("[B], [2B], [B, T], [B, S, T]") + (allow_4d ? " or [B, 1, M, M]" : "");
    if (s.size() == 1) {
      if (s[0] == 3 * B + 2)
        ctx.fail(StatusCode::kNotImplemented,
                 std::string(what) +
                     " of shape [3B + 2] (onnxruntime's CUDA-only form) is not "
                     "supported");
      if (s[0] != B && s[0] != 2 * B) bad(forms);
      for (int64_t b = 0; b < B; ++b) {
        float* row = m.data() + b * S * T;
        const int64_t end = std::clamp<int64_t>(mi[b], 0, T);
        for (int64_t t = end; t < T; ++t) row[t] = filt;
        if (s[0] == 2 * B) {
          const int64_t start = std::clamp<int64_t>(mi[B + b], 0, T);
          for (int64_t t = 0; t < start; ++t) row[t] = filt;
        }
        for (int64_t q = 1; q < S; ++q) std::memcpy(row + q * T, row, T * sizeof(float));
      }
    } else if (s.size() == 2) {
      if (s[0] != B || s[1] != T) bad("[B, T] for a 2-D mask");
      for (int64_t b = 0; b < B; ++b)
        for (int64_t q = 0; q < S; ++q)
          for (int64_t t = 0; t < T; ++t) m[(b * S + q) * T + t] = mi[b * T + t] > 0 ? 0.f : filt;
    } else if (s.size() == 3) {
      if (s[0] != B || s[1] != S || s[2] != T) bad("[B, S, T] for a 3-D mask");
      for (int64_t i = 0; i < B * S * T; ++i) m[i] = mi[i] > 0 ? 0.f : filt;
    } else if (s.size() == 4 && allow_4d) {
      const int64_t M = s[3];
      if (s[0] != B || s[1] != 1 || s[2] != M || M < T) bad("[B, 1, M, M] with M >= T");
      for (int64_t b = 0; b < B; ++b)
        for (int64_t q = 0; q < S; ++q)
          for (int64_t t = 0; t < T; ++t)
            m[(b * S + q) * T + t] = mi[(b * M + d.P + q) * M + t] > 0 ? 0.f : filt;
    } else {
      bad(forms);
    }
  }
  if (causal) {
    const float low = std::numeric_limits<float>::lowest();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t q = 0; q < S; ++q)
        for (int64_t t = d.P + q + 1; t < T; ++t) m[(b * S + q) * T + t] = low;
  }
  return m;
}

// Checks attention_bias against [B or 1, N or 1, S, T].
void check_attention_bias(const KernelContext& ctx, const Tensor* ab, const AttnDims& d) {
  if (!ab) return;
  if (ab->dtype() != DataType::kFloat)
    ctx.fail(StatusCode::kInvalidArgument,
             std::string("attention_bias must be float, got ") + dtype_name(ab->dtype()));
  const Shape& s = ab->shape();
  if (s.size() != 4 || (s[0] != d.B && s[0] != 1) || (s[1] != d.N && s[1] != 1) || s[2] != d.S ||
      s[3] != d.T)
    ctx.fail(StatusCode::kInvalidArgument,
             "attention_bias " + shape_to_string(s) + " must be [" + std::to_string(d.B) +
                 " or 1, " + std::to_string(d.N) + " or 1, " + std::to_string(d.S) + ", " +
                 std::to_string(d.T) + "]");
}

// out[b, s, n * Hv + j] = softmax(scale q k^T + mask + bias) v for every (b, n).
void attention_core(const AttnDims& d, float scale, const View& q, const View& k, const View& v,
                    const std::vector<float>& mask, const Tensor* attn_bias, float* out,
                    ThreadPool* pool) {
  const int64_t S = d.S, T = d.T, N = d.N;
  const float* ab = attn_bias ? attn_bias->data<float>() : nullptr;
  const bool ab_b = attn_bias && attn_bias->dim(0) != 1, ab_n = attn_bias && attn_bias->dim(1) != 1;
  const double cost =
      2.0 * static_cast<double>(S) * static_cast<double>(T) * static_cast<double>(d.H + d.Hv);
  parallel_for(pool, d.B * N, cost, [&](int64_t i0, int64_t i1) {
    std::vector<float> scores(static_cast<size_t>(S * T));
    float* sc = scores.data();
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / N, n = i % N;
      bool init = false;
      if (!mask.empty()) {
        std::memcpy(sc, mask.data() + b * S * T, static_cast<size_t>(S * T) * sizeof(float));
        init = true;
      }
      if (ab) {
        const float* bp = ab + ((ab_b ? b * (ab_n ? N : 1) : 0) + (ab_n ? n : 0)) * S * T;
        if (init) {
          for (int64_t j = 0; j < S * T; ++j) sc[j] += bp[j];
        } else {
          std::memcpy(sc, bp, static_cast<size_t>(S * T) * sizeof(float));
        }
        init = true;
      }
      if (d.H > 0) {
        gemm(false, true, S, T, d.H, scale, q.at(b, n), q.ld, k.at(b, n), k.ld, init ? 1.f : 0.f,
             sc, T, nullptr);
      } else if (!init) {
        std::fill(sc, sc + S * T, 0.f);
      }
      softmax_rows(sc, S, T);
      gemm(false, false, S, d.Hv, T, 1.f, sc, T, v.at(b, n), v.ld, 0.f,
           out + b * S * N * d.Hv + n * d.Hv, N * d.Hv, nullptr);
    }
  });
}

// dst[b, n] = concat(past[b, n] (P rows), cur(b, n) (L rows)) as [B, N, P + L, H].
void concat_kv(const AttnDims& d, int64_t H, const float* past, const View& cur, float* dst) {
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t n = 0; n < d.N; ++n) {
      float* o = dst + (b * d.N + n) * d.T * H;
      if (d.P > 0)
        std::memcpy(o, past + (b * d.N + n) * d.P * H,
                    static_cast<size_t>(d.P * H) * sizeof(float));
      const float* c = cur.at(b, n);
      for (int64_t l = 0; l < d.L; ++l)
        std::memcpy(o + (d.P + l) * H, c + l * cur.ld, static_cast<size_t>(H) * sizeof(float));
    }
}

float* float_output(KernelContext& ctx, size_t i, const Shape& shape) {
  return wants_output(ctx, i) ? ctx.allocate_output(i, DataType::kFloat, shape).data<float>()
                              : nullptr;
}

// ---- Attention ---------------------------------------------------------------------------

class Attention final : public Kernel {
 public:
  explicit Attention(const KernelInfo& info) {
    attrs_.load(info);
    qkv_sizes_ = info.attr_ints("qkv_hidden_sizes");
    if (!qkv_sizes_.empty() && qkv_sizes_.size() != 3)
      info.fail(StatusCode::kInvalidGraph,
                "qkv_hidden_sizes must have 3 values, got " + std::to_string(qkv_sizes_.size()));
    for (int64_t v : qkv_sizes_)
      if (v <= 0 || v % attrs_.num_heads != 0)
        info.fail(StatusCode::kInvalidGraph,
                  "qkv_hidden_sizes must be positive multiples of num_heads (" +
                      std::to_string(attrs_.num_heads) + "), got " + std::to_string(v));
    if (info.attr_int("do_rotary", 0) != 0)
      info.fail(StatusCode::kNotImplemented, "do_rotary = 1 is not supported");
    if (info.attr_int("past_present_share_buffer", 0) != 0)
      info.fail(StatusCode::kNotImplemented, "past_present_share_buffer = 1 is not supported");
    if (info.has_input(6))
      info.fail(StatusCode::kNotImplemented,
                "the past_sequence_length input (past_present_share_buffer) is not supported");
    const Tensor* w = info.constant_input(1);
    if (w && w->dtype() == DataType::kFloat && w->rank() == 2 && w->numel() > 0) {
      // The fused GEMM where it runs, else gemm.h's packed B.
      if (nn::fgemm::available()) {
        fpacked_ = nn::fgemm::Packed::pack(w->data<float>(), w->dim(1), w->dim(1), w->dim(0), true);
      } else {
        packed_ = pack_gemm_b<float>(false, w->dim(0), w->dim(1), w->data<float>(), w->dim(1));
      }
      packed_shape_ = w->shape();
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = ctx.required_input(0);
    const Tensor& W = ctx.required_input(1);
    const Tensor* bias = ctx.input(2);
    const Tensor* mask = ctx.input(3);
    const Tensor* past = ctx.input(4);
    const Tensor* attn_bias = ctx.input(5);
    check_type(ctx, X, "input", {DataType::kFloat});
    check_same_type(ctx, X, {{&W, "weights"}, {bias, "bias"}, {past, "past"}});
    if (X.rank() != 3)
      ctx.fail(StatusCode::kInvalidArgument,
               "input must be 3-D [batch, sequence, hidden], got " + shape_to_string(X.shape()));
    const int64_t B = X.dim(0), S = X.dim(1), Din = X.dim(2);
    if (W.rank() != 2 || W.dim(0) != Din)
      ctx.fail(StatusCode::kInvalidArgument, "weights " + shape_to_string(W.shape()) +
                                                 " must be 2-D with " + std::to_string(Din) +
                                                 " rows (the input's hidden size)");
    const int64_t Dtot = W.dim(1);
    int64_t Dq, Dk, Dv;
    if (qkv_sizes_.empty()) {
      if (Dtot % 3 != 0)
        ctx.fail(StatusCode::kInvalidArgument,
                 "weights' second dimension " + std::to_string(Dtot) +
                     " is not 3 x hidden size (set qkv_hidden_sizes for unequal sizes)");
      Dq = Dk = Dv = Dtot / 3;
    } else {
      Dq = qkv_sizes_[0], Dk = qkv_sizes_[1], Dv = qkv_sizes_[2];
      if (Dq + Dk + Dv != Dtot)
        ctx.fail(StatusCode::kInvalidArgument,
                 "qkv_hidden_sizes sum to " + std::to_string(Dq + Dk + Dv) + ", weights have " +
                     std::to_string(Dtot) + " columns");
    }
    const int64_t N = attrs_.num_heads;
    if (Dq != Dk)
      ctx.fail(StatusCode::kInvalidArgument,
               "Q and K hidden sizes differ: " + std::to_string(Dq) + " and " + std::to_string(Dk));
    if (Dq % N != 0 || Dv % N != 0)
      ctx.fail(StatusCode::kInvalidArgument,
               "hidden sizes " + std::to_string(Dq) + " / " + std::to_string(Dv) +
                   " are not multiples of num_heads " + std::to_string(N));
    if (bias) check_vector(ctx, *bias, Dtot, "bias");
    AttnDims d;
    d.B = B, d.N = N, d.S = S, d.L = S, d.H = Dq / N, d.Hv = Dv / N;
    if ((past || wants_output(ctx, 1)) && Dq != Dv)
      ctx.fail(StatusCode::kInvalidArgument,
               "past / present need equal Q, K and V hidden sizes, got " + std::to_string(Dq) +
                   ", " + std::to_string(Dk) + ", " + std::to_string(Dv));
    if (past) {
      const Shape& p = past->shape();
      if (p.size() != 5 || p[0] != 2 || p[1] != B || p[2] != N || p[4] != d.H)
        ctx.fail(StatusCode::kInvalidArgument,
                 "past " + shape_to_string(p) + " must be [2, " + std::to_string(B) + ", " +
                     std::to_string(N) + ", past_sequence_length, " + std::to_string(d.H) + "]");
      d.P = p[3];
    }
    d.T = d.P + d.L;
    check_attention_bias(ctx, attn_bias, d);
    const std::vector<float> m = build_mask(ctx, mask, d, attrs_, "mask_index", true);

    float* out = ctx.allocate_output(0, DataType::kFloat, Shape{B, S, Dv}).data<float>();
    float* present = float_output(ctx, 1, Shape{2, B, N, d.T, d.H});
    ThreadPool* pool = ctx.thread_pool();

    // qkv = input @ weights + bias: [B * S, Dtot] (not zeroed: every element is written).
    const size_t qkv_size = static_cast<size_t>(B * S * Dtot);
    std::unique_ptr<float[]> qkv_own(new float[qkv_size]);
    float* qkv = qkv_own.get();
    const float* bp = bias ? bias->data<float>() : nullptr;
    if (bp)
      for (int64_t r = 0; r < B * S; ++r)
        std::memcpy(qkv + r * Dtot, bp, static_cast<size_t>(Dtot) * sizeof(float));
    if (Din == 0) {
      if (!bp) std::fill(qkv, qkv + qkv_size, 0.f);
    } else if (B * S == 0) {
      // no rows to project (present still gets the past)
    } else if (!fpacked_.empty() && packed_shape_ == W.shape()) {
      // The fused GEMM in K blocks of at most 256 (as even as possible), each block's sums
      // added to the bias already in qkv in turn: the additions of gemm.h's and MLAS's K
      // blocks, so the values are the ones the packed GEMM gives (ill-conditioned scores make
      // a softmax repeat any last-bit difference of the projection).
      const int64_t blocks = (Din + 255) / 256, kc = (Din + blocks - 1) / blocks;
      nn::fgemm::Epilogue ep;
      for (int64_t k0 = 0; k0 < Din; k0 += kc)
        nn::fgemm::gemm_w_right_k(X.data<float>(), Din, B * S, fpacked_, k0, std::min(Din, k0 + kc),
                                  qkv, Dtot, ep, bp || k0 > 0, pool);
    } else if (!packed_.empty() && packed_shape_ == W.shape()) {
      gemm_packed_b<float>(false, B * S, X.data<float>(), Din, packed_, 1.f, bp ? 1.f : 0.f, qkv,
                           Dtot, pool);
    } else {
      gemm(false, false, B * S, Dtot, Din, 1.f, X.data<float>(), Din, W.data<float>(), Dtot,
           bp ? 1.f : 0.f, qkv, Dtot, pool);
    }
    const View q = bsd_view(qkv, S, Dtot, d.H);
    View k = bsd_view(qkv + Dq, S, Dtot, d.H);
    View v = bsd_view(qkv + Dq + Dk, S, Dtot, d.Hv);
    std::vector<float> kv_tmp;
    if (past || present) {
      float* dst = present;
      if (!dst) {
        kv_tmp.resize(static_cast<size_t>(2 * B * N * d.T * d.H));
        dst = kv_tmp.data();
      }
      const float* pk = past ? past->data<float>() : nullptr;
      const int64_t half = B * N * d.T * d.H;
      concat_kv(d, d.H, pk, k, dst);
      concat_kv(d, d.H, pk ? pk + B * N * d.P * d.H : nullptr, v, dst + half);
      k = bnsh_view(dst, N, d.T, d.H);
      v = bnsh_view(dst + half, N, d.T, d.H);
    }
    if (B * S == 0 || Dv == 0) return;
    const float scale =
        attrs_.scale == 0.f ? 1.f / std::sqrt(static_cast<float>(d.H)) : attrs_.scale;
    attention_core(d, scale, q, k, v, m, attn_bias, out, pool);
  }

 private:
  AttnAttrs attrs_;
  std::vector<int64_t> qkv_sizes_;
  nn::fgemm::Packed fpacked_;
  PackedGemmMatrix<float> packed_;
  Shape packed_shape_;
};

// ---- QAttention ----------------------------------------------------------------------------

// com.microsoft QAttention(input uint8 / int8 [B, S, Din], weight int8 / uint8 [Din, 3D],
// bias float [3D], input_scale, weight_scale (one, or one per column), mask_index?,
// input_zero_point?, weight_zero_point? (one, or one per column), past?) -> (output, present?):
// as onnxruntime, qkv = float((input - izp) x (weight - wzp)) * (input_scale *
// weight_scale[j]) + bias[j] (the exact int32 product on the 8-bit GEMM), then Attention.
class QAttention final : public Kernel {
 public:
  explicit QAttention(const KernelInfo& info) {
    attrs_.load(info);
    const Tensor* w = info.constant_input(1);
    if (w && w->rank() == 2 && w->numel() > 0 &&
        (w->dtype() == DataType::kUInt8 || w->dtype() == DataType::kInt8)) {
      int8gemm::pack_b(w->raw_data(), w->dtype() == DataType::kInt8, w->dim(0), w->dim(1),
                       w->dim(1), &packed_);
      packed_dtype_ = w->dtype();
      packed_shape_ = w->shape();
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = ctx.required_input(0);
    const Tensor& W = ctx.required_input(1);
    const Tensor& bias = ctx.required_input(2);
    const Tensor& xs = ctx.required_input(3);
    const Tensor& ws = ctx.required_input(4);
    const Tensor* mask = ctx.input(5);
    const Tensor* xz = ctx.input(6);
    const Tensor* wz = ctx.input(7);
    const Tensor* past = ctx.input(8);
    check_type(ctx, X, "input", {DataType::kUInt8, DataType::kInt8});
    check_type(ctx, W, "weight", {DataType::kUInt8, DataType::kInt8});
    check_type(ctx, bias, "bias", {DataType::kFloat});
    if (X.rank() != 3)
      ctx.fail(StatusCode::kInvalidArgument,
               "input must be 3-D [batch, sequence, hidden], got " + shape_to_string(X.shape()));
    const int64_t B = X.dim(0), S = X.dim(1), Din = X.dim(2);
    if (W.rank() != 2 || W.dim(0) != Din || W.dim(1) % 3 != 0)
      ctx.fail(StatusCode::kInvalidArgument, "weight " + shape_to_string(W.shape()) + " must be [" +
                                                 std::to_string(Din) + ", 3 x hidden size]");
    const int64_t Dtot = W.dim(1), D = Dtot / 3, N = attrs_.num_heads;
    if (D % N != 0)
      ctx.fail(StatusCode::kInvalidArgument, "hidden size " + std::to_string(D) +
                                                 " is not a multiple of num_heads " +
                                                 std::to_string(N));
    check_vector(ctx, bias, Dtot, "bias");
    if (xs.dtype() != DataType::kFloat || xs.numel() != 1)
      ctx.fail(StatusCode::kInvalidArgument, "input_scale must be one float, got " +
                                                 std::string(dtype_name(xs.dtype())) + " " +
                                                 shape_to_string(xs.shape()));
    if (ws.dtype() != DataType::kFloat || (ws.numel() != 1 && ws.numel() != Dtot) || ws.rank() > 1)
      ctx.fail(StatusCode::kInvalidArgument,
               "weight_scale must be float, one value or one per column (" + std::to_string(Dtot) +
                   "), got " + dtype_name(ws.dtype()) + " " + shape_to_string(ws.shape()));
    if (xz && (xz->dtype() != X.dtype() || xz->numel() != 1))
      ctx.fail(StatusCode::kInvalidArgument,
               "input_zero_point must be one value of the input's type (" +
                   std::string(dtype_name(X.dtype())) + "), got " + dtype_name(xz->dtype()) + " " +
                   shape_to_string(xz->shape()));
    if (wz &&
        (wz->dtype() != W.dtype() || (wz->numel() != 1 && wz->numel() != Dtot) || wz->rank() > 1))
      ctx.fail(StatusCode::kInvalidArgument,
               "weight_zero_point must be of the weight's type (" +
                   std::string(dtype_name(W.dtype())) + "), one value or one per column, got " +
                   dtype_name(wz->dtype()) + " " + shape_to_string(wz->shape()));
    if (past) check_type(ctx, *past, "past", {DataType::kFloat});
    AttnDims d;
    d.B = B, d.N = N, d.S = S, d.L = S, d.H = D / N, d.Hv = D / N;
    if (past) {
      const Shape& p = past->shape();
      if (p.size() != 5 || p[0] != 2 || p[1] != B || p[2] != N || p[4] != d.H)
        ctx.fail(StatusCode::kInvalidArgument,
                 "past " + shape_to_string(p) + " must be [2, " + std::to_string(B) + ", " +
                     std::to_string(N) + ", past_sequence_length, " + std::to_string(d.H) + "]");
      d.P = p[3];
    }
    d.T = d.P + d.L;
    const std::vector<float> m = build_mask(ctx, mask, d, attrs_, "mask_index", true);
    float* out = ctx.allocate_output(0, DataType::kFloat, Shape{B, S, D}).data<float>();
    float* present = float_output(ctx, 1, Shape{2, B, N, d.T, d.H});
    ThreadPool* pool = ctx.thread_pool();

    // qkv = float((input - izp) x (weight - wzp)) * (input_scale * weight_scale[j]) + bias[j],
    // each tile scaled as the 8-bit GEMM finishes it (the same roundings as a pass over an
    // int32 product: the scale product, the product by it, then the sum).
    const int64_t R = B * S;
    const float xsv = xs.data<float>()[0];
    const float* wsd = ws.data<float>();
    const float* bd = bias.data<float>();
    std::unique_ptr<float[]> qkv_own(new float[static_cast<size_t>(R * Dtot)]);
    float* qkv = qkv_own.get();
    if (R > 0 && Din == 0) {
      for (int64_t r = 0; r < R; ++r)
        for (int64_t j = 0; j < Dtot; ++j) qkv[r * Dtot + j] = 0.f + bd[j];
    }
    if (R > 0 && Din > 0) {
      auto zp_of = [](const Tensor* t, int64_t i) -> int32_t {
        if (!t) return 0;
        return t->dtype() == DataType::kInt8 ? t->data<int8_t>()[i] : t->data<uint8_t>()[i];
      };
      const int32_t za = zp_of(xz, 0);
      std::vector<int32_t> zb(static_cast<size_t>(wz ? wz->numel() : 1), 0);
      for (size_t j = 0; j < zb.size(); ++j) zb[j] = zp_of(wz, static_cast<int64_t>(j));
      int8gemm::PackedA pa;
      int8gemm::pack_a(X.raw_data(), X.dtype() == DataType::kInt8, R, Din, Din, &pa);
      const bool use_packed =
          !packed_.data.empty() && W.dtype() == packed_dtype_ && W.shape() == packed_shape_;
      int8gemm::PackedB local;
      if (!use_packed)
        int8gemm::pack_b(W.raw_data(), W.dtype() == DataType::kInt8, Din, Dtot, Dtot, &local);
      const std::vector<float> row_scale(static_cast<size_t>(R), xsv);
      std::vector<float> col_scale(static_cast<size_t>(Dtot));
      for (int64_t j = 0; j < Dtot; ++j) col_scale[j] = wsd[ws.numel() == 1 ? 0 : j];
      int8gemm::FloatOut fo;
      fo.row_scale = row_scale.data();
      fo.col_scale = col_scale.data();
      fo.bias = bd;
      int8gemm::gemm_to_float(pa, use_packed ? packed_ : local, &za, 0, zb.data(),
                              zb.size() > 1 ? 1 : 0, fo, qkv, Dtot, pool);
    }
    const View q = bsd_view(qkv, S, Dtot, d.H);
    View k = bsd_view(qkv + D, S, Dtot, d.H);
    View v = bsd_view(qkv + 2 * D, S, Dtot, d.Hv);
    std::vector<float> kv_tmp;
    if (past || present) {
      float* dst = present;
      if (!dst) {
        kv_tmp.resize(static_cast<size_t>(2 * B * N * d.T * d.H));
        dst = kv_tmp.data();
      }
      const float* pk = past ? past->data<float>() : nullptr;
      const int64_t half = B * N * d.T * d.H;
      concat_kv(d, d.H, pk, k, dst);
      concat_kv(d, d.H, pk ? pk + B * N * d.P * d.H : nullptr, v, dst + half);
      k = bnsh_view(dst, N, d.T, d.H);
      v = bnsh_view(dst + half, N, d.T, d.H);
    }
    if (R == 0 || D == 0) return;
    const float scale =
        attrs_.scale == 0.f ? 1.f / std::sqrt(static_cast<float>(d.H)) : attrs_.scale;
    attention_core(d, scale, q, k, v, m, nullptr, out, pool);
  }

 private:
  AttnAttrs attrs_;
  int8gemm::PackedB packed_;
  DataType packed_dtype_ = DataType::kUndefined;
  Shape packed_shape_;
};

// ---- MultiHeadAttention ------------------------------------------------------------------

class MultiHeadAttention final : public Kernel {
 public:
  explicit MultiHeadAttention(const KernelInfo& info) {
    attrs_.load(info);
    if (info.num_outputs() > 3 && !info.node().outputs[3].empty())
      info.fail(StatusCode::kNotImplemented, "the qk output (output 3) is not supported");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& Qt = ctx.required_input(0);
    const Tensor* Kt = ctx.input(1);
    const Tensor* Vt = ctx.input(2);
    const Tensor* bias = ctx.input(3);
    const Tensor* mask = ctx.input(4);
    const Tensor* attn_bias = ctx.input(5);
    const Tensor* past_k = ctx.input(6);
    const Tensor* past_v = ctx.input(7);
    check_type(ctx, Qt, "query", {DataType::kFloat});
    check_same_type(
        ctx, Qt,
        {{Kt, "key"}, {Vt, "value"}, {bias, "bias"}, {past_k, "past_key"}, {past_v, "past_value"}});
    const int64_t N = attrs_.num_heads;
    if (Qt.rank() == 5)
      ctx.fail(StatusCode::kNotImplemented, "packed QKV query [B, S, N, 3, H] is not supported");
    if (Kt && Kt->rank() == 5)
      ctx.fail(StatusCode::kNotImplemented, "packed KV key [B, L, N, 2, H] is not supported");
    if (Qt.rank() != 3)
      ctx.fail(StatusCode::kInvalidArgument,
               "query must be 3-D [batch, sequence, hidden], got " + shape_to_string(Qt.shape()));
    const int64_t B = Qt.dim(0), S = Qt.dim(1), D = Qt.dim(2);
    if (D % N != 0)
      ctx.fail(StatusCode::kInvalidArgument, "query hidden size " + std::to_string(D) +
                                                 " is not a multiple of num_heads " +
                                                 std::to_string(N));
    if (!Kt || !Vt)
      ctx.fail(StatusCode::kInvalidArgument,
               "key and value are required (a query without them would be packed QKV "
               "[B, S, N, 3, H], which is not supported)");
    if (!past_k != !past_v)
      ctx.fail(StatusCode::kInvalidArgument, "past_key and past_value must be given together");
    const Tensor& K = *Kt;
    const Tensor& V = *Vt;
    AttnDims d;
    d.B = B, d.N = N, d.S = S, d.H = D / N;
    const bool bnsh = K.rank() == 4;
    int64_t Dv;
    if (bnsh) {
      // Key and value already [B, N, L, H]: used as they are.
      if (K.dim(0) != B || K.dim(1) != N || K.dim(3) != d.H)
        ctx.fail(StatusCode::kInvalidArgument,
                 "key " + shape_to_string(K.shape()) + " must be [" + std::to_string(B) + ", " +
                     std::to_string(N) + ", kv_sequence_length, " + std::to_string(d.H) + "]");
      if (V.rank() != 4 || V.dim(0) != B || V.dim(1) != N || V.dim(2) != K.dim(2))
        ctx.fail(StatusCode::kInvalidArgument,
                 "value " + shape_to_string(V.shape()) + " must be [" + std::to_string(B) + ", " +
                     std::to_string(N) + ", " + std::to_string(K.dim(2)) + ", v_head_size]");
      if (bias || past_k)
        ctx.fail(StatusCode::kInvalidArgument,
                 "bias and past_key / past_value cannot be used with key / value of shape "
                 "[B, N, L, H]");
      d.L = K.dim(2);
      d.Hv = V.dim(3);
      Dv = N * d.Hv;
    } else {
      if (K.rank() != 3 || K.dim(0) != B || K.dim(2) != D)
        ctx.fail(StatusCode::kInvalidArgument, "key " + shape_to_string(K.shape()) + " must be [" +
                                                   std::to_string(B) + ", kv_sequence_length, " +
                                                   std::to_string(D) + "] or [B, N, L, H]");
      if (V.rank() != 3 || V.dim(0) != B || V.dim(1) != K.dim(1) || V.dim(2) % N != 0)
        ctx.fail(StatusCode::kInvalidArgument, "value " + shape_to_string(V.shape()) +
                                                   " must be [" + std::to_string(B) + ", " +
                                                   std::to_string(K.dim(1)) +
                                                   ", v_hidden_size] with v_hidden_size a multiple "
                                                   "of num_heads");
      d.L = K.dim(1);
      Dv = V.dim(2);
      d.Hv = Dv / N;
    }
    if (bias) check_vector(ctx, *bias, 2 * D + Dv, "bias");
    if (past_k) {
      const Shape& pk = past_k->shape();
      const Shape& pv = past_v->shape();
      if (pk.size() != 4 || pk[0] != B || pk[1] != N || pk[3] != d.H)
        ctx.fail(StatusCode::kInvalidArgument,
                 "past_key " + shape_to_string(pk) + " must be [" + std::to_string(B) + ", " +
                     std::to_string(N) + ", past_sequence_length, " + std::to_string(d.H) + "]");
      if (pv.size() != 4 || pv[0] != B || pv[1] != N || pv[2] != pk[2] || pv[3] != d.Hv)
        ctx.fail(StatusCode::kInvalidArgument, "past_value " + shape_to_string(pv) + " must be [" +
                                                   std::to_string(B) + ", " + std::to_string(N) +
                                                   ", " + std::to_string(pk[2]) + ", " +
                                                   std::to_string(d.Hv) + "]");
      d.P = pk[2];
    }
    d.T = d.P + d.L;
    check_attention_bias(ctx, attn_bias, d);
    const std::vector<float> m = build_mask(ctx, mask, d, attrs_, "key_padding_mask", false);

    float* out = ctx.allocate_output(0, DataType::kFloat, Shape{B, S, Dv}).data<float>();
    float* present_k = float_output(ctx, 1, Shape{B, N, d.T, d.H});
    float* present_v = float_output(ctx, 2, Shape{B, N, d.T, d.Hv});
    ThreadPool* pool = ctx.thread_pool();

    // Q, K, V with the bias added (copies only when there is a bias).
    const float* bp = bias ? bias->data<float>() : nullptr;
    std::vector<float> qb, kb, vb;
    auto with_bias = [&](const Tensor& t, const float* b, int64_t width,
                         std::vector<float>* buf) -> const float* {
      if (!b) return t.data<float>();
      buf->resize(static_cast<size_t>(t.numel()));
      const float* src = t.data<float>();
      const int64_t rows = width ? t.numel() / width : 0;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < width; ++j) (*buf)[r * width + j] = src[r * width + j] + b[j];
      return buf->data();
    };
    const View q = bsd_view(with_bias(Qt, bp, D, &qb), S, D, d.H);
    View k, v;
    if (bnsh) {
      k = bnsh_view(K.data<float>(), N, d.L, d.H);
      v = bnsh_view(V.data<float>(), N, d.L, d.Hv);
    } else {
      k = bsd_view(with_bias(K, bp ? bp + D : nullptr, D, &kb), d.L, D, d.H);
      v = bsd_view(with_bias(V, bp ? bp + 2 * D : nullptr, Dv, &vb), d.L, Dv, d.Hv);
    }
    std::vector<float> kt, vt;
    if (!bnsh && (past_k || present_k || present_v)) {
      float* dk = present_k;
      float* dv = present_v;
      if (!dk) {
        kt.resize(static_cast<size_t>(B * N * d.T * d.H));
        dk = kt.data();
      }
      if (!dv) {
        vt.resize(static_cast<size_t>(B * N * d.T * d.Hv));
        dv = vt.data();
      }
      concat_kv(d, d.H, past_k ? past_k->data<float>() : nullptr, k, dk);
      concat_kv(d, d.Hv, past_v ? past_v->data<float>() : nullptr, v, dv);
      k = bnsh_view(dk, N, d.T, d.H);
      v = bnsh_view(dv, N, d.T, d.Hv);
    } else if (bnsh) {
      if (present_k)
        std::memcpy(present_k, K.data<float>(), static_cast<size_t>(K.numel()) * sizeof(float));
      if (present_v)
        std::memcpy(present_v, V.data<float>(), static_cast<size_t>(V.numel()) * sizeof(float));
    }
    if (B * S == 0 || Dv == 0) return;
    if (d.T == 0) {
      std::fill(out, out + B * S * Dv, 0.f);
      return;
    }
    const float scale =
        attrs_.scale == 0.f ? 1.f / std::sqrt(static_cast<float>(d.H)) : attrs_.scale;
    attention_core(d, scale, q, k, v, m, attn_bias, out, pool);
  }

 private:
  AttnAttrs attrs_;
};

}  // namespace

void register_attention(KernelRegistry& r) {
  r.add("com.microsoft", "Attention", 1, kMaxOpset, make_factory<Attention>());
  r.add("com.microsoft", "MultiHeadAttention", 1, kMaxOpset, make_factory<MultiHeadAttention>());
  r.add("com.microsoft", "QAttention", 1, kMaxOpset, make_factory<QAttention>());
}

}  // namespace contrib
}  // namespace ortlite
