// register_controlflow_kernels: the control-flow CPU kernels (default ONNX domain).
//
// The control-flow operators, one per line with the file that holds its kernel
// (tests/test_registry.py checks that every registered CPU op is listed here next to a
// file that exists):
//
//   If           control_flow.cc
//   Loop         control_flow.cc
//   Scan         control_flow.cc
//   SequenceMap  control_flow.cc

#include "ortlite/kernel.h"

namespace ortlite {

void register_control_flow_kernels(KernelRegistry& r);  // control_flow.cc

void register_controlflow_kernels(KernelRegistry& r) {
  register_control_flow_kernels(r);
}

}  // namespace ortlite
