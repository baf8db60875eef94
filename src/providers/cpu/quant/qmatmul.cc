// QLinearMatMul (10, 21) and MatMulInteger (10): numpy matmul of (a - a_zero_point) and
// (b - b_zero_point), leading dims broadcast, 1-D operands promoted. Zero points and scales
// are per tensor, per row of a ([M], or broadcastable to a's [..., M, 1]) or per column of b
// ([N], or broadcastable to b's [..., 1, N]).
//
// The products run on the 8-bit integer GEMM (compute/int8_gemm.h), exact and wrapped to
// int32, the overflow the spec allows; zero points come off through row and column sums.
// QLinearMatMul requantizes like onnxruntime: multiplier a_scale * b_scale / y_scale in
// float, times the int32 sum in float, rounded half to even, plus y_zero_point, saturated.
// A constant 2-D b is packed once at load (its zero point may still vary per run).
//
// com.microsoft MatMulIntegerToFloat (what onnxruntime's quantize_dynamic and its own graph
// fusion write): y = float(sum) * (a_scale * b_scale[column]) + bias[column], a_scale per
// tensor or per row as a's zero point, b_scale per tensor or per column, bias [N]. ortlite's
// optimizer writes it for MatMulInteger + Cast to float + Mul by a scalar [+ Add of a bias],
// with b_scale 1: the same float operations in the same order.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "providers/shared/broadcast_shape.h"
#include "compute/int8_gemm.h"
#include "providers/cpu/nn/nn_common.h"
#include "providers/cpu/quant/quant_common.h"

