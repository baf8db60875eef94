// Gather: out = data[:axis] + indices.shape + data[axis+1:]; int32/int64 indices,
// negative indices count from the end; an out-of-range index is kInvalidArgument.
#include <algorithm>
#include <cstring>

#include "providers/cpu/tensor/tensor_kernels.h"

namespace ortlite {
namespace {

class Gather final : public Kernel {
 public:
  explicit Gather(const KernelInfo& info) : axis_(info.attr_int("axis", 0)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.required_input(0);
    const Tensor& indices = ctx.required_input(1);
    if (indices.dtype() != DataType::kInt64 && indices.dtype() != DataType::kInt32) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input 'indices' must be int32 or int64, got ") +
                   dtype_name(indices.dtype()));
    }
    const Shape& in = data.shape();
    const int64_t rank = static_cast<int64_t>(in.size());
    if (rank == 0) ctx.fail(StatusCode::kInvalidArgument, "input 'data' must have rank >= 1");
    if (axis_ < -rank || axis_ >= rank) {
      ctx.fail(StatusCode::kInvalidArgument, "attribute 'axis' = " + std::to_string(axis_) +
                                                 " is out of range [" + std::to_string(-rank) +
                                                 ", " + std::to_string(rank - 1) +
                                                 "] for data shape " + shape_to_string(in));
    }
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    const int64_t dim = in[axis];
    std::vector<int64_t> idx = tensor_to_int64s(indices);
    for (int64_t& v : idx) {
      if (v < -dim || v >= dim) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "index " + std::to_string(v) + " in input 'indices' is out of range [" +
                     std::to_string(-dim) + ", " + std::to_string(dim - 1) + "] (axis " +
                     std::to_string(axis) + " of data shape " + shape_to_string(in) + ")");
      }
      if (v < 0) v += dim;
    }
    Shape out(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(axis));
    out.insert(out.end(), indices.shape().begin(), indices.shape().end());
    out.insert(out.end(), in.begin() + static_cast<std::ptrdiff_t>(axis) + 1, in.end());
    tensor_ops::checked_numel(ctx, data.dtype(), out, "Gather");
    Tensor& y = ctx.allocate_output(0, data.dtype(), out);
    if (y.numel() == 0) return;
    const int64_t outer = tensor_ops::dims_product(in, 0, axis);
    const int64_t inner = tensor_ops::dims_product(in, axis + 1, in.size());
    const int64_t n = static_cast<int64_t>(idx.size());
    tensor_ops::dispatch_storage(data.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* src = static_cast<const T*>(data.raw_data());
      T* dst = static_cast<T*>(y.raw_data());
      const int64_t* ix = idx.data();
      // The (outer, index) position is stepped rather than divided out per row: with
      // inner == 1 (gathering along the last axis) a division per element would dominate.
      parallel_for(ctx.thread_pool(), outer * n, static_cast<double>(inner),
                   [&](int64_t b, int64_t e) {
                     int64_t o = b / n, j = b % n;
                     for (int64_t it = b; it < e;) {
                       const T* so = src + o * dim * inner;
                       const int64_t stop = std::min(e - it, n - j);
                       T* d = dst + it * inner;
                       if constexpr (std::is_same_v<T, std::string>) {
                         for (int64_t q = 0; q < stop; ++q) {
                           const T* s = so + ix[j + q] * inner;
                           for (int64_t k = 0; k < inner; ++k) d[q * inner + k] = s[k];
                         }
                       } else if (inner == 1) {
                         for (int64_t q = 0; q < stop; ++q) d[q] = so[ix[j + q]];
                       } else {
                         for (int64_t q = 0; q < stop; ++q) {
                           std::memcpy(d + q * inner, so + ix[j + q] * inner,
                                       static_cast<size_t>(inner) * sizeof(T));
                         }
                       }
                       it += stop;
                       j = 0;
                       ++o;
                     }
                   });
    });
  }

 private:
  int64_t axis_;
};

}  // namespace

void register_gather_kernels(KernelRegistry& r) {
  r.add_versions("Gather", {1, 11, 13}, make_factory<Gather>());
}

}  // namespace ortlite
