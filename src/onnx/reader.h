// Internal interface between the ONNX protobuf reader (onnx/reader.cc) and the file side of
// model loading (model_loader.cc: memory mapping, external data).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ortlite/buffer.h"
#include "ortlite/model.h"

namespace ortlite::onnx_reader {

// One tensor's external_data entries, already parsed.
struct ExternalDataRef {
  std::string tensor;    // the tensor's label, for messages
  std::string name;      // the TensorProto's name
  std::string location;  // as written in the model
  uint64_t offset = 0;
  bool has_length = false;
  uint64_t length = 0;
  size_t nbytes = 0;     // numel x element size: what the tensor needs
  size_t alignment = 1;  // the element's alignment
};

// Supplies external tensor data (model_loader.cc implements it for files).
class ExternalDataSource {
 public:
  virtual ~ExternalDataSource() = default;
  // A kConstant buffer of exactly ref.nbytes bytes holding the tensor's data (aligned for
  // its element type). Throws Error naming the tensor and what is wrong.
  virtual BufferPtr load(const ExternalDataRef& ref) = 0;
};

// Parses a serialized ModelProto held in [data, data + size). When `backing` is set it owns
// those bytes and initializer raw_data is used in place (tensors keep a reference to it);
// otherwise the data is copied. `external` may be null: external data is then refused.
// `file_mapped`: `backing` is a private read-only mapping of the model file; the pages of
// initializers copied out of it (not aligned for their element type) are dropped once
// copied (drop_file_pages), so that their data is not held twice.
Model parse_model(const uint8_t* data, size_t size, BufferPtr backing, ExternalDataSource* external,
                  bool file_mapped = false);

// Parses one serialized TensorProto into a tensor that owns (a copy of) its data.
Tensor parse_tensor(const uint8_t* data, size_t size);

}  // namespace ortlite::onnx_reader
