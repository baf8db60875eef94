// Cast (opset 6, 9, 13, 19, 21, 23, 24, 25) and CastLike (opset 15, 19, 21, 23, 24, 25).
//
// Every pair among float, double, float16, bfloat16, int8..int64, uint8..uint64, bool,
// string and the narrow types (float8*, float4e2m1, int4, uint4, int2, uint2: dtype.h)
// converts; the conversion rules are in cast_convert.h. Complex types are reported as
// NotImplemented at load (Cast) or at run (CastLike). `saturate` (opset 19+) applies to the
// float8 targets, `round_mode` (opset 24+) to float8e8m0; both are accepted for any target.
// A narrow type used below the opset that introduced it is an InvalidGraph error.
#include <algorithm>
#include <string>
#include <type_traits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "compute/cpu_avx512.h"
#include "providers/cpu/tensor/cast_convert.h"
#include "providers/cpu/tensor/creation_kernels.h"
#include "providers/cpu/tensor/tensor_kernels.h"

namespace ortlite {
namespace cast_detail {

#if defined(__x86_64__) && defined(__GNUC__)
namespace {

// float <-> float16 with the F16C instructions (round to nearest even, like
// Float16::from_float), used when the CPU has them.
__attribute__((target("avx,f16c"))) void float_to_half_f16c(const float* s, Float16* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), h);
  }
  for (; i < n; ++i) d[i] = Float16(s[i]);
}

__attribute__((target("avx,f16c"))) void half_to_float_f16c(const Float16* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) d[i] = static_cast<float>(s[i]);
}

#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
#pragma GCC diagnostic push
// GCC 12's AVX-512 headers start some intrinsics from an undefined vector.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// float16 -> float with 16 values an instruction (AVX-512F), four vectors a step, the tail
// masked: through the 8-wide F16C loop above a 1-4 MB float output came out at 0.74-0.97 of
// onnxruntime's speed (Cast float16 -> float of 8x128x768 0.77; 1.2-1.6x faster this way).
// The other direction measured the same both ways and keeps the F16C loop.
ORTLITE_AVX512 void half_to_float_512(const Float16* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 64 <= n; i += 64)
    for (int j = 0; j < 4; ++j)
      _mm512_storeu_ps(
          d + i + 16 * j,
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 16 * j))));
  for (; i < n; i += 16) {
    const __mmask16 m =
        n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(d + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, s + i)));
  }
}
#pragma GCC diagnostic pop
#endif

bool cpu_has_f16c() {
  // CPUID leaf 1: ECX bit 27 OSXSAVE, 28 AVX, 29 F16C; XCR0 bits 1-2: the OS saves the
  // XMM and YMM state. (clang 14 does not know "f16c" in __builtin_cpu_supports.)
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
    const unsigned need = (1u << 27) | (1u << 28) | (1u << 29);
    if ((ecx & need) != need) return false;
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 6u) == 6u;
  }();
  return has;
}

}  // namespace

