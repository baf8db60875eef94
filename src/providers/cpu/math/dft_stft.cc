// Signal processing: DFT (opset 17: axis attribute, 20: axis input), STFT, MelWeightMatrix.
//
// Transforms are computed in double precision whatever the element type: an iterative
// radix-2 FFT for power-of-two lengths and Bluestein's chirp-z algorithm (a radix-2
// convolution) for the other lengths, so every length costs O(n log n).
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <vector>

#include "providers/cpu/math/math_kernels.h"

namespace ortlite {
namespace {

using cd = std::complex<double>;
constexpr double kPi = 3.14159265358979323846;
// Longest transform (and mel matrix side) accepted: bounds the plan's memory (Bluestein
// needs a few buffers of up to 4n complex doubles) whatever the model asks for.
constexpr int64_t kMaxLength = int64_t{1} << 24;

// Transforms of one length n. Immutable once built; run() takes the caller's scratch.
class FftPlan {
 public:
  explicit FftPlan(int64_t n) : n_(n) {
    if ((n & (n - 1)) == 0) {
      m_ = n;
      make_twiddles();
      return;
    }
    m_ = 1;
    while (m_ < 2 * n - 1) m_ <<= 1;
    make_twiddles();
    // chirp[t] = exp(-i pi t^2 / n); t^2 is reduced modulo 2n first so that the angle
    // stays small and exact.
    chirp_.resize(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) {
      const int64_t t2 = (t * t) % (2 * n);  // t < kMaxLength: no overflow
      const double ang = -kPi * static_cast<double>(t2) / static_cast<double>(n);
      chirp_[t] = cd(std::cos(ang), std::sin(ang));
    }
    filter_.assign(static_cast<size_t>(m_), cd(0, 0));
    filter_[0] = std::conj(chirp_[0]);
    for (int64_t t = 1; t < n; ++t) filter_[t] = filter_[m_ - t] = std::conj(chirp_[t]);
    radix2(filter_.data(), false);
  }

  int64_t size() const { return n_; }

  // In place: the forward transform (exponent -2 pi i k j / n), or the backward one
  // (exponent +, not normalized) when `inverse`. `scratch` is resized as needed.
  void run(cd* data, bool inverse, std::vector<cd>& scratch) const {
    // backward(x) = conj(forward(conj(x)))
    if (inverse)
      for (int64_t i = 0; i < n_; ++i) data[i] = std::conj(data[i]);
    if (m_ == n_) {
      radix2(data, false);
    } else {
      scratch.assign(static_cast<size_t>(m_), cd(0, 0));
      for (int64_t j = 0; j < n_; ++j) scratch[j] = data[j] * chirp_[j];
      radix2(scratch.data(), false);
      for (int64_t k = 0; k < m_; ++k) scratch[k] *= filter_[k];
      radix2(scratch.data(), true);
      const double inv_m = 1.0 / static_cast<double>(m_);
      for (int64_t k = 0; k < n_; ++k) data[k] = scratch[k] * chirp_[k] * inv_m;
    }
    if (inverse)
      for (int64_t i = 0; i < n_; ++i) data[i] = std::conj(data[i]);
  }

 private:
  void make_twiddles() {
    twiddle_.resize(static_cast<size_t>(std::max<int64_t>(m_ / 2, 1)));
    for (int64_t k = 0; k < m_ / 2; ++k) {
      const double ang = -2.0 * kPi * static_cast<double>(k) / static_cast<double>(m_);
      twiddle_[k] = cd(std::cos(ang), std::sin(ang));
    }
  }

  // Unnormalized radix-2 transform of length m_ (forward, or with conjugate twiddles).
  void radix2(cd* a, bool conj_twiddles) const {
    const int64_t m = m_;
    for (int64_t i = 1, j = 0; i < m; ++i) {
      int64_t bit = m >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) std::swap(a[i], a[j]);
    }
    for (int64_t len = 2; len <= m; len <<= 1) {
      const int64_t half = len / 2, step = m / len;
      for (int64_t s = 0; s < m; s += len) {
        for (int64_t k = 0; k < half; ++k) {
          const cd w = conj_twiddles ? std::conj(twiddle_[k * step]) : twiddle_[k * step];
          const cd u = a[s + k], v = a[s + k + half] * w;
          a[s + k] = u + v;
          a[s + k + half] = u - v;
        }
      }
    }
  }

