// Pad: opset 2-10 attributes pads/value; 11+ inputs pads/constant_value; 18+ axes input;
// modes constant, reflect, edge and (19+) wrap. Negative pads crop (first, before the
// padding is applied, as onnxruntime does). Pads of reflect/wrap wider than the dim repeat
// the reflection / cycle (numpy.pad semantics).
// Trailing dims without pads fold into blocks; each output row is then written once: the
// constant (or the edge / reflected / wrapped blocks), one copy of the source run, and the
// tail.
#include <algorithm>
#include <cstring>

#include "providers/cpu/tensor/tensor_kernels.h"

namespace ortlite {
namespace {

using tensor_ops::ints_to_string;

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

class Pad final : public Kernel {
 public:
  // com.microsoft Pad is opset 11's (pads and value as inputs; pads may also be [1, 2 rank]).
  explicit Pad(const KernelInfo& info)
      : opset_(info.node().domain == "com.microsoft" ? 11 : info.opset()),
        contrib_(info.node().domain == "com.microsoft") {
    const std::string mode = info.attr_string("mode", "constant");
    if (mode == "constant") {
      mode_ = PadMode::kConstant;
    } else if (mode == "reflect") {
      mode_ = PadMode::kReflect;
    } else if (mode == "edge") {
      mode_ = PadMode::kEdge;
    } else if (mode == "wrap" && opset_ >= 19) {
      mode_ = PadMode::kWrap;
    } else {
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'mode' = '" + mode + "' is not supported at opset " +
                    std::to_string(opset_) + " (constant, reflect, edge" +
                    (opset_ >= 19 ? ", wrap)" : ")"));
    }
    if (opset_ < 11) {
      if (!info.has_attr("pads")) info.fail(StatusCode::kInvalidGraph, "missing attribute 'pads'");
      pads_attr_ = info.attr_ints("pads");
      value_attr_ = info.attr_float("value", 0.f);
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.required_input(0);
    const DataType dt = data.dtype();
    const Shape& in = data.shape();
    const int64_t rank = static_cast<int64_t>(in.size());
    std::vector<int64_t> pads;
    if (opset_ < 11) {
      pads = pads_attr_;
    } else {
      const Tensor& pt = ctx.required_input(1);
      pads = contrib_ && pt.rank() == 2 && pt.dim(0) == 1
                 ? tensor_to_int64s(pt)
                 : tensor_ops::read_int_list(ctx, pt, "pads");
    }
    std::vector<int64_t> axes;
    if (opset_ >= 18 && ctx.input(3) != nullptr) {
      const std::vector<int64_t> raw = tensor_ops::read_int_list(ctx, *ctx.input(3), "axes");
      axes = tensor_ops::normalize_axes(ctx, raw, rank, "axes");
    } else {
      for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
    }
    if (pads.size() != 2 * axes.size()) {
      ctx.fail(StatusCode::kInvalidArgument,
               "'pads' " + ints_to_string(pads) + " must have " + std::to_string(2 * axes.size()) +
                   " entries (2 per padded axis) for input shape " + shape_to_string(in));
    }
    std::vector<int64_t> pb(in.size(), 0), pe(in.size(), 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      pb[static_cast<size_t>(axes[i])] = pads[i];
      pe[static_cast<size_t>(axes[i])] = pads[i + axes.size()];
    }

    // Output shape, crops and the cropped source length per dim.
    Shape out(in.size());
    std::vector<int64_t> crop(in.size()), len(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      int64_t o = 0;
      if (__builtin_add_overflow(in[i], pb[i], &o) || __builtin_add_overflow(o, pe[i], &o)) {
        ctx.fail(StatusCode::kInvalidArgument, "'pads' " + ints_to_string(pads) +
                                                   " overflow the output shape for input " +
                                                   shape_to_string(in));
      }
      crop[i] = pb[i] < 0 ? -pb[i] : 0;
      const int64_t crop_end = pe[i] < 0 ? -pe[i] : 0;
      len[i] = in[i] - crop[i] - crop_end;  // no overflow: o >= len checked below
      if (o < 0 || len[i] < 0) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "'pads' " + ints_to_string(pads) + " remove more than dimension " +
                     std::to_string(i) + " of input shape " + shape_to_string(in) + " holds");
      }
      out[i] = o;
      if (mode_ != PadMode::kConstant && len[i] == 0 && o > 0) {
        ctx.fail(StatusCode::kInvalidArgument,
                 std::string("cannot pad dimension ") + std::to_string(i) +
                     " of size 0 (input shape " + shape_to_string(in) + ") in a non-constant mode");
      }
    }
    tensor_ops::checked_numel(ctx, dt, out, "Pad");

