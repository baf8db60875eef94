// register_sequence_kernels: the sequence and optional CPU kernels (default ONNX domain).
//
// The sequence and optional operators, one per line with the file that holds its kernel
// (tests/test_registry.py checks that every registered CPU op is listed here next to a
// file that exists):
//
//   SequenceEmpty       sequence_ops.cc
//   SequenceConstruct   sequence_ops.cc
//   SequenceInsert      sequence_ops.cc
//   SequenceAt          sequence_ops.cc
//   SequenceErase       sequence_ops.cc
//   SequenceLength      sequence_ops.cc
//   SplitToSequence     sequence_ops.cc
//   ConcatFromSequence  sequence_ops.cc
//   Optional            sequence_ops.cc
//   OptionalHasElement  sequence_ops.cc
//   OptionalGetElement  sequence_ops.cc

#include "ortlite/kernel.h"

namespace ortlite {

void register_sequence_ops_kernels(KernelRegistry& r);  // sequence_ops.cc

void register_sequence_kernels(KernelRegistry& r) {
  register_sequence_ops_kernels(r);
}

}  // namespace ortlite
