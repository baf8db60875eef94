// The ai.onnx.ml feature preprocessing operators (all opset 1): Normalizer, Scaler,
// Binarizer, ArrayFeatureExtractor, and ZipMap, which turns a [N, C] score tensor into N
// maps {class label: score} (Value::maps).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "providers/cpu/ml/ml_common.h"

namespace ortlite {
namespace ml {
namespace {

[[noreturn]] void bad_type(const KernelContext& ctx, const Tensor& x, const char* allowed) {
  ctx.fail(StatusCode::kInvalidArgument,
           std::string("input 'X' has type ") + dtype_name(x.dtype()) + "; expected " + allowed);
}

// Calls fn(T{}) for the float, double, int64 and int32 inputs the ml operators take.
template <typename Fn>
void dispatch_features(const KernelContext& ctx, const Tensor& x, Fn&& fn) {
  switch (x.dtype()) {
    case DataType::kFloat:
      return fn(float{});
    case DataType::kDouble:
      return fn(double{});
    case DataType::kInt64:
      return fn(int64_t{});
    case DataType::kInt32:
      return fn(int32_t{});
    default:
      bad_type(ctx, x, "float, double, int64 or int32");
  }
}

// ---- Normalizer ---------------------------------------------------------------------------
// Per row: x / max(x), x / sum|x| or x / sqrt(sum x^2), in float; a row whose norm is 0 is
// copied unchanged (onnxruntime's rule, which also keeps rows of zeros at zero).

enum class Norm { kMax, kL1, kL2 };

class Normalizer final : public Kernel {
 public:
  explicit Normalizer(const KernelInfo& info) {
    const std::string n = info.attr_string("norm", "MAX");
    if (n == "MAX") {
      norm_ = Norm::kMax;
    } else if (n == "L1") {
      norm_ = Norm::kL1;
    } else if (n == "L2") {
      norm_ = Norm::kL2;
    } else {
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'norm' = '" + n + "' is not one of MAX, L1, L2");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Rows rows = feature_rows(ctx, x);
    dispatch_features(ctx, x, [&](auto tag) {
      using T = decltype(tag);
      Tensor& y = ctx.allocate_output(0, DataType::kFloat, x.shape());
      const T* in = x.data<T>();
      float* out = y.data<float>();
      for (int64_t b = 0; b < rows.n; ++b) {
        const T* xi = in + b * rows.c;
        float* yi = out + b * rows.c;
        float d = 0.f;
        switch (norm_) {
          case Norm::kMax:
            d = std::numeric_limits<float>::lowest();
            for (int64_t i = 0; i < rows.c; ++i) d = std::max(d, static_cast<float>(xi[i]));
            break;
          case Norm::kL1:
            for (int64_t i = 0; i < rows.c; ++i)
              d += static_cast<float>(std::abs(static_cast<double>(xi[i])));
            break;
          case Norm::kL2:
            for (int64_t i = 0; i < rows.c; ++i) {
              const double v = static_cast<double>(xi[i]);
              d += static_cast<float>(v * v);
            }
            break;
        }
        if (d == 0.f) {
          for (int64_t i = 0; i < rows.c; ++i) yi[i] = static_cast<float>(xi[i]);
        } else if (norm_ == Norm::kL2) {
          for (int64_t i = 0; i < rows.c; ++i) {
            const double v = static_cast<double>(xi[i]);
            const float r = std::sqrt(static_cast<float>(v * v) / d);
            yi[i] = v < 0 ? -r : r;
          }
        } else {
          for (int64_t i = 0; i < rows.c; ++i) yi[i] = static_cast<float>(xi[i]) / d;
        }
      }
    });
  }

 private:
  Norm norm_ = Norm::kMax;
};

// ---- Scaler -------------------------------------------------------------------------------
// y = (x - offset) * scale with offset and scale per feature (length C) or one value each.

class Scaler final : public Kernel {
 public:
  explicit Scaler(const KernelInfo& info)
      : scale_(info.attr_floats("scale")), offset_(info.attr_floats("offset")) {
    if (scale_.empty()) info.fail(StatusCode::kInvalidGraph, "attribute 'scale' is missing");
    if (scale_.size() != offset_.size()) {
      info.fail(StatusCode::kInvalidGraph,
                "attributes 'scale' (" + std::to_string(scale_.size()) + " values) and 'offset' (" +
                    std::to_string(offset_.size()) + " values) must have the same length");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Rows rows = feature_rows(ctx, x);
    const int64_t k = static_cast<int64_t>(scale_.size());
    if (k != 1 && k != rows.c) {
      ctx.fail(StatusCode::kInvalidArgument,
               "attributes 'scale' and 'offset' have " + std::to_string(k) +
                   " values; expected 1 or the feature count " + std::to_string(rows.c));
    }
    dispatch_features(ctx, x, [&](auto tag) {
      using T = decltype(tag);
      Tensor& y = ctx.allocate_output(0, DataType::kFloat, x.shape());
      const T* in = x.data<T>();
      float* out = y.data<float>();
      const int64_t n = x.numel();
      for (int64_t i = 0; i < n; ++i) {
        const size_t j = k == 1 ? 0 : static_cast<size_t>(i % rows.c);
        // In T's arithmetic (double stays double), as onnxruntime computes it.
        out[i] = static_cast<float>((in[i] - offset_[j]) * scale_[j]);
      }
    });
  }

 private:
  std::vector<float> scale_, offset_;
};

// ---- Binarizer ----------------------------------------------------------------------------
// y = x > threshold ? 1 : 0 in x's type. NaN is not greater than anything, so it maps to 0
// (onnxruntime rejects NaN inputs instead).

class Binarizer final : public Kernel {
 public:
  explicit Binarizer(const KernelInfo& info) : threshold_(info.attr_float("threshold", 0.f)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    dispatch_features(ctx, x, [&](auto tag) {
      using T = decltype(tag);
      Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
      const T* in = x.data<T>();
      T* out = y.data<T>();
      const int64_t n = x.numel();
      for (int64_t i = 0; i < n; ++i) out[i] = in[i] > threshold_ ? T(1) : T(0);
    });
  }

