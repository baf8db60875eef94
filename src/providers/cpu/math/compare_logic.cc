// Comparisons with a bool output (Equal Less Greater LessOrEqual GreaterOrEqual) and the
// broadcasting logical ops on bool (And Or Xor). Not is in unary.cc.
#include "compute/vectorize.h"  // first: compile options for the loops below

#include "providers/cpu/math/math_kernels.h"

namespace ortlite {
namespace {

using math::BinaryKernel;
using math::NoAttrs;

#define ORTLITE_COMPARE_OP(NAME, EXPR)              \
  struct NAME : NoAttrs {                           \
    using NoAttrs::NoAttrs;                         \
    static constexpr double kCost = 1.0;            \
    template <typename C>                           \
    bool operator()(const C& a, const C& b) const { \
      return EXPR;                                  \
    }                                               \
  };

ORTLITE_COMPARE_OP(EqualOp, a == b)
ORTLITE_COMPARE_OP(LessOp, a < b)
ORTLITE_COMPARE_OP(GreaterOp, a > b)
ORTLITE_COMPARE_OP(LessOrEqualOp, a <= b)
ORTLITE_COMPARE_OP(GreaterOrEqualOp, a >= b)
// Bitwise on bools: && and || may skip reading b, so the loop could not be vectorized and
// branched on each element (And of 8x1x64x64 random masks: 42 us, onnxruntime 9).
ORTLITE_COMPARE_OP(AndOp, static_cast<bool>(a) & static_cast<bool>(b))
ORTLITE_COMPARE_OP(OrOp, static_cast<bool>(a) | static_cast<bool>(b))
ORTLITE_COMPARE_OP(XorOp, a != b)
#undef ORTLITE_COMPARE_OP

}  // namespace

void register_compare_logic_kernels(KernelRegistry& r) {
  constexpr unsigned kCmp = ew::kTNumeric;
  r.add_versions("Equal", {7, 11, 13, 19}, make_factory<BinaryKernel<EqualOp, ew::kTAll, true>>());
  r.add_versions("Less", {7, 9, 13}, make_factory<BinaryKernel<LessOp, kCmp, true>>());
  r.add_versions("Greater", {7, 9, 13}, make_factory<BinaryKernel<GreaterOp, kCmp, true>>());
  r.add_versions("LessOrEqual", {12, 16}, make_factory<BinaryKernel<LessOrEqualOp, kCmp, true>>());
  r.add_versions("GreaterOrEqual", {12, 16},
                 make_factory<BinaryKernel<GreaterOrEqualOp, kCmp, true>>());
  r.add_versions("And", {7}, make_factory<BinaryKernel<AndOp, ew::kTBool, true>>());
  r.add_versions("Or", {7}, make_factory<BinaryKernel<OrOp, ew::kTBool, true>>());
  r.add_versions("Xor", {7}, make_factory<BinaryKernel<XorOp, ew::kTBool, true>>());
}

}  // namespace ortlite
