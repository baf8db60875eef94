"""Every error of the Python API: its exact class and a message that names what is wrong."""

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import ortlite
from helpers import add_model, make_model, model_bytes, subprocess_env

F32 = np.float32

ERROR_NAMES = ["Fail", "InvalidArgument", "NoSuchFile", "NoModel", "EngineError",
               "RuntimeException", "InvalidProtobuf", "ModelLoaded", "NotImplemented",
               "InvalidGraph", "EPFail"]


@pytest.fixture(scope="module")
def sess():
    return ortlite.InferenceSession(add_model(["N", 3]))


def feeds(n=2):
    return {"x": np.ones((n, 3), F32), "y": np.ones((n, 3), F32)}


def test_hierarchy():
    assert issubclass(ortlite.OrtliteError, RuntimeError)
    for name in ERROR_NAMES:
        cls = getattr(ortlite, name)
        assert issubclass(cls, ortlite.OrtliteError), name
        assert cls.__name__ == name
        assert cls.__module__ == "ortlite"
    assert len({getattr(ortlite, n) for n in ERROR_NAMES}) == len(ERROR_NAMES)
    # onnxruntime has the same names
    from onnxruntime.capi import onnxruntime_pybind11_state as C

    for name in ERROR_NAMES:
        assert hasattr(C, name), name


def test_missing_file_is_no_such_file(tmp_path):
    path = tmp_path / "does_not_exist.onnx"
    with pytest.raises(ortlite.NoSuchFile, match="does_not_exist"):
        ortlite.InferenceSession(str(path))
    with pytest.raises(ortlite.NoSuchFile):
        ortlite.InferenceSession(path)


def test_garbage_bytes_are_invalid_protobuf():
    for junk in (b"\xff\xff\xff\xff\xff", b"this is not an onnx model at all",
                 bytes(range(256)) * 4):
        with pytest.raises(ortlite.InvalidProtobuf):
            ortlite.InferenceSession(junk)


def test_garbage_file_is_invalid_protobuf(tmp_path):
    path = tmp_path / "junk.onnx"
    path.write_bytes(b"\xff\xfe garbage \x00\x01")
    with pytest.raises(ortlite.InvalidProtobuf):
        ortlite.InferenceSession(str(path))


@pytest.mark.parametrize("bad", [42, 3.5, None, ["m.onnx"], object()])
def test_bad_model_argument_is_type_error(bad):
    with pytest.raises(TypeError, match="path_or_bytes"):
        ortlite.InferenceSession(bad)


def test_missing_input_is_value_error_with_onnxruntime_message(sess):
    with pytest.raises(ValueError) as ours:
        sess.run(None, {"x": np.ones((2, 3), F32)})
    ref = onnxruntime.InferenceSession(add_model(["N", 3]), providers=["CPUExecutionProvider"])
    with pytest.raises(ValueError) as theirs:
        ref.run(None, {"x": np.ones((2, 3), F32)})
    assert str(ours.value) == "Required inputs (['y']) are missing from input feed (['x'])."
    assert str(ours.value) == str(theirs.value)
    with pytest.raises(ValueError, match=r"Required inputs \(\['x', 'y'\]\) are missing from "
                                         r"input feed \(\[\]\)\."):
        sess.run(None, {})


def test_unknown_input_name(sess):
    f = feeds()
    f["bogus_input"] = np.ones((2, 3), F32)
    with pytest.raises(ortlite.InvalidArgument, match="bogus_input"):
        sess.run(None, f)


def test_wrong_element_type(sess):
    f = feeds()
    f["y"] = f["y"].astype(np.float64)
    with pytest.raises(ortlite.InvalidArgument, match=r"(?s)'y'.*double.*float"):
        sess.run(None, f)


def test_wrong_rank(sess):
    f = feeds()
    f["x"] = np.ones((2, 3, 1), F32)
    with pytest.raises(ortlite.InvalidArgument, match="x"):
        sess.run(None, f)


