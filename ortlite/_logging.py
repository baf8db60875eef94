"""The default logger: set_default_logger_callback / set_default_logger_severity, as
onnxruntime's. ortlite writes no log of its own otherwise; with a callback set, each
InferenceSession made reports what it loaded:

  INFO     "InferenceSession created: <n> inputs, <n> outputs, <n> nodes after load-time
           rewrites, providers [...]"
  VERBOSE  one message per input and output (name, type, shape) and per node (the node
           and the provider that runs it)

callback(severity, category, logid, code_location, message) runs on the thread that made
the session, with the GIL held; category is "ortlite", logid the session's
SessionOptions.logid. An exception in it goes to sys.unraisablehook and never fails the
session; a message logged while the callback runs (a session it makes) is dropped.
"""

import _thread  # (threading would be a new import: _thread is always loaded)

from ortlite import _ortlite

VERBOSE, INFO, WARNING, ERROR, FATAL = range(5)
_state = {"callback": None, "severity": WARNING}
_busy = _thread._local()


def _check_severity(severity):
    if not isinstance(severity, int) or isinstance(severity, bool):
        raise TypeError(f"severity must be an int, not {type(severity).__name__}")
    if not 0 <= severity <= 4:
        raise _ortlite.InvalidArgument(
            f"Invalid logging severity {severity}. 0:Verbose, 1:Info, 2:Warning, 3:Error, "
            "4:Fatal")


def set_default_logger_callback(callback, severity=WARNING):
    """Sends ortlite's log messages of `severity` (0 verbose .. 4 fatal) and above to
    callback(severity, category, logid, code_location, message), and sets the default
    severity to `severity`. None removes the callback (the severity is checked, not set)."""
    _check_severity(severity)
    if callback is None:
        _state["callback"] = None
        _ortlite._set_log_sink(None)
        return
    if not callable(callback):
        raise _ortlite.InvalidArgument("callback must be a callable, not "
                                       f"{type(callback).__name__}")
    _state["callback"] = callback
    _state["severity"] = severity
    _ortlite._set_log_sink(_session_created)


def set_default_logger_severity(severity):
    """The default logger's severity: messages below it are not sent (0 verbose .. 4
    fatal; out of range: ValueError)."""
    _ortlite.set_default_logger_severity(severity)
    _state["severity"] = int(severity)


def _emit(severity, logid, location, message):
    callback = _state["callback"]
    if callback is None or severity < _state["severity"] or getattr(_busy, "on", False):
        return
    _busy.on = True
    try:
        # An exception leaves through the session's hook call, which reports it to
        # sys.unraisablehook (PyErr_WriteUnraisable); the session is made all the same.
        callback(severity, "ortlite", logid, location, message)
    finally:
        _busy.on = False


def _session_created(sess):
    if _state["callback"] is None or getattr(_busy, "on", False):
        return
    logid = sess.get_session_options().logid or ""
    ins, outs = sess.get_inputs(), sess.get_outputs()
    rows = sess._node_placement()
    _emit(INFO, logid, "session.cc create_core",
          f"InferenceSession created: {len(ins)} inputs, {len(outs)} outputs, {len(rows)} "
          f"nodes after load-time rewrites, providers {sess.get_providers()}")
    if _state["severity"] > VERBOSE:
        return
    for kind, args in (("input", ins), ("output", outs)):
        for a in args:
            _emit(VERBOSE, logid, "session.cc create_core",
                  f"{kind} '{a.name}': {a.type} {a.shape}")
    for label, provider in rows:
        _emit(VERBOSE, logid, "planner.cc assign", f"{label} runs on {provider}")
