"""Neural-network kernels (src/providers/cpu/nn): MatMul, Gemm, Conv, MaxPool / AveragePool / global
pools, BatchNormalization, LayerNormalization, InstanceNormalization, Softmax / LogSoftmax,
Dropout. Compared with onnxruntime; where onnxruntime has no CPU kernel for an element type
the ONNX spec allows (double Conv / AveragePool, integer Gemm, ...) compared with onnxruntime
on float32 inputs or with numpy. Col2Im, MaxUnpool, RoiAlign, MaxRoiPool, Upsample and
DeformConv: compared with onnxruntime where it has a CPU kernel for the opset and element
type, else with onnx.reference.ReferenceEvaluator or a numpy oracle written here; plus the
error paths."""

import functools
import itertools
import os
import platform
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import ortlite
import helpers
from helpers import (NP_TO_ONNX, ROOT, TESTS, assert_same, check_against_ort,
                     check_against_reference, rng, run_lite, run_ort, run_ortlite, session)

F16, F32, F64 = np.float16, np.float32, np.float64


# ---------------------------------------------------------------------------------------
# helpers


# This file's one-node models keep IR version 8 (those of Col2Im, MaxUnpool, RoiAlign,
# MaxRoiPool, Upsample and DeformConv call helpers.node_model: IR version 10).
node_model = functools.partial(helpers.node_model, max_ir=8)


def rand(shape, dtype=F32, seed=0, lo=-1.0, hi=1.0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        lo_i = 0 if dtype.kind == "u" else -5
        return rng.integers(lo_i, 6, size=shape).astype(dtype)
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def tol(dtype, k=1):
    """Tolerance for results that sum k products."""
    dtype = np.dtype(dtype)
    if dtype == F16:
        return dict(rtol=5e-3, atol=5e-3 * max(1.0, np.sqrt(k)))
    if dtype == F32:
        return dict(rtol=1e-4, atol=1e-5 * max(1.0, np.sqrt(k)))
    if dtype.kind == "f":
        return dict(rtol=1e-10, atol=1e-12 * max(1.0, k))
    return {}


def check(model, feeds, threads=None, **tolerance):
    expected = run_ort(model, feeds)
    actual = run_lite(model, feeds, threads)
    assert_same(actual, expected, **tolerance)
    return actual


def check_via_f32(make, feeds, dtype, threads=None, **tolerance):
    """For element types onnxruntime has no kernel for: runs the dtype model on ortlite and
    the float32 model on onnxruntime, with the same (float32-representable) values."""
    feeds32 = {k: v.astype(F32) for k, v in feeds.items()}
    feeds_t = {k: v.astype(dtype) for k, v in feeds32.items()}
    expected = run_ort(make(F32), feeds32)
    actual = run_lite(make(dtype), feeds_t, threads)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.dtype == (np.dtype(dtype) if e.dtype == F32 else e.dtype)
        np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), **tolerance)
    return actual


# ---------------------------------------------------------------------------------------
# MatMul

MATMUL_SHAPES = [
    ((5,), (5,)),
    ((5,), (5, 3)),
    ((4, 5), (5,)),
    ((1, 7), (7, 9)),
    ((9, 7), (7, 1)),
    ((3, 4), (4, 5)),
    ((2, 3, 4), (4, 5)),
    ((2, 3, 4), (2, 4, 5)),
    ((3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 6)),
    ((1, 2, 3, 4), (3, 1, 4, 2)),
    ((4,), (2, 4, 3)),
    ((2, 3, 4), (4,)),
    ((0, 4), (4, 3)),
    ((3, 0), (0, 4)),
    ((2, 0, 3), (3, 4)),
    ((17, 33), (33, 65)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
@pytest.mark.parametrize("const_b", [False, True])
def test_matmul_shapes_f32(sa, sb, const_b):
    a, b = rand(sa, seed=1), rand(sb, seed=2)
    if const_b:
        m = node_model("MatMul", {"A": a}, ["Y"], consts={"B": b})
        check(m, {"A": a}, **tol(F32, sa[-1]))
    else:
        m = node_model("MatMul", {"A": a, "B": b}, ["Y"])
        check(m, {"A": a, "B": b}, **tol(F32, sa[-1]))


@pytest.mark.parametrize("dtype", [F64, F16, np.int32, np.int64, np.uint32, np.uint64])
@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((2, 3, 4), (4,)), ((2, 1, 3, 8), (2, 8, 5)),
                                   ((5,), (5,))])
@pytest.mark.parametrize("const_b", [False, True])
def test_matmul_dtypes(dtype, sa, sb, const_b):
    a, b = rand(sa, dtype, seed=3), rand(sb, dtype, seed=4)
    if const_b:
        m = node_model("MatMul", {"A": a}, ["Y"], consts={"B": b})
        check(m, {"A": a}, **tol(dtype, sa[-1]))
    else:
        m = node_model("MatMul", {"A": a, "B": b}, ["Y"])
        check(m, {"A": a, "B": b}, **tol(dtype, sa[-1]))


def test_matmul_int_wraps():
    a = np.array([[2**31 - 1, 2]], np.int32)
    b = np.array([[2], [3]], np.int32)
    m = node_model("MatMul", {"A": a, "B": b}, ["Y"])
    check(m, {"A": a, "B": b})


@pytest.mark.parametrize("opset", [1, 9, 13, 23])
def test_matmul_opsets(opset):
    a, b = rand((2, 3, 4)), rand((4, 6), seed=1)
    check(node_model("MatMul", {"A": a, "B": b}, ["Y"], opset=opset), {"A": a, "B": b},
          **tol(F32, 4))


@pytest.mark.parametrize("threads", [1, 4])
@pytest.mark.parametrize("dims", [(257, 513, 129), (129, 257, 513), (1, 1000, 300),
                                  (300, 1000, 1), (64, 1, 64)])
@pytest.mark.parametrize("const_b", [False, True])
def test_matmul_large_blocking_edges(dims, threads, const_b):
    M, K, N = dims
    a, b = rand((M, K), seed=5), rand((K, N), seed=6)
    if const_b:
        m = node_model("MatMul", {"A": a}, ["Y"], consts={"B": b})
        check(m, {"A": a}, threads=threads, **tol(F32, K))
    else:
        m = node_model("MatMul", {"A": a, "B": b}, ["Y"])
        check(m, {"A": a, "B": b}, threads=threads, **tol(F32, K))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("m", [2, 3, 7, 16, 31, 32, 33])
@pytest.mark.parametrize("kn", [(768, 1536), (97, 1001), (64, 16)], ids=str)
def test_matmul_few_rows_against_numpy(m, kn, threads):
    """Products of at most 32 rows by a fed B go to the fused GEMM with both operands read in
    place at any size (gemm.cc kFewRows): against numpy in double, batched and broadcast,
    with infinities and a NaN in A."""
    K, N = kn
    a, b = rand((2, m, K), seed=m), rand((2, K, N), seed=K)
    a[1, m - 1, 0] = np.inf
    a[0, 0, K // 2] = np.nan
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(F32)
    for bb in (b, b[0]):
        m_ = node_model("MatMul", {"A": a, "B": bb}, ["Y"])
        (y,) = run_lite(m_, {"A": a, "B": bb}, threads)
        want = expected if bb.ndim == 3 else (a.astype(np.float64) @ bb).astype(F32)
        np.testing.assert_allclose(y, want, rtol=2e-5, atol=2e-5 * np.sqrt(K), equal_nan=True)


@pytest.mark.parametrize("threads", [1, 4])
def test_matmul_batched_large(threads):
    a, b = rand((3, 2, 70, 90), seed=7), rand((2, 90, 130), seed=8)
    m = node_model("MatMul", {"A": a, "B": b}, ["Y"])
    check(m, {"A": a, "B": b}, threads=threads, **tol(F32, 90))
    a = rand((16, 24, 32), seed=9)
    b = rand((16, 32, 24), seed=10)
    m = node_model("MatMul", {"A": a, "B": b}, ["Y"])
    check(m, {"A": a, "B": b}, threads=threads, **tol(F32, 32))


@pytest.mark.parametrize("sa,sb", [((3, 4), (5, 6)), ((4,), (5,)), ((2, 3, 4), (3, 5, 6)),
                                   ((2, 3, 4), (3, 4, 5))])
def test_matmul_bad_shapes(sa, sb):
    a, b = rand(sa), rand(sb)
    m = node_model("MatMul", {"A": a, "B": b}, ["Y"])
    with pytest.raises(ortlite.InvalidArgument, match=r"MatMul"):
        run_lite(m, {"A": a, "B": b})


def test_matmul_scalar_rejected():
    a, b = np.array(2.0, F32), rand((3,))
    m = node_model("MatMul", {"A": a, "B": b}, ["Y"])
    with pytest.raises(ortlite.InvalidArgument, match="rank"):
        run_lite(m, {"A": a, "B": b})


def test_matmul_mixed_types_rejected():
    a, b = rand((2, 3)), rand((3, 4), F64)
    m = node_model("MatMul", {"A": a, "B": b}, ["Y"])
    with pytest.raises(ortlite.OrtliteError):
        run_lite(m, {"A": a, "B": b})


HERE = os.path.dirname(os.path.abspath(__file__))  # this file's folder, for the subprocess
GEMM_SCRIPT = r"""
import sys
import numpy as np
sys.path.insert(0, {root!r}); sys.path.insert(0, {tests!r}); sys.path.insert(0, {here!r})
import ortlite
from test_ops_nn import node_model, rand, session
rng = np.random.default_rng(0)
for (M, K, N) in [(1, 37, 50), (50, 37, 1), (13, 29, 300), (257, 513, 129), (7, 5, 3)]:
    for ta, tb in [(0, 0), (1, 0), (0, 1), (1, 1)]:
        for dt in (np.float32, np.float64):
            a = rand((K, M) if ta else (M, K), dt, seed=1)
            b = rand((N, K) if tb else (K, N), dt, seed=2)
            c = rand((M, N), dt, seed=3)
            ref = 1.5 * (a.T if ta else a).astype(np.float64) @ (b.T if tb else b) + 0.5 * c
            for const_b in (False, True):
                ins = dict(A=a, C=c) if const_b else dict(A=a, B=b, C=c)
                m = node_model("Gemm", ins, ["Y"], attrs=dict(transA=ta, transB=tb, alpha=1.5,
                               beta=0.5), consts=dict(B=b) if const_b else None,
                               order=["A", "B", "C"])
                for threads in (1, 3):
                    y = session(m, threads).run(None, ins)[0]
                    np.testing.assert_allclose(y, ref, rtol=1e-4 if dt == np.float32 else 1e-10,
                                               atol=1e-4 if dt == np.float32 else 1e-10)
# Convolutions (the fused GEMM's implicit im2col and 1x1 products, Relu in its epilogue) and a
# MatMul with a constant B of several rows, against onnxruntime.
import onnxruntime
from onnx import helper
for (N, C, M, H, k, s, p, g) in [(1, 16, 16, 16, 3, 1, 1, 1), (2, 3, 20, 33, 3, 2, 1, 1),
                                 (1, 24, 40, 14, 1, 1, 0, 1), (1, 32, 37, 9, 5, 1, 2, 1),
                                 (1, 8, 12, 12, 3, 1, 1, 2)]:
    x = rand((N, C, H, H), np.float32, seed=4)
    w = rand((M, C // g, k, k), np.float32, seed=5)
    bias = rand((M,), np.float32, seed=6)
    conv = helper.make_node("Conv", ["X", "W", "B"], ["c"], kernel_shape=[k, k], strides=[s, s],
                            pads=[p] * 4, group=g)
    relu = helper.make_node("Relu", ["c"], ["Y"])
    m = node_model("Conv", dict(X=x), ["Y"], consts=dict(W=w, B=bias))
    m.graph.ClearField("node")
    m.graph.node.extend([conv, relu])
    ref = onnxruntime.InferenceSession(m.SerializeToString(),
                                       providers=["CPUExecutionProvider"]).run(None, dict(X=x))[0]
    for threads in (1, 3):
        y = session(m, threads).run(None, dict(X=x))[0]
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
for (M, K, N) in [(5, 64, 70), (33, 200, 96), (2, 1100, 40)]:
    a, b = rand((M, K), np.float32, seed=7), rand((K, N), np.float32, seed=8)
    m = node_model("MatMul", dict(A=a), ["Y"], consts=dict(B=b), order=["A", "B"])
    for threads in (1, 3):
        y = session(m, threads).run(None, dict(A=a))[0]
        np.testing.assert_allclose(y, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
print("OK")
"""


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 kernels")
@pytest.mark.parametrize("isa", ["sse2", "avx2", "avx512"])
def test_gemm_kernel_variants(isa):
    """Every micro-kernel set the machine supports (ORTLITE_GEMM_ISA caps the choice, for
    gemm.h's kernels and the fused GEMM's: AVX-512, AVX2, or none below AVX2)."""
    env = dict(os.environ, ORTLITE_GEMM_ISA=isa)
    script = GEMM_SCRIPT.format(root=ROOT, tests=TESTS, here=HERE)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "OK" in out.stdout


# ---------------------------------------------------------------------------------------
# Gemm

C_SHAPES = [None, (), (1,), (5,), (1, 5), (4, 1), (4, 5), (1, 1)]


@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("cshape", C_SHAPES)
@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.5, 2.0), (2.0, 0.0), (0.0, 1.5)])
@pytest.mark.parametrize("const_b", [False, True])
def test_gemm_attrs_and_c_broadcast(ta, tb, cshape, alpha, beta, const_b):
    """A constant float B takes the fused GEMM (C as its bias or summed input) where the
    CPU has it; a B fed at run time the BLAS path."""
    M, K, N = 4, 3, 5
    a = rand((K, M) if ta else (M, K), seed=1)
    b = rand((N, K) if tb else (K, N), seed=2)
    ins = {"A": a, "B": b}
    if cshape is not None:
        ins["C"] = rand(cshape, seed=3)
    attrs = dict(transA=ta, transB=tb, alpha=alpha, beta=beta)
    if const_b:
        feeds = {k: v for k, v in ins.items() if k != "B"}
        m = node_model("Gemm", feeds, ["Y"], attrs=attrs, opset=13, consts={"B": b},
                       order=["A", "B", "C"] if cshape is not None else ["A", "B"])
        check(m, feeds, **tol(F32, K))
    else:
        m = node_model("Gemm", ins, ["Y"], attrs=attrs, opset=13)
        check(m, ins, **tol(F32, K))


@pytest.mark.parametrize("M,K,N", [(2, 3, 2), (16, 64, 16), (32, 32, 32), (12, 1500, 33),
                                   (33, 70, 65)])
@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_gemm_small_products_read_in_place(M, K, N, ta, tb, beta):
    """Products the BLAS does not take run the fused GEMM on the operands in place (B^T
    copied), C as its summed input when beta is 1 (not past one K block: 1500)."""
    a = rand((K, M) if ta else (M, K), seed=1)
    b = rand((N, K) if tb else (K, N), seed=2)
    c = rand((M, N), seed=3)
    ins = {"A": a, "B": b, "C": c}
    m = node_model("Gemm", ins, ["Y"], attrs=dict(transA=ta, transB=tb, alpha=0.75, beta=beta),
                   opset=13)
    ref = 0.75 * ((a.T if ta else a).astype(np.float64) @ (b.T if tb else b)) + beta * c
    for threads in (1, 2):
        y = session(m, threads).run(None, ins)[0]
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4 * np.sqrt(K))


def test_gemm_alpha_zero_ignores_the_product():
    """alpha = 0: C * beta, whatever A B holds (inf * 0 is not computed)."""
    a = np.full((4, 3), np.inf, F32)
    ins = {"A": a, "B": rand((3, 5), seed=2), "C": rand((4, 5), seed=3)}
    m = node_model("Gemm", ins, ["Y"], attrs=dict(alpha=0.0, beta=1.0), opset=13)
    np.testing.assert_array_equal(session(m, 1).run(None, ins)[0], ins["C"])


@pytest.mark.parametrize("opset", [7, 9, 11, 13, 23])
@pytest.mark.parametrize("const_b", [False, True])
def test_gemm_opsets(opset, const_b):
    a, b, c = rand((6, 7)), rand((8, 7), seed=1), rand((8,), seed=2)
    attrs = dict(transB=1, alpha=0.7, beta=1.3)
    if const_b:
        m = node_model("Gemm", {"A": a, "C": c}, ["Y"], attrs=attrs, opset=opset,
                       consts={"B": b}, order=["A", "B", "C"])
        check(m, {"A": a, "C": c}, **tol(F32, 7))
    else:
        m = node_model("Gemm", {"A": a, "B": b, "C": c}, ["Y"], attrs=attrs, opset=opset)
        check(m, {"A": a, "B": b, "C": c}, **tol(F32, 7))


@pytest.mark.parametrize("opset", [11, 13])
def test_gemm_without_c(opset):
    a, b = rand((6, 7)), rand((7, 3), seed=1)
    check(node_model("Gemm", {"A": a, "B": b}, ["Y"], attrs=dict(alpha=2.0), opset=opset),
          {"A": a, "B": b}, **tol(F32, 7))


def test_gemm_c_required_before_opset_11():
    a, b = rand((6, 7)), rand((7, 3), seed=1)
    m = node_model("Gemm", {"A": a, "B": b}, ["Y"], opset=9)
    with pytest.raises(ortlite.InvalidGraph, match="C"):
        session(m)


@pytest.mark.parametrize("dtype", [F64, F16])
@pytest.mark.parametrize("const_b", [False, True])
def test_gemm_float_dtypes(dtype, const_b):
    a, b, c = rand((5, 9), dtype), rand((5, 4), dtype, seed=1), rand((1, 4), dtype, seed=2)
    attrs = dict(transA=1, alpha=1.5, beta=0.5)
    if const_b:
        m = node_model("Gemm", {"A": a, "C": c}, ["Y"], attrs=attrs, consts={"B": b},
                       order=["A", "B", "C"])
        check(m, {"A": a, "C": c}, **tol(dtype, 5))
    else:
        m = node_model("Gemm", {"A": a, "B": b, "C": c}, ["Y"], attrs=attrs)
        check(m, {"A": a, "B": b, "C": c}, **tol(dtype, 5))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (2.0, 3.0)])
def test_gemm_int_dtypes(dtype, alpha, beta):
    """onnxruntime has no integer Gemm kernel: numpy reference."""
    a, b, c = rand((3, 4), dtype), rand((5, 4), dtype, seed=1), rand((5,), dtype, seed=2)
    m = node_model("Gemm", {"A": a, "B": b, "C": c}, ["Y"],
                   attrs=dict(transB=1, alpha=alpha, beta=beta))
    y = run_lite(m, {"A": a, "B": b, "C": c})[0]
    ref = (alpha * (a.astype(np.int64) @ b.T.astype(np.int64)) + beta * c.astype(np.int64))
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, ref.astype(dtype))


@pytest.mark.parametrize("threads", [1, 4])
@pytest.mark.parametrize("const_b", [False, True])
def test_gemm_large(threads, const_b):
    a, b, c = rand((257, 129)), rand((513, 129), seed=1), rand((513,), seed=2)
    if const_b:
        m = node_model("Gemm", {"A": a, "C": c}, ["Y"], attrs=dict(transB=1), consts={"B": b},
                       order=["A", "B", "C"])
        check(m, {"A": a, "C": c}, threads=threads, **tol(F32, 129))
    else:
        m = node_model("Gemm", {"A": a, "B": b, "C": c}, ["Y"], attrs=dict(transB=1))
        check(m, {"A": a, "B": b, "C": c}, threads=threads, **tol(F32, 129))