def test_static_dim_mismatch(sess):
    f = feeds()
    f["y"] = np.ones((2, 4), F32)
    with pytest.raises(ortlite.InvalidArgument, match="y"):
        sess.run(None, f)


def test_unknown_output_name(sess):
    with pytest.raises(ortlite.InvalidArgument, match="no_such_output"):
        sess.run(["no_such_output"], feeds())
    with pytest.raises(ortlite.InvalidArgument, match="no_such_output"):
        sess.run(["z", "no_such_output"], feeds())


@pytest.mark.parametrize("bad", [None, [("x", 1)], "x", 3])
def test_input_feed_not_a_dict(sess, bad):
    with pytest.raises(TypeError, match="input_feed"):
        sess.run(None, bad)


def test_input_name_not_str(sess):
    f = feeds()
    f[1] = np.ones((2, 3), F32)
    with pytest.raises(TypeError):
        sess.run(None, f)


@pytest.mark.parametrize("bad", ["z", 3, [1], [b"z"]])
def test_output_names_wrong_type(sess, bad):
    with pytest.raises(TypeError):
        sess.run(bad, feeds())


def test_run_options_wrong_type(sess):
    with pytest.raises(TypeError, match="run_options"):
        sess.run(None, feeds(), {"terminate": True})
    with pytest.raises(TypeError, match="run_options"):
        sess.run(None, feeds(), ortlite.SessionOptions())


def test_run_with_ort_values_needs_ortvalues(sess):
    with pytest.raises(TypeError, match="x"):
        sess.run_with_ort_values(None, feeds())


def test_unsupported_numpy_dtype_names_the_input(sess):
    f = feeds()
    f["x"] = np.ones((2, 3), np.complex64)
    with pytest.raises(ortlite.InvalidArgument, match="x"):
        sess.run(None, f)


def test_wrong_number_of_run_arguments(sess):
    with pytest.raises(TypeError):
        sess.run(None)
    with pytest.raises(TypeError):
        sess.run(None, feeds(), None, None)


def test_sess_options_wrong_type():
    with pytest.raises(TypeError, match="sess_options"):
        ortlite.InferenceSession(add_model(["N", 3]), sess_options={"intra_op_num_threads": 1})


def test_model_loaded_twice():
    s = ortlite.InferenceSession(add_model(["N", 3]))
    with pytest.raises(ortlite.ModelLoaded):
        s.__init__(add_model(["N", 3]))
    # still usable
    assert s.run(None, feeds())[0].shape == (2, 3)


def test_no_model_when_init_was_skipped():
    class Lazy(ortlite.InferenceSession):
        def __init__(self):
            pass

    s = Lazy()
    for call in (lambda: s.run(None, feeds()), s.get_inputs, s.get_outputs, s.get_modelmeta,
                 s.get_providers, s.get_session_options):
        with pytest.raises(ortlite.NoModel):
            call()


def test_failed_init_leaves_no_model(tmp_path):
    s = ortlite.InferenceSession.__new__(ortlite.InferenceSession)
    with pytest.raises(ortlite.NoSuchFile):
        s.__init__(str(tmp_path / "missing.onnx"))
    with pytest.raises(ortlite.NoModel):
        s.get_inputs()
    s.__init__(add_model(["N", 3]))  # a later successful init works
    assert [a.name for a in s.get_inputs()] == ["x", "y"]


def test_unknown_op_is_not_implemented():
    node = helper.make_node("NoSuchOperatorXyz", ["x"], ["y"], name="weird_node")
    data = model_bytes(make_model([node], [("x", F32, [2])], [("y", F32, [2])]))
    with pytest.raises(ortlite.NotImplemented, match="NoSuchOperatorXyz"):
        ortlite.InferenceSession(data)


def test_dangling_node_input_is_invalid_graph():
    node = helper.make_node("Add", ["x", "nobody_makes_this"], ["y"])
    data = model_bytes(make_model([node], [("x", F32, [2])], [("y", F32, [2])]))
    with pytest.raises(ortlite.InvalidGraph, match="nobody_makes_this"):
        ortlite.InferenceSession(data)


