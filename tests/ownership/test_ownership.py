"""Who owns an output's memory: zero-copy only over buffers a run allocated, copies for
everything that aliases a feed or the session's weights; lifetimes of OrtValues; threads,
termination and memory over many runs."""

import gc
import os
import re
import threading
import time
import weakref

import numpy as np
import pytest
from onnx import helper, numpy_helper

import ortlite
from helpers import ROOT, make_model, run_ort

F = np.float32


def sess_of(model):
    return ortlite.InferenceSession(model.SerializeToString())


def passthrough_models():
    shape = numpy_helper.from_array(np.array([2, 3], np.int64), "shape")
    yield "graph input is graph output", make_model([], [("x", F, [2, 3])], [("x", F, [2, 3])])
    yield "identity chain", make_model(
        [helper.make_node("Identity", ["x"], ["a"]), helper.make_node("Identity", ["a"], ["b"]),
         helper.make_node("Identity", ["b"], ["y"])], [("x", F, [2, 3])], [("y", F, [2, 3])])
    yield "reshape forwards its input", make_model(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])], [("x", F, [6])], [("y", F, [2, 3])],
        initializers=[shape])
    yield "flatten + squeeze + unsqueeze", make_model(
        [helper.make_node("Unsqueeze", ["x", "axes"], ["u"]),
         helper.make_node("Squeeze", ["u", "axes"], ["s"]),
         helper.make_node("Flatten", ["s"], ["y"], axis=1)],
        [("x", F, [2, 3])], [("y", F, [2, 3])],
        initializers=[numpy_helper.from_array(np.array([0], np.int64), "axes")])
    yield "input is also a second output", make_model(
        [helper.make_node("Relu", ["x"], ["r"])], [("x", F, [2, 3])],
        [("r", F, [2, 3]), ("x", F, [2, 3])])


@pytest.mark.parametrize("name,model", list(passthrough_models()), ids=lambda v: v if isinstance(v, str) else "")
def test_outputs_aliasing_inputs_are_independent_copies(name, model):
    """onnxruntime's passthrough regression: 7 runs with fresh inputs, outputs kept, every
    output checked again after the loop (after its input was mutated and freed)."""
    sess = sess_of(model)
    in_shape = sess.get_inputs()[0].shape
    kept = []
    for i in range(7):
        x = (np.arange(6, dtype=F) + 10 * i).reshape(in_shape)
        outs = sess.run(None, {"x": x})
        for o in outs:
            assert not np.shares_memory(o, x)
        expected = [o.copy() for o in outs]
        kept.append((outs, expected))
        x[...] = -1  # mutate, then drop, the input
        del x
        gc.collect()
    _ = [np.full(6, 123, F) for _ in range(50)]  # reuse freed memory
    for outs, expected in kept:
        for o, e in zip(outs, expected):
            np.testing.assert_array_equal(o, e)


def test_initializer_through_identity_chain_never_exposes_weights():
    w = numpy_helper.from_array(np.array([1, 2, 3], F), "w")
    nodes = [helper.make_node("Identity", ["w"], ["a"]), helper.make_node("Identity", ["a"], ["y"])]
    sess = sess_of(make_model(nodes, [], [("y", F, [3])], initializers=[w]))
    for _ in range(3):
        (y,) = sess.run(None, {})
        np.testing.assert_array_equal(y, [1, 2, 3])
        y[:] = 99


def test_overridable_initializer_output_is_copied_when_fed_and_when_not():
    w = numpy_helper.from_array(np.array([1, 2], F), "w")
    model = make_model([helper.make_node("Identity", ["w"], ["y"])], [("w", F, [2])],
                       [("y", F, [2])], initializers=[w])
    sess = sess_of(model)
    (a,) = sess.run(None, {})
    a[:] = 7
    np.testing.assert_array_equal(sess.run(None, {})[0], [1, 2])
    fed = np.array([5, 6], F)
    (b,) = sess.run(None, {"w": fed})
    assert not np.shares_memory(b, fed)


