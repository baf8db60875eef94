// LinearClassifier and LinearRegressor (ai.onnx.ml 1): scores = X * coefficients^T +
// intercepts through the float GEMM, then the label (classifier) and the post transform.
// X is [N, C] or [C] (one row) of float, double, int64 or int32, converted to float as
// onnxruntime does; scores are float.
#include <algorithm>
#include <string>
#include <vector>

#include "providers/cpu/ml/ml_common.h"
#include "compute/gemm.h"

namespace ortlite {
namespace ml {
namespace {

// scores[N x E] = X[N x C] * coef[E x C]^T + intercepts (when not empty). Coefficients
// beyond E * C are ignored, as onnxruntime's GEMM ignores them: logreg_iris.onnx, which
// onnxruntime ships, holds 3 x 4 coefficients for inputs of 2 features.
void linear_scores(const KernelContext& ctx, const float* x, Rows rows, int64_t e,
                   const std::vector<float>& coef, const std::vector<float>& intercepts,
                   float* scores) {
  if (static_cast<int64_t>(coef.size()) < e * rows.c) {
    ctx.fail(StatusCode::kInvalidArgument,
             "attribute 'coefficients' has " + std::to_string(coef.size()) + " values; " +
                 std::to_string(e) + " targets of " + std::to_string(rows.c) + " features need " +
                 std::to_string(e * rows.c));
  }
  if (rows.n == 0 || e == 0) return;
  if (rows.c == 0) {
    std::fill(scores, scores + rows.n * e, 0.f);
  } else {
    gemm(false, true, rows.n, e, rows.c, 1.f, x, rows.c, coef.data(), rows.c, 0.f, scores, e,
         ctx.thread_pool());
  }
  if (intercepts.empty()) return;
  for (int64_t i = 0; i < rows.n; ++i)
    for (int64_t j = 0; j < e; ++j) scores[i * e + j] += intercepts[static_cast<size_t>(j)];
}

class LinearClassifier final : public Kernel {
 public:
  explicit LinearClassifier(const KernelInfo& info)
      : coef_(info.attr_floats("coefficients")),
        intercepts_(info.attr_floats("intercepts")),
        labels_int_(info.attr_ints("classlabels_ints")),
        labels_str_(info.attr_strings("classlabels_strings")),
        post_(parse_post_transform(info, info.attr_string("post_transform", "NONE"))) {
    if (coef_.empty()) info.fail(StatusCode::kInvalidGraph, "attribute 'coefficients' is missing");
    if (labels_int_.empty() == labels_str_.empty()) {
      info.fail(StatusCode::kInvalidGraph,
                "exactly one of 'classlabels_ints' and 'classlabels_strings' must be set");
    }
    strings_ = !labels_str_.empty();
    const size_t nlabels = strings_ ? labels_str_.size() : labels_int_.size();
    // The class count is the intercepts' length (as onnxruntime has it), else what the
    // coefficients give at run time.
    if (intercepts_.size() > 1 && nlabels < intercepts_.size()) {
      info.fail(StatusCode::kInvalidGraph, std::to_string(intercepts_.size()) +
                                               " classes (intercepts) but " +
                                               std::to_string(nlabels) + " class labels");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Rows rows = feature_rows(ctx, x);
    int64_t e = static_cast<int64_t>(intercepts_.size());
    if (e == 0) {
      if (rows.c == 0 || static_cast<int64_t>(coef_.size()) % rows.c != 0) {
        ctx.fail(StatusCode::kInvalidArgument, "attribute 'coefficients' (" +
                                                   std::to_string(coef_.size()) +
                                                   " values) is not a whole number of rows of " +
                                                   std::to_string(rows.c) + " features");
      }
      e = static_cast<int64_t>(coef_.size()) / rows.c;
    }
    const size_t nlabels = strings_ ? labels_str_.size() : labels_int_.size();
    if (e > 1 && static_cast<int64_t>(nlabels) < e) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::to_string(e) + " classes but " + std::to_string(nlabels) + " class labels");
    }
    // One score per row and two labels: the score is the positive class's, and Z gets
    // both columns.
    const bool second = e == 1 && nlabels == 2;
    std::vector<float> buf;
    const float* xf = values_as_float(ctx, x, buf);
    Tensor& y = ctx.allocate_output(0, strings_ ? DataType::kString : DataType::kInt64, {rows.n});
    Tensor& z = ctx.allocate_output(1, DataType::kFloat, {rows.n, second ? 2 : e});
    float* s = z.data<float>();
    linear_scores(
        ctx, xf, rows, e, coef_,
        e == static_cast<int64_t>(intercepts_.size()) ? intercepts_ : std::vector<float>{}, s);
    for (int64_t i = 0; i < rows.n; ++i) {
      size_t cls;
      if (e == 1) {
        const bool pos = s[i] > 0;
        if (nlabels == 2) {
          cls = pos ? 1 : 0;
        } else {
          // Without exactly two labels a binary model answers 1 / 0.
          if (strings_) {
            y.data<std::string>()[i] = pos ? "1" : "0";
          } else {
            y.data<int64_t>()[i] = pos ? 1 : 0;
          }
          continue;
        }
      } else {
        const float* row = s + i * e;
        cls = 0;
        float best = row[0];
        for (int64_t j = 1; j < e; ++j) {
          if (row[j] > best) {
            best = row[j];
            cls = static_cast<size_t>(j);
          }
        }
      }
      if (strings_) {
        y.data<std::string>()[i] = labels_str_[cls];
      } else {
        y.data<int64_t>()[i] = labels_int_[cls];
      }
    }
    update_scores(s, rows.n, e, post_, second);
  }

