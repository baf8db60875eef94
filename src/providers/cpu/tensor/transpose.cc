// Transpose: a strided copy (tensor_util.cc) that memcpys rows when the permutation keeps
// the innermost dim and tiles the copy for the 2-D transpose pattern. A permutation that
// only moves size-1 dims is a reshape of the input (no copy).
#include "providers/cpu/tensor/tensor_kernels.h"
#include "providers/shared/transpose_slice.h"

namespace ortlite {
namespace {

class Transpose final : public Kernel {
 public:
  explicit Transpose(const KernelInfo& info) { attrs_.load(info); }

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.required_input(0);
    const Shape& in = data.shape();
    const size_t rank = in.size();
    const std::vector<int64_t> perm = attrs_.resolve(ctx, in);
    const tensor_ops::StridedView view = tensor_ops::transpose_view(in, perm);
    const Shape& out = view.shape;
    // Same memory order when the dims other than 1 keep their relative order.
    bool same_order = true;
    int64_t last = -1;
    for (size_t i = 0; i < rank; ++i) {
      if (out[i] == 1) continue;
      if (perm[i] < last) same_order = false;
      last = perm[i];
    }
    if (same_order || data.numel() == 0) {
      ctx.set_output(0, data.reshaped(out));
      return;
    }
    Tensor& y = ctx.allocate_output(0, data.dtype(), out);
    tensor_ops::strided_copy_dense(data.dtype(), data.raw_data(), view.strides, y.raw_data(), out,
                                   ctx.thread_pool());
  }

 private:
  tensor_ops::TransposeAttrs attrs_;
};

}  // namespace

void register_transpose_kernels(KernelRegistry& r) {
  r.add_versions("Transpose", {1, 13, 21, 23}, make_factory<Transpose>());
}

}  // namespace ortlite
