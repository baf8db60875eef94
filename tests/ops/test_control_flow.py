"""Control flow (If, Loop, Scan, SequenceMap) and sequence / optional values, compared with
onnxruntime: subgraphs that read outer-scope values, nesting, loop-carried sequences,
Python lists and None in and out of run(), typed errors, refcounts and ownership."""

import gc
import sys
import threading
import time

import numpy as np
import pytest
from onnx import TensorProto, helper

import ortlite
from helpers import assert_same, run_ort

F = TensorProto.FLOAT
I64 = TensorProto.INT64
B = TensorProto.BOOL


def model(nodes, inputs, outputs, initializers=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def tvi(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def seq_vi(name, elem=F):
    return helper.make_tensor_sequence_value_info(name, elem, None)


def opt_vi(name, elem=F):
    t = helper.make_tensor_type_proto(elem, None)
    return helper.make_value_info(name, helper.make_optional_type_proto(t))


def both(m, feeds, **kw):
    data = m.SerializeToString()
    exp = run_ort(data, feeds)
    got = ortlite.InferenceSession(data).run(None, feeds)
    return got, exp


def assert_values_equal(got, exp, rtol=1e-5, atol=1e-6):
    assert len(got) == len(exp)
    for g, e in zip(got, exp):
        if e is None:
            assert g is None
        elif isinstance(e, list):
            assert isinstance(g, list) and len(g) == len(e)
            assert_same(g, e, rtol, atol)
        else:
            assert_same([g], [e], rtol, atol)


# --- If -----------------------------------------------------------------------------------


def if_model():
    # then: X * 2 (X from the outer scope); else: Y - X
    then_g = helper.make_graph(
        [helper.make_node("Mul", ["X", "two"], ["t_out"])], "then_branch", [], [tvi("t_out")],
        initializer=[helper.make_tensor("two", F, [], [2.0])])
    else_g = helper.make_graph(
        [helper.make_node("Sub", ["Y", "X"], ["e_out"])], "else_branch", [], [tvi("e_out")])
    return model(
        [helper.make_node("ReduceSum", ["X"], ["s"], keepdims=0),
         helper.make_node("Greater", ["s", "zero"], ["c"]),
         helper.make_node("If", ["c"], ["out"], then_branch=then_g, else_branch=else_g)],
        [tvi("X", F, [2, 3]), tvi("Y", F, [2, 3])], [tvi("out")],
        initializers=[helper.make_tensor("zero", F, [], [0.0])])


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_if_reads_outer_scope(sign):
    rng = np.random.default_rng(0)
    x = (np.abs(rng.standard_normal((2, 3))) * sign).astype(np.float32)
    y = rng.standard_normal((2, 3)).astype(np.float32)
    got, exp = both(if_model(), {"X": x, "Y": y})
    assert_values_equal(got, exp)


def test_if_branch_returning_an_outer_value_is_copied():
    # The branch output is the feed itself: the result must not alias the caller's array.
    then_g = helper.make_graph([], "then", [], [tvi("X")])
    else_g = helper.make_graph([helper.make_node("Neg", ["X"], ["n"])], "else", [], [tvi("n")])
    m = model([helper.make_node("If", ["c"], ["out"], then_branch=then_g, else_branch=else_g)],
              [tvi("c", B, []), tvi("X", F, [4])], [tvi("out")])
    x = np.arange(4, dtype=np.float32)
    sess = ortlite.InferenceSession(m.SerializeToString())
    (out,) = sess.run(None, {"c": np.array(True), "X": x})
    np.testing.assert_array_equal(out, x)
    assert not np.shares_memory(out, x)
    (out,) = sess.run(None, {"c": np.array(False), "X": x})
    np.testing.assert_array_equal(out, -x)


def test_if_cond_must_be_bool():
    then_g = helper.make_graph([helper.make_node("Neg", ["X"], ["a"])], "t", [], [tvi("a")])
    else_g = helper.make_graph([helper.make_node("Abs", ["X"], ["b"])], "e", [], [tvi("b")])
    m = model([helper.make_node("If", ["c"], ["out"], then_branch=then_g, else_branch=else_g)],
              [tvi("c", F, [2]), tvi("X", F, [2])], [tvi("out")])
    sess = ortlite.InferenceSession(m.SerializeToString())
    with pytest.raises(ortlite.InvalidArgument, match="cond"):
        sess.run(None, {"c": np.ones(2, np.float32), "X": np.ones(2, np.float32)})


def test_subgraph_reading_an_undefined_name_fails_at_load():
    then_g = helper.make_graph([helper.make_node("Neg", ["nowhere"], ["a"])], "t", [], [tvi("a")])
    else_g = helper.make_graph([helper.make_node("Abs", ["X"], ["b"])], "e", [], [tvi("b")])
    m = model([helper.make_node("If", ["c"], ["out"], then_branch=then_g, else_branch=else_g)],
              [tvi("c", B, []), tvi("X", F, [2])], [tvi("out")])
    with pytest.raises(ortlite.InvalidGraph, match="nowhere"):
        ortlite.InferenceSession(m.SerializeToString())


def test_branch_with_wrong_output_count_fails_at_load():
    then_g = helper.make_graph([helper.make_node("Neg", ["X"], ["a"])], "t", [],
                               [tvi("a"), tvi("X")])
    else_g = helper.make_graph([helper.make_node("Abs", ["X"], ["b"])], "e", [], [tvi("b")])
    m = model([helper.make_node("If", ["c"], ["out"], then_branch=then_g, else_branch=else_g)],
              [tvi("c", B, []), tvi("X", F, [2])], [tvi("out")])
    with pytest.raises(ortlite.InvalidGraph, match="outputs"):
        ortlite.InferenceSession(m.SerializeToString())


# --- Loop ---------------------------------------------------------------------------------


def loop_model(with_m=True, with_cond=True, limit=None):
    # carried: acc (float [2]); scan output: acc at each step; body reads outer W.
    # cond_out = sum(acc) < limit (or passes cond through).
    nodes = [helper.make_node("Cast", ["i"], ["i_f"], to=F),
             helper.make_node("Mul", ["W", "i_f"], ["step"]),
             helper.make_node("Add", ["acc_in", "step"], ["acc_out"]),
             helper.make_node("Identity", ["acc_out"], ["scan_out"])]
    if limit is not None:
        nodes += [helper.make_node("ReduceSum", ["acc_out"], ["tot"], keepdims=0),
                  helper.make_node("Less", ["tot", "lim"], ["cond_out"])]
    else:
        nodes += [helper.make_node("Identity", ["cond_in"], ["cond_out"])]
    body = helper.make_graph(
        nodes, "body", [tvi("i", I64, []), tvi("cond_in", B, []), tvi("acc_in", F, [2])],
        [tvi("cond_out", B, []), tvi("acc_out", F, [2]), tvi("scan_out", F, [2])])
    inits = [helper.make_tensor("W", F, [2], [1.0, 0.5])]
    if limit is not None:
        inits.append(helper.make_tensor("lim", F, [], [limit]))
    ins = [tvi("acc0", F, [2])]
    names = ["M" if with_m else "", "cond" if with_cond else "", "acc0"]
    if with_m:
        ins.append(tvi("M", I64, []))
    if with_cond:
        ins.append(tvi("cond", B, []))
    return model([helper.make_node("Loop", names, ["acc", "scans"], body=body)], ins,
                 [tvi("acc"), tvi("scans")], initializers=inits)


@pytest.mark.parametrize("trips", [0, 1, 5])
def test_loop_trip_count(trips):
    m = loop_model()
    feeds = {"acc0": np.array([1.0, -1.0], np.float32), "M": np.array(trips, np.int64),
             "cond": np.array(True)}
    got, exp = both(m, feeds)
    assert_values_equal(got[:1], exp[:1])
    if trips:
        assert_values_equal(got[1:], exp[1:])
    else:
        assert got[1].shape[0] == 0 and got[1].dtype == np.float32


LOOP_IN_SUBPROCESS = """
import sys, pickle
import numpy as np
import ortlite
data, feeds, out = pickle.load(open(sys.argv[1], "rb"))
got = ortlite.InferenceSession(data).run(None, feeds)
pickle.dump(got, open(out, "wb"))
"""


@pytest.mark.parametrize("with_cond", [False, True])
@pytest.mark.parametrize("trips", [-5, -1, -2**63, 0, 3])
def test_loop_negative_trip_count_runs_no_iteration(tmp_path, trips, with_cond):
    # The loop runs while i < M (and cond): a negative M is no iteration, not "no M".
    import pickle
    import subprocess
    m = loop_model(with_cond=with_cond)
    feeds = {"acc0": np.array([1.0, -1.0], np.float32), "M": np.array(trips, np.int64)}
    if with_cond:
        feeds["cond"] = np.array(True)
    data = m.SerializeToString()
    exp = run_ort(data, feeds)
    args, out = tmp_path / "args.pkl", tmp_path / "out.pkl"
    args.write_bytes(pickle.dumps((data, feeds, str(out))))
    r = subprocess.run([sys.executable, "-c", LOOP_IN_SUBPROCESS, str(args)], capture_output=True,
                       text=True, timeout=20)
    assert r.returncode == 0, r.stderr[-2000:]
    got = pickle.loads(out.read_bytes())
    assert [g.shape for g in got] == [e.shape for e in exp] == [(2,), (max(trips, 0), 2)]
    assert_values_equal(got, exp)


def test_loop_condition_ends_it():
    m = loop_model(with_m=False, limit=10.0)
    feeds = {"acc0": np.zeros(2, np.float32), "cond": np.array(True)}
    got, exp = both(m, feeds)
    assert_values_equal(got, exp)
    assert got[1].shape[0] > 1


def test_loop_with_false_initial_condition_runs_no_iteration():
    m = loop_model()
    feeds = {"acc0": np.ones(2, np.float32), "M": np.array(5, np.int64), "cond": np.array(False)}
    got = ortlite.InferenceSession(m.SerializeToString()).run(["acc"], feeds)
    np.testing.assert_array_equal(got[0], np.ones(2, np.float32))


def test_nested_loop_reads_two_scopes():
    # inner body reads `x` (outer graph) and `k` (outer loop body).
    inner = helper.make_graph(
        [helper.make_node("Cast", ["k"], ["k_f"], to=F),
         helper.make_node("Mul", ["x", "k_f"], ["xk"]),
         helper.make_node("Add", ["a_in", "xk"], ["a_out"]),
         helper.make_node("Identity", ["c_in"], ["c_out"])],
        "inner", [tvi("j", I64, []), tvi("c_in", B, []), tvi("a_in", F, [3])],
        [tvi("c_out", B, []), tvi("a_out", F, [3])])
    outer = helper.make_graph(
        [helper.make_node("Loop", ["three", "", "s_in"], ["s_out"], body=inner),
         helper.make_node("Identity", ["c_in"], ["c_out"])],
        "outer", [tvi("k", I64, []), tvi("c_in", B, []), tvi("s_in", F, [3])],
        [tvi("c_out", B, []), tvi("s_out", F, [3])])
    m = model([helper.make_node("Loop", ["four", "", "s0"], ["s"], body=outer)],
              [tvi("x", F, [3]), tvi("s0", F, [3])], [tvi("s")],
              initializers=[helper.make_tensor("three", I64, [], [3]),
                            helper.make_tensor("four", I64, [], [4])])
    feeds = {"x": np.array([1, 2, 3], np.float32), "s0": np.zeros(3, np.float32)}
    got, exp = both(m, feeds)
    assert_values_equal(got, exp)
    np.testing.assert_allclose(got[0], feeds["x"] * 3 * (0 + 1 + 2 + 3))


def test_loop_carries_a_sequence():
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["i_f"], to=F),
         helper.make_node("Unsqueeze", ["i_f", "ax"], ["v"]),
         helper.make_node("SequenceInsert", ["seq_in", "v"], ["seq_out"]),
         helper.make_node("Identity", ["c_in"], ["c_out"])],
        "body", [tvi("i", I64, []), tvi("c_in", B, []), seq_vi("seq_in")],
        [tvi("c_out", B, []), seq_vi("seq_out")],
        initializer=[helper.make_tensor("ax", I64, [1], [0])])
    m = model([helper.make_node("SequenceEmpty", [], ["empty"], dtype=F),
               helper.make_node("Loop", ["M", "", "empty"], ["seq"], body=body)],
              [tvi("M", I64, [])], [seq_vi("seq")])
    got, exp = both(m, {"M": np.array(4, np.int64)})
    assert isinstance(got[0], list) and len(got[0]) == 4
    assert_values_equal(got, exp)


