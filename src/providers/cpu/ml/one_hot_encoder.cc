// OneHotEncoder (ai.onnx.ml 1): Y[..., j] = 1 where X[...] is the j-th category of
// cats_int64s or cats_strings, 0 elsewhere; Y's shape is X's plus a last dim of the
// number of categories. A value that is no category gives a row of zeros when
// `zeros` = 1 (the default) and fails the run (Fail, as onnxruntime) when `zeros` = 0.
// Numeric inputs (int64, int32, float, double) are matched against cats_int64s after a
// truncation to int64, as onnxruntime does; a float that has no int64 value (NaN, out of
// range) is no category. String inputs are matched against cats_strings. An input whose
// kind is not that of the categories (strings against cats_int64s, numbers against
// cats_strings) matches nothing: every element is an unknown category, as in onnxruntime.
#include <cmath>
#include <string>
#include <unordered_map>
#include <vector>

#include "providers/cpu/ml/ml_common.h"

namespace ortlite {
namespace ml {
namespace {

class OneHotEncoder final : public Kernel {
 public:
  explicit OneHotEncoder(const KernelInfo& info) : zeros_(info.attr_int("zeros", 1) != 0) {
    const std::vector<int64_t> ints = info.attr_ints("cats_int64s");
    const std::vector<std::string> strs = info.attr_strings("cats_strings");
    if (ints.empty() == strs.empty()) {
      info.fail(StatusCode::kInvalidGraph,
                "exactly one of the attributes 'cats_int64s' and 'cats_strings' must be set "
                "and non-empty");
    }
    // A repeated category keeps its first position.
    for (size_t i = 0; i < ints.size(); ++i) int_index_.emplace(ints[i], static_cast<int64_t>(i));
    for (size_t i = 0; i < strs.size(); ++i) str_index_.emplace(strs[i], static_cast<int64_t>(i));
    num_cats_ = static_cast<int64_t>(ints.empty() ? strs.size() : ints.size());
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const DataType dt = x.dtype();
    if (dt != DataType::kString && dt != DataType::kInt64 && dt != DataType::kInt32 &&
        dt != DataType::kFloat && dt != DataType::kDouble) {
      ctx.fail(StatusCode::kInvalidArgument, std::string("input 'X' has type ") + dtype_name(dt) +
                                                 "; expected string, int64, int32, float or "
                                                 "double");
    }
    Shape shape = x.shape();
    shape.push_back(num_cats_);
    Tensor& y = ctx.allocate_output(0, DataType::kFloat, shape);
    float* out = y.data<float>();
    const int64_t n = x.numel();
    std::fill(out, out + n * num_cats_, 0.f);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = category_of(x, i);
      if (j >= 0) {
        out[i * num_cats_ + j] = 1.f;
      } else if (!zeros_) {
        ctx.fail(StatusCode::kFail, "Unknown Category and zeros = 0: element " + std::to_string(i) +
                                        " of input 'X' is no category");
      }
    }
  }

 private:
  template <typename T>
  int64_t int_category(T v) const {
    if constexpr (std::is_floating_point_v<T>) {
      // Truncation like onnxruntime's static_cast, without its undefined behaviour.
      if (!(v > -9.2233720368547758e18 && v < 9.2233720368547758e18)) return -1;
    }
    auto it = int_index_.find(static_cast<int64_t>(v));
    return it == int_index_.end() ? -1 : it->second;
  }

  int64_t category_of(const Tensor& x, int64_t i) const {
    switch (x.dtype()) {
      case DataType::kString: {
        auto it = str_index_.find(x.data<std::string>()[i]);
        return it == str_index_.end() ? -1 : it->second;
      }
      case DataType::kInt64:
        return int_category(x.data<int64_t>()[i]);
      case DataType::kInt32:
        return int_category(x.data<int32_t>()[i]);
      case DataType::kFloat:
        return int_category(x.data<float>()[i]);
      default:
        return int_category(x.data<double>()[i]);
    }
  }

  std::unordered_map<int64_t, int64_t> int_index_;
  std::unordered_map<std::string, int64_t> str_index_;
  int64_t num_cats_ = 0;
  bool zeros_;
};

}  // namespace

void register_one_hot_encoder(KernelRegistry& r) {
  r.add(kMlDomain, "OneHotEncoder", 1, kMaxOpset, make_factory<OneHotEncoder>());
}

}  // namespace ml
}  // namespace ortlite
