// The activation of the ortlite-internal fused operators (domain com.ortlite: FusedConv,
// FusedMatMul, FusedGemm), written by the graph optimizer (src/graph/optimizer.cc) as
// the string attribute `activation` plus the float list `activation_params`:
//
//   ""            none
//   "Relu"
//   "LeakyRelu"   [alpha]
//   "Clip"        [min, max]
//   "Sigmoid"
//   "HardSigmoid" [alpha, beta]
//   "HardSwish"   x max(0, min(1, x / 6 + 0.5))
//   "Tanh"
//   "Gelu"        0.5 x (1 + erf(x / sqrt 2))
//   "HardSwishChain"  (x * min(max(x + 3, 0), 6)) / 6: HardSwish as Paddle exports spell
//                 it (Add 3, Clip 0 6, Mul by x, Div 6), rounded as those four nodes do
//
// Each one gives the same values as the ONNX operator it replaces (NaN handling included).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "compute/fast_kernels.h"
#include "ortlite/kernel.h"

namespace ortlite {
namespace nn {

enum class ActKind : int {
  kNone,
  kRelu,
  kLeakyRelu,
  kClip,
  kSigmoid,
  kHardSigmoid,
  kTanh,
  kGelu,
  kHardSwish,
  kSilu,  // x * sigmoid(x) (Swish with beta 1, YOLO's SiLU): Sigmoid and Mul fused
  kHardSwishChain
};

struct ActSpec {
  ActKind kind = ActKind::kNone;
  float p0 = 0.f, p1 = 0.f;
};

// Reads `activation` / `activation_params` (with `prefix` before both names); an unknown
// name or a wrong parameter count is kInvalidGraph naming the node.
inline ActSpec load_act(const KernelInfo& info, const std::string& prefix = "") {
  ActSpec a;
  const std::string name = info.attr_string((prefix + "activation").c_str(), "");
  const std::vector<float> p = info.attr_floats((prefix + "activation_params").c_str());
  struct Entry {
    const char* name;
    ActKind kind;
    size_t params;
  };
  static const Entry kTable[] = {
      {"", ActKind::kNone, 0},
      {"Relu", ActKind::kRelu, 0},
      {"LeakyRelu", ActKind::kLeakyRelu, 1},
      {"Clip", ActKind::kClip, 2},
      {"Sigmoid", ActKind::kSigmoid, 0},
      {"HardSigmoid", ActKind::kHardSigmoid, 2},
      {"HardSwish", ActKind::kHardSwish, 0},
      {"Tanh", ActKind::kTanh, 0},
      {"Gelu", ActKind::kGelu, 0},
      {"Silu", ActKind::kSilu, 0},
      {"HardSwishChain", ActKind::kHardSwishChain, 0},
  };
  for (const Entry& e : kTable) {
    if (name != e.name) continue;
    if (p.size() != e.params)
      info.fail(StatusCode::kInvalidGraph,
                "activation '" + name + "' takes " + std::to_string(e.params) +
                    " activation_params, got " + std::to_string(p.size()));
    a.kind = e.kind;
    if (e.params > 0) a.p0 = p[0];
    if (e.params > 1) a.p1 = p[1];
    return a;
  }
  info.fail(StatusCode::kInvalidGraph, "unknown activation '" + name + "'");
}

// onnxruntime's com.microsoft FusedGemm form: `activation` with its parameters as
// `activation_alpha` / `activation_beta` (LeakyRelu alpha 0.01, HardSigmoid alpha 0.2 and
// beta 0.5 by default). Activations other than Relu, LeakyRelu, Sigmoid, HardSigmoid and Tanh
// are kNotImplemented.
inline ActSpec load_act_alpha_beta(const KernelInfo& info) {
  ActSpec a;
  const std::string name = info.attr_string("activation", "");
  if (name.empty()) return a;
  if (name == "Relu") {
    a.kind = ActKind::kRelu;
  } else if (name == "Sigmoid") {
    a.kind = ActKind::kSigmoid;
  } else if (name == "Tanh") {
    a.kind = ActKind::kTanh;
  } else if (name == "LeakyRelu") {
    a.kind = ActKind::kLeakyRelu;
    a.p0 = info.attr_float("activation_alpha", 0.01f);
  } else if (name == "HardSigmoid") {
    a.kind = ActKind::kHardSigmoid;
    a.p0 = info.attr_float("activation_alpha", 0.2f);
    a.p1 = info.attr_float("activation_beta", 0.5f);
  } else {
    info.fail(StatusCode::kNotImplemented, "activation '" + name + "' is not supported");
  }
  return a;
}

// y[i] = act(y[i]) over n elements, in place. Always inlined, so that a caller compiled
// for a wider instruction set (a target clone) gets these loops vectorized for it.
template <typename T>
__attribute__((always_inline)) inline void apply_act(const ActSpec& a, T* y, int64_t n) {
  switch (a.kind) {
    case ActKind::kNone:
      return;
    case ActKind::kRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] < T(0) ? T(0) : y[i];  // NaN stays NaN
      return;
    case ActKind::kLeakyRelu: {
      const T al = static_cast<T>(a.p0);
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] >= T(0) ? y[i] : al * y[i];
      return;
    }
    case ActKind::kClip: {
      const T lo = static_cast<T>(a.p0), hi = static_cast<T>(a.p1);
      for (int64_t i = 0; i < n; ++i) {
        const T r = y[i] < lo ? lo : y[i];
        y[i] = r > hi ? hi : r;
      }
      return;
    }
    case ActKind::kHardSigmoid: {
      const T al = static_cast<T>(a.p0), be = static_cast<T>(a.p1);
      for (int64_t i = 0; i < n; ++i) y[i] = std::max(T(0), std::min(T(1), al * y[i] + be));
      return;
    }
    case ActKind::kHardSwish:
      // The HardSwish kernel's formula, so that fusing changes no value.
      for (int64_t i = 0; i < n; ++i) {
        const T v = y[i] * static_cast<T>(1.0 / 6.0) + static_cast<T>(0.5);
        y[i] = y[i] * std::max(T(0), std::min(T(1), v));
      }
      return;
    case ActKind::kHardSwishChain:
      // Each node's operation in turn, each result rounded to T as its node's would be
      // (a NaN stays NaN through the Clip, as the Clip kernel keeps it).
      for (int64_t i = 0; i < n; ++i) {
        T t = y[i] + T(3);
        t = t < T(0) ? T(0) : t;
        t = t > T(6) ? T(6) : t;
        y[i] = (y[i] * t) / T(6);
      }
      return;
    case ActKind::kSigmoid:
      if constexpr (std::is_same_v<T, float>) {
        fast::unary(fast::UnaryFn::kSigmoid, y, y, n);
      } else {
        for (int64_t i = 0; i < n; ++i)
          y[i] = y[i] >= T(0) ? T(1) / (T(1) + std::exp(-y[i]))
                              : std::exp(y[i]) / (T(1) + std::exp(y[i]));
      }
      return;
    case ActKind::kSilu:
      if constexpr (std::is_same_v<T, float>) {
        // The Sigmoid kernel's function, then the product, as the unfused nodes compute it.
        float s[256];
        for (int64_t i0 = 0; i0 < n; i0 += 256) {
          const int64_t m = std::min<int64_t>(256, n - i0);
          fast::unary(fast::UnaryFn::kSigmoid, y + i0, s, m);
          for (int64_t i = 0; i < m; ++i) y[i0 + i] *= s[i];
        }
      } else {
        for (int64_t i = 0; i < n; ++i) {
          const T sg = y[i] >= T(0) ? T(1) / (T(1) + std::exp(-y[i]))
                                    : std::exp(y[i]) / (T(1) + std::exp(y[i]));
          y[i] *= sg;
        }
      }
      return;
    case ActKind::kTanh:
      if constexpr (std::is_same_v<T, float>) {
        fast::unary(fast::UnaryFn::kTanh, y, y, n);
      } else {
        for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(y[i]);
      }
      return;
    case ActKind::kGelu:
      if constexpr (std::is_same_v<T, float>) {
        fast::unary(fast::UnaryFn::kGelu, y, y, n);
      } else {
        for (int64_t i = 0; i < n; ++i)
          y[i] = T(0.5) * y[i] * (T(1) + std::erf(y[i] * T(0.70710678118654752440)));
      }
      return;
  }
}

// apply_act for float with the widest vector instructions the CPU has (activation.cc): the
// one to call from code compiled for the baseline (an SSE2 loop took a 1x1 convolution's
// HardSwishChain epilogue 90 us over 245K values, its division four lanes at a time).
void apply_act_f32(const ActSpec& a, float* y, int64_t n);

// y[i] = act(y[i] + b + z[i]) (z may be null): the epilogue of a fused product, run on a
// block of the output while it is still in cache.
template <typename T>
__attribute__((always_inline)) inline void bias_add_act(const ActSpec& a, T* y, int64_t n, T b,
                                                        const T* z) {
  if (z) {
    for (int64_t i = 0; i < n; ++i) y[i] = (y[i] + b) + z[i];
  } else if (b != T(0)) {
    for (int64_t i = 0; i < n; ++i) y[i] += b;
  }
  apply_act(a, y, n);
}

}  // namespace nn
}  // namespace ortlite
