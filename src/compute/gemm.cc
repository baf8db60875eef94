// Driver of the packed, cache-blocked GEMM: kernel selection, blocking, threading.
//
// Loop structure (BLIS-like), one task per (MC x NC) tile of C:
//   for pc in K step KC:            pack op(B)[pc:pc+kc, tile cols] into NR-column panels
//                                   pack op(A)[tile rows, pc:pc+kc] into MR-row panels
//     for jr in tile cols step NR:  (B panel stays in L1)
//       for ir in tile rows step MR: micro-kernel on an MR x NR block of C (registers)
// Pre-packed operands use full-K panels, so any KC block is a pointer offset into them.
// Small float products skip the packing: the fused GEMM's micro-kernel reads them in place.
#include "compute/gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "compute/blas.h"
#include "compute/conv_avx512.h"
#include "compute/fused_gemm.h"
#include "compute/gemm_kernels.h"
#include "ortlite/status.h"

namespace ortlite {

using gemm_detail::GemmKernelTable;

namespace {

// Products of up to this many multiply-adds (both M and N above 1) that the BLAS does not
// take go to the fused GEMM with their operands in place (float, AVX-512F; gemm() below). 1
// thread, thread CPU time of a batched MatMul against the packed path: 16 x (32 x 32 x 32)
// 13.5 against 21.4 us, 16 x (16 x 256 x 16) 39 against 102, 16 x (4 x 64 x 4) 5.7 against
// 18.6, 4 x (128 x 128 x 128) (no BLAS) 151 against 174. (The BLAS, from 48^3 on, was
// ahead of it at 64^3 and 80^3: 76 against 80 us, 10.9 against 13.5.)
constexpr double kSmallProduct = double(1 << 21);

// Products whose tiles are all full (M >= 32 rows, N a multiple of 32) and deep enough (K >=
// 64), from 2^20 multiply-adds up to kFullTileProduct on one thread (kSmallProduct when the
// product is split over threads), go to the fused GEMM in place ahead of the BLAS. Per head
// of attention, 1 thread, against onnxruntime, BLAS / in place: 12 x (128 x 64 x 128) 0.85
// / 1.04-1.10, 12 x (128 x 128 x 64) 0.82-0.85 / 1.09-1.11, 12 x (384 x 64 x 384) 0.84 /
// 0.91, 4 x (64 x 256 x 64) 0.86 / 1.21, 256 x 96 x 256 0.96 / 1.15. The BLAS stays ahead
// with partial tiles (100^3: 1.56 / 1.21; 8 x 12 x (50 x 64 x 50): 1.29 / 0.96), at K = 32
// (12 x (128 x 32 x 128): 1.15 / 0.97) and for smaller products (8 x 12 x (64 x 64 x 64):
// 1.26 / 1.04). It was ahead below 32 rows too when this was measured (16 x 384 x 384: 0.95
// / 0.84), and is no longer (kFewRows).
constexpr double kFullTileMin = double(1 << 20);
constexpr double kFullTileProduct = double(1 << 25);

// Products of at most kFewRows rows go to the fused GEMM in place at any size while B (all
// the B's a batched caller streams) fits in kFewRowsBytes: the BLAS packed all of B on every
// call, as much work as the product itself with a few rows (the MatMul of a short sequence by
// a large activation). 1 thread against onnxruntime, BLAS / in place: 7 x 768 x 1536 0.70 /
// 2.02, 2 x (4 x 384 x 1536) 0.76 / 1.88, 8 x 1024 x 1024 0.78 / 2.23, 3 x 768 x 3072 0.61 /
// 1.33, 16 x 384 x 384 1.02 / 1.55, 24 x 768 x 768 1.00 / 1.33, 31 x 512 x 2048 0.81 / 1.38,
// 2 x 768 x 3072 0.66 / 0.86 (two rows: the in-place tile reads B's rows 32 columns at a
// time, 12 KiB apart). From memory those strided reads lose to the packing's sequential one:
// 8 x (7 x 768 x 1536) 1.11 / 0.91, 32 x (8 x 256 x 1024) 1.21 / 0.83, 8 x (16 x 512 x 1024)
// 1.00 / 0.89 (17 MiB of B), 7 x 2048 x 4096 1.03 / 0.84 (32 MiB). Above 32 rows mixed (64 x
// 768 x 3072 1.01 / 0.91, 128 x 768 x 768 0.98 / 1.09).
constexpr int64_t kFewRows = 32;
constexpr double kFewRowsBytes = 12.0 * (1 << 20);

// Narrow products (8 <= N < 32 columns, at least 32 rows) of 2^20 multiply-adds and more
// (10 to 16 columns; 2^22 for 8 or 9, 2^23 above 16) go to the fused GEMM in place too: the BLAS
// ran them at a fraction of its speed on wider ones. 1 thread, BLAS / in place: 512 x 1000 x 10 222
// / 162 us, 2048 x 256 x 10 270 / 189, 128 x 1000 x 16 55 / 42, 2048 x 1000 x 8 832 / 652, 2048 x
// 1000 x 24 1694 / 1332. Below those sizes and below 8 columns the BLAS was as fast or faster (512
// x 64 x 10 11.2 / 13.6, 128 x 256 x 8 6.7 / 12.2, 2048 x 256 x 4 158 / 185: the in-place tile
// computes 16 columns).
bool narrow_product(int64_t M, int64_t N, double work) {
  if (M < 32 || N < 8 || N >= 32) return false;
  return work >= (N < 10 ? 4.0 : N <= 16 ? 1.0 : 8.0) * kFullTileMin;
}

struct Dispatch {
  const GemmKernelTable<float>* f32;
  const GemmKernelTable<double>* f64;
};

const Dispatch& dispatch() {
  static const Dispatch d = [] {
    int level = 0;  // 0: sse2 / generic, 1: avx2+fma, 2: avx512f
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      level = 1;
      if (__builtin_cpu_supports("avx512f")) level = 2;
    }
#endif
    if (const char* env = std::getenv("ORTLITE_GEMM_ISA")) {
      const std::string s(env);
      int cap = level;
      if (s == "sse2" || s == "generic") cap = 0;
      if (s == "avx2") cap = 1;
      if (s == "avx512") cap = 2;
      level = std::min(level, cap);
    }
    Dispatch r{gemm_detail::sse2_table_f32(), gemm_detail::sse2_table_f64()};
    if (level >= 2 && gemm_detail::avx512_table_f32() && gemm_detail::avx512_table_f64()) {
      r = {gemm_detail::avx512_table_f32(), gemm_detail::avx512_table_f64()};
    } else if (level >= 1 && gemm_detail::avx2_table_f32() && gemm_detail::avx2_table_f64()) {
      r = {gemm_detail::avx2_table_f32(), gemm_detail::avx2_table_f64()};
    }
    return r;
  }();
  return d;
}

template <typename T>
const GemmKernelTable<T>& table();
template <>
const GemmKernelTable<float>& table<float>() {
  return *dispatch().f32;
}
template <>
const GemmKernelTable<double>& table<double>() {
  return *dispatch().f64;
}

constexpr std::align_val_t kAlign{64};

template <typename T>
T* aligned_new(size_t count) {
  return static_cast<T*>(::operator new(std::max<size_t>(count, 1) * sizeof(T), kAlign));
}
template <typename T>
void aligned_delete(T* p) {
  ::operator delete(p, kAlign);
}

// Per-thread packing buffers, grown on demand and kept for the thread's lifetime.
template <typename T>
class Scratch {
 public:
  ~Scratch() {
    if (p_) aligned_delete(p_);
  }
  T* get(size_t count) {
    if (count > cap_) {
      if (p_) aligned_delete(p_);
      p_ = nullptr;
      cap_ = 0;
      p_ = aligned_new<T>(count);
      cap_ = count;
    }
    return p_;
  }

