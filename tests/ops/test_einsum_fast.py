"""Einsum evaluated as diagonals, sums and pairwise batched products
(src/providers/cpu/math/einsum.cc), compared with numpy.einsum (the reference for
every element type, implicit outputs, size-1 broadcasting and zero-size dims) and with
onnxruntime where it has a kernel (float, double, int32, int64; lowercase labels): matrix
products in every operand layout, attention, transposes, traces, diagonals, sums,
ellipsis broadcasting, repeated labels across three operands, 1 and 2 threads, the
baseline ISA paths, and the typed errors of bad equations."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import ortlite
from helpers import ROOT, TESTS, make_model, run_lite, run_ort

RNG = np.random.default_rng(20261206)

F16, F32, F64 = np.float16, np.float32, np.float64
ORT_TYPES = (F32, F64, np.int32, np.int64)
_ORT_ERRORS = (onnxruntime.capi.onnxruntime_pybind11_state.RuntimeException,
               onnxruntime.capi.onnxruntime_pybind11_state.Fail,
               onnxruntime.capi.onnxruntime_pybind11_state.InvalidArgument)


def einsum_model(eq, arrays, opset=17):
    names = [f"x{i}" for i in range(len(arrays))]
    node = helper.make_node("Einsum", names, ["y"], equation=eq)
    return make_model([node], [(n, a.dtype, list(a.shape)) for n, a in zip(names, arrays)],
                      [("y", arrays[0].dtype, None)], opset=opset)


def data(shape, dtype, rng=RNG):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) > 0.5
    if dtype.kind in "iu":
        lo = 0 if dtype.kind == "u" else -4
        return rng.integers(lo, 5, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def reference(eq, arrays):
    """numpy.einsum in a wide type, cast back to the inputs' type."""
    dtype = arrays[0].dtype
    if dtype == np.bool_:
        return np.einsum(eq, *[a.astype(np.int64) for a in arrays]) != 0
    if dtype.kind in "iu":
        # int64 arithmetic wraps like the narrower types; the cast keeps the low bits.
        return np.einsum(eq, *[a.astype(np.int64) for a in arrays]).astype(dtype)
    return np.einsum(eq, *[a.astype(np.float64) for a in arrays]).astype(dtype)


def tolerance(dtype, k=64):
    dtype = np.dtype(dtype)
    if dtype == F16:
        return dict(rtol=1e-2, atol=1e-2 * max(1.0, np.sqrt(k)))
    if dtype == F32:
        return dict(rtol=2e-5, atol=2e-5 * max(1.0, np.sqrt(k)))
    return dict(rtol=1e-12, atol=1e-12 * max(1.0, np.sqrt(k)))


def check(eq, shapes, dtype=F32, threads=(1, 2), ort=True, arrays=None):
    arrays = arrays if arrays is not None else [data(s, dtype) for s in shapes]
    model = einsum_model(eq, arrays)
    feeds = {f"x{i}": a for i, a in enumerate(arrays)}
    expected = reference(eq, arrays)
    summed = max(1, int(np.prod([max(1, d) for a in arrays for d in a.shape])) //
                 max(1, expected.size))
    for t in threads:
        (got,) = run_lite(model, feeds, threads=t)
        assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
        assert got.shape == expected.shape, (eq, got.shape, expected.shape)
        if expected.dtype.kind in "iub":
            np.testing.assert_array_equal(got, expected, err_msg=f"{eq} threads={t}")
        else:
            np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64),
                                       err_msg=f"{eq} threads={t}",
                                       **tolerance(dtype, min(summed, 4096)))
    if ort and np.dtype(dtype) in [np.dtype(t) for t in ORT_TYPES] and eq == eq.lower():
        try:
            (want,) = run_ort(model, feeds)
        except _ORT_ERRORS:
            return got  # onnxruntime fails on a few valid equations ('ijk->ki'): numpy decides
        if np.dtype(dtype).kind in "iu":
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, **tolerance(dtype, min(summed, 4096)))
    return got


