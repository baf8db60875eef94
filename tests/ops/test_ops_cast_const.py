"""Cast, CastLike, Constant, ConstantOfShape and Range, compared with onnxruntime."""

import platform

import numpy as np
import onnxruntime
import pytest
from onnx import AttributeProto, TensorProto, helper, numpy_helper

import ortlite
from helpers import (assert_same, check_against_ort, make_model, onnx_type, run_ort,
                    run_ortlite)

X86 = platform.machine().lower() in ("x86_64", "amd64")

NUMERIC = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64,
           np.uint8, np.uint16, np.uint32, np.uint64, np.bool_]
ALL_TYPES = NUMERIC + [object]
BF16 = TensorProto.BFLOAT16


def tname(dt):
    return np.dtype(dt).name


def cast_model(src, to, opset=21, attrs=None, shape=None):
    to_enum = to if isinstance(to, int) else onnx_type(to)
    node = helper.make_node("Cast", ["x"], ["y"], name="cast", to=to_enum, **(attrs or {}))
    return make_model([node], [("x", src, shape)], [("y", to_enum, None)], opset=opset)


def source_values(dt):
    """Values of dtype dt whose conversion to every type is defined by C++ (in range)."""
    dt = np.dtype(dt)
    if dt == np.bool_:
        return np.array([True, False, True, True, False])
    base = [0, 1, 2, 5, 42, 100, 127]
    if dt.kind == "f":
        base += [3.25, 99.75, 0.5, 126.9]
    return np.array(base, dt)


def signed_values(dt):
    """Negative values: wrap for integer targets (defined), truncate for float sources."""
    dt = np.dtype(dt)
    vals = [-1, -7, -100, -128]
    if dt.kind == "f":
        vals += [-3.7, -100.5, -0.0]
    return np.array(vals, dt)


def compare_cast(src, dst, x, opset=21):
    m = cast_model(src, dst, opset)
    return check_against_ort(m, {"x": x}, rtol=0, atol=0)


# ---- Cast: numeric type matrix ---------------------------------------------------------------

@pytest.mark.parametrize("src", NUMERIC, ids=tname)
def test_cast_numeric_matrix(src):
    for dst in NUMERIC:
        compare_cast(src, dst, source_values(src))
        if np.dtype(src).kind in "if":
            neg = signed_values(src)
            if np.dtype(dst).kind == "u" and np.dtype(src).kind == "f" and not X86:
                continue  # float -> unsigned of a negative value: platform-defined
            compare_cast(src, dst, neg)


@pytest.mark.parametrize("src", [np.float32, np.float64, np.float16], ids=tname)
def test_cast_float_special_values(src):
    """NaN, infinities and out-of-range values must not crash; on x86-64 the result is
    onnxruntime's (wrapped truncation)."""
    vals = [np.nan, np.inf, -np.inf, 1e10, -1e10, 300.5, -200.5, 70000.2, 5e9, -5e9, 2e19,
            3e9, 1e20, 123456789.0, 65504.0, -65504.0]
    with np.errstate(over="ignore"):
        x = np.array(vals, np.float64).astype(src)
    for dst in NUMERIC + [np.float16, np.float32, np.float64]:
        m = cast_model(src, dst)
        got = run_ortlite(m, {"x": x})[0]
        assert got.dtype == np.dtype(dst) and got.shape == x.shape
        if X86 or np.dtype(dst).kind in "fb":
            assert_same([got], run_ort(m, {"x": x}), rtol=0, atol=0)


