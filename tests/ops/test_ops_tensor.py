"""Tensor / shape kernels (src/providers/cpu/tensor): Reshape Flatten Squeeze Unsqueeze Identity
Transpose Concat Split Slice Gather Shape Size Expand Tile Pad, compared with onnxruntime
(and with numpy where onnxruntime has no kernel for an element type). TopK, the string ops
(StringConcat, StringSplit, StringNormalizer, RegexFullMatch), TensorScatter and BitCast:
compared with onnxruntime where it runs the case (opsets <= 23), else with
onnx.reference.ReferenceEvaluator or numpy; plus the error paths."""

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import (NP_TO_ONNX, assert_same, check_against_ort, check_against_reference,
                     make_model, node_model, rng, run_ort, run_ortlite, session, strings)

_ORT_STATE = onnxruntime.capi.onnxruntime_pybind11_state
# onnxruntime errors meaning "no kernel / type not allowed" (not a wrong result).
_ORT_UNSUPPORTED = (_ORT_STATE.NotImplemented, _ORT_STATE.InvalidGraph, _ORT_STATE.Fail)

ALL_DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64,
              np.uint8, np.uint16, np.uint32, np.uint64, np.bool_, object]
SOME_DTYPES = [np.float32, np.float16, np.int64, np.uint8, np.bool_, object]
I64 = np.int64
F16, F32, F64 = np.float16, np.float32, np.float64
STR = object
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


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.int8, np.uint16,
                                   np.float64, np.bool_, object])
@pytest.mark.parametrize("n", [3, 16, 17, 70, 3136])
def test_expand_broadcast_rows(dtype, n):
    """Rows that repeat one element (filled, not copied), of lengths around the vector
    widths; zeros and repeated-byte values too."""
    x = data([5, 1], dtype, 3)
    if np.dtype(dtype) != object:
        x[0, 0] = 0
    check("Expand", [("x", x, False), ints("s", [2, 5, n])], opset=13,
          expected=[np.broadcast_to(x, (2, 5, n))])


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.int64, np.float16])
def test_tile_expand_random(dtype, threads):
    """Tile and Expand write the input once and then copy blocks of the output: random
    ranks, sizes and repeats (axes that merge, repeated axes inside unrepeated ones, ones
    everywhere), and outputs large enough to be split over the threads, exact against
    numpy."""
    from helpers import make_model, run_lite

    g = np.random.default_rng(11)
    t = NP_TO_ONNX[np.dtype(dtype)]
    for case in range(60):
        rank = int(g.integers(1, 6))
        shape = [int(v) for v in g.choice([1, 1, 2, 3, 5, 8, 17], rank)]
        if case % 10 == 0:
            shape[0] = int(g.choice([64, 300]))
        x = (g.standard_normal(shape) * 50).astype(dtype)
        reps = [int(v) for v in g.choice([1, 1, 2, 3], rank)]
        m = make_model([helper.make_node("Tile", ["x", "r"], ["y"])], [("x", dtype, shape)],
                       [("y", dtype, None)],
                       [numpy_helper.from_array(np.array(reps, np.int64), "r")])
        got = run_lite(m, {"x": x}, threads)[0]
        assert np.array_equal(got, np.tile(x, reps)), (shape, reps)
        lead = [int(v) for v in g.choice([1, 2, 4], int(g.integers(0, 3)))]
        out = lead + [int(g.choice([2, 7, 16])) if d == 1 else d for d in shape]
        m = make_model([helper.make_node("Expand", ["x", "s"], ["y"])], [("x", dtype, shape)],
                       [("y", dtype, None)],
                       [numpy_helper.from_array(np.array(out, np.int64), "s")])
        got = run_lite(m, {"x": x}, threads)[0]
        assert np.array_equal(got, np.broadcast_to(x, out)), (shape, out)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape,repeats", [
    ([8, 1, 768], [1, 128, 1]),   # 3 KiB rows 128 times: past the 16 KiB copy source
    ([1, 512], [2048, 1]),
    ([3, 1, 1001], [2, 37, 1]),   # 4004-byte blocks: the source is 4 of them, not 16 KiB
    ([2, 1, 7], [1, 1000, 3]),    # 28-byte blocks repeated 3 then 1000 times
    ([5, 1, 3], [1, 4000, 1]),    # 12-byte blocks
])
def test_tile_long_repeats(shape, repeats, threads):
    """Repeats that fill more than 16 KiB: doubled up to a source of whole blocks of about
    16 KiB, then that source copied again (exact against numpy)."""
    from helpers import make_model, run_lite

    x = data(shape, np.float32, 5)
    m = make_model([helper.make_node("Tile", ["x", "r"], ["y"])], [("x", np.float32, shape)],
                   [("y", np.float32, None)],
                   [numpy_helper.from_array(np.array(repeats, np.int64), "r")])
    assert np.array_equal(run_lite(m, {"x": x}, threads)[0], np.tile(x, repeats))
    out = [d * r for d, r in zip(shape, repeats)]
    m = make_model([helper.make_node("Expand", ["x", "s"], ["y"])], [("x", np.float32, shape)],
                   [("y", np.float32, None)],
                   [numpy_helper.from_array(np.array(out, np.int64), "s")])
    if all(d == 1 or r == 1 for d, r in zip(shape, repeats)):
        assert np.array_equal(run_lite(m, {"x": x}, threads)[0], np.broadcast_to(x, out))


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


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("shape,pads", [
    ((1, 7, 5, 1), [0, 2, 2, 0, 0, 2, 2, 0]),      # trailing size-1 dim: rows of 9
    ((2, 5, 3, 4), [0, 1, 2, 0, 0, 3, 1, 0]),      # trailing dim of 4 folded into blocks
    ((2, 5, 3, 4), [1, 0, 0, 0, 2, 0, 0, 0]),      # only the outermost dim padded
    ((3, 6, 5), [0, -1, 2, 1, 2, -1]),             # crops and pads on the same dims
    ((4, 9), [0, 0, 0, 0]),                        # nothing padded: a copy
    ((2, 3, 4, 5, 6), [0, 1, 0, 2, 0, 0, 2, 0, 1, 0])])