namespace ortlite {
namespace quant {
namespace {

bool is_int8_type(DataType t) {
  return t == DataType::kUInt8 || t == DataType::kInt8;
}

template <typename Fn>
void dispatch_int8(DataType t, Fn&& fn) {
  if (t == DataType::kUInt8) return fn(uint8_t{});
  return fn(int8_t{});
}

struct Plan {
  Shape out, a2, b2;
  int64_t M = 0, N = 0, K = 0, batches = 1;
  bool b_shared = false;                  // one matrix in b: all batches in one GEMM
  std::vector<int64_t> a_index, b_index;  // matrix of a / b used by each output batch
};

Plan make_plan(const KernelContext& ctx, const Shape& a, const Shape& b) {
  if (a.empty() || b.empty()) {
    ctx.fail(StatusCode::kInvalidArgument, "inputs 'a' and 'b' need rank >= 1, got " +
                                               shape_to_string(a) + " and " + shape_to_string(b));
  }
  Plan p;
  p.a2 = a;
  p.b2 = b;
  if (p.a2.size() == 1) p.a2.insert(p.a2.begin(), 1);
  if (p.b2.size() == 1) p.b2.push_back(1);
  p.M = p.a2[p.a2.size() - 2];
  p.K = p.a2.back();
  p.N = p.b2.back();
  if (p.b2[p.b2.size() - 2] != p.K) {
    ctx.fail(StatusCode::kInvalidArgument, "inner dimensions of 'a' " + shape_to_string(a) +
                                               " and 'b' " + shape_to_string(b) + " differ");
  }
  const Shape ab(p.a2.begin(), p.a2.end() - 2), bb(p.b2.begin(), p.b2.end() - 2);
  Shape batch;
  try {
    batch = broadcast_shapes(ab, bb, "matmul");
  } catch (const Error&) {
    ctx.fail(StatusCode::kInvalidArgument, "batch dimensions of 'a' " + shape_to_string(a) +
                                               " and 'b' " + shape_to_string(b) +
                                               " cannot be broadcast");
  }
  p.batches = shape_size(batch);
  p.out = batch;
  if (a.size() > 1) p.out.push_back(p.M);
  if (b.size() > 1) p.out.push_back(p.N);
  p.b_shared = shape_size(bb) == 1;
  nn::batch_matrix_indices(ab, bb, batch, &p.a_index, &p.b_index);
  return p;
}

// The value of parameter `p` for every element of `target` (a's shape with the last dim 1,
// or b's with the second to last dim 1). A 1-D p of a's rows is taken as [M, 1]. False when
// p's shape does not broadcast to target.
bool expand_param(const Tensor& p, const Shape& target, bool rows, const char* what,
                  std::vector<double>* out) {
  const int64_t count = shape_size(target);
  const std::vector<double> v = tensor_values(p, what);
  if (p.numel() == 1) {
    out->assign(static_cast<size_t>(count), v[0]);
    return true;
  }
  Shape ps = p.shape();
  if (rows && ps.size() == 1) ps.push_back(1);
  if (ps.size() > target.size()) return false;
  for (size_t i = 0; i < ps.size(); ++i) {
    const int64_t pd = ps[ps.size() - 1 - i], td = target[target.size() - 1 - i];
    if (pd != td && pd != 1) return false;
  }
  const std::vector<int64_t> st = broadcast_strides(ps, target);
  out->resize(static_cast<size_t>(count));
  std::vector<int64_t> idx(target.size(), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < count; ++i) {
    (*out)[static_cast<size_t>(i)] = v[static_cast<size_t>(off)];
    for (size_t d = target.size(); d-- > 0;) {
      ++idx[d];
      off += st[d];
      if (idx[d] < target[d]) break;
      off -= st[d] * idx[d];
      idx[d] = 0;
    }
  }
  return true;
}

Shape row_target(const Plan& p) {
  Shape t = p.a2;
  t.back() = 1;
  return t;
}

Shape col_target(const Plan& p) {
  Shape t = p.b2;
  t[t.size() - 2] = 1;
  return t;
}

// Per-row values of a's parameter `name` (1.0 / 0 defaults when absent are the caller's).
std::vector<double> row_param(const KernelContext& ctx, const Tensor& t, const Plan& p,
                              const char* name, const Shape& a) {
  std::vector<double> v;
  if (!expand_param(t, row_target(p), true, name, &v)) {
    ctx.fail(StatusCode::kInvalidArgument,
             std::string("input '") + name + "' of shape " + shape_to_string(t.shape()) +
                 " does not fit 'a' " + shape_to_string(a) +
                 ": expected a single value, one per row ([M]) or a shape broadcastable to " +
                 shape_to_string(row_target(p)));
  }
  return v;
}

std::vector<double> col_param(const KernelContext& ctx, const Tensor& t, const Plan& p,
                              const char* name, const Shape& b) {
  std::vector<double> v;
  if (!expand_param(t, col_target(p), false, name, &v)) {
    ctx.fail(StatusCode::kInvalidArgument,
             std::string("input '") + name + "' of shape " + shape_to_string(t.shape()) +
                 " does not fit 'b' " + shape_to_string(b) +
                 ": expected a single value, one per column ([N]) or a shape broadcastable to " +
                 shape_to_string(col_target(p)));
  }
  return v;
}

void check_int8(const KernelContext& ctx, const Tensor& t, const char* name) {
  if (!is_int8_type(t.dtype())) {
    ctx.fail(
        StatusCode::kInvalidArgument,
        std::string("input '") + name + "' must be uint8 or int8, got " + dtype_name(t.dtype()));
  }
}

void check_zero_point(const KernelContext& ctx, const Tensor* zp, const Tensor& x,
                      const char* zp_name, const char* x_name) {
  if (zp && zp->dtype() != x.dtype()) {
    ctx.fail(StatusCode::kInvalidArgument,
             std::string("input '") + zp_name + "' must have the " + "type of '" + x_name + "' (" +
                 dtype_name(x.dtype()) + "), got " + dtype_name(zp->dtype()));
  }
}

std::vector<int32_t> to_int32(const std::vector<double>& v) {
  std::vector<int32_t> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = static_cast<int32_t>(v[i]);
  return r;
}

// The integer matrix product shared by both operators.
class QMatMulBase : public Kernel {
 protected:
  QMatMulBase(const KernelInfo& info, size_t b_in) {
    const Tensor* b = info.has_input(b_in) ? info.constant_input(b_in) : nullptr;
    if (!b || b->rank() != 2 || b->numel() == 0 || !is_int8_type(b->dtype())) return;
    // The zero point is applied at run time (int8_gemm.h): only b's bytes are packed.
    int8gemm::pack_b(b->raw_data(), b->dtype() == DataType::kInt8, b->dim(0), b->dim(1), b->dim(1),
                     &packed_);
    packed_dtype_ = b->dtype();
    packed_shape_ = b->shape();
  }

