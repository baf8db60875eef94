// Range (opset 11, 27; com.microsoft Range: delta optional, 1): start, limit, delta scalars of
// float, double, int16, int32 or int64, and from opset 27 float16 or bfloat16. Count =
// max(ceil((limit - start) / delta), 0); values accumulate start, start + delta, ... like
// onnxruntime (computed as start + i * delta when every partial sum is exact, which gives the same
// values). float16 / bfloat16 compute in the `stash_type` (float or double) as start + i * delta,
// the specification's formula, each value rounded back once. delta == 0, a count that is not
// finite, or one above kMaxRangeElements is an InvalidArgument error.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>

#include "compute/cpu_avx512.h"
#include "providers/cpu/tensor/creation_kernels.h"
#include "providers/cpu/tensor/tensor_kernels.h"

namespace ortlite {
namespace creation {
namespace {

constexpr int64_t kMaxRangeElements = int64_t{1} << 31;

// out[i] = start + i * delta, i < n: floats where every value is exact (exact_steps below;
// T(i) is exact as an int32 since n <= 2^31), integers in wrapping unsigned arithmetic (the
// values themselves stay in range). Compiled twice: for the baseline and, chosen at run
// time, with AVX-512, where the loop vectorizes 8 / 16 lanes wide.
template <typename T>
__attribute__((always_inline)) inline void linear_body(T* __restrict out, int64_t n, T start,
                                                       T delta) {
  if constexpr (std::is_floating_point_v<T>) {
    for (int64_t i = 0; i < n; ++i)
      out[i] = start + static_cast<T>(static_cast<int32_t>(i)) * delta;
  } else {
    using U = std::make_unsigned_t<T>;
    const U s0 = static_cast<U>(start), d = static_cast<U>(delta);
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(s0 + static_cast<U>(i) * d);
  }
}

#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
template <typename T>
ORTLITE_AVX512 void linear_avx512(T* out, int64_t n, T start, T delta) {
  linear_body(out, n, start, delta);
}
#endif

template <typename T>
void linear(T* out, int64_t n, T start, T delta) {
#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
  if (cpu_has_avx512() && n >= 64) return linear_avx512(out, n, start, delta);
#endif
  linear_body(out, n, start, delta);
}

template <typename T>
std::string num_str(T v) {
  std::ostringstream os;
  os.precision(17);
  if constexpr (sizeof(T) < sizeof(int))
    os << static_cast<int>(v);
  else
    os << v;
  return os.str();
}

class RangeKernel : public Kernel {
 public:
  explicit RangeKernel(const KernelInfo& info)
      : opset_(info.opset()), contrib_(info.node().domain == "com.microsoft") {
    // com.microsoft Range: delta is optional (1).
    if (contrib_) opset_ = 11;
    const bool delta_ok = info.has_input(2) || (contrib_ && info.num_inputs() <= 3);
    if (info.num_inputs() > 3 || !info.has_input(0) || !info.has_input(1) || !delta_ok)
      info.fail(StatusCode::kInvalidGraph,
                "expects 3 inputs (start, limit, delta), got " + std::to_string(info.num_inputs()));
    if (opset_ >= 27) {
      stash_ = info.attr_int("stash_type", 1);
      if (stash_ != 1 && stash_ != 11)
        info.fail(StatusCode::kInvalidGraph,
                  "attribute 'stash_type' must be 1 (float) or 11 (double), got " +
                      std::to_string(stash_));
    }
  }

  void compute(KernelContext& ctx) const override {
    static const char* const kNames[] = {"start", "limit", "delta"};
    const Tensor* in[3];
    in[2] = nullptr;
    for (int i = 0; i < 3; ++i) {
      if (i == 2 && contrib_ && !ctx.input(2)) break;
      in[i] = &ctx.required_input(i);
      if (in[i]->numel() != 1 || in[i]->rank() > 1)
        ctx.fail(StatusCode::kInvalidArgument, std::string("input '") + kNames[i] +
                                                   "' must be a scalar, got shape " +
                                                   shape_to_string(in[i]->shape()));
      if (in[i]->dtype() != in[0]->dtype())
        ctx.fail(StatusCode::kInvalidArgument, std::string("input '") + kNames[i] +
                                                   "' has element type " +
                                                   dtype_name(in[i]->dtype()) + ", expected " +
                                                   dtype_name(in[0]->dtype()) + " like 'start'");
    }
    switch (in[0]->dtype()) {
      case DataType::kFloat:
        return run<float>(ctx, in);
      case DataType::kDouble:
        return run<double>(ctx, in);
      case DataType::kInt16:
        return run<int16_t>(ctx, in);
      case DataType::kInt32:
        return run<int32_t>(ctx, in);
      case DataType::kInt64:
        return run<int64_t>(ctx, in);
      case DataType::kFloat16:
      case DataType::kBFloat16:
        if (opset_ < 27) break;
        if (in[0]->dtype() == DataType::kFloat16)
          return stash_ == 11 ? run_half<Float16, double>(ctx, in)
                              : run_half<Float16, float>(ctx, in);
        return stash_ == 11 ? run_half<BFloat16, double>(ctx, in)
                            : run_half<BFloat16, float>(ctx, in);
      default:
        break;
    }
    ctx.fail(StatusCode::kNotImplemented,
             std::string("element type ") + dtype_name(in[0]->dtype()) +
                 " is not supported (float, double, int16, int32, int64 are; float16 and "
                 "bfloat16 from opset 27)");
  }

 private:
  int64_t opset_;
  bool contrib_;
  int64_t stash_ = 1;