 private:
  T* p_ = nullptr;
  size_t cap_ = 0;
};

template <typename T>
Scratch<T>& scratch(int which) {
  thread_local Scratch<T> bufs[2];
  return bufs[which];
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
int64_t round_up(int64_t a, int64_t b) {
  return ceil_div(a, b) * b;
}

template <typename T>
struct Operand {
  bool trans;
  const T* p;
  int64_t ld;
  const PackedGemmMatrix<T>* packed;
};

template <typename T>
void scale_c(int64_t M, int64_t N, T beta, T* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    T* c = C + i * ldc;
    if (beta == T(0)) {
      std::fill(c, c + N, T(0));
    } else if (beta != T(1)) {
      for (int64_t j = 0; j < N; ++j) c[j] *= beta;
    }
  }
}

// op(A) is a single row (M == 1): y[0:N] = alpha * x * op(B) + beta * y.
template <typename T>
void gemv_row(const GemmKernelTable<T>& t, const T* x, int64_t incx, const Operand<T>& B, int64_t N,
              int64_t K, T alpha, T beta, T* C, ThreadPool* pool) {
  if (B.packed) {
    const int64_t nr = t.nr;
    const int64_t panels = ceil_div(N, nr);
    const int64_t per = std::max<int64_t>(1, 256 / nr);  // panels per task
    parallel_for(pool, ceil_div(panels, per), 2.0 * static_cast<double>(K) * per * nr,
                 [&](int64_t b, int64_t e) {
                   for (int64_t q = b; q < e; ++q) {
                     const int64_t j0 = q * per * nr;
                     const int64_t n = std::min<int64_t>(per * nr, N - j0);
                     t.row_packed_b(K, x, incx, B.packed->data() + (j0 / nr) * K * nr, K * nr, n,
                                    C + j0, alpha, beta);
                   }
                 });
    return;
  }
  if (!B.trans) {
    constexpr int64_t kChunk = 256;
    parallel_for(pool, ceil_div(N, kChunk), 2.0 * static_cast<double>(K) * kChunk,
                 [&](int64_t b, int64_t e) {
                   for (int64_t q = b; q < e; ++q) {
                     const int64_t j0 = q * kChunk;
                     const int64_t n = std::min(kChunk, N - j0);
                     t.axpy_rows(K, n, B.p + j0, B.ld, x, incx, C + j0, alpha, beta);
                   }
                 });
    return;
  }
  // op(B)(k, j) = B[j * ldb + k]: y[j] = dot(B row j, x).
  const T* xc = x;
  std::vector<T> copy;
  if (incx != 1) {
    copy.resize(static_cast<size_t>(K));
    for (int64_t k = 0; k < K; ++k) copy[k] = x[k * incx];
    xc = copy.data();
  }
  parallel_for(pool, N, 2.0 * static_cast<double>(K), [&](int64_t b, int64_t e) {
    t.dot_rows(e - b, K, B.p + b * B.ld, B.ld, xc, C + b, 1, alpha, beta);
  });
}

// op(B) is a single column (N == 1): C[i * ldc] = alpha * op(A)[i, :] . b + beta * C.
template <typename T>
void gemv_col(const GemmKernelTable<T>& t, const Operand<T>& A, const T* b, int64_t incb, int64_t M,
              int64_t K, T alpha, T beta, T* C, int64_t ldc, ThreadPool* pool) {
  if (!A.trans) {
    const T* bc = b;
    std::vector<T> copy;
    if (incb != 1) {
      copy.resize(static_cast<size_t>(K));
      for (int64_t k = 0; k < K; ++k) copy[k] = b[k * incb];
      bc = copy.data();
    }
    parallel_for(pool, M, 2.0 * static_cast<double>(K), [&](int64_t s, int64_t e) {
      t.dot_rows(e - s, K, A.p + s * A.ld, A.ld, bc, C + s * ldc, ldc, alpha, beta);
    });
    return;
  }
  // op(A)(i, k) = A[k * lda + i]: y = sum_k b[k] * A row k.
  constexpr int64_t kChunk = 256;
  parallel_for(pool, ceil_div(M, kChunk), 2.0 * static_cast<double>(K) * kChunk,
               [&](int64_t s, int64_t e) {
                 for (int64_t q = s; q < e; ++q) {
                   const int64_t i0 = q * kChunk;
                   const int64_t m = std::min(kChunk, M - i0);
                   if (ldc == 1) {
                     t.axpy_rows(K, m, A.p + i0, A.ld, b, incb, C + i0, alpha, beta);
                   } else {
                     T tmp[kChunk];
                     for (int64_t i = 0; i < m; ++i) tmp[i] = C[(i0 + i) * ldc];
                     t.axpy_rows(K, m, A.p + i0, A.ld, b, incb, tmp, alpha, beta);
                     for (int64_t i = 0; i < m; ++i) C[(i0 + i) * ldc] = tmp[i];
                   }
                 }
               });
}

template <typename T>
void run_gemm(const Operand<T>& A, const Operand<T>& B, int64_t M, int64_t N, int64_t K, T alpha,
              T beta, T* C, int64_t ldc, ThreadPool* pool) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == T(0)) {
    scale_c(M, N, beta, C, ldc);
    return;
  }
  const GemmKernelTable<T>& t = table<T>();
  if (M == 1) {
    // A packed with one row: element k of the row sits at k * mr in the panel.
    if (A.packed) {
      gemv_row(t, A.packed->data(), static_cast<int64_t>(t.mr), B, N, K, alpha, beta, C, pool);
    } else {
      gemv_row(t, A.p, A.trans ? A.ld : 1, B, N, K, alpha, beta, C, pool);
    }
    return;
  }
  if (N == 1 && !A.packed) {
    if (B.packed) {
      gemv_col(t, A, B.packed->data(), static_cast<int64_t>(t.nr), M, K, alpha, beta, C, ldc, pool);
    } else {
      gemv_col(t, A, B.p, B.trans ? 1 : B.ld, M, K, alpha, beta, C, ldc, pool);
    }
    return;
  }

  const int64_t mr = t.mr, nr = t.nr;
  const int64_t MC = std::min(t.mc, round_up(M, mr));
  // Rows per task (a multiple of MC, or all of M) and columns per task.
  int64_t MT = round_up(M, mr);
  int64_t NC = std::min(t.nc, round_up(N, nr));
  // Balance the K blocks (no tiny tail block).
  const int64_t KC = ceil_div(K, ceil_div(K, t.kc));
  const int nthreads = pool ? pool->num_threads() : 1;
  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * K;
  if (nthreads > 1 && flops > 2e5) {
    // Enough tiles for every thread (a few each, for balance).
    const int64_t want = 3 * static_cast<int64_t>(nthreads);
    while (ceil_div(M, MT) * ceil_div(N, NC) < want) {
      if (NC / nr >= MT / mr && NC > nr) {
        NC = round_up(NC / 2, nr);
      } else if (MT > mr) {
        MT = round_up(MT / 2, mr);
      } else {
        break;
      }
    }
  }
  const int64_t tm = ceil_div(M, MT), tn = ceil_div(N, NC);
  const int64_t mcb = std::min(MC, MT);

  // One task: rows [i0, i0 + mt) x columns [j0, j0 + nc). The packed B block (kc x nc) is
  // shared by all MC row blocks of the task.
  auto task = [&](int64_t begin, int64_t end) {
    T* abuf = A.packed ? nullptr : scratch<T>(0).get(static_cast<size_t>(mcb * KC));
    T* bbuf = B.packed ? nullptr : scratch<T>(1).get(static_cast<size_t>(KC * NC));
    for (int64_t q = begin; q < end; ++q) {
      // Consecutive tasks share a column block of B.
      const int64_t ti = q % tm, tj = q / tm;
      const int64_t i0 = ti * MT, mt = std::min(MT, M - i0);
      const int64_t j0 = tj * NC, nc = std::min(NC, N - j0);
      for (int64_t pc = 0; pc < K; pc += KC) {
        const int64_t kc = std::min(KC, K - pc);
        const T* Bp;
        int64_t bs;
        if (B.packed) {
          Bp = B.packed->data() + (j0 / nr) * K * nr + pc * nr;
          bs = K * nr;
        } else {
          t.pack_b(B.trans, B.p, B.ld, pc, kc, j0, nc, bbuf);
          Bp = bbuf;
          bs = kc * nr;
        }
        for (int64_t ic = i0; ic < i0 + mt; ic += mcb) {
          const int64_t mc = std::min(mcb, i0 + mt - ic);
          const T* Ap;
          int64_t as;
          if (A.packed) {
            Ap = A.packed->data() + (ic / mr) * K * mr + pc * mr;
            as = K * mr;
          } else {
            t.pack_a(A.trans, A.p, A.ld, ic, mc, pc, kc, abuf);
            Ap = abuf;
            as = kc * mr;
          }
          t.macro(mc, nc, kc, Ap, as, Bp, bs, C + ic * ldc + j0, ldc, alpha, pc == 0 ? beta : T(1));
        }
      }
    }
  };
  parallel_for(pool, tm * tn, 2.0 * static_cast<double>(MT) * NC * K, task);
}

}  // namespace