  int64_t n_, m_ = 1;
  std::vector<cd> twiddle_, chirp_, filter_;
};

// Reads an optional scalar int32/int64 input; `fallback` when absent.
int64_t scalar_int_input(const KernelContext& ctx, size_t i, const char* what, int64_t fallback) {
  const Tensor* t = ctx.input(i);
  if (!t) return fallback;
  if ((t->dtype() != DataType::kInt32 && t->dtype() != DataType::kInt64) || t->numel() != 1 ||
      t->rank() > 1) {
    ctx.fail(StatusCode::kInvalidArgument,
             std::string("input '") + what + "' must be an int32 or int64 scalar, got " +
                 dtype_name(t->dtype()) + " " + shape_to_string(t->shape()));
  }
  return tensor_to_int64s(*t)[0];
}

double scalar_float_input(const KernelContext& ctx, size_t i, const char* what) {
  const Tensor& t = ctx.required_input(i);
  if (!dtype_is_float(t.dtype()) || t.numel() != 1 || t.rank() > 1) {
    ctx.fail(StatusCode::kInvalidArgument,
             std::string("input '") + what + "' must be a float scalar, got " +
                 dtype_name(t.dtype()) + " " + shape_to_string(t.shape()));
  }
  return tensor_scalar_as_double(t);
}

void check_length(const KernelContext& ctx, int64_t n, const char* what) {
  if (n < 1 || n > kMaxLength) {
    ctx.fail(StatusCode::kInvalidArgument, std::string(what) + " = " + std::to_string(n) +
                                               " is out of range [1, " +
                                               std::to_string(kMaxLength) + "]");
  }
}

void check_float_input(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (!dtype_is_float(t.dtype())) {
    ctx.fail(StatusCode::kInvalidArgument,
             std::string("input '") + what + "' must be float, double, float16 or bfloat16, got " +
                 dtype_name(t.dtype()));
  }
}

// Reads every element of a float tensor as double.
std::vector<double> to_doubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  ORTLITE_DISPATCH_FLOAT(t.dtype(), "signal input", [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(ew::load(p[i]));
  });
  return v;
}

template <typename T>
void store_doubles(const std::vector<double>& v, T* out) {
  for (size_t i = 0; i < v.size(); ++i) out[i] = ew::store<T>(v[i]);
}

void store_all(Tensor& y, const std::vector<double>& v) {
  ORTLITE_DISPATCH_FLOAT(y.dtype(), "signal output", [&](auto tag) {
    using T = decltype(tag);
    store_doubles(v, y.data<T>());
  });
}

