// Registration of the quantization CPU kernels (default ONNX domain).
#include "providers/cpu/quant/quant_common.h"
#include "ortlite/kernel.h"

namespace ortlite {

void register_quant_kernels(KernelRegistry& r) {
  quant::register_quantize_linear(r);
  quant::register_qmatmul(r);
  quant::register_qconv(r);
}

}  // namespace ortlite
