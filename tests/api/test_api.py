"""The Python API of ortlite against onnxruntime's: module functions, InferenceSession,
NodeArg, ModelMetadata, SessionOptions, RunOptions, OrtValue, ownership of outputs,
reference counts, weak references, threads."""

import gc
import inspect
import io
import os
import pathlib
import sys
import threading
import time
import warnings
import weakref

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import ROOT, add_model, assert_same, identity_model, make_model, model_bytes, run_ort

F32 = np.float32


def ort_session(data):
    return onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])


def _nodeargs(args):
    return [(a.name, a.type, a.shape) for a in args]


# --- module ---------------------------------------------------------------------------------


def _cuda_usable():
    info = ortlite._ortlite._cuda_info()
    return info["loaded"] and info["device_count"] > 0


def test_module_functions():
    expected = (["CUDAExecutionProvider", "CPUExecutionProvider"] if _cuda_usable()
                else ["CPUExecutionProvider"])
    assert ortlite.get_available_providers() == expected
    allp = ortlite.get_all_providers()
    assert "CUDAExecutionProvider" in allp and "CPUExecutionProvider" in allp
    assert allp == onnxruntime.get_all_providers()
    assert ortlite.get_device() == ("GPU" if _cuda_usable() else "CPU")
    assert ortlite.__version__ == "0.1.0"
    assert ortlite.get_version_string() == ortlite.__version__
    ortlite.set_default_logger_severity(3)
    ortlite.set_default_logger_verbosity(0)
    ortlite.set_seed(1)
    ortlite.disable_telemetry_events()
    ortlite.enable_telemetry_events()
    with pytest.raises(ValueError):
        ortlite.set_default_logger_severity(9)


def test_enums_match_onnxruntime():
    for name, member in onnxruntime.GraphOptimizationLevel.__members__.items():
        assert int(getattr(ortlite.GraphOptimizationLevel, name)) == int(member)
    for name, member in onnxruntime.ExecutionMode.__members__.items():
        assert int(getattr(ortlite.ExecutionMode, name)) == int(member)
    assert ortlite.GraphOptimizationLevel.ORT_ENABLE_ALL == 99
    assert ortlite.ExecutionMode.ORT_PARALLEL == 1


def test_package_imports_only_numpy_and_stdlib():
    import subprocess

    code = ("import sys, ortlite\n"
            "bad = [m for m in ('onnx', 'onnxruntime', 'google.protobuf') if m in sys.modules]\n"
            "print(bad)\n")
    root = ROOT
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


# --- loading --------------------------------------------------------------------------------


def test_load_from_str_pathlike_bytes_bytearray_memoryview(tmp_path):
    data = add_model()
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    x = np.arange(6, dtype=F32).reshape(2, 3)
    for src in (str(path), path, data, bytearray(data), memoryview(data)):
        sess = ortlite.InferenceSession(src)
        (z,) = sess.run(None, {"x": x, "y": x})
        np.testing.assert_array_equal(z, x + x)


def test_bytes_are_copied():
    data = bytearray(add_model())
    sess = ortlite.InferenceSession(data)
    data[:] = b"\0" * len(data)  # the session must not depend on the caller's bytes
    x = np.ones((2, 3), F32)
    np.testing.assert_array_equal(sess.run(None, {"x": x, "y": x})[0], x + x)


def test_kwargs_of_onnxruntime_are_accepted():
    sess = ortlite.InferenceSession(add_model(), None, None, None, disabled_optimizers=["x"])
    assert sess.get_providers() == ["CPUExecutionProvider"]


# --- NodeArg and metadata vs onnxruntime ---------------------------------------------------


