// Float products of the fused GEMM on AMX tiles, to float32 accuracy (fused_gemm.h, amx).
//
// Each float x splits exactly into three bfloat16 values, x = x0 + x1 + x2: x0 is x rounded
// to bfloat16, x1 what is left rounded again, x2 the rest (8 significant bits each, the 24
// of the float). |x1| <= 2^-8 |x| and |x2| <= 2^-16 |x|, so of the nine part products of a
// b the three with i + j >= 3 come to at most about 2^-23 |a b|, the order of a float's own
// rounding step, and a . b is taken as the sum of the other six. tdpbf16ps multiplies
// bfloat16 pairs exactly and adds them into float32 accumulators; the six products run into
// the same 16 x 16 accumulators, A part by A part, each meeting the B parts it pairs with
// while its tiles are loaded (a2 b0, a1 b1, a1 b0, a0 b2, a0 b1, a0 b0). A float FMA does one
// multiply-add per lane and cycle; a tile instruction does 16 x 16 x 32 of them in 16
// cycles, so even six of them leave the tiles well ahead.
//
// Layouts (uint16 bfloat16 bits; K padded with zeros to a multiple of 32):
//   A operand, rows x K: [16-row tile][part][K / 32][16 rows][32]: an A tile per 32 k and
//   part. A MatMul's A is split into it per call (rows padded with zeros); a convolution's W
//   is made into it once (W on the left).
//   B operand, K x columns: [16-column tile][part][K / 2 pairs][16 columns][2]. A MatMul's
//   constant B is made into it once (W on the right); a convolution's X (column buffer or
//   input) is split into it per call.
// Weights' parts are made on their first large product (Packed::amx_parts). A unit of work
// is up to 128 rows x 256 columns of C, computed over K in blocks of 128 (a pair of column
// tiles' parts, 24 KiB, stays in L1 while the row tiles stream from L2) into a float scratch,
// pairs of row tiles x pairs of column tiles (four accumulators, two A and two B tiles: the
// eight tiles). With the last K block each 32 x 32 block goes through the epilogue (alpha,
// biases, Z, the activation) into C while it is in L1.
//
// Values the tiles would not take as a float product does (NaN, infinity, |x| >= 2^127,
// whose rounding could overflow, and subnormals, which tdpbf16ps reads as zero) make the
// product go back to the FMA kernel: weights are checked when their parts are made, the
// other operand while it is split.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <new>

#include "compute/amx_tiles.h"
#include "compute/fused_gemm.h"

#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__) && \
    (__GNUC__ >= 11 || defined(__clang__))
