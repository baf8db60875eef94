// Transpose: a strided copy (tensor_util.cc) that memcpys rows when the permutation keeps
// the innermost dim and tiles the copy for the 2-D transpose pattern. A permutation that
// only moves size-1 dims is a reshape of the input (no copy).
#include "providers/cpu/tensor/tensor_kernels.h"

namespace ortlite {
namespace {

class Transpose final : public Kernel {
 public:
  explicit Transpose(const KernelInfo& info) {
    if (info.has_attr("perm")) {
      has_perm_ = true;
      perm_ = info.attr_ints("perm");
      std::vector<char> seen(perm_.size(), 0);
      for (int64_t p : perm_) {
        if (p < 0 || p >= static_cast<int64_t>(perm_.size()) || seen[static_cast<size_t>(p)]) {
          info.fail(
              StatusCode::kInvalidArgument,
              "attribute 'perm' " + tensor_ops::ints_to_string(perm_) + " is not a permutation");
        }
        seen[static_cast<size_t>(p)] = 1;
      }
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.required_input(0);
    const Shape& in = data.shape();
    const size_t rank = in.size();
    std::vector<int64_t> perm(rank);
    if (has_perm_) {
      if (perm_.size() != rank) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "attribute 'perm' " + tensor_ops::ints_to_string(perm_) + " has " +
                     std::to_string(perm_.size()) + " entries but the input has shape " +
                     shape_to_string(in));
      }
      perm = perm_;
    } else {
      for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(rank - 1 - i);
    }
    const std::vector<int64_t> in_strides = tensor_ops::dense_strides(in);
    Shape out(rank);
    std::vector<int64_t> src_strides(rank);
    for (size_t i = 0; i < rank; ++i) {
      out[i] = in[static_cast<size_t>(perm[i])];
      src_strides[i] = in_strides[static_cast<size_t>(perm[i])];
    }
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
    tensor_ops::strided_copy_dense(data.dtype(), data.raw_data(), src_strides, y.raw_data(), out,
                                   ctx.thread_pool());
  }

 private:
  bool has_perm_ = false;
  std::vector<int64_t> perm_;
};

}  // namespace

void register_transpose_kernels(KernelRegistry& r) {
  r.add_versions("Transpose", {1, 13, 21, 23}, make_factory<Transpose>(), kTensorMaxOpset);
}

}  // namespace ortlite