# (equation, input shapes): products in every layout of their operands, the cases a
# transformer writes, single-operand permutations, diagonals and sums.
CASES = [
    ("ij,jk->ik", [(7, 13), (13, 5)]),
    ("ij,jk->ik", [(64, 96), (96, 48)]),
    ("ij,kj->ik", [(33, 17), (29, 17)]),
    ("ji,jk->ik", [(17, 33), (17, 29)]),
    ("ji,kj->ik", [(17, 33), (29, 17)]),
    ("ij,jk->ki", [(40, 70), (70, 50)]),
    ("ij,jk", [(100, 20), (20, 50)]),
    ("bij,bjk->bik", [(8, 128, 64), (8, 64, 128)]),
    ("bij,bjk->bik", [(3, 5, 7), (3, 7, 9)]),
    ("bij,bjk->bik", [(64, 4, 4), (64, 4, 4)]),
    ("bij,bkj->bik", [(5, 33, 65), (5, 17, 65)]),
    ("zij,zjk->zik", [(256, 8, 8), (256, 8, 8)]),       # small products: the GEMM
    ("zij,zkj->zik", [(128, 12, 12), (128, 12, 12)]),
    ("zji,zjk->zik", [(128, 16, 16), (128, 16, 16)]),
    ("zi,zj->zij", [(512, 16), (512, 16)]),             # outer products: the loop
    ("zi,zi->z", [(4096, 16), (4096, 16)]),
    ("bam,bm->ba", [(16, 32, 48), (16, 48)]),
    ("bij,bjk->ibk", [(4, 9, 11), (4, 11, 6)]),
    ("bhqd,bhkd->bhqk", [(1, 12, 128, 64), (1, 12, 128, 64)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 17, 9), (2, 3, 13, 9)]),
    ("bhqk,bhkd->bhqd", [(1, 12, 128, 128), (1, 12, 128, 64)]),
    ("bhqk,bhkd->bhqd", [(2, 3, 17, 13), (2, 3, 13, 9)]),
    ("bqhd,bkhd->bhqk", [(2, 17, 3, 8), (2, 19, 3, 8)]),
    ("bhqk,bkhd->bqhd", [(2, 3, 17, 19), (2, 19, 3, 8)]),
    ("bhqd,bhkd->bhkq", [(2, 8, 64, 32), (2, 8, 64, 32)]),
    ("bsd,de->bse", [(4, 33, 48), (48, 20)]),
    ("bsd,ed->bse", [(4, 33, 48), (20, 48)]),
    ("ij->ji", [(512, 256)]),
    ("ij->ji", [(33, 17)]),
    ("ij->ji", [(1, 7)]),
    ("abc->cba", [(6, 5, 7)]),
    ("abcd->acbd", [(3, 17, 5, 16)]),
    ("ij->ij", [(5, 6)]),
    ("ii->i", [(512, 512)]),
    ("ii->i", [(7, 7)]),
    ("ii", [(9, 9)]),
    ("iij->j", [(4, 4, 6)]),
    ("iij->ji", [(4, 4, 6)]),
    ("ijk->", [(3, 4, 5)]),
    ("ij->", [(512, 256)]),
    ("ij->i", [(512, 256)]),
    ("ij->j", [(512, 256)]),
    ("ij->j", [(37, 19)]),
    ("ijk->j", [(5, 6, 7)]),
    ("ijk->ki", [(5, 6, 7)]),
    ("ijk->kj", [(5, 6, 7)]),
    ("ij->i", [(45, 7)]),             # short rows, eight at a time and the rest
    ("ij->i", [(4096, 16)]),
    ("ij->i", [(100, 1000)]),         # long rows: a column of ones through the GEMM
    ("ij->j", [(1000, 100)]),         # outer sums: a row of ones through the GEMM
    ("ijk->ik", [(64, 128, 7)]),      # column sums folded into lcm(K, 16) runs
    ("ijk->ik", [(6, 9, 32)]),
    ("ijk->ik", [(3, 5, 70)]),        # column sums, rows too long to fold
    ("ijk->j", [(64, 128, 32)]),      # the inner sum first, then the outer one
    ("ijkl->jl", [(8, 6, 5, 7)]),
    ("ijkl->jl", [(3, 4, 5, 70)]),
    ("ijkl->il", [(3, 4, 5, 6)]),
    ("ijkl->ik", [(3, 4, 5, 6)]),
    ("ijkl->k", [(3, 4, 5, 6)]),
    ("i,i", [(100000,), (100000,)]),
    ("i,i->", [(7,), (7,)]),
    ("i,i->i", [(7,), (7,)]),
    ("i,j->ij", [(500,), (600,)]),
    ("i,j->ji", [(5,), (6,)]),
    ("i,j", [(5,), (6,)]),
    ("ij,ij->ij", [(512, 512), (512, 512)]),
    ("ij,ji->ij", [(31, 17), (17, 31)]),
    ("ij,ij->", [(64, 48), (64, 48)]),
    ("ij,ij->i", [(64, 48), (64, 48)]),
    ("bi,b->bi", [(30, 40), (30,)]),
    ("ij,j->ij", [(300, 200), (200,)]),     # scaling: elementwise in C's memory order
    ("ij,i->ij", [(300, 200), (300,)]),
    ("ij,j->ji", [(30, 20), (20,)]),
    ("bij,bj->bij", [(8, 25, 26), (8, 26)]),
    ("bij,bi->bji", [(8, 25, 26), (8, 25)]),
    ("ij,j->i", [(30, 20), (20,)]),
    ("bi,bi->b", [(30, 40), (30, 40)]),
    ("ij,jk,kl->il", [(64, 128), (128, 96), (96, 32)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("bn,anm,bm->ba", [(16, 64), (32, 64, 48), (16, 48)]),
    ("bn,anm,bm->ba", [(3, 5), (4, 5, 6), (3, 6)]),
    ("ij,jk,ki->", [(7, 8), (8, 9), (9, 7)]),
    ("ii,ii,ii->i", [(6, 6), (6, 6), (6, 6)]),
    ("ij,ji,ii->i", [(6, 6), (6, 6), (6, 6)]),
    ("ab,bc,ca->abc", [(3, 4), (4, 5), (5, 3)]),
    ("abc,bd,ce->ade", [(3, 4, 5), (4, 6), (5, 7)]),
    ("ijk,jil->kl", [(4, 5, 6), (5, 4, 7)]),
    ("ij,jk", [(4, 6), (6, 5)]),
    ("ba,cb", [(4, 6), (5, 4)]),
    ("i,j,k->ijk", [(3,), (4,), (5,)]),
    ("...ij,...jk->...ik", [(4, 1, 64, 32), (1, 3, 32, 48)]),
    ("...ij,...jk->...ik", [(2, 3, 5, 7), (7, 4)]),
    ("...ij,...jk", [(2, 3, 5, 7), (3, 7, 4)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("i...i->...", [(3, 2, 3)]),
    ("...i,...i", [(2, 3), (3,)]),
    ("...,...", [(2, 3), (3,)]),
    ("...ij->...ji", [(2, 3, 4, 5)]),
    ("...->...", [(2, 3)]),
    ("b...d,b...d->b...", [(2, 3, 4, 5), (2, 3, 4, 5)]),
    (",->", [(), ()]),
    ("i,->i", [(3,), ()]),
    ("->", [()]),
]


@pytest.mark.parametrize("eq,shapes", CASES, ids=[f"{e}-{s}" for e, s in CASES])
def test_einsum_float32(eq, shapes):
    check(eq, shapes, F32)


# A subset for the other element types (products, permutations, diagonals, sums).
TYPED = [
    ("bij,bjk->bik", [(3, 17, 9), (3, 9, 13)]),
    ("bij,bkj->bik", [(3, 17, 9), (3, 13, 9)]),
    ("bji,bjk->bik", [(3, 9, 17), (3, 9, 13)]),
    ("bhqd,bhkd->bhqk", [(1, 4, 33, 16), (1, 4, 31, 16)]),
    ("ij,jk->ik", [(64, 96), (96, 48)]),
    ("ij->ji", [(65, 33)]),
    ("ii->i", [(9, 9)]),
    ("ii", [(9, 9)]),
    ("ij->", [(40, 50)]),
    ("ij->j", [(40, 50)]),
    ("ij->i", [(40, 50)]),
    ("ij->i", [(41, 7)]),
    ("ijk->ik", [(4, 9, 7)]),
    ("ijk->j", [(4, 9, 7)]),
    ("i,i", [(1000,), (1000,)]),
    ("i,j->ij", [(5,), (6,)]),
    ("ij,ij->ij", [(31, 17), (31, 17)]),
    ("ij,j->ij", [(31, 17), (17,)]),
    ("ij,jk,kl->il", [(6, 7), (7, 8), (8, 5)]),
    ("bn,anm,bm->ba", [(3, 5), (4, 5, 6), (3, 6)]),
    ("...ij,...jk->...ik", [(4, 1, 6, 5), (1, 3, 5, 7)]),
    ("ij,jk", [(4, 6), (6, 5)]),
]


@pytest.mark.parametrize("dtype", [F64, np.int64, np.int32, F16, np.uint32, np.uint64,
                                   np.int8, np.int16, np.uint8, np.uint16, np.bool_],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("eq,shapes", TYPED, ids=[f"{e}-{s}" for e, s in TYPED])
def test_einsum_dtypes(eq, shapes, dtype):
    check(eq, shapes, dtype)


def test_einsum_large_integer_products():
    """Products large enough for the integer loops' vector paths and cache blocks (over
    the summed dim, and over B's columns for dot products), in several layouts."""
    check("ij,jk->ik", [(20, 600), (600, 300)], np.int32)
    check("ij,kj->ik", [(10, 700), (50, 700)], np.int64)
    check("ij,kj->ik", [(10, 700), (50, 700)], np.uint32, ort=False)
    for eq, shapes in [("bij,bjk->bik", [(4, 70, 67), (4, 67, 70)]),
                       ("bij,bkj->bik", [(4, 70, 67), (4, 70, 67)]),
                       ("bji,bjk->bik", [(4, 67, 70), (4, 67, 70)]),
                       ("bji,bkj->bik", [(4, 67, 70), (4, 70, 67)])]:
        check(eq, shapes, np.int32)


def test_einsum_integer_wraparound():
    """Integer products and sums wrap around as numpy's and onnxruntime's do."""
    big = np.array([[2**30 + 3, 2**31 - 1], [-(2**31), 12345]], dtype=np.int32)
    check("ij,jk->ik", None, np.int32, arrays=[big, big.T.copy()])
    check("ij->", None, np.int32, arrays=[big])
    big64 = np.array([[2**62 + 3, 2**63 - 1], [-(2**63), 12345]], dtype=np.int64)
    check("ij,jk->ik", None, np.int64, arrays=[big64, big64.T.copy()])
    u8 = np.array([[200, 100], [255, 3]], dtype=np.uint8)
    check("ij,jk->ik", None, np.uint8, arrays=[u8, u8])


def test_einsum_float_specials():
    """NaN and infinity propagate through products and sums; -0.0 survives a transpose."""
    a = np.array([[1.0, np.nan, 2.0], [np.inf, 1.0, -1.0]], dtype=F32)
    b = np.array([[1.0, 2.0], [0.5, 1.0], [3.0, 1.0]], dtype=F32)
    for eq, arrays in [("ij,jk->ik", [a, b]), ("ij->", [a]), ("ij->j", [a]), ("ij->i", [a]),
                       ("ij,ij->ij", [a, a])]:
        (got,) = run_lite(einsum_model(eq, arrays), {f"x{i}": x for i, x in enumerate(arrays)})
        want = np.einsum(eq, *[x.astype(np.float64) for x in arrays]).astype(F32)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=1e-6)
    z = np.array([[-0.0, 1.0], [2.0, -0.0]], dtype=F32)
    (got,) = run_lite(einsum_model("ij->ji", [z]), {"x0": z})
    assert np.signbit(got[0, 0]) and np.signbit(got[1, 1])
    # Products are sums started from +0: a -0.0 product gives +0.0 (numpy, onnxruntime).
    v = np.array([1.0, -0.0, 2.0], dtype=F32)
    for eq, arrays in [("ij,j->ij", [z, v[:2]]), ("ij,ij->ij", [z, z + 1]), ("i,j->ij", [v, v]),
                       ("ij,i->ij", [z, v[:2]]), ("i,i->i", [v, v])]:
        (got,) = run_lite(einsum_model(eq, arrays), {f"x{i}": x for i, x in enumerate(arrays)})
        want = np.einsum(eq, *arrays)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=eq)


@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(2, 1), (3, 4)]),   # size-1 dims broadcast against the other operand
    ("ij,jk->ik", [(2, 3), (1, 4)]),
    ("ij,ij->ij", [(2, 1), (2, 3)]),
    ("ij,ij->ij", [(2, 3), (2, 1)]),
    ("ij,ij->ij", [(1, 3), (4, 1)]),
    ("i,i->i", [(1,), (5,)]),
    ("bij,bjk->bik", [(1, 5, 6), (4, 6, 7)]),
    ("bij,bjk->bik", [(4, 5, 6), (1, 6, 7)]),
    ("...ij,...jk->...ik", [(4, 1, 2, 3), (1, 5, 3, 2)]),
    ("i...,i...->i...", [(2, 3), (2, 1)]),
    ("ij->ji", [(1, 1)]),
    ("ij,jk->ik", [(1, 1), (1, 1)]),
    ("bhqd,bhkd->bhqk", [(1, 1, 5, 4), (1, 1, 6, 4)]),
])
def test_einsum_size1_broadcast(eq, shapes):
    check(eq, shapes, F32)


