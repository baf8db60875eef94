// Kernels added for ONNX node conformance: CumSum, CumProd and the window generators
// (HannWindow, HammingWindow, BlackmanWindow).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "providers/cpu/math/math_kernels.h"

namespace ortlite {
namespace {

// CumSum(x, axis) / CumProd(x, axis) (opset 26): running sum or product along one axis;
// `exclusive` leaves out the element itself, `reverse` runs from the end. Accumulates in
// the element type (float16 / bfloat16 in float), like onnxruntime; integers wrap around
// like numpy's instead of overflowing.
template <bool kProduct>
class Cumulative final : public Kernel {
 public:
  explicit Cumulative(const KernelInfo& info)
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
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.dim(static_cast<size_t>(d));
    for (int64_t d = axis + 1; d < rank; ++d) inner *= x.dim(static_cast<size_t>(d));
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
      if (inner == 1) {
        parallel_for(ctx.thread_pool(), outer, static_cast<double>(n),
                     [&](int64_t begin, int64_t end) {
                       for (int64_t o = begin; o < end; ++o) {
                         const T* s = src + o * n;
                         T* d = dst + o * n;
                         Acc acc = Acc(kProduct ? 1 : 0);
                         for (int64_t t = 0; t < n; ++t) {
                           const int64_t at = rev ? n - 1 - t : t;
                           const Acc v = static_cast<Acc>(s[at]);
                           if (excl) d[at] = T(acc);
                           acc = combine(acc, v);
                           if (!excl) d[at] = T(acc);
                         }
                       }
                     });
        return;
      }
      // Along an outer axis: whole rows of `inner` running values at a time (contiguous,
      // vectorizable; blocks of columns split over the pool), each element still
      // accumulated in axis order, as the scalar loop above does. Where the element type is
      // its own accumulator, row t is row t - 1 combined with one input row; float16 /
      // bfloat16 keep float accumulators.
      const int64_t kCols = 1024;
      // Whole rows on one thread or when there are enough rows to share out, else about 8
      // blocks.
      ThreadPool* pool = ctx.thread_pool();
      const bool serial = pool == nullptr || pool->num_threads() == 1;
      const int64_t width =
          !std::is_same_v<T, Acc> ? kCols
          : serial || outer >= 8
              ? inner
              : std::max<int64_t>(kCols, ((inner * outer + 7) / 8 + 15) & ~int64_t{15});
      const int64_t blocks = (inner + width - 1) / width;
      const int64_t step = rev ? -inner : inner;
      parallel_for(pool, outer * blocks, static_cast<double>(n * std::min(inner, width)),
                   [&](int64_t begin, int64_t end) {
                     Acc acc[std::is_same_v<T, Acc> ? 1 : 1024];
                     for (int64_t item = begin; item < end; ++item) {
                       const int64_t o = item / blocks, c0 = (item % blocks) * width;
                       const int64_t w = std::min(width, inner - c0);
                       const int64_t first = (o * n + (rev ? n - 1 : 0)) * inner + c0;
                       const T* s = src + first;
                       T* d = dst + first;
                       if constexpr (std::is_same_v<T, Acc>) {
                         (void)acc;
                         for (int64_t i = 0; i < w; ++i) d[i] = excl ? T(kProduct ? 1 : 0) : s[i];
                         for (int64_t t = 1; t < n; ++t) {
                           const T* in = excl ? s : s + step;
                           T* prev = d;
                           s += step;
                           d += step;
                           for (int64_t i = 0; i < w; ++i) d[i] = combine(prev[i], in[i]);
                         }
                       } else {
                         for (int64_t i = 0; i < w; ++i) acc[i] = Acc(kProduct ? 1 : 0);
                         for (int64_t t = 0; t < n; ++t, s += step, d += step) {
                           if (excl) {
                             for (int64_t i = 0; i < w; ++i) {
                               d[i] = T(acc[i]);
                               acc[i] = combine(acc[i], static_cast<Acc>(s[i]));
                             }
                           } else {
                             for (int64_t i = 0; i < w; ++i) {
                               acc[i] = combine(acc[i], static_cast<Acc>(s[i]));
                               d[i] = T(acc[i]);
                             }
                           }
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
  template <typename A>
  static A combine(A a, A b) {
    if constexpr (std::is_integral_v<A>) {
      using U = std::make_unsigned_t<A>;
      return static_cast<A>(kProduct ? static_cast<U>(a) * static_cast<U>(b)
                                     : static_cast<U>(a) + static_cast<U>(b));
    } else {
      return kProduct ? a * b : a + b;
    }
  }

  bool exclusive_, reverse_;
};

enum class Window { kHann, kHamming, kBlackman };

// Window(size): the window of `size` points; periodic (default) divides by size, else
// by size - 1. output_datatype: any numeric type (default float).
class WindowOp final : public Kernel {
 public:
  WindowOp(const KernelInfo& info, Window w)
      : window_(w),
        periodic_(info.attr_int("periodic", 1) != 0),
        dtype_(static_cast<DataType>(info.attr_int("output_datatype", 1))) {
    if (!dtype_supported(dtype_) || dtype_ == DataType::kString || dtype_ == DataType::kBool) {
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'output_datatype' = " + std::to_string(static_cast<int>(dtype_)) +
                    " is not a numeric type");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& size_t_ = ctx.required_input(0);
    if ((size_t_.dtype() != DataType::kInt32 && size_t_.dtype() != DataType::kInt64) ||
        size_t_.numel() != 1) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'size' must be an int32 or int64 scalar");
    }
    const int64_t size = tensor_to_int64s(size_t_)[0];
    if (size < 0 || size > (int64_t{1} << 28)) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'size' = " + std::to_string(size) + " is out of range");
    }
    Tensor& y = ctx.allocate_output(0, dtype_, {size});
    const double denom = static_cast<double>(periodic_ ? size : size - 1);
    const double pi = 3.14159265358979323846;
    const Window w = window_;
    ORTLITE_DISPATCH_NUMERIC(dtype_, "window", [&](auto tag) {
      using T = decltype(tag);
      T* dst = y.data<T>();
      for (int64_t i = 0; i < size; ++i) {
        const double n = static_cast<double>(i);
        double v = 0;
        switch (w) {
          case Window::kHann: {
            const double s = std::sin(n * pi / denom);
            v = s * s;
            break;
          }
          case Window::kHamming:
            v = 25.0 / 46.0 - std::cos(n * pi * 2 / denom) * (1 - 25.0 / 46.0);
            break;
          case Window::kBlackman:
            v = 0.42 - 0.5 * std::cos(n * pi * 2 / denom) + 0.08 * std::cos(n * pi * 4 / denom);
            break;
        }
        if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
          dst[i] = T(static_cast<float>(v));
        } else {
          dst[i] = static_cast<T>(v);
        }
      }
    });
  }

 private:
  Window window_;
  bool periodic_;
  DataType dtype_;
};

}  // namespace

void register_cumsum_kernels(KernelRegistry& r) {
  r.add("", "CumSum", 11, 13, make_factory<Cumulative<false>>());
  r.add("", "CumSum", 14, kNewestOpset, make_factory<Cumulative<false>>());
  r.add("", "CumProd", 26, kMaxOpset, make_factory<Cumulative<true>>());
  const std::pair<const char*, Window> windows[] = {{"HannWindow", Window::kHann},
                                                    {"HammingWindow", Window::kHamming},
                                                    {"BlackmanWindow", Window::kBlackman}};
  for (const auto& [name, w] : windows) {
    const Window kind = w;
    r.add("", name, 17, kNewestOpset, [kind](const KernelInfo& info) {
      return std::unique_ptr<Kernel>(new WindowOp(info, kind));
    });
  }
}

}  // namespace ortlite
