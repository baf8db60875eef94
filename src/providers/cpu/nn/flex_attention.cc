// FlexAttention (ai.onnx.preview, version 1): scaled dot-product attention over rank-4
// Q [B, Hq, L, E], K [B, Hkv, S, E] and V [B, Hkv, S, Ev] with two optional modifier
// subgraphs (GRAPH attributes score_mod and prob_mod):
//   Scores = (Q @ K^T) * scale       scale: the attribute, else 1 / sqrt(E)
//   Scores = score_mod(Scores)       [B, Hq, L, S] -> the same shape and element type
//   Probs  = Softmax(Scores, axis=-1)
//   Probs  = prob_mod(Probs)         [B, Hq, L, S] -> the same shape and element type
//   Y      = Probs @ V               [B, Hq, L, Ev], the element type of Q
// Query head h reads kv head h / (Hq / Hkv) (grouped-query attention).
//
// Precision follows onnx's reference implementation: Q @ K^T in double for double inputs,
// else in float (float16 / bfloat16 inputs widened); the scores, the probabilities and
// Probs @ V in the softmax precision, which is also the element type the modifiers receive
// and must return: the attribute softmax_precision, by default double for double inputs and
// float for the others. A float16 / bfloat16 softmax precision computes in float and rounds
// the scores, the probabilities and V to that type where the reference holds them in it.
//
// The modifiers are planned once at load (KernelInfo::subgraph, like the bodies of If and
// Loop; values of the enclosing graph reach them as the node's implicit inputs) and run once
// per call on the whole [B, Hq, L, S] tensor, so a modifier may read its input's shape (the
// positions of a causal mask or a relative bias, the head of an ALiBi slope). Without
// modifiers each (batch, query head) pair is done in one pass over its own [L, S] score
// block: scores by one GEMM, the softmax row by row, Probs @ V by a second GEMM, and the full
// score tensor is never held. With a modifier the same three steps run as phases over the
// full tensor, the subgraph calls between them.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "compute/fast_kernels.h"
#include "compute/gemm.h"
#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {
namespace {

bool is_flex_type(DataType t) {
  return t == DataType::kFloat || t == DataType::kFloat16 || t == DataType::kBFloat16 ||
         t == DataType::kDouble;
}

bool is_half(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBFloat16;
}

std::string type_label(const TypeInfo& t) {
  return t.kind == TypeInfo::Kind::kTensor ? std::string(dtype_name(t.elem_type)) : t.to_string();
}

// Reads n elements of a float / double / float16 / bfloat16 array as X (float or double).
template <typename X>
void load_as(DataType dt, const void* src, X* dst, int64_t n) {
  if (n <= 0) return;
  if constexpr (std::is_same_v<X, float>) {
    convert_to_float(dt, src, dst, n);
  } else if (dt == DataType::kDouble) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(double));
  } else if (dt == DataType::kFloat) {
    const float* s = static_cast<const float*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
  } else {
    std::vector<float> tmp(static_cast<size_t>(n));  // float16 / bfloat16 widen exactly
    convert_to_float(dt, src, tmp.data(), n);
    for (int64_t i = 0; i < n; ++i) dst[i] = tmp[static_cast<size_t>(i)];
  }
}

// Writes n elements of X (float or double) as a float / double / float16 / bfloat16 array.
template <typename X>
void store_as(DataType dt, const X* src, void* dst, int64_t n) {
  if (n <= 0) return;
  if constexpr (std::is_same_v<X, float>) {
    convert_from_float(dt, src, dst, n);
  } else if (dt == DataType::kDouble) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(double));
  } else {
    std::vector<float> tmp(src, src + n);
    convert_from_float(dt, tmp.data(), dst, n);
  }
}

// Rounds float values to float16 / bfloat16 and back.
void round_to(DataType half, float* p, int64_t n) {
  if (half == DataType::kFloat16) {
    for (int64_t i = 0; i < n; ++i) p[i] = Float16::to_float(Float16::from_float(p[i]));
  } else {
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(BFloat16(p[i]));
  }
}

