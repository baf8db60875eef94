"""SessionOptions.add_external_initializers and add_external_initializers_from_files_in_memory:
initializers whose external data is not on disk, supplied as OrtValues or as in-memory file
contents; argument checks; what is kept alive, and for how long."""

import gc
import sys
import weakref

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import model_bytes

F32 = np.float32
PADS = np.array([0, 0, 1, 1], np.int64)


def _pad_model(location="Pads_not_on_disk.bin", offset=0):
    """Pad whose `pads` initializer has its data in an external file that does not exist."""
    pads = TensorProto()
    pads.name = "Pads_not_on_disk"
    pads.data_type = TensorProto.INT64
    pads.dims.append(4)
    pads.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", str(offset)), ("length", "32")):
        e = pads.external_data.add()
        e.key, e.value = k, v
    graph = helper.make_graph(
        [helper.make_node("Pad", ["x", "Pads_not_on_disk"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 3])], initializer=[pads])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _write(tmp_path, model, name="m.onnx"):
    path = tmp_path / name
    path.write_bytes(model_bytes(model))
    return str(path)


X = np.array([[1, 2], [3, 4]], F32)


def _expected():
    return np.pad(X, ((0, 1), (0, 1)))


def test_missing_external_file_fails_without_them(tmp_path):
    with pytest.raises(ortlite.NoSuchFile, match="Pads_not_on_disk.bin"):
        ortlite.InferenceSession(_write(tmp_path, _pad_model()))


def test_add_external_initializers_replaces_the_unread_initializer(tmp_path):
    path = _write(tmp_path, _pad_model())
    so = ortlite.SessionOptions()
    so.add_external_initializers(["Pads_not_on_disk"], [ortlite.OrtValue.ortvalue_from_numpy(PADS)])
    sess = ortlite.InferenceSession(path, so)
    np.testing.assert_array_equal(sess.run(None, {"x": X})[0], _expected())
    # (onnxruntime 1.23 refuses this model: its Pad shape inference cannot read external
    # pads.)


def test_add_external_initializers_with_a_model_from_bytes():
    so = ortlite.SessionOptions()
    so.add_external_initializers(["Pads_not_on_disk"], [ortlite.OrtValue.ortvalue_from_numpy(PADS)])
    sess = ortlite.InferenceSession(model_bytes(_pad_model()), so)
    np.testing.assert_array_equal(sess.run(None, {"x": X})[0], _expected())


@pytest.mark.parametrize("buf", [PADS.tobytes(), bytearray(PADS.tobytes()), PADS.view(np.uint8),
                                 memoryview(PADS.tobytes())], ids=["bytes", "bytearray", "ndarray",
                                                                   "memoryview"])
def test_files_in_memory(tmp_path, buf):
    so = ortlite.SessionOptions()
    so.add_external_initializers_from_files_in_memory(["Pads_not_on_disk.bin"], [buf], [32])
    for src in (_write(tmp_path, _pad_model()), model_bytes(_pad_model())):
        sess = ortlite.InferenceSession(src, so)
        np.testing.assert_array_equal(sess.run(None, {"x": X})[0], _expected())


def test_files_in_memory_with_offset_and_a_longer_buffer():
    data = b"\xff" * 16 + PADS.tobytes() + b"\xee" * 8
    so = ortlite.SessionOptions()
    so.add_external_initializers_from_files_in_memory(["Pads_not_on_disk.bin"], [data],
                                                      [len(data)])
    sess = ortlite.InferenceSession(model_bytes(_pad_model(offset=16)), so)
    np.testing.assert_array_equal(sess.run(None, {"x": X})[0], _expected())


def test_files_in_memory_data_is_copied_at_load():
    buf = bytearray(PADS.tobytes())
    so = ortlite.SessionOptions()
    so.add_external_initializers_from_files_in_memory(["Pads_not_on_disk.bin"], [buf], [32])
    sess = ortlite.InferenceSession(model_bytes(_pad_model()), so)
    buf[:] = b"\x00" * 32
    np.testing.assert_array_equal(sess.run(None, {"x": X})[0], _expected())


