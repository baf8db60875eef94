// Concat and Split: slab copies along an axis (memcpy of contiguous runs, split over the
// pool when large).
#include <algorithm>
#include <string>
#include <type_traits>

#include "providers/cpu/tensor/tensor_kernels.h"

namespace ortlite {
namespace {

using tensor_ops::ints_to_string;

// `count` runs of w elements, src_step and dst_step apart: element moves, no memcpy call
// per run. Sizes come by value: no store through dst can change them.
template <typename T>
void copy_short_runs(const T* src, int64_t src_step, T* dst, int64_t dst_step, int64_t w,
                     int64_t count) {
  for (int64_t r = 0; r < count; ++r, src += src_step, dst += dst_step) {
    for (int64_t j = 0; j < w; ++j) dst[j] = src[j];
  }
}

class Concat final : public Kernel {
 public:
  explicit Concat(const KernelInfo& info) : opset_(info.opset()) {
    if (opset_ >= 4 && !info.has_attr("axis")) {
      info.fail(StatusCode::kInvalidGraph, "missing attribute 'axis'");
    }
    axis_ = info.attr_int("axis", 1);
  }

  void compute(KernelContext& ctx) const override {
    const size_t n = ctx.num_inputs();
    if (n == 0) ctx.fail(StatusCode::kInvalidArgument, "needs at least one input");
    std::vector<const Tensor*> ins(n);
    for (size_t i = 0; i < n; ++i) ins[i] = &ctx.required_input(i);
    // The reference shape is the first input with elements (inputs without elements whose
    // shape does not fit are skipped, as PyTorch's cat does for a 1-D empty tensor).
    const Tensor* ref = ins[0];
    for (const Tensor* t : ins) {
      if (t->numel() > 0) {
        ref = t;
        break;
      }
    }
    const DataType dt = ref->dtype();
    const int64_t rank = static_cast<int64_t>(ref->rank());
    if (rank == 0) {
      ctx.fail(StatusCode::kInvalidArgument, "cannot concatenate scalars (rank-0 inputs)");
    }
    if (axis_ < -rank || axis_ >= rank) {
      ctx.fail(StatusCode::kInvalidArgument, "attribute 'axis' = " + std::to_string(axis_) +
                                                 " is out of range [" + std::to_string(-rank) +
                                                 ", " + std::to_string(rank - 1) +
                                                 "] for inputs of rank " + std::to_string(rank));
    }
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    const Shape& rs = ref->shape();
    std::vector<const Tensor*> parts;
    Shape out = rs;
    out[axis] = 0;
    for (size_t i = 0; i < n; ++i) {
      const Tensor* t = ins[i];
      if (t->dtype() != dt) {
        ctx.fail(StatusCode::kInvalidArgument, "input " + std::to_string(i) + " has element type " +
                                                   dtype_name(t->dtype()) +
                                                   " but the other inputs have " + dtype_name(dt));
      }
      bool fits = t->rank() == rs.size();
      for (size_t d = 0; fits && d < rs.size(); ++d) {
        if (d != axis && t->dim(d) != rs[d]) fits = false;
      }
      if (!fits) {
        if (t->numel() == 0) continue;
        ctx.fail(StatusCode::kInvalidArgument,
                 "input " + std::to_string(i) + " has shape " + shape_to_string(t->shape()) +
                     " which does not match " + shape_to_string(rs) +
                     " in the dims other than axis " + std::to_string(axis));
      }
      if (__builtin_add_overflow(out[axis], t->dim(axis), &out[axis])) {
        ctx.fail(StatusCode::kInvalidArgument, "concatenated dimension overflows");
      }
      parts.push_back(t);
    }
    tensor_ops::checked_numel(ctx, dt, out, "Concat");
    Tensor& y = ctx.allocate_output(0, dt, out);
    if (y.numel() == 0) return;
    const int64_t outer = tensor_ops::dims_product(out, 0, axis);
    const int64_t inner = tensor_ops::dims_product(out, axis + 1, out.size());
    const int64_t row = out[axis] * inner;
    const size_t es = dtype_size(dt);
    const size_t k = parts.size();
    std::vector<int64_t> slab(k), offset(k);
    int64_t off = 0;
    for (size_t i = 0; i < k; ++i) {
      slab[i] = parts[i]->dim(axis) * inner;
      offset[i] = off;
      off += slab[i];
    }
    char* dst = static_cast<char*>(y.raw_data());
    if (outer == 1) {
      for (size_t i = 0; i < k; ++i) {
        tensor_ops::parallel_copy(dt, parts[i]->raw_data(), dst + offset[i] * es, slab[i],
                                  ctx.thread_pool());
      }
      return;
    }
    int64_t widest = 0;
    for (size_t i = 0; i < k; ++i) widest = std::max(widest, slab[i]);
    if (dt != DataType::kString && widest * static_cast<int64_t>(es) <= 64) {
      // Short slabs (a few values per row on the last axis): a memcpy call per slab would
      // cost more than the copy, so each row is assembled with element moves.
      tensor_ops::dispatch_storage(dt, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (!std::is_same_v<T, std::string>) {
          T* d = reinterpret_cast<T*>(dst);
          parallel_for(ctx.thread_pool(), outer, static_cast<double>(row),
                       [&](int64_t b, int64_t e) {
                         for (size_t i = 0; i < k; ++i) {
                           const int64_t w = slab[i];
                           const T* s = static_cast<const T*>(parts[i]->raw_data()) + b * w;
                           T* o = d + b * row + offset[i];
                           copy_short_runs(s, w, o, row, w, e - b);
                         }
                       });
        }
      });
      return;
    }
    const int64_t items = outer * static_cast<int64_t>(k);
    parallel_for(ctx.thread_pool(), items, static_cast<double>(row) / static_cast<double>(k),
                 [&](int64_t b, int64_t e) {
                   for (int64_t it = b; it < e; ++it) {
                     const int64_t o = it / static_cast<int64_t>(k);
                     const size_t i = static_cast<size_t>(it % static_cast<int64_t>(k));
                     const char* src = static_cast<const char*>(parts[i]->raw_data()) +
                                       o * slab[i] * static_cast<int64_t>(es);
                     tensor_ops::copy_elements(dt, src, dst + (o * row + offset[i]) * es, slab[i]);
                   }
                 });
  }

