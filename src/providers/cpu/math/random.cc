// Random generators: RandomNormal, RandomUniform, RandomNormalLike, RandomUniformLike,
// Bernoulli, Multinomial.
//
// The stream is numpy's legacy RandomState (MT19937 seeded with init_genrand, 53-bit
// doubles, polar Box-Muller normals, inversion binomial), so that a node with a `seed`
// gives exactly what onnx's reference implementation (onnx.reference) gives for that seed.
// A kernel holds no generator state: every run starts a fresh stream, from the seed when
// the node has one (the same values on every run of every session), else from a
// process-wide random base mixed with a run counter (different values on every run). That
// keeps a session free of shared mutable state, so concurrent runs need no lock.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "providers/cpu/math/math_kernels.h"

namespace ortlite {
namespace {

struct Seed {
  bool fixed = false;
  uint32_t value = 0;
};

// onnx.reference seeds RandomState(int(seed)) and treats a NaN seed as "no seed". Seeds
// outside [0, 2^32), which numpy would reject, are reduced modulo 2^32 instead.
Seed read_seed(const KernelInfo& info) {
  Seed s;
  if (!info.has_attr("seed")) return s;
  const double v = info.attr_float("seed", 0.0f);
  if (std::isnan(v)) return s;
  if (std::isinf(v)) info.fail(StatusCode::kInvalidArgument, "attribute 'seed' must be finite");
  double m = std::fmod(std::trunc(v), 4294967296.0);
  if (m < 0) m += 4294967296.0;
  s.fixed = true;
  s.value = static_cast<uint32_t>(m);
  return s;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Entropy for unseeded runs: read once per process, then varied by a counter, so a run
// costs no system call.
uint64_t process_entropy() {
  static const uint64_t base = [] {
    uint64_t b =
        static_cast<uint64_t>(std::chrono::high_resolution_clock::now().time_since_epoch().count());
    try {
      std::random_device rd;
      b ^= (static_cast<uint64_t>(rd()) << 32) ^ rd();
    } catch (const std::exception&) {
      // No entropy device: the clock alone still varies between processes.
    }
    return splitmix64(b);
  }();
  return base;
}

class RandomStream {
 public:
  explicit RandomStream(const Seed& seed) {
    if (seed.fixed) {
      mt_.seed(seed.value);
    } else {
      static std::atomic<uint64_t> counter{0};
      const uint64_t a = splitmix64(process_entropy() + counter.fetch_add(1));
      const uint64_t b = splitmix64(a);
      std::seed_seq seq{static_cast<uint32_t>(a), static_cast<uint32_t>(a >> 32),
                        static_cast<uint32_t>(b), static_cast<uint32_t>(b >> 32)};
      mt_.seed(seq);
    }
  }

  // Uniform in [0, 1) with 53 random bits (numpy's random_sample).
  double next_double() {
    const uint32_t a = static_cast<uint32_t>(mt_()) >> 5;
    const uint32_t b = static_cast<uint32_t>(mt_()) >> 6;
    return (a * 67108864.0 + b) / 9007199254740992.0;
  }

  // Standard normal, polar method; the second value of each pair is kept for the next call.
  double gauss() {
    if (has_gauss_) {
      has_gauss_ = false;
      return gauss_;
    }
    double x1, x2, r2;
    do {
      x1 = 2.0 * next_double() - 1.0;
      x2 = 2.0 * next_double() - 1.0;
      r2 = x1 * x1 + x2 * x2;
    } while (r2 >= 1.0 || r2 == 0.0);
    const double f = std::sqrt(-2.0 * std::log(r2) / r2);
    gauss_ = f * x1;
    has_gauss_ = true;
    return f * x2;
  }

  // One Bernoulli(p) draw, as numpy's legacy binomial(1, p): inversion on min(p, 1 - p),
  // at least one draw even for p = 0.
  int bernoulli(double p) {
    const double pp = p <= 0.5 ? p : 1.0 - p;
    const double q = 1.0 - pp;
    const double qn = std::exp(std::log(q));
    int x = 0;
    double px = qn;
    double u = next_double();
    while (u > px) {
      ++x;
      if (x > 1) {
        x = 0;
        px = qn;
        u = next_double();
      } else {
        u -= px;
        px = (pp * px) / q;
      }
    }
    return p <= 0.5 ? x : 1 - x;
  }

 private:
  std::mt19937 mt_;
  bool has_gauss_ = false;
  double gauss_ = 0.0;
};

bool is_float_type(DataType t) {
  return dtype_is_float(t);
}

DataType read_float_dtype(const KernelInfo& info, const char* name, int64_t default_value) {
  const int64_t v = info.attr_int(name, default_value);
  const DataType t = static_cast<DataType>(v);
  if (v < 0 || v > 64 || !is_float_type(t)) {
    info.fail(StatusCode::kInvalidArgument, std::string("attribute '") + name +
                                                "' = " + std::to_string(v) +
                                                " is not float, double, float16 or bfloat16");
  }
  return t;
}

// RandomNormal / RandomUniform (shape from the `shape` attribute) and their *Like forms
// (shape, and by default type, from the input).
class RandomKernel final : public Kernel {
 public:
  RandomKernel(const KernelInfo& info, bool normal, bool like)
      : normal_(normal), like_(like), seed_(read_seed(info)) {
    if (normal) {
      a_ = info.attr_float("mean", 0.0f);
      b_ = info.attr_float("scale", 1.0f);
    } else {
      a_ = info.attr_float("low", 0.0f);
      b_ = info.attr_float("high", 1.0f);
    }
    if (like) {
      has_dtype_ = info.has_attr("dtype");
      if (has_dtype_) dtype_ = read_float_dtype(info, "dtype", 1);
    } else {
      has_dtype_ = true;
      dtype_ = read_float_dtype(info, "dtype", 1);
      if (!info.has_attr("shape")) {
        info.fail(StatusCode::kInvalidGraph, "attribute 'shape' is required");
      }
      shape_ = info.attr_ints("shape");
      for (int64_t d : shape_) {
        if (d < 0) {
          info.fail(StatusCode::kInvalidArgument,
                    "attribute 'shape' has a negative dimension: " + shape_to_string(shape_));
        }
      }
    }
  }

  void compute(KernelContext& ctx) const override {
    Shape shape = shape_;
    DataType dt = dtype_;
    if (like_) {
      const Tensor& x = ctx.required_input(0);
      shape = x.shape();
      if (!has_dtype_) {
        dt = x.dtype();
        if (!is_float_type(dt)) {
          ctx.fail(StatusCode::kInvalidArgument,
                   std::string("the output type is taken from input 'input', which is ") +
                       dtype_name(dt) +
                       ": set attribute 'dtype' to float, double, float16 or bfloat16");
        }
      }
    }
    Tensor& y = ctx.allocate_output(0, dt, shape);
    const int64_t n = y.numel();
    RandomStream rng(seed_);
    // onnx.reference converts each draw to the output type first, then scales and shifts
    // in that type: the same roundings here.
    const double scale = normal_ ? static_cast<double>(b_) : static_cast<double>(b_) - a_;
    const double shift = a_;
    ORTLITE_DISPATCH_FLOAT(dt, "random output", [&](auto tag) {
      using T = decltype(tag);
      using C = ew::compute_t<T>;
      T* out = y.data<T>();
      const C s = ew::load(ew::store<T>(scale));
      const C o = ew::load(ew::store<T>(shift));
      for (int64_t i = 0; i < n; ++i) {
        const double r = normal_ ? rng.gauss() : rng.next_double();
        const C v = ew::load(ew::store<T>(r));
        const C scaled = ew::load(ew::store<T>(v * s));
        out[i] = ew::store<T>(scaled + o);
      }
    });
  }

 private:
  bool normal_, like_;
  Seed seed_;
  float a_ = 0, b_ = 1;
  bool has_dtype_ = false;
  DataType dtype_ = DataType::kFloat;
  Shape shape_;
};

// Bernoulli(input): 1 with probability input[i], else 0; output type `dtype` (default the
// input's type).
class Bernoulli final : public Kernel {
 public:
  explicit Bernoulli(const KernelInfo& info)
      : seed_(read_seed(info)), has_dtype_(info.has_attr("dtype")) {
    if (has_dtype_) {
      const int64_t v = info.attr_int("dtype", 1);
      dtype_ = static_cast<DataType>(v);
      if (v < 0 || v > 64 || !dtype_supported(dtype_) || dtype_ == DataType::kString) {
        info.fail(StatusCode::kInvalidArgument,
                  "attribute 'dtype' = " + std::to_string(v) + " is not a numeric or bool type");
      }
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    if (!is_float_type(x.dtype())) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input 'input' must be float, double, float16 or bfloat16, got ") +
                   dtype_name(x.dtype()));
    }
    const int64_t n = x.numel();
    std::vector<double> p(static_cast<size_t>(n));
    ORTLITE_DISPATCH_FLOAT(x.dtype(), "Bernoulli", [&](auto tag) {
      using T = decltype(tag);
      const T* src = x.data<T>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<double>(ew::load(src[i]));
    });
    for (int64_t i = 0; i < n; ++i) {
      if (!(p[i] >= 0.0 && p[i] <= 1.0)) {
        ctx.fail(StatusCode::kInvalidArgument, "input 'input' element " + std::to_string(i) +
                                                   " = " + std::to_string(p[i]) +
                                                   " is not a probability in [0, 1]");
      }
    }
    const DataType dt = has_dtype_ ? dtype_ : x.dtype();
    Tensor& y = ctx.allocate_output(0, dt, x.shape());
    RandomStream rng(seed_);
    ORTLITE_DISPATCH_NUMERIC(dt, "Bernoulli output", [&](auto tag) {
      using T = decltype(tag);
      T* out = y.data<T>();
      for (int64_t i = 0; i < n; ++i) out[i] = ew::store<T>(rng.bernoulli(p[i]));
    });
  }

 private:
  Seed seed_;
  bool has_dtype_;
  DataType dtype_ = DataType::kFloat;
};

// Multinomial(input [batch, classes] of unnormalized log-probabilities): `sample_size`
// class indices per row. Non-finite log-probabilities get probability 0.
class Multinomial final : public Kernel {
 public:
  explicit Multinomial(const KernelInfo& info)
      : seed_(read_seed(info)), samples_(info.attr_int("sample_size", 1)) {
    const int64_t v = info.attr_int("dtype", 6);
    dtype_ = static_cast<DataType>(v);
    if (dtype_ != DataType::kInt32 && dtype_ != DataType::kInt64) {
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'dtype' = " + std::to_string(v) + " must be int32 (6) or int64 (7)");
    }
    if (samples_ < 0) {
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'sample_size' = " + std::to_string(samples_) + " is negative");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    if (!is_float_type(x.dtype())) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input 'input' must be float, double, float16 or bfloat16, got ") +
                   dtype_name(x.dtype()));
    }
    if (x.rank() != 2 || x.dim(1) < 1) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'input' must have shape [batch_size, class_size] with class_size >= 1, got " +
                   shape_to_string(x.shape()));
    }
    const int64_t batch = x.dim(0), classes = x.dim(1);
    std::vector<double> logits(static_cast<size_t>(x.numel()));
    ORTLITE_DISPATCH_FLOAT(x.dtype(), "Multinomial", [&](auto tag) {
      using T = decltype(tag);
      const T* src = x.data<T>();
      for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<double>(ew::load(src[i]));
    });
    Tensor& y = ctx.allocate_output(0, dtype_, {batch, samples_});
    RandomStream rng(seed_);
    std::vector<double> cdf(static_cast<size_t>(classes));
    for (int64_t b = 0; b < batch; ++b) {
      const double* row = logits.data() + b * classes;
      double mx = -INFINITY;
      for (int64_t j = 0; j < classes; ++j)
        if (std::isfinite(row[j])) mx = std::max(mx, row[j]);
      if (!std::isfinite(mx)) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "input 'input' row " + std::to_string(b) + " has no finite log-probability");
      }
      double total = 0;
      int64_t last_positive = 0;
      for (int64_t j = 0; j < classes; ++j) {
        if (std::isfinite(row[j])) {
          const double e = std::exp(row[j] - mx);
          total += e;
          if (e > 0) last_positive = j;
        }
        cdf[j] = total;
      }
      for (int64_t s = 0; s < samples_; ++s) {
        const double target = rng.next_double() * total;
        int64_t k = std::upper_bound(cdf.begin(), cdf.end(), target) - cdf.begin();
        if (k >= classes) k = last_positive;  // target rounded up to the total
        if (dtype_ == DataType::kInt32) {
          y.data<int32_t>()[b * samples_ + s] = static_cast<int32_t>(k);
        } else {
          y.data<int64_t>()[b * samples_ + s] = k;
        }
      }
    }
  }

 private:
  Seed seed_;
  int64_t samples_;
  DataType dtype_;
};

}  // namespace

void register_random_kernels(KernelRegistry& r) {
  const struct {
    const char* name;
    bool normal, like;
  } ops[] = {{"RandomNormal", true, false},
             {"RandomUniform", false, false},
             {"RandomNormalLike", true, true},
             {"RandomUniformLike", false, true}};
  for (const auto& op : ops) {
    const bool normal = op.normal, like = op.like;
    r.add_versions(op.name, {1, 22}, [normal, like](const KernelInfo& info) {
      return std::unique_ptr<Kernel>(new RandomKernel(info, normal, like));
    });
  }
  r.add_versions("Bernoulli", {15, 22}, make_factory<Bernoulli>());
  r.add_versions("Multinomial", {7, 22}, make_factory<Multinomial>());
}

}  // namespace ortlite
