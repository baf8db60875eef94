"""Float products with constant weights on AMX tiles (src/compute/fused_gemm_amx.cc): MatMul
and Gemm with a constant B (weights on the right), convolutions (weights on the left). Each float
split into three bfloat16 parts, six part products a pass. On a CPU without AMX-BF16 the same
cases run the FMA kernel, and every assertion but the "tiles in use" one still holds.

Oracles: numpy in float64 for the accuracy bound (the error over sum |a| |b| stays at float32
level: <= 6e-7, where dropping to two parts a float gives about 1e-6), onnxruntime for the
epilogues and for NaN / infinity / subnormal inputs, which must go back to the FMA kernel."""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import run_ort

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def has_amx_bf16():
    try:
        with open("/proc/cpuinfo") as f:
            return "amx_bf16" in f.read()
    except OSError:
        return False


def matmul_model(a_shape, K, N, seed=0, scale=None):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((K, N))
    w = (w / np.sqrt(K) if scale is None else w * scale).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["y"])], "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(a_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(w, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m, w


def session(m, threads=1):
    so = ortlite.SessionOptions()
    so.intra_op_num_threads = threads
    return ortlite.InferenceSession(m.SerializeToString(), so)


def relative_error(a, w, got):
    a64, w64 = a.astype(np.float64), w.astype(np.float64)
    ref = a64 @ w64
    mag = np.abs(a64) @ np.abs(w64)
    return float(np.max(np.abs(got.astype(np.float64) - ref) / mag))


# (A shape, K, N): tails in every dimension (rows past a 16-row tile, K past 32, N past 16),
# odd numbers of row and column tiles, K blocks, batched A.
SHAPES = [((64, 128), 128, 768), ((67, 141), 141, 700), ((130, 157), 157, 333),
          ((128, 768), 768, 768), ((200, 1000), 1000, 130), ((2, 70, 256), 256, 257),
          ((96, 3072), 3072, 160)]


@pytest.mark.parametrize("a_shape,K,N", SHAPES, ids=lambda v: str(v).replace(" ", ""))
@pytest.mark.parametrize("threads", [1, 2])
def test_accuracy_at_float32_level(a_shape, K, N, threads):
    m, w = matmul_model(a_shape, K, N, seed=K + N)
    a = np.random.default_rng(K).standard_normal(a_shape).astype(np.float32)
    got = session(m, threads).run(None, {"a": a})[0]
    assert got.shape == a_shape[:-1] + (N,)
    assert relative_error(a.reshape(-1, K), w, got.reshape(-1, N)) <= 6e-7


def test_positive_data_no_drift():
    """All-positive operands (ReLU features, positive weights), K = 2048: no part's rounding
    adds up one way over K. Every float32 kernel rounds its running sums here (ortlite's FMA
    kernel 1.5e-6, onnxruntime 4e-7, the tiles 1.0e-6 on this seed), hence the wider bound."""
    m, w = matmul_model((128, 2048), 2048, 256, scale=1.0)
    w = np.abs(w)
    m.graph.initializer[0].CopyFrom(numpy_helper.from_array(w, "b"))
    a = np.abs(np.random.default_rng(2).standard_normal((128, 2048))).astype(np.float32)
    got = session(m).run(None, {"a": a})[0]
    assert relative_error(a, w, got) <= 3e-6


EXACT_SCRIPT = r"""
import sys
sys.path[:0] = [{root!r}]
import numpy as np
from onnx import TensorProto, helper, numpy_helper
import ortlite
rng = np.random.default_rng(0)
w = rng.standard_normal((768, 512)).astype(np.float32)
g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "g",
    [helper.make_tensor_value_info("a", TensorProto.FLOAT, [128, 768])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    initializer=[numpy_helper.from_array(w, "b")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]); m.ir_version = 8
s = ortlite.InferenceSession(m.SerializeToString())
a = rng.standard_normal((128, 768)).astype(np.float32)
np.save(sys.argv[1], s.run(None, {{"a": a}})[0])
"""


