// The pieces of one run, shared by InferenceSession.run / run_with_ort_values and the
// async runs (async_run.cc):
//   prepare_run (GIL held)  -> RunInputs: core feeds over Python memory + the references
//                              that keep that memory alive
//   run_without_gil         -> Session::run with the GIL released
//   outputs_to_numpy / outputs_to_ortvalues (GIL held) -> Python results
// All throw ortlite::Error or PythonErrorSet; translate with ORTLITE_PY_CATCH.
#pragma once

#include <Python.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ortlite/session.h"
#include "python/module_state.h"
#include "python/util.h"

namespace ortlite::py {

// Everything a run reads, converted while the GIL is held. The core never sees `held`:
// it keeps the feeds' memory (arrays, contiguous copies, OrtValues) alive for as long as
// this object lives, so destroy it with the GIL held and only after the outputs were
// converted (an output may share memory with a feed until then).
struct RunInputs {
  std::vector<std::pair<std::string, Tensor>> feeds;
  std::vector<std::string> output_names;  // explicit: every graph output when none was asked
  std::shared_ptr<RunConfig> run_config;  // null without run options
  std::vector<Ref> held;
};

// Checks and converts run()'s arguments:
//  - input_feed must be a dict of str -> value (TypeError). Values are numpy arrays (any
//    layout or byte order; a copy is made when needed, the caller's array is never
//    written), lists and scalars (converted to the declared element type) or OrtValues;
//    with `ortvalues_only` they must be OrtValues.
//  - missing required inputs: ValueError "Required inputs ([...]) are missing from input
//    feed ([...])." as onnxruntime words it.
//  - unknown input names, wrong element types, ranks or static dims, unknown output names:
//    InvalidArgument from the core's checks.
//  - output_names: None or empty = every output; else a sequence of str.
//  - run_options: None or a RunOptions.
void prepare_run(ModuleState* st, const Session& sess, PyObject* output_names, PyObject* input_feed,
                 PyObject* run_options, bool ortvalues_only, RunInputs* in);

// Session::run with the GIL released around it (the caller holds the GIL on entry and gets
// it back on return, also when this throws).
std::vector<Tensor> run_without_gil(const Session& sess, const RunInputs& in);

// A list of numpy arrays: zero-copy views for outputs in memory this run allocated and
// nothing else references (base: a buffer owner), copies for everything else.
Ref outputs_to_numpy(ModuleState* st, std::vector<Tensor> outs);
// A list of OrtValues; outputs not exclusively owned by the run are copied.
Ref outputs_to_ortvalues(ModuleState* st, std::vector<Tensor> outs);

}  // namespace ortlite::py