@pytest.mark.parametrize("src", [np.float32, np.float64], ids=tname)
@pytest.mark.parametrize("n", [7, 16, 37, 133])
def test_cast_float_special_values_vector_and_tail(src, n):
    """The vector conversions (whole vectors) and the scalar tail give the same results:
    special and boundary values at every position, for lengths with and without a tail."""
    vals = [np.nan, np.inf, -np.inf, -0.0, 0.0, 0.4, -0.6, 1e10, -1e10, 300.5, -200.5,
            70000.2, 5e9, -5e9, 2e19, 9.3e18, -9.3e18, 2 ** 31, -(2 ** 31), 2 ** 31 - 128,
            -(2 ** 31) - 256, 2 ** 63, -(2 ** 63), 2 ** 62, 127.9, -128.9, 255.5, 256.0,
            32767.5, -32769.0, 65535.9, 1e-30]
    r = np.random.default_rng(n)
    with np.errstate(over="ignore"):
        x = np.array(vals, np.float64)[r.integers(0, len(vals), n)].astype(src)
    for dst in NUMERIC:
        m = cast_model(src, dst)
        got = run_ortlite(m, {"x": x})[0]
        assert got.dtype == np.dtype(dst) and got.shape == x.shape
        if X86 or np.dtype(dst).kind in "fb":
            assert_same([got], run_ort(m, {"x": x}), rtol=0, atol=0)


@pytest.mark.parametrize("src", [np.int32, np.uint32, np.int64, np.uint64], ids=tname)
def test_cast_int_to_bool_vector_and_tail(src):
    info = np.iinfo(src)
    vals = np.array([0, 1, info.max, info.min, 2 ** 31 if info.max > 2 ** 32 else 2, 0, 0],
                    dtype=src)
    x = vals[np.random.default_rng(1).integers(0, len(vals), 16 * 3 + 5)]
    compare_cast(src, np.bool_, x)


def test_cast_integer_extremes():
    x = np.array([np.iinfo(np.int64).max, np.iinfo(np.int64).min, -1, 2 ** 40 + 3, 255, 256],
                 np.int64)
    for dst in NUMERIC + [object]:
        compare_cast(np.int64, dst, x)
    u = np.array([np.iinfo(np.uint64).max, 2 ** 63 + 5, 2 ** 32 + 1], np.uint64)
    for dst in NUMERIC + [object]:
        compare_cast(np.uint64, dst, u)


@pytest.mark.parametrize("opset", [6, 9, 13, 19, 21, 23])
def test_cast_opsets(opset):
    x = np.array([[1.5, -2.25], [3.0, 1e3]], np.float32)
    for dst in (np.int32, np.float16, np.float64, np.bool_, np.uint8):
        compare_cast(np.float32, dst, x, opset)
    if opset >= 19:
        # onnxruntime refuses `saturate` unless the target is float8; ortlite accepts and
        # ignores it (the spec: it only affects float8).
        expected = run_ort(cast_model(np.float32, np.int64, opset), {"x": x})
        for sat in (0, 1):
            m = cast_model(np.float32, np.int64, opset, {"saturate": sat})
            assert_same(run_ortlite(m, {"x": x}), expected)


def test_cast_same_type_and_empty_and_large():
    x = np.array([1.5, np.nan, -0.0], np.float32)
    compare_cast(np.float32, np.float32, x)
    compare_cast(object, object, np.array(["a", "", "xyz"], object))
    for dst in (np.int64, np.float16, object, np.bool_):
        compare_cast(np.float32, dst, np.zeros((0, 3), np.float32))
    rng = np.random.default_rng(0)
    big = (rng.standard_normal(300_000) * 1000).astype(np.float32)
    for dst in (np.int32, np.float16, np.float64, np.uint16, np.int8):
        compare_cast(np.float32, dst, big)


def test_cast_float16_bit_patterns():
    """Every float16 -> float32, and float32 bit patterns (NaNs, subnormals, ties) -> float16."""
    every = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    compare_cast(np.float16, np.float32, every)
    compare_cast(np.float16, np.float64, every)
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2 ** 32, 100_000, dtype=np.uint64).astype(np.uint32)
    # Rounding ties and the float16 subnormal / overflow boundaries.
    exps = np.repeat(np.arange(98, 146, dtype=np.uint32), 2048)
    mant = np.tile(np.arange(2048, dtype=np.uint32), 48)
    ties = (exps << 23) | (mant << 13) | 0x1000  # exactly halfway between two float16
    x = np.concatenate([bits, ties, ties | 0x80000000]).view(np.float32)
    compare_cast(np.float32, np.float16, x)
    with np.errstate(invalid="ignore"):
        compare_cast(np.float64, np.float16, x.astype(np.float64))