@pytest.mark.parametrize("eq,shapes", [
    ("ij->", [(0, 3)]),
    ("ij->j", [(0, 3)]),
    ("ij->i", [(0, 3)]),
    ("ij,jk->ik", [(4, 0), (0, 5)]),
    ("ij,jk->ik", [(0, 3), (3, 5)]),
    ("ij,j->i", [(2, 0), (0,)]),
    ("ij,j->i", [(2, 0), (1,)]),
    ("bij,bjk->bik", [(0, 3, 4), (0, 4, 5)]),
    ("ii->i", [(0, 0)]),
])
def test_einsum_zero_size(eq, shapes):
    # onnxruntime rejects (or crashes on) some of these: numpy is the reference.
    check(eq, shapes, F32, ort=False)
    check(eq, shapes, np.int64, ort=False)


def test_einsum_implicit_output_sorts_like_numpy():
    """Implicit outputs list the labels that appear once in ASCII order (uppercase first)."""
    for eq, shapes in [("bA", [(2, 3)]), ("Ab", [(2, 3)]), ("ba", [(2, 3)]),
                       ("Ba,aC", [(2, 3), (3, 4)]), ("...ba", [(4, 2, 3)])]:
        check(eq, shapes, F32, ort=False)


def test_einsum_spaces_and_uppercase_labels():
    check("Ab, bC -> AC", [(3, 4), (4, 5)], F32, ort=False)
    check("bij , bjk", [(2, 3, 4), (2, 4, 5)], F32)


