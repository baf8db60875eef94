"""Tensor / shape kernels (src/providers/cpu/tensor): Reshape Flatten Squeeze Unsqueeze Identity
Transpose Concat Split Slice Gather Shape Size Expand Tile Pad, compared with onnxruntime
(and with numpy where onnxruntime has no kernel for an element type)."""

import numpy as np
import onnxruntime
import pytest
from onnx import helper, numpy_helper

import ortlite
from helpers import assert_same, make_model, run_ort, run_ortlite

_ORT_STATE = onnxruntime.capi.onnxruntime_pybind11_state
# onnxruntime errors meaning "no kernel / type not allowed" (not a wrong result).
_ORT_UNSUPPORTED = (_ORT_STATE.NotImplemented, _ORT_STATE.InvalidGraph, _ORT_STATE.Fail)

ALL_DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64,
              np.uint8, np.uint16, np.uint32, np.uint64, np.bool_, object]
SOME_DTYPES = [np.float32, np.float16, np.int64, np.uint8, np.bool_, object]
I64 = np.int64
INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


def data(shape, dtype, seed=0):
    shape = tuple(shape)
    n = int(np.prod(shape)) if shape else 1
    dtype = np.dtype(dtype)
    if dtype == object:
        return np.array([f"s{i}" for i in range(n)], dtype=object).reshape(shape)
    if dtype == np.bool_:
        return (np.random.default_rng(seed).integers(0, 2, n) == 1).reshape(shape)
    if dtype.kind == "f":
        return np.random.default_rng(seed).standard_normal(n).astype(dtype).reshape(shape)
    return (np.arange(n) % 100 + seed).astype(dtype).reshape(shape)


def model(op, inputs, outputs, attrs=None, opset=17, inits=(), out_dtypes=None):
    """One node. inputs: list of (name, array, as_initializer) or "" (omitted). outputs:
    names; out_dtypes: their dtypes (default: the first input's)."""
    names, ins, init = [], [], []
    for spec in inputs:
        if spec == "":
            names.append("")
            continue
        name, arr, is_init = spec
        names.append(name)
        if is_init:
            init.append(numpy_helper.from_array(np.asarray(arr), name))
        else:
            ins.append((name, arr.dtype, list(arr.shape)))
    first = inputs[0][1]
    out_dtypes = out_dtypes or [first.dtype] * len(outputs)
    node = helper.make_node(op, names, outputs, **(attrs or {}))
    return make_model([node], ins, [(o, d, None) for o, d in zip(outputs, out_dtypes)],
                      initializers=init, opset=opset)


def feeds_of(inputs):
    return {s[0]: s[1] for s in inputs if s != "" and not s[2]}


def check(op, inputs, outputs=("y",), attrs=None, opset=17, out_dtypes=None, expected=None,
          ort=True):
    """Runs ortlite; compares with `expected` (if given) and with onnxruntime (when it can
    run the model; it must when no expected is given; ort=False skips it where onnxruntime
    is known to be wrong)."""
    m = model(op, inputs, list(outputs), attrs, opset, out_dtypes=out_dtypes)
    feeds = feeds_of(inputs)
    actual = run_ortlite(m, feeds)
    if expected is not None:
        assert_same(actual, expected, rtol=0, atol=0)
    if not ort:
        assert expected is not None
        return actual
    try:
        ref = run_ort(m, feeds)
    except _ORT_UNSUPPORTED:
        assert expected is not None, "onnxruntime cannot run this model and no expected given"
        return actual
    assert_same(actual, ref, rtol=0, atol=0)
    return actual


def expect_error(op, inputs, outputs=("y",), attrs=None, opset=17, out_dtypes=None,
                 exc=ortlite.InvalidArgument, match=None):
    m = model(op, inputs, list(outputs), attrs, opset, out_dtypes=out_dtypes)
    with pytest.raises(exc, match=match):
        sess = ortlite.InferenceSession(m.SerializeToString())
        sess.run(None, feeds_of(inputs))


def ints(name, values, init=False):
    return (name, np.array(values, dtype=I64), init)


# ---------------------------------------------------------------- Reshape


@pytest.mark.parametrize("in_shape,shape,allowzero,opset", [
    ([2, 3, 4], [6, 4], 0, 13),
    ([2, 3, 4], [-1], 0, 13),
    ([2, 3, 4], [0, -1], 0, 13),
    ([2, 3, 4], [0, 0, 2, 2], 0, 14),
    ([2, 3, 4], [4, -1, 2], 0, 5),
    ([2, 3, 4], [2, 3, 4, 1, 1], 0, 21),
    ([0, 3], [-1, 3], 0, 14),
    ([0, 3], [3, -1], 0, 14),
    ([0, 3], [3, 0], 1, 14),
    ([0, 3], [0, 3], 1, 19),
    ([2, 0], [0, -1], 0, 14),
    ([1], [], 0, 14),
])
@pytest.mark.parametrize("as_init", [False, True])
def test_reshape(in_shape, shape, allowzero, opset, as_init):
    attrs = {"allowzero": allowzero} if opset >= 14 else None
    check("Reshape", [("x", data(in_shape, np.float32), False), ints("s", shape, as_init)],
          attrs=attrs, opset=opset)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_reshape_dtypes(dtype):
    x = data([2, 3, 4], dtype)
    check("Reshape", [("x", x, False), ints("s", [4, 0, -1])], opset=14,
          expected=[x.reshape(4, 3, 2)])


