// Conv (opset 1, 11, 22): N-D convolution (1-D, 2-D, 3-D, ...) with pads / auto_pad,
// strides, dilations, groups (depthwise included) and an optional bias.
//
// Per image and group: Y_g[Mg x P] = W_g[Mg x (Cg * prod(kernel))] * col[(Cg * prod(kernel))
// x P] (+ bias), where col is the im2col expansion of the input over a chunk of output
// positions (bounded memory), or the input itself for 1x1 / stride 1 / no padding. A constant
// W is packed per group at load. One input channel per group (depthwise) is computed
// directly instead. float16 / bfloat16 compute in float.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/nn/gemm_impl.h"
#include "ops/nn/nn_common.h"

namespace ortlite {
namespace nn {
namespace {

template <typename T>
std::vector<T>& col_scratch() {
  thread_local std::vector<T> buf;
  return buf;
}

// Expands the input of one group (Cg channels) for output positions [p0, p0 + pc) into
// col[(c * ksize + k) * pc + (p - p0)]. The chunk is walked row by row along the last
// output axis; each kernel tap is a strided copy with zero fill at the borders.
template <typename T>
void im2col(const T* x, const SpatialGeometry& g, int64_t Cg, int64_t p0, int64_t pc, T* col) {
  const size_t n = g.rank;
  const size_t last = n - 1;
  int64_t ksize = 1, in_size = 1;
  for (size_t d = 0; d < n; ++d) {
    ksize *= g.kernel[d];
    in_size *= g.in[d];
  }
  const int64_t in_l = g.in[last], s_l = g.stride[last], out_l = g.out[last];
  const int64_t row0 = p0 / out_l;
  const int64_t nrows = (p0 + pc - 1) / out_l - row0 + 1;
  std::vector<int64_t> kidx(n), oi(n), start(n, 0);
  {
    int64_t r = row0;
    for (size_t d = last; d-- > 0;) {
      start[d] = r % g.out[d];
      r /= g.out[d];
    }
  }
  // Input row offset (over the leading axes) of each output row for the current kernel
  // position, or -1 when that row falls in the padding.
  std::vector<int64_t> base(static_cast<size_t>(nrows));
  for (int64_t kf = 0; kf < ksize; ++kf) {
    {
      int64_t r = kf;
      for (size_t d = n; d-- > 0;) {
        kidx[d] = r % g.kernel[d];
        r /= g.kernel[d];
      }
    }
    oi = start;
    for (int64_t q = 0; q < nrows; ++q) {
      int64_t off = 0;
      bool valid = true;
      for (size_t d = 0; d < last; ++d) {
        const int64_t ii = oi[d] * g.stride[d] - g.pad_begin[d] + kidx[d] * g.dilation[d];
        if (ii < 0 || ii >= g.in[d]) valid = false;
        off = off * g.in[d] + ii;
      }
      base[q] = valid ? off * in_l : -1;
      for (size_t d = last; d-- > 0;) {
        if (++oi[d] < g.out[d]) break;
        oi[d] = 0;
      }
    }
    const int64_t off_l = kidx[last] * g.dilation[last] - g.pad_begin[last];
    int64_t lo, hi;
    valid_range(off_l, s_l, in_l, out_l, lo, hi);
    for (int64_t c = 0; c < Cg; ++c) {
      const T* xc = x + c * in_size;
      T* dcol = col + (c * ksize + kf) * pc;
      for (int64_t q = 0; q < nrows; ++q) {
        // Columns [ob, oe) of output row row0 + q belong to the chunk.
        const int64_t rs = (row0 + q) * out_l;
        const int64_t ob = std::max<int64_t>(0, p0 - rs);
        const int64_t oe = std::min<int64_t>(out_l, p0 + pc - rs);
        T* dst = dcol + rs - p0;  // dst[o] for o in [ob, oe)
        if (base[q] < 0) {
          for (int64_t o = ob; o < oe; ++o) dst[o] = T(0);
          continue;
        }
        const T* src = xc + base[q] + off_l;
        const int64_t h = std::clamp(hi, ob, oe), l = std::clamp(lo, ob, h);
        for (int64_t o = ob; o < l; ++o) dst[o] = T(0);
        if (s_l == 1) {
          for (int64_t o = l; o < h; ++o) dst[o] = src[o];
        } else {
          for (int64_t o = l; o < h; ++o) dst[o] = src[o * s_l];
        }
        for (int64_t o = h; o < oe; ++o) dst[o] = T(0);
      }
    }
  }
}

// y[i] += a * x[i]; float gets AVX2 and SSE2 clones.
__attribute__((target_clones("avx2", "default"))) void axpy_f32(float* __restrict y,
                                                                const float* __restrict x, float a,
                                                                int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}
void axpy(float* y, const float* x, float a, int64_t n) {
  axpy_f32(y, x, a, n);
}
void axpy(double* y, const double* x, double a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

// Direct depthwise convolution with unit strides: the channel is copied into a zero-padded
// buffer, then every kernel tap is one long multiply-add over the flattened padded image
// (the positions that fall between output rows are computed and dropped).
template <typename T>
void depthwise_unit_stride(const SpatialGeometry& g, const T* x, const T* w, const T* bias, T* y,
                           int64_t N, int64_t C, int64_t M, ThreadPool* pool) {
  const size_t n = g.rank;
  const int64_t Mg = M / C;
  std::vector<int64_t> pd(n), pst(n);
  int64_t psize = 1, in_size = 1, P = 1, ksize = 1;
  for (size_t d = n; d-- > 0;) {
    pd[d] = g.in[d] + g.pad_begin[d] + g.pad_end[d];
    pst[d] = psize;
    psize *= pd[d];
    in_size *= g.in[d];
    P *= g.out[d];
    ksize *= g.kernel[d];
  }
  int64_t L = 1;
  for (size_t d = 0; d < n; ++d) L += (g.out[d] - 1) * pst[d];
  std::vector<int64_t> toff(static_cast<size_t>(ksize));
  for (int64_t k = 0; k < ksize; ++k) {
    int64_t r = k, off = 0;
    for (size_t d = n; d-- > 0;) {
      off += (r % g.kernel[d]) * g.dilation[d] * pst[d];
      r /= g.kernel[d];
    }
    toff[k] = off;
  }
  const size_t last = n - 1;
  const int64_t in_l = g.in[last], out_l = g.out[last];
  parallel_for(pool, N * M, 2.0 * static_cast<double>(L) * ksize, [&](int64_t b, int64_t e) {
    std::vector<T> xp(static_cast<size_t>(psize)), yf(static_cast<size_t>(L));
    std::vector<int64_t> idx(n);
    for (int64_t nm = b; nm < e; ++nm) {
      const int64_t m = nm % M, nn = nm / M;
      const T* xc = x + (nn * C + m / Mg) * in_size;
      // Zero-padded copy of the channel, row by row along the last axis.
      std::fill(xp.begin(), xp.end(), T(0));
      std::fill(idx.begin(), idx.end(), 0);
      for (int64_t r = 0; r < in_size / in_l; ++r) {
        int64_t off = 0;
        for (size_t d = 0; d < n; ++d) off += (idx[d] + g.pad_begin[d]) * pst[d];
        std::copy(xc + r * in_l, xc + (r + 1) * in_l, xp.data() + off);
        for (size_t d = last; d-- > 0;) {
          if (++idx[d] < g.in[d]) break;
          idx[d] = 0;
        }
      }
      const T b0 = bias ? bias[m] : T(0);
      T* yfp = yf.data();
      for (int64_t i = 0; i < L; ++i) yfp[i] = b0;
      const T* wm = w + m * ksize;
      for (int64_t k = 0; k < ksize; ++k) axpy(yfp, xp.data() + toff[k], wm[k], L);
      // Gather the output rows.
      T* yc = y + nm * P;
      std::fill(idx.begin(), idx.end(), 0);
      for (int64_t r = 0; r < P / out_l; ++r) {
        int64_t off = 0;
        for (size_t d = 0; d < last; ++d) off += idx[d] * pst[d];
        std::copy(yfp + off, yfp + off + out_l, yc + r * out_l);
        for (size_t d = last; d-- > 0;) {
          if (++idx[d] < g.out[d]) break;
          idx[d] = 0;
        }
      }
    }
  });
}

// Direct convolution for one input channel per group (depthwise, any channel multiplier):
// output channel m reads input channel m / Mg. Each kernel tap is applied to a whole output
// row (last axis) at a time.
template <typename T>
void depthwise(const SpatialGeometry& g, const T* x, const T* w, const T* bias, T* y, int64_t N,
               int64_t C, int64_t M, ThreadPool* pool) {
  const size_t n = g.rank;
  const size_t last = n - 1;
  const int64_t Mg = M / C;
  int64_t ksize = 1, in_size = 1, P = 1;
  for (size_t d = 0; d < n; ++d) {
    ksize *= g.kernel[d];
    in_size *= g.in[d];
    P *= g.out[d];
  }
  const int64_t out_l = g.out[last], in_l = g.in[last], s_l = g.stride[last];
  const int64_t rows = P / out_l;
  // Valid output range of each tap along the last axis (the same for every row).
  const int64_t kl_n = g.kernel[last];
  std::vector<int64_t> los(static_cast<size_t>(kl_n)), his(static_cast<size_t>(kl_n));
  for (int64_t kl = 0; kl < kl_n; ++kl)
    valid_range(kl * g.dilation[last] - g.pad_begin[last], s_l, in_l, out_l, los[kl], his[kl]);
  parallel_for(pool, N * M, 2.0 * static_cast<double>(P) * ksize, [&](int64_t b, int64_t e) {
    std::vector<int64_t> kidx(n), oi(n);
    for (int64_t nm = b; nm < e; ++nm) {
      const int64_t m = nm % M, nn = nm / M;
      const T* xc = x + (nn * C + m / Mg) * in_size;
      const T* wm = w + m * ksize;
      T* yc = y + nm * P;
      const T b0 = bias ? bias[m] : T(0);
      std::fill(oi.begin(), oi.end(), 0);
      for (int64_t q = 0; q < rows; ++q) {
        T* yr = yc + q * out_l;
        for (int64_t o = 0; o < out_l; ++o) yr[o] = b0;
        for (int64_t kf = 0; kf < ksize; kf += g.kernel[last]) {
          // Leading kernel axes of this tap group.
          int64_t r = kf / g.kernel[last];
          for (size_t d = last; d-- > 0;) {
            kidx[d] = r % g.kernel[d];
            r /= g.kernel[d];
          }
          int64_t off = 0;
          bool valid = true;
          for (size_t d = 0; d < last; ++d) {
            const int64_t ii = oi[d] * g.stride[d] - g.pad_begin[d] + kidx[d] * g.dilation[d];
            if (ii < 0 || ii >= g.in[d]) valid = false;
            off = off * g.in[d] + ii;
          }
          if (!valid) continue;
          const T* row = xc + off * in_l;
          for (int64_t kl = 0; kl < kl_n; ++kl) {
            const int64_t o_off = kl * g.dilation[last] - g.pad_begin[last];
            const int64_t lo = los[kl], hi = his[kl];
            const T wv = wm[kf + kl];
            const T* src = row + o_off;
            if (s_l == 1) {
              for (int64_t o = lo; o < hi; ++o) yr[o] += wv * src[o];
            } else {
              for (int64_t o = lo; o < hi; ++o) yr[o] += wv * src[o * s_l];
            }
          }
        }
        for (size_t d = last; d-- > 0;) {
          if (++oi[d] < g.out[d]) break;
          oi[d] = 0;
        }
      }
    }
  });
}

template <typename T>
struct ConvArgs {
  const SpatialGeometry* geo;
  const T* x;
  const T* w;                                      // unpacked weights (nullptr when packed)
  const std::vector<PackedGemmMatrix<T>>* packed;  // per group, or nullptr
  const T* bias;                                   // nullptr when absent
  T* y;
  int64_t N, C, M, group;
};

template <typename T>
void conv_compute(const ConvArgs<T>& a, ThreadPool* pool) {
  const SpatialGeometry& g = *a.geo;
  const int64_t Cg = a.C / a.group, Mg = a.M / a.group;
  int64_t ksize = 1, P = 1, in_size = 1;
  bool pointwise = true;
  for (size_t d = 0; d < g.rank; ++d) {
    ksize *= g.kernel[d];
    P *= g.out[d];
    in_size *= g.in[d];
    if (g.kernel[d] != 1 || g.stride[d] != 1 || g.pad_begin[d] != 0 || g.pad_end[d] != 0)
      pointwise = false;
  }
  const int64_t Kg = Cg * ksize;
  if (Cg == 1) {
    bool unit = true;
    for (size_t d = 0; d < g.rank; ++d) unit = unit && g.stride[d] == 1;
    if (unit) {
      depthwise_unit_stride<T>(g, a.x, a.w, a.bias, a.y, a.N, a.C, a.M, pool);
    } else {
      depthwise<T>(g, a.x, a.w, a.bias, a.y, a.N, a.C, a.M, pool);
    }
    return;
  }
  int64_t chunk = P;
  if (!pointwise) {
    // Bounded im2col buffer; whole rows of the last output axis when they fit.
    constexpr int64_t kMaxColElems = int64_t(1) << 19;
    const int64_t out_l = g.out[g.rank - 1];
    chunk = std::max<int64_t>(1, std::min<int64_t>(P, kMaxColElems / std::max<int64_t>(Kg, 1)));
    if (chunk >= out_l) {
      chunk -= chunk % out_l;
    } else if (chunk > 64) {
      chunk -= chunk % 64;
    }
  }
  const int64_t nchunks = (P + chunk - 1) / chunk;
  const int64_t tasks = a.N * a.group * nchunks;
  const int nthreads = pool ? pool->num_threads() : 1;
  const bool par_tasks = nthreads > 1 && tasks >= 2 * static_cast<int64_t>(nthreads);

  auto run_task = [&](int64_t t, ThreadPool* tp) {
    const int64_t n = t / (a.group * nchunks);
    const int64_t gi = (t / nchunks) % a.group;
    const int64_t p0 = (t % nchunks) * chunk;
    const int64_t pc = std::min(chunk, P - p0);
    const T* xg = a.x + (n * a.C + gi * Cg) * in_size;
    T* yg = a.y + (n * a.M + gi * Mg) * P;
    const T* bmat;
    int64_t ldb;
    if (pointwise) {
      bmat = xg + p0;
      ldb = in_size;
    } else {
      std::vector<T>& col = col_scratch<T>();
      if (col.size() < static_cast<size_t>(Kg * pc)) col.resize(static_cast<size_t>(Kg * pc));
      im2col<T>(xg, g, Cg, p0, pc, col.data());
      bmat = col.data();
      ldb = pc;
    }
    if (Kg == 0) {
      for (int64_t m = 0; m < Mg; ++m) std::fill(yg + m * P + p0, yg + m * P + p0 + pc, T(0));
    } else if (a.packed) {
      gemm_packed_a<T>((*a.packed)[gi], false, pc, bmat, ldb, T(1), T(0), yg + p0, P, tp);
    } else {
      gemm(false, false, Mg, pc, Kg, T(1), a.w + gi * Mg * Kg, Kg, bmat, ldb, T(0), yg + p0, P, tp);
    }
    if (a.bias) {
      for (int64_t m = 0; m < Mg; ++m) {
        const T b = a.bias[gi * Mg + m];
        T* row = yg + m * P + p0;
        for (int64_t j = 0; j < pc; ++j) row[j] += b;
      }
    }
  };
  if (par_tasks) {
    parallel_for(pool, tasks, 2.0 * static_cast<double>(Mg) * Kg * chunk,
                 [&](int64_t s, int64_t e) {
                   for (int64_t t = s; t < e; ++t) run_task(t, nullptr);
                 });
  } else {
    for (int64_t t = 0; t < tasks; ++t) run_task(t, pool);
  }
}

class Conv final : public Kernel {
 public:
  explicit Conv(const KernelInfo& info) {
    attrs_.load(info, false);
    group_ = info.attr_int("group", 1);
    if (group_ < 1)
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'group' must be >= 1, got " + std::to_string(group_));
    const Tensor* w = info.has_input(1) ? info.constant_input(1) : nullptr;
    if (!w) return;
    if (w->rank() < 3)
      info.fail(StatusCode::kInvalidGraph, "W must have rank >= 3 (M x C/group x k1 x ...), got " +
                                               shape_to_string(w->shape()));
    const size_t n = attrs_.implied_rank();
    if (n != 0 && n != w->rank() - 2)
      info.fail(StatusCode::kInvalidGraph,
                "W " + shape_to_string(w->shape()) + " has " + std::to_string(w->rank() - 2) +
                    " spatial axes but the attributes imply " + std::to_string(n));
    const int64_t M = w->dim(0);
    if (M % group_ != 0)
      info.fail(StatusCode::kInvalidGraph,
                "W " + shape_to_string(w->shape()) + ": " + std::to_string(M) +
                    " output channels are not divisible by group " + std::to_string(group_));
    // Nothing to pack when empty, or for one input channel per group (direct depthwise).
    if (w->numel() == 0 || w->dim(1) == 1) return;
    const int64_t Mg = M / group_, Kg = w->numel() / M;
    switch (w->dtype()) {
      case DataType::kFloat:
        for (int64_t g = 0; g < group_; ++g)
          packed_f32_.push_back(
              pack_gemm_a<float>(false, Mg, Kg, w->data<float>() + g * Mg * Kg, Kg));
        break;
      case DataType::kDouble:
        for (int64_t g = 0; g < group_; ++g)
          packed_f64_.push_back(
              pack_gemm_a<double>(false, Mg, Kg, w->data<double>() + g * Mg * Kg, Kg));
        break;
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        std::vector<float> f(static_cast<size_t>(w->numel()));
        convert_to_float(w->dtype(), w->raw_data(), f.data(), w->numel());
        for (int64_t g = 0; g < group_; ++g)
          packed_f32_.push_back(pack_gemm_a<float>(false, Mg, Kg, f.data() + g * Mg * Kg, Kg));
        break;
      }
      default:
        return;
    }
    packed_dtype_ = w->dtype();
    packed_shape_ = w->shape();
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = ctx.required_input(0);
    const Tensor& W = ctx.required_input(1);
    const Tensor* B = ctx.input(2);
    if (X.rank() < 3)
      ctx.fail(StatusCode::kInvalidArgument,
               "X must have rank >= 3 (N x C x D1 x ...), got " + shape_to_string(X.shape()));
    if (W.rank() != X.rank())
      ctx.fail(StatusCode::kInvalidArgument, "X " + shape_to_string(X.shape()) + " and W " +
                                                 shape_to_string(W.shape()) +
                                                 " must have the same rank");
    if (W.dtype() != X.dtype() || (B && B->dtype() != X.dtype()))
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("X, W and B must have the same element type, got X ") +
                   dtype_name(X.dtype()) + ", W " + dtype_name(W.dtype()) +
                   (B ? std::string(", B ") + dtype_name(B->dtype()) : std::string()));
    const int64_t N = X.dim(0), C = X.dim(1), M = W.dim(0);
    if (C != W.dim(1) * group_)
      ctx.fail(StatusCode::kInvalidArgument,
               "X " + shape_to_string(X.shape()) + " has " + std::to_string(C) +
                   " channels but W " + shape_to_string(W.shape()) + " expects " +
                   std::to_string(W.dim(1)) + " per group x group " + std::to_string(group_));
    if (M % group_ != 0)
      ctx.fail(StatusCode::kInvalidArgument,
               "W " + shape_to_string(W.shape()) + ": " + std::to_string(M) +
                   " output channels are not divisible by group " + std::to_string(group_));
    if (B && (B->rank() != 1 || B->dim(0) != M))
      ctx.fail(StatusCode::kInvalidArgument,
               "B " + shape_to_string(B->shape()) + " must be 1-D with " + std::to_string(M) +
                   " elements (W " + shape_to_string(W.shape()) + ")");
    const std::vector<int64_t> in(X.shape().begin() + 2, X.shape().end());
    const std::vector<int64_t> kernel(W.shape().begin() + 2, W.shape().end());
    const SpatialGeometry geo = conv_geometry(ctx, attrs_, in, kernel);
    Shape yshape{N, M};
    yshape.insert(yshape.end(), geo.out.begin(), geo.out.end());
    Tensor& Y = ctx.allocate_output(0, X.dtype(), yshape);
    if (Y.numel() == 0) return;
    const bool use_packed = packed_dtype_ == W.dtype() && packed_shape_ == W.shape();
    ThreadPool* pool = ctx.thread_pool();
    switch (X.dtype()) {
      case DataType::kFloat: {
        ConvArgs<float> a{&geo,
                          X.data<float>(),
                          W.data<float>(),
                          use_packed ? &packed_f32_ : nullptr,
                          B ? B->data<float>() : nullptr,
                          Y.data<float>(),
                          N,
                          C,
                          M,
                          group_};
        conv_compute<float>(a, pool);
        return;
      }
      case DataType::kDouble: {
        ConvArgs<double> a{&geo,
                           X.data<double>(),
                           W.data<double>(),
                           use_packed ? &packed_f64_ : nullptr,
                           B ? B->data<double>() : nullptr,
                           Y.data<double>(),
                           N,
                           C,
                           M,
                           group_};
        conv_compute<double>(a, pool);
        return;
      }
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        std::vector<float> x(static_cast<size_t>(X.numel())), y(static_cast<size_t>(Y.numel()));
        std::vector<float> w, b;
        convert_to_float(X.dtype(), X.raw_data(), x.data(), X.numel());
        if (!use_packed) {
          w.resize(static_cast<size_t>(W.numel()));
          convert_to_float(W.dtype(), W.raw_data(), w.data(), W.numel());
        }
        if (B) {
          b.resize(static_cast<size_t>(B->numel()));
          convert_to_float(B->dtype(), B->raw_data(), b.data(), B->numel());
        }
        ConvArgs<float> a{&geo,
                          x.data(),
                          w.data(),
                          use_packed ? &packed_f32_ : nullptr,
                          B ? b.data() : nullptr,
                          y.data(),
                          N,
                          C,
                          M,
                          group_};
        conv_compute<float>(a, pool);
        convert_from_float(Y.dtype(), y.data(), Y.raw_data(), Y.numel());
        return;
      }
      default:
        ctx.fail(StatusCode::kNotImplemented,
                 std::string("Conv: element type ") + dtype_name(X.dtype()) + " is not supported");
    }
  }

 private:
  SpatialAttrs attrs_;
  int64_t group_ = 1;
  std::vector<PackedGemmMatrix<float>> packed_f32_;
  std::vector<PackedGemmMatrix<double>> packed_f64_;
  DataType packed_dtype_ = DataType::kUndefined;
  Shape packed_shape_;
};

}  // namespace

void register_conv(KernelRegistry& r) {
  // 1 and 11 differ only in documentation of defaults; 22 adds bfloat16.
  r.add("", "Conv", 1, 10, make_factory<Conv>());
  r.add("", "Conv", 11, 21, make_factory<Conv>());
  r.add("", "Conv", 22, kMaxOpset, make_factory<Conv>());
}

}  // namespace nn
}  // namespace ortlite
