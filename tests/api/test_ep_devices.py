"""The EP-device API: get_ep_devices(), OrtEpDevice / OrtHardwareDevice /
OrtHardwareDeviceType and InferenceSession.get_input_epdevices(), with onnxruntime (CPU
provider) as the oracle."""

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import ortlite
from helpers import model_bytes


def _two_input_model():
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"])], "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return model_bytes(m)


def _cpu(devices):
    return next(d for d in devices if d.ep_name == "CPUExecutionProvider")


def test_hardware_device_type_matches_onnxruntime():
    assert ({k: int(v) for k, v in ortlite.OrtHardwareDeviceType.__members__.items()}
            == {k: int(v) for k, v in onnxruntime.OrtHardwareDeviceType.__members__.items()})


def test_cpu_ep_device_matches_onnxruntime():
    lite, ort = _cpu(ortlite.get_ep_devices()), _cpu(onnxruntime.get_ep_devices())
    assert lite.ep_name == ort.ep_name == "CPUExecutionProvider"
    assert lite.ep_options == ort.ep_options == {}
    assert set(lite.ep_metadata) == set(ort.ep_metadata) == {"version"}
    assert lite.ep_metadata["version"] == ortlite.__version__
    assert int(lite.device.type) == int(ort.device.type) == 0
    assert lite.device.vendor == ort.device.vendor
    assert lite.device.vendor_id == ort.device.vendor_id
    assert lite.device.device_id == ort.device.device_id == 0
    assert lite.device.metadata == ort.device.metadata == {}
    mem = ortlite.OrtDeviceMemoryType.DEFAULT
    assert lite.memory_info(mem) is None
    assert ort.memory_info(onnxruntime.OrtDeviceMemoryType.DEFAULT) is None
    assert ortlite.get_ep_devices()[-1] is lite  # the CPU comes last, one object per device


def test_session_input_epdevices_match_onnxruntime():
    data = _two_input_model()
    lite = ortlite.InferenceSession(data).get_input_epdevices()
    ort = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).get_input_epdevices()
    assert len(lite) == len(ort) == 2
    assert [d.ep_name for d in lite] == [d.ep_name for d in ort]
    assert lite[0] is lite[1] is _cpu(ortlite.get_ep_devices())
    y = ortlite.InferenceSession(data).run(None, {"a": np.ones(2, np.float32),
                                                  "b": np.ones(2, np.float32)})[0]
    np.testing.assert_array_equal(y, [2, 2])


def test_bad_arguments_are_type_errors():
    dev = _cpu(ortlite.get_ep_devices())
    for bad in (0, "DEFAULT", None):
        with pytest.raises(TypeError, match="memory_info expects an OrtDeviceMemoryType"):
            dev.memory_info(bad)
    with pytest.raises(TypeError):
        _cpu(onnxruntime.get_ep_devices()).memory_info(0)
    for cls in (ortlite.OrtEpDevice, ortlite.OrtHardwareDevice):
        with pytest.raises(TypeError, match="cannot be created directly"):
            cls()
    with pytest.raises(TypeError):
        onnxruntime.OrtEpDevice()
    with pytest.raises(TypeError):
        ortlite.InferenceSession(_two_input_model()).get_input_epdevices(1)
