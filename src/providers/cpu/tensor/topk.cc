// TopK (opsets 1, 10, 11, 24), added for ONNX node conformance. K is an attribute at
// opset 1 and an input from opset 10; `largest` and `sorted` exist from opset 11. Ties
// keep the lower index first (the spec's and onnxruntime's order), and the result is
// always sorted: with sorted = 0 any order is allowed, so the sorted one is as good.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "compute/cpu_avx512.h"
#include "providers/cpu/tensor/tensor_kernels.h"

namespace ortlite {
namespace {

// Every element as an unsigned rank whose order is the one TopK sorts by with largest = 1:
// NaN (any sign, any payload) ranks above every number (numpy's sort order), -0 equals
// +0, and integers keep their order. Equal ranks are equal keys, kept in index order.
// With largest = 0 the rank is complemented. 32-bit ranks for elements of up to 4 bytes.
template <typename T>
using RankOf = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;

template <typename T>
RankOf<T> rank_of(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    // Branch-free (this runs once per element): flip all bits of negatives, the sign bit
    // of the rest.
    using U = RankOf<T>;
    constexpr U kSign = U{1} << (sizeof(U) * 8 - 1);
    U u;
    std::memcpy(&u, &v, sizeof(u));
    constexpr U kInf = static_cast<U>(sizeof(U) == 8 ? 0x7ff0000000000000ull : 0x7f800000ull);
    const bool nan = (u & ~kSign) > kInf;
    u = u == kSign ? U{0} : u;  // -0 ranks as +0
    const U r = u ^ ((u & kSign) ? ~U{0} : kSign);
    return nan ? ~U{0} : r;
  } else if constexpr (std::is_signed_v<T>) {
    using U = RankOf<T>;
    return static_cast<U>(static_cast<std::make_unsigned_t<T>>(v)) ^ (U{1} << (sizeof(T) * 8 - 1));
  } else {
    return static_cast<RankOf<T>>(v);
  }
}

// Which of the 16 values at x (bit l: x[l]) may enter a top-k list whose last value is t:
// those that compare above t (below t for the smallest), and NaNs (every compare is
// false).
template <bool kLargest, typename V>
inline unsigned block_may_enter(const V* x, V t) {
  unsigned mask = 0;
  for (int l = 0; l < 16; ++l) mask |= (kLargest ? !(x[l] <= t) : !(x[l] >= t)) ? 1u << l : 0u;
  return mask;
}

#if defined(__SSE2__)
template <bool kLargest>
inline __m128 not_beyond(__m128 x, __m128 t) {
  return kLargest ? _mm_cmpnle_ps(x, t) : _mm_cmpnge_ps(x, t);
}

template <>
inline unsigned block_may_enter<true, float>(const float* x, float t) {
  const __m128 tv = _mm_set1_ps(t);
  return static_cast<unsigned>(_mm_movemask_ps(not_beyond<true>(_mm_loadu_ps(x), tv)) |
                               (_mm_movemask_ps(not_beyond<true>(_mm_loadu_ps(x + 4), tv)) << 4) |
                               (_mm_movemask_ps(not_beyond<true>(_mm_loadu_ps(x + 8), tv)) << 8) |
                               (_mm_movemask_ps(not_beyond<true>(_mm_loadu_ps(x + 12), tv)) << 12));
}

template <>
inline unsigned block_may_enter<false, float>(const float* x, float t) {
  const __m128 tv = _mm_set1_ps(t);
  return static_cast<unsigned>(
      _mm_movemask_ps(not_beyond<false>(_mm_loadu_ps(x), tv)) |
      (_mm_movemask_ps(not_beyond<false>(_mm_loadu_ps(x + 4), tv)) << 4) |
      (_mm_movemask_ps(not_beyond<false>(_mm_loadu_ps(x + 8), tv)) << 8) |
      (_mm_movemask_ps(not_beyond<false>(_mm_loadu_ps(x + 12), tv)) << 12));
}
#endif

// The k (>= 1) best of the n elements of a contiguous row in output order (higher rank
// first, then lower index) as their indices into `out`; rank_of(v) ^ flip is an
// element's rank. Small k keep a sorted list that only an element ranked above its last
// one enters: a block of 16 elements none of which compares above (below) that one's
// value is passed over with plain compares (a NaN compares false either way, so it is
// looked at). Larger k select with nth_element and sort the k.
template <bool kLargest, typename V, typename U>
void select_top(const V* row, int64_t n, int64_t k, int64_t* out, std::vector<U>& keep,
                std::vector<std::pair<U, int64_t>>& pairs) {
  const U flip = kLargest ? U{0} : ~U{0};
  if (k <= 16 && n >= 4 * k) {
    keep.resize(static_cast<size_t>(k));
    U* bk = keep.data();
    int64_t filled = 0;
    auto insert = [&](int64_t j, U v) {
      int64_t p = filled < k ? filled++ : k - 1;
      for (; p > 0 && bk[p - 1] < v; --p) {
        bk[p] = bk[p - 1];
        out[p] = out[p - 1];
      }
      bk[p] = v;
      out[p] = j;
    };
    int64_t j = 0;
    for (; j < k; ++j) insert(j, rank_of(row[j]) ^ flip);
    for (; j + 16 <= n; j += 16) {
      for (unsigned m = block_may_enter<kLargest>(row + j, row[out[k - 1]]); m != 0; m &= m - 1) {
        const int64_t at = j + __builtin_ctz(m);
        const U v = rank_of(row[at]) ^ flip;
        if (v > bk[k - 1]) insert(at, v);
      }
    }
    for (; j < n; ++j) {
      const U v = rank_of(row[j]) ^ flip;
      if (v > bk[k - 1]) insert(j, v);
    }
    return;
  }
  auto before = [](const std::pair<U, int64_t>& a, const std::pair<U, int64_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  if (n >= 8 * k) {
    // k well below n: a heap of the k best so far, the worst on top, that a later element
    // enters only when ranked strictly above it (on a tie the earlier index stays ahead);
    // blocks of 16 none of which compares beyond the top's value are passed over, as
    // above. Selecting from all n pairs moved every element: [1, 25200, 85] over 25200
    // with k = 100 ran at 0.41 of onnxruntime's speed (with [1, 80, 8400] and k = 300, n
    // 28 times k, the heap and nth_element took the same time).
    pairs.resize(static_cast<size_t>(k));
    for (int64_t j = 0; j < k; ++j) pairs[static_cast<size_t>(j)] = {rank_of(row[j]) ^ flip, j};
    std::make_heap(pairs.begin(), pairs.end(), before);
    auto offer = [&](int64_t at) {
      const U v = rank_of(row[at]) ^ flip;
      if (v <= pairs.front().first) return;
      std::pop_heap(pairs.begin(), pairs.end(), before);
      pairs.back() = {v, at};
      std::push_heap(pairs.begin(), pairs.end(), before);
    };
    int64_t j = k;
    for (; j + 16 <= n; j += 16) {
      for (unsigned m = block_may_enter<kLargest>(row + j, row[pairs.front().second]); m != 0;
           m &= m - 1)
        offer(j + __builtin_ctz(m));
    }
    for (; j < n; ++j) offer(j);
    std::sort(pairs.begin(), pairs.end(), before);
    for (int64_t i = 0; i < k; ++i) out[i] = pairs[static_cast<size_t>(i)].second;
    return;
  }
  pairs.resize(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) pairs[static_cast<size_t>(j)] = {rank_of(row[j]) ^ flip, j};
  if (k < n) std::nth_element(pairs.begin(), pairs.begin() + (k - 1), pairs.end(), before);
  std::sort(pairs.begin(), pairs.begin() + k, before);
  for (int64_t j = 0; j < k; ++j) out[j] = pairs[static_cast<size_t>(j)].second;
}

#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
#pragma GCC diagnostic push
// GCC 12's AVX-512 headers start some intrinsics from an undefined vector.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// rank_of ^ flip on 16 float lanes: -0 as +0, every bit of negatives flipped, the sign of
// the rest, NaN the top rank.
ORTLITE_AVX512 inline __attribute__((always_inline)) __m512i lane_ranks(__m512i u, __m512i vflip) {
  const __m512i sign = _mm512_set1_epi32(static_cast<int32_t>(0x80000000u));
  u = _mm512_mask_mov_epi32(u, _mm512_cmpeq_epi32_mask(u, sign), _mm512_setzero_si512());
  const __mmask16 nan =
      _mm512_cmpgt_epu32_mask(_mm512_andnot_si512(sign, u), _mm512_set1_epi32(0x7f800000));
  __m512i r = _mm512_xor_si512(u, _mm512_or_si512(_mm512_srai_epi32(u, 31), sign));
  r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(-1));
  return _mm512_xor_si512(r, vflip);
}

// K = 1 along contiguous float rows: each lane keeps the best rank_of (^ flip) it has seen
// and its index (strictly greater replaces, so the lane's first best stays), then the
// row's best rank and the lowest index holding it. `rows` rows of n, n apart; the indices
// to out. Through select_top a row of 32 took about 60 ns.
ORTLITE_AVX512 void top1_rows_f32(const float* x, int64_t rows, int64_t n, uint32_t flip,
                                  int64_t* out) {
  const __m512i vflip = _mm512_set1_epi32(static_cast<int32_t>(flip));
  const __m512i step = _mm512_set1_epi32(16);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int64_t row = 0; row < rows; ++row) {
    const float* p = x + row * n;
    __m512i best = _mm512_setzero_si512(), bidx = _mm512_setzero_si512(), idx = lane;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16, idx = _mm512_add_epi32(idx, step)) {
      const __m512i r = lane_ranks(_mm512_loadu_si512(p + j), vflip);
      const __mmask16 gt = _mm512_cmpgt_epu32_mask(r, best);
      best = _mm512_mask_mov_epi32(best, gt, r);
      bidx = _mm512_mask_mov_epi32(bidx, gt, idx);
    }
    if (j < n) {
      const __mmask16 tail = static_cast<__mmask16>((1u << (n - j)) - 1);
      const __m512i r = lane_ranks(_mm512_maskz_loadu_epi32(tail, p + j), vflip);
      const __mmask16 gt = _mm512_mask_cmpgt_epu32_mask(tail, r, best);
      best = _mm512_mask_mov_epi32(best, gt, r);
      bidx = _mm512_mask_mov_epi32(bidx, gt, idx);
    }
    // A lane that never saw a rank above 0 holds index 0: it matters only when the best
    // rank is 0, and then element 0 has it too.
    const uint32_t m = _mm512_reduce_max_epu32(best);
    const __mmask16 at = _mm512_cmpeq_epi32_mask(best, _mm512_set1_epi32(static_cast<int32_t>(m)));
    out[row] = _mm512_mask_reduce_min_epi32(at, bidx);
  }
}
#pragma GCC diagnostic pop
#endif

