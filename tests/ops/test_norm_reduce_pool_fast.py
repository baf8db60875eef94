"""Normalizations, reductions and pooling outside the common shapes: MeanVarianceNormalization,
GroupNormalization and LpNormalization over float / double, the column and long-row
reductions, 3-D and dilated pooling, LpPool, wide depthwise convolutions and GridSample,
compared with onnxruntime and numpy on tiny, odd and large shapes with 1 and 2 threads."""

import numpy as np
import pytest

from helpers import node_model, run_lite, run_ort

# The numpy oracles see NaN / inf inputs on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def check(model, feeds, rtol=1e-5, atol=1e-6, expected=None, threads=(1, 2)):
    """ortlite with each thread count against onnxruntime (or `expected`)."""
    want = run_ort(model, feeds) if expected is None else expected
    for t in threads:
        got = run_lite(model, feeds, threads=t)
        for g, w in zip(got, want):
            w = np.asarray(w)
            assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    return got


def data(shape, seed, dtype=np.float32, scale=1.0, offset=0.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale + offset).astype(dtype)


# ---- MeanVarianceNormalization ------------------------------------------------------------


def mvn_ref(x, axes):
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=tuple(axes), keepdims=True)
    var = (x64 * x64).mean(axis=tuple(axes), keepdims=True) - mean * mean
    return ((x64 - mean) / (np.sqrt(np.maximum(var, 0)) + 1e-9)).astype(x.dtype)


MVN_CASES = [
    ((1, 64, 40, 40), None),
    ((2, 3, 5, 7), None),
    ((3, 17, 1, 33), None),
    ((1, 1, 1, 1), None),
    ((2, 5, 9, 11), [0, 1]),
    ((2, 5, 9, 11), [2]),
    ((2, 5, 9, 11), [-1]),
    ((2, 5, 9, 11), [1, 3]),
    ((4, 37), [0]),
    ((4, 37), [1]),
    ((6, 100, 3), [1]),
    ((2, 3, 4, 5, 6), [0, 2, 3]),
]