def test_pad_folded_rows(mode, shape, pads):
    x = data(shape, np.float32)
    opset = 19 if mode == "wrap" else 18
    ins = [("x", x, False), ints("p", pads)]
    if mode == "constant":
        ins.append(("c", np.array(-2.5, np.float32), False))
    check("Pad", ins, attrs={"mode": mode}, opset=opset, expected=[np_pad(x, pads, mode, -2.5)],
          ort=ort_pad_ok(x.shape, pads, mode))


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.uint8, np.bool_, object])
@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad_folded_rows_dtypes(dtype, mode):
    x = data([2, 3, 4, 3], dtype)
    pads = [0, 2, 1, 0, 1, 1, 2, 0]
    cval = data([], dtype, 5)
    ins = [("x", x, False), ints("p", pads)]
    if mode == "constant":
        ins.append(("c", cval, False))
    check("Pad", ins, attrs={"mode": mode}, opset=18, expected=[np_pad(x, pads, mode, cval)])


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


# ---------------------------------------------------------------------------------------
# TopK


@pytest.mark.parametrize("dtype", [F32, F64, np.int32, np.int64])
@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("axis", [0, -1, 1])
def test_topk_matches_onnxruntime(dtype, largest, axis):
    # Few distinct values: many ties, which must keep the lower index first.
    x = rng(1).integers(-3, 4, size=(5, 7, 4)).astype(dtype)
    k = np.array([3], np.int64)
    m = node_model("TopK", {"x": x, "k": k}, ["v", "i"], attrs=dict(axis=axis, largest=largest),
                   opset=11, out_dtypes=[dtype, np.int64])
    check_against_ort(m, {"x": x, "k": k})


def test_topk_opset1_k_attribute_and_opset10_input():
    x = rng(2).standard_normal((3, 9)).astype(F32)
    m = node_model("TopK", {"x": x}, ["v", "i"], attrs=dict(k=4), opset=1,
                   out_dtypes=[F32, np.int64])
    check_against_ort(m, {"x": x})
    k = np.array([9], np.int64)
    m = node_model("TopK", {"x": x, "k": k}, ["v", "i"], attrs=dict(axis=1), opset=10,
                   out_dtypes=[F32, np.int64])
    check_against_ort(m, {"x": x, "k": k})


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.uint16, np.uint32,
                                   np.uint64, F16])
