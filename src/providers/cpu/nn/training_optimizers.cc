// Adagrad, Adam and Momentum (ai.onnx.preview.training, opset 1): one optimizer step per
// optimized tensor. Each is a pure function of its inputs, so an inference session runs it
// like any other operator. Inputs: R (the learning rate, a float or double scalar), T (the
// update count, an int64 scalar), then n tensors of each group in turn: X_1..X_n, G_1..G_n
// and the optimizer's state tensors (Adagrad: H; Adam: V, H; Momentum: V). Outputs: the
// new X_1..X_n, then the new value of each state group in the same order. The grouped
// tensors are float or double, all of one type; the tensors of one index i share X_i's
// shape. The scalar factors and every element compute in double, rounded once to the
// element type.
#include <cmath>
#include <string>
#include <vector>

#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {
namespace {

enum class Optimizer { kAdagrad, kAdam, kMomentum };

// The group names of each optimizer's inputs after R and T (the outputs are the new
// values of all groups but G).
const std::vector<const char*>& group_names(Optimizer o) {
  static const std::vector<const char*> adagrad = {"X", "G", "H"};
  static const std::vector<const char*> adam = {"X", "G", "V", "H"};
  static const std::vector<const char*> momentum = {"X", "G", "V"};
  return o == Optimizer::kAdagrad ? adagrad : o == Optimizer::kAdam ? adam : momentum;
}

// The per-run scalars of one step, derived from R, T and the attributes.
struct StepScalars {
  double norm = 0;  // norm_coefficient: G_regularized = norm * X + G
  double epsilon = 0;
  double rate = 0;   // Adagrad's r, Adam's R_adjusted, Momentum's R
  double alpha = 0;  // Adam, Momentum
  double beta = 0;   // Adam's beta; Momentum's beta_adjusted
  double post = 0;   // Adam's norm_coefficient_post
  bool nesterov = false;
};

// One step over n elements. x, g: X_i and G_i; s0, s1: the state inputs (s1 Adam's H
// only); xo, o0, o1: the new X and states.
template <typename T>
void step(Optimizer o, const StepScalars& k, int64_t begin, int64_t end, const T* x, const T* g,
          const T* s0, const T* s1, T* xo, T* o0, T* o1) {
  switch (o) {
    case Optimizer::kAdagrad:
      for (int64_t i = begin; i < end; ++i) {
        const double xv = static_cast<double>(x[i]);
        const double gr = k.norm * xv + static_cast<double>(g[i]);
        const double h = static_cast<double>(s0[i]) + gr * gr;
        xo[i] = static_cast<T>(xv - k.rate * gr / (std::sqrt(h) + k.epsilon));
        o0[i] = static_cast<T>(h);
      }
      return;
    case Optimizer::kAdam:
      for (int64_t i = begin; i < end; ++i) {
        const double xv = static_cast<double>(x[i]);
        const double gr = k.norm * xv + static_cast<double>(g[i]);
        const double v = k.alpha * static_cast<double>(s0[i]) + (1.0 - k.alpha) * gr;
        const double h = k.beta * static_cast<double>(s1[i]) + (1.0 - k.beta) * (gr * gr);
        const double xn = xv - k.rate * (v / (std::sqrt(h) + k.epsilon));
        xo[i] = static_cast<T>((1.0 - k.post) * xn);
        o0[i] = static_cast<T>(v);
        o1[i] = static_cast<T>(h);
      }
      return;
    case Optimizer::kMomentum:
      for (int64_t i = begin; i < end; ++i) {
        const double xv = static_cast<double>(x[i]);
        const double gr = k.norm * xv + static_cast<double>(g[i]);
        const double v = k.alpha * static_cast<double>(s0[i]) + k.beta * gr;
        xo[i] = static_cast<T>(k.nesterov ? xv - k.rate * (gr + k.alpha * v) : xv - k.rate * v);
        o0[i] = static_cast<T>(v);
      }
      return;
  }
}

class TrainingOptimizer final : public Kernel {
 public:
  TrainingOptimizer(const KernelInfo& info, Optimizer o) : opt_(o) {
    const size_t groups = group_names(o).size();
    std::string layout = "R, T";
    for (const char* name : group_names(o))
      layout += std::string(", ") + name + "_1.." + name + "_n";
    const size_t inputs = info.num_inputs();
    if (inputs < 2 + groups || (inputs - 2) % groups != 0)
      info.fail(StatusCode::kInvalidGraph, "expects 2 + " + std::to_string(groups) +
                                               " x n inputs (" + layout + "), got " +
                                               std::to_string(inputs));
    n_ = (inputs - 2) / groups;
    for (size_t i = 0; i < inputs; ++i)
      if (!info.has_input(i))
        info.fail(StatusCode::kInvalidGraph, "input " + std::to_string(i) + " (" + input_name(i) +
                                                 ") is missing (every input is required)");
    if (info.num_outputs() != (groups - 1) * n_)
      info.fail(StatusCode::kInvalidGraph,
                "has " + std::to_string(n_) + " optimized tensor(s) (" + std::to_string(inputs) +
                    " inputs), so " + std::to_string((groups - 1) * n_) + " outputs, got " +
                    std::to_string(info.num_outputs()));
    switch (o) {
      case Optimizer::kAdagrad:
        decay_ = info.attr_float("decay_factor", 0.0f);
        epsilon_ = info.attr_float("epsilon", 1e-6f);
        norm_ = info.attr_float("norm_coefficient", 0.0f);
        break;
      case Optimizer::kAdam:
        alpha_ = info.attr_float("alpha", 0.9f);
        beta_ = info.attr_float("beta", 0.999f);
        epsilon_ = info.attr_float("epsilon", 1e-6f);
        norm_ = info.attr_float("norm_coefficient", 0.0f);
        post_ = info.attr_float("norm_coefficient_post", 0.0f);
        break;
      case Optimizer::kMomentum: {
        alpha_ = info.attr_float_required("alpha");
        beta_ = info.attr_float_required("beta");
        norm_ = info.attr_float_required("norm_coefficient");
        if (!info.has_attr("mode"))
          info.fail(StatusCode::kInvalidGraph, "attribute 'mode' is required");
        const std::string mode = info.attr_string("mode", "");
        if (mode != "standard" && mode != "nesterov")
          info.fail(StatusCode::kInvalidGraph,
                    "attribute 'mode' must be \"standard\" or \"nesterov\", got \"" + mode + "\"");
        nesterov_ = mode == "nesterov";
        break;
      }
    }
  }

