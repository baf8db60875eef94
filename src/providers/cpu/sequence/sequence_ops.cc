// Sequence and optional operators: SequenceEmpty / Construct / Insert / At / Erase / Length,
// SplitToSequence, ConcatFromSequence, Optional, OptionalHasElement, OptionalGetElement.
// A sequence is an immutable list of tensors shared between values; an operator that
// "modifies" one builds a new list of the same tensors (no element data is copied).
#include <algorithm>
#include <string>
#include <vector>

#include "providers/cpu/tensor/tensor_kernels.h"
#include "ortlite/kernel.h"

namespace ortlite {

namespace {

const Value& sequence_input(const KernelContext& ctx, size_t i) {
  const Value* v = ctx.input_value(i);
  if (!v || !v->defined()) ctx.fail(StatusCode::kInvalidArgument, "the input sequence is missing");
  if (!v->is_sequence()) {
    ctx.fail(
        StatusCode::kInvalidArgument,
        "input " + std::to_string(i) + " must be a sequence of tensors, got a " + v->type_string());
  }
  return *v;
}

// A position input (int32 / int64 scalar) checked against [-n, n - 1], or [-n, n] when
// `allow_end` (insertion); returns it normalized.
int64_t position(const KernelContext& ctx, const Tensor& t, int64_t n, bool allow_end) {
  if (t.numel() != 1 || (t.dtype() != DataType::kInt64 && t.dtype() != DataType::kInt32)) {
    ctx.fail(StatusCode::kInvalidArgument, "position must be an int32 or int64 scalar, got " +
                                               std::string(dtype_name(t.dtype())) + " of shape " +
                                               shape_to_string(t.shape()));
  }
  const int64_t p = t.dtype() == DataType::kInt64 ? *t.data<int64_t>() : *t.data<int32_t>();
  const int64_t hi = allow_end ? n : n - 1;
  if (p < -n || p > hi) {
    ctx.fail(StatusCode::kInvalidArgument, "position " + std::to_string(p) +
                                               " is out of range for a sequence of length " +
                                               std::to_string(n));
  }
  return p < 0 ? p + n : p;
}

void check_elem(const KernelContext& ctx, DataType seq_elem, const Tensor& t) {
  if (seq_elem != DataType::kUndefined && t.dtype() != seq_elem) {
    ctx.fail(StatusCode::kInvalidArgument, std::string("a tensor(") + dtype_name(t.dtype()) +
                                               ") cannot join a sequence of tensor(" +
                                               dtype_name(seq_elem) + ")");
  }
}

class SequenceEmpty final : public Kernel {
 public:
  explicit SequenceEmpty(const KernelInfo& info)
      : dtype_(
            static_cast<DataType>(info.attr_int("dtype", static_cast<int64_t>(DataType::kFloat)))) {
    if (dtype_size(dtype_) == 0 && dtype_ != DataType::kString)
      info.fail(StatusCode::kInvalidGraph, "dtype " + std::to_string(static_cast<int>(dtype_)) +
                                               " is not a tensor element type");
  }
  void compute(KernelContext& ctx) const override {
    ctx.set_output_value(0, Value::sequence({}, dtype_));
  }

