// Shared copy helpers of the tensor kernels: element copies by size, a coalescing strided
// copy (Transpose, Slice, Expand, Tile, Pad) and small validation helpers.
#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>
#include <type_traits>

#include "compute/cpu_avx512.h"

#include "providers/cpu/tensor/tensor_kernels.h"

namespace ortlite {
namespace tensor_ops {

namespace {

template <typename T>
inline void copy_run(const T* src, T* dst, int64_t n) {
  if constexpr (std::is_same_v<T, std::string>) {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
  } else {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T));
  }
}

#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
// `bytes` bytes of a repeating 8-byte pattern, 64-byte stores (a masked one at the end).
ORTLITE_AVX512 void fill_pattern_avx512(char* d, uint64_t pattern, size_t bytes) {
  const __m512i v = _mm512_set1_epi64(static_cast<long long>(pattern));
  size_t i = 0;
  for (; i + 256 <= bytes; i += 256) {
    _mm512_storeu_si512(d + i, v);
    _mm512_storeu_si512(d + i + 64, v);
    _mm512_storeu_si512(d + i + 128, v);
    _mm512_storeu_si512(d + i + 192, v);
  }
  for (; i + 64 <= bytes; i += 64) _mm512_storeu_si512(d + i, v);
  if (i < bytes) _mm512_mask_storeu_epi8(d + i, (~uint64_t{0}) >> (64 - (bytes - i)), v);
}
#endif

// n copies of v: memset when its bytes are all equal (0, -1, any 1-byte value), else, with
// AVX-512, 64-byte stores of the element repeated to 8 bytes.
template <typename T>
void fill_run(T* d, const T& v, int64_t n) {
  if constexpr (std::is_trivially_copyable_v<T> && sizeof(T) <= 8) {
    if (n < 16) {
      for (int64_t i = 0; i < n; ++i) d[i] = v;
      return;
    }
    unsigned char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    bool same = true;
    for (size_t k = 1; k < sizeof(T); ++k) same = same && b[k] == b[0];
    const size_t bytes = static_cast<size_t>(n) * sizeof(T);
    if (same) {
      std::memset(d, b[0], bytes);
      return;
    }
#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
    if (cpu_has_avx512()) {
      uint64_t pattern = 0;
      for (size_t k = 0; k < 8; k += sizeof(T))
        std::memcpy(reinterpret_cast<char*>(&pattern) + k, &v, sizeof(T));
      fill_pattern_avx512(reinterpret_cast<char*>(d), pattern, bytes);
      return;
    }
#endif
  }
  for (int64_t i = 0; i < n; ++i) d[i] = v;
}

// Coalesced dims of a strided copy.
struct Dims {
  std::vector<int64_t> n, s, d;
  size_t rank() const { return n.size(); }
};

Dims coalesce(const Shape& shape, const std::vector<int64_t>& ss, const std::vector<int64_t>& ds) {
  Dims r;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (!r.n.empty() && r.s.back() == ss[i] * shape[i] && r.d.back() == ds[i] * shape[i]) {
      r.n.back() *= shape[i];
      r.s.back() = ss[i];
      r.d.back() = ds[i];
    } else {
      r.n.push_back(shape[i]);
      r.s.push_back(ss[i]);
      r.d.push_back(ds[i]);
    }
  }
  return r;
}

// Walks a multi-index over some dims, tracking the source and destination offsets.
class Odometer {
 public:
  Odometer(std::vector<int64_t> n, std::vector<int64_t> s, std::vector<int64_t> d)
      : n_(std::move(n)), s_(std::move(s)), d_(std::move(d)), idx_(n_.size(), 0) {}

  int64_t count() const {
    int64_t c = 1;
    for (int64_t v : n_) c *= v;
    return c;
  }
  void seek(int64_t linear) {
    so_ = 0;
    do_ = 0;
    for (size_t r = n_.size(); r-- > 0;) {
      idx_[r] = linear % n_[r];
      linear /= n_[r];
      so_ += idx_[r] * s_[r];
      do_ += idx_[r] * d_[r];
    }
  }
  void next() {
    for (size_t r = n_.size(); r-- > 0;) {
      ++idx_[r];
      so_ += s_[r];
      do_ += d_[r];
      if (idx_[r] < n_[r]) return;
      so_ -= n_[r] * s_[r];
      do_ -= n_[r] * d_[r];
      idx_[r] = 0;
    }
  }
  int64_t src_offset() const { return so_; }
  int64_t dst_offset() const { return do_; }

 private:
  std::vector<int64_t> n_, s_, d_, idx_;
  int64_t so_ = 0, do_ = 0;
};

constexpr int64_t kBlock = 32;

