"""The fast paths of the data-movement and selection kernels: Transpose of every element
size (blocked 2-D tiles, narrow channel interleaves, the generic strided copy),
GatherElements, Concat / Split of short slabs, CumSum along outer axes, Hardmax, TopK
(row scan, column networks, selection) and Unique (hashing). Compared with onnxruntime
and numpy on tiny, odd and large shapes, on 1 and 2 threads (the large shapes are split
over the pool), plus edge values (NaN, -0, ties, duplicates, negative indices)."""

import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

import ortlite
from helpers import assert_same, node_model, run_ort, subprocess_env

THREADS = (1, 2)


def run_lite(model, feeds, threads):
    so = ortlite.SessionOptions()
    so.intra_op_num_threads = threads
    return ortlite.InferenceSession(model.SerializeToString(), so).run(None, feeds)


def values(shape, dtype, seed=0, lo=-50, hi=50):
    g = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return g.integers(0, 2, shape).astype(np.bool_)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return g.integers(max(lo, info.min), min(hi, info.max), shape, endpoint=True).astype(dtype)
    return g.standard_normal(shape).astype(dtype)


def check_ort(op, inputs, attrs=None, consts=None, outputs=("y",), out_dtypes=None, opset=17,
              threads=THREADS, exact=True):
    """Runs one node on onnxruntime and on ortlite (each thread count); equal outputs
    (bit-exact unless exact=False). Returns onnxruntime's outputs."""
    m = node_model(op, inputs, list(outputs), attrs=attrs, consts=consts, out_dtypes=out_dtypes,
                   opset=opset)
    want = run_ort(m, inputs)
    for t in threads:
        got = run_lite(m, inputs, t)
        if exact:
            assert len(got) == len(want)
            for g, w in zip(got, want):
                g, w = np.asarray(g), np.asarray(w)
                assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
                np.testing.assert_array_equal(g, w)
        else:
            assert_same(got, want)
    return want


def lite_outputs(op, inputs, attrs=None, consts=None, outputs=("y",), out_dtypes=None, opset=17,
                 threads=THREADS):
    """ortlite's outputs of one node for each thread count (checked equal); returns them."""
    m = node_model(op, inputs, list(outputs), attrs=attrs, consts=consts, out_dtypes=out_dtypes,
                   opset=opset)
    first = None
    for t in threads:
        got = [np.asarray(v) for v in run_lite(m, inputs, t)]
        if first is None:
            first = got
        else:
            for a, b in zip(first, got):
                np.testing.assert_array_equal(a, b)
    return first


# --- Transpose --------------------------------------------------------------------------------

ELEM_DTYPES = [np.uint8, np.int8, np.bool_, np.float16, np.uint16, np.float32, np.int64,
               np.float64]


def transpose_check(x, perm, threads=THREADS):
    y = check_ort("Transpose", {"x": x}, attrs={"perm": list(perm)}, threads=threads)[0]
    np.testing.assert_array_equal(y, np.transpose(x, perm))


@pytest.mark.parametrize("dtype", ELEM_DTYPES)
@pytest.mark.parametrize("shape", [(3, 17, 35), (2, 1, 5), (16, 16, 16), (5, 70, 33)])
def test_transpose_every_rank3_perm(dtype, shape):
    x = values(shape, dtype)
    for perm in itertools.permutations(range(3)):
        transpose_check(x, perm)


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.int64])
@pytest.mark.parametrize("shape", [(2, 3, 17, 33), (1, 4, 16, 64), (3, 1, 9, 2)])
def test_transpose_every_rank4_perm(dtype, shape):
    x = values(shape, dtype)
    for perm in itertools.permutations(range(4)):
        transpose_check(x, perm)


