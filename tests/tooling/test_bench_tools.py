"""The pure helpers of tools/bench_real.py and tools/bench_ops.py: feeds from input
metadata, output comparison, geometric mean, table order and docs blocks, case building.
Nothing here downloads, starts a child process or times anything."""

import importlib.util
import math
import os
import re
import sys

import numpy as np
import pytest

from helpers import ROOT

TOOLS = os.path.join(ROOT, "tools")


def _load(name):
    if TOOLS not in sys.path:
        sys.path.insert(0, TOOLS)
    spec = importlib.util.spec_from_file_location(name, os.path.join(TOOLS, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def real():
    return _load("bench_real")


@pytest.fixture(scope="module")
def ops():
    return _load("bench_ops")


# --- bench_real --------------------------------------------------------------------------------


def test_feeds_follow_metadata_and_table(real):
    inputs = [("x", "tensor(float)", ["batch", 3, "h", "w"]),
              ("sr", "tensor(int64)", []),
              ("state", "tensor(float)", [2, None, 128]),
              ("ids", "tensor(int64)", [1, 16])]
    spec = {"shapes": {"x": [1, 3, 48, 320], "state": [2, 1, 128]},
            "ranges": {"x": ("uniform", 0, 1), "sr": ("value", 16000), "state": ("zeros",),
                       "ids": ("int", 0, 5)}}
    feeds = real.make_feeds(inputs, spec, seed=3)
    assert feeds["x"].dtype == np.float32 and feeds["x"].shape == (1, 3, 48, 320)
    assert feeds["x"].min() >= 0 and feeds["x"].max() <= 1
    assert feeds["sr"].shape == () and feeds["sr"].dtype == np.int64 and feeds["sr"] == 16000
    assert not feeds["state"].any()
    assert feeds["ids"].dtype == np.int64 and feeds["ids"].max() < 5
    again = real.make_feeds(inputs, spec, seed=3)
    assert all(np.array_equal(feeds[k], again[k]) for k in feeds)
    assert all(v.flags.c_contiguous for v in feeds.values())


def test_feeds_batch_defaults_to_one_and_other_symbols_must_be_chosen(real):
    feeds = real.make_feeds([("x", "tensor(float)", ["N", 16, 96])], {})
    assert feeds["x"].shape == (1, 16, 96)
    assert -1 <= feeds["x"].min() and feeds["x"].max() <= 1
    with pytest.raises(ValueError, match="symbolic"):
        real.make_feeds([("x", "tensor(float)", [1, "samples"])], {})
    with pytest.raises(ValueError, match="contradicts"):
        real.make_feeds([("x", "tensor(float)", [1, 3, 224, 224])], {"shapes": {"x": [1, 3, 1, 1]}})
    with pytest.raises(ValueError, match="does not have"):
        real.make_feeds([("x", "tensor(float)", [1])], {"ranges": {"y": ("zeros",)}})


def test_token_and_tree_threshold_feeds(real, tmp_path):
    from onnx import TensorProto, helper

    feeds = real.make_feeds([("ids", "tensor(int64)", ["b", "s"])],
                            {"shapes": {"ids": [8, 64]}, "ranges": {"ids": ("tokens", 30522)}})
    ids = feeds["ids"]
    assert (ids[:, 0] == 101).all() and (ids[:, -1] == 102).all()
    assert ids[:, 1:-1].min() >= 999 and ids.max() < 30522
    # Two trees: feature 0 split at -1 and 2, feature 2 at 0.5; feature 1 never split on.
    node = helper.make_node(
        "TreeEnsembleRegressor", ["X"], ["Y"], domain="ai.onnx.ml",
        nodes_treeids=[0, 0, 0, 1, 1, 1], nodes_nodeids=[0, 1, 2, 0, 1, 2],
        nodes_featureids=[0, 0, 0, 2, 0, 0], nodes_values=[-1.0, 0, 0, 0.5, 0, 0],
        nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF", "BRANCH_LEQ", "LEAF", "LEAF"],
        nodes_truenodeids=[1, 0, 0, 1, 0, 0], nodes_falsenodeids=[2, 0, 0, 2, 0, 0],
        target_treeids=[0, 1], target_nodeids=[1, 1], target_ids=[0, 0], target_weights=[1, 2],
        n_targets=1)
    node2 = helper.make_node("TreeEnsembleRegressor", ["X"], ["Z"], domain="ai.onnx.ml",
                             **{a.name: helper.get_attribute_value(a) for a in node.attribute
                                if a.name != "nodes_values"}, nodes_values=[2.0, 0, 0, 0.5, 0, 0])
    g = helper.make_graph([node, node2], "g",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 3])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("Z", TensorProto.FLOAT, None)])
    path = tmp_path / "t.onnx"
    path.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                                         helper.make_opsetid("ai.onnx.ml", 3)])
                     .SerializeToString())
    th = real.tree_thresholds(path)
    assert sorted(th) == [0, 2] and list(th[0]) == [-1.0, 2.0] and list(th[2]) == [0.5]
    x = real.make_feeds([("X", "tensor(float)", ["N", 3])],
                        {"shapes": {"X": [400, 3]}, "ranges": {"X": ("tree_thresholds",)}},
                        model=path)["X"]
    assert x.shape == (400, 3) and x.dtype == np.float32 and not x[:, 1].any()
    assert -2 <= x[:, 0].min() and x[:, 0].max() <= 3 and 0 < (x[:, 0] <= -1).sum() < 400
    assert 0 < (x[:, 0] > 2).sum() < 400 and 0 < (x[:, 2] <= 0.5).sum() < 400
    with pytest.raises(ValueError, match="needs the model"):
        real.make_feeds([("X", "tensor(float)", [1, 3])], {"ranges": {"X": ("tree_thresholds",)}})


