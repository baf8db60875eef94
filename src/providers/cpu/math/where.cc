// Where(condition: bool, X: T, Y: T) -> T with multidirectional broadcasting of all three.
// Elements are copied by width (1/2/4/8 bytes), so every fixed-size type and strings work.
#include "compute/vectorize.h"  // first: compile options for the loops below

#include <string>
#include <type_traits>

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

template <typename T>
void where_run(ThreadPool* pool, const ew::BroadcastPlan<3>& p, const bool* c, const T* x,
               const T* y, T* o) {
  if (p.total == 0) return;
  const int64_t sc = p.inner_stride[0], sx = p.inner_stride[1], sy = p.inner_stride[2];
  parallel_for(pool, p.total, 1.0, [&](int64_t begin, int64_t end) {
    ew::for_each_span<3>(p, begin, end,
                         [&](int64_t oo, const std::array<int64_t, 3>& io, int64_t len) {
                           const bool* pc = c + io[0];
                           const T* px = x + io[1];
                           const T* py = y + io[2];
                           T* po = o + oo;
                           if (sc == 1 && sx == 1 && sy == 1) {
                             for (int64_t i = 0; i < len; ++i) po[i] = pick(pc[i], px[i], py[i]);
                           } else {
                             for (int64_t i = 0; i < len; ++i)
                               po[i] = pick(pc[i * sc], px[i * sx], py[i * sy]);
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
