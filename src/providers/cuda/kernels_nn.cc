// CUDA kernels of the nn ops: Softmax / LogSoftmax, LayerNormalization,
// BatchNormalization, the Reduce* family, pooling, and MatMul / Gemm (cuBLAS) and Conv
// (cuDNN).
#include "providers/cuda/kernel_base.h"

namespace ortlite {
namespace cuda {
namespace {

using namespace kernels_detail;  // NOLINT: the shared helpers read better unqualified

// ---- Softmax, LayerNormalization, BatchNormalization ----------------------------------

class Softmax final : public CudaKernel {
 public:
  Softmax(const KernelInfo& info, bool log)
      : log_(log), opset_(info.opset()), axis_(info.attr_int("axis", info.opset() < 13 ? 1 : -1)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = dev_input(ctx, 0);
    need(ctx, is_float(x.dtype()), x.dtype());
    const int64_t rank = static_cast<int64_t>(x.rank());
    if (axis_ < -rank || axis_ >= rank)
      ctx.fail(StatusCode::kInvalidArgument, "attribute 'axis' " + std::to_string(axis_) +
                                                 " is out of range for input shape " +
                                                 shape_to_string(x.shape()));
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    const Shape& s = x.shape();
    const int64_t outer = tensor_ops::dims_product(s, 0, axis);
    int64_t n, inner;
    if (opset_ < 13) {
      n = tensor_ops::dims_product(s, axis, s.size());
      inner = 1;
    } else {
      n = s[axis];
      inner = tensor_ops::dims_product(s, axis + 1, s.size());
    }
    Tensor& y = out(ctx, 0, x.dtype(), s);
    run(ctx,
        api().softmax(stream(), code(x.dtype()), log_ ? 1 : 0, outer, n, inner, x.raw_data(),
                      y.raw_data()),
        log_ ? "LogSoftmax" : "Softmax");
  }

 private:
  bool log_;
  int64_t opset_;
  int64_t axis_;
};

class LayerNorm final : public CudaKernel {
 public:
  explicit LayerNorm(const KernelInfo& info) { attrs_.load(info); }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = dev_input(ctx, 0);
    const Tensor& S = dev_input(ctx, 1);
    const Tensor* B = dev_input_opt(ctx, 2);
    need(ctx, is_float(X.dtype()), X.dtype());
    const nn::LayerNormDims d = nn::layer_norm_dims(ctx, attrs_, X, S, B);
    const Shape& norm_shape = d.norm_shape;
    const Shape& stat_shape = d.stat_shape;
    Tensor& Y = out(ctx, 0, X.dtype(), X.shape());
    float* mean = nullptr;
    float* inv = nullptr;
    if (ctx.num_outputs() > 1 && !ctx.node().outputs[1].empty())
      mean = out(ctx, 1, DataType::kFloat, stat_shape).data<float>();
    if (ctx.num_outputs() > 2 && !ctx.node().outputs[2].empty())
      inv = out(ctx, 2, DataType::kFloat, stat_shape).data<float>();
    if (X.numel() == 0) return;
    const Tensor scale = expand(ctx, S, norm_shape, "Scale");
    Tensor bias;
    if (B) bias = expand(ctx, *B, norm_shape, "B");
    run(ctx,
        api().layer_norm(stream(), code(X.dtype()), d.outer, d.norm, attrs_.epsilon, X.raw_data(),
                         scale.raw_data(), B ? bias.raw_data() : nullptr, Y.raw_data(), mean, inv),
        "LayerNormalization");
  }

 private:
  // Scale / B broadcast to the normalized shape (a dense device copy when they are smaller).
  Tensor expand(const KernelContext& ctx, const Tensor& p, const Shape& target,
                const char* what) const {
    nn::check_norm_param(ctx, p, target, what);
    if (p.numel() == shape_size(target)) return p;
    Tensor t = temp(p.dtype(), target);
    strided_into(ctx, p, broadcast_strides(p.shape(), target), target, t);
    return t;
  }

