// Loading with what a session supplies beyond the model (SessionOptions), and saving a model
// back to an ONNX file (src/onnx/writer.cc). Plain data; no Python.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>

#include "ortlite/buffer.h"
#include "ortlite/model.h"

namespace ortlite {

// What a session supplies to the loader beyond the model (SessionOptions).
struct LoadOptions {
  // Initializers the session replaces (add_initializer, add_external_initializers): their
  // external data is not read, so the files need not exist.
  std::set<std::string> provided_initializers;
  // add_external_initializers_from_files_in_memory: external data file name (as the model's
  // `location` writes it) -> its contents. The loader copies what it reads; the bytes need
  // only live while it runs.
  std::map<std::string, BufferPtr> in_memory_files;
  bool empty() const { return provided_initializers.empty() && in_memory_files.empty(); }
};

// load_model_from_file / load_model_from_buffer with `options`: external data is also found
// in options.in_memory_files (for a model from bytes, only there), and that of
// options.provided_initializers is not read.
Model load_model_from_file(const std::string& path, const LoadOptions& options);
Model load_model_from_buffer(BufferPtr bytes, const std::string& base_dir,
                             const LoadOptions& options);

// Where save_model puts initializer data: inline in the model file, or, with
// `external_data_file` set, initializers of at least `external_min_bytes` bytes (not strings)
// in that file, named relative to the model file's directory, each at a 64-byte-aligned
// offset, with location / offset / length entries in their TensorProtos.
struct SaveOptions {
  std::string external_data_file;
  size_t external_min_bytes = 1024;
};

// Writes `model` as an ONNX ModelProto: the main graph as it is now (model-local functions
// are not written: the session has inlined them). A TypeProto attribute value is kept by
// the reader as its serialized bytes (Attribute::s, ::strings) and written back as it was.
// Throws Error(kNoSuchFile / kFail) naming the file when it cannot be written,
// Error(kInvalidArgument) when the model holds something ONNX cannot express here (a device
// tensor) or more than protobuf's 2 GiB inline.
void save_model(const Model& model, const std::string& path, const SaveOptions& options = {});

}  // namespace ortlite
