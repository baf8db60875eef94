// The ONNX protobuf writer: a Model (include/ortlite/model.h) back to a ModelProto file, for
// SessionOptions.optimized_model_filepath. The mirror of onnx/reader.cc, for what the model
// IR holds; no libprotobuf. Field numbers are those of onnx.proto3.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "ortlite/dtype.h"
#include "ortlite/model.h"
#include "ortlite/model_io.h"
#include "ortlite/status.h"

namespace ortlite {
namespace {

// --- wire format ------------------------------------------------------------------------------

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_tag(std::string& out, uint32_t field, uint32_t wire) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | wire);
}

void put_int(std::string& out, uint32_t field, int64_t v) {
  put_tag(out, field, 0);
  put_varint(out, static_cast<uint64_t>(v));
}

void put_bytes(std::string& out, uint32_t field, const void* data, size_t n) {
  put_tag(out, field, 2);
  put_varint(out, n);
  out.append(static_cast<const char*>(data), n);
}

void put_str(std::string& out, uint32_t field, const std::string& s) {
  put_bytes(out, field, s.data(), s.size());
}

// A string field written only when it is not empty (proto3 defaults are not written).
void put_str_opt(std::string& out, uint32_t field, const std::string& s) {
  if (!s.empty()) put_str(out, field, s);
}

void put_float(std::string& out, uint32_t field, float f) {
  put_tag(out, field, 5);
  char b[4];
  std::memcpy(b, &f, 4);
  out.append(b, 4);
}

void put_packed_ints(std::string& out, uint32_t field, const std::vector<int64_t>& v) {
  if (v.empty()) return;
  std::string body;
  for (int64_t x : v) put_varint(body, static_cast<uint64_t>(x));
  put_str(out, field, body);
}

std::string temp_name(const std::string& path) {
  return path + ".ortlite-tmp-" + std::to_string(static_cast<long>(::getpid()));
}

// --- messages ---------------------------------------------------------------------------------

// Decides, per initializer, whether its data goes to the external file, and writes it there.
class ExternalData {
 public:
  ExternalData(const SaveOptions& o, const std::string& model_path) : opts_(o) {
    if (o.external_data_file.empty()) return;
    std::string path = o.external_data_file;
    if (path[0] != '/') {
      const size_t slash = model_path.find_last_of('/');
      if (slash != std::string::npos) path = model_path.substr(0, slash + 1) + path;
    }
    path_ = path;
    // Written beside and renamed over at the end: the model being saved may be reading its
    // weights from a mapping of the file of that name.
    tmp_ = temp_name(path_);
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("cannot create the external initializers file '", path_, "'");
  }
  ~ExternalData() {
    if (fd_ >= 0) ::close(fd_);
    if (!tmp_.empty()) ::unlink(tmp_.c_str());
  }
  ExternalData(const ExternalData&) = delete;
  ExternalData& operator=(const ExternalData&) = delete;

  bool wants(size_t nbytes) const { return fd_ >= 0 && nbytes >= opts_.external_min_bytes; }

  // Appends `n` bytes at the next 64-byte boundary; returns their offset.
  uint64_t append(const void* data, size_t n) {
    static const char zeros[64] = {};
    const uint64_t pad = (64 - offset_ % 64) % 64;
    write_all(zeros, static_cast<size_t>(pad));
    const uint64_t at = offset_;
    write_all(data, n);
    return at;
  }

  void finish() {
    if (fd_ < 0) return;
    const int rc = ::close(std::exchange(fd_, -1));
    if (rc != 0) fail("cannot write the external initializers file '", path_, "'");
    if (::rename(tmp_.c_str(), path_.c_str()) != 0)
      fail("cannot create the external initializers file '", path_, "'");
    tmp_.clear();
  }

  const std::string& location() const { return opts_.external_data_file; }