#define ORTLITE_HAVE_AMX_BF16 1
// GCC 12's masked-load intrinsics trip -Wmaybe-uninitialized on their own passthrough value.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace ortlite {
namespace nn {
namespace fgemm {

#if ORTLITE_HAVE_AMX_BF16
#pragma GCC push_options
#pragma GCC target("amx-tile,amx-bf16,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma")

namespace {

constexpr int64_t kUnitRowTiles = 8;   // 128 rows
constexpr int64_t kUnitColTiles = 16;  // 256 columns
constexpr int64_t kKBlock = 4;         // k steps of 32 per K block (128)

using amx_tiles::TileConfig;

// A float's bits whose value the split and the tiles do not carry as a float product would.
inline bool unsafe_bits(uint32_t u) {
  const uint32_t e = (u >> 23) & 0xFF;
  return e >= 0xFE || (e == 0 && (u & 0x7FFFFF) != 0);
}

// Bits of x rounded to bfloat16 (to nearest even), in the top half of a float.
inline uint32_t round_bf16(uint32_t u) {
  return (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000u;
}

inline void split_scalar(float x, uint16_t out[3]) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  float rest = x;
  for (int s = 0; s < 3; ++s) {
    const uint32_t h = round_bf16(u);
    out[s] = static_cast<uint16_t>(h >> 16);
    float hf;
    std::memcpy(&hf, &h, 4);
    rest -= hf;
    std::memcpy(&u, &rest, 4);
  }
}

// The three parts of 16 floats, as bfloat16 lanes (vcvtneps2bf16 rounds to nearest even;
// what it flushes as subnormal stays in the next remainder).
inline void split16(__m512 x, __m256i out[3]) {
  __m512 rest = x;
  for (int s = 0; s < 3; ++s) {
    const __m256bh h = _mm512_cvtneps_pbh(rest);
    out[s] = reinterpret_cast<const __m256i&>(h);
    if (s < 2) rest = _mm512_sub_ps(rest, _mm512_cvtpbh_ps(h));
  }
}

// Lanes of x the tiles do not take (see unsafe_bits): NaN, infinities, subnormals; and the
// running maximum of |x|, checked against 2^127 at the end.
inline __mmask16 unsafe16(__m512 x, __m512& amax) {
  amax = _mm512_max_ps(amax, _mm512_abs_ps(x));
  return _mm512_fpclass_ps_mask(x, 0x01 | 0x08 | 0x10 | 0x20 | 0x80);
}

// Splits rows [t0 * 16, t1 * 16) of A (row r at a + r * lda, K floats; rows >= M zero) into
// the tiles' layout, one 32-wide k step of a tile at a time (each part's 1 KiB written in
// order); false when a value is unsafe.
bool split_rows(const float* a, int64_t lda, int64_t M, int64_t K, int64_t kp, int64_t t0,
                int64_t t1, uint16_t* out) {
  const int64_t ks = kp / 32;
  __mmask16 bad = 0;
  __m512 amax = _mm512_setzero_ps();
  for (int64_t t = t0; t < t1; ++t) {
    uint16_t* tile = out + t * 3 * 16 * kp;
    const int64_t rows = std::min<int64_t>(16, M - t * 16);
    for (int64_t s = 0; s < ks; ++s) {
      const int64_t k = s * 32, left = K - k;
      const __mmask16 m0 = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
      const __mmask16 m1 = left >= 32  ? __mmask16(0xFFFF)
                           : left > 16 ? __mmask16((1u << (left - 16)) - 1)
                                       : __mmask16(0);
      for (int64_t r = 0; r < 16; ++r) {
        __m512 x0 = _mm512_setzero_ps(), x1 = _mm512_setzero_ps();
        if (r < rows) {
          const float* src = a + (t * 16 + r) * lda + k;
          x0 = _mm512_maskz_loadu_ps(m0, src);
          x1 = _mm512_maskz_loadu_ps(m1, src + 16);
        }
        bad |= unsafe16(x0, amax) | unsafe16(x1, amax);
        __m256i p0[3], p1[3];
        split16(x0, p0);
        split16(x1, p1);
        for (int p = 0; p < 3; ++p) {
          uint16_t* d = tile + p * 16 * kp + s * 512 + r * 32;
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), p0[p]);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 16), p1[p]);
        }
      }
    }
  }
  return bad == 0 && _mm512_reduce_max_ps(amax) < 0x1p127f;
}

// Accumulator tiles 0 (rows 0-15, cols 0-15), 1 (rows 0-15, cols 16-31), 2, 3 (rows 16-31)
// over k steps [k0, k1) of the six part products. a: the first row tile's parts; b: the first
// column tile's parts.
template <bool kTwoM, bool kTwoN>
void products(const uint16_t* a, const uint16_t* b, int64_t kp, int64_t k0, int64_t k1) {
  const int64_t part = 16 * kp, tile_step = 3 * 16 * kp;
  // A part pa meets B parts 2 - pa .. 0 while its tiles are loaded: six A tile loads (from
  // L2) per 24 tile products instead of twelve; the B tiles come from L1.
  for (int pa = 2; pa >= 0; --pa) {
    const uint16_t* a0 = a + pa * part;
    const uint16_t* a1 = a0 + tile_step;
    for (int64_t k = k0; k < k1; ++k) {
      _tile_loadd(4, a0 + k * 512, 64);
      if (kTwoM) _tile_loadd(5, a1 + k * 512, 64);
      for (int pb = 2 - pa; pb >= 0; --pb) {
        const uint16_t* b0 = b + pb * part + k * 512;
        _tile_loadd(6, b0, 64);
        _tile_dpbf16ps(0, 4, 6);
        if (kTwoN) {
          _tile_loadd(7, b0 + tile_step, 64);
          _tile_dpbf16ps(1, 4, 7);
        }
        if (kTwoM) {
          _tile_dpbf16ps(2, 5, 6);
          if (kTwoN) _tile_dpbf16ps(3, 5, 7);
        }
      }
    }
  }
}

