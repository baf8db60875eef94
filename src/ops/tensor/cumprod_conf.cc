// CumProd (opset 26), added for ONNX node conformance: running product along one axis,
// `exclusive` leaves out the element itself, `reverse` runs from the end. Mirrors CumSum
// (src/ops/math/cumsum_conf.cc): accumulates in the element type (float16 / bfloat16 in
// float); integer products wrap around like numpy's instead of overflowing.
#include <type_traits>

#include "ops/tensor/tensor_kernels.h"

namespace ortlite {
namespace {

template <typename A>
A times(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

class CumProd final : public Kernel {
 public:
  explicit CumProd(const KernelInfo& info)
      : exclusive_(info.attr_int("exclusive", 0) != 0),
        reverse_(info.attr_int("reverse", 0) != 0) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& axis_t = ctx.required_input(1);
    if ((axis_t.dtype() != DataType::kInt32 && axis_t.dtype() != DataType::kInt64) ||
        axis_t.numel() != 1 || axis_t.rank() > 1) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'axis' must be an int32 or int64 scalar, got " +
                                                 std::string(dtype_name(axis_t.dtype())) + " " +
                                                 shape_to_string(axis_t.shape()));
    }
    const int64_t rank = static_cast<int64_t>(x.rank());
    if (rank == 0) ctx.fail(StatusCode::kInvalidArgument, "input 'x' must have rank >= 1");
    const int64_t axis = normalize_axis(tensor_to_int64s(axis_t)[0], rank, "input 'axis'");
    const int64_t outer = tensor_ops::dims_product(x.shape(), 0, static_cast<size_t>(axis));
    const int64_t inner =
        tensor_ops::dims_product(x.shape(), static_cast<size_t>(axis) + 1, x.rank());
    const int64_t n = x.dim(static_cast<size_t>(axis));
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    if (y.numel() == 0) return;
    const bool excl = exclusive_, rev = reverse_;
    auto run = [&](auto tag) {
      using T = decltype(tag);
      using Acc =
          std::conditional_t<std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>, float, T>;
      const T* src = x.data<T>();
      T* dst = y.data<T>();
      parallel_for(ctx.thread_pool(), outer * inner, static_cast<double>(n),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t row = begin; row < end; ++row) {
                       const int64_t o = row / inner, i = row % inner;
                       Acc acc = Acc(1);
                       for (int64_t s = 0; s < n; ++s) {
                         const int64_t at = (o * n + (rev ? n - 1 - s : s)) * inner + i;
                         const Acc v = static_cast<Acc>(src[at]);
                         if (excl) {
                           dst[at] = T(acc);
                           acc = times(acc, v);
                         } else {
                           acc = times(acc, v);
                           dst[at] = T(acc);
                         }
                       }
                     }
                   });
    };
    switch (x.dtype()) {
      case DataType::kFloat:
        return run(float{});
      case DataType::kDouble:
        return run(double{});
      case DataType::kFloat16:
        return run(Float16{});
      case DataType::kBFloat16:
        return run(BFloat16{});
      case DataType::kInt32:
        return run(int32_t{});
      case DataType::kInt64:
        return run(int64_t{});
      case DataType::kUInt32:
        return run(uint32_t{});
      case DataType::kUInt64:
        return run(uint64_t{});
      default:
        ctx.fail(StatusCode::kNotImplemented, std::string("input 'x': element type ") +
                                                  dtype_name(x.dtype()) + " is not supported");
    }
  }

 private:
  bool exclusive_, reverse_;
};

}  // namespace

void register_cumprod_conf_kernels(KernelRegistry& r) {
  r.add("", "CumProd", 26, kMaxOpset, make_factory<CumProd>());
}

}  // namespace ortlite
