// CUDA kernels of the elementwise ops: broadcasting binary and variadic ops, unary ops
// and Clip, Where, Cast.
#include "providers/cuda/kernel_base.h"

namespace ortlite {
namespace cuda {
namespace {

using namespace kernels_detail;  // NOLINT: the shared helpers read better unqualified

// ---- binary ---------------------------------------------------------------------------

void launch_binary(const KernelContext& ctx, int op, const Tensor& a, const Tensor& b, Tensor& y) {
  const Shape& shape = y.shape();
  const std::vector<int64_t> sa = broadcast_strides(a.shape(), shape);
  const std::vector<int64_t> sb = broadcast_strides(b.shape(), shape);
  const int rc =
      api().binary(current_stream(), op, code(a.dtype()), static_cast<int>(shape.size()),
                   shape.data(), a.raw_data(), sa.data(), b.raw_data(), sb.data(), y.raw_data());
  if (rc != 0) ctx.fail(StatusCode::kFail, std::string("binary op: ") + api().last_error());
}

class Binary final : public CudaKernel {
 public:
  Binary(const KernelInfo&, int op) : op_(op) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& a = dev_input(ctx, 0);
    const Tensor& b = dev_input(ctx, 1);
    if (a.dtype() != b.dtype())
      ctx.fail(StatusCode::kInvalidArgument, std::string("inputs have different element types ") +
                                                 dtype_name(a.dtype()) + " and " +
                                                 dtype_name(b.dtype()));
    const DataType dt = a.dtype();
    const bool logical = op_ >= ORTLITE_CUDA_AND;
    const bool comparison = op_ >= ORTLITE_CUDA_EQUAL;
    if (logical)
      need(ctx, dt == DataType::kBool, dt);
    else if (op_ == ORTLITE_CUDA_POW)
      need(ctx, is_float(dt), dt);
    else if (op_ == ORTLITE_CUDA_EQUAL)
      need(ctx, is_arith(dt) || dt == DataType::kBool, dt);
    else
      need(ctx, is_arith(dt), dt);
    const Shape shape = broadcast_or_fail(ctx, a.shape(), b.shape());
    Tensor& y = out(ctx, 0, comparison ? DataType::kBool : dt, shape);
    if (y.numel() == 0) return;
    launch_binary(ctx, op_, a, b, y);
  }

 private:
  int op_;
};

// Min / Max / Sum over any number of inputs, folded pairwise.
class Variadic final : public CudaKernel {
 public:
  Variadic(const KernelInfo&, int op) : op_(op) {}

  void compute(KernelContext& ctx) const override {
    const size_t n = ctx.num_inputs();
    if (n == 0) ctx.fail(StatusCode::kInvalidArgument, "needs at least one input");
    const Tensor& x0 = dev_input(ctx, 0);
    const DataType dt = x0.dtype();
    need(ctx, is_arith(dt), dt);
    Shape shape = x0.shape();
    for (size_t i = 1; i < n; ++i) {
      const Tensor& x = dev_input(ctx, i);
      if (x.dtype() != dt)
        ctx.fail(StatusCode::kInvalidArgument, "input " + std::to_string(i) + " has element type " +
                                                   dtype_name(x.dtype()) + ", input 0 has " +
                                                   dtype_name(dt));
      shape = broadcast_or_fail(ctx, shape, x.shape());
    }
    if (n == 1) {
      Tensor& y = out(ctx, 0, dt, shape);
      if (y.numel()) strided_into(ctx, x0, dense_strides(shape), shape, y);
      return;
    }
    Tensor cur = x0;
    for (size_t i = 1; i < n; ++i) {
      const Tensor& x = *ctx.input(i);
      const Shape s = broadcast_or_fail(ctx, cur.shape(), x.shape());
      Tensor next = i + 1 == n ? out(ctx, 0, dt, shape) : temp(dt, s);
      if (next.numel()) launch_binary(ctx, op_, cur, x, next);
      cur = std::move(next);
    }
  }