# NHWC <-> NCHW with 1..5 channels, 2-D transposes with edges around the 16 x 16 / 8 x 8
# tiles and the 64 x 64 blocks (the 4-byte split unit too), batched ones, and large ones
# split over the pool.
TRANSPOSE_CASES = [
    ((1, 3, 224, 224), (0, 2, 3, 1)), ((1, 224, 224, 3), (0, 3, 1, 2)),
    ((2, 2, 37, 41), (0, 2, 3, 1)), ((2, 37, 41, 2), (0, 3, 1, 2)),
    ((1, 4, 33, 65), (0, 2, 3, 1)), ((1, 33, 65, 4), (0, 3, 1, 2)),
    ((1, 5, 30, 31), (0, 2, 3, 1)), ((1, 30, 31, 5), (0, 3, 1, 2)),
    ((1, 1, 7, 9), (0, 2, 3, 1)), ((3, 1000), (1, 0)), ((1000, 3), (1, 0)), ((2, 7), (1, 0)),
    ((8, 12, 128, 64), (0, 1, 3, 2)), ((1, 256, 64, 64), (0, 2, 3, 1)), ((1000, 1000), (1, 0)),
    ((77, 129), (1, 0)), ((129, 77), (1, 0)), ((15, 17), (1, 0)), ((16, 16), (1, 0)),
    ((64, 64), (1, 0)), ((65, 63), (1, 0)), ((3, 200, 130), (0, 2, 1)),
    ((8, 128, 12, 64), (0, 2, 1, 3)), ((2, 3, 4, 5, 6, 7), (5, 3, 1, 0, 2, 4)),
    ((1, 64, 56, 56), (0, 2, 3, 1)), ((2, 70, 9, 130), (0, 2, 3, 1)), ((3, 130, 200), (0, 2, 1)),
]


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.int64, np.bool_])
@pytest.mark.parametrize("shape,perm", TRANSPOSE_CASES)
def test_transpose_blocked_and_narrow(dtype, shape, perm):
    transpose_check(values(shape, dtype), perm)


def test_transpose_strings_and_float16_bits():
    s = np.array([f"s{i}" for i in range(2 * 3 * 5)], dtype=object).reshape(2, 3, 5)
    y = lite_outputs("Transpose", {"x": s}, attrs={"perm": [2, 0, 1]})[0]
    np.testing.assert_array_equal(y, np.transpose(s, (2, 0, 1)))
    # Elements are moved, not converted: NaN payloads and -0 keep their bits.
    bits = np.random.default_rng(7).integers(0, 1 << 16, (1, 3, 40, 40)).astype(np.uint16)
    h = bits.view(np.float16)
    y = lite_outputs("Transpose", {"x": h}, attrs={"perm": [0, 2, 3, 1]})[0]
    np.testing.assert_array_equal(y.view(np.uint16), np.transpose(bits, (0, 2, 3, 1)))


_TRANSPOSE_ISA_SCRIPT = r"""
import itertools, sys
import numpy as np
import ortlite
from onnx import helper
from helpers import node_model
rng = np.random.default_rng(11)
cases = [((1, 3, 224, 224), (0, 2, 3, 1)), ((1, 224, 224, 3), (0, 3, 1, 2)),
         ((2, 2, 37, 41), (0, 2, 3, 1)), ((1, 37, 41, 4), (0, 3, 1, 2)),
         ((8, 12, 128, 64), (0, 1, 3, 2)), ((1000, 1000), (1, 0)), ((77, 129), (1, 0)),
         ((65, 63), (1, 0)), ((3, 17, 35), (2, 0, 1))]
for dtype in (np.uint8, np.float16, np.float32, np.int64):
    for shape, perm in cases:
        x = (rng.integers(0, 250, shape)).astype(dtype)
        m = node_model("Transpose", {"x": x}, ["y"], attrs={"perm": list(perm)})
        for threads in (1, 2):
            so = ortlite.SessionOptions()
            so.intra_op_num_threads = threads
            y = ortlite.InferenceSession(m.SerializeToString(), so).run(None, {"x": x})[0]
            np.testing.assert_array_equal(y, np.transpose(x, perm))
print("OK")
"""


