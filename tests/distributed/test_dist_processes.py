"""Sessions that travel to other processes: os.fork and multiprocessing's 'fork' with runs
in flight, and multiprocessing.Pool / concurrent.futures.ProcessPoolExecutor with the
fork, spawn and forkserver start methods (the latter two through pickle)."""

import concurrent.futures
import multiprocessing
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import ortlite
import dist_helpers
from dist_helpers import inputs, run_block, run_block_with_info, run_global, session

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def local(sess, xs):
    return [run_block(sess, x) for x in xs]


def run_script(code, timeout=60):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, HERE]))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=env)


# --- fork with work in flight ----------------------------------------------------------------

FORK_IN_FLIGHT = """
import os, sys, threading, time
import numpy as np
import ortlite
from dist_helpers import inputs, mlp_bytes, session

sess = session(mlp_bytes(width=512), threads=2)
xs = inputs(8, rows=256)
expected = [sess.run(None, {{"x": x}})[0] for x in xs]
done = []
lock = threading.Lock()
def cb(res, i, err):
    with lock:
        done.append((i, err == "" and np.allclose(res[0], expected[i % 8], rtol=1e-5, atol=1e-6)))

# A thread inside run() and 40 async runs queued or running in the parent at fork time.
stop = threading.Event()
def runner():
    while not stop.is_set():
        sess.run(None, {{"x": xs[0]}})
t = threading.Thread(target=runner)
t.start()
for i in range(40):
    sess.run_async(None, {{"x": xs[i % 8]}}, cb, i)
{fork}
if pid == 0:
    ok = all(np.allclose(sess.run(None, {{"x": x}})[0], e, rtol=1e-5, atol=1e-6)
             for x, e in zip(xs, expected))
    futs = [sess.run_async(None, {{"x": x}}) for x in xs]
    ok = ok and all(np.allclose(f.result(timeout=30)[0], e, rtol=1e-5, atol=1e-6)
                    for f, e in zip(futs, expected))
    # Runs queued just before exit: the child's exit drain delivers or cancels them.
    for i in range(6):
        sess.run_async(None, {{"x": xs[i]}}, lambda r, u, e: None, None)
    print("child", ok, len(done) <= 40, flush=True)
    {child_exit}
stop.set()
t.join()
{wait}
deadline = time.time() + 30
while len(done) < 40 and time.time() < deadline:
    time.sleep(0.01)
print("parent", len(done), all(ok for _, ok in done), flush=True)
"""

OS_FORK = dict(
    fork="pid = os.fork()",
    child_exit="sys.exit(0)",
    wait="_, status = os.waitpid(pid, 0)\nprint('status', os.waitstatus_to_exitcode(status))")

def test_os_fork_with_runs_in_flight_and_two_intra_op_threads():
    code = FORK_IN_FLIGHT.format(**OS_FORK)
    for trial in range(2):
        out = run_script(code, timeout=90)
        assert out.returncode == 0, (trial, out.stdout, out.stderr[-2000:])
        lines = out.stdout.splitlines()
        assert "child True True" in lines, out.stdout
        assert "status 0" in lines and "parent 40 True" in lines, out.stdout


MP_FORK_IN_FLIGHT = """
import multiprocessing as mp, os, threading, time
import numpy as np
import ortlite
from dist_helpers import inputs, mlp_bytes, session

sess = session(mlp_bytes(width=512), threads=2)
xs = inputs(4, rows=256)
expected = [sess.run(None, {"x": x})[0] for x in xs]

def child(q):
    outs = [f.result(timeout=30)[0] for f in [sess.run_async(None, {"x": x}) for x in xs]]
    outs += [sess.run(None, {"x": x})[0] for x in xs]
    q.put(all(np.allclose(o, e, rtol=1e-5, atol=1e-6) for o, e in zip(outs, expected * 2)))
    sess.run_async(None, {"x": xs[0]}, lambda r, u, e: None, None)  # left to the exit drain

if __name__ == "__main__":
    ctx = mp.get_context("fork")
    futs = [sess.run_async(None, {"x": xs[i % 4]}) for i in range(30)]
    q = ctx.Queue()
    procs = [ctx.Process(target=child, args=(q,)) for _ in range(3)]
    for p in procs:
        p.start()
    results = [q.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(60)
    print("children", results, [p.exitcode for p in procs])
    print("parent", all(np.allclose(f.result(timeout=30)[0], expected[i % 4], rtol=1e-5,
                                    atol=1e-6) for i, f in enumerate(futs)))
"""


