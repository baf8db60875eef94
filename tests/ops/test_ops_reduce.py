"""Reduce* and ArgMax/ArgMin kernels, compared with onnxruntime (tests/helpers/__init__.py)."""

import numpy as np
import pytest
from onnx import TensorProto, helper

import ortlite
from helpers import check_against_ort, make_model, run_lite, run_ortlite

REDUCE_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]
ARG_OPS = ["ArgMax", "ArgMin"]

# Element types onnxruntime's CPU kernels take (opset 18); int8/uint8 Max/Min need opset 12+.
ORT_TYPES = {op: [np.float32, np.float64, np.float16, np.int32, np.int64] for op in REDUCE_OPS}
ORT_TYPES["ReduceMax"] = ORT_TYPES["ReduceMax"] + [np.int8, np.uint8]
ORT_TYPES["ReduceMin"] = ORT_TYPES["ReduceMin"] + [np.int8, np.uint8]
ARG_TYPES = [np.float32, np.float64, np.float16, np.int8, np.uint8, np.int32, np.int64]

RNG = np.random.default_rng(1234)


def input_since(op):
    return 13 if op == "ReduceSum" else 18


def data_for(op, dtype, shape, rng=RNG):
    """Values for which op's result is well conditioned in every dtype."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        if op == "ReduceLogSum":
            x = rng.uniform(0.5, 2.0, shape)
        elif op == "ReduceProd":
            x = rng.uniform(0.7, 1.3, shape)
        else:
            x = rng.standard_normal(shape)
        return x.astype(dtype)
    if op == "ReduceLogSum":
        lo, hi = 1, 6
    elif op == "ReduceProd":
        lo, hi = -2, 3
    elif dtype.kind == "u":
        lo, hi = 0, 10
    else:
        lo, hi = -9, 10
    return rng.integers(lo, hi, shape).astype(dtype)


def reduce_model(op, dtype, shape, axes=None, keepdims=None, opset=18, axes_mode=None,
                 noop=None, out_dtype=None):
    """axes_mode: 'attr', 'init' (constant second input) or 'feed' (runtime second input);
    default: what the opset takes."""
    if axes_mode is None:
        axes_mode = "init" if opset >= input_since(op) else "attr"
    attrs = {}
    if keepdims is not None:
        attrs["keepdims"] = keepdims
    if noop is not None:
        attrs["noop_with_empty_axes"] = noop
    inputs = ["x"]
    ins = [("x", dtype, list(shape))]
    inits = []
    if axes is not None:
        if axes_mode == "attr":
            attrs["axes"] = list(axes)
        elif axes_mode == "init":
            inputs.append("axes")
            inits.append(helper.make_tensor("axes", TensorProto.INT64, [len(axes)], list(axes)))
        else:
            inputs.append("axes")
            ins.append(("axes", np.int64, [len(axes)]))
    node = helper.make_node(op, inputs, ["y"], name="red", **attrs)
    return make_model([node], ins, [("y", out_dtype or dtype, None)], initializers=inits,
                      opset=opset)


def feeds_for(x, axes=None, axes_mode=None):
    f = {"x": x}
    if axes_mode == "feed" and axes is not None:
        f["axes"] = np.array(axes, np.int64)
    return f


def tol(dtype, op=None):
    if np.dtype(dtype) == np.float16:
        return dict(rtol=2e-3, atol=2e-3)
    if np.dtype(dtype) == np.float32:
        return dict(rtol=1e-5, atol=1e-5)
    return dict(rtol=1e-7, atol=1e-9)


# ---- axes variants per opset -------------------------------------------------------------

AXES_VARIANTS = [None, [1], [-1], [0, 2], [-3, -1], [2, 0, 1]]


def axes_cases():
    for op in REDUCE_OPS:
        attr_opsets = [11, 12] if op == "ReduceSum" else [11, 13, 17]
        for opset in attr_opsets:
            yield op, opset, "attr"
        for opset in ([13, 18] if op == "ReduceSum" else [18]):
            yield op, opset, "init"
            yield op, opset, "feed"


@pytest.mark.parametrize("op,opset,mode", list(axes_cases()))
def test_reduce_axes_variants(op, opset, mode):
    x = data_for(op, np.float32, (2, 3, 4))
    for axes in AXES_VARIANTS:
        for keepdims in (None, 0, 1):
            m = reduce_model(op, np.float32, x.shape, axes, keepdims, opset, mode)
            check_against_ort(m, feeds_for(x, axes, mode), **tol(np.float32))


@pytest.mark.parametrize("op", REDUCE_OPS)
def test_reduce_dtypes(op):
    shape = (3, 4, 5)
    for dtype in ORT_TYPES[op]:
        x = data_for(op, dtype, shape)
        for axes in ([2], [0], [1], [0, 2], None):
            for keepdims in (0, 1):
                m = reduce_model(op, dtype, shape, axes, keepdims, 18)
                check_against_ort(m, {"x": x}, **tol(dtype))


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceLogSumExp", "ReduceMean",
                                "ReduceProd", "ReduceL1"])
def test_reduce_layouts(op):
    """Row, column, mixed and size-1 layouts of the engine."""
    cases = [
        ((3, 4, 5, 6), [[0], [1], [3], [0, 2], [1, 3], [0, 3], [1, 2], [0, 1, 2, 3], [0, 1],
                        [2, 3], [0, 1, 3], [0, 2, 3]]),
        ((1, 3, 1, 4), [[0], [2], [0, 2], [1], [3], [1, 2]]),
        ((5, 1), [[0], [1]]),
        ((7,), [[0]]),
        ((2, 300, 3), [[1], [0, 2]]),  # column blocks wider than one accumulator block
        ((2, 3, 600), [[0, 1], [1]]),
    ]
    for shape, axes_list in cases:
        x = data_for(op, np.float32, shape)
        for axes in axes_list:
            for keepdims in (0, 1):
                m = reduce_model(op, np.float32, shape, axes, keepdims, 18)
                check_against_ort(m, {"x": x}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", REDUCE_OPS)
def test_reduce_scalar_input(op):
    x = np.array(1.5, np.float32)
    for keepdims in (0, 1):
        m = reduce_model(op, np.float32, (), None, keepdims, 18)
        check_against_ort(m, {"x": x})


# ---- noop_with_empty_axes --------------------------------------------------------------------

@pytest.mark.parametrize("op", REDUCE_OPS)
def test_noop_with_empty_axes(op):
    x = data_for(op, np.float32, (2, 3))
    opset = input_since(op)
    # Empty axes input + noop: identity.
    m = reduce_model(op, np.float32, x.shape, [], 1, opset, noop=1)
    out = check_against_ort(m, {"x": x})
    np.testing.assert_array_equal(out[0], x)
    # No axes input + noop: identity too (onnxruntime fails here; the spec says identity).
    m = reduce_model(op, np.float32, x.shape, None, 1, opset, noop=1)
    np.testing.assert_array_equal(run_ortlite(m, {"x": x})[0], x)
    # Empty axes, no noop: reduce everything.
    for keepdims in (0, 1):
        m = reduce_model(op, np.float32, x.shape, [], keepdims, opset, noop=0)
        check_against_ort(m, {"x": x}, rtol=1e-5, atol=1e-5)
    # Runtime (fed) empty axes.
    m = reduce_model(op, np.float32, x.shape, [], 1, opset, axes_mode="feed", noop=1)
    got = run_ortlite(m, {"x": x, "axes": np.zeros(0, np.int64)})[0]
    np.testing.assert_array_equal(got, x)


def test_noop_ignored_before_input_opset():
    x = data_for("ReduceMean", np.float32, (2, 3))
    m = reduce_model("ReduceMean", np.float32, x.shape, None, 1, 13)
    check_against_ort(m, {"x": x})


# ---- empty tensors ---------------------------------------------------------------------------

@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64])
def test_reduce_empty(op, dtype):
    x = np.zeros((2, 0, 3), dtype)
    for axes, keepdims in (([1], 0), ([1], 1), (None, 1), (None, 0), ([2], 0), ([0, 1], 1)):
        m = reduce_model(op, dtype, x.shape, axes, keepdims, 18)
        check_against_ort(m, {"x": x})


# ---- accuracy on large inputs -------------------------------------------------------------------

NUMPY_REF = {
    "ReduceSum": lambda a, ax: a.sum(axis=ax),
    "ReduceMean": lambda a, ax: a.mean(axis=ax),
    "ReduceSumSquare": lambda a, ax: (a * a).sum(axis=ax),
    "ReduceL2": lambda a, ax: np.sqrt((a * a).sum(axis=ax)),
    "ReduceL1": lambda a, ax: np.abs(a).sum(axis=ax),
    "ReduceLogSumExp": lambda a, ax: np.log(np.exp(a).sum(axis=ax)),
    "ReduceMax": lambda a, ax: a.max(axis=ax),
    "ReduceMin": lambda a, ax: a.min(axis=ax),
}


@pytest.mark.parametrize("op", list(NUMPY_REF))
def test_reduce_large_accuracy(op):
    """Long float32 reductions: close to the float64 result (rtol 2e-6), and to
    onnxruntime within its own rounding error (it sums some rows sequentially in float)."""
    rng = np.random.default_rng(7)
    x = rng.uniform(0.0, 1.0, 200_000).astype(np.float32)
    x2 = rng.uniform(-1.0, 2.0, (3, 100_000)).astype(np.float32)  # few long rows
    x3 = rng.uniform(-1.0, 2.0, (20_000, 33)).astype(np.float32)  # tall columns
    for data, axes in ((x, None), (x2, [1]), (x3, [0])):
        m = reduce_model(op, np.float32, data.shape, axes, 0, 18)
        got = check_against_ort(m, {"x": data}, rtol=1e-4, atol=1e-4)[0]
        ref = NUMPY_REF[op](data.astype(np.float64), None if axes is None else tuple(axes))
        np.testing.assert_allclose(got, ref.astype(np.float32), rtol=2e-6, atol=1e-6)


def test_reduce_large_float16():
    rng = np.random.default_rng(8)
    x = rng.uniform(0.0, 1.0, (4, 5000)).astype(np.float16)
    for op in ("ReduceMean", "ReduceSum", "ReduceL2"):
        m = reduce_model(op, np.float16, x.shape, [1], 0, 18)
        check_against_ort(m, {"x": x}, rtol=2e-3, atol=1e-2)


def test_reduce_double_exact():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((50, 1000))
    m = reduce_model("ReduceSum", np.float64, x.shape, [1], 0, 18)
    got = run_ortlite(m, {"x": x})[0]
    np.testing.assert_allclose(got, x.sum(axis=1), rtol=1e-12, atol=1e-12)


# ---- NaN and integer semantics --------------------------------------------------------------

@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_reduce_max_min_nan(op):
    """A NaN among the reduced elements gives NaN (numpy and the ONNX reference; onnxruntime's
    answer depends on its code path and the data's alignment), in every layout."""
    ref = np.max if op == "ReduceMax" else np.min
    rng = np.random.default_rng(21)
    x = np.array([[1, np.nan, 3], [np.nan, 2, 2], [5, 5, np.nan]], np.float32)
    cases = [(x, [0]), (x, [1]), (x, None)]
    for shape, axes in (((5, 64), [0]), ((64, 50), [1]), ((4, 8, 40), [1]),
                        ((4, 8, 40), [0, 2]), ((300,), None), ((2, 70_000), [1])):
        y = rng.standard_normal(shape).astype(np.float32)
        y[rng.random(shape) < 0.02] = np.nan
        cases.append((y, axes))
    for data, axes in cases:
        for dtype in (np.float32, np.float64, np.float16):
            d = data.astype(dtype)
            m = reduce_model(op, dtype, d.shape, axes, 0, 18)
            got = run_ortlite(m, {"x": d})[0]
            exp = ref(d, axis=None if axes is None else tuple(axes))
            np.testing.assert_array_equal(got, exp)
    # Without NaN both agree with onnxruntime, infinities included.
    z = np.array([[-np.inf, 1, np.inf], [-np.inf, -np.inf, -np.inf]], np.float32)
    for axes in ([0], [1], None):
        check_against_ort(reduce_model(op, np.float32, z.shape, axes, 0, 18), {"x": z})


VEC_OPS = ["ReduceSum", "ReduceMean", "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceMax",
           "ReduceMin", "ReduceLogSum"]


@pytest.mark.parametrize("op", VEC_OPS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_reduce_contiguous_run_lengths(op, dtype):
    """Row lengths around the vector widths and block sizes (the scalar path below 16, whole
    vector blocks, tails of every length), at unaligned starts, against numpy in float64."""
    if op == "ReduceLogSum" and np.dtype(dtype).kind == "i":
        pytest.skip("integer ReduceLogSum truncates (covered by test_reduce_dtypes)")
    rng = np.random.default_rng(31)
    ref = {"ReduceSum": lambda a: a.sum(-1), "ReduceMean": lambda a: a.mean(-1),
           "ReduceSumSquare": lambda a: (a * a).sum(-1), "ReduceL1": lambda a: abs(a).sum(-1),
           "ReduceL2": lambda a: np.sqrt((a * a).sum(-1)), "ReduceMax": lambda a: a.max(-1),
           "ReduceMin": lambda a: a.min(-1), "ReduceLogSum": lambda a: np.log(a.sum(-1))}[op]
    for n in (1, 7, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 100, 257, 1000):
        if np.dtype(dtype).kind == "f":
            lo = 0.5 if op == "ReduceLogSum" else -3.0
            x = rng.uniform(lo, 3.0, (3, n)).astype(dtype)
        else:
            x = rng.integers(-1000, 1000, (3, n)).astype(dtype)
        m = reduce_model(op, dtype, x.shape, [1], 0, 18)
        got = run_ortlite(m, {"x": x})[0]
        exp = ref(x.astype(np.float64))
        if np.dtype(dtype).kind == "i":
            if op == "ReduceMean":
                exp = np.trunc(exp)  # integer division
            np.testing.assert_array_equal(got, exp.astype(dtype))
        else:
            rtol = 1e-6 if dtype == np.float32 else 1e-12
            np.testing.assert_allclose(got, exp.astype(dtype), rtol=rtol, atol=rtol)
        # Rows that start off the vector alignment: reduce a middle axis of 1 x n x 1 slices.
        m2 = reduce_model(op, dtype, (2, n + 3), [1], 1, 18)
        x2 = (rng.integers(1, 9, (2, n + 3)) if np.dtype(dtype).kind == "i"
              else rng.uniform(0.5, 2.0, (2, n + 3))).astype(dtype)
        check_against_ort(m2, {"x": x2}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_reduce_few_columns(op, dtype):
    """A reduced axis above a short kept one ([A, R, K], K < 16: whole rows of K stepped as a
    flat array, each lane one column; the rows left over one by one), every K and row counts
    around the lane groups, against numpy in float64; Max / Min exactly, NaN included."""
    if op in ("ReduceLogSum", "ReduceLogSumExp") and np.dtype(dtype).kind == "i":
        pytest.skip("integer log reductions truncate (covered by test_reduce_dtypes)")
    rng = np.random.default_rng(51)
    f64 = {"ReduceSum": lambda a: a.sum(1), "ReduceMean": lambda a: a.mean(1),
           "ReduceSumSquare": lambda a: (a * a).sum(1), "ReduceL1": lambda a: abs(a).sum(1),
           "ReduceL2": lambda a: np.sqrt((a * a).sum(1)), "ReduceMax": lambda a: a.max(1),
           "ReduceMin": lambda a: a.min(1), "ReduceProd": lambda a: a.prod(1),
           "ReduceLogSum": lambda a: np.log(a.sum(1)),
           "ReduceLogSumExp": lambda a: np.log(np.exp(a - a.max(1, keepdims=True)).sum(1))
           + a.max(1)}[op]
    # K from 16 on: Max / Min and the float sums of AVX-512 go a vector of columns at a
    # time down the rows with the state in registers, the last columns masked.
    for k in list(range(1, 16)) + [16, 20, 24, 31, 40, 64, 65, 100]:
        for r in (1, 2, 5, 16, 17, 48, 100, 257):
            if k >= 16 and r in (2, 17, 48):
                continue
            shape = (3, r, k)
            if np.dtype(dtype).kind == "i":
                lo, hi = (-2, 3) if op == "ReduceProd" else (-1000, 1000)
                x = rng.integers(lo, hi, shape).astype(dtype)
            elif op == "ReduceProd":
                x = rng.uniform(0.8, 1.25, shape).astype(dtype)
            elif op == "ReduceLogSum":
                x = rng.uniform(0.5, 2.0, shape).astype(dtype)
            else:
                x = rng.standard_normal(shape).astype(dtype)
            exact = op in ("ReduceMax", "ReduceMin")
            if exact and np.dtype(dtype).kind == "f" and r > 1:
                x[rng.random(shape) < 0.01] = np.nan
            got = run_ortlite(reduce_model(op, dtype, shape, [1], 0, 18), {"x": x})[0]
            want = f64(x.astype(np.float64))
            if np.dtype(dtype).kind == "i":
                if op == "ReduceMean":
                    want = np.trunc(want)
                np.testing.assert_array_equal(got, want.astype(dtype), err_msg=str(shape))
            elif exact:
                np.testing.assert_array_equal(got, want.astype(dtype), err_msg=str(shape))
            else:
                rtol = 1e-6 if dtype == np.float32 else 1e-12
                np.testing.assert_allclose(got, want.astype(dtype), rtol=rtol, atol=rtol,
                                           err_msg=str(shape))


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reduce_max_min_nan_and_inf_positions(op, dtype):
    """One NaN at each position of long rows (inside vector blocks and in the tail) gives that
    NaN; infinities without a NaN give the extreme value (their x - x is NaN too)."""
    ref = np.max if op == "ReduceMax" else np.min
    rng = np.random.default_rng(41)
    n = 77
    for pos in range(n):
        x = rng.standard_normal((1, n)).astype(dtype)
        x[0, pos] = np.nan
        got = run_ortlite(reduce_model(op, dtype, x.shape, [1], 0, 18), {"x": x})[0]
        assert np.isnan(got).all(), pos
    for pos in (0, 5, 31, 40, 76):
        for v in (np.inf, -np.inf):
            x = rng.standard_normal((2, n)).astype(dtype)
            x[0, pos] = v
            got = run_ortlite(reduce_model(op, dtype, x.shape, [1], 0, 18), {"x": x})[0]
            np.testing.assert_array_equal(got, ref(x, axis=1))


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin", "ReduceSum"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_reduce_integer_extremes_long_rows(op, dtype):
    """int32 / int64 rows with the type's extreme values, long enough for the vector loops;
    sums wrap as in onnxruntime."""
    info = np.iinfo(dtype)
    rng = np.random.default_rng(51)
    x = rng.integers(info.min, info.max, (4, 203), dtype=dtype)
    x[0, 100] = info.max
    x[1, 202] = info.min
    x[2, :] = info.max
    m = reduce_model(op, dtype, x.shape, [1], 0, 18)
    got = run_ortlite(m, {"x": x})[0]
    if op == "ReduceSum":
        with np.errstate(over="ignore"):
            exp = x.sum(axis=1, dtype=dtype)
    else:
        exp = (np.max if op == "ReduceMax" else np.min)(x, axis=1)
    np.testing.assert_array_equal(got, exp)


def test_reduce_integer_wraparound():
    x = np.full((1, 4), 2 ** 30, np.int32)
    for op in ("ReduceSum", "ReduceMean", "ReduceSumSquare"):
        m = reduce_model(op, np.int32, x.shape, [1], 0, 18)
        check_against_ort(m, {"x": x})


def test_reduce_integer_truncation():
    x = np.array([[3, 4], [-1, -2], [7, 7]], np.int64)
    for op in ("ReduceMean", "ReduceL2", "ReduceLogSumExp"):
        m = reduce_model(op, np.int64, x.shape, [1], 0, 18)
        check_against_ort(m, {"x": x})


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64, np.int8, np.int16, np.uint16])
def test_reduce_types_beyond_onnxruntime(dtype):
    """Types onnxruntime has no kernel for: checked against numpy."""
    rng = np.random.default_rng(3)
    x = rng.integers(0, 5, (3, 4, 5)).astype(dtype)
    cases = {
        "ReduceSum": lambda a, ax: a.sum(axis=ax, dtype=dtype),
        "ReduceProd": lambda a, ax: a.prod(axis=ax, dtype=dtype),
        "ReduceMax": lambda a, ax: a.max(axis=ax),
        "ReduceMin": lambda a, ax: a.min(axis=ax),
        "ReduceSumSquare": lambda a, ax: (a * a).sum(axis=ax, dtype=dtype),
    }
    for op, ref in cases.items():
        for axes in ([1], [0, 2]):
            m = reduce_model(op, dtype, x.shape, axes, 0, 18)
            got = run_ortlite(m, {"x": x})[0]
            assert got.dtype == np.dtype(dtype)
            np.testing.assert_array_equal(got, ref(x, tuple(axes)))


def test_reduce_bool_max_min():
    x = np.array([[True, False, False], [False, False, False]])
    for op in ("ReduceMax", "ReduceMin"):
        for axes in ([1], [0], None):
            m = reduce_model(op, np.bool_, x.shape, axes, 0, 20)
            check_against_ort(m, {"x": x})
        m = reduce_model(op, np.bool_, x.shape, [1], 0, 18)
        with pytest.raises(ortlite.NotImplemented):
            run_ortlite(m, {"x": x})


# ---- errors ----------------------------------------------------------------------------------

@pytest.mark.parametrize("op", REDUCE_OPS)
def test_reduce_axis_out_of_range(op):
    x = np.ones((2, 3), np.float32)
    for opset, mode in ((11, "attr"), (input_since(op), "init"), (input_since(op), "feed")):
        for axes in ([2], [-3]):
            m = reduce_model(op, np.float32, x.shape, axes, 1, opset, mode)
            with pytest.raises(ortlite.InvalidArgument, match="out of range"):
                run_ortlite(m, feeds_for(x, axes, mode))


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax"])
def test_reduce_repeated_axes(op):
    x = np.ones((2, 3), np.float32)
    for opset, mode in ((11, "attr"), (18, "init"), (18, "feed")):
        for axes in ([1, 1], [1, -1]):
            m = reduce_model(op, np.float32, x.shape, axes, 1, opset, mode)
            with pytest.raises(ortlite.InvalidArgument, match="more than once"):
                run_ortlite(m, feeds_for(x, axes, mode))


def test_reduce_axes_form_per_opset():
    x = np.ones((2, 3), np.float32)
    # Attribute where the opset wants an input, and the other way round.
    m = reduce_model("ReduceMax", np.float32, x.shape, [1], 1, 18, axes_mode="attr")
    with pytest.raises(ortlite.OrtliteError, match="axes"):
        run_ortlite(m, {"x": x})
    m = reduce_model("ReduceMax", np.float32, x.shape, [1], 1, 13, axes_mode="init")
    with pytest.raises(ortlite.OrtliteError):
        run_ortlite(m, {"x": x})
    m = reduce_model("ReduceSum", np.float32, x.shape, [1], 1, 13, axes_mode="attr")
    with pytest.raises(ortlite.OrtliteError, match="axes"):
        run_ortlite(m, {"x": x})


def test_reduce_bad_axes_input():
    x = np.ones((2, 3), np.float32)
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"])
    m = make_model([node], [("x", np.float32, [2, 3]), ("axes", np.float32, [1])],
                   [("y", np.float32, None)], opset=18)
    with pytest.raises(ortlite.InvalidArgument, match="axes"):
        run_ortlite(m, {"x": x, "axes": np.array([1.0], np.float32)})
    m = make_model([node], [("x", np.float32, [2, 3]), ("axes", np.int64, [1, 1])],
                   [("y", np.float32, None)], opset=18)
    with pytest.raises(ortlite.InvalidArgument, match="1-D"):
        run_ortlite(m, {"x": x, "axes": np.array([[1]], np.int64)})


def test_reduce_unsupported_type():
    x = np.array([["a", "b"]], dtype=object)
    m = reduce_model("ReduceSum", object, x.shape, [1], 1, 18)
    with pytest.raises(ortlite.OrtliteError):
        run_ortlite(m, {"x": x})


# ---- ArgMax / ArgMin ---------------------------------------------------------------------------

def arg_model(op, dtype, shape, axis=None, keepdims=None, select_last=None, opset=13):
    attrs = {}
    if axis is not None:
        attrs["axis"] = axis
    if keepdims is not None:
        attrs["keepdims"] = keepdims
    if select_last is not None:
        attrs["select_last_index"] = select_last
    node = helper.make_node(op, ["x"], ["y"], name="arg", **attrs)
    return make_model([node], [("x", dtype, list(shape))], [("y", np.int64, None)], opset=opset)


@pytest.mark.parametrize("op", ARG_OPS)
@pytest.mark.parametrize("opset", [11, 12, 13])
def test_arg_axes_keepdims_ties(op, opset):
    rng = np.random.default_rng(5)
    x = rng.integers(0, 3, (3, 4, 5)).astype(np.float32)  # many ties
    for axis in (None, 0, 1, 2, -1, -3):
        for keepdims in (None, 0, 1):
            for sl in ((None,) if opset < 12 else (None, 0, 1)):
                m = arg_model(op, np.float32, x.shape, axis, keepdims, sl, opset)
                check_against_ort(m, {"x": x})


@pytest.mark.parametrize("op", ARG_OPS)
def test_arg_dtypes(op):
    rng = np.random.default_rng(6)
    for dtype in ARG_TYPES:
        x = rng.integers(0, 4, (4, 6, 3)).astype(dtype)
        for axis in (0, 1, 2):
            for sl in (0, 1):
                m = arg_model(op, dtype, x.shape, axis, 0, sl)
                check_against_ort(m, {"x": x})


@pytest.mark.parametrize("op", ARG_OPS)
def test_arg_large(op):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((64, 3000)).astype(np.float32)
    for axis in (0, 1):
        m = arg_model(op, np.float32, x.shape, axis, 1, 0)
        check_against_ort(m, {"x": x})
    x = rng.standard_normal((2, 700, 300)).astype(np.float32)
    m = arg_model(op, np.float32, x.shape, 1, 0, 1)
    check_against_ort(m, {"x": x})


@pytest.mark.parametrize("op", ARG_OPS)
def test_arg_nan(op):
    x = np.array([[1, np.nan, 3], [np.nan, 2, 2], [5, 5, np.nan]], np.float32)
    for axis in (0, 1):
        for sl in (0, 1):
            m = arg_model(op, np.float32, x.shape, axis, 0, sl)
            check_against_ort(m, {"x": x})


@pytest.mark.parametrize("op", ARG_OPS)
def test_arg_empty(op):
    x = np.zeros((2, 0, 3), np.float32)
    # The reduced axis is not empty: the result is empty.
    m = arg_model(op, np.float32, x.shape, 2, 1, 0)
    check_against_ort(m, {"x": x})
    m = arg_model(op, np.float32, x.shape, 0, 0, 0)
    check_against_ort(m, {"x": x})
    # The reduced axis is empty: an error (onnxruntime fails too).
    m = arg_model(op, np.float32, x.shape, 1, 1, 0)
    with pytest.raises(ortlite.InvalidArgument, match="size 0"):
        run_ortlite(m, {"x": x})


@pytest.mark.parametrize("op", ARG_OPS)
def test_arg_errors(op):
    x = np.ones((2, 3), np.float32)
    for axis in (2, -3):
        m = arg_model(op, np.float32, x.shape, axis, 1, 0)
        with pytest.raises(ortlite.InvalidArgument, match="out of range"):
            run_ortlite(m, {"x": x})
    m = arg_model(op, np.float32, (), 0, 1, 0)
    with pytest.raises(ortlite.InvalidArgument):
        run_ortlite(m, {"x": np.array(1.0, np.float32)})
    m = arg_model(op, np.float32, x.shape, 0, 1, 2)
    with pytest.raises(ortlite.OrtliteError, match="select_last_index"):
        run_ortlite(m, {"x": x})


def test_reduce_thread_count_independent():
    """Long rows are split in fixed chunks: one thread and many give identical bits."""
    rng = np.random.default_rng(12)
    x = rng.standard_normal((3, 200_003))
    for op, axes in (("ReduceSum", [1]), ("ReduceL2", None), ("ReduceLogSumExp", [1])):
        m = reduce_model(op, np.float64, x.shape, axes, 0, 18).SerializeToString()
        so = ortlite.SessionOptions()
        so.intra_op_num_threads = 1
        one = ortlite.InferenceSession(m, so).run(None, {"x": x})[0]
        so4 = ortlite.SessionOptions()
        so4.intra_op_num_threads = 4
        many = ortlite.InferenceSession(m, so4).run(None, {"x": x})[0]
        np.testing.assert_array_equal(one, many)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMean", "ReduceMin"])
def test_reduce_bfloat16(op):
    """bfloat16 (no numpy type): float -> Cast -> Reduce -> Cast -> float, on values exact in
    bfloat16, against numpy."""
    x = np.array([[1.0, 2.0, -3.5, 0.25], [8.0, -0.5, 4.0, 16.0]], np.float32)
    nodes = [helper.make_node("Cast", ["x"], ["b"], to=TensorProto.BFLOAT16),
             helper.make_node(op, ["b", "axes"], ["r"], keepdims=0),
             helper.make_node("Cast", ["r"], ["y"], to=TensorProto.FLOAT)]
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    m = make_model(nodes, [("x", np.float32, [2, 4])], [("y", np.float32, None)],
                   initializers=[axes], opset=18)
    ref = {"ReduceSum": np.sum, "ReduceMax": np.max, "ReduceMean": np.mean,
           "ReduceMin": np.min}[op]
    np.testing.assert_array_equal(run_ortlite(m, {"x": x})[0], ref(x, axis=1))


def arg_reference(x, is_max, last):
    """ArgMax / ArgMin over the last axis of a 2-D array as onnxruntime defines it: the first
    element seeds the search and a later one replaces it only when strictly better (better or
    equal with select_last_index), so a NaN seed sticks and later NaNs never win."""
    out = np.zeros(x.shape[0], np.int64)
    for r, row in enumerate(x):
        best, bi = row[0], 0
        for a in range(1, len(row)):
            v = row[a]
            if is_max:
                better = v >= best if last else v > best
            else:
                better = v <= best if last else v < best
            if better:
                best, bi = v, a
        out[r] = bi
    return out


@pytest.mark.parametrize("op", ARG_OPS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("threads", [1, 2])
def test_arg_long_rows(op, dtype, threads):
    """Rows along the last axis long enough for the vectorized extremum and the 16-wide search
    of its index: ties across block edges, the extremum in the first, a middle and the last
    block, +-0, +-inf and NaN seeds, NaNs inside the row; both select_last_index values."""
    from helpers import run_lite

    rng = np.random.default_rng(21)
    rows = []
    for n in (1, 2, 15, 16, 17, 31, 33, 100, 1000, 1003):
        for _ in range(3):
            rows.append(rng.integers(-50, 50, n))
    is_max = op == "ArgMax"
    ext = 1000 if is_max else -1000
    cases = []
    for n in (16, 17, 40, 1003):
        for spots in ((0,), (n - 1,), (15, 16), (3, n - 1), (n // 2,)):
            r = rng.integers(-50, 50, n)
            for s in spots:
                if s < n:
                    r[s] = ext
            cases.append(r)
    rows += cases
    # One model per row length.
    by_len = {}
    for r in rows:
        by_len.setdefault(len(r), []).append(r)
    floats = np.dtype(dtype).kind == "f"
    for n, group in sorted(by_len.items()):
        x = np.array(group, dtype=dtype)
        if floats and n >= 17:
            special = np.array(group[0], dtype=dtype)
            special[:] = 0
            special[5] = -0.0 if is_max else 0.0
            special[n - 1] = np.inf if is_max else -np.inf
            seed_nan = np.array(group[0], dtype=dtype)
            seed_nan[0] = np.nan
            mid_nan = np.array(group[-1], dtype=dtype)
            mid_nan[n // 2] = np.nan
            late_nan = np.array(group[-1], dtype=dtype)
            late_nan[n - 1] = np.nan
            x = np.concatenate([x, np.stack([special, seed_nan, mid_nan, late_nan])])
        for sl in (0, 1):
            m = arg_model(op, dtype, x.shape, -1, 0, sl)
            got = run_lite(m, {"x": x}, threads)[0]
            np.testing.assert_array_equal(got, arg_reference(x, is_max, sl == 1), err_msg=f"n={n}")
            check_against_ort(m, {"x": x})


@pytest.mark.parametrize("op", ARG_OPS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("threads", [1, 2])
def test_arg_outer_axis_vector_blocks(op, dtype, threads):
    """The reduced axis outside the contiguous one: each of its rows updates the best value and
    index of up to 256 positions at once (the vectorized blend), with ties, NaN seeds and
    NaNs later in the axis, against an exact reference and onnxruntime."""
    from helpers import run_lite

    rng = np.random.default_rng(22)
    is_max = op == "ArgMax"
    for A, inner in ((1, 5), (2, 17), (37, 300), (5, 257)):
        x = rng.integers(-4, 4, (3, A, inner)).astype(dtype)
        if np.dtype(dtype).kind == "f" and A > 1:
            x[0, 0, ::7] = np.nan   # NaN seeds stick
            x[1, A // 2, ::5] = np.nan  # later NaNs never win
        for sl in (0, 1):
            m = arg_model(op, dtype, x.shape, 1, 0, sl)
            got = run_lite(m, {"x": x}, threads)[0]
            flat = np.moveaxis(x, 1, -1).reshape(-1, A)
            want = arg_reference(flat, is_max, sl == 1).reshape(3, inner)
            np.testing.assert_array_equal(got, want)
            check_against_ort(m, {"x": x})


@pytest.mark.parametrize("op", ARG_OPS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("threads", [1, 2])
def test_arg_short_rows_and_narrow_blocks(op, dtype, threads):
    """Rows of up to 128 floats in registers (the last vector masked; the index from the mask
    of equal lanes, the last one with select_last_index), and fewer than 16 positions after
    the axis (each block transposed into rows): every length around the 16-wide vectors,
    ties, a row of the identity (-inf under ArgMax), +-inf, NaN seeds and later NaNs, against
    the exact reference."""
    from helpers import run_lite

    rng = np.random.default_rng(23)
    is_max = op == "ArgMax"
    floats = np.dtype(dtype).kind == "f"
    for A in (1, 2, 3, 15, 16, 17, 31, 32, 33, 48, 64, 65, 80, 127, 128, 129):
        for inner in (1, 3, 15, 16):
            x = rng.integers(-6, 6, (5, A, inner)).astype(dtype)
            if floats:
                x[1, :, 0] = -np.inf if is_max else np.inf
                x[2, 0, :] = np.nan
                x[3, A // 2, :] = np.nan
                x[4, A - 1, :] = np.inf if is_max else -np.inf
                if A > 1:
                    x[0, A // 3, :] = x[0, A - 1, :] = 99 if is_max else -99
            for sl in (0, 1):
                m = arg_model(op, dtype, x.shape, 1, 0, sl)
                got = run_lite(m, {"x": x}, threads)[0]
                flat = np.moveaxis(x, 1, -1).reshape(-1, A)
                want = arg_reference(flat, is_max, sl == 1).reshape(5, inner)
                np.testing.assert_array_equal(got, want, err_msg=f"A={A} inner={inner} sl={sl}")


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceSumSquare", "ReduceL1",
                                "ReduceL2"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,axes", [
    ((77, 77, 16, 4), [0, 2]), ((32, 16, 64, 4), [0, 2]), ((16, 8, 16, 8, 4), [1, 3]),
    ((5, 3, 7, 3), [0, 2]), ((6, 2, 9, 1, 5), [0, 2]), ((3, 4, 5, 7), [0, 2]),
    ((9, 2, 3, 6), [0, 2]), ((2, 3, 2, 3, 2, 7), [0, 2, 4]), ((4, 1, 33, 2), [0, 2]),
])
def test_reduce_short_columns_over_several_axes(op, dtype, shape, axes):
    """Sums over reduced axes that are not adjacent, with a short kept innermost axis (< 8
    values) right below the innermost reduced one: each run of rows is contiguous and the
    runs are added through lane groups held across them, the rows left over of each run
    one by one. Against numpy in float64, at 1 and 2 threads."""
    rng = np.random.default_rng(len(shape) + shape[-1])
    x = (rng.standard_normal(shape) + 0.25).astype(dtype)
    x64 = x.astype(np.float64)
    ax = tuple(axes)
    want = {"ReduceSum": lambda: x64.sum(ax), "ReduceMean": lambda: x64.mean(ax),
            "ReduceSumSquare": lambda: (x64 * x64).sum(ax),
            "ReduceL1": lambda: abs(x64).sum(ax),
            "ReduceL2": lambda: np.sqrt((x64 * x64).sum(ax))}[op]()
    m = reduce_model(op, dtype, shape, axes, 0, 18)
    for threads in (1, 2):
        (got,) = run_lite(m, {"x": x}, threads)
        assert got.dtype == dtype and got.shape == want.shape
        rtol = 2e-6 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, want.astype(dtype), rtol=rtol, atol=rtol)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("shape,axes", [
    ((16, 8, 16, 8, 4), [1, 3]), ((3, 64, 64, 3), [1, 2]), ((8, 1024, 4), [1]),
    ((16, 8, 16, 8, 12), [1, 3]), ((512, 8), [0]), ((5, 6, 7, 2), [0, 2]),
    ((9, 5, 16, 1), [1, 2]), ((7, 13, 6, 10), [1, 2]), ((4, 3, 11, 6, 8), [1, 3]),
    ((40, 37, 7), [0, 1]), ((300, 20, 5), [0, 1]),
])
def test_reduce_extremum_short_contiguous_columns(op, shape, axes):
    """Float max / min down short columns (< 16) whose rows are contiguous, in one run or
    several (the reduced axes not adjacent): the values in 16-lane vectors held across the
    runs, the rows left over of each run in masked vectors, the lanes folded into their
    columns at the end. NaN (which wins) and +-inf included, and increasing values (each
    column's max in its last run's last row, its min in the first). Exact, against numpy, at
    1 and 2 threads."""
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, 3)] = np.inf
    flat[rng.integers(0, flat.size, 3)] = -np.inf
    flat[rng.integers(0, flat.size, 2)] = np.nan
    ax = tuple(axes)
    for xs in (x, np.arange(x.size, dtype=np.float32).reshape(shape)):
        want = (np.max if op == "ReduceMax" else np.min)(xs, axis=ax)
        for keepdims in (0, 1):
            m = reduce_model(op, np.float32, shape, axes, keepdims, 18)
            for threads in (1, 2):
                (got,) = run_lite(m, {"x": xs}, threads)
                w = want if not keepdims else np.expand_dims(want, ax)
                assert got.dtype == np.float32 and got.shape == w.shape
                np.testing.assert_array_equal(got, w, err_msg=f"{op} {shape} {axes}")


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceSumSquare", "ReduceL1",
                                "ReduceL2", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,axes", [
    ((4, 128, 16, 8), [1, 3]), ((3, 5, 7, 3), [1, 3]), ((2, 9, 4, 5), [1, 3]),
    ((2, 3, 4, 5, 6), [1, 2, 4]), ((5, 6, 2, 7), [0, 3]), ((8, 2, 3), [0, 2]),
    ((2, 7, 3, 11, 15), [1, 2, 4]),
])
def test_reduce_short_reduced_segments_below_a_kept_axis(op, dtype, shape, axes):
    """A short innermost reduced axis (< 16 values) right below a kept one, with reduced
    axes further out: the K kept x S reduced values of each outer position are stepped as
    columns, then each output combines its S columns. Against numpy in float64 (Max / Min
    exactly, a NaN included), at 1 and 2 threads."""
    rng = np.random.default_rng(sum(shape) + len(axes))
    x = (rng.standard_normal(shape) + 0.25).astype(dtype)
    if op in ("ReduceMax", "ReduceMin"):
        # Every value below (Max) or above (Min) 0, so that no seed of 0 would pass.
        x += dtype(-10 if op == "ReduceMax" else 10)
        x.reshape(-1)[rng.integers(0, x.size, 2)] = np.nan
    x64 = x.astype(np.float64)
    ax = tuple(axes)
    want = {"ReduceSum": lambda: x64.sum(ax), "ReduceMean": lambda: x64.mean(ax),
            "ReduceSumSquare": lambda: (x64 * x64).sum(ax),
            "ReduceL1": lambda: abs(x64).sum(ax),
            "ReduceL2": lambda: np.sqrt((x64 * x64).sum(ax)),
            "ReduceMax": lambda: x64.max(ax), "ReduceMin": lambda: x64.min(ax)}[op]()
    m = reduce_model(op, dtype, shape, axes, 0, 18)
    for threads in (1, 2):
        (got,) = run_lite(m, {"x": x}, threads)
        assert got.dtype == dtype and got.shape == want.shape
        if op in ("ReduceMax", "ReduceMin"):
            np.testing.assert_array_equal(got, want.astype(dtype))
        else:
            rtol = 2e-6 if dtype == np.float32 else 1e-12
            np.testing.assert_allclose(got, want.astype(dtype), rtol=rtol, atol=rtol)
