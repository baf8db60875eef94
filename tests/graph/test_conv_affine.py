"""Add / Sub / Mul / Div by a scalar or per-channel constant after a Conv, folded into the
Conv's weights and bias at load (src/graph/optimizer.cc, fold_conv_affine): the chain
vanishes from the plan and the result matches onnxruntime and the unoptimized session; what
is not affine in the weights (c - conv, c / conv, a constant that is not per channel, a
value read elsewhere) stays."""

import numpy as np
import pytest
from onnx import helper, numpy_helper

import ortlite
from helpers import make_model, node_ops, optimized_session, run_ort

F32 = np.float32
M, C = 6, 4


sess = optimized_session
ops = node_ops


def chain_model(steps, bias=True, extra_outputs=()):
    """Conv (M=6) then each (op, constant, conv_first) of steps in turn."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((M, C, 3, 3)).astype(F32), "w")]
    ins = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(M).astype(F32), "b"))
        ins.append("b")
    nodes = [helper.make_node("Conv", ins, ["v0"], pads=[1, 1, 1, 1])]
    for i, (op, c, conv_first) in enumerate(steps):
        inits.append(numpy_helper.from_array(np.asarray(c, F32), f"c{i}"))
        a, b = (f"v{i}", f"c{i}") if conv_first else (f"c{i}", f"v{i}")
        nodes.append(helper.make_node(op, [a, b], [f"v{i + 1}"]))
    outs = [(f"v{len(steps)}", F32, None)] + [(o, F32, None) for o in extra_outputs]
    return make_model(nodes, [("x", F32, [2, C, 7, 9])], outs, inits)


def check(model):
    x = np.random.default_rng(1).standard_normal((2, C, 7, 9)).astype(F32)
    expected = run_ort(model, {"x": x})
    s = sess(model)
    actual = s.run(None, {"x": x})
    off = sess(model, ortlite.GraphOptimizationLevel.ORT_DISABLE_ALL).run(None, {"x": x})
    for a, e, o in zip(actual, expected, off):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(a, o, rtol=1e-5, atol=1e-5)
    return ops(s)


rng = np.random.default_rng(2)
PER_CHANNEL = [rng.standard_normal((1, M, 1, 1)), rng.standard_normal((M, 1, 1)),
               np.float32(0.7), rng.standard_normal((1,))]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("ci", range(len(PER_CHANNEL)))
def test_normalization_chain_folds_into_the_conv(bias, ci):
    c = PER_CHANNEL[ci]
    steps = [("Add", c, True), ("Sub", c * 0.5, True), ("Mul", np.abs(c) + 0.5, False),
             ("Div", np.abs(c) + 1.0, True), ("Add", c, False)]
    planned = check(chain_model(steps, bias))
    assert planned.count("Add") + planned.count("Sub") + planned.count("Mul") + \
        planned.count("Div") == 0, planned


@pytest.mark.parametrize("step", [
    ("Sub", np.ones((1, M, 1, 1)), False),         # c - conv
    ("Div", np.ones((1, M, 1, 1)), False),         # c / conv
    ("Div", np.zeros((1, M, 1, 1)), True),         # division by zero stays at run time
    ("Mul", np.ones((1, 1, 1, 9)), True),          # per column, not per channel
    ("Sub", np.ones((1, 1, 7, 1)), True),          # per row
    ("Sub", np.ones((1, 1, M, 1, 1)), True),       # broadcasts the output up a rank
])
def test_what_is_not_per_channel_affine_stays(step):
    planned = check(chain_model([step]))
    assert planned.count(step[0]) == 1, planned


def test_conv_output_read_elsewhere_is_not_folded():
    planned = check(chain_model([("Mul", np.full((1, M, 1, 1), 2.0), True)],
                                extra_outputs=["v0"]))
    assert planned.count("Mul") == 1, planned