  // float16 / bfloat16 (H) computed in C.
  template <typename H, typename C>
  void run_half(KernelContext& ctx, const Tensor* const* in) const {
    const C start = static_cast<C>(static_cast<float>(*in[0]->data<H>()));
    const C limit = static_cast<C>(static_cast<float>(*in[1]->data<H>()));
    const C delta = static_cast<C>(static_cast<float>(*in[2]->data<H>()));
    if (delta == C(0)) ctx.fail(StatusCode::kInvalidArgument, "input 'delta' must not be zero");
    const double q =
        std::ceil(static_cast<double>(static_cast<C>(limit - start)) / static_cast<double>(delta));
    if (std::isnan(q))
      ctx.fail(StatusCode::kInvalidArgument, "start " + num_str(start) + ", limit " +
                                                 num_str(limit) + ", delta " + num_str(delta) +
                                                 " give no defined element count");
    if (q > static_cast<double>(kMaxRangeElements))
      ctx.fail(StatusCode::kInvalidArgument,
               "start " + num_str(start) + ", limit " + num_str(limit) + ", delta " +
                   num_str(delta) + " give " + num_str(q) + " elements (at most " +
                   std::to_string(kMaxRangeElements) + " are allowed)");
    const int64_t n = q > 0 ? static_cast<int64_t>(q) : 0;
    Tensor& y = ctx.allocate_output(0, in[0]->dtype(), {n});
    H* out = y.data<H>();
    for (int64_t i = 0; i < n; ++i)
      out[i] = H(static_cast<float>(start + static_cast<C>(i) * delta));
  }

  template <typename T>
  void run(KernelContext& ctx, const Tensor* const* in) const {
    const T start = *in[0]->data<T>();
    const T limit = *in[1]->data<T>();
    const T delta = in[2] ? *in[2]->data<T>() : T(1);
    if (delta == T(0)) ctx.fail(StatusCode::kInvalidArgument, "input 'delta' must not be zero");
    int64_t n = 0;
    auto too_many = [&](const std::string& count) {
      ctx.fail(StatusCode::kInvalidArgument,
               "start " + num_str(start) + ", limit " + num_str(limit) + ", delta " +
                   num_str(delta) + " give " + count + " elements (at most " +
                   std::to_string(kMaxRangeElements) + " are allowed)");
    };
    if constexpr (std::is_floating_point_v<T>) {
      // As onnxruntime: the difference in T, the division in double.
      const T diff = static_cast<T>(limit - start);
      const double q = std::ceil(static_cast<double>(diff) / static_cast<double>(delta));
      if (std::isnan(q)) {
        ctx.fail(StatusCode::kInvalidArgument, "start " + num_str(start) + ", limit " +
                                                   num_str(limit) + ", delta " + num_str(delta) +
                                                   " give no defined element count");
      }
      if (q > static_cast<double>(kMaxRangeElements)) too_many(num_str(q));
      n = q > 0 ? static_cast<int64_t>(q) : 0;
    } else {
      // Exact integer arithmetic (no overflow for any int64 inputs).
      __int128 diff = static_cast<__int128>(limit) - static_cast<__int128>(start);
      __int128 d = delta;
      if (d < 0) {
        diff = -diff;
        d = -d;
      }
      const __int128 q = diff > 0 ? (diff + d - 1) / d : 0;
      if (q > kMaxRangeElements) too_many(num_str(static_cast<double>(q)));
      n = static_cast<int64_t>(q);
    }
    Tensor& y = ctx.allocate_output(0, in[0]->dtype(), {n});
    T* out = y.data<T>();
    if constexpr (std::is_floating_point_v<T>) {
      if (exact_steps(start, delta, n)) {
        // Every partial sum is exact: the accumulation below equals start + i * delta.
        linear(out, n, start, delta);
        return;
      }
      T v = start;
      for (int64_t i = 0; i < n; ++i) {
        out[i] = v;
        v = static_cast<T>(v + delta);
      }
    } else {
      // start + i * delta stays within [start, limit) for i < n, so no value overflows.
      linear(out, n, start, delta);
    }
  }

  // The exponent of the lowest set bit of x != 0 (x = k * 2^e with k odd).
  template <typename T>
  static int low_bit_exponent(T x) {
    constexpr int kDigits = std::numeric_limits<T>::digits;
    int e = 0;
    const T m = std::frexp(std::fabs(x), &e);  // |x| = m * 2^e, m in [0.5, 1)
    const uint64_t mant = static_cast<uint64_t>(std::ldexp(m, kDigits));  // exact integer
    return e - kDigits + __builtin_ctzll(mant);
  }

  // True when start + i * delta, i * delta and T(i) are exact in T for every i < n, so
  // that the values can be computed independently with the same results as the running
  // sum: start and delta are multiples of 2^g, and |start| + (n - 1) |delta| is below
  // 2^(digits - 1 + g) (one bit of margin for the rounding of the bound itself).
  template <typename T>
  static bool exact_steps(T start, T delta, int64_t n) {
    if (n <= 1) return true;
    if (!std::isfinite(start) || !std::isfinite(delta)) return false;
    int g = low_bit_exponent(delta);
    if (start != T(0)) g = std::min(g, low_bit_exponent(start));
    const long double bound = std::ldexp(1.0L, std::numeric_limits<T>::digits - 1 + g);
    const long double reach =
        std::fabs(static_cast<long double>(start)) +
        static_cast<long double>(n - 1) * std::fabs(static_cast<long double>(delta));
    return reach < bound;
  }
};

}  // namespace

void register_range_kernels(KernelRegistry& r) {
  r.add_versions("Range", {11, 27}, make_factory<RangeKernel>());
  r.add("com.microsoft", "Range", 1, kMaxOpset, make_factory<RangeKernel>());
}

}  // namespace creation
}  // namespace ortlite