void float_to_half(const float* src, Float16* dst, int64_t n) {
  if (cpu_has_f16c()) return float_to_half_f16c(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = Float16(src[i]);
}

void half_to_float(const Float16* src, float* dst, int64_t n) {
#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
  if (cpu_has_avx512()) return half_to_float_512(src, dst, n);
#endif
  if (cpu_has_f16c()) return half_to_float_f16c(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}
#else
void float_to_half(const float* src, Float16* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Float16(src[i]);
}

void half_to_float(const Float16* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}
#endif

}  // namespace cast_detail

namespace creation {
namespace {

using cast_detail::convert;
using cast_detail::NarrowTarget;
using cast_detail::to_narrow;

bool castable(DataType t) {
  if (dtype_is_narrow(t)) return true;
  switch (t) {
    case DataType::kFloat:
    case DataType::kDouble:
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
    case DataType::kUInt8:
    case DataType::kUInt16:
    case DataType::kUInt32:
    case DataType::kUInt64:
    case DataType::kBool:
    case DataType::kString:
      return true;
    default:
      return false;
  }
}

// Checks a `to` value (or CastLike's target type): NotImplemented for ONNX types ortlite
// cannot hold, InvalidGraph for numbers that are no ONNX type.
template <typename Reporter>
DataType check_target(const Reporter& where, int64_t to, const char* what) {
  if (to > 0 && to <= kMaxDataType && castable(static_cast<DataType>(to)))
    return static_cast<DataType>(to);
  const char* name = onnx_type_name(to);
  if (*name) {
    where.fail(StatusCode::kNotImplemented,
               std::string(what) + " element type " + name + " is not supported");
  }
  where.fail(StatusCode::kInvalidGraph,
             std::string(what) + " " + std::to_string(to) + " is not an ONNX element type");
}

// The Cast / CastLike opset that introduced a narrow type (0 for the other types).
int64_t narrow_since(DataType t) {
  switch (t) {
    case DataType::kFloat8E4M3FN:
    case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ:
      return 19;
    case DataType::kInt4:
    case DataType::kUInt4:
      return 21;
    case DataType::kFloat4E2M1:
      return 23;
    case DataType::kFloat8E8M0:
      return 24;
    case DataType::kInt2:
    case DataType::kUInt2:
      return 25;
    default:
      return 0;
  }
}

template <typename Reporter>
void check_type_at_opset(const Reporter& where, DataType t, int64_t opset, const char* what) {
  const int64_t since = narrow_since(t);
  if (opset < since)
    where.fail(StatusCode::kInvalidGraph, std::string(what) + " element type " + dtype_name(t) +
                                              " needs opset " + std::to_string(since) +
                                              " or newer (the model uses opset " +
                                              std::to_string(opset) + ")");
}

std::string quoted_prefix(const std::string& s) {
  std::string q = s.size() > 40 ? s.substr(0, 40) + "..." : s;
  return "'" + q + "'";
}

// The vector part of a float / double -> integer or bool conversion, with the results of
// convert() (x86 cvtt: truncation; NaN and out-of-range give the int32 / int64 minimum,
// which the narrower integer targets then wrap; x != 0 for bool). Converts a multiple of
// the vector width from the start and returns how many; the caller converts the rest with
// convert(), so every length also runs the portable loop on its tail.
#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
template <typename To, typename From>
ORTLITE_AVX512 int64_t cast_avx512(const From* s, To* d, int64_t n) {
  // (The maskz forms with a full mask: the plain ones start from an "undefined" register,
  // which gcc 12 reports as maybe-uninitialized.)
  int64_t i = 0;
  constexpr bool kToSmallInt = std::is_same_v<To, int32_t> || std::is_same_v<To, int16_t> ||
                               std::is_same_v<To, uint16_t> || std::is_same_v<To, int8_t> ||
                               std::is_same_v<To, uint8_t>;
  if constexpr (std::is_same_v<From, float> && kToSmallInt) {
    for (; i + 16 <= n; i += 16) {
      const __m512i v = _mm512_maskz_cvttps_epi32(0xFFFF, _mm512_loadu_ps(s + i));
      if constexpr (sizeof(To) == 4) {
        _mm512_storeu_si512(d + i, v);
      } else if constexpr (sizeof(To) == 2) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i),
                            _mm512_maskz_cvtepi32_epi16(0xFFFF, v));
      } else {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm512_maskz_cvtepi32_epi8(0xFFFF, v));
      }
    }
  } else if constexpr (std::is_same_v<From, double> && std::is_same_v<To, int32_t>) {
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i),
                          _mm512_maskz_cvttpd_epi32(0xFF, _mm512_loadu_pd(s + i)));
    }
  } else if constexpr (std::is_same_v<From, double> && sizeof(To) < 4 &&
                       !std::is_same_v<To, bool>) {
    // 8 at a time: truncated to int32, wrapped to the narrow type.
    for (; i + 8 <= n; i += 8) {
      const __m256i v = _mm512_maskz_cvttpd_epi32(0xFF, _mm512_loadu_pd(s + i));
      if constexpr (sizeof(To) == 2) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_maskz_cvtepi32_epi16(0xFF, v));
      } else {
        _mm_storel_epi64(reinterpret_cast<__m128i*>(d + i), _mm256_maskz_cvtepi32_epi8(0xFF, v));
      }
    }
  } else if constexpr (std::is_same_v<From, float> && std::is_same_v<To, int64_t>) {
    for (; i + 8 <= n; i += 8)
      _mm512_storeu_si512(d + i, _mm512_cvttps_epi64(_mm256_loadu_ps(s + i)));
  } else if constexpr (std::is_same_v<From, double> && std::is_same_v<To, int64_t>) {
    for (; i + 8 <= n; i += 8)
      _mm512_storeu_si512(d + i, _mm512_cvttpd_epi64(_mm512_loadu_pd(s + i)));
  } else if constexpr (std::is_same_v<From, int64_t> && std::is_same_v<To, float>) {
    // Rounded to nearest (the MXCSR default), as static_cast rounds; the plain loop was
    // one scalar conversion per element (1x64x56x56: 119 us, onnxruntime 69).
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(d + i, _mm512_cvtepi64_ps(_mm512_loadu_si512(s + i)));
  } else if constexpr (std::is_same_v<From, int64_t> && std::is_same_v<To, double>) {
    for (; i + 8 <= n; i += 8)
      _mm512_storeu_pd(d + i, _mm512_cvtepi64_pd(_mm512_loadu_si512(s + i)));
  } else if constexpr (std::is_same_v<To, bool>) {
    // 16 results per step, from a 16-bit mask of the nonzero elements.
    for (; i + 16 <= n; i += 16) {
      __mmask16 k;
      if constexpr (std::is_same_v<From, float>) {
        k = _mm512_cmp_ps_mask(_mm512_loadu_ps(s + i), _mm512_setzero_ps(), _CMP_NEQ_UQ);
      } else if constexpr (std::is_same_v<From, double>) {
        const unsigned lo =
            _mm512_cmp_pd_mask(_mm512_loadu_pd(s + i), _mm512_setzero_pd(), _CMP_NEQ_UQ);
        const unsigned hi =
            _mm512_cmp_pd_mask(_mm512_loadu_pd(s + i + 8), _mm512_setzero_pd(), _CMP_NEQ_UQ);
        k = static_cast<__mmask16>(lo | (hi << 8));
      } else if constexpr (std::is_integral_v<From> && sizeof(From) == 4) {
        const __m512i v = _mm512_loadu_si512(s + i);
        k = _mm512_test_epi32_mask(v, v);
      } else {
        static_assert(std::is_integral_v<From> && sizeof(From) == 8, "see kSimdCast");
        const __m512i a = _mm512_loadu_si512(s + i);
        const __m512i b = _mm512_loadu_si512(s + i + 8);
        const unsigned lo = _mm512_test_epi64_mask(a, a);
        const unsigned hi = _mm512_test_epi64_mask(b, b);
        k = static_cast<__mmask16>(lo | (hi << 8));
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm_maskz_set1_epi8(k, 1));
    }
  }
  return i;
}
#endif