def test_topk_other_types_match_reference_at_opset_24(dtype):
    x = rng(3).integers(0, 6, size=(4, 10)).astype(dtype)
    k = np.array([5], np.int64)
    for largest in (0, 1):
        m = node_model("TopK", {"x": x, "k": k}, ["v", "i"], attrs=dict(largest=largest), opset=24,
                       out_dtypes=[dtype, np.int64])
        check_against_reference(m, {"x": x, "k": k})


def test_topk_k_zero_gives_empty_outputs():
    x = rng(4).standard_normal((3, 5)).astype(F32)
    k = np.array([0], np.int64)
    m = node_model("TopK", {"x": x, "k": k}, ["v", "i"], opset=11, out_dtypes=[F32, np.int64])
    check_against_ort(m, {"x": x, "k": k})


def test_topk_unsorted_returns_the_same_set_as_onnxruntime():
    x = rng(5).permutation(40).astype(F32).reshape(2, 20)
    k = np.array([6], np.int64)
    m = node_model("TopK", {"x": x, "k": k}, ["v", "i"], attrs=dict(sorted=0), opset=11,
                   out_dtypes=[F32, np.int64])
    ev, ei = run_ort(m, {"x": x, "k": k})
    av, ai = run_ortlite(m, {"x": x, "k": k})
    np.testing.assert_array_equal(np.sort(av, axis=1), np.sort(ev, axis=1))
    np.testing.assert_array_equal(np.sort(ai, axis=1), np.sort(ei, axis=1))


def test_topk_nan_ranks_above_numbers():
    x = np.array([[1.0, np.nan, 3.0, -1.0]], F32)
    k = np.array([2], np.int64)
    m = node_model("TopK", {"x": x, "k": k}, ["v", "i"], opset=11, out_dtypes=[F32, np.int64])
    v, i = run_ortlite(m, {"x": x, "k": k})
    np.testing.assert_array_equal(i, [[1, 2]])
    assert np.isnan(v[0, 0]) and v[0, 1] == 3.0


def test_topk_errors():
    x = rng(6).standard_normal((3, 5)).astype(F32)
    for k, pat in ((np.array([6], np.int64), "larger than the dimension 5"),
                   (np.array([-1], np.int64), "negative"),
                   (np.array([1, 2], np.int64), "input 'K'")):
        m = node_model("TopK", {"x": x, "k": k}, ["v", "i"], opset=11, out_dtypes=[F32, np.int64])
        with pytest.raises(ortlite.InvalidArgument, match=pat):
            run_ortlite(m, {"x": x, "k": k})
    k = np.array([1], np.int64)
    m = node_model("TopK", {"x": x, "k": k}, ["v", "i"], attrs=dict(axis=2), opset=11,
                   out_dtypes=[F32, np.int64])
    with pytest.raises(ortlite.InvalidArgument, match="axis"):
        run_ortlite(m, {"x": x, "k": k})
    b = np.ones((2, 3), np.bool_)
    m = node_model("TopK", {"x": b, "k": k}, ["v", "i"], opset=11, out_dtypes=[np.bool_, np.int64])
    with pytest.raises(ortlite.NotImplemented, match="bool"):
        run_ortlite(m, {"x": b, "k": k})
    m = node_model("TopK", {"x": x}, ["v", "i"], attrs=dict(k=-2), opset=1,
                   out_dtypes=[F32, np.int64])
    with pytest.raises(ortlite.OrtliteError, match="'k'"):
        run_ortlite(m, {"x": x})


# ---------------------------------------------------------------------------------------
# String ops


@pytest.mark.parametrize("x,y", [
    (strings("abc", "déf", ""), strings("1", "22", "333")),
    (strings(["a", "b"], ["c", "d"]), strings("-x", "-y")),  # broadcast along the last axis
    (strings(["a"], ["b"]), strings("1", "2", "3")),          # both sides broadcast
    (np.array("cat", dtype=object), strings(["s", "ty"])),
    (np.zeros((0, 2), dtype=object), strings("x", "y")),
])
def test_string_concat_matches_onnxruntime(x, y):
    m = node_model("StringConcat", {"x": x, "y": y}, ["z"], opset=20, out_dtypes=[STR])
    check_against_ort(m, {"x": x, "y": y})