@pytest.mark.parametrize("in_shape,shape,allowzero", [
    ([2, 3], [-1, -1], 0),
    ([2, 3], [4, 2], 0),
    ([2, 3], [0, 0, 0], 0),
    ([2, 3], [-2, 3], 0),
    ([0, 3], [0, -1], 1),
    ([2, 3], [2, 0], 1),
])
def test_reshape_errors(in_shape, shape, allowzero):
    expect_error("Reshape", [("x", data(in_shape, np.float32), False), ints("s", shape)],
                 attrs={"allowzero": allowzero}, opset=14)


def test_reshape_shape_input_must_be_int():
    expect_error("Reshape", [("x", data([2, 3], np.float32), False),
                             ("s", np.array([3.0, 2.0], np.float32), False)], opset=14)


# ---------------------------------------------------------------- Flatten


@pytest.mark.parametrize("opset,axis", [(9, 0), (9, 1), (9, 3), (11, -1), (13, -3), (21, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.int8, object])
def test_flatten(opset, axis, dtype):
    x = data([2, 3, 4], dtype)
    a = axis if axis >= 0 else axis + 3
    exp = x.reshape(int(np.prod(x.shape[:a])), -1)
    check("Flatten", [("x", x, False)], attrs={"axis": axis}, opset=opset, expected=[exp])


def test_flatten_default_axis_and_scalar():
    check("Flatten", [("x", data([2, 3, 4], np.float32), False)], opset=13)
    check("Flatten", [("x", np.array(3.0, np.float32), False)], attrs={"axis": 0}, opset=13)


@pytest.mark.parametrize("opset,axis", [(13, 4), (13, -4), (9, -1)])
def test_flatten_errors(opset, axis):
    expect_error("Flatten", [("x", data([2, 3, 4], np.float32), False)], attrs={"axis": axis},
                 opset=opset)


# ---------------------------------------------------------------- Squeeze / Unsqueeze


@pytest.mark.parametrize("axes", [None, [0], [-1], [0, 3], [3, -4]])
@pytest.mark.parametrize("opset", [11, 13, 21])
def test_squeeze(axes, opset):
    x = data([1, 3, 2, 1], np.float32)
    if axes is None:
        check("Squeeze", [("x", x, False)], opset=opset)
    elif opset < 13:
        check("Squeeze", [("x", x, False)], attrs={"axes": axes}, opset=opset)
    else:
        check("Squeeze", [("x", x, False), ints("a", axes)], opset=opset)
        check("Squeeze", [("x", x, False), ints("a", axes, True)], opset=opset)


@pytest.mark.parametrize("axes", [[0], [-1], [0, 3], [1, -1, 3], [-4, 2]])
@pytest.mark.parametrize("opset", [11, 13])
def test_unsqueeze(axes, opset):
    x = data([3, 2], np.float32)
    if opset < 13:
        check("Unsqueeze", [("x", x, False)], attrs={"axes": axes}, opset=opset)
    else:
        check("Unsqueeze", [("x", x, False), ints("a", axes)], opset=opset)


@pytest.mark.parametrize("dtype", SOME_DTYPES)
def test_squeeze_unsqueeze_dtypes(dtype):
    x = data([1, 3, 1], dtype)
    check("Squeeze", [("x", x, False), ints("a", [0, 2])], opset=13, expected=[x.reshape(3)])
    check("Unsqueeze", [("x", x, False), ints("a", [-1])], opset=13,
          expected=[x.reshape(1, 3, 1, 1)])


def test_unsqueeze_scalar():
    check("Unsqueeze", [("x", np.array(5, np.int64), False), ints("a", [0, 1])], opset=13)


@pytest.mark.parametrize("op,axes,opset", [
    ("Squeeze", [1], 13),      # dim 3 is not 1
    ("Squeeze", [4], 13),      # out of range
    ("Squeeze", [1], 11),
    ("Unsqueeze", [0, 0], 13),  # repeated
    ("Unsqueeze", [0, -5], 13),  # repeated after normalization
    ("Unsqueeze", [5], 13),
    ("Unsqueeze", [0, 0], 11),
])
def test_squeeze_unsqueeze_errors(op, axes, opset):
    x = data([1, 3, 1], np.float32)
    if opset < 13:
        expect_error(op, [("x", x, False)], attrs={"axes": axes}, opset=opset)
    else:
        expect_error(op, [("x", x, False), ints("a", axes)], opset=opset)


# ---------------------------------------------------------------- Identity


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("opset", [7, 13, 16, 21])
def test_identity(dtype, opset):
    x = data([2, 3], dtype)
    out = check("Identity", [("x", x, False)], opset=opset, expected=[x])
    # The output is the binding's copy, not the caller's array.
    assert not np.shares_memory(out[0], x)


def test_identity_of_initializer():
    w = data([4], np.float32)
    check("Identity", [("w", w, True)], out_dtypes=[np.float32], expected=[w])


# ---------------------------------------------------------------- Transpose


@pytest.mark.parametrize("shape,perm", [
    ([3, 4], None),
    ([3, 4], [1, 0]),
    ([2, 3, 4], [0, 2, 1]),
    ([2, 3, 4], [2, 0, 1]),
    ([2, 3, 4], [1, 0, 2]),   # keeps the inner dim: row copies
    ([2, 3, 4, 5], [0, 2, 3, 1]),
    ([2, 3, 4, 5], [3, 1, 2, 0]),
    ([2, 1, 4, 1], [3, 0, 1, 2]),  # only moves size-1 dims
    ([1, 37, 53], [0, 2, 1]),
    ([67, 129], [1, 0]),        # blocked 2-D path with ragged tiles
    ([0, 3], [1, 0]),
    ([5], None),
    ([], None),
])
def test_transpose(shape, perm):
    attrs = {"perm": perm} if perm is not None else None
    check("Transpose", [("x", data(shape, np.float32), False)], attrs=attrs, opset=13)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_transpose_dtypes(dtype):
    x = data([3, 4, 5], dtype)
    check("Transpose", [("x", x, False)], attrs={"perm": [2, 0, 1]}, opset=21,
          expected=[x.transpose(2, 0, 1)])
    y = data([40, 33], dtype)
    check("Transpose", [("x", y, False)], opset=21, expected=[y.T])


def test_transpose_large():
    check("Transpose", [("x", data([64, 128, 96], np.float32), False)],
          attrs={"perm": [2, 0, 1]}, opset=13)
    check("Transpose", [("x", data([8, 512, 300], np.float16), False)],
          attrs={"perm": [0, 2, 1]}, opset=13)


@pytest.mark.parametrize("perm", [[0, 0, 1], [0, 1], [0, 1, 3]])
def test_transpose_errors(perm):
    expect_error("Transpose", [("x", data([2, 3, 4], np.float32), False)],
                 attrs={"perm": perm}, opset=13)


# ---------------------------------------------------------------- Concat


@pytest.mark.parametrize("opset,axis", [(7, 0), (7, 1), (11, -1), (13, -3), (13, 2)])
def test_concat(opset, axis):
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    a = axis % 3
    for i, s in enumerate(shapes):
        s[a] = i + 1
    ins = [(f"x{i}", data(s, np.float32, i), False) for i, s in enumerate(shapes)]
    check("Concat", ins, attrs={"axis": axis}, opset=opset)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_concat_dtypes(dtype):
    a, b = data([2, 3], dtype, 0), data([2, 2], dtype, 1)
    check("Concat", [("a", a, False), ("b", b, False)], attrs={"axis": 1}, opset=13,
          expected=[np.concatenate([a, b], axis=1)])


def test_concat_zero_size_and_initializer():
    a, b = data([2, 3], np.float32), np.zeros((0, 3), np.float32)
    check("Concat", [("a", a, False), ("b", b, False), ("c", a, False)], attrs={"axis": 0},
          opset=13)
    check("Concat", [("a", a, False), ("w", data([1, 3], np.float32, 5), True)],
          attrs={"axis": 0}, opset=13)


def test_concat_large():
    ins = [(f"x{i}", data([4, 300, 200], np.float32, i), False) for i in range(3)]
    check("Concat", ins, attrs={"axis": 1}, opset=13)
    ins = [(f"x{i}", data([300, 1000], np.float32, i), False) for i in range(2)]
    check("Concat", ins, attrs={"axis": 0}, opset=13)


def test_concat_errors():
    a = data([2, 3], np.float32)
    expect_error("Concat", [("a", a, False), ("b", data([3, 3], np.float32), False)],
                 attrs={"axis": 1}, opset=13, match="shape")
    expect_error("Concat", [("a", a, False), ("b", a, False)], attrs={"axis": 2}, opset=13)
    s = np.array(1.0, np.float32)
    expect_error("Concat", [("a", s, False), ("b", s, False)], attrs={"axis": 0}, opset=13)
    expect_error("Concat", [("a", a, False)], opset=13, exc=ortlite.OrtliteError)  # no axis


# ---------------------------------------------------------------- Split


def _split_outs(n):
    return [f"y{i}" for i in range(n)]


@pytest.mark.parametrize("split,axis", [(None, 1), ([1, 5], 1), ([2, 2, 2], -1), ([3, 0, 3], 1)])
def test_split_opset11(split, axis):
    x = data([2, 6], np.float32)
    n = 3 if split is None else len(split)
    attrs = {"axis": axis}
    if split is not None:
        attrs["split"] = split
    check("Split", [("x", x, False)], outputs=_split_outs(n), attrs=attrs, opset=11)


@pytest.mark.parametrize("split", [None, [1, 5], [2, 4], [0, 6], [1, 2, 3]])
@pytest.mark.parametrize("as_init", [False, True])
def test_split_opset13(split, as_init):
    x = data([6, 2], np.float32)
    if split is None:
        check("Split", [("x", x, False)], outputs=_split_outs(2), opset=13)
    else:
        check("Split", [("x", x, False), ints("s", split, as_init)],
              outputs=_split_outs(len(split)), opset=13)


@pytest.mark.parametrize("dim,n", [(6, 3), (7, 3), (5, 2), (5, 3), (10, 4), (1, 1)])
def test_split_opset18_num_outputs(dim, n):
    x = data([2, dim], np.float32)
    check("Split", [("x", x, False)], outputs=_split_outs(n),
          attrs={"axis": 1, "num_outputs": n}, opset=18)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_split_dtypes(dtype):
    x = data([2, 5], dtype)
    exp = [x[:, :2], x[:, 2:]]
    check("Split", [("x", x, False), ints("s", [2, 3])], outputs=_split_outs(2),
          attrs={"axis": 1}, opset=13, out_dtypes=[x.dtype] * 2, expected=exp)


def test_split_errors():
    x = data([2, 6], np.float32)
    expect_error("Split", [("x", x, False), ints("s", [2, 3])], outputs=_split_outs(2),
                 attrs={"axis": 1}, opset=13)  # sum 5 != 6
    expect_error("Split", [("x", x, False), ints("s", [-1, 7])], outputs=_split_outs(2),
                 attrs={"axis": 1}, opset=13)
    expect_error("Split", [("x", x, False), ints("s", [6])], outputs=_split_outs(2),
                 attrs={"axis": 1}, opset=13)  # count != outputs
    expect_error("Split", [("x", x, False)], outputs=_split_outs(4), attrs={"axis": 1},
                 opset=13)  # 6 not divisible by 4
    expect_error("Split", [("x", x, False)], outputs=_split_outs(4),
                 attrs={"axis": 1, "num_outputs": 4}, opset=18)  # last chunk would be 0
    expect_error("Split", [("x", data([9], np.float32), False)], outputs=_split_outs(4),
                 attrs={"num_outputs": 4}, opset=18)  # 3, 3, 3, 0
    expect_error("Split", [("x", x, False)], outputs=_split_outs(2),
                 attrs={"axis": 1, "num_outputs": 3}, opset=18)  # != number of outputs
    expect_error("Split", [("x", x, False)], outputs=_split_outs(2), attrs={"axis": 2},
                 opset=13)


# ---------------------------------------------------------------- Slice


@pytest.mark.parametrize("starts,ends,axes", [
    ([0, 1], [2, 3], None),
    ([1], [-1], [1]),
    ([-100], [100], [0]),
    ([2, -3], [INT64_MAX, INT64_MAX], [-1, 0]),
    ([0], [INT64_MIN], [1]),
    ([3], [1], [2]),
])
def test_slice_opset9(starts, ends, axes):
    x = data([4, 5, 6], np.float32)
    attrs = {"starts": starts, "ends": ends}
    if axes is not None:
        attrs["axes"] = axes
    check("Slice", [("x", x, False)], attrs=attrs, opset=9)


SLICE13 = [
    ([0], [5], [0], [1]),
    ([4], [-100], [0], [-1]),
    ([-1], [-7], [0], [-2]),
    ([100], [0], [1], [-3]),
    ([INT64_MAX], [INT64_MIN], [1], [-1]),
    ([INT64_MIN], [INT64_MAX], [1], [1]),
    ([INT64_MAX], [INT64_MAX], [1], [1]),
    ([1, 5], [-1, 0], [-1, 1], [2, -2]),
    ([0, 0, 0], [5, 6, 7], [0, 1, 2], [20, 20, 3]),
    ([2], [2], [0], [1]),
    ([0], [INT64_MAX], [2], [INT64_MAX]),
    ([INT64_MAX], [INT64_MIN], [2], [INT64_MIN]),
]


@pytest.mark.parametrize("starts,ends,axes,steps", SLICE13)
@pytest.mark.parametrize("opset", [10, 13])
def test_slice_opset13(starts, ends, axes, steps, opset):
    x = data([5, 6, 7], np.float32)
    check("Slice", [("x", x, False), ints("s", starts), ints("e", ends), ints("a", axes),
                    ints("t", steps)], opset=opset)


def test_slice_clamping_per_spec():
    x = data([6], np.float32)
    # start -100 -> -94 -> clamped to 0; end INT64_MAX -> clamped to dim-1 = 5; step -2
    # walks down from 0 to above 5: empty (as numpy). onnxruntime 1.23 returns x[0].
    check("Slice", [("x", x, False), ints("s", [-100]), ints("e", [INT64_MAX]), ints("a", [0]),
                    ints("t", [-2])], opset=13, expected=[x[:0]], ort=False)
    # start -100 -> clamped to 0, end -100 -> clamped to -1, step -1: x[0] per the spec's
    # clamping (and onnxruntime); Python slicing (and onnx.reference) would give [].
    check("Slice", [("x", x, False), ints("s", [-100]), ints("e", [-100]), ints("a", [0]),
                    ints("t", [-1])], opset=13, expected=[x[:1]])


def test_slice_optional_inputs_and_initializers():
    x = data([5, 6], np.float32)
    check("Slice", [("x", x, False), ints("s", [1, 2], True), ints("e", [4, 5], True)], opset=13)
    check("Slice", [("x", x, False), ints("s", [1]), ints("e", [4]), "", ints("t", [2])],
          opset=13)
    check("Slice", [("x", x, False), ints("s", [3]), ints("e", [0]), ints("a", [-1]),
                    ints("t", [-1], True)], opset=13)
    i32 = [(n, np.array(v, np.int32), False) for n, v in (("s", [1]), ("e", [-1]), ("a", [1]))]
    check("Slice", [("x", x, False)] + i32, opset=13)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_slice_dtypes(dtype):
    x = data([4, 6], dtype)
    check("Slice", [("x", x, False), ints("s", [3, 1]), ints("e", [0, 6]), ints("a", [0, 1]),
                    ints("t", [-1, 2])], opset=13, expected=[x[3:0:-1, 1:6:2]])


def test_slice_large():
    x = data([64, 128, 130], np.float32)
    check("Slice", [("x", x, False), ints("s", [1, -1]), ints("e", [127, 0]), ints("a", [2, 1]),
                    ints("t", [1, -2])], opset=13)


def test_slice_errors():
    x = data([4, 6], np.float32)
    expect_error("Slice", [("x", x, False), ints("s", [0]), ints("e", [3]), ints("a", [0]),
                           ints("t", [0])], opset=13, match="steps")
    expect_error("Slice", [("x", x, False), ints("s", [0, 0]), ints("e", [3, 3]),
                           ints("a", [0, -2])], opset=13)  # repeated axis
    expect_error("Slice", [("x", x, False), ints("s", [0, 0]), ints("e", [3])], opset=13)
    expect_error("Slice", [("x", x, False), ints("s", [0]), ints("e", [3]), ints("a", [2])],
                 opset=13)


# ---------------------------------------------------------------- Gather


@pytest.mark.parametrize("axis", [0, 1, -1, -3])
@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64])
def test_gather(axis, idx_dtype):
    x = data([3, 4, 5], np.float32)
    idx = np.array([[0, -1], [2, 1]], idx_dtype)
    check("Gather", [("x", x, False), ("i", idx, False)], attrs={"axis": axis}, opset=13)