def test_files_in_memory_too_short_for_the_tensor():
    so = ortlite.SessionOptions()
    so.add_external_initializers_from_files_in_memory(["Pads_not_on_disk.bin"],
                                                      [PADS.tobytes()], [16])
    with pytest.raises(ortlite.InvalidGraph, match="in-memory file 'Pads_not_on_disk.bin'"):
        ortlite.InferenceSession(model_bytes(_pad_model()), so)


def test_unlisted_file_from_bytes_names_the_option():
    so = ortlite.SessionOptions()
    so.add_external_initializers_from_files_in_memory(["other.bin"], [PADS.tobytes()], [32])
    with pytest.raises(ortlite.Fail, match="add_external_initializers_from_files_in_memory"):
        ortlite.InferenceSession(model_bytes(_pad_model()), so)


def test_shrunk_bytearray_is_invalid_argument():
    buf = bytearray(PADS.tobytes())
    so = ortlite.SessionOptions()
    so.add_external_initializers_from_files_in_memory(["Pads_not_on_disk.bin"], [buf], [32])
    del buf[8:]
    with pytest.raises(ortlite.InvalidArgument, match="fewer than its length 32"):
        ortlite.InferenceSession(model_bytes(_pad_model()), so)


# --- argument checks -----------------------------------------------------------------------------


def test_add_external_initializers_bad_arguments():
    so = ortlite.SessionOptions()
    ov = ortlite.OrtValue.ortvalue_from_numpy(PADS)
    with pytest.raises(TypeError):
        so.add_external_initializers("a", [ov])
    with pytest.raises(TypeError):
        so.add_external_initializers(["a"], (ov,))
    with pytest.raises(TypeError, match=r"names\[0\] must be str"):
        so.add_external_initializers([1], [ov])
    with pytest.raises(TypeError, match=r"ort_values\[0\] must be an OrtValue"):
        so.add_external_initializers(["a"], [PADS])
    with pytest.raises(ortlite.InvalidArgument, match="equal length"):
        so.add_external_initializers(["a", "b"], [ov])
    with pytest.raises(RuntimeError):  # onnxruntime raises a RuntimeError here too
        so.add_external_initializers(["a"], [])


def test_failed_add_external_initializers_adds_nothing(tmp_path):
    so = ortlite.SessionOptions()
    ov = ortlite.OrtValue.ortvalue_from_numpy(PADS)
    with pytest.raises(TypeError):
        so.add_external_initializers(["Pads_not_on_disk", "b"], [ov, 3])
    with pytest.raises(ortlite.NoSuchFile):
        ortlite.InferenceSession(_write(tmp_path, _pad_model()), so)


def test_files_in_memory_bad_arguments():
    so = ortlite.SessionOptions()
    f = so.add_external_initializers_from_files_in_memory
    with pytest.raises(TypeError, match="names must be a list"):
        f("a.bin", [b"x"], [1])
    with pytest.raises(TypeError, match=r"names\[0\] must be str"):
        f([1], [b"x"], [1])
    with pytest.raises(TypeError, match=r"buffers\[0\] must support the buffer protocol"):
        f(["a"], [[1, 2]], [1])
    with pytest.raises(TypeError, match=r"lengths\[0\] must be int"):
        f(["a"], [b"x"], ["1"])
    with pytest.raises(ortlite.InvalidArgument, match="equal length"):
        f(["a"], [b"x"], [])
    with pytest.raises(ortlite.InvalidArgument, match="holds 1 bytes"):
        f(["a"], [b"x"], [2])
    with pytest.raises(ortlite.InvalidArgument, match="holds 1 bytes"):
        f(["a"], [b"x"], [-1])
    with pytest.raises(ortlite.InvalidArgument, match="is empty"):
        f([""], [b"x"], [1])
    with pytest.raises(TypeError):
        f(["a"], [b"x"])


