// TreeEnsembleClassifier and TreeEnsembleRegressor (ai.onnx.ml 1 and 3, deprecated in 5)
// and TreeEnsemble (ai.onnx.ml 5). All three are converted at load into one flat forest:
// nodes with a comparison and two child indices, leaves with a list of (target, weight).
// At load the forest is also copied into a layout made for traversal (FastNode: each
// tree's nodes contiguous, 16 bytes a node), with walks specialised for a forest of LEQ,
// LT, GTE or GT nodes and a generic one for the other modes. A run walks row blocks tree by
// tree, sums each row's leaf weights per target in tree order (the same sums whatever the
// thread count) and finishes the scores.
//
// The aggregation and the finishing steps follow onnxruntime's tree_ensemble_aggregator.h,
// quirks included, because converted scikit-learn / LightGBM / XGBoost models are validated
// against it:
//  - with a single target, a leaf contributes only its first weight, and the only post
//    transform applied is PROBIT;
//  - a two-class classifier whose weights all go to one class is a "binary case": its
//    scores and label come from that one score (1 - s / s, or -s / s, see finish_class);
//    with LOGISTIC the scores are always logistic(-s) / logistic(s), as onnxruntime's fix of
//    #27533 (later than 1.23) has it;
//  - scores accumulate in float unless the thresholds or weights are given as double
//    tensors (the *_as_tensor attributes), and inputs are compared in that precision;
//  - a score that no leaf reached is written as 0, base value or not.
// TreeEnsemble (5) follows its specification where onnxruntime 1.23 departs from it:
// post_transform 1 is SOFTMAX and 2 LOGISTIC (onnxruntime swaps them), BRANCH_MEMBER tests
// the value itself (onnxruntime truncates it to an integer first), and only a root whose
// both branches are the same leaf is a one-leaf tree.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "providers/cpu/ml/ml_common.h"
#include "providers/cpu/ml/tree_forest.h"

namespace ortlite {
namespace ml {
namespace {

using namespace forest;  // NOLINT: the forest types and builders of tree_forest.h

// Element i of the input as the double the trees compare; an integer goes through float
// first when the forest's thresholds are float (`single`), as onnxruntime compares it.
inline double feature_value(const Tensor& x, DataType dt, int64_t i, bool single) {
  switch (dt) {
    case DataType::kFloat:
      return x.data<float>()[i];
    case DataType::kDouble:
      return x.data<double>()[i];
    case DataType::kFloat16:
      return static_cast<float>(x.data<Float16>()[i]);
    case DataType::kInt64: {
      const int64_t iv = x.data<int64_t>()[i];
      return single ? static_cast<double>(static_cast<float>(iv)) : static_cast<double>(iv);
    }
    default: {
      const int32_t iv = x.data<int32_t>()[i];
      return single ? static_cast<double>(static_cast<float>(iv)) : static_cast<double>(iv);
    }
  }
}

// ---- evaluation ---------------------------------------------------------------------------

class TreeEnsembleKernel : public Kernel {
 protected:
  Forest fo_;
  int64_t n_ = 1;  // targets or classes
  Agg agg_ = Agg::kSum;
  PostTransform post_ = PostTransform::kNone;

  int32_t leaf_of(int32_t i, const double* x) const {
    for (;;) {
      const TreeNode& nd = fo_.nodes[static_cast<size_t>(i)];
      const double v = x[nd.feature];
      bool c = false;
      switch (nd.mode) {
        case Mode::kLeaf:
          return i;
        case Mode::kLeq:
          c = v <= nd.threshold;
          break;
        case Mode::kLt:
          c = v < nd.threshold;
          break;
        case Mode::kGte:
          c = v >= nd.threshold;
          break;
        case Mode::kGt:
          c = v > nd.threshold;
          break;
        case Mode::kEq:
          c = v == nd.threshold;
          break;
        case Mode::kNeq:
          c = v != nd.threshold;
          break;
        case Mode::kMember:
          // binary_search would call NaN equal to any member.
          c = !std::isnan(v) &&
              std::binary_search(fo_.members.begin() + nd.m0, fo_.members.begin() + nd.m1, v);
          break;
      }
      if (!c && nd.missing_true && std::isnan(v)) c = true;
      i = c ? nd.t : nd.f;
    }
  }

  // Adds one leaf's weights to a row's scores (sums, or min / max), before base values.
  void add_leaf(double unique_weight, uint32_t w0, uint32_t w1, double* score, uint8_t* has) const {
    const bool single = fo_.single;
    if (n_ == 1) {
      const double w = unique_weight;
      if (agg_ == Agg::kSum || agg_ == Agg::kAverage) {
        score[0] = round_to(single, score[0] + w);
      } else if (!has[0] || (agg_ == Agg::kMin ? w < score[0] : w > score[0])) {
        score[0] = w;
        has[0] = 1;
      } else {
        has[0] = 1;
      }
      return;
    }
    for (uint32_t k = w0; k < w1; ++k) {
      const LeafWeight& w = fo_.weights[k];
      const size_t t = static_cast<size_t>(w.target);
      if (agg_ == Agg::kSum || agg_ == Agg::kAverage) {
        score[t] = round_to(single, score[t] + w.value);
      } else if (!has[t] || (agg_ == Agg::kMin ? w.value < score[t] : w.value > score[t])) {
        score[t] = w.value;
      }
      has[t] = 1;
    }
  }

  // Sums (or min / max) of the leaf weights of one row, trees in order, before base values.
  void aggregate(const double* x, std::vector<double>& score, std::vector<uint8_t>& has) const {
    // assign, not fill: a finishing step may have shortened them.
    score.assign(static_cast<size_t>(n_), 0.0);
    has.assign(static_cast<size_t>(n_), 0);
    for (int32_t root : fo_.roots) {
      const TreeNode& leaf = fo_.nodes[static_cast<size_t>(leaf_of(root, x))];
      add_leaf(leaf.unique_weight, leaf.w0, leaf.w1, score.data(), has.data());
    }
  }

  // ---- the traversal layout ----

