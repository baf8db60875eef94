// The vector loops of MatMulNBits (matmul_nbits.cc) for 4-bit codes in whole blocks (any
// block size) with K a multiple of 32: one column of B at a time, or a panel of 32.
#pragma once

#include <cstdint>

namespace ortlite {
namespace quant {

struct Nbits4Column {
  const uint8_t* codes;  // kb * block / 2 bytes
  const float* scales;   // kb
  const uint8_t* zp;     // ceil(kb / 2) bytes of packed zero points, or null (8)
  int64_t kb, block;
};

struct Nbits4Simd {
  // out[r * ldo + j] = sum_k a[r * lda + k] * w_j[k], r < rows <= 8, w_j the dequantized
  // column cols[j], j < ncols <= 4 (at most 16 / rows columns are taken together; ldo >=
  // ncols). Each group of 32 values of a row of `a` is stored evens first (deinterleave32).
  void (*dot_rows)(const Nbits4Column* cols, int ncols, const float* a, int64_t rows, int64_t lda,
                   float* out, int64_t ldo) = nullptr;
  // Rows k0 .. k1 - 1 (multiples of 32) of cols[0 .. nc) (nc <= 32, all of one layout)
  // dequantized into one panel of the fused GEMM's packed layout: w[(k - k0) * 32 + j] for
  // column j. Lanes j >= nc are left as they are (the GEMM does not read them).
  void (*dequant_panel)(const Nbits4Column* cols, int nc, int64_t k0, int64_t k1,
                        float* w) = nullptr;
};

// The AVX-512 (F, BW, DQ) loops; null members when not compiled (the caller checks the CPU).
Nbits4Simd nbits4_avx512();

// dst[i * 32 + j] for each group of 32 values of src (n a multiple of 32): the 16 values at
// even positions, then the 16 at odd ones (the order dot_rows reads A in).
inline void deinterleave32(const float* src, float* dst, int64_t n) {
  for (int64_t g = 0; g < n; g += 32)
    for (int64_t j = 0; j < 16; ++j) {
      dst[g + j] = src[g + 2 * j];
      dst[g + 16 + j] = src[g + 2 * j + 1];
    }
}

}  // namespace quant
}  // namespace ortlite
