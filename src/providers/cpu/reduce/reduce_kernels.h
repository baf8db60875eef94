// Internal registration hooks of src/providers/cpu/reduce, called by register_reduce_kernels
// (register.cc).
#pragma once

#include "ortlite/kernel.h"

namespace ortlite {
namespace reduce {

void register_reduce_ops(KernelRegistry& r);  // reduce_kernel.cc: Reduce*
void register_arg_ops(KernelRegistry& r);     // argminmax.cc: ArgMax, ArgMin

}  // namespace reduce
}  // namespace ortlite
