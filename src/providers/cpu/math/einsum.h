// Einsum's equation: labels per input and output dim and each label's size
// (src/providers/cpu/math/einsum_parse.cc), evaluated by einsum.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ortlite/kernel.h"

namespace ortlite {
namespace einsum {

// Labels: 'A'-'Z' are 0-25 and 'a'-'z' 26-51 (ASCII order, the order numpy sorts an
// implicit output in); the dims an ellipsis stands for are 52 + k, k over the widest one.
constexpr int kEllipsisLabel = 52;

// The equation applied to the inputs' shapes.
struct EinsumProblem {
  std::vector<std::vector<int>> in_labels;  // per input, one label per dim
  std::vector<int> out_labels;              // one per output dim
  std::vector<int64_t> size;                // per label (-1: unused)
};

// Labels per input dim and per output dim, and each label's size, for the context's
// inputs; bad equations and shapes that do not fit them fail with kInvalidArgument.
EinsumProblem parse_equation(const std::string& equation, KernelContext& ctx);

}  // namespace einsum
}  // namespace ortlite
