// RNN, GRU and LSTM (opsets 7, 14, 22): one recurrent kernel parameterized by the cell type.
//
// Per direction, X * W^T is computed for every time step in one GEMM; each step then runs
// H_{t-1} * R^T as a GEMM over the batch and the gate arithmetic row by row. Constant W and R
// are packed at load. float and double compute in their own type; float16 and bfloat16
// compute in float.
//
// Where the ONNX text leaves room, onnxruntime's GRU and LSTM CPU kernels decide:
//  - activation_alpha / activation_beta are consumed in the order of the activations that
//    take them; a missing value defaults to 0.01 (LeakyRelu alpha), 0.2 / 0.5 (HardSigmoid),
//    1.0 (Elu alpha), else 0. Activation names are matched case-insensitively. (onnxruntime's
//    RNN kernel instead reads alpha / beta at the direction's index, with 0 when absent.)
//  - clip bounds every gate input (after the biases and peepholes), never the cell state.
//  - LSTM input_forget: f = 1 - i.
//  - sequence_lens: steps at or past a row's length are zero in Y; Y_h / Y_c hold the state
//    after the row's last step, and zeros for a length of 0 (initial_h is not passed through).
//
// com.microsoft DynamicQuantizeLSTM (what onnxruntime's quantize_dynamic writes for LSTM) is
// the same LSTM with 8-bit W and R, given transposed ([num_directions, input_size, 4 *
// hidden_size] and [num_directions, hidden_size, 4 * hidden_size]) with a scale and zero
// point per direction or per column. As onnxruntime does, each product's float operand (all
// of X at once, H_{t-1} per step) is quantized to uint8 with DynamicQuantizeLinear's scale
// and zero point, multiplied on the 8-bit integer GEMM and scaled back by
// x_scale * w_scale[column]; the gates are those of LSTM.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "compute/fast_kernels.h"
#include "compute/fused_gemm.h"
#include "compute/gemm.h"
#include "compute/int8_gemm.h"
#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {
namespace {

enum class CellType { kRnn, kGru, kLstm };

const char* cell_name(CellType c) {
  switch (c) {
    case CellType::kRnn:
      return "RNN";
    case CellType::kGru:
      return "GRU";
    default:
      return "LSTM";
  }
}

// ---- activations ------------------------------------------------------------------------

enum class ActKind {
  kRelu,
  kTanh,
  kSigmoid,
  kAffine,
  kLeakyRelu,
  kThresholdedRelu,
  kScaledTanh,
  kHardSigmoid,
  kElu,
  kSoftsign,
  kSoftplus
};

struct ActSpec {
  const char* name;  // lower case
  ActKind kind;
  bool takes_alpha, takes_beta;
  float default_alpha, default_beta;
};

constexpr ActSpec kActSpecs[] = {
    {"relu", ActKind::kRelu, false, false, 0.f, 0.f},
    {"tanh", ActKind::kTanh, false, false, 0.f, 0.f},
    {"sigmoid", ActKind::kSigmoid, false, false, 0.f, 0.f},
    {"affine", ActKind::kAffine, true, true, 0.f, 0.f},
    {"leakyrelu", ActKind::kLeakyRelu, true, false, 0.01f, 0.f},
    {"thresholdedrelu", ActKind::kThresholdedRelu, true, false, 0.f, 0.f},
    {"scaledtanh", ActKind::kScaledTanh, true, true, 0.f, 0.f},
    {"hardsigmoid", ActKind::kHardSigmoid, true, true, 0.2f, 0.5f},
    {"elu", ActKind::kElu, true, false, 1.f, 0.f},
    {"softsign", ActKind::kSoftsign, false, false, 0.f, 0.f},
    {"softplus", ActKind::kSoftplus, false, false, 0.f, 0.f},
};

struct Activation {
  ActKind kind = ActKind::kTanh;
  float alpha = 0.f, beta = 0.f;
};

template <typename T>
T sigmoid(T x) {
  // Two branches so that exp never overflows.
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

// x[0:n] = act(clip(x[0:n])). clip <= 0 means no clipping.
template <typename T>
void activate(const Activation& a, T clip, T* x, int64_t n) {
  if (clip > T(0)) {
    for (int64_t i = 0; i < n; ++i) x[i] = std::min(std::max(x[i], -clip), clip);
  }
  const T alpha = static_cast<T>(a.alpha), beta = static_cast<T>(a.beta);
  switch (a.kind) {
    case ActKind::kRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > T(0) ? x[i] : T(0);
      return;
    case ActKind::kTanh:
      if constexpr (std::is_same_v<T, float>) {
        fast::unary(fast::UnaryFn::kTanh, x, x, n);  // vectorized: the steps' hot spot
      } else {
        for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i]);
      }
      return;
    case ActKind::kSigmoid:
      if constexpr (std::is_same_v<T, float>) {
        fast::unary(fast::UnaryFn::kSigmoid, x, x, n);
      } else {
        for (int64_t i = 0; i < n; ++i) x[i] = sigmoid(x[i]);
      }
      return;
    case ActKind::kAffine:
      for (int64_t i = 0; i < n; ++i) x[i] = alpha * x[i] + beta;
      return;
    case ActKind::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] >= T(0) ? x[i] : alpha * x[i];
      return;
    case ActKind::kThresholdedRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > alpha ? x[i] : T(0);
      return;
    case ActKind::kScaledTanh:
      for (int64_t i = 0; i < n; ++i) x[i] = beta * x[i];
      activate(Activation{ActKind::kTanh, 0.f, 0.f}, T(0), x, n);
      for (int64_t i = 0; i < n; ++i) x[i] = alpha * x[i];
      return;
    case ActKind::kHardSigmoid:
      for (int64_t i = 0; i < n; ++i) x[i] = std::min(T(1), std::max(T(0), alpha * x[i] + beta));
      return;
    case ActKind::kElu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] >= T(0) ? x[i] : alpha * std::expm1(x[i]);
      return;
    case ActKind::kSoftsign:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (T(1) + std::fabs(x[i]));
      return;
    case ActKind::kSoftplus:
      // log(1 + e^x) without overflow for large x.
      for (int64_t i = 0; i < n; ++i)
        x[i] = x[i] > T(0) ? x[i] + std::log1p(std::exp(-x[i])) : std::log1p(std::exp(x[i]));
      return;
  }
}

// ---- weights ------------------------------------------------------------------------------

// DynamicQuantizeLSTM's W or R of one direction: k x n bytes (the transposed layout)
// packed for the 8-bit GEMM, with each column's zero point and scale.
struct QuantWeights {
  int8gemm::PackedB packed;
  std::vector<int32_t> zero_point;
  std::vector<float> scale;
};

