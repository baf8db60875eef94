#include "python/session.h"

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <structmember.h>
#include <sys/stat.h>

#include "ortlite/model.h"
#include "ortlite/status.h"
#include "python/async_run.h"
#include "python/errors.h"
#include "python/gil.h"
#include "python/io_binding.h"
#include "python/node_arg.h"
#include "python/numpy_bridge.h"
#include "python/providers.h"
#include "python/run_helpers.h"
#include "python/session_options.h"
#include "python/util.h"

namespace ortlite::py {

namespace {

SessionObject* as_sess(PyObject* o) {
  return reinterpret_cast<SessionObject*>(o);
}

// Where the model comes from: a file path or a private copy of the model bytes.
struct ModelSource {
  std::string path;
  BufferPtr bytes;
};

ModelSource model_source(PyObject* src) {
  ModelSource ms;
  if (PyBytes_Check(src) || PyByteArray_Check(src) || PyMemoryView_Check(src)) {
    Py_buffer view;
    if (PyObject_GetBuffer(src, &view, PyBUF_C_CONTIGUOUS) < 0) throw PythonErrorSet{};
    try {
      ms.bytes = BufferPtr::adopt(Buffer::allocate(static_cast<size_t>(view.len)));
      if (view.len > 0) std::memcpy(ms.bytes->data(), view.buf, static_cast<size_t>(view.len));
    } catch (...) {
      PyBuffer_Release(&view);
      throw;
    }
    PyBuffer_Release(&view);
    return ms;
  }
  if (!PyUnicode_Check(src) &&
      !PyObject_HasAttrString(reinterpret_cast<PyObject*>(Py_TYPE(src)), "__fspath__")) {
    PyErr_Format(PyExc_TypeError,
                 "path_or_bytes must be a str, os.PathLike, bytes, bytearray or memoryview, "
                 "not %.100s",
                 Py_TYPE(src)->tp_name);
    throw PythonErrorSet{};
  }
  PyObject* encoded = nullptr;
  if (!PyUnicode_FSConverter(src, &encoded)) throw PythonErrorSet{};
  Ref hold = Ref::steal(encoded);
  ms.path.assign(PyBytes_AS_STRING(encoded), static_cast<size_t>(PyBytes_GET_SIZE(encoded)));
  return ms;
}

// Loads the model, creates the core session with `options` (the session's own
// SessionOptions copy) and `choice`, and installs them in `so`, replacing what it held.
void create_core(ModuleState* st, SessionObject* so, ModelSource source, Ref options,
                 ProviderChoice choice, bool fresh) {
  Ref held;
  SessionConfig config = session_options_to_config(st, options.get(), &held);
  provider_config(choice, &config);
  LoadViews views;
  const LoadOptions load = session_options_load_options(st, options.get(), &views);

  const bool from_file = !source.bytes;
  Model model;
  without_gil([&] {
    model = source.bytes ? load_model_from_buffer(std::move(source.bytes), "", load)
                         : load_model_from_file(source.path, load);
  });
  session_options_apply_model_config(st, options.get(), model.metadata_props, &config);
  Ref external;
  if (from_file) {
    external = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(model.external_files.size())));
    if (!external) throw PythonErrorSet{};
    for (size_t i = 0; i < model.external_files.size(); ++i) {
      const Model::ExternalFile& f = model.external_files[i];
      PyObject* item = Py_BuildValue(
          "(N(LLK))",
          PyUnicode_DecodeFSDefaultAndSize(f.path.data(), static_cast<Py_ssize_t>(f.path.size())),
          static_cast<long long>(f.size), static_cast<long long>(f.mtime_ns),
          static_cast<unsigned long long>(f.ino));
      if (!item) throw PythonErrorSet{};
      PyTuple_SET_ITEM(external.get(), static_cast<Py_ssize_t>(i), item);
    }
  }
  std::shared_ptr<const Session> created;
  without_gil([&] { created = Session::create(std::move(model), config); });
  // Another thread may have initialized this object while the GIL was released.
  if (fresh && so->sess)
    ORTLITE_THROW(kModelLoaded, "this InferenceSession already has a model loaded");