// DFT(input [..., L, ..., 1|2], dft_length?, axis?) along one signal axis.
class Dft final : public Kernel {
 public:
  explicit Dft(const KernelInfo& info)
      : axis_input_(info.opset() >= 20),
        axis_attr_(info.attr_int("axis", 1)),
        inverse_(info.attr_int("inverse", 0) != 0),
        onesided_(info.attr_int("onesided", 0) != 0) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    check_float_input(ctx, x, "input");
    const int64_t r = static_cast<int64_t>(x.rank());
    if (r < 2 || (x.dim(r - 1) != 1 && x.dim(r - 1) != 2)) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'input' must have rank >= 2 and a last dimension of 1 (real) or 2 "
               "(complex), got " +
                   shape_to_string(x.shape()));
    }
    const int64_t axis_raw = axis_input_ ? scalar_int_input(ctx, 2, "axis", -2) : axis_attr_;
    const int64_t axis = axis_raw < 0 ? axis_raw + r : axis_raw;
    if (axis < 0 || axis > r - 2) {
      ctx.fail(StatusCode::kInvalidArgument,
               "axis " + std::to_string(axis_raw) + " is out of range for input rank " +
                   std::to_string(r) + " (the last dimension holds the complex parts)");
    }
    const int64_t L = x.dim(static_cast<size_t>(axis));
    const bool irfft = inverse_ && onesided_;
    const int64_t n = scalar_int_input(ctx, 1, "dft_length", irfft ? 2 * (L - 1) : L);
    check_length(ctx, n, "dft_length");
    const int64_t c = x.dim(r - 1);
    const int64_t out_len = onesided_ && !inverse_ ? n / 2 + 1 : n;
    const int64_t out_c = irfft ? 1 : 2;
    Shape out_shape = x.shape();
    out_shape[axis] = out_len;
    out_shape[r - 1] = out_c;
    Tensor& y = ctx.allocate_output(0, x.dtype(), out_shape);
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
    for (int64_t d = axis + 1; d < r - 1; ++d) inner *= x.dim(d);
    if (y.numel() == 0) return;

    const std::vector<double> in = to_doubles(x);
    std::vector<double> out(static_cast<size_t>(y.numel()));
    const FftPlan plan(n);
    const int64_t lines = outer * inner;
    const bool inverse = inverse_;
    const double norm = inverse ? 1.0 / static_cast<double>(n) : 1.0;
    const int64_t used = irfft ? std::min(L, n / 2 + 1) : std::min(L, n);
    const double cost = 20.0 * static_cast<double>(n) * std::log2(static_cast<double>(n) + 1);
    parallel_for(ctx.thread_pool(), lines, cost, [&](int64_t begin, int64_t end) {
      std::vector<cd> buf(static_cast<size_t>(n)), scratch;
      for (int64_t line = begin; line < end; ++line) {
        const int64_t o = line / inner, i = line % inner;
        const int64_t src_start = (o * L * inner + i) * c, src_stride = inner * c;
        std::fill(buf.begin(), buf.end(), cd(0, 0));
        for (int64_t k = 0; k < used; ++k) {
          const double* e = in.data() + src_start + k * src_stride;
          buf[k] = cd(e[0], c == 2 ? e[1] : 0.0);
        }
        if (irfft) {
          // The one-sided spectrum of a real signal: the rest is the conjugate mirror.
          for (int64_t k = 1; k < (n + 1) / 2; ++k) buf[n - k] = std::conj(buf[k]);
        }
        plan.run(buf.data(), inverse, scratch);
        double* dst = out.data() + (o * out_len * inner + i) * out_c;
        const int64_t dst_stride = inner * out_c;
        for (int64_t k = 0; k < out_len; ++k) {
          double* e = dst + k * dst_stride;
          e[0] = buf[k].real() * norm;
          if (out_c == 2) e[1] = buf[k].imag() * norm;
        }
      }
    });
    store_all(y, out);
  }

 private:
  bool axis_input_;
  int64_t axis_attr_;
  bool inverse_, onesided_;
};