@pytest.mark.parametrize("isa", ["sse2", "avx2", "avx512"])
def test_transpose_each_isa(isa):
    """The tile and narrow transposes on each path (AVX-512 permutes and wide tiles, the
    SSE2 tiles and element loops): ORTLITE_FAST_ISA caps the choice in a fresh process."""
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = subprocess_env(ORTLITE_FAST_ISA=isa)
    env["PYTHONPATH"] = os.pathsep.join([tests, env["PYTHONPATH"]])
    r = subprocess.run([sys.executable, "-c", _TRANSPOSE_ISA_SCRIPT], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "OK"


# --- GatherElements ---------------------------------------------------------------------------

GE_CASES = [
    ((64, 1000), (64, 500), 1), ((64, 1000), (32, 1000), 0), ((64, 1000), (64, 500), -1),
    ((5,), (9,), 0), ((1,), (3,), 0), ((3, 4, 5), (3, 4, 2), 2), ((3, 4, 5), (2, 4, 5), 0),
    ((3, 4, 5), (3, 7, 5), 1), ((3, 4, 5), (2, 3, 4), 1), ((3, 4, 5), (1, 2, 3), -3),
    ((2, 3, 17, 9), (2, 3, 6, 9), 2), ((2, 3, 17, 9), (2, 2, 5, 4), 2), ((40, 33, 70), (40, 80, 70), 1),
]


@pytest.mark.parametrize("dshape,ishape,axis", GE_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8, np.float16])
def test_gather_elements_matches_onnxruntime(dshape, ishape, axis, dtype):
    dim = dshape[axis]
    idx = np.random.default_rng(1).integers(-dim, dim, ishape).astype(np.int64)
    check_ort("GatherElements", {"x": values(dshape, dtype)}, attrs={"axis": axis},
              consts={"i": idx})


@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_gather_elements_index_types_and_strings(itype):
    x = values((6, 7), np.float32)
    idx = np.random.default_rng(2).integers(-7, 7, (6, 5)).astype(itype)
    check_ort("GatherElements", {"x": x}, attrs={"axis": 1}, consts={"i": idx})
    s = np.array([[f"v{r}{c}" for c in range(7)] for r in range(6)], dtype=object)
    y = lite_outputs("GatherElements", {"x": s}, attrs={"axis": 1}, consts={"i": idx})[0]
    np.testing.assert_array_equal(y, np.take_along_axis(s, np.where(idx < 0, idx + 7, idx), 1))


@pytest.mark.parametrize("bad", [1000, -1001, 5000])
def test_gather_elements_out_of_range_fails(bad):
    idx = np.zeros((64, 500), np.int64)
    idx[17, 123] = bad
    m = node_model("GatherElements", {"x": values((64, 1000), np.float32)}, ["y"],
                   attrs={"axis": 1}, consts={"i": idx})
    for t in THREADS:
        with pytest.raises(Exception, match="out of range"):
            run_lite(m, {"x": values((64, 1000), np.float32)}, t)
    idx0 = np.zeros((32, 1000), np.int64)
    idx0[3, 999] = 64
    m = node_model("GatherElements", {"x": values((64, 1000), np.float32)}, ["y"],
                   attrs={"axis": 0}, consts={"i": idx0})
    with pytest.raises(Exception, match="out of range"):
        run_lite(m, {"x": values((64, 1000), np.float32)}, 1)


# --- Concat / Split with short slabs ---------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8, np.float16, np.bool_])
@pytest.mark.parametrize("widths", [(3, 5), (1, 1, 1), (16, 1), (2, 7, 3), (8, 9)])
@pytest.mark.parametrize("rows", [(1,), (5,), (64, 128), (3, 333)])
def test_concat_split_short_slabs(dtype, widths, rows):
    parts = {f"x{i}": values(rows + (w,), dtype, seed=i) for i, w in enumerate(widths)}
    y = check_ort("Concat", parts, attrs={"axis": -1})[0]
    np.testing.assert_array_equal(y, np.concatenate(list(parts.values()), axis=-1))
    outs = [f"y{i}" for i in range(len(widths))]
    got = check_ort("Split", {"x": y}, attrs={"axis": len(rows)},
                    consts={"s": np.array(widths, np.int64)}, outputs=outs)
    for g, p in zip(got, parts.values()):
        np.testing.assert_array_equal(g, p)