    // The constant, as one element of dt.
    Tensor fill;
    if (mode_ == PadMode::kConstant) fill = constant_value(ctx, dt);

    Tensor& y = ctx.allocate_output(0, dt, out);
    if (y.numel() == 0) return;
    if (rank == 0) {
      tensor_ops::copy_elements(dt, data.raw_data(), y.raw_data(), 1);
      return;
    }
    // Trailing dims that are neither padded nor cropped fold into a block of `blk`
    // elements, so that the rows below are as long as possible (a pad of [N, H, W, 1] on H
    // and W copies rows of W elements, not single elements).
    size_t nd = in.size();
    int64_t blk = 1;
    while (nd > 0 && pb[nd - 1] == 0 && pe[nd - 1] == 0) {
      blk *= in[nd - 1];
      --nd;
    }
    if (nd == 0) {  // nothing padded or cropped
      tensor_ops::parallel_copy(dt, data.raw_data(), y.raw_data(), y.numel(), ctx.thread_pool());
      return;
    }
    // Strides of the folded input, in elements.
    std::vector<int64_t> in_strides(nd);
    int64_t st = blk;
    for (size_t d = nd; d-- > 0;) {
      in_strides[d] = st;
      st *= in[d];
    }
    // Source index of every output position of dims [0, nd - 1), -1 for the constant.
    const size_t last = nd - 1;
    std::vector<std::vector<int64_t>> map(nd);
    for (size_t i = 0; i < nd; ++i) {
      const int64_t n = len[i];
      const int64_t lead = std::max<int64_t>(pb[i], 0);
      map[i].resize(static_cast<size_t>(out[i]));
      for (int64_t o = 0; o < out[i]; ++o) {
        const int64_t rel = o - lead;
        int64_t r = rel;
        if (rel < 0 || rel >= n) {
          switch (mode_) {
            case PadMode::kEdge:
              r = rel < 0 ? 0 : n - 1;
              break;
            case PadMode::kReflect:
              if (n == 1) {
                r = 0;
              } else {
                const int64_t p = 2 * (n - 1);
                r = ((rel % p) + p) % p;
                if (r >= n) r = p - r;
              }
              break;
            case PadMode::kWrap:
              r = ((rel % n) + n) % n;
              break;
            case PadMode::kConstant:
              r = -1;
              break;
          }
        }
        map[i][static_cast<size_t>(o)] = r < 0 ? -1 : crop[i] + r;
      }
    }
    const int64_t row_len = out[last] * blk;  // elements per output row
    const int64_t rows = y.numel() / row_len;
    const int64_t lead = std::max<int64_t>(pb[last], 0);
    const int64_t mid = len[last];  // row positions [lead, lead + mid) copy one run
    const int64_t tail = out[last] - lead - mid;
    const bool constant = mode_ == PadMode::kConstant;
    tensor_ops::dispatch_storage(dt, [&](auto tag) {
      using T = decltype(tag);
      const T* src = static_cast<const T*>(data.raw_data());
      T* dst = static_cast<T*>(y.raw_data());
      const T value = constant ? *static_cast<const T*>(fill.raw_data()) : T{};
      // Runs of up to 64 bytes as plain loops: a library call each for the few elements of
      // short rows ([3, 197, 16, 8] padded: 0.65 of onnxruntime's speed) cost more than the
      // copy.
      auto copy = [](const T* s, T* o, int64_t n) {
        if constexpr (std::is_same_v<T, std::string>) {
          std::copy_n(s, n, o);
        } else {
          if (n * static_cast<int64_t>(sizeof(T)) <= 64) {
            for (int64_t i = 0; i < n; ++i) o[i] = s[i];
          } else {
            std::memcpy(o, s, static_cast<size_t>(n) * sizeof(T));
          }
        }
      };
      auto fill = [](T* o, int64_t n, const T& v) {
        if constexpr (std::is_same_v<T, std::string>) {
          std::fill_n(o, n, v);
        } else {
          for (int64_t i = 0; i < n; ++i) o[i] = v;
        }
      };
      // Lead or tail positions [j0, j1) of a row in a non-constant mode.
      const std::vector<int64_t>& m = map[last];
      auto gather = [&](const T* s, T* o, int64_t j0, int64_t j1) {
        if (blk == 1) {
          for (int64_t j = j0; j < j1; ++j) o[j] = s[m[static_cast<size_t>(j)]];
        } else {
          for (int64_t j = j0; j < j1; ++j)
            copy(s + m[static_cast<size_t>(j)] * blk, o + j * blk, blk);
        }
      };
      parallel_for(ctx.thread_pool(), rows, static_cast<double>(row_len),
                   [&](int64_t b, int64_t e) {
                     std::vector<int64_t> idx(last, 0);
                     int64_t rem = b;
                     for (size_t d = last; d-- > 0;) {
                       idx[d] = rem % out[d];
                       rem /= out[d];
                     }
                     // The source offset and padding of the dims above the innermost row
                     // dim, recomputed only when that dim wraps.
                     const size_t inner = last - 1;
                     int64_t outer_base = 0;
                     bool outer_pad = false;
                     auto outer_dims = [&]() {
                       outer_base = 0;
                       outer_pad = false;
                       for (size_t d = 0; d < inner; ++d) {
                         const int64_t k = map[d][static_cast<size_t>(idx[d])];
                         outer_pad = outer_pad || k < 0;
                         outer_base += k * in_strides[d];
                       }
                     };
                     if (last > 0) outer_dims();
                     for (int64_t row = b; row < e; ++row) {
                       T* o = dst + row * row_len;
                       int64_t base = outer_base;
                       bool pad_row = outer_pad;
                       if (last > 0) {
                         const int64_t k = map[inner][static_cast<size_t>(idx[inner])];
                         pad_row = pad_row || k < 0;
                         base += k * in_strides[inner];
                       }
                       if (pad_row) {
                         fill(o, row_len, value);
                       } else if (constant) {
                         const T* s = src + base;
                         fill(o, lead * blk, value);
                         copy(s + crop[last] * blk, o + lead * blk, mid * blk);
                         fill(o + (lead + mid) * blk, tail * blk, value);
                       } else {
                         const T* s = src + base;
                         gather(s, o, 0, lead);
                         copy(s + crop[last] * blk, o + lead * blk, mid * blk);
                         gather(s, o, lead + mid, out[last]);
                       }
                       for (size_t d = last; d-- > 0;) {
                         if (++idx[d] < out[d]) {
                           if (d < inner) outer_dims();
                           break;
                         }
                         idx[d] = 0;
                       }
                     }
                   });
    });
  }