// STFT(signal [batch, length, 1|2], frame_step, window?, frame_length?):
// [batch, frames, bins, 2], each frame weighted by the window and transformed.
class Stft final : public Kernel {
 public:
  explicit Stft(const KernelInfo& info) : onesided_(info.attr_int("onesided", 1) != 0) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    check_float_input(ctx, x, "signal");
    if (x.rank() != 3 || (x.dim(2) != 1 && x.dim(2) != 2)) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'signal' must have shape [batch_size, signal_length, 1 or 2], got " +
                   shape_to_string(x.shape()));
    }
    const int64_t batch = x.dim(0), len = x.dim(1), c = x.dim(2);
    if (!ctx.input(1)) ctx.fail(StatusCode::kInvalidArgument, "input 'frame_step' is required");
    const int64_t step = scalar_int_input(ctx, 1, "frame_step", 0);
    if (step < 1) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'frame_step' = " + std::to_string(step) + " must be positive");
    }
    const Tensor* win_t = ctx.input(2);
    if (win_t) {
      if (win_t->dtype() != x.dtype() || win_t->rank() != 1) {
        ctx.fail(StatusCode::kInvalidArgument,
                 std::string("input 'window' must be a 1-D tensor of the signal's type ") +
                     dtype_name(x.dtype()) + ", got " + dtype_name(win_t->dtype()) + " " +
                     shape_to_string(win_t->shape()));
      }
    }
    const int64_t frame_length =
        scalar_int_input(ctx, 3, "frame_length", win_t ? win_t->dim(0) : len);
    check_length(ctx, frame_length, "frame_length");
    const int64_t wsize = win_t ? win_t->dim(0) : frame_length;
    if (wsize < 1) ctx.fail(StatusCode::kInvalidArgument, "input 'window' is empty");
    if (len < frame_length) {
      ctx.fail(StatusCode::kInvalidArgument, "signal length " + std::to_string(len) +
                                                 " is shorter than frame_length " +
                                                 std::to_string(frame_length));
    }
    const int64_t frames = 1 + (len - frame_length) / step;
    const int64_t bins = onesided_ ? frame_length / 2 + 1 : frame_length;
    Tensor& y = ctx.allocate_output(0, x.dtype(), {batch, frames, bins, 2});
    if (y.numel() == 0) return;
    const std::vector<double> in = to_doubles(x);
    const std::vector<double> window =
        win_t ? to_doubles(*win_t) : std::vector<double>(static_cast<size_t>(wsize), 1.0);
    std::vector<double> out(static_cast<size_t>(y.numel()));
    const FftPlan plan(frame_length);
    const int64_t used = std::min(wsize, frame_length);
    const double cost =
        20.0 * static_cast<double>(frame_length) * std::log2(static_cast<double>(frame_length) + 1);
    parallel_for(ctx.thread_pool(), batch * frames, cost, [&](int64_t begin, int64_t end) {
      std::vector<cd> buf(static_cast<size_t>(frame_length)), scratch;
      for (int64_t bf = begin; bf < end; ++bf) {
        const int64_t b = bf / frames, f = bf % frames;
        std::fill(buf.begin(), buf.end(), cd(0, 0));
        for (int64_t k = 0; k < used; ++k) {
          const int64_t t = f * step + k;
          if (t >= len) break;
          const double* e = in.data() + (b * len + t) * c;
          buf[k] = cd(e[0], c == 2 ? e[1] : 0.0) * window[k];
        }
        plan.run(buf.data(), false, scratch);
        double* dst = out.data() + bf * bins * 2;
        for (int64_t k = 0; k < bins; ++k) {
          dst[2 * k] = buf[k].real();
          dst[2 * k + 1] = buf[k].imag();
        }
      }
    });
    store_all(y, out);
  }

 private:
  bool onesided_;
};

// MelWeightMatrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz,
// upper_edge_hertz): [dft_length / 2 + 1, num_mel_bins] triangular filters, with the band
// edges placed as onnx's reference implementation places them.
class MelWeightMatrix final : public Kernel {
 public:
  explicit MelWeightMatrix(const KernelInfo& info) {
    const int64_t v = info.attr_int("output_datatype", 1);
    dtype_ = static_cast<DataType>(v);
    if (v < 0 || v > 64 || !dtype_supported(dtype_) || dtype_ == DataType::kString ||
        dtype_ == DataType::kBool) {
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'output_datatype' = " + std::to_string(v) + " is not a numeric type");
    }
  }

