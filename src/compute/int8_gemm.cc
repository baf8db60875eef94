// 8-bit integer GEMM (see int8_gemm.h): packing, the portable kernel and the dispatch to the
// AVX-512 VNNI / AVX2 kernels (int8_gemm_avx512.cc, int8_gemm_avx2.cc), chosen by a run-time
// CPU check.
#include "compute/int8_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

namespace ortlite {
namespace int8gemm {
namespace {

// The portable kernel on the packed layouts; wrap-around arithmetic in uint32.
void generic_kernel(const uint8_t* a, int64_t lda, int rows, const int8_t* b, int64_t panel_stride,
                    int nv, int64_t K4, int32_t* c, int64_t ldc, int cols, const int32_t* rsa,
                    const int32_t* zap, const int32_t* zbp, const int32_t* ct) {
  for (int r = 0; r < rows; ++r) {
    const uint8_t* ar = a + r * lda;
    for (int v = 0; v < nv; ++v) {
      int32_t acc[16] = {};
      const int8_t* bp = b + v * panel_stride;
      for (int64_t k4 = 0; k4 < K4; ++k4) {
        const uint8_t* a4 = ar + 4 * k4;
        const int8_t* b4 = bp + 64 * k4;
        for (int j = 0; j < 16; ++j) {
          acc[j] += a4[0] * b4[4 * j] + a4[1] * b4[4 * j + 1] + a4[2] * b4[4 * j + 2] +
                    a4[3] * b4[4 * j + 3];
        }
      }
      for (int j = 0; j < 16 && v * 16 + j < cols; ++j) {
        const int jj = v * 16 + j;
        const uint32_t x = static_cast<uint32_t>(acc[j]) -
                           static_cast<uint32_t>(zbp[jj]) * static_cast<uint32_t>(rsa[r]) -
                           static_cast<uint32_t>(zap[r]) * static_cast<uint32_t>(ct[jj]);
        c[r * ldc + jj] = static_cast<int32_t>(x);
      }
    }
  }
}

detail::KernelSet select() {
  // AVX-512 VNNI does not imply AVX-VNNI (its VEX encoding): each is checked on its own.
  bool avx2 = false, avxvnni = false, avx512vnni = false;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  avx2 = __builtin_cpu_supports("avx2");
  avxvnni = avx2 && __builtin_cpu_supports("avxvnni");
  avx512vnni = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vnni");
#endif
  if (const char* env = std::getenv("ORTLITE_INT8_ISA")) {
    const std::string s(env);
    if (s == "generic") avx2 = avxvnni = avx512vnni = false;
    if (s == "avx2") avxvnni = avx512vnni = false;
    if (s == "avxvnni") avx512vnni = false;
  }
  detail::KernelSet k;
  if (avx512vnni) k = detail::avx512vnni_kernel();
  if (!k.fn && avxvnni) k = detail::avx2_kernel(true);
  if (!k.fn && avx2) k = detail::avx2_kernel(false);
  if (!k.fn) k = {generic_kernel, 4};
  return k;
}

const detail::KernelSet& kernels() {
  static const detail::KernelSet k = select();
  return k;
}

}  // namespace

const char* isa_name() {
  const detail::KernelFn fn = kernels().fn;
  if (fn == generic_kernel) return "generic";
  if (fn == detail::avx512vnni_kernel().fn) return "avx512vnni";
  if (fn == detail::avx2_kernel(true).fn) return "avxvnni";
  return "avx2";
}

void pack_a(const void* A, bool is_signed, int64_t M, int64_t K, int64_t lda, PackedA* out) {
  out->M = M;
  out->K = K;
  out->K4 = (K + 3) / 4;
  out->is_signed = is_signed;
  const int64_t ld = 4 * out->K4;
  out->data.assign(static_cast<size_t>(M * ld), 0);
  out->rowsum.assign(static_cast<size_t>(M), 0);
  const uint8_t* src = static_cast<const uint8_t*>(A);
  const uint8_t flip = is_signed ? 0x80 : 0x00;
  for (int64_t i = 0; i < M; ++i) {
    const uint8_t* s = src + i * lda;
    uint8_t* d = out->data.data() + i * ld;
    int32_t sum = 0;
    for (int64_t k = 0; k < K; ++k) {
      const uint8_t v = static_cast<uint8_t>(s[k] ^ flip);
      d[k] = v;
      sum += v;
    }
    out->rowsum[static_cast<size_t>(i)] = sum;
  }
}

void pack_b(const void* B, bool is_signed, int64_t K, int64_t N, int64_t ldb, PackedB* out) {
  out->K = K;
  out->N = N;
  out->K4 = (K + 3) / 4;
  out->N16 = (N + 15) / 16;
  out->is_signed = is_signed;
  const int64_t K4 = out->K4;
  out->data.assign(static_cast<size_t>(out->N16 * K4 * 64), 0);
  out->colsum.assign(static_cast<size_t>(out->N16 * 16), 0);
  const uint8_t* src = static_cast<const uint8_t*>(B);
  const uint8_t flip = is_signed ? 0x00 : 0x80;
  int8_t* d = out->data.data();
  int32_t* cs = out->colsum.data();
  for (int64_t k = 0; k < K; ++k) {
    const uint8_t* s = src + k * ldb;
    const int64_t k4 = k / 4, t = k % 4;
    for (int64_t j = 0; j < N; ++j) {
      const int8_t v = static_cast<int8_t>(s[j] ^ flip);
      d[((j / 16) * K4 + k4) * 64 + (j % 16) * 4 + t] = v;
      cs[j] += v;
    }
  }
}

void gemm(const PackedA& A, const PackedB& B, const int32_t* za, int64_t za_step, const int32_t* zb,
          int64_t zb_step, int32_t* C, int64_t ldc, ThreadPool* pool) {
  const int64_t M = A.M, N = B.N, K = B.K, K4 = B.K4;
  if (M == 0 || N == 0) return;
  // Shifted zero points: a - za = a' - (za + 128) for int8 A (a' = a + 128); b - zb =
  // b' - (zb - 128) for uint8 B (b' = b - 128).
  const int32_t oa = A.is_signed ? 128 : 0, ob = B.is_signed ? 0 : 128;
  std::vector<int32_t> zap(static_cast<size_t>(M)), zbp(static_cast<size_t>(B.N16 * 16), 0),
      ct(static_cast<size_t>(B.N16 * 16), 0);
  for (int64_t i = 0; i < M; ++i) zap[i] = (za ? za[i * za_step] : 0) + oa;
  for (int64_t j = 0; j < N; ++j) {
    zbp[j] = (zb ? zb[j * zb_step] : 0) - ob;
    ct[j] = static_cast<int32_t>(static_cast<uint32_t>(B.colsum[j]) -
                                 static_cast<uint32_t>(K) * static_cast<uint32_t>(zbp[j]));
  }
  if (K == 0) {
    std::fill(zap.begin(), zap.end(), 0);  // no products: every sum is 0
  }
  const detail::KernelSet& ks = kernels();
  const int64_t lda = 4 * A.K4, panel_stride = K4 * 64;
  constexpr int64_t kNB = 64;  // columns per kernel call (4 panels)
  const int64_t col_blocks = (N + kNB - 1) / kNB;
  // Row blocks short enough that a task stays a few hundred microseconds at most.
  const int64_t mb = std::max<int64_t>(ks.mr, std::min<int64_t>(M, 96) / ks.mr * ks.mr);
  const int64_t row_blocks = (M + mb - 1) / mb;
  const double cost = static_cast<double>(mb) * kNB * static_cast<double>(K4) * 4.0;
  parallel_for(pool, row_blocks * col_blocks, cost, [&](int64_t s, int64_t e) {
    for (int64_t t = s; t < e; ++t) {
      const int64_t cb = t % col_blocks, rb = t / col_blocks;
      const int64_t j0 = cb * kNB, cols = std::min(kNB, N - j0);
      const int nv = static_cast<int>((cols + 15) / 16);
      const int64_t i1 = std::min(M, (rb + 1) * mb);
      for (int64_t i = rb * mb; i < i1; i += ks.mr) {
        const int rows = static_cast<int>(std::min<int64_t>(ks.mr, i1 - i));
        ks.fn(A.data.data() + i * lda, lda, rows, B.data.data() + (j0 / 16) * panel_stride,
              panel_stride, nv, K4, C + i * ldc + j0, ldc, static_cast<int>(cols),
              A.rowsum.data() + i, zap.data() + i, zbp.data() + j0, ct.data() + j0);
      }
    }
  });
}

}  // namespace int8gemm
}  // namespace ortlite
