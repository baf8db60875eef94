// The AMX usability check (amx_tiles.h).
#include "compute/amx_tiles.h"

#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define ORTLITE_AMX_CHECK 1
#endif

namespace ortlite {
namespace amx_tiles {

bool usable(unsigned edx_bits) {
#if ORTLITE_AMX_CHECK
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & (1u << 27))) return false;  // OSXSAVE
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const unsigned need = edx_bits | (1u << 24);  // AMX-TILE
  if ((edx & need) != need) return false;
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & (3u << 17)) != (3u << 17)) return false;  // XTILECFG, XTILEDATA enabled
  // Linux hands out the tile data state only on request (ARCH_REQ_XCOMP_PERM for
  // XFEATURE_XTILEDATA); without it the first tile instruction faults.
  constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
#else
  (void)edx_bits;
  return false;
#endif
}

}  // namespace amx_tiles
}  // namespace ortlite
