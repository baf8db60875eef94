"""ortlite: a lean ONNX inference runtime with onnxruntime's Python API.

    import ortlite as ort
    sess = ort.InferenceSession("model.onnx")
    outputs = sess.run(None, {"x": x})
"""

import enum as _enum

from ortlite import _ortlite
from ortlite._ortlite import *  # noqa: F401,F403  (the native API: types, errors, functions)
from ortlite._ortlite import __version__  # noqa: F401


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

import atexit as _atexit

# Runs queued with run_async finish (or are cancelled) while the interpreter is whole:
# no worker ever calls into a finalizing interpreter.
_atexit.register(_ortlite._async_shutdown)