def test_string_concat_errors():
    x, y = strings("a", "b"), strings("a", "b", "c")
    with pytest.raises(ortlite.InvalidArgument, match="broadcast"):
        run_ortlite(node_model("StringConcat", {"x": x, "y": y}, ["z"], opset=20), {"x": x, "y": y})
    n = np.zeros(2, np.int64)
    with pytest.raises(ortlite.InvalidArgument, match="string"):
        run_ortlite(node_model("StringConcat", {"x": x, "y": n}, ["z"], opset=20,
                               out_dtypes=[STR]), {"x": x, "y": n})


SPLIT_INPUT = strings(["a,b,,c", ",lead", "trail,", "no delimiter"],
                      ["  two  spaces ", "tab\there", "x,y", "a::b::"])


@pytest.mark.parametrize("attrs", [dict(delimiter=","), dict(delimiter="::"),
                                   dict(delimiter=",", maxsplit=1), dict(delimiter=",",
                                                                         maxsplit=0)])
def test_string_split_delimiter_matches_onnxruntime(attrs):
    m = node_model("StringSplit", {"x": SPLIT_INPUT}, ["y", "z"], attrs=attrs, opset=20,
                   out_dtypes=[STR, np.int64])
    check_against_ort(m, {"x": SPLIT_INPUT})


def test_string_split_empty_string_with_delimiter_is_one_substring():
    # Python's "".split(","), as the reference: [""]; onnxruntime counts 0 substrings
    x = strings("", "a,b")
    m = node_model("StringSplit", {"x": x}, ["y", "z"], attrs=dict(delimiter=","), opset=20,
                   out_dtypes=[STR, np.int64])
    y, z = check_against_reference(m, {"x": x})
    assert z.tolist() == [1, 2] and y.tolist() == [["", ""], ["a", "b"]]


@pytest.mark.parametrize("attrs", [{}, dict(maxsplit=1), dict(maxsplit=2), dict(maxsplit=0)])
def test_string_split_whitespace_matches_reference(attrs):
    # Python's str.split(None, maxsplit): every Unicode whitespace character separates,
    # and a maxsplit remainder keeps its trailing whitespace.
    x = strings("  a  b c ", "tab\tand\nnewline", "nbsp\u00a0ideographic\u3000space",
                "", "   ", "one")
    m = node_model("StringSplit", {"x": x}, ["y", "z"], attrs=attrs, opset=20,
                   out_dtypes=[STR, np.int64])
    y, z = check_against_reference(m, {"x": x})
    for i, s in enumerate(x):
        parts = s.split(None, attrs.get("maxsplit", -1))
        assert z[i] == len(parts) and list(y[i][: len(parts)]) == parts


def test_string_split_whitespace_agrees_with_onnxruntime_on_spaces():
    x = strings(["hello world !", "  hello   world !"], ["one", ""])
    m = node_model("StringSplit", {"x": x}, ["y", "z"], opset=20, out_dtypes=[STR, np.int64])
    check_against_ort(m, {"x": x})


def test_string_split_rejects_numbers():
    x = np.zeros(3, F32)
    with pytest.raises(ortlite.InvalidArgument, match="string"):
        run_ortlite(node_model("StringSplit", {"x": x}, ["y", "z"], opset=20,
                               out_dtypes=[STR, np.int64]), {"x": x})


WEEK = strings("Monday", "tuesday", "MONDAY", "Ünïcödé straße", "wednesday")


@pytest.mark.parametrize("attrs", [
    dict(stopwords=["monday"]),
    dict(stopwords=["monday"], is_case_sensitive=1),
    dict(stopwords=["MONDAY", "ünïcödé straße"], case_change_action="LOWER"),
    dict(case_change_action="UPPER"),
    dict(stopwords=["tuesday"], case_change_action="UPPER", is_case_sensitive=1),
])
@pytest.mark.parametrize("two_d", [False, True])
def test_string_normalizer_matches_onnxruntime(attrs, two_d):
    # onnxruntime needs an installed locale; C.UTF-8 is the one every glibc system has
    x = WEEK.reshape(1, -1) if two_d else WEEK
    m = node_model("StringNormalizer", {"x": x}, ["y"], attrs=dict(locale="C.UTF-8", **attrs),
                   opset=10)
    check_against_ort(m, {"x": x})


