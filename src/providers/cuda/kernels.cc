// Registration of the CUDA kernels (kernels_elementwise.cc, kernels_nn.cc,
// kernels_tensor.cc): Kernel classes under CUDAExecutionProvider that check their inputs
// and shapes on the host, allocate device outputs and call the CUDA library's launchers
// (cuda_api.h) on the thread's current stream (provider.h, StreamScope).
#include "ortlite/kernel.h"

namespace ortlite {
namespace cuda {
void register_elementwise_kernels(KernelRegistry& r);
void register_nn_kernels(KernelRegistry& r);
void register_tensor_kernels(KernelRegistry& r);
}  // namespace cuda

void register_cuda_kernels(KernelRegistry& r) {
  cuda::register_elementwise_kernels(r);
  cuda::register_nn_kernels(r);
  cuda::register_tensor_kernels(r);
}

}  // namespace ortlite