def test_terminate_stops_an_endless_loop():
    body = helper.make_graph(
        [helper.make_node("Add", ["a_in", "one"], ["a_out"]),
         helper.make_node("Identity", ["c_in"], ["c_out"])],
        "body", [tvi("i", I64, []), tvi("c_in", B, []), tvi("a_in", F, [])],
        [tvi("c_out", B, []), tvi("a_out", F, [])],
        initializer=[helper.make_tensor("one", F, [], [1.0])])
    m = model([helper.make_node("Loop", ["", "", "a0"], ["a"], body=body)],
              [tvi("a0", F, [])], [tvi("a")])
    sess = ortlite.InferenceSession(m.SerializeToString())
    ro = ortlite.RunOptions()
    threading.Timer(0.3, lambda: setattr(ro, "terminate", True)).start()
    t0 = time.perf_counter()
    with pytest.raises(ortlite.Fail, match="terminate"):
        sess.run(None, {"a0": np.array(0, np.float32)}, ro)
    assert time.perf_counter() - t0 < 10


def run_until_terminated(sess, feeds, after=0.2, within=2.0):
    ro = ortlite.RunOptions()
    timer = threading.Timer(after, lambda: setattr(ro, "terminate", True))
    t0 = time.perf_counter()  # before the timer starts: it fires `after` from here at the earliest
    timer.start()
    try:
        with pytest.raises(ortlite.Fail, match="terminate"):
            sess.run(None, feeds, ro)
    finally:
        timer.cancel()
    elapsed = time.perf_counter() - t0
    assert after <= elapsed < after + within, elapsed


