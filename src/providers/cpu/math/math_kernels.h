// Internal header of the elementwise math kernels (src/providers/cpu/math): the per-file
// registration functions that register_math_kernels (register.cc) calls, and the generic
// unary / binary kernel templates the op families share.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>

#include "providers/cpu/common/elementwise.h"
#include "compute/fast_kernels.h"
#include "ortlite/kernel.h"
#include "providers/cpu/nn/nn_common.h"

namespace ortlite {

void register_binary_kernels(KernelRegistry& r);         // binary.cc: Add Sub Mul Div Pow Mod
                                                         // BitShift Bitwise{And,Or,Xor}
void register_unary_kernels(KernelRegistry& r);          // unary.cc: Neg Abs Sqrt Exp Log ...
void register_activation_kernels(KernelRegistry& r);     // activations.cc: Sigmoid Relu Gelu ...
void register_compare_logic_kernels(KernelRegistry& r);  // compare_logic.cc: Equal Less ...
                                                         // Not And Or Xor
void register_variadic_kernels(KernelRegistry& r);       // variadic.cc: Min Max Sum Mean
void register_clip_kernels(KernelRegistry& r);           // clip.cc: Clip
void register_where_kernels(KernelRegistry& r);          // where.cc: Where
void register_cumsum_kernels(KernelRegistry& r);         // cumsum.cc: CumSum CumProd *Window
void register_einsum_kernels(KernelRegistry& r);         // einsum.cc: Einsum
void register_det_kernels(KernelRegistry& r);            // det.cc: Det
void register_random_kernels(KernelRegistry& r);         // random.cc: Random* Bernoulli
                                                         // Multinomial
void register_dft_stft_kernels(KernelRegistry& r);       // dft_stft.cc: DFT STFT
                                                         // MelWeightMatrix

namespace math {

// Sigmoid of n doubles, vectorized (unary.cc; the same bits on every instruction set).
void sigmoid_f64_block(const double* x, double* y, int64_t n);

// A block of 16-bit floats to float and back: float16 with the F16C instructions when the
// CPU has them (nn::convert_to_float / convert_from_float: round to nearest even, the same
// results as ew::load / ew::store), bfloat16 element by element.
template <typename T>
inline void half_block_to_float(const T* x, float* buf, int64_t m) {
  if constexpr (std::is_same_v<T, Float16>) {
    nn::convert_to_float(DataType::kFloat16, x, buf, m);
  } else {
    for (int64_t j = 0; j < m; ++j) buf[j] = ew::load(x[j]);
  }
}
template <typename T>
inline void float_block_to_half(const float* buf, T* y, int64_t m) {
  if constexpr (std::is_same_v<T, Float16>) {
    nn::convert_from_float(DataType::kFloat16, buf, y, m);
  } else {
    for (int64_t j = 0; j < m; ++j) y[j] = ew::store<T>(buf[j]);
  }
}

// y = fn(x) over n elements with the vectorized float loops of fast_kernels.h; the 16-bit
// float types go through a float buffer.
template <typename T>
void run_fast_unary(ThreadPool* pool, fast::UnaryFn fn, const T* x, T* y, int64_t n, double cost) {
  parallel_for(pool, n, cost, [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<T, float>) {
      fast::unary(fn, x + begin, y + begin, end - begin);
    } else {
      constexpr int64_t kBlock = 512;
      float buf[kBlock];
      for (int64_t i = begin; i < end; i += kBlock) {
        const int64_t m = std::min(kBlock, end - i);
        half_block_to_float(x + i, buf, m);
        fast::unary(fn, buf, buf, m);
        float_block_to_half(buf, y + i, m);
      }
    }
  });
}

// True when Op names a vectorized float loop in `static constexpr fast::UnaryFn kFast`.
template <typename Op, typename = void>
struct HasFast : std::false_type {};
template <typename Op>
struct HasFast<Op, std::void_t<decltype(Op::kFast)>> : std::true_type {};
// Op::kFast named through the element type T, so that the name stays dependent inside the
// kernels' generic lambdas and is only looked up when the fast branch is taken (clang
// checks non-dependent names even in a discarded `if constexpr` branch).
template <typename Op, typename T>
struct FastOf {
  static constexpr auto value = Op::kFast;
};

// Float32 / float64 loops over an inline op, y[i] = op.fast(x[i]), compiled for AVX-512,
// AVX2 + FMA and the baseline, and picked by a run-time CPU check (op.fast, an ordinary
// inline member, is inlined into each). The three give the same results where the
// translation unit turns FMA contraction off (unary.cc does) or the op has no a * b + c.
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
template <typename Op, typename T>
__attribute__((target("avx512f,avx512dq,avx2,fma"))) void map_fast_avx512(const Op& op, const T* x,
                                                                          T* y, int64_t n) {
  const Op o = op;  // a local copy: stores to y cannot change its members
  for (int64_t i = 0; i < n; ++i) y[i] = o.fast(x[i]);
}
template <typename Op, typename T>
__attribute__((target("avx2,fma"))) void map_fast_avx2(const Op& op, const T* x, T* y, int64_t n) {
  const Op o = op;  // a local copy: stores to y cannot change its members
  for (int64_t i = 0; i < n; ++i) y[i] = o.fast(x[i]);
}
// 2: AVX-512, 1: AVX2 + FMA, 0: neither; the level fast::unary takes (so ORTLITE_FAST_ISA
// caps it too).
inline int map_f32_level() {
  static const int level = [] {
    const std::string isa = fast::isa();
    return isa == "avx512" ? 2 : (isa == "avx2" ? 1 : 0);
  }();
  return level;
}
#endif
template <typename Op, typename T>
void map_fast(const Op& op, const T* x, T* y, int64_t n) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  const int level = map_f32_level();
  if (level == 2) return map_fast_avx512(op, x, y, n);
  if (level == 1) return map_fast_avx2(op, x, y, n);
#endif
  const Op o = op;  // a local copy: stores to y cannot change its members
  for (int64_t i = 0; i < n; ++i) y[i] = o.fast(x[i]);
}
template <typename Op>
void map_f32(const Op& op, const float* x, float* y, int64_t n) {
  map_fast(op, x, y, n);
}

