// QLinearConv (10) and ConvInteger (10): N-D convolution of (x - x_zero_point) and
// (w - w_zero_point) with Conv's attributes (pads / auto_pad, strides, dilations, group).
// x's zero point is per tensor; w's per tensor or per output channel ([M]). Padding
// contributes 0 after the zero point is taken off, i.e. the input is padded with its zero
// point.
//
// As in Conv: per image and group, Y_g[Mg x P] = W_g[Mg x Kg] * col[Kg x P] with the im2col
// expansion (of the bytes, padded with x's zero point) over bounded chunks of output
// positions, on the 8-bit integer GEMM (compute/int8_gemm.h): exact, wrapped to int32 (the
// overflow the spec allows), zero points off through row and column sums. QLinearConv adds
// the int32 bias and requantizes like onnxruntime (x_scale * w_scale[m] / y_scale in float,
// times the sum in float, rounded half to even, plus y_zero_point, saturated). A constant w is
// packed once at load, per group (its zero point may still vary per run).
//
// com.ortlite ConvIntegerToFloat is the optimizer's fusion of ConvInteger [+ Add of an int32
// bias per output channel] + Cast to float + Mul by a single float (the dynamic quantization
// of a Conv as onnxruntime's quantize_dynamic writes it): inputs x, w, x_zero_point,
// w_zero_point, bias (int32, one per output channel or one for all, optional), scale (one
// float);
// y = act(float(sum + bias[m]) * scale), the unfused nodes' operations in their order,
// applied to each block of sums while it is in cache; the activation (attributes
// activation / activation_params, as FusedConv's: compute/activation.h) is optional.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "compute/activation.h"
#include "compute/int8_gemm.h"
#include "providers/cpu/nn/nn_common.h"
#include "providers/cpu/quant/quant_common.h"

namespace ortlite {
namespace quant {
namespace {

using nn::ActSpec;
using nn::SpatialAttrs;
using nn::SpatialGeometry;

bool is_int8_type(DataType t) {
  return t == DataType::kUInt8 || t == DataType::kInt8;
}

template <typename Fn>
void dispatch_int8(DataType t, Fn&& fn) {
  if (t == DataType::kUInt8) return fn(uint8_t{});
  return fn(int8_t{});
}

std::vector<uint8_t>& col_scratch() {
  thread_local std::vector<uint8_t> buf;
  return buf;
}

std::vector<uint8_t>& pad_scratch() {
  thread_local std::vector<uint8_t> buf;
  return buf;
}

int8gemm::PackedB& b_scratch() {
  thread_local int8gemm::PackedB buf;
  return buf;
}

std::vector<int32_t>& acc_scratch() {
  thread_local std::vector<int32_t> buf;
  return buf;
}

// im2col of bytes: output positions [p0, p0 + pc) into col[(c * ksize + k) * pc + (p - p0)],
// `pad` where a tap falls in the padding.
void im2col_u8(const uint8_t* x, const SpatialGeometry& g, int64_t Cg, int64_t p0, int64_t pc,
               uint8_t pad, uint8_t* col) {
  const size_t n = g.rank, last = n - 1;
  int64_t ksize = 1, in_size = 1;
  for (size_t d = 0; d < n; ++d) {
    ksize *= g.kernel[d];
    in_size *= g.in[d];
  }
  std::vector<int64_t> kidx(n), oi(n);
  for (int64_t c = 0; c < Cg; ++c) {
    const uint8_t* xc = x + c * in_size;
    for (int64_t kf = 0; kf < ksize; ++kf) {
      for (int64_t r = kf, d = static_cast<int64_t>(n) - 1; d >= 0; --d) {
        kidx[d] = r % g.kernel[d];
        r /= g.kernel[d];
      }
      uint8_t* out = col + (c * ksize + kf) * pc;
      for (int64_t r = p0, d = static_cast<int64_t>(n) - 1; d >= 0; --d) {
        oi[d] = r % g.out[d];
        r /= g.out[d];
      }
      const int64_t s_l = g.stride[last], in_l = g.in[last], out_l = g.out[last];
      const int64_t off_l = kidx[last] * g.dilation[last] - g.pad_begin[last];
      // Outputs [vlo, vhi) of the last axis read inside the input, the rest is padding.
      int64_t vlo, vhi;
      nn::valid_range(off_l, s_l, in_l, out_l, vlo, vhi);
      int64_t q = 0;
      while (q < pc) {
        // One run along the last axis: the leading offset once.
        int64_t lead = 0;
        bool inside = true;
        for (size_t d = 0; d < last; ++d) {
          const int64_t ii = oi[d] * g.stride[d] + kidx[d] * g.dilation[d] - g.pad_begin[d];
          if (ii < 0 || ii >= g.in[d]) inside = false;
          lead = lead * g.in[d] + ii;
        }
        const int64_t run = std::min(pc - q, out_l - oi[last]);
        if (!inside) {
          std::fill(out + q, out + q + run, pad);
        } else {
          const uint8_t* xr = xc + lead * in_l;
          const int64_t o0 = oi[last], o1 = o0 + run;
          const int64_t a0 = std::clamp(vlo, o0, o1), a1 = std::clamp(vhi, a0, o1);
          uint8_t* dst = out + q - o0;
          std::fill(dst + o0, dst + a0, pad);
          if (s_l == 1) {
            std::memcpy(dst + a0, xr + a0 + off_l, static_cast<size_t>(a1 - a0));
          } else {
            for (int64_t o = a0; o < a1; ++o) dst[o] = xr[o * s_l + off_l];
          }
          std::fill(dst + a1, dst + o1, pad);
        }
        q += run;
        oi[last] = 0;
        for (int64_t d = static_cast<int64_t>(last) - 1; d >= 0; --d) {
          if (++oi[d] < g.out[d]) break;
          oi[d] = 0;
        }
      }
    }
  }
}

// A 2-D convolution's geometry as plain numbers.
struct Conv2d {
  int64_t IH, IW, OH, OW, KH, KW, sh, sw, dh, dw, ph, pw;
  explicit Conv2d(const SpatialGeometry& g)
      : IH(g.in[0]),
        IW(g.in[1]),
        OH(g.out[0]),
        OW(g.out[1]),
        KH(g.kernel[0]),
        KW(g.kernel[1]),
        sh(g.stride[0]),
        sw(g.stride[1]),
        dh(g.dilation[0]),
        dw(g.dilation[1]),
        ph(g.pad_begin[0]),
        pw(g.pad_begin[1]) {}
};

// Planes [0, nplanes) of x (each IH x IW, one after another) into dst as PH x PW planes
// padded with `pad`: plane row r, column q is x's row r - ph, column q - pw where inside.
void pad_planes(const uint8_t* x, const Conv2d& c, int64_t nplanes, int64_t PH, int64_t PW,
                uint8_t pad, uint8_t* dst) {
  const int64_t c0 = std::max<int64_t>(0, c.pw), c1 = std::min(PW, c.IW + c.pw);
  std::memset(dst, pad, static_cast<size_t>(nplanes * PH * PW));
  if (c1 <= c0) return;
  for (int64_t pl = 0; pl < nplanes; ++pl) {
    for (int64_t r = 0; r < PH; ++r) {
      const int64_t ih = r - c.ph;
      if (ih < 0 || ih >= c.IH) continue;
      std::memcpy(dst + (pl * PH + r) * PW + c0, x + (pl * c.IH + ih) * c.IW + (c0 - c.pw),
                  static_cast<size_t>(c1 - c0));
    }
  }
}

// d[o - a0] = s[o * sw] for o in [a0, a1); s has `avail` readable bytes from s[0].
void copy_strided(const uint8_t* s, int64_t sw, int64_t a0, int64_t a1, int64_t avail, uint8_t* d) {
  if (sw == 1) {
    std::memcpy(d, s + a0, static_cast<size_t>(a1 - a0));
    return;
  }
  int64_t o = a0;
#if defined(__SSE2__)
  if (sw == 2) {
    // The even bytes of 32: the low byte of each 16-bit lane, packed.
    const __m128i lo = _mm_set1_epi16(0x00FF);
    for (; o + 16 <= a1 && 2 * o + 32 <= avail; o += 16) {
      const __m128i v0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 2 * o));
      const __m128i v1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 2 * o + 16));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + (o - a0)),
                       _mm_packus_epi16(_mm_and_si128(v0, lo), _mm_and_si128(v1, lo)));
    }
  }