// Scratch tiles at c (row stride ldc floats) for a block: zeroed or loaded, the products,
// stored back.
template <bool kTwoM, bool kTwoN>
void block(const uint16_t* a, const uint16_t* b, int64_t kp, int64_t k0, int64_t k1, float* c,
           int64_t ldc, bool load) {
  const int64_t stride = ldc * 4;
  if (load) {
    _tile_loadd(0, c, stride);
    if (kTwoN) _tile_loadd(1, c + 16, stride);
    if (kTwoM) _tile_loadd(2, c + 16 * ldc, stride);
    if (kTwoM && kTwoN) _tile_loadd(3, c + 16 * ldc + 16, stride);
  } else {
    _tile_zero(0);
    if (kTwoN) _tile_zero(1);
    if (kTwoM) _tile_zero(2);
    if (kTwoM && kTwoN) _tile_zero(3);
  }
  products<kTwoM, kTwoN>(a, b, kp, k0, k1);
  _tile_stored(0, c, stride);
  if (kTwoN) _tile_stored(1, c + 16, stride);
  if (kTwoM) _tile_stored(2, c + 16 * ldc, stride);
  if (kTwoM && kTwoN) _tile_stored(3, c + 16 * ldc + 16, stride);
}

// C rows [m0, m1), columns [n0, n1) = epilogue(scratch), scratch row stride lds.
void epilogue(const float* s, int64_t lds, int64_t m0, int64_t m1, int64_t n0, int64_t n1, float* C,
              int64_t ldc, const Epilogue& ep) {
  const bool relu_clip = ep.act.kind == ActKind::kRelu || ep.act.kind == ActKind::kClip;
  const bool leaky = ep.act.kind == ActKind::kLeakyRelu;
  const float lo = ep.act.kind == ActKind::kRelu ? 0.f : ep.act.p0;
  const float hi = ep.act.kind == ActKind::kClip ? ep.act.p1 : __builtin_inff();
  const __m512 alpha = _mm512_set1_ps(ep.alpha), vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi),
               zero = _mm512_setzero_ps();
  for (int64_t m = m0; m < m1; ++m) {
    const float* sr = s + (m - m0) * lds;
    float* cr = C + m * ldc;
    for (int64_t n = n0; n < n1; n += 16) {
      const int64_t left = n1 - n;
      const __mmask16 mk = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
      __m512 v = _mm512_maskz_loadu_ps(mk, sr + (n - n0));
      if (ep.alpha != 1.f) v = _mm512_mul_ps(v, alpha);
      if (ep.bias_row) v = _mm512_add_ps(v, _mm512_set1_ps(ep.bias_row[m]));
      if (ep.bias_col) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk, ep.bias_col + n));
      if (ep.z) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk, ep.z + m * ep.ldz + n));
      if (relu_clip) {
        // x < lo ? lo : x, then > hi ? hi : x; NaN compares false and stays.
        v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, vlo, _CMP_LT_OQ), v, vlo);
        v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, vhi, _CMP_GT_OQ), v, vhi);
      } else if (leaky) {
        v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, zero, _CMP_GE_OQ), _mm512_mul_ps(v, vlo), v);
      }
      _mm512_mask_storeu_ps(cr + n, mk, v);
    }
    if (!relu_clip && !leaky && ep.act.kind != ActKind::kNone)
      apply_act_f32(ep.act, cr + n0, n1 - n0);
  }
}

struct ScratchFree {
  void operator()(void* p) const { ::operator delete (p, std::align_val_t{64}); }
};

// A thread's reusable buffer of at least `bytes`.
void* thread_buffer(int which, size_t bytes) {
  struct Buf {
    std::unique_ptr<void, ScratchFree> p;
    size_t size = 0;
  };
  thread_local Buf bufs[2];
  Buf& b = bufs[which];
  if (b.size < bytes) {
    b.p.reset(::operator new (bytes, std::align_val_t{64}));
    b.size = bytes;
  }
  return b.p.get();
}

bool cpu_amx_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  // AVX512F, DQ, BW, VL (the split and the epilogue), and AVX512_BF16 (vcvtneps2bf16: leaf 7,
  // subleaf 1, EAX bit 5).
  constexpr unsigned kAvx512 = (1u << 16) | (1u << 17) | (1u << 30) | (1u << 31);
  if ((ebx & kAvx512) != kAvx512) return false;
  unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  if (!__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) || !(a1 & (1u << 5))) return false;
  return amx_tiles::usable(1u << 22);  // AMX-BF16
}

}  // namespace

