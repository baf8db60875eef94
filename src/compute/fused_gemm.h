// A float GEMM for the fused operators (Conv / FusedConv, FusedMatMul): one operand is
// packed once at load (the constant weights), the other is read in place (row-major, any
// row stride), and the epilogue (alpha, a per-row or per-column bias, a summed input Z, the
// activation) is applied to each tile of C in registers before it is stored. Nothing is
// packed per call and C is written once, which is what a BLAS call cannot offer: it packs
// both operands on every call and writes C before the epilogue reads it back.
//
//   C[M x N] = act(alpha * A[M x K] B[K x N] + bias + Z)
//
// The micro-kernel computes 12 x 32 tiles: with AVX-512F (fused_gemm_avx512.cc), else with
// AVX2 + FMA as 6 x 16 sub-tiles (fused_gemm_avx2.cc); on a CPU with neither available() is
// false and callers keep their BLAS path. On CPUs with AMX-BF16, large products run on the
// tiles instead (fused_gemm_amx.cc: each float split into three bfloat16 parts, float32
// accuracy). ORTLITE_GEMM_ISA (avx512: no tiles; avx2, sse2) caps the choice as it caps
// gemm.h's kernels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>

#include "compute/activation.h"
#include "ortlite/tensor.h"
#include "ortlite/thread_pool.h"

namespace ortlite {
namespace nn {
namespace fgemm {

constexpr int64_t kMR = 12;      // rows of a tile (A panel height)
constexpr int64_t kNR = 32;      // columns of a tile (B panel width)
constexpr int64_t kOffPad = 96;  // entries past K of a B offset table (TileArgs::b_off)
constexpr int64_t kKC = 1024;    // K block: C holds partial sums between blocks

// One call of the micro-kernel: a rows x cols tile (rows <= 12, cols <= 32) over k steps.
// Element (r, k) of A is a[r * a_rs + k * a_ks]; row k of B starts at b + k * b_ks (32
// values, the ones past `cols` are not read). When `accumulate`, C holds partial sums that
// are added. When `last`, the epilogue runs: alpha, bias_row[r] or bias_col[c], z[r * ldz +
// c], then the in-register activation (act: 0 none, 1 clamp to [lo, hi] (Relu, Clip),
// 2 LeakyRelu with slope lo). When pf is set, the first pf_lines k steps each also prefetch
// one 64-byte line from pf on (pf + 16 * i for step i) into L2: the driver points it at the
// packed B the thread computes next, so that the B stream comes from L2 instead of L3.
struct TileArgs {
  int64_t k;
  const float* a;
  int64_t a_rs, a_ks;
  const float* b;
  int64_t b_ks;
  int rows, cols;
  float* c;
  int64_t ldc;
  bool accumulate, last;
  float alpha;
  const float* bias_row;
  const float* bias_col;
  const float* z;
  int64_t ldz;
  int act;
  float lo, hi;
  const float* pf;
  int64_t pf_lines;
  // When set, row k of B starts at b + b_off[k] instead (b_ks unused): a convolution's
  // input read in place, one offset per (channel, kernel position); A must have a_rs 1.
  // The table has kOffPad more entries past k (rows prefetched ahead; any valid offset).
  const int64_t* b_off;
  // A is run_block's k-major copy (in cache): not prefetched ahead.
  bool a_copied;
};
void tile_avx512(const TileArgs& t);
// One to three rows against two adjacent full panels (t.b, and b2 for columns 32-63 of C,
// bias_col and z); AVX-512 only, no b_off.
void tile_row_pair_avx512(const TileArgs& t, const float* b2);
void tile_avx2(const TileArgs& t);
bool cpu_has_avx512();
bool cpu_has_avx2_fma();

// Whether the fused GEMM runs on this CPU (AVX-512F, or AVX2 and FMA).
bool available();
// Whether it runs on the AVX-512 micro-kernel (false: AVX2, or not at all).
bool uses_avx512();

namespace amx {
// W's bfloat16 parts for the AMX products (fused_gemm_amx.cc): x = x0 + x1 + x2 exactly, in
// the layout of the tiles' B operand (W on the right) or A operand (W on the left).
struct Parts {
  struct Free {
    void operator()(uint16_t* p) const;
  };
  std::unique_ptr<uint16_t[], Free> data;
  int64_t n = 0, k = 0, kp = 0;  // outputs, depth, depth padded to a multiple of 32
};
// Whether this CPU and OS run AMX-BF16 tiles (checked and the tile state asked for once).
bool available_on_cpu();
// Parts of the packed panels (Packed's layout, n outputs of depth K), as the tiles' B operand
// (W on the right) or, with a_form, their A operand (W on the left); false (nothing made)
// when W holds a value the tiles do not carry as a float product would (NaN, infinity,
// |x| >= 2^127, subnormals).
bool make_parts(const float* panels, int64_t n, int64_t K, bool a_form, Parts* out);
}  // namespace amx

// Weights packed for the micro-kernel, immutable once made (shared by concurrent runs):
// panels of 32 output features (rows of a conv's W, columns of a MatMul's B), [panel][k][32],
// zero-padded. The same layout serves as the broadcast operand (A, row blocks of <= 12
// output features inside a panel) and as the streamed one (B, whole panels).
class Packed {
 public:
  Packed() = default;
  bool empty() const { return !data_; }
  int64_t outputs() const { return n_; }  // output features
  int64_t depth() const { return k_; }    // K
  const float* data() const { return data_.get(); }

