// The one check of a run's feeds and fetches (Session::check_run): names, kinds, element
// types, ranks and static dims against the model's declarations. The binding only converts
// values; every run goes through here once.
#include <sstream>
#include <string_view>
#include <unordered_set>

#include "ortlite/session.h"

namespace ortlite {

namespace {

void check_value_feed(const std::string& name, const TypeInfo& declared, const Value& v) {
  using K = TypeInfo::Kind;
  // optional(optional(...(T))) takes None or what T takes (unwrapped without recursion).
  const TypeInfo* t = &declared;
  while (t->kind == K::kOptional) {
    if (v.is_none() || !t->elem) return;
    t = t->elem.get();
  }
  const TypeInfo& type = *t;
  switch (type.kind) {
    case K::kUnknown:
    case K::kOptional:
      return;
    case K::kSequence:
      // seq(map(...)) inputs (DictVectorizer-style models) have no feed form yet.
      if (type.elem && type.elem->kind == K::kMap) {
        ORTLITE_THROW(kNotImplemented, "input '", name, "' is a ", type.to_string(),
                      ": feeding maps is not supported");
      }
      if (!v.is_sequence()) {
        ORTLITE_THROW(kInvalidArgument, "input '", name, "' is a ", type.to_string(),
                      ": feed a list of arrays, not a ", v.type_string());
      }
      if (type.elem) {
        for (const Tensor& t : v.items()) {
          if (type.elem->kind == K::kTensor && type.elem->elem_type != DataType::kUndefined &&
              type.elem->elem_type != t.dtype()) {
            ORTLITE_THROW(kInvalidArgument, "input '", name, "' is a ", type.to_string(),
                          " but an element has type tensor(", dtype_name(t.dtype()), ")");
          }
        }
      }
      return;
    case K::kMap: {
      // elem_type is the key type, elem the value type.
      if (!v.is_map()) {
        ORTLITE_THROW(kInvalidArgument, "input '", name, "' is a ", type.to_string(),
                      ": feed a dict, not a ", v.type_string());
      }
      const DataType vt =
          type.elem && type.elem->kind == K::kTensor ? type.elem->elem_type : DataType::kUndefined;
      if ((type.elem_type != DataType::kUndefined && type.elem_type != v.elem_type()) ||
          (vt != DataType::kUndefined && vt != v.map_values().dtype())) {
        ORTLITE_THROW(kInvalidArgument, "input '", name, "' is a ", type.to_string(), ", not a ",
                      v.type_string());
      }
      return;
    }
    case K::kTensor:
    case K::kSparseTensor:  // the binding densifies a sparse feed
      if (!v.is_tensor()) {
        ORTLITE_THROW(kInvalidArgument, "input '", name, "' is a ", type.to_string(), ", not a ",
                      v.type_string());
      }
      check_tensor_feed(name, type, v.tensor().dtype(), v.tensor().shape().data(),
                        v.tensor().rank());
      return;
    default:
      ORTLITE_THROW(kNotImplemented, "input '", name, "' has type ", type.to_string(),
                    ", which is not supported yet");
  }
}

}  // namespace

void check_tensor_feed(const std::string& name, const TypeInfo& type, DataType dtype,
                       const int64_t* dims, size_t rank) {
  if (type.elem_type != DataType::kUndefined && type.elem_type != dtype) {
    ORTLITE_THROW(kInvalidArgument, "Unexpected input data type for input '", name,
                  "'. Actual: (tensor(", dtype_name(dtype), ")) , expected: (tensor(",
                  dtype_name(type.elem_type), "))");
  }
  // A declared scalar (rank 0) is not checked, as onnxruntime does not: models declare a
  // scalar and take a 1-element array (silero-vad's `sr`).
  if (!type.has_shape || type.dims.empty()) return;
  if (type.dims.size() != rank) {
    ORTLITE_THROW(kInvalidArgument, "Invalid rank for input: ", name, " Got: ", rank,
                  " Expected: ", type.dims.size(),
                  " Please fix either the inputs/outputs or the model.");
  }
  bool mismatch = false;
  for (size_t d = 0; d < type.dims.size(); ++d)
    mismatch |= type.dims[d].has_value && type.dims[d].value != dims[d];
  if (mismatch) {
    // Built only on failure: a stream costs more than the whole check.
    std::ostringstream bad;
    for (size_t d = 0; d < type.dims.size(); ++d) {
      if (type.dims[d].has_value && type.dims[d].value != dims[d])
        bad << " index: " << d << " Got: " << dims[d] << " Expected: " << type.dims[d].value;
    }
    ORTLITE_THROW(kInvalidArgument, "Got invalid dimensions for input: ", name,
                  " for the following indices", bad.str(),
                  " Please fix either the inputs/outputs or the model.");
  }
}

void Session::check_feed(const std::string& name, const ValueInfo* declared, const Value& v) const {
  if (!declared) {
    std::vector<std::string> names;
    for (const ValueInfo& vi : inputs_) names.push_back(vi.name);
    ORTLITE_THROW(kInvalidArgument, "Invalid input name: ", name,
                  " (the model's inputs: ", join_strings(names), ")");
  }
  check_value_feed(name, declared->type, v);
}

void Session::check_run(const Feeds& feeds, const std::vector<std::string>& output_names) const {
  // One lookup per feed (linear in all): its declaration, and which required inputs are
  // fed (counted once each).
  // Up to kInline feeds and inputs are tracked on the stack: a run's check allocates nothing.
  constexpr size_t kInline = 16;
  const size_t n = feeds.size();
  const ValueInfo* inline_declared[kInline];
  char inline_fed[kInline] = {};
  std::vector<const ValueInfo*> many_declared;
  std::vector<char> many_fed;
  if (n > kInline) many_declared.resize(n);
  if (inputs_.size() > kInline) many_fed.assign(inputs_.size(), 0);
  const ValueInfo** declared = n > kInline ? many_declared.data() : inline_declared;
  char* fed = inputs_.size() > kInline ? many_fed.data() : inline_fed;
  size_t required_fed = 0;
  for (size_t i = 0; i < n; ++i) {
    bool required = false;
    declared[i] = find_feedable(feeds[i].first, &required, i);
    if (declared[i] && required) {
      const size_t k = static_cast<size_t>(declared[i] - inputs_.data());
      required_fed += !fed[k];
      fed[k] = 1;
    }
  }
  if (required_fed != inputs_.size()) {
    std::vector<std::string> missing, names;
    for (size_t k = 0; k < inputs_.size(); ++k)
      if (!fed[k]) missing.push_back(inputs_[k].name);
    for (const auto& f : feeds) names.push_back(f.first);
    throw MissingInputsError(std::move(missing), std::move(names));
  }
  // Unknown names before any value's type.
  for (size_t i = 0; i < n; ++i)
    if (!declared[i]) check_feed(feeds[i].first, nullptr, feeds[i].second);
  for (size_t i = 0; i < n; ++i) check_feed(feeds[i].first, declared[i], feeds[i].second);
  check_output_names(output_names);
}

void Session::check_output_names(const std::vector<std::string>& output_names) const {
  for (const std::string& name : output_names) {
    if (!has_output(name)) {
      std::vector<std::string> names;
      for (const ValueInfo& vi : outputs_) names.push_back(vi.name);
      ORTLITE_THROW(kInvalidArgument, "Invalid output name: ", name,
                    " (the model's outputs: ", join_strings(names), ")");
    }
  }
}

}  // namespace ortlite
