"""QDQ groups run as integer operators at graph_optimization_level >= 2 (optimizer.cc step
0b): DequantizeLinear -> Conv / MatMul -> QuantizeLinear with constant quantized weights
becomes QLinearConv / QLinearMatMul, as onnxruntime's QDQ fusion does. Checked on models
onnxruntime's quantize_static writes, against onnxruntime, and on hand-built groups that
must not fuse."""

import json
import os
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import run_ort

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
    wq = rng.integers(-127, 128, size=(K, N)).astype(np.int8)
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
