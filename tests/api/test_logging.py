"""set_default_logger_callback / set_default_logger_severity (onnxruntime's, newer than the
1.23 the other tests compare with: the expectations are onnxruntime's documented behaviour
and the messages ortlite/_logging.py writes)."""

import gc
import sys
import weakref

import numpy as np
import pytest

import ortlite
from helpers import add_model


@pytest.fixture(autouse=True)
def _reset_logger():
    yield
    ortlite.set_default_logger_callback(None)
    ortlite.set_default_logger_severity(2)


def _model():
    return add_model()


def test_messages_reach_the_callback_at_verbose():
    got = []
    ortlite.set_default_logger_callback(lambda *a: got.append(a), severity=0)
    so = ortlite.SessionOptions()
    so.logid = "my-session"
    sess = ortlite.InferenceSession(_model(), so)
    assert got, "the callback heard nothing"
    for severity, category, logid, location, message in got:
        assert isinstance(severity, int) and 0 <= severity <= 4
        assert category == "ortlite" and logid == "my-session"
        assert isinstance(location, str) and isinstance(message, str)
    info = [m for s, _, _, _, m in got if s == 1]
    assert info == [f"InferenceSession created: {len(sess.get_inputs())} inputs, "
                    f"{len(sess.get_outputs())} outputs, {len(sess._node_placement())} nodes "
                    "after load-time rewrites, providers ['CPUExecutionProvider']"]
    verbose = [m for s, _, _, _, m in got if s == 0]
    for i in sess.get_inputs():
        assert f"input '{i.name}': {i.type} {i.shape}" in verbose
    for label, provider in sess._node_placement():
        assert f"{label} runs on {provider}" in verbose


@pytest.mark.parametrize("severity,expect", [(0, {0, 1}), (1, {1}), (2, set()), (4, set())])
def test_severity_filters_the_messages(severity, expect):
    got = []
    ortlite.set_default_logger_callback(lambda *a: got.append(a[0]), severity=severity)
    ortlite.InferenceSession(_model())
    assert set(got) == expect
    got.clear()
    ortlite.set_default_logger_severity(1)  # the default severity moves the threshold
    ortlite.InferenceSession(_model())
    assert set(got) == {1}


def test_none_restores_silence_and_releases_the_callback():
    got = []

    class Sink:
        def __call__(self, *a):
            got.append(a)

    sink = Sink()
    ref = weakref.ref(sink)
    ortlite.set_default_logger_callback(sink, severity=0)
    ortlite.set_default_logger_callback(None)
    del sink
    gc.collect()
    assert ref() is None
    ortlite.InferenceSession(_model())
    assert got == []


@pytest.mark.parametrize("severity", [5, -1, 100])
def test_bad_severity_is_refused(severity):
    with pytest.raises(ortlite.InvalidArgument, match="Invalid logging severity"):
        ortlite.set_default_logger_callback(print, severity=severity)
    with pytest.raises(ortlite.InvalidArgument, match="Invalid logging severity"):
        ortlite.set_default_logger_callback(None, severity=severity)
    assert issubclass(ortlite.InvalidArgument, RuntimeError)


def test_bad_callback_and_severity_types_are_refused():
    with pytest.raises(ortlite.InvalidArgument, match="callback must be a callable"):
        ortlite.set_default_logger_callback("not a callable")
    with pytest.raises(TypeError, match="severity must be an int"):
        ortlite.set_default_logger_callback(print, severity="0")
    with pytest.raises(ValueError, match="0..4"):
        ortlite.set_default_logger_severity(5)


def test_a_raising_callback_never_fails_the_session(monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_value))

    def boom(*a):
        raise ValueError("intentional")

    ortlite.set_default_logger_callback(boom, severity=0)
    sess = ortlite.InferenceSession(_model())
    x = np.ones((2, 3), np.float32)
    assert sess.run(None, {"x": x, "y": x})[0].tolist() == (x + x).tolist()
    assert len(seen) == 1 and isinstance(seen[0], ValueError)


def test_messages_while_the_callback_runs_are_dropped():
    got = []

    def cb(*a):
        got.append(a)
        if len(got) == 1:
            ortlite.InferenceSession(_model())  # its messages would recurse: dropped

    ortlite.set_default_logger_callback(cb, severity=1)
    ortlite.InferenceSession(_model())
    assert len(got) == 1
