"""The IntEnums of onnxruntime's Python API. They load on first use (ortlite.__getattr__, or
the first SessionOptions getter that returns one): creating an IntEnum class costs about a
tenth of a millisecond, and most programs never name them."""

import enum

from ortlite import _ortlite

class GraphOptimizationLevel(enum.IntEnum):
    """SessionOptions.graph_optimization_level, numbered as onnxruntime's."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    """SessionOptions.execution_mode, numbered as onnxruntime's."""

    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class OrtSparseFormat(enum.IntEnum):
    """SparseTensor.format(), numbered as onnxruntime's."""

    ORT_SPARSE_UNDEFINED = 0
    ORT_SPARSE_COO = 1
    ORT_SPARSE_CSRC = 2
    ORT_SPARSE_BLOCK_SPARSE = 4


# SessionOptions.graph_optimization_level and .execution_mode return these members.
_ortlite._register_enums(GraphOptimizationLevel, ExecutionMode)

for _cls in (GraphOptimizationLevel, ExecutionMode, OrtSparseFormat):
    _cls.__module__ = "ortlite"  # pickled members name ortlite.X, as before this module existed
del _cls
