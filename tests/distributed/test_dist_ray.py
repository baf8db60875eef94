"""Ray: a session made on the driver, run by remote tasks and by an actor that keeps it."""

import os

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (pip install ray)")

from dist_helpers import inputs, loads_here, run_block, session  # noqa: E402


@pytest.fixture(scope="module")
def ray_up():
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    here = os.path.dirname(os.path.abspath(__file__))
    # Workers import dist_helpers and ortlite (the in-place build) as the driver does.
    path = os.pathsep.join([here, os.path.dirname(os.path.dirname(here))])
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 configure_logging=False, runtime_env={"env_vars": {"PYTHONPATH": path}})
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"ray.init(num_cpus=2) failed here: {type(e).__name__}: {e}")
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def sess():
    return session(threads=1)


def test_tasks(ray_up, sess):
    task = ray.remote(num_cpus=1)(lambda s, x: (run_block(s, x), loads_here()))
    xs = inputs(6)
    ref = ray.put(sess)  # in the object store once
    got = ray.get([task.remote(ref, x) for x in xs])
    for (out, _), x in zip(got, xs):
        np.testing.assert_array_equal(out, run_block(sess, x))
    per_worker = {}
    for _, (pid, n) in got:
        per_worker[pid] = max(per_worker.get(pid, 0), n)
    assert all(n <= 1 for n in per_worker.values()), per_worker


def test_actor(ray_up, sess):
    @ray.remote(num_cpus=1)
    class Runner:
        def __init__(self, s):
            self.s = s

        def run(self, x):
            return run_block(self.s, x)

    actor = Runner.remote(sess)
    xs = inputs(4)
    got = ray.get([actor.run.remote(x) for x in xs])
    for out, x in zip(got, xs):
        np.testing.assert_array_equal(out, run_block(sess, x))