def test_string_normalizer_default_locale_maps_non_ascii_case():
    # en_US.UTF-8 when installed, else C.UTF-8: the same simple case mapping
    x = strings("Café Ünïcödé", "ΑΘΗΝΑ", "straße")
    for action, fn in [("UPPER", str.upper), ("LOWER", str.lower)]:
        m = node_model("StringNormalizer", {"x": x}, ["y"], attrs=dict(case_change_action=action),
                       opset=10)
        y = run_ortlite(m, {"x": x})[0]
        assert y[:2].tolist() == [fn(v) for v in x[:2]]
    # one character to one character: no ß -> SS expansion (as onnxruntime)
    assert y[2] == "straße" and run_ortlite(
        node_model("StringNormalizer", {"x": x}, ["y"], attrs=dict(case_change_action="UPPER"),
                   opset=10),
        {"x": x})[0][2] == "STRAßE"


def test_string_normalizer_all_dropped_gives_one_empty_string():
    for x, shape in [(strings("a", "A"), (1,)), (strings(["a", "A"]), (1, 1))]:
        m = node_model("StringNormalizer", {"x": x}, ["y"], attrs=dict(stopwords=["a"]), opset=10)
        y = run_ortlite(m, {"x": x})[0]
        assert y.shape == shape and y.ravel()[0] == ""


def test_string_normalizer_errors():
    x = strings(["a", "b"], ["c", "d"])
    with pytest.raises(ortlite.InvalidArgument, match=r"\[1, C\]"):
        run_ortlite(node_model("StringNormalizer", {"x": x}, ["y"], opset=10), {"x": x})
    with pytest.raises(ortlite.InvalidArgument, match="case_change_action"):
        session(node_model("StringNormalizer", {"x": x}, ["y"],
                           attrs=dict(case_change_action="TITLE"), opset=10))
    bad = np.array([b"ok", b"\xff\xfe"], dtype=object)
    m = node_model("StringNormalizer", {"x": strings("a", "b")}, ["y"],
                   attrs=dict(case_change_action="LOWER"), opset=10)
    with pytest.raises(ortlite.InvalidArgument, match="UTF-8"):
        run_ortlite(m, {"x": bad})


REGEX_INPUT = strings(["www.google.com", "www.bbc.co.uk", "abc123", "日本語"],
                      ["", "user@gmail.com", "a\nb", "é"])


@pytest.mark.parametrize("pattern", [
    r"www\.[\w.-]+\.\bcom\b", r"[a-z]+\d+", r".*", r"(a|ab)(c|bcd)?", r"\w+@(gmail|yahoo)\.com",
    r"a.b", r"[^@]*", r"(?:www\.)?\w+\.(com|co\.uk)", r"x{0,3}", r"a\sb",
    # non-ASCII: one code point per `.` or class, as RE2
    r".", r".{3}", r"[^a]", r"日.語", r"\W",
])
def test_regex_full_match_matches_onnxruntime(pattern):
    m = node_model("RegexFullMatch", {"x": REGEX_INPUT}, ["y"], attrs=dict(pattern=pattern),
                   opset=20, out_dtypes=[np.bool_])
    check_against_ort(m, {"x": REGEX_INPUT})


def test_regex_full_match_long_input_does_not_exhaust_the_stack():
    x = strings("ab" * 200000 + "c", "ab" * 200000)
    m = node_model("RegexFullMatch", {"x": x}, ["y"], attrs=dict(pattern="(a|b)*c"), opset=20,
                   out_dtypes=[np.bool_])
    assert run_ortlite(m, {"x": x})[0].tolist() == [True, False]


def test_regex_full_match_errors():
    x = strings("a")
    for pattern, err in [("(unclosed", "pattern"), ("a" * 5000, "at most"),
                         (r"(a)\1", "pattern"), ("(" * 101 + "a" + ")" * 101, "nests"),
                         (r"\pL+", r"escape \\p"), (r"(?i)abc", "pattern")]:
        with pytest.raises(ortlite.InvalidArgument, match=err):
            session(node_model("RegexFullMatch", {"x": x}, ["y"], attrs=dict(pattern=pattern),
                               opset=20, out_dtypes=[np.bool_]))
    with pytest.raises(ortlite.InvalidGraph, match="pattern"):
        session(node_model("RegexFullMatch", {"x": x}, ["y"], opset=20, out_dtypes=[np.bool_]))


# ---------------------------------------------------------------------------------------
# TensorScatter (opset 24) and BitCast (opset 26): newer than onnxruntime 1.23


@pytest.mark.parametrize("mode", ["linear", "circular"])
@pytest.mark.parametrize("axis,shape,seq", [(-2, (2, 3, 8, 4), 3), (1, (3, 6, 5), 2),
                                            (2, (2, 3, 7, 2), 4), (-1, (2, 2, 5), 5)])
