#include "ortlite/buffer.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <pthread.h>
#include <string>
#include <sys/mman.h>

#include "ortlite/status.h"

namespace ortlite {

namespace {
constexpr size_t kAlignment = 64;
// Room in front of an aligned block: the pointer malloc returned and the block's capacity.
constexpr size_t kHeader = 2 * sizeof(void*);
constexpr size_t kHugeMin = size_t{4} << 20;

// 64-byte aligned blocks carved from plain malloc, the original pointer and the capacity
// stored just before the aligned one. glibc's memalign/aligned_alloc leaves free fragments
// in front of each block; with a fragmented heap, alternating allocate/free of the same
// sizes then grows the heap without bound (seen as RSS rising run after run). malloc does
// not.
void* aligned_malloc(size_t bytes) {
  if (bytes > SIZE_MAX - kAlignment - kHeader) return nullptr;
  void* raw = std::malloc(bytes + kAlignment + kHeader);
  if (!raw) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw) + kHeader;
  const uintptr_t aligned = (start + kAlignment - 1) & ~static_cast<uintptr_t>(kAlignment - 1);
  reinterpret_cast<void**>(aligned)[-1] = raw;
  reinterpret_cast<size_t*>(aligned)[-2] = bytes;
  // Large blocks are mapped afresh by malloc each time (above the block cache's bounds
  // too): in 2 MiB pages, where the kernel allows them on request, a 72 MB output faults in
  // about 700 times a run instead of 17,600 (a batched MatMul of 8 x (1500 x 64 x 1500):
  // 55-85 -> 28-29 ms a run). numpy asks the same for its arrays from 4 MiB.
  if (bytes >= kHugeMin) {
    advise_huge_pages(reinterpret_cast<void*>(aligned), bytes);
  }
  return reinterpret_cast<void*>(aligned);
}

size_t block_capacity(void* p) {
  return static_cast<size_t*>(p)[-2];
}

void aligned_free(void* p) {
  if (p) std::free(static_cast<void**>(p)[-1]);
}

// Large blocks that ortlite freed, kept for the next allocation of about their size.
//
// A run's graph outputs are new buffers on every call (numpy owns them afterwards), and
// glibc serves blocks above its mmap threshold (128 KiB until its heuristics raise it,
// which depend on what the process freed before) with a fresh mapping each time: every
// page faults in and is zeroed again. An 800 KB elementwise output then took 95-240 us a
// run instead of 25-35 us. Blocks here are already resident.
//
// At most kMaxBlocks blocks and max_bytes() bytes; the oldest go first. The bound is
// twice the largest block this process asked for, at least 64 MiB and at most 1 GiB, so
// that the largest outputs come back too: with a fixed 64 MiB (32 MiB a block) a Softmax
// over [64, 12, 128, 128] (a 50 MB output) was mapped and zeroed afresh on every run, 10.9
// ms against onnxruntime's 5.9, and 5.0 ms with its block kept. A process holds, freed,
// at most two of the largest blocks it used while live. ORTLITE_BUFFER_CACHE_MB sets a
// fixed bound instead (0 turns the cache off). Not under AddressSanitizer, which then
// sees every block freed and would otherwise miss a use after free.
class BlockCache {
 public:
  static constexpr size_t kMinBytes = size_t{64} << 10;
  static constexpr int kMaxBlocks = 32;

  // A cached block of capacity in [bytes, bytes + bytes / 8], or null.
  void* take(size_t bytes) {
    if (bytes < kMinBytes) return nullptr;
    for (size_t seen = largest_.load(std::memory_order_relaxed);
         bytes > seen && !largest_.compare_exchange_weak(seen, bytes, std::memory_order_relaxed);) {
    }
    if (max_bytes() == 0) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    int best = -1;
    for (int i = 0; i < n_; ++i) {
      const size_t cap = blocks_[i].cap;
      if (cap >= bytes && cap - bytes <= bytes / 8 && (best < 0 || cap < blocks_[best].cap))
        best = i;
    }
    if (best < 0) return nullptr;
    void* p = blocks_[best].p;
    held_ -= blocks_[best].cap;
    for (int i = best; i + 1 < n_; ++i) blocks_[i] = blocks_[i + 1];
    --n_;
    return p;
  }

  // Keeps p (true) or leaves it to the caller to free (false).
  bool put(void* p) {
    const size_t cap = block_capacity(p), limit = max_bytes();
    if (cap < kMinBytes || cap > limit / 2) return false;
    void* evicted[kMaxBlocks];
    int ne = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      int drop = 0;
      size_t held = held_;
      while (drop < n_ && (n_ - drop >= kMaxBlocks || held + cap > limit)) {
        held -= blocks_[drop].cap;
        evicted[ne++] = blocks_[drop].p;
        ++drop;
      }
      if (drop > 0) {
        for (int i = drop; i < n_; ++i) blocks_[i - drop] = blocks_[i];
        n_ -= drop;
      }
      blocks_[n_++] = {p, cap};
      held_ = held + cap;
    }
    for (int i = 0; i < ne; ++i) aligned_free(evicted[i]);
    return true;
  }

  // fork: the child has only the forking thread; a lock another thread held at fork time
  // would never be released there. prepare takes it; both sides let it go.
  void lock() { mu_.lock(); }
  void unlock() { mu_.unlock(); }

 private:
  size_t max_bytes() const {
#if defined(__SANITIZE_ADDRESS__)
    return 0;
#else
    // SIZE_MAX: not set.
    static const size_t fixed = [] {
      const char* e = std::getenv("ORTLITE_BUFFER_CACHE_MB");
      if (!e || !*e) return SIZE_MAX;
      const long mb = std::atol(e);
      return mb > 0 ? static_cast<size_t>(mb) << 20 : size_t{0};
    }();
    if (fixed != SIZE_MAX) return fixed;
    constexpr size_t kFloor = size_t{64} << 20, kCeiling = size_t{1} << 30;
    const size_t largest = largest_.load(std::memory_order_relaxed);
    return std::max(kFloor, largest >= kCeiling / 2 ? kCeiling : 2 * largest);
#endif
  }

  struct Block {
    void* p;
    size_t cap;
  };
  std::mutex mu_;
  std::atomic<size_t> largest_{0};  // the largest block asked for (from kMinBytes)
  Block blocks_[kMaxBlocks] = {};
  int n_ = 0;
  size_t held_ = 0;
};

// Leaked on purpose: buffers may be released by threads still running during static
// destruction. The blocks it holds at exit stay reachable.
BlockCache& block_cache() {
  static BlockCache* c = [] {
    auto* cache = new BlockCache();
    pthread_atfork([] { block_cache().lock(); }, [] { block_cache().unlock(); },
                   [] { block_cache().unlock(); });
    return cache;
  }();
  return *c;
}

void* allocate_block(size_t bytes) {
  if (void* p = block_cache().take(bytes)) return p;
  return aligned_malloc(bytes);
}

void free_block(void* p) {
  if (p && !block_cache().put(p)) aligned_free(p);
}
}  // namespace

void advise_huge_pages(void* p, size_t bytes) {
#if defined(MADV_HUGEPAGE)
  const uintptr_t a = reinterpret_cast<uintptr_t>(p), h = kHugePageBytes;
  const uintptr_t lo = (a + h - 1) & ~(h - 1), hi = (a + bytes) & ~(h - 1);
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);  // advice only
#else
  (void)p;
  (void)bytes;
#endif
}

Buffer* Buffer::allocate(size_t bytes) {
  void* p = allocate_block(bytes == 0 ? 1 : bytes);
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
    free_block(data_);
  }
}

}  // namespace ortlite
