// What the AMX kernels share (int8_gemm_amx.cc, fused_gemm_amx.cc): the tile configuration
// and the check that the CPU and the OS let this process use the tiles.
#pragma once

#include <cstdint>

namespace ortlite {
namespace amx_tiles {

// ldtilecfg's 64-byte operand, palette 1: rows and bytes a row of each of the eight tiles.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Whether the CPU has AMX-TILE and the CPUID leaf 7 EDX bits in `edx_bits` (bit 22 AMX-BF16,
// bit 25 AMX-INT8), the OS has the tile state enabled, and Linux grants it to the process
// (ARCH_REQ_XCOMP_PERM; asked on every call, so callers keep the answer).
bool usable(unsigned edx_bits);

}  // namespace amx_tiles
}  // namespace ortlite
