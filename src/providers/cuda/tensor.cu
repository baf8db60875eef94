// Data-movement kernels: strided copy (Transpose, Slice, Expand, padding, densifying a
// view), Concat, Gather. They move elements by size only, so one instantiation per element
// size serves every type.
#include <cstdint>

#include "providers/cuda/common.cuh"
#include "providers/cuda/launchers.cuh"

namespace ortlite_cuda {
namespace {

template <typename S, typename I>
__global__ void strided_copy_kernel(Geom g, I n, const S* src, S* dst) {
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<I>(gridDim.x) * blockDim.x) {
    I off[2];
    geom_offsets<2>(g, i, off);
    dst[off[1]] = src[off[0]];
  }
}

// A batch of 2-D transposes (the common Transpose pattern after merging dims): dst[b][c][r]
// = src[b][r][c], staged through shared memory so both sides are read / written in rows.
constexpr int kTile = 32;
constexpr int kTileRows = 8;

template <typename S>
__global__ void transpose_tiles_kernel(int64_t rows, int64_t cols, int64_t tiles_r, int64_t tiles_c,
                                       int64_t batches, const S* src, S* dst) {
  __shared__ S tile[kTile][kTile + 1];
  const int64_t tiles_per_batch = tiles_r * tiles_c;
  for (int64_t t = blockIdx.x; t < tiles_per_batch * batches; t += gridDim.x) {
    const int64_t b = t / tiles_per_batch;
    const int64_t rem = t - b * tiles_per_batch;
    const int64_t r0 = (rem / tiles_c) * kTile;
    const int64_t c0 = (rem % tiles_c) * kTile;
    const S* sb = src + b * rows * cols;
    S* db = dst + b * rows * cols;
    for (int i = threadIdx.y; i < kTile; i += kTileRows) {
      const int64_t r = r0 + i, c = c0 + threadIdx.x;
      if (r < rows && c < cols) tile[i][threadIdx.x] = sb[r * cols + c];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < kTile; i += kTileRows) {
      const int64_t c = c0 + i, r = r0 + threadIdx.x;
      if (r < rows && c < cols) db[c * rows + r] = tile[threadIdx.x][i];
    }
    __syncthreads();
  }
}

template <typename S, typename Idx>
__global__ void gather_kernel(int64_t total, int64_t axis, int64_t inner, int64_t m, const S* data,
                              const Idx* indices, S* out, int* bad) {
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < total;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t q = o % inner;
    const int64_t t = o / inner;
    const int64_t j = t % m;
    const int64_t p = t / m;
    int64_t idx = static_cast<int64_t>(indices[j]);
    if (idx < 0) idx += axis;
    if (idx < 0 || idx >= axis) {
      out[o] = S(0);
      if (bad) *bad = 1;
    } else {
      out[o] = data[(p * axis + idx) * inner + q];
    }
  }
}

template <typename F>
int by_size(int elem_size, const char* what, F&& f) {
  switch (elem_size) {
    case 1:
      return f(uint8_t{});
    case 2:
      return f(uint16_t{});
    case 4:
      return f(uint32_t{});
    case 8:
      return f(uint64_t{});
    default:
      return fail("%s: element size %d is not supported", what, elem_size);
  }
}

// True when the merged copy is a batch of dense 2-D transposes: dims [B,] R, C with dst
// dense and src strides (R*C,) 1, R -- i.e. src is [B, C, R] read transposed.
bool is_batched_transpose(const Geom& g, int64_t* batches, int64_t* rows, int64_t* cols) {
  if (g.rank != 2 && g.rank != 3) return false;
  const int d = g.rank - 2;
  const int64_t R = g.dims[d], C = g.dims[d + 1];
  // dst must be dense [B, R, C]; src element (r, c) at c * R + r.
  if (g.st[1][d + 1] != 1 || g.st[1][d] != C || g.st[0][d] != 1 || g.st[0][d + 1] != R)
    return false;
  if (g.rank == 3 && (g.st[1][0] != R * C || g.st[0][0] != R * C)) return false;
  *batches = g.rank == 3 ? g.dims[0] : 1;
  // In the kernel's terms the source is [C rows, R cols] and is written transposed.
  *rows = C;
  *cols = R;
  return R >= 8 && C >= 8;
}

}  // namespace

