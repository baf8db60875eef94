// Dropout (opset 7, 10, 12, 13, 22).
// Inference (the normal case): output = input (a view, no copy); the optional mask output is
// what onnxruntime produces: zeros of the input type (7-9), all false (10-11), all true (12+).
// Opset 12+ with training_mode = true and ratio > 0 drops elements at random:
// output = input * mask / (1 - ratio), mask ~ Bernoulli(1 - ratio); the `seed` attribute
// makes the sequence of masks reproducible.
#include <atomic>
#include <cstring>
#include <random>
#include <vector>

#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {
namespace {

class Dropout final : public Kernel {
 public:
  explicit Dropout(const KernelInfo& info) : opset_(info.opset()) {
    if (opset_ < 12) {
      const float ratio = info.attr_float("ratio", 0.5f);
      if (!(ratio >= 0.f && ratio <= 1.f))
        info.fail(StatusCode::kInvalidGraph,
                  "attribute 'ratio' must be in [0, 1], got " + std::to_string(ratio));
    }
    has_seed_ = info.has_attr("seed");
    if (has_seed_) seed_ = static_cast<uint64_t>(info.attr_int("seed", 0));
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = ctx.required_input(0);
    const bool want_mask = ctx.num_outputs() > 1 && !ctx.node().outputs[1].empty();
    bool training = false;
    double ratio = 0.5;
    if (opset_ >= 12) {
      if (const Tensor* t = ctx.input(2)) {
        if (t->dtype() != DataType::kBool || t->numel() != 1)
          ctx.fail(StatusCode::kInvalidArgument, "input training_mode must be a bool scalar, got " +
                                                     std::string(dtype_name(t->dtype())) + " " +
                                                     shape_to_string(t->shape()));
        training = *t->data<bool>();
      }
      if (const Tensor* r = ctx.input(1)) {
        if (!dtype_is_float(r->dtype()) || r->numel() != 1)
          ctx.fail(StatusCode::kInvalidArgument,
                   "input ratio must be a floating-point scalar, got " +
                       std::string(dtype_name(r->dtype())) + " " + shape_to_string(r->shape()));
        ratio = tensor_scalar_as_double(*r);
      }
      if (training && !(ratio >= 0.0 && ratio <= 1.0))
        ctx.fail(StatusCode::kInvalidArgument,
                 "ratio must be in [0, 1], got " + std::to_string(ratio));
    }
    if (!training || ratio == 0.0) {
      ctx.set_output(0, X);
      if (want_mask) {
        if (opset_ < 10) {
          Tensor& m = ctx.allocate_output(1, X.dtype(), X.shape());
          if (m.nbytes()) std::memset(m.raw_data(), 0, m.nbytes());
        } else {
          Tensor& m = ctx.allocate_output(1, DataType::kBool, X.shape());
          const bool v = opset_ >= 12;
          bool* p = m.data<bool>();
          for (int64_t i = 0; i < m.numel(); ++i) p[i] = v;
        }
      }
      return;
    }
    if (!dtype_is_float(X.dtype()))
      ctx.fail(StatusCode::kNotImplemented, std::string("training mode: element type ") +
                                                dtype_name(X.dtype()) + " is not supported");
    const int64_t n = X.numel();
    std::vector<bool> keep(static_cast<size_t>(n));
    {
      std::mt19937_64 gen(has_seed_ ? seed_ + 0x9E3779B97F4A7C15ull * runs_.fetch_add(1)
                                    : std::random_device{}());
      std::uniform_real_distribution<double> u(0.0, 1.0);
      for (int64_t i = 0; i < n; ++i) keep[i] = u(gen) >= ratio;
    }
    Tensor& Y = ctx.allocate_output(0, X.dtype(), X.shape());
    if (X.dtype() == DataType::kDouble) {
      const double* xs = X.data<double>();
      double* yd = Y.data<double>();
      const double sd = ratio < 1.0 ? 1.0 / (1.0 - ratio) : 0.0;
      for (int64_t i = 0; i < n; ++i) yd[i] = keep[i] ? xs[i] * sd : 0.0;
    } else {
      const float scale = ratio < 1.0 ? static_cast<float>(1.0 / (1.0 - ratio)) : 0.f;
      std::vector<float> x(static_cast<size_t>(n));
      convert_to_float(X.dtype(), X.raw_data(), x.data(), n);
      for (int64_t i = 0; i < n; ++i) x[i] = keep[i] ? x[i] * scale : 0.f;
      convert_from_float(X.dtype(), x.data(), Y.raw_data(), n);
    }
    if (want_mask) {
      bool* p = ctx.allocate_output(1, DataType::kBool, X.shape()).data<bool>();
      for (int64_t i = 0; i < n; ++i) p[i] = keep[i];
    }
  }

 private:
  int64_t opset_;
  bool has_seed_ = false;
  uint64_t seed_ = 0;
  mutable std::atomic<uint64_t> runs_{0};
};

}  // namespace

void register_dropout(KernelRegistry& r) {
  // 7: mask of type T; 10: bool mask; 12: ratio / training_mode inputs, seed;
  // 13: bfloat16; 22: float8 types.
  r.add("", "Dropout", 7, 9, make_factory<Dropout>());
  r.add("", "Dropout", 10, 11, make_factory<Dropout>());
  r.add("", "Dropout", 12, 12, make_factory<Dropout>());
  r.add("", "Dropout", 13, 21, make_factory<Dropout>());
  r.add("", "Dropout", 22, kMaxOpset, make_factory<Dropout>());
}

}  // namespace nn
}  // namespace ortlite