#else
  (void)avail;
#endif
  for (; o < a1; ++o) d[o - a0] = s[o * sw];
}

// One im2col row of a 2-D convolution: tap (kh, kw) of the channel plane xc at output
// positions [p0, p0 + pc) into dst[0, pc), `pad` where the tap falls in the padding. Index
// math once per output row; the bytes move by memcpy or a vector gather (stride 2).
void tap_row(const uint8_t* xc, const Conv2d& c, int64_t kh, int64_t kw, int64_t p0, int64_t pc,
             uint8_t pad, uint8_t* dst) {
  const int64_t off = kw * c.dw - c.pw;
  int64_t vlo, vhi;
  nn::valid_range(off, c.sw, c.IW, c.OW, vlo, vhi);
  int64_t oh = p0 / c.OW, ow = p0 % c.OW;
  for (int64_t q = 0; q < pc; ++oh, ow = 0) {
    const int64_t run = std::min(pc - q, c.OW - ow), o1 = ow + run;
    const int64_t ih = oh * c.sh + kh * c.dh - c.ph;
    uint8_t* d = dst + q;  // output column ow of this row
    if (ih < 0 || ih >= c.IH) {
      std::memset(d, pad, static_cast<size_t>(run));
    } else {
      const int64_t a0 = std::clamp(vlo, ow, o1), a1 = std::clamp(vhi, a0, o1);
      std::memset(d, pad, static_cast<size_t>(a0 - ow));
      // Row ih from column off: s[o * sw] is the tap of output column o.
      const uint8_t* s = xc + ih * c.IW + off;
      if (a1 > a0) copy_strided(s, c.sw, a0, a1, c.IW - off, d + (a0 - ow));
      std::memset(d + (a1 - ow), pad, static_cast<size_t>(o1 - a1));
    }
    q += run;
  }
}