// An input's elements as X: the tensor's own data when its type is X and no rounding is
// asked for, else a converted copy (rounded to `half` when that is float16 / bfloat16).
template <typename X>
class AsArray {
 public:
  explicit AsArray(const Tensor& t, DataType half = DataType::kUndefined) {
    if (t.dtype() == DataTypeOf<X>::value && half == DataType::kUndefined) {
      p_ = t.data<X>();
      return;
    }
    copy_.resize(static_cast<size_t>(t.numel()));
    load_as<X>(t.dtype(), t.raw_data(), copy_.data(), t.numel());
    if constexpr (std::is_same_v<X, float>) {
      if (half != DataType::kUndefined) round_to(half, copy_.data(), t.numel());
    }
    p_ = copy_.data();
  }
  const X* get() const { return p_; }

 private:
  std::vector<X> copy_;
  const X* p_ = nullptr;
};

// The element count of `shape`; fails naming `what` when it is beyond any memory (the
// dims come from tensors that may be empty, so their products are not bounded by them).
int64_t element_count(const KernelContext& ctx, const Shape& shape, const char* what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n) || n > (int64_t{1} << 48)) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string(what) + " " + shape_to_string(shape) + " has too many elements");
    }
  }
  return n;
}

// A modifier subgraph: one tensor in, one tensor out, of the same shape and element type.
struct Modifier {
  std::shared_ptr<const Subgraph> graph;
  const char* name = "";
  DataType declared_in = DataType::kUndefined;  // the element types the subgraph declares
  DataType declared_out = DataType::kUndefined;
};

// The shapes and types of one call.
struct Problem {
  const Tensor *q = nullptr, *k = nullptr, *v = nullptr;
  DataType dt = DataType::kUndefined;  // of Q, K, V and Y
  DataType sp = DataType::kUndefined;  // the softmax precision: the modifiers' element type
  int64_t b = 0, hq = 0, hkv = 0, sq = 0, skv = 0, e = 0, ev = 0;
  double scale = 1.0;
};

