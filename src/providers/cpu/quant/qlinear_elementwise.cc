// com.microsoft QLinearAdd (uint8, int8, uint16) and QLinearMul (uint8, int8) with numpy
// broadcasting, per-tensor scales and optional zero points; QLinearSigmoid and
// QLinearLeakyRelu (a 256-entry table).
//
// The arithmetic is onnxruntime's (MLAS), operation for operation, so the bytes match:
//   QLinearAdd: ra = a_scale / c_scale, rb = b_scale / c_scale (float); fixed = c_zp -
//     (ra * a_zp + rb * b_zp); c = rint(fma(a, ra, fma(b, rb, fixed))), saturated. Where one
//     input is a single value over an inner run (a scalar, or a [C,1,1] against NCHW), MLAS
//     folds that value into `fixed` (fixed + s * r, two roundings) and the run takes one fma;
//     with a the one held, its operands trade places (fixed = c_zp - (rb * b_zp + ra * a_zp)).
//     The run's kind follows onnxruntime's broadcaster: the innermost dims of the output
//     where the two inputs broadcast the same way.
//   QLinearMul: r = a_scale * b_scale / c_scale; c = rint(float((a - a_zp) * (b - b_zp)) * r
//     + c_zp) (a product, then a sum), saturated.
//   QLinearSigmoid / QLinearLeakyRelu: table[x] = quantize(f(x_scale * (x - x_zp))), with
//     MLAS's rational logistic (Eigen's coefficients) for the sigmoid; quantize divides by
//     y_scale in float and rounds half to even. Built at load when the parameters are
//     constants.
// The Add and Mul runs take AVX2 intrinsics (with FMA for Add: MLAS's own steps) when the
// CPU has them, checked at run time; elsewhere the same operations one element at a time
// (libm's fma is exactly rounded too), so the results do not depend on the CPU.
#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>
#include <vector>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#include "providers/shared/broadcast_shape.h"
#include "providers/cpu/quant/quant_common.h"