// The GEMM's B (int8gemm's packed layout) for output positions [p0, p0 + pc) of a 2-D
// convolution, straight from x (Cg channel planes): four im2col rows at a time into a small
// buffer, then interleaved into the panels, so the K x pc im2col matrix is never stored.
void pack_conv2d(const uint8_t* x, const Conv2d& c, int64_t Cg, int64_t p0, int64_t pc, uint8_t pad,
                 bool x_signed, int8gemm::PackedB* out) {
  const int64_t ks = c.KH * c.KW, K = Cg * ks, plane = c.IH * c.IW;
  int8gemm::pack_b_begin(x_signed, K, pc, out);
  const int64_t W = out->N16 * 16;
  thread_local std::vector<uint8_t> rows_buf;
  thread_local std::vector<int16_t> s16;
  rows_buf.resize(static_cast<size_t>(4 * W));
  s16.assign(static_cast<size_t>(W), 0);
  // A whole small plane: the channels copied once into planes padded with `pad`, so that
  // each im2col row is a plain (strided) copy per output row, without the bounds and
  // padding runs per row and tap.
  const int64_t PH = (c.OH - 1) * c.sh + (c.KH - 1) * c.dh + 1;
  const int64_t PW = (c.OW - 1) * c.sw + (c.KW - 1) * c.dw + 1;
  const int64_t PP = PH * PW;
  const bool padded = p0 == 0 && pc == c.OH * c.OW && Cg * PP <= (int64_t(1) << 20);
  thread_local std::vector<uint8_t> xp;
  if (padded) {
    xp.assign(static_cast<size_t>(Cg * PP + 64), pad);
    for (int64_t ci = 0; ci < Cg; ++ci) {
      for (int64_t r = 0; r < PH; ++r) {
        const int64_t ih = r - c.ph;
        if (ih < 0 || ih >= c.IH) continue;
        const int64_t c0 = std::max<int64_t>(0, c.pw), c1 = std::min(PW, c.IW + c.pw);
        if (c1 > c0)
          std::memcpy(xp.data() + ci * PP + r * PW + c0, x + ci * plane + ih * c.IW + (c0 - c.pw),
                      static_cast<size_t>(c1 - c0));
      }
    }
  }
#if defined(__SSE2__)
  if (padded && (c.sw == 1 || c.sw == 2) && c.OW % 16 == 0) {
    // Every panel of 16 output positions lies in one output row: its bytes are read from
    // the padded planes straight into the panel, with no im2col rows in between. Panel by
    // panel, so that the panel's column sums stay in registers (int16 for up to
    // kPackFlushGroups groups, then added to the int32 sums).
    const __m128i fv = _mm_set1_epi8(static_cast<char>(x_signed ? 0x00 : 0x80));
    const __m128i even = _mm_set1_epi16(0x00FF);
    const int64_t K4 = out->K4;
    thread_local std::vector<int64_t> tap_off;
    tap_off.resize(static_cast<size_t>(4 * K4));
    {
      // Row k of the im2col matrix is tap (kh, kw) of channel ci, k = (ci * KH + kh) * KW + kw
      // (counted up, no divisions: this runs once per block).
      int64_t k = 0;
      for (int64_t ci = 0; ci < Cg; ++ci)
        for (int64_t kh = 0; kh < c.KH; ++kh)
          for (int64_t kw = 0; kw < c.KW; ++kw) tap_off[k++] = ci * PP + kh * c.dh * PW + kw * c.dw;
      for (; k < 4 * K4; ++k) tap_off[k] = -1;
    }
    const uint8_t* base = xp.data();
    const bool s2 = c.sw == 2;
    for (int64_t p = 0, oh = 0, ow0 = 0; p < out->N16; ++p) {
      const uint8_t* pb = base + oh * c.sh * PW + ow0 * c.sw;
      __m128i lo = _mm_setzero_si128(), hi = _mm_setzero_si128();
      int32_t* colsum = out->colsum.data() + p * 16;
      int8_t* dst = out->data.data() + p * K4 * 64;
      for (int64_t k4 = 0; k4 < K4; ++k4) {
        __m128i r[4];
        for (int t = 0; t < 4; ++t) {
          const int64_t o = tap_off[4 * k4 + t];
          if (o < 0) {
            r[t] = _mm_setzero_si128();  // the packed zero of either type
            continue;
          }
          __m128i v;
          if (!s2) {
            v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(pb + o));
          } else {
            const __m128i v0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(pb + o));
            const __m128i v1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(pb + o + 16));
            v = _mm_packus_epi16(_mm_and_si128(v0, even), _mm_and_si128(v1, even));
          }
          r[t] = _mm_xor_si128(v, fv);
          lo = _mm_add_epi16(lo, _mm_srai_epi16(_mm_unpacklo_epi8(r[t], r[t]), 8));
          hi = _mm_add_epi16(hi, _mm_srai_epi16(_mm_unpackhi_epi8(r[t], r[t]), 8));
        }
        const __m128i a01l = _mm_unpacklo_epi8(r[0], r[1]), a01h = _mm_unpackhi_epi8(r[0], r[1]);
        const __m128i a23l = _mm_unpacklo_epi8(r[2], r[3]), a23h = _mm_unpackhi_epi8(r[2], r[3]);
        __m128i* o = reinterpret_cast<__m128i*>(dst + k4 * 64);
        _mm_storeu_si128(o + 0, _mm_unpacklo_epi16(a01l, a23l));
        _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(a01l, a23l));
        _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(a01h, a23h));
        _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(a01h, a23h));
        if ((k4 & (int8gemm::kPackFlushGroups - 1)) == int8gemm::kPackFlushGroups - 1 ||
            k4 + 1 == K4) {
          // int16 sums to int32 (sign-extended) into the panel's column sums.
          __m128i* cs = reinterpret_cast<__m128i*>(colsum);
          const __m128i l0 = _mm_srai_epi32(_mm_unpacklo_epi16(lo, lo), 16);
          const __m128i l1 = _mm_srai_epi32(_mm_unpackhi_epi16(lo, lo), 16);
          const __m128i h0 = _mm_srai_epi32(_mm_unpacklo_epi16(hi, hi), 16);
          const __m128i h1 = _mm_srai_epi32(_mm_unpackhi_epi16(hi, hi), 16);
          _mm_storeu_si128(cs + 0, _mm_add_epi32(_mm_loadu_si128(cs + 0), l0));
          _mm_storeu_si128(cs + 1, _mm_add_epi32(_mm_loadu_si128(cs + 1), l1));
          _mm_storeu_si128(cs + 2, _mm_add_epi32(_mm_loadu_si128(cs + 2), h0));
          _mm_storeu_si128(cs + 3, _mm_add_epi32(_mm_loadu_si128(cs + 3), h1));
          lo = hi = _mm_setzero_si128();
        }
      }
      ow0 += 16;
      if (ow0 == c.OW) {
        ow0 = 0;
        ++oh;
      }
    }
    return;
  }
