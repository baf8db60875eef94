"""MatMul with a constant 2-D float B (src/providers/cpu/nn/matmul.cc: B packed at load for
the fused GEMM; one row of A reads B in place) against onnxruntime, at optimization level 0
(no FusedMatMul rewrite) and at the default level: row counts 1 to 300 (partial 12-row
tiles), column counts around the 32-wide panels, depths of several K blocks, 1-D, 2-D and batched A, 1 and 2 threads,
and a B that is a graph input (not packed) of the same shape."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import run_lite, run_ort, session

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
          ((2, 1, 128), 128, 256), ((300, 17), 17, 40), ((1, 1, 200), 200, 1000),
          # deeper than one K block, one row block: each panel through all of its K blocks
          ((5, 2100), 2100, 70), ((12, 1500), 1500, 33), ((1, 3, 3000), 3000, 96)]


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


# Narrow products of two inputs (gemm.cc narrow_product: 8 to 31 columns, 32 rows and more,
# from 2^20 multiply-adds) run in place; the batched ones product by product.
NARROW = [((512, 1000), (1000, 10)), ((2048, 64), (64, 10)), ((3, 100, 700), (3, 700, 16)),
          ((1, 300, 768), (768, 12)), ((300, 2000), (2000, 9)), ((512, 1000), (1000, 24)),
          ((77, 5000), (5000, 13))]


@pytest.mark.parametrize("a_shape,b_shape", NARROW, ids=lambda v: str(v).replace(" ", ""))
def test_narrow_products_match_numpy(a_shape, b_shape):
    m = batched_model(a_shape, b_shape)
    rng = np.random.default_rng(sum(a_shape) + sum(b_shape))
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    K = a_shape[-1]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    for threads in (1, 2):
        got = run_lite(m, {"a": a, "b": b}, threads)[0]
        assert got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=2e-6 * K)


@pytest.mark.parametrize("trans_a,trans_b", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_narrow_gemm_of_inputs_matches_onnxruntime(trans_a, trans_b):
    M, K, N = 600, 900, 11
    a_shape = (K, M) if trans_a else (M, K)
    b_shape = (N, K) if trans_b else (K, N)
    g = helper.make_graph(
        [helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=trans_a, transB=trans_b,
                          alpha=0.5, beta=1.0)], "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(a_shape)),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, list(b_shape)),
         helper.make_tensor_value_info("c", TensorProto.FLOAT, [N])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    rng = np.random.default_rng(trans_a * 2 + trans_b)
    feeds = {"a": rng.standard_normal(a_shape).astype(np.float32),
             "b": rng.standard_normal(b_shape).astype(np.float32),
             "c": rng.standard_normal(N).astype(np.float32)}
    a64 = feeds["a"].astype(np.float64)
    b64 = feeds["b"].astype(np.float64)
    ref = 0.5 * ((a64.T if trans_a else a64) @ (b64.T if trans_b else b64)) + feeds["c"]
    for threads in (1, 2):
        got = run_lite(m, feeds, threads)[0]
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=2e-6 * K)
        np.testing.assert_allclose(got, run_ort(m, feeds)[0], rtol=1e-4, atol=2e-6 * K)


# A constant B of 1 to 4 columns and 16 or more rows (compute/gemm_narrow.cc: each row of A
# against B's columns as dot products along K, four rows at a time, the last K values
# masked), through MatMul and Gemm.
@pytest.mark.parametrize("N", [1, 2, 3, 4])
@pytest.mark.parametrize("K", [16, 17, 100, 1000])
@pytest.mark.parametrize("a_shape", [(1,), (3,), (4,), (5,), (64,), (2, 3, 7), (513,)],
                         ids=str)
def test_narrow_constant_b_matches_numpy(a_shape, K, N):
    m, w = model(a_shape + (K,), K, N)
    a = np.random.default_rng(K + N).standard_normal(a_shape + (K,)).astype(np.float32)
    ref = a.astype(np.float64) @ w.astype(np.float64)
    for threads in (1, 2):
        got = run_lite(m, {"a": a}, threads)[0]
        assert got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.sqrt(K))


@pytest.mark.parametrize("trans_a,trans_b", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("c_shape", [None, (3,), (37, 3), (37, 1), ()], ids=str)
def test_narrow_constant_b_gemm_matches_numpy(trans_a, trans_b, c_shape):
    M, K, N = 37, 300, 3
    rng = np.random.default_rng(trans_a * 2 + trans_b)
    w = rng.standard_normal((N, K) if trans_b else (K, N)).astype(np.float32)
    a_shape = (K, M) if trans_a else (M, K)
    inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(a_shape))]
    names = ["a", "b"]
    feeds = {"a": rng.standard_normal(a_shape).astype(np.float32)}
    if c_shape is not None:
        inputs.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, list(c_shape)))
        names.append("c")
        feeds["c"] = rng.standard_normal(c_shape).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Gemm", names, ["y"], transA=trans_a, transB=trans_b, alpha=0.5,
                          beta=2.0)], "g", inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(w, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    a64 = feeds["a"].astype(np.float64)
    w64 = w.astype(np.float64)
    ref = 0.5 * ((a64.T if trans_a else a64) @ (w64.T if trans_b else w64))
    if c_shape is not None:
        ref = ref + 2.0 * feeds["c"]
    for threads in (1, 2):
        got = run_lite(m, feeds, threads)[0]
        assert got.shape == (M, N)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.sqrt(K))


# One row of A against a B that is an input (gemm.cc gemv_row, axpy_rows: column blocks of
# 8, 4 and 1 vectors, the last columns from the row's last whole vector, B narrower than
# one vector by columns): widths around each block size for float (16 lanes) and double (8),
# a decoder's per-head scores (batched, 1 x 64 x 200), and alpha / beta through Gemm.
ROW_WIDTHS = [1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 127, 128, 129, 143, 200, 257, 600]


@pytest.mark.parametrize("N", ROW_WIDTHS)
@pytest.mark.parametrize("K", [1, 5, 64])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_row_by_input_b_matches_numpy(N, K, dtype):
    elem = TensorProto.FLOAT if dtype == np.float32 else TensorProto.DOUBLE
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "g",
                          [helper.make_tensor_value_info("a", elem, [2, 3, 1, K]),
                           helper.make_tensor_value_info("b", elem, [2, 3, K, N])],
                          [helper.make_tensor_value_info("y", elem, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    rng = np.random.default_rng(N * 10 + K)
    a = rng.standard_normal((2, 3, 1, K)).astype(dtype)
    b = rng.standard_normal((2, 3, K, N)).astype(dtype)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for threads in (1, 2):
        got = run_lite(m, {"a": a, "b": b}, threads)[0]
        assert got.dtype == dtype and got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * np.sqrt(K))


@pytest.mark.parametrize("N", [17, 129, 200])
def test_one_row_gemm_alpha_beta_matches_onnxruntime(N):
    K = 48
    g = helper.make_graph(
        [helper.make_node("Gemm", ["a", "b", "c"], ["y"], alpha=0.5, beta=-2.0)], "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, K]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [K, N]),
         helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, N])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    rng = np.random.default_rng(N)
    feeds = {"a": rng.standard_normal((1, K)).astype(np.float32),
             "b": rng.standard_normal((K, N)).astype(np.float32),
             "c": rng.standard_normal((1, N)).astype(np.float32)}
    got = run_lite(m, feeds)[0]
    np.testing.assert_allclose(got, run_ort(m, feeds)[0], rtol=1e-5, atol=1e-5)
    ref = 0.5 * (feeds["a"].astype(np.float64) @ feeds["b"]) - 2.0 * feeds["c"]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


# Gemm with transB = 1 and both operands inputs: products small enough for the fused GEMM in
# place copy op(B) in 16 x 16 blocks first (gemm.cc): sizes around and between the blocks.
@pytest.mark.parametrize("M,N,K", [(2, 2, 1), (3, 17, 5), (16, 16, 16), (33, 31, 47),
                                   (128, 128, 64), (5, 100, 300), (64, 96, 17)])
def test_gemm_trans_b_inputs_match_numpy(M, N, K):
    g = helper.make_graph(
        [helper.make_node("Gemm", ["a", "b"], ["y"], transB=1, alpha=0.125)], "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [M, K]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [N, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    rng = np.random.default_rng(M * N + K)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((N, K)).astype(np.float32)
    ref = 0.125 * (a.astype(np.float64) @ b.T.astype(np.float64))
    for threads in (1, 2):
        got = run_lite(m, {"a": a, "b": b}, threads)[0]
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.sqrt(K))


# Integer MatMul (compute/int_gemm: rows of C as vectorized sums of B's rows) wraps around
# like numpy's integer matmul: products that overflow, odd widths, batches, both operands
# inputs and a constant B.
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
@pytest.mark.parametrize("a_shape,b_shape", [((3, 5), (5, 7)), ((2, 33, 17), (2, 17, 65)),
                                             ((1, 300), (300, 1)), ((4, 64), (64, 129))])
def test_integer_matmul_wraps_like_numpy(dtype, a_shape, b_shape):
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "g",
                          [helper.make_tensor_value_info("a", elem, list(a_shape)),
                           helper.make_tensor_value_info("b", elem, list(b_shape))],
                          [helper.make_tensor_value_info("y", elem, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    info = np.iinfo(dtype)
    rng = np.random.default_rng(sum(a_shape) * 3 + sum(b_shape))
    a = rng.integers(info.min, info.max, size=a_shape, dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, size=b_shape, dtype=dtype, endpoint=True)
    with np.errstate(over="ignore"):
        ref = np.matmul(a, b)
    for threads in (1, 2):
        got = run_lite(m, {"a": a, "b": b}, threads)[0]
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, ref)


# One to three rows of A against a constant B on AVX-512 (fused_gemm.cc run_block: two full
# 32-column panels at a time, tile_row_pair_avx512): column counts with an even and an odd number of
# full panels and a partial last one, a depth of three K blocks, Gemm's bias row, alpha and
# the activations the tile applies itself (Relu, Clip, LeakyRelu), on 1 and 2 threads (the
# panels split between the threads).
PAIR_WIDTHS = [64, 96, 100, 160, 1000]


@pytest.mark.parametrize("N", PAIR_WIDTHS)
@pytest.mark.parametrize("K", [7, 256, 2100])
@pytest.mark.parametrize("act", ["", "Relu", "Clip", "LeakyRelu"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("M", [1, 2, 3])
def test_few_rows_panel_pairs_match_numpy(M, N, K, act, threads):
    rng = np.random.default_rng(N * 31 + K + M)
    w = rng.standard_normal((K, N)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["a", "w", "c"], ["g" if act else "y"], alpha=0.75)]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "c")]
    if act == "Clip":
        inits += [numpy_helper.from_array(np.array(-1.0, np.float32), "lo"),
                  numpy_helper.from_array(np.array(2.0, np.float32), "hi")]
        nodes.append(helper.make_node("Clip", ["g", "lo", "hi"], ["y"]))
    elif act == "LeakyRelu":
        nodes.append(helper.make_node("LeakyRelu", ["g"], ["y"], alpha=0.1))
    elif act:
        nodes.append(helper.make_node(act, ["g"], ["y"]))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT,
                                                                     [M, K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    a = rng.standard_normal((M, K)).astype(np.float32)
    ref = 0.75 * (a.astype(np.float64) @ w) + bias
    if act == "Relu":
        ref = np.maximum(ref, 0)
    elif act == "Clip":
        ref = np.clip(ref, -1.0, 2.0)
    elif act == "LeakyRelu":
        ref = np.where(ref >= 0, ref, 0.1 * ref)
    got = run_lite(m, {"a": a}, threads)[0]
    assert got.shape == (M, N)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.sqrt(K))


# Rows of A a multiple of 4 KiB apart (K = 1024, 2048, 3072) with more than 8 rows a tile
# (fused_gemm.cc run_block: A copied k-major first, copy_of_a): one and several row blocks,
# one panel and many, a partial last panel, three K blocks, the bias and activation of a
# Gemm, on 1 and 2 threads (each thread's panels share one copy).
@pytest.mark.parametrize("M,K,N", [(9, 1024, 64), (12, 1024, 100), (13, 2048, 96),
                                   (128, 3072, 768), (40, 1024, 33), (30, 3072, 40)])
@pytest.mark.parametrize("threads", [1, 2])
def test_rows_4k_apart_match_numpy(M, K, N, threads):
    rng = np.random.default_rng(M * 7 + K + N)
    w = rng.standard_normal((K, N)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Gemm", ["a", "w", "c"], ["g"], alpha=1.5),
         helper.make_node("Relu", ["g"], ["y"])], "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [M, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "c")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    a = rng.standard_normal((M, K)).astype(np.float32)
    ref = np.maximum(1.5 * (a.astype(np.float64) @ w) + bias, 0)
    got = run_lite(m, {"a": a}, threads)[0]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.sqrt(K))
    # MatMul of the same A twice in one session: a copy is never reused for another product
    m2, w2 = model((M, K), K, N)
    s = session(m2, threads)
    for scale in (1.0, -2.0):
        got = s.run(None, {"a": scale * a})[0]
        np.testing.assert_allclose(got, (scale * a.astype(np.float64)) @ w2, rtol=1e-4,
                                   atol=1e-4 * np.sqrt(K))
