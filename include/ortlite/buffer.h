// Buffer: a block of memory with an atomic refcount, a device and a release action.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>

namespace ortlite {

enum class DeviceType : int { kCPU = 0, kCUDA = 1 };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int id = 0;
  bool operator==(const Device& o) const { return type == o.type && id == o.id; }
};

// Who owns the memory. The binding decides from this whether an output may be handed to
// numpy without a copy: only kOwned buffers made during a run are.
enum class BufferKind : int {
  kOwned = 0,     // allocated by ortlite for a run; freed when the last reference goes
  kBorrowed = 1,  // someone else's memory (a feed); never freed by ortlite
  kConstant = 2,  // the session's weights (initializers, possibly a file mapping)
};

// Asks the kernel for 2 MiB pages over the whole 2 MiB pages inside [p, p + bytes) (Linux,
// where transparent huge pages are on request; a no-op elsewhere). For large blocks that
// are written or streamed through: each huge page faults in once, and page walks are fewer.
void advise_huge_pages(void* p, size_t bytes);
constexpr size_t kHugePageBytes = size_t{2} << 20;

class Buffer {
 public:
  // Allocates `bytes` (64-byte aligned, at least 1 byte) of CPU memory. Throws
  // Error(kFail) when the allocation fails.
  static Buffer* allocate(size_t bytes);
  // Wraps memory that ortlite does not own. `release` (may be empty) runs when the last
  // reference goes, e.g. to drop the owner's reference or unmap a file.
  static Buffer* wrap(void* data, size_t bytes, BufferKind kind, std::function<void()> release);
  // An owned buffer of `count` default-constructed std::string, destroyed with the buffer.
  static Buffer* allocate_strings(size_t count);
  // Owned memory of another device (e.g. from the CUDA allocator, src/providers/cuda): `release`
  // frees it when the last reference goes. Its bytes are not addressable by the CPU.
  static Buffer* wrap_device(void* data, size_t bytes, Device device,
                             std::function<void()> release);

  void* data() const { return data_; }
  size_t size() const { return size_; }
  BufferKind kind() const { return kind_; }
  Device device() const { return device_; }
  bool holds_strings() const { return string_count_ > 0; }

  void add_ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release_ref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  int32_t ref_count() const { return refs_.load(std::memory_order_acquire); }

  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

 private:
  Buffer() = default;
  ~Buffer();

  std::atomic<int32_t> refs_{1};
  void* data_ = nullptr;
  size_t size_ = 0;
  size_t string_count_ = 0;  // > 0 when data_ holds std::string objects
  BufferKind kind_ = BufferKind::kOwned;
  Device device_{};
  std::function<void()> release_;
};

// Intrusive smart pointer over Buffer.
class BufferPtr {
 public:
  BufferPtr() = default;
  // Adopts a reference (the one returned by Buffer::allocate / wrap).
  static BufferPtr adopt(Buffer* b) {
    BufferPtr p;
    p.b_ = b;
    return p;
  }
  BufferPtr(const BufferPtr& o) : b_(o.b_) {
    if (b_) b_->add_ref();
  }
  BufferPtr(BufferPtr&& o) noexcept : b_(std::exchange(o.b_, nullptr)) {}
  BufferPtr& operator=(BufferPtr o) noexcept {
    std::swap(b_, o.b_);
    return *this;
  }
  ~BufferPtr() {
    if (b_) b_->release_ref();
  }
  Buffer* get() const { return b_; }
  Buffer* operator->() const { return b_; }
  explicit operator bool() const { return b_ != nullptr; }
  // Gives up the reference without releasing it.
  Buffer* detach() { return std::exchange(b_, nullptr); }
  void reset() { BufferPtr().swap_with(*this); }

 private:
  void swap_with(BufferPtr& o) { std::swap(b_, o.b_); }
  Buffer* b_ = nullptr;
};

}  // namespace ortlite
