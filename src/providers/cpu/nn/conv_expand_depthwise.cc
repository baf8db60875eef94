// com.ortlite FusedExpandDepthwise, the graph optimizer's 1x1 convolution + depthwise
// convolution of inverted residual blocks (registered with Conv in conv.cc).
#include "compute/vectorize.h"  // first: compile options for the loops below

#include <algorithm>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compute/activation.h"
#include "compute/conv_avx512.h"
#include "compute/fused_gemm.h"
#include "providers/cpu/nn/conv_internal.h"
#include "providers/cpu/nn/nn_common.h"
#include "providers/shared/conv_attrs.h"

namespace ortlite {
namespace nn {
namespace {

// com.ortlite FusedExpandDepthwise (written by the graph optimizer): a 1x1 convolution
// (stride 1, no padding, group 1) followed by a depthwise one, the inner value never stored
// whole:
//   Y = act(DepthwiseConv(act_e(Conv1x1(X, We, Be)), Wd, Bd))
// Inputs X, We, Be (optional), Wd, Bd (optional). The depthwise convolution's attributes keep
// their Conv names (kernel_shape, strides, pads, dilations, auto_pad, group, and FusedConv's
// activation, activation_params, w_scale); the 1x1 one's are expand_activation,
// expand_activation_params and expand_w_scale. The inverted-residual blocks of MobileNet
// expand the channels 6x, and their expanded activations are the network's largest values:
// here the work is split into tasks of (image, band of output rows, 32 channels), each of
// which computes the 1x1 product of its channels over the input rows its band needs into a
// block that stays in L2, and the depthwise output of those channels from it (banded()).
// Small outputs compute the expanded image channels-last and the depthwise output from it
// (nhwc(), AVX-512F without dilation); other geometries the banded kernel does not take run
// the two convolutions one after the other.
class ExpandDepthwise final : public Kernel {
 public:
  explicit ExpandDepthwise(const KernelInfo& info) {
    attrs_.load(info, false);
    group_ = info.attr_int("group", 1);
    act_ = load_act(info);
    expand_act_ = load_act(info, "expand_");
    const Tensor* we = info.has_input(1) ? info.constant_input(1) : nullptr;
    const Tensor* wd = info.has_input(3) ? info.constant_input(3) : nullptr;
    if (!we || !wd || we->dtype() != DataType::kFloat || wd->dtype() != DataType::kFloat ||
        we->rank() != 4 || wd->rank() != 4 || we->dim(2) != 1 || we->dim(3) != 1 ||
        wd->dim(1) != 1 || wd->dim(0) != we->dim(0) || group_ != we->dim(0))
      info.fail(StatusCode::kInvalidGraph,
                "FusedExpandDepthwise needs constant float weights: a 1x1 We (Ce x C x 1 x 1) "
                "and a depthwise Wd (Ce x 1 x kh x kw) with group Ce");
    const int64_t Ce = we->dim(0), C = we->dim(1), kk = wd->dim(2) * wd->dim(3);
    const std::vector<float> se = info.attr_floats("expand_w_scale");
    const std::vector<float> sd = info.attr_floats("w_scale");
    if ((!se.empty() && static_cast<int64_t>(se.size()) != Ce) ||
        (!sd.empty() && static_cast<int64_t>(sd.size()) != Ce))
      info.fail(StatusCode::kInvalidGraph, "expand_w_scale / w_scale need " + std::to_string(Ce) +
                                               " values (one per channel)");
    we_shape_ = we->shape();
    wd_shape_ = wd->shape();
    // Where the banded kernel can run (dilation 1, column stride 1 or 2, at most 16 kernel
    // columns: known from the attributes), the 1x1 weights are packed for the fused GEMM by
    // groups of kGroup channels, else whole; which one an image needs is only known at run
    // time, so each is packed on first use (a model with fixed shapes packs one). Without
    // AVX-512F the weights are scaled for the BLAS here.
    bool dilated = false;
    for (int64_t d : attrs_.dilations) dilated = dilated || d != 1;
    const int64_t sw = attrs_.strides.size() == 2 ? attrs_.strides[1] : 1;
    bands_ok_ = fgemm::available() && !dilated && sw <= 2 && wd->dim(3) <= 16;
    se_ = se;
    if (!fgemm::available()) {
      we_own_.assign(we->data<float>(), we->data<float>() + we->numel());
      for (int64_t m = 0; m < Ce && !se.empty(); ++m)
        for (int64_t c = 0; c < C; ++c) we_own_[m * C + c] *= se[m];
    }
    wd_.assign(wd->data<float>(), wd->data<float>() + wd->numel());
    for (int64_t m = 0; m < Ce && !sd.empty(); ++m)
      for (int64_t k = 0; k < kk; ++k) wd_[m * kk + k] *= sd[m];
    // Small images read the depthwise input channels-last (nhwc()): the taps by position.
    nhwc_ok_ = fgemm::available() && cvx::available() && !dilated;
    if (nhwc_ok_) {
      wd_taps_.resize(wd_.size());
      for (int64_t m = 0; m < Ce; ++m)
        for (int64_t k = 0; k < kk; ++k) wd_taps_[k * Ce + m] = wd_[m * kk + k];
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& X = ctx.required_input(0);
    const Tensor* Be = ctx.input(2);
    const Tensor* Bd = ctx.input(4);
    const Tensor& We = ctx.required_input(1);
    const Tensor& Wd = ctx.required_input(3);
    if (X.dtype() != DataType::kFloat || X.rank() != 4)
      ctx.fail(StatusCode::kInvalidArgument,
               "FusedExpandDepthwise: X must be 4-D float, got " + shape_to_string(X.shape()));
    const int64_t N = X.dim(0), C = X.dim(1), Ce = we_shape_[0];
    if (We.shape() != we_shape_ || Wd.shape() != wd_shape_ || C != we_shape_[1])
      ctx.fail(StatusCode::kInvalidArgument,
               "FusedExpandDepthwise: X " + shape_to_string(X.shape()) + " does not match We " +
                   shape_to_string(we_shape_));
    for (const Tensor* b : {Be, Bd})
      if (b && (b->dtype() != DataType::kFloat || b->rank() != 1 || b->dim(0) != Ce))
        ctx.fail(StatusCode::kInvalidArgument,
                 "FusedExpandDepthwise: a bias must be 1-D float with " + std::to_string(Ce) +
                     " values, got " + shape_to_string(b->shape()));
    const std::vector<int64_t> in(X.shape().begin() + 2, X.shape().end());
    const std::vector<int64_t> kernel(wd_shape_.begin() + 2, wd_shape_.end());
    const SpatialGeometry geo = conv_geometry(ctx, attrs_, in, kernel);
    Tensor& Y = ctx.allocate_output(0, X.dtype(), Shape{N, Ce, geo.out[0], geo.out[1]});
    if (Y.numel() == 0) return;
    const float* x = X.data<float>();
    const float* be = Be ? Be->data<float>() : nullptr;
    const float* bd = Bd ? Bd->data<float>() : nullptr;
    float* y = Y.data<float>();
    ThreadPool* pool = ctx.thread_pool();
    const cvx::DwGeometry dg{geo.in[0],        geo.in[1],        geo.out[0],    geo.out[1],
                             geo.kernel[0],    geo.kernel[1],    geo.stride[0], geo.stride[1],
                             geo.pad_begin[0], geo.pad_begin[1], false};
    const int64_t H = geo.in[0], W = geo.in[1];
    // Fewer than 196 output positions (7 x 7, or 14 x 14 at stride 2): channels-last, the
    // product's tiles along the channels (a band's product would leave the 32-wide tiles
    // along its positions mostly empty: 7 x 7, 49 of 64 columns). MobileNetV2's 96 -> 576 at
    // 14 x 14, stride 2, alone: 0.36 ms in bands, 0.30 channels-last at 1 thread (2.4% less
    // at 2). From 14 x 14 outputs the bands win at 2 threads (MobileNetV2's 384-channel
    // blocks: 105 us against 155-175 for the two convolutions one after the other).
    if (nhwc_ok_ && geo.out[0] * geo.out[1] < kMinBandPixels) {
      pack_whole(We);
      nhwc(dg, x, be, bd, y, N, C, Ce, pool);
      return;
    }
    if (bands_ok_ && H * W >= kMinBandPixels) {
      std::call_once(groups_once_, [&] {
        for (int64_t c0 = 0; c0 < Ce; c0 += kGroup) {
          we_groups_.push_back(fgemm::Packed::pack(We.data<float>() + c0 * C, C,
                                                   std::min(kGroup, Ce - c0), C, false));
          if (!se_.empty()) we_groups_.back().scale_outputs(se_.data() + c0);
        }
      });
      banded(dg, x, be, bd, y, N, C, Ce, pool);
      return;
    }
    if (fgemm::available()) pack_whole(We);
    // Else the two convolutions one after the other.
    thread_local std::vector<float> mid;
    if (mid.size() < static_cast<size_t>(N * Ce * H * W))
      mid.resize(static_cast<size_t>(N * Ce * H * W));
    SpatialGeometry g1;
    g1.rank = 2;
    g1.in = g1.out = {H, W};
    g1.kernel = g1.stride = g1.dilation = {1, 1};
    g1.pad_begin = g1.pad_end = {0, 0};
    conv_f32(g1, x, N, C, Ce, 1, we_own_.empty() ? We.data<float>() : we_own_.data(), &we_packed_,
             be, expand_act_, mid.data(), pool);
    conv_f32(geo, mid.data(), N, Ce, Ce, Ce, wd_.data(), nullptr, bd, act_, y, pool);
  }

 private:
  // Tasks over (image, band of output rows, group of kGroup channels): a task computes the
  // 1x1 product of its channels over the input rows its band needs (a block of at most
  // kBudget floats, in L2) and then the depthwise output of those channels. Input rows
  // shared by two bands are computed by both; the groups share the input block in cache.
  void banded(const cvx::DwGeometry& g, const float* x, const float* be, const float* bd, float* y,
              int64_t N, int64_t C, int64_t Ce, ThreadPool* pool) const {
    // The depthwise step: AVX-512's in-place kernel (cvx::dw_run), else depthwise_2d over the
    // block (its padded-buffer kernels) into a band of the task's channels, copied to Y.
    const bool direct = cvx::available() && fast_isa_cap() >= 2;  // ORTLITE_FAST_ISA
    const std::vector<uint32_t> masks = direct ? cvx::dw_masks(g) : std::vector<uint32_t>();
    const RegisterAct<float> ra = register_act<float>(act_, false);
    const int64_t rows_fit = std::max<int64_t>(g.KH, kBudget / (kGroup * g.W));
    const int64_t nb = std::min(g.OH, std::max<int64_t>(1, (rows_fit - g.KH) / g.sh + 1));
    const int64_t bands = (g.OH + nb - 1) / nb, groups = static_cast<int64_t>(we_groups_.size());
    const int64_t tasks = N * bands * groups;
    const int64_t P = g.OH * g.OW, kk = g.KH * g.KW;
    auto run_task = [&](int64_t t) {
      const int64_t gi = t % groups, n = t / groups / bands, oy0 = (t / groups % bands) * nb;
      const int64_t oy1 = std::min(g.OH, oy0 + nb), c0 = gi * kGroup;
      const int64_t cn = we_groups_[gi].outputs();
      const int64_t r0 = std::max<int64_t>(0, oy0 * g.sh - g.pt);
      const int64_t r1 = std::min<int64_t>(g.H, (oy1 - 1) * g.sh - g.pt + g.KH);
      const int64_t nr = std::max<int64_t>(0, r1 - r0);
      std::vector<float>& buf = col_scratch<float>();
      if (buf.size() < static_cast<size_t>(cn * nr * g.W))
        buf.resize(static_cast<size_t>(cn * nr * g.W));
      if (nr > 0) {
        fgemm::Epilogue fe;
        fe.bias_row = be ? be + c0 : nullptr;
        fe.act = expand_act_;
        fgemm::gemm_w_left(we_groups_[gi], x + (n * C * g.H + r0) * g.W, g.H * g.W, nr * g.W,
                           buf.data(), nr * g.W, fe, nullptr);
      }
      // The block as a plane of nr rows: output row oy0 + j reads block row
      // j * sh - pt' + ky, with pt' = r0 + pt - oy0 * sh.
      cvx::DwGeometry bg = g;
      bg.H = nr;
      bg.OH = oy1 - oy0;
      bg.pt = r0 + g.pt - oy0 * g.sh;
      if (!direct) {
        band_generic(g, bg, buf.data(), bd, c0, cn, y + (n * Ce + c0) * P + oy0 * g.OW, P);
        return;
      }
      for (int64_t c = c0; c < c0 + cn; ++c) {
        float* yc = y + (n * Ce + c) * P + oy0 * g.OW;
        cvx::dw_run(bg, masks.data(), buf.data() + (c - c0) * nr * g.W, wd_.data() + c * kk,
                    bd ? bd[c] : 0.f, ra.clamp, ra.lo, ra.hi, yc);
        if (ra.after) epilogue(act_, yc, bg.OH * g.OW, 0.f, nullptr);
      }
    };
    const double cost = 2.0 * static_cast<double>(N) * Ce * (g.H * g.W * C + P * kk);
    if (pool && pool->num_threads() > 1 && tasks > 1 && cost > 1e5) {
      pool->parallel_for(tasks, [&](int64_t s, int64_t e) {
        for (int64_t t = s; t < e; ++t) run_task(t);
      });
    } else {
      for (int64_t t = 0; t < tasks; ++t) run_task(t);
    }
  }

  // The 1x1 weights whole, for the fused GEMM (packed on first use).
  void pack_whole(const Tensor& We) const {
    std::call_once(whole_once_, [&] {
      const int64_t Ce = we_shape_[0], C = we_shape_[1];
      we_packed_.push_back(fgemm::Packed::pack(We.data<float>(), C, Ce, C, false));
      if (!se_.empty()) we_packed_.back().scale_outputs(se_.data());
    });
  }

  // Small images: the 1x1 product computed transposed, positions x channels (the expanded
  // image channels-last, as the product's tiles run along the channels anyway), and the
  // depthwise convolution read from it with 16 channels a vector (cvx::dw_nhwc), each run of
  // channels by the thread that computed it, as soon as it is done (gemm_w_right's
  // cols_done). Channel-major, a 7 x 7 plane filled 7 of 16 lanes a row, and the product's
  // result was transposed back before it: MobileNetV2's 160 -> 960 at 7 x 7 (+ Clip, both)
  // alone is 13% faster at 1 thread and 19-21% at 2 (same process, alternating order).
  void nhwc(const cvx::DwGeometry& g, const float* x, const float* be, const float* bd, float* y,
            int64_t N, int64_t C, int64_t Ce, ThreadPool* pool) const {
    const RegisterAct<float> ra = register_act<float>(act_, false);
    const int64_t HW = g.H * g.W, P = g.OH * g.OW;
    thread_local std::vector<float> ct;
    if (ct.size() < static_cast<size_t>(HW * Ce)) ct.resize(static_cast<size_t>(HW * Ce));
    fgemm::Epilogue te;
    te.bias_col = be;
    te.act = expand_act_;
    float* const cx = ct.data();  // this thread's buffer: the callback runs on any thread
    for (int64_t n = 0; n < N; ++n) {
      float* yn = y + n * Ce * P;
      const std::function<void(int64_t, int64_t)> dw = [&](int64_t c0, int64_t c1) {
        cvx::dw_nhwc(g, cx, Ce, wd_taps_.data(), Ce, bd, ra.clamp, ra.lo, ra.hi, c0, c1, yn, P);
        if (ra.after)
          for (int64_t c = c0; c < c1; ++c) epilogue(act_, yn + c * P, P, 0.f, nullptr);
      };
      fgemm::gemm_w_right(x + n * C * HW, 1, HW, HW, we_packed_[0], cx, Ce, te, pool, dw);
    }
  }

  // The depthwise output rows of a band (geometry bg over the block of cn channels, nr =
  // bg.H rows each) with depthwise_2d, for channels [c0, c0 + cn): into a scratch band, then
  // each channel's rows to y (channel planes P apart).
  void band_generic(const cvx::DwGeometry& g, const cvx::DwGeometry& bg, const float* block,
                    const float* bd, int64_t c0, int64_t cn, float* y, int64_t P) const {
    SpatialGeometry sg;
    sg.rank = 2;
    sg.in = {bg.H, g.W};
    sg.out = {bg.OH, g.OW};
    sg.kernel = {g.KH, g.KW};
    sg.stride = {g.sh, g.sw};
    sg.dilation = {1, 1};
    // Rows past the block that the last output row's taps reach are zero padding (they
    // are below the image: a band inside it has every row it reads in the block).
    const int64_t need_rows = (bg.OH - 1) * g.sh + g.KH;
    const int64_t need_cols = (g.OW - 1) * g.sw + g.KW;
    sg.pad_begin = {bg.pt, g.pl};
    sg.pad_end = {std::max<int64_t>(0, need_rows - bg.H - bg.pt),
                  std::max<int64_t>(0, need_cols - g.W - g.pl)};
    Epilogue<float> ep;
    ep.bias = bd ? bd + c0 : nullptr;
    ep.act = act_;
    const int64_t pb = bg.OH * g.OW;
    thread_local std::vector<float> out;
    if (out.size() < static_cast<size_t>(cn * pb)) out.resize(static_cast<size_t>(cn * pb));
    depthwise_2d<float>(sg, block, wd_.data() + c0 * g.KH * g.KW, ep, out.data(), 1, cn, cn,
                        nullptr);
    for (int64_t c = 0; c < cn; ++c)
      std::memcpy(y + c * P, out.data() + c * pb, static_cast<size_t>(pb) * sizeof(float));
  }

  // Channels per task, and floats of a task's block of expanded rows (256 KiB, in L2).
  static constexpr int64_t kGroup = 32;
  static constexpr int64_t kBudget = int64_t(1) << 16;
  static constexpr int64_t kMinBandPixels = 196;

  SpatialAttrs attrs_;
  int64_t group_ = 1;
  ActSpec act_, expand_act_;
  Shape we_shape_, wd_shape_;
  bool bands_ok_ = false, nhwc_ok_ = false;
  std::vector<float> se_;  // expand_w_scale
  // The 1x1 weights for the fused GEMM, whole and by groups of kGroup output channels,
  // each packed on first use.
  mutable std::once_flag whole_once_, groups_once_;
  mutable std::vector<fgemm::Packed> we_packed_, we_groups_;
  std::vector<float> we_own_;   // without AVX-512F: scaled by expand_w_scale (when given)
  std::vector<float> wd_;       // depthwise weights scaled by w_scale
  std::vector<float> wd_taps_;  // wd_ by tap: [KH * KW][Ce] (nhwc())
};

}  // namespace

std::unique_ptr<Kernel> make_expand_depthwise(const KernelInfo& info) {
  return std::make_unique<ExpandDepthwise>(info);
}

}  // namespace nn
}  // namespace ortlite
