// TfIdfVectorizer (9): counts the n-grams of the pool (pool_int64s or pool_strings; the
// n-grams of length n start at pool offset ngram_counts[n - 1]) in each row of X, with
// min_gram_length..max_gram_length items and up to max_skip_count items skipped between
// consecutive ones, into output column ngram_indexes[k] of the pool's k-th n-gram. X is
// [C] (output [O]) or [B, C] (output [B, O]), O = max(ngram_indexes) + 1; int32, int64 or
// string. Mode TF gives the counts, IDF weights[j] (1 without weights) where a count is
// nonzero, TFIDF the counts times weights[j].
//
// As in onnxruntime and onnx's reference: weights are indexed by output column (the
// specification says by pool n-gram; both are the same when ngram_indexes is 0..K-1);
// unigrams are counted once whatever the skip. Like onnxruntime (unlike the reference) an
// n-gram listed twice in the pool is refused at load, and items of another kind than the
// pool's count nothing.
#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "ortlite/kernel.h"

namespace ortlite {
namespace nn {
namespace {

enum class Weighting { kTF, kIDF, kTFIDF };

// The pool as a trie: node 0 is the root; an n-gram ends at a node with id > 0 (id - 1 is
// its position in the pool's n-gram order, the index into ngram_indexes).
template <typename K>
struct NgramTrie {
  struct Node {
    std::unordered_map<K, int32_t> next;
    int64_t id = 0;
  };
  std::vector<Node> nodes{1};

  int32_t child(int32_t at, const K& key) {
    auto it = nodes[static_cast<size_t>(at)].next.find(key);
    if (it != nodes[static_cast<size_t>(at)].next.end()) return it->second;
    const int32_t c = static_cast<int32_t>(nodes.size());
    nodes[static_cast<size_t>(at)].next.emplace(key, c);
    nodes.emplace_back();
    return c;
  }
  // -1 when `at` has no child `key`.
  int32_t find(int32_t at, const K& key) const {
    const auto& m = nodes[static_cast<size_t>(at)].next;
    auto it = m.find(key);
    return it == m.end() ? -1 : it->second;
  }
};

class TfIdfVectorizer final : public Kernel {
 public:
  explicit TfIdfVectorizer(const KernelInfo& info)
      : min_gram_(info.attr_int_required("min_gram_length")),
        max_gram_(info.attr_int_required("max_gram_length")),
        max_skip_(info.attr_int_required("max_skip_count")),
        ngram_counts_(info.attr_ints("ngram_counts")),
        ngram_indexes_(info.attr_ints("ngram_indexes")),
        weights_(info.attr_floats("weights")) {
    const std::string mode = info.attr_string("mode", "");
    if (mode == "TF")
      weighting_ = Weighting::kTF;
    else if (mode == "IDF")
      weighting_ = Weighting::kIDF;
    else if (mode == "TFIDF")
      weighting_ = Weighting::kTFIDF;
    else
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'mode' = '" + mode + "' is not one of TF, IDF, TFIDF");
    if (min_gram_ < 1 || max_gram_ < min_gram_) {
      info.fail(StatusCode::kInvalidGraph,
                "min_gram_length (" + std::to_string(min_gram_) + ") and max_gram_length (" +
                    std::to_string(max_gram_) + ") must satisfy 1 <= min <= max");
    }
    if (max_skip_ < 0) info.fail(StatusCode::kInvalidGraph, "max_skip_count must be >= 0");
    if (ngram_indexes_.empty())
      info.fail(StatusCode::kInvalidGraph, "attribute 'ngram_indexes' is required");
    for (int64_t j : ngram_indexes_) {
      if (j < 0) info.fail(StatusCode::kInvalidGraph, "ngram_indexes holds a negative index");
      output_size_ = std::max(output_size_, j + 1);
    }
    if (!weights_.empty() && weights_.size() != ngram_indexes_.size()) {
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'weights' has " + std::to_string(weights_.size()) +
                    " values but 'ngram_indexes' has " + std::to_string(ngram_indexes_.size()));
    }
    // Weights are read by output column: every column needs one (onnxruntime reads past
    // the weights there).
    if (!weights_.empty() && output_size_ > static_cast<int64_t>(weights_.size())) {
      info.fail(StatusCode::kInvalidGraph,
                "attribute 'weights' has " + std::to_string(weights_.size()) + " values for " +
                    std::to_string(output_size_) + " output columns (max(ngram_indexes) + 1)");
    }
    const bool has_ints = info.has_attr("pool_int64s"), has_strs = info.has_attr("pool_strings");
    if (has_ints == has_strs) {
      info.fail(StatusCode::kInvalidGraph,
                "exactly one of the attributes 'pool_int64s' and 'pool_strings' must be set");
    }
    strings_ = has_strs;
    if (strings_)
      build(info, info.attr_strings("pool_strings"), str_trie_);
    else
      build(info, info.attr_ints("pool_int64s"), int_trie_);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const DataType dt = x.dtype();
    if (dt != DataType::kString && dt != DataType::kInt64 && dt != DataType::kInt32) {
      ctx.fail(StatusCode::kInvalidArgument, std::string("input 'X' has type ") + dtype_name(dt) +
                                                 "; expected int32, int64 or string");
    }
    if (x.rank() > 2 || (x.rank() == 2 && x.dim(0) < 1)) {
      ctx.fail(StatusCode::kInvalidArgument,
               "Input shape must have either [C] or [B,C] dimensions with B > 0, got " +
                   shape_to_string(x.shape()));
    }
    // A scalar is one row of one item (as in onnxruntime).
    const int64_t rows = x.rank() == 2 ? x.dim(0) : 1;
    const int64_t c = x.rank() == 2 ? x.dim(1) : x.numel();
    Shape out_shape = x.rank() == 2 ? Shape{rows, output_size_} : Shape{output_size_};
    Tensor& y = ctx.allocate_output(0, DataType::kFloat, out_shape);
    std::vector<uint32_t> counts(static_cast<size_t>(rows * output_size_), 0);
    // Items of the other kind than the pool's (strings against pool_int64s, numbers against
    // pool_strings) match no n-gram: the counts stay 0, as in onnxruntime.
    const bool comparable = (dt == DataType::kString) == strings_;
    for (int64_t r = 0; r < rows && comparable; ++r) {
      uint32_t* row_counts = counts.data() + r * output_size_;
      switch (dt) {
        case DataType::kString:
          count_row(str_trie_, x.data<std::string>() + r * c, c, row_counts);
          break;
        case DataType::kInt64:
          count_row(int_trie_, x.data<int64_t>() + r * c, c, row_counts);
          break;
        default:
          count_row(int_trie_, x.data<int32_t>() + r * c, c, row_counts);
          break;
      }
    }
    float* out = y.data<float>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < output_size_; ++j) {
        const uint32_t f = counts[static_cast<size_t>(r * output_size_ + j)];
        const float w = weights_.empty() ? 1.f : weights_[static_cast<size_t>(j)];
        float v = static_cast<float>(f);
        if (weighting_ == Weighting::kIDF)
          v = f > 0 ? w : 0.f;
        else if (weighting_ == Weighting::kTFIDF)
          v = static_cast<float>(f) * w;
        out[r * output_size_ + j] = v;
      }
    }
  }

