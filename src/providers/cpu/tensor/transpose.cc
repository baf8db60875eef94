// Transpose: a strided copy (tensor_util.cc) that memcpys rows when the permutation keeps
// the innermost dim and tiles the copy for the 2-D transpose pattern. A permutation that
// only moves size-1 dims is a reshape of the input (no copy). Batched 2-D transposes
// (NHWC <-> NCHW, swapping the last two dims) have their own kernels: with 2..4 channels
// every element size permutes whole vectors (AVX-512, at run time), and 1-, 2- and 4-byte
// elements go through register tiles (SSE2 or AVX-512 for 1 and 2 bytes).
#include <algorithm>
#include <cstring>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "compute/cpu_avx512.h"

#include "compute/conv_avx512.h"
#include "compute/simd.h"
#include "providers/cpu/tensor/tensor_kernels.h"
#include "providers/shared/transpose_slice.h"

// GCC 12's AVX-512 headers start some intrinsics (unpacks, extracts, narrowing moves)
// from an undefined vector and then report it as (maybe-)uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

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
// registers with AVX-512, or as 8 x 8 blocks with AVX2), split over the thread pool in
// blocks of 64 rows x 64 columns. The blocks are ordered column block first, row block
// last, so that each thread writes a contiguous run of dst's rows. (Split by rows of tiles,
// an NCHW -> NHWC transpose of 64 channels had the two threads write alternate 64-byte
// pieces of every 256-byte row of dst: 2x the time of one thread.)
void transpose_2d_u32(const uint32_t* src, uint32_t* dst, int64_t B, int64_t R, int64_t C,
                      ThreadPool* pool) {
  constexpr int64_t kBlock = 64;
  const int64_t row_blocks = (R + kBlock - 1) / kBlock, col_blocks = (C + kBlock - 1) / kBlock;
  // ORTLITE_FAST_ISA caps the choice (avx2: the 8 x 8 blocks, sse2: element by element).
  const int cap = nn::fast_isa_cap();
  const bool vec = nn::cvx::available() && cap >= 2;
#if defined(ORTLITE_HAVE_AVX2_TRANSPOSE)
  const bool vec8 = !vec && cap >= 1 && cpu_has_avx2();
#else
  const bool vec8 = false;
#endif
  const double cost = static_cast<double>(kBlock * kBlock);
  parallel_for(pool, B * col_blocks * row_blocks, cost, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / (col_blocks * row_blocks);
      const int64_t cb = (t / row_blocks) % col_blocks, rb0 = (t % row_blocks) * kBlock;
      const int64_t cbeg = cb * kBlock, cend = std::min(C, cbeg + kBlock);
      for (int64_t r0 = rb0; r0 < std::min(R, rb0 + kBlock); r0 += 16) {
        const int rows = static_cast<int>(std::min<int64_t>(16, R - r0));
        const uint32_t* s = src + b * R * C + r0 * C;
        uint32_t* d = dst + b * R * C + r0;
        for (int64_t c0 = cbeg; c0 < cend; c0 += 16) {
          const int cols = static_cast<int>(std::min<int64_t>(16, cend - c0));
          if (vec) {
            nn::cvx::transpose16(reinterpret_cast<const float*>(s + c0), C, rows, cols,
                                 reinterpret_cast<float*>(d + c0 * R), R);
            continue;
          }
          for (int rb = 0; rb < rows; rb += 8) {
            for (int cb8 = 0; cb8 < cols; cb8 += 8) {
#if defined(ORTLITE_HAVE_AVX2_TRANSPOSE)
              if (vec8 && rb + 8 <= rows && cb8 + 8 <= cols) {
                transpose8_avx2(reinterpret_cast<const float*>(s + rb * C + c0 + cb8), C,
                                reinterpret_cast<float*>(d + (c0 + cb8) * R + rb), R);
                continue;
              }
#endif
              const int re = std::min(rows, rb + 8), ce = std::min(cols, cb8 + 8);
              for (int c = cb8; c < ce; ++c)
                for (int r = rb; r < re; ++r) d[(c0 + c) * R + r] = s[r * C + c0 + c];
            }
          }
        }
      }
    }
  });
}