  nn::LayerNormAttrs attrs_;
};

class BatchNorm final : public CudaKernel {
 public:
  explicit BatchNorm(const KernelInfo& info) { attrs_.load(info); }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = dev_input(ctx, 0);
    attrs_.check_x(ctx, X);
    need(ctx, is_float(X.dtype()), X.dtype());
    const int64_t inner = tensor_ops::dims_product(X.shape(), 2, X.rank());
    const int64_t count = attrs_.param_count(X);
    Tensor params[4];
    for (size_t i = 0; i < 4; ++i) {
      const Tensor& p = dev_input(ctx, i + 1);
      attrs_.check_param(ctx, X, p, i);
      params[i] = p;
      if (p.dtype() != X.dtype()) {  // opset 14+ allows other float types: compute in X's
        params[i] = temp(X.dtype(), p.shape());
        run(ctx,
            api().cast(stream(), code(p.dtype()), code(X.dtype()), p.numel(), p.raw_data(),
                       params[i].raw_data()),
            "BatchNormalization");
      }
    }
    Tensor& Y = out(ctx, 0, X.dtype(), X.shape());
    if (Y.numel() == 0) return;
    run(ctx,
        api().batch_norm(stream(), code(X.dtype()), X.numel(), attrs_.spatial ? inner : 1, count,
                         attrs_.epsilon, X.raw_data(), params[0].raw_data(), params[1].raw_data(),
                         params[2].raw_data(), params[3].raw_data(), Y.raw_data()),
        "BatchNormalization");
  }

 private:
  nn::BatchNormAttrs attrs_;
};

// ---- reductions -----------------------------------------------------------------------

class Reduce final : public CudaKernel {
 public:
  Reduce(const KernelInfo& info, int op, int input_axes_since) : op_(op) {
    attrs_.load(info, input_axes_since);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = dev_input(ctx, 0);
    const DataType dt = x.dtype();
    const bool integral = dt == DataType::kInt32 || dt == DataType::kInt64;
    const bool int_ok = op_ != ORTLITE_CUDA_REDUCE_L2 && op_ != ORTLITE_CUDA_REDUCE_LOG_SUM &&
                        op_ != ORTLITE_CUDA_REDUCE_LOG_SUM_EXP;
    need(ctx, is_float(dt) || (integral && int_ok), dt);
    std::vector<int64_t> axes = attrs_.axes;
    if (attrs_.axes_from_input) {
      if (const Tensor* a = host_input(ctx, 1)) {
        const std::string bad = reduce::axes_input_error(*a);
        if (!bad.empty()) ctx.fail(StatusCode::kInvalidArgument, bad);
        axes = tensor_to_int64s(*a);
      }
    }
    if (axes.empty() && attrs_.noop) {
      Tensor& y = out(ctx, 0, dt, x.shape());
      if (y.numel()) strided_into(ctx, x, dense_strides(x.shape()), x.shape(), y);
      return;
    }
    const std::vector<bool> mask = reduce::reduce_mask(ctx, axes, x.shape());
    const Shape out_shape = reduce::reduced_shape(x.shape(), mask, attrs_.keepdims);
    Tensor& y = out(ctx, 0, dt, out_shape);
    if (y.numel() == 0) return;
    reduce::ReduceLayout L;
    if (x.numel() > 0) {
      L = reduce::make_layout(x.shape(), mask);
    } else {
      L.num_out = y.numel();
      L.red_count = 0;
      L.kdims = {y.numel()};
      L.kstrides = {0};
    }
    if (L.kdims.size() > ORTLITE_CUDA_MAX_RANK || L.rdims.size() > ORTLITE_CUDA_MAX_RANK)
      ctx.fail(StatusCode::kNotImplemented,
               "the reduction has too many separate dims for the CUDA kernel");
    run(ctx,
        api().reduce(stream(), op_, code(dt), static_cast<int>(L.kdims.size()), L.kdims.data(),
                     L.kstrides.data(), static_cast<int>(L.rdims.size()), L.rdims.data(),
                     L.rstrides.data(), L.red_count, x.raw_data(), y.raw_data()),
        ctx.node().op_type.c_str());
  }