// C[M, n] (row stride ldc) = A[M, k] * w with A (rows contiguous) quantized to uint8 as
// DynamicQuantizeLinear does, and the int32 products scaled by a_scale * w.scale[j].
void mul_quant(int64_t M, const float* A, const QuantWeights& w, float* C, int64_t ldc,
               ThreadPool* pool) {
  const int64_t K = w.packed.K, N = w.packed.N;
  float mn = 0.0f, mx = 0.0f;
  int8gemm::min_max(A, M * K, &mn, &mx);
  const float scale = mx == mn ? 1.0f : (mx - mn) / 255.0f;
  const float initial_zp = 0.0f - mn / scale;
  const float zp = static_cast<float>(
      std::nearbyint(std::isnan(initial_zp) ? 255.0f : std::clamp(initial_zp, 0.0f, 255.0f)));
  std::vector<uint8_t> q(static_cast<size_t>(M * K));
  int8gemm::quantize_u8(A, M * K, scale, zp, q.data());
  int8gemm::PackedA pa;
  int8gemm::pack_a(q.data(), false, M, K, K, &pa);
  std::vector<int32_t> acc(static_cast<size_t>(M * N));
  const int32_t za = static_cast<int32_t>(zp);
  int8gemm::gemm(pa, w.packed, &za, 0, w.zero_point.data(), 1, acc.data(), N, pool);
  std::vector<float> mult(static_cast<size_t>(N));
  for (int64_t j = 0; j < N; ++j) mult[j] = scale * w.scale[j];
  for (int64_t i = 0; i < M; ++i) {
    const int32_t* a = acc.data() + i * N;
    float* c = C + i * ldc;
    for (int64_t j = 0; j < N; ++j) c[j] = static_cast<float>(a[j]) * mult[j];
  }
}

// n consecutive rows (each k long) of one direction of W or R, packed or raw, or its 8-bit
// form (DynamicQuantizeLSTM).
template <typename T>
struct WeightRef {
  const PackedGemmMatrix<T>* packed = nullptr;
  const T* raw = nullptr;  // the first of the n rows, row-major
  int64_t n = 0, k = 0;
  const QuantWeights* quant = nullptr;
  const fgemm::Packed* fused = nullptr;  // float R for the fused GEMM (AVX-512F), or null
};

// C[M, n] (row stride ldc) = A[M, k] * w^T (rows of A contiguous for a quantized w).
template <typename T>
void mul_wt(int64_t M, const T* A, int64_t lda, const WeightRef<T>& w, T* C, int64_t ldc,
            ThreadPool* pool) {
  if constexpr (std::is_same_v<T, float>) {
    if (w.quant) return mul_quant(M, A, *w.quant, C, ldc, pool);
    // Several rows a step (a batch of sequences): the fused GEMM, whose rows share each
    // panel of R as it streams (gemm.h's packed product of 4 x 384 @ 384 x 1536 read R at
    // 17 GB/s). Bidirectional LSTMs of 32 steps, 1 / 2 threads, against gemm.h's product:
    // H 384 x 4 0.66 / 0.65 of the time, H 256 x 8 0.81 / 0.80, H 512 x 2 0.81 / 0.79, H 128 x
    // 16 0.82 / 0.85, H 64 x 4 (50 steps) 0.64 / 0.66; GRU H 256 x 8 0.79. One row keeps
    // gemm.h's GEMV.
    if (w.fused && M > 1) {
      fgemm::gemm_w_right(A, lda, 1, M, *w.fused, C, ldc, fgemm::Epilogue{}, pool);
      return;
    }
  }
  if (w.packed) {
    gemm_packed_b<T>(false, M, A, lda, *w.packed, T(1), T(0), C, ldc, pool);
  } else {
    gemm(false, true, M, w.n, w.k, T(1), A, lda, w.raw, w.k, T(0), C, ldc, pool);
  }
}

// Weights packed at load, per direction. r2 is used by GRU without linear_before_reset
// only: r1 then holds the z and r rows of R, r2 the h rows.
template <typename T>
struct PackedSet {
  std::vector<PackedGemmMatrix<T>> w, r1, r2;
  // Float R for the fused GEMM as well (AVX-512F), made by the first run with a batch of
  // several sequences (one sequence's steps keep gemm.h's GEMV, so it is not kept for them).
  mutable std::vector<fgemm::Packed> fr1, fr2;
  mutable std::once_flag fused_once;
};

// Everything one run needs, in the compute type T.
template <typename T>
struct RunData {
  const T* x;
  const T* w;
  const T* r;
  const T* b;                 // may be null
  const T* h0;                // may be null
  const T* c0;                // may be null
  const T* p;                 // may be null
  std::vector<int64_t> lens;  // per batch row, in [0, S]
  T* y;                       // may be null
  T* yh;                      // may be null
  T* yc;                      // may be null
  int64_t S, B, I, H;
  const PackedSet<T>* packed_w;  // null when W is not the constant packed at load
  const PackedSet<T>* packed_r;  // same for R
  // DynamicQuantizeLSTM: the 8-bit W and R per direction (w and r are then null).
  const std::vector<QuantWeights>* quant_w = nullptr;
  const std::vector<QuantWeights>* quant_r = nullptr;
};