@pytest.mark.parametrize("eq,shapes,match", [
    ("ij,jk->ik", [(2, 3), (4, 5)], "disagree"),
    ("ij->ik", [(2, 3)], "not in the inputs"),
    ("ij->iij", [(2, 3)], "more than once"),
    ("ij", [(2, 3, 4)], "does not match"),
    ("ijk", [(2, 3)], "does not match"),
    ("...ijk", [(2, 3)], "more labels"),
    ("ij,jk", [(2, 3)], "terms"),
    ("i.j", [(2, 3)], "'\\.'"),
    ("...i...", [(2, 3)], "'\\.'"),
    ("i1", [(2, 3)], "invalid character"),
    ("ii->i", [(2, 3)], "different sizes"),
    ("...ij,...jk", [(2, 2, 3), (3, 3, 2)], "disagree"),
])
def test_einsum_bad_equations(eq, shapes, match):
    arrays = [data(s, F32) for s in shapes]
    model = einsum_model(eq, arrays)
    with pytest.raises(ortlite.InvalidArgument, match=match):
        run_lite(model, {f"x{i}": a for i, a in enumerate(arrays)})


def test_einsum_empty_equation_fails_at_load():
    a = np.ones((2,), F32)
    with pytest.raises(ortlite.InvalidArgument, match="empty"):
        run_lite(einsum_model("", [a]), {"x0": a})


