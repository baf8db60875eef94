// Entry point of the tensor / shape kernels (src/providers/cpu/tensor).
//
// The tensor and shape operators, one per line with the file that holds its kernel
// (tests/test_registry.py checks that every registered CPU op is listed here next to a
// file that exists):
//
//   Reshape           reshape.cc
//   Flatten           reshape.cc
//   Squeeze           reshape.cc
//   Unsqueeze         reshape.cc
//   ExpandDims (com.microsoft)         reshape.cc
//   Identity          reshape.cc
//   Transpose         transpose.cc
//   Concat            concat_split.cc
//   Split             concat_split.cc
//   Slice             slice.cc
//   Gather            gather.cc
//   Expand            expand_tile.cc
//   Tile              expand_tile.cc
//   Pad               pad.cc
//   Pad (com.microsoft)                pad.cc
//   Shape             shape_size.cc
//   Size              shape_size.cc
//   Constant          constant.cc
//   ConstantOfShape   constant.cc
//   Cast              cast.cc
//   CastLike          cast.cc
//   Range             range.cc
//   Range (com.microsoft)              range.cc
//   GatherElements    gather_scatter_nd.cc
//   Scatter           gather_scatter_nd.cc
//   ScatterElements   gather_scatter_nd.cc
//   GatherND          gather_scatter_nd.cc
//   GatherND (com.microsoft)           gather_scatter_nd.cc
//   ScatterND         gather_scatter_nd.cc
//   Trilu             gather_scatter_nd.cc
//   Trilu (com.microsoft)              gather_scatter_nd.cc
//   EyeLike           gather_scatter_nd.cc
//   OneHot            gather_scatter_nd.cc
//   NonZero           gather_scatter_nd.cc
//   Compress          gather_scatter_nd.cc
//   DepthToSpace      gather_scatter_nd.cc
//   SpaceToDepth      gather_scatter_nd.cc
//   Unique            crop_reverse_unique.cc
//   Unique (com.microsoft)             crop_reverse_unique.cc
//   CenterCropPad     crop_reverse_unique.cc
//   ReverseSequence   crop_reverse_unique.cc
//   StringConcat      string_ops.cc
//   StringSplit       string_ops.cc
//   StringNormalizer  string_ops.cc
//   RegexFullMatch    string_ops.cc
//   TensorScatter     tensor_scatter_bitcast.cc
//   BitCast           tensor_scatter_bitcast.cc
//   TopK              topk.cc

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
  register_gather_scatter_nd_kernels(r);
  register_crop_reverse_unique_kernels(r);
  register_string_kernels(r);
  register_tensor_scatter_bitcast_kernels(r);
  register_topk_kernels(r);
}

}  // namespace ortlite