#endif
  for (int64_t k4 = 0; k4 < out->K4; ++k4) {
    const uint8_t* rows[4];
    for (int t = 0; t < 4; ++t) {
      const int64_t k = 4 * k4 + t;
      if (k >= K) {
        rows[t] = nullptr;
        continue;
      }
      uint8_t* r = rows_buf.data() + t * W;
      const int64_t ci = k / ks, tap = k % ks, kh = tap / c.KW, kw = tap % c.KW;
      if (padded) {
        const uint8_t* src = xp.data() + ci * PP + kh * c.dh * PW + kw * c.dw;
        const int64_t avail = Cg * PP + 64 - (src - xp.data());
        for (int64_t oh = 0; oh < c.OH; ++oh) {
          const uint8_t* sr = src + oh * c.sh * PW;
          uint8_t* dr = r + oh * c.OW;
#if defined(__SSE2__)
          if (c.sw == 1 && c.OW >= 16) {
            // 16 bytes at a time, the last 16 overlapping the ones before.
            for (int64_t o = 0;; o += 16) {
              const int64_t at = std::min(o, c.OW - 16);
              _mm_storeu_si128(reinterpret_cast<__m128i*>(dr + at),
                               _mm_loadu_si128(reinterpret_cast<const __m128i*>(sr + at)));
              if (at + 16 >= c.OW) break;
            }
            continue;
          }
#endif
          copy_strided(sr, c.sw, 0, c.OW, avail - oh * c.sh * PW, dr);
        }
      } else {
        tap_row(x + ci * plane, c, kh, kw, p0, pc, pad, r);
      }
      rows[t] = r;
    }
    int8gemm::pack_b_group(rows, k4, out, s16.data());
    if ((k4 & (int8gemm::kPackFlushGroups - 1)) == int8gemm::kPackFlushGroups - 1 ||
        k4 + 1 == out->K4) {
      int8gemm::pack_b_flush(out, s16.data());
    }
  }
}

// One input channel per group (depthwise, with any channel multiplier) in 2-D: for output
// channel planes, y[oh, ow] = sum over taps of (w - zw) * (x - zx), in int32 straight from x
// (a GEMM of one row would be all overhead). Padding contributes nothing. Rows [r0, r1) of
// the plane into y, from row r0.
template <typename T>
void depthwise_rows(const T* x, const Conv2d& c, const int32_t* wt, int32_t zx, int64_t r0,
                    int64_t r1, int32_t* y) {
  const int64_t OW = c.OW;
  for (int64_t oh = r0; oh < r1; ++oh) {
    int32_t* yr = y + (oh - r0) * OW;
    std::fill(yr, yr + OW, 0);
    for (int64_t kh = 0; kh < c.KH; ++kh) {
      const int64_t ih = oh * c.sh + kh * c.dh - c.ph;
      if (ih < 0 || ih >= c.IH) continue;
      const T* xr = x + ih * c.IW;
      for (int64_t kw = 0; kw < c.KW; ++kw) {
        const int32_t wv = wt[kh * c.KW + kw];
        const int64_t off = kw * c.dw - c.pw;
        int64_t vlo, vhi;
        nn::valid_range(off, c.sw, c.IW, OW, vlo, vhi);
        const T* s = xr + off;
        if (c.sw == 1) {
          for (int64_t o = vlo; o < vhi; ++o) yr[o] += wv * (static_cast<int32_t>(s[o]) - zx);
        } else {
          const int64_t sw = c.sw;
          for (int64_t o = vlo; o < vhi; ++o) yr[o] += wv * (static_cast<int32_t>(s[o * sw]) - zx);
        }
      }
    }
  }
}

// w's zero point per output channel; false when it is neither single nor [M].
bool weight_zero_points(const Tensor* zw, int64_t M, std::vector<double>* out) {
  out->assign(static_cast<size_t>(M), 0.0);
  if (!zw) return true;
  const std::vector<double> v = tensor_values(*zw, "w_zero_point");
  if (is_single(*zw)) {
    std::fill(out->begin(), out->end(), v[0]);
    return true;
  }
  if (zw->rank() != 1 || zw->dim(0) != M) return false;
  *out = v;
  return true;
}

// The integer convolution shared by both operators.
class QConvBase : public Kernel {
 protected:
  QConvBase(const KernelInfo& info, size_t w_in) {
    attrs_.load(info, false);
    group_ = info.attr_int("group", 1);
    if (group_ < 1) {
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'group' must be >= 1, got " + std::to_string(group_));
    }
    const Tensor* w = info.has_input(w_in) ? info.constant_input(w_in) : nullptr;
    if (!w || w->rank() < 3 || w->numel() == 0 || !is_int8_type(w->dtype())) return;
    const int64_t M = w->dim(0);
    if (M % group_ != 0) return;  // reported at run time with the input shapes
    packed_ = pack_weights(*w);
    packed_dtype_ = w->dtype();
    packed_shape_ = w->shape();
  }

  // w's bytes packed as the GEMM's A, one matrix per group.
  std::vector<int8gemm::PackedA> pack_weights(const Tensor& w) const {
    const int64_t M = w.dim(0), Kg = w.numel() / M, Mg = M / group_;
    std::vector<int8gemm::PackedA> r(static_cast<size_t>(group_));
    const uint8_t* wd = static_cast<const uint8_t*>(w.raw_data());
    for (int64_t g = 0; g < group_; ++g) {
      int8gemm::pack_a(wd + g * Mg * Kg, w.dtype() == DataType::kInt8, Mg, Kg, Kg, &r[g]);
    }
    return r;
  }