 private:
  int op_;
  reduce::ReduceAxesAttrs attrs_;
};

// ---- pooling --------------------------------------------------------------------------

class Pool final : public CudaKernel {
 public:
  Pool(const KernelInfo& info, bool is_max, bool global)
      : is_max_(is_max), global_(global), opset_(info.opset()) {
    if (!global_) attrs_.load(info, is_max);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = dev_input(ctx, 0);
    nn::check_pool_input(ctx, X, global_);
    need(ctx, is_float(X.dtype()), X.dtype());
    const int64_t channels = X.dim(0) * X.dim(1);
    const std::vector<int64_t> in(X.shape().begin() + 2, X.shape().end());
    if (global_) {
      Shape ys{X.dim(0), X.dim(1)};
      ys.resize(X.rank(), 1);
      Tensor& Y = out(ctx, 0, X.dtype(), ys);
      if (Y.numel() == 0) return;
      const int64_t size = tensor_ops::dims_product(X.shape(), 2, X.rank());
      const int64_t kd = channels, ks = size, rd = size, rs = 1;
      run(ctx,
          api().reduce(stream(), is_max_ ? ORTLITE_CUDA_REDUCE_MAX : ORTLITE_CUDA_REDUCE_MEAN,
                       code(X.dtype()), 1, &kd, &ks, 1, &rd, &rs, size, X.raw_data(), Y.raw_data()),
          ctx.node().op_type.c_str());
      return;
    }
    const nn::SpatialGeometry g = nn::pool_geometry(ctx, attrs_.spatial, in, attrs_.ceil_mode);
    Shape ys{X.dim(0), X.dim(1)};
    ys.insert(ys.end(), g.out.begin(), g.out.end());
    Tensor& Y = out(ctx, 0, X.dtype(), ys);
    int64_t* ind = nullptr;
    if (is_max_ && ctx.num_outputs() > 1 && !ctx.node().outputs[1].empty())
      ind = out(ctx, 1, DataType::kInt64, ys).data<int64_t>();
    if (Y.numel() == 0) return;
    OrtliteCudaPoolParams p;
    std::memset(&p, 0, sizeof(p));
    p.dtype = code(X.dtype());
    p.is_max = is_max_ ? 1 : 0;
    p.count_include_pad = attrs_.count_include_pad ? 1 : 0;
    p.clip_divisor = opset_ >= 19 ? 1 : 0;
    p.storage_order = static_cast<int>(attrs_.storage_order);
    p.spatial_rank = static_cast<int>(g.rank);
    p.channels = channels;
    for (size_t i = 0; i < 3; ++i) {
      if (i < 3 - g.rank) {
        p.in[i] = p.out[i] = p.kernel[i] = p.stride[i] = p.dilation[i] = 1;
        p.pad_begin[i] = p.pad_end[i] = 0;
      } else {
        const size_t j = i - (3 - g.rank);
        p.in[i] = g.in[j];
        p.out[i] = g.out[j];
        p.kernel[i] = g.kernel[j];
        p.stride[i] = g.stride[j];
        p.dilation[i] = g.dilation[j];
        p.pad_begin[i] = g.pad_begin[j];
        p.pad_end[i] = g.pad_end[j];
      }
    }
    run(ctx, api().pool(stream(), &p, X.raw_data(), Y.raw_data(), ind), ctx.node().op_type.c_str());
  }

