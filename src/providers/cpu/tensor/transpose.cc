// Transpose: a strided copy (tensor_util.cc) that memcpys rows when the permutation keeps
// the innermost dim and tiles the copy for the 2-D transpose pattern. A permutation that
// only moves size-1 dims is a reshape of the input (no copy). With 2..4 channels
// (NHWC <-> NCHW of images) the 4-byte copy permutes whole vectors (AVX-512, at run time).
#include <algorithm>
#include <cstring>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#include "compute/cpu_avx512.h"

#include "compute/conv_avx512.h"
#include "compute/simd.h"
#include "providers/cpu/tensor/tensor_kernels.h"
#include "providers/shared/transpose_slice.h"

namespace ortlite {
namespace {

// When `perm` keeps axes [0, k) and moves the block [j, rank) in front of [k, j) (NHWC <->
// NCHW, a matrix transpose), the copy is a batch of B matrix transposes of R x C into C x R.
bool batched_2d(const Shape& in, const std::vector<int64_t>& perm, int64_t* B, int64_t* R,
                int64_t* C) {
  const size_t rank = perm.size();
  size_t k = 0;
  while (k < rank && perm[k] == static_cast<int64_t>(k)) ++k;
  if (k + 1 >= rank) return false;
  const size_t j = static_cast<size_t>(perm[k]);
  if (j <= k) return false;
  for (size_t i = 0; i < rank - j; ++i)
    if (perm[k + i] != static_cast<int64_t>(j + i)) return false;
  for (size_t i = 0; i < j - k; ++i)
    if (perm[k + rank - j + i] != static_cast<int64_t>(k + i)) return false;
  *B = *R = *C = 1;
  for (size_t i = 0; i < k; ++i) *B *= in[i];
  for (size_t i = k; i < j; ++i) *R *= in[i];
  for (size_t i = j; i < rank; ++i) *C *= in[i];
  return true;
}

#if defined(__GNUC__) && defined(__x86_64__)
#define ORTLITE_HAVE_AVX2_TRANSPOSE 1
// dst[c * ldd + r] = src[r * lds + c] for an 8 x 8 block of 4-byte elements, in AVX2
// registers: 32-bit and 64-bit interleaves, then the 128-bit halves.
__attribute__((target("avx2"))) void transpose8_avx2(const float* src, int64_t lds, float* dst,
                                                     int64_t ldd) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20);
    t[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
  }
  for (int i = 0; i < 8; ++i) _mm256_storeu_ps(dst + i * ldd, t[i]);
}

bool cpu_has_avx2() {
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return ok;
}
#endif

// dst[b][c][r] = src[b][r][c] for 4-byte elements, in 16 x 16 tiles (transposed in
// registers with AVX-512, or as 8 x 8 blocks with AVX2), split over the thread pool by rows
// of tiles.
void transpose_2d_u32(const uint32_t* src, uint32_t* dst, int64_t B, int64_t R, int64_t C,
                      ThreadPool* pool) {
  const int64_t tiles_r = (R + 15) / 16;
  // ORTLITE_FAST_ISA caps the choice (avx2: the 8 x 8 blocks, sse2: element by element).
  const int cap = nn::fast_isa_cap();
  const bool vec = nn::cvx::available() && cap >= 2;
#if defined(ORTLITE_HAVE_AVX2_TRANSPOSE)
  const bool vec8 = !vec && cap >= 1 && cpu_has_avx2();
#else
  const bool vec8 = false;
#endif
  parallel_for(pool, B * tiles_r, 16.0 * static_cast<double>(C), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / tiles_r, r0 = (t % tiles_r) * 16;
      const int rows = static_cast<int>(std::min<int64_t>(16, R - r0));
      const uint32_t* s = src + b * R * C + r0 * C;
      uint32_t* d = dst + b * R * C + r0;
      for (int64_t c0 = 0; c0 < C; c0 += 16) {
        const int cols = static_cast<int>(std::min<int64_t>(16, C - c0));
        if (vec) {
          nn::cvx::transpose16(reinterpret_cast<const float*>(s + c0), C, rows, cols,
                               reinterpret_cast<float*>(d + c0 * R), R);
          continue;
        }
        for (int rb = 0; rb < rows; rb += 8) {
          for (int cb = 0; cb < cols; cb += 8) {
#if defined(ORTLITE_HAVE_AVX2_TRANSPOSE)
            if (vec8 && rb + 8 <= rows && cb + 8 <= cols) {
              transpose8_avx2(reinterpret_cast<const float*>(s + rb * C + c0 + cb), C,
                              reinterpret_cast<float*>(d + (c0 + cb) * R + rb), R);
              continue;
            }
#endif
            const int re = std::min(rows, rb + 8), ce = std::min(cols, cb + 8);
            for (int c = cb; c < ce; ++c)
              for (int r = rb; r < re; ++r) d[(c0 + c) * R + r] = s[r * C + c0 + c];
          }
        }
      }
    }
  });
}

