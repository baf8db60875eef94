// Conv (opset 1, 11, 22) and FusedConv (domain com.ortlite, written by the graph optimizer):
// N-D convolution (1-D, 2-D, 3-D, ...) with pads / auto_pad, strides, dilations, groups
// (depthwise included) and an optional bias. FusedConv takes a fourth, optional input Z and
// the attributes `activation` / `activation_params` (compute/activation.h):
//   Y = act(Conv(X, W, B) + Z)
// with Z added the way Add broadcasts it.
//
// Algorithms, per image (float and double; float16 / bfloat16 compute in float):
//  - one input channel per group (depthwise): direct. 2-D (and 1-D) float with dilation 1
//    and a column stride of 1 or 2 on an AVX-512F CPU: the AVX-512 kernel of
//    conv_avx512.h, which reads the input in place (masked loads make the padding).
//    Otherwise each channel is copied once into a zero-padded buffer (split into column
//    phases for a column stride > 1), after which every output row is one vectorized pass
//    accumulating all kernel taps in registers; narrow outputs are a single pass over the
//    flattened buffer rows (conv_depthwise.cc).
//  - group 1, 2-D float, constant W with 16 or 32 output channels and up to 32 input
//    channels, kernels 2x2 to 7x7, strides 1 or 2, outputs up to 32x32 (any size up to 4
//    input channels) and AVX-512F: the direct kernel of conv_avx512.h (direct_conv below),
//    unless Winograd takes the image.
//  - 3x3, stride 1, dilation 1, group 1, 2-D, float, constant W with 32 to 128 x 128
//    channels: Winograd F(4x4, 3x3) (conv_winograd.cc). W is transformed at load; per block of tile
//    rows the input is transformed, multiplied by 36 GEMMs (one per transform point) and
//    transformed back: 4x fewer multiplications than im2col + GEMM. From there up to 256 x
//    256 channels, with AVX-512F: Winograd F(2x2, 3x3) (2.25x fewer; U 16/9 of W). Both
//    leave small images to im2col + GEMM (W packed for them on first use).
//  - strides 1, 1-D / 2-D float, constant W with up to 64 output channels per group and
//    AVX-512F, rows wide enough: an implicit im2col (implicit_conv below). The GEMM reads the
//    (zero-padded) input through a table of offsets, one per channel and kernel position.
//  - otherwise a GEMM per image, group and block of output positions: on the input itself
//    for 1x1 / stride 1 / no padding, else on an im2col block (bounded, in L2; with strides 1
//    and "same" row widths one masked copy of the shifted input per channel and tap;
//    conv_im2col.cc). With a constant float W and AVX-512F it is the fused GEMM
//    (fused_gemm.h: W packed at load,
//    bias / Z / activation applied in registers), computed transposed when the block has
//    too few positions to fill its 32-wide tiles; else ortlite's gemm (the BLAS).
// The bias, Z and the activation are applied to each block of the output right after it
// is computed, while it is still in cache. Work is split over images and output blocks
// when there are enough of them for the threads, else the GEMM splits itself.
//
// Also registers com.ortlite FusedExpandDepthwise (a 1x1 convolution and the depthwise one
// reading it, fused by the graph optimizer), whose kernel is conv_expand_depthwise.cc.
#include "compute/vectorize.h"  // first: compile options for the loops below

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <vector>

#include "providers/shared/broadcast_shape.h"
#include "compute/conv_avx512.h"
#include "providers/cpu/nn/conv_internal.h"
#include "compute/activation.h"
#include "compute/fused_gemm.h"
#include "compute/gemm.h"
#include "providers/cpu/nn/nn_common.h"
#include "providers/shared/conv_attrs.h"
#include "compute/simd.h"

namespace ortlite {
namespace nn {

namespace {
ORTLITE_CONV_CLONES void epilogue_f32(const ActSpec& act, float* y, int64_t n, float b,
                                      const float* z) {
  bias_add_act(act, y, n, b, z);
}
}  // namespace

void epilogue(const ActSpec& act, float* y, int64_t n, float b, const float* z) {
  if (b != 0.f || z || act.kind != ActKind::kNone) epilogue_f32(act, y, n, b, z);
}
void epilogue(const ActSpec& act, double* y, int64_t n, double b, const double* z) {
  bias_add_act(act, y, n, b, z);
}

namespace {

// ---- GEMM-based convolution ---------------------------------------------------------------

// The weights a kernel prepared at load, per group where it applies; at most one of
// fused / packed / wino is filled.
template <typename T>
struct ConvWeights {
  const T* w = nullptr;                                      // [M][C/group][k...] (direct use)
  const std::vector<fgemm::Packed>* fused = nullptr;         // float: packed for the fused GEMM
  const std::vector<PackedGemmMatrix<T>>* packed = nullptr;  // packed for gemm_packed_a
  const WinoWeights* wino = nullptr;                         // float 3x3: Winograd U
  const Wino2Weights* wino2 = nullptr;                       // float 3x3: F(2x2, 3x3) U
  const std::vector<float>* direct = nullptr;                // float: packed for cvx::direct_run
};

template <typename T>
struct ConvArgs {
  const SpatialGeometry* geo;
  const T* x;
  ConvWeights<T> wt;
  Epilogue<T> ep;
  T* y;
  int64_t N, C, M, group;
};

// Strides 1, 1-D or 2-D, with the fused GEMM: the im2col is implicit. Each image's group is
// copied once into a zero-padded plane per channel (Hp x Wp; no copy without padding), and
// the output is computed on the padded grid (output (oh, ow) at oh * Wp + ow), where kernel
// position (kh, kw) of channel c reads the plane at a fixed offset c * Hp * Wp + kh * dh * Wp
// + kw * dw from the output position: the GEMM reads B through a table of those offsets
// instead of an im2col block copied per kernel position (at 16 channels, 16 x 16, the copy
// took a third of the layer). The Wp - Wo grid columns past each row are computed and
// dropped, so the path is taken only where they are few.
bool implicit_enabled() {
  static const bool on = !std::getenv("ORTLITE_CONV_NO_IMPLICIT");
  return on;
}
// Output channels per group up to which the copy it saves outweighs the B rows the GEMM
// then reads scattered (256 channels at 28 x 28: 9.5 ms against 8.3 with the im2col).
constexpr int64_t kImplicitMaxM = 64;
bool implicit_conv(const ConvArgs<float>& a, int64_t Cg, int64_t Mg, int64_t ksize,
                   ThreadPool* pool) {
  const SpatialGeometry& g = *a.geo;
  if (!a.wt.fused || g.rank < 1 || g.rank > 2 || Mg > kImplicitMaxM) return false;
  for (size_t d = 0; d < g.rank; ++d)
    if (g.stride[d] != 1) return false;
  const bool two = g.rank == 2;
  const int64_t H = two ? g.in[0] : 1, W = g.in[g.rank - 1];
  const int64_t Ho = two ? g.out[0] : 1, Wo = g.out[g.rank - 1];
  const int64_t KH = two ? g.kernel[0] : 1, KW = g.kernel[g.rank - 1];
  const int64_t dh = two ? g.dilation[0] : 1, dw = g.dilation[g.rank - 1];
  const int64_t pt = two ? g.pad_begin[0] : 0, pb = two ? g.pad_end[0] : 0;
  const int64_t pl = g.pad_begin[g.rank - 1], pr = g.pad_end[g.rank - 1];
  const int64_t Hp = H + pt + pb, Wp = W + pl + pr;
  if (Ho <= 0 || Wo <= 0 || Hp - dh * (KH - 1) != Ho || Wp - dw * (KW - 1) != Wo) return false;
  // At most 1/8 of the grid wasted (3 x 3 "same": 16 x 16 and wider rows).
  if (8 * (Wp - Wo) > Wo) return false;
  const bool padded = pt || pb || pl || pr;
  const int64_t plane = Hp * Wp, in_size = H * W, P = Ho * Wo;
  const int64_t images = a.N * a.group;

  // Under ~2 MFLOP the layer runs on the calling thread, as the fused GEMM does with its
  // products (the demo CNN's 16-channel layers: a hand-off costs more than it saves).
  const double work = 2.0 * static_cast<double>(images * Mg * Cg * ksize * Ho * Wp);
  if (work < 2e6) pool = nullptr;
  // Padded planes of every image's group, built before the products (shared by them).
  const float* src = a.x;
  thread_local std::vector<float> pad_buf;
  if (padded) {
    if (pad_buf.size() < static_cast<size_t>(images * Cg * plane))
      pad_buf.resize(static_cast<size_t>(images * Cg * plane));  // grown only
    float* pd = pad_buf.data();
    const float* x = a.x;
    parallel_for(pool, images * Cg, static_cast<double>(plane), [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        float* d = pd + c * plane;
        const float* xs = x + c * in_size;
        zero_run(d, pt * Wp);
        for (int64_t h = 0; h < H; ++h) {
          float* r = d + (pt + h) * Wp;
          zero_run(r, pl);
          copy_run(r + pl, xs + h * W, W);
          zero_run(r + pl + W, pr);
        }
        zero_run(d + (pt + H) * Wp, pb * Wp);
      }
    });
    src = pd;
  }
  std::vector<int64_t> off(static_cast<size_t>(Cg * ksize));
  for (int64_t c = 0; c < Cg; ++c)
    for (int64_t kh = 0; kh < KH; ++kh)
      for (int64_t kw = 0; kw < KW; ++kw)
        off[static_cast<size_t>((c * KH + kh) * KW + kw)] = c * plane + kh * dh * Wp + kw * dw;
  off.resize(off.size() + fgemm::kOffPad, off.back());

