// Construction and load-time checks of the tree-ensemble forest (tree_forest.h).
#include "providers/cpu/ml/tree_forest.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ortlite {
namespace ml {
namespace forest {

void check_acyclic(const KernelInfo& info, const Forest& fo) {
  const size_t n = fo.nodes.size();
  std::vector<uint8_t> state(n, 0);  // 0 new, 1 on the stack, 2 done
  std::vector<std::pair<int32_t, int>> stack;
  for (int32_t root : fo.roots) {
    if (state[static_cast<size_t>(root)] == 2) continue;
    stack.push_back({root, 0});
    state[static_cast<size_t>(root)] = 1;
    while (!stack.empty()) {
      auto& [i, step] = stack.back();
      const TreeNode& nd = fo.nodes[static_cast<size_t>(i)];
      if (nd.mode == Mode::kLeaf || step == 2) {
        state[static_cast<size_t>(i)] = 2;
        stack.pop_back();
        continue;
      }
      const int32_t c = step++ == 0 ? nd.t : nd.f;
      if (c < 0 || static_cast<size_t>(c) >= n) {
        info.fail(StatusCode::kInvalidGraph,
                  "tree node " + std::to_string(i) + " has an invalid child " + std::to_string(c));
      }
      if (state[static_cast<size_t>(c)] == 1) {
        info.fail(StatusCode::kInvalidGraph,
                  "the trees have a cycle through node " + std::to_string(c));
      }
      if (state[static_cast<size_t>(c)] == 0) {
        state[static_cast<size_t>(c)] = 1;
        stack.push_back({c, 0});
      }
    }
  }
}

void attach_weights(Forest& fo, const std::vector<std::vector<LeafWeight>>& per_node) {
  for (size_t i = 0; i < fo.nodes.size(); ++i) {
    TreeNode& nd = fo.nodes[i];
    nd.w0 = static_cast<uint32_t>(fo.weights.size());
    if (nd.mode == Mode::kLeaf) {
      for (const LeafWeight& w : per_node[i]) fo.weights.push_back(w);
      if (!per_node[i].empty()) nd.unique_weight = per_node[i][0].value;
    }
    nd.w1 = static_cast<uint32_t>(fo.weights.size());
  }
}

// ---- TreeEnsembleClassifier / TreeEnsembleRegressor (nodes_* and weights by id) -----------

Mode parse_mode(const KernelInfo& info, const std::string& s) {
  if (s == "BRANCH_LEQ") return Mode::kLeq;
  if (s == "BRANCH_LT") return Mode::kLt;
  if (s == "BRANCH_GTE") return Mode::kGte;
  if (s == "BRANCH_GT") return Mode::kGt;
  if (s == "BRANCH_EQ") return Mode::kEq;
  if (s == "BRANCH_NEQ") return Mode::kNeq;
  if (s == "LEAF") return Mode::kLeaf;
  info.fail(StatusCode::kInvalidGraph, "attribute 'nodes_modes' has an unknown mode '" + s + "'");
}

std::vector<double> floats_or_tensor(const KernelInfo& info, const std::string& name,
                                     bool* is_double) {
  const std::string tname = name + "_as_tensor";
  const bool has_f = info.has_attr(name.c_str()), has_t = info.has_attr(tname.c_str());
  if (has_f && has_t) {
    info.fail(StatusCode::kInvalidGraph,
              "attributes '" + name + "' and '" + tname + "' cannot both be set");
  }
  std::vector<double> out;
  if (has_t) {
    const Tensor* t = info.attr_tensor(tname.c_str());
    if (t->dtype() != DataType::kDouble && t->dtype() != DataType::kFloat) {
      info.fail(StatusCode::kInvalidGraph,
                "attribute '" + tname + "' must be double, got " + dtype_name(t->dtype()));
    }
    for (int64_t i = 0; i < t->numel(); ++i)
      out.push_back(t->dtype() == DataType::kDouble ? t->data<double>()[i]
                                                    : static_cast<double>(t->data<float>()[i]));
    *is_double = true;
  } else {
    for (float v : info.attr_floats(name.c_str())) out.push_back(static_cast<double>(v));
  }
  return out;
}

Forest forest_v3(const KernelInfo& info, const std::string& prefix, int64_t n,
                 std::vector<double>* base) {
  Forest fo;
  bool dbl = false;
  const std::vector<int64_t> treeids = info.attr_ints("nodes_treeids");
  const std::vector<int64_t> nodeids = info.attr_ints("nodes_nodeids");
  const std::vector<int64_t> featureids = info.attr_ints("nodes_featureids");
  const std::vector<int64_t> trueids = info.attr_ints("nodes_truenodeids");
  const std::vector<int64_t> falseids = info.attr_ints("nodes_falsenodeids");
  const std::vector<int64_t> missing = info.attr_ints("nodes_missing_value_tracks_true");
  const std::vector<std::string> modes = info.attr_strings("nodes_modes");
  const std::vector<double> values = floats_or_tensor(info, "nodes_values", &dbl);
  const std::vector<int64_t> w_tree = info.attr_ints((prefix + "_treeids").c_str());
  const std::vector<int64_t> w_node = info.attr_ints((prefix + "_nodeids").c_str());
  const std::vector<int64_t> w_id = info.attr_ints((prefix + "_ids").c_str());
  const std::vector<double> w_val = floats_or_tensor(info, prefix + "_weights", &dbl);
  *base = floats_or_tensor(info, "base_values", &dbl);
  fo.single = !dbl;

  const size_t nn = treeids.size();
  if (nn == 0) info.fail(StatusCode::kInvalidGraph, "attribute 'nodes_treeids' is empty");
  for (const auto& [name, size] : {std::pair<const char*, size_t>{"nodes_nodeids", nodeids.size()},
                                   {"nodes_featureids", featureids.size()},
                                   {"nodes_truenodeids", trueids.size()},
                                   {"nodes_falsenodeids", falseids.size()},
                                   {"nodes_modes", modes.size()},
                                   {"nodes_values", values.size()}}) {
    if (size != nn) {
      info.fail(StatusCode::kInvalidGraph, std::string("attribute '") + name + "' has " +
                                               std::to_string(size) + " entries, expected " +
                                               std::to_string(nn) + " (nodes_treeids)");
    }
  }
  const size_t nw = w_id.size();
  if (w_tree.size() != nw || w_node.size() != nw || w_val.size() != nw) {
    info.fail(StatusCode::kInvalidGraph, "attributes '" + prefix + "_ids', '" + prefix +
                                             "_treeids', '" + prefix + "_nodeids' and '" + prefix +
                                             "_weights' must have the same length");
  }
  if (nn > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    info.fail(StatusCode::kInvalidGraph, "too many tree nodes");

  std::map<std::pair<int64_t, int64_t>, int32_t> index;
  fo.nodes.resize(nn);
  for (size_t i = 0; i < nn; ++i) {
    if (!index.emplace(std::make_pair(treeids[i], nodeids[i]), static_cast<int32_t>(i)).second) {
      info.fail(StatusCode::kInvalidGraph, "node " + std::to_string(nodeids[i]) + " of tree " +
                                               std::to_string(treeids[i]) + " appears twice");
    }
    TreeNode& nd = fo.nodes[i];
    nd.mode = parse_mode(info, modes[i]);
    nd.threshold = round_to(fo.single, values[i]);
    nd.unique_weight = nd.threshold;  // a leaf without weights adds its value, as in onnxruntime
    nd.missing_true = i < missing.size() && missing[i] == 1;
    nd.feature = featureids[i];
  }
  for (size_t i = 0; i < nn; ++i) {
    TreeNode& nd = fo.nodes[i];
    if (nd.mode == Mode::kLeaf) continue;
    if (nd.feature < 0) {
      info.fail(StatusCode::kInvalidGraph,
                "node " + std::to_string(nodeids[i]) + " of tree " + std::to_string(treeids[i]) +
                    " has a negative feature id " + std::to_string(nd.feature));
    }
    fo.max_feature = std::max(fo.max_feature, nd.feature);
    for (int side = 0; side < 2; ++side) {
      const int64_t child = side == 0 ? trueids[i] : falseids[i];
      auto it = index.find({treeids[i], child});
      if (it == index.end()) {
        info.fail(StatusCode::kInvalidGraph, "node " + std::to_string(nodeids[i]) + " of tree " +
                                                 std::to_string(treeids[i]) + " points to node " +
                                                 std::to_string(child) +
                                                 ", which the tree does not have");
      }
      (side == 0 ? nd.t : nd.f) = it->second;
    }
  }
  for (size_t i = 0; i < nn; ++i) {
    if (i == 0 || treeids[i] != treeids[i - 1]) fo.roots.push_back(static_cast<int32_t>(i));
  }

  std::vector<std::vector<LeafWeight>> per_node(nn);
  for (size_t k = 0; k < nw; ++k) {
    auto it = index.find({w_tree[k], w_node[k]});
    if (it == index.end()) {
      info.fail(StatusCode::kInvalidGraph, "weight " + std::to_string(k) + " refers to node " +
                                               std::to_string(w_node[k]) + " of tree " +
                                               std::to_string(w_tree[k]) + ", which is missing");
    }
    if (w_id[k] < 0 || w_id[k] >= n) {
      info.fail(StatusCode::kInvalidGraph, "attribute '" + prefix + "_ids' has " +
                                               std::to_string(w_id[k]) + ", out of range [0, " +
                                               std::to_string(n) + ")");
    }
    // Weights on branch nodes (old onnxmltools output) are ignored, as onnxruntime does.
    per_node[static_cast<size_t>(it->second)].push_back({w_id[k], round_to(fo.single, w_val[k])});
  }
  attach_weights(fo, per_node);
  for (double& b : *base) b = round_to(fo.single, b);
  check_acyclic(info, fo);
  return fo;
}

// ---- TreeEnsemble (ai.onnx.ml 5) ----------------------------------------------------------

std::vector<double> tensor_doubles(const KernelInfo& info, const char* name, bool required) {
  const Tensor* t = info.attr_tensor(name);
  std::vector<double> out;
  if (!t) {
    if (required)
      info.fail(StatusCode::kInvalidGraph, std::string("attribute '") + name + "' is missing");
    return out;
  }
  for (int64_t i = 0; i < t->numel(); ++i) {
    switch (t->dtype()) {
      case DataType::kFloat:
        out.push_back(t->data<float>()[i]);
        break;
      case DataType::kDouble:
        out.push_back(t->data<double>()[i]);
        break;
      case DataType::kFloat16:
        out.push_back(static_cast<float>(t->data<Float16>()[i]));
        break;
      default:
        info.fail(StatusCode::kInvalidGraph, std::string("attribute '") + name +
                                                 "' must be float, double or float16, got " +
                                                 dtype_name(t->dtype()));
    }
  }
  return out;
}

}  // namespace forest
}  // namespace ml
}  // namespace ortlite
