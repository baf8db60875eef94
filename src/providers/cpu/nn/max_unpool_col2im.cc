// Kernels added for ONNX node conformance that scatter values back into an image:
// MaxUnpool (opsets 9, 11, 22) and Col2Im (opset 18).
#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {
namespace {

// Values beyond this make the index arithmetic below overflow long before they could
// describe a real image.
constexpr int64_t kMaxAttr = int64_t{1} << 31;

std::vector<int64_t> positive_ints(const KernelInfo& info, const char* name, size_t n,
                                   int64_t fill) {
  std::vector<int64_t> v = info.attr_ints(name);
  if (v.empty()) return std::vector<int64_t>(n, fill);
  if (v.size() != n) {
    info.fail(StatusCode::kInvalidGraph, std::string("attribute '") + name + "' has " +
                                             std::to_string(v.size()) + " values, expected " +
                                             std::to_string(n));
  }
  for (int64_t x : v) {
    if (x < 1 || x > kMaxAttr) {
      info.fail(StatusCode::kInvalidGraph, std::string("attribute '") + name +
                                               "' = " + dims_to_string(v) +
                                               " must hold values in [1, 2^31]");
    }
  }
  return v;
}

std::vector<int64_t> pad_ints(const KernelInfo& info, size_t n) {
  std::vector<int64_t> v = info.attr_ints("pads");
  if (v.empty()) return std::vector<int64_t>(2 * n, 0);
  if (v.size() != 2 * n) {
    info.fail(StatusCode::kInvalidGraph, "attribute 'pads' has " + std::to_string(v.size()) +
                                             " values, expected " + std::to_string(2 * n));
  }
  for (int64_t x : v) {
    if (x < 0 || x > kMaxAttr) {
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'pads' = " + dims_to_string(v) + " must hold values in [0, 2^31]");
    }
  }
  return v;
}

// MaxUnpool(X, I, output_shape?): every X[e] goes to flat position I[e] of the unpooled
// tensor whose spatial dims are (in - 1) * stride - pad_begin - pad_end + kernel; the rest
// is zero. A given output_shape (each dim at least the inferred one) pads that tensor at
// the end of every axis, as onnx's reference implementation and node tests do (so I stays
// relative to the inferred shape).
class MaxUnpool final : public Kernel {
 public:
  explicit MaxUnpool(const KernelInfo& info) {
    if (!info.has_attr("kernel_shape")) {
      info.fail(StatusCode::kInvalidGraph, "attribute 'kernel_shape' is required");
    }
    kernel_ = info.attr_ints("kernel_shape");
    if (kernel_.empty()) info.fail(StatusCode::kInvalidGraph, "attribute 'kernel_shape' is empty");
    kernel_ = positive_ints(info, "kernel_shape", kernel_.size(), 1);
    strides_ = positive_ints(info, "strides", kernel_.size(), 1);
    pads_ = pad_ints(info, kernel_.size());
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& ind = ctx.required_input(1);
    const size_t k = kernel_.size();
    if (x.rank() != k + 2) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'X' " + shape_to_string(x.shape()) +
                                                 " must have rank " + std::to_string(k + 2) +
                                                 " for kernel_shape " + dims_to_string(kernel_));
    }
    if (ind.dtype() != DataType::kInt64 || ind.shape() != x.shape()) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'I' must be int64 of the shape of 'X' " + shape_to_string(x.shape()) +
                   ", got " + dtype_name(ind.dtype()) + " " + shape_to_string(ind.shape()));
    }
    if (x.dtype() == DataType::kString || x.dtype() == DataType::kBool) {
      ctx.fail(StatusCode::kNotImplemented, std::string("input 'X': element type ") +
                                                dtype_name(x.dtype()) + " is not supported");
    }
    Shape inferred = {x.dim(0), x.dim(1)};
    for (size_t i = 0; i < k; ++i) {
      const int64_t d = (x.dim(i + 2) - 1) * strides_[i] - pads_[i] - pads_[i + k] + kernel_[i];
      if (d < 0) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "the unpooled size of spatial axis " + std::to_string(i) + " is negative (" +
                     std::to_string(d) + ") for input 'X' " + shape_to_string(x.shape()));
      }
      inferred.push_back(d);
    }
    Shape out_shape = inferred;
    if (const Tensor* os = ctx.input(2)) {
      if (os->dtype() != DataType::kInt64 || os->rank() != 1 ||
          os->numel() != static_cast<int64_t>(k + 2)) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "input 'output_shape' must be a 1-D int64 tensor of " + std::to_string(k + 2) +
                     " values, got " + dtype_name(os->dtype()) + " " +
                     shape_to_string(os->shape()));
      }
      out_shape = tensor_to_int64s(*os);
      for (size_t i = 0; i < out_shape.size(); ++i) {
        if (out_shape[i] < inferred[i] || (i < 2 && out_shape[i] != inferred[i])) {
          ctx.fail(StatusCode::kInvalidArgument,
                   "input 'output_shape' " + shape_to_string(out_shape) +
                       " must match N and C of 'X' and be at least the unpooled shape " +
                       shape_to_string(inferred));
        }
      }
    }
    const int64_t total = shape_size(inferred);
    Tensor& y = ctx.allocate_output(0, x.dtype(), out_shape);
    std::memset(y.raw_data(), 0, y.nbytes());
    const int64_t* idx = ind.data<int64_t>();
    for (int64_t e = 0; e < x.numel(); ++e) {
      if (idx[e] < 0 || idx[e] >= total) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "index " + std::to_string(idx[e]) + " in input 'I' is out of range [0, " +
                     std::to_string(total) + ") of the shape " + shape_to_string(inferred));
      }
    }
    // Flat position in the inferred shape -> flat position in the output.
    const size_t r = inferred.size();
    std::vector<int64_t> out_strides(r, 1);
    for (size_t d = r - 1; d-- > 0;) out_strides[d] = out_strides[d + 1] * out_shape[d + 1];
    auto remap = [&](int64_t flat) {
      int64_t off = 0;
      for (size_t d = r; d-- > 0;) {
        off += (flat % inferred[d]) * out_strides[d];
        flat /= inferred[d];
      }
      return off;
    };
    tensor_ops_dispatch(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* src = static_cast<const T*>(x.raw_data());
      T* dst = static_cast<T*>(y.raw_data());
      for (int64_t e = 0; e < x.numel(); ++e) dst[remap(idx[e])] = src[e];
    });
  }

 private:
  template <typename Fn>
  static void tensor_ops_dispatch(DataType dt, Fn&& fn) {
    switch (dtype_size(dt)) {
      case 1:
        return fn(uint8_t{});
      case 2:
        return fn(uint16_t{});
      case 4:
        return fn(uint32_t{});
      case 8:
        return fn(uint64_t{});
      default:
        ORTLITE_THROW(kNotImplemented, "MaxUnpool: element type ", dtype_name(dt),
                      " is not supported");
    }
  }

  std::vector<int64_t> kernel_, strides_, pads_;
};

