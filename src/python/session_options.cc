#include "python/session_options.h"

#include <cstdlib>
#include <functional>
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "ortlite/status.h"
#include "ortlite/thread_pool.h"
#include "python/errors.h"
#include "python/ortvalue.h"

namespace ortlite::py {

namespace {

// set_global_thread_pool_sizes: onnxruntime's environment with global thread pools. Made
// once per process and never replaced; sessions with use_per_session_threads = False share it.
struct GlobalPool {
  std::mutex mu;
  std::shared_ptr<ThreadPool> pool;
  int inter_op_num_threads = 0;
};

GlobalPool& global_pool() {
  static GlobalPool* g = new GlobalPool();  // never destroyed: sessions may outlive statics
  return *g;
}

struct SessionOptionsData {
  int intra_op_num_threads = 0;
  int inter_op_num_threads = 0;
  int graph_optimization_level = 99;
  int execution_mode = 0;
  int log_severity_level = -1;  // onnxruntime's "not set": warning
  int log_verbosity_level = 0;
  bool enable_cpu_mem_arena = true;
  bool enable_mem_pattern = true;
  bool enable_mem_reuse = true;
  bool enable_profiling = false;
  bool use_deterministic_compute = false;
  bool use_per_session_threads = true;
  std::string logid;
  std::string optimized_model_filepath;
  std::string profile_file_prefix = "onnxruntime_profile_";
  std::map<std::string, std::string> config_entries;
  std::vector<FreeDimensionOverride> free_dimension_overrides;  // in the order given
};

struct SessionOptionsObject {
  PyObject_HEAD SessionOptionsData* data;
  PyObject* initializers;    // dict: name -> OrtValue (add_initializer)
  PyObject* external_files;  // list of (name, buffer object, length): files in memory
};

SessionOptionsObject* as_so(PyObject* o) {
  return reinterpret_cast<SessionOptionsObject*>(o);
}
SessionOptionsData& data_of(PyObject* o) {
  return *as_so(o)->data;
}

// --- typed attributes, described by tables --------------------------------------------------

enum class IntKind { kPlain, kGraphOptLevel, kExecutionMode };

struct IntField {
  int SessionOptionsData::*member;
  const char* name;
  int min_value, max_value;
  IntKind kind;
};

struct BoolField {
  bool SessionOptionsData::*member;
  const char* name;
};

struct StrField {
  std::string SessionOptionsData::*member;
  const char* name;
};

IntField kIntFields[] = {
    {&SessionOptionsData::intra_op_num_threads, "intra_op_num_threads", 0, 1 << 16,
     IntKind::kPlain},
    {&SessionOptionsData::inter_op_num_threads, "inter_op_num_threads", 0, 1 << 16,
     IntKind::kPlain},
    {&SessionOptionsData::graph_optimization_level, "graph_optimization_level", 0, 99,
     IntKind::kGraphOptLevel},
    {&SessionOptionsData::execution_mode, "execution_mode", 0, 1, IntKind::kExecutionMode},
    {&SessionOptionsData::log_severity_level, "log_severity_level", -1, 4, IntKind::kPlain},
    {&SessionOptionsData::log_verbosity_level, "log_verbosity_level", 0, 1 << 20, IntKind::kPlain},
};

BoolField kBoolFields[] = {
    {&SessionOptionsData::enable_cpu_mem_arena, "enable_cpu_mem_arena"},
    {&SessionOptionsData::enable_mem_pattern, "enable_mem_pattern"},
    {&SessionOptionsData::enable_mem_reuse, "enable_mem_reuse"},
    {&SessionOptionsData::enable_profiling, "enable_profiling"},
    {&SessionOptionsData::use_deterministic_compute, "use_deterministic_compute"},
    {&SessionOptionsData::use_per_session_threads, "use_per_session_threads"},
};

StrField kStrFields[] = {
    {&SessionOptionsData::logid, "logid"},
    {&SessionOptionsData::optimized_model_filepath, "optimized_model_filepath"},
    {&SessionOptionsData::profile_file_prefix, "profile_file_prefix"},
};

PyObject* get_int(PyObject* self, void* closure) {
  const IntField& f = *static_cast<const IntField*>(closure);
  const int v = data_of(self).*f.member;
  PyObject* as_int = PyLong_FromLong(v);
  if (!as_int || f.kind == IntKind::kPlain) return as_int;
  ModuleState* st = state_of(self);
  if (!st) {
    Py_DECREF(as_int);
    return nullptr;
  }
  if (!st->graph_optimization_level_enum) {
    // ortlite._enums defines the IntEnums on first use and registers them here.
    PyObject* enums = PyImport_ImportModule("ortlite._enums");
    if (!enums) {
      Py_DECREF(as_int);
      return nullptr;
    }
    Py_DECREF(enums);
  }
  PyObject* enum_cls = f.kind == IntKind::kGraphOptLevel ? st->graph_optimization_level_enum
                                                         : st->execution_mode_enum;
  if (!enum_cls) return as_int;
  PyObject* member = PyObject_CallOneArg(enum_cls, as_int);
  Py_DECREF(as_int);
  return member;
}

int set_int(PyObject* self, PyObject* v, void* closure) {
  const IntField& f = *static_cast<const IntField*>(closure);
  if (!v) {
    PyErr_Format(PyExc_TypeError, "cannot delete %s", f.name);
    return -1;
  }
  if (!PyLong_Check(v) || PyBool_Check(v)) {
    PyErr_Format(PyExc_TypeError, "%s must be %s, not %.100s", f.name,
                 f.kind == IntKind::kGraphOptLevel   ? "a GraphOptimizationLevel"
                 : f.kind == IntKind::kExecutionMode ? "an ExecutionMode"
                                                     : "int",
                 Py_TYPE(v)->tp_name);
    return -1;
  }
  int overflow = 0;
  const long x = PyLong_AsLongAndOverflow(v, &overflow);
  if (x == -1 && PyErr_Occurred()) return -1;
  bool ok = !overflow && x >= f.min_value && x <= f.max_value;
  if (ok && f.kind == IntKind::kGraphOptLevel) ok = x <= 3 || x == 99;
  if (!ok) {
    PyErr_Format(PyExc_ValueError, "%R is not a valid value for %s", v, f.name);
    return -1;
  }
  data_of(self).*f.member = static_cast<int>(x);
  return 0;
}

PyObject* get_bool(PyObject* self, void* closure) {
  const BoolField& f = *static_cast<const BoolField*>(closure);
  return PyBool_FromLong(data_of(self).*f.member);
}

int set_bool(PyObject* self, PyObject* v, void* closure) {
  const BoolField& f = *static_cast<const BoolField*>(closure);
  if (!v) {
    PyErr_Format(PyExc_TypeError, "cannot delete %s", f.name);
    return -1;
  }
  if (!PyBool_Check(v)) {
    PyErr_Format(PyExc_TypeError, "%s must be bool, not %.100s", f.name, Py_TYPE(v)->tp_name);
    return -1;
  }
  data_of(self).*f.member = v == Py_True;
  return 0;
}

PyObject* get_str(PyObject* self, void* closure) {
  const StrField& f = *static_cast<const StrField*>(closure);
  return str_from_utf8(data_of(self).*f.member);
}

int set_str(PyObject* self, PyObject* v, void* closure) {
  const StrField& f = *static_cast<const StrField*>(closure);
  if (!v) {
    PyErr_Format(PyExc_TypeError, "cannot delete %s", f.name);
    return -1;
  }
  try {
    std::string s;
    if (!str_to_utf8(v, f.name, &s)) return -1;
    data_of(self).*f.member = std::move(s);
    return 0;
  }
  ORTLITE_PY_CATCH(state_of(self), -1)
}

// --- type slots -----------------------------------------------------------------------------

PyObject* session_options_new(PyTypeObject* tp, PyObject*, PyObject*) {
  ModuleState* st = state_from_type(tp);
  if (!st) return nullptr;
  PyObject* self = tp->tp_alloc(tp, 0);
  if (!self) return nullptr;
  try {
    as_so(self)->initializers = PyDict_New();
    if (!as_so(self)->initializers) throw PythonErrorSet{};
    as_so(self)->external_files = PyList_New(0);
    if (!as_so(self)->external_files) throw PythonErrorSet{};
    as_so(self)->data = new SessionOptionsData();
  } catch (...) {
    set_current_error(st);
    Py_DECREF(self);
    return nullptr;
  }
  return self;
}

int session_options_init(PyObject*, PyObject* args, PyObject* kwds) {
  static const char* kwlist[] = {nullptr};
  return PyArg_ParseTupleAndKeywords(args, kwds, ":SessionOptions", const_cast<char**>(kwlist))
             ? 0
             : -1;
}

int session_options_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(as_so(self)->initializers);
  Py_VISIT(as_so(self)->external_files);
  return 0;
}

int session_options_clear(PyObject* self) {
  Py_CLEAR(as_so(self)->initializers);
  Py_CLEAR(as_so(self)->external_files);
  return 0;
}

void session_options_dealloc(PyObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  session_options_clear(self);
  delete std::exchange(as_so(self)->data, nullptr);
  tp->tp_free(self);
  Py_DECREF(tp);
}

// --- methods --------------------------------------------------------------------------------

PyObject* add_session_config_entry(PyObject* self, PyObject* args, PyObject* kwds) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  std::string k, v;
  if (!parse_config_args(args, kwds, "OO:add_session_config_entry", &k, &v)) return nullptr;
  try {
    data_of(self).config_entries[k] = v;
    Py_RETURN_NONE;
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* get_session_config_entry(PyObject* self, PyObject* args, PyObject* kwds) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  std::string k;
  if (!parse_config_args(args, kwds, "O:get_session_config_entry", &k, nullptr)) return nullptr;
  try {
    bool missing = false;
    PyObject* value = config_entry_str(data_of(self).config_entries, k, &missing);
    if (missing)
      ORTLITE_THROW(kInvalidArgument, "SessionOptions does not have configuration with key: ", k);
    return value;
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* add_initializer(PyObject* self, PyObject* args, PyObject* kwds) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  static const char* kwlist[] = {"name", "ort_value", nullptr};
  PyObject* name = nullptr;
  PyObject* value = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "UO:add_initializer", const_cast<char**>(kwlist),
                                   &name, &value))
    return nullptr;
  if (!ortvalue_check(st, value)) {
    PyErr_Format(PyExc_TypeError, "add_initializer expects an OrtValue, not %.100s",
                 Py_TYPE(value)->tp_name);
    return nullptr;
  }
  if (PyDict_SetItem(as_so(self)->initializers, name, value) < 0) return nullptr;
  Py_RETURN_NONE;
}

