#include "python/session_options.h"

#include <map>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "ortlite/status.h"
#include "python/errors.h"
#include "python/ortvalue.h"

namespace ortlite::py {

namespace {

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
  std::string logid;
  std::string optimized_model_filepath;
  std::string profile_file_prefix = "onnxruntime_profile_";
  std::map<std::string, std::string> config_entries;
  std::vector<FreeDimensionOverride> free_dimension_overrides;  // in the order given
};

struct SessionOptionsObject {
  PyObject_HEAD SessionOptionsData* data;
  PyObject* initializers;  // dict: name -> OrtValue (add_initializer)
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
  return 0;
}

int session_options_clear(PyObject* self) {
  Py_CLEAR(as_so(self)->initializers);
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
    {"logid", get_str, set_str, PyDoc_STR("A tag for the session's log messages."), &kStrFields[0]},
    {"optimized_model_filepath", get_str, set_str,
     PyDoc_STR("Where to save the optimized model (not written by ortlite)."), &kStrFields[1]},
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

int session_options_setup_types(PyObject* module) {
  ModuleState* st = get_module_state(module);
  st->session_options_type = reinterpret_cast<PyTypeObject*>(
      PyType_FromModuleAndSpec(module, &session_options_spec, nullptr));
  if (!st->session_options_type) return -1;
  return PyModule_AddType(module, st->session_options_type);
}

}  // namespace ortlite::py
