// BatchNormalization (opset 7, 9, 14, 15 signatures; inference, and training_mode = 1 from
// opset 14), LayerNormalization (opset 17) and InstanceNormalization (opset 6, 22). float16 /
// bfloat16 compute in float; statistics accumulate in double.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "providers/shared/broadcast_shape.h"
#include "providers/cpu/nn/nn_common.h"
#include "providers/shared/norm_attrs.h"
#include "compute/cpu_avx512.h"
#include "compute/simd.h"

namespace ortlite {
namespace nn {
namespace {

// Reads any floating-point tensor as a vector of T.
template <typename T>
std::vector<T> read_as(const Tensor& t) {
  std::vector<T> out(static_cast<size_t>(t.numel()));
  switch (t.dtype()) {
    case DataType::kFloat: {
      const float* p = t.data<float>();
      for (int64_t i = 0; i < t.numel(); ++i) out[i] = static_cast<T>(p[i]);
      break;
    }
    case DataType::kDouble: {
      const double* p = t.data<double>();
      for (int64_t i = 0; i < t.numel(); ++i) out[i] = static_cast<T>(p[i]);
      break;
    }
    default: {
      std::vector<float> f(out.size());
      convert_to_float(t.dtype(), t.raw_data(), f.data(), t.numel());
      for (size_t i = 0; i < f.size(); ++i) out[i] = static_cast<T>(f[i]);
      break;
    }
  }
  return out;
}

// Writes `v` into t (float, double, float16 or bfloat16; as many elements).
void write_from_double(const std::vector<double>& v, Tensor& t) {
  switch (t.dtype()) {
    case DataType::kFloat: {
      float* p = t.data<float>();
      for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<float>(v[i]);
      break;
    }
    case DataType::kDouble:
      std::copy(v.begin(), v.end(), t.data<double>());
      break;
    default: {
      std::vector<float> f(v.begin(), v.end());
      convert_from_float(t.dtype(), f.data(), t.raw_data(), t.numel());
      break;
    }
  }
}

// Runs fn(x, y) with T = float or double: float16 / bfloat16 go through float buffers.
template <typename Fn>
void with_real_buffers(const Tensor& X, Tensor& Y, Fn&& fn) {
  switch (X.dtype()) {
    case DataType::kFloat:
      fn(X.data<float>(), Y.data<float>());
      return;
    case DataType::kDouble:
      fn(X.data<double>(), Y.data<double>());
      return;
    default: {
      std::vector<float> x(static_cast<size_t>(X.numel())), y(static_cast<size_t>(Y.numel()));
      convert_to_float(X.dtype(), X.raw_data(), x.data(), X.numel());
      fn(static_cast<const float*>(x.data()), y.data());
      convert_from_float(Y.dtype(), y.data(), Y.raw_data(), Y.numel());
      return;
    }
  }
}

// Mean and 1 / sqrt(variance + eps) of n values (two passes; float sums in 16 lanes). The
// first pass sums x - x[0]: the float sums of a row far from zero (values around 1e4) lost
// the mean's low bits, an error of 1e-3 in every output.
ORTLITE_NN_CLONES void row_moments_f32(const float* x, int64_t n, double eps, double* mean,
                                       double* inv) {
  const float x0 = x[0];
  v8sf s0 = {}, s1 = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    v8sf a, b;
    load8(x + i, a);
    load8(x + i + 8, b);
    s0 += a - x0;
    s1 += b - x0;
  }
  double sum = hsum8(s0 + s1);
  for (; i < n; ++i) sum += static_cast<double>(x[i]) - static_cast<double>(x0);
  const double m = static_cast<double>(x0) + sum / static_cast<double>(n);
  const float mf = static_cast<float>(m);
  v8sf q0 = {}, q1 = {};
  for (i = 0; i + 16 <= n; i += 16) {
    v8sf a, b;
    load8(x + i, a);
    load8(x + i + 8, b);
    a -= mf;
    b -= mf;
    q0 += a * a;
    q1 += b * b;
  }
  double sq = hsum8(q0 + q1);
  for (; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - static_cast<double>(mf);
    sq += d * d;
  }
  // Deviations were taken from mf, not m: sum (x - mf)^2 = sum (x - m)^2 + n (m - mf)^2.
  const double dm = static_cast<double>(mf) - m;
  sq = sq - static_cast<double>(n) * dm * dm;
  *mean = m;
  *inv = 1.0 / std::sqrt(std::max(0.0, sq / static_cast<double>(n)) + eps);
}

void row_moments(const float* x, int64_t n, double eps, double* mean, double* inv) {
  row_moments_f32(x, n, eps, mean, inv);
}

void row_moments(const double* x, int64_t n, double eps, double* mean, double* inv) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double m = sum / static_cast<double>(n);
  double sq = 0;
  for (int64_t i = 0; i < n; ++i) sq += (x[i] - m) * (x[i] - m);
  *mean = m;
  *inv = 1.0 / std::sqrt(sq / static_cast<double>(n) + eps);
}

#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
#pragma GCC diagnostic push
// GCC 12's AVX-512 headers start some intrinsics from an undefined vector.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Rows of at most kShortNorm floats, `rows` of them n apart, normalized in one call: a row
// in up to four registers (the last masked), widened to double, its mean and variance in
// two passes over the registers, and the affine step in double, rounded once. Instance
// normalization (row_scale set): y = (x - mean) * a + b with a = inv * row_scale[c] and
// b = row_bias[c], c stepping from c0 through C channels. Layer normalization: y = (x -
// mean) * inv * scale[i] (+ bias[i]). Row by row through row_moments and the float apply
// loop, a row of 24 took about 35 ns (its tails scalar, two calls and a modulo); in double
// a row far from zero keeps the bits its float mean would round off.
constexpr int64_t kShortNorm = 64;
ORTLITE_AVX512 inline __attribute__((always_inline)) __m512 narrow_pd(__m512d lo, __m512d hi) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
}
ORTLITE_AVX512 inline __attribute__((always_inline)) __m512d widen_lo(__m512 v) {
  return _mm512_cvtps_pd(_mm512_castps512_ps256(v));
}
ORTLITE_AVX512 inline __attribute__((always_inline)) __m512d widen_hi(__m512 v) {
  return _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1));
}
ORTLITE_AVX512 void norm_short_rows_f32(const float* x, float* y, int64_t rows, int64_t n,
                                        double eps, const float* row_scale, const float* row_bias,
                                        int64_t C, int64_t c0, const float* scale,
                                        const float* bias, float* mean_out, float* inv_out) {
  const int64_t nv = (n + 15) / 16;
  const __mmask16 tail = static_cast<__mmask16>(n % 16 ? (1u << (n % 16)) - 1 : 0xFFFFu);
  const __m512d rn = _mm512_set1_pd(1.0 / static_cast<double>(n));
  __m512d sl[4], sh[4], bl[4], bh[4];
  for (int64_t k = 0; k < nv; ++k) {
    const __mmask16 m = k + 1 < nv ? static_cast<__mmask16>(0xFFFF) : tail;
    const __m512 sv = scale ? _mm512_maskz_loadu_ps(m, scale + 16 * k) : _mm512_setzero_ps();
    const __m512 bv = bias ? _mm512_maskz_loadu_ps(m, bias + 16 * k) : _mm512_setzero_ps();
    sl[k] = widen_lo(sv);
    sh[k] = widen_hi(sv);
    bl[k] = widen_lo(bv);
    bh[k] = widen_hi(bv);
  }
  int64_t c = c0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xp = x + r * n;
    float* yp = y + r * n;
    __m512d lo[4], hi[4];
    __m512d sum = _mm512_setzero_pd();
#pragma GCC unroll 4
    for (int64_t k = 0; k < 4; ++k) {
      if (k >= nv) break;
      const __mmask16 m = k + 1 < nv ? static_cast<__mmask16>(0xFFFF) : tail;
      const __m512 v = _mm512_maskz_loadu_ps(m, xp + 16 * k);
      lo[k] = widen_lo(v);
      hi[k] = widen_hi(v);
      sum = _mm512_add_pd(sum, _mm512_add_pd(lo[k], hi[k]));
    }
    const double mean = _mm512_reduce_add_pd(_mm512_mul_pd(sum, rn));
    const __m512d md = _mm512_set1_pd(mean);
    __m512d sq = _mm512_setzero_pd();
#pragma GCC unroll 4
    for (int64_t k = 0; k < 4; ++k) {
      if (k >= nv) break;
      const __mmask16 m = k + 1 < nv ? static_cast<__mmask16>(0xFFFF) : tail;
      lo[k] = _mm512_maskz_sub_pd(static_cast<__mmask8>(m), lo[k], md);
      hi[k] = _mm512_maskz_sub_pd(static_cast<__mmask8>(m >> 8), hi[k], md);
      sq = _mm512_add_pd(sq,
                         _mm512_add_pd(_mm512_mul_pd(lo[k], lo[k]), _mm512_mul_pd(hi[k], hi[k])));
    }
    const double inv =
        1.0 / std::sqrt(std::max(0.0, _mm512_reduce_add_pd(sq) / static_cast<double>(n)) + eps);
    if (row_scale) {
      const __m512d a = _mm512_set1_pd(inv * static_cast<double>(row_scale[c]));
      const __m512d b = _mm512_set1_pd(static_cast<double>(row_bias[c]));
      c = c + 1 == C ? 0 : c + 1;
#pragma GCC unroll 4
      for (int64_t k = 0; k < 4; ++k) {
        if (k >= nv) break;
        const __mmask16 m = k + 1 < nv ? static_cast<__mmask16>(0xFFFF) : tail;
        _mm512_mask_storeu_ps(yp + 16 * k, m,
                              narrow_pd(_mm512_add_pd(_mm512_mul_pd(lo[k], a), b),
                                        _mm512_add_pd(_mm512_mul_pd(hi[k], a), b)));
      }
    } else {
      const __m512d iv = _mm512_set1_pd(inv);
#pragma GCC unroll 4
      for (int64_t k = 0; k < 4; ++k) {
        if (k >= nv) break;
        const __mmask16 m = k + 1 < nv ? static_cast<__mmask16>(0xFFFF) : tail;
        const __m512d tl = _mm512_add_pd(_mm512_mul_pd(_mm512_mul_pd(lo[k], iv), sl[k]), bl[k]);
        const __m512d th = _mm512_add_pd(_mm512_mul_pd(_mm512_mul_pd(hi[k], iv), sh[k]), bh[k]);
        _mm512_mask_storeu_ps(yp + 16 * k, m, narrow_pd(tl, th));
      }
      if (mean_out) mean_out[r] = static_cast<float>(mean);
      if (inv_out) inv_out[r] = static_cast<float>(inv);
    }
  }
}
#pragma GCC diagnostic pop
#endif

