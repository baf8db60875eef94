"""SessionOptions.optimized_model_filepath: the session writes the graph it runs (after
inlining and the optimizer) as an ONNX file, with large initializers optionally in an
external file; the file loads in onnxruntime (plain ONNX at ORT_DISABLE_ALL) and in ortlite
and computes what the original computes."""

import os

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import assert_same, model_bytes
from helpers.models import Builder, cnn_model, mlp_model

F32 = np.float32
EXT_NAME = "session.optimized_model_external_initializers_file_name"
EXT_MIN = "session.optimized_model_external_initializers_min_size_in_bytes"


def _ort(path_or_bytes):
    return onnxruntime.InferenceSession(path_or_bytes, providers=["CPUExecutionProvider"])


def _save(model, path, level=ortlite.GraphOptimizationLevel.ORT_ENABLE_ALL, entries=()):
    so = ortlite.SessionOptions()
    so.graph_optimization_level = level
    so.optimized_model_filepath = str(path)
    for k, v in entries:
        so.add_session_config_entry(k, v)
    src = model if isinstance(model, (str, os.PathLike)) else model_bytes(model)
    return ortlite.InferenceSession(src, so)


def _mlp_feed():
    return {"x": np.random.default_rng(0).standard_normal((3, 64)).astype(F32)}


def _cnn_feed():
    return {"x": np.random.default_rng(1).standard_normal((2, 3, 32, 32)).astype(F32)}


@pytest.mark.parametrize("level", [0, 1, 2, 99])
@pytest.mark.parametrize("make, feed", [(mlp_model, _mlp_feed), (cnn_model, _cnn_feed)])
def test_written_model_runs_in_ortlite_like_the_original(tmp_path, level, make, feed):
    model = make()
    out = tmp_path / "opt.onnx"
    sess = _save(model, out, level)
    assert out.is_file()
    f = feed()
    expected = _ort(model_bytes(model)).run(None, f)
    assert_same(sess.run(None, f)[0], expected[0], rtol=1e-4, atol=1e-5)
    assert_same(ortlite.InferenceSession(str(out)).run(None, f)[0], expected[0], rtol=1e-4,
                atol=1e-5)
    onnx.checker.check_model(onnx.load(str(out)))


@pytest.mark.parametrize("make, feed", [(mlp_model, _mlp_feed), (cnn_model, _cnn_feed)])
def test_disable_all_writes_plain_onnx_that_onnxruntime_runs(tmp_path, make, feed):
    model = make()
    out = tmp_path / "opt.onnx"
    _save(model, out, ortlite.GraphOptimizationLevel.ORT_DISABLE_ALL)
    written = onnx.load(str(out))
    assert {n.domain for n in written.graph.node} <= {""}
    f = feed()
    assert_same(_ort(str(out)).run(None, f)[0], _ort(model_bytes(model)).run(None, f)[0],
                rtol=1e-5, atol=1e-6)


def test_basic_level_folds_constants_and_onnxruntime_runs_it(tmp_path):
    b = Builder(3)
    w = b.op("Mul", [b.weight((4, 4)), b.const(np.array(2.0, F32))])
    b.op("MatMul", ["x", w], out="y")
    model = b.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    out = tmp_path / "opt.onnx"
    _save(model, out, ortlite.GraphOptimizationLevel.ORT_ENABLE_BASIC)
    written = onnx.load(str(out))
    assert [n.op_type for n in written.graph.node] == ["MatMul"]
    x = np.arange(8, dtype=F32).reshape(2, 4)
    assert_same(_ort(str(out)).run(None, {"x": x})[0], _ort(model_bytes(model)).run(None,
                                                                               {"x": x})[0])


def test_fused_nodes_are_written_in_the_ortlite_domain(tmp_path):
    out = tmp_path / "opt.onnx"
    _save(cnn_model(), out)
    written = onnx.load(str(out))
    domains = {n.domain for n in written.graph.node}
    if "com.ortlite" in domains:
        assert "com.ortlite" in {o.domain for o in written.opset_import}


