// Einsum (opsets 12-23).
//
// Einsum parses the equation (explicit or implicit output, ellipsis broadcasting, repeated
// labels, size-1 dims broadcast as numpy.einsum does) and evaluates it as a chain of cheap
// steps, the way onnxruntime and numpy's optimized paths do:
//   * per operand: the diagonal of each repeated label (one strided copy), then a sum over
//     the labels no other operand and not the output has (float / double: a row or column
//     of ones through the GEMM, or vectorized row / column loops; integers: the Reduce*
//     engine);
//   * operands contracted pairwise, left to right, each pair as a batched matrix product
//     (batch labels in both operands and needed later, summed labels in both and not
//     needed later, kept labels in one). An operand whose labels already sit as [rows,
//     cols] or [cols, rows] runs, with any batch labels around them, is read in place with
//     the GEMM's leading dimension and transpose flags (attention's 'bqhd,bkhd->bhqk' reads
//     both operands as they are); a kept label that splits a run may instead become a batch
//     label the other operand broadcasts; otherwise the operand is permuted once by
//     Transpose's copy. The last product writes into the output when its rows and columns
//     sit there as runs;
//   * a final permutation into the output order when needed.
// float and double products go through the packed GEMM (BLAS / fused kernels); small
// products and the integer types use a plain loop (integers wrap around, as onnxruntime's
// do). float16 and bfloat16 compute in float; int8 / int16 / uint8 / uint16 / bool in
// int64, converted back at the end (bool: nonzero is true).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "compute/gemm.h"
#include "compute/int_gemm.h"
#include "compute/simd.h"
#include "providers/cpu/math/einsum.h"
#include "providers/cpu/math/math_kernels.h"
#include "providers/cpu/nn/nn_common.h"
#include "providers/cpu/reduce/reduce_impl.h"
#include "providers/cpu/tensor/tensor_kernels.h"

namespace ortlite {
namespace {

using einsum::EinsumProblem;

// The element type an input type computes in.
DataType compute_dtype(DataType dt) {
  switch (dt) {
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return DataType::kFloat;
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kUInt8:
    case DataType::kUInt16:
    case DataType::kBool:
      return DataType::kInt64;
    case DataType::kFloat:
    case DataType::kDouble:
    case DataType::kInt32:
    case DataType::kInt64:
    case DataType::kUInt32:
    case DataType::kUInt64:
      return dt;
    default:
      return DataType::kUndefined;
  }
}

Tensor to_compute(const Tensor& x, DataType cdt) {
  if (x.dtype() == cdt) return x;
  Tensor t = Tensor::empty(cdt, x.shape());
  if (cdt == DataType::kFloat) {
    nn::convert_to_float(x.dtype(), x.raw_data(), t.data<float>(), x.numel());
    return t;
  }
  ORTLITE_DISPATCH_NUMERIC(x.dtype(), "Einsum", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      const T* p = x.data<T>();
      int64_t* q = t.data<int64_t>();
      for (int64_t i = 0; i < x.numel(); ++i) q[i] = static_cast<int64_t>(p[i]);
    }
  });
  return t;
}

void from_compute(const Tensor& t, Tensor& y) {
  if (t.dtype() == DataType::kFloat) {
    nn::convert_from_float(y.dtype(), t.data<float>(), y.raw_data(), y.numel());
    return;
  }
  ORTLITE_DISPATCH_NUMERIC(y.dtype(), "Einsum", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      const int64_t* p = t.data<int64_t>();
      T* q = y.data<T>();
      for (int64_t i = 0; i < y.numel(); ++i) {
        if constexpr (std::is_same_v<T, bool>) {
          q[i] = p[i] != 0;
        } else {
          // Keeps the low bits (the integer types wrap around).
          q[i] = static_cast<T>(static_cast<std::make_unsigned_t<T>>(p[i]));
        }
      }
    }
  });
}

// A dense tensor whose dims carry distinct labels, each of size > 1.
struct Operand {
  Tensor t;
  std::vector<int> labels;
};

std::vector<int64_t> strides_of(const Shape& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t st = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = st;
    st *= shape[i];
  }
  return s;
}

// The labels of `order` that `flag` marks, in that order.
std::vector<int> pick(const std::vector<int>& order, const std::vector<char>& flag) {
  std::vector<int> r;
  for (int lab : order)
    if (flag[static_cast<size_t>(lab)]) r.push_back(lab);
  return r;
}

size_t position(const std::vector<int>& labels, int lab) {
  return static_cast<size_t>(std::find(labels.begin(), labels.end(), lab) - labels.begin());
}

// The op's data with its dims in `order` (a permutation of its labels), densely into dst.
void permute_into(const Operand& op, const std::vector<int>& order, void* dst, ThreadPool* pool) {
  std::vector<int64_t> perm(order.size());
  bool identity = true;
  for (size_t i = 0; i < order.size(); ++i) {
    perm[i] = static_cast<int64_t>(position(op.labels, order[i]));
    identity = identity && perm[i] == static_cast<int64_t>(i);
  }
  if (identity) {
    tensor_ops::parallel_copy(op.t.dtype(), op.t.raw_data(), dst, op.t.numel(), pool);
  } else {
    tensor_ops::transpose_dense(op.t.dtype(), op.t.raw_data(), op.t.shape(), perm, dst, pool);
  }
}

Operand permuted(const Operand& op, const std::vector<int>& order, ThreadPool* pool) {
  Shape shape;
  for (int lab : order) shape.push_back(op.t.dim(position(op.labels, lab)));
  Operand r{Tensor::empty(op.t.dtype(), shape), order};
  permute_into(op, order, r.t.raw_data(), pool);
  return r;
}