// y = ((x - mean) - rest) * inv * scale (+ bias): mean is the row's mean rounded to float
// and rest the part rounding dropped (x - mean is exact near the mean; on a row far from
// zero the dropped part was an error of every element, 4e-4 on rows around 1e4).
ORTLITE_NN_CLONES void ln_apply_f32(const float* __restrict x, float* __restrict y, int64_t n,
                                    float mean, float rest, float inv,
                                    const float* __restrict scale, const float* __restrict bias) {
  if (bias) {
    for (int64_t i = 0; i < n; ++i) y[i] = ((x[i] - mean) - rest) * inv * scale[i] + bias[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = ((x[i] - mean) - rest) * inv * scale[i];
  }
}

void ln_apply(const float* x, float* y, int64_t n, double mean, double inv, const float* scale,
              const float* bias) {
  const float mf = static_cast<float>(mean);
  ln_apply_f32(x, y, n, mf, static_cast<float>(mean - static_cast<double>(mf)),
               static_cast<float>(inv), scale, bias);
}

void ln_apply(const double* x, double* y, int64_t n, double mean, double inv, const double* scale,
              const double* bias) {
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * inv * scale[i] + (bias ? bias[i] : 0.0);
}

// ---------------------------------------------------------------------------------------

// y = x * a + b over n floats, for each ISA (the baseline build's loop stored 16 bytes at a
// time: a BatchNormalization of 1x64x112x112 alone took 0.75x onnxruntime's time). Product
// and sum rounded separately, as the baseline loop and onnxruntime compute them (no FMA).
ORTLITE_NN_CLONES512 __attribute__((optimize("fp-contract=off"))) void affine_f32(
    const float* __restrict x, float* __restrict y, int64_t n, float a, float b) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * a + b;
}

