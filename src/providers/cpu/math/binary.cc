// Broadcasting binary arithmetic: Add Sub Mul Div Pow Mod BitShift BitwiseAnd/Or/Xor.
//
// Integer semantics (all defined, never a trap): Add/Sub/Mul wrap around; Div truncates
// toward zero, x / 0 = 0 and INT_MIN / -1 = INT_MIN; Mod by 0 = 0; Pow with an integer
// exponent is exact (wrapping) and with a negative exponent gives 1 / x^n truncated
// (so 0 unless |x| == 1; 0 for x == 0); BitShift by >= the bit width gives 0.
#include "compute/vectorize.h"  // first: compile options for the loops below

#include <cmath>
#include <type_traits>

#include "providers/cpu/math/math_kernels.h"

namespace ortlite {
namespace {

using math::BinaryKernel;
using math::NoAttrs;

struct AddOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 1.0;
  template <typename C>
  C operator()(C a, C b) const {
    return ew::add(a, b);
  }
};

struct SubOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 1.0;
  template <typename C>
  C operator()(C a, C b) const {
    return ew::sub(a, b);
  }
};

struct MulOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 1.0;
  template <typename C>
  C operator()(C a, C b) const {
    return ew::mul(a, b);
  }
};

struct DivOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 2.0;
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (ew::is_int_v<C>) {
      return ew::int_div(a, b);
    } else {
      return a / b;
    }
  }
};

struct BitwiseAndOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 1.0;
  template <typename C>
  C operator()(C a, C b) const {
    return static_cast<C>(a & b);
  }
};

struct BitwiseOrOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 1.0;
  template <typename C>
  C operator()(C a, C b) const {
    return static_cast<C>(a | b);
  }
};

struct BitwiseXorOp : NoAttrs {
  using NoAttrs::NoAttrs;
  static constexpr double kCost = 1.0;
  template <typename C>
  C operator()(C a, C b) const {
    return static_cast<C>(a ^ b);
  }
};

// ---- Pow --------------------------------------------------------------------------------

// x^e for an integer base and exponent, by squaring, wrapping on overflow.
template <typename T, typename E>
T int_pow(T x, E e) {
  if constexpr (std::is_signed_v<E>) {
    if (e < 0) {
      if (x == T{1}) return T{1};
      if constexpr (std::is_signed_v<T>) {
        if (x == T{-1}) return (e & 1) ? T{-1} : T{1};
      }
      return T{0};
    }
  }
  T result{1};
  T base = x;
  uint64_t n = static_cast<uint64_t>(e);
  while (n != 0) {
    if (n & 1u) result = ew::mul(result, base);
    n >>= 1;
    if (n != 0) base = ew::mul(base, base);
  }
  return result;
}