// y[r] = sum of x[r * cols + c] over c < cols, for short rows: eight rows at a time, so
// that eight independent sums are in flight.
template <typename T>
void sum_short_rows(const T* x, int64_t rows, int64_t cols, T* y, ThreadPool* pool) {
  parallel_for(pool, (rows + 7) / 8, 8.0 * static_cast<double>(cols), [&](int64_t b, int64_t e) {
    for (int64_t blk = b; blk < e; ++blk) {
      const int64_t r0 = blk * 8;
      if (r0 + 8 <= rows) {
        T acc[8] = {};
        const T* xr = x + r0 * cols;
        for (int64_t c = 0; c < cols; ++c)
          for (int i = 0; i < 8; ++i) acc[i] += xr[i * cols + c];
        for (int i = 0; i < 8; ++i) y[r0 + i] = acc[i];
        continue;
      }
      for (int64_t r = r0; r < rows; ++r) {
        T acc = T(0);
        for (int64_t c = 0; c < cols; ++c) acc += x[r * cols + c];
        y[r] = acc;
      }
    }
  });
}

// y[0..n) += the `rows` rows x + r * stride, compiled per ISA. Four rows are added
// together before y is updated: a chain of stores to and loads from y row after row would
// wait on store forwarding.
template <typename T>
inline void add_rows_body(T* y, const T* x, int64_t n, int64_t rows, int64_t stride) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const T* x0 = x + r * stride;
    const T* x1 = x0 + stride;
    const T* x2 = x1 + stride;
    const T* x3 = x2 + stride;
    for (int64_t i = 0; i < n; ++i) y[i] += (x0[i] + x1[i]) + (x2[i] + x3[i]);
  }
  for (; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) y[i] += x[r * stride + i];
}
ORTLITE_NN_CLONES512 void add_rows(float* y, const float* x, int64_t n, int64_t rows,
                                   int64_t stride) {
  add_rows_body(y, x, n, rows, stride);
}
ORTLITE_NN_CLONES512 void add_rows(double* y, const double* x, int64_t n, int64_t rows,
                                   int64_t stride) {
  add_rows_body(y, x, n, rows, stride);
}

// y[r] = sum of x[r * cols + c] over c < cols (float / double): long rows as op times a
// column of ones (the GEMM's vectorized dot products), short ones eight at a time.
template <typename T>
void sum_rows(const T* x, int64_t rows, int64_t cols, T* y, ThreadPool* pool) {
  if (cols >= 32) {
    const std::vector<T> ones(static_cast<size_t>(cols), T(1));
    gemm(false, false, rows, 1, cols, T(1), x, cols, ones.data(), 1, T(0), y, 1, pool);
    return;
  }
  sum_short_rows<T>(x, rows, cols, y, pool);
}

// Column sums (the innermost dim kept, contiguous; float / double): blocks of adjacent
// outputs accumulate the input rows in the element type, vectorized (the Reduce* engine
// accumulates them in scalar double).
template <typename T>
void sum_columns(const reduce::ReduceLayout& L, const T* x, T* y, ThreadPool* pool) {
  constexpr int64_t kBlock = 1024;
  const int64_t K = L.kdims.back();
  const size_t nko = L.kdims.size() - 1;
  const size_t nro = L.rdims.size() - 1;  // the innermost reduced dim is a call's rows
  const int64_t inner_rows = L.rdims.back(), inner_stride = L.rstrides.back();
  const int64_t n_outer = L.num_out / K;
  const int64_t blocks = (K + kBlock - 1) / kBlock;
  const int64_t R = L.red_count;
  // Short rows that follow each other in memory (K < 64, the inner reduced dim stepping by
  // K) are added as longer ones: `fold` = lcm(K, 16) elements at a time into a buffer whose
  // element m belongs to output m % K, summed into the outputs at the end.
  int64_t fold = 0;
  if (K < 64 && inner_stride == K) {
    fold = K;
    while (fold % 16 != 0) fold += K;
  }
  parallel_for(pool, n_outer * blocks, static_cast<double>(R * std::min(K, kBlock)),
               [&](int64_t b, int64_t e) {
                 reduce::Odometer ko(L.kdims.data(), L.kstrides.data(), nko);
                 reduce::Odometer ro(L.rdims.data(), L.rstrides.data(), nro);
                 std::vector<T> acc(static_cast<size_t>(fold));
                 for (int64_t item = b; item < e; ++item) {
                   const int64_t outer = item / blocks;
                   const int64_t k0 = (item % blocks) * kBlock;
                   const int64_t len = std::min(kBlock, K - k0);
                   ko.seek(outer);
                   const T* base = x + ko.offset() + k0;
                   T* yo = y + outer * K + k0;
                   std::fill(yo, yo + len, T(0));
                   std::fill(acc.begin(), acc.end(), T(0));
                   ro.seek(0);
                   for (int64_t r = 0; r < R / inner_rows; ++r, ro.next()) {
                     const T* rows = base + ro.offset();
                     if (fold == 0) {
                       add_rows(yo, rows, len, inner_rows, inner_stride);
                       continue;
                     }
                     const int64_t n = inner_rows * K, full = n / fold;
                     add_rows(acc.data(), rows, fold, full, fold);
                     if (n > full * fold)
                       add_rows(acc.data(), rows + full * fold, n - full * fold, 1, 0);
                   }
                   for (int64_t m = 0; m < fold; m += K)
                     for (int64_t k = 0; k < K; ++k) yo[k] += acc[static_cast<size_t>(m + k)];
                 }
               });
}

template <typename T>
Operand sum_out(const Operand& op, const std::vector<char>& drop, ThreadPool* pool);

