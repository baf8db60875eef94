// apply_act over floats, compiled for each vector ISA (target clones, the widest the CPU has
// chosen at load): for callers built for the baseline, where apply_act's loops would be
// vectorized for SSE2 only.
#include "compute/activation.h"
#include "compute/simd.h"

namespace ortlite {
namespace nn {

ORTLITE_NN_CLONES512 void apply_act_f32(const ActSpec& a, float* y, int64_t n) {
  apply_act(a, y, n);
}

}  // namespace nn
}  // namespace ortlite
