// ortlite._ortlite: module definition, multi-phase init, module-level functions.
#define ORTLITE_NUMPY_IMPORT
#include "python/numpy_api.h"

#include "ortlite/kernel.h"
#include "ortlite/provider.h"
#include "ortlite/session.h"
#include "python/errors.h"
#include "python/async_run.h"
#include "python/module_state.h"
#include "python/providers.h"
#include "python/session_options.h"
#include "python/util.h"

namespace ortlite::py {

namespace {

constexpr const char* kVersion = "0.1.0";

PyObject* get_available_providers(PyObject*, PyObject*) {
  return available_providers_list();
}

PyObject* get_all_providers(PyObject*, PyObject*) {
  return all_providers_list();
}

PyObject* get_device(PyObject*, PyObject*) {
  // onnxruntime says "GPU" for its CUDA build; ortlite says it when the CUDA provider is
  // usable here (this loads the CUDA library when it was built).
  bool gpu = false;
  try {
    gpu = provider_available("CUDAExecutionProvider");
  } catch (...) {
    gpu = false;
  }
  return PyUnicode_FromString(gpu ? "GPU" : "CPU");
}

PyObject* get_version_string(PyObject*, PyObject*) {
  return PyUnicode_FromString(kVersion);
}

PyObject* set_default_logger_severity(PyObject*, PyObject* arg) {
  const long v = PyLong_AsLong(arg);
  if (v == -1 && PyErr_Occurred()) return nullptr;
  if (v < 0 || v > 4) {
    PyErr_Format(PyExc_ValueError, "logger severity must be in 0..4, not %ld", v);
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* accept_int(PyObject*, PyObject* arg) {
  const long long v = PyLong_AsLongLong(arg);
  if (v == -1 && PyErr_Occurred()) return nullptr;
  Py_RETURN_NONE;
}

PyObject* noop(PyObject*, PyObject*) {
  Py_RETURN_NONE;
}

// (domain, op_type, since_version, until_version, provider) of every kernel compiled in.
PyObject* registered_ops(PyObject* module, PyObject*) {
  ModuleState* st = get_module_state(module);
  try {
    const auto regs = KernelRegistry::instance().registrations();
    Ref list = Ref::steal(PyList_New(0));
    if (!list) return nullptr;
    for (const auto& r : regs) {
      Ref item = Ref::steal(Py_BuildValue("(ssiis)", r.domain.c_str(), r.op_type.c_str(), r.since,
                                          r.until, r.provider.c_str()));
      if (!item || PyList_Append(list.get(), item.get()) < 0) return nullptr;
    }
    return list.release();
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

// (name, type string, shape) of each value, the shape as NodeArg.shape gives it (ints,
// dim_param strings, None for an unknown dim; None for no shape); `initializers` marks
// those that an initializer of the graph also defines (overridable ones).
PyObject* value_infos(const std::vector<ValueInfo>& values, const Graph& g) {
  Ref list = Ref::steal(PyList_New(0));
  if (!list) return nullptr;
  for (const ValueInfo& v : values) {
    Ref shape;
    if (v.type.has_shape) {
      shape = Ref::steal(PyList_New(0));
      if (!shape) return nullptr;
      for (const Dim& d : v.type.dims) {
        Ref dim = d.has_value        ? Ref::steal(PyLong_FromLongLong(d.value))
                  : !d.param.empty() ? Ref::steal(PyUnicode_FromString(d.param.c_str()))
                                     : Ref::borrow(Py_None);
        if (!dim || PyList_Append(shape.get(), dim.get()) < 0) return nullptr;
      }
    } else {
      shape = Ref::borrow(Py_None);
    }
    bool is_init = false;
    for (const auto& init : g.initializers) is_init = is_init || init.first == v.name;
    Ref item = Ref::steal(Py_BuildValue("(ssOO)", v.name.c_str(), v.type.to_string().c_str(),
                                        shape.get(), is_init ? Py_True : Py_False));
    if (!item || PyList_Append(list.get(), item.get()) < 0) return nullptr;
  }
  return list.release();
}

// A model's header, opsets and the registry's verdict on each node (ortlite info / check).
PyObject* describe_model(PyObject* module, PyObject* arg) {
  ModuleState* st = get_module_state(module);
  PyObject* encoded = nullptr;
  if (!PyUnicode_FSConverter(arg, &encoded)) return nullptr;
  Ref hold = Ref::steal(encoded);
  try {
    const std::string path(PyBytes_AS_STRING(encoded),
                           static_cast<size_t>(PyBytes_GET_SIZE(encoded)));
    const Model m = load_model_from_file(path);
    const ModelReport report = ortlite::describe_model(m);
    Ref opsets = Ref::steal(PyList_New(0));
    if (!opsets) return nullptr;
    for (const OpsetImport& o : m.opset_imports) {
      Ref item =
          Ref::steal(Py_BuildValue("(sL)", o.domain.c_str(), static_cast<long long>(o.version)));
      if (!item || PyList_Append(opsets.get(), item.get()) < 0) return nullptr;
    }
    Ref nodes = Ref::steal(PyList_New(0));
    if (!nodes) return nullptr;
    for (const NodeReport& n : report.nodes) {
      Ref item = Ref::steal(Py_BuildValue("(ssssLs)", n.scope.c_str(), n.name.c_str(),
                                          n.domain.c_str(), n.op_type.c_str(),
                                          static_cast<long long>(n.opset), n.problem.c_str()));
      if (!item || PyList_Append(nodes.get(), item.get()) < 0) return nullptr;
    }
    Ref functions = Ref::steal(PyList_New(0));
    if (!functions) return nullptr;
    for (const Function& f : m.functions) {
      Ref item = Ref::steal(Py_BuildValue("(ss)", f.domain.c_str(), f.name.c_str()));
      if (!item || PyList_Append(functions.get(), item.get()) < 0) return nullptr;
    }
    Ref inputs = Ref::steal(value_infos(m.graph.inputs, m.graph));
    if (!inputs) return nullptr;
    Ref outputs = Ref::steal(value_infos(m.graph.outputs, m.graph));
    if (!outputs) return nullptr;
    Ref metadata = Ref::steal(PyDict_New());
    if (!metadata) return nullptr;
    for (const auto& [k, v] : m.metadata_props) {
      Ref value =
          Ref::steal(PyUnicode_DecodeUTF8(v.data(), static_cast<Py_ssize_t>(v.size()), "replace"));
      if (!value || PyDict_SetItemString(metadata.get(), k.c_str(), value.get()) < 0)
        return nullptr;
    }
    return Py_BuildValue(
        "{s:O,s:O,s:O,s:L,s:s,s:s,s:s,s:L,s:s,s:O,s:O,s:O,s:n,s:n}", "inputs", inputs.get(),
        "outputs", outputs.get(), "metadata", metadata.get(), "ir_version",
        static_cast<long long>(m.ir_version), "producer_name", m.producer_name.c_str(),
        "producer_version", m.producer_version.c_str(), "domain", m.domain.c_str(), "model_version",
        static_cast<long long>(m.model_version), "graph_name", m.graph.name.c_str(),
        "opset_imports", opsets.get(), "functions", functions.get(), "nodes", nodes.get(),
        "initializers", static_cast<Py_ssize_t>(report.initializers), "initializer_bytes",
        static_cast<Py_ssize_t>(report.initializer_bytes));
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

// Called once by ortlite/_enums.py (imported on first use), so that SessionOptions returns
// enum members.
PyObject* register_enums(PyObject* module, PyObject* args) {
  PyObject* graph_opt = nullptr;
  PyObject* exec_mode = nullptr;
  if (!PyArg_ParseTuple(args, "OO:_register_enums", &graph_opt, &exec_mode)) return nullptr;
  ModuleState* st = get_module_state(module);
  Py_XSETREF(st->graph_optimization_level_enum, Py_NewRef(graph_opt));
  Py_XSETREF(st->execution_mode_enum, Py_NewRef(exec_mode));
  Py_RETURN_NONE;
}

// Called by ortlite._logging: the hook each new session is given to (None: no logging).
PyObject* set_log_sink(PyObject* module, PyObject* sink) {
  if (sink != Py_None && !PyCallable_Check(sink)) {
    PyErr_SetString(PyExc_TypeError, "_set_log_sink expects a callable or None");
    return nullptr;
  }
  ModuleState* st = get_module_state(module);
  Py_XSETREF(st->log_sink, sink == Py_None ? nullptr : Py_NewRef(sink));
  Py_RETURN_NONE;
}

PyMethodDef module_methods[] = {
    {"get_available_providers", get_available_providers, METH_NOARGS,
     PyDoc_STR("get_available_providers()\n--\n\nExecution providers this build can use.")},
    {"get_all_providers", get_all_providers, METH_NOARGS,
     PyDoc_STR("get_all_providers()\n--\n\nEvery execution provider name onnxruntime knows.")},
    {"get_device", get_device, METH_NOARGS,
     PyDoc_STR("get_device()\n--\n\nThe default device: 'GPU' when the CUDA provider is usable, "
               "else 'CPU'.")},
    {"set_global_thread_pool_sizes", as_cfunc(set_global_thread_pool_sizes),
     METH_VARARGS | METH_KEYWORDS,
     PyDoc_STR(
         "set_global_thread_pool_sizes(intra_op_num_threads=0, inter_op_num_threads=0)\n"
         "--\n\n"
         "Creates the process-wide thread pool that sessions with\n"
         "SessionOptions.use_per_session_threads = False run on (intra_op_num_threads\n"
         "threads, 0: one per core, at most 8; inter_op_num_threads is recorded: ortlite runs\n"
         "nodes in order). Once only: a second call is Fail. From then on sessions must set\n"
         "use_per_session_threads = False, as in onnxruntime.")},
    {"get_version_string", get_version_string, METH_NOARGS,
     PyDoc_STR("get_version_string()\n--\n\nortlite's version.")},
    {"set_default_logger_severity", set_default_logger_severity, METH_O,
     PyDoc_STR("set_default_logger_severity(severity, /)\n--\n\n"
               "Checks a default logger severity (0..4); ortlite.set_default_logger_severity\n"
               "(ortlite/_logging.py) records it.")},
    {"set_default_logger_verbosity", accept_int, METH_O,
     PyDoc_STR("set_default_logger_verbosity(verbosity, /)\n--\n\n"
               "Accepted for onnxruntime compatibility; ortlite logs nothing.")},
    {"set_seed", accept_int, METH_O,
     PyDoc_STR("set_seed(seed, /)\n--\n\n"
               "Accepted for onnxruntime compatibility; it has no effect: random operators\n"
               "without a seed attribute draw new values on every run.")},
    {"enable_telemetry_events", noop, METH_NOARGS,
     PyDoc_STR("enable_telemetry_events()\n--\n\nA no-op: ortlite sends no telemetry.")},
    {"disable_telemetry_events", noop, METH_NOARGS,
     PyDoc_STR("disable_telemetry_events()\n--\n\nA no-op: ortlite sends no telemetry.")},
    {"_register_enums", register_enums, METH_VARARGS,
     PyDoc_STR("_register_enums(graph_optimization_level, execution_mode, /)\n--\n\n"
               "Internal: the IntEnum classes SessionOptions returns.")},
    {"_set_log_sink", set_log_sink, METH_O,
     PyDoc_STR("_set_log_sink(sink, /)\n--\n\n"
               "Internal: the callable each new session is passed to, or None.")},
    {"_registered_ops", registered_ops, METH_NOARGS,
     PyDoc_STR("_registered_ops($module, /)\n--\n\n"
               "(domain, op_type, since_version, until_version, provider) of every kernel.")},
    {"_describe_model", describe_model, METH_O,
     PyDoc_STR("_describe_model($module, path, /)\n--\n\n"
               "The model's header, inputs, outputs, metadata, opset imports, local\n"
               "functions, initializer count and bytes, and each node as\n"
               "(scope, name, domain, op_type, opset, problem):\n"
               "problem is '' when the CPU registry has a kernel for the node.")},
    {"_async_shutdown", async_shutdown, METH_NOARGS,
     PyDoc_STR("_async_shutdown($module, /)\n--\n\n"
               "Internal (atexit): stops accepting run_async calls, cancels queued runs,\n"
               "waits for running ones to deliver their results.")},
    {"_async_in_flight", async_in_flight, METH_NOARGS,
     PyDoc_STR("_async_in_flight($module, /)\n--\n\nInternal: async runs queued or running.")},
    {"_cuda_info", cuda_info, METH_NOARGS,
     PyDoc_STR("_cuda_info($module, /)\n--\n\n"
               "The CUDA library's path, whether it loaded, the devices, or why not.")},
    {"_cuda_memory_stats", cuda_memory_stats, METH_O,
     PyDoc_STR("_cuda_memory_stats($module, device, /)\n--\n\n"
               "(reserved, in_use) bytes of the device's caching allocator.")},
    {"_cuda_set_allow_tf32", cuda_set_allow_tf32, METH_O,
     PyDoc_STR("_cuda_set_allow_tf32($module, allow, /)\n--\n\n"
               "Lets fp32 GEMMs and convolutions use TF32 tensor cores (default off).")},
    {nullptr, nullptr, 0, nullptr},
};

int module_exec(PyObject* module) {
  if (PyArray_ImportNumPyAPI() < 0) return -1;
  if (errors_setup(module) < 0) return -1;
  if (numpy_bridge_setup_types(module) < 0) return -1;
  if (ortvalue_setup_types(module) < 0) return -1;
  if (run_options_setup_types(module) < 0) return -1;
  if (session_options_setup_types(module) < 0) return -1;
  if (node_arg_setup_types(module) < 0) return -1;
  if (session_setup_types(module) < 0) return -1;
  if (io_binding_setup_types(module) < 0) return -1;
  if (sparse_tensor_setup_types(module) < 0) return -1;
  if (PyModule_AddStringConstant(module, "__version__", kVersion) < 0) return -1;
  if (PyModule_AddIntConstant(module, "NEWEST_OPSET", kNewestOpset) < 0) return -1;
  async_reset();
  return 0;
}

int module_traverse(PyObject* module, visitproc visit, void* arg) {
  ModuleState* st = get_module_state(module);
  Py_VISIT(st->error_base);
  for (PyObject* e : st->errors) Py_VISIT(e);
  Py_VISIT(st->session_type);
  Py_VISIT(st->session_options_type);
  Py_VISIT(st->run_options_type);
  Py_VISIT(st->ortvalue_type);
  Py_VISIT(st->node_arg_type);
  Py_VISIT(st->model_metadata_type);
  Py_VISIT(st->buffer_owner_type);
  Py_VISIT(st->io_binding_type);
  Py_VISIT(st->sparse_tensor_type);
  Py_VISIT(st->sparse_coo_view_type);
  Py_VISIT(st->sparse_csr_view_type);
  Py_VISIT(st->graph_optimization_level_enum);
  Py_VISIT(st->execution_mode_enum);
  Py_VISIT(st->log_sink);
  return 0;
}

int module_clear(PyObject* module) {
  ModuleState* st = get_module_state(module);
  Py_CLEAR(st->error_base);
  for (PyObject*& e : st->errors) Py_CLEAR(e);
  Py_CLEAR(st->session_type);
  Py_CLEAR(st->session_options_type);
  Py_CLEAR(st->run_options_type);
  Py_CLEAR(st->ortvalue_type);
  Py_CLEAR(st->node_arg_type);
  Py_CLEAR(st->model_metadata_type);
  Py_CLEAR(st->buffer_owner_type);
  Py_CLEAR(st->io_binding_type);
  Py_CLEAR(st->sparse_tensor_type);
  Py_CLEAR(st->sparse_coo_view_type);
  Py_CLEAR(st->sparse_csr_view_type);
  Py_CLEAR(st->graph_optimization_level_enum);
  Py_CLEAR(st->execution_mode_enum);
  Py_CLEAR(st->log_sink);
  return 0;
}

void module_free(void* module) {
  module_clear(static_cast<PyObject*>(module));
}

PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, as_slot(module_exec)},
    {0, nullptr},
};

}  // namespace

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "_ortlite",
    PyDoc_STR("ortlite's native core: a lean ONNX runtime with onnxruntime's Python API."),
    sizeof(ModuleState),
    module_methods,
    module_slots,
    module_traverse,
    module_clear,
    module_free,
};

}  // namespace ortlite::py

PyMODINIT_FUNC PyInit__ortlite(void) {
  return PyModuleDef_Init(&ortlite::py::module_def);
}