@pytest.mark.parametrize("shape,axes", MVN_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mvn_shapes(shape, axes, dtype):
    x = data(shape, 1, dtype, 2.0, 0.5)
    attrs = {} if axes is None else {"axes": axes}
    m = node_model("MeanVarianceNormalization", {"x": x}, ["y"], attrs=attrs, opset=13)
    check(m, {"x": x}, rtol=1e-5, atol=1e-5, expected=[mvn_ref(x, axes or [0, 2, 3])])
    if dtype == np.float32 and x.size > 1:  # (onnxruntime: 0 / 0 for one element)
        check(m, {"x": x}, rtol=1e-4, atol=1e-4)


def test_mvn_offset_mean_and_edges():
    # A large mean against a small spread, NaN / inf in some channels, negative zero.
    x = data((2, 6, 7, 9), 2, np.float32, 0.01, 1000.0)
    x[0, 1, 2, 3] = np.nan
    x[1, 2, 0, 0] = np.inf
    x[:, 3] = 0.0
    x[0, 3, 0, 0] = -0.0
    m = node_model("MeanVarianceNormalization", {"x": x}, ["y"], opset=13)
    got = check(m, {"x": x}, rtol=1e-4, atol=1e-4, expected=[mvn_ref(x, [0, 2, 3])])
    assert np.isnan(got[0][:, 1]).all() and np.isnan(got[0][:, 2]).all()
    assert (got[0][:, 3] == 0).all()


def test_mvn_empty_and_float16():
    x = np.zeros((0, 3, 2, 2), np.float32)
    m = node_model("MeanVarianceNormalization", {"x": x}, ["y"], opset=13)
    assert run_lite(m, {"x": x})[0].shape == (0, 3, 2, 2)
    h = data((2, 3, 4, 5), 3, np.float16)
    m = node_model("MeanVarianceNormalization", {"x": h}, ["y"], opset=13)
    check(m, {"x": h}, rtol=2e-3, atol=2e-3, expected=[mvn_ref(h, [0, 2, 3])])


# ---- GroupNormalization ---------------------------------------------------------------------


def group_norm_ref(x, s, b, groups, eps, per_group=False):
    n, c = x.shape[:2]
    x64 = x.astype(np.float64).reshape(n, groups, -1)
    mean = x64.mean(axis=2, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=2, keepdims=True)
    y = ((x64 - mean) / np.sqrt(var + np.float64(np.float32(eps)))).reshape(x.shape)
    shp = (1, c) + (1,) * (x.ndim - 2)
    if per_group:
        s = np.repeat(s, c // groups)
        b = np.repeat(b, c // groups)
    y = y * s.astype(np.float64).reshape(shp) + b.astype(np.float64).reshape(shp)
    return y.astype(x.dtype)


GN_CASES = [
    ((1, 256, 32, 32), 32),
    ((2, 6, 5, 7), 3),
    ((3, 4, 17), 2),
    ((1, 8, 1, 1), 8),
    ((2, 12, 3, 3, 3), 4),
    ((1, 5), 5),
    ((2, 10, 9, 13), 1),
]


@pytest.mark.parametrize("shape,groups", GN_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_group_norm_shapes(shape, groups, dtype):
    x = data(shape, 4, dtype, 3.0, -1.0)
    c = shape[1]
    s = data((c,), 5, dtype)
    b = data((c,), 6, dtype)
    m = node_model("GroupNormalization", {"x": x}, ["y"], attrs={"num_groups": groups,
                   "epsilon": 1e-3}, opset=21, consts={"s": s, "b": b})
    check(m, {"x": x}, rtol=1e-5, atol=1e-5, expected=[group_norm_ref(x, s, b, groups, 1e-3)])
    if dtype == np.float32:
        check(m, {"x": x}, rtol=1e-4, atol=1e-4)


def test_group_norm_opset18_edges():
    x = data((2, 8, 5, 5), 7, np.float32)
    x[0, 0, 1, 1] = np.nan
    x[1, 7, 0, 0] = -np.inf
    s = data((4,), 8)
    b = data((4,), 9)
    m = node_model("GroupNormalization", {"x": x}, ["y"], attrs={"num_groups": 4}, opset=18,
                   consts={"s": s, "b": b})
    got = check(m, {"x": x}, expected=[group_norm_ref(x, s, b, 4, 1e-5, per_group=True)],
                rtol=1e-5, atol=1e-5)
    assert np.isnan(got[0][0, :2]).all() and np.isnan(got[0][1, 6:]).all()
    assert np.isfinite(got[0][0, 2:]).all()


# ---- LpNormalization ------------------------------------------------------------------------


def lp_norm_ref(x, axis, p):
    x64 = x.astype(np.float64)
    n = np.sum(np.abs(x64) if p == 1 else x64 * x64, axis=axis, keepdims=True)
    n = n if p == 1 else np.sqrt(n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n == 0, 0.0, x64 / n).astype(x.dtype)


@pytest.mark.parametrize("shape,axis", [((64, 1000), 1), ((64, 1000), 0), ((3, 5, 7), 1),
                                        ((3, 5, 7), -1), ((2, 17, 33), 0), ((1,), 0),
                                        ((4, 3, 20, 21), 1)])
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lp_norm_shapes(shape, axis, p, dtype):
    x = data(shape, 10, dtype)
    m = node_model("LpNormalization", {"x": x}, ["y"], attrs={"axis": axis, "p": p})
    check(m, {"x": x}, expected=[lp_norm_ref(x, axis, p)], rtol=1e-6, atol=1e-7)
    if dtype == np.float32:
        check(m, {"x": x}, rtol=1e-5, atol=1e-6)


def test_lp_norm_edges():
    x = data((5, 40), 11)
    x[0] = 0.0
    x[0, 3] = -0.0
    x[1, 5] = np.nan
    x[2, 7] = np.inf
    x[3] = np.float32(1e-30)
    for axis in (1, 0):
        for p in (1, 2):
            m = node_model("LpNormalization", {"x": x}, ["y"], attrs={"axis": axis, "p": p})
            got = check(m, {"x": x}, expected=[lp_norm_ref(x, axis, p)])
            if axis == 1:  # a zero norm gives +0, as onnxruntime's
                assert not np.signbit(got[0][0]).any() and (got[0][0] == 0).all()
    # double subnormals: the norm divides
    d = np.full((2, 3), 5e-324)
    m = node_model("LpNormalization", {"x": d}, ["y"], attrs={"axis": 1, "p": 1})
    check(m, {"x": d}, expected=[np.full((2, 3), 1 / 3)], rtol=1e-12)


# ---- reductions -----------------------------------------------------------------------------


def reduce_model(op, x, axes, keepdims=1):
    if op == "ReduceSum":
        return node_model(op, {"x": x}, ["y"], attrs={"keepdims": keepdims}, opset=13,
                          consts={"a": np.array(axes, np.int64)})
    return node_model(op, {"x": x}, ["y"], attrs={"axes": axes, "keepdims": keepdims}, opset=17)


def reduce_ref(op, x, axes, keepdims):
    x64 = x.astype(np.float64)
    ax = tuple(axes)
    kd = bool(keepdims)
    with np.errstate(all="ignore"):
        r = {"ReduceSum": lambda: x64.sum(ax, keepdims=kd),
             "ReduceMean": lambda: x64.mean(ax, keepdims=kd),
             "ReduceSumSquare": lambda: (x64 * x64).sum(ax, keepdims=kd),
             "ReduceL1": lambda: np.abs(x64).sum(ax, keepdims=kd),
             "ReduceL2": lambda: np.sqrt((x64 * x64).sum(ax, keepdims=kd)),
             "ReduceProd": lambda: x64.prod(ax, keepdims=kd),
             "ReduceLogSumExp": lambda: np.log(np.exp(x64).sum(ax, keepdims=kd))}[op]()
    return r.astype(x.dtype)


COLUMN_SHAPES = [((8, 128, 768), [1]), ((64, 1000), [0]), ((3, 5, 7, 11), [0, 2]),
                 ((2, 33, 17), [1]), ((5, 3, 130), [0, 1]), ((4, 6, 7, 9), [-3, -2]),
                 ((129, 3), [0]), ((2, 3, 4, 200), [1, 2]), ((1, 1), [0]), ((7, 1, 65), [0])]


@pytest.mark.parametrize("shape,axes", COLUMN_SHAPES)
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceSumSquare", "ReduceL1",
                                "ReduceL2"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_column_sums(shape, axes, op, dtype):
    x = data(shape, 20, dtype)
    for keepdims in (1, 0):
        m = reduce_model(op, x, axes, keepdims)
        check(m, {"x": x}, rtol=1e-6, atol=1e-6, expected=[reduce_ref(op, x, axes, keepdims)])
    check(reduce_model(op, x, axes), {"x": x}, rtol=1e-5, atol=1e-5)


def test_column_sums_edges():
    x = data((40, 70), 21)
    x[3, 5] = np.nan
    x[4, 6] = np.inf
    x[5, 7] = -np.inf
    x[6, 7] = np.inf
    x[:, 9] = np.float32(3e38)  # the float sum would overflow; double does not
    for op in ("ReduceSum", "ReduceSumSquare", "ReduceL1"):
        got = check(reduce_model(op, x, [0]), {"x": x}, expected=[reduce_ref(op, x, [0], 1)])[0]
        assert np.isnan(got[0, 5]) and np.isnan(got[0, 7]) == (op == "ReduceSum")
    got = check(reduce_model("ReduceMean", x, [0]), {"x": x},
                expected=[reduce_ref("ReduceMean", x, [0], 1)])[0]
    assert got[0, 9] == np.float32(3e38)


@pytest.mark.parametrize("n", [1, 15, 16, 17, 33, 1000, 100003, 1000000])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_long_prod(n, dtype):
    x = np.random.default_rng(n).uniform(0.999, 1.001, n).astype(dtype)
    check(reduce_model("ReduceProd", x, [0]), {"x": x}, rtol=1e-5 if n > 1000 else 1e-6,
          expected=[reduce_ref("ReduceProd", x, [0], 1)])
    y = data((5, n), 22, dtype)
    check(reduce_model("ReduceProd", y, [1], 0), {"x": y}, rtol=1e-5,
          expected=[reduce_ref("ReduceProd", y, [1], 0)])


def test_long_prod_edges():
    x = np.random.default_rng(1).uniform(0.9, 1.1, 1000).astype(np.float32)
    for v, want in ((0.0, 0.0), (np.inf, np.inf), (np.nan, np.nan), (-0.0, -0.0)):
        y = x.copy()
        y[517] = v
        got = check(reduce_model("ReduceProd", y, [0]), {"x": y},
                    expected=[reduce_ref("ReduceProd", y, [0], 1)])[0]
        assert np.array_equal(got, np.array([want], np.float32), equal_nan=True)
    z = np.full(200, 10.0, np.float32)  # 1e200 in double: inf as float
    got = check(reduce_model("ReduceProd", z, [0]), {"x": z})[0]
    assert got[0] == np.inf


@pytest.mark.parametrize("shape,axes", [((1000000,), [0]), ((64, 1000), [1]), ((3, 17), [1]),
                                        ((2, 5, 7), [2]), ((1, 64, 56, 56), [2, 3]),
                                        ((8, 9, 40), [-1]), ((64, 1000), [0]),
                                        ((8, 9, 40), [1]), ((5, 3, 130), [0, 1]),
                                        ((3, 5, 7, 11), [0, 2]), ((7, 3), [0])])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_long_logsumexp(shape, axes, dtype):
    x = data(shape, 23, dtype, 30.0)
    check(reduce_model("ReduceLogSumExp", x, axes), {"x": x}, rtol=1e-6, atol=1e-6,
          expected=[reduce_ref("ReduceLogSumExp", x - 0, axes, 1)])
    check(reduce_model("ReduceLogSumExp", x, axes), {"x": x}, rtol=1e-5, atol=1e-5)


def test_logsumexp_exp_accuracy():
    # Arguments across the whole range of exp, the subnormal results included: the sum
    # against numpy's exp in double.
    rng = np.random.default_rng(24)
    x = np.concatenate([rng.uniform(-745, 0, 5000), rng.uniform(-1, 0, 5000),
                        [-744.9, -708.4, -700, -1e-300, 0.0, -0.5 * np.log(2)]])
    got = run_lite(reduce_model("ReduceLogSumExp", x, [0]), {"x": x})[0]
    np.testing.assert_allclose(got, [np.log(np.exp(x).sum())], rtol=1e-14)
    for i in range(0, x.size - 16, 997):
        w = x[i:i + 16]
        g = run_lite(reduce_model("ReduceLogSumExp", w, [0]), {"x": w})[0]
        np.testing.assert_allclose(g, [np.log(np.exp(w).sum())], rtol=1e-14)


def test_logsumexp_edges():
    x = data((4, 100), 25, np.float32, 5.0)
    x[0, 10] = np.nan
    x[1, 20] = np.inf
    x[2, :] = -np.inf
    x[3, 30] = -np.inf
    got = check(reduce_model("ReduceLogSumExp", x, [1], 0), {"x": x})[0]
    assert np.isnan(got[0]) and got[1] == np.inf and got[2] == -np.inf and np.isfinite(got[3])
    # the same columns down axis 0 (column mode)
    got = check(reduce_model("ReduceLogSumExp", np.ascontiguousarray(x.T), [0], 0),
                {"x": np.ascontiguousarray(x.T)})[0]
    assert np.isnan(got[0]) and got[1] == np.inf and got[2] == -np.inf and np.isfinite(got[3])
    big = np.full(100, 1e30, np.float32)
    got = check(reduce_model("ReduceLogSumExp", big, [0]), {"x": big}, rtol=1e-6)[0]
    np.testing.assert_allclose(got, [np.float32(1e30)], rtol=1e-6)


_ISA_SCRIPT = r"""
import sys, numpy as np
sys.path.insert(0, sys.argv[1])
from helpers import node_model, run_lite
out = {}
rng = np.random.default_rng(0)
cases = [((8, 128, 300), [1]), ((3, 5, 7, 11), [0, 2]), ((70, 129), [0])]
for i, (shape, axes) in enumerate(cases):
    x = rng.standard_normal(shape).astype(np.float32)
    for op in ("ReduceSum", "ReduceSumSquare", "ReduceL1"):
        kw = dict(consts={"a": np.array(axes, np.int64)}, opset=13) if op == "ReduceSum" else \
            dict(attrs={"axes": axes}, opset=17)
        out[f"{op}{i}"] = run_lite(node_model(op, {"x": x}, ["y"], **kw), {"x": x})[0]
np.savez(sys.argv[2], **out)
"""


def test_column_sums_same_on_every_isa(tmp_path):
    import os
    import subprocess
    import sys
    tests = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    outs = []
    for isa in ("avx512", "sse2"):
        path = tmp_path / f"{isa}.npz"
        env = dict(os.environ, ORTLITE_FAST_ISA=isa)
        r = subprocess.run([sys.executable, "-c", _ISA_SCRIPT, tests, str(path)], env=env,
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        outs.append(np.load(path))
    for k in outs[0].files:
        np.testing.assert_array_equal(outs[0][k], outs[1][k], err_msg=k)


# ---- MaxPool / AveragePool / LpPool -----------------------------------------------------------


def pool_ref(x, kind, kernel, strides, pads, dilations, ceil_mode=0, count_include_pad=0, p=2):
    """Direct loops over the output positions (numpy, in double). The divisor of an average
    with count_include_pad counts the taps inside the padded input (opset 19)."""
    nsp = len(kernel)
    sp = x.shape[2:]
    out = []
    for i in range(nsp):
        ext = (kernel[i] - 1) * dilations[i] + 1
        num = sp[i] + pads[i] + pads[i + nsp] - ext
        o = (-(-num // strides[i]) if ceil_mode else num // strides[i]) + 1
        if ceil_mode and (o - 1) * strides[i] >= sp[i] + pads[i]:
            o -= 1
        out.append(o)
    x64 = x.astype(np.float64)
    y = np.zeros(x.shape[:2] + tuple(out))
    for idx in np.ndindex(*out):
        vals, padded = [], 0
        for k in np.ndindex(*kernel):
            pos = [idx[i] * strides[i] - pads[i] + k[i] * dilations[i] for i in range(nsp)]
            if all(0 <= pos[i] < sp[i] for i in range(nsp)):
                vals.append(x64[(slice(None), slice(None)) + tuple(pos)])
            elif all(pos[i] < sp[i] + pads[i + nsp] for i in range(nsp)):
                padded += 1
        v = np.stack(vals, -1) if vals else np.zeros(x.shape[:2] + (0,))
        sl = (slice(None), slice(None)) + idx
        if kind == "max":
            with np.errstate(invalid="ignore"):
                y[sl] = np.nanmax(np.where(np.isnan(v), -np.inf, v), -1) if vals else -np.inf
        elif kind == "avg":
            n = len(vals) + (padded if count_include_pad else 0)
            y[sl] = v.sum(-1) / n if n else 0.0
        else:
            y[sl] = (np.abs(v) ** p).sum(-1) ** (1.0 / p)
    return y.astype(x.dtype)


POOL_CASES = [
    # shape, kernel, strides, pads, dilations, ceil_mode
    ((1, 3, 16, 16, 16), [2, 2, 2], [2, 2, 2], [0] * 6, [1, 1, 1], 0),
    ((2, 3, 7, 9, 11), [2, 3, 2], [2, 1, 3], [1, 0, 1, 0, 1, 1], [1, 1, 1], 1),
    ((1, 2, 5, 6, 7), [3, 3, 3], [1, 2, 2], [1, 1, 1, 1, 1, 1], [2, 1, 2], 0),
    ((1, 4, 20, 20), [3, 3], [2, 2], [2, 2, 2, 2], [2, 2], 0),
    ((1, 3, 23, 19), [3, 2], [2, 3], [2, 0, 1, 1], [2, 3], 1),
    ((2, 2, 17, 33), [3, 3], [1, 1], [1, 1, 1, 1], [2, 3], 0),
    ((1, 2, 40, 70), [5, 3], [3, 2], [2, 1, 2, 1], [1, 2], 1),
    ((1, 2, 9, 9), [2, 2], [4, 4], [1, 1, 0, 0], [3, 3], 0),
    ((1, 3, 75, 75), [2, 2], [2, 2], [0, 0, 0, 0], [1, 1], 1),
    ((3, 2, 101), [3], [2], [1, 2], [2], 1),
    ((1, 1, 1, 1), [1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 0),
    # strides 1, 2-D (MaxPool: the padded-plane kernel where the pads are below the kernel)
    ((1, 4, 20, 20), [5, 5], [1, 1], [2, 2, 2, 2], [1, 1], 0),     # YOLO's SPPF
    ((2, 3, 7, 23), [3, 2], [1, 1], [0, 1, 2, 0], [1, 1], 0),      # asymmetric pads
    ((1, 2, 5, 37), [1, 7], [1, 1], [0, 6, 0, 3], [1, 1], 1),      # pads up to kernel - 1
    ((1, 2, 33, 50), [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 0),     # several flat blocks
    # 3x3 stride 2, 2-D (MaxPool: the kernel with row groups and even / odd lanes)
    ((1, 4, 112, 112), [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], 0),   # ResNet's pool
    ((2, 3, 13, 13), [3, 3], [2, 2], [0, 0, 0, 0], [1, 1], 1),     # ceil_mode, odd rows
    ((1, 2, 10, 40), [3, 3], [2, 2], [2, 1, 0, 2], [1, 1], 1),     # windows past the input
    ((1, 3, 5, 70), [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], 0),      # 35 outputs a row
]


@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool(case):
    shape, k, s, pads, d, ceil = case
    x = data(shape, 30)
    m = node_model("MaxPool", {"x": x}, ["y"], attrs={"kernel_shape": k, "strides": s,
                   "pads": pads, "dilations": d, "ceil_mode": ceil}, opset=12)
    check(m, {"x": x}, expected=[pool_ref(x, "max", k, s, pads, d, ceil)], rtol=0, atol=0)
    check(m, {"x": x}, rtol=0, atol=0)


@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_average_pool(case, count_include_pad):
    shape, k, s, pads, d, ceil = case
    x = data(shape, 31)
    m = node_model("AveragePool", {"x": x}, ["y"], attrs={"kernel_shape": k, "strides": s,
                   "pads": pads, "dilations": d, "ceil_mode": ceil,
                   "count_include_pad": count_include_pad}, opset=19)
    check(m, {"x": x}, rtol=1e-5, atol=1e-6,
          expected=[pool_ref(x, "avg", k, s, pads, d, ceil, count_include_pad)])
    if d == [1] * len(k):
        m11 = node_model("AveragePool", {"x": x}, ["y"], attrs={"kernel_shape": k, "strides": s,
                         "pads": pads, "ceil_mode": ceil,
                         "count_include_pad": count_include_pad}, opset=11)
        check(m11, {"x": x}, rtol=1e-5, atol=1e-6)


def test_pool_nan_inf():
    x = data((1, 2, 9, 10, 11), 32)
    x[0, 0, 3, 4, 5] = np.nan
    x[0, 1, 2, 2, 2] = np.inf
    x[0, 1, 6, 6, 6] = -np.inf
    x[0, 0, 7] = -np.inf
    for op in ("MaxPool", "AveragePool"):
        m = node_model(op, {"x": x}, ["y"], attrs={"kernel_shape": [2, 3, 2], "strides": [2, 2, 1],
                       "pads": [0, 1, 1, 1, 0, 0]}, opset=12)
        kind = "max" if op == "MaxPool" else "avg"
        check(m, {"x": x}, rtol=1e-6, atol=1e-6,
              expected=[pool_ref(x, kind, [2, 3, 2], [2, 2, 1], [0, 1, 1, 1, 0, 0], [1, 1, 1])])


@pytest.mark.parametrize("strides", [[1, 1], [2, 2]])
def test_max_pool_3x3_kernels_nan_inf_and_zeros(strides):
    # The stride-1 and 3x3 stride-2 kernels: NaN never wins (as in the general kernel),
    # infinities do, and a window of only -inf gives -inf. Against onnxruntime without those
    # two (its MaxPool's result for a window with a NaN depends on where in the window the NaN
    # is, and a window of -inf gives the lowest float).
    x = data((2, 3, 11, 13), 33)
    x[1, 0, 6, 6] = np.inf
    x[1, 1, 2:5, 3:9] = -np.inf
    x[1, 2, 3, 3] = -0.0
    m = node_model("MaxPool", {"x": x}, ["y"], attrs={"kernel_shape": [3, 3], "strides": strides,
                   "pads": [1, 1, 1, 1]}, opset=12)
    check(m, {"x": x}, rtol=0, atol=0)
    x[0, 0, 4, 5] = np.nan
    x[0, 1, 0, :] = np.nan
    x[0, 1, 5, :] = np.nan  # the last row of windows (stride 2) and the first
    x[0, 2, :, 7] = np.nan  # the last column of windows and the first
    x[1, 1, :, :4] = -np.inf
    check(m, {"x": x}, rtol=0, atol=0,
          expected=[pool_ref(x, "max", [3, 3], strides, [1, 1, 1, 1], [1, 1])])


@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("p", [1, 2, 3])
def test_lp_pool(case, p):
    shape, k, s, pads, d, ceil = case
    x = data(shape, 33)
    attrs = {"kernel_shape": k, "strides": s, "pads": pads, "p": p}
    dil = d != [1] * len(k)
    if dil:
        attrs["dilations"] = d
    if ceil:
        attrs["ceil_mode"] = ceil
    m = node_model("LpPool", {"x": x}, ["y"], attrs=attrs, opset=18)
    check(m, {"x": x}, rtol=1e-5, atol=1e-6, expected=[pool_ref(x, "lp", k, s, pads, d, ceil, p=p)])


def test_lp_pool_ort_and_edges():
    x = data((1, 64, 56, 56), 34)
    m = node_model("LpPool", {"x": x}, ["y"], attrs={"kernel_shape": [3, 3], "strides": [2, 2]})
    check(m, {"x": x}, rtol=1e-5, atol=1e-6)
    y = data((2, 3, 8, 9), 35)
    y[0, 0, 1, 1] = np.nan
    y[0, 1, 2, 2] = -np.inf
    y[1, 2] = 0.0
    y[1, 1, 0, 0] = np.float32(3e30)  # the square overflows float, not double
    for p in (1, 2):
        m = node_model("LpPool", {"x": y}, ["y"], attrs={"kernel_shape": [2, 3], "p": p,
                       "pads": [1, 0, 0, 1]}, opset=18)
        got = check(m, {"x": y}, rtol=1e-5, atol=1e-6,
                    expected=[pool_ref(y, "lp", [2, 3], [1, 1], [1, 0, 0, 1], [1, 1], p=p)])[0]
        assert np.isfinite(got[1, 1, 0, 0]) and got[1, 1, 0, 0] > 1e30
    h = data((1, 3, 10, 10), 36, np.float16)
    m = node_model("LpPool", {"x": h}, ["y"], attrs={"kernel_shape": [3, 3], "strides": [2, 2]})
    check(m, {"x": h}, rtol=2e-3, atol=2e-3,
          expected=[pool_ref(h, "lp", [3, 3], [2, 2], [0] * 4, [1, 1])])


# ---- depthwise Conv ----------------------------------------------------------------------------


def dw_ref(x, w, b, strides, pads):
    n, c, h, wd = x.shape
    kh, kw = w.shape[2:]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (xp.shape[2] - kh) // strides[0] + 1
    ow = (xp.shape[3] - kw) // strides[1] + 1
    y = np.zeros((n, c, oh, ow)) + b.astype(np.float64).reshape(1, c, 1, 1)
    for ky in range(kh):
        for kx in range(kw):
            y += w[:, 0, ky, kx].astype(np.float64).reshape(1, c, 1, 1) * xp[
                :, :, ky:ky + strides[0] * (oh - 1) + 1:strides[0],
                kx:kx + strides[1] * (ow - 1) + 1:strides[1]]
    return y.astype(np.float32)


DW_CASES = [
    # shape, kernel, strides, pads
    ((1, 96, 56, 56), (7, 7), (1, 1), (3, 3, 3, 3)),
    ((1, 8, 33, 33), (7, 7), (1, 1), (3, 3, 3, 3)),
    ((2, 5, 23, 41), (5, 5), (1, 1), (2, 2, 2, 2)),
    ((1, 6, 19, 37), (5, 5), (2, 2), (2, 2, 2, 2)),
    ((1, 4, 29, 30), (7, 7), (2, 2), (3, 3, 3, 3)),
    ((1, 3, 17, 70), (7, 7), (1, 1), (0, 1, 2, 3)),
    ((1, 3, 9, 7), (7, 7), (1, 1), (3, 3, 3, 3)),
    ((1, 7, 7, 7), (5, 5), (1, 1), (2, 2, 2, 2)),
    ((1, 2, 12, 100), (5, 3), (1, 1), (2, 1, 2, 1)),
    ((1, 2, 40, 20), (3, 7), (1, 1), (1, 3, 1, 3)),
    ((1, 2, 30, 18), (5, 5), (3, 1), (1, 2, 0, 2)),
    ((1, 2, 8, 8), (7, 7), (1, 1), (0, 0, 0, 0)),
    ((1, 2, 4, 3), (5, 5), (1, 1), (2, 2, 2, 2)),
    ((1, 3, 70, 75), (7, 7), (2, 2), (3, 2, 2, 3)),
    ((2, 2, 41, 100), (5, 5), (2, 2), (0, 1, 2, 0)),
    ((1, 2, 31, 66), (5, 3), (2, 2), (2, 1, 2, 1)),
    ((1, 2, 23, 130), (7, 4), (2, 2), (3, 1, 3, 2)),
    ((1, 2, 9, 9), (7, 7), (2, 2), (3, 3, 3, 3)),
]


@pytest.mark.parametrize("case", DW_CASES)
def test_depthwise_wide_kernels(case):
    shape, k, s, pads = case
    c = shape[1]
    x = data(shape, 40)
    w = data((c, 1) + k, 41)
    b = data((c,), 42)
    m = node_model("Conv", {"x": x}, ["y"], attrs={"group": c, "strides": list(s),
                   "pads": list(pads), "kernel_shape": list(k)}, consts={"w": w, "b": b})
    check(m, {"x": x}, rtol=1e-4, atol=1e-4, expected=[dw_ref(x, w, b, s, pads)])
    check(m, {"x": x}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("act", ["Relu", "Clip"])
def test_depthwise_wide_kernels_fused_activation(act):
    from onnx import helper, numpy_helper
    from helpers import make_model
    x = data((1, 16, 30, 45), 43)
    x[0, 3, 10, 10] = np.nan
    x[0, 4, 20, 20] = np.inf
    w = data((16, 1, 7, 7), 44)
    b = data((16,), 45)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=16, pads=[3] * 4)]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    if act == "Relu":
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    else:
        inits += [numpy_helper.from_array(np.float32(-0.5), "lo"),
                  numpy_helper.from_array(np.float32(2.0), "hi")]
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"]))
    m = make_model(nodes, [("x", np.float32, list(x.shape))], [("y", np.float32, None)], inits)
    ref = dw_ref(x, w, b, (1, 1), (3, 3, 3, 3))
    ref = np.maximum(ref, 0) if act == "Relu" else np.clip(ref, -0.5, 2.0)
    ref = np.where(np.isnan(dw_ref(x, w, b, (1, 1), (3, 3, 3, 3))), np.nan, ref)
    check(m, {"x": x}, rtol=1e-4, atol=1e-4, expected=[ref])


# ---- GridSample ---------------------------------------------------------------------------------


def grid_case(xshape, gshape, seed, span=1.1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xshape).astype(np.float32)
    g = rng.uniform(-span, span, gshape).astype(np.float32)
    return x, g


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_2d_against_reference(mode, padding, align):
    # ortlite follows onnx's reference implementation (onnxruntime differs from it in places
    # for nearest, bicubic and align_corners).
    from onnx.reference import ReferenceEvaluator
    for xs, gs in (((2, 3, 7, 9), (2, 5, 11, 2)), ((1, 1, 1, 1), (1, 3, 3, 2)),
                   ((1, 2, 23, 17), (1, 90, 1, 2))):
        if xs[2] == 1 and align and padding == "reflection":
            continue  # (the reference divides by the zero range)
        x, g = grid_case(xs, gs, 50)
        m = node_model("GridSample", {"x": x, "g": g}, ["y"], opset=20,
                       attrs={"mode": mode, "padding_mode": padding, "align_corners": align})
        want = ReferenceEvaluator(m).run(None, {"x": x, "g": g})
        check(m, {"x": x, "g": g}, rtol=1e-5, atol=1e-5, expected=want)


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_bilinear_against_ort(padding):
    for xs, gs in (((1, 32, 64, 64), (1, 64, 64, 2)), ((3, 5, 23, 17), (3, 700, 1, 2))):
        x, g = grid_case(xs, gs, 53)
        m = node_model("GridSample", {"x": x, "g": g}, ["y"], opset=16,
                       attrs={"padding_mode": padding})
        check(m, {"x": x, "g": g}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_3d_against_reference(mode, padding):
    from onnx.reference import ReferenceEvaluator
    x, g = grid_case((1, 2, 5, 6, 7), (1, 3, 4, 5, 3), 51)
    m = node_model("GridSample", {"x": x, "g": g}, ["y"], opset=20,
                   attrs={"mode": mode, "padding_mode": padding})
    want = ReferenceEvaluator(m).run(None, {"x": x, "g": g})
    check(m, {"x": x, "g": g}, rtol=1e-5, atol=1e-5, expected=want)


def test_grid_sample_nan_inf_and_dtypes():
    x, g = grid_case((1, 4, 12, 13), (1, 9, 10, 2), 52)
    x[0, 1, 5, 6] = np.nan
    x[0, 2, 0, 0] = np.inf
    x[0, 3, 11, 12] = -np.inf
    g[0, 0, 0] = [-1.0, -1.0]  # a corner: half the bilinear taps in the zeros padding
    g[0, 1, 1] = [5.0, 5.0]  # all taps in the padding
    m = node_model("GridSample", {"x": x, "g": g}, ["y"], opset=16)
    got = check(m, {"x": x, "g": g}, rtol=1e-5, atol=1e-5)[0]
    assert got[0, 0, 1, 1] == 0.0
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    m = node_model("GridSample", {"x": x64, "g": g64}, ["y"], opset=16)
    check(m, {"x": x64, "g": g64}, rtol=1e-6, atol=1e-6,
          expected=[run_lite(node_model("GridSample", {"x": x, "g": g}, ["y"], opset=16),
                             {"x": x, "g": g})[0].astype(np.float64)])
    xh = x.astype(np.float16)
    m = node_model("GridSample", {"x": xh, "g": g}, ["y"], opset=16)
    check(m, {"x": xh, "g": g}, rtol=2e-3, atol=2e-3,
          expected=[run_lite(node_model("GridSample", {"x": xh.astype(np.float32), "g": g}, ["y"],
                                        opset=16), {"x": xh.astype(np.float32), "g": g})[0]
                    .astype(np.float16)])


def avg_pool_f32_order(x, k, pads, include_pad):
    """2-D AveragePool with strides 1 in float32, in the order the kernels sum: the window's
    rows inside the input first, then its kw columns (pads as zeros), then one division."""
    kh, kw = k
    pt, pl, pb, pr = pads
    N, C, H, W = x.shape
    OH, OW = H + pt + pb - kh + 1, W + pl + pr - kw + 1
    xp = np.zeros((N, C, H, W + pl + pr), np.float32)
    xp[..., pl:pl + W] = x
    y = np.zeros((N, C, OH, OW), np.float32)
    for i in range(OH):
        r0, r1 = max(i - pt, 0), min(i - pt + kh, H)
        v = xp[:, :, r0].copy()
        for r in range(r0 + 1, r1):
            v = v + xp[:, :, r]
        for o in range(OW):
            s = v[..., o].copy()
            for t in range(1, kw):
                s = s + v[..., o + t]
            cols = min(o + kw, pl + W) - max(o, pl)
            d = kh * kw if include_pad else (r1 - r0) * cols
            y[:, :, i, o] = s / np.float32(d)
    return y


@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize("shape,k,pads", [
    ((1, 3, 56, 56), [3, 3], [1, 1, 1, 1]),     # Inception / DenseNet style 3x3 averages
    ((2, 2, 9, 37), [3, 5], [0, 2, 2, 1]),      # asymmetric pads, 37 columns (a tail)
    ((1, 2, 17, 16), [2, 2], [1, 0, 0, 1]),
])
def test_average_pool_strides_1_special_values(shape, k, pads, include_pad):
    # The strides-1 kernel divides by multiplying with the divisor's reciprocal and correcting
    # the rounding once (exactly the division for finite values from 2^-100 up); -0 windows,
    # infinities, NaN and tiny magnitudes take the division. Bit for bit against the float32
    # order of the sums, and within rounding of the float64 reference.
    x = data(shape, 34, scale=100.0)
    x[0, 0, :4, :6] = -0.0          # windows of only -0: the average is -0
    x[0, 1, 3, 3] = np.inf
    x[0, 1, 6, 2] = -np.inf
    x[-1, -1, 1, 1] = np.nan
    x[0, 0, 6:, 8:12] = 1e-38       # sums below 2^-100: the division's result
    x[0, 0, -3:, -3:] = 3e38        # sums that overflow to inf
    m = node_model("AveragePool", {"x": x}, ["y"], attrs={"kernel_shape": k, "pads": pads,
                   "count_include_pad": include_pad}, opset=19)
    want = avg_pool_f32_order(x, k, pads, include_pad)
    for t in (1, 2):
        got = run_lite(m, {"x": x}, threads=t)[0]
        np.testing.assert_array_equal(got.view(np.uint32)[~np.isnan(want)],
                                      want.view(np.uint32)[~np.isnan(want)])
        assert np.array_equal(np.isnan(got), np.isnan(want))
    with np.errstate(invalid="ignore", over="ignore"):
        ref = pool_ref(x, "avg", k, [1, 1], pads, [1, 1], 0, include_pad)
    fin = np.isfinite(ref) & np.isfinite(want)  # float32 sums of 3e38 overflow, as there
    np.testing.assert_allclose(got[fin], ref[fin], rtol=1e-5, atol=1e-4)  # inputs of 100s


def test_average_pool_2x2_stride_2():
    # The 2x2 / 2 kernel: (x00 + x10) + (x01 + x11), times 0.25 (the division by 4, exactly).
    x = data((2, 5, 18, 70), 35)
    x[0, 0, :2, :2] = -0.0
    x[1, 1, 4, 4] = np.inf
    m = node_model("AveragePool", {"x": x}, ["y"], attrs={"kernel_shape": [2, 2],
                   "strides": [2, 2]}, opset=19)
    want = ((x[:, :, 0::2, 0::2] + x[:, :, 1::2, 0::2])
            + (x[:, :, 0::2, 1::2] + x[:, :, 1::2, 1::2])) / np.float32(4)
    for t in (1, 2):
        got = run_lite(m, {"x": x}, threads=t)[0]
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    check(m, {"x": x}, rtol=1e-6, atol=1e-6)


_POOL_ISA_SCRIPT = r"""
import sys, numpy as np
sys.path.insert(0, sys.argv[1])
from helpers import node_model, run_lite
cases = eval(sys.argv[3])
out = {}
for i, (shape, k, s, pads, d, ceil) in enumerate(cases):
    x = np.random.default_rng(i).standard_normal(shape).astype(np.float32)
    for op in ("MaxPool", "AveragePool"):
        attrs = {"kernel_shape": k, "strides": s, "pads": pads, "dilations": d, "ceil_mode": ceil}
        for cip in ((0, 1) if op == "AveragePool" else (None,)):
            if cip is not None:
                attrs["count_include_pad"] = cip
            m = node_model(op, {"x": x}, ["y"], attrs=attrs, opset=19)
            out[f"{op}{i}_{cip}"] = run_lite(m, {"x": x}, threads=2)[0]
np.savez(sys.argv[2], **out)
"""


def test_pool_same_on_every_isa(tmp_path):
    """The 3-D and dilated windows on the 16-, 8- and 4-lane instances of the pooling loop
    (ORTLITE_FAST_ISA caps the choice in a fresh process): the same results, and those of
    the numpy loops."""
    import os
    import subprocess
    import sys
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cases = [c for c in POOL_CASES if len(c[0]) >= 4]
    outs = []
    for isa in ("avx512", "avx2", "sse2"):
        path = tmp_path / f"{isa}.npz"
        r = subprocess.run([sys.executable, "-c", _POOL_ISA_SCRIPT, tests, str(path), repr(cases)],
                           env=dict(os.environ, ORTLITE_FAST_ISA=isa), capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr
        outs.append(np.load(path))
    for key in outs[0].files:
        for o in outs[1:]:
            np.testing.assert_array_equal(outs[0][key], o[key], err_msg=key)
    for i, (shape, k, s, pads, d, ceil) in enumerate(cases):
        x = np.random.default_rng(i).standard_normal(shape).astype(np.float32)
        np.testing.assert_array_equal(outs[0][f"MaxPool{i}_None"],
                                      pool_ref(x, "max", k, s, pads, d, ceil))
        for cip in (0, 1):
            np.testing.assert_allclose(outs[0][f"AveragePool{i}_{cip}"],
                                       pool_ref(x, "avg", k, s, pads, d, ceil, cip),
                                       rtol=1e-5, atol=1e-6)