def test_outputs_of_successive_runs_never_share_memory():
    model = make_model([helper.make_node("Add", ["x", "x"], ["y"])], [("x", F, [1024])],
                       [("y", F, [1024])])
    sess = sess_of(model)
    x = np.ones(1024, F)
    outs = [sess.run(None, {"x": x})[0] for _ in range(20)]
    for i in range(len(outs)):
        assert outs[i].base is not None and not outs[i].flags.owndata
        for j in range(i):
            assert not np.shares_memory(outs[i], outs[j])
    outs[0][:] = 0
    assert all(np.array_equal(o, 2 * x) for o in outs[1:])


def test_ortvalue_keeps_its_array_alive_and_views_outlive_it():
    arr = np.arange(12, dtype=F).reshape(3, 4)
    warr = weakref.ref(arr)
    ov = ortlite.OrtValue.ortvalue_from_numpy(arr)
    del arr
    gc.collect()
    assert warr() is not None  # the OrtValue holds it
    view = ov.numpy()
    wov = weakref.ref(ov)
    del ov
    gc.collect()
    np.testing.assert_array_equal(view, np.arange(12, dtype=F).reshape(3, 4))
    del view
    gc.collect()
    assert wov() is None and warr() is None


def test_ortvalue_outputs_and_their_views():
    model = make_model([helper.make_node("Mul", ["x", "x"], ["y"])], [("x", F, [4])], [("y", F, [4])])
    sess = sess_of(model)
    x = ortlite.OrtValue.ortvalue_from_numpy(np.arange(4, dtype=F))
    (ov,) = sess.run_with_ort_values(None, {"x": x})
    view = ov.numpy()
    del ov
    gc.collect()
    np.testing.assert_array_equal(view, np.arange(4, dtype=F) ** 2)


def mlp_model(width=64, layers=3, seed=0):
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    cur = "x"
    for i in range(layers):
        inits.append(numpy_helper.from_array(rng.standard_normal((width, width)).astype(F) * 0.1, f"w{i}"))
        inits.append(numpy_helper.from_array(rng.standard_normal(width).astype(F) * 0.1, f"b{i}"))
        nodes.append(helper.make_node("Gemm", [cur, f"w{i}", f"b{i}"], [f"g{i}"]))
        nodes.append(helper.make_node("Relu", [f"g{i}"], [f"r{i}"]))
        cur = f"r{i}"
    nodes.append(helper.make_node("Softmax", [cur], ["y"], axis=-1))
    return make_model(nodes, [("x", F, ["n", width])], [("y", F, ["n", width])], initializers=inits)


def test_eight_threads_match_onnxruntime():
    model = mlp_model()
    sess = sess_of(model)
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((16, 64)).astype(F) for _ in range(8)]
    expected = [run_ort(model, {"x": x})[0] for x in inputs]
    errors = []
    barrier = threading.Barrier(8)

    def work(k):
        try:
            barrier.wait()
            for _ in range(40):
                (y,) = sess.run(None, {"x": inputs[k]})
                np.testing.assert_allclose(y, expected[k], rtol=1e-5, atol=1e-6)
                (ov,) = sess.run_with_ort_values(None, {"x": ortlite.OrtValue.ortvalue_from_numpy(inputs[k])})
                np.testing.assert_allclose(ov.numpy(), expected[k], rtol=1e-5, atol=1e-6)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:2]


def test_run_releases_the_gil():
    # While a long run computes, another Python thread keeps running.
    nodes = [helper.make_node("MatMul", ["x" if i == 0 else f"h{i - 1}", "w"], [f"h{i}"]) for i in range(20)]
    model = make_model(nodes, [("x", F, [256, 256]), ("w", F, [256, 256])], [("h19", F, [256, 256])])
    sess = sess_of(model)
    x = np.eye(256, dtype=F)
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    t = threading.Thread(target=ticker)
    t.start()
    time.sleep(0.01)
    n0 = len(ticks)
    t0 = time.perf_counter()
    for _ in range(5):
        sess.run(None, {"x": x, "w": x})
    elapsed = time.perf_counter() - t0
    n1 = len(ticks)
    stop.set()
    t.join()
    # With the GIL held throughout, the ticker would not get to run at all.
    assert n1 - n0 >= max(3, int(elapsed / 0.001 * 0.2)), (n1 - n0, elapsed)