// float16 / bfloat16 as float (exact); other types as they are.
template <typename T>
auto widen(T v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return static_cast<float>(v);
  } else {
    return v;
  }
}

// Columns of an inner axis that top_columns32 runs side by side.
constexpr int64_t kColBlock = 64;

typedef int32_t v4i32 __attribute__((vector_size(16)));

// out[c] = rank of row[c] ^ flip, top bit flipped, for c < w; floats 4 at a time.
template <typename T>
void biased_ranks(const T* row, int64_t w, uint32_t flip, int32_t* out) {
  constexpr uint32_t kBias = 0x80000000u;
  int64_t c = 0;
  if constexpr (std::is_same_v<T, float>) {
    const v4i32 sign = v4i32{} + std::numeric_limits<int32_t>::min();
    const v4i32 xor_out = v4i32{} + static_cast<int32_t>(flip ^ kBias);
    for (; c + 4 <= w; c += 4) {
      v4i32 u;
      std::memcpy(&u, row + c, sizeof(u));
      u = u == sign ? v4i32{} : u;  // -0 ranks as +0
      const v4i32 nan = (u & ~sign) > (v4i32{} + 0x7f800000);
      v4i32 r = u ^ ((u >> 31) | sign);
      r = nan ? v4i32{} - 1 : r;
      r ^= xor_out;
      std::memcpy(out + c, &r, sizeof(r));
    }
  }
  for (; c < w; ++c) out[c] = static_cast<int32_t>(rank_of(widen(row[c])) ^ flip ^ kBias);
}