 private:
  // Loads the n-grams of the lengths in [min_gram, max_gram] into the trie; the others
  // only advance the n-gram position.
  template <typename K>
  void build(const KernelInfo& info, const std::vector<K>& pool, NgramTrie<K>& trie) {
    const int64_t total = static_cast<int64_t>(pool.size());
    int64_t ngram_id = 1;
    for (size_t i = 0; i < ngram_counts_.size(); ++i) {
      const int64_t n = static_cast<int64_t>(i) + 1;
      const int64_t start = ngram_counts_[i];
      const int64_t end = i + 1 < ngram_counts_.size() ? ngram_counts_[i + 1] : total;
      if (start < 0 || end < start || end > total) {
        info.fail(StatusCode::kInvalidGraph,
                  "ngram_counts[" + std::to_string(i) + "] = " + std::to_string(start) +
                      " does not delimit the pool of " + std::to_string(total) + " items");
      }
      const int64_t ngrams = (end - start) / n;
      if (n < min_gram_ || n > max_gram_) {
        ngram_id += ngrams;
        continue;
      }
      for (int64_t g = 0; g < ngrams; ++g, ++ngram_id) {
        int32_t at = 0;
        for (int64_t k = 0; k < n; ++k)
          at = trie.child(at, pool[static_cast<size_t>(start + g * n + k)]);
        if (ngram_id > static_cast<int64_t>(ngram_indexes_.size())) {
          info.fail(StatusCode::kInvalidGraph,
                    "the pool holds more n-grams than 'ngram_indexes' has entries (" +
                        std::to_string(ngram_indexes_.size()) + ")");
        }
        if (trie.nodes[static_cast<size_t>(at)].id != 0) {
          info.fail(StatusCode::kInvalidGraph, "the pool lists the " + std::to_string(n) +
                                                   "-gram #" + std::to_string(g) + " twice");
        }
        trie.nodes[static_cast<size_t>(at)].id = ngram_id;
      }
    }
  }

  template <typename K, typename T>
  void count_row(const NgramTrie<K>& trie, const T* row, int64_t c, uint32_t* counts) const {
    if (trie.nodes[0].next.empty()) return;
    int64_t start_size = min_gram_;
    for (int64_t skip = 1; skip <= max_skip_ + 1; ++skip) {
      for (int64_t s = 0; s < c; ++s) {
        // Too close to the end for any n-gram of the sizes still wanted.
        if (s + skip * (start_size - 1) >= c) break;
        int32_t at = 0;
        int64_t size = 1;
        for (int64_t item = s; item < c && size <= max_gram_; item += skip, ++size) {
          if (trie.nodes[static_cast<size_t>(at)].next.empty()) break;
          at = trie.find(at, static_cast<K>(row[item]));
          if (at < 0) break;
          const int64_t id = trie.nodes[static_cast<size_t>(at)].id;
          if (size >= start_size && id != 0) ++counts[ngram_indexes_[static_cast<size_t>(id - 1)]];
        }
      }
      // Unigrams do not depend on the skip: count them in the first pass only.
      if (start_size == 1) {
        ++start_size;
        if (start_size > max_gram_) break;
      }
    }
  }

  Weighting weighting_ = Weighting::kTF;
  int64_t min_gram_, max_gram_, max_skip_;
  std::vector<int64_t> ngram_counts_, ngram_indexes_;
  std::vector<float> weights_;
  int64_t output_size_ = 0;
  bool strings_ = false;
  NgramTrie<int64_t> int_trie_;
  NgramTrie<std::string> str_trie_;
};

}  // namespace

void register_tfidf_vectorizer(KernelRegistry& r) {
  r.add("", "TfIdfVectorizer", 9, kMaxOpset, make_factory<TfIdfVectorizer>());
}

}  // namespace nn
}  // namespace ortlite
