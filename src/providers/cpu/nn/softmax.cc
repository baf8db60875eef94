// Softmax and LogSoftmax (opset 1, 11, 13).
//   opset < 13: the input is coerced to 2-D at `axis` (default 1): each row covers all of
//               shape[axis:].
//   opset >= 13: along the single dimension `axis` (default -1).
// float uses a branch-free exp that the compiler vectorizes; double uses std::exp;
// float16 / bfloat16 compute in float.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "compute/fast_kernels.h"
#include "providers/cpu/nn/nn_common.h"
#include "compute/simd.h"

namespace ortlite {
namespace nn {
namespace {

// exp(x) for x <= 88 (Cephes-style range reduction and polynomial, ~1 ulp). Softmax only
// feeds it x - max(x) <= 0. Below ln(FLT_MIN) the result is 0; NaN propagates.
constexpr float kExpLo = -87.3365478515625f;  // ln(FLT_MIN)
constexpr float kExpHi = 88.0f;

inline float exp_f(float x) {
  float xc = x > kExpHi ? kExpHi : x;
  xc = (xc < kExpLo || xc != xc) ? kExpLo : xc;  // NaN: computed on kLo, restored below
  const float n = (xc * 1.44269504088896341f + 12582912.f) - 12582912.f;  // round(x / ln 2)
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  const float res = p * scale;
  return x != x ? x : (x < kExpLo ? 0.0f : res);
}

// The same on 8 lanes.
ORTLITE_NN_INLINE void exp8(const v8sf& x, v8sf& out) {
  const v8sf zero = {};
  const v8sf lo = zero + kExpLo, hi = zero + kExpHi;
  v8sf xc = x > hi ? hi : x;
  xc = (xc < lo || xc != xc) ? lo : xc;  // NaN lanes: computed on lo, restored below
  const v8sf n = (xc * 1.44269504088896341f + 12582912.f) - 12582912.f;
  v8sf r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  v8sf p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const v8si bits = (__builtin_convertvector(n, v8si) + 127) << 23;
  const v8sf res = p * (v8sf)bits;  // same-size vector cast: reinterprets the bits
  out = x != x ? x : (x < lo ? zero : res);
}

// Softmax / LogSoftmax of one contiguous float row: fast::softmax (AVX-512 where the CPU
// has it: the maximum, exp(x - max) with its sum in one pass, the normalization).
void softmax_row_f32(const float* x, float* y, int64_t n, bool log) {
  fast::softmax(x, y, n, log);
}

// A [dim x inner] float block of fewer than 8 columns, normalized along dim for every
// column; mx and sum are scratch of `inner` floats.
void softmax_narrow_f32(const float* x, float* y, int64_t dim, int64_t inner, bool log, float* mx,
                        float* sum) {
  for (int64_t j = 0; j < inner; ++j) mx[j] = x[j];
  for (int64_t d = 1; d < dim; ++d) {
    const float* xr = x + d * inner;
    for (int64_t j = 0; j < inner; ++j) mx[j] = xr[j] > mx[j] ? xr[j] : mx[j];
  }
  for (int64_t j = 0; j < inner; ++j) sum[j] = 0;
  for (int64_t d = 0; d < dim; ++d) {
    const float* xr = x + d * inner;
    float* yr = y + d * inner;
    for (int64_t j = 0; j < inner; ++j) {
      yr[j] = exp_f(xr[j] - mx[j]);
      sum[j] += yr[j];
    }
  }
  if (log) {
    // (x - max) - ln sum: x - (max + ln sum) lost the low bits of ln sum next to a large max.
    for (int64_t j = 0; j < inner; ++j) sum[j] = std::log(sum[j]);
    for (int64_t d = 0; d < dim; ++d)
      for (int64_t j = 0; j < inner; ++j) y[d * inner + j] = (x[d * inner + j] - mx[j]) - sum[j];
  } else {
    for (int64_t j = 0; j < inner; ++j) sum[j] = 1.0f / sum[j];
    for (int64_t d = 0; d < dim; ++d)
      for (int64_t j = 0; j < inner; ++j) y[d * inner + j] *= sum[j];
  }
}

// N vectors of 8 columns from x / y (column j of row 0 of a [dim x inner] block),
// normalized along dim: the max, the exps with their sums, then the scale or the log form,
// each a pass down the rows with the column state in registers: the passes run over a
// strip of the block that stays in cache, and no column state goes through memory from row
// to row (a row's load of state the row before stored waits for that store).
template <int N>
ORTLITE_NN_INLINE void softmax_cols8(const float* x, float* y, int64_t dim, int64_t inner,
                                     bool log) {
  v8sf m[N], s[N], v, e;
  for (int k = 0; k < N; ++k) load8(x + 8 * k, m[k]);
  for (int64_t d = 1; d < dim; ++d)
    for (int k = 0; k < N; ++k) {
      load8(x + d * inner + 8 * k, v);
      m[k] = v > m[k] ? v : m[k];
    }
  for (int k = 0; k < N; ++k) s[k] = v8sf{};
  for (int64_t d = 0; d < dim; ++d)
    for (int k = 0; k < N; ++k) {
      load8(x + d * inner + 8 * k, v);
      exp8(v - m[k], e);
      if (!log) store8(y + d * inner + 8 * k, e);
      s[k] = s[k] + e;
    }
  if (log) {
    for (int k = 0; k < N; ++k)
      for (int l = 0; l < 8; ++l) s[k][l] = std::log(s[k][l]);
    for (int64_t d = 0; d < dim; ++d)
      for (int k = 0; k < N; ++k) {
        load8(x + d * inner + 8 * k, v);
        store8(y + d * inner + 8 * k, (v - m[k]) - s[k]);
      }
  } else {
    for (int k = 0; k < N; ++k) s[k] = 1.0f / s[k];
    for (int64_t d = 0; d < dim; ++d)
      for (int k = 0; k < N; ++k) {
        load8(y + d * inner + 8 * k, v);
        store8(y + d * inner + 8 * k, v * s[k]);
      }
  }
}

// Columns [j0, j1) (at least 8) of a [dim x inner] float block, normalized along dim:
// groups of 32 columns, then 8 at a time; the last (j1 - j0) % 8 take one vector ending at
// j1, done first, whose first lanes the groups after it overwrite with the same values.
ORTLITE_NN_CLONES void softmax_columns_f32(const float* x, float* y, int64_t dim, int64_t inner,
                                           int64_t j0, int64_t j1, bool log) {
  const int64_t full = j0 + (j1 - j0) / 8 * 8;
  if (full < j1) softmax_cols8<1>(x + j1 - 8, y + j1 - 8, dim, inner, log);
  int64_t j = j0;
  for (; j + 32 <= full; j += 32) softmax_cols8<4>(x + j, y + j, dim, inner, log);
  switch ((full - j) / 8) {
    case 3:
      return softmax_cols8<3>(x + j, y + j, dim, inner, log);
    case 2:
      return softmax_cols8<2>(x + j, y + j, dim, inner, log);
    case 1:
      return softmax_cols8<1>(x + j, y + j, dim, inner, log);
    default:
      return;
  }
}

template <typename T>
T sum_of(const T* v, int64_t n) {
  T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += v[i + j];
  T s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += v[i];
  return s;
}

// double: one contiguous row.
void softmax_row(const double* x, double* y, int64_t n, bool log) {
  double m = x[0];
  for (int64_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i] - m);
  const double s = sum_of(y, n);
  if (log) {
    const double ls = std::log(s);
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) - ls;
  } else {
    const double inv = 1.0 / s;
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
  }
}
void softmax_row(const float* x, float* y, int64_t n, bool log) {
  softmax_row_f32(x, y, n, log);
}

// double: a [dim x inner] block.
void softmax_strided(const double* x, double* y, int64_t dim, int64_t inner, bool log, double* mx,
                     double* sum) {
  for (int64_t j = 0; j < inner; ++j) mx[j] = x[j];
  for (int64_t d = 1; d < dim; ++d)
    for (int64_t j = 0; j < inner; ++j) mx[j] = x[d * inner + j] > mx[j] ? x[d * inner + j] : mx[j];
  for (int64_t j = 0; j < inner; ++j) sum[j] = 0;
  for (int64_t d = 0; d < dim; ++d)
    for (int64_t j = 0; j < inner; ++j) {
      y[d * inner + j] = std::exp(x[d * inner + j] - mx[j]);
      sum[j] += y[d * inner + j];
    }
  for (int64_t j = 0; j < inner; ++j) sum[j] = log ? std::log(sum[j]) : 1.0 / sum[j];
  for (int64_t d = 0; d < dim; ++d)
    for (int64_t j = 0; j < inner; ++j)
      y[d * inner + j] = log ? (x[d * inner + j] - mx[j]) - sum[j] : y[d * inner + j] * sum[j];
}

// Softmax over `dim` for each of outer x inner positions. Float blocks of more than one
// column share out in column ranges of at least 64 (a [1, 80, 8400] block over its 80 used
// one thread): fast::softmax_columns where it runs (AVX-512), else 8 columns at a time
// from 8 columns on, else the whole block in one range.
template <typename T>
void softmax_run(const T* x, T* y, int64_t outer, int64_t dim, int64_t inner, bool log,
                 ThreadPool* pool) {
  if (dim == 0) return;
  if (dim == 1) {
    // One value a softmax: 0 for LogSoftmax, 1 for Softmax (NaN from NaN and +-inf, as the
    // general path's x - max gives).
    parallel_for(pool, outer * inner, 1.0, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) {
        const T d = x[i] - x[i];
        y[i] = log ? d : d + T(1);
      }
    });
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (inner > 1) {
      const int64_t ranges = std::max<int64_t>(1, inner / 64);
      const double cost = 20.0 * static_cast<double>(dim) * static_cast<double>(inner) /
                          static_cast<double>(ranges);
      parallel_for(pool, outer * ranges, cost, [&](int64_t s, int64_t e) {
        float mx[8], sum[8];
        for (int64_t it = s; it < e; ++it) {
          const int64_t o = it / ranges, r = it % ranges;
          const int64_t j0 = r * 64, j1 = r + 1 == ranges ? inner : j0 + 64;
          const float* xo = x + o * dim * inner;
          float* yo = y + o * dim * inner;
          if (fast::softmax_columns(xo, yo, dim, inner, j0, j1, log)) continue;
          if (inner >= 8)
            softmax_columns_f32(xo, yo, dim, inner, j0, j1, log);
          else
            softmax_narrow_f32(xo, yo, dim, inner, log, mx, sum);
        }
      });
      return;
    }
  }
  const double cost = 20.0 * static_cast<double>(dim) * inner;
  if constexpr (std::is_same_v<T, float>) {
    if (inner == 1 && dim <= 16) {
      bool done = true;
      parallel_for(pool, outer, cost, [&](int64_t s, int64_t e) {
        if (!fast::softmax_short_rows(x + s * dim, y + s * dim, e - s, dim, log)) done = false;
      });
      if (done) return;
    }
  }
  parallel_for(pool, outer, cost, [&](int64_t s, int64_t e) {
    std::vector<T> tmp(inner > 1 ? static_cast<size_t>(2 * inner) : 0);
    for (int64_t o = s; o < e; ++o) {
      const T* xo = x + o * dim * inner;
      T* yo = y + o * dim * inner;
      if (inner == 1) {
        softmax_row(xo, yo, dim, log);
      } else if constexpr (std::is_same_v<T, double>) {
        softmax_strided(xo, yo, dim, inner, log, tmp.data(), tmp.data() + inner);
      }
    }
  });
}