  void compute(KernelContext& ctx) const override {
    const size_t groups = group_names(opt_).size();
    const double R = scalar_rate(ctx);
    const int64_t T = scalar_count(ctx);
    const DataType dt = ctx.required_input(2).dtype();
    if (dt != DataType::kFloat && dt != DataType::kDouble)
      ctx.fail(StatusCode::kInvalidArgument, std::string("X_1 has element type ") + dtype_name(dt) +
                                                 "; the optimized tensors must be float or double");
    for (size_t i = 0; i < n_; ++i) {
      const Tensor& X = ctx.required_input(2 + i);
      for (size_t gi = 0; gi < groups; ++gi) {
        const Tensor& t = ctx.required_input(2 + gi * n_ + i);
        if (t.dtype() != dt)
          ctx.fail(StatusCode::kInvalidArgument,
                   tensor_name(gi, i) + " has element type " + dtype_name(t.dtype()) +
                       ", X_1 has " + dtype_name(dt) + " (the optimized tensors and their " +
                       "gradients and states share one type)");
        if (t.shape() != X.shape())
          ctx.fail(StatusCode::kInvalidArgument,
                   tensor_name(gi, i) + " " + shape_to_string(t.shape()) + " does not match " +
                       tensor_name(0, i) + " " + shape_to_string(X.shape()));
      }
    }

    StepScalars k;
    k.norm = norm_;
    k.epsilon = epsilon_;
    k.alpha = alpha_;
    k.nesterov = nesterov_;
    switch (opt_) {
      case Optimizer::kAdagrad:
        k.rate = R / (1.0 + static_cast<double>(T) * static_cast<double>(decay_));
        break;
      case Optimizer::kAdam: {
        k.beta = beta_;
        k.post = post_;
        const double t = static_cast<double>(T);
        k.rate =
            T > 0 ? R * std::sqrt(1.0 - std::pow(k.beta, t)) / (1.0 - std::pow(k.alpha, t)) : R;
        break;
      }
      case Optimizer::kMomentum:
        k.rate = R;
        k.beta = T > 0 ? static_cast<double>(beta_) : 1.0;
        break;
    }

    ThreadPool* pool = ctx.thread_pool();
    for (size_t i = 0; i < n_; ++i) {
      const Tensor& X = ctx.required_input(2 + i);
      const Tensor* in[4] = {};
      for (size_t gi = 0; gi < groups; ++gi) in[gi] = &ctx.required_input(2 + gi * n_ + i);
      Tensor* out[3] = {};
      for (size_t oi = 0; oi + 1 < groups; ++oi)
        out[oi] = &ctx.allocate_output(oi * n_ + i, dt, X.shape());
      const int64_t count = X.numel();
      if (count == 0) continue;
      auto run = [&](auto tag) {
        using E = decltype(tag);
        auto p = [](const Tensor* t) { return t ? t->data<E>() : static_cast<E*>(nullptr); };
        parallel_for(pool, count, 16.0, [&](int64_t s, int64_t e) {
          step<E>(opt_, k, s, e, p(in[0]), p(in[1]), p(in[2]), p(in[3]), p(out[0]), p(out[1]),
                  p(out[2]));
        });
      };
      if (dt == DataType::kFloat)
        run(float{});
      else
        run(double{});
    }
  }