 private:
  std::vector<float> coef_, intercepts_;
  std::vector<int64_t> labels_int_;
  std::vector<std::string> labels_str_;
  PostTransform post_;
  bool strings_ = false;
};

class LinearRegressor final : public Kernel {
 public:
  explicit LinearRegressor(const KernelInfo& info)
      : coef_(info.attr_floats("coefficients")),
        intercepts_(info.attr_floats("intercepts")),
        targets_(info.attr_int("targets", 1)),
        post_(parse_post_transform(info, info.attr_string("post_transform", "NONE"))) {
    if (coef_.empty()) info.fail(StatusCode::kInvalidGraph, "attribute 'coefficients' is missing");
    // Each target has at least one coefficient (one per feature).
    if (targets_ < 1 || targets_ > static_cast<int64_t>(coef_.size())) {
      info.fail(StatusCode::kInvalidGraph, "attribute 'targets' = " + std::to_string(targets_) +
                                               " must be in [1, " + std::to_string(coef_.size()) +
                                               "] (the number of coefficients)");
    }
    // Intercepts of another length are ignored, as onnxruntime does.
    if (static_cast<int64_t>(intercepts_.size()) != targets_) intercepts_.clear();
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Rows rows = feature_rows(ctx, x);
    std::vector<float> buf;
    const float* xf = values_as_float(ctx, x, buf);
    Tensor& y = ctx.allocate_output(0, DataType::kFloat, {rows.n, targets_});
    linear_scores(ctx, xf, rows, targets_, coef_, intercepts_, y.data<float>());
    update_scores(y.data<float>(), rows.n, targets_, post_, false);
  }

 private:
  std::vector<float> coef_, intercepts_;
  int64_t targets_;
  PostTransform post_;
};

}  // namespace

void register_linear(KernelRegistry& r) {
  r.add(kMlDomain, "LinearClassifier", 1, kMaxOpset, make_factory<LinearClassifier>());
  r.add(kMlDomain, "LinearRegressor", 1, kMaxOpset, make_factory<LinearRegressor>());
}

}  // namespace ml
}  // namespace ortlite