  Py_XSETREF(so->sess_options, options.release());
  Py_XSETREF(so->held_initializers, held.release());
  Py_XSETREF(so->providers, choice.names.release());
  Py_XSETREF(so->provider_options, choice.options.release());
  so->sess = std::move(created);
  Py_XSETREF(so->source_external, external.release());
  if (st->log_sink) {
    // The logger callback hears of the new session; its failure never fails the session.
    Ref r = Ref::steal(PyObject_CallOneArg(st->log_sink, reinterpret_cast<PyObject*>(so)));
    if (!r) PyErr_WriteUnraisable(st->log_sink);
  }
}

// What pickling needs to know of the source: the bytes as a read-only view (the buffer
// is the one the core session keeps, so this costs no copy), or the path and what the
// file was when it was loaded, so that pickling notices a file changed since.
void model_source_record(ModuleState* st, const ModelSource& ms, Ref* path, Ref* stat_tuple,
                         Ref* bytes) {
  if (ms.bytes) {
    const int64_t n = static_cast<int64_t>(ms.bytes->size());
    if (n == 0) {
      *bytes = Ref::steal(PyBytes_FromStringAndSize(nullptr, 0));
    } else {
      *bytes = tensor_to_numpy_owned(st, Tensor(DataType::kUInt8, Shape{n}, ms.bytes));
      if (bytes->get())
        PyArray_CLEARFLAGS(reinterpret_cast<PyArrayObject*>(bytes->get()), NPY_ARRAY_WRITEABLE);
    }
    if (!bytes->get()) throw PythonErrorSet{};
    return;
  }
  *path = Ref::steal(
      PyUnicode_DecodeFSDefaultAndSize(ms.path.data(), static_cast<Py_ssize_t>(ms.path.size())));
  if (!path->get()) throw PythonErrorSet{};
  struct stat sb;
  if (::stat(ms.path.c_str(), &sb) != 0) return;  // the load reports a missing file
  const long long mtime_ns = static_cast<long long>(sb.st_mtim.tv_sec) * 1000000000LL +
                             static_cast<long long>(sb.st_mtim.tv_nsec);
  *stat_tuple = Ref::steal(Py_BuildValue("(LLK)", static_cast<long long>(sb.st_size), mtime_ns,
                                         static_cast<unsigned long long>(sb.st_ino)));
  if (!stat_tuple->get()) throw PythonErrorSet{};
}

// --- type slots -----------------------------------------------------------------------------

PyObject* session_new(PyTypeObject* tp, PyObject*, PyObject*) {
  PyObject* self = tp->tp_alloc(tp, 0);
  if (!self) return nullptr;
  new (&as_sess(self)->sess) std::shared_ptr<const Session>();
  return self;
}

int session_init(PyObject* self, PyObject* args, PyObject* kwds) {
  ModuleState* st = state_of(self);
  if (!st) return -1;
  static const char* kwlist[] = {"path_or_bytes", "sess_options", "providers", "provider_options",
                                 nullptr};
  // onnxruntime's extra keyword arguments (disabled_optimizers, read_config_from_model,
  // ...) are accepted and ignored, as onnxruntime ignores unknown ones.
  Ref known;
  if (kwds) {
    known = Ref::steal(PyDict_New());
    if (!known) return -1;
    for (int i = 0; kwlist[i]; ++i) {
      PyObject* v = PyDict_GetItemString(kwds, kwlist[i]);
      if (v && PyDict_SetItemString(known.get(), kwlist[i], v) < 0) return -1;
    }
  }
  PyObject* path_or_bytes = nullptr;
  PyObject* sess_options = Py_None;
  PyObject* providers = Py_None;
  PyObject* provider_options = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, known.get(), "O|OOO:InferenceSession",
                                   const_cast<char**>(kwlist), &path_or_bytes, &sess_options,
                                   &providers, &provider_options))
    return -1;
  SessionObject* so = as_sess(self);
  try {
    if (so->sess) ORTLITE_THROW(kModelLoaded, "this InferenceSession already has a model loaded");
    if (sess_options != Py_None && !session_options_check(st, sess_options)) {
      PyErr_Format(PyExc_TypeError, "sess_options must be a SessionOptions or None, not %.100s",
                   Py_TYPE(sess_options)->tp_name);
      throw PythonErrorSet{};
    }
    ProviderChoice choice = choose_providers(st, providers, provider_options);
    ModelSource source = model_source(path_or_bytes);
    Ref source_path, source_stat, source_bytes;
    model_source_record(st, source, &source_path, &source_stat, &source_bytes);
    Ref options = session_options_copy(st, sess_options == Py_None ? nullptr : sess_options);
    Ref path;
    if (!source.bytes) {
      path = Ref::steal(PyBytes_FromStringAndSize(source.path.data(),
                                                  static_cast<Py_ssize_t>(source.path.size())));
      if (!path) throw PythonErrorSet{};
    }
    create_core(st, so, std::move(source), std::move(options), std::move(choice), true);
    Py_XSETREF(so->model_path, path.release());
    Py_XSETREF(so->source_path, source_path.release());
    Py_XSETREF(so->source_stat, source_stat.release());
    Py_XSETREF(so->source_bytes, source_bytes.release());
    return 0;
  }
  ORTLITE_PY_CATCH(st, -1)
}