def test_external_initializers_above_the_threshold(tmp_path):
    model = mlp_model()
    out = tmp_path / "opt.onnx"
    _save(model, out, ortlite.GraphOptimizationLevel.ORT_DISABLE_ALL,
          [(EXT_NAME, "weights.bin"), (EXT_MIN, "100")])
    ext = tmp_path / "weights.bin"
    assert ext.is_file()
    written = onnx.load(str(out), load_external_data=False)
    for init in written.graph.initializer:
        original = next(i for i in model.graph.initializer if i.name == init.name)
        nbytes = numpy_helper.to_array(original).nbytes
        external = init.data_location == TensorProto.EXTERNAL
        assert external == (nbytes >= 100), init.name
        if external:
            info = {e.key: e.value for e in init.external_data}
            assert info["location"] == "weights.bin"
            assert int(info["length"]) == nbytes
            assert int(info["offset"]) % 64 == 0
    full = onnx.load(str(out))
    for init in full.graph.initializer:
        original = next(i for i in model.graph.initializer if i.name == init.name)
        np.testing.assert_array_equal(numpy_helper.to_array(init),
                                      numpy_helper.to_array(original))
    f = _mlp_feed()
    expected = _ort(model_bytes(model)).run(None, f)[0]
    assert_same(_ort(str(out)).run(None, f)[0], expected)
    assert_same(ortlite.InferenceSession(str(out)).run(None, f)[0], expected, rtol=1e-5)


def test_default_threshold_is_1024_bytes(tmp_path):
    model = mlp_model()
    out = tmp_path / "opt.onnx"
    _save(model, out, 0, [(EXT_NAME, "w.bin")])
    written = onnx.load(str(out), load_external_data=False)
    for init in written.graph.initializer:
        original = next(i for i in model.graph.initializer if i.name == init.name)
        nbytes = numpy_helper.to_array(original).nbytes
        assert (init.data_location == TensorProto.EXTERNAL) == (nbytes >= 1024)


def test_model_with_external_data_resaved_to_new_external_file(tmp_path):
    model = mlp_model()
    src = tmp_path / "src.onnx"
    onnx.save(mlp_model(), str(src), save_as_external_data=True, location="src.bin",
              size_threshold=0)
    first = tmp_path / "first.onnx"
    _save(str(src), first, 0, [(EXT_NAME, "first.bin"), (EXT_MIN, "10")])
    second = tmp_path / "second.onnx"
    _save(str(first), second, 0, [(EXT_NAME, "second.bin"), (EXT_MIN, "10")])
    os.remove(first)
    os.remove(tmp_path / "first.bin")
    f = _mlp_feed()
    expected = _ort(model_bytes(model)).run(None, f)[0]
    assert_same(_ort(str(second)).run(None, f)[0], expected)
    assert_same(ortlite.InferenceSession(str(second)).run(None, f)[0], expected, rtol=1e-5)


def test_resaving_over_the_external_file_being_read(tmp_path):
    # The session reads its weights from a mapping of w.bin while it writes w.bin anew.
    model = mlp_model()
    first = tmp_path / "m.onnx"
    _save(model, first, 0, [(EXT_NAME, "w.bin"), (EXT_MIN, "0")])
    _save(str(first), first, 0, [(EXT_NAME, "w.bin"), (EXT_MIN, "0")])
    f = _mlp_feed()
    assert_same(_ort(str(first)).run(None, f)[0], _ort(model_bytes(model)).run(None, f)[0])


def test_external_file_goes_beside_the_model_in_a_directory(tmp_path):
    (tmp_path / "sub").mkdir()
    out = tmp_path / "sub" / "opt.onnx"
    _save(mlp_model(), out, 0, [(EXT_NAME, "ext.bin"), (EXT_MIN, "100")])
    assert (tmp_path / "sub" / "ext.bin").is_file()
    assert not (tmp_path / "ext.bin").exists()
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == ["ext.bin", "opt.onnx"]


