"""run_async: results, errors, futures, and the lifetimes of everything a run holds."""

import asyncio
import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
import weakref

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import ROOT, add_model, make_model, run_ort



def reshape_model():
    # Fails at run time when `shape` does not fit x: the error must name the node.
    node = helper.make_node("Reshape", ["x", "shape"], ["y"], name="bad_reshape")
    return make_model([node], [("x", np.float32, [None]), ("shape", np.int64, [None])],
                      [("y", np.float32, None)]).SerializeToString()


def wait_for(pred, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        gc.collect()
        time.sleep(0.01)
    return pred()


def test_callback_gets_results_user_data_and_empty_err():
    sess = ortlite.InferenceSession(add_model([None], node_name="add"))
    x = np.arange(5, dtype=np.float32)
    y = np.ones(5, dtype=np.float32)
    done = threading.Event()
    got = {}

    def cb(results, user_data, err):
        got.update(results=results, user_data=user_data, err=err,
                   thread=threading.get_ident())
        done.set()

    assert sess.run_async(None, {"x": x, "y": y}, cb, "token") is None
    assert done.wait(10)
    assert got["err"] == ""
    assert got["user_data"] == "token"
    assert len(got["results"]) == 1
    np.testing.assert_array_equal(got["results"][0], x + y)
    assert got["thread"] != threading.get_ident()


def test_failure_reaches_callback_with_node_name():
    sess = ortlite.InferenceSession(reshape_model())
    done = threading.Event()
    got = {}

    def cb(results, user_data, err):
        got.update(results=results, err=err)
        done.set()

    sess.run_async(None, {"x": np.zeros(6, np.float32), "shape": np.array([4], np.int64)}, cb, None)
    assert done.wait(10)
    assert got["results"] == []
    assert got["err"] and "bad_reshape" in got["err"]


def test_invalid_feeds_raise_at_call_time():
    sess = ortlite.InferenceSession(add_model([None], node_name="add"))
    cb_called = []
    cb = lambda *a: cb_called.append(a)  # noqa: E731
    x = np.zeros(3, np.float32)
    with pytest.raises(ValueError):
        sess.run_async(None, {"x": x}, cb, None)  # missing y
    with pytest.raises(ortlite.InvalidArgument, match="nope"):
        sess.run_async(None, {"x": x, "y": x, "nope": x}, cb, None)
    with pytest.raises(ortlite.InvalidArgument, match="x"):
        sess.run_async(None, {"x": x.astype(np.float64), "y": x}, cb, None)
    with pytest.raises(ortlite.InvalidArgument, match="w"):
        sess.run_async(["w"], {"x": x, "y": x}, cb, None)
    with pytest.raises(TypeError):
        sess.run_async(None, {"x": x, "y": x}, 42, None)
    time.sleep(0.05)
    assert cb_called == []


def test_future_result_and_typed_error():
    sess = ortlite.InferenceSession(add_model([None], node_name="add"))
    x = np.arange(4, dtype=np.float32)
    fut = sess.run_async(None, {"x": x, "y": x})
    np.testing.assert_array_equal(fut.result(10)[0], 2 * x)

    bad = ortlite.InferenceSession(reshape_model())
    fut = bad.run_async(None, {"x": np.zeros(6, np.float32), "shape": np.array([4], np.int64)})
    with pytest.raises(ortlite.OrtliteError, match="bad_reshape"):
        fut.result(10)


def test_future_with_asyncio():
    sess = ortlite.InferenceSession(add_model([None], node_name="add"))
    x = np.arange(4, dtype=np.float32)

    async def main():
        futs = [asyncio.wrap_future(sess.run_async(None, {"x": x, "y": x + i})) for i in range(10)]
        return await asyncio.gather(*futs)

    results = asyncio.run(main())
    for i, r in enumerate(results):
        np.testing.assert_array_equal(r[0], 2 * x + i)


def test_inputs_session_and_run_options_outlive_their_python_names():
    """onnxruntime's run_async regression: the input, the run options and the session are
    dropped while the run is in flight; the run still sees them, then they are freed."""
    sess = ortlite.InferenceSession(add_model([None], node_name="add"))
    x = np.arange(1000, dtype=np.float32)
    y = np.full(1000, 2.0, dtype=np.float32)
    expected = x + y
    ro = ortlite.RunOptions()
    wx, wsess, wro = weakref.ref(x), weakref.ref(sess), weakref.ref(ro)
    release = threading.Event()
    in_callback = {}
    done = threading.Event()

    def cb(results, user_data, err):
        release.wait(10)  # held back until the caller has dropped everything
        gc.collect()
        in_callback.update(x_alive=wx() is not None, sess_alive=wsess() is not None,
                           ro_alive=wro() is not None, err=err,
                           ok=bool(results) and np.array_equal(results[0], expected))
        done.set()

    sess.run_async(None, {"x": x, "y": y}, cb, None, ro)
    del x, ro, sess
    gc.collect()
    assert wx() is not None and wsess() is not None and wro() is not None
    release.set()
    assert done.wait(10)
    assert in_callback == dict(x_alive=True, sess_alive=True, ro_alive=True, err="", ok=True)
    assert wait_for(lambda: wx() is None and wsess() is None and wro() is None)


def test_refcounts_return_to_baseline_after_many_runs():
    sess = ortlite.InferenceSession(add_model([None], node_name="add"))
    x = np.arange(8, dtype=np.float32)
    y = np.ones(8, dtype=np.float32)
    user_data = object()
    remaining = threading.Semaphore(0)
    n = 300

    def cb(results, ud, err):
        assert err == ""
        remaining.release()

    feeds = {"x": x, "y": y}
    before = [sys.getrefcount(o) for o in (x, y, user_data, cb, sess, feeds)]
    for _ in range(n):
        sess.run_async(None, feeds, cb, user_data)
    for _ in range(n):
        assert remaining.acquire(timeout=10)
    assert wait_for(lambda: ortlite._ortlite._async_in_flight() == 0)
    after = [sys.getrefcount(o) for o in (x, y, user_data, cb, sess, feeds)]
    assert after == before


def test_callback_exception_goes_to_unraisablehook_and_worker_carries_on(monkeypatch):
    sess = ortlite.InferenceSession(add_model([None], node_name="add"))
    x = np.zeros(2, np.float32)
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_value))

    def bad_cb(results, ud, err):
        raise KeyError("from the callback")

    for _ in range(4):
        sess.run_async(None, {"x": x, "y": x}, bad_cb, None)
    assert wait_for(lambda: len(seen) == 4)
    assert all(isinstance(e, KeyError) for e in seen)
    np.testing.assert_array_equal(sess.run_async(None, {"x": x + 1, "y": x}).result(10)[0], x + 1)