 private:
  float threshold_;
};

// ---- ArrayFeatureExtractor ----------------------------------------------------------------
// Z[..., j] = X[..., Y[j]] over the last axis, Y flattened. A 1-D X gives [1, len(Y)], as
// onnxruntime (and the ONNX reference) shape it.

class ArrayFeatureExtractor final : public Kernel {
 public:
  explicit ArrayFeatureExtractor(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& idx = ctx.required_input(1);
    if (x.rank() == 0)
      ctx.fail(StatusCode::kInvalidArgument, "input 'X' must have rank >= 1, got a scalar");
    if (idx.dtype() != DataType::kInt64) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input 'Y' must be int64, got ") + dtype_name(idx.dtype()));
    }
    const int64_t stride = x.dim(x.rank() - 1);
    const int64_t k = idx.numel();
    const int64_t* ind = idx.data<int64_t>();
    for (int64_t j = 0; j < k; ++j) {
      if (ind[j] < 0 || ind[j] >= stride) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "index Y[" + std::to_string(j) + "] = " + std::to_string(ind[j]) +
                     " is out of range [0, " + std::to_string(stride) + ")");
      }
    }
    Shape zs = x.shape();
    if (x.rank() == 1) {
      zs = {1, k};
    } else {
      zs.back() = k;
    }
    const int64_t outer = stride == 0 ? 0 : x.numel() / stride;
    auto gather = [&](auto tag) {
      using T = decltype(tag);
      Tensor& z = ctx.allocate_output(0, x.dtype(), zs);
      const T* in = x.data<T>();
      T* out = z.data<T>();
      for (int64_t i = 0; i < outer; ++i)
        for (int64_t j = 0; j < k; ++j) *out++ = in[i * stride + ind[j]];
    };
    switch (x.dtype()) {
      case DataType::kFloat:
        return gather(float{});
      case DataType::kDouble:
        return gather(double{});
      case DataType::kInt64:
        return gather(int64_t{});
      case DataType::kInt32:
        return gather(int32_t{});
      case DataType::kString:
        return gather(std::string{});
      default:
        bad_type(ctx, x, "float, double, int64, int32 or string");
    }
  }
};

// ---- ZipMap -------------------------------------------------------------------------------
// The keys are resolved once at load the way onnxruntime's std::map resolves them: sorted,
// a repeated label keeps its last column. When that changes nothing, the output's values
// are the input itself.

class ZipMap final : public Kernel {
 public:
  explicit ZipMap(const KernelInfo& info) {
    const std::vector<int64_t> ints = info.attr_ints("classlabels_int64s");
    const std::vector<std::string> strs = info.attr_strings("classlabels_strings");
    if (ints.empty() == strs.empty()) {
      info.fail(StatusCode::kInvalidGraph,
                "exactly one of 'classlabels_int64s' and 'classlabels_strings' must be set");
    }
    if (!ints.empty()) {
      std::map<int64_t, int64_t> last;
      for (size_t j = 0; j < ints.size(); ++j) last[ints[j]] = static_cast<int64_t>(j);
      std::vector<int64_t> keys;
      for (const auto& [k, j] : last) {
        keys.push_back(k);
        columns_.push_back(j);
      }
      keys_ = Tensor::from_vector(keys, {static_cast<int64_t>(keys.size())});
      ncols_ = static_cast<int64_t>(ints.size());
    } else {
      std::map<std::string, int64_t> last;
      for (size_t j = 0; j < strs.size(); ++j) last[strs[j]] = static_cast<int64_t>(j);
      keys_ = Tensor::empty(DataType::kString, {static_cast<int64_t>(last.size())});
      std::string* kd = keys_.data<std::string>();
      for (const auto& [k, j] : last) {
        *kd++ = k;
        columns_.push_back(j);
      }
      ncols_ = static_cast<int64_t>(strs.size());
    }
    for (size_t j = 0; j < columns_.size(); ++j)
      identity_ = identity_ && columns_[j] == static_cast<int64_t>(j);
    identity_ = identity_ && static_cast<int64_t>(columns_.size()) == ncols_;
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    if (x.dtype() != DataType::kFloat) bad_type(ctx, x, "float");
    const Rows rows = feature_rows(ctx, x);
    if (rows.c != ncols_) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'X' has " + std::to_string(rows.c) +
                                                 " columns but there are " +
                                                 std::to_string(ncols_) + " class labels");
    }
    if (identity_) {
      ctx.set_output_value(0, Value::maps(keys_, x.reshaped({rows.n, rows.c})));
      return;
    }
    const int64_t u = static_cast<int64_t>(columns_.size());
    Tensor values = Tensor::empty(DataType::kFloat, {rows.n, u});
    const float* in = x.data<float>();
    float* out = values.data<float>();
    for (int64_t i = 0; i < rows.n; ++i)
      for (int64_t j = 0; j < u; ++j) out[i * u + j] = in[i * rows.c + columns_[j]];
    ctx.set_output_value(0, Value::maps(keys_, std::move(values)));
  }

 private:
  Tensor keys_;                   // sorted, unique
  std::vector<int64_t> columns_;  // the input column of each key
  int64_t ncols_ = 0;
  bool identity_ = true;
};

}  // namespace

void register_preprocess(KernelRegistry& r) {
  r.add(kMlDomain, "Normalizer", 1, kMaxOpset, make_factory<Normalizer>());
  r.add(kMlDomain, "Scaler", 1, kMaxOpset, make_factory<Scaler>());
  r.add(kMlDomain, "Binarizer", 1, kMaxOpset, make_factory<Binarizer>());
  r.add(kMlDomain, "ArrayFeatureExtractor", 1, kMaxOpset, make_factory<ArrayFeatureExtractor>());
  r.add(kMlDomain, "ZipMap", 1, kMaxOpset, make_factory<ZipMap>());
}

}  // namespace ml
}  // namespace ortlite
