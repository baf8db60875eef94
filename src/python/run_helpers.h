// The pieces of one run, shared by InferenceSession.run / run_with_ort_values and the
// async runs (async_run.cc):
//   prepare_run (GIL held)  -> RunInputs: core feeds over Python memory + the references
//                              that keep that memory alive
//   run_without_gil         -> Session::run with the GIL released
//   outputs_to_numpy / outputs_to_ortvalues (GIL held) -> Python results
// All throw ortlite::Error or PythonErrorSet; translate with ORTLITE_PY_CATCH.
#pragma once

#include <Python.h>

#include <functional>
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
  Feeds feeds;
  std::vector<std::string> output_names;  // empty: every graph output
  std::shared_ptr<RunConfig> run_config;  // null without run options
  std::vector<Ref> held;
};

// Converts run()'s arguments (the core checks them: Session::check_run, inside run(), or
// here when `check_now`, for an async run):
//  - input_feed must be a dict of str -> value (TypeError). Values are numpy arrays (any
//    layout or byte order; a copy is made when needed, the caller's array is never
//    written), lists and scalars (converted to the declared element type) or OrtValues;
//    with `ortvalues_only` they must be OrtValues. An input declared as a sequence takes a
//    list (or tuple) of arrays; one declared optional also takes None.
//  - missing required inputs: MissingInputsError, which the binding raises as onnxruntime
//    does: ValueError "Required inputs ([...]) are missing from input feed ([...]).".
//  - unknown input names, wrong element types, ranks or static dims, unknown output names:
//    InvalidArgument from the core's checks.
//  - output_names: None or empty = every output; else a sequence of str.
//  - run_options: None or a RunOptions.
void prepare_run(ModuleState* st, const Session& sess, PyObject* output_names, PyObject* input_feed,
                 PyObject* run_options, bool ortvalues_only, bool check_now, RunInputs* in);

// Session::run with the GIL released around it (the caller holds the GIL on entry and gets
// it back on return, also when this throws). The feeds' values are moved into the run;
// `in.held` keeps the objects behind them alive.
// `device_outputs`: outputs computed on a CUDA device stay there (run_with_ort_values).
std::vector<Value> run_without_gil(const Session& sess, RunInputs& in, bool device_outputs = false);

// A list with one entry per output: a numpy array for a tensor (a zero-copy view when its
// memory was allocated by this run and nothing else references it, base: a buffer owner;
// a copy otherwise), a list of arrays for a sequence, a list of dicts {key: float} for a
// sequence of maps (ZipMap), None for an empty optional. An output numpy cannot represent
// (say an empty [0, 2^62] float tensor) raises Fail; `label(i)`, when given, names output i
// in that message ("output #i" otherwise).
Ref outputs_to_numpy(ModuleState* st, std::vector<Value> outs,
                     const std::function<std::string(size_t)>& label = {});
// A list of OrtValues; outputs not exclusively owned by the run are copied. A sequence,
// map or optional output raises NotImplemented (OrtValue holds tensors only). Output i is
// returned as a COO SparseTensor OrtValue when sparse_names[i] is not empty (its name: the
// graph output is declared sparse_tensor).
Ref outputs_to_ortvalues(ModuleState* st, std::vector<Value> outs,
                         const std::vector<std::string>& sparse_names = {});

}  // namespace ortlite::py
