"""QDQ groups run as integer operators at graph_optimization_level >= 2 (optimizer.cc step
0b): DequantizeLinear -> Conv / MatMul -> QuantizeLinear with constant quantized weights
becomes QLinearConv / QLinearMatMul, Add / Mul / GlobalAveragePool groups QLinearAdd /
QLinearMul / QLinearGlobalAveragePool, and the pair around a data-movement operator with
equal parameters goes, as onnxruntime's QDQ fusion does. Checked on models
onnxruntime's quantize_static writes, against onnxruntime, and on hand-built groups that
must not fuse."""

import collections
import json
import os
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import int8_range, run_ort

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "tools"))
import tool_models  # noqa: E402

L = ortlite.GraphOptimizationLevel


def run(m, feeds, level, tmp_path):
    so = ortlite.SessionOptions()
    so.graph_optimization_level = level
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / f"p{int(level)}")
    s = ortlite.InferenceSession(m.SerializeToString(), so)
    out = s.run(None, feeds)
    path = s.end_profiling()
    with open(path) as f:
        ops = {e.get("args", {}).get("op_name") for e in json.load(f) if e.get("cat") == "Node"}
    os.remove(path)
    return out, ops


def run_counts(m, feeds, level, tmp_path):
    """run(), with the number of nodes of each op type the run executed."""
    so = ortlite.SessionOptions()
    so.graph_optimization_level = level
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / f"c{int(level)}")
    s = ortlite.InferenceSession(m.SerializeToString(), so)
    out = s.run(None, feeds)
    path = s.end_profiling()
    with open(path) as f:
        counts = collections.Counter(e["args"]["op_name"] for e in json.load(f)
                                     if e.get("cat") == "Node")
    os.remove(path)
    return out, counts


@pytest.mark.parametrize("name,fused", [("mlp", "QLinearMatMul"), ("cnn", "QLinearConv")])
def test_quantize_static_qdq_models(name, fused, tmp_path):
    m = tool_models.variant("qdq", tool_models.FLOAT_MODELS[name](), tmp_path)
    feeds = tool_models.feeds(m)
    (y99,), ops99 = run(m, feeds, L.ORT_ENABLE_ALL, tmp_path)
    (y1,), ops1 = run(m, feeds, L.ORT_ENABLE_BASIC, tmp_path)
    assert fused in ops99 and fused not in ops1
    (o,) = run_ort(m, feeds)
    # The fused integer operators requantize like onnxruntime's: the same values.
    np.testing.assert_array_equal(y99, o)
    # The float path (level 1) is within a quantization step or two of it.
    step = float(np.abs(o).max()) / 64
    np.testing.assert_allclose(y1, o, atol=2 * step)