// add_external_initializers(names: list[str], ort_values: list[OrtValue]): add_initializer
// for each pair, checked first so that a bad entry adds none.
PyObject* add_external_initializers(PyObject* self, PyObject* args, PyObject* kwds) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  static const char* kwlist[] = {"names", "ort_values", nullptr};
  PyObject* names = nullptr;
  PyObject* values = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!:add_external_initializers",
                                   const_cast<char**>(kwlist), &PyList_Type, &names, &PyList_Type,
                                   &values))
    return nullptr;
  try {
    const Py_ssize_t n = PyList_GET_SIZE(names);
    if (PyList_GET_SIZE(values) != n)
      ORTLITE_THROW(kInvalidArgument, "add_external_initializers: ", n, " names but ",
                    PyList_GET_SIZE(values), " ort_values; the lists must have equal length");
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* name = PyList_GET_ITEM(names, i);
      PyObject* value = PyList_GET_ITEM(values, i);
      if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError,
                     "add_external_initializers: names[%zd] must be str, not %.100s", i,
                     Py_TYPE(name)->tp_name);
        return nullptr;
      }
      if (!ortvalue_check(st, value)) {
        PyErr_Format(PyExc_TypeError,
                     "add_external_initializers: ort_values[%zd] must be an OrtValue, not %.100s",
                     i, Py_TYPE(value)->tp_name);
        return nullptr;
      }
      if (!ortvalue_tensor(value).defined())
        ORTLITE_THROW(kInvalidArgument, "add_external_initializers: ort_values[", i,
                      "] is not a tensor");
    }
    // Both lists may change while the dict grows (a key's __hash__ is C code for str, but the
    // lists are the caller's): iterate over copies.
    Ref names_copy = Ref::steal(PyList_GetSlice(names, 0, n));
    Ref values_copy = Ref::steal(PyList_GetSlice(values, 0, n));
    if (!names_copy || !values_copy) return nullptr;
    for (Py_ssize_t i = 0; i < n; ++i)
      if (PyDict_SetItem(as_so(self)->initializers, PyList_GET_ITEM(names_copy.get(), i),
                         PyList_GET_ITEM(values_copy.get(), i)) < 0)
        return nullptr;
    Py_RETURN_NONE;
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

