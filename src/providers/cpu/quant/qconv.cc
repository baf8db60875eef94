// QLinearConv (10) and ConvInteger (10): N-D convolution of (x - x_zero_point) and
// (w - w_zero_point) with Conv's attributes (pads / auto_pad, strides, dilations, group).
// x's zero point is per tensor; w's per tensor or per output channel ([M]). Padding
// contributes 0 after the zero point is taken off, i.e. the input is padded with its zero
// point.
//
// As in Conv: per image and group, Y_g[Mg x P] = W_g[Mg x Kg] * col[Kg x P] with the im2col
// expansion over bounded chunks of output positions. The 8-bit products go through the
// float GEMM in chunks of Kg short enough to be exact (exact_float_chunk, quant_common.h),
// added up in double and wrapped to int32, the overflow the spec allows. QLinearConv adds
// the int32 bias and requantizes like onnxruntime (x_scale * w_scale[m] / y_scale in float,
// times the sum in float, rounded half to even, plus y_zero_point, saturated). A constant w
// (with a constant or absent zero point) is converted and packed once at load, per group and
// chunk of Kg (sized for the worst case |x - zx| = 255).
#include <algorithm>
#include <cmath>
#include <vector>

#include "compute/gemm.h"
#include "providers/cpu/nn/nn_common.h"
#include "providers/cpu/quant/quant_common.h"

namespace ortlite {
namespace quant {
namespace {

using nn::SpatialAttrs;
using nn::SpatialGeometry;

bool is_int8_type(DataType t) {
  return t == DataType::kUInt8 || t == DataType::kInt8;
}

template <typename Fn>
void dispatch_int8(DataType t, Fn&& fn) {
  if (t == DataType::kUInt8) return fn(uint8_t{});
  return fn(int8_t{});
}

std::vector<float>& col_scratch() {
  thread_local std::vector<float> buf;
  return buf;
}

std::vector<float>& out_scratch() {
  thread_local std::vector<float> buf;
  return buf;
}

// w's zero point per output channel; false when it is neither single nor [M].
bool weight_zero_points(const Tensor* zw, int64_t M, std::vector<double>* out) {
  out->assign(static_cast<size_t>(M), 0.0);
  if (!zw) return true;
  const std::vector<double> v = tensor_values(*zw, "w_zero_point");
  if (is_single(*zw)) {
    std::fill(out->begin(), out->end(), v[0]);
    return true;
  }
  if (zw->rank() != 1 || zw->dim(0) != M) return false;
  *out = v;
  return true;
}

// The integer convolution shared by both operators.
class QConvBase : public Kernel {
 protected:
  QConvBase(const KernelInfo& info, size_t w_in, size_t wz_in) {
    attrs_.load(info, false);
    group_ = info.attr_int("group", 1);
    if (group_ < 1) {
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'group' must be >= 1, got " + std::to_string(group_));
    }
    const Tensor* w = info.has_input(w_in) ? info.constant_input(w_in) : nullptr;
    if (!w || w->rank() < 3 || w->numel() == 0 || !is_int8_type(w->dtype())) return;
    const int64_t M = w->dim(0);
    if (M % group_ != 0) return;  // reported at run time with the input shapes
    const Tensor* zw = nullptr;
    if (info.has_input(wz_in)) {
      zw = info.constant_input(wz_in);
      if (!zw || zw->dtype() != w->dtype()) return;
    }
    std::vector<double> z;
    if (!weight_zero_points(zw, M, &z)) return;
    const int64_t Kg = w->numel() / M, Mg = M / group_;
    std::vector<float> wd;
    const float mw = weights(*w, z, &wd);
    packed_kc_ = std::min(Kg, exact_float_chunk(255.0 * mw));
    for (int64_t g = 0; g < group_; ++g) {
      for (int64_t k0 = 0; k0 < Kg; k0 += packed_kc_) {
        packed_.push_back(pack_gemm_a<float>(false, Mg, std::min(packed_kc_, Kg - k0),
                                             wd.data() + g * Mg * Kg + k0, Kg));
      }
    }
    packed_dtype_ = w->dtype();
    packed_shape_ = w->shape();
  }

