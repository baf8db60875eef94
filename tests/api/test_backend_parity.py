"""ortlite.backend against onnxruntime.backend: module functions, devices, the options the
backend API refuses, and inputs passed as they are (a list of arrays is a sequence)."""

import os

import numpy as np
import onnx
import onnxruntime.backend as ort_backend
import pytest
from onnx import TensorProto, helper

import ortlite
import ortlite.backend as backend
from helpers import add_model

F = TensorProto.FLOAT


def add():
    return add_model(inputs=("a", "b"), output="c", ir_version=8, serialize=False)


def seq_model():
    """SequenceLength and SequenceAt(0) of a seq(tensor(float)) input."""
    nodes = [helper.make_node("SequenceLength", ["s"], ["n"]),
             helper.make_node("Constant", [], ["zero"],
                              value=helper.make_tensor("zero", TensorProto.INT64, [], [0])),
             helper.make_node("SequenceAt", ["s", "zero"], ["first"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_sequence_value_info("s", F, ["r", "c"])],
                          [helper.make_tensor_value_info("n", TensorProto.INT64, []),
                           helper.make_tensor_value_info("first", F, ["r", "c"])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


A = np.arange(6, dtype=np.float32).reshape(2, 3)
B = np.full((2, 3), 0.5, np.float32)


def test_module_functions_match_onnxruntime_backend():
    for name in ("prepare", "run", "supports_device", "is_compatible"):
        assert callable(getattr(backend, name)), name
        assert callable(getattr(ort_backend, name)), name
    assert backend.run_model == backend.run
    got = backend.run(add(), [A, B])
    exp = ort_backend.run(add(), [A, B])
    np.testing.assert_array_equal(got[0], exp[0])
    np.testing.assert_array_equal(backend.run(add(), {"a": A, "b": B}, device="CPU")[0], A + B)


def test_sequence_input_stays_a_list():
    seq = [np.ones((2, 2), np.float32), np.zeros((3, 1), np.float32)]
    n, first = backend.prepare(seq_model()).run([seq])
    n_ort, first_ort = ort_backend.prepare(seq_model()).run([seq])
    assert int(n) == int(n_ort) == 2
    np.testing.assert_array_equal(first, first_ort)
    n, first = backend.run(seq_model(), {"s": seq})
    assert int(n) == 2
    # run_node: a list of arrays is a sequence input there too.
    (length,) = backend.run_node(helper.make_node("SequenceLength", ["s"], ["n"]), [seq])
    assert int(length) == 2


def test_devices_like_onnxruntime():
    for dev in ("CPU", "GPU", "CUDA", "NOPE", "cpu"):
        assert backend.supports_device(dev) == ort_backend.supports_device(dev), dev
        assert (backend.is_compatible(add(), dev) ==
                ort_backend.is_compatible(add(), dev)), dev
    assert backend.is_compatible(add()) == ort_backend.is_compatible(add()) is True
    assert not backend.supports_device(None)
    if not backend.supports_device("GPU"):
        with pytest.raises(RuntimeError, match="Incompatible device expected 'GPU'"):
            backend.prepare(add(), device="GPU")
        with pytest.raises(RuntimeError, match="Incompatible device"):
            ort_backend.prepare(add(), device="GPU")


def test_prepare_accepts_a_session_and_a_rep():
    sess = ortlite.InferenceSession(add().SerializeToString())
    rep = backend.prepare(sess)
    assert rep.session is sess
    assert backend.prepare(rep) is rep
    np.testing.assert_array_equal(backend.run(rep, [A, B])[0], A + B)


@pytest.mark.parametrize("option,value", [("optimized_model_filepath", "x.onnx"),
                                          ("enable_profiling", True),
                                          ("profile_file_prefix", "prof")])
def test_file_writing_session_options_are_refused(tmp_path, option, value):
    if option != "enable_profiling":
        value = str(tmp_path / value)
    with pytest.raises(RuntimeError, match=option) as e:
        backend.prepare(add(), **{option: value})
    assert isinstance(e.value, ortlite.InvalidArgument)
    with pytest.raises(RuntimeError, match=option):
        backend.run(add(), [A, B], **{option: value})
    assert list(tmp_path.iterdir()) == []


def test_terminate_is_refused_at_run():
    rep = backend.prepare(add())
    with pytest.raises(ortlite.InvalidArgument, match="terminate"):
        rep.run([A, B], terminate=True)
    with pytest.raises(RuntimeError, match="terminate"):
        backend.run(add(), [A, B], terminate=True)
    # Unset (false) values ask for nothing and are accepted.
    np.testing.assert_array_equal(rep.run([A, B], terminate=False)[0], A + B)
    np.testing.assert_array_equal(
        backend.run(add(), [A, B], enable_profiling=False, optimized_model_filepath="")[0],
        A + B)


def test_other_options_are_applied():
    rep = backend.prepare(add(), intra_op_num_threads=1, graph_optimization_level=0)
    assert rep.session.get_session_options().intra_op_num_threads == 1
    out = rep.run([A, B], logid="backend-run", log_severity_level=3)
    np.testing.assert_array_equal(out[0], A + B)
    ro = ortlite.RunOptions()
    np.testing.assert_array_equal(rep.run([A, B], run_options=ro).c, A + B)
    # Unknown kwargs are ignored, as onnxruntime's backend ignores them.
    np.testing.assert_array_equal(backend.run(add(), [A, B], no_such_option=1)[0], A + B)


def test_backend_rep_passes_values_as_they_are():
    # A list fed to a tensor input is converted by the session (as a list), not by numpy
    # first: a declared float input takes a nested list of ints.
    out = backend.prepare(add()).run([[[1, 2, 3], [4, 5, 6]], B])
    np.testing.assert_array_equal(out[0], np.array([[1, 2, 3], [4, 5, 6]], np.float32) + B)
    assert out[0].dtype == np.float32


def test_onnx_loop13_seq_case_through_the_backend():
    from onnx import numpy_helper

    case = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node",
                        "test_loop13_seq")
    model = onnx.load(os.path.join(case, "model.onnx"))
    ds = os.path.join(case, "test_data_set_0")
    inputs = []
    for i, vi in enumerate(model.graph.input):
        with open(os.path.join(ds, f"input_{i}.pb"), "rb") as f:
            data = f.read()
        if vi.type.HasField("sequence_type"):
            p = onnx.SequenceProto()
            p.ParseFromString(data)
            inputs.append(numpy_helper.to_list(p))
        else:
            p = onnx.TensorProto()
            p.ParseFromString(data)
            inputs.append(numpy_helper.to_array(p))
    assert any(isinstance(v, list) for v in inputs)
    out = backend.run(model, inputs)
    with open(os.path.join(ds, "output_0.pb"), "rb") as f:
        p = onnx.SequenceProto()
        p.ParseFromString(f.read())
    expected = numpy_helper.to_list(p)
    assert len(out[0]) == len(expected)
    for g, e in zip(out[0], expected):
        np.testing.assert_array_equal(g, e)


def test_onnx_backend_runner_sequence_and_tfidf_cases():
    import unittest

    import onnx.backend.test

    bt = onnx.backend.test.BackendTest(backend, __name__)
    for pattern in (r"^test_loop13_seq_cpu$", r"^test_sequence_map_.*_cpu$",
                    r"^test_tfidfvectorizer_.*_cpu$"):
        bt.include(pattern)
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(bt.tests)
    ids = [t.id() for t in suite]
    with open(os.devnull, "w") as sink:
        result = unittest.TextTestRunner(stream=sink, verbosity=0).run(suite)
    assert result.wasSuccessful(), result.failures + result.errors
    skipped = {t.id() for t, _ in result.skipped}
    ran = [i for i in ids if i not in skipped]
    assert any("loop13_seq" in i for i in ran), ran
    assert sum("sequence_map" in i for i in ran) >= 10, ran
    assert sum("tfidfvectorizer" in i for i in ran) == 7, ran


def _dict_vectorizer_model():
    ml = "ai.onnx.ml"
    g = helper.make_graph(
        [helper.make_node("DictVectorizer", ["m"], ["v"], domain=ml, int64_vocabulary=[0, 1, 2]),
         helper.make_node("LinearRegressor", ["v"], ["y"], domain=ml,
                          coefficients=[1.0, 2.0, 3.0], intercepts=[0.5])],
        "dv", [helper.make_value_info("m", helper.make_map_type_proto(
            TensorProto.INT64, helper.make_tensor_type_proto(F, None)))],
        [helper.make_tensor_value_info("y", F, [1, 1])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                               helper.make_opsetid(ml, 1)], ir_version=8)


def test_a_dict_is_the_value_of_a_models_one_map_input():
    # onnxruntime's backend passes a dict to a one-input model as that input's value: a map
    # input takes it, so {name: value} is a map with a string key there, refused by both.
    model = _dict_vectorizer_model()
    x = {0: 25.0, 1: 5.13, 2: 0.0}
    ours = backend.prepare(model).run(x)
    theirs = ort_backend.prepare(model, device="CPU").run(x)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6)
    with pytest.raises(RuntimeError, match="Unexpected (key|value) type"):
        ort_backend.prepare(model, device="CPU").run({"m": x})
    with pytest.raises(ortlite.InvalidArgument, match="Unexpected key type"):
        backend.prepare(model).run({"m": x})


def test_a_dict_names_the_inputs_of_a_tensor_model():
    a = np.ones((2, 3), np.float32)
    out = backend.prepare(add_model()).run({"x": a, "y": 2 * a})
    np.testing.assert_array_equal(out[0], 3 * a)