 private:
  bool is_max_;
  bool global_;
  int64_t opset_;
  nn::PoolAttrs attrs_;
};

// ---- MatMul, Gemm, Conv ---------------------------------------------------------------

bool gemm_type(DataType t) {
  return is_float(t);
}

// Row-major C[M,N] = alpha * op(A) op(B) + beta * C for `batch` matrices at strides (in
// elements), through cuBLAS's column-major GEMM: C^T = op(B)^T op(A)^T.
void row_major_gemm(const KernelContext& ctx, DataType dt, bool ta, bool tb, int64_t M, int64_t N,
                    int64_t K, double alpha, const void* A, int64_t sa, const void* B, int64_t sb,
                    double beta, void* C, int64_t sc, int64_t batch) {
  // Leading dims are at least 1 even for empty operands (K == 0), as BLAS requires.
  const int64_t lda = std::max<int64_t>(ta ? M : K, 1), ldb = std::max<int64_t>(tb ? K : N, 1);
  const int rc = api().gemm(current_stream(), code(dt), tb ? 1 : 0, ta ? 1 : 0, N, M, K, alpha, B,
                            ldb, sb, A, lda, sa, beta, C, N, sc, batch);
  if (rc != 0) ctx.fail(StatusCode::kFail, std::string("GEMM: ") + api().last_error());
}

class MatMul final : public CudaKernel {
 public:
  explicit MatMul(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& a = dev_input(ctx, 0);
    const Tensor& b = dev_input(ctx, 1);
    if (a.dtype() != b.dtype())
      ctx.fail(StatusCode::kInvalidArgument, std::string("inputs have different element types ") +
                                                 dtype_name(a.dtype()) + " and " +
                                                 dtype_name(b.dtype()));
    need(ctx, gemm_type(a.dtype()), a.dtype());
    if (a.rank() == 0 || b.rank() == 0)
      ctx.fail(StatusCode::kInvalidArgument, "MatMul inputs must have rank >= 1, got " +
                                                 shape_to_string(a.shape()) + " and " +
                                                 shape_to_string(b.shape()));
    // 1-D operands become matrices ([K] -> [1, K] on the left, [K, 1] on the right).
    Shape as = a.shape(), bs = b.shape();
    if (as.size() == 1) as.insert(as.begin(), 1);
    if (bs.size() == 1) bs.push_back(1);
    const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
    if (bs[bs.size() - 2] != K)
      ctx.fail(StatusCode::kInvalidArgument, "MatMul shapes " + shape_to_string(a.shape()) +
                                                 " and " + shape_to_string(b.shape()) +
                                                 " do not match (inner dims " + std::to_string(K) +
                                                 " and " + std::to_string(bs[bs.size() - 2]) + ")");
    const Shape abatch(as.begin(), as.end() - 2), bbatch(bs.begin(), bs.end() - 2);
    const Shape batch = broadcast_or_fail(ctx, abatch, bbatch);
    Shape shape = batch;
    if (a.rank() > 1) shape.push_back(M);
    if (b.rank() > 1) shape.push_back(N);
    Tensor& y = out(ctx, 0, a.dtype(), shape);
    if (y.numel() == 0) return;
    if (K == 0) {
      run(ctx, api().memset_zero(y.raw_data(), y.nbytes(), stream()), "MatMul");
      return;
    }
    // Batch strides in matrices, then one strided-batched GEMM per run of the innermost
    // batch dim (one for the usual equal or fully broadcast batches).
    const std::vector<int64_t> ab = broadcast_strides(abatch, batch);
    const std::vector<int64_t> bb = broadcast_strides(bbatch, batch);
    const size_t esz = dtype_size(a.dtype());
    // B with no batch dims of its own: fold A's batch into M (one plain GEMM).
    if (shape_size(bbatch) == 1 && shape_size(abatch) == shape_size(batch)) {
      row_major_gemm(ctx, a.dtype(), false, false, M * shape_size(batch), N, K, 1.0, a.raw_data(),
                     0, b.raw_data(), 0, 0.0, y.raw_data(), 0, 1);
      return;
    }
    const size_t nb = batch.size();
    const int64_t inner_n = nb ? batch.back() : 1;
    const int64_t sa = nb ? ab.back() * M * K : 0, sb = nb ? bb.back() * K * N : 0;
    const int64_t outer = nb ? shape_size(batch) / std::max<int64_t>(inner_n, 1) : 1;
    std::vector<int64_t> idx(nb ? nb - 1 : 0, 0);
    for (int64_t o = 0; o < outer; ++o) {
      int64_t oa = 0, ob = 0;
      for (size_t d = 0; d + 1 < nb; ++d) {
        oa += idx[d] * ab[d];
        ob += idx[d] * bb[d];
      }
      const char* ap = static_cast<const char*>(a.raw_data()) + oa * M * K * esz;
      const char* bp = static_cast<const char*>(b.raw_data()) + ob * K * N * esz;
      char* yp = static_cast<char*>(y.raw_data()) + o * inner_n * M * N * esz;
      row_major_gemm(ctx, a.dtype(), false, false, M, N, K, 1.0, ap, sa, bp, sb, 0.0, yp, M * N,
                     inner_n);
      for (size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < batch[d]) break;
        idx[d] = 0;
      }
    }
  }
};

