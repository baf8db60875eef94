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
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUInt4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
  kFloat8E8M0 = 24,
  kUInt2 = 25,
  kInt2 = 26,
};

// The highest TensorProto.DataType number ortlite knows.
constexpr int32_t kMaxDataType = 26;

// True for the element types ortlite can hold in a Tensor.
bool dtype_supported(DataType t);
// Bytes per element; sizeof(std::string) for kString; 0 for unsupported types.
size_t dtype_size(DataType t);
// onnxruntime's spelling inside "tensor(...)": "float", "int64", "string", "float16", ...
const char* dtype_name(DataType t);
// Parses the spelling above (also accepts "tensor(float)"); kUndefined if unknown.
DataType dtype_from_name(const std::string& name);
// These three describe the arithmetic types only: the narrow types below answer false.
bool dtype_is_float(DataType t);    // float16, bfloat16, float, double
bool dtype_is_integer(DataType t);  // signed or unsigned, not bool
bool dtype_is_signed(DataType t);

// ---- Narrow types -------------------------------------------------------------------------
// float8e4m3fn, float8e4m3fnuz, float8e5m2, float8e5m2fnuz, float8e8m0, float4e2m1, int4,
// uint4, int2 and uint2. In memory every element takes one byte, laid out as numpy's
// ml_dtypes lays them out: the element's bit pattern in the low 8 / 4 / 2 bits and, for the
// 4- and 2-bit types, zeros above (readers mask those bits, so stray ones are ignored).
// TensorProtos pack the 4- and 2-bit types (two or four elements a byte, the first in the
// lowest bits); the protobuf reader unpacks them. Only data movement (Reshape, Transpose,
// Concat, ...) and Cast understand these types; arithmetic kernels report NotImplemented.
bool dtype_is_narrow(DataType t);
bool dtype_is_narrow_float(DataType t);  // the float8 types and float4e2m1
bool dtype_is_narrow_int(DataType t);    // int4, uint4, int2, uint2
// Bits an element takes in a TensorProto: 4 (int4, uint4, float4e2m1), 2 (int2, uint2), or
// 0 for the types that are not packed.
int dtype_packed_bits(DataType t);
// Bytes that n elements of a packed type take in a TensorProto: ceil(n * bits / 8).
size_t dtype_packed_bytes(DataType t, int64_t n);
// Unpacks n elements of a packed type from `src` (dtype_packed_bytes(t, n) bytes) into
// `dst` (n bytes, one element each).
void unpack_narrow(DataType t, const uint8_t* src, uint8_t* dst, int64_t n);

// The value of every byte as an element of a narrow float type (float8*, float4e2m1): a
// table of 256 floats, exact (NaN codes give NaN, float8e5m2's infinities infinity);
// nullptr for other types.
const float* narrow_float_values(DataType t);
// The same for int4, uint4, int2 and uint2; nullptr for other types.
const int8_t* narrow_int_values(DataType t);
// Rounds v to the nearest value of float8e4m3fn, float8e4m3fnuz, float8e5m2, float8e5m2fnuz
// or float4e2m1 (ties to even) and returns its bit pattern. Out of range values (and
// infinities) give the largest finite value of their sign when `saturate`, else NaN
// (infinity for float8e5m2); the fnuz types have no -0. float4e2m1 has neither NaN nor
// infinity: it always saturates and maps NaN to +6, as ONNX's float4 specification says.
uint8_t narrow_float_from_double(DataType t, double v, bool saturate);
// The same for a float (the same results; faster), one value or n of them.
uint8_t narrow_float_from_float(DataType t, float v, bool saturate);
void narrow_float_from_floats(DataType t, const float* src, uint8_t* dst, int64_t n, bool saturate);
// Cast's round_mode for float8e8m0 targets.
enum class E8M0Rounding { kUp, kDown, kNearest };
// float -> float8e8m0 bits, bit for bit as onnx.numpy_helper.to_float8e8m0, the code that
// made ONNX's Cast tests: the exponent field of the float, rounded by `mode` on the float's
// fraction bits (subnormal floats count as exponent 0); `saturate` keeps 2^127 from rounding
// up to NaN. The sign is ignored; NaN and infinities give NaN.
uint8_t float8e8m0_from_float(float v, bool saturate, E8M0Rounding mode);
// v rounded to the nearest integer (ties to even) and wrapped into int4 / uint4 / int2 /
// uint2 (the low bits of the two's complement); NaN, infinities and values beyond the int32
// range give 0.
uint8_t narrow_int_from_double(DataType t, double v);
// The low bits of an integer value as an element of int4 / uint4 / int2 / uint2.
inline uint8_t narrow_int_from_bits(DataType t, uint64_t v) {
  return static_cast<uint8_t>(v & (dtype_packed_bits(t) == 2 ? 0x3u : 0xfu));
}

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

// The switch shared by the dispatch macros: CASES is a list of ORTLITE_DISPATCH_CASE.
#define ORTLITE_DISPATCH_SWITCH(DTYPE, WHAT, CASES)                                           \
  [&]() {                                                                                     \
    switch (DTYPE) {                                                                          \
      CASES                                                                                   \
      default:                                                                                \
        ORTLITE_THROW(kNotImplemented, WHAT, ": element type ", ::ortlite::dtype_name(DTYPE), \
                      " is not supported");                                                   \
    }                                                                                         \
  }()

#define ORTLITE_FLOAT_CASES(FN)                           \
  ORTLITE_DISPATCH_CASE(kFloat, float, FN)                \
  ORTLITE_DISPATCH_CASE(kDouble, double, FN)              \
  ORTLITE_DISPATCH_CASE(kFloat16, ::ortlite::Float16, FN) \
  ORTLITE_DISPATCH_CASE(kBFloat16, ::ortlite::BFloat16, FN)

#define ORTLITE_ARITHMETIC_CASES(FN)           \
  ORTLITE_FLOAT_CASES(FN)                      \
  ORTLITE_DISPATCH_CASE(kInt8, int8_t, FN)     \
  ORTLITE_DISPATCH_CASE(kInt16, int16_t, FN)   \
  ORTLITE_DISPATCH_CASE(kInt32, int32_t, FN)   \
  ORTLITE_DISPATCH_CASE(kInt64, int64_t, FN)   \
  ORTLITE_DISPATCH_CASE(kUInt8, uint8_t, FN)   \
  ORTLITE_DISPATCH_CASE(kUInt16, uint16_t, FN) \
  ORTLITE_DISPATCH_CASE(kUInt32, uint32_t, FN) \
  ORTLITE_DISPATCH_CASE(kUInt64, uint64_t, FN)

#define ORTLITE_DISPATCH_NUMERIC(DTYPE, WHAT, FN) \
  ORTLITE_DISPATCH_SWITCH(DTYPE, WHAT,            \
                          ORTLITE_ARITHMETIC_CASES(FN) ORTLITE_DISPATCH_CASE(kBool, bool, FN))

// ORTLITE_DISPATCH_NUMERIC without bool: the types arithmetic kernels take.
#define ORTLITE_DISPATCH_ARITHMETIC(DTYPE, WHAT, FN) \
  ORTLITE_DISPATCH_SWITCH(DTYPE, WHAT, ORTLITE_ARITHMETIC_CASES(FN))

// Same for float, double, float16 and bfloat16 only.
#define ORTLITE_DISPATCH_FLOAT(DTYPE, WHAT, FN) \
  ORTLITE_DISPATCH_SWITCH(DTYPE, WHAT, ORTLITE_FLOAT_CASES(FN))
