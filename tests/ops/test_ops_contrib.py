"""com.microsoft operators (src/providers/cpu/contrib): the fused ops onnxruntime's transformers
optimizer writes (layer norms, GELUs, FusedMatMul, EmbedLayerNormalization, Attention,
MultiHeadAttention). One-node models compared with onnxruntime's CPU kernels, bad inputs
checked for typed errors, and a small BERT-like model put through
onnxruntime.transformers.optimizer run end to end."""

import os
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import NP_TO_ONNX, assert_same, run_lite, run_ort

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MS = "com.microsoft"
F16, F32, F64, I32 = np.float16, np.float32, np.float64, np.int32
TOL = dict(rtol=1e-4, atol=1e-5)


def build(op, inputs, outputs, attrs=None, consts=(), domain=MS, opset=16, out_types=None):
    """One node. inputs: list of (name, array) with None for an omitted input; arrays named
    in `consts` become initializers. outputs: names, "" omitted."""
    names = [n if a is not None else "" for n, a in inputs]
    while names and not names[-1]:
        names.pop()
    node = helper.make_node(op, names, list(outputs), domain=domain, **(attrs or {}))
    arrays = {n: a for n, a in inputs if a is not None}
    first = next(a for _, a in inputs if a is not None)
    out_types = out_types or {}
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, NP_TO_ONNX[a.dtype], list(a.shape))
         for n, a in arrays.items() if n not in consts],
        [helper.make_tensor_value_info(o, out_types.get(o, NP_TO_ONNX[first.dtype]), None)
         for o in outputs if o],
        initializer=[numpy_helper.from_array(arrays[n], n) for n in consts if n in arrays])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid(MS, 1)])
    model.ir_version = 8
    return model, {n: a for n, a in arrays.items() if n not in consts}


def check(op, inputs, outputs=("Y",), attrs=None, consts=(), domain=MS, opset=16,
          out_types=None, threads=None, compare=None, **tol):
    """Runs both runtimes; compares the outputs at the indices in `compare` (default all)."""
    model, feeds = build(op, inputs, outputs, attrs, consts, domain, opset, out_types)
    expected = run_ort(model, feeds)
    actual = run_lite(model, feeds, threads)
    idx = compare if compare is not None else range(len(expected))
    assert_same([actual[i] for i in idx], [expected[i] for i in idx], **(tol or TOL))
    return actual


def lite_error(op, inputs, outputs=("Y",), attrs=None, domain=MS, opset=16, out_types=None):
    """The ortlite exception of loading + running the node (it must raise one)."""
    model, feeds = build(op, inputs, outputs, attrs, (), domain, opset, out_types)
    with pytest.raises(ortlite.OrtliteError) as e:
        run_lite(model, feeds)
    return e.value