# --- ownership --------------------------------------------------------------------------------


def test_ortvalue_kept_alive_by_options_and_session():
    arr = PADS.copy()
    ov = ortlite.OrtValue.ortvalue_from_numpy(arr)
    before = sys.getrefcount(ov)
    so = ortlite.SessionOptions()
    so.add_external_initializers(["Pads_not_on_disk"], [ov])
    assert sys.getrefcount(ov) == before + 1
    ref = weakref.ref(ov)
    del ov, arr
    gc.collect()
    assert ref() is not None
    sess = ortlite.InferenceSession(model_bytes(_pad_model()), so)
    del so
    gc.collect()
    assert ref() is not None
    np.testing.assert_array_equal(sess.run(None, {"x": X})[0], _expected())
    del sess
    gc.collect()
    assert ref() is None


def test_buffer_kept_by_options_and_released_with_them():
    arr = PADS.view(np.uint8).copy()
    before = sys.getrefcount(arr)
    so = ortlite.SessionOptions()
    so.add_external_initializers_from_files_in_memory(["Pads_not_on_disk.bin"], [arr], [32])
    assert sys.getrefcount(arr) == before + 1
    ref = weakref.ref(arr)
    del arr
    gc.collect()
    assert ref() is not None
    sess = ortlite.InferenceSession(model_bytes(_pad_model()), so)
    del so
    gc.collect()
    np.testing.assert_array_equal(sess.run(None, {"x": X})[0], _expected())
    del sess
    gc.collect()
    assert ref() is None


def test_failed_calls_leave_refcounts_unchanged():
    ov = ortlite.OrtValue.ortvalue_from_numpy(PADS)
    buf = bytearray(8)
    counts = sys.getrefcount(ov), sys.getrefcount(buf)
    so = ortlite.SessionOptions()
    for _ in range(3):
        with pytest.raises(ortlite.InvalidArgument):
            so.add_external_initializers(["a", "b"], [ov])
        with pytest.raises(ortlite.InvalidArgument):
            so.add_external_initializers_from_files_in_memory(["a"], [buf], [9])
    assert (sys.getrefcount(ov), sys.getrefcount(buf)) == counts


def test_session_creation_releases_its_buffer_views():
    # While the model loads the buffer is exported (a bytearray cannot be resized); after it,
    # it can again.
    buf = bytearray(PADS.tobytes())
    so = ortlite.SessionOptions()
    so.add_external_initializers_from_files_in_memory(["Pads_not_on_disk.bin"], [buf], [32])
    ortlite.InferenceSession(model_bytes(_pad_model()), so)
    buf.extend(b"more")  # BufferError if a view were still held
    with pytest.raises(ortlite.Fail):
        ortlite.InferenceSession(model_bytes(_pad_model(location="elsewhere.bin")), so)
    buf.extend(b"more")


def test_options_copy_keeps_the_entries():
    so = ortlite.SessionOptions()
    so.add_external_initializers_from_files_in_memory(["Pads_not_on_disk.bin"], [PADS.tobytes()],
                                                      [32])
    sess = ortlite.InferenceSession(model_bytes(_pad_model()), so)
    again = ortlite.InferenceSession(model_bytes(_pad_model()), sess.get_session_options())
    np.testing.assert_array_equal(again.run(None, {"x": X})[0], _expected())


def test_add_initializer_names_skip_external_data_too():
    so = ortlite.SessionOptions()
    so.add_initializer("Pads_not_on_disk", ortlite.OrtValue.ortvalue_from_numpy(PADS))
    sess = ortlite.InferenceSession(model_bytes(_pad_model()), so)
    np.testing.assert_array_equal(sess.run(None, {"x": X})[0], _expected())
