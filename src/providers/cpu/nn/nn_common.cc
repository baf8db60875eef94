#include "providers/cpu/nn/nn_common.h"

#include <algorithm>
#include <sstream>

#include "providers/cpu/common/broadcast.h"

namespace ortlite {
namespace nn {

void convert_to_float(DataType dtype, const void* src, float* dst, int64_t n) {
  switch (dtype) {
    case DataType::kFloat:
      std::copy(static_cast<const float*>(src), static_cast<const float*>(src) + n, dst);
      return;
    case DataType::kDouble: {
      const double* s = static_cast<const double*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
      return;
    }
    case DataType::kFloat16: {
      const Float16* s = static_cast<const Float16*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Float16::to_float(s[i].bits);
      return;
    }
    case DataType::kBFloat16: {
      const BFloat16* s = static_cast<const BFloat16*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
      return;
    }
    default:
      ORTLITE_THROW(kNotImplemented, "convert_to_float: element type ", dtype_name(dtype),
                    " is not a floating-point type");
  }
}

void convert_from_float(DataType dtype, const float* src, void* dst, int64_t n) {
  switch (dtype) {
    case DataType::kFloat:
      std::copy(src, src + n, static_cast<float*>(dst));
      return;
    case DataType::kDouble: {
      double* d = static_cast<double*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = src[i];
      return;
    }
    case DataType::kFloat16: {
      Float16* d = static_cast<Float16*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i].bits = Float16::from_float(src[i]);
      return;
    }
    case DataType::kBFloat16: {
      BFloat16* d = static_cast<BFloat16*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i].bits = BFloat16::from_float(src[i]);
      return;
    }
    default:
      ORTLITE_THROW(kNotImplemented, "convert_from_float: element type ", dtype_name(dtype),
                    " is not a floating-point type");
  }
}

std::string dims_to_string(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << ']';
  return os.str();
}

void SpatialAttrs::load(const KernelInfo& info, bool kernel_required) {
  const std::string ap = info.attr_string("auto_pad", "NOTSET");
  if (ap == "NOTSET" || ap.empty()) {
    auto_pad = AutoPad::kNotSet;
  } else if (ap == "VALID") {
    auto_pad = AutoPad::kValid;
  } else if (ap == "SAME_UPPER") {
    auto_pad = AutoPad::kSameUpper;
  } else if (ap == "SAME_LOWER") {
    auto_pad = AutoPad::kSameLower;
  } else {
    info.fail(StatusCode::kInvalidGraph, "attribute 'auto_pad' is '" + ap +
                                             "'; expected NOTSET, SAME_UPPER, SAME_LOWER or VALID");
  }
  if (kernel_required && !info.has_attr("kernel_shape"))
    info.fail(StatusCode::kInvalidGraph, "attribute 'kernel_shape' is required");
  kernel_shape = info.attr_ints("kernel_shape");
  strides = info.attr_ints("strides");
  pads = info.attr_ints("pads");
  dilations = info.attr_ints("dilations");
  if (kernel_required && kernel_shape.empty())
    info.fail(StatusCode::kInvalidGraph, "attribute 'kernel_shape' is empty");
  for (int64_t k : kernel_shape)
    if (k <= 0)
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'kernel_shape' must be positive, got " + dims_to_string(kernel_shape));
  for (int64_t s : strides)
    if (s <= 0)
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'strides' must be positive, got " + dims_to_string(strides));
  for (int64_t d : dilations)
    if (d <= 0)
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'dilations' must be positive, got " + dims_to_string(dilations));
  for (int64_t p : pads)
    if (p < 0)
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'pads' must not be negative, got " + dims_to_string(pads));
  if (pads.size() % 2 != 0)
    info.fail(StatusCode::kInvalidGraph,
              "attribute 'pads' must hold a begin and an end value per spatial axis, got " +
                  std::to_string(pads.size()) + " values " + dims_to_string(pads));
  // Lengths that are given must agree with each other.
  size_t n = 0;
  const char* from = nullptr;
  auto agree = [&](size_t len, const char* what) {
    if (len == 0) return;
    if (n == 0) {
      n = len;
      from = what;
    } else if (len != n) {
      info.fail(StatusCode::kInvalidGraph, std::string("attribute '") + what + "' implies " +
                                               std::to_string(len) + " spatial axes but '" + from +
                                               "' implies " + std::to_string(n));
    }
  };
  agree(kernel_shape.size(), "kernel_shape");
  agree(strides.size(), "strides");
  agree(dilations.size(), "dilations");
  agree(pads.size() / 2, "pads");
}

size_t SpatialAttrs::implied_rank() const {
  if (!kernel_shape.empty()) return kernel_shape.size();
  if (!strides.empty()) return strides.size();
  if (!dilations.empty()) return dilations.size();
  return pads.size() / 2;
}

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