#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
// K (2..4) vectors of 16 lanes in, K out: output lane L of vector v is lane lane[v][L] of
// input vector id[v][L]. Done as two two-source permutes (inputs 0/1 and 2/3) and a blend.
struct Shuffle4 {
  __m512i idx[4];
  __mmask16 hi[4];  // lanes taken from inputs 2/3
};

ORTLITE_AVX512 Shuffle4 make_shuffle(int K, bool deinterleave) {
  Shuffle4 sh{};
  for (int v = 0; v < K; ++v) {
    alignas(64) int32_t idx[16];
    unsigned hi = 0;
    for (int L = 0; L < 16; ++L) {
      // Deinterleave (rows of K channels -> K planes): output v lane L is element K*L + v of
      // the 16*K inputs. Interleave (K planes -> rows): output element 16v + L is plane
      // (16v + L) % K, position (16v + L) / K.
      const int e = deinterleave ? K * L + v : 16 * v + L;
      const int id = deinterleave ? e / 16 : e % K;
      const int lane = deinterleave ? e % 16 : e / K;
      idx[L] = (id & 1) * 16 + lane;
      if (id >= 2) hi |= 1u << L;
    }
    sh.idx[v] = _mm512_load_si512(idx);
    sh.hi[v] = static_cast<__mmask16>(hi);
  }
  return sh;
}

template <int K>
ORTLITE_AVX512 inline void shuffle_block(const Shuffle4& sh, const __m512* in, __m512* out) {
#pragma GCC unroll 4
  for (int v = 0; v < K; ++v) {
    const __m512 lo = _mm512_permutex2var_ps(in[0], sh.idx[v], in[1]);
    if constexpr (K <= 2) {
      out[v] = lo;
    } else {
      const __m512 hi = _mm512_permutex2var_ps(in[2], sh.idx[v], in[K == 4 ? 3 : 2]);
      out[v] = _mm512_mask_blend_ps(sh.hi[v], lo, hi);
    }
  }
}

// dst[c][r] = src[r][c] with C = K channels per row: rows [r0, r1), 16 at a time (the
// rest is left to the caller); returns the end of the rows done.
template <int K>
ORTLITE_AVX512 int64_t deinterleave_rows(const float* src, float* dst, int64_t R, int64_t r0,
                                         int64_t r1) {
  const Shuffle4 sh = make_shuffle(K, true);
  int64_t r = r0;
  for (; r + 16 <= r1; r += 16) {
    __m512 in[K], out[K];
#pragma GCC unroll 4
    for (int v = 0; v < K; ++v) in[v] = _mm512_loadu_ps(src + r * K + 16 * v);
    shuffle_block<K>(sh, in, out);
#pragma GCC unroll 4
    for (int v = 0; v < K; ++v) _mm512_storeu_ps(dst + v * R + r, out[v]);
  }
  return r;
}

// dst[c][r] = src[r][c] with R = K rows (planes): columns [c0, c1), 16 at a time.
template <int K>
ORTLITE_AVX512 int64_t interleave_cols(const float* src, float* dst, int64_t C, int64_t c0,
                                       int64_t c1) {
  const Shuffle4 sh = make_shuffle(K, false);
  int64_t c = c0;
  for (; c + 16 <= c1; c += 16) {
    __m512 in[K], out[K];
#pragma GCC unroll 4
    for (int v = 0; v < K; ++v) in[v] = _mm512_loadu_ps(src + v * C + c);
    shuffle_block<K>(sh, in, out);
#pragma GCC unroll 4
    for (int v = 0; v < K; ++v) _mm512_storeu_ps(dst + c * K + 16 * v, out[v]);
  }
  return c;
}
#endif