// add_external_initializers_from_files_in_memory(names, buffers, lengths): sequences of
// equal length of str, objects with the buffer protocol, and int (0 <= length <= the
// buffer's size). The objects are kept (not copied) until the options are gone.
PyObject* add_external_initializers_from_files_in_memory(PyObject* self, PyObject* args,
                                                         PyObject* kwds) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  static const char* kwlist[] = {"names", "buffers", "lengths", nullptr};
  PyObject* names = nullptr;
  PyObject* buffers = nullptr;
  PyObject* lengths = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO:add_external_initializers_from_files_in_memory",
                                   const_cast<char**>(kwlist), &names, &buffers, &lengths))
    return nullptr;
  const char* what[3] = {"names", "buffers", "lengths"};
  PyObject* given[3] = {names, buffers, lengths};
  Ref seqs[3];
  for (int k = 0; k < 3; ++k) {
    if (PyUnicode_Check(given[k]) || PyBytes_Check(given[k]) || !PySequence_Check(given[k])) {
      PyErr_Format(PyExc_TypeError,
                   "add_external_initializers_from_files_in_memory: %s must be a list or tuple, "
                   "not %.100s",
                   what[k], Py_TYPE(given[k])->tp_name);
      return nullptr;
    }
    seqs[k] = Ref::steal(PySequence_Fast(given[k], "expected a sequence"));
    if (!seqs[k]) return nullptr;
  }
  try {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seqs[0].get());
    if (PySequence_Fast_GET_SIZE(seqs[1].get()) != n ||
        PySequence_Fast_GET_SIZE(seqs[2].get()) != n)
      ORTLITE_THROW(kInvalidArgument,
                    "add_external_initializers_from_files_in_memory: names, buffers and lengths "
                    "must have equal length (",
                    n, ", ", PySequence_Fast_GET_SIZE(seqs[1].get()), ", ",
                    PySequence_Fast_GET_SIZE(seqs[2].get()), ")");
    Ref entries = Ref::steal(PyList_New(0));
    if (!entries) return nullptr;
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* name = PySequence_Fast_GET_ITEM(seqs[0].get(), i);
      PyObject* buf = PySequence_Fast_GET_ITEM(seqs[1].get(), i);
      PyObject* len = PySequence_Fast_GET_ITEM(seqs[2].get(), i);
      std::string name_s;
      if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError,
                     "add_external_initializers_from_files_in_memory: names[%zd] must be str, "
                     "not %.100s",
                     i, Py_TYPE(name)->tp_name);
        return nullptr;
      }
      if (!str_to_utf8(name, "file name", &name_s)) return nullptr;
      if (name_s.empty())
        ORTLITE_THROW(kInvalidArgument, "add_external_initializers_from_files_in_memory: names[", i,
                      "] is empty");
      if (!PyObject_CheckBuffer(buf)) {
        PyErr_Format(PyExc_TypeError,
                     "add_external_initializers_from_files_in_memory: buffers[%zd] must support "
                     "the buffer protocol (bytes, bytearray, memoryview, numpy array), not %.100s",
                     i, Py_TYPE(buf)->tp_name);
        return nullptr;
      }
      if (!PyLong_Check(len) || PyBool_Check(len)) {
        PyErr_Format(PyExc_TypeError,
                     "add_external_initializers_from_files_in_memory: lengths[%zd] must be int, "
                     "not %.100s",
                     i, Py_TYPE(len)->tp_name);
        return nullptr;
      }
      const long long length = PyLong_AsLongLong(len);
      if (length == -1 && PyErr_Occurred()) return nullptr;
      Py_buffer view;
      if (PyObject_GetBuffer(buf, &view, PyBUF_C_CONTIGUOUS) < 0) return nullptr;
      const Py_ssize_t size = view.len;
      PyBuffer_Release(&view);
      if (length < 0 || length > size)
        ORTLITE_THROW(kInvalidArgument, "add_external_initializers_from_files_in_memory: lengths[",
                      i, "] is ", length, " but buffers[", i, "] holds ", size, " bytes");
      Ref entry = Ref::steal(Py_BuildValue("(OOL)", name, buf, length));
      if (!entry || PyList_Append(entries.get(), entry.get()) < 0) return nullptr;
    }
    PyObject* files = as_so(self)->external_files;
    if (PyList_SetSlice(files, PyList_GET_SIZE(files), PyList_GET_SIZE(files), entries.get()) < 0)
      return nullptr;
    Py_RETURN_NONE;
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

