// TensorScatter (opset 24: KV-cache update) and BitCast (opset 26: reinterpret bits).
#include <cstring>

#include "providers/cpu/tensor/tensor_kernels.h"

namespace ortlite {
namespace {

using tensor_ops::dims_product;

// TensorScatter(past_cache, update, write_indices?): a copy of past_cache in which, for
// every batch b and every prefix index before `axis`, the update's `sequence_length`
// slices along `axis` are written from position write_indices[b] on (modulo the cache
// length in "circular" mode).
class TensorScatter final : public Kernel {
 public:
  explicit TensorScatter(const KernelInfo& info) : axis_(info.attr_int("axis", -2)) {
    const std::string mode = info.attr_string("mode", "linear");
    if (mode == "circular") {
      circular_ = true;
    } else if (mode != "linear") {
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'mode' = '" + mode + "' is not 'linear' or 'circular'");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& past = ctx.required_input(0);
    const Tensor& update = ctx.required_input(1);
    const DataType dt = past.dtype();
    if (update.dtype() != dt) {
      ctx.fail(StatusCode::kInvalidArgument, std::string("input 'update' has type ") +
                                                 dtype_name(update.dtype()) +
                                                 ", input 'past_cache' has type " + dtype_name(dt));
    }
    const Shape& ps = past.shape();
    const Shape& us = update.shape();
    const int64_t rank = static_cast<int64_t>(ps.size());
    if (rank < 2) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'past_cache' must have rank >= 2, got " + shape_to_string(ps));
    }
    const int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
    if (axis < 1 || axis >= rank) {
      ctx.fail(StatusCode::kInvalidArgument,
               "attribute 'axis' = " + std::to_string(axis_) + " must name a dimension of rank " +
                   std::to_string(rank) + " other than the batch dimension 0");
    }
    bool compatible = us.size() == ps.size();
    for (int64_t d = 0; compatible && d < rank; ++d) {
      compatible = d == axis ? us[d] <= ps[d] : us[d] == ps[d];
    }
    if (!compatible) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'update' " + shape_to_string(us) + " must match input 'past_cache' " +
                   shape_to_string(ps) + " except along axis " + std::to_string(axis) +
                   ", where it may not be longer");
    }
    const int64_t batch = ps[0];
    const int64_t max_len = ps[axis], seq_len = us[axis];
    std::vector<int64_t> write(static_cast<size_t>(batch), 0);
    if (const Tensor* wi = ctx.input(2)) {
      if (wi->dtype() != DataType::kInt64 || wi->rank() != 1 || wi->dim(0) != batch) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "input 'write_indices' must be an int64 tensor of shape [" +
                     std::to_string(batch) + "], got " + dtype_name(wi->dtype()) + " " +
                     shape_to_string(wi->shape()));
      }
      const int64_t* w = wi->data<int64_t>();
      for (int64_t b = 0; b < batch; ++b) {
        if (circular_) {
          // Reduced first so that adding the sequence position cannot overflow.
          write[b] = max_len == 0 ? 0 : ((w[b] % max_len) + max_len) % max_len;
        } else if (w[b] < 0 || w[b] > max_len - seq_len) {
          ctx.fail(StatusCode::kInvalidArgument,
                   "write_indices[" + std::to_string(b) + "] = " + std::to_string(w[b]) +
                       " with sequence_length " + std::to_string(seq_len) +
                       " writes past max_sequence_length " + std::to_string(max_len) +
                       " (mode 'linear')");
        } else {
          write[b] = w[b];
        }
      }
    }
    Tensor& out = ctx.allocate_output(0, dt, ps);
    tensor_ops::parallel_copy(dt, past.raw_data(), out.raw_data(), past.numel(), ctx.thread_pool());
    if (update.numel() == 0) return;
    const int64_t per_batch = dims_product(ps, 1, static_cast<size_t>(axis));
    const int64_t inner = dims_product(ps, static_cast<size_t>(axis) + 1, ps.size());
    const size_t es = dtype_size(dt);
    const char* src = static_cast<const char*>(update.raw_data());
    char* dst = static_cast<char*>(out.raw_data());
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t p = 0; p < per_batch; ++p) {
        const int64_t prefix = b * per_batch + p;
        for (int64_t s = 0; s < seq_len; ++s) {
          int64_t pos = write[b] + s;
          if (circular_) pos %= max_len;
          const int64_t from = (prefix * seq_len + s) * inner;
          const int64_t to = (prefix * max_len + pos) * inner;
          tensor_ops::copy_elements(dt, src + static_cast<size_t>(from) * es,
                                    dst + static_cast<size_t>(to) * es, inner);
        }
      }
    }
  }

 private:
  int64_t axis_;
  bool circular_ = false;
};

// Bits one element of `t` holds: 4 for int4 / uint4 / float4e2m1 (TensorProto 21-23), 2
// for int2 / uint2 (25, 26), else the storage size. The narrow types take a byte each in
// memory, their bits in the low end.
int element_bits(DataType t) {
  switch (static_cast<int32_t>(t)) {
    case 21:
    case 22:
    case 23:
      return 4;
    case 25:
    case 26:
      return 2;
    default:
      return static_cast<int>(dtype_size(t)) * 8;
  }
}

// BitCast(input, to): the input's bytes read as type `to` of the same width. A bool
// output holds 0 or 1: any non-zero byte reads as true (a C++ bool cannot hold other
// values).
class BitCast final : public Kernel {
 public:
  explicit BitCast(const KernelInfo& info) {
    const int64_t to = info.attr_int_required("to");
    to_ = static_cast<DataType>(to);
    if (to < 1 || to > 64 || to_ == DataType::kString) {
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'to' = " + std::to_string(to) + " is not a non-string element type");
    }
    if (!dtype_supported(to_)) {
      info.fail(StatusCode::kNotImplemented,
                "attribute 'to': element type " + std::to_string(to) + " is not supported");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    if (x.dtype() == DataType::kString) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'input' must not be a string tensor");
    }
    const int in_bits = element_bits(x.dtype()), out_bits = element_bits(to_);
    if (in_bits != out_bits) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("cannot bitcast ") + dtype_name(x.dtype()) + " (" +
                   std::to_string(in_bits) + " bits) to " + dtype_name(to_) + " (" +
                   std::to_string(out_bits) + " bits): the widths differ");
    }
    Tensor& y = ctx.allocate_output(0, to_, x.shape());
    const size_t bytes = x.nbytes();
    if (bytes == 0) return;
    const auto* src = static_cast<const uint8_t*>(x.raw_data());
    auto* dst = static_cast<uint8_t*>(y.raw_data());
    if (to_ == DataType::kBool) {
      for (size_t i = 0; i < bytes; ++i) dst[i] = src[i] != 0;
    } else if (out_bits < 8) {
      const uint8_t mask = static_cast<uint8_t>((1u << out_bits) - 1);
      for (size_t i = 0; i < bytes; ++i) dst[i] = src[i] & mask;
    } else {
      std::memcpy(dst, src, bytes);
    }
  }

 private:
  DataType to_;
};

}  // namespace

void register_tensor_scatter_bitcast_kernels(KernelRegistry& r) {
  r.add("", "TensorScatter", 24, kMaxOpset, make_factory<TensorScatter>());
  r.add("", "BitCast", 26, kMaxOpset, make_factory<BitCast>());
}

}  // namespace ortlite