void resolve_common(const KernelContext& ctx, const SpatialAttrs& a, SpatialGeometry& g) {
  const size_t n = g.rank;
  auto check_len = [&](const std::vector<int64_t>& v, size_t want, const char* what) {
    if (!v.empty() && v.size() != want)
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("attribute '") + what + "' has " + std::to_string(v.size()) +
                   " values but the input has " + std::to_string(n) + " spatial axes (input " +
                   "spatial dims " + dims_to_string(g.in) + ")");
  };
  check_len(a.strides, n, "strides");
  check_len(a.dilations, n, "dilations");
  check_len(a.pads, 2 * n, "pads");
  g.stride = a.strides.empty() ? std::vector<int64_t>(n, 1) : a.strides;
  g.dilation = a.dilations.empty() ? std::vector<int64_t>(n, 1) : a.dilations;
  g.pad_begin.assign(n, 0);
  g.pad_end.assign(n, 0);
  g.out.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const int64_t dk = (g.kernel[i] - 1) * g.dilation[i] + 1;
    switch (a.auto_pad) {
      case AutoPad::kNotSet:
        if (!a.pads.empty()) {
          g.pad_begin[i] = a.pads[i];
          g.pad_end[i] = a.pads[i + n];
        }
        break;
      case AutoPad::kValid:
        break;
      case AutoPad::kSameUpper:
      case AutoPad::kSameLower: {
        const int64_t target = ceil_div(g.in[i], g.stride[i]);
        const int64_t total = std::max<int64_t>(0, (target - 1) * g.stride[i] + dk - g.in[i]);
        g.pad_begin[i] = a.auto_pad == AutoPad::kSameUpper ? total / 2 : total - total / 2;
        g.pad_end[i] = total - g.pad_begin[i];
        break;
      }
    }
  }
}

}  // namespace

SpatialGeometry conv_geometry(const KernelContext& ctx, const SpatialAttrs& a,
                              const std::vector<int64_t>& in, const std::vector<int64_t>& kernel) {
  SpatialGeometry g;
  g.rank = in.size();
  g.in = in;
  g.kernel = kernel;
  if (!a.kernel_shape.empty() && a.kernel_shape != kernel)
    ctx.fail(StatusCode::kInvalidArgument,
             "attribute 'kernel_shape' " + dims_to_string(a.kernel_shape) +
                 " does not match the spatial dims of W " + dims_to_string(kernel));
  resolve_common(ctx, a, g);
  for (size_t i = 0; i < g.rank; ++i) {
    const int64_t dk = (g.kernel[i] - 1) * g.dilation[i] + 1;
    const int64_t padded = g.in[i] + g.pad_begin[i] + g.pad_end[i];
    if (padded < dk)
      ctx.fail(StatusCode::kInvalidArgument,
               "the kernel (dilated size " + std::to_string(dk) + ") is larger than the padded " +
                   "input (size " + std::to_string(padded) + ") on spatial axis " +
                   std::to_string(i) + ": input spatial dims " + dims_to_string(in) + ", kernel " +
                   dims_to_string(kernel));
    g.out[i] = (padded - dk) / g.stride[i] + 1;
  }
  return g;
}

SpatialGeometry pool_geometry(const KernelContext& ctx, const SpatialAttrs& a,
                              const std::vector<int64_t>& in, bool ceil_mode) {
  SpatialGeometry g;
  g.rank = in.size();
  g.in = in;
  if (a.kernel_shape.size() != in.size())
    ctx.fail(StatusCode::kInvalidArgument,
             "attribute 'kernel_shape' " + dims_to_string(a.kernel_shape) + " has " +
                 std::to_string(a.kernel_shape.size()) + " values but the input has " +
                 std::to_string(in.size()) + " spatial axes (input spatial dims " +
                 dims_to_string(in) + ")");
  g.kernel = a.kernel_shape;
  resolve_common(ctx, a, g);
  for (size_t i = 0; i < g.rank; ++i) {
    const int64_t dk = (g.kernel[i] - 1) * g.dilation[i] + 1;
    const int64_t num = g.in[i] + g.pad_begin[i] + g.pad_end[i] - dk;
    if (num < 0)
      ctx.fail(StatusCode::kInvalidArgument,
               "the kernel (dilated size " + std::to_string(dk) + ") is larger than the padded " +
                   "input (size " + std::to_string(num + dk) + ") on spatial axis " +
                   std::to_string(i) + ": input spatial dims " + dims_to_string(in) +
                   ", kernel_shape " + dims_to_string(a.kernel_shape));
    int64_t out = ceil_mode ? ceil_div(num, g.stride[i]) + 1 : num / g.stride[i] + 1;
    // The last window must start inside the input or its begin padding.
    if (ceil_mode && (out - 1) * g.stride[i] >= g.in[i] + g.pad_begin[i]) --out;
    g.out[i] = out;
  }
  return g;
}

