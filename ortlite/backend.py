"""ortlite as an ONNX backend (`onnx.backend.base.Backend`), so onnx's own backend test
runner, or any code written against that interface, can drive ortlite:

    import ortlite.backend as backend
    rep = backend.prepare(model)            # a ModelProto, serialized bytes or a path
    outputs = rep.run([x])                  # or rep.run({"x": x}), or backend.run(model, [x])
    (y,) = backend.run_node(onnx.helper.make_node("Relu", ["x"], ["y"]), [x])

Importing this module requires the `onnx` package (a test-time dependency of ortlite);
`import ortlite` itself never imports onnx. Devices: "CPU", and "GPU" / "CUDA" where
ortlite.get_device() reports one.
"""

import numpy as np
import onnx
from onnx import helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

import ortlite

# The newest default-domain opset ortlite implements (run_node builds models at this opset
# unless told otherwise with opset_version=).
MAX_OPSET = ortlite.NEWEST_OPSET


# Options the backend API refuses when set (to a true value or a non-empty path): they make
# a session write files (an optimized model, a profile) at paths that come with the
# model's kwargs, and the backend API is what test runners drive with kwargs they do not
# vet. Set them on an ortlite.InferenceSession directly instead.
_REFUSED_SESSION_OPTIONS = ("optimized_model_filepath", "enable_profiling",
                            "profile_file_prefix")
# RunOptions.terminate would make the run fail at once; it is a cross-thread control, not
# an option of one backend call.
_REFUSED_RUN_OPTIONS = ("terminate",)


def _refuse(kwargs, refused, where):
    for key in refused:
        if kwargs.get(key):
            raise ortlite.InvalidArgument(
                f"ortlite.backend.{where}: option '{key}' is not supported through the "
                "backend API; set it on an ortlite.InferenceSession / RunOptions directly")


def _session_options(kwargs):
    _refuse(kwargs, _REFUSED_SESSION_OPTIONS, "prepare")
    so = ortlite.SessionOptions()
    for key, value in kwargs.items():
        if hasattr(so, key):
            setattr(so, key, value)
    return so


def _run_options(kwargs):
    """A RunOptions from the kwargs that name its attributes (onnxruntime's rule), or the
    run_options= one given; None when neither."""
    _refuse(kwargs, _REFUSED_RUN_OPTIONS, "run")
    given = kwargs.get("run_options")
    ro = given if given is not None else ortlite.RunOptions()
    touched = given is not None
    for key, value in kwargs.items():
        if key != "run_options" and hasattr(ro, key) and not key.startswith("_"):
            setattr(ro, key, value)
            touched = True
    return ro if touched else None


def _normalize_device(device):
    return "GPU" if device == "CUDA" else device


def _providers(device):
    if _normalize_device(device) == "GPU":
        return ortlite.get_available_providers()
    return ["CPUExecutionProvider"]


class OrtliteBackendRep(BackendRep):
    """A prepared model: runs an ortlite.InferenceSession."""

    def __init__(self, session):
        self._session = session
        self._inputs = [i.name for i in session.get_inputs()]
        # A model whose one input is a map takes a dict as that input's value, as
        # onnxruntime's backend does; otherwise a dict names the inputs.
        args = session.get_inputs()
        self._map_input = len(args) == 1 and args[0].type.startswith("map(")
        self._outputs = [o.name for o in session.get_outputs()]

    @property
    def session(self):
        return self._session

    def run(self, inputs, **kwargs):
        """inputs: a dict name -> value, a list/tuple of values in graph-input order, or a
        single value for a one-input model (for a model whose one input is a map, a dict is
        that value, as in onnxruntime). A value is what InferenceSession.run takes: an
        array (or anything numpy converts) for a tensor, a list of arrays for a sequence, a
        dict for a map, None for an empty optional; values are passed as they are (a list
        stays a list). kwargs naming RunOptions attributes set them (run_options= passes
        one). Returns the outputs as a namedtuple that can also be indexed by output
        name."""
        run_options = _run_options(kwargs)
        if isinstance(inputs, dict) and not self._map_input:
            feeds = dict(inputs)
        elif isinstance(inputs, (list, tuple)):
            if len(inputs) > len(self._inputs):
                raise ortlite.InvalidArgument(
                    f"{len(inputs)} inputs given, the model has {len(self._inputs)}: "
                    f"{self._inputs}")
            feeds = dict(zip(self._inputs, inputs))
        else:
            if len(self._inputs) != 1:
                raise ortlite.InvalidArgument(
                    f"one input given, the model has {len(self._inputs)}: {self._inputs}")
            feeds = {self._inputs[0]: inputs}
        outputs = self._session.run(None, feeds, run_options)
        return namedtupledict("Outputs", self._outputs)(*outputs)