// The pairs cast_avx512 converts: float / double -> integers (not the unsigned 32 / 64-bit
// ones) and bool, 32- and 64-bit
// integers -> bool, int64 -> float / double. (The other pairs vectorize well enough from the
// plain loop.)
template <typename To, typename From>
constexpr bool kSimdCast =
    ((std::is_same_v<From, float> &&
      (std::is_same_v<To, int64_t> || std::is_same_v<To, int32_t> || std::is_same_v<To, int16_t> ||
       std::is_same_v<To, uint16_t> || std::is_same_v<To, int8_t> || std::is_same_v<To, uint8_t> ||
       std::is_same_v<To, bool>)) ||
     (std::is_same_v<From, double> &&
      (std::is_same_v<To, int64_t> || std::is_same_v<To, int32_t> || std::is_same_v<To, int16_t> ||
       std::is_same_v<To, uint16_t> || std::is_same_v<To, int8_t> || std::is_same_v<To, uint8_t> ||
       std::is_same_v<To, bool>)) ||
     (std::is_integral_v<From> && (sizeof(From) == 4 || sizeof(From) == 8) &&
      std::is_same_v<To, bool>) ||
     (std::is_same_v<From, int64_t> && (std::is_same_v<To, float> || std::is_same_v<To, double>)));