class Recurrent final : public Kernel {
 public:
  Recurrent(const KernelInfo& info, CellType cell, bool quantized = false)
      : cell_(cell),
        quantized_(quantized),
        gates_(cell == CellType::kRnn   ? 1
               : cell == CellType::kGru ? 3
                                        : 4) {
    const std::string direction = info.attr_string("direction", "forward");
    if (direction == "forward") {
      num_dir_ = 1;
    } else if (direction == "reverse") {
      num_dir_ = 1;
      reverse_ = true;
    } else if (direction == "bidirectional") {
      num_dir_ = 2;
    } else {
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'direction' is '" + direction +
                    "'; expected 'forward', 'reverse' or 'bidirectional'");
    }
    if (info.has_attr("hidden_size")) {
      hidden_ = info.attr_int("hidden_size", 0);
      if (hidden_ <= 0)
        info.fail(StatusCode::kInvalidGraph,
                  "attribute 'hidden_size' must be > 0, got " + std::to_string(hidden_));
    }
    if (info.opset() >= 14) {
      layout_ = info.attr_int("layout", 0);
      if (layout_ != 0 && layout_ != 1)
        info.fail(StatusCode::kInvalidGraph,
                  "attribute 'layout' must be 0 or 1, got " + std::to_string(layout_));
    } else if (info.has_attr("layout")) {
      info.fail(StatusCode::kInvalidGraph, "attribute 'layout' exists from opset 14 (opset " +
                                               std::to_string(info.opset()) + ")");
    }
    if (info.has_attr("clip")) {
      clip_ = info.attr_float("clip", 0.f);
      if (!(clip_ > 0.f))
        info.fail(StatusCode::kInvalidGraph,
                  "attribute 'clip' must be > 0, got " + std::to_string(clip_));
    }
    if (cell_ == CellType::kGru)
      linear_before_reset_ = info.attr_int("linear_before_reset", 0) != 0;
    if (cell_ == CellType::kLstm) input_forget_ = info.attr_int("input_forget", 0) != 0;
    load_activations(info);
    if (quantized_) {
      pack_quant_constants(info);
    } else {
      pack_constants(info);
    }
  }

  void compute(KernelContext& ctx) const override;

 private:
  void load_activations(const KernelInfo& info);
  void pack_constants(const KernelInfo& info);
  void pack_quant_constants(const KernelInfo& info);
  template <typename T>
  void run(const RunData<T>& d, ThreadPool* pool) const;
  template <typename T>
  void run_direction(const RunData<T>& d, int64_t dir, ThreadPool* pool) const;
  template <typename T>
  const PackedSet<T>& packed() const {
    if constexpr (std::is_same_v<T, float>) {
      return packed_f32_;
    } else {
      return packed_f64_;
    }
  }
  template <typename T>
  PackedSet<T>& packed_mut() {
    if constexpr (std::is_same_v<T, float>) {
      return packed_f32_;
    } else {
      return packed_f64_;
    }
  }

  CellType cell_;
  bool quantized_;  // DynamicQuantizeLSTM
  int64_t gates_;
  int64_t num_dir_ = 1;
  bool reverse_ = false;  // direction == "reverse"
  int64_t hidden_ = 0;    // 0: taken from R
  int64_t layout_ = 0;
  float clip_ = 0.f;  // 0: no clip
  bool linear_before_reset_ = false;
  bool input_forget_ = false;
  int64_t acts_per_dir_ = 1;
  std::vector<Activation> acts_;  // acts_per_dir_ per direction

  PackedSet<float> packed_f32_;
  PackedSet<double> packed_f64_;
  DataType packed_w_dtype_ = DataType::kUndefined, packed_r_dtype_ = DataType::kUndefined;
  Shape packed_w_shape_, packed_r_shape_;
  std::vector<QuantWeights> quant_w_, quant_r_;  // constant 8-bit W / R, packed at load
};

// DynamicQuantizeLSTM's W or R ([D, K, N] int8 / uint8) with its scale and zero point ([D]
// or [D, N]; the zero point may be absent), per direction. Returns an empty message when
// they are valid, else what is wrong.
std::string quant_weights(const Tensor& w, const Tensor& scale, const Tensor* zp, int64_t D,
                          int64_t K, int64_t N, const char* name, std::vector<QuantWeights>* out) {
  const std::string n(name);
  if (w.dtype() != DataType::kInt8 && w.dtype() != DataType::kUInt8)
    return "input '" + n + "' must be int8 or uint8, got " + dtype_name(w.dtype());
  if (w.shape() != Shape{D, K, N})
    return "input '" + n + "' must have shape " + shape_to_string(Shape{D, K, N}) + ", got " +
           shape_to_string(w.shape());
  if (scale.dtype() != DataType::kFloat)
    return "input '" + n + "_scale' must be float, got " + dtype_name(scale.dtype());
  const bool per_column = scale.shape() == Shape{D, N};
  if (!per_column && scale.shape() != Shape{D} && !(D == 1 && scale.rank() == 0))
    return "input '" + n + "_scale' must have shape " + shape_to_string(Shape{D}) + " or " +
           shape_to_string(Shape{D, N}) + ", got " + shape_to_string(scale.shape());
  if (zp && (zp->dtype() != w.dtype() || zp->shape() != scale.shape()))
    return "input '" + n + "_zero_point' must have the type of '" + n + "' and the shape of '" + n +
           "_scale', got " + dtype_name(zp->dtype()) + " " + shape_to_string(zp->shape());
  const bool is_signed = w.dtype() == DataType::kInt8;
  const uint8_t* wd = static_cast<const uint8_t*>(w.raw_data());
  const float* sd = scale.data<float>();
  const uint8_t* zd = zp ? static_cast<const uint8_t*>(zp->raw_data()) : nullptr;
  out->assign(static_cast<size_t>(D), QuantWeights{});
  for (int64_t d = 0; d < D; ++d) {
    QuantWeights& q = (*out)[static_cast<size_t>(d)];
    int8gemm::pack_b(wd + d * K * N, is_signed, K, N, N, &q.packed);
    q.scale.resize(static_cast<size_t>(N));
    q.zero_point.resize(static_cast<size_t>(N));
    for (int64_t j = 0; j < N; ++j) {
      const int64_t at = per_column ? d * N + j : d;
      q.scale[static_cast<size_t>(j)] = sd[at];
      const uint8_t z = zd ? zd[at] : 0;
      q.zero_point[static_cast<size_t>(j)] =
          is_signed ? static_cast<int32_t>(static_cast<int8_t>(z)) : static_cast<int32_t>(z);
    }
  }
  return "";
}

// Inputs of DynamicQuantizeLSTM past LSTM's eight.
constexpr size_t kWScale = 8, kWZeroPoint = 9, kRScale = 10, kRZeroPoint = 11;

void Recurrent::pack_quant_constants(const KernelInfo& info) {
  auto constant = [&](size_t i) { return info.has_input(i) ? info.constant_input(i) : nullptr; };
  const Tensor* w = constant(1);
  const Tensor* r = constant(2);
  const Tensor* ws = constant(kWScale);
  const Tensor* rs = constant(kRScale);
  const Tensor* wz = constant(kWZeroPoint);
  const Tensor* rz = constant(kRZeroPoint);
  const bool wz_ok = !info.has_input(kWZeroPoint) || wz;
  const bool rz_ok = !info.has_input(kRZeroPoint) || rz;
  if (!w || !r || !ws || !rs || !wz_ok || !rz_ok || w->rank() != 3 || r->rank() != 3) return;
  const int64_t D = num_dir_, I = w->dim(1), H = r->dim(1), N = gates_ * H;
  if (H <= 0 || (hidden_ > 0 && H != hidden_)) return;
  std::vector<QuantWeights> qw, qr;
  if (!quant_weights(*w, *ws, wz, D, I, N, "W", &qw).empty()) return;
  if (!quant_weights(*r, *rs, rz, D, H, N, "R", &qr).empty()) return;
  quant_w_ = std::move(qw);
  quant_r_ = std::move(qr);
}

