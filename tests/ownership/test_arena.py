"""The per-run arena: intermediate buffers are planned from value lifetimes and reused from
run to run, and a buffer is only written again when nothing else (a value of the run, a view,
an output handed to numpy) references it."""

import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import ROOT, TESTS, make_model, run_ort

F = np.float32
SHIM = os.path.join(ROOT, "tests", "data", "alloc", "alloc_count.c")
HERE = os.path.dirname(os.path.abspath(__file__))  # this file's folder, for subprocesses


def add_chain(n, width=100):
    """x -> Add(c) -> ... (n Adds) -> y; c is [width] against x [1, width] (broadcast)."""
    c = numpy_helper.from_array(np.linspace(-1, 1, width).astype(F), "c")
    names = ["x"] + [f"t{i}" for i in range(1, n)] + ["y"]
    nodes = [helper.make_node("Add", [names[i], "c"], [names[i + 1]]) for i in range(n)]
    return make_model(nodes, [("x", F, [1, width])], [("y", F, [1, width])], initializers=[c])


ALLOC_SCRIPT = r"""
import ctypes, sys
sys.path.insert(0, {root!r}); sys.path.insert(0, {tests!r}); sys.path.insert(0, {here!r})
import numpy as np
import ortlite
from test_arena import add_chain
lib = ctypes.CDLL(None)
lib.alloc_count_stop.restype = ctypes.c_long
N = 500
x = np.ones((1, 100), np.float32)
lib.alloc_count_start()
for _ in range(N):
    pass
base = lib.alloc_count_stop()
for n in (1, 2, 30):
    s = ortlite.InferenceSession(add_chain(n).SerializeToString())
    feeds = {{"x": x}}
    for _ in range(20):
        s.run(None, feeds)
    lib.alloc_count_start()
    for _ in range(N):
        s.run(None, feeds)
    print(n, (lib.alloc_count_stop() - base) / N)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="LD_PRELOAD counter")
def test_intermediates_allocate_nothing_once_warm(tmp_path):
    """Allocations per warmed-up run, counted by an LD_PRELOAD shim around malloc and its
    relatives: a chain of 30 Adds makes exactly as many as a single Add (the output, the
    feed's wrapper: 6 when this was written), so its 29
    intermediates, the value table and the kernels' scratch cost none."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler for the allocation counter")
    lib = tmp_path / "alloc_count.so"
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(lib), SHIM], check=True)
    env = dict(os.environ, LD_PRELOAD=str(lib))
    script = ALLOC_SCRIPT.format(root=ROOT, tests=TESTS, here=HERE)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    counts = {int(a): float(b) for a, b in (line.split() for line in out.stdout.split("\n") if line)}
    print("allocations per run:", counts)
    assert counts[30] == counts[1] == counts[2], counts
    # Whatever the binding and numpy need per call stays small and fixed (with
    # PYTHONMALLOC=malloc, as under make asan, Python's own small objects are counted too).
    if os.environ.get("PYTHONMALLOC") != "malloc":
        assert counts[1] <= 8, counts


def test_outputs_kept_across_runs_are_never_overwritten():
    """Every run's outputs stay as they were after later runs reuse the arena."""
    sess = ortlite.InferenceSession(add_chain(5).SerializeToString())
    kept = []
    for i in range(6):
        x = np.full((1, 100), i, F)
        y = sess.run(None, {"x": x})[0]
        kept.append((y, y.copy()))
    for y, ref in kept:
        np.testing.assert_array_equal(y, ref)


def test_output_that_is_also_an_intermediate_and_views():
    """An intermediate that is also a graph output, a Reshape view of an intermediate that
    outlives it, and an Identity of an intermediate: the arena must not write any of them
    while a numpy array or a later node still holds the memory."""
    shape = numpy_helper.from_array(np.array([10, 10], np.int64), "shape")
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Reshape", ["a", "shape"], ["a2"]),   # a view of a
        helper.make_node("Neg", ["x"], ["b"]),                 # may take a's arena slot later
        helper.make_node("Sigmoid", ["b"], ["out1"]),          # graph output
        helper.make_node("Identity", ["b"], ["out2"]),         # output aliasing an intermediate
        helper.make_node("Exp", ["a2"], ["e"]),
        helper.make_node("Add", ["e", "out1_again"], ["out3"]),
        helper.make_node("Abs", ["a2"], ["out1_again"]),
    ]
    # Put nodes in a valid order (Abs before the Add).
    nodes = nodes[:6] + [nodes[7], nodes[6]]
    model = make_model(nodes, [("x", F, [1, 100])],
                       [("out1", F, [1, 100]), ("out2", F, [1, 100]), ("out3", F, [10, 10]),
                        ("a2", F, [10, 10])], initializers=[shape])
    sess = ortlite.InferenceSession(model.SerializeToString())
    rng = np.random.default_rng(0)
    kept = []
    for _ in range(5):
        x = rng.standard_normal((1, 100)).astype(F)
        outs = sess.run(None, {"x": x})
        ref = run_ort(model, {"x": x})
        for o, r in zip(outs, ref):
            np.testing.assert_allclose(o, r, rtol=1e-6, atol=1e-6)
        kept.append((outs, [o.copy() for o in outs]))
    for outs, copies in kept:
        for o, c in zip(outs, copies):
            np.testing.assert_array_equal(o, c)