// Sums `op` over the labels `drop` marks into y (dims: the other labels, in op's order).
template <typename T>
void sum_out_into(const Operand& op, const std::vector<char>& drop, Tensor& y, ThreadPool* pool) {
  const size_t rank = op.labels.size();
  std::vector<bool> mask(rank);
  for (size_t i = 0; i < rank; ++i) mask[i] = drop[static_cast<size_t>(op.labels[i])] != 0;
  if constexpr (std::is_floating_point_v<T>) {
    size_t lead = 0;  // dims summed before the first kept one
    while (lead < rank && mask[lead]) ++lead;
    size_t tail = rank;  // the dims summed after the last kept one start here
    while (tail > 0 && mask[tail - 1]) --tail;
    const bool inner_only = std::find(mask.begin(), mask.begin() + tail, true) ==
                            mask.begin() + static_cast<std::ptrdiff_t>(tail);
    if (tail < rank && tail > 0) {
      int64_t cols = 1;
      for (size_t i = tail; i < rank; ++i) cols *= op.t.dim(i);
      if (inner_only) {
        sum_rows<T>(op.t.data<T>(), op.t.numel() / cols, cols, y.data<T>(), pool);
        return;
      }
      // The inner sums first (contiguous rows), then the others over a smaller tensor.
      std::vector<char> inner(drop.size(), 0);
      for (size_t i = tail; i < rank; ++i) inner[static_cast<size_t>(op.labels[i])] = 1;
      const Operand part = sum_out<T>(op, inner, pool);
      sum_out_into<T>(part, drop, y, pool);
      return;
    }
    if (lead > 0 && lead < rank &&
        std::find(mask.begin() + static_cast<std::ptrdiff_t>(lead), mask.end(), true) ==
            mask.end()) {
      // Sums over the outer dims: a row of ones times op as a matrix (the GEMM's
      // vectorized row loop).
      int64_t rows = 1;
      for (size_t i = 0; i < lead; ++i) rows *= op.t.dim(i);
      const int64_t cols = op.t.numel() / rows;
      const std::vector<T> ones(static_cast<size_t>(rows), T(1));
      gemm(false, false, 1, cols, rows, T(1), ones.data(), rows, op.t.data<T>(), cols, T(0),
           y.data<T>(), cols, pool);
      return;
    }
  }
  const reduce::ReduceLayout layout = reduce::make_layout(op.t.shape(), mask);
  if constexpr (std::is_floating_point_v<T>) {
    if (!layout.rdims.empty() && !layout.inner_reduced) {
      sum_columns<T>(layout, op.t.data<T>(), y.data<T>(), pool);
      return;
    }
  }
  reduce::run_reduction(reduce::ReduceKind::kSum, layout, op.t, y, pool, "Einsum");
}

template <typename T>
Operand sum_out(const Operand& op, const std::vector<char>& drop, ThreadPool* pool) {
  Operand r;
  Shape shape;
  for (size_t i = 0; i < op.labels.size(); ++i) {
    if (drop[static_cast<size_t>(op.labels[i])]) continue;
    r.labels.push_back(op.labels[i]);
    shape.push_back(op.t.dim(i));
  }
  r.t = Tensor::empty(op.t.dtype(), shape);
  sum_out_into<T>(op, drop, r.t, pool);
  return r;
}

// How a dense tensor with `labels` (dims > 1) is read as a matrix of `rows` x `cols` (each
// a run of its labels, in that order), with batch labels anywhere around them: element (r,
// c) at r * rs + c * cs. False when rows and cols do not sit as such runs.
struct MatrixView {
  bool trans = false;  // cols are the outer run (rs == 1)
  int64_t ld = 1;      // the stride of the outer run
};

bool find_run(const std::vector<int>& labels, const std::vector<int>& group, size_t* pos) {
  if (group.empty()) return true;
  const size_t p = position(labels, group[0]);
  if (p + group.size() > labels.size()) return false;
  for (size_t i = 0; i < group.size(); ++i)
    if (labels[p + i] != group[i]) return false;
  *pos = p;
  return true;
}

bool view_matrix(const std::vector<int>& labels, const std::vector<int64_t>& strides,
                 int64_t rows_n, int64_t cols_n, const std::vector<int>& rows,
                 const std::vector<int>& cols, bool allow_trans, MatrixView* v) {
  size_t rp = 0, cp = 0;
  if (!find_run(labels, rows, &rp) || !find_run(labels, cols, &cp)) return false;
  if (cols.empty() || cp + cols.size() == labels.size()) {
    v->trans = false;
    v->ld = rows.empty() ? std::max<int64_t>(cols_n, 1) : strides[rp + rows.size() - 1];
    return true;
  }
  if (allow_trans && (rows.empty() || rp + rows.size() == labels.size())) {
    v->trans = true;
    v->ld = cols.empty() ? std::max<int64_t>(rows_n, 1) : strides[cp + cols.size() - 1];
    return true;
  }
  return false;
}

// Integers multiply and add in their unsigned type (wrapping); floats as they are.
template <typename T, bool = std::is_integral_v<T>>
struct Wrap {
  using type = T;
};
template <typename T>
struct Wrap<T, true> {
  using type = std::make_unsigned_t<T>;
};
template <typename T>
using WrapT = typename Wrap<T>::type;

// The inner loops of the integer products, in wrapping unsigned arithmetic, compiled per
// ISA (AVX-512 / AVX2 / baseline, picked at load time).
// c[i * ldc + j] = sum_k a[i * ars + k * acs] * b[k * brs + j * bcs]: a plain loop for the
// integer types and for products too small for the GEMM. `pack` is scratch for op(B).
template <typename T>
inline T dot_loop(const T* a, const T* b, int64_t n) {
  using W = WrapT<T>;
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(
        nn::int_dot(reinterpret_cast<const W*>(a), reinterpret_cast<const W*>(b), n));
  } else {
    T s0 = T(0), s1 = T(0), s2 = T(0), s3 = T(0);
    int64_t k = 0;
    for (; k + 4 <= n; k += 4) {
      s0 += a[k] * b[k];
      s1 += a[k + 1] * b[k + 1];
      s2 += a[k + 2] * b[k + 2];
      s3 += a[k + 3] * b[k + 3];
    }
    for (; k < n; ++k) s0 += a[k] * b[k];
    return (s0 + s1) + (s2 + s3);
  }
}

