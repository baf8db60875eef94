// Pieces the convolution kernels share (conv.cc: Conv, FusedConv; conv_expand_depthwise.cc:
// FusedExpandDepthwise; conv_im2col.cc: im2col; conv_depthwise.cc: the depthwise kernels;
// conv_winograd.cc: Winograd F(4x4, 3x3) and F(2x2, 3x3)). Internal to src/providers/cpu/nn.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "compute/activation.h"
#include "compute/fused_gemm.h"
#include "providers/cpu/nn/nn_common.h"
#include "compute/simd.h"
#include "ortlite/thread_pool.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && defined(__linux__)
#define ORTLITE_CONV_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ORTLITE_CONV_CLONES
#endif

namespace ortlite {
namespace nn {

// What is applied to the product before it is stored for good.
template <typename T>
struct Epilogue {
  const T* bias = nullptr;  // [M] or nullptr
  const T* z = nullptr;     // same shape as Y, or nullptr
  ActSpec act;
};

// The activation of a kernel that clamps in registers: Relu and Clip, when no Z is summed
// before them, as a clamp to [lo, hi] (NaN kept); Z and any other activation applied to the
// stored output afterwards (`after`).
template <typename T>
struct RegisterAct {
  bool clamp, after;
  T lo, hi;
};
template <typename T>
RegisterAct<T> register_act(const ActSpec& act, bool has_z) {
  const bool clip = act.kind == ActKind::kClip;
  RegisterAct<T> r;
  r.clamp = !has_z && (act.kind == ActKind::kRelu || clip);
  r.lo = clip ? static_cast<T>(act.p0) : T(0);
  r.hi = clip ? static_cast<T>(act.p1) : std::numeric_limits<T>::infinity();
  r.after = !r.clamp && (has_z || act.kind != ActKind::kNone);
  return r;
}

// y[i] = act(y[i] + b + z[i]) over n elements; float gets AVX-512 / AVX2 clones.
void epilogue(const ActSpec& act, float* y, int64_t n, float b, const float* z);
void epilogue(const ActSpec& act, double* y, int64_t n, double b, const double* z);

// The calling thread's scratch buffer (im2col blocks, Winograd's transformed tiles).
template <typename T>
std::vector<T>& col_scratch() {
  thread_local std::vector<T> buf;
  return buf;
}

// Short runs of im2col (a row of a small image is a few elements) are copied and zeroed
// with fixed-size moves, which compile inline: a library call per run costs more than the
// run itself.
template <typename T>
ORTLITE_NN_INLINE void copy_run(T* d, const T* s, int64_t n) {
  constexpr int64_t V = 32 / sizeof(T);
  for (; n >= V; n -= V, d += V, s += V) std::memcpy(d, s, 32);
  if (n * sizeof(T) & 16) {
    std::memcpy(d, s, 16);
    d += 16 / sizeof(T);
    s += 16 / sizeof(T);
  }
  if (n * sizeof(T) & 8) {
    std::memcpy(d, s, 8);
    d += 8 / sizeof(T);
    s += 8 / sizeof(T);
  }
  if (n * sizeof(T) & 4) std::memcpy(d, s, 4);
}
template <typename T>
ORTLITE_NN_INLINE void zero_run(T* d, int64_t n) {
  constexpr int64_t V = 32 / sizeof(T);
  for (; n >= V; n -= V, d += V) std::memset(d, 0, 32);
  if (n * sizeof(T) & 16) {
    std::memset(d, 0, 16);
    d += 16 / sizeof(T);
  }
  if (n * sizeof(T) & 8) {
    std::memset(d, 0, 8);
    d += 8 / sizeof(T);
  }
  if (n * sizeof(T) & 4) std::memset(d, 0, 4);
}

// The input offset over the leading axes (all but the last) of output position `oi` at
// kernel position `kidx`, in elements of a row; false when that input row is padding.
inline bool leading_offset(const SpatialGeometry& g, const std::vector<int64_t>& oi,
                           const std::vector<int64_t>& kidx, size_t last, int64_t* off) {
  int64_t o = 0;
  bool valid = true;
  for (size_t d = 0; d < last; ++d) {
    const int64_t ii = oi[d] * g.stride[d] - g.pad_begin[d] + kidx[d] * g.dilation[d];
    if (ii < 0 || ii >= g.in[d]) valid = false;
    o = o * g.in[d] + ii;
  }
  *off = o;
  return valid;
}

// ---- conv.cc ------------------------------------------------------------------------------

// N images [C][in...] convolved through conv.cc's algorithms (float): weights w
// [M][C / group][kernel...], the fused GEMM's packing per group where `fused` is given and
// not empty, bias [M] or null, then act. FusedExpandDepthwise's two convolutions one after
// the other.
void conv_f32(const SpatialGeometry& g, const float* x, int64_t N, int64_t C, int64_t M,
              int64_t group, const float* w, const std::vector<fgemm::Packed>* fused,
              const float* bias, const ActSpec& act, float* y, ThreadPool* pool);

// The FusedExpandDepthwise kernel (conv_expand_depthwise.cc), registered by conv.cc.
std::unique_ptr<Kernel> make_expand_depthwise(const KernelInfo& info);

// ---- depthwise (conv_depthwise.cc) -------------------------------------------------------

// Depthwise (one input channel per group, M = C * multiplier), 1-D or 2-D; T float or double.
template <typename T>
void depthwise_2d(const SpatialGeometry& geo, const T* x, const T* w, const Epilogue<T>& ep, T* y,
                  int64_t N, int64_t C, int64_t M, ThreadPool* pool);
// Depthwise for 3 or more spatial axes.
template <typename T>
void depthwise_nd(const SpatialGeometry& g, const T* x, const T* w, const Epilogue<T>& ep, T* y,
                  int64_t N, int64_t C, int64_t M, ThreadPool* pool);

// ---- Winograd F(4x4, 3x3) (conv_winograd.cc) -------------------------------------------

constexpr int64_t kWinoPts = 36;  // points of the 6x6 transformed tile

// Winograd weights: U as 36 matrices [M][C]. Their GEMMs are small (K = C) and the BLAS
// does them faster than the fused GEMM (measured: 0.88 vs 0.98 ms for 64 channels at 56 x 56).
struct WinoWeights {
  std::vector<float> plain;  // [36][M][C]
};

// U for a 3x3 W [M][C][3][3], computed in double; output channel m scaled by scale[m]
// when `scale` is not null (a folded BatchNormalization).
WinoWeights winograd_weights(const float* w, int64_t M, int64_t C, const float* scale);

// A 2-D 3x3 stride-1 convolution of N images [C][H][W] into y [N][M][OH][OW] (geometry
// `geo`), with the epilogue applied per output row.
void winograd_conv(const SpatialGeometry& geo, const float* x, const WinoWeights& U,
                   const Epilogue<float>& ep, float* y, int64_t N, int64_t C, int64_t M,
                   ThreadPool* pool);

// ---- Winograd F(2x2, 3x3) (conv_winograd.cc) -------------------------------------------

constexpr int64_t kWino2Pts = 16;  // points of the 4x4 transformed tile

// Winograd F(2x2, 3x3) weights: U = G g G^T as 16 matrices [M][C], each packed for the
// fused GEMM (C deep, M outputs).
struct Wino2Weights {
  std::vector<fgemm::Packed> u;  // [point]
};

// U for a 3x3 W [M][C][3][3], computed in double; output channel m scaled by scale[m] when
// `scale` is not null.
Wino2Weights winograd2_weights(const float* w, int64_t M, int64_t C, const float* scale);

// A 2-D 3x3 stride-1 convolution of N images [C][H][W] into y [N][M][OH][OW] (geometry
// `geo`) by F(2x2, 3x3). AVX-512F only (cvx::available(), fgemm::uses_avx512()).
void winograd2_conv(const SpatialGeometry& geo, const float* x, const Wino2Weights& U,
                    const Epilogue<float>& ep, float* y, int64_t N, int64_t C, int64_t M,
                    ThreadPool* pool);

}  // namespace nn
}  // namespace ortlite