namespace ortlite {
namespace quant {
namespace {

// The output as rows of `run` elements; row r of a / b starts at a_off[r] / b_off[r] and
// steps a_step / b_step (0: the input holds one value over the row).
struct BinaryPlan {
  Shape out;
  int64_t run = 1, rows = 1, a_step = 1, b_step = 1;
  std::vector<int64_t> a_off, b_off;
};

BinaryPlan plan_binary(const KernelContext& ctx, const Shape& a, const Shape& b) {
  BinaryPlan p;
  try {
    p.out = broadcast_shapes(a, b, "QLinear binary op");
  } catch (const Error&) {
    ctx.fail(StatusCode::kInvalidArgument, "inputs 'A' " + shape_to_string(a) + " and 'B' " +
                                               shape_to_string(b) + " cannot be broadcast");
  }
  const std::vector<int64_t> sa = broadcast_strides(a, p.out), sb = broadcast_strides(b, p.out);
  // Dims of the output larger than 1, merged where both inputs stay contiguous.
  std::vector<int64_t> dims, as, bs;
  for (size_t d = 0; d < p.out.size(); ++d) {
    if (p.out[d] == 1) continue;
    if (!dims.empty() && as.back() == sa[d] * p.out[d] && bs.back() == sb[d] * p.out[d]) {
      dims.back() *= p.out[d];
      as.back() = sa[d];
      bs.back() = sb[d];
      continue;
    }
    dims.push_back(p.out[d]);
    as.push_back(sa[d]);
    bs.push_back(sb[d]);
  }
  if (dims.empty()) {  // one element: onnxruntime's "a is a scalar" case
    p.a_step = 0;
    p.a_off.assign(1, 0);
    p.b_off.assign(1, 0);
    return p;
  }
  p.run = dims.back();
  p.a_step = as.back();
  p.b_step = bs.back();
  dims.pop_back();
  as.pop_back();
  bs.pop_back();
  p.rows = 1;
  for (int64_t d : dims) p.rows *= d;
  p.a_off.resize(static_cast<size_t>(p.rows));
  p.b_off.resize(static_cast<size_t>(p.rows));
  std::vector<int64_t> idx(dims.size(), 0);
  int64_t oa = 0, ob = 0;
  for (int64_t r = 0; r < p.rows; ++r) {
    p.a_off[r] = oa;
    p.b_off[r] = ob;
    for (size_t d = dims.size(); d-- > 0;) {
      ++idx[d];
      oa += as[d];
      ob += bs[d];
      if (idx[d] < dims[d]) break;
      oa -= as[d] * idx[d];
      ob -= bs[d] * idx[d];
      idx[d] = 0;
    }
  }
  return p;
}

#if defined(__GNUC__) && defined(__x86_64__)
#define QOP_TARGET_FMA __attribute__((target("avx2,fma")))
// AVX2 without FMA: nothing can be contracted into a fused multiply-add.
#define QOP_TARGET_AVX2 __attribute__((target("avx2")))
bool cpu_has_avx2_fma() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
}
#else
#define QOP_TARGET_FMA
#define QOP_TARGET_AVX2
bool cpu_has_avx2_fma() {
  return false;
}
#endif

// cvtps2dq then the saturating packs: round half to even; at or above 2^31 (and NaN)
// cvtps2dq gives INT32_MIN, which saturates low. Written to vectorize: clamped first (the
// bounds are integers, so clamping and rounding commute), then rounded by adding and taking
// off 1.5 * 2^23.
template <typename T>
inline T pack_saturate(float v) {
  constexpr float lo = std::is_signed_v<T> ? -128.0f : 0.0f;
  constexpr float hi = std::is_signed_v<T> ? 127.0f : 255.0f;
  v = v < 2147483648.0f ? v : lo;
  v = v >= lo ? v : lo;
  v = v <= hi ? v : hi;
  return static_cast<T>(static_cast<int32_t>((v + 12582912.0f) - 12582912.0f));
}

struct BinaryParams {
  float as, bs, cs;
  int32_t az, bz, cz;
};

BinaryParams read_params(const KernelContext& ctx, DataType t) {
  BinaryParams p;
  p.as = qop_scale(ctx, ctx.required_input(1), "A_scale");
  p.az = qop_zero_point(ctx, ctx.input(2), t, "A_zero_point");
  p.bs = qop_scale(ctx, ctx.required_input(4), "B_scale");
  p.bz = qop_zero_point(ctx, ctx.input(5), t, "B_zero_point");
  p.cs = qop_scale(ctx, ctx.required_input(6), "C_scale");
  p.cz = qop_zero_point(ctx, ctx.input(7), t, "C_zero_point");
  return p;
}

// One run of QLinearAdd: c[i] = sat(rint(fma(x[i], rx, fma(y[i], ry, fixed)))), or with y
// null (its value folded into fixed) sat(rint(fma(x[i], rx, fixed))).
template <typename T>
void add_run_portable(const T* x, const T* y, T* c, int64_t n, float rx, float ry, float fixed) {
  if (y) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = std::fma(static_cast<float>(y[i]), ry, fixed);
      c[i] = pack_saturate<T>(std::fma(static_cast<float>(x[i]), rx, v));
    }
  } else {
    for (int64_t i = 0; i < n; ++i)
      c[i] = pack_saturate<T>(std::fma(static_cast<float>(x[i]), rx, fixed));
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
// MLAS's AVX2 steps: bytes widened to int32 and float, fused multiply-adds, cvtps2dq, the
// saturating packs to int16 and to 8 bits.
template <typename T>
QOP_TARGET_AVX2 inline __m256 load8_ps(const T* p) {
  const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return _mm256_cvtepi32_ps(std::is_signed_v<T> ? _mm256_cvtepi8_epi32(v)
                                                : _mm256_cvtepu8_epi32(v));
}
template <typename T>
QOP_TARGET_AVX2 inline void store8_sat(T* p, __m256 v) {
  const __m256i r = _mm256_cvtps_epi32(v);
  const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
  const __m128i b = std::is_signed_v<T> ? _mm_packs_epi16(w, w) : _mm_packus_epi16(w, w);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), b);
}
template <typename T>
QOP_TARGET_FMA void add_run_fma(const T* x, const T* y, T* c, int64_t n, float rx, float ry,
                                float fixed) {
  const __m256 vrx = _mm256_set1_ps(rx), vry = _mm256_set1_ps(ry), vf = _mm256_set1_ps(fixed);
  int64_t i = 0;
  if (y) {
    for (; i + 8 <= n; i += 8) {
      const __m256 v = _mm256_fmadd_ps(load8_ps(y + i), vry, vf);
      store8_sat(c + i, _mm256_fmadd_ps(load8_ps(x + i), vrx, v));
    }
    add_run_portable(x + i, y + i, c + i, n - i, rx, ry, fixed);
  } else {
    for (; i + 8 <= n; i += 8) store8_sat(c + i, _mm256_fmadd_ps(load8_ps(x + i), vrx, vf));
    add_run_portable<T>(x + i, nullptr, c + i, n - i, rx, ry, fixed);
  }
}
#else
template <typename T>
void add_run_fma(const T* x, const T* y, T* c, int64_t n, float rx, float ry, float fixed) {
  add_run_portable(x, y, c, n, rx, ry, fixed);
}
#endif