// c[i * ldc + j] = sum_k a[i * ars + k * acs] * b[k * brs + j * bcs]: a plain loop for the
// integer types and for products too small for the GEMM. `pack` is scratch for op(B).
template <typename T>
void loop_product(int64_t M, int64_t N, int64_t K, const T* a, int64_t ars, int64_t acs, const T* b,
                  int64_t brs, int64_t bcs, T* c, int64_t ldc, std::vector<T>& pack) {
  using W = WrapT<T>;
  if (acs == 1 && brs == 1 && (bcs != 1 || N < 8)) {
    // Both operands run along k: dot products (rows of B too short for the vector loop), a
    // block of B's columns (about 128 KiB) at a time.
    const int64_t nc = std::max<int64_t>(4, (int64_t{128} << 10) / (K * int64_t(sizeof(T))));
    for (int64_t j0 = 0; j0 < N; j0 += nc)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = j0; j < std::min(N, j0 + nc); ++j)
          c[i * ldc + j] = dot_loop<T>(a + i * ars, b + j * bcs, K);
    return;
  }
  if (bcs != 1 && M > 1) {
    // Neither layout streams: copy op(B) once as K rows of N.
    pack.resize(static_cast<size_t>(K * N));
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) pack[static_cast<size_t>(k * N + j)] = b[k * brs + j * bcs];
    b = pack.data();
    brs = N;
    bcs = 1;
  }
  if (bcs == 1) {
    // Rows of C accumulate rows of B, a block of B's rows (about 128 KiB) at a time so that
    // it stays in cache for all rows of C.
    const int64_t kc = std::max<int64_t>(16, (int64_t{128} << 10) / (N * int64_t(sizeof(T))));
    for (int64_t i = 0; i < M; ++i) {
      T* ci = c + i * ldc;
      for (int64_t j = 0; j < N; ++j) ci[j] = T(0);
    }
    for (int64_t k0 = 0; k0 < K; k0 += kc) {
      const int64_t k1 = std::min(K, k0 + kc);
      for (int64_t i = 0; i < M; ++i) {
        T* ci = c + i * ldc;
        for (int64_t k = k0; k < k1; ++k) {
          const W av = static_cast<W>(a[i * ars + k * acs]);
          const T* bk = b + k * brs;
          if constexpr (std::is_integral_v<T>) {
            nn::int_axpy(reinterpret_cast<W*>(ci), av, reinterpret_cast<const W*>(bk), N);
          } else {
            for (int64_t j = 0; j < N; ++j) ci[j] += av * bk[j];
          }
        }
      }
    }
    return;
  }
  for (int64_t j = 0; j < N; ++j) {
    W acc = W(0);
    for (int64_t k = 0; k < K; ++k)
      acc += static_cast<W>(a[k * acs]) * static_cast<W>(b[k * brs + j * bcs]);
    c[j] = static_cast<T>(acc);
  }
}

// A batch of products C[b] = op(A[b]) * op(B[b]), M x N x K each; the batch dims (outermost
// first) with the element strides of A, B and C in each.
struct BatchedProduct {
  int64_t M = 1, N = 1, K = 1;
  bool ta = false, tb = false;
  int64_t lda = 1, ldb = 1, ldc = 1;
  std::vector<int64_t> dims, sa, sb, sc;
};

// Offsets of A, B and C for a linear batch index, stepped in row-major order.
class BatchIter {
 public:
  explicit BatchIter(const BatchedProduct& p) : p_(p), idx_(p.dims.size(), 0) {}
  void seek(int64_t i) {
    a = b = c = 0;
    for (size_t d = p_.dims.size(); d-- > 0;) {
      idx_[d] = i % p_.dims[d];
      i /= p_.dims[d];
      a += idx_[d] * p_.sa[d];
      b += idx_[d] * p_.sb[d];
      c += idx_[d] * p_.sc[d];
    }
  }
  void next() {
    for (size_t d = p_.dims.size(); d-- > 0;) {
      a += p_.sa[d];
      b += p_.sb[d];
      c += p_.sc[d];
      if (++idx_[d] < p_.dims[d]) return;
      a -= p_.dims[d] * p_.sa[d];
      b -= p_.dims[d] * p_.sb[d];
      c -= p_.dims[d] * p_.sc[d];
      idx_[d] = 0;
    }
  }
  int64_t a = 0, b = 0, c = 0;

 private:
  const BatchedProduct& p_;
  std::vector<int64_t> idx_;
};

// float / double products of fewer multiply-adds, and outer products (K == 1), run the
// plain loop; the others the GEMM, whose small products read their operands in place. 1
// thread against onnxruntime, batches of small products: (256, 8x8x8) 0.62 with the loop,
// 1.3 with the GEMM; (128, 12x12x12) 0.5 and 1.2; 'zi,zj->zij' (512, 16) 1.7 and 1.1.
constexpr double kLoopProduct = 256;