// A batch of R x C -> C x R transposes of 4-byte elements where R or C is 2..4 (RGB / RGBA
// planes <-> pixels, pairs): permutes across whole vectors instead of 16 x 16 tiles that
// would be mostly empty. Returns false when it does not apply (then nothing is written).
bool transpose_2d_small(const uint32_t* src, uint32_t* dst, int64_t B, int64_t R, int64_t C,
                        ThreadPool* pool) {
  const bool narrow_c = C >= 2 && C <= 4;  // deinterleave: rows of C channels -> planes
  const bool narrow_r = !narrow_c && R >= 2 && R <= 4;
  if (!narrow_c && !narrow_r) return false;
#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
  if (!cpu_has_avx512()) return false;
  const int64_t len = narrow_c ? R : C;  // the long dim, split in chunks
  constexpr int64_t kChunk = 1024;
  const int64_t chunks = (len + kChunk - 1) / kChunk;
  const int K = static_cast<int>(narrow_c ? C : R);
  parallel_for(pool, B * chunks, static_cast<double>(kChunk * K), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / chunks;
      const int64_t lo = (t % chunks) * kChunk, hi = std::min(len, lo + kChunk);
      const float* s = reinterpret_cast<const float*>(src + b * R * C);
      float* d = reinterpret_cast<float*>(dst + b * R * C);
      int64_t done = lo;
      if (narrow_c) {
        done = K == 2   ? deinterleave_rows<2>(s, d, R, lo, hi)
               : K == 3 ? deinterleave_rows<3>(s, d, R, lo, hi)
                        : deinterleave_rows<4>(s, d, R, lo, hi);
        for (int64_t r = done; r < hi; ++r)
          for (int64_t c = 0; c < C; ++c) d[c * R + r] = s[r * C + c];
      } else {
        done = K == 2   ? interleave_cols<2>(s, d, C, lo, hi)
               : K == 3 ? interleave_cols<3>(s, d, C, lo, hi)
                        : interleave_cols<4>(s, d, C, lo, hi);
        for (int64_t c = done; c < hi; ++c)
          for (int64_t r = 0; r < R; ++r) d[c * R + r] = s[r * C + c];
      }
    }
  });
  return true;
#else
  (void)src;
  (void)dst;
  (void)B;
  (void)pool;
  return false;
#endif
}

class Transpose final : public Kernel {
 public:
  explicit Transpose(const KernelInfo& info) { attrs_.load(info); }

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.required_input(0);
    const Shape& in = data.shape();
    const size_t rank = in.size();
    const std::vector<int64_t> perm = attrs_.resolve(ctx, in);
    const tensor_ops::StridedView view = tensor_ops::transpose_view(in, perm);
    const Shape& out = view.shape;
    // Same memory order when the dims other than 1 keep their relative order.
    bool same_order = true;
    int64_t last = -1;
    for (size_t i = 0; i < rank; ++i) {
      if (out[i] == 1) continue;
      if (perm[i] < last) same_order = false;
      last = perm[i];
    }
    if (same_order || data.numel() == 0) {
      ctx.set_output(0, data.reshaped(out));
      return;
    }
    Tensor& y = ctx.allocate_output(0, data.dtype(), out);
    int64_t B, R, C;
    if (dtype_size(data.dtype()) == 4 && data.dtype() != DataType::kString &&
        batched_2d(in, perm, &B, &R, &C) && R > 1 && C > 1) {
      if (transpose_2d_small(static_cast<const uint32_t*>(data.raw_data()),
                             static_cast<uint32_t*>(y.raw_data()), B, R, C, ctx.thread_pool()))
        return;
      transpose_2d_u32(static_cast<const uint32_t*>(data.raw_data()),
                       static_cast<uint32_t*>(y.raw_data()), B, R, C, ctx.thread_pool());
      return;
    }
    tensor_ops::strided_copy_dense(data.dtype(), data.raw_data(), view.strides, y.raw_data(), out,
                                   ctx.thread_pool());
  }

 private:
  tensor_ops::TransposeAttrs attrs_;
};

}  // namespace

void register_transpose_kernels(KernelRegistry& r) {
  r.add_versions("Transpose", {1, 13, 21, 23}, make_factory<Transpose>());
}

}  // namespace ortlite