# ---- Cast: strings ---------------------------------------------------------------------------

@pytest.mark.parametrize("src", NUMERIC, ids=tname)
def test_cast_to_string(src):
    x = source_values(src)
    compare_cast(src, object, x)
    if np.dtype(src).kind in "if":
        compare_cast(src, object, signed_values(src))
    if np.dtype(src).kind == "f":
        with np.errstate(over="ignore"):
            special = np.array([np.nan, np.inf, -np.inf, 0.1, 1 / 3, 1e-5, 1e7, 1e8, 16777216.0,
                                123456789.123, 1e300, 5e-324, 65504], np.float64).astype(src)
        compare_cast(src, object, special)


FLOAT_STRINGS = ["1", "  2", "3.5", "-4", "1e3", "0x10", "nan", "inf", "-INF", "NaN", "12abc",
                 " 7 ", "1e-7", "-0", "+2.5"]
INT_STRINGS = ["1", "  2", "3.5", "-4", "1e3", "0x10", "12abc", " 7 ", "+5", "127", "-1", "0"]


@pytest.mark.parametrize("dst", NUMERIC, ids=tname)
def test_cast_from_string(dst):
    strings = FLOAT_STRINGS if np.dtype(dst).kind == "f" else INT_STRINGS
    x = np.array(strings, dtype=object)
    compare_cast(object, dst, x)


@pytest.mark.parametrize("dst,bad", [(np.float32, ""), (np.float64, "abc"),
                                     (np.float64, "1e400"), (np.int32, "true"),
                                     (np.int64, "99999999999999999999"), (np.uint8, "x1"),
                                     (np.bool_, "True"), (np.float16, "  ")])
def test_cast_from_bad_string(dst, bad):
    x = np.array(["1", bad], dtype=object)
    m = cast_model(object, dst)
    with pytest.raises(ortlite.InvalidArgument, match="element 1"):
        run_ortlite(m, {"x": x})
    with pytest.raises(Exception):
        run_ort(m, {"x": x})


# ---- Cast: bfloat16 (no numpy type: checked through a round trip) ---------------------------

def bf16_chain(src, dst, opset=21):
    n1 = helper.make_node("Cast", ["x"], ["b"], to=BF16)
    n2 = helper.make_node("Cast", ["b"], ["y"], to=onnx_type(dst))
    return make_model([n1, n2], [("x", src, None)], [("y", dst, None)], opset=opset)