int session_traverse(PyObject* self, visitproc visit, void* arg) {
  SessionObject* so = as_sess(self);
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(so->sess_options);
  Py_VISIT(so->held_initializers);
  Py_VISIT(so->providers);
  Py_VISIT(so->provider_options);
  Py_VISIT(so->model_path);
  Py_VISIT(so->source_path);
  Py_VISIT(so->source_stat);
  Py_VISIT(so->source_bytes);
  Py_VISIT(so->source_external);
  return 0;
}

int session_clear(PyObject* self) {
  SessionObject* so = as_sess(self);
  // The core session goes first: it may borrow the memory of held_initializers.
  so->sess.reset();
  Py_CLEAR(so->sess_options);
  Py_CLEAR(so->held_initializers);
  Py_CLEAR(so->providers);
  Py_CLEAR(so->provider_options);
  Py_CLEAR(so->model_path);
  Py_CLEAR(so->source_path);
  Py_CLEAR(so->source_stat);
  Py_CLEAR(so->source_bytes);
  Py_CLEAR(so->source_external);
  return 0;
}

void session_dealloc(PyObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  if (as_sess(self)->weakreflist) PyObject_ClearWeakRefs(self);
  session_clear(self);
  as_sess(self)->sess.~shared_ptr();
  tp->tp_free(self);
  Py_DECREF(tp);
}

// --- methods --------------------------------------------------------------------------------

std::shared_ptr<const Session> loaded(ModuleState*, PyObject* self) {
  return session_shared(self);
}

PyObject* node_arg_list(ModuleState* st, const std::vector<ValueInfo>& infos) {
  Ref list = Ref::steal(PyList_New(static_cast<Py_ssize_t>(infos.size())));
  if (!list) throw PythonErrorSet{};
  for (size_t i = 0; i < infos.size(); ++i)
    PyList_SET_ITEM(list.get(), static_cast<Py_ssize_t>(i), node_arg_new(st, infos[i]).release());
  return list.release();
}