  bool fast_ = false;
  Mode fast_mode_ = Mode::kLeq;
  bool fast_missing_ = false;
  // Leaf payloads are the leaf's one weight as float bits (a single-precision forest whose
  // leaves each add one weight to a class fixed per tree: LightGBM, XGBoost, one-target
  // regressors), so a walk ends without reading a leaf table; otherwise slots in leaves_.
  bool inline_ = false;
  std::vector<FastNode<float>> fnodes_;   // single precision forests
  std::vector<FastNode<double>> dnodes_;  // double precision forests
  std::vector<FastLeaf> leaves_;
  std::vector<int32_t> froots_;  // per tree its first node (every tree has one), the end, padding
  int64_t ntrees_ = 0;
  std::vector<int32_t> tree_target_;  // inline_: the target each tree's leaves add to
  int64_t max_depth_ = 1;

  // Per layout node, for forests of mixed modes or EQ / NEQ / MEMBER ones (fast_mode_
  // kLeaf): the walk then switches on each node's mode.
  struct GenericInfo {
    Mode mode;
    uint32_t m0, m1;
  };
  std::vector<GenericInfo> ginfo_;

  // Builds the layout, with a walk specialised for forests whose branch nodes all have the
  // same mode among LEQ, LT, GTE and GT. Called once the forest is checked.
  void build_fast() {
    Mode m = Mode::kLeaf;
    bool missing = false, mixed = false;
    for (const TreeNode& nd : fo_.nodes) {
      if (nd.mode == Mode::kLeaf) continue;
      if (m == Mode::kLeaf) m = nd.mode;
      mixed = mixed || nd.mode != m;
      missing = missing || nd.missing_true;
    }
    if (m == Mode::kLeaf) m = Mode::kLeq;  // one-leaf trees only
    const bool generic =
        mixed || (m != Mode::kLeq && m != Mode::kLt && m != Mode::kGte && m != Mode::kGt);
    if (fo_.max_feature > static_cast<int64_t>(kFeatureMask)) return;
    // Shared subtrees are copied into each tree; a forest that would grow past this keeps
    // the generic walk.
    const size_t budget = 2 * fo_.nodes.size() + 4096;
    std::vector<FastNode<double>> nodes;
    std::vector<int32_t> slot(fo_.nodes.size(), -1);
    bool can_inline = fo_.single;
    int32_t cur_target = -1;
    struct Todo {
      int32_t k, i;
      int side;
      int64_t depth;
    };
    std::vector<Todo> todo;
    auto leaf_slot = [&](int32_t i) -> int32_t {
      const TreeNode& nd = fo_.nodes[static_cast<size_t>(i)];
      if (slot[static_cast<size_t>(i)] < 0) {
        slot[static_cast<size_t>(i)] = static_cast<int32_t>(leaves_.size());
        leaves_.push_back({nd.unique_weight, nd.w0, nd.w1});
      }
      if (n_ > 1) {
        const int32_t target =
            nd.w1 - nd.w0 == 1 ? static_cast<int32_t>(fo_.weights[nd.w0].target) : -1;
        if (target < 0 || (cur_target >= 0 && target != cur_target)) can_inline = false;
        cur_target = target;
      }
      return slot[static_cast<size_t>(i)];
    };
    // A branch node of the layout for node i; a child that is a leaf is stored in place.
    auto make = [&](int32_t i, int64_t depth) -> int32_t {
      const TreeNode& nd = fo_.nodes[static_cast<size_t>(i)];
      const int32_t k = static_cast<int32_t>(nodes.size());
      max_depth_ = std::max(max_depth_, depth);
      if (nd.mode == Mode::kLeaf) {  // a one-leaf tree: a node whose both branches are it
        const int32_t s = leaf_slot(i);
        nodes.push_back({kLeafBit0 | kLeafBit1, 0.0, {s, s}});
        if (generic) ginfo_.push_back({Mode::kLeq, 0, 0});
        return k;
      }
      const uint32_t meta =
          static_cast<uint32_t>(nd.feature) | (nd.missing_true ? kMissingBit : 0u);
      nodes.push_back({meta, nd.threshold, {0, 0}});
      if (generic) ginfo_.push_back({nd.mode, nd.m0, nd.m1});
      todo.push_back({k, i, 0, depth});
      return k;
    };
    for (int32_t root : fo_.roots) {
      cur_target = -1;
      froots_.push_back(make(root, 1));
      while (!todo.empty()) {
        if (nodes.size() > budget) {
          leaves_.clear();
          froots_.clear();
          ginfo_.clear();
          return;
        }
        const Todo td = todo.back();
        todo.pop_back();
        const TreeNode& nd = fo_.nodes[static_cast<size_t>(td.i)];
        if (td.side == 0) todo.push_back({td.k, td.i, 1, td.depth});
        const int32_t ci = td.side == 0 ? nd.t : nd.f;  // preorder: the true subtree next
        const int side = td.side == 0 ? 1 : 0;
        int32_t c;
        if (fo_.nodes[static_cast<size_t>(ci)].mode == Mode::kLeaf) {
          c = leaf_slot(ci);
          nodes[static_cast<size_t>(td.k)].meta |= side ? kLeafBit1 : kLeafBit0;
        } else {
          c = make(ci, td.depth + 1);
        }
        nodes[static_cast<size_t>(td.k)].child[side] = c;
      }
      tree_target_.push_back(n_ > 1 ? cur_target : 0);
    }
    ntrees_ = static_cast<int64_t>(froots_.size());
    // The end, then padding for the walks' prefetch of a root kRootAhead trees on.
    froots_.resize(froots_.size() + 2 + kRootAhead, static_cast<int32_t>(nodes.size()));
    inline_ = can_inline;
    if (inline_) {  // leaf slots become the weights themselves
      for (FastNode<double>& nd : nodes) {
        for (int side = 0; side < 2; ++side) {
          if (!(nd.meta & (side ? kLeafBit1 : kLeafBit0))) continue;
          const FastLeaf& lf = leaves_[static_cast<size_t>(nd.child[side])];
          const float w = static_cast<float>(n_ == 1 ? lf.unique_weight : fo_.weights[lf.w0].value);
          std::memcpy(&nd.child[side], &w, sizeof w);
        }
      }
    }
    if (fo_.single) {
      fnodes_.reserve(nodes.size());
      for (const FastNode<double>& nd : nodes)  // thresholds are already float values
        fnodes_.push_back({nd.meta, static_cast<float>(nd.threshold), {nd.child[0], nd.child[1]}});
    } else {
      dnodes_ = std::move(nodes);
    }
    fast_mode_ = generic ? Mode::kLeaf : m;
    fast_missing_ = missing;
    fast_ = true;
  }