def test_cycle_through_user_data_is_collected():
    sess = ortlite.InferenceSession(add_model([None], node_name="add"))
    x = np.zeros(2, np.float32)
    done = threading.Event()

    class Holder:
        pass

    holder = Holder()
    holder.sess = sess  # user_data -> session; callback closure -> holder

    def cb(results, ud, err, h=holder):  # holder -> cb -> holder: a cycle
        if ud is h and err == "":
            done.set()

    holder.cb = cb
    del cb
    wsess, wholder = weakref.ref(sess), weakref.ref(holder)
    sess.run_async(None, {"x": x, "y": x}, holder.cb, holder)
    del sess, holder
    assert done.wait(10)
    assert wait_for(lambda: wsess() is None and wholder() is None)


def test_outputs_of_async_runs_own_their_memory():
    sess = ortlite.InferenceSession(add_model([None], node_name="add"))
    x = np.arange(6, dtype=np.float32)
    out = sess.run_async(None, {"x": x, "y": x}).result(10)[0]
    assert out.base is not None and not out.flags.owndata
    assert not np.shares_memory(out, x)


def test_matches_onnxruntime_from_many_threads():
    model = add_model([None], node_name="add")
    sess = ortlite.InferenceSession(model)
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.standard_normal(64).astype(np.float32),
              "y": rng.standard_normal(64).astype(np.float32)} for _ in range(32)]
    futs = [sess.run_async(None, f) for f in feeds]
    for f, fut in zip(feeds, futs):
        np.testing.assert_allclose(fut.result(10)[0], run_ort(model, f)[0], rtol=1e-6)


SHUTDOWN_SCRIPT = textwrap.dedent("""
    import sys, numpy as np
    sys.path.insert(0, {root!r})
    import ortlite
    from onnx import helper, TensorProto
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h0"])]
    for i in range(1, 6):
        nodes.append(helper.make_node("MatMul", [f"h{{i-1}}", "w"], [f"h{{i}}"]))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [256, 256]),
                                       helper.make_tensor_value_info("w", TensorProto.FLOAT, [256, 256])],
                          [helper.make_tensor_value_info("h5", TensorProto.FLOAT, [256, 256])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]); m.ir_version = 8
    sess = ortlite.InferenceSession(m.SerializeToString())
    x = np.random.rand(256, 256).astype(np.float32) / 256
    calls = []
    def cb(results, user_data, err):
        calls.append(err)
    for i in range(40):
        sess.run_async(None, {{"x": x, "w": x}}, cb, i)
    futs = [sess.run_async(None, {{"x": x, "w": x}}) for _ in range(10)]
    {tail}
""")


@pytest.mark.parametrize("tail", ["pass", "del sess, x", "import os; sys.exit(0)"])
def test_interpreter_exit_with_runs_in_flight(tail):
    script = SHUTDOWN_SCRIPT.format(root=ROOT, tail=tail)
    for _ in range(5):
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
        assert proc.returncode == 0, proc.stderr.decode()[-2000:]
        assert b"Fatal" not in proc.stderr and b"Traceback" not in proc.stderr, proc.stderr.decode()


def test_run_async_after_shutdown_is_refused():
    script = textwrap.dedent(f"""
        import sys, numpy as np
        sys.path.insert(0, {ROOT!r})
        import ortlite
        from onnx import helper, TensorProto
        g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]); m.ir_version = 8
        sess = ortlite.InferenceSession(m.SerializeToString())
        ortlite._ortlite._async_shutdown()
        try:
            sess.run_async(None, {{"x": np.zeros(2, np.float32)}}, lambda *a: None, None)
        except ortlite.Fail as e:
            print("refused:", e)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"refused: run_async" in proc.stdout


def test_cycle_through_callback_closure_holding_the_session_is_collected():
    class Session(ortlite.InferenceSession):
        pass

    sess = Session(add_model([None], node_name="add"))
    x = np.zeros(2, np.float32)
    done = threading.Event()

    def cb(results, ud, err, owner=sess):  # sess.cb -> cb -> sess: a cycle
        if err == "" and isinstance(owner, Session):
            done.set()

    sess.cb = cb
    wsess, wcb = weakref.ref(sess), weakref.ref(cb)
    sess.run_async(None, {"x": x, "y": x}, cb, None)
    del sess, cb
    assert done.wait(10)
    assert wait_for(lambda: wsess() is None and wcb() is None)
