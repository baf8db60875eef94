"""Waits, before a timed repetition, until the threads a runtime left spinning are idle.

Both runtimes' thread pools spin after a run so that the next run starts without a wake-up:
ortlite's workers for 1 ms, onnxruntime's (intra_op_num_threads > 1, the default
session.intra_op.allow_spinning) for about 35 ms on this machine. A repetition of one runtime
that starts while the other's workers still spin shares the cores with them, so a fixed
pause shorter than the longest spin favours the runtime that spins longer. settle() measures
instead: it sleeps until, over one short window, the threads of the given processes ran for
less than a tenth of it (from /proc/PID/task/*/schedstat, the nanoseconds each thread ran).
"""

import os
import time


def cpu_ns(pids):
    """Nanoseconds all threads of `pids` have run, or None where /proc does not tell."""
    total = 0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return None
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass  # a thread that ended meanwhile
    return total


def settle(pids=None, minimum=0.002, window=0.005, busy=0.1, limit=0.5):
    """Sleeps at least `minimum` seconds, then until over one `window` the threads of `pids`
    (default: this process) ran less than `busy` of it, or `limit` seconds passed. Returns
    the seconds waited. Without /proc it sleeps 60 ms (longer than either runtime spins)."""
    pids = [os.getpid()] if pids is None else list(pids)
    t0 = time.perf_counter()
    time.sleep(minimum)
    if cpu_ns(pids) is None:
        time.sleep(0.06)
        return time.perf_counter() - t0
    while time.perf_counter() - t0 < limit:
        before = cpu_ns(pids)
        w0 = time.perf_counter()
        time.sleep(window)
        ran = (cpu_ns(pids) or 0) - (before or 0)
        if ran < busy * (time.perf_counter() - w0) * 1e9:
            break
    return time.perf_counter() - t0