def _all_dtypes_model():
    inits, nodes, outs = [], [], []
    arrays = {
        "f16": np.array([1.5, -2.0, 3.25], np.float16),
        "f64": np.array([1e300, -1.0], np.float64),
        "i8": np.array([-128, 5, 127], np.int8),
        "u16": np.array([1, 65535], np.uint16),
        "i64": np.array([-(2**62), 7], np.int64),
        "b": np.array([True, False, True]),
        "s": np.array(["a", "", "héllo"], object),
    }
    for name, arr in arrays.items():
        inits.append(numpy_helper.from_array(arr, name))
        nodes.append(helper.make_node("Identity", [name], [name + "_out"]))
        outs.append(helper.make_tensor_value_info(name + "_out",
                                                  helper.np_dtype_to_tensor_dtype(arr.dtype)
                                                  if arr.dtype != object else TensorProto.STRING,
                                                  list(arr.shape)))
    int4 = helper.make_tensor("i4", TensorProto.INT4, [5], [-8, 7, 1, -1, 3])
    inits.append(int4)
    nodes.append(helper.make_node("Cast", ["i4"], ["i4_out"], to=TensorProto.INT8))
    outs.append(helper.make_tensor_value_info("i4_out", TensorProto.INT8, [5]))
    nodes.append(helper.make_node("Constant", [], ["c_out"],
                                  value=numpy_helper.from_array(np.arange(6, dtype=F32)
                                                                .reshape(2, 3))))
    outs.append(helper.make_tensor_value_info("c_out", TensorProto.FLOAT, [2, 3]))
    nodes.append(helper.make_node("Constant", [], ["fs_out"], value_floats=[1.0, 2.5]))
    outs.append(helper.make_tensor_value_info("fs_out", TensorProto.FLOAT, [2]))
    graph = helper.make_graph(nodes, "dtypes", [], outs, initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m


@pytest.mark.parametrize("level", [0, 99])
def test_every_tensor_kind_round_trips(tmp_path, level):
    model = _all_dtypes_model()
    out = tmp_path / "opt.onnx"
    _save(model, out, level)
    expected = _ort(model_bytes(model)).run(None, {})
    for got, want in zip(ortlite.InferenceSession(str(out)).run(None, {}), expected):
        np.testing.assert_array_equal(got, want)
    if level == 0:
        for got, want in zip(_ort(str(out)).run(None, {}), expected):
            np.testing.assert_array_equal(got, want)


def test_subgraphs_and_symbolic_dims_are_written(tmp_path):
    then_g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, ["n"])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, ["n"])])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    out = tmp_path / "opt.onnx"
    _save(model, out, 0)
    x = np.array([1.0, -2.0], F32)
    for c in (True, False):
        feed = {"c": np.array(c), "x": x}
        want = _ort(model_bytes(model)).run(None, feed)[0]
        assert_same(_ort(str(out)).run(None, feed)[0], want)
        assert_same(ortlite.InferenceSession(str(out)).run(None, feed)[0], want)
    written = ortlite.InferenceSession(str(out))
    assert written.get_inputs()[1].shape == ["n"]


