// Element types, numbered as ONNX's TensorProto.DataType.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace ortlite {

enum class DataType : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
};

// True for the element types ortlite can hold in a Tensor.
bool dtype_supported(DataType t);
// Bytes per element; sizeof(std::string) for kString; 0 for unsupported types.
size_t dtype_size(DataType t);
// onnxruntime's spelling inside "tensor(...)": "float", "int64", "string", "float16", ...
const char* dtype_name(DataType t);
// Parses the spelling above (also accepts "tensor(float)"); kUndefined if unknown.
DataType dtype_from_name(const std::string& name);
bool dtype_is_float(DataType t);    // float16, bfloat16, float, double
bool dtype_is_integer(DataType t);  // signed or unsigned, not bool
bool dtype_is_signed(DataType t);

// IEEE half precision stored as its 16 bits. Arithmetic goes through float.
struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  explicit Float16(float f) : bits(from_float(f)) {}
  operator float() const { return to_float(bits); }
  static uint16_t from_float(float f);
  static float to_float(uint16_t h);
};

// bfloat16: the high 16 bits of a float, rounded to nearest even.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f) : bits(from_float(f)) {}
  operator float() const {
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  static uint16_t from_float(float f);
};

// Maps a C++ type to its DataType.
template <typename T>
struct DataTypeOf;
#define ORTLITE_DTYPE_OF(T, E)                     \
  template <>                                      \
  struct DataTypeOf<T> {                           \
    static constexpr DataType value = DataType::E; \
  };
ORTLITE_DTYPE_OF(float, kFloat)
ORTLITE_DTYPE_OF(double, kDouble)
ORTLITE_DTYPE_OF(Float16, kFloat16)
ORTLITE_DTYPE_OF(BFloat16, kBFloat16)
ORTLITE_DTYPE_OF(int8_t, kInt8)
ORTLITE_DTYPE_OF(int16_t, kInt16)
ORTLITE_DTYPE_OF(int32_t, kInt32)
ORTLITE_DTYPE_OF(int64_t, kInt64)
ORTLITE_DTYPE_OF(uint8_t, kUInt8)
ORTLITE_DTYPE_OF(uint16_t, kUInt16)
ORTLITE_DTYPE_OF(uint32_t, kUInt32)
ORTLITE_DTYPE_OF(uint64_t, kUInt64)
ORTLITE_DTYPE_OF(bool, kBool)
ORTLITE_DTYPE_OF(std::string, kString)
#undef ORTLITE_DTYPE_OF

}  // namespace ortlite

// Calls FN.template operator()<T>() with T the C++ type of DTYPE, for the numeric types
// (float, double, float16, bfloat16, all ints, bool). Unsupported types throw
// NotImplemented naming WHAT.  Usage:
//   ORTLITE_DISPATCH_NUMERIC(t.dtype(), "Add", [&](auto tag) { using T = decltype(tag); ... });
// The lambda receives a default-constructed T as a tag.
#define ORTLITE_DISPATCH_CASE(E, T, FN) \
  case ::ortlite::DataType::E:          \
    return FN(T{});

#define ORTLITE_DISPATCH_NUMERIC(DTYPE, WHAT, FN)                                             \
  [&]() {                                                                                     \
    switch (DTYPE) {                                                                          \
      ORTLITE_DISPATCH_CASE(kFloat, float, FN)                                                \
      ORTLITE_DISPATCH_CASE(kDouble, double, FN)                                              \
      ORTLITE_DISPATCH_CASE(kFloat16, ::ortlite::Float16, FN)                                 \
      ORTLITE_DISPATCH_CASE(kBFloat16, ::ortlite::BFloat16, FN)                               \
      ORTLITE_DISPATCH_CASE(kInt8, int8_t, FN)                                                \
      ORTLITE_DISPATCH_CASE(kInt16, int16_t, FN)                                              \
      ORTLITE_DISPATCH_CASE(kInt32, int32_t, FN)                                              \
      ORTLITE_DISPATCH_CASE(kInt64, int64_t, FN)                                              \
      ORTLITE_DISPATCH_CASE(kUInt8, uint8_t, FN)                                              \
      ORTLITE_DISPATCH_CASE(kUInt16, uint16_t, FN)                                            \
      ORTLITE_DISPATCH_CASE(kUInt32, uint32_t, FN)                                            \
      ORTLITE_DISPATCH_CASE(kUInt64, uint64_t, FN)                                            \
      ORTLITE_DISPATCH_CASE(kBool, bool, FN)                                                  \
      default:                                                                                \
        ORTLITE_THROW(kNotImplemented, WHAT, ": element type ", ::ortlite::dtype_name(DTYPE), \
                      " is not supported");                                                   \
    }                                                                                         \
  }()

// Same for float, double, float16 and bfloat16 only.
#define ORTLITE_DISPATCH_FLOAT(DTYPE, WHAT, FN)                                               \
  [&]() {                                                                                     \
    switch (DTYPE) {                                                                          \
      ORTLITE_DISPATCH_CASE(kFloat, float, FN)                                                \
      ORTLITE_DISPATCH_CASE(kDouble, double, FN)                                              \
      ORTLITE_DISPATCH_CASE(kFloat16, ::ortlite::Float16, FN)                                 \
      ORTLITE_DISPATCH_CASE(kBFloat16, ::ortlite::BFloat16, FN)                               \
      default:                                                                                \
        ORTLITE_THROW(kNotImplemented, WHAT, ": element type ", ::ortlite::dtype_name(DTYPE), \
                      " is not supported");                                                   \
    }                                                                                         \
  }()
