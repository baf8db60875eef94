// Control flow: If, Loop, Scan and SequenceMap. Their bodies are planned once at load
// (KernelInfo::subgraph) and run through Subgraph::run; values a body reads from the
// enclosing graph arrive as the node's implicit inputs.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "providers/cpu/tensor/tensor_kernels.h"
#include "ortlite/kernel.h"
#include "ortlite/session.h"

namespace ortlite {

namespace {

void check_terminate(const KernelContext& ctx) {
  const RunConfig* rc = ctx.run_config();
  if (rc && rc->terminate.load(std::memory_order_relaxed))
    ctx.fail(StatusCode::kFail, "Exiting due to terminate flag being set to true");
}

bool scalar_bool(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.numel() != 1 || t.dtype() != DataType::kBool) {
    ctx.fail(StatusCode::kInvalidArgument,
             std::string(what) + " must be a bool tensor with one element, got " +
                 dtype_name(t.dtype()) + " of shape " + shape_to_string(t.shape()));
  }
  return *t.data<bool>();
}

Tensor bool_scalar(bool b) {
  Tensor t = Tensor::empty(DataType::kBool, {});
  *t.data<bool>() = b;
  return t;
}

Tensor int64_scalar(int64_t v) {
  Tensor t = Tensor::empty(DataType::kInt64, {});
  *t.data<int64_t>() = v;
  return t;
}

// Writes `slice` as entry `pos` of `out`, whose shape is slice's with an axis of length
// `len` inserted at `axis`.
void place_slice(Tensor& out, int64_t axis, int64_t pos, int64_t len, const Tensor& slice) {
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= slice.dim(static_cast<size_t>(d));
  const int64_t inner = outer ? slice.numel() / std::max<int64_t>(outer, 1) : 0;
  const size_t esz = dtype_size(slice.dtype());
  for (int64_t o = 0; o < outer; ++o) {
    const char* src =
        static_cast<const char*>(slice.raw_data()) + static_cast<size_t>(o * inner) * esz;
    char* dst =
        static_cast<char*>(out.raw_data()) + static_cast<size_t>((o * len + pos) * inner) * esz;
    tensor_ops::copy_elements(slice.dtype(), src, dst, inner);
  }
}

// Entry `idx` of `x` along `axis`, that axis removed (a copy).
Tensor take_slice(const Tensor& x, int64_t axis, int64_t idx) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(static_cast<size_t>(d));
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.rank(); ++d) inner *= x.dim(d);
  Shape shape = x.shape();
  const int64_t len = shape[static_cast<size_t>(axis)];
  shape.erase(shape.begin() + axis);
  Tensor out = Tensor::empty(x.dtype(), shape);
  const size_t esz = dtype_size(x.dtype());
  for (int64_t o = 0; o < outer; ++o) {
    const char* src =
        static_cast<const char*>(x.raw_data()) + static_cast<size_t>((o * len + idx) * inner) * esz;
    char* dst = static_cast<char*>(out.raw_data()) + static_cast<size_t>(o * inner) * esz;
    tensor_ops::copy_elements(x.dtype(), src, dst, inner);
  }
  return out;
}

// Stacks per-iteration tensors along a new axis. With no iterations the result has shape
// [0] (plus the declared dims when the body declares them) and the declared element type.
Tensor stack(const KernelContext& ctx, const std::vector<Tensor>& slices, int64_t axis,
             bool reverse, const TypeInfo& declared, const std::string& what) {
  if (slices.empty()) {
    DataType dt =
        declared.elem_type == DataType::kUndefined ? DataType::kFloat : declared.elem_type;
    Shape shape{0};
    if (declared.has_shape) {
      for (const Dim& d : declared.dims) shape.push_back(d.has_value ? d.value : 0);
    }
    return Tensor::empty(dt, shape);
  }
  const Tensor& first = slices[0];
  const int64_t rank = static_cast<int64_t>(first.rank());
  axis = normalize_axis(axis, rank + 1, "scan output axis");
  for (const Tensor& s : slices) {
    if (s.dtype() != first.dtype() || s.shape() != first.shape()) {
      ctx.fail(StatusCode::kInvalidArgument, what + " changes shape or type between iterations: " +
                                                 shape_to_string(first.shape()) + " then " +
                                                 shape_to_string(s.shape()));
    }
  }
  const int64_t len = static_cast<int64_t>(slices.size());
  Shape shape = first.shape();
  shape.insert(shape.begin() + axis, len);
  Tensor out = Tensor::empty(first.dtype(), shape);
  for (int64_t i = 0; i < len; ++i)
    place_slice(out, axis, reverse ? len - 1 - i : i, len, slices[static_cast<size_t>(i)]);
  return out;
}