template <typename T>
void run_batched(BatchedProduct p, const T* A, const T* B, T* C, ThreadPool* pool) {
  if (p.K == 1 && (p.M == 1 || p.N == 1)) {
    // Scaling rows or columns ('ij,j->ij'): the row or column dim is one more batch dim of
    // elementwise products, so that the loops can run along C's memory.
    if (p.M > 1) {
      p.dims.push_back(p.M);
      p.sa.push_back(p.ta ? 1 : p.lda);
      p.sb.push_back(0);
      p.sc.push_back(p.ldc);
      p.M = 1;
    }
    if (p.N > 1) {
      p.dims.push_back(p.N);
      p.sa.push_back(0);
      p.sb.push_back(p.tb ? p.ldb : 1);
      p.sc.push_back(1);
      p.N = 1;
    }
    // Elementwise products may run their batch dims in any order: C's memory order.
    std::vector<size_t> order(p.dims.size());
    for (size_t d = 0; d < order.size(); ++d) order[d] = d;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t x, size_t y) { return p.sc[x] > p.sc[y]; });
    BatchedProduct q = p;
    for (size_t d = 0; d < order.size(); ++d) {
      q.dims[d] = p.dims[order[d]];
      q.sa[d] = p.sa[order[d]];
      q.sb[d] = p.sb[order[d]];
      q.sc[d] = p.sc[order[d]];
    }
    p = q;
  }
  // Merge batch dims that step evenly in all three tensors.
  for (size_t d = p.dims.size(); d-- > 1;) {
    const int64_t n = p.dims[d];
    if (p.sa[d - 1] == p.sa[d] * n && p.sb[d - 1] == p.sb[d] * n && p.sc[d - 1] == p.sc[d] * n) {
      p.dims[d - 1] *= n;
      p.sa[d - 1] = p.sa[d];
      p.sb[d - 1] = p.sb[d];
      p.sc[d - 1] = p.sc[d];
      p.dims.erase(p.dims.begin() + static_cast<std::ptrdiff_t>(d));
      p.sa.erase(p.sa.begin() + static_cast<std::ptrdiff_t>(d));
      p.sb.erase(p.sb.begin() + static_cast<std::ptrdiff_t>(d));
      p.sc.erase(p.sc.begin() + static_cast<std::ptrdiff_t>(d));
    }
  }
  int64_t batches = 1;
  for (int64_t d : p.dims) batches *= d;
  const int64_t M = p.M, N = p.N, K = p.K;
  const double per = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  const int64_t threads = pool ? pool->num_threads() : 1;
  const int64_t ars = p.ta ? 1 : p.lda, acs = p.ta ? p.lda : 1;
  const int64_t brs = p.tb ? 1 : p.ldb, bcs = p.tb ? p.ldb : 1;

  if (M == 1 && N == 1 && K == 1) {
    // Elementwise products: the innermost batch dim as a strided loop. Each is a sum of one
    // product, started from +0 as every sum here (-0.0 products give +0.0, as in numpy and
    // onnxruntime).
    const int64_t inner = p.dims.empty() ? 1 : p.dims.back();
    const int64_t ia = p.dims.empty() ? 0 : p.sa.back(), ib = p.dims.empty() ? 0 : p.sb.back(),
                  ic = p.dims.empty() ? 0 : p.sc.back();
    BatchedProduct outer = p;
    if (!outer.dims.empty()) {
      outer.dims.pop_back();
      outer.sa.pop_back();
      outer.sb.pop_back();
      outer.sc.pop_back();
    }
    using W = WrapT<T>;
    parallel_for(pool, batches / inner, static_cast<double>(inner), [&](int64_t s, int64_t e) {
      BatchIter it(outer);
      it.seek(s);
      for (int64_t o = s; o < e; ++o, it.next()) {
        const T* a = A + it.a;
        const T* b = B + it.b;
        T* c = C + it.c;
        if (ia == 1 && ib == 1 && ic == 1) {
          for (int64_t j = 0; j < inner; ++j)
            c[j] = static_cast<T>(W(0) + static_cast<W>(a[j]) * static_cast<W>(b[j]));
        } else if (ia == 0 && ib == 1 && ic == 1) {
          const W a0 = static_cast<W>(a[0]);
          for (int64_t j = 0; j < inner; ++j)
            c[j] = static_cast<T>(W(0) + a0 * static_cast<W>(b[j]));
        } else if (ia == 1 && ib == 0 && ic == 1) {
          const W b0 = static_cast<W>(b[0]);
          for (int64_t j = 0; j < inner; ++j)
            c[j] = static_cast<T>(W(0) + static_cast<W>(a[j]) * b0);
        } else {
          for (int64_t j = 0; j < inner; ++j)
            c[j * ic] =
                static_cast<T>(W(0) + static_cast<W>(a[j * ia]) * static_cast<W>(b[j * ib]));
        }
      }
    });
    return;
  }

  bool use_gemm = false;
  if constexpr (std::is_floating_point_v<T>) use_gemm = per >= kLoopProduct && K > 1;
  if (!use_gemm) {
    if (batches == 1) {
      // One product: rows split over the pool.
      parallel_for(pool, M, static_cast<double>(N) * static_cast<double>(K),
                   [&](int64_t s, int64_t e) {
                     std::vector<T> pack;
                     loop_product<T>(e - s, N, K, A + s * ars, ars, acs, B, brs, bcs, C + s * p.ldc,
                                     p.ldc, pack);
                   });
      return;
    }
    parallel_for(pool, batches, per + 16.0, [&](int64_t s, int64_t e) {
      std::vector<T> pack;
      BatchIter it(p);
      it.seek(s);
      for (int64_t n = s; n < e; ++n, it.next())
        loop_product<T>(M, N, K, A + it.a, ars, acs, B + it.b, brs, bcs, C + it.c, p.ldc, pack);
    });
    return;
  }
  if constexpr (std::is_floating_point_v<T>) {
    auto one = [&](const BatchIter& it, ThreadPool* tp) {
      gemm(p.ta, p.tb, M, N, K, T(1), A + it.a, p.lda, B + it.b, p.ldb, T(0), C + it.c, p.ldc, tp);
    };
    // Whole products per thread when they are small or share out evenly (as MatMul does).
    if (batches > 1 && threads > 1 &&
        (2.0 * per < 4e6 || batches % threads == 0 || batches >= 4 * threads)) {
      parallel_for(pool, batches, 2.0 * per, [&](int64_t s, int64_t e) {
        BatchIter it(p);
        it.seek(s);
        for (int64_t n = s; n < e; ++n, it.next()) one(it, nullptr);
      });
    } else {
      BatchIter it(p);
      it.seek(0);
      for (int64_t n = 0; n < batches; ++n, it.next()) one(it, pool);
    }
  }
}

