// float16 nodes computed in float (graph_optimization_level >= 1), run by optimize_graph
// (optimizer.cc) on the main graph after constant folding.
#pragma once

#include "ortlite/model.h"

namespace ortlite {

// A default-domain node of an arithmetic op (MatMul, Gemm, Conv, the elementwise ops,
// pools, normalizations, Softmax, reductions) with float16 operands runs on float copies of
// them: constant float16 initializers are converted to float once, here; other float16
// operands get a Cast to float. Each float16 output it writes becomes a float value, and a
// Cast back to float16 keeps the float16 value under its name for whatever still reads it
// (graph outputs, other nodes, subgraphs). A reader that is itself rewritten reads the float
// value directly, so a chain of such nodes skips the roundings to float16 between them, as
// onnxruntime's inserted Casts and their removal do; a float16 Cast of a float value counts
// as that float value. Shape and copy ops (Reshape, Transpose, Concat, Slice, ...) run in
// float when an operand already has a float version. Casts left without readers are
// removed. Graph inputs and outputs keep their names and types.
void compute_fp16_in_fp32(Model& model);

}  // namespace ortlite
