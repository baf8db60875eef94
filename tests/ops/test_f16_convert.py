"""float16 <-> float inside the float kernels (nn::convert_to_float / convert_from_float,
F16C when the CPU has it): every float16 bit pattern through a 1x1 Conv with weight 1 comes
back as itself (NaNs as NaN), and float values round to nearest even as numpy rounds them,
with and without the F16C loops (ORTLITE_NO_F16C=1, read once, in a fresh process)."""

import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite

HERE = os.path.dirname(os.path.abspath(__file__))


def conv1x1_f16(n):
    w = numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float16), "w")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 1, 1, n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def test_every_float16_round_trips_through_float():
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).reshape(1, 1, 1, -1)
    y = ortlite.InferenceSession(conv1x1_f16(65536).SerializeToString()).run(None, {"x": h})[0]
    # (-0 comes back as +0: the convolution's sum starts at +0.)
    same = ((y.view(np.uint16) == h.view(np.uint16)) | (np.isnan(y) & np.isnan(h))
            | ((y == 0) & (h == 0)))
    assert same.all(), np.flatnonzero(~same.reshape(-1))[:10]


def test_float_to_float16_rounds_like_numpy():
    rng = np.random.default_rng(0)
    n = 1 << 16
    # x * w with 11-bit x and w is exact in float (22 bits): the rounding under test is the
    # output's float -> float16, halfway cases, subnormals and overflow included.
    x = (rng.standard_normal(n) * 2.0 ** rng.integers(-24, 17, n)).astype(np.float16)
    x[:6] = [np.nan, np.inf, -np.inf, 0, 65504, -6e-8]
    w = np.float16(0.3333)
    m = conv1x1_f16(n)
    m.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.full((1, 1, 1, 1), w), "w"))
    y = ortlite.InferenceSession(m.SerializeToString()).run(None, {"x": x.reshape(1, 1, 1, -1)})[0]
    e = (x.astype(np.float32) * np.float32(w)).astype(np.float16)
    y = y.reshape(-1)
    same = ((y.view(np.uint16) == e.view(np.uint16)) | (np.isnan(y) & np.isnan(e))
            | ((y == 0) & (e == 0)))
    assert same.all(), np.flatnonzero(~same)[:10]


@pytest.mark.parametrize("env", [{"ORTLITE_NO_F16C": "1"}])
def test_portable_conversions_in_a_fresh_process(env):
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        os.path.abspath(__file__), "-k", "round_trips or rounds_like"],
                       env=dict(os.environ, **env, PYTHONPATH=os.pathsep.join(
                           [os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")])),
                       capture_output=True, text=True, timeout=300, cwd=os.path.dirname(HERE))
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


@pytest.mark.parametrize("shape", [(65536,), (1, 65536 - 77), (5, 13)])
def test_cast_every_float16_to_float(shape):
    """Cast float16 -> float (the AVX-512 loop of 64 values a step and its masked tail, F16C
    or the portable loop elsewhere): every bit pattern, exact against numpy (NaN as NaN)."""
    n = int(np.prod(shape))
    h = np.arange(65536, dtype=np.uint32)[:n].astype(np.uint16).view(np.float16).reshape(shape)
    g = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT16, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    y = ortlite.InferenceSession(m.SerializeToString()).run(None, {"x": h})[0]
    e = h.astype(np.float32)
    assert y.dtype == np.float32 and y.shape == e.shape
    same = (y.view(np.uint32) == e.view(np.uint32)) | (np.isnan(y) & np.isnan(e))
    assert same.all(), np.flatnonzero(~same.reshape(-1))[:10]