// True when Op patches map_f32's results afterwards: `void fix(const float* x, float* y,
// int64_t n) const` (inputs its fast version does not cover).
template <typename Op, typename = void>
struct HasFixF32 : std::false_type {};
template <typename Op>
struct HasFixF32<
    Op, std::void_t<decltype(std::declval<const Op&>().fix(
            static_cast<const float*>(nullptr), static_cast<float*>(nullptr), int64_t{0}))>>
    : std::true_type {};
template <typename Op>
void map_fix_f32(const Op& op, const float* x, float* y, int64_t n) {
  if constexpr (HasFixF32<Op>::value) {
    constexpr int64_t kBlock = 1024;  // x is still in cache for fix
    for (int64_t i = 0; i < n; i += kBlock) {
      const int64_t m = std::min(kBlock, n - i);
      map_fast(op, x + i, y + i, m);
      op.fix(x + i, y + i, m);
    }
  } else {
    map_fast(op, x, y, n);
  }
}

// map_fast over n elements, in parallel; the 16-bit float types go through a float buffer.
template <typename Op, typename T>
void run_map_f32(ThreadPool* pool, const Op& op, const T* x, T* y, int64_t n, double cost) {
  parallel_for(pool, n, cost, [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<T, double>) {
      map_fast(op, x + begin, y + begin, end - begin);
    } else if constexpr (std::is_same_v<T, float>) {
      map_fix_f32(op, x + begin, y + begin, end - begin);
    } else {
      constexpr int64_t kBlock = 512;
      float buf[kBlock];
      float res[kBlock];
      for (int64_t i = begin; i < end; i += kBlock) {
        const int64_t m = std::min(kBlock, end - i);
        half_block_to_float(x + i, buf, m);
        if constexpr (HasFixF32<Op>::value) {
          map_fix_f32(op, buf, res, m);
          float_block_to_half(res, y + i, m);
        } else {
          map_fast(op, buf, buf, m);
          float_block_to_half(buf, y + i, m);
        }
      }
    }
  });
}

