"""Parts of onnxruntime's Python API checked against onnxruntime itself: provider fallback,
free dimension overrides, external data behind symbolic links (the Hugging Face cache
layout), IOBinding, OrtDevice and the smaller helpers. Bad input gets typed errors."""

import gc
import os
import struct
import sys
import warnings
import weakref

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, save

import ortlite
from helpers import add_model, make_model, model_bytes

F32 = np.float32
CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
INFO = ortlite._ortlite._cuda_info()
HAS_GPU = INFO["loaded"] and INFO["device_count"] > 0
no_gpu = pytest.mark.skipif(HAS_GPU, reason="a CUDA device is present")
gpu = pytest.mark.skipif(not HAS_GPU, reason=f"no CUDA device: {INFO['error']}")


def ort_session(data, sess_options=None):
    return onnxruntime.InferenceSession(data, sess_options, providers=[CPU])


# --- 1. provider fallback ---------------------------------------------------------------------


def _fallback_cases():
    return [[CUDA], ["TensorrtExecutionProvider"], [CUDA, CPU], [(CUDA, {"device_id": 0})]]


@no_gpu
@pytest.mark.parametrize("providers", _fallback_cases(), ids=str)
def test_unavailable_provider_falls_back_to_cpu_like_onnxruntime(providers):
    data = add_model()
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        sess = ortlite.InferenceSession(data, providers=providers)
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        ref = onnxruntime.InferenceSession(data, providers=providers)
    assert sess.get_providers() == ref.get_providers() == [CPU]
    # One UserWarning per unavailable provider, with onnxruntime's wording first.
    name = providers[0] if isinstance(providers[0], str) else providers[0][0]
    for rec in (ours, theirs):
        msgs = [str(w.message) for w in rec if issubclass(w.category, UserWarning)]
        assert len(msgs) == 1, msgs
        assert msgs[0].startswith(f"Specified provider '{name}' is not in available provider names.")
    x = np.arange(6, dtype=F32).reshape(2, 3)
    np.testing.assert_array_equal(sess.run(None, {"x": x, "y": x})[0],
                                  ref.run(None, {"x": x, "y": x})[0])


@no_gpu
def test_fallback_warning_says_why_and_the_session_is_usable_at_once():
    with pytest.warns(UserWarning, match=r"CUDAExecutionProvider.*CUDAExecutionProvider: ") as rec:
        sess = ortlite.InferenceSession(add_model(), providers=[CUDA])
    assert INFO["error"] in str(rec[0].message)
    assert sess.get_provider_options() == {CPU: {}}
    assert sess.get_providers() == [CPU]


def test_unknown_provider_name_is_still_an_error():
    # A misspelt name raises at once (onnxruntime 1.23 warns, prints "EP Error" and retries
    # on the CPU; docs/compatibility.md).
    with pytest.raises(ValueError, match="Unknown execution provider 'CUDAExecutionProvder'"):
        ortlite.InferenceSession(add_model(), providers=["CUDAExecutionProvder"])
    with pytest.raises(ValueError, match="'providers' values must be"):
        ortlite.InferenceSession(add_model(), providers=[3])


def test_fallback_does_not_leak_the_options():
    opts = {"device_id": 0}
    before = sys.getrefcount(opts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(20):
            ortlite.InferenceSession(add_model(), providers=[(CUDA, opts), CPU])
    assert sys.getrefcount(opts) == before


# --- 2. free dimension overrides -----------------------------------------------------------


def _symbolic_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    x.type.tensor_type.shape.dim[0].denotation = "DATA_BATCH"
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, ["M", 2])
    w.type.tensor_type.shape.dim[1].denotation = "DATA_CHANNEL"
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["M", 2])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"]),
                           helper.make_node("Identity", ["w"], ["z"])], "g", [x, w], [y, z])
    return model_bytes(helper.make_model(g, ir_version=8, opset_imports=[helper.make_opsetid("", 17)]))


def _both(configure):
    """(ortlite session, onnxruntime session) of the symbolic model with configure(options)
    applied to both libraries' SessionOptions."""
    data = _symbolic_model()
    ours, theirs = ortlite.SessionOptions(), onnxruntime.SessionOptions()
    configure(ours)
    configure(theirs)
    return ortlite.InferenceSession(data, ours), ort_session(data, theirs)


def _shapes(args):
    return [(a.name, a.shape) for a in args]