class BatchNorm final : public Kernel {
 public:
  explicit BatchNorm(const KernelInfo& info) { attrs_.load(info, /*allow_training=*/true); }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = ctx.required_input(0);
    const Tensor* params[4] = {&ctx.required_input(1), &ctx.required_input(2),
                               &ctx.required_input(3), &ctx.required_input(4)};
    attrs_.check_x(ctx, X);
    if (!is_float_type(X.dtype()))
      ctx.fail(StatusCode::kNotImplemented,
               std::string("element type ") + dtype_name(X.dtype()) + " is not supported");
    for (size_t i = 0; i < 4; ++i) attrs_.check_param(ctx, X, *params[i], i);
    if (attrs_.training) return compute_training(ctx, X, params);
    const int64_t N = X.dim(0), C = X.dim(1);
    int64_t inner = 1;
    for (size_t i = 2; i < X.rank(); ++i) inner *= X.dim(i);
    const int64_t count = attrs_.param_count(X);
    Tensor& Y = ctx.allocate_output(0, X.dtype(), X.shape());
    if (Y.numel() == 0) return;
    ThreadPool* pool = ctx.thread_pool();
    with_real_buffers(X, Y, [&](auto* x, auto* y) {
      using T = std::remove_cv_t<std::remove_pointer_t<decltype(y)>>;
      const std::vector<T> scale = read_as<T>(*params[0]), bias = read_as<T>(*params[1]),
                           mean = read_as<T>(*params[2]), var = read_as<T>(*params[3]);
      // y = x * a + b with a = scale / sqrt(var + eps), b = bias - mean * a.
      std::vector<T> a(static_cast<size_t>(count)), b(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) {
        const T inv_std = T(1) / std::sqrt(var[i] + static_cast<T>(attrs_.epsilon));
        a[i] = inv_std * scale[i];
        b[i] = bias[i] - mean[i] * a[i];
      }
      parallel_for(pool, N * C, static_cast<double>(inner), [&](int64_t s, int64_t e) {
        for (int64_t nc = s; nc < e; ++nc) {
          const int64_t c = nc % C;
          const T* xp = x + nc * inner;
          T* yp = y + nc * inner;
          if (attrs_.spatial) {
            const T ac = a[c], bc = b[c];
            if constexpr (std::is_same_v<T, float>) {
              if (xp + inner <= yp || yp + inner <= xp) {
                affine_f32(xp, yp, inner, ac, bc);
                continue;
              }
            }
            for (int64_t i = 0; i < inner; ++i) yp[i] = xp[i] * ac + bc;
          } else {
            const T* ap = a.data() + c * inner;
            const T* bp = b.data() + c * inner;
            for (int64_t i = 0; i < inner; ++i) yp[i] = xp[i] * ap[i] + bp[i];
          }
        }
      });
    });
  }

 private:
  // training_mode = 1 (opset 14+): Y normalized with the batch's statistics, per channel c
  // over every axis but 1: mean_c and the population variance var_c (divided by the count,
  // not count - 1), accumulated in double in two passes (the mean, then the squared
  // deviations from it). Y = (X - mean_c) / sqrt(var_c + epsilon) * scale_c + B_c, each
  // element in double, rounded once. The optional outputs running_mean / running_var
  // (input_mean's and input_var's element type) are input_mean * momentum + mean * (1 -
  // momentum), and likewise for the variance.
  // X and params as compute() checked them.
  void compute_training(KernelContext& ctx, const Tensor& X, const Tensor* const* params) const {
    const int64_t N = X.dim(0), C = X.dim(1);
    int64_t inner = 1;
    for (size_t i = 2; i < X.rank(); ++i) inner *= X.dim(i);
    Tensor& Y = ctx.allocate_output(0, X.dtype(), X.shape());
    Tensor* running[2] = {nullptr, nullptr};
    for (size_t k = 0; k < 2; ++k)
      if (ctx.num_outputs() > k + 1 && !ctx.node().outputs[k + 1].empty())
        running[k] = &ctx.allocate_output(k + 1, params[2 + k]->dtype(), {C});
    const std::vector<double> scale = read_as<double>(*params[0]),
                              bias = read_as<double>(*params[1]);
    // An empty batch (N or a spatial dim 0) has no statistics: 0 / 0, NaN, as numpy's mean.
    const double count = static_cast<double>(N) * static_cast<double>(inner);
    std::vector<double> mean(static_cast<size_t>(C)), var(static_cast<size_t>(C));
    ThreadPool* pool = ctx.thread_pool();
    with_real_buffers(X, Y, [&](auto* x, auto* y) {
      using T = std::remove_cv_t<std::remove_pointer_t<decltype(y)>>;
      parallel_for(pool, C, 3.0 * count, [&](int64_t s, int64_t e) {
        for (int64_t c = s; c < e; ++c) {
          double sum = 0;
          for (int64_t n = 0; n < N; ++n) {
            const T* xp = x + (n * C + c) * inner;
            for (int64_t i = 0; i < inner; ++i) sum += static_cast<double>(xp[i]);
          }
          const double m = sum / count;
          double sq = 0;
          for (int64_t n = 0; n < N; ++n) {
            const T* xp = x + (n * C + c) * inner;
            for (int64_t i = 0; i < inner; ++i) {
              const double d = static_cast<double>(xp[i]) - m;
              sq += d * d;
            }
          }
          mean[c] = m;
          var[c] = sq / count;
        }
      });
      if (Y.numel() == 0) return;
      parallel_for(pool, N * C, 2.0 * static_cast<double>(inner), [&](int64_t s, int64_t e) {
        for (int64_t nc = s; nc < e; ++nc) {
          const int64_t c = nc % C;
          const double m = mean[c], b = bias[c];
          const double a = scale[c] / std::sqrt(var[c] + static_cast<double>(attrs_.epsilon));
          const T* xp = x + nc * inner;
          T* yp = y + nc * inner;
          for (int64_t i = 0; i < inner; ++i)
            yp[i] = static_cast<T>((static_cast<double>(xp[i]) - m) * a + b);
        }
      });
    });
    const double mom = static_cast<double>(attrs_.momentum);
    for (size_t k = 0; k < 2; ++k) {
      if (!running[k]) continue;
      const std::vector<double> prev = read_as<double>(*params[2 + k]);
      const std::vector<double>& batch = k == 0 ? mean : var;
      std::vector<double> out(static_cast<size_t>(C));
      for (int64_t c = 0; c < C; ++c) out[c] = prev[c] * mom + batch[c] * (1.0 - mom);
      write_from_double(out, *running[k]);
    }
  }

  BatchNormAttrs attrs_;
};

