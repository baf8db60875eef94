// Where(condition: bool, X: T, Y: T) -> T with multidirectional broadcasting of all three.
// Elements are copied by width (1/2/4/8 bytes), so every fixed-size type and strings work.
#include "compute/vectorize.h"  // first: compile options for the loops below

#include <string>
#include <type_traits>

#include "compute/cpu_avx512.h"

#include "providers/cpu/math/math_kernels.h"

namespace ortlite {
namespace {

// c ? x : y without a branch for the fixed-width types (random conditions would make a
// branch mispredict half the time).
template <typename T>
inline T pick(bool c, const T& x, const T& y) {
  if constexpr (std::is_integral_v<T>) {
    const T m = static_cast<T>(T{0} - static_cast<T>(c));
    return static_cast<T>((x & m) | (y & static_cast<T>(~m)));
  } else {
    return c ? x : y;
  }
}

#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
// One span with AVX-512 blends: SC / SX / SY are the inner strides (1: contiguous, 0: one
// broadcast element). Whole vectors only; returns how many elements it wrote (the caller
// finishes the span with pick()).
template <typename T>
ORTLITE_AVX512 inline __m512i broadcast512(T v) {
  if constexpr (sizeof(T) == 1) return _mm512_set1_epi8(static_cast<char>(v));
  if constexpr (sizeof(T) == 2) return _mm512_set1_epi16(static_cast<short>(v));
  if constexpr (sizeof(T) == 4) return _mm512_set1_epi32(static_cast<int>(v));
  if constexpr (sizeof(T) == 8) return _mm512_set1_epi64(static_cast<long long>(v));
}

template <typename T, int SC, int SX, int SY>
ORTLITE_AVX512 int64_t where_span_avx512(const bool* c, const T* x, const T* y, T* o, int64_t n) {
  constexpr int kLanes = 64 / static_cast<int>(sizeof(T));
  const __m512i xb = SX ? _mm512_setzero_si512() : broadcast512(x[0]);
  const __m512i yb = SY ? _mm512_setzero_si512() : broadcast512(y[0]);
  const uint64_t cb = SC ? 0 : (c[0] ? ~uint64_t{0} : 0);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m512i xv = SX ? _mm512_loadu_si512(x + i) : xb;
    const __m512i yv = SY ? _mm512_loadu_si512(y + i) : yb;
    __m512i r;
    if constexpr (sizeof(T) == 1) {
      const __mmask64 k =
          SC ? _mm512_test_epi8_mask(_mm512_loadu_si512(c + i), _mm512_loadu_si512(c + i)) : cb;
      r = _mm512_mask_blend_epi8(k, yv, xv);
    } else if constexpr (sizeof(T) == 2) {
      const __m256i cv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + i));
      const __mmask32 k = SC ? _mm256_test_epi8_mask(cv, cv) : static_cast<__mmask32>(cb);
      r = _mm512_mask_blend_epi16(k, yv, xv);
    } else if constexpr (sizeof(T) == 4) {
      const __m128i cv = _mm_loadu_si128(reinterpret_cast<const __m128i*>(c + i));
      const __mmask16 k = SC ? _mm_test_epi8_mask(cv, cv) : static_cast<__mmask16>(cb);
      r = _mm512_mask_blend_epi32(k, yv, xv);
    } else {
      const __m128i cv = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(c + i));
      const __mmask8 k = SC ? _mm_test_epi8_mask(cv, cv) : static_cast<__mmask8>(cb);
      r = _mm512_mask_blend_epi64(k, yv, xv);
    }
    _mm512_storeu_si512(o + i, r);
  }
  return i;
}

// The instance for strides (sc, sx, sy), each 0 or 1.
template <typename T>
using WhereSpanFn = int64_t (*)(const bool*, const T*, const T*, T*, int64_t);
template <typename T>
WhereSpanFn<T> where_span_fn(int64_t sc, int64_t sx, int64_t sy) {
  static const WhereSpanFn<T> table[8] = {
      where_span_avx512<T, 0, 0, 0>, where_span_avx512<T, 0, 0, 1>, where_span_avx512<T, 0, 1, 0>,
      where_span_avx512<T, 0, 1, 1>, where_span_avx512<T, 1, 0, 0>, where_span_avx512<T, 1, 0, 1>,
      where_span_avx512<T, 1, 1, 0>, where_span_avx512<T, 1, 1, 1>};
  return table[sc * 4 + sx * 2 + sy];
}
#endif

