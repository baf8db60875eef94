// Tensor = element type + shape + a reference to a Buffer + byte offset. Always dense,
// row-major (C order). Copying a Tensor shares the buffer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ortlite/buffer.h"
#include "ortlite/dtype.h"
#include "ortlite/status.h"

namespace ortlite {

using Shape = std::vector<int64_t>;

// Number of elements; throws Error(kInvalidArgument) on a negative dim or overflow.
int64_t shape_size(const Shape& shape);
std::string shape_to_string(const Shape& shape);  // "[2,3,4]"

class Tensor {
 public:
  Tensor() = default;
  Tensor(DataType dtype, Shape shape, BufferPtr buffer, size_t byte_offset = 0);

  // New owned CPU tensor; numeric memory is zero-filled, strings are empty.
  static Tensor empty(DataType dtype, const Shape& shape);
  // A scalar or 1-D helper for tests and constant folding.
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape);

  bool defined() const { return dtype_ != DataType::kUndefined; }
  DataType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  size_t rank() const { return shape_.size(); }
  int64_t dim(size_t i) const { return shape_[i]; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }
  const BufferPtr& buffer() const { return buffer_; }
  size_t byte_offset() const { return offset_; }

  void* raw_data() const {
    return buffer_ ? static_cast<char*>(buffer_->data()) + offset_ : nullptr;
  }
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw_data());
  }

  // Same buffer (from its start), new element type and shape, assigned in place (the
  // shape's storage is reused when it is large enough). Throws Error(kFail) when the new
  // tensor does not fit the buffer.
  void reinit(DataType dtype, const Shape& shape);
  // Same buffer, new shape with the same element count (Reshape, Squeeze, ...).
  Tensor reshaped(const Shape& new_shape) const;
  // Deep copy into a new owned buffer.
  Tensor clone() const;
  // True when the two tensors' bytes overlap.
  bool shares_memory_with(const Tensor& other) const;

 private:
  DataType dtype_ = DataType::kUndefined;
  Shape shape_;
  int64_t numel_ = 0;
  BufferPtr buffer_;
  size_t offset_ = 0;
};

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape) {
  Tensor t = empty(DataTypeOf<T>::value, shape);
  ORTLITE_ENFORCE(static_cast<int64_t>(values.size()) == t.numel(), kFail,
                  "from_vector: size mismatch");
  T* d = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) d[i] = values[i];
  return t;
}

}  // namespace ortlite
