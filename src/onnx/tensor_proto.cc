// The TensorProto and SparseTensorProto stages of the ONNX reader: element layouts, typed
// fields, raw_data in place, external data, narrow types unpacked, sparse densified.
#include "onnx/tensor_proto.h"

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

#include "ortlite/dtype.h"
#include "ortlite/status.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the ONNX reader assumes a little-endian host (raw_data is little-endian)"
#endif

namespace ortlite::onnx_reader::detail {

void parse_string_entry(pb::Reader r, std::string& key, std::string& value) {
  while (r.next()) {
    switch (r.field()) {
      case 1:
        key = r.read_string();
        break;
      case 2:
        value = r.read_string();
        break;
      default:
        r.skip();
    }
  }
}

// A sparse tensor is densified; refuse dense forms beyond this many bytes.
constexpr uint64_t kMaxDenseBytesFromSparse = uint64_t{1} << 30;

const char* data_type_enum_name(int32_t t) {
  static const char* const kNames[] = {
      "UNDEFINED",      "FLOAT",    "UINT8",        "INT8",           "UINT16",
      "INT16",          "INT32",    "INT64",        "STRING",         "BOOL",
      "FLOAT16",        "DOUBLE",   "UINT32",       "UINT64",         "COMPLEX64",
      "COMPLEX128",     "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
      "FLOAT8E5M2FNUZ", "UINT4",    "INT4",         "FLOAT4E2M1",     "FLOAT8E8M0",
      "UINT2",          "INT2"};
  if (t >= 0 && t <= kMaxKnownDataType) return kNames[t];
  return "unknown";
}

std::string dims_to_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

// Reserves room for a packed run of the current field (the count is justified by the bytes
// present); unpacked elements grow the vector geometrically.

double bits_to_double(uint64_t u) {
  double d;
  std::memcpy(&d, &u, 8);
  return d;
}

// ---------------------------------------------------------------------------------------
// Buffers

BufferPtr new_buffer(size_t nbytes) {
  return BufferPtr::adopt(Buffer::allocate(nbytes));
}

// Re-labels an owned buffer as kConstant (a wrapper that holds the owned one).
BufferPtr as_constant(BufferPtr owned) {
  Buffer* inner = owned.detach();
  try {
    return BufferPtr::adopt(Buffer::wrap(inner->data(), inner->size(), BufferKind::kConstant,
                                         [inner]() { inner->release_ref(); }));
  } catch (...) {
    inner->release_ref();
    throw;
  }
}

BufferPtr finish(BufferPtr b, const Ctx& ctx) {
  return ctx.owned ? std::move(b) : as_constant(std::move(b));
}

// ---------------------------------------------------------------------------------------
// TensorProto

void parse_tensor_proto(pb::Reader r, RawTensor& t) {
  while (r.next()) {
    switch (r.field()) {
      case 1:  // dims
        r.read_repeated_varint([&](uint64_t v) { t.dims.push_back(static_cast<int64_t>(v)); });
        break;
      case 2:
        t.data_type = r.read_int32();
        t.has_data_type = true;
        break;
      case 3:  // segment
        r.read_bytes();
        t.has_segment = true;
        break;
      case 4:
        reserve_packed(t.float_data, r, pb::kFixed32);
        r.read_repeated_fixed32([&](uint32_t v) { t.float_data.push_back(bits_to_float(v)); });
        break;
      case 5:
        r.read_repeated_varint([&](uint64_t v) {
          t.int32_data.push_back(static_cast<int32_t>(static_cast<uint32_t>(v)));
        });
        break;
      case 6:
        t.string_data.push_back(r.read_raw_string());
        break;
      case 7:
        r.read_repeated_varint(
            [&](uint64_t v) { t.int64_data.push_back(static_cast<int64_t>(v)); });
        break;
      case 8:
        t.name = r.read_string();
        break;
      case 9:
        t.raw = r.read_bytes();
        t.has_raw = true;
        break;
      case 10:
        reserve_packed(t.double_data, r, pb::kFixed64);
        r.read_repeated_fixed64([&](uint64_t v) { t.double_data.push_back(bits_to_double(v)); });
        break;
      case 11:
        r.read_repeated_varint([&](uint64_t v) { t.uint64_data.push_back(v); });
        break;
      case 12:  // doc_string
        r.read_bytes();
        break;
      case 13: {
        std::pair<std::string, std::string> kv;
        parse_string_entry(r.read_message("StringStringEntryProto"), kv.first, kv.second);
        t.external_data.push_back(std::move(kv));
        break;
      }
      case 14:
        t.data_location = r.read_int32();
        break;
      case 16:  // metadata_props
        r.read_bytes();
        break;
      default:
        r.skip();
    }
  }
}

std::string tensor_label(const RawTensor& t, const char* role) {
  std::string s = role;
  if (!t.name.empty()) s += " '" + t.name + "'";
  return s;
}

struct Layout {
  DataType dtype = DataType::kUndefined;
  Shape shape;
  int64_t numel = 0;
  size_t esize = 0;
  size_t nbytes = 0;  // numel * esize (numeric types)
  size_t align = 1;
  // Bytes of the values in the TensorProto: nbytes, except for the packed 4- and 2-bit
  // types, which ortlite unpacks to a byte per element.
  size_t stored = 0;
  bool packed = false;
};

// Checks dims (no negative values, no overflow) and the element type.
Layout check_dims(const std::vector<int64_t>& dims, DataType dtype, const std::string& label) {
  Layout L;
  L.dtype = dtype;
  L.shape = dims;
  int64_t numel = 1, nonzero_product = 1;
  for (int64_t d : dims) {
    if (d < 0)
      ORTLITE_THROW(kInvalidGraph, label, ": negative dimension ", d, " in dims ",
                    dims_to_string(dims));
    if (d > 0) {
      if (nonzero_product > std::numeric_limits<int64_t>::max() / d)
        ORTLITE_THROW(kInvalidGraph, label, ": the product of dims ", dims_to_string(dims),
                      " overflows");
      nonzero_product *= d;
    }
    numel *= d;  // cannot overflow: |numel| <= nonzero_product or 0
  }
  L.numel = numel;
  L.esize = dtype_size(dtype);
  if (L.esize == 0)
    ORTLITE_THROW(kNotImplemented, label, ": element type ", dtype_name(dtype),
                  " is not supported");
  size_t max_elems = static_cast<size_t>(std::numeric_limits<std::ptrdiff_t>::max()) / L.esize;
  if (static_cast<uint64_t>(nonzero_product) > max_elems)
    ORTLITE_THROW(kInvalidGraph, label, ": dims ", dims_to_string(dims), " of ", dtype_name(dtype),
                  " need more bytes than can be addressed");
  L.nbytes = static_cast<size_t>(numel) * L.esize;
  L.align = std::min(L.esize, alignof(std::max_align_t));
  L.packed = dtype_packed_bits(dtype) != 0;
  L.stored = L.packed ? dtype_packed_bytes(dtype, numel) : L.nbytes;
  return L;
}

Layout check_layout(const RawTensor& t, const std::string& label) {
  if (t.has_segment)
    ORTLITE_THROW(kNotImplemented, label,
                  ": segmented tensors (TensorProto.segment) are not "
                  "supported");
  if (!t.has_data_type || t.data_type == 0)
    ORTLITE_THROW(kInvalidGraph, label, ": data_type is not set");
  if (t.data_type < 0 || t.data_type > kMaxKnownDataType)
    ORTLITE_THROW(kInvalidGraph, label, ": unknown data_type ", t.data_type);
  DataType dtype = static_cast<DataType>(t.data_type);
  if (!dtype_supported(dtype))
    ORTLITE_THROW(kNotImplemented, label, ": data_type ", data_type_enum_name(t.data_type),
                  " is not supported");
  return check_dims(t.dims, dtype, label);
}

// Which typed field carries a dtype's values (onnx.proto's comments).
enum class TypedField { kFloat, kInt32, kString, kInt64, kDouble, kUInt64 };

TypedField typed_field_for(DataType t) {
  switch (t) {
    case DataType::kFloat:
    case DataType::kComplex64:
      return TypedField::kFloat;
    case DataType::kString:
      return TypedField::kString;
    case DataType::kInt64:
      return TypedField::kInt64;
    case DataType::kDouble:
    case DataType::kComplex128:
      return TypedField::kDouble;
    case DataType::kUInt32:
    case DataType::kUInt64:
      return TypedField::kUInt64;
    default:
      return TypedField::kInt32;
  }
}

const char* typed_field_name(TypedField f) {
  switch (f) {
    case TypedField::kFloat:
      return "float_data";
    case TypedField::kInt32:
      return "int32_data";
    case TypedField::kString:
      return "string_data";
    case TypedField::kInt64:
      return "int64_data";
    case TypedField::kDouble:
      return "double_data";
    case TypedField::kUInt64:
      return "uint64_data";
  }
  return "?";
}

size_t typed_count(const RawTensor& t, TypedField f) {
  switch (f) {
    case TypedField::kFloat:
      return t.float_data.size();
    case TypedField::kInt32:
      return t.int32_data.size();
    case TypedField::kString:
      return t.string_data.size();
    case TypedField::kInt64:
      return t.int64_data.size();
    case TypedField::kDouble:
      return t.double_data.size();
    case TypedField::kUInt64:
      return t.uint64_data.size();
  }
  return 0;
}

template <typename Dst, typename Src>
void convert_into(void* dst, const std::vector<Src>& src) {
  Dst* d = static_cast<Dst*>(dst);
  for (size_t i = 0; i < src.size(); ++i) d[i] = static_cast<Dst>(src[i]);
}

// Fills `dst` (L.nbytes bytes) from the typed field; counts are already checked.
void fill_from_typed(const RawTensor& t, const Layout& L, void* dst) {
  switch (L.dtype) {
    case DataType::kFloat:
      if (!t.float_data.empty()) std::memcpy(dst, t.float_data.data(), L.nbytes);
      return;
    case DataType::kDouble:
      if (!t.double_data.empty()) std::memcpy(dst, t.double_data.data(), L.nbytes);
      return;
    case DataType::kInt64:
      if (!t.int64_data.empty()) std::memcpy(dst, t.int64_data.data(), L.nbytes);
      return;
    case DataType::kInt32:
      if (!t.int32_data.empty()) std::memcpy(dst, t.int32_data.data(), L.nbytes);
      return;
    case DataType::kInt8:
      return convert_into<int8_t>(dst, t.int32_data);
    case DataType::kUInt8:
    case DataType::kFloat8E4M3FN:  // the 8 bits of the value
    case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ:
    case DataType::kFloat8E8M0:
      return convert_into<uint8_t>(dst, t.int32_data);
    case DataType::kInt4:  // one packed byte per value
    case DataType::kUInt4:
    case DataType::kFloat4E2M1:
    case DataType::kInt2:
    case DataType::kUInt2: {
      std::vector<uint8_t> bytes(t.int32_data.size());
      convert_into<uint8_t>(bytes.data(), t.int32_data);
      unpack_narrow(L.dtype, bytes.data(), static_cast<uint8_t*>(dst), L.numel);
      return;
    }
    case DataType::kInt16:
      return convert_into<int16_t>(dst, t.int32_data);
    case DataType::kUInt16:
    case DataType::kFloat16:
    case DataType::kBFloat16:  // the 16 bits of the value
      return convert_into<uint16_t>(dst, t.int32_data);
    case DataType::kBool: {
      uint8_t* d = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < t.int32_data.size(); ++i) d[i] = t.int32_data[i] != 0 ? 1 : 0;
      return;
    }
    case DataType::kUInt32:
      return convert_into<uint32_t>(dst, t.uint64_data);
    case DataType::kUInt64:
      if (!t.uint64_data.empty()) std::memcpy(dst, t.uint64_data.data(), L.nbytes);
      return;
    case DataType::kComplex64:  // float_data holds real, imaginary pairs
      if (!t.float_data.empty()) std::memcpy(dst, t.float_data.data(), L.nbytes);
      return;
    case DataType::kComplex128:
      if (!t.double_data.empty()) std::memcpy(dst, t.double_data.data(), L.nbytes);
      return;
    default:
      ORTLITE_THROW(kNotImplemented, "element type ", dtype_name(L.dtype),
                    " cannot be read from typed fields");
  }
}

