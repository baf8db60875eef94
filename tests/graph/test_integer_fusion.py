"""Dynamic quantization as onnxruntime's quantize_dynamic writes it, fused at load
(src/graph/optimizer.cc step 7): ConvInteger [+ int32 bias] + Cast + Mul [+ activation] into
com.ortlite ConvIntegerToFloat, MatMulInteger + Cast + Mul [+ bias] into com.microsoft
MatMulIntegerToFloat. The fused nodes run the replaced nodes' float operations in their
order, so level 99 equals level 0 exactly; the profile shows which kernels ran."""

import json
import os

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import int8_range, run_ort

F32 = np.float32
RNG = np.random.default_rng(7)


def model(nodes, inits, x_shape, opset=13, extra_opsets=()):
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    m = helper.make_model(g, opset_imports=ops)
    m.ir_version = 8
    return m


def run_profiled(m, feeds, level, tmp_path, threads=1):
    so = ortlite.SessionOptions()
    so.intra_op_num_threads = threads
    so.graph_optimization_level = level
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / f"prof{int(level)}")
    s = ortlite.InferenceSession(m.SerializeToString(), so)
    out = s.run(None, feeds)
    path = s.end_profiling()
    with open(path) as f:
        events = json.load(f)
    os.remove(path)
    ops = {e.get("args", {}).get("op_name") for e in events if e.get("cat") == "Node"}
    return out, ops


def both_levels(m, feeds, tmp_path, threads=1):
    lo, ops0 = run_profiled(m, feeds, ortlite.GraphOptimizationLevel.ORT_DISABLE_ALL, tmp_path,
                            threads)
    hi, ops99 = run_profiled(m, feeds, ortlite.GraphOptimizationLevel.ORT_ENABLE_ALL, tmp_path,
                             threads)
    for a, b in zip(lo, hi):
        np.testing.assert_array_equal(a, b)
    return hi, ops0, ops99


def dq_conv(act, cin=8, cout=16, k=3, stride=1, group=1, w_dtype=np.uint8, bias=True,
            bias_shape=(1, -1, 1, 1)):
    """x -> DynamicQuantizeLinear -> ConvInteger -> [+ bias] -> Cast -> Mul -> [act]."""
    qmin, qmax = (0, 255) if w_dtype == np.uint8 else int8_range()
    w = RNG.integers(qmin, qmax + 1, size=(cout, cin // group, k, k)).astype(w_dtype)
    inits = {"w": w, "wz": np.asarray(RNG.integers(qmin, qmax + 1), w_dtype),
             "ws": np.asarray(0.02, F32), "bf": RNG.standard_normal(cout).astype(F32),
             "bshape": np.asarray(bias_shape, np.int64)}
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             helper.make_node("Mul", ["xs", "ws"], ["s"]),
             helper.make_node("ConvInteger", ["xq", "w", "xz", "wz"], ["acc"],
                              kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride] * 2,
                              group=group)]
    cur = "acc"
    if bias:
        nodes += [helper.make_node("Div", ["bf", "s"], ["bdiv"]),
                  helper.make_node("Floor", ["bdiv"], ["bfl"]),
                  helper.make_node("Cast", ["bfl"], ["bq"], to=TensorProto.INT32),
                  helper.make_node("Reshape", ["bq", "bshape"], ["br"]),
                  helper.make_node("Add", [cur, "br"], ["accb"])]
        cur = "accb"
    nodes += [helper.make_node("Cast", [cur], ["accf"], to=TensorProto.FLOAT),
              helper.make_node("Mul", ["accf", "s"], ["yf" if act else "y"])]
    if act == "silu":
        nodes += [helper.make_node("Sigmoid", ["yf"], ["sg"]),
                  helper.make_node("Mul", ["yf", "sg"], ["y"])]
    elif act == "relu":
        nodes += [helper.make_node("Relu", ["yf"], ["y"])]
    return model(nodes, inits, (None, cin, None, None))