  // Checks x / w / their zero points and computes conv(x - zx, w - zw) wrapped to int32 for
  // the output shape [N, M, out...], which it returns. alloc(shape) returns where the sums go
  // (int32, N * M * P of them) or null: then they are handed over in blocks instead, as
  // epi(n, m0, mc, p0, pc, c, ldc) with c[i * ldc + j] the sum of output channel m0 + i at
  // position p0 + j (i < mc, j < pc), while they are still in cache.
  template <typename Alloc, typename Epi>
  Shape accumulate(const KernelContext& ctx, const Tensor& x, const Tensor* zx, const Tensor& w,
                   const Tensor* zw, Alloc&& alloc, Epi&& epi) const {
    if (!is_int8_type(x.dtype()) || !is_int8_type(w.dtype())) {
      ctx.fail(StatusCode::kInvalidArgument, std::string("inputs 'x' and 'w' must be uint8 or ") +
                                                 "int8, got " + dtype_name(x.dtype()) + " and " +
                                                 dtype_name(w.dtype()));
    }
    if ((zx && zx->dtype() != x.dtype()) || (zw && zw->dtype() != w.dtype())) {
      ctx.fail(StatusCode::kInvalidArgument,
               "zero points must have the type of their input: 'x' " +
                   std::string(dtype_name(x.dtype())) + ", 'x_zero_point' " +
                   (zx ? dtype_name(zx->dtype()) : "(absent)") + ", 'w' " + dtype_name(w.dtype()) +
                   ", 'w_zero_point' " + (zw ? dtype_name(zw->dtype()) : "(absent)"));
    }
    if (x.rank() < 3) {
      ctx.fail(StatusCode::kInvalidArgument,
               "x must have rank >= 3 (N x C x D1 x ...), got " + shape_to_string(x.shape()));
    }
    if (w.rank() != x.rank()) {
      ctx.fail(StatusCode::kInvalidArgument, "x " + shape_to_string(x.shape()) + " and w " +
                                                 shape_to_string(w.shape()) +
                                                 " must have the same rank");
    }
    const int64_t N = x.dim(0), C = x.dim(1), M = w.dim(0);
    if (C != w.dim(1) * group_) {
      ctx.fail(StatusCode::kInvalidArgument,
               "x " + shape_to_string(x.shape()) + " has " + std::to_string(C) +
                   " channels but w " + shape_to_string(w.shape()) + " expects " +
                   std::to_string(w.dim(1)) + " per group x group " + std::to_string(group_));
    }
    if (M % group_ != 0) {
      ctx.fail(StatusCode::kInvalidArgument,
               "w " + shape_to_string(w.shape()) + ": " + std::to_string(M) +
                   " output channels are not divisible by group " + std::to_string(group_));
    }
    if (zx && !is_single(*zx)) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'x_zero_point' must hold a single value (per-tensor), got shape " +
                   shape_to_string(zx->shape()));
    }
    std::vector<double> zwv;
    if (!weight_zero_points(zw, M, &zwv)) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'w_zero_point' must be a single value or 1-D with " + std::to_string(M) +
                   " elements (one per output channel), got shape " + shape_to_string(zw->shape()));
    }
    const std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
    const std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
    const SpatialGeometry g = nn::conv_geometry(ctx, attrs_, in, kernel);
    Shape yshape{N, M};
    yshape.insert(yshape.end(), g.out.begin(), g.out.end());
    int32_t* c = alloc(yshape);
    const int64_t total = shape_size(yshape);
    const int64_t Cg = C / group_, Mg = M / group_;
    int64_t ksize = 1, P = 1, in_size = 1;
    bool pointwise = true;
    for (size_t d = 0; d < g.rank; ++d) {
      ksize *= g.kernel[d];
      P *= g.out[d];
      in_size *= g.in[d];
      if (g.kernel[d] != 1 || g.stride[d] != 1 || g.pad_begin[d] != 0 || g.pad_end[d] != 0)
        pointwise = false;
    }
    const int64_t Kg = Cg * ksize;
    if (total == 0) return yshape;
    if (Kg == 0) {
      if (c) {
        std::fill(c, c + total, 0);
      } else {
        const std::vector<int32_t> zeros(static_cast<size_t>(P), 0);
        for (int64_t n = 0; n < N; ++n)
          epi(n, int64_t(0), M, int64_t(0), P, zeros.data(), int64_t(0));
      }
      return yshape;
    }

    const int32_t zxv = zx ? static_cast<int32_t>(tensor_values(*zx, "x_zero_point")[0]) : 0;
    const uint8_t pad = static_cast<uint8_t>(zxv);  // x's zero point as a byte of its type
    std::vector<int32_t> zwi(zwv.size());
    for (size_t m = 0; m < zwv.size(); ++m) zwi[m] = static_cast<int32_t>(zwv[m]);
    const bool x_signed = x.dtype() == DataType::kInt8;
    const uint8_t* xd = static_cast<const uint8_t*>(x.raw_data());
    ThreadPool* pool = ctx.thread_pool();
    const int nthreads = pool ? pool->num_threads() : 1;

    // One input channel per group: a direct loop, unless each input channel feeds many outputs
    // (a first layer over one grey channel): then the GEMM shares each tap across them.
    if (Cg == 1 && g.rank == 2 && Mg < 8) {
      depthwise(c, epi, x, w, zxv, zwi, g, N, M, Mg, P, pool);
      return yshape;
    }

    const bool use_packed =
        !packed_.empty() && w.dtype() == packed_dtype_ && w.shape() == packed_shape_;
    std::vector<int8gemm::PackedA> local;
    if (!use_packed) local = pack_weights(w);
    const std::vector<int8gemm::PackedA>& wp = use_packed ? packed_ : local;
    const bool fast2d = g.rank == 2 && !pointwise;
    const Conv2d c2(g);
    // A 2-D convolution with stride 1 or 2 along the width: x copied once into planes
    // padded with its zero point (and 64 bytes of slack either side), from which each
    // block's B is gathered by tap offsets, without bounds checks (int8gemm::pack_b_conv).
    // A pointwise convolution's B is the channel planes themselves: one row of P positions,
    // row k at k * in_size.
    std::vector<int64_t> pw_off;
    if (pointwise && int8gemm::has_pack_b_conv()) {
      for (int64_t k = 0; k < Kg; ++k) pw_off.push_back(k * in_size);
    }
    const uint8_t* xpad = nullptr;
    std::vector<int64_t> tap_off;
    int64_t PW = 0, PP = 0;
    if (fast2d && (c2.sw == 1 || c2.sw == 2) && int8gemm::has_pack_b_conv()) {
      const int64_t PH = (c2.OH - 1) * c2.sh + (c2.KH - 1) * c2.dh + 1;
      PW = (c2.OW - 1) * c2.sw + (c2.KW - 1) * c2.dw + 1;
      PP = PH * PW;
      if (N * C * PP <= (int64_t(64) << 20)) {
        std::vector<uint8_t>& buf = pad_scratch();
        buf.resize(static_cast<size_t>(N * C * PP + 128));
        uint8_t* base = buf.data() + 64;
        pad_planes(xd, c2, N * C, PH, PW, pad, base);
        xpad = base;
        // Row k of the im2col matrix is tap (kh, kw) of channel ci, k = (ci * KH + kh) * KW + kw.
        tap_off.reserve(static_cast<size_t>(Kg));
        for (int64_t ci = 0; ci < Cg; ++ci)
          for (int64_t kh = 0; kh < c2.KH; ++kh)
            for (int64_t kw = 0; kw < c2.KW; ++kw)
              tap_off.push_back(ci * PP + kh * c2.dh * PW + kw * c2.dw);
      }
    }

    // Blocks of output positions whose packed B (Kg x chunk bytes) stays in L2 next to the
    // weights while the GEMM passes over it.
    constexpr int64_t kMaxBlockBytes = int64_t(96) << 10;
    int64_t chunk = std::max<int64_t>(16, kMaxBlockBytes / Kg / 16 * 16);
    if (!fast2d && !pointwise) {
      // The generic im2col goes through a buffer: whole rows of the last output axis when
      // they fit.
      const int64_t out_l = g.out[g.rank - 1];
      if (chunk >= out_l) chunk -= chunk % out_l;
    }
    chunk = std::min(chunk, P);
    if (nthreads > 1 && N * group_ * ((P + chunk - 1) / chunk) < nthreads && P >= 64 * nthreads &&
        (fast2d || pointwise)) {
      // Fewer images x groups x blocks than threads: one block of positions per thread, each
      // packing its own B (split inside the product instead, the packing ran on one thread
      // and the 1x1 64 -> 128 ConvInteger at 28 x 28 took longer at 2 threads than at 1).
      const int64_t per = N * group_, nc = (nthreads + per - 1) / per;
      chunk = ((P + nc - 1) / nc + 15) / 16 * 16;
    }
    const int64_t nchunks = (P + chunk - 1) / chunk;
    const int64_t tasks = N * group_ * nchunks;
    const bool par_tasks = nthreads > 1 && (tasks >= 2 * static_cast<int64_t>(nthreads) ||
                                            (tasks >= nthreads && tasks % nthreads == 0));
    auto run_task = [&](int64_t t, ThreadPool* tp) {
      const int64_t n = t / (group_ * nchunks);
      const int64_t gi = (t / nchunks) % group_;
      const int64_t p0 = (t % nchunks) * chunk;
      const int64_t pc = std::min(chunk, P - p0);
      const uint8_t* xg = xd + (n * C + gi * Cg) * in_size;
      int8gemm::PackedB& pb = b_scratch();
      if (pointwise) {
        if (pw_off.empty() ||
            !int8gemm::pack_b_conv(xg, pw_off.data(), Kg, P, 0, 1, p0, pc, x_signed, &pb)) {
          int8gemm::pack_b(xg + p0, x_signed, Kg, pc, in_size, &pb);
        }
      } else if (fast2d) {
        if (!xpad || !int8gemm::pack_b_conv(xpad + (n * C + gi * Cg) * PP, tap_off.data(), Kg,
                                            c2.OW, c2.sh * PW, c2.sw, p0, pc, x_signed, &pb)) {
          pack_conv2d(xg, c2, Cg, p0, pc, pad, x_signed, &pb);
        }
      } else {
        std::vector<uint8_t>& col = col_scratch();
        if (col.size() < static_cast<size_t>(Kg * pc)) col.resize(static_cast<size_t>(Kg * pc));
        im2col_u8(xg, g, Cg, p0, pc, pad, col.data());
        int8gemm::pack_b(col.data(), x_signed, Kg, pc, pc, &pb);
      }
      if (c) {
        int8gemm::gemm(wp[gi], pb, zwi.data() + gi * Mg, 1, &zxv, 0, c + (n * M + gi * Mg) * P + p0,
                       P, tp);
      } else {
        std::vector<int32_t>& acc = acc_scratch();
        acc.resize(static_cast<size_t>(Mg * pc));
        int8gemm::gemm(wp[gi], pb, zwi.data() + gi * Mg, 1, &zxv, 0, acc.data(), pc, tp);
        epi(n, gi * Mg, Mg, p0, pc, acc.data(), pc);
      }
    };
    if (par_tasks) {
      parallel_for(pool, tasks, 2.0 * static_cast<double>(Mg) * Kg * chunk,
                   [&](int64_t s, int64_t e) {
                     for (int64_t t = s; t < e; ++t) run_task(t, nullptr);
                   });
    } else {
      for (int64_t t = 0; t < tasks; ++t) run_task(t, pool);
    }
    return yshape;
  }

  // The Cg == 1 convolution in 2-D (depthwise_rows), output planes in row blocks.
  template <typename Epi>
  static void depthwise(int32_t* c, Epi& epi, const Tensor& x, const Tensor& w, int32_t zx,
                        const std::vector<int32_t>& zw, const SpatialGeometry& g, int64_t N,
                        int64_t M, int64_t Mg, int64_t P, ThreadPool* pool) {
    const Conv2d c2(g);
    const int64_t ks = c2.KH * c2.KW, plane = c2.IH * c2.IW;
    // w - zw as int32, per output channel and tap.
    std::vector<int32_t> wt(static_cast<size_t>(M * ks));
    const bool w_signed = w.dtype() == DataType::kInt8;
    const uint8_t* wb = static_cast<const uint8_t*>(w.raw_data());
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t k = 0; k < ks; ++k) {
        const uint8_t b = wb[m * ks + k];
        const int32_t v = w_signed ? static_cast<int32_t>(static_cast<int8_t>(b)) : b;
        wt[m * ks + k] = v - zw[m];
      }
    }
    // Rows per task: about 4096 outputs.
    const int64_t rb = std::max<int64_t>(1, std::min<int64_t>(c2.OH, 4096 / c2.OW));
    const int64_t nrb = (c2.OH + rb - 1) / rb;
    const bool x_signed = x.dtype() == DataType::kInt8;
    const uint8_t* xd = static_cast<const uint8_t*>(x.raw_data());
    const int64_t C = M / Mg;
    // Width stride 1 or 2: x padded once with its zero point, so that each tap is a plain
    // vector pass over the row (int8gemm::depthwise_padded) and contributes
    // (w - zw) * x - (w - zw) * zx, the second part summed over the taps into the start value.
    const int64_t PH = (c2.OH - 1) * c2.sh + (c2.KH - 1) * c2.dh + 1;
    const int64_t PW = (c2.OW - 1) * c2.sw + (c2.KW - 1) * c2.dw + 1;
    const uint8_t* xpad = nullptr;
    std::vector<int32_t> init;
    if ((c2.sw == 1 || c2.sw == 2) && int8gemm::has_depthwise_padded() &&
        N * C * PH * PW <= (int64_t(64) << 20)) {
      std::vector<uint8_t>& buf = pad_scratch();
      buf.resize(static_cast<size_t>(N * C * PH * PW));
      pad_planes(xd, c2, N * C, PH, PW, static_cast<uint8_t>(zx), buf.data());
      xpad = buf.data();
      init.resize(static_cast<size_t>(M));
      for (int64_t m = 0; m < M; ++m) {
        uint32_t sw = 0;
        for (int64_t k = 0; k < ks; ++k) sw += static_cast<uint32_t>(wt[m * ks + k]);
        init[m] = static_cast<int32_t>(0u - sw * static_cast<uint32_t>(zx));
      }
    }
    parallel_for(pool, N * M * nrb, 2.0 * static_cast<double>(ks * rb * c2.OW),
                 [&](int64_t s, int64_t e) {
                   for (int64_t t = s; t < e; ++t) {
                     const int64_t nm = t / nrb, r0 = (t % nrb) * rb;
                     const int64_t r1 = std::min(c2.OH, r0 + rb);
                     const int64_t n = nm / M, m = nm % M;
                     // Output channel m reads input channel m / Mg.
                     const uint8_t* xc = xd + (n * (M / Mg) + m / Mg) * plane;
                     std::vector<int32_t>& acc = acc_scratch();
                     int32_t* y = c ? c + nm * P + r0 * c2.OW : nullptr;
                     if (!y) {
                       acc.resize(static_cast<size_t>((r1 - r0) * c2.OW));
                       y = acc.data();
                     }
                     if (xpad) {
                       int8gemm::depthwise_padded(xpad + (n * C + m / Mg) * PH * PW, x_signed, PW,
                                                  c2.sh, c2.sw, c2.KH, c2.KW, c2.dh, c2.dw,
                                                  wt.data() + m * ks, init[m], c2.OW, r0, r1, y);
                     } else if (x_signed) {
                       depthwise_rows(reinterpret_cast<const int8_t*>(xc), c2, wt.data() + m * ks,
                                      zx, r0, r1, y);
                     } else {
                       depthwise_rows(xc, c2, wt.data() + m * ks, zx, r0, r1, y);
                     }
                     if (!c) epi(n, m, int64_t(1), r0 * c2.OW, (r1 - r0) * c2.OW, y, int64_t(0));
                   }
                 });
  }

 private:
  SpatialAttrs attrs_;
  int64_t group_ = 1;
  std::vector<int8gemm::PackedA> packed_;  // a constant w, per group
  DataType packed_dtype_ = DataType::kUndefined;
  Shape packed_shape_;
};