class Gemm final : public CudaKernel {
 public:
  explicit Gemm(const KernelInfo& info)
      : trans_a_(info.attr_int("transA", 0) != 0),
        trans_b_(info.attr_int("transB", 0) != 0),
        alpha_(info.attr_float("alpha", 1.0f)),
        beta_(info.attr_float("beta", 1.0f)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& A = dev_input(ctx, 0);
    const Tensor& B = dev_input(ctx, 1);
    const Tensor* C = dev_input_opt(ctx, 2);
    if (A.dtype() != B.dtype() || (C && C->dtype() != A.dtype()))
      ctx.fail(StatusCode::kInvalidArgument, "A, B and C must have the same element type");
    need(ctx, gemm_type(A.dtype()), A.dtype());
    if (A.rank() != 2 || B.rank() != 2)
      ctx.fail(StatusCode::kInvalidArgument, "A and B must be 2-D, got " +
                                                 shape_to_string(A.shape()) + " and " +
                                                 shape_to_string(B.shape()));
    const int64_t M = trans_a_ ? A.dim(1) : A.dim(0), K = trans_a_ ? A.dim(0) : A.dim(1);
    const int64_t KB = trans_b_ ? B.dim(1) : B.dim(0), N = trans_b_ ? B.dim(0) : B.dim(1);
    if (K != KB)
      ctx.fail(StatusCode::kInvalidArgument,
               "A " + shape_to_string(A.shape()) + " and B " + shape_to_string(B.shape()) +
                   " do not match for transA=" + std::to_string(trans_a_) +
                   ", transB=" + std::to_string(trans_b_));
    const Shape shape{M, N};
    Tensor& Y = out(ctx, 0, A.dtype(), shape);
    if (Y.numel() == 0) return;
    double beta = 0.0;
    if (C && beta_ != 0.f) {
      const Shape cs = C->shape();
      bool ok = cs.size() <= 2;
      for (size_t i = 0; ok && i < cs.size(); ++i) {
        const int64_t t = shape[2 - cs.size() + i];
        ok = cs[i] == t || cs[i] == 1;
      }
      if (!ok)
        ctx.fail(StatusCode::kInvalidArgument,
                 "C " + shape_to_string(cs) + " cannot be broadcast to " + shape_to_string(shape));
      strided_into(ctx, *C, broadcast_strides(cs, shape), shape, Y);
      beta = beta_;
    }
    // K == 0 included: BLAS semantics give Y = beta * C (zeros when beta is 0).
    row_major_gemm(ctx, A.dtype(), trans_a_, trans_b_, M, N, K, alpha_, A.raw_data(), 0,
                   B.raw_data(), 0, beta, Y.raw_data(), 0, 1);
  }

 private:
  bool trans_a_, trans_b_;
  float alpha_, beta_;
};

