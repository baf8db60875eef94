"""np.void arrays fed to string inputs (onnxruntime's test_input_void): each element's bytes
are one string, trailing NULs kept; structured dtypes are refused; no references leak."""

import sys

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import ortlite


def identity_string(shape=(2, 2)):
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.STRING, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.STRING, list(shape))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def ort_run(data, feeds):
    sess = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def test_void_array_is_strings_like_onnxruntime():
    x = np.array([b"must", b"have", b"same", b"size"], dtype=np.void).reshape((2, 2))
    data = identity_string()
    (y,) = ortlite.InferenceSession(data).run(None, {"x": x})
    assert y.dtype == object
    np.testing.assert_array_equal(y, np.array([["must", "have"], ["same", "size"]], object))
    np.testing.assert_array_equal(y, ort_run(data, {"x": x})[0])


def test_void_keeps_trailing_nuls_like_onnxruntime():
    x = np.array([b"A\0A\0\0", b"B\0B\0\0"], np.void).reshape(1, 2)
    data = identity_string((1, 2))
    (y,) = ortlite.InferenceSession(data).run(None, {"x": x})
    assert list(y.ravel()) == ["A\0A\0\0", "B\0B\0\0"]
    assert list(y.ravel()) == list(ort_run(data, {"x": x})[0].ravel())


def test_void_non_contiguous_and_label_encoder():
    x = np.array([b"ab", b"cd", b"ef", b"gh"], np.void).reshape(2, 2)[:, ::-1]
    assert not x.flags.c_contiguous
    (y,) = ortlite.InferenceSession(identity_string()).run(None, {"x": x})
    np.testing.assert_array_equal(y, np.array([["cd", "ab"], ["gh", "ef"]], object))
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml",
                            keys_strings=["ab", "cd"], values_int64s=[1, 2])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.STRING,
                                                                      None)],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("ai.onnx.ml", 2)])
    m.ir_version = 8
    v = np.array([b"ab", b"zz", b"cd"], np.void)
    (z,) = ortlite.InferenceSession(m.SerializeToString()).run(None, {"x": v})
    np.testing.assert_array_equal(z, [1, -1, 2])
    np.testing.assert_array_equal(z, ort_run(m.SerializeToString(), {"x": v})[0])


def test_structured_dtype_is_refused():
    x = np.zeros((2, 2), dtype=[("a", np.int32), ("b", np.float32)])
    with pytest.raises(ortlite.InvalidArgument, match="numpy dtype"):
        ortlite.InferenceSession(identity_string()).run(None, {"x": x})


def test_void_feed_leaks_no_references():
    sess = ortlite.InferenceSession(identity_string())
    x = np.array([b"must", b"have", b"same", b"size"], dtype=np.void).reshape((2, 2))
    strided = np.array([b"ab", b"cd", b"ef", b"gh"], np.void).reshape(2, 2)[:, ::-1]
    feed = {"x": x}
    before = (sys.getrefcount(x), sys.getrefcount(strided), sys.getrefcount(feed))
    for _ in range(100):
        (y,) = sess.run(None, feed)
        (z,) = sess.run(None, {"x": strided})
    assert (sys.getrefcount(x), sys.getrefcount(strided), sys.getrefcount(feed)) == before
    assert sys.getrefcount(y) == 2 and sys.getrefcount(z) == 2
    ov = ortlite.OrtValue.ortvalue_from_numpy(x)
    assert list(ov.numpy().ravel()) == ["must", "have", "same", "size"]
    del ov
    assert sys.getrefcount(x) == before[0]


def test_ml_dtypes_arrays_are_not_taken_for_void():
    # ml_dtypes' dtypes have numpy kind 'V' as np.void has; they keep their element types.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.array([1.5, -2.0, 3.25], dtype=ml_dtypes.bfloat16)
    assert x.dtype.kind == "V"
    ov = ortlite.OrtValue.ortvalue_from_numpy(x)
    assert ov.data_type() == "tensor(bfloat16)"
    np.testing.assert_array_equal(ov.numpy().astype(np.float32), x.astype(np.float32))