void Recurrent::load_activations(const KernelInfo& info) {
  acts_per_dir_ = cell_ == CellType::kRnn ? 1 : cell_ == CellType::kGru ? 2 : 3;
  std::vector<std::string> names = info.attr_strings("activations");
  if (names.empty()) {
    static const char* const kDefaults[] = {"Sigmoid", "Tanh", "Tanh"};
    for (int64_t d = 0; d < num_dir_; ++d) {
      if (cell_ == CellType::kRnn) {
        names.push_back("Tanh");
      } else {
        for (int64_t k = 0; k < acts_per_dir_; ++k) names.push_back(kDefaults[k]);
      }
    }
  }
  // The RNN schema's default is {Tanh, Tanh}; models that spell it out for one direction
  // mean the first.
  if (cell_ == CellType::kRnn && num_dir_ == 1 && names.size() == 2) names.resize(1);
  const size_t want = static_cast<size_t>(acts_per_dir_ * num_dir_);
  if (names.size() != want)
    info.fail(StatusCode::kInvalidGraph,
              "attribute 'activations' has " + std::to_string(names.size()) + " entries; " +
                  cell_name(cell_) + " with " + std::to_string(num_dir_) + " direction(s) needs " +
                  std::to_string(want));
  const std::vector<float> alphas = info.attr_floats("activation_alpha");
  const std::vector<float> betas = info.attr_floats("activation_beta");
  size_t next_alpha = 0, next_beta = 0;
  for (const std::string& name : names) {
    std::string lower = name;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const ActSpec* spec = nullptr;
    for (const ActSpec& s : kActSpecs)
      if (lower == s.name) spec = &s;
    if (!spec)
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'activations': unknown activation '" + name +
                    "'; expected one of Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, "
                    "ScaledTanh, HardSigmoid, Elu, Softsign, Softplus");
    Activation a;
    a.kind = spec->kind;
    if (spec->takes_alpha)
      a.alpha = next_alpha < alphas.size() ? alphas[next_alpha++] : spec->default_alpha;
    if (spec->takes_beta)
      a.beta = next_beta < betas.size() ? betas[next_beta++] : spec->default_beta;
    acts_.push_back(a);
  }
}

// Packs a constant W / R with the shapes the attributes imply; anything else is left to the
// checks at run time.
void Recurrent::pack_constants(const KernelInfo& info) {
  const Tensor* w = info.has_input(1) ? info.constant_input(1) : nullptr;
  const Tensor* r = info.has_input(2) ? info.constant_input(2) : nullptr;
  auto float_type = [](const Tensor* t) { return t && dtype_is_float(t->dtype()); };
  // Divisions, not products: the dims of an empty tensor may be anything.
  if (float_type(r) && r->rank() == 3 && r->numel() > 0 && r->dim(0) == num_dir_ &&
      (hidden_ == 0 || r->dim(2) == hidden_) && r->dim(1) % gates_ == 0 &&
      r->dim(1) / gates_ == r->dim(2)) {
    const int64_t H = r->dim(2);
    const bool split = cell_ == CellType::kGru && !linear_before_reset_;
    const int64_t n1 = split ? 2 * H : gates_ * H;
    auto pack = [&](auto tag, const auto* data) {
      using T = decltype(tag);
      PackedSet<T>& set = packed_mut<T>();
      for (int64_t d = 0; d < num_dir_; ++d) {
        const auto* base = data + d * gates_ * H * H;
        set.r1.push_back(pack_gemm_b<T>(true, H, n1, base, H));
        if (split) set.r2.push_back(pack_gemm_b<T>(true, H, H, base + n1 * H, H));
      }
    };
    if (r->dtype() == DataType::kDouble) {
      pack(double{}, r->data<double>());
    } else if (r->dtype() == DataType::kFloat) {
      pack(float{}, r->data<float>());
    } else {
      std::vector<float> f(static_cast<size_t>(r->numel()));
      convert_to_float(r->dtype(), r->raw_data(), f.data(), r->numel());
      pack(float{}, f.data());
    }
    packed_r_dtype_ = r->dtype();
    packed_r_shape_ = r->shape();
  }
  if (float_type(w) && w->rank() == 3 && w->dim(0) == num_dir_ && w->dim(1) > 0 &&
      w->dim(1) % gates_ == 0 && (hidden_ == 0 || w->dim(1) / gates_ == hidden_)) {
    const int64_t N = w->dim(1), K = w->dim(2);
    auto pack = [&](auto tag, const auto* data) {
      using T = decltype(tag);
      PackedSet<T>& set = packed_mut<T>();
      for (int64_t d = 0; d < num_dir_; ++d)
        set.w.push_back(pack_gemm_b<T>(true, K, N, data + d * N * K, K));
    };
    if (w->dtype() == DataType::kDouble) {
      pack(double{}, w->data<double>());
    } else if (w->dtype() == DataType::kFloat) {
      pack(float{}, w->data<float>());
    } else {
      std::vector<float> f(static_cast<size_t>(w->numel()));
      convert_to_float(w->dtype(), w->raw_data(), f.data(), w->numel());
      pack(float{}, f.data());
    }
    packed_w_dtype_ = w->dtype();
    packed_w_shape_ = w->shape();
  }
}

std::string shape_str(std::initializer_list<int64_t> dims) {
  return shape_to_string(Shape(dims));
}