// A row or column group of a product: the labels read as one run, and the labels of the
// same operand left out of the run, which become batch labels the other operand
// broadcasts (stride 0).
struct Group {
  std::vector<int> run, bcast;
};

// The candidate groups of the labels `flag` marks in `op`: all of them as one run in op's
// order and in `out`'s order, and each maximal run op holds them in with the others
// broadcast.
std::vector<Group> candidate_groups(const Operand& op, const std::vector<char>& flag,
                                    const std::vector<int>* out) {
  std::vector<Group> g;
  g.push_back({pick(op.labels, flag), {}});
  if (out) g.push_back({pick(*out, flag), {}});
  std::vector<std::vector<int>> runs;
  bool in_run = false;
  for (int lab : op.labels) {
    const bool f = flag[static_cast<size_t>(lab)] != 0;
    if (f && !in_run) runs.emplace_back();
    if (f) runs.back().push_back(lab);
    in_run = f;
  }
  if (runs.size() > 1) {
    for (size_t r = 0; r < runs.size(); ++r) {
      Group c;
      c.run = runs[r];
      for (size_t q = 0; q < runs.size(); ++q)
        if (q != r) c.bcast.insert(c.bcast.end(), runs[q].begin(), runs[q].end());
      g.push_back(c);
    }
  }
  return g;
}

// What one more product in a batch is worth in copied elements, for choosing between
// copying an operand into matrix layout and broadcasting some of its labels as batch
// labels of more, smaller products (MatMul's broadcast against a copy and one product:
// 'bn,anm->abm' (16,64)x(32,64,48) 52 against 110 us).
constexpr double kProductCost = 1024;