def test_einsum_mixed_types_fail():
    a = np.ones((2, 3), F32)
    b = np.ones((3, 4), F64)
    node = helper.make_node("Einsum", ["x0", "x1"], ["y"], equation="ij,jk->ik")
    model = make_model([node], [("x0", F32, [2, 3]), ("x1", F64, [3, 4])], [("y", F32, None)])
    with pytest.raises((ortlite.InvalidArgument, ortlite.InvalidGraph)):
        run_lite(model, {"x0": a, "x1": b})


def test_einsum_thread_counts_agree():
    """Batched products split whole products (or rows) over the pool: same values."""
    for eq, shapes in [("bij,bjk->bik", [(12, 64, 32), (12, 32, 48)]),
                       ("ij,jk->ik", [(300, 200), (200, 100)]),
                       ("bij,bjk->bik", [(200, 3, 4), (200, 4, 5)]),
                       ("ij,ij->ij", [(300, 300), (300, 300)])]:
        arrays = [data(s, F32) for s in shapes]
        model = einsum_model(eq, arrays)
        feeds = {f"x{i}": a for i, a in enumerate(arrays)}
        outs = [run_lite(model, feeds, threads=t)[0] for t in (1, 2, 4)]
        for o in outs[1:]:
            np.testing.assert_allclose(o, outs[0], rtol=1e-5, atol=1e-5)