// Pow(X: T, Y: T1) -> T. T: float, double, float16, bfloat16, int32, int64 (opset 12+ also
// ints); T1: any numeric type (opset 12+), the same as T before.
class PowKernel : public Kernel {
 public:
  explicit PowKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& e = ctx.required_input(1);
    Shape out_storage;
    const Shape& out = ew::broadcast_ref(ctx, x.shape(), e.shape(), &out_storage);
    Tensor& y = ctx.allocate_output(0, x.dtype(), out);
    ThreadPool* pool = ctx.thread_pool();
    constexpr unsigned kBaseTypes = ew::kTFloats | ew::kTInt32 | ew::kTInt64;
    ew::dispatch<kBaseTypes>(x.dtype(), ctx, "Pow (base X)", [&](auto btag) {
      using TB = decltype(btag);
      ew::dispatch<ew::kTNumeric>(e.dtype(), ctx, "Pow (exponent Y)", [&](auto etag) {
        using TE = decltype(etag);
        const TB* px = x.data<TB>();
        TB* py = y.data<TB>();
        if constexpr (ew::is_float_v<TB>) {
          // A scalar exponent of 0.5, 1, 2, 3 or -1 (sqrt, copy, x*x, x*x*x, 1/x) is common:
          // skip pow(). The loops vectorize; results differ from pow() by at most an ulp
          // (x^3: two roundings), as in onnxruntime, which does the same.
          if (e.numel() == 1 && out == x.shape()) {
            const double ev = static_cast<double>(ew::load(*e.data<TE>()));
            const int64_t n = x.numel();
            if (ev == 2.0) {
              ew::run_unary(pool, px, py, n, 1.0, [](auto v) { return v * v; });
              return;
            }
            if (ev == 3.0) {
              ew::run_unary(pool, px, py, n, 1.0, [](auto v) { return v * v * v; });
              return;
            }
            if (ev == 1.0) {
              ew::run_unary(pool, px, py, n, 0.5, [](auto v) { return v; });
              return;
            }
            if (ev == -1.0) {
              ew::run_unary(pool, px, py, n, 2.0, [](auto v) { return decltype(v){1} / v; });
              return;
            }
            if (ev == 0.5) {
              if constexpr (std::is_same_v<TB, double>) {
                ew::run_unary(pool, px, py, n, 4.0, [](auto v) { return std::sqrt(v); });
              } else {  // float and the 16-bit floats: sqrtps, correctly rounded like sqrt()
                math::run_fast_unary(pool, fast::UnaryFn::kSqrt, px, py, n, 4.0);
              }
              return;
            }
          }
        }
        const ew::BroadcastPlan<2> plan = ew::make_broadcast_plan<2>(out, {&x.shape(), &e.shape()});
        ew::run_binary(pool, plan, px, e.data<TE>(), py, 20.0, [](auto a, auto b) {
          using CB = decltype(a);
          using CE = decltype(b);
          if constexpr (ew::is_float_v<CB>) {
            if constexpr (ew::is_float_v<CE>) {
              using W = std::common_type_t<CB, CE>;
              return static_cast<CB>(std::pow(static_cast<W>(a), static_cast<W>(b)));
            } else {
              return static_cast<CB>(std::pow(static_cast<double>(a), static_cast<double>(b)));
            }
          } else if constexpr (ew::is_float_v<CE>) {
            return ew::saturate_cast_int<CB>(
                std::pow(static_cast<double>(a), static_cast<double>(b)));
          } else {
            return int_pow<CB, CE>(a, b);
          }
        });
      });
    });
  }
};

// ---- Mod --------------------------------------------------------------------------------

// Integer remainder with the sign of the divisor (Python's %); x % 0 = 0.
template <typename T>
T floor_mod(T a, T b) {
  if constexpr (std::is_signed_v<T>) {
    if (b == 0 || b == T{-1}) return T{0};
    T r = static_cast<T>(a % b);
    if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
    return r;
  } else {
    return b == 0 ? T{0} : static_cast<T>(a % b);
  }
}

class ModKernel : public Kernel {
 public:
  explicit ModKernel(const KernelInfo& info) : fmod_(info.attr_int("fmod", 0)) {
    if (fmod_ != 0 && fmod_ != 1)
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'fmod' must be 0 or 1, got " + std::to_string(fmod_));
  }
  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.required_input(0);
    const Tensor& b = ctx.required_input(1);
    ew::check_same_type(ctx, a, b);
    Shape out_storage;
    const Shape& out = ew::broadcast_ref(ctx, a.shape(), b.shape(), &out_storage);
    Tensor& y = ctx.allocate_output(0, a.dtype(), out);
    const ew::BroadcastPlan<2> plan = ew::make_broadcast_plan<2>(out, {&a.shape(), &b.shape()});
    ThreadPool* pool = ctx.thread_pool();
    ew::dispatch<ew::kTNumeric>(a.dtype(), ctx, "Mod", [&](auto tag) {
      using T = decltype(tag);
      const T* pa = a.data<T>();
      const T* pb = b.data<T>();
      T* py = y.data<T>();
      if constexpr (ew::is_float_v<T>) {
        if (fmod_ == 0)
          ctx.fail(StatusCode::kInvalidArgument,
                   std::string("attribute 'fmod' must be 1 for floating point type ") +
                       dtype_name(a.dtype()));
        ew::run_binary(pool, plan, pa, pb, py, 10.0,
                       [](auto u, auto v) { return std::fmod(u, v); });
      } else {
        if (fmod_ == 1) {
          ew::run_binary(pool, plan, pa, pb, py, 2.0, [](T u, T v) { return ew::int_rem(u, v); });
        } else {
          ew::run_binary(pool, plan, pa, pb, py, 2.0, [](T u, T v) { return floor_mod(u, v); });
        }
      }
    });
  }

 private:
  int64_t fmod_;
};

