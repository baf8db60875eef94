// Small helpers of the model IR (include/ortlite/model.h).
#include "ortlite/model.h"

#include <string>

#include "ortlite/dtype.h"

namespace ortlite {

const char* attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::kUndefined:
      return "UNDEFINED";
    case AttrType::kFloat:
      return "FLOAT";
    case AttrType::kInt:
      return "INT";
    case AttrType::kString:
      return "STRING";
    case AttrType::kTensor:
      return "TENSOR";
    case AttrType::kGraph:
      return "GRAPH";
    case AttrType::kSparseTensor:
      return "SPARSE_TENSOR";
    case AttrType::kTypeProto:
      return "TYPE_PROTO";
    case AttrType::kFloats:
      return "FLOATS";
    case AttrType::kInts:
      return "INTS";
    case AttrType::kStrings:
      return "STRINGS";
    case AttrType::kTensors:
      return "TENSORS";
    case AttrType::kGraphs:
      return "GRAPHS";
    case AttrType::kSparseTensors:
      return "SPARSE_TENSORS";
    case AttrType::kTypeProtos:
      return "TYPE_PROTOS";
  }
  return "UNKNOWN";
}

const Attribute* Node::find_attr(const std::string& attr_name) const {
  for (const Attribute& a : attributes)
    if (a.name == attr_name) return &a;
  return nullptr;
}

std::string Node::label() const {
  std::string s = op_type.empty() ? std::string("node") : op_type + " node";
  if (!name.empty()) return s + " '" + name + "'";
  bool any = false;
  std::string outs;
  for (const std::string& o : outputs) {
    if (o.empty()) continue;
    if (any) outs += ", ";
    outs += o;
    any = true;
  }
  if (any) s += " (outputs: " + outs + ")";
  return s;
}

namespace {
std::string elem_name(DataType t) {
  const char* n = dtype_name(t);
  return n && *n ? std::string(n) : std::string("undefined");
}
}  // namespace

// Iterative: a TypeInfo built by hand may nest deeper than the reader allows (64).
std::string TypeInfo::to_string() const {
  std::string head, tail;
  for (const TypeInfo* t = this;; t = t->elem.get()) {
    switch (t->kind) {
      case Kind::kTensor:
        return head + "tensor(" + elem_name(t->elem_type) + ")" + tail;
      case Kind::kSparseTensor:
        return head + "sparse_tensor(" + elem_name(t->elem_type) + ")" + tail;
      case Kind::kSequence:
        head += "seq(";
        break;
      case Kind::kOptional:
        head += "optional(";
        break;
      case Kind::kMap:  // elem_type holds the key type, elem the value type
        head += "map(" + elem_name(t->elem_type) + ",";
        break;
      case Kind::kUnknown:
        return head + "unknown" + tail;
    }
    tail += ")";
    if (!t->elem) return head + "unknown" + tail;
  }
}

}  // namespace ortlite
