// Range (opset 11, 27): start, limit, delta scalars of float, double, int16, int32 or int64,
// and from opset 27 float16 or bfloat16.
// Count = max(ceil((limit - start) / delta), 0); values accumulate start, start + delta, ...
// like onnxruntime. float16 / bfloat16 compute in the `stash_type` (float or double) as
// start + i * delta, the specification's formula, each value rounded back once.
// delta == 0, a count that is not finite, or one above kMaxRangeElements is an
// InvalidArgument error.
#include <cmath>
#include <sstream>
#include <string>
#include <type_traits>

#include "providers/cpu/tensor/creation_kernels.h"
#include "providers/cpu/tensor/tensor_kernels.h"

namespace ortlite {
namespace creation {
namespace {

constexpr int64_t kMaxRangeElements = int64_t{1} << 31;

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
  explicit RangeKernel(const KernelInfo& info) : opset_(info.opset()) {
    if (info.num_inputs() != 3 || !info.has_input(0) || !info.has_input(1) || !info.has_input(2))
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
    for (int i = 0; i < 3; ++i) {
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
    const T delta = *in[2]->data<T>();
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
      T v = start;
      for (int64_t i = 0; i < n; ++i) {
        out[i] = v;
        v = static_cast<T>(v + delta);
      }
    } else {
      // start + i * delta stays within [start, limit) for i < n, so no step overflows.
      T v = start;
      for (int64_t i = 0; i < n; ++i) {
        out[i] = v;
        if (i + 1 < n) v = static_cast<T>(v + delta);
      }
    }
  }
};

}  // namespace

void register_range_kernels(KernelRegistry& r) {
  r.add_versions("Range", {11, 27}, make_factory<RangeKernel>());
}

}  // namespace creation
}  // namespace ortlite