  // One step of a walk: node i's comparison; i becomes the child taken. Returns true when
  // that child is a leaf (i is then its payload).
  template <typename TX, typename TT, Mode M, bool kMissing>
  struct Walker {
    static bool step(const FastNode<TT>* nodes, int32_t& i, const TX* x) {
      const FastNode<TT>& nd = nodes[i];
      const uint32_t meta = nd.meta;
      const TX v = x[meta & kFeatureMask];
      const TX th = static_cast<TX>(nd.threshold);
      bool c;
      if constexpr (M == Mode::kLeq) {
        c = v <= th;
      } else if constexpr (M == Mode::kLt) {
        c = v < th;
      } else if constexpr (M == Mode::kGte) {
        c = v >= th;
      } else {
        c = v > th;
      }
      if constexpr (kMissing) c = c | ((meta >> 31) & static_cast<uint32_t>(v != v));
      i = nd.child[c];
      return (meta >> (kLeafShift + static_cast<uint32_t>(c))) & 1u;
    }
  };

  template <typename TX, typename TT>
  struct GenericWalker {
    const GenericInfo* info;
    const double* members;

    bool step(const FastNode<TT>* nodes, int32_t& i, const TX* x) const {
      const FastNode<TT>& nd = nodes[i];
      const GenericInfo& g = info[i];
      const double v = static_cast<double>(x[nd.meta & kFeatureMask]);
      const double th = static_cast<double>(nd.threshold);
      bool c = false;
      switch (g.mode) {
        case Mode::kLeq:
          c = v <= th;
          break;
        case Mode::kLt:
          c = v < th;
          break;
        case Mode::kGte:
          c = v >= th;
          break;
        case Mode::kGt:
          c = v > th;
          break;
        case Mode::kEq:
          c = v == th;
          break;
        case Mode::kNeq:
          c = v != th;
          break;
        default:  // kMember; binary_search would call NaN equal to any member
          c = !std::isnan(v) && std::binary_search(members + g.m0, members + g.m1, v);
          break;
      }
      if (!c && (nd.meta & kMissingBit) && std::isnan(v)) c = true;
      i = nd.child[c ? 1 : 0];
      return (nd.meta >> (kLeafShift + (c ? 1u : 0u))) & 1u;
    }
  };

  template <typename TX, typename TT, typename Body>
  void with_walker(Body&& body) const {
    switch (fast_mode_) {
      case Mode::kLeaf:
        return body(GenericWalker<TX, TT>{ginfo_.data(), fo_.members.data()});
      case Mode::kLt:
        return fast_missing_ ? body(Walker<TX, TT, Mode::kLt, true>{})
                             : body(Walker<TX, TT, Mode::kLt, false>{});
      case Mode::kGte:
        return fast_missing_ ? body(Walker<TX, TT, Mode::kGte, true>{})
                             : body(Walker<TX, TT, Mode::kGte, false>{});
      case Mode::kGt:
        return fast_missing_ ? body(Walker<TX, TT, Mode::kGt, true>{})
                             : body(Walker<TX, TT, Mode::kGt, false>{});
      default:
        return fast_missing_ ? body(Walker<TX, TT, Mode::kLeq, true>{})
                             : body(Walker<TX, TT, Mode::kLeq, false>{});
    }
  }

  // Walks trees [t0, t1) over rows [0, nr) of xs (c features a row): job j is tree
  // t0 + j / nr on row j % nr, and out[j] receives its leaf payload. kLanes walks advance in
  // turn, each taking the next job as soon as its own ends, so the loads of one overlap the
  // others' (trees end at very different depths; walks in lock step would wait for the
  // deepest). The root of a tree a few ahead is prefetched as a tree starts, and with many
  // rows the whole next tree, a few lines per job: each tree comes from memory once per
  // block of rows, as a stream rather than as misses on the walks' path.
  template <typename W, typename TX, typename TT>
  void walk_jobs(const W& w, const FastNode<TT>* nodes, int64_t t0, int64_t t1, const TX* xs,
                 int64_t c, int64_t nr, int32_t* out) const {
    if (nr == 1) {
      walk_lanes<true>(w, nodes, t0, t1, xs, c, nr, out);
    } else {
      walk_lanes<false>(w, nodes, t0, t1, xs, c, nr, out);
    }
  }

  static constexpr int kLanes = 8;
  static constexpr int64_t kRootAhead = 16;  // froots_ has this many entries of padding

  template <bool kOneRow, typename W, typename TX, typename TT>
  void walk_lanes(const W& w, const FastNode<TT>* nodes, int64_t t0, int64_t t1, const TX* xs,
                  int64_t c, int64_t nr, int32_t* out) const {
    const int32_t* roots = froots_.data();
    const int64_t njobs = (t1 - t0) * nr;
    const bool stream = !kOneRow && nr >= 16;
    const char* pf = nullptr;
    const char* pf_end = nullptr;
    int32_t node[kLanes];
    const TX* xr[kLanes];
    int64_t job[kLanes];
    int64_t next = 0, t = t0, r = 0;
    auto take = [&](int k) {
      if (kOneRow || r == 0) {
        __builtin_prefetch(nodes + roots[t + kRootAhead]);
        if (stream) {
          pf = reinterpret_cast<const char*>(nodes + roots[t + 1]);
          pf_end = reinterpret_cast<const char*>(nodes + roots[t + 2]);
        }
      }
      if (!kOneRow && pf < pf_end) {
        __builtin_prefetch(pf);
        __builtin_prefetch(pf + 64);
        pf += 128;
      }
      job[k] = next++;
      node[k] = roots[t];
      if constexpr (kOneRow) {
        xr[k] = xs;
        ++t;
      } else {
        xr[k] = xs + r * c;
        if (++r == nr) {
          r = 0;
          ++t;
        }
      }
    };
    int done = -1;  // the lane that found the queue empty
    if (njobs >= kLanes) {
      for (int k = 0; k < kLanes; ++k) take(k);
      // Every lane busy until the queue runs out: no per-lane liveness test.
      for (;;) {
        for (int k = 0; k < kLanes; ++k) {
          if (w.step(nodes, node[k], xr[k])) {
            out[job[k]] = node[k];
            if (next == njobs) {
              done = k;
              goto drain;
            }
            take(k);
          }
        }
      }
    }
  drain:
    // The walks still under way (or, for fewer jobs than lanes, all of them) one by one.
    for (int k = 0; k < kLanes; ++k) {
      if (njobs >= kLanes) {
        if (k == done) continue;
      } else {
        if (next == njobs) break;
        take(k);
      }
      while (!w.step(nodes, node[k], xr[k])) {
      }
      out[job[k]] = node[k];
    }
  }