def test_terminated_run_fails(sess):
    ro = ortlite.RunOptions()
    ro.terminate = True
    with pytest.raises(ortlite.Fail, match="terminat"):
        sess.run(None, feeds(), ro)


def test_config_entry_errors():
    with pytest.raises(ortlite.InvalidArgument, match="nope"):
        ortlite.SessionOptions().get_session_config_entry("nope")
    with pytest.raises(ortlite.InvalidArgument, match="nope"):
        ortlite.RunOptions().get_run_config_entry("nope")
    with pytest.raises(TypeError):
        ortlite.SessionOptions().add_session_config_entry("k", 1)
    with pytest.raises(TypeError):
        ortlite.RunOptions().add_run_config_entry(1, "v")


def test_cannot_delete_attributes():
    so, ro = ortlite.SessionOptions(), ortlite.RunOptions()
    with pytest.raises(TypeError):
        del so.intra_op_num_threads
    with pytest.raises(TypeError):
        del ro.terminate


def test_types_that_cannot_be_instantiated():
    for cls in (ortlite.OrtValue, ortlite.NodeArg, ortlite.ModelMetadata):
        with pytest.raises(TypeError):
            cls()


def test_element_type_errors():
    with pytest.raises(TypeError):
        ortlite.OrtValue.ortvalue_from_shape_and_type([2], "not a dtype")
    with pytest.raises(ortlite.InvalidArgument):
        ortlite.OrtValue.ortvalue_from_shape_and_type([2], np.complex64)
    with pytest.raises(ortlite.InvalidArgument):
        ortlite.OrtValue.ortvalue_from_shape_and_type([2], 999)
    with pytest.raises(ortlite.InvalidArgument):
        ortlite.OrtValue.ortvalue_from_numpy(np.zeros(2, F32), "tpu")


def test_string_feed_to_float_input_is_invalid_argument(sess):
    f = feeds()
    f["x"] = np.array([["a", "b", "c"], ["d", "e", "f"]])
    with pytest.raises(ortlite.InvalidArgument, match="x"):
        sess.run(None, f)


def test_errors_are_catchable_as_runtime_error(sess):
    with pytest.raises(RuntimeError):
        sess.run(["nope"], feeds())


def test_unknown_input_with_list_value_is_invalid_argument(sess):
    f = feeds()
    f["extra"] = [1, 2, 3]
    with pytest.raises(ortlite.InvalidArgument, match="extra"):
        sess.run(None, f)


# ---- one translation: run() and run_async raise the same class for the same failure -----

def _async_outcomes(sess, feed):
    """(exception class name from the Future, the callback's err)."""
    import threading

    try:
        sess.run_async(None, feed).result(timeout=60)
        from_future = "ok"
    except Exception as e:  # noqa: BLE001  (the class is what is compared)
        from_future = type(e).__name__
    done, errs = threading.Event(), []
    sess.run_async(None, feed, lambda r, u, e: (errs.append(e), done.set()), None)
    assert done.wait(60)
    return from_future, errs[0]


def test_core_failure_has_the_same_class_sync_and_async():
    # Add of non-broadcastable shapes fails inside the run, after the feeds were accepted.
    s = ortlite.InferenceSession(add_model(["N", 3]))
    feed = {"x": np.ones((2, 3), F32), "y": np.ones((5, 3), F32)}
    with pytest.raises(ortlite.OrtliteError) as sync:
        s.run(None, feed)
    from_future, err = _async_outcomes(s, feed)
    assert from_future == type(sync.value).__name__
    assert err == str(sync.value)


def test_bad_feed_has_the_same_class_sync_and_async(sess):
    feed = {"x": np.ones((2, 3), np.float64), "y": np.ones((2, 3), F32)}
    with pytest.raises(ortlite.InvalidArgument) as sync:
        sess.run(None, feed)
    with pytest.raises(ortlite.InvalidArgument) as in_async:
        sess.run_async(None, feed)
    assert str(in_async.value) == str(sync.value)