template <typename A>
A wrap_add(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

// One 2-D plane of Col2Im: each kernel offset's block values added along the image rows
// they fall on (a contiguous run of columns at stride 1), in the same order as the general
// path (kernel offset, then block position), so every sum is the same.
template <typename Acc, typename T>
void plane_2d(const T* s, const std::vector<int64_t>& image, const std::vector<int64_t>& block,
              const std::vector<int64_t>& cols, const std::vector<int64_t>& str,
              const std::vector<int64_t>& pad, const std::vector<int64_t>& dil, Acc* acc) {
  const int64_t H = image[0], W = image[1], nb = cols[0] * cols[1];
  for (int64_t ky = 0; ky < block[0]; ++ky) {
    for (int64_t kx = 0; kx < block[1]; ++kx, s += nb) {
      const int64_t x0 = kx * dil[1] - pad[1], sx = str[1];
      // Columns bx with 0 <= bx * sx + x0 < W.
      const int64_t lo = x0 >= 0 ? 0 : (-x0 + sx - 1) / sx;
      const int64_t hi = x0 >= W ? 0 : std::min(cols[1], (W - 1 - x0) / sx + 1);
      for (int64_t by = 0; by < cols[0]; ++by) {
        const int64_t iy = by * str[0] - pad[0] + ky * dil[0];
        if (iy < 0 || iy >= H) continue;
        const T* row = s + by * cols[1];
        Acc* out = acc + iy * W;  // column bx * sx + x0, inside the row for bx in [lo, hi)
        if (sx == 1) {
          for (int64_t bx = lo; bx < hi; ++bx)
            out[bx + x0] = wrap_add(out[bx + x0], static_cast<Acc>(row[bx]));
        } else {
          for (int64_t bx = lo; bx < hi; ++bx)
            out[bx * sx + x0] = wrap_add(out[bx * sx + x0], static_cast<Acc>(row[bx]));
        }
      }
    }
  }
}

// Col2Im(input [N, C * prod(block_shape), L], image_shape, block_shape) -> [N, C,
// image_shape...]: the inverse of im2col, summing the blocks that overlap. L must be the
// number of block positions the (padded, strided, dilated) image holds.
class Col2Im final : public Kernel {
 public:
  explicit Col2Im(const KernelInfo& info)
      : dilations_(info.attr_ints("dilations")),
        pads_(info.attr_ints("pads")),
        strides_(info.attr_ints("strides")) {
    for (int64_t v : dilations_) {
      if (v < 1 || v > kMaxAttr)
        info.fail(StatusCode::kInvalidGraph, "attribute 'dilations' must hold values in [1, 2^31]");
    }
    for (int64_t v : strides_) {
      if (v < 1 || v > kMaxAttr)
        info.fail(StatusCode::kInvalidGraph, "attribute 'strides' must hold values in [1, 2^31]");
    }
    for (int64_t v : pads_) {
      if (v < 0 || v > kMaxAttr)
        info.fail(StatusCode::kInvalidGraph, "attribute 'pads' must hold values in [0, 2^31]");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const std::vector<int64_t> image = read_dims(ctx, ctx.required_input(1), "image_shape");
    const std::vector<int64_t> block = read_dims(ctx, ctx.required_input(2), "block_shape");
    const size_t n = image.size();
    if (n == 0 || block.size() != n) {
      ctx.fail(StatusCode::kInvalidArgument, "inputs 'image_shape' " + dims_to_string(image) +
                                                 " and 'block_shape' " + dims_to_string(block) +
                                                 " must hold the same number (>= 1) of values");
    }
    auto check_len = [&](const std::vector<int64_t>& v, size_t want, const char* what) {
      if (!v.empty() && v.size() != want) {
        ctx.fail(StatusCode::kInvalidArgument, std::string("attribute '") + what + "' has " +
                                                   std::to_string(v.size()) + " values, expected " +
                                                   std::to_string(want) + " for image_shape " +
                                                   dims_to_string(image));
      }
    };
    check_len(dilations_, n, "dilations");
    check_len(strides_, n, "strides");
    check_len(pads_, 2 * n, "pads");
    const std::vector<int64_t> dil = dilations_.empty() ? std::vector<int64_t>(n, 1) : dilations_;
    const std::vector<int64_t> str = strides_.empty() ? std::vector<int64_t>(n, 1) : strides_;
    const std::vector<int64_t> pad = pads_.empty() ? std::vector<int64_t>(2 * n, 0) : pads_;
    if (x.rank() != 3) {
      ctx.fail(
          StatusCode::kInvalidArgument,
          "input 'input' must be [N, C * prod(block_shape), L], got " + shape_to_string(x.shape()));
    }
    int64_t bl = 1, nblocks = 1;
    std::vector<int64_t> cols(n);
    for (size_t i = 0; i < n; ++i) {
      bl *= block[i];
      const int64_t span = dil[i] * (block[i] - 1) + 1;
      const int64_t c = (image[i] + pad[i] + pad[i + n] - span) / str[i] + 1;
      if (image[i] + pad[i] + pad[i + n] < span || c < 1) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "block_shape " + dims_to_string(block) + " does not fit image_shape " +
                     dims_to_string(image) + " with the given pads and dilations on axis " +
                     std::to_string(i));
      }
      cols[i] = c;
      nblocks *= c;
    }
    if (x.dim(1) % bl != 0 || x.dim(2) != nblocks) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'input' " + shape_to_string(x.shape()) + " must be [N, C * " +
                   std::to_string(bl) + ", " + std::to_string(nblocks) + "] for block_shape " +
                   dims_to_string(block) + " and image_shape " + dims_to_string(image));
    }
    const int64_t batch = x.dim(0), channels = x.dim(1) / bl;
    Shape out_shape = {batch, channels};
    out_shape.insert(out_shape.end(), image.begin(), image.end());
    Tensor& y = ctx.allocate_output(0, x.dtype(), out_shape);
    if (y.numel() == 0) return;
    const int64_t img = y.numel() / (batch * channels);
    // For each (kernel offset, block position): its image offset, or -1 when it falls in
    // the padding. Shared by every (n, c) plane.
    const bool planar = n == 2;  // 2-D: row segments, no table (plane_2d)
    std::vector<int64_t> target(planar ? 0 : static_cast<size_t>(bl * nblocks));
    std::vector<int64_t> ko(n), bo(n);
    for (int64_t kk = 0; kk < (planar ? 0 : bl); ++kk) {
      int64_t rem = kk;
      for (size_t i = n; i-- > 0;) {
        ko[i] = rem % block[i];
        rem /= block[i];
      }
      // Block positions in row-major order: the leading axes as an odometer (bo), the
      // last axis as the inner loop (no division per element).
      std::fill(bo.begin(), bo.end(), 0);
      const size_t last = n - 1;
      const int64_t inner = cols[last];
      int64_t* t = target.data() + kk * nblocks;
      for (int64_t b = 0; b < nblocks; b += inner) {
        int64_t base = 0;
        for (size_t i = 0; i < last && base >= 0; ++i) {
          const int64_t pos = bo[i] * str[i] - pad[i] + ko[i] * dil[i];
          base = pos < 0 || pos >= image[i] ? -1 : base * image[i] + pos;
        }
        const int64_t p0 = ko[last] * dil[last] - pad[last];
        for (int64_t c = 0; c < inner; ++c) {
          const int64_t pos = c * str[last] + p0;
          t[b + c] = base < 0 || pos < 0 || pos >= image[last] ? -1 : base * image[last] + pos;
        }
        for (size_t i = last; i-- > 0;) {
          if (++bo[i] < cols[i]) break;
          bo[i] = 0;
        }
      }
    }
    auto run = [&](auto tag) {
      using T = decltype(tag);
      using Acc =
          std::conditional_t<std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>, float, T>;
      const T* src = x.data<T>();
      T* dst = y.data<T>();
      parallel_for(ctx.thread_pool(), batch * channels, static_cast<double>(bl * nblocks),
                   [&](int64_t begin, int64_t end) {
                     std::vector<Acc> acc(static_cast<size_t>(img));
                     for (int64_t p = begin; p < end; ++p) {
                       std::fill(acc.begin(), acc.end(), Acc(0));
                       const T* s = src + p * bl * nblocks;
                       if (planar) {
                         plane_2d(s, image, block, cols, str, pad, dil, acc.data());
                       }
                       for (int64_t j = 0; j < (planar ? 0 : bl * nblocks); ++j) {
                         const int64_t t = target[static_cast<size_t>(j)];
                         if (t >= 0) {
                           acc[static_cast<size_t>(t)] =
                               wrap_add(acc[static_cast<size_t>(t)], static_cast<Acc>(s[j]));
                         }
                       }
                       T* d = dst + p * img;
                       for (int64_t j = 0; j < img; ++j) d[j] = T(acc[static_cast<size_t>(j)]);
                     }
                   });
    };
    return ORTLITE_DISPATCH_ARITHMETIC(x.dtype(), "input 'input'", run);
  }

 private:
  static std::vector<int64_t> read_dims(const KernelContext& ctx, const Tensor& t,
                                        const char* what) {
    if (t.dtype() != DataType::kInt64 || t.rank() != 1) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input '") + what + "' must be a 1-D int64 tensor, got " +
                   dtype_name(t.dtype()) + " " + shape_to_string(t.shape()));
    }
    std::vector<int64_t> v = tensor_to_int64s(t);
    for (int64_t d : v) {
      if (d < 1 || d > kMaxAttr) {
        ctx.fail(StatusCode::kInvalidArgument, std::string("input '") + what +
                                                   "' = " + dims_to_string(v) +
                                                   " must hold values in [1, 2^31]");
      }
    }
    return v;
  }

  std::vector<int64_t> dilations_, pads_, strides_;
};

}  // namespace

void register_max_unpool_col2im(KernelRegistry& r) {
  r.add("", "MaxUnpool", 9, 10, make_factory<MaxUnpool>());
  r.add("", "MaxUnpool", 11, 21, make_factory<MaxUnpool>());
  r.add("", "MaxUnpool", 22, kMaxOpset, make_factory<MaxUnpool>());
  r.add("", "Col2Im", 18, kMaxOpset, make_factory<Col2Im>());
}

}  // namespace nn
}  // namespace ortlite
