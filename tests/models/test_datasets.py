"""ortlite.datasets: the example models onnxruntime.datasets ships, made by
tools/make_datasets.py. Checked against onnxruntime's own files (same inputs, outputs and
nodes; same results under onnxruntime) and against the values onnxruntime's tests expect."""

import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime
import pytest

import ortlite
from ortlite import datasets
from helpers import ROOT

NAMES = ["mul_1.onnx", "sigmoid.onnx", "logreg_iris.onnx"]
ORT_DATASETS = os.path.join(os.path.dirname(onnxruntime.__file__), "datasets")


def _io(graph_values):
    return [(v.name, v.type.SerializeToString()) for v in graph_values]


def _nodes(model):
    return [(n.op_type, n.domain, list(n.input), list(n.output),
             sorted((a.name, onnx.helper.get_attribute_value(a)) for a in n.attribute))
            for n in model.graph.node]


@pytest.mark.parametrize("name", NAMES)
def test_get_example_gives_the_packaged_model(name):
    path = datasets.get_example(name)
    assert os.path.isabs(path) and os.path.isfile(path)
    assert os.path.dirname(path) == os.path.dirname(os.path.abspath(datasets.__file__))
    ours, theirs = onnx.load(path), onnx.load(os.path.join(ORT_DATASETS, name))
    onnx.checker.check_model(ours)
    assert _io(ours.graph.input) == _io(theirs.graph.input)
    assert _io(ours.graph.output) == _io(theirs.graph.output)
    assert _nodes(ours) == _nodes(theirs)
    assert [onnx.numpy_helper.to_array(t).tolist() for t in ours.graph.initializer] == [
        onnx.numpy_helper.to_array(t).tolist() for t in theirs.graph.initializer]


@pytest.mark.parametrize("name", NAMES)
def test_examples_run_as_onnxruntime_runs_its_own(name):
    rng = np.random.default_rng(7)
    sess = ortlite.InferenceSession(datasets.get_example(name))
    ref = onnxruntime.InferenceSession(os.path.join(ORT_DATASETS, name),
                                       providers=["CPUExecutionProvider"])
    feeds = {i.name: rng.normal(size=i.shape).astype(np.float32) for i in ref.get_inputs()}
    got, exp = sess.run(None, feeds), ref.run(None, feeds)
    assert len(got) == len(exp)
    for g, e in zip(got, exp):
        if isinstance(e, list):  # ZipMap: a list of {class: probability}
            assert [sorted(d) for d in g] == [sorted(d) for d in e]
            np.testing.assert_allclose([[d[k] for k in sorted(d)] for d in g],
                                       [[d[k] for k in sorted(d)] for d in e], rtol=1e-6)
        else:
            assert g.dtype == e.dtype and g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=1e-6)


def test_documented_outputs_hold():
    # The values onnxruntime's Python tests expect from these examples.
    x = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=np.float32)
    (y,) = ortlite.InferenceSession(datasets.get_example("mul_1.onnx")).run(None, {"X": x})
    np.testing.assert_array_equal(y, x * x)
    label, probs = ortlite.InferenceSession(datasets.get_example("logreg_iris.onnx")).run(
        None, {"float_input": x})
    np.testing.assert_array_equal(label, [0, 0, 0])
    expected = [[0.950599730014801, 0.027834169566631317, 0.02156602405011654],
                [0.9974970817565918, 5.6299926654901356e-05, 0.0024466661270707846],
                [0.9997311234474182, 1.1918064757310276e-07, 0.00026869276189245284]]
    assert [sorted(p) for p in probs] == [[0, 1, 2]] * 3
    np.testing.assert_allclose([[p[k] for k in (0, 1, 2)] for p in probs], expected,
                               rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("bad", ["nope.onnx", "../__init__.py", "__init__.py",
                                 os.path.join("..", "datasets", "mul_1.onnx"), ""])
def test_get_example_refuses_other_names(bad):
    with pytest.raises(FileNotFoundError, match="Unable to find example"):
        datasets.get_example(bad)


def test_get_example_refuses_a_non_string():
    with pytest.raises(TypeError, match="expects a file name"):
        datasets.get_example(3)


def test_the_tool_writes_the_same_bytes(tmp_path):
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "make_datasets.py"),
                    str(tmp_path)], check=True, capture_output=True)
    for name in NAMES:
        with open(tmp_path / name, "rb") as a, open(datasets.get_example(name), "rb") as b:
            assert a.read() == b.read(), name