OUT_OF_MEMORY = r"""
import resource, threading
import numpy as np
import ortlite
from onnx import helper, TensorProto as TP
g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TP.FLOAT, [None])],
                      [helper.make_tensor_value_info("y", TP.FLOAT, [None])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 10
sess = ortlite.InferenceSession(m.SerializeToString())
sess.run_async(None, {"x": np.ones(4, np.float32)}).result()  # the async workers exist
x = np.ones(1 << 28, np.float32)  # 1 GiB: its output copy cannot fit under the limit
with open("/proc/self/status") as f:
    vm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize"))
resource.setrlimit(resource.RLIMIT_AS, (vm + (256 << 20), resource.RLIM_INFINITY))
out = []
for how in ("run", "future"):
    try:
        if how == "run":
            sess.run(None, {"x": x})
        else:
            sess.run_async(None, {"x": x}).result()
        out.append("ok")
    except BaseException as e:
        out.append(type(e).__name__)
done, errs = threading.Event(), []
sess.run_async(None, {"x": x}, lambda r, u, e: (errs.append(e), done.set()), None)
done.wait(60)
out.append(errs[0])
print(repr(out))
"""


def test_out_of_memory_has_the_same_class_sync_and_async():
    import os
    import subprocess
    import sys

    env = subprocess_env(keep_pythonpath=False)
    if os.environ.get("ORTLITE_TEST_PATH"):
        pytest.skip("a sanitizer build reserves far more address space than RLIMIT_AS allows")
    out = subprocess.run([sys.executable, "-c", OUT_OF_MEMORY], env=env, capture_output=True,
                         text=True, timeout=120, cwd="/")
    assert out.returncode == 0, out.stderr[-2000:]
    run_cls, future_cls, err = eval(out.stdout)
    assert run_cls == future_cls == "MemoryError", out.stdout
    assert err.startswith("Unable to allocate 1.00 GiB"), err

# --- feeds of the wrong kind, and arrays checked before they are copied -------------------


