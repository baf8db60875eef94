// The forest the tree-ensemble kernels (tree_ensemble.cc) evaluate, and its construction
// from the attributes of TreeEnsembleClassifier / TreeEnsembleRegressor (ai.onnx.ml 1, 3)
// and TreeEnsemble (ai.onnx.ml 5), with the checks a model must pass at load
// (tree_forest.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "providers/cpu/ml/ml_common.h"

namespace ortlite {
namespace ml {
namespace forest {

// Every row keeps n_targets scores: a bound that no real model comes near keeps a corrupt
// attribute from asking for terabytes.
constexpr int64_t kMaxTargets = int64_t{1} << 24;

enum class Mode : uint8_t { kLeq, kLt, kGte, kGt, kEq, kNeq, kMember, kLeaf };
enum class Agg { kAverage, kSum, kMin, kMax };

struct TreeNode {
  Mode mode = Mode::kLeaf;
  bool missing_true = false;
  int64_t feature = 0;
  double threshold = 0;
  int32_t t = -1, f = -1;    // children (branches)
  uint32_t w0 = 0, w1 = 0;   // leaves: weights [w0, w1)
  uint32_t m0 = 0, m1 = 0;   // kMember: members [m0, m1), sorted
  double unique_weight = 0;  // leaves: what a single-target ensemble adds
};

struct LeafWeight {
  int64_t target;
  double value;
};

struct Forest {
  std::vector<TreeNode> nodes;
  std::vector<LeafWeight> weights;
  std::vector<double> members;
  std::vector<int32_t> roots;
  int64_t max_feature = -1;
  bool single = true;  // float precision for features, thresholds and sums
};

// The traversal layout built at load: the branch nodes of each tree stored contiguously in
// preorder, 16 bytes a node with float thresholds. meta holds the feature index, bit 31
// missing_value_tracks_true, and bits 29 / 30 whether child[0] (false) / child[1] (true) is a
// leaf; a child that is a branch is a node index, a leaf child holds the leaf's payload
// (tree_ensemble.cc), so a walk never reads a leaf record.
template <typename TT>
struct FastNode {
  uint32_t meta;
  TT threshold;
  int32_t child[2];  // false, true: indexed by the comparison, which keeps the walk branch-free
};

struct FastLeaf {
  double unique_weight;
  uint32_t w0, w1;
};

constexpr uint32_t kFeatureMask = 0x1fffffff;
constexpr uint32_t kMissingBit = 0x80000000u;
constexpr uint32_t kLeafShift = 29;
constexpr uint32_t kLeafBit0 = 1u << kLeafShift, kLeafBit1 = 2u << kLeafShift;

inline double round_to(bool single, double v) {
  return single ? static_cast<double>(static_cast<float>(v)) : v;
}

// Checks that no tree has a cycle (a walk would never end) and that every child index
// is valid (kInvalidGraph naming the node otherwise). Shared subtrees are allowed.
void check_acyclic(const KernelInfo& info, const Forest& fo);

// Per-leaf weight lists (built in attribute order) flattened into fo.weights.
void attach_weights(Forest& fo, const std::vector<std::vector<LeafWeight>>& per_node);

// A nodes_modes string as a Mode (kInvalidGraph for an unknown one).
Mode parse_mode(const KernelInfo& info, const std::string& s);

// A floats attribute or its *_as_tensor double form; `is_double` is set when the tensor
// form was used.
std::vector<double> floats_or_tensor(const KernelInfo& info, const std::string& name,
                                     bool* is_double);

// Builds the forest of a TreeEnsembleClassifier (prefix "class") or TreeEnsembleRegressor
// (prefix "target"); `n` is the class or target count; `base` receives base_values.
Forest forest_v3(const KernelInfo& info, const std::string& prefix, int64_t n,
                 std::vector<double>* base);

// A float, double or float16 tensor attribute as doubles (empty when absent and not
// `required`).
std::vector<double> tensor_doubles(const KernelInfo& info, const char* name, bool required);

}  // namespace forest
}  // namespace ml
}  // namespace ortlite