def test_gather_scalar_index_and_initializer():
    x = data([3, 4], np.float32)
    check("Gather", [("x", x, False), ("i", np.array(-2, np.int64), False)], opset=13)
    check("Gather", [("x", x, False), ("i", np.array([1, 1, 0], np.int64), True)],
          attrs={"axis": 1}, opset=11)
    check("Gather", [("x", x, False), ("i", np.zeros((0,), np.int64), False)], opset=13)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_gather_dtypes(dtype):
    x = data([4, 3], dtype)
    idx = np.array([3, 0, -1], np.int64)
    # onnxruntime 1.23 returns empty strings past the first column for string data.
    check("Gather", [("x", x, False), ("i", idx, False)], attrs={"axis": 0}, opset=13,
          expected=[x[[3, 0, -1]]], ort=dtype is not object)


def test_gather_large():
    x = data([1000, 64], np.float32)
    idx = np.random.default_rng(0).integers(-1000, 1000, (50, 40)).astype(np.int64)
    check("Gather", [("x", x, False), ("i", idx, False)], opset=13)


@pytest.mark.parametrize("idx", [[3], [-4], [0, 100]])
def test_gather_out_of_range(idx):
    x = data([3, 2], np.float32)
    expect_error("Gather", [("x", x, False), ("i", np.array(idx, np.int64), False)],
                 opset=13, match="out of range")


