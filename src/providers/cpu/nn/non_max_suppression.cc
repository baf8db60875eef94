// NonMaxSuppression (opsets 10-23), added for ONNX node conformance: greedy selection per
// (batch, class) by descending score (ties: lower box index first), dropping a box whose
// IoU with a selected one exceeds iou_threshold; boxes as corners [y1, x1, y2, x2] (any
// order) or, with center_point_box = 1, [x_center, y_center, width, height].
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "providers/cpu/nn/nn_common.h"

namespace ortlite {
namespace nn {
namespace {

class NonMaxSuppression final : public Kernel {
 public:
  explicit NonMaxSuppression(const KernelInfo& info)
      : center_(info.attr_int("center_point_box", 0)) {
    if (center_ != 0 && center_ != 1) {
      info.fail(StatusCode::kInvalidArgument, "attribute 'center_point_box' must be 0 or 1");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& boxes = ctx.required_input(0);
    const Tensor& scores = ctx.required_input(1);
    if (boxes.rank() != 3 || boxes.dim(2) != 4 || scores.rank() != 3 ||
        scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1) ||
        boxes.dtype() != DataType::kFloat || scores.dtype() != DataType::kFloat) {
      ctx.fail(StatusCode::kInvalidArgument,
               "inputs 'boxes' " + shape_to_string(boxes.shape()) + " and 'scores' " +
                   shape_to_string(scores.shape()) + " must be float [B, N, 4] and [B, C, N]");
    }
    int64_t max_out = 0;
    float iou = 0, score_thr = 0;
    bool has_score_thr = false;
    if (const Tensor* t = ctx.input(2); t && t->numel() > 0) {
      if (t->dtype() != DataType::kInt64) {
        ctx.fail(StatusCode::kInvalidArgument, "input 'max_output_boxes_per_class' must be int64");
      }
      max_out = std::max<int64_t>(t->data<int64_t>()[0], 0);
    }
    if (const Tensor* t = ctx.input(3); t && t->numel() > 0) {
      iou = static_cast<float>(tensor_scalar_as_double(*t));
    }
    if (const Tensor* t = ctx.input(4); t && t->numel() > 0) {
      score_thr = static_cast<float>(tensor_scalar_as_double(*t));
      has_score_thr = true;
    }
    const int64_t nb = boxes.dim(0), nbox = boxes.dim(1), nc = scores.dim(1);
    const float* bx = boxes.data<float>();
    const float* sc = scores.data<float>();
    std::vector<int64_t> out;
    // Candidates in a max-heap by (score, then lower index): only those taken before
    // max_output boxes are kept get ordered (a full sort of every class's candidates cost
    // more than the suppression itself). NaN scores come after every number, lower index
    // first.
    struct Cand {
      float s;
      int64_t i;
    };
    auto lower = [](const Cand& a, const Cand& b) {
      return a.s < b.s || (a.s == b.s && a.i > b.i);
    };
    std::vector<Cand> cand;
    std::vector<int64_t> nans;
    std::vector<Box> boxes_n, chosen;
    for (int64_t b = 0; b < nb; ++b) {
      // Each box's corners and area once per batch item, not once per comparison.
      boxes_n.resize(static_cast<size_t>(nbox));
      for (int64_t i = 0; i < nbox; ++i)
        boxes_n[static_cast<size_t>(i)] = corners(bx + (b * nbox + i) * 4);
      for (int64_t c = 0; c < nc; ++c) {
        const float* s = sc + (b * nc + c) * nbox;
        cand.clear();
        nans.clear();
        chosen.clear();
        for (int64_t i = 0; i < nbox; ++i) {
          if (has_score_thr && !(s[i] > score_thr)) continue;
          if (std::isnan(s[i])) {
            nans.push_back(i);
          } else {
            cand.push_back({s[i], i});
          }
        }
        std::make_heap(cand.begin(), cand.end(), lower);
        size_t next_nan = 0;
        while (static_cast<int64_t>(chosen.size()) < max_out) {
          int64_t i;
          if (!cand.empty()) {
            std::pop_heap(cand.begin(), cand.end(), lower);
            i = cand.back().i;
            cand.pop_back();
          } else if (next_nan < nans.size()) {
            i = nans[next_nan++];
          } else {
            break;
          }
          const Box& a = boxes_n[static_cast<size_t>(i)];
          bool keep = true;
          for (const Box& k : chosen) {
            if (suppress(a, k, iou)) {
              keep = false;
              break;
            }
          }
          if (keep) {
            chosen.push_back(a);
            out.insert(out.end(), {b, c, i});
          }
        }
      }
    }
    Tensor& y = ctx.allocate_output(0, DataType::kInt64, {static_cast<int64_t>(out.size() / 3), 3});
    std::copy(out.begin(), out.end(), y.data<int64_t>());
  }

 private:
  struct Box {
    float x0, x1, y0, y1, area;
  };

  Box corners(const float* a) const {
    Box r;
    if (center_ == 0) {
      r.x0 = std::min(a[1], a[3]);
      r.x1 = std::max(a[1], a[3]);
      r.y0 = std::min(a[0], a[2]);
      r.y1 = std::max(a[0], a[2]);
    } else {
      r.x0 = a[0] - a[2] / 2;
      r.x1 = a[0] + a[2] / 2;
      r.y0 = a[1] - a[3] / 2;
      r.y1 = a[1] + a[3] / 2;
    }
    r.area = (r.x1 - r.x0) * (r.y1 - r.y0);
    return r;
  }

  static bool suppress(const Box& a, const Box& b, float thr) {
    const float ix0 = std::max(a.x0, b.x0), ix1 = std::min(a.x1, b.x1);
    if (ix1 <= ix0) return false;
    const float iy0 = std::max(a.y0, b.y0), iy1 = std::min(a.y1, b.y1);
    if (iy1 <= iy0) return false;
    const float inter = (ix1 - ix0) * (iy1 - iy0);
    if (inter <= 0) return false;
    const float uni = a.area + b.area - inter;
    if (a.area <= 0 || b.area <= 0 || uni <= 0) return false;
    return inter / uni > thr;
  }

  int64_t center_;
};

}  // namespace

void register_non_max_suppression(KernelRegistry& r) {
  r.add("", "NonMaxSuppression", 10, 10, make_factory<NonMaxSuppression>());
  r.add("", "NonMaxSuppression", 11, kNewestOpset, make_factory<NonMaxSuppression>());
}

}  // namespace nn
}  // namespace ortlite