  // W with W(j, k) = w[j * ld + k] (j < n outputs, k < K), or w[k * ld + j] when k_major.
  static Packed pack(const float* w, int64_t ld, int64_t n, int64_t K, bool k_major);
  // Zeros, to be filled with set() while it is built (before it is shared).
  static Packed zeros(int64_t n, int64_t K);
  void set(int64_t j, int64_t k, float v) {
    data_[static_cast<size_t>((j / kNR) * k_ * kNR + k * kNR + j % kNR)] = v;
  }
  // Multiplies output feature j by s[j] (while it is built).
  void scale_outputs(const float* s);
  // The AMX parts of W (a_form: for W on the left), made on the first call (thread-safe; the
  // weights must be final by then); null when AMX-BF16 is not in use or W has a value the
  // parts cannot carry.
  const amx::Parts* amx_parts(bool a_form) const;

 private:
  struct Lazy;
  struct Free {
    Free() noexcept : align(64) {}
    explicit Free(size_t a) noexcept : align(a) {}
    size_t align;  // the alignment it was allocated with
    void operator()(float* p) const;
  };
  int64_t n_ = 0, k_ = 0;
  std::unique_ptr<float[], Free> data_;
  std::shared_ptr<Lazy> lazy_;
};

struct Epilogue {
  float alpha = 1.f;
  const float* bias_row = nullptr;  // [rows of C]
  const float* bias_col = nullptr;  // [columns of C]
  const float* z = nullptr;         // rows x columns, row stride ldz
  int64_t ldz = 0;
  ActSpec act;
};

namespace amx {
// C[M x N] = epilogue(A W^T) on AMX tiles, A row-major (row stride lda); false, with C
// untouched, when A holds a value the parts do not carry.
bool gemm_w_right(const float* a, int64_t lda, int64_t M, const Parts& W, float* C, int64_t ldc,
                  const Epilogue& ep, ThreadPool* pool);
// C[M x N] = epilogue(W X) on AMX tiles, W's parts in a_form (M outputs), X(k, n) at
// x[off[k] + n], or x[k * ldx + n] without off; false, with C untouched, when X holds a value
// the parts do not carry.
bool gemm_w_left(const Parts& W, const float* x, const int64_t* off, int64_t ldx, int64_t N,
                 float* C, int64_t ldc, const Epilogue& ep, ThreadPool* pool);
}  // namespace amx

// Whether gemm_w_left runs C = W X (N columns) on the AMX tiles on this CPU (a convolution
// then needs no transposed form for few output positions).
bool amx_takes_w_left(const Packed& W, int64_t N, ThreadPool* pool);

// C[M x N] = epilogue(alpha * W X), W packed (M outputs x K), X row-major (K x N, row stride
// ldx): a convolution as GEMM (rows of C are output channels).
void gemm_w_left(const Packed& W, const float* X, int64_t ldx, int64_t N, float* C, int64_t ldc,
                 const Epilogue& ep, ThreadPool* pool);
// The same with X(k, n) = x[off[k] + n]: a convolution with strides 1 read from its
// (padded) input in place, off[k] the offset of channel and kernel position k; off has
// K + kOffPad entries (the last ones repeat off[K - 1]).
void gemm_w_left_offsets(const Packed& W, const float* x, const int64_t* off, int64_t N, float* C,
                         int64_t ldc, const Epilogue& ep, ThreadPool* pool);
// C[M x N] = epilogue(alpha * A W^T), A (M x K) with A(i, k) = a[i * a_rs + k * a_ks], W
// packed (N outputs x K): a MatMul with constant B (a_rs = lda, a_ks = 1), or a
// convolution with few output positions computed transposed (A = the im2col block read
// column-wise: a_rs = 1, a_ks = its row stride).
void gemm_w_right(const float* a, int64_t a_rs, int64_t a_ks, int64_t M, const Packed& W, float* C,
                  int64_t ldc, const Epilogue& ep, ThreadPool* pool);
// The same, calling cols_done(n0, n1) on the thread that computed columns [n0, n1) of C (all
// its rows, epilogue applied) as soon as they are done: n0 a multiple of 32, each column in
// exactly one call (none where cols_done is empty). A convolution computed transposed copies
// them back to channel-major there, on the core that wrote them.
void gemm_w_right(const float* a, int64_t a_rs, int64_t a_ks, int64_t M, const Packed& W, float* C,
                  int64_t ldc, const Epilogue& ep, ThreadPool* pool,
                  const std::function<void(int64_t, int64_t)>& cols_done);
// gemm_w_right over rows k0 .. k1 - 1 of W's depth only (A read from its column k0), adding to
// C when `accumulate`: a product split along K in blocks whose partial sums are added in
// order, as MLAS's and gemm.h's K blocks add theirs (Attention's projection: the same bits).
void gemm_w_right_k(const float* a, int64_t lda, int64_t M, const Packed& W, int64_t k0, int64_t k1,
                    float* C, int64_t ldc, const Epilogue& ep, bool accumulate, ThreadPool* pool);
// The same with A(i, k) = a[i * a_rs + k * a_ks].
void gemm_w_right_k(const float* a, int64_t a_rs, int64_t a_ks, int64_t M, const Packed& W,
                    int64_t k0, int64_t k1, float* C, int64_t ldc, const Epilogue& ep,
                    bool accumulate, ThreadPool* pool);

// C[M x N] = epilogue(alpha * A B), A (M x K) with A(i, k) = a[i * a_rs + k * a_ks] and B
// row-major (K x N, row k at b + k * ldb), both read in place: products too small for packing
// either operand to pay (compute/gemm.cc sends them here). The epilogue's z may be C itself
// when K <= kKC (it is read before C is first written).
void gemm_plain(const float* a, int64_t a_rs, int64_t a_ks, int64_t M, const float* b, int64_t ldb,
                int64_t N, int64_t K, float* C, int64_t ldc, const Epilogue& ep, ThreadPool* pool);

// The same on the calling thread with W given as raw panels in Packed's layout
// ([panel][k][32], N outputs of depth K, any alignment): weights made for one call, such as
// MatMulNBits' dequantized blocks. With `accumulate`, C holds partial sums the product is
// added to (a product split along K); the epilogue still runs.
void gemm_w_right_panels(const float* a, int64_t lda, int64_t M, const float* w, int64_t N,
                         int64_t K, float* C, int64_t ldc, const Epilogue& ep, bool accumulate);
// The same with A(i, k) = a[i * a_rs + k * a_ks].
void gemm_w_right_panels(const float* a, int64_t a_rs, int64_t a_ks, int64_t M, const float* w,
                         int64_t N, int64_t K, float* C, int64_t ldc, const Epilogue& ep,
                         bool accumulate);

// Gemm (and FusedGemm) with a constant float B: op(B) packed once at load, then
// Y = act(alpha op(A) op(B) + beta C) in one pass with C as the epilogue's bias or Z.
class ConstB {
 public:
  // Packs `b` (2-D float, op(B) = B^T when trans_b); leaves this empty when the fused GEMM
  // is not available on this CPU or `b` is not a non-empty 2-D float tensor.
  void pack(const Tensor* b, bool trans_b);
  bool packed() const { return !w_.empty(); }
  // Whether run() can take this call: packed, B has the packed shape, and C (when used) is
  // one of the shapes the epilogue takes (any row or column broadcast; a full M x N C only
  // with beta 1).
  bool accepts(const Tensor& B, const Tensor* C, float beta, int64_t M, int64_t N) const;
  // y (M x N, row stride N) = act(alpha op(A) op(B) + beta C); A float, op(A) = A^T when
  // trans_a. Call only when accepts().
  void run(const Tensor& A, bool trans_a, const Tensor* C, float alpha, float beta,
           const ActSpec& act, float* y, ThreadPool* pool) const;

 private:
  Packed w_;
  Shape b_shape_;
};

}  // namespace fgemm
}  // namespace nn
}  // namespace ortlite