// ---------------------------------------------------------------------------------------

// Expands Scale / B (broadcast unidirectionally to `target`, or with exactly as many elements)
// into a contiguous vector of T.
template <typename T>
std::vector<T> expand_param(const KernelContext& ctx, const Tensor& p, const Shape& target,
                            const char* what) {
  const int64_t size = shape_size(target);
  std::vector<T> values = read_as<T>(p);
  check_norm_param(ctx, p, target, what);
  if (p.numel() == size) return values;
  const std::vector<int64_t> st = broadcast_strides(p.shape(), target);
  std::vector<T> out(static_cast<size_t>(size));
  std::vector<int64_t> idx(target.size(), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < size; ++i) {
    out[i] = values[off];
    for (size_t d = target.size(); d-- > 0;) {
      ++idx[d];
      off += st[d];
      if (idx[d] < target[d]) break;
      off -= st[d] * idx[d];
      idx[d] = 0;
    }
  }
  return out;
}

class LayerNorm final : public Kernel {
 public:
  explicit LayerNorm(const KernelInfo& info) { attrs_.load(info); }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = ctx.required_input(0);
    const Tensor& S = ctx.required_input(1);
    const Tensor* B = ctx.input(2);
    if (!is_float_type(X.dtype()))
      ctx.fail(StatusCode::kNotImplemented,
               std::string("element type ") + dtype_name(X.dtype()) + " is not supported");
    const LayerNormDims d = layer_norm_dims(ctx, attrs_, X, S, B);
    const Shape& norm_shape = d.norm_shape;
    const int64_t outer = d.outer, norm = d.norm;
    const Shape& stat_shape = d.stat_shape;

