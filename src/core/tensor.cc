#include "ortlite/tensor.h"

#include "ortlite/value.h"

#include <cstring>
#include <limits>
#include <sstream>

namespace ortlite {

int64_t shape_size(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      ORTLITE_THROW(kInvalidArgument, "negative dimension in shape ", shape_to_string(shape));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      ORTLITE_THROW(kInvalidArgument, "shape ", shape_to_string(shape), " has too many elements");
    n *= d;
  }
  return n;
}

std::string shape_to_string(const Shape& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? "," : "") << shape[i];
  os << ']';
  return os.str();
}

Tensor::Tensor(DataType dtype, Shape shape, BufferPtr buffer, size_t byte_offset)
    : dtype_(dtype), shape_(std::move(shape)), buffer_(std::move(buffer)), offset_(byte_offset) {
  numel_ = shape_size(shape_);
  if (buffer_) {
    const size_t elem = dtype_size(dtype_);
    if (elem == 0)
      ORTLITE_THROW(kNotImplemented, "element type ", dtype_name(dtype_), " is not supported");
    if (static_cast<uint64_t>(numel_) > (std::numeric_limits<size_t>::max() - offset_) / elem ||
        offset_ + static_cast<size_t>(numel_) * elem > buffer_->size())
      ORTLITE_THROW(kFail, "tensor of shape ", shape_to_string(shape_), " does not fit its buffer");
  }
}

void Tensor::reinit(DataType dtype, const Shape& shape) {
  const int64_t n = shape_size(shape);
  const size_t elem = dtype_size(dtype);
  if (!buffer_ || elem == 0 || static_cast<uint64_t>(n) > buffer_->size() / elem)
    ORTLITE_THROW(kFail, "tensor of shape ", shape_to_string(shape), " does not fit its buffer");
  dtype_ = dtype;
  shape_ = shape;
  numel_ = n;
  offset_ = 0;
}

Tensor Tensor::empty(DataType dtype, const Shape& shape) {
  const int64_t n = shape_size(shape);
  const size_t elem = dtype_size(dtype);
  if (elem == 0)
    ORTLITE_THROW(kNotImplemented, "element type ", dtype_name(dtype), " is not supported");
  // Byte sizes beyond int64 (numpy's and ptrdiff_t's bound) cannot be allocated: Fail, as
  // an allocation failure is.
  if (static_cast<uint64_t>(n) > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / elem)
    ORTLITE_THROW(kFail, "tensor of shape ", shape_to_string(shape), " is too large: ", n,
                  " elements of ", elem, " bytes overflow a 64-bit byte size");
  if (dtype == DataType::kString) {
    return Tensor(dtype, shape, BufferPtr::adopt(Buffer::allocate_strings(static_cast<size_t>(n))));
  }
  BufferPtr buf = BufferPtr::adopt(Buffer::allocate(static_cast<size_t>(n) * elem));
  std::memset(buf->data(), 0, static_cast<size_t>(n) * elem);
  return Tensor(dtype, shape, std::move(buf));
}

Tensor Tensor::reshaped(const Shape& new_shape) const {
  if (shape_size(new_shape) != numel_)
    ORTLITE_THROW(kInvalidArgument, "cannot reshape ", shape_to_string(shape_), " to ",
                  shape_to_string(new_shape));
  return Tensor(dtype_, new_shape, buffer_, offset_);
}

Tensor Tensor::clone() const {
  // Host code must never read device memory; device copies go through the CUDA provider.
  if (buffer_ && buffer_->device().type != DeviceType::kCPU)
    ORTLITE_THROW(kFail, "clone() of a tensor in device memory (copy it with the provider)");
  if (dtype_ == DataType::kString) {
    Tensor t = empty(dtype_, shape_);
    const auto* src = data<std::string>();
    auto* dst = t.data<std::string>();
    for (int64_t i = 0; i < numel_; ++i) dst[i] = src[i];
    return t;
  }
  const int64_t n = numel_;
  const size_t bytes = static_cast<size_t>(n) * dtype_size(dtype_);
  BufferPtr buf = BufferPtr::adopt(Buffer::allocate(bytes));
  if (bytes) std::memcpy(buf->data(), raw_data(), bytes);
  return Tensor(dtype_, shape_, std::move(buf));
}

bool Tensor::shares_memory_with(const Tensor& other) const {
  if (!buffer_ || !other.buffer_) return false;
  const char* a = static_cast<const char*>(raw_data());
  const char* b = static_cast<const char*>(other.raw_data());
  const size_t na = nbytes(), nb = other.nbytes();
  if (na == 0 || nb == 0) return false;
  return a < b + nb && b < a + na;
}

}  // namespace ortlite

namespace ortlite {

std::string Value::type_string() const {
  switch (kind_) {
    case Kind::kTensor:
      return std::string("tensor(") + dtype_name(tensor_.dtype()) + ")";
    case Kind::kSequence:
      return std::string("seq(tensor(") + dtype_name(elem_) + "))";
    case Kind::kNone:
      return "optional(none)";
    case Kind::kMaps:
      return std::string("seq(map(") + dtype_name(elem_) + ",tensor(" +
             dtype_name(map_values().dtype()) + ")))";
    case Kind::kMap:
      return std::string("map(") + dtype_name(elem_) + ",tensor(" +
             dtype_name(map_values().dtype()) + "))";
  }
  return "value";
}

}  // namespace ortlite
