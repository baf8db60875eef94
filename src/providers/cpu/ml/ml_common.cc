#include "providers/cpu/ml/ml_common.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ortlite {
namespace ml {

PostTransform parse_post_transform(const KernelInfo& info, const std::string& s) {
  if (s == "NONE") return PostTransform::kNone;
  if (s == "LOGISTIC") return PostTransform::kLogistic;
  if (s == "SOFTMAX") return PostTransform::kSoftmax;
  if (s == "SOFTMAX_ZERO") return PostTransform::kSoftmaxZero;
  if (s == "PROBIT") return PostTransform::kProbit;
  info.fail(StatusCode::kInvalidGraph,
            "attribute 'post_transform' = '" + s +
                "' is not one of NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO, PROBIT");
}

float compute_logistic(float v) {
  const float e = 1.f / (1.f + std::exp(-std::abs(v)));
  return v < 0 ? 1.f - e : e;
}

namespace {
float erf_inv(float x) {
  const float sgn = x < 0 ? -1.f : 1.f;
  x = (1 - x) * (1 + x);
  const float lg = std::log(x);
  const float v = 2 / (3.14159265358979323846f * 0.147f) + 0.5f * lg;
  const float v2 = 1 / 0.147f * lg;
  const float v3 = -v + std::sqrt(v * v - v2);
  return sgn * std::sqrt(v3);
}
}  // namespace

float compute_probit(float v) {
  return 1.41421356237309504880f * erf_inv(2 * v - 1);
}

void softmax_inplace(float* v, int64_t n) {
  float mx = -std::numeric_limits<float>::max();
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, v[i]);
  float sum = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    v[i] = std::exp(v[i] - mx);
    sum += v[i];
  }
  for (int64_t i = 0; i < n; ++i) v[i] /= sum;
}

void softmax_zero_inplace(float* v, int64_t n) {
  float mx = -std::numeric_limits<float>::max();
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, v[i]);
  const float exp_neg_max = std::exp(-mx);
  float sum = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    if (v[i] > 0.0000001f || v[i] < -0.0000001f) {
      v[i] = std::exp(v[i] - mx);
      sum += v[i];
    } else {
      v[i] *= exp_neg_max;
    }
  }
  for (int64_t i = 0; i < n; ++i) v[i] /= sum;
}

namespace {
void transform_row(float* v, int64_t n, PostTransform t) {
  switch (t) {
    case PostTransform::kProbit:
      for (int64_t i = 0; i < n; ++i) v[i] = compute_probit(v[i]);
      break;
    case PostTransform::kLogistic:
      for (int64_t i = 0; i < n; ++i) v[i] = compute_logistic(v[i]);
      break;
    case PostTransform::kSoftmax:
      softmax_inplace(v, n);
      break;
    case PostTransform::kSoftmaxZero:
      softmax_zero_inplace(v, n);
      break;
    case PostTransform::kNone:
      break;
  }
}
}  // namespace

void update_scores(float* scores, int64_t n, int64_t per_row, PostTransform t,
                   bool add_second_class) {
  if (per_row < 1) return;
  if (per_row > 1) {
    for (int64_t i = 0; i < n; ++i) transform_row(scores + i * per_row, per_row, t);
    return;
  }
  if (t == PostTransform::kProbit) {
    for (int64_t i = 0; i < n; ++i) scores[i] = compute_probit(scores[i]);
    return;
  }
  if (!add_second_class) return;
  // Back to front: score i moves to slot 2i + 1, which is never below i.
  for (int64_t i = n; i-- > 0;) {
    const float s = scores[i];
    scores[2 * i] = 1.f - s;
    scores[2 * i + 1] = s;
  }
}

Rows feature_rows(const KernelContext& ctx, const Tensor& x) {
  if (x.rank() == 0 || x.rank() > 2) {
    ctx.fail(StatusCode::kInvalidArgument,
             "input 'X' must be [N, C] or [C], got " + shape_to_string(x.shape()));
  }
  Rows r;
  r.n = x.rank() == 1 ? 1 : x.dim(0);
  r.c = x.rank() == 1 ? x.dim(0) : x.dim(1);
  return r;
}

const float* values_as_float(const KernelContext& ctx, const Tensor& x, std::vector<float>& buf) {
  const int64_t n = x.numel();
  auto convert = [&](auto tag) {
    using T = decltype(tag);
    const T* src = x.data<T>();
    buf.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) buf[static_cast<size_t>(i)] = static_cast<float>(src[i]);
    return buf.data();
  };
  switch (x.dtype()) {
    case DataType::kFloat:
      return x.data<float>();
    case DataType::kDouble:
      return convert(double{});
    case DataType::kInt64:
      return convert(int64_t{});
    case DataType::kInt32:
      return convert(int32_t{});
    default:
      ctx.fail(StatusCode::kInvalidArgument, std::string("input 'X' has type ") +
                                                 dtype_name(x.dtype()) +
                                                 "; expected float, double, int64 or int32");
  }
}

}  // namespace ml
}  // namespace ortlite