  // Bands of output rows whose grid block (Mg x rows * Wp) stays in L2.
  const int nthreads = pool ? pool->num_threads() : 1;
  int64_t rows = std::clamp<int64_t>((int64_t(1) << 16) / std::max<int64_t>(Mg * Wp, 1), 1, Ho);
  int64_t nbands = (Ho + rows - 1) / rows;
  if (nthreads > 1 && images * nbands < nthreads && Ho >= nthreads) nbands = nthreads;
  if (nthreads > 1 && images * nbands > 1) {
    // A multiple of the threads, so that none idles for the last band.
    const int64_t total = (images * nbands + nthreads - 1) / nthreads * nthreads;
    nbands = std::min(Ho, (total + images - 1) / images);
  }
  rows = (Ho + nbands - 1) / nbands;
  nbands = (Ho + rows - 1) / rows;
  const int64_t tasks = images * nbands;
  const bool par_tasks = nthreads > 1 && (tasks >= 2 * static_cast<int64_t>(nthreads) ||
                                          (tasks >= nthreads && tasks % nthreads == 0));
  const bool direct = Wp == Wo;  // the grid is the output itself
  // Row by row when that fills the 32-wide tiles about as well as the grid does: no copy
  // out (Wo = 32: 16.3 against 18.7 us; 224, 3 channels: 1.18 against 1.81 ms); the grid
  // for narrow rows (Wo = 16: 19 against 32 us) and widths just past a multiple of 32.
  const double row_fill = static_cast<double>(Wo) / (32.0 * static_cast<double>((Wo + 31) / 32));
  const bool rowwise = row_fill + 0.05 >= static_cast<double>(Wo) / static_cast<double>(Wp);
  // Activations the GEMM cannot apply in registers (Sigmoid, SiLU, ...) run once over each
  // channel's rows of a band, after its products: applied by the GEMM, each output row of a
  // row-by-row band was a call of the vector kernel (20 values a call at 20 x 20).
  const bool late_act = (direct || rowwise) && a.ep.act.kind != ActKind::kNone &&
                        a.ep.act.kind != ActKind::kRelu && a.ep.act.kind != ActKind::kClip &&
                        a.ep.act.kind != ActKind::kLeakyRelu;
  auto run_band = [&](int64_t t, ThreadPool* tp) {
    const int64_t img = t / nbands, gi = img % a.group, n = img / a.group;
    const int64_t r0 = (t % nbands) * rows, r1 = std::min(Ho, r0 + rows);
    const float* xg = padded ? src + img * Cg * plane : src + (n * a.C + gi * Cg) * in_size;
    float* yg = a.y + (n * a.M + gi * Mg) * P;
    const float* zg = a.ep.z ? a.ep.z + (n * a.M + gi * Mg) * P : nullptr;
    const int64_t len = (r1 - r0 - 1) * Wp + Wo;
    fgemm::Epilogue fe;
    fe.bias_row = a.ep.bias ? a.ep.bias + gi * Mg : nullptr;
    if (direct || rowwise) {
      for (int64_t r = direct ? r0 : r1 - 1; !direct && r >= r0; --r) {
        // One product per output row (its Wo positions are contiguous in the plane row too).
        fe.z = zg ? zg + r * Wo : nullptr;
        fe.ldz = P;
        fe.act = late_act ? ActSpec{} : a.ep.act;
        fgemm::gemm_w_left_offsets((*a.wt.fused)[gi], xg + r * Wp, off.data(), Wo, yg + r * Wo, P,
                                   fe, tp);
      }
      if (direct) {
        fe.z = zg ? zg + r0 * Wo : nullptr;
        fe.ldz = P;
        fe.act = late_act ? ActSpec{} : a.ep.act;
        fgemm::gemm_w_left_offsets((*a.wt.fused)[gi], xg + r0 * Wp, off.data(), len, yg + r0 * Wo,
                                   P, fe, tp);
      }
      if (late_act)
        for (int64_t m = 0; m < Mg; ++m)
          epilogue(a.ep.act, yg + m * P + r0 * Wo, (r1 - r0) * Wo, 0.f, nullptr);
      return;
    }
    if (!zg) fe.act = a.ep.act;
    thread_local std::vector<float> grid;
    const int64_t ld = rows * Wp;
    if (grid.size() < static_cast<size_t>(Mg * ld)) grid.resize(static_cast<size_t>(Mg * ld));
    float* gd = grid.data();
    fgemm::gemm_w_left_offsets((*a.wt.fused)[gi], xg + r0 * Wp, off.data(), len, gd, ld, fe, tp);
    for (int64_t m = 0; m < Mg; ++m) {
      for (int64_t r = r0; r < r1; ++r)
        copy_run(yg + m * P + r * Wo, gd + m * ld + (r - r0) * Wp, Wo);
      if (zg) epilogue(a.ep.act, yg + m * P + r0 * Wo, (r1 - r0) * Wo, 0.f, zg + m * P + r0 * Wo);
    }
  };
  if (par_tasks) {
    parallel_for(pool, tasks, 2.0 * static_cast<double>(Mg) * Cg * ksize * rows * Wp,
                 [&](int64_t s, int64_t e) {
                   for (int64_t t = s; t < e; ++t) run_band(t, nullptr);
                 });
  } else {
    for (int64_t t = 0; t < tasks; ++t) run_band(t, pool);
  }
  return true;
}

// Small dense convolutions with 16 or 32 output channels: the direct AVX-512 kernel
// (cvx::direct_run), which needs no im2col and keeps every accumulator in a register; the
// weights were packed for it at load (Conv::direct_candidate). Per image: the zero-padded
// copy, then bands of output rows, over the threads when the layer is large enough.
bool direct_enabled() {
  static const bool on = !std::getenv("ORTLITE_CONV_NO_DIRECT");
  return on;
}
// The output plane up to which the kernel was measured ahead of im2col + the fused GEMM,
// and the input channels up to which it was at any size (a network's stem: 3 -> 16
// channels, 3x3 stride 2 at 224x224, 155 against 252 us; 3 -> 32 318 against 334; at 8
// input channels, 160x160, 765 against 709). With strides 2 it is ahead at any size (each
// tap a broadcast from the padded copy, where im2col splits the input into its phases and
// copies every tap: 39% of the layer at 16 channels); 1 / 2 threads, with SiLU, against
// im2col + the fused GEMM: YOLOv8's 16 -> 32 at 160 x 160 0.83 / 0.71 of the time, 24 ->
// 32 at 112 0.81 / 0.69, 32 -> 32 at 80 0.86 / 0.69, 8 -> 16 at 320 0.84; 32 -> 16 at 56
// equal. (Strides 1 at 8 -> 16, 160 x 160: 1.08x slower; 16 -> 32 at 80: 0.95.)
constexpr int64_t kDirectMaxOut = 32, kDirectAnyOutC = 4;
cvx::DirectGeometry direct_geometry(const SpatialGeometry& g, int64_t C, int64_t M) {
  return {C,           M,           g.in[0],     g.in[1],        g.out[0],      g.out[1],
          g.kernel[0], g.kernel[1], g.stride[0], g.pad_begin[0], g.pad_begin[1]};
}
bool direct_geometry_ok(const SpatialGeometry& g, int64_t C) {
  return g.rank == 2 && g.stride[0] == g.stride[1] && g.dilation[0] == 1 && g.dilation[1] == 1 &&
         ((g.out[0] <= kDirectMaxOut && g.out[1] <= kDirectMaxOut) || C <= kDirectAnyOutC ||
          g.stride[0] == 2);
}

// Flops of one image from which its output rows are split over the threads
// (ORTLITE_CONV_BAND_MIN_WORK overrides it, for measurements). One layer alone, 1 against 2
// threads (AMD Zen 4, 2 vCPUs): 16 -> 16 channels 3x3 at 4x4 (0.07 MFLOP) 0.86x, 6x6 (0.17)
// 1.05x, 8x8 (0.29) 1.13x, 16x16 (1.2) 1.53x; 16 -> 32 stride 2 at 8x8 (0.15) 0.95x.
double band_min_work() {
  static const double v = [] {
    const char* e = std::getenv("ORTLITE_CONV_BAND_MIN_WORK");
    return e ? std::atof(e) : 2.5e5;
  }();
  return v;
}

void direct_conv(const ConvArgs<float>& a, ThreadPool* pool) {
  const SpatialGeometry& g = *a.geo;
  const cvx::DirectGeometry dg = direct_geometry(g, a.C, a.M);
  const int64_t P = dg.OH * dg.OW, in_size = dg.H * dg.W;
  const double work = 2.0 * static_cast<double>(a.M * a.C * dg.KH * dg.KW * P);
  // Relu and Clip in registers; Z and the other activations on each image's stored output.
  const RegisterAct<float> ra = register_act<float>(a.ep.act, a.ep.z != nullptr);
  // Stems (up to 4 input channels, 32 or more output channels, rows of 64 outputs or more)
  // with strides 2 run the kernel with the pixels in the lanes, which needs no transposes;
  // 1 / 2 threads, same process, against direct_run: ResNet's 3 -> 64 7x7 at 224 0.94-1.0 /
  // 0.93-0.96 the time, MobileNetV2's 3 -> 32 3x3 0.88-0.94 / 0.91-0.96, 3 -> 32 3x3 at 640
  // 0.99-1.03. With 16 output channels (direct_run's 16-pixel tiles) it was 1.24-1.32x
  // slower, on narrow rows with more input channels 1.06-1.57x (16 -> 32 at 16 x 16).
  const bool s2 =
      dg.C <= kDirectAnyOutC && dg.M >= 32 && dg.OW >= 64 && cvx::direct_s2_supported(dg);
  const int nthreads = pool ? pool->num_threads() : 1;
  // One image, several threads: a band of output rows a thread (the caller takes the top
  // one), each padding the input rows it reads into its thread's own buffer. Padding the
  // image once for all bands was slower, and so were four bands a thread taken in turn:
  // the cache lines the threads shared (one padded copy, rewritten each run; interleaved
  // output rows) moved between this machine's cores at ~0.2 us each.
  if (a.N == 1 && nthreads >= 2 && work >= band_min_work() && dg.OH >= 2) {
    const int64_t bands = std::min<int64_t>(nthreads, dg.OH);
    pool->parallel_for(
        bands,
        [&](int64_t b0, int64_t b1) {
          thread_local std::vector<float> band_pad;
          for (int64_t b = b0; b < b1; ++b) {
            const int64_t r0 = dg.OH * b / bands, r1 = dg.OH * (b + 1) / bands;
            // The band as an image of the input rows it reads, with the image's strides.
            const int64_t top = r0 * dg.s - dg.pt, row0 = std::max<int64_t>(top, 0);
            cvx::DirectGeometry bg = dg;
            bg.OH = r1 - r0;
            bg.pt = row0 - top;
            bg.H = std::max<int64_t>(dg.H - row0, 0);
            bg.x_plane = in_size;
            bg.y_plane = P;
            // Grown only: a resize to a larger size zero-fills the new part, and the
            // convolutions of a network alternate between sizes (1-2 us a run in the demo).
            const auto need =
                static_cast<size_t>(s2 ? cvx::direct_s2_pad_size(bg) : cvx::direct_pad_size(bg));
            if (band_pad.size() < need) band_pad.resize(need);
            const float* xb = a.x + std::min(row0, dg.H) * dg.W;
            float* yb = a.y + r0 * dg.OW;
            if (s2) {
              cvx::direct_s2_pad(bg, xb, band_pad.data());
              cvx::direct_s2_run(bg, band_pad.data(), a.wt.direct->data(), a.ep.bias, ra.clamp,
                                 ra.lo, ra.hi, yb, 0, bg.OH);
            } else {
              cvx::direct_pad(bg, xb, band_pad.data());
              cvx::direct_run(bg, band_pad.data(), a.wt.direct->data(), a.ep.bias, ra.clamp, ra.lo,
                              ra.hi, yb, 0, bg.OH);
            }
            if (ra.after)
              for (int64_t m = 0; m < a.M; ++m)
                epilogue(a.ep.act, yb + m * P, bg.OH * dg.OW, 0.f,
                         a.ep.z ? a.ep.z + m * P + r0 * dg.OW : nullptr);
          }
        },
        1);
    return;
  }
  if (a.N < 2 || nthreads < 2 || work * static_cast<double>(a.N) < 2e6) pool = nullptr;
  parallel_for(pool, a.N, work, [&](int64_t n0, int64_t n1) {
    thread_local std::vector<float> pad_buf;
    const auto need =
        static_cast<size_t>(s2 ? cvx::direct_s2_pad_size(dg) : cvx::direct_pad_size(dg));
    if (pad_buf.size() < need) pad_buf.resize(need);  // grown only, as band_pad
    for (int64_t n = n0; n < n1; ++n) {
      float* y = a.y + n * a.M * P;
      const float* z = a.ep.z ? a.ep.z + n * a.M * P : nullptr;
      if (s2) {
        cvx::direct_s2_pad(dg, a.x + n * a.C * in_size, pad_buf.data());
        cvx::direct_s2_run(dg, pad_buf.data(), a.wt.direct->data(), a.ep.bias, ra.clamp, ra.lo,
                           ra.hi, y, 0, dg.OH);
      } else {
        cvx::direct_pad(dg, a.x + n * a.C * in_size, pad_buf.data());
        cvx::direct_run(dg, pad_buf.data(), a.wt.direct->data(), a.ep.bias, ra.clamp, ra.lo, ra.hi,
                        y, 0, dg.OH);
      }
      if (ra.after)
        for (int64_t m = 0; m < a.M; ++m)
          epilogue(a.ep.act, y + m * P, P, 0.f, z ? z + m * P : nullptr);
    }
  });
}

// Whether a convolution with one input channel per group runs the direct depthwise kernel:
// not when the window is long and many output channels share it (a 1-D STFT-style Conv,
// kernel 512 stride 160 into 257 channels), where im2col + GEMM is 2-3x faster.
bool depthwise_direct(int64_t Mg, int64_t ksize) {
  return Mg == 1 || ksize <= 49;
}

template <typename T>
void conv_compute(const ConvArgs<T>& a, ThreadPool* pool) {
  const SpatialGeometry& g = *a.geo;
  const int64_t Cg = a.C / a.group, Mg = a.M / a.group;
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
  // One input channel per group: the direct depthwise kernel (depthwise_direct).
  if (Cg == 1 && Kg > 0 && depthwise_direct(Mg, ksize)) {
    if (g.rank <= 2) {
      depthwise_2d<T>(g, a.x, a.wt.w, a.ep, a.y, a.N, a.C, a.M, pool);
    } else {
      depthwise_nd<T>(g, a.x, a.wt.w, a.ep, a.y, a.N, a.C, a.M, pool);
    }
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (a.wt.direct && a.group == 1 && direct_geometry_ok(g, a.C)) {
      direct_conv(a, pool);
      return;
    }
    if (a.wt.wino) {
      winograd_conv(g, a.x, *a.wt.wino, a.ep, a.y, a.N, a.C, a.M, pool);
      return;
    }
    if (a.wt.wino2) {
      winograd2_conv(g, a.x, *a.wt.wino2, a.ep, a.y, a.N, a.C, a.M, pool);
      return;
    }
    if (!pointwise && implicit_enabled() && implicit_conv(a, Cg, Mg, ksize, pool)) return;
  }
  // Output positions per GEMM: the block of Y it writes (and, with im2col, its column
  // buffer) stays in L2, so that the epilogue and the next block's im2col find it there.
  constexpr int64_t kMaxOutElems = int64_t(1) << 16, kMaxColElems = int64_t(1) << 17;
  constexpr int64_t kMinSplit = 64;  // positions of a block split for the threads
  int64_t chunk = std::min(kMaxOutElems / std::max<int64_t>(Mg, 1),
                           pointwise ? P : kMaxColElems / std::max<int64_t>(Kg, 1));
  chunk = std::max<int64_t>(chunk, 64);
  if (chunk >= P) {
    chunk = P;
  } else {
    const int64_t out_l = g.out[g.rank - 1];
    chunk = chunk >= out_l ? chunk - chunk % out_l : chunk - chunk % 16;
  }
  const int nthreads = pool ? pool->num_threads() : 1;
  // Products the AMX tiles take (fused_gemm_amx.cc; at least 256 output channels and 128
  // positions, fgemm::amx_takes_w_left) run as one block of up to 2^20 column elements,
  // channel-major: the tiles are 16 positions wide and the split of X costs less in one
  // large block. A column buffer split over the threads is not given to them: its copy, the
  // split of X and the product would each read what the other core wrote (3x3 256 -> 256 at
  // 14 x 14, 2 threads: 1.24x the FMA kernel's time alone, 1.17x inside ResNet-18; one
  // block per thread, each on its own tiles, only matched the FMA kernel).
  bool amx = false;
  if constexpr (std::is_same_v<T, float>) {
    if (a.wt.fused) {
      const int64_t big = std::min<int64_t>(
          P, std::max<int64_t>(chunk, (int64_t(1) << 20) / std::max<int64_t>(Kg, 1)));
      const int64_t big_tasks = a.N * a.group * ((P + big - 1) / big);
      const bool split_tasks = nthreads > 1 && big_tasks >= 2 * static_cast<int64_t>(nthreads);
      if ((pointwise || nthreads == 1 || split_tasks) &&
          fgemm::amx_takes_w_left((*a.wt.fused)[0], big, split_tasks ? nullptr : pool)) {
        amx = true;
        chunk = big;
      }
    }
  }
  if (!amx && nthreads > 1 && !pointwise && a.N * a.group < nthreads && P >= kMinSplit * nthreads) {
    // Fewer images x groups than threads and a single im2col block: one block per thread
    // (each runs its own copy, product and copy-back) rather than one block split three
    // times (ResNet-18's 1x1/2 128->256 at 2 threads: 121 -> 80 us). A pointwise product
    // (no copy) splits better inside the GEMM (MobileNetV2's 1x1 layers: 1.1-1.8x slower
    // split by blocks).
    const int64_t per = a.N * a.group, nc = (nthreads + per - 1) / per;
    chunk = std::min(chunk, (P + nc - 1) / nc);
  }
  if (!amx && nthreads > 1 && chunk < P) {
    // Equal blocks, as many as make the task count a multiple of the threads: blocks cut at
    // row ends left a short last one (14x14: 56, 56, 56, 28 over 2 threads: one thread
    // idle for a quarter of the layer).
    const int64_t per = a.N * a.group, nc = (P + chunk - 1) / chunk;
    const int64_t balanced = (per * nc + nthreads - 1) / nthreads * nthreads;
    const int64_t nc2 = (balanced + per - 1) / per;
    chunk = (P + nc2 - 1) / nc2;
  }
  const int64_t nchunks = (P + chunk - 1) / chunk;
  const int64_t tasks = a.N * a.group * nchunks;
  const bool par_tasks = nthreads > 1 && (tasks >= 2 * static_cast<int64_t>(nthreads) ||
                                          (tasks >= nthreads && tasks % nthreads == 0));

  // With the fused GEMM, a small number of output positions per GEMM would leave most of
  // each 32-wide tile empty: then the product is computed transposed (tiles along the output
  // channels) when that fills the tiles better by enough to pay for transposing its result
  // back: the tiles save about Kg * (1 / fill(positions) - 1 / fill(channels)) multiply-adds
  // per output, the pass back costs as much as about 24 of them, and about 48 where the
  // threads split the positions (their halves of every output row interleave; the 1x1
  // stride-2 64 -> 128 at 28 x 28: 82 us transposed against 54 us at 2 threads).
  auto fill = [](int64_t n) { return static_cast<double>(n) / (32.0 * ((n + 31) / 32)); };
  const double tile_gain = static_cast<double>(Kg) * (1.0 / fill(chunk) - 1.0 / fill(Mg));
  const bool transposed = !amx && tile_gain > (par_tasks && chunk < P ? 48.0 : 24.0);
  // A 1-D convolution of one input channel per group, without padding or dilation, computed
  // transposed: row p of col^T is the input itself from p * stride on, so the GEMM reads
  // the input in place, with a row stride of `stride` (no im2col: at kernel 512 stride 160
  // the copy was 15% of the node).
  const bool rows_in_place = std::is_same_v<T, float> && a.wt.fused && transposed && Cg == 1 &&
                             g.rank == 1 && g.dilation[0] == 1 && g.pad_begin[0] == 0 &&
                             (P - 1) * g.stride[0] + g.kernel[0] <= g.in[0];
  auto run_task = [&](int64_t t, ThreadPool* tp) {
    const int64_t n = t / (a.group * nchunks);
    const int64_t gi = (t / nchunks) % a.group;
    const int64_t p0 = (t % nchunks) * chunk;
    const int64_t pc = std::min(chunk, P - p0);
    const T* xg = a.x + (n * a.C + gi * Cg) * in_size;
    T* yg = a.y + (n * a.M + gi * Mg) * P;
    const T* zg = a.ep.z ? a.ep.z + (n * a.M + gi * Mg) * P : nullptr;
    const T* bmat;
    int64_t ldb;
    if (pointwise) {
      bmat = xg + p0;
      ldb = in_size;
    } else if (rows_in_place) {
      bmat = xg + p0 * g.stride[0];
      ldb = 0;
    } else {
      std::vector<T>& col = col_scratch<T>();
      if (col.size() < static_cast<size_t>(Kg * pc)) col.resize(static_cast<size_t>(Kg * pc));
      if (tp && tp->num_threads() > 1) {
        // Tasks run one after another (too few to split): the copy is split over the
        // channels instead, so it does not leave the other threads idle (col rows are
        // channel-major: rows [c0 * ksize, c1 * ksize) belong to channels [c0, c1)).
        T* cd = col.data();
        parallel_for(tp, Cg, static_cast<double>(ksize * pc), [&](int64_t c0, int64_t c1) {
          im2col<T>(xg + c0 * in_size, g, c1 - c0, p0, pc, cd + c0 * ksize * pc);
        });
      } else {
        im2col<T>(xg, g, Cg, p0, pc, col.data());
      }
      bmat = col.data();
      ldb = pc;
    }
    if constexpr (std::is_same_v<T, float>) {
      if (a.wt.fused) {
        fgemm::Epilogue fe;
        fe.bias_row = a.ep.bias ? a.ep.bias + gi * Mg : nullptr;
        fe.z = zg ? zg + p0 : nullptr;
        fe.ldz = P;
        fe.act = a.ep.act;
        if (transposed) {
          // Few output positions: C^T = col^T W^T, so that the 32-wide tiles run along the
          // output channels; col^T is the column block read column-wise (no copy).
          //
          // Two threads, one deep product (Kg >= 2 Mg: a 3x3 convolution, an inverted
          // residual block's projection): each thread takes half of the input channels and
          // computes a partial C^T, and the pass back adds the two. The column block's copy
          // above, or for a pointwise product the previous kernel (a depthwise convolution, an
          // elementwise op, this pass back), split the channels the same way, the first half
          // on the calling thread as here, so each thread reads what its own core wrote. Split
          // by output channels, each thread read all of it, half from the other core's cache,
          // at about a third of the speed of its own (MobileNetV2's 384 -> 64 at 14 x 14 after
          // a depthwise kernel: 60 us at 2 threads as at 1; ResNet-18's 3x3 512 -> 512 at
          // 7 x 7: 1.65x faster at 2 threads than at 1, 1.75x split by channels).
          const bool halves = !rows_in_place && tp && tp->num_threads() == 2 && Kg >= 128 &&
                              Kg >= 2 * Mg && pc >= 32 && cvx::available();
          thread_local std::vector<float> ct;
          const size_t ct_size = static_cast<size_t>((halves ? 2 : 1) * pc * Mg);
          if (ct.size() < ct_size) ct.resize(ct_size);
          fgemm::Epilogue te;  // in the product, except with halves: then in the pass back
          if (!halves) {
            te.bias_col = fe.bias_row;
            if (!zg) te.act = fe.act;
          }
          // Back to channel-major, 16 positions at a time (the 16 rows of ct stay in L1):
          // channels [m_lo, m_hi).
          const float* ctd = ct.data();
          const float* ct2 = halves ? ctd + pc * Mg : nullptr;  // the second half's C^T
          auto back = [&](int64_t m_lo, int64_t m_hi) {
            for (int64_t q0 = 0; q0 < pc; q0 += 16) {
              const int64_t qn = std::min<int64_t>(16, pc - q0);
              if (cvx::available()) {
                for (int64_t m0 = m_lo; m0 < m_hi; m0 += 16) {
                  const int cn = static_cast<int>(std::min<int64_t>(16, m_hi - m0));
                  float* yb = yg + m0 * P + p0 + q0;
                  if (ct2) {
                    cvx::transpose16_sum(ctd + q0 * Mg + m0, ct2 + q0 * Mg + m0, Mg,
                                         static_cast<int>(qn), cn, yb, P);
                  } else {
                    cvx::transpose16(ctd + q0 * Mg + m0, Mg, static_cast<int>(qn), cn, yb, P);
                  }
                }
                continue;
              }
              for (int64_t m = m_lo; m < m_hi; ++m) {
                float* yr = yg + m * P + p0 + q0;
                const float* src = ctd + q0 * Mg + m;
                for (int64_t q = 0; q < qn; ++q) yr[q] = src[q * Mg];
              }
            }
            if (ct2 || zg)
              for (int64_t m = m_lo; m < m_hi; ++m)
                epilogue(a.ep.act, yg + m * P + p0, pc, ct2 && fe.bias_row ? fe.bias_row[m] : 0.f,
                         zg ? zg + m * P + p0 : nullptr);
          };
          if (halves) {
            float* c = ct.data();
            tp->parallel_for(
                2,
                [&](int64_t s, int64_t e) {
                  for (int64_t h = s; h < e; ++h)
                    fgemm::gemm_w_right_k(bmat, 1, ldb, pc, (*a.wt.fused)[gi], Kg * h / 2,
                                          Kg * (h + 1) / 2, c + h * pc * Mg, Mg, te, false,
                                          nullptr);
                },
                1);
            parallel_for(tp, (Mg + 15) / 16, 48.0 * static_cast<double>(pc),
                         [&](int64_t b0, int64_t b1) { back(b0 * 16, std::min(Mg, b1 * 16)); });
            return;
          }
          // Each run of columns (channels) is copied back by the thread that computed it, as
          // soon as it is done: one parallel region, and ct read from the core that wrote it.
          const std::function<void(int64_t, int64_t)> done = back;
          if (rows_in_place) {
            fgemm::gemm_w_right(bmat, g.stride[0], 1, pc, (*a.wt.fused)[gi], ct.data(), Mg, te, tp,
                                done);
          } else {
            fgemm::gemm_w_right(bmat, 1, ldb, pc, (*a.wt.fused)[gi], ct.data(), Mg, te, tp, done);
          }
        } else {
          fgemm::gemm_w_left((*a.wt.fused)[gi], bmat, ldb, pc, yg + p0, P, fe, tp);
        }
        return;
      }
    }
    if (Kg == 0) {
      for (int64_t m = 0; m < Mg; ++m) std::fill(yg + m * P + p0, yg + m * P + p0 + pc, T(0));
    } else if (a.wt.packed) {
      gemm_packed_a<T>((*a.wt.packed)[gi], false, pc, bmat, ldb, T(1), T(0), yg + p0, P, tp);
    } else {
      gemm(false, false, Mg, pc, Kg, T(1), a.wt.w + gi * Mg * Kg, Kg, bmat, ldb, T(0), yg + p0, P,
           tp);
    }
    for (int64_t m = 0; m < Mg; ++m)
      epilogue(a.ep.act, yg + m * P + p0, pc, a.ep.bias ? a.ep.bias[gi * Mg + m] : T(0),
               zg ? zg + m * P + p0 : nullptr);
  };
  if (par_tasks) {
    parallel_for(pool, tasks, 2.0 * static_cast<double>(Mg) * Kg * chunk,
                 [&](int64_t s, int64_t e) {
                   for (int64_t t = s; t < e; ++t) run_task(t, nullptr);
                 });
  } else {
    for (int64_t t = 0; t < tasks; ++t) run_task(t, pool);
  }
}

// out = act(a + b) with a of shape `as` and b of shape `bs` broadcast to `os` (numpy rules);
// a may be out itself when as == os.
template <typename T>
void broadcast_add_act(const T* a, const Shape& as, const T* b, const Shape& bs, T* out,
                       const Shape& os, const ActSpec& act) {
  const std::vector<int64_t> sa = broadcast_strides(as, os), sb = broadcast_strides(bs, os);
  const int64_t n = shape_size(os);
  const size_t r = os.size();
  std::vector<int64_t> idx(r, 0);
  int64_t ia = 0, ib = 0;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = a[ia] + b[ib];
    for (size_t d = r; d-- > 0;) {
      ia += sa[d];
      ib += sb[d];
      if (++idx[d] < os[d]) break;
      ia -= sa[d] * idx[d];
      ib -= sb[d] * idx[d];
      idx[d] = 0;
    }
  }
  apply_act(act, out, n);
}

class Conv final : public Kernel {
 public:
  Conv(const KernelInfo& info, bool fused) : fused_(fused) {
    attrs_.load(info);
    std::vector<float> scale;
    if (fused_) {
      if (info.num_inputs() > 4)
        info.fail(StatusCode::kInvalidGraph, "FusedConv takes at most 4 inputs (X, W, B, Z), got " +
                                                 std::to_string(info.num_inputs()));
      act_ = load_act(info);
      scale = info.attr_floats("w_scale");
    }
    const Tensor* w = info.has_input(1) ? info.constant_input(1) : nullptr;
    if (!scale.empty() && (!w || w->dtype() != DataType::kFloat || w->rank() < 3 ||
                           w->dim(0) != static_cast<int64_t>(scale.size())))
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'w_scale' (" + std::to_string(scale.size()) +
                    " values) needs a constant float W with as many output channels");
    if (!w) return;
    attrs_.check_constant_w(info, *w);
    const int64_t M = w->dim(0);
    w_dtype_ = w->dtype();
    w_shape_ = w->shape();
    if (w->numel() == 0) return;
    // The weights as float, for everything below; w_scale is applied to what is prepared
    // from them (no scaled copy of W is kept: the model's W stays the only other one).
    std::vector<float> f;
    const float* wf = nullptr;
    const int64_t per = w->numel() / M;
    if (w->dtype() == DataType::kFloat) {
      wf = w->data<float>();
    } else if (w->dtype() == DataType::kFloat16 || w->dtype() == DataType::kBFloat16) {
      f.resize(static_cast<size_t>(w->numel()));
      convert_to_float(w->dtype(), w->raw_data(), f.data(), w->numel());
      wf = f.data();
    }
    const int64_t Mg = M / attrs_.group, Kg = per;
    if (wf && direct_candidate(*w))
      direct_w_ = cvx::direct_pack(wf, M, w->dim(1), w->dim(2), w->dim(3),
                                   scale.empty() ? nullptr : scale.data());
    if (w->dim(1) == 1 && depthwise_direct(Mg, per)) {
      // Direct depthwise reads W itself, or a scaled copy when w_scale changes it.
      if (!scale.empty()) {
        own_w_.assign(wf, wf + w->numel());
        for (int64_t m = 0; m < M; ++m)
          for (int64_t k = 0; k < per; ++k) own_w_[m * per + k] *= scale[m];
      }
      return;
    }
    if (w->dtype() == DataType::kFloat && winograd_candidate(*w)) {
      const int64_t C = w->dim(1);
      wino_ = std::make_unique<WinoWeights>(
          winograd_weights(wf, M, C, scale.empty() ? nullptr : scale.data()));
      wino_scale_ = scale;
      return;
    }
    if (w->dtype() == DataType::kFloat && winograd2_candidate(*w)) {
      wino2_ = std::make_unique<Wino2Weights>(
          winograd2_weights(wf, M, w->dim(1), scale.empty() ? nullptr : scale.data()));
      wino_scale_ = scale;
      return;
    }
    if (wf && fgemm::available()) {
      for (int64_t g = 0; g < attrs_.group; ++g) {
        fused_w_.push_back(fgemm::Packed::pack(wf + g * Mg * Kg, Kg, Mg, Kg, false));
        if (!scale.empty()) fused_w_.back().scale_outputs(scale.data() + g * Mg);
      }
      return;
    }
    if (wf && !scale.empty()) {
      f.assign(wf, wf + w->numel());
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < per; ++k) f[m * per + k] *= scale[m];
      wf = f.data();
    }
    if (wf) {
      for (int64_t g = 0; g < attrs_.group; ++g)
        packed_f32_.push_back(pack_gemm_a<float>(false, Mg, Kg, wf + g * Mg * Kg, Kg));
    } else if (w->dtype() == DataType::kDouble) {
      for (int64_t g = 0; g < attrs_.group; ++g)
        packed_f64_.push_back(
            pack_gemm_a<double>(false, Mg, Kg, w->data<double>() + g * Mg * Kg, Kg));
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = ctx.required_input(0);
    const Tensor& W = ctx.required_input(1);
    const Tensor* B = ctx.input(2);
    const Tensor* Z = fused_ ? ctx.input(3) : nullptr;
    attrs_.check_inputs(ctx, X, W, B);
    if (Z && Z->dtype() != X.dtype())
      ctx.fail(StatusCode::kInvalidArgument, std::string("the summed input Z must have X's ") +
                                                 "element type " + dtype_name(X.dtype()) +
                                                 ", got " + dtype_name(Z->dtype()));
    const int64_t N = X.dim(0), C = X.dim(1), M = W.dim(0);
    const std::vector<int64_t> in(X.shape().begin() + 2, X.shape().end());
    const std::vector<int64_t> kernel(W.shape().begin() + 2, W.shape().end());
    const SpatialGeometry geo = conv_geometry(ctx, attrs_.spatial, in, kernel);
    Shape yshape{N, M};
    yshape.insert(yshape.end(), geo.out.begin(), geo.out.end());
    // Z of Y's shape is added in the epilogue; any other shape the way Add broadcasts,
    // which may make the output larger than the convolution's.
    const bool z_direct = Z && Z->shape() == yshape;
    Shape out_shape = yshape;
    if (Z && !z_direct) {
      try {
        out_shape = broadcast_shapes(yshape, Z->shape(), "FusedConv");
      } catch (const Error&) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "the summed input Z " + shape_to_string(Z->shape()) +
                     " does not broadcast with the convolution output " + shape_to_string(yshape));
      }
    }
    Tensor& Y = ctx.allocate_output(0, X.dtype(), out_shape);
    if (Y.numel() == 0) return;
    // Weights prepared at load are used when W is the constant they came from (always the
    // case: only a constant W is prepared, and a constant cannot be fed).
    const bool mine = w_dtype_ == W.dtype() && w_shape_ == W.shape();
    ThreadPool* pool = ctx.thread_pool();
    switch (X.dtype()) {
      case DataType::kFloat: {
        ConvWeights<float> wt;
        wt.w = mine && !own_w_.empty() ? own_w_.data() : W.data<float>();
        if (mine) set_prepared(wt);
        // Images large enough for Winograd run it rather than the direct kernel (32 -> 32
        // channels at 32x32: 161 against 186 us).
        if (wt.wino && !small_for_winograd(geo)) wt.direct = nullptr;
        if ((wt.wino && !(wt.direct && direct_geometry_ok(geo, C)) && small_for_winograd(geo)) ||
            (wt.wino2 && small_for_winograd2(geo))) {
          // W is the float constant Winograd's weights came from (winograd_candidate,
          // winograd2_candidate).
          std::call_once(small_once_, [&] {
            small_w_.push_back(
                fgemm::Packed::pack(W.data<float>(), W.numel() / M, M, W.numel() / M, false));
            if (!wino_scale_.empty()) small_w_.back().scale_outputs(wino_scale_.data());
          });
          wt.wino = nullptr;
          wt.wino2 = nullptr;
          wt.fused = &small_w_;
        }
        run<float>(X.data<float>(), wt, B ? B->data<float>() : nullptr,
                   Z ? Z->data<float>() : nullptr, Z, z_direct, Y.data<float>(), yshape, out_shape,
                   geo, N, C, M, pool);
        return;
      }
      case DataType::kDouble: {
        ConvWeights<double> wt;
        wt.w = W.data<double>();
        if (mine && !packed_f64_.empty()) wt.packed = &packed_f64_;
        run<double>(X.data<double>(), wt, B ? B->data<double>() : nullptr,
                    Z ? Z->data<double>() : nullptr, Z, z_direct, Y.data<double>(), yshape,
                    out_shape, geo, N, C, M, pool);
        return;
      }
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        std::vector<float> x(static_cast<size_t>(X.numel())), y(static_cast<size_t>(Y.numel()));
        std::vector<float> w, b, z;
        convert_to_float(X.dtype(), X.raw_data(), x.data(), X.numel());
        ConvWeights<float> wt;
        if (mine) set_prepared(wt);
        if (wt.wino && !small_for_winograd(geo)) wt.direct = nullptr;
        if (!wt.fused && !wt.packed && !wt.wino && !wt.wino2) {
          w.resize(static_cast<size_t>(W.numel()));
          convert_to_float(W.dtype(), W.raw_data(), w.data(), W.numel());
          wt.w = w.data();
        }
        if (B) {
          b.resize(static_cast<size_t>(B->numel()));
          convert_to_float(B->dtype(), B->raw_data(), b.data(), B->numel());
        }
        if (Z) {
          z.resize(static_cast<size_t>(Z->numel()));
          convert_to_float(Z->dtype(), Z->raw_data(), z.data(), Z->numel());
        }
        run<float>(x.data(), wt, B ? b.data() : nullptr, Z ? z.data() : nullptr, Z, z_direct,
                   y.data(), yshape, out_shape, geo, N, C, M, pool);
        convert_from_float(Y.dtype(), y.data(), Y.raw_data(), Y.numel());
        return;
      }
      default:
        ctx.fail(StatusCode::kNotImplemented,
                 std::string("Conv: element type ") + dtype_name(X.dtype()) + " is not supported");
    }
  }

 private:
  // 2-D 3x3 float kernels with stride 1, dilation 1, group 1 and enough channels for the
  // transform to pay (at 16 channels im2col + the fused GEMM was faster at 16x16 to
  // 112x112: 27 vs 37 us, 758 vs 797 us; at 32 Winograd wins from 28x28 up: 130 vs 167 us).
  // Small images of such a Conv run without it (small_for_winograd).
  bool winograd_candidate(const Tensor& w) const {
    if (w.rank() != 4 || w.dim(2) != 3 || w.dim(3) != 3 || attrs_.group != 1) return false;
    // U is 4x the size of W: no more than 128 x 128 channels (2.4 MiB). 256 channels at
    // 14 x 14 would still gain (1.5 vs 2.1 ms) but add 21 MiB to ResNet-18's peak RSS.
    if (w.dim(0) < 32 || w.dim(1) < 32 || w.dim(0) * w.dim(1) > kWinoMaxChannels) return false;
    for (int64_t s : attrs_.spatial.strides)
      if (s != 1) return false;
    for (int64_t d : attrs_.spatial.dilations)
      if (d != 1) return false;
    return true;
  }

  // Small images leave Winograd's per-block transforms and its 36 GEMMs too little work
  // each: the implicit im2col / im2col and the fused GEMM (W packed for it on the first such
  // image) run them faster. Single Convs + Relu, 1 thread, one process: 32 -> 32 channels at
  // 16x16 94 against 156 us, at 24x24 180 against 219, even at 28x28; 64 -> 64 at 16x16 318
  // against 440, at 20x20 430 against 377 (Winograd ahead); 128 -> 128 at 14x14 753 against
  // 907, at 24x24 2120 against 1637.
  // Dense 2-D float kernels that cvx::direct_run takes, within the range where it was
  // measured ahead of im2col + the fused GEMM (3x3 + Relu, 1 thread): 16 or 32 output
  // channels, up to 32 input channels, kernels up to 7 x 7, strides 1 or 2, no dilation.
  // With partly empty 16-lane blocks (3, 8, 24, 48 channels) it was 1.2-1.5x slower, and
  // from 48 input channels 1.02-1.48x when first measured; with 16 output channels it is now
  // taken from any number of input channels (m16 below). The output size is checked per run
  // (direct_geometry_ok).
  bool direct_candidate(const Tensor& w) const {
    if (!cvx::available() || w.rank() != 4 || attrs_.group != 1) return false;
    // Strides 2 from up to 32 input channels: also 64 to 128 output channels, 32 a pass
    // (1 / 2 threads with SiLU, against im2col + the fused GEMM: 32 -> 64 at 80 x 80 0.91 /
    // 0.86 of the time, 32 -> 64 at 40 x 40 0.85 / 0.80, 32 -> 128 at 80 x 80 0.94 / 0.87,
    // 16 -> 64 at 64 x 64 0.83 / 0.86; 3x3 stems 3 -> 64 at 224 x 224 0.91 / 0.78, 3 -> 96
    // 0.97 / 0.71; from 64 input channels mixed: ResNet's 64 -> 128 at 56 x 56 0.92 / 1.06,
    // 128 -> 128 at 20 x 20 1.15).
    const auto& st0 = attrs_.spatial.strides;
    const bool s2_wide = !st0.empty() && st0[0] == 2 && w.dim(0) % 32 == 0 && w.dim(0) <= 128 &&
                         w.dim(1) >= 1 && w.dim(1) <= 32;
    // 16 output channels from any number of input channels (im2col's copy was half of a
    // small-output layer; 1 thread against onnxruntime, im2col + the fused GEMM -> direct:
    // 256 -> 16 3x3 stride 2 at 14 x 14 0.61 -> 0.95, at 56 x 56 0.67 -> 1.03; 128 -> 16 at
    // 14 x 14 0.66 -> 1.03; 256 -> 16 3x3 at 14 x 14 0.73 -> 0.93; 512 -> 16 at 7 x 7 0.87 ->
    // 1.09; 96 -> 16 5x5 at 14 x 14 0.99 -> 1.29). With 32 outputs from more than 32 inputs
    // it was mixed (128 -> 32 stride 2 at 14 x 14 0.83 -> 0.88, 64 -> 32 at 14 x 14 0.95 ->
    // 0.86).
    const bool m16 = w.dim(0) == 16 && w.dim(1) >= 1;
    if (!s2_wide && !m16 && (w.dim(0) != 32 || w.dim(1) < 1 || w.dim(1) > 32)) {
      // A stem with a large kernel: 64 or 96 channels from at most kDirectAnyOutC (the 7x7
      // stride-2 3 -> 64 of ResNets at 224: 1.41-1.47 ms against 1.67-1.69 through im2col
      // and the GEMM). With a 3x3 kernel the GEMM's way was ahead (3 -> 64 s2: 365 against
      // 395 us; 3 -> 96 s1 at 160: 1.07 against 1.29 ms).
      if (!(w.dim(0) % 32 == 0 && w.dim(0) <= 96 && w.dim(1) >= 1 && w.dim(1) <= kDirectAnyOutC &&
            w.dim(2) >= 5 && w.dim(3) >= 5))
        return false;
    }
    // 1x1: the GEMM on the input itself is faster (32 -> 16 channels at 28x28: 9.8 against
    // 13.7 us).
    if (w.dim(2) > 7 || w.dim(3) > 7 || w.dim(2) * w.dim(3) == 1) return false;
    const auto& st = attrs_.spatial.strides;
    if (!st.empty() && (st.size() != 2 || st[0] != st[1] || st[0] < 1 || st[0] > 2)) return false;
    for (int64_t d : attrs_.spatial.dilations)
      if (d != 1) return false;
    return true;
  }

  // 3x3 stride-1 float kernels with more channels than winograd_candidate takes, up to
  // kWino2MaxChannels: Winograd F(2x2, 3x3) (U 16/9 the size of W).
  bool winograd2_candidate(const Tensor& w) const {
    if (!cvx::available() || !fgemm::uses_avx512()) return false;
    if (w.rank() != 4 || w.dim(2) != 3 || w.dim(3) != 3 || attrs_.group != 1) return false;
    if (w.dim(0) < 32 || w.dim(1) < 32 || w.dim(0) * w.dim(1) <= kWinoMaxChannels ||
        w.dim(0) * w.dim(1) > kWino2MaxChannels)
      return false;
    for (int64_t s : attrs_.spatial.strides)
      if (s != 1) return false;
    for (int64_t d : attrs_.spatial.dilations)
      if (d != 1) return false;
    return true;
  }

  // Outputs that F(2x2, 3x3) does not pay on, run through im2col + the fused GEMM: fewer
  // than 9 tiles (up to 4 x 4: U, 16/9 the size of W, is read for too few tiles; 256 -> 256
  // channels at 4 x 4: 188 against 119 us), or odd sizes where the tiles' 2 x 2 outputs
  // overshoot the output by 30% or more (5 x 5, 7 x 7: 512 -> 64 at 7 x 7 200 against 159
  // us, 256 -> 128 155 against 137, 256 -> 256 tied; at 6 x 6, 8 x 8 and 9 x 9 it was
  // 0.72-0.95 of im2col's time, 1 thread).
  static bool small_for_winograd2(const SpatialGeometry& geo) {
    const int64_t tiles = ((geo.out[0] + 1) / 2) * ((geo.out[1] + 1) / 2);
    return tiles < 9 || 40 * tiles >= 13 * geo.out[0] * geo.out[1];
  }

  bool small_for_winograd(const SpatialGeometry& geo) const {
    int64_t P = 1;
    for (size_t d = 0; d < geo.rank; ++d) P *= geo.out[d];
    const int64_t channels = std::min(w_shape_[0], w_shape_[1]);
    return fgemm::available() && P < (channels < 64 ? 28 * 28 : 20 * 20);
  }

  void set_prepared(ConvWeights<float>& wt) const {
    if (!direct_w_.empty() && direct_enabled()) wt.direct = &direct_w_;
    if (!fused_w_.empty()) wt.fused = &fused_w_;
    if (!packed_f32_.empty()) wt.packed = &packed_f32_;
    if (wino_) wt.wino = wino_.get();
    if (wino2_) wt.wino2 = wino2_.get();
  }

  template <typename T>
  void run(const T* x, const ConvWeights<T>& wt, const T* bias, const T* z, const Tensor* Z,
           bool z_direct, T* y, const Shape& yshape, const Shape& out_shape,
           const SpatialGeometry& geo, int64_t N, int64_t C, int64_t M, ThreadPool* pool) const {
    const bool into_out = out_shape == yshape;
    std::vector<T> tmp;
    if (!into_out) tmp.resize(static_cast<size_t>(shape_size(yshape)));
    ConvArgs<T> a{&geo, x, wt, {}, into_out ? y : tmp.data(), N, C, M, attrs_.group};
    a.ep.bias = bias;
    a.ep.z = z_direct ? z : nullptr;
    if (!Z || z_direct) a.ep.act = act_;
    conv_compute<T>(a, pool);
    if (Z && !z_direct) broadcast_add_act<T>(a.y, yshape, z, Z->shape(), y, out_shape, act_);
  }

  static constexpr int64_t kWinoMaxChannels = 128 * 128;
  static constexpr int64_t kWino2MaxChannels = 256 * 256;

  bool fused_;
  ConvAttrs attrs_;
  ActSpec act_;
  DataType w_dtype_ = DataType::kUndefined;  // the constant W the members below come from
  Shape w_shape_;
  std::vector<float> own_w_;     // depthwise W scaled by w_scale
  std::vector<float> direct_w_;  // W packed for cvx::direct_run (direct_candidate)
  std::vector<fgemm::Packed> fused_w_;
  std::vector<PackedGemmMatrix<float>> packed_f32_;
  std::vector<PackedGemmMatrix<double>> packed_f64_;
  std::unique_ptr<WinoWeights> wino_;
  std::unique_ptr<Wino2Weights> wino2_;
  std::vector<float> wino_scale_;  // w_scale, for the weights small images are run with
  mutable std::once_flag small_once_;
  mutable std::vector<fgemm::Packed> small_w_;  // W packed for the fused GEMM, on first use
};

