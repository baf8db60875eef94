// Entry point of the tensor / shape kernels (src/providers/cpu/tensor).
#include "providers/cpu/tensor/tensor_kernels.h"

namespace ortlite {

void register_tensor_kernels(KernelRegistry& r) {
  register_reshape_kernels(r);
  register_transpose_kernels(r);
  register_concat_split_kernels(r);
  register_slice_kernels(r);
  register_gather_kernels(r);
  register_expand_tile_kernels(r);
  register_pad_kernels(r);
  register_shape_size_kernels(r);
  register_tensor_creation_kernels(r);
  register_index_conf_kernels(r);
  register_layout_conf_kernels(r);
  register_string_conf_kernels(r);
  register_scatter_bitcast_conf_kernels(r);
  register_topk_conf_kernels(r);
}

}  // namespace ortlite
