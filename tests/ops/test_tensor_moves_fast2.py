"""Row-wise Trilu (copy of the kept columns, fill of the rest, clamped k), NonZero's
count-then-write pass and the Depth/SpaceToDepth copies, against numpy and onnxruntime on
tiny, odd and large shapes, every storage dtype including strings, on 1 and 2 threads."""

import numpy as np
import pytest

import ortlite
from helpers import node_model, run_ort

THREADS = (1, 2)


def run_lite(model, feeds, threads):
    so = ortlite.SessionOptions()
    so.intra_op_num_threads = threads
    return ortlite.InferenceSession(model.SerializeToString(), so).run(None, feeds)


def values(shape, dtype, seed=0):
    g = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return g.integers(0, 2, shape).astype(np.bool_)
    if dtype.kind in "iu":
        return g.integers(0, 50, shape).astype(dtype)
    if dtype == object:
        return np.array([f"s{v}" for v in g.integers(0, 1000, int(np.prod(shape)))],
                        dtype=object).reshape(shape)
    return g.standard_normal(shape).astype(dtype)


def trilu_expected(x, k, upper):
    rows, cols = x.shape[-2:]
    i = np.arange(rows)[:, None]
    j = np.arange(cols)[None, :]
    keep = (j - i >= k) if upper else (j - i <= k)
    zero = "" if x.dtype == object else 0
    return np.where(keep, x, np.array(zero, dtype=x.dtype)).astype(x.dtype)


TRILU_SHAPES = [(1, 1), (3, 5), (5, 3), (2, 7, 17), (4, 33, 31), (2, 3, 64, 65), (8, 128, 96),
                (3, 1700, 40), (96, 2, 24, 7)]
TRILU_KS = [None, 0, 1, -1, 3, -4, 40, -40, 2**62, -(2**62), 2**63 - 1, -(2**63)]


@pytest.mark.parametrize("shape", TRILU_SHAPES)
@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("threads", THREADS)
def test_trilu_matches_numpy(shape, upper, threads):
    x = values(shape, np.float32, seed=len(shape))
    for k in TRILU_KS:
        consts = {} if k is None else {"k": np.array(k, np.int64)}
        m = node_model("Trilu", {"x": x}, ["y"], attrs={"upper": upper}, consts=consts,
                       opset=14)
        got = run_lite(m, {"x": x}, threads)[0]
        np.testing.assert_array_equal(got, trilu_expected(x, 0 if k is None else k, upper))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int64, np.int32,
                                   np.int8, np.uint8, np.bool_, object])
def test_trilu_dtypes(dtype):
    x = values((3, 9, 7), dtype, seed=3)
    for upper in (0, 1):
        for k in (0, 2, -3):
            m = node_model("Trilu", {"x": x}, ["y"], attrs={"upper": upper},
                           consts={"k": np.array(k, np.int64)}, opset=14)
            got = run_lite(m, {"x": x}, 2)[0]
            exp = trilu_expected(x, k, upper)
            assert got.dtype == exp.dtype
            np.testing.assert_array_equal(got, exp)


def test_trilu_against_ort_large_and_signed_zero():
    x = values((8, 512, 512), np.float32, seed=1)
    x[0, 3, 7] = -0.0
    x[0, 7, 3] = np.nan
    for upper in (0, 1):
        for k in (0, -5, 9):
            m = node_model("Trilu", {"x": x}, ["y"], attrs={"upper": upper},
                           consts={"k": np.array(k, np.int64)}, opset=14)
            exp = run_ort(m, {"x": x})[0]
            for t in THREADS:
                got = run_lite(m, {"x": x}, t)[0]
                np.testing.assert_array_equal(got.view(np.uint32), exp.view(np.uint32))


def test_trilu_empty():
    x = np.zeros((2, 0, 5), np.float32)
    m = node_model("Trilu", {"x": x}, ["y"], opset=14)
    assert run_lite(m, {"x": x}, 1)[0].shape == (2, 0, 5)


