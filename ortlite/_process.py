"""The run_async exit drain in multiprocessing's child processes.

ortlite/__init__.py drains queued run_async calls with an atexit hook. A child started by
multiprocessing's 'fork' or 'forkserver' method ends with os._exit(), which runs no atexit
hook: there the drain is a multiprocessing finalizer instead, run by the child's own exit
path (multiprocessing.util._exit_function) while the interpreter is whole. docs/distributed.md.
"""

import multiprocessing
import multiprocessing.util as _mp_util

from ortlite import _ortlite as _ext


class _Anchor:
    """register_after_fork holds its object weakly: this module keeps the one it passes."""


_anchor = _Anchor()


def _register_drain(_=None):
    # exitpriority 10: before the finalizers of pools and queues (priority 0 and below).
    _mp_util.Finalize(None, _ext._async_shutdown, exitpriority=10)


# Children forked from a process that had imported ortlite (the registry of finalizers is
# emptied in each new child, and the after-fork hooks run after that).
_mp_util.register_after_fork(_anchor, _register_drain)
# A child (any start method) that imports ortlite itself.
if multiprocessing.parent_process() is not None:
    _register_drain()
