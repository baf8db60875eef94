// Einsum (opsets 12-23) and Det, added for ONNX node conformance. Einsum: any equation (explicit or
// implicit output, ellipsis broadcasting, repeated labels for diagonals), evaluated as a
// direct sum over every label combination, in double. Correct, not fast: for the small
// contractions it is meant for.
#include <cmath>
#include <algorithm>
#include <map>
#include <type_traits>

#include "providers/cpu/math/math_kernels.h"

namespace ortlite {
namespace {

class Einsum final : public Kernel {
 public:
  explicit Einsum(const KernelInfo& info) {
    const std::string eq = info.attr_string("equation", "");
    for (char ch : eq) {
      if (ch != ' ') equation_ += ch;
    }
    if (equation_.empty()) info.fail(StatusCode::kInvalidArgument, "attribute 'equation' is empty");
  }

  void compute(KernelContext& ctx) const override {
    const size_t n_in = ctx.num_inputs();
    std::string lhs = equation_, rhs;
    const size_t arrow = equation_.find("->");
    const bool explicit_out = arrow != std::string::npos;
    if (explicit_out) {
      lhs = equation_.substr(0, arrow);
      rhs = equation_.substr(arrow + 2);
    }
    std::vector<std::string> terms;
    {
      size_t start = 0;
      while (true) {
        const size_t comma = lhs.find(',', start);
        terms.push_back(lhs.substr(start, comma == std::string::npos ? comma : comma - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    }
    if (terms.size() != n_in) {
      ctx.fail(StatusCode::kInvalidArgument, "equation '" + equation_ + "' has " +
                                                 std::to_string(terms.size()) + " terms for " +
                                                 std::to_string(n_in) + " inputs");
    }
    const DataType dt = ctx.required_input(0).dtype();
    // Labels: letters 0..51, ellipsis dims 52 + k (k over the widest ellipsis).
    auto letter = [&](char ch) -> int {
      if (ch >= 'a' && ch <= 'z') return ch - 'a';
      if (ch >= 'A' && ch <= 'Z') return 26 + (ch - 'A');
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("equation has an invalid character '") + ch + "'");
    };
    std::vector<std::vector<int>> in_labels(n_in);
    std::vector<int64_t> ell_rank(n_in, 0);
    int64_t max_ell = 0;
    for (size_t t = 0; t < n_in; ++t) {
      const Tensor& x = ctx.required_input(t);
      if (x.dtype() != dt) ctx.fail(StatusCode::kInvalidArgument, "inputs differ in type");
      const std::string& term = terms[t];
      const size_t e = term.find("...");
      size_t letters = 0;
      for (char ch : term)
        if (ch != '.') ++letters;
      if (e == std::string::npos) {
        if (letters != x.rank()) {
          ctx.fail(StatusCode::kInvalidArgument, "term '" + term + "' does not match input " +
                                                     std::to_string(t) + " of shape " +
                                                     shape_to_string(x.shape()));
        }
      } else {
        if (letters > x.rank()) {
          ctx.fail(StatusCode::kInvalidArgument, "term '" + term + "' has more labels than " +
                                                     "input " + std::to_string(t) + " has dims");
        }
        ell_rank[t] = static_cast<int64_t>(x.rank() - letters);
        max_ell = std::max(max_ell, ell_rank[t]);
      }
    }
    std::map<int, int64_t> size;
    for (size_t t = 0; t < n_in; ++t) {
      const Tensor& x = ctx.required_input(t);
      const std::string& term = terms[t];
      size_t dim = 0;
      for (size_t i = 0; i < term.size(); ++i) {
        if (term[i] == '.') {
          if (term.compare(i, 3, "...") != 0) {
            ctx.fail(StatusCode::kInvalidArgument, "equation has a stray '.'");
          }
          for (int64_t k = 0; k < ell_rank[t]; ++k) {
            in_labels[t].push_back(52 + static_cast<int>(max_ell - ell_rank[t] + k));
          }
          i += 2;
          continue;
        }
        in_labels[t].push_back(letter(term[i]));
      }
      for (int lab : in_labels[t]) {
        const int64_t d = x.dim(dim++);
        auto it = size.find(lab);
        if (it == size.end() || it->second == 1) {
          size[lab] = d;
        } else if (d != it->second && !(lab >= 52 && d == 1)) {
          ctx.fail(StatusCode::kInvalidArgument, "label sizes disagree in '" + equation_ + "'");
        }
      }
    }
    std::vector<int> out_labels;
    if (explicit_out) {
      for (size_t i = 0; i < rhs.size(); ++i) {
        if (rhs[i] == '.') {
          for (int64_t k = 0; k < max_ell; ++k) out_labels.push_back(52 + static_cast<int>(k));
          i += 2;
          continue;
        }
        const int lab = letter(rhs[i]);
        if (!size.count(lab)) {
          ctx.fail(StatusCode::kInvalidArgument, "output label not in the inputs");
        }
        out_labels.push_back(lab);
      }
    } else {
      for (int64_t k = 0; k < max_ell; ++k) out_labels.push_back(52 + static_cast<int>(k));
      std::map<int, int> count;
      for (const auto& l : in_labels)
        for (int lab : l) count[lab]++;
      for (const auto& [lab, cnt] : count)
        if (lab < 52 && cnt == 1) out_labels.push_back(lab);
    }
    std::vector<int> sum_labels;
    for (const auto& [lab, sz] : size) {
      (void)sz;
      if (std::find(out_labels.begin(), out_labels.end(), lab) == out_labels.end()) {
        sum_labels.push_back(lab);
      }
    }
    // All labels: output first, then summed. Per input, the element stride of each label.
    std::vector<int> all = out_labels;
    all.insert(all.end(), sum_labels.begin(), sum_labels.end());
    std::vector<int64_t> dims;
    for (int lab : all) dims.push_back(size[lab]);
    std::vector<std::vector<int64_t>> strides(n_in, std::vector<int64_t>(all.size(), 0));
    std::vector<std::vector<double>> vals(n_in);
    for (size_t t = 0; t < n_in; ++t) {
      const Tensor& x = ctx.required_input(t);
      int64_t st = 1;
      for (size_t i = in_labels[t].size(); i-- > 0;) {
        const size_t pos =
            static_cast<size_t>(std::find(all.begin(), all.end(), in_labels[t][i]) - all.begin());
        if (x.dim(i) != 1 || size[in_labels[t][i]] == 1) strides[t][pos] += st;
        st *= x.dim(i);
      }
      vals[t].resize(static_cast<size_t>(x.numel()));
      ORTLITE_DISPATCH_NUMERIC(dt, "Einsum", [&](auto tag) {
        using T = decltype(tag);
        const T* p = x.data<T>();
        for (size_t i = 0; i < vals[t].size(); ++i) {
          if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
            vals[t][i] = static_cast<double>(static_cast<float>(p[i]));
          } else {
            vals[t][i] = static_cast<double>(p[i]);
          }
        }
      });
    }
    Shape out_shape;
    int64_t out_n = 1, sum_n = 1;
    for (size_t i = 0; i < out_labels.size(); ++i) {
      out_shape.push_back(dims[i]);
      out_n *= dims[i];
    }
    for (size_t i = out_labels.size(); i < all.size(); ++i) sum_n *= dims[i];
    if (out_n > (int64_t{1} << 28) || sum_n > (int64_t{1} << 28) ||
        static_cast<double>(out_n) * static_cast<double>(sum_n) > 1e10) {
      ctx.fail(StatusCode::kNotImplemented, "Einsum '" + equation_ +
                                                "' is too large for the "
                                                "direct evaluation");
    }
    std::vector<double> out(static_cast<size_t>(out_n), 0.0);
    std::vector<int64_t> idx(all.size(), 0);
    for (int64_t o = 0; o < out_n; ++o) {
      int64_t rem = o;
      for (size_t i = out_labels.size(); i-- > 0;) {
        idx[i] = rem % dims[i];
        rem /= dims[i];
      }
      double acc = 0;
      for (int64_t sidx = 0; sidx < sum_n; ++sidx) {
        int64_t r2 = sidx;
        for (size_t i = all.size(); i-- > out_labels.size();) {
          idx[i] = r2 % dims[i];
          r2 /= dims[i];
        }
        double prod = 1;
        for (size_t t = 0; t < n_in; ++t) {
          int64_t off = 0;
          for (size_t i = 0; i < all.size(); ++i) off += idx[i] * strides[t][i];
          prod *= vals[t][static_cast<size_t>(off)];
        }
        acc += prod;
      }
      out[static_cast<size_t>(o)] = acc;
    }
    Tensor& y = ctx.allocate_output(0, dt, out_shape);
    ORTLITE_DISPATCH_NUMERIC(dt, "Einsum", [&](auto tag) {
      using T = decltype(tag);
      T* p = y.data<T>();
      for (size_t i = 0; i < out.size(); ++i) {
        if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
          p[i] = T(static_cast<float>(out[i]));
        } else {
          p[i] = static_cast<T>(out[i]);
        }
      }
    });
  }

