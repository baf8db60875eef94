// Registration functions and shared copy helpers of the tensor / shape kernels
// (src/providers/cpu/tensor). register_tensor_kernels (register.cc) calls every one of these.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ortlite/kernel.h"
#include "providers/shared/shape_ops.h"

namespace ortlite {

void register_tensor_creation_kernels(KernelRegistry& r);  // constant.cc, cast.cc, range.cc

void register_reshape_kernels(KernelRegistry& r);       // reshape.cc: Reshape Flatten Squeeze
                                                        // Unsqueeze Identity
void register_transpose_kernels(KernelRegistry& r);     // transpose.cc
void register_concat_split_kernels(KernelRegistry& r);  // concat_split.cc: Concat Split
void register_slice_kernels(KernelRegistry& r);         // slice.cc
void register_gather_kernels(KernelRegistry& r);        // gather.cc
void register_expand_tile_kernels(KernelRegistry& r);   // expand_tile.cc: Expand Tile
void register_pad_kernels(KernelRegistry& r);           // pad.cc
void register_shape_size_kernels(KernelRegistry& r);    // shape_size.cc: Shape Size
void register_gather_scatter_nd_kernels(
    KernelRegistry& r);  // gather_scatter_nd.cc: GatherElements ...
void register_crop_reverse_unique_kernels(
    KernelRegistry& r);                           // crop_reverse_unique.cc: CenterCropPad ...
void register_string_kernels(KernelRegistry& r);  // string_ops.cc: StringConcat ...
// tensor_scatter_bitcast.cc: TensorScatter BitCast
void register_tensor_scatter_bitcast_kernels(KernelRegistry& r);
void register_topk_kernels(KernelRegistry& r);  // topk.cc: TopK

namespace tensor_ops {

struct Bytes16 {
  uint64_t lo, hi;
};

// Calls fn(T{}) with T a storage type of dt's element size (uint8_t .. uint64_t, Bytes16),
// or std::string for strings: for kernels that only move elements.
template <typename Fn>
void dispatch_storage(DataType dt, Fn&& fn) {
  if (dt == DataType::kString) return fn(std::string());
  switch (dtype_size(dt)) {
    case 1:
      return fn(uint8_t{});
    case 2:
      return fn(uint16_t{});
    case 4:
      return fn(uint32_t{});
    case 8:
      return fn(uint64_t{});
    case 16:
      return fn(Bytes16{});
    default:
      ORTLITE_THROW(kNotImplemented, "element type ", dtype_name(dt),
                    " is not supported by the tensor copy kernels");
  }
}

// Copies `count` elements of type `dt` from src to dst (non-overlapping): memcpy for the
// fixed-size types, std::string assignment for strings.
void copy_elements(DataType dt, const void* src, void* dst, int64_t count);

// Same, split over the pool when the copy is large.
void parallel_copy(DataType dt, const void* src, void* dst, int64_t count, ThreadPool* pool);

// Writes `count` copies of the single element at `value` into dst.
void fill_elements(DataType dt, const void* value, void* dst, int64_t count);

// Copies a strided view into a strided destination: for every multi-index i over `shape`,
//   dst[sum(i[d] * dst_strides[d])] = src[sum(i[d] * src_strides[d])]
// (strides in elements, src strides may be zero or negative; src/dst point at the element
// of index 0). Dims are coalesced; contiguous rows go through memcpy, a 2-D transpose
// pattern through a cache-blocked loop; large copies are split over the pool.
void strided_copy(DataType dt, const void* src, const std::vector<int64_t>& src_strides, void* dst,
                  const std::vector<int64_t>& dst_strides, const Shape& shape, ThreadPool* pool);

// strided_copy into a dense destination.
inline void strided_copy_dense(DataType dt, const void* src,
                               const std::vector<int64_t>& src_strides, void* dst,
                               const Shape& shape, ThreadPool* pool) {
  strided_copy(dt, src, src_strides, dst, dense_strides(shape), shape, pool);
}

// Writes the dense tensor `src` of `shape` with its dims permuted by `perm` (output dim i is
// input dim perm[i]) densely into dst, with Transpose's fast paths: 4-byte batched 2-D
// transposes in register tiles, other permutations through strided_copy.
void transpose_dense(DataType dt, const void* src, const Shape& shape,
                     const std::vector<int64_t>& perm, void* dst, ThreadPool* pool);

// Checks that an output of `shape` and element type `dt` has a representable byte size;
// fails with kInvalidArgument naming `what` otherwise. Returns the element count.
int64_t checked_numel(const KernelContext& ctx, DataType dt, const Shape& shape, const char* what);

}  // namespace tensor_ops
}  // namespace ortlite
