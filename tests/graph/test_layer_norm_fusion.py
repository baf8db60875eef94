"""Decomposed layer norms (ReduceMean, Sub, Pow or Mul, ReduceMean, Add eps, Sqrt, Div, Mul
gamma, Add beta: what exporters write) become one LayerNormalization at load
(src/graph/optimizer.cc fuse_layer_norms), at opsets below and above 17 and with the axes of
ReduceMean as an attribute or (opset 18) an input; the result matches onnxruntime and the
unoptimized session. Patterns that are not a layer norm over the last axis, or whose inner
values something else reads, stay as they are."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import assert_same, node_ops, optimized_session, run_ort

OFF = ortlite.GraphOptimizationLevel.ORT_DISABLE_ALL
H = 48


def ln_model(opset=14, square="Pow", beta=True, swap=False, axes=(-1,), keepdims=1,
             gamma_shape=(H,), extra_output=None):
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((1 + 0.1 * rng.standard_normal(gamma_shape)).astype(np.float32), "g"),
             numpy_helper.from_array((0.1 * rng.standard_normal(H)).astype(np.float32), "b"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two"),
             numpy_helper.from_array(np.array(1e-5, np.float32), "eps")]
    nodes = []

    def mean(x, y):
        if opset >= 18:
            name = f"axes_{y}"
            inits.append(numpy_helper.from_array(np.array(axes, np.int64), name))
            nodes.append(helper.make_node("ReduceMean", [x, name], [y], keepdims=keepdims))
        else:
            nodes.append(helper.make_node("ReduceMean", [x], [y], axes=list(axes), keepdims=keepdims))

    mean("x", "m")
    nodes.append(helper.make_node("Sub", ["x", "m"], ["d"]))
    if square == "Pow":
        nodes.append(helper.make_node("Pow", ["d", "two"], ["p"]))
    else:
        nodes.append(helper.make_node("Mul", ["d", "d"], ["p"]))
    mean("p", "v")
    nodes.append(helper.make_node("Add", ["v", "eps"], ["ve"]))
    nodes.append(helper.make_node("Sqrt", ["ve"], ["s"]))
    nodes.append(helper.make_node("Div", ["d", "s"], ["n"]))
    nodes.append(helper.make_node("Mul", ["g", "n"] if swap else ["n", "g"], ["gn"]))
    out = "gn"
    if beta:
        nodes.append(helper.make_node("Add", ["b", "gn"] if swap else ["gn", "b"], ["y"]))
        out = "y"
    # A Relu after, so that the fused node's output is an inner value too.
    nodes.append(helper.make_node("Relu", [out], ["z"]))
    outputs = [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)]
    if extra_output:
        outputs.append(helper.make_tensor_value_info(extra_output, TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, H])],
                          outputs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def feeds():
    return {"x": (np.random.default_rng(1).standard_normal((2, 5, H)) * 3 + 1).astype(np.float32)}


@pytest.mark.parametrize("opset", [13, 14, 17, 18])
@pytest.mark.parametrize("square", ["Pow", "Mul"])
@pytest.mark.parametrize("beta", [True, False], ids=["beta", "nobeta"])
@pytest.mark.parametrize("swap", [False, True], ids=["ab", "ba"])
def test_fused_and_matches(opset, square, beta, swap):
    model = ln_model(opset, square, beta, swap)
    s = optimized_session(model)
    assert node_ops(s) == ["LayerNormalization", "Relu"], node_ops(s)
    expected = run_ort(model, feeds())
    assert_same(s.run(None, feeds()), expected, rtol=1e-5, atol=1e-5)
    assert_same(optimized_session(model, OFF).run(None, feeds()), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kw", [
    dict(axes=(1,)),            # not the last axis
    dict(axes=(-2, -1)),        # two axes
    dict(keepdims=0),           # reduced axis dropped: the Sub broadcasts differently
    dict(gamma_shape=(1,)),     # a scalar gamma (broadcast, not a row)
    dict(extra_output="d"),     # an inner value is a graph output
    dict(extra_output="s"),
], ids=["axis1", "two_axes", "keepdims0", "scalar_gamma", "d_output", "s_output"])
def test_not_fused(kw):
    model = ln_model(**kw)
    x = feeds()
    if kw.get("keepdims") == 0:
        # The Sub does not broadcast [2, 5, 48] with [2, 5]: both runtimes refuse the model.
        with pytest.raises(Exception):
            run_ort(model, x)
        with pytest.raises(ortlite.OrtliteError):
            optimized_session(model).run(None, x)
        return
    s = optimized_session(model)
    assert "LayerNormalization" not in node_ops(s)
    # numpy, step by step as the graph computes (onnxruntime fuses the scalar-gamma graph
    # itself, then refuses its own fused node, so it is no oracle here).
    xs = x["x"]
    ax = tuple(kw.get("axes", (-1,)))
    g = numpy_helper.to_array([t for t in model.graph.initializer if t.name == "g"][0])
    b = numpy_helper.to_array([t for t in model.graph.initializer if t.name == "b"][0])
    d = xs - xs.mean(axis=ax, keepdims=True)
    sd = np.sqrt((d * d).mean(axis=ax, keepdims=True) + np.float32(1e-5))
    z = np.maximum(d / sd * g + b, 0)
    got = s.run(None, x)
    np.testing.assert_allclose(got[0], z, rtol=1e-4, atol=1e-4)
    extra = {"d": d, "s": sd}.get(kw.get("extra_output"))
    if extra is not None:
        np.testing.assert_allclose(got[1], extra, rtol=1e-4, atol=1e-4)