def test_concat_split_short_slabs_strings():
    a = np.array([[f"a{r}{c}" for c in range(2)] for r in range(9)], dtype=object)
    b = np.array([[f"b{r}{c}" for c in range(3)] for r in range(9)], dtype=object)
    y = lite_outputs("Concat", {"a": a, "b": b}, attrs={"axis": 1})[0]
    np.testing.assert_array_equal(y, np.concatenate([a, b], axis=1))
    p, q = lite_outputs("Split", {"x": y}, attrs={"axis": 1},
                        consts={"s": np.array([2, 3], np.int64)}, outputs=("p", "q"))
    np.testing.assert_array_equal(p, a)
    np.testing.assert_array_equal(q, b)


# --- CumSum -----------------------------------------------------------------------------------

CS_SHAPES = [((1, 64, 56, 56), 1), ((64, 1000), 0), ((64, 1000), 1), ((64, 1000), -2),
             ((3, 7, 11), 1), ((3, 7, 11), 0), ((3, 7, 11), -1), ((1,), 0), ((5, 1), 0),
             ((1, 5), 0), ((2, 3, 1100, 3), 2), ((9, 2000), 0)]


@pytest.mark.parametrize("shape,axis", CS_SHAPES)
@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_cumsum_matches_onnxruntime_exactly(shape, axis, exclusive, reverse, dtype):
    # Both accumulate each element in axis order: the float results are bit-identical.
    check_ort("CumSum", {"x": values(shape, dtype)}, attrs={"exclusive": exclusive,
                                                             "reverse": reverse},
              consts={"a": np.array(axis, np.int64)})


@pytest.mark.parametrize("shape,axis", [((64, 1000), 0), ((3, 7, 1500), 1), ((4, 5), 1)])
@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 1)])
def test_cumsum_float16_accumulates_in_float(shape, axis, exclusive, reverse):
    x = values(shape, np.float16)
    y = lite_outputs("CumSum", {"x": x}, attrs={"exclusive": exclusive, "reverse": reverse},
                     consts={"a": np.array(axis, np.int64)})[0]
    f = np.flip(x, axis) if reverse else x
    acc = np.cumsum(f.astype(np.float32), axis=axis, dtype=np.float32)
    if exclusive:
        acc = np.concatenate([np.zeros_like(np.take(acc, [0], axis)),
                              np.take(acc, range(acc.shape[axis] - 1), axis)], axis)
    want = (np.flip(acc, axis) if reverse else acc).astype(np.float16)
    np.testing.assert_array_equal(y, want)


def test_cumsum_integer_wraps_and_edges():
    x = np.array([[np.iinfo(np.int64).max, 1], [1, 2], [-3, np.iinfo(np.int64).min]], np.int64)
    for axis in (0, 1):
        y = lite_outputs("CumSum", {"x": x}, consts={"a": np.array(axis, np.int64)})[0]
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(y, np.cumsum(x, axis=axis))
    f = np.array([[np.inf, 1], [-np.inf, np.nan], [-0.0, 2]], np.float32)
    check_ort("CumSum", {"x": f}, consts={"a": np.array(0, np.int64)}, exact=False)


# --- Hardmax ----------------------------------------------------------------------------------

HM_SHAPES = [((64, 1000), 1), ((8, 12, 128, 128), -1), ((64, 1000), 0), ((1, 21, 64, 64), 1),
             ((2, 3, 5, 7), 2), ((7,), 0), ((1, 1), 1), ((3, 300, 17), 1), ((3, 17, 300), 1),
             ((5, 1, 4), 1)]


def hardmax_reference(x, axis):
    """1 at the first index k where x[k] > x[best] (best starts at 0) along the axis."""
    xm = np.moveaxis(x, axis, -1)
    flat = xm.reshape(-1, xm.shape[-1])
    y = np.zeros_like(flat)
    for r, row in enumerate(flat):
        best = 0
        for k in range(1, len(row)):
            if row[k] > row[best]:
                best = k
        y[r, best] = 1
    return np.moveaxis(y.reshape(xm.shape), -1, axis)