// Number of typed-field values per element (complex types use two).
size_t values_per_element(DataType t) {
  return (t == DataType::kComplex64 || t == DataType::kComplex128) ? 2 : 1;
}

void parse_u64_decimal(const std::string& s, const std::string& label, const char* key,
                       uint64_t& out) {
  if (s.empty() || s.size() > 20)
    ORTLITE_THROW(kInvalidGraph, label, ": external_data ", key, " '", s,
                  "' is not a non-negative integer");
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9')
      ORTLITE_THROW(kInvalidGraph, label, ": external_data ", key, " '", s,
                    "' is not a non-negative integer");
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - digit) / 10)
      ORTLITE_THROW(kInvalidGraph, label, ": external_data ", key, " '", s, "' overflows");
    v = v * 10 + digit;
  }
  out = v;
}

Tensor load_external(const RawTensor& t, const Layout& L, Ctx& ctx, const std::string& label) {
  if (L.dtype == DataType::kString)
    ORTLITE_THROW(kInvalidGraph, label, ": string tensors cannot use external data");
  ExternalDataRef ref;
  ref.tensor = label;
  ref.name = t.name;
  bool has_location = false;
  for (const auto& [key, value] : t.external_data) {
    if (key == "location") {
      ref.location = value;
      has_location = true;
    } else if (key == "offset") {
      parse_u64_decimal(value, label, "offset", ref.offset);
    } else if (key == "length") {
      parse_u64_decimal(value, label, "length", ref.length);
      ref.has_length = true;
    }
    // "checksum" and unknown keys are ignored.
  }
  if (!has_location || ref.location.empty())
    ORTLITE_THROW(kInvalidGraph, label,
                  ": data_location is EXTERNAL but external_data has no "
                  "'location'");
  if (ref.has_length && ref.length != L.stored)
    ORTLITE_THROW(kInvalidGraph, label, ": external_data length ", ref.length, " but dims ",
                  dims_to_string(t.dims), " of ", dtype_name(L.dtype), " need ", L.stored,
                  " bytes");
  if (!ctx.external)
    ORTLITE_THROW(kFail, label, ": uses external data (location '", ref.location,
                  "'), which can only be loaded with the model from a file path, not from "
                  "bytes");
  ref.nbytes = L.stored;
  ref.alignment = L.align;
  BufferPtr b = ctx.external->load(ref);
  if (L.packed) {
    BufferPtr unpacked = new_buffer(L.nbytes);
    unpack_narrow(L.dtype, static_cast<const uint8_t*>(b->data()),
                  static_cast<uint8_t*>(unpacked->data()), L.numel);
    b = finish(std::move(unpacked), ctx);
  } else if (ctx.owned) {
    BufferPtr copy = new_buffer(L.nbytes);
    if (L.nbytes) std::memcpy(copy->data(), b->data(), L.nbytes);
    b = std::move(copy);
  }
  return Tensor(L.dtype, L.shape, std::move(b));
}