template <typename T>
void add_rows(const BinaryPlan& p, const BinaryParams& q, const T* a, const T* b, T* c, int64_t r0,
              int64_t r1) {
  const float ra = q.as / q.cs, rb = q.bs / q.cs;
  const float za = static_cast<float>(q.az), zb = static_cast<float>(q.bz);
  const float zc = static_cast<float>(q.cz);
  const int64_t n = p.run;
  auto run = cpu_has_avx2_fma() ? add_run_fma<T> : add_run_portable<T>;
  for (int64_t r = r0; r < r1; ++r) {
    const T* ar = a + p.a_off[r];
    const T* br = b + p.b_off[r];
    T* cr = c + r * n;
    if (p.a_step == 0) {
      // MLAS is called with b as its span and a as its scalar.
      float fixed = zc - fp_barrier(fp_barrier(rb * zb) + fp_barrier(ra * za));
      fixed = fp_barrier(fixed + fp_barrier(static_cast<float>(ar[0]) * ra));
      run(br, nullptr, cr, n, rb, 0.0f, fixed);
    } else if (p.b_step == 0) {
      float fixed = zc - fp_barrier(fp_barrier(ra * za) + fp_barrier(rb * zb));
      fixed = fp_barrier(fixed + fp_barrier(static_cast<float>(br[0]) * rb));
      run(ar, nullptr, cr, n, ra, 0.0f, fixed);
    } else {
      const float fixed = zc - fp_barrier(fp_barrier(ra * za) + fp_barrier(rb * zb));
      run(ar, br, cr, n, ra, rb, fixed);
    }
  }
}

// One run of QLinearMul: the product and the sum round separately, as in MLAS's SSE2 code:
// two statements (clang contracts only within one) and, in the AVX2 version, intrinsics
// with no FMA in the target.
template <typename T, int64_t kStepA, int64_t kStepB>
void mul_run_portable(const T* a, const T* b, T* c, int64_t n, int32_t za, int32_t zb, float ratio,
                      float zc) {
  for (int64_t i = 0; i < n; ++i) {
    const int32_t va = static_cast<int32_t>(a[i * kStepA]) - za;
    const int32_t vb = static_cast<int32_t>(b[i * kStepB]) - zb;
    const float t = fp_barrier(static_cast<float>(va * vb) * ratio);
    c[i] = pack_saturate<T>(t + zc);
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
template <typename T>
QOP_TARGET_AVX2 inline __m256i load8_epi32(const T* p, int64_t step) {
  if (step == 0) return _mm256_set1_epi32(static_cast<int32_t>(p[0]));
  const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return std::is_signed_v<T> ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v);
}
template <typename T, int64_t kStepA, int64_t kStepB>
QOP_TARGET_AVX2 void mul_run_avx2(const T* a, const T* b, T* c, int64_t n, int32_t za, int32_t zb,
                                  float ratio, float zc) {
  const __m256i vza = _mm256_set1_epi32(za), vzb = _mm256_set1_epi32(zb);
  const __m256 vr = _mm256_set1_ps(ratio), vzc = _mm256_set1_ps(zc);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i va = _mm256_sub_epi32(load8_epi32(a + i * kStepA, kStepA), vza);
    const __m256i vb = _mm256_sub_epi32(load8_epi32(b + i * kStepB, kStepB), vzb);
    const __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_mullo_epi32(va, vb)), vr);
    store8_sat(c + i, _mm256_add_ps(t, vzc));
  }
  mul_run_portable<T, kStepA, kStepB>(a + i * kStepA, b + i * kStepB, c + i, n - i, za, zb, ratio,
                                      zc);
}
#else
template <typename T, int64_t kStepA, int64_t kStepB>
void mul_run_avx2(const T* a, const T* b, T* c, int64_t n, int32_t za, int32_t zb, float ratio,
                  float zc) {
  mul_run_portable<T, kStepA, kStepB>(a, b, c, n, za, zb, ratio, zc);
}
#endif