// add_free_dimension_override_by_name / _by_denotation(id: str, value: int).
PyObject* add_free_dimension_override(PyObject* self, PyObject* args, bool by_denotation,
                                      const char* format) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  PyObject* id = nullptr;
  PyObject* value = nullptr;
  if (!PyArg_ParseTuple(args, format, &id, &value)) return nullptr;
  if (!PyLong_Check(value) || PyBool_Check(value)) {
    PyErr_Format(PyExc_TypeError, "the dimension value must be int, not %.100s",
                 Py_TYPE(value)->tp_name);
    return nullptr;
  }
  try {
    FreeDimensionOverride o;
    o.by_denotation = by_denotation;
    if (!str_to_utf8(id, by_denotation ? "dim_denotation" : "dim_name", &o.id))
      throw PythonErrorSet{};
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (v == -1 && PyErr_Occurred()) throw PythonErrorSet{};
    if (overflow || v < 0)
      ORTLITE_THROW(kInvalidArgument, "free dimension override '", o.id,
                    "': the value must be a non-negative int64, got ",
                    overflow ? "an overflow" : "", overflow ? "" : std::to_string(v));
    o.value = static_cast<int64_t>(v);
    data_of(self).free_dimension_overrides.push_back(std::move(o));
    Py_RETURN_NONE;
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* add_free_dimension_override_by_name(PyObject* self, PyObject* args) {
  return add_free_dimension_override(self, args, false, "OO:add_free_dimension_override_by_name");
}

PyObject* add_free_dimension_override_by_denotation(PyObject* self, PyObject* args) {
  return add_free_dimension_override(self, args, true,
                                     "OO:add_free_dimension_override_by_denotation");
}

// (config entries, free dimension overrides in the order given as (id, by_denotation,
// value), added initializers) for pickling (ortlite/_pickle.py), which replays them.
PyObject* session_options_extras(PyObject* self, PyObject*) {
  const SessionOptionsData& d = data_of(self);
  Ref entries = Ref::steal(str_map_to_dict(d.config_entries));
  Ref overrides = Ref::steal(PyList_New(0));
  Ref inits = Ref::steal(PyDict_Copy(as_so(self)->initializers));
  if (!entries || !overrides || !inits) return nullptr;
  for (const FreeDimensionOverride& o : d.free_dimension_overrides) {
    Ref id = Ref::steal(str_from_utf8(o.id));
    if (!id) return nullptr;
    Ref item = Ref::steal(Py_BuildValue("(OOL)", id.get(), o.by_denotation ? Py_True : Py_False,
                                        static_cast<long long>(o.value)));
    if (!item || PyList_Append(overrides.get(), item.get()) < 0) return nullptr;
  }
  return PyTuple_Pack(3, entries.get(), overrides.get(), inits.get());
}

PyGetSetDef session_options_getset[] = {
    {"intra_op_num_threads", get_int, set_int,
     PyDoc_STR("Threads for parallelism inside an operator (0: one per core, at most 8)."),
     &kIntFields[0]},
    {"inter_op_num_threads", get_int, set_int,
     PyDoc_STR("Threads for running independent operators (0: default)."), &kIntFields[1]},
    {"graph_optimization_level", get_int, set_int,
     PyDoc_STR("A GraphOptimizationLevel (default ORT_ENABLE_ALL)."), &kIntFields[2]},
    {"execution_mode", get_int, set_int, PyDoc_STR("An ExecutionMode (default ORT_SEQUENTIAL)."),
     &kIntFields[3]},
    {"log_severity_level", get_int, set_int,
     PyDoc_STR("Log severity: 0 verbose, 1 info, 2 warning, 3 error, 4 fatal; -1 default."),
     &kIntFields[4]},
    {"log_verbosity_level", get_int, set_int, PyDoc_STR("VLOG level for verbose logs."),
     &kIntFields[5]},
    {"enable_cpu_mem_arena", get_bool, set_bool, PyDoc_STR("Use a memory arena on the CPU."),
     &kBoolFields[0]},
    {"enable_mem_pattern", get_bool, set_bool, PyDoc_STR("Plan memory from observed patterns."),
     &kBoolFields[1]},
    {"enable_mem_reuse", get_bool, set_bool, PyDoc_STR("Reuse buffers between nodes."),
     &kBoolFields[2]},
    {"enable_profiling", get_bool, set_bool,
     PyDoc_STR("Record a profile of the session (InferenceSession.end_profiling writes it)."),
     &kBoolFields[3]},
    {"use_deterministic_compute", get_bool, set_bool, PyDoc_STR("Prefer deterministic kernels."),
     &kBoolFields[4]},
    {"use_per_session_threads", get_bool, set_bool,
     PyDoc_STR("True (default): the session has its own thread pool. False: it runs on the\n"
               "process-wide pool of set_global_thread_pool_sizes (which must have been called;\n"
               "once it has, sessions must set this to False, as in onnxruntime)."),
     &kBoolFields[5]},
    {"logid", get_str, set_str, PyDoc_STR("A tag for the session's log messages."), &kStrFields[0]},
    {"optimized_model_filepath", get_str, set_str,
     PyDoc_STR("Where the session writes the model it runs, after its load-time rewrites, as an\n"
               "ONNX file (config entries session.optimized_model_external_initializers_*\n"
               "put large initializers in a file beside it). '' (default): not written."),
     &kStrFields[1]},
    {"profile_file_prefix", get_str, set_str, PyDoc_STR("Prefix of profile file names."),
     &kStrFields[2]},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyMethodDef session_options_methods[] = {
    {"_pickle_extras", as_cfunc(session_options_extras), METH_NOARGS,
     "Pickling entry (not API): (config entries, [(id, by_denotation, value)], initializers)."},
    {"add_session_config_entry", as_cfunc(add_session_config_entry), METH_VARARGS | METH_KEYWORDS,
     PyDoc_STR("add_session_config_entry($self, config_key, config_value)\n--\n\n"
               "Sets a session configuration entry (both str).")},
    {"get_session_config_entry", as_cfunc(get_session_config_entry), METH_VARARGS | METH_KEYWORDS,
     PyDoc_STR("get_session_config_entry($self, config_key)\n--\n\n"
               "The value of a session configuration entry; InvalidArgument when it is not set.")},
    {"add_initializer", as_cfunc(add_initializer), METH_VARARGS | METH_KEYWORDS,
     PyDoc_STR("add_initializer($self, name, ort_value)\n--\n\n"
               "Adds or replaces the initializer `name` with an OrtValue. The OrtValue (and the\n"
               "array it views) stays alive as long as any session created with these options.")},
    {"add_external_initializers", as_cfunc(add_external_initializers), METH_VARARGS | METH_KEYWORDS,
     PyDoc_STR("add_external_initializers($self, names, ort_values)\n--\n\n"
               "add_initializer for each name (list of str) and OrtValue (list, same length).\n"
               "The model's initializers of those names are replaced; their external data is\n"
               "not read, so their files need not exist. The OrtValues stay alive as long as\n"
               "these options or a session created with them.")},
    {"add_external_initializers_from_files_in_memory",
     as_cfunc(add_external_initializers_from_files_in_memory), METH_VARARGS | METH_KEYWORDS,
     PyDoc_STR("add_external_initializers_from_files_in_memory($self, names, buffers, lengths)\n"
               "--\n\n"
               "The contents of external data files, from memory: names (str, as the model's\n"
               "external_data 'location' writes them), buffers (bytes-like) and lengths (int,\n"
               "at most the buffer's size). A session created with these options reads those\n"
               "files from the first `length` bytes of the buffers instead of the disk (also for\n"
               "a model given as bytes) and copies what it reads. The buffers stay alive as long\n"
               "as these options or a session created with them.")},
    {"add_free_dimension_override_by_name", as_cfunc(add_free_dimension_override_by_name),
     METH_VARARGS,
     PyDoc_STR("add_free_dimension_override_by_name($self, dim_name, dim_value, /)\n--\n\n"
               "Fixes the symbolic dimension `dim_name` (a dim_param) of the model's inputs to\n"
               "`dim_value` (an int >= 0): get_inputs() reports it and a feed of another size is\n"
               "InvalidArgument. For one name the first override given wins.")},
    {"add_free_dimension_override_by_denotation",
     as_cfunc(add_free_dimension_override_by_denotation), METH_VARARGS,
     PyDoc_STR(
         "add_free_dimension_override_by_denotation($self, dim_denotation, dim_value, /)\n"
         "--\n\n"
         "Fixes the input dimensions whose denotation (DATA_BATCH, DATA_CHANNEL, ...; compared\n"
         "case-insensitively) is `dim_denotation` to `dim_value`. A fixed dimension with that\n"
         "denotation and another size makes the session InvalidArgument.")},
    {nullptr, nullptr, 0, nullptr},
};

PyType_Slot session_options_slots[] = {
    {Py_tp_new, as_slot(session_options_new)},
    {Py_tp_init, as_slot(session_options_init)},
    {Py_tp_dealloc, as_slot(session_options_dealloc)},
    {Py_tp_traverse, as_slot(session_options_traverse)},
    {Py_tp_clear, as_slot(session_options_clear)},
    {Py_tp_getset, session_options_getset},
    {Py_tp_methods, session_options_methods},
    {Py_tp_doc, const_cast<char*>("SessionOptions()\n--\n\nSettings of an InferenceSession.")},
    {0, nullptr},
};

PyType_Spec session_options_spec = {
    "ortlite.SessionOptions",
    sizeof(SessionOptionsObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    session_options_slots,
};

}  // namespace

Ref session_options_copy(ModuleState* st, PyObject* src) {
  PyTypeObject* tp = st->session_options_type;
  Ref copy = Ref::steal(session_options_new(tp, nullptr, nullptr));
  if (!copy) throw PythonErrorSet{};
  if (src) {
    *as_so(copy.get())->data = data_of(src);
    if (PyDict_Update(as_so(copy.get())->initializers, as_so(src)->initializers) < 0)
      throw PythonErrorSet{};
    PyObject* files = as_so(src)->external_files;
    if (PyList_SetSlice(as_so(copy.get())->external_files, 0, 0, files) < 0) throw PythonErrorSet{};
  }
  return copy;
}

SessionConfig session_options_to_config(ModuleState* st, PyObject* opts, Ref* held) {
  const SessionOptionsData& d = data_of(opts);
  SessionConfig config;
  config.intra_op_num_threads = d.intra_op_num_threads;
  config.inter_op_num_threads = d.inter_op_num_threads;
  config.graph_optimization_level = d.graph_optimization_level;
  config.execution_mode = d.execution_mode;
  config.log_severity_level = d.log_severity_level < 0 ? 2 : d.log_severity_level;
  config.config_entries = d.config_entries;
  config.enable_profiling = d.enable_profiling;
  config.optimized_model_filepath = d.optimized_model_filepath;
  {
    GlobalPool& g = global_pool();
    std::lock_guard<std::mutex> lock(g.mu);
    if (!d.use_per_session_threads && !g.pool)
      ORTLITE_THROW(kFail,
                    "When the session is not configured to use per session threadpools "
                    "(use_per_session_threads = False), the global thread pools must exist: call "
                    "ortlite.set_global_thread_pool_sizes first");
    if (d.use_per_session_threads && g.pool)
      ORTLITE_THROW(kFail,
                    "use_per_session_threads must be false when using a global thread pool "
                    "(ortlite.set_global_thread_pool_sizes was called)");
    if (!d.use_per_session_threads) config.shared_thread_pool = g.pool;
  }
  config.profile_file_prefix = d.profile_file_prefix;
  config.free_dimension_overrides = d.free_dimension_overrides;
  PyObject* inits = as_so(opts)->initializers;
  Ref values = Ref::steal(PyTuple_New(PyDict_GET_SIZE(inits)));
  if (!values) throw PythonErrorSet{};
  Py_ssize_t pos = 0, i = 0;
  PyObject* key = nullptr;
  PyObject* value = nullptr;
  while (PyDict_Next(inits, &pos, &key, &value)) {
    if (!ortvalue_check(st, value)) {
      PyErr_SetString(PyExc_TypeError, "SessionOptions initializers must be OrtValues");
      throw PythonErrorSet{};
    }
    std::string name;
    if (!str_to_utf8(key, "initializer name", &name)) throw PythonErrorSet{};
    config.added_initializers.emplace_back(std::move(name), ortvalue_tensor(value));
    Py_INCREF(value);
    PyTuple_SET_ITEM(values.get(), i++, value);
  }
  *held = std::move(values);
  return config;
}

LoadViews::~LoadViews() {
  for (Py_buffer& v : views_) PyBuffer_Release(&v);
}

LoadOptions session_options_load_options(ModuleState*, PyObject* opts, LoadViews* views) {
  LoadOptions lo;
  PyObject* inits = as_so(opts)->initializers;
  Py_ssize_t pos = 0;
  PyObject* key = nullptr;
  PyObject* value = nullptr;
  while (PyDict_Next(inits, &pos, &key, &value)) {
    std::string name;
    if (!str_to_utf8(key, "initializer name", &name)) throw PythonErrorSet{};
    lo.provided_initializers.insert(std::move(name));
  }
  PyObject* files = as_so(opts)->external_files;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(files); ++i) {
    PyObject* entry = PyList_GET_ITEM(files, i);
    std::string name;
    if (!str_to_utf8(PyTuple_GET_ITEM(entry, 0), "file name", &name)) throw PythonErrorSet{};
    const long long length = PyLong_AsLongLong(PyTuple_GET_ITEM(entry, 2));
    if (length == -1 && PyErr_Occurred()) throw PythonErrorSet{};
    Py_buffer view;
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(entry, 1), &view, PyBUF_C_CONTIGUOUS) < 0)
      throw PythonErrorSet{};
    views->add(view);
    // A bytearray may have shrunk since it was added.
    if (length > view.len)
      ORTLITE_THROW(kInvalidArgument, "the in-memory external data file '", name, "' has ",
                    view.len, " bytes, fewer than its length ", length);
    // The view pins the memory while the model loads; the buffer only points at it.
    lo.in_memory_files[name] = BufferPtr::adopt(Buffer::wrap(
        view.buf, static_cast<size_t>(length), BufferKind::kBorrowed, std::function<void()>()));
  }
  return lo;
}