template <typename T>
void PackedGemmMatrix<T>::Free::operator()(T* p) const {
  aligned_delete(p);
}

namespace {

// Row-major copy of op(X) (rows x cols) from X with leading dimension ld.
template <typename T>
void copy_plain(bool trans, int64_t rows, int64_t cols, const T* X, int64_t ld, T* out) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) out[i * cols + j] = trans ? X[j * ld + i] : X[i * ld + j];
}

}  // namespace

template <typename T>
PackedGemmMatrix<T> pack_gemm_a(bool transA, int64_t M, int64_t K, const T* A, int64_t lda) {
  ORTLITE_ENFORCE(M >= 0 && K >= 0, kInvalidArgument, "pack_gemm_a: negative size");
  const GemmKernelTable<T>& t = table<T>();
  PackedGemmMatrix<T> r;
  r.is_a_ = true;
  r.rows_ = M;
  r.cols_ = K;
  if (blas::enabled()) {
    r.plain_.reset(aligned_new<T>(static_cast<size_t>(std::max<int64_t>(M * K, 1))));
    copy_plain(transA, M, K, A, lda, r.plain_.get());
    return r;
  }
  const int64_t rows = round_up(std::max<int64_t>(M, 1), t.mr);
  r.data_.reset(aligned_new<T>(static_cast<size_t>(rows * std::max<int64_t>(K, 1))));
  if (M > 0 && K > 0) t.pack_a(transA, A, lda, 0, M, 0, K, r.data_.get());
  return r;
}

