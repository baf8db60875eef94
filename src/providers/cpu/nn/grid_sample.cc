// GridSample (opsets 16-23), added for ONNX node conformance: N-D (4-D at opset 16)
// sampling of X [N, C, D1..Dk] at grid [N, O1..Ok, k] (normalized coordinates, innermost
// dim first), modes nearest / (bi)linear / (bi)cubic, padding zeros / border / reflection,
// align_corners. Follows onnx's reference implementation; arithmetic in double. Also
// AffineGrid, which makes such grids.
#include <cmath>
#include <type_traits>

#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {
namespace {

enum class GsMode { kNearest, kLinear, kCubic };
enum class GsPad { kZeros, kBorder, kReflection };

template <typename T>
double gs_to_d(T v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

double reflect(double x, double lo, double hi) {
  const double rng = hi - lo;
  if (rng <= 0) return lo;
  if (x < lo) {
    const double dx = lo - x;
    const int64_t n = static_cast<int64_t>(dx / rng);
    const double r = dx - static_cast<double>(n) * rng;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const int64_t n = static_cast<int64_t>(dx / rng);
    const double r = dx - static_cast<double>(n) * rng;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

void cubic_coeffs(double x, double c[4]) {
  const double a = -0.75;
  x = std::fabs(x);
  c[0] = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a;
  c[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
  c[2] = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1;
  c[3] = ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a;
}

class GridSample final : public Kernel {
 public:
  explicit GridSample(const KernelInfo& info)
      : align_(info.attr_int("align_corners", 0) != 0), four_d_only_(info.opset() < 20) {
    const std::string m = info.attr_string("mode", info.opset() < 20 ? "bilinear" : "linear");
    if (m == "nearest") {
      mode_ = GsMode::kNearest;
    } else if (m == "linear" || m == "bilinear") {
      mode_ = GsMode::kLinear;
    } else if (m == "cubic" || m == "bicubic") {
      mode_ = GsMode::kCubic;
    } else {
      info.fail(StatusCode::kInvalidArgument, "attribute 'mode' = '" + m + "' is unknown");
    }
    const std::string p = info.attr_string("padding_mode", "zeros");
    if (p == "zeros") {
      pad_ = GsPad::kZeros;
    } else if (p == "border") {
      pad_ = GsPad::kBorder;
    } else if (p == "reflection") {
      pad_ = GsPad::kReflection;
    } else {
      info.fail(StatusCode::kInvalidArgument, "attribute 'padding_mode' = '" + p + "' is unknown");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& grid = ctx.required_input(1);
    const size_t r = x.rank();
    if (r < 3 || grid.rank() != r || (four_d_only_ && r != 4)) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'X' " + shape_to_string(x.shape()) + " and 'grid' " +
                   shape_to_string(grid.shape()) +
                   " must be [N, C, D1..Dk] and [N, O1..Ok, k] (k = 2 before opset 20)");
    }
    const size_t k = r - 2;
    if (grid.dim(0) != x.dim(0) || grid.dim(r - 1) != static_cast<int64_t>(k)) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'grid' " + shape_to_string(grid.shape()) +
                                                 " does not match 'X' " +
                                                 shape_to_string(x.shape()));
    }
    const int64_t n = x.dim(0), c = x.dim(1);
    Shape out_shape = {n, c};
    for (size_t i = 1; i + 1 < r; ++i) out_shape.push_back(grid.dim(i));
    std::vector<int64_t> dims(x.shape().begin() + 2, x.shape().end());
    for (int64_t d : dims) {
      if (d <= 0) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "input 'X' " + shape_to_string(x.shape()) + " has an empty spatial dim");
      }
    }
    int64_t in_sp = 1, out_sp = 1;
    for (int64_t d : dims) in_sp *= d;
    for (size_t i = 2; i < out_shape.size(); ++i) out_sp *= out_shape[i];
    std::vector<double> gv(static_cast<size_t>(grid.numel()));
    ORTLITE_DISPATCH_FLOAT(grid.dtype(), "GridSample", [&](auto tag) {
      using T = decltype(tag);
      const T* p = grid.data<T>();
      for (size_t i = 0; i < gv.size(); ++i) gv[i] = gs_to_d(p[i]);
    });
    Tensor& y = ctx.allocate_output(0, x.dtype(), out_shape);
    if (y.numel() == 0) return;
    ORTLITE_DISPATCH_FLOAT(x.dtype(), "GridSample", [&](auto tag) {
      using T = decltype(tag);
      sample<T>(ctx, x.data<T>(), gv.data(), y.data<T>(), n, c, dims, out_sp);
    });
  }