// ---- BitShift ---------------------------------------------------------------------------

class BitShiftKernel : public Kernel {
 public:
  explicit BitShiftKernel(const KernelInfo& info) {
    const std::string dir = info.attr_string("direction", "");
    if (dir == "LEFT") {
      left_ = true;
    } else if (dir == "RIGHT") {
      left_ = false;
    } else {
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'direction' must be \"LEFT\" or \"RIGHT\", got \"" + dir + "\"");
    }
  }
  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.required_input(0);
    const Tensor& b = ctx.required_input(1);
    ew::check_same_type(ctx, a, b, "X", "Y");
    Shape out_storage;
    const Shape& out = ew::broadcast_ref(ctx, a.shape(), b.shape(), &out_storage);
    Tensor& y = ctx.allocate_output(0, a.dtype(), out);
    const ew::BroadcastPlan<2> plan = ew::make_broadcast_plan<2>(out, {&a.shape(), &b.shape()});
    ew::dispatch<ew::kTUnsigned>(a.dtype(), ctx, "BitShift", [&](auto tag) {
      using T = decltype(tag);
      using U = ew::wide_unsigned_t<T>;
      constexpr T kBits = static_cast<T>(sizeof(T) * 8);
      if (left_) {
        ew::run_binary(ctx.thread_pool(), plan, a.data<T>(), b.data<T>(), y.data<T>(), 1.0,
                       [](T u, T v) { return v >= kBits ? T{0} : static_cast<T>(U{u} << v); });
      } else {
        ew::run_binary(ctx.thread_pool(), plan, a.data<T>(), b.data<T>(), y.data<T>(), 1.0,
                       [](T u, T v) { return v >= kBits ? T{0} : static_cast<T>(U{u} >> v); });
      }
    });
  }

 private:
  bool left_ = true;
};

}  // namespace

void register_binary_kernels(KernelRegistry& r) {
  constexpr unsigned kArith = ew::kTNumeric;
  r.add_versions("Add", {7, 13, 14}, make_factory<BinaryKernel<AddOp, kArith>>());
  r.add_versions("Sub", {7, 13, 14}, make_factory<BinaryKernel<SubOp, kArith>>());
  r.add_versions("Mul", {7, 13, 14}, make_factory<BinaryKernel<MulOp, kArith>>());
  r.add_versions("Div", {7, 13, 14}, make_factory<BinaryKernel<DivOp, kArith>>());
  r.add_versions("Pow", {7, 12, 13, 15}, make_factory<PowKernel>());
  r.add_versions("Mod", {10, 13}, make_factory<ModKernel>());
  r.add_versions("BitShift", {11}, make_factory<BitShiftKernel>());
  r.add_versions("BitwiseAnd", {18}, make_factory<BinaryKernel<BitwiseAndOp, ew::kTInts>>());
  r.add_versions("BitwiseOr", {18}, make_factory<BinaryKernel<BitwiseOrOp, ew::kTInts>>());
  r.add_versions("BitwiseXor", {18}, make_factory<BinaryKernel<BitwiseXorOp, ew::kTInts>>());
}

}  // namespace ortlite