@pytest.mark.skipif(not has_amx_bf16(), reason="no AMX-BF16 on this CPU")
def test_tiles_in_use_and_capped_by_gemm_isa(tmp_path):
    """With AMX-BF16 the product runs on the tiles (its rounding differs from the FMA
    kernel's); ORTLITE_GEMM_ISA=avx512 keeps it on the FMA kernel. Both meet the bound."""
    script = EXACT_SCRIPT.format(root=ROOT)
    outs = {}
    for isa in ("", "avx512"):
        env = dict(os.environ)
        env.pop("ORTLITE_GEMM_ISA", None)
        if isa:
            env["ORTLITE_GEMM_ISA"] = isa
        path = str(tmp_path / f"y{isa or 'amx'}.npy")
        r = subprocess.run([sys.executable, "-c", script, path], env=env, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-3000:]
        outs[isa] = np.load(path)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((768, 512)).astype(np.float32)
    a = rng.standard_normal((128, 768)).astype(np.float32)
    assert not np.array_equal(outs[""], outs["avx512"])
    for y in outs.values():
        assert relative_error(a, w, y) <= 6e-7


@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan, 3e38, -2e38, 1e-40, -1e-42])
@pytest.mark.parametrize("where", ["a", "b"])
def test_values_the_parts_cannot_carry(value, where):
    """NaN, infinities, |x| >= 2^127 and subnormals give what onnxruntime gives."""
    K, N, M = 256, 384, 128
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((K, N)) / 16).astype(np.float32)
    a = rng.standard_normal((M, K)).astype(np.float32)
    if where == "a":
        a[7, 3] = value
        a[100, 200] = value
    else:
        w[3, 9] = value
        w[200, 300] = value
    g = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["y"])], "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [M, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(w, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    expected = run_ort(m, {"a": a})[0]
    with np.errstate(all="ignore"):
        got = session(m).run(None, {"a": a})[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(expected))
    fin = np.isfinite(expected)
    np.testing.assert_allclose(got[fin], expected[fin], rtol=1e-4, atol=1e-4)
    # the subnormal's own product is not dropped: a row of A times a huge column of B
    if value == 1e-40 and where == "a":
        m2, _ = matmul_model((M, K), K, N, seed=1, scale=1e30)
        w2 = numpy_helper.to_array(m2.graph.initializer[0])
        a2 = np.zeros((M, K), np.float32)
        a2[:, 0] = 1e-40
        got2 = session(m2).run(None, {"a": a2})[0]
        ref2 = a2.astype(np.float64) @ w2.astype(np.float64)
        np.testing.assert_allclose(got2, ref2, rtol=1e-5)


def gemm_model(M, K, N, alpha, beta, c_shape, act):
    rng = np.random.default_rng(M + K + N)
    w = (rng.standard_normal((N, K)) / np.sqrt(K)).astype(np.float32)
    c = rng.standard_normal(c_shape).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["a", "w", "c"], ["g"], alpha=alpha, beta=beta, transB=1)]
    nodes.append(helper.make_node(act, ["g"], ["y"]) if act else
                 helper.make_node("Identity", ["g"], ["y"]))
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [M, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(c, "c")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("alpha,beta,c_shape", [(1.0, 1.0, (300,)), (0.5, 2.0, (1, 300)),
                                                (1.5, 1.0, (96, 300)), (1.0, 0.5, (96, 1))])
@pytest.mark.parametrize("act", [None, "Relu", "Sigmoid"])
@pytest.mark.parametrize("threads", [1, 2])
def test_gemm_epilogues_match_onnxruntime(alpha, beta, c_shape, act, threads):
    m = gemm_model(96, 700, 300, alpha, beta, c_shape, act)
    a = np.random.default_rng(9).standard_normal((96, 700)).astype(np.float32)
    expected = run_ort(m, {"a": a})[0]
    got = session(m, threads).run(None, {"a": a})[0]
    np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-5)


def test_concurrent_first_runs_share_one_set_of_parts():
    """Parts are made once, on the first large product, while other runs start too."""
    m, w = matmul_model((128, 512), 512, 512, seed=3)
    s = session(m, 1)
    a = np.random.default_rng(4).standard_normal((128, 512)).astype(np.float32)
    results, errors = [], []

    def work():
        try:
            results.append(s.run(None, {"a": a})[0])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work) for _ in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    assert len(results) == 6
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])
    assert relative_error(a, w, results[0]) <= 6e-7


