// com.microsoft MatMulNBits (what onnxruntime's MatMulNBitsQuantizer writes: int4 weights,
// the way LLMs and embedding models ship): Y[..., N] = A[..., K] x dequant(B)^T [+ bias].
//
// B is uint8 [N, k_blocks, blob_size]: per output column n, K codes of `bits` bits (2, 4 or
// 8) packed low bits first, in blocks of block_size (a power of two >= 16) with
// blob_size = block_size * bits / 8 bytes each; k_blocks = ceil(K / block_size), codes past K
// in the last block are ignored. scales hold one value per (n, block), [N * k_blocks] or
// [N, k_blocks], of A's type. zero_points, optional, are uint8 codes packed the same way per
// column (ceil(k_blocks * bits / 8) bytes per column); absent, every block's zero point is
// 2^(bits - 1). w[n, k] = (code - zero_point) * scale in float. g_idx (act-order) and zero
// points of A's type are not supported (a typed error says so).
//
// The weights stay packed (no float copy at load). Each run dequantizes them on the fly. With
// AVX-512 and 4-bit codes in whole blocks (K a multiple of 32; matmul_nbits_avx512.cc): for up
// to 24 rows of A, column by column, 32 codes at a time unpacked and dequantized in registers
// (code * scale - zero point * scale, one fused multiply-add) and multiplied with 8 rows of A
// at a time; for more rows, 32 columns at a time dequantized straight into the fused GEMM's
// packed panel layout (a 16 x 16 register transpose per 16 columns and 16 codes; up to 1 MiB
// of panels per task, in cache) and multiplied with all of A, the bias in the GEMM's
// epilogue. Otherwise (2 or 8 bits, a partial last block, ORTLITE_NBITS_SCALAR=1, no
// AVX-512) a column at a time through a K-float row: dot products for up to 4 rows, panels
// through the fused (or the float) GEMM above that. accuracy_level is read and accepted:
// ortlite always accumulates the float products (the result of accuracy level 0;
// onnxruntime's level 4 quantizes A to int8 and differs from it by that quantization).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "compute/fused_gemm.h"
#include "compute/gemm.h"
#include "compute/simd.h"
#include "providers/cpu/quant/matmul_nbits_simd.h"
#include "providers/cpu/nn/nn_common.h"
#include "providers/cpu/quant/quant_common.h"