 private:
  int64_t opset_;
  int64_t axis_ = 1;
};

class Split final : public Kernel {
 public:
  explicit Split(const KernelInfo& info) : opset_(info.opset()), axis_(info.attr_int("axis", 0)) {
    if (opset_ < 13 && info.has_attr("split")) {
      has_split_attr_ = true;
      split_attr_ = info.attr_ints("split");
    }
    if (opset_ >= 18 && info.has_attr("num_outputs")) {
      num_outputs_ = info.attr_int("num_outputs", 0);
      if (num_outputs_ < 1) {
        info.fail(StatusCode::kInvalidArgument,
                  "attribute 'num_outputs' = " + std::to_string(num_outputs_) + " must be >= 1");
      }
      if (num_outputs_ != static_cast<int64_t>(info.num_outputs())) {
        info.fail(StatusCode::kInvalidArgument,
                  "attribute 'num_outputs' = " + std::to_string(num_outputs_) +
                      " does not match the node's " + std::to_string(info.num_outputs()) +
                      " outputs");
      }
      if (info.has_input(1)) {
        info.fail(StatusCode::kInvalidArgument,
                  "input 'split' and attribute 'num_outputs' cannot both be given");
      }
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.required_input(0);
    const int64_t rank = static_cast<int64_t>(data.rank());
    if (axis_ < -rank || axis_ >= rank) {
      ctx.fail(StatusCode::kInvalidArgument, "attribute 'axis' = " + std::to_string(axis_) +
                                                 " is out of range for input shape " +
                                                 shape_to_string(data.shape()));
    }
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    const Shape& in = data.shape();
    const int64_t dim = in[axis];
    const size_t k = ctx.num_outputs();
    std::vector<int64_t> sizes;
    bool given = false;
    if (opset_ < 13 && has_split_attr_) {
      sizes = split_attr_;
      given = true;
    } else if (opset_ >= 13 && ctx.input(1) != nullptr) {
      sizes = tensor_ops::read_int_list(ctx, *ctx.input(1), "split");
      given = true;
    }
    if (given) {
      if (sizes.size() != k) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "'split' " + ints_to_string(sizes) + " has " + std::to_string(sizes.size()) +
                     " entries but the node has " + std::to_string(k) + " outputs");
      }
      int64_t sum = 0;
      for (int64_t s : sizes) {
        if (s < 0 || __builtin_add_overflow(sum, s, &sum)) {
          ctx.fail(StatusCode::kInvalidArgument,
                   "'split' " + ints_to_string(sizes) + " has an invalid (negative) size");
        }
      }
      if (sum != dim) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "'split' " + ints_to_string(sizes) + " sums to " + std::to_string(sum) +
                     " but dimension " + std::to_string(axis) + " of input shape " +
                     shape_to_string(in) + " is " + std::to_string(dim));
      }
    } else if (num_outputs_ > 0) {
      const int64_t n = num_outputs_;
      const int64_t chunk = (dim + n - 1) / n;
      const int64_t last = dim - chunk * (n - 1);
      if (last < 0 || (last == 0 && chunk > 0)) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "cannot split dimension " + std::to_string(dim) + " of input shape " +
                     shape_to_string(in) + " into " + std::to_string(n) +
                     " outputs of size ceil(dim / num_outputs) with a smaller last chunk");
      }
      sizes.assign(static_cast<size_t>(n), chunk);
      sizes.back() = last;
    } else {
      if (k == 0 || dim % static_cast<int64_t>(k) != 0) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "dimension " + std::to_string(dim) + " of input shape " + shape_to_string(in) +
                     " is not evenly splittable into " + std::to_string(k) + " outputs");
      }
      sizes.assign(k, dim / static_cast<int64_t>(k));
    }

    const DataType dt = data.dtype();
    const size_t es = dtype_size(dt);
    const int64_t outer = tensor_ops::dims_product(in, 0, axis);
    const int64_t inner = tensor_ops::dims_product(in, axis + 1, in.size());
    const int64_t row = dim * inner;
    std::vector<char*> dst(k);
    std::vector<int64_t> slab(k), offset(k);
    int64_t off = 0;
    for (size_t i = 0; i < k; ++i) {
      Shape s = in;
      s[axis] = sizes[i];
      dst[i] = static_cast<char*>(ctx.allocate_output(i, dt, s).raw_data());
      slab[i] = sizes[i] * inner;
      offset[i] = off;
      off += slab[i];
    }
    if (data.numel() == 0) return;
    const char* src = static_cast<const char*>(data.raw_data());
    if (outer == 1) {
      for (size_t i = 0; i < k; ++i) {
        tensor_ops::parallel_copy(dt, src + offset[i] * es, dst[i], slab[i], ctx.thread_pool());
      }
      return;
    }
    int64_t widest = 0;
    for (size_t i = 0; i < k; ++i) widest = std::max(widest, slab[i]);
    if (dt != DataType::kString && widest * static_cast<int64_t>(es) <= 64) {
      // Short slabs (a few values per row on the last axis): a memcpy call per slab would
      // cost more than the copy, so each row is split with element moves.
      tensor_ops::dispatch_storage(dt, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (!std::is_same_v<T, std::string>) {
          const T* from = reinterpret_cast<const T*>(src);
          parallel_for(ctx.thread_pool(), outer, static_cast<double>(row),
                       [&](int64_t b, int64_t e) {
                         for (size_t i = 0; i < k; ++i) {
                           const int64_t w = slab[i];
                           const T* s = from + b * row + offset[i];
                           T* o = reinterpret_cast<T*>(dst[i]) + b * w;
                           copy_short_runs(s, row, o, w, w, e - b);
                         }
                       });
        }
      });
      return;
    }
    const int64_t items = outer * static_cast<int64_t>(k);
    parallel_for(ctx.thread_pool(), items, static_cast<double>(row) / static_cast<double>(k),
                 [&](int64_t b, int64_t e) {
                   for (int64_t it = b; it < e; ++it) {
                     const int64_t o = it / static_cast<int64_t>(k);
                     const size_t i = static_cast<size_t>(it % static_cast<int64_t>(k));
                     tensor_ops::copy_elements(dt, src + (o * row + offset[i]) * es,
                                               dst[i] + o * slab[i] * es, slab[i]);
                   }
                 });
  }

 private:
  int64_t opset_;
  int64_t axis_;
  bool has_split_attr_ = false;
  std::vector<int64_t> split_attr_;
  int64_t num_outputs_ = 0;
};

}  // namespace

void register_concat_split_kernels(KernelRegistry& r) {
  r.add_versions("Concat", {1, 4, 11, 13}, make_factory<Concat>());
  r.add_versions("Split", {2, 11, 13, 18}, make_factory<Split>());
}

}  // namespace ortlite
