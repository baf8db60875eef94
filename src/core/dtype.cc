#include "ortlite/dtype.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

namespace ortlite {

bool dtype_supported(DataType t) {
  switch (t) {
    case DataType::kFloat:
    case DataType::kUInt8:
    case DataType::kInt8:
    case DataType::kUInt16:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
    case DataType::kString:
    case DataType::kBool:
    case DataType::kFloat16:
    case DataType::kDouble:
    case DataType::kUInt32:
    case DataType::kUInt64:
    case DataType::kBFloat16:
      return true;
    default:
      return dtype_is_narrow(t);
  }
}

size_t dtype_size(DataType t) {
  switch (t) {
    case DataType::kBool:
    case DataType::kUInt8:
    case DataType::kInt8:
    case DataType::kFloat8E4M3FN:
    case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ:
    case DataType::kUInt4:
    case DataType::kInt4:
    case DataType::kFloat4E2M1:
    case DataType::kFloat8E8M0:
    case DataType::kUInt2:
    case DataType::kInt2:
      return 1;
    case DataType::kUInt16:
    case DataType::kInt16:
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kFloat:
    case DataType::kInt32:
    case DataType::kUInt32:
      return 4;
    case DataType::kDouble:
    case DataType::kInt64:
    case DataType::kUInt64:
    case DataType::kComplex64:
      return 8;
    case DataType::kComplex128:
      return 16;
    case DataType::kString:
      return sizeof(std::string);
    default:
      return 0;
  }
}

const char* dtype_name(DataType t) {
  switch (t) {
    case DataType::kFloat:
      return "float";
    case DataType::kUInt8:
      return "uint8";
    case DataType::kInt8:
      return "int8";
    case DataType::kUInt16:
      return "uint16";
    case DataType::kInt16:
      return "int16";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kString:
      return "string";
    case DataType::kBool:
      return "bool";
    case DataType::kFloat16:
      return "float16";
    case DataType::kDouble:
      return "double";
    case DataType::kUInt32:
      return "uint32";
    case DataType::kUInt64:
      return "uint64";
    case DataType::kComplex64:
      return "complex64";
    case DataType::kComplex128:
      return "complex128";
    case DataType::kBFloat16:
      return "bfloat16";
    case DataType::kFloat8E4M3FN:
      return "float8e4m3fn";
    case DataType::kFloat8E4M3FNUZ:
      return "float8e4m3fnuz";
    case DataType::kFloat8E5M2:
      return "float8e5m2";
    case DataType::kFloat8E5M2FNUZ:
      return "float8e5m2fnuz";
    case DataType::kUInt4:
      return "uint4";
    case DataType::kInt4:
      return "int4";
    case DataType::kFloat4E2M1:
      return "float4e2m1";
    case DataType::kFloat8E8M0:
      return "float8e8m0";
    case DataType::kUInt2:
      return "uint2";
    case DataType::kInt2:
      return "int2";
    default:
      return "undefined";
  }
}

DataType dtype_from_name(const std::string& name_in) {
  std::string name = name_in;
  if (name.rfind("tensor(", 0) == 0 && name.size() > 8 && name.back() == ')') {
    name = name.substr(7, name.size() - 8);
  }
  for (int i = 1; i <= kMaxDataType; ++i) {
    auto t = static_cast<DataType>(i);
    if (name == dtype_name(t)) return t;
  }
  return DataType::kUndefined;
}

bool dtype_is_float(DataType t) {
  return t == DataType::kFloat || t == DataType::kDouble || t == DataType::kFloat16 ||
         t == DataType::kBFloat16;
}

bool dtype_is_integer(DataType t) {
  switch (t) {
    case DataType::kUInt8:
    case DataType::kInt8:
    case DataType::kUInt16:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
    case DataType::kUInt32:
    case DataType::kUInt64:
      return true;
    default:
      return false;
  }
}

bool dtype_is_signed(DataType t) {
  return t == DataType::kInt8 || t == DataType::kInt16 || t == DataType::kInt32 ||
         t == DataType::kInt64 || dtype_is_float(t);
}

// Half conversion with round-to-nearest-even, denormals, inf and NaN.
uint16_t Float16::from_float(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
  }
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow → inf
  if (absx < 0x38800000u) {  // result is subnormal or zero
    if (absx < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t mant = (absx & 0x007fffffu) | 0x00800000u;
    const int shift = 126 - static_cast<int>(absx >> 23);  // 14..24
    const uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    uint32_t r = half + ((rem > mid || (rem == mid && (half & 1u))) ? 1u : 0u);
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t h = ((absx >> 13) - (112u << 10));
  const uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float Float16::to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | ((112u - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t BFloat16::from_float(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

// ---- Narrow types ---------------------------------------------------------------------

bool dtype_is_narrow(DataType t) {
  return dtype_is_narrow_float(t) || dtype_is_narrow_int(t);
}

bool dtype_is_narrow_float(DataType t) {
  switch (t) {
    case DataType::kFloat8E4M3FN:
    case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ:
    case DataType::kFloat8E8M0:
    case DataType::kFloat4E2M1:
      return true;
    default:
      return false;
  }
}

bool dtype_is_narrow_int(DataType t) {
  return t == DataType::kInt4 || t == DataType::kUInt4 || t == DataType::kInt2 ||
         t == DataType::kUInt2;
}

int dtype_packed_bits(DataType t) {
  switch (t) {
    case DataType::kInt4:
    case DataType::kUInt4:
    case DataType::kFloat4E2M1:
      return 4;
    case DataType::kInt2:
    case DataType::kUInt2:
      return 2;
    default:
      return 0;
  }
}

size_t dtype_packed_bytes(DataType t, int64_t n) {
  const int bits = dtype_packed_bits(t);
  const auto count = static_cast<size_t>(std::max<int64_t>(n, 0));
  if (bits == 0) return count * dtype_size(t);
  const size_t per_byte = static_cast<size_t>(8 / bits);
  return count / per_byte + (count % per_byte != 0 ? 1 : 0);
}

void unpack_narrow(DataType t, const uint8_t* src, uint8_t* dst, int64_t n) {
  const int bits = dtype_packed_bits(t);
  if (bits == 0) {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n));
    return;
  }
  const int per_byte = 8 / bits;
  const unsigned mask = (1u << bits) - 1u;
  for (int64_t i = 0; i < n; ++i) {
    const int shift = static_cast<int>(i % per_byte) * bits;
    dst[i] = static_cast<uint8_t>((src[i / per_byte] >> shift) & mask);
  }
}

namespace {

// How a narrow float type encodes NaN, infinity and overflow.
enum class NarrowKind {
  kFN,    // float8e4m3fn: S.1111.111 is NaN, no infinity
  kIEEE,  // float8e5m2: IEEE-style infinities and NaNs
  kFNUZ,  // float8e4m3fnuz, float8e5m2fnuz: 0x80 is the only NaN, no -0, no infinity
  kE2M1,  // float4e2m1: no NaN, no infinity
};

struct NarrowFormat {
  NarrowKind kind;
  int mbits;         // mantissa bits
  int bias;          // exponent bias
  uint32_t max_mag;  // bit pattern (without sign) of the largest finite value
  uint32_t sign;     // the sign bit
};

bool narrow_format(DataType t, NarrowFormat* f) {
  switch (t) {
    case DataType::kFloat8E4M3FN:
      *f = {NarrowKind::kFN, 3, 7, 0x7e, 0x80};
      return true;
    case DataType::kFloat8E4M3FNUZ:
      *f = {NarrowKind::kFNUZ, 3, 8, 0x7f, 0x80};
      return true;
    case DataType::kFloat8E5M2:
      *f = {NarrowKind::kIEEE, 2, 15, 0x7b, 0x80};
      return true;
    case DataType::kFloat8E5M2FNUZ:
      *f = {NarrowKind::kFNUZ, 2, 16, 0x7f, 0x80};
      return true;
    case DataType::kFloat4E2M1:
      *f = {NarrowKind::kE2M1, 1, 1, 0x7, 0x8};
      return true;
    default:
      return false;
  }
}

float decode_narrow_float(const NarrowFormat& f, uint32_t code) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const bool neg = (code & f.sign) != 0;
  const uint32_t mag = code & (f.sign - 1);
  switch (f.kind) {
    case NarrowKind::kFNUZ:
      if (code == f.sign) return nan;
      break;
    case NarrowKind::kFN:
      if (mag == 0x7f) return neg ? -nan : nan;
      break;
    case NarrowKind::kIEEE:
      if (mag > f.max_mag) {
        const float special = mag == f.max_mag + 1 ? std::numeric_limits<float>::infinity() : nan;
        return neg ? -special : special;
      }
      break;
    case NarrowKind::kE2M1:
      break;
  }
  const uint32_t exp = mag >> f.mbits;
  const uint32_t mant = mag & ((1u << f.mbits) - 1u);
  const float v = exp == 0 ? std::ldexp(static_cast<float>(mant), 1 - f.bias - f.mbits)
                           : std::ldexp(static_cast<float>((1u << f.mbits) | mant),
                                        static_cast<int>(exp) - f.bias - f.mbits);
  return neg ? -v : v;
}

using FloatTable = std::array<float, 256>;

FloatTable make_float_table(DataType t) {
  FloatTable table{};
  NarrowFormat f;
  if (narrow_format(t, &f)) {
    const uint32_t mask = (f.sign << 1) - 1u;  // the element's bits; the rest are ignored
    for (uint32_t b = 0; b < 256; ++b) table[b] = decode_narrow_float(f, b & mask);
  } else {  // float8e8m0: 2^(b - 127), 0xff is NaN
    for (uint32_t b = 0; b < 256; ++b)
      table[b] = b == 0xff ? std::numeric_limits<float>::quiet_NaN()
                           : std::ldexp(1.0f, static_cast<int>(b) - 127);
  }
  return table;
}

using IntTable = std::array<int8_t, 256>;

IntTable make_int_table(DataType t) {
  IntTable table{};
  const int bits = dtype_packed_bits(t);
  const bool is_signed = t == DataType::kInt4 || t == DataType::kInt2;
  for (uint32_t b = 0; b < 256; ++b) {
    const uint32_t v = b & ((1u << bits) - 1u);
    const bool negative = is_signed && (v >> (bits - 1)) != 0;
    table[b] =
        static_cast<int8_t>(negative ? static_cast<int>(v) - (1 << bits) : static_cast<int>(v));
  }
  return table;
}

// Rounds a non-negative finite value to the nearest integer, ties to even, exactly.
double round_half_even(double q) {
  const double fl = std::floor(q);
  const double diff = q - fl;
  if (diff > 0.5 || (diff == 0.5 && std::fmod(fl, 2.0) != 0.0)) return fl + 1.0;
  return fl;
}

}  // namespace

const float* narrow_float_values(DataType t) {
  static const FloatTable e4m3fn = make_float_table(DataType::kFloat8E4M3FN);
  static const FloatTable e4m3fnuz = make_float_table(DataType::kFloat8E4M3FNUZ);
  static const FloatTable e5m2 = make_float_table(DataType::kFloat8E5M2);
  static const FloatTable e5m2fnuz = make_float_table(DataType::kFloat8E5M2FNUZ);
  static const FloatTable e8m0 = make_float_table(DataType::kFloat8E8M0);
  static const FloatTable e2m1 = make_float_table(DataType::kFloat4E2M1);
  switch (t) {
    case DataType::kFloat8E4M3FN:
      return e4m3fn.data();
    case DataType::kFloat8E4M3FNUZ:
      return e4m3fnuz.data();
    case DataType::kFloat8E5M2:
      return e5m2.data();
    case DataType::kFloat8E5M2FNUZ:
      return e5m2fnuz.data();
    case DataType::kFloat8E8M0:
      return e8m0.data();
    case DataType::kFloat4E2M1:
      return e2m1.data();
    default:
      return nullptr;
  }
}

const int8_t* narrow_int_values(DataType t) {
  static const IntTable int4 = make_int_table(DataType::kInt4);
  static const IntTable uint4 = make_int_table(DataType::kUInt4);
  static const IntTable int2 = make_int_table(DataType::kInt2);
  static const IntTable uint2 = make_int_table(DataType::kUInt2);
  switch (t) {
    case DataType::kInt4:
      return int4.data();
    case DataType::kUInt4:
      return uint4.data();
    case DataType::kInt2:
      return int2.data();
    case DataType::kUInt2:
      return uint2.data();
    default:
      return nullptr;
  }
}

uint8_t narrow_float_from_double(DataType t, double v, bool saturate) {
  NarrowFormat f;
  if (!narrow_format(t, &f)) return 0;
  const uint32_t s = std::signbit(v) ? f.sign : 0u;
  if (f.kind == NarrowKind::kE2M1) saturate = true;
  auto overflow = [&]() -> uint8_t {
    if (saturate) return static_cast<uint8_t>(f.max_mag | s);
    switch (f.kind) {
      case NarrowKind::kFN:
        return static_cast<uint8_t>(0x7f | s);
      case NarrowKind::kIEEE:
        return static_cast<uint8_t>((f.max_mag + 1) | s);
      default:  // kFNUZ
        return static_cast<uint8_t>(f.sign);
    }
  };
  if (std::isnan(v)) {
    switch (f.kind) {
      case NarrowKind::kFN:
        return static_cast<uint8_t>(0x7f | s);
      case NarrowKind::kIEEE:
        return static_cast<uint8_t>(0x7e | s);
      case NarrowKind::kFNUZ:
        return static_cast<uint8_t>(f.sign);
      case NarrowKind::kE2M1:
        return static_cast<uint8_t>(f.max_mag);
    }
  }
  const double a = std::fabs(v);
  if (std::isinf(a)) return overflow();
  const uint8_t zero = static_cast<uint8_t>(f.kind == NarrowKind::kFNUZ ? 0u : s);
  if (a == 0.0) return zero;
  // a = m * 2^e with m in [0.5, 1): its exponent as a normal number is e - 1. Below the
  // smallest normal exponent the spacing stays that of the subnormals.
  int e = 0;
  std::frexp(a, &e);
  const int exponent = std::max(e - 1, 1 - f.bias);
  // a in units of the last mantissa bit at that exponent: exact (a power-of-two scaling),
  // below 2^(mbits + 1), so the rounding is exact too.
  const double units = round_half_even(std::ldexp(a, f.mbits - exponent));
  // The bit pattern of exponent field (exponent + bias - 1) plus the units: a carry out of
  // the mantissa moves to the next exponent as it should.
  const int64_t mag =
      (static_cast<int64_t>(exponent + f.bias - 1) << f.mbits) + static_cast<int64_t>(units);
  if (mag > static_cast<int64_t>(f.max_mag)) return overflow();
  if (mag == 0) return zero;
  return static_cast<uint8_t>(static_cast<uint32_t>(mag) | s);
}

namespace {

// narrow_float_from_float for one format: the rounding of narrow_float_from_double, on the
// float's bits.
inline uint8_t encode_float(const NarrowFormat& f, DataType t, float v, bool saturate) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  const uint32_t s = (bits >> 31) != 0 ? f.sign : 0u;
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) return narrow_float_from_double(t, static_cast<double>(v), saturate);
  if (f.kind == NarrowKind::kE2M1) saturate = true;
  // Keep mbits of the significand at the target exponent (more shifted out below the
  // normal range), round to nearest even, and let a carry move into the exponent field.
  const int exp = static_cast<int>(abs >> 23);  // 0: a float subnormal, far below any target
  uint32_t mag = 0;
  if (exp != 0) {
    const int target_exp = exp - 127 + f.bias;  // the exponent field if normal
    const uint32_t sig = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 23 - f.mbits + (target_exp >= 1 ? 0 : 1 - target_exp);
    if (shift <= 24) {
      const uint32_t kept = sig >> shift;
      const uint32_t rem = sig & ((1u << shift) - 1u);
      const uint32_t half = 1u << (shift - 1);
      // 1 when rem > half, or rem == half and kept is odd (branch free: the fractions of
      // random data round either way).
      mag = kept + ((rem + half - 1u + (kept & 1u)) >> shift);
      if (target_exp >= 1) mag += static_cast<uint32_t>(target_exp - 1) << f.mbits;
    }
  }
  if (mag > f.max_mag) {
    if (saturate) return static_cast<uint8_t>(f.max_mag | s);
    if (f.kind == NarrowKind::kFN) return static_cast<uint8_t>(0x7f | s);
    if (f.kind == NarrowKind::kIEEE) return static_cast<uint8_t>((f.max_mag + 1) | s);
    return static_cast<uint8_t>(f.sign);
  }
  if (mag == 0) return static_cast<uint8_t>(f.kind == NarrowKind::kFNUZ ? 0u : s);
  return static_cast<uint8_t>(mag | s);
}

}  // namespace

uint8_t narrow_float_from_float(DataType t, float v, bool saturate) {
  NarrowFormat f;
  return narrow_format(t, &f) ? encode_float(f, t, v, saturate) : 0;
}

void narrow_float_from_floats(DataType t, const float* src, uint8_t* dst, int64_t n,
                              bool saturate) {
  NarrowFormat f;
  if (!narrow_format(t, &f)) return;
  for (int64_t i = 0; i < n; ++i) dst[i] = encode_float(f, t, src[i], saturate);
}

uint8_t float8e8m0_from_float(float v, bool saturate, E8M0Rounding mode) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  uint32_t exponent = (bits >> 23) & 0xffu;
  if (exponent == 0xffu) return 0xff;  // NaN and infinities
  bool round_up = false;
  switch (mode) {
    case E8M0Rounding::kNearest: {
      // Guard, round and sticky bits below the exponent; a tie rounds up unless the
      // exponent field is 0.
      const bool g = (bits & 0x400000u) != 0;
      const bool r = (bits & 0x200000u) != 0;
      const bool sticky = (bits & 0x1fffffu) != 0;
      round_up = g && (r || sticky || exponent > 0);
      break;
    }
    case E8M0Rounding::kUp:
      round_up = (bits & 0x7fffffu) != 0;
      break;
    case E8M0Rounding::kDown:
      break;
  }
  if (round_up && !(saturate && exponent == 0xfeu)) ++exponent;
  return static_cast<uint8_t>(exponent);
}

uint8_t narrow_int_from_double(DataType t, double v) {
  if (!(std::fabs(v) < 2147483648.0)) return 0;  // NaN, infinities, out of the int32 range
  int64_t i = static_cast<int64_t>(v);           // toward zero, exact in this range
  const double frac = std::fabs(v - static_cast<double>(i));
  // Away from zero when frac > 0.5, or == 0.5 and i is odd; written without branches (the
  // fractions of real data go either way).
  const int64_t away = static_cast<int64_t>((frac > 0.5) | ((frac == 0.5) & ((i & 1) != 0)));
  i += v < 0 ? -away : away;
  if (i < INT32_MIN || i > INT32_MAX) return 0;
  return narrow_int_from_bits(t, static_cast<uint64_t>(i));
}

}  // namespace ortlite