 private:
  // Positions go in chunks: per chunk the taps of every position (input offset and weight,
  // the product of the per-dim weights in the order below; taps in the zeros padding
  // dropped) are found once, then applied to every channel, summed in double in the order
  // of a direct loop over the tap combinations.
  template <typename T>
  void sample(KernelContext& ctx, const T* xs, const double* gv, T* ys, int64_t n, int64_t c,
              const std::vector<int64_t>& dims, int64_t out_sp) const {
    const size_t k = dims.size();
    int64_t in_sp = 1;
    for (int64_t d : dims) in_sp *= d;
    std::vector<double> lo(k), hi(k);
    for (size_t i = 0; i < k; ++i) {
      lo[i] = align_ ? 0.0 : -0.5;
      hi[i] = align_ ? static_cast<double>(dims[i]) - 1 : static_cast<double>(dims[i]) - 0.5;
    }
    std::vector<int64_t> in_strides(k, 1);
    for (size_t i = k - 1; i-- > 0;) in_strides[i] = in_strides[i + 1] * dims[i + 1];
    const int64_t taps = mode_ == GsMode::kNearest ? 1 : (mode_ == GsMode::kLinear ? 2 : 4);
    int64_t combos = 1;
    for (size_t i = 0; i < k; ++i) combos *= taps;
    constexpr int64_t kChunk = 512;
    const int64_t chunks = (out_sp + kChunk - 1) / kChunk;
    parallel_for(
        ctx.thread_pool(), n * chunks,
        static_cast<double>(std::min(out_sp, kChunk) * combos) * (static_cast<double>(c) + 4.0),
        [&](int64_t cb, int64_t ce) {
          std::vector<int64_t> toff(static_cast<size_t>(kChunk * combos));
          std::vector<double> tw(static_cast<size_t>(kChunk * combos));
          std::vector<int64_t> tcount(static_cast<size_t>(kChunk));
          std::vector<std::vector<int64_t>> tap_idx(
              k, std::vector<int64_t>(static_cast<size_t>(taps)));
          std::vector<std::vector<double>> tap_w(k, std::vector<double>(static_cast<size_t>(taps)));
          for (int64_t item = cb; item < ce; ++item) {
            const int64_t b = item / chunks;
            const int64_t o0 = (item % chunks) * kChunk;
            const int64_t len = std::min(kChunk, out_sp - o0);
            for (int64_t j = 0; j < len; ++j) {
              const int64_t o = o0 + j;
              const double* g = gv + (b * out_sp + o) * static_cast<int64_t>(k);
              for (size_t i = 0; i < k; ++i)
                taps_of(g[k - 1 - i], dims[i], lo[i], hi[i], tap_idx[i], tap_w[i]);
              int64_t cnt = 0;
              if (k == 2) {
                // The combinations in the same order (dim 1 fastest), weight w1 * w0.
                int64_t* to = &toff[static_cast<size_t>(j * combos)];
                double* tws = &tw[static_cast<size_t>(j * combos)];
                for (int64_t q0 = 0; q0 < taps; ++q0) {
                  const int64_t i0 = tap_idx[0][static_cast<size_t>(q0)];
                  for (int64_t q1 = 0; q1 < taps; ++q1) {
                    const int64_t i1 = tap_idx[1][static_cast<size_t>(q1)];
                    if (i0 < 0 || i1 < 0) continue;
                    to[cnt] = i0 * in_strides[0] + i1;
                    tws[cnt] =
                        tap_w[1][static_cast<size_t>(q1)] * tap_w[0][static_cast<size_t>(q0)];
                    ++cnt;
                  }
                }
                tcount[static_cast<size_t>(j)] = cnt;
                continue;
              }
              for (int64_t combo = 0; combo < combos; ++combo) {
                int64_t rem = combo, off = 0;
                double w = 1;
                bool zero = false;
                for (size_t i = k; i-- > 0;) {
                  const size_t q = static_cast<size_t>(rem % taps);
                  rem /= taps;
                  const int64_t ix = tap_idx[i][q];
                  w *= tap_w[i][q];
                  if (ix < 0) {
                    zero = true;
                  } else {
                    off += ix * in_strides[i];
                  }
                }
                if (zero) continue;
                toff[static_cast<size_t>(j * combos + cnt)] = off;
                tw[static_cast<size_t>(j * combos + cnt)] = w;
                ++cnt;
              }
              tcount[static_cast<size_t>(j)] = cnt;
            }
            for (int64_t ch = 0; ch < c; ++ch) {
              const T* src = xs + (b * c + ch) * in_sp;
              T* dst = ys + (b * c + ch) * out_sp + o0;
              for (int64_t j = 0; j < len; ++j) {
                const int64_t* to = &toff[static_cast<size_t>(j * combos)];
                const double* w = &tw[static_cast<size_t>(j * combos)];
                const int64_t cnt = tcount[static_cast<size_t>(j)];
                double acc = 0;
                if (cnt == 4) {  // bilinear inside the image: unrolled, same order
                  acc += w[0] * gs_to_d(src[to[0]]);
                  acc += w[1] * gs_to_d(src[to[1]]);
                  acc += w[2] * gs_to_d(src[to[2]]);
                  acc += w[3] * gs_to_d(src[to[3]]);
                } else {
                  for (int64_t t = 0; t < cnt; ++t) acc += w[t] * gs_to_d(src[to[t]]);
                }
                if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
                  dst[j] = T(static_cast<float>(acc));
                } else {
                  dst[j] = static_cast<T>(acc);
                }
              }
            }
          }
        });
  }

  // The taps along one dim of normalized coordinate nv: input index and weight each; index
  // -1 marks a tap in the zeros padding.
  void taps_of(double nv, int64_t dim, double lo, double hi, std::vector<int64_t>& idx,
               std::vector<double>& wt) const {
    const double len = static_cast<double>(dim);
    float xf = align_ ? static_cast<float>((nv + 1) / 2.0 * (len - 1))
                      : static_cast<float>(((nv + 1) * len - 1) / 2.0);
    double v = xf;
    if (mode_ == GsMode::kNearest) v = std::nearbyint(v);
    if (v < lo || v > hi) {
      if (pad_ == GsPad::kBorder) {
        v = std::min(std::max(v, 0.0), len - 1);
      } else if (pad_ == GsPad::kReflection) {
        v = reflect(v, lo, hi);
      }
    }
    auto fix = [&](int64_t ix) -> int64_t {
      if (ix >= 0 && ix < dim) return ix;
      if (pad_ == GsPad::kZeros) return -1;
      if (pad_ == GsPad::kBorder) return std::min<int64_t>(std::max<int64_t>(ix, 0), dim - 1);
      int64_t rx = static_cast<int64_t>(reflect(static_cast<double>(ix), lo, hi));
      return std::min<int64_t>(std::max<int64_t>(rx, 0), dim - 1);
    };
    if (mode_ == GsMode::kNearest) {
      idx[0] = fix(static_cast<int64_t>(v));
      wt[0] = 1;
    } else {
      const double f = std::floor(v);
      const int64_t x0 = static_cast<int64_t>(f);
      const double t = v - f;
      if (mode_ == GsMode::kLinear) {
        idx[0] = fix(x0);
        idx[1] = fix(x0 + 1);
        wt[0] = 1 - t;
        wt[1] = t;
      } else {
        double cc[4];
        cubic_coeffs(t, cc);
        for (int64_t q = 0; q < 4; ++q) {
          idx[static_cast<size_t>(q)] = fix(x0 - 1 + q);
          wt[static_cast<size_t>(q)] = cc[q];
        }
      }
    }
  }

  GsMode mode_ = GsMode::kLinear;
  GsPad pad_ = GsPad::kZeros;
  bool align_;
  bool four_d_only_;
};