 private:
  template <typename... Parts>
  [[noreturn]] void fail(const Parts&... parts) {
    const int e = errno;
    ORTLITE_THROW(kFail, parts..., ": ", std::generic_category().message(e));
  }

  void write_all(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail("cannot write the external initializers file '", path_, "'");
      p += w;
      n -= static_cast<size_t>(w);
      offset_ += static_cast<uint64_t>(w);
    }
  }

  const SaveOptions& opts_;
  std::string path_, tmp_;
  int fd_ = -1;
  uint64_t offset_ = 0;
};

// The bytes of a tensor as TensorProto.raw_data holds them: the 4- and 2-bit types packed
// (the first element in the lowest bits), the others as they are in memory (little-endian).
const void* raw_bytes(const Tensor& t, std::string* packed, size_t* n) {
  const int bits = dtype_packed_bits(t.dtype());
  if (bits == 0) {
    *n = t.nbytes();
    return t.raw_data();
  }
  const uint8_t mask = static_cast<uint8_t>((1u << bits) - 1);
  packed->assign(dtype_packed_bytes(t.dtype(), t.numel()), '\0');
  const uint8_t* src = static_cast<const uint8_t*>(t.raw_data());
  const int per_byte = 8 / bits;
  for (int64_t i = 0; i < t.numel(); ++i)
    (*packed)[static_cast<size_t>(i / per_byte)] |=
        static_cast<char>((src[i] & mask) << (bits * (i % per_byte)));
  *n = packed->size();
  return packed->data();
}

void check_host(const Tensor& t, const std::string& what) {
  if (t.buffer() && t.buffer()->device().type != DeviceType::kCPU)
    ORTLITE_THROW(kInvalidArgument, "cannot save ", what,
                  ": its data is on a device; only host tensors can be written");
}

// TensorProto. `external` (may be null) takes the data of large tensors.
std::string tensor_proto(const Tensor& t, const std::string& name, ExternalData* external) {
  check_host(t, name.empty() ? std::string("a tensor") : "tensor '" + name + "'");
  std::string out;
  put_packed_ints(out, 1, t.shape());
  put_int(out, 2, static_cast<int64_t>(t.dtype()));
  put_str_opt(out, 8, name);
  if (t.dtype() == DataType::kString) {
    const std::string* s = t.data<std::string>();
    for (int64_t i = 0; i < t.numel(); ++i) put_str(out, 6, s[i]);
    return out;
  }
  std::string packed;
  size_t n = 0;
  const void* data = raw_bytes(t, &packed, &n);
  if (external && external->wants(n)) {
    const uint64_t offset = external->append(data, n);
    const std::pair<const char*, std::string> entries[] = {
        {"location", external->location()},
        {"offset", std::to_string(offset)},
        {"length", std::to_string(n)},
    };
    for (const auto& [key, value] : entries) {
      std::string kv;
      put_str(kv, 1, key);
      put_str(kv, 2, value);
      put_str(out, 13, kv);
    }
    put_int(out, 14, 1);  // data_location: EXTERNAL
    return out;
  }
  put_bytes(out, 9, data, n);
  return out;
}