template <typename T>
void where_run(ThreadPool* pool, const ew::BroadcastPlan<3>& p, const bool* c, const T* x,
               const T* y, T* o) {
  if (p.total == 0) return;
  const int64_t sc = p.inner_stride[0], sx = p.inner_stride[1], sy = p.inner_stride[2];
  // The vector spans: fixed-width types, strides 0 or 1 (always, for the inner dim of a
  // broadcast plan), spans of at least one vector.
  [[maybe_unused]] int64_t (*vec)(const bool*, const T*, const T*, T*, int64_t) = nullptr;
#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
  if constexpr (std::is_integral_v<T>) {
    if (cpu_has_avx512() && sc <= 1 && sx <= 1 && sy <= 1 && sc >= 0 && sx >= 0 && sy >= 0)
      vec = where_span_fn<T>(sc, sx, sy);
  }
#endif
  parallel_for(pool, p.total, 1.0, [&](int64_t begin, int64_t end) {
    ew::for_each_span<3>(p, begin, end,
                         [&](int64_t oo, const std::array<int64_t, 3>& io, int64_t len) {
                           const bool* pc = c + io[0];
                           const T* px = x + io[1];
                           const T* py = y + io[2];
                           T* po = o + oo;
                           int64_t i = vec ? vec(pc, px, py, po, len) : 0;
                           if (sc == 1 && sx == 1 && sy == 1) {
                             for (; i < len; ++i) po[i] = pick(pc[i], px[i], py[i]);
                           } else {
                             for (; i < len; ++i) po[i] = pick(pc[i * sc], px[i * sx], py[i * sy]);
                           }
                         });
  });
}

class WhereKernel : public Kernel {
 public:
  explicit WhereKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& c = ctx.required_input(0);
    const Tensor& x = ctx.required_input(1);
    const Tensor& y = ctx.required_input(2);
    if (c.dtype() != DataType::kBool)
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input 'condition' must be bool, got ") + dtype_name(c.dtype()));
    ew::check_same_type(ctx, x, y, "X", "Y");
    const Shape out =
        ew::broadcast_or_fail(ctx, ew::broadcast_or_fail(ctx, c.shape(), x.shape()), y.shape());
    Tensor& o = ctx.allocate_output(0, x.dtype(), out);
    const ew::BroadcastPlan<3> plan =
        ew::make_broadcast_plan<3>(out, {&c.shape(), &x.shape(), &y.shape()});
    ThreadPool* pool = ctx.thread_pool();
    const bool* pc = c.data<bool>();
    if (x.dtype() == DataType::kString) {
      where_run(pool, plan, pc, x.data<std::string>(), y.data<std::string>(),
                o.data<std::string>());
      return;
    }
    switch (dtype_size(x.dtype())) {
      case 1:
        where_run(pool, plan, pc, x.data<uint8_t>(), y.data<uint8_t>(), o.data<uint8_t>());
        break;
      case 2:
        where_run(pool, plan, pc, x.data<uint16_t>(), y.data<uint16_t>(), o.data<uint16_t>());
        break;
      case 4:
        where_run(pool, plan, pc, x.data<uint32_t>(), y.data<uint32_t>(), o.data<uint32_t>());
        break;
      case 8:
        where_run(pool, plan, pc, x.data<uint64_t>(), y.data<uint64_t>(), o.data<uint64_t>());
        break;
      default:
        ctx.fail(StatusCode::kNotImplemented,
                 std::string("Where: element type ") + dtype_name(x.dtype()) + " is not supported");
    }
  }
};

}  // namespace

void register_where_kernels(KernelRegistry& r) {
  r.add_versions("Where", {9, 16}, make_factory<WhereKernel>());
}

}  // namespace ortlite