#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
// One 512-bit register of elements of kBytes bytes for the narrow transposes: L lanes,
// two-source permutes and blends of that width. Bytes travel widened to 16 bits (32 per
// register: load zero-extends, store narrows), so that AVX-512BW's 16-bit permutes do.
template <int kBytes>
struct Lanes;

template <>
struct Lanes<8> {
  static constexpr int L = 8;
  ORTLITE_AVX512 static __m512i load(const void* p) { return _mm512_loadu_si512(p); }
  ORTLITE_AVX512 static void store(void* p, __m512i v) { _mm512_storeu_si512(p, v); }
  ORTLITE_AVX512 static __m512i perm(__m512i a, __m512i i, __m512i b) {
    return _mm512_permutex2var_epi64(a, i, b);
  }
  ORTLITE_AVX512 static __m512i blend(uint64_t m, __m512i a, __m512i b) {
    return _mm512_mask_blend_epi64(static_cast<__mmask8>(m), a, b);
  }
};

template <>
struct Lanes<4> {
  static constexpr int L = 16;
  ORTLITE_AVX512 static __m512i load(const void* p) { return _mm512_loadu_si512(p); }
  ORTLITE_AVX512 static void store(void* p, __m512i v) { _mm512_storeu_si512(p, v); }
  ORTLITE_AVX512 static __m512i perm(__m512i a, __m512i i, __m512i b) {
    return _mm512_permutex2var_epi32(a, i, b);
  }
  ORTLITE_AVX512 static __m512i blend(uint64_t m, __m512i a, __m512i b) {
    return _mm512_mask_blend_epi32(static_cast<__mmask16>(m), a, b);
  }
};

template <>
struct Lanes<2> {
  static constexpr int L = 32;
  ORTLITE_AVX512 static __m512i load(const void* p) { return _mm512_loadu_si512(p); }
  ORTLITE_AVX512 static void store(void* p, __m512i v) { _mm512_storeu_si512(p, v); }
  ORTLITE_AVX512 static __m512i perm(__m512i a, __m512i i, __m512i b) {
    return _mm512_permutex2var_epi16(a, i, b);
  }
  ORTLITE_AVX512 static __m512i blend(uint64_t m, __m512i a, __m512i b) {
    return _mm512_mask_blend_epi16(static_cast<__mmask32>(m), a, b);
  }
};