def test_gather_bad_axis():
    x = data([3, 2], np.float32)
    expect_error("Gather", [("x", x, False), ("i", np.array([0], np.int64), False)],
                 attrs={"axis": 2}, opset=13)


# ---------------------------------------------------------------- Shape / Size


@pytest.mark.parametrize("start,end", [(None, None), (1, None), (-1, None), (0, -1),
                                       (-100, 100), (2, 1), (None, 2), (3, 3)])
def test_shape(start, end):
    x = data([2, 3, 4], np.float32)
    attrs = {}
    if start is not None:
        attrs["start"] = start
    if end is not None:
        attrs["end"] = end
    check("Shape", [("x", x, False)], attrs=attrs, opset=15, out_dtypes=[np.int64])


@pytest.mark.parametrize("opset", [7, 13, 21])
@pytest.mark.parametrize("shape", [[], [0, 3], [2, 3, 4]])
def test_shape_size(opset, shape):
    x = data(shape, np.float32)
    check("Shape", [("x", x, False)], opset=opset, out_dtypes=[np.int64])
    check("Size", [("x", x, False)], opset=opset, out_dtypes=[np.int64])


def test_shape_size_strings():
    x = data([2, 5], object)
    check("Shape", [("x", x, False)], opset=13, out_dtypes=[np.int64],
          expected=[np.array([2, 5], np.int64)])
    check("Size", [("x", x, False)], opset=13, out_dtypes=[np.int64],
          expected=[np.array(10, np.int64)])