// TensorProto -> Tensor. `role` names it in messages ("initializer", "attribute 't'").
Tensor convert_tensor(const RawTensor& t, Ctx& ctx, const std::string& label) {
  Layout L = check_layout(t, label);

  TypedField expected = typed_field_for(L.dtype);
  const TypedField all[] = {TypedField::kFloat, TypedField::kInt32,  TypedField::kString,
                            TypedField::kInt64, TypedField::kDouble, TypedField::kUInt64};
  const char* typed_present = nullptr;
  for (TypedField f : all) {
    if (typed_count(t, f) == 0) continue;
    if (f != expected)
      ORTLITE_THROW(kInvalidGraph, label, ": has ", typed_field_name(f), " but the values of a ",
                    dtype_name(L.dtype), " tensor go in ", typed_field_name(expected));
    typed_present = typed_field_name(f);
  }

  if (t.data_location != 0 && t.data_location != 1)
    ORTLITE_THROW(kInvalidGraph, label, ": unknown data_location ", t.data_location);
  if (t.data_location == 1) {
    if (t.has_raw || typed_present)
      ORTLITE_THROW(kInvalidGraph, label, ": data_location is EXTERNAL but the tensor also has ",
                    t.has_raw ? "raw_data" : typed_present);
    return load_external(t, L, ctx, label);
  }

  if (t.has_raw) {
    if (typed_present)
      ORTLITE_THROW(kInvalidGraph, label, ": has both raw_data and ", typed_present);
    if (L.dtype == DataType::kString)
      ORTLITE_THROW(kInvalidGraph, label, ": a string tensor cannot use raw_data");
    if (t.raw.size != L.stored)
      ORTLITE_THROW(kInvalidGraph, label, ": raw_data holds ", t.raw.size, " bytes but dims ",
                    dims_to_string(t.dims), " of ", dtype_name(L.dtype), " need ", L.stored);
    if (L.packed) {
      BufferPtr b = new_buffer(L.nbytes);
      unpack_narrow(L.dtype, t.raw.data, static_cast<uint8_t*>(b->data()), L.numel);
      if (ctx.file_mapped) drop_file_pages(t.raw.data, t.raw.size);
      return Tensor(L.dtype, L.shape, finish(std::move(b), ctx));
    }
    uintptr_t addr = reinterpret_cast<uintptr_t>(t.raw.data);
    if (!ctx.owned && ctx.backing && L.nbytes > 0 && addr % L.align == 0) {
      // In place over the model bytes; the buffer keeps the model's backing alive.
      BufferPtr keep = ctx.backing;
      BufferPtr b = BufferPtr::adopt(Buffer::wrap(const_cast<uint8_t*>(t.raw.data), L.nbytes,
                                                  BufferKind::kConstant, [keep]() {}));
      return Tensor(L.dtype, L.shape, std::move(b));
    }
    BufferPtr b = new_buffer(L.nbytes);
    if (L.nbytes) std::memcpy(b->data(), t.raw.data, L.nbytes);
    // The copy is the one used: the mapped pages it came from need not stay in memory.
    if (ctx.file_mapped) drop_file_pages(t.raw.data, t.raw.size);
    return Tensor(L.dtype, L.shape, finish(std::move(b), ctx));
  }

  // Typed fields.
  size_t count = typed_count(t, expected);
  uint64_t want =
      L.packed ? L.stored : static_cast<uint64_t>(L.numel) * values_per_element(L.dtype);
  if (count != want)
    ORTLITE_THROW(kInvalidGraph, label, ": has ", count, " values in ", typed_field_name(expected),
                  " but dims ", dims_to_string(t.dims), " need ", want);
  if (L.dtype == DataType::kString) {
    BufferPtr b = BufferPtr::adopt(Buffer::allocate_strings(static_cast<size_t>(L.numel)));
    std::string* d = static_cast<std::string*>(b->data());
    for (size_t i = 0; i < count; ++i) d[i] = t.string_data[i];
    return Tensor(L.dtype, L.shape, finish(std::move(b), ctx));
  }
  BufferPtr b = new_buffer(L.nbytes);
  if (L.nbytes) fill_from_typed(t, L, b->data());
  return Tensor(L.dtype, L.shape, finish(std::move(b), ctx));
}