template <>
struct Lanes<1> : Lanes<2> {
  ORTLITE_AVX512 static __m512i load(const void* p) {
    return _mm512_cvtepu8_epi16(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
  }
  ORTLITE_AVX512 static void store(void* p, __m512i v) {
    _mm256_storeu_si256(static_cast<__m256i*>(p), _mm512_cvtepi16_epi8(v));
  }
};

// K (2..4) registers in, K out: output lane l of register v is lane lane[v][l] of input
// register id[v][l]. Done as two two-source permutes (inputs 0/1 and 2/3) and a blend.
struct Shuffle4 {
  __m512i idx[4];
  uint64_t hi[4];  // lanes taken from inputs 2/3
};

template <int kBytes>
ORTLITE_AVX512 Shuffle4 make_shuffle(int K, bool deinterleave) {
  constexpr int L = Lanes<kBytes>::L, W = 64 / L;  // lanes, bytes per lane
  Shuffle4 sh{};
  for (int v = 0; v < K; ++v) {
    alignas(64) unsigned char idx[64];
    uint64_t hi = 0;
    for (int l = 0; l < L; ++l) {
      // Deinterleave (rows of K channels -> K planes): output v lane l is element K*l + v
      // of the L*K inputs. Interleave (K planes -> rows): output element L*v + l is plane
      // (L*v + l) % K, position (L*v + l) / K.
      const int e = deinterleave ? K * l + v : L * v + l;
      const int id = deinterleave ? e / L : e % K;
      const int lane = deinterleave ? e % L : e / K;
      const uint64_t sel = static_cast<uint64_t>((id & 1) * L + lane);
      std::memcpy(idx + l * W, &sel, W);  // little-endian: the low W bytes
      if (id >= 2) hi |= uint64_t{1} << l;
    }
    sh.idx[v] = _mm512_load_si512(idx);
    sh.hi[v] = hi;
  }
  return sh;
}

template <int K, int kBytes>
ORTLITE_AVX512 inline void shuffle_block(const Shuffle4& sh, const __m512i* in, __m512i* out) {
  using V = Lanes<kBytes>;
#pragma GCC unroll 4
  for (int v = 0; v < K; ++v) {
    const __m512i lo = V::perm(in[0], sh.idx[v], in[1]);
    if constexpr (K <= 2) {
      out[v] = lo;
    } else {
      const __m512i hi = V::perm(in[2], sh.idx[v], in[K == 4 ? 3 : 2]);
      out[v] = V::blend(sh.hi[v], lo, hi);
    }
  }
}

// dst[c][r] = src[r][c] with C = K channels per row: rows [r0, r1), L at a time (the rest
// is left to the caller); returns the end of the rows done.
template <int K, int kBytes>
ORTLITE_AVX512 int64_t deinterleave_rows(const char* src, char* dst, int64_t R, int64_t r0,
                                         int64_t r1) {
  using V = Lanes<kBytes>;
  constexpr int L = V::L;
  const Shuffle4 sh = make_shuffle<kBytes>(K, true);
  int64_t r = r0;
  for (; r + L <= r1; r += L) {
    __m512i in[K], out[K];
#pragma GCC unroll 4
    for (int v = 0; v < K; ++v) in[v] = V::load(src + (r * K + L * v) * kBytes);
    shuffle_block<K, kBytes>(sh, in, out);
#pragma GCC unroll 4
    for (int v = 0; v < K; ++v) V::store(dst + (v * R + r) * kBytes, out[v]);
  }
  return r;
}

// dst[c][r] = src[r][c] with R = K rows (planes): columns [c0, c1), L at a time.
template <int K, int kBytes>
ORTLITE_AVX512 int64_t interleave_cols(const char* src, char* dst, int64_t C, int64_t c0,
                                       int64_t c1) {
  using V = Lanes<kBytes>;
  constexpr int L = V::L;
  const Shuffle4 sh = make_shuffle<kBytes>(K, false);
  int64_t c = c0;
  for (; c + L <= c1; c += L) {
    __m512i in[K], out[K];
#pragma GCC unroll 4
    for (int v = 0; v < K; ++v) in[v] = V::load(src + (v * C + c) * kBytes);
    shuffle_block<K, kBytes>(sh, in, out);
#pragma GCC unroll 4
    for (int v = 0; v < K; ++v) V::store(dst + (c * K + L * v) * kBytes, out[v]);
  }
  return c;
}

template <int kBytes>
ORTLITE_AVX512 int64_t narrow_vectors(bool narrow_c, int K, const char* s, char* d, int64_t R,
                                      int64_t C, int64_t lo, int64_t hi) {
  if (narrow_c) {
    return K == 2   ? deinterleave_rows<2, kBytes>(s, d, R, lo, hi)
           : K == 3 ? deinterleave_rows<3, kBytes>(s, d, R, lo, hi)
                    : deinterleave_rows<4, kBytes>(s, d, R, lo, hi);
  }
  return K == 2   ? interleave_cols<2, kBytes>(s, d, C, lo, hi)
         : K == 3 ? interleave_cols<3, kBytes>(s, d, C, lo, hi)
                  : interleave_cols<4, kBytes>(s, d, C, lo, hi);
}
#endif

// The rows (narrow_c) or columns [lo, hi) of a narrow transpose, element by element, K a
// constant so that the inner loop unrolls.
template <int K, typename E>
void narrow_scalar(bool narrow_c, const E* s, E* d, int64_t R, int64_t C, int64_t lo, int64_t hi) {
  if (narrow_c) {
    for (int64_t r = lo; r < hi; ++r)
      for (int c = 0; c < K; ++c) d[c * R + r] = s[r * K + c];
  } else {
    for (int64_t c = lo; c < hi; ++c)
      for (int r = 0; r < K; ++r) d[c * K + r] = s[r * C + c];
  }
}

// A batch of R x C -> C x R transposes of elements E where R or C is 2..4 (RGB / RGBA
// planes <-> pixels, pairs): permutes across whole registers (AVX-512, unless
// ORTLITE_FAST_ISA caps it) instead of tiles that would be mostly empty; the rest, and
// every element without AVX-512, element by element with the channel count a constant.
// Returns false when it does not apply (then nothing is written).
template <typename E>
bool transpose_2d_small(const E* src, E* dst, int64_t B, int64_t R, int64_t C, ThreadPool* pool) {
  const bool narrow_c = C >= 2 && C <= 4;  // deinterleave: rows of C channels -> planes
  const bool narrow_r = !narrow_c && R >= 2 && R <= 4;
  if (!narrow_c && !narrow_r) return false;
#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
  const bool vec = cpu_has_avx512() && nn::fast_isa_cap() >= 2;
#else
  const bool vec = false;
#endif
  const int64_t len = narrow_c ? R : C;  // the long dim, split in chunks
  constexpr int64_t kChunk = 4096;
  const int64_t chunks = (len + kChunk - 1) / kChunk;
  const int K = static_cast<int>(narrow_c ? C : R);
  parallel_for(pool, B * chunks, static_cast<double>(kChunk * K), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / chunks;
      const int64_t lo = (t % chunks) * kChunk, hi = std::min(len, lo + kChunk);
      const E* s = src + b * R * C;
      E* d = dst + b * R * C;
      int64_t done = lo;
#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
      if (vec) {
        done = narrow_vectors<static_cast<int>(sizeof(E))>(
            narrow_c, K, reinterpret_cast<const char*>(s), reinterpret_cast<char*>(d), R, C, lo,
            hi);
      }
#else
      (void)vec;
#endif
      if (K == 2) {
        narrow_scalar<2>(narrow_c, s, d, R, C, done, hi);
      } else if (K == 3) {
        narrow_scalar<3>(narrow_c, s, d, R, C, done, hi);
      } else {
        narrow_scalar<4>(narrow_c, s, d, R, C, done, hi);
      }
    }
  });
  return true;
}

