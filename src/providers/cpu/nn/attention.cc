// Attention and RotaryEmbedding (opset 23), added for ONNX node conformance. Attention: scaled
// dot-product attention with 3-D or 4-D Q/K/V, grouped-query heads, past key/value caches, a
// boolean or additive mask (broadcast to [B, Hq, Sq, T], padded on the right when shorter than T),
// is_causal, softcap, the optional qk_matmul_output and (opset 24) nonpad_kv_seqlen. Follows
// onnx's reference implementation; arithmetic in double, float16 / bfloat16 / float / double
// tensors.
#include <cmath>
#include <limits>
#include <type_traits>

#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {
namespace {

template <typename T>
double to_d(T v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

template <typename T>
T from_d(double v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

std::vector<double> as_doubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  ORTLITE_DISPATCH_FLOAT(t.dtype(), "Attention", [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = to_d(p[i]);
  });
  return v;
}

void write_doubles(Tensor& t, const std::vector<double>& v) {
  ORTLITE_DISPATCH_FLOAT(t.dtype(), "Attention", [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = from_d<T>(v[i]);
  });
}

class Attention final : public Kernel {
 public:
  explicit Attention(const KernelInfo& info)
      : has_scale_(info.has_attr("scale")),
        scale_(info.attr_float("scale", 1.0f)),
        causal_(info.attr_int("is_causal", 0) != 0),
        q_heads_(info.attr_int("q_num_heads", 0)),
        kv_heads_(info.attr_int("kv_num_heads", 0)),
        softcap_(info.attr_float("softcap", 0.0f)),
        qk_mode_(info.attr_int("qk_matmul_output_mode", 0)) {
    if (qk_mode_ < 0 || qk_mode_ > 3) {
      info.fail(StatusCode::kInvalidArgument, "attribute 'qk_matmul_output_mode' = " +
                                                  std::to_string(qk_mode_) + " must be 0..3");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& q_t = ctx.required_input(0);
    const Tensor& k_t = ctx.required_input(1);
    const Tensor& v_t = ctx.required_input(2);
    const Tensor* mask_t = ctx.input(3);
    const Tensor* pk_t = ctx.input(4);
    const Tensor* pv_t = ctx.input(5);
    const Tensor* nonpad_t = ctx.input(6);
    const DataType dt = q_t.dtype();
    const size_t rank = q_t.rank();
    if ((rank != 3 && rank != 4) || k_t.rank() != rank || v_t.rank() != rank) {
      ctx.fail(StatusCode::kInvalidArgument,
               "inputs Q " + shape_to_string(q_t.shape()) + ", K " + shape_to_string(k_t.shape()) +
                   ", V " + shape_to_string(v_t.shape()) + " must all be 3-D or all 4-D");
    }
    if (k_t.dtype() != dt || v_t.dtype() != dt) {
      ctx.fail(StatusCode::kInvalidArgument, "inputs Q, K and V must have the same type");
    }
    const int64_t b = q_t.dim(0);
    int64_t hq, hkv, sq, skv, d, dv;
    if (rank == 3) {
      if (q_heads_ <= 0 || kv_heads_ <= 0) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "3-D inputs need the attributes q_num_heads and kv_num_heads");
      }
      hq = q_heads_;
      hkv = kv_heads_;
      sq = q_t.dim(1);
      skv = k_t.dim(1);
      if (q_t.dim(2) % hq || k_t.dim(2) % hkv || v_t.dim(2) % hkv) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "the hidden sizes of Q, K, V must be multiples of their head counts");
      }
      d = q_t.dim(2) / hq;
      dv = v_t.dim(2) / hkv;
      if (k_t.dim(2) / hkv != d || v_t.dim(1) != skv) {
        ctx.fail(StatusCode::kInvalidArgument, "K " + shape_to_string(k_t.shape()) + " and V " +
                                                   shape_to_string(v_t.shape()) +
                                                   " do not match Q");
      }
    } else {
      hq = q_t.dim(1);
      hkv = k_t.dim(1);
      sq = q_t.dim(2);
      skv = k_t.dim(2);
      d = q_t.dim(3);
      dv = v_t.dim(3);
      if (k_t.dim(3) != d || v_t.dim(1) != hkv || v_t.dim(2) != skv) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "K " + shape_to_string(k_t.shape()) + " and V " + shape_to_string(v_t.shape()) +
                     " do not match Q " + shape_to_string(q_t.shape()));
      }
    }
    if (k_t.dim(0) != b || v_t.dim(0) != b || hkv <= 0 || hq % hkv != 0) {
      ctx.fail(StatusCode::kInvalidArgument,
               "batch sizes must agree and q heads (" + std::to_string(hq) +
                   ") must be a multiple of kv heads (" + std::to_string(hkv) + ")");
    }
    // Q as [B, Hq, Sq, D], K/V as [B, Hkv, Skv, D]; the 3-D layout is [B, S, H, D].
    auto load4 = [&](const Tensor& t, int64_t h, int64_t s, int64_t e) {
      std::vector<double> raw = as_doubles(t);
      if (rank == 4) return raw;
      std::vector<double> out(raw.size());
      for (int64_t bi = 0; bi < b; ++bi)
        for (int64_t si = 0; si < s; ++si)
          for (int64_t hi = 0; hi < h; ++hi)
            for (int64_t ei = 0; ei < e; ++ei)
              out[static_cast<size_t>(((bi * h + hi) * s + si) * e + ei)] =
                  raw[static_cast<size_t>(((bi * s + si) * h + hi) * e + ei)];
      return out;
    };
    std::vector<double> q = load4(q_t, hq, sq, d);
    std::vector<double> k = load4(k_t, hkv, skv, d);
    std::vector<double> v = load4(v_t, hkv, skv, dv);
    int64_t past = 0;
    if (pk_t || pv_t) {
      if (!pk_t || !pv_t || pk_t->rank() != 4 || pv_t->rank() != 4 || pk_t->dim(0) != b ||
          pk_t->dim(1) != hkv || pk_t->dim(3) != d || pv_t->dim(0) != b || pv_t->dim(1) != hkv ||
          pv_t->dim(3) != dv || pv_t->dim(2) != pk_t->dim(2) || pk_t->dtype() != dt ||
          pv_t->dtype() != dt) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "inputs past_key and past_value must both be given, 4-D [B, kv_heads, P, "
                 "head_size] of the type of Q");
      }
      past = pk_t->dim(2);
    }
    const int64_t t_len = past + skv;
    // nonpad_kv_seqlen (opset 24): per batch entry, the number of leading key / value
    // positions that are not padding; the positions from there on are masked out. It
    // describes a cache updated outside the node, so it cannot come with past_key.
    std::vector<int64_t> nonpad;
    if (nonpad_t) {
      if (past > 0 || pk_t) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "input 'nonpad_kv_seqlen' cannot be used with past_key / past_value");
      }
      if (nonpad_t->dtype() != DataType::kInt64 || nonpad_t->rank() != 1 || nonpad_t->dim(0) != b) {
        ctx.fail(StatusCode::kInvalidArgument, "input 'nonpad_kv_seqlen' must be int64 of shape [" +
                                                   std::to_string(b) + "], got " +
                                                   std::string(dtype_name(nonpad_t->dtype())) +
                                                   " " + shape_to_string(nonpad_t->shape()));
      }
      const int64_t* np = nonpad_t->data<int64_t>();
      nonpad.assign(np, np + b);
      for (int64_t n : nonpad) {
        if (n < 0 || n > t_len) {
          ctx.fail(StatusCode::kInvalidArgument, "input 'nonpad_kv_seqlen' holds " +
                                                     std::to_string(n) + ", outside [0, " +
                                                     std::to_string(t_len) + "]");
        }
      }
    }
    // present = concat(past, new) along the sequence.
    auto concat = [&](const Tensor* p, const std::vector<double>& cur, int64_t e) {
      std::vector<double> pv = p ? as_doubles(*p) : std::vector<double>();
      std::vector<double> out(static_cast<size_t>(b * hkv * t_len * e));
      for (int64_t bh = 0; bh < b * hkv; ++bh) {
        for (int64_t s = 0; s < t_len; ++s) {
          for (int64_t ei = 0; ei < e; ++ei) {
            out[static_cast<size_t>((bh * t_len + s) * e + ei)] =
                s < past ? pv[static_cast<size_t>((bh * past + s) * e + ei)]
                         : cur[static_cast<size_t>((bh * skv + (s - past)) * e + ei)];
          }
        }
      }
      return out;
    };
    std::vector<double> pk = concat(pk_t, k, d);
    std::vector<double> pvv = concat(pv_t, v, dv);

    // The additive bias, broadcast to [B, Hq, Sq, T] through strides.
    std::vector<double> mask;
    int64_t ms[4] = {0, 0, 0, 0};
    int64_t mask_last = 0;
    if (mask_t) {
      const Shape& m = mask_t->shape();
      if (m.size() < 2 || m.size() > 4 || m.back() > t_len) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "input 'attn_mask' " + shape_to_string(m) +
                     " must be 2-D to 4-D with a last dim <= " + std::to_string(t_len));
      }
      const int64_t want[4] = {b, hq, sq, t_len};
      Shape m4(4 - m.size(), 1);
      m4.insert(m4.end(), m.begin(), m.end());
      int64_t acc = 1;
      for (int i = 3; i >= 0; --i) {
        if (i < 3 && m4[static_cast<size_t>(i)] != want[i] && m4[static_cast<size_t>(i)] != 1) {
          ctx.fail(StatusCode::kInvalidArgument, "input 'attn_mask' " + shape_to_string(m) +
                                                     " does not broadcast to [B, q_heads, " +
                                                     "q_seq, total_seq]");
        }
        ms[i] = m4[static_cast<size_t>(i)] == 1 && i < 3 ? 0 : acc;
        acc *= m4[static_cast<size_t>(i)];
      }
      mask_last = m.back();
      if (mask_t->dtype() == DataType::kBool) {
        const bool* p = mask_t->data<bool>();
        mask.resize(static_cast<size_t>(mask_t->numel()));
        for (size_t i = 0; i < mask.size(); ++i)
          mask[i] = p[i] ? 0.0 : -std::numeric_limits<double>::infinity();
      } else if (mask_t->dtype() == dt) {
        mask = as_doubles(*mask_t);
      } else {
        ctx.fail(StatusCode::kInvalidArgument,
                 "input 'attn_mask' must be bool or the type of Q, got " +
                     std::string(dtype_name(mask_t->dtype())));
      }
    }

    const double scale = has_scale_ ? static_cast<double>(scale_) : 1.0 / std::sqrt(double(d));
    const double softcap = softcap_;
    const int64_t group = hq / hkv;
    std::vector<double> y(static_cast<size_t>(b * hq * sq * dv));
    std::vector<double> qk_out(static_cast<size_t>(b * hq * sq * t_len));
    const double neg_inf = -std::numeric_limits<double>::infinity();
    parallel_for(
        ctx.thread_pool(), b * hq, static_cast<double>(sq * t_len * (d + dv)),
        [&](int64_t begin, int64_t end) {
          std::vector<double> row(static_cast<size_t>(t_len));
          for (int64_t bh = begin; bh < end; ++bh) {
            const int64_t bi = bh / hq, hi = bh % hq;
            const int64_t kvh = bi * hkv + hi / group;
            for (int64_t i = 0; i < sq; ++i) {
              const double* qr = &q[static_cast<size_t>((bh * sq + i) * d)];
              double* qo = &qk_out[static_cast<size_t>((bh * sq + i) * t_len)];
              for (int64_t j = 0; j < t_len; ++j) {
                const double* kr = &pk[static_cast<size_t>((kvh * t_len + j) * d)];
                double s = 0;
                for (int64_t e = 0; e < d; ++e) s += qr[e] * kr[e];
                s *= scale;
                if (softcap > 0) s = softcap * std::tanh(s / softcap);
                double bias = 0;
                if (mask_t) {
                  bias = j < mask_last
                             ? mask[static_cast<size_t>(bi * ms[0] + hi * ms[1] + i * ms[2] + j)]
                             : neg_inf;
                }
                if (causal_ && j > i + past) bias += neg_inf;
                if (!nonpad.empty() && j >= nonpad[static_cast<size_t>(bi)]) bias += neg_inf;
                qo[j] = qk_mode_ == 2 ? s + bias : s;
                row[static_cast<size_t>(j)] = s + bias;
              }
              double mx = neg_inf;
              for (double r : row) mx = std::max(mx, r);
              double sum = 0;
              for (double& r : row) {
                r = std::exp(r - mx);
                sum += r;
              }
              for (double& r : row) r /= sum;
              if (qk_mode_ == 3) {
                for (int64_t j = 0; j < t_len; ++j) qo[j] = row[static_cast<size_t>(j)];
              }
              double* yr = &y[static_cast<size_t>((bh * sq + i) * dv)];
              for (int64_t e = 0; e < dv; ++e) yr[e] = 0;
              for (int64_t j = 0; j < t_len; ++j) {
                const double p = row[static_cast<size_t>(j)];
                const double* vr = &pvv[static_cast<size_t>((kvh * t_len + j) * dv)];
                for (int64_t e = 0; e < dv; ++e) yr[e] += p * vr[e];
              }
            }
          }
        });
    if (rank == 3) {
      Tensor& yt = ctx.allocate_output(0, dt, {b, sq, hq * dv});
      std::vector<double> y3(y.size());
      for (int64_t bi = 0; bi < b; ++bi)
        for (int64_t hi = 0; hi < hq; ++hi)
          for (int64_t i = 0; i < sq; ++i)
            for (int64_t e = 0; e < dv; ++e)
              y3[static_cast<size_t>(((bi * sq + i) * hq + hi) * dv + e)] =
                  y[static_cast<size_t>(((bi * hq + hi) * sq + i) * dv + e)];
      write_doubles(yt, y3);
    } else {
      write_doubles(ctx.allocate_output(0, dt, {b, hq, sq, dv}), y);
    }
    if (ctx.num_outputs() > 1 && !ctx.node().outputs[1].empty())
      write_doubles(ctx.allocate_output(1, dt, {b, hkv, t_len, d}), pk);
    if (ctx.num_outputs() > 2 && !ctx.node().outputs[2].empty())
      write_doubles(ctx.allocate_output(2, dt, {b, hkv, t_len, dv}), pvv);
    if (ctx.num_outputs() > 3 && !ctx.node().outputs[3].empty())
      write_doubles(ctx.allocate_output(3, dt, {b, hq, sq, t_len}), qk_out);
  }

 private:
  bool has_scale_;
  float scale_;
  bool causal_;
  int64_t q_heads_, kv_heads_;
  float softcap_;
  int64_t qk_mode_;
};