@pytest.mark.parametrize("sa,sb,cs,attrs", [
    ((3, 4), (5, 6), None, {}),
    ((3, 4), (3, 6), None, {}),
    ((3, 4), (4, 6), (3, 5), {}),
    ((3, 4), (4, 6), (2, 3, 6), {}),
    ((2, 3, 4), (4, 6), None, {}),
    ((3,), (3, 6), None, {}),
])
def test_gemm_bad_shapes(sa, sb, cs, attrs):
    ins = {"A": rand(sa), "B": rand(sb, seed=1)}
    if cs is not None:
        ins["C"] = rand(cs, seed=2)
    m = node_model("Gemm", ins, ["Y"], attrs=attrs)
    with pytest.raises(ortlite.InvalidArgument, match="Gemm"):
        run_lite(m, ins)


# ---------------------------------------------------------------------------------------
# Conv


def conv_case(xs, ws, attrs, bias=True, seed=0, dtype=F32, const_w=False):
    x = rand(xs, dtype, seed=seed)
    w = rand(ws, dtype, seed=seed + 1)
    ins, consts = {"X": x}, {}
    (consts if const_w else ins)["W"] = w
    order = ["X", "W"]
    if bias:
        (consts if const_w else ins)["B"] = rand((ws[0],), dtype, seed=seed + 2)
        order.append("B")
    return ins, consts, order


CONV_CASES = [
    # 1-D
    ((2, 3, 11), (4, 3, 3), {}),
    ((1, 2, 12), (3, 2, 4), dict(pads=[2, 1], strides=[3])),
    ((1, 2, 15), (2, 2, 3), dict(dilations=[3], pads=[1, 2])),
    ((2, 4, 9), (4, 1, 3), dict(group=4, auto_pad="SAME_UPPER")),
    # 2-D
    ((2, 3, 9, 9), (4, 3, 3, 3), {}),
    ((1, 3, 10, 8), (5, 3, 3, 2), dict(pads=[1, 0, 2, 1], strides=[2, 3])),
    ((1, 2, 11, 11), (3, 2, 3, 3), dict(dilations=[2, 3], pads=[2, 2, 2, 2])),
    ((1, 4, 7, 7), (6, 2, 3, 3), dict(group=2, pads=[1, 1, 1, 1])),
    ((2, 6, 8, 8), (6, 1, 3, 3), dict(group=6, pads=[1, 1, 1, 1])),  # depthwise
    ((1, 4, 8, 8), (8, 1, 3, 3), dict(group=4, strides=[2, 2])),  # depthwise x2
    ((1, 3, 9, 7), (4, 3, 3, 3), dict(auto_pad="SAME_UPPER", strides=[2, 2])),
    ((1, 3, 9, 7), (4, 3, 4, 2), dict(auto_pad="SAME_LOWER", strides=[2, 1])),
    ((1, 3, 9, 7), (4, 3, 3, 3), dict(auto_pad="VALID", strides=[2, 2])),
    ((1, 3, 9, 7), (4, 3, 2, 2), dict(auto_pad="NOTSET")),
    ((2, 8, 6, 6), (5, 8, 1, 1), {}),  # pointwise
    ((1, 8, 6, 6), (5, 8, 1, 1), dict(strides=[2, 2])),
    ((1, 3, 5, 5), (2, 3, 5, 5), {}),  # kernel == input
    ((1, 3, 3, 3), (2, 3, 3, 3), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    # 3-D
    ((1, 2, 5, 6, 7), (3, 2, 3, 3, 3), {}),
    ((1, 2, 6, 5, 7), (4, 2, 2, 3, 2), dict(pads=[1, 0, 1, 0, 1, 1], strides=[2, 1, 2],
                                           dilations=[1, 2, 1])),
    ((2, 4, 4, 4, 4), (4, 2, 3, 3, 3), dict(group=2, auto_pad="SAME_UPPER")),
]


@pytest.mark.parametrize("xs,ws,attrs", CONV_CASES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("const_w", [False, True])
def test_conv_f32(xs, ws, attrs, bias, const_w):
    ins, consts, order = conv_case(xs, ws, attrs, bias=bias, const_w=const_w)
    m = node_model("Conv", ins, ["Y"], attrs=attrs, consts=consts, order=order)
    check(m, ins, **tol(F32, int(np.prod(ws[1:]))))


@pytest.mark.parametrize("xs,ws,attrs", [CONV_CASES[i] for i in (0, 5, 8, 10, 14, 19)])
@pytest.mark.parametrize("const_w", [False, True])
def test_conv_f16(xs, ws, attrs, const_w):
    ins, consts, order = conv_case(xs, ws, attrs, dtype=F16, const_w=const_w)
    m = node_model("Conv", ins, ["Y"], attrs=attrs, consts=consts, order=order)
    check(m, ins, **tol(F16, int(np.prod(ws[1:]))))


@pytest.mark.parametrize("xs,ws,attrs", [CONV_CASES[i] for i in (1, 5, 7, 8, 12, 19)])
@pytest.mark.parametrize("const_w", [False, True])
def test_conv_f64(xs, ws, attrs, const_w):
    """onnxruntime has no double Conv: compared with its float32 result."""
    def make(dt):
        ins, consts, order = conv_case(xs, ws, attrs, dtype=dt, const_w=const_w)
        return node_model("Conv", ins, ["Y"], attrs=attrs, consts=consts, order=order)
    ins, _, _ = conv_case(xs, ws, attrs, dtype=F32, const_w=const_w)
    check_via_f32(make, ins, F64, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset", [1, 11, 22])
def test_conv_opsets(opset):
    ins, consts, order = conv_case((1, 3, 8, 8), (4, 3, 3, 3), {})
    m = node_model("Conv", ins, ["Y"], attrs=dict(pads=[1, 1, 1, 1]), opset=opset, order=order)
    check(m, ins, **tol(F32, 27))


@pytest.mark.parametrize("threads", [1, 4])
@pytest.mark.parametrize("const_w", [False, True])
def test_conv_large_chunked(threads, const_w):
    # Kg = 64 * 9 = 576 rows of im2col over 1600 positions: processed in chunks.
    ins, consts, order = conv_case((2, 64, 40, 40), (32, 64, 3, 3), {}, const_w=const_w)
    m = node_model("Conv", ins, ["Y"], attrs=dict(pads=[1, 1, 1, 1]), consts=consts,
                   order=order)
    check(m, ins, threads=threads, **tol(F32, 576))


@pytest.mark.parametrize("threads", [1, 4])
@pytest.mark.parametrize("attrs", [dict(pads=[2, 2]), dict(strides=[3], dilations=[2], pads=[1, 4])])
def test_conv_1d_long_partial_row_chunks(threads, attrs):
    # 1-D with Kg = 64 * 9 = 576: a chunk of output positions is shorter than the row.
    ins, consts, order = conv_case((1, 64, 3000), (8, 64, 9), attrs, const_w=True)
    m = node_model("Conv", ins, ["Y"], attrs=attrs, consts=consts, order=order)
    check(m, ins, threads=threads, **tol(F32, 576))


@pytest.mark.parametrize("const_w", [False, True])
def test_conv_depthwise_3d_multiplier(const_w):
    attrs = dict(group=3, pads=[1, 0, 1, 1, 1, 0], strides=[1, 2, 1])
    ins, consts, order = conv_case((2, 3, 5, 6, 7), (6, 1, 3, 2, 3), attrs, const_w=const_w)
    m = node_model("Conv", ins, ["Y"], attrs=attrs, consts=consts, order=order)
    check(m, ins, **tol(F32, 18))


@pytest.mark.parametrize("threads", [1, 3])
def test_conv_many_small_tasks(threads):
    ins, consts, order = conv_case((8, 16, 10, 10), (16, 4, 3, 3), {})
    m = node_model("Conv", ins, ["Y"], attrs=dict(group=4, pads=[1, 1, 1, 1]), order=order)
    check(m, ins, threads=threads, **tol(F32, 36))


@pytest.mark.parametrize("xs,ws,attrs,match", [
    ((1, 4, 8, 8), (2, 3, 3, 3), {}, "channels"),
    ((1, 4, 8, 8), (3, 2, 3, 3), dict(group=2), "divisible"),
    ((1, 3, 2, 8), (2, 3, 3, 3), {}, "larger than the padded input"),
    ((1, 3, 8, 8), (2, 3, 3), {}, "rank"),
    ((8, 8), (2, 3), {}, "rank"),
    ((1, 3, 8, 8), (2, 3, 3, 3), dict(strides=[1, 1, 1]), "strides"),
    ((1, 3, 8, 8), (2, 3, 3, 3), dict(kernel_shape=[2, 2]), "kernel_shape"),
])
def test_conv_bad_shapes(xs, ws, attrs, match):
    x, w = rand(xs), rand(ws, seed=1)
    m = node_model("Conv", {"X": x, "W": w}, ["Y"], attrs=attrs)
    with pytest.raises(ortlite.InvalidArgument, match=match):
        run_lite(m, {"X": x, "W": w})


def test_conv_bad_bias():
    x, w, b = rand((1, 3, 8, 8)), rand((2, 3, 3, 3), seed=1), rand((3,), seed=2)
    m = node_model("Conv", {"X": x, "W": w, "B": b}, ["Y"])
    with pytest.raises(ortlite.InvalidArgument, match="B"):
        run_lite(m, {"X": x, "W": w, "B": b})


@pytest.mark.parametrize("attrs,match", [
    (dict(auto_pad="SAME"), "auto_pad"),
    (dict(strides=[1, -1]), "strides"),
    (dict(strides=[0, 1]), "strides"),
    (dict(dilations=[1, 0]), "dilations"),
    (dict(pads=[1, 1, 1]), "pads"),
    (dict(pads=[1, -1, 1, 1]), "pads"),
    (dict(pads=[1, 1], strides=[1, 1]), "pads"),
    (dict(group=0), "group"),
    (dict(kernel_shape=[3, 0]), "kernel_shape"),
])
def test_conv_bad_attributes(attrs, match):
    x, w = rand((1, 2, 8, 8)), rand((2, 2, 3, 3), seed=1)
    m = node_model("Conv", {"X": x, "W": w}, ["Y"], attrs=attrs)
    with pytest.raises(ortlite.InvalidGraph, match=match):
        session(m)


def test_conv_bad_constant_weights():
    x, w = rand((1, 4, 8, 8)), rand((3, 2, 3, 3), seed=1)
    m = node_model("Conv", {"X": x}, ["Y"], attrs=dict(group=2), consts={"W": w})
    with pytest.raises(ortlite.InvalidGraph, match="divisible"):
        session(m)


# ---------------------------------------------------------------------------------------
# Pooling

POOL_CASES = [
    ((2, 3, 11), dict(kernel_shape=[3])),
    ((1, 2, 12), dict(kernel_shape=[4], strides=[3], pads=[1, 2])),
    ((1, 2, 10), dict(kernel_shape=[3], strides=[2], ceil_mode=1)),
    ((2, 3, 9, 9), dict(kernel_shape=[3, 3])),
    ((1, 3, 10, 8), dict(kernel_shape=[3, 2], strides=[2, 3], pads=[1, 0, 2, 1])),
    ((1, 2, 7, 7), dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)),
    ((1, 2, 8, 8), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)),
    ((1, 2, 5, 5), dict(kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)),
    ((1, 2, 9, 7), dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")),
    ((1, 2, 9, 7), dict(kernel_shape=[4, 2], strides=[2, 1], auto_pad="SAME_LOWER")),
    ((1, 2, 9, 7), dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="VALID")),
    ((1, 2, 5, 6, 7), dict(kernel_shape=[2, 3, 2])),
    ((1, 2, 6, 5, 7), dict(kernel_shape=[3, 2, 2], strides=[2, 1, 2], pads=[1, 0, 1, 1, 1, 0],
                           ceil_mode=1)),
]

DILATED_POOL_CASES = [
    ((1, 2, 15), dict(kernel_shape=[3], dilations=[3], pads=[1, 2])),
    ((1, 2, 11, 11), dict(kernel_shape=[3, 3], dilations=[2, 3], pads=[2, 2, 2, 2])),
    ((1, 2, 11, 11), dict(kernel_shape=[2, 3], dilations=[2, 2], strides=[2, 1], ceil_mode=1)),
    ((1, 2, 7, 6, 7), dict(kernel_shape=[2, 2, 2], dilations=[2, 1, 3])),
]


@pytest.mark.parametrize("xs,attrs", POOL_CASES + DILATED_POOL_CASES)
@pytest.mark.parametrize("indices", [False, True])
def test_maxpool_f32(xs, attrs, indices):
    x = rand(xs)
    outs = ["Y", "I"] if indices else ["Y"]
    m = node_model("MaxPool", {"X": x}, outs, attrs=attrs, opset=12,
                   out_dtypes=[F32, np.int64][:len(outs)])
    check(m, {"X": x})


WIDE_POOL_CASES = [
    ((1, 3, 40, 113), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 2, 33, 64), dict(kernel_shape=[2, 2], strides=[2, 2])),
    ((2, 2, 17, 37), dict(kernel_shape=[3, 5], strides=[1, 1], pads=[1, 2, 1, 2])),
    ((1, 2, 9, 50), dict(kernel_shape=[2, 3], strides=[2, 2], pads=[0, 1, 1, 2], ceil_mode=1)),
    ((1, 2, 20, 41), dict(kernel_shape=[4, 4], strides=[3, 2], auto_pad="SAME_UPPER")),
    ((1, 4, 71), dict(kernel_shape=[3], strides=[2], pads=[1, 1])),
    ((1, 2, 12, 30), dict(kernel_shape=[1, 1], strides=[1, 2])),
]


@pytest.mark.parametrize("threads", [1, 3])
def test_pools_over_the_whole_input(threads):
    """A window that is the whole unpadded input (one output a channel, any stride) reduces
    each channel flat: the mean, or the max of the non-NaN values (NaN when all are NaN, as
    in the windowed kernels; a NaN first element included), in 1-D, 2-D and 3-D, against
    numpy; and onnxruntime where it has no NaN in the input."""
    g = np.random.default_rng(41)
    for xs, strides in (((1, 512, 7, 7), [1, 1]), ((2, 300, 7, 7), [7, 7]), ((1, 64, 8, 8), [3, 2]),
                        ((1, 40, 9), [1]), ((1, 24, 3, 4, 5), [1, 1, 1]), ((1, 3, 1, 1), [1, 1])):
        x = g.standard_normal(xs).astype(F32)
        k = list(xs[2:])
        for op in ("MaxPool", "AveragePool"):
            m = node_model(op, {"X": x}, ["Y"], attrs=dict(kernel_shape=k, strides=strides))
            check(m, {"X": x}, threads=threads)
        xn = x.copy().reshape(xs[0] * xs[1], -1)
        xn[0, 0] = np.nan  # a NaN first element
        xn[1, :] = np.nan  # every element NaN
        if xn.shape[1] > 2:
            xn[2, 2] = np.nan
        xn[-1, -1] = np.inf
        xn = xn.reshape(xs)
        m = node_model("MaxPool", {"X": xn}, ["Y"], attrs=dict(kernel_shape=k, strides=strides))
        got = run_lite(m, {"X": xn}, threads)[0].reshape(-1)
        flat = xn.reshape(xs[0] * xs[1], -1)
        want = np.where(np.isnan(flat), -np.inf, flat).max(axis=1)
        want[np.isnan(flat).all(axis=1)] = np.nan
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("xs,attrs", WIDE_POOL_CASES)
@pytest.mark.parametrize("special", [False, True])
@pytest.mark.parametrize("threads", [1, 3])
def test_maxpool_wide_rows(xs, attrs, special, threads):
    """Rows wide enough for the vectorized float path (8 outputs at a time, stride 1 or 2),
    with -inf and large values mixed in when `special`."""
    x = rand(xs)
    if special:
        x.flat[::5] = -np.inf
        x.flat[3::11] = 3e38
        x.flat[7::13] = -3e38
    m = node_model("MaxPool", {"X": x}, ["Y"], attrs=attrs, opset=12)
    check(m, {"X": x}, threads=threads)


@pytest.mark.parametrize("xs,attrs", [POOL_CASES[i] for i in (0, 4, 6, 11, 12)] +
                         DILATED_POOL_CASES[1:2])
def test_maxpool_storage_order(xs, attrs):
    x = rand(xs)
    m = node_model("MaxPool", {"X": x}, ["Y", "I"], attrs=dict(attrs, storage_order=1),
                   out_dtypes=[F32, np.int64])
    check(m, {"X": x})


@pytest.mark.parametrize("dtype", [F64, F16, np.int8, np.uint8])
@pytest.mark.parametrize("xs,attrs", [POOL_CASES[i] for i in (1, 6, 12)] + DILATED_POOL_CASES[1:2])
def test_maxpool_dtypes(dtype, xs, attrs):
    x = rand(xs, dtype)
    m = node_model("MaxPool", {"X": x}, ["Y", "I"], attrs=attrs, opset=12,
                   out_dtypes=[dtype, np.int64])
    check(m, {"X": x})


@pytest.mark.parametrize("xs,ks", [((1, 2, 6), [2]), ((1, 2, 4, 4), [2, 2]),
                                   ((1, 2, 4, 4, 4), [2, 2, 2])])
@pytest.mark.parametrize("storage_order", [0, 1])
def test_maxpool_indices_all_lowest(xs, ks, storage_order):
    """Windows with nothing above the type's lowest value: onnxruntime's index."""
    x = np.zeros(xs, np.uint8)
    x.flat[::7] = 3
    m = node_model("MaxPool", {"X": x}, ["Y", "I"],
                   attrs=dict(kernel_shape=ks, storage_order=storage_order),
                   out_dtypes=[np.uint8, np.int64])
    check(m, {"X": x})


@pytest.mark.parametrize("opset", [1, 8, 10, 11, 12, 22])
def test_maxpool_opsets(opset):
    x = rand((1, 3, 9, 9))
    attrs = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    check(node_model("MaxPool", {"X": x}, ["Y"], attrs=attrs, opset=opset), {"X": x})


@pytest.mark.parametrize("xs,attrs", POOL_CASES)
@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize("opset", [11, 19])
def test_averagepool_f32(xs, attrs, include_pad, opset):
    x = rand(xs)
    m = node_model("AveragePool", {"X": x}, ["Y"], attrs=dict(attrs, count_include_pad=include_pad),
                   opset=opset)
    pads = attrs.get("pads", [])
    if opset >= 19 and include_pad and pads[:len(pads) // 2] != pads[len(pads) // 2:]:
        # onnxruntime 1.23 reads the wrong end pad (pads[1] for axis 0) in its opset-19
        # include-pad divisor; the ONNX reference implementation is right.
        expected = ReferenceEvaluator(m).run(None, {"X": x})
        assert_same(run_lite(m, {"X": x}), expected)
    else:
        check(m, {"X": x})


@pytest.mark.parametrize("xs,attrs", DILATED_POOL_CASES)
@pytest.mark.parametrize("include_pad", [0, 1])
def test_averagepool_dilations_opset19(xs, attrs, include_pad):
    x = rand(xs)
    m = node_model("AveragePool", {"X": x}, ["Y"], attrs=dict(attrs, count_include_pad=include_pad),
                   opset=19)
    check(m, {"X": x})


@pytest.mark.parametrize("opset", [7, 10, 11, 19, 22])
def test_averagepool_opsets(opset):
    x = rand((1, 3, 9, 9))
    attrs = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1)
    check(node_model("AveragePool", {"X": x}, ["Y"], attrs=attrs, opset=opset), {"X": x})


@pytest.mark.parametrize("xs,attrs", [POOL_CASES[i] for i in (1, 6, 12)])
def test_averagepool_f16(xs, attrs):
    x = rand(xs, F16)
    check(node_model("AveragePool", {"X": x}, ["Y"], attrs=attrs), {"X": x}, **tol(F16))