// dst[b][c][r] = src[b][r][c] for 1- or 2-byte elements (E): kT x kT tiles of one SSE2
// register per row (16 x 16 bytes, 8 x 8 halves; with AVX-512 strips of four tiles
// stacked, written in 64-byte columns) inside 64 x 64 blocks, so that each block writes whole cache
// lines; edges element by element. Split over the pool by blocks of rows.
#if defined(__SSE2__)
// The 16 x 16 byte transpose: interleaves of 8-, 16-, 32- and 64-bit units; register i
// then holds column bitreverse4(i).
inline void transpose_tile(const uint8_t* s, int64_t lds, uint8_t* d, int64_t ldd) {
  __m128i a[16], b[16];
  for (int i = 0; i < 16; ++i)
    a[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i * lds));
  for (int i = 0; i < 8; ++i) {
    b[2 * i] = _mm_unpacklo_epi8(a[2 * i], a[2 * i + 1]);
    b[2 * i + 1] = _mm_unpackhi_epi8(a[2 * i], a[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 2; ++j) {
      a[4 * i + j] = _mm_unpacklo_epi16(b[4 * i + j], b[4 * i + j + 2]);
      a[4 * i + j + 2] = _mm_unpackhi_epi16(b[4 * i + j], b[4 * i + j + 2]);
    }
  }
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) {
      b[8 * i + j] = _mm_unpacklo_epi32(a[8 * i + j], a[8 * i + j + 4]);
      b[8 * i + j + 4] = _mm_unpackhi_epi32(a[8 * i + j], a[8 * i + j + 4]);
    }
  }
  static constexpr int kRev[16] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};
  for (int j = 0; j < 8; ++j) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + kRev[j] * ldd),
                     _mm_unpacklo_epi64(b[j], b[j + 8]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + kRev[j + 8] * ldd),
                     _mm_unpackhi_epi64(b[j], b[j + 8]));
  }
}