  // c[batches * M * N] = (a - za) x (b - zb), wrapped to int32; with fo, converted to float
  // in c's place instead (int8gemm::gemm_to_float): fo's row scales per output row (batches
  // * M), column scales per matrix of b (its b_index * N first). With rq (b shared, K > 0),
  // requantized into rq's y instead (int8gemm::gemm_requantize); c is unused and may be null.
  void accumulate(const KernelContext& ctx, const Tensor& a, const Tensor* za, const Tensor& b,
                  const Tensor* zb, const Plan& p, int32_t* c,
                  const int8gemm::FloatOut* fo = nullptr,
                  const int8gemm::RequantOut* rq = nullptr) const {
    const int64_t M = p.M, N = p.N, K = p.K;
    std::vector<int32_t> zr, zc;
    if (za) zr = to_int32(row_param(ctx, *za, p, "a_zero_point", a.shape()));
    if (zb) zc = to_int32(col_param(ctx, *zb, p, "b_zero_point", b.shape()));
    const int64_t total = p.batches * M * N;
    if (total == 0) return;
    if (K == 0 && !fo) {
      std::fill(c, c + total, 0);
      return;
    }
    ThreadPool* pool = ctx.thread_pool();
    const bool a_signed = a.dtype() == DataType::kInt8, b_signed = b.dtype() == DataType::kInt8;
    const int32_t* zrp = za ? zr.data() : nullptr;
    const int32_t* zcp = zb ? zc.data() : nullptr;
    const uint8_t* ad = static_cast<const uint8_t*>(a.raw_data());
    const uint8_t* bd = static_cast<const uint8_t*>(b.raw_data());
    if (p.b_shared) {
      // Every batch of a against the one b: a single (batches * M) x K by K x N product.
      int8gemm::PackedB local;
      const bool use_packed =
          !packed_.data.empty() && b.dtype() == packed_dtype_ && b.shape() == packed_shape_;
      if (!use_packed) int8gemm::pack_b(bd, b_signed, K, N, N, &local);
      int8gemm::PackedA pa;
      int8gemm::pack_a(ad, a_signed, p.batches * M, K, K, &pa);
      const int8gemm::PackedB& pb = use_packed ? packed_ : local;
      if (fo) {
        int8gemm::gemm_to_float(pa, pb, zrp, 1, zcp, 1, *fo, reinterpret_cast<float*>(c), N, pool);
      } else if (rq) {
        int8gemm::gemm_requantize(pa, pb, zrp, 1, zcp, 1, *rq, pool);
      } else {
        int8gemm::gemm(pa, pb, zrp, 1, zcp, 1, c, N, pool);
      }
      return;
    }
    const int64_t na = a.numel() / (M * K), nb = b.numel() / (K * N);
    std::vector<int8gemm::PackedA> pa(static_cast<size_t>(na));
    std::vector<int8gemm::PackedB> pb(static_cast<size_t>(nb));
    for (int64_t i = 0; i < na; ++i) int8gemm::pack_a(ad + i * M * K, a_signed, M, K, K, &pa[i]);
    for (int64_t i = 0; i < nb; ++i) int8gemm::pack_b(bd + i * K * N, b_signed, K, N, N, &pb[i]);
    for (int64_t n = 0; n < p.batches; ++n) {
      const int64_t ia = p.a_index[n], ib = p.b_index[n];
      const int32_t* zan = zrp ? zrp + ia * M : nullptr;
      const int32_t* zbn = zcp ? zcp + ib * N : nullptr;
      if (fo) {
        const int8gemm::FloatOut fn{fo->row_scale + n * M, fo->col_scale + ib * N, fo->bias};
        int8gemm::gemm_to_float(pa[ia], pb[ib], zan, 1, zbn, 1, fn,
                                reinterpret_cast<float*>(c + n * M * N), N, pool);
      } else {
        int8gemm::gemm(pa[ia], pb[ib], zan, 1, zbn, 1, c + n * M * N, N, pool);
      }
    }
  }

