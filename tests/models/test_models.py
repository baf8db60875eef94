"""Whole models built with onnx.helper (seeded random weights), compared with onnxruntime:
an MLP, a small residual CNN and a transformer encoder layer, with symbolic batch / sequence
dims in the declared inputs."""

import math

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import assert_same, run_ort, session
from helpers.models import cnn_model, mlp_model, transformer_layer_model

TOL = dict(rtol=1e-4, atol=1e-5)


def compare(model, feeds_list, threads=None):
    sess = session(model, threads)
    for feeds in feeds_list:
        expected = run_ort(model, feeds)
        actual = sess.run(None, feeds)
        assert_same(actual, expected, **TOL)


# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("threads", [None, 1])
def test_mlp(threads):
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.standard_normal((n, 64)).astype(np.float32)} for n in (1, 5, 33)]
    compare(mlp_model(), feeds, threads)


# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("threads", [None, 1])
def test_cnn(threads):
    rng = np.random.default_rng(1)
    feeds = [{"x": rng.standard_normal((n, 3, 32, 32)).astype(np.float32)} for n in (1, 3)]
    compare(cnn_model(), feeds, threads)


# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("threads", [None, 1])
def test_transformer_encoder_layer(threads):
    rng = np.random.default_rng(2)
    feeds = [{"x": rng.standard_normal(s).astype(np.float32)}
             for s in ((1, 1, 64), (1, 7, 64), (3, 16, 64), (2, 33, 64))]
    compare(transformer_layer_model(), feeds, threads)
