"""com.microsoft MatMulNBits (src/providers/cpu/quant/matmul_nbits.cc): block-quantized 2/4/8
bit weights dequantized on the fly. Checked against a float64 numpy dequantization of the
same codes (the exact oracle up to float32 accumulation), against onnxruntime, and end to end
on models written by onnxruntime's own MatMulNBitsQuantizer."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import run_ort

F32 = np.float32
RNG = np.random.default_rng(11)


def pack_codes(codes, bits):
    """codes: [..., n] ints < 2**bits -> bytes, low bits first."""
    per = 8 // bits
    n = codes.shape[-1]
    padded = np.zeros(codes.shape[:-1] + ((n + per - 1) // per * per,), np.uint32)
    padded[..., :n] = codes
    padded = padded.reshape(codes.shape[:-1] + (-1, per))
    out = np.zeros(padded.shape[:-1], np.uint32)
    for i in range(per):
        out |= padded[..., i] << (bits * i)
    return out.astype(np.uint8)


def nbits_case(K, N, bits, block, with_zp, with_bias, dtype=F32):
    kb = (K + block - 1) // block
    codes = RNG.integers(0, 2 ** bits, size=(N, kb, block))
    B = pack_codes(codes, bits)  # [N, kb, block * bits / 8]
    scales = RNG.uniform(0.01, 0.1, size=(N, kb)).astype(dtype)
    zp_codes = RNG.integers(0, 2 ** bits, size=(N, kb)) if with_zp else None
    zps = pack_codes(zp_codes, bits).reshape(-1) if with_zp else None
    bias = RNG.standard_normal(N).astype(dtype) if with_bias else None
    # float64 dequantization: w[n, k] = (code - zp) * scale
    zp_full = zp_codes if with_zp else np.full((N, kb), 2 ** (bits - 1))
    w = ((codes - zp_full[..., None]) * scales.astype(np.float64)[..., None]).reshape(N, -1)[:, :K]
    return B, scales.reshape(-1), zps, bias, w


def nbits_model(a_shape, K, N, bits, block, B, scales, zps, bias, dtype=TensorProto.FLOAT,
                accuracy_level=None):
    inits = [numpy_helper.from_array(B, "B"), numpy_helper.from_array(scales, "scales")]
    ins = ["A", "B", "scales"]
    if zps is not None:
        inits.append(numpy_helper.from_array(zps, "zp"))
        ins.append("zp")
    if bias is not None:
        ins += [""] * (3 - len(ins) + 2) + ["bias"]
        inits.append(numpy_helper.from_array(bias, "bias"))
    attrs = dict(K=K, N=N, bits=bits, block_size=block)
    if accuracy_level is not None:
        attrs["accuracy_level"] = accuracy_level
    node = helper.make_node("MatMulNBits", ins, ["Y"], domain="com.microsoft", **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("A", dtype, list(a_shape))],
                          [helper.make_tensor_value_info("Y", dtype, None)], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("a_shape", [(1, 96), (3, 96), (2, 7, 96), (33, 96)])
@pytest.mark.parametrize("bits,block", [(4, 16), (4, 32), (4, 128), (8, 32), (2, 64)])
@pytest.mark.parametrize("with_zp", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_matmul_nbits_vs_numpy(a_shape, bits, block, with_zp, with_bias):
    K, N = a_shape[-1], 70  # K not a multiple of most block sizes: a partial last block
    B, scales, zps, bias, w = nbits_case(K, N, bits, block, with_zp, with_bias)
    m = nbits_model(a_shape, K, N, bits, block, B, scales, zps, bias)
    a = RNG.standard_normal(a_shape).astype(F32)
    (y,) = ortlite.InferenceSession(m.SerializeToString()).run(None, {"A": a})
    e = a.astype(np.float64) @ w.T + (bias if bias is not None else 0)
    assert y.shape == e.shape and y.dtype == F32
    np.testing.assert_allclose(y, e, rtol=1e-4, atol=1e-4 * float(np.abs(e).max()))
    if bits == 4 or bits == 8:  # onnxruntime's CPU kernel of this version takes these
        (o,) = run_ort(m, {"A": a})
        np.testing.assert_allclose(y, o, rtol=1e-4, atol=1e-4 * float(np.abs(o).max()))


@pytest.mark.parametrize("threads", [1, 2])
def test_matmul_nbits_large_and_threads(threads):
    K, N, bits, block = 768, 1000, 4, 32
    B, scales, zps, bias, w = nbits_case(K, N, bits, block, True, True)
    m = nbits_model((2, 20, K), K, N, bits, block, B, scales, zps, bias)
    a = RNG.standard_normal((2, 20, K)).astype(F32)
    so = ortlite.SessionOptions()
    so.intra_op_num_threads = threads
    (y,) = ortlite.InferenceSession(m.SerializeToString(), so).run(None, {"A": a})
    e = a.astype(np.float64) @ w.T + bias
    np.testing.assert_allclose(y, e, rtol=1e-4, atol=1e-4 * float(np.abs(e).max()))


def test_matmul_nbits_float16():
    K, N, bits, block = 64, 40, 4, 32
    B, scales, zps, bias, w = nbits_case(K, N, bits, block, True, True, dtype=np.float16)
    m = nbits_model((3, K), K, N, bits, block, B, scales, zps, bias, dtype=TensorProto.FLOAT16)
    a = RNG.standard_normal((3, K)).astype(np.float16)
    (y,) = ortlite.InferenceSession(m.SerializeToString()).run(None, {"A": a})
    assert y.dtype == np.float16
    e = a.astype(np.float64) @ w.T + bias.astype(np.float64)
    np.testing.assert_allclose(y.astype(np.float64), e, rtol=2e-2, atol=2e-2 * np.abs(e).max())


@pytest.mark.parametrize("block", [16, 32, 64, 128, 256])
@pytest.mark.parametrize("N", [13, 70, 96])
@pytest.mark.parametrize("M", [1, 5, 8, 9, 25, 128])
@pytest.mark.parametrize("K", [256, 1056])
@pytest.mark.parametrize("with_zp", [False, True])
def test_matmul_nbits_4bit_vector_paths(block, N, M, K, with_zp):
    # 4-bit blocks of every size: up to 8 rows the dot products (8 rows and 2 columns at a
    # time, an odd last column), above that the fused GEMM's 32-column panels (a full one, a
    # partial one of more and of fewer than 16 columns), K in chunks of 512 (1056: 512, 512,
    # 32; with blocks of 64 or more not a whole number of blocks: the portable path).
    B, scales, zps, bias, w = nbits_case(K, N, 4, block, with_zp, True)
    m = nbits_model((M, K), K, N, 4, block, B, scales, zps, bias)
    a = RNG.standard_normal((M, K)).astype(F32)
    e = a.astype(np.float64) @ w.T + bias
    (o,) = run_ort(m, {"A": a})
    for threads in (1, 2):
        so = ortlite.SessionOptions()
        so.intra_op_num_threads = threads
        (y,) = ortlite.InferenceSession(m.SerializeToString(), so).run(None, {"A": a})
        np.testing.assert_allclose(y, e, rtol=1e-4, atol=1e-4 * float(np.abs(e).max()))
        np.testing.assert_allclose(y, o, rtol=1e-4, atol=1e-4 * float(np.abs(o).max()))


def nbits_add_model(bias_shape, K=64, N=40, block=32):
    """MatMulNBits without a bias, then Add of a constant of bias_shape."""
    B, scales, zps, _, w = nbits_case(K, N, 4, block, True, False)
    m = nbits_model(("batch", K), K, N, 4, block, B, scales, zps, None)
    m.graph.node[0].output[0] = "mm"
    c = RNG.standard_normal(bias_shape).astype(F32)
    m.graph.initializer.append(numpy_helper.from_array(c, "c"))
    m.graph.node.append(helper.make_node("Add", ["c", "mm"], ["Y"]))
    return m, w, c


@pytest.mark.parametrize("bias_shape,fused", [((40,), True), ((1, 40), False), ((3, 40), False)])
@pytest.mark.parametrize("rows", [1, 3, 30])
def test_matmul_nbits_add_fused_as_bias(bias_shape, fused, rows, tmp_path):
    # Add of a constant [N] becomes MatMulNBits' bias input (as onnxruntime's
    # MatMulNBitsFusion); other shapes stay an Add. Same values at both levels and as
    # onnxruntime's.
    import json
    m, w, c = nbits_add_model(bias_shape)
    a = RNG.standard_normal((3 if bias_shape[0] == 3 else rows, 64)).astype(F32)
    outs = {}
    for level in (ortlite.GraphOptimizationLevel.ORT_DISABLE_ALL,
                  ortlite.GraphOptimizationLevel.ORT_ENABLE_ALL):
        so = ortlite.SessionOptions()
        so.graph_optimization_level = level
        so.enable_profiling = True
        so.profile_file_prefix = str(tmp_path / f"p{int(level)}")
        s = ortlite.InferenceSession(m.SerializeToString(), so)
        outs[level] = s.run(None, {"A": a})[0]
        with open(s.end_profiling()) as f:
            ops = {e["args"]["op_name"] for e in json.load(f) if e.get("cat") == "Node"}
        if level == ortlite.GraphOptimizationLevel.ORT_ENABLE_ALL:
            assert ("Add" not in ops) == fused, ops
    lo, hi = outs.values()
    np.testing.assert_allclose(hi, lo, rtol=1e-6, atol=1e-6 * float(np.abs(lo).max()))
    e = a.astype(np.float64) @ w.T + c
    np.testing.assert_allclose(hi, e, rtol=1e-4, atol=1e-4 * float(np.abs(e).max()))
    (o,) = run_ort(m, {"A": a})
    np.testing.assert_allclose(hi, o, rtol=1e-4, atol=1e-4 * float(np.abs(o).max()))


@pytest.mark.parametrize("change,err,match", [
    ("bits", ortlite.NotImplemented, "bits"),
    ("block", ortlite.InvalidGraph, "block_size"),
    ("B", ortlite.InvalidArgument, "'B'"),
    ("scales", ortlite.InvalidArgument, "'scales'"),
    ("A", ortlite.InvalidArgument, "'A'"),
])
def test_matmul_nbits_bad_inputs(change, err, match):
    K, N, bits, block = 64, 8, 4, 32
    B, scales, zps, bias, _ = nbits_case(K, N, bits, block, False, False)
    a_shape = (2, K)
    if change == "B":
        B = B[:, :1]
    if change == "scales":
        scales = scales[:-1]
    m = nbits_model(a_shape, K, N, 3 if change == "bits" else bits,
                    24 if change == "block" else block, B, scales, zps, bias)
    a = RNG.standard_normal((2, K + 1 if change == "A" else K)).astype(F32)
    with pytest.raises(err, match=match):
        if change in ("A",):
            m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = K + 1
        ortlite.InferenceSession(m.SerializeToString()).run(None, {"A": a})


def test_matmul_nbits_g_idx_is_refused():
    K, N, bits, block = 64, 8, 4, 32
    B, scales, zps, bias, _ = nbits_case(K, N, bits, block, True, False)
    m = nbits_model((2, K), K, N, bits, block, B, scales, zps, None)
    m.graph.node[0].input.append("g_idx")
    m.graph.initializer.append(numpy_helper.from_array(np.zeros(K, np.int32), "g_idx"))
    with pytest.raises(ortlite.NotImplemented, match="g_idx"):
        ortlite.InferenceSession(m.SerializeToString())


def float_mlp(K=256, H=512, N=64, seed=0):
    r = np.random.default_rng(seed)
    w1 = (r.standard_normal((K, H)) / np.sqrt(K)).astype(F32)
    w2 = (r.standard_normal((H, N)) / np.sqrt(H)).astype(F32)
    b1 = r.standard_normal(H).astype(F32) * 0.1
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]),
             helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["hr"]),
             helper.make_node("MatMul", ["hr", "w2"], ["y"])]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                      ["batch", K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=[numpy_helper.from_array(w1, "w1"),
                                       numpy_helper.from_array(w2, "w2"),
                                       numpy_helper.from_array(b1, "b1")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("block,symmetric", [(32, True), (32, False), (128, True)])
@pytest.mark.parametrize("batch", [1, 16])
def test_matmul_nbits_from_onnxruntime_quantizer(block, symmetric, batch):
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    q = MatMulNBitsQuantizer(float_mlp(), block_size=block, is_symmetric=symmetric)
    q.process()
    m = q.model.model
    ops = [n.op_type for n in m.graph.node]
    assert ops.count("MatMulNBits") == 2, ops
    x = RNG.standard_normal((batch, 256)).astype(F32)
    (y,) = ortlite.InferenceSession(m.SerializeToString()).run(None, {"x": x})
    (o,) = run_ort(m, {"x": x})
    np.testing.assert_allclose(y, o, rtol=1e-4, atol=1e-4 * float(np.abs(o).max()))


def test_matmul_nbits_portable_path_in_a_fresh_process(tmp_path):
    # ORTLITE_NBITS_SCALAR=1 (read once) turns the AVX-512 loops off: the portable
    # dequantization must give the same values.
    import os
    import subprocess
    import sys
    tests_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, ORTLITE_NBITS_SCALAR="1",
               PYTHONPATH=os.pathsep.join([tests_dir, os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        os.path.abspath(__file__), "-k", "vs_numpy and (4-32 or 4-128)"],
                       env=env, capture_output=True, text=True, timeout=300, cwd=tests_dir)
    assert r.returncode == 0 and " passed" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