def test_growing_and_shrinking_shapes():
    """A dynamic batch: buffers kept from a small run are too small for a large one and get
    replaced; a large buffer serves later small runs."""
    c = numpy_helper.from_array(np.float32(0.5).reshape(1), "c")
    nodes = [helper.make_node("Mul", ["x", "c"], ["m"]), helper.make_node("Tanh", ["m"], ["t"]),
             helper.make_node("Add", ["t", "x"], ["y"])]
    model = make_model(nodes, [("x", F, ["n", 8])], [("y", F, ["n", 8])], initializers=[c])
    sess = ortlite.InferenceSession(model.SerializeToString())
    rng = np.random.default_rng(1)
    for n in (1, 300, 2, 1000, 0, 7, 1000):
        x = rng.standard_normal((n, 8)).astype(F)
        y = sess.run(None, {"x": x})[0]
        np.testing.assert_allclose(y, np.tanh(x * 0.5) + x, rtol=1e-5, atol=1e-6)


def test_concurrent_runs_use_separate_arenas():
    """Runs of one session from several threads at once (each takes its own arena)."""
    sess = ortlite.InferenceSession(add_chain(20, width=4096).SerializeToString())
    c = np.linspace(-1, 1, 4096).astype(F)
    errors = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        for _ in range(50):
            x = rng.standard_normal((1, 4096)).astype(F)
            y = sess.run(None, {"x": x})[0]
            ref = x.astype(np.float64) + 20 * c.astype(np.float64)
            if not np.allclose(y, ref, rtol=1e-5, atol=1e-4):
                errors.append(seed)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_fed_initializer_does_not_stick():
    """A feed that replaces an overridable initializer applies to its run only: the arena
    keeps constants between runs and must put the initializer back."""
    w = numpy_helper.from_array(np.full((4,), 2.0, F), "w")
    g = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
                           helper.make_tensor_value_info("w", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [w])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    sess = ortlite.InferenceSession(model.SerializeToString())
    x = np.arange(4, dtype=F)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], 2 * x)
    np.testing.assert_array_equal(sess.run(None, {"x": x, "w": np.full(4, 3, F)})[0], 3 * x)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], 2 * x)


def test_failed_run_leaves_the_arena_usable():
    """A run that fails mid-graph empties the arena's value table like a finished one."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Reshape", ["r", "s"], ["y"])]
    model = make_model(nodes, [("x", F, [6]), ("s", np.int64, [2])], [("y", F, None)])
    sess = ortlite.InferenceSession(model.SerializeToString())
    x = np.arange(6, dtype=F) - 3
    with pytest.raises(ortlite.InvalidArgument, match="cannot reshape"):
        sess.run(None, {"x": x, "s": np.array([4, 4], np.int64)})
    y = sess.run(None, {"x": x, "s": np.array([2, 3], np.int64)})[0]
    np.testing.assert_array_equal(y, np.maximum(x, 0).reshape(2, 3))


def test_output_that_views_an_intermediate_stays_zero_copy():
    """A graph output that is a Reshape (a view) of an intermediate: the intermediate's
    release must not keep its buffer in the arena, or the output would no longer be the
    buffer's only holder and would be copied instead of handed to numpy."""
    shape = numpy_helper.from_array(np.array([10, 10], np.int64), "shape")
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Reshape", ["r", "shape"], ["y"])]
    model = make_model(nodes, [("x", F, [1, 100])], [("y", F, [10, 10])], initializers=[shape])
    sess = ortlite.InferenceSession(model.SerializeToString())
    for i in range(3):
        x = np.linspace(-1, 1, 100, dtype=F).reshape(1, 100) * (i + 1)
        y = sess.run(None, {"x": x})[0]
        assert not y.flags.owndata and y.base is not None  # the run's buffer, zero-copy
        np.testing.assert_array_equal(y, np.maximum(x, 0).reshape(10, 10))