def test_sequence_of_maps_compares_keys_and_values(real):
    keys, vals = real.comparable([{1: 0.25, 0: 0.75}, {0: 0.5, 1: 0.5}])
    assert keys.tolist() == [[0, 1], [0, 1]] and vals.tolist() == [[0.75, 0.25], [0.5, 0.5]]
    (t,) = real.comparable(np.ones(3, np.float32))
    assert t.dtype == np.float32 and t.shape == (3,)


def test_model_table_is_pinned(real):
    names = [m["name"] for m in real.MODELS]
    assert len(names) == len(set(names))
    for m in real.MODELS:
        assert re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][0-9A-Za-z.]*", m["pkg"]), m
        assert m["member"].endswith((".onnx", ".onnx.gz")) and m["note"]
        assert real.model_path(m).suffix == ".onnx"
        assert real.model_path(m).parent.parent == real.MODEL_DIR


def test_find_archive_matches_name_and_version(real, tmp_path, monkeypatch):
    monkeypatch.setattr(real, "DL_DIR", tmp_path)
    (tmp_path / "rapidocr_onnxruntime-1.4.4-py3-none-any.whl").write_bytes(b"")
    (tmp_path / "ddddocr-1.6.1.tar.gz").write_bytes(b"")
    assert real._find_archive("rapidocr-onnxruntime", "1.4.4").name.endswith(".whl")
    assert real._find_archive("ddddocr", "1.6.1").name == "ddddocr-1.6.1.tar.gz"
    assert real._find_archive("ddddocr", "1.6") is None
    assert real._find_archive("rapidocr", "1.4.4") is None


def test_compare_outputs(real):
    a = np.linspace(-1, 1, 100, dtype=np.float32)
    ok, diff, _ = real.compare_outputs([a + 1e-6], [a])
    assert ok and 0 < diff < 1e-5
    ok, diff, msg = real.compare_outputs([a + 0.1], [a])
    assert not ok and "differ" in msg and diff == pytest.approx(0.1, rel=1e-3)
    ok, _, _ = real.compare_outputs([a + 0.1], [a], rtol=0.2, atol_rel=0.2)
    assert ok
    i = np.arange(10, dtype=np.int64)
    assert real.compare_outputs([i], [i])[0]
    assert not real.compare_outputs([i + 1], [i])[0]
    assert real.compare_outputs([i + 1], [i], int_atol=1)[0]
    assert not real.compare_outputs([a[:10]], [a])[0]
    assert not real.compare_outputs([a], [a, a])[0]


