#include "ortlite/buffer.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "ortlite/status.h"

namespace ortlite {

namespace {
constexpr size_t kAlignment = 64;

// 64-byte aligned blocks carved from plain malloc, the original pointer stored just before
// the aligned one. glibc's memalign/aligned_alloc leaves free fragments in front of each
// block; with a fragmented heap, alternating allocate/free of the same sizes then grows
// the heap without bound (seen as RSS rising run after run). malloc does not.
void* aligned_malloc(size_t bytes) {
  if (bytes > SIZE_MAX - kAlignment - sizeof(void*)) return nullptr;
  void* raw = std::malloc(bytes + kAlignment + sizeof(void*));
  if (!raw) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw) + sizeof(void*);
  const uintptr_t aligned = (start + kAlignment - 1) & ~static_cast<uintptr_t>(kAlignment - 1);
  reinterpret_cast<void**>(aligned)[-1] = raw;
  return reinterpret_cast<void*>(aligned);
}

void aligned_free(void* p) {
  if (p) std::free(static_cast<void**>(p)[-1]);
}
}  // namespace

Buffer* Buffer::allocate(size_t bytes) {
  void* p = aligned_malloc(bytes == 0 ? 1 : bytes);
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

Buffer* Buffer::wrap_device(void* data, size_t bytes, Device device,
                            std::function<void()> release) {
  Buffer* b = wrap(data, bytes, BufferKind::kOwned, std::move(release));
  b->device_ = device;
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
    aligned_free(data_);
  }
}

}  // namespace ortlite