 private:
  std::string equation_;
};

// Det: determinant of the trailing [M, M] matrices (LU with partial pivoting, double).
class Det final : public Kernel {
 public:
  explicit Det(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    if (x.rank() < 2 || x.dim(x.rank() - 1) != x.dim(x.rank() - 2)) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'X' must be [..., M, M], got " + shape_to_string(x.shape()));
    }
    const int64_t m = x.dim(x.rank() - 1);
    const Shape out_shape(x.shape().begin(), x.shape().end() - 2);
    const int64_t mats = shape_size(out_shape);
    std::vector<double> v(static_cast<size_t>(x.numel()));
    ORTLITE_DISPATCH_FLOAT(x.dtype(), "Det", [&](auto tag) {
      using T = decltype(tag);
      const T* p = x.data<T>();
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(static_cast<float>(p[i]));
      if constexpr (std::is_same_v<T, double>) {
        for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
      }
    });
    std::vector<double> det(static_cast<size_t>(mats));
    for (int64_t b = 0; b < mats; ++b) {
      double* a = &v[static_cast<size_t>(b * m * m)];
      double d = 1;
      for (int64_t c = 0; c < m && d != 0; ++c) {
        int64_t piv = c;
        for (int64_t r = c + 1; r < m; ++r)
          if (std::fabs(a[r * m + c]) > std::fabs(a[piv * m + c])) piv = r;
        if (a[piv * m + c] == 0) {
          d = 0;
          break;
        }
        if (piv != c) {
          for (int64_t k = 0; k < m; ++k) std::swap(a[c * m + k], a[piv * m + k]);
          d = -d;
        }
        d *= a[c * m + c];
        for (int64_t r = c + 1; r < m; ++r) {
          const double f = a[r * m + c] / a[c * m + c];
          for (int64_t k = c; k < m; ++k) a[r * m + k] -= f * a[c * m + k];
        }
      }
      det[static_cast<size_t>(b)] = d;
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), out_shape);
    ORTLITE_DISPATCH_FLOAT(x.dtype(), "Det", [&](auto tag) {
      using T = decltype(tag);
      T* p = y.data<T>();
      for (size_t i = 0; i < det.size(); ++i) {
        if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
          p[i] = T(static_cast<float>(det[i]));
        } else {
          p[i] = static_cast<T>(det[i]);
        }
      }
    });
  }
};

}  // namespace

void register_einsum_det_kernels(KernelRegistry& r) {
  r.add("", "Det", 11, 21, make_factory<Det>());
  r.add("", "Det", 22, kNewestOpset, make_factory<Det>());
  r.add("", "Einsum", 12, kNewestOpset, make_factory<Einsum>());
}

}  // namespace ortlite
