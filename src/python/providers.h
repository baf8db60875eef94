// Execution provider names and the `providers` / `provider_options` arguments.
#pragma once

#include <Python.h>

#include "ortlite/session.h"
#include "python/module_state.h"
#include "python/util.h"

namespace ortlite::py {

struct ProviderChoice {
  Ref names;    // list of str, in order of preference
  Ref options;  // dict: name -> dict of str -> str
};

// Normalizes InferenceSession's providers / provider_options as onnxruntime does
// (names or (name, options dict) tuples; options values become str), then:
//   - an unknown name: ValueError naming it and the available providers;
//   - a known provider this build or machine cannot run (CUDAExecutionProvider without a
//     device, ...): a UserWarning saying why, and it is skipped; when nothing else was
//     requested the session runs on the CPU, as onnxruntime falls back;
//   - None or []: CPUExecutionProvider.
// Throws PythonErrorSet / ortlite::Error.
ProviderChoice choose_providers(ModuleState* st, PyObject* providers, PyObject* provider_options);
// Copies the chosen providers and their options into the session's config.
void provider_config(const ProviderChoice& choice, SessionConfig* config);

// get_all_providers() / get_available_providers().
PyObject* all_providers_list();
PyObject* available_providers_list();

// Module functions of the CUDA provider (module.cc's table), through the core's provider
// interface: _cuda_info(), _cuda_memory_stats(device), _cuda_set_allow_tf32(bool).
PyObject* cuda_info(PyObject* module, PyObject*);
PyObject* cuda_memory_stats(PyObject* module, PyObject* arg);
PyObject* cuda_set_allow_tf32(PyObject* module, PyObject* arg);

}  // namespace ortlite::py
