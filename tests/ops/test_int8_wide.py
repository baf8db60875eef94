"""MatMulInteger, com.microsoft MatMulIntegerToFloat and DynamicQuantizeMatMul with wide
products (many columns, few rows): the shapes where int8gemm::gemm_to_float converts each
tile to float in place and orders its blocks column-major. Odd N (8210, 17), M = 1, K not a
multiple of 4 or 64 (the packing's padding and AMX's K tail).

MatMulInteger is checked exactly against numpy's int64 product; the float forms exactly
against float32(sum) * (a_scale * b_scale) + bias computed by numpy (the roundings ortlite
documents) and against onnxruntime within float rounding (it may fuse the product and the
sum: one rounding less). onnxruntime 1.23 gets some uint8 products wrong on AMX-INT8 CPUs
(test_ops_quant.py): where it differs, it must differ from the exact result too."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import assert_same, run_lite, run_ort

SHAPES = [(1, 1024, 8210), (32, 1024, 8210), (3, 70, 17), (33, 257, 531), (130, 101, 4099),
          (8, 64, 300)]


def model(form, M, K, N, B, bs, bias, const_b=True, batch=None):
    a_shape = [M, K] if batch is None else [batch, M, K]
    b_shape = [K, N] if batch is None else [batch, K, N]
    inits = [numpy_helper.from_array(np.array(3, np.int8), "bz")]
    inputs = []
    if const_b:
        inits.append(numpy_helper.from_array(B, "B"))
    else:
        inputs.append(helper.make_tensor_value_info("B", TensorProto.INT8, b_shape))
    if form == "mmi":
        node = helper.make_node("MatMulInteger", ["A", "B", "az", "bz"], ["Y"])
        inputs += [helper.make_tensor_value_info("A", TensorProto.UINT8, a_shape),
                   helper.make_tensor_value_info("az", TensorProto.UINT8, [])]
        out = helper.make_tensor_value_info("Y", TensorProto.INT32, None)
    else:
        inits += [numpy_helper.from_array(bs, "bs"), numpy_helper.from_array(bias, "bias")]
        out = helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)
        if form == "mitf":
            node = helper.make_node("MatMulIntegerToFloat",
                                    ["A", "B", "as", "bs", "az", "bz", "bias"], ["Y"],
                                    domain="com.microsoft")
            inputs += [helper.make_tensor_value_info("A", TensorProto.UINT8, a_shape),
                       helper.make_tensor_value_info("as", TensorProto.FLOAT, []),
                       helper.make_tensor_value_info("az", TensorProto.UINT8, [])]
        else:
            node = helper.make_node("DynamicQuantizeMatMul", ["A", "B", "bs", "bz", "bias"],
                                    ["Y"], domain="com.microsoft")
            inputs.append(helper.make_tensor_value_info("A", TensorProto.FLOAT, a_shape))
    g = helper.make_graph([node], "g", inputs, [out], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m


def data(M, K, N, batch=None, seed=0):
    rng = np.random.default_rng(seed + M + K + N)
    lead = () if batch is None else (batch,)
    B = rng.integers(-128, 128, size=lead + (K, N), dtype=np.int8)
    A = rng.integers(0, 256, size=lead + (M, K), dtype=np.uint8)
    bs = (rng.random(N) * 0.01 + 1e-3).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    return A, B, bs, bias


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("M,K,N", SHAPES)
def test_matmul_integer_wide_exact(M, K, N, threads):
    A, B, bs, bias = data(M, K, N)
    feeds = {"A": A, "az": np.array(117, np.uint8)}
    y = run_lite(model("mmi", M, K, N, B, bs, bias), feeds, threads=threads)[0]
    ref = (A.astype(np.int64) - 117) @ (B.astype(np.int64) - 3)
    np.testing.assert_array_equal(y, ref.astype(np.int32))


def float_tol(A, B, scale):
    # One float rounding of the largest |y| the products can reach.
    return 4 * np.finfo(np.float32).eps * float(np.abs(scale).max()) * 255 * 256 * A.shape[-1]


def check_float(y, ref, model, feeds, atol):
    np.testing.assert_array_equal(y[0], ref)
    expected = run_ort(model, feeds)
    try:
        assert_same(y, expected, rtol=1e-5, atol=atol)
    except AssertionError:
        with pytest.raises(AssertionError):
            assert_same([ref], expected, rtol=1e-5, atol=atol)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("M,K,N", SHAPES)
def test_matmul_integer_to_float_wide_vs_ort(M, K, N, threads):
    A, B, bs, bias = data(M, K, N)
    feeds = {"A": A, "as": np.array(0.02, np.float32), "az": np.array(117, np.uint8)}
    m = model("mitf", M, K, N, B, bs, bias)
    y = run_lite(m, feeds, threads=threads)
    acc = ((A.astype(np.int64) - 117) @ (B.astype(np.int64) - 3)).astype(np.float32)
    ref = acc * (np.float32(0.02) * bs) + bias
    check_float(y, ref, m, feeds, float_tol(A, B, 0.02 * bs))


@pytest.mark.parametrize("M,K,N", SHAPES)
def test_dynamic_quantize_matmul_wide_vs_ort(M, K, N):
    _, B, bs, bias = data(M, K, N)
    x = np.random.default_rng(5).standard_normal((M, K)).astype(np.float32)
    m = model("dqmm", M, K, N, B, bs, bias)
    y = run_lite(m, {"A": x})
    # A quantized as DynamicQuantizeLinear does, in float32
    lo, hi = np.float32(min(x.min(), 0)), np.float32(max(x.max(), 0))
    scale = (hi - lo) / np.float32(255)
    zp = np.float32(np.rint(np.clip(np.float32(0) - lo / scale, 0, 255)))
    q = np.clip(np.rint(x / scale) + zp, 0, 255).astype(np.int64)
    acc = ((q - int(zp)) @ (B.astype(np.int64) - 3)).astype(np.float32)
    ref = acc * (scale * bs) + bias
    check_float(y, ref, m, {"A": x}, float_tol(x, B, scale * bs))


@pytest.mark.parametrize("const_b", [True, False])
def test_matmul_integer_to_float_batched_vs_numpy(const_b):
    M, K, N, batch = 5, 67, 300, 3
    A, B, bs, bias = data(M, K, N, batch=batch)
    feeds = {"A": A, "as": np.array(0.5, np.float32), "az": np.array(9, np.uint8)}
    if not const_b:
        feeds["B"] = B
    y = run_lite(model("mitf", M, K, N, B, bs, bias, const_b=const_b, batch=batch), feeds)[0]
    acc = ((A.astype(np.int64) - 9) @ (B.astype(np.int64) - 3)).astype(np.float32)
    np.testing.assert_array_equal(y, acc * (np.float32(0.5) * bs) + bias)
