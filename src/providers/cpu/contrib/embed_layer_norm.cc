// com.microsoft EmbedLayerNormalization: the embedding layer of a BERT model fused by
// onnxruntime's transformers optimizer.
//
//   inputs   input_ids [B, S] int32, segment_ids [B, S] int32 (optional),
//            word_embedding [V, H], position_embedding [P, H], segment_embedding [G, H]
//            (optional; with segment_ids), gamma [H], beta [H], mask [B, S] int32 (optional),
//            position_ids [B, S] or [1, S] int32 (optional; default 0 .. S-1)
//   outputs  output = LayerNorm(word[id] + position[pos] + segment[seg]) [B, S, H],
//            mask_index [B] int32 (count of mask values equal to 1; zeros without a mask),
//            embedding_sum [B, S, H] (optional: the sum before normalization)
//   attrs    epsilon (1e-12), mask_index_type (accepted; mask_index is always the count)
//
// An index outside its table is kInvalidArgument naming the table, row and index. float only
// (as onnxruntime's CPU kernel).
#include "compute/vectorize.h"  // first: compile options for the loops below

#include <atomic>
#include <cmath>
#include <cstring>

#include "providers/cpu/contrib/contrib_common.h"

namespace ortlite {
namespace contrib {
namespace {

class EmbedLayerNorm final : public Kernel {
 public:
  explicit EmbedLayerNorm(const KernelInfo& info) : epsilon_(info.attr_float("epsilon", 1e-12f)) {
    const int64_t mit = info.attr_int("mask_index_type", 1);
    if (mit != 0 && mit != 1)
      info.fail(StatusCode::kInvalidGraph,
                "mask_index_type must be 0 or 1, got " + std::to_string(mit));
    if (epsilon_ < 0)
      info.fail(StatusCode::kInvalidGraph, "epsilon must be >= 0, got " + std::to_string(epsilon_));
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& ids = ctx.required_input(0);
    const Tensor* seg_ids = ctx.input(1);
    const Tensor& word = ctx.required_input(2);
    const Tensor& pos = ctx.required_input(3);
    const Tensor* seg = ctx.input(4);
    const Tensor& gamma = ctx.required_input(5);
    const Tensor& beta = ctx.required_input(6);
    const Tensor* mask = ctx.input(7);
    const Tensor* pos_ids = ctx.input(8);

    auto int32_2d = [&](const Tensor* t, const char* what) {
      if (!t) return;
      if (t->dtype() != DataType::kInt32)
        ctx.fail(StatusCode::kInvalidArgument,
                 std::string(what) + " must be int32, got " + dtype_name(t->dtype()));
      if (t->rank() != 2)
        ctx.fail(StatusCode::kInvalidArgument,
                 std::string(what) + " must be 2-D, got shape " + shape_to_string(t->shape()));
    };
    int32_2d(&ids, "input_ids");
    int32_2d(seg_ids, "segment_ids");
    int32_2d(mask, "mask");
    int32_2d(pos_ids, "position_ids");
    const int64_t B = ids.dim(0), S = ids.dim(1);
    if (seg_ids && seg_ids->shape() != ids.shape())
      ctx.fail(StatusCode::kInvalidArgument, "segment_ids " + shape_to_string(seg_ids->shape()) +
                                                 " must have input_ids' shape " +
                                                 shape_to_string(ids.shape()));
    if (!seg_ids != !seg)
      ctx.fail(StatusCode::kInvalidArgument,
               "segment_ids and segment_embedding must be given together");
    if (mask && mask->shape() != ids.shape())
      ctx.fail(StatusCode::kInvalidArgument, "mask " + shape_to_string(mask->shape()) +
                                                 " must have input_ids' shape " +
                                                 shape_to_string(ids.shape()));
    if (pos_ids && (pos_ids->dim(1) != S || (pos_ids->dim(0) != B && pos_ids->dim(0) != 1)))
      ctx.fail(StatusCode::kInvalidArgument, "position_ids " + shape_to_string(pos_ids->shape()) +
                                                 " must be [" + std::to_string(B) + ", " +
                                                 std::to_string(S) + "] or [1, " +
                                                 std::to_string(S) + "]");
    check_type(ctx, word, "word_embedding", {DataType::kFloat});
    check_same_type(ctx, word,
                    {{&pos, "position_embedding"},
                     {seg, "segment_embedding"},
                     {&gamma, "gamma"},
                     {&beta, "beta"}});
    if (word.rank() != 2)
      ctx.fail(StatusCode::kInvalidArgument,
               "word_embedding must be 2-D, got shape " + shape_to_string(word.shape()));
    const int64_t H = word.dim(1);
    for (const auto& t :
         {std::make_pair(&pos, "position_embedding"), std::make_pair(seg, "segment_embedding")}) {
      if (t.first && (t.first->rank() != 2 || t.first->dim(1) != H))
        ctx.fail(StatusCode::kInvalidArgument,
                 std::string(t.second) + " must be 2-D with " + std::to_string(H) +
                     " columns (word_embedding's), got shape " + shape_to_string(t.first->shape()));
    }
    check_vector(ctx, gamma, H, "gamma");
    check_vector(ctx, beta, H, "beta");

    Tensor& Y = ctx.allocate_output(0, DataType::kFloat, Shape{B, S, H});
    int32_t* mask_index = wants_output(ctx, 1)
                              ? ctx.allocate_output(1, DataType::kInt32, Shape{B}).data<int32_t>()
                              : nullptr;
    float* emb_sum = wants_output(ctx, 2)
                         ? ctx.allocate_output(2, DataType::kFloat, Shape{B, S, H}).data<float>()
                         : nullptr;
    if (mask_index) {
      for (int64_t b = 0; b < B; ++b) {
        int32_t n = 0;
        if (mask) {
          const int32_t* m = mask->data<int32_t>() + b * S;
          for (int64_t s = 0; s < S; ++s) n += m[s] == 1;
        }
        mask_index[b] = n;
      }
    }
    if (Y.numel() == 0) return;

    const int32_t* id = ids.data<int32_t>();
    const int32_t* sid = seg_ids ? seg_ids->data<int32_t>() : nullptr;
    const int32_t* pid = pos_ids ? pos_ids->data<int32_t>() : nullptr;
    const bool pid_bcast = pos_ids && pos_ids->dim(0) == 1 && B != 1;
    const float* we = word.data<float>();
    const float* pe = pos.data<float>();
    const float* se = seg ? seg->data<float>() : nullptr;
    const float* g = gamma.data<float>();
    const float* bt = beta.data<float>();
    float* y = Y.data<float>();
    const int64_t V = word.dim(0), P = pos.dim(0), G = seg ? seg->dim(0) : 0;
    // The first out-of-range lookup (row-major order is not guaranteed across threads; any
    // one is reported).
    std::atomic<int64_t> bad{-1};
    std::atomic<int> bad_table{0};
    parallel_for(
        ctx.thread_pool(), B * S, 8.0 * static_cast<double>(H), [&](int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; ++r) {
            const int64_t w = id[r];
            const int64_t p = pid ? pid[pid_bcast ? r % S : r] : r % S;
            const int64_t sg = sid ? sid[r] : 0;
            int table = 0;
            if (w < 0 || w >= V)
              table = 1;
            else if (p < 0 || p >= P)
              table = 2;
            else if (sid && (sg < 0 || sg >= G))
              table = 3;
            if (table) {
              int64_t expected = -1;
              if (bad.compare_exchange_strong(expected, r)) bad_table.store(table);
              continue;
            }
            const float* wr = we + w * H;
            const float* pr = pe + p * H;
            float* yr = y + r * H;
            if (se) {
              const float* sr = se + sg * H;
              for (int64_t i = 0; i < H; ++i) yr[i] = wr[i] + pr[i] + sr[i];
            } else {
              for (int64_t i = 0; i < H; ++i) yr[i] = wr[i] + pr[i];
            }
            if (emb_sum) std::memcpy(emb_sum + r * H, yr, H * sizeof(float));
            double sum = 0;
            for (int64_t i = 0; i < H; ++i) sum += yr[i];
            const double mean = sum / static_cast<double>(H);
            double sq = 0;
            for (int64_t i = 0; i < H; ++i) {
              const double d = yr[i] - mean;
              sq += d * d;
            }
            const float inv =
                static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(H) + epsilon_));
            const float m = static_cast<float>(mean);
            for (int64_t i = 0; i < H; ++i) yr[i] = (yr[i] - m) * inv * g[i] + bt[i];
          }
        });
    if (bad.load() >= 0) {
      const int64_t r = bad.load();
      static const char* kTables[] = {"", "input_ids", "position_ids", "segment_ids"};
      const int t = bad_table.load();
      const int64_t v = t == 1   ? id[r]
                        : t == 2 ? (pid ? pid[pid_bcast ? r % S : r] : r % S)
                                 : sid[r];
      const int64_t limit = t == 1 ? V : t == 2 ? P : G;
      ctx.fail(StatusCode::kInvalidArgument,
               std::string(kTables[t]) + "[" + std::to_string(r / S) + ", " +
                   std::to_string(r % S) + "] = " + std::to_string(v) +
                   " is out of range: its embedding table has " + std::to_string(limit) + " rows");
    }
  }

 private:
  float epsilon_;
};

}  // namespace

void register_embed_layer_norm(KernelRegistry& r) {
  r.add("com.microsoft", "EmbedLayerNormalization", 1, kMaxOpset, make_factory<EmbedLayerNorm>());
}

}  // namespace contrib
}  // namespace ortlite
