// Kernels added for ONNX node conformance: CenterCropPad, ReverseSequence, Unique.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "providers/cpu/tensor/tensor_kernels.h"

namespace ortlite {
namespace {

// CenterCropPad(input, shape): crops or zero-pads the given axes (default: all) to
// `shape`, centred (the extra element of an odd difference goes to the end).
class CenterCropPad final : public Kernel {
 public:
  explicit CenterCropPad(const KernelInfo& info)
      : has_axes_(info.has_attr("axes")), axes_(info.attr_ints("axes")) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const std::vector<int64_t> shape =
        tensor_ops::read_int_list(ctx, ctx.required_input(1), "shape");
    const int64_t rank = static_cast<int64_t>(x.rank());
    std::vector<int64_t> axes;
    if (has_axes_) {
      axes = tensor_ops::normalize_axes(ctx, axes_, rank, "attribute 'axes'");
    } else {
      for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
    }
    if (shape.size() != axes.size()) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'shape' has " + std::to_string(shape.size()) +
                                                 " values for " + std::to_string(axes.size()) +
                                                 " axes");
    }
    const Shape& in = x.shape();
    Shape out = in;
    // out index o on axis d reads input index o + shift[d] (when inside the input).
    std::vector<int64_t> shift(static_cast<size_t>(rank), 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      const size_t a = static_cast<size_t>(axes[i]);
      const int64_t target = shape[i];
      if (target < 0) {
        ctx.fail(StatusCode::kInvalidArgument, "input 'shape' has a negative value");
      }
      out[a] = target;
      if (target < in[a]) {
        shift[a] = (in[a] - target) / 2;
      } else {
        shift[a] = -((target - in[a]) / 2);
      }
    }
    tensor_ops::checked_numel(ctx, x.dtype(), out, "CenterCropPad");
    Tensor& y = ctx.allocate_output(0, x.dtype(), out);
    const int64_t n = y.numel();
    if (n == 0) return;
    const std::vector<int64_t> st = tensor_ops::dense_strides(in);
    tensor_ops::dispatch_storage(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* src = static_cast<const T*>(x.raw_data());
      T* dst = static_cast<T*>(y.raw_data());
      std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
      for (int64_t f = 0; f < n; ++f) {
        int64_t off = 0;
        bool inside = true;
        for (size_t d = 0; d < idx.size(); ++d) {
          const int64_t i = idx[d] + shift[d];
          if (i < 0 || i >= in[d]) {
            inside = false;
            break;
          }
          off += i * st[d];
        }
        if (inside) {
          dst[f] = src[off];
        } else {
          dst[f] = T{};
        }
        for (size_t d = idx.size(); d-- > 0;) {
          if (++idx[d] < out[d]) break;
          idx[d] = 0;
        }
      }
    });
  }

 private:
  bool has_axes_;
  std::vector<int64_t> axes_;
};

// ReverseSequence(input, sequence_lens): reverses the first sequence_lens[b] steps along
// time_axis for each batch entry b along batch_axis (axes 0 and 1).
class ReverseSequence final : public Kernel {
 public:
  explicit ReverseSequence(const KernelInfo& info)
      : batch_axis_(info.attr_int("batch_axis", 1)), time_axis_(info.attr_int("time_axis", 0)) {
    if (!((batch_axis_ == 0 && time_axis_ == 1) || (batch_axis_ == 1 && time_axis_ == 0))) {
      info.fail(StatusCode::kInvalidArgument,
                "attributes 'batch_axis' and 'time_axis' must be 0 and 1 (in either order)");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    if (x.rank() < 2) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'input' must have rank >= 2, got " + shape_to_string(x.shape()));
    }
    const std::vector<int64_t> lens =
        tensor_ops::read_int_list(ctx, ctx.required_input(1), "sequence_lens");
    const int64_t batch = x.dim(static_cast<size_t>(batch_axis_));
    const int64_t steps = x.dim(static_cast<size_t>(time_axis_));
    if (static_cast<int64_t>(lens.size()) != batch) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'sequence_lens' has " +
                                                 std::to_string(lens.size()) +
                                                 " values for a batch of " + std::to_string(batch));
    }
    for (int64_t l : lens) {
      if (l < 0 || l > steps) {
        ctx.fail(StatusCode::kInvalidArgument, "input 'sequence_lens' value " + std::to_string(l) +
                                                   " is out of [0, " + std::to_string(steps) + "]");
      }
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    if (y.numel() == 0) return;
    const int64_t inner = tensor_ops::dims_product(x.shape(), 2, x.rank());
    const int64_t d1 = x.dim(1);
    tensor_ops::dispatch_storage(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* src = static_cast<const T*>(x.raw_data());
      T* dst = static_cast<T*>(y.raw_data());
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t t = 0; t < steps; ++t) {
          const int64_t l = lens[static_cast<size_t>(b)];
          const int64_t ts = t < l ? l - 1 - t : t;
          const int64_t out_row = batch_axis_ == 0 ? b * d1 + t : t * d1 + b;
          const int64_t in_row = batch_axis_ == 0 ? b * d1 + ts : ts * d1 + b;
          for (int64_t e = 0; e < inner; ++e) dst[out_row * inner + e] = src[in_row * inner + e];
        }
      }
    });
  }

 private:
  int64_t batch_axis_, time_axis_;
};