// True when Op has a branch-free float version `float fast(float) const` for map_f32.
template <typename Op, typename = void>
struct HasFastF32 : std::false_type {};
template <typename Op>
struct HasFastF32<Op, std::void_t<decltype(std::declval<const Op&>().fast(0.0f))>>
    : std::true_type {};
// The same for double: `double fast(double) const`.
template <typename Op, typename = void>
struct HasFastF64 : std::false_type {};
template <typename Op>
struct HasFastF64<Op, std::void_t<decltype(std::declval<const Op&>().fast(0.0))>>
    : std::bool_constant<std::is_same_v<decltype(std::declval<const Op&>().fast(0.0)), double>> {};

// True when Op has a whole-array double loop `void block(const double*, double*, int64_t) const`.
template <typename Op, typename = void>
struct HasBlockF64 : std::false_type {};
template <typename Op>
struct HasBlockF64<
    Op, std::void_t<decltype(std::declval<const Op&>().block(
            static_cast<const double*>(nullptr), static_cast<double*>(nullptr), int64_t{0}))>>
    : std::true_type {};

// True when Op has `T fast(T) const` for the integer type T (map_fast over it).
template <typename Op, typename T, typename = void>
struct HasFastInt : std::false_type {};
template <typename Op, typename T>
struct HasFastInt<Op, T, std::void_t<decltype(std::declval<const Op&>().fast(T{}))>>
    : std::bool_constant<std::is_integral_v<T> && !std::is_same_v<T, bool> &&
                         std::is_same_v<decltype(std::declval<const Op&>().fast(T{})), T>> {};

// True when Op works on float16 bits directly: `uint16_t fast_half(uint16_t) const`.
template <typename Op, typename = void>
struct HasFastHalf : std::false_type {};
template <typename Op>
struct HasFastHalf<Op, std::void_t<decltype(std::declval<const Op&>().fast_half(uint16_t{0}))>>
    : std::true_type {};

template <typename Op>
ORTLITE_EW_CLONES void map_half_bits(const uint16_t* __restrict x, uint16_t* __restrict y,
                                     int64_t n, const Op op) {
  for (int64_t i = 0; i < n; ++i) y[i] = op.fast_half(x[i]);
}

// Unary kernel: y = Op(x), same shape, output type = input type. Op is constructed from
// the KernelInfo (attributes), has `static constexpr double kCost` and a
// `template <typename C> C operator()(C x) const` called with the compute type of the
// element (float for float16/bfloat16). With a kFast member, float and the 16-bit floats
// use that vectorized loop instead; with a `float fast(float) const` member, map_f32 over it
// (and double through a `double fast(double) const` member).
template <typename Op, unsigned Types>
class UnaryKernel : public Kernel {
 public:
  explicit UnaryKernel(const KernelInfo& info) : op_(info) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    ew::dispatch<Types>(x.dtype(), ctx, ctx.node().op_type.c_str(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (HasFastHalf<Op>::value && std::is_same_v<T, Float16>) {
        const uint16_t* px = reinterpret_cast<const uint16_t*>(x.data<T>());
        uint16_t* py = reinterpret_cast<uint16_t*>(y.data<T>());
        const Op& op = op_;
        parallel_for(ctx.thread_pool(), x.numel(), Op::kCost,
                     [&](int64_t b, int64_t e) { map_half_bits(px + b, py + b, e - b, op); });
      } else if constexpr (HasFast<Op>::value && (std::is_same_v<T, float> || ew::is_half_v<T>)) {
        run_fast_unary(ctx.thread_pool(), FastOf<Op, T>::value, x.data<T>(), y.data<T>(), x.numel(),
                       Op::kCost);
      } else if constexpr (HasFastF32<Op>::value &&
                           (std::is_same_v<T, float> || ew::is_half_v<T>)) {
        run_map_f32(ctx.thread_pool(), op_, x.data<T>(), y.data<T>(), x.numel(), Op::kCost);
      } else if constexpr (HasFastF64<Op>::value && std::is_same_v<T, double>) {
        run_map_f32(ctx.thread_pool(), op_, x.data<T>(), y.data<T>(), x.numel(), Op::kCost);
      } else if constexpr (HasFastInt<Op, T>::value) {
        const T* px = x.data<T>();
        T* py = y.data<T>();
        const Op& op = op_;
        parallel_for(ctx.thread_pool(), x.numel(), Op::kCost,
                     [&](int64_t b, int64_t e) { map_fast(op, px + b, py + b, e - b); });
      } else if constexpr (HasBlockF64<Op>::value && std::is_same_v<T, double>) {
        const double* px = x.data<T>();
        double* py = y.data<T>();
        const Op& op = op_;
        parallel_for(ctx.thread_pool(), x.numel(), Op::kCost,
                     [&](int64_t b, int64_t e) { op.block(px + b, py + b, e - b); });
      } else {
        ew::run_unary(ctx.thread_pool(), x.data<T>(), y.data<T>(), x.numel(), Op::kCost, op_);
      }
    });
  }

 private:
  Op op_;
};

