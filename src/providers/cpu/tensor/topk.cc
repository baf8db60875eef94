// TopK (opsets 1, 10, 11, 24), added for ONNX node conformance. K is an attribute at
// opset 1 and an input from opset 10; `largest` and `sorted` exist from opset 11. Ties
// keep the lower index first (the spec's and onnxruntime's order), and the result is
// always sorted: with sorted = 0 any order is allowed, so the sorted one is as good.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "providers/cpu/tensor/tensor_kernels.h"

namespace ortlite {
namespace {

// NaN ranks above every number (numpy's sort order), which keeps the comparison a strict
// weak ordering that std::sort needs.
template <typename K>
bool key_greater(K a, K b) {
  if constexpr (std::is_floating_point_v<K>) {
    if (std::isnan(a)) return !std::isnan(b);
    if (std::isnan(b)) return false;
  }
  return a > b;
}

class TopK final : public Kernel {
 public:
  explicit TopK(const KernelInfo& info)
      : axis_(info.attr_int("axis", -1)),
        largest_(info.opset() < 11 || info.attr_int("largest", 1) != 0),
        k_attr_(info.opset() < 10 ? info.attr_int_required("k") : -1),
        k_from_input_(info.opset() >= 10) {
    if (info.opset() >= 11) {
      const int64_t s = info.attr_int("sorted", 1);
      const int64_t l = info.attr_int("largest", 1);
      if ((s != 0 && s != 1) || (l != 0 && l != 1)) {
        info.fail(StatusCode::kInvalidArgument, "attributes 'largest' and 'sorted' must be 0 or 1");
      }
    }
    if (!k_from_input_ && k_attr_ < 0) {
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'k' = " + std::to_string(k_attr_) + " must be >= 0");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const int64_t rank = static_cast<int64_t>(x.rank());
    if (rank == 0) ctx.fail(StatusCode::kInvalidArgument, "input 'X' must have rank >= 1");
    if (axis_ < -rank || axis_ >= rank) {
      ctx.fail(StatusCode::kInvalidArgument, "attribute 'axis' = " + std::to_string(axis_) +
                                                 " is out of range for rank " +
                                                 std::to_string(rank));
    }
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    int64_t k = k_attr_;
    if (k_from_input_) {
      const Tensor& kt = ctx.required_input(1);
      if ((kt.dtype() != DataType::kInt64 && kt.dtype() != DataType::kInt32) || kt.numel() != 1 ||
          kt.rank() > 1) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "input 'K' must be a 1-D int64 tensor holding one value, got " +
                     std::string(dtype_name(kt.dtype())) + " " + shape_to_string(kt.shape()));
      }
      k = tensor_to_int64s(kt)[0];
      if (k < 0) {
        ctx.fail(StatusCode::kInvalidArgument, "input 'K' = " + std::to_string(k) + " is negative");
      }
    }
    const int64_t n = x.dim(axis);
    if (k > n) {
      ctx.fail(StatusCode::kInvalidArgument,
               "K = " + std::to_string(k) + " is larger than the dimension " + std::to_string(n) +
                   " of axis " + std::to_string(axis) + " of input 'X' " +
                   shape_to_string(x.shape()));
    }
    Shape out_shape = x.shape();
    out_shape[axis] = k;
    Tensor& values = ctx.allocate_output(0, x.dtype(), out_shape);
    Tensor* indices =
        ctx.num_outputs() > 1 ? &ctx.allocate_output(1, DataType::kInt64, out_shape) : nullptr;
    if (values.numel() == 0) return;
    const int64_t outer = tensor_ops::dims_product(x.shape(), 0, axis);
    const int64_t inner = tensor_ops::dims_product(x.shape(), axis + 1, x.rank());
    const bool largest = largest_;
    auto run = [&](auto tag) {
      using T = decltype(tag);
      using K =
          std::conditional_t<std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>, float, T>;
      const T* src = x.data<T>();
      T* vdst = values.data<T>();
      int64_t* idst = indices ? indices->data<int64_t>() : nullptr;
      const double cost = static_cast<double>(n) * (std::log2(static_cast<double>(n)) + 2);
      parallel_for(ctx.thread_pool(), outer * inner, cost, [&](int64_t begin, int64_t end) {
        std::vector<K> key(static_cast<size_t>(n));
        std::vector<int64_t> order(static_cast<size_t>(n));
        for (int64_t row = begin; row < end; ++row) {
          const int64_t o = row / inner, i = row % inner;
          const T* s = src + o * n * inner + i;
          for (int64_t j = 0; j < n; ++j) {
            key[static_cast<size_t>(j)] = static_cast<K>(s[j * inner]);
            order[static_cast<size_t>(j)] = j;
          }
          auto before = [&](int64_t a, int64_t b) {
            const K va = key[static_cast<size_t>(a)], vb = key[static_cast<size_t>(b)];
            const bool gt = largest ? key_greater(va, vb) : key_greater(vb, va);
            if (gt) return true;
            const bool lt = largest ? key_greater(vb, va) : key_greater(va, vb);
            return !lt && a < b;
          };
          if (k < n / 2) {
            std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
          } else {
            std::sort(order.begin(), order.end(), before);
          }
          T* vd = vdst + o * k * inner + i;
          int64_t* id = idst ? idst + o * k * inner + i : nullptr;
          for (int64_t j = 0; j < k; ++j) {
            const int64_t from = order[static_cast<size_t>(j)];
            vd[j * inner] = s[from * inner];
            if (id) id[j * inner] = from;
          }
        }
      });
    };
    return ORTLITE_DISPATCH_ARITHMETIC(x.dtype(), "input 'X'", run);
  }

 private:
  int64_t axis_;
  bool largest_;
  int64_t k_attr_;
  bool k_from_input_;
};

}  // namespace

void register_topk_kernels(KernelRegistry& r) {
  // Opset 24 only adds element types.
  r.add_versions("TopK", {1, 10, 11, 24}, make_factory<TopK>());
}

}  // namespace ortlite