class FlexAttention final : public Kernel {
 public:
  explicit FlexAttention(const KernelInfo& info)
      : has_scale_(info.has_attr("scale")), scale_(info.attr_float("scale", 1.0f)) {
    if (info.has_attr("softmax_precision")) {
      const int64_t p = info.attr_int("softmax_precision", 0);
      const DataType t = static_cast<DataType>(p);
      if (!is_flex_type(t)) {
        info.fail(StatusCode::kInvalidGraph,
                  "attribute 'softmax_precision' = " + std::to_string(p) +
                      " is not float (1), float16 (10), bfloat16 (16) or double (11)");
      }
      softmax_precision_ = t;
    }
    score_mod_ = load_modifier(info, "score_mod");
    prob_mod_ = load_modifier(info, "prob_mod");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& q = ctx.required_input(0);
    const Tensor& k = ctx.required_input(1);
    const Tensor& v = ctx.required_input(2);
    const DataType dt = q.dtype();
    if (k.dtype() != dt || v.dtype() != dt) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("inputs Q, K and V must have the same element type, got ") +
                   dtype_name(dt) + ", " + dtype_name(k.dtype()) + " and " + dtype_name(v.dtype()));
    }
    if (!is_flex_type(dt)) {
      ctx.fail(
          StatusCode::kInvalidArgument,
          std::string("inputs must be float, float16, bfloat16 or double, got ") + dtype_name(dt));
    }
    const std::string shapes = "Q " + shape_to_string(q.shape()) + ", K " +
                               shape_to_string(k.shape()) + ", V " + shape_to_string(v.shape());
    if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4) {
      ctx.fail(
          StatusCode::kInvalidArgument,
          "inputs must be rank 4 (Q [B, Hq, L, E], K [B, Hkv, S, E], V [B, Hkv, S, Ev]), got " +
              shapes);
    }
    Problem p;
    p.q = &q;
    p.k = &k;
    p.v = &v;
    p.dt = dt;
    p.b = q.dim(0);
    p.hq = q.dim(1);
    p.sq = q.dim(2);
    p.e = q.dim(3);
    p.hkv = k.dim(1);
    p.skv = k.dim(2);
    p.ev = v.dim(3);
    if (k.dim(0) != p.b || v.dim(0) != p.b) {
      ctx.fail(StatusCode::kInvalidArgument, "the batch sizes of " + shapes + " differ");
    }
    if (v.dim(1) != p.hkv || v.dim(2) != p.skv) {
      ctx.fail(StatusCode::kInvalidArgument,
               "K and V must have the same kv head count and sequence length, got " + shapes);
    }
    if (k.dim(3) != p.e) {
      ctx.fail(StatusCode::kInvalidArgument, "Q and K must have the same head size, got " + shapes);
    }
    if (p.hkv <= 0 || p.hq % p.hkv != 0) {
      ctx.fail(StatusCode::kInvalidArgument, "the query head count (" + std::to_string(p.hq) +
                                                 ") must be a multiple of the kv head count (" +
                                                 std::to_string(p.hkv) + "), got " + shapes);
    }
    p.sp = softmax_precision_ != DataType::kUndefined
               ? softmax_precision_
               : (dt == DataType::kDouble ? DataType::kDouble : DataType::kFloat);
    p.scale = has_scale_ ? static_cast<double>(scale_)
                         : (p.e > 0 ? 1.0 / std::sqrt(static_cast<double>(p.e)) : 1.0);
    for (const Modifier* m : {score_mod_.get(), prob_mod_.get()}) {
      if (!m) continue;
      const std::pair<const char*, DataType> ends[] = {{"input", m->declared_in},
                                                       {"output", m->declared_out}};
      for (const auto& [what, d] : ends) {
        if (d != DataType::kUndefined && d != p.sp) {
          ctx.fail(StatusCode::kInvalidArgument,
                   std::string("subgraph '") + m->name + "' declares its " + what + " " +
                       dtype_name(d) + ", but the tensor it receives and returns is " +
                       dtype_name(p.sp) + " (the softmax precision)");
        }
      }
    }
    const bool wide_qk = dt == DataType::kDouble;
    const bool wide_c = p.sp == DataType::kDouble;
    if (wide_qk && wide_c) {
      run<double, double>(ctx, p);
    } else if (wide_qk) {
      run<double, float>(ctx, p);
    } else if (wide_c) {
      run<float, double>(ctx, p);
    } else {
      run<float, float>(ctx, p);
    }
  }

 private:
  static std::unique_ptr<Modifier> load_modifier(const KernelInfo& info, const char* name) {
    if (!info.has_attr(name)) return nullptr;
    auto m = std::make_unique<Modifier>();
    m->name = name;
    m->graph = info.subgraph(name);
    const size_t n_in = m->graph->input_names().size();
    const size_t n_out = m->graph->output_names().size();
    if (n_in != 1 || n_out != 1) {
      info.fail(StatusCode::kInvalidGraph,
                std::string("subgraph '") + name +
                    "' must take 1 input and return 1 output (a [B, Hq, L, S] tensor), but it "
                    "takes " +
                    std::to_string(n_in) + " and returns " + std::to_string(n_out));
    }
    const Graph& g = *info.node().find_attr(name)->g;
    const struct {
      const TypeInfo& type;
      const char* what;
      DataType* elem;
    } ends[] = {{g.inputs[0].type, "input", &m->declared_in},
                {g.outputs[0].type, "output", &m->declared_out}};
    for (const auto& end : ends) {
      const TypeInfo& t = end.type;
      if (t.kind != TypeInfo::Kind::kUnknown && t.kind != TypeInfo::Kind::kTensor) {
        info.fail(StatusCode::kInvalidGraph, std::string("subgraph '") + name + "' declares its " +
                                                 end.what + " " + type_label(t) +
                                                 "; it must be a rank-4 tensor");
      }
      if (t.kind == TypeInfo::Kind::kTensor && t.has_shape && t.dims.size() != 4) {
        info.fail(StatusCode::kInvalidGraph,
                  std::string("subgraph '") + name + "' declares its " + end.what + " of rank " +
                      std::to_string(t.dims.size()) + "; it must be rank 4 [B, Hq, L, S]");
      }
      if (t.kind == TypeInfo::Kind::kTensor) *end.elem = t.elem_type;
    }
    return m;
  }

  // Runs modifier m on `buf` (the [B, Hq, L, S] tensor in C) and writes its result back
  // there. A softmax precision of C's own type hands `buf` itself to the subgraph, which
  // only reads its inputs.
  template <typename C>
  static void apply(const KernelContext& ctx, const Modifier& m, DataType sp, const Shape& shape,
                    Tensor& buf) {
    const int64_t n = buf.numel();
    Tensor in = buf;
    if (sp != DataTypeOf<C>::value) {
      in = Tensor::empty(sp, shape);
      store_as<C>(sp, buf.data<C>(), in.raw_data(), n);
    }
    std::vector<Value> args;
    args.emplace_back(std::move(in));
    std::vector<Value> out;
    try {
      out = m.graph->run(std::move(args), ctx);
    } catch (const Error& e) {
      ctx.fail(e.code(), std::string("subgraph '") + m.name + "': " + e.what());
    }
    if (out.size() != 1 || !out[0].is_tensor() || !out[0].defined()) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("subgraph '") + m.name + "' must return one tensor");
    }
    const Tensor& r = out[0].tensor();
    if (r.dtype() != sp || r.shape() != shape) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("subgraph '") + m.name + "' returned " + dtype_name(r.dtype()) + " " +
                   shape_to_string(r.shape()) + "; it must return the shape and element type " +
                   "of its input, " + dtype_name(sp) + " " + shape_to_string(shape));
    }
    if (r.raw_data() != buf.raw_data()) load_as<C>(sp, r.raw_data(), buf.data<C>(), n);
  }

  // A: the type of Q @ K^T (double for double inputs, else float); C: the softmax
  // precision's compute type (double, else float).
  template <typename A, typename C>
  void run(KernelContext& ctx, const Problem& p) const {
    const Shape score_shape{p.b, p.hq, p.sq, p.skv};
    element_count(ctx, score_shape, "the score tensor");
    element_count(ctx, {p.b, p.hq, p.sq, p.ev}, "output Y");
    const int64_t block = p.sq * p.skv;
    const int64_t n_bh = p.b * p.hq;
    const int64_t group = p.hq / p.hkv;
    const DataType half = is_half(p.sp) ? p.sp : DataType::kUndefined;
    const AsArray<A> qa(*p.q), ka(*p.k);
    const AsArray<C> va(*p.v, half);
    Tensor& y = ctx.allocate_output(0, p.dt, {p.b, p.hq, p.sq, p.ev});
    const size_t esize = dtype_size(p.dt);
    const A alpha = static_cast<A>(p.scale);
    auto kv_head = [&](int64_t bh) { return (bh / p.hq) * p.hkv + (bh % p.hq) / group; };

    // scores [L, S] of pair bh, in C (rounded to a float16 / bfloat16 softmax precision).
    auto scores_block = [&](int64_t bh, C* s, ThreadPool* tp) {
      if (block == 0) return;
      std::vector<A> tmp;
      A* out = nullptr;
      if constexpr (std::is_same_v<A, C>) {
        out = s;
      } else {
        tmp.resize(static_cast<size_t>(block));
        out = tmp.data();
      }
      if (p.e == 0) {
        std::fill(out, out + block, A(0));
      } else {
        gemm(false, true, p.sq, p.skv, p.e, alpha, qa.get() + bh * p.sq * p.e, p.e,
             ka.get() + kv_head(bh) * p.skv * p.e, p.e, A(0), out, p.skv, tp);
      }
      if constexpr (!std::is_same_v<A, C>) {
        for (int64_t i = 0; i < block; ++i) s[i] = static_cast<C>(out[i]);
      }
      if constexpr (std::is_same_v<C, float>) {
        if (half != DataType::kUndefined) round_to(half, s, block);
      }
    };
    // Softmax over each of `rows` rows of S values: float through the vectorized row
    // softmax of the Softmax kernel, double with std::exp. A row of -inf only (every key
    // masked) gives NaN, as onnx's reference does.
    auto softmax_rows = [&](C* s, int64_t rows) {
      if (p.skv == 0) return;
      for (int64_t i = 0; i < rows; ++i) {
        C* r = s + i * p.skv;
        if constexpr (std::is_same_v<C, float>) {
          fast::softmax(r, r, p.skv, false);
        } else {
          C mx = -std::numeric_limits<C>::infinity();
          for (int64_t j = 0; j < p.skv; ++j) mx = r[j] > mx ? r[j] : mx;
          C sum = 0;
          for (int64_t j = 0; j < p.skv; ++j) {
            r[j] = std::exp(r[j] - mx);
            sum += r[j];
          }
          for (int64_t j = 0; j < p.skv; ++j) r[j] /= sum;
        }
      }
      if constexpr (std::is_same_v<C, float>) {
        if (half != DataType::kUndefined) round_to(half, s, rows * p.skv);
      }
    };
    // Y [L, Ev] of pair bh from its probabilities [L, S].
    auto pv_block = [&](int64_t bh, const C* probs, ThreadPool* tp) {
      const int64_t n = p.sq * p.ev;
      if (n == 0) return;
      std::vector<C> tmp;
      C* out = nullptr;
      if (p.dt == DataTypeOf<C>::value) {
        out = y.data<C>() + bh * n;
      } else {
        tmp.resize(static_cast<size_t>(n));
        out = tmp.data();
      }
      if (p.skv == 0) {
        std::fill(out, out + n, C(0));
      } else {
        gemm(false, false, p.sq, p.ev, p.skv, C(1), probs, p.skv,
             va.get() + kv_head(bh) * p.skv * p.ev, p.ev, C(0), out, p.ev, tp);
      }
      if (p.dt != DataTypeOf<C>::value) {
        store_as<C>(p.dt, out,
                    static_cast<char*>(y.raw_data()) + static_cast<size_t>(bh * n) * esize, n);
      }
    };

    const double flops = static_cast<double>(block) * static_cast<double>(p.e + p.ev + 8);
    if (!score_mod_ && !prob_mod_) {
      for_each_product(ctx.thread_pool(), n_bh, flops, [&](int64_t bh, ThreadPool* tp) {
        std::vector<C> s(static_cast<size_t>(block));
        scores_block(bh, s.data(), tp);
        softmax_rows(s.data(), p.sq);
        pv_block(bh, s.data(), tp);
      });
      return;
    }
    Tensor buf = Tensor::empty(DataTypeOf<C>::value, score_shape);
    C* full = buf.data<C>();
    for_each_product(ctx.thread_pool(), n_bh, flops,
                     [&](int64_t bh, ThreadPool* tp) { scores_block(bh, full + bh * block, tp); });
    if (score_mod_) apply<C>(ctx, *score_mod_, p.sp, score_shape, buf);
    parallel_for(
        ctx.thread_pool(), n_bh * p.sq, static_cast<double>(p.skv) * 8,
        [&](int64_t begin, int64_t end) { softmax_rows(full + begin * p.skv, end - begin); });
    if (prob_mod_) apply<C>(ctx, *prob_mod_, p.sp, score_shape, buf);
    for_each_product(ctx.thread_pool(), n_bh, flops,
                     [&](int64_t bh, ThreadPool* tp) { pv_block(bh, full + bh * block, tp); });
  }

  bool has_scale_;
  float scale_;
  DataType softmax_precision_ = DataType::kUndefined;
  std::unique_ptr<Modifier> score_mod_, prob_mod_;
};

}  // namespace

void register_flex_attention(KernelRegistry& r) {
  // Version 1 only: the preview domain may change the operator in a later version.
  r.add("ai.onnx.preview", "FlexAttention", 1, 1, make_factory<FlexAttention>());
}

}  // namespace nn
}  // namespace ortlite