def test_terminate_stops_a_while_loop_with_a_scan_output_inside_an_if():
    # No M, cond always true, a scan output growing each iteration; the Loop runs in an If
    # branch, so the flag must reach a subgraph's subgraph.
    body = helper.make_graph(
        [helper.make_node("Add", ["a_in", "one"], ["a_out"]),
         helper.make_node("Identity", ["a_out"], ["s"]),
         helper.make_node("Identity", ["c_in"], ["c_out"])],
        "body", [tvi("i", I64, []), tvi("c_in", B, []), tvi("a_in", F, [])],
        [tvi("c_out", B, []), tvi("a_out", F, []), tvi("s", F, [])],
        initializer=[helper.make_tensor("one", F, [], [1.0])])
    then_g = helper.make_graph(
        [helper.make_node("Loop", ["", "t", "a0"], ["a", "scan"], body=body)], "then", [],
        [tvi("a", F, []), tvi("scan", F, [None])])
    else_g = helper.make_graph(
        [helper.make_node("Identity", ["a0"], ["b"]),
         helper.make_node("Unsqueeze", ["a0", "ax"], ["bs"])], "else", [],
        [tvi("b", F, []), tvi("bs", F, [None])])
    m = model([helper.make_node("If", ["t"], ["y", "ys"], then_branch=then_g, else_branch=else_g)],
              [tvi("a0", F, []), tvi("t", B, [])], [tvi("y"), tvi("ys")],
              initializers=[helper.make_tensor("ax", I64, [1], [0])])
    sess = ortlite.InferenceSession(m.SerializeToString())
    feeds = {"a0": np.array(0, np.float32), "t": np.array(True)}
    run_until_terminated(sess, feeds)
    # The flag is per run: the same session then runs the other branch normally.
    feeds["t"] = np.array(False)
    y, ys = sess.run(None, feeds)
    assert y == 0 and ys.tolist() == [0.0]