 private:
  int op_;
};

// ---- unary ----------------------------------------------------------------------------

class Unary final : public CudaKernel {
 public:
  Unary(const KernelInfo& info, int op) : op_(op) {
    switch (op) {
      case ORTLITE_CUDA_LEAKY_RELU:
        alpha_ = info.attr_float("alpha", 0.01f);
        break;
      case ORTLITE_CUDA_ELU:
        alpha_ = info.attr_float("alpha", 1.0f);
        break;
      case ORTLITE_CUDA_SELU:
        alpha_ = info.attr_float("alpha", 1.67326319217681884765625f);
        beta_ = info.attr_float("gamma", 1.05070102214813232421875f);
        break;
      case ORTLITE_CUDA_HARD_SIGMOID:
        alpha_ = info.attr_float("alpha", 0.2f);
        beta_ = info.attr_float("beta", 0.5f);
        break;
      case ORTLITE_CUDA_GELU: {
        const std::string approx = info.attr_string("approximate", "none");
        if (approx == "tanh")
          op_ = ORTLITE_CUDA_GELU_TANH;
        else if (approx != "none")
          info.fail(StatusCode::kInvalidGraph,
                    "attribute 'approximate' must be \"none\" or \"tanh\", got \"" + approx + "\"");
        break;
      }
      default:
        break;
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = dev_input(ctx, 0);
    need(ctx, op_ == ORTLITE_CUDA_NOT ? x.dtype() == DataType::kBool : is_float(x.dtype()),
         x.dtype());
    Tensor& y = out(ctx, 0, x.dtype(), x.shape());
    run(ctx,
        api().unary(stream(), op_, code(x.dtype()), x.numel(), x.raw_data(), y.raw_data(), alpha_,
                    beta_),
        "unary op");
  }

 private:
  int op_;
  double alpha_ = 0, beta_ = 0;
};

// Clip: bounds from attributes (opset < 11) or host scalar inputs 1 and 2. A missing bound
// is the type's lowest / highest value (float for the half types, as on the CPU).
class Clip final : public CudaKernel {
 public:
  explicit Clip(const KernelInfo& info) : opset_(info.opset()) {
    if (opset_ < 11) {
      has_min_ = info.has_attr("min");
      has_max_ = info.has_attr("max");
      min_ = info.attr_float("min", 0.f);
      max_ = info.attr_float("max", 0.f);
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = dev_input(ctx, 0);
    need(ctx, is_float(x.dtype()), x.dtype());
    const bool dbl = x.dtype() == DataType::kDouble;
    double lo = dbl ? -DBL_MAX : -FLT_MAX, hi = dbl ? DBL_MAX : FLT_MAX;
    if (opset_ < 11) {
      if (has_min_) lo = min_;
      if (has_max_) hi = max_;
    } else {
      const char* names[2] = {"min", "max"};
      for (size_t i = 1; i <= 2; ++i) {
        const Tensor* b = host_input(ctx, i);
        if (!b) continue;
        if (b->dtype() != x.dtype())
          ctx.fail(StatusCode::kInvalidArgument,
                   std::string("input '") + names[i - 1] + "' has element type " +
                       dtype_name(b->dtype()) + ", input has " + dtype_name(x.dtype()));
        if (b->numel() != 1)
          ctx.fail(StatusCode::kInvalidArgument, std::string("input '") + names[i - 1] +
                                                     "' must be a scalar, got shape " +
                                                     shape_to_string(b->shape()));
        (i == 1 ? lo : hi) = tensor_scalar_as_double(*b);
      }
    }
    Tensor& y = out(ctx, 0, x.dtype(), x.shape());
    run(ctx,
        api().unary(stream(), ORTLITE_CUDA_CLIP, code(x.dtype()), x.numel(), x.raw_data(),
                    y.raw_data(), lo, hi),
        "Clip");
  }

 private:
  int64_t opset_;
  bool has_min_ = false, has_max_ = false;
  float min_ = 0.f, max_ = 0.f;
};

// ---- Where, Cast ----------------------------------------------------------------------

class Where final : public CudaKernel {
 public:
  explicit Where(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& c = dev_input(ctx, 0);
    const Tensor& x = dev_input(ctx, 1);
    const Tensor& y = dev_input(ctx, 2);
    if (c.dtype() != DataType::kBool)
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input 'condition' must be bool, got ") + dtype_name(c.dtype()));
    if (x.dtype() != y.dtype())
      ctx.fail(StatusCode::kInvalidArgument, std::string("inputs X and Y have element types ") +
                                                 dtype_name(x.dtype()) + " and " +
                                                 dtype_name(y.dtype()));
    const Shape shape =
        broadcast_or_fail(ctx, broadcast_or_fail(ctx, c.shape(), x.shape()), y.shape());
    Tensor& o = out(ctx, 0, x.dtype(), shape);
    if (o.numel() == 0) return;
    const auto sc = broadcast_strides(c.shape(), shape), sx = broadcast_strides(x.shape(), shape),
               sy = broadcast_strides(y.shape(), shape);
    run(ctx,
        api().where(stream(), static_cast<int>(dtype_size(x.dtype())),
                    static_cast<int>(shape.size()), shape.data(), c.raw_data(), sc.data(),
                    x.raw_data(), sx.data(), y.raw_data(), sy.data(), o.raw_data()),
        "Where");
  }
};

class Cast final : public CudaKernel {
 public:
  explicit Cast(const KernelInfo& info) {
    const int64_t to = info.attr_int_required("to");
    to_ = static_cast<DataType>(to);
    if (to <= 0 || to > 16 || !dtype_supported(to_))
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'to' = " + std::to_string(to) + " is not a supported element type");
  }
  void compute(KernelContext& ctx) const override {
    const Tensor& x = dev_input(ctx, 0);
    need(ctx, x.dtype() != DataType::kString && dtype_size(x.dtype()) > 0, x.dtype());
    need(ctx, to_ != DataType::kString, to_);
    Tensor& y = out(ctx, 0, to_, x.shape());
    if (y.numel() == 0) return;
    if (to_ == x.dtype()) {
      strided_into(ctx, x, dense_strides(x.shape()), x.shape(), y);
      return;
    }
    run(ctx,
        api().cast(stream(), code(x.dtype()), code(to_), x.numel(), x.raw_data(), y.raw_data()),
        "Cast");
  }

