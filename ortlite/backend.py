"""ortlite as an ONNX backend (`onnx.backend.base.Backend`), so onnx's own backend test
runner, or any code written against that interface, can drive ortlite:

    import ortlite.backend as backend
    rep = backend.prepare(model)            # a ModelProto, serialized bytes or a path
    outputs = rep.run([x])                  # or rep.run({"x": x}), or backend.run_model(...)
    (y,) = backend.run_node(onnx.helper.make_node("Relu", ["x"], ["y"]), [x])

Importing this module requires the `onnx` package (a test-time dependency of ortlite);
`import ortlite` itself never imports onnx. Only the CPU device is supported.
"""

import numpy as np
import onnx
from onnx import helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

import ortlite

# The newest default-domain opset ortlite implements (run_node builds models at this opset
# unless told otherwise with opset_version=).
MAX_OPSET = ortlite.NEWEST_OPSET


def _session_options(kwargs):
    so = ortlite.SessionOptions()
    for key, value in kwargs.items():
        if hasattr(so, key):
            setattr(so, key, value)
    return so


class OrtliteBackendRep(BackendRep):
    """A prepared model: runs an ortlite.InferenceSession."""

    def __init__(self, session):
        self._session = session
        self._inputs = [i.name for i in session.get_inputs()]
        self._outputs = [o.name for o in session.get_outputs()]

    @property
    def session(self):
        return self._session

    def run(self, inputs, **kwargs):
        """inputs: a dict name -> array, a list/tuple of arrays in graph-input order, or a
        single array for a one-input model. Returns the outputs as a namedtuple that can
        also be indexed by output name."""
        if isinstance(inputs, dict):
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
        feeds = {k: (v if isinstance(v, ortlite.OrtValue) else np.asarray(v))
                 for k, v in feeds.items()}
        run_options = kwargs.get("run_options")
        outputs = self._session.run(None, feeds, run_options)
        return namedtupledict("Outputs", self._outputs)(*outputs)


class OrtliteBackend(Backend):
    """The ONNX backend interface over ortlite (CPU)."""

    @classmethod
    def supports_device(cls, device):
        try:
            return Device(device).type == DeviceType.CPU
        except (AttributeError, ValueError):
            return False

    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        """model: a ModelProto, the serialized model (bytes) or a path to a .onnx file.
        kwargs whose names are ortlite.SessionOptions attributes set those options."""
        if not cls.supports_device(device):
            raise ortlite.InvalidArgument(f"ortlite.backend: unsupported device {device!r}, "
                                          "only 'CPU' is available")
        if isinstance(model, onnx.ModelProto):
            super().prepare(model, device)  # onnx.checker.check_model
            data = model.SerializeToString()
        elif isinstance(model, (bytes, bytearray, str)):
            data = model
        else:
            raise TypeError(f"ortlite.backend.prepare: a ModelProto, bytes or a path, "
                            f"not {type(model).__name__}")
        so = _session_options(kwargs)
        session = ortlite.InferenceSession(data, so, providers=["CPUExecutionProvider"])
        return OrtliteBackendRep(session)

    @classmethod
    def run_model(cls, model, inputs, device="CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device="CPU", outputs_info=None, **kwargs):
        """Runs one node. inputs: a list of arrays for the node's inputs in order (empty
        names, i.e. omitted optional inputs, are skipped), or a dict name -> array.
        outputs_info: optional list of (np dtype, shape) for the outputs; without it the
        output types are left to ortlite. kwargs: opset_version (default
        ortlite.NEWEST_OPSET)."""
        super().run_node(node, inputs, device=device, outputs_info=outputs_info, **kwargs)
        opset = int(kwargs.pop("opset_version", MAX_OPSET))
        if isinstance(inputs, dict):
            feeds = {k: np.asarray(v) for k, v in inputs.items()}
        else:
            names = [n for n in node.input if n]
            if len(inputs) != len(names):
                raise ortlite.InvalidArgument(
                    f"run_node: {len(inputs)} inputs given for node {node.op_type} with "
                    f"inputs {names}")
            feeds = {n: np.asarray(v) for n, v in zip(names, inputs)}
        graph_inputs = [
            helper.make_tensor_value_info(
                n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
            for n, a in feeds.items()]
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
            model.SerializeToString(), _session_options(kwargs),
            providers=["CPUExecutionProvider"]))
        return rep.run(feeds)


prepare = OrtliteBackend.prepare
run_model = OrtliteBackend.run_model
run_node = OrtliteBackend.run_node
supports_device = OrtliteBackend.supports_device
is_compatible = OrtliteBackend.is_compatible