def test_terminate_stops_a_scan_over_a_huge_empty_axis():
    # 2^40 iterations over slices of a zero-size input: bounded only by the terminate flag.
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "one"], ["s_out"])], "body",
        [tvi("s_in", F, []), tvi("x", F, [0])], [tvi("s_out", F, [])],
        initializer=[helper.make_tensor("one", F, [], [1.0])])
    m = model([helper.make_node("Scan", ["s0", "X"], ["s"], body=body, num_scan_inputs=1)],
              [tvi("s0", F, []), tvi("X", F, [None, 0])], [tvi("s")])
    sess = ortlite.InferenceSession(m.SerializeToString())
    run_until_terminated(sess, {"s0": np.array(0, np.float32),
                                "X": np.empty((2**40, 0), np.float32)})


# --- Scan ---------------------------------------------------------------------------------


@pytest.mark.parametrize("in_axis,in_dir,out_axis,out_dir", [
    (0, 0, 0, 0), (1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (1, 1, 1, 1), (-1, 0, -1, 1)])
def test_scan_axes_and_directions(in_axis, in_dir, out_axis, out_dir):
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x"], ["s_out"]),
         helper.make_node("Mul", ["s_out", "x"], ["y"])],
        "body", [tvi("s_in", F, [3]), tvi("x", F, [3])],
        [tvi("s_out", F, [3]), tvi("y", F, [3])])
    m = model([helper.make_node("Scan", ["s0", "X"], ["s", "Y"], body=body, num_scan_inputs=1,
                                scan_input_axes=[in_axis], scan_input_directions=[in_dir],
                                scan_output_axes=[out_axis], scan_output_directions=[out_dir])],
              [tvi("s0", F, [3]), tvi("X", F, None)], [tvi("s"), tvi("Y")])
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 3) if in_axis == 0 else (3, 5)).astype(np.float32)
    got, exp = both(m, {"s0": np.zeros(3, np.float32), "X": x})
    assert_values_equal(got, exp)


