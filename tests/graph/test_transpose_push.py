"""Transposes pushed down through elementwise nodes and cancelled at load
(src/graph/optimizer.cc, push_transposes): an NHWC model's layout transposes around each
Conv vanish, the results match onnxruntime, and the rewrite keeps graph outputs, values read
by subgraphs and non-elementwise readers right. What remains is read from the planned nodes
(InferenceSession._node_placement())."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import make_model, node_ops, optimized_session, run_ort

F32 = np.float32
TO_NCHW, TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]


sess = optimized_session
ops = node_ops


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def tr(x, y, perm, name=None):
    return helper.make_node("Transpose", [x], [y], perm=perm, name=name or y)


def check(model, feeds):
    expected = run_ort(model, feeds)
    s = sess(model)
    actual = s.run(None, feeds)
    off = sess(model, ortlite.GraphOptimizationLevel.ORT_DISABLE_ALL).run(None, feeds)
    for a, e, o in zip(actual, expected, off):
        assert a.shape == e.shape and a.dtype == e.dtype
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(a, o, rtol=1e-5, atol=1e-5)
    return s


def nhwc_block_model(c=8, hw=10, residual=True, out_transposed=False):
    """x (NHWC) -> T -> Conv -> T -> Add bias [C] -> Mul scale [1,1,1,C] -> Relu -> T ->
    Conv -> T -> Sub [1,1,1,C] -> (Add the first block's NHWC output) -> Relu, as
    tf2onnx writes a ResNet block."""
    rng = np.random.default_rng(0)
    inits = [init("w1", rng.standard_normal((c, c, 3, 3)).astype(F32) * 0.2),
             init("w2", rng.standard_normal((c, c, 3, 3)).astype(F32) * 0.2),
             init("b", rng.standard_normal(c).astype(F32)),
             init("s", rng.standard_normal((1, 1, 1, c)).astype(F32)),
             init("m", rng.standard_normal((1, 1, 1, c)).astype(F32))]
    nodes = [tr("x", "x_nchw", TO_NCHW),
             helper.make_node("Conv", ["x_nchw", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             tr("c1", "c1_nhwc", TO_NHWC),
             helper.make_node("Add", ["c1_nhwc", "b"], ["a1"]),
             helper.make_node("Mul", ["s", "a1"], ["m1"]),
             helper.make_node("Relu", ["m1"], ["r1"]),
             tr("r1", "r1_nchw", TO_NCHW),
             helper.make_node("Conv", ["r1_nchw", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             tr("c2", "c2_nhwc", TO_NHWC),
             helper.make_node("Sub", ["c2_nhwc", "m"], ["s2"])]
    last = "s2"
    if residual:
        nodes.append(helper.make_node("Add", ["s2", "r1"], ["res"]))
        last = "res"
    nodes.append(helper.make_node("Relu", [last], ["y"]))
    out = "y"
    if out_transposed:
        nodes.append(tr("y", "y_nchw", TO_NCHW))
        out = "y_nchw"
    model = make_model(nodes, [("x", F32, [1, hw, hw, c])], [(out, F32, None)], inits)
    feeds = {"x": rng.standard_normal((1, hw, hw, c)).astype(F32)}
    return model, feeds


@pytest.mark.parametrize("residual", [False, True])
def test_nhwc_block_runs_without_inner_transposes(residual):
    model, feeds = nhwc_block_model(residual=residual)
    s = check(model, feeds)
    # The input's Transpose and the one back to NHWC at the end remain; the two pairs
    # between the Convs cancel.
    assert ops(s).count("Transpose") == 2, ops(s)


def test_transposes_that_compose_to_the_identity_leave_a_graph_output():
    model, feeds = nhwc_block_model(out_transposed=True)
    s = check(model, feeds)
    assert ops(s).count("Transpose") == 1, ops(s)


def test_graph_output_between_transposes_keeps_its_layout():
    """The NHWC value r1 is also a graph output: it must stay NHWC."""
    model, feeds = nhwc_block_model(residual=True)
    model.graph.output.append(helper.make_tensor_value_info("r1", TensorProto.FLOAT, None))
    check(model, feeds)


def test_transpose_read_by_two_transposes_and_a_shape():
    nodes = [tr("x", "t", [0, 2, 3, 1]),
             helper.make_node("Relu", ["t"], ["r"]),
             tr("r", "back", [0, 3, 1, 2]),
             tr("r", "other", [1, 0, 2, 3]),
             helper.make_node("Shape", ["r"], ["shape"]),
             helper.make_node("Add", ["back", "x"], ["y"])]
    model = make_model(nodes, [("x", F32, [2, 3, 4, 5])],
                       [("y", F32, None), ("other", F32, None), ("shape", np.int64, None)])
    check(model, {"x": np.random.default_rng(1).standard_normal((2, 3, 4, 5)).astype(F32)})


def test_chain_composes_to_one_transpose():
    nodes = [tr("x", "a", [1, 2, 0]), helper.make_node("Neg", ["a"], ["n"]),
             tr("n", "b", [1, 2, 0]), helper.make_node("Abs", ["b"], ["y"])]
    model = make_model(nodes, [("x", F32, [2, 3, 4])], [("y", F32, None)])
    s = check(model, {"x": np.random.default_rng(2).standard_normal((2, 3, 4)).astype(F32)})
    assert ops(s).count("Transpose") == 1, ops(s)


@pytest.mark.parametrize("const_shape", [(), (1,), (5,), (4, 1), (1, 4, 5), (3, 1, 1)])
@pytest.mark.parametrize("op", ["Add", "Sub", "Div", "Pow", "PRelu"])
def test_constant_operands_of_any_broadcast_rank(const_shape, op):
    rng = np.random.default_rng(3)
    c = (rng.random(const_shape) + 0.5).astype(F32)
    x_in = "t"
    inputs = ["t", "c"] if op in ("PRelu", "Pow") else ["c", "t"]
    nodes = [tr("x", x_in, [2, 0, 1]), helper.make_node(op, inputs, ["e"]),
             tr("e", "y", [1, 2, 0])]
    model = make_model(nodes, [("x", F32, [4, 5, 3])], [("y", F32, None)], [init("c", c)])
    x = (rng.random((4, 5, 3)) + 0.1).astype(F32)
    check(model, {"x": x})


def test_transposed_value_read_by_a_subgraph_is_kept():
    then_g = helper.make_graph([helper.make_node("Relu", ["t"], ["o"])], "then", [],
                               [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)])
    else_g = helper.make_graph([helper.make_node("Neg", ["t"], ["o2"])], "else", [],
                               [helper.make_tensor_value_info("o2", TensorProto.FLOAT, None)])
    nodes = [tr("x", "t", [1, 0]), helper.make_node("Relu", ["t"], ["r"]),
             tr("r", "back", [1, 0]),
             helper.make_node("If", ["cond"], ["z"], then_branch=then_g, else_branch=else_g),
             helper.make_node("Add", ["back", "x"], ["y"])]
    model = make_model(nodes, [("x", F32, [3, 4]), ("cond", np.bool_, [])],
                       [("y", F32, None), ("z", F32, None)])
    x = np.random.default_rng(4).standard_normal((3, 4)).astype(F32)
    for cond in (True, False):
        check(model, {"x": x, "cond": np.array(cond)})


def test_non_elementwise_reader_stops_the_push():
    nodes = [tr("x", "t", [0, 2, 1]), helper.make_node("Relu", ["t"], ["r"]),
             helper.make_node("Softmax", ["r"], ["sm"], axis=-1),
             tr("sm", "y", [0, 2, 1])]
    model = make_model(nodes, [("x", F32, [2, 3, 4])], [("y", F32, None)])
    s = check(model, {"x": np.random.default_rng(5).standard_normal((2, 3, 4)).astype(F32)})
    assert ops(s).count("Transpose") == 2, ops(s)


def test_disable_all_keeps_the_transposes():
    model, feeds = nhwc_block_model()
    s = sess(model, ortlite.GraphOptimizationLevel.ORT_DISABLE_ALL)
    assert ops(s).count("Transpose") == 4