// The 8 x 8 transpose of 16-bit elements: interleaves of 16-, 32- and 64-bit units;
// register i then holds column bitreverse3(i).
inline void transpose_tile(const uint16_t* s, int64_t lds, uint16_t* d, int64_t ldd) {
  __m128i a[8], b[8];
  for (int i = 0; i < 8; ++i) a[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i * lds));
  for (int i = 0; i < 4; ++i) {
    b[2 * i] = _mm_unpacklo_epi16(a[2 * i], a[2 * i + 1]);
    b[2 * i + 1] = _mm_unpackhi_epi16(a[2 * i], a[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      a[4 * i + j] = _mm_unpacklo_epi32(b[4 * i + j], b[4 * i + j + 2]);
      a[4 * i + j + 2] = _mm_unpackhi_epi32(b[4 * i + j], b[4 * i + j + 2]);
    }
  }
  static constexpr int kRev[8] = {0, 4, 2, 6, 1, 5, 3, 7};
  for (int j = 0; j < 4; ++j) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + kRev[j] * ldd),
                     _mm_unpacklo_epi64(a[j], a[j + 4]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + kRev[j + 4] * ldd),
                     _mm_unpackhi_epi64(a[j], a[j + 4]));
  }
}
#endif

#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
// The same transposes for a strip of 4 * kT rows and kT columns: register i holds rows
// i, i + kT, i + 2 kT and i + 3 kT in its four 128-bit lanes (the unpacks work within
// lanes), so each result register is one 64-byte column of the strip.
ORTLITE_AVX512 inline __m512i load_rows4(const void* s, int64_t step) {
  const char* p = static_cast<const char*>(s);
  __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + step)), 1);
  v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * step)), 2);
  return _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 3 * step)), 3);
}

ORTLITE_AVX512 void transpose_strip(const uint8_t* s, int64_t lds, uint8_t* d, int64_t ldd) {
  __m512i a[16], b[16];
  for (int i = 0; i < 16; ++i) a[i] = load_rows4(s + i * lds, 16 * lds);
  for (int i = 0; i < 8; ++i) {
    b[2 * i] = _mm512_unpacklo_epi8(a[2 * i], a[2 * i + 1]);
    b[2 * i + 1] = _mm512_unpackhi_epi8(a[2 * i], a[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 2; ++j) {
      a[4 * i + j] = _mm512_unpacklo_epi16(b[4 * i + j], b[4 * i + j + 2]);
      a[4 * i + j + 2] = _mm512_unpackhi_epi16(b[4 * i + j], b[4 * i + j + 2]);
    }
  }
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) {
      b[8 * i + j] = _mm512_unpacklo_epi32(a[8 * i + j], a[8 * i + j + 4]);
      b[8 * i + j + 4] = _mm512_unpackhi_epi32(a[8 * i + j], a[8 * i + j + 4]);
    }
  }
  static constexpr int kRev[16] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};
  for (int j = 0; j < 8; ++j) {
    _mm512_storeu_si512(d + kRev[j] * ldd, _mm512_unpacklo_epi64(b[j], b[j + 8]));
    _mm512_storeu_si512(d + kRev[j + 8] * ldd, _mm512_unpackhi_epi64(b[j], b[j + 8]));
  }
}