 private:
  // "X_2", "G_1", ...: group gi's tensor of optimized tensor i (1-based as the spec's
  // examples name them).
  std::string tensor_name(size_t gi, size_t i) const {
    return std::string(group_names(opt_)[gi]) + "_" + std::to_string(i + 1);
  }
  std::string input_name(size_t input) const {
    if (input == 0) return "R";
    if (input == 1) return "T";
    return tensor_name((input - 2) / n_, (input - 2) % n_);
  }

  double scalar_rate(const KernelContext& ctx) const {
    const Tensor& R = ctx.required_input(0);
    if (R.dtype() != DataType::kFloat && R.dtype() != DataType::kDouble)
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("R must be a float or double scalar, got element type ") +
                   dtype_name(R.dtype()));
    if (R.numel() != 1)
      ctx.fail(StatusCode::kInvalidArgument,
               "R must be a scalar (one element), got shape " + shape_to_string(R.shape()));
    return R.dtype() == DataType::kFloat ? static_cast<double>(*R.data<float>())
                                         : *R.data<double>();
  }

  int64_t scalar_count(const KernelContext& ctx) const {
    const Tensor& T = ctx.required_input(1);
    if (T.dtype() != DataType::kInt64)
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("T must be an int64 scalar, got element type ") + dtype_name(T.dtype()));
    if (T.numel() != 1)
      ctx.fail(StatusCode::kInvalidArgument,
               "T must be a scalar (one element), got shape " + shape_to_string(T.shape()));
    return *T.data<int64_t>();
  }

  Optimizer opt_;
  size_t n_ = 0;  // optimized tensors
  float norm_ = 0, epsilon_ = 0, decay_ = 0, alpha_ = 0, beta_ = 0, post_ = 0;
  bool nesterov_ = false;
};

template <Optimizer O>
KernelFactory optimizer_factory() {
  return [](const KernelInfo& info) -> std::unique_ptr<Kernel> {
    return std::make_unique<TrainingOptimizer>(info, O);
  };
}

}  // namespace

void register_training_optimizers(KernelRegistry& r) {
  const char* const domain = "ai.onnx.preview.training";
  // Version 1 only: the preview domain may change these operators in a later version.
  r.add(domain, "Adagrad", 1, 1, optimizer_factory<Optimizer::kAdagrad>());
  r.add(domain, "Adam", 1, 1, optimizer_factory<Optimizer::kAdam>());
  r.add(domain, "Momentum", 1, 1, optimizer_factory<Optimizer::kMomentum>());
}

}  // namespace nn
}  // namespace ortlite
