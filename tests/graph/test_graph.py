"""Graph checks and planning at load: order, cycles, dangling values, duplicate outputs,
missing kernels, opset resolution."""

import numpy as np
import pytest
from onnx import helper

import ortlite
from helpers import check_against_ort, make_model, session

F = np.float32


def test_nodes_out_of_file_order_are_sorted():
    nodes = [
        helper.make_node("Mul", ["b", "b"], ["c"], name="third"),
        helper.make_node("Relu", ["a"], ["b"], name="second"),
        helper.make_node("Neg", ["x"], ["a"], name="first"),
    ]
    model = make_model(nodes, [("x", F, [4])], [("c", F, [4])])
    check_against_ort(model, {"x": np.array([-2, -1, 1, 2], F)})


def test_cycle_is_invalid_graph_naming_the_nodes():
    nodes = [
        helper.make_node("Add", ["x", "b"], ["a"], name="loop_a"),
        helper.make_node("Relu", ["a"], ["b"], name="loop_b"),
    ]
    model = make_model(nodes, [("x", F, [2])], [("b", F, [2])])
    with pytest.raises(ortlite.InvalidGraph, match="cycle") as e:
        session(model)
    assert "loop_a" in str(e.value) and "loop_b" in str(e.value)


def test_self_loop_is_a_cycle():
    model = make_model([helper.make_node("Add", ["x", "y"], ["y"], name="selfie")],
                       [("x", F, [2])], [("y", F, [2])])
    with pytest.raises(ortlite.InvalidGraph):
        session(model)


def test_input_nothing_produces_is_invalid_graph():
    model = make_model([helper.make_node("Add", ["x", "ghost"], ["y"], name="adder")],
                       [("x", F, [2])], [("y", F, [2])])
    with pytest.raises(ortlite.InvalidGraph, match="ghost") as e:
        session(model)
    assert "adder" in str(e.value)


def test_duplicate_output_names_are_invalid_graph():
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="one"),
             helper.make_node("Neg", ["x"], ["y"], name="two")]
    model = make_model(nodes, [("x", F, [2])], [("y", F, [2])])
    with pytest.raises(ortlite.InvalidGraph, match="'y'"):
        session(model)


def test_node_output_shadowing_a_graph_input_is_invalid_graph():
    model = make_model([helper.make_node("Relu", ["x"], ["x"], name="shadow")],
                       [("x", F, [2])], [("x", F, [2])])
    with pytest.raises(ortlite.InvalidGraph, match="shadow"):
        session(model)


def test_graph_output_nothing_produces_is_invalid_graph():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", F, [2])],
                       [("nowhere", F, [2])])
    with pytest.raises(ortlite.InvalidGraph, match="nowhere"):
        session(model)


def test_unknown_op_names_op_domain_opset_and_node():
    model = make_model([helper.make_node("FrobnicateX", ["x"], ["y"], name="frob")],
                       [("x", F, [2])], [("y", F, [2])], opset=17)
    with pytest.raises(ortlite.NotImplemented) as e:
        session(model)
    msg = str(e.value)
    for part in ("FrobnicateX", "ai.onnx", "17", "frob"):
        assert part in msg, (part, msg)


def test_custom_domain_op_is_not_implemented():
    node = helper.make_node("Fancy", ["x"], ["y"], name="fancy", domain="com.example")
    model = make_model([node], [("x", F, [2])], [("y", F, [2])],
                       extra_opsets=[("com.example", 1)])
    with pytest.raises(ortlite.NotImplemented, match="com.example"):
        session(model)


def test_domain_not_imported_is_invalid_graph():
    node = helper.make_node("Fancy", ["x"], ["y"], name="fancy", domain="com.example")
    model = make_model([node], [("x", F, [2])], [("y", F, [2])])
    with pytest.raises(ortlite.InvalidGraph, match="com.example"):
        session(model)


def test_opset_outside_every_kernel_range_is_not_implemented():
    # Opset 1-5 Add had the legacy `broadcast` attribute: no kernel for it.
    model = make_model([helper.make_node("Add", ["x", "x"], ["y"], name="old_add")],
                       [("x", F, [2])], [("y", F, [2])], opset=5, ir_version=3)
    with pytest.raises(ortlite.NotImplemented, match="opset 5") as e:
        session(model)
    assert "old_add" in str(e.value)


@pytest.mark.parametrize("opset", [11, 13])
def test_opset_version_selects_semantics(opset):
    # Softmax on a 3-D input: coerced to 2-D before opset 13, along one axis from 13.
    model = make_model([helper.make_node("Softmax", ["x"], ["y"], axis=1)],
                       [("x", F, [2, 3, 4])], [("y", F, [2, 3, 4])], opset=opset)
    x = np.random.default_rng(opset).standard_normal((2, 3, 4)).astype(F)
    check_against_ort(model, {"x": x})


def test_symbolic_and_unknown_dims_accept_any_size():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])],
                       [("x", F, ["batch", None, 3])], [("y", F, ["batch", None, 3])])
    sess = session(model)
    for shape in [(1, 1, 3), (5, 7, 3), (0, 2, 3)]:
        x = np.random.default_rng(0).standard_normal(shape).astype(F)
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], np.maximum(x, 0))


def test_only_the_nodes_needed_for_requested_outputs_run():
    # `bad` would fail at run time (Reshape to an impossible shape); asking only for `good`
    # must not run it.
    shape = helper.make_tensor("shape", 7, [1], [7])
    nodes = [helper.make_node("Relu", ["x"], ["good"]),
             helper.make_node("Reshape", ["x", "shape"], ["bad"], name="never_run")]
    model = make_model(nodes, [("x", F, [4])], [("good", F, [4]), ("bad", F, None)],
                       initializers=[shape])
    sess = session(model)
    x = np.array([-1, 2, -3, 4], F)
    np.testing.assert_array_equal(sess.run(["good"], {"x": x})[0], np.maximum(x, 0))
    with pytest.raises(ortlite.OrtliteError, match="never_run"):
        sess.run(None, {"x": x})


def test_long_chain_releases_intermediates():
    # 200 nodes of 4 MB each: holding every intermediate would need 800 MB; released after
    # last use it stays at a few buffers. Checked through the result and a memory bound.
    import resource

    n = 200
    nodes = [helper.make_node("Neg", ["x" if i == 0 else f"t{i - 1}"], [f"t{i}"]) for i in range(n)]
    model = make_model(nodes, [("x", F, [1 << 20])], [(f"t{n - 1}", F, [1 << 20])])
    sess = session(model)
    x = np.ones(1 << 20, F)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    (y,) = sess.run(None, {"x": x})
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    np.testing.assert_array_equal(y, x)  # an even number of negations
    assert (after - before) * 1024 < 200 * (1 << 20), (before, after)
