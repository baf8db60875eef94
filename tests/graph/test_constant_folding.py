"""Load-time constant folding and dead-node elimination (src/graph/constant_folding.cc,
src/graph/optimizer.cc): what folds, what must not, and that folded values are right and
never alias the session's memory. Whether a node was folded is read from the planned nodes
(InferenceSession._node_placement())."""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import make_model, run_ort

F32 = np.float32
OFF = ortlite.GraphOptimizationLevel.ORT_DISABLE_ALL
BASIC = ortlite.GraphOptimizationLevel.ORT_ENABLE_BASIC


def sess(model, level=ortlite.GraphOptimizationLevel.ORT_ENABLE_ALL):
    so = ortlite.SessionOptions()
    so.graph_optimization_level = level
    so.intra_op_num_threads = 1
    return ortlite.InferenceSession(model.SerializeToString(), so)


def planned(s):
    """The names of the planned nodes (the placement lists labels: "Add node 'add'")."""
    return [label.split("'")[1] if "'" in label else label for label, _ in s._node_placement()]


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def dequant_model(layers=3, d=16, extra_inputs=()):
    rng = np.random.default_rng(1)
    nodes, inits, x = [], [], "x"
    for i in range(layers):
        inits += [init(f"w{i}", rng.integers(-127, 127, (d, d), dtype=np.int8)),
                  init(f"s{i}", np.array(0.02, F32))]
        nodes += [helper.make_node("Cast", [f"w{i}"], [f"wc{i}"], name=f"cast{i}", to=TensorProto.FLOAT),
                  helper.make_node("Mul", [f"wc{i}", f"s{i}"], [f"wf{i}"], name=f"mul{i}"),
                  helper.make_node("MatMul", [x, f"wf{i}"], [f"h{i}"], name=f"mm{i}")]
        x = f"h{i}"
    inputs = [("x", F32, [2, d])] + list(extra_inputs)
    return make_model(nodes, inputs, [(x, F32, [2, d])], inits)


def test_cast_mul_chain_on_int8_weights_folds():
    model = dequant_model()
    x = np.random.default_rng(2).standard_normal((2, 16)).astype(F32)
    expected = run_ort(model, {"x": x})[0]
    for level in (BASIC, OFF):
        s = sess(model, level)
        np.testing.assert_allclose(s.run(None, {"x": x})[0], expected, rtol=1e-5, atol=1e-5)
    on, off = planned(sess(model, BASIC)), planned(sess(model, OFF))
    assert len(off) == 9 and len(on) == 3
    assert not any(n.startswith(("cast", "mul")) for n in on)


def test_overridable_initializer_is_not_folded():
    model = dequant_model(layers=1, extra_inputs=[("s0", F32, [])])
    s = sess(model)
    assert planned(s) == ["mul0", "mm0"]  # the Cast of w0 folds, the Mul reads a feedable s0
    x = np.ones((2, 16), F32)
    default = s.run(None, {"x": x})[0]
    fed = s.run(None, {"x": x, "s0": np.array(0.04, F32)})[0]
    np.testing.assert_allclose(fed, 2 * default, rtol=1e-5)
    np.testing.assert_allclose(fed, run_ort(model, {"x": x, "s0": np.array(0.04, F32)})[0],
                               rtol=1e-5, atol=1e-5)


def test_disable_all_does_not_fold():
    model = dequant_model(layers=2)
    assert len(planned(sess(model, OFF))) == 6


def test_shape_arithmetic_folds():
    nodes = [helper.make_node("Shape", ["c"], ["shp"], name="shape"),
             helper.make_node("Gather", ["shp", "i0"], ["g0"], name="gather", axis=0),
             helper.make_node("Unsqueeze", ["g0", "ax"], ["u0"], name="unsq"),
             helper.make_node("Concat", ["u0", "m1"], ["ns"], name="concat", axis=0),
             helper.make_node("Reshape", ["x", "ns"], ["y"], name="reshape")]
    inits = [init("c", np.zeros((4, 6), F32)), init("i0", np.array(0, np.int64)),
             init("ax", np.array([0], np.int64)), init("m1", np.array([-1], np.int64))]
    model = make_model(nodes, [("x", F32, [2, 2, 6])], [("y", F32, None)], inits)
    s = sess(model)
    assert planned(s) == ["reshape"]
    x = np.arange(24, dtype=F32).reshape(2, 2, 6)
    np.testing.assert_array_equal(s.run(None, {"x": x})[0], run_ort(model, {"x": x})[0])


def test_random_op_is_not_folded():
    nodes = [helper.make_node("RandomUniform", [], ["r"], name="rand", shape=[4], seed=1.0),
             helper.make_node("Add", ["x", "r"], ["y"], name="add")]
    model = make_model(nodes, [("x", F32, [4])], [("y", F32, [4])])
    assert "rand" in planned(sess(model))
    nodes = [helper.make_node("RandomUniformLike", ["c"], ["r"], name="rand"),
             helper.make_node("Add", ["x", "r"], ["y"], name="add")]
    model = make_model(nodes, [("x", F32, [4])], [("y", F32, [4])], [init("c", np.zeros(4, F32))])
    assert "rand" in planned(sess(model))