@pytest.mark.parametrize("shape,axis", HM_SHAPES)
@pytest.mark.parametrize("opset", [11, 13])
def test_hardmax_matches_onnxruntime(shape, axis, opset):
    x = values(shape, np.float32)
    # Ties: repeat the row maximum further on (the first one wins).
    flat = x.reshape(-1)
    flat[::7] = np.round(flat[::7])
    check_ort("Hardmax", {"x": x}, attrs={"axis": axis}, opset=opset)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape,axis", [((9, 40), 1), ((40, 9), 0), ((3, 33, 20), 1)])
def test_hardmax_nan_and_ties_follow_the_sequential_scan(dtype, shape, axis):
    # onnxruntime's result with a NaN depends on how Eigen's vectorized max meets it;
    # ortlite's rule: best starts at index 0 and moves to any later element greater than
    # it (so a NaN first wins, and NaNs further on are skipped).
    g = np.random.default_rng(3)
    x = g.integers(-3, 3, shape).astype(dtype)
    x[g.random(shape) < 0.2] = np.nan
    x[g.random(shape) < 0.1] = -0.0
    np.put(x, [0], np.nan)
    y = lite_outputs("Hardmax", {"x": x}, attrs={"axis": axis}, opset=13)[0]
    np.testing.assert_array_equal(y, hardmax_reference(x, axis))


# --- TopK -------------------------------------------------------------------------------------

TK_SHAPES = [((64, 1000), 1), ((8, 128, 768), -1), ((1, 64, 56, 56), 1), ((64, 1000), 0),
             ((3, 7, 11), 1), ((3, 7, 11), 0), ((3, 7, 11), -1), ((1,), 0), ((5, 70), 0),
             ((2, 300, 3), 1), ((4, 17), 1)]


def topk_reference(x, k, axis, largest):
    """Sorted by value (NaN above every number), equal values in index order."""
    xm = np.moveaxis(x, axis, -1)
    flat = xm.reshape(-1, xm.shape[-1])
    idxs = []
    for row in flat:
        if row.dtype.kind == "f":
            nan = np.isnan(row).astype(np.int64)
            row = np.where(nan, 0, row).astype(np.float64) + 0.0  # -0 as +0
        else:
            nan = np.zeros(len(row), np.int64)
        rank = np.unique(row, return_inverse=True)[1].reshape(-1)  # exact, any integer type
        j = np.arange(len(row))
        order = (np.lexsort((j, -rank, -nan)) if largest else np.lexsort((j, rank, nan)))[:k]
        idxs.append(order)
    idxs = np.array(idxs, np.int64).reshape(xm.shape[:-1] + (k,))
    vals = np.take_along_axis(xm, idxs, -1)
    return np.moveaxis(vals, -1, axis), np.moveaxis(idxs, -1, axis)


@pytest.mark.parametrize("shape,axis", TK_SHAPES)
@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("kind", ["k1", "k5", "k17", "kn", "khalf"])
def test_topk_matches_onnxruntime(shape, axis, largest, kind):
    n = shape[axis]
    k = {"k1": 1, "k5": min(5, n), "k17": min(17, n), "kn": n, "khalf": max(1, n // 2)}[kind]
    x = values(shape, np.float32)
    flat = x.reshape(-1)
    flat[::5] = np.round(flat[::5])  # duplicates: ties keep the lower index first
    flat[3::11] = -0.0
    flat[4::13] = 0.0
    out = check_ort("TopK", {"x": x}, attrs={"axis": axis, "largest": largest},
                    consts={"k": np.array([k], np.int64)}, outputs=("v", "i"),
                    out_dtypes=[np.float32, np.int64])
    v, i = topk_reference(x, k, axis, largest)
    np.testing.assert_array_equal(out[1], i)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64])
