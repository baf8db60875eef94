// 8-bit integer GEMM: C[M x N] (int32) = sum_k (A[i, k] - za[i]) * (B[k, j] - zb[j]) for
// uint8 or int8 A and B, zero points per row of A and per column of B (or per tensor).
//
// The kernels multiply unsigned A bytes by signed B bytes (vpdpbusd's operand types): an int8
// A is moved to uint8 and a uint8 B to int8 by flipping the top bit (+128 / -128), and the
// shift is folded into the zero points. The zero points come off through the row sums of A
// and the column sums of B:
//   sum (a - za)(b - zb) = sum a b - zb * rowsum(a) - za * (colsum(b) - K zb).
// All arithmetic wraps modulo 2^32, so the result is the exact value wrapped to int32, as
// onnxruntime's int32 accumulation gives. The products never saturate: AVX-512 VNNI and
// AVX-VNNI accumulate u8 x s8 products in int32 (vpdpbusd), and the plain AVX2 path widens to
// int16 first (vpmaddwd of at most 2 * 255 * 128).
//
// Layouts: packed A is M rows of K rounded up to 4 bytes (zero padded); packed B is panels of
// 16 columns, each K4 = ceil(K / 4) groups of 64 bytes (16 columns x 4 consecutive k).
#pragma once

#include <cstdint>
#include <vector>

#include "ortlite/thread_pool.h"