// Top k (1..16, k <= n) of 32-bit ranks along an inner axis for w (<= kColBlock) adjacent
// columns at once: every column keeps its list sorted as (rank, index) pairs, and each
// row's element passes down the list, swapping with every entry it goes before; rows are
// read contiguously and 4 columns go per step in a GCC vector type (one SSE2 register).
// The first k rows seed the lists. Ranks are stored with the top bit flipped so that
// signed compares order them; lanes past w hold the lowest rank and are never read back.
template <typename T>
void top_columns32(const T* s, int64_t n, int64_t inner, int64_t w, int64_t k, uint32_t flip,
                   int32_t (*best)[kColBlock], int32_t (*bi)[kColBlock]) {
  constexpr uint32_t kBias = 0x80000000u;
  const int64_t w4 = (w + 3) & ~int64_t{3};
  for (int64_t c = 0; c < w4; ++c) {
    for (int64_t p = 0; p < k; ++p) {
      const int32_t v = c < w
                            ? static_cast<int32_t>(rank_of(widen(s[p * inner + c])) ^ flip ^ kBias)
                            : std::numeric_limits<int32_t>::min();
      int64_t q = p;
      for (; q > 0 && best[q - 1][c] < v; --q) {
        best[q][c] = best[q - 1][c];
        bi[q][c] = bi[q - 1][c];
      }
      best[q][c] = v;
      bi[q][c] = static_cast<int32_t>(p);
    }
  }
  alignas(16) int32_t cur[kColBlock];
  for (int64_t c = w; c < w4; ++c) cur[c] = std::numeric_limits<int32_t>::min();
  for (int64_t j = k; j < n; ++j) {
    const T* row = s + j * inner;
    biased_ranks(row, w, flip, cur);
    const v4i32 vj = v4i32{} + static_cast<int32_t>(j);
    for (int64_t c = 0; c < w4; c += 4) {
      v4i32 v, vi = vj, last;
      std::memcpy(&v, cur + c, sizeof(v));
      // Most rows enter no list once the lists have filled with good values: an element
      // enters only above the last entry (on a tie the earlier index stays ahead).
      std::memcpy(&last, best[k - 1] + c, sizeof(last));
      const v4i32 enters = v > last;
      if ((enters[0] | enters[1] | enters[2] | enters[3]) == 0) continue;
      for (int64_t p = 0; p < k; ++p) {
        v4i32 o, oi;
        std::memcpy(&o, best[p] + c, sizeof(o));
        std::memcpy(&oi, bi[p] + c, sizeof(oi));
        const v4i32 before = (v > o) | ((v == o) & (vi < oi));
        const v4i32 nb = before ? v : o, nbi = before ? vi : oi;
        v = before ? o : v;
        vi = before ? oi : vi;
        std::memcpy(best[p] + c, &nb, sizeof(nb));
        std::memcpy(bi[p] + c, &nbi, sizeof(nbi));
      }
    }
  }
}

