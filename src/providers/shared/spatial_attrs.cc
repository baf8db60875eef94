#include "providers/shared/spatial_attrs.h"

#include <algorithm>

namespace ortlite {
namespace nn {

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

}  // namespace nn
}  // namespace ortlite
