#include "providers/cpu/math/math_kernels.h"

namespace ortlite {

namespace math {

void add_versions(KernelRegistry& r, const char* op, std::initializer_list<int> since,
                  const KernelFactory& factory) {
  const int* v = since.begin();
  const size_t n = since.size();
  for (size_t i = 0; i < n; ++i) {
    const int until = i + 1 < n ? v[i + 1] - 1 : kMaxOpset;
    r.add("", op, v[i], until, factory);
  }
}

}  // namespace math

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