def seq_model():
    g = helper.make_graph([helper.make_node("SequenceLength", ["S"], ["n"])], "g",
                          [helper.make_tensor_sequence_value_info("S", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info("n", TensorProto.INT64, [])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return model_bytes(m)


def fixed_model(dtype=F32, shape=(2, 3)):
    return model_bytes(make_model([helper.make_node("Identity", ["X"], ["Y"])],
                             [("X", dtype, list(shape))], [("Y", dtype, None)]))


def ort_error(data, feed):
    s = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    with pytest.raises(Exception) as e:
        s.run(None, feed)
    return type(e.value).__name__


@pytest.mark.parametrize("value,given", [
    (np.zeros(3, F32), "numpy.ndarray"), (5, "int"), ({"a": np.zeros(1, F32)}, "dict"),
    (np.float32(1), "numpy.float32")])
def test_a_non_list_fed_to_a_sequence_input_is_invalid_argument(value, given):
    data = seq_model()
    with pytest.raises(ortlite.InvalidArgument) as e:
        ortlite.InferenceSession(data).run(None, {"S": value})
    assert str(e.value) == (f"input 'S' is a seq(tensor(float)): feed a list of arrays, "
                            f"not {given}")
    if isinstance(value, np.ndarray):
        assert ort_error(data, {"S": value}) == "InvalidArgument"


@pytest.mark.parametrize("declared", ["fixed", "dynamic", "untyped"])
def test_a_dict_fed_to_a_tensor_input_is_invalid_argument(declared):
    shape = {"fixed": (2, 3), "dynamic": ("N", 3), "untyped": None}[declared]
    data = model_bytes(make_model([helper.make_node("Identity", ["X"], ["Y"])],
                             [("X", F32, None if shape is None else list(shape))],
                             [("Y", F32, None)]))
    feed = {"X": {"a": 1.0}}
    with pytest.raises(ortlite.InvalidArgument,
                       match=r"^Unexpected input data type for input 'X'\. Actual: \(dict\) , "
                             r"expected: \(tensor\(float\)\)"):
        ortlite.InferenceSession(data).run(None, feed)
    assert ort_error(data, feed) == "InvalidArgument"


def test_an_unknown_name_is_refused_before_its_value_is_converted(sess):
    f = feeds()
    f["bogus"] = {"a": 1}  # numpy cannot convert it: the name is what is wrong
    with pytest.raises(ortlite.InvalidArgument, match=r"^Invalid input name: bogus \("):
        sess.run(None, f)


@pytest.mark.parametrize("view,message", [
    # 4 bytes each, 3.64 TiB once contiguous: refused on their shape, nothing is copied.
    (lambda: np.broadcast_to(np.float32(1), (10**6, 10**6)),
     "Got invalid dimensions for input: X for the following indices index: 0 Got: 1000000 "
     "Expected: 2 index: 1 Got: 1000000 Expected: 3 Please fix"),
    (lambda: np.broadcast_to(np.float32(1), (10**6, 10**6, 2)),
     "Invalid rank for input: X Got: 3 Expected: 2 Please fix"),
    (lambda: np.broadcast_to(np.float64(1), (2, 3)),
     "Unexpected input data type for input 'X'. Actual: (tensor(double)) , expected: "
     "(tensor(float))"),
    (lambda: np.broadcast_to(np.float64(1), (10**6, 10**6)),
     "Unexpected input data type for input 'X'. Actual: (tensor(double)) , expected: "
     "(tensor(float))"),
    (lambda: np.broadcast_to(np.array("s", object), (10**6, 10**6)),
     "Unexpected input data type for input 'X'. Actual: (tensor(string)) , expected: "
     "(tensor(float))"),
])
def test_a_broadcast_view_is_checked_before_it_is_copied(view, message):
    data = fixed_model()
    with pytest.raises(ortlite.InvalidArgument) as e:
        ortlite.InferenceSession(data).run(None, {"X": view()})
    assert str(e.value).startswith(message), str(e.value)


def test_a_small_broadcast_view_of_the_declared_shape_runs():
    (y,) = ortlite.InferenceSession(fixed_model()).run(
        None, {"X": np.broadcast_to(np.arange(3, dtype=F32), (2, 3))})
    assert y.tolist() == [[0, 1, 2], [0, 1, 2]]


def test_a_sequence_element_of_the_wrong_type_is_refused_before_it_is_copied():
    with pytest.raises(ortlite.InvalidArgument) as e:
        ortlite.InferenceSession(seq_model()).run(
            None, {"S": [np.zeros(2, F32), np.broadcast_to(np.float64(1), (10**6, 10**6))]})
    assert str(e.value) == ("input 'S' is a seq(tensor(float)) but an element has type "
                            "tensor(double)")


# --- outputs no size can hold, or numpy cannot represent ------------------------------------

BIG = 2**62


def shape_model(op):
    """Y = op(...) of shape S (int64 [k]): ConstantOfShape(S), Expand(1, S), Tile(ones, S),
    Reshape(empty, S)."""
    node = {"ConstantOfShape": helper.make_node("ConstantOfShape", ["S"], ["Y"], name="make"),
            "Expand": helper.make_node("Expand", ["one", "S"], ["Y"], name="make"),
            "Tile": helper.make_node("Tile", ["ones", "S"], ["Y"], name="make"),
            "Reshape": helper.make_node("Reshape", ["empty", "S"], ["Y"], name="make")}[op]
    inits = [helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0]),
             helper.make_tensor("ones", TensorProto.FLOAT, [1, 1], [1.0]),
             helper.make_tensor("empty", TensorProto.FLOAT, [0], [])]
    used = [t for t in inits if t.name in node.input]
    return model_bytes(make_model([node], [("S", np.int64, [2])], [("Y", F32, None)],
                             initializers=used))


@pytest.mark.parametrize("op,shape", [("ConstantOfShape", [0, BIG]), ("Expand", [0, BIG]),
                                      ("Tile", [0, BIG]), ("Reshape", [0, BIG]),
                                      ("ConstantOfShape", [BIG, 0]), ("Tile", [BIG, 0])])
def test_an_empty_output_numpy_cannot_represent_is_fail(op, shape):
    data = shape_model(op)
    feed = {"S": np.array(shape, np.int64)}
    # onnxruntime computes it and then fails in numpy ("array is too big"), untyped.
    with pytest.raises(ValueError, match="array is too big"):
        onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feed)
    sess = ortlite.InferenceSession(data)
    with pytest.raises(ortlite.Fail) as e:
        sess.run(None, feed)
    s = shape_to_str(feed["S"])
    assert str(e.value) == (
        f"output 'Y' of {op} node 'make': a tensor(float) of shape {s} cannot be a numpy "
        "array: numpy needs the product of its nonzero dimensions times the element size "
        "(4 bytes) to fit in 9223372036854775807 bytes")
    # As an OrtValue it exists (shape and all); only numpy() refuses it.
    (ov,) = sess.run_with_ort_values(None, {"S": ortlite.OrtValue.ortvalue_from_numpy(feed["S"])})
    assert ov.shape() == feed["S"].tolist()
    with pytest.raises(ortlite.Fail, match=r"cannot be a numpy array"):
        ov.numpy()


