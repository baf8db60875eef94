// com.microsoft QEmbedLayerNormalization: EmbedLayerNormalization over uint8 / int8 tables
// (word, position, optional segment embeddings, gamma and beta, each with a per-tensor scale
// and zero point), float output, as onnxruntime computes it: each value dequantized as
// float(q - zp) * scale, the embeddings summed in float, the mean and the variance summed in
// order over the hidden dim, y = (x - mean) / sqrt(var + epsilon) * gamma + beta, one rounding
// per operation. Position p of a sequence reads position-table row p. mask_index (optional
// output) counts the mask values equal to 1 per batch row (0 without a mask).
#include <cmath>
#include <string>

#include "providers/cpu/quant/quant_common.h"

namespace ortlite {
namespace quant {
namespace {

struct QTable {
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  float scale = 1.0f;
  int32_t zp = 0;
  bool is_signed = false;
  float at(int64_t i) const {
    const int32_t q = is_signed ? static_cast<int8_t>(data[i]) : data[i];
    return fp_barrier(static_cast<float>(q - zp) * scale);
  }
};

class QEmbedLayerNormalization final : public Kernel {
 public:
  explicit QEmbedLayerNormalization(const KernelInfo& info)
      : epsilon_(info.attr_float("epsilon", 1e-12f)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& ids = ctx.required_input(0);
    const Tensor* seg_ids = ctx.input(1);
    const Tensor& word = ctx.required_input(2);
    check_qop_int8(ctx, word, "word_embedding_quant");
    const DataType t = word.dtype();
    if (ids.dtype() != DataType::kInt32 || ids.rank() != 2) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'input_ids' must be int32 [batch, sequence], got " +
                   std::string(dtype_name(ids.dtype())) + " " + shape_to_string(ids.shape()));
    }
    if (word.rank() != 2) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'word_embedding_quant' must be 2-D, got " + shape_to_string(word.shape()));
    }
    const int64_t B = ids.dim(0), S = ids.dim(1), H = word.dim(1);
    auto table = [&](size_t in, size_t s_in, size_t z_in, const char* name, int64_t rank) {
      const Tensor& x = ctx.required_input(in);
      if (x.dtype() != t || static_cast<int64_t>(x.rank()) != rank || x.dim(x.rank() - 1) != H) {
        ctx.fail(StatusCode::kInvalidArgument,
                 std::string("input '") + name + "' must be " + dtype_name(t) + " with rank " +
                     std::to_string(rank) + " and " + std::to_string(H) +
                     " elements in its last dim, got " + dtype_name(x.dtype()) + " " +
                     shape_to_string(x.shape()));
      }
      QTable q;
      q.data = static_cast<const uint8_t*>(x.raw_data());
      q.rows = rank == 2 ? x.dim(0) : 1;
      q.is_signed = t == DataType::kInt8;
      q.scale = qop_scale(ctx, ctx.required_input(s_in), (std::string(name) + " scale").c_str());
      q.zp = qop_zero_point(ctx, &ctx.required_input(z_in), t,
                            (std::string(name) + " zero point").c_str());
      return q;
    };
    const QTable qw = table(2, 8, 13, "word_embedding_quant", 2);
    const QTable qp = table(3, 9, 14, "position_embedding_quant", 2);
    QTable qs;
    if (seg_ids) {
      if (seg_ids->dtype() != DataType::kInt32 || seg_ids->shape() != ids.shape()) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "input 'segment_ids' must be int32 shaped like 'input_ids' " +
                     shape_to_string(ids.shape()) + ", got " + dtype_name(seg_ids->dtype()) + " " +
                     shape_to_string(seg_ids->shape()));
      }
      qs = table(4, 10, 15, "segment_embedding_quant", 2);
    }
    const QTable qg = table(5, 11, 16, "layer_norm_weight_quant", 1);
    const QTable qb = table(6, 12, 17, "layer_norm_bias_quant", 1);
    const Tensor* mask = ctx.input(7);
    if (mask && (mask->dtype() != DataType::kInt32 || mask->shape() != ids.shape())) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'mask' must be int32 shaped like " + shape_to_string(ids.shape()) + ", got " +
                   dtype_name(mask->dtype()) + " " + shape_to_string(mask->shape()));
    }
    const int32_t* idd = ids.data<int32_t>();
    const int32_t* sdd = seg_ids ? seg_ids->data<int32_t>() : nullptr;
    for (int64_t i = 0; i < B * S; ++i) {
      if (idd[i] < 0 || idd[i] >= qw.rows || (sdd && (sdd[i] < 0 || sdd[i] >= qs.rows))) {
        const bool word_bad = idd[i] < 0 || idd[i] >= qw.rows;
        ctx.fail(StatusCode::kInvalidArgument,
                 std::string(word_bad ? "input_ids" : "segment_ids") + "[" + std::to_string(i) +
                     "] = " + std::to_string(word_bad ? idd[i] : sdd[i]) +
                     " is outside its embedding table of " +
                     std::to_string(word_bad ? qw.rows : qs.rows) + " rows");
      }
    }
    if (S > qp.rows) {
      ctx.fail(StatusCode::kInvalidArgument, "sequence length " + std::to_string(S) +
                                                 " exceeds the position embedding's " +
                                                 std::to_string(qp.rows) + " rows");
    }
    Tensor& y = ctx.allocate_output(0, DataType::kFloat, {B, S, H});
    float* yd = y.data<float>();
    const float hf = static_cast<float>(H), eps = epsilon_;
    parallel_for(ctx.thread_pool(), B * S, 8.0 * static_cast<double>(H), [&](int64_t s, int64_t e) {
      for (int64_t r = s; r < e; ++r) {
        float* out = yd + r * H;
        const int64_t wr = idd[r] * H, pr = (r % S) * H, sr = sdd ? sdd[r] * H : 0;
        float sum = 0.0f;
        for (int64_t i = 0; i < H; ++i) {
          float v = fp_barrier(qw.at(wr + i) + qp.at(pr + i));
          if (sdd) v = fp_barrier(v + qs.at(sr + i));
          out[i] = v;
          sum += v;
        }
        const float mean = sum / hf;
        sum = 0.0f;
        for (int64_t i = 0; i < H; ++i) {
          const float a = out[i] - mean;
          out[i] = a;
          sum += fp_barrier(a * a);
        }
        const float den = std::sqrt(fp_barrier(sum / hf) + eps);
        for (int64_t i = 0; i < H; ++i)
          out[i] = fp_barrier(fp_barrier(out[i] / den) * qg.at(i)) + qb.at(i);
      }
    });
    if (ctx.num_outputs() > 1 && !ctx.node().outputs[1].empty()) {
      Tensor& mi = ctx.allocate_output(1, DataType::kInt32, {B});
      int32_t* md = mi.data<int32_t>();
      const int32_t* mk = mask ? mask->data<int32_t>() : nullptr;
      for (int64_t b = 0; b < B; ++b) {
        int32_t count = 0;
        if (mk)
          for (int64_t i = 0; i < S; ++i) count += mk[b * S + i] == 1 ? 1 : 0;
        md[b] = count;
      }
    }
  }

 private:
  float epsilon_;
};

}  // namespace

void register_qembed_layer_norm(KernelRegistry& r) {
  r.add("com.microsoft", "QEmbedLayerNormalization", 1, kMaxOpset,
        make_factory<QEmbedLayerNormalization>());
}

}  // namespace quant
}  // namespace ortlite
