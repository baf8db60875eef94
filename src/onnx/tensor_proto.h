// Internal to the ONNX reader (onnx/reader.cc, onnx/tensor_proto.cc): the parse context and the
// TensorProto / SparseTensorProto stages, from wire fields (RawTensor) to ortlite Tensors.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "onnx/reader.h"
#include "onnx/pb_wire.h"
#include "ortlite/tensor.h"

namespace ortlite::onnx_reader::detail {

constexpr int32_t kMaxKnownDataType = 26;

struct Ctx {
  BufferPtr backing;         // owns the input: raw_data is used in place when set
  bool owned = false;        // tensors get owned (kOwned) copies: parse_tensor
  bool file_mapped = false;  // backing is a read-only file mapping (drop_file_pages)
  ExternalDataSource* external = nullptr;
  int graph_depth = 0;
};

template <typename T>
void reserve_packed(std::vector<T>& v, const pb::Reader& r, uint32_t scalar_wire) {
  if (r.wire() != pb::kLen) return;
  size_t n = r.peek_repeated_count(scalar_wire);
  if (n > v.capacity() - v.size()) v.reserve(std::max(v.size() + n, v.capacity() * 2));
}

inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct RawTensor {
  std::string name;
  std::vector<int64_t> dims;
  bool has_data_type = false;
  int32_t data_type = 0;
  bool has_segment = false;
  std::vector<float> float_data;
  std::vector<int32_t> int32_data;
  std::vector<std::string> string_data;
  std::vector<int64_t> int64_data;
  std::vector<double> double_data;
  std::vector<uint64_t> uint64_data;
  bool has_raw = false;
  pb::Span raw;
  int32_t data_location = 0;
  std::vector<std::pair<std::string, std::string>> external_data;
};

struct RawSparse {
  std::optional<RawTensor> values;
  std::optional<RawTensor> indices;
  std::vector<int64_t> dims;
};

// StringStringEntryProto (metadata_props, external_data).
void parse_string_entry(pb::Reader r, std::string& key, std::string& value);

void parse_tensor_proto(pb::Reader r, RawTensor& t);
// "initializer 'w'" style label for messages.
std::string tensor_label(const RawTensor& t, const char* role);
// Checks the TensorProto and makes its Tensor: raw_data in place when aligned and ctx has a
// backing, else a copy; external data through ctx.external.
Tensor convert_tensor(const RawTensor& t, Ctx& ctx, const std::string& label);

void parse_sparse_proto(pb::Reader r, RawSparse& s);
std::string sparse_name(const RawSparse& s);
Tensor densify(const RawSparse& s, Ctx& ctx, const std::string& label);

}  // namespace ortlite::onnx_reader::detail