def shape_to_str(s):
    return "[" + ",".join(str(int(d)) for d in s) + "]"


@pytest.mark.parametrize("op", ["ConstantOfShape", "Expand", "Tile"])
def test_an_output_whose_element_count_overflows_is_a_typed_error(op):
    feed = {"S": np.array([BIG, 4], np.int64)}
    with pytest.raises(ortlite.InvalidArgument) as e:
        ortlite.InferenceSession(shape_model(op)).run(None, feed)
    assert str(e.value).startswith(f"{op} node 'make': "), str(e.value)
    assert "[4611686018427387904,4]" in str(e.value) and "too many elements" in str(e.value)


@pytest.mark.parametrize("op", ["ConstantOfShape", "Expand", "Tile"])
def test_an_output_whose_byte_size_overflows_is_fail(op):
    # 2^61 float elements: countable in int64, but 2^63 bytes are not.
    feed = {"S": np.array([2**60, 2], np.int64)}
    data = shape_model(op)
    with pytest.raises(onnxruntime.capi.onnxruntime_pybind11_state.RuntimeException):
        onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feed)
    with pytest.raises(ortlite.Fail) as e:
        ortlite.InferenceSession(data).run(None, feed)
    assert str(e.value).startswith(f"{op} node 'make': "), str(e.value)
    assert ("output shape [1152921504606846976,2] is too large: 2305843009213693952 elements "
            "of 4 bytes overflow a 64-bit byte size") in str(e.value)


def test_a_reduction_output_whose_byte_size_overflows_is_fail():
    # ReduceSum over axis 0 of an empty [0, 2^62] tensor: 2^62 zeros, 2^64 bytes.
    nodes = [helper.make_node("ConstantOfShape", ["S"], ["Z"]),
             helper.make_node("ReduceSum", ["Z", "ax"], ["Y"], keepdims=0, name="sum")]
    data = model_bytes(make_model(nodes, [("S", np.int64, [2])], [("Y", F32, None)],
                             initializers=[helper.make_tensor("ax", TensorProto.INT64, [1], [0])]))
    with pytest.raises(ortlite.Fail) as e:
        ortlite.InferenceSession(data).run(None, {"S": np.array([0, BIG], np.int64)})
    assert str(e.value) == ("ReduceSum node 'sum': output shape [4611686018427387904] is too "
                            "large: 4611686018427387904 elements of 4 bytes overflow a 64-bit "
                            "byte size")