# ---------------------------------------------------------------- Expand


@pytest.mark.parametrize("in_shape,shape", [
    ([3, 1], [3, 4]),
    ([3, 1], [2, 1, 4]),    # bidirectional: 1 in the shape keeps the input dim
    ([1, 4], [5, 1]),
    ([4], [2, 3, 1]),
    ([], [2, 2]),
    ([2, 3], [3]),
    ([2, 3], [1]),          # no change: shape smaller than the input
    ([3, 1], [2, 1, 0]),
])
@pytest.mark.parametrize("as_init", [False, True])
def test_expand(in_shape, shape, as_init):
    check("Expand", [("x", data(in_shape, np.float32), False), ints("s", shape, as_init)],
          opset=13)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_expand_dtypes(dtype):
    x = data([3, 1], dtype)
    check("Expand", [("x", x, False), ints("s", [2, 3, 4])], opset=8,
          expected=[np.broadcast_to(x, (2, 3, 4)).copy()])


def test_expand_errors():
    x = data([3, 2], np.float32)
    expect_error("Expand", [("x", x, False), ints("s", [4, 2, 3])], opset=13)
    expect_error("Expand", [("x", x, False), ints("s", [-1, 2])], opset=13)


# ---------------------------------------------------------------- Tile


@pytest.mark.parametrize("shape,repeats", [
    ([2, 3], [1, 1]),
    ([2, 3], [2, 3]),
    ([2, 3], [3, 1]),
    ([2, 3], [1, 4]),
    ([2, 1, 3], [2, 5, 1]),
    ([4], [0]),
    ([0, 2], [3, 2]),
])
def test_tile(shape, repeats):
    check("Tile", [("x", data(shape, np.float32), False), ints("r", repeats)], opset=13)
    check("Tile", [("x", data(shape, np.float32), False), ints("r", repeats, True)], opset=6)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_tile_dtypes(dtype):
    x = data([2, 3], dtype)
    check("Tile", [("x", x, False), ints("r", [2, 2])], opset=13, expected=[np.tile(x, (2, 2))])


