"""The fused GEMM's activation epilogue (Relu / Clip / LeakyRelu folded into Gemm and into 1x1
convolutions by the optimizer) on special values: NaN stays NaN, +-inf are clamped like any
other value, results at and beyond the bounds. Integer-valued operands make every sum exact
in any order, so the expected values are exact."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import run_lite


def clip_ref(v, lo, hi):
    """x < lo ? lo : x, then x > hi ? hi : x: NaN compares false and stays."""
    v = np.where(v < lo, np.float32(lo), v)
    return np.where(v > hi, np.float32(hi), v).astype(np.float32)


def post_nodes(op, src):
    if op == "Clip":
        inits = [numpy_helper.from_array(np.array(-2.5, np.float32), "lo"),
                 numpy_helper.from_array(np.array(3.5, np.float32), "hi")]
        return [helper.make_node("Clip", [src, "lo", "hi"], ["y"])], inits
    if op == "LeakyRelu":
        return [helper.make_node("LeakyRelu", [src], ["y"], alpha=0.25)], []
    return [helper.make_node("Relu", [src], ["y"])], []


def reference(v, op):
    if op == "Clip":
        return clip_ref(v, -2.5, 3.5)
    if op == "LeakyRelu":
        return np.where(v >= 0, v, v * np.float32(0.25)).astype(np.float32)
    return clip_ref(v, 0.0, np.inf)


def special_input(shape, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, size=shape).astype(np.float32)
    flat = x.reshape(-1)
    picks = rng.choice(flat.size, size=6, replace=False)
    flat[picks[:2]] = np.nan
    flat[picks[2:4]] = np.inf
    flat[picks[4:]] = -np.inf
    return x


@pytest.mark.parametrize("op", ["Relu", "Clip", "LeakyRelu"])
@pytest.mark.parametrize("mkn", [(13, 16, 40), (1, 16, 40), (5, 3, 16), (24, 33, 70)],
                         ids=["13x16x40", "row", "k3", "24x33x70"])
@pytest.mark.parametrize("threads", [1, 2])
def test_gemm_epilogue_special_values(op, mkn, threads):
    M, K, N = mkn
    rng = np.random.default_rng(M * 1000 + K)
    b = rng.integers(-2, 3, size=(K, N)).astype(np.float32)
    c = rng.integers(-3, 4, size=(N,)).astype(np.float32)
    x = special_input((M, K), K + N)
    nodes, inits = post_nodes(op, "g")
    nodes = [helper.make_node("Gemm", ["x", "b", "c"], ["g"])] + nodes
    inits += [numpy_helper.from_array(b, "b"), numpy_helper.from_array(c, "c")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         [M, K])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with np.errstate(invalid="ignore"):
        expected = reference((x.astype(np.float64) @ b + c).astype(np.float32), op)
    got = run_lite(model, {"x": x}, threads)[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    assert np.isnan(expected).any() and (got == expected)[~np.isnan(expected)].all()


@pytest.mark.parametrize("op", ["Relu", "Clip"])
def test_pointwise_conv_epilogue_special_values(op):
    """A 1x1 convolution (W on the left of the product, the pixels in the columns: a partial
    last panel of 31 of 32 columns)."""
    C, M, H, W = 16, 24, 7, 9
    rng = np.random.default_rng(7)
    w = rng.integers(-2, 3, size=(M, C, 1, 1)).astype(np.float32)
    bias = rng.integers(-3, 4, size=(M,)).astype(np.float32)
    x = special_input((1, C, H, W), 8)
    nodes, inits = post_nodes(op, "c")
    nodes = [helper.make_node("Conv", ["x", "w", "bias"], ["c"], kernel_shape=[1, 1])] + nodes
    inits += [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "bias")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         [1, C, H, W])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with np.errstate(invalid="ignore"):
        v = np.einsum("mc,chw->mhw", w[:, :, 0, 0].astype(np.float64), x[0].astype(np.float64))
        expected = reference((v + bias[:, None, None]).astype(np.float32), op)[None]
    got = run_lite(model, {"x": x}, 1)[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    assert np.isnan(expected).any() and (got == expected)[~np.isnan(expected)].all()