@pytest.mark.parametrize("how", ["name", "denotation", "denotation_lower", "both_agree"])
def test_free_dimension_override_fixes_input_shapes(how):
    def configure(so):
        if how in ("name", "both_agree"):
            so.add_free_dimension_override_by_name("batch", 5)
        if how in ("denotation", "both_agree"):
            so.add_free_dimension_override_by_denotation("DATA_BATCH", 5)
        if how == "denotation_lower":
            so.add_free_dimension_override_by_denotation("data_batch", 5)  # case-insensitive

    sess, ref = _both(configure)
    assert _shapes(sess.get_inputs()) == _shapes(ref.get_inputs()) == [("x", [5, 3]),
                                                                        ("w", ["M", 2])]
    feeds = {"x": np.ones((5, 3), F32), "w": np.ones((4, 2), F32)}
    for a, b in zip(sess.run(None, feeds), ref.run(None, feeds)):
        np.testing.assert_array_equal(a, b)
    bad = {"x": np.ones((4, 3), F32), "w": np.ones((4, 2), F32)}
    with pytest.raises(onnxruntime.capi.onnxruntime_pybind11_state.InvalidArgument) as theirs:
        ref.run(None, bad)
    with pytest.raises(ortlite.InvalidArgument) as ours:
        sess.run(None, bad)
    assert str(ours.value) == str(theirs.value).split(" : ")[-1].replace("\n", "")


def test_free_dimension_override_of_an_output_dim_param():
    sess, ref = _both(lambda so: so.add_free_dimension_override_by_name("batch", 2))
    assert sess.get_outputs()[0].shape == ref.get_outputs()[0].shape == [2, 3]


def test_free_dimension_override_first_one_wins_and_unknown_ids_are_ignored():
    def configure(so):
        so.add_free_dimension_override_by_name("batch", 2)
        so.add_free_dimension_override_by_name("batch", 7)
        so.add_free_dimension_override_by_name("nothing", 9)
        so.add_free_dimension_override_by_denotation("DATA_FEATURE", 9)

    sess, ref = _both(configure)
    assert _shapes(sess.get_inputs()) == _shapes(ref.get_inputs()) == [("x", [2, 3]),
                                                                        ("w", ["M", 2])]


def test_free_dimension_override_survives_copies_of_the_options():
    so = ortlite.SessionOptions()
    so.add_free_dimension_override_by_name("M", 4)
    sess = ortlite.InferenceSession(_symbolic_model(), so)
    assert sess.get_inputs()[1].shape == [4, 2]
    # The session keeps its own copy: later additions change only new sessions.
    so.add_free_dimension_override_by_name("batch", 1)
    assert sess.get_inputs()[0].shape == ["batch", 3]
    assert ortlite.InferenceSession(_symbolic_model(), so).get_inputs()[0].shape == [1, 3]


@pytest.mark.parametrize("case", ["fixed_mismatch", "conflict"])
def test_free_dimension_override_errors_like_onnxruntime(case):
    def configure(so):
        if case == "fixed_mismatch":  # w's dim 1 is fixed at 2 and denoted DATA_CHANNEL
            so.add_free_dimension_override_by_denotation("DATA_CHANNEL", 3)
        else:
            so.add_free_dimension_override_by_denotation("DATA_BATCH", 3)
            so.add_free_dimension_override_by_name("batch", 4)

    expected = {"fixed_mismatch": "Invalid free dimension override",
                "conflict": "Conflicting free dimension overrides"}[case]
    with pytest.raises(onnxruntime.capi.onnxruntime_pybind11_state.InvalidArgument,
                       match=expected):
        _both_ort_only(configure)
    with pytest.raises(ortlite.InvalidArgument, match=expected):
        so = ortlite.SessionOptions()
        configure(so)
        ortlite.InferenceSession(_symbolic_model(), so)


def _both_ort_only(configure):
    so = onnxruntime.SessionOptions()
    configure(so)
    return ort_session(_symbolic_model(), so)