def test_multiprocessing_fork_with_async_runs_in_flight():
    out = run_script(MP_FORK_IN_FLIGHT, timeout=90)
    assert out.returncode == 0, (out.stdout, out.stderr[-2000:])
    assert "children [True, True, True] [0, 0, 0]" in out.stdout, out.stdout
    assert "parent True" in out.stdout, out.stdout


# --- pools over a session made in the parent --------------------------------------------------

@pytest.fixture(scope="module")
def sess():
    return session(threads=2)


@pytest.fixture(scope="module")
def xs():
    return inputs(8)


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_pool_map_with_the_session_as_argument(sess, xs, method):
    ctx = multiprocessing.get_context(method)
    with ctx.Pool(2) as pool:
        got = pool.starmap(run_block_with_info, [(sess, x) for x in xs])
    for (out, _, _), want in zip(got, local(sess, xs)):
        np.testing.assert_array_equal(out, want)
    # Each worker unpickled the session once per task but loaded it at most once.
    loads = {}
    for _, pid, n in got:
        loads[pid] = max(loads.get(pid, 0), n)
    assert all(n <= 1 for n in loads.values()), loads


def test_pool_fork_inherits_a_global_session(sess, xs):
    dist_helpers.set_global_session(sess)
    try:
        with multiprocessing.get_context("fork").Pool(2) as pool:
            got = pool.map(run_global, xs)
    finally:
        dist_helpers.set_global_session(None)
    for (out, _, loads), want in zip(got, local(sess, xs)):
        np.testing.assert_array_equal(out, want)
        assert loads == 0  # nothing was pickled or loaded again


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_process_pool_executor(sess, xs, method):
    ctx = multiprocessing.get_context(method)
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx) as ex:
        got = list(ex.map(run_block, [sess] * len(xs), xs))
    for out, want in zip(got, local(sess, xs)):
        np.testing.assert_array_equal(out, want)


def test_process_pool_executor_from_a_thread_while_the_parent_runs(sess, xs):
    """The parent keeps running the session on threads while workers fork off it."""
    stop = threading.Event()

    def runner():
        while not stop.is_set():
            run_block(sess, xs[0])
    threads = [threading.Thread(target=runner) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        ctx = multiprocessing.get_context("fork")
        with concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx) as ex:
            got = list(ex.map(run_block, [sess] * len(xs), xs))
    finally:
        stop.set()
        for t in threads:
            t.join()
    for out, want in zip(got, local(sess, xs)):
        np.testing.assert_array_equal(out, want)


# --- the exit drain in multiprocessing children (os._exit: no atexit hook runs) -------------

def queue_runs_then_exit(sess, x, log_path):
    """A child's last act: queue 4 runs whose callbacks write to log_path, and return."""
    def cb(res, i, err):
        with open(log_path, "a") as f:
            f.write(f"{i} {'ok' if err == '' and len(res) == 1 else 'cancelled' if err else '?'}\n")
    for i in range(4):
        sess.run_async(None, {"x": x}, cb, i)


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_multiprocessing_child_exit_drains_async_runs(sess, xs, method, tmp_path):
    log = tmp_path / "log.txt"
    ctx = multiprocessing.get_context(method)
    p = ctx.Process(target=queue_runs_then_exit, args=(sess, xs[0], str(log)))
    p.start()
    p.join(60)
    assert p.exitcode == 0
    lines = sorted(log.read_text().splitlines()) if log.exists() else []
    # Every run was delivered (or cancelled) exactly once before the child exited.
    assert [ln.split()[0] for ln in lines] == ["0", "1", "2", "3"], lines
    assert all(ln.split()[1] in ("ok", "cancelled") for ln in lines), lines