PyObject* set_global_thread_pool_sizes(PyObject* module, PyObject* args, PyObject* kwds) {
  ModuleState* st = get_module_state(module);
  static const char* kwlist[] = {"intra_op_num_threads", "inter_op_num_threads", nullptr};
  PyObject* values[2] = {nullptr, nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "|OO:set_global_thread_pool_sizes",
                                   const_cast<char**>(kwlist), &values[0], &values[1]))
    return nullptr;
  try {
    long n[2] = {0, 0};
    for (int k = 0; k < 2; ++k) {
      if (!values[k]) continue;
      if (!PyLong_Check(values[k]) || PyBool_Check(values[k])) {
        PyErr_Format(PyExc_TypeError, "%s must be int, not %.100s", kwlist[k],
                     Py_TYPE(values[k])->tp_name);
        return nullptr;
      }
      int overflow = 0;
      n[k] = PyLong_AsLongAndOverflow(values[k], &overflow);
      if (n[k] == -1 && PyErr_Occurred()) return nullptr;
      if (overflow || n[k] < 0 || n[k] > (1 << 16))
        ORTLITE_THROW(kInvalidArgument, kwlist[k], " must be between 0 and 65536");
    }
    GlobalPool& g = global_pool();
    std::lock_guard<std::mutex> lock(g.mu);
    if (g.pool)
      ORTLITE_THROW(kFail, "Global thread pools have already been created, cannot replace them");
    int threads = static_cast<int>(n[0]);
    if (threads == 0) {
      const unsigned hw = std::thread::hardware_concurrency();
      threads = static_cast<int>(std::clamp<unsigned>(hw == 0 ? 1 : hw, 1, 8));
    }
    g.pool = std::make_shared<ThreadPool>(threads);
    g.inter_op_num_threads = static_cast<int>(n[1]);
    Py_RETURN_NONE;
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

void session_options_apply_model_config(
    ModuleState*, PyObject* opts, const std::vector<std::pair<std::string, std::string>>& props,
    SessionConfig* config) {
  SessionOptionsData& d = data_of(opts);
  // The config entry, or (as onnxruntime reads it at each session) the environment variable.
  auto entry = d.config_entries.find("session.load_config_from_model");
  const char* env = std::getenv("ORT_LOAD_CONFIG_FROM_MODEL");
  const bool from_env = env && std::string(env) == "1";
  if (!from_env && (entry == d.config_entries.end() || entry->second != "1")) return;
  const std::string* text = nullptr;
  for (const auto& [k, v] : props)
    if (k == "ort_config") {
      text = &v;
      break;
    }
  if (!text) return;
  Ref json = Ref::steal(PyImport_ImportModule("json"));
  if (!json) throw PythonErrorSet{};
  Ref arg = Ref::steal(
      PyUnicode_DecodeUTF8(text->data(), static_cast<Py_ssize_t>(text->size()), "replace"));
  if (!arg) throw PythonErrorSet{};
  Ref loads = Ref::steal(PyObject_GetAttrString(json.get(), "loads"));
  if (!loads) throw PythonErrorSet{};
  Ref parsed = Ref::steal(PyObject_CallOneArg(loads.get(), arg.get()));
  if (!parsed) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    Ref v = Ref::steal(value);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    Ref msg = Ref::steal(v ? PyObject_Str(v.get()) : nullptr);
    const char* m = msg ? PyUnicode_AsUTF8(msg.get()) : nullptr;
    PyErr_Clear();
    ORTLITE_THROW(
        kInvalidArgument,
        "Json stored in the `ort_config` key cannot be parsed. Error message: ", m ? m : "?");
  }
  if (!PyDict_Check(parsed.get())) return;
  PyObject* so = PyDict_GetItemString(parsed.get(), "session_options");  // borrowed
  if (!so || !PyDict_Check(so)) return;
  SessionOptionsData updated = d;
  Py_ssize_t pos = 0;
  PyObject* key = nullptr;
  PyObject* value = nullptr;
  while (PyDict_Next(so, &pos, &key, &value)) {
    if (!PyUnicode_Check(key)) continue;
    const char* k = PyUnicode_AsUTF8(key);
    if (!k) throw PythonErrorSet{};
    const std::string name = k;
    int* target = nullptr;
    if (name == "intra_op_num_threads")
      target = &updated.intra_op_num_threads;
    else if (name == "inter_op_num_threads")
      target = &updated.inter_op_num_threads;
    else if (name == "execution_mode")
      target = &updated.execution_mode;
    else if (name == "graph_optimization_level")
      target = &updated.graph_optimization_level;
    if (!target && name != "enable_profiling") continue;  // onnxruntime ignores the others
    if (!PyLong_Check(value) || PyBool_Check(value))
      ORTLITE_THROW(kInvalidArgument, name, " option in the model file must be an integer");
    int overflow = 0;
    const long v = PyLong_AsLongAndOverflow(value, &overflow);
    if (v == -1 && PyErr_Occurred()) throw PythonErrorSet{};
    const bool ok =
        !overflow && (name == "execution_mode" || name == "enable_profiling" ? (v == 0 || v == 1)
                      : name == "graph_optimization_level" ? (v == 0 || v == 1 || v == 2 || v == 99)
                                                           : (v >= 0 && v <= (1 << 16)));
    if (!ok)
      ORTLITE_THROW(kInvalidArgument, "Unsupported value for ", name,
                    " in ORT config: ", overflow ? std::string("(overflow)") : std::to_string(v));
    if (target) {
      *target = static_cast<int>(v);
    } else {
      updated.enable_profiling = v == 1;
    }
  }
  d = std::move(updated);
  config->intra_op_num_threads = d.intra_op_num_threads;
  config->inter_op_num_threads = d.inter_op_num_threads;
  config->execution_mode = d.execution_mode;
  config->graph_optimization_level = d.graph_optimization_level;
  config->enable_profiling = d.enable_profiling;
}

int session_options_setup_types(PyObject* module) {
  ModuleState* st = get_module_state(module);
  st->session_options_type = reinterpret_cast<PyTypeObject*>(
      PyType_FromModuleAndSpec(module, &session_options_spec, nullptr));
  if (!st->session_options_type) return -1;
  return PyModule_AddType(module, st->session_options_type);
}

}  // namespace ortlite::py