class TopK final : public Kernel {
 public:
  explicit TopK(const KernelInfo& info)
      : axis_(info.attr_int("axis", -1)),
        largest_(info.opset() < 11 || info.attr_int("largest", 1) != 0),
        k_attr_(info.opset() < 10 ? info.attr_int_required("k") : -1),
        k_from_input_(info.opset() >= 10) {
    if (info.opset() >= 11) {
      const int64_t s = info.attr_int("sorted", 1);
      const int64_t l = info.attr_int("largest", 1);
      if ((s != 0 && s != 1) || (l != 0 && l != 1)) {
        info.fail(StatusCode::kInvalidArgument, "attributes 'largest' and 'sorted' must be 0 or 1");
      }
    }
    if (!k_from_input_ && k_attr_ < 0) {
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'k' = " + std::to_string(k_attr_) + " must be >= 0");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const int64_t rank = static_cast<int64_t>(x.rank());
    if (rank == 0) ctx.fail(StatusCode::kInvalidArgument, "input 'X' must have rank >= 1");
    if (axis_ < -rank || axis_ >= rank) {
      ctx.fail(StatusCode::kInvalidArgument, "attribute 'axis' = " + std::to_string(axis_) +
                                                 " is out of range for rank " +
                                                 std::to_string(rank));
    }
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    int64_t k = k_attr_;
    if (k_from_input_) {
      const Tensor& kt = ctx.required_input(1);
      if ((kt.dtype() != DataType::kInt64 && kt.dtype() != DataType::kInt32) || kt.numel() != 1 ||
          kt.rank() > 1) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "input 'K' must be a 1-D int64 tensor holding one value, got " +
                     std::string(dtype_name(kt.dtype())) + " " + shape_to_string(kt.shape()));
      }
      k = tensor_to_int64s(kt)[0];
      if (k < 0) {
        ctx.fail(StatusCode::kInvalidArgument, "input 'K' = " + std::to_string(k) + " is negative");
      }
    }
    const int64_t n = x.dim(axis);
    if (k > n) {
      ctx.fail(StatusCode::kInvalidArgument,
               "K = " + std::to_string(k) + " is larger than the dimension " + std::to_string(n) +
                   " of axis " + std::to_string(axis) + " of input 'X' " +
                   shape_to_string(x.shape()));
    }
    Shape out_shape = x.shape();
    out_shape[axis] = k;
    Tensor& values = ctx.allocate_output(0, x.dtype(), out_shape);
    Tensor* indices =
        ctx.num_outputs() > 1 ? &ctx.allocate_output(1, DataType::kInt64, out_shape) : nullptr;
    if (values.numel() == 0) return;
    if (n == 1) {
      // k = 1 of one element: the input, at index 0.
      tensor_ops::parallel_copy(x.dtype(), x.raw_data(), values.raw_data(), x.numel(),
                                ctx.thread_pool());
      if (indices) {
        int64_t* id = indices->data<int64_t>();
        std::fill(id, id + indices->numel(), int64_t{0});
      }
      return;
    }
    const int64_t outer = tensor_ops::dims_product(x.shape(), 0, axis);
    const int64_t inner = tensor_ops::dims_product(x.shape(), axis + 1, x.rank());
    const bool largest = largest_;
    auto run = [&](auto tag) {
      using T = decltype(tag);
      // Rows are scanned as V: float16 / bfloat16 widened to float (exact), the rest as is.
      using V =
          std::conditional_t<std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>, float, T>;
      using U = RankOf<V>;
      const T* src = x.data<T>();
      T* vdst = values.data<T>();
      int64_t* idst = indices ? indices->data<int64_t>() : nullptr;
      const U flip = largest ? U{0} : ~U{0};
      // Along an inner axis a small k runs top_columns on blocks of columns; otherwise the
      // columns of a block are read a row of the block per step (contiguous) into
      // contiguous rows for select_top.
      const bool direct = inner == 1 && std::is_same_v<T, V>;
#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
      if constexpr (std::is_same_v<T, float>) {
        if (direct && k == 1 && n <= std::numeric_limits<int32_t>::max() && cpu_has_avx512()) {
          parallel_for(ctx.thread_pool(), outer, static_cast<double>(n) / 4,
                       [&](int64_t b, int64_t e) {
                         int64_t* id = idst ? idst + b : nullptr;
                         std::vector<int64_t> own(id ? 0 : static_cast<size_t>(e - b));
                         if (!id) id = own.data();
                         top1_rows_f32(src + b * n, e - b, n, flip, id);
                         for (int64_t o = b; o < e; ++o) vdst[o] = src[o * n + id[o - b]];
                       });
          return;
        }
      }
#endif
      const bool by_columns =
          sizeof(U) == 4 && inner > 1 && k <= 16 && n <= std::numeric_limits<int32_t>::max();
      // Transposed blocks take at least 16 columns (a cache line of floats from each row
      // read): one column at a time over [1, 25200, 85] read each line 85 times.
      const int64_t cols =
          by_columns ? std::min(inner, kColBlock)
                     : std::min(inner, std::max<int64_t>(16, 8192 / std::max<int64_t>(n, 1)));
      const int64_t col_blocks = (inner + cols - 1) / cols;
      const double per_row =
          static_cast<double>(n) * (k <= 16 ? 2.0 : std::log2(static_cast<double>(n)) + 2);
      parallel_for(ctx.thread_pool(), outer * col_blocks, per_row * static_cast<double>(cols),
                   [&](int64_t begin, int64_t end) {
                     std::vector<V> rows(static_cast<size_t>(direct || by_columns ? 0 : n * cols));
                     std::vector<U> keep;
                     std::vector<std::pair<U, int64_t>> pairs;
                     std::vector<int64_t> order(static_cast<size_t>(k));
                     int32_t best[16][kColBlock], bi[16][kColBlock];
                     for (int64_t item = begin; item < end; ++item) {
                       const int64_t o = item / col_blocks, c0 = (item % col_blocks) * cols;
                       const int64_t w = std::min(cols, inner - c0);
                       const T* s = src + o * n * inner + c0;
                       if (by_columns) {
                         if constexpr (sizeof(U) == 4) {
                           top_columns32<T>(s, n, inner, w, k, flip, best, bi);
                         }
                         for (int64_t p = 0; p < k; ++p) {
                           const int32_t* from = bi[p];
                           T* vd = vdst + (o * k + p) * inner + c0;
                           for (int64_t c = 0; c < w; ++c) vd[c] = s[from[c] * inner + c];
                           if (idst) {
                             int64_t* id = idst + (o * k + p) * inner + c0;
                             for (int64_t c = 0; c < w; ++c) id[c] = from[c];
                           }
                         }
                         continue;
                       }
                       if (!direct) {
                         V* r = rows.data();
                         for (int64_t j = 0; j < n; ++j) {
                           for (int64_t c = 0; c < w; ++c)
                             r[c * n + j] = static_cast<V>(s[j * inner + c]);
                         }
                       }
                       for (int64_t c = 0; c < w; ++c) {
                         const V* row =
                             direct ? reinterpret_cast<const V*>(s) : rows.data() + c * n;
                         if (largest) {
                           select_top<true>(row, n, k, order.data(), keep, pairs);
                         } else {
                           select_top<false>(row, n, k, order.data(), keep, pairs);
                         }
                         T* vd = vdst + o * k * inner + c0 + c;
                         int64_t* id = idst ? idst + o * k * inner + c0 + c : nullptr;
                         for (int64_t j = 0; j < k; ++j) {
                           const int64_t from = order[static_cast<size_t>(j)];
                           vd[j * inner] = s[from * inner + c];
                           if (id) id[j * inner] = from;
                         }
                       }
                     }
                   });
    };
    return ORTLITE_DISPATCH_ARITHMETIC(x.dtype(), "input 'X'", run);
  }

 private:
  int64_t axis_;
  bool largest_;
  int64_t k_attr_;
  bool k_from_input_;
};

}  // namespace

void register_topk_kernels(KernelRegistry& r) {
  // Opset 24 only adds element types.
  r.add_versions("TopK", {1, 10, 11, 24}, make_factory<TopK>());
}

}  // namespace ortlite