def test_model_local_functions_are_written_inlined(tmp_path):
    fn = helper.make_function("local", "Twice", ["a"], ["b"],
                              [helper.make_node("Add", ["a", "a"], ["b"])],
                              [helper.make_opsetid("", 17)])
    graph = helper.make_graph([helper.make_node("Twice", ["x"], ["y"], domain="local")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, functions=[fn],
                              opset_imports=[helper.make_opsetid("", 17),
                                             helper.make_opsetid("local", 1)])
    model.ir_version = 8
    out = tmp_path / "opt.onnx"
    _save(model, out, 0)
    assert [n.op_type for n in onnx.load(str(out)).graph.node] == ["Add"]
    x = np.array([1.0, 2.0], F32)
    assert_same(_ort(str(out)).run(None, {"x": x})[0], x + x)


def test_metadata_and_session_initializers_are_written(tmp_path):
    b = Builder(4)
    b.op("Add", ["x", b.weight((2,), name="w")], out="y")
    model = b.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    helper.set_model_props(model, {"author": "me"})
    so = ortlite.SessionOptions()
    so.graph_optimization_level = ortlite.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    w = np.array([10.0, 20.0], F32)
    so.add_initializer("w", ortlite.OrtValue.ortvalue_from_numpy(w))
    ortlite.InferenceSession(model_bytes(model), so)
    written = onnx.load(str(tmp_path / "opt.onnx"))
    assert {p.key: p.value for p in written.metadata_props} == {"author": "me"}
    x = np.array([1.0, 2.0], F32)
    assert_same(_ort(str(tmp_path / "opt.onnx")).run(None, {"x": x})[0], x + w)


def test_unwritable_path_is_a_typed_error(tmp_path):
    so = ortlite.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "no" / "such" / "dir" / "m.onnx")
    with pytest.raises(ortlite.NoSuchFile, match="cannot save the optimized model"):
        ortlite.InferenceSession(model_bytes(mlp_model()), so)
    so.optimized_model_filepath = str(tmp_path)  # a directory
    with pytest.raises(ortlite.OrtliteError, match="optimized model"):
        ortlite.InferenceSession(model_bytes(mlp_model()), so)
    assert sorted(os.listdir(tmp_path)) == []


def test_unwritable_external_file_is_a_typed_error(tmp_path):
    so = ortlite.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "m.onnx")
    so.add_session_config_entry(EXT_NAME, "missing_dir/w.bin")
    with pytest.raises(ortlite.Fail, match="external initializers file"):
        ortlite.InferenceSession(model_bytes(mlp_model()), so)
    assert not (tmp_path / "m.onnx").exists()


@pytest.mark.parametrize("bad", ["", "-1", "abc", "10x", "1.5"])
def test_bad_threshold_is_invalid_argument(tmp_path, bad):
    so = ortlite.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "m.onnx")
    so.add_session_config_entry(EXT_NAME, "w.bin")
    so.add_session_config_entry(EXT_MIN, bad)
    with pytest.raises(ortlite.InvalidArgument, match="min_size_in_bytes"):
        ortlite.InferenceSession(model_bytes(mlp_model()), so)


def test_attribute_and_option_types():
    so = ortlite.SessionOptions()
    assert so.optimized_model_filepath == ""
    with pytest.raises(TypeError):
        so.optimized_model_filepath = 3
    so.optimized_model_filepath = "x.onnx"
    assert so.optimized_model_filepath == "x.onnx"


def test_onnxruntime_writes_the_same_kind_of_file(tmp_path):
    # The oracle: onnxruntime's own file for the same options, and ortlite's, agree on what
    # goes external.
    model = mlp_model()
    so = onnxruntime.SessionOptions()
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.optimized_model_filepath = str(tmp_path / "ort.onnx")
    so.add_session_config_entry(EXT_NAME, "ort.bin")
    so.add_session_config_entry(EXT_MIN, "100")
    onnxruntime.InferenceSession(model_bytes(model), so, providers=["CPUExecutionProvider"])
    _save(model, tmp_path / "lite.onnx", 0, [(EXT_NAME, "lite.bin"), (EXT_MIN, "100")])

    def external_names(path):
        m = onnx.load(str(path), load_external_data=False)
        return sorted(i.name for i in m.graph.initializer
                      if i.data_location == TensorProto.EXTERNAL)

    assert external_names(tmp_path / "lite.onnx") == external_names(tmp_path / "ort.onnx")


def test_transformer_layer_fused_file_runs_in_ortlite(tmp_path):
    from helpers.models import transformer_layer_model
    model = transformer_layer_model()
    out = tmp_path / "opt.onnx"
    sess = _save(model, out)
    x = np.random.default_rng(2).standard_normal((2, 5, 64)).astype(F32)
    want = _ort(model_bytes(model)).run(None, {"x": x})[0]
    assert_same(sess.run(None, {"x": x})[0], want, rtol=1e-4, atol=1e-4)
    assert_same(ortlite.InferenceSession(str(out)).run(None, {"x": x})[0], want, rtol=1e-4,
                atol=1e-4)