class Softmax final : public Kernel {
 public:
  Softmax(const KernelInfo& info, bool log)
      : log_(log), opset_(info.opset()), axis_(info.attr_int("axis", info.opset() < 13 ? 1 : -1)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& X = ctx.required_input(0);
    const DataType dt = X.dtype();
    if (dt != DataType::kFloat && dt != DataType::kDouble && dt != DataType::kFloat16 &&
        dt != DataType::kBFloat16)
      ctx.fail(StatusCode::kNotImplemented,
               std::string("element type ") + dtype_name(dt) + " is not supported");
    const int64_t rank = static_cast<int64_t>(X.rank());
    if (rank == 0)
      ctx.fail(StatusCode::kInvalidArgument, "the input must have rank >= 1, got a scalar");
    if (axis_ < -rank || axis_ >= rank)
      ctx.fail(StatusCode::kInvalidArgument, "attribute 'axis' " + std::to_string(axis_) +
                                                 " is out of range for input " +
                                                 shape_to_string(X.shape()));
    const int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
    int64_t outer = 1, dim = 1, inner = 1;
    for (int64_t i = 0; i < rank; ++i) {
      const int64_t d = X.dim(static_cast<size_t>(i));
      if (i < axis) {
        outer *= d;
      } else if (i == axis || opset_ < 13) {
        dim *= d;
      } else {
        inner *= d;
      }
    }
    Tensor& Y = ctx.allocate_output(0, dt, X.shape());
    if (Y.numel() == 0) return;
    ThreadPool* pool = ctx.thread_pool();
    switch (dt) {
      case DataType::kFloat:
        return softmax_run<float>(X.data<float>(), Y.data<float>(), outer, dim, inner, log_, pool);
      case DataType::kDouble:
        return softmax_run<double>(X.data<double>(), Y.data<double>(), outer, dim, inner, log_,
                                   pool);
      default: {
        std::vector<float> x(static_cast<size_t>(X.numel())), y(static_cast<size_t>(Y.numel()));
        convert_to_float(dt, X.raw_data(), x.data(), X.numel());
        softmax_run<float>(x.data(), y.data(), outer, dim, inner, log_, pool);
        convert_from_float(dt, y.data(), Y.raw_data(), Y.numel());
        return;
      }
    }
  }

 private:
  bool log_;
  int64_t opset_;
  int64_t axis_;
};

template <bool Log>
KernelFactory softmax_factory() {
  return [](const KernelInfo& info) -> std::unique_ptr<Kernel> {
    return std::make_unique<Softmax>(info, Log);
  };
}

}  // namespace

void register_softmax(KernelRegistry& r) {
  // 1 and 11: 2-D coercion at axis (11 allows negative axis); 13: along one axis, default -1.
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    const bool log = std::string(op) == "LogSoftmax";
    const KernelFactory f = log ? softmax_factory<true>() : softmax_factory<false>();
    r.add("", op, 1, 10, f);
    r.add("", op, 11, 12, f);
    r.add("", op, 13, kMaxOpset, f);
  }
}

}  // namespace nn
}  // namespace ortlite