def test_tile_errors():
    x = data([2, 3], np.float32)
    expect_error("Tile", [("x", x, False), ints("r", [2, -1])], opset=13)
    expect_error("Tile", [("x", x, False), ints("r", [2])], opset=13)
    expect_error("Tile", [("x", x, False), ints("r", [INT64_MAX, 2])], opset=13)


# ---------------------------------------------------------------- Pad


def np_pad(x, pads, mode="constant", value=0, axes=None):
    """numpy reference: negative pads crop first, then numpy.pad (which repeats the
    reflection / cycle for pads wider than the dim, as the ONNX reference does)."""
    r = x.ndim
    axes = list(range(r)) if axes is None else [a % r for a in axes]
    pb, pe = [0] * r, [0] * r
    for i, a in enumerate(axes):
        pb[a], pe[a] = pads[i], pads[i + len(axes)]
    crop = tuple(slice(max(-b, 0), x.shape[d] - max(-e, 0)) for d, (b, e) in
                 enumerate(zip(pb, pe)))
    x = x[crop]
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(pb, pe)]
    if mode == "constant":
        return np.pad(x, widths, mode="constant", constant_values=value)
    return np.pad(x, widths, mode=mode)


def ort_pad_ok(shape, pads, mode, axes=None):
    """onnxruntime reads garbage when a reflect pad is >= the (cropped) dim or a wrap pad
    is > it; compare with it only elsewhere."""
    r = len(shape)
    axes = list(range(r)) if axes is None else [a % r for a in axes]
    for i, a in enumerate(axes):
        b, e = pads[i], pads[i + len(axes)]
        n = shape[a] - max(-b, 0) - max(-e, 0)
        if mode == "reflect" and max(b, e) >= n:
            return False
        if mode == "wrap" and max(b, e) > n:
            return False
    return True


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("pads,value", [([0, 1, 0, 2], 0.0), ([1, 2, 2, 1], 1.5),
                                        ([0, 0, 0, 0], 0.0), ([-1, 1, 1, -2], 2.0)])