def test_run_reentered_from_a_feed_conversion():
    """A feed whose conversion to an array runs the same session on the same thread: the
    inner run must not share the outer run's per-thread inputs (it would drop the outer
    run's converted feeds, here the array made from the list `a`, before the outer run)."""
    model = make_model([helper.make_node("Add", ["a", "b"], ["y"])],
                       [("a", F, [4096]), ("b", F, [4096])], [("y", F, [4096])])
    sess = ortlite.InferenceSession(model.SerializeToString())
    inner = []
    ones = np.ones(4096, F)

    class Reenters:
        def __array__(self, dtype=None, copy=None):
            inner.append(sess.run(None, {"a": ones, "b": ones})[0])
            # Churn the allocator so freed memory is reused.
            junk = [np.full(4096, 7, F) for _ in range(8)]
            del junk
            return np.full(4096, 3, F)

    for i in range(3):
        a = [float(i)] * 4096  # converted into a new array that only the run holds
        y = sess.run(None, {"a": a, "b": Reenters()})[0]
        np.testing.assert_array_equal(y, np.full(4096, i + 3, F))
    assert len(inner) == 3
    for r in inner:
        np.testing.assert_array_equal(r, np.full(4096, 2, F))


FAULT_SCRIPT = r"""
import resource, sys
sys.path.insert(0, {root!r}); sys.path.insert(0, {tests!r})
import numpy as np
from onnx import helper
import ortlite
from helpers import make_model
F = np.float32
model = make_model([helper.make_node("Neg", ["x"], ["y"])], [("x", F, [1 << 20])],
                   [("y", F, [1 << 20])])
sess = ortlite.InferenceSession(model.SerializeToString())
x = np.arange(1 << 20, dtype=F)
held = sess.run(None, {{"x": x}})[0]  # kept alive across the runs below
for _ in range(5):
    sess.run(None, {{"x": x}})
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(40):
    y = sess.run(None, {{"x": x}})[0]
    assert y[12345] == -12345.0
    del y
after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
assert np.array_equal(held, -x)  # no cached block was handed out while it was alive
print((after - before) / 40)
"""


@pytest.mark.parametrize("cache_mb", ["64", "0"])
def test_large_outputs_reuse_resident_blocks(cache_mb):
    """A 4 MiB output is a new buffer on every run. With glibc serving such blocks from a
    fresh mapping each time (forced here with its mmap threshold), every page of it faults
    in and is zeroed again on every run; ortlite keeps freed large blocks for reuse. With
    the cache turned off (ORTLITE_BUFFER_CACHE_MB=0) the same script shows the faults."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072", ORTLITE_BUFFER_CACHE_MB=cache_mb)
    script = FAULT_SCRIPT.format(root=ROOT, tests=TESTS)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    faults_per_run = float(out.stdout.split()[-1])
    if cache_mb == "0":
        assert faults_per_run > 500  # 1024 pages of 4 KiB a run
    else:
        assert faults_per_run < 20


HUGE_SCRIPT = r"""
import resource, sys
sys.path.insert(0, {root!r}); sys.path.insert(0, {tests!r})
import numpy as np
from onnx import helper
import ortlite
from helpers import make_model
F = np.float32
n = 10 << 20  # a 40 MiB output
model = make_model([helper.make_node("Neg", ["x"], ["y"])], [("x", F, [n])], [("y", F, [n])])
sess = ortlite.InferenceSession(model.SerializeToString())
x = np.ones(n, dtype=F)
for _ in range(2):
    sess.run(None, {{"x": x}})
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    y = sess.run(None, {{"x": x}})[0]
    assert y[n - 1] == -1.0 and y[0] == -1.0
    del y
after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
print((after - before) / 10)
"""


def _thp_on_request():
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return "[never]" not in f.read()
    except OSError:
        return False


def test_very_large_outputs_reuse_resident_blocks():
    """The block cache's bound follows the largest block the process asked for (twice it,
    from 64 MiB to 1 GiB): a 40 MiB output comes back from it on the next run, resident,
    instead of a fresh mapping zeroed again (about 20 huge-page faults a run, or 10,240
    small ones)."""
    script = HUGE_SCRIPT.format(root=ROOT, tests=TESTS)
    env = {k: v for k, v in os.environ.items() if k != "ORTLITE_BUFFER_CACHE_MB"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    faults_per_run = float(out.stdout.split()[-1])
    assert faults_per_run < 5, faults_per_run


@pytest.mark.skipif(not _thp_on_request(), reason="no transparent huge pages on this kernel")
def test_very_large_outputs_fault_in_huge_pages():
    """An output too large for the block cache (bound fixed at 64 MiB here, 32 MiB a block)
    is a fresh mapping on every run. ortlite asks for 2 MiB pages on blocks from 4 MiB, so
    its 10,240 pages of 4 KiB fault in as about 20 huge ones (plus the partial pages at both
    ends)."""
    script = HUGE_SCRIPT.format(root=ROOT, tests=TESTS)
    env = dict(os.environ, ORTLITE_BUFFER_CACHE_MB="64")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    faults_per_run = float(out.stdout.split()[-1])
    assert faults_per_run < 2500, faults_per_run
