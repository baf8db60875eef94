// im2col of the GEMM-based convolution (conv.cc): the column block of one group for a run
// of output positions, with the AVX-512 shifted copies (cvx::im2col_shifted) where the
// geometry allows and strided copies with zero fill elsewhere.
#include "compute/vectorize.h"  // first: compile options for the loops below

#include <algorithm>
#include <cstring>
#include <vector>

#include "compute/conv_avx512.h"
#include "compute/simd.h"
#include "providers/cpu/nn/conv_internal.h"
#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {

namespace {

// d[o] = s[2 * o] for o < n: the column stride 2 of im2col, vectorized with permutes.
ORTLITE_CONV_CLONES void gather_s2_f32(float* __restrict d, const float* __restrict s, int64_t n) {
  for (int64_t o = 0; o < n; ++o) d[o] = s[2 * o];
}
template <typename T>
ORTLITE_NN_INLINE void copy_strided(T* d, const T* s, int64_t n, int64_t stride) {
  if constexpr (std::is_same_v<T, float>) {
    if (stride == 2 && n >= 16) {
      gather_s2_f32(d, s, n);
      return;
    }
  }
  for (int64_t o = 0; o < n; ++o) d[o] = s[o * stride];
}

// Sets the bits of the positions [p0, p0 + pc) of an output of sizes out[0..n) whose input,
// at offset off[d] along each axis from the output position, lies inside in[0..n): row by
// row (a row: the positions along the last axis), a row whose leading coordinates are inside
// has the columns [lo, hi) of the last axis valid. (Position by position, this pass cost
// more than the copy for a 3-channel input.) m: ceil(pc / 16) words, or'ed into.
void shifted_mask(size_t n, const int64_t* in, const int64_t* out, const int64_t* off, int64_t p0,
                  int64_t pc, uint16_t* m) {
  const size_t last = n - 1;
  const int64_t out_l = out[last], row0 = p0 / out_l;
  int64_t lo, hi;
  valid_range(off[last], 1, in[last], out_l, lo, hi);
  int64_t o[8];
  int64_t q = row0;
  for (size_t d = last; d-- > 0;) {
    o[d] = q % out[d];
    q /= out[d];
  }
  for (int64_t row = row0; row * out_l < p0 + pc; ++row) {
    bool ok = true;
    for (size_t d = 0; d < last && ok; ++d) ok = o[d] + off[d] >= 0 && o[d] + off[d] < in[d];
    if (ok) {
      int64_t a = std::max(row * out_l + lo, p0) - p0;
      const int64_t b = std::min(row * out_l + hi, p0 + pc) - p0;
      while (a < b) {
        const int64_t w = a / 16, e = std::min(b, (w + 1) * 16);
        m[w] = static_cast<uint16_t>(m[w] | (((1u << (e - a)) - 1u) << (a % 16)));
        a = e;
      }
    }
    for (size_t d = last; d-- > 0;) {
      if (++o[d] < out[d]) break;
      o[d] = 0;
    }
  }
}

// The scratch of cvx::im2col_shifted for one block of pc positions: a shift per kernel
// position and its mask words (ceil(pc / 16) each, zeroed); thread-local, reused.
struct ShiftedScratch {
  int64_t* shift;
  uint16_t* bits;
  int64_t nv;
};
ShiftedScratch shifted_scratch(int64_t ksize, int64_t pc) {
  thread_local std::vector<int64_t> shift;
  thread_local std::vector<uint16_t> bits;
  const int64_t nv = (pc + 15) / 16;
  shift.resize(static_cast<size_t>(ksize));
  bits.assign(static_cast<size_t>(ksize * nv), 0);
  return {shift.data(), bits.data(), nv};
}

// im2col by cvx::im2col_shifted where it applies (AVX-512F; strides 1 and every axis but
// the first as long as the output's, e.g. a 3 x 3 convolution with "same" padding): then
// output position p reads input p + a fixed shift per kernel position, and one masked copy
// per (channel, kernel position) replaces a copy and two border fills per output row (at
// 14 x 14, im2col took 14% of a 256-channel layer row by row).
bool im2col_shifted(const float* x, const SpatialGeometry& g, int64_t Cg, int64_t ksize,
                    int64_t in_size, int64_t p0, int64_t pc, float* col) {
  const size_t n = g.rank;
  if (!cvx::available() || n > 8) return false;
  for (size_t d = 0; d < n; ++d)
    if (g.stride[d] != 1 || (d > 0 && g.in[d] != g.out[d])) return false;
  const ShiftedScratch sc = shifted_scratch(ksize, pc);
  int64_t off[8];
  for (int64_t kf = 0; kf < ksize; ++kf) {
    int64_t s = p0, r = kf, stride = 1;
    for (size_t d = n; d-- > 0;) {
      off[d] = (r % g.kernel[d]) * g.dilation[d] - g.pad_begin[d];
      r /= g.kernel[d];
      s += off[d] * stride;
      stride *= g.in[d];
    }
    sc.shift[kf] = s;
    shifted_mask(n, g.in.data(), g.out.data(), off, p0, pc, sc.bits + kf * sc.nv);
  }
  cvx::im2col_shifted(x, in_size, Cg, ksize, sc.shift, sc.bits, pc, col);
  return true;
}

// im2col of a 2-D convolution with strides 2 (dilation 1, input exactly twice the output
// along both axes: a 3 x 3 / 2 with padding 1, ResNet's 7 x 7 / 2 stem, a 1 x 1 / 2) through
// its four phases: the input rows the block needs are split once into even / odd rows and
// columns (four OH x OW planes per channel, cvx::deinterleave2), after which every kernel
// position reads one phase plane shifted, as in im2col_shifted. Row by row, each kernel
// position gathered every other input value again (the stem: 13% of its time).
bool im2col_phases(const float* x, const SpatialGeometry& g, int64_t Cg, int64_t ksize,
                   int64_t in_size, int64_t p0, int64_t pc, float* col) {
  // Kernels of at least 2 x 2 (every phase read): a 1 x 1 / 2 reads one phase of four, and
  // splitting all of them cost more than its row-by-row copy (1.15-1.2x the time).
  if (!cvx::available() || g.rank != 2 || g.kernel[0] < 2 || g.kernel[1] < 2) return false;
  for (size_t d = 0; d < 2; ++d)
    if (g.stride[d] != 2 || g.dilation[d] != 1 || g.in[d] != 2 * g.out[d]) return false;
  const int64_t OH = g.out[0], OW = g.out[1], W = g.in[1];
  // Kernel position (ky, kx) reads phase (ry, rx) at (oy + dy, ox + dx):
  // 2 * oy + ky - pad = 2 * (oy + dy) + ry.
  auto split = [](int64_t t, int64_t& r, int64_t& dq) {
    r = ((t % 2) + 2) % 2;
    dq = (t - r) / 2;
  };
  int64_t dy_lo = 0, dy_hi = 0;
  for (int64_t ky = 0; ky < g.kernel[0]; ++ky) {
    int64_t r, dy;
    split(ky - g.pad_begin[0], r, dy);
    if (ky == 0 || dy < dy_lo) dy_lo = dy;
    if (ky == 0 || dy > dy_hi) dy_hi = dy;
  }
  const int64_t row0 = p0 / OW, row1 = (p0 + pc - 1) / OW;
  const int64_t pr0 = std::max<int64_t>(0, row0 + dy_lo);
  const int64_t pr1 = std::min<int64_t>(OH, row1 + dy_hi + 1);
  const int64_t nr = std::max<int64_t>(1, pr1 - pr0), plane = nr * OW;
  thread_local std::vector<float> ph;
  if (ph.size() < static_cast<size_t>(Cg * 4 * plane))
    ph.resize(static_cast<size_t>(Cg * 4 * plane));
  for (int64_t c = 0; c < Cg; ++c)
    for (int64_t j = pr0; j < pr1; ++j)
      for (int64_t r = 0; r < 2; ++r) {
        float* dst = ph.data() + c * 4 * plane + (2 * r) * plane + (j - pr0) * OW;
        cvx::deinterleave2(x + c * in_size + (2 * j + r) * W, OW, dst, dst + plane);
      }
  const ShiftedScratch sc = shifted_scratch(ksize, pc);
  const int64_t dims[2] = {OH, OW};
  for (int64_t kf = 0; kf < ksize; ++kf) {
    int64_t ry, dy, rx, dx;
    split(kf / g.kernel[1] - g.pad_begin[0], ry, dy);
    split(kf % g.kernel[1] - g.pad_begin[1], rx, dx);
    sc.shift[kf] = (2 * ry + rx) * plane + p0 + (dy - pr0) * OW + dx;
    const int64_t off[2] = {dy, dx};
    shifted_mask(2, dims, dims, off, p0, pc, sc.bits + kf * sc.nv);
  }
  cvx::im2col_shifted(ph.data(), 4 * plane, Cg, ksize, sc.shift, sc.bits, pc, col);
  return true;
}

}  // namespace