template <typename T>
void mul_rows(const BinaryPlan& p, const BinaryParams& q, const T* a, const T* b, T* c, int64_t r0,
              int64_t r1) {
  const float ratio = q.as * q.bs / q.cs;
  const float zc = static_cast<float>(q.cz);
  const int64_t n = p.run;
  const bool avx2 = cpu_has_avx2_fma();
  using Fn = void (*)(const T*, const T*, T*, int64_t, int32_t, int32_t, float, float);
  Fn run;
  if (p.a_step == 0)
    run = avx2 ? mul_run_avx2<T, 0, 1> : mul_run_portable<T, 0, 1>;
  else if (p.b_step == 0)
    run = avx2 ? mul_run_avx2<T, 1, 0> : mul_run_portable<T, 1, 0>;
  else
    run = avx2 ? mul_run_avx2<T, 1, 1> : mul_run_portable<T, 1, 1>;
  for (int64_t r = r0; r < r1; ++r)
    run(a + p.a_off[r], b + p.b_off[r], c + r * n, n, q.az, q.bz, ratio, zc);
}

// QLinearAdd on uint16: onnxruntime's portable arithmetic (MLAS's raw helper, the only one it
// has for 16 bits): each side scaled (a float product of the difference), the sum divided
// by c_scale, clamped to the range less c_zp, c_zp added, rounded half to even. An input
// that is one value over the run is scaled once.
void add_rows_u16(const BinaryPlan& p, const BinaryParams& q, const uint16_t* a, const uint16_t* b,
                  uint16_t* c, int64_t r0, int64_t r1) {
  const float lo = static_cast<float>(0 - q.cz), hi = static_cast<float>(65535 - q.cz);
  const float zc = static_cast<float>(q.cz);
  const int64_t n = p.run;
  for (int64_t r = r0; r < r1; ++r) {
    const uint16_t* ar = a + p.a_off[r];
    const uint16_t* br = b + p.b_off[r];
    uint16_t* cr = c + r * n;
    for (int64_t i = 0; i < n; ++i) {
      const float va =
          fp_barrier(q.as * static_cast<float>(static_cast<int32_t>(ar[i * p.a_step]) - q.az));
      const float vb =
          fp_barrier(q.bs * static_cast<float>(static_cast<int32_t>(br[i * p.b_step]) - q.bz));
      float v = fp_barrier(fp_barrier(va + vb) / q.cs);
      v = std::min(std::max(v, lo), hi);
      cr[i] = static_cast<uint16_t>(static_cast<int32_t>(std::nearbyint(fp_barrier(v + zc))));
    }
  }
}