template <typename T>
PackedGemmMatrix<T> pack_gemm_b(bool transB, int64_t K, int64_t N, const T* B, int64_t ldb) {
  ORTLITE_ENFORCE(N >= 0 && K >= 0, kInvalidArgument, "pack_gemm_b: negative size");
  const GemmKernelTable<T>& t = table<T>();
  PackedGemmMatrix<T> r;
  r.is_a_ = false;
  r.rows_ = K;
  r.cols_ = N;

  const int64_t cols = round_up(std::max<int64_t>(N, 1), t.nr);
  r.data_.reset(aligned_new<T>(static_cast<size_t>(cols * std::max<int64_t>(K, 1))));
  if (N > 0 && K > 0) t.pack_b(transB, B, ldb, 0, K, 0, N, r.data_.get());
  if (std::is_same_v<T, float> && narrow_b(K, N)) {
    // op(B)'s columns as rows for gemm_narrow_rows.
    r.plain_.reset(aligned_new<T>(static_cast<size_t>(N * K)));
    T* bt = r.plain_.get();
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) bt[n * K + k] = transB ? B[n * ldb + k] : B[k * ldb + n];
  }
  return r;
}

template <typename T>
void gemm_packed_a(const PackedGemmMatrix<T>& A, bool transB, int64_t N, const T* B, int64_t ldb,
                   T alpha, T beta, T* C, int64_t ldc, ThreadPool* pool) {
  ORTLITE_ENFORCE(A.is_a() && !A.empty(), kFail, "gemm_packed_a: operand is not a packed A");
  if (A.plain_) {
    gemm(false, transB, A.rows(), N, A.cols(), alpha, A.plain_.get(), A.cols(), B, ldb, beta, C,
         ldc, pool);
    return;
  }
  run_gemm<T>({false, nullptr, 0, &A}, {transB, B, ldb, nullptr}, A.rows(), N, A.cols(), alpha,
              beta, C, ldc, pool);
}

