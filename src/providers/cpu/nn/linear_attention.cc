// LinearAttention (opset 27): the recurrent form of linear attention, for decode (T = 1) and
// prefill (T > 1). query [B, T, Hq * dk], key [B, T, Hkv * dk], value [B, T, Hkv * dv] (heads
// packed into the last axis); optional past_state [B, Hkv, dk, dv] (zeros when absent), decay
// [B, T, Hkv] or [B, T, Hkv * dk] (log-space, per head or per key dim) and beta [B, T, Hkv] or
// [B, T, 1]. Per token, with S the [dk, dv] state of a kv head:
//   linear:      S = S + k (x) v
//   gated:       S = exp(g) S + k (x) v
//   delta:       S = S + k (x) beta (v - S^T k)
//   gated_delta: S = exp(g) S;  S = S + k (x) beta (v - S^T k)
// and o = scale * S^T q for every query head that shares the kv head (query head h reads kv
// head h / (Hq / Hkv)). scale 0 means 1 / sqrt(dk); chunk_size is a tuning hint for
// chunk-parallel prefill and changes no result: the tokens run one after another.
//
// The state is kept in float, row i of S (dv values) contiguous: each token touches S once
// (twice for the delta rules: decay and S^T k, then the update and the query heads' reads),
// in loops over dv that the compiler vectorizes. The (batch, kv head) pairs are independent
// and run in parallel. float16 / bfloat16 inputs compute in float; present_state has the type
// of past_state, or of query when past_state is absent.
#include <cmath>
#include <string>
#include <vector>

