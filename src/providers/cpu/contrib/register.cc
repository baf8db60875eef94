// register_contrib_kernels: onnxruntime's contrib operators (domain com.microsoft unless
// another is named), the ones its transformers optimizer writes into BERT / GPT-2 style
// models, one per line with the file that holds its kernel (tests/test_registry.py checks
// that every registered CPU op is listed here next to a file that exists):
//
//   SkipLayerNormalization (com.microsoft)            layer_norm.cc
//   SkipSimplifiedLayerNormalization (com.microsoft)  layer_norm.cc
//   SimplifiedLayerNormalization                      layer_norm.cc
//   LayerNormalization                                layer_norm.cc
//   Gelu (com.microsoft)                              gelu.cc
//   BiasGelu (com.microsoft)                          gelu.cc
//   FastGelu (com.microsoft)                          gelu.cc
//   QuickGelu (com.microsoft)                         gelu.cc
//   FusedMatMul (com.microsoft)                       fused_matmul.cc
//   TransposeMatMul (com.microsoft)                   fused_matmul.cc
//   SparseToDenseMatMul (com.microsoft)               fused_matmul.cc
//   EmbedLayerNormalization (com.microsoft)           embed_layer_norm.cc
//   Attention (com.microsoft)                         attention.cc
//   MultiHeadAttention (com.microsoft)                attention.cc
//   QAttention (com.microsoft)                        attention.cc
//
// LayerNormalization here is the default-domain op at opsets 1-16 (onnxruntime's former
// contrib op); opset 17 on is nn/normalization.cc.

#include "ortlite/kernel.h"

namespace ortlite {
namespace contrib {

// One registration function per file (defined there).
void register_layer_norm(KernelRegistry& r);
void register_gelu(KernelRegistry& r);
void register_fused_matmul(KernelRegistry& r);
void register_embed_layer_norm(KernelRegistry& r);
void register_attention(KernelRegistry& r);
void register_rotary_embedding(KernelRegistry& r);
void register_group_query_attention(KernelRegistry& r);

}  // namespace contrib

void register_contrib_kernels(KernelRegistry& r) {
  contrib::register_layer_norm(r);
  contrib::register_gelu(r);
  contrib::register_fused_matmul(r);
  contrib::register_embed_layer_norm(r);
  contrib::register_attention(r);
  contrib::register_rotary_embedding(r);
  contrib::register_group_query_attention(r);
}

}  // namespace ortlite
