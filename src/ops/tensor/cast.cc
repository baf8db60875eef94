// Cast (opset 6, 9, 13, 19, 21, 23) and CastLike (opset 15, 19, 21, 23).
//
// Every pair among float, double, float16, bfloat16, int8..int64, uint8..uint64, bool and
// string converts; the conversion rules are in cast_convert.h. float8 / int4 / float4 /
// complex targets are reported as NotImplemented at load (Cast) or at run (CastLike).
// `saturate` (opset 19+) only affects float8 targets, which are not supported, so it is
// validated and otherwise ignored.
#include <algorithm>
#include <string>
#include <type_traits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "ops/tensor/cast_convert.h"
#include "ops/tensor/creation_kernels.h"
#include "ops/tensor/tensor_kernels.h"

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

bool castable(DataType t) {
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
  if (to > 0 && to <= 16 && castable(static_cast<DataType>(to))) return static_cast<DataType>(to);
  const char* name = onnx_type_name(to);
  if (*name) {
    where.fail(StatusCode::kNotImplemented,
               std::string(what) + " element type " + name + " is not supported");
  }
  where.fail(StatusCode::kInvalidGraph,
             std::string(what) + " " + std::to_string(to) + " is not an ONNX element type");
}

std::string quoted_prefix(const std::string& s) {
  std::string q = s.size() > 40 ? s.substr(0, 40) + "..." : s;
  return "'" + q + "'";
}

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
  } else {
    parallel_for(pool, n, 2.0, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) dst[i] = convert<To, From>(src[i]);
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

void cast_tensor(const KernelContext& ctx, const Tensor& x, Tensor& y) {
  const DataType from = x.dtype();
  const DataType to = y.dtype();
  const int64_t n = x.numel();
  ThreadPool* pool = ctx.thread_pool();
  if (n == 0) return;
  if (from == to) {
    tensor_ops::parallel_copy(from, x.raw_data(), y.raw_data(), n, pool);
    return;
  }
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
  CastKernel(const KernelInfo& info, bool like) : like_(like) {
    if (!like_) to_ = check_target(info, info.attr_int_required("to"), "attribute 'to':");
    if (info.opset() >= 19) {
      const int64_t saturate = info.attr_int("saturate", 1);
      if (saturate != 0 && saturate != 1)
        info.fail(StatusCode::kInvalidGraph,
                  "attribute 'saturate' must be 0 or 1, got " + std::to_string(saturate));
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
    }
    if (!castable(x.dtype()))
      ctx.fail(StatusCode::kNotImplemented,
               std::string("input element type ") + dtype_name(x.dtype()) + " is not supported");
    Tensor& y = ctx.allocate_output(0, to, x.shape());
    cast_tensor(ctx, x, y);
  }

 private:
  bool like_;
  DataType to_ = DataType::kUndefined;
};

}  // namespace

void register_cast_kernels(KernelRegistry& r) {
  add_versions(r, "Cast", {6, 9, 13, 19, 21, 23},
               [](const KernelInfo& info) -> std::unique_ptr<Kernel> {
                 return std::make_unique<CastKernel>(info, false);
               });
  add_versions(r, "CastLike", {15, 19, 21, 23},
               [](const KernelInfo& info) -> std::unique_ptr<Kernel> {
                 return std::make_unique<CastKernel>(info, true);
               });
}

}  // namespace creation
}  // namespace ortlite
