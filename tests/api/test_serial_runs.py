"""Session config entry ortlite.intra_op.serial_runs (src/session/session.cc RunMode,
ThreadPool::SerialScope): "never" splits every run over the pool's threads, "always" runs
every chunk on the calling thread with the ranges the threads would have shared, "auto"
(the default) times both on short runs and keeps the clearly faster. The two ways give the
same results bit for bit; numpy and onnxruntime are the oracles for the results
themselves."""

import os

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import run_ort
from helpers.models import cnn_model, mlp_model, transformer_layer_model

KEY = "ortlite.intra_op.serial_runs"


def _session(model, mode, threads=2):
    so = ortlite.SessionOptions()
    so.intra_op_num_threads = threads
    if mode is not None:
        so.add_session_config_entry(KEY, mode)
    return ortlite.InferenceSession(model.SerializeToString(), so)


def _wide_model():
    # Large enough that every kernel splits: a 256 x 512 @ 512 x 384 product, Softmax over
    # rows, ReduceSum over the middle axis, LayerNormalization, a convolution and MaxPool.
    rng = np.random.default_rng(5)
    w = numpy_helper.from_array(rng.standard_normal((512, 384)).astype(np.float32) * 0.05, "w")
    cw = numpy_helper.from_array(rng.standard_normal((16, 8, 3, 3)).astype(np.float32) * 0.2,
                                 "cw")
    g = numpy_helper.from_array(np.ones(384, np.float32), "g")
    ax = numpy_helper.from_array(np.array([1], np.int64), "ax")
    nodes = [helper.make_node("MatMul", ["a", "w"], ["m"]),
             helper.make_node("Softmax", ["m"], ["s"], axis=-1),
             helper.make_node("LayerNormalization", ["m", "g"], ["ln"], axis=-1),
             helper.make_node("ReduceSum", ["ln", "ax"], ["r"], keepdims=0),
             helper.make_node("Conv", ["img", "cw"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2])]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, 64, 512]),
         helper.make_tensor_value_info("img", TensorProto.FLOAT, [2, 8, 64, 64])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("s", "r", "p")],
        initializer=[w, cw, g, ax])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    feeds = {"a": rng.standard_normal((4, 64, 512)).astype(np.float32),
             "img": rng.standard_normal((2, 8, 64, 64)).astype(np.float32)}
    return m, feeds


def _models():
    rng = np.random.default_rng(0)
    yield "cnn", cnn_model(), {"x": rng.standard_normal((2, 3, 32, 32)).astype(np.float32)}
    yield "mlp", mlp_model(), {"x": rng.standard_normal((64, 64)).astype(np.float32)}
    yield ("transformer", transformer_layer_model(),
           {"x": rng.standard_normal((2, 32, 64)).astype(np.float32)})
    m, feeds = _wide_model()
    yield "wide", m, feeds


@pytest.mark.parametrize("name,model,feeds", list(_models()), ids=lambda v: v
                         if isinstance(v, str) else "")
def test_serial_and_split_runs_give_the_same_bits(name, model, feeds):
    expected = run_ort(model, feeds)
    split = _session(model, "never").run(None, feeds)
    serial = _session(model, "always").run(None, feeds)
    for a, b, e in zip(split, serial, expected):
        assert a.tobytes() == b.tobytes(), name
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)


def test_auto_keeps_its_results_over_the_probes():
    # Runs 10 to 25 of every 1000 alternate the two ways; every run's output is the same.
    m, feeds = _wide_model()
    sess = _session(m, None)
    first = [o.tobytes() for o in sess.run(None, feeds)]
    for _ in range(40):
        assert [o.tobytes() for o in sess.run(None, feeds)] == first


def _worker_cpu_ticks():
    me = os.getpid()
    total = 0
    for tid in os.listdir(f"/proc/{me}/task"):
        if int(tid) == me:
            continue
        with open(f"/proc/{me}/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")
def test_always_leaves_the_workers_idle():
    m, feeds = _wide_model()
    ticks = {}
    for mode in ("always", "never"):
        sess = _session(m, mode)
        sess.run(None, feeds)
        t0 = _worker_cpu_ticks()
        for _ in range(200):
            sess.run(None, feeds)
        ticks[mode] = _worker_cpu_ticks() - t0
        del sess
    # Split, the worker computes about half of every run (tens of 10 ms ticks); serial,
    # nothing.
    assert ticks["never"] >= 5, ticks
    assert ticks["always"] <= 1, ticks


@pytest.mark.parametrize("value", ["sometimes", "", "1"])
def test_unknown_value_is_refused(value):
    m, _ = _wide_model()
    with pytest.raises(ortlite.InvalidArgument, match="serial_runs"):
        _session(m, value)


def test_one_thread_ignores_it():
    m, feeds = _wide_model()
    a = _session(m, "always", threads=1).run(None, feeds)
    b = _session(m, "never", threads=1).run(None, feeds)
    for x, y in zip(a, b):
        assert x.tobytes() == y.tobytes()
