// 8-bit integer GEMM (see int8_gemm.h): packing, the portable kernel and the dispatch to the
// AVX-512 VNNI / AVX2 kernels (int8_gemm_avx512.cc, int8_gemm_avx2.cc), chosen by a run-time
// CPU check.
#include "compute/int8_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

struct Isa {
  bool avx2 = false, avxvnni = false, avx512vnni = false, avx512 = false, amx = false;
  bool avx512vbmi = false;
};

Isa isa() {
  // AVX-512 VNNI does not imply AVX-VNNI (its VEX encoding): each is checked on its own.
  Isa r;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  r.avx2 = __builtin_cpu_supports("avx2");
  r.avxvnni = r.avx2 && __builtin_cpu_supports("avxvnni");
  r.avx512 = r.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  r.avx512vnni = r.avx512 && __builtin_cpu_supports("avx512vnni");
  r.avx512vbmi =
      r.avx512 && __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vl");
#endif
  bool allow_amx = true;
  if (const char* env = std::getenv("ORTLITE_INT8_ISA")) {
    const std::string s(env);
    if (s == "generic") r.avx2 = r.avxvnni = r.avx512vnni = r.avx512 = r.avx512vbmi = false;
    if (s == "avx2") r.avxvnni = r.avx512vnni = r.avx512 = r.avx512vbmi = false;
    if (s == "avxvnni") r.avx512vnni = r.avx512 = r.avx512vbmi = false;
    allow_amx = s == "amx";
  }
  // The tile state is asked for only where the kernels would use it.
  r.amx = allow_amx && r.avx512 && detail::amx_usable();
  return r;
}

const Isa& cpu() {
  static const Isa i = isa();
  return i;
}

// The best kernel set without AMX.
detail::KernelSet select_vector() {
  const Isa& i = cpu();
  const bool avx2 = i.avx2, avxvnni = i.avxvnni, avx512vnni = i.avx512vnni;
  detail::KernelSet k;
  if (avx512vnni) k = detail::avx512vnni_kernel();
  if (!k.fn && avxvnni) k = detail::avx2_kernel(true);
  if (!k.fn && avx2) k = detail::avx2_kernel(false);
  if (!k.fn) k = {generic_kernel, 4};
  return k;
}

const detail::KernelSet& vector_kernels() {
  static const detail::KernelSet k = select_vector();
  return k;
}

const detail::KernelSet& kernels() {
  static const detail::KernelSet k = cpu().amx ? detail::amx_kernel() : vector_kernels();
  return k;
}

void requantize_generic(const int32_t* c, int64_t n, int32_t bias, const float* mult, int64_t mstep,
                        int32_t zp, bool is_signed, void* y) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: rounds |v| < 2^22 half to even
  const float zf = static_cast<float>(zp);
  const float lo = (is_signed ? -128.0f : 0.0f) - zf, hi = (is_signed ? 127.0f : 255.0f) - zf;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t acc =
        static_cast<int32_t>(static_cast<uint32_t>(c[i]) + static_cast<uint32_t>(bias));
    const float v = static_cast<float>(acc) * mult[i * mstep];
    const float cl = v >= lo ? (v <= hi ? v : hi) : lo;
    const int32_t q = static_cast<int32_t>((cl + kMagic) - kMagic) + zp;
    if (is_signed) {
      static_cast<int8_t*>(y)[i] = static_cast<int8_t>(q);
    } else {
      static_cast<uint8_t*>(y)[i] = static_cast<uint8_t>(q);
    }
  }
}

void min_max_generic(const float* x, int64_t n, float* mn_out, float* mx_out) {
  // Eight running minima / maxima the compiler can keep in vector registers.
  float mns[8] = {}, mxs[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      mns[j] = x[i + j] < mns[j] ? x[i + j] : mns[j];
      mxs[j] = x[i + j] > mxs[j] ? x[i + j] : mxs[j];
    }
  }
  for (; i < n; ++i) {
    mns[0] = x[i] < mns[0] ? x[i] : mns[0];
    mxs[0] = x[i] > mxs[0] ? x[i] : mxs[0];
  }
  float mn = 0.0f, mx = 0.0f;
  for (int j = 0; j < 8; ++j) {
    mn = std::min(mn, mns[j]);
    mx = std::max(mx, mxs[j]);
  }
  *mn_out = mn;
  *mx_out = mx;
}

void quantize_u8_generic(const float* x, int64_t n, float scale, float zp, uint8_t* y) {
  constexpr float kMagic = 12582912.0f;
  const float lo = 0.0f - zp, hi = 255.0f - zp;
  for (int64_t k = 0; k < n; ++k) {
    const float q = x[k] / scale;
    const float c = q >= lo ? (q <= hi ? q : hi) : lo;
    y[k] = static_cast<uint8_t>(static_cast<int32_t>(((c + kMagic) - kMagic) + zp));
  }
}

