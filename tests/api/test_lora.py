"""LoRA adapters: AdapterFormat (onnxruntime's .onnx_adapter flatbuffer files, read and
written both ways against onnxruntime), LoraAdapter and RunOptions.add_active_adapter,
whose parameters override same-named initializers for one run, as in onnxruntime."""

import gc
import sys
import weakref

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite

W = np.arange(6, dtype=np.float32).reshape(3, 2)
X = np.arange(6, dtype=np.float32).reshape(2, 3)


def lora_model():
    """y = x @ lora_B; lora_B an initializer (zeros) that is also a graph input."""
    init = numpy_helper.from_array(np.zeros((3, 2), np.float32), "lora_B")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "lora_B"], ["y"])], "lora",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("lora_B", TensorProto.FLOAT, [3, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])], [init])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


PARAMS = {"lora_B": W, "bias": np.array([7, -1], np.int64), "scale": np.array(2.5, np.float64),
          "flags": np.array([True, False, True]), "half": np.ones((2, 2), np.float16),
          "empty": np.zeros((0, 3), np.float32)}


def write(lib, path, params=PARAMS, adapter_version=3, model_version=5):
    f = lib.AdapterFormat()
    f.set_adapter_version(adapter_version)
    f.set_model_version(model_version)
    f.set_parameters({k: lib.OrtValue.ortvalue_from_numpy(v) for k, v in params.items()})
    f.export_adapter(str(path))


@pytest.mark.parametrize("writer,reader", [(ortlite, onnxruntime), (onnxruntime, ortlite),
                                           (ortlite, ortlite)])
def test_adapter_files_round_trip_with_onnxruntime(tmp_path, writer, reader):
    path = tmp_path / "a.onnx_adapter"
    write(writer, path)
    r = reader.AdapterFormat.read_adapter(str(path))
    assert (r.get_format_version(), r.get_adapter_version(), r.get_model_version()) == (1, 3, 5)
    got = {k: v.numpy() for k, v in r.get_parameters().items()}
    assert set(got) == set(PARAMS)
    for k, v in PARAMS.items():
        assert got[k].dtype == v.dtype and got[k].shape == v.shape, k
        np.testing.assert_array_equal(got[k], v)


def test_adapter_file_bytes_like_onnxruntime(tmp_path):
    # Same content, same reading: both files parse to the same thing in both libraries.
    write(ortlite, tmp_path / "ours", {"lora_B": W})
    write(onnxruntime, tmp_path / "ref", {"lora_B": W})
    ours, ref = (tmp_path / "ours").read_bytes(), (tmp_path / "ref").read_bytes()
    assert ours[4:8] == ref[4:8] == b"TORT"
    a = ortlite.LoraAdapter.create_lora_adapter_from_bytes(ref)
    np.testing.assert_array_equal(a._parameters["lora_B"].numpy(), W)


@pytest.mark.parametrize("writer", [ortlite, onnxruntime])
def test_active_adapter_overrides_the_initializer_for_that_run(tmp_path, writer):
    path = tmp_path / "a.onnx_adapter"
    write(writer, path, {"lora_B": W})
    model = lora_model()
    ref_sess = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    ref_adapter = onnxruntime.LoraAdapter()
    ref_adapter.Load(str(path))
    ref_ro = onnxruntime.RunOptions()
    ref_ro.add_active_adapter(ref_adapter)
    expected = ref_sess.run(None, {"x": X}, ref_ro)[0]

    sess = ortlite.InferenceSession(model)
    adapter = ortlite.LoraAdapter()
    adapter.Load(str(path))
    ro = ortlite.RunOptions()
    ro.add_active_adapter(adapter)
    np.testing.assert_array_equal(sess.run(None, {"x": X}, ro)[0], expected)
    np.testing.assert_array_equal(sess.run(None, {"x": X}, ro)[0], X @ W)
    # Without the options, the initializer again.
    np.testing.assert_array_equal(sess.run(None, {"x": X})[0], np.zeros((2, 2), np.float32))
    (y,) = sess.run_with_ort_values(["y"], {"x": ortlite.OrtValue.ortvalue_from_numpy(X)}, ro)
    np.testing.assert_array_equal(y.numpy(), expected)
    fut = sess.run_async(None, {"x": X}, run_options=ro)
    np.testing.assert_array_equal(fut.result(timeout=30)[0], expected)
    a2 = ortlite.LoraAdapter.create_lora_adapter(str(path), None)
    ro2 = ortlite.RunOptions()
    ro2.add_active_adapter(a2)
    np.testing.assert_array_equal(sess.run(None, {"x": X}, ro2)[0], expected)


def test_adapter_errors(tmp_path):
    path = tmp_path / "a.onnx_adapter"
    write(ortlite, path, {"lora_B": W})
    sess = ortlite.InferenceSession(lora_model())
    a = ortlite.LoraAdapter.create_lora_adapter(str(path))
    ro = ortlite.RunOptions()
    ro.add_active_adapter(a)
    with pytest.raises(ortlite.InvalidArgument, match="'lora_B' is both fed and set by an active"):
        sess.run(None, {"x": X, "lora_B": W}, ro)
    with pytest.raises(TypeError, match="LoraAdapter"):
        ro.add_active_adapter(object())
    with pytest.raises(ortlite.NoSuchFile):
        ortlite.AdapterFormat.read_adapter(str(tmp_path / "missing"))
    with pytest.raises(ortlite.InvalidProtobuf, match="TORT"):
        ortlite.LoraAdapter.create_lora_adapter_from_bytes(b"\0" * 16)
    data = path.read_bytes()
    for cut in (9, 20, len(data) // 2, len(data) - 5):
        with pytest.raises(ortlite.OrtliteError):
            ortlite.LoraAdapter.create_lora_adapter_from_bytes(data[:cut])
    with pytest.raises(ortlite.InvalidArgument, match="CPU"):
        ortlite.LoraAdapter.create_lora_adapter(str(path), ortlite.OrtDevice.make("cuda", 0))
    # A parameter the model does not have is refused by the run, as an unknown feed.
    write(ortlite, tmp_path / "b", {"nope": W})
    ro = ortlite.RunOptions()
    ro.add_active_adapter(ortlite.LoraAdapter.create_lora_adapter(str(tmp_path / "b")))
    with pytest.raises(ortlite.InvalidArgument, match="nope"):
        sess.run(None, {"x": X}, ro)


def test_run_options_hold_adapters_and_refcounts_return(tmp_path):
    path = tmp_path / "a.onnx_adapter"
    write(ortlite, path, {"lora_B": W})
    sess = ortlite.InferenceSession(lora_model())
    a = ortlite.LoraAdapter.create_lora_adapter(str(path))
    ro = ortlite.RunOptions()
    ro.add_active_adapter(a)
    w = weakref.ref(a)
    param = a._parameters["lora_B"]
    feed = {"x": X}
    before = [sys.getrefcount(o) for o in (ro, param, X, feed)]
    for _ in range(200):
        sess.run(None, feed, ro)
    gc.collect()
    assert [sys.getrefcount(o) for o in (ro, param, X, feed)] == before
    assert feed == {"x": X}  # the caller's dict is not changed
    del a, param
    gc.collect()
    assert w() is not None  # the run options hold it
    wro = weakref.ref(ro)
    del ro
    gc.collect()
    assert wro() is None and w() is None
    assert isinstance(ortlite.RunOptions(), ortlite._ortlite.RunOptions)
