"""ortlite: a lean ONNX inference runtime with onnxruntime's Python API.

    import ortlite as ort
    sess = ort.InferenceSession("model.onnx")
    outputs = sess.run(None, {"x": x})
"""

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

# Names whose pure-Python modules load on first use (module __getattr__, PEP 562): they
# are rarely needed, and their classes (IntEnums among them) would add to every import.
_LAZY = {
    "OrtDevice": "_device", "OrtDeviceVendorId": "_device",
    "set_default_logger_callback": "_logging", "set_default_logger_severity": "_logging",
    "GraphOptimizationLevel": "_enums", "ExecutionMode": "_enums", "OrtSparseFormat": "_enums",
    "AdapterFormat": "_adapter", "LoraAdapter": "_adapter",
    "OrtEpDevice": "_ep_device", "OrtHardwareDevice": "_ep_device",
    "OrtHardwareDeviceType": "_ep_device", "get_ep_devices": "_ep_device",
    **dict.fromkeys(
        ("OrtAllocatorType", "OrtArenaCfg", "OrtDeviceMemoryType", "OrtEpAssignedNode",
         "OrtEpAssignedSubgraph", "OrtMemType", "OrtMemoryInfo", "OrtMemoryInfoDeviceType",
         "create_and_register_allocator", "create_and_register_allocator_v2"), "_memory"),
}


# Submodules that load on first use as well.
_LAZY_MODULES = ("_pickle", "_logging", "_enums")


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None and name not in _LAZY_MODULES:
        raise AttributeError(f"module 'ortlite' has no attribute {name!r}")
    from importlib import import_module

    if module is None:
        return import_module("ortlite." + name)  # the import binds it in globals()
    value = getattr(import_module("ortlite." + module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


class RunOptions(_ortlite.RunOptions):
    """RunOptions()

    Options of one InferenceSession.run call; add_active_adapter(adapter) feeds a
    LoraAdapter's parameters to the runs that use these options."""

    __slots__ = ("_active_adapters",)

    def add_active_adapter(self, adapter):
        """Makes `adapter` (a LoraAdapter) active for the runs given these options: its
        parameters are fed by name, overriding the initializers of those names."""
        from ortlite._adapter import LoraAdapter

        if not isinstance(adapter, LoraAdapter):
            raise TypeError("add_active_adapter expects a LoraAdapter, not "
                            f"{type(adapter).__name__}")
        try:
            self._active_adapters.append(adapter)
        except AttributeError:
            self._active_adapters = [adapter]


RunOptions.__module__ = "ortlite"


class OrtValueVector(list):
    """OrtValueVector(values=())

    A list of OrtValues, onnxruntime's vector type for OrtValue sequences
    (IOBinding.get_outputs_as_ortvaluevector()); every element is an OrtValue."""

    __slots__ = ()

    def __init__(self, values=()):
        super().__init__(_checked_ortvalue(v) for v in values)

    def push_back(self, value):
        """Appends `value` (an OrtValue), as onnxruntime's push_back."""
        super().append(_checked_ortvalue(value))

    def append(self, value):
        super().append(_checked_ortvalue(value))

    def extend(self, values):
        super().extend(_checked_ortvalue(v) for v in values)

    def insert(self, index, value):
        super().insert(index, _checked_ortvalue(value))

    def __setitem__(self, index, value):
        if isinstance(index, slice):
            value = [_checked_ortvalue(v) for v in value]
        else:
            value = _checked_ortvalue(value)
        super().__setitem__(index, value)

    def reserve(self, n):
        """Accepted for onnxruntime's API; a Python list grows as needed."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise TypeError(f"reserve expects a non-negative int, not {n!r}")

    def shrink_to_fit(self):
        """Accepted for onnxruntime's API; does nothing."""


def _checked_ortvalue(value):
    if not isinstance(value, OrtValue):
        raise TypeError(f"OrtValueVector holds OrtValues, not {type(value).__name__}")
    return value


OrtValueVector.__module__ = "ortlite"


def get_build_info():
    """A one-line description of this build, as onnxruntime's ("... Build Info: ...")."""
    cuda = "CUDAExecutionProvider" in _ortlite.get_available_providers()
    return (f"ortlite Build Info: version={__version__}, cuda={'yes' if cuda else 'no'}, "
            f"providers={','.join(_ortlite.get_available_providers())}")


# The default logger (ortlite/_logging.py, loaded on first use) replaces the native
# severity setter.
del set_default_logger_severity  # noqa: F821  (from the native module's names above)

# Pickle support for sessions, options and CPU OrtValues (docs/distributed.md): these
# reducers load ortlite/_pickle.py on the first pickle, and it registers its own in their
# place. Unpickling names ortlite._pickle's functions, so it loads the module as well.
import copyreg as _copyreg  # noqa: E402


def _lazy_reducer(name):
    def reduce(obj):
        from ortlite import _pickle

        return getattr(_pickle, name)(obj)

    return reduce


for _cls, _name in ((_ortlite.InferenceSession, "_reduce_session"),
                    (_ortlite.SessionOptions, "_reduce_session_options"),
                    (_ortlite.RunOptions, "_reduce_run_options"),
                    (RunOptions, "_reduce_run_options"),
                    (_ortlite.OrtValue, "_reduce_ortvalue")):
    _copyreg.pickle(_cls, _lazy_reducer(_name))
del _cls, _name

# The exit drain of run_async in multiprocessing's fork / forkserver children.
from ortlite import _process  # noqa: E402,F401

import atexit as _atexit

# Runs queued with run_async finish (or are cancelled) while the interpreter is whole:
# no worker ever calls into a finalizing interpreter.
_atexit.register(_ortlite._async_shutdown)

# `from ortlite import *` names the lazy ones too (and so loads them).
__all__ = sorted({n for n in globals() if not n.startswith("_")} | set(_LAZY))