class ConvInteger final : public QConvBase {
 public:
  explicit ConvInteger(const KernelInfo& info) : QConvBase(info, 1) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& w = ctx.required_input(1);
    accumulate(
        ctx, x, ctx.input(2), w, ctx.input(3),
        [&](const Shape& s) { return ctx.allocate_output(0, DataType::kInt32, s).data<int32_t>(); },
        [](int64_t, int64_t, int64_t, int64_t, int64_t, const int32_t*, int64_t) {});
  }
};

class ConvIntegerToFloat final : public QConvBase {
 public:
  explicit ConvIntegerToFloat(const KernelInfo& info)
      : QConvBase(info, 1), act_(nn::load_act(info)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& w = ctx.required_input(1);
    const Tensor* bias = ctx.input(4);
    const Tensor& scale = ctx.required_input(5);
    const int64_t M = w.rank() > 0 ? w.dim(0) : 0;
    if (bias && (bias->dtype() != DataType::kInt32 || (bias->numel() != M && bias->numel() != 1))) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'bias' must be int32 with 1 or " + std::to_string(M) +
                   " elements (one per output channel), got " + dtype_name(bias->dtype()) + " " +
                   shape_to_string(bias->shape()));
    }
    if (scale.dtype() != DataType::kFloat || scale.numel() != 1) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'scale' must be a single float, got " +
                                                 std::string(dtype_name(scale.dtype())) + " " +
                                                 shape_to_string(scale.shape()));
    }
    const float sv = *scale.data<float>();
    const int32_t* bd = bias ? bias->data<int32_t>() : nullptr;
    float* yd = nullptr;
    int64_t P = 0;
    accumulate(
        ctx, x, ctx.input(2), w, ctx.input(3),
        [&](const Shape& s) -> int32_t* {
          yd = ctx.allocate_output(0, DataType::kFloat, s).data<float>();
          P = shape_size(s) / std::max<int64_t>(1, s[0] * s[1]);
          return nullptr;
        },
        [&](int64_t n, int64_t m0, int64_t mc, int64_t p0, int64_t pc, const int32_t* acc,
            int64_t ldc) {
          for (int64_t i = 0; i < mc; ++i) {
            const int64_t m = m0 + i;
            const uint32_t b = bd ? static_cast<uint32_t>(bd[bias->numel() == 1 ? 0 : m]) : 0u;
            const int32_t* a = acc + i * ldc;
            float* y = yd + (n * M + m) * P + p0;
            for (int64_t j = 0; j < pc; ++j)
              y[j] = static_cast<float>(static_cast<int32_t>(static_cast<uint32_t>(a[j]) + b)) * sv;
            nn::apply_act_f32(act_, y, pc);
          }
        });
  }

 private:
  ActSpec act_;
};