def test_free_dimension_override_bad_arguments():
    so = ortlite.SessionOptions()
    with pytest.raises(TypeError):
        so.add_free_dimension_override_by_name(1, 2)
    with pytest.raises(TypeError):
        so.add_free_dimension_override_by_name("batch", "2")
    with pytest.raises(TypeError):
        so.add_free_dimension_override_by_name("batch", 2.0)
    with pytest.raises(TypeError):
        so.add_free_dimension_override_by_denotation("DATA_BATCH", True)
    with pytest.raises(TypeError):
        so.add_free_dimension_override_by_name("batch")
    # onnxruntime takes a negative value and reports it as the dimension; ortlite refuses it.
    with pytest.raises(ortlite.InvalidArgument, match="non-negative"):
        so.add_free_dimension_override_by_name("batch", -1)
    with pytest.raises(ortlite.InvalidArgument, match="non-negative"):
        so.add_free_dimension_override_by_denotation("DATA_BATCH", 1 << 64)
    # Nothing was recorded by the failed calls.
    sess = ortlite.InferenceSession(_symbolic_model(), so)
    assert sess.get_inputs()[0].shape == ["batch", 3]


def test_free_dimension_override_of_zero():
    sess, ref = _both(lambda so: so.add_free_dimension_override_by_name("batch", 0))
    feeds = {"x": np.ones((0, 3), F32), "w": np.ones((1, 2), F32)}
    assert sess.run(None, feeds)[0].shape == ref.run(None, feeds)[0].shape == (0, 3)


# --- 3. external data through symbolic links ----------------------------------------------------


def _external_model(location="data.bin"):
    vals = [float(i) for i in range(10)]
    t = helper.make_tensor("w", TensorProto.FLOAT, [10], vals)
    t.data_location = TensorProto.EXTERNAL
    t.ClearField("float_data")
    for k, v in (("location", location), ("offset", "0"), ("length", "40")):
        e = t.external_data.add()
        e.key, e.value = k, v
    g = helper.make_graph([helper.make_node("Constant", [], ["c"], value=t),
                           helper.make_node("Add", ["x", "c"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [10])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [10])])
    return helper.make_model(g, ir_version=8, opset_imports=[helper.make_opsetid("", 17)])


def _write_data(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("10f", *range(10)))


def _hub_layout(root, model_real, data_real, relative_links=False):
    """root/snapshots/rev/{model.onnx, data.bin} as symbolic links to model_real and
    data_real (paths under root), the way the Hugging Face cache lays out a snapshot."""
    snap = os.path.join(root, "snapshots", "rev")
    os.makedirs(snap)
    os.makedirs(os.path.dirname(os.path.join(root, model_real)), exist_ok=True)
    save(_external_model(), os.path.join(root, model_real))
    _write_data(os.path.join(root, data_real))
    for name, target in (("model.onnx", model_real), ("data.bin", data_real)):
        dest = os.path.join("..", "..", target) if relative_links else os.path.join(root, target)
        os.symlink(dest, os.path.join(snap, name))
    return os.path.join(snap, "model.onnx")


@pytest.mark.parametrize("relative", [False, True], ids=["absolute_links", "relative_links"])
@pytest.mark.parametrize("layout", [("blobs/guid1", "blobs/guid2"),
                                    ("blobs/guid1", "blobs/data/guid2")],
                         ids=["same_blob_dir", "data_in_blob_subdir"])
def test_symlinked_model_and_data_load(tmp_path, layout, relative):
    path = _hub_layout(str(tmp_path), *layout, relative_links=relative)
    x = np.zeros(10, F32)
    (y,) = ortlite.InferenceSession(path).run(None, {"x": x})
    np.testing.assert_array_equal(y, np.arange(10, dtype=F32))
    (ref,) = ort_session(path).run(None, {"x": x})
    np.testing.assert_array_equal(y, ref)


def test_symlinked_data_outside_both_model_dirs_is_refused(tmp_path):
    path = _hub_layout(str(tmp_path), "model/guid1", "data/guid2")
    with pytest.raises(ortlite.InvalidGraph, match="External data path validation failed") as e:
        ortlite.InferenceSession(path)
    assert "data.bin" in str(e.value) and "outside the model directory" in str(e.value)


def test_data_link_out_of_a_real_model_dir_is_refused(tmp_path):
    snap = tmp_path / "snap"
    snap.mkdir()
    save(_external_model(), str(snap / "model.onnx"))
    _write_data(str(tmp_path / "elsewhere" / "guid2"))
    os.symlink(str(tmp_path / "elsewhere" / "guid2"), str(snap / "data.bin"))
    with pytest.raises(ortlite.InvalidGraph, match="External data path validation failed"):
        ortlite.InferenceSession(str(snap / "model.onnx"))


