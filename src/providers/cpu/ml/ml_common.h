// Shared helpers of the ai.onnx.ml kernels (src/providers/cpu/ml). Scores, post transforms and the
// binary-class expansion follow onnxruntime's CPU kernels where the ONNX specification is
// silent or vague, because models converted by skl2onnx & co. are checked against
// onnxruntime: its conventions are what users rely on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ortlite/kernel.h"

namespace ortlite {
namespace ml {

constexpr const char* kMlDomain = "ai.onnx.ml";

// Per-file registration, called by register_ml_kernels (register.cc).
void register_linear(KernelRegistry& r);           // linear.cc: LinearClassifier, LinearRegressor
void register_preprocess(KernelRegistry& r);       // preprocess.cc: Normalizer, Scaler, Binarizer,
                                                   // ArrayFeatureExtractor, ZipMap
void register_label_encoder(KernelRegistry& r);    // label_encoder.cc: LabelEncoder 1, 2, 4
void register_tree_ensemble(KernelRegistry& r);    // tree_ensemble.cc: TreeEnsembleClassifier,
                                                   // TreeEnsembleRegressor, TreeEnsemble
void register_one_hot_encoder(KernelRegistry& r);  // one_hot_encoder.cc: OneHotEncoder
void register_dict_vectorizer(KernelRegistry& r);  // dict_vectorizer.cc: DictVectorizer

enum class PostTransform { kNone, kLogistic, kSoftmax, kSoftmaxZero, kProbit };
// "NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"; anything else is InvalidGraph.
PostTransform parse_post_transform(const KernelInfo& info, const std::string& s);

float compute_logistic(float v);
// sqrt(2) * erfinv(2v - 1) with the closed-form erfinv approximation onnxruntime uses
// (Winitzki, a = 0.147), so PROBIT scores match it rather than the exact inverse.
float compute_probit(float v);
void softmax_inplace(float* v, int64_t n);
// Softmax that leaves (near) zero scores at zero weight: exp is taken of nonzero entries
// only.
void softmax_zero_inplace(float* v, int64_t n);

// The post transform of LinearClassifier / LinearRegressor over `scores`, N rows of
// `per_row` values (onnxruntime's batched_update_scores_inplace). With one score per row:
// PROBIT maps each score, and when `add_second_class` the buffer holds 2N floats and row i
// becomes [1 - s_i, s_i] (the raw score: LOGISTIC and SOFTMAX are not applied there);
// otherwise the single scores stay raw.
void update_scores(float* scores, int64_t n, int64_t per_row, PostTransform t,
                   bool add_second_class);

// X as [N, C] (a 1-D X is one row), for the ml operators that take a batch of feature
// rows. Fails naming the node when X's rank is 0 or above 2.
struct Rows {
  int64_t n = 0, c = 0;
};
Rows feature_rows(const KernelContext& ctx, const Tensor& x);

// X's values as float (float, double, int64 or int32); `op` names the operator in errors.
// Returns x's own memory when it already holds float, else fills `buf`.
const float* values_as_float(const KernelContext& ctx, const Tensor& x, std::vector<float>& buf);

}  // namespace ml
}  // namespace ortlite