class Conv final : public CudaKernel {
 public:
  explicit Conv(const KernelInfo& info) { attrs_.load(info); }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = dev_input(ctx, 0);
    const Tensor& W = dev_input(ctx, 1);
    const Tensor* B = dev_input_opt(ctx, 2);
    const DataType dt = X.dtype();
    need(ctx, dt == DataType::kFloat || dt == DataType::kFloat16 || dt == DataType::kDouble, dt);
    attrs_.check_inputs(ctx, X, W, B);
    if (X.rank() > 5)
      ctx.fail(StatusCode::kInvalidArgument,
               "X " + shape_to_string(X.shape()) + " and W " + shape_to_string(W.shape()) +
                   " must both be N x C x D1 x ... with 1 to 3 spatial dims");
    const int64_t N = X.dim(0), Cin = X.dim(1), M = W.dim(0);
    const std::vector<int64_t> in(X.shape().begin() + 2, X.shape().end());
    const std::vector<int64_t> kernel(W.shape().begin() + 2, W.shape().end());
    const nn::SpatialGeometry g = nn::conv_geometry(ctx, attrs_.spatial, in, kernel);
    Shape ys{N, M};
    ys.insert(ys.end(), g.out.begin(), g.out.end());
    Tensor& Y = out(ctx, 0, dt, ys);
    if (Y.numel() == 0) return;
    OrtliteCudaConvParams p;
    std::memset(&p, 0, sizeof(p));
    p.dtype = code(dt);
    p.spatial_rank = static_cast<int>(g.rank);
    p.batch = N;
    p.in_channels = Cin;
    p.out_channels = M;
    p.group = attrs_.group;
    bool symmetric = true;
    for (size_t i = 0; i < g.rank; ++i) symmetric = symmetric && g.pad_begin[i] == g.pad_end[i];
    // cuDNN pads symmetrically: otherwise the padded input is made here.
    Tensor padded;
    const void* xp = X.raw_data();
    for (size_t i = 0; i < g.rank; ++i) {
      p.in[i] = symmetric ? g.in[i] : g.in[i] + g.pad_begin[i] + g.pad_end[i];
      p.kernel[i] = g.kernel[i];
      p.out[i] = g.out[i];
      p.pad[i] = symmetric ? g.pad_begin[i] : 0;
      p.stride[i] = g.stride[i];
      p.dilation[i] = g.dilation[i];
    }
    if (!symmetric) {
      Shape ps{N, Cin};
      for (size_t i = 0; i < g.rank; ++i) ps.push_back(p.in[i]);
      padded = temp(dt, ps);
      run(ctx, api().memset_zero(padded.raw_data(), padded.nbytes(), stream()), "Conv");
      const std::vector<int64_t> dst = dense_strides(ps);
      int64_t offset = 0;
      for (size_t i = 0; i < g.rank; ++i) offset += g.pad_begin[i] * dst[2 + i];
      const std::vector<int64_t> src = dense_strides(X.shape());
      run(ctx,
          api().strided_copy(
              stream(), static_cast<int>(dtype_size(dt)), static_cast<int>(X.rank()),
              X.shape().data(), X.raw_data(), src.data(),
              static_cast<char*>(padded.raw_data()) + offset * static_cast<int64_t>(dtype_size(dt)),
              dst.data()),
          "Conv");
      xp = padded.raw_data();
    }
    run(ctx,
        api().conv_forward(stream(), &p, xp, W.raw_data(), B ? B->raw_data() : nullptr,
                           Y.raw_data()),
        "Conv");
  }

 private:
  nn::ConvAttrs attrs_;
};

}  // namespace

void register_nn_kernels(KernelRegistry& r) {
  using namespace kernels_detail;  // NOLINT
  add(r, "Softmax", {1, 11, 13}, factory<Softmax>(false));
  add(r, "LogSoftmax", {1, 11, 13}, factory<Softmax>(true));
  add(r, "LayerNormalization", {17}, factory<LayerNorm>());
  add(r, "BatchNormalization", {7, 9, 14, 15}, factory<BatchNorm>());
  for (const ReduceSpec& s : kReduceSpecs)
    add(r, s.name, s.versions, factory<Reduce>(s.op, s.input_axes_since));
  add(r, "MaxPool", {1, 8, 10, 11, 12, 22}, factory<Pool>(true, false));
  add(r, "AveragePool", {1, 7, 10, 11, 19, 22}, factory<Pool>(false, false));
  add(r, "GlobalMaxPool", {1, 22}, factory<Pool>(true, true));
  add(r, "GlobalAveragePool", {1, 22}, factory<Pool>(false, true));

  add(r, "MatMul", {1, 9, 13}, factory<MatMul>());
  add(r, "Gemm", {7, 9, 11, 13}, factory<Gemm>());
  add(r, "Conv", {1, 11, 22}, factory<Conv>());
}

}  // namespace cuda
}  // namespace ortlite