int strided_copy(OrtliteCudaStream* stream, int elem_size, int rank, const int64_t* dims,
                 const void* src, const int64_t* src_strides, void* dst,
                 const int64_t* dst_strides) {
  OC_STREAM(stream);
  const int64_t* strides[2] = {src_strides, dst_strides};
  Geom g;
  if (merge_dims(rank, dims, 2, strides, &g)) return 1;
  const int64_t n = geom_count(g);
  if (n == 0) return 0;
  cudaStream_t s = stream->stream;
  // A plain dense copy.
  if (g.rank == 1 && g.st[0][0] == 1 && g.st[1][0] == 1) {
    OC_TRY(
        cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * elem_size, cudaMemcpyDeviceToDevice, s));
    return 0;
  }
  int64_t batches = 0, rows = 0, cols = 0;
  const bool tiles = is_batched_transpose(g, &batches, &rows, &cols);
  const bool small = geom_fits_int32(g, 2);
  return by_size(elem_size, "strided copy", [&](auto tag) -> int {
    using S = decltype(tag);
    const S* sp = static_cast<const S*>(src);
    S* dp = static_cast<S*>(dst);
    if (tiles) {
      const int64_t tr = (rows + kTile - 1) / kTile, tc = (cols + kTile - 1) / kTile;
      const int64_t blocks = tr * tc * batches;
      const unsigned grid = static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);
      transpose_tiles_kernel<S>
          <<<grid, dim3(kTile, kTileRows), 0, s>>>(rows, cols, tr, tc, batches, sp, dp);
    } else if (small) {
      strided_copy_kernel<S, int32_t>
          <<<grid_for(n), kBlock, 0, s>>>(g, static_cast<int32_t>(n), sp, dp);
    } else {
      strided_copy_kernel<S, int64_t><<<grid_for(n), kBlock, 0, s>>>(g, n, sp, dp);
    }
    OC_LAUNCHED();
    return 0;
  });
}

int concat(OrtliteCudaStream* stream, int elem_size, int count, const void* const* inputs,
           const int64_t* axis_sizes, int64_t outer, int64_t inner, void* out) {
  OC_STREAM(stream);
  if (elem_size <= 0) return fail("Concat: element size %d", elem_size);
  int64_t total = 0;
  for (int j = 0; j < count; ++j) total += axis_sizes[j];
  const size_t out_row = static_cast<size_t>(total * inner) * elem_size;
  size_t col = 0;
  for (int j = 0; j < count; ++j) {
    const size_t width = static_cast<size_t>(axis_sizes[j] * inner) * elem_size;
    if (width > 0 && outer == 1)
      OC_TRY(cudaMemcpyAsync(static_cast<char*>(out) + col, inputs[j], width,
                             cudaMemcpyDeviceToDevice, stream->stream));
    else if (width > 0 && outer > 1)
      OC_TRY(cudaMemcpy2DAsync(static_cast<char*>(out) + col, out_row, inputs[j], width, width,
                               static_cast<size_t>(outer), cudaMemcpyDeviceToDevice,
                               stream->stream));
    col += width;
  }
  return 0;
}

int gather(OrtliteCudaStream* stream, int elem_size, int index_dtype, int64_t outer, int64_t axis,
           int64_t inner, int64_t m, const void* data, const void* indices, void* out,
           int* bad_index) {
  OC_STREAM(stream);
  if (index_dtype != kInt32 && index_dtype != kInt64)
    return fail("Gather: indices of type %s, expected int32 or int64", dtype_name(index_dtype));
  const int64_t total = outer * m * inner;
  if (total == 0) return 0;
  cudaStream_t s = stream->stream;
  return by_size(elem_size, "Gather", [&](auto tag) -> int {
    using S = decltype(tag);
    const S* d = static_cast<const S*>(data);
    S* o = static_cast<S*>(out);
    if (index_dtype == kInt32)
      gather_kernel<S, int32_t><<<grid_for(total), kBlock, 0, s>>>(
          total, axis, inner, m, d, static_cast<const int32_t*>(indices), o, bad_index);
    else
      gather_kernel<S, int64_t><<<grid_for(total), kBlock, 0, s>>>(
          total, axis, inner, m, d, static_cast<const int64_t*>(indices), o, bad_index);
    OC_LAUNCHED();
    return 0;
  });
}

}  // namespace ortlite_cuda