def test_geomean(real):
    assert real.geomean([1.0, 4.0]) == pytest.approx(2.0)
    assert real.geomean([2.0, None, 0.0, 8.0]) == pytest.approx(4.0)
    assert real.geomean([]) is None and real.geomean([None]) is None


def test_table_puts_failures_then_worst_ratios_first(real):
    rows = [{"name": "fast", "threads": 1, "status": "ok", "ortlite_s": 1e-3,
             "onnxruntime_s": 2e-3, "ratio": 2.0, "max_abs_diff": 1e-7},
            {"name": "fast", "threads": 2, "status": "ok", "ortlite_s": 1e-3,
             "onnxruntime_s": 1e-3, "ratio": 1.0, "max_abs_diff": 1e-7},
            {"name": "slow", "threads": 1, "status": "ok", "ortlite_s": 2e-3,
             "onnxruntime_s": 1e-3, "ratio": 0.5, "max_abs_diff": 0.0},
            {"name": "slow", "threads": 2, "status": "ok", "ortlite_s": 2e-3,
             "onnxruntime_s": 1.5e-3, "ratio": 0.75, "max_abs_diff": 0.0},
            {"name": "broken", "threads": 1, "status": "ortlite fails", "error": "x"},
            {"name": "broken", "threads": 2, "status": "ortlite fails", "error": "x"}]
    head, lines = real.table(rows, [1, 2])
    assert head[:3] == ["model", "status", "max|diff|"] and len(head) == 9
    assert [ln[0] for ln in lines] == ["broken", "slow", "fast", "geometric mean"]
    assert lines[1][3:6] == ["2.00 ms", "1.00 ms", "0.50"]
    assert lines[-1][5] == "1.00" and lines[-1][8] == f"{math.sqrt(0.75):.2f}"
    text = real.text_table(head, lines)
    assert text.splitlines()[0].startswith("model") and "ortlite fails" in text
    md = real.md_table(head, lines)
    assert md.splitlines()[1] == "|" + "---|" * 9 and "max\\|diff\\|" in md


def test_fmt_time(real):
    assert real.fmt_time(1.04e-6) == "1.04 us"
    assert real.fmt_time(2.5e-4) == "250.0 us"
    assert real.fmt_time(0.0254) == "25.4 ms"
    assert real.fmt_time(1.5) == "1500 ms"
    assert real.fmt_time(None) == "-"


def test_replace_block_keeps_the_rest(real):
    doc = "# Performance\n\nintro\n"
    once = real.replace_block(doc, "<!-- b -->", "<!-- /b -->", "table 1")
    assert once.startswith(doc.rstrip()) and once.endswith("<!-- b -->\ntable 1\n<!-- /b -->\n")
    twice = real.replace_block(once + "\ntail\n", "<!-- b -->", "<!-- /b -->", "table 2\n")
    assert "table 1" not in twice and "table 2" in twice and twice.endswith("tail\n")
    assert twice.count("<!-- b -->") == 1


# --- bench_ops ---------------------------------------------------------------------------------

REQUIRED = ["Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "Resize",
            "MatMul", "Gemm", "MatMulInteger", "DynamicQuantizeLinear", "QLinearConv", "Add",
            "Mul", "Sub", "Div", "Relu", "Sigmoid", "Tanh", "Elu", "LeakyRelu", "HardSigmoid",
            "Gelu", "Erf", "Exp", "Pow", "Softmax", "LayerNormalization", "BatchNormalization",
            "ReduceMean", "ReduceSum", "ReduceMax", "Transpose", "Reshape", "Concat", "Slice",
            "Gather", "Split", "Cast", "Where", "TreeEnsembleClassifier",
            "TreeEnsembleRegressor", "LSTM", "GRU"]


@pytest.fixture(scope="module")
def cases(ops):
    return ops.all_cases()


def test_every_required_op_has_three_cases(cases):
    count = {}
    for c in cases:
        count[c.op] = count.get(c.op, 0) + 1
    short = {op: count.get(op, 0) for op in REQUIRED if count.get(op, 0) < 3}
    assert not short
    names = [c.name for c in cases]
    assert len(names) == len(set(names))