def test_huge_expand_is_not_folded_and_a_small_one_is():
    def model(n):
        nodes = [helper.make_node("Expand", ["one", "shape"], ["e"], name="expand"),
                 helper.make_node("ReduceSum", ["e"], ["r"], name="sum", keepdims=0),
                 helper.make_node("Add", ["x", "r"], ["y"], name="add")]
        inits = [init("one", np.array(1.0, F32)), init("shape", np.array([n, n], np.int64))]
        return make_model(nodes, [("x", F32, [])], [("y", F32, [])], inits, opset=13)

    s = sess(model(4096))  # 64 MiB of floats from 4 bytes: left to run time
    assert "expand" in planned(s)
    assert s.run(None, {"x": np.array(1, F32)})[0] == 4096 * 4096 + 1
    s = sess(model(8))
    assert planned(s) == ["add"]
    assert s.run(None, {"x": np.array(1, F32)})[0] == 65


def test_failing_node_is_left_to_run_time():
    nodes = [helper.make_node("Reshape", ["c", "bad"], ["r"], name="reshape"),
             helper.make_node("Add", ["x", "r"], ["y"], name="add")]
    inits = [init("c", np.zeros(6, F32)), init("bad", np.array([4, 4], np.int64))]
    model = make_model(nodes, [("x", F32, [4, 4])], [("y", F32, [4, 4])], inits)
    s = sess(model)
    assert "reshape" in planned(s)
    try:
        s.run(None, {"x": np.zeros((4, 4), F32)})
    except Exception as e:  # noqa: BLE001 - onnxruntime's error class for a kernel failure
        assert "reshape" in str(e).lower()
    else:
        raise AssertionError("the bad Reshape ran")