  // w minus its per-channel zero points as float; returns the largest |w - zw|.
  static float weights(const Tensor& w, const std::vector<double>& z, std::vector<float>* out) {
    out->resize(static_cast<size_t>(w.numel()));
    float* wd = out->data();
    const int64_t M = w.dim(0), Kg = M ? w.numel() / M : 0;
    float mx = 0.0f;
    dispatch_int8(w.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* s = w.data<T>();
      for (int64_t m = 0; m < M; ++m) {
        const float zm = static_cast<float>(z[m]);
        for (int64_t k = 0; k < Kg; ++k) {
          wd[m * Kg + k] = static_cast<float>(s[m * Kg + k]) - zm;
          mx = std::max(mx, std::fabs(wd[m * Kg + k]));
        }
      }
    });
    return mx;
  }

  // Checks x / w / their zero points, computes c[N * M * P] = conv(x - zx, w - zw) exactly
  // and returns the output shape [N, M, out...].
  Shape accumulate(const KernelContext& ctx, const Tensor& x, const Tensor* zx, const Tensor& w,
                   const Tensor* zw, std::vector<double>& c) const {
    if (!is_int8_type(x.dtype()) || !is_int8_type(w.dtype())) {
      ctx.fail(StatusCode::kInvalidArgument, std::string("inputs 'x' and 'w' must be uint8 or ") +
                                                 "int8, got " + dtype_name(x.dtype()) + " and " +
                                                 dtype_name(w.dtype()));
    }
    if ((zx && zx->dtype() != x.dtype()) || (zw && zw->dtype() != w.dtype())) {
      ctx.fail(StatusCode::kInvalidArgument,
               "zero points must have the type of their input: 'x' " +
                   std::string(dtype_name(x.dtype())) + ", 'x_zero_point' " +
                   (zx ? dtype_name(zx->dtype()) : "(absent)") + ", 'w' " + dtype_name(w.dtype()) +
                   ", 'w_zero_point' " + (zw ? dtype_name(zw->dtype()) : "(absent)"));
    }
    if (x.rank() < 3) {
      ctx.fail(StatusCode::kInvalidArgument,
               "x must have rank >= 3 (N x C x D1 x ...), got " + shape_to_string(x.shape()));
    }
    if (w.rank() != x.rank()) {
      ctx.fail(StatusCode::kInvalidArgument, "x " + shape_to_string(x.shape()) + " and w " +
                                                 shape_to_string(w.shape()) +
                                                 " must have the same rank");
    }
    const int64_t N = x.dim(0), C = x.dim(1), M = w.dim(0);
    if (C != w.dim(1) * group_) {
      ctx.fail(StatusCode::kInvalidArgument,
               "x " + shape_to_string(x.shape()) + " has " + std::to_string(C) +
                   " channels but w " + shape_to_string(w.shape()) + " expects " +
                   std::to_string(w.dim(1)) + " per group x group " + std::to_string(group_));
    }
    if (M % group_ != 0) {
      ctx.fail(StatusCode::kInvalidArgument,
               "w " + shape_to_string(w.shape()) + ": " + std::to_string(M) +
                   " output channels are not divisible by group " + std::to_string(group_));
    }
    if (zx && !is_single(*zx)) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'x_zero_point' must hold a single value (per-tensor), got shape " +
                   shape_to_string(zx->shape()));
    }
    std::vector<double> zwv;
    if (!weight_zero_points(zw, M, &zwv)) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'w_zero_point' must be a single value or 1-D with " + std::to_string(M) +
                   " elements (one per output channel), got shape " + shape_to_string(zw->shape()));
    }
    const std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
    const std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
    const SpatialGeometry g = nn::conv_geometry(ctx, attrs_, in, kernel);
    Shape yshape{N, M};
    yshape.insert(yshape.end(), g.out.begin(), g.out.end());
    c.assign(static_cast<size_t>(shape_size(yshape)), 0.0);
    const int64_t Cg = C / group_, Mg = M / group_;
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
    if (c.empty() || Kg == 0) return yshape;

    const float zxv = zx ? static_cast<float>(tensor_values(*zx, "x_zero_point")[0]) : 0.0f;
    std::vector<float> xd(static_cast<size_t>(x.numel()));
    float mx = 0.0f;
    dispatch_int8(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* s = x.data<T>();
      for (size_t i = 0; i < xd.size(); ++i) {
        xd[i] = static_cast<float>(s[i]) - zxv;
        mx = std::max(mx, std::fabs(xd[i]));
      }
    });
    const bool use_packed =
        !packed_.empty() && w.dtype() == packed_dtype_ && w.shape() == packed_shape_;
    std::vector<float> wd;
    int64_t kc = packed_kc_;
    if (!use_packed)
      kc = std::min(Kg, exact_float_chunk(static_cast<double>(mx) * weights(w, zwv, &wd)));
    const int64_t nkc = (Kg + kc - 1) / kc;

    int64_t chunk = P;
    if (!pointwise) {
      // Bounded im2col buffer; whole rows of the last output axis when they fit.
      constexpr int64_t kMaxColElems = int64_t(1) << 18;
      const int64_t out_l = g.out[g.rank - 1];
      chunk = std::max<int64_t>(1, std::min<int64_t>(P, kMaxColElems / Kg));
      if (chunk >= out_l) {
        chunk -= chunk % out_l;
      } else if (chunk > 64) {
        chunk -= chunk % 64;
      }
    }
    const int64_t nchunks = (P + chunk - 1) / chunk;
    const int64_t tasks = N * group_ * nchunks;
    ThreadPool* pool = ctx.thread_pool();
    const int nthreads = pool ? pool->num_threads() : 1;
    const bool par_tasks = nthreads > 1 && tasks >= 2 * static_cast<int64_t>(nthreads);
    auto run_task = [&](int64_t t, ThreadPool* tp) {
      const int64_t n = t / (group_ * nchunks);
      const int64_t gi = (t / nchunks) % group_;
      const int64_t p0 = (t % nchunks) * chunk;
      const int64_t pc = std::min(chunk, P - p0);
      const float* xg = xd.data() + (n * C + gi * Cg) * in_size;
      double* yg = c.data() + (n * M + gi * Mg) * P;
      const float* bmat;
      int64_t ldb;
      if (pointwise) {
        bmat = xg + p0;
        ldb = in_size;
      } else {
        std::vector<float>& col = col_scratch();
        if (col.size() < static_cast<size_t>(Kg * pc)) col.resize(static_cast<size_t>(Kg * pc));
        nn::im2col<float>(xg, g, Cg, p0, pc, col.data());
        bmat = col.data();
        ldb = pc;
      }
      std::vector<float>& out = out_scratch();
      if (out.size() < static_cast<size_t>(Mg * pc)) out.resize(static_cast<size_t>(Mg * pc));
      for (int64_t ci = 0; ci < nkc; ++ci) {
        const int64_t k0 = ci * kc, kl = std::min(kc, Kg - k0);
        if (use_packed) {
          gemm_packed_a<float>(packed_[gi * nkc + ci], false, pc, bmat + k0 * ldb, ldb, 1.0f, 0.0f,
                               out.data(), pc, tp);
        } else {
          gemm(false, false, Mg, pc, kl, 1.0f, wd.data() + gi * Mg * Kg + k0, Kg, bmat + k0 * ldb,
               ldb, 0.0f, out.data(), pc, tp);
        }
        for (int64_t m = 0; m < Mg; ++m) {
          double* yr = yg + m * P + p0;
          const float* orow = out.data() + m * pc;
          for (int64_t j = 0; j < pc; ++j) yr[j] += orow[j];
        }
      }
    };
    if (par_tasks) {
      parallel_for(pool, tasks, 2.0 * static_cast<double>(Mg) * Kg * chunk,
                   [&](int64_t s, int64_t e) {
                     for (int64_t t = s; t < e; ++t) run_task(t, nullptr);
                   });
    } else {
      for (int64_t t = 0; t < tasks; ++t) run_task(t, pool);
    }
    return yshape;
  }

 private:
  SpatialAttrs attrs_;
  int64_t group_ = 1;
  std::vector<PackedGemmMatrix<float>> packed_;  // per group, per chunk of packed_kc_ of Kg
  int64_t packed_kc_ = 0;
  DataType packed_dtype_ = DataType::kUndefined;
  Shape packed_shape_;
};