@pytest.mark.parametrize("xs,attrs", [POOL_CASES[i] for i in (1, 6, 12)])
@pytest.mark.parametrize("include_pad", [0, 1])
def test_averagepool_f64(xs, attrs, include_pad):
    a = dict(attrs, count_include_pad=include_pad)
    check_via_f32(lambda dt: node_model("AveragePool", {"X": rand(xs, dt)}, ["Y"], attrs=a),
                  {"X": rand(xs)}, F64, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("xs", [(2, 3, 7), (2, 3, 5, 4), (1, 2, 3, 4, 5), (2, 3, 1, 1)])
@pytest.mark.parametrize("dtype", [F32, F16])
def test_global_pools(op, xs, dtype):
    x = rand(xs, dtype)
    check(node_model(op, {"X": x}, ["Y"]), {"X": x}, **tol(dtype))


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("opset", [1, 22])
def test_global_pools_f64(op, opset):
    x = rand((2, 3, 5, 4), F64)
    y = run_lite(node_model(op, {"X": x}, ["Y"], opset=opset), {"X": x})[0]
    ref = x.mean(axis=(2, 3), keepdims=True) if op == "GlobalAveragePool" else \
        x.max(axis=(2, 3), keepdims=True)
    assert y.dtype == F64
    np.testing.assert_allclose(y, ref, rtol=1e-12)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("dtype", [F32, F64])
def test_global_pools_on_1x1_planes(op, dtype):
    """1x1 planes give their input back, NaN and infinities included."""
    x = rand((3, 1024, 1, 1), dtype)
    x[0, :3, 0, 0] = [np.nan, np.inf, -np.inf]
    for threads in (1, 2):
        y = run_lite(node_model(op, {"X": x}, ["Y"]), {"X": x}, threads)[0]
        assert y.dtype == dtype and y.shape == x.shape
        np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("threads", [1, 4])
def test_pools_large(threads):
    x = rand((4, 32, 56, 56))
    attrs = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    check(node_model("MaxPool", {"X": x}, ["Y"], attrs=attrs), {"X": x}, threads=threads)
    check(node_model("AveragePool", {"X": x}, ["Y"], attrs=attrs), {"X": x}, threads=threads)
    check(node_model("GlobalAveragePool", {"X": x}, ["Y"]), {"X": x}, threads=threads,
          rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("attrs,match", [
    (dict(), "kernel_shape"),
    (dict(kernel_shape=[3, 3], pads=[3, 0, 0, 0]), "pads"),
    (dict(kernel_shape=[3, 3], pads=[1, 1, 1]), "pads"),
    (dict(kernel_shape=[3, 3], strides=[0, 1]), "strides"),
    (dict(kernel_shape=[3, 3], auto_pad="bogus"), "auto_pad"),
    (dict(kernel_shape=[3, 3], strides=[1, 1, 1]), "strides"),
])
def test_pool_bad_attributes(op, attrs, match):
    x = rand((1, 2, 8, 8))
    m = node_model(op, {"X": x}, ["Y"], attrs=attrs)
    with pytest.raises(ortlite.InvalidGraph, match=match):
        session(m)


def test_maxpool_bad_storage_order():
    x = rand((1, 2, 8, 8))
    m = node_model("MaxPool", {"X": x}, ["Y"], attrs=dict(kernel_shape=[2, 2], storage_order=2))
    with pytest.raises(ortlite.InvalidGraph, match="storage_order"):
        session(m)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("xs,attrs,match", [
    ((1, 2, 8, 8), dict(kernel_shape=[3]), "kernel_shape"),
    ((1, 2, 2, 8), dict(kernel_shape=[3, 3]), "larger than the padded input"),
    ((2, 8), dict(kernel_shape=[3]), "rank|N x C"),
])
def test_pool_bad_shapes(op, xs, attrs, match):
    x = rand(xs)
    m = node_model(op, {"X": x}, ["Y"], attrs=attrs)
    with pytest.raises(ortlite.InvalidArgument, match=match):
        run_lite(m, {"X": x})


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool_bad_rank(op):
    x = rand((2, 8))
    with pytest.raises(ortlite.InvalidArgument):
        run_lite(node_model(op, {"X": x}, ["Y"]), {"X": x})


# ---------------------------------------------------------------------------------------
# BatchNormalization


def bn_inputs(xs, dtype=F32, pdtype=None, seed=0):
    pdtype = pdtype or dtype
    c = xs[1]
    return {
        "X": rand(xs, dtype, seed=seed),
        "scale": rand((c,), pdtype, seed=seed + 1),
        "B": rand((c,), pdtype, seed=seed + 2),
        "mean": rand((c,), pdtype, seed=seed + 3),
        "var": rand((c,), pdtype, seed=seed + 4, lo=0.1, hi=2.0),
    }


@pytest.mark.parametrize("opset", [7, 9, 14, 15])
@pytest.mark.parametrize("xs", [(2, 3), (2, 3, 5), (2, 3, 4, 5), (1, 2, 3, 4, 5)])
@pytest.mark.parametrize("const_params", [False, True])
def test_batchnorm(opset, xs, const_params):
    feeds = bn_inputs(xs)
    attrs = dict(epsilon=1e-3)
    if const_params:
        consts = {k: v for k, v in feeds.items() if k != "X"}
        m = node_model("BatchNormalization", {"X": feeds["X"]}, ["Y"], attrs=attrs,
                       opset=opset, consts=consts)
        check(m, {"X": feeds["X"]})
    else:
        m = node_model("BatchNormalization", feeds, ["Y"], attrs=attrs, opset=opset)
        check(m, feeds)


@pytest.mark.parametrize("xs", [(3, 7), (2, 5, 17, 9), (1, 16, 40, 41), (1, 4, 1, 1)], ids=str)
@pytest.mark.parametrize("threads", [1, 2])
def test_batchnorm_float_bits(xs, threads):
    """Float BatchNormalization is x * a + b per channel, a = scale / sqrt(var + eps) and
    b = bias - mean * a, every step rounded to float (the product and the sum separately,
    as onnxruntime computes them): numpy's float32 arithmetic bit for bit, NaN and
    infinities included."""
    feeds = bn_inputs(xs, seed=len(xs))
    feeds["X"].flat[3] = np.nan
    feeds["X"].flat[-1] = -np.inf
    eps = np.float32(1e-3)
    shape = (1, xs[1]) + (1,) * (len(xs) - 2)
    a = (np.float32(1) / np.sqrt(feeds["var"] + eps)) * feeds["scale"]
    b = feeds["B"] - feeds["mean"] * a
    expected = feeds["X"] * a.reshape(shape) + b.reshape(shape)
    m = node_model("BatchNormalization", feeds, ["Y"], attrs=dict(epsilon=1e-3), opset=15)
    (y,) = run_lite(m, feeds, threads)
    assert y.dtype == F32
    np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize("dtype", [F64, F16])
@pytest.mark.parametrize("opset", [9, 15])
def test_batchnorm_dtypes(dtype, opset):
    feeds = bn_inputs((2, 3, 4, 5), dtype)
    check(node_model("BatchNormalization", feeds, ["Y"], opset=opset), feeds, **tol(dtype))


def test_batchnorm_opset15_mixed_param_types():
    feeds = bn_inputs((2, 3, 4, 5), F16, pdtype=F32)
    check(node_model("BatchNormalization", feeds, ["Y"], opset=15), feeds, **tol(F16))


def test_batchnorm_opset7_per_activation():
    x = rand((2, 3, 4))
    feeds = {"X": x, "scale": rand((3, 4), seed=1), "B": rand((3, 4), seed=2),
             "mean": rand((3, 4), seed=3), "var": rand((3, 4), seed=4, lo=0.1, hi=2.0)}
    check(node_model("BatchNormalization", feeds, ["Y"], attrs=dict(spatial=0), opset=7), feeds)


def test_batchnorm_training_outputs_before_opset14_not_implemented():
    """The training outputs of opsets 7-13 (mean, var, saved_mean, saved_var) are refused;
    training_mode = 1 of opset 14+ runs (tests/ops/test_ops_training_preview.py)."""
    feeds = bn_inputs((2, 3, 4))
    m = node_model("BatchNormalization", feeds, ["Y", "m", "v"], opset=9)
    with pytest.raises(ortlite.NotImplemented, match="training"):
        session(m)


def test_batchnorm_bad_param_shape():
    feeds = bn_inputs((2, 3, 4))
    feeds["mean"] = rand((4,))
    m = node_model("BatchNormalization", feeds, ["Y"], opset=15)
    with pytest.raises(ortlite.InvalidArgument, match="input_mean"):
        run_lite(m, feeds)


# ---------------------------------------------------------------------------------------
# LayerNormalization / InstanceNormalization


@pytest.mark.parametrize("xs,axis", [((4, 8), -1), ((2, 3, 16), -1), ((2, 3, 16), 1),
                                     ((2, 3, 4, 5), -2), ((2, 3, 4, 5), 0), ((5,), 0)])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("stats", [False, True])
def test_layernorm(xs, axis, with_bias, stats):
    norm = xs[axis:]
    feeds = {"X": rand(xs, lo=-3, hi=5), "scale": rand(norm, seed=1)}
    if with_bias:
        feeds["B"] = rand(norm, seed=2)
    outs = ["Y", "Mean", "InvStdDev"] if stats else ["Y"]
    m = node_model("LayerNormalization", feeds, outs, attrs=dict(axis=axis, epsilon=1e-4),
                   out_dtypes=[F32] * len(outs))
    check(m, feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [F64, F16])
def test_layernorm_dtypes(dtype):
    feeds = {"X": rand((3, 4, 32), dtype), "scale": rand((32,), dtype, seed=1),
             "B": rand((32,), dtype, seed=2)}
    m = node_model("LayerNormalization", feeds, ["Y", "Mean", "InvStdDev"],
                   out_dtypes=[dtype, F32, F32])
    check(m, feeds, **(dict(rtol=1e-5, atol=1e-6) if dtype == F64 else tol(F16)))


def test_layernorm_scale_broadcast():
    feeds = {"X": rand((2, 3, 8)), "scale": rand((1, 8), seed=1), "B": rand((1, 8), seed=2)}
    check(node_model("LayerNormalization", feeds, ["Y"], attrs=dict(axis=-1)), feeds,
          rtol=1e-4, atol=1e-5)


def test_layernorm_scale_broadcast_beyond_ort():
    """Scale broadcast inside the normalized dims (onnxruntime refuses it): numpy."""
    x, s = rand((2, 3, 4)), rand((3, 1), seed=1)
    y = run_lite(node_model("LayerNormalization", {"X": x, "scale": s}, ["Y"], attrs=dict(axis=1)),
                 {"X": x, "scale": s})[0]
    mu = x.mean(axis=(1, 2), keepdims=True)
    var = x.var(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(y, (x - mu) / np.sqrt(var + 1e-5) * s, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("axis", [3, -4])
def test_layernorm_bad_axis(axis):
    feeds = {"X": rand((2, 3, 4)), "scale": rand((4,), seed=1)}
    m = node_model("LayerNormalization", feeds, ["Y"], attrs=dict(axis=axis))
    with pytest.raises(ortlite.InvalidArgument, match="axis"):
        run_lite(m, feeds)


def test_layernorm_empty_normalized_dims():
    feeds = {"X": np.zeros((3, 0), F32), "scale": np.zeros((0,), F32)}
    m = node_model("LayerNormalization", feeds, ["Y"])
    with pytest.raises(ortlite.InvalidArgument, match="empty"):
        run_lite(m, feeds)
    feeds = {"X": np.zeros((0, 4), F32), "scale": rand((4,))}
    check(node_model("LayerNormalization", feeds, ["Y"]), feeds)


def test_layernorm_bad_scale():
    feeds = {"X": rand((2, 3, 4)), "scale": rand((5,), seed=1)}
    m = node_model("LayerNormalization", feeds, ["Y"])
    with pytest.raises(ortlite.InvalidArgument, match="Scale"):
        run_lite(m, feeds)


@pytest.mark.parametrize("xs", [(2, 3, 7), (2, 3, 5, 4), (1, 2, 3, 4, 5)])
@pytest.mark.parametrize("dtype", [F32, F16])
@pytest.mark.parametrize("opset", [6, 22])
def test_instancenorm(xs, dtype, opset):
    feeds = {"X": rand(xs, dtype, lo=-2, hi=4), "scale": rand((xs[1],), dtype, seed=1),
             "B": rand((xs[1],), dtype, seed=2)}
    m = node_model("InstanceNormalization", feeds, ["Y"], attrs=dict(epsilon=1e-3), opset=opset)
    check(m, feeds, **(tol(F16) if dtype == F16 else dict(rtol=1e-4, atol=1e-5)))


def test_instancenorm_f64():
    x, s, b = rand((2, 3, 5, 4), F64), rand((3,), F64, seed=1), rand((3,), F64, seed=2)
    y = run_lite(node_model("InstanceNormalization", {"X": x, "scale": s, "B": b}, ["Y"]),
                 {"X": x, "scale": s, "B": b})[0]
    mu = x.mean(axis=(2, 3), keepdims=True)
    var = x.var(axis=(2, 3), keepdims=True)
    ref = (x - mu) / np.sqrt(var + 1e-5) * s[None, :, None, None] + b[None, :, None, None]
    np.testing.assert_allclose(y, ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("threads", [1, 3])
def test_norms_short_rows_against_float64(threads):
    """Rows of at most 64 floats go through one AVX-512 routine (moments in double, the last
    vector masked; instance normalization's channel stepped from the first row of each
    thread's range): every length around the 16-wide vectors, rows with a large offset and
    a small spread, constant rows, against numpy in float64; LayerNormalization's Mean and
    InvStdDev outputs as well."""
    g = np.random.default_rng(31)
    for n in (1, 2, 3, 7, 15, 16, 17, 24, 31, 32, 33, 48, 63, 64, 65):
        x = g.standard_normal((200, 7, n)).astype(F32)  # split over threads from n = 12
        x[0, 0] += 1e4
        x[1, 2] = 2.5  # a constant row
        s, b = g.standard_normal(7).astype(F32), g.standard_normal(7).astype(F32)
        m = node_model("InstanceNormalization", {"X": x, "scale": s, "B": b}, ["Y"],
                       attrs=dict(epsilon=1e-5))
        y = run_lite(m, {"X": x, "scale": s, "B": b}, threads)[0]
        xd = x.astype(F64)
        mu, var = xd.mean(-1, keepdims=True), xd.var(-1, keepdims=True)
        ref = (xd - mu) / np.sqrt(var + 1e-5) * s[:, None] + b[:, None]
        np.testing.assert_allclose(y, ref, rtol=2e-5, atol=2e-5, err_msg=f"instance n={n}")
        ls, lb = g.standard_normal(n).astype(F32), g.standard_normal(n).astype(F32)
        for bias in (True, False):
            feeds = {"X": x, "scale": ls, **({"B": lb} if bias else {})}
            m = node_model("LayerNormalization", feeds, ["Y", "Mean", "InvStdDev"],
                           attrs=dict(axis=-1, epsilon=1e-5), out_dtypes=[F32] * 3)
            y, mean, inv = run_lite(m, feeds, threads)
            ref = (xd - mu) / np.sqrt(var + 1e-5) * ls + (lb if bias else 0)
            np.testing.assert_allclose(y, ref, rtol=2e-5, atol=2e-5, err_msg=f"layer n={n}")
            np.testing.assert_allclose(mean, mu, rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(inv, 1 / np.sqrt(var + 1e-5), rtol=1e-5)


def test_instancenorm_bad_scale():
    feeds = {"X": rand((2, 3, 4)), "scale": rand((2,), seed=1), "B": rand((3,), seed=2)}
    with pytest.raises(ortlite.InvalidArgument, match="scale"):
        run_lite(node_model("InstanceNormalization", feeds, ["Y"]), feeds)


# ---------------------------------------------------------------------------------------
# Softmax / LogSoftmax


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset", [1, 11, 13, 23])
@pytest.mark.parametrize("xs,axis", [((4, 10), None), ((3, 4, 5), None), ((3, 4, 5), 0),
                                     ((3, 4, 5), 1), ((3, 4, 5), 2), ((2, 3, 4, 5), -1),
                                     ((2, 3, 4, 5), -3), ((7,), 0), ((2, 0, 3), 1)])
def test_softmax_axes(op, opset, xs, axis):
    if opset == 1 and axis is not None and axis < 0:
        pytest.skip("negative axis from opset 11")
    x = rand(xs, lo=-5, hi=5)
    attrs = {} if axis is None else dict(axis=axis)
    check(node_model(op, {"X": x}, ["Y"], attrs=attrs, opset=opset), {"X": x},
          rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("dtype", [F64, F16])
@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_dtypes(op, dtype, opset):
    x = rand((3, 4, 20), dtype, lo=-4, hi=4)
    check(node_model(op, {"X": x}, ["Y"], attrs=dict(axis=1), opset=opset), {"X": x},
          **(dict(rtol=1e-12, atol=1e-14) if dtype == F64 else tol(F16)))


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_extreme_values(op):
    x = np.array([[1000.0, 0.0, -1000.0, 5.0], [-80.0, -90.0, -100.0, -110.0],
                  [88.0, 88.0, 87.0, -np.inf], [3.0, 3.0, 3.0, 3.0],
                  [1.0, np.nan, 2.0, 3.0]], F32)
    check(node_model(op, {"X": x}, ["Y"]), {"X": x}, rtol=1e-5, atol=1e-6)
    # Rows of 37: two full 16-wide vectors and a masked tail, with -inf (exactly 0 after
    # Softmax), a row of -inf only, NaN, +inf and a spread wider than exp's range.
    w = np.random.default_rng(3).standard_normal((6, 37)).astype(F32)
    w[0, ::3] = -np.inf
    w[1, :] = -np.inf
    w[2, 20] = np.nan
    w[3, 35] = np.inf
    w[4, :] = np.linspace(-300, 100, 37)
    w[5, 17:] = -1e30
    check(node_model(op, {"X": w}, ["Y"]), {"X": w}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_rows_in_registers(op):
    """Rows of up to 256 floats are held in registers (one kernel per vector count, the last
    vector masked): every length around the 16-wide vectors up to 300, with NaN, +-inf, a row
    of -inf only and values whose exps underflow, against onnxruntime; lengths above 256 take
    the three-pass loop."""
    g = np.random.default_rng(8)
    for n in (1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 197, 240, 255, 256, 257,
              300):
        x = (g.standard_normal((8, n)) * g.choice([0.1, 3.0, 30.0, 300.0], (8, 1))).astype(F32)
        x[1, 0] = np.nan
        if n > 3:
            x[2, n // 2] = np.inf
            x[3, :] = -np.inf
            x[4, -1] = -np.inf
            x[5, n // 3] = np.nan
        check(node_model(op, {"X": x}, ["Y"]), {"X": x}, rtol=1e-5, atol=1e-6)


# Softmax / LogSoftmax over a middle axis, run per instruction set in a fresh process
# (ORTLITE_FAST_ISA): [outer, dim, inner] blocks of every width around the vector sizes, at 1
# and 3 threads (ranges of 64 columns), with NaN, +-inf, a column of -inf only and a spread
# wider than exp's range in some columns.
_SOFTMAX_COLUMNS_SCRIPT = r"""
import sys
import numpy as np
import ortlite
from onnx import helper

data = dict(np.load(sys.argv[1]))
out = {}
for key, x in data.items():
    op = key.split("_")[0]
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], axis=1)], "g",
                          [helper.make_tensor_value_info("x", 1, None)],
                          [helper.make_tensor_value_info("y", 1, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    for threads in (1, 3):
        so = ortlite.SessionOptions()
        so.intra_op_num_threads = threads
        s = ortlite.InferenceSession(m.SerializeToString(), so)
        out[f"{key}_t{threads}"] = s.run(None, {"x": x})[0]
np.savez(sys.argv[2], **out)
"""


def _softmax_axis1_64(x, log):
    m = np.max(x, axis=1, keepdims=True)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(x - m)
        s = np.sum(e, axis=1, keepdims=True)
        return (x - m - np.log(s)) if log else e / s


@pytest.mark.parametrize("isa", ["sse2", "avx2", "avx512"])
def test_softmax_columns_each_isa(isa, tmp_path):
    g = np.random.default_rng(11)
    feeds = {}
    shapes = [(2, 5, w) for w in (2, 3, 7, 8, 9, 12, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64,
                                  65, 80, 127, 128, 129, 140, 197)]
    shapes += [(1, 1, 40), (3, 2, 10), (1, 768, 12), (2, 33, 200), (1, 4, 16 * 75),
               (5, 17, 6)]
    for shape in shapes:
        x = (g.standard_normal(shape) * g.choice([0.1, 3.0, 30.0], (1, 1, shape[2]))).astype(F32)
        w = shape[2]
        if w > 4:
            x[0, :, w - 1] = -np.inf
            x[0, 0, w // 2] = np.nan
            x[-1, -1, w // 3] = np.inf
            x[-1, :, 1] = np.linspace(-300, 100, shape[1])
            x[0, shape[1] // 2, 0] = -np.inf
        for op in ("Softmax", "LogSoftmax"):
            feeds[f"{op}_{'x'.join(map(str, shape))}"] = x
    np.savez(tmp_path / "in.npz", **feeds)
    r = subprocess.run([sys.executable, "-c", _SOFTMAX_COLUMNS_SCRIPT, str(tmp_path / "in.npz"),
                        str(tmp_path / "out.npz")], env=dict(os.environ, ORTLITE_FAST_ISA=isa),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = np.load(tmp_path / "out.npz")
    for key, x in feeds.items():
        log = key.startswith("Log")
        ref = _softmax_axis1_64(x.astype(F64), log)
        for threads in (1, 3):
            got = out[f"{key}_t{threads}"]
            assert got.shape == x.shape
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=2e-6 if log else 1e-7,
                                       err_msg=f"{isa} {key} threads={threads}")


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("threads", [1, 3])
def test_softmax_short_rows_and_single_values(op, threads):
    """Rows of up to 16 go 16 rows at a time through a transposed block (one register a
    column across the rows; a partial last block), and an axis of one value is 1 (0 for
    LogSoftmax) or NaN: every length, NaN, +-inf and a row of -inf only, against numpy in
    float64."""
    log = op == "LogSoftmax"
    g = np.random.default_rng(12)

    def ref(x, axis):
        xd = x.astype(F64)
        with np.errstate(invalid="ignore", over="ignore"):
            m = np.max(xd, axis=axis, keepdims=True)
            e = np.exp(xd - m)
            s = np.sum(e, axis=axis, keepdims=True)
            return (xd - m - np.log(s)) if log else e / s

    for n in range(1, 18):
        x = (g.standard_normal((301, n)) * 5).astype(F32)
        x[3, 0] = np.nan
        x[17, n - 1] = np.inf
        x[40, :] = -np.inf
        x[41, n // 2] = -np.inf
        y = run_lite(node_model(op, {"X": x}, ["Y"], attrs=dict(axis=-1), opset=13), {"X": x},
                     threads)[0]
        np.testing.assert_allclose(y, ref(x, -1), rtol=1e-5, atol=2e-6 if log else 1e-7,
                                   err_msg=f"n={n}")
    x = g.standard_normal((4, 7, 1)).astype(F32)
    x[0, 0, 0], x[1, 1, 0], x[2, 2, 0] = np.nan, np.inf, -np.inf
    for axis in (-1, 2):
        y = run_lite(node_model(op, {"X": x}, ["Y"], attrs=dict(axis=axis), opset=13), {"X": x},
                     threads)[0]
        np.testing.assert_array_equal(y, ref(x, axis).astype(F32))


@pytest.mark.parametrize("threads", [1, 4])
def test_softmax_large(threads):
    x = rand((8, 12, 64, 64), lo=-8, hi=8)
    check(node_model("Softmax", {"X": x}, ["Y"]), {"X": x}, threads=threads, rtol=1e-5,
          atol=1e-7)
    check(node_model("Softmax", {"X": x}, ["Y"], attrs=dict(axis=1)), {"X": x}, threads=threads,
          rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [3, -4])
def test_softmax_bad_axis(op, axis):
    x = rand((2, 3, 4))
    with pytest.raises(ortlite.InvalidArgument, match="axis"):
        run_lite(node_model(op, {"X": x}, ["Y"], attrs=dict(axis=axis)), {"X": x})


# ---------------------------------------------------------------------------------------
# Dropout


@pytest.mark.parametrize("opset,mask_dtype", [(7, F32), (10, np.bool_), (12, np.bool_),
                                              (13, np.bool_), (22, np.bool_)])
@pytest.mark.parametrize("with_mask", [False, True])
def test_dropout_inference(opset, mask_dtype, with_mask):
    x = rand((3, 4, 5))
    outs = ["Y", "M"] if with_mask else ["Y"]
    attrs = dict(ratio=0.3) if opset < 12 else {}
    m = node_model("Dropout", {"X": x}, outs, attrs=attrs, opset=opset,
                   out_dtypes=[F32, mask_dtype][:len(outs)])
    out = check(m, {"X": x})
    np.testing.assert_array_equal(out[0], x)


@pytest.mark.parametrize("dtype", [F64, F16])
def test_dropout_dtypes(dtype):
    x = rand((3, 4), dtype)
    m = node_model("Dropout", {"X": x}, ["Y", "M"], opset=13, out_dtypes=[dtype, np.bool_])
    check(m, {"X": x})


@pytest.mark.parametrize("training", [False, True])
def test_dropout_ratio_input_inference(training):
    x = rand((3, 4))
    feeds = {"X": x, "r": np.array(0.0 if training else 0.7, F32), "t": np.array(training)}
    m = node_model("Dropout", feeds, ["Y", "M"], opset=13, out_dtypes=[F32, np.bool_])
    check(m, feeds)


def test_dropout_training_mode():
    x = rand((200, 100), lo=1, hi=2)
    feeds = {"X": x, "r": np.array(0.25, F32), "t": np.array(True)}
    m = node_model("Dropout", feeds, ["Y", "M"], attrs=dict(seed=7), opset=13,
                   out_dtypes=[F32, np.bool_])
    y, mask = run_lite(m, feeds)
    assert mask.dtype == np.bool_ and mask.shape == x.shape
    np.testing.assert_allclose(y, np.where(mask, x / 0.75, 0), rtol=1e-6)
    assert 0.70 < mask.mean() < 0.80
    # The seed makes a fresh session repeat the same mask.
    y2, mask2 = run_lite(m, feeds)
    np.testing.assert_array_equal(mask, mask2)
    feeds["r"] = np.array(1.5, F32)
    with pytest.raises(ortlite.InvalidArgument, match="ratio"):
        run_lite(m, feeds)


# ---------------------------------------------------------------------------------------
# Misc: every registered opset range resolves


@pytest.mark.parametrize("op,opsets", [
    ("MatMul", range(1, 24)), ("Gemm", range(7, 24)), ("Conv", range(1, 24)),
    ("MaxPool", range(1, 24)), ("AveragePool", range(1, 24)),
    ("GlobalAveragePool", range(1, 24)), ("GlobalMaxPool", range(1, 24)),
    ("BatchNormalization", range(7, 24)), ("InstanceNormalization", range(6, 24)),
    ("LayerNormalization", range(17, 24)), ("Softmax", range(1, 24)),
    ("LogSoftmax", range(1, 24)), ("Dropout", range(7, 24)),
])
def test_every_opset_loads(op, opsets):
    x = rand((1, 2, 4, 4))
    ins, consts, outs, attrs = {"X": x}, {}, ["Y"], {}
    if op in ("MatMul", "Gemm"):
        ins = {"X": rand((3, 4))}
        consts = {"W": rand((4, 2), seed=1), "C": rand((2,), seed=2)} if op == "Gemm" else \
            {"W": rand((4, 2), seed=1)}
    elif op == "Conv":
        consts = {"W": rand((3, 2, 3, 3), seed=1)}
    elif op in ("MaxPool", "AveragePool"):
        attrs = dict(kernel_shape=[2, 2])
    elif op == "BatchNormalization":
        consts = {k: v for k, v in bn_inputs((1, 2, 4, 4)).items() if k != "X"}
    elif op == "InstanceNormalization":
        consts = {"s": rand((2,), seed=1), "b": rand((2,), seed=2)}
    elif op == "LayerNormalization":
        consts = {"s": rand((4,), seed=1)}
    elif op in ("Softmax", "LogSoftmax"):
        ins = {"X": rand((3, 5))}  # 2-D: the same result before and after opset 13
    # onnxruntime lacks some old versions (AveragePool 1-6): one reference at opset 17.
    expected = run_ort(node_model(op, ins, outs, attrs=attrs, opset=17, consts=consts), ins)
    for opset in opsets:
        m = node_model(op, ins, outs, attrs=attrs, opset=opset, consts=consts)
        assert_same(run_lite(m, ins), expected, rtol=1e-4, atol=1e-5)


def test_concurrent_runs_share_kernels():
    """One session run from several threads at once: kernels are const and their scratch
    (packing buffers, im2col) is per thread."""
    import threading
    x = rand((2, 8, 20, 20))
    w = rand((16, 8, 3, 3), seed=1)
    wm = rand((16 * 20 * 20, 40), seed=2)
    b = helper
    nodes = [b.make_node("Conv", ["X", "W"], ["c"], pads=[1, 1, 1, 1]),
             b.make_node("Flatten", ["c"], ["f"]),
             b.make_node("MatMul", ["f", "WM"], ["m"]),
             b.make_node("Softmax", ["m"], ["Y"])]
    graph = b.make_graph(nodes, "g", [b.make_tensor_value_info("X", 1, list(x.shape))],
                         [b.make_tensor_value_info("Y", 1, None)],
                         initializer=[numpy_helper.from_array(w, "W"),
                                      numpy_helper.from_array(wm, "WM")])
    model = b.make_model(graph, opset_imports=[b.make_opsetid("", 17)])
    model.ir_version = 8
    sess = session(model, threads=2)
    feeds = [{"X": rand((2, 8, 20, 20), seed=s)} for s in range(4)]
    expected = [run_ort(model, f)[0] for f in feeds]
    errors = []

    def worker(i):
        try:
            for _ in range(5):
                y = sess.run(None, feeds[i])[0]
                np.testing.assert_allclose(y, expected[i], rtol=1e-4, atol=1e-6)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


# ---------------------------------------------------------------------------------------
# bfloat16 (computed through float): numpy has no bfloat16, so the model casts its float
# inputs to bfloat16 and the result back; the reference is onnxruntime's float32 result
# on the same bfloat16-rounded inputs.


def to_bf16_values(a):
    """float32 array rounded to the nearest bfloat16 (ties to even), kept as float32."""
    u = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32)


BF16_CASES = [
    ("MatMul", {"A": (3, 5, 8), "B": (8, 6)}, {}),
    ("Gemm", {"A": (5, 8), "B": (6, 8), "C": (6,)}, dict(transB=1, alpha=0.5, beta=2.0)),
    ("Conv", {"X": (1, 4, 7, 7), "W": (6, 2, 3, 3), "B": (6,)}, dict(group=2, pads=[1, 1, 1, 1])),
    ("Conv", {"X": (1, 4, 7, 7), "W": (4, 1, 3, 3)}, dict(group=4, strides=[2, 2])),
    ("MaxPool", {"X": (1, 3, 7, 7)}, dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("AveragePool", {"X": (1, 3, 7, 7)}, dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    ("GlobalAveragePool", {"X": (2, 3, 4, 5)}, {}),
    ("GlobalMaxPool", {"X": (2, 3, 4, 5)}, {}),
    ("BatchNormalization", {"X": (2, 3, 4), "s": (3,), "b": (3,), "m": (3,), "v": (3,)}, {}),
    ("LayerNormalization", {"X": (3, 16), "s": (16,), "b": (16,)}, {}),
    ("InstanceNormalization", {"X": (2, 3, 6), "s": (3,), "b": (3,)}, {}),
    ("Softmax", {"X": (3, 4, 5)}, dict(axis=1)),
    ("LogSoftmax", {"X": (3, 4, 5)}, {}),
]


@pytest.mark.parametrize("op,shapes,attrs", BF16_CASES)
def test_bfloat16_via_cast(op, shapes, attrs):
    feeds = {}
    for i, (name, shape) in enumerate(shapes.items()):
        lo = 0.2 if name == "v" else -1.0
        feeds[name] = to_bf16_values(rand(shape, seed=i, lo=lo))
    nodes = [helper.make_node("Cast", [n], [n + "_bf"], to=TensorProto.BFLOAT16) for n in feeds]
    nodes.append(helper.make_node(op, [n + "_bf" for n in feeds], ["y_bf"], **attrs))
    nodes.append(helper.make_node("Cast", ["y_bf"], ["Y"], to=TensorProto.FLOAT))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(a.shape))
                     for n, a in feeds.items()],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    model.ir_version = 10
    actual = run_lite(model, feeds)[0]
    expected = run_ort(node_model(op, feeds, ["Y"], attrs=attrs, opset=22), feeds)[0]
    np.testing.assert_allclose(actual, to_bf16_values(expected), rtol=1e-2, atol=1e-2)


# ---------------------------------------------------------------------------------------
# Col2Im


@pytest.mark.parametrize("attrs", [
    {},
    dict(strides=[2, 1], pads=[1, 0, 0, 1], dilations=[1, 2]),
    dict(strides=[1, 2], pads=[0, 1, 1, 1]),
])
def test_col2im_matches_onnxruntime(attrs):
    image, block = [5, 6], [2, 3]
    s = attrs.get("strides", [1, 1])
    p = attrs.get("pads", [0, 0, 0, 0])
    d = attrs.get("dilations", [1, 1])
    L = 1
    for i in range(2):
        L *= (image[i] + p[i] + p[i + 2] - (d[i] * (block[i] - 1) + 1)) // s[i] + 1
    x = rng(8).standard_normal((2, 3 * 6, L)).astype(F32)
    feeds = {"x": x, "image": np.array(image, np.int64), "block": np.array(block, np.int64)}
    check_against_ort(helpers.node_model("Col2Im", feeds, ["y"], attrs=attrs, opset=18), feeds,
                      rtol=1e-5, atol=1e-5)


def test_col2im_3d_and_integer_types_match_reference():
    x = rng(9).integers(-4, 5, size=(1, 2 * 8, 12)).astype(np.int32)
    feeds = {"x": x, "image": np.array([3, 4, 3], np.int64),
             "block": np.array([2, 2, 2], np.int64)}
    check_against_reference(helpers.node_model("Col2Im", feeds, ["y"], opset=18), feeds)
    feeds["x"] = x.astype(F64)
    check_against_reference(helpers.node_model("Col2Im", feeds, ["y"], opset=18), feeds)


# 2-D Col2Im adds each kernel offset's values along image rows; the sums must equal the
# reference's exactly for integers and to rounding for floats: strides 1-3, pads that
# drop whole rows and columns, dilations, non-square blocks and images.
COL2IM_2D = [([5, 7], [2, 3], {}), ([9, 9], [3, 3], dict(strides=[2, 2], pads=[1, 1, 1, 1])),
             ([8, 10], [3, 2], dict(dilations=[2, 3], pads=[2, 0, 1, 3])),
             ([6, 6], [1, 1], dict(strides=[3, 2])), ([7, 5], [4, 4], dict(pads=[3, 3, 3, 3])),
             ([1, 13], [1, 5], dict(strides=[1, 3], pads=[0, 4, 0, 2]))]


def _col2im_blocks(image, block, attrs):
    s = attrs.get("strides", [1, 1])
    p = attrs.get("pads", [0, 0, 0, 0])
    d = attrs.get("dilations", [1, 1])
    return int(np.prod([(image[i] + p[i] + p[i + 2] - d[i] * (block[i] - 1) - 1) // s[i] + 1
                        for i in range(2)]))


@pytest.mark.parametrize("image,block,attrs", COL2IM_2D)
@pytest.mark.parametrize("dtype", [F32, np.int32, np.float16])
def test_col2im_2d_matches_reference(image, block, attrs, dtype):
    L = _col2im_blocks(image, block, attrs)
    x = rng(L).integers(-50, 50, size=(2, 3 * block[0] * block[1], L)).astype(dtype)
    if dtype == F32:
        x = x * np.float32(0.37)
    feeds = {"x": x, "image": np.array(image, np.int64), "block": np.array(block, np.int64)}
    m = helpers.node_model("Col2Im", feeds, ["y"], attrs=attrs, opset=18)
    check_against_reference(m, feeds, rtol=1e-6, atol=1e-5)
    for threads in (1, 2):
        np.testing.assert_array_equal(run_lite(m, feeds, threads=threads)[0], run_lite(m, feeds)[0])


def test_col2im_errors():
    feeds = {"x": np.zeros((1, 4, 5), F32), "image": np.array([3, 3], np.int64),
             "block": np.array([2, 2], np.int64)}
    with pytest.raises(ortlite.InvalidArgument, match=r"\[N, C \* 4, 4\]"):
        run_ortlite(helpers.node_model("Col2Im", feeds, ["y"], opset=18), feeds)
    feeds["block"] = np.array([4, 2], np.int64)
    with pytest.raises(ortlite.InvalidArgument, match="does not fit"):
        run_ortlite(helpers.node_model("Col2Im", feeds, ["y"], opset=18), feeds)
    feeds["block"] = np.array([2], np.int64)
    with pytest.raises(ortlite.InvalidArgument, match="same number"):
        run_ortlite(helpers.node_model("Col2Im", feeds, ["y"], opset=18), feeds)
    feeds["block"] = np.array([2, 0], np.int64)
    with pytest.raises(ortlite.InvalidArgument, match=r"\[1, 2\^31\]"):
        run_ortlite(helpers.node_model("Col2Im", feeds, ["y"], opset=18), feeds)
    feeds["block"] = np.array([2, 2], np.int64)
    with pytest.raises(ortlite.InvalidArgument, match="strides"):
        run_ortlite(helpers.node_model("Col2Im", feeds, ["y"], attrs=dict(strides=[1, 1, 1]),
                                       opset=18), feeds)


# ---------------------------------------------------------------------------------------
# MaxUnpool


def maxpool_with_indices(x, kernel, strides, opset=12):
    m = helpers.node_model("MaxPool", {"x": x}, ["y", "i"],
                           attrs=dict(kernel_shape=kernel, strides=strides),
                           opset=opset, out_dtypes=[x.dtype, np.int64])
    return run_ort(m, {"x": x})


@pytest.mark.parametrize("opset", [9, 11, 22])
def test_maxunpool_inverts_maxpool_like_onnxruntime(opset):
    x = rng(10).standard_normal((2, 3, 6, 8)).astype(F32)
    y, i = maxpool_with_indices(x, [2, 2], [2, 2])
    m = helpers.node_model("MaxUnpool", {"y": y, "i": i}, ["z"],
                           attrs=dict(kernel_shape=[2, 2], strides=[2, 2]), opset=opset)
    if opset <= 11:
        check_against_ort(m, {"y": y, "i": i})
    else:
        check_against_reference(m, {"y": y, "i": i})


def test_maxunpool_output_shape_pads_at_the_end_like_the_reference():
    x = rng(11).standard_normal((1, 2, 4, 4)).astype(F32)
    y, i = maxpool_with_indices(x, [2, 2], [2, 2])
    shape = np.array([1, 2, 5, 6], np.int64)
    m = helpers.node_model("MaxUnpool", {"y": y, "i": i, "s": shape}, ["z"],
                           attrs=dict(kernel_shape=[2, 2], strides=[2, 2]), opset=11)
    (z,) = check_against_reference(m, {"y": y, "i": i, "s": shape})
    assert z.shape == (1, 2, 5, 6)


def test_maxunpool_double_and_1d_match_reference():
    y = rng(12).standard_normal((1, 2, 3)).astype(F64)
    i = np.array([[[0, 3, 5], [6, 8, 11]]], np.int64)
    m = helpers.node_model("MaxUnpool", {"y": y, "i": i}, ["z"],
                           attrs=dict(kernel_shape=[2], strides=[2]), opset=11)
    check_against_reference(m, {"y": y, "i": i})


def test_maxunpool_errors():
    y = np.ones((1, 1, 2, 2), F32)
    attrs = dict(kernel_shape=[2, 2], strides=[2, 2])
    i = np.array([[[[0, 1], [2, 16]]]], np.int64)
    with pytest.raises(ortlite.InvalidArgument, match="index 16 .* out of range"):
        run_ortlite(helpers.node_model("MaxUnpool", {"y": y, "i": i}, ["z"], attrs=attrs,
                                       opset=11), {"y": y, "i": i})
    i = np.zeros((1, 1, 2, 2), np.int64)
    s = np.array([1, 1, 3, 4], np.int64)
    with pytest.raises(ortlite.InvalidArgument, match="output_shape"):
        run_ortlite(helpers.node_model("MaxUnpool", {"y": y, "i": i, "s": s}, ["z"], attrs=attrs,
                                       opset=11), {"y": y, "i": i, "s": s})
    i32 = np.zeros((1, 1, 2, 2), np.int32)
    with pytest.raises(ortlite.InvalidArgument, match="'I' must be int64"):
        run_ortlite(helpers.node_model("MaxUnpool", {"y": y, "i": i32}, ["z"], attrs=attrs,
                                       opset=11), {"y": y, "i": i32})
    with pytest.raises(ortlite.InvalidArgument, match="rank 3"):
        run_ortlite(helpers.node_model("MaxUnpool", {"y": y, "i": i}, ["z"],
                                       attrs=dict(kernel_shape=[2]), opset=11), {"y": y, "i": i})
    m = helpers.node_model("MaxUnpool", {"y": y, "i": i}, ["z"], attrs=dict(strides=[2, 2]),
                           opset=11)
    with pytest.raises(ortlite.InvalidGraph, match="kernel_shape"):
        run_ortlite(m, {"y": y, "i": i})


# ---------------------------------------------------------------------------------------
# RoiAlign (onnxruntime runs opsets 10 and 16; opset 22 against the reference)


def roi_feeds(dtype=F32, seed=13):
    r = rng(seed)
    x = r.standard_normal((2, 3, 10, 12)).astype(dtype)
    rois = np.array([[0, 0, 9, 9], [1.5, 2.2, 7.9, 8.1], [-2, -1, 4, 3], [3, 3, 3.2, 3.1],
                     [6, 5, 20, 14]], dtype)
    bi = np.array([0, 1, 1, 0, 1], np.int64)
    return {"x": x, "rois": rois, "bi": bi}


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
def test_roialign_matches_onnxruntime(mode, ctm, sampling_ratio):
    feeds = roi_feeds()
    attrs = dict(mode=mode, coordinate_transformation_mode=ctm, output_height=3,
                 output_width=4, sampling_ratio=sampling_ratio, spatial_scale=0.9)
    check_against_ort(helpers.node_model("RoiAlign", feeds, ["y"], attrs=attrs, opset=16), feeds,
                      rtol=1e-5, atol=1e-5)


def test_roialign_opset10_double_and_opset22_half():
    feeds = roi_feeds(F64)
    attrs = dict(output_height=2, output_width=2)
    check_against_ort(helpers.node_model("RoiAlign", feeds, ["y"], attrs=attrs, opset=10), feeds,
                      rtol=1e-10, atol=1e-10)
    feeds = roi_feeds(F16)
    check_against_reference(helpers.node_model("RoiAlign", feeds, ["y"],
                                               attrs=dict(attrs, mode="max"), opset=22), feeds,
                            rtol=1e-2, atol=1e-2)


def test_roialign_errors():
    feeds = roi_feeds()
    feeds["bi"] = np.array([0, 1, 2, 0, 1], np.int64)
    with pytest.raises(ortlite.InvalidArgument, match="batch_indices"):
        run_ortlite(helpers.node_model("RoiAlign", feeds, ["y"], opset=16), feeds)
    feeds = roi_feeds()
    feeds["rois"] = feeds["rois"][:, :3].copy()
    with pytest.raises(ortlite.InvalidArgument, match=r"rois' must be \[num_rois, 4\]"):
        run_ortlite(helpers.node_model("RoiAlign", feeds, ["y"], opset=16), feeds)
    feeds = roi_feeds()
    feeds["rois"][1, 2] = np.inf
    with pytest.raises(ortlite.InvalidArgument, match="roi 1"):
        run_ortlite(helpers.node_model("RoiAlign", feeds, ["y"], opset=16), feeds)
    feeds = roi_feeds()
    with pytest.raises(ortlite.InvalidArgument, match="mode"):
        run_ortlite(helpers.node_model("RoiAlign", feeds, ["y"], attrs=dict(mode="min"), opset=16),
                    feeds)
    with pytest.raises(ortlite.InvalidArgument, match="coordinate_transformation_mode"):
        run_ortlite(helpers.node_model("RoiAlign", feeds, ["y"],
                                       attrs=dict(coordinate_transformation_mode="align_corners"),
                                       opset=16), feeds)


# ---------------------------------------------------------------------------------------
# MaxRoiPool


def max_roi_pool_oracle(x, rois, pooled, scale):
    """Max over each bin (onnxruntime's bin boundaries), 0 for an empty bin."""
    ph_n, pw_n = pooled
    _, c, h, w = x.shape
    out = np.zeros((len(rois), c, ph_n, pw_n), x.dtype)
    for n, r in enumerate(rois):
        b = int(r[0])
        sw, sh, ew, eh = (int(np.round(v * np.float32(scale))) for v in r[1:])
        rh, rw = max(eh - sh + 1, 1), max(ew - sw + 1, 1)
        bh, bw = np.float32(rh) / np.float32(ph_n), np.float32(rw) / np.float32(pw_n)
        for ph in range(ph_n):
            hs = min(max(int(np.floor(ph * bh)) + sh, 0), h)
            he = min(max(int(np.ceil((ph + 1) * bh)) + sh, 0), h)
            for pw in range(pw_n):
                ws = min(max(int(np.floor(pw * bw)) + sw, 0), w)
                we = min(max(int(np.ceil((pw + 1) * bw)) + sw, 0), w)
                if he > hs and we > ws:
                    out[n, :, ph, pw] = x[b, :, hs:he, ws:we].max(axis=(1, 2))
    return out


def test_maxroipool_matches_onnxruntime_on_non_negative_input():
    x = rng(14).uniform(0, 1, (2, 3, 9, 11)).astype(F32)
    rois = np.array([[0, 0, 0, 8, 8], [1, 2.4, 1.6, 9.5, 6.5], [1, -3, -2, 2, 1],
                     [0, 5, 5, 5, 5], [1, 10, 8, 30, 20]], F32)
    feeds = {"x": x, "rois": rois}
    m = helpers.node_model("MaxRoiPool", feeds, ["y"],
                           attrs=dict(pooled_shape=[3, 2], spatial_scale=0.8), opset=1)
    (y,) = check_against_ort(m, feeds)
    np.testing.assert_array_equal(y, max_roi_pool_oracle(x, rois, (3, 2), 0.8))


def test_maxroipool_negative_values_and_double():
    # onnxruntime starts its max from the smallest positive float, so it cannot be the
    # oracle for negative inputs.
    x = -rng(15).uniform(1, 2, (1, 2, 6, 6)).astype(F64)
    rois = np.array([[0, 0, 0, 5, 5], [0, 1, 2, 3, 4]], F64)
    feeds = {"x": x, "rois": rois}
    (y,) = run_ortlite(helpers.node_model("MaxRoiPool", feeds, ["y"],
                                          attrs=dict(pooled_shape=[2, 2]), opset=22),
                       feeds)
    np.testing.assert_array_equal(y, max_roi_pool_oracle(x, rois, (2, 2), 1.0))


def test_maxroipool_errors():
    x = np.ones((1, 1, 4, 4), F32)
    feeds = {"x": x, "rois": np.array([[1, 0, 0, 2, 2]], F32)}
    with pytest.raises(ortlite.InvalidArgument, match="batch index 1"):
        run_ortlite(helpers.node_model("MaxRoiPool", feeds, ["y"],
                                       attrs=dict(pooled_shape=[1, 1])), feeds)
    feeds = {"x": x, "rois": np.array([[0, 0, 2, 2]], F32)}
    with pytest.raises(ortlite.InvalidArgument, match=r"\[num_rois, 5\]"):
        run_ortlite(helpers.node_model("MaxRoiPool", feeds, ["y"],
                                       attrs=dict(pooled_shape=[1, 1])), feeds)
    feeds = {"x": x, "rois": np.array([[0, 0, 0, 2, 2]], F32)}
    with pytest.raises(ortlite.InvalidArgument, match="pooled_shape"):
        run_ortlite(helpers.node_model("MaxRoiPool", feeds, ["y"],
                                       attrs=dict(pooled_shape=[0, 1])), feeds)
    with pytest.raises(ortlite.InvalidGraph, match="pooled_shape"):
        run_ortlite(helpers.node_model("MaxRoiPool", feeds, ["y"]), feeds)
    feeds = {"x": x, "rois": np.array([[0, np.nan, 0, 2, 2]], F32)}
    with pytest.raises(ortlite.InvalidArgument, match="not finite"):
        run_ortlite(helpers.node_model("MaxRoiPool", feeds, ["y"],
                                       attrs=dict(pooled_shape=[1, 1])), feeds)


# ---------------------------------------------------------------------------------------
# Upsample


@pytest.mark.parametrize("dtype", [F32, F16, np.uint8, np.int8, np.int32])
@pytest.mark.parametrize("mode,scales", [
    ("nearest", [1, 1, 2, 3]), ("nearest", [1, 2, 1.5, 2.7]), ("nearest", [2, 1, 1, 1]),
    ("linear", [1, 1, 2, 2.5]), ("linear", [1, 1, 1.7, 3]),
])
def test_upsample9_matches_onnxruntime(dtype, mode, scales):
    x = (rng(16).uniform(0, 50, (2, 3, 4, 5))).astype(dtype)
    feeds = {"x": x, "s": np.array(scales, F32)}
    tol = dict(rtol=1e-2, atol=1e-2) if dtype == F16 else dict(rtol=1e-5, atol=1e-5)
    check_against_ort(helpers.node_model("Upsample", feeds, ["y"], attrs=dict(mode=mode), opset=9),
                      feeds, **tol)


def test_upsample_linear_2d_and_3d_match_onnxruntime():
    x = rng(17).standard_normal((3, 5)).astype(F32)
    feeds = {"x": x, "s": np.array([2, 1.5], F32)}
    check_against_ort(helpers.node_model("Upsample", feeds, ["y"], attrs=dict(mode="linear"),
                                         opset=9), feeds)
    x = rng(18).standard_normal((2, 3, 4)).astype(F32)
    feeds = {"x": x, "s": np.array([1, 2, 2], F32)}
    check_against_ort(helpers.node_model("Upsample", feeds, ["y"], attrs=dict(mode="linear"),
                                         opset=9), feeds)


def test_upsample7_scales_attribute_and_string_nearest():
    x = rng(19).standard_normal((1, 2, 3, 3)).astype(F32)
    for mode in ("nearest", "linear"):
        check_against_ort(helpers.node_model("Upsample", {"x": x}, ["y"],
                                             attrs=dict(mode=mode, scales=[1.0, 1.0, 2.0, 1.5]),
                                             opset=7), {"x": x})
    s = np.array([["a", "b"], ["c", "d"]], dtype=object)
    feeds = {"x": s, "s": np.array([2, 3], F32)}
    (y,) = run_ortlite(helpers.node_model("Upsample", feeds, ["y"], opset=9), feeds)
    np.testing.assert_array_equal(y, np.repeat(np.repeat(s, 2, axis=0), 3, axis=1))


def test_upsample_errors():
    x = np.ones((1, 1, 2, 2), F32)
    for scales, pat in (([1, 1, 0.5, 2], ">= 1"), ([1, 2], "rank 4"),
                        ([1, 1, np.nan, 1], ">= 1"), ([1, 1, 1e30, 1], "too large")):
        feeds = {"x": x, "s": np.array(scales, F32)}
        with pytest.raises(ortlite.InvalidArgument, match=pat):
            run_ortlite(helpers.node_model("Upsample", feeds, ["y"], opset=9), feeds)
    feeds = {"x": x, "s": np.array([1, 1, 2, 2], F32)}
    with pytest.raises(ortlite.InvalidArgument, match="mode"):
        run_ortlite(helpers.node_model("Upsample", feeds, ["y"], attrs=dict(mode="cubic"),
                                       opset=9), feeds)
    feeds = {"x": x, "s": np.array([1, 1, 2, 2], F64)}
    with pytest.raises(ortlite.InvalidArgument, match="float"):
        run_ortlite(helpers.node_model("Upsample", feeds, ["y"], opset=9), feeds)
    with pytest.raises(ortlite.InvalidGraph, match="scales"):
        run_ortlite(helpers.node_model("Upsample", {"x": x}, ["y"], opset=7), {"x": x})


# ---------------------------------------------------------------------------------------
# DeformConv (onnxruntime has no CPU kernel: the reference implements 2-D)


def deform_feeds(n=2, c=4, oc=6, hw=(6, 7), k=(3, 2), group=2, og=2, strides=(1, 1),
                 pads=(1, 0, 1, 1), dil=(1, 2), bias=True, mask=True, dtype=F32, seed=20):
    r = rng(seed)
    oh = (hw[0] + pads[0] + pads[2] - (dil[0] * (k[0] - 1) + 1)) // strides[0] + 1
    ow = (hw[1] + pads[1] + pads[3] - (dil[1] * (k[1] - 1) + 1)) // strides[1] + 1
    feeds = {"x": r.standard_normal((n, c, *hw)).astype(dtype),
             "w": r.standard_normal((oc, c // group, *k)).astype(dtype),
             "offset": (1.5 * r.standard_normal((n, og * k[0] * k[1] * 2, oh, ow))).astype(dtype)}
    if bias:
        feeds["b"] = r.standard_normal(oc).astype(dtype)
    if mask:
        feeds["mask"] = r.uniform(0, 1, (n, og * k[0] * k[1], oh, ow)).astype(dtype)
    attrs = dict(group=group, offset_group=og, strides=list(strides), pads=list(pads),
                 dilations=list(dil))
    return feeds, attrs


@pytest.mark.parametrize("opset", [19, 22])
def test_deformconv_matches_reference(opset):
    # Small: the reference runs one GridSample per (image, channel pair, output position).
    feeds, attrs = deform_feeds(n=1, hw=(4, 5), oc=4)
    check_against_reference(helpers.node_model("DeformConv", feeds, ["y"], attrs=attrs,
                                               opset=opset), feeds, rtol=1e-4, atol=1e-4)


def deform_conv_oracle(x, w, off, b, mask, group, og, strides, pads, dil):
    """2-D deformable convolution in float64, bilinear samples with zeros outside."""
    n_, c_, h, wd = x.shape
    oc, icg, kh, kw = w.shape
    oh, ow = off.shape[2:]
    off = off.reshape(n_, og, kh * kw, 2, oh, ow)
    mask = np.ones((n_, og, kh * kw, oh, ow)) if mask is None else mask.reshape(
        n_, og, kh * kw, oh, ow)

    def sample(img, py, px):
        v = 0.0
        y0, x0 = int(np.floor(py)), int(np.floor(px))
        for yy in (y0, y0 + 1):
            for xx in (x0, x0 + 1):
                if 0 <= yy < h and 0 <= xx < wd:
                    v += (1 - abs(py - yy)) * (1 - abs(px - xx)) * img[yy, xx]
        return v

    out = np.zeros((n_, oc, oh, ow))
    ocg = oc // group
    for n in range(n_):
        for c in range(c_):
            g, o = c // icg, c // (c_ // og)
            for i in range(oh):
                for j in range(ow):
                    for a in range(kh):
                        for e in range(kw):
                            k = a * kw + e
                            py = i * strides[0] - pads[0] + a * dil[0] + off[n, o, k, 0, i, j]
                            px = j * strides[1] - pads[1] + e * dil[1] + off[n, o, k, 1, i, j]
                            v = sample(x[n, c], py, px) * mask[n, o, k, i, j]
                            out[n, g * ocg:(g + 1) * ocg, i, j] += w[g * ocg:(g + 1) * ocg,
                                                                     c % icg, a, e] * v
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def test_deformconv_double_matches_numpy_oracle():
    # The reference implementation samples in reduced precision (about 1e-6 off for
    # double); this oracle is float64 throughout.
    for kw in (dict(bias=False, group=1, og=1, strides=(2, 2), pads=(0, 0, 0, 0), dil=(1, 1)),
               dict(mask=False)):
        feeds, attrs = deform_feeds(dtype=F64, **kw)
        names = ["x", "w", "offset", "b" if "b" in feeds else "", "mask" if "mask" in feeds else ""]
        while names[-1] == "":
            names.pop()
        (y,) = run_ortlite(helpers.node_model("DeformConv", feeds, ["y"], attrs=attrs, opset=19,
                                              order=names), feeds)
        expected = deform_conv_oracle(feeds["x"], feeds["w"], feeds["offset"], feeds.get("b"),
                                      feeds.get("mask"), attrs["group"], attrs["offset_group"],
                                      attrs["strides"], attrs["pads"], attrs["dilations"])
        np.testing.assert_allclose(y, expected, rtol=1e-12, atol=1e-12)


def test_deformconv_1d_equals_2d_with_a_unit_axis():
    feeds, attrs = deform_feeds(hw=(1, 9), k=(1, 3), pads=(0, 1, 0, 1), dil=(1, 1))
    feeds["offset"][:, 0::2] = 0  # no offset along the unit axis
    (y2,) = run_ortlite(helpers.node_model("DeformConv", feeds, ["y"], attrs=attrs, opset=19),
                        feeds)
    f1 = {"x": feeds["x"][:, :, 0], "w": feeds["w"][:, :, 0],
          "offset": feeds["offset"][:, 1::2, 0].copy(), "b": feeds["b"],
          "mask": feeds["mask"][:, :, 0]}
    a1 = dict(group=2, offset_group=2, strides=[1], pads=[1, 1], dilations=[1])
    (y1,) = run_ortlite(helpers.node_model("DeformConv", f1, ["y"], attrs=a1, opset=19), f1)
    np.testing.assert_allclose(y1, y2[:, :, 0], rtol=1e-5, atol=1e-5)


def test_deformconv_errors():
    feeds, attrs = deform_feeds()
    feeds["offset"] = feeds["offset"][:, :-2].copy()
    with pytest.raises(ortlite.InvalidArgument, match="input 'offset'"):
        run_ortlite(helpers.node_model("DeformConv", feeds, ["y"], attrs=attrs, opset=19), feeds)
    feeds, attrs = deform_feeds()
    feeds["mask"] = feeds["mask"][:, :, :1].copy()
    with pytest.raises(ortlite.InvalidArgument, match="input 'mask'"):
        run_ortlite(helpers.node_model("DeformConv", feeds, ["y"], attrs=attrs, opset=19), feeds)
    feeds, attrs = deform_feeds()
    with pytest.raises(ortlite.InvalidArgument, match="channels"):
        run_ortlite(helpers.node_model("DeformConv", feeds, ["y"], attrs=dict(attrs, group=3),
                                       opset=19), feeds)
    feeds, attrs = deform_feeds()
    feeds["b"] = feeds["b"].astype(F64)
    with pytest.raises(ortlite.InvalidArgument, match="element type"):
        run_ortlite(helpers.node_model("DeformConv", feeds, ["y"], attrs=attrs, opset=19), feeds)


# ---------------------------------------------------------------------------------------
# ConvTranspose as GEMM + col2im, and the Resize fast paths (nearest / linear on the last
# two axes): compared with onnxruntime at shapes that take each path and its fallbacks.

CONVT_CASES = [
    # (x shape, W shape, attributes)
    ((1, 8, 5, 6), (8, 4, 2, 2), dict(strides=[2, 2])),  # kernel tiles the output
    ((2, 6, 7, 3), (6, 5, 2, 2), dict(strides=[2, 2])),
    ((1, 4, 3, 4, 5), (4, 3, 2, 2, 2), dict(strides=[2, 2, 2])),
    ((1, 4, 3, 4, 5), (4, 3, 1, 3, 2), dict(strides=[1, 3, 2])),
    ((1, 6, 9), (6, 4, 2), dict(strides=[2])),
    ((1, 6, 9), (6, 4, 3), dict(strides=[3])),
    ((1, 6, 9), (6, 4, 4), dict(strides=[2], pads=[1, 1])),
    ((1, 8, 6, 5), (8, 4, 2, 2), dict(strides=[2, 2], output_padding=[1, 1])),
    ((1, 8, 6, 5), (8, 4, 2, 2), dict(strides=[2, 2], pads=[1, 0, 0, 1])),
    ((1, 8, 6, 5), (8, 3, 3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])),
    ((1, 8, 6, 5), (8, 3, 4, 4), dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    ((2, 8, 6, 5), (8, 3, 4, 4), dict(strides=[2, 2], pads=[1, 1, 1, 1], group=2)),
    ((1, 12, 5, 5), (12, 2, 3, 3), dict(group=4)),
    ((1, 12, 5, 5), (12, 1, 2, 2), dict(strides=[2, 2], group=12)),
    ((1, 5, 4, 7), (5, 3, 3, 2), dict(strides=[1, 2], dilations=[2, 3], pads=[0, 2, 1, 1])),
    ((1, 5, 4, 7), (5, 3, 3, 3), dict(strides=[3, 2], output_shape=[12, 15])),
    ((1, 5, 4, 7), (5, 3, 3, 3), dict(strides=[2, 2], auto_pad="SAME_UPPER")),
    ((1, 5, 4, 7), (5, 3, 2, 2), dict(strides=[2, 2], auto_pad="SAME_LOWER")),
    ((1, 5, 4, 7), (5, 3, 3, 3), dict(strides=[2, 2], auto_pad="VALID")),
    ((1, 3, 1, 1), (3, 2, 3, 3), dict()),
    ((1, 8, 150, 150), (8, 8, 2, 2), dict(strides=[2, 2])),  # the GEMM in several chunks
    ((1, 8, 150, 150), (8, 8, 3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 64, 20, 20), (64, 32, 2, 2), dict(strides=[2, 2])),
    # Stride 2 adds four inputs into eight outputs at a time: row lengths around the vector.
    ((1, 32, 40, 40), (32, 16, 4, 4), dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 6, 37), (6, 4, 4), dict(strides=[2], pads=[1, 1])),
    ((1, 6, 13), (6, 4, 5), dict(strides=[2], pads=[2, 1])),
    ((2, 16, 9, 23), (16, 8, 4, 4), dict(strides=[2, 2], pads=[1, 2, 2, 1])),
]


@pytest.mark.parametrize("xs,ws,attrs", CONVT_CASES)
@pytest.mark.parametrize("bias", [False, True])
def test_conv_transpose_gemm_matches_ort(xs, ws, attrs, bias):
    x, w = rand(xs, seed=1), rand(ws, seed=2)
    consts = {"W": w}
    if bias:
        consts["B"] = rand((ws[1] * attrs.get("group", 1),), seed=3)
    m = node_model("ConvTranspose", {"X": x}, ["Y"], attrs=attrs, consts=consts)
    check(m, {"X": x}, **tol(F32, xs[1] * int(np.prod(ws[2:]))))
    check(m, {"X": x}, threads=2, **tol(F32, xs[1] * int(np.prod(ws[2:]))))


@pytest.mark.parametrize("xs,ws,attrs", [c for c in CONVT_CASES if c[0][2:] != (150, 150)])
def test_conv_transpose_gemm_double(xs, ws, attrs):
    x, w = rand(xs, seed=1), rand(ws, seed=2)
    b = rand((ws[1] * attrs.get("group", 1),), seed=3)

    def make(dtype):
        return node_model("ConvTranspose", {"X": x.astype(dtype)}, ["Y"], attrs=attrs,
                          consts={"W": w.astype(dtype), "B": b.astype(dtype)})

    check_via_f32(make, {"X": x}, F64, **tol(F32, xs[1] * int(np.prod(ws[2:]))))


def test_conv_transpose_gemm_empty_batch_and_channels():
    for xs, ws in (((0, 4, 3, 3), (4, 2, 2, 2)), ((1, 0, 3, 3), (0, 2, 2, 2))):
        x, w = rand(xs, seed=1), rand(ws, seed=2)
        m = node_model("ConvTranspose", {"X": x}, ["Y"], attrs=dict(strides=[2, 2]),
                       consts={"W": w, "B": rand((2,), seed=3)})
        check(m, {"X": x})



RESIZE_CTMS = ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
               "tf_crop_and_resize", "half_pixel_symmetric"]
RESIZE_SHAPES = [((1, 3, 7, 9), "scales", [1, 1, 2, 2]), ((2, 2, 5, 6), "scales", [1, 1, 0.6, 1.7]),
                 ((1, 2, 4, 4), "scales", [1, 1, 3.0, 1.0]), ((1, 2, 6, 1), "scales", [1, 1, 1, 3]),
                 ((1, 3, 7, 9), "sizes", [1, 3, 14, 11]), ((1, 2, 8, 6), "sizes", [1, 2, 3, 7]),
                 ((1, 4, 33, 47), "scales", [1, 1, 2, 2])]


def resize_model(x, mode, ctm, how, value, nearest_mode="round_prefer_floor"):
    attrs = dict(mode=mode, coordinate_transformation_mode=ctm, nearest_mode=nearest_mode)
    roi = np.array([], F32)
    if ctm == "tf_crop_and_resize":
        roi = np.array([0, 0, -0.1, 0.2, 1, 1, 0.8, 1.3], F32)
        attrs["extrapolation_value"] = -3.0
    consts = {"roi": roi}
    if how == "scales":
        consts["scales"] = np.array(value, F32)
        order = ["X", "roi", "scales"]
    else:
        consts["sizes"] = np.array(value, np.int64)
        order = ["X", "roi", "", "sizes"]
    return node_model("Resize", {"X": x}, ["Y"], attrs=attrs, consts=consts, order=order, opset=13)


def resize_agrees_with_ort(ctm, value):
    return ctm not in ("tf_crop_and_resize", "align_corners") and value in ([1, 1, 2, 2],
                                                                          [1, 3, 14, 11])


@pytest.mark.parametrize("ctm", RESIZE_CTMS)
@pytest.mark.parametrize("shape,how,value", RESIZE_SHAPES)
@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor",
                                          "ceil"])
def test_resize_nearest_fast_matches_ort(ctm, shape, how, value, nearest_mode):
    # Compared with onnx's reference (which the kernel follows); with onnxruntime too where
    # it agrees (it rounds source coordinates in float: ties at non-integer scales differ).
    x = rand(shape, seed=4)
    m = resize_model(x, "nearest", ctm, how, value, nearest_mode)
    if ctm != "tf_crop_and_resize":  # the reference's float roi arithmetic rounds differently
        check_against_reference(m, {"X": x}, rtol=0, atol=0)
    if resize_agrees_with_ort(ctm, value):
        check(m, {"X": x}, rtol=0, atol=0)
    if ctm != "tf_crop_and_resize":
        xi = rand(shape, dtype=np.uint8, seed=5)
        mi = resize_model(xi, "nearest", ctm, how, value, nearest_mode)
        check_against_reference(mi, {"X": xi}, rtol=0, atol=0)


@pytest.mark.parametrize("w", [1, 5, 8, 9, 16, 17, 20, 37])
@pytest.mark.parametrize("dtype", [F32, np.int32, np.uint8])
def test_resize_nearest_2x_rows(w, dtype):
    """Integer 2x upscales (rows written straight from registers for 4-byte elements, a
    masked tail for every width); 3x height repeats a row three times."""
    x = rand((2, 3, 5, w), dtype=dtype, seed=w)
    for value in ([1, 1, 2, 2], [1, 1, 3, 2], [1, 1, 1, 2]):
        m = resize_model(x, "nearest", "asymmetric", "scales", value, "floor")
        expected = np.repeat(np.repeat(x, value[2], axis=2), value[3], axis=3)
        np.testing.assert_array_equal(run_ortlite(m, {"X": x})[0], expected)


@pytest.mark.parametrize("threads", [1, 2])
def test_resize_nearest_2x_large_outputs(threads):
    """2x upscales whose outputs reach 8 MiB are written with non-temporal stores where a row
    starts on a 64-byte boundary (widths of 8k), plain ones elsewhere: against numpy, at and
    around the size, twice in a row (the second run's output in the first's blocks)."""
    for shape, dtype in (((1, 128, 64, 64), F32), ((1, 60, 101, 99), F32),
                         ((2, 31, 64, 72), np.int32), ((1, 127, 64, 64), F32)):
        x = rand(shape, dtype=dtype, seed=shape[1])
        m = resize_model(x, "nearest", "asymmetric", "scales", [1, 1, 2, 2], "floor")
        expected = np.repeat(np.repeat(x, 2, axis=2), 2, axis=3)
        s = session(m, threads=threads)
        for _ in range(2):
            np.testing.assert_array_equal(s.run(None, {"X": x})[0], expected)


@pytest.mark.parametrize("threads", [1, 2])
def test_resize_tables_follow_each_call(threads):
    """The per-axis tables are kept between calls, keyed by the sizes, scales and roi: one
    session fed eight shapes and scales in turn (more than the tables it keeps; 2 and 2.1 give
    the same output size from 5), twice over, gives numpy's result for each (nearest
    asymmetric floor: source index floor(i / scale); linear align_corners against onnx's
    reference)."""
    graph_in = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, None, None, None]),
                helper.make_tensor_value_info("scales", TensorProto.FLOAT, [4])]
    calls = [((1, 2, 5, 20), (2, 2)), ((1, 2, 5, 20), (2.1, 2)), ((1, 2, 5, 20), (3, 2)),
             ((2, 1, 4, 7), (2, 2)),
             ((1, 3, 9, 16), (2, 3)), ((1, 2, 20, 5), (2, 2)), ((1, 1, 1, 1), (2, 2)),
             ((1, 2, 5, 20), (2, 4))]
    for mode in ("nearest", "linear"):
        attrs = dict(mode=mode, nearest_mode="floor",
                     coordinate_transformation_mode="asymmetric" if mode == "nearest"
                     else "align_corners")
        node = helper.make_node("Resize", ["X", "", "scales"], ["Y"], **attrs)
        graph = helper.make_graph([node], "g", graph_in,
                                  [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        so = ortlite.SessionOptions()
        so.intra_op_num_threads = threads
        sess = ortlite.InferenceSession(model.SerializeToString(), so)
        ref = ReferenceEvaluator(model)
        for i, (shape, (sh, sw)) in enumerate(calls * 2):
            x = rand(shape, seed=i % len(calls))
            scales = np.array([1, 1, sh, sw], F32)
            (y,) = sess.run(None, {"X": x, "scales": scales})
            if mode == "nearest":
                ih = np.floor(np.arange(int(shape[2] * np.float32(sh))) / np.float32(sh))
                iw = np.floor(np.arange(int(shape[3] * np.float32(sw))) / np.float32(sw))
                expected = x[:, :, ih.astype(np.int64)][:, :, :, iw.astype(np.int64)]
                np.testing.assert_array_equal(y, expected)
            else:
                (expected,) = ref.run(None, {"X": x, "scales": scales})
                np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("ctm", RESIZE_CTMS)
@pytest.mark.parametrize("shape,how,value", RESIZE_SHAPES)
def test_resize_linear_fast_matches_ort(ctm, shape, how, value):
    x = rand(shape, seed=4)
    m = resize_model(x, "linear", ctm, how, value)
    check_against_reference(m, {"X": x}, rtol=1e-5, atol=1e-5)
    if resize_agrees_with_ort(ctm, value):
        check(m, {"X": x}, rtol=1e-5, atol=1e-6)
        check(m, {"X": x}, threads=2, rtol=1e-5, atol=1e-6)


def test_resize_fast_keeps_infinities_and_other_axes():
    x = np.array([[[[1, np.inf, 3], [-2, 5, -np.inf]]]], F32)
    m = resize_model(x, "nearest", "half_pixel", "scales", [1, 1, 2, 3])
    (y,) = run_lite(m, {"X": x})
    assert np.isinf(y).sum() == 12 and not np.isnan(y).any()
    # Resizing a leading axis too takes the general path.
    x = rand((2, 3, 4, 5), seed=6)
    for mode in ("nearest", "linear"):
        check_against_reference(resize_model(x, mode, "half_pixel", "scales", [1, 2, 1.5, 2]),
                                {"X": x}, rtol=1e-5, atol=1e-6)
        check_against_reference(resize_model(x[0], mode, "asymmetric", "scales", [1, 2, 1.5]),
                                {"X": x[0]}, rtol=1e-5, atol=1e-6)


# --- Resize: tf_half_pixel_for_nn (opsets 11-12) --------------------------------------------


@pytest.mark.parametrize("opset", [11, 12])
@pytest.mark.parametrize("shape,scale", [((1, 2, 5, 7), 2.0), ((1, 1, 6, 6), 0.5),
                                         ((2, 3, 4, 9), 3.0)])
@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor",
                                          "ceil"])
def test_resize_tf_half_pixel_for_nn_matches_onnxruntime(opset, shape, scale, nearest_mode):
    node = helper.make_node("Resize", ["x", "roi", "s"], ["y"], mode="nearest",
                            coordinate_transformation_mode="tf_half_pixel_for_nn",
                            nearest_mode=nearest_mode)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.array([], np.float32), "roi"),
                     numpy_helper.from_array(np.array([1, 1, scale, scale], np.float32), "s")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    got = run_ortlite(model, {"x": x})[0]
    want = run_ort(model, {"x": x})[0]
    np.testing.assert_array_equal(got, want)


# ---- vectorized 2-D float pooling and global pooling --------------------------------------
# MaxPool / AveragePool over at most two spatial axes without dilation (float32, and the
# 16-bit floats through float32) reduce the window's rows, then run the horizontal taps 16
# outputs at a time (strides above 1 split the row into phases first); Global*Pool reduce
# 16 lanes at a time.

_FAST_POOL_SHAPES = [(1, 64, 56, 56), (1, 16, 112, 112), (1, 256, 14, 14), (1, 64, 7, 7),
                     (2, 3, 5, 9), (1, 2, 1, 1), (1, 1, 17, 33)]
_FAST_POOL_KERNELS = [dict(kernel_shape=[2, 2], strides=[2, 2]),
                      dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]),
                      dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
                      dict(kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2])]


def _fast_pool_check(op, x, attrs, opset, threads=None):
    m = node_model(op, {"X": x}, ["Y"], attrs=attrs, opset=opset)
    check(m, {"X": x}, threads=threads)


@pytest.mark.parametrize("attrs", _FAST_POOL_KERNELS, ids=["2x2s2", "3x3s1p1", "3x3s2p1", "5x5s1p2"])
@pytest.mark.parametrize("xs", _FAST_POOL_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_fast_pool2d_matches_onnxruntime(xs, attrs):
    k = attrs["kernel_shape"][0]
    if k > xs[2] + 2 * attrs.get("pads", [0])[0] or k > xs[3] + 2 * attrs.get("pads", [0])[0]:
        pytest.skip("kernel larger than the padded input")
    x = rand(xs, seed=sum(xs))
    _fast_pool_check("MaxPool", x, attrs, 12)
    for cip in (0, 1):
        for opset in (11, 19):
            _fast_pool_check("AveragePool", x, dict(attrs, count_include_pad=cip), opset)


FAST_POOL_ODD = [
    ((1, 3, 20, 37), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)),
    ((1, 2, 9, 50), dict(kernel_shape=[2, 3], strides=[2, 2], pads=[0, 1, 1, 2], ceil_mode=1)),
    ((2, 2, 17, 37), dict(kernel_shape=[3, 5], strides=[1, 1], pads=[1, 2, 1, 2])),
    ((1, 2, 15, 40), dict(kernel_shape=[4, 4], strides=[3, 3], pads=[1, 2, 2, 1], ceil_mode=1)),
    ((1, 2, 11, 70), dict(kernel_shape=[1, 7], strides=[1, 5], pads=[0, 3, 0, 3])),
    ((1, 2, 6, 6), dict(kernel_shape=[3, 3], strides=[3, 3], ceil_mode=1)),
    ((1, 4, 30), dict(kernel_shape=[3], strides=[2], pads=[1, 1])),  # 1-D
    ((1, 4, 33), dict(kernel_shape=[4], strides=[1], pads=[2, 1], ceil_mode=1)),
    ((1, 1, 3, 100), dict(kernel_shape=[3, 2], strides=[1, 2], pads=[1, 1, 1, 1])),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("xs,attrs", FAST_POOL_ODD)
def test_fast_pool2d_odd_geometries(xs, attrs, threads):
    x = rand(xs, seed=3)
    _fast_pool_check("MaxPool", x, attrs, 12, threads)
    for cip in (0, 1):
        for opset in (11, 19):
            _fast_pool_check("AveragePool", x, dict(attrs, count_include_pad=cip), opset, threads)


@pytest.mark.parametrize("threads", [1, 2])
def test_fast_pool2d_special_values_and_threads(threads):
    x = rand((2, 8, 23, 45), seed=5, lo=-3, hi=3)
    x.flat[::7] = -np.inf
    x.flat[3::11] = 3e38
    x.flat[5::13] = -3e38
    for attrs in _FAST_POOL_KERNELS + [a for _, a in FAST_POOL_ODD[:4]]:
        _fast_pool_check("MaxPool", x, attrs, 12, threads)
    # NaN never wins a max; a window of NaN and -inf only gives -inf (as the general path)
    y = np.full((1, 1, 4, 20), -np.inf, F32)
    y[0, 0, 1, 3] = np.nan
    y[0, 0, 2, 10] = 1.0
    m = node_model("MaxPool", {"X": y}, ["Y"], attrs=dict(kernel_shape=[2, 2], strides=[2, 2]),
                   opset=12)
    got = run_lite(m, {"X": y}, threads)[0]
    expected = np.full((1, 1, 2, 10), -np.inf, F32)
    expected[0, 0, 1, 5] = 1.0
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", [F16])
def test_fast_pool2d_other_float_types(dtype):
    x = rand((1, 3, 19, 21), seed=9).astype(dtype)
    for attrs in _FAST_POOL_KERNELS:
        for op, extra in [("MaxPool", {}), ("AveragePool", dict(count_include_pad=1))]:
            m = node_model(op, {"X": x}, ["Y"], attrs=dict(attrs, **extra), opset=12)
            check(m, {"X": x}, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("xs", [(1, 64, 56, 56), (1, 16, 112, 112), (1, 256, 14, 14),
                                (1, 64, 7, 7), (2, 3, 1, 1), (1, 5, 63), (1, 3, 4, 5, 7)],
                         ids=lambda s: "x".join(map(str, s)))
def test_fast_global_pool(xs, threads):
    x = rand(xs, seed=len(xs), lo=-2, hi=2)
    for op in ("GlobalMaxPool", "GlobalAveragePool"):
        m = node_model(op, {"X": x}, ["Y"])
        check(m, {"X": x}, threads=threads)
    # NaN never wins, in the middle or first; a plane of NaN only gives NaN
    y = rand((1, 3, 9, 9), seed=1)
    y[0, 0, 4, 4] = np.nan
    y[0, 1, 0, 0] = np.nan
    y[0, 2] = np.nan
    got = run_lite(node_model("GlobalMaxPool", {"X": y}, ["Y"]), {"X": y}, threads)[0]
    assert got[0, 0, 0, 0] == np.nanmax(y[0, 0]) and got[0, 1, 0, 0] == np.nanmax(y[0, 1])
    assert np.isnan(got[0, 2, 0, 0])


# The pooling loops on every instruction-set path (16, 8 and 4 lanes): ORTLITE_FAST_ISA caps
# the run-time choice, so each path runs in its own process (on a CPU without the
# instruction set the lower path is taken), and the parent compares with onnxruntime.
_POOL_ISA_SCRIPT = r"""
import sys
import numpy as np
import ortlite
cases = np.load(sys.argv[1], allow_pickle=True)
out = {}
for key in cases.files:
    model, x = cases[key]
    so = ortlite.SessionOptions()
    so.intra_op_num_threads = 1
    s = ortlite.InferenceSession(model, so)
    out[key] = s.run(None, {"X": x})[0]
np.savez(sys.argv[2], **out)
"""


def _depthwise_model(x_shape, c_out, k, s, pads, expand):
    """[1x1 Conv + Clip ->] depthwise k x k Conv + Clip(0, 6) (the optimizer fuses the pair
    into FusedExpandDepthwise); input X."""
    rng = np.random.default_rng(k + s + c_out)
    c_in = x_shape[1]
    nodes, inits, h = [], {}, "X"
    if expand:
        inits["we"] = (rng.standard_normal((c_out, c_in, 1, 1)) / np.sqrt(c_in)).astype(F32)
        nodes += [helper.make_node("Conv", ["X", "we"], ["e"], kernel_shape=[1, 1]),
                  helper.make_node("Clip", ["e", "lo", "hi"], ["ea"])]
        h = "ea"
    inits["wd"] = (rng.standard_normal((c_out, 1, k, k)) / k).astype(F32)
    inits["bd"] = rng.standard_normal(c_out).astype(F32)
    inits["lo"], inits["hi"] = np.array(0, F32), np.array(6, F32)
    nodes += [helper.make_node("Conv", [h, "wd", "bd"], ["d"], kernel_shape=[k, k],
                               strides=[s, s], pads=list(pads), group=c_out),
              helper.make_node("Clip", ["d", "lo", "hi"], ["Y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT,
                                                                     list(x_shape))],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, n) for n, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


DW_ISA_CASES = [
    ((1, 24, 30, 30), 24, 3, 1, (1, 1, 1, 1), False),
    ((1, 16, 37, 41), 16, 3, 2, (1, 1, 1, 1), False),
    ((2, 40, 7, 7), 40, 5, 1, (2, 2, 2, 2), False),
    ((1, 8, 80, 80), 48, 3, 1, (1, 1, 1, 1), True),      # bands of rows x 32 channels
    ((1, 6, 64, 70), 40, 3, 2, (0, 1, 1, 0), True),
    ((1, 16, 14, 14), 80, 3, 1, (1, 1, 1, 1), True),
    ((1, 4, 90, 75), 36, 5, 2, (2, 2, 2, 2), True),
]


# 3x3 depthwise planes of narrow rows (conv_avx512.cc): stride 1 with at most 16 outputs a
# row (run_narrow3: one vector a row, two rows an iteration) and stride 2 with at most 8
# (run_narrow3_s2: two rows a vector). Widths through those bounds, odd and even heights
# (the last row alone), one-row images, asymmetric and wide padding, alone and inside
# FusedExpandDepthwise's bands, with NaN and infinities kept through the Clip.
def _out(n, lo, hi, s):
    return (n + lo + hi - 3) // s + 1


NARROW_DW_CASES = [(h, w, s, pads) for s in (1, 2)
                   for w in (1, 2, 5, 7, 8, 9, 13, 14, 15, 16, 17)
                   for h, pads in ((1, (1, 1, 1, 1)), (2, (0, 1, 0, 1)), (7, (1, 1, 1, 1)),
                                   (14, (0, 0, 0, 0)), (15, (1, 0, 2, 1)), (16, (2, 2, 2, 2)))
                   if w + pads[1] + pads[3] >= 3 and h + pads[0] + pads[2] >= 3
                   and _out(w, pads[1], pads[3], s) <= (16 if s == 1 else 8)]


@pytest.mark.parametrize("h,w,s,pads", NARROW_DW_CASES, ids=str)
@pytest.mark.parametrize("expand", [False, True], ids=["dw", "expand_dw"])
def test_depthwise_3x3_narrow_rows(h, w, s, pads, expand):
    x = rand((1, 24, h, w), seed=h * 31 + w, lo=-4, hi=8)
    x[0, 3, h // 2, w // 2] = np.nan
    x[0, 5, 0, 0] = np.inf
    x[0, 6, h - 1, w - 1] = -np.inf
    m = _depthwise_model(x.shape, 24 if not expand else 48, 3, s, pads, expand)
    for threads in (1, 2):
        check(m, {"X": x}, threads=threads)


# 3x3 depthwise planes of wider rows at strides 1 and 2 (run_wide3: every vector of a pair
# of output rows, the pair's input rows loaded once): widths just past one, two and more
# vectors of outputs, heights with and without interior row pairs (odd, one, two, three
# rows), top and bottom padding of 0 to 2 rows, alone and inside FusedExpandDepthwise's
# bands, NaN and infinities kept through the Clip.
WIDE_DW_CASES = [(h, w, s, pads) for s in (1, 2)
                 for w in ((17, 31, 33, 56, 100) if s == 1 else (33, 35, 64, 67, 100))
                 for h in (1, 2, 3, 7, 16)
                 for pads in ((1, 1, 1, 1), (0, 0, 0, 0), (2, 0, 0, 2), (0, 2, 1, 1))
                 if h + pads[0] + pads[2] >= 3]


@pytest.mark.parametrize("h,w,s,pads", WIDE_DW_CASES, ids=str)
@pytest.mark.parametrize("expand", [False, True], ids=["dw", "expand_dw"])
def test_depthwise_3x3_wide_rows(h, w, s, pads, expand):
    x = rand((1, 24, h, w), seed=h * 37 + w, lo=-4, hi=8)
    x[0, 3, h // 2, w // 2] = np.nan
    x[0, 5, 0, w - 1] = np.inf
    x[0, 6, h - 1, 0] = -np.inf
    m = _depthwise_model(x.shape, 24 if not expand else 48, 3, s, pads, expand)
    for threads in (1, 2):
        check(m, {"X": x}, threads=threads)


# Depthwise kernels of 25 taps and more, and dilated ones, with 16 channels in the lanes
# (conv_depthwise.cc depthwise_blocked16, conv_avx512.cc dw16_*): strides 1-3, square and
# long kernels, channel counts with a partial last block of 16, 16-output groups across
# row ends, planes cut into several bands of rows, pads wider than the kernel, 1-D,
# dilations. (C, H, W, kernel, strides, pads[, dilations])
BLOCKED16_CASES = [
    (96, 56, 56, (7, 7), (2, 2), (3, 3, 3, 3)),
    (20, 33, 35, (5, 5), (2, 2), (2, 2, 2, 2)),
    (40, 7, 7, (7, 7), (1, 1), (3, 3, 3, 3)),
    (17, 14, 14, (5, 5), (1, 1), (2, 2, 2, 2)),
    (8, 30, 40, (3, 9), (1, 1), (1, 4, 1, 4)),
    (16, 30, 40, (9, 3), (2, 1), (4, 1, 4, 1)),
    (24, 11, 13, (5, 6), (2, 3), (0, 5, 4, 0)),
    (16, 200, 190, (7, 7), (2, 2), (3, 3, 3, 3)),
    (16, 9, 8, (5, 5), (1, 1), (0, 0, 0, 0)),
    (16, 6, 6, (5, 5), (1, 1), (6, 6, 6, 6)),
    (33, 1, 300, (1, 31), (1, 1), (0, 15, 0, 15)),
    # 3x3 on rows of at most 8 outputs
    (40, 7, 7, (3, 3), (1, 1), (1, 1, 1, 1)),
    (20, 14, 13, (3, 3), (2, 2), (1, 1, 1, 1)),
    (16, 6, 1, (3, 3), (4, 4), (5, 5, 0, 0)),   # left pad past every column a window reads
    (3, 3, 2, (5, 5), (3, 3), (2, 7, 2, 0)),
    # dilated (DeepLab's atrous depthwise layers), any kernel of 3x3 and more
    (40, 33, 33, (3, 3), (1, 1), (2, 2, 2, 2), (2, 2)),
    (24, 17, 19, (3, 3), (1, 1), (4, 4, 4, 4), (4, 4)),
    (18, 40, 38, (3, 3), (2, 2), (2, 1, 2, 1), (2, 1)),
    (16, 20, 20, (5, 5), (1, 1), (6, 6, 6, 6), (3, 3)),
    # 5x5 / 7x7 strides 1 on rows of more than 64 outputs: here from 3 to 16 rows (a text
    # line's feature maps: PP-OCR's recognizer), planar from 17 rows or for 1 or 2
    (48, 3, 80, (5, 5), (1, 1), (2, 2, 2, 2)),
    (33, 16, 100, (5, 5), (1, 1), (2, 2, 2, 2)),
    (20, 8, 130, (7, 7), (1, 1), (3, 3, 3, 3)),
    (16, 2, 90, (5, 5), (1, 1), (2, 2, 2, 2)),
    (16, 17, 70, (5, 5), (1, 1), (2, 2, 2, 2)),
]


def _blocked16_model(x_shape, kernel, strides, pads, post, one_d, dilations=(1, 1)):
    c = x_shape[1]
    rng = np.random.default_rng(c + sum(kernel))
    w = (rng.standard_normal((c, 1) + tuple(kernel)) / np.sqrt(kernel[0] * kernel[1])).astype(F32)
    inits = {"w": w, "b": rng.standard_normal(c).astype(F32),
             "lo": np.array(0, F32), "hi": np.array(6, F32)}
    attrs = dict(kernel_shape=list(kernel), strides=list(strides), pads=list(pads), group=c,
                 dilations=list(dilations))
    xs, names = list(x_shape), ["X", "w", "b"]
    if one_d:
        attrs = dict(kernel_shape=[kernel[1]], strides=[strides[1]], pads=[pads[1], pads[3]],
                     group=c)
        xs = [x_shape[0], c, x_shape[3]]
        inits["w"] = w[:, :, 0]
    nodes = [helper.make_node("Conv", names, ["d"], **attrs)]
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, xs)]
    if post == "clip":
        nodes.append(helper.make_node("Clip", ["d", "lo", "hi"], ["Y"]))
    elif post == "residual":
        inputs.append(helper.make_tensor_value_info("R", TensorProto.FLOAT, None))
        nodes += [helper.make_node("Add", ["d", "R"], ["s"]),
                  helper.make_node("Relu", ["s"], ["Y"])]
    else:
        nodes.append(helper.make_node("Identity", ["d"], ["Y"]))
    g = helper.make_graph(nodes, "g", inputs,
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, n) for n, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("case", BLOCKED16_CASES, ids=str)
@pytest.mark.parametrize("post", ["none", "clip", "residual"])
def test_depthwise_blocked16(case, post):
    c, h, w, kernel, strides, pads = case[:6]
    dil = case[6] if len(case) > 6 else (1, 1)
    one_d = h == 1
    for n in (1, 2):
        x = rand((n, c, h, w), seed=c * h + w, lo=-4, hi=8)
        x[0, c // 2, h // 2, w // 3] = np.nan
        x[-1, c - 1, h - 1, 0] = np.inf
        x[0, 0, 0, w - 1] = -np.inf
        oh = (h + pads[0] + pads[2] - dil[0] * (kernel[0] - 1) - 1) // strides[0] + 1
        ow = (w + pads[1] + pads[3] - dil[1] * (kernel[1] - 1) - 1) // strides[1] + 1
        feeds = {"X": x[:, :, 0] if one_d else x}
        if post == "residual":
            r = rand((n, c, oh, ow), seed=ow)
            feeds["R"] = r[:, :, 0] if one_d else r
        m = _blocked16_model(x.shape, kernel, strides, pads, post, one_d, dil)
        for threads in (1, 2):
            # Sums of up to 49 products of magnitude 8: float rounding about 3e-6 absolute,
            # relative to results the residual brings near zero.
            check(m, feeds, threads=threads, rtol=1e-5, atol=3e-5)


@pytest.mark.parametrize("hw", [(1, 1), (1, 15), (4, 4), (5, 7), (20, 20), (3, 33)], ids=str)
@pytest.mark.parametrize("post", ["none", "clip", "residual"])
def test_depthwise_1x1(hw, post):
    """1x1 depthwise (a per-channel scale and bias; without padding or strides one span per
    plane), with NaN and infinities, and with padding and strides 2 (the general kernels)."""
    h, w = hw
    x = rand((2, 20, h, w), seed=h * w, lo=-4, hi=8)
    x[0, 3, h // 2, w // 2] = np.nan
    x[1, 5, 0, w - 1] = np.inf
    for strides, pads in (((1, 1), (0, 0, 0, 0)), ((1, 1), (1, 0, 0, 2)), ((2, 2), (0, 0, 0, 0))):
        oh = (h + pads[0] + pads[2] - 1) // strides[0] + 1
        ow = (w + pads[1] + pads[3] - 1) // strides[1] + 1
        feeds = {"X": x}
        if post == "residual":
            feeds["R"] = rand((2, 20, oh, ow), seed=ow)
        m = _blocked16_model(x.shape, (1, 1), strides, pads, post, False)
        for threads in (1, 2):
            check(m, feeds, threads=threads)


@pytest.mark.parametrize("isa", ["sse2", "avx2", "avx512"])
def test_pools_and_depthwise_each_isa(isa, tmp_path):
    """Pooling, depthwise convolutions, FusedExpandDepthwise (its bands with the AVX-512
    in-place depthwise kernel, or with the padded-buffer one below AVX-512) and float
    ReduceMax / ReduceMin on each path."""
    import os
    import subprocess
    import sys

    cases = {}
    for i, (xs, c_out, k, s, pads, expand) in enumerate(DW_ISA_CASES):
        cases[f"dw_{i}"] = (_depthwise_model(xs, c_out, k, s, pads, expand), rand(xs))
    for i, (xs, attrs) in enumerate(WIDE_POOL_CASES + POOL_CASES[3:11]):
        x = rand(xs)
        x.flat[::7] = -3e38
        for op in ("MaxPool", "AveragePool"):
            cases[f"{op}_{i}"] = (node_model(op, {"X": x}, ["Y"], attrs=attrs, opset=12), x)
    for op in ("GlobalMaxPool", "GlobalAveragePool"):
        for n in (1, 7, 33, 100, 1000):
            x = rand((2, 3, n))
            cases[f"{op}_{n}"] = (node_model(op, {"X": x}, ["Y"]), x)
    # ReduceMax / ReduceMin over float and double rows of every remainder (their loops are
    # per ISA too), with a NaN in one row.
    for op in ("ReduceMax", "ReduceMin"):
        for dt in (F32, F64):
            for n in (1, 5, 17, 40, 333):
                x = rand((3, n)).astype(dt)
                x[1, n // 2] = np.nan
                cases[f"{op}_{dt.__name__}_{n}"] = (
                    node_model(op, {"X": x}, ["Y"], attrs=dict(axes=[1], keepdims=0), opset=13),
                    x)
    packed = {}
    for key, (m, x) in cases.items():
        pair = np.empty(2, dtype=object)
        pair[0], pair[1] = m.SerializeToString(), x
        packed[key] = pair
    np.savez(tmp_path / "in.npz", **packed)
    r = subprocess.run([sys.executable, "-c", _POOL_ISA_SCRIPT, str(tmp_path / "in.npz"),
                        str(tmp_path / "out.npz")], env=dict(os.environ, ORTLITE_FAST_ISA=isa),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = np.load(tmp_path / "out.npz")
    for key, (m, x) in cases.items():
        if key.startswith("Reduce"):
            # numpy: NaN propagates, as in ortlite (onnxruntime's ReduceMax skips it).
            expected = (np.max if key.startswith("ReduceMax") else np.min)(x, axis=1)
        else:
            expected = run_ort(m, {"X": x})[0]
        np.testing.assert_allclose(out[key], expected, rtol=1e-5, atol=1e-5, equal_nan=True,
                                   err_msg=key)


@pytest.mark.parametrize("shape", [(1, 16, 32, 32), (2, 5, 37, 35), (1, 3, 2, 2), (1, 7, 6, 66),
                                   (3, 2, 9, 31), (1, 64, 112, 112)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("threads", [1, 2])
def test_maxpool_2x2_stride2(shape, threads):
    """MaxPool 2x2 stride 2 without padding (its own AVX-512 kernel where the CPU has it):
    odd sizes drop the last row / column, rows of 1 to 56 outputs (masked tails of a
    16-output vector), -inf inputs, against onnxruntime."""
    x = rng(41).standard_normal(shape).astype(F32)
    x.reshape(-1)[::7] = -np.inf
    model = helpers.node_model("MaxPool", {"x": x}, ["y"],
                               attrs={"kernel_shape": [2, 2], "strides": [2, 2]})
    expected = run_ort(model, {"x": x})[0]
    actual = run_lite(model, {"x": x}, threads)[0]
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected)


# Linear Resize of 8- and 16-bit integers takes the per-plane path (two axes at most); its
# integers are the ONNX reference's (double arithmetic, rounded half to even, saturated)
# bit for bit, including the near-ties of inexact weights (scales 1.7, 0.6, 2.5).
# onnxruntime truncates instead, so it is not the oracle here.
INT_RESIZE_CASES = [((1, 3, 24, 32), [1, 1, 2, 2]), ((1, 3, 24, 32), [1, 1, 0.5, 0.5]),
                    ((2, 5, 7, 9), [1, 1, 1.7, 0.6]), ((1, 1, 1, 13), [1, 1, 3, 1.3]),
                    ((3, 11, 5), [1, 1, 2.5]), ((2, 3, 6, 4), [1, 1, 1, 2]),
                    ((2, 3, 6, 4), [1, 1, 2, 1]), ((1, 2, 1, 1), [1, 1, 5, 3])]


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16])
@pytest.mark.parametrize("ctm", ["half_pixel", "asymmetric", "align_corners",
                                 "pytorch_half_pixel", "half_pixel_symmetric"])
@pytest.mark.parametrize("shape,scales", INT_RESIZE_CASES)
def test_resize_linear_small_ints_match_reference(dtype, ctm, shape, scales):
    info = np.iinfo(dtype)
    x = rng(len(shape)).integers(info.min, int(info.max) + 1, size=shape).astype(dtype)
    consts = {"roi": np.array([], np.float32), "scales": np.array(scales, np.float32)}
    m = node_model("Resize", {"X": x}, ["Y"], attrs=dict(mode="linear",
                   coordinate_transformation_mode=ctm), opset=19, consts=consts)
    expected = ReferenceEvaluator(m).run(None, {"X": x})[0]
    for threads in (1, 2):
        (actual,) = run_lite(m, {"X": x}, threads=threads)
        assert actual.dtype == dtype
        np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("nbox,ncls,max_out,thr", [(50, 3, 10, None), (300, 4, 50, 0.2),
                                                   (1, 1, 5, None), (200, 2, 0, None),
                                                   (120, 3, 1000, 0.0)])
def test_non_max_suppression_matches_onnxruntime(center, nbox, ncls, max_out, thr):
    """Overlapping random boxes (corners in either order, some of zero area), tied scores,
    two batch items: selected indices and their order as onnxruntime's."""
    r = rng(nbox + ncls)
    xy = r.uniform(0, 50, size=(2, nbox, 2)).astype(F32)
    wh = r.uniform(0, 20, size=(2, nbox, 2)).astype(F32)
    wh[:, ::17] = 0
    if center:
        boxes = np.concatenate([xy, wh], axis=-1)
    else:
        boxes = np.concatenate([xy, xy + wh], axis=-1)[..., [2, 1, 0, 3]]  # y1 x0 y0 x1
    scores = np.round(r.uniform(0, 1, size=(2, ncls, nbox)), 1).astype(F32)  # many ties
    feeds = {"boxes": boxes, "scores": scores}
    consts = {"max": np.array([max_out], np.int64), "iou": np.array([0.4], F32)}
    if thr is not None:
        consts["thr"] = np.array([thr], F32)
    m = node_model("NonMaxSuppression", feeds, ["y"], out_dtypes=[np.int64],
                   attrs=dict(center_point_box=center), opset=11, consts=consts)
    (got,) = run_lite(m, feeds)
    np.testing.assert_array_equal(got, run_ort(m, feeds)[0])


def _affine_grid_numpy(theta, size, align):
    """AffineGrid's definition in float64: base coordinates per axis (x over the last),
    then theta @ (x, y[, z], 1) for every point."""
    spatial = size[2:]
    axes = []
    for n in spatial:
        i = np.arange(n, dtype=np.float64)
        if align:
            axes.append(np.zeros(n) if n <= 1 else -1 + 2 * i / (n - 1))
        else:
            axes.append((2 * i + 1) / n - 1)
    grids = np.meshgrid(*axes, indexing="ij")  # (D,) H, W
    coords = np.stack(list(grids[::-1]) + [np.ones_like(grids[0])], axis=-1)  # x, y[, z], 1
    return np.einsum("...c,brc->b...r", coords, theta.astype(np.float64))


@pytest.mark.parametrize("size", [[2, 3, 5, 7], [1, 1, 1, 9], [3, 2, 4, 1, 6], [2, 1, 64, 64],
                                  [1, 1, 0, 4]])
@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("dtype", [F32, F64])
def test_affine_grid_matches_numpy(size, align, dtype):
    k = len(size) - 2
    theta = rng(sum(size)).standard_normal((size[0], k, k + 1)).astype(dtype)
    feeds = {"theta": theta}
    m = node_model("AffineGrid", feeds, ["y"], attrs=dict(align_corners=align), opset=20,
                   consts={"size": np.array(size, np.int64)})
    (got,) = run_lite(m, feeds)
    ref = _affine_grid_numpy(theta, size, align)
    assert got.dtype == dtype and got.shape == tuple(size[:1] + size[2:] + [k])
    tol = 1e-6 if dtype == F32 else 1e-13
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)


def test_non_max_suppression_sparse_boxes_match_onnxruntime():
    """Few overlaps: most candidates are kept until max_output_boxes_per_class stops it."""
    r = rng(77)
    xy = r.uniform(0, 500, size=(1, 1500, 2)).astype(F32)
    wh = r.uniform(5, 80, size=(1, 1500, 2)).astype(F32)
    feeds = {"boxes": np.concatenate([xy, xy + wh], axis=-1),
             "scores": r.uniform(0, 1, size=(1, 6, 1500)).astype(F32)}
    consts = {"max": np.array([100], np.int64), "iou": np.array([0.5], F32),
              "thr": np.array([0.3], F32)}
    m = node_model("NonMaxSuppression", feeds, ["y"], out_dtypes=[np.int64], opset=11,
                   consts=consts)
    np.testing.assert_array_equal(run_lite(m, feeds)[0], run_ort(m, feeds)[0])


def test_non_max_suppression_nan_scores_come_last():
    """NaN scores (no threshold) are taken after every number, in index order."""
    boxes = np.array([[[0, 0, 1, 1], [0, 2, 1, 3], [0, 4, 1, 5], [0, 6, 1, 7], [0, 8, 1, 9]]],
                     F32)
    scores = np.array([[[np.nan, 0.2, np.nan, 0.9, 0.5]]], F32)
    feeds = {"boxes": boxes, "scores": scores}
    m = node_model("NonMaxSuppression", feeds, ["y"], out_dtypes=[np.int64], opset=11,
                   consts={"max": np.array([10], np.int64)})
    (got,) = run_lite(m, feeds)
    np.testing.assert_array_equal(got[:, 2], [3, 4, 1, 0, 2])
    m = node_model("NonMaxSuppression", feeds, ["y"], out_dtypes=[np.int64], opset=11,
                   consts={"max": np.array([4], np.int64)})
    np.testing.assert_array_equal(run_lite(m, feeds)[0][:, 2], [3, 4, 1, 0])


# ---- LRN ------------------------------------------------------------------------------------


def lrn_reference(x, size, alpha, beta, bias):
    """LRN in double, as the ONNX spec writes it: the window of channel c is [c - floor((size
    - 1) / 2), c + ceil((size - 1) / 2)] cut to the channels that exist."""
    x = x.astype(np.float64)
    c = x.shape[1]
    lo, hi = (size - 1) // 2, size // 2
    sq = np.zeros_like(x)
    for ch in range(c):
        for j in range(max(0, ch - lo), min(c - 1, ch + hi) + 1):
            sq[:, ch] += x[:, j] ** 2
    return x / (np.float64(np.float32(bias)) + np.float64(np.float32(alpha)) / size * sq) ** np.float64(
        np.float32(beta))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [F32, F64, F16])
def test_lrn_windows_and_betas(threads, dtype):
    """LRN over planes split between threads (one task per image and channel), even and odd
    window sizes, the usual beta 0.75 (computed through square roots) and others, against a
    double-precision numpy oracle and, for float with odd sizes over 4-D inputs, onnxruntime."""
    g = np.random.default_rng(31)
    for shape, size, alpha, beta, bias in (((2, 16, 9, 11), 5, 1e-4, 0.75, 1.0),
                                            ((1, 7, 30, 30), 2, 0.5, 0.75, 2.0),
                                            ((1, 9, 13), 4, 3.0, 0.6, 1.5),
                                            ((3, 5, 4, 4, 3), 1, 0.1, 1.3, 0.7),
                                            ((1, 64, 56, 56), 5, 2e-4, 0.75, 1.0)):
        x = (g.standard_normal(shape) * 3).astype(dtype)
        node = helper.make_node("LRN", ["x"], ["y"], size=size, alpha=alpha, beta=beta, bias=bias)
        m = helpers.make_model([node], [("x", dtype, list(shape))], [("y", dtype, None)], opset=13)
        got = run_lite(m, {"x": x}, threads)[0]
        want = lrn_reference(x, size, alpha, beta, bias)
        tol = 2e-3 if dtype == F16 else 1e-6 if dtype == F32 else 1e-13
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)
        if dtype == F32 and size % 2 == 1 and len(shape) == 4:  # onnxruntime's LRN takes these
            check_against_ort(m, {"x": x})


@pytest.mark.parametrize("four_d, mask, causal, nonpad", [
    (True, None, False, [5, 2]),
    (True, "bool", False, [7, 0]),
    (True, "float", True, [4, 7]),
    (False, None, False, [1, 6]),
    (False, "float", False, [7, 7]),
])
def test_attention_nonpad_kv_seqlen(four_d, mask, causal, nonpad):
    # Attention (opset 24): key / value positions from nonpad_kv_seqlen[b] on are padding and
    # get no weight; the mask may then be shorter than the keys (padded with -inf / False).
    # Against onnx's reference implementation.
    B, Hq, Hkv, Sq, Skv, D, Dv = 2, 4, 2, 3, 7, 8, 5
    r = np.random.default_rng(len(nonpad) + sum(nonpad))
    if four_d:
        q = r.standard_normal((B, Hq, Sq, D)).astype(np.float32)
        k = r.standard_normal((B, Hkv, Skv, D)).astype(np.float32)
        v = r.standard_normal((B, Hkv, Skv, Dv)).astype(np.float32)
        attrs = {"is_causal": int(causal)}
    else:
        q = r.standard_normal((B, Sq, Hq * D)).astype(np.float32)
        k = r.standard_normal((B, Skv, Hkv * D)).astype(np.float32)
        v = r.standard_normal((B, Skv, Hkv * Dv)).astype(np.float32)
        attrs = {"is_causal": int(causal), "q_num_heads": Hq, "kv_num_heads": Hkv}
    feeds = {"Q": q, "K": k, "V": v}
    order = ["Q", "K", "V"]
    if mask == "bool":
        feeds["attn_mask"] = r.random((Sq, max(nonpad))) < 0.8
        feeds["attn_mask"][:, 0] = True
    elif mask == "float":
        feeds["attn_mask"] = r.standard_normal((B, 1, Sq, Skv)).astype(np.float32)
    order += ["attn_mask" if mask else "", "", ""]
    feeds["nonpad_kv_seqlen"] = np.array(nonpad, np.int64)
    order.append("nonpad_kv_seqlen")
    model = node_model("Attention", feeds, ["Y"], attrs=attrs, opset=24, order=order,
                       out_dtypes=[np.float32])
    # onnx's reference adds the padding mask in place, which fails for B > 1 unless the
    # mask is already 4-D: it gets the mask broadcast to [B, 1, Sq, L] (zeros when absent).
    ref_feeds = dict(feeds)
    m = feeds.get("attn_mask", np.zeros((Sq, Skv), np.float32))
    ref_feeds["attn_mask"] = np.ascontiguousarray(np.broadcast_to(m, (B, 1, Sq, m.shape[-1])))
    ref_order = list(order)
    ref_order[3] = "attn_mask"
    ref_model = node_model("Attention", ref_feeds, ["Y"], attrs=attrs, opset=24,
                           order=ref_order, out_dtypes=[np.float32])
    expected = ReferenceEvaluator(ref_model).run(None, ref_feeds)[0]
    (actual,) = helpers.run_ortlite(model, feeds)
    # A batch entry with no key left has no defined softmax: NaN in both.
    assert_same(actual, expected, rtol=1e-5, atol=1e-6)


def test_attention_nonpad_kv_seqlen_errors():
    q = np.zeros((1, 2, 3, 4), np.float32)
    kv = np.zeros((1, 2, 5, 4), np.float32)
    order = ["Q", "K", "V", "", "", "", "nonpad_kv_seqlen"]
    for nonpad, msg in ((np.array([6], np.int64), "outside \\[0, 5\\]"),
                        (np.array([-1], np.int64), "outside"),
                        (np.array([2, 2], np.int64), "must be int64 of shape \\[1\\]"),
                        (np.array([2], np.int32), "must be int64")):
        feeds = {"Q": q, "K": kv, "V": kv, "nonpad_kv_seqlen": nonpad}
        model = node_model("Attention", feeds, ["Y"], opset=24, order=order,
                           out_dtypes=[np.float32])
        with pytest.raises(Exception, match=msg):
            helpers.run_ortlite(model, feeds)
    past = np.zeros((1, 2, 1, 4), np.float32)
    feeds = {"Q": q, "K": kv, "V": kv, "pk": past, "pv": past,
             "nonpad_kv_seqlen": np.array([2], np.int64)}
    model = node_model("Attention", feeds, ["Y"], opset=24,
                       order=["Q", "K", "V", "", "pk", "pv", "nonpad_kv_seqlen"],
                       out_dtypes=[np.float32])
    with pytest.raises(Exception, match="cannot be used with past_key"):
        helpers.run_ortlite(model, feeds)


NAN_POOL_CASES = [
    ((1, 3, 8, 8), dict(kernel_shape=[2, 2], strides=[2, 2])),
    ((1, 3, 9, 11), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 2, 10, 40), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    ((1, 2, 10, 40), dict(kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2])),
    ((2, 3, 14, 14), dict(kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 2, 12, 13), dict(kernel_shape=[3, 3], strides=[3, 3], ceil_mode=1)),
    ((1, 2, 12, 13), dict(kernel_shape=[3, 2], dilations=[2, 2], pads=[2, 1, 2, 1])),
    ((1, 4, 30), dict(kernel_shape=[4], strides=[2], pads=[1, 2])),
    ((1, 2, 5, 6, 7), dict(kernel_shape=[2, 3, 2], strides=[1, 2, 2], pads=[0, 1, 1, 1, 1, 0])),
    ((1, 8, 7, 7), dict(kernel_shape=[7, 7])),
]


def max_pool_skip_nan_reference(x, out_shape, attrs):
    """numpy: each window's maximum over its non-NaN taps inside the input, NaN when none."""
    n = x.ndim - 2
    k = attrs.get("kernel_shape", list(x.shape[2:]))
    s = attrs.get("strides", [1] * n)
    d = attrs.get("dilations", [1] * n)
    pb = attrs.get("pads", [0] * 2 * n)[:n]
    y = np.empty(out_shape, x.dtype)
    for o in itertools.product(*(range(v) for v in out_shape[2:])):
        idx = []
        for a in range(n):
            taps = o[a] * s[a] - pb[a] + np.arange(k[a]) * d[a]
            idx.append(taps[(taps >= 0) & (taps < x.shape[2 + a])])
        win = x[(slice(None), slice(None)) + np.ix_(*idx)].reshape(x.shape[0], x.shape[1], -1)
        num = np.where(np.isnan(win), -np.inf, win).max(axis=2)
        y[(slice(None), slice(None)) + o] = np.where(np.isnan(win).all(axis=2), np.nan, num)
    return y


@pytest.mark.parametrize("dtype", [F32, F64, F16])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("xs,attrs", NAN_POOL_CASES)
def test_maxpool_skips_nan(xs, attrs, threads, dtype):
    """MaxPool / GlobalMaxPool skip NaN inputs: a window's maximum is over its non-NaN values,
    NaN when all of them are NaN (padding does not count); every kernel path (2x2 stride 2,
    3x3 stride 2, stride 1, the general rows, 1-D, 3-D, the whole window), with blocks of
    NaN, lone NaN, -inf and +inf, against numpy and onnxruntime."""
    g = np.random.default_rng(sum(xs) + len(attrs))
    x = g.standard_normal(xs).astype(dtype)
    flat = x.reshape(xs[0] * xs[1], -1)
    flat[0, :] = np.nan  # a channel of NaN only
    planes = x.reshape(xs[0] * xs[1], *xs[2:])
    planes[1, ...] = np.where(g.random(xs[2:]) < 0.5, np.nan, planes[1])  # half NaN
    planes[-1][(slice(0, 3),) * len(xs[2:])] = np.nan  # a NaN corner block
    flat[-1, -1] = -np.inf
    if flat.shape[0] > 2:
        flat[2, :] = -np.inf
        flat[2, ::3] = np.nan  # -inf and NaN only: -inf wherever a -inf is in the window
    for op, a in (("MaxPool", attrs), ("GlobalMaxPool", {})):
        m = node_model(op, {"X": x}, ["Y"], attrs=a)
        got = run_lite(m, {"X": x}, threads)[0]
        want = max_pool_skip_nan_reference(x, got.shape, a)
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(got, want, err_msg=f"{op} {xs} {a}")
        if op == "GlobalMaxPool" and dtype == F64:
            continue  # onnxruntime has no double GlobalMaxPool
        ort_y = run_ort(m, {"X": x})[0]
        assert got.shape == ort_y.shape
        # onnxruntime agrees wherever a window holds no NaN and a value above -inf. With NaN
        # its result depends on the path and on where the NaN sits (its vector max passes a
        # NaN on when it is the newer operand; an all-NaN window gives NaN on its main float
        # path, the type's lowest value or -inf on the others), and its other paths give the
        # type's lowest value for a window of -inf.
        nan_free = max_pool_skip_nan_reference(np.isnan(x).astype(x.dtype), got.shape, a) == 0
        same = nan_free & (want > -np.inf)
        np.testing.assert_array_equal(got[same], ort_y[same])


SMALL_PLANE_POOLS = [
    ((1, 256, 14, 14), dict(kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 40, 56, 56), dict(kernel_shape=[3, 3], strides=[3, 3], pads=[1, 1, 1, 1])),
    ((1, 33, 7, 7), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ((2, 16, 12, 12), dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)),
    ((1, 21, 9, 11), dict(kernel_shape=[3, 2], strides=[3, 2], pads=[0, 1, 2, 0], ceil_mode=1)),
    ((1, 48, 3, 40), dict(kernel_shape=[3, 2], strides=[3, 2], ceil_mode=1)),
    ((1, 17, 10, 10), dict(kernel_shape=[5, 5], pads=[2, 2, 2, 2])),
    ((1, 64, 14, 14), dict(kernel_shape=[2, 2], strides=[2, 2])),
    ((1, 24, 8, 8), dict(kernel_shape=[4, 4], strides=[4, 4], pads=[3, 3, 3, 3])),
    ((1, 16, 20, 24), dict(kernel_shape=[3, 3], strides=[2, 2], dilations=[2, 2])),
    ((1, 20, 56, 56), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    ((1, 18, 40, 39), dict(kernel_shape=[5, 5], strides=[2, 2], pads=[2, 2, 2, 2])),
    ((1, 32, 9, 9), dict(kernel_shape=[7, 7], strides=[2, 2], pads=[3, 3, 3, 3], ceil_mode=1)),
    ((1, 17, 20, 20), dict(kernel_shape=[13, 13], pads=[6, 6, 6, 6])),
    ((1, 16, 13, 30), dict(kernel_shape=[2, 5], strides=[1, 3], pads=[1, 0, 0, 4],
                           dilations=[3, 2])),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("xs,attrs", SMALL_PLANE_POOLS)
def test_pools_on_small_planes(xs, attrs, threads):
    """Small planes with short rows (16 channels at a time, the channels in the lanes, and
    the channels left over): MaxPool exact and AveragePool with and without
    count_include_pad at opsets 11 and 19 against onnxruntime (dilations: MaxPool only, as
    onnxruntime's AveragePool has none before opset 19), and MaxPool over NaN windows
    against numpy."""
    x = np.random.default_rng(sum(xs)).standard_normal(xs).astype(F32)
    m = node_model("MaxPool", {"X": x}, ["Y"], attrs=attrs)
    np.testing.assert_array_equal(run_lite(m, {"X": x}, threads)[0], run_ort(m, {"X": x})[0])
    if "dilations" not in attrs:
        for opset, pad in ((11, 0), (11, 1), (19, 1)):
            a = dict(attrs, count_include_pad=pad)
            m = node_model("AveragePool", {"X": x}, ["Y"], attrs=a, opset=opset)
            got = run_lite(m, {"X": x}, threads)[0]
            assert_same([got], run_ort(m, {"X": x}), rtol=1e-6, atol=1e-6)
    xn = x.copy()
    planes = xn.reshape(-1, *xs[2:])
    planes[0] = np.nan
    planes[-1][:3, :3] = np.nan
    planes[1][::2] = -np.inf
    m = node_model("MaxPool", {"X": xn}, ["Y"], attrs=attrs)
    got = run_lite(m, {"X": xn}, threads)[0]
    np.testing.assert_array_equal(got, max_pool_skip_nan_reference(xn, got.shape, attrs))
