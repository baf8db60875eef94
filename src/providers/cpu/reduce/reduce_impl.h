// The reduction engine shared by the Reduce* kernels (src/providers/cpu/reduce).
//
// A reduction is planned as a ReduceLayout: the input dims of size 1 are dropped and runs of
// adjacent kept / reduced dims are merged, so every input is one of
//   * row mode    (innermost merged dim reduced): each output reduces contiguous segments;
//                 parallel over outputs, or over chunks of one output when there are few.
//   * column mode (innermost merged dim kept): blocks of adjacent outputs accumulate
//                 contiguous input rows (vectorizable); parallel over those blocks.
//   * map mode    (nothing of size > 1 reduced): one input element per output.
// An Op describes the arithmetic (see the ops below): accumulator type, identity or
// idempotent seed, step, combine and finalize.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <type_traits>
#include <vector>

#include "providers/cpu/reduce/reduce_simd.h"
#include "providers/cpu/tensor/cast_convert.h"
#include "ortlite/kernel.h"
#include "ortlite/thread_pool.h"
#include "providers/shared/reduce_axes.h"

namespace ortlite {
namespace reduce {

enum class ReduceKind {
  kSum,
  kMean,
  kSumSquare,
  kL1,
  kL2,
  kLogSum,
  kLogSumExp,
  kProd,
  kMax,
  kMin,
};

// Runs reduction `kind` over x into y (already allocated with the output shape), for every
// supported element type; NotImplemented naming `what` for the others. Handles empty inputs.
void run_reduction(ReduceKind kind, const ReduceLayout& layout, const Tensor& x, Tensor& y,
                   ThreadPool* pool, const char* what);

// Per-family entry points (reduce_sum.cc, reduce_other.cc).
void run_sum_family(ReduceKind kind, const ReduceLayout& layout, const Tensor& x, Tensor& y,
                    ThreadPool* pool, const char* what);
void run_other_family(ReduceKind kind, const ReduceLayout& layout, const Tensor& x, Tensor& y,
                      ThreadPool* pool, const char* what);

// ---- arithmetic helpers ---------------------------------------------------------------

using cast_detail::is_floatish_v;
using cast_detail::is_half_v;

// Integer arithmetic wraps (as onnxruntime's does) without signed overflow.
template <typename T>
inline T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <typename T>
inline T wrap_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<uint64_t>(static_cast<U>(a)) *
                                       static_cast<uint64_t>(static_cast<U>(b))));
}
template <typename T>
inline T wrap_abs(T a) {
  if constexpr (std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return a < 0 ? static_cast<T>(static_cast<U>(0u - static_cast<U>(a))) : a;
  } else {
    return a;
  }
}

// Accumulator of the additive reductions: double for floating inputs, T for integers.
template <typename T>
using sum_acc_t = std::conditional_t<is_floatish_v<T>, double, T>;

template <typename Acc, typename T>
inline Acc to_acc(T x) {
  if constexpr (is_floatish_v<T>)
    return static_cast<Acc>(cast_detail::wide(x));
  else
    return static_cast<Acc>(x);
}

template <typename Acc>
inline Acc acc_add(Acc a, Acc b) {
  if constexpr (std::is_floating_point_v<Acc>)
    return a + b;
  else
    return wrap_add(a, b);
}
template <typename Acc>
inline Acc acc_mul(Acc a, Acc b) {
  if constexpr (std::is_floating_point_v<Acc>)
    return a * b;
  else
    return wrap_mul(a, b);
}

// Accumulator -> output element.
template <typename T, typename Acc>
inline T from_acc(Acc a) {
  if constexpr (std::is_same_v<T, Acc>)
    return a;
  else
    return cast_detail::convert<T, double>(static_cast<double>(a));
}

// A double result (log, sqrt, ...) -> output element, without UB for any value.
template <typename T>
inline T from_double(double d) {
  return cast_detail::convert<T, double>(d);
}

// ---- ops ------------------------------------------------------------------------------
// Every op: In, Acc, Out; kIdempotent (seeded by the first element instead of an identity);
// kUsesParam (reads the per-output parameter p: LogSumExp's max); kVec (the vectorized loop
// of reduce_simd.h that computes its steps over a contiguous float / double run, if any);
// identity(), first(x), step(acc, x, p), combine(a, b), finalize(acc, count, p),
// empty_value().

enum class VecKind { kNone, kSum, kSumSquare, kSumAbs, kMax, kMin, kProd, kSumExp };

