// Registration of the neural-network CPU kernels (default ONNX domain).
#include "ops/nn/nn_common.h"
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
}

}  // namespace ortlite