  // Adds the leaves of trees [t0, t1) to one row's scores, in tree order; tree t's payload
  // is leaf[(t - t0) * stride].
  void add_payloads(int64_t t0, int64_t t1, const int32_t* leaf, int64_t stride, double* score,
                    uint8_t* has) const {
    if (inline_ && (agg_ == Agg::kSum || agg_ == Agg::kAverage)) {
      if (n_ == 1) {
        double s = score[0];
        for (int64_t t = t0; t < t1; ++t) {
          float w;
          std::memcpy(&w, leaf + (t - t0) * stride, sizeof w);
          s = static_cast<float>(s + w);
        }
        score[0] = s;
        return;
      }
      for (int64_t t = t0; t < t1; ++t) {
        float w;
        std::memcpy(&w, leaf + (t - t0) * stride, sizeof w);
        const size_t k = static_cast<size_t>(tree_target_[static_cast<size_t>(t)]);
        score[k] = static_cast<float>(score[k] + w);
        has[k] = 1;
      }
      return;
    }
    for (int64_t t = t0; t < t1; ++t) add_payload(t, leaf[(t - t0) * stride], score, has);
  }

  // Adds the leaf with payload p of tree t to one row's scores.
  void add_payload(int64_t t, int32_t p, double* score, uint8_t* has) const {
    if (!inline_) {
      const FastLeaf& lf = leaves_[static_cast<size_t>(p)];
      add_leaf(lf.unique_weight, lf.w0, lf.w1, score, has);
      return;
    }
    float w;
    std::memcpy(&w, &p, sizeof w);
    if (n_ == 1) {
      add_leaf(w, 0, 0, score, has);
      return;
    }
    const size_t k = static_cast<size_t>(tree_target_[static_cast<size_t>(t)]);
    if (agg_ == Agg::kSum || agg_ == Agg::kAverage) {
      score[k] = round_to(true, score[k] + w);
    } else if (!has[k] || (agg_ == Agg::kMin ? w < score[k] : w > score[k])) {
      score[k] = w;
    }
    has[k] = 1;
  }

  // The rows [r0, r0 + nr) of x as TX, in the comparison precision: x itself when it
  // already has that type, else converted into buf.
  template <typename TX>
  const TX* load_rows(const Tensor& x, int64_t c, int64_t r0, int64_t nr,
                      std::vector<TX>& buf) const {
    const DataType dt = x.dtype();
    if constexpr (std::is_same_v<TX, float>) {
      if (dt == DataType::kFloat) return x.data<float>() + r0 * c;
    } else {
      if (dt == DataType::kDouble) return x.data<double>() + r0 * c;
    }
    const int64_t n = nr * c, off = r0 * c;
    buf.resize(static_cast<size_t>(n));
    const bool single = fo_.single;
    for (int64_t j = 0; j < n; ++j) {
      const double v = feature_value(x, dt, off + j, single);
      buf[static_cast<size_t>(j)] = static_cast<TX>(v);
    }
    return buf.data();
  }

