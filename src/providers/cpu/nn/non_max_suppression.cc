// NonMaxSuppression (opsets 10-23), added for ONNX node conformance: greedy selection per
// (batch, class) by descending score (ties: lower box index first), dropping a box whose
// IoU with a selected one exceeds iou_threshold; boxes as corners [y1, x1, y2, x2] (any
// order) or, with center_point_box = 1, [x_center, y_center, width, height].
#include <algorithm>
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
    std::vector<int64_t> cand, chosen;
    for (int64_t b = 0; b < nb; ++b) {
      const float* bb = bx + b * nbox * 4;
      for (int64_t c = 0; c < nc; ++c) {
        const float* s = sc + (b * nc + c) * nbox;
        cand.clear();
        chosen.clear();
        for (int64_t i = 0; i < nbox; ++i) {
          if (!has_score_thr || s[i] > score_thr) cand.push_back(i);
        }
        std::stable_sort(cand.begin(), cand.end(),
                         [&](int64_t l, int64_t r) { return s[l] > s[r]; });
        for (int64_t i : cand) {
          if (static_cast<int64_t>(chosen.size()) >= max_out) break;
          bool keep = true;
          for (int64_t j : chosen) {
            if (suppress(bb + i * 4, bb + j * 4, iou)) {
              keep = false;
              break;
            }
          }
          if (keep) {
            chosen.push_back(i);
            out.insert(out.end(), {b, c, i});
          }
        }
      }
    }
    Tensor& y = ctx.allocate_output(0, DataType::kInt64, {static_cast<int64_t>(out.size() / 3), 3});
    std::copy(out.begin(), out.end(), y.data<int64_t>());
  }

 private:
  bool suppress(const float* a, const float* b, float thr) const {
    float ax0, ax1, ay0, ay1, bx0, bx1, by0, by1;
    if (center_ == 0) {
      ax0 = std::min(a[1], a[3]);
      ax1 = std::max(a[1], a[3]);
      ay0 = std::min(a[0], a[2]);
      ay1 = std::max(a[0], a[2]);
      bx0 = std::min(b[1], b[3]);
      bx1 = std::max(b[1], b[3]);
      by0 = std::min(b[0], b[2]);
      by1 = std::max(b[0], b[2]);
    } else {
      ax0 = a[0] - a[2] / 2;
      ax1 = a[0] + a[2] / 2;
      ay0 = a[1] - a[3] / 2;
      ay1 = a[1] + a[3] / 2;
      bx0 = b[0] - b[2] / 2;
      bx1 = b[0] + b[2] / 2;
      by0 = b[1] - b[3] / 2;
      by1 = b[1] + b[3] / 2;
    }
    const float ix0 = std::max(ax0, bx0), ix1 = std::min(ax1, bx1);
    if (ix1 <= ix0) return false;
    const float iy0 = std::max(ay0, by0), iy1 = std::min(ay1, by1);
    if (iy1 <= iy0) return false;
    const float inter = (ix1 - ix0) * (iy1 - iy0);
    if (inter <= 0) return false;
    const float area_a = (ax1 - ax0) * (ay1 - ay0), area_b = (bx1 - bx0) * (by1 - by0);
    const float uni = area_a + area_b - inter;
    if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
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