NONZERO_SHAPES = [(), (1,), (7,), (3, 5), (1, 64, 80, 80), (2, 3, 5, 7, 11), (4, 1), (1, 4),
                  (0, 3), (3, 0)]


@pytest.mark.parametrize("shape", NONZERO_SHAPES)
@pytest.mark.parametrize("density", [0.0, 0.1, 0.5, 1.0])
def test_nonzero_matches_numpy(shape, density):
    g = np.random.default_rng(7)
    x = np.where(g.random(shape) < density, g.standard_normal(shape), 0).astype(np.float32)
    x = np.asarray(x, np.float32).reshape(shape)
    m = node_model("NonZero", {"x": x}, ["y"], out_dtypes=[np.int64], opset=13)
    for t in THREADS:
        got = run_lite(m, {"x": x}, t)[0]
        exp = np.array(np.nonzero(x.reshape(shape if shape else (1,))), np.int64)
        exp = exp.reshape(len(shape) if shape else 1, -1)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, exp)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int64, np.int32,
                                   np.int8, np.uint8, np.bool_])
def test_nonzero_dtypes_against_ort(dtype):
    g = np.random.default_rng(11)
    x = (values((3, 17, 5), dtype, seed=2) * (g.random((3, 17, 5)) < 0.5)).astype(dtype)
    m = node_model("NonZero", {"x": x}, ["y"], out_dtypes=[np.int64], opset=13)
    got = run_lite(m, {"x": x}, 1)[0]
    np.testing.assert_array_equal(got, np.array(np.nonzero(x), np.int64))
    if dtype in (np.float32, np.int64, np.int32, np.uint8, np.bool_):  # onnxruntime has these
        np.testing.assert_array_equal(got, run_ort(m, {"x": x})[0])


def test_nonzero_float_edges():
    x = np.array([[0.0, -0.0, np.nan, np.inf], [-np.inf, 1e-45, 0.0, -1.0]], np.float32)
    m = node_model("NonZero", {"x": x}, ["y"], out_dtypes=[np.int64], opset=13)
    np.testing.assert_array_equal(run_lite(m, {"x": x}, 1)[0], np.array(np.nonzero(x)))
    h = x.astype(np.float16)
    m = node_model("NonZero", {"x": h}, ["y"], out_dtypes=[np.int64], opset=13)
    np.testing.assert_array_equal(run_lite(m, {"x": h}, 1)[0], np.array(np.nonzero(h)))


def space_to_depth_expected(x, b):
    n, c, h, w = x.shape
    t = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return t.reshape(n, c * b * b, h // b, w // b)


def depth_to_space_expected(x, b, mode):
    n, c, h, w = x.shape
    if mode == "DCR":
        t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, c // (b * b), h * b, w * b)


S2D_CASES = [((1, 1, 2, 2), 2), ((1, 3, 6, 10), 2), ((2, 5, 14, 6), 2), ((1, 16, 80, 80), 2),
             ((1, 16, 80, 80), 4), ((2, 3, 30, 30), 3), ((1, 2, 20, 15), 5), ((3, 4, 5, 7), 1),
             ((1, 64, 160, 160), 2), ((2, 7, 12, 36), 4)]


@pytest.mark.parametrize("shape,b", S2D_CASES)
@pytest.mark.parametrize("threads", THREADS)
def test_space_to_depth_matches_numpy(shape, b, threads):
    x = values(shape, np.float32, seed=b)
    m = node_model("SpaceToDepth", {"x": x}, ["y"], attrs={"blocksize": b}, opset=13)
    got = run_lite(m, {"x": x}, threads)[0]
    np.testing.assert_array_equal(got, space_to_depth_expected(x, b))
    if threads == 1 and np.prod(shape) < 200000:
        np.testing.assert_array_equal(got, run_ort(m, {"x": x})[0])


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int64, np.int32, np.int16,
                                   np.uint8, np.bool_, object])