def test_resize_covers_modes_and_pools_cover_padding(cases):
    resize = {(c.attrs["mode"], c.attrs["coordinate_transformation_mode"])
              for c in cases if c.op == "Resize"}
    assert {("nearest", "asymmetric"), ("linear", "half_pixel"),
            ("linear", "align_corners"), ("linear", "pytorch_half_pixel")} <= resize
    assert any(c.op == "AveragePool" and c.attrs.get("count_include_pad") == 0
               and c.attrs.get("pads") and not c.attrs.get("strides") for c in cases)
    assert any(c.op == "Pow" and c.label.startswith("^2") for c in cases)
    assert any(c.op == "Pow" and c.label.startswith("^3") for c in cases)


def test_build_model_one_node(ops, cases):
    from onnx import numpy_helper

    by = {c.name: c for c in cases}
    model, feeds = ops.build(by["Conv depthwise 3x3 1x144x56x56"])
    (node,) = model.graph.node
    assert node.op_type == "Conv" and list(node.input) == ["x", "w", "b"]
    assert set(feeds) == {"x"} and feeds["x"].shape == (1, 144, 56, 56)
    w = numpy_helper.to_array(model.graph.initializer[0])
    assert w.shape == (144, 1, 3, 3)
    model, feeds = ops.build(by["Resize linear half_pixel x2 1x96x80x80"])
    assert list(model.graph.node[0].input) == ["x", "", "scales"]
    model, feeds = ops.build(next(c for c in cases if c.op == "If"))
    assert set(feeds) == {"c", "x"} and len(model.graph.node[0].attribute) == 2
    model, _ = ops.build(next(c for c in cases if c.op == "TreeEnsembleRegressor"))
    assert {o.domain for o in model.opset_import} == {"", "ai.onnx.ml"}


def test_tree_attrs_make_full_trees(ops):
    attrs, leaves = ops.tree_attrs(np.random.default_rng(0), 2, 3, 5)
    assert len(attrs["nodes_nodeids"]) == 2 * 15 and len(leaves) == 2 * 8
    assert attrs["nodes_modes"].count("LEAF") == 16
    assert max(attrs["nodes_featureids"]) < 5


def test_select(ops, cases):
    assert {c.op for c in ops.select(cases, ["conv"])} == {"Conv"}
    assert {c.op for c in ops.select(cases, ["Size"])} == {"Size"}
    assert {c.op for c in ops.select(cases, ["rnn"])} == {"LSTM", "GRU"}
    assert all("depthwise" in c.name for c in ops.select(cases, ["depthwise"]))
    assert ops.select(cases, []) == cases


def test_uncovered_and_table(ops, cases):
    corpus = {"Conv": 3, "Constant": 9, "com.microsoft.DynamicQuantizeLSTM": 1, "Foo": 1}
    assert ops.uncovered(corpus, cases) == ["Foo", "com.microsoft.DynamicQuantizeLSTM"]
    rows = [{"name": "Relu 1x1000", "op": "Relu", "status": "ok", "ratio": 2.0,
             "ortlite_s": 1e-6, "onnxruntime_s": 2e-6, "max_abs_diff": 0.0},
            {"name": "Conv a", "op": "Conv", "status": "ok", "ratio": 0.5,
             "ortlite_s": 2e-3, "onnxruntime_s": 1e-3, "max_abs_diff": 1e-6},
            {"name": "GRU b", "op": "GRU", "status": "ortlite fails", "error": "e"}]
    head, lines = ops.table(rows)
    assert [ln[0] for ln in lines] == ["GRU", "Conv", "Relu", "geometric mean"]
    assert lines[1][1] == "a" and lines[-1][-1] == "1.00" and lines[-1][1] == "2 cases"
    assert ops.per_op_geomeans(rows) == {"Relu": 2.0, "Conv": 0.5}


def test_failure_lines_name_each_model_once(real):
    rows = [{"name": "a", "threads": 1, "status": "ortlite fails", "error": "no kernel"},
            {"name": "a", "threads": 2, "status": "ortlite fails", "error": "no kernel"},
            {"name": "b", "threads": 1, "status": "ok", "ratio": 1.0}]
    assert real.failure_lines(rows) == ["- a: ortlite fails: no kernel"]
