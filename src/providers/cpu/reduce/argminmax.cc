// ArgMax / ArgMin (opset 1, 11, 12, 13): int64 indices along `axis`, keepdims,
// select_last_index (opset 12+). The first element seeds the search and a later element
// replaces it only when strictly greater (smaller), or greater-or-equal with
// select_last_index: a NaN seed therefore sticks and later NaNs are skipped, like
// onnxruntime. A reduced axis of size 0 is an InvalidArgument error.
#include <algorithm>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "compute/cpu_avx512.h"
#include "providers/cpu/reduce/reduce_impl.h"
#include "providers/cpu/reduce/reduce_kernels.h"
#include "providers/cpu/reduce/reduce_simd.h"
#include "providers/cpu/tensor/tensor_kernels.h"
#include "compute/simd.h"

namespace ortlite {
namespace reduce {
namespace {

template <bool kMax, bool kLast, typename C>
inline bool better(C v, C best) {
  if constexpr (kMax)
    return kLast ? v >= best : v > best;
  else
    return kLast ? v <= best : v < best;
}

// The row's max (min) by the vectorized reductions, for the element types they cover.
template <typename T, bool kMax>
T row_extremum(const T* p, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    return kMax ? simd::max_f32(p, n) : simd::min_f32(p, n);
  } else if constexpr (std::is_same_v<T, double>) {
    return kMax ? simd::max_f64(p, n) : simd::min_f64(p, n);
  } else if constexpr (std::is_same_v<T, int32_t>) {
    return kMax ? simd::max_i32(p, n) : simd::min_i32(p, n);
  } else {
    return kMax ? simd::max_i64(p, n) : simd::min_i64(p, n);
  }
}

template <typename T>
constexpr bool kVectorArg = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                            std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>;

// The first (kLast: the last) index of p[0, n) equal to m, blocks of 16 compared at once
// (the block loop vectorizes); -1 when none is.
template <typename T, bool kLast>
int64_t find_equal(const T* p, int64_t n, T m) {
  constexpr int64_t kB = 16;
  if constexpr (!kLast) {
    int64_t a = 0;
    for (; a + kB <= n; a += kB) {
      int hit = 0;
      for (int64_t j = 0; j < kB; ++j) hit |= p[a + j] == m;
      if (hit) break;
    }
    for (; a < n; ++a)
      if (p[a] == m) return a;
  } else {
    int64_t a = n;
    for (; a - kB >= 0; a -= kB) {
      int hit = 0;
      for (int64_t j = 0; j < kB; ++j) hit |= p[a - kB + j] == m;
      if (hit) break;
    }
    for (int64_t i = a - 1; i >= 0; --i)
      if (p[i] == m) return i;
  }
  return -1;
}

// One row of the reduced axis (index a) against the running best of `len` positions,
// for the types whose compare vectorizes; in the AVX-512 / AVX2 clones (the baseline has
// no 64-bit blend for the indices).
template <typename T, bool kMax, bool kLast>
ORTLITE_NN_CLONES512 void update_best(const T* __restrict row, T* __restrict best,
                                      int64_t* __restrict idx, int64_t len, int64_t a) {
  for (int64_t k = 0; k < len; ++k) {
    const T v = row[k];
    const bool b = better<kMax, kLast>(v, best[k]);
    best[k] = b ? v : best[k];
    idx[k] = b ? a : idx[k];
  }
}

// The index of one row's max (min): the extremum by a vectorized reduction, then the first
// (last) index holding it, for float, double, int32 and int64. The extremum of a row with a
// NaN is NaN, equal to nothing: such rows take the loop, whose NaN rule (a NaN seed sticks,
// later NaNs are skipped) they need, as do the other types.
template <typename T, bool kMax, bool kLast>
int64_t arg_row(const T* p, int64_t A) {
  using C = std::conditional_t<is_half_v<T>, float, T>;
  if constexpr (kVectorArg<T>) {
    const int64_t at = find_equal<T, kLast>(p, A, row_extremum<T, kMax>(p, A));
    if (at >= 0) return at;
  }
  C best = static_cast<C>(p[0]);
  int64_t bi = 0;
  for (int64_t a = 1; a < A; ++a) {
    const C v = static_cast<C>(p[a]);
    if (better<kMax, kLast>(v, best)) {
      best = v;
      bi = a;
    }
  }
  return bi;
}

#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
// Rows of at most kShortRow floats, `rows` of them A apart, indices to out[0, rows): each
// row in up to eight registers (the last masked, its missing lanes the identity), the
// extremum by a register reduction and its first (last) position from the equal lanes'
// mask. A row with a NaN takes arg_row. Through arg_row's two vectorized calls a row of 16
// took about 30 ns.
constexpr int64_t kShortRow = 128;
// GCC 12's AVX-512 headers start some intrinsics from an undefined vector.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
template <bool kMax, bool kLast>
ORTLITE_AVX512 void arg_short_rows_f32(const float* x, int64_t rows, int64_t A, int64_t* out) {
  const float inf = std::numeric_limits<float>::infinity();
  const __m512 ident = _mm512_set1_ps(kMax ? -inf : inf);
  const int64_t nv = (A + 15) / 16;
  const __mmask16 tail = static_cast<__mmask16>(A % 16 ? (1u << (A % 16)) - 1 : 0xFFFFu);
  for (int64_t r = 0; r < rows; ++r) {
    const float* p = x + r * A;
    __m512 v[8] = {ident, ident, ident, ident, ident, ident, ident, ident};
    __m512 m = ident;
    __mmask16 nan = 0;
#pragma GCC unroll 8
    for (int64_t k = 0; k < 8; ++k) {
      if (k >= nv) break;
      v[k] =
          k + 1 < nv ? _mm512_loadu_ps(p + 16 * k) : _mm512_mask_loadu_ps(ident, tail, p + 16 * k);
      nan |= _mm512_cmp_ps_mask(v[k], v[k], _CMP_UNORD_Q);
      m = kMax ? _mm512_max_ps(m, v[k]) : _mm512_min_ps(m, v[k]);
    }
    if (nan) {
      out[r] = arg_row<float, kMax, kLast>(p, A);
      continue;
    }
    const __m512 e = _mm512_set1_ps(kMax ? _mm512_reduce_max_ps(m) : _mm512_reduce_min_ps(m));
    int64_t at = 0;
    if constexpr (!kLast) {
#pragma GCC unroll 8
      for (int64_t k = 0; k < 8; ++k) {
        if (k >= nv) break;
        const unsigned hit = _mm512_cmp_ps_mask(v[k], e, _CMP_EQ_OQ);
        if (hit) {
          at = 16 * k + __builtin_ctz(hit);
          break;
        }
      }
    } else {
#pragma GCC unroll 8
      for (int64_t k = 7; k >= 0; --k) {
        if (k >= nv) continue;
        // The last vector's padding lanes hold the identity, which the extremum equals
        // when every element does (a row of -inf under ArgMax).
        const unsigned hit =
            _mm512_cmp_ps_mask(v[k], e, _CMP_EQ_OQ) & (k + 1 < nv ? 0xFFFFu : tail);
        if (hit) {
          at = 16 * k + 31 - __builtin_clz(hit);
          break;
        }
      }
    }
    out[r] = at;
  }
}
#pragma GCC diagnostic pop
#endif

// The indices of `rows` rows of A elements, A apart, to out[0, rows).
template <typename T, bool kMax, bool kLast>
void arg_rows(const T* x, int64_t rows, int64_t A, int64_t* out) {
#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
  if constexpr (std::is_same_v<T, float>) {
    if (A <= kShortRow && cpu_has_avx512()) return arg_short_rows_f32<kMax, kLast>(x, rows, A, out);
  }
#endif
  for (int64_t r = 0; r < rows; ++r) out[r] = arg_row<T, kMax, kLast>(x + r * A, A);
}

template <typename T, bool kMax, bool kLast>
void arg_typed(const T* x, int64_t* out, int64_t outer, int64_t A, int64_t inner,
               ThreadPool* pool) {
  using C = std::conditional_t<is_half_v<T>, float, T>;
  if (inner == 1) {
    // Rows cost about an eighth of the loop's time per element where they vectorize.
    const double per_row =
        kVectorArg<T> ? static_cast<double>(A) / 4 : 4.0 * static_cast<double>(A);
    parallel_for(pool, outer, per_row, [&](int64_t b, int64_t e) {
      arg_rows<T, kMax, kLast>(x + b * A, e - b, A, out + b);
    });
    return;
  }
  if constexpr (kVectorArg<T>) {
    if (inner < 16) {
      // Fewer than 16 positions after the axis: each [A x inner] block transposed into rows
      // (a call per reduced element for so few positions cost more than the work: [384, 128,
      // 3] over the 128 ran at half onnxruntime's speed).
      parallel_for(pool, outer, static_cast<double>(A * inner), [&](int64_t b, int64_t e) {
        std::vector<T> rows(static_cast<size_t>(A * inner));
        for (int64_t o = b; o < e; ++o) {
          const T* base = x + o * A * inner;
          for (int64_t a = 0; a < A; ++a)
            for (int64_t k = 0; k < inner; ++k)
              rows[static_cast<size_t>(k * A + a)] = base[a * inner + k];
          arg_rows<T, kMax, kLast>(rows.data(), inner, A, out + o * inner);
        }
      });
      return;
    }
  }
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (inner + kBlock - 1) / kBlock;
  parallel_for(pool, outer * blocks, static_cast<double>(A * std::min(inner, kBlock)),
               [&](int64_t b, int64_t e) {
                 C best[kBlock];
                 int64_t idx[kBlock];
                 for (int64_t item = b; item < e; ++item) {
                   const int64_t o = item / blocks;
                   const int64_t k0 = (item % blocks) * kBlock;
                   const int64_t len = std::min(kBlock, inner - k0);
                   const T* base = x + o * A * inner + k0;
                   for (int64_t k = 0; k < len; ++k) {
                     best[k] = static_cast<C>(base[k]);
                     idx[k] = 0;
                   }
                   for (int64_t a = 1; a < A; ++a) {
                     const T* row = base + a * inner;
                     if constexpr (kVectorArg<T>) {
                       update_best<T, kMax, kLast>(row, best, idx, len, a);
                       continue;
                     }
                     for (int64_t k = 0; k < len; ++k) {
                       const C v = static_cast<C>(row[k]);
                       if (better<kMax, kLast>(v, best[k])) {
                         best[k] = v;
                         idx[k] = a;
                       }
                     }
                   }
                   std::copy(idx, idx + len, out + o * inner + k0);
                 }
               });
}

class ArgKernel : public Kernel {
 public:
  ArgKernel(const KernelInfo& info, bool is_max) : is_max_(is_max) {
    axis_ = info.attr_int("axis", 0);
    keepdims_ = info.attr_int("keepdims", 1) != 0;
    if (info.opset() >= 12) {
      const int64_t s = info.attr_int("select_last_index", 0);
      if (s != 0 && s != 1)
        info.fail(StatusCode::kInvalidGraph,
                  "attribute 'select_last_index' must be 0 or 1, got " + std::to_string(s));
      select_last_ = s != 0;
    }
    if (info.num_inputs() != 1 || !info.has_input(0))
      info.fail(StatusCode::kInvalidGraph,
                "expects 1 input, got " + std::to_string(info.num_inputs()));
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const int64_t rank = static_cast<int64_t>(x.rank());
    if (rank == 0)
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'data' is a scalar; 'axis' " + std::to_string(axis_) + " needs rank >= 1");
    if (axis_ < -rank || axis_ >= rank)
      ctx.fail(StatusCode::kInvalidArgument, "attribute 'axis' " + std::to_string(axis_) +
                                                 " is out of range for input 'data' of rank " +
                                                 std::to_string(rank) + " (shape " +
                                                 shape_to_string(x.shape()) + ")");
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    const int64_t A = x.dim(axis);
    if (A == 0)
      ctx.fail(StatusCode::kInvalidArgument,
               "cannot take the arg" + std::string(is_max_ ? "max" : "min") + " over axis " +
                   std::to_string(axis) + " of size 0 (input shape " + shape_to_string(x.shape()) +
                   ")");
    Shape out_shape;
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < x.rank(); ++d) {
      if (d < axis) outer *= x.dim(d);
      if (d > axis) inner *= x.dim(d);
      if (d != axis)
        out_shape.push_back(x.dim(d));
      else if (keepdims_)
        out_shape.push_back(1);
    }
    Tensor& y = ctx.allocate_output(0, DataType::kInt64, out_shape);
    if (y.numel() == 0) return;
    if (x.dtype() == DataType::kBool || x.dtype() == DataType::kString ||
        !dtype_supported(x.dtype()))
      ctx.fail(StatusCode::kNotImplemented, std::string("input 'data' element type ") +
                                                dtype_name(x.dtype()) + " is not supported");
    ORTLITE_DISPATCH_NUMERIC(x.dtype(), ctx.node().op_type, [&](auto tag) {
      using T = decltype(tag);
      const T* xd = x.data<T>();
      int64_t* out = y.data<int64_t>();
      ThreadPool* pool = ctx.thread_pool();
      if (is_max_) {
        if (select_last_)
          (arg_typed<T, true, true>)(xd, out, outer, A, inner, pool);
        else
          (arg_typed<T, true, false>)(xd, out, outer, A, inner, pool);
      } else {
        if (select_last_)
          (arg_typed<T, false, true>)(xd, out, outer, A, inner, pool);
        else
          (arg_typed<T, false, false>)(xd, out, outer, A, inner, pool);
      }
    });
  }

 private:
  bool is_max_;
  int64_t axis_ = 0;
  bool keepdims_ = true;
  bool select_last_ = false;
};

}  // namespace

void register_arg_ops(KernelRegistry& r) {
  r.add_versions("ArgMax", {1, 11, 12, 13}, [](const KernelInfo& info) -> std::unique_ptr<Kernel> {
    return std::make_unique<ArgKernel>(info, true);
  });
  r.add_versions("ArgMin", {1, 11, 12, 13}, [](const KernelInfo& info) -> std::unique_ptr<Kernel> {
    return std::make_unique<ArgKernel>(info, false);
  });
}

}  // namespace reduce
}  // namespace ortlite