template <typename T>
struct SumOp {
  using In = T;
  using Acc = sum_acc_t<T>;
  using Out = T;
  static constexpr bool kIdempotent = false;
  static constexpr bool kUsesParam = false;
  static constexpr VecKind kVec = VecKind::kSum;
  static Acc identity() { return Acc(0); }
  static Acc first(T x) { return to_acc<Acc>(x); }
  static Acc step(Acc a, T x, double) { return acc_add(a, to_acc<Acc>(x)); }
  static Acc combine(Acc a, Acc b) { return acc_add(a, b); }
  static Out finalize(Acc a, int64_t, double) { return from_acc<T>(a); }
  static Out empty_value() { return from_double<T>(0.0); }
};

template <typename T>
struct MeanOp : SumOp<T> {
  using Acc = sum_acc_t<T>;
  static T finalize(Acc a, int64_t n, double) {
    if constexpr (std::is_floating_point_v<Acc>) {
      return from_double<T>(a / static_cast<double>(n));
    } else if constexpr (std::is_signed_v<T>) {
      return static_cast<T>(static_cast<int64_t>(a) / n);
    } else {
      return static_cast<T>(static_cast<uint64_t>(a) / static_cast<uint64_t>(n));
    }
  }
};

template <typename T>
struct SumSquareOp : SumOp<T> {
  using Acc = sum_acc_t<T>;
  static constexpr VecKind kVec = VecKind::kSumSquare;
  static Acc step(Acc a, T x, double) {
    const Acc v = to_acc<Acc>(x);
    return acc_add(a, acc_mul(v, v));
  }
};

template <typename T>
struct L1Op : SumOp<T> {
  using Acc = sum_acc_t<T>;
  static constexpr VecKind kVec = VecKind::kSumAbs;
  static Acc step(Acc a, T x, double) {
    const Acc v = to_acc<Acc>(x);
    if constexpr (std::is_floating_point_v<Acc>)
      return a + std::fabs(v);
    else
      return wrap_add(a, wrap_abs(v));
  }
};

template <typename T>
struct L2Op : SumSquareOp<T> {
  using Acc = sum_acc_t<T>;
  static T finalize(Acc a, int64_t, double) {
    return from_double<T>(std::sqrt(static_cast<double>(a)));
  }
};

template <typename T>
struct LogSumOp : SumOp<T> {
  using Acc = sum_acc_t<T>;
  static T finalize(Acc a, int64_t, double) {
    return from_double<T>(std::log(static_cast<double>(a)));
  }
  static T empty_value() {
    if constexpr (is_floatish_v<T>)
      return from_double<T>(-std::numeric_limits<double>::infinity());
    else
      return T(0);
  }
};

// log(sum(exp(x - p))) + p, p = the max of the reduced elements (0 when infinite). For
// integer inputs each exp term and the log are truncated to integers, as onnxruntime
// computes them in the element type.
template <typename T>
struct LogSumExpOp {
  using In = T;
  using Acc = double;
  using Out = T;
  static constexpr bool kIdempotent = false;
  static constexpr bool kUsesParam = true;
  static constexpr VecKind kVec = VecKind::kSumExp;  // float / double only: see accumulate
  static Acc identity() { return 0.0; }
  static Acc first(T x) { return to_acc<double>(x); }
  static Acc step(Acc a, T x, double p) {
    const double e = std::exp(to_acc<double>(x) - p);
    if constexpr (is_floatish_v<T>)
      return a + e;
    else
      return a + std::trunc(e);
  }
  static Acc combine(Acc a, Acc b) { return a + b; }
  static Out finalize(Acc a, int64_t, double p) {
    if constexpr (is_floatish_v<T>) {
      return from_double<T>(std::log(a) + p);
    } else {
      return wrap_add(from_double<T>(std::log(a)), from_double<T>(p));
    }
  }
  static Out empty_value() { return LogSumOp<T>::empty_value(); }
};

template <typename T>
struct ProdOp : SumOp<T> {
  using Acc = sum_acc_t<T>;
  static constexpr VecKind kVec = VecKind::kProd;
  static Acc identity() { return Acc(1); }
  static Acc step(Acc a, T x, double) { return acc_mul(a, to_acc<Acc>(x)); }
  static Acc combine(Acc a, Acc b) { return acc_mul(a, b); }
  static T empty_value() { return from_double<T>(1.0); }
};