template <bool kAdd>
class QLinearBinary final : public Kernel {
 public:
  explicit QLinearBinary(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.required_input(0);
    const Tensor& b = ctx.required_input(3);
    const bool u16 = kAdd && a.dtype() == DataType::kUInt16;
    if (kAdd && !u16 && a.dtype() != DataType::kUInt8 && a.dtype() != DataType::kInt8)
      ctx.fail(
          StatusCode::kInvalidArgument,
          std::string("input 'A' must be uint8, int8 or uint16, got ") + dtype_name(a.dtype()));
    if (!kAdd) check_qop_int8(ctx, a, "A");
    if (b.dtype() != a.dtype()) {
      ctx.fail(StatusCode::kInvalidArgument, std::string("input 'B' must have the type of 'A' (") +
                                                 dtype_name(a.dtype()) + "), got " +
                                                 dtype_name(b.dtype()));
    }
    const BinaryParams q = read_params(ctx, a.dtype());
    const BinaryPlan p = plan_binary(ctx, a.shape(), b.shape());
    Tensor& c = ctx.allocate_output(0, a.dtype(), p.out);
    if (c.numel() == 0) return;
    const double cost = 2.0 * static_cast<double>(p.run);
    if (u16) {
      parallel_for(ctx.thread_pool(), p.rows, cost, [&](int64_t s, int64_t e) {
        add_rows_u16(p, q, a.data<uint16_t>(), b.data<uint16_t>(), c.data<uint16_t>(), s, e);
      });
      return;
    }
    auto run = [&](auto tag) {
      using T = decltype(tag);
      const T* ad = a.data<T>();
      const T* bd = b.data<T>();
      T* cd = c.data<T>();
      if (p.rows == 1 && p.run > 8192) {
        // One long row: split it into pieces (the same arithmetic, element by element).
        constexpr int64_t kPiece = 4096;
        const int64_t pieces = (p.run + kPiece - 1) / kPiece;
        parallel_for(ctx.thread_pool(), pieces, 2.0 * kPiece, [&](int64_t s, int64_t e) {
          for (int64_t k = s; k < e; ++k) {
            BinaryPlan sub;
            sub.run = std::min(kPiece, p.run - k * kPiece);
            sub.a_step = p.a_step;
            sub.b_step = p.b_step;
            sub.a_off.assign(1, p.a_step * k * kPiece);
            sub.b_off.assign(1, p.b_step * k * kPiece);
            if (kAdd)
              add_rows<T>(sub, q, ad, bd, cd + k * kPiece, 0, 1);
            else
              mul_rows<T>(sub, q, ad, bd, cd + k * kPiece, 0, 1);
          }
        });
        return;
      }
      parallel_for(ctx.thread_pool(), p.rows, cost, [&](int64_t s, int64_t e) {
        if (kAdd)
          add_rows<T>(p, q, ad, bd, cd, s, e);
        else
          mul_rows<T>(p, q, ad, bd, cd, s, e);
      });
    };
    if (a.dtype() == DataType::kUInt8)
      run(uint8_t{});
    else
      run(int8_t{});
  }
};

// ---- lookup-table activations ---------------------------------------------------------------

// MLAS's logistic (MlasComputeLogistic): x clamped to [-18, 18], an odd degree-9 over an even
// degree-10 polynomial in x (fused multiply-adds), plus one half, clamped to [0, 1].
float mlas_logistic(float x) {
  x = x < -18.0f ? -18.0f : (x > 18.0f ? 18.0f : x);
  const float x2 = x * x;
  float p = std::fma(x2, 4.37031012579801e-11f, 1.15627324459942e-07f);
  p = std::fma(p, x2, 6.08574864600143e-05f);
  p = std::fma(p, x2, 8.51377133304701e-03f);
  p = std::fma(p, x2, 2.48287947061529e-01f);
  p = fp_barrier(p * x);
  float q = std::fma(x2, 6.10247389755681e-13f, 5.76102136993427e-09f);
  q = std::fma(q, x2, 6.29106785017040e-06f);
  q = std::fma(q, x2, 1.70198817374094e-03f);
  q = std::fma(q, x2, 1.16817656904453e-01f);
  q = std::fma(q, x2, 9.93151921023180e-01f);
  const float y = fp_barrier(p / q) + 0.5f;
  return y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y);
}

using Table = std::array<uint8_t, 256>;

