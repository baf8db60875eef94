#include "python/node_arg.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "python/errors.h"

namespace ortlite::py {

namespace {

// NodeArg and ModelMetadata hold plain C++ copies (no Python references), so they need no
// GC support; their attributes are built on access, as onnxruntime does.

struct NodeArgObject {
  PyObject_HEAD ValueInfo* info;
};

ValueInfo& info_of(PyObject* self) {
  return *reinterpret_cast<NodeArgObject*>(self)->info;
}

PyObject* node_arg_get_name(PyObject* self, void*) {
  return str_from_utf8(info_of(self).name);
}

PyObject* node_arg_get_type(PyObject* self, void*) {
  try {
    return str_from_utf8(info_of(self).type.to_string());
  }
  ORTLITE_PY_CATCH(state_of(self), nullptr)
}

// onnxruntime's shape: int for dim_value, str for dim_param, None for an unknown dim;
// [] when the type has no shape.
PyObject* shape_list(const TypeInfo& type) {
  const std::vector<Dim>& dims = type.dims;
  Ref list = Ref::steal(PyList_New(type.has_shape ? static_cast<Py_ssize_t>(dims.size()) : 0));
  if (!list || !type.has_shape) return list.release();
  for (size_t i = 0; i < dims.size(); ++i) {
    PyObject* d = nullptr;
    if (dims[i].has_value) {
      d = PyLong_FromLongLong(dims[i].value);
    } else if (!dims[i].param.empty()) {
      d = str_from_utf8(dims[i].param);
    } else {
      d = Py_NewRef(Py_None);
    }
    if (!d) return nullptr;
    PyList_SET_ITEM(list.get(), static_cast<Py_ssize_t>(i), d);
  }
  return list.release();
}

PyObject* node_arg_get_shape(PyObject* self, void*) {
  return shape_list(info_of(self).type);
}

PyObject* node_arg_str(PyObject* self) {
  Ref name = Ref::steal(node_arg_get_name(self, nullptr));
  Ref type = Ref::steal(node_arg_get_type(self, nullptr));
  Ref shape = Ref::steal(node_arg_get_shape(self, nullptr));
  if (!name || !type || !shape) return nullptr;
  return PyUnicode_FromFormat("NodeArg(name=%R, type=%R, shape=%R)", name.get(), type.get(),
                              shape.get());
}

// --- pickling: NodeArg.__reduce__ -> (NodeArg._from_state, (state,)) -------------------------
// state = (name, type state, doc_string); a type state is (kind, elem_type, has_shape,
// [(has_value, value, param) per dim], element type state or None), nested for seq /
// optional / map values, at most kMaxTypeDepth deep.

constexpr int kMaxTypeDepth = 64;

PyObject* type_state(const TypeInfo& t, int depth) {
  if (depth > kMaxTypeDepth) {
    PyErr_SetString(PyExc_ValueError, "NodeArg type nested too deeply to pickle");
    return nullptr;
  }
  Ref dims = Ref::steal(PyList_New(static_cast<Py_ssize_t>(t.dims.size())));
  if (!dims) return nullptr;
  for (size_t i = 0; i < t.dims.size(); ++i) {
    const Dim& d = t.dims[i];
    Ref param = Ref::steal(str_from_utf8(d.param));
    if (!param) return nullptr;
    PyObject* item = Py_BuildValue("(OLO)", d.has_value ? Py_True : Py_False,
                                   static_cast<long long>(d.value), param.get());
    if (!item) return nullptr;
    PyList_SET_ITEM(dims.get(), static_cast<Py_ssize_t>(i), item);
  }
  Ref elem = t.elem ? Ref::steal(type_state(*t.elem, depth + 1)) : Ref::borrow(Py_None);
  if (!elem) return nullptr;
  return Py_BuildValue("(iiOOO)", static_cast<int>(t.kind), static_cast<int>(t.elem_type),
                       t.has_shape ? Py_True : Py_False, dims.get(), elem.get());
}

bool type_from_state(PyObject* state, TypeInfo* t, int depth) {
  int kind = 0, elem_type = 0, has_shape = 0;
  PyObject* dims = nullptr;
  PyObject* elem = nullptr;
  if (depth > kMaxTypeDepth || !PyTuple_Check(state) ||
      !PyArg_ParseTuple(state, "iipO!O", &kind, &elem_type, &has_shape, &PyList_Type, &dims,
                        &elem)) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bad NodeArg type state");
    return false;
  }
  if (kind < 0 || kind > static_cast<int>(TypeInfo::Kind::kSparseTensor)) {
    PyErr_SetString(PyExc_ValueError, "bad NodeArg type kind");
    return false;
  }
  t->kind = static_cast<TypeInfo::Kind>(kind);
  t->elem_type = static_cast<DataType>(elem_type);
  t->has_shape = has_shape != 0;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(dims); ++i) {
    int has_value = 0;
    long long value = 0;
    PyObject* param = nullptr;
    PyObject* item = PyList_GET_ITEM(dims, i);
    if (!PyTuple_Check(item) || !PyArg_ParseTuple(item, "pLU", &has_value, &value, &param)) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bad NodeArg dim state");
      return false;
    }
    Dim d;
    d.has_value = has_value != 0;
    d.value = static_cast<int64_t>(value);
    if (!str_to_utf8(param, "dim_param", &d.param)) return false;
    t->dims.push_back(std::move(d));
  }
  if (elem != Py_None) {
    t->elem = std::make_shared<TypeInfo>();
    if (!type_from_state(elem, t->elem.get(), depth + 1)) return false;
  }
  return true;
}

