"""ortlite: a lean ONNX inference runtime with onnxruntime's Python API.

    import ortlite as ort
    sess = ort.InferenceSession("model.onnx")
    outputs = sess.run(None, {"x": x})
"""

import enum as _enum
import os as _os

import numpy as _numpy  # noqa: F401  (first: numpy's own BLAS reads the environment as it is)


def _explain_missing_extension():
    """Replaces the import system's message for a package without its C extension (in a
    source tree, "cannot import name '_ortlite' from partially initialized module ...")
    with one that says what to do."""
    here = _os.path.dirname(_os.path.abspath(__file__))
    if any(f.startswith("_ortlite.") and f.endswith((".so", ".pyd")) for f in _os.listdir(here)):
        return  # the library is there and failed to load: its own message says why
    root = _os.path.dirname(here)
    if _os.path.exists(_os.path.join(root, "setup.py")) and _os.path.isdir(_os.path.join(root, "src")):
        msg = (f"ortlite's C extension is not built in this source tree ({root}): run "
               "`make build` there, or import ortlite from outside it")
    else:
        msg = f"ortlite's C extension (ortlite/_ortlite) is missing from {here}: reinstall ortlite"
    raise ImportError(msg, name="ortlite._ortlite") from None


def _load_extension():
    try:
        from ortlite import _ortlite as ext
    except ImportError:
        _explain_missing_extension()
        raise
    return ext


_ortlite = _load_extension()
from ortlite._ortlite import *  # noqa: F401,F403  (the native API: types, errors, functions)
from ortlite._ortlite import __version__  # noqa: F401
from ortlite._ortlite import NEWEST_OPSET  # noqa: F401  (the newest default-domain opset)
from ortlite._device import OrtDevice  # noqa: F401


class GraphOptimizationLevel(_enum.IntEnum):
    """SessionOptions.graph_optimization_level, numbered as onnxruntime's."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(_enum.IntEnum):
    """SessionOptions.execution_mode, numbered as onnxruntime's."""

    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


_ortlite._register_enums(GraphOptimizationLevel, ExecutionMode)

# Pickle support for sessions, options and CPU OrtValues (docs/distributed.md).
from ortlite import _pickle  # noqa: E402,F401
# The exit drain of run_async in multiprocessing's fork / forkserver children.
from ortlite import _process  # noqa: E402,F401

import atexit as _atexit

# Runs queued with run_async finish (or are cancelled) while the interpreter is whole:
# no worker ever calls into a finalizing interpreter.
_atexit.register(_ortlite._async_shutdown)