template <typename T>
void gemm_packed_b(bool transA, int64_t M, const T* A, int64_t lda, const PackedGemmMatrix<T>& B,
                   T alpha, T beta, T* C, int64_t ldc, ThreadPool* pool) {
  ORTLITE_ENFORCE(!B.is_a() && !B.empty(), kFail, "gemm_packed_b: operand is not a packed B");
  if constexpr (std::is_same_v<T, float>) {
    if (!transA && B.plain_ &&
        gemm_narrow_rows(M, B.rows(), B.cols(), alpha, A, lda, B.plain_.get(), beta, C, ldc, pool))
      return;
  }
  run_gemm<T>({transA, A, lda, nullptr}, {false, nullptr, 0, &B}, M, B.cols(), B.rows(), alpha,
              beta, C, ldc, pool);
}

void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
          ThreadPool* pool, double b_stream) {
  const double work = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  // Whether the fused GEMM can take the product with its operands in place (AVX-512F, not
  // under ORTLITE_GEMM_ISA caps); elsewhere the BLAS keeps every product it takes.
  const bool in_place = M > 1 && N > 1 && K > 0 && alpha != 0.f &&
                        (beta == 0.f || (beta == 1.f && K <= nn::fgemm::kKC)) &&
                        nn::fgemm::available() && dispatch().f32 == gemm_detail::avx512_table_f32();
  const bool split = pool && pool->num_threads() > 1;
  const bool full_tiles = M >= 32 && N % 32 == 0 && K >= 64 && work >= kFullTileMin;
  const double b_bytes = std::max(b_stream, 4.0 * static_cast<double>(K) * static_cast<double>(N));
  const bool few_rows = M <= kFewRows && b_bytes <= kFewRowsBytes;
  const bool narrow = narrow_product(M, N, work);
  const double in_place_max = few_rows || narrow     ? std::numeric_limits<double>::infinity()
                              : full_tiles && !split ? kFullTileProduct
                                                     : kSmallProduct;
  if (!(in_place && (full_tiles || few_rows || narrow) && work <= in_place_max) &&
      blas::gemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pool))
    return;
  // Products the BLAS does not take, and those of full tiles (attention's per-head products,
  // batched MatMuls of a few dozen rows) with the fused GEMM, operands read in place:
  // packing both per call cost more than the product.
  if (in_place && work <= in_place_max) {
    const float* b = B;
    int64_t ld = ldb;
    std::vector<float> bt;
    if (transB) {  // op(B) = B^T copied row-major (K x N), 16 x 16 blocks in registers
      bt.resize(static_cast<size_t>(K * N));
      for (int64_t n = 0; n < N; n += 16)
        for (int64_t k = 0; k < K; k += 16)
          nn::cvx::transpose16(B + n * ldb + k, ldb, static_cast<int>(std::min<int64_t>(16, N - n)),
                               static_cast<int>(std::min<int64_t>(16, K - k)),
                               bt.data() + k * N + n, N);
      b = bt.data();
      ld = N;
    }
    nn::fgemm::Epilogue ep;
    ep.alpha = alpha;
    if (beta == 1.f) {
      ep.z = C;
      ep.ldz = ldc;
    }
    nn::fgemm::gemm_plain(A, transA ? 1 : lda, transA ? lda : 1, M, b, ld, N, K, C, ldc, ep, pool);
    return;
  }
  run_gemm<float>({transA, A, lda, nullptr}, {transB, B, ldb, nullptr}, M, N, K, alpha, beta, C,
                  ldc, pool);
}