namespace amx {

bool available_on_cpu() {
  static const bool ok = cpu_amx_bf16();
  return ok;
}

bool make_parts(const float* panels, int64_t n, int64_t K, bool a_form, Parts* out) {
  const int64_t kp = (K + 31) / 32 * 32, nt = (n + 15) / 16;
  const size_t count = static_cast<size_t>(nt * 3 * 16 * kp);
  std::unique_ptr<uint16_t[], Parts::Free> d(
      static_cast<uint16_t*>(::operator new (count * 2, std::align_val_t{64})));
  std::memset(d.get(), 0, count * 2);
  for (int64_t j = 0; j < n; ++j) {
    const float* src = panels + (j / kNR) * K * kNR + j % kNR;
    uint16_t* tile = d.get() + (j / 16) * 3 * 16 * kp;
    for (int64_t k = 0; k < K; ++k) {
      const float x = src[k * kNR];
      uint32_t u;
      std::memcpy(&u, &x, 4);
      if (unsafe_bits(u)) return false;
      uint16_t parts[3];
      split_scalar(x, parts);
      const int64_t at =
          a_form ? (k / 32) * 512 + (j % 16) * 32 + k % 32 : (k / 2) * 32 + (j % 16) * 2 + (k & 1);
      for (int s = 0; s < 3; ++s) tile[s * 16 * kp + at] = parts[s];
    }
  }
  out->data = std::move(d);
  out->n = n;
  out->k = K;
  out->kp = kp;
  return true;
}

void Parts::Free::operator()(uint16_t* p) const {
  ::operator delete (p, std::align_val_t{64});
}

namespace {

// C[M x N] = epilogue(A B) from A's parts in row tiles and B's in column tiles (the layouts
// above, depth kp), in units of up to 8 row tiles x up to 16 column tiles, narrower when
// there are too few units for the threads.
void run_units(const uint16_t* ap, const uint16_t* bp, int64_t kp, int64_t M, int64_t N, float* C,
               int64_t ldc, const Epilogue& ep, ThreadPool* pool) {
  const int threads = pool ? pool->num_threads() : 1;
  const int64_t ks = kp / 32, mt = (M + 15) / 16, nt = (N + 15) / 16;
  const int64_t mu = (mt + kUnitRowTiles - 1) / kUnitRowTiles;
  int64_t cu_tiles = kUnitColTiles;
  while (cu_tiles > 2 && mu * ((nt + cu_tiles - 1) / cu_tiles) < 2 * threads) cu_tiles /= 2;
  const int64_t nu = (nt + cu_tiles - 1) / cu_tiles;
  auto unit = [&](int64_t u0, int64_t u1) {
    float* scratch = static_cast<float*>(
        thread_buffer(1, static_cast<size_t>(kUnitRowTiles * 16 * cu_tiles * 16) * 4));
    TileConfig cfg;
    for (int t = 0; t < 8; ++t) {
      cfg.rows[t] = 16;
      cfg.colsb[t] = 64;
    }
    _tile_loadconfig(&cfg);
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t r0 = (u / nu) * kUnitRowTiles, r1 = std::min(mt, r0 + kUnitRowTiles);
      const int64_t c0 = (u % nu) * cu_tiles, c1 = std::min(nt, c0 + cu_tiles);
      const int64_t lds = (c1 - c0) * 16;  // the scratch's row stride
      for (int64_t k0 = 0; k0 < ks; k0 += kKBlock) {
        const int64_t k1 = std::min(ks, k0 + kKBlock);
        for (int64_t c = c0; c < c1; c += 2) {
          const bool two_n = c + 1 < c1;
          const uint16_t* b = bp + c * 3 * 16 * kp;
          for (int64_t r = r0; r < r1; r += 2) {
            const bool two_m = r + 1 < r1;
            const uint16_t* at = ap + r * 3 * 16 * kp;
            // Partial sums in the scratch (C's own rows, 4 KiB and more apart, would meet in
            // the same L1 sets: 10-15% slower at 3072 columns).
            float* d = scratch + (r - r0) * 16 * lds + (c - c0) * 16;
            const bool load = k0 > 0;
            if (two_m && two_n)
              block<true, true>(at, b, kp, k0, k1, d, lds, load);
            else if (two_m)
              block<true, false>(at, b, kp, k0, k1, d, lds, load);
            else if (two_n)
              block<false, true>(at, b, kp, k0, k1, d, lds, load);
            else
              block<false, false>(at, b, kp, k0, k1, d, lds, load);
            // The epilogue with the last K block, while the block is in L1.
            if (k1 == ks)
              epilogue(d, lds, r * 16, std::min(M, (r + 2) * 16), c * 16, std::min(N, (c + 2) * 16),
                       C, ldc, ep);
          }
        }
      }
    }
    _tile_release();
  };
  if (threads > 1 && mu * nu > 1)
    pool->parallel_for(mu * nu, unit, 1);
  else
    unit(0, mu * nu);
}

// Splits column tiles [t0, t1) of X (K x N, row k at x + off[k], or x + k * ldx without
// off; columns >= N and rows >= K zero) into B tiles: per pair of rows, each column's two
// values side by side. False when a value is unsafe.
bool split_cols(const float* x, const int64_t* off, int64_t ldx, int64_t K, int64_t N, int64_t kp,
                int64_t t0, int64_t t1, uint16_t* out) {
  const int64_t ks = kp / 32;
  __mmask16 bad = 0;
  __m512 amax = _mm512_setzero_ps();
  for (int64_t t = t0; t < t1; ++t) {
    uint16_t* tile = out + t * 3 * 16 * kp;
    const int64_t n0 = t * 16, left = N - n0;
    const __mmask16 mk = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
    for (int64_t s = 0; s < ks; ++s) {
      for (int64_t kk = 0; kk < 16; ++kk) {
        const int64_t k = s * 32 + 2 * kk;
        __m512 x0 = _mm512_setzero_ps(), x1 = _mm512_setzero_ps();
        if (k < K) x0 = _mm512_maskz_loadu_ps(mk, x + (off ? off[k] : k * ldx) + n0);
        if (k + 1 < K) x1 = _mm512_maskz_loadu_ps(mk, x + (off ? off[k + 1] : (k + 1) * ldx) + n0);
        bad |= unsafe16(x0, amax) | unsafe16(x1, amax);
        __m256i p0[3], p1[3];
        split16(x0, p0);
        split16(x1, p1);
        for (int p = 0; p < 3; ++p) {
          const __m512i pair = _mm512_or_si512(_mm512_cvtepu16_epi32(p0[p]),
                                               _mm512_slli_epi32(_mm512_cvtepu16_epi32(p1[p]), 16));
          _mm512_storeu_si512(tile + p * 16 * kp + s * 512 + kk * 32, pair);
        }
      }
    }
  }
  return bad == 0 && _mm512_reduce_max_ps(amax) < 0x1p127f;
}

// Runs split(t0, t1) over `tiles` tiles, shared out over the threads when it is worth it;
// false when a part of it was false.
template <typename Split>
bool split_all(int64_t tiles, int64_t elements, ThreadPool* pool, const Split& split) {
  std::atomic<bool> ok{true};
  auto one = [&](int64_t t0, int64_t t1) {
    if (!split(t0, t1)) ok.store(false, std::memory_order_relaxed);
  };
  if (pool && pool->num_threads() > 1 && tiles > 1 && elements >= 16384)
    pool->parallel_for(tiles, one);
  else
    one(0, tiles);
  return ok.load();
}

}  // namespace

