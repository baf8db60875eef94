/* Measures one core's single-precision FMA throughput: 16 independent chains of vector FMAs
 * on registers (more than latency x units on any current core), so the loop runs at the
 * core's issue rate. tools/bench.py compiles it with the widest vector ISA the CPU reports
 * and takes the best of several runs as the core's peak (noise only ever lowers it).
 *
 * usage: fma_peak [milliseconds]    prints GFLOP/s (2 flops per lane per FMA)
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__AVX512F__)
typedef __m512 vec;
#define LANES 16
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define ADD _mm512_add_ps
#define STORE _mm512_storeu_ps
#elif defined(__FMA__)
typedef __m256 vec;
#define LANES 8
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define ADD _mm256_add_ps
#define STORE _mm256_storeu_ps
#else
#error "fma_peak needs FMA (build with -mavx512f or -mavx2 -mfma)"
#endif

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  const double ms = argc > 1 ? atof(argv[1]) : 200.0;
  const vec m = SET1(0.999999f), b = SET1(1e-7f);
  vec a0 = SET1(0.1f), a1 = SET1(0.2f), a2 = SET1(0.3f), a3 = SET1(0.4f), a4 = SET1(0.5f),
      a5 = SET1(0.6f), a6 = SET1(0.7f), a7 = SET1(0.8f), a8 = SET1(0.9f), a9 = SET1(1.0f),
      a10 = SET1(1.1f), a11 = SET1(1.2f), a12 = SET1(1.3f), a13 = SET1(1.4f), a14 = SET1(1.5f),
      a15 = SET1(1.6f);
  const long inner = 100000; /* 16 x 100k FMAs per timed block */
  long blocks = 0;
  const double t0 = now();
  double t = t0;
  while ((t - t0) * 1e3 < ms) {
    for (long i = 0; i < inner; ++i) {
      a0 = FMA(a0, m, b); a1 = FMA(a1, m, b); a2 = FMA(a2, m, b); a3 = FMA(a3, m, b);
      a4 = FMA(a4, m, b); a5 = FMA(a5, m, b); a6 = FMA(a6, m, b); a7 = FMA(a7, m, b);
      a8 = FMA(a8, m, b); a9 = FMA(a9, m, b); a10 = FMA(a10, m, b); a11 = FMA(a11, m, b);
      a12 = FMA(a12, m, b); a13 = FMA(a13, m, b); a14 = FMA(a14, m, b); a15 = FMA(a15, m, b);
      __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5),
                       "+v"(a6), "+v"(a7));
    }
    ++blocks;
    t = now();
  }
  vec s = ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7)));
  s = ADD(s, ADD(ADD(ADD(a8, a9), ADD(a10, a11)), ADD(ADD(a12, a13), ADD(a14, a15))));
  float out[LANES];
  STORE(out, s);
  const double flops = 2.0 * LANES * 16.0 * (double)inner * (double)blocks;
  printf("%.3f %d %g\n", flops / (t - t0) / 1e9, LANES, out[0]);
  return 0;
}
