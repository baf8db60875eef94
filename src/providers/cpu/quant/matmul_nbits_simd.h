// The vector loops of MatMulNBits (matmul_nbits.cc) for 4-bit codes, in blocks that are a
// multiple of 32 and cover K exactly: one column of B at a time.
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
  // out[r] = sum_k a[r * lda + k] * w[k], r < rows <= 8, w the dequantized column.
  void (*dot_rows)(const Nbits4Column& c, const float* a, int64_t rows, int64_t lda,
                   float* out) = nullptr;
  // w[k] = (code - zero point) * scale, k < kb * block.
  void (*dequant)(const Nbits4Column& c, float* w) = nullptr;
  // cols[0 .. nc) (nc <= 32, all of one layout) dequantized into one panel of the fused
  // GEMM's packed layout: w[k * 32 + j] for column j, k < kb * block. Lanes j >= nc are
  // left as they are (the GEMM does not read them).
  void (*dequant_panel)(const Nbits4Column* cols, int nc, float* w) = nullptr;
};

// The AVX-512 (F, BW) loops; null members when not compiled (the caller checks the CPU).
Nbits4Simd nbits4_avx512();

}  // namespace quant
}  // namespace ortlite