def test_symlinked_directory_pointing_out_is_refused(tmp_path):
    # location "sub/data.bin" where sub -> a directory outside the model's.
    snap = tmp_path / "snap"
    snap.mkdir()
    save(_external_model("sub/data.bin"), str(snap / "model.onnx"))
    _write_data(str(tmp_path / "outside" / "data.bin"))
    os.symlink(str(tmp_path / "outside"), str(snap / "sub"))
    with pytest.raises(ortlite.InvalidGraph, match="External data path validation failed"):
        ortlite.InferenceSession(str(snap / "model.onnx"))


@pytest.mark.parametrize("location,message", [("../blobs/guid2", "'\\.\\.' component"),
                                              ("sub/../data.bin", "'\\.\\.' component"),
                                              ("ABS", "absolute path")])
def test_symlinked_model_still_refuses_dotdot_and_absolute_locations(tmp_path, location,
                                                                      message):
    # Even where the target would be allowed (the blob directory), the location as written
    # must be relative without '..'.
    path = _hub_layout(str(tmp_path), "blobs/guid1", "blobs/guid2")
    if location == "ABS":
        location = str(tmp_path / "blobs" / "guid2")
    save(_external_model(location), str(tmp_path / "blobs" / "guid1"))
    with pytest.raises(ortlite.InvalidGraph, match=message):
        ortlite.InferenceSession(path)


def test_symlinked_model_dir_loads(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    save(_external_model(), str(real / "model.onnx"))
    _write_data(str(real / "data.bin"))
    os.symlink(str(real), str(tmp_path / "link"))
    (y,) = ortlite.InferenceSession(str(tmp_path / "link" / "model.onnx")).run(
        None, {"x": np.ones(10, F32)})
    np.testing.assert_array_equal(y, np.arange(10, dtype=F32) + 1)


# --- 5. IOBinding ---------------------------------------------------------------------------


def _mul_model(dtype=F32, shape=(3, 2)):
    node = helper.make_node("Mul", ["X", "X"], ["Y"])
    return model_bytes(make_model([node], [("X", dtype, list(shape))], [("Y", dtype, list(shape))],
                                  ir_version=8))


def _identity_model(dtype=F32, shape=(3, 2)):
    node = helper.make_node("Identity", ["X"], ["Y"])
    return model_bytes(make_model([node], [("X", dtype, list(shape))], [("Y", dtype, list(shape))],
                                  ir_version=8))


def _pair(data=None):
    data = data or _mul_model()
    return ortlite.InferenceSession(data), ort_session(data)


X32 = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], F32)


def test_iobinding_cpu_input_and_output_like_onnxruntime():
    sess, ref = _pair()
    results = []
    for s in (sess, ref):
        b = s.io_binding()
        b.bind_cpu_input("X", X32.copy())
        b.bind_output("Y")
        s.run_with_iobinding(b)
        b.synchronize_inputs()
        b.synchronize_outputs()
        outs = b.get_outputs()
        assert len(outs) == 1 and outs[0].device_name() == "cpu" and outs[0].shape() == [3, 2]
        results.append((b.copy_outputs_to_cpu()[0], outs[0].numpy()))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(results[0][0], X32 * X32)
    assert isinstance(ortlite.IOBinding, type) and ortlite.IOBinding is ortlite.SessionIOBinding


def test_iobinding_sees_changes_to_a_bound_contiguous_array():
    sess, ref = _pair()
    for s in (sess, ref):
        x = X32.copy()
        b = s.io_binding()
        b.bind_cpu_input("X", x)
        b.bind_output("Y")
        x[0, 0] = 10.0
        s.run_with_iobinding(b)
        assert b.copy_outputs_to_cpu()[0][0, 0] == 100.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint32, np.int64,
                                   np.uint64, np.int16, np.uint16, np.int8, np.uint8,
                                   np.float16, np.bool_])
def test_iobinding_ortvalue_input_of_every_type(dtype):
    x = np.arange(6).reshape(3, 2).astype(dtype)
    sess = ortlite.InferenceSession(_identity_model(dtype))
    b = sess.io_binding()
    b.bind_ortvalue_input("X", ortlite.OrtValue.ortvalue_from_numpy(x))
    b.bind_output("Y")
    sess.run_with_iobinding(b)
    y = b.get_outputs()[0].numpy()
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(y, x)
    # Identity passes the feed through: the output is a copy, never the bound memory.
    assert not np.shares_memory(y, x)