def qdq_matmul(per_column, q_read_twice=False, bias_zp=0):
    rng = np.random.default_rng(3)
    K, N = 24, 10
    lo, hi = int8_range()
    wq = rng.integers(max(lo, -127), hi + 1, size=(K, N)).astype(np.int8)
    ws = (rng.uniform(0.01, 0.05, N) if per_column else np.array(0.02)).astype(np.float32)
    inits = {"xs": np.array(0.05, np.float32), "xz": np.array(128, np.uint8), "wq": wq,
             "ws": ws, "wz": np.zeros(ws.shape, np.int8),
             "ys": np.array(0.1, np.float32), "yz": np.array(120, np.uint8)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=1),
             helper.make_node("MatMul", ["xd", "wd"], ["mm"]),
             helper.make_node("QuantizeLinear", ["mm", "ys", "yz"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if q_read_twice:
        outs.append(helper.make_tensor_value_info("mm", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     [3, K])], outs,
                          initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("per_column", [False, True])
def test_matmul_group_fuses_and_matches_onnxruntime(per_column, tmp_path):
    m = qdq_matmul(per_column)
    x = np.random.default_rng(0).standard_normal((3, 24)).astype(np.float32)
    (y,), ops = run(m, {"x": x}, L.ORT_ENABLE_ALL, tmp_path)
    assert "QLinearMatMul" in ops and "MatMul" not in ops
    np.testing.assert_array_equal(y, run_ort(m, {"x": x})[0])


def test_matmul_output_read_elsewhere_is_not_fused(tmp_path):
    m = qdq_matmul(False, q_read_twice=True)
    x = np.random.default_rng(0).standard_normal((3, 24)).astype(np.float32)
    out, ops = run(m, {"x": x}, L.ORT_ENABLE_ALL, tmp_path)
    assert "MatMul" in ops and "QLinearMatMul" not in ops
    for a, e in zip(out, run_ort(m, {"x": x})):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5)


def qdq_group(op, dtype, x_shape=(2, 8, 5, 5), second=None, same_params=True, **attrs):
    """x -> Q -> DQ -> op [with DQ(second) as its second input] -> Q -> DQ -> y. second: a
    constant quantized tensor, "x" (the same DQ twice) or None."""
    rng = np.random.default_rng(5)
    info = np.iinfo(dtype)
    zp = lambda v: np.array(v if dtype == np.uint8 else v - 128, dtype)  # noqa: E731
    inits = {"xs": np.array(0.04, np.float32), "xz": zp(130),
             "ys": np.array(0.04 if same_params else 0.07, np.float32),
             "yz": zp(130 if same_params else 120)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"])]
    ins = ["xd"]
    if isinstance(second, tuple):
        inits.update(bq=rng.integers(info.min, info.max + 1, size=second).astype(dtype),
                     bs=np.array(0.03, np.float32), bz=zp(100))
        nodes.append(helper.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["bd"]))
        ins.append("bd")
    elif second == "x":
        ins.append("xd")
    elif op == "Reshape":
        inits["shape"] = np.array([0, -1], np.int64)
        ins.append("shape")
    nodes += [helper.make_node(op, ins, ["o"], **attrs),
              helper.make_node("QuantizeLinear", ["o", "ys", "yz"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     list(x_shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("op,second,fused", [
    ("Add", (5,), "QLinearAdd"), ("Add", (2, 8, 5, 5), "QLinearAdd"), ("Add", "x", "QLinearAdd"),
    ("Mul", (8, 1, 1), "QLinearMul"), ("Mul", (1,), "QLinearMul"),
    ("GlobalAveragePool", None, "QLinearGlobalAveragePool"),
])
def test_binary_and_pool_groups_fuse_and_match_onnxruntime(op, second, fused, dtype, tmp_path):
    # onnxruntime's QDQ transformer runs these groups as the same com.microsoft operators,
    # and ortlite's repeat its arithmetic: the same bytes.
    m = qdq_group(op, dtype, second=second, same_params=False)
    x = np.random.default_rng(1).standard_normal((2, 8, 5, 5)).astype(np.float32) * 2
    (y,), ops = run(m, {"x": x}, L.ORT_ENABLE_ALL, tmp_path)
    assert fused in ops and op not in ops, ops
    np.testing.assert_array_equal(y, run_ort(m, {"x": x})[0])
    (y1,), ops1 = run(m, {"x": x}, L.ORT_ENABLE_BASIC, tmp_path)
    assert op in ops1
    np.testing.assert_allclose(y1, y, atol=2 * 0.07)  # the float path: a step or two apart


@pytest.mark.parametrize("op,attrs", [("Flatten", {}), ("Reshape", {}),
                                      ("Transpose", {"perm": [0, 2, 3, 1]}),
                                      ("Squeeze", {}), ("Unsqueeze", {})])
@pytest.mark.parametrize("same", [True, False])
def test_data_movement_between_equal_parameters_runs_quantized(op, attrs, same, tmp_path):
    # The Q/DQ pair around a data-movement operator with equal scale and zero point is
    # dropped (exact); with different parameters it stays.
    shape = (2, 8, 1, 5)
    m = qdq_group(op, np.uint8, x_shape=shape, same_params=same, **attrs)
    if op in ("Squeeze", "Unsqueeze"):
        m.graph.initializer.append(numpy_helper.from_array(np.array([2], np.int64), "axes"))
        m.graph.node[2].input.append("axes")
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    (y1,), counts1 = run_counts(m, {"x": x}, L.ORT_ENABLE_BASIC, tmp_path)
    (y,), counts = run_counts(m, {"x": x}, L.ORT_ENABLE_ALL, tmp_path)
    # x's QuantizeLinear stays; the pair around the operator goes when the parameters agree.
    assert counts1["QuantizeLinear"] == 2 and counts1["DequantizeLinear"] == 2
    assert counts["QuantizeLinear"] == (1 if same else 2), counts
    assert counts["DequantizeLinear"] == (1 if same else 2) and counts[op] == 1, counts
    np.testing.assert_array_equal(y, run_ort(m, {"x": x})[0])
    np.testing.assert_array_equal(y, y1)