// The product, then the sum, each rounded: fp_barrier-like, so that no contraction into a
// fused multiply-add changes the result.
inline float rounded(float v) {
#if defined(__GNUC__)
  __asm__("" : "+x"(v));
#endif
  return v;
}

void to_float_generic(float* y, int64_t ldy, int rows, int cols, const float* rs, const float* cs,
                      const float* bias) {
  for (int r = 0; r < rows; ++r) {
    float* yr = y + r * ldy;
    for (int j = 0; j < cols; ++j) {
      int32_t c;
      std::memcpy(&c, yr + j, sizeof(c));
      float v = rounded(static_cast<float>(c) * rounded(rs[r] * cs[j]));
      if (bias) v = v + bias[j];
      yr[j] = v;
    }
  }
}

detail::Helpers select_helpers() {
  detail::Helpers h;
  if (cpu().avx512) h = detail::avx512_helpers();
  if (!h.requantize) h = {requantize_generic, min_max_generic, quantize_u8_generic};
  if (!h.to_float) h.to_float = to_float_generic;
  return h;
}

const detail::Helpers& helpers() {
  static const detail::Helpers h = select_helpers();
  return h;
}

detail::ConvPackFn select_conv_pack() {
  return cpu().avx512vnni && cpu().avx512vbmi ? detail::avx512_conv_pack() : nullptr;
}

}  // namespace

const detail::ConvPackFn& conv_pack() {
  static const detail::ConvPackFn fn = select_conv_pack();
  return fn;
}

bool has_pack_b_conv() {
  return conv_pack() != nullptr;
}

const detail::DepthwiseFn& depthwise_fn() {
  static const detail::DepthwiseFn fn =
      cpu().avx512vnni && cpu().avx512vbmi ? detail::avx512_depthwise() : nullptr;
  return fn;
}

bool has_depthwise_padded() {
  return depthwise_fn() != nullptr;
}

bool depthwise_padded(const uint8_t* x, bool is_signed, int64_t PW, int64_t sh, int64_t sw,
                      int64_t KH, int64_t KW, int64_t dh, int64_t dw, const int32_t* wt,
                      int32_t init, int64_t OW, int64_t r0, int64_t r1, int32_t* y) {
  const detail::DepthwiseFn fn = depthwise_fn();
  if (!fn || (sw != 1 && sw != 2)) return false;
  fn(x, is_signed, PW, sh, sw, KH, KW, dh, dw, wt, init, OW, r0, r1, y);
  return true;
}

bool pack_b_conv(const uint8_t* src, const int64_t* tap_off, int64_t K, int64_t OW,
                 int64_t row_step, int64_t col_step, int64_t p0, int64_t pc, bool is_signed,
                 PackedB* out) {
  const detail::ConvPackFn fn = conv_pack();
  if (!fn || (col_step != 1 && col_step != 2)) return false;
  pack_b_begin(is_signed, K, pc, out);
  fn(src, tap_off, K, OW, row_step, col_step, p0, pc, out);
  return true;
}

void requantize(const int32_t* c, int64_t n, int32_t bias, const float* mult, int64_t mstep,
                int32_t zp, bool is_signed, void* y) {
  helpers().requantize(c, n, bias, mult, mstep, zp, is_signed, y);
}

void min_max(const float* x, int64_t n, float* mn, float* mx) {
  helpers().min_max(x, n, mn, mx);
}

void quantize_u8(const float* x, int64_t n, float scale, float zp, uint8_t* y) {
  helpers().quantize_u8(x, n, scale, zp, y);
}