def test_type_proto_attribute_round_trips(tmp_path):
    seq_type = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT,
                                                                             None))
    nodes = [
        helper.make_node("Optional", [], ["o"], type=seq_type),
        helper.make_node("OptionalHasElement", ["o"], ["has"]),
    ]
    graph = helper.make_graph(nodes, "g", [], [
        helper.make_tensor_value_info("has", TensorProto.BOOL, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    out = tmp_path / "opt.onnx"
    _save(model, out, 0)
    written = onnx.load(str(out))
    assert written.graph.node[0].attribute[0].tp == seq_type
    want = _ort(model_bytes(model)).run(None, {})
    for got in (_ort(str(out)).run(None, {}), ortlite.InferenceSession(str(out)).run(None, {})):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def test_saving_over_the_model_file_being_read(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(model_bytes(mlp_model()))
    sess = _save(str(path), path, 0)
    f = _mlp_feed()
    want = _ort(model_bytes(mlp_model())).run(None, f)[0]
    assert_same(sess.run(None, f)[0], want, rtol=1e-5)
    assert_same(_ort(str(path)).run(None, f)[0], want)
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]


# --- CastLike is written as Cast ---------------------------------------------------------------


def _castlike_model(like_dtype, opset, saturate=None):
    attrs = {} if saturate is None else {"saturate": saturate}
    like = numpy_helper.from_array(np.zeros([1], like_dtype), "like")
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(like_dtype))
    g = helper.make_graph(
        [helper.make_node("CastLike", ["x", "like"], ["c"], **attrs),
         helper.make_node("Add", ["c", "like"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", elem, [2, 3])], [like])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)


@pytest.mark.parametrize("like_dtype,opset", [(np.int32, 15), (np.float32, 18),
                                              (np.int64, 19), (np.float64, 21)])
def test_castlike_is_written_as_cast_like_onnxruntime(tmp_path, like_dtype, opset):
    model = _castlike_model(like_dtype, opset)
    x = {"x": np.array([[1.5, -2.25, 3.0], [0.0, 7.75, -1.0]], F32)}
    sess = _save(model, tmp_path / "opt.onnx")
    written = onnx.load(str(tmp_path / "opt.onnx"))
    # onnxruntime writes the same: Cast with `to` the like-input's type (a Cast to x's own
    # type included), Add after it.
    so = onnxruntime.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "ort.onnx")
    onnxruntime.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    theirs = onnx.load(str(tmp_path / "ort.onnx"))
    assert [n.op_type for n in written.graph.node] == [n.op_type for n in theirs.graph.node]
    cast = written.graph.node[0]
    assert list(cast.input) == ["x"]
    assert helper.get_node_attr_value(cast, "to") == helper.np_dtype_to_tensor_dtype(
        np.dtype(like_dtype))
    assert_same(sess.run(None, x), _ort(model.SerializeToString()).run(None, x))
    assert_same(ortlite.InferenceSession(str(tmp_path / "opt.onnx")).run(None, x),
                sess.run(None, x))


def test_castlike_keeps_saturate_and_stays_without_optimizations(tmp_path):
    model = _castlike_model(np.float64, 19, saturate=0)
    _save(model, tmp_path / "opt.onnx")
    cast = onnx.load(str(tmp_path / "opt.onnx")).graph.node[0]
    assert cast.op_type == "Cast"
    assert helper.get_node_attr_value(cast, "saturate") == 0
    _save(model, tmp_path / "raw.onnx", level=ortlite.GraphOptimizationLevel.ORT_DISABLE_ALL)
    assert onnx.load(str(tmp_path / "raw.onnx")).graph.node[0].op_type == "CastLike"


def test_castlike_to_a_narrow_type_stays_castlike(tmp_path):
    like = helper.make_tensor("like", TensorProto.FLOAT8E4M3FN, [1], [0.0])
    g = helper.make_graph([helper.make_node("CastLike", ["x", "like"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FN, [3])],
                          [like])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)
    _save(model, tmp_path / "opt.onnx")
    assert [n.op_type for n in onnx.load(str(tmp_path / "opt.onnx")).graph.node] == ["CastLike"]
