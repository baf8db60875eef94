// The ONNX protobuf reader: one parse function per message, a switch on the field number,
// unknown fields skipped by wire type. Field numbers follow onnx/onnx.proto.
#include "onnx/reader.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "onnx/pb_wire.h"
#include "ortlite/dtype.h"
#include "ortlite/status.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the ONNX reader assumes a little-endian host (raw_data is little-endian)"
#endif

#include "onnx/tensor_proto.h"

namespace ortlite::onnx_reader {

using namespace detail;  // NOLINT: the tensor stage's types and functions

namespace {

constexpr int kMaxGraphDepth = 64;  // subgraphs (If/Loop/Scan bodies) nested in subgraphs
constexpr int kMaxTypeDepth = 64;   // seq(seq(...)) nesting in TypeProto

// ---------------------------------------------------------------------------------------
// OperatorSetIdProto

std::string normalize_domain(std::string d) {
  if (d == "ai.onnx") d.clear();
  return d;
}

OpsetImport parse_opset(pb::Reader r) {
  OpsetImport o;
  while (r.next()) {
    switch (r.field()) {
      case 1:
        o.domain = normalize_domain(r.read_string());
        break;
      case 2:
        o.version = r.read_int64();
        break;
      default:
        r.skip();
    }
  }
  return o;
}

// ---------------------------------------------------------------------------------------
// TypeProto, ValueInfoProto

void parse_type(pb::Reader r, TypeInfo& t, int depth);

void parse_shape(pb::Reader r, TypeInfo& t) {
  t.has_shape = true;
  while (r.next()) {
    if (r.field() != 1) {
      r.skip();
      continue;
    }
    Dim dim;
    pb::Reader d = r.read_message("TensorShapeProto.Dimension");
    while (d.next()) {
      switch (d.field()) {
        case 1: {
          int64_t v = d.read_int64();
          dim.param.clear();
          // A negative dim_value is not a size: treat it as unknown.
          dim.has_value = v >= 0;
          dim.value = v >= 0 ? v : 0;
          break;
        }
        case 2:
          dim.param = d.read_string();
          dim.has_value = false;
          dim.value = 0;
          break;
        case 3:
          dim.denotation = d.read_string();
          break;
        default:
          d.skip();
      }
    }
    t.dims.push_back(std::move(dim));
  }
}

// TypeProto.Tensor and TypeProto.SparseTensor
void parse_tensor_type(pb::Reader r, TypeInfo& t) {
  while (r.next()) {
    switch (r.field()) {
      case 1: {
        int32_t e = r.read_int32();
        t.elem_type =
            (e >= 0 && e <= kMaxKnownDataType) ? static_cast<DataType>(e) : DataType::kUndefined;
        break;
      }
      case 2:
        t.dims.clear();
        parse_shape(r.read_message("TensorShapeProto"), t);
        break;
      default:
        r.skip();
    }
  }
}

// TypeProto.Sequence / TypeProto.Optional: elem_type = 1.
void parse_elem_holder(pb::Reader r, TypeInfo& t, int depth) {
  while (r.next()) {
    if (r.field() == 1) {
      auto elem = std::make_shared<TypeInfo>();
      parse_type(r.read_message("TypeProto"), *elem, depth + 1);
      t.elem = std::move(elem);
    } else {
      r.skip();
    }
  }
}

// TypeProto.Map: key_type = 1 (kept in elem_type), value_type = 2 (kept in elem).
void parse_map_type(pb::Reader r, TypeInfo& t, int depth) {
  while (r.next()) {
    switch (r.field()) {
      case 1: {
        int32_t e = r.read_int32();
        t.elem_type =
            (e >= 0 && e <= kMaxKnownDataType) ? static_cast<DataType>(e) : DataType::kUndefined;
        break;
      }
      case 2: {
        auto elem = std::make_shared<TypeInfo>();
        parse_type(r.read_message("TypeProto"), *elem, depth + 1);
        t.elem = std::move(elem);
        break;
      }
      default:
        r.skip();
    }
  }
}

void parse_type(pb::Reader r, TypeInfo& t, int depth) {
  if (depth > kMaxTypeDepth)
    ORTLITE_THROW(kInvalidProtobuf, "TypeProto nested deeper than ", kMaxTypeDepth, " levels");
  while (r.next()) {
    switch (r.field()) {
      case 1:
        t = TypeInfo();
        t.kind = TypeInfo::Kind::kTensor;
        parse_tensor_type(r.read_message("TypeProto.Tensor"), t);
        break;
      case 4:
        t = TypeInfo();
        t.kind = TypeInfo::Kind::kSequence;
        parse_elem_holder(r.read_message("TypeProto.Sequence"), t, depth);
        break;
      case 5:
        t = TypeInfo();
        t.kind = TypeInfo::Kind::kMap;
        parse_map_type(r.read_message("TypeProto.Map"), t, depth);
        break;
      case 8:
        t = TypeInfo();
        t.kind = TypeInfo::Kind::kSparseTensor;
        parse_tensor_type(r.read_message("TypeProto.SparseTensor"), t);
        break;
      case 9:
        t = TypeInfo();
        t.kind = TypeInfo::Kind::kOptional;
        parse_elem_holder(r.read_message("TypeProto.Optional"), t, depth);
        break;
      case 6:  // denotation
        r.read_bytes();
        break;
      default:
        r.skip();
    }
  }
}

ValueInfo parse_value_info(pb::Reader r) {
  ValueInfo v;
  while (r.next()) {
    switch (r.field()) {
      case 1:
        v.name = r.read_string();
        break;
      case 2:
        parse_type(r.read_message("TypeProto"), v.type, 0);
        break;
      case 3:
        v.doc_string = r.read_string();
        break;
      case 4:  // metadata_props
        r.read_bytes();
        break;
      default:
        r.skip();
    }
  }
  return v;
}

// ---------------------------------------------------------------------------------------
// AttributeProto, NodeProto, GraphProto

void parse_graph(pb::Reader r, Graph& g, Ctx& ctx);

std::shared_ptr<Graph> parse_subgraph(pb::Reader r, Ctx& ctx) {
  if (ctx.graph_depth >= kMaxGraphDepth)
    ORTLITE_THROW(kInvalidProtobuf, "subgraphs nested deeper than ", kMaxGraphDepth, " levels");
  auto g = std::make_shared<Graph>();
  ++ctx.graph_depth;
  try {
    parse_graph(r, *g, ctx);
  } catch (...) {
    --ctx.graph_depth;
    throw;
  }
  --ctx.graph_depth;
  return g;
}

constexpr uint32_t attr_bit(AttrType t) {
  return 1u << static_cast<int>(t);
}

bool known_attr_type(int32_t t) {
  return t >= 0 && t <= 14;
}

void parse_attribute(pb::Reader r, Attribute& a, Ctx& ctx) {
  int32_t declared = 0;
  uint32_t present = 0;
  std::optional<RawTensor> raw_t;
  std::vector<RawTensor> raw_tensors;
  std::optional<RawSparse> raw_sparse;
  std::vector<RawSparse> raw_sparses;
  while (r.next()) {
    switch (r.field()) {
      case 1:
        a.name = r.read_string();
        break;
      case 2:
        a.f = r.read_float();
        present |= attr_bit(AttrType::kFloat);
        break;
      case 3:
        a.i = r.read_int64();
        present |= attr_bit(AttrType::kInt);
        break;
      case 4:
        a.s = r.read_raw_string();
        present |= attr_bit(AttrType::kString);
        break;
      case 5:
        if (!raw_t) raw_t.emplace();
        parse_tensor_proto(r.read_message("TensorProto"), *raw_t);
        present |= attr_bit(AttrType::kTensor);
        break;
      case 6:
        a.g = parse_subgraph(r.read_message("GraphProto"), ctx);
        present |= attr_bit(AttrType::kGraph);
        break;
      case 7:
        reserve_packed(a.floats, r, pb::kFixed32);
        r.read_repeated_fixed32([&](uint32_t v) { a.floats.push_back(bits_to_float(v)); });
        present |= attr_bit(AttrType::kFloats);
        break;
      case 8:
        r.read_repeated_varint([&](uint64_t v) { a.ints.push_back(static_cast<int64_t>(v)); });
        present |= attr_bit(AttrType::kInts);
        break;
      case 9:
        a.strings.push_back(r.read_raw_string());
        present |= attr_bit(AttrType::kStrings);
        break;
      case 10:
        raw_tensors.emplace_back();
        parse_tensor_proto(r.read_message("TensorProto"), raw_tensors.back());
        present |= attr_bit(AttrType::kTensors);
        break;
      case 11:
        a.graphs.push_back(parse_subgraph(r.read_message("GraphProto"), ctx));
        present |= attr_bit(AttrType::kGraphs);
        break;
      case 13:  // doc_string
        r.read_bytes();
        break;
      case 14: {  // tp: kept as its bytes (the writer puts them back); parsed for validity
        pb::Reader tp = r.read_message("TypeProto");
        a.s = tp.remaining().str();
        TypeInfo ignored;
        parse_type(tp, ignored, 0);
        present |= attr_bit(AttrType::kTypeProto);
        break;
      }
      case 15: {
        pb::Reader tp = r.read_message("TypeProto");
        a.strings.push_back(tp.remaining().str());
        TypeInfo ignored;
        parse_type(tp, ignored, 0);
        present |= attr_bit(AttrType::kTypeProtos);
        break;
      }
      case 20:
        declared = r.read_int32();
        break;
      case 21:
        a.ref_attr_name = r.read_string();
        break;
      case 22:
        if (!raw_sparse) raw_sparse.emplace();
        parse_sparse_proto(r.read_message("SparseTensorProto"), *raw_sparse);
        present |= attr_bit(AttrType::kSparseTensor);
        break;
      case 23:
        raw_sparses.emplace_back();
        parse_sparse_proto(r.read_message("SparseTensorProto"), raw_sparses.back());
        present |= attr_bit(AttrType::kSparseTensors);
        break;
      default:
        r.skip();
    }
  }

  std::string label = "attribute '" + a.name + "'";
  if (a.name.empty()) ORTLITE_THROW(kInvalidGraph, "an attribute has no name");
  if (!known_attr_type(declared))
    ORTLITE_THROW(kInvalidGraph, label, ": unknown attribute type ", declared);
  if (declared != 0) {
    AttrType type = static_cast<AttrType>(declared);
    if (present & ~attr_bit(type)) {
      for (int k = 1; k <= 14; ++k) {
        if ((present & (1u << k)) && k != declared)
          ORTLITE_THROW(kInvalidGraph, label, ": declared ", attr_type_name(type),
                        " but carries a ", attr_type_name(static_cast<AttrType>(k)), " value");
      }
    }
    a.type = type;
    bool single_value = type == AttrType::kTensor || type == AttrType::kGraph ||
                        type == AttrType::kSparseTensor || type == AttrType::kTypeProto;
    if (single_value && !(present & attr_bit(type)) && a.ref_attr_name.empty())
      ORTLITE_THROW(kInvalidGraph, label, ": declared ", attr_type_name(type),
                    " but carries no value");
  } else if (present != 0) {
    // No type field (old models): infer it from the one value present.
    if (present & (present - 1))
      ORTLITE_THROW(kInvalidGraph, label, ": has no type and carries values of several types");
    int k = 0;
    while (!(present & (1u << k))) ++k;
    a.type = static_cast<AttrType>(k);
  } else if (a.ref_attr_name.empty()) {
    ORTLITE_THROW(kInvalidGraph, label, ": has no type and no value");
  }

  if (raw_t) a.t = convert_tensor(*raw_t, ctx, label);
  for (size_t k = 0; k < raw_tensors.size(); ++k)
    a.tensors.push_back(
        convert_tensor(raw_tensors[k], ctx, label + " tensor #" + std::to_string(k)));
  // Sparse tensors are densified: kSparseTensor keeps the dense value in `t`,
  // kSparseTensors in `tensors`.
  if (raw_sparse) a.t = densify(*raw_sparse, ctx, label);
  for (size_t k = 0; k < raw_sparses.size(); ++k)
    a.tensors.push_back(
        densify(raw_sparses[k], ctx, label + " sparse tensor #" + std::to_string(k)));
}

std::string node_context(const Node& n, size_t index) {
  if (!n.op_type.empty() || !n.name.empty()) return n.label();
  return "node #" + std::to_string(index);
}

void parse_node(pb::Reader r, Node& n, Ctx& ctx) {
  while (r.next()) {
    switch (r.field()) {
      case 1:
        n.inputs.push_back(r.read_string());
        break;
      case 2:
        n.outputs.push_back(r.read_string());
        break;
      case 3:
        n.name = r.read_string();
        break;
      case 4:
        n.op_type = r.read_string();
        break;
      case 5: {
        Attribute a;
        parse_attribute(r.read_message("AttributeProto"), a, ctx);
        n.attributes.push_back(std::move(a));
        break;
      }
      case 6:
        n.doc_string = r.read_string();
        break;
      case 7:
        n.domain = normalize_domain(r.read_string());
        break;
      case 8:  // overload
        r.read_bytes();
        break;
      case 9:   // metadata_props
      case 10:  // device_configurations
        r.read_bytes();
        break;
      default:
        r.skip();
    }
  }
  if (n.op_type.empty()) ORTLITE_THROW(kInvalidGraph, "node has no op_type");
  for (size_t i = 0; i < n.attributes.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (n.attributes[i].name == n.attributes[j].name)
        ORTLITE_THROW(kInvalidGraph, "attribute '", n.attributes[i].name, "' appears twice");
}

void parse_node_in(pb::Reader r, std::vector<Node>& nodes, Ctx& ctx) {
  Node n;
  try {
    parse_node(r, n, ctx);
  } catch (const Error& e) {
    throw Error(e.code(), node_context(n, nodes.size()) + ": " + e.what());
  }
  nodes.push_back(std::move(n));
}

void parse_graph(pb::Reader r, Graph& g, Ctx& ctx) {
  std::set<std::string> init_names;
  for (const auto& [name, _] : g.initializers) init_names.insert(name);
  auto add_init = [&](std::string name, Tensor t) {
    if (name.empty())
      ORTLITE_THROW(kInvalidGraph, "graph '", g.name, "': an initializer has no name");
    if (!init_names.insert(name).second)
      ORTLITE_THROW(kInvalidGraph, "graph '", g.name, "': initializer '", name, "' appears twice");
    g.initializers.emplace_back(std::move(name), std::move(t));
  };
  auto add_value = [&](std::vector<ValueInfo>& list, pb::Reader m, const char* what) {
    ValueInfo v = parse_value_info(m);
    if (v.name.empty())
      ORTLITE_THROW(kInvalidGraph, "graph '", g.name, "': a ", what, " has no name");
    list.push_back(std::move(v));
  };
  while (r.next()) {
    switch (r.field()) {
      case 1:
        parse_node_in(r.read_message("NodeProto"), g.nodes, ctx);
        break;
      case 2:
        g.name = r.read_string();
        break;
      case 5: {
        RawTensor t;
        parse_tensor_proto(r.read_message("TensorProto"), t);
        Tensor v = convert_tensor(t, ctx, tensor_label(t, "initializer"));
        add_init(t.name, std::move(v));
        break;
      }
      case 10:
        g.doc_string = r.read_string();
        break;
      case 11:
        add_value(g.inputs, r.read_message("ValueInfoProto"), "graph input");
        break;
      case 12:
        add_value(g.outputs, r.read_message("ValueInfoProto"), "graph output");
        break;
      case 13:
        add_value(g.value_info, r.read_message("ValueInfoProto"), "value_info entry");
        break;
      case 14:  // quantization_annotation
      case 16:  // metadata_props
        r.read_bytes();
        break;
      case 15: {
        RawSparse s;
        parse_sparse_proto(r.read_message("SparseTensorProto"), s);
        std::string name = sparse_name(s);
        Tensor v = densify(s, ctx, "sparse initializer '" + name + "'");
        add_init(std::move(name), std::move(v));
        break;
      }
      default:
        r.skip();
    }
  }
}

// ---------------------------------------------------------------------------------------
// FunctionProto, ModelProto

void parse_function(pb::Reader r, Function& f, Ctx& ctx) {
  while (r.next()) {
    switch (r.field()) {
      case 1:
        f.name = r.read_string();
        break;
      case 4:
        f.inputs.push_back(r.read_string());
        break;
      case 5:
        f.outputs.push_back(r.read_string());
        break;
      case 6:
        f.attribute_names.push_back(r.read_string());
        break;
      case 7:
        parse_node_in(r.read_message("NodeProto"), f.nodes, ctx);
        break;
      case 8:
        f.doc_string = r.read_string();
        break;
      case 9:
        f.opset_imports.push_back(parse_opset(r.read_message("OperatorSetIdProto")));
        break;
      case 10:
        f.domain = normalize_domain(r.read_string());
        break;
      case 11: {
        Attribute a;
        parse_attribute(r.read_message("AttributeProto"), a, ctx);
        f.attribute_defaults.push_back(std::move(a));
        break;
      }
      case 12:  // value_info
      case 14:  // metadata_props
        r.read_bytes();
        break;
      case 13:
        f.overload = r.read_string();
        break;
      default:
        r.skip();
    }
  }
  if (f.name.empty()) ORTLITE_THROW(kInvalidGraph, "a function has no name");
}

void parse_model_proto(pb::Reader r, Model& m, Ctx& ctx) {
  bool has_graph = false;
  while (r.next()) {
    switch (r.field()) {
      case 1:
        m.ir_version = r.read_int64();
        break;
      case 2:
        m.producer_name = r.read_string();
        break;
      case 3:
        m.producer_version = r.read_string();
        break;
      case 4:
        m.domain = r.read_string();
        break;
      case 5:
        m.model_version = r.read_int64();
        break;
      case 6:
        m.doc_string = r.read_string();
        break;
      case 7:
        // A repeated singular message merges, as protobuf does.
        parse_graph(r.read_message("GraphProto"), m.graph, ctx);
        has_graph = true;
        break;
      case 8:
        m.opset_imports.push_back(parse_opset(r.read_message("OperatorSetIdProto")));
        break;
      case 14: {
        std::pair<std::string, std::string> kv;
        parse_string_entry(r.read_message("StringStringEntryProto"), kv.first, kv.second);
        m.metadata_props.push_back(std::move(kv));
        break;
      }
      case 25: {
        Function f;
        pb::Reader fr = r.read_message("FunctionProto");
        try {
          parse_function(fr, f, ctx);
        } catch (const Error& e) {
          throw Error(e.code(), "function '" + f.name + "': " + e.what());
        }
        m.functions.push_back(std::move(f));
        break;
      }
      case 20:  // training_info
      case 26:  // configuration
        r.read_bytes();
        break;
      default:
        r.skip();
    }
  }
  if (!has_graph) ORTLITE_THROW(kInvalidProtobuf, "the model has no graph (not an ONNX model?)");
}

}  // namespace

Model parse_model(const uint8_t* data, size_t size, BufferPtr backing, ExternalDataSource* external,
                  bool file_mapped) {
  if (size == 0) ORTLITE_THROW(kInvalidProtobuf, "the model is empty (0 bytes)");
  Ctx ctx;
  ctx.backing = backing;
  ctx.external = external;
  ctx.file_mapped = file_mapped && backing;
  Model m;
  parse_model_proto(pb::Reader(data, size, data, "ModelProto"), m, ctx);
  m.backing = std::move(backing);
  m.backing_is_file = ctx.file_mapped;
  return m;
}

Tensor parse_tensor(const uint8_t* data, size_t size) {
  Ctx ctx;
  ctx.owned = true;
  RawTensor t;
  parse_tensor_proto(pb::Reader(data, size, data, "TensorProto"), t);
  return convert_tensor(t, ctx, tensor_label(t, "tensor"));
}

}  // namespace ortlite::onnx_reader
