// com.microsoft GatherBlockQuantized (block-quantized embedding tables, as onnxruntime's
// quantization tools write them next to MatMulNBits): Gather of `data` along gather_axis,
// each gathered element dequantized as (code - zero_point) * scale, where scales (and zero
// points) hold one value per block of block_size elements along quantize_axis.
//
// data is int4 / uint4 (any gather_axis / quantize_axis; zero points of data's type, default
// 0), or uint8 holding 8 / bits codes per byte, low bits first (bits 2, 4 or 8; gather_axis
// 0 and quantize_axis the last axis, whose logical size is the byte count times 8 / bits;
// zero points packed the same way per row of scales, default 2^(bits - 1)), onnxruntime's
// layouts. scales are float or float16, the output's type. An index out of [-n, n) is an
// error here (onnxruntime writes zeros for it).
#include <algorithm>
#include <string>
#include <vector>

#include "providers/cpu/nn/nn_common.h"
#include "providers/cpu/quant/quant_common.h"

namespace ortlite {
namespace quant {
namespace {

class GatherBlockQuantized final : public Kernel {
 public:
  explicit GatherBlockQuantized(const KernelInfo& info)
      : gather_axis_(info.attr_int("gather_axis", 0)),
        quantize_axis_(info.attr_int("quantize_axis", 1)),
        block_(info.attr_int("block_size", 128)),
        bits_(info.attr_int("bits", 4)) {
    if (block_ < 16 || (block_ & (block_ - 1)) != 0)
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'block_size' must be a power of 2 >= 16, got " + std::to_string(block_));
    if (bits_ != 2 && bits_ != 4 && bits_ != 8)
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'bits' must be 2, 4 or 8, got " + std::to_string(bits_));
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.required_input(0);
    const Tensor& idx = ctx.required_input(1);
    const Tensor& scales = ctx.required_input(2);
    const Tensor* zps = ctx.input(3);
    const DataType dt = data.dtype();
    const bool u8 = dt == DataType::kUInt8;
    if (!u8 && dt != DataType::kInt4 && dt != DataType::kUInt4)
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input 'data' must be uint8, int4 or uint4, got ") + dtype_name(dt));
    if (!u8 && bits_ != 4)
      ctx.fail(StatusCode::kInvalidArgument,
               "int4 / uint4 'data' takes bits 4, got " + std::to_string(bits_));
    if (idx.dtype() != DataType::kInt32 && idx.dtype() != DataType::kInt64)
      ctx.fail(
          StatusCode::kInvalidArgument,
          std::string("input 'indices' must be int32 or int64, got ") + dtype_name(idx.dtype()));
    const DataType st = scales.dtype();
    if (st != DataType::kFloat && st != DataType::kFloat16)
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input 'scales' must be float or float16, got ") + dtype_name(st));
    const int64_t rank = static_cast<int64_t>(data.rank());
    if (rank < 1) ctx.fail(StatusCode::kInvalidArgument, "input 'data' must have rank >= 1");
    const int64_t ga = gather_axis_ < 0 ? gather_axis_ + rank : gather_axis_;
    const int64_t qa = quantize_axis_ < 0 ? quantize_axis_ + rank : quantize_axis_;
    if (ga < 0 || ga >= rank || qa < 0 || qa >= rank)
      ctx.fail(StatusCode::kInvalidArgument, "gather_axis " + std::to_string(gather_axis_) +
                                                 " / quantize_axis " +
                                                 std::to_string(quantize_axis_) +
                                                 " out of range for rank " + std::to_string(rank));
    if (u8 && (ga != 0 || qa != rank - 1 || ga == qa))
      ctx.fail(StatusCode::kInvalidArgument,
               "uint8 'data' needs gather_axis 0 and quantize_axis the last axis, got " +
                   std::to_string(ga) + " and " + std::to_string(qa));
    // The logical shape: uint8 packs 8 / bits codes per byte along the last axis.
    const int64_t comp = u8 ? 8 / bits_ : 1;
    Shape D = data.shape();
    D.back() *= comp;
    const int64_t qdim = D[qa], nblk = (qdim + block_ - 1) / block_;
    const Shape& S = scales.shape();
    bool ok = S.size() == D.size();
    for (size_t i = 0; ok && i < D.size(); ++i)
      ok = S[i] == (static_cast<int64_t>(i) == qa ? nblk : D[i]);
    if (!ok)
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'scales' " + shape_to_string(S) + " does not fit 'data' (logical shape " +
                   shape_to_string(D) + ", " + std::to_string(nblk) + " blocks of " +
                   std::to_string(block_) + " along axis " + std::to_string(qa) + ")");
    if (zps) {
      bool zok = zps->dtype() == dt && zps->rank() == S.size();
      for (size_t i = 0; zok && i < S.size(); ++i)
        zok =
            zps->dim(i) == (u8 && static_cast<int64_t>(i) == qa ? (S[i] + comp - 1) / comp : S[i]);
      if (!zok)
        ctx.fail(StatusCode::kInvalidArgument,
                 "input 'zero_points' (" + std::string(dtype_name(zps->dtype())) + " " +
                     shape_to_string(zps->shape()) + ") does not fit 'scales' " +
                     shape_to_string(S) + " and 'data' of type " + dtype_name(dt));
    }
    Shape ys(D.begin(), D.begin() + ga);
    for (int64_t d : idx.shape()) ys.push_back(d);
    ys.insert(ys.end(), D.begin() + ga + 1, D.end());
    Tensor& Y = ctx.allocate_output(0, st, ys);

    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < ga; ++i) outer *= D[i];
    for (int64_t i = ga + 1; i < rank; ++i) inner *= D[i];
    const int64_t gdim = D[ga], nidx = idx.numel();
    int64_t qn = 1;
    for (int64_t i = qa + 1; i < rank; ++i) qn *= D[i];
    std::vector<int64_t> iv(static_cast<size_t>(nidx));
    for (int64_t i = 0; i < nidx; ++i) {
      const int64_t v =
          idx.dtype() == DataType::kInt32 ? idx.data<int32_t>()[i] : idx.data<int64_t>()[i];
      if (v < -gdim || v >= gdim)
        ctx.fail(StatusCode::kInvalidArgument, "indices[" + std::to_string(i) +
                                                   "] = " + std::to_string(v) +
                                                   " is out of range [" + std::to_string(-gdim) +
                                                   ", " + std::to_string(gdim) + ")");
      iv[i] = v < 0 ? v + gdim : v;
    }
    std::vector<float> s_own;
    const float* sc = st == DataType::kFloat ? scales.data<float>() : nullptr;
    if (st != DataType::kFloat) {
      s_own.resize(static_cast<size_t>(scales.numel()));
      nn::convert_to_float(st, scales.raw_data(), s_own.data(), scales.numel());
      sc = s_own.data();
    }
    const uint8_t* bytes = static_cast<const uint8_t*>(data.raw_data());
    const uint8_t* zb = zps ? static_cast<const uint8_t*>(zps->raw_data()) : nullptr;
    const int64_t zrow = (nblk + comp - 1) / comp;  // uint8: zero-point bytes per row
    auto code = [&](int64_t i) -> int32_t {
      if (u8) {
        if (bits_ == 8) return bytes[i];
        const int64_t bit = i * bits_;
        return (bytes[bit >> 3] >> (bit & 7)) & ((1 << bits_) - 1);
      }
      // int4 / uint4 tensors hold one element per byte in memory (its low 4 bits).
      const int32_t n = bytes[i] & 15;
      return dt == DataType::kInt4 && n >= 8 ? n - 16 : n;
    };
    auto zero_point = [&](int64_t s) -> int32_t {
      if (!zb) return u8 ? 1 << (bits_ - 1) : 0;
      if (u8) {
        if (bits_ == 8) return zb[s];
        const int64_t row = s / nblk, q = s % nblk;
        const int64_t bit = q * bits_;
        return (zb[row * zrow + (bit >> 3)] >> (bit & 7)) & ((1 << bits_) - 1);
      }
      const int32_t n = zb[s] & 15;
      return dt == DataType::kInt4 && n >= 8 ? n - 16 : n;
    };
    std::vector<float> y(static_cast<size_t>(outer * nidx * inner));
    parallel_for(ctx.thread_pool(), outer * nidx, 4.0 * static_cast<double>(inner),
                 [&](int64_t t0, int64_t t1) {
                   for (int64_t t = t0; t < t1; ++t) {
                     const int64_t m = t / nidx, j = t % nidx;
                     const int64_t base = (m * gdim + iv[j]) * inner;
                     float* out = y.data() + t * inner;
                     for (int64_t e = 0; e < inner; ++e) {
                       const int64_t i = base + e;
                       const int64_t x = i / (qdim * qn), r = i % (qdim * qn);
                       const int64_t s = (x * nblk + (r / qn) / block_) * qn + r % qn;
                       out[e] = static_cast<float>(code(i) - zero_point(s)) * sc[s];
                     }
                   }
                 });
    if (st == DataType::kFloat) {
      std::copy(y.begin(), y.end(), Y.data<float>());
    } else {
      nn::convert_from_float(st, y.data(), Y.raw_data(), static_cast<int64_t>(y.size()));
    }
  }

 private:
  int64_t gather_axis_, quantize_axis_, block_, bits_;
};

}  // namespace

void register_gather_block_quantized(KernelRegistry& r) {
  r.add("com.microsoft", "GatherBlockQuantized", 1, kMaxOpset,
        make_factory<GatherBlockQuantized>());
}

}  // namespace quant
}  // namespace ortlite
