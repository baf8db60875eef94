"""MatMul with a constant 2-D float B (src/providers/cpu/nn/matmul.cc: B packed at load for
the fused GEMM; one row of A reads B in place) against onnxruntime, at optimization level 0
(no FusedMatMul rewrite) and at the default level: row counts 1 to 300 (partial 12-row
tiles), column counts around the 32-wide panels, 1-D, 2-D and batched A, 1 and 2 threads,
and a B that is a graph input (not packed) of the same shape."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import run_lite, run_ort

OFF = ortlite.GraphOptimizationLevel.ORT_DISABLE_ALL


def model(a_shape, K, N, const_b=True):
    w = np.random.default_rng(K * 7 + N).standard_normal((K, N)).astype(np.float32)
    inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(a_shape))]
    inits = []
    if const_b:
        inits.append(numpy_helper.from_array(w, "b"))
    else:
        inputs.append(helper.make_tensor_value_info("b", TensorProto.FLOAT, [K, N]))
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "g", inputs,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m, w


SHAPES = [((1, 64), 64, 32), ((64,), 64, 48), ((2, 96), 96, 33), ((4, 768), 768, 100),
          ((12, 40), 40, 64), ((13, 40), 40, 65), ((31, 129), 129, 31), ((3, 5, 64), 64, 96),
          ((2, 1, 128), 128, 256), ((300, 17), 17, 40), ((1, 1, 200), 200, 1000)]


@pytest.mark.parametrize("a_shape,K,N", SHAPES, ids=lambda v: str(v).replace(" ", ""))
@pytest.mark.parametrize("level", [None, OFF], ids=["default", "level0"])
@pytest.mark.parametrize("threads", [1, 2])
def test_const_b_matches_onnxruntime(a_shape, K, N, level, threads):
    m, w = model(a_shape, K, N)
    a = np.random.default_rng(len(a_shape) + K).standard_normal(a_shape).astype(np.float32)
    expected = run_ort(m, {"a": a})[0]
    got = run_lite(m, {"a": a}, threads, level)[0]
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * np.sqrt(K))
    # numpy as a second oracle
    np.testing.assert_allclose(got, a @ w, rtol=1e-4, atol=1e-4 * np.sqrt(K))


@pytest.mark.parametrize("a_shape,K,N", SHAPES[:6], ids=lambda v: str(v).replace(" ", ""))
def test_b_as_input_same_result(a_shape, K, N):
    m, w = model(a_shape, K, N, const_b=False)
    a = np.random.default_rng(3).standard_normal(a_shape).astype(np.float32)
    got = run_lite(m, {"a": a, "b": w}, 1, OFF)[0]
    const = run_lite(model(a_shape, K, N)[0], {"a": a}, 1, OFF)[0]
    np.testing.assert_allclose(got, const, rtol=1e-5, atol=1e-5 * np.sqrt(K))


def batched_model(a_shape, b_shape):
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "g",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(a_shape)),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, list(b_shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


# Products of two inputs (src/compute/gemm.cc gemm(): full 32-wide tiles in place up to
# 2^25 multiply-adds on one thread, else the BLAS; matmul.cc: whole products per thread
# when the batches share out evenly): attention's per-head shapes on both sides of those
# bounds, partial tiles, fewer than 32 rows, and batch counts that do and do not divide.
BATCHED = [((1, 12, 128, 64), (1, 12, 64, 128)), ((1, 12, 384, 384), (1, 12, 384, 64)),
           ((1, 4, 512, 64), (1, 4, 64, 512)), ((2, 3, 50, 64), (2, 3, 64, 50)),
           ((3, 16, 384), (3, 384, 384)), ((5, 96, 40), (5, 40, 64)), ((128, 128), (128, 128)),
           ((1, 2, 640, 64), (1, 2, 64, 1024))]


@pytest.mark.parametrize("a_shape,b_shape", BATCHED, ids=lambda v: str(v).replace(" ", ""))
@pytest.mark.parametrize("threads", [1, 2])
def test_two_input_products_match_onnxruntime_and_numpy(a_shape, b_shape, threads):
    m = batched_model(a_shape, b_shape)
    rng = np.random.default_rng(sum(a_shape) + sum(b_shape))
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    got = run_lite(m, {"a": a, "b": b}, threads)[0]
    K = a_shape[-1]
    np.testing.assert_allclose(got, run_ort(m, {"a": a, "b": b})[0], rtol=1e-4,
                               atol=1e-4 * np.sqrt(K))
    ref = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.sqrt(K))