class ConvInteger final : public QConvBase {
 public:
  explicit ConvInteger(const KernelInfo& info) : QConvBase(info, 1, 3) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& w = ctx.required_input(1);
    std::vector<double> c;
    const Shape yshape = accumulate(ctx, x, ctx.input(2), w, ctx.input(3), c);
    int32_t* yd = ctx.allocate_output(0, DataType::kInt32, yshape).data<int32_t>();
    for (size_t i = 0; i < c.size(); ++i) yd[i] = wrap_int32(c[i]);
  }
};

class QLinearConv final : public QConvBase {
 public:
  explicit QLinearConv(const KernelInfo& info) : QConvBase(info, 3, 5) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& xs = ctx.required_input(1);
    const Tensor* zx = ctx.input(2);
    const Tensor& w = ctx.required_input(3);
    const Tensor& ws = ctx.required_input(4);
    const Tensor* zw = ctx.input(5);
    const Tensor& ys = ctx.required_input(6);
    const Tensor* zy = ctx.input(7);
    const Tensor* bias = ctx.input(8);
    dispatch_float3(ctx, xs.dtype(), "input 'x_scale'", [](auto) {});
    dispatch_float3(ctx, ws.dtype(), "input 'w_scale'", [](auto) {});
    dispatch_float3(ctx, ys.dtype(), "input 'y_scale'", [](auto) {});
    if (zy && !is_int8_type(zy->dtype())) {
      ctx.fail(StatusCode::kInvalidArgument, std::string("input 'y_zero_point' must be uint8 ") +
                                                 "or int8, got " + dtype_name(zy->dtype()));
    }
    if (!is_single(xs) || !is_single(ys) || (zy && !is_single(*zy))) {
      ctx.fail(StatusCode::kInvalidArgument,
               "inputs 'x_scale' " + shape_to_string(xs.shape()) + ", 'y_scale' " +
                   shape_to_string(ys.shape()) + " and 'y_zero_point' " +
                   (zy ? shape_to_string(zy->shape()) : std::string("(absent)")) +
                   " must each hold a single value (per-tensor)");
    }
    const int64_t M = w.rank() > 0 ? w.dim(0) : 0;
    if (!is_single(ws) && (ws.rank() != 1 || ws.dim(0) != M)) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'w_scale' must be a single value or 1-D with " + std::to_string(M) +
                   " elements (one per output channel), got shape " + shape_to_string(ws.shape()));
    }
    if (bias && (bias->dtype() != DataType::kInt32 || bias->rank() != 1 || bias->dim(0) != M)) {
      ctx.fail(StatusCode::kInvalidArgument, std::string("input 'B' must be int32 1-D with ") +
                                                 std::to_string(M) + " elements, got " +
                                                 dtype_name(bias->dtype()) + " " +
                                                 shape_to_string(bias->shape()));
    }
    std::vector<double> c;
    const Shape yshape = accumulate(ctx, x, zx, w, zw, c);
    const DataType qt = zy ? zy->dtype() : x.dtype();
    Tensor& y = ctx.allocate_output(0, qt, yshape);
    if (c.empty()) return;
    const float xsv = static_cast<float>(tensor_values(xs, "x_scale")[0]);
    const float ysv = static_cast<float>(tensor_values(ys, "y_scale")[0]);
    const std::vector<double> wsv = tensor_values(ws, "w_scale");
    std::vector<float> mult(static_cast<size_t>(M));
    for (int64_t m = 0; m < M; ++m)
      mult[m] = xsv * static_cast<float>(wsv[wsv.size() == 1 ? 0 : m]) / ysv;
    const int32_t* bd = bias ? bias->data<int32_t>() : nullptr;
    const double yz = zy ? tensor_values(*zy, "y_zero_point")[0] : 0.0;
    const QRange r = quant_range(qt);
    const int64_t P = static_cast<int64_t>(c.size()) / (yshape[0] * M);
    dispatch_int8(qt, [&](auto tag) {
      using Q = decltype(tag);
      Q* yd = y.data<Q>();
      parallel_for(ctx.thread_pool(), yshape[0] * M, 4.0 * static_cast<double>(P),
                   [&](int64_t s, int64_t e) {
                     for (int64_t nm = s; nm < e; ++nm) {
                       const int64_t m = nm % M;
                       const double b = bd ? static_cast<double>(bd[m]) : 0.0;
                       for (int64_t i = nm * P; i < (nm + 1) * P; ++i) {
                         const float v = static_cast<float>(wrap_int32(c[i] + b)) * mult[m];
                         yd[i] = static_cast<Q>(round_saturate(v, yz, r));
                       }
                     }
                   });
    });
  }
};

}  // namespace

void register_qconv(KernelRegistry& r) {
  r.add("", "QLinearConv", 10, kMaxOpset, make_factory<QLinearConv>());
  r.add("", "ConvInteger", 10, kMaxOpset, make_factory<ConvInteger>());
}

}  // namespace quant
}  // namespace ortlite