 private:
  int8gemm::PackedB packed_;  // a constant 2-D b, packed at load
  DataType packed_dtype_ = DataType::kUndefined;
  Shape packed_shape_;
};

class MatMulInteger final : public QMatMulBase {
 public:
  explicit MatMulInteger(const KernelInfo& info) : QMatMulBase(info, 1) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.required_input(0);
    const Tensor& b = ctx.required_input(1);
    const Tensor* za = ctx.input(2);
    const Tensor* zb = ctx.input(3);
    check_int8(ctx, a, "A");
    check_int8(ctx, b, "B");
    check_zero_point(ctx, za, a, "a_zero_point", "A");
    check_zero_point(ctx, zb, b, "b_zero_point", "B");
    const Plan p = make_plan(ctx, a.shape(), b.shape());
    Tensor& y = ctx.allocate_output(0, DataType::kInt32, p.out);
    accumulate(ctx, a, za, b, zb, p, y.data<int32_t>());
  }
};

class QLinearMatMul final : public QMatMulBase {
 public:
  explicit QLinearMatMul(const KernelInfo& info) : QMatMulBase(info, 3) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.required_input(0);
    const Tensor& as = ctx.required_input(1);
    const Tensor* za = ctx.input(2);
    const Tensor& b = ctx.required_input(3);
    const Tensor& bs = ctx.required_input(4);
    const Tensor* zb = ctx.input(5);
    const Tensor& ys = ctx.required_input(6);
    const Tensor* zy = ctx.input(7);
    check_int8(ctx, a, "a");
    check_int8(ctx, b, "b");
    check_zero_point(ctx, za, a, "a_zero_point", "a");
    check_zero_point(ctx, zb, b, "b_zero_point", "b");
    dispatch_float3(ctx, as.dtype(), "input 'a_scale'", [](auto) {});
    dispatch_float3(ctx, bs.dtype(), "input 'b_scale'", [](auto) {});
    dispatch_float3(ctx, ys.dtype(), "input 'y_scale'", [](auto) {});
    if (zy) check_int8(ctx, *zy, "y_zero_point");
    if (!is_single(ys) || (zy && !is_single(*zy))) {
      ctx.fail(StatusCode::kInvalidArgument,
               "inputs 'y_scale' " + shape_to_string(ys.shape()) + " and 'y_zero_point' " +
                   (zy ? shape_to_string(zy->shape()) : std::string("(absent)")) +
                   " must each hold a single value (per-tensor output quantization)");
    }
    const DataType qt = zy ? zy->dtype() : a.dtype();
    const Plan p = make_plan(ctx, a.shape(), b.shape());
    const std::vector<double> sa = row_param(ctx, as, p, "a_scale", a.shape());
    const std::vector<double> sb = col_param(ctx, bs, p, "b_scale", b.shape());
    const float ysv = static_cast<float>(tensor_values(ys, "y_scale")[0]);
    const double yz = zy ? tensor_values(*zy, "y_zero_point")[0] : 0.0;
    Tensor& y = ctx.allocate_output(0, qt, p.out);
    const int64_t M = p.M, N = p.N;
    const bool q_signed = qt == DataType::kInt8;
    uint8_t* yd = static_cast<uint8_t*>(y.raw_data());
    if (p.b_shared && is_single(as) && p.K > 0) {
      // One multiplier per column for every row: each tile is requantized as soon as the
      // kernel has written it (the same arithmetic as the rows below).
      const float av = static_cast<float>(sa[0]);
      std::vector<float> mult(static_cast<size_t>(N));
      for (int64_t j = 0; j < N; ++j) mult[j] = av * static_cast<float>(sb[j]) / ysv;
      int8gemm::RequantOut rq;
      rq.mult = mult.data();
      rq.zp = static_cast<int32_t>(yz);
      rq.is_signed = q_signed;
      rq.y = yd;
      rq.ldy = N;
      accumulate(ctx, a, za, b, zb, p, nullptr, nullptr, &rq);
      return;
    }
    // The int32 sums: every element is written by the product (or zeroed for K = 0).
    const std::unique_ptr<int32_t[]> c(new int32_t[static_cast<size_t>(p.batches * p.M * p.N)]);
    accumulate(ctx, a, za, b, zb, p, c.get());
    parallel_for(ctx.thread_pool(), p.batches * M, 4.0 * static_cast<double>(N),
                 [&](int64_t s, int64_t e) {
                   // The multipliers of a row, kept while the next row has the same ones.
                   std::vector<float> mult(static_cast<size_t>(N));
                   float last_av = 0.0f;
                   int64_t last_b = -1;
                   for (int64_t row = s; row < e; ++row) {
                     const int64_t n = row / M, m = row % M;
                     const float av = static_cast<float>(sa[p.a_index[n] * M + m]);
                     if (p.b_index[n] != last_b || !(av == last_av)) {
                       const double* bsv = sb.data() + p.b_index[n] * N;
                       for (int64_t j = 0; j < N; ++j)
                         mult[j] = av * static_cast<float>(bsv[j]) / ysv;
                       last_av = av;
                       last_b = p.b_index[n];
                     }
                     int8gemm::requantize(c.get() + row * N, N, 0, mult.data(), 1,
                                          static_cast<int32_t>(yz), q_signed, yd + row * N);
                   }
                 });
  }
};

// y = float((a - za) x (b - zb)) * (a_scale * b_scale[column]) + bias[column].
class ToFloatBase : public QMatMulBase {
 protected:
  explicit ToFloatBase(const KernelInfo& info) : QMatMulBase(info, 1) {}

