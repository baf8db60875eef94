// Small SIMD helpers for the float kernels of src/providers/cpu/nn: 8-lane GCC vector-extension
// types (two SSE2 registers on the baseline, one AVX2 register in an "avx2" target clone).
// Functions that use them are compiled twice with ORTLITE_NN_CLONES and picked at load
// time by the CPU (GNU ifunc).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && defined(__linux__)
#define ORTLITE_NN_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ORTLITE_NN_CLONES
#endif
#define ORTLITE_NN_INLINE __attribute__((always_inline)) inline

namespace ortlite {
namespace nn {

typedef float v8sf __attribute__((vector_size(32)));
typedef int32_t v8si __attribute__((vector_size(32)));

// Vectors are passed by reference: passing 32-byte vectors by value changes the ABI
// between the baseline and the AVX clone.
ORTLITE_NN_INLINE void load8(const float* p, v8sf& v) {
  std::memcpy(&v, p, sizeof(v));
}
ORTLITE_NN_INLINE void store8(float* p, const v8sf& v) {
  std::memcpy(p, &v, sizeof(v));
}
ORTLITE_NN_INLINE float hsum8(const v8sf& v) {
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

// 8 doubles: float or double elements widened on load and narrowed on store (the
// double-precision sums of the normalizations and reductions). By reference, as above.
typedef double v8df __attribute__((vector_size(64)));
ORTLITE_NN_INLINE void load_wide(const float* p, v8df& v) {
  v8sf f;
  std::memcpy(&f, p, sizeof(f));
  v = __builtin_convertvector(f, v8df);
}
ORTLITE_NN_INLINE void load_wide(const double* p, v8df& v) {
  std::memcpy(&v, p, sizeof(v));
}
ORTLITE_NN_INLINE void store_narrow(float* p, const v8df& v) {
  const v8sf f = __builtin_convertvector(v, v8sf);
  std::memcpy(p, &f, sizeof(f));
}
ORTLITE_NN_INLINE void store_narrow(double* p, const v8df& v) {
  std::memcpy(p, &v, sizeof(v));
}

// 16-lane vectors for loops compiled with ORTLITE_NN_CLONES512 (one AVX-512 register, two
// AVX2 registers, four SSE2 registers).
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && defined(__linux__)
#define ORTLITE_NN_CLONES512 __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ORTLITE_NN_CLONES512
#endif

// The cap ORTLITE_FAST_ISA puts on the run-time choice of the float loops that have one
// instance per ISA (compute/fast_kernels.cc, pooling, depthwise): 0 sse2, 1 avx2, 2 avx512.
// Read once: Transpose and FusedExpandDepthwise ask on every call.
inline int fast_isa_cap() {
  static const int cap = [] {
    const char* v = std::getenv("ORTLITE_FAST_ISA");
    if (v == nullptr) return 2;
    if (std::strcmp(v, "sse2") == 0) return 0;
    if (std::strcmp(v, "avx2") == 0) return 1;
    return 2;
  }();
  return cap;
}

// The instance of a loop for the best ISA this CPU has, within fast_isa_cap(): avx512
// (AVX-512F), avx2 (AVX2 and FMA), else sse2.
template <typename F>
F pick_by_isa(F avx512, F avx2, F sse2) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  const int cap = fast_isa_cap();
  if (cap >= 2 && __builtin_cpu_supports("avx512f")) return avx512;
  if (cap >= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return avx2;
#endif
  return sse2;
}

// One function compiled for one ISA, called only after a run-time CPU check.
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define ORTLITE_NN_TARGET_AVX512 __attribute__((target("avx512f")))
#define ORTLITE_NN_TARGET_AVX2 __attribute__((target("avx2,fma")))
#else
#define ORTLITE_NN_TARGET_AVX512
#define ORTLITE_NN_TARGET_AVX2
#endif

typedef float v16sf __attribute__((vector_size(64)));

ORTLITE_NN_INLINE void load16(const float* p, v16sf& v) {
  std::memcpy(&v, p, sizeof(v));
}
ORTLITE_NN_INLINE void store16(float* p, const v16sf& v) {
  std::memcpy(p, &v, sizeof(v));
}

}  // namespace nn
}  // namespace ortlite