def test_tensor_scatter_matches_reference(mode, axis, shape, seq):
    g = rng(len(shape) + seq)
    past = g.standard_normal(shape).astype(F32)
    ax = axis % len(shape)
    ushape = list(shape)
    ushape[ax] = seq
    update = g.standard_normal(ushape).astype(F32)
    hi = shape[ax] - seq + 1 if mode == "linear" else 3 * shape[ax]
    idx = g.integers(0, hi, size=shape[0]).astype(np.int64)
    feeds = {"past": past, "update": update, "idx": idx}
    m = node_model("TensorScatter", feeds, ["y"], attrs=dict(mode=mode, axis=axis), opset=24)
    check_against_reference(m, feeds, rtol=0, atol=0)
    # without write_indices every batch writes from position 0
    feeds = {"past": past, "update": update}
    m = node_model("TensorScatter", feeds, ["y"], attrs=dict(mode=mode, axis=axis), opset=24)
    check_against_reference(m, feeds, rtol=0, atol=0)


def test_tensor_scatter_strings():
    past = strings(["a", "b", "c"], ["d", "e", "f"]).reshape(2, 3, 1)
    update = strings(["X"], ["Y"]).reshape(2, 1, 1)
    feeds = {"past": past, "update": update, "idx": np.array([2, 0], np.int64)}
    m = node_model("TensorScatter", feeds, ["y"], opset=24)
    y = run_ortlite(m, feeds)[0]
    assert y.reshape(2, 3).tolist() == [["a", "b", "X"], ["Y", "e", "f"]]


def test_tensor_scatter_errors():
    past = np.zeros((2, 4, 3), F32)
    update = np.zeros((2, 2, 3), F32)
    feeds = {"past": past, "update": update, "idx": np.array([3, 0], np.int64)}
    s = session(node_model("TensorScatter", feeds, ["y"], opset=24))
    with pytest.raises(ortlite.InvalidArgument, match="max_sequence_length"):
        s.run(None, feeds)
    for name, value, err in [("idx", np.array([0, 0, 0], np.int64), "write_indices"),
                             ("update", np.zeros((2, 2, 4), F32), "update")]:
        bad = dict(feeds, **{name: value})
        with pytest.raises(ortlite.InvalidArgument, match=err):
            run_ortlite(node_model("TensorScatter", bad, ["y"], opset=24), bad)
    with pytest.raises(ortlite.InvalidArgument, match="axis"):
        run_ortlite(node_model("TensorScatter", feeds, ["y"], attrs=dict(axis=0), opset=24), feeds)
    with pytest.raises(ortlite.InvalidArgument, match="mode"):
        session(node_model("TensorScatter", feeds, ["y"], attrs=dict(mode="ring"), opset=24))


@pytest.mark.parametrize("x,to", [
    (np.array([1.0, -2.5, np.inf, np.nan], F32), np.int32),
    (np.array([[1, -7], [2**31 - 1, -2**31]], np.int32), F32),
    (np.array([1e300, -0.0], F64), np.uint64),
    (np.array([-1, 255, 7], np.int16), F16),
    (np.array(3.5, F32), np.uint32),
    (np.array([-128, 0, 127], np.int8), np.uint8),
    (np.array([True, False], np.bool_), np.int8),
])
def test_bitcast_matches_numpy_view(x, to):
    m = node_model("BitCast", {"x": x}, ["y"], attrs=dict(to=NP_TO_ONNX[np.dtype(to)]), opset=26,
                   out_dtypes=[to])
    y = run_ortlite(m, {"x": x})[0]
    assert y.dtype == np.dtype(to) and y.shape == x.shape
    assert y.tobytes() == x.tobytes()


