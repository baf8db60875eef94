// AVX-512F kernels of Conv (conv_avx512.cc; the direct dense ones in conv_avx512_direct.cc);
// call them only when available().
//
// Direct 2-D float depthwise convolution: reads the input channel in place, with the zero padding
// made by masked loads, so that no padded copy of the channel is written. Column stride 1 or 2,
// dilation 1; any kernel size, row stride and padding. Sixteen output columns per vector; with a
// column stride of 2 each tap's inputs are gathered from two loads by a permutation (even lanes).
#pragma once

#include <cstdint>
#include <vector>

namespace ortlite {
namespace nn {
namespace cvx {

// Bits [lo, hi) of a 32-bit mask, clipped to [0, n) (lane masks of the kernels below).
inline uint32_t lane_bits(int64_t lo, int64_t hi, int64_t n) {
  lo = lo < 0 ? 0 : lo;
  hi = hi > n ? n : hi;
  if (hi <= lo) return 0;
  const uint64_t ones = (uint64_t(1) << (hi - lo)) - 1;
  return static_cast<uint32_t>(ones << lo);
}

struct DwGeometry {
  int64_t H, W, OH, OW;  // input and output plane
  int64_t KH, KW;        // kernel
  int64_t sh, sw;        // strides (sw 1 or 2)
  int64_t pt, pl;        // leading pads
  // The whole plane as one span of OH * OW outputs (16 per vector whatever the row
  // length), for narrow planes; only where dw_flat_ok().
  bool flat;
  int64_t dh = 1, dw = 1;  // dilations: dw16_* only (the other kernels take 1)
};

// Whether a plane can be computed as one span: stride 1 and rows as long as the input's
// (then output position p reads input p + a fixed offset per tap), at most half a vector
// wide (7x7: 49 outputs in 4 vectors instead of 7; at 14 wide the rows, with their 3x3
// kernel unrolled, are faster).
bool dw_flat_ok(const DwGeometry& g);

// Whether this CPU has AVX-512F.
bool available();

// Whether dw_run() takes this geometry (column stride 1 or 2, a kernel row of at most 16
// taps).
bool dw_supported(const DwGeometry& g);

// Load masks of every 16-column output vector, computed once per convolution (they depend
// on the columns only): stride 1, one 16-bit mask per (vector, tap column); stride 2, one
// 32-bit mask per (vector, pair of tap columns); flat, one per (vector of the span, tap).
std::vector<uint32_t> dw_masks(const DwGeometry& g);

// One output channel: yc[oy][ox] = b + sum w[ky][kx] x[oy*sh-pt+ky][ox*sw-pl+kx] over the
// taps inside the input, then clipped to [lo, hi] when `clamp` (NaN kept).
void dw_run(const DwGeometry& g, const uint32_t* masks, const float* xc, const float* w, float b,
            bool clamp, float lo, float hi, float* yc);

// im2col where every kernel position reads the input shifted (strides 1, every axis but the
// first as long as the output's: output position p of a chunk reads input p + shift[kf]):
// col[(c * ksize + kf) * pc + p] = x[c * in_size + shift[kf] + p] where bit p % 16 of
// bits[kf * ceil(pc / 16) + p / 16] is set, else 0; for c < C, kf < ksize, p < pc. The
// input is read with masked loads only where a bit is set.
void im2col_shifted(const float* x, int64_t in_size, int64_t C, int64_t ksize, const int64_t* shift,
                    const uint16_t* bits, int64_t pc, float* col);

// even[o] = s[2 * o], odd[o] = s[2 * o + 1] for o < n (a row of 2n values split into its
// even and odd columns).
void deinterleave2(const float* s, int64_t n, float* even, float* odd);

// Direct dense 2-D convolution for few output channels (group 1, 16 or 32 output
// channels, or a multiple of 32 computed 32 a pass): vectorized over the output channels, one
// 16-channel accumulator per pixel of a tile of an output row, one weight load per kernel tap, each
// input value broadcast from a zero-padded copy of the image (direct_pad). Strides 1 or 2 (equal),
// dilation 1.
struct DirectGeometry {
  int64_t C, M;          // input channels; output channels (16 or a multiple of 32)
  int64_t H, W, OH, OW;  // input and output plane
  int64_t KH, KW;        // kernel
  int64_t s;             // stride (both axes)
  int64_t pt, pl;        // leading pads
  // Channel strides of x and y when they are not the planes above (0: H * W and OH * OW):
  // a band of an image's rows is a geometry of those rows with the image's strides.
  int64_t x_plane = 0, y_plane = 0;
};

// Whether direct_run() takes this geometry (the kernel is built for it; whether it is the
// fastest choice is the caller's).
bool direct_supported(const DirectGeometry& g);

// W [M][C][KH][KW] repacked as [M / 16][C][KH][KW][16], each row scaled by scale[m] when
// scale is not null.
std::vector<float> direct_pack(const float* w, int64_t M, int64_t C, int64_t KH, int64_t KW,
                               const float* scale);

// Floats of the padded copy of one image that direct_pad() writes.
int64_t direct_pad_size(const DirectGeometry& g);

// The zero-padded copy of one image x [C][H][W], every row direct_pad_size's row length.
void direct_pad(const DirectGeometry& g, const float* x, float* xp);

// Output rows [r0, r1) of one image: y[m][oy][ox] = bias[m] + sum over c, ky, kx of
// w[m][c][ky][kx] xp(c, oy * s + ky, ox * s + kx), then clipped to [lo, hi] when `clamp`
// (NaN kept). bias may be null.
void direct_run(const DirectGeometry& g, const float* xp, const float* wp, const float* bias,
                bool clamp, float lo, float hi, float* y, int64_t r0, int64_t r1);

// Strides 1, the output pixels in the lanes: direct_run's products from direct_pad's copy,
// stored to y's rows as they are.
void direct_s1_run(const DirectGeometry& g, const float* xp, const float* wp, const float* bias,
                   bool clamp, float lo, float hi, float* y, int64_t r0, int64_t r1);

// Strides 2, the output pixels in the lanes (direct_s2_run): the same products as
// direct_run, in the same order, without its transposes. Its input is each padded row split
// into even and odd columns (direct_s2_pad, direct_s2_pad_size floats), rows from the top
// pad on; output channels a multiple of 16.
bool direct_s2_supported(const DirectGeometry& g);
int64_t direct_s2_phase_len(const DirectGeometry& g);
int64_t direct_s2_pad_size(const DirectGeometry& g);
void direct_s2_pad(const DirectGeometry& g, const float* x, float* buf);
void direct_s2_run(const DirectGeometry& g, const float* buf, const float* wp, const float* bias,
                   bool clamp, float lo, float hi, float* y, int64_t r0, int64_t r1);

// Depthwise convolution of channels [c0, c1) from an NHWC block: input pixel (iy, ix) of
// channel c at x[(iy * g.W + ix) * ldx + c], tap (ky, kx) of channel c at
// wt[(ky * g.KW + kx) * ldw + c]; y[c * ldy + p] for each output position p = oy * g.OW + ox
// is bias[c] (0 without bias) plus the taps inside the input (strides g.sh / g.sw, leading
// pads g.pt / g.pl, no dilation), clipped to [lo, hi] when `clamp` (NaN kept). 16 channels
// a vector, 16 positions a block transposed into y (g.flat unused).
void dw_nhwc(const DwGeometry& g, const float* x, int64_t ldx, const float* wt, int64_t ldw,
             const float* bias, bool clamp, float lo, float hi, int64_t c0, int64_t c1, float* y,
             int64_t ldy);

// Depthwise convolution of up to 16 channels through a zero-padded channels-last copy
// (dw16_*): kernels of 25 taps and more, and dilated ones, where the planar kernels shuffle
// or mask each tap (or take no dilation). dw16_layout() sizes the copy: Hp rows of Wb
// pixels of 16 floats. dw16_pack() writes copy rows [r0, r1) (row r holds input row r - pt)
// to buf from cn (<= 16) NCHW planes of x (channel stride x_plane); dw16_run() computes
// output rows [oy0, oy1) of the cn planes of y (channel stride y_plane) from a buf packed
// from row oy0 * sh: y = bias + the taps in (ky, kx) order, clipped to [lo, hi] when `clamp`
// (NaN kept). wt16: the taps' weights [KH * KW][16], channel-minor, lanes past cn zero.
// buf and wt16 are 64-byte aligned.
struct Dw16Layout {
  int64_t Hp, Wb;
};
Dw16Layout dw16_layout(const DwGeometry& g);
void dw16_pack(const DwGeometry& g, const Dw16Layout& L, const float* x, int64_t x_plane, int cn,
               int64_t r0, int64_t r1, float* buf);
void dw16_run(const DwGeometry& g, const Dw16Layout& L, const float* buf, const float* wt16,
              const float* bias, bool clamp, float lo, float hi, int cn, int64_t oy0, int64_t oy1,
              float* y, int64_t y_plane);

// dst[c * ldd + r] = src[r * lds + c] for r < rows, c < cols (both at most 16): a 16 x 16
// block transposed in registers.
void transpose16(const float* src, int64_t lds, int rows, int cols, float* dst, int64_t ldd);
// The same for the sum a + b of two blocks of that layout.
void transpose16_sum(const float* a, const float* b, int64_t lds, int rows, int cols, float* dst,
                     int64_t ldd);

// Winograd F(2x2, 3x3) transforms of one channel (stride 1, dilation 1): tile (ty, tx) is the
// 2 x 2 output block at (2 ty, 2 tx), read from the 4 x 4 input patch at (2 ty - pt,
// 2 tx - pl); TW = ceil(OW / 2) tiles a row.
struct Wino2Geometry {
  int64_t H, W, OH, OW;  // input and output plane
  int64_t pt, pl;        // leading pads
  int64_t TW;            // tiles per row
};
// V = B^T d B of the tiles of tile rows [ty0, ty0 + nty) of channel plane xc: point xi
// (row i, column k of the 4 x 4 transform, xi = 4 i + k) of tile (ty, tx) at
// v[xi * vs + (ty - ty0) * TW + tx]. Input outside the plane reads as 0.
void wino2_input(const Wino2Geometry& g, const float* xc, int64_t ty0, int64_t nty, float* v,
                 int64_t vs);
// Y = A^T M A + bias of those tiles for one output channel, M's point xi of tile t at
// mo[xi * ms + t] (t counted from tile row ty0, as above), into the output plane yc (the
// parts of tiles inside it), clipped to [lo, hi] when `clamp` (NaN kept).
void wino2_output(const Wino2Geometry& g, const float* mo, int64_t ms, int64_t ty0, int64_t nty,
                  float bias, bool clamp, float lo, float hi, float* yc);
}  // namespace cvx
}  // namespace nn
}  // namespace ortlite