// Max / Min: a NaN anywhere among the reduced elements gives NaN (numpy's and the ONNX
// reference's result; onnxruntime's depends on its vectorized path and the data's
// alignment, so no rule reproduces it everywhere).
template <typename T, bool kMax, typename OutT = T>
struct ExtremumOp {
  using In = T;
  using Acc = std::conditional_t<is_half_v<T>, float, T>;
  using Out = OutT;
  static constexpr bool kIdempotent = true;
  static constexpr bool kUsesParam = false;
  static constexpr VecKind kVec = kMax ? VecKind::kMax : VecKind::kMin;
  static Acc identity() { return Acc(); }
  static Acc first(T x) { return static_cast<Acc>(x); }
  // A NaN v wins, and then sticks (nothing compares above it). Written as a max / min
  // instruction and a select: a branch on the comparison, mispredicted on random data,
  // held short rows and columns (Max over the 256 of [16, 64, 256, 3]) to 0.4 of
  // onnxruntime's speed.
  static Acc pick(Acc a, Acc v) {
    const Acc m = kMax ? (v > a ? v : a) : (v < a ? v : a);
    if constexpr (std::is_floating_point_v<Acc>) return v != v ? v : m;
    return m;
  }
  static Acc step(Acc a, T x, double) { return pick(a, static_cast<Acc>(x)); }
  static Acc combine(Acc a, Acc b) { return pick(a, b); }
  static Out finalize(Acc a, int64_t, double) {
    if constexpr (std::is_same_v<Out, double>)
      return static_cast<double>(a);
    else if constexpr (is_half_v<T>)
      return T(a);
    else
      return a;
  }
  static Out empty_value() {
    if constexpr (std::is_floating_point_v<Acc>) {
      const double inf = std::numeric_limits<double>::infinity();
      return static_cast<Out>(cast_detail::convert<T, double>(kMax ? -inf : inf));
    } else {
      return Out();
    }
  }
};

template <typename T>
using MaxOp = ExtremumOp<T, true>;
template <typename T>
using MinOp = ExtremumOp<T, false>;

// ---- engine ---------------------------------------------------------------------------

// Odometer over dims with strides: tracks the offset of a multi-index.
class Odometer {
 public:
  Odometer(const int64_t* dims, const int64_t* strides, size_t n)
      : dims_(dims), strides_(strides), n_(n) {
    if (n_ > kInline) heap_.resize(n_);
    idx_ = n_ > kInline ? heap_.data() : inline_;
    std::fill(idx_, idx_ + n_, int64_t{0});
  }
  Odometer(const Odometer&) = delete;
  Odometer& operator=(const Odometer&) = delete;

  // Positions at linear index `i` (row-major over dims).
  void seek(int64_t i) {
    offset_ = 0;
    for (size_t d = n_; d-- > 0;) {
      idx_[d] = i % dims_[d];
      i /= dims_[d];
      offset_ += idx_[d] * strides_[d];
    }
  }
  void next() {
    for (size_t d = n_; d-- > 0;) {
      offset_ += strides_[d];
      if (++idx_[d] < dims_[d]) return;
      offset_ -= dims_[d] * strides_[d];
      idx_[d] = 0;
    }
  }
  int64_t offset() const { return offset_; }

 private:
  static constexpr size_t kInline = 8;
  const int64_t* dims_;
  const int64_t* strides_;
  size_t n_;
  int64_t inline_[kInline];
  std::vector<int64_t> heap_;
  int64_t* idx_;
  int64_t offset_ = 0;
};

// The vectorized loop kVec over a contiguous float / double run x[0..n), n >= 1.
template <VecKind kVec>
inline double vec_reduce(const double* x, int64_t n) {
  if constexpr (kVec == VecKind::kProd) return simd::prod_f64(x, n);
  if constexpr (kVec == VecKind::kSum) return simd::sum_f64(x, n);
  if constexpr (kVec == VecKind::kSumSquare) return simd::sum_sq_f64(x, n);
  if constexpr (kVec == VecKind::kSumAbs) return simd::sum_abs_f64(x, n);
  if constexpr (kVec == VecKind::kMax) return simd::max_f64(x, n);
  return simd::min_f64(x, n);
}
// The sums and the product in double, max / min in float.
template <VecKind kVec>
inline auto vec_reduce(const float* x, int64_t n) {
  if constexpr (kVec == VecKind::kProd)
    return simd::prod_f32(x, n);
  else if constexpr (kVec == VecKind::kSum)
    return simd::sum_f32(x, n);
  else if constexpr (kVec == VecKind::kSumSquare)
    return simd::sum_sq_f32(x, n);
  else if constexpr (kVec == VecKind::kSumAbs)
    return simd::sum_abs_f32(x, n);
  else if constexpr (kVec == VecKind::kMax)
    return simd::max_f32(x, n);
  else
    return simd::min_f32(x, n);
}