  // for_rows over the layout. Each row's leaves are aggregated in tree order, as
  // aggregate() does, so the scores are the same bit for bit whatever the thread count.
  template <typename TX, typename TT, typename Fn>
  void for_rows_fast(const KernelContext& ctx, const Tensor& x, Rows rows,
                     const FastNode<TT>* nodes, Fn&& fn) const {
    const int64_t c = rows.c;
    const int64_t ntrees = ntrees_;
    const size_t n = static_cast<size_t>(n_);
    ThreadPool* pool = ctx.thread_pool();
    const int64_t nthreads = pool ? pool->num_threads() : 1;
    const double walk_cost = static_cast<double>(std::min<int64_t>(max_depth_, 64)) * 4.0;
    const bool threaded =
        nthreads > 1 && static_cast<double>(rows.n * ntrees) * walk_cost >= 65536.0;
    with_walker<TX, TT>([&](auto walker) {
      if (threaded && rows.n < 2 * nthreads && ntrees >= 4 * nthreads) {
        // Few rows: the trees are walked in parallel, the leaves then summed in order.
        std::vector<TX> buf;
        const TX* xs = load_rows<TX>(x, c, 0, rows.n, buf);
        std::vector<int32_t> leaf(static_cast<size_t>(rows.n * ntrees));
        const int64_t parts = 4 * nthreads, per = (ntrees + parts - 1) / parts;
        pool->parallel_for((ntrees + per - 1) / per,
                           [&](int64_t b, int64_t e) {
                             const int64_t t0 = b * per, t1 = std::min(ntrees, e * per);
                             walk_jobs(walker, nodes, t0, t1, xs, c, rows.n,
                                       leaf.data() + t0 * rows.n);
                           },
                           1);
        std::vector<double> score;
        std::vector<uint8_t> has;
        for (int64_t r = 0; r < rows.n; ++r) {
          score.assign(n, 0.0);
          has.assign(n, 0);
          add_payloads(0, ntrees, leaf.data() + r, rows.n, score.data(), has.data());
          fn(r, score, has);
        }
        return;
      }
      // Blocks of rows, one per thread up to kBlock rows: each block walks the trees in
      // chunks (every row of the block through a chunk's trees, tree by tree), so each
      // tree is read from memory once per block.
      constexpr int64_t kBlock = 256;
      const int64_t per = std::min(kBlock, threaded ? (rows.n + nthreads - 1) / nthreads : kBlock);
      const int64_t nblocks = (rows.n + per - 1) / per;
      auto blocks = [&](int64_t b, int64_t e) {
        std::vector<TX> buf;
        std::vector<double> bscore, score;
        std::vector<uint8_t> bhas, has;
        std::vector<int32_t> leaf;
        for (int64_t blk = b; blk < e; ++blk) {
          const int64_t r0 = blk * per, nr = std::min(per, rows.n - r0);
          const TX* xs = load_rows<TX>(x, c, r0, nr, buf);
          bscore.assign(static_cast<size_t>(nr) * n, 0.0);
          bhas.assign(static_cast<size_t>(nr) * n, 0);
          const int64_t chunk = std::max<int64_t>(1, 16384 / nr);
          leaf.resize(static_cast<size_t>(std::min(chunk, ntrees) * nr));
          for (int64_t t0 = 0; t0 < ntrees; t0 += chunk) {
            const int64_t t1 = std::min(ntrees, t0 + chunk);
            walk_jobs(walker, nodes, t0, t1, xs, c, nr, leaf.data());
            for (int64_t r = 0; r < nr; ++r) {
              const size_t o = static_cast<size_t>(r) * n;
              add_payloads(t0, t1, leaf.data() + r, nr, bscore.data() + o, bhas.data() + o);
            }
          }
          for (int64_t r = 0; r < nr; ++r) {
            const size_t o = static_cast<size_t>(r) * n;
            score.assign(bscore.begin() + static_cast<std::ptrdiff_t>(o),
                         bscore.begin() + static_cast<std::ptrdiff_t>(o + n));
            has.assign(bhas.begin() + static_cast<std::ptrdiff_t>(o),
                       bhas.begin() + static_cast<std::ptrdiff_t>(o + n));
            fn(r0 + r, score, has);
          }
        }
      };
      if (threaded && nblocks > 1) {
        pool->parallel_for(nblocks, blocks, 1);
      } else {
        blocks(0, nblocks);
      }
    });
  }
  // Runs fn(row, features) over the rows of x in parallel, features as double in the
  // comparison precision.
  template <typename Fn>
  void for_rows(const KernelContext& ctx, const Tensor& x, Rows rows, Fn&& fn) const {
    if (fo_.max_feature >= rows.c) {
      ctx.fail(StatusCode::kInvalidArgument,
               "the trees read feature " + std::to_string(fo_.max_feature) + " but input 'X' has " +
                   std::to_string(rows.c) + " features");
    }
    const bool single = fo_.single;
    const DataType dt = x.dtype();
    if (fast_ && rows.c > 0) {
      if (!single) {
        for_rows_fast<double, double>(ctx, x, rows, dnodes_.data(), fn);
      } else if (dt == DataType::kDouble) {
        for_rows_fast<double, float>(ctx, x, rows, fnodes_.data(), fn);
      } else {
        for_rows_fast<float, float>(ctx, x, rows, fnodes_.data(), fn);
      }
      return;
    }
    const double cost = static_cast<double>(fo_.roots.size()) * 16.0 + static_cast<double>(rows.c);
    parallel_for(ctx.thread_pool(), rows.n, cost, [&](int64_t b, int64_t e) {
      std::vector<double> feat(static_cast<size_t>(rows.c));
      std::vector<double> score(static_cast<size_t>(n_));
      std::vector<uint8_t> has(static_cast<size_t>(n_));
      for (int64_t r = b; r < e; ++r) {
        const int64_t off = r * rows.c;
        for (int64_t j = 0; j < rows.c; ++j) {
          const double v = feature_value(x, dt, off + j, single);
          feat[static_cast<size_t>(j)] = v;
        }
        aggregate(feat.data(), score, has);
        fn(r, score, has);
      }
    });
  }

  // Regression finish (TreeEnsembleRegressor, TreeEnsemble): base values, averaging, the
  // post transform. `out` receives n_ values.
  void finish_regression(std::vector<double>& score, std::vector<uint8_t>& has,
                         const std::vector<double>& base, double* out) const {
    const double ntrees = static_cast<double>(fo_.roots.size());
    const bool single = fo_.single;
    if (n_ == 1) {
      // The single-target path reads the sum whether or not a leaf set it.
      const double origin = base.size() == 1 ? base[0] : 0.0;
      double s = score[0];
      if (agg_ == Agg::kAverage) s = round_to(single, s / ntrees);
      if (agg_ == Agg::kMin || agg_ == Agg::kMax) {
        s = has[0] ? round_to(single, s + origin) : origin;
      } else {
        s = round_to(single, s + origin);
      }
      out[0] = post_ == PostTransform::kProbit ? compute_probit(static_cast<float>(s)) : s;
      return;
    }
    const bool use_base = base.size() == static_cast<size_t>(n_);
    for (size_t j = 0; j < score.size(); ++j) {
      const double b = use_base ? base[j] : 0.0;
      double s = score[j];
      if (agg_ == Agg::kAverage) s = round_to(single, s / ntrees);
      if (agg_ == Agg::kMin || agg_ == Agg::kMax) s = has[j] ? s : 0.0;
      score[j] = round_to(single, s + b);
    }
    finish_scores(score, has, -1, out);
  }