def conv_model(C, M, H, k, stride, residual, act):
    rng = np.random.default_rng(C * 31 + M + H)
    w = (rng.standard_normal((M, C, k, k)) / np.sqrt(C * k * k)).astype(np.float32)
    b = (rng.standard_normal(M) * 0.1).astype(np.float32)
    Ho = (H + 2 * (k // 2) - k) // stride + 1
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[k, k],
                              strides=[stride, stride], pads=[k // 2] * 4)]
    out = "c"
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, H])]
    if residual:
        nodes.append(helper.make_node("Add", ["c", "r"], ["s"]))
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, M, Ho, Ho]))
        out = "s"
    if act:
        nodes.append(helper.make_node(act, [out], ["y"]))
    else:
        nodes.append(helper.make_node("Identity", [out], ["y"]))
    g = helper.make_graph(nodes, "g", inputs,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=[numpy_helper.from_array(w, "w"),
                                       numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    feeds = {"x": rng.standard_normal((1, C, H, H)).astype(np.float32)}
    if residual:
        feeds["r"] = rng.standard_normal((1, M, Ho, Ho)).astype(np.float32)
    return m, feeds


# (C, M, H, k, stride): 1x1 convolutions read in place (ResNet-50's expansions and
# reductions), 3x3 through the column buffer, stride 2, positions past a 16-wide tile.
CONVS = [(256, 1024, 14, 1, 1), (1024, 256, 14, 1, 1), (128, 512, 28, 1, 1),
         (256, 256, 14, 3, 1), (128, 256, 28, 3, 2), (160, 320, 13, 3, 1), (64, 256, 50, 1, 2)]


@pytest.mark.parametrize("C,M,H,k,stride", CONVS, ids=lambda v: str(v))
@pytest.mark.parametrize("residual,act", [(False, None), (True, "Relu"), (False, "Sigmoid")])
@pytest.mark.parametrize("threads", [1, 2])
def test_conv_matches_onnxruntime(C, M, H, k, stride, residual, act, threads):
    m, feeds = conv_model(C, M, H, k, stride, residual, act)
    expected = run_ort(m, feeds)[0]
    got = session(m, threads).run(None, feeds)[0]
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=2e-5 * np.sqrt(C * k * k))


@pytest.mark.parametrize("value", [np.nan, np.inf, 1e-41])
def test_conv_values_the_parts_cannot_carry(value):
    m, feeds = conv_model(256, 512, 14, 1, 1, False, None)
    feeds["x"][0, 5, 3, 4] = value
    expected = run_ort(m, feeds)[0]
    got = session(m).run(None, feeds)[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    fin = np.isfinite(expected)
    np.testing.assert_allclose(got[fin], expected[fin], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bad", [None, np.nan, np.inf])
@pytest.mark.parametrize("threads", [1, 2])
def test_blocks_of_a_large_operand(bad, threads):
    """An A whose parts would pass 8 MiB is split and multiplied in blocks of rows (K = 4096:
    256 rows a block, 600 rows: three), each block with its own rows of C, of the summed
    input (Gemm's full C) and of nothing else; a value the parts cannot carry in the last
    block sends the whole product to the FMA kernel."""
    M, K, N = 600, 4096, 160
    rng = np.random.default_rng(8)
    w = (rng.standard_normal((N, K)) / 64).astype(np.float32)
    c = rng.standard_normal((M, N)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Gemm", ["a", "w", "c"], ["y"], alpha=0.5, beta=1.0, transB=1)], "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [M, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(c, "c")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    a = rng.standard_normal((M, K)).astype(np.float32)
    if bad is not None:
        a[590, 4000] = bad
    expected = run_ort(m, {"a": a})[0]
    with np.errstate(all="ignore"):
        got = session(m, threads).run(None, {"a": a})[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    fin = np.isfinite(expected)
    np.testing.assert_allclose(got[fin], expected[fin], rtol=1e-4, atol=1e-4)
    if bad is None:
        prod = got.astype(np.float64) - c
        assert relative_error(a, w.T / 2, prod.astype(np.float32)) <= 1e-6
