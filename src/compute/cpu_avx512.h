// Run-time dispatch to AVX-512 code in a build for the baseline x86-64 (setup.py adds no
// -march unless ORTLITE_NATIVE=1): functions marked ORTLITE_AVX512 compile with AVX-512
// F/BW/VL/DQ enabled and may be called only when cpu_has_avx512() is true. Defining
// ORTLITE_NO_AVX512_DISPATCH compiles the portable paths only (as on other architectures).
#pragma once

#if defined(__GNUC__) && defined(__x86_64__) && !defined(ORTLITE_NO_AVX512_DISPATCH)
#include <immintrin.h>
#define ORTLITE_HAVE_AVX512_DISPATCH 1
#define ORTLITE_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#endif

namespace ortlite {

// True when the CPU (and OS) run AVX-512 F, BW, VL and DQ; false on other architectures.
inline bool cpu_has_avx512() {
#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  }();
  return has;
#else
  return false;
#endif
}

}  // namespace ortlite