def test_pad_opset2(mode, pads, value):
    x = data([3, 4], np.float32)
    check("Pad", [("x", x, False)], attrs={"mode": mode, "pads": pads, "value": value},
          opset=2, expected=[np_pad(x, pads, mode, value)])


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("pads", [[0, 1, 0, 2], [1, 2, 2, 1], [-1, 0, 1, -2], [2, 3, 1, 2],
                                  [-1, 0, 2, -2]])
@pytest.mark.parametrize("opset", [11, 13])
def test_pad_opset11(mode, pads, opset):
    x = data([3, 4], np.float32)
    ins = [("x", x, False), ints("p", pads)]
    if mode == "constant":
        ins.append(("c", np.array(-3.5, np.float32), False))
    check("Pad", ins, attrs={"mode": mode}, opset=opset, expected=[np_pad(x, pads, mode, -3.5)],
          ort=ort_pad_ok(x.shape, pads, mode))


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("axes,pads", [([1], [1, 2]), ([-1, 0], [1, 1, 0, 2]), ([0], [-1, 2]),
                                       ([-1, 0], [2, 1, 0, 2])])
def test_pad_opset18_axes(mode, axes, pads):
    x = data([3, 4, 2], np.float32)
    opset = 19 if mode == "wrap" else 18
    check("Pad", [("x", x, False), ints("p", pads), "", ints("a", axes)],
          attrs={"mode": mode}, opset=opset, expected=[np_pad(x, pads, mode, 0, axes)],
          ort=ort_pad_ok(x.shape, pads, mode, axes))


@pytest.mark.parametrize("pads", [[1, 2, 3, 1], [0, 0, 2, 2], [3, 4, 0, 4], [-1, 2, 1, -1]])
def test_pad_wrap(pads):
    x = data([3, 4], np.float32)
    check("Pad", [("x", x, False), ints("p", pads, True)], attrs={"mode": "wrap"}, opset=19,
          expected=[np_pad(x, pads, "wrap")])


@pytest.mark.parametrize("mode", ["reflect", "wrap", "edge"])
@pytest.mark.parametrize("pads", [[5, 3, 4, 7], [0, 6, 9, -1], [-1, 0, 3, 1], [2, 0, 1, 1]])
def test_pad_wider_than_dim(mode, pads):
    x = data([3, 2], np.float32)
    check("Pad", [("x", x, False), ints("p", pads)], attrs={"mode": mode}, opset=19,
          expected=[np_pad(x, pads, mode)], ort=ort_pad_ok(x.shape, pads, mode))
    y = data([2, 2], np.int32)  # a dim cropped to size 1: reflect repeats its element
    check("Pad", [("x", y, False), ints("p", pads)], attrs={"mode": mode}, opset=19,
          expected=[np_pad(y, pads, mode)], ort=False)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_pad_dtypes(dtype):
    x = data([2, 3], dtype)
    cval = data([], dtype, 7)
    exp = np.pad(x, ((1, 0), (2, 1)), mode="constant", constant_values=cval)
    check("Pad", [("x", x, False), ints("p", [1, 2, 0, 1]), ("c", cval, False)], opset=18,
          expected=[exp])
    exp = np.pad(x, ((1, 0), (2, 1)), mode="edge")
    check("Pad", [("x", x, False), ints("p", [1, 2, 0, 1])], attrs={"mode": "edge"}, opset=18,
          expected=[exp])
    exp = np.pad(x, ((1, 0), (2, 1)), mode="reflect")
    check("Pad", [("x", x, False), ints("p", [1, 2, 0, 1])], attrs={"mode": "reflect"},
          opset=18, expected=[exp])


