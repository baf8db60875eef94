// register_reduce_kernels: the Reduce* family, ArgMax and ArgMin.
//
// The reduction operators, one per line with the file that holds its kernel
// (tests/test_registry.py checks that every registered CPU op is listed here next to a
// file that exists):
//
//   ReduceSum        reduce_kernel.cc
//   ReduceMean       reduce_kernel.cc
//   ReduceMax        reduce_kernel.cc
//   ReduceMin        reduce_kernel.cc
//   ReduceProd       reduce_kernel.cc
//   ReduceL1         reduce_kernel.cc
//   ReduceL2         reduce_kernel.cc
//   ReduceLogSum     reduce_kernel.cc
//   ReduceLogSumExp  reduce_kernel.cc
//   ReduceSumSquare  reduce_kernel.cc
//   ArgMax           argminmax.cc
//   ArgMin           argminmax.cc

#include "providers/cpu/reduce/reduce_kernels.h"

namespace ortlite {

void register_reduce_kernels(KernelRegistry& r) {
  reduce::register_reduce_ops(r);
  reduce::register_arg_ops(r);
}

}  // namespace ortlite
