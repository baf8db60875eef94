#include "python/node_arg.h"

#include <cstdint>
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