def run_ort_unoptimized(model, feeds):
    """onnxruntime without graph optimizations: its optimizer folds Cast chains such as
    float -> bfloat16 -> uint8 into one Cast, which skips the bfloat16 rounding."""
    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = onnxruntime.InferenceSession(model.SerializeToString(), so,
                                        providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def check_chain(model, feeds):
    assert_same(run_ortlite(model, feeds), run_ort_unoptimized(model, feeds), rtol=0, atol=0)


# onnxruntime's bfloat16 -> int8/uint8 result depends on how the bfloat16 tensor was made
# (after a float -> bfloat16 Cast it is the float's truncation, from an initializer the
# bfloat16 value's): those two targets are checked from an initializer only.
CHAIN_TARGETS = (np.float32, np.float64, np.int32, np.int64, np.bool_, np.float16, object,
                 np.uint16, np.int16, np.uint32, np.uint64)


@pytest.mark.parametrize("src", NUMERIC + [object], ids=tname)
def test_cast_to_bfloat16(src):
    x = source_values(src) if src is not object else np.array(["1.5", "-2", "1e3"], object)
    for dst in CHAIN_TARGETS:
        check_chain(bf16_chain(src, dst), {"x": x})
    if src in (np.float32, np.float64):
        y = np.array([3.14159, -1e-3, 1e38, np.nan, np.inf, 65536.5, 1.00390625, 99.75, -3.5,
                      300.7], src)
        for dst in (np.float32, np.float64, object, np.int64):
            check_chain(bf16_chain(src, dst), {"x": y})


def test_cast_from_bfloat16():
    vals = np.array([1.0, 99.5, 100.0, 127.0, 3.0, -3.5, 0.0, -0.0, 1.015625, 300.0, -100.0,
                     np.inf, -np.inf, np.nan, 3.0e38, 65536.0], np.float32)
    bits = (vals.view(np.uint32) >> 16).astype(np.uint16)  # all exact in bfloat16
    t = helper.make_tensor("b", BF16, [len(bits)], bits.tobytes(), raw=True)
    for dst in ALL_TYPES:
        if dst is not np.bool_ and np.dtype(dst).kind in "iu":
            keep = slice(0, 11)  # finite and in the int32 range
            if np.dtype(dst).kind == "u" and not X86:
                keep = slice(0, 5)  # negative -> unsigned is platform-defined
        else:
            keep = slice(None)
        node = helper.make_node("Cast", ["b"], ["y"], to=onnx_type(dst))
        m = make_model([node], [], [("y", dst, None)], initializers=[t], opset=21)
        got = run_ortlite(m, {})[0]
        exp = run_ort_unoptimized(m, {})[0]
        assert_same([got[keep]], [exp[keep]], rtol=0, atol=0)


# ---- Cast: errors ------------------------------------------------------------------------------

# float8 / int4 targets: tests/ops/test_ops_dtypes.py.
@pytest.mark.parametrize("to,name", [(TensorProto.COMPLEX64, "complex64"),
                                     (TensorProto.COMPLEX128, "complex128")])
def test_cast_unsupported_target(to, name):
    m = cast_model(np.float32, to, opset=21, shape=[2])
    with pytest.raises(ortlite.NotImplemented, match=name):
        ortlite.InferenceSession(m.SerializeToString())


def test_cast_invalid_target():
    m = cast_model(np.float32, 77, opset=21, shape=[2])
    with pytest.raises(ortlite.OrtliteError, match="77"):
        ortlite.InferenceSession(m.SerializeToString())
    node = helper.make_node("Cast", ["x"], ["y"])  # no 'to'
    m = make_model([node], [("x", np.float32, [2])], [("y", np.float32, None)], opset=21)
    with pytest.raises(ortlite.OrtliteError, match="to"):
        ortlite.InferenceSession(m.SerializeToString())


# ---- CastLike --------------------------------------------------------------------------------

def castlike_model(src, like, opset=15):
    node = helper.make_node("CastLike", ["x", "t"], ["y"], name="castlike")
    return make_model([node], [("x", src, None), ("t", like, None)], [("y", like, None)],
                      opset=opset)


@pytest.mark.parametrize("opset", [15, 19, 21, 23])
def test_castlike(opset):
    x = np.array([1.5, -2.0, 0.0, 100.25], np.float32)
    for like in (np.int32, np.float16, np.float64, np.bool_, np.uint8, object, np.float32):
        t = np.zeros(3, like) if like is not object else np.array(["q"], object)
        check_against_ort(castlike_model(np.float32, like, opset), {"x": x, "t": t}, rtol=0,
                          atol=0)
    s = np.array(["1.25", "-7"], object)
    check_against_ort(castlike_model(object, np.float64, opset),
                      {"x": s, "t": np.zeros(0, np.float64)}, rtol=0, atol=0)


# ---- Constant --------------------------------------------------------------------------------

def constant_model(opset, **attrs):
    node = helper.make_node("Constant", [], ["y"], name="const")
    for k, v in attrs.items():
        kind = {"value_floats": AttributeProto.FLOATS, "value_ints": AttributeProto.INTS,
                "value_strings": AttributeProto.STRINGS}.get(k)
        node.attribute.append(helper.make_attribute(k, v, attr_type=kind))
    first = next(iter(attrs.values()))
    if isinstance(first, TensorProto):
        elem = first.data_type
    else:
        name = next(iter(attrs))
        elem = {"value_float": TensorProto.FLOAT, "value_floats": TensorProto.FLOAT,
                "value_int": TensorProto.INT64, "value_ints": TensorProto.INT64,
                "value_string": TensorProto.STRING,
                "value_strings": TensorProto.STRING}.get(name, TensorProto.FLOAT)
    return make_model([node], [], [("y", elem, None)], opset=opset)


def check_constant_copy(m):
    """Runs twice on one session; the first result is mutated in between: the second run
    must still give the constant."""
    sess = ortlite.InferenceSession(m.SerializeToString())
    expected = run_ort(m, {})
    first = sess.run(None, {})
    assert_same(first, expected, rtol=0, atol=0)
    a = first[0]
    if a.size:
        if a.dtype == object:
            a.flat[0] = "mutated"
        elif a.dtype == np.bool_:
            a.flat[0] = not a.flat[0]
        else:
            a.flat[0] = a.flat[0] + 1 if a.dtype.kind != "f" else 12345.0
    second = sess.run(None, {})
    assert_same(second, expected, rtol=0, atol=0)
    return second


TENSOR_VALUES = [
    np.array([[1.5, -2.0, 3.25], [0.0, 7.0, -1e-3]], np.float32),
    np.array(3.5, np.float32),
    np.zeros((0, 2), np.float32),
    np.array([1, -2, 2 ** 40], np.int64),
    np.array([[1, 2], [3, 4]], np.int32),
    np.array([0.5, 65504], np.float16),
    np.array([True, False, True]),
    np.array([1.0 / 3.0], np.float64),
    np.array([0, 255, 7], np.uint8),
    np.array([-3, 4], np.int8),
    np.array([2 ** 63 + 1], np.uint64),
    np.array(["abc", "", "x y"], dtype=object),
]


@pytest.mark.parametrize("opset", [9, 11, 13, 19, 21])
def test_constant_value_tensor(opset):
    for v in TENSOR_VALUES:
        m = constant_model(opset, value=numpy_helper.from_array(v, "v"))
        check_constant_copy(m)


@pytest.mark.parametrize("opset", [12, 13, 19, 21, 23])
def test_constant_value_forms(opset):
    forms = [
        dict(value_float=2.5),
        dict(value_floats=[1.0, -2.5, 3e10]),
        dict(value_floats=[]),
        dict(value_int=-7),
        dict(value_ints=[1, 2, 2 ** 40]),
        dict(value_string="hello"),
        dict(value_strings=["a", "bc", ""]),
    ]
    for f in forms:
        m = constant_model(opset, **f)
        check_constant_copy(m)


def test_constant_raw_data_tensor():
    # raw_data encoding (in place over the model bytes in the reader) and typed-field encoding
    v = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = numpy_helper.from_array(v, "v")
    assert t.raw_data
    check_constant_copy(constant_model(13, value=t))
    t2 = helper.make_tensor("v", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    check_constant_copy(constant_model(13, value=t2))


def test_constant_feeding_cast():
    c = helper.make_node("Constant", [], ["c"], value_ints=[1, 2, 3])
    cast = helper.make_node("Cast", ["c"], ["y"], to=TensorProto.FLOAT)
    m = make_model([c, cast], [], [("y", np.float32, None)], opset=13)
    check_against_ort(m, {})


def test_constant_errors():
    both = helper.make_node("Constant", [], ["y"], value_float=1.0, value_int=2)
    m = make_model([both], [], [("y", np.float32, None)], opset=13)
    with pytest.raises(ortlite.OrtliteError, match="exactly one"):
        ortlite.InferenceSession(m.SerializeToString())
    none = helper.make_node("Constant", [], ["y"])
    m = make_model([none], [], [("y", np.float32, None)], opset=13)
    with pytest.raises(ortlite.OrtliteError, match="exactly one"):
        ortlite.InferenceSession(m.SerializeToString())
    old = helper.make_node("Constant", [], ["y"], value_float=1.0)
    m = make_model([old], [], [("y", np.float32, None)], opset=11)
    with pytest.raises(ortlite.OrtliteError, match="opset 12"):
        ortlite.InferenceSession(m.SerializeToString())
    sparse = helper.make_sparse_tensor(
        helper.make_tensor("vals", TensorProto.FLOAT, [2], [1.0, 2.0]),
        helper.make_tensor("idx", TensorProto.INT64, [2], [0, 3]), [5])
    node = helper.make_node("Constant", [], ["y"], sparse_value=sparse)
    m = make_model([node], [], [("y", np.float32, None)], opset=13)
    # onnxruntime 1.23 densifies 2-D sparse constants only ("do not support dims higher
    # than 2 dimensions: 1"); the 2-D ones are compared with it below.
    np.testing.assert_array_equal(run_ortlite(m, {})[0], np.array([1, 0, 0, 2, 0], np.float32))
    bad = helper.make_sparse_tensor(
        helper.make_tensor("vals", TensorProto.FLOAT, [2], [1.0, 2.0]),
        helper.make_tensor("idx", TensorProto.INT64, [2], [0, 7]), [5])
    node = helper.make_node("Constant", [], ["y"], sparse_value=bad)
    m = make_model([node], [], [("y", np.float32, None)], opset=13)
    with pytest.raises(ortlite.InvalidGraph, match="sparse index 7 is out of range"):
        ortlite.InferenceSession(m.SerializeToString())


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float64, np.int32])
def test_constant_sparse_value_2d_coordinates_match_onnxruntime(dtype):
    vals = numpy_helper.from_array(np.array([3, 4, 5], dtype), "vals")
    idx = numpy_helper.from_array(np.array([[0, 1], [1, 0], [2, 3]], np.int64), "idx")
    node = helper.make_node("Constant", [], ["c"], sparse_value=helper.make_sparse_tensor(
        vals, idx, [3, 4]))
    add = helper.make_node("Add", ["c", "x"], ["y"])
    m = make_model([node, add], [("x", dtype, [3, 4])], [("y", dtype, [3, 4])], opset=13)
    x = np.ones((3, 4), dtype)
    out = run_ortlite(m, {"x": x})
    assert_same(out, run_ort(m, {"x": x}))
    out[0][0, 1] = 100  # the Constant's value is the session's: never exposed
    assert run_ortlite(m, {"x": x})[0][0, 1] == 4