@pytest.mark.parametrize("shape,axis", [((64, 300), 1), ((64, 300), 0), ((3, 40, 5), 1)])
@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("k", [1, 3, 20])
def test_topk_other_types_match_onnxruntime(dtype, shape, axis, largest, k):
    x = values(shape, dtype, lo=-20, hi=20)
    check_ort("TopK", {"x": x}, attrs={"axis": axis, "largest": largest},
              consts={"k": np.array([k], np.int64)}, outputs=("v", "i"),
              out_dtypes=[dtype, np.int64])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.uint8,
                                   np.int16, np.uint16, np.uint32, np.uint64])
@pytest.mark.parametrize("shape,axis", [((20, 300), 1), ((300, 20), 0), ((4, 9, 33), 1)])
@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("k", [1, 4, 9])
def test_topk_nan_ties_and_types_follow_the_sort_order(dtype, shape, axis, largest, k):
    # NaN ranks above every number (onnxruntime's order with NaN is not a sort order).
    g = np.random.default_rng(4)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        x = g.integers(-4, 4, shape).astype(dtype)
        x[g.random(shape) < 0.1] = np.nan
        x[g.random(shape) < 0.1] = -0.0
        x[g.random(shape) < 0.05] = np.inf
        x[g.random(shape) < 0.05] = -np.inf
    else:
        info = np.iinfo(dt)
        x = g.integers(info.min, info.max, shape, endpoint=True, dtype=dt)
        x[g.random(shape) < 0.3] = info.min
        x[g.random(shape) < 0.3] = info.max
    v, i = lite_outputs("TopK", {"x": x}, attrs={"axis": axis, "largest": largest},
                        consts={"k": np.array([k], np.int64)}, outputs=("v", "i"),
                        out_dtypes=[dtype, np.int64])
    rv, ri = topk_reference(x, k, axis, largest)
    np.testing.assert_array_equal(i, ri)
    np.testing.assert_array_equal(v.view(np.uint8), np.ascontiguousarray(rv).view(np.uint8))


def test_topk_sorted_zero_and_k_zero():
    x = values((6, 50), np.float32)
    v, i = lite_outputs("TopK", {"x": x}, attrs={"axis": 1, "sorted": 0},
                        consts={"k": np.array([4], np.int64)}, outputs=("v", "i"),
                        out_dtypes=[np.float32, np.int64])
    rv, ri = topk_reference(x, 4, 1, 1)
    np.testing.assert_array_equal(np.sort(i, 1), np.sort(ri, 1))
    v, i = lite_outputs("TopK", {"x": x}, attrs={"axis": 1},
                        consts={"k": np.array([0], np.int64)}, outputs=("v", "i"),
                        out_dtypes=[np.float32, np.int64])
    assert v.shape == (6, 0) and i.shape == (6, 0)


# --- Unique -----------------------------------------------------------------------------------

UNIQUE_OUTS = ("y", "idx", "inv", "cnt")


def unique_reference(x, sorted_):
    """numpy's unique of the flattened x, in sorted order or by first occurrence."""
    u, first, inv, cnt = np.unique(x.reshape(-1), return_index=True, return_inverse=True,
                                   return_counts=True)
    order = np.arange(len(u)) if sorted_ else np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return x.reshape(-1)[first[order]], first[order], rank[inv.reshape(-1)], cnt[order]


def unique_check(x, sorted_, axis=None):
    attrs = {"sorted": sorted_}
    if axis is not None:
        attrs["axis"] = axis
    outs = dict(outputs=UNIQUE_OUTS, opset=11, out_dtypes=[x.dtype, np.int64, np.int64, np.int64])
    if x.dtype in (np.float32, np.int64, np.int8):  # the types onnxruntime's Unique runs
        check_ort("Unique", {"x": x}, attrs=attrs, **outs)
    if axis is None:
        got = lite_outputs("Unique", {"x": x}, attrs=attrs, **outs)
        for g, w in zip(got, unique_reference(x, sorted_)):
            np.testing.assert_array_equal(g, w)
            assert g.dtype == w.dtype or w.dtype == np.intp


@pytest.mark.parametrize("sorted_", [1, 0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32, np.int8, np.uint8])
@pytest.mark.parametrize("n,distinct", [(100000, 1000), (1, 1), (17, 3), (5000, 5000),
                                        (3000, 2)])