def test_iobinding_raw_pointers_and_preallocated_outputs():
    sess, ref = _pair()
    for s in (sess, ref):
        x = X32.copy()
        y = np.zeros((3, 2), F32)
        b = s.io_binding()
        b.bind_input("X", "cpu", 0, np.float32, [3, 2], x.ctypes.data)
        b.bind_output("Y", "cpu", 0, np.float32, [3, 2], y.ctypes.data)
        s.run_with_iobinding(b)
        np.testing.assert_array_equal(y, X32 * X32)
        np.testing.assert_array_equal(b.copy_outputs_to_cpu()[0], y)
    # ortlite: element_type may also be an ONNX element type number.
    y = np.zeros((3, 2), F32)
    x = X32.copy()
    b = sess.io_binding()
    b.bind_input("X", "cpu", 0, TensorProto.FLOAT, (3, 2), x.ctypes.data)
    b.bind_output("Y", "cpu", 0, np.dtype("float32"), [3, 2], y.ctypes.data)
    sess.run_with_iobinding(b)
    np.testing.assert_array_equal(y, X32 * X32)
    # What comes back over the caller's memory is copied, never a view of it.
    out = b.get_outputs()[0].numpy()
    assert not np.shares_memory(out, y)


def test_iobinding_bound_ortvalue_output_is_written_and_returned():
    sess = ortlite.InferenceSession(_mul_model())
    out = ortlite.OrtValue.ortvalue_from_shape_and_type([3, 2], np.float32)
    b = sess.io_binding()
    b.bind_cpu_input("X", X32)
    b.bind_ortvalue_output("Y", out)
    sess.run_with_iobinding(b)
    np.testing.assert_array_equal(out.numpy(), X32 * X32)
    assert b.get_outputs()[0] is out
    b.bind_cpu_input("X", X32 * 2)
    sess.run_with_iobinding(b)
    np.testing.assert_array_equal(out.numpy(), (X32 * 2) ** 2)
    wrong = ortlite.OrtValue.ortvalue_from_shape_and_type([2, 2], np.float32)
    b.bind_ortvalue_output("Y", wrong)
    with pytest.raises(ortlite.InvalidArgument, match="Got invalid dimensions for output: Y"):
        sess.run_with_iobinding(b)
    b.bind_ortvalue_output("Y", ortlite.OrtValue.ortvalue_from_shape_and_type([3, 2], np.int32))
    with pytest.raises(ortlite.InvalidArgument, match="Unexpected output data type"):
        sess.run_with_iobinding(b)


def test_iobinding_each_run_makes_new_outputs():
    sess = ortlite.InferenceSession(_mul_model())
    b = sess.io_binding()
    b.bind_cpu_input("X", X32)
    b.bind_output("Y")
    sess.run_with_iobinding(b)
    first = b.get_outputs()[0]
    view = first.numpy()
    b.bind_cpu_input("X", X32 * 3)
    sess.run_with_iobinding(b)
    # (onnxruntime reuses the first run's buffer here; ortlite leaves handed-out values alone.)
    np.testing.assert_array_equal(view, X32 * X32)
    np.testing.assert_array_equal(b.get_outputs()[0].numpy(), (X32 * 3) ** 2)


def test_iobinding_clear_and_errors_like_onnxruntime():
    sess, ref = _pair()
    for s in (sess, ref):
        b = s.io_binding()
        assert b.get_outputs() == [] and b.copy_outputs_to_cpu() == []
        b.bind_cpu_input("X", X32)
        with pytest.raises(RuntimeError, match="At least one output should be requested"):
            s.run_with_iobinding(b)
        b.bind_output("Y")
        s.run_with_iobinding(b)
        b.clear_binding_outputs()
        assert b.get_outputs() == []
        with pytest.raises(RuntimeError, match="At least one output should be requested"):
            s.run_with_iobinding(b)
    b = sess.io_binding()
    b.bind_output("Y")
    with pytest.raises(ValueError, match=r"Required inputs \(\['X'\]\) are missing"):
        sess.run_with_iobinding(b)
    b.bind_cpu_input("X", X32)
    b.clear_binding_inputs()
    with pytest.raises(ValueError, match="Required inputs"):
        sess.run_with_iobinding(b)


