// Depthwise convolutions for Conv / FusedConv (one input channel per group): the AVX-512
// in-place kernel of conv_avx512.h where it applies, else the padded-buffer kernels below.
#include "compute/vectorize.h"  // first: compile options for the loops below

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "compute/conv_avx512.h"
#include "providers/cpu/nn/conv_internal.h"
#include "compute/simd.h"

namespace ortlite {
namespace nn {
namespace {

// ---- depthwise ---------------------------------------------------------------------------

// One channel of a 1-D or 2-D depthwise convolution (a 1-D one is 2-D with a single row).
// The input channel is copied into a zero-padded buffer split into `sw` column phases
// (phase j holds padded columns j, j + sw, ...): every tap of an output row then reads a
// contiguous span, and all taps accumulate in registers. Wide outputs are computed row by
// row straight into Y. Narrow ones would leave most of each vector idle, so the whole
// channel is one span over the flattened buffer rows ("flat": output row oy starts at
// oy * sh * PWs, the positions between rows are computed and dropped), rounded up to whole
// vectors (the buffer has slack for it) and copied out row by row. The epilogue runs on each
// output row while it is in L1.
struct DwPlan {
  int64_t H, W, OH, OW, sh, sw, pt, pl;
  int64_t PH, PWs, plane;  // padded rows, phase row length, phase size
  int64_t ntaps;           // KH * KW
  bool flat;               // one span for the whole channel
  int64_t pitch;           // flat: distance between output rows in the span (sh * PWs)
  int64_t flat_len;        // flat span, a multiple of kDwVec
  int64_t buf_size;        // padded buffer with slack
  const int64_t* toff;     // per tap: offset of the tap's first read
};

constexpr int64_t kDwVec = 16;

template <typename T>
ORTLITE_NN_INLINE void dw_pad_impl(const DwPlan& p, const T* xc, T* buf) {
  if (p.sw != 1) zero_run(buf, p.buf_size);
  for (int64_t r = 0; r < p.PH; ++r) {
    const int64_t iy = r - p.pt;
    T* dst = buf + r * p.PWs;
    if (iy < 0 || iy >= p.H) {
      if (p.sw == 1) zero_run(dst, p.PWs);
      continue;
    }
    const T* __restrict row = xc + iy * p.W;
    if (p.sw == 1) {
      zero_run(dst, p.pl);
      copy_run(dst + p.pl, row, p.W);
      zero_run(dst + p.pl + p.W, p.PWs - p.pl - p.W);
    } else if (p.sw == 2) {
      // Padded column q = ix + pl goes to phase q % 2 at q / 2.
      T* __restrict e = dst + (p.pl & 1) * p.plane + p.pl / 2;
      T* __restrict o = dst + ((p.pl + 1) & 1) * p.plane + (p.pl + 1) / 2;
      const int64_t half = p.W / 2;
      for (int64_t i = 0; i < half; ++i) {
        e[i] = row[2 * i];
        o[i] = row[2 * i + 1];
      }
      if (p.W & 1) e[half] = row[p.W - 1];
    } else {
      int64_t ph = p.pl % p.sw, q = p.pl / p.sw;
      for (int64_t ix = 0; ix < p.W; ++ix) {
        dst[ph * p.plane + q] = row[ix];
        if (++ph == p.sw) {
          ph = 0;
          ++q;
        }
      }
    }
  }
  if (p.sw == 1) zero_run(buf + p.plane, p.buf_size - p.plane);
}

// out[i] = b + sum_t w[t] * base[toff[t] + i] for i < len; all taps accumulate in
// registers, one store per output vector. 3x3 kernels get the taps unrolled. With kClamp the
// result is clipped to [lo, hi] (Relu, Clip) before it is stored, NaN kept.
// kVB: the widest vector in bytes (64 AVX-512, 32 AVX2, 16 SSE2), one vector of half that
// width after it. Each ISA gets its own instance: GCC splits a vector wider than the ISA's
// registers element by element where it selects (the clamp), which made the AVX2 build of
// the 64-byte loop several times slower than onnxruntime's depthwise convolution.
template <typename T, int kTaps, bool kClamp, int kVB>
ORTLITE_NN_INLINE void dw_span_impl(const T* base, const int64_t* toff, const T* w, int64_t ntaps,
                                    T b, T lo, T hi, T* out, int64_t len) {
  typedef T v64 __attribute__((vector_size(kVB)));
  typedef T v32 __attribute__((vector_size(kVB / 2)));
  constexpr int64_t L = kVB / sizeof(T), H = kVB / 2 / sizeof(T);
  const int64_t nt = kTaps > 0 ? kTaps : ntaps;
  int64_t i = 0;
  // 64-byte vectors, then one of 32 bytes: the same loop for either vector type (named by
  // a pointer, not passed by value: a 64-byte vector argument has no stable ABI).
  auto vectors = [&](auto* type, int64_t width) __attribute__((always_inline)) {
    using V = std::remove_pointer_t<decltype(type)>;
    for (; i + width <= len; i += width) {
      V acc = V{} + b;
      for (int64_t t = 0; t < nt; ++t) {
        V v;
        std::memcpy(&v, base + toff[t] + i, sizeof(v));
        acc += w[t] * v;
      }
      if (kClamp) {
        acc = acc < lo ? lo : acc;
        acc = acc > hi ? hi : acc;
      }
      std::memcpy(out + i, &acc, sizeof(acc));
    }
  };
  vectors(static_cast<v64*>(nullptr), L);
  vectors(static_cast<v32*>(nullptr), H);
  for (; i < len; ++i) {
    T acc = b;
    for (int64_t t = 0; t < nt; ++t) acc += w[t] * base[toff[t] + i];
    if (kClamp) {
      acc = acc < lo ? lo : acc;
      acc = acc > hi ? hi : acc;
    }
    out[i] = acc;
  }
}

template <typename T, int kVB>
ORTLITE_NN_INLINE void dw_span_any(const T* base, const int64_t* toff, const T* w, int64_t ntaps,
                                   T b, bool clamp, T lo, T hi, T* out, int64_t len) {
  if (ntaps == 9) {
    if (clamp) {
      dw_span_impl<T, 9, true, kVB>(base, toff, w, ntaps, b, lo, hi, out, len);
    } else {
      dw_span_impl<T, 9, false, kVB>(base, toff, w, ntaps, b, lo, hi, out, len);
    }
  } else if (clamp) {
    dw_span_impl<T, 0, true, kVB>(base, toff, w, ntaps, b, lo, hi, out, len);
  } else {
    dw_span_impl<T, 0, false, kVB>(base, toff, w, ntaps, b, lo, hi, out, len);
  }
}

// Output channel from the padded buffer of its input channel, epilogue included (z is the
// channel's plane of Z or null); tmp holds flat_len values.
template <typename T, int kVB>
ORTLITE_NN_INLINE void dw_out_impl(const DwPlan& p, const T* buf, const T* w, T b,
                                   const ActSpec& act, const T* z, T* tmp, T* yc) {
  // Relu and Clip without Z are applied in registers; anything else on each finished row.
  const RegisterAct<T> ra = register_act<T>(act, z != nullptr);
  if (p.flat)
    dw_span_any<T, kVB>(buf, p.toff, w, p.ntaps, b, ra.clamp, ra.lo, ra.hi, tmp, p.flat_len);
  for (int64_t oy = 0; oy < p.OH; ++oy) {
    T* yr = yc + oy * p.OW;
    if (p.flat) {
      copy_run(yr, tmp + oy * p.pitch, p.OW);
    } else {
      dw_span_any<T, kVB>(buf + oy * p.sh * p.PWs, p.toff, w, p.ntaps, b, ra.clamp, ra.lo, ra.hi,
                          yr, p.OW);
    }
    if (ra.after) bias_add_act(act, yr, p.OW, T(0), z ? z + oy * p.OW : nullptr);
  }
}

ORTLITE_CONV_CLONES void dw_pad_f32(const DwPlan& p, const float* xc, float* buf) {
  dw_pad_impl<float>(p, xc, buf);
}
ORTLITE_NN_TARGET_AVX512 void dw_out_avx512(const DwPlan& p, const float* buf, const float* w,
                                            float b, const ActSpec& act, const float* z, float* tmp,
                                            float* yc) {
  dw_out_impl<float, 64>(p, buf, w, b, act, z, tmp, yc);
}
ORTLITE_NN_TARGET_AVX2 void dw_out_avx2(const DwPlan& p, const float* buf, const float* w, float b,
                                        const ActSpec& act, const float* z, float* tmp, float* yc) {
  dw_out_impl<float, 32>(p, buf, w, b, act, z, tmp, yc);
}
void dw_out_sse2(const DwPlan& p, const float* buf, const float* w, float b, const ActSpec& act,
                 const float* z, float* tmp, float* yc) {
  dw_out_impl<float, 16>(p, buf, w, b, act, z, tmp, yc);
}
void dw_out_f32(const DwPlan& p, const float* buf, const float* w, float b, const ActSpec& act,
                const float* z, float* tmp, float* yc) {
  static const auto fn = pick_by_isa(dw_out_avx512, dw_out_avx2, dw_out_sse2);
  fn(p, buf, w, b, act, z, tmp, yc);
}
void dw_pad(const DwPlan& p, const float* xc, float* buf) {
  dw_pad_f32(p, xc, buf);
}
void dw_pad(const DwPlan& p, const double* xc, double* buf) {
  dw_pad_impl<double>(p, xc, buf);
}
void dw_out(const DwPlan& p, const float* buf, const float* w, float b, const ActSpec& act,
            const float* z, float* tmp, float* yc) {
  dw_out_f32(p, buf, w, b, act, z, tmp, yc);
}
void dw_out(const DwPlan& p, const double* buf, const double* w, double b, const ActSpec& act,
            const double* z, double* tmp, double* yc) {
  dw_out_impl<double, 16>(p, buf, w, b, act, z, tmp, yc);
}

// Whether depthwise_blocked16 takes a layer: one input channel per output (no multiplier),
// AVX-512F; 25 taps or more, 9 or more on rows of at most 8 outputs (below), or any dilated
// kernel of 3x3 and more (the planar kernels take no dilation; the generic path computed
// 144 x 80 x 80 3x3 dilation 2 stride 2 at 0.54x onnxruntime's speed, 576 x 17 x 17
// dilation 2 at 0.57x; now 1.15x and 1.08x). Depthwise Conv alone, 1 thread, against the
// planar kernels (dw_run): 7x7 stride 2 on 96 x 56 x 56 1.4x, 192 x 28 x 28 1.5x, 96 x 14 x
// 14 2.0x; 5x5 stride 2 on 32 x 112 x 112 1.4x; 7x7 stride 1 on 768 x 7 x 7 1.9x, 96 x 56 x
// 56 1.09x; 5x5 on 1152 x 7 x 7 1.8x, 240 x 28 x 28 1.04x; 3x9, 9x3, 9x9, 11x11 1.7-1.9x. The
// planar kernels stay ahead on 5x5 and 7x7 kernels with strides 1 and rows of more than 64
// outputs (block_s1_shared loads each input row once for all the output rows it feeds; 32 x
// 112 x 112: 0.88x and 0.93x with the copy), unless the plane has 3 to 16 rows (a text
// line's feature maps, PP-OCR's recognizer: 5x5 on 480 x 3 x 80 1.55x faster here, 480 x 6
// x 80 1.42x, 96 x 16 x 100 1.2x, 7x7 on 96 x 8 x 128 1.22x; 96 x 20 x 80 equal, 64 x 24 x
// 128 7x7 0.92x; one row 0.84x).
bool blocked16_takes(const cvx::DwGeometry& g, int64_t C, int64_t M) {
  if (M != C || !cvx::available()) return false;
  if ((g.dh > 1 || g.dw > 1) && g.KH * g.KW >= 9) return true;
  // 3x3 with rows of at most 8 outputs (the last stages' 7 x 7 planes): 576 and 960 planes
  // of 7 x 7 0.70x onnxruntime's speed with the planar kernels, 0.95-1.05x here; 576 of 14 x
  // 14 stride 2 1.02 -> 1.28x. At 14 and 28 outputs a row stride 1 they stay planar (0.87x
  // and 0.75x the speed here).
  if (g.KH * g.KW >= 9 && g.OW <= 8) return true;
  if (g.KH * g.KW < 25) return false;
  const bool planar_ahead = g.sh == 1 && g.sw == 1 && g.OW > 64 && (g.OH > 16 || g.OH <= 2) &&
                            g.KH == g.KW && (g.KH == 5 || g.KH == 7);
  return !planar_ahead;
}

// Depthwise with 16 channels in the lanes (cvx::dw16_*): per task, a block of 16 channels and
// a band of output rows; the band's input rows are transposed into a zero-padded
// channels-last copy, then every output is 16 FMAs of whole vectors per tap (no shuffles, no
// masks), 16 outputs of the band at a time, transposed back into the planes.
void depthwise_blocked16(const cvx::DwGeometry& g, const float* x, const float* w,
                         const Epilogue<float>& ep, float* y, int64_t N, int64_t C, int64_t M,
                         ThreadPool* pool) {
  const ActSpec& act = ep.act;
  // Relu and Clip without Z are applied in registers; anything else on the finished rows.
  const RegisterAct<float> ra = register_act<float>(act, ep.z != nullptr);
  const int64_t P = g.OH * g.OW, in_size = g.H * g.W;
  const double cost = 2.0 * static_cast<double>(P) * g.KH * g.KW;
  const cvx::Dw16Layout L = cvx::dw16_layout(g);
  // Bands of output rows whose copy stays within about 384 KiB (L2), each a task with its
  // block of 16 channels: the threads split a plane of few channels too.
  const int64_t row_bytes = L.Wb * 16 * 4, kh = (g.KH - 1) * g.dh + 1;  // dilated height
  int64_t band = std::max<int64_t>(1, ((384 << 10) / row_bytes - kh) / g.sh + 1);
  band = std::min(band, g.OH);
  const int64_t blocks = (C + 15) / 16, bands = (g.OH + band - 1) / band, taps = g.KH * g.KW;
  const int64_t copy_rows = (band - 1) * g.sh + kh;
  parallel_for(pool, N * blocks * bands, 16 * cost * band / g.OH, [&](int64_t b, int64_t e) {
    thread_local std::vector<float> buf;  // grown only: [64-byte slack][weights][copy]
    const size_t need = static_cast<size_t>(16 + taps * 16 + copy_rows * L.Wb * 16);
    if (buf.size() < need) buf.resize(need);
    float* wt16 = buf.data() + (16 - (reinterpret_cast<uintptr_t>(buf.data()) / 4) % 16) % 16;
    float* copy = wt16 + taps * 16;
    int64_t packed_c = -1;
    for (int64_t t = b; t < e; ++t) {
      const int64_t n = t / (blocks * bands), c = (t / bands % blocks) * 16, bi = t % bands;
      const int cn = static_cast<int>(std::min<int64_t>(16, C - c));
      if (c != packed_c) {
        if (cn < 16) std::fill(wt16, wt16 + taps * 16, 0.f);
        for (int64_t k = 0; k < taps; k += 16)
          cvx::transpose16(w + c * taps + k, taps, cn,
                           static_cast<int>(std::min<int64_t>(16, taps - k)), wt16 + k * 16, 16);
        packed_c = c;
      }
      const int64_t oy0 = bi * band, oy1 = std::min(g.OH, oy0 + band);
      cvx::dw16_pack(g, L, x + (n * C + c) * in_size, in_size, cn, oy0 * g.sh,
                     (oy1 - 1) * g.sh + kh, copy);
      float* yc = y + (n * M + c) * P;
      cvx::dw16_run(g, L, copy, wt16, ep.bias ? ep.bias + c : nullptr, ra.clamp, ra.lo, ra.hi, cn,
                    oy0, oy1, yc, P);
      if (ra.after)
        for (int j = 0; j < cn; ++j)
          epilogue(act, yc + j * P + oy0 * g.OW, (oy1 - oy0) * g.OW, 0.f,
                   ep.z ? ep.z + (n * M + c + j) * P + oy0 * g.OW : nullptr);
    }
  });
}

// Depthwise with the direct AVX-512 kernel (conv_avx512.h): no padded copy of the input.
void depthwise_direct(const cvx::DwGeometry& g, const float* x, const float* w,
                      const Epilogue<float>& ep, float* y, int64_t N, int64_t C, int64_t M,
                      ThreadPool* pool) {
  const std::vector<uint32_t> masks = cvx::dw_masks(g);
  const ActSpec& act = ep.act;
  // Relu and Clip without Z are applied in registers; anything else on the finished plane.
  const RegisterAct<float> ra = register_act<float>(act, ep.z != nullptr);
  const int64_t Mg = M / C, P = g.OH * g.OW, in_size = g.H * g.W;
  const double cost = 2.0 * static_cast<double>(P) * g.KH * g.KW;
  // Large planes at several threads: a band of output rows of every plane a thread (band
  // major, so the pool's contiguous segments give thread t band t), as the layers around it
  // split the image: the stem's bands, a pointwise product's blocks of positions. Split by
  // planes, each thread read half its input from the other core's cache and wrote half of
  // the next layer's (MobileNetV2's 32 channels at 112 x 112 at 2 threads).
  const int threads = pool ? pool->num_threads() : 1;
  const int64_t bands = threads > 1 && !g.flat && g.OH >= 4 * threads && P >= 1024 ? threads : 1;
  const int64_t planes = N * M;
  parallel_for(pool, bands * planes, cost / static_cast<double>(bands), [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      const int64_t band = u / planes, nm = u % planes, nn = nm / M, m = nm % M;
      const float* xc = x + (nn * C + m / Mg) * in_size;
      const float* wm = w + m * g.KH * g.KW;
      const float bm = ep.bias ? ep.bias[m] : 0.f;
      if (bands == 1) {
        float* yc = y + nm * P;
        cvx::dw_run(g, masks.data(), xc, wm, bm, ra.clamp, ra.lo, ra.hi, yc);
        if (ra.after) epilogue(act, yc, P, 0.f, ep.z ? ep.z + nm * P : nullptr);
        continue;
      }
      // The band as a plane of the input rows it reads (the columns' masks are the same).
      const int64_t oy0 = g.OH * band / bands, oy1 = g.OH * (band + 1) / bands;
      const int64_t r0 = std::max<int64_t>(0, oy0 * g.sh - g.pt);
      const int64_t r1 = std::min<int64_t>(g.H, (oy1 - 1) * g.sh - g.pt + g.KH);
      cvx::DwGeometry bg = g;
      bg.H = std::max<int64_t>(0, r1 - r0);
      bg.OH = oy1 - oy0;
      bg.pt = r0 + g.pt - oy0 * g.sh;
      float* yc = y + nm * P + oy0 * g.OW;
      cvx::dw_run(bg, masks.data(), xc + r0 * g.W, wm, bm, ra.clamp, ra.lo, ra.hi, yc);
      if (ra.after)
        epilogue(act, yc, bg.OH * g.OW, 0.f, ep.z ? ep.z + nm * P + oy0 * g.OW : nullptr);
    }
  });
}

}  // namespace

// Depthwise (one input channel per group, M = C * multiplier), 1-D or 2-D.
template <typename T>
void depthwise_2d(const SpatialGeometry& geo, const T* x, const T* w, const Epilogue<T>& ep, T* y,
                  int64_t N, int64_t C, int64_t M, ThreadPool* pool) {
  const bool one = geo.rank == 1;
  const int64_t KH = one ? 1 : geo.kernel[0], KW = geo.kernel[one ? 0 : 1];
  const int64_t dh = one ? 1 : geo.dilation[0], dw = geo.dilation[one ? 0 : 1];
  if constexpr (std::is_same_v<T, float>) {
    cvx::DwGeometry dg{one ? 1 : geo.in[0],
                       geo.in[one ? 0 : 1],
                       one ? 1 : geo.out[0],
                       geo.out[one ? 0 : 1],
                       KH,
                       KW,
                       one ? 1 : geo.stride[0],
                       geo.stride[one ? 0 : 1],
                       one ? 0 : geo.pad_begin[0],
                       geo.pad_begin[one ? 0 : 1],
                       false};
    dg.flat = cvx::dw_flat_ok(dg);
    dg.dh = dh;
    dg.dw = dw;
    if (blocked16_takes(dg, C, M)) {
      depthwise_blocked16(dg, x, w, ep, y, N, C, M, pool);
      return;
    }
    if (dh == 1 && dw == 1 && cvx::dw_supported(dg)) {
      depthwise_direct(dg, x, w, ep, y, N, C, M, pool);
      return;
    }
  }
  DwPlan p;
  p.H = one ? 1 : geo.in[0];
  p.W = geo.in[one ? 0 : 1];
  p.OH = one ? 1 : geo.out[0];
  p.OW = geo.out[one ? 0 : 1];
  p.sh = one ? 1 : geo.stride[0];
  p.sw = geo.stride[one ? 0 : 1];
  p.pt = one ? 0 : geo.pad_begin[0];
  p.pl = geo.pad_begin[one ? 0 : 1];
  p.PH = p.H + p.pt + (one ? 0 : geo.pad_end[0]);
  const int64_t PW = p.W + p.pl + geo.pad_end[one ? 0 : 1];
  p.PWs = (PW + p.sw - 1) / p.sw;
  p.plane = p.PH * p.PWs;
  p.ntaps = KH * KW;
  p.pitch = p.sh * p.PWs;
  p.flat = p.OW < 4 * kDwVec;
  const int64_t span = (p.OH - 1) * p.pitch + p.OW;
  p.flat_len = p.flat ? (span + kDwVec - 1) / kDwVec * kDwVec : 0;
  std::vector<int64_t> toff(static_cast<size_t>(p.ntaps));
  int64_t max_off = 0;
  for (int64_t ky = 0; ky < KH; ++ky) {
    for (int64_t kx = 0; kx < KW; ++kx) {
      const int64_t c = kx * dw;
      const int64_t off = (c % p.sw) * p.plane + ky * dh * p.PWs + c / p.sw;
      toff[ky * KW + kx] = off;
      max_off = std::max(max_off, off);
    }
  }
  p.toff = toff.data();
  // The flat span reads up to max_off + flat_len.
  p.buf_size = std::max(p.sw * p.plane, max_off + p.flat_len);
  const int64_t Mg = M / C, P = p.OH * p.OW;
  const double cost = 2.0 * static_cast<double>(P) * p.ntaps * Mg + static_cast<double>(p.buf_size);
  parallel_for(pool, N * C, cost, [&](int64_t b, int64_t e) {
    std::vector<T> buf(static_cast<size_t>(p.buf_size));
    std::vector<T> tmp(static_cast<size_t>(p.flat_len));
    for (int64_t nc = b; nc < e; ++nc) {
      const int64_t nn = nc / C, c = nc % C;
      dw_pad(p, x + nc * p.H * p.W, buf.data());
      for (int64_t j = 0; j < Mg; ++j) {
        const int64_t m = c * Mg + j, off = (nn * M + m) * P;
        dw_out(p, buf.data(), w + m * p.ntaps, ep.bias ? ep.bias[m] : T(0), ep.act,
               ep.z ? ep.z + off : nullptr, tmp.data(), y + off);
      }
    }
  });
}

// Depthwise for 3 or more spatial axes: each kernel tap is applied to a whole output row
// (last axis) at a time.
template <typename T>
void depthwise_nd(const SpatialGeometry& g, const T* x, const T* w, const Epilogue<T>& ep, T* y,
                  int64_t N, int64_t C, int64_t M, ThreadPool* pool) {
  const size_t n = g.rank;
  const size_t last = n - 1;
  const int64_t Mg = M / C;
  int64_t ksize = 1, in_size = 1, P = 1;
  for (size_t d = 0; d < n; ++d) {
    ksize *= g.kernel[d];
    in_size *= g.in[d];
    P *= g.out[d];
  }
  const int64_t out_l = g.out[last], in_l = g.in[last], s_l = g.stride[last];
  const int64_t rows = P / out_l;
  // Valid output range of each tap along the last axis (the same for every row).
  const int64_t kl_n = g.kernel[last];
  std::vector<int64_t> los(static_cast<size_t>(kl_n)), his(static_cast<size_t>(kl_n));
  for (int64_t kl = 0; kl < kl_n; ++kl)
    valid_range(kl * g.dilation[last] - g.pad_begin[last], s_l, in_l, out_l, los[kl], his[kl]);
  parallel_for(pool, N * M, 2.0 * static_cast<double>(P) * ksize, [&](int64_t b, int64_t e) {
    std::vector<int64_t> kidx(n), oi(n);
    for (int64_t nm = b; nm < e; ++nm) {
      const int64_t m = nm % M, nn = nm / M;
      const T* xc = x + (nn * C + m / Mg) * in_size;
      const T* wm = w + m * ksize;
      T* yc = y + nm * P;
      const T b0 = ep.bias ? ep.bias[m] : T(0);
      std::fill(oi.begin(), oi.end(), 0);
      for (int64_t q = 0; q < rows; ++q) {
        T* yr = yc + q * out_l;
        for (int64_t o = 0; o < out_l; ++o) yr[o] = b0;
        for (int64_t kf = 0; kf < ksize; kf += g.kernel[last]) {
          // Leading kernel axes of this tap group.
          int64_t r = kf / g.kernel[last];
          for (size_t d = last; d-- > 0;) {
            kidx[d] = r % g.kernel[d];
            r /= g.kernel[d];
          }
          int64_t off;
          if (!leading_offset(g, oi, kidx, last, &off)) continue;
          const T* row = xc + off * in_l;
          for (int64_t kl = 0; kl < kl_n; ++kl) {
            const int64_t o_off = kl * g.dilation[last] - g.pad_begin[last];
            const int64_t lo = los[kl], hi = his[kl];
            const T wv = wm[kf + kl];
            const T* src = row + o_off;
            if (s_l == 1) {
              for (int64_t o = lo; o < hi; ++o) yr[o] += wv * src[o];
            } else {
              for (int64_t o = lo; o < hi; ++o) yr[o] += wv * src[o * s_l];
            }
          }
        }
        for (size_t d = last; d-- > 0;) {
          if (++oi[d] < g.out[d]) break;
          oi[d] = 0;
        }
      }
      epilogue(ep.act, yc, P, T(0), ep.z ? ep.z + nm * P : nullptr);
    }
  });
}

template void depthwise_2d<float>(const SpatialGeometry&, const float*, const float*,
                                  const Epilogue<float>&, float*, int64_t, int64_t, int64_t,
                                  ThreadPool*);
template void depthwise_2d<double>(const SpatialGeometry&, const double*, const double*,
                                   const Epilogue<double>&, double*, int64_t, int64_t, int64_t,
                                   ThreadPool*);
template void depthwise_nd<float>(const SpatialGeometry&, const float*, const float*,
                                  const Epilogue<float>&, float*, int64_t, int64_t, int64_t,
                                  ThreadPool*);
template void depthwise_nd<double>(const SpatialGeometry&, const double*, const double*,
                                   const Epilogue<double>&, double*, int64_t, int64_t, int64_t,
                                   ThreadPool*);

}  // namespace nn
}  // namespace ortlite