    Tensor& Y = ctx.allocate_output(0, X.dtype(), X.shape());
    float* mean_out = nullptr;
    float* inv_out = nullptr;
    if (ctx.num_outputs() > 1 && !ctx.node().outputs[1].empty())
      mean_out = ctx.allocate_output(1, DataType::kFloat, stat_shape).data<float>();
    if (ctx.num_outputs() > 2 && !ctx.node().outputs[2].empty())
      inv_out = ctx.allocate_output(2, DataType::kFloat, stat_shape).data<float>();
    if (X.numel() == 0) return;
    ThreadPool* pool = ctx.thread_pool();
    with_real_buffers(X, Y, [&](auto* x, auto* y) {
      using T = std::remove_cv_t<std::remove_pointer_t<decltype(y)>>;
      const std::vector<T> scale = expand_param<T>(ctx, S, norm_shape, "Scale");
      std::vector<T> bias;
      if (B) bias = expand_param<T>(ctx, *B, norm_shape, "B");
      parallel_for(pool, outer, 4.0 * static_cast<double>(norm), [&](int64_t s, int64_t e) {
#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
        if constexpr (std::is_same_v<T, float>) {
          if (norm <= kShortNorm && cpu_has_avx512())
            return norm_short_rows_f32(
                x + s * norm, y + s * norm, e - s, norm, static_cast<double>(attrs_.epsilon),
                nullptr, nullptr, 1, 0, scale.data(), B ? bias.data() : nullptr,
                mean_out ? mean_out + s : nullptr, inv_out ? inv_out + s : nullptr);
        }
#endif
        for (int64_t r = s; r < e; ++r) {
          const T* xp = x + r * norm;
          T* yp = y + r * norm;
          double mean, inv;
          row_moments(xp, norm, static_cast<double>(attrs_.epsilon), &mean, &inv);
          ln_apply(xp, yp, norm, mean, inv, scale.data(), B ? bias.data() : nullptr);
          if (mean_out) mean_out[r] = static_cast<float>(mean);
          if (inv_out) inv_out[r] = static_cast<float>(inv);
        }
      });
    });
  }

 private:
  LayerNormAttrs attrs_;
};