def test_pad_default_value_and_large():
    x = data([8, 64, 64], np.float32)
    check("Pad", [("x", x, False), ints("p", [0, 1, 1, 0, 1, 1])], opset=13)
    check("Pad", [("x", x, False), ints("p", [0, 3, 3, 0, 3, 3])], attrs={"mode": "reflect"},
          opset=13)
    check("Pad", [("x", x, False), ints("p", [0, -3, 3, 0, 3, -3])], attrs={"mode": "edge"},
          opset=13)
    # A scalar pads to itself (onnxruntime refuses rank 0).
    s = np.array(2.0, np.float32)
    check("Pad", [("x", s, False), ints("p", [])], opset=13, expected=[s], ort=False)


def test_pad_errors():
    x = data([3, 4], np.float32)
    expect_error("Pad", [("x", x, False), ints("p", [1, 1])], opset=13)  # length
    expect_error("Pad", [("x", x, False), ints("p", [-4, 0, 0, 0])], opset=13)  # crops all+
    expect_error("Pad", [("x", x, False), ints("p", [0, 0, 0, 0])], attrs={"mode": "bad"},
                 opset=13)
    expect_error("Pad", [("x", x, False), ints("p", [0, 0, 0, 0])], attrs={"mode": "wrap"},
                 opset=18)  # wrap is opset 19+
    expect_error("Pad", [("x", x, False), ints("p", [1, 1, 1, 1]), "", ints("a", [0, 0])],
                 opset=18)  # repeated axis
    expect_error("Pad", [("x", x, False), ints("p", [INT64_MAX, 0, 1, 0])], opset=13)
    expect_error("Pad", [("x", x, False), ints("p", [1, 0, 0, 0]),
                         ("c", np.array(1, np.int64), False)], opset=13)  # wrong type
    e = np.zeros((0, 2), np.float32)
    expect_error("Pad", [("x", e, False), ints("p", [1, 0, 1, 0])], attrs={"mode": "edge"},
                 opset=13)


# ---------------------------------------------------------------- randomized (seeded)


def spec_slice_indices(dim, start, end, step):
    """The ONNX Slice spec, literally: negative start/end += dim, then start is clamped to
    [0, dim] (step > 0) or [0, dim-1] (step < 0), end to [0, dim] or [-1, dim-1]."""
    if start < 0:
        start += dim
    if end < 0:
        end += dim
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
    else:
        start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    return list(range(start, end, step))


def test_random_slices():
    rng = np.random.default_rng(1)
    x = data([7, 6, 9], np.int32)
    vals = [INT64_MIN, -100, -9, -3, -1, 0, 1, 2, 5, 8, 9, 100, INT64_MAX]
    for _ in range(40):
        k = int(rng.integers(1, 4))
        axes = [int(a) for a in rng.permutation(3)[:k]]
        starts = [int(rng.choice(vals)) for _ in axes]
        ends = [int(rng.choice(vals)) for _ in axes]
        steps = [int(rng.choice([-3, -2, -1, 1, 2, 4])) for _ in axes]
        exp = x
        for a, s, e, t in zip(axes, starts, ends, steps):
            exp = np.take(exp, spec_slice_indices(x.shape[a], s, e, t), axis=a)
        # onnxruntime deviates from the spec in corner cases (test_slice_clamping_per_spec).
        check("Slice", [("x", x, False), ints("s", starts), ints("e", ends), ints("a", axes),
                        ints("t", steps)], opset=13, expected=[exp], ort=False)


def test_random_transposes():
    rng = np.random.default_rng(2)
    for rank in (3, 4, 5):
        for _ in range(6):
            shape = [int(v) for v in rng.integers(1, 12, rank)]
            perm = [int(p) for p in rng.permutation(rank)]
            x = data(shape, np.float32)
            check("Transpose", [("x", x, False)], attrs={"perm": perm}, opset=13,
                  expected=[x.transpose(perm)])


def test_random_pads():
    rng = np.random.default_rng(3)
    x = data([4, 5, 3], np.float32)
    for _ in range(30):
        mode = str(rng.choice(["constant", "reflect", "edge", "wrap"]))
        pads = [int(v) for v in rng.integers(-2, 6, 6)]
        check("Pad", [("x", x, False), ints("p", pads), ("c", np.array(9, np.float32), False)],
              attrs={"mode": mode}, opset=19, expected=[np_pad(x, pads, mode, 9)],
              ort=ort_pad_ok(x.shape, pads, mode))


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_pad_opset2_float_types(dtype):
    x = data([2, 3], dtype)
    check("Pad", [("x", x, False)], attrs={"pads": [1, 0, 0, 2], "value": 2.5}, opset=2,
          expected=[np.pad(x, ((1, 0), (0, 2)), constant_values=dtype(2.5))])


def test_pad_opset2_int_constant_not_implemented():
    x = data([2, 3], np.int32)
    expect_error("Pad", [("x", x, False)], attrs={"pads": [1, 0, 0, 2], "value": -1.0},
                 opset=2, exc=ortlite.NotImplemented)