// The vector part of a conversion, with the results of convert() (x86 cvtt: truncation;
// NaN and out-of-range give the int32 / int64 minimum, which the narrower integer targets
// then wrap; x != 0 for bool). Converts a multiple of the vector width from the start and
// returns how many; the caller converts the rest with convert(), so the portable loop
// also runs on every tail.
template <typename To, typename From>
int64_t cast_simd(const From* s, To* d, int64_t n) {
#if defined(ORTLITE_HAVE_AVX512_DISPATCH)
  if constexpr (kSimdCast<To, From>) {
    if (cpu_has_avx512()) return cast_avx512<To, From>(s, d, n);
  }
#endif
  (void)s;
  (void)d;
  (void)n;
  return 0;
}

// float16 -> To through a float block: the targets whose conversion of a float16 is that of
// its float value (uint32 is not: float16 -> uint32 truncates through int64).
template <typename To>
constexpr bool kHalfViaFloat =
    std::is_same_v<To, double> || std::is_same_v<To, bool> || std::is_same_v<To, int8_t> ||
    std::is_same_v<To, int16_t> || std::is_same_v<To, int32_t> || std::is_same_v<To, int64_t> ||
    std::is_same_v<To, uint8_t> || std::is_same_v<To, uint16_t>;
// From -> float16 through a float block (convert() rounds to float, then to float16).
template <typename From>
constexpr bool kToHalfViaFloat = std::is_same_v<From, double> || std::is_same_v<From, int8_t> ||
                                 std::is_same_v<From, int16_t> || std::is_same_v<From, int32_t> ||
                                 std::is_same_v<From, int64_t> || std::is_same_v<From, uint8_t> ||
                                 std::is_same_v<From, uint16_t> || std::is_same_v<From, uint32_t>;

// Numeric -> numeric.
template <typename To, typename From>
void cast_numeric(const From* src, To* dst, int64_t n, ThreadPool* pool) {
  if constexpr (std::is_same_v<From, float> && std::is_same_v<To, Float16>) {
    parallel_for(pool, n, 1.0, [&](int64_t b, int64_t e) {
      cast_detail::float_to_half(src + b, dst + b, e - b);
    });
  } else if constexpr (std::is_same_v<From, Float16> && std::is_same_v<To, float>) {
    parallel_for(pool, n, 1.0, [&](int64_t b, int64_t e) {
      cast_detail::half_to_float(src + b, dst + b, e - b);
    });
  } else if constexpr (std::is_same_v<From, Float16> && kHalfViaFloat<To>) {
    // float16 -> float (F16C) a block at a time, then float -> To (the same results: every
    // float16 is exactly a float, and these targets convert a float16 as its float value).
    parallel_for(pool, n, 2.0, [&](int64_t b, int64_t e) {
      constexpr int64_t kBlock = 1024;
      float buf[kBlock];
      for (int64_t i = b; i < e; i += kBlock) {
        const int64_t m = std::min(kBlock, e - i);
        cast_detail::half_to_float(src + i, buf, m);
        To* __restrict d = dst + i;
        for (int64_t j = cast_simd<To, float>(buf, d, m); j < m; ++j)
          d[j] = convert<To, float>(buf[j]);
      }
    });
  } else if constexpr (std::is_same_v<To, Float16> && kToHalfViaFloat<From>) {
    // From -> float, then float -> float16 (F16C): convert() rounds these to float first too.
    parallel_for(pool, n, 2.0, [&](int64_t b, int64_t e) {
      constexpr int64_t kBlock = 1024;
      float buf[kBlock];
      for (int64_t i = b; i < e; i += kBlock) {
        const int64_t m = std::min(kBlock, e - i);
        const From* __restrict s = src + i;
        for (int64_t j = cast_simd<float, From>(s, buf, m); j < m; ++j)
          buf[j] = convert<float, From>(s[j]);
        cast_detail::float_to_half(buf, dst + i, m);
      }
    });
  } else if constexpr (std::is_same_v<From, bool> && !std::is_same_v<To, bool>) {
    // bool bytes (0 or 1) read as uint8_t, which vectorizes; bool loads did not.
    cast_numeric<To, uint8_t>(reinterpret_cast<const uint8_t*>(src), dst, n, pool);
  } else {
    parallel_for(pool, n, 2.0, [src, dst](int64_t b, int64_t e) {
      // Local restrict pointers, so that byte-sized elements vectorize (see run_unary).
      const From* __restrict s = src + b;
      To* __restrict d = dst + b;
      for (int64_t i = cast_simd<To, From>(s, d, e - b); i < e - b; ++i)
        d[i] = convert<To, From>(s[i]);
    });
  }
}