// ---------------------------------------------------------------------------------------

class InstanceNorm final : public Kernel {
 public:
  explicit InstanceNorm(const KernelInfo& info) : epsilon_(info.attr_float("epsilon", 1e-5f)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& X = ctx.required_input(0);
    const Tensor& S = ctx.required_input(1);
    const Tensor& B = ctx.required_input(2);
    check_instance_norm_x(ctx, X);
    if (!is_float_type(X.dtype()))
      ctx.fail(StatusCode::kNotImplemented,
               std::string("element type ") + dtype_name(X.dtype()) + " is not supported");
    const int64_t N = X.dim(0), C = X.dim(1);
    check_instance_norm_params(ctx, X, S, B);
    int64_t inner = 1;
    for (size_t i = 2; i < X.rank(); ++i) inner *= X.dim(i);
    Tensor& Y = ctx.allocate_output(0, X.dtype(), X.shape());
    if (Y.numel() == 0) return;
    ThreadPool* pool = ctx.thread_pool();
    with_real_buffers(X, Y, [&](auto* x, auto* y) {
      using T = std::remove_cv_t<std::remove_pointer_t<decltype(y)>>;
      const std::vector<T> scale = read_as<T>(S), bias = read_as<T>(B);
      parallel_for(pool, N * C, 4.0 * static_cast<double>(inner), [&](int64_t s, int64_t e) {
#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
        if constexpr (std::is_same_v<T, float>) {
          if (inner <= kShortNorm && cpu_has_avx512())
            return norm_short_rows_f32(x + s * inner, y + s * inner, e - s, inner,
                                       static_cast<double>(epsilon_), scale.data(), bias.data(), C,
                                       s % C, nullptr, nullptr, nullptr, nullptr);
        }
#endif
        for (int64_t nc = s; nc < e; ++nc) {
          const int64_t c = nc % C;
          const T* xp = x + nc * inner;
          T* yp = y + nc * inner;
          double mean, inv;
          row_moments(xp, inner, static_cast<double>(epsilon_), &mean, &inv);
          // (x - m) * a + b with m the mean rounded to T and b taking in what rounding
          // dropped: - (mean - m) * a (an error of every element of a row far from zero).
          const double ad = inv * static_cast<double>(scale[c]);
          const T a = static_cast<T>(ad), m = static_cast<T>(mean);
          const T b =
              static_cast<T>(static_cast<double>(bias[c]) - (mean - static_cast<double>(m)) * ad);
          for (int64_t i = 0; i < inner; ++i) yp[i] = (xp[i] - m) * a + b;
        }
      });
    });
  }

 private:
  float epsilon_;
};

}  // namespace

void register_normalization(KernelRegistry& r) {
  // BatchNormalization: 7 (spatial attr, optional training outputs), 9 (no spatial),
  // 14 (training_mode attr; running_mean / running_var outputs), 15 (separate param types).
  r.add("", "BatchNormalization", 7, 8, make_factory<BatchNorm>());
  r.add("", "BatchNormalization", 9, 13, make_factory<BatchNorm>());
  r.add("", "BatchNormalization", 14, 14, make_factory<BatchNorm>());
  r.add("", "BatchNormalization", 15, kMaxOpset, make_factory<BatchNorm>());
  r.add("", "LayerNormalization", 17, kMaxOpset, make_factory<LayerNorm>());
  r.add("", "InstanceNormalization", 6, 21, make_factory<InstanceNorm>());
  r.add("", "InstanceNormalization", 22, kMaxOpset, make_factory<InstanceNorm>());
}

}  // namespace nn
}  // namespace ortlite
