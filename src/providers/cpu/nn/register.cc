// Registration of the neural-network CPU kernels (default ONNX domain).
#include "providers/cpu/nn/nn_common.h"
#include "ortlite/kernel.h"

namespace ortlite {

void register_nn_kernels(KernelRegistry& r) {
  nn::register_matmul(r);
  nn::register_gemm(r);
  nn::register_conv(r);
  nn::register_pool(r);
  nn::register_normalization(r);
  nn::register_softmax(r);
  nn::register_dropout(r);
  nn::register_loss_conf(r);
  nn::register_attention_conf(r);
  nn::register_resize_conf(r);
  nn::register_gridsample_conf(r);
  nn::register_norm_pool_conf(r);
  nn::register_conv_transpose_conf(r);
  nn::register_detection_conf(r);
  nn::register_unpool_conf(r);
  nn::register_roi_conf(r);
  nn::register_upsample_conf(r);
  nn::register_deform_conv_conf(r);
  nn::register_swish_conf(r);
  nn::register_rnn_conf(r);
  nn::register_fused_conf(r);
}

}  // namespace ortlite
