"""com.microsoft twins of default-domain operators, registered on the default-domain kernels:
Range (delta optional), Pad (pads as an input, also [1, 2 rank]), Trilu, ExpandDims, GatherND,
Unique (outputs y, idx, counts), FusedGemm (activation_alpha / _beta) and FusedConv
(activation / activation_params). One-node models compared with onnxruntime's CPU kernels."""

import numpy as np
import onnxruntime
import pytest

import ortlite
from helpers import assert_same, run_lite
from test_ops_contrib import F32, build, check, lite_error, rnd

I32, I64 = np.int32, np.int64


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.int16])
@pytest.mark.parametrize("with_delta", [True, False])
def test_range(dtype, with_delta):
    inputs = [("start", np.array(2, dtype)), ("limit", np.array(11, dtype))]
    if with_delta:
        inputs.append(("delta", np.array(3, dtype)))
    check("Range", inputs, consts=("start", "limit", "delta"))


def test_range_float_fraction():
    check("Range", [("start", np.array(0.5, F32)), ("limit", np.array(-3.2, F32)),
                    ("delta", np.array(-0.3, F32))])


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("pads_2d", [False, True])
def test_pad(mode, pads_2d):
    rng = np.random.default_rng(0)
    x = rnd(rng, 3, 4, 5)
    pads = np.array([1, 0, 2, 2, 1, 0], I64)
    if pads_2d:
        pads = pads.reshape(1, -1)
    inputs = [("X", x), ("pads", pads)]
    if mode == "constant":
        inputs.append(("value", np.array([1.5], F32)))
    check("Pad", inputs, attrs=dict(mode=mode), consts=("pads",))


def test_pad_default_value_negative_pads():
    rng = np.random.default_rng(1)
    check("Pad", [("X", rnd(rng, 4, 6)), ("pads", np.array([-1, 2, 1, -2], I64))])


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, -1, 0, 2])
def test_trilu(upper, k):
    rng = np.random.default_rng(2)
    inputs = [("X", rnd(rng, 2, 5, 4))]
    if k is not None:
        inputs.append(("k", np.array(k, I64)))
    check("Trilu", inputs, attrs=dict(upper=upper))


# The axis is a graph input: onnxruntime 1.23 crashes (SIGSEGV) on an ExpandDims whose axis
# is an initializer.
@pytest.mark.parametrize("axis", [0, 1, 3, -1, -4])
def test_expand_dims(axis):
    rng = np.random.default_rng(3)
    check("ExpandDims", [("X", rnd(rng, 2, 3, 4)), ("axis", np.array(axis, I32))])


def test_expand_dims_constant_axis():
    rng = np.random.default_rng(3)
    model, feeds = build("ExpandDims", [("X", rnd(rng, 2, 3)), ("axis", np.array(-1, I32))],
                         ["Y"], consts=("axis",))
    assert run_lite(model, feeds)[0].shape == (2, 3, 1)


@pytest.mark.parametrize("itype", [I32, I64])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_gather_nd(itype, depth):
    rng = np.random.default_rng(4)
    x = rnd(rng, 3, 4, 5)
    idx = np.stack([rng.integers(0, d, (2, 3)) for d in (3, 4, 5)[:depth]], -1).astype(itype)
    check("GatherND", [("X", x), ("I", idx)])


def test_unique():  # onnxruntime's kernel is float only
    x = np.array([3, 1, 3, 2, 1, 5, 3, 0, 2, -0.5], F32)
    check("Unique", [("x", x)], outputs=("y", "idx", "counts"),
          out_types={"idx": 7, "counts": 7})


def test_unique_rank_2_is_refused():
    e = lite_error("Unique", [("x", np.zeros((2, 2), F32))], outputs=("y", "idx", "counts"),
                   out_types={"idx": 7, "counts": 7})
    assert isinstance(e, ortlite.InvalidArgument)


# onnxruntime requires `activation` and each parameter of it (ortlite has the defaults of the
# activation operators).
ACT_GEMM = [
    dict(activation="Relu"),
    dict(activation="Sigmoid"),
    dict(activation="Tanh"),
    dict(activation="LeakyRelu", activation_alpha=0.3),
    dict(activation="HardSigmoid", activation_alpha=0.3, activation_beta=0.4),
]


@pytest.mark.parametrize("act", ACT_GEMM)
@pytest.mark.parametrize("trans", [(0, 0), (1, 0), (0, 1)])
@pytest.mark.parametrize("const_b", [False, True])
def test_fused_gemm(act, trans, const_b):
    rng = np.random.default_rng(5)
    M, K, N = 7, 9, 12
    a = rnd(rng, K, M) if trans[0] else rnd(rng, M, K)
    b = rnd(rng, N, K) if trans[1] else rnd(rng, K, N)
    attrs = dict(act, transA=trans[0], transB=trans[1], alpha=0.7, beta=1.3)
    check("FusedGemm", [("A", a), ("B", b), ("C", rnd(rng, N))], attrs=attrs,
          consts=("B",) if const_b else ())


def test_fused_gemm_unsupported_activation():
    rng = np.random.default_rng(5)
    e = lite_error("FusedGemm", [("A", rnd(rng, 2, 3)), ("B", rnd(rng, 3, 4))],
                   attrs=dict(activation="Elu"))
    assert isinstance(e, ortlite.NotImplemented)


ACT_CONV = [
    dict(activation="Relu"),
    dict(activation="Sigmoid"),
    dict(activation="Tanh"),
    dict(activation="LeakyRelu", activation_params=[0.2]),
    dict(activation="Clip", activation_params=[-0.5, 0.7]),
    dict(activation="HardSigmoid", activation_params=[0.3, 0.4]),
]


@pytest.mark.parametrize("act", ACT_CONV)
@pytest.mark.parametrize("with_z", [False, True])
def test_fused_conv(act, with_z):
    rng = np.random.default_rng(6)
    x = rnd(rng, 2, 4, 9, 9)
    w = rnd(rng, 6, 4, 3, 3, scale=0.3)
    inputs = [("X", x), ("W", w), ("B", rnd(rng, 6))]
    attrs = dict(act, strides=[2, 2], pads=[1, 1, 1, 1])
    if not with_z:
        check("FusedConv", inputs, attrs=attrs, consts=("W", "B"))
        return
    # onnxruntime's NCHWc rewrite of a FusedConv with Z fails ("output and sum shape must
    # match"): its unoptimized kernel is the reference.
    inputs.append(("Z", rnd(rng, 2, 6, 5, 5)))
    model, feeds = build("FusedConv", inputs, ["Y"], attrs, consts=("W", "B"))
    so = onnxruntime.SessionOptions()
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    expected = onnxruntime.InferenceSession(model.SerializeToString(), so,
                                            providers=["CPUExecutionProvider"]).run(None, feeds)
    assert_same(run_lite(model, feeds), expected, rtol=1e-4, atol=1e-5)


def test_fused_conv_depthwise_runtime_weights():
    rng = np.random.default_rng(7)
    check("FusedConv", [("X", rnd(rng, 1, 8, 10, 10)), ("W", rnd(rng, 8, 1, 3, 3))],
          attrs=dict(activation="Relu", group=8, pads=[1, 1, 1, 1]))