  // onnxruntime's write_scores, in double with the transforms in float. A score no leaf
  // (or base value, for classifiers) has set is written as 0 whatever was added to it: the
  // targets a row never reached stay 0. Two or more scores get the post transform; a
  // single one is expanded to two per `add_second` (0, 1: [1 - s, s]; 2, 3: [-s, s], or
  // [logistic(-s), logistic(s)] with LOGISTIC; otherwise s alone), except that PROBIT
  // maps it alone.
  void finish_scores(const std::vector<double>& score, const std::vector<uint8_t>& has,
                     int add_second, double* out) const {
    std::vector<double> s(score.size());
    for (size_t j = 0; j < s.size(); ++j) s[j] = has[j] ? score[j] : 0.0;
    if (s.size() >= 2) {
      switch (post_) {
        case PostTransform::kNone:
          break;
        case PostTransform::kProbit:
          for (double& v : s) v = compute_probit(static_cast<float>(v));
          break;
        case PostTransform::kLogistic:
          for (double& v : s) v = compute_logistic(static_cast<float>(v));
          break;
        case PostTransform::kSoftmax:
        case PostTransform::kSoftmaxZero: {
          std::vector<float> f(s.begin(), s.end());
          if (post_ == PostTransform::kSoftmax) {
            softmax_inplace(f.data(), static_cast<int64_t>(f.size()));
          } else {
            softmax_zero_inplace(f.data(), static_cast<int64_t>(f.size()));
          }
          std::copy(f.begin(), f.end(), s.begin());
          break;
        }
      }
      std::copy(s.begin(), s.end(), out);
      return;
    }
    if (s.empty()) return;
    const double v = s[0];
    if (post_ == PostTransform::kProbit) {
      out[0] = compute_probit(static_cast<float>(v));
      return;
    }
    switch (add_second) {
      case 0:
      case 1:
        out[0] = 1.0 - v;
        out[1] = v;
        return;
      case 2:
      case 3:
        if (post_ == PostTransform::kLogistic) {
          out[0] = compute_logistic(static_cast<float>(-v));
          out[1] = compute_logistic(static_cast<float>(v));
        } else {
          out[0] = -v;
          out[1] = v;
        }
        return;
      default:
        out[0] = v;
        return;
    }
  }
};

Agg parse_agg(const KernelInfo& info, const std::string& s) {
  if (s == "SUM") return Agg::kSum;
  if (s == "AVERAGE") return Agg::kAverage;
  if (s == "MIN") return Agg::kMin;
  if (s == "MAX") return Agg::kMax;
  info.fail(StatusCode::kInvalidGraph,
            "attribute 'aggregate_function' = '" + s + "' is not one of AVERAGE, SUM, MIN, MAX");
}

void check_input(const KernelContext& ctx, const Tensor& x) {
  switch (x.dtype()) {
    case DataType::kFloat:
    case DataType::kDouble:
    case DataType::kInt64:
    case DataType::kInt32:
      return;
    default:
      ctx.fail(StatusCode::kInvalidArgument, std::string("input 'X' has type ") +
                                                 dtype_name(x.dtype()) +
                                                 "; expected float, double, int64 or int32");
  }
}

class TreeEnsembleRegressor final : public TreeEnsembleKernel {
 public:
  explicit TreeEnsembleRegressor(const KernelInfo& info) {
    n_ = info.attr_int("n_targets", 1);
    if (n_ < 1 || n_ > kMaxTargets) {
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'n_targets' = " + std::to_string(n_) + " is out of range");
    }
    agg_ = parse_agg(info, info.attr_string("aggregate_function", "SUM"));
    post_ = parse_post_transform(info, info.attr_string("post_transform", "NONE"));
    fo_ = forest_v3(info, "target", n_, &base_);
    build_fast();
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    check_input(ctx, x);
    const Rows rows = feature_rows(ctx, x);
    Tensor& y = ctx.allocate_output(0, DataType::kFloat, {rows.n, n_});
    float* out = y.data<float>();
    for_rows(ctx, x, rows, [&](int64_t r, std::vector<double>& score, std::vector<uint8_t>& has) {
      std::vector<double> row(static_cast<size_t>(n_));
      finish_regression(score, has, base_, row.data());
      for (int64_t j = 0; j < n_; ++j)
        out[r * n_ + j] = static_cast<float>(row[static_cast<size_t>(j)]);
    });
  }

 private:
  std::vector<double> base_;
};

class TreeEnsembleClassifier final : public TreeEnsembleKernel {
 public:
  explicit TreeEnsembleClassifier(const KernelInfo& info)
      : labels_int_(info.attr_ints("classlabels_int64s")),
        labels_str_(info.attr_strings("classlabels_strings")) {
    if (labels_int_.empty() == labels_str_.empty()) {
      info.fail(StatusCode::kInvalidGraph,
                "exactly one of 'classlabels_int64s' and 'classlabels_strings' must be set");
    }
    strings_ = !labels_str_.empty();
    n_ = static_cast<int64_t>(strings_ ? labels_str_.size() : labels_int_.size());
    if (n_ < 2) {
      info.fail(StatusCode::kInvalidGraph,
                "a classifier needs at least 2 class labels, got " + std::to_string(n_));
    }
    post_ = parse_post_transform(info, info.attr_string("post_transform", "NONE"));
    fo_ = forest_v3(info, "class", n_, &base_);
    build_fast();
    if (n_ > 2 && base_.size() > static_cast<size_t>(n_)) {
      info.fail(StatusCode::kInvalidGraph, "attribute 'base_values' has " +
                                               std::to_string(base_.size()) + " values for " +
                                               std::to_string(n_) + " classes");
    }
    // Both are decided over every class weight, including those on branch nodes, as
    // onnxruntime does.
    const std::vector<int64_t> ids = info.attr_ints("class_ids");
    binary_ = n_ == 2 && std::set<int64_t>(ids.begin(), ids.end()).size() == 1;
    bool dbl = false;
    for (double w : floats_or_tensor(info, "class_weights", &dbl))
      all_positive_ = all_positive_ && !(w < 0);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    check_input(ctx, x);
    const Rows rows = feature_rows(ctx, x);
    Tensor& y = ctx.allocate_output(0, strings_ ? DataType::kString : DataType::kInt64, {rows.n});
    Tensor& z = ctx.allocate_output(1, DataType::kFloat, {rows.n, n_});
    float* zout = z.data<float>();
    for_rows(ctx, x, rows, [&](int64_t r, std::vector<double>& score, std::vector<uint8_t>& has) {
      std::vector<double> row(static_cast<size_t>(std::max<int64_t>(n_, 2)), 0.0);
      bool raw = false;
      const size_t label = finish_class(score, has, row.data(), &raw);
      for (int64_t j = 0; j < n_; ++j)
        zout[r * n_ + j] = static_cast<float>(row[static_cast<size_t>(j)]);
      if (strings_) {
        y.data<std::string>()[r] = labels_str_[label];
      } else {
        y.data<int64_t>()[r] = raw ? static_cast<int64_t>(label) : labels_int_[label];
      }
    });
  }