def test_iobinding_bad_input_is_typed():
    sess = ortlite.InferenceSession(_mul_model())
    b = sess.io_binding()
    with pytest.raises(ortlite.InvalidArgument, match="Failed to find NodeArg with name: Q"):
        b.bind_cpu_input("Q", X32)
    with pytest.raises(ortlite.InvalidArgument, match="Invalid output name: Q"):
        b.bind_output("Q")
    with pytest.raises(ortlite.InvalidArgument, match="Unexpected input data type"):
        b.bind_cpu_input("X", X32.astype(np.int32))
    with pytest.raises(ortlite.InvalidArgument, match="Got invalid dimensions for input: X"):
        b.bind_cpu_input("X", np.zeros((2, 2), F32))
    with pytest.raises(ortlite.InvalidArgument, match="Unsupported device type: tpu"):
        b.bind_input("X", "tpu", 0, np.float32, [3, 2], X32.ctypes.data)
    with pytest.raises(ortlite.InvalidArgument, match="Unsupported device type: tpu"):
        b.bind_output("Y", "tpu")
    with pytest.raises(TypeError, match="device_id"):
        b.bind_output("Y", "cpu", "0")
    with pytest.raises(ortlite.InvalidArgument, match="null"):
        b.bind_input("X", "cpu", 0, np.float32, [3, 2], 0)
    with pytest.raises(ortlite.InvalidArgument, match="aligned"):
        b.bind_input("X", "cpu", 0, np.float32, [3, 2], X32.ctypes.data + 1)
    with pytest.raises(ortlite.InvalidArgument, match="negative"):
        b.bind_input("X", "cpu", 0, np.float32, [-3, 2], X32.ctypes.data)
    with pytest.raises(TypeError):
        b.bind_input("X", "cpu", 0, np.float32, [3, 2], "0x1234")
    with pytest.raises(TypeError):
        b.bind_input("X", "cpu", 0, "not a type", [3, 2], X32.ctypes.data)
    with pytest.raises(ValueError, match="`element_type` and `shape` are to be provided"):
        b.bind_output("Y", "cpu", 0, np.float32, None, X32.ctypes.data)
    with pytest.raises(ValueError, match="`element_type` and `shape` are to be provided"):
        b.bind_output("Y", "cpu", 0, None, [3, 2], X32.ctypes.data)
    with pytest.raises(TypeError, match="OrtValue"):
        b.bind_ortvalue_input("X", X32)
    with pytest.raises(TypeError, match="OrtValue"):
        b.bind_ortvalue_output("Y", X32)
    with pytest.raises(TypeError, match="bind_ortvalue_input"):
        b.bind_cpu_input("X", ortlite.OrtValue.ortvalue_from_numpy(X32))
    with pytest.raises(TypeError, match="SessionIOBinding"):
        sess.run_with_iobinding(5)
    b.bind_cpu_input("X", X32)
    b.bind_output("Y")
    with pytest.raises(TypeError, match="RunOptions"):
        sess.run_with_iobinding(b, 5)
    sess.run_with_iobinding(b, ortlite.RunOptions())
    other = ortlite.InferenceSession(_mul_model())
    with pytest.raises(ortlite.InvalidArgument, match="another InferenceSession"):
        other.run_with_iobinding(b)
    with pytest.raises(TypeError, match="InferenceSession"):
        ortlite.SessionIOBinding(5)


def test_bind_input_rejects_string_tensor():
    s_vi = helper.make_tensor_value_info("S", TensorProto.STRING, [2])
    t_vi = helper.make_tensor_value_info("T", TensorProto.STRING, [2])
    data = model_bytes(helper.make_model(
        helper.make_graph([helper.make_node("Identity", ["S"], ["T"])], "g", [s_vi], [t_vi]),
        ir_version=8, opset_imports=[helper.make_opsetid("", 17)]))
    sess = ortlite.InferenceSession(data)
    b = sess.io_binding()
    arr = np.array(["a", "bc"], dtype=object)
    for etype in (np.object_, np.str_, TensorProto.STRING):
        with pytest.raises(ortlite.InvalidArgument, match="non-string"):
            b.bind_input("S", "cpu", 0, etype, [2], arr.ctypes.data)
        with pytest.raises(ortlite.InvalidArgument, match="non-string"):
            b.bind_output("T", "cpu", 0, etype, [2], arr.ctypes.data)
    # By value (an array or an OrtValue) strings bind (onnxruntime refuses these too).
    b.bind_cpu_input("S", arr)
    b.bind_output("T")
    sess.run_with_iobinding(b)
    assert b.copy_outputs_to_cpu()[0].tolist() == ["a", "bc"]
    assert b.get_outputs()[0].numpy().tolist() == ["a", "bc"]