#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {
namespace {

bool is_la_type(DataType t) {
  return t == DataType::kFloat || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

// A float view of an input: the tensor's own data when it is float, else a converted copy.
class FloatView {
 public:
  FloatView() = default;
  explicit FloatView(const Tensor* t) {
    if (!t) return;
    if (t->dtype() == DataType::kFloat) {
      p_ = t->data<float>();
    } else {
      copy_.resize(static_cast<size_t>(t->numel()));
      convert_to_float(t->dtype(), t->raw_data(), copy_.data(), t->numel());
      p_ = copy_.data();
    }
  }
  const float* get() const { return p_; }

 private:
  std::vector<float> copy_;
  const float* p_ = nullptr;
};

class LinearAttention final : public Kernel {
 public:
  explicit LinearAttention(const KernelInfo& info)
      : q_heads_(info.attr_int_required("q_num_heads")),
        kv_heads_(info.attr_int_required("kv_num_heads")),
        scale_(info.attr_float("scale", 0.0f)) {
    if (q_heads_ <= 0 || kv_heads_ <= 0 || q_heads_ % kv_heads_ != 0) {
      info.fail(StatusCode::kInvalidGraph, "q_num_heads (" + std::to_string(q_heads_) +
                                               ") must be a positive multiple of kv_num_heads (" +
                                               std::to_string(kv_heads_) + ")");
    }
    // A tuning hint only; read so that a mistyped attribute is still reported.
    (void)info.attr_int("chunk_size", 64);
    rule_ = info.attr_string("update_rule", "gated_delta");
    if (rule_ == "linear") {
      gating_ = delta_ = false;
    } else if (rule_ == "gated") {
      gating_ = true;
      delta_ = false;
    } else if (rule_ == "delta") {
      gating_ = false;
      delta_ = true;
    } else if (rule_ == "gated_delta") {
      gating_ = delta_ = true;
    } else {
      info.fail(StatusCode::kInvalidGraph, "attribute 'update_rule' = '" + rule_ +
                                               "' is unknown (linear, gated, delta or "
                                               "gated_delta)");
    }
    check_optional(info.has_input(4), gating_, "decay",
                   [&](const std::string& m) { info.fail(StatusCode::kInvalidGraph, m); });
    check_optional(info.has_input(5), delta_, "beta",
                   [&](const std::string& m) { info.fail(StatusCode::kInvalidGraph, m); });
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& q = ctx.required_input(0);
    const Tensor& k = ctx.required_input(1);
    const Tensor& v = ctx.required_input(2);
    const Tensor* past = ctx.input(3);
    const Tensor* decay = ctx.input(4);
    const Tensor* beta = ctx.input(5);
    auto fail = [&](const std::string& m) { ctx.fail(StatusCode::kInvalidArgument, m); };
    // An optional input the graph names may still come without a value.
    check_optional(decay != nullptr, gating_, "decay", fail);
    check_optional(beta != nullptr, delta_, "beta", fail);

    const DataType dt = q.dtype();
    if (!is_la_type(dt)) {
      fail("input 'query' has element type " + std::string(dtype_name(dt)) +
           "; the op takes float, float16 or bfloat16");
    }
    auto check_type = [&](const Tensor* t, const char* name) {
      if (t && t->dtype() != dt) {
        fail(std::string("input '") + name + "' has element type " + dtype_name(t->dtype()) +
             ", not the type of 'query' (" + dtype_name(dt) + ")");
      }
    };
    check_type(&k, "key");
    check_type(&v, "value");
    check_type(decay, "decay");
    check_type(beta, "beta");
    if (past && !is_la_type(past->dtype())) {
      fail("input 'past_state' has element type " + std::string(dtype_name(past->dtype())) +
           "; the state is float, float16 or bfloat16");
    }
    if (q.rank() != 3 || k.rank() != 3 || v.rank() != 3) {
      fail("inputs query " + shape_to_string(q.shape()) + ", key " + shape_to_string(k.shape()) +
           " and value " + shape_to_string(v.shape()) + " must be 3-D (B, T, heads * head_size)");
    }
    const int64_t B = q.dim(0), T = q.dim(1);
    const int64_t Hq = q_heads_, Hkv = kv_heads_, group = Hq / Hkv;
    if (k.dim(0) != B || v.dim(0) != B || k.dim(1) != T || v.dim(1) != T) {
      fail("inputs query " + shape_to_string(q.shape()) + ", key " + shape_to_string(k.shape()) +
           " and value " + shape_to_string(v.shape()) + " must agree on (B, T)");
    }
    if (q.dim(2) % Hq != 0) {
      fail("the last dim of query " + shape_to_string(q.shape()) +
           " is not divisible by q_num_heads (" + std::to_string(Hq) + ")");
    }
    const int64_t dk = q.dim(2) / Hq;
    if (dk == 0) {
      fail("query " + shape_to_string(q.shape()) + " gives a head size d_k of 0");
    }
    if (k.dim(2) != Hkv * dk) {
      fail("the last dim of key " + shape_to_string(k.shape()) + " must be kv_num_heads * d_k = " +
           std::to_string(Hkv) + " * " + std::to_string(dk) + " (d_k from query)");
    }
    if (v.dim(2) % Hkv != 0) {
      fail("the last dim of value " + shape_to_string(v.shape()) +
           " is not divisible by kv_num_heads (" + std::to_string(Hkv) + ")");
    }
    const int64_t dv = v.dim(2) / Hkv;
    bool decay_per_key = false;
    if (decay) {
      if (decay->rank() != 3 || decay->dim(0) != B || decay->dim(1) != T ||
          (decay->dim(2) != Hkv && decay->dim(2) != Hkv * dk)) {
        fail("input 'decay' " + shape_to_string(decay->shape()) + " must be " +
             shape_to_string({B, T, Hkv}) + " (per head) or " + shape_to_string({B, T, Hkv * dk}) +
             " (per key dim)");
      }
      decay_per_key = decay->dim(2) != Hkv;
    }
    int64_t beta_last = 0;
    if (beta) {
      if (beta->rank() != 3 || beta->dim(0) != B || beta->dim(1) != T ||
          (beta->dim(2) != Hkv && beta->dim(2) != 1)) {
        fail("input 'beta' " + shape_to_string(beta->shape()) + " must be " +
             shape_to_string({B, T, Hkv}) + " or " + shape_to_string({B, T, 1}));
      }
      beta_last = beta->dim(2);
    }
    if (past && past->shape() != Shape{B, Hkv, dk, dv}) {
      fail("input 'past_state' " + shape_to_string(past->shape()) + " must be " +
           shape_to_string({B, Hkv, dk, dv}) + " (B, kv_num_heads, d_k, d_v)");
    }

    // Sizes from dims alone (the inputs may hold no elements when T is 0): checked.
    int64_t out_last = 0, state_n = 0;
    if (__builtin_mul_overflow(Hq, dv, &out_last) ||
        __builtin_mul_overflow(B, Hkv * dk, &state_n) ||
        __builtin_mul_overflow(state_n, dv, &state_n)) {
      fail("the output or state size overflows (value " + shape_to_string(v.shape()) + ")");
    }
    const DataType sdt = past ? past->dtype() : dt;
    Tensor& out_t = ctx.allocate_output(0, dt, {B, T, out_last});
    Tensor* present_t = nullptr;
    if (ctx.num_outputs() > 1 && !ctx.node().outputs[1].empty())
      present_t = &ctx.allocate_output(1, sdt, {B, Hkv, dk, dv});

    // The state in float: present_state itself when it is float, else a scratch copy.
    std::vector<float> state_buf;
    float* state;
    if (present_t && sdt == DataType::kFloat) {
      state = present_t->data<float>();
    } else {
      state_buf.resize(static_cast<size_t>(state_n));
      state = state_buf.data();
    }
    if (past) {
      convert_to_float(sdt, past->raw_data(), state, state_n);
    } else {
      for (int64_t i = 0; i < state_n; ++i) state[i] = 0.0f;
    }
    std::vector<float> out_buf;
    float* out;
    if (dt == DataType::kFloat) {
      out = out_t.data<float>();
    } else {
      out_buf.resize(static_cast<size_t>(out_t.numel()));
      out = out_buf.data();
    }
    const FloatView qv(&q), kv(&k), vv(&v), gv(decay), bv(beta);
    const float* qf = qv.get();
    const float* kf = kv.get();
    const float* vf = vv.get();
    const float* gf = gv.get();
    const float* bf = bv.get();
    const float scale =
        scale_ == 0.0f ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(dk))) : scale_;
    const bool gating = gating_, delta = delta_;

    parallel_for(ctx.thread_pool(), T > 0 ? B * Hkv : 0,
                 static_cast<double>(T * dk * dv * (3 + group)), [&](int64_t begin, int64_t end) {
                   std::vector<float> decay_row(static_cast<size_t>(dk)),
                       u_row(static_cast<size_t>(dv));
                   std::vector<const float*> q_rows(static_cast<size_t>(group));
                   std::vector<float*> o_rows(static_cast<size_t>(group));
                   float* __restrict ek = decay_row.data();
                   float* __restrict u = u_row.data();
                   for (int64_t bh = begin; bh < end; ++bh) {
                     const int64_t b = bh / Hkv, h = bh % Hkv;
                     float* S = state + bh * dk * dv;
                     for (int64_t t = 0; t < T; ++t) {
                       const int64_t bt = b * T + t;
                       const float* __restrict kt = kf + (bt * Hkv + h) * dk;
                       const float* __restrict vt = vf + (bt * Hkv + h) * dv;
                       if (gating) {
                         if (decay_per_key) {
                           const float* g = gf + (bt * Hkv + h) * dk;
                           for (int64_t i = 0; i < dk; ++i) ek[i] = std::exp(g[i]);
                         } else {
                           const float e = std::exp(gf[bt * Hkv + h]);
                           for (int64_t i = 0; i < dk; ++i) ek[i] = e;
                         }
                       }
                       // The value the update writes: v, or for the delta rules beta (v - S^T k)
                       // with S already decayed.
                       const float* __restrict w = vt;
                       if (delta) {
                         for (int64_t m = 0; m < dv; ++m) u[m] = 0.0f;
                         for (int64_t i = 0; i < dk; ++i) {
                           float* __restrict row = S + i * dv;
                           if (gating) {
                             const float e = ek[i];
                             for (int64_t m = 0; m < dv; ++m) row[m] *= e;
                           }
                           const float ki = kt[i];
                           for (int64_t m = 0; m < dv; ++m) u[m] += row[m] * ki;
                         }
                         const float bt_val = bf[bt * beta_last + (beta_last == 1 ? 0 : h)];
                         for (int64_t m = 0; m < dv; ++m) u[m] = bt_val * (vt[m] - u[m]);
                         w = u;
                       }
                       for (int64_t g = 0; g < group; ++g) {
                         const int64_t hq = h * group + g;
                         q_rows[static_cast<size_t>(g)] = qf + (bt * Hq + hq) * dk;
                         float* o = out + (bt * Hq + hq) * dv;
                         for (int64_t m = 0; m < dv; ++m) o[m] = 0.0f;
                         o_rows[static_cast<size_t>(g)] = o;
                       }
                       for (int64_t i = 0; i < dk; ++i) {
                         float* __restrict row = S + i * dv;
                         const float ki = kt[i];
                         if (gating && !delta) {
                           const float e = ek[i];
                           for (int64_t m = 0; m < dv; ++m) row[m] = row[m] * e + ki * w[m];
                         } else {
                           for (int64_t m = 0; m < dv; ++m) row[m] += ki * w[m];
                         }
                         for (int64_t g = 0; g < group; ++g) {
                           const float qi = q_rows[static_cast<size_t>(g)][i];
                           float* __restrict o = o_rows[static_cast<size_t>(g)];
                           for (int64_t m = 0; m < dv; ++m) o[m] += qi * row[m];
                         }
                       }
                       for (int64_t g = 0; g < group; ++g) {
                         float* __restrict o = o_rows[static_cast<size_t>(g)];
                         for (int64_t m = 0; m < dv; ++m) o[m] *= scale;
                       }
                     }
                   }
                 });

    if (dt != DataType::kFloat) convert_from_float(dt, out, out_t.raw_data(), out_t.numel());
    if (present_t && sdt != DataType::kFloat)
      convert_from_float(sdt, state, present_t->raw_data(), state_n);
  }

 private:
  // Whether an optional input (decay or beta) is present as the update rule wants.
  template <typename Fail>
  void check_optional(bool present, bool needed, const char* name, const Fail& fail) const {
    if (needed && !present) {
      fail("update_rule '" + rule_ + "' needs input '" + name + "'");
    } else if (!needed && present) {
      fail("update_rule '" + rule_ + "' takes no input '" + name + "'");
    }
  }

  int64_t q_heads_, kv_heads_;
  float scale_;
  std::string rule_;
  bool gating_ = false, delta_ = false;
};

}  // namespace

void register_linear_attention(KernelRegistry& r) {
  r.add("", "LinearAttention", 27, kMaxOpset, make_factory<LinearAttention>());
}

}  // namespace nn
}  // namespace ortlite