@pytest.mark.parametrize("act", [None, "silu", "relu"])
@pytest.mark.parametrize("stride,group", [(1, 1), (2, 1), (1, 8)])
@pytest.mark.parametrize("threads", [1, 2])
def test_conv_integer_to_float(act, stride, group, threads, tmp_path):
    m = dq_conv(act, stride=stride, group=group)
    x = RNG.standard_normal((1, 8, 23, 19)).astype(F32)
    (y,), ops0, ops99 = both_levels(m, {"x": x}, tmp_path, threads)
    assert "ConvIntegerToFloat" in ops99 and "ConvInteger" not in ops99
    assert "ConvInteger" in ops0
    assert ("Sigmoid" in ops99) is False
    (e,) = run_ort(m, {"x": x})
    # onnxruntime's Sigmoid differs in the last bits; a flipped rounding inside is at most
    # one quantization step of the output.
    np.testing.assert_allclose(y, e, rtol=1e-4, atol=1e-3 * float(np.abs(e).max()))


@pytest.mark.parametrize("bias_shape", [(1, -1, 1, 1), (-1, 1, 1), (1, 16, 1, 1)])
def test_conv_integer_bias_forms(bias_shape, tmp_path):
    m = dq_conv("silu", w_dtype=np.int8, bias_shape=bias_shape)
    x = RNG.standard_normal((2, 8, 9, 9)).astype(F32)
    _, _, ops99 = both_levels(m, {"x": x}, tmp_path)
    assert "ConvIntegerToFloat" in ops99


def test_conv_integer_bias_on_the_wrong_axis_is_not_fused(tmp_path):
    # [1, 1, -1, 1] puts the bias along the rows: not one value per channel.
    m = dq_conv(None, cout=9, bias_shape=(1, 1, -1, 1))
    x = RNG.standard_normal((1, 8, 9, 9)).astype(F32)
    _, _, ops99 = both_levels(m, {"x": x}, tmp_path)
    assert "ConvIntegerToFloat" not in ops99 and "ConvInteger" in ops99


def test_conv_integer_cast_read_twice_is_not_fused(tmp_path):
    m = dq_conv(None)
    m.graph.node.append(helper.make_node("Identity", ["accf"], ["accf_copy"]))
    m.graph.output.append(helper.make_tensor_value_info("accf_copy", TensorProto.FLOAT, None))
    x = RNG.standard_normal((1, 8, 6, 6)).astype(F32)
    _, _, ops99 = both_levels(m, {"x": x}, tmp_path)
    assert "ConvIntegerToFloat" not in ops99


def dq_matmul(k, n, b_dtype=np.int8, bias=True, per_col_zp=False):
    qmin, qmax = (0, 255) if b_dtype == np.uint8 else int8_range()
    inits = {"b": RNG.integers(qmin, qmax + 1, size=(k, n)).astype(b_dtype),
             "bz": (RNG.integers(qmin, qmax + 1, size=(n,)) if per_col_zp
                    else np.asarray(RNG.integers(qmin, qmax + 1))).astype(b_dtype),
             "bs": np.asarray(0.013, F32), "bias": RNG.standard_normal(n).astype(F32)}
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             helper.make_node("Mul", ["xs", "bs"], ["s"]),
             helper.make_node("MatMulInteger", ["xq", "b", "xz", "bz"], ["acc"]),
             helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["accf", "s"], ["yf" if bias else "y"])]
    if bias:
        nodes.append(helper.make_node("Add", ["yf", "bias"], ["y"]))
    return model(nodes, inits, (None, None, k))


