// Element conversions shared by Cast / CastLike (cast.cc) and the reductions
// (src/providers/cpu/reduce). The narrow types (float8, float4, int4, int2: dtype.h) convert as
// described at the end.
//
// The results follow onnxruntime on x86-64 wherever C++ leaves a conversion undefined:
//   * float -> int8/int16/int32/uint8/uint16: truncate to int32 ("cvttss2si": NaN and
//     out-of-range give INT32_MIN), then wrap to the narrower type.
//   * float -> int64: truncate, NaN / out of range -> INT64_MIN.
//   * float/double -> uint32, any float -> uint64: values >= 2^(N-1) are offset by 2^(N-1)
//     before the signed truncation and the top bit is flipped back; float16/bfloat16 ->
//     uint32 truncates through int64 and keeps the low 32 bits.
//   * anything -> bool: x != 0 (NaN -> true).
//   * numbers -> string: integers in decimal, floats with "%.8g", "NaN", "INF", "-INF".
//   * string -> number: std::stod / stoll / stoull semantics (leading blanks skipped, a valid
//     prefix is enough, no digits or ERANGE is an error); the result is then narrowed.
// Nothing here invokes undefined behaviour on any input value.
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "ortlite/dtype.h"

namespace ortlite {
namespace cast_detail {

template <typename T>
constexpr bool is_half_v = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;
template <typename T>
constexpr bool is_floatish_v = std::is_floating_point_v<T> || is_half_v<T>;

// The value of a floating element as double (exact for every floating type).
template <typename T>
inline double wide(T v) {
  if constexpr (is_half_v<T>)
    return static_cast<double>(static_cast<float>(v));
  else
    return static_cast<double>(v);
}

// x86 cvtt semantics: truncation toward zero; NaN and out-of-range give the minimum.
inline int32_t trunc_i32(double f) {
  return (f > -2147483649.0 && f < 2147483648.0) ? static_cast<int32_t>(f) : INT32_MIN;
}
inline int64_t trunc_i64(double f) {
  return (f >= -9223372036854775808.0 && f < 9223372036854775808.0) ? static_cast<int64_t>(f)
                                                                    : INT64_MIN;
}

// Floating value -> integer or bool type To. kFromHalf: the source was float16/bfloat16.
template <typename To, bool kFromHalf = false>
inline To float_to_int(double f) {
  if constexpr (std::is_same_v<To, bool>) {
    return f != 0.0;
  } else if constexpr (std::is_same_v<To, int64_t>) {
    return trunc_i64(f);
  } else if constexpr (std::is_same_v<To, uint64_t>) {
    if (f >= 9223372036854775808.0)
      return static_cast<uint64_t>(trunc_i64(f - 9223372036854775808.0)) ^ (uint64_t{1} << 63);
    return static_cast<uint64_t>(trunc_i64(f));
  } else if constexpr (std::is_same_v<To, uint32_t>) {
    if constexpr (kFromHalf) {
      return static_cast<uint32_t>(static_cast<uint64_t>(trunc_i64(f)));
    } else {
      if (f >= 2147483648.0)
        return static_cast<uint32_t>(trunc_i32(f - 2147483648.0)) ^ 0x80000000u;
      return static_cast<uint32_t>(trunc_i32(f));
    }
  } else {
    static_assert(std::is_integral_v<To> && sizeof(To) <= 4, "unexpected target");
    // Wraps modulo 2^N (well defined for unsigned; gcc/clang define it for signed).
    return static_cast<To>(static_cast<uint32_t>(trunc_i32(f)));
  }
}

// Converts one element From -> To, both numeric (float, double, float16, bfloat16, ints,
// bool).
template <typename To, typename From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_floatish_v<From>) {
    if constexpr (is_half_v<To>) {
      return To(static_cast<float>(wide(v)));
    } else if constexpr (std::is_floating_point_v<To>) {
      return static_cast<To>(wide(v));
    } else {
      return float_to_int<To, is_half_v<From>>(wide(v));
    }
  } else {  // integer or bool source
    if constexpr (std::is_same_v<To, bool>) {
      return v != 0;
    } else if constexpr (is_half_v<To>) {
      return To(static_cast<float>(v));
    } else if constexpr (std::is_integral_v<To> && std::is_integral_v<From> &&
                         !std::is_same_v<From, bool>) {
      // Integer narrowing / sign change wraps modulo 2^N.
      return static_cast<To>(static_cast<std::make_unsigned_t<To>>(v));
    } else {
      return static_cast<To>(v);
    }
  }
}

// ---- numbers -> string ----------------------------------------------------------------