void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
          int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc,
          ThreadPool* pool) {
  if (blas::gemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pool)) return;
  run_gemm<double>({transA, A, lda, nullptr}, {transB, B, ldb, nullptr}, M, N, K, alpha, beta, C,
                   ldc, pool);
}

const char* gemm_isa_name() {
  return dispatch().f32->name;
}

#define ORTLITE_INSTANTIATE_GEMM(T)                                                               \
  template class PackedGemmMatrix<T>;                                                             \
  template PackedGemmMatrix<T> pack_gemm_a<T>(bool, int64_t, int64_t, const T*, int64_t);         \
  template PackedGemmMatrix<T> pack_gemm_b<T>(bool, int64_t, int64_t, const T*, int64_t);         \
  template void gemm_packed_a<T>(const PackedGemmMatrix<T>&, bool, int64_t, const T*, int64_t, T, \
                                 T, T*, int64_t, ThreadPool*);                                    \
  template void gemm_packed_b<T>(bool, int64_t, const T*, int64_t, const PackedGemmMatrix<T>&, T, \
                                 T, T*, int64_t, ThreadPool*);
ORTLITE_INSTANTIATE_GEMM(float)
ORTLITE_INSTANTIATE_GEMM(double)
#undef ORTLITE_INSTANTIATE_GEMM

}  // namespace ortlite