namespace ortlite {
namespace int8gemm {

struct PackedA {
  int64_t M = 0, K = 0, K4 = 0;
  bool is_signed = false;       // the source type (int8: bytes were shifted by +128)
  std::vector<uint8_t> data;    // M x (4 * K4)
  std::vector<int32_t> rowsum;  // of the shifted bytes
};

struct PackedB {
  int64_t K = 0, N = 0, K4 = 0, N16 = 0;
  bool is_signed = false;       // the source type (uint8: bytes were shifted by -128)
  std::vector<int8_t> data;     // N16 panels x K4 x 64
  std::vector<int32_t> colsum;  // of the shifted bytes, N16 * 16 (padding 0)
};

// A: M x K, row stride lda, bytes of uint8 (is_signed false) or int8.
void pack_a(const void* A, bool is_signed, int64_t M, int64_t K, int64_t lda, PackedA* out);
// B: K x N, row stride ldb.
void pack_b(const void* B, bool is_signed, int64_t K, int64_t N, int64_t ldb, PackedB* out);

// B packed from rows the caller builds (the im2col rows of a convolution, say) without a
// K x N buffer: pack_b_begin sizes out; pack_b_group adds rows k = 4 k4 .. 4 k4 + 3 (each
// N bytes of the source type; null past K) and their column sums to s16 (int16, out->N16 * 16
// zeroed values); pack_b_flush moves s16 into out->colsum and zeroes it, at least every
// kPackFlushGroups groups (|sum| <= 32 * 4 * 128 fits int16) and after the last.
constexpr int64_t kPackFlushGroups = 32;
void pack_b_begin(bool is_signed, int64_t K, int64_t N, PackedB* out);
void pack_b_group(const uint8_t* const rows[4], int64_t k4, PackedB* out, int16_t* s16);
void pack_b_flush(PackedB* out, int16_t* s16);

// B for output positions [p0, p0 + pc) of a convolution over channel planes padded
// beforehand, so that every tap of every position is in bounds: B[k, j] = src[tap_off[k] +
// (q / OW) * row_step + (q % OW) * col_step] for q = p0 + j, K rows, col_step 1 or 2. Only
// the bytes the taps reach are read, and with col_step 2 the one after each. Returns false
// (out untouched) where this CPU has no kernel for it (AVX-512 VBMI and VNNI); the caller
// packs another way.
bool pack_b_conv(const uint8_t* src, const int64_t* tap_off, int64_t K, int64_t OW,
                 int64_t row_step, int64_t col_step, int64_t p0, int64_t pc, bool is_signed,
                 PackedB* out);
bool has_pack_b_conv();  // whether pack_b_conv runs on this CPU (col_step 1 or 2)

// A depthwise 2-D convolution (one input channel per output) over a plane padded beforehand
// so that every tap is in bounds, rows [r0, r1) of the output: y[(oh - r0) * OW + ow] = init +
// sum over (kh, kw) of wt[kh * KW + kw] * x[(oh * sh + kh * dh) * PW + ow * sw + kw * dw],
// x bytes of uint8 (is_signed false) or int8, |wt| <= 255, wrapped to int32. sw 1 or 2; no
// byte past the
// last tap is read. Returns false where this CPU has no kernel for it (as pack_b_conv).
bool depthwise_padded(const uint8_t* x, bool is_signed, int64_t PW, int64_t sh, int64_t sw,
                      int64_t KH, int64_t KW, int64_t dh, int64_t dw, const int32_t* wt,
                      int32_t init, int64_t OW, int64_t r0, int64_t r1, int32_t* y);
bool has_depthwise_padded();

// C[M x N] (row stride ldc) = (A - za) x (B - zb). za[i * za_step] is row i's zero point in
// A's own type's value (e.g. 200 for uint8, -3 for int8); zb[j * zb_step] column j's. A null
// pointer means 0. Large products are split into row / column blocks over the pool.
void gemm(const PackedA& A, const PackedB& B, const int32_t* za, int64_t za_step, const int32_t* zb,
          int64_t zb_step, int32_t* C, int64_t ldc, ThreadPool* pool);

// gemm with a float result: Y[i, j] (row stride ldy) = float(C[i, j]) * (row_scale[i] *
// col_scale[j]) + bias[j], C being gemm's int32 sum: the scale product, the product by it and
// the sum each rounded to float (no fused multiply-add; bias null: no sum), as onnxruntime's
// MatMulIntegerToFloat reads. Each tile is converted in place in Y right after the kernel
// wrote it, while it is in cache: there is no int32 buffer of the whole product.
struct FloatOut {
  const float* row_scale = nullptr;  // M values
  const float* col_scale = nullptr;  // N values
  const float* bias = nullptr;       // N values, or null
};
void gemm_to_float(const PackedA& A, const PackedB& B, const int32_t* za, int64_t za_step,
                   const int32_t* zb, int64_t zb_step, const FloatOut& out, float* Y, int64_t ldy,
                   ThreadPool* pool);

// gemm with an 8-bit result: each finished tile of the int32 sum C (in a scratch tile per
// task, no whole C) is requantized right away, row by row, as requantize() does: Y[i, j]
// (row stride ldy) = saturate(rint(float(C[i, j]) * mult[j]) + zp) to uint8 (is_signed
// false) or int8. One pass over the threads instead of a product and then a
// requantization pass.
struct RequantOut {
  const float* mult = nullptr;  // N values
  int32_t zp = 0;
  bool is_signed = false;
  void* y = nullptr;
  int64_t ldy = 0;
};
void gemm_requantize(const PackedA& A, const PackedB& B, const int32_t* za, int64_t za_step,
                     const int32_t* zb, int64_t zb_step, const RequantOut& out, ThreadPool* pool);

// y[i] = saturate(rint(float(c[i] + bias) * mult[i * mstep]) + zp) to uint8 (is_signed
// false) or int8, rounding half to even; NaN gives the low end. (onnxruntime's requantization
// of QLinearMatMul / QLinearConv.) The sum c[i] + bias wraps.
void requantize(const int32_t* c, int64_t n, int32_t bias, const float* mult, int64_t mstep,
                int32_t zp, bool is_signed, void* y);

// DynamicQuantizeLinear's two passes: the least and greatest of 0 and x's elements (NaN left
// out); y[i] = saturate(rint(x[i] / scale) + zp) to uint8, NaN giving 0.
void min_max(const float* x, int64_t n, float* mn, float* mx);
void quantize_u8(const float* x, int64_t n, float scale, float zp, uint8_t* y);

// The kernel set in use: "amx", "avx512vnni", "avxvnni", "avx2" or "generic" (with "amx",
// products of fewer than kAmxMinRows rows or kAmxMinK4 groups of 4 along K (but for K = 64
// with at least 32 rows and 256 columns, at most 2^18 outputs) still run on the best of the others:
// there the per-call tile set-up costs more than the tiles save). ORTLITE_INT8_ISA caps it with the
// same names (an unsupported set is still never chosen).
constexpr int64_t kAmxMinRows = 8, kAmxMinK4 = 32;
const char* isa_name();

namespace detail {
// One micro-tile: rows x (16 * nv) columns, nv <= nvmax (panels at b + v * panel_stride bytes),
// cols valid columns of those. rsa / zap per row, zbp / ct per column (ct = colsum - K zbp).
using KernelFn = void (*)(const uint8_t* a, int64_t lda, int rows, const int8_t* b,
                          int64_t panel_stride, int nv, int64_t K4, int32_t* c, int64_t ldc,
                          int cols, const int32_t* rsa, const int32_t* zap, const int32_t* zbp,
                          const int32_t* ct);
struct KernelSet {
  KernelFn fn = nullptr;
  int mr = 1;     // rows per call at most
  int nvmax = 4;  // 16-column panels per call at most
};
KernelSet avx512vnni_kernel();  // fn null when not compiled
// AMX (tdpbusd on 16 x 16 tiles, int8_gemm_amx.cc); amx_usable() checks the CPU, the OS and
// asks Linux for the tile state (once: the answer holds for the process).
KernelSet amx_kernel();
bool amx_usable();

// AVX-512 (F, BW) versions of the element-wise helpers above; null when not compiled.
struct Helpers {
  void (*requantize)(const int32_t*, int64_t, int32_t, const float*, int64_t, int32_t, bool,
                     void*) = nullptr;
  void (*min_max)(const float*, int64_t, float*, float*) = nullptr;
  void (*quantize_u8)(const float*, int64_t, float, float, uint8_t*) = nullptr;
  // rows x cols of gemm_to_float's Y in place (int32 sums in, floats out); rs, cs, bias
  // at the block's first row / column.
  void (*to_float)(float* y, int64_t ldy, int rows, int cols, const float* rs, const float* cs,
                   const float* bias) = nullptr;
};
Helpers avx512_helpers();
// pack_b_conv's kernel (col_step 1 or 2, out sized by pack_b_begin); null when not compiled.
using ConvPackFn = void (*)(const uint8_t* src, const int64_t* tap_off, int64_t K, int64_t OW,
                            int64_t row_step, int64_t col_step, int64_t p0, int64_t pc,
                            PackedB* out);
ConvPackFn avx512_conv_pack();
using DepthwiseFn = void (*)(const uint8_t* x, bool is_signed, int64_t PW, int64_t sh, int64_t sw,
                             int64_t KH, int64_t KW, int64_t dh, int64_t dw, const int32_t* wt,
                             int32_t init, int64_t OW, int64_t r0, int64_t r1, int32_t* y);
DepthwiseFn avx512_depthwise();
KernelSet avx2_kernel(bool vnni);
}  // namespace detail

}  // namespace int8gemm
}  // namespace ortlite
