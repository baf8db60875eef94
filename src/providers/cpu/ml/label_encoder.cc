// LabelEncoder (ai.onnx.ml 1, 2, 4): maps every element of X through a table fixed at load.
//   1: classes_strings; string -> its index (default_int64), int64 -> classes_strings[x]
//      (default_string).
//   2: keys_{strings,int64s,floats} -> values_{strings,int64s,floats}, default_*.
//   4: also keys_tensor / values_tensor / default_tensor, with int32, int16 and double.
// A repeated key keeps its first value, as onnxruntime has it (the opset 4 text says the
// last; converted models are checked against onnxruntime). Float keys match as values, not
// bits: every NaN matches a NaN key and 0 matches -0, as in onnxruntime.
#include <cmath>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "providers/cpu/ml/ml_common.h"

namespace ortlite {
namespace ml {
namespace {

// ---- LabelEncoder 1 -------------------------------------------------------------------

class LabelEncoderV1 final : public Kernel {
 public:
  explicit LabelEncoderV1(const KernelInfo& info)
      : classes_(info.attr_strings("classes_strings")),
        default_int_(info.attr_int("default_int64", -1)),
        default_str_(info.attr_string("default_string", "_Unused")) {
    for (size_t i = 0; i < classes_.size(); ++i) index_[classes_[i]] = static_cast<int64_t>(i);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const int64_t n = x.numel();
    if (x.dtype() == DataType::kString) {
      Tensor& y = ctx.allocate_output(0, DataType::kInt64, x.shape());
      const std::string* in = x.data<std::string>();
      int64_t* out = y.data<int64_t>();
      for (int64_t i = 0; i < n; ++i) {
        auto it = index_.find(in[i]);
        out[i] = it == index_.end() ? default_int_ : it->second;
      }
    } else if (x.dtype() == DataType::kInt64) {
      Tensor& y = ctx.allocate_output(0, DataType::kString, x.shape());
      const int64_t* in = x.data<int64_t>();
      std::string* out = y.data<std::string>();
      const int64_t nc = static_cast<int64_t>(classes_.size());
      for (int64_t i = 0; i < n; ++i)
        out[i] = in[i] >= 0 && in[i] < nc ? classes_[static_cast<size_t>(in[i])] : default_str_;
    } else {
      ctx.fail(StatusCode::kInvalidArgument, std::string("input 'X' has type ") +
                                                 dtype_name(x.dtype()) +
                                                 "; expected string or int64");
    }
  }

 private:
  std::vector<std::string> classes_;
  std::unordered_map<std::string, int64_t> index_;
  int64_t default_int_;
  std::string default_str_;
};

// ---- LabelEncoder 2 and 4 -------------------------------------------------------------

template <typename K, typename V>
class LabelEncoderMap final : public Kernel {
 public:
  LabelEncoderMap(const Tensor& keys, const Tensor& values, const Tensor& default_value)
      : default_(default_value.data<V>()[0]) {
    const K* k = keys.data<K>();
    const V* v = values.data<V>();
    for (int64_t i = 0; i < keys.numel(); ++i) {
      values_.push_back(v[i]);
      if constexpr (std::is_floating_point_v<K>) {
        if (std::isnan(k[i])) {
          if (!has_nan_) nan_index_ = values_.size() - 1;
          has_nan_ = true;
          continue;
        }
        map_.emplace(k[i] == K(0) ? K(0) : k[i], values_.size() - 1);
      } else {
        map_.emplace(k[i], values_.size() - 1);
      }
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    if (x.dtype() != DataTypeOf<K>::value) {
      ctx.fail(StatusCode::kInvalidArgument, std::string("input 'X' has type ") +
                                                 dtype_name(x.dtype()) + " but the keys are " +
                                                 dtype_name(DataTypeOf<K>::value));
    }
    Tensor& y = ctx.allocate_output(0, DataTypeOf<V>::value, x.shape());
    const K* in = x.data<K>();
    V* out = y.data<V>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_floating_point_v<K>) {
        if (std::isnan(in[i])) {
          out[i] = has_nan_ ? values_[nan_index_] : default_;
          continue;
        }
      }
      auto it = map_.find(in[i]);
      out[i] = it == map_.end() ? default_ : values_[it->second];
    }
  }

