// CausalConvWithState (opset 27): a causal depthwise 1-D convolution that carries its left
// context between calls. input [B, C, L], weight [C, 1, K], optional bias [C] and past_state
// [B, C, K - 1] (zeros when absent). Each channel row is the concatenation
// [past_state | input] (K - 1 + L values); output[t] = bias + sum_j weight[j] * row[t + j]
// for t in [0, L), optionally through SiLU (activation "silu" or its alias "swish"; the fused
// activations' x * sigmoid(x), vectorized), and present_state is the last K - 1 values of the
// row. Arithmetic in float for float, float16 and bfloat16; present_state is copied from the
// inputs' own values, so it is exact.
#include <string>
#include <vector>

#include "compute/activation.h"
#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {
namespace {

bool is_conv_type(DataType t) {
  return t == DataType::kFloat || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

class CausalConvWithState final : public Kernel {
 public:
  explicit CausalConvWithState(const KernelInfo& info) {
    const std::string a = info.attr_string("activation", "none");
    if (a == "silu" || a == "swish") {
      act_.kind = ActKind::kSilu;
    } else if (a != "none") {
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'activation' = '" + a + "' is unknown (none, silu or swish)");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& w = ctx.required_input(1);
    const Tensor* bias = ctx.input(2);
    const Tensor* past = ctx.input(3);
    const DataType dt = x.dtype();
    if (!is_conv_type(dt)) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'input' has element type " +
                                                 std::string(dtype_name(dt)) +
                                                 "; the op takes float, float16 or bfloat16");
    }
    auto check_type = [&](const Tensor* t, const char* name) {
      if (t && t->dtype() != dt) {
        ctx.fail(StatusCode::kInvalidArgument,
                 std::string("input '") + name + "' has element type " + dtype_name(t->dtype()) +
                     ", not the type of 'input' (" + dtype_name(dt) + ")");
      }
    };
    check_type(&w, "weight");
    check_type(bias, "bias");
    check_type(past, "past_state");
    if (x.rank() != 3) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'input' " + shape_to_string(x.shape()) +
                                                 " must be 3-D (batch_size, channels, length)");
    }
    const int64_t B = x.dim(0), C = x.dim(1), L = x.dim(2);
    if (w.rank() != 3 || w.dim(0) != C || w.dim(1) != 1 || w.dim(2) < 1) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'weight' " + shape_to_string(w.shape()) +
                                                 " must be (channels = " + std::to_string(C) +
                                                 ", 1, k) with a kernel size k >= 1");
    }
    const int64_t K = w.dim(2);
    const int64_t P = K - 1;  // the carried context
    if (bias && (bias->rank() != 1 || bias->dim(0) != C)) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'bias' " + shape_to_string(bias->shape()) +
                                                 " must be 1-D (channels = " + std::to_string(C) +
                                                 ")");
    }
    if (past &&
        (past->rank() != 3 || past->dim(0) != B || past->dim(1) != C || past->dim(2) != P)) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'past_state' " + shape_to_string(past->shape()) + " must be " +
                   shape_to_string({B, C, P}) + " (batch_size, channels, k - 1)");
    }

    Tensor& y = ctx.allocate_output(0, dt, {B, C, L});
    Tensor* present = nullptr;
    if (ctx.num_outputs() > 1 && !ctx.node().outputs[1].empty())
      present = &ctx.allocate_output(1, dt, {B, C, P});

    std::vector<float> wf(static_cast<size_t>(C * K)), bf;
    convert_to_float(dt, w.raw_data(), wf.data(), C * K);
    if (bias) {
      bf.resize(static_cast<size_t>(C));
      convert_to_float(dt, bias->raw_data(), bf.data(), C);
    }
    const size_t esize = dtype_size(dt);
    const char* xp = static_cast<const char*>(x.raw_data());
    const char* pp = past ? static_cast<const char*>(past->raw_data()) : nullptr;
    char* yp = static_cast<char*>(y.raw_data());
    char* sp = present ? static_cast<char*>(present->raw_data()) : nullptr;
    const ActSpec act = act_;

    parallel_for(ctx.thread_pool(), B * C, static_cast<double>((K + 1) * (L + P)),
                 [&](int64_t begin, int64_t end) {
                   // row: [past | input] in float; out: one output row.
                   std::vector<float> row_buf(static_cast<size_t>(P + L));
                   std::vector<float> out_buf(static_cast<size_t>(L));
                   float* __restrict row = row_buf.data();
                   float* __restrict out = out_buf.data();
                   for (int64_t bc = begin; bc < end; ++bc) {
                     const int64_t c = bc % C;
                     if (pp) {
                       convert_to_float(dt, pp + static_cast<size_t>(bc * P) * esize, row, P);
                     } else {
                       for (int64_t i = 0; i < P; ++i) row[i] = 0.0f;
                     }
                     convert_to_float(dt, xp + static_cast<size_t>(bc * L) * esize, row + P, L);
                     const float b0 = bias ? bf[static_cast<size_t>(c)] : 0.0f;
                     for (int64_t t = 0; t < L; ++t) out[t] = b0;
                     const float* wc = wf.data() + c * K;
                     for (int64_t j = 0; j < K; ++j) {
                       const float wj = wc[j];
                       const float* __restrict src = row + j;
                       for (int64_t t = 0; t < L; ++t) out[t] += wj * src[t];
                     }
                     apply_act(act, out, L);
                     convert_from_float(dt, out, yp + static_cast<size_t>(bc * L) * esize, L);
                     if (sp) {
                       // The last P values of [past | input]: values of the inputs
                       // themselves, so the round trip through float is exact.
                       convert_from_float(dt, row + L, sp + static_cast<size_t>(bc * P) * esize, P);
                     }
                   }
                 });
  }

 private:
  ActSpec act_;  // kNone or kSilu
};

}  // namespace

void register_causal_conv_with_state(KernelRegistry& r) {
  r.add("", "CausalConvWithState", 27, kMaxOpset, make_factory<CausalConvWithState>());
}

}  // namespace nn
}  // namespace ortlite
