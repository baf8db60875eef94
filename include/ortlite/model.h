// In-memory form of an ONNX model, produced by the protobuf reader (src/onnx/reader.cc)
// and consumed by the session. Plain data; no Python.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ortlite/tensor.h"

namespace ortlite {

struct Graph;

struct OpsetImport {
  std::string domain;  // "" for the default domain
  int64_t version = 0;
};

// AttributeProto.AttributeType numbering.
enum class AttrType : int {
  kUndefined = 0,
  kFloat = 1,
  kInt = 2,
  kString = 3,
  kTensor = 4,
  kGraph = 5,
  kSparseTensor = 11,
  kTypeProto = 13,
  kFloats = 6,
  kInts = 7,
  kStrings = 8,
  kTensors = 9,
  kGraphs = 10,
  kSparseTensors = 12,
  kTypeProtos = 14,
};
const char* attr_type_name(AttrType t);

struct Attribute {
  std::string name;
  AttrType type = AttrType::kUndefined;
  std::string ref_attr_name;  // set inside FunctionProto bodies: refers to a caller attribute
  float f = 0.f;
  int64_t i = 0;
  std::string s;  // bytes
  Tensor t;
  std::shared_ptr<Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Graph>> graphs;
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;                // "" and "ai.onnx" both mean the default domain
  std::vector<std::string> inputs;   // "" marks an omitted optional input
  std::vector<std::string> outputs;  // "" marks an omitted optional output
  std::vector<Attribute> attributes;
  std::string doc_string;
  // Set on nodes inlined from a model-local function whose opset imports differ from the
  // model's; the session then resolves this node's kernel with these versions.
  std::shared_ptr<const std::vector<OpsetImport>> opset_imports;
  // The last `implicit_inputs` entries of `inputs` are outer-scope values read by this
  // node's subgraphs, appended by the planner (not part of the ONNX node).
  size_t implicit_inputs = 0;

  const Attribute* find_attr(const std::string& attr_name) const;
  // "Conv node 'conv1'" or "Conv node #3" style label for messages.
  std::string label() const;
};

// One dimension of a TensorShapeProto: a value, a symbolic name, or unknown.
struct Dim {
  bool has_value = false;
  int64_t value = 0;
  std::string param;       // dim_param
  std::string denotation;  // Dimension.denotation (DATA_BATCH, ...), may be empty
};

// TypeProto, reduced to what ortlite uses.
struct TypeInfo {
  enum class Kind { kUnknown, kTensor, kSequence, kMap, kOptional, kSparseTensor };
  Kind kind = Kind::kUnknown;
  DataType elem_type = DataType::kUndefined;  // for tensors
  bool has_shape = false;
  std::vector<Dim> dims;
  std::shared_ptr<TypeInfo> elem;  // sequence / optional element type
  // onnxruntime's type string: "tensor(float)", "seq(tensor(int64))", ...
  std::string to_string() const;
};

struct ValueInfo {
  std::string name;
  TypeInfo type;
  std::string doc_string;
};

struct Graph {
  std::string name;
  std::string doc_string;
  std::vector<Node> nodes;
  // In file order. The tensor's buffer is kConstant (in place over the model bytes when
  // it came from raw_data).
  std::vector<std::pair<std::string, Tensor>> initializers;
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
  std::vector<ValueInfo> value_info;
};

struct Function {
  std::string name;
  std::string domain;
  std::string overload;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<std::string> attribute_names;   // attribute names without defaults
  std::vector<Attribute> attribute_defaults;  // attribute_proto: with defaults
  std::vector<Node> nodes;
  std::vector<OpsetImport> opset_imports;
  std::string doc_string;
};

struct Model {
  int64_t ir_version = 0;
  std::vector<OpsetImport> opset_imports;
  std::string producer_name;
  std::string producer_version;
  std::string domain;
  int64_t model_version = 0;
  std::string doc_string;
  Graph graph;
  std::vector<Function> functions;
  std::vector<std::pair<std::string, std::string>> metadata_props;
  // Keeps the model's bytes (mapping or copy) alive while initializers point into them.
  BufferPtr backing;
  // Whether `backing` is a private read-only mapping of the model file: its pages can be
  // dropped from memory (drop_file_pages) and are read back from the file when touched.
  bool backing_is_file = false;
  // The external data files a load from a file read, by resolved path, with their size,
  // modification time (ns) and inode when opened (for pickling by path).
  struct ExternalFile {
    std::string path;
    int64_t size = 0, mtime_ns = 0;
    uint64_t ino = 0;
  };
  std::vector<ExternalFile> external_files;
};

// Drops the whole pages inside [data, data + size) of a private read-only file mapping from
// the process's memory (madvise MADV_DONTNEED): a later read maps them again from the file,
// with the same contents. Only for memory of such a mapping; a no-op where unsupported.
void drop_file_pages(const void* data, size_t size);

// Loads a model file: memory-mapped, initializer raw_data used in place, external data
// resolved relative to the file's directory. Throws Error: kNoSuchFile, kInvalidProtobuf,
// kInvalidGraph, kFail.
Model load_model_from_file(const std::string& path);
// Parses bytes held by `bytes` (the model keeps a reference). External data is resolved
// relative to `base_dir`; when it is empty, external data is refused.
Model load_model_from_buffer(BufferPtr bytes, const std::string& base_dir);

// Parses one serialized TensorProto (the onnx backend test .pb files, run_with_iobinding
// helpers). The tensor owns its data.
Tensor parse_tensor_proto(const void* data, size_t size);

}  // namespace ortlite