// The bits of a Unique element as a hash key: equal values (as compared with <, so -0
// and +0) give equal keys. Not for NaN (no NaN equals another).
template <typename T>
uint64_t unique_key(T v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return unique_key(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<T>) {
    if (v == T(0)) return 0;  // -0 as +0
    std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t> u;
    std::memcpy(&u, &v, sizeof(u));
    return u;
  } else {
    return static_cast<uint64_t>(v);
  }
}

template <typename T>
bool is_nan_value(T v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return std::isnan(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(v);
  } else {
    (void)v;
    return false;
  }
}

// Groups the n values of x by equal value in one pass over an open-addressing hash
// table: group g (numbered by first occurrence) starts at firsts[g] and has counts[g]
// members; group_of[j] is element j's group.
template <typename T>
void group_by_hash(const T* x, int64_t n, std::vector<int64_t>& firsts,
                   std::vector<int64_t>& counts, std::vector<int64_t>& group_of) {
  std::vector<uint64_t> keys;  // per group
  size_t cap = 1024;
  std::vector<int64_t> slots(cap, -1);
  auto slot_of = [&](uint64_t key) {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
  };
  group_of.resize(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    const uint64_t key = unique_key(x[j]);
    size_t s = slot_of(key);
    while (slots[s] >= 0 && keys[static_cast<size_t>(slots[s])] != key) s = (s + 1) & (cap - 1);
    if (slots[s] < 0) {
      slots[s] = static_cast<int64_t>(keys.size());
      keys.push_back(key);
      firsts.push_back(j);
      counts.push_back(0);
      if (keys.size() * 2 > cap) {  // grow: keep the load under a half
        cap *= 4;
        slots.assign(cap, -1);
        for (size_t g = 0; g < keys.size(); ++g) {
          size_t t = slot_of(keys[g]);
          while (slots[t] >= 0) t = (t + 1) & (cap - 1);
          slots[t] = static_cast<int64_t>(g);
        }
        s = slot_of(key);
        while (keys[static_cast<size_t>(slots[s])] != key) s = (s + 1) & (cap - 1);
      }
    }
    const int64_t g = slots[s];
    group_of[static_cast<size_t>(j)] = g;
    counts[static_cast<size_t>(g)]++;
  }
}