// A densified sparse attribute value, as a SparseTensorProto with every element listed
// (values of shape [numel], linear indices 0..numel-1).
std::string sparse_proto(const Tensor& t) {
  std::string out;
  Tensor flat = t.reshaped({t.numel()});
  put_str(out, 1, tensor_proto(flat, "", nullptr));
  std::vector<int64_t> idx(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
  put_str(out, 2, tensor_proto(Tensor::from_vector(idx, {t.numel()}), "", nullptr));
  put_packed_ints(out, 3, t.shape());
  return out;
}

std::string type_proto(const TypeInfo& t);

std::string tensor_type(const TypeInfo& t) {
  std::string out;
  if (t.elem_type != DataType::kUndefined) put_int(out, 1, static_cast<int64_t>(t.elem_type));
  if (t.has_shape) {
    std::string shape;
    for (const Dim& d : t.dims) {
      std::string dim;
      if (d.has_value) {
        put_int(dim, 1, d.value);
      } else if (!d.param.empty()) {
        put_str(dim, 2, d.param);
      }
      put_str_opt(dim, 3, d.denotation);
      put_str(shape, 1, dim);
    }
    put_str(out, 2, shape);
  }
  return out;
}

std::string elem_holder(const TypeInfo& t) {
  std::string out;
  if (t.elem) put_str(out, 1, type_proto(*t.elem));
  return out;
}

std::string type_proto(const TypeInfo& t) {
  std::string out;
  switch (t.kind) {
    case TypeInfo::Kind::kTensor:
      put_str(out, 1, tensor_type(t));
      break;
    case TypeInfo::Kind::kSparseTensor:
      put_str(out, 8, tensor_type(t));
      break;
    case TypeInfo::Kind::kSequence:
      put_str(out, 4, elem_holder(t));
      break;
    case TypeInfo::Kind::kOptional:
      put_str(out, 9, elem_holder(t));
      break;
    case TypeInfo::Kind::kMap: {
      std::string map;
      put_int(map, 1, static_cast<int64_t>(t.elem_type));
      if (t.elem) put_str(map, 2, type_proto(*t.elem));
      put_str(out, 5, map);
      break;
    }
    case TypeInfo::Kind::kUnknown:
      break;
  }
  return out;
}

std::string value_info_proto(const ValueInfo& v) {
  std::string out;
  put_str(out, 1, v.name);
  if (v.type.kind != TypeInfo::Kind::kUnknown) put_str(out, 2, type_proto(v.type));
  put_str_opt(out, 3, v.doc_string);
  return out;
}

std::string graph_proto(const Graph& g, ExternalData* external);

std::string attribute_proto(const Attribute& a) {
  std::string out;
  put_str(out, 1, a.name);
  switch (a.type) {
    case AttrType::kFloat:
      put_float(out, 2, a.f);
      break;
    case AttrType::kInt:
      put_int(out, 3, a.i);
      break;
    case AttrType::kString:
      put_str(out, 4, a.s);
      break;
    case AttrType::kTensor:
      put_str(out, 5, tensor_proto(a.t, "", nullptr));
      break;
    case AttrType::kGraph:
      if (a.g) put_str(out, 6, graph_proto(*a.g, nullptr));
      break;
    case AttrType::kFloats:
      for (float f : a.floats) put_float(out, 7, f);
      break;
    case AttrType::kInts:
      put_packed_ints(out, 8, a.ints);
      break;
    case AttrType::kStrings:
      for (const std::string& s : a.strings) put_str(out, 9, s);
      break;
    case AttrType::kTensors:
      for (const Tensor& t : a.tensors) put_str(out, 10, tensor_proto(t, "", nullptr));
      break;
    case AttrType::kGraphs:
      for (const auto& g : a.graphs)
        if (g) put_str(out, 11, graph_proto(*g, nullptr));
      break;
    case AttrType::kTypeProto:  // the reader kept the TypeProto's bytes
      put_str(out, 14, a.s);
      break;
    case AttrType::kTypeProtos:
      for (const std::string& t : a.strings) put_str(out, 15, t);
      break;
    case AttrType::kSparseTensor:
      put_str(out, 22, sparse_proto(a.t));
      break;
    case AttrType::kSparseTensors:
      for (const Tensor& t : a.tensors) put_str(out, 23, sparse_proto(t));
      break;
    case AttrType::kUndefined:
      break;
  }
  if (a.type != AttrType::kUndefined) put_int(out, 20, static_cast<int64_t>(a.type));
  put_str_opt(out, 21, a.ref_attr_name);
  return out;
}

std::string node_proto(const Node& n) {
  std::string out;
  // The planner appends a node's outer-scope reads to its inputs (implicit_inputs): they
  // are not part of the ONNX node.
  const size_t explicit_inputs = n.inputs.size() - std::min(n.implicit_inputs, n.inputs.size());
  for (size_t i = 0; i < explicit_inputs; ++i) put_str(out, 1, n.inputs[i]);
  for (const std::string& o : n.outputs) put_str(out, 2, o);
  put_str_opt(out, 3, n.name);
  put_str(out, 4, n.op_type);
  for (const Attribute& a : n.attributes) put_str(out, 5, attribute_proto(a));
  put_str_opt(out, 6, n.doc_string);
  put_str_opt(out, 7, n.domain);
  return out;
}

std::string graph_proto(const Graph& g, ExternalData* external) {
  std::string out;
  for (const Node& n : g.nodes) put_str(out, 1, node_proto(n));
  put_str_opt(out, 2, g.name.empty() ? std::string("graph") : g.name);
  for (const auto& [name, t] : g.initializers) put_str(out, 5, tensor_proto(t, name, external));
  put_str_opt(out, 10, g.doc_string);
  for (const ValueInfo& v : g.inputs) put_str(out, 11, value_info_proto(v));
  for (const ValueInfo& v : g.outputs) put_str(out, 12, value_info_proto(v));
  for (const ValueInfo& v : g.value_info) put_str(out, 13, value_info_proto(v));
  return out;
}

}  // namespace