ORTLITE_AVX512 void transpose_strip(const uint16_t* s, int64_t lds, uint16_t* d, int64_t ldd) {
  __m512i a[8], b[8];
  for (int i = 0; i < 8; ++i) a[i] = load_rows4(s + i * lds, 8 * lds * 2);
  for (int i = 0; i < 4; ++i) {
    b[2 * i] = _mm512_unpacklo_epi16(a[2 * i], a[2 * i + 1]);
    b[2 * i + 1] = _mm512_unpackhi_epi16(a[2 * i], a[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      a[4 * i + j] = _mm512_unpacklo_epi32(b[4 * i + j], b[4 * i + j + 2]);
      a[4 * i + j + 2] = _mm512_unpackhi_epi32(b[4 * i + j], b[4 * i + j + 2]);
    }
  }
  static constexpr int kRev[8] = {0, 4, 2, 6, 1, 5, 3, 7};
  for (int j = 0; j < 4; ++j) {
    _mm512_storeu_si512(d + kRev[j] * ldd, _mm512_unpacklo_epi64(a[j], a[j + 4]));
    _mm512_storeu_si512(d + kRev[j + 4] * ldd, _mm512_unpackhi_epi64(a[j], a[j + 4]));
  }
}
#endif

template <typename E>
void transpose_2d_narrow_elems(const E* src, E* dst, int64_t B, int64_t R, int64_t C,
                               ThreadPool* pool) {
  constexpr int64_t kBlock = 64;
  [[maybe_unused]] constexpr int64_t kT = 16 / sizeof(E);  // tile side
  const int64_t row_blocks = (R + kBlock - 1) / kBlock;
#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
  // ORTLITE_FAST_ISA below avx512 keeps the SSE2 tiles.
  [[maybe_unused]] const bool wide = cpu_has_avx512() && nn::fast_isa_cap() >= 2;
#endif
  parallel_for(pool, B * row_blocks, static_cast<double>(kBlock * C), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / row_blocks, r0 = (t % row_blocks) * kBlock;
      const int64_t r1 = std::min(R, r0 + kBlock);
      const E* s = src + b * R * C;
      E* d = dst + b * R * C;
      for (int64_t c0 = 0; c0 < C; c0 += kBlock) {
        const int64_t c1 = std::min(C, c0 + kBlock);
        int64_t re = r0, ce = c0;  // the ends of the full tiles
#if defined(__SSE2__)
        re = r0 + (r1 - r0) / kT * kT;
        ce = c0 + (c1 - c0) / kT * kT;
        int64_t r = r0;
#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
        if (wide) {
          for (; r + 4 * kT <= re; r += 4 * kT)
            for (int64_t c = c0; c < ce; c += kT)
              transpose_strip(s + r * C + c, C, d + c * R + r, R);
        }
#endif
        for (; r < re; r += kT)
          for (int64_t c = c0; c < ce; c += kT) transpose_tile(s + r * C + c, C, d + c * R + r, R);
#endif
        for (int64_t c = c0; c < c1; ++c) {
          for (int64_t r = c < ce ? re : r0; r < r1; ++r) d[c * R + r] = s[r * C + c];
        }
      }
    }
  });
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
    tensor_ops::transpose_dense(data.dtype(), data.raw_data(), in, perm, y.raw_data(),
                                ctx.thread_pool());
  }

 private:
  tensor_ops::TransposeAttrs attrs_;
};

}  // namespace

namespace tensor_ops {

void transpose_dense(DataType dt, const void* src, const Shape& in,
                     const std::vector<int64_t>& perm, void* dst, ThreadPool* pool) {
  int64_t B, R, C;
  const size_t es = dtype_size(dt);
  if (dt != DataType::kString && batched_2d(in, perm, &B, &R, &C) && R > 1 && C > 1) {
    switch (es) {
      case 1:
        if (transpose_2d_small(static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), B, R,
                               C, pool))
          return;
        return transpose_2d_narrow_elems(static_cast<const uint8_t*>(src),
                                         static_cast<uint8_t*>(dst), B, R, C, pool);
      case 2:
        if (transpose_2d_small(static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), B, R,
                               C, pool))
          return;
        return transpose_2d_narrow_elems(static_cast<const uint16_t*>(src),
                                         static_cast<uint16_t*>(dst), B, R, C, pool);
      case 4:
        if (transpose_2d_small(static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), B, R,
                               C, pool))
          return;
        return transpose_2d_u32(static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), B,
                                R, C, pool);
      case 8:
        // Tiles of 8-byte elements are left to the strided copy (its blocked loop keeps
        // up); the narrow shapes are not.
        if (transpose_2d_small(static_cast<const uint64_t*>(src), static_cast<uint64_t*>(dst), B, R,
                               C, pool))
          return;
        break;
      default:
        break;
    }
  }
  const StridedView view = transpose_view(in, perm);
  strided_copy_dense(dt, src, view.strides, dst, view.shape, pool);
}

}  // namespace tensor_ops

void register_transpose_kernels(KernelRegistry& r) {
  r.add_versions("Transpose", {1, 13, 21, 23}, make_factory<Transpose>());
}

}  // namespace ortlite

#pragma GCC diagnostic pop