void Recurrent::compute(KernelContext& ctx) const {
  const Tensor& X = ctx.required_input(0);
  const Tensor& W = ctx.required_input(1);
  const Tensor& R = ctx.required_input(2);
  const Tensor* Bias = ctx.input(3);
  const Tensor* lens_t = ctx.input(4);
  const Tensor* h0 = ctx.input(5);
  const Tensor* c0 = cell_ == CellType::kLstm ? ctx.input(6) : nullptr;
  const Tensor* P = cell_ == CellType::kLstm ? ctx.input(7) : nullptr;
  const DataType dt = X.dtype();
  if (quantized_ && dt != DataType::kFloat)
    ctx.fail(StatusCode::kInvalidArgument,
             std::string("input 'X' must be float, got ") + dtype_name(dt));
  if (!dtype_is_float(dt))
    ctx.fail(
        StatusCode::kInvalidArgument,
        std::string("input 'X' must be float16, bfloat16, float or double, got ") + dtype_name(dt));
  auto same_type = [&](const Tensor* t, const char* name) {
    if (t && t->dtype() != dt)
      ctx.fail(StatusCode::kInvalidArgument, std::string("input '") + name + "' has type " +
                                                 dtype_name(t->dtype()) + "; expected " +
                                                 dtype_name(dt) + " like 'X'");
  };
  if (!quantized_) {
    same_type(&W, "W");
    same_type(&R, "R");
  }
  same_type(Bias, "B");
  same_type(h0, "initial_h");
  same_type(c0, "initial_c");
  same_type(P, "P");
  if (X.rank() != 3)
    ctx.fail(StatusCode::kInvalidArgument, std::string("input 'X' must be 3-D ") +
                                               (layout_ ? "[batch_size, seq_length, input_size]"
                                                        : "[seq_length, batch_size, input_size]") +
                                               ", got " + shape_to_string(X.shape()));
  const int64_t S = layout_ ? X.dim(1) : X.dim(0);
  const int64_t B = layout_ ? X.dim(0) : X.dim(1);
  const int64_t I = X.dim(2);
  const int64_t D = num_dir_, G = gates_;
  if (R.rank() != 3)
    ctx.fail(StatusCode::kInvalidArgument,
             "input 'R' must be 3-D " +
                 std::string(
                     quantized_
                         ? "[num_directions, hidden_size, " + std::to_string(G) + "*hidden_size]"
                         : "[num_directions, " + std::to_string(G) + "*hidden_size, hidden_size]") +
                 ", got " + shape_to_string(R.shape()));
  const int64_t H = hidden_ > 0 ? hidden_ : quantized_ ? R.dim(1) : R.dim(2);
  if (H <= 0)
    ctx.fail(StatusCode::kInvalidArgument,
             "hidden size taken from input 'R' " + shape_to_string(R.shape()) + " is 0");
  // Keeps 2 * G * H and the buffer sizes below from overflowing.
  if (H > std::numeric_limits<int64_t>::max() / (2 * G))
    ctx.fail(StatusCode::kInvalidArgument, "hidden size " + std::to_string(H) + " is too large");
  const std::string hs_note =
      hidden_ > 0 ? " (attribute 'hidden_size' = " + std::to_string(hidden_) + ")" : "";
  // DynamicQuantizeLSTM: the 8-bit weights, packed at load or here.
  std::vector<QuantWeights> run_qw, run_qr;
  const std::vector<QuantWeights>* qw = nullptr;
  const std::vector<QuantWeights>* qr = nullptr;
  if (quantized_) {
    const bool at_load =
        !quant_w_.empty() && W.shape() == Shape{D, I, G * H} && R.shape() == Shape{D, H, G * H};
    if (at_load) {
      qw = &quant_w_;
      qr = &quant_r_;
    } else {
      for (size_t i : {kWScale, kRScale})
        if (!ctx.input(i))
          ctx.fail(
              StatusCode::kInvalidArgument,
              std::string("input '") + (i == kWScale ? "W_scale" : "R_scale") + "' is required");
      std::string err =
          quant_weights(W, *ctx.input(kWScale), ctx.input(kWZeroPoint), D, I, G * H, "W", &run_qw);
      if (err.empty())
        err = quant_weights(R, *ctx.input(kRScale), ctx.input(kRZeroPoint), D, H, G * H, "R",
                            &run_qr);
      if (!err.empty()) ctx.fail(StatusCode::kInvalidArgument, err + hs_note);
      qw = &run_qw;
      qr = &run_qr;
    }
  } else {
    if (W.shape() != Shape{D, G * H, I})
      ctx.fail(StatusCode::kInvalidArgument, "input 'W' must have shape " +
                                                 shape_str({D, G * H, I}) + hs_note + ", got " +
                                                 shape_to_string(W.shape()));
    if (R.shape() != Shape{D, G * H, H})
      ctx.fail(StatusCode::kInvalidArgument, "input 'R' must have shape " +
                                                 shape_str({D, G * H, H}) + hs_note + ", got " +
                                                 shape_to_string(R.shape()));
  }
  if (Bias && Bias->shape() != Shape{D, 2 * G * H})
    ctx.fail(StatusCode::kInvalidArgument, "input 'B' must have shape " +
                                               shape_str({D, 2 * G * H}) + hs_note + ", got " +
                                               shape_to_string(Bias->shape()));
  const Shape state_shape = layout_ ? Shape{B, D, H} : Shape{D, B, H};
  if (h0 && h0->shape() != state_shape)
    ctx.fail(StatusCode::kInvalidArgument, "input 'initial_h' must have shape " +
                                               shape_to_string(state_shape) + ", got " +
                                               shape_to_string(h0->shape()));
  if (c0 && c0->shape() != state_shape)
    ctx.fail(StatusCode::kInvalidArgument, "input 'initial_c' must have shape " +
                                               shape_to_string(state_shape) + ", got " +
                                               shape_to_string(c0->shape()));
  if (P && P->shape() != Shape{D, 3 * H})
    ctx.fail(StatusCode::kInvalidArgument, "input 'P' must have shape " + shape_str({D, 3 * H}) +
                                               ", got " + shape_to_string(P->shape()));
  // X * W^T is buffered for every step: refuse sizes that overflow before allocating.
  shape_size(Shape{S, B, G * H});
  std::vector<int64_t> lens(static_cast<size_t>(B), S);
  if (lens_t) {
    if (lens_t->dtype() != DataType::kInt32)
      ctx.fail(
          StatusCode::kInvalidArgument,
          std::string("input 'sequence_lens' must be int32, got ") + dtype_name(lens_t->dtype()));
    if (lens_t->shape() != Shape{B})
      ctx.fail(StatusCode::kInvalidArgument, "input 'sequence_lens' must have shape " +
                                                 shape_str({B}) + ", got " +
                                                 shape_to_string(lens_t->shape()));
    const int32_t* l = lens_t->data<int32_t>();
    for (int64_t b = 0; b < B; ++b) {
      if (l[b] < 0 || l[b] > S)
        ctx.fail(StatusCode::kInvalidArgument,
                 "input 'sequence_lens' holds " + std::to_string(l[b]) + " at batch " +
                     std::to_string(b) +
                     "; values must be in [0, seq_length = " + std::to_string(S) + "]");
      lens[static_cast<size_t>(b)] = l[b];
    }
  }

  auto wanted = [&](size_t i) { return ctx.num_outputs() > i && !ctx.node().outputs[i].empty(); };
  Tensor* Y = wanted(0)
                  ? &ctx.allocate_output(0, dt, layout_ ? Shape{B, S, D, H} : Shape{S, D, B, H})
                  : nullptr;
  Tensor* Yh = wanted(1) ? &ctx.allocate_output(1, dt, state_shape) : nullptr;
  Tensor* Yc =
      cell_ == CellType::kLstm && wanted(2) ? &ctx.allocate_output(2, dt, state_shape) : nullptr;

  const bool w_packed = packed_w_dtype_ == dt && packed_w_shape_ == W.shape();
  const bool r_packed = packed_r_dtype_ == dt && packed_r_shape_ == R.shape();
  ThreadPool* pool = ctx.thread_pool();

  auto raw = [](const Tensor* t) -> const void* { return t ? t->raw_data() : nullptr; };
  if (quantized_) {
    RunData<float> d{X.data<float>(),
                     nullptr,
                     nullptr,
                     static_cast<const float*>(raw(Bias)),
                     static_cast<const float*>(raw(h0)),
                     static_cast<const float*>(raw(c0)),
                     static_cast<const float*>(raw(P)),
                     std::move(lens),
                     Y ? Y->data<float>() : nullptr,
                     Yh ? Yh->data<float>() : nullptr,
                     Yc ? Yc->data<float>() : nullptr,
                     S,
                     B,
                     I,
                     H,
                     nullptr,
                     nullptr,
                     qw,
                     qr};
    run<float>(d, pool);
    return;
  }
  if (dt == DataType::kFloat || dt == DataType::kDouble) {
    auto go = [&](auto tag) {
      using T = decltype(tag);
      RunData<T> d{static_cast<const T*>(X.raw_data()),
                   static_cast<const T*>(W.raw_data()),
                   static_cast<const T*>(R.raw_data()),
                   static_cast<const T*>(raw(Bias)),
                   static_cast<const T*>(raw(h0)),
                   static_cast<const T*>(raw(c0)),
                   static_cast<const T*>(raw(P)),
                   std::move(lens),
                   Y ? Y->data<T>() : nullptr,
                   Yh ? Yh->data<T>() : nullptr,
                   Yc ? Yc->data<T>() : nullptr,
                   S,
                   B,
                   I,
                   H,
                   w_packed ? &packed<T>() : nullptr,
                   r_packed ? &packed<T>() : nullptr};
      run<T>(d, pool);
    };
    if (dt == DataType::kFloat) {
      go(float{});
    } else {
      go(double{});
    }
    return;
  }
  // float16 / bfloat16: compute in float.
  auto to_f32 = [](const Tensor* t) {
    std::vector<float> v;
    if (t) {
      v.resize(static_cast<size_t>(t->numel()));
      convert_to_float(t->dtype(), t->raw_data(), v.data(), t->numel());
    }
    return v;
  };
  const std::vector<float> x = to_f32(&X), w = to_f32(&W), r = to_f32(&R), b = to_f32(Bias),
                           vh0 = to_f32(h0), vc0 = to_f32(c0), p = to_f32(P);
  std::vector<float> y(Y ? static_cast<size_t>(Y->numel()) : 0),
      yh(Yh ? static_cast<size_t>(Yh->numel()) : 0), yc(Yc ? static_cast<size_t>(Yc->numel()) : 0);
  RunData<float> d{x.data(),
                   w.data(),
                   r.data(),
                   Bias ? b.data() : nullptr,
                   h0 ? vh0.data() : nullptr,
                   c0 ? vc0.data() : nullptr,
                   P ? p.data() : nullptr,
                   std::move(lens),
                   Y ? y.data() : nullptr,
                   Yh ? yh.data() : nullptr,
                   Yc ? yc.data() : nullptr,
                   S,
                   B,
                   I,
                   H,
                   w_packed ? &packed_f32_ : nullptr,
                   r_packed ? &packed_f32_ : nullptr};
  run<float>(d, pool);
  if (Y) convert_from_float(dt, y.data(), Y->raw_data(), Y->numel());
  if (Yh) convert_from_float(dt, yh.data(), Yh->raw_data(), Yh->numel());
  if (Yc) convert_from_float(dt, yc.data(), Yc->raw_data(), Yc->numel());
}