@pytest.mark.parametrize("b", [2, 3, 4])
def test_space_to_depth_dtypes(dtype, b):
    x = values((2, 3, 4 * b, 3 * b), dtype, seed=5)
    m = node_model("SpaceToDepth", {"x": x}, ["y"], attrs={"blocksize": b}, opset=13)
    got = run_lite(m, {"x": x}, 2)[0]
    exp = space_to_depth_expected(x, b)
    assert got.dtype == exp.dtype
    np.testing.assert_array_equal(got, exp)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("shape,b", [((1, 4, 1, 1), 2), ((1, 12, 7, 9), 2), ((2, 27, 10, 10), 3),
                                     ((1, 64, 40, 40), 2), ((1, 256, 40, 40), 4),
                                     ((2, 3, 5, 7), 1), ((1, 50, 3, 4), 5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.uint8, np.bool_, object])
def test_depth_to_space_matches_numpy(mode, shape, b, dtype):
    x = values(shape, dtype, seed=b)
    m = node_model("DepthToSpace", {"x": x}, ["y"], attrs={"blocksize": b, "mode": mode},
                   opset=13)
    exp = depth_to_space_expected(x, b, mode)
    for t in THREADS:
        np.testing.assert_array_equal(run_lite(m, {"x": x}, t)[0], exp)
    if dtype == np.float32:
        np.testing.assert_array_equal(exp, run_ort(m, {"x": x})[0])


def test_space_to_depth_bad_shape_is_an_error():
    x = values((1, 2, 5, 4), np.float32)
    m = node_model("SpaceToDepth", {"x": x}, ["y"], attrs={"blocksize": 2}, opset=13)
    with pytest.raises(Exception, match="multiples of blocksize"):
        run_lite(m, {"x": x}, 1)


GATHER_CASES = [((5,), 0, (3,)), ((7, 3), 0, (2, 4)), ((7, 3), 1, (5,)), ((7, 3), -1, ()),
                ((64, 256, 100), -1, (50,)), ((64, 1000, 8), 1, (300,)), ((3, 5, 7, 11), 2, (4, 3)),
                ((30522, 768), 0, (8, 128)), ((33, 17, 1), 1, (9,)), ((2, 1, 9), 1, (13,))]


@pytest.mark.parametrize("shape,axis,ishape", GATHER_CASES)
@pytest.mark.parametrize("idtype", [np.int64, np.int32])
@pytest.mark.parametrize("threads", THREADS)
def test_gather_matches_numpy(shape, axis, ishape, idtype, threads):
    g = np.random.default_rng(len(shape) + len(ishape))
    x = values(shape, np.float32, seed=axis + 5)
    dim = shape[axis]
    ind = g.integers(-dim, dim, ishape).astype(idtype)
    m = node_model("Gather", {"x": x}, ["y"], attrs={"axis": axis}, consts={"i": ind}, opset=13)
    got = run_lite(m, {"x": x}, threads)[0]
    np.testing.assert_array_equal(got, np.take(x, ind.astype(np.int64) % dim, axis=axis))


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int64, np.int32, np.int8,
                                   np.uint8, np.bool_, object])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_dtypes(dtype, axis):
    x = values((6, 5, 7), dtype, seed=9)
    dim = x.shape[axis]
    ind = np.array([[0, -1, 2], [dim - 1, -dim, 1]], np.int64)
    m = node_model("Gather", {"x": x}, ["y"], attrs={"axis": axis}, consts={"i": ind}, opset=13)
    for t in THREADS:
        got = run_lite(m, {"x": x}, t)[0]
        exp = np.take(x, ind % dim, axis=axis)
        assert got.dtype == exp.dtype
        np.testing.assert_array_equal(got, exp)


def test_gather_out_of_range_index_is_an_error():
    x = values((4, 6), np.float32)
    for bad in (6, -7):
        m = node_model("Gather", {"x": x}, ["y"], attrs={"axis": 1},
                       consts={"i": np.array([0, bad], np.int64)}, opset=13)
        with pytest.raises(Exception, match="out of range"):
            run_lite(m, {"x": x}, 1)