namespace ortlite {
namespace quant {
namespace {

constexpr int64_t kPanelFloats = int64_t(1) << 18;  // a dequantized panel: 1 MiB at most
constexpr int64_t kChunkK = 512;                    // rows of K dequantized at a time
constexpr int64_t kChunkFloats = int64_t(1) << 16;  // and up to 256 KiB of them
constexpr int64_t kRowsDot = 4;  // up to this many rows of A: the dot-product path
// Up to this many rows, the AVX-512 dot products (8 rows and 2 columns at a time); above, the
// dequantized panels through the fused GEMM. Panel time over dot-product time (1 thread,
// thread CPU time) at K x N = 128 x 512, 512 x 128, 768 x 3072, 3072 x 768, 4096 x 4096:
// 8 rows 0.84, -, 1.33, -, 2.0; 12 rows 0.54, 0.77, 1.03, 1.17, 1.09; 16 rows 0.58, 1.16,
// 0.74, 0.73, 1.34.
constexpr int64_t kRowsFast = 8;

// The code of `bits` bits at index i of a packed byte run (low bits first).
inline uint32_t code_at(const uint8_t* p, int64_t i, int64_t bits) {
  const int64_t bit = i * bits;
  return (p[bit >> 3] >> (bit & 7)) & ((1u << bits) - 1);
}

struct Layout {
  int64_t K, bits, block, kb, blob, zp_bytes;
};

// w[k] = (code - zero point) * scale for column n of B, k < K. Compiled for AVX-512 and AVX2
// as well (picked by the CPU at load).
ORTLITE_NN_CLONES512 void dequant_column(const Layout& L, const uint8_t* b, const float* s,
                                         const uint8_t* z, int64_t n, float* w) {
  const uint8_t* col = b + n * L.kb * L.blob;
  const float dflt = static_cast<float>(1 << (L.bits - 1));
  for (int64_t blk = 0; blk < L.kb; ++blk) {
    const float sc = s[n * L.kb + blk];
    const float zp = z ? static_cast<float>(code_at(z + n * L.zp_bytes, blk, L.bits)) : dflt;
    const uint8_t* q = col + blk * L.blob;
    const int64_t k0 = blk * L.block, len = std::min(L.block, L.K - k0);
    float* wb = w + k0;
    if (L.bits == 4) {
      const int64_t half = len / 2;
      for (int64_t i = 0; i < half; ++i) {
        const uint8_t v = q[i];
        wb[2 * i] = (static_cast<float>(v & 15) - zp) * sc;
        wb[2 * i + 1] = (static_cast<float>(v >> 4) - zp) * sc;
      }
      if (len & 1) wb[len - 1] = (static_cast<float>(q[half] & 15) - zp) * sc;
    } else if (L.bits == 8) {
      for (int64_t j = 0; j < len; ++j) wb[j] = (static_cast<float>(q[j]) - zp) * sc;
    } else {
      for (int64_t j = 0; j < len; ++j)
        wb[j] = (static_cast<float>(code_at(q, j, L.bits)) - zp) * sc;
    }
  }
}

const Nbits4Simd& nbits4_simd() {
  static const Nbits4Simd k = [] {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && !std::getenv("ORTLITE_NBITS_SCALAR"))
      return nbits4_avx512();
#endif
    return Nbits4Simd{};
  }();
  return k;
}

// sum_k a[k] w[k] in 16 running lanes.
ORTLITE_NN_CLONES512 float dot(const float* a, const float* w, int64_t n) {
  float acc[16] = {};
  int64_t k = 0;
  for (; k + 16 <= n; k += 16)
    for (int j = 0; j < 16; ++j) acc[j] += a[k + j] * w[k + j];
  float sum = 0.0f;
  for (int j = 0; j < 16; ++j) sum += acc[j];
  for (; k < n; ++k) sum += a[k] * w[k];
  return sum;
}

class MatMulNBits final : public Kernel {
 public:
  explicit MatMulNBits(const KernelInfo& info)
      : K_(info.attr_int_required("K")),
        N_(info.attr_int_required("N")),
        bits_(info.attr_int("bits", 4)),
        block_(info.attr_int_required("block_size")) {
    if (bits_ != 2 && bits_ != 4 && bits_ != 8)
      info.fail(StatusCode::kNotImplemented,
                "attribute 'bits' must be 2, 4 or 8, got " + std::to_string(bits_));
    if (block_ < 16 || (block_ & (block_ - 1)) != 0)
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'block_size' must be a power of 2 >= 16, got " + std::to_string(block_));
    if (K_ <= 0 || N_ <= 0)
      info.fail(StatusCode::kInvalidGraph, "attributes 'K' and 'N' must be positive, got K " +
                                               std::to_string(K_) + ", N " + std::to_string(N_));
    if (info.has_input(4))
      info.fail(StatusCode::kNotImplemented,
                "input 'g_idx' (act-order) is not supported; quantize without it");
    kb_ = (K_ + block_ - 1) / block_;
    blob_ = block_ * bits_ / 8;
    zp_bytes_ = (kb_ * bits_ + 7) / 8;
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& A = ctx.required_input(0);
    const Tensor& B = ctx.required_input(1);
    const Tensor& S = ctx.required_input(2);
    const Tensor* Z = ctx.input(3);
    const Tensor* bi = ctx.input(kBiasInput);
    const DataType dt = A.dtype();
    if (dt != DataType::kFloat && dt != DataType::kFloat16 && dt != DataType::kBFloat16)
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input 'A' must be float, float16 or bfloat16, got ") + dtype_name(dt));
    if (A.rank() < 1 || A.dim(A.rank() - 1) != K_)
      ctx.fail(StatusCode::kInvalidArgument, "input 'A' " + shape_to_string(A.shape()) +
                                                 " must end in K = " + std::to_string(K_));
    if (B.dtype() != DataType::kUInt8 || B.numel() != N_ * kb_ * blob_)
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'B' must be uint8 [N, k_blocks, blob_size] = [" + std::to_string(N_) + ", " +
                   std::to_string(kb_) + ", " + std::to_string(blob_) + "], got " +
                   dtype_name(B.dtype()) + " " + shape_to_string(B.shape()));
    if (S.dtype() != dt || S.numel() != N_ * kb_)
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'scales' must be " + std::string(dtype_name(dt)) +
                   " with N * k_blocks = " + std::to_string(N_ * kb_) + " values, got " +
                   dtype_name(S.dtype()) + " " + shape_to_string(S.shape()));
    if (Z) {
      if (Z->dtype() != DataType::kUInt8)
        ctx.fail(StatusCode::kNotImplemented,
                 std::string("input 'zero_points' of type ") + dtype_name(Z->dtype()) +
                     " is not supported (uint8 packed zero points are)");
      if (Z->numel() != N_ * zp_bytes_)
        ctx.fail(StatusCode::kInvalidArgument,
                 "input 'zero_points' must hold N * ceil(k_blocks * bits / 8) = " +
                     std::to_string(N_ * zp_bytes_) + " bytes, got " + shape_to_string(Z->shape()));
    }
    if (bi && (bi->dtype() != dt || bi->numel() != N_))
      ctx.fail(StatusCode::kInvalidArgument, "input 'bias' must be " + std::string(dtype_name(dt)) +
                                                 " [N] = [" + std::to_string(N_) + "], got " +
                                                 dtype_name(bi->dtype()) + " " +
                                                 shape_to_string(bi->shape()));
    Shape ys = A.shape();
    ys.back() = N_;
    Tensor& Y = ctx.allocate_output(0, dt, ys);
    const int64_t M = A.numel() / K_;
    if (M == 0) return;