// RotaryEmbedding (opset 23): rotates the first rotary_embedding_dim values of each head
// of X ([B, H, S, D], or [B, S, H * D] with num_heads) by the angles in cos/sin_cache
// ([max_pos, dim / 2] indexed by position_ids [B, S], or [B, S, dim / 2] without them);
// interleaved pairs (x0, x1), (x2, x3)... or halves.
class RotaryEmbedding final : public Kernel {
 public:
  explicit RotaryEmbedding(const KernelInfo& info)
      : interleaved_(info.attr_int("interleaved", 0) != 0),
        rot_dim_(info.attr_int("rotary_embedding_dim", 0)),
        num_heads_(info.attr_int("num_heads", 0)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& cos_t = ctx.required_input(1);
    const Tensor& sin_t = ctx.required_input(2);
    const Tensor* pos_t = ctx.input(3);
    const bool four = x.rank() == 4;
    if (x.rank() != 3 && !four) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'X' must be 3-D or 4-D, got " + shape_to_string(x.shape()));
    }
    const int64_t b = x.dim(0);
    int64_t h, s, d;
    if (four) {
      h = x.dim(1);
      s = x.dim(2);
      d = x.dim(3);
    } else {
      if (num_heads_ <= 0 || x.dim(2) % num_heads_ != 0) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "3-D input needs attribute 'num_heads' dividing the hidden size");
      }
      h = num_heads_;
      s = x.dim(1);
      d = x.dim(2) / h;
    }
    const int64_t rot = rot_dim_ == 0 ? d : rot_dim_;
    if (rot < 0 || rot > d || rot % 2 != 0) {
      ctx.fail(StatusCode::kInvalidArgument, "rotary_embedding_dim " + std::to_string(rot) +
                                                 " must be even and <= the head size " +
                                                 std::to_string(d));
    }
    const int64_t half = rot / 2;
    if (cos_t.shape() != sin_t.shape() || cos_t.dtype() != x.dtype() ||
        sin_t.dtype() != x.dtype() || cos_t.rank() < 2 || cos_t.shape().back() != half) {
      ctx.fail(StatusCode::kInvalidArgument,
               "inputs 'cos_cache' " + shape_to_string(cos_t.shape()) + " and 'sin_cache' " +
                   shape_to_string(sin_t.shape()) + " must match, of the type of X, with a " +
                   "last dim of rotary_embedding_dim / 2 = " + std::to_string(half));
    }
    std::vector<int64_t> rows(static_cast<size_t>(b * s));  // cache row of (b, s)
    if (pos_t) {
      if (pos_t->dtype() != DataType::kInt64 || pos_t->numel() != b * s || cos_t.rank() != 2) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "input 'position_ids' must be int64 [B, S] with 2-D caches");
      }
      const int64_t* p = pos_t->data<int64_t>();
      for (size_t i = 0; i < rows.size(); ++i) {
        if (p[i] < 0 || p[i] >= cos_t.dim(0)) {
          ctx.fail(StatusCode::kInvalidArgument,
                   "position id " + std::to_string(p[i]) + " is out of the cache's range");
        }
        rows[i] = p[i];
      }
    } else {
      if (cos_t.rank() != 3 || cos_t.dim(0) != b || cos_t.dim(1) != s) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "without 'position_ids' the caches must be [B, S, dim / 2]");
      }
      for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
    }
    const std::vector<double> xv = as_doubles(x), cv = as_doubles(cos_t), sv = as_doubles(sin_t);
    std::vector<double> out(xv);
    for (int64_t bi = 0; bi < b; ++bi) {
      for (int64_t si = 0; si < s; ++si) {
        const int64_t row = rows[static_cast<size_t>(bi * s + si)];
        const double* cr = &cv[static_cast<size_t>(row * half)];
        const double* sr = &sv[static_cast<size_t>(row * half)];
        for (int64_t hi = 0; hi < h; ++hi) {
          const int64_t base = four ? ((bi * h + hi) * s + si) * d : ((bi * s + si) * h + hi) * d;
          for (int64_t j = 0; j < half; ++j) {
            const int64_t i1 = base + (interleaved_ ? 2 * j : j);
            const int64_t i2 = base + (interleaved_ ? 2 * j + 1 : j + half);
            const double x1 = xv[static_cast<size_t>(i1)], x2 = xv[static_cast<size_t>(i2)];
            out[static_cast<size_t>(i1)] = cr[j] * x1 - sr[j] * x2;
            out[static_cast<size_t>(i2)] = sr[j] * x1 + cr[j] * x2;
          }
        }
      }
    }
    write_doubles(ctx.allocate_output(0, x.dtype(), x.shape()), out);
  }

 private:
  bool interleaved_;
  int64_t rot_dim_;
  int64_t num_heads_;
};

}  // namespace

void register_attention(KernelRegistry& r) {
  // Opset 24 added the input nonpad_kv_seqlen; no later opset (27 at onnx 1.22) changed it.
  r.add("", "Attention", 23, kMaxOpset, make_factory<Attention>());
  r.add("", "RotaryEmbedding", 23, kNewestOpset, make_factory<RotaryEmbedding>());
}

}  // namespace nn
}  // namespace ortlite