// Contracts X and Y: labels in both and in `keep` are batch labels, those in both and not
// in `keep` are summed, the others are kept (every label of one operand only is in `keep`).
// With `out` (the last product): writes the result into `dst` with its dims in `out`'s
// order and returns nothing; otherwise returns the result.
template <typename T>
Operand contract(const Operand& X, const Operand& Y, const std::vector<char>& keep,
                 const std::vector<int>* out, T* dst, ThreadPool* pool) {
  const size_t nl = keep.size();
  std::vector<char> in_x(nl, 0), in_y(nl, 0);
  for (int lab : X.labels) in_x[static_cast<size_t>(lab)] = 1;
  for (int lab : Y.labels) in_y[static_cast<size_t>(lab)] = 1;
  std::vector<char> is_b(nl, 0), is_k(nl, 0), only_x(nl, 0), only_y(nl, 0);
  std::vector<int64_t> size(nl, 1);
  for (size_t i = 0; i < X.labels.size(); ++i) size[static_cast<size_t>(X.labels[i])] = X.t.dim(i);
  for (size_t i = 0; i < Y.labels.size(); ++i) size[static_cast<size_t>(Y.labels[i])] = Y.t.dim(i);
  for (size_t l = 0; l < nl; ++l) {
    is_b[l] = in_x[l] && in_y[l] && keep[l];
    is_k[l] = in_x[l] && in_y[l] && !keep[l];
    only_x[l] = in_x[l] && !in_y[l];
    only_y[l] = in_y[l] && !in_x[l];
  }
  auto count = [&](const std::vector<int>& g) {
    int64_t n = 1;
    for (int lab : g) n *= size[static_cast<size_t>(lab)];
    return n;
  };
  const std::vector<int64_t> sx = strides_of(X.t.shape()), sy = strides_of(Y.t.shape());
  std::vector<int64_t> so;
  if (out) {
    Shape os;
    for (int lab : *out) os.push_back(size[static_cast<size_t>(lab)]);
    so = strides_of(os);
  }

  const double c_numel = static_cast<double>(count(pick(X.labels, is_b))) *
                         static_cast<double>(count(pick(X.labels, only_x))) *
                         static_cast<double>(count(pick(Y.labels, only_y)));
  // The layout search: which operand is the left one, the order of the summed labels, and
  // the row and column groups; the cost is the elements copied to make the operands and
  // the result fit, plus the products added by broadcasting.
  struct Choice {
    bool swap = false;
    const std::vector<int>* k = nullptr;
    const Group* m = nullptr;
    const Group* n = nullptr;
    bool view_l = false, view_r = false, view_c = false;
    MatrixView vl, vr, vc;
    double cost = -1;
  } best;
  std::vector<std::vector<int>> ks[2];
  std::vector<Group> ms[2], ns[2];
  for (int swap = 0; swap < 2 && best.cost != 0; ++swap) {
    const Operand& L = swap ? Y : X;
    const Operand& R = swap ? X : Y;
    const std::vector<int64_t>& sl = swap ? sy : sx;
    const std::vector<int64_t>& sr = swap ? sx : sy;
    ks[swap] = {pick(L.labels, is_k), pick(R.labels, is_k)};
    ms[swap] = candidate_groups(L, swap ? only_y : only_x, out);
    ns[swap] = candidate_groups(R, swap ? only_x : only_y, out);
    for (const auto& k : ks[swap]) {
      for (const Group& m : ms[swap]) {
        for (const Group& n : ns[swap]) {
          Choice c;
          c.swap = swap != 0;
          c.k = &k;
          c.m = &m;
          c.n = &n;
          const int64_t Mn = count(m.run), Nn = count(n.run), Kn = count(k);
          c.view_l = view_matrix(L.labels, sl, Mn, Kn, m.run, k, true, &c.vl);
          c.view_r = view_matrix(R.labels, sr, Kn, Nn, k, n.run, true, &c.vr);
          c.view_c = !out || view_matrix(*out, so, Mn, Nn, m.run, n.run, false, &c.vc);
          double cost = 0;
          if (!c.view_l) cost += static_cast<double>(L.t.numel());
          if (!c.view_r) cost += static_cast<double>(R.t.numel());
          if (!c.view_c) cost += c_numel;
          const int64_t extra = count(m.bcast) * count(n.bcast);
          if (extra > 1) cost += kProductCost * static_cast<double>(extra);
          c.cost = cost;
          if (best.cost < 0 || c.cost < best.cost) best = c;
          if (best.cost == 0) break;
        }
        if (best.cost == 0) break;
      }
      if (best.cost == 0) break;
    }
  }

  const Operand& L0 = best.swap ? Y : X;
  const Operand& R0 = best.swap ? X : Y;
  // Batch labels: those of both operands and the broadcast ones.
  std::vector<char> is_batch = is_b;
  for (int lab : best.m->bcast) is_batch[static_cast<size_t>(lab)] = 1;
  for (int lab : best.n->bcast) is_batch[static_cast<size_t>(lab)] = 1;
  std::vector<int> batch;
  if (out) {
    batch = pick(*out, is_batch);
  } else {
    batch = pick(L0.labels, is_batch);
    for (int lab : best.n->bcast) batch.push_back(lab);
  }
  const std::vector<int>& mrun = best.m->run;
  const std::vector<int>& nrun = best.n->run;
  const int64_t Mn = count(mrun), Nn = count(nrun), Kn = count(*best.k);
  auto concat = [](std::vector<int> a, const std::vector<int>& b, const std::vector<int>& c) {
    a.insert(a.end(), b.begin(), b.end());
    a.insert(a.end(), c.begin(), c.end());
    return a;
  };
  auto batch_of = [&](const Operand& op) {
    std::vector<int> r;
    for (int lab : batch)
      if (position(op.labels, lab) < op.labels.size()) r.push_back(lab);
    return r;
  };
  // Operands that do not fit are permuted to [their batch labels, rows, cols].
  Operand Lc, Rc;
  const Operand* L = &L0;
  const Operand* R = &R0;
  MatrixView vl = best.vl, vr = best.vr, vc = best.vc;
  if (!best.view_l) {
    Lc = permuted(L0, concat(batch_of(L0), mrun, *best.k), pool);
    L = &Lc;
    vl = MatrixView{false, std::max<int64_t>(Kn, 1)};
  }
  if (!best.view_r) {
    Rc = permuted(R0, concat(batch_of(R0), *best.k, nrun), pool);
    R = &Rc;
    vr = MatrixView{false, std::max<int64_t>(Nn, 1)};
  }
  Operand result;
  std::vector<int> c_labels;
  T* c_data = dst;
  std::vector<int64_t> sc;
  if (out && best.view_c) {
    c_labels = *out;
    sc = so;
  } else {
    c_labels = concat(batch, mrun, nrun);
    Shape cs;
    for (int lab : c_labels) cs.push_back(size[static_cast<size_t>(lab)]);
    result.t = Tensor::empty(X.t.dtype(), cs);
    result.labels = c_labels;
    c_data = result.t.data<T>();
    sc = strides_of(cs);
    vc = MatrixView{false, std::max<int64_t>(Nn, 1)};
  }
  const std::vector<int64_t> sl = strides_of(L->t.shape()), sr = strides_of(R->t.shape());
  auto stride_in = [](const Operand& op, const std::vector<int64_t>& st, int lab) -> int64_t {
    const size_t at = position(op.labels, lab);
    return at < op.labels.size() ? st[at] : 0;  // broadcast
  };
  BatchedProduct p;
  p.M = Mn;
  p.N = Nn;
  p.K = Kn;
  p.ta = vl.trans;
  p.tb = vr.trans;
  p.lda = vl.ld;
  p.ldb = vr.ld;
  p.ldc = vc.ld;
  for (int lab : batch) {
    p.dims.push_back(size[static_cast<size_t>(lab)]);
    p.sa.push_back(stride_in(*L, sl, lab));
    p.sb.push_back(stride_in(*R, sr, lab));
    p.sc.push_back(sc[position(c_labels, lab)]);
  }
  run_batched<T>(p, L->t.data<T>(), R->t.data<T>(), c_data, pool);
  if (out && !best.view_c) {
    permute_into(result, *out, dst, pool);
    return Operand{};
  }
  return result;
}