 private:
  std::vector<int64_t> labels_int_;
  std::vector<std::string> labels_str_;
  std::vector<double> base_;
  bool strings_ = false, binary_ = false, all_positive_ = true;

  // Base values, label and scores of one row. Returns the label's index; `raw` is set when
  // it is the bare 1 / 0 that onnxruntime returns for a two-class model that is not a
  // binary case (the index into string labels, the label itself for int64 ones).
  size_t finish_class(std::vector<double>& score, std::vector<uint8_t>& has, double* out,
                      bool* raw) const {
    const bool single = fo_.single;
    if (n_ > 2) {
      for (size_t k = 0; k < base_.size(); ++k) {
        if (!has[k]) {
          has[k] = 1;
          score[k] = base_[k];
        } else {
          score[k] = round_to(single, score[k] + base_[k]);
        }
      }
      int64_t best = -1;
      double bestw = 0;
      for (size_t k = 0; k < score.size(); ++k) {
        if (has[k] && (best == -1 || score[k] > bestw)) {
          best = static_cast<int64_t>(k);
          bestw = score[k];
        }
      }
      finish_scores(score, has, -1, out);
      return best < 0 ? 0 : static_cast<size_t>(best);
    }
    int add = -1;
    if (base_.size() == 2) {
      if (has[1]) {
        // onnxruntime assumes base_values[0] == base_values[1] here.
        score[1] = round_to(single, base_[1] + score[0]);
        score[0] = -score[1];
      } else {
        score[1] = round_to(single, score[1] + base_[1]);
        score[0] = round_to(single, score[0] + base_[0]);
      }
    } else if (base_.size() == 1) {
      score[0] = round_to(single, score[0] + base_[0]);
      if (!has[1]) score.pop_back();
    } else if (base_.empty()) {
      add = 3;
      if (!has[1]) score.pop_back();
    }
    const bool two = score.size() == 2 && has[1];
    const double pos = two ? score[1] : (has[0] ? score[0] : 0.0);
    size_t label;
    if (binary_) {
      if (all_positive_ && post_ != PostTransform::kLogistic) {
        add = pos > 0.5 ? 0 : 1;
      } else if (all_positive_) {
        // LOGISTIC: the scores are the logistic of -s / s, whatever the weights' signs
        // (onnxruntime 1.2x, microsoft/onnxruntime#27533; 1.23 gives 1 - s / s untransformed);
        // the label is still decided as a probability.
        add = pos > 0.5 ? 2 : 3;
      } else {
        add = pos > 0 ? 2 : 3;
      }
      label = (add == 0 || add == 2) ? 1 : 0;
    } else {
      label = pos > 0 ? 1 : 0;
      *raw = true;
    }
    has.resize(score.size());
    finish_scores(score, has, add, out);
    return label;
  }
};

// ---- TreeEnsemble (ai.onnx.ml 5) ----------------------------------------------------------

class TreeEnsembleV5 final : public TreeEnsembleKernel {
 public:
  explicit TreeEnsembleV5(const KernelInfo& info) {
    const std::vector<int64_t> featureids = info.attr_ints("nodes_featureids");
    const std::vector<int64_t> trueids = info.attr_ints("nodes_truenodeids");
    const std::vector<int64_t> falseids = info.attr_ints("nodes_falsenodeids");
    const std::vector<int64_t> trueleafs = info.attr_ints("nodes_trueleafs");
    const std::vector<int64_t> falseleafs = info.attr_ints("nodes_falseleafs");
    const std::vector<int64_t> missing = info.attr_ints("nodes_missing_value_tracks_true");
    const std::vector<int64_t> leaf_targets = info.attr_ints("leaf_targetids");
    const std::vector<int64_t> tree_roots = info.attr_ints("tree_roots");
    const std::vector<double> splits = tensor_doubles(info, "nodes_splits", true);
    const std::vector<double> leaf_w = tensor_doubles(info, "leaf_weights", true);
    const std::vector<double> members = tensor_doubles(info, "membership_values", false);
    const Tensor* modes_t = info.attr_tensor("nodes_modes");
    if (!modes_t) info.fail(StatusCode::kInvalidGraph, "attribute 'nodes_modes' is missing");
    if (modes_t->dtype() != DataType::kUInt8) {
      info.fail(StatusCode::kInvalidGraph,
                std::string("attribute 'nodes_modes' must be uint8, got ") +
                    dtype_name(modes_t->dtype()));
    }
    const Tensor* split_t = info.attr_tensor("nodes_splits");
    fo_.single = split_t->dtype() != DataType::kDouble;

    const size_t nn = featureids.size();
    for (const auto& [name, size] :
         {std::pair<const char*, size_t>{"nodes_truenodeids", trueids.size()},
          {"nodes_falsenodeids", falseids.size()},
          {"nodes_trueleafs", trueleafs.size()},
          {"nodes_falseleafs", falseleafs.size()},
          {"nodes_modes", static_cast<size_t>(modes_t->numel())},
          {"nodes_splits", splits.size()}}) {
      if (size != nn) {
        info.fail(StatusCode::kInvalidGraph, std::string("attribute '") + name + "' has " +
                                                 std::to_string(size) + " entries, expected " +
                                                 std::to_string(nn) + " (nodes_featureids)");
      }
    }
    const size_t nl = leaf_targets.size();
    if (leaf_w.size() != nl) {
      info.fail(StatusCode::kInvalidGraph,
                "attributes 'leaf_targetids' and 'leaf_weights' have different lengths");
    }
    if (nn == 0 || nl == 0 || tree_roots.empty())
      info.fail(StatusCode::kInvalidGraph, "the ensemble has no nodes, leaves or trees");
    if (nn + nl > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
      info.fail(StatusCode::kInvalidGraph, "too many tree nodes");

    int64_t max_target = 0;
    for (int64_t t : leaf_targets) {
      if (t < 0)
        info.fail(StatusCode::kInvalidGraph, "attribute 'leaf_targetids' has a negative id");
      max_target = std::max(max_target, t);
    }
    n_ = info.attr_int("n_targets", max_target + 1);
    if (n_ < 1 || max_target >= n_ || n_ > kMaxTargets) {
      info.fail(StatusCode::kInvalidGraph, "attribute 'n_targets' = " + std::to_string(n_) +
                                               " is out of range for target ids up to " +
                                               std::to_string(max_target));
    }
    const int64_t a = info.attr_int("aggregate_function", 1);
    if (a < 0 || a > 3) {
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'aggregate_function' = " + std::to_string(a) + " is not in [0, 3]");
    }
    agg_ = static_cast<Agg>(a);  // AVERAGE, SUM, MIN, MAX: the enum's order
    const int64_t p = info.attr_int("post_transform", 0);
    static const PostTransform kPost[] = {PostTransform::kNone, PostTransform::kSoftmax,
                                          PostTransform::kLogistic, PostTransform::kSoftmaxZero,
                                          PostTransform::kProbit};
    if (p < 0 || p > 4) {
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'post_transform' = " + std::to_string(p) + " is not in [0, 4]");
    }
    post_ = kPost[p];

    // Nodes first, then one leaf node per leaf_* entry.
    fo_.nodes.resize(nn + nl);
    std::vector<std::vector<LeafWeight>> per_node(nn + nl);
    const uint8_t* modes = modes_t->data<uint8_t>();
    size_t next_member = 0;
    for (size_t i = 0; i < nn; ++i) {
      TreeNode& nd = fo_.nodes[i];
      if (modes[i] > 6) {
        info.fail(StatusCode::kInvalidGraph,
                  "attribute 'nodes_modes' has an unknown mode " + std::to_string(modes[i]));
      }
      nd.mode = static_cast<Mode>(modes[i]);
      nd.feature = featureids[i];
      if (nd.feature < 0)
        info.fail(StatusCode::kInvalidGraph, "attribute 'nodes_featureids' has a negative id");
      fo_.max_feature = std::max(fo_.max_feature, nd.feature);
      nd.threshold = round_to(fo_.single, splits[i]);
      nd.missing_true = i < missing.size() && missing[i] == 1;
      for (int side = 0; side < 2; ++side) {
        const bool leaf = (side == 0 ? trueleafs[i] : falseleafs[i]) != 0;
        const int64_t id = side == 0 ? trueids[i] : falseids[i];
        const size_t limit = leaf ? nl : nn;
        if (id < 0 || static_cast<size_t>(id) >= limit) {
          info.fail(StatusCode::kInvalidGraph, "node " + std::to_string(i) + " points to " +
                                                   (leaf ? "leaf " : "node ") + std::to_string(id) +
                                                   ", out of range");
        }
        (side == 0 ? nd.t : nd.f) =
            static_cast<int32_t>(leaf ? nn + static_cast<size_t>(id) : static_cast<size_t>(id));
      }
      if (nd.mode == Mode::kMember) {
        nd.m0 = static_cast<uint32_t>(fo_.members.size());
        while (next_member < members.size() && !std::isnan(members[next_member]))
          fo_.members.push_back(round_to(fo_.single, members[next_member++]));
        if (next_member >= members.size()) {
          info.fail(StatusCode::kInvalidGraph,
                    "attribute 'membership_values' has fewer NaN-terminated sets than there "
                    "are BRANCH_MEMBER nodes");
        }
        ++next_member;
        nd.m1 = static_cast<uint32_t>(fo_.members.size());
        std::sort(fo_.members.begin() + nd.m0, fo_.members.end());
      }
    }
    for (size_t j = 0; j < nl; ++j) {
      fo_.nodes[nn + j].mode = Mode::kLeaf;
      per_node[nn + j].push_back({leaf_targets[j], round_to(fo_.single, leaf_w[j])});
    }
    attach_weights(fo_, per_node);
    for (int64_t r : tree_roots) {
      if (r < 0 || static_cast<size_t>(r) >= nn) {
        info.fail(StatusCode::kInvalidGraph,
                  "attribute 'tree_roots' has " + std::to_string(r) + ", out of range");
      }
      fo_.roots.push_back(static_cast<int32_t>(r));
    }
    check_acyclic(info, fo_);
    build_fast();
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const DataType dt = x.dtype();
    if (dt != DataType::kFloat && dt != DataType::kDouble && dt != DataType::kFloat16) {
      ctx.fail(StatusCode::kInvalidArgument, std::string("input 'X' has type ") + dtype_name(dt) +
                                                 "; expected float, double or float16");
    }
    const Rows rows = feature_rows(ctx, x);
    Tensor& y = ctx.allocate_output(0, dt, {rows.n, n_});
    const std::vector<double> no_base;
    for_rows(ctx, x, rows, [&](int64_t r, std::vector<double>& score, std::vector<uint8_t>& has) {
      std::vector<double> row(static_cast<size_t>(n_));
      finish_regression(score, has, no_base, row.data());
      for (int64_t j = 0; j < n_; ++j) {
        const double v = row[static_cast<size_t>(j)];
        const int64_t o = r * n_ + j;
        if (dt == DataType::kFloat) {
          y.data<float>()[o] = static_cast<float>(v);
        } else if (dt == DataType::kDouble) {
          y.data<double>()[o] = v;
        } else {
          y.data<Float16>()[o] = Float16(static_cast<float>(v));
        }
      }
    });
  }
};

}  // namespace

void register_tree_ensemble(KernelRegistry& r) {
  r.add(kMlDomain, "TreeEnsembleClassifier", 1, kMaxOpset, make_factory<TreeEnsembleClassifier>());
  r.add(kMlDomain, "TreeEnsembleRegressor", 1, kMaxOpset, make_factory<TreeEnsembleRegressor>());
  r.add(kMlDomain, "TreeEnsemble", 5, kMaxOpset, make_factory<TreeEnsembleV5>());
}

}  // namespace ml
}  // namespace ortlite
