"""Float16 nodes computed in float at load (src/graph/fp16_rewrite.cc): models written by
onnxruntime's float16 converter (keep_io_types True and False) match onnxruntime and the
unoptimized session (float16 kernels throughout) within float16 rounding, run as float
graphs (the Casts between nodes gone, the usual fusions made), and every float16 value the
graph exposes (outputs, readers that are not rewritten) is still float16-rounded."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import make_model, node_ops, optimized_session, run_ort
from helpers.models import cnn_model, mlp_model, transformer_layer_model

F16 = np.float16
ALL = ortlite.GraphOptimizationLevel.ORT_ENABLE_ALL
OFF = ortlite.GraphOptimizationLevel.ORT_DISABLE_ALL


sess = optimized_session
ops = node_ops


def to_fp16(model, keep_io_types):
    from onnxruntime.transformers.float16 import convert_float_to_float16

    m = convert_float_to_float16(model, keep_io_types=keep_io_types)
    m.ir_version = min(m.ir_version, 10)
    return m


MODELS = {
    "mlp": (mlp_model, (4, 64)),
    "cnn": (cnn_model, (2, 3, 32, 32)),
    "transformer": (transformer_layer_model, (2, 8, 64)),
}


def close(a, e, tol):
    """Within tol of the reference's largest magnitude (float16 keeps 11 bits per value)."""
    a, e = np.asarray(a, np.float32), np.asarray(e, np.float32)
    assert a.shape == e.shape
    err = np.abs(a - e).max() / max(np.abs(e).max(), 1e-6)
    assert err <= tol, err


@pytest.mark.parametrize("keep_io_types", [True, False])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_converted_models_match(name, keep_io_types):
    build, shape = MODELS[name]
    model = to_fp16(build(), keep_io_types)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    feeds = {model.graph.input[0].name: x if keep_io_types else x.astype(F16)}
    expected = run_ort(model, feeds)
    s = sess(model)
    actual = s.run(None, feeds)
    off = sess(model, OFF).run(None, feeds)
    for a, e, o in zip(actual, expected, off):
        assert a.dtype == o.dtype == (np.float32 if keep_io_types else F16)
        close(a, e, 1e-2)
        close(a, o, 1e-2)
        # The output is the float16 rounding of a float result, as a float16 kernel's.
        np.testing.assert_array_equal(a, a.astype(F16).astype(a.dtype))
    placed = ops(s)
    # One Cast of the input to float (keep_io_types=False), the result's Cast to float16
    # and, with keep_io_types, the model's Cast of it back to float: nothing in between.
    assert placed.count("Cast") <= 2, placed
    if name == "mlp":
        assert "FusedMatMul" in placed or "FusedGemm" in placed, placed
    if name == "cnn":
        assert "FusedConv" in placed and "BatchNormalization" not in placed, placed


def fp16_model(nodes, inputs, outputs, inits=()):
    return make_model(nodes, [(n, TensorProto.FLOAT16, s) for n, s in inputs],
                      [(n, t, None) for n, t in outputs], inits)


def test_exposed_intermediate_is_rounded():
    # h = x @ w is read by the next MatMul and is a graph output: the output is h rounded
    # to float16, as the float16 kernel writes it, while the next node may read it unrounded.
    rng = np.random.default_rng(3)
    w1 = numpy_helper.from_array(rng.standard_normal((16, 32)).astype(F16), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 8)).astype(F16), "w2")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["y"])]
    model = fp16_model(nodes, [("x", [4, 16])],
                       [("y", TensorProto.FLOAT16), ("h", TensorProto.FLOAT16)], [w1, w2])
    x = rng.standard_normal((4, 16)).astype(F16)
    y, h = sess(model).run(None, {"x": x})
    y0, h0 = sess(model, OFF).run(None, {"x": x})
    assert y.dtype == h.dtype == F16
    ref = (x.astype(np.float32) @ w1_f32(w1)).astype(F16)
    np.testing.assert_allclose(h.astype(np.float32), ref.astype(np.float32), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(h.astype(np.float32), h0.astype(np.float32), rtol=1e-3, atol=1e-3)
    close(y, y0, 2e-3)
    assert ops(sess(model)).count("Cast") == 3  # x to float; h and y back to float16


def w1_f32(t):
    return numpy_helper.to_array(t).astype(np.float32)


def test_rounding_sensitive_reader_sees_float16_value():
    # x + c is 2.99951171875 in float, 3.0 in float16: Floor is not rewritten and reads the
    # float16 value (3), as the unoptimized session does, even though Add runs in float.
    c = numpy_helper.from_array(np.array([0.00146484375], F16), "c")
    nodes = [helper.make_node("Add", ["x", "c"], ["s"]),
             helper.make_node("Floor", ["s"], ["f"]),
             helper.make_node("Mul", ["s", "s"], ["y"])]
    model = fp16_model(nodes, [("x", [1])],
                       [("f", TensorProto.FLOAT16), ("y", TensorProto.FLOAT16)], [c])
    x = np.array([2.998046875], F16)
    f, y = sess(model).run(None, {"x": x})
    f0, y0 = sess(model, OFF).run(None, {"x": x})
    assert f[0] == f0[0] == 3.0
    close(y, y0, 1e-3)


def test_shape_ops_between_rewritten_nodes_run_in_float():
    # MatMul -> Reshape -> Transpose -> Softmax: no Casts between them.
    rng = np.random.default_rng(4)
    w = numpy_helper.from_array(rng.standard_normal((8, 12)).astype(F16), "w")
    shp = numpy_helper.from_array(np.array([2, 3, 4, 4], np.int64), "shp")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Reshape", ["m", "shp"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3]),
             helper.make_node("Softmax", ["t"], ["y"], axis=-1)]
    model = fp16_model(nodes, [("x", [2, 4, 8])], [("y", TensorProto.FLOAT16)], [w, shp])
    x = rng.standard_normal((2, 4, 8)).astype(F16)
    s = sess(model)
    (y,) = s.run(None, {"x": x})
    (y0,) = sess(model, OFF).run(None, {"x": x})
    close(y, y0, 2e-3)
    assert ops(s).count("Cast") == 2, ops(s)


def test_value_read_by_subgraph_keeps_float16():
    # An If branch reads the Relu output from the enclosing graph: it stays float16 there.
    rng = np.random.default_rng(5)
    w = numpy_helper.from_array(rng.standard_normal((4, 4)).astype(F16), "w")
    then_g = helper.make_graph([helper.make_node("Neg", ["r"], ["o"])], "then", [],
                               [helper.make_tensor_value_info("o", TensorProto.FLOAT16, None)])
    else_g = helper.make_graph([helper.make_node("Identity", ["r"], ["o2"])], "else", [],
                               [helper.make_tensor_value_info("o2", TensorProto.FLOAT16, None)])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Relu", ["m"], ["r"]),
             helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)]
    model = make_model(nodes, [("x", TensorProto.FLOAT16, [2, 4]), ("cond", np.bool_, [])],
                       [("y", TensorProto.FLOAT16, None)], [w])
    x = rng.standard_normal((2, 4)).astype(F16)
    for cond in (True, False):
        feeds = {"x": x, "cond": np.array(cond)}
        (y,) = sess(model).run(None, feeds)
        (y0,) = sess(model, OFF).run(None, feeds)
        assert y.dtype == F16
        close(y, y0, 2e-3)


def test_float_models_untouched():
    # No float16 anywhere: the plan is the one without the rewrite (no Casts appear).
    model = mlp_model()
    assert "Cast" not in ops(sess(model))