template <typename T>
void Recurrent::run(const RunData<T>& d, ThreadPool* pool) const {
  const int64_t D = num_dir_, S = d.S, B = d.B, H = d.H;
  if constexpr (std::is_same_v<T, float>) {
    // The constant R for the fused GEMM, on the first run with several sequences.
    if (B > 1 && d.packed_r && d.r && !d.packed_r->r1.empty() && fgemm::uses_avx512()) {
      const bool split = cell_ == CellType::kGru && !linear_before_reset_;
      const int64_t n1 = split ? 2 * H : gates_ * H;
      std::call_once(d.packed_r->fused_once, [&] {
        for (int64_t dir = 0; dir < D; ++dir) {
          const float* base = d.r + dir * gates_ * H * H;
          d.packed_r->fr1.push_back(fgemm::Packed::pack(base, H, n1, H, false));
          if (split) d.packed_r->fr2.push_back(fgemm::Packed::pack(base + n1 * H, H, H, H, false));
        }
      });
    }
  }
  // The two directions of a bidirectional layer share only their inputs: with two threads
  // each runs on its own, its products unsplit. Split inside, the per-step products of a
  // small cell cost more in hand-offs than they saved (GRU, 50 steps of 4 x 64: 1.5x the
  // time of one thread). With more threads, cells of >= 1M multiply-adds a step keep the
  // split products.
  //
  // Except at two threads where R is 2 to 6 MiB a direction: then each direction runs on
  // both threads in turn, each thread's half of R staying in its core's L2 over the steps,
  // where a direction on its own thread read all of R from L3 at every step. Bidirectional,
  // 32 steps, 2 threads, against a direction a thread (onnxruntime in brackets): one
  // sequence, LSTM H 384 0.62 of the time (1.23 ms against 1.98; onnxruntime 1.40), H 512
  // 0.67 (3.24 against 4.80; 3.43), GRU H 512 0.50 (2.14 against 4.29; 2.38), ddddocr's
  // common (LSTM H 512) 0.81-0.84; batches (the fused GEMM's products) LSTM H 512 x 2 0.74
  // (4.02 against 5.46; 4.04), H 384 x 2 0.77, H 384 x 4 0.96, H 512 x 8 0.95. Below 2 MiB a
  // direction's R stays in its thread's L2 anyway (LSTM H 320 1.24x slower shared, GRU H
  // 384 1.16x); past 6 MiB neither half does (LSTM H 768: 1.02-1.04x).
  const int threads = pool ? pool->num_threads() : 1;
  const double step =
      static_cast<double>(B) * static_cast<double>(gates_ * H) * static_cast<double>(H);
  const double r_bytes = static_cast<double>(gates_ * H) * static_cast<double>(H) * sizeof(T);
  const bool share_r = threads == 2 && !quantized_ && r_bytes >= 2097152.0 && r_bytes <= 6291456.0;
  if (D == 2 && threads >= 2 && (threads == 2 || step < 1048576.0) && !share_r) {
    pool->parallel_for(
        2,
        [&](int64_t lo, int64_t hi) {
          for (int64_t dir = lo; dir < hi; ++dir) run_direction<T>(d, dir, nullptr);
        },
        1);
  } else {
    for (int64_t dir = 0; dir < D; ++dir) run_direction<T>(d, dir, pool);
  }
  // Steps at or past a row's length are zero in Y.
  if (d.y) {
    for (int64_t dir = 0; dir < D; ++dir) {
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t t = d.lens[static_cast<size_t>(b)]; t < S; ++t) {
          T* y = d.y + (layout_ ? ((b * S + t) * D + dir) * H : ((t * D + dir) * B + b) * H);
          std::fill(y, y + H, T(0));
        }
      }
    }
  }
}