def test_bitcast_narrow_types():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.array([0, 1, 0x7e, 0x80, 0xff], np.uint8)
    m = node_model("BitCast", {"x": x}, ["y"], attrs=dict(to=TensorProto.FLOAT8E4M3FN), opset=26,
                   out_elems=[TensorProto.FLOAT8E4M3FN])
    y = run_ortlite(m, {"x": x})[0]
    assert y.dtype == ml_dtypes.float8_e4m3fn and y.view(np.uint8).tolist() == x.tolist()
    v = np.array([-8, -1, 0, 7])
    x4 = v.astype(ml_dtypes.int4)
    m = node_model("BitCast", {"x": x4}, ["y"], attrs=dict(to=TensorProto.UINT4), opset=26,
                   out_elems=[TensorProto.UINT4])
    y = run_ortlite(m, {"x": x4})[0]
    assert y.dtype == ml_dtypes.uint4 and y.astype(np.int64).tolist() == (v & 0xF).tolist()
    m = node_model("BitCast", {"x": x4}, ["y"], attrs=dict(to=TensorProto.UINT8), opset=26,
                   out_dtypes=[np.uint8])
    with pytest.raises(ortlite.InvalidArgument, match="widths differ"):
        run_ortlite(m, {"x": x4})


def test_bitcast_to_bool_reads_nonzero_bytes_as_true():
    x = np.array([0, 1, 2, 255], np.uint8)
    m = node_model("BitCast", {"x": x}, ["y"], attrs=dict(to=TensorProto.BOOL), opset=26,
                   out_dtypes=[np.bool_])
    assert run_ortlite(m, {"x": x})[0].tolist() == [False, True, True, True]


def test_bitcast_errors():
    x = np.zeros(3, F32)
    with pytest.raises(ortlite.InvalidArgument, match="widths differ"):
        run_ortlite(node_model("BitCast", {"x": x}, ["y"], attrs=dict(to=TensorProto.DOUBLE),
                               opset=26, out_dtypes=[F64]), {"x": x})
    with pytest.raises(ortlite.InvalidArgument, match="non-string"):
        session(node_model("BitCast", {"x": x}, ["y"], attrs=dict(to=TensorProto.STRING), opset=26,
                           out_dtypes=[STR]))
    s = strings("ab")
    with pytest.raises(ortlite.InvalidArgument, match="string"):
        run_ortlite(node_model("BitCast", {"x": s}, ["y"], attrs=dict(to=TensorProto.INT64),
                               opset=26, out_dtypes=[np.int64]), {"x": s})


# --- Transpose as a batch of matrix transposes (NHWC <-> NCHW and friends) -------------------


