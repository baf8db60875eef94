// Value: what a graph edge carries. A tensor (the common case), a sequence of tensors, a
// sequence of maps that share one key set (ai.onnx.ml ZipMap), one map (a map input of
// DictVectorizer), or an optional that holds nothing. An optional that holds something is
// represented by the thing itself, as onnxruntime does, so kernels that take a tensor accept it
// unchanged.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ortlite/tensor.h"

namespace ortlite {

class Value {
 public:
  enum class Kind : unsigned char { kTensor, kSequence, kNone, kMaps, kMap };

  Value() = default;
  Value(Tensor t) : tensor_(std::move(t)) {}  // NOLINT: a tensor is a value

  // A sequence of tensors of one element type (`elem` may be kUndefined when an empty
  // sequence's type is unknown).
  static Value sequence(std::vector<Tensor> items, DataType elem) {
    Value v;
    v.kind_ = Kind::kSequence;
    v.items_ = std::make_shared<const std::vector<Tensor>>(std::move(items));
    v.elem_ = elem;
    return v;
  }
  // N maps with the same C keys (ZipMap's seq(map(K, float))): map n is
  // {keys[j]: values[n, j]}. `keys` is int64 or string, shape [C], without duplicates (the
  // producer resolves them); `values` is float, shape [N, C]. Kept as two tensors rather
  // than N map objects: the binding builds the Python dicts straight from them.
  static Value maps(Tensor keys, Tensor values) {
    Value v;
    v.kind_ = Kind::kMaps;
    v.elem_ = keys.dtype();
    v.items_ = std::make_shared<const std::vector<Tensor>>(
        std::vector<Tensor>{std::move(keys), std::move(values)});
    return v;
  }
  // One map {keys[j]: values[j]} (map(K, V) values, fed as a Python dict). `keys` is int64 or
  // string, shape [C], without duplicates; `values` has shape [C] and any element type.
  static Value map(Tensor keys, Tensor values) {
    Value v;
    v.kind_ = Kind::kMap;
    v.elem_ = keys.dtype();
    v.items_ = std::make_shared<const std::vector<Tensor>>(
        std::vector<Tensor>{std::move(keys), std::move(values)});
    return v;
  }
  // An optional without an element.
  static Value none() {
    Value v;
    v.kind_ = Kind::kNone;
    return v;
  }

  Kind kind() const { return kind_; }
  bool is_tensor() const { return kind_ == Kind::kTensor; }
  bool is_sequence() const { return kind_ == Kind::kSequence; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_maps() const { return kind_ == Kind::kMaps; }
  bool is_map() const { return kind_ == Kind::kMap; }
  bool defined() const { return kind_ != Kind::kTensor || tensor_.defined(); }

  const Tensor& tensor() const { return tensor_; }
  Tensor& tensor() { return tensor_; }
  // Sequence elements; empty for a non-sequence.
  const std::vector<Tensor>& items() const {
    static const std::vector<Tensor> empty;
    return items_ && kind_ == Kind::kSequence ? *items_ : empty;
  }
  // kMaps: the keys [C] and the values [N, C]; kMap: the keys [C] and the values [C].
  const Tensor& map_keys() const { return (*items_)[0]; }
  const Tensor& map_values() const { return (*items_)[1]; }
  // Sequence element type; the key type of kMaps and kMap.
  DataType elem_type() const { return elem_; }

  // "tensor(float)", "seq(tensor(int64))", "seq(map(int64,tensor(float)))",
  // "map(string,tensor(double))",
  // "optional(none)": for error messages.
  std::string type_string() const;

 private:
  Kind kind_ = Kind::kTensor;
  Tensor tensor_;
  std::shared_ptr<const std::vector<Tensor>> items_;
  DataType elem_ = DataType::kUndefined;
};

}  // namespace ortlite