def test_folded_graph_output_is_a_copy():
    nodes = [helper.make_node("Cast", ["c"], ["cast"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Mul", ["cast", "two"], ["dbl"], name="mul"),
             helper.make_node("Reshape", ["dbl", "shape"], ["resh"], name="reshape"),
             helper.make_node("Add", ["x", "dbl"], ["y"], name="add")]
    inits = [init("c", np.arange(6, dtype=np.int8)), init("two", np.array(2, F32)),
             init("shape", np.array([2, 3], np.int64))]
    model = make_model(nodes, [("x", F32, [6])], [("y", F32, [6]), ("dbl", F32, [6]),
                                                  ("resh", F32, [2, 3])], inits)
    s = sess(model)
    assert planned(s) == ["add"]
    x = np.ones(6, F32)
    expected = run_ort(model, {"x": x})
    out = s.run(None, {"x": x})
    for a, e in zip(out, expected):
        np.testing.assert_array_equal(a, e)
    out[1][:] = 42.0
    out[2][:] = 42.0
    again = s.run(None, {"x": x})
    for a, e in zip(again, expected):
        np.testing.assert_array_equal(a, e)
    assert not np.shares_memory(again[1], s.run(None, {"x": x})[1])


def test_constant_node_folds():
    nodes = [helper.make_node("Constant", [], ["k"], name="const", value_floats=[1.0, 2.0]),
             helper.make_node("Neg", ["k"], ["nk"], name="neg"),
             helper.make_node("Add", ["x", "nk"], ["y"], name="add")]
    model = make_model(nodes, [("x", F32, [2])], [("y", F32, [2])])
    s = sess(model)
    assert planned(s) == ["add"]
    np.testing.assert_array_equal(s.run(None, {"x": np.zeros(2, F32)})[0], [-1.0, -2.0])


def test_dead_nodes_are_removed():
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Sigmoid", ["x"], ["dead1"], name="dead1"),
             helper.make_node("Tanh", ["dead1"], ["dead2"], name="dead2"),
             helper.make_node("Neg", ["r"], ["y"], name="neg")]
    model = make_model(nodes, [("x", F32, [3])], [("y", F32, [3])])
    assert planned(sess(model)) == ["relu", "neg"]
    assert len(planned(sess(model, OFF))) == 4
    x = np.array([-1, 0, 2], F32)
    np.testing.assert_array_equal(sess(model).run(None, {"x": x})[0], -np.maximum(x, 0))


def test_outputs_that_are_inputs_or_initializers_still_work():
    nodes = [helper.make_node("Sigmoid", ["x"], ["dead"], name="dead")]
    model = make_model(nodes, [("x", F32, [2])], [("x", F32, [2]), ("c", F32, [2])],
                       [init("c", np.array([3, 4], F32))])
    s = sess(model)
    assert planned(s) == []
    x, c = s.run(None, {"x": np.array([1, 2], F32)})
    np.testing.assert_array_equal(x, [1, 2])
    np.testing.assert_array_equal(c, [3, 4])
    c[:] = 0
    np.testing.assert_array_equal(s.run(None, {"x": np.array([1, 2], F32)})[1], [3, 4])


def test_value_read_by_a_subgraph_is_kept_or_folded_correctly():
    then_g = helper.make_graph([helper.make_node("Add", ["x", "wf"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])])
    else_g = helper.make_graph([helper.make_node("Sub", ["x", "wf"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])])
    nodes = [helper.make_node("Cast", ["w"], ["wf"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Sigmoid", ["x"], ["unused"], name="unused"),
             helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then_g, else_branch=else_g)]
    model = make_model(nodes, [("x", F32, [2]), ("cond", np.bool_, [])], [("y", F32, [2])],
                       [init("w", np.array([1, 2], np.int32))])
    s = sess(model)
    assert planned(s) == ["if"]
    for cond in (True, False):
        feeds = {"x": np.array([10, 20], F32), "cond": np.array(cond)}
        np.testing.assert_array_equal(s.run(None, feeds)[0], run_ort(model, feeds)[0])


def _gate_reorder_if_model(w_is_input=False):
    """An If whose branch reorders an outer constant weight (Slice + Concat, as exporters
    write an LSTM's gates) and multiplies the input by it; the weight comes from an outer
    Constant node, or from an overridable initializer when w_is_input."""
    body_nodes = [
        helper.make_node("Slice", ["w", "s0", "e0", "ax"], ["w_lo"], name="slice_lo"),
        helper.make_node("Slice", ["w", "s1", "e1", "ax"], ["w_hi"], name="slice_hi"),
        helper.make_node("Concat", ["w_hi", "w_lo"], ["w_r"], name="concat", axis=0),
        helper.make_node("MatMul", ["x", "w_r"], ["t"], name="mm"),
    ]
    body_inits = [init("s0", np.array([0], np.int64)), init("e0", np.array([2], np.int64)),
                  init("s1", np.array([2], np.int64)), init("e1", np.array([4], np.int64)),
                  init("ax", np.array([0], np.int64))]
    then_g = helper.make_graph(body_nodes, "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)],
                               initializer=body_inits)
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    w = np.arange(16, dtype=F32).reshape(4, 4) / 8
    nodes = [helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then_g,
                              else_branch=else_g)]
    inputs = [("x", F32, [3, 4]), ("cond", np.bool_, [])]
    inits = []
    if w_is_input:
        inputs.append(("w", F32, [4, 4]))
        inits.append(init("w", w))
    else:
        nodes.insert(0, helper.make_node("Constant", [], ["w"], name="const_w",
                                         value=numpy_helper.from_array(w)))
    return make_model(nodes, inputs, [("y", F32, None)], inits), w


def test_a_subgraph_folds_what_it_computes_from_outer_constants():
    model, _ = _gate_reorder_if_model()
    s = sess(model)
    x = np.random.default_rng(3).standard_normal((3, 4)).astype(F32)
    for cond in (True, False):
        feeds = {"x": x, "cond": np.array(cond)}
        np.testing.assert_allclose(s.run(None, feeds)[0], run_ort(model, feeds)[0], rtol=1e-6)


def test_a_subgraph_does_not_fold_an_overridable_outer_initializer():
    model, w = _gate_reorder_if_model(w_is_input=True)
    s = sess(model)
    x = np.random.default_rng(4).standard_normal((3, 4)).astype(F32)
    for weight in (w, -2 * w):
        feeds = {"x": x, "cond": np.array(True), "w": weight}
        expected = x @ np.concatenate([weight[2:], weight[:2]])
        np.testing.assert_allclose(s.run(None, feeds)[0], expected, rtol=1e-6)
        np.testing.assert_allclose(run_ort(model, feeds)[0], expected, rtol=1e-6)


def test_a_cast_to_the_type_its_input_has_is_removed():
    # tf2onnx writes Cast(to=FLOAT) after ops of an NHWC model that are float already.
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Cast", ["r"], ["rc"], name="noop", to=TensorProto.FLOAT),
             helper.make_node("Cast", ["rc"], ["rcc"], name="noop2", to=TensorProto.FLOAT),
             helper.make_node("Add", ["rcc", "x"], ["a"], name="add"),
             helper.make_node("Cast", ["a"], ["ai"], name="to_int", to=TensorProto.INT32),
             helper.make_node("Cast", ["a"], ["y"], name="out_cast", to=TensorProto.FLOAT)]
    model = make_model(nodes, [("x", F32, [2, 3])], [("y", F32, [2, 3]), ("ai", np.int32, [2, 3])])
    s = sess(model)
    # The two no-op Casts go; a Cast to another type and one writing a graph output stay.
    assert planned(s) == ["relu", "add", "to_int", "out_cast"]
    feeds = {"x": np.random.default_rng(5).standard_normal((2, 3)).astype(F32) * 3}
    for got, want in zip(s.run(None, feeds), run_ort(model, feeds)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    assert planned(sess(model, OFF)) == ["relu", "noop", "noop2", "add", "to_int", "out_cast"]