// Binary kernel with multidirectional broadcasting: y = Op(a, b). Both inputs have the
// same element type; the output has that type, or bool when BoolOut.
template <typename Op, unsigned Types, bool BoolOut = false>
class BinaryKernel : public Kernel {
 public:
  explicit BinaryKernel(const KernelInfo& info) : op_(info) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.required_input(0);
    const Tensor& b = ctx.required_input(1);
    ew::check_same_type(ctx, a, b);
    Shape out_storage;
    const Shape& out = ew::broadcast_ref(ctx, a.shape(), b.shape(), &out_storage);
    Tensor& y = ctx.allocate_output(0, BoolOut ? DataType::kBool : a.dtype(), out);
    const ew::BroadcastPlan<2> plan = ew::make_broadcast_plan<2>(out, {&a.shape(), &b.shape()});
    ew::dispatch<Types>(a.dtype(), ctx, ctx.node().op_type.c_str(), [&](auto tag) {
      using T = decltype(tag);
      using TO = std::conditional_t<BoolOut, bool, T>;
      if constexpr (BoolOut && std::is_same_v<T, Float16>) {
        return compare_half(ctx.thread_pool(), plan, a.data<T>(), b.data<T>(), y.data<bool>());
      }
      ew::run_binary(ctx.thread_pool(), plan, a.data<T>(), b.data<T>(), y.data<TO>(), Op::kCost,
                     op_);
    });
  }

 private:
  // Comparisons of float16: each span's operands converted to float in blocks (F16C), then
  // compared with the float loops. Converting element by element made float16 Less half as
  // fast as onnxruntime. Float16 to float is exact, so the results are the same.
  void compare_half(ThreadPool* pool, const ew::BroadcastPlan<2>& plan, const Float16* a,
                    const Float16* b, bool* o) const {
    parallel_for(pool, plan.total, 2.0 * Op::kCost, [&](int64_t begin, int64_t end) {
      constexpr int64_t kBlock = 512;
      float fa[kBlock], fb[kBlock];
      ew::for_each_span<2>(
          plan, begin, end, [&](int64_t oo, const std::array<int64_t, 2>& io, int64_t len) {
            const int64_t sa = plan.inner_stride[0], sb = plan.inner_stride[1];
            for (int64_t i = 0; i < len; i += kBlock) {
              const int64_t m = std::min(kBlock, len - i);
              half_block_to_float(a + io[0] + (sa ? i : 0), fa, sa ? m : 1);
              half_block_to_float(b + io[1] + (sb ? i : 0), fb, sb ? m : 1);
              ew::binary_span(static_cast<const float*>(fa), static_cast<const float*>(fb),
                              o + oo + i, sa ? 1 : 0, sb ? 1 : 0, m, op_);
            }
          });
    });
  }

 public:
 private:
  Op op_;
};

// Base for ops without attributes.
struct NoAttrs {
  explicit NoAttrs(const KernelInfo&) {}
};

}  // namespace math
}  // namespace ortlite