# ---- ConstantOfShape ---------------------------------------------------------------------------

def cos_model(value, opset=20, shape_feed=True, shape=None):
    attrs = {} if value is None else {"value": numpy_helper.from_array(value, "value")}
    node = helper.make_node("ConstantOfShape", ["s"], ["y"], name="cos", **attrs)
    elem = np.float32 if value is None else value.dtype
    if shape_feed:
        return make_model([node], [("s", np.int64, [None])], [("y", elem, None)], opset=opset)
    init = numpy_helper.from_array(np.array(shape, np.int64), "s")
    return make_model([node], [], [("y", elem, None)], initializers=[init], opset=opset)


COS_VALUES = [None, np.array([1.5], np.float32), np.array([-2.25], np.float64),
              np.array([7], np.int32), np.array([-(2 ** 40)], np.int64),
              np.array([-3], np.int8), np.array([200], np.uint8), np.array([9], np.int16),
              np.array([60000], np.uint16), np.array([2 ** 31 + 1], np.uint32),
              np.array([2 ** 63 + 9], np.uint64), np.array([0.5], np.float16),
              np.array([True]), np.array([False])]


@pytest.mark.parametrize("opset", [9, 20, 21])
def test_constant_of_shape(opset):
    for v in COS_VALUES:
        for shape in ([2, 3], [0], [3, 0, 2], [4], [1, 1, 5], []):
            m = cos_model(v, opset)
            check_against_ort(m, {"s": np.array(shape, np.int64)}, rtol=0, atol=0)