 private:
  DataType dtype_;
};

class SequenceConstruct final : public Kernel {
 public:
  explicit SequenceConstruct(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    std::vector<Tensor> items;
    DataType elem = DataType::kUndefined;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& t = ctx.required_input(i);
      if (i == 0) elem = t.dtype();
      check_elem(ctx, elem, t);
      items.push_back(t);
    }
    if (items.empty()) ctx.fail(StatusCode::kInvalidArgument, "needs at least one input");
    ctx.set_output_value(0, Value::sequence(std::move(items), elem));
  }
};

class SequenceInsert final : public Kernel {
 public:
  explicit SequenceInsert(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Value& seq = sequence_input(ctx, 0);
    const Tensor& t = ctx.required_input(1);
    check_elem(ctx, seq.elem_type(), t);
    std::vector<Tensor> items = seq.items();
    const int64_t n = static_cast<int64_t>(items.size());
    const Tensor* pos = ctx.input(2);
    const int64_t p = pos ? position(ctx, *pos, n, true) : n;
    items.insert(items.begin() + p, t);
    ctx.set_output_value(0, Value::sequence(std::move(items), t.dtype()));
  }
};

class SequenceAt final : public Kernel {
 public:
  explicit SequenceAt(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Value& seq = sequence_input(ctx, 0);
    const int64_t n = static_cast<int64_t>(seq.items().size());
    const int64_t p = position(ctx, ctx.required_input(1), n, false);
    ctx.set_output(0, seq.items()[static_cast<size_t>(p)]);
  }
};

class SequenceErase final : public Kernel {
 public:
  explicit SequenceErase(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Value& seq = sequence_input(ctx, 0);
    std::vector<Tensor> items = seq.items();
    const int64_t n = static_cast<int64_t>(items.size());
    if (n == 0) ctx.fail(StatusCode::kInvalidArgument, "cannot erase from an empty sequence");
    const Tensor* pos = ctx.input(1);
    const int64_t p = pos ? position(ctx, *pos, n, false) : n - 1;
    items.erase(items.begin() + p);
    ctx.set_output_value(0, Value::sequence(std::move(items), seq.elem_type()));
  }
};

class SequenceLength final : public Kernel {
 public:
  explicit SequenceLength(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Value& seq = sequence_input(ctx, 0);
    Tensor& out = ctx.allocate_output(0, DataType::kInt64, {});
    *out.data<int64_t>() = static_cast<int64_t>(seq.items().size());
  }
};

// Copies [start, start + len) along `axis` of t into a new tensor.
Tensor slice_along(const Tensor& t, int64_t axis, int64_t start, int64_t len, bool keep_axis) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= t.dim(static_cast<size_t>(d));
  for (size_t d = static_cast<size_t>(axis) + 1; d < t.rank(); ++d) inner *= t.dim(d);
  Shape shape = t.shape();
  shape[static_cast<size_t>(axis)] = len;
  if (!keep_axis) shape.erase(shape.begin() + axis);
  Tensor out = Tensor::empty(t.dtype(), shape);
  const int64_t dim = t.dim(static_cast<size_t>(axis));
  const size_t esz = dtype_size(t.dtype());
  for (int64_t o = 0; o < outer; ++o) {
    const char* src = static_cast<const char*>(t.raw_data()) +
                      static_cast<size_t>((o * dim + start) * inner) * esz;
    char* dst = static_cast<char*>(out.raw_data()) + static_cast<size_t>(o * len * inner) * esz;
    tensor_ops::copy_elements(t.dtype(), src, dst, len * inner);
  }
  return out;
}

class SplitToSequence final : public Kernel {
 public:
  explicit SplitToSequence(const KernelInfo& info)
      : axis_(info.attr_int("axis", 0)), keepdims_(info.attr_int("keepdims", 1) != 0) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    if (x.rank() == 0) ctx.fail(StatusCode::kInvalidArgument, "cannot split a scalar");
    const int64_t axis = normalize_axis(axis_, static_cast<int64_t>(x.rank()));
    const int64_t dim = x.dim(static_cast<size_t>(axis));
    const Tensor* split = ctx.input(1);
    std::vector<int64_t> sizes;
    bool keep = true;
    if (!split) {
      sizes.assign(static_cast<size_t>(dim), 1);
      keep = keepdims_;
    } else {
      std::vector<int64_t> v = tensor_to_int64s(*split);
      if (split->rank() == 0) {
        const int64_t chunk = v.at(0);
        if (chunk <= 0)
          ctx.fail(StatusCode::kInvalidArgument,
                   "split must be positive, got " + std::to_string(chunk));
        for (int64_t s = 0; s < dim; s += chunk) sizes.push_back(std::min(chunk, dim - s));
      } else {
        if (split->rank() != 1)
          ctx.fail(StatusCode::kInvalidArgument, "split must be a scalar or a 1-D tensor");
        int64_t total = 0;
        for (int64_t s : v) {
          if (s < 0) ctx.fail(StatusCode::kInvalidArgument, "split sizes must not be negative");
          total += s;
        }
        if (total != dim) {
          ctx.fail(StatusCode::kInvalidArgument, "split sizes sum to " + std::to_string(total) +
                                                     " but the axis has length " +
                                                     std::to_string(dim));
        }
        sizes = v;
      }
    }
    std::vector<Tensor> items;
    int64_t start = 0;
    for (int64_t len : sizes) {
      items.push_back(slice_along(x, axis, start, len, keep));
      start += len;
    }
    ctx.set_output_value(0, Value::sequence(std::move(items), x.dtype()));
  }

 private:
  int64_t axis_;
  bool keepdims_;
};

