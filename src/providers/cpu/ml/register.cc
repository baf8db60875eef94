// Registration of the ai.onnx.ml CPU kernels.
#include "providers/cpu/ml/ml_common.h"
#include "ortlite/kernel.h"

namespace ortlite {

void register_ml_kernels(KernelRegistry& r) {
  ml::register_linear(r);
  ml::register_preprocess(r);
  ml::register_label_encoder(r);
  ml::register_tree_ensemble(r);
}

}  // namespace ortlite