namespace {

// Parts a thread's split buffer holds at most (8 MiB): a larger operand is split and
// multiplied a block of rows (or columns) at a time.
constexpr int64_t kSplitBytes = int64_t(8) << 20;

// Rows (W on the right) or columns (W on the left) a block takes: a multiple of 128, at
// least 128.
int64_t block_span(int64_t kp) {
  return std::max<int64_t>(128, kSplitBytes / (6 * kp) / 128 * 128);
}

// Whether every value of the rows x cols floats (row r at x + off[r], or x + r * ld) is
// one the parts carry: checked before the first block when there are several, so that C is
// untouched where the product goes back to the FMA kernel (its Z may be C's own memory).
bool all_safe(const float* x, const int64_t* off, int64_t ld, int64_t rows, int64_t cols) {
  __mmask16 bad = 0;
  __m512 amax = _mm512_setzero_ps();
  for (int64_t r = 0; r < rows && !bad; ++r) {
    const float* row = x + (off ? off[r] : r * ld);
    for (int64_t c = 0; c < cols; c += 16) {
      const int64_t left = cols - c;
      const __mmask16 mk = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
      bad |= unsafe16(_mm512_maskz_loadu_ps(mk, row + c), amax);
    }
  }
  return bad == 0 && _mm512_reduce_max_ps(amax) < 0x1p127f;
}

// The epilogue of C's rows from m0 and columns from n0.
Epilogue shifted(const Epilogue& ep, int64_t m0, int64_t n0) {
  Epilogue e = ep;
  if (e.bias_row) e.bias_row += m0;
  if (e.bias_col) e.bias_col += n0;
  if (e.z) e.z += m0 * e.ldz + n0;
  return e;
}

}  // namespace