@no_gpu
def test_iobinding_cuda_without_a_device_is_epfail():
    sess = ortlite.InferenceSession(_mul_model())
    b = sess.io_binding()
    with pytest.raises(ortlite.EPFail, match="CUDA is not available"):
        b.bind_input("X", "cuda", 0, np.float32, [3, 2], X32.ctypes.data)
    with pytest.raises(ortlite.EPFail, match="CUDA is not available"):
        b.bind_output("Y", "cuda", 0)


@gpu
def test_iobinding_cuda_ortvalues_and_device_outputs():
    sess = ortlite.InferenceSession(_mul_model(), providers=[CUDA, CPU])
    b = sess.io_binding()
    b.bind_ortvalue_input("X", ortlite.OrtValue.ortvalue_from_numpy(X32, "cuda", 0))
    b.bind_output("Y", "cuda", 0)
    sess.run_with_iobinding(b)
    (out,) = b.get_outputs()
    assert out.device_name() == "cuda"
    np.testing.assert_array_equal(out.numpy(), X32 * X32)
    np.testing.assert_array_equal(b.copy_outputs_to_cpu()[0], X32 * X32)
    dst = ortlite.OrtValue.ortvalue_from_shape_and_type([3, 2], np.float32, "cuda", 0)
    b.bind_ortvalue_output("Y", dst)
    sess.run_with_iobinding(b)
    np.testing.assert_array_equal(dst.numpy(), X32 * X32)
    with pytest.raises(ortlite.NotImplemented, match="by address"):
        b.bind_input("X", "cuda", 0, np.float32, [3, 2], dst.data_ptr())


# Ownership: what a binding holds and when it lets go.


def test_iobinding_holds_a_bound_array_until_rebound_cleared_or_deleted():
    sess = ortlite.InferenceSession(_mul_model())
    x = X32.copy()
    base = sys.getrefcount(x)
    b = sess.io_binding()
    b.bind_cpu_input("X", x)
    assert sys.getrefcount(x) == base + 1
    b.bind_cpu_input("X", x)  # rebinding the same array keeps one reference
    assert sys.getrefcount(x) == base + 1
    b.bind_output("Y")
    for _ in range(5):
        sess.run_with_iobinding(b)
    assert sys.getrefcount(x) == base + 1
    b.bind_cpu_input("X", X32.copy())
    assert sys.getrefcount(x) == base
    b.bind_cpu_input("X", x)
    b.clear_binding_inputs()
    assert sys.getrefcount(x) == base
    b.bind_cpu_input("X", x)
    del b
    assert sys.getrefcount(x) == base


def test_iobinding_keeps_a_bound_array_alive_after_the_caller_drops_it():
    sess = ortlite.InferenceSession(_mul_model())
    b = sess.io_binding()
    x = X32.copy()
    ref = weakref.ref(x)
    b.bind_cpu_input("X", x)
    b.bind_output("Y")
    del x
    gc.collect()
    assert ref() is not None
    sess.run_with_iobinding(b)
    np.testing.assert_array_equal(b.copy_outputs_to_cpu()[0], X32 * X32)
    b.clear_binding_inputs()
    gc.collect()
    assert ref() is None


def test_iobinding_ortvalue_refs_and_session_lifetime():
    sess = ortlite.InferenceSession(_mul_model())
    sref = weakref.ref(sess)
    inp = ortlite.OrtValue.ortvalue_from_numpy(X32)
    out = ortlite.OrtValue.ortvalue_from_shape_and_type([3, 2], np.float32)
    in_base, out_base = sys.getrefcount(inp), sys.getrefcount(out)
    b = sess.io_binding()
    b.bind_ortvalue_input("X", inp)
    b.bind_ortvalue_output("Y", out)
    sess.run_with_iobinding(b)
    assert sys.getrefcount(inp) == in_base + 1
    assert sys.getrefcount(out) == out_base + 2  # the binding and its last results
    del sess
    gc.collect()
    assert sref() is not None  # the binding keeps its session
    bref = weakref.ref(b)
    b.clear_binding_outputs()
    assert sys.getrefcount(out) == out_base
    del b
    gc.collect()
    assert bref() is None and sref() is None
    assert sys.getrefcount(inp) == in_base