PyObject* node_arg_reduce(PyObject* self, PyObject*) {
  try {
    const ValueInfo& vi = info_of(self);
    Ref name = Ref::steal(str_from_utf8(vi.name));
    Ref doc = Ref::steal(str_from_utf8(vi.doc_string));
    Ref type = Ref::steal(type_state(vi.type, 0));
    Ref restore = Ref::steal(
        PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(self)), "_from_state"));
    if (!name || !doc || !type || !restore) return nullptr;
    return Py_BuildValue("(O((OOO)))", restore.get(), name.get(), type.get(), doc.get());
  }
  ORTLITE_PY_CATCH(state_of(self), nullptr)
}

PyObject* node_arg_from_state(PyObject* cls, PyObject* state) {
  ModuleState* st = state_from_type(reinterpret_cast<PyTypeObject*>(cls));
  if (!st) return nullptr;
  try {
    ValueInfo vi;
    PyObject *name = nullptr, *type = nullptr, *doc = nullptr;
    if (!PyTuple_Check(state) || !PyArg_ParseTuple(state, "UOU", &name, &type, &doc)) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bad NodeArg state");
      return nullptr;
    }
    if (!str_to_utf8(name, "name", &vi.name) || !str_to_utf8(doc, "doc_string", &vi.doc_string) ||
        !type_from_state(type, &vi.type, 0))
      return nullptr;
    return node_arg_new(st, vi).release();
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyMethodDef node_arg_methods[] = {
    {"__reduce__", as_cfunc(node_arg_reduce), METH_NOARGS, nullptr},
    {"_from_state", as_cfunc(node_arg_from_state), METH_O | METH_CLASS,
     "Pickling entry (not API): a NodeArg from the state __reduce__ gives."},
    {nullptr, nullptr, 0, nullptr},
};

void node_arg_dealloc(PyObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  delete std::exchange(reinterpret_cast<NodeArgObject*>(self)->info, nullptr);
  tp->tp_free(self);
  Py_DECREF(tp);
}

PyGetSetDef node_arg_getset[] = {
    {"name", node_arg_get_name, nullptr, PyDoc_STR("The input's or output's name."), nullptr},
    {"type", node_arg_get_type, nullptr, PyDoc_STR("The type, e.g. 'tensor(float)'."), nullptr},
    {"shape", node_arg_get_shape, nullptr,
     PyDoc_STR("The shape: int for a fixed dim, str for a symbolic one, None for an unknown one."),
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyType_Slot node_arg_slots[] = {
    {Py_tp_dealloc, as_slot(node_arg_dealloc)},
    {Py_tp_str, as_slot(node_arg_str)},
    {Py_tp_repr, as_slot(node_arg_str)},
    {Py_tp_getset, node_arg_getset},
    {Py_tp_methods, node_arg_methods},
    {Py_tp_doc, const_cast<char*>("The name, type and shape of a model input or output.")},
    {0, nullptr},
};

PyType_Spec node_arg_spec = {
    "ortlite.NodeArg",
    sizeof(NodeArgObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    node_arg_slots,
};

// --- ModelMetadata --------------------------------------------------------------------------

struct Metadata {
  std::string producer_name, graph_name, domain, description, graph_description;
  int64_t version = 0;
  std::vector<std::pair<std::string, std::string>> custom;
};

struct ModelMetadataObject {
  PyObject_HEAD Metadata* md;
};

Metadata& md_of(PyObject* self) {
  return *reinterpret_cast<ModelMetadataObject*>(self)->md;
}

PyObject* md_producer_name(PyObject* self, void*) {
  return str_from_utf8(md_of(self).producer_name);
}
PyObject* md_graph_name(PyObject* self, void*) {
  return str_from_utf8(md_of(self).graph_name);
}
PyObject* md_domain(PyObject* self, void*) {
  return str_from_utf8(md_of(self).domain);
}
PyObject* md_description(PyObject* self, void*) {
  return str_from_utf8(md_of(self).description);
}
PyObject* md_graph_description(PyObject* self, void*) {
  return str_from_utf8(md_of(self).graph_description);
}
PyObject* md_version(PyObject* self, void*) {
  return PyLong_FromLongLong(md_of(self).version);
}

PyObject* md_custom_metadata_map(PyObject* self, void*) {
  Ref d = Ref::steal(PyDict_New());
  if (!d) return nullptr;
  for (const auto& [k, v] : md_of(self).custom) {
    Ref key = Ref::steal(str_from_utf8(k));
    Ref value = Ref::steal(str_from_utf8(v));
    if (!key || !value || PyDict_SetItem(d.get(), key.get(), value.get()) < 0) return nullptr;
  }
  return d.release();
}

void model_metadata_dealloc(PyObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  delete std::exchange(reinterpret_cast<ModelMetadataObject*>(self)->md, nullptr);
  tp->tp_free(self);
  Py_DECREF(tp);
}

// Pickling: ModelMetadata.__reduce__ -> (ModelMetadata._from_state, (state,)), state =
// (producer_name, graph_name, domain, description, graph_description, version,
// [(key, value)] in the model's order).
PyObject* model_metadata_reduce(PyObject* self, PyObject*) {
  const Metadata& md = md_of(self);
  Ref custom = Ref::steal(PyList_New(static_cast<Py_ssize_t>(md.custom.size())));
  if (!custom) return nullptr;
  for (size_t i = 0; i < md.custom.size(); ++i) {
    Ref k = Ref::steal(str_from_utf8(md.custom[i].first));
    Ref v = Ref::steal(str_from_utf8(md.custom[i].second));
    if (!k || !v) return nullptr;
    PyObject* item = PyTuple_Pack(2, k.get(), v.get());
    if (!item) return nullptr;
    PyList_SET_ITEM(custom.get(), static_cast<Py_ssize_t>(i), item);
  }
  Ref strs[5] = {Ref::steal(str_from_utf8(md.producer_name)),
                 Ref::steal(str_from_utf8(md.graph_name)), Ref::steal(str_from_utf8(md.domain)),
                 Ref::steal(str_from_utf8(md.description)),
                 Ref::steal(str_from_utf8(md.graph_description))};
  for (const Ref& r : strs)
    if (!r) return nullptr;
  Ref restore =
      Ref::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(self)), "_from_state"));
  if (!restore) return nullptr;
  return Py_BuildValue("(O((OOOOOLO)))", restore.get(), strs[0].get(), strs[1].get(), strs[2].get(),
                       strs[3].get(), strs[4].get(), static_cast<long long>(md.version),
                       custom.get());
}

PyObject* model_metadata_from_state(PyObject* cls, PyObject* state) {
  ModuleState* st = state_from_type(reinterpret_cast<PyTypeObject*>(cls));
  if (!st) return nullptr;
  try {
    PyObject* s[5] = {};
    long long version = 0;
    PyObject* custom = nullptr;
    if (!PyTuple_Check(state) || !PyArg_ParseTuple(state, "UUUUULO!", &s[0], &s[1], &s[2], &s[3],
                                                   &s[4], &version, &PyList_Type, &custom)) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bad ModelMetadata state");
      return nullptr;
    }
    auto md = std::make_unique<Metadata>();
    std::string* fields[5] = {&md->producer_name, &md->graph_name, &md->domain, &md->description,
                              &md->graph_description};
    for (int i = 0; i < 5; ++i)
      if (!str_to_utf8(s[i], "metadata", fields[i])) return nullptr;
    md->version = static_cast<int64_t>(version);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(custom); ++i) {
      PyObject *k = nullptr, *v = nullptr;
      PyObject* item = PyList_GET_ITEM(custom, i);
      std::pair<std::string, std::string> kv;
      if (!PyTuple_Check(item) || !PyArg_ParseTuple(item, "UU", &k, &v) ||
          !str_to_utf8(k, "metadata key", &kv.first) ||
          !str_to_utf8(v, "metadata value", &kv.second)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bad ModelMetadata state");
        return nullptr;
      }
      md->custom.push_back(std::move(kv));
    }
    PyTypeObject* tp = st->model_metadata_type;
    PyObject* obj = tp->tp_alloc(tp, 0);
    if (!obj) return nullptr;
    reinterpret_cast<ModelMetadataObject*>(obj)->md = md.release();
    return obj;
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyMethodDef model_metadata_methods[] = {
    {"__reduce__", as_cfunc(model_metadata_reduce), METH_NOARGS, nullptr},
    {"_from_state", as_cfunc(model_metadata_from_state), METH_O | METH_CLASS,
     "Pickling entry (not API): a ModelMetadata from the state __reduce__ gives."},
    {nullptr, nullptr, 0, nullptr},
};

PyGetSetDef model_metadata_getset[] = {
    {"producer_name", md_producer_name, nullptr, PyDoc_STR("ModelProto.producer_name."), nullptr},
    {"graph_name", md_graph_name, nullptr, PyDoc_STR("GraphProto.name."), nullptr},
    {"domain", md_domain, nullptr, PyDoc_STR("ModelProto.domain."), nullptr},
    {"description", md_description, nullptr, PyDoc_STR("ModelProto.doc_string."), nullptr},
    {"graph_description", md_graph_description, nullptr, PyDoc_STR("GraphProto.doc_string."),
     nullptr},
    {"version", md_version, nullptr, PyDoc_STR("ModelProto.model_version."), nullptr},
    {"custom_metadata_map", md_custom_metadata_map, nullptr,
     PyDoc_STR("ModelProto.metadata_props as a dict of str."), nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyType_Slot model_metadata_slots[] = {
    {Py_tp_dealloc, as_slot(model_metadata_dealloc)},
    {Py_tp_getset, model_metadata_getset},
    {Py_tp_methods, model_metadata_methods},
    {Py_tp_doc, const_cast<char*>("A model's metadata (InferenceSession.get_modelmeta()).")},
    {0, nullptr},
};

PyType_Spec model_metadata_spec = {
    "ortlite.ModelMetadata",
    sizeof(ModelMetadataObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    model_metadata_slots,
};

}  // namespace

Ref node_arg_new(ModuleState* st, const ValueInfo& vi) {
  PyTypeObject* tp = st->node_arg_type;
  Ref obj = Ref::steal(tp->tp_alloc(tp, 0));
  if (!obj) throw PythonErrorSet{};
  reinterpret_cast<NodeArgObject*>(obj.get())->info = new ValueInfo(vi);
  return obj;
}

Ref model_metadata_new(ModuleState* st, const Model& model) {
  PyTypeObject* tp = st->model_metadata_type;
  Ref obj = Ref::steal(tp->tp_alloc(tp, 0));
  if (!obj) throw PythonErrorSet{};
  auto* md = new Metadata();
  reinterpret_cast<ModelMetadataObject*>(obj.get())->md = md;
  md->producer_name = model.producer_name;
  md->graph_name = model.graph.name;
  md->domain = model.domain;
  md->description = model.doc_string;
  md->graph_description = model.graph.doc_string;
  // onnxruntime reports INT64_MAX ("no version") when model_version is absent. Model has
  // no presence flag, so an absent version and an explicit 0 both read as absent here.
  md->version = model.model_version != 0 ? model.model_version : INT64_MAX;
  md->custom = model.metadata_props;
  return obj;
}

int node_arg_setup_types(PyObject* module) {
  ModuleState* st = get_module_state(module);
  st->node_arg_type =
      reinterpret_cast<PyTypeObject*>(PyType_FromModuleAndSpec(module, &node_arg_spec, nullptr));
  if (!st->node_arg_type || PyModule_AddType(module, st->node_arg_type) < 0) return -1;
  st->model_metadata_type = reinterpret_cast<PyTypeObject*>(
      PyType_FromModuleAndSpec(module, &model_metadata_spec, nullptr));
  if (!st->model_metadata_type) return -1;
  return PyModule_AddType(module, st->model_metadata_type);
}

}  // namespace ortlite::py
