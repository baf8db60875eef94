// register_math_kernels: the elementwise, activation, cumulative, Einsum / Det, random and
// signal CPU kernels (default ONNX domain).
//
// The math operators, one per line with the file that holds its kernel
// (tests/test_registry.py checks that every registered CPU op is listed here next to a
// file that exists):
//
//   Add                binary.cc
//   Sub                binary.cc
//   Mul                binary.cc
//   Div                binary.cc
//   Pow                binary.cc
//   Mod                binary.cc
//   BitShift           binary.cc
//   BitwiseAnd         binary.cc
//   BitwiseOr          binary.cc
//   BitwiseXor         binary.cc
//   Neg                unary.cc
//   Abs                unary.cc
//   Sign               unary.cc
//   Sqrt               unary.cc
//   Exp                unary.cc
//   Log                unary.cc
//   Reciprocal         unary.cc
//   Floor              unary.cc
//   Ceil               unary.cc
//   Round              unary.cc
//   Erf                unary.cc
//   Sin                unary.cc
//   Cos                unary.cc
//   Tan                unary.cc
//   Asin               unary.cc
//   Acos               unary.cc
//   Atan               unary.cc
//   Sinh               unary.cc
//   Cosh               unary.cc
//   Asinh              unary.cc
//   Acosh              unary.cc
//   Atanh              unary.cc
//   Tanh               unary.cc
//   IsNaN              unary.cc
//   IsInf              unary.cc
//   BitwiseNot         unary.cc
//   Not                unary.cc
//   Sigmoid            activations.cc
//   Relu               activations.cc
//   LeakyRelu          activations.cc
//   Elu                activations.cc
//   Selu               activations.cc
//   HardSigmoid        activations.cc
//   HardSwish          activations.cc
//   Softplus           activations.cc
//   Softsign           activations.cc
//   Mish               activations.cc
//   ThresholdedRelu    activations.cc
//   Celu               activations.cc
//   Shrink             activations.cc
//   PRelu              activations.cc
//   Gelu               activations.cc
//   Equal              compare_logic.cc
//   Less               compare_logic.cc
//   Greater            compare_logic.cc
//   LessOrEqual        compare_logic.cc
//   GreaterOrEqual     compare_logic.cc
//   And                compare_logic.cc
//   Or                 compare_logic.cc
//   Xor                compare_logic.cc
//   Max                variadic.cc
//   Min                variadic.cc
//   Sum                variadic.cc
//   Mean               variadic.cc
//   Clip               clip.cc
//   Where              where.cc
//   CumSum             cumsum.cc
//   CumProd            cumsum.cc
//   HannWindow         cumsum.cc
//   HammingWindow      cumsum.cc
//   BlackmanWindow     cumsum.cc
//   Det                det.cc
//   Einsum             einsum.cc
//   RandomNormal       random.cc
//   RandomUniform      random.cc
//   RandomNormalLike   random.cc
//   RandomUniformLike  random.cc
//   Bernoulli          random.cc
//   Multinomial        random.cc
//   DFT                dft_stft.cc
//   STFT               dft_stft.cc
//   MelWeightMatrix    dft_stft.cc

#include "providers/cpu/math/math_kernels.h"

namespace ortlite {

void register_math_kernels(KernelRegistry& r) {
  register_binary_kernels(r);
  register_unary_kernels(r);
  register_activation_kernels(r);
  register_compare_logic_kernels(r);
  register_variadic_kernels(r);
  register_clip_kernels(r);
  register_where_kernels(r);
  register_cumsum_kernels(r);
  register_einsum_kernels(r);
  register_det_kernels(r);
  register_random_kernels(r);
  register_dft_stft_kernels(r);
}

}  // namespace ortlite
