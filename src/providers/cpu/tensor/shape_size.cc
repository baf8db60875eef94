// Shape (start/end from opset 15) and Size: int64 outputs describing the input's shape.
#include <algorithm>

#include "providers/cpu/tensor/tensor_kernels.h"

namespace ortlite {
namespace {

class ShapeOp final : public Kernel {
 public:
  explicit ShapeOp(const KernelInfo& info) {
    if (info.opset() >= 15) {
      start_ = info.attr_int("start", 0);
      has_end_ = info.has_attr("end");
      end_ = info.attr_int("end", 0);
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.required_input(0);
    const int64_t rank = static_cast<int64_t>(data.rank());
    auto clamp = [rank](int64_t v) {
      if (v < 0) v += rank;
      return std::min(std::max<int64_t>(v, 0), rank);
    };
    const int64_t start = clamp(start_);
    const int64_t end = has_end_ ? clamp(end_) : rank;
    const int64_t n = std::max<int64_t>(end - start, 0);
    Tensor& y = ctx.allocate_output(0, DataType::kInt64, {n});
    int64_t* out = y.data<int64_t>();
    for (int64_t i = 0; i < n; ++i) out[i] = data.dim(static_cast<size_t>(start + i));
  }

 private:
  int64_t start_ = 0;
  bool has_end_ = false;
  int64_t end_ = 0;
};

class Size final : public Kernel {
 public:
  explicit Size(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.required_input(0);
    Tensor& y = ctx.allocate_output(0, DataType::kInt64, {});
    y.data<int64_t>()[0] = data.numel();
  }
};

}  // namespace

void register_shape_size_kernels(KernelRegistry& r) {
  r.add_versions("Shape", {1, 13, 15, 19, 21, 23}, make_factory<ShapeOp>());
  r.add_versions("Size", {1, 13, 19, 21, 23}, make_factory<Size>());
}

}  // namespace ortlite
