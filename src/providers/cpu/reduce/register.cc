// register_reduce_kernels: the Reduce* family, ArgMax and ArgMin.
#include "providers/cpu/reduce/reduce_kernels.h"

namespace ortlite {

void register_reduce_kernels(KernelRegistry& r) {
  reduce::register_reduce_ops(r);
  reduce::register_arg_ops(r);
}

}  // namespace ortlite