def test_terminate_stops_a_long_matmul_run_early():
    n = 40
    nodes = [helper.make_node("MatMul", ["x" if i == 0 else f"h{i - 1}", "w"], [f"h{i}"]) for i in range(n)]
    model = make_model(nodes, [("x", F, [384, 384]), ("w", F, [384, 384])], [(f"h{n - 1}", F, [384, 384])])
    sess = sess_of(model)
    x = np.eye(384, dtype=F)
    t0 = time.perf_counter()
    sess.run(None, {"x": x, "w": x})
    full = time.perf_counter() - t0

    ro = ortlite.RunOptions()
    result = {}

    def run():
        t = time.perf_counter()
        try:
            sess.run(None, {"x": x, "w": x}, ro)
            result["outcome"] = "finished"
        except ortlite.OrtliteError as e:
            result["outcome"] = str(e)
        result["elapsed"] = time.perf_counter() - t

    th = threading.Thread(target=run)
    th.start()
    time.sleep(full / 10)
    ro.terminate = True
    th.join(60)
    assert "terminate" in result["outcome"], result
    assert result["elapsed"] < full * 0.7, (result, full)


def test_rss_does_not_grow_over_100k_runs():
    def rss_kb():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024

    model = make_model([helper.make_node("Add", ["x", "y"], ["z"])], [("x", F, [16]), ("y", F, [16])],
                       [("z", F, [16])])
    sess = sess_of(model)
    feeds = {"x": np.ones(16, F), "y": np.ones(16, F)}
    # A first 100k runs settle the allocators (numpy's caches, malloc arenas touched by the
    # rest of the test session); a leak shows as growth over the next 100k.
    for _ in range(100_000):
        sess.run(None, feeds)
    # A leak grows the RSS in every window of 100k runs; a one-off jump (the kernel
    # collapsing pages of an earlier test's large numpy arrays into huge pages, an allocator
    # mapping a new region) shows in one window only. The smallest growth of three counts.
    growths = []
    for _ in range(3):
        gc.collect()
        before = rss_kb()
        for _ in range(100_000):
            sess.run(None, feeds)
        gc.collect()
        growths.append(rss_kb() - before)
    assert min(growths) < 2 * 1024, f"RSS grew by {growths} KiB over each 100k runs"


def test_arrays_over_existing_memory_always_get_an_owning_base():
    """The grep-able invariant: every source file that makes a numpy array over existing
    memory sets its base object in the same file."""
    src = os.path.join(ROOT, "src")
    offenders = []
    for dirpath, _, files in os.walk(src):
        for name in files:
            if not name.endswith((".cc", ".h")):
                continue
            text = open(os.path.join(dirpath, name)).read()
            if re.search(r"PyArray_SimpleNewFromData|PyArray_NewFromDescr", text) and \
                    "PyArray_SetBaseObject" not in text:
                offenders.append(name)
    assert not offenders


def test_refcounts_unchanged_over_thousands_of_run_with_ort_values():
    import sys

    model = make_model([helper.make_node("Add", ["x", "y"], ["z"])], [("x", F, [3]), ("y", F, [3])],
                       [("z", F, [3])])
    sess = sess_of(model)
    arr = np.ones(3, F)
    ov = ortlite.OrtValue.ortvalue_from_numpy(arr)
    feed = {"x": ov, "y": ov}
    names = ["z"]
    ro = ortlite.RunOptions()
    objs = [sess, arr, ov, feed, names, ro]
    gc.collect()
    before = [sys.getrefcount(o) for o in objs]
    for _ in range(3000):
        (out,) = sess.run_with_ort_values(names, feed, ro)
    del out
    gc.collect()
    assert [sys.getrefcount(o) for o in objs] == before