template <typename T>
void Recurrent::run_direction(const RunData<T>& d, int64_t dir, ThreadPool* pool) const {
  const int64_t D = num_dir_, S = d.S, B = d.B, I = d.I, H = d.H, G = gates_;
  const int64_t GH = G * H;
  const bool reverse = reverse_ || dir == 1;
  const Activation* acts = &acts_[static_cast<size_t>(dir * acts_per_dir_)];
  const T clip = static_cast<T>(clip_);
  const bool gru_split = cell_ == CellType::kGru && !linear_before_reset_;
  const size_t udir = static_cast<size_t>(dir);

  // Weight views for this direction (the float W and R are null when quantized).
  const bool quant = d.quant_w != nullptr;
  WeightRef<T> w{d.packed_w ? &d.packed_w->w[udir] : nullptr, quant ? nullptr : d.w + dir * GH * I,
                 GH, I, quant ? &(*d.quant_w)[udir] : nullptr};
  const T* r_base = quant ? nullptr : d.r + dir * GH * H;
  const int64_t n1 = gru_split ? 2 * H : GH;
  WeightRef<T> r1{d.packed_r ? &d.packed_r->r1[udir] : nullptr, r_base, n1, H,
                  quant ? &(*d.quant_r)[udir] : nullptr};
  WeightRef<T> r2{d.packed_r && gru_split ? &d.packed_r->r2[udir] : nullptr,
                  quant ? nullptr : r_base + n1 * H, H, H};
  if (d.packed_r && !d.packed_r->fr1.empty()) {
    r1.fused = &d.packed_r->fr1[udir];
    if (gru_split) r2.fused = &d.packed_r->fr2[udir];
  }

  // Wb + Rb, except that GRU with linear_before_reset keeps Rbh apart (it is scaled by r).
  std::vector<T> bias(static_cast<size_t>(GH), T(0)), rbh;
  if (d.b) {
    const T* wb = d.b + dir * 2 * GH;
    const T* rb = wb + GH;
    for (int64_t k = 0; k < GH; ++k) bias[static_cast<size_t>(k)] = wb[k] + rb[k];
    if (cell_ == CellType::kGru && linear_before_reset_) {
      rbh.assign(rb + 2 * H, rb + 3 * H);
      for (int64_t k = 2 * H; k < 3 * H; ++k) bias[static_cast<size_t>(k)] = wb[k];
    }
  }
  if (rbh.empty()) rbh.assign(static_cast<size_t>(H), T(0));
  const T* p_i = d.p ? d.p + dir * 3 * H : nullptr;
  const T* p_o = p_i ? p_i + H : nullptr;
  const T* p_f = p_i ? p_i + 2 * H : nullptr;

  // State rows are [B, H] here whatever the layout.
  auto state_at = [&](int64_t b) { return layout_ ? (b * D + dir) * H : (dir * B + b) * H; };
  std::vector<T> h(static_cast<size_t>(B * H), T(0)), c;
  if (d.h0)
    for (int64_t b = 0; b < B; ++b)
      std::copy(d.h0 + state_at(b), d.h0 + state_at(b) + H, h.data() + b * H);
  if (cell_ == CellType::kLstm) {
    c.assign(static_cast<size_t>(B * H), T(0));
    if (d.c0)
      for (int64_t b = 0; b < B; ++b)
        std::copy(d.c0 + state_at(b), d.c0 + state_at(b) + H, c.data() + b * H);
  }

  int64_t max_len = 0;
  for (int64_t l : d.lens) max_len = std::max(max_len, l);
  // R is read once per step: a non-constant R is packed once per run.
  PackedGemmMatrix<T> run_r1, run_r2;
  if (max_len > 1 && B > 0 && !r1.packed && !quant) {
    run_r1 = pack_gemm_b<T>(true, H, n1, r_base, H);
    r1.packed = &run_r1;
    if (gru_split) {
      run_r2 = pack_gemm_b<T>(true, H, H, r_base + n1 * H, H);
      r2.packed = &run_r2;
    }
  }

  // X * W^T for every time step: rows in X's order ([S, B] or [B, S]).
  std::vector<T> xw(static_cast<size_t>(max_len > 0 ? S * B * GH : 0));
  if (max_len > 0) mul_wt<T>(S * B, d.x, I, w, xw.data(), GH, pool);

  std::vector<T> g(static_cast<size_t>(B * GH));  // H_{t-1} * R^T, then the gates
  std::vector<T> rh, gh;                          // GRU: r (.) H_{t-1} and its product with Rh^T
  if (gru_split) {
    rh.assign(static_cast<size_t>(B * H), T(0));
    gh.assign(static_cast<size_t>(B * H), T(0));
  }

  const double row_cost = 20.0 * static_cast<double>(GH);
  for (int64_t s = 0; s < max_len; ++s) {
    mul_wt<T>(B, h.data(), H, r1, g.data(), GH, pool);
    auto time_of = [&](int64_t b) {
      const int64_t len = d.lens[static_cast<size_t>(b)];
      return reverse ? len - 1 - s : s;
    };
    auto active = [&](int64_t b) { return s < d.lens[static_cast<size_t>(b)]; };
    // Adds X_t * W^T and the biases into row b of g.
    auto add_input = [&](int64_t b, int64_t cols) {
      const int64_t t = time_of(b);
      const T* xr = xw.data() + (layout_ ? b * S + t : t * B + b) * GH;
      T* gr = g.data() + b * GH;
      for (int64_t k = 0; k < cols; ++k) gr[k] += xr[k] + bias[static_cast<size_t>(k)];
    };
    auto emit = [&](int64_t b) {
      if (!d.y) return;
      const int64_t t = time_of(b);
      T* y = d.y + (layout_ ? ((b * S + t) * D + dir) * H : ((t * D + dir) * B + b) * H);
      std::copy(h.data() + b * H, h.data() + (b + 1) * H, y);
    };

    if (cell_ == CellType::kRnn) {
      parallel_for(pool, B, row_cost, [&](int64_t lo, int64_t hi) {
        for (int64_t b = lo; b < hi; ++b) {
          if (!active(b)) continue;
          add_input(b, GH);
          T* gr = g.data() + b * GH;
          activate(acts[0], clip, gr, H);
          std::copy(gr, gr + H, h.data() + b * H);
          emit(b);
        }
      });
    } else if (cell_ == CellType::kLstm) {
      // Gate order in W, R, B: i, o, f, c.
      parallel_for(pool, B, row_cost, [&](int64_t lo, int64_t hi) {
        for (int64_t b = lo; b < hi; ++b) {
          if (!active(b)) continue;
          add_input(b, GH);
          T* gi = g.data() + b * GH;
          T* go = gi + H;
          T* gf = go + H;
          T* gc = gf + H;
          T* cp = c.data() + b * H;
          if (p_i)
            for (int64_t k = 0; k < H; ++k) gi[k] += p_i[k] * cp[k];
          activate(acts[0], clip, gi, H);
          if (input_forget_) {
            for (int64_t k = 0; k < H; ++k) gf[k] = T(1) - gi[k];
          } else {
            if (p_f)
              for (int64_t k = 0; k < H; ++k) gf[k] += p_f[k] * cp[k];
            activate(acts[0], clip, gf, H);
          }
          activate(acts[1], clip, gc, H);
          for (int64_t k = 0; k < H; ++k) cp[k] = gf[k] * cp[k] + gi[k] * gc[k];
          if (p_o)
            for (int64_t k = 0; k < H; ++k) go[k] += p_o[k] * cp[k];
          activate(acts[0], clip, go, H);
          // h(C_t) goes through gc, which is free now.
          std::copy(cp, cp + H, gc);
          activate(acts[2], T(0), gc, H);
          T* hr = h.data() + b * H;
          for (int64_t k = 0; k < H; ++k) hr[k] = go[k] * gc[k];
          emit(b);
        }
      });
    } else {
      // GRU, gate order z, r, h. Without linear_before_reset, g holds only the z and r
      // columns of H_{t-1} * R^T and the h gate needs (r (.) H_{t-1}) * Rh^T.
      parallel_for(pool, B, row_cost, [&](int64_t lo, int64_t hi) {
        for (int64_t b = lo; b < hi; ++b) {
          if (!active(b)) continue;
          add_input(b, 2 * H);
          T* gz = g.data() + b * GH;
          T* gr = gz + H;
          T* gn = gr + H;
          const T* hp = h.data() + b * H;
          activate(acts[0], clip, gz, H);
          activate(acts[0], clip, gr, H);
          if (gru_split) {
            T* rr = rh.data() + b * H;
            for (int64_t k = 0; k < H; ++k) rr[k] = gr[k] * hp[k];
          } else {
            const int64_t t = time_of(b);
            const T* xr = xw.data() + (layout_ ? b * S + t : t * B + b) * GH + 2 * H;
            const T* bh = bias.data() + 2 * H;
            for (int64_t k = 0; k < H; ++k)
              gn[k] = xr[k] + bh[k] + gr[k] * (gn[k] + rbh[static_cast<size_t>(k)]);
          }
        }
      });
      if (gru_split) mul_wt<T>(B, rh.data(), H, r2, gh.data(), H, pool);
      parallel_for(pool, B, row_cost, [&](int64_t lo, int64_t hi) {
        for (int64_t b = lo; b < hi; ++b) {
          if (!active(b)) continue;
          T* gz = g.data() + b * GH;
          T* gn = gz + 2 * H;
          if (gru_split) {
            const int64_t t = time_of(b);
            const T* xr = xw.data() + (layout_ ? b * S + t : t * B + b) * GH + 2 * H;
            const T* bh = bias.data() + 2 * H;
            const T* ghr = gh.data() + b * H;
            for (int64_t k = 0; k < H; ++k) gn[k] = xr[k] + bh[k] + ghr[k];
          }
          activate(acts[1], clip, gn, H);
          T* hr = h.data() + b * H;
          for (int64_t k = 0; k < H; ++k) hr[k] = (T(1) - gz[k]) * gn[k] + gz[k] * hr[k];
          emit(b);
        }
      });
    }
  }

  // The state after each row's last step; zeros for an empty sequence.
  for (int64_t b = 0; b < B; ++b) {
    const bool empty = d.lens[static_cast<size_t>(b)] == 0;
    if (d.yh) {
      T* out = d.yh + state_at(b);
      if (empty) {
        std::fill(out, out + H, T(0));
      } else {
        std::copy(h.data() + b * H, h.data() + (b + 1) * H, out);
      }
    }
    if (d.yc) {
      T* out = d.yc + state_at(b);
      if (empty) {
        std::fill(out, out + H, T(0));
      } else {
        std::copy(c.data() + b * H, c.data() + (b + 1) * H, out);
      }
    }
  }
}

template <CellType kCell>
KernelFactory recurrent_factory(bool quantized = false) {
  return [quantized](const KernelInfo& info) -> std::unique_ptr<Kernel> {
    return std::make_unique<Recurrent>(info, kCell, quantized);
  };
}

}  // namespace

void register_rnn(KernelRegistry& r) {
  // 14: layout attribute; 22: bfloat16.
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    const std::string name = op;
    const KernelFactory f = name == "RNN"   ? recurrent_factory<CellType::kRnn>()
                            : name == "GRU" ? recurrent_factory<CellType::kGru>()
                                            : recurrent_factory<CellType::kLstm>();
    r.add("", name, 7, 13, f);
    r.add("", name, 14, 21, f);
    r.add("", name, 22, kMaxOpset, f);
  }
  r.add("com.microsoft", "DynamicQuantizeLSTM", 1, kMaxOpset,
        recurrent_factory<CellType::kLstm>(true));
}

}  // namespace nn
}  // namespace ortlite