@pytest.mark.parametrize("value", [np.array([0.5], np.float32), np.array([-1], np.int64),
                                   np.array([0], np.float32), np.array([0x01020304], np.int32),
                                   np.array([7], np.uint8), np.array([-1.5], np.float16),
                                   np.array([1e300], np.float64), np.array([True])],
                         ids=lambda v: f"{v.dtype}-{v[0]}")
def test_constant_of_shape_fill_lengths(value):
    """Fills of every length around the vector widths (memset for one repeated byte, 64-byte
    stores and a masked tail otherwise)."""
    m = cos_model(value, 20)
    for n in (1, 3, 15, 16, 17, 31, 64, 65, 100, 255, 256, 257, 1000, 5001):
        got = run_ortlite(m, {"s": np.array([n], np.int64)})[0]
        np.testing.assert_array_equal(got, np.full(n, value[0], value.dtype))


def test_constant_of_shape_initializer_shape():
    m = cos_model(np.array([4], np.int32), 20, shape_feed=False, shape=[2, 2])
    check_against_ort(m, {}, rtol=0, atol=0)


def test_constant_of_shape_errors():
    m = cos_model(np.array([1.0], np.float32))
    with pytest.raises(ortlite.InvalidArgument, match="negative"):
        run_ortlite(m, {"s": np.array([2, -1], np.int64)})
    m = cos_model(np.array([1.0, 2.0], np.float32))
    with pytest.raises(ortlite.OrtliteError, match="one element"):
        run_ortlite(m, {"s": np.array([2], np.int64)})
    node = helper.make_node("ConstantOfShape", ["s"], ["y"],
                            value=helper.make_tensor("v", TensorProto.STRING, [1], [b"a"]))
    m = make_model([node], [("s", np.int64, [1])], [("y", object, None)], opset=20)
    with pytest.raises(ortlite.NotImplemented):
        run_ortlite(m, {"s": np.array([2], np.int64)})
    m = cos_model(None)
    with pytest.raises(ortlite.OrtliteError):
        run_ortlite(m, {"s": np.array([2 ** 40, 2 ** 40], np.int64)})