// The inner dispatch on the target type (a macro cannot nest in itself).
template <typename From>
void cast_from(const From* src, Tensor& y, int64_t n, ThreadPool* pool) {
  ORTLITE_DISPATCH_NUMERIC(y.dtype(), "Cast", [&](auto to_tag) {
    using To = decltype(to_tag);
    (cast_numeric<To, From>)(src, y.data<To>(), n, pool);
  });
}

// Narrow source: each element through its exact value V (float or int8_t), looked up in
// `values`, into y (numeric, string or narrow).
template <typename V>
void cast_from_narrow(const uint8_t* src, const V* values, Tensor& y, const NarrowTarget& target,
                      int64_t n, ThreadPool* pool) {
  const DataType to = y.dtype();
  if (dtype_is_narrow(to)) {
    uint8_t* dst = y.data<uint8_t>();
    parallel_for(pool, n, 4.0, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) dst[i] = to_narrow<V>(values[src[i]], target);
    });
  } else if (to == DataType::kString) {
    std::string* dst = y.data<std::string>();
    parallel_for(pool, n, 50.0, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) cast_detail::to_string_value<V>(values[src[i]], dst[i]);
    });
  } else {
    ORTLITE_DISPATCH_NUMERIC(to, "Cast", [&](auto tag) {
      using To = decltype(tag);
      To* dst = y.data<To>();
      parallel_for(pool, n, 2.0, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) dst[i] = convert<To, V>(values[src[i]]);
      });
    });
  }
}

// Casts where the source or the target is a narrow type.
void cast_narrow(const KernelContext& ctx, const Tensor& x, Tensor& y, const NarrowTarget& target) {
  const DataType from = x.dtype();
  const int64_t n = x.numel();
  ThreadPool* pool = ctx.thread_pool();
  if (const float* fv = narrow_float_values(from))
    return cast_from_narrow<float>(x.data<uint8_t>(), fv, y, target, n, pool);
  if (const int8_t* iv = narrow_int_values(from))
    return cast_from_narrow<int8_t>(x.data<uint8_t>(), iv, y, target, n, pool);
  // A numeric or string source into a narrow target.
  uint8_t* dst = y.data<uint8_t>();
  if (from == DataType::kString) {
    const std::string* src = x.data<std::string>();
    const bool to_int = dtype_is_narrow_int(target.type);
    parallel_for(pool, n, 50.0, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        bool ok;
        if (to_int) {
          int64_t v = 0;
          ok = cast_detail::parse_int64(src[i], v);
          dst[i] = narrow_int_from_bits(target.type, static_cast<uint64_t>(v));
        } else {
          double v = 0;
          ok = cast_detail::parse_double(src[i], v);
          dst[i] = target.from_double(v);
        }
        if (!ok)
          ctx.fail(StatusCode::kInvalidArgument,
                   "input element " + std::to_string(i) + " " + quoted_prefix(src[i]) +
                       " cannot be converted to " + dtype_name(target.type));
      }
    });
    return;
  }
  ORTLITE_DISPATCH_NUMERIC(from, "Cast", [&](auto tag) {
    using From = decltype(tag);
    const From* src = x.data<From>();
    if constexpr (std::is_same_v<From, float>) {
      if (dtype_is_narrow_float(target.type) && target.type != DataType::kFloat8E8M0) {
        parallel_for(pool, n, 4.0, [&](int64_t b, int64_t e) {
          narrow_float_from_floats(target.type, src + b, dst + b, e - b, target.saturate);
        });
        return;
      }
    }
    parallel_for(pool, n, 4.0, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) dst[i] = to_narrow<From>(src[i], target);
    });
  });
}