def test_unique_matches_onnxruntime(sorted_, dtype, n, distinct):
    g = np.random.default_rng(n + distinct)
    pool = g.choice(np.arange(-500000, 500000), size=distinct, replace=False)
    x = pool[g.integers(0, distinct, n)]
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        x = np.clip(x, info.min, info.max)
    x = x.astype(dtype)
    if np.dtype(dtype).kind == "f":
        x = (x / 7).astype(dtype)
    unique_check(x, sorted_)


@pytest.mark.parametrize("sorted_", [1, 0])
def test_unique_multi_dim_flattened_and_negative_zero(sorted_):
    x = np.array([[3.0, -0.0, 1.5], [0.0, 3.0, -2.0], [-0.0, 1.5, 7.0]], np.float32)
    unique_check(x, sorted_)
    unique_check(np.array([0.0, -0.0, 0.0], np.float32), sorted_)
    unique_check(np.array([-0.0, 0.0], np.float32), sorted_)
    unique_check(values((40, 3), np.int64, lo=-3, hi=3), sorted_, axis=0)


@pytest.mark.parametrize("sorted_", [1, 0])
def test_unique_bool_and_float16(sorted_):
    b = values((300,), np.bool_)
    y = lite_outputs("Unique", {"x": b}, attrs={"sorted": sorted_}, outputs=UNIQUE_OUTS,
                     out_dtypes=[np.bool_, np.int64, np.int64, np.int64], opset=11)
    u, first, inv, cnt = np.unique(b, return_index=True, return_inverse=True, return_counts=True)
    if sorted_:
        np.testing.assert_array_equal(y[0], u)
        np.testing.assert_array_equal(y[1], first)
        np.testing.assert_array_equal(y[2], inv)
        np.testing.assert_array_equal(y[3], cnt)
    unique_check((values((2000,), np.int64, lo=-40, hi=40) / 4).astype(np.float16), sorted_)


@pytest.mark.parametrize("largest", [1, 0])
def test_topk_k1_rows_heap_and_single_element_axes(largest):
    """K = 1 along float rows (AVX-512 lanes of ranks: NaN above every number, -0 equal to
    +0, the first of equal values), a heap of the k best for k well below the axis (k above
    16), blocks of at least 16 columns transposed for an inner axis, and an axis of one
    element (a copy, index 0), against the sort-order reference."""
    g = np.random.default_rng(9)
    cases = []
    for n in (2, 3, 8, 15, 16, 17, 31, 32, 33, 80, 129, 1000):
        x = g.integers(-5, 5, (12, n)).astype(np.float32)
        x[1, :] = np.nan
        x[2, :] = 3.0
        x[3, n // 2] = np.nan
        x[4, :] = -0.0
        x[4, n - 1] = 0.0
        x[5, n - 1] = np.inf
        x[6, 0] = -np.inf
        x[7, :] = -np.inf
        x[8, n // 3] = np.float32(1e30)
        x[9, n - 1] = np.nan
        cases.append((x, 1, 1))
        cases.append((x.astype(np.float64), 1, 1))
    x = g.integers(-50, 50, (3, 2000)).astype(np.float32)
    x[0, ::97] = np.nan
    for k in (17, 100, 250):
        cases.append((x, 1, k))
    cases.append((g.standard_normal((2, 3000, 40)).astype(np.float32), 1, 50))
    for dt in (np.float32, np.float16, np.int8, np.int64):
        cases.append((g.integers(-9, 9, (4, 1, 5)).astype(dt), 1, 1))
    for x, axis, k in cases:
        v, i = lite_outputs("TopK", {"x": x}, attrs={"axis": axis, "largest": largest},
                            consts={"k": np.array([k], np.int64)}, outputs=("v", "i"),
                            out_dtypes=[x.dtype, np.int64])
        rv, ri = topk_reference(x, k, axis, largest)
        np.testing.assert_array_equal(i, ri, err_msg=f"{x.shape} {x.dtype} k={k}")
        np.testing.assert_array_equal(v.view(np.uint8), np.ascontiguousarray(rv).view(np.uint8))