class QLinearLookup final : public Kernel {
 public:
  QLinearLookup(const KernelInfo& info, bool sigmoid)
      : sigmoid_(sigmoid), alpha_(info.attr_float("alpha", 0.01f)) {
    const Tensor* xs = info.constant_input(1);
    const Tensor* ys = info.constant_input(3);
    const bool xz_ok = !info.has_input(2) || info.constant_input(2);
    const bool yz_ok = !info.has_input(4) || info.constant_input(4);
    if (!xs || !ys || !xz_ok || !yz_ok) return;
    const Tensor* xz = info.has_input(2) ? info.constant_input(2) : nullptr;
    const Tensor* yz = info.has_input(4) ? info.constant_input(4) : nullptr;
    // The element type is the zero point's when given; a mismatch is reported at run time.
    if (xs->dtype() != DataType::kFloat || ys->dtype() != DataType::kFloat || !is_single(*xs) ||
        !is_single(*ys))
      return;
    const Tensor* zt = xz ? xz : yz;
    if (!zt || (zt->dtype() != DataType::kUInt8 && zt->dtype() != DataType::kInt8)) return;
    if ((xz && (!is_single(*xz) || xz->dtype() != zt->dtype())) ||
        (yz && (!is_single(*yz) || yz->dtype() != zt->dtype())))
      return;
    fixed_dtype_ = zt->dtype();
    auto zp = [](const Tensor* t) -> int32_t {
      if (!t) return 0;
      return t->dtype() == DataType::kInt8 ? *t->data<int8_t>() : *t->data<uint8_t>();
    };
    build(*xs->data<float>(), zp(xz), *ys->data<float>(), zp(yz), fixed_dtype_, &fixed_);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    check_qop_int8(ctx, x, "X");
    const float xs = qop_scale(ctx, ctx.required_input(1), "X_scale");
    const int32_t xz = qop_zero_point(ctx, ctx.input(2), x.dtype(), "X_zero_point");
    const float ys = qop_scale(ctx, ctx.required_input(3), "Y_scale");
    const int32_t yz = qop_zero_point(ctx, ctx.input(4), x.dtype(), "Y_zero_point");
    Table local;
    const Table* table = &fixed_;
    if (fixed_dtype_ != x.dtype()) {
      build(xs, xz, ys, yz, x.dtype(), &local);
      table = &local;
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    const uint8_t* xd = static_cast<const uint8_t*>(x.raw_data());
    uint8_t* yd = static_cast<uint8_t*>(y.raw_data());
    const int64_t n = x.numel();
    constexpr int64_t kChunk = 16384;
    parallel_for(ctx.thread_pool(), (n + kChunk - 1) / kChunk, 1.0 * kChunk,
                 [&](int64_t s, int64_t e) {
                   const uint8_t* t = table->data();
                   for (int64_t i = s * kChunk, end = std::min(n, e * kChunk); i < end; ++i)
                     yd[i] = t[xd[i]];
                 });
  }

 private:
  void build(float xs, int32_t xz, float ys, int32_t yz, DataType t, Table* out) const {
    const bool is_signed = t == DataType::kInt8;
    if (sigmoid_) {
      build_qlinear_table(xs, xz, ys, yz, is_signed, mlas_logistic, out->data());
    } else {
      const float alpha = alpha_;
      build_qlinear_table(
          xs, xz, ys, yz, is_signed,
          [alpha](float v) { return v >= 0.0f ? v : fp_barrier(alpha * v); }, out->data());
    }
  }

  bool sigmoid_;
  float alpha_;
  DataType fixed_dtype_ = DataType::kUndefined;
  Table fixed_{};
};

}  // namespace

void register_qlinear_elementwise(KernelRegistry& r) {
  r.add("com.microsoft", "QLinearAdd", 1, kMaxOpset, make_factory<QLinearBinary<true>>());
  r.add("com.microsoft", "QLinearMul", 1, kMaxOpset, make_factory<QLinearBinary<false>>());
  r.add("com.microsoft", "QLinearSigmoid", 1, kMaxOpset,
        [](const KernelInfo& info) -> std::unique_ptr<Kernel> {
          return std::make_unique<QLinearLookup>(info, true);
        });
  r.add("com.microsoft", "QLinearLeakyRelu", 1, kMaxOpset,
        [](const KernelInfo& info) -> std::unique_ptr<Kernel> {
          return std::make_unique<QLinearLookup>(info, false);
        });
}

}  // namespace quant
}  // namespace ortlite