def test_einsum_baseline_isa_paths():
    """The GEMM, transpose and integer loops without AVX (ORTLITE_GEMM_ISA, ORTLITE_FAST_ISA
    and no BLAS) give the numpy results too."""
    code = textwrap.dedent("""
        import numpy as np
        from test_einsum_fast import check
        for dt in (np.float32, np.float64, np.int32, np.int64):
            for eq, shapes in [("bij,bjk->bik", [(3, 40, 33), (3, 33, 50)]),
                               ("bhqd,bhkd->bhqk", [(1, 4, 33, 16), (1, 4, 31, 16)]),
                               ("ij->ji", [(65, 33)]), ("ij->j", [(40, 50)]),
                               ("ii->i", [(9, 9)]), ("i,i", [(1000,), (1000,)]),
                               ("bn,anm,bm->ba", [(3, 5), (4, 5, 6), (3, 6)])]:
                check(eq, shapes, dt, ort=False)
        print("ok")
    """)
    env = dict(os.environ, ORTLITE_GEMM_ISA="sse2", ORTLITE_FAST_ISA="sse2", ORTLITE_GEMM="own")
    here = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = os.pathsep.join([here, TESTS, ROOT, env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300, cwd=here)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("opset", [12, 13, 18, 23])
def test_einsum_opsets(opset):
    a, b = data((3, 4), F32), data((4, 5), F32)
    (got,) = run_lite(einsum_model("ij,jk->ik", [a, b], opset=opset), {"x0": a, "x1": b})
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("eq,shapes", [("bij,bjk->bik", [(2, 9, 17), (2, 17, 5)]),
                                       ("ij->ji", [(7, 5)]), ("ij->j", [(40, 9)]),
                                       ("ii->i", [(6, 6)])])
def test_einsum_bfloat16(eq, shapes):
    """bfloat16 computes in float (between Casts: numpy has no bfloat16 arrays)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    arrays = [data(s, F32) for s in shapes]
    names = [f"x{i}" for i in range(len(arrays))]
    nodes = [helper.make_node("Cast", [n], [f"b{i}"], to=TensorProto.BFLOAT16)
             for i, n in enumerate(names)]
    nodes.append(helper.make_node("Einsum", [f"b{i}" for i in range(len(arrays))], ["e"],
                                  equation=eq))
    nodes.append(helper.make_node("Cast", ["e"], ["y"], to=TensorProto.FLOAT))
    model = make_model(nodes, [(n, F32, list(a.shape)) for n, a in zip(names, arrays)],
                       [("y", F32, None)])
    (got,) = run_lite(model, dict(zip(names, arrays)))
    rounded = [a.astype(ml_dtypes.bfloat16).astype(np.float64) for a in arrays]
    want = np.einsum(eq, *rounded).astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2)


def random_equation(rng):
    """One to three operands over labels a-e (repeats, size-1 dims, an ellipsis sometimes),
    implicit or explicit output; with the shapes numpy.einsum accepts it on (or None)."""
    sizes = {c: int(rng.choice([1, 2, 3, 5, 8, 17])) for c in "abcde"}
    use_ellipsis = rng.random() < 0.25
    ell_shape = [int(rng.choice([1, 2, 3])) for _ in range(rng.integers(0, 3))]
    terms, shapes = [], []
    for _ in range(rng.integers(1, 4)):
        t = "".join(rng.choice(list("abcde"), size=rng.integers(0, 5)))
        sh = [1 if rng.random() < 0.1 else sizes[c] for c in t]
        sh = [sh[t.index(c)] for c in t]  # a repeated label spans equal dims
        if use_ellipsis and rng.random() < 0.8:
            k = rng.integers(0, len(ell_shape) + 1)
            es = [1 if rng.random() < 0.2 else d for d in ell_shape[len(ell_shape) - k:]]
            pos = rng.integers(0, len(t) + 1)
            t, sh = t[:pos] + "..." + t[pos:], sh[:pos] + es + sh[pos:]
        terms.append(t)
        shapes.append(tuple(sh))
    eq = ",".join(terms)
    if rng.random() > 0.3:
        labels = sorted(set(eq.replace(".", "").replace(",", "")))
        out = "".join(rng.permutation(labels)[:rng.integers(0, len(labels) + 1)])
        if "..." in eq and rng.random() < 0.7:
            p = rng.integers(0, len(out) + 1)
            out = out[:p] + "..." + out[p:]
        eq += "->" + out
    if eq in ("", "->"):
        return None, None
    try:
        np.einsum(eq, *[np.ones(s) for s in shapes])
    except ValueError:
        return None, None
    return eq, shapes


def test_einsum_random_equations():
    """Seeded random equations against numpy in float64, int64 and float32."""
    rng = np.random.default_rng(7)
    done = 0
    for i in range(240):
        eq, shapes = random_equation(rng)
        if eq is None:
            continue
        check(eq, shapes, [F64, np.int64, F32][i % 3], ort=False)
        done += 1
    assert done > 150
