// The AMX kernel of the 8-bit GEMM (int8_gemm.h): tdpbusd multiplies a 16 x 64-byte tile of
// unsigned A bytes by a 16 x 64-byte tile of signed B bytes into a 16 x 16 int32 tile. The
// packed layouts are already the tiles' own: a packed A row holds its K bytes in order, and
// a B panel's group of 64 bytes (16 columns x 4 consecutive k) is one row of a B tile, so
// tiles load straight from the packed buffers (16 groups = 64 k per tile step).
//
// One call covers up to 32 rows (two row tiles) and up to 16 panels, taken two at a time:
// four accumulator tiles, two A and two B tiles, eight in all. Row tiles are configured with
// the call's own row counts, so no load reads past the rows given. A K tail of fewer than 16
// groups goes through zero-padded copies of the A and B bytes (zero A bytes contribute 0).
// The tile configuration is loaded on every call and the tiles released after it: nothing
// is assumed about what other code on the thread left in them.
//
// Compiled for that target; used only after a run-time check of the CPU and of the kernel's
// permission for the tile state (int8_gemm.cc, amx_usable()).
#include <cstdint>
#include <cstring>

#include "compute/amx_tiles.h"
#include "compute/int8_gemm.h"

#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__) && \
    (__GNUC__ >= 11 || defined(__clang__))
#define ORTLITE_HAVE_AMX 1
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("amx-tile,amx-int8,avx512f,avx512bw,avx2,fma")

namespace ortlite {
namespace int8gemm {
namespace {

constexpr int kRows = 32;    // rows per call at most (two row tiles)
constexpr int kPanels = 16;  // panels per call at most: the A tail copy and the tile
                             // configuration serve 256 columns

using amx_tiles::TileConfig;

// c[r * ldc + j] = acc[r * 32 + j] - zbp[j] * rsa[r] - zap[r] * ct[j] for the valid columns.
inline void store_block(const int32_t* acc, int rows, int cols, int32_t* c, int64_t ldc,
                        const int32_t* rsa, const int32_t* zap, const int32_t* zbp,
                        const int32_t* ct) {
  for (int v = 0; v < 2 && 16 * v < cols; ++v) {
    const __m512i zv = _mm512_loadu_si512(zbp + 16 * v);
    const __m512i cv = _mm512_loadu_si512(ct + 16 * v);
    const int left = cols - 16 * v;
    const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
    for (int r = 0; r < rows; ++r) {
      __m512i x = _mm512_loadu_si512(acc + r * 32 + 16 * v);
      x = _mm512_sub_epi32(x, _mm512_mullo_epi32(zv, _mm512_set1_epi32(rsa[r])));
      x = _mm512_sub_epi32(x, _mm512_mullo_epi32(_mm512_set1_epi32(zap[r]), cv));
      _mm512_mask_storeu_epi32(c + r * ldc + 16 * v, m, x);
    }
  }
}

void kernel(const uint8_t* a, int64_t lda, int rows, const int8_t* b, int64_t ps, int nv,
            int64_t K4, int32_t* c, int64_t ldc, int cols, const int32_t* rsa, const int32_t* zap,
            const int32_t* zbp, const int32_t* ct) {
  const int r0 = rows < 16 ? rows : 16, r1 = rows - r0;
  TileConfig cfg;
  // Tiles 0-3: accumulators (row tile, panel of the pair); 4, 5: A row tiles; 6, 7: B.
  cfg.rows[0] = cfg.rows[1] = cfg.rows[4] = static_cast<uint8_t>(r0);
  cfg.colsb[0] = cfg.colsb[1] = cfg.colsb[4] = 64;
  if (r1 > 0) {
    cfg.rows[2] = cfg.rows[3] = cfg.rows[5] = static_cast<uint8_t>(r1);
    cfg.colsb[2] = cfg.colsb[3] = cfg.colsb[5] = 64;
  }
  cfg.rows[6] = cfg.rows[7] = 16;
  cfg.colsb[6] = cfg.colsb[7] = 64;
  _tile_loadconfig(&cfg);

  const int64_t kfull = K4 / 16, kt = K4 % 16;
  alignas(64) uint8_t a_tail[kRows * 64];
  alignas(64) int8_t b_tail[2][16 * 64];
  if (kt > 0) {
    // B rows past kt are never zeroed: their products meet the A tail's zero bytes.
    for (int r = 0; r < rows; ++r) {
      std::memcpy(a_tail + r * 64, a + r * lda + kfull * 64, static_cast<size_t>(kt * 4));
      std::memset(a_tail + r * 64 + kt * 4, 0, static_cast<size_t>(64 - kt * 4));
    }
  }
  alignas(64) int32_t acc[kRows * 32];
  const uint8_t* a1 = a + 16 * lda;
  for (int p = 0; 2 * p < nv; ++p) {
    const bool two = 2 * p + 1 < nv;
    const int8_t* b0 = b + (2 * p) * ps;
    const int8_t* b1 = two ? b0 + ps : b0;
    _tile_zero(0);
    if (two) _tile_zero(1);
    if (r1 > 0) {
      _tile_zero(2);
      if (two) _tile_zero(3);
    }
    for (int64_t kc = 0; kc < kfull; ++kc) {
      _tile_loadd(4, a + kc * 64, lda);
      _tile_loadd(6, b0 + kc * 1024, 64);
      _tile_dpbusd(0, 4, 6);
      if (two) {
        _tile_loadd(7, b1 + kc * 1024, 64);
        _tile_dpbusd(1, 4, 7);
      }
      if (r1 > 0) {
        _tile_loadd(5, a1 + kc * 64, lda);
        _tile_dpbusd(2, 5, 6);
        if (two) _tile_dpbusd(3, 5, 7);
      }
    }
    if (kt > 0) {
      std::memcpy(b_tail[0], b0 + kfull * 1024, static_cast<size_t>(kt * 64));
      if (two) std::memcpy(b_tail[1], b1 + kfull * 1024, static_cast<size_t>(kt * 64));
      _tile_loadd(4, a_tail, 64);
      _tile_loadd(6, b_tail[0], 64);
      _tile_dpbusd(0, 4, 6);
      if (two) {
        _tile_loadd(7, b_tail[1], 64);
        _tile_dpbusd(1, 4, 7);
      }
      if (r1 > 0) {
        _tile_loadd(5, a_tail + 16 * 64, 64);
        _tile_dpbusd(2, 5, 6);
        if (two) _tile_dpbusd(3, 5, 7);
      }
    }
    _tile_stored(0, acc, 128);
    if (two) _tile_stored(1, acc + 16, 128);
    if (r1 > 0) {
      _tile_stored(2, acc + 16 * 32, 128);
      if (two) _tile_stored(3, acc + 16 * 32 + 16, 128);
    }
    const int j0 = 32 * p;
    const int pc = (cols - j0) < 32 ? cols - j0 : 32;
    store_block(acc, rows, pc, c + j0, ldc, rsa, zap, zbp + j0, ct + j0);
  }
  _tile_release();
}

}  // namespace

namespace detail {

bool amx_usable() {
  return amx_tiles::usable(1u << 25);  // AMX-INT8
}

KernelSet amx_kernel() {
  return {kernel, kRows, kPanels};
}

}  // namespace detail
}  // namespace int8gemm
}  // namespace ortlite

#pragma GCC pop_options
#pragma GCC diagnostic pop

#else

namespace ortlite {
namespace int8gemm {
namespace detail {
bool amx_usable() {
  return false;
}
KernelSet amx_kernel() {
  return {};
}
}  // namespace detail
}  // namespace int8gemm
}  // namespace ortlite

#endif