def shapes_model():
    """Inputs with fixed, symbolic, unknown and missing dims; initializers that are inputs."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, None])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    s = helper.make_tensor_value_info("s", TensorProto.INT64, [])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [3])
    names = helper.make_tensor_value_info("names", TensorProto.STRING, ["batch"])
    flags = helper.make_tensor_value_info("flags", TensorProto.BOOL, [2, "k"])
    h = helper.make_tensor_value_info("h", TensorProto.FLOAT16, [1])
    d = helper.make_tensor_value_info("d", TensorProto.DOUBLE, [None])
    outs = [
        helper.make_tensor_value_info("ox", TensorProto.FLOAT, ["N", 3, None]),
        helper.make_tensor_value_info("oy", TensorProto.FLOAT, ["M", 2]),
        helper.make_tensor_value_info("os", TensorProto.INT64, []),
        helper.make_tensor_value_info("ob", TensorProto.FLOAT, [3]),
        helper.make_tensor_value_info("onames", TensorProto.STRING, ["batch"]),
        helper.make_tensor_value_info("oflags", TensorProto.BOOL, [2, "k"]),
        helper.make_tensor_value_info("oh", TensorProto.FLOAT16, [1]),
        helper.make_tensor_value_info("od", TensorProto.DOUBLE, [None]),
    ]
    nodes = [helper.make_node("Identity", [i], [o])
             for i, o in [("x", "ox"), ("y", "oy"), ("s", "os"), ("b", "ob"), ("names", "onames"),
                          ("flags", "oflags"), ("h", "oh"), ("d", "od")]]
    init = numpy_helper.from_array(np.array([1, 2, 3], F32), "b")
    graph = helper.make_graph(nodes, "shapes_graph", [x, y, s, b, names, flags, h, d], outs,
                              initializer=[init], doc_string="the graph's doc")
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="ortlite-tests", producer_version="1.2",
                              domain="test.domain", model_version=42, doc_string="the model's doc")
    helper.set_model_props(model, {"author": "me", "license": "MIT", "empty": ""})
    model.ir_version = 10
    return model_bytes(model)


def test_nodeargs_match_onnxruntime():
    data = shapes_model()
    ours, ref = ortlite.InferenceSession(data), ort_session(data)
    assert _nodeargs(ours.get_inputs()) == _nodeargs(ref.get_inputs())
    assert _nodeargs(ours.get_outputs()) == _nodeargs(ref.get_outputs())
    assert _nodeargs(ours.get_overridable_initializers()) == _nodeargs(
        ref.get_overridable_initializers())
    # Spot checks, so the test does not only compare two empty lists.
    assert [a.name for a in ours.get_inputs()] == ["x", "y", "s", "names", "flags", "h", "d"]
    assert ours.get_inputs()[0].shape == ["N", 3, None]
    assert ours.get_inputs()[3].type == "tensor(string)"
    assert ours.get_inputs()[5].type == "tensor(float16)"
    assert [a.name for a in ours.get_overridable_initializers()] == ["b"]
    for a, b in zip(ours.get_inputs(), ref.get_inputs()):
        assert str(a) == str(b)


def test_nodearg_attributes_are_read_only():
    arg = ortlite.InferenceSession(add_model()).get_inputs()[0]
    with pytest.raises(AttributeError):
        arg.name = "other"
    with pytest.raises(TypeError):
        ortlite.NodeArg()


def test_modelmeta_matches_onnxruntime():
    data = shapes_model()
    ours, ref = ortlite.InferenceSession(data).get_modelmeta(), ort_session(data).get_modelmeta()
    for attr in ("producer_name", "graph_name", "domain", "description", "graph_description",
                 "version", "custom_metadata_map"):
        assert getattr(ours, attr) == getattr(ref, attr), attr
    assert ours.custom_metadata_map == {"author": "me", "license": "MIT", "empty": ""}
    assert ours.version == 42 and ours.graph_name == "shapes_graph"


def test_modelmeta_defaults_match_onnxruntime():
    data = add_model()
    ours, ref = ortlite.InferenceSession(data).get_modelmeta(), ort_session(data).get_modelmeta()
    for attr in ("producer_name", "graph_name", "domain", "description", "graph_description",
                 "version", "custom_metadata_map"):
        assert getattr(ours, attr) == getattr(ref, attr), attr


# --- run ------------------------------------------------------------------------------------


def test_run_output_names():
    x = np.arange(6, dtype=F32).reshape(2, 3)
    y = np.full((2, 3), 2, F32)
    nodes = [helper.make_node("Add", ["x", "y"], ["s"]), helper.make_node("Mul", ["x", "y"], ["p"])]
    data = model_bytes(make_model(nodes, [("x", F32, [2, 3]), ("y", F32, [2, 3])],
                             [("s", F32, [2, 3]), ("p", F32, [2, 3])]))
    sess = ortlite.InferenceSession(data)
    feeds = {"x": x, "y": y}
    for names in (None, [], ["s", "p"], ["p"], ["p", "s"], ("s",)):
        got = sess.run(names, feeds)
        assert_same(got, run_ort(data, feeds, list(names) if names else None))
    assert len(sess.run(["p", "p"], feeds)) == 2


def test_run_keyword_arguments_and_run_options():
    sess = ortlite.InferenceSession(add_model())
    x = np.ones((2, 3), F32)
    ro = ortlite.RunOptions()
    (z,) = sess.run(output_names=None, input_feed={"x": x, "y": x}, run_options=ro)
    np.testing.assert_array_equal(z, 2 * x)
    (z,) = sess.run(None, {"x": x, "y": x}, None)
    np.testing.assert_array_equal(z, 2 * x)


def test_computed_output_is_zero_copy_view_with_owner_base():
    sess = ortlite.InferenceSession(add_model())
    x = np.arange(6, dtype=F32).reshape(2, 3)
    (z,) = sess.run(None, {"x": x, "y": x})
    assert z.base is not None
    assert not z.flags.owndata
    assert z.flags.writeable and z.flags.c_contiguous
    assert not np.shares_memory(z, x)
    z[0, 0] = 100  # writable memory of its own
    np.testing.assert_array_equal(x, np.arange(6, dtype=F32).reshape(2, 3))
    base = z.base
    del z
    gc.collect()
    assert "buffer" in repr(base)


def test_identity_passthrough_is_copied():
    sess = ortlite.InferenceSession(identity_model())
    x = np.arange(6, dtype=F32).reshape(2, 3)
    (y,) = sess.run(None, {"x": x})
    assert not np.shares_memory(y, x)
    np.testing.assert_array_equal(y, x)
    y[0, 0] = -1
    assert x[0, 0] == 0


def test_graph_input_that_is_an_output_is_copied():
    x_vi = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    graph = helper.make_graph([], "g", [x_vi], [x_vi])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    sess = ortlite.InferenceSession(model_bytes(model))
    x = np.array([1, 2], F32)
    (y,) = sess.run(None, {"x": x})
    assert not np.shares_memory(x, y)
    np.testing.assert_array_equal(y, x)


def test_initializer_output_is_copied():
    w = numpy_helper.from_array(np.array([1, 2, 3], F32), "w")
    node = helper.make_node("Identity", ["w"], ["y"])
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", 1, [3])],
                              initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    sess = ortlite.InferenceSession(model_bytes(model))
    (a,) = sess.run(None, {})
    a[:] = 0  # must not change the session's weights
    (b,) = sess.run(None, {})
    np.testing.assert_array_equal(b, [1, 2, 3])


@pytest.mark.parametrize("raw", [False, True])
def test_constant_node_output_is_not_session_memory(raw):
    vals = np.array([1, 2, 3], F32)
    value = (numpy_helper.from_array(vals, "v") if raw
             else helper.make_tensor("v", TensorProto.FLOAT, [3], vals.tolist()))
    node = helper.make_node("Constant", [], ["c"], value=value)
    sess = ortlite.InferenceSession(model_bytes(make_model([node], [], [("c", F32, [3])])))
    (a,) = sess.run(None, {})
    a[:] = 0
    (b,) = sess.run(None, {})
    np.testing.assert_array_equal(b, vals)
    assert not np.shares_memory(a, b)


def test_same_output_twice_are_distinct_arrays():
    sess = ortlite.InferenceSession(add_model())
    x = np.ones((2, 3), F32)
    a, b = sess.run(["z", "z"], {"x": x, "y": x})
    assert not np.shares_memory(a, b)
    np.testing.assert_array_equal(a, b)


def test_refcounts_unchanged_after_many_runs():
    sess = ortlite.InferenceSession(add_model())
    x = np.arange(6, dtype=F32).reshape(2, 3)
    y = np.ones((2, 3), F32)
    y_strided = np.ones((2, 6), F32)[:, ::2]  # takes the copy path
    feed = {"x": x, "y": y_strided}
    names = ["z"]
    ro = ortlite.RunOptions()
    objs = [sess, x, y, y_strided, feed, names, ro]
    gc.collect()
    before = [sys.getrefcount(o) for o in objs]
    for _ in range(1000):
        sess.run(names, feed, ro)
        sess.run(names, {"x": x, "y": y}, ro)
        sess.run(None, feed)
    gc.collect()
    after = [sys.getrefcount(o) for o in objs]
    assert before == after


def test_refcounts_unchanged_on_error_paths():
    sess = ortlite.InferenceSession(add_model())
    x = np.ones((2, 3), F32)
    bad = np.ones((2, 3), np.float64)
    names = ["z"]
    gc.collect()
    before = [sys.getrefcount(o) for o in (sess, x, bad, names)]
    for _ in range(200):
        with pytest.raises(ortlite.InvalidArgument):
            sess.run(names, {"x": x, "y": bad})
        with pytest.raises(ValueError):
            sess.run(names, {"x": x})
        with pytest.raises(ortlite.InvalidArgument):
            sess.run(["nope"], {"x": x, "y": x})
    gc.collect()
    assert before == [sys.getrefcount(o) for o in (sess, x, bad, names)]


def test_ortvalue_refcounts_unchanged():
    sess = ortlite.InferenceSession(add_model())
    x = np.ones((2, 3), F32)
    ov = ortlite.OrtValue.ortvalue_from_numpy(x)
    feed = {"x": ov, "y": ov}
    gc.collect()
    before = [sys.getrefcount(o) for o in (x, ov, feed)]
    for _ in range(500):
        sess.run_with_ort_values(["z"], feed)
        sess.run(None, feed)
        ov.numpy()
    gc.collect()
    assert before == [sys.getrefcount(o) for o in (x, ov, feed)]


def test_session_weakref_dies():
    sess = ortlite.InferenceSession(add_model())
    x = np.ones((2, 3), F32)
    out = sess.run(None, {"x": x, "y": x})
    ref = weakref.ref(sess)
    assert ref() is sess
    del sess
    gc.collect()
    assert ref() is None
    np.testing.assert_array_equal(out[0], 2 * x)  # outputs outlive the session


def test_weakrefs_to_ortvalue_and_run_options():
    ov = ortlite.OrtValue.ortvalue_from_numpy(np.ones(3, F32))
    ro = ortlite.RunOptions()
    r1, r2 = weakref.ref(ov), weakref.ref(ro)
    del ov, ro
    gc.collect()
    assert r1() is None and r2() is None


def test_session_in_reference_cycle_is_collected():
    sess = ortlite.InferenceSession(add_model())

    class Holder:
        pass

    h = Holder()
    h.sess = sess
    h.self = h
    ref = weakref.ref(sess)
    del sess, h
    gc.collect()
    assert ref() is None


def test_concurrent_runs_on_one_session():
    sess = ortlite.InferenceSession(add_model((64, 64)))
    errors = []
    start = threading.Barrier(8)

    def work(k):
        try:
            start.wait()
            rng = np.random.default_rng(k)
            for _ in range(50):
                x = rng.standard_normal((64, 64)).astype(F32)
                y = np.full((64, 64), k, F32)
                (z,) = sess.run(None, {"x": x, "y": y})
                np.testing.assert_array_equal(z, x + y)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_subclassing_inference_session():
    class MySession(ortlite.InferenceSession):
        def __init__(self, data):
            super().__init__(data)
            self.extra = 1

    s = MySession(add_model())
    x = np.ones((2, 3), F32)
    np.testing.assert_array_equal(s.run(None, {"x": x, "y": x})[0], 2 * x)
    assert s.extra == 1


# --- providers ------------------------------------------------------------------------------


def test_providers_default_and_cpu():
    data = add_model()
    for providers in (None, [], ["CPUExecutionProvider"], ("CPUExecutionProvider",)):
        sess = ortlite.InferenceSession(data, providers=providers)
        assert sess.get_providers() == ["CPUExecutionProvider"]
        assert sess.get_provider_options() == {"CPUExecutionProvider": {}}


def test_provider_options_are_strings():
    data = add_model()
    sess = ortlite.InferenceSession(data, providers=[("CPUExecutionProvider", {"a": 1, 2: True})])
    assert sess.get_provider_options() == {"CPUExecutionProvider": {"a": "1", "2": "True"}}
    sess = ortlite.InferenceSession(data, providers=["CPUExecutionProvider"],
                                    provider_options=[{"k": 3}])
    opts = sess.get_provider_options()
    assert opts == {"CPUExecutionProvider": {"k": "3"}}
    opts["CPUExecutionProvider"]["k"] = "changed"  # a copy
    assert sess.get_provider_options() == {"CPUExecutionProvider": {"k": "3"}}


@pytest.mark.skipif(_cuda_usable(), reason="a CUDA device is present")
def test_cuda_falls_back_to_cpu_with_a_warning():
    with pytest.warns(UserWarning, match="CUDAExecutionProvider"):
        sess = ortlite.InferenceSession(add_model(),
                                        providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]


@pytest.mark.skipif(_cuda_usable(), reason="a CUDA device is present")
def test_cuda_alone_falls_back_to_cpu_with_a_warning():
    # As onnxruntime: the provider is skipped with a warning and the session runs on the CPU.
    with pytest.warns(UserWarning, match="CUDAExecutionProvider"):
        sess = ortlite.InferenceSession(add_model(), providers=["CUDAExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]


def test_unknown_provider_is_value_error():
    with pytest.raises(ValueError, match="FooExecutionProvider.*CPUExecutionProvider"):
        ortlite.InferenceSession(add_model(), providers=["FooExecutionProvider"])


def test_bad_provider_arguments():
    data = add_model()
    with pytest.raises(ValueError):
        ortlite.InferenceSession(data, providers="CPUExecutionProvider")
    with pytest.raises(ValueError):
        ortlite.InferenceSession(data, providers=[1])
    with pytest.raises(ValueError):
        ortlite.InferenceSession(data, providers=["CPUExecutionProvider"], provider_options=[])
    with pytest.raises(ValueError):
        ortlite.InferenceSession(data, providers=["CPUExecutionProvider"], provider_options=[1])


# --- SessionOptions -------------------------------------------------------------------------

SO_ATTRS = ["intra_op_num_threads", "inter_op_num_threads", "graph_optimization_level",
            "execution_mode", "log_severity_level", "log_verbosity_level", "logid",
            "enable_cpu_mem_arena", "enable_mem_pattern", "enable_profiling",
            "optimized_model_filepath", "enable_mem_reuse", "use_deterministic_compute",
            "profile_file_prefix"]


def test_session_options_defaults_match_onnxruntime():
    ours, ref = ortlite.SessionOptions(), onnxruntime.SessionOptions()
    for attr in SO_ATTRS:
        a, b = getattr(ours, attr), getattr(ref, attr)
        if isinstance(b, (int, bool, str)):
            assert a == b, attr
        else:  # onnxruntime's pybind enums
            assert int(a) == int(b), attr
    assert isinstance(ours.graph_optimization_level, ortlite.GraphOptimizationLevel)
    assert isinstance(ours.execution_mode, ortlite.ExecutionMode)


def test_session_options_set_and_get():
    so = ortlite.SessionOptions()
    so.intra_op_num_threads = 2
    so.inter_op_num_threads = 3
    so.graph_optimization_level = ortlite.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.execution_mode = ortlite.ExecutionMode.ORT_PARALLEL
    so.log_severity_level = 3
    so.log_verbosity_level = 1
    so.logid = "my-session"
    so.enable_cpu_mem_arena = False
    so.enable_mem_pattern = False
    so.enable_profiling = True
    so.optimized_model_filepath = "/tmp/x.onnx"
    assert (so.intra_op_num_threads, so.inter_op_num_threads) == (2, 3)
    assert so.graph_optimization_level is ortlite.GraphOptimizationLevel.ORT_ENABLE_BASIC
    assert so.execution_mode is ortlite.ExecutionMode.ORT_PARALLEL
    assert (so.log_severity_level, so.log_verbosity_level, so.logid) == (3, 1, "my-session")
    assert (so.enable_cpu_mem_arena, so.enable_mem_pattern, so.enable_profiling) == (
        False, False, True)
    assert so.optimized_model_filepath == "/tmp/x.onnx"
    so.graph_optimization_level = 2  # a plain int in range is accepted too
    assert so.graph_optimization_level is ortlite.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.add_session_config_entry("session.key", "value")
    assert so.get_session_config_entry("session.key") == "value"
    with pytest.raises(RuntimeError, match="no_such_key"):
        so.get_session_config_entry("no_such_key")


@pytest.mark.parametrize("attr,value", [
    ("intra_op_num_threads", "2"), ("intra_op_num_threads", 2.0), ("intra_op_num_threads", True),
    ("graph_optimization_level", "ORT_ENABLE_ALL"), ("graph_optimization_level", 1.0),
    ("execution_mode", None), ("logid", 3), ("optimized_model_filepath", b"x"),
    ("enable_profiling", 1), ("enable_cpu_mem_arena", "yes"), ("log_severity_level", 1.5),
])
def test_session_options_type_errors(attr, value):
    so = ortlite.SessionOptions()
    with pytest.raises(TypeError):
        setattr(so, attr, value)


@pytest.mark.parametrize("attr,value", [
    ("intra_op_num_threads", -1), ("graph_optimization_level", 50), ("execution_mode", 2),
    ("log_severity_level", 7),
])
def test_session_options_value_errors(attr, value):
    with pytest.raises(ValueError):
        setattr(ortlite.SessionOptions(), attr, value)


def test_session_options_are_used_and_reported():
    so = ortlite.SessionOptions()
    so.intra_op_num_threads = 1
    so.logid = "abc"
    so.add_session_config_entry("k", "v")
    sess = ortlite.InferenceSession(add_model(), sess_options=so)
    got = sess.get_session_options()
    assert isinstance(got, ortlite.SessionOptions)
    assert (got.intra_op_num_threads, got.logid, got.get_session_config_entry("k")) == (1, "abc", "v")
    so.logid = "changed later"  # the session keeps the options it was created with
    assert sess.get_session_options().logid == "abc"
    x = np.ones((2, 3), F32)
    np.testing.assert_array_equal(sess.run(None, {"x": x, "y": x})[0], 2 * x)
    assert ortlite.InferenceSession(add_model()).get_session_options().intra_op_num_threads == 0


def add_weight_model():
    w = numpy_helper.from_array(np.zeros(3, F32), "w")
    node = helper.make_node("Add", ["x", "w"], ["y"])
    return model_bytes(make_model([node], [("x", F32, [3])], [("y", F32, [3])], initializers=[w]))


def test_add_initializer_is_used_and_kept_alive():
    data = add_weight_model()
    so = ortlite.SessionOptions()
    w = np.array([10, 20, 30], F32)
    ov = ortlite.OrtValue.ortvalue_from_numpy(w)
    so.add_initializer("w", ov)
    ref_so = onnxruntime.SessionOptions()
    ref_ov = onnxruntime.OrtValue.ortvalue_from_numpy(w)
    ref_so.add_initializer("w", ref_ov)
    expected = onnxruntime.InferenceSession(data, ref_so, providers=["CPUExecutionProvider"]).run(
        None, {"x": np.ones(3, F32)})
    sess = ortlite.InferenceSession(data, so)
    w_ref = weakref.ref(ov)
    del ov, w, so
    gc.collect()
    assert w_ref() is not None  # the session holds the OrtValue
    # replacing it in the session's reported options does not free what the session uses
    opts = sess.get_session_options()
    opts.add_initializer("w", ortlite.OrtValue.ortvalue_from_numpy(np.zeros(3, F32)))
    del opts
    gc.collect()
    assert w_ref() is not None
    got = sess.run(None, {"x": np.ones(3, F32)})
    assert_same(got, expected)
    del sess
    gc.collect()
    assert w_ref() is None


def test_add_initializer_type_check():
    so = ortlite.SessionOptions()
    with pytest.raises(TypeError):
        so.add_initializer("w", np.zeros(3, F32))
    with pytest.raises(TypeError):
        so.add_initializer(1, ortlite.OrtValue.ortvalue_from_numpy(np.zeros(3, F32)))


# --- RunOptions -----------------------------------------------------------------------------


def test_run_options_defaults_match_onnxruntime():
    ours, ref = ortlite.RunOptions(), onnxruntime.RunOptions()
    for attr in ("log_severity_level", "log_verbosity_level", "logid", "terminate",
                 "only_execute_path_to_fetches"):
        assert getattr(ours, attr) == getattr(ref, attr), attr


def test_run_options_attributes_and_entries():
    ro = ortlite.RunOptions()
    ro.log_severity_level = 1
    ro.log_verbosity_level = 2
    ro.logid = "run-1"
    ro.only_execute_path_to_fetches = True
    assert (ro.log_severity_level, ro.log_verbosity_level, ro.logid) == (1, 2, "run-1")
    assert ro.only_execute_path_to_fetches is True
    ro.add_run_config_entry("a", "b")
    assert ro.get_run_config_entry("a") == "b"
    with pytest.raises(RuntimeError, match="missing"):
        ro.get_run_config_entry("missing")
    with pytest.raises(TypeError):
        ro.terminate = 1
    with pytest.raises(TypeError):
        ro.logid = 5
    with pytest.raises(TypeError):
        ro.log_severity_level = "3"
    with pytest.raises(TypeError):
        ortlite.RunOptions(1)


def test_terminate_stops_runs_and_can_be_reset():
    sess = ortlite.InferenceSession(add_model())
    x = np.ones((2, 3), F32)
    ro = ortlite.RunOptions()
    ro.terminate = True
    assert ro.terminate is True
    with pytest.raises(ortlite.OrtliteError):
        sess.run(None, {"x": x, "y": x}, ro)
    ro.terminate = False
    np.testing.assert_array_equal(sess.run(None, {"x": x, "y": x}, ro)[0], 2 * x)


def test_terminate_from_another_thread():
    # A long chain of Adds; another thread sets terminate while runs are going on.
    n = 200
    nodes = [helper.make_node("Add", ["x" if i == 0 else f"t{i}", "x"], [f"t{i + 1}"])
             for i in range(n)]
    data = model_bytes(make_model(nodes, [("x", F32, [256, 256])], [(f"t{n}", F32, [256, 256])]))
    sess = ortlite.InferenceSession(data)
    x = np.ones((256, 256), F32)
    ro = ortlite.RunOptions()
    stopped = []

    def loop():
        for _ in range(2000):
            try:
                sess.run(None, {"x": x}, ro)
            except ortlite.OrtliteError:
                stopped.append(True)
                return

    t = threading.Thread(target=loop)
    t.start()
    ro.terminate = True
    t.join(timeout=60)
    assert not t.is_alive()
    assert stopped


def test_terminate_reaches_a_run_in_flight_after_other_options_changed():
    # Changing another option while a run holds the options must not cut that run off
    # from a later terminate. The chain must outlast the 0.1 s wait by far (400 Adds of 1M
    # floats once took longer than that; now they can finish within it).
    n = 4000
    nodes = [helper.make_node("Add", ["x" if i == 0 else f"t{i}", "x"], [f"t{i + 1}"])
             for i in range(n)]
    data = model_bytes(make_model(nodes, [("x", F32, [1024, 1024])],
                                  [(f"t{n}", F32, [1024, 1024])]))
    sess = ortlite.InferenceSession(data)
    x = np.ones((1024, 1024), F32)
    ro = ortlite.RunOptions()
    outcome = []
    started = threading.Event()

    def one_run():
        started.set()
        try:
            sess.run(None, {"x": x}, ro)
            outcome.append("finished")
        except ortlite.Fail:
            outcome.append("terminated")

    t = threading.Thread(target=one_run)
    t.start()
    started.wait()
    time.sleep(0.1)
    ro.logid = "changed while running"
    ro.add_run_config_entry("k", "v")
    ro.terminate = True
    t.join(timeout=60)
    assert outcome == ["terminated"]
    assert ro.logid == "changed while running" and ro.terminate


# --- OrtValue -------------------------------------------------------------------------------


def test_ortvalue_from_numpy_matches_onnxruntime():
    x = np.arange(6, dtype=F32).reshape(2, 3)
    ours = ortlite.OrtValue.ortvalue_from_numpy(x)
    ref = onnxruntime.OrtValue.ortvalue_from_numpy(x)
    for m in ("shape", "data_type", "element_type", "device_name", "is_tensor", "has_value",
              "tensor_size_in_bytes", "is_tensor_sequence", "is_sparse_tensor"):
        assert getattr(ours, m)() == getattr(ref, m)(), m
    assert ours.data_ptr() == x.ctypes.data  # shares the caller's contiguous array
    np.testing.assert_array_equal(ours.numpy(), x)
    for dt in (np.float64, np.float16, np.int8, np.uint16, np.int64, np.bool_):
        a = np.zeros(4, dt)
        assert ortlite.OrtValue.ortvalue_from_numpy(a).element_type() == \
            onnxruntime.OrtValue.ortvalue_from_numpy(a).element_type()
        assert ortlite.OrtValue.ortvalue_from_numpy(a).data_type() == \
            onnxruntime.OrtValue.ortvalue_from_numpy(a).data_type()


def test_ortvalue_from_numpy_takes_an_ortdevice_like_onnxruntimes_c_api():
    # onnxruntime's C-level OrtValue.ortvalue_from_numpy(arr, OrtDevice).
    x = np.arange(6, dtype=F32).reshape(2, 3)
    theirs = onnxruntime.capi._pybind_state
    ref = theirs.OrtValue.ortvalue_from_numpy(
        x, theirs.OrtDevice(theirs.OrtDevice.cpu(), theirs.OrtDevice.default_memory(), 0))
    ours = ortlite.OrtValue.ortvalue_from_numpy(x, ortlite.OrtDevice.make("cpu", 0))
    assert (ours.device_name(), ours.shape(), ours.data_type()) == (
        ref.device_name().lower(), ref.shape(), ref.data_type())  # the C-level one says "Cpu"
    assert ours.data_ptr() == x.ctypes.data
    ours = ortlite.OrtValue.ortvalue_from_numpy(x, ortlite.OrtDevice.make("cpu", 0), 0)
    np.testing.assert_array_equal(ours.numpy(), x)
    with pytest.raises(ortlite.InvalidArgument, match="device_id differs from the OrtDevice"):
        ortlite.OrtValue.ortvalue_from_numpy(x, ortlite.OrtDevice.make("cpu", 0), 1)


def test_ortvalue_numpy_view_keeps_ortvalue_alive():
    x = np.arange(6, dtype=F32)
    ov = ortlite.OrtValue.ortvalue_from_numpy(x)
    view = ov.numpy()
    assert view.base is ov
    assert np.shares_memory(view, x)
    del ov, x
    gc.collect()
    np.testing.assert_array_equal(view, np.arange(6, dtype=F32))


def test_ortvalue_from_noncontiguous_numpy_copies():
    x = np.arange(12, dtype=F32).reshape(3, 4)[:, ::2]
    ov = ortlite.OrtValue.ortvalue_from_numpy(x)
    assert ov.shape() == [3, 2]
    np.testing.assert_array_equal(ov.numpy(), x)
    assert not np.shares_memory(ov.numpy(), x)


def test_ortvalue_from_readonly_numpy_gives_readonly_view():
    x = np.arange(4, dtype=F32)
    x.flags.writeable = False
    view = ortlite.OrtValue.ortvalue_from_numpy(x).numpy()
    assert not view.flags.writeable


def test_ortvalue_from_shape_and_type():
    for et in (np.float32, np.dtype("int64"), "float16", TensorProto.DOUBLE, np.bool_):
        ov = ortlite.OrtValue.ortvalue_from_shape_and_type([2, 3], et)
        ref = onnxruntime.OrtValue.ortvalue_from_shape_and_type(
            [2, 3], np.dtype("float64") if et == TensorProto.DOUBLE else et)
        assert ov.shape() == [2, 3]
        assert ov.element_type() == ref.element_type()
        assert ov.data_type() == ref.data_type()
        assert ov.tensor_size_in_bytes() == ref.tensor_size_in_bytes()
        assert not ov.numpy().any()
    ov = ortlite.OrtValue.ortvalue_from_shape_and_type((4,), np.float32)
    arr = ov.numpy()  # a view of memory the OrtValue owns
    assert arr.base is not None and not arr.flags.owndata
    arr[:] = 7
    np.testing.assert_array_equal(ov.numpy(), [7, 7, 7, 7])
    with pytest.raises(ortlite.InvalidArgument):
        ortlite.OrtValue.ortvalue_from_shape_and_type([-1], np.float32)
    with pytest.raises(TypeError):
        ortlite.OrtValue.ortvalue_from_shape_and_type([1.5], np.float32)


def test_ortvalue_array_protocol():
    x = np.arange(6, dtype=F32).reshape(2, 3)
    ov = ortlite.OrtValue.ortvalue_from_numpy(x)
    np.testing.assert_array_equal(np.asarray(ov), x)
    d = np.asarray(ov, dtype=np.float64)
    assert d.dtype == np.float64
    np.testing.assert_array_equal(d, x)
    c = np.array(ov, copy=True)
    assert not np.shares_memory(c, x)
    assert np.shares_memory(np.asarray(ov), x)
    s = ortlite.OrtValue.ortvalue_from_numpy(np.array(["a", "b"]))
    with pytest.raises(ValueError):
        np.array(s, copy=False)


def test_ortvalue_update_inplace():
    ov = ortlite.OrtValue.ortvalue_from_shape_and_type([3], np.float32)
    ov.update_inplace(np.array([1, 2, 3], F32))
    np.testing.assert_array_equal(ov.numpy(), [1, 2, 3])
    with pytest.raises(ortlite.InvalidArgument):
        ov.update_inplace(np.array([1, 2], F32))
    with pytest.raises(ortlite.InvalidArgument):
        ov.update_inplace(np.array([1, 2, 3], np.int32))


def test_ortvalue_cuda_is_epfail():
    with pytest.raises(ortlite.EPFail, match="CUDA is not available"):
        ortlite.OrtValue.ortvalue_from_numpy(np.zeros(2, F32), "cuda", 0)
    with pytest.raises(ortlite.EPFail):
        ortlite.OrtValue.ortvalue_from_shape_and_type([2], np.float32, "cuda", 0)
    assert ortlite.OrtValue.ortvalue_from_numpy(np.zeros(2, F32), "cpu", 0).device_name() == "cpu"


def test_run_with_ort_values():
    sess = ortlite.InferenceSession(add_model())
    x = np.arange(6, dtype=F32).reshape(2, 3)
    ov = ortlite.OrtValue.ortvalue_from_numpy(x)
    (z,) = sess.run_with_ort_values(["z"], {"x": ov, "y": ov})
    assert isinstance(z, ortlite.OrtValue)
    np.testing.assert_array_equal(z.numpy(), x + x)
    arr = z.numpy()
    assert arr.base is not None and not arr.flags.owndata
    ident = ortlite.InferenceSession(identity_model())
    (y,) = ident.run_with_ort_values(None, {"x": ov})
    assert y.data_ptr() != ov.data_ptr()  # never the feed's memory
    np.testing.assert_array_equal(y.numpy(), x)
    # OrtValues are accepted by run() too
    np.testing.assert_array_equal(sess.run(None, {"x": ov, "y": x})[0], x + x)


def test_ortvalue_cannot_be_instantiated_directly():
    with pytest.raises(TypeError):
        ortlite.OrtValue()


# --- docstrings and signatures --------------------------------------------------------------

METHODS = {
    ortlite.InferenceSession: {
        "run": ["self", "output_names", "input_feed", "run_options"],
        "run_with_ort_values": ["self", "output_names", "input_feed", "run_options"],
        "get_inputs": ["self"], "get_outputs": ["self"], "get_overridable_initializers": ["self"],
        "get_modelmeta": ["self"], "get_providers": ["self"], "get_provider_options": ["self"],
        "get_session_options": ["self"], "disable_fallback": ["self"], "enable_fallback": ["self"],
    },
    ortlite.SessionOptions: {
        "add_session_config_entry": ["self", "config_key", "config_value"],
        "get_session_config_entry": ["self", "config_key"],
        "add_initializer": ["self", "name", "ort_value"],
    },
    ortlite.RunOptions: {
        "add_run_config_entry": ["self", "config_key", "config_value"],
        "get_run_config_entry": ["self", "config_key"],
    },
    ortlite.OrtValue: {
        "ortvalue_from_numpy": ["numpy_obj", "device_type", "device_id"],
        "ortvalue_from_shape_and_type": ["shape", "element_type", "device_type", "device_id"],
        "numpy": ["self"], "shape": ["self"], "data_type": ["self"], "element_type": ["self"],
        "device_name": ["self"], "is_tensor": ["self"], "has_value": ["self"],
        "data_ptr": ["self"], "tensor_size_in_bytes": ["self"], "update_inplace": ["self", "np_arr"],
        "__array__": ["self", "dtype", "copy"],
    },
}


@pytest.mark.parametrize("cls", list(METHODS), ids=lambda c: c.__name__)
def test_signatures_and_docstrings(cls):
    for name, params in METHODS[cls].items():
        fn = getattr(cls, name)
        sig = inspect.signature(fn)
        assert list(sig.parameters) == params, name
        assert fn.__doc__ and len(fn.__doc__) > 10, name
        text = io.StringIO()
        sys_stdout, sys.stdout = sys.stdout, text
        try:
            help(fn)
        finally:
            sys.stdout = sys_stdout
        assert name in text.getvalue()
    # every public method has a signature
    for name, fn in vars(cls).items():
        if callable(fn) and not name.startswith("_"):
            inspect.signature(getattr(cls, name))


def test_class_and_module_signatures():
    sig = inspect.signature(ortlite.InferenceSession)
    assert list(sig.parameters) == ["path_or_bytes", "sess_options", "providers",
                                    "provider_options", "kwargs"]
    assert list(inspect.signature(ortlite.SessionOptions).parameters) == []
    assert list(inspect.signature(ortlite.RunOptions).parameters) == []
    for fn in (ortlite.get_available_providers, ortlite.get_all_providers, ortlite.get_device,
               ortlite.get_version_string):
        assert list(inspect.signature(fn).parameters) == []
    assert ortlite.InferenceSession.__doc__


# --- CLI ------------------------------------------------------------------------------------


def test_cli_prints_inputs_and_outputs(tmp_path):
    from ortlite.__main__ import main

    path = tmp_path / "m.onnx"
    path.write_bytes(shapes_model())
    out = io.StringIO()
    assert main([str(path)], out=out) == 0
    text = out.getvalue()
    assert "x: tensor(float) ['N', 3, None]" in text
    assert "ox:" in text and "author: me" in text
    assert main([str(tmp_path / "missing.onnx")], out=io.StringIO()) == 1


def test_pathlib_path_and_ortlite_errors_are_runtime_errors(tmp_path):
    path = pathlib.Path(tmp_path) / "nope.onnx"
    with pytest.raises(RuntimeError):
        ortlite.InferenceSession(path)


# ---- profiling ---------------------------------------------------------------------------


def _profile_events(path):
    import json
    with open(path) as f:
        return json.load(f)


def test_profiling_writes_onnxruntime_trace(tmp_path, monkeypatch):
    """enable_profiling records session_initialization, one model_run per run and one
    <node>_kernel_time event per node run; end_profiling writes them in onnxruntime's
    format and stops recording. The same file layout as onnxruntime's own profile."""
    monkeypatch.chdir(tmp_path)
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu_1"),
             helper.make_node("Neg", ["r"], ["y"])]  # no name: the label stands in
    model = make_model(nodes, [("x", np.float32, [2, 3])], [("y", np.float32, [2, 3])])
    so = ortlite.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = "lite"
    sess = ortlite.InferenceSession(model.SerializeToString(), so)
    assert sess.get_profiling_start_time_ns() > 0
    x = np.ones((2, 3), np.float32)
    for _ in range(3):
        sess.run(None, {"x": x})
    name = sess.end_profiling()
    assert name.startswith("lite_") and name.endswith(".json")
    assert (tmp_path / name).exists()
    assert sess.end_profiling() == ""  # ended: nothing more is recorded or written
    sess.run(None, {"x": x})

    events = _profile_events(tmp_path / name)
    names = [e["name"] for e in events]
    assert names.count("session_initialization") == 1
    assert names.count("model_run") == 3
    assert names.count("relu_1_kernel_time") == 3
    neg = [e for e in events if e["cat"] == "Node" and e["args"]["op_name"] == "Neg"]
    assert len(neg) == 3 and all(e["name"].endswith("_kernel_time") for e in neg)
    for e in events:
        assert e["ph"] == "X" and e["dur"] >= 0 and e["ts"] >= 0
        assert set(e) >= {"cat", "pid", "tid", "dur", "ts", "ph", "name", "args"}
        if e["cat"] == "Node":
            assert e["args"]["provider"] == "CPUExecutionProvider"
    # Each run's node events lie inside its model_run event.
    runs = [e for e in events if e["name"] == "model_run"]
    for e in (e for e in events if e["cat"] == "Node"):
        assert any(r["ts"] <= e["ts"] and e["ts"] + e["dur"] <= r["ts"] + r["dur"] + 1
                   for r in runs)

    # onnxruntime's profile of the same model has the same event keys.
    import onnxruntime
    oso = onnxruntime.SessionOptions()
    oso.enable_profiling = True
    oso.profile_file_prefix = "ort"
    osess = onnxruntime.InferenceSession(model.SerializeToString(), oso,
                                         providers=["CPUExecutionProvider"])
    osess.run(None, {"x": x})
    ort_events = _profile_events(tmp_path / osess.end_profiling())
    ort_node = next(e for e in ort_events if e["name"] == "relu_1_kernel_time")
    lite_node = next(e for e in events if e["name"] == "relu_1_kernel_time")
    assert set(lite_node) == set(ort_node) - {"args"} | {"args"}
    assert lite_node["args"]["op_name"] == ort_node["args"]["op_name"] == "Relu"