// Evaluates the equation on inputs already in the compute type T into dst (of type T, the
// output's shape; `out`: its labels of size > 1, in order).
template <typename T>
void evaluate(const EinsumProblem& pb, const std::vector<Tensor>& inputs,
              const std::vector<int>& out, Tensor& dst, ThreadPool* pool) {
  const size_t nl = pb.size.size();
  const size_t n_in = inputs.size();
  // Dims of size 1 are dropped (a label of size 1 everywhere, or broadcast against a larger
  // one), repeated labels become their diagonal.
  std::vector<Operand> ops(n_in);
  for (size_t t = 0; t < n_in; ++t) {
    const Tensor& x = inputs[t];
    const std::vector<int64_t> st = strides_of(x.shape());
    std::vector<int> labels;
    Shape shape;
    std::vector<int64_t> strides;
    for (size_t i = 0; i < x.rank(); ++i) {
      if (x.dim(i) == 1) continue;
      const int lab = pb.in_labels[t][i];
      const size_t at = position(labels, lab);
      if (at < labels.size()) {
        strides[at] += st[i];
        continue;
      }
      labels.push_back(lab);
      shape.push_back(x.dim(i));
      strides.push_back(st[i]);
    }
    ops[t].labels = labels;
    if (strides == strides_of(shape)) {
      ops[t].t = x.reshaped(shape);
    } else {
      ops[t].t = Tensor::empty(x.dtype(), shape);
      tensor_ops::strided_copy_dense(x.dtype(), x.raw_data(), strides, ops[t].t.raw_data(), shape,
                                     pool);
    }
  }
  std::vector<char> in_out(nl, 0);
  for (int lab : out) in_out[static_cast<size_t>(lab)] = 1;
  std::vector<int> uses(nl, 0);
  for (const Operand& op : ops)
    for (int lab : op.labels) ++uses[static_cast<size_t>(lab)];
  // Labels of one operand only and not in the output are summed first.
  auto sum_flags = [&](const Operand& op, bool* any) {
    std::vector<char> drop(nl, 0);
    *any = false;
    for (int lab : op.labels) {
      if (uses[static_cast<size_t>(lab)] == 1 && !in_out[static_cast<size_t>(lab)]) {
        drop[static_cast<size_t>(lab)] = 1;
        *any = true;
      }
    }
    return drop;
  };

  if (n_in == 1) {
    bool any = false;
    const std::vector<char> drop = sum_flags(ops[0], &any);
    if (any) {
      if (pick(ops[0].labels, in_out) == out) {
        // Summed straight into the output.
        Shape shape;
        for (int lab : out) shape.push_back(pb.size[static_cast<size_t>(lab)]);
        Tensor yv = dst.reshaped(shape);
        sum_out_into<T>(ops[0], drop, yv, pool);
        return;
      }
      ops[0] = sum_out<T>(ops[0], drop, pool);
    }
    permute_into(ops[0], out, dst.raw_data(), pool);
    return;
  }
  for (Operand& op : ops) {
    bool any = false;
    const std::vector<char> drop = sum_flags(op, &any);
    if (any) op = sum_out<T>(op, drop, pool);
  }
  Operand cur = std::move(ops[0]);
  for (size_t j = 1; j < n_in; ++j) {
    std::vector<char> keep = in_out;
    for (size_t l = j + 1; l < n_in; ++l)
      for (int lab : ops[l].labels) keep[static_cast<size_t>(lab)] = 1;
    const bool last = j + 1 == n_in;
    Operand next = contract<T>(cur, ops[j], keep, last ? &out : nullptr, dst.data<T>(), pool);
    if (!last) cur = std::move(next);
  }
}

class Einsum final : public Kernel {
 public:
  explicit Einsum(const KernelInfo& info) {
    const std::string eq = info.attr_string("equation", "");
    for (char ch : eq) {
      if (ch != ' ') equation_ += ch;
    }
    if (equation_.empty()) info.fail(StatusCode::kInvalidArgument, "attribute 'equation' is empty");
  }

  void compute(KernelContext& ctx) const override {
    const size_t n_in = ctx.num_inputs();
    const DataType dt = ctx.required_input(0).dtype();
    for (size_t t = 0; t < n_in; ++t) {
      if (ctx.required_input(t).dtype() != dt)
        ctx.fail(StatusCode::kInvalidArgument, "inputs differ in type");
    }
    const DataType cdt = compute_dtype(dt);
    if (cdt == DataType::kUndefined) {
      ctx.fail(StatusCode::kNotImplemented,
               std::string("Einsum: element type ") + dtype_name(dt) + " is not supported");
    }
    const EinsumProblem pb = einsum::parse_equation(equation_, ctx);
    Shape out_shape;
    std::vector<int> out;  // the output labels of size > 1
    for (int lab : pb.out_labels) {
      const int64_t d = pb.size[static_cast<size_t>(lab)];
      out_shape.push_back(d);
      if (d != 1) out.push_back(lab);
    }
    Tensor& y = ctx.allocate_output(0, dt, out_shape);
    if (y.numel() == 0) return;
    bool empty = false;
    for (size_t t = 0; t < n_in; ++t) empty = empty || ctx.required_input(t).numel() == 0;
    if (empty) {
      // A label of size 0 that the output does not have: every sum is empty.
      std::memset(y.raw_data(), 0, y.nbytes());
      return;
    }
    std::vector<Tensor> inputs;
    for (size_t t = 0; t < n_in; ++t) inputs.push_back(to_compute(ctx.required_input(t), cdt));
    Tensor dst = cdt == dt ? y : Tensor::empty(cdt, out_shape);
    ThreadPool* pool = ctx.thread_pool();
    switch (cdt) {
      case DataType::kFloat:
        evaluate<float>(pb, inputs, out, dst, pool);
        break;
      case DataType::kDouble:
        evaluate<double>(pb, inputs, out, dst, pool);
        break;
      case DataType::kInt32:
        evaluate<int32_t>(pb, inputs, out, dst, pool);
        break;
      case DataType::kInt64:
        evaluate<int64_t>(pb, inputs, out, dst, pool);
        break;
      case DataType::kUInt32:
        evaluate<uint32_t>(pb, inputs, out, dst, pool);
        break;
      default:
        evaluate<uint64_t>(pb, inputs, out, dst, pool);
        break;
    }
    if (cdt != dt) from_compute(dst, y);
  }

 private:
  std::string equation_;
};

}  // namespace

void register_einsum_kernels(KernelRegistry& r) {
  r.add("", "Einsum", 12, kNewestOpset, make_factory<Einsum>());
}

}  // namespace ortlite
