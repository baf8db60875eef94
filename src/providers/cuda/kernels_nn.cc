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
  explicit LayerNorm(const KernelInfo& info)
      : axis_(info.attr_int("axis", -1)), epsilon_(info.attr_float("epsilon", 1e-5f)) {
    const int64_t stash = info.attr_int("stash_type", 1);
    if (stash != 1)
      info.fail(StatusCode::kNotImplemented,
                "stash_type " + std::to_string(stash) + " is not supported (only 1: float)");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = dev_input(ctx, 0);
    const Tensor& S = dev_input(ctx, 1);
    const Tensor* B = dev_input_opt(ctx, 2);
    need(ctx, is_float(X.dtype()), X.dtype());
    if (S.dtype() != X.dtype() || (B && B->dtype() != X.dtype()))
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("X, Scale and B must have the same element type, got X ") +
                   dtype_name(X.dtype()) + ", Scale " + dtype_name(S.dtype()) +
                   (B ? std::string(", B ") + dtype_name(B->dtype()) : std::string()));
    const int64_t rank = static_cast<int64_t>(X.rank());
    if (rank == 0) ctx.fail(StatusCode::kInvalidArgument, "X must have rank >= 1, got a scalar");
    if (axis_ < -rank || axis_ >= rank)
      ctx.fail(StatusCode::kInvalidArgument, "attribute 'axis' " + std::to_string(axis_) +
                                                 " is out of range for X " +
                                                 shape_to_string(X.shape()));
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    const Shape norm_shape(X.shape().begin() + static_cast<std::ptrdiff_t>(axis), X.shape().end());
    const int64_t outer = tensor_ops::dims_product(X.shape(), 0, axis);
    const int64_t norm = shape_size(norm_shape);
    if (norm == 0)
      ctx.fail(StatusCode::kInvalidArgument, "the normalized dims X.shape[axis:] " +
                                                 shape_to_string(norm_shape) + " of X " +
                                                 shape_to_string(X.shape()) + " are empty");
    Shape stat_shape(X.shape().begin(), X.shape().begin() + static_cast<std::ptrdiff_t>(axis));
    stat_shape.resize(static_cast<size_t>(rank), 1);
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
        api().layer_norm(stream(), code(X.dtype()), outer, norm, epsilon_, X.raw_data(),
                         scale.raw_data(), B ? bias.raw_data() : nullptr, Y.raw_data(), mean, inv),
        "LayerNormalization");
  }

 private:
  // Scale / B broadcast to the normalized shape (a dense device copy when they are smaller).
  Tensor expand(const KernelContext& ctx, const Tensor& p, const Shape& target,
                const char* what) const {
    if (p.numel() == shape_size(target)) return p;
    bool ok = p.rank() <= target.size();
    for (size_t i = 0; ok && i < p.rank(); ++i) {
      const int64_t d = p.dim(p.rank() - 1 - i);
      const int64_t t = target[target.size() - 1 - i];
      ok = d == t || d == 1;
    }
    if (!ok)
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input ") + what + " " + shape_to_string(p.shape()) +
                   " cannot be broadcast to the normalized shape " + shape_to_string(target));
    Tensor t = temp(p.dtype(), target);
    strided_into(ctx, p, broadcast_strides(p.shape(), target), target, t);
    return t;
  }

  int64_t axis_;
  float epsilon_;
};

class BatchNorm final : public CudaKernel {
 public:
  explicit BatchNorm(const KernelInfo& info)
      : epsilon_(info.attr_float("epsilon", 1e-5f)), opset_(info.opset()) {
    if (opset_ >= 14) {
      if (info.attr_int("training_mode", 0) != 0)
        info.fail(StatusCode::kNotImplemented,
                  "training_mode = 1 is not supported (ortlite runs inference only)");
      for (size_t i = 1; i < info.num_outputs(); ++i)
        if (!info.node().outputs[i].empty())
          info.fail(StatusCode::kInvalidGraph,
                    "outputs running_mean / running_var are only produced in training mode");
    } else {
      for (size_t i = 1; i < info.num_outputs(); ++i)
        if (!info.node().outputs[i].empty())
          info.fail(StatusCode::kNotImplemented,
                    "the mean / var / saved_mean / saved_var outputs mean training mode, which "
                    "is not supported (ortlite runs inference only)");
    }
    if (opset_ < 9) spatial_ = info.attr_int("spatial", 1) != 0;
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = dev_input(ctx, 0);
    static const char* const kNames[4] = {"scale", "B", "input_mean", "input_var"};
    if (X.rank() < 2)
      ctx.fail(StatusCode::kInvalidArgument,
               "X must have rank >= 2 (N x C x ...), got " + shape_to_string(X.shape()));
    need(ctx, is_float(X.dtype()), X.dtype());
    const int64_t C = X.dim(1);
    const int64_t inner = tensor_ops::dims_product(X.shape(), 2, X.rank());
    const int64_t count = spatial_ ? C : C * inner;
    Tensor params[4];
    for (size_t i = 0; i < 4; ++i) {
      const Tensor& p = dev_input(ctx, i + 1);
      if (!is_float(p.dtype()) || (opset_ < 14 && p.dtype() != X.dtype()))
        ctx.fail(StatusCode::kInvalidArgument, std::string("input ") + kNames[i] +
                                                   " has element type " + dtype_name(p.dtype()) +
                                                   ", X has " + dtype_name(X.dtype()));
      if (p.numel() != count || (spatial_ && p.rank() != 1))
        ctx.fail(StatusCode::kInvalidArgument,
                 std::string("input ") + kNames[i] + " " + shape_to_string(p.shape()) +
                     " does not match X " + shape_to_string(X.shape()) + " (expected " +
                     (spatial_ ? "[" + std::to_string(C) + "]"
                               : std::to_string(count) + " elements (C x D1 x ...)") +
                     ")");
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
        api().batch_norm(stream(), code(X.dtype()), X.numel(), spatial_ ? inner : 1, count,
                         epsilon_, X.raw_data(), params[0].raw_data(), params[1].raw_data(),
                         params[2].raw_data(), params[3].raw_data(), Y.raw_data()),
        "BatchNormalization");
  }

