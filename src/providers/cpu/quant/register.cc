// Registration of the quantization CPU kernels (default ONNX domain).
//
// The quantization operators, one per line with the file that holds its kernel
// (tests/test_registry.py checks that every registered CPU op is listed here next to a
// file that exists):
//
//   QuantizeLinear         quantize_linear.cc
//   DequantizeLinear       quantize_linear.cc
//   DynamicQuantizeLinear  quantize_linear.cc
//   QLinearMatMul          qmatmul.cc
//   MatMulInteger          qmatmul.cc
//   QLinearConv            qconv.cc
//   ConvInteger            qconv.cc
//   ConvIntegerToFloat     qconv.cc (com.ortlite, written by the optimizer)
//   MatMulIntegerToFloat   qmatmul.cc (com.microsoft)
//   MatMulNBits            matmul_nbits.cc (com.microsoft)
//   GatherBlockQuantized   gather_block_quantized.cc (com.microsoft)
//   QLinearAdd             qlinear_elementwise.cc (com.microsoft)
//   QLinearMul             qlinear_elementwise.cc (com.microsoft)
//   QLinearSigmoid         qlinear_elementwise.cc (com.microsoft)
//   QLinearLeakyRelu       qlinear_elementwise.cc (com.microsoft)
//   QLinearGlobalAveragePool  qlinear_pool.cc (com.microsoft)
//   QLinearAveragePool     qlinear_pool.cc (com.microsoft)
//   QLinearConcat          qlinear_tensor.cc (com.microsoft)
//   QLinearSoftmax         qlinear_tensor.cc (com.microsoft)
//   QLinearWhere           qlinear_where.cc (com.microsoft)
//   QGemm                  qgemm.cc (com.microsoft)
//   QEmbedLayerNormalization  qembed_layer_norm.cc (com.microsoft)
//   DynamicQuantizeMatMul  qmatmul.cc (com.microsoft)

#include "providers/cpu/quant/quant_common.h"
#include "ortlite/kernel.h"

namespace ortlite {

void register_quant_kernels(KernelRegistry& r) {
  quant::register_quantize_linear(r);
  quant::register_qmatmul(r);
  quant::register_qconv(r);
  quant::register_matmul_nbits(r);
  quant::register_gather_block_quantized(r);
  quant::register_qlinear_elementwise(r);
  quant::register_qlinear_pool(r);
  quant::register_qlinear_tensor(r);
  quant::register_qlinear_where(r);
  quant::register_qgemm(r);
  quant::register_qembed_layer_norm(r);
}

}  // namespace ortlite