// Expands the input of one group (Cg channels) for output positions [p0, p0 + pc) into
// col[(c * ksize + k) * pc + (p - p0)]. The chunk is walked row by row along the last
// output axis; each kernel tap is a strided copy with zero fill at the borders.
template <typename T>
void im2col(const T* x, const SpatialGeometry& g, int64_t Cg, int64_t p0, int64_t pc, T* col) {
  const size_t n = g.rank;
  const size_t last = n - 1;
  int64_t ksize = 1, in_size = 1;
  for (size_t d = 0; d < n; ++d) {
    ksize *= g.kernel[d];
    in_size *= g.in[d];
  }
  if constexpr (std::is_same_v<T, float>) {
    if (im2col_shifted(x, g, Cg, ksize, in_size, p0, pc, col)) return;
    if (im2col_phases(x, g, Cg, ksize, in_size, p0, pc, col)) return;
  }
  const int64_t in_l = g.in[last], s_l = g.stride[last], out_l = g.out[last];
  const int64_t row0 = p0 / out_l;
  const int64_t nrows = (p0 + pc - 1) / out_l - row0 + 1;
  std::vector<int64_t> kidx(n), oi(n), start(n, 0);
  {
    int64_t r = row0;
    for (size_t d = last; d-- > 0;) {
      start[d] = r % g.out[d];
      r /= g.out[d];
    }
  }
  // Input row offset (over the leading axes) of each output row for the current kernel
  // position, or -1 when that row falls in the padding.
  std::vector<int64_t> base(static_cast<size_t>(nrows));
  for (int64_t kf = 0; kf < ksize; ++kf) {
    {
      int64_t r = kf;
      for (size_t d = n; d-- > 0;) {
        kidx[d] = r % g.kernel[d];
        r /= g.kernel[d];
      }
    }
    oi = start;
    for (int64_t q = 0; q < nrows; ++q) {
      int64_t off;
      base[q] = leading_offset(g, oi, kidx, last, &off) ? off * in_l : -1;
      for (size_t d = last; d-- > 0;) {
        if (++oi[d] < g.out[d]) break;
        oi[d] = 0;
      }
    }
    const int64_t off_l = kidx[last] * g.dilation[last] - g.pad_begin[last];
    int64_t lo, hi;
    valid_range(off_l, s_l, in_l, out_l, lo, hi);
    for (int64_t c = 0; c < Cg; ++c) {
      const T* xc = x + c * in_size;
      T* dcol = col + (c * ksize + kf) * pc;
      for (int64_t q = 0; q < nrows; ++q) {
        // Columns [ob, oe) of output row row0 + q belong to the chunk.
        const int64_t rs = (row0 + q) * out_l;
        const int64_t ob = std::max<int64_t>(0, p0 - rs);
        const int64_t oe = std::min<int64_t>(out_l, p0 + pc - rs);
        T* dst = dcol + rs - p0;  // dst[o] for o in [ob, oe)
        if (base[q] < 0) {
          zero_run(dst + ob, oe - ob);
          continue;
        }
        const T* src = xc + base[q] + off_l;
        const int64_t h = std::clamp(hi, ob, oe), l = std::clamp(lo, ob, h);
        zero_run(dst + ob, l - ob);
        if (s_l == 1) {
          copy_run(dst + l, src + l, h - l);
        } else {
          copy_strided(dst + l, src + l * s_l, h - l, s_l);
        }
        zero_run(dst + h, oe - h);
      }
    }
  }
}

template void im2col<float>(const float*, const SpatialGeometry&, int64_t, int64_t, int64_t,
                            float*);
template void im2col<double>(const double*, const SpatialGeometry&, int64_t, int64_t, int64_t,
                             double*);

}  // namespace nn
}  // namespace ortlite
