// Einsum's equation parser (einsum.h).
#include <algorithm>
#include <string>
#include <vector>

#include "providers/cpu/math/einsum.h"
#include "providers/cpu/math/math_kernels.h"

namespace ortlite {
namespace einsum {

EinsumProblem parse_equation(const std::string& equation, KernelContext& ctx) {
  const size_t n_in = ctx.num_inputs();
  std::string lhs = equation, rhs;
  const size_t arrow = equation.find("->");
  const bool explicit_out = arrow != std::string::npos;
  if (explicit_out) {
    lhs = equation.substr(0, arrow);
    rhs = equation.substr(arrow + 2);
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
    ctx.fail(StatusCode::kInvalidArgument, "equation '" + equation + "' has " +
                                               std::to_string(terms.size()) + " terms for " +
                                               std::to_string(n_in) + " inputs");
  }
  auto letter = [&](char ch) -> int {
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return 26 + (ch - 'a');
    ctx.fail(StatusCode::kInvalidArgument,
             std::string("equation has an invalid character '") + ch + "'");
  };
  // Where a term's ellipsis starts (npos: none); a '.' outside one ellipsis fails.
  auto ellipsis_at = [&](const std::string& term) {
    const size_t e = term.find("...");
    for (size_t i = 0; i < term.size(); ++i) {
      if (term[i] != '.') continue;
      if (e == std::string::npos || i < e || i >= e + 3) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "term '" + term + "' has a '.' outside its one ellipsis");
      }
    }
    return e;
  };
  EinsumProblem pb;
  pb.in_labels.resize(n_in);
  std::vector<int64_t> ell_rank(n_in, 0);
  int64_t max_ell = 0;
  for (size_t t = 0; t < n_in; ++t) {
    const Tensor& x = ctx.required_input(t);
    const std::string& term = terms[t];
    const size_t e = ellipsis_at(term);
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
  pb.size.assign(static_cast<size_t>(kEllipsisLabel + max_ell), -1);
  for (size_t t = 0; t < n_in; ++t) {
    const Tensor& x = ctx.required_input(t);
    const std::string& term = terms[t];
    std::vector<int>& labels = pb.in_labels[t];
    for (size_t i = 0; i < term.size(); ++i) {
      if (term[i] == '.') {
        for (int64_t k = 0; k < ell_rank[t]; ++k) {
          labels.push_back(kEllipsisLabel + static_cast<int>(max_ell - ell_rank[t] + k));
        }
        i += 2;
        continue;
      }
      labels.push_back(letter(term[i]));
    }
    for (size_t i = 0; i < labels.size(); ++i) {
      const int lab = labels[i];
      const int64_t d = x.dim(i);
      for (size_t j = 0; j < i; ++j) {
        if (labels[j] == lab && x.dim(j) != d) {
          ctx.fail(StatusCode::kInvalidArgument,
                   "a label repeated in term '" + term + "' spans dims of different sizes in " +
                       "input " + std::to_string(t) + " of shape " + shape_to_string(x.shape()));
        }
      }
      int64_t& s = pb.size[static_cast<size_t>(lab)];
      if (s == -1 || s == 1) {
        s = d;
      } else if (d != s && d != 1) {
        ctx.fail(StatusCode::kInvalidArgument, "label sizes disagree in '" + equation +
                                                   "' (input " + std::to_string(t) + " of shape " +
                                                   shape_to_string(x.shape()) + ")");
      }
    }
  }
  if (explicit_out) {
    const size_t e = ellipsis_at(rhs);
    for (size_t i = 0; i < rhs.size(); ++i) {
      if (i == e) {
        for (int64_t k = 0; k < max_ell; ++k) pb.out_labels.push_back(kEllipsisLabel + int(k));
        i += 2;
        continue;
      }
      const int lab = letter(rhs[i]);
      if (pb.size[static_cast<size_t>(lab)] == -1) {
        ctx.fail(StatusCode::kInvalidArgument,
                 std::string("output label '") + rhs[i] + "' is not in the inputs");
      }
      if (std::find(pb.out_labels.begin(), pb.out_labels.end(), lab) != pb.out_labels.end()) {
        ctx.fail(StatusCode::kInvalidArgument,
                 std::string("output label '") + rhs[i] + "' appears more than once");
      }
      pb.out_labels.push_back(lab);
    }
  } else {
    for (int64_t k = 0; k < max_ell; ++k) pb.out_labels.push_back(kEllipsisLabel + int(k));
    std::vector<int> count(static_cast<size_t>(kEllipsisLabel), 0);
    for (const auto& l : pb.in_labels)
      for (int lab : l)
        if (lab < kEllipsisLabel) count[static_cast<size_t>(lab)]++;
    for (int lab = 0; lab < kEllipsisLabel; ++lab)
      if (count[static_cast<size_t>(lab)] == 1) pb.out_labels.push_back(lab);
  }
  return pb;
}

}  // namespace einsum
}  // namespace ortlite