class If final : public Kernel {
 public:
  explicit If(const KernelInfo& info)
      : then_(info.subgraph("then_branch")), else_(info.subgraph("else_branch")) {
    for (const auto* b : {&then_, &else_}) {
      if ((*b)->output_names().size() != info.num_outputs()) {
        info.fail(StatusCode::kInvalidGraph,
                  "a branch has " + std::to_string((*b)->output_names().size()) +
                      " outputs but the node has " + std::to_string(info.num_outputs()));
      }
    }
  }
  void compute(KernelContext& ctx) const override {
    const bool cond = scalar_bool(ctx, ctx.required_input(0), "cond");
    std::vector<Value> outs = (cond ? then_ : else_)->run({}, ctx);
    for (size_t i = 0; i < outs.size() && i < ctx.num_outputs(); ++i)
      ctx.set_output_value(i, std::move(outs[i]));
  }

 private:
  std::shared_ptr<const Subgraph> then_, else_;
};

class Loop final : public Kernel {
 public:
  explicit Loop(const KernelInfo& info) : body_(info.subgraph("body")) {
    n_carried_ = info.num_inputs() < 2 ? 0 : info.num_inputs() - 2;
    const size_t body_in = body_->input_names().size();
    const size_t body_out = body_->output_names().size();
    if (body_in != n_carried_ + 2) {
      info.fail(StatusCode::kInvalidGraph,
                "the body takes " + std::to_string(body_in) + " inputs; expected " +
                    std::to_string(n_carried_ + 2) +
                    " (iteration number, condition and the loop-carried values)");
    }
    if (body_out < n_carried_ + 1) {
      info.fail(StatusCode::kInvalidGraph, "the body returns " + std::to_string(body_out) +
                                               " outputs; expected at least " +
                                               std::to_string(n_carried_ + 1));
    }
    n_scan_ = body_out - 1 - n_carried_;
    if (info.num_outputs() > n_carried_ + n_scan_) {
      info.fail(StatusCode::kInvalidGraph, "the node has more outputs than the body provides");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor* m = ctx.input(0);
    const Tensor* c = ctx.input(1);
    // Without M the loop runs while cond holds; with M also while i < M, so a negative M
    // (as onnxruntime does) runs no iteration.
    const bool has_m = m != nullptr;
    int64_t max_trips = 0;
    if (has_m) {
      if (m->numel() != 1 || (m->dtype() != DataType::kInt64 && m->dtype() != DataType::kInt32))
        ctx.fail(StatusCode::kInvalidArgument, "M must be an int64 scalar");
      max_trips = m->dtype() == DataType::kInt64 ? *m->data<int64_t>() : *m->data<int32_t>();
    }
    bool cond = c ? scalar_bool(ctx, *c, "cond") : true;
    std::vector<Value> carried(n_carried_);
    for (size_t i = 0; i < n_carried_; ++i) {
      const Value* v = ctx.input_value(2 + i);
      if (v) carried[i] = *v;
    }
    std::vector<std::vector<Tensor>> scans(n_scan_);
    for (int64_t it = 0; (!has_m || it < max_trips) && cond; ++it) {
      check_terminate(ctx);
      std::vector<Value> in;
      in.reserve(2 + n_carried_);
      in.emplace_back(int64_scalar(it));
      in.emplace_back(bool_scalar(cond));
      for (Value& v : carried) in.push_back(std::move(v));
      std::vector<Value> out = body_->run(std::move(in), ctx);
      if (!out[0].is_tensor())
        ctx.fail(StatusCode::kInvalidArgument, "the body's condition output is not a tensor");
      cond = scalar_bool(ctx, out[0].tensor(), "the body's condition output");
      for (size_t i = 0; i < n_carried_; ++i) carried[i] = std::move(out[1 + i]);
      for (size_t k = 0; k < n_scan_; ++k) {
        Value& v = out[1 + n_carried_ + k];
        if (!v.is_tensor())
          ctx.fail(StatusCode::kNotImplemented, "a scan output of Loop must be a tensor");
        scans[k].push_back(std::move(v.tensor()));
      }
    }
    for (size_t i = 0; i < n_carried_ && i < ctx.num_outputs(); ++i)
      ctx.set_output_value(i, std::move(carried[i]));
    for (size_t k = 0; k < n_scan_ && n_carried_ + k < ctx.num_outputs(); ++k) {
      ctx.set_output(n_carried_ + k,
                     stack(ctx, scans[k], 0, false, body_->output_type(1 + n_carried_ + k),
                           "scan output " + std::to_string(k)));
    }
  }

 private:
  std::shared_ptr<const Subgraph> body_;
  size_t n_carried_ = 0, n_scan_ = 0;
};

std::vector<int64_t> attr_per_entry(const KernelInfo& info, const char* name, size_t n) {
  std::vector<int64_t> v = info.attr_ints(name);
  if (v.empty()) return std::vector<int64_t>(n, 0);
  if (v.size() != n) {
    info.fail(StatusCode::kInvalidGraph, std::string(name) + " has " + std::to_string(v.size()) +
                                             " entries; expected " + std::to_string(n));
  }
  return v;
}

class Scan final : public Kernel {
 public:
  explicit Scan(const KernelInfo& info) : body_(info.subgraph("body")), v8_(info.opset() < 9) {
    const int64_t m = info.attr_int_required("num_scan_inputs");
    const size_t first = v8_ ? 1 : 0;  // opset 8: sequence_lens comes first
    if (m < 1 || static_cast<size_t>(m) + first > info.num_inputs())
      info.fail(StatusCode::kInvalidGraph, "num_scan_inputs " + std::to_string(m) + " is invalid");
    n_scan_in_ = static_cast<size_t>(m);
    n_state_ = info.num_inputs() - first - n_scan_in_;
    if (body_->input_names().size() != n_state_ + n_scan_in_) {
      info.fail(StatusCode::kInvalidGraph,
                "the body takes " + std::to_string(body_->input_names().size()) +
                    " inputs; expected " + std::to_string(n_state_ + n_scan_in_));
    }
    if (body_->output_names().size() < n_state_)
      info.fail(StatusCode::kInvalidGraph, "the body returns fewer outputs than there are states");
    n_scan_out_ = body_->output_names().size() - n_state_;
    if (v8_) {
      in_dirs_ = attr_per_entry(info, "directions", n_scan_in_);
      in_axes_.assign(n_scan_in_, 0);
      out_axes_.assign(n_scan_out_, 0);
      out_dirs_.assign(n_scan_out_, 0);
    } else {
      in_axes_ = attr_per_entry(info, "scan_input_axes", n_scan_in_);
      in_dirs_ = attr_per_entry(info, "scan_input_directions", n_scan_in_);
      out_axes_ = attr_per_entry(info, "scan_output_axes", n_scan_out_);
      out_dirs_ = attr_per_entry(info, "scan_output_directions", n_scan_out_);
    }
  }