    // Float views of A, the scales and the bias (copies only for the 16-bit types).
    std::vector<float> a_own, s_own, b_own;
    const float* a = as_float(A, a_own);
    const float* s = as_float(S, s_own);
    const float* bias = bi ? as_float(*bi, b_own) : nullptr;
    const uint8_t* b = B.data<uint8_t>();
    const uint8_t* z = Z ? Z->data<uint8_t>() : nullptr;
    std::vector<float> y_own;
    float* y = dt == DataType::kFloat ? Y.data<float>() : nullptr;
    if (!y) {
      y_own.resize(static_cast<size_t>(M * N_));
      y = y_own.data();
    }
    ThreadPool* pool = ctx.thread_pool();
    const Layout L{K_, bits_, block_, kb_, blob_, zp_bytes_};
    // The AVX-512 loops take 4-bit codes in whole blocks, K a multiple of 32.
    const Nbits4Simd& simd = nbits4_simd();
    const bool fast = simd.dot_rows && bits_ == 4 && kb_ * block_ == K_ && K_ % 32 == 0;
    auto column = [&](int64_t n) {
      return Nbits4Column{b + n * kb_ * blob_, s + n * kb_, z ? z + n * zp_bytes_ : nullptr, kb_,
                          block_};
    };
    if (M <= kRowsFast && fast) {
      // A with each 32 values evens first, the order of the codes in the vector loop.
      std::vector<float> ad(static_cast<size_t>(M * K_));
      deinterleave32(a, ad.data(), M * K_);
      parallel_for(pool, N_, 2.0 * static_cast<double>(K_) * (M + 2), [&](int64_t n0, int64_t n1) {
        const float* a = ad.data();
        // 8 rows of A at a time against 32 columns of codes, both in cache; 2 columns per
        // tile (4 for up to 4 rows).
        float out[32];
        for (int64_t c0 = n0; c0 < n1; c0 += 32) {
          const int64_t c1 = std::min(n1, c0 + 32);
          for (int64_t i0 = 0; i0 < M; i0 += 8) {
            const int64_t r = std::min<int64_t>(8, M - i0);
            const int64_t per = r <= 4 ? 4 : 2;
            for (int64_t n = c0; n < c1; n += per) {
              const int nc = static_cast<int>(std::min(per, c1 - n));
              Nbits4Column cols[4];
              for (int j = 0; j < nc; ++j) cols[j] = column(n + j);
              simd.dot_rows(cols, nc, a + i0 * K_, r, K_, out, 4);
              for (int64_t i = 0; i < r; ++i)
                for (int j = 0; j < nc; ++j)
                  y[(i0 + i) * N_ + n + j] = bias ? out[4 * i + j] + bias[n + j] : out[4 * i + j];
            }
          }
        }
      });
    } else if (M <= kRowsDot) {
      parallel_for(pool, N_, 2.0 * static_cast<double>(K_) * (M + 2), [&](int64_t n0, int64_t n1) {
        std::vector<float> w(static_cast<size_t>(K_));
        for (int64_t n = n0; n < n1; ++n) {
          dequant_column(L, b, s, z, n, w.data());
          for (int64_t i = 0; i < M; ++i) {
            const float sum = dot(a + i * K_, w.data(), K_);
            y[i * N_ + n] = bias ? sum + bias[n] : sum;
          }
        }
      });
    } else if (nn::fgemm::available()) {
      // Units of whole 32-column panels, dequantized into the fused GEMM's packed layout in
      // chunks of up to kChunkK rows of K (the AVX-512 loops; the portable one takes all of K)
      // and multiplied with those columns of A, each chunk's product added to the previous
      // ones; the bias comes with the first. A unit's chunk is at most kChunkFloats floats,
      // so it stays in L2 between the dequantization and the product.
      constexpr int64_t kNR = nn::fgemm::kNR;
      const int64_t kc = fast ? std::min(K_, kChunkK) : K_;
      const int64_t per_unit = std::max<int64_t>(1, kChunkFloats / (kc * kNR));
      const int64_t panels = (N_ + kNR - 1) / kNR, units = (panels + per_unit - 1) / per_unit;
      parallel_for(pool, units, 2.0 * static_cast<double>(M) * K_ * kNR * per_unit,
                   [&](int64_t u0, int64_t u1) {
                     thread_local std::vector<float> w, col;
                     const size_t need = static_cast<size_t>(std::min(per_unit, panels) * kc * kNR);
                     if (w.size() < need) w.resize(need);
                     for (int64_t u = u0; u < u1; ++u) {
                       const int64_t j0 = u * per_unit * kNR,
                                     nc = std::min(per_unit * kNR, N_ - j0);
                       for (int64_t k0 = 0; k0 < K_; k0 += kc) {
                         const int64_t k1 = std::min(K_, k0 + kc);
                         for (int64_t q = 0; q * kNR < nc; ++q) {
                           const int64_t c0 = j0 + q * kNR, cn = std::min(kNR, N_ - c0);
                           float* panel = w.data() + q * (k1 - k0) * kNR;
                           if (fast) {
                             Nbits4Column cols[kNR];
                             for (int64_t j = 0; j < cn; ++j) cols[j] = column(c0 + j);
                             simd.dequant_panel(cols, static_cast<int>(cn), k0, k1, panel);
                           } else {
                             col.resize(static_cast<size_t>(K_));
                             for (int64_t j = 0; j < cn; ++j) {
                               dequant_column(L, b, s, z, c0 + j, col.data());
                               for (int64_t k = 0; k < K_; ++k) panel[k * kNR + j] = col[k];
                             }
                           }
                         }
                         nn::fgemm::Epilogue ep;
                         ep.bias_col = bias && k0 == 0 ? bias + j0 : nullptr;
                         nn::fgemm::gemm_w_right_panels(a + k0, K_, M, w.data(), nc, k1 - k0,
                                                        y + j0, N_, ep, k0 > 0);
                       }
                     }
                   });
    } else {
      // Panels of whole 16-column groups, up to kPanelFloats floats.
      const int64_t kPanel = std::max<int64_t>(16, kPanelFloats / K_ / 16 * 16);
      const int64_t panels = (N_ + kPanel - 1) / kPanel;
      parallel_for(
          pool, panels, 2.0 * static_cast<double>(M) * K_ * kPanel, [&](int64_t p0, int64_t p1) {
            // Each thread's panel, reused across runs (not zeroed: dequant writes all of it).
            thread_local std::vector<float> w;
            const size_t need = static_cast<size_t>(std::min(kPanel, N_) * K_);
            if (w.size() < need) w.resize(need);
            for (int64_t p = p0; p < p1; ++p) {
              const int64_t j0 = p * kPanel, nc = std::min(kPanel, N_ - j0);
              for (int64_t j = 0; j < nc; ++j)
                dequant_column(L, b, s, z, j0 + j, w.data() + j * K_);
              // Y[:, j0:j0+nc] = A x W^T (W: nc x K, row-major). (The fused GEMM on the panel
              // packed for it took as long: 1139-1156 against 1112-1158 us per run.)
              gemm(false, true, M, nc, K_, 1.0f, a, K_, w.data(), K_, 0.0f, y + j0, N_, nullptr);
              if (bias)
                for (int64_t i = 0; i < M; ++i)
                  for (int64_t j = 0; j < nc; ++j) y[i * N_ + j0 + j] += bias[j0 + j];
            }
          });
    }
    if (dt != DataType::kFloat) nn::convert_from_float(dt, y, Y.raw_data(), M * N_);
  }

 private:
  static constexpr size_t kBiasInput = 5;

  static const float* as_float(const Tensor& t, std::vector<float>& own) {
    if (t.dtype() == DataType::kFloat) return t.data<float>();
    own.resize(static_cast<size_t>(t.numel()));
    nn::convert_to_float(t.dtype(), t.raw_data(), own.data(), t.numel());
    return own.data();
  }

  int64_t K_, N_, bits_, block_, kb_ = 0, blob_ = 0, zp_bytes_ = 0;
};

}  // namespace

void register_matmul_nbits(KernelRegistry& r) {
  r.add("com.microsoft", "MatMulNBits", 1, kMaxOpset, make_factory<MatMulNBits>());
}

}  // namespace quant
}  // namespace ortlite