 private:
  Tensor constant_value(const KernelContext& ctx, DataType dt) const {
    Tensor fill = Tensor::empty(dt, {});
    if (opset_ < 11) {
      // Pad-2 is defined for float types only (the 'value' attribute is a float).
      const float v = value_attr_;
      ORTLITE_DISPATCH_FLOAT(dt, "Pad (opset < 11)", [&](auto tag) {
        using T = decltype(tag);
        *fill.data<T>() = static_cast<T>(v);
      });
      return fill;
    }
    const Tensor* cv = ctx.input(2);
    if (cv == nullptr) return fill;  // zero / empty string
    if (cv->dtype() != dt) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input 'constant_value' has element type ") + dtype_name(cv->dtype()) +
                   " but the data has " + dtype_name(dt));
    }
    if (cv->numel() != 1) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'constant_value' must hold one element, got shape " +
                   shape_to_string(cv->shape()));
    }
    tensor_ops::copy_elements(dt, cv->raw_data(), fill.raw_data(), 1);
    return fill;
  }

  int64_t opset_;
  bool contrib_;
  PadMode mode_ = PadMode::kConstant;
  std::vector<int64_t> pads_attr_;
  float value_attr_ = 0.f;
};

}  // namespace

void register_pad_kernels(KernelRegistry& r) {
  r.add_versions("Pad", {2, 11, 13, 18, 19, 21, 23}, make_factory<Pad>());
  r.add("com.microsoft", "Pad", 1, kMaxOpset, make_factory<Pad>());
}

}  // namespace ortlite