template <bool Fused>
KernelFactory conv_factory() {
  return [](const KernelInfo& info) -> std::unique_ptr<Kernel> {
    return std::make_unique<Conv>(info, Fused);
  };
}

}  // namespace

void conv_f32(const SpatialGeometry& g, const float* x, int64_t N, int64_t C, int64_t M,
              int64_t group, const float* w, const std::vector<fgemm::Packed>* fused,
              const float* bias, const ActSpec& act, float* y, ThreadPool* pool) {
  ConvArgs<float> a{&g, x, {}, {}, y, N, C, M, group};
  a.wt.w = w;
  if (fused && !fused->empty()) a.wt.fused = fused;
  a.ep.bias = bias;
  a.ep.act = act;
  conv_compute<float>(a, pool);
}

void register_conv(KernelRegistry& r) {
  // 1 and 11 differ only in documentation of defaults; 22 adds bfloat16.
  r.add("", "Conv", 1, 10, conv_factory<false>());
  r.add("", "Conv", 11, 21, conv_factory<false>());
  r.add("", "Conv", 22, kMaxOpset, conv_factory<false>());
  // Conv (+ Add) (+ activation), written by the graph optimizer.
  r.add("com.ortlite", "FusedConv", 1, kMaxOpset, conv_factory<true>());
  // onnxruntime's FusedConv: the same inputs (X, W, B, Z) and activation attributes.
  r.add("com.microsoft", "FusedConv", 1, kMaxOpset, conv_factory<true>());
  // 1x1 Conv (+ activation) + depthwise Conv (+ activation), written by the graph optimizer.
  r.add("com.ortlite", "FusedExpandDepthwise", 1, kMaxOpset, make_expand_depthwise);
}

}  // namespace nn
}  // namespace ortlite