// int32 / int64: the sums (wrapping) and max / min.
template <VecKind kVec, typename T>
inline T vec_reduce_int(const T* x, int64_t n) {
  constexpr bool k32 = std::is_same_v<T, int32_t>;
  if constexpr (kVec == VecKind::kSum) {
    if constexpr (k32)
      return simd::sum_i32(x, n);
    else
      return simd::sum_i64(x, n);
  } else if constexpr (kVec == VecKind::kMax) {
    if constexpr (k32)
      return simd::max_i32(x, n);
    else
      return simd::max_i64(x, n);
  } else {
    if constexpr (k32)
      return simd::min_i32(x, n);
    else
      return simd::min_i64(x, n);
  }
}

// acc combined with x[0..n), with several independent lanes for throughput.
template <class Op>
inline typename Op::Acc accumulate(typename Op::Acc acc, const typename Op::In* x, int64_t n,
                                   double p) {
  using Acc = typename Op::Acc;
  using In = typename Op::In;
  if constexpr (Op::kVec == VecKind::kSumExp) {
    if constexpr (std::is_same_v<In, float>) {
      if (n >= 16) return Op::combine(acc, simd::sum_exp_f32(x, n, p));
    } else if constexpr (std::is_same_v<In, double>) {
      if (n >= 16) return Op::combine(acc, simd::sum_exp_f64(x, n, p));
    }
  } else if constexpr (Op::kVec != VecKind::kNone &&
                       (std::is_same_v<In, float> || std::is_same_v<In, double>)) {
    if (n >= 16) return Op::combine(acc, static_cast<Acc>(vec_reduce<Op::kVec>(x, n)));
  }
  if constexpr ((Op::kVec == VecKind::kSum || Op::kVec == VecKind::kMax ||
                 Op::kVec == VecKind::kMin) &&
                (std::is_same_v<In, int32_t> ||
                 std::is_same_v<In, int64_t>)&&std::is_same_v<Acc, In>) {
    if (n >= 16) return Op::combine(acc, vec_reduce_int<Op::kVec>(x, n));
  }
  int64_t i = 0;
  if (n >= 32) {
    constexpr int L = 4;
    Acc a[L];
    a[0] = acc;
    for (int l = 1; l < L; ++l) a[l] = Op::kIdempotent ? acc : Op::identity();
    for (; i + L <= n; i += L)
      for (int l = 0; l < L; ++l) a[l] = Op::step(a[l], x[i + l], p);
    acc = a[0];
    for (int l = 1; l < L; ++l) acc = Op::combine(acc, a[l]);
  }
  for (; i < n; ++i) acc = Op::step(acc, x[i], p);
  return acc;
}

template <class Op>
class Reducer {
 public:
  using T = typename Op::In;
  using Acc = typename Op::Acc;
  using Out = typename Op::Out;

  Reducer(const ReduceLayout& L, const T* x, Out* y, const double* p, ThreadPool* pool)
      : L_(L), x_(x), y_(y), p_(p), pool_(pool) {}

  void run() {
    if (L_.rdims.empty()) return run_map();
    if (L_.inner_reduced) return run_rows();
    run_columns();
  }

 private:
  double param(int64_t o) const {
    if constexpr (Op::kUsesParam)
      return p_[o];
    else
      return (void)o, 0.0;
  }