@pytest.mark.parametrize("shape", [(1, 1, 64), (1, 7, 64), (2, 33, 64)])
@pytest.mark.parametrize("b_dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("bias", [False, True])
def test_matmul_integer_to_float(shape, b_dtype, bias, tmp_path):
    m = dq_matmul(64, 300, b_dtype, bias, per_col_zp=b_dtype == np.int8)
    x = RNG.standard_normal(shape).astype(F32)
    (y,), ops0, ops99 = both_levels(m, {"x": x}, tmp_path)
    assert "MatMulIntegerToFloat" in ops99 and "MatMulInteger" not in ops99
    assert "MatMulInteger" in ops0
    # The exact value from numpy, in the order the nodes compute it.
    init = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    lo, hi = min(0.0, float(x.min())), max(0.0, float(x.max()))
    xs = F32((F32(hi) - F32(lo)) / F32(255))
    xz = np.clip(np.rint(-F32(lo) / xs), 0, 255)
    xq = np.clip(np.rint(x / xs) + xz, 0, 255).astype(np.int64)
    acc = ((xq - int(xz)) @ (init["b"].astype(np.int64) - init["bz"].astype(np.int64)))
    e = acc.astype(np.int32).astype(F32) * F32(xs * init["bs"])
    if bias:
        e = e + init["bias"]
    np.testing.assert_array_equal(y, e.astype(F32))


def mitf_model(a_shape, k, n, b_dtype, per_col_scale, with_zp, with_bias):
    qmin, qmax = (0, 255) if b_dtype == np.uint8 else int8_range()
    inits = {"b": RNG.integers(qmin, qmax + 1, size=(k, n)).astype(b_dtype),
             "as": np.asarray(0.05, F32),
             "bs": (RNG.uniform(0.01, 0.1, size=n) if per_col_scale
                    else np.asarray(0.03)).astype(F32)}
    ins = ["a", "b", "as", "bs"]
    if with_zp:
        inits["az"] = np.asarray(131, np.uint8)
        inits["bz"] = np.asarray(RNG.integers(qmin, qmax + 1), b_dtype)
        ins += ["az", "bz"]
    if with_bias:
        if not with_zp:
            ins += ["", ""]
        inits["bias"] = RNG.standard_normal(n).astype(F32)
        ins.append("bias")
    node = helper.make_node("MatMulIntegerToFloat", ins, ["y"], domain="com.microsoft")
    g = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("a", TensorProto.UINT8, list(a_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(v, kk) for kk, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                            helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m, inits


@pytest.mark.parametrize("a_shape", [(1, 48), (5, 48), (2, 17, 48)])
@pytest.mark.parametrize("b_dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("per_col_scale", [False, True])
@pytest.mark.parametrize("with_zp,with_bias", [(False, False), (True, False), (True, True),
                                                (False, True)])
def test_com_microsoft_matmul_integer_to_float(a_shape, b_dtype, per_col_scale, with_zp,
                                               with_bias):
    m, inits = mitf_model(a_shape, 48, 40, b_dtype, per_col_scale, with_zp, with_bias)
    a = RNG.integers(0, 256, size=a_shape).astype(np.uint8)
    (y,) = ortlite.InferenceSession(m.SerializeToString()).run(None, {"a": a})
    az = int(inits.get("az", 0))
    bz = inits["bz"].astype(np.int64) if with_zp else 0
    acc = (a.astype(np.int64) - az) @ (inits["b"].astype(np.int64) - bz)
    e = acc.astype(np.int32).astype(F32) * (inits["as"] * inits["bs"]).astype(F32)
    if with_bias:
        e = e + inits["bias"]
    np.testing.assert_array_equal(y, e.astype(F32))
    (o,) = run_ort(m, {"a": a})
    np.testing.assert_allclose(y, o, rtol=1e-5, atol=1e-5 * float(np.abs(o).max()))


def test_com_microsoft_matmul_integer_to_float_bad_bias():
    m, _ = mitf_model((2, 48), 48, 40, np.int8, False, True, True)
    m.graph.initializer[-1].CopyFrom(numpy_helper.from_array(np.zeros(39, F32), "bias"))
    s = ortlite.InferenceSession(m.SerializeToString())
    with pytest.raises(ortlite.InvalidArgument, match="bias"):
        s.run(None, {"a": np.zeros((2, 48), np.uint8)})
