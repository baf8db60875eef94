// Registration of the ai.onnx.ml CPU kernels.
//
// The ai.onnx.ml operators, one per line with the file that holds its kernel
// (tests/test_registry.py checks that every registered CPU op is listed here next to a
// file that exists):
//
//   LinearClassifier        linear.cc
//   LinearRegressor         linear.cc
//   Normalizer              preprocess.cc
//   Scaler                  preprocess.cc
//   Binarizer               preprocess.cc
//   ArrayFeatureExtractor   preprocess.cc
//   ZipMap                  preprocess.cc
//   LabelEncoder            label_encoder.cc
//   TreeEnsembleClassifier  tree_ensemble.cc
//   TreeEnsembleRegressor   tree_ensemble.cc
//   TreeEnsemble            tree_ensemble.cc
//   OneHotEncoder           one_hot_encoder.cc
//   DictVectorizer          dict_vectorizer.cc

#include "providers/cpu/ml/ml_common.h"
#include "ortlite/kernel.h"

namespace ortlite {

void register_ml_kernels(KernelRegistry& r) {
  ml::register_linear(r);
  ml::register_preprocess(r);
  ml::register_label_encoder(r);
  ml::register_tree_ensemble(r);
  ml::register_one_hot_encoder(r);
  ml::register_dict_vectorizer(r);
}

}  // namespace ortlite