def test_iobinding_outputs_outlive_the_binding_and_session():
    sess = ortlite.InferenceSession(_mul_model())
    b = sess.io_binding()
    b.bind_cpu_input("X", X32)
    b.bind_output("Y")
    sess.run_with_iobinding(b)
    (ov,) = b.get_outputs()
    arr = ov.numpy()
    copied = b.copy_outputs_to_cpu()[0]
    assert copied.flags.owndata and copied.base is None
    del b, sess, ov
    gc.collect()
    np.testing.assert_array_equal(arr, X32 * X32)
    # A run output is owned memory: the view's base owns it, not the caller.
    assert arr.base is not None


def test_iobinding_in_a_reference_cycle_is_collected():
    sess = ortlite.InferenceSession(_mul_model())
    b = sess.io_binding()
    x = X32.copy()
    base = sys.getrefcount(x)
    b.bind_cpu_input("X", x)
    holder = [b]
    b.bind_output("Y")
    sess.run_with_iobinding(b)
    holder.append(holder)  # a cycle through a list
    bref = weakref.ref(b)
    del b, holder
    gc.collect()
    assert bref() is None
    assert sys.getrefcount(x) == base


def test_iobinding_runs_leak_nothing():
    sess = ortlite.InferenceSession(_mul_model())
    x = X32.copy()
    b = sess.io_binding()
    b.bind_cpu_input("X", x)
    b.bind_output("Y")
    sess.run_with_iobinding(b)
    base_x, base_b, base_s = sys.getrefcount(x), sys.getrefcount(b), sys.getrefcount(sess)
    for _ in range(50):
        sess.run_with_iobinding(b)
        b.get_outputs()
        b.copy_outputs_to_cpu()
    assert (sys.getrefcount(x), sys.getrefcount(b), sys.getrefcount(sess)) == (base_x, base_b,
                                                                                base_s)


# --- OrtDevice ------------------------------------------------------------------------------


def test_ortdevice_like_onnxruntime():
    for name, dev_id in (("cpu", 0), ("cuda", 1), ("gpu", 0)):
        ours, theirs = ortlite.OrtDevice.make(name, dev_id), onnxruntime.OrtDevice.make(name, dev_id)
        assert (ours.device_type(), ours.device_id(), ours.device_mem_type()) == (
            theirs.device_type(), theirs.device_id(), theirs.device_mem_type())
    assert ortlite.OrtDevice.cpu() == 0 and ortlite.OrtDevice.cuda() == 1
    assert ortlite.OrtDevice.default_memory() == 0
    assert ortlite.OrtDevice.make("cuda", 0, 0x10DE).device_vendor_id() == 0x10DE
    assert ortlite.OrtDevice.make("cpu", 0) == ortlite.OrtDevice.make("cpu", 0)
    with pytest.raises(ortlite.InvalidArgument, match="Unsupported device type: tpu"):
        ortlite.OrtDevice.make("tpu", 0)
    with pytest.raises(TypeError):
        ortlite.OrtDevice.make("cpu", "0")
    with pytest.raises(TypeError):
        ortlite.OrtDevice.make(0, 0)


def test_ortdevice_vendor_ids_and_device_type_constants():
    # onnxruntime 1.23 has neither OrtDeviceVendorId nor a vendor for make("cuda"); the
    # values are the PCI vendor ids onnxruntime's later releases use.
    v = ortlite.OrtDeviceVendorId
    assert (v.NONE, v.AMD, v.NVIDIA, v.MICROSOFT, v.INTEL) == (0, 0x1002, 0x10DE, 0x1414, 0x8086)
    assert ortlite.OrtDevice.make("cuda", 0).device_vendor_id() == v.NVIDIA
    assert ortlite.OrtDevice.make("gpu", 0).device_vendor_id() == v.NONE
    assert ortlite.OrtDevice.make("cpu", 0).device_vendor_id() == v.NONE
    assert ortlite.OrtDevice.make("cuda", 0, 0).device_vendor_id() == 0
    # The C-level constants of onnxruntime's OrtDevice, for providers ortlite does not run.
    theirs = onnxruntime.capi._pybind_state.OrtDevice
    for name in ("cpu", "cuda", "gpu", "fpga", "npu", "dml", "webgpu", "cann", "default_memory"):
        assert getattr(ortlite.OrtDevice, name)() == getattr(theirs, name)(), name
    with pytest.raises(ortlite.InvalidArgument, match="device type 4 is not one ortlite knows"):
        ortlite.OrtDevice(ortlite.OrtDevice.dml(), 0, 0)
    with pytest.raises(TypeError):
        ortlite.OrtDevice.make("cuda", 0, "nvidia")