  void to_float(KernelContext& ctx, const Tensor& a, const Tensor& b, const Tensor& as,
                const Tensor& bs, const Tensor* za, const Tensor* zb, const Tensor* bias) const {
    check_int8(ctx, a, "A");
    check_int8(ctx, b, "B");
    check_zero_point(ctx, za, a, "a_zero_point", "A");
    check_zero_point(ctx, zb, b, "b_zero_point", "B");
    if (as.dtype() != DataType::kFloat || bs.dtype() != DataType::kFloat) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("inputs 'a_scale' and 'b_scale' must be float, got ") +
                   dtype_name(as.dtype()) + " and " + dtype_name(bs.dtype()));
    }
    const Plan p = make_plan(ctx, a.shape(), b.shape());
    const int64_t M = p.M, N = p.N;
    if (bias && (bias->dtype() != DataType::kFloat || bias->numel() != N ||
                 (bias->rank() > 0 && bias->dim(bias->rank() - 1) != N))) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'bias' must be float with " + std::to_string(N) +
                   " elements (one per column of 'B'), got " + dtype_name(bias->dtype()) + " " +
                   shape_to_string(bias->shape()));
    }
    const std::vector<double> sa = row_param(ctx, as, p, "a_scale", a.shape());
    const std::vector<double> sb = col_param(ctx, bs, p, "b_scale", b.shape());
    Tensor& y = ctx.allocate_output(0, DataType::kFloat, p.out);
    const int64_t total = p.batches * M * N;
    if (total == 0) return;
    // The scales as floats: a's per output row, b's per matrix of b; their product is
    // formed per element in the GEMM's epilogue, as the per-row multipliers were.
    std::vector<float> rs(static_cast<size_t>(p.batches * M));
    for (int64_t n = 0; n < p.batches; ++n) {
      for (int64_t m = 0; m < M; ++m) rs[n * M + m] = static_cast<float>(sa[p.a_index[n] * M + m]);
    }
    std::vector<float> cs(sb.size());
    for (size_t j = 0; j < sb.size(); ++j) cs[j] = static_cast<float>(sb[j]);
    const int8gemm::FloatOut fo{rs.data(), cs.data(), bias ? bias->data<float>() : nullptr};
    accumulate(ctx, a, za, b, zb, p, reinterpret_cast<int32_t*>(y.data<float>()), &fo);
  }
};

