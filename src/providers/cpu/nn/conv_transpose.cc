// ConvTranspose (opsets 1-23), added for ONNX node conformance: N-D, groups, strides,
// dilations, pads / auto_pad, output_padding and output_shape, following onnx's reference
// for the output geometry. float and double: per batch and group, one GEMM (W^T x X: every
// output channel and kernel tap for every input position) and a col2im that adds each tap's
// row into the output; when the kernel tiles the output (kernel == stride, no dilation or
// padding, the common 2x2 stride-2 upsampling) each output is written once, with the bias.
// float16 / bfloat16 (and empty shapes): a direct scatter loop in double.
#include "compute/vectorize.h"  // first: compile options for the loops below

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>

#include "compute/gemm.h"
#include "compute/simd.h"
#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {
namespace {

template <typename T>
double ct_to_d(T v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

// Output geometry of one ConvTranspose call (spatial axes only).
struct CtGeom {
  size_t k = 0;
  std::vector<int64_t> in, ks, s, d, pb, out;
  int64_t in_sp = 1, k_sp = 1, out_sp = 1;
};

// Index q of the kernel taps as per-axis indices kk (row-major over ks).
inline void decompose(int64_t q, const std::vector<int64_t>& ks, std::vector<int64_t>& kk) {
  for (size_t i = ks.size(); i-- > 0;) {
    kk[i] = q % ks[i];
    q /= ks[i];
  }
}
// Row r of the input (all spatial axes but the last, the first counted from a0) as indices.
inline void decompose_rows(int64_t r, int64_t a0, const std::vector<int64_t>& in,
                           std::vector<int64_t>& ii) {
  const size_t L = in.size() - 1;
  for (size_t i = L; i-- > 0;) {
    if (i == 0) {
      ii[0] = a0 + r;
    } else {
      ii[i] = r % in[i];
      r /= in[i];
    }
  }
}
inline bool k_sp_is_pair(const CtGeom& g) {
  return g.ks[g.k - 1] == 2 && g.s[g.k - 1] == 2;
}

// Copies (interleaving) row a into y[0], y[2], ... and row b into y[1], y[3], ... plus `bias`.
template <typename T>
ORTLITE_NN_CLONES void interleave2(const T* a, const T* b, T bias, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    y[2 * i] = a[i] + bias;
    y[2 * i + 1] = b[i] + bias;
  }
}

template <typename T>
ORTLITE_NN_CLONES void add_strided(const T* src, T* dst, int64_t n, int64_t stride) {
  if (stride == 1) {
    for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
    return;
  }
  int64_t i = 0;
  if constexpr (std::is_same_v<T, float>) {
    if (stride == 2) {
      // Four inputs into eight outputs at a time: the inputs interleaved with -0.0f (which
      // adds nothing to any value, -0.0f and NaN included) and added as one vector. The
      // strided scalar loop was half of a 4x4 stride-2 ConvTranspose (1x32x40x40 -> 16).
      // Only while the vector's last output lies before the last one this call adds to,
      // so that no output past its range (another thread's) is read and written back.
      typedef float v4sf __attribute__((vector_size(16)));
      const v4sf mz = {-0.0f, -0.0f, -0.0f, -0.0f};
      for (; i + 4 < n; i += 4) {
        v4sf a;
        v8sf d;
        std::memcpy(&a, src + i, sizeof a);
        std::memcpy(&d, dst + 2 * i, sizeof d);
        d += __builtin_shufflevector(a, mz, 0, 4, 1, 5, 2, 6, 3, 7);
        std::memcpy(dst + 2 * i, &d, sizeof d);
      }
    }
  }
  for (; i < n; ++i) dst[i * stride] += src[i];
}

// Adds (tile: stores, with the bias) col[(ml * k_sp + q) * cols + p], the GEMM's rows for the
// input positions whose first spatial index is in [a0, a1), into the output channels
// [ml0, ml1) of y (one group of one batch).
template <typename T>
void col2im(const CtGeom& g, const T* col, int64_t a0, int64_t a1, int64_t ml0, int64_t ml1,
            const T* bias, bool tile, T* y) {
  const size_t k = g.k, L = k - 1;
  const int64_t inner = g.in_sp / g.in[0];  // positions per index of the first axis
  const int64_t cols = (a1 - a0) * inner;
  const int64_t iw_n = g.in[L], ow_n = g.out[L], sL = g.s[L];
  // Rows: all spatial axes but the last, the first one restricted to [a0, a1).
  int64_t rows = (a1 - a0) * inner / iw_n;
  std::vector<int64_t> ii(k, 0), kk(k, 0);
  for (int64_t ml = ml0; ml < ml1; ++ml) {
    T* yc = y + ml * g.out_sp;
    const T bv = bias ? bias[ml] : T(0);
    if (tile && k_sp_is_pair(g)) {
      // kernel == stride == 2 on the last axis: two taps fill one output row together.
      for (int64_t q = 0; q < g.k_sp; q += 2) {
        decompose(q, g.ks, kk);
        for (int64_t r = 0; r < rows; ++r) {
          decompose_rows(r, a0, g.in, ii);
          int64_t off = 0;
          for (size_t i = 0; i < L; ++i) off = off * g.out[i] + ii[i] * g.s[i] + kk[i];
          const T* src = col + (ml * g.k_sp + q) * cols + r * iw_n;
          interleave2(src, src + cols, bv, yc + off * ow_n, iw_n);
        }
      }
      continue;
    }
    for (int64_t q = 0; q < g.k_sp; ++q) {
      decompose(q, g.ks, kk);
      const int64_t offL = kk[L] * g.d[L] - g.pb[L];
      // Input positions iw with 0 <= iw * sL + offL < ow_n.
      const int64_t lo = std::max<int64_t>(0, floor_div(-offL + sL - 1, sL));
      const int64_t hi = std::min<int64_t>(iw_n, floor_div(ow_n - 1 - offL, sL) + 1);
      if (hi <= lo) continue;
      for (int64_t r = 0; r < rows; ++r) {
        decompose_rows(r, a0, g.in, ii);
        int64_t off = 0;
        bool inside = true;
        for (size_t i = 0; i < L; ++i) {
          const int64_t pos = ii[i] * g.s[i] - g.pb[i] + kk[i] * g.d[i];
          if (pos < 0 || pos >= g.out[i]) {
            inside = false;
            break;
          }
          off = off * g.out[i] + pos;
        }
        if (!inside) continue;
        const T* src = col + (ml * g.k_sp + q) * cols + r * iw_n + lo;
        T* dst = yc + off * ow_n + lo * sL + offL;
        if (tile) {
          for (int64_t i = 0; i < hi - lo; ++i) dst[i * sL] = src[i] + bv;
        } else {
          add_strided(src, dst, hi - lo, sL);
        }
      }
    }
  }
}

template <typename T>
void conv_transpose_gemm(const CtGeom& g, const T* x, const T* w, const T* bias, T* y, int64_t n,
                         int64_t group, int64_t cg, int64_t mg, ThreadPool* pool) {
  const size_t k = g.k;
  bool tile = true;
  for (size_t i = 0; i < k; ++i) {
    tile = tile && g.d[i] == 1 && g.ks[i] == g.s[i] && g.pb[i] == 0 && g.out[i] == g.in[i] * g.s[i];
  }
  const int64_t m = mg * group, rows_w = mg * g.k_sp;
  if (!tile) {
    for (int64_t i = 0; i < n * m; ++i) {
      std::fill(y + i * g.out_sp, y + (i + 1) * g.out_sp, bias ? bias[i % m] : T(0));
    }
  }
  // The GEMM's result in chunks of whole indices of the first spatial axis (whole rows: 1-D
  // in one piece), about 4 MiB each.
  const int64_t inner = g.in_sp / g.in[0];
  const int64_t budget = (int64_t{1} << 22) / static_cast<int64_t>(sizeof(T));
  const int64_t step =
      k == 1 ? g.in[0]
             : std::max<int64_t>(1, std::min<int64_t>(g.in[0], budget / (rows_w * inner)));
  std::unique_ptr<T[]> col(new T[static_cast<size_t>(rows_w * step * inner)]);
  for (int64_t bi = 0; bi < n; ++bi) {
    for (int64_t gi = 0; gi < group; ++gi) {
      const T* xg = x + (bi * group + gi) * cg * g.in_sp;
      const T* wg = w + gi * cg * rows_w;
      T* yg = y + (bi * m + gi * mg) * g.out_sp;
      const T* bg = bias ? bias + gi * mg : nullptr;
      for (int64_t a0 = 0; a0 < g.in[0]; a0 += step) {
        const int64_t a1 = std::min(g.in[0], a0 + step), cols = (a1 - a0) * inner;
        gemm(true, false, rows_w, cols, cg, T(1), wg, rows_w, xg + a0 * inner, g.in_sp, T(0),
             col.get(), cols, pool);
        parallel_for(pool, mg, static_cast<double>(g.k_sp * cols), [&](int64_t m0, int64_t m1) {
          col2im(g, col.get(), a0, a1, m0, m1, bg, tile, yg);
        });
      }
    }
  }
}

class ConvTranspose final : public Kernel {
 public:
  explicit ConvTranspose(const KernelInfo& info)
      : auto_pad_(info.attr_string("auto_pad", "NOTSET")),
        group_(info.attr_int("group", 1)),
        dilations_(info.attr_ints("dilations")),
        strides_(info.attr_ints("strides")),
        pads_(info.attr_ints("pads")),
        has_pads_(info.has_attr("pads")),
        output_padding_(info.attr_ints("output_padding")),
        output_shape_(info.attr_ints("output_shape")),
        has_output_shape_(info.has_attr("output_shape")) {
    if (auto_pad_ != "NOTSET" && auto_pad_ != "SAME_UPPER" && auto_pad_ != "SAME_LOWER" &&
        auto_pad_ != "VALID") {
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'auto_pad' = '" + auto_pad_ + "' is unknown");
    }
    if (group_ < 1) info.fail(StatusCode::kInvalidArgument, "attribute 'group' must be >= 1");
    for (int64_t v : strides_)
      if (v < 1) info.fail(StatusCode::kInvalidArgument, "attribute 'strides' must be >= 1");
    for (int64_t v : dilations_)
      if (v < 1) info.fail(StatusCode::kInvalidArgument, "attribute 'dilations' must be >= 1");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& w = ctx.required_input(1);
    const Tensor* b = ctx.input(2);
    const size_t r = x.rank();
    if (r < 3 || w.rank() != r) {
      ctx.fail(StatusCode::kInvalidArgument, "inputs 'X' " + shape_to_string(x.shape()) +
                                                 " and 'W' " + shape_to_string(w.shape()) +
                                                 " must be [N, C, D...] and [C, M/group, k...]");
    }
    const size_t k = r - 2;
    const int64_t n = x.dim(0), c = x.dim(1);
    if (w.dim(0) != c || c % group_ != 0 || w.dtype() != x.dtype()) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'W' " + shape_to_string(w.shape()) +
                                                 " does not match X " + shape_to_string(x.shape()) +
                                                 " with group " + std::to_string(group_));
    }
    const int64_t mg = w.dim(1), m = mg * group_, cg = c / group_;
    if (b && (b->numel() != m || b->dtype() != x.dtype())) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'B' must hold M = " + std::to_string(m) + " values of the type of X");
    }
    auto attr_or = [&](const std::vector<int64_t>& v, size_t len, int64_t def, const char* what) {
      if (v.empty()) return std::vector<int64_t>(len, def);
      if (v.size() != len) {
        ctx.fail(StatusCode::kInvalidArgument, std::string("attribute '") + what + "' has " +
                                                   std::to_string(v.size()) + " values, expected " +
                                                   std::to_string(len));
      }
      return v;
    };
    const std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
    const std::vector<int64_t> ks(w.shape().begin() + 2, w.shape().end());
    const std::vector<int64_t> s = attr_or(strides_, k, 1, "strides");
    const std::vector<int64_t> d = attr_or(dilations_, k, 1, "dilations");
    const std::vector<int64_t> op = attr_or(output_padding_, k, 0, "output_padding");
    std::vector<int64_t> pb(k, 0), pe(k, 0), out(k);
    const bool same = auto_pad_ == "SAME_UPPER" || auto_pad_ == "SAME_LOWER";
    if (!has_pads_ && same) {
      std::vector<int64_t> os(k);
      for (size_t i = 0; i < k; ++i) os[i] = in[i] * s[i];
      if (has_output_shape_) os = attr_or(output_shape_, k, 0, "output_shape");
      for (size_t i = 0; i < k; ++i) {
        const int64_t total = s[i] * (in[i] - 1) + op[i] + ((ks[i] - 1) * d[i] + 1) - os[i];
        const int64_t half = floor_div(total, 2);
        if (auto_pad_ == "SAME_UPPER") {
          pb[i] = half;
          pe[i] = total - half;
        } else {
          pb[i] = total - half;
          pe[i] = half;
        }
        out[i] = os[i];
      }
    } else {
      if (has_pads_) {
        if (pads_.size() != 2 * k) {
          ctx.fail(StatusCode::kInvalidArgument, "attribute 'pads' has " +
                                                     std::to_string(pads_.size()) +
                                                     " values, expected " + std::to_string(2 * k));
        }
        for (size_t i = 0; i < k; ++i) {
          pb[i] = pads_[i];
          pe[i] = pads_[k + i];
        }
      }
      if (has_output_shape_) {
        out = attr_or(output_shape_, k, 0, "output_shape");
      } else {
        for (size_t i = 0; i < k; ++i) {
          out[i] = s[i] * (in[i] - 1) + op[i] + ((ks[i] - 1) * d[i] + 1) - pb[i] - pe[i];
        }
      }
    }
    Shape out_shape = {n, m};
    int64_t out_sp = 1, in_sp = 1, k_sp = 1;
    for (size_t i = 0; i < k; ++i) {
      if (out[i] < 0) {
        ctx.fail(StatusCode::kInvalidArgument, "the output shape would be negative");
      }
      out_shape.push_back(out[i]);
      out_sp *= out[i];
      in_sp *= in[i];
      k_sp *= ks[i];
    }
    if (out_sp > (int64_t{1} << 28) || n * m * out_sp > (int64_t{1} << 28)) {
      ctx.fail(StatusCode::kInvalidArgument, "the output is too large");
    }
    if ((x.dtype() == DataType::kFloat || x.dtype() == DataType::kDouble) && n > 0 && in_sp > 0 &&
        cg > 0 && mg > 0 && out_sp > 0) {
      CtGeom g;
      g.k = k;
      g.in = in;
      g.ks = ks;
      g.s = s;
      g.d = d;
      g.pb = pb;
      g.out = out;
      g.in_sp = in_sp;
      g.k_sp = k_sp;
      g.out_sp = out_sp;
      Tensor& yt = ctx.allocate_output(0, x.dtype(), out_shape);
      ORTLITE_DISPATCH_FLOAT(x.dtype(), "ConvTranspose", [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
          conv_transpose_gemm<T>(g, x.data<T>(), w.data<T>(), b ? b->data<T>() : nullptr,
                                 yt.data<T>(), n, group_, cg, mg, ctx.thread_pool());
        }
      });
      return;
    }
    std::vector<double> xv(static_cast<size_t>(x.numel())), wv(static_cast<size_t>(w.numel())),
        bv(static_cast<size_t>(m), 0.0);
    auto load = [](const Tensor& t, std::vector<double>& v) {
      ORTLITE_DISPATCH_FLOAT(t.dtype(), "ConvTranspose", [&](auto tag) {
        using T = decltype(tag);
        const T* p = t.data<T>();
        for (size_t i = 0; i < v.size(); ++i) v[i] = ct_to_d(p[i]);
      });
    };
    load(x, xv);
    load(w, wv);
    if (b) load(*b, bv);
    std::vector<double> y(static_cast<size_t>(n * m * out_sp));
    for (int64_t bi = 0; bi < n; ++bi)
      for (int64_t mi = 0; mi < m; ++mi)
        for (int64_t o = 0; o < out_sp; ++o)
          y[static_cast<size_t>((bi * m + mi) * out_sp + o)] = bv[static_cast<size_t>(mi)];
    std::vector<int64_t> ii(k), kk(k);
    for (int64_t bi = 0; bi < n; ++bi) {
      for (int64_t ci = 0; ci < c; ++ci) {
        const int64_t g = ci / cg;
        for (int64_t p = 0; p < in_sp; ++p) {
          int64_t rem = p;
          for (size_t i = k; i-- > 0;) {
            ii[i] = rem % in[i];
            rem /= in[i];
          }
          const double xval = xv[static_cast<size_t>((bi * c + ci) * in_sp + p)];
          if (xval == 0) continue;
          for (int64_t q = 0; q < k_sp; ++q) {
            int64_t rq = q;
            for (size_t i = k; i-- > 0;) {
              kk[i] = rq % ks[i];
              rq /= ks[i];
            }
            int64_t off = 0;
            bool inside = true;
            for (size_t i = 0; i < k; ++i) {
              const int64_t pos = ii[i] * s[i] - pb[i] + kk[i] * d[i];
              if (pos < 0 || pos >= out[i]) {
                inside = false;
                break;
              }
              off = off * out[i] + pos;
            }
            if (!inside) continue;
            for (int64_t ml = 0; ml < mg; ++ml) {
              const int64_t mi = g * mg + ml;
              y[static_cast<size_t>((bi * m + mi) * out_sp + off)] +=
                  xval * wv[static_cast<size_t>((ci * mg + ml) * k_sp + q)];
            }
          }
        }
      }
    }
    Tensor& yt = ctx.allocate_output(0, x.dtype(), out_shape);
    ORTLITE_DISPATCH_FLOAT(x.dtype(), "ConvTranspose", [&](auto tag) {
      using T = decltype(tag);
      T* p = yt.data<T>();
      for (size_t i = 0; i < y.size(); ++i) {
        if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
          p[i] = T(static_cast<float>(y[i]));
        } else {
          p[i] = static_cast<T>(y[i]);
        }
      }
    });
  }

 private:
  std::string auto_pad_;
  int64_t group_;
  std::vector<int64_t> dilations_, strides_, pads_;
  bool has_pads_;
  std::vector<int64_t> output_padding_, output_shape_;
  bool has_output_shape_;
};

}  // namespace

void register_conv_transpose(KernelRegistry& r) {
  r.add("", "ConvTranspose", 1, 10, make_factory<ConvTranspose>());
  r.add("", "ConvTranspose", 11, 21, make_factory<ConvTranspose>());
  r.add("", "ConvTranspose", 22, kNewestOpset, make_factory<ConvTranspose>());
}

}  // namespace nn
}  // namespace ortlite