void save_model(const Model& model, const std::string& path, const SaveOptions& options) {
  if (path.empty() || path.find('\0') != std::string::npos)
    ORTLITE_THROW(kInvalidArgument, "cannot save the model: the path is empty or has a NUL byte");
  ExternalData external(options, path);
  std::string head;
  // IR 4 is the first that lets initializers be absent from the graph inputs, which the
  // optimizer's folded constants are.
  put_int(head, 1, std::max<int64_t>(model.ir_version, 4));
  put_str_opt(head, 2, model.producer_name);
  put_str_opt(head, 3, model.producer_version);
  put_str_opt(head, 4, model.domain);
  if (model.model_version) put_int(head, 5, model.model_version);
  put_str_opt(head, 6, model.doc_string);
  const std::string graph = graph_proto(model.graph, &external);
  std::string tail;
  for (const OpsetImport& o : model.opset_imports) {
    std::string op;
    put_str_opt(op, 1, o.domain);
    put_int(op, 2, o.version);
    put_str(tail, 8, op);
  }
  for (const auto& [k, v] : model.metadata_props) {
    std::string kv;
    put_str(kv, 1, k);
    put_str(kv, 2, v);
    put_str(tail, 14, kv);
  }
  if (graph.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()) - tail.size())
    ORTLITE_THROW(kInvalidArgument, "cannot save the model to '", path,
                  "': its inline data exceeds protobuf's 2 GiB; set "
                  "session.optimized_model_external_initializers_file_name");
  put_tag(head, 7, 2);
  put_varint(head, graph.size());
  external.finish();

  // Written beside and renamed over, like the external file.
  const std::string tmp = temp_name(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int e = errno;
    throw Error(e == ENOENT || e == ENOTDIR ? StatusCode::kNoSuchFile : StatusCode::kFail,
                detail::concat_message("cannot save the optimized model to '", path,
                                       "': ", std::generic_category().message(e)));
  }
  bool ok = true;
  int err = 0;
  const std::string* parts[] = {&head, &graph, &tail};
  for (const std::string* part : parts) {
    const char* p = part->data();
    size_t n = part->size();
    while (ok && n > 0) {
      const ssize_t w = ::write(fd, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        err = errno;
        ok = false;
        break;
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
  }
  if (::close(fd) != 0 && ok) {
    err = errno;
    ok = false;
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ok = false;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    ORTLITE_THROW(kFail, "cannot write the optimized model to '", path,
                  "': ", std::generic_category().message(err));
  }
}

}  // namespace ortlite
