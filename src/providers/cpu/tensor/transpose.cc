// Transpose: a strided copy (tensor_util.cc) that memcpys rows when the permutation keeps
// the innermost dim and tiles the copy for the 2-D transpose pattern. A permutation that
// only moves size-1 dims is a reshape of the input (no copy).
#include <cstring>

#include "compute/conv_avx512.h"
#include "providers/cpu/tensor/tensor_kernels.h"
#include "providers/shared/transpose_slice.h"

namespace ortlite {
namespace {

// When `perm` keeps axes [0, k) and moves the block [j, rank) in front of [k, j) (NHWC <->
// NCHW, a matrix transpose), the copy is a batch of B matrix transposes of R x C into C x R.
bool batched_2d(const Shape& in, const std::vector<int64_t>& perm, int64_t* B, int64_t* R,
                int64_t* C) {
  const size_t rank = perm.size();
  size_t k = 0;
  while (k < rank && perm[k] == static_cast<int64_t>(k)) ++k;
  if (k + 1 >= rank) return false;
  const size_t j = static_cast<size_t>(perm[k]);
  if (j <= k) return false;
  for (size_t i = 0; i < rank - j; ++i)
    if (perm[k + i] != static_cast<int64_t>(j + i)) return false;
  for (size_t i = 0; i < j - k; ++i)
    if (perm[k + rank - j + i] != static_cast<int64_t>(k + i)) return false;
  *B = *R = *C = 1;
  for (size_t i = 0; i < k; ++i) *B *= in[i];
  for (size_t i = k; i < j; ++i) *R *= in[i];
  for (size_t i = j; i < rank; ++i) *C *= in[i];
  return true;
}

// dst[b][c][r] = src[b][r][c] for 4-byte elements, in 16 x 16 tiles (transposed in
// registers with AVX-512), split over the thread pool by rows of tiles.
void transpose_2d_u32(const uint32_t* src, uint32_t* dst, int64_t B, int64_t R, int64_t C,
                      ThreadPool* pool) {
  const int64_t tiles_r = (R + 15) / 16;
  const bool vec = nn::cvx::available();
  parallel_for(pool, B * tiles_r, 16.0 * static_cast<double>(C), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / tiles_r, r0 = (t % tiles_r) * 16;
      const int rows = static_cast<int>(std::min<int64_t>(16, R - r0));
      const uint32_t* s = src + b * R * C + r0 * C;
      uint32_t* d = dst + b * R * C + r0;
      for (int64_t c0 = 0; c0 < C; c0 += 16) {
        const int cols = static_cast<int>(std::min<int64_t>(16, C - c0));
        if (vec) {
          nn::cvx::transpose16(reinterpret_cast<const float*>(s + c0), C, rows, cols,
                               reinterpret_cast<float*>(d + c0 * R), R);
          continue;
        }
        for (int c = 0; c < cols; ++c)
          for (int r = 0; r < rows; ++r) d[(c0 + c) * R + r] = s[r * C + c0 + c];
      }
    }
  });
}

class Transpose final : public Kernel {
 public:
  explicit Transpose(const KernelInfo& info) { attrs_.load(info); }

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.required_input(0);
    const Shape& in = data.shape();
    const size_t rank = in.size();
    const std::vector<int64_t> perm = attrs_.resolve(ctx, in);
    const tensor_ops::StridedView view = tensor_ops::transpose_view(in, perm);
    const Shape& out = view.shape;
    // Same memory order when the dims other than 1 keep their relative order.
    bool same_order = true;
    int64_t last = -1;
    for (size_t i = 0; i < rank; ++i) {
      if (out[i] == 1) continue;
      if (perm[i] < last) same_order = false;
      last = perm[i];
    }
    if (same_order || data.numel() == 0) {
      ctx.set_output(0, data.reshaped(out));
      return;
    }
    Tensor& y = ctx.allocate_output(0, data.dtype(), out);
    int64_t B, R, C;
    if (dtype_size(data.dtype()) == 4 && data.dtype() != DataType::kString &&
        batched_2d(in, perm, &B, &R, &C) && R > 1 && C > 1) {
      transpose_2d_u32(static_cast<const uint32_t*>(data.raw_data()),
                       static_cast<uint32_t*>(y.raw_data()), B, R, C, ctx.thread_pool());
      return;
    }
    tensor_ops::strided_copy_dense(data.dtype(), data.raw_data(), view.strides, y.raw_data(), out,
                                   ctx.thread_pool());
  }

 private:
  tensor_ops::TransposeAttrs attrs_;
};

}  // namespace

void register_transpose_kernels(KernelRegistry& r) {
  r.add_versions("Transpose", {1, 13, 21, 23}, make_factory<Transpose>());
}

}  // namespace ortlite