class MatMulIntegerToFloat final : public ToFloatBase {
 public:
  explicit MatMulIntegerToFloat(const KernelInfo& info) : ToFloatBase(info) {}

  void compute(KernelContext& ctx) const override {
    to_float(ctx, ctx.required_input(0), ctx.required_input(1), ctx.required_input(2),
             ctx.required_input(3), ctx.input(4), ctx.input(5), ctx.input(6));
  }
};

// com.microsoft DynamicQuantizeMatMul: A quantized to uint8 per call as DynamicQuantizeLinear
// does (onnxruntime's GetQuantizationParameter), then MatMulIntegerToFloat with a's scale and
// zero point; b_scale / b_zero_point per tensor or per column.
class DynamicQuantizeMatMul final : public ToFloatBase {
 public:
  explicit DynamicQuantizeMatMul(const KernelInfo& info) : ToFloatBase(info) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.required_input(0);
    if (a.dtype() != DataType::kFloat) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input 'A' must be float, got ") + dtype_name(a.dtype()));
    }
    const float* ad = a.data<float>();
    const int64_t n = a.numel();
    float mn = 0.0f, mx = 0.0f;
    if (n > 0) int8gemm::min_max(ad, n, &mn, &mx);
    const float scale = mx == mn ? 1.0f : (mx - mn) / 255.0f;
    const float initial_zp = 0.0f - mn / scale;
    const float clamped = std::isnan(initial_zp) ? 255.0f : std::clamp(initial_zp, 0.0f, 255.0f);
    const float zp = std::nearbyint(clamped);
    Tensor qa = Tensor::empty(DataType::kUInt8, a.shape());
    uint8_t* qd = qa.data<uint8_t>();
    constexpr int64_t kChunk = 4096;
    parallel_for(ctx.thread_pool(), (n + kChunk - 1) / kChunk, 1.0 * kChunk,
                 [&](int64_t s, int64_t e) {
                   const int64_t b = s * kChunk, end = std::min(n, e * kChunk);
                   int8gemm::quantize_u8(ad + b, end - b, scale, zp, qd + b);
                 });
    const Tensor as = Tensor::from_vector<float>({scale}, {});
    const Tensor za = Tensor::from_vector<uint8_t>({static_cast<uint8_t>(zp)}, {});
    to_float(ctx, qa, ctx.required_input(1), as, ctx.required_input(2), &za, ctx.input(3),
             ctx.input(4));
  }
};

}  // namespace

void register_qmatmul(KernelRegistry& r) {
  // 21 adds float16 / bfloat16 scales and float8 types (the latter not held by ortlite).
  r.add("", "QLinearMatMul", 10, 20, make_factory<QLinearMatMul>());
  r.add("", "QLinearMatMul", 21, kMaxOpset, make_factory<QLinearMatMul>());
  r.add("", "MatMulInteger", 10, kMaxOpset, make_factory<MatMulInteger>());
  r.add("com.microsoft", "MatMulIntegerToFloat", 1, kMaxOpset,
        make_factory<MatMulIntegerToFloat>());
  r.add("com.microsoft", "DynamicQuantizeMatMul", 1, kMaxOpset,
        make_factory<DynamicQuantizeMatMul>());
}

}  // namespace quant
}  // namespace ortlite
