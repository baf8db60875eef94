// Shared helpers of the com.microsoft kernels (src/providers/cpu/contrib): real-valued views
// of floating-point tensors (float16 / bfloat16 computed in float), shape checks, softmax rows.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <utility>
#include <string>
#include <vector>

#include "ortlite/kernel.h"
#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace contrib {

inline bool is_real(DataType t) {
  return t == DataType::kFloat || t == DataType::kDouble || t == DataType::kFloat16 ||
         t == DataType::kBFloat16;
}

// The elements of a floating-point tensor as T (float or double): the tensor's own memory when
// it already holds T, else a converted copy (float16 / bfloat16 -> float).
template <typename T>
class RealIn {
 public:
  RealIn() = default;
  explicit RealIn(const Tensor* t) {
    if (!t) return;
    if (t->dtype() == DataTypeOf<T>::value) {
      p_ = t->data<T>();
      return;
    }
    buf_.resize(static_cast<size_t>(t->numel()));
    if constexpr (std::is_same_v<T, float>) {
      nn::convert_to_float(t->dtype(), t->raw_data(), buf_.data(), t->numel());
    } else {
      std::vector<float> f(buf_.size());
      nn::convert_to_float(t->dtype(), t->raw_data(), f.data(), t->numel());
      for (size_t i = 0; i < f.size(); ++i) buf_[i] = f[i];
    }
    p_ = buf_.data();
  }
  const T* get() const { return p_; }

 private:
  const T* p_ = nullptr;
  std::vector<T> buf_;
};

// Output counterpart: writes go to the tensor when it holds T, else to a buffer that commit()
// converts into it. get() is nullptr for an absent output.
template <typename T>
class RealOut {
 public:
  RealOut() = default;
  explicit RealOut(Tensor* t) : t_(t) {
    if (!t) return;
    if (t->dtype() == DataTypeOf<T>::value) {
      p_ = t->data<T>();
      return;
    }
    buf_.resize(static_cast<size_t>(t->numel()));
    p_ = buf_.data();
  }
  T* get() const { return p_; }
  void commit() {
    if (!t_ || buf_.empty()) return;
    if constexpr (std::is_same_v<T, float>) {
      nn::convert_from_float(t_->dtype(), buf_.data(), t_->raw_data(), t_->numel());
    }
  }

 private:
  Tensor* t_ = nullptr;
  T* p_ = nullptr;
  std::vector<T> buf_;
};

// True when output i of the node is wanted (named, not "").
inline bool wants_output(const KernelContext& ctx, size_t i) {
  return i < ctx.num_outputs() && !ctx.node().outputs[i].empty();
}

// Fails kInvalidArgument unless every given tensor has X's element type.
void check_same_type(const KernelContext& ctx, const Tensor& X,
                     std::initializer_list<std::pair<const Tensor*, const char*>> others);

// Fails kNotImplemented unless t's element type is one of `types`.
void check_type(const KernelContext& ctx, const Tensor& t, const char* what,
                std::initializer_list<DataType> types);

// Fails kInvalidArgument unless p (named `what`) is 1-D with n elements.
void check_vector(const KernelContext& ctx, const Tensor& p, int64_t n, const char* what);

// Rotary embedding of one head's first `rot` elements (rot even; rotary_embedding.cc): pairs
// (x[i], x[i + rot/2]), or (x[2i], x[2i + 1]) when interleaved, rotated by (cos[i], sin[i]).
// y may be x.
void rotate_half(const float* x, const float* cos, const float* sin, int64_t rot, bool interleaved,
                 float* y);

// In-place softmax over each of `rows` rows of n floats (max-shifted).
void softmax_rows(float* x, int64_t rows, int64_t n);

}  // namespace contrib
}  // namespace ortlite