class ConcatFromSequence final : public Kernel {
 public:
  explicit ConcatFromSequence(const KernelInfo& info)
      : axis_(info.attr_int_required("axis")), new_axis_(info.attr_int("new_axis", 0) != 0) {}
  void compute(KernelContext& ctx) const override {
    const Value& seq = sequence_input(ctx, 0);
    const std::vector<Tensor>& items = seq.items();
    if (items.empty()) ctx.fail(StatusCode::kInvalidArgument, "the sequence is empty");
    const Tensor& first = items[0];
    const int64_t rank = static_cast<int64_t>(first.rank());
    const int64_t axis = normalize_axis(axis_, new_axis_ ? rank + 1 : rank);
    // Each item viewed with the concatenation axis present (length 1 when stacking).
    int64_t total = 0;
    for (const Tensor& t : items) {
      if (t.dtype() != first.dtype() || static_cast<int64_t>(t.rank()) != rank)
        ctx.fail(StatusCode::kInvalidArgument, "the sequence's tensors differ in type or rank");
      for (int64_t d = 0; d < rank; ++d) {
        const bool is_axis = !new_axis_ && d == axis;
        if (!is_axis && t.dim(static_cast<size_t>(d)) != first.dim(static_cast<size_t>(d))) {
          ctx.fail(StatusCode::kInvalidArgument, "shapes " + shape_to_string(first.shape()) +
                                                     " and " + shape_to_string(t.shape()) +
                                                     " cannot be concatenated on axis " +
                                                     std::to_string(axis));
        }
      }
      total += new_axis_ ? 1 : t.dim(static_cast<size_t>(axis));
    }
    Shape shape = first.shape();
    if (new_axis_) {
      shape.insert(shape.begin() + axis, total);
    } else {
      shape[static_cast<size_t>(axis)] = total;
    }
    Tensor& out = ctx.allocate_output(0, first.dtype(), shape);
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
    const size_t esz = dtype_size(first.dtype());
    const int64_t out_row = out.numel() / std::max<int64_t>(outer, 1);
    int64_t offset = 0;  // elements into each output row
    for (const Tensor& t : items) {
      const int64_t row = outer ? t.numel() / std::max<int64_t>(outer, 1) : 0;
      for (int64_t o = 0; o < outer; ++o) {
        const char* src =
            static_cast<const char*>(t.raw_data()) + static_cast<size_t>(o * row) * esz;
        char* dst =
            static_cast<char*>(out.raw_data()) + static_cast<size_t>(o * out_row + offset) * esz;
        tensor_ops::copy_elements(first.dtype(), src, dst, row);
      }
      offset += row;
    }
  }

 private:
  int64_t axis_;
  bool new_axis_;
};

class OptionalOp final : public Kernel {
 public:
  explicit OptionalOp(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Value* v = ctx.input_value(0);
    ctx.set_output_value(0, v && v->defined() ? *v : Value::none());
  }
};

class OptionalHasElement final : public Kernel {
 public:
  explicit OptionalHasElement(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Value* v = ctx.input_value(0);
    Tensor& out = ctx.allocate_output(0, DataType::kBool, {});
    *out.data<bool>() = v && v->defined() && !v->is_none();
  }
};

class OptionalGetElement final : public Kernel {
 public:
  explicit OptionalGetElement(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Value* v = ctx.input_value(0);
    if (!v || !v->defined() || v->is_none())
      ctx.fail(StatusCode::kInvalidArgument, "the optional input has no element");
    ctx.set_output_value(0, *v);
  }
};

}  // namespace

void register_sequence_ops_kernels(KernelRegistry& r) {
  r.add("", "SequenceEmpty", 11, kMaxOpset, make_factory<SequenceEmpty>());
  r.add("", "SequenceConstruct", 11, kMaxOpset, make_factory<SequenceConstruct>());
  r.add("", "SequenceInsert", 11, kMaxOpset, make_factory<SequenceInsert>());
  r.add("", "SequenceAt", 11, kMaxOpset, make_factory<SequenceAt>());
  r.add("", "SequenceErase", 11, kMaxOpset, make_factory<SequenceErase>());
  r.add("", "SequenceLength", 11, kMaxOpset, make_factory<SequenceLength>());
  r.add("", "SplitToSequence", 11, kMaxOpset, make_factory<SplitToSequence>());
  r.add("", "ConcatFromSequence", 11, kMaxOpset, make_factory<ConcatFromSequence>());
  r.add("", "Optional", 15, kMaxOpset, make_factory<OptionalOp>());
  r.add("", "OptionalHasElement", 15, kMaxOpset, make_factory<OptionalHasElement>());
  r.add("", "OptionalGetElement", 15, kMaxOpset, make_factory<OptionalGetElement>());
}

}  // namespace ortlite