def test_profiling_off_by_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", np.float32, [2])],
                       [("y", np.float32, [2])])
    sess = ortlite.InferenceSession(model.SerializeToString())
    sess.run(None, {"x": np.ones(2, np.float32)})
    assert sess.end_profiling() == ""
    assert sess.get_profiling_start_time_ns() == 0
    assert list(tmp_path.iterdir()) == []


def test_profile_file_that_cannot_be_written(tmp_path):
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", np.float32, [2])],
                       [("y", np.float32, [2])])
    so = ortlite.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "no_such_dir" / "p")
    sess = ortlite.InferenceSession(model.SerializeToString(), so)
    with pytest.raises(ortlite.Fail, match="cannot write the profile"):
        sess.end_profiling()


def _idle_cpu_seconds(allow_spinning):
    """Process CPU time over 40 two-thread runs, each followed by 4 ms of idle wall time."""
    so = ortlite.SessionOptions()
    so.intra_op_num_threads = 2
    if not allow_spinning:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ortlite.InferenceSession(add_model((1024, 1024)), so)
    x = np.ones((1024, 1024), np.float32)
    sess.run(None, {"x": x, "y": x})
    c0 = time.process_time()
    for _ in range(40):
        sess.run(None, {"x": x, "y": x})
        time.sleep(0.004)
    return time.process_time() - c0


def test_allow_spinning_0_stops_idle_workers_burning_cpu():
    # onnxruntime's session.intra_op.allow_spinning: with "0" an idle worker blocks at once
    # instead of polling for work after each run (about 1 ms of CPU per run here).
    spinning = min(_idle_cpu_seconds(True) for _ in range(2))
    blocking = min(_idle_cpu_seconds(False) for _ in range(2))
    assert blocking < 0.8 * spinning, (blocking, spinning)