 private:
  std::unordered_map<K, size_t> map_;
  std::vector<V> values_;
  V default_;
  bool has_nan_ = false;
  size_t nan_index_ = 0;
};

bool label_type_ok(DataType t, bool v4) {
  switch (t) {
    case DataType::kString:
    case DataType::kInt64:
    case DataType::kFloat:
      return true;
    case DataType::kInt32:
    case DataType::kInt16:
    case DataType::kDouble:
      return v4;
    default:
      return false;
  }
}

// The one keys_* (prefix "keys") or values_* attribute as a 1-D tensor.
Tensor table_attr(const KernelInfo& info, const std::string& prefix, bool v4) {
  const std::string s = prefix + "_strings", i = prefix + "_int64s", f = prefix + "_floats",
                    t = prefix + "_tensor";
  std::vector<Tensor> found;
  if (info.has_attr(s.c_str())) {
    const std::vector<std::string> v = info.attr_strings(s.c_str());
    Tensor out = Tensor::empty(DataType::kString, {static_cast<int64_t>(v.size())});
    for (size_t k = 0; k < v.size(); ++k) out.data<std::string>()[k] = v[k];
    found.push_back(out);
  }
  if (info.has_attr(i.c_str())) {
    const std::vector<int64_t> v = info.attr_ints(i.c_str());
    found.push_back(Tensor::from_vector(v, {static_cast<int64_t>(v.size())}));
  }
  if (info.has_attr(f.c_str())) {
    const std::vector<float> v = info.attr_floats(f.c_str());
    found.push_back(Tensor::from_vector(v, {static_cast<int64_t>(v.size())}));
  }
  if (v4 && info.has_attr(t.c_str())) {
    const Tensor* a = info.attr_tensor(t.c_str());
    if (a->rank() != 1) {
      info.fail(StatusCode::kInvalidGraph,
                "attribute '" + t + "' must be 1-D, got " + shape_to_string(a->shape()));
    }
    found.push_back(*a);
  }
  if (found.size() != 1) {
    info.fail(StatusCode::kInvalidGraph, "exactly one '" + prefix +
                                             "_*' attribute must be set, found " +
                                             std::to_string(found.size()));
  }
  if (!label_type_ok(found[0].dtype(), v4)) {
    info.fail(StatusCode::kInvalidGraph, "attribute '" + prefix + "_*' has element type " +
                                             dtype_name(found[0].dtype()) +
                                             ", which LabelEncoder does not take");
  }
  return found[0];
}

Tensor default_for(const KernelInfo& info, DataType vt, bool v4) {
  if (v4 && info.has_attr("default_tensor")) {
    const Tensor* d = info.attr_tensor("default_tensor");
    if (d->dtype() != vt || d->numel() != 1) {
      info.fail(StatusCode::kInvalidGraph,
                std::string("attribute 'default_tensor' must hold one ") + dtype_name(vt) +
                    ", got " + dtype_name(d->dtype()) + " " + shape_to_string(d->shape()));
    }
    return *d;
  }
  switch (vt) {
    case DataType::kString: {
      Tensor t = Tensor::empty(DataType::kString, {1});
      t.data<std::string>()[0] = info.attr_string("default_string", "_Unused");
      return t;
    }
    case DataType::kInt64:
      return Tensor::from_vector(std::vector<int64_t>{info.attr_int("default_int64", -1)}, {1});
    case DataType::kFloat:
      return Tensor::from_vector(std::vector<float>{info.attr_float("default_float", -0.f)}, {1});
    case DataType::kDouble:
      return Tensor::from_vector(std::vector<double>{-0.0}, {1});
    case DataType::kInt32:
      return Tensor::from_vector(std::vector<int32_t>{-1}, {1});
    default:
      return Tensor::from_vector(std::vector<int16_t>{-1}, {1});
  }
}

template <typename Fn>
void dispatch_label(DataType t, Fn&& fn) {
  switch (t) {
    case DataType::kString:
      return fn(std::string{});
    case DataType::kInt64:
      return fn(int64_t{});
    case DataType::kFloat:
      return fn(float{});
    case DataType::kInt32:
      return fn(int32_t{});
    case DataType::kInt16:
      return fn(int16_t{});
    default:
      return fn(double{});
  }
}

std::unique_ptr<Kernel> make_label_encoder(const KernelInfo& info, bool v4) {
  const Tensor keys = table_attr(info, "keys", v4);
  const Tensor values = table_attr(info, "values", v4);
  if (keys.numel() != values.numel()) {
    info.fail(StatusCode::kInvalidGraph, "the keys (" + std::to_string(keys.numel()) +
                                             ") and values (" + std::to_string(values.numel()) +
                                             ") have different lengths");
  }
  const Tensor def = default_for(info, values.dtype(), v4);
  std::unique_ptr<Kernel> k;
  dispatch_label(keys.dtype(), [&](auto ktag) {
    dispatch_label(values.dtype(), [&](auto vtag) {
      using K = decltype(ktag);
      using V = decltype(vtag);
      k = std::make_unique<LabelEncoderMap<K, V>>(keys, values, def);
    });
  });
  return k;
}

}  // namespace

void register_label_encoder(KernelRegistry& r) {
  r.add(kMlDomain, "LabelEncoder", 1, 1, make_factory<LabelEncoderV1>());
  r.add(kMlDomain, "LabelEncoder", 2, 3,
        [](const KernelInfo& info) { return make_label_encoder(info, false); });
  r.add(kMlDomain, "LabelEncoder", 4, kMaxOpset,
        [](const KernelInfo& info) { return make_label_encoder(info, true); });
}

}  // namespace ml
}  // namespace ortlite
