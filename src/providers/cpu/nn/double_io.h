// Element helpers of the nn kernels that compute in double (the losses, RMS, Lp, group and
// mean-variance normalization, LRN, LpPool, Hardmax): float16 / bfloat16 / float / double
// elements to and from double.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {

// The `axis` attribute of x's node in [0, rank); kInvalidArgument naming the shape when it
// is out of range.
inline size_t checked_axis(const KernelContext& ctx, int64_t axis, const Tensor& x) {
  const int64_t rank = static_cast<int64_t>(x.rank());
  if (axis < -rank || axis >= rank) {
    ctx.fail(StatusCode::kInvalidArgument, "attribute 'axis' = " + std::to_string(axis) +
                                               " is out of range for input shape " +
                                               shape_to_string(x.shape()));
  }
  return static_cast<size_t>(axis < 0 ? axis + rank : axis);
}

template <typename T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

template <typename T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// The elements of a floating-point tensor as doubles; `what` names the op in errors.
inline std::vector<double> load_doubles(const Tensor& t, const char* what) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  ORTLITE_DISPATCH_FLOAT(t.dtype(), what, [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = to_double(p[i]);
  });
  return v;
}

// Writes v (t.numel() values) into the floating-point tensor t.
inline void store_doubles(Tensor& t, const std::vector<double>& v, const char* what) {
  ORTLITE_DISPATCH_FLOAT(t.dtype(), what, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = from_double<T>(v[i]);
  });
}

// An int32 / int64 input's values; kInvalidArgument naming input `what` otherwise.
inline std::vector<int64_t> read_int_tensor(const KernelContext& ctx, const Tensor& t,
                                            const char* what) {
  if (t.dtype() != DataType::kInt64 && t.dtype() != DataType::kInt32) {
    ctx.fail(
        StatusCode::kInvalidArgument,
        std::string("input '") + what + "' must be int32 or int64, got " + dtype_name(t.dtype()));
  }
  return tensor_to_int64s(t);
}

// The product of dims [b, e) of s.
inline int64_t dims_product(const Shape& s, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e; ++i) p *= s[i];
  return p;
}

}  // namespace nn
}  // namespace ortlite