void cast_tensor(const KernelContext& ctx, const Tensor& x, Tensor& y, const NarrowTarget& target) {
  const DataType from = x.dtype();
  const DataType to = y.dtype();
  const int64_t n = x.numel();
  ThreadPool* pool = ctx.thread_pool();
  if (n == 0) return;
  if (from == to) {
    tensor_ops::parallel_copy(from, x.raw_data(), y.raw_data(), n, pool);
    return;
  }
  if (dtype_is_narrow(from) || dtype_is_narrow(to)) return cast_narrow(ctx, x, y, target);
  if (from == DataType::kString) {
    const std::string* src = x.data<std::string>();
    ORTLITE_DISPATCH_NUMERIC(to, "Cast", [&](auto tag) {
      using To = decltype(tag);
      To* dst = y.data<To>();
      parallel_for(pool, n, 50.0, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          if (!cast_detail::from_string_value<To>(src[i], dst[i])) {
            ctx.fail(StatusCode::kInvalidArgument, "input element " + std::to_string(i) + " " +
                                                       quoted_prefix(src[i]) +
                                                       " cannot be converted to " + dtype_name(to));
          }
        }
      });
    });
    return;
  }
  if (to == DataType::kString) {
    std::string* dst = y.data<std::string>();
    ORTLITE_DISPATCH_NUMERIC(from, "Cast", [&](auto tag) {
      using From = decltype(tag);
      const From* src = x.data<From>();
      parallel_for(pool, n, 50.0, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) cast_detail::to_string_value<From>(src[i], dst[i]);
      });
    });
    return;
  }
  ORTLITE_DISPATCH_NUMERIC(from, "Cast", [&](auto from_tag) {
    using From = decltype(from_tag);
    cast_from<From>(x.data<From>(), y, n, pool);
  });
}

class CastKernel : public Kernel {
 public:
  CastKernel(const KernelInfo& info, bool like) : like_(like), opset_(info.opset()) {
    if (!like_) {
      to_ = check_target(info, info.attr_int_required("to"), "attribute 'to':");
      check_type_at_opset(info, to_, opset_, "attribute 'to':");
    }
    if (opset_ >= 19) {
      const int64_t saturate = info.attr_int("saturate", 1);
      if (saturate != 0 && saturate != 1)
        info.fail(StatusCode::kInvalidGraph,
                  "attribute 'saturate' must be 0 or 1, got " + std::to_string(saturate));
      saturate_ = saturate == 1;
    }
    if (opset_ >= 24) {
      const std::string mode = info.attr_string("round_mode", "up");
      if (mode == "up") {
        round_ = E8M0Rounding::kUp;
      } else if (mode == "down") {
        round_ = E8M0Rounding::kDown;
      } else if (mode == "nearest") {
        round_ = E8M0Rounding::kNearest;
      } else {
        info.fail(StatusCode::kInvalidGraph,
                  "attribute 'round_mode' must be 'up', 'down' or 'nearest', got '" + mode + "'");
      }
    }
    const size_t want = like_ ? 2 : 1;
    if (info.num_inputs() != want || !info.has_input(0) || (like_ && !info.has_input(1)))
      info.fail(StatusCode::kInvalidGraph, "expects " + std::to_string(want) + " input(s), got " +
                                               std::to_string(info.num_inputs()));
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    DataType to = to_;
    if (like_) {
      const Tensor& target = ctx.required_input(1);
      to = check_target(ctx, static_cast<int64_t>(target.dtype()), "target_type:");
      check_type_at_opset(ctx, to, opset_, "target_type:");
    }
    if (!castable(x.dtype()))
      ctx.fail(StatusCode::kNotImplemented,
               std::string("input element type ") + dtype_name(x.dtype()) + " is not supported");
    check_type_at_opset(ctx, x.dtype(), opset_, "input");
    Tensor& y = ctx.allocate_output(0, to, x.shape());
    cast_tensor(ctx, x, y, NarrowTarget{to, saturate_, round_});
  }

 private:
  bool like_;
  int64_t opset_;
  DataType to_ = DataType::kUndefined;
  bool saturate_ = true;
  E8M0Rounding round_ = E8M0Rounding::kUp;
};

}  // namespace

void register_cast_kernels(KernelRegistry& r) {
  r.add_versions("Cast", {6, 9, 13, 19, 21, 23, 24, 25},
                 [](const KernelInfo& info) -> std::unique_ptr<Kernel> {
                   return std::make_unique<CastKernel>(info, false);
                 });
  r.add_versions("CastLike", {15, 19, 21, 23, 24, 25},
                 [](const KernelInfo& info) -> std::unique_ptr<Kernel> {
                   return std::make_unique<CastKernel>(info, true);
                 });
}

}  // namespace creation
}  // namespace ortlite