 private:
  DataType to_;
};

}  // namespace

void register_elementwise_kernels(KernelRegistry& r) {
  using namespace kernels_detail;  // NOLINT
  const struct {
    const char* name;
    int op;
    std::vector<int> versions;
  } binaries[] = {
      {"Add", ORTLITE_CUDA_ADD, {7, 13, 14}},
      {"Sub", ORTLITE_CUDA_SUB, {7, 13, 14}},
      {"Mul", ORTLITE_CUDA_MUL, {7, 13, 14}},
      {"Div", ORTLITE_CUDA_DIV, {7, 13, 14}},
      {"Pow", ORTLITE_CUDA_POW, {7, 12, 13, 15}},
      {"PRelu", ORTLITE_CUDA_PRELU, {7, 9, 16}},
      {"Equal", ORTLITE_CUDA_EQUAL, {7, 11, 13, 19}},
      {"Less", ORTLITE_CUDA_LESS, {7, 9, 13}},
      {"Greater", ORTLITE_CUDA_GREATER, {7, 9, 13}},
      {"LessOrEqual", ORTLITE_CUDA_LESS_EQUAL, {12, 16}},
      {"GreaterOrEqual", ORTLITE_CUDA_GREATER_EQUAL, {12, 16}},
      {"And", ORTLITE_CUDA_AND, {7}},
      {"Or", ORTLITE_CUDA_OR, {7}},
      {"Xor", ORTLITE_CUDA_XOR, {7}},
  };
  for (const auto& b : binaries) add(r, b.name, b.versions, factory<Binary>(b.op));
  add(r, "Max", {8, 12, 13}, factory<Variadic>(static_cast<int>(ORTLITE_CUDA_MAX)));
  add(r, "Min", {8, 12, 13}, factory<Variadic>(static_cast<int>(ORTLITE_CUDA_MIN)));
  add(r, "Sum", {8, 13}, factory<Variadic>(static_cast<int>(ORTLITE_CUDA_ADD)));

  const struct {
    const char* name;
    int op;
    std::vector<int> versions;
  } unaries[] = {
      {"Relu", ORTLITE_CUDA_RELU, {6, 13, 14}},
      {"LeakyRelu", ORTLITE_CUDA_LEAKY_RELU, {6, 16}},
      {"Sigmoid", ORTLITE_CUDA_SIGMOID, {6, 13}},
      {"Tanh", ORTLITE_CUDA_TANH, {6, 13}},
      {"Gelu", ORTLITE_CUDA_GELU, {20}},
      {"Elu", ORTLITE_CUDA_ELU, {6, 22}},
      {"Selu", ORTLITE_CUDA_SELU, {6, 22}},
      {"HardSigmoid", ORTLITE_CUDA_HARD_SIGMOID, {6, 22}},
      {"HardSwish", ORTLITE_CUDA_HARD_SWISH, {14, 22}},
      {"Softplus", ORTLITE_CUDA_SOFTPLUS, {1, 22}},
      {"Softsign", ORTLITE_CUDA_SOFTSIGN, {1, 22}},
      {"Exp", ORTLITE_CUDA_EXP, {6, 13}},
      {"Log", ORTLITE_CUDA_LOG, {6, 13}},
      {"Sqrt", ORTLITE_CUDA_SQRT, {6, 13}},
      {"Abs", ORTLITE_CUDA_ABS, {6, 13}},
      {"Neg", ORTLITE_CUDA_NEG, {6, 13}},
      {"Reciprocal", ORTLITE_CUDA_RECIPROCAL, {6, 13}},
      {"Erf", ORTLITE_CUDA_ERF, {9, 13}},
      {"Sin", ORTLITE_CUDA_SIN, {7}},
      {"Cos", ORTLITE_CUDA_COS, {7}},
      {"Floor", ORTLITE_CUDA_FLOOR, {6, 13}},
      {"Ceil", ORTLITE_CUDA_CEIL, {6, 13}},
      {"Not", ORTLITE_CUDA_NOT, {1}},
  };
  for (const auto& u : unaries) add(r, u.name, u.versions, factory<Unary>(u.op));
  add(r, "Clip", {6, 11, 12, 13}, factory<Clip>());
  add(r, "Where", {9, 16}, factory<Where>());
  add(r, "Cast", {6, 9, 13, 19, 21}, factory<Cast>());
}

}  // namespace cuda
}  // namespace ortlite
