#include "ortlite/buffer.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "ortlite/status.h"

namespace ortlite {

namespace {
constexpr size_t kAlignment = 64;
}

Buffer* Buffer::allocate(size_t bytes) {
  const size_t rounded = ((bytes == 0 ? 1 : bytes) + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded < bytes) ORTLITE_THROW(kFail, "allocation of ", bytes, " bytes overflows");
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (!p) ORTLITE_THROW(kFail, "failed to allocate ", bytes, " bytes");
  Buffer* b = new Buffer();
  b->data_ = p;
  b->size_ = bytes;
  b->kind_ = BufferKind::kOwned;
  return b;
}

Buffer* Buffer::wrap(void* data, size_t bytes, BufferKind kind, std::function<void()> release) {
  Buffer* b = new Buffer();
  b->data_ = data;
  b->size_ = bytes;
  b->kind_ = kind;
  b->release_ = std::move(release);
  return b;
}

Buffer* Buffer::allocate_strings(size_t count) {
  if (count > (SIZE_MAX / sizeof(std::string)))
    ORTLITE_THROW(kFail, "string tensor of ", count, " elements is too large");
  Buffer* b = allocate(count * sizeof(std::string));
  auto* s = static_cast<std::string*>(b->data_);
  for (size_t i = 0; i < count; ++i) new (s + i) std::string();
  b->string_count_ = count;
  return b;
}

Buffer::~Buffer() {
  if (string_count_ > 0) {
    auto* s = static_cast<std::string*>(data_);
    for (size_t i = 0; i < string_count_; ++i) s[i].~basic_string();
  }
  if (release_) {
    release_();
  } else if (kind_ == BufferKind::kOwned) {
    std::free(data_);
  }
}

}  // namespace ortlite