 private:
  float epsilon_;
  int64_t opset_;
  bool spatial_ = true;
};

// ---- reductions -----------------------------------------------------------------------

class Reduce final : public CudaKernel {
 public:
  Reduce(const KernelInfo& info, int op, int input_axes_since) : op_(op), opset_(info.opset()) {
    keepdims_ = info.attr_int("keepdims", 1) != 0;
    axes_from_input_ = info.opset() >= input_axes_since;
    if (axes_from_input_) {
      if (info.has_attr("axes"))
        info.fail(StatusCode::kInvalidGraph,
                  "attribute 'axes' is not allowed at opset " + std::to_string(info.opset()) +
                      " (axes are input 1 since opset " + std::to_string(input_axes_since) + ")");
      noop_ = info.attr_int("noop_with_empty_axes", 0) != 0;
    } else {
      axes_ = info.attr_ints("axes");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = dev_input(ctx, 0);
    const DataType dt = x.dtype();
    const bool integral = dt == DataType::kInt32 || dt == DataType::kInt64;
    const bool int_ok = op_ != ORTLITE_CUDA_REDUCE_L2 && op_ != ORTLITE_CUDA_REDUCE_LOG_SUM &&
                        op_ != ORTLITE_CUDA_REDUCE_LOG_SUM_EXP;
    need(ctx, is_float(dt) || (integral && int_ok), dt);
    std::vector<int64_t> axes = axes_;
    if (axes_from_input_) {
      if (const Tensor* a = host_input(ctx, 1)) {
        if (a->dtype() != DataType::kInt64 && a->dtype() != DataType::kInt32)
          ctx.fail(StatusCode::kInvalidArgument,
                   std::string("input 'axes' must be int64, got ") + dtype_name(a->dtype()));
        if (a->rank() > 1)
          ctx.fail(StatusCode::kInvalidArgument,
                   "input 'axes' must be 1-D, got shape " + shape_to_string(a->shape()));
        axes = tensor_to_int64s(*a);
      }
    }
    const int64_t rank = static_cast<int64_t>(x.rank());
    if (axes.empty() && noop_) {
      Tensor& y = out(ctx, 0, dt, x.shape());
      if (y.numel()) strided_into(ctx, x, dense_strides(x.shape()), x.shape(), y);
      return;
    }
    std::vector<bool> mask(static_cast<size_t>(rank), axes.empty());
    for (int64_t a : axes) {
      const int64_t lim = std::max<int64_t>(rank, 1);
      if (a < -lim || a >= lim)
        ctx.fail(StatusCode::kInvalidArgument,
                 "axes value " + std::to_string(a) + " is out of range for input 'data' of rank " +
                     std::to_string(rank) + " (shape " + shape_to_string(x.shape()) + ")");
      if (rank == 0) continue;
      const int64_t na = a < 0 ? a + rank : a;
      if (mask[static_cast<size_t>(na)])
        ctx.fail(StatusCode::kInvalidArgument, "axes " + ints_to_string(axes) + " name dim " +
                                                   std::to_string(na) + " more than once");
      mask[static_cast<size_t>(na)] = true;
    }
    Shape out_shape;
    for (int64_t d = 0; d < rank; ++d) {
      if (!mask[static_cast<size_t>(d)])
        out_shape.push_back(x.dim(static_cast<size_t>(d)));
      else if (keepdims_)
        out_shape.push_back(1);
    }
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
  int64_t opset_;
  bool keepdims_ = true;
  bool axes_from_input_ = false;
  bool noop_ = false;
  std::vector<int64_t> axes_;
};

// ---- pooling --------------------------------------------------------------------------

class Pool final : public CudaKernel {
 public:
  Pool(const KernelInfo& info, bool is_max, bool global)
      : is_max_(is_max), global_(global), opset_(info.opset()) {
    if (global_) return;
    attrs_.load(info, true);
    if ((is_max && opset_ < 10) || (!is_max && opset_ < 19)) attrs_.dilations.clear();
    ceil_mode_ = opset_ >= 10 && info.attr_int("ceil_mode", 0) != 0;
    if (!is_max) count_include_pad_ = opset_ >= 7 && info.attr_int("count_include_pad", 0) != 0;
    if (is_max && opset_ >= 8) {
      storage_order_ = info.attr_int("storage_order", 0);
      if (storage_order_ != 0 && storage_order_ != 1)
        info.fail(StatusCode::kInvalidGraph, "attribute 'storage_order' must be 0 or 1, got " +
                                                 std::to_string(storage_order_));
    }
    if (attrs_.auto_pad == nn::AutoPad::kNotSet && !attrs_.pads.empty()) {
      const size_t n = attrs_.kernel_shape.size();
      for (size_t i = 0; i < 2 * n; ++i)
        if (attrs_.pads[i] >= attrs_.kernel_shape[i % n])
          info.fail(StatusCode::kInvalidGraph, "attribute 'pads' " +
                                                   nn::dims_to_string(attrs_.pads) +
                                                   " must be smaller than the kernel " +
                                                   nn::dims_to_string(attrs_.kernel_shape));
    }
    if (!is_max && info.num_outputs() > 1)
      info.fail(StatusCode::kInvalidGraph, "AveragePool has a single output");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = dev_input(ctx, 0);
    if (X.rank() < 3 || (!global_ && X.rank() > 5))
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("X must be N x C x D1 x ... with 1 to 3 spatial dims, got ") +
                   shape_to_string(X.shape()));
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
    const nn::SpatialGeometry g = nn::pool_geometry(ctx, attrs_, in, ceil_mode_);
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
    p.count_include_pad = count_include_pad_ ? 1 : 0;
    p.clip_divisor = opset_ >= 19 ? 1 : 0;
    p.storage_order = static_cast<int>(storage_order_);
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
  nn::SpatialAttrs attrs_;
  bool ceil_mode_ = false;
  bool count_include_pad_ = false;
  int64_t storage_order_ = 0;
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
  explicit Conv(const KernelInfo& info) : group_(info.attr_int("group", 1)) {
    attrs_.load(info, false);
    if (group_ < 1)
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'group' must be >= 1, got " + std::to_string(group_));
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = dev_input(ctx, 0);
    const Tensor& W = dev_input(ctx, 1);
    const Tensor* B = dev_input_opt(ctx, 2);
    const DataType dt = X.dtype();
    if (W.dtype() != dt || (B && B->dtype() != dt))
      ctx.fail(StatusCode::kInvalidArgument, "X, W and B must have the same element type");
    need(ctx, dt == DataType::kFloat || dt == DataType::kFloat16 || dt == DataType::kDouble, dt);
    if (X.rank() < 3 || X.rank() > 5 || W.rank() != X.rank())
      ctx.fail(StatusCode::kInvalidArgument,
               "X " + shape_to_string(X.shape()) + " and W " + shape_to_string(W.shape()) +
                   " must both be N x C x D1 x ... with 1 to 3 spatial dims");
    const int64_t N = X.dim(0), Cin = X.dim(1), M = W.dim(0);
    if (W.dim(1) * group_ != Cin || M % group_ != 0)
      ctx.fail(StatusCode::kInvalidArgument, "W " + shape_to_string(W.shape()) +
                                                 " does not match X " + shape_to_string(X.shape()) +
                                                 " with group " + std::to_string(group_));
    if (B && (B->rank() != 1 || B->dim(0) != M))
      ctx.fail(StatusCode::kInvalidArgument,
               "B " + shape_to_string(B->shape()) + " must be [" + std::to_string(M) + "]");
    const std::vector<int64_t> in(X.shape().begin() + 2, X.shape().end());
    const std::vector<int64_t> kernel(W.shape().begin() + 2, W.shape().end());
    if (!attrs_.kernel_shape.empty() && attrs_.kernel_shape != kernel)
      ctx.fail(StatusCode::kInvalidArgument, "attribute 'kernel_shape' " +
                                                 nn::dims_to_string(attrs_.kernel_shape) +
                                                 " does not match W " + shape_to_string(W.shape()));
    const nn::SpatialGeometry g = nn::conv_geometry(ctx, attrs_, in, kernel);
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
    p.group = group_;
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
  int64_t group_;
  nn::SpatialAttrs attrs_;
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
