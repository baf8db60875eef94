"""The run_async exit drain in multiprocessing's child processes.

ortlite/__init__.py drains queued run_async calls with an atexit hook. A child started by
multiprocessing's 'fork' or 'forkserver' method ends with os._exit(), which runs no atexit
hook: there the drain is a multiprocessing finalizer instead, run by the child's own exit
path (multiprocessing.util._exit_function) while the interpreter is whole. docs/distributed.md.
"""

import os
import sys

from ortlite import _ortlite as _ext


class _Anchor:
    """register_after_fork holds its object weakly: this module keeps the one it passes."""


_anchor = _Anchor()
_hooked = False


def _register_drain(_=None):
    import multiprocessing.util as mp_util

    # exitpriority 10: before the finalizers of pools and queues (priority 0 and below).
    mp_util.Finalize(None, _ext._async_shutdown, exitpriority=10)


def _hook_multiprocessing():
    # Children forked by multiprocessing from a process that had imported ortlite (the
    # registry of finalizers is emptied in each new child, and the after-fork hooks run
    # after that). multiprocessing is not imported for this: a process that forks through
    # it has imported it already, and the hook goes in just before its first fork.
    global _hooked
    mp_util = sys.modules.get("multiprocessing.util")
    if _hooked or mp_util is None:
        return
    mp_util.register_after_fork(_anchor, _register_drain)
    _hooked = True


os.register_at_fork(before=_hook_multiprocessing)
if "multiprocessing" in sys.modules:
    _hook_multiprocessing()
    # A child (any start method) that imports ortlite itself.
    if sys.modules["multiprocessing"].parent_process() is not None:
        _register_drain()