// ---------------------------------------------------------------------------------------
// SparseTensorProto (densified)

void parse_sparse_proto(pb::Reader r, RawSparse& s) {
  while (r.next()) {
    switch (r.field()) {
      case 1:
        if (!s.values) s.values.emplace();
        parse_tensor_proto(r.read_message("TensorProto"), *s.values);
        break;
      case 2:
        if (!s.indices) s.indices.emplace();
        parse_tensor_proto(r.read_message("TensorProto"), *s.indices);
        break;
      case 3:
        r.read_repeated_varint([&](uint64_t v) { s.dims.push_back(static_cast<int64_t>(v)); });
        break;
      default:
        r.skip();
    }
  }
}

std::string sparse_name(const RawSparse& s) {
  return s.values ? s.values->name : std::string();
}

Tensor densify(const RawSparse& s, Ctx& ctx, const std::string& label) {
  if (!s.values) ORTLITE_THROW(kInvalidGraph, label, ": sparse tensor has no values");
  Ctx copy_ctx = ctx;
  copy_ctx.owned = true;  // values/indices are read once, then dropped
  Tensor values = convert_tensor(*s.values, copy_ctx, label + " (values)");
  DataType dtype = values.dtype();
  Layout L = check_dims(s.dims, dtype, label);
  if (dtype != DataType::kString && L.nbytes > kMaxDenseBytesFromSparse)
    ORTLITE_THROW(kNotImplemented, label, ": the dense form of this sparse tensor (dims ",
                  dims_to_string(s.dims), ") needs ", L.nbytes, " bytes, more than supported");
  if (dtype == DataType::kString &&
      static_cast<uint64_t>(L.numel) > kMaxDenseBytesFromSparse / sizeof(std::string))
    ORTLITE_THROW(kNotImplemented, label, ": sparse string tensor too large to densify");
  if (values.rank() != 1)
    ORTLITE_THROW(kInvalidGraph, label, ": sparse values must be 1-D, got ",
                  shape_to_string(values.shape()));
  int64_t nnz = values.dim(0);
  std::vector<int64_t> linear(static_cast<size_t>(nnz));
  if (nnz > 0) {
    if (!s.indices) ORTLITE_THROW(kInvalidGraph, label, ": sparse tensor has no indices");
    Tensor idx = convert_tensor(*s.indices, copy_ctx, label + " (indices)");
    if (idx.dtype() != DataType::kInt64)
      ORTLITE_THROW(kInvalidGraph, label, ": sparse indices must be int64, got ",
                    dtype_name(idx.dtype()));
    const int64_t* ix = idx.data<int64_t>();
    size_t rank = s.dims.size();
    if (idx.rank() == 1 && idx.dim(0) == nnz) {
      for (int64_t k = 0; k < nnz; ++k) {
        if (ix[k] < 0 || ix[k] >= L.numel)
          ORTLITE_THROW(kInvalidGraph, label, ": sparse index ", ix[k],
                        " is out of range for dims ", dims_to_string(s.dims));
        linear[static_cast<size_t>(k)] = ix[k];
      }
    } else if (idx.rank() == 2 && idx.dim(0) == nnz && static_cast<size_t>(idx.dim(1)) == rank) {
      for (int64_t k = 0; k < nnz; ++k) {
        int64_t off = 0;
        for (size_t d = 0; d < rank; ++d) {
          int64_t v = ix[static_cast<size_t>(k) * rank + d];
          if (v < 0 || v >= s.dims[d])
            ORTLITE_THROW(kInvalidGraph, label, ": sparse index ", v, " on axis ", d,
                          " is out of range for dims ", dims_to_string(s.dims));
          off = off * s.dims[d] + v;
        }
        linear[static_cast<size_t>(k)] = off;
      }
    } else {
      ORTLITE_THROW(kInvalidGraph, label, ": sparse indices of shape ",
                    shape_to_string(idx.shape()), " do not match ", nnz, " values and dims ",
                    dims_to_string(s.dims));
    }
  }
  if (dtype == DataType::kString) {
    BufferPtr b = BufferPtr::adopt(Buffer::allocate_strings(static_cast<size_t>(L.numel)));
    std::string* d = static_cast<std::string*>(b->data());
    const std::string* v = values.data<std::string>();
    for (size_t k = 0; k < linear.size(); ++k) d[linear[k]] = v[k];
    return Tensor(dtype, L.shape, finish(std::move(b), ctx));
  }
  BufferPtr b = new_buffer(L.nbytes);
  if (L.nbytes) std::memset(b->data(), 0, L.nbytes);
  const char* v = static_cast<const char*>(values.raw_data());
  char* d = static_cast<char*>(b->data());
  for (size_t k = 0; k < linear.size(); ++k)
    std::memcpy(d + static_cast<size_t>(linear[k]) * L.esize, v + k * L.esize, L.esize);
  return Tensor(dtype, L.shape, finish(std::move(b), ctx));
}

}  // namespace ortlite::onnx_reader::detail