# ---- Range ---------------------------------------------------------------------------------

def range_model(dtype):
    node = helper.make_node("Range", ["s", "l", "d"], ["y"], name="range")
    return make_model([node], [(n, dtype, []) for n in "sld"], [("y", dtype, None)], opset=11)


def range_feeds(dtype, s, l, d):
    return {"s": np.array(s, dtype), "l": np.array(l, dtype), "d": np.array(d, dtype)}


RANGE_CASES = [(0, 10, 1), (10, 0, -3), (0, 10, -3), (1, 1, 1), (-5, 5, 2), (3, 20, 7),
               (5, -5, -1), (0, 100, 33), (-100, -200, -25)]
FLOAT_RANGE_CASES = [(0.5, 3.2, 0.7), (0.1, 100.0, 0.1), (1.0, -1.0, -0.25), (0.0, 1.0, 2.0),
                     (2.5, 2.5, 0.5), (-3.0, 3.0, 0.3)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16, np.int32, np.int64],
                         ids=tname)
def test_range(dtype):
    m = range_model(dtype)
    cases = RANGE_CASES + (FLOAT_RANGE_CASES if np.dtype(dtype).kind == "f" else [])
    for s, l, d in cases:
        check_against_ort(m, range_feeds(dtype, s, l, d), rtol=0, atol=0)


LONG_FLOAT_RANGE_CASES = [(0.0, 1000.0, 1.0), (-500.5, 500.0, 0.25), (100.0, -100.0, -0.5),
                          (2.0 ** -20, 1.0, 2.0 ** -12), (16777000.0, 16777300.0, 1.0),
                          (1e7, 1e7 + 2000.0, 3.0), (0.0, 300.0, 0.1), (-3.0, 70.0, 0.7),
                          (8388000.0, 8388700.0, 1.0), (0.0, 1e6, 1000.5), (0.0, 7.0, 0.125)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=tname)
def test_range_long_float(dtype):
    """Ranges long enough for the vector loop; exact steps (integers, dyadic fractions) and
    inexact ones (the running sum, as onnxruntime)."""
    m = range_model(dtype)
    for s, l, d in LONG_FLOAT_RANGE_CASES:
        check_against_ort(m, range_feeds(dtype, s, l, d), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.int64], ids=tname)