PyObject* session_get_inputs(PyObject* self, PyObject*) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  try {
    return node_arg_list(st, loaded(st, self)->inputs());
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* session_get_outputs(PyObject* self, PyObject*) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  try {
    return node_arg_list(st, loaded(st, self)->outputs());
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* session_get_overridable_initializers(PyObject* self, PyObject*) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  try {
    return node_arg_list(st, loaded(st, self)->overridable_initializers());
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* session_get_modelmeta(PyObject* self, PyObject*) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  try {
    return model_metadata_new(st, loaded(st, self)->model()).release();
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* session_get_providers(PyObject* self, PyObject*) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  try {
    loaded(st, self);
    return PySequence_List(as_sess(self)->providers);
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* session_get_provider_options(PyObject* self, PyObject*) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  try {
    loaded(st, self);
    // A deep copy: callers may change what they get.
    PyObject* src = as_sess(self)->provider_options;
    Ref out = Ref::steal(PyDict_New());
    if (!out) throw PythonErrorSet{};
    Py_ssize_t pos = 0;
    PyObject* key = nullptr;
    PyObject* value = nullptr;
    while (PyDict_Next(src, &pos, &key, &value)) {
      Ref inner = Ref::steal(PyDict_Copy(value));
      if (!inner || PyDict_SetItem(out.get(), key, inner.get()) < 0) throw PythonErrorSet{};
    }
    return out.release();
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* session_get_session_options(PyObject* self, PyObject*) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  try {
    loaded(st, self);
    return Py_NewRef(as_sess(self)->sess_options);
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

// (output_names, input_feed, run_options=None) of a vectorcall, without building an args
// tuple or kwargs dict: run() is the per-call path.
bool parse_run_args(const char* fname, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                    PyObject* out[3]) {
  static const char* const names[3] = {"output_names", "input_feed", "run_options"};
  out[0] = out[1] = nullptr;
  out[2] = Py_None;
  if (nargs > 3) {
    PyErr_Format(PyExc_TypeError, "%s() takes at most 3 arguments (%zd given)", fname, nargs);
    return false;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) out[i] = args[i];
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    int which = -1;
    for (int j = 0; j < 3 && which < 0; ++j)
      if (PyUnicode_CompareWithASCIIString(key, names[j]) == 0) which = j;
    if (which < 0) {
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fname, key);
      return false;
    }
    if (which < nargs) {
      PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fname,
                   names[which]);
      return false;
    }
    out[which] = args[nargs + k];
  }
  for (int j = 0; j < 2; ++j) {
    if (!out[j]) {
      PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s' (pos %d)", fname, names[j],
                   j + 1);
      return false;
    }
  }
  return true;
}

PyObject* session_run_impl(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                           PyObject* kwnames, bool ortvalues, const char* fname) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  PyObject* a[3];
  if (!parse_run_args(fname, args, nargs, kwnames, a)) return nullptr;
  PyObject *output_names = a[0], *input_feed = a[1], *run_options = a[2];
  // The thread's RunInputs is reused from call to call (its lists keep their capacity, so
  // a warmed-up run makes no allocation for them); a run that re-enters run() on the same
  // thread (from Python code a feed conversion calls) gets its own.
  static thread_local RunInputs reused;
  static thread_local bool reused_busy = false;
  RunInputs fresh;
  const bool own = !reused_busy;
  RunInputs& in = own ? reused : fresh;
  // Emptied on every exit, with the GIL held, after the outputs were converted.
  struct Release {
    RunInputs& in;
    bool own;
    ~Release() {
      in.feeds.clear();
      in.held.clear();
      in.output_names.clear();
      in.run_config.reset();
      if (own) reused_busy = false;
    }
  } release{in, own};
  if (own) reused_busy = true;
  try {
    std::shared_ptr<const Session> sess = loaded(st, self);
    prepare_run(st, *sess, output_names, input_feed, run_options, ortvalues, false, &in);
    std::vector<Value> outs = run_without_gil(*sess, in, ortvalues);
    // Converted before `in` lets go of the feeds: an output may share a feed's memory.
    // Names output i, and the node that made it, in a conversion error (only then).
    auto label = [&](size_t i) {
      const std::string& name =
          in.output_names.empty() ? sess->outputs().at(i).name : in.output_names.at(i);
      for (const Node& n : sess->model().graph.nodes)
        for (const std::string& o : n.outputs)
          if (o == name) return "output '" + name + "' of " + n.label();
      return "output '" + name + "'";
    };
    if (!ortvalues) return outputs_to_numpy(st, std::move(outs), label).release();
    // Graph outputs declared sparse_tensor come back as sparse OrtValues, as onnxruntime's.
    std::vector<std::string> sparse(outs.size());
    for (size_t i = 0; i < outs.size(); ++i) {
      const std::string& name =
          in.output_names.empty() ? sess->outputs().at(i).name : in.output_names.at(i);
      for (const auto& o : sess->outputs())
        if (o.name == name && o.type.kind == TypeInfo::Kind::kSparseTensor) sparse[i] = name;
    }
    Ref result = outputs_to_ortvalues(st, std::move(outs), sparse);
    return result.release();
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* session_run(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  return session_run_impl(self, args, nargs, kwnames, false, "run");
}

PyObject* session_run_with_ort_values(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                                      PyObject* kwnames) {
  return session_run_impl(self, args, nargs, kwnames, true, "run_with_ort_values");
}

PyObject* session_node_placement(PyObject* self, PyObject*) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  try {
    std::shared_ptr<const Session> sess = loaded(st, self);
    const auto placement = sess->node_placement();
    Ref list = Ref::steal(PyList_New(static_cast<Py_ssize_t>(placement.size())));
    if (!list) throw PythonErrorSet{};
    for (size_t i = 0; i < placement.size(); ++i) {
      PyObject* item =
          Py_BuildValue("(ss)", placement[i].first.c_str(), placement[i].second.c_str());
      if (!item) throw PythonErrorSet{};
      PyList_SET_ITEM(list.get(), static_cast<Py_ssize_t>(i), item);
    }
    return list.release();
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* session_end_profiling(PyObject* self, PyObject*) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  try {
    std::shared_ptr<const Session> sess = loaded(st, self);
    return str_from_utf8(sess->end_profiling());
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* session_get_profiling_start_time_ns(PyObject* self, PyObject*) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  try {
    return PyLong_FromLongLong(loaded(st, self)->profiling_start_ns());
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* session_io_binding(PyObject* self, PyObject*) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  try {
    return io_binding_new(st, self);
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* session_run_with_iobinding(PyObject* self, PyObject* args, PyObject* kwds) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  static const char* kwlist[] = {"iobinding", "run_options", nullptr};
  PyObject* binding = nullptr;
  PyObject* run_options = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:run_with_iobinding", const_cast<char**>(kwlist),
                                   &binding, &run_options))
    return nullptr;
  try {
    io_binding_run(st, self, binding, run_options);
    Py_RETURN_NONE;
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

// get_input_memory_infos / get_output_memory_infos: one OrtMemoryInfo (ortlite._memory) per
// input or output, for the device the session runs on; get_input_epdevices the same with an
// OrtEpDevice (ortlite._ep_device).
PyObject* per_io_device_objects(PyObject* self, bool inputs, const char* module,
                                const char* factory) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  try {
    std::shared_ptr<const Session> sess = loaded(st, self);
    const size_t n = inputs ? sess->inputs().size() : sess->outputs().size();
    long device_id = 0;
    if (sess->uses_device()) {
      PyObject* cuda = PyDict_GetItemString(as_sess(self)->provider_options,
                                            "CUDAExecutionProvider");  // borrowed
      PyObject* id = cuda && PyDict_Check(cuda) ? PyDict_GetItemString(cuda, "device_id") : nullptr;
      if (id && PyUnicode_Check(id)) device_id = std::atol(PyUnicode_AsUTF8(id));
    }
    Ref mod = Ref::steal(PyImport_ImportModule(module));
    if (!mod) throw PythonErrorSet{};
    Ref info = Ref::steal(PyObject_CallMethod(mod.get(), factory, "sl",
                                              sess->uses_device() ? "cuda" : "cpu", device_id));
    if (!info) throw PythonErrorSet{};
    Ref list = Ref::steal(PyList_New(static_cast<Py_ssize_t>(n)));
    if (!list) throw PythonErrorSet{};
    for (size_t i = 0; i < n; ++i)
      PyList_SET_ITEM(list.get(), static_cast<Py_ssize_t>(i), Py_NewRef(info.get()));
    return list.release();
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* session_get_input_memory_infos(PyObject* self, PyObject*) {
  return per_io_device_objects(self, true, "ortlite._memory", "_memory_info_for");
}

PyObject* session_get_output_memory_infos(PyObject* self, PyObject*) {
  return per_io_device_objects(self, false, "ortlite._memory", "_memory_info_for");
}

PyObject* session_get_input_epdevices(PyObject* self, PyObject*) {
  return per_io_device_objects(self, true, "ortlite._ep_device", "_ep_device_for");
}

PyObject* session_get_provider_graph_assignment_info(PyObject* self, PyObject*) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  try {
    std::shared_ptr<const Session> sess = loaded(st, self);
    const auto rows = sess->node_assignment();
    Ref list = Ref::steal(PyList_New(static_cast<Py_ssize_t>(rows.size())));
    if (!list) throw PythonErrorSet{};
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      Ref item = Ref::steal(PyTuple_New(4));
      if (!item) throw PythonErrorSet{};
      const std::string* parts[4] = {&r.name, &r.op_type, &r.domain, &r.provider};
      for (Py_ssize_t k = 0; k < 4; ++k) {
        PyObject* str = str_from_utf8(*parts[k]);
        if (!str) throw PythonErrorSet{};
        PyTuple_SET_ITEM(item.get(), k, str);
      }
      PyList_SET_ITEM(list.get(), static_cast<Py_ssize_t>(i), item.release());
    }
    Ref mod = Ref::steal(PyImport_ImportModule("ortlite._memory"));
    if (!mod) throw PythonErrorSet{};
    return PyObject_CallMethod(mod.get(), "_graph_assignment", "OO", list.get(),
                               as_sess(self)->sess_options);
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

// set_providers(providers=None, provider_options=None): the session made again from its model
// and options with other providers. On failure the session keeps its previous providers.
PyObject* session_set_providers(PyObject* self, PyObject* args, PyObject* kwds) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  static const char* kwlist[] = {"providers", "provider_options", nullptr};
  PyObject* providers = Py_None;
  PyObject* provider_options = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "|OO:set_providers", const_cast<char**>(kwlist),
                                   &providers, &provider_options))
    return nullptr;
  SessionObject* so = as_sess(self);
  try {
    std::shared_ptr<const Session> sess = loaded(st, self);
    if (providers != Py_None && PyList_Check(providers)) {
      Ref all = Ref::steal(all_providers_list());
      if (!all) throw PythonErrorSet{};
      for (Py_ssize_t i = 0; i < PyList_GET_SIZE(providers); ++i) {
        PyObject* p = PyList_GET_ITEM(providers, i);
        PyObject* name = PyTuple_Check(p) && PyTuple_GET_SIZE(p) > 0 ? PyTuple_GET_ITEM(p, 0) : p;
        if (!PyUnicode_Check(name)) continue;  // choose_providers says what is wrong
        const int known = PySequence_Contains(all.get(), name);
        if (known < 0) throw PythonErrorSet{};
        if (!known) {
          std::string s;
          if (!str_to_utf8(name, "provider name", &s)) throw PythonErrorSet{};
          ORTLITE_THROW(kInvalidArgument, "Unknown Provider Type: ", s);
        }
      }
    }
    ProviderChoice choice = choose_providers(st, providers, provider_options);
    ModelSource source;
    if (so->model_path) {
      source.path.assign(PyBytes_AS_STRING(so->model_path),
                         static_cast<size_t>(PyBytes_GET_SIZE(so->model_path)));
    } else {
      source.bytes = sess->model().backing;
      if (!source.bytes) ORTLITE_THROW(kFail, "set_providers: the model's bytes are not kept");
    }
    Ref options = session_options_copy(st, so->sess_options);
    create_core(st, so, std::move(source), std::move(options), std::move(choice), false);
    Py_RETURN_NONE;
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

// (path, stat, bytes, external data files) of the model source, for ortlite/_pickle.py.
PyObject* session_model_source(PyObject* self, PyObject*) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  try {
    loaded(st, self);
    SessionObject* so = as_sess(self);
    auto or_none = [](PyObject* o) { return o ? o : Py_None; };
    return PyTuple_Pack(4, or_none(so->source_path), or_none(so->source_stat),
                        or_none(so->source_bytes), or_none(so->source_external));
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* session_noop(PyObject*, PyObject*) {
  Py_RETURN_NONE;
}

PyMethodDef session_methods[] = {
    {"run", as_cfunc(session_run), METH_FASTCALL | METH_KEYWORDS,
     PyDoc_STR("run($self, output_names, input_feed, run_options=None)\n--\n\n"
               "Computes the outputs.\n\n"
               "output_names: the names of the outputs to compute (None or []: all).\n"
               "input_feed: dict of input name to numpy array, list, scalar or OrtValue.\n"
               "run_options: a RunOptions or None.\n"
               "Returns a list of numpy arrays, one per output name.")},
    {"run_with_ort_values", as_cfunc(session_run_with_ort_values), METH_FASTCALL | METH_KEYWORDS,
     PyDoc_STR("run_with_ort_values($self, output_names, input_feed, run_options=None)\n--\n\n"
               "Like run(), with a dict of input name to OrtValue; returns a list of OrtValue.")},
    {"run_async", as_cfunc(session_run_async), METH_VARARGS | METH_KEYWORDS,
     PyDoc_STR("run_async($self, output_names, input_feed, callback=None, user_data=None, "
               "run_options=None)\n--\n\n"
               "Queues a run and returns at once. Feeds are checked now, as in run().\n\n"
               "With a callback, it is called as callback(results, user_data, err) on an\n"
               "ortlite worker thread: results is the list of outputs and err == \"\" on\n"
               "success, results == [] and err the error message on failure. Returns None.\n"
               "Without a callback, returns a concurrent.futures.Future whose result() is the\n"
               "list of outputs (or raises the ortlite error); asyncio.wrap_future works on it.\n"
               "The session, run options, feeds, callback and user_data stay alive until the\n"
               "callback has run.")},
    {"io_binding", as_cfunc(session_io_binding), METH_NOARGS,
     PyDoc_STR("io_binding($self, /)\n--\n\n"
               "A new SessionIOBinding (IOBinding) of this session, for run_with_iobinding.")},
    {"run_with_iobinding", as_cfunc(session_run_with_iobinding), METH_VARARGS | METH_KEYWORDS,
     PyDoc_STR("run_with_iobinding($self, iobinding, run_options=None)\n--\n\n"
               "Runs with the binding's inputs and computes its bound outputs, which\n"
               "iobinding.get_outputs() / copy_outputs_to_cpu() then return. No output bound:\n"
               "InvalidArgument.")},
    {"get_inputs", as_cfunc(session_get_inputs), METH_NOARGS,
     PyDoc_STR("get_inputs($self, /)\n--\n\nThe model's inputs (without initializers), as "
               "NodeArgs.")},
    {"get_outputs", as_cfunc(session_get_outputs), METH_NOARGS,
     PyDoc_STR("get_outputs($self, /)\n--\n\nThe model's outputs, as NodeArgs.")},
    {"get_overridable_initializers", as_cfunc(session_get_overridable_initializers), METH_NOARGS,
     PyDoc_STR("get_overridable_initializers($self, /)\n--\n\n"
               "Initializers that are also graph inputs (a feed may replace them), as NodeArgs.")},
    {"get_modelmeta", as_cfunc(session_get_modelmeta), METH_NOARGS,
     PyDoc_STR("get_modelmeta($self, /)\n--\n\nThe model's metadata, a ModelMetadata.")},
    {"get_providers", as_cfunc(session_get_providers), METH_NOARGS,
     PyDoc_STR("get_providers($self, /)\n--\n\nThe execution providers the session uses.")},
    {"get_provider_options", as_cfunc(session_get_provider_options), METH_NOARGS,
     PyDoc_STR("get_provider_options($self, /)\n--\n\n"
               "dict of provider name to its options (a dict of str).")},
    {"get_session_options", as_cfunc(session_get_session_options), METH_NOARGS,
     PyDoc_STR("get_session_options($self, /)\n--\n\n"
               "The SessionOptions the session was created with (a copy).")},
    {"end_profiling", as_cfunc(session_end_profiling), METH_NOARGS,
     PyDoc_STR("end_profiling($self, /)\n--\n\n"
               "With SessionOptions.enable_profiling: writes the profile recorded since the\n"
               "session was created (onnxruntime's JSON trace format: session_initialization,\n"
               "one model_run event per run, one <node>_kernel_time event per node run) to\n"
               "'<profile_file_prefix>_<date>.json' in the working directory, stops recording\n"
               "and returns the file name. Returns '' when profiling is off or has ended.")},
    {"get_profiling_start_time_ns", as_cfunc(session_get_profiling_start_time_ns), METH_NOARGS,
     PyDoc_STR("get_profiling_start_time_ns($self, /)\n--\n\n"
               "When profiling started, in ns since the epoch (0 without profiling).")},
    {"get_input_memory_infos", as_cfunc(session_get_input_memory_infos), METH_NOARGS,
     PyDoc_STR("get_input_memory_infos($self, /)\n--\n\n"
               "One OrtMemoryInfo per input (get_inputs() order): where the session expects it\n"
               "('Cpu', or 'Cuda' with the device id when nodes run on a GPU).")},
    {"get_output_memory_infos", as_cfunc(session_get_output_memory_infos), METH_NOARGS,
     PyDoc_STR("get_output_memory_infos($self, /)\n--\n\n"
               "One OrtMemoryInfo per output (get_outputs() order), as get_input_memory_infos.")},
    {"get_input_epdevices", as_cfunc(session_get_input_epdevices), METH_NOARGS,
     PyDoc_STR("get_input_epdevices($self, /)\n--\n\n"
               "One OrtEpDevice per input (get_inputs() order): the provider and device the\n"
               "session expects it on, as get_input_memory_infos.")},
    {"get_provider_graph_assignment_info", as_cfunc(session_get_provider_graph_assignment_info),
     METH_NOARGS,
     PyDoc_STR("get_provider_graph_assignment_info($self, /)\n--\n\n"
               "The main graph's nodes, after the optimizer, by execution provider: a list of\n"
               "OrtEpAssignedSubgraph (ep_name, get_nodes() -> OrtEpAssignedNode with name,\n"
               "op_type, domain), one per node, in execution order. Fail unless the session\n"
               "was made with session.record_ep_graph_assignment_info = \"1\".")},
    {"set_providers", as_cfunc(session_set_providers), METH_VARARGS | METH_KEYWORDS,
     PyDoc_STR("set_providers($self, providers=None, provider_options=None)\n--\n\n"
               "Makes the session again from its model and SessionOptions with these providers\n"
               "(as InferenceSession's arguments; None: the CPU). An unknown provider is\n"
               "InvalidArgument ('Unknown Provider Type: ...'); on any failure the session keeps\n"
               "its previous providers. Runs in flight finish on the previous session.")},
    {"_node_placement", as_cfunc(session_node_placement), METH_NOARGS,
     "Test entry (not API): [(node label, provider)] in plan order."},
    {"_model_source", as_cfunc(session_model_source), METH_NOARGS,
     "Pickling entry (not API): (path or None, (size, mtime_ns, inode) or None, read-only "
     "uint8 array of the model bytes or None)."},
    {"disable_fallback", as_cfunc(session_noop), METH_NOARGS,
     PyDoc_STR("disable_fallback($self, /)\n--\n\n"
               "Accepted for onnxruntime compatibility; ortlite has no provider fallback at run.")},
    {"enable_fallback", as_cfunc(session_noop), METH_NOARGS,
     PyDoc_STR("enable_fallback($self, /)\n--\n\n"
               "Accepted for onnxruntime compatibility; ortlite has no provider fallback at run.")},
    {nullptr, nullptr, 0, nullptr},
};

PyMemberDef session_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(SessionObject, weakreflist), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyType_Slot session_slots[] = {
    {Py_tp_new, as_slot(session_new)},
    {Py_tp_init, as_slot(session_init)},
    {Py_tp_dealloc, as_slot(session_dealloc)},
    {Py_tp_traverse, as_slot(session_traverse)},
    {Py_tp_clear, as_slot(session_clear)},
    {Py_tp_methods, session_methods},
    {Py_tp_members, session_members},
    {Py_tp_doc,
     const_cast<char*>(
         "InferenceSession(path_or_bytes, sess_options=None, providers=None, "
         "provider_options=None, **kwargs)\n--\n\n"
         "A loaded model, ready to run.\n\n"
         "path_or_bytes: a path (str or os.PathLike) or the model's bytes (bytes, bytearray,\n"
         "memoryview; copied).\n"
         "providers: execution provider names or (name, options dict) tuples, in order of\n"
         "preference (default: CPUExecutionProvider).")},
    {0, nullptr},
};

PyType_Spec session_spec = {
    "ortlite.InferenceSession",
    sizeof(SessionObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    session_slots,
};

}  // namespace

std::shared_ptr<const Session> session_shared(PyObject* self) {
  std::shared_ptr<const Session> s = as_sess(self)->sess;
  if (!s) ORTLITE_THROW(kNoModel, "the InferenceSession has no model loaded");
  return s;
}

int session_setup_types(PyObject* module) {
  ModuleState* st = get_module_state(module);
  st->session_type =
      reinterpret_cast<PyTypeObject*>(PyType_FromModuleAndSpec(module, &session_spec, nullptr));
  if (!st->session_type) return -1;
  return PyModule_AddType(module, st->session_type);
}

}  // namespace ortlite::py