  void compute(KernelContext& ctx) const override {
    if (!v8_) {
      std::vector<Tensor> states, xs;
      for (size_t i = 0; i < n_state_; ++i) states.push_back(ctx.required_input(i));
      for (size_t j = 0; j < n_scan_in_; ++j) xs.push_back(ctx.required_input(n_state_ + j));
      std::vector<Tensor> outs = scan_once(ctx, states, xs);
      for (size_t i = 0; i < outs.size() && i < ctx.num_outputs(); ++i)
        ctx.set_output(i, std::move(outs[i]));
      return;
    }
    // Opset 8: every state and scan input has a leading batch axis; each batch entry is
    // scanned on its own.
    if (ctx.input(0))
      ctx.fail(StatusCode::kNotImplemented, "Scan-8 with sequence_lens is not supported");
    const Tensor& x0 = ctx.required_input(1 + n_state_);
    if (x0.rank() < 2) ctx.fail(StatusCode::kInvalidArgument, "scan inputs need a batch axis");
    const int64_t batch = x0.dim(0);
    std::vector<std::vector<Tensor>> per_output(n_state_ + n_scan_out_);
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Tensor> states, xs;
      for (size_t i = 0; i < n_state_; ++i) {
        const Tensor& s = ctx.required_input(1 + i);
        if (s.rank() < 1 || s.dim(0) != batch)
          ctx.fail(StatusCode::kInvalidArgument, "a state's batch axis does not match");
        states.push_back(take_slice(s, 0, b));
      }
      for (size_t j = 0; j < n_scan_in_; ++j) {
        const Tensor& x = ctx.required_input(1 + n_state_ + j);
        if (x.rank() < 2 || x.dim(0) != batch)
          ctx.fail(StatusCode::kInvalidArgument, "a scan input's batch axis does not match");
        xs.push_back(take_slice(x, 0, b));
      }
      std::vector<Tensor> outs = scan_once(ctx, states, xs);
      for (size_t i = 0; i < outs.size(); ++i) per_output[i].push_back(std::move(outs[i]));
    }
    for (size_t i = 0; i < per_output.size() && i < ctx.num_outputs(); ++i) {
      ctx.set_output(i, stack(ctx, per_output[i], 0, false, body_->output_type(i),
                              "output " + std::to_string(i)));
    }
  }