class OrtliteBackend(Backend):
    """The ONNX backend interface over ortlite."""

    @classmethod
    def is_compatible(cls, model, device=None, **kwargs):
        """Whether ortlite can run on `device` (None: ortlite.get_device()); the model is
        not looked at, as in onnxruntime."""
        if device is None:
            device = ortlite.get_device()
        return cls.supports_device(device)

    @classmethod
    def supports_device(cls, device):
        """onnxruntime's rule: "CUDA" means "GPU"; a device is supported when it is
        ortlite.get_device() or one of its "-"-separated parts."""
        if not isinstance(device, str):
            return False
        device = _normalize_device(device)
        have = ortlite.get_device()
        return device == have or "-" + device in have or device + "-" in have

    @classmethod
    def prepare(cls, model, device=None, **kwargs):
        """model: a ModelProto, the serialized model (bytes), a path to a .onnx file, an
        ortlite.InferenceSession or a prepared rep (returned as is). device: None (the
        default device), "CPU", or "GPU"/"CUDA" where ortlite.get_device() says so.
        kwargs whose names are ortlite.SessionOptions attributes set those options, except
        optimized_model_filepath, enable_profiling and profile_file_prefix, which are
        refused (InvalidArgument, a RuntimeError) as onnxruntime's backend refuses them."""
        if isinstance(model, OrtliteBackendRep):
            return model
        if device is not None and not cls.supports_device(device):
            raise ortlite.InvalidArgument(f"Incompatible device expected '{device}', got "
                                          f"'{ortlite.get_device()}'")
        if isinstance(model, ortlite.InferenceSession):
            return OrtliteBackendRep(model)
        if isinstance(model, onnx.ModelProto):
            super().prepare(model, device)  # onnx.checker.check_model
            data = model.SerializeToString()
        elif isinstance(model, (bytes, bytearray, str)):
            data = model
        else:
            raise TypeError(f"ortlite.backend.prepare: a ModelProto, bytes or a path, "
                            f"not {type(model).__name__}")
        so = _session_options(kwargs)
        session = ortlite.InferenceSession(data, so, providers=_providers(device))
        return OrtliteBackendRep(session)

    @classmethod
    def run_model(cls, model, inputs, device=None, **kwargs):
        """prepare(model, device, **kwargs).run(inputs, **kwargs), as onnxruntime: the
        kwargs set SessionOptions and RunOptions attributes alike."""
        return cls.prepare(model, device, **kwargs).run(inputs, **kwargs)

    @classmethod
    def run_node(cls, node, inputs, device=None, outputs_info=None, **kwargs):
        """Runs one node (onnxruntime's backend does not: it raises NotImplementedError).
        inputs: a list of values for the node's inputs in order (empty names, i.e. omitted
        optional inputs, are skipped), or a dict name -> value; a list of arrays is a
        sequence input.
        outputs_info: optional list of (np dtype, shape) for the outputs; without it the
        output types are left to ortlite. kwargs: opset_version (default
        ortlite.NEWEST_OPSET)."""
        super().run_node(node, inputs, device=device or "CPU", outputs_info=outputs_info,
                         **kwargs)
        opset = int(kwargs.pop("opset_version", MAX_OPSET))
        if isinstance(inputs, dict):
            feeds = {k: _node_feed(v) for k, v in inputs.items()}
        else:
            names = [n for n in node.input if n]
            if len(inputs) != len(names):
                raise ortlite.InvalidArgument(
                    f"run_node: {len(inputs)} inputs given for node {node.op_type} with "
                    f"inputs {names}")
            feeds = {n: _node_feed(v) for n, v in zip(names, inputs)}
        graph_inputs = [_node_input_info(n, a) for n, a in feeds.items()]
        graph_outputs = []
        for i, name in enumerate(n for n in node.output if n):
            if outputs_info is not None and i < len(outputs_info):
                dtype, shape = outputs_info[i]
                graph_outputs.append(helper.make_tensor_value_info(
                    name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), list(shape)))
            else:
                graph_outputs.append(helper.make_empty_tensor_value_info(name))
        graph = helper.make_graph([node], f"run_node_{node.op_type}", graph_inputs,
                                  graph_outputs)
        opsets = [helper.make_opsetid("", opset)]
        if node.domain and node.domain != "ai.onnx":
            opsets.append(helper.make_opsetid(node.domain, 1))
        model = helper.make_model(graph, opset_imports=opsets)
        model.ir_version = min(model.ir_version, 10)
        rep = OrtliteBackendRep(ortlite.InferenceSession(
            model.SerializeToString(), _session_options(kwargs), providers=_providers(device)))
        return rep.run(feeds)


def _node_feed(v):
    """run_node's feeds: lists of arrays stay sequences, the rest become arrays."""
    if isinstance(v, list) and all(isinstance(x, np.ndarray) for x in v):
        return list(v)
    return np.asarray(v)


def _node_input_info(name, v):
    if isinstance(v, list):
        elem = helper.np_dtype_to_tensor_dtype(v[0].dtype) if v else onnx.TensorProto.FLOAT
        return helper.make_tensor_sequence_value_info(name, elem, None)
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(v.dtype),
                                         list(v.shape))


prepare = OrtliteBackend.prepare
run = OrtliteBackend.run_model
run_model = OrtliteBackend.run_model
run_node = OrtliteBackend.run_node
supports_device = OrtliteBackend.supports_device
is_compatible = OrtliteBackend.is_compatible