def rnd(rng, *shape, dtype=F32, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


# ---- SkipLayerNormalization / SkipSimplifiedLayerNormalization -------------------------

def np_skip_ln(x, skip, gamma, beta, bias, eps, simplified):
    v = x.astype(F64) + skip.astype(F64) + (0 if bias is None else bias.astype(F64))
    if simplified:
        inv = 1 / np.sqrt((v * v).mean(-1, keepdims=True) + eps)
        return v * inv * gamma, None, inv, v
    mean = v.mean(-1, keepdims=True)
    inv = 1 / np.sqrt(((v - mean) ** 2).mean(-1, keepdims=True) + eps)
    y = (v - mean) * inv * gamma + (0 if beta is None else beta)
    return y, mean, inv, v


@pytest.mark.parametrize("B,S,H", [(1, 1, 64), (2, 7, 128), (3, 16, 768)])
@pytest.mark.parametrize("beta,bias", [(True, True), (True, False), (False, True), (False, False)])
def test_skip_layer_norm(B, S, H, beta, bias):
    rng = np.random.default_rng(B * 100 + S + H)
    x, s = rnd(rng, B, S, H), rnd(rng, B, S, H)
    g, b, bi = rnd(rng, H), rnd(rng, H), rnd(rng, H)
    ins = [("x", x), ("skip", s), ("gamma", g), ("beta", b if beta else None),
           ("bias", bi if bias else None)]
    out = check("SkipLayerNormalization", ins, ("Y", "", "", "sum"), {"epsilon": 1e-12},
                consts=("gamma", "beta", "bias"))
    # mean and inv_std_var (onnxruntime's CPU kernel leaves them unset): against numpy.
    model, feeds = build("SkipLayerNormalization", ins, ("Y", "mean", "inv", "sum"),
                         {"epsilon": 1e-12}, out_types={"mean": TensorProto.FLOAT,
                                                       "inv": TensorProto.FLOAT})
    y, mean, inv, total = run_lite(model, feeds)
    ry, rmean, rinv, rsum = np_skip_ln(x, s, g, b if beta else None, bi if bias else None,
                                       1e-12, False)
    np.testing.assert_allclose(y, ry, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(mean, rmean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(inv, rinv, rtol=1e-5)
    assert mean.shape == (B, S, 1) and mean.dtype == F32
    np.testing.assert_allclose(out[1], total, rtol=0, atol=0)


@pytest.mark.parametrize("skip_shape", ["same", "2d", "batch1"])
def test_skip_layer_norm_broadcast_skip_and_2d_input(skip_shape):
    rng = np.random.default_rng(3)
    x = rnd(rng, 3, 5, 64)
    s = {"same": rnd(rng, 3, 5, 64), "2d": rnd(rng, 5, 64), "batch1": rnd(rng, 1, 5, 64)}[skip_shape]
    g, b = rnd(rng, 64), rnd(rng, 64)
    check("SkipLayerNormalization", [("x", x), ("skip", s), ("gamma", g), ("beta", b)],
          ("Y", "", "", "sum"), {"epsilon": 1e-5})
    x2 = rnd(rng, 6, 32)
    check("SkipLayerNormalization", [("x", x2), ("skip", rnd(rng, 6, 32)), ("gamma", rnd(rng, 32))])


@pytest.mark.parametrize("dtype", [F32, F16])
def test_skip_simplified_layer_norm(dtype):
    rng = np.random.default_rng(4)
    x, s, g, bi = (rnd(rng, 2, 9, 96, dtype=dtype), rnd(rng, 2, 9, 96, dtype=dtype),
                   rnd(rng, 96, dtype=dtype), rnd(rng, 96, dtype=dtype))
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == F16 else TOL
    check("SkipSimplifiedLayerNormalization", [("x", x), ("skip", s), ("gamma", g), ("bias", bi)],
          ("Y", "", "", "sum"), {"epsilon": 1e-6}, **tol)
    model, feeds = build("SkipSimplifiedLayerNormalization",
                         [("x", x), ("skip", s), ("gamma", g), ("bias", bi)],
                         ("Y", "", "inv"), {"epsilon": 1e-6}, out_types={"inv": TensorProto.FLOAT})
    y, inv = run_lite(model, feeds)
    ry, _, rinv, _ = np_skip_ln(x, s, g, None, bi, 1e-6, True)
    np.testing.assert_allclose(inv, rinv, rtol=1e-2 if dtype == F16 else 1e-5)


def test_skip_layer_norm_float16():
    rng = np.random.default_rng(5)
    x, s, g, b = (rnd(rng, 2, 4, 64, dtype=F16), rnd(rng, 2, 4, 64, dtype=F16),
                  rnd(rng, 64, dtype=F16), rnd(rng, 64, dtype=F16))
    check("SkipLayerNormalization", [("x", x), ("skip", s), ("gamma", g), ("beta", b)],
          ("Y", "", "", "sum"), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("simplified", [False, True])
def test_skip_layer_norm_double_against_numpy(simplified):
    # onnxruntime's schemas take no double here; ortlite's kernels do.
    rng = np.random.default_rng(5)
    x, s, g, b, bi = (rnd(rng, 2, 4, 64, dtype=F64), rnd(rng, 2, 4, 64, dtype=F64),
                      rnd(rng, 64, dtype=F64), rnd(rng, 64, dtype=F64), rnd(rng, 64, dtype=F64))
    op = "SkipSimplifiedLayerNormalization" if simplified else "SkipLayerNormalization"
    ins = ([("x", x), ("skip", s), ("gamma", g), ("bias", bi)] if simplified else
           [("x", x), ("skip", s), ("gamma", g), ("beta", b), ("bias", bi)])
    model, feeds = build(op, ins, ("Y", "", "", "sum"), {"epsilon": 1e-6})
    y, total = run_lite(model, feeds)
    ry, _, _, rsum = np_skip_ln(x, s, g, None if simplified else b, bi, 1e-6, simplified)
    assert y.dtype == F64
    np.testing.assert_allclose(y, ry, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(total, rsum, rtol=1e-12)


def test_skip_layer_norm_bad_inputs():
    rng = np.random.default_rng(6)
    x = rnd(rng, 2, 4, 64)
    e = lite_error("SkipLayerNormalization", [("x", x), ("skip", rnd(rng, 2, 4, 32)),
                                              ("gamma", rnd(rng, 64))])
    assert isinstance(e, ortlite.InvalidArgument) and "skip" in str(e)
    e = lite_error("SkipLayerNormalization", [("x", x), ("skip", x), ("gamma", rnd(rng, 63))])
    assert isinstance(e, ortlite.InvalidArgument) and "gamma" in str(e)
    e = lite_error("SkipLayerNormalization", [("x", x), ("skip", x), ("gamma", rnd(rng, 64)),
                                              ("beta", rnd(rng, 2, 32))])
    assert isinstance(e, ortlite.InvalidArgument) and "beta" in str(e)
    e = lite_error("SkipLayerNormalization", [("x", rnd(rng, 2, 2, 4, 64)),
                                              ("skip", rnd(rng, 2, 2, 4, 64)),
                                              ("gamma", rnd(rng, 64))])
    assert isinstance(e, ortlite.InvalidArgument) and "2-D or 3-D" in str(e)
    e = lite_error("SkipLayerNormalization", [("x", x), ("skip", x.astype(F64)),
                                              ("gamma", rnd(rng, 64))])
    assert isinstance(e, ortlite.InvalidArgument) and "skip" in str(e)


# ---- SimplifiedLayerNormalization / LayerNormalization before opset 17 ---------------------

@pytest.mark.parametrize("axis", [-1, 1])
@pytest.mark.parametrize("dtype", [F32, F16])
def test_simplified_layer_norm(axis, dtype):
    rng = np.random.default_rng(7)
    x = rnd(rng, 2, 6, 64, dtype=dtype)
    g = rnd(rng, *x.shape[axis:] if axis > 0 else (64,), dtype=dtype)
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == F16 else TOL
    check("SimplifiedLayerNormalization", [("x", x), ("scale", g)], ("Y", "inv"),
          {"axis": axis, "epsilon": 1e-6}, domain="", out_types={"inv": TensorProto.FLOAT}, **tol)


@pytest.mark.parametrize("opset", [11, 16])
@pytest.mark.parametrize("dtype", [F32, F64, F16])
@pytest.mark.parametrize("with_bias", [True, False])
def test_layer_norm_before_opset_17(opset, dtype, with_bias):
    rng = np.random.default_rng(8)
    x = rnd(rng, 3, 5, 64, dtype=dtype)
    ins = [("x", x), ("scale", rnd(rng, 64, dtype=dtype)),
           ("B", rnd(rng, 64, dtype=dtype) if with_bias else None)]
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == F16 else TOL
    check("LayerNormalization", ins, ("Y", "mean", "inv"), {"epsilon": 1e-5}, domain="",
          opset=opset, out_types={"mean": TensorProto.FLOAT, "inv": TensorProto.FLOAT}, **tol)
    check("LayerNormalization", [("x", x), ("scale", rnd(rng, 5, 64, dtype=dtype))], ("Y",),
          {"axis": 1}, domain="", opset=opset, **tol)


def test_layer_norm_before_opset_17_broadcasts_scale_and_bias():
    # As ortlite's LayerNormalization-17 (docs/compatibility.md): against numpy.
    rng = np.random.default_rng(81)
    x, s, b = rnd(rng, 3, 5, 64), rnd(rng, 1, 64), rnd(rng, 5, 1)
    model, feeds = build("LayerNormalization", [("x", x), ("s", s), ("b", b)], ("Y",),
                         {"axis": 1, "epsilon": 1e-5}, domain="", opset=16)
    (y,) = run_lite(model, feeds)
    x64 = x.astype(F64).reshape(3, -1)
    ref = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, ref.reshape(x.shape) * s + b, rtol=1e-5, atol=1e-5)


def test_layer_norm_family_bad_inputs():
    rng = np.random.default_rng(9)
    e = lite_error("LayerNormalization", [("x", rnd(rng, 2, 8)), ("scale", rnd(rng, 7))],
                   domain="", opset=12)
    assert isinstance(e, ortlite.InvalidArgument) and "Scale" in str(e)
    e = lite_error("SimplifiedLayerNormalization", [("x", rnd(rng, 2, 8)), ("scale", rnd(rng, 8))],
                   attrs={"axis": 3}, domain="")
    assert isinstance(e, ortlite.InvalidArgument) and "axis" in str(e)


# ---- Gelu family -----------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(1, 1, 64), (2, 13, 768), (3, 5, 3072), (2, 3, 5000)])
def test_gelu_bias_gelu_fast_gelu(shape):
    rng = np.random.default_rng(sum(shape))
    x = rnd(rng, *shape, scale=3.0)
    b = rnd(rng, shape[-1])
    check("Gelu", [("x", x)])
    check("BiasGelu", [("x", x), ("b", b)], consts=("b",))
    check("FastGelu", [("x", x)])
    check("FastGelu", [("x", x), ("b", b)], consts=("b",))
    check("QuickGelu", [("x", x)])
    check("QuickGelu", [("x", x)], attrs={"alpha": 1.5})


def test_gelu_family_double_and_float16_against_float():
    rng = np.random.default_rng(10)
    x = rnd(rng, 4, 64, scale=2.0).astype(F16).astype(F32)
    b = rnd(rng, 64).astype(F16).astype(F32)
    for op, ins in [("Gelu", [("x", x)]), ("BiasGelu", [("x", x), ("b", b)]),
                    ("FastGelu", [("x", x), ("b", b)]), ("QuickGelu", [("x", x)])]:
        model, feeds = build(op, ins, ("Y",))
        (ref,) = run_ort(model, feeds)
        for dt, tol in ((F64, 1e-5), (F16, 4e-3)):
            model, feeds = build(op, [(n, a.astype(dt)) for n, a in ins], ("Y",))
            (y,) = run_lite(model, feeds)
            assert y.dtype == dt
            np.testing.assert_allclose(y.astype(F32), ref, rtol=tol, atol=tol)


def test_gelu_family_bad_inputs():
    rng = np.random.default_rng(11)
    x = rnd(rng, 2, 64)
    e = lite_error("BiasGelu", [("x", x), ("b", rnd(rng, 32))])
    assert isinstance(e, ortlite.InvalidArgument) and "bias" in str(e)
    e = lite_error("FastGelu", [("x", x), ("b", rnd(rng, 2, 64))])
    assert isinstance(e, ortlite.InvalidArgument) and "bias" in str(e)
    e = lite_error("Gelu", [("x", np.arange(4, dtype=I32))], out_types={"Y": TensorProto.INT32})
    assert isinstance(e, ortlite.NotImplemented) and "int32" in str(e)


# ---- FusedMatMul ----------------------------------------------------------------------------

MM_CASES = [
    # A shape, B shape, attributes (shapes before any transpose)
    ((64, 32), (32, 48), {}),
    ((2, 12, 16, 64), (2, 12, 64, 16), {"alpha": 0.125}),
    ((2, 12, 16, 64), (2, 12, 16, 64), {"transB": 1, "alpha": 0.125}),
    ((3, 64, 16), (64, 24), {"transA": 1}),
    ((3, 16, 64), (24, 64), {"transB": 1}),
    ((2, 1, 7, 8), (3, 8, 5), {}),
    ((4, 2, 3, 5), (2, 3, 5, 6), {"transBatchA": 1}),
    ((5, 2, 3, 4), (2, 3, 5, 6), {"transBatchA": 1, "transA": 1}),
    ((2, 3, 4, 5), (6, 2, 3, 5), {"transBatchB": 1, "transB": 1, "alpha": 2.0}),
    ((8,), (8, 5), {"transA": 1}),
    ((2, 4, 8), (8,), {}),
]


@pytest.mark.parametrize("a_shape,b_shape,attrs", MM_CASES)
def test_fused_matmul(a_shape, b_shape, attrs):
    rng = np.random.default_rng(len(a_shape) * 10 + len(b_shape))
    a, b = rnd(rng, *a_shape), rnd(rng, *b_shape)
    check("FusedMatMul", [("A", a), ("B", b)], attrs=attrs)
    if "transBatchA" not in attrs and "transBatchB" not in attrs:  # FusedMatMul's only
        check("TransposeMatMul", [("A", a), ("B", b)], attrs=attrs)


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("a_shape,b_shape,attrs", [
    ((8, 128, 64), (8, 128, 64), {"transB": 1, "alpha": 0.125}),  # whole products a thread
    ((3, 128, 64), (3, 64, 128), {}),                               # split, one after another
    ((2, 5, 40, 24), (5, 40, 24), {"transB": 1}),                   # broadcast batches
    ((7, 64, 33), (7, 64, 40), {"transA": 1, "alpha": 0.5}),
])
def test_fused_matmul_batches_over_threads(a_shape, b_shape, attrs, threads):
    rng = np.random.default_rng(sum(a_shape))
    a, b = rnd(rng, *a_shape), rnd(rng, *b_shape)
    check("FusedMatMul", [("A", a), ("B", b)], attrs=attrs, threads=threads)


def test_fused_matmul_constant_weight_and_threads():
    rng = np.random.default_rng(12)
    a, w = rnd(rng, 2, 32, 64), rnd(rng, 96, 64)
    check("FusedMatMul", [("A", a), ("W", w)], attrs={"transB": 1}, consts=("W",), threads=2)


def test_fused_matmul_bad_inputs():
    rng = np.random.default_rng(13)
    e = lite_error("FusedMatMul", [("A", rnd(rng, 4, 8)), ("B", rnd(rng, 4, 8))])
    assert isinstance(e, ortlite.InvalidArgument) and "inner dimensions" in str(e)
    e = lite_error("FusedMatMul", [("A", rnd(rng, 2, 4, 8)), ("B", rnd(rng, 3, 8, 2))])
    assert isinstance(e, ortlite.InvalidArgument) and "broadcast" in str(e)


# ---- EmbedLayerNormalization -------------------------------------------------------------

def embed_inputs(rng, B, S, H, V=50, P=None, G=2, segment=True, mask=True, position_ids=None):
    P = P or max(64, S)
    ids = rng.integers(0, V, size=(B, S)).astype(I32)
    m = np.ones((B, S), I32)
    for b in range(B):
        m[b, rng.integers(1, S + 1):] = 0  # right padding
    ins = [("input_ids", ids),
           ("segment_ids", rng.integers(0, G, size=(B, S)).astype(I32) if segment else None),
           ("word", rnd(rng, V, H)), ("pos", rnd(rng, P, H)),
           ("seg", rnd(rng, G, H) if segment else None),
           ("gamma", rnd(rng, H)), ("beta", rnd(rng, H)), ("mask", m if mask else None)]
    if position_ids is not None:
        ins.append(("position_ids", position_ids))
    return ins


EMB_OUT = {"mask_index": TensorProto.INT32, "Y": TensorProto.FLOAT, "sum": TensorProto.FLOAT}


@pytest.mark.parametrize("B,S,H", [(1, 1, 64), (2, 16, 128), (3, 128, 64), (2, 7, 768)])
@pytest.mark.parametrize("segment,mask", [(True, True), (False, True), (True, False)])
def test_embed_layer_norm(B, S, H, segment, mask):
    rng = np.random.default_rng(B * 1000 + S + H)
    ins = embed_inputs(rng, B, S, H, segment=segment, mask=mask)
    check("EmbedLayerNormalization", ins, ("Y", "mask_index", "sum"), {"epsilon": 1e-12},
          consts=("word", "pos", "seg", "gamma", "beta"), out_types=EMB_OUT)


@pytest.mark.parametrize("broadcast", [True, False])
def test_embed_layer_norm_position_ids_and_mask_index_type(broadcast):
    rng = np.random.default_rng(20)
    B, S, H = 2, 9, 64
    pid = rng.integers(0, 64, size=(1 if broadcast else B, S)).astype(I32)
    ins = embed_inputs(rng, B, S, H, position_ids=pid)
    check("EmbedLayerNormalization", ins, ("Y", "mask_index", "sum"), out_types=EMB_OUT)
    # Y alone, and mask_index_type 0 with a mask_index output (onnxruntime 1.23 aborts
    # loading either node): the outputs of mask_index_type 1 with mask_index.
    ins = embed_inputs(rng, B, S, H)
    model, feeds = build("EmbedLayerNormalization", ins, ("Y", "mask_index"), out_types=EMB_OUT)
    expected = run_ort(model, feeds)
    model, feeds = build("EmbedLayerNormalization", ins, ("Y", "mask_index"),
                         {"mask_index_type": 0}, out_types=EMB_OUT)
    assert_same(run_lite(model, feeds), expected, **TOL)
    model, feeds = build("EmbedLayerNormalization", ins, ("Y",), out_types=EMB_OUT)
    assert_same(run_lite(model, feeds), expected[:1], **TOL)


def test_embed_layer_norm_bad_inputs():
    rng = np.random.default_rng(21)
    ins = embed_inputs(rng, 2, 5, 64)
    ids = ins[0][1].copy()
    ids[1, 3] = 50
    e = lite_error("EmbedLayerNormalization", [("input_ids", ids)] + ins[1:], out_types=EMB_OUT)
    assert isinstance(e, ortlite.InvalidArgument) and "input_ids[1, 3] = 50" in str(e)
    seg = ins[1][1].copy()
    seg[0, 0] = -1
    e = lite_error("EmbedLayerNormalization", ins[:1] + [("segment_ids", seg)] + ins[2:], out_types=EMB_OUT)
    assert isinstance(e, ortlite.InvalidArgument) and "segment_ids" in str(e)
    e = lite_error("EmbedLayerNormalization", embed_inputs(rng, 2, 70, 64, P=64),  # S > P
                   out_types=EMB_OUT)
    assert isinstance(e, ortlite.InvalidArgument) and "position_ids" in str(e)
    bad = list(ins)
    bad[3] = ("pos", rnd(rng, 64, 32))
    e = lite_error("EmbedLayerNormalization", bad, out_types=EMB_OUT)
    assert isinstance(e, ortlite.InvalidArgument) and "position_embedding" in str(e)
    bad = list(ins)
    bad[7] = ("mask", np.ones((2, 4), I32))
    e = lite_error("EmbedLayerNormalization", bad, out_types=EMB_OUT)
    assert isinstance(e, ortlite.InvalidArgument) and "mask" in str(e)
    bad = list(ins)
    bad[0] = ("input_ids", ins[0][1].astype(np.int64))
    e = lite_error("EmbedLayerNormalization", bad, out_types=EMB_OUT)
    assert isinstance(e, ortlite.InvalidArgument) and "int32" in str(e)


# ---- Attention ---------------------------------------------------------------------------

def lengths_mask(rng, B, T, left=False):
    lens = rng.integers(1, T + 1, size=B)
    m = np.zeros((B, T), I32)
    for b, n in enumerate(lens):
        if left:
            m[b, T - n:] = 1
        else:
            m[b, :n] = 1
    return m, lens.astype(I32)


def attention_inputs(rng, B, S, Din, sizes, mask=None, past=None, attn_bias=None):
    return [("input", rnd(rng, B, S, Din)), ("weights", rnd(rng, Din, sum(sizes), scale=0.2)),
            ("bias", rnd(rng, sum(sizes), scale=0.2)), ("mask_index", mask), ("past", past),
            ("attention_bias", attn_bias)]


ATT_OUT = {"Y": TensorProto.FLOAT, "present": TensorProto.FLOAT}


@pytest.mark.parametrize("B,S,hidden,heads", [(1, 1, 64, 2), (2, 16, 128, 4), (3, 7, 64, 4),
                                               (2, 32, 768, 12), (1, 128, 64, 2)])
@pytest.mark.parametrize("mask_kind", ["none", "lengths", "raw2d", "raw3d", "start_end"])
def test_attention_masks(B, S, hidden, heads, mask_kind):
    rng = np.random.default_rng(B * 7 + S * 3 + hidden + len(mask_kind))
    raw, lens = lengths_mask(rng, B, S, left=mask_kind == "start_end")
    mask = {"none": None, "lengths": lens, "raw2d": raw,
            "raw3d": np.broadcast_to(raw[:, None, :], (B, S, S)).copy()
                     * (rng.random((B, S, S)) > 0.2).astype(I32),
            "start_end": np.concatenate([np.full(B, S, I32), S - lens]).astype(I32)}[mask_kind]
    if mask_kind == "raw3d":
        mask[:, :, 0] = 1  # every query sees one key
    ins = attention_inputs(rng, B, S, hidden, [hidden] * 3, mask)
    check("Attention", ins, ("Y",), {"num_heads": heads}, consts=("weights", "bias"),
          out_types=ATT_OUT)


@pytest.mark.parametrize("attrs", [{"unidirectional": 1}, {"scale": 0.3},
                                   {"mask_filter_value": -1000.0},
                                   {"qkv_hidden_sizes": [64, 64, 32]}])
def test_attention_attributes(attrs):
    rng = np.random.default_rng(30)
    B, S, hidden, heads = 2, 10, 64, 4
    raw, _ = lengths_mask(rng, B, S)
    sizes = attrs.get("qkv_hidden_sizes", [hidden] * 3)
    ins = attention_inputs(rng, B, S, hidden, sizes, raw)
    check("Attention", ins, ("Y",), {"num_heads": heads, **attrs}, out_types=ATT_OUT, threads=2)


@pytest.mark.parametrize("unidirectional", [0, 1])
@pytest.mark.parametrize("S,P", [(1, 5), (4, 3), (3, 0)])
def test_attention_past_present(unidirectional, S, P):
    rng = np.random.default_rng(31 + S + P)
    B, hidden, heads = 2, 64, 4
    past = rnd(rng, 2, B, heads, P, hidden // heads)
    raw, _ = lengths_mask(rng, B, P + S)
    raw[:, -1] = 1
    ins = attention_inputs(rng, B, S, hidden, [hidden] * 3, raw, past)
    check("Attention", ins, ("Y", "present"), {"num_heads": heads, "unidirectional": unidirectional},
          consts=("weights",), out_types=ATT_OUT)


@pytest.mark.parametrize("bias_shape", ["full", "broadcast"])
def test_attention_bias_input(bias_shape):
    rng = np.random.default_rng(32)
    B, S, hidden, heads = 2, 6, 64, 4
    shape = (B, heads, S, S) if bias_shape == "full" else (1, 1, S, S)
    raw, _ = lengths_mask(rng, B, S)
    ins = attention_inputs(rng, B, S, hidden, [hidden] * 3, raw, attn_bias=rnd(rng, *shape))
    check("Attention", ins, ("Y",), {"num_heads": heads}, out_types=ATT_OUT)


def test_attention_4d_mask_matches_the_equivalent_3d_mask():
    # onnxruntime's CPU kernel takes no 4-D (Megatron) mask: compared with the same mask in 3-D.
    rng = np.random.default_rng(33)
    B, S, hidden, heads, M = 2, 5, 64, 4, 8
    m4 = (rng.random((B, 1, M, M)) > 0.3).astype(I32)
    m4[:, :, :, 0] = 1
    ins = attention_inputs(rng, B, S, hidden, [hidden] * 3, m4)
    model, feeds = build("Attention", ins, ("Y",), {"num_heads": heads}, out_types=ATT_OUT)
    actual = run_lite(model, feeds)
    ins3 = [(n, m4[:, 0, :S, :S].copy() if n == "mask_index" else a) for n, a in ins]
    model, feeds = build("Attention", ins3, ("Y",), {"num_heads": heads}, out_types=ATT_OUT)
    assert_same(actual, run_ort(model, feeds), **TOL)


def test_attention_bad_inputs():
    rng = np.random.default_rng(34)
    B, S, hidden, heads = 2, 4, 64, 4
    ins = attention_inputs(rng, B, S, hidden, [hidden] * 3)
    bad = [(n, rnd(rng, 32, 192) if n == "weights" else a) for n, a in ins]
    e = lite_error("Attention", bad, attrs={"num_heads": heads}, out_types=ATT_OUT)
    assert isinstance(e, ortlite.InvalidArgument) and "weights" in str(e)
    bad = [(n, np.ones((B, S + 1), I32) if n == "mask_index" else a) for n, a in ins]
    e = lite_error("Attention", bad, attrs={"num_heads": heads}, out_types=ATT_OUT)
    assert isinstance(e, ortlite.InvalidArgument) and "mask_index" in str(e)
    bad = [(n, np.ones(3 * B + 2, I32) if n == "mask_index" else a) for n, a in ins]
    e = lite_error("Attention", bad, attrs={"num_heads": heads}, out_types=ATT_OUT)
    assert isinstance(e, ortlite.NotImplemented) and "3B + 2" in str(e)
    bad = [(n, rnd(rng, 2, B, heads, 3, 8) if n == "past" else a) for n, a in ins]
    e = lite_error("Attention", bad, ("Y", "present"), attrs={"num_heads": heads},
                   out_types=ATT_OUT)
    assert isinstance(e, ortlite.InvalidArgument) and "past" in str(e)
    e = lite_error("Attention", ins, attrs={"num_heads": 5}, out_types=ATT_OUT)
    assert isinstance(e, ortlite.InvalidArgument) and "num_heads" in str(e)
    e = lite_error("Attention", ins, attrs={"num_heads": heads, "qkv_hidden_sizes": [64, 64, 62]},
                   out_types=ATT_OUT)
    assert isinstance(e, ortlite.InvalidGraph) and "qkv_hidden_sizes" in str(e)
    e = lite_error("Attention", ins, attrs={"num_heads": heads, "qkv_hidden_sizes": [64, 64, 60]},
                   out_types=ATT_OUT)
    assert isinstance(e, ortlite.InvalidArgument) and "qkv_hidden_sizes" in str(e)
    e = lite_error("Attention", attention_inputs(rng, B, S, hidden, [64, 64, 32]), ("Y", "present"),
                   attrs={"num_heads": heads, "qkv_hidden_sizes": [64, 64, 32]}, out_types=ATT_OUT)
    assert isinstance(e, ortlite.InvalidArgument) and "present" in str(e)
    e = lite_error("Attention", ins, attrs={"num_heads": heads, "do_rotary": 1}, out_types=ATT_OUT)
    assert isinstance(e, ortlite.NotImplemented) and "do_rotary" in str(e)
    bad = [(n, rnd(rng, B, heads, S, S + 1) if n == "attention_bias" else a) for n, a in ins]
    e = lite_error("Attention", bad, attrs={"num_heads": heads}, out_types=ATT_OUT)
    assert isinstance(e, ortlite.InvalidArgument) and "attention_bias" in str(e)


# ---- MultiHeadAttention ------------------------------------------------------------------

MHA_OUT = {"Y": TensorProto.FLOAT, "present_key": TensorProto.FLOAT,
           "present_value": TensorProto.FLOAT}


def mha_inputs(rng, B, S, L, D, Dv, bias=True, mask=None, attn_bias=None, past=None):
    pk, pv = past if past is not None else (None, None)
    return [("query", rnd(rng, B, S, D)), ("key", rnd(rng, B, L, D)), ("value", rnd(rng, B, L, Dv)),
            ("bias", rnd(rng, 2 * D + Dv) if bias else None), ("key_padding_mask", mask),
            ("attention_bias", attn_bias), ("past_key", pk), ("past_value", pv)]


@pytest.mark.parametrize("B,S,L,D,Dv,heads", [(1, 1, 1, 64, 64, 2), (2, 8, 12, 128, 64, 4),
                                               (3, 16, 16, 768, 768, 12), (2, 5, 3, 64, 32, 8)])
@pytest.mark.parametrize("mask_kind", ["none", "lengths", "raw2d", "raw3d"])
@pytest.mark.parametrize("bias", [True, False])
def test_multi_head_attention(B, S, L, D, Dv, heads, mask_kind, bias):
    rng = np.random.default_rng(B + S * 5 + L * 7 + D + Dv + heads + len(mask_kind) + bias)
    raw, lens = lengths_mask(rng, B, L)
    mask = {"none": None, "lengths": lens, "raw2d": raw,
            "raw3d": np.broadcast_to(raw[:, None, :], (B, S, L)).copy()}[mask_kind]
    check("MultiHeadAttention", mha_inputs(rng, B, S, L, D, Dv, bias, mask), ("Y",),
          {"num_heads": heads}, out_types=MHA_OUT)


@pytest.mark.parametrize("attrs", [{"unidirectional": 1}, {"scale": 0.5},
                                   {"mask_filter_value": -500.0}])
def test_multi_head_attention_attributes_and_bias(attrs):
    rng = np.random.default_rng(40)
    B, S, D, heads = 2, 6, 64, 4
    raw, _ = lengths_mask(rng, B, S)
    ins = mha_inputs(rng, B, S, S, D, D, True, raw, attn_bias=rnd(rng, 1, heads, S, S))
    check("MultiHeadAttention", ins, ("Y",), {"num_heads": heads, **attrs}, out_types=MHA_OUT)


@pytest.mark.parametrize("L", [1, 15, 16, 17, 33, 200])
def test_multi_head_attention_bias_with_minus_infinity(L):
    """Scores rows of any length (the softmax's vector body and its tail), with -inf in an
    attention bias on some keys of each row (never all of them)."""
    rng = np.random.default_rng(50 + L)
    B, S, D, heads = 1, 5, 32, 2
    ab = rnd(rng, 1, heads, S, L)
    ab[..., 1::3] = -np.inf
    ins = mha_inputs(rng, B, S, L, D, D, False, None, attn_bias=ab)
    check("MultiHeadAttention", ins, ("Y",), {"num_heads": heads}, out_types=MHA_OUT)


@pytest.mark.parametrize("S,P", [(1, 6), (3, 4)])
def test_multi_head_attention_past_present(S, P):
    rng = np.random.default_rng(41 + S)
    B, D, heads = 2, 64, 4
    H = D // heads
    past = (rnd(rng, B, heads, P, H), rnd(rng, B, heads, P, H))
    raw, _ = lengths_mask(rng, B, P + S)
    ins = mha_inputs(rng, B, S, S, D, D, True, raw, past=past)
    check("MultiHeadAttention", ins, ("Y", "present_key", "present_value"), {"num_heads": heads},
          out_types=MHA_OUT)
    check("MultiHeadAttention", ins, ("Y", "present_key", "present_value"),
          {"num_heads": heads, "unidirectional": 1}, out_types=MHA_OUT)


def test_multi_head_attention_bnsh_key_value_and_self_attention():
    rng = np.random.default_rng(42)
    B, S, L, D, heads = 2, 4, 9, 64, 4
    H = D // heads
    ins = [("query", rnd(rng, B, S, D)), ("key", rnd(rng, B, heads, L, H)),
           ("value", rnd(rng, B, heads, L, H))]
    check("MultiHeadAttention", ins, ("Y", "present_key", "present_value"), {"num_heads": heads},
          out_types=MHA_OUT)
    raw, _ = lengths_mask(rng, B, L)
    check("MultiHeadAttention", ins + [("bias", None), ("key_padding_mask", raw)], ("Y",),
          {"num_heads": heads}, out_types=MHA_OUT)


def test_multi_head_attention_bad_inputs():
    rng = np.random.default_rng(43)
    B, S, D, heads = 2, 4, 64, 4
    ins = mha_inputs(rng, B, S, S, D, D, True)
    bad = [(n, rnd(rng, B, S, 32) if n == "key" else a) for n, a in ins]
    e = lite_error("MultiHeadAttention", bad, attrs={"num_heads": heads}, out_types=MHA_OUT)
    assert isinstance(e, ortlite.InvalidArgument) and "key" in str(e)
    bad = [(n, rnd(rng, 100) if n == "bias" else a) for n, a in ins]
    e = lite_error("MultiHeadAttention", bad, attrs={"num_heads": heads}, out_types=MHA_OUT)
    assert isinstance(e, ortlite.InvalidArgument) and "bias" in str(e)
    bad = [(n, np.ones((B, S + 2), I32) if n == "key_padding_mask" else a) for n, a in ins]
    e = lite_error("MultiHeadAttention", bad, attrs={"num_heads": heads}, out_types=MHA_OUT)
    assert isinstance(e, ortlite.InvalidArgument) and "key_padding_mask" in str(e)
    packed = [("query", rnd(rng, B, S, heads, 3, D // heads))]
    e = lite_error("MultiHeadAttention", packed, attrs={"num_heads": heads}, out_types=MHA_OUT)
    assert isinstance(e, ortlite.NotImplemented) and "packed" in str(e)
    bad = ins[:6] + [("past_key", rnd(rng, B, heads, 3, 16)), ("past_value", rnd(rng, B, heads, 2, 16))]
    e = lite_error("MultiHeadAttention", bad, ("Y", "present_key", "present_value"),
                   attrs={"num_heads": heads}, out_types=MHA_OUT)
    assert isinstance(e, ortlite.InvalidArgument) and "past_value" in str(e)
    e = lite_error("MultiHeadAttention", ins, attrs={"num_heads": 3}, out_types=MHA_OUT)
    assert isinstance(e, ortlite.InvalidArgument) and "num_heads" in str(e)
    e = lite_error("MultiHeadAttention", ins[:1], attrs={"num_heads": heads}, out_types=MHA_OUT)
    assert isinstance(e, ortlite.InvalidArgument) and "key and value are required" in str(e)


# ---- end to end: a BERT-like model through onnxruntime's transformers optimizer -----------

def make_bert(**kw):
    """tools/tool_models.py's seeded float BERT encoder (hidden 64, 4 heads by default)."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import tool_models

    return tool_models.bert(**kw)


@pytest.fixture
def transformers_optimizer(monkeypatch):
    """onnxruntime.transformers.optimizer; its opt_level 1 path imports torch only to read
    torch.version.hip, so a stand-in module serves when torch is not installed."""
    try:
        import torch  # noqa: F401
    except ImportError:
        import types
        stub = types.ModuleType("torch")
        stub.version = types.SimpleNamespace(hip=None, cuda=None)
        monkeypatch.setitem(__import__("sys").modules, "torch", stub)
    from onnxruntime.transformers import optimizer
    return optimizer


def bert_feeds(B=3, S=16, seed=1):
    rng = np.random.default_rng(seed)
    mask = np.ones((B, S), np.int64)
    mask[1, 10:] = 0
    mask[2 % B, 3:] = 0
    return {"input_ids": rng.integers(0, 100, (B, S)).astype(np.int64),
            "attention_mask": mask,
            "token_type_ids": rng.integers(0, 2, (B, S)).astype(np.int64)}


@pytest.mark.parametrize("variant", ["level0", "level1", "fast_gelu_plain_layer_norm"])
def test_bert_optimized_by_onnxruntime_transformers(tmp_path, transformers_optimizer, variant):
    import onnx
    from onnxruntime.transformers.fusion_options import FusionOptions

    src = str(tmp_path / "bert.onnx")
    onnx.save(make_bert(), src)
    options = FusionOptions("bert")
    expected_ops = {"EmbedLayerNormalization", "Attention", "SkipLayerNormalization", "BiasGelu"}
    if variant == "fast_gelu_plain_layer_norm":
        options.enable_gelu_approximation = True
        options.enable_embed_layer_norm = False
        options.enable_skip_layer_norm = False
        # The layer norms become default-domain LayerNormalization nodes at opset 14, the mask
        # a ReduceSum of key lengths.
        expected_ops = {"Attention", "FastGelu", "LayerNormalization"}
    opt = transformers_optimizer.optimize_model(
        src, model_type="bert", num_heads=4, hidden_size=64,
        opt_level=1 if variant == "level1" else 0, optimization_options=options)
    dst = str(tmp_path / "bert_opt.onnx")
    opt.save_model_to_file(dst)
    ops = {n.op_type for n in opt.model.graph.node}
    fused = {n.op_type for n in opt.model.graph.node if n.domain == MS}
    assert fused == expected_ops - {"LayerNormalization"}, fused
    assert expected_ops <= ops and not {"Softmax", "Erf", "ReduceMean"} & ops, ops

    feeds = bert_feeds()
    expected = run_ort(open(dst, "rb").read(), feeds)
    actual = run_lite(open(dst, "rb").read(), feeds)
    assert_same(actual, expected, rtol=1e-4, atol=2e-5)
    assert_same(run_lite(open(dst, "rb").read(), feeds, threads=2), expected, rtol=1e-4, atol=2e-5)
    # ... and the fused model computes what the original one does (FastGelu approximates).
    approx = dict(rtol=1e-2, atol=2e-3) if options.enable_gelu_approximation else dict(
        rtol=1e-3, atol=1e-4)
    assert_same(actual, run_ort(make_bert(), feeds), **approx)
