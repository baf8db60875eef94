#include "providers/cpu/math/math_kernels.h"

namespace ortlite {

void register_math_kernels(KernelRegistry& r) {
  register_binary_kernels(r);
  register_unary_kernels(r);
  register_activation_kernels(r);
  register_compare_logic_kernels(r);
  register_variadic_kernels(r);
  register_clip_kernels(r);
  register_where_kernels(r);
  register_cumsum_conf_kernels(r);
  register_einsum_conf_kernels(r);
  register_random_conf_kernels(r);
  register_signal_conf_kernels(r);
}

}  // namespace ortlite
