// DictVectorizer (ai.onnx.ml 1): a map(K, V) (a Value::map, fed as a dict) becomes a
// [1, V] tensor of the map's value type over the vocabulary (string_vocabulary for string
// keys, int64_vocabulary for int64 keys): Y[0, j] is the value of the j-th vocabulary
// word, 0 (or "" for string values) when the map does not hold it. Keys outside the
// vocabulary are ignored, as in onnxruntime. Value types: float, double, int64, string.
#include <string>
#include <unordered_map>
#include <vector>

#include "providers/cpu/ml/ml_common.h"

namespace ortlite {
namespace ml {
namespace {

class DictVectorizer final : public Kernel {
 public:
  explicit DictVectorizer(const KernelInfo& info) {
    const std::vector<int64_t> ints = info.attr_ints("int64_vocabulary");
    const std::vector<std::string> strs = info.attr_strings("string_vocabulary");
    if (ints.empty() == strs.empty()) {
      info.fail(StatusCode::kInvalidGraph,
                "exactly one of the attributes 'int64_vocabulary' and 'string_vocabulary' "
                "must be set and non-empty");
    }
    // A repeated word keeps its first column.
    for (size_t i = 0; i < ints.size(); ++i) int_index_.emplace(ints[i], static_cast<int64_t>(i));
    for (size_t i = 0; i < strs.size(); ++i) str_index_.emplace(strs[i], static_cast<int64_t>(i));
    size_ = static_cast<int64_t>(ints.empty() ? strs.size() : ints.size());
    key_type_ = ints.empty() ? DataType::kString : DataType::kInt64;
  }

  void compute(KernelContext& ctx) const override {
    const Value* in = ctx.input_value(0);
    if (!in || !in->is_map()) {
      ctx.fail(StatusCode::kInvalidArgument, std::string("input 'X' must be a map, got ") +
                                                 (in ? in->type_string() : std::string("nothing")));
    }
    const Tensor& keys = in->map_keys();
    const Tensor& values = in->map_values();
    if (keys.dtype() != key_type_) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input 'X' has ") + dtype_name(keys.dtype()) +
                   " keys but the vocabulary is " +
                   (key_type_ == DataType::kString ? "string_vocabulary" : "int64_vocabulary"));
    }
    const DataType vt = values.dtype();
    if (vt != DataType::kFloat && vt != DataType::kDouble && vt != DataType::kInt64 &&
        vt != DataType::kString) {
      ctx.fail(StatusCode::kInvalidArgument, std::string("input 'X' has ") + dtype_name(vt) +
                                                 " values; expected float, double, int64 or "
                                                 "string");
    }
    Tensor& y = ctx.allocate_output(0, vt, {1, size_});
    auto fill = [&](auto tag) {
      using V = decltype(tag);
      V* out = y.data<V>();
      for (int64_t j = 0; j < size_; ++j) out[j] = V{};
      const V* src = values.data<V>();
      for (int64_t i = 0; i < keys.numel(); ++i) {
        const int64_t j = column_of(keys, i);
        if (j >= 0) out[j] = src[i];
      }
    };
    switch (vt) {
      case DataType::kFloat:
        return fill(float{});
      case DataType::kDouble:
        return fill(double{});
      case DataType::kInt64:
        return fill(int64_t{});
      default:
        return fill(std::string{});
    }
  }

 private:
  int64_t column_of(const Tensor& keys, int64_t i) const {
    if (key_type_ == DataType::kString) {
      auto it = str_index_.find(keys.data<std::string>()[i]);
      return it == str_index_.end() ? -1 : it->second;
    }
    auto it = int_index_.find(keys.data<int64_t>()[i]);
    return it == int_index_.end() ? -1 : it->second;
  }

  std::unordered_map<int64_t, int64_t> int_index_;
  std::unordered_map<std::string, int64_t> str_index_;
  int64_t size_ = 0;
  DataType key_type_ = DataType::kString;
};

}  // namespace

void register_dict_vectorizer(KernelRegistry& r) {
  r.add(kMlDomain, "DictVectorizer", 1, kMaxOpset, make_factory<DictVectorizer>());
}

}  // namespace ml
}  // namespace ortlite