const char* isa_name() {
  const detail::KernelFn fn = kernels().fn;
  if (fn == generic_kernel) return "generic";
  if (fn == detail::amx_kernel().fn) return "amx";
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

void pack_b_begin(bool is_signed, int64_t K, int64_t N, PackedB* out) {
  out->K = K;
  out->N = N;
  out->K4 = (K + 3) / 4;
  out->N16 = (N + 15) / 16;
  out->is_signed = is_signed;
  out->data.resize(static_cast<size_t>(out->N16 * out->K4 * 64));
  out->colsum.assign(static_cast<size_t>(out->N16 * 16), 0);
}

void pack_b_group(const uint8_t* const rows[4], int64_t k4, PackedB* out, int16_t* s16) {
  const int64_t N = out->N, K4 = out->K4;
  const uint8_t flip = out->is_signed ? 0x00 : 0x80;
  for (int64_t p = 0; p < out->N16; ++p) {
    const int64_t j0 = p * 16, w = std::min<int64_t>(16, N - j0);
    int8_t* d = out->data.data() + (p * K4 + k4) * 64;
    int16_t* cs = s16 + j0;
    // A partial panel's rows are copied into zero-padded rows (flipped while copied, so
    // that the padding stays 0); missing rows read as zero bytes.
    uint8_t tail[4][16];
    const uint8_t* r8[4];
    for (int t = 0; t < 4; ++t) {
      if (!rows[t]) {
        std::memset(tail[t], flip, 16);
      } else if (w < 16) {
        std::memset(tail[t], flip, 16);
        std::memcpy(tail[t], rows[t] + j0, static_cast<size_t>(w));
      }
      r8[t] = (rows[t] && w == 16) ? rows[t] + j0 : tail[t];
    }
#if defined(__SSE2__)
    const __m128i fv = _mm_set1_epi8(static_cast<char>(flip));
    __m128i r[4];
    __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(cs));
    __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(cs + 8));
    for (int t = 0; t < 4; ++t) {
      r[t] = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r8[t])), fv);
      // Column sums: the bytes sign-extended to int16.
      lo = _mm_add_epi16(lo, _mm_srai_epi16(_mm_unpacklo_epi8(r[t], r[t]), 8));
      hi = _mm_add_epi16(hi, _mm_srai_epi16(_mm_unpackhi_epi8(r[t], r[t]), 8));
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(cs), lo);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(cs + 8), hi);
    const __m128i a01l = _mm_unpacklo_epi8(r[0], r[1]), a01h = _mm_unpackhi_epi8(r[0], r[1]);
    const __m128i a23l = _mm_unpacklo_epi8(r[2], r[3]), a23h = _mm_unpackhi_epi8(r[2], r[3]);
    __m128i* o = reinterpret_cast<__m128i*>(d);
    _mm_storeu_si128(o + 0, _mm_unpacklo_epi16(a01l, a23l));
    _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(a01l, a23l));
    _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(a01h, a23h));
    _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(a01h, a23h));
#else
    for (int t = 0; t < 4; ++t) {
      for (int j = 0; j < 16; ++j) {
        const int8_t v = static_cast<int8_t>(r8[t][j] ^ flip);
        d[j * 4 + t] = v;
        cs[j] = static_cast<int16_t>(cs[j] + v);
      }
    }
#endif
  }
}

void pack_b_flush(PackedB* out, int16_t* s16) {
  const int64_t n = out->N16 * 16;
  for (int64_t j = 0; j < n; ++j) {
    out->colsum[static_cast<size_t>(j)] += s16[j];
    s16[j] = 0;
  }
}

void pack_b(const void* B, bool is_signed, int64_t K, int64_t N, int64_t ldb, PackedB* out) {
  pack_b_begin(is_signed, K, N, out);
  const uint8_t* src = static_cast<const uint8_t*>(B);
  std::vector<int16_t> s16(static_cast<size_t>(out->N16 * 16), 0);
  for (int64_t k4 = 0; k4 < out->K4; ++k4) {
    const uint8_t* rows[4];
    for (int t = 0; t < 4; ++t) {
      const int64_t k = 4 * k4 + t;
      rows[t] = k < K ? src + k * ldb : nullptr;
    }
    pack_b_group(rows, k4, out, s16.data());
    if ((k4 & (kPackFlushGroups - 1)) == kPackFlushGroups - 1 || k4 + 1 == out->K4) {
      pack_b_flush(out, s16.data());
    }
  }
}

