// Elementwise building blocks shared by the kernels: type dispatch over sets of element
// types, wrap-around integer arithmetic without undefined behaviour, and a broadcasting
// iteration plan that collapses dimensions so that the inner loops run over contiguous
// (stride 1) or constant (stride 0) operands the compiler can vectorize.
//
//   Shape out = broadcast_shapes(a.shape(), b.shape(), label);
//   BroadcastPlan<2> plan = make_broadcast_plan<2>(out, {&a.shape(), &b.shape()});
//   run_binary(pool, plan, pa, pb, py, cost, [](float x, float y) { return x + y; });
//
// Same-shape operands and scalar operands come out of the plan as a single span with
// inner strides (1,1), (0,1) or (1,0); everything else becomes rows over collapsed dims.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "providers/shared/broadcast_shape.h"
#include "ortlite/dtype.h"
#include "ortlite/kernel.h"
#include "ortlite/thread_pool.h"

namespace ortlite {
namespace ew {

// ---- element types ----------------------------------------------------------------------

template <typename T>
constexpr bool is_half_v = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

// The type arithmetic on T is done in: float for the 16-bit floats, T otherwise.
template <typename T>
struct ComputeType {
  using type = T;
};
template <>
struct ComputeType<Float16> {
  using type = float;
};
template <>
struct ComputeType<BFloat16> {
  using type = float;
};
template <typename T>
using compute_t = typename ComputeType<T>::type;

template <typename T>
constexpr bool is_float_v = std::is_floating_point_v<T> || is_half_v<T>;
template <typename T>
constexpr bool is_int_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Inline, branch-free (vectorizable) conversions with the same results as
// Float16::to_float / Float16::from_float / BFloat16::from_float (round to nearest even,
// NaN stays a quiet NaN with its sign, overflow gives inf).
inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float half_to_float(uint16_t h) {
  constexpr uint32_t kShiftedExp = 0x7c00u << 13;
  uint32_t o = (static_cast<uint32_t>(h) & 0x7fffu) << 13;
  const uint32_t exp = o & kShiftedExp;
  o += (127u - 15u) << 23;
  const uint32_t inf_nan = o + ((128u - 16u) << 23);
  // zero / subnormal: renormalize through a float subtraction
  const uint32_t sub = float_to_bits(bits_to_float(o + (1u << 23)) - bits_to_float(113u << 23));
  o = exp == kShiftedExp ? inf_nan : (exp == 0 ? sub : o);
  return bits_to_float(o | ((static_cast<uint32_t>(h) & 0x8000u) << 16));
}
inline uint16_t float_to_half(float f) {
  constexpr uint32_t kInf = 255u << 23;
  constexpr uint32_t kHalfMax = (127u + 16u) << 23;
  constexpr uint32_t kDenormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t u = float_to_bits(f);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  const uint32_t special = u > kInf ? 0x7e00u : 0x7c00u;
  const uint32_t denorm =
      float_to_bits(bits_to_float(u) + bits_to_float(kDenormMagic)) - kDenormMagic;
  const uint32_t normal = (u + ((15u - 127u) << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
  const uint32_t o = u >= kHalfMax ? special : (u < (113u << 23) ? denorm : normal);
  return static_cast<uint16_t>(o | (sign >> 16));
}
inline uint16_t float_to_bfloat16(float f) {
  const uint32_t x = float_to_bits(f);
  const uint32_t nan = (x >> 16) | 0x40u;
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

template <typename T>
inline compute_t<T> load(T v) {
  if constexpr (std::is_same_v<T, Float16>) {
    return half_to_float(v.bits);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return bits_to_float(static_cast<uint32_t>(v.bits) << 16);
  } else {
    return v;
  }
}
template <typename T, typename C>
inline T store(C v) {
  if constexpr (std::is_same_v<T, Float16>) {
    Float16 h;
    h.bits = float_to_half(static_cast<float>(v));
    return h;
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    BFloat16 h;
    h.bits = float_to_bfloat16(static_cast<float>(v));
    return h;
  } else {
    return static_cast<T>(v);
  }
}

// Unsigned type at least as wide as unsigned int, for wrap-around integer arithmetic
// (uint16 * uint16 would otherwise promote to a signed int and may overflow).
template <typename T>
using wide_unsigned_t =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <typename T>
inline T add(T a, T b) {
  if constexpr (is_int_v<T>) {
    using U = wide_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}
template <typename T>
inline T sub(T a, T b) {
  if constexpr (is_int_v<T>) {
    using U = wide_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
  } else {
    return a - b;
  }
}
template <typename T>
inline T mul(T a, T b) {
  if constexpr (is_int_v<T>) {
    using U = wide_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}
template <typename T>
inline T neg(T a) {
  if constexpr (is_int_v<T>) {
    using U = wide_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(U{0} - static_cast<U>(a)));
  } else {
    return -a;
  }
}
// Integer division truncating toward zero (like C and onnxruntime). x / 0 is defined as 0
// and INT_MIN / -1 wraps to INT_MIN instead of trapping.
template <typename T>
inline T int_div(T a, T b) {
  if (b == 0) return T{0};
  if constexpr (std::is_signed_v<T>) {
    if (b == T{-1}) return neg(a);
  }
  return static_cast<T>(a / b);
}
// C remainder (sign of the dividend); x % 0 is defined as 0.
template <typename T>
inline T int_rem(T a, T b) {
  if (b == 0) return T{0};
  if constexpr (std::is_signed_v<T>) {
    if (b == T{-1}) return T{0};
  }
  return static_cast<T>(a % b);
}

// double -> integer conversion that never invokes undefined behaviour: truncates toward
// zero; NaN and out-of-range values give the type's minimum for signed types (what x86
// conversions, and so onnxruntime, produce) and 0 for unsigned types.
template <typename T>
inline T saturate_cast_int(double v) {
  constexpr double lo = static_cast<double>(std::numeric_limits<T>::min());
  // 2^bits (exclusive upper bound), exactly representable.
  constexpr double hi = static_cast<double>(std::numeric_limits<T>::max() / 2 + 1) * 2.0;
  if (!(v >= lo && v < hi)) {
    return std::is_signed_v<T> ? std::numeric_limits<T>::min() : T{0};
  }
  return static_cast<T>(v);
}

// ---- type dispatch ----------------------------------------------------------------------

enum TypeSet : unsigned {
  kTFloat32 = 1u << 0,   // float
  kTFloat64 = 1u << 1,   // double
  kTFloat16 = 1u << 2,   // float16
  kTBFloat16 = 1u << 3,  // bfloat16
  kTInt8 = 1u << 4,
  kTInt16 = 1u << 5,
  kTInt32 = 1u << 6,
  kTInt64 = 1u << 7,
  kTUInt8 = 1u << 8,
  kTUInt16 = 1u << 9,
  kTUInt32 = 1u << 10,
  kTUInt64 = 1u << 11,
  kTBool = 1u << 12,
  kTString = 1u << 13,

  kTFloats = kTFloat32 | kTFloat64 | kTFloat16 | kTBFloat16,
  kTSigned = kTInt8 | kTInt16 | kTInt32 | kTInt64,
  kTUnsigned = kTUInt8 | kTUInt16 | kTUInt32 | kTUInt64,
  kTInts = kTSigned | kTUnsigned,
  kTNumeric = kTFloats | kTInts,
  kTSignedNumeric = kTFloats | kTSigned,
  kTAll = kTNumeric | kTBool | kTString,
};

// Calls fn(T{}) for the C++ type T of `t` when t is in `Set`; otherwise fails with
// NotImplemented naming the node (via ctx or info) and the element type.
template <unsigned Set, typename Ctx, typename Fn>
void dispatch(DataType t, const Ctx& ctx, const char* what, Fn&& fn) {
#define ORTLITE_EW_CASE(E, BIT, T)      \
  case DataType::E:                     \
    if constexpr ((Set & (BIT)) != 0) { \
      fn(T{});                          \
      return;                           \
    }                                   \
    break;
  switch (t) {
    ORTLITE_EW_CASE(kFloat, kTFloat32, float)
    ORTLITE_EW_CASE(kDouble, kTFloat64, double)
    ORTLITE_EW_CASE(kFloat16, kTFloat16, Float16)
    ORTLITE_EW_CASE(kBFloat16, kTBFloat16, BFloat16)
    ORTLITE_EW_CASE(kInt8, kTInt8, int8_t)
    ORTLITE_EW_CASE(kInt16, kTInt16, int16_t)
    ORTLITE_EW_CASE(kInt32, kTInt32, int32_t)
    ORTLITE_EW_CASE(kInt64, kTInt64, int64_t)
    ORTLITE_EW_CASE(kUInt8, kTUInt8, uint8_t)
    ORTLITE_EW_CASE(kUInt16, kTUInt16, uint16_t)
    ORTLITE_EW_CASE(kUInt32, kTUInt32, uint32_t)
    ORTLITE_EW_CASE(kUInt64, kTUInt64, uint64_t)
    ORTLITE_EW_CASE(kBool, kTBool, bool)
    ORTLITE_EW_CASE(kString, kTString, std::string)
    default:
      break;
  }
#undef ORTLITE_EW_CASE
  ctx.fail(StatusCode::kNotImplemented,
           std::string(what) + ": element type " + dtype_name(t) + " is not supported");
}

// ---- broadcasting plan ------------------------------------------------------------------

// Iteration over an output of `total` elements, seen as rows of `inner` elements over the
// collapsed outer dims `dims` (outermost first). Input k advances by inner_stride[k]
// (0 or 1) along a row and by strides[d][k] along outer dim d.
template <int N>
struct BroadcastPlan {
  int64_t total = 0;
  int64_t inner = 1;
  std::array<int64_t, N> inner_stride{};
  std::vector<int64_t> dims;
  std::vector<std::array<int64_t, N>> strides;
};

// Every input shape must broadcast to `out` (broadcast_shapes checked that).
template <int N>
BroadcastPlan<N> make_broadcast_plan(const Shape& out, const std::array<const Shape*, N>& ins) {
  BroadcastPlan<N> p;
  p.total = shape_size(out);
  if (p.total == 0) return p;
  // Common cases without building stride tables: every input has the output's shape or is
  // a single element no wider in rank (one span, strides 1 or 0).
  bool simple = true;
  for (int k = 0; k < N && simple; ++k) {
    const Shape& s = *ins[k];
    if (s == out || shape_size(s) == p.total) {
      // Broadcasting only repeats size-1 dims: an input with as many elements as the
      // output (e.g. [100] into [1, 100]) has the output's element order.
      p.inner_stride[k] = 1;
    } else if (s.size() <= out.size() && shape_size(s) == 1) {
      p.inner_stride[k] = 0;
    } else {
      simple = false;
    }
  }
  if (simple) {
    p.inner = p.total;
    return p;
  }
  p.inner_stride.fill(0);
  std::array<std::vector<int64_t>, N> st;
  for (int k = 0; k < N; ++k) st[k] = broadcast_strides(*ins[k], out);
  // Collapse from the innermost dim outwards; dims of size 1 contribute nothing.
  std::vector<int64_t> dims;  // innermost first
  std::vector<std::array<int64_t, N>> strides;
  for (size_t i = out.size(); i-- > 0;) {
    const int64_t n = out[i];
    if (n == 1) continue;
    std::array<int64_t, N> s;
    for (int k = 0; k < N; ++k) s[k] = st[k][i];
    if (!dims.empty()) {
      bool merge = true;
      for (int k = 0; k < N; ++k) {
        if (s[k] != strides.back()[k] * dims.back()) merge = false;
      }
      if (merge) {
        dims.back() *= n;
        continue;
      }
    }
    dims.push_back(n);
    strides.push_back(s);
  }
  if (dims.empty()) {  // a single element
    p.inner = 1;
    p.inner_stride.fill(0);
    return p;
  }
  p.inner = dims.front();
  p.inner_stride = strides.front();
  for (size_t d = dims.size(); d-- > 1;) {
    p.dims.push_back(dims[d]);
    p.strides.push_back(strides[d]);
  }
  return p;
}

// Calls fn(out_offset, in_offsets, len) for the contiguous row pieces covering output
// elements [begin, end). Input k's elements of the piece are at in_offsets[k] + j *
// plan.inner_stride[k], j < len.
template <int N, typename Fn>
void for_each_span(const BroadcastPlan<N>& p, int64_t begin, int64_t end, Fn&& fn) {
  if (begin >= end) return;
  const size_t nd = p.dims.size();
  int64_t row = begin / p.inner;
  int64_t col = begin % p.inner;
  std::vector<int64_t> idx(nd, 0);
  std::array<int64_t, N> base{};
  for (size_t d = nd; d-- > 0;) {
    idx[d] = row % p.dims[d];
    row /= p.dims[d];
    for (int k = 0; k < N; ++k) base[k] += idx[d] * p.strides[d][k];
  }
  int64_t pos = begin;
  for (;;) {
    const int64_t len = std::min(p.inner - col, end - pos);
    std::array<int64_t, N> off;
    for (int k = 0; k < N; ++k) off[k] = base[k] + col * p.inner_stride[k];
    fn(pos, off, len);
    pos += len;
    if (pos >= end) break;
    col = 0;
    for (size_t d = nd; d-- > 0;) {
      for (int k = 0; k < N; ++k) base[k] += p.strides[d][k];
      if (++idx[d] < p.dims[d]) break;
      for (int k = 0; k < N; ++k) base[k] -= p.strides[d][k] * p.dims[d];
      idx[d] = 0;
    }
  }
}

// ---- runners ----------------------------------------------------------------------------

// The float loops over contiguous spans are compiled for AVX-512, AVX2 and the baseline and
// picked at load time (GNU ifunc). The baseline's 16-byte SSE2 loads and stores held
// memory-bound ops on large tensors to one 16-byte store a cycle (Neg on 1x256x80x80: 233
// against onnxruntime's 169 us).
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && defined(__linux__)
#define ORTLITE_EW_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ORTLITE_EW_CLONES
#endif

// The loops of one row piece of a binary op: o[i] = op(a[i], b[i]), with a or b constant
// where its stride is 0. Always inlined: into binary_span_f32's clones, it is compiled for
// each of their targets.
template <typename TA, typename TB, typename TO, typename Op>
__attribute__((always_inline)) inline void binary_loops(const TA* a, const TB* b, TO* o, int64_t sa,
                                                        int64_t sb, int64_t n, const Op& op) {
  if (sa != 0 && sb != 0) {
    for (int64_t i = 0; i < n; ++i) o[i] = op(a[i], b[i]);
  } else if (sb != 0) {
    const TA x = a[0];
    for (int64_t i = 0; i < n; ++i) o[i] = op(x, b[i]);
  } else if (sa != 0) {
    const TB y = b[0];
    for (int64_t i = 0; i < n; ++i) o[i] = op(a[i], y);
  } else {
    const TO v = op(a[0], b[0]);
    for (int64_t i = 0; i < n; ++i) o[i] = v;
  }
}

template <typename Op>
ORTLITE_EW_CLONES void binary_span_f32(const float* a, const float* b, float* o, int64_t sa,
                                       int64_t sb, int64_t n, const Op op) {
  binary_loops(a, b, o, sa, sb, n, op);
}

template <typename Op>
ORTLITE_EW_CLONES void unary_span_f32(const float* __restrict x, float* __restrict y, int64_t n,
                                      const Op op) {
  for (int64_t i = 0; i < n; ++i) y[i] = op(x[i]);
}

// Comparisons (a bool result) of the other non-16-bit types, in the same clones: the
// baseline has no 64-bit vector compare, which kept int64 comparisons scalar (0.6 of
// onnxruntime's speed on a broadcast per channel).
template <typename T, typename Op>
ORTLITE_EW_CLONES void compare_span(const T* a, const T* b, bool* __restrict o, int64_t sa,
                                    int64_t sb, int64_t n, const Op op) {
  binary_loops(a, b, o, sa, sb, n, op);
}

// Same-type arithmetic of int32 and int64 in the same clones: the baseline has no 64-bit
// vector multiply, max / min or compare, which kept int64 Mul and Max scalar (0.8 and 0.7 of
// onnxruntime's speed on a broadcast per column). Integer results do not depend on the
// instruction set.
template <typename T, typename Op>
ORTLITE_EW_CLONES void int_arith_span(const T* a, const T* b, T* o, int64_t sa, int64_t sb,
                                      int64_t n, const Op op) {
  binary_loops(a, b, o, sa, sb, n, op);
}

// One row piece of a binary op on storage types: op(TA, TB) -> TO.
template <typename TA, typename TB, typename TO, typename Op>
inline void binary_span(const TA* a, const TB* b, TO* o, int64_t sa, int64_t sb, int64_t n,
                        const Op& op_ref) {
  if constexpr (std::is_same_v<TA, float> && std::is_same_v<TB, float> &&
                std::is_same_v<TO, float>) {
    binary_span_f32(a, b, o, sa, sb, n, op_ref);
    return;
  } else if constexpr (std::is_same_v<TO, bool> && std::is_same_v<TA, TB> &&
                       std::is_arithmetic_v<TA> && !std::is_same_v<TA, bool>) {
    compare_span(a, b, o, sa, sb, n, op_ref);
    return;
  } else if constexpr (std::is_same_v<TA, TB> && std::is_same_v<TA, TO> &&
                       (std::is_same_v<TA, int32_t> || std::is_same_v<TA, int64_t>)) {
    int_arith_span(a, b, o, sa, sb, n, op_ref);
    return;
  }
  // A local copy: the compiler can then keep the op's parameters in registers instead of
  // reloading them after every store to o (which might alias them).
  const Op op = op_ref;
  binary_loops(a, b, o, sa, sb, n, op);
}

// Binary op over a plan. `op` works on compute types (float for the 16-bit floats) and
// returns a value converted to TO. `cost`: rough operations per element.
template <typename TA, typename TB, typename TO, typename Op>
void run_binary(ThreadPool* pool, const BroadcastPlan<2>& p, const TA* a, const TB* b, TO* o,
                double cost, const Op& op) {
  if (p.total == 0) return;
  auto elem = [op](const TA& x, const TB& y) -> TO {
    if constexpr (is_half_v<TA> || is_half_v<TB> || is_half_v<TO>) {
      return store<TO>(op(load(x), load(y)));
    } else {
      return static_cast<TO>(op(x, y));
    }
  };
  parallel_for(pool, p.total, cost, [&](int64_t begin, int64_t end) {
    for_each_span<2>(p, begin, end, [&](int64_t oo, const std::array<int64_t, 2>& io, int64_t len) {
      binary_span(a + io[0], b + io[1], o + oo, p.inner_stride[0], p.inner_stride[1], len, elem);
    });
  });
}

// Unary op over n contiguous elements; `op` works on compute types.
template <typename TI, typename TO, typename Op>
void run_unary(ThreadPool* pool, const TI* x, TO* y, int64_t n, double cost, const Op& op) {
  if (n <= 0) return;
  parallel_for(pool, n, cost, [&](int64_t begin, int64_t end) {
    const Op op_local = op;  // see binary_span
    // Local restrict pointers: through the captured references, a store of a byte-sized
    // element (bool, int8) may alias the pointers themselves, which kept the loop scalar.
    const TI* __restrict xs = x;
    TO* __restrict ys = y;
    if constexpr (is_half_v<TI> || is_half_v<TO>) {
      for (int64_t i = begin; i < end; ++i) ys[i] = store<TO>(op_local(load(xs[i])));
    } else if constexpr (std::is_same_v<TI, float> && std::is_same_v<TO, float>) {
      unary_span_f32(xs + begin, ys + begin, end - begin, op_local);
    } else {
      for (int64_t i = begin; i < end; ++i) ys[i] = static_cast<TO>(op_local(xs[i]));
    }
  });
}

// ---- kernel-side helpers ----------------------------------------------------------------

// Fails with InvalidArgument naming both types when a and b differ in element type.
void check_same_type(const KernelContext& ctx, const Tensor& a, const Tensor& b,
                     const char* name_a = "A", const char* name_b = "B");

// broadcast_shapes with the node's label in the message.
Shape broadcast_or_fail(const KernelContext& ctx, const Shape& a, const Shape& b);
// The same, without a new shape when the result is `a` or `b` itself (same shapes, or one
// broadcasts into the other): returns a reference to that input, else fills *storage.
const Shape& broadcast_ref(const KernelContext& ctx, const Shape& a, const Shape& b,
                           Shape* storage);

}  // namespace ew
}  // namespace ortlite