class QLinearConv final : public QConvBase {
 public:
  explicit QLinearConv(const KernelInfo& info) : QConvBase(info, 3) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& xs = ctx.required_input(1);
    const Tensor* zx = ctx.input(2);
    const Tensor& w = ctx.required_input(3);
    const Tensor& ws = ctx.required_input(4);
    const Tensor* zw = ctx.input(5);
    const Tensor& ys = ctx.required_input(6);
    const Tensor* zy = ctx.input(7);
    const Tensor* bias = ctx.input(8);
    dispatch_float3(ctx, xs.dtype(), "input 'x_scale'", [](auto) {});
    dispatch_float3(ctx, ws.dtype(), "input 'w_scale'", [](auto) {});
    dispatch_float3(ctx, ys.dtype(), "input 'y_scale'", [](auto) {});
    if (zy && !is_int8_type(zy->dtype())) {
      ctx.fail(StatusCode::kInvalidArgument, std::string("input 'y_zero_point' must be uint8 ") +
                                                 "or int8, got " + dtype_name(zy->dtype()));
    }
    if (!is_single(xs) || !is_single(ys) || (zy && !is_single(*zy))) {
      ctx.fail(StatusCode::kInvalidArgument,
               "inputs 'x_scale' " + shape_to_string(xs.shape()) + ", 'y_scale' " +
                   shape_to_string(ys.shape()) + " and 'y_zero_point' " +
                   (zy ? shape_to_string(zy->shape()) : std::string("(absent)")) +
                   " must each hold a single value (per-tensor)");
    }
    const int64_t M = w.rank() > 0 ? w.dim(0) : 0;
    if (!is_single(ws) && (ws.rank() != 1 || ws.dim(0) != M)) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'w_scale' must be a single value or 1-D with " + std::to_string(M) +
                   " elements (one per output channel), got shape " + shape_to_string(ws.shape()));
    }
    if (bias && (bias->dtype() != DataType::kInt32 || bias->rank() != 1 || bias->dim(0) != M)) {
      ctx.fail(StatusCode::kInvalidArgument, std::string("input 'B' must be int32 1-D with ") +
                                                 std::to_string(M) + " elements, got " +
                                                 dtype_name(bias->dtype()) + " " +
                                                 shape_to_string(bias->shape()));
    }
    const DataType qt = zy ? zy->dtype() : x.dtype();
    const float xsv = static_cast<float>(tensor_values(xs, "x_scale")[0]);
    const float ysv = static_cast<float>(tensor_values(ys, "y_scale")[0]);
    const std::vector<double> wsv = tensor_values(ws, "w_scale");
    std::vector<float> mult(static_cast<size_t>(M));
    for (int64_t m = 0; m < M; ++m)
      mult[m] = xsv * static_cast<float>(wsv[wsv.size() == 1 ? 0 : m]) / ysv;
    const int32_t* bd = bias ? bias->data<int32_t>() : nullptr;
    const int32_t yz = zy ? static_cast<int32_t>(tensor_values(*zy, "y_zero_point")[0]) : 0;
    const bool q_signed = qt == DataType::kInt8;
    uint8_t* yd = nullptr;
    int64_t P = 0;
    // The sums of each block are requantized while still in cache.
    accumulate(
        ctx, x, zx, w, zw,
        [&](const Shape& s) -> int32_t* {
          yd = static_cast<uint8_t*>(ctx.allocate_output(0, qt, s).raw_data());
          P = shape_size(s) / std::max<int64_t>(1, s[0] * s[1]);
          return nullptr;
        },
        [&](int64_t n, int64_t m0, int64_t mc, int64_t p0, int64_t pc, const int32_t* acc,
            int64_t ldc) {
          for (int64_t i = 0; i < mc; ++i) {
            const int64_t m = m0 + i;
            int8gemm::requantize(acc + i * ldc, pc, bd ? bd[m] : 0, &mult[m], 0, yz, q_signed,
                                 yd + (n * M + m) * P + p0);
          }
        });
  }
};

}  // namespace

void register_qconv(KernelRegistry& r) {
  r.add("", "QLinearConv", 10, kMaxOpset, make_factory<QLinearConv>());
  r.add("", "ConvInteger", 10, kMaxOpset, make_factory<ConvInteger>());
  r.add("com.ortlite", "ConvIntegerToFloat", 1, kMaxOpset, make_factory<ConvIntegerToFloat>());
}

}  // namespace quant
}  // namespace ortlite