 private:
  std::vector<Tensor> scan_once(const KernelContext& ctx, std::vector<Tensor> states,
                                const std::vector<Tensor>& xs) const {
    int64_t len = -1;
    std::vector<int64_t> axes(n_scan_in_);
    for (size_t j = 0; j < n_scan_in_; ++j) {
      const Tensor& x = xs[j];
      axes[j] = normalize_axis(in_axes_[j], static_cast<int64_t>(x.rank()), "scan_input_axes");
      const int64_t l = x.dim(static_cast<size_t>(axes[j]));
      if (len >= 0 && l != len) {
        ctx.fail(StatusCode::kInvalidArgument, "scan inputs have different lengths (" +
                                                   std::to_string(len) + " and " +
                                                   std::to_string(l) + ")");
      }
      len = l;
    }
    std::vector<std::vector<Tensor>> scans(n_scan_out_);
    for (int64_t t = 0; t < len; ++t) {
      check_terminate(ctx);
      std::vector<Value> in;
      for (Tensor& s : states) in.emplace_back(std::move(s));
      for (size_t j = 0; j < n_scan_in_; ++j) {
        const int64_t idx = in_dirs_[j] ? len - 1 - t : t;
        in.emplace_back(take_slice(xs[j], axes[j], idx));
      }
      std::vector<Value> out = body_->run(std::move(in), ctx);
      for (size_t i = 0; i < out.size(); ++i) {
        if (!out[i].is_tensor())
          ctx.fail(StatusCode::kNotImplemented, "Scan bodies must return tensors");
      }
      for (size_t i = 0; i < n_state_; ++i) states[i] = std::move(out[i].tensor());
      for (size_t k = 0; k < n_scan_out_; ++k)
        scans[k].push_back(std::move(out[n_state_ + k].tensor()));
    }
    std::vector<Tensor> result = std::move(states);
    for (size_t k = 0; k < n_scan_out_; ++k) {
      result.push_back(stack(ctx, scans[k], out_axes_[k], out_dirs_[k] != 0,
                             body_->output_type(n_state_ + k), "scan output " + std::to_string(k)));
    }
    return result;
  }

  std::shared_ptr<const Subgraph> body_;
  bool v8_;
  size_t n_state_ = 0, n_scan_in_ = 0, n_scan_out_ = 0;
  std::vector<int64_t> in_axes_, in_dirs_, out_axes_, out_dirs_;
};

class SequenceMap final : public Kernel {
 public:
  explicit SequenceMap(const KernelInfo& info) : body_(info.subgraph("body")) {
    if (body_->input_names().size() != info.num_inputs()) {
      info.fail(StatusCode::kInvalidGraph,
                "the body takes " + std::to_string(body_->input_names().size()) +
                    " inputs but the node has " + std::to_string(info.num_inputs()));
    }
    if (body_->output_names().size() != info.num_outputs())
      info.fail(StatusCode::kInvalidGraph, "the body's outputs do not match the node's");
  }
  void compute(KernelContext& ctx) const override {
    const Value* first = ctx.input_value(0);
    if (!first || !first->is_sequence())
      ctx.fail(StatusCode::kInvalidArgument, "input 0 must be a sequence");
    const size_t n = first->items().size();
    const size_t n_in = ctx.num_inputs();
    for (size_t j = 1; j < n_in; ++j) {
      const Value* v = ctx.input_value(j);
      if (!v || !v->defined()) ctx.fail(StatusCode::kInvalidArgument, "an input is missing");
      if (v->is_sequence() && v->items().size() != n)
        ctx.fail(StatusCode::kInvalidArgument, "the input sequences differ in length");
    }
    std::vector<std::vector<Tensor>> outs(ctx.num_outputs());
    for (size_t i = 0; i < n; ++i) {
      check_terminate(ctx);
      std::vector<Value> in;
      for (size_t j = 0; j < n_in; ++j) {
        const Value* v = ctx.input_value(j);
        in.emplace_back(v->is_sequence() ? Value(v->items()[i]) : *v);
      }
      std::vector<Value> out = body_->run(std::move(in), ctx);
      for (size_t k = 0; k < outs.size(); ++k) {
        if (!out[k].is_tensor())
          ctx.fail(StatusCode::kNotImplemented, "SequenceMap bodies must return tensors");
        outs[k].push_back(std::move(out[k].tensor()));
      }
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      DataType elem = outs[k].empty() ? DataType::kUndefined : outs[k][0].dtype();
      if (elem == DataType::kUndefined) {
        const TypeInfo& t = body_->output_type(k);
        elem = t.kind == TypeInfo::Kind::kTensor ? t.elem_type : DataType::kFloat;
      }
      ctx.set_output_value(k, Value::sequence(std::move(outs[k]), elem));
    }
  }

 private:
  std::shared_ptr<const Subgraph> body_;
};

}  // namespace

void register_control_flow_kernels(KernelRegistry& r) {
  r.add("", "If", 1, kMaxOpset, make_factory<If>());
  r.add("", "Loop", 1, kMaxOpset, make_factory<Loop>());
  r.add("", "Scan", 8, kMaxOpset, make_factory<Scan>());
  r.add("", "SequenceMap", 17, kMaxOpset, make_factory<SequenceMap>());
}

}  // namespace ortlite