// AffineGrid (opset 20): theta [N, 2, 3] / [N, 3, 4] and size [N, C, H, W] /
// [N, C, D, H, W] give the sampling grid [N, H, W, 2] / [N, D, H, W, 3] (x first).
class AffineGrid final : public Kernel {
 public:
  explicit AffineGrid(const KernelInfo& info) : align_(info.attr_int("align_corners", 0) != 0) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& theta = ctx.required_input(0);
    const Tensor& size_t_ = ctx.required_input(1);
    if (size_t_.dtype() != DataType::kInt64 || size_t_.rank() != 1 ||
        (size_t_.numel() != 4 && size_t_.numel() != 5)) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'size' must be int64 [4] or [5]");
    }
    const int64_t* sz = size_t_.data<int64_t>();
    const int64_t k = size_t_.numel() - 2;  // 2 or 3 spatial dims
    const int64_t n = sz[0];
    if (theta.rank() != 3 || theta.dim(0) != n || theta.dim(1) != k || theta.dim(2) != k + 1) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'theta' " + shape_to_string(theta.shape()) +
                                                 " must be [N, " + std::to_string(k) + ", " +
                                                 std::to_string(k + 1) + "]");
    }
    std::vector<int64_t> sp(sz + 2, sz + 2 + k);  // (H, W) or (D, H, W)
    Shape out_shape = {n};
    int64_t pts = 1;
    for (int64_t d : sp) {
      if (d < 0 || d > (int64_t{1} << 20)) {
        ctx.fail(StatusCode::kInvalidArgument, "input 'size' has an out-of-range dim");
      }
      out_shape.push_back(d);
      pts *= d;
    }
    out_shape.push_back(k);
    std::vector<double> th(static_cast<size_t>(theta.numel()));
    ORTLITE_DISPATCH_FLOAT(theta.dtype(), "AffineGrid", [&](auto tag) {
      using T = decltype(tag);
      const T* p = theta.data<T>();
      for (size_t i = 0; i < th.size(); ++i) th[i] = gs_to_d(p[i]);
    });
    auto base = [&](int64_t i, int64_t len) {
      if (align_)
        return len <= 1 ? 0.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(len - 1);
      return (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(len) - 1.0;
    };
    // Each axis's base coordinates once; the points in row-major order by a counter.
    std::vector<std::vector<double>> axis(static_cast<size_t>(k));
    for (int64_t d = 0; d < k; ++d) {
      const int64_t len = sp[static_cast<size_t>(d)];
      for (int64_t i = 0; i < len; ++i) axis[static_cast<size_t>(d)].push_back(base(i, len));
    }
    Tensor& y = ctx.allocate_output(0, theta.dtype(), out_shape);
    if (pts == 0) return;
    ORTLITE_DISPATCH_FLOAT(theta.dtype(), "AffineGrid", [&](auto tag) {
      using T = decltype(tag);
      auto put = [](double v) {
        if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
          return T(static_cast<float>(v));
        } else {
          return static_cast<T>(v);
        }
      };
      T* o = y.data<T>();
      std::vector<double> coord(static_cast<size_t>(k + 1), 1.0);
      std::vector<int64_t> idx(static_cast<size_t>(k), 0);
      for (int64_t b = 0; b < n; ++b) {
        const double* t = &th[static_cast<size_t>(b * k * (k + 1))];
        if (k == 2) {
          // Each output ((t0 x + t1 y) + t2) as the general loop sums it, the row's
          // products by y taken once.
          const std::vector<double>& xs = axis[1];
          for (int64_t h = 0; h < sp[0]; ++h) {
            const double yv = axis[0][static_cast<size_t>(h)];
            const double c0 = t[1] * yv;
            const double c1 = t[4] * yv;
            for (size_t w = 0; w < xs.size(); ++w, o += 2) {
              o[0] = put(t[0] * xs[w] + c0 + t[2] * 1.0);
              o[1] = put(t[3] * xs[w] + c1 + t[5] * 1.0);
            }
          }
          continue;
        }
        std::fill(idx.begin(), idx.end(), 0);
        // coord = (x, y[, z], 1): x runs over the last spatial dim.
        for (int64_t d = 0; d < k; ++d)
          coord[static_cast<size_t>(k - 1 - d)] = axis[static_cast<size_t>(d)][0];
        for (int64_t p = 0; p < pts; ++p) {
          for (int64_t r = 0; r < k; ++r) {
            double v = 0;
            for (int64_t c = 0; c <= k; ++c)
              v += t[r * (k + 1) + c] * coord[static_cast<size_t>(c)];
            *o++ = put(v);
          }
          for (int64_t d = k; d-- > 0;) {
            const size_t du = static_cast<size_t>(d);
            if (++idx[du] == sp[du]) idx[du] = 0;
            coord[static_cast<size_t>(k - 1 - d)] = axis[du][static_cast<size_t>(idx[du])];
            if (idx[du] != 0) break;
          }
        }
      }
    });
  }

 private:
  bool align_;
};

}  // namespace

void register_grid_sample(KernelRegistry& r) {
  r.add("", "AffineGrid", 20, kNewestOpset, make_factory<AffineGrid>());
  r.add("", "GridSample", 16, 19, make_factory<GridSample>());
  r.add("", "GridSample", 20, 21, make_factory<GridSample>());
  r.add("", "GridSample", 22, kNewestOpset, make_factory<GridSample>());
}

}  // namespace nn
}  // namespace ortlite