def test_range_long_int(dtype):
    m = range_model(dtype)
    for s, l, d in [(-1000, 1000, 3), (5, -300, -7), (0, 1000, 1), (0, 64, 1), (0, 65, 1),
                    (-20000, 20000, 9)]:
        check_against_ort(m, range_feeds(dtype, s, l, d), rtol=0, atol=0)


def test_range_int_extremes():
    m = range_model(np.int64)
    check_against_ort(m, range_feeds(np.int64, 2 ** 62, -(2 ** 62), -(2 ** 62)))
    # The full int64 span: exact arithmetic (onnxruntime overflows here).
    got = run_ortlite(m, range_feeds(np.int64, -(2 ** 63) + 1, 2 ** 63 - 1, 2 ** 62))[0]
    np.testing.assert_array_equal(
        got, np.array([-(2 ** 63) + 1, -(2 ** 62) + 1, 1, 2 ** 62 + 1], np.int64))
    m16 = range_model(np.int16)
    check_against_ort(m16, range_feeds(np.int16, -30000, 30000, 20000))


def test_range_errors():
    m = range_model(np.int32)
    with pytest.raises(ortlite.InvalidArgument, match="zero"):
        run_ortlite(m, range_feeds(np.int32, 0, 10, 0))
    mf = range_model(np.float64)
    with pytest.raises(ortlite.InvalidArgument, match="elements"):
        run_ortlite(mf, range_feeds(np.float64, 0, 1e10, 1e-10))
    with pytest.raises(ortlite.InvalidArgument):
        run_ortlite(mf, range_feeds(np.float64, 0, np.inf, 1))
    with pytest.raises(ortlite.InvalidArgument):
        run_ortlite(mf, range_feeds(np.float64, 0, 1, np.nan))
    m64 = range_model(np.int64)
    with pytest.raises(ortlite.InvalidArgument, match="elements"):
        run_ortlite(m64, range_feeds(np.int64, 0, 2 ** 62, 1))
    # Mixed element types, a non-scalar input, an unsupported type.
    node = helper.make_node("Range", ["s", "l", "d"], ["y"])
    mixed = make_model([node], [("s", np.int32, []), ("l", np.int64, []), ("d", np.int32, [])],
                       [("y", np.int32, None)], opset=11)
    with pytest.raises(ortlite.InvalidArgument, match="limit"):
        run_ortlite(mixed, {"s": np.array(0, np.int32), "l": np.array(5, np.int64),
                            "d": np.array(1, np.int32)})
    vec = make_model([node], [("s", np.int32, [2]), ("l", np.int32, []), ("d", np.int32, [])],
                     [("y", np.int32, None)], opset=11)
    with pytest.raises(ortlite.InvalidArgument, match="scalar"):
        run_ortlite(vec, {"s": np.array([0, 1], np.int32), "l": np.array(5, np.int32),
                          "d": np.array(1, np.int32)})
    mu8 = range_model(np.uint8)
    with pytest.raises(ortlite.NotImplemented):
        run_ortlite(mu8, range_feeds(np.uint8, 0, 5, 1))


@pytest.mark.parametrize("to", [np.float32, np.float64])
@pytest.mark.parametrize("n", [7, 8, 37, 4096])
def test_int64_to_float_rounds_to_nearest_even_like_numpy(to, n):
    # Vector lengths and tails; values whose float is a tie or needs rounding (beyond 2**24
    # for float, 2**53 for double) and the int64 extremes.
    rng = np.random.default_rng(n)
    x = rng.integers(-(2 ** 63), 2 ** 63 - 1, n, dtype=np.int64, endpoint=True)
    special = np.array([2 ** 24 + 1, 2 ** 24 + 3, -(2 ** 24) - 1, 2 ** 53 + 1, 2 ** 53 + 3,
                        2 ** 63 - 1, -(2 ** 63), 0, -1, 2 ** 40 + 2 ** 16 + 1], np.int64)
    x[:min(n, special.size)] = special[:n]
    x[special.size:n:3] = rng.integers(-(2 ** 26), 2 ** 26, x[special.size:n:3].size)
    got = run_ortlite(cast_model(np.int64, to), {"x": x})[0]
    np.testing.assert_array_equal(got, x.astype(to))