  void run_map() {
    parallel_for(pool_, L_.num_out, 4.0, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        const double p = param(o);
        const Acc seed = Op::kIdempotent ? Op::first(x_[o]) : Op::identity();
        y_[o] = Op::finalize(Op::step(seed, x_[o], p), 1, p);
      }
    });
  }

  // Row mode: reduced elements r in [rb, re) of the output at input offset `base`.
  Acc reduce_range(int64_t base, int64_t rb, int64_t re, Acc acc, double p) const {
    const int64_t inner = L_.rdims.back();
    const size_t no = L_.rdims.size() - 1;
    if (no == 0) return accumulate<Op>(acc, x_ + base + rb, re - rb, p);  // one contiguous row
    Odometer od(L_.rdims.data(), L_.rstrides.data(), no);
    od.seek(rb / inner);
    int64_t j = rb % inner;
    while (rb < re) {
      const int64_t len = std::min(inner - j, re - rb);
      acc = accumulate<Op>(acc, x_ + base + od.offset() + j, len, p);
      rb += len;
      j = 0;
      od.next();
    }
    return acc;
  }

  // Long rows are summed as a fixed number of chunks combined in order, so the result does
  // not depend on the thread count; with few outputs the chunks run in parallel.
  static constexpr int64_t kChunk = 16384;

  void run_rows() {
    const int64_t R = L_.red_count;
    const int64_t n_out = L_.num_out;
    const int64_t chunks = R >= 2 * kChunk ? std::min<int64_t>(R / kChunk, 64) : 1;
    const int threads = pool_ ? pool_->num_threads() : 1;
    if (threads > 1 && chunks > 1 && n_out < 2 * threads) {
      Odometer ko(L_.kdims.data(), L_.kstrides.data(), L_.kdims.size());
      ko.seek(0);
      std::vector<Acc> part(static_cast<size_t>(chunks));
      for (int64_t o = 0; o < n_out; ++o, ko.next()) {
        const int64_t base = ko.offset();
        const double p = param(o);
        const Acc seed = Op::kIdempotent ? Op::first(x_[base]) : Op::identity();
        parallel_for(pool_, chunks, static_cast<double>(R / chunks), [&](int64_t b, int64_t e) {
          for (int64_t c = b; c < e; ++c)
            part[c] = reduce_range(base, R * c / chunks, R * (c + 1) / chunks, seed, p);
        });
        Acc acc = part[0];
        for (int64_t c = 1; c < chunks; ++c) acc = Op::combine(acc, part[c]);
        y_[o] = Op::finalize(acc, R, p);
      }
      return;
    }
    if (short_segments_as_columns()) return;
    if (chunks == 1 && L_.kdims.size() == 1 && L_.rdims.size() == 1 && L_.rstrides[0] == 1) {
      // Contiguous rows at a fixed stride: the general loop's odometer and range
      // bookkeeping, kept in memory, cost more than short rows (Max over the last axis of
      // [49, 77, 4, 3]: 0.51 of onnxruntime's speed; rows of 77 0.6).
      const int64_t ks = L_.kstrides[0];
      parallel_for(pool_, n_out, static_cast<double>(R) + 4.0, [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
          const T* px = x_ + o * ks;
          const double p = param(o);
          const Acc seed = Op::kIdempotent ? Op::first(px[0]) : Op::identity();
          y_[o] = Op::finalize(accumulate<Op>(seed, px, R, p), R, p);
        }
      });
      return;
    }
    // R / chunks outside the loop: a 64-bit division an output was a third of the time of
    // rows of 3 (Max over the last axis of [49, 77, 4, 3]).
    const int64_t first_end = R / chunks;
    parallel_for(pool_, n_out, static_cast<double>(R) + 4.0, [&](int64_t b, int64_t e) {
      Odometer ko(L_.kdims.data(), L_.kstrides.data(), L_.kdims.size());
      ko.seek(b);
      for (int64_t o = b; o < e; ++o, ko.next()) {
        const int64_t base = ko.offset();
        const double p = param(o);
        const Acc seed = Op::kIdempotent ? Op::first(x_[base]) : Op::identity();
        Acc acc = reduce_range(base, 0, first_end, seed, p);
        for (int64_t c = 1; c < chunks; ++c)
          acc = Op::combine(acc, reduce_range(base, R * c / chunks, R * (c + 1) / chunks, seed, p));
        y_[o] = Op::finalize(acc, R, p);
      }
    });
  }

  // Row mode whose innermost reduced run is short (S < 16 contiguous values) right below a
  // kept dim of K outputs (stride S), with reduced dims further out: per group of K outputs,
  // the K x S values of each outer reduced position are contiguous, so they are stepped as
  // K * S columns with the column kernels (sums: simd::add_columns in double; Max / Min:
  // simd::extremum_columns), then each output combines its S columns. A call per segment
  // of S values cost more than the segment (ReduceMax of [4, 128, 16, 8] over 1 and 3: 0.44
  // of onnxruntime's speed). Sums change order (the columns' partial sums, then the S of an
  // output in order); Max / Min are exact. False where it does not apply.
  bool short_segments_as_columns() {
    constexpr bool kSums = kColumnTerm != ColumnTermNone && !Op::kUsesParam;
    constexpr bool kExtremum =
        (Op::kVec == VecKind::kMax || Op::kVec == VecKind::kMin) &&
        (std::is_same_v<T, float> || std::is_same_v<T, double>)&&std::is_same_v<Acc, T>;
    if constexpr (kSums || kExtremum) {
      const size_t nr = L_.rdims.size(), nk = L_.kdims.size();
      if (nr < 2 || nk < 1) return false;
      const int64_t S = L_.rdims[nr - 1], K = L_.kdims[nk - 1];
      if (S >= kLanes || L_.rstrides[nr - 1] != 1 || L_.kstrides[nk - 1] != S ||
          K * S > kBlockCols || K * S < kLanes)
        return false;
      const int64_t R = L_.red_count, n_groups = L_.num_out / K;
      const int64_t rows = L_.rdims[nr - 2], stride = L_.rstrides[nr - 2];
      parallel_for(pool_, n_groups, static_cast<double>(R * K), [&](int64_t b, int64_t e) {
        Odometer ko(L_.kdims.data(), L_.kstrides.data(), nk - 1);
        Odometer ro(L_.rdims.data(), L_.rstrides.data(), nr - 2);
        Acc acc[kBlockCols];
        for (int64_t grp = b; grp < e; ++grp) {
          ko.seek(grp);
          const T* xg = x_ + ko.offset();
          for (int64_t j = 0; j < K * S; ++j) acc[j] = kSums ? Acc(0) : Op::first(xg[j]);
          ro.seek(0);
          for (int64_t r = 0; r < R / (rows * S); ++r, ro.next()) {
            if constexpr (kSums) {
              simd::add_columns(kColumnTerm, xg + ro.offset(), stride, rows, acc, K * S);
            } else {
              simd::extremum_columns(Op::kVec == VecKind::kMax, xg + ro.offset(), stride, rows, acc,
                                     K * S);
            }
          }
          for (int64_t k = 0; k < K; ++k) {
            Acc a = acc[k * S];
            for (int64_t j = 1; j < S; ++j) a = Op::combine(a, acc[k * S + j]);
            y_[grp * K + k] = Op::finalize(a, R, 0.0);
          }
        }
      });
      return true;
    } else {
      return false;
    }
  }
  static constexpr int64_t kBlockCols = 512;

  // The sums over float / double step whole rows with the vectorized column adder (the
  // same additions, element by element).
  static constexpr simd::ColTerm ColumnTermNone = static_cast<simd::ColTerm>(-1);
  static constexpr simd::ColTerm kColumnTerm =
      !(std::is_same_v<T, float> || std::is_same_v<T, double>) || !std::is_same_v<Acc, double>
          ? ColumnTermNone
      : Op::kVec == VecKind::kSum       ? simd::ColTerm::kPlain
      : Op::kVec == VecKind::kSumSquare ? simd::ColTerm::kSquare
      : Op::kVec == VecKind::kSumAbs    ? simd::ColTerm::kAbs
                                        : ColumnTermNone;

  // The rows of fewer than kLanes columns, one contiguous run [R][K] (the reduced axis just
  // above a short kept one, as [16, 64, 256, 3] over its 256): stepped as a flat array in
  // groups of lcm(K, kLanes) elements, each lane always the same column, then each column's
  // lanes combined in order. Row by row, every step waited on the column's previous one
  // (Max: 0.4 of onnxruntime's speed at 3 columns).
  static constexpr int64_t kLanes = 16;
  // Whether few_columns takes R rows of K columns: from two lane groups of rows (with one,
  // setting up and folding the lanes cost more than the rows).
  static bool few_columns_fit(int64_t K, int64_t R) {
    return K < kLanes && R >= 2 * std::lcm(K, kLanes) / K;
  }
  static void few_columns(const T* x, int64_t R, int64_t K, Acc* acc) {
    const int64_t P = std::lcm(K, kLanes), rows = P / K;
    Acc lanes[kLanes * (kLanes - 1)];
    for (int64_t j = 0; j < P; j += K)
      for (int64_t k = 0; k < K; ++k) lanes[j + k] = acc[k];
    int64_t r = 0;
    for (; r + rows <= R; r += rows, x += P)
      for (int64_t j = 0; j < P; ++j) lanes[j] = Op::step(lanes[j], x[j], 0.0);
    for (int64_t k = 0; k < K; ++k) {
      Acc a = lanes[k];
      for (int64_t j = k + K; j < P; j += K) a = Op::combine(a, lanes[j]);
      acc[k] = a;
    }
    for (; r < R; ++r, x += K)
      for (int64_t k = 0; k < K; ++k) acc[k] = Op::step(acc[k], x[k], 0.0);
  }

  // Max / Min of float or double: the rows into acc[0..len) through the AVX-512 / AVX2
  // clones of simd::extremum_columns (this file's loops are built for the baseline ISA: 0.66
  // of onnxruntime's speed on [512, 7, 64] over 7). False for the other ops and types.
  // The offsets of the first `runs` positions of ro_outer (the runs of rows above the
  // innermost reduced dim) into offs, from position 0.
  static void run_offsets(Odometer& ro_outer, int64_t runs, std::vector<int64_t>& offs) {
    offs.resize(static_cast<size_t>(runs));
    ro_outer.seek(0);
    for (int64_t& off : offs) {
      off = ro_outer.offset();
      ro_outer.next();
    }
  }

  // Short columns whose rows are contiguous (float) go through simd::extremum_column_chunks,
  // all their runs of rows in one call (their offsets in chunk_offs).
  bool extremum_columns(int64_t base, int64_t R, Acc* acc, int64_t len, Odometer& ro_outer,
                        std::vector<int64_t>& chunk_offs) const {
    if constexpr ((Op::kVec == VecKind::kMax || Op::kVec == VecKind::kMin) &&
                  (std::is_same_v<T, float> || std::is_same_v<T, double>)&&std::is_same_v<Acc, T>) {
      const int64_t rows = L_.rdims.back();
      const int64_t stride = L_.rstrides.back();
      if constexpr (std::is_same_v<T, float>) {
        // From four vectors of values, where len divides 16 (the lanes fold in registers), for
        // several runs of fewer than 16 rows (else a scalar loop), or where the values outnumber
        // the fold's lanes (16 len / gcd(len, 16)) 64 times; a call a run was faster for the rest
        // (14 columns of [64, 64, 14] over 64 rows: the chunks' fold of 112 lanes took 2.4x).
        if (len < kLanes && stride == len && R * len >= 4 * kLanes &&
            (kLanes % len == 0 || (rows < kLanes && R >= 2 * rows) ||
             R * len >= 64 * kLanes * (len / std::gcd(len, kLanes)))) {
          run_offsets(ro_outer, R / rows, chunk_offs);
          if (simd::extremum_column_chunks(Op::kVec == VecKind::kMax, x_ + base, chunk_offs.data(),
                                           R / rows, rows, acc, len))
            return true;
        }
      }
      // Below 16 columns a call a run of rows costs more than it saves, except for float
      // on AVX-512 (a masked vector, the state in a register).
      if (len < kLanes &&
          !(std::is_same_v<T, float> && simd::extremum_columns_any_width() && rows >= 16))
        return false;
      ro_outer.seek(0);
      for (int64_t r = 0; r < R; r += rows, ro_outer.next())
        simd::extremum_columns(Op::kVec == VecKind::kMax, x_ + base + ro_outer.offset(), stride,
                               rows, acc, len);
      return true;
    } else {
      (void)base, (void)R, (void)acc, (void)len, (void)ro_outer, (void)chunk_offs;
      return false;
    }
  }

  void run_columns() {
    constexpr int64_t kBlock = 256;
    const int64_t K = L_.kdims.back();
    const size_t nko = L_.kdims.size() - 1;
    const int64_t n_outer = L_.num_out / K;
    const int64_t blocks = (K + kBlock - 1) / kBlock;
    const int64_t R = L_.red_count;
    if constexpr (!Op::kUsesParam && kColumnTerm == ColumnTermNone) {
      if (K < kLanes && !few_columns_fit(K, R) && L_.kdims.size() == 2 && L_.kstrides[1] == 1 &&
          L_.rdims.size() == 1 && L_.rstrides[0] == K) {
        // Small blocks [R][K] (too few rows for few_columns) at a fixed stride: the loop
        // below spent more on its odometers, divisions and per-item set-up than on the
        // block (Max over the 3 of [128, 128, 3, 4]: 0.27 of onnxruntime's speed).
        const int64_t ks = L_.kstrides[0];
        parallel_for(pool_, n_outer, static_cast<double>(R * K), [&](int64_t b, int64_t e) {
          Acc acc[kLanes];
          for (int64_t o = b; o < e; ++o) {
            const T* xb = x_ + o * ks;
            for (int64_t k = 0; k < K; ++k)
              acc[k] = Op::kIdempotent ? Op::first(xb[k]) : Op::identity();
            for (int64_t r = 0; r < R; ++r, xb += K)
              for (int64_t k = 0; k < K; ++k) acc[k] = Op::step(acc[k], xb[k], 0.0);
            for (int64_t k = 0; k < K; ++k) y_[o * K + k] = Op::finalize(acc[k], R, 0.0);
          }
        });
        return;
      }
    }
    parallel_for(pool_, n_outer * blocks, static_cast<double>(R * std::min(K, kBlock)),
                 [&](int64_t b, int64_t e) {
                   Odometer ko(L_.kdims.data(), L_.kstrides.data(), nko);
                   Odometer ro(L_.rdims.data(), L_.rstrides.data(), L_.rdims.size());
                   Odometer ro_outer(L_.rdims.data(), L_.rstrides.data(), L_.rdims.size() - 1);
                   Acc acc[kBlock];
                   double pv[kBlock];
                   std::vector<int64_t> chunk_offs;
                   for (int64_t item = b; item < e; ++item) {
                     const int64_t outer = item / blocks;
                     const int64_t k0 = (item % blocks) * kBlock;
                     const int64_t len = std::min(kBlock, K - k0);
                     ko.seek(outer);
                     const int64_t base = ko.offset() + k0;
                     const int64_t obase = outer * K + k0;
                     for (int64_t k = 0; k < len; ++k) {
                       pv[k] = param(obase + k);
                       acc[k] = Op::kIdempotent ? Op::first(x_[base + k]) : Op::identity();
                     }
                     if constexpr (Op::kVec == VecKind::kSumExp &&
                                   (std::is_same_v<T, float> || std::is_same_v<T, double>)) {
                       const int64_t rows = L_.rdims.back();
                       const int64_t stride = L_.rstrides.back();
                       ro_outer.seek(0);
                       for (int64_t r = 0; r < R; r += rows, ro_outer.next()) {
                         simd::add_exp_columns(x_ + base + ro_outer.offset(), stride, rows, pv, acc,
                                               len);
                       }
                     } else if constexpr (kColumnTerm != ColumnTermNone) {
                       // Runs of rows along the innermost reduced dim in one call.
                       const int64_t rows = L_.rdims.back();
                       const int64_t stride = L_.rstrides.back();
                       ro_outer.seek(0);
                       if (len < 8 && stride == len && R > rows) {
                         // Short columns whose rows are contiguous, in several runs: the
                         // runs' offsets, then one call over them all.
                         run_offsets(ro_outer, R / rows, chunk_offs);
                         simd::add_column_chunks(kColumnTerm, x_ + base, chunk_offs.data(),
                                                 R / rows, rows, acc, len);
                       } else {
                         for (int64_t r = 0; r < R; r += rows, ro_outer.next()) {
                           simd::add_columns(kColumnTerm, x_ + base + ro_outer.offset(), stride,
                                             rows, acc, len);
                         }
                       }
                     } else if (extremum_columns(base, R, acc, len, ro_outer, chunk_offs)) {
                     } else if (!Op::kUsesParam && len == K && few_columns_fit(K, R) &&
                                L_.rdims.size() == 1 && L_.rstrides[0] == K) {
                       few_columns(x_ + base, R, K, acc);
                     } else {
                       ro.seek(0);
                       for (int64_t r = 0; r < R; ++r, ro.next()) {
                         const T* row = x_ + base + ro.offset();
                         for (int64_t k = 0; k < len; ++k) acc[k] = Op::step(acc[k], row[k], pv[k]);
                       }
                     }
                     if constexpr (std::is_same_v<Op, MeanOp<float>>) {
                       // The divisions 8 or 16 at a time (this file's loops are built for
                       // the baseline ISA: two a vector, a third of [64, 3, 1024]'s time).
                       simd::mean_to_f32(acc, y_ + obase, len, static_cast<double>(R));
                     } else {
                       for (int64_t k = 0; k < len; ++k)
                         y_[obase + k] = Op::finalize(acc[k], R, pv[k]);
                     }
                   }
                 });
  }

  const ReduceLayout& L_;
  const T* x_;
  Out* y_;
  const double* p_;
  ThreadPool* pool_;
};