  void compute(KernelContext& ctx) const override {
    for (size_t i = 0; i < 3; ++i) {
      if (!ctx.input(i)) {
        ctx.fail(StatusCode::kInvalidArgument, "input " + std::to_string(i) + " is required");
      }
    }
    const int64_t mel_bins = scalar_int_input(ctx, 0, "num_mel_bins", 0);
    const int64_t dft_length = scalar_int_input(ctx, 1, "dft_length", 0);
    const int64_t rate = scalar_int_input(ctx, 2, "sample_rate", 0);
    if (mel_bins < 0 || mel_bins > kMaxLength) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'num_mel_bins' = " + std::to_string(mel_bins) +
                                                 " is out of range [0, " +
                                                 std::to_string(kMaxLength) + "]");
    }
    check_length(ctx, dft_length, "input 'dft_length'");
    if (rate < 1) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'sample_rate' = " + std::to_string(rate) + " must be positive");
    }
    const Tensor& lo_t = ctx.required_input(3);
    const double lo_hz = scalar_float_input(ctx, 3, "lower_edge_hertz");
    const double hi_hz = scalar_float_input(ctx, 4, "upper_edge_hertz");
    if (!std::isfinite(lo_hz) || !std::isfinite(hi_hz)) {
      ctx.fail(StatusCode::kInvalidArgument, "the edge frequencies must be finite");
    }
    // The reference computes the edge mels and the mel step in the edges' own type (float
    // for float inputs) and the rest in double; the bin edges are floors, so the rounding
    // can move one.
    double lo_mel, mel_step;
    if (lo_t.dtype() == DataType::kDouble) {
      lo_mel = 2595.0 * std::log10(1.0 + lo_hz / 700.0);
      const double hi_mel = 2595.0 * std::log10(1.0 + hi_hz / 700.0);
      mel_step = (hi_mel - lo_mel) / static_cast<double>(mel_bins + 2);
    } else {
      const float lo_f = 2595.0f * std::log10(1.0f + static_cast<float>(lo_hz) / 700.0f);
      const float hi_f = 2595.0f * std::log10(1.0f + static_cast<float>(hi_hz) / 700.0f);
      lo_mel = lo_f;
      mel_step = static_cast<float>((hi_f - lo_f) / static_cast<float>(mel_bins + 2));
    }
    const int64_t spec_bins = dft_length / 2 + 1;
    if (spec_bins * mel_bins > kMaxLength * 16) {
      ctx.fail(StatusCode::kInvalidArgument,
               "the output [" + std::to_string(spec_bins) + ", " + std::to_string(mel_bins) +
                   "] would have more than " + std::to_string(kMaxLength * 16) + " elements");
    }
    std::vector<int64_t> edge(static_cast<size_t>(mel_bins + 2));
    for (int64_t i = 0; i < mel_bins + 2; ++i) {
      const double mel = static_cast<double>(i) * mel_step + lo_mel;
      const double hz = 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0);
      const double b = std::floor(static_cast<double>(dft_length + 1) * hz / rate);
      if (!(b >= 0 && b < static_cast<double>(spec_bins) + 1)) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "band edge " + std::to_string(i) + " falls at spectrogram bin " +
                     std::to_string(b) + ", outside [0, " + std::to_string(spec_bins) +
                     "]: the edge frequencies must lie within [0, sample_rate / 2]");
      }
      edge[i] = static_cast<int64_t>(b);
    }
    std::vector<double> w(static_cast<size_t>(spec_bins * mel_bins), 0.0);
    auto at = [&](int64_t j, int64_t i) -> double& {
      if (j >= spec_bins) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "mel band " + std::to_string(i) + " reaches spectrogram bin " + std::to_string(j) +
                     ", past the last bin " + std::to_string(spec_bins - 1) +
                     ": the upper edge frequency is too high for this dft_length");
      }
      return w[j * mel_bins + i];
    };
    for (int64_t i = 0; i < mel_bins; ++i) {
      const int64_t lo = edge[i], center = edge[i + 1], hi = edge[i + 2];
      const int64_t up = center - lo;
      if (up == 0) {
        at(center, i) = 1.0;
      } else {
        for (int64_t j = lo; j <= center; ++j)
          at(j, i) = static_cast<double>(j - lo) / static_cast<double>(up);
      }
      const int64_t down = hi - center;
      if (down > 0) {
        for (int64_t j = center; j < hi; ++j)
          at(j, i) = static_cast<double>(hi - j) / static_cast<double>(down);
      }
    }
    Tensor& y = ctx.allocate_output(0, dtype_, {spec_bins, mel_bins});
    ORTLITE_DISPATCH_NUMERIC(dtype_, "MelWeightMatrix", [&](auto tag) {
      using T = decltype(tag);
      T* out = y.data<T>();
      for (size_t k = 0; k < w.size(); ++k) {
        if constexpr (ew::is_float_v<T>) {
          out[k] = ew::store<T>(w[k]);
        } else {
          out[k] = static_cast<T>(w[k]);  // values lie in [0, 1]: truncation is defined
        }
      }
    });
  }

 private:
  DataType dtype_;
};

}  // namespace

void register_dft_stft_kernels(KernelRegistry& r) {
  r.add("", "DFT", 17, 19, make_factory<Dft>());
  r.add("", "DFT", 20, kMaxOpset, make_factory<Dft>());
  r.add("", "STFT", 17, kMaxOpset, make_factory<Stft>());
  r.add("", "MelWeightMatrix", 17, kMaxOpset, make_factory<MelWeightMatrix>());
}

}  // namespace ortlite