void check_gemm_ranks(const KernelContext& ctx, const Tensor& A, const Tensor& B) {
  if (A.rank() != 2 || B.rank() != 2)
    ctx.fail(StatusCode::kInvalidArgument, "Gemm needs 2-D A and B, got A " +
                                               shape_to_string(A.shape()) + " and B " +
                                               shape_to_string(B.shape()));
}

GemmDims gemm_dims(const KernelContext& ctx, const Tensor& A, const Tensor& B, const Tensor* C,
                   bool trans_a, bool trans_b) {
  const int64_t M = trans_a ? A.dim(1) : A.dim(0);
  const int64_t K = trans_a ? A.dim(0) : A.dim(1);
  const int64_t KB = trans_b ? B.dim(1) : B.dim(0);
  const int64_t N = trans_b ? B.dim(0) : B.dim(1);
  if (K != KB)
    ctx.fail(StatusCode::kInvalidArgument,
             "Gemm inner dimensions do not match: A " + shape_to_string(A.shape()) +
                 (trans_a ? " (transA)" : "") + " and B " + shape_to_string(B.shape()) +
                 (trans_b ? " (transB)" : "") + " give K = " + std::to_string(K) + " and " +
                 std::to_string(KB));
  if (C) {
    bool ok = C->rank() <= 2;
    if (ok) {
      const Shape& cs = C->shape();
      const int64_t cm = cs.size() == 2 ? cs[0] : 1;
      const int64_t cn = cs.empty() ? 1 : cs.back();
      ok = (cm == M || cm == 1) && (cn == N || cn == 1);
    }
    if (!ok)
      ctx.fail(StatusCode::kInvalidArgument, "Gemm input C " + shape_to_string(C->shape()) +
                                                 " cannot be broadcast to the output shape [" +
                                                 std::to_string(M) + "," + std::to_string(N) + "]");
  }
  return {M, N, K};
}

MatMulPlan make_matmul_plan(const KernelContext& ctx, const Shape& a, const Shape& b) {
  if (a.empty() || b.empty())
    ctx.fail(StatusCode::kInvalidArgument, "MatMul needs inputs of rank >= 1, got A " +
                                               shape_to_string(a) + " and B " + shape_to_string(b));
  Shape a2 = a, b2 = b;
  if (a2.size() == 1) a2.insert(a2.begin(), 1);
  if (b2.size() == 1) b2.push_back(1);
  MatMulPlan p;
  p.M = a2[a2.size() - 2];
  p.K = a2.back();
  p.N = b2.back();
  if (b2[b2.size() - 2] != p.K)
    ctx.fail(StatusCode::kInvalidArgument,
             "MatMul inner dimensions do not match: A " + shape_to_string(a) + " and B " +
                 shape_to_string(b) + " (A's last dim " + std::to_string(p.K) + " != B's dim " +
                 std::to_string(b2[b2.size() - 2]) + ")");
  const Shape ab(a2.begin(), a2.end() - 2), bb(b2.begin(), b2.end() - 2);
  Shape batch;
  try {
    batch = broadcast_shapes(ab, bb, "MatMul");
  } catch (const Error&) {
    ctx.fail(StatusCode::kInvalidArgument, "MatMul batch dimensions cannot be broadcast: A " +
                                               shape_to_string(a) + " and B " + shape_to_string(b));
  }
  p.batches = shape_size(batch);
  p.out = batch;
  if (a.size() > 1) p.out.push_back(p.M);
  if (b.size() > 1) p.out.push_back(p.N);
  p.b_shared = shape_size(bb) == 1;
  if (!p.b_shared && p.batches > 0) {
    batch_matrix_indices(ab, bb, batch, &p.a_index, &p.b_index);
  }
  return p;
}

void batch_matrix_indices(const Shape& ab, const Shape& bb, const Shape& batch,
                          std::vector<int64_t>* a_index, std::vector<int64_t>* b_index) {
  const int64_t batches = shape_size(batch);
  const std::vector<int64_t> sa = broadcast_strides(ab, batch);
  const std::vector<int64_t> sb = broadcast_strides(bb, batch);
  a_index->resize(static_cast<size_t>(batches));
  b_index->resize(static_cast<size_t>(batches));
  std::vector<int64_t> idx(batch.size(), 0);
  int64_t ia = 0, ib = 0;
  for (int64_t n = 0; n < batches; ++n) {
    (*a_index)[n] = ia;
    (*b_index)[n] = ib;
    for (size_t d = batch.size(); d-- > 0;) {
      ++idx[d];
      ia += sa[d];
      ib += sb[d];
      if (idx[d] < batch[d]) break;
      ia -= sa[d] * idx[d];
      ib -= sb[d] * idx[d];
      idx[d] = 0;
    }
  }
}

}  // namespace nn
}  // namespace ortlite