// Runs Op over typed data; LogSumExp first computes its per-output max.
template <template <typename> class OpT, typename T>
void run_typed(const ReduceLayout& L, const Tensor& x, Tensor& y, ThreadPool* pool) {
  using Op = OpT<T>;
  typename Op::Out* out = y.data<typename Op::Out>();
  const int64_t n_out = L.num_out;
  if (n_out == 0) return;
  if (x.numel() == 0) {
    std::fill(out, out + n_out, Op::empty_value());
    return;
  }
  if constexpr (is_half_v<T>) {
    // Widen to float once (F16C for float16), reduce as float, narrow the results: the
    // same arithmetic as reducing the halves directly, without a conversion per step.
    const int64_t n = x.numel();
    Tensor xf = Tensor::empty(DataType::kFloat, x.shape());
    float* xd = xf.data<float>();
    const T* xs = x.data<T>();
    parallel_for(pool, n, 1.0, [&](int64_t b, int64_t e) {
      if constexpr (std::is_same_v<T, Float16>) {
        cast_detail::half_to_float(xs + b, xd + b, e - b);
      } else {
        for (int64_t i = b; i < e; ++i) xd[i] = static_cast<float>(xs[i]);
      }
    });
    Tensor yf = Tensor::empty(DataType::kFloat, y.shape());
    run_typed<OpT, float>(L, xf, yf, pool);
    const float* yd = yf.data<float>();
    for (int64_t i = 0; i < n_out; ++i) out[i] = T(yd[i]);
    return;
  }
  std::vector<double> p;
  if constexpr (Op::kUsesParam) {
    p.resize(static_cast<size_t>(n_out));
    Reducer<ExtremumOp<T, true, double>>(L, x.data<T>(), p.data(), nullptr, pool).run();
    for (double& v : p)
      if (std::isinf(v)) v = 0.0;
  }
  Reducer<Op>(L, x.data<T>(), out, p.data(), pool).run();
}

}  // namespace reduce
}  // namespace ortlite