namespace {

// gemm and gemm_to_float (fo non-null: C is Y's memory, converted tile by tile).
void gemm_impl(const PackedA& A, const PackedB& B, const int32_t* za, int64_t za_step,
               const int32_t* zb, int64_t zb_step, int32_t* C, int64_t ldc, const FloatOut* fo,
               const RequantOut* rq, ThreadPool* pool) {
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
  // K of one 64-byte tile step exactly (no tail copies) also runs on AMX where the product
  // is wide and its int32 output stays in L2: 128 x 64 x 784 48 against 66 us on AVX-512
  // VNNI, 256 x 64 x 784 87 against 129 us; with 256 x 64 x 3136 (3 MiB of output) AMX was
  // slower (638 against 531 us), and so below 32 rows or 256 columns.
  const bool amx_ok =
      M >= kAmxMinRows &&
      (K4 >= kAmxMinK4 || (K4 == 16 && M >= 32 && N >= 256 && M * N <= (int64_t(1) << 18)));
  const detail::KernelSet& ks = amx_ok ? kernels() : vector_kernels();
  const int64_t lda = 4 * A.K4, panel_stride = K4 * 64;
  const int64_t kNB = 16 * ks.nvmax;  // columns per kernel call
  const int64_t col_blocks = (N + kNB - 1) / kNB;
  // Row blocks short enough that a task stays a few hundred microseconds at most, of
  // balanced sizes; within a block, tiles of balanced heights (32 rows at 6 a tile: 6 6 5 5
  // 5 5, not 6 6 6 6 6 2, whose last tile would reuse each B load for 2 rows only).
  const int64_t row_blocks = (M + 95) / 96, mb = (M + row_blocks - 1) / row_blocks;
  const double cost = static_cast<double>(mb) * kNB * static_cast<double>(K4) * 4.0;
  // Blocks in the order that reads less from memory: row blocks outer reads B once per row
  // block (A's block stays in cache), column blocks outer reads A once per column block.
  // With a wide B and several row blocks (512 x 1024 x 8210: 8 MiB of B against 0.5 MiB of
  // A) the second keeps each B block in cache while every row uses it.
  const double b_bytes = static_cast<double>(B.N16) * static_cast<double>(panel_stride);
  const double a_bytes = static_cast<double>(M) * static_cast<double>(lda);
  const bool cols_outer = static_cast<double>(col_blocks) * a_bytes + b_bytes <
                          static_cast<double>(row_blocks) * b_bytes + a_bytes;
  const detail::Helpers& h = helpers();
  parallel_for(pool, row_blocks * col_blocks, cost, [&](int64_t s, int64_t e) {
    // Requantized output: each tile's sums go to a scratch tile that stays in L1, not to a
    // whole int32 C written out and read back (8 x 128 x 384 @ 384 x 1536: 6 MiB each way).
    std::vector<int32_t> scratch(rq ? static_cast<size_t>(ks.mr * kNB) : 0);
    for (int64_t t = s; t < e; ++t) {
      const int64_t cb = cols_outer ? t / row_blocks : t % col_blocks;
      const int64_t rb = cols_outer ? t % row_blocks : t / col_blocks;
      const int64_t j0 = cb * kNB, cols = std::min(kNB, N - j0);
      const int nv = static_cast<int>((cols + 15) / 16);
      const int64_t i0 = rb * mb, i1 = std::min(M, i0 + mb);
      const int64_t tiles = (i1 - i0 + ks.mr - 1) / ks.mr;
      const int64_t base = (i1 - i0) / tiles, extra = (i1 - i0) % tiles;
      for (int64_t ti = 0, i = i0; ti < tiles; ++ti) {
        const int rows = static_cast<int>(base + (ti < extra ? 1 : 0));
        int32_t* ctile = rq ? scratch.data() : C + i * ldc + j0;
        const int64_t ldt = rq ? kNB : ldc;
        ks.fn(A.data.data() + i * lda, lda, rows, B.data.data() + (j0 / 16) * panel_stride,
              panel_stride, nv, K4, ctile, ldt, static_cast<int>(cols), A.rowsum.data() + i,
              zap.data() + i, zbp.data() + j0, ct.data() + j0);
        if (fo) {
          h.to_float(reinterpret_cast<float*>(C + i * ldc + j0), ldc, rows, static_cast<int>(cols),
                     fo->row_scale + i, fo->col_scale + j0, fo->bias ? fo->bias + j0 : nullptr);
        }
        if (rq) {
          for (int r = 0; r < rows; ++r)
            h.requantize(ctile + r * ldt, cols, 0, rq->mult + j0, 1, rq->zp, rq->is_signed,
                         static_cast<uint8_t*>(rq->y) + (i + r) * rq->ldy + j0);
        }
        i += rows;
      }
    }
  });
}

}  // namespace

void gemm(const PackedA& A, const PackedB& B, const int32_t* za, int64_t za_step, const int32_t* zb,
          int64_t zb_step, int32_t* C, int64_t ldc, ThreadPool* pool) {
  gemm_impl(A, B, za, za_step, zb, zb_step, C, ldc, nullptr, nullptr, pool);
}

void gemm_to_float(const PackedA& A, const PackedB& B, const int32_t* za, int64_t za_step,
                   const int32_t* zb, int64_t zb_step, const FloatOut& out, float* Y, int64_t ldy,
                   ThreadPool* pool) {
  static_assert(sizeof(float) == sizeof(int32_t), "the int32 sums are written in Y's place");
  gemm_impl(A, B, za, za_step, zb, zb_step, reinterpret_cast<int32_t*>(Y), ldy, &out, nullptr,
            pool);
}

void gemm_requantize(const PackedA& A, const PackedB& B, const int32_t* za, int64_t za_step,
                     const int32_t* zb, int64_t zb_step, const RequantOut& out, ThreadPool* pool) {
  gemm_impl(A, B, za, za_step, zb, zb_step, nullptr, 0, nullptr, &out, pool);
}

}  // namespace int8gemm
}  // namespace ortlite