// Unique(X): the distinct elements (or slices along `axis`), sorted ascending
// (lexicographically for slices) or in order of first occurrence; also the index of each
// one's first occurrence, the inverse map and the counts.
class Unique final : public Kernel {
 public:
  // com.microsoft Unique: 1-D input, unique values in order of first occurrence; its outputs
  // are (y, idx, counts): Unique-11's Y, inverse_indices and counts.
  explicit Unique(const KernelInfo& info)
      : contrib_(info.node().domain == "com.microsoft"),
        has_axis_(!contrib_ && info.has_attr("axis")),
        axis_(contrib_ ? 0 : info.attr_int("axis", 0)),
        sorted_(!contrib_ && info.attr_int("sorted", 1) != 0) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    if (contrib_ && x.rank() != 1)
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'x' must be 1-D, got shape " + shape_to_string(x.shape()));
    Shape shape = has_axis_ ? x.shape() : Shape{x.numel()};
    // Output numbers of indices, inverse_indices, counts (-1: none).
    const size_t n_out = ctx.num_outputs();
    const int indices_out = contrib_ ? -1 : 1, inverse_out = contrib_ ? 1 : 2,
              counts_out = contrib_ ? 2 : 3;
    if (shape.empty()) ctx.fail(StatusCode::kInvalidArgument, "input 'X' must have rank >= 1");
    const int64_t axis =
        normalize_axis(axis_, static_cast<int64_t>(shape.size()), "attribute 'axis'");
    const int64_t outer = tensor_ops::dims_product(shape, 0, static_cast<size_t>(axis));
    const int64_t n = shape[static_cast<size_t>(axis)];
    const int64_t inner =
        tensor_ops::dims_product(shape, static_cast<size_t>(axis) + 1, shape.size());
    auto body = [&](auto tag) {
      using T = decltype(tag);
      const T* src = x.data<T>();
      auto val = [&](int64_t j, int64_t o, int64_t i) {
        const T v = src[(o * n + j) * inner + i];
        if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
          return static_cast<float>(v);
        } else {
          return v;
        }
      };
      // -1 / 0 / 1 comparison of slices j and k, in C order.
      auto cmp = [&](int64_t j, int64_t k) {
        for (int64_t o = 0; o < outer; ++o) {
          for (int64_t i = 0; i < inner; ++i) {
            const auto a = val(j, o, i), b = val(k, o, i);
            if (a < b) return -1;
            if (b < a) return 1;
          }
        }
        return 0;
      };
      std::vector<int64_t> group_of, firsts, counts;
      bool by_hash = outer == 1 && inner == 1;
      for (int64_t j = 0; by_hash && j < n; ++j) by_hash = !is_nan_value(src[j]);
      if (by_hash) {
        // One value per slice and no NaN: hash the values (groups come numbered by first
        // occurrence), then sort only the distinct ones.
        group_by_hash(src, n, firsts, counts, group_of);
      } else {
        std::vector<int64_t> order(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j) order[static_cast<size_t>(j)] = j;
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t j, int64_t k) { return cmp(j, k) < 0; });
        // Groups of equal slices, each represented by its first occurrence.
        group_of.resize(static_cast<size_t>(n));
        for (size_t p = 0; p < order.size(); ++p) {
          if (p == 0 || cmp(order[p - 1], order[p]) != 0) {
            firsts.push_back(order[p]);  // stable sort: the lowest index of the group
            counts.push_back(0);
          }
          group_of[static_cast<size_t>(order[p])] = static_cast<int64_t>(firsts.size()) - 1;
          counts.back()++;
        }
      }
      const int64_t u = static_cast<int64_t>(firsts.size());
      // Output order of the groups: sorted, or by first occurrence.
      std::vector<int64_t> perm(static_cast<size_t>(u));
      for (int64_t g = 0; g < u; ++g) perm[static_cast<size_t>(g)] = g;
      if (by_hash && sorted_) {
        std::sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
          return val(firsts[static_cast<size_t>(a)], 0, 0) <
                 val(firsts[static_cast<size_t>(b)], 0, 0);
        });
      } else if (!by_hash && !sorted_) {
        std::sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
          return firsts[static_cast<size_t>(a)] < firsts[static_cast<size_t>(b)];
        });
      }
      std::vector<int64_t> rank_of(static_cast<size_t>(u));
      for (int64_t q = 0; q < u; ++q)
        rank_of[static_cast<size_t>(perm[static_cast<size_t>(q)])] = q;
      Shape yshape = shape;
      yshape[static_cast<size_t>(axis)] = u;
      Tensor& y = ctx.allocate_output(0, x.dtype(), yshape);
      T* dst = y.data<T>();
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t q = 0; q < u; ++q) {
          const int64_t j = firsts[static_cast<size_t>(perm[static_cast<size_t>(q)])];
          for (int64_t i = 0; i < inner; ++i) {
            dst[(o * u + q) * inner + i] = src[(o * n + j) * inner + i];
          }
        }
      }
      if (indices_out > 0 && n_out > static_cast<size_t>(indices_out)) {
        int64_t* p = ctx.allocate_output(1, DataType::kInt64, {u}).data<int64_t>();
        for (int64_t q = 0; q < u; ++q)
          p[q] = firsts[static_cast<size_t>(perm[static_cast<size_t>(q)])];
      }
      if (n_out > static_cast<size_t>(inverse_out)) {
        int64_t* p = ctx.allocate_output(inverse_out, DataType::kInt64, {n}).data<int64_t>();
        for (int64_t j = 0; j < n; ++j) {
          p[j] = rank_of[static_cast<size_t>(group_of[static_cast<size_t>(j)])];
        }
      }
      if (n_out > static_cast<size_t>(counts_out)) {
        int64_t* p = ctx.allocate_output(counts_out, DataType::kInt64, {u}).data<int64_t>();
        for (int64_t q = 0; q < u; ++q)
          p[q] = counts[static_cast<size_t>(perm[static_cast<size_t>(q)])];
      }
    };
    ORTLITE_DISPATCH_NUMERIC(x.dtype(), "Unique", body);
  }

 private:
  bool contrib_;
  bool has_axis_;
  int64_t axis_;
  bool sorted_;
};

}  // namespace

void register_crop_reverse_unique_kernels(KernelRegistry& r) {
  r.add_versions("Unique", {11}, make_factory<Unique>());
  r.add("com.microsoft", "Unique", 1, kMaxOpset, make_factory<Unique>());
  r.add_versions("CenterCropPad", {18}, make_factory<CenterCropPad>());
  r.add_versions("ReverseSequence", {10}, make_factory<ReverseSequence>());
}

}  // namespace ortlite