@pytest.mark.parametrize("shape,perm", [
    ((1, 56, 56, 256), [0, 3, 1, 2]), ((2, 64, 7, 9), [0, 2, 3, 1]), ((17, 33), [1, 0]),
    ((3, 5, 1), [0, 2, 1]), ((2, 3, 31, 18), [0, 1, 3, 2]), ((4, 5, 6, 7, 3), [0, 3, 4, 1, 2]),
    ((1, 1, 16, 16), [0, 1, 3, 2]), ((2, 15, 17), [2, 0, 1]), ((6, 4, 5), [1, 2, 0]),
    # 2..4 channels <-> planes (whole-vector permutes), with tails and several chunks
    ((1, 224, 224, 3), [0, 3, 1, 2]), ((1, 3, 37, 45), [0, 2, 3, 1]), ((2, 13, 11, 4), [0, 3, 1, 2]),
    ((2, 4, 1029), [0, 2, 1]), ((3, 2, 7), [0, 2, 1]), ((2, 2100, 2), [0, 2, 1]),
    ((5, 16, 3), [0, 2, 1]), ((3, 48), [1, 0]), ((4, 2051), [1, 0]), ((2, 17), [1, 0]),
    ((130, 75), [1, 0]), ((2, 67, 129), [0, 2, 1]),
])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint32, np.float16, np.int64])
@pytest.mark.parametrize("threads", [1, 2])
def test_transpose_batched_2d_matches_numpy(shape, perm, dtype, threads):
    x = (np.random.default_rng(11).standard_normal(shape) * 100).astype(dtype)
    node = helper.make_node("Transpose", ["x"], ["y"], perm=perm)
    elem = NP_TO_ONNX[np.dtype(dtype)]
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", elem, shape)],
                              [helper.make_tensor_value_info("y", elem, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    so = ortlite.SessionOptions()
    so.intra_op_num_threads = threads
    got = ortlite.InferenceSession(model.SerializeToString(), so).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, np.transpose(x, perm))


_TRANSPOSE_ISA_SCRIPT = r"""
import sys
import numpy as np
import ortlite
from onnx import TensorProto, helper
rng = np.random.default_rng(5)
for shape, perm in [((1, 56, 56, 64), [0, 3, 1, 2]), ((2, 31, 18), [0, 2, 1]),
                    ((1, 12, 128, 64), [0, 1, 3, 2]), ((17, 33), [1, 0]), ((8, 8), [1, 0]),
                    ((3, 9, 24), [0, 2, 1])]:
    x = rng.standard_normal(shape).astype(np.float32)
    node = helper.make_node("Transpose", ["x"], ["y"], perm=perm)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                      shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    for threads in (1, 2):
        so = ortlite.SessionOptions()
        so.intra_op_num_threads = threads
        y = ortlite.InferenceSession(m.SerializeToString(), so).run(None, {"x": x})[0]
        np.testing.assert_array_equal(y, np.transpose(x, perm))
print("OK")
"""


@pytest.mark.parametrize("isa", ["sse2", "avx2", "avx512"])
def test_transpose_tiles_each_isa(isa):
    """The 2-D tile transposes on each path (AVX-512 16 x 16 tiles, AVX2 8 x 8 blocks with
    element-wise edges, plain loops): ORTLITE_FAST_ISA caps the choice in a fresh process."""
    import os
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", _TRANSPOSE_ISA_SCRIPT],
                       env=dict(os.environ, ORTLITE_FAST_ISA=isa), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "OK"


# ScatterND / ScatterElements reductions: min and max from opset 16, as onnxruntime


@pytest.mark.parametrize("opset", [16, 17, 18])
@pytest.mark.parametrize("reduction", ["add", "mul", "min", "max"])
def test_scatter_nd_reductions_match_onnxruntime(opset, reduction):
    # Duplicate indices: the reduction combines every update of a row, in order.
    feeds = {"data": np.full((2, 2, 3), 0.1, np.float32),
             "indices": np.array([[0], [1], [0]], np.int64),
             "updates": (2.0 ** np.arange(1, 19, dtype=np.float32)).reshape(3, 2, 3) * np.where(
                 np.arange(18) % 3 == 0, -1, 1).reshape(3, 2, 3).astype(np.float32)}
    m = node_model("ScatterND", feeds, ["y"], attrs=dict(reduction=reduction), opset=opset)
    check_against_ort(m, feeds, rtol=0, atol=0)


@pytest.mark.parametrize("opset", [16, 17, 18])
@pytest.mark.parametrize("reduction", ["min", "max"])
def test_scatter_elements_min_max_match_onnxruntime(opset, reduction):
    feeds = {"data": np.arange(9, dtype=np.float32).reshape(3, 3) - 4,
             "indices": np.array([[1, 0, 2], [0, 2, 1], [1, 0, 2]], np.int64),
             "updates": np.array([[1.0, -1.1, 9.2], [2.0, 2.1, -2.2], [-7.0, 6.5, 0.5]],
                                 np.float32)}
    m = node_model("ScatterElements", feeds, ["y"], attrs=dict(reduction=reduction, axis=0),
                   opset=opset)
    check_against_ort(m, feeds, rtol=0, atol=0)


def test_scatter_unknown_reduction_is_refused_at_load():
    feeds = {"data": np.zeros((2, 2), np.float32), "indices": np.array([[0]], np.int64),
             "updates": np.ones((1, 2), np.float32)}
    for op in ("ScatterND", "ScatterElements"):
        with pytest.raises(ortlite.InvalidArgument, match="attribute 'reduction' = 'avg' is not "
                                                          "supported at opset 18"):
            session(node_model(op, feeds, ["y"], attrs=dict(reduction="avg"), opset=18))


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float16, np.bool_, np.int8])
@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (5, 3), (0, 4), (64, 64), (7, 1)])
@pytest.mark.parametrize("k", [0, 1, -1, -4, 4, 100, -100, 2**62, -(2**63), 2**63 - 1])
def test_eyelike_diagonals_match_numpy(dtype, shape, k):
    """EyeLike fills zeros then its diagonal; diagonals outside the matrix (also k at the
    int64 bounds) leave it all zeros."""
    x = np.zeros(shape, dtype)
    m = node_model("EyeLike", {"x": x}, ["y"], attrs={"k": k})
    (y,) = run_ortlite(m, {"x": x})
    expected = np.eye(shape[0], shape[1], k=int(np.clip(k, -10**6, 10**6)), dtype=dtype)
    assert y.dtype == expected.dtype
    np.testing.assert_array_equal(y, expected)