namespace {

// The per-call operand (`total` rows or columns of depth K) in blocks of block_span: each
// block split into the thread's buffer (split(first, count, tile0, tile1, buffer) over its
// 16-wide tiles) and multiplied (run(first, count, buffer)). `safe` checks the whole operand
// before the first block where there are several.
template <typename Safe, typename Split, typename Run>
bool in_blocks(int64_t total, int64_t K, int64_t kp, ThreadPool* pool, const Safe& safe,
               const Split& split, const Run& run) {
  const int64_t span = block_span(kp);
  if (total > span && !safe()) return false;
  const int64_t cap = (std::min(total, span) + 15) / 16;
  uint16_t* buf =
      static_cast<uint16_t*>(thread_buffer(0, static_cast<size_t>(cap * 3 * 16 * kp) * 2));
  for (int64_t i0 = 0; i0 < total; i0 += span) {
    const int64_t n = std::min(span, total - i0);
    if (!split_all((n + 15) / 16, n * K, pool,
                   [&](int64_t t0, int64_t t1) { return split(i0, n, t0, t1, buf); }))
      return false;
    run(i0, n, buf);
  }
  return true;
}

}  // namespace

bool gemm_w_right(const float* a, int64_t lda, int64_t M, const Parts& W, float* C, int64_t ldc,
                  const Epilogue& ep, ThreadPool* pool) {
  const int64_t K = W.k, kp = W.kp;
  return in_blocks(
      M, K, kp, pool, [&] { return all_safe(a, nullptr, lda, M, K); },
      [&](int64_t m0, int64_t mc, int64_t t0, int64_t t1, uint16_t* ap) {
        return split_rows(a + m0 * lda, lda, mc, K, kp, t0, t1, ap);
      },
      [&](int64_t m0, int64_t mc, const uint16_t* ap) {
        run_units(ap, W.data.get(), kp, mc, W.n, C + m0 * ldc, ldc, shifted(ep, m0, 0), pool);
      });
}

// conv.cc's blocks of at most 2^20 column elements stay within one block here; the blocks
// bound the buffer for any other caller.
bool gemm_w_left(const Parts& W, const float* x, const int64_t* off, int64_t ldx, int64_t N,
                 float* C, int64_t ldc, const Epilogue& ep, ThreadPool* pool) {
  const int64_t K = W.k, kp = W.kp;
  return in_blocks(
      N, K, kp, pool, [&] { return all_safe(x, off, ldx, K, N); },
      [&](int64_t n0, int64_t nc, int64_t t0, int64_t t1, uint16_t* bp) {
        return split_cols(x + n0, off, ldx, K, nc, kp, t0, t1, bp);
      },
      [&](int64_t n0, int64_t nc, const uint16_t* bp) {
        run_units(W.data.get(), bp, kp, W.n, nc, C + n0, ldc, shifted(ep, 0, n0), pool);
      });
}

}  // namespace amx

#pragma GCC pop_options
#pragma GCC diagnostic pop

#else

namespace amx {
bool available_on_cpu() {
  return false;
}
bool make_parts(const float*, int64_t, int64_t, bool, Parts*) {
  return false;
}
void Parts::Free::operator()(uint16_t* p) const {
  ::operator delete (p, std::align_val_t{64});
}
bool gemm_w_right(const float*, int64_t, int64_t, const Parts&, float*, int64_t, const Epilogue&,
                  ThreadPool*) {
  return false;
}
bool gemm_w_left(const Parts&, const float*, const int64_t*, int64_t, int64_t, float*, int64_t,
                 const Epilogue&, ThreadPool*) {
  return false;
}
}  // namespace amx

#endif

}  // namespace fgemm
}  // namespace nn
}  // namespace ortlite
