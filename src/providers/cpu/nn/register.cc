// register_nn_kernels: the neural-network CPU kernels.
//
// The neural-network operators (default domain unless one is named), one per line with
// the file that holds its kernel (tests/test_registry.py checks that every registered CPU
// op is listed here next to a file that exists):
//
//   MatMul                              matmul.cc
//   Gemm                                gemm.cc
//   Conv                                conv.cc
//   FusedConv (com.ortlite)             conv.cc
//   FusedConv (com.microsoft)           conv.cc
//   FusedExpandDepthwise (com.ortlite)  conv.cc
//   MaxPool                             pool.cc, pool_small.cc
//   AveragePool                         pool.cc, pool_small.cc
//   GlobalMaxPool                       pool.cc
//   GlobalAveragePool                   pool.cc
//   BatchNormalization                  normalization.cc
//   LayerNormalization                  normalization.cc
//   InstanceNormalization               normalization.cc
//   Softmax                             softmax.cc
//   LogSoftmax                          softmax.cc
//   Dropout                             dropout.cc
//   NegativeLogLikelihoodLoss           loss.cc
//   SoftmaxCrossEntropyLoss             loss.cc
//   RMSNormalization                    rms_normalization.cc
//   LpNormalization                     lp_normalization.cc
//   Hardmax                             hardmax.cc
//   Attention                           attention.cc
//   RotaryEmbedding                     attention.cc
//   Resize                              resize.cc
//   AffineGrid                          grid_sample.cc
//   GridSample                          grid_sample.cc
//   GroupNormalization                  group_normalization.cc
//   LRN                                 lrn.cc
//   MeanVarianceNormalization           mean_variance_normalization.cc
//   LpPool                              lp_pool.cc
//   ConvTranspose                       conv_transpose.cc
//   NonMaxSuppression                   non_max_suppression.cc
//   MaxUnpool                           max_unpool_col2im.cc
//   Col2Im                              max_unpool_col2im.cc
//   RoiAlign                            roi_pool_align.cc
//   MaxRoiPool                          roi_pool_align.cc
//   Upsample                            upsample.cc
//   DeformConv                          deform_conv.cc
//   Swish                               swish.cc
//   CausalConvWithState                 causal_conv_with_state.cc
//   LinearAttention                     linear_attention.cc
//   FlexAttention (ai.onnx.preview)     flex_attention.cc
//   RNN                                 rnn.cc
//   GRU                                 rnn.cc
//   LSTM                                rnn.cc
//   DynamicQuantizeLSTM (com.microsoft) rnn.cc
//   Gelu (com.ortlite)                  fused_ops.cc
//   FusedMatMul (com.ortlite)           fused_ops.cc
//   FusedGemm (com.ortlite)             fused_ops.cc
//   FusedGemm (com.microsoft)           fused_ops.cc
//   TfIdfVectorizer                     tfidf_vectorizer.cc
//   Adagrad (ai.onnx.preview.training)  training_optimizers.cc
//   Adam (ai.onnx.preview.training)     training_optimizers.cc
//   Momentum (ai.onnx.preview.training) training_optimizers.cc

#include "ortlite/kernel.h"

namespace ortlite {
namespace nn {

// One registration function per file (defined there).
void register_matmul(KernelRegistry& r);
void register_gemm(KernelRegistry& r);
void register_conv(KernelRegistry& r);
void register_pool(KernelRegistry& r);
void register_normalization(KernelRegistry& r);
void register_softmax(KernelRegistry& r);
void register_dropout(KernelRegistry& r);
void register_loss(KernelRegistry& r);
void register_rms_normalization(KernelRegistry& r);
void register_lp_normalization(KernelRegistry& r);
void register_hardmax(KernelRegistry& r);
void register_attention(KernelRegistry& r);
void register_resize(KernelRegistry& r);
void register_grid_sample(KernelRegistry& r);
void register_group_normalization(KernelRegistry& r);
void register_lrn(KernelRegistry& r);
void register_mean_variance_normalization(KernelRegistry& r);
void register_lp_pool(KernelRegistry& r);
void register_conv_transpose(KernelRegistry& r);
void register_non_max_suppression(KernelRegistry& r);
void register_max_unpool_col2im(KernelRegistry& r);
void register_roi_pool_align(KernelRegistry& r);
void register_upsample(KernelRegistry& r);
void register_deform_conv(KernelRegistry& r);
void register_swish(KernelRegistry& r);
void register_causal_conv_with_state(KernelRegistry& r);
void register_linear_attention(KernelRegistry& r);
void register_flex_attention(KernelRegistry& r);
void register_rnn(KernelRegistry& r);
void register_fused_ops(KernelRegistry& r);
void register_tfidf_vectorizer(KernelRegistry& r);
void register_training_optimizers(KernelRegistry& r);

}  // namespace nn

void register_nn_kernels(KernelRegistry& r) {
  nn::register_matmul(r);
  nn::register_gemm(r);
  nn::register_conv(r);
  nn::register_pool(r);
  nn::register_normalization(r);
  nn::register_softmax(r);
  nn::register_dropout(r);
  nn::register_loss(r);
  nn::register_rms_normalization(r);
  nn::register_lp_normalization(r);
  nn::register_hardmax(r);
  nn::register_attention(r);
  nn::register_resize(r);
  nn::register_grid_sample(r);
  nn::register_group_normalization(r);
  nn::register_lrn(r);
  nn::register_mean_variance_normalization(r);
  nn::register_lp_pool(r);
  nn::register_conv_transpose(r);
  nn::register_non_max_suppression(r);
  nn::register_max_unpool_col2im(r);
  nn::register_roi_pool_align(r);
  nn::register_upsample(r);
  nn::register_deform_conv(r);
  nn::register_swish(r);
  nn::register_causal_conv_with_state(r);
  nn::register_linear_attention(r);
  nn::register_flex_attention(r);
  nn::register_rnn(r);
  nn::register_fused_ops(r);
  nn::register_tfidf_vectorizer(r);
  nn::register_training_optimizers(r);
}

}  // namespace ortlite