# --- sequences and optionals ---------------------------------------------------------------


def test_sequence_ops_against_onnxruntime():
    nodes = [
        helper.make_node("SequenceConstruct", ["A", "B"], ["s1"]),
        helper.make_node("SequenceInsert", ["s1", "C", "zero"], ["s2"]),
        helper.make_node("SequenceErase", ["s2", "minus1"], ["s3"]),
        helper.make_node("SequenceAt", ["s3", "one"], ["at1"]),
        helper.make_node("SequenceLength", ["s3"], ["n"]),
        helper.make_node("ConcatFromSequence", ["s3"], ["cat"], axis=0),
        helper.make_node("ConcatFromSequence", ["s3"], ["stk"], axis=1, new_axis=1),
        helper.make_node("SplitToSequence", ["cat", "split"], ["parts"], axis=0),
    ]
    inits = [helper.make_tensor("zero", I64, [], [0]), helper.make_tensor("one", I64, [], [1]),
             helper.make_tensor("minus1", I64, [], [-1]),
             helper.make_tensor("split", I64, [2], [1, 3])]
    m = model(nodes, [tvi("A", F, [2, 2]), tvi("B", F, [2, 2]), tvi("C", F, [2, 2])],
              [seq_vi("s3"), tvi("at1"), tvi("n", I64), tvi("cat"), tvi("stk"), seq_vi("parts")],
              initializers=inits)
    rng = np.random.default_rng(2)
    feeds = {k: rng.standard_normal((2, 2)).astype(np.float32) for k in "ABC"}
    got, exp = both(m, feeds)
    assert_values_equal(got, exp)
    # Sequence elements built from feeds are copies, never views of the caller's arrays.
    for arr in got[0]:
        for f in feeds.values():
            assert not np.shares_memory(arr, f)


def test_sequence_input_from_a_python_list():
    m = model([helper.make_node("ConcatFromSequence", ["S"], ["cat"], axis=0),
               helper.make_node("SequenceLength", ["S"], ["n"])],
              [seq_vi("S")], [tvi("cat"), tvi("n", I64)])
    items = [np.full((1, 3), i, np.float32) for i in range(4)]
    before = [sys.getrefcount(a) for a in items]
    sess = ortlite.InferenceSession(m.SerializeToString())
    for _ in range(50):
        got = sess.run(None, {"S": items})
    gc.collect()
    assert [sys.getrefcount(a) for a in items] == before
    exp = run_ort(m, {"S": items})
    assert_values_equal(got, exp)
    got_tuple = sess.run(None, {"S": tuple(items)})
    assert_values_equal(got_tuple, exp)