template <typename T>
void strided_copy_typed(const T* src, T* dst, const Dims& dm, ThreadPool* pool) {
  const size_t rank = dm.rank();
  if (rank == 0) {
    dst[0] = src[0];
    return;
  }
  const size_t last = rank - 1;
  const int64_t len = dm.n[last];
  const int64_t si = dm.s[last];
  const int64_t di = dm.d[last];

  // A 2-D transpose pattern: the destination is contiguous along the last dim while the
  // source is contiguous along another dim k. Copy in cache-sized tiles. (A source that
  // repeats one value along the last dim, si == 0, is a broadcast: the row fills below.)
  if (di == 1 && si != 1 && si != 0 && len >= 8) {
    size_t k = rank;
    for (size_t r = 0; r < last; ++r) {
      if (dm.s[r] == 1 && dm.n[r] >= 8) k = r;
    }
    if (k != rank) {
      std::vector<int64_t> on, os, od;
      for (size_t r = 0; r < last; ++r) {
        if (r == k) continue;
        on.push_back(dm.n[r]);
        os.push_back(dm.s[r]);
        od.push_back(dm.d[r]);
      }
      const int64_t nk = dm.n[k];
      const int64_t dk = dm.d[k];
      const int64_t nbi = (nk + kBlock - 1) / kBlock;
      Odometer probe(on, os, od);
      const int64_t items = probe.count() * nbi;
      parallel_for(pool, items, static_cast<double>(kBlock * len), [&](int64_t b, int64_t e) {
        Odometer it(on, os, od);
        for (int64_t item = b; item < e; ++item) {
          it.seek(item / nbi);
          const int64_t i0 = (item % nbi) * kBlock;
          const int64_t i1 = std::min(nk, i0 + kBlock);
          const T* sb = src + it.src_offset();
          T* db = dst + it.dst_offset();
          for (int64_t j0 = 0; j0 < len; j0 += kBlock) {
            const int64_t j1 = std::min(len, j0 + kBlock);
            for (int64_t i = i0; i < i1; ++i) {
              const T* sp = sb + i;
              T* dp = db + i * dk;
              for (int64_t j = j0; j < j1; ++j) dp[j] = sp[j * si];
            }
          }
        }
      });
      return;
    }
  }

  std::vector<int64_t> on(dm.n.begin(), dm.n.begin() + last);
  std::vector<int64_t> os(dm.s.begin(), dm.s.begin() + last);
  std::vector<int64_t> od(dm.d.begin(), dm.d.begin() + last);
  Odometer probe(on, os, od);
  const int64_t rows = probe.count();
  parallel_for(pool, rows, static_cast<double>(len), [&](int64_t b, int64_t e) {
    Odometer it(on, os, od);
    it.seek(b);
    for (int64_t row = b; row < e; ++row, it.next()) {
      const T* sp = src + it.src_offset();
      T* dp = dst + it.dst_offset();
      if (si == 1 && di == 1) {
        copy_run(sp, dp, len);
      } else if (si == 0 && di == 1) {
        fill_run(dp, sp[0], len);
      } else {
        for (int64_t j = 0; j < len; ++j) dp[j * di] = sp[j * si];
      }
    }
  });
}

}  // namespace

void copy_elements(DataType dt, const void* src, void* dst, int64_t count) {
  if (count <= 0) return;
  if (dt == DataType::kString) {
    copy_run(static_cast<const std::string*>(src), static_cast<std::string*>(dst), count);
    return;
  }
  const size_t es = dtype_size(dt);
  ORTLITE_ENFORCE(es > 0, kNotImplemented, "tensor copy: element type ", dtype_name(dt),
                  " is not supported");
  std::memcpy(dst, src, static_cast<size_t>(count) * es);
}

void parallel_copy(DataType dt, const void* src, void* dst, int64_t count, ThreadPool* pool) {
  if (count <= 0) return;
  const size_t es = dt == DataType::kString ? sizeof(std::string) : dtype_size(dt);
  constexpr int64_t kChunk = 1 << 16;
  if (count <= kChunk || pool == nullptr) {
    copy_elements(dt, src, dst, count);
    return;
  }
  const int64_t chunks = (count + kChunk - 1) / kChunk;
  parallel_for(pool, chunks, static_cast<double>(kChunk), [&](int64_t b, int64_t e) {
    const int64_t first = b * kChunk;
    const int64_t end = std::min(count, e * kChunk);
    copy_elements(dt, static_cast<const char*>(src) + first * es,
                  static_cast<char*>(dst) + first * es, end - first);
  });
}

void fill_elements(DataType dt, const void* value, void* dst, int64_t count) {
  if (count <= 0) return;
  dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    fill_run(static_cast<T*>(dst), *static_cast<const T*>(value), count);
  });
}

void strided_copy(DataType dt, const void* src, const std::vector<int64_t>& src_strides, void* dst,
                  const std::vector<int64_t>& dst_strides, const Shape& shape, ThreadPool* pool) {
  for (int64_t d : shape) {
    if (d == 0) return;
  }
  const Dims dm = coalesce(shape, src_strides, dst_strides);
  dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    strided_copy_typed(static_cast<const T*>(src), static_cast<T*>(dst), dm, pool);
  });
}

int64_t checked_numel(const KernelContext& ctx, DataType dt, const Shape& shape, const char* what) {
  int64_t n = 0;
  try {
    n = shape_size(shape);
  } catch (const Error& e) {
    ctx.fail(StatusCode::kInvalidArgument, std::string(what) + ": invalid output shape " +
                                               shape_to_string(shape) + ": " + e.what());
  }
  const size_t es = dt == DataType::kString ? sizeof(std::string) : dtype_size(dt);
  if (es > 0 && n > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(es)) {
    // A valid shape whose storage no size can hold: Fail, as allocation failures are.
    ctx.fail(StatusCode::kFail, std::string(what) + ": output shape " + shape_to_string(shape) +
                                    " is too large: " + std::to_string(n) + " elements of " +
                                    std::to_string(es) + " bytes overflow a 64-bit byte size");
  }
  return n;
}

}  // namespace tensor_ops
}  // namespace ortlite