inline void format_double(double d, std::string& out) {
  if (std::isnan(d)) {
    out = "NaN";
  } else if (std::isinf(d)) {
    out = d < 0 ? "-INF" : "INF";
  } else {
    char buf[40];
    const int n = std::snprintf(buf, sizeof(buf), "%.8g", d);
    out.assign(buf, n > 0 ? static_cast<size_t>(n) : 0);
  }
}

template <typename From>
inline void to_string_value(From v, std::string& out) {
  if constexpr (is_floatish_v<From>) {
    format_double(wide(v), out);
  } else if constexpr (std::is_same_v<From, bool>) {
    out = v ? "1" : "0";
  } else if constexpr (std::is_signed_v<From>) {
    out = std::to_string(static_cast<long long>(v));
  } else {
    out = std::to_string(static_cast<unsigned long long>(v));
  }
}

// ---- string -> numbers ----------------------------------------------------------------
// Each returns false when the text holds no number or the number is out of range (the
// cases where std::stod / stoll / stoull throw).

inline bool parse_double(const std::string& s, double& out) {
  const char* p = s.c_str();
  char* end = nullptr;
  errno = 0;
  out = std::strtod(p, &end);
  return end != p && errno != ERANGE;
}

inline bool parse_int64(const std::string& s, int64_t& out) {
  const char* p = s.c_str();
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(p, &end, 10);
  out = static_cast<int64_t>(v);
  return end != p && errno != ERANGE;
}

inline bool parse_uint64(const std::string& s, uint64_t& out) {
  const char* p = s.c_str();
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(p, &end, 10);
  out = static_cast<uint64_t>(v);
  return end != p && errno != ERANGE;
}

// Parses `s` into To; false when the text is not a number of the kind To reads.
template <typename To>
inline bool from_string_value(const std::string& s, To& out) {
  if constexpr (is_floatish_v<To>) {
    double d;
    if (!parse_double(s, d)) return false;
    out = convert<To, double>(d);
    return true;
  } else if constexpr (std::is_same_v<To, bool> || std::is_unsigned_v<To>) {
    uint64_t u;
    if (!parse_uint64(s, u)) return false;
    if constexpr (std::is_same_v<To, bool>)
      out = u != 0;
    else
      out = static_cast<To>(u);
    return true;
  } else {
    int64_t i;
    if (!parse_int64(s, i)) return false;
    out = static_cast<To>(static_cast<std::make_unsigned_t<To>>(i));
    return true;
  }
}

// ---- narrow types (dtype.h) ------------------------------------------------------------
// A narrow element converts to other types through its exact value (a float for the float8
// and float4 types, an int8_t for int4 / uint4 / int2 / uint2), by the rules above. Into a
// narrow type: integers and bool keep their low bits for the integer targets; everything
// else goes through its value (as a float where that is exact, else as a double; as a
// float for float8e8m0) and dtype.h's rounding.

// A narrow target type with Cast's `saturate` and `round_mode`.
struct NarrowTarget {
  DataType type = DataType::kUndefined;
  bool saturate = true;
  E8M0Rounding round = E8M0Rounding::kUp;

  uint8_t from_double(double v) const {
    if (type == DataType::kFloat8E8M0)
      return float8e8m0_from_float(static_cast<float>(v), saturate, round);
    if (dtype_is_narrow_int(type)) return narrow_int_from_double(type, v);
    return narrow_float_from_double(type, v, saturate);
  }
  uint8_t from_float(float v) const {
    if (type == DataType::kFloat8E8M0) return float8e8m0_from_float(v, saturate, round);
    if (dtype_is_narrow_int(type)) return narrow_int_from_double(type, v);
    return narrow_float_from_float(type, v, saturate);
  }
  // An integer source: `bits` its two's complement, `value` the number.
  uint8_t from_integer(uint64_t bits, double value) const {
    return dtype_is_narrow_int(type) ? narrow_int_from_bits(type, bits) : from_double(value);
  }
};

// One numeric (float, double, float16, bfloat16, ints, bool) element into a narrow type.
template <typename From>
inline uint8_t to_narrow(From v, const NarrowTarget& to) {
  if constexpr (std::is_same_v<From, double>) {
    return to.from_double(v);
  } else if constexpr (is_floatish_v<From>) {  // float, float16, bfloat16: exact as float
    return to.from_float(static_cast<float>(v));
  } else if constexpr (std::is_same_v<From, bool>) {
    return to.from_integer(v ? 1u : 0u, v ? 1.0 : 0.0);
  } else {
    return to.from_integer(static_cast<uint64_t>(v), static_cast<double>(v));
  }
}

// Bulk float <-> float16 conversions (cast.cc), with F16C instructions when the CPU has
// them; same results as Float16's conversions.
void float_to_half(const float* src, Float16* dst, int64_t n);
void half_to_float(const Float16* src, float* dst, int64_t n);

}  // namespace cast_detail
}  // namespace ortlite