def test_sequence_feed_errors():
    m = model([helper.make_node("SequenceLength", ["S"], ["n"])], [seq_vi("S")], [tvi("n", I64)])
    sess = ortlite.InferenceSession(m.SerializeToString())
    with pytest.raises(ortlite.InvalidArgument, match="list"):
        sess.run(None, {"S": np.zeros(3, np.float32)})
    with pytest.raises(ortlite.InvalidArgument, match="S"):
        sess.run(None, {"S": [np.zeros(3, np.int64)]})
    m2 = model([helper.make_node("Abs", ["X"], ["y"])], [tvi("X", F, [3])], [tvi("y")])
    with pytest.raises((TypeError, ValueError, ortlite.InvalidArgument)):
        ortlite.InferenceSession(m2.SerializeToString()).run(
            None, {"X": [np.zeros(3, np.float32), np.zeros(2, np.float32)]})


def test_sequence_at_out_of_range_is_a_typed_error():
    m = model([helper.make_node("SequenceAt", ["S", "p"], ["y"])], [seq_vi("S"), tvi("p", I64, [])],
              [tvi("y")])
    sess = ortlite.InferenceSession(m.SerializeToString())
    with pytest.raises(ortlite.InvalidArgument, match="out of range"):
        sess.run(None, {"S": [np.zeros(2, np.float32)], "p": np.array(3, np.int64)})


def test_sequence_into_a_tensor_op_is_a_typed_error():
    m = model([helper.make_node("SequenceConstruct", ["X"], ["s"]),
               helper.make_node("Abs", ["s"], ["y"])], [tvi("X", F, [2])], [tvi("y")])
    sess = ortlite.InferenceSession(m.SerializeToString())
    with pytest.raises(ortlite.InvalidArgument, match="seq"):
        sess.run(None, {"X": np.zeros(2, np.float32)})


def test_optional_in_and_out():
    m = model([helper.make_node("OptionalHasElement", ["O"], ["has"]),
               helper.make_node("Identity", ["O"], ["same"])],
              [opt_vi("O")], [tvi("has", B), opt_vi("same")], opset=18)
    sess = ortlite.InferenceSession(m.SerializeToString())
    x = np.arange(3, dtype=np.float32)
    has, same = sess.run(None, {"O": x})
    assert has and np.array_equal(same, x) and not np.shares_memory(same, x)
    has, same = sess.run(None, {"O": None})
    assert not has and same is None
    assert_values_equal(sess.run(None, {"O": x}), run_ort(m, {"O": x}))


def test_optional_get_element_of_none_is_a_typed_error():
    m = model([helper.make_node("OptionalGetElement", ["O"], ["y"])], [opt_vi("O")], [tvi("y")],
              opset=18)
    sess = ortlite.InferenceSession(m.SerializeToString())
    with pytest.raises(ortlite.InvalidArgument, match="no element"):
        sess.run(None, {"O": None})


def test_sequence_output_through_run_with_ort_values_is_refused():
    m = model([helper.make_node("SequenceConstruct", ["X"], ["s"])], [tvi("X", F, [2])],
              [seq_vi("s")])
    sess = ortlite.InferenceSession(m.SerializeToString())
    x = ortlite.OrtValue.ortvalue_from_numpy(np.zeros(2, np.float32))
    with pytest.raises(ortlite.NotImplemented, match="seq"):
        sess.run_with_ort_values(None, {"X": x})


def test_sequence_map_with_outer_scope():
    body = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["y"])], "body",
                             [tvi("x", F, None)], [tvi("y", F, None)])
    m = model([helper.make_node("SequenceMap", ["S"], ["T"], body=body)],
              [seq_vi("S"), tvi("w", F, [])], [seq_vi("T")])
    items = [np.arange(n, dtype=np.float32) for n in (1, 2, 3)]
    sess = ortlite.InferenceSession(m.SerializeToString())
    (out,) = sess.run(None, {"S": items, "w": np.array(2.0, np.float32)})
    assert len(out) == 3
    for o, i in zip(out, items):
        np.testing.assert_array_equal(o, i * 2)
