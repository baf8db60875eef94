#include "python/run_options.h"

#include <cstddef>
#include <map>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <structmember.h>

#include "ortlite/status.h"
#include "python/errors.h"
#include "python/util.h"

namespace ortlite::py {

namespace {

// Runs in flight read their RunConfig without the GIL, so a config a run holds is never
// written (except `terminate`, which is atomic): a setter copies it first and keeps a weak
// reference to the old one, so that `terminate` still reaches the runs using it.
struct RunOptionsData {
  std::shared_ptr<RunConfig> cfg = std::make_shared<RunConfig>();
  std::vector<std::weak_ptr<RunConfig>> retired;
  int log_severity_level = -1;  // as onnxruntime reports it; -1 = default (warning)
};

struct RunOptionsObject {
  PyObject_HEAD RunOptionsData* data;
  PyObject* weakreflist;
};

RunOptionsData& data_of(PyObject* self) {
  return *reinterpret_cast<RunOptionsObject*>(self)->data;
}

void prune(RunOptionsData& d) {
  std::vector<std::weak_ptr<RunConfig>> alive;
  for (auto& w : d.retired)
    if (!w.expired()) alive.push_back(std::move(w));
  d.retired.swap(alive);
}

// The config to modify: the current one when no run holds it, else a fresh copy. New
// holders are only made with the GIL held, which the caller holds.
RunConfig& writable(RunOptionsData& d) {
  if (d.cfg.use_count() > 1) {
    auto copy = std::make_shared<RunConfig>();
    const RunConfig& old = *d.cfg;
    copy->terminate.store(old.terminate.load());
    copy->only_execute_path_to_fetches = old.only_execute_path_to_fetches;
    copy->log_severity_level = old.log_severity_level;
    copy->log_verbosity_level = old.log_verbosity_level;
    copy->logid = old.logid;
    copy->config_entries = old.config_entries;
    prune(d);
    d.retired.push_back(d.cfg);
    d.cfg = std::move(copy);
  }
  return *d.cfg;
}

bool int_arg(PyObject* v, const char* name, int* out) {
  if (!v) {
    PyErr_Format(PyExc_TypeError, "cannot delete %s", name);
    return false;
  }
  if (!PyLong_Check(v) || PyBool_Check(v)) {
    PyErr_Format(PyExc_TypeError, "%s must be int, not %.100s", name, Py_TYPE(v)->tp_name);
    return false;
  }
  const long x = PyLong_AsLong(v);
  if (x == -1 && PyErr_Occurred()) return false;
  if (x < -1 || x > 1000000) {
    PyErr_Format(PyExc_ValueError, "%s out of range: %ld", name, x);
    return false;
  }
  *out = static_cast<int>(x);
  return true;
}

bool bool_arg(PyObject* v, const char* name, bool* out) {
  if (!v) {
    PyErr_Format(PyExc_TypeError, "cannot delete %s", name);
    return false;
  }
  if (!PyBool_Check(v)) {
    PyErr_Format(PyExc_TypeError, "%s must be bool, not %.100s", name, Py_TYPE(v)->tp_name);
    return false;
  }
  *out = v == Py_True;
  return true;
}

// --- type slots -----------------------------------------------------------------------------

PyObject* run_options_new(PyTypeObject* tp, PyObject*, PyObject*) {
  ModuleState* st = state_from_type(tp);
  if (!st) return nullptr;
  PyObject* self = tp->tp_alloc(tp, 0);
  if (!self) return nullptr;
  try {
    reinterpret_cast<RunOptionsObject*>(self)->data = new RunOptionsData();
  } catch (...) {
    set_current_error(st);
    Py_DECREF(self);
    return nullptr;
  }
  return self;
}

int run_options_init(PyObject*, PyObject* args, PyObject* kwds) {
  static const char* kwlist[] = {nullptr};
  return PyArg_ParseTupleAndKeywords(args, kwds, ":RunOptions", const_cast<char**>(kwlist)) ? 0
                                                                                            : -1;
}

void run_options_dealloc(PyObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  auto* ro = reinterpret_cast<RunOptionsObject*>(self);
  if (ro->weakreflist) PyObject_ClearWeakRefs(self);
  delete std::exchange(ro->data, nullptr);
  tp->tp_free(self);
  Py_DECREF(tp);
}

// --- attributes -----------------------------------------------------------------------------

PyObject* get_log_severity_level(PyObject* self, void*) {
  return PyLong_FromLong(data_of(self).log_severity_level);
}
int set_log_severity_level(PyObject* self, PyObject* v, void*) {
  int x = 0;
  if (!int_arg(v, "log_severity_level", &x)) return -1;
  if (x > 4) {
    PyErr_Format(PyExc_ValueError, "log_severity_level must be in -1..4, not %d", x);
    return -1;
  }
  try {
    RunOptionsData& d = data_of(self);
    writable(d).log_severity_level = x < 0 ? 2 : x;
    d.log_severity_level = x;
    return 0;
  }
  ORTLITE_PY_CATCH(state_of(self), -1)
}

PyObject* get_log_verbosity_level(PyObject* self, void*) {
  return PyLong_FromLong(data_of(self).cfg->log_verbosity_level);
}
int set_log_verbosity_level(PyObject* self, PyObject* v, void*) {
  int x = 0;
  if (!int_arg(v, "log_verbosity_level", &x)) return -1;
  try {
    writable(data_of(self)).log_verbosity_level = x;
    return 0;
  }
  ORTLITE_PY_CATCH(state_of(self), -1)
}

PyObject* get_logid(PyObject* self, void*) {
  return str_from_utf8(data_of(self).cfg->logid);
}
int set_logid(PyObject* self, PyObject* v, void*) {
  ModuleState* st = state_of(self);
  if (!st) return -1;
  if (!v) {
    PyErr_SetString(PyExc_TypeError, "cannot delete logid");
    return -1;
  }
  try {
    std::string s;
    if (!str_to_utf8(v, "logid", &s)) return -1;
    writable(data_of(self)).logid = std::move(s);
    return 0;
  }
  ORTLITE_PY_CATCH(st, -1)
}

PyObject* get_terminate(PyObject* self, void*) {
  return PyBool_FromLong(data_of(self).cfg->terminate.load());
}
int set_terminate(PyObject* self, PyObject* v, void*) {
  bool b = false;
  if (!bool_arg(v, "terminate", &b)) return -1;
  RunOptionsData& d = data_of(self);
  d.cfg->terminate.store(b);
  for (auto& w : d.retired)
    if (auto c = w.lock()) c->terminate.store(b);
  try {
    prune(d);
    return 0;
  }
  ORTLITE_PY_CATCH(state_of(self), -1)
}

PyObject* get_only_execute_path_to_fetches(PyObject* self, void*) {
  return PyBool_FromLong(data_of(self).cfg->only_execute_path_to_fetches);
}
int set_only_execute_path_to_fetches(PyObject* self, PyObject* v, void*) {
  bool b = false;
  if (!bool_arg(v, "only_execute_path_to_fetches", &b)) return -1;
  try {
    writable(data_of(self)).only_execute_path_to_fetches = b;
    return 0;
  }
  ORTLITE_PY_CATCH(state_of(self), -1)
}

// --- methods --------------------------------------------------------------------------------

PyObject* add_run_config_entry(PyObject* self, PyObject* args, PyObject* kwds) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  std::string k, v;
  if (!parse_config_args(args, kwds, "OO:add_run_config_entry", &k, &v)) return nullptr;
  try {
    writable(data_of(self)).config_entries[k] = v;
    Py_RETURN_NONE;
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* get_run_config_entry(PyObject* self, PyObject* args, PyObject* kwds) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  std::string k;
  if (!parse_config_args(args, kwds, "O:get_run_config_entry", &k, nullptr)) return nullptr;
  try {
    bool missing = false;
    PyObject* value = config_entry_str(data_of(self).cfg->config_entries, k, &missing);
    if (missing)
      ORTLITE_THROW(kInvalidArgument, "RunOptions does not have configuration with key: ", k);
    return value;
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

// The config entries as a dict, for pickling (ortlite/_pickle.py).
PyObject* run_options_config_entries(PyObject* self, PyObject*) {
  return str_map_to_dict(data_of(self).cfg->config_entries);
}

PyGetSetDef run_options_getset[] = {
    {"log_severity_level", get_log_severity_level, set_log_severity_level,
     PyDoc_STR("Log severity of this run: 0 verbose, 1 info, 2 warning, 3 error, 4 fatal; "
               "-1 keeps the default."),
     nullptr},
    {"log_verbosity_level", get_log_verbosity_level, set_log_verbosity_level,
     PyDoc_STR("VLOG level for verbose logs of this run."), nullptr},
    {"logid", get_logid, set_logid, PyDoc_STR("A tag for this run's log messages."), nullptr},
    {"terminate", get_terminate, set_terminate,
     PyDoc_STR("Set to True (from any thread) to stop runs using these options; they fail "
               "with ortlite.Fail. Runs started while it is True fail at once."),
     nullptr},
    {"only_execute_path_to_fetches", get_only_execute_path_to_fetches,
     set_only_execute_path_to_fetches,
     PyDoc_STR("Only run the nodes needed for the requested outputs (ortlite always does)."),
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyMethodDef run_options_methods[] = {
    {"_config_entries", as_cfunc(run_options_config_entries), METH_NOARGS,
     "Pickling entry (not API): the run config entries, a dict of str."},
    {"add_run_config_entry", as_cfunc(add_run_config_entry), METH_VARARGS | METH_KEYWORDS,
     PyDoc_STR("add_run_config_entry($self, config_key, config_value)\n--\n\n"
               "Sets a run configuration entry (both str).")},
    {"get_run_config_entry", as_cfunc(get_run_config_entry), METH_VARARGS | METH_KEYWORDS,
     PyDoc_STR("get_run_config_entry($self, config_key)\n--\n\n"
               "The value of a run configuration entry; InvalidArgument when it is not set.")},
    {nullptr, nullptr, 0, nullptr},
};

PyMemberDef run_options_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(RunOptionsObject, weakreflist), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyType_Slot run_options_slots[] = {
    {Py_tp_new, as_slot(run_options_new)},
    {Py_tp_init, as_slot(run_options_init)},
    {Py_tp_dealloc, as_slot(run_options_dealloc)},
    {Py_tp_getset, run_options_getset},
    {Py_tp_methods, run_options_methods},
    {Py_tp_members, run_options_members},
    {Py_tp_doc, const_cast<char*>("RunOptions()\n--\n\nOptions of one InferenceSession.run call.")},
    {0, nullptr},
};

PyType_Spec run_options_spec = {
    "ortlite.RunOptions",
    sizeof(RunOptionsObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_IMMUTABLETYPE,
    run_options_slots,
};

}  // namespace

std::shared_ptr<RunConfig> run_options_config(PyObject* run_options) {
  return data_of(run_options).cfg;
}

int run_options_setup_types(PyObject* module) {
  ModuleState* st = get_module_state(module);
  st->run_options_type =
      reinterpret_cast<PyTypeObject*>(PyType_FromModuleAndSpec(module, &run_options_spec, nullptr));
  if (!st->run_options_type) return -1;
  return PyModule_AddType(module, st->run_options_type);
}

}  // namespace ortlite::py
