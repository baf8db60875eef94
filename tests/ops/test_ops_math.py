"""Elementwise math kernels (src/providers/cpu/math): arithmetic, unary math, activations, Clip,
Min/Max/Sum/Mean, comparisons and logic, Where, compared with onnxruntime, and with numpy
where onnxruntime has no CPU kernel for an element type the ONNX spec allows. CumProd and
Swish (onnx.reference: newer than onnxruntime's opsets); the random generators
(RandomNormal, RandomUniform, *Like, Bernoulli, Multinomial): seeded ones reproduce
onnx.reference (numpy's RandomState stream) exactly, unseeded ones are checked
statistically; the signal ops (DFT, STFT, MelWeightMatrix) against onnxruntime, the
reference or numpy; plus the error paths."""

import math

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import ortlite
import helpers
from helpers import (assert_same, check_against_ort, check_against_reference, make_model,
                     node_model, rng, run_ort, run_ortlite, session)

_ORT_STATE = onnxruntime.capi.onnxruntime_pybind11_state
# onnxruntime has no CPU kernel for the type (NotImplemented), or its checker rejects a type
# that ortlite accepts beyond the spec (InvalidGraph): compare with numpy instead.
_ORT_NO_KERNEL = (_ORT_STATE.NotImplemented, _ORT_STATE.InvalidGraph)

F16, F32, F64 = np.float16, np.float32, np.float64
FLOATS = [F32, F64, F16]
SIGNED = [np.int8, np.int16, np.int32, np.int64]
UNSIGNED = [np.uint8, np.uint16, np.uint32, np.uint64]
INTS = SIGNED + UNSIGNED
NUMERIC = FLOATS + INTS

# (shape of A, shape of B): same shape, scalars, row / column broadcast, rank mismatch,
# both sides broadcast, zero-size.
BCAST = [
    ((3, 4), (3, 4)),
    ((3, 4), ()),
    ((), (3, 4)),
    ((1,), (2, 3)),
    ((3, 1), (1, 4)),
    ((2, 3, 4), (4,)),
    ((2, 3, 4), (3, 1)),
    ((2, 1, 4), (3, 1)),
    ((4, 1, 3, 1), (1, 5, 1, 2)),
    ((0, 4), (1, 4)),
    ((2, 0), (2, 1)),
    ((2, 3), (0, 1, 3)),
]


def tolerance(dtype):
    dtype = np.dtype(dtype)
    if dtype == F16:
        return dict(rtol=2e-3, atol=2e-3)
    if dtype == F32:
        return dict(rtol=1e-5, atol=1e-6)
    return dict(rtol=1e-10, atol=1e-12)


# onnxruntime computes some double ops through float32 (Shrink; Gelu expanded from its
# ONNX function with float32 constants): ortlite is more precise there.
LOOSE_F64 = dict(rtol=1e-6, atol=1e-9)


def rand(shape, dtype, seed=0, lo=-3.0, hi=3.0, ints=None):
    """Random test data. Integers come from `ints` (lo, hi) or a type-dependent range."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind == "f":
        return rng.uniform(lo, hi, shape).astype(dtype)
    if ints is None:
        ints = (0, 40) if dtype.kind == "u" else (-40, 40)
    return rng.integers(ints[0], ints[1], shape).astype(dtype)


def model1(op, feeds, attrs=None, opset=17, out_dtype=None, input_names=None):
    names = list(feeds) if input_names is None else input_names
    node = helper.make_node(op, names, ["y"], **(attrs or {}))
    first = next(iter(feeds.values()))
    out_dtype = first.dtype if out_dtype is None else out_dtype
    ins = [(n, a.dtype, list(a.shape)) for n, a in feeds.items()]
    return make_model([node], ins, [("y", out_dtype, None)], opset=opset)


def check(op, feeds, ref=None, attrs=None, opset=17, out_dtype=None, input_names=None,
          tol=None):
    """Runs op on ortlite and compares with onnxruntime; where onnxruntime has no kernel for
    the types, compares with ref(*feeds) instead."""
    m = model1(op, feeds, attrs, opset, out_dtype, input_names)
    first = next(iter(feeds.values()))
    out_dtype = np.dtype(first.dtype if out_dtype is None else out_dtype)
    actual = run_ortlite(m, feeds)
    try:
        expected = run_ort(m, feeds)
    except _ORT_NO_KERNEL:
        assert ref is not None, f"onnxruntime has no {op} kernel here and no numpy reference"
        with np.errstate(all="ignore"):
            expected = [np.asarray(ref(*feeds.values())).astype(out_dtype)]
    assert_same(actual, expected, **(tol or tolerance(out_dtype)))
    return actual[0]


def check_exact(op, feeds, expected, attrs=None, opset=17, out_dtype=None, input_names=None):
    """ortlite only, against exact expected values (semantics onnxruntime leaves undefined)."""
    m = model1(op, feeds, attrs, opset, out_dtype, input_names)
    actual = run_ortlite(m, feeds)
    assert_same(actual, [np.asarray(expected)], rtol=0, atol=0)


def expect_error(op, feeds, attrs=None, opset=17, out_dtype=None, input_names=None,
                 exc=ortlite.OrtliteError, match=None):
    m = model1(op, feeds, attrs, opset, out_dtype, input_names)
    with pytest.raises(exc) as info:
        run_ortlite(m, feeds)
    if match:
        for word in match:
            assert word in str(info.value), str(info.value)
    return info.value


# ---- arithmetic ---------------------------------------------------------------------------


def trunc_div(a, b):
    q = np.abs(a.astype(np.int64)) // np.abs(b.astype(np.int64))
    return (np.sign(a.astype(np.int64)) * np.sign(b.astype(np.int64)) * q).astype(a.dtype)


def np_div(a, b):
    return trunc_div(a, b) if a.dtype.kind in "iu" else a / b


ARITH = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np_div}


@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", list(ARITH))
def test_arith_broadcast(op, dtype):
    for i, (sa, sb) in enumerate(BCAST):
        a = rand(sa, dtype, i)
        b = rand(sb, dtype, i + 100)
        if op == "Div" and np.dtype(dtype).kind in "iu":
            b = np.where(b == 0, 3, b).astype(dtype)
        check(op, {"a": a, "b": b}, ref=ARITH[op])


@pytest.mark.parametrize("opset", [7, 13, 14, 23])
def test_arith_opsets(opset):
    a = rand((2, 3), F32, 1)
    b = rand((3,), F32, 2)
    for op in ARITH:
        check(op, {"a": a, "b": b}, opset=opset)
    ai = rand((2, 3), np.int64, 3)
    check("Mul", {"a": ai, "b": ai}, opset=opset)


def test_arith_large_strided_and_parallel():
    # Big enough to go multi-threaded; covers the same-shape, scalar, one-side and general
    # strided paths with chunk boundaries in the middle of rows.
    a = rand((64, 130, 33), F32, 1)
    for b in [rand((64, 130, 33), F32, 2), np.array(1.5, F32), rand((130, 1), F32, 3),
              rand((64, 1, 33), F32, 4), rand((33,), F32, 5)]:
        check("Add", {"a": a, "b": b})
        check("Div", {"a": b, "b": a})
    ai = rand((257, 1031), np.int32, 6)
    check("Sub", {"a": ai, "b": rand((1031,), np.int32, 7)})
    check("Mul", {"a": rand((1, 1031), np.int64, 8), "b": rand((257, 1), np.int64, 9)})


def test_integer_overflow_wraps():
    for dtype in [np.int8, np.int32, np.int64, np.uint8, np.uint16, np.uint32]:
        info = np.iinfo(dtype)
        a = np.array([info.max, info.min, info.max, 7], dtype)
        b = np.array([1, -1 if info.min < 0 else 1, info.max, 3], dtype)
        with np.errstate(all="ignore"):
            for op, f in [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply)]:
                check_exact(op, {"a": a, "b": b}, f(a, b))


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_integer_div_by_zero_defined(dtype):
    # Would be SIGFPE in plain C. ortlite defines x / 0 = 0 and INT_MIN / -1 = INT_MIN.
    info = np.iinfo(dtype)
    if info.min < 0:
        a = np.array([7, -7, info.min, info.min, 9], dtype)
        b = np.array([0, 0, -1, 0, -2], dtype)
        expected = np.array([0, 0, info.min, 0, -4], dtype)
        check_exact("Mod", {"a": a, "b": b}, np.array([0, 0, 0, 0, -1], dtype))
        check_exact("Mod", {"a": a, "b": b}, np.array([0, 0, 0, 0, 1], dtype),
                    attrs={"fmod": 1})
    else:
        a = np.array([7, 0, info.max, 9], dtype)
        b = np.array([0, 0, 0, 2], dtype)
        expected = np.array([0, 0, 0, 4], dtype)
        check_exact("Mod", {"a": a, "b": b}, np.array([0, 0, 0, 1], dtype))
    check_exact("Div", {"a": a, "b": b}, expected)
    # scalar zero divisor (the broadcast fast path)
    check_exact("Div", {"a": a, "b": np.array(0, dtype)}, np.zeros_like(a))


def test_div_truncates_toward_zero():
    a = np.array([7, -7, 7, -7, 1, -1], np.int32)
    b = np.array([2, 2, -2, -2, 3, 3], np.int32)
    out = check("Div", {"a": a, "b": b})
    np.testing.assert_array_equal(out, [3, -3, -3, 3, 0, 0])
    check("Div", {"a": a.astype(np.int64), "b": b.astype(np.int64)})


def test_arith_errors():
    e = expect_error("Add", {"a": np.ones(3, F32), "b": np.ones(3, np.int64)})
    assert "int64" in str(e)
    e = expect_error("Mul", {"a": np.ones((3, 4), F32), "b": np.ones((2, 4), F32)})
    assert "[3,4]" in str(e).replace(" ", "") and "[2,4]" in str(e).replace(" ", "")
    expect_error("Add", {"a": np.ones((2, 3), F32), "b": np.ones((0, 3), F32)})
    expect_error("Sub", {"a": np.ones((3,), np.int8), "b": np.ones((3,), np.uint8)})
    expect_error("Add", {"a": np.ones(3, np.bool_), "b": np.ones(3, np.bool_)})


def test_arith_error_type_is_invalid_argument():
    m = model1("Add", {"a": np.ones((3, 4), F32), "b": np.ones((2, 4), F32)})
    with pytest.raises(ortlite.InvalidArgument):
        run_ortlite(m, {"a": np.ones((3, 4), F32), "b": np.ones((2, 4), F32)})


# ---- Pow ----------------------------------------------------------------------------------


def np_pow(a, b):
    r = np.power(a.astype(np.float64), b.astype(np.float64))
    if a.dtype.kind in "iu":
        return np.trunc(r).astype(a.dtype)
    return r.astype(a.dtype)


@pytest.mark.parametrize("et", [F32, F64, F16, np.int32, np.int64, np.int8, np.uint8],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("bt", [F32, F64, F16, np.int32, np.int64],
                         ids=lambda d: np.dtype(d).name)
def test_pow_type_combinations(bt, et):
    base_is_int = np.dtype(bt).kind == "i"
    exp_is_int = np.dtype(et).kind in "iu"
    if base_is_int:
        a = rand((3, 4), bt, 1, ints=(-5, 6) if exp_is_int else (0, 9))
    else:
        a = rand((3, 4), bt, 1, 0.2, 3.0) if not exp_is_int else rand((3, 4), bt, 1, -3, 3)
    b = rand((4,), et, 2, 0.0, 3.0, ints=(0, 5))
    check("Pow", {"a": a, "b": b}, ref=np_pow, opset=15)
    check("Pow", {"a": a, "b": rand((3, 4), et, 3, 0.0, 3.0, ints=(0, 5))}, ref=np_pow)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_pow_scalar_fast_paths(dtype):
    a = rand((5, 7), dtype, 1, 0.1, 4.0)
    for e in [2.0, 0.5, 3.0, -1.0, 0.0]:
        check("Pow", {"a": a, "b": np.array(e, dtype)}, ref=np_pow)
        check("Pow", {"a": a, "b": np.array([e], F32)}, ref=np_pow)
    neg = rand((6,), dtype, 2, -3, 3)
    check("Pow", {"a": neg, "b": np.array(2.0, dtype)}, ref=np_pow)
    check("Pow", {"a": neg, "b": np.array(3, np.int64)}, ref=np_pow)


@pytest.mark.parametrize("opset", [7, 12, 13, 15, 23])
def test_pow_opsets(opset):
    a = rand((2, 3), F32, 1, 0.5, 2)
    b = rand((2, 1), F32, 2, -2, 2)
    check("Pow", {"a": a, "b": b}, opset=opset)


def test_pow_integer_exact():
    a = np.array([3, 5, -3, 2, 7], np.int64)
    b = np.array([39, 27, 3, 62, 0], np.int64)
    check_exact("Pow", {"a": a, "b": b}, np.array([3**39, 5**27, -27, 2**62, 1], np.int64))
    # negative exponents: 1/x^n truncated toward zero
    a = np.array([2, -1, -1, 1, 0, -2], np.int32)
    b = np.array([-1, -1, -2, -5, -1, -2], np.int32)
    check_exact("Pow", {"a": a, "b": b}, np.array([0, -1, 1, 1, 0, 0], np.int32))


# ---- Mod, bit ops -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", INTS + FLOATS, ids=lambda d: np.dtype(d).name)
def test_mod(dtype):
    is_float = np.dtype(dtype).kind == "f"
    a = rand((3, 5), dtype, 1, -10, 10)
    b = rand((5,), dtype, 2, 0.5, 4, ints=(1, 7))
    if np.dtype(dtype).kind == "i":
        b = b * np.array([1, -1, 1, -1, 1], dtype)
    check("Mod", {"a": a, "b": b}, ref=lambda x, y: np.fmod(x, y), attrs={"fmod": 1})
    if not is_float:
        check("Mod", {"a": a, "b": b}, ref=lambda x, y: np.mod(x, y))
        check("Mod", {"a": a, "b": b}, ref=lambda x, y: np.mod(x, y), attrs={"fmod": 0})
    else:
        expect_error("Mod", {"a": a, "b": b}, exc=ortlite.OrtliteError)


def test_mod_bad_attribute():
    expect_error("Mod", {"a": np.ones(3, np.int32), "b": np.ones(3, np.int32)},
                 attrs={"fmod": 2})


@pytest.mark.parametrize("dtype", UNSIGNED, ids=lambda d: np.dtype(d).name)
def test_bitshift(dtype):
    bits = np.dtype(dtype).itemsize * 8
    a = rand((3, 4), dtype, 1, ints=(0, 200))
    b = rand((4,), dtype, 2, ints=(0, min(bits, 8)))
    check("BitShift", {"a": a, "b": b}, ref=lambda x, y: np.left_shift(x, y),
          attrs={"direction": "LEFT"})
    check("BitShift", {"a": a, "b": b}, ref=lambda x, y: np.right_shift(x, y),
          attrs={"direction": "RIGHT"})
    # shifts by >= the bit width are defined as 0
    check_exact("BitShift", {"a": np.array([1, 3], dtype), "b": np.array([bits, bits + 5], dtype)},
                np.array([0, 0], dtype), attrs={"direction": "LEFT"})
    expect_error("BitShift", {"a": a, "b": b}, attrs={"direction": "UP"})


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_bitwise(dtype):
    a = rand((3, 4), dtype, 1, ints=(0, 120))
    b = rand((3, 1), dtype, 2, ints=(0, 120))
    for op, f in [("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or),
                  ("BitwiseXor", np.bitwise_xor)]:
        check(op, {"a": a, "b": b}, ref=f, opset=18)
    check("BitwiseNot", {"a": a}, ref=np.invert, opset=18)


# ---- unary float functions and activations ------------------------------------------------

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _f64(f):
    return lambda x: f(x.astype(np.float64))


SELU_A, SELU_G = 1.67326319217681884765625, 1.05070102214813232421875


def f32(v):
    """An attribute value as the model stores it (AttributeProto floats are float32)."""
    return float(np.float32(v))


# name -> (numpy reference on float64, input range, opset, attrs)
UNARY_FLOAT = {
    "Sqrt": (np.sqrt, (0.01, 9), 17, None),
    "Exp": (np.exp, (-8, 8), 17, None),
    "Log": (np.log, (0.01, 9), 17, None),
    "Reciprocal": (lambda x: 1 / x, (0.25, 4), 17, None),
    "Floor": (np.floor, (-4, 4), 17, None),
    "Ceil": (np.ceil, (-4, 4), 17, None),
    "Round": (np.round, (-4, 4), 17, None),
    "Erf": (_erf, (-3, 3), 17, None),
    "Sin": (np.sin, (-4, 4), 17, None),
    "Cos": (np.cos, (-4, 4), 17, None),
    "Tan": (np.tan, (-1.2, 1.2), 17, None),
    "Asin": (np.arcsin, (-0.99, 0.99), 17, None),
    "Acos": (np.arccos, (-0.99, 0.99), 17, None),
    "Atan": (np.arctan, (-4, 4), 17, None),
    "Sinh": (np.sinh, (-3, 3), 17, None),
    "Cosh": (np.cosh, (-3, 3), 17, None),
    "Asinh": (np.arcsinh, (-4, 4), 17, None),
    "Acosh": (np.arccosh, (1.01, 5), 17, None),
    "Atanh": (np.arctanh, (-0.95, 0.95), 17, None),
    "Tanh": (np.tanh, (-5, 5), 17, None),
    "Sigmoid": (lambda x: 1 / (1 + np.exp(-x)), (-10, 10), 17, None),
    "Relu": (lambda x: np.maximum(x, 0), (-3, 3), 17, None),
    "LeakyRelu": (lambda x: np.where(x >= 0, x, f32(0.01) * x), (-3, 3), 17, None),
    "Elu": (lambda x: np.where(x >= 0, x, np.expm1(x)), (-3, 3), 17, None),
    "Selu": (lambda x: SELU_G * np.where(x > 0, x, SELU_A * np.expm1(x)), (-3, 3), 17, None),
    "HardSigmoid": (lambda x: np.clip(f32(0.2) * x + 0.5, 0, 1), (-4, 4), 17, None),
    "HardSwish": (lambda x: x * np.clip(x / 6 + 0.5, 0, 1), (-5, 5), 17, None),
    "Softplus": (lambda x: np.logaddexp(0, x), (-10, 10), 17, None),
    "Softsign": (lambda x: x / (1 + np.abs(x)), (-5, 5), 17, None),
    "Mish": (lambda x: x * np.tanh(np.logaddexp(0, x)), (-5, 5), 18, None),
    "ThresholdedRelu": (lambda x: np.where(x > 1, x, 0), (-3, 3), 17, None),
    "Celu": (lambda x: np.maximum(0, x) + np.minimum(0, np.expm1(x)), (-3, 3), 17, None),
    "Shrink": (lambda x: np.where(x < -0.5, x, np.where(x > 0.5, x, 0)), (-3, 3), 17, None),
    "Gelu": (lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), (-4, 4), 20, None),
    "Neg": (np.negative, (-3, 3), 17, None),
    "Abs": (np.abs, (-3, 3), 17, None),
    "Sign": (np.sign, (-3, 3), 17, None),
}


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", list(UNARY_FLOAT))
def test_unary_float(op, dtype):
    ref, (lo, hi), opset, attrs = UNARY_FLOAT[op]
    x = rand((4, 3, 5), dtype, 7, lo, hi)
    if op in ("Round", "Floor", "Ceil", "Sign", "Relu", "Abs", "Neg"):
        x.flat[:8] = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.0, -0.0]
    tol = LOOSE_F64 if (dtype == F64 and op in ("Shrink", "Gelu")) else None
    check(op, {"x": x}, ref=_f64(ref), attrs=attrs, opset=opset, tol=tol)
    # zero-size and rank 0
    check(op, {"x": np.zeros((2, 0, 3), dtype)}, ref=_f64(ref), attrs=attrs, opset=opset)
    check(op, {"x": np.array((lo + hi) / 3, dtype)}, ref=_f64(ref), attrs=attrs, opset=opset)


def test_unary_float_large_parallel():
    x = rand((300, 1001), F32, 3, -5, 5)
    for op in ["Exp", "Tanh", "Sigmoid", "Erf", "Sqrt", "Relu", "Softplus"]:
        check(op, {"x": np.abs(x) if op == "Sqrt" else x})
    check("Gelu", {"x": x}, opset=20)
    check("Gelu", {"x": x}, opset=20, attrs={"approximate": "tanh"})
    # float16 goes through float blocks of 512 elements
    h = rand((1000, 37), F16, 4, -5, 5)
    for op in ["Exp", "Tanh", "Sigmoid", "Erf"]:
        check(op, {"x": h}, ref=_f64(UNARY_FLOAT[op][0]))


def test_fast_float_functions_extremes():
    # The vectorized float exp / tanh / sigmoid / erf at and beyond their ranges.
    x = np.array([0.0, -0.0, 1e-30, -1e-30, 1e-8, 0.5, 0.625, 0.99, 1.0, 3.9, 4.0, 9.0, 9.5,
                  20.0, 88.7, 88.8, 89.0, 1e30, np.inf, -0.625, -1.0, -4.0, -20.0, -87.5,
                  -103.0, -104.0, -105.0, -1e30, -np.inf, np.nan], F32)
    check("Exp", {"x": x}, tol=dict(rtol=1e-6, atol=0))
    check("Tanh", {"x": x}, tol=dict(rtol=1e-6, atol=0))
    # onnxruntime's (MLAS) sigmoid is off by ~1e-6 relative and gives 0 below about -18;
    # the comparison with float64 below holds ortlite to 5e-7.
    check("Sigmoid", {"x": x}, tol=dict(rtol=1e-5, atol=1e-7))
    # onnxruntime's Erf gives 1 for NaN; ortlite keeps NaN.
    check("Erf", {"x": x[:-1]}, tol=dict(rtol=1e-6, atol=1e-30))
    check_exact("Erf", {"x": x[-1:]}, x[-1:])
    xs = np.linspace(-10, 10, 20001, dtype=F32)
    ref64 = xs.astype(F64)
    with np.errstate(all="ignore"):
        for op, f in [("Exp", np.exp), ("Tanh", np.tanh), ("Erf", _erf),
                      ("Sigmoid", lambda v: 1 / (1 + np.exp(-v)))]:
            got = run_ortlite(model1(op, {"x": xs}), {"x": xs})[0]
            np.testing.assert_allclose(got, f(ref64), rtol=5e-7, atol=1e-37, err_msg=op)


FIRST_OPSET = {"Neg": 6, "Abs": 6, "Sqrt": 6, "Exp": 6, "Log": 6, "Reciprocal": 6, "Floor": 6,
               "Ceil": 6, "Erf": 9, "Sin": 7, "Cos": 7, "Tan": 7, "Asin": 7, "Acos": 7,
               "Atan": 7, "Sinh": 9, "Cosh": 9, "Asinh": 9, "Acosh": 9, "Atanh": 9, "Tanh": 6,
               "Sigmoid": 6, "Relu": 6, "LeakyRelu": 6, "Elu": 6, "Selu": 6, "HardSigmoid": 6,
               "HardSwish": 14, "Softplus": 7, "Softsign": 7, "Mish": 18, "ThresholdedRelu": 10,
               "Celu": 12, "Shrink": 9, "Round": 11, "Sign": 9, "Gelu": 20}


@pytest.mark.parametrize("op", list(FIRST_OPSET))
def test_unary_opset_range(op):
    ref, (lo, hi), _, _ = UNARY_FLOAT[op]
    x = rand((2, 5), F32, 11, lo, hi)
    for opset in sorted({FIRST_OPSET[op], 13, 18, 22, 23} - set(range(FIRST_OPSET[op]))):
        check(op, {"x": x}, ref=_f64(ref), opset=opset)


@pytest.mark.parametrize("op,attrs,ref", [
    ("LeakyRelu", {"alpha": 0.3}, lambda x: np.where(x >= 0, x, f32(0.3) * x)),
    ("Elu", {"alpha": 0.5}, lambda x: np.where(x >= 0, x, 0.5 * np.expm1(x))),
    ("Selu", {"alpha": 1.5, "gamma": 2.0}, lambda x: 2 * np.where(x > 0, x, 1.5 * np.expm1(x))),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4},
     lambda x: np.clip(f32(0.3) * x + f32(0.4), 0, 1)),
    ("ThresholdedRelu", {"alpha": 0.7}, lambda x: np.where(x > f32(0.7), x, 0)),
    ("Celu", {"alpha": 2.0}, lambda x: np.maximum(0, x) + np.minimum(0, 2 * np.expm1(x / 2))),
    ("Shrink", {"lambd": 1.0, "bias": 0.3},
     lambda x: np.where(x < -1, x + f32(0.3), np.where(x > 1, x - f32(0.3), 0))),
])
def test_activation_attributes(op, attrs, ref):
    for dtype in [F32, F64]:
        x = rand((3, 7), dtype, 2, -4, 4)
        tol = LOOSE_F64 if (dtype == F64 and op == "Shrink") else None
        check(op, {"x": x}, ref=_f64(ref), attrs=attrs, tol=tol)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_gelu_tanh(dtype):
    def ref(x):
        x = x.astype(np.float64)
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    x = rand((5, 6), dtype, 1, -5, 5)
    tol = LOOSE_F64 if dtype == F64 else None
    check("Gelu", {"x": x}, ref=ref, attrs={"approximate": "tanh"}, opset=20, tol=tol)
    check("Gelu", {"x": x}, ref=_f64(UNARY_FLOAT["Gelu"][0]), attrs={"approximate": "none"},
          opset=20, tol=tol)
    expect_error("Gelu", {"x": x}, attrs={"approximate": "fast"}, opset=20)


@pytest.mark.parametrize("dtype", SIGNED + [F32], ids=lambda d: np.dtype(d).name)
def test_relu_neg_signed(dtype):
    x = rand((4, 5), dtype, 1)
    check("Relu", {"x": x}, ref=lambda v: np.maximum(v, 0), opset=14)
    check("Neg", {"x": x}, ref=np.negative)


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_abs_sign_shrink_ints(dtype):
    x = rand((4, 5), dtype, 1)
    check("Abs", {"x": x}, ref=np.abs)
    check("Sign", {"x": x}, ref=np.sign)
    check("Shrink", {"x": x}, ref=lambda v: np.where(v < -2, v + 1, np.where(v > 2, v - 1, 0)),
          attrs={"lambd": 2.0, "bias": 1.0})
    if np.dtype(dtype).kind == "i":
        info = np.iinfo(dtype)  # wraps like two's complement, no trap
        check_exact("Neg", {"x": np.array([info.min, 5], dtype)}, np.array([info.min, -5], dtype))
        check_exact("Abs", {"x": np.array([info.min, -5], dtype)}, np.array([info.min, 5], dtype))


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_prelu(dtype):
    x = rand((2, 3, 4, 5), dtype, 1)
    for slope_shape in [(3, 1, 1), (5,), (), (1,), (2, 3, 4, 5), (4, 1)]:
        slope = rand(slope_shape, dtype, 2, 0, 1)
        check("PRelu", {"x": x, "slope": slope}, ref=lambda a, s: np.where(a < 0, a * s, a))
    check("PRelu", {"x": rand((3,), dtype, 3), "s": rand((3,), dtype, 4)}, opset=7,
          ref=lambda a, s: np.where(a < 0, a * s, a))


def test_nan_propagation():
    x = np.array([np.nan, -np.inf, np.inf, -1.0, 0.0, 2.0], F32)
    for op in ["Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Exp", "LeakyRelu", "Floor", "Sign",
               "Softsign"]:
        check(op, {"x": x})


def test_unary_type_errors():
    expect_error("Sqrt", {"x": np.ones(3, np.int32)})
    expect_error("Exp", {"x": np.ones(3, np.bool_)})
    expect_error("Neg", {"x": np.ones(3, np.uint8)})
    expect_error("Celu", {"x": np.ones(3, F32)}, attrs={"alpha": 0.0})


# ---- IsNaN / IsInf ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_isnan_isinf(dtype):
    x = np.array([[np.nan, -np.inf, np.inf], [0.0, -2.0, 3.5]], dtype)
    check("IsNaN", {"x": x}, ref=np.isnan, out_dtype=np.bool_)
    check("IsNaN", {"x": x}, ref=np.isnan, out_dtype=np.bool_, opset=9)
    check("IsInf", {"x": x}, ref=np.isinf, out_dtype=np.bool_)
    check("IsInf", {"x": x}, ref=np.isneginf, out_dtype=np.bool_, attrs={"detect_positive": 0})
    check("IsInf", {"x": x}, ref=np.isposinf, out_dtype=np.bool_, attrs={"detect_negative": 0})
    check("IsInf", {"x": x}, ref=lambda v: np.zeros(v.shape, bool), out_dtype=np.bool_,
          attrs={"detect_negative": 0, "detect_positive": 0}, opset=20)


# ---- Clip ---------------------------------------------------------------------------------


def test_clip_opset6_attributes():
    x = np.array([[np.nan, -5.0, -1.0], [0.0, 0.5, 7.0]], F32)
    for attrs, ref in [({}, lambda v: v), ({"min": -1.0}, lambda v: np.maximum(v, -1)),
                       ({"max": 0.2}, lambda v: np.minimum(v, f32(0.2))),
                       ({"min": -0.5, "max": 0.5}, lambda v: np.clip(v, -0.5, 0.5))]:
        for dtype in FLOATS:
            check("Clip", {"x": x.astype(dtype)}, ref=ref, attrs=attrs, opset=6)
        check("Clip", {"x": x}, ref=ref, attrs=attrs, opset=10)


@pytest.mark.parametrize("opset", [11, 12, 13, 23])
def test_clip_inputs(opset):
    x = np.array([[np.nan, -5.0, -1.0], [0.0, 0.5, 7.0]], F32)
    lo, hi = np.array(-1.5, F32), np.array(2.0, F32)
    check("Clip", {"x": x, "lo": lo, "hi": hi}, opset=opset)
    check("Clip", {"x": x}, opset=opset)
    check("Clip", {"x": x, "lo": lo}, opset=opset)
    check("Clip", {"x": x, "hi": hi}, input_names=["x", "", "hi"], opset=opset)
    check("Clip", {"x": x, "lo": np.array([0.7], F32), "hi": np.array([-0.3], F32)},
          opset=opset)  # min > max: everything becomes max
    check("Clip", {"x": np.zeros((0, 3), F32), "lo": lo, "hi": hi}, opset=opset)


@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: np.dtype(d).name)
def test_clip_types(dtype):
    x = rand((4, 6), dtype, 1, -5, 5)
    lo, hi = np.array(2, dtype), np.array(30, dtype)
    check("Clip", {"x": x, "lo": lo, "hi": hi}, ref=lambda v, a, b: np.clip(v, a, b), opset=13)
    check("Clip", {"x": x, "hi": hi}, ref=lambda v, b: np.minimum(v, b), opset=13,
          input_names=["x", "", "hi"])


def test_clip_errors():
    x = np.ones((2, 3), F32)
    expect_error("Clip", {"x": x, "lo": np.zeros(2, F32)}, opset=13)
    expect_error("Clip", {"x": x, "lo": np.zeros((), F64)}, opset=13)
    expect_error("Clip", {"x": np.ones(3, np.int32)}, attrs={"min": 0.0}, opset=6)


# ---- Min / Max / Sum / Mean ---------------------------------------------------------------

VARIADIC_SHAPES = [
    [(3, 4)],
    [(3, 4), (3, 4)],
    [(3, 1), (1, 4)],
    [(2, 3, 4), (4,), (3, 1)],
    [(), (2, 2), (1, 2), (2, 1)],
    [(0, 3), (1, 3)],
]


def _fold(f):
    def ref(*xs):
        r = xs[0]
        for x in xs[1:]:
            r = f(r, x)
        return np.broadcast_to(r, np.broadcast_shapes(*[x.shape for x in xs]))
    return ref


@pytest.mark.parametrize("op,dtype", [(op, d) for op in ["Min", "Max"] for d in NUMERIC] +
                         [(op, d) for op in ["Sum", "Mean"] for d in FLOATS],
                         ids=lambda v: v if isinstance(v, str) else np.dtype(v).name)
def test_variadic(op, dtype):
    f = {"Min": np.minimum, "Max": np.maximum, "Sum": np.add}.get(op)
    for i, shapes in enumerate(VARIADIC_SHAPES):
        feeds = {f"x{k}": rand(s, dtype, 10 * i + k) for k, s in enumerate(shapes)}
        if op == "Mean":
            def ref(*xs):
                acc = sum(np.broadcast_to(x.astype(np.float64), np.broadcast_shapes(
                    *[x.shape for x in xs])) for x in xs)
                return acc / len(xs)
        else:
            ref = _fold(f)
        check(op, feeds, ref=ref)


@pytest.mark.parametrize("opset", [6, 8, 12, 13, 23])
def test_variadic_opsets(opset):
    feeds = {"a": rand((2, 3), F32, 1), "b": rand((2, 3), F32, 2), "c": rand((2, 3), F32, 3)}
    for op in ["Min", "Max", "Sum", "Mean"]:
        check(op, feeds, opset=opset)


def test_min_max_nan():
    a = np.array([1.0, np.nan, 3.0, np.nan], F32)
    b = np.array([np.nan, 2.0, 1.0, np.nan], F32)
    for op in ["Min", "Max"]:
        check(op, {"a": a, "b": b})
        check(op, {"a": a.astype(F64), "b": b.astype(F64)})


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [F32, F64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", ["Max", "Min"])
def test_min_max_short_spans_bits(op, dtype, threads):
    """Max / Min on broadcasts whose rows are shorter than a vector (each row a scalar loop):
    NaN from either input gives NaN, and on a tie (+0 against -0) the first input's value is
    kept, bit for bit, as in the long rows."""
    from helpers import run_lite

    g = np.random.default_rng(7)
    special = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, -1.0], dtype)
    for sa, sb in (((300, 1), (300, 12)), ((300, 12), (300, 1)), ((40, 7, 3), (40, 1, 3)),
                   ((5, 3), (3,)), ((1, 15), (31, 1))):
        a = g.choice(special, sa)
        b = g.choice(special, sb)
        a = np.where(g.random(sa) < 0.5, g.standard_normal(sa), a).astype(dtype)
        b = np.where(g.random(sb) < 0.5, g.standard_normal(sb), b).astype(dtype)
        x, y = np.broadcast_arrays(a, b)
        keep_a = (x >= y) if op == "Max" else (x <= y)
        want = np.where(keep_a | np.isnan(x), x, y)
        m = make_model([helper.make_node(op, ["a", "b"], ["y"])],
                       [("a", dtype, list(sa)), ("b", dtype, list(sb))], [("y", dtype, None)])
        got = run_lite(m, {"a": a, "b": b}, threads)[0]
        assert got.shape == want.shape
        assert np.array_equal(np.isnan(got), np.isnan(want)), (sa, sb)
        fin = ~np.isnan(want)
        assert np.array_equal(got[fin].view(np.uint8), want[fin].view(np.uint8)), (sa, sb)


def test_variadic_errors():
    expect_error("Max", {"a": np.ones(3, F32), "b": np.ones(3, F64)})
    expect_error("Sum", {"a": np.ones(3, F32), "b": np.ones(4, F32)})
    expect_error("Sum", {"a": np.ones(3, np.int32), "b": np.ones(3, np.int32)})


# ---- comparisons and logic ----------------------------------------------------------------

COMPARE = {"Equal": np.equal, "Less": np.less, "Greater": np.greater,
           "LessOrEqual": np.less_equal, "GreaterOrEqual": np.greater_equal}


@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", list(COMPARE))
def test_compare(op, dtype):
    for i, (sa, sb) in enumerate(BCAST):
        # small integer values so that ties occur
        a = rand(sa, np.int8, i, ints=(0, 4)).astype(dtype)
        b = rand(sb, np.int8, i + 50, ints=(0, 4)).astype(dtype)
        check(op, {"a": a, "b": b}, ref=COMPARE[op], out_dtype=np.bool_)


def test_compare_nan_and_opsets():
    a = np.array([np.nan, 1.0, 2.0, np.inf], F32)
    b = np.array([np.nan, np.nan, 2.0, np.inf], F32)
    for op in COMPARE:
        check(op, {"a": a, "b": b}, out_dtype=np.bool_, opset=16)
    for opset in [7, 9, 11, 13, 19, 23]:
        if opset >= 11:
            check("Equal", {"a": a, "b": b}, out_dtype=np.bool_, opset=opset)
        check("Less", {"a": a, "b": b}, out_dtype=np.bool_, opset=opset)
    ai, bi = np.array([1, 2, 3], np.int64), np.array([1, 0, 3], np.int64)
    check("Equal", {"a": ai, "b": bi}, out_dtype=np.bool_, opset=7)


def test_equal_bool_and_string():
    a = rand((3, 4), np.bool_, 1)
    b = rand((4,), np.bool_, 2)
    check("Equal", {"a": a, "b": b}, ref=np.equal, out_dtype=np.bool_)
    s = np.array([["a", "bb", ""], ["x", "y", "z"]], dtype=object)
    t = np.array(["a", "y", ""], dtype=object)
    check_exact("Equal", {"a": s, "b": t}, np.array([[1, 0, 1], [0, 1, 0]], bool),
                out_dtype=np.bool_, opset=19)


def test_compare_errors():
    expect_error("Less", {"a": np.ones(3, F32), "b": np.ones(3, np.int32)},
                 out_dtype=np.bool_)
    expect_error("Greater", {"a": np.ones((2, 3), F32), "b": np.ones((3, 2), F32)},
                 out_dtype=np.bool_)
    expect_error("And", {"a": np.ones(3, np.int32), "b": np.ones(3, np.int32)},
                 out_dtype=np.bool_)


def test_logic():
    for i, (sa, sb) in enumerate(BCAST):
        a = rand(sa, np.bool_, i)
        b = rand(sb, np.bool_, i + 7)
        for op, f in [("And", np.logical_and), ("Or", np.logical_or), ("Xor", np.logical_xor)]:
            check(op, {"a": a, "b": b}, ref=f)
        check("Not", {"a": a}, ref=np.logical_not)


# ---- Where --------------------------------------------------------------------------------

WHERE_SHAPES = [
    ((3, 4), (3, 4), (3, 4)),
    ((3, 1), (1, 4), (4,)),
    ((), (2, 3), (2, 1)),
    ((2, 1, 3), (4, 1), ()),
    ((0, 3), (1, 3), (3,)),
]


@pytest.mark.parametrize("dtype", NUMERIC + [np.bool_], ids=lambda d: np.dtype(d).name)
def test_where(dtype):
    for i, (sc, sx, sy) in enumerate(WHERE_SHAPES):
        feeds = {"c": rand(sc, np.bool_, i), "a": rand(sx, dtype, i + 1),
                 "b": rand(sy, dtype, i + 2)}
        check("Where", feeds, ref=np.where, out_dtype=dtype)
    check("Where", {"c": rand((3,), np.bool_, 9), "a": rand((3,), dtype, 1),
                    "b": rand((3,), dtype, 2)}, ref=np.where, out_dtype=dtype, opset=9)


# Shapes whose inner spans hold whole vectors and tails, every operand contiguous or a
# broadcast element: (c, x, y).
WHERE_VECTOR_SHAPES = [
    ((2, 133), (2, 133), (2, 133)),
    ((1, 1, 70), (3, 5, 70), ()),        # mask broadcast over rows, scalar y
    ((), (150,), (150,)),                # scalar condition
    ((3, 200), (), (3, 200)),            # scalar x
    ((4, 67), (), ()),                   # both values scalars
    ((5, 1), (5, 129), (1, 129)),        # condition broadcast along the row
    ((2, 3, 1), (1, 3, 257), (2, 1, 257)),
]


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float16, np.float32, np.int64,
                                   np.float64, np.bool_], ids=lambda d: np.dtype(d).name)
def test_where_vector_spans(dtype):
    for i, (sc, sx, sy) in enumerate(WHERE_VECTOR_SHAPES):
        feeds = {"c": rand(sc, np.bool_, i), "a": rand(sx, dtype, i + 1),
                 "b": rand(sy, dtype, i + 2)}
        actual = run_ortlite(model1("Where", feeds, None, 17, dtype, None), feeds)[0]
        np.testing.assert_array_equal(actual, np.where(*feeds.values()).astype(dtype))


def test_where_large_and_string():
    feeds = {"c": rand((100, 1, 200), np.bool_, 1), "a": rand((40, 200), F32, 2),
             "b": rand((100, 40, 1), F32, 3)}
    check("Where", feeds, out_dtype=F32)
    s = np.array(["a", "b", "c"], dtype=object)
    t = np.array(["x"], dtype=object)
    check_exact("Where", {"c": np.array([True, False, True]), "a": s, "b": t},
                np.array(["a", "x", "c"], dtype=object), out_dtype=object)


def test_where_errors():
    expect_error("Where", {"c": np.ones(3, np.int32), "a": np.ones(3, F32),
                           "b": np.ones(3, F32)}, out_dtype=F32)
    expect_error("Where", {"c": np.ones(3, bool), "a": np.ones(3, F32),
                           "b": np.ones(3, F64)}, out_dtype=F32)
    expect_error("Where", {"c": np.ones(2, bool), "a": np.ones(3, F32),
                           "b": np.ones(3, F32)}, out_dtype=F32)


# ---- bfloat16 (through Cast: numpy has no bfloat16) ---------------------------------------


def to_bf16(x):
    """float32 -> nearest bfloat16 (ties to even), returned as float32."""
    bits = np.asarray(x, F32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(F32)


@pytest.mark.parametrize("op,ref", [
    ("Add", np.add), ("Mul", np.multiply), ("Div", np.divide), ("Max", np.maximum),
    ("Sqrt", np.sqrt), ("Relu", lambda x: np.maximum(x, 0)), ("Neg", np.negative),
    ("Sigmoid", lambda x: 1 / (1 + np.exp(-x))),
])
def test_bfloat16(op, ref):
    unary = op in ("Sqrt", "Relu", "Neg", "Sigmoid")
    a = rand((3, 4), F32, 1, 0.1 if op == "Sqrt" else -3, 3)
    b = rand((4,), F32, 2, 0.5, 3)
    feeds = {"a": a} if unary else {"a": a, "b": b}
    bf = TensorProto.BFLOAT16
    nodes = [helper.make_node("Cast", [n], [n + "_bf"], to=bf) for n in feeds]
    nodes.append(helper.make_node(op, [n + "_bf" for n in feeds], ["y_bf"]))
    nodes.append(helper.make_node("Cast", ["y_bf"], ["y"], to=TensorProto.FLOAT))
    m = make_model(nodes, [(n, F32, list(v.shape)) for n, v in feeds.items()],
                   [("y", F32, None)], opset=17)
    actual = run_ortlite(m, feeds)
    args = [to_bf16(v).astype(F64) for v in feeds.values()]
    expected = to_bf16(np.asarray(ref(*args)).astype(F32))
    assert_same(actual, [expected], rtol=1e-2, atol=1e-2)


# ---------------------------------------------------------------------------------------
# CumProd (opset 26: onnx.reference only)


@pytest.mark.parametrize("dtype", [F32, F64, F16, np.int32, np.int64, np.uint32, np.uint64])
def test_cumprod_matches_reference(dtype):
    x = rng(7).integers(1, 4, size=(3, 4, 2)).astype(dtype)
    for axis in (0, 1, -1):
        for exclusive in (0, 1):
            for reverse in (0, 1):
                a = np.array(axis, np.int32 if axis == 1 else np.int64)
                m = node_model("CumProd", {"x": x, "axis": a}, ["y"],
                               attrs=dict(exclusive=exclusive, reverse=reverse), opset=26)
                check_against_reference(m, {"x": x, "axis": a}, rtol=1e-3)


def test_cumprod_errors():
    x = np.ones((2, 3), F32)
    a = np.array(2, np.int64)
    m = node_model("CumProd", {"x": x, "axis": a}, ["y"], opset=26)
    with pytest.raises(ortlite.InvalidArgument, match="axis"):
        run_ortlite(m, {"x": x, "axis": a})
    a2 = np.array([0, 1], np.int64)
    m = node_model("CumProd", {"x": x, "axis": a2}, ["y"], opset=26)
    with pytest.raises(ortlite.InvalidArgument, match="scalar"):
        run_ortlite(m, {"x": x, "axis": a2})
    b = np.ones((2, 3), np.int8)
    a = np.array(0, np.int64)
    m = node_model("CumProd", {"x": b, "axis": a}, ["y"], opset=26)
    with pytest.raises(ortlite.NotImplemented, match="int8"):
        run_ortlite(m, {"x": b, "axis": a})


# ---------------------------------------------------------------------------------------
# Swish (opset 24)


@pytest.mark.parametrize("dtype", [F32, F64, F16])
def test_swish_matches_reference_and_formula(dtype):
    x = np.concatenate([rng(21).uniform(-8, 8, 50), [-100, 100, 0]]).astype(dtype)
    for alpha in (1.0, 0.3):
        m = node_model("Swish", {"x": x}, ["y"], attrs=dict(alpha=alpha), opset=24)
        tol = dict(rtol=2e-3, atol=2e-3) if dtype == F16 else dict(rtol=1e-5, atol=1e-6)
        with np.errstate(over="ignore"):  # the reference's exp(100)
            (y,) = check_against_reference(m, {"x": x}, **tol)
        xd = x.astype(F64)
        np.testing.assert_allclose(y.astype(F64), xd / (1 + np.exp(-alpha * xd)), **tol)


def test_swish_rejects_integers():
    x = np.ones(3, np.int32)
    with pytest.raises(ortlite.OrtliteError, match="int32"):
        run_ortlite(node_model("Swish", {"x": x}, ["y"], opset=24), {"x": x})


# ---------------------------------------------------------------------------------------
# Random generators


@pytest.mark.parametrize("dtype", [TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16])
@pytest.mark.parametrize("op,attrs", [("RandomNormal", dict(mean=1.5, scale=2.5)),
                                      ("RandomUniform", dict(low=-2.0, high=3.0))])
def test_seeded_random_matches_reference(op, attrs, dtype):
    m = node_model(op, {}, ["y"], attrs=dict(shape=[3, 7], seed=3.0, dtype=dtype, **attrs),
                   opset=22, out_elems=[dtype])
    check_against_reference(m, {}, rtol=0, atol=0)


@pytest.mark.parametrize("op", ["RandomNormalLike", "RandomUniformLike"])
def test_seeded_random_like_matches_reference(op):
    x = np.zeros((4, 9), F32)
    check_against_reference(node_model(op, {"x": x}, ["y"], attrs=dict(seed=123456.0), opset=22),
                            {"x": x}, rtol=0, atol=0)
    # dtype overrides the input's type, which may then be any type
    xi = np.zeros((2, 5), np.int32)
    m = node_model(op, {"x": xi}, ["y"], attrs=dict(seed=9.0, dtype=TensorProto.DOUBLE), opset=22,
                   out_dtypes=[F64])
    check_against_reference(m, {"x": xi}, rtol=0, atol=0)


def test_seeded_random_repeats_across_runs_and_sessions():
    m = node_model("RandomNormal", {}, ["y"], attrs=dict(shape=[64], seed=5.0), opset=22)
    a = session(m).run(None, {})[0]
    s = session(m)
    assert np.array_equal(a, s.run(None, {})[0])
    assert np.array_equal(a, s.run(None, {})[0])
    other = node_model("RandomNormal", {}, ["y"], attrs=dict(shape=[64], seed=6.0), opset=22)
    assert not np.array_equal(a, session(other).run(None, {})[0])


@pytest.mark.parametrize("op", ["RandomNormal", "RandomUniform"])
def test_unseeded_random_differs_per_run(op):
    s = session(node_model(op, {}, ["y"], attrs=dict(shape=[32]), opset=22))
    a, b = s.run(None, {})[0], s.run(None, {})[0]
    assert not np.array_equal(a, b)


def test_random_normal_statistics():
    n = 40000
    y = session(node_model("RandomNormal", {}, ["y"], attrs=dict(shape=[n], mean=1.5, scale=2.0),
                           opset=22)).run(None, {})[0]
    assert y.dtype == F32 and y.shape == (n,)
    assert abs(y.mean() - 1.5) < 5 * 2.0 / np.sqrt(n)
    assert abs(y.std() - 2.0) < 0.05
    # about 68% within one standard deviation
    assert abs(np.mean(np.abs(y - 1.5) < 2.0) - 0.6827) < 0.015


def test_random_uniform_like_statistics():
    x = np.zeros((200, 200), F64)
    y = session(node_model("RandomUniformLike", {"x": x}, ["y"], attrs=dict(low=-1.0, high=3.0),
                           opset=22)).run(None, {"x": x})[0]
    assert y.dtype == F64 and y.shape == x.shape
    assert y.min() >= -1.0 and y.max() < 3.0
    assert abs(y.mean() - 1.0) < 5 * np.sqrt(16 / 12 / y.size)
    assert abs(y.var() - 16 / 12) < 0.05
    hist = np.histogram(y, bins=8, range=(-1, 3))[0] / y.size
    assert np.all(np.abs(hist - 1 / 8) < 0.01)


@pytest.mark.parametrize("xdtype,attrs,odtype", [
    (F64, {}, F64),
    (F32, dict(dtype=TensorProto.DOUBLE), F64),
    (F32, dict(dtype=TensorProto.INT32), np.int32),
    (F32, dict(dtype=TensorProto.BOOL), np.bool_),
])
def test_seeded_bernoulli_matches_reference(xdtype, attrs, odtype):
    p = rng(1).random(300).astype(xdtype)
    p[::7] = 0
    p[::11] = 1
    m = node_model("Bernoulli", {"p": p}, ["y"], attrs=dict(seed=7.0, **attrs), opset=22,
                   out_dtypes=[odtype])
    y = check_against_reference(m, {"p": p})[0]
    assert np.all(y[::7][p[::7] == 0] == 0) and np.all(y[::11] == 1)


def test_bernoulli_statistics_and_unseeded_runs_differ():
    p = np.full((100, 100), 0.3, F32)
    s = session(node_model("Bernoulli", {"p": p}, ["y"], opset=22))
    a, b = s.run(None, {"p": p})[0], s.run(None, {"p": p})[0]
    assert set(np.unique(a)) <= {0.0, 1.0}
    assert abs(a.mean() - 0.3) < 5 * np.sqrt(0.21 / a.size)
    assert not np.array_equal(a, b)


def test_multinomial_statistics_and_layout():
    probs = np.array([[0.1, 0.2, 0.7, 0.0], [0.25, 0.25, 0.25, 0.25]])
    with np.errstate(divide="ignore"):
        logits = (np.log(probs) + 3.0).astype(F32)  # unnormalized; -inf: never drawn
    n = 20000
    for dtype, np_dtype in [(TensorProto.INT32, np.int32), (TensorProto.INT64, np.int64)]:
        m = node_model("Multinomial", {"x": logits}, ["y"], attrs=dict(sample_size=n, dtype=dtype),
                       opset=15, out_dtypes=[np_dtype])
        y = session(m).run(None, {"x": logits})[0]
        assert y.dtype == np_dtype and y.shape == (2, n)
        for row in range(2):
            freq = np.bincount(y[row], minlength=4) / n
            assert np.all(np.abs(freq - probs[row]) < 5 * np.sqrt(0.25 / n)), freq
        assert not np.any(y[0] == 3)
        # the same layout and type as onnxruntime (its values come from another stream;
        # it has no Multinomial kernel for opset 22)
        ort = run_ort(m, {"x": logits})[0]
        assert ort.dtype == y.dtype and ort.shape == y.shape


def test_multinomial_seeded_is_deterministic():
    x = rng(2).standard_normal((3, 6)).astype(F64)
    m = node_model("Multinomial", {"x": x}, ["y"], attrs=dict(sample_size=50, seed=11.0), opset=22,
                   out_dtypes=[np.int32])
    a = session(m).run(None, {"x": x})[0]
    assert np.array_equal(a, session(m).run(None, {"x": x})[0])
    assert a.min() >= 0 and a.max() < 6


def test_random_errors():
    with pytest.raises(ortlite.InvalidGraph, match="shape"):
        session(node_model("RandomNormal", {}, ["y"], attrs=dict(seed=1.0), opset=22))
    with pytest.raises(ortlite.InvalidArgument, match="dtype"):
        session(node_model("RandomUniform", {}, ["y"],
                           attrs=dict(shape=[2], dtype=TensorProto.INT32), opset=22))
    with pytest.raises(ortlite.InvalidArgument, match="negative"):
        session(node_model("RandomNormal", {}, ["y"], attrs=dict(shape=[2, -1]), opset=22))
    xi = np.zeros(3, np.int64)
    s = session(node_model("RandomUniformLike", {"x": xi}, ["y"], opset=22, out_dtypes=[F32]))
    with pytest.raises(ortlite.InvalidArgument, match="dtype"):
        s.run(None, {"x": xi})
    p = np.array([0.5, 1.5], F32)
    s = session(node_model("Bernoulli", {"p": p}, ["y"], opset=22))
    with pytest.raises(ortlite.InvalidArgument, match=r"probability"):
        s.run(None, {"p": p})
    with pytest.raises(ortlite.InvalidArgument, match=r"probability"):
        s.run(None, {"p": np.array([0.5, np.nan], F32)})
    x = np.array([[-np.inf, -np.inf]], F32)
    s = session(node_model("Multinomial", {"x": x}, ["y"], opset=22, out_dtypes=[np.int32]))
    with pytest.raises(ortlite.InvalidArgument, match="no finite"):
        s.run(None, {"x": x})
    x1 = np.zeros(3, F32)
    with pytest.raises(ortlite.InvalidArgument, match="batch_size"):
        run_ortlite(node_model("Multinomial", {"x": x1}, ["y"], opset=22, out_dtypes=[np.int32]),
                    {"x": x1})
    with pytest.raises(ortlite.InvalidArgument, match="dtype"):
        session(node_model("Multinomial", {"x": x}, ["y"], attrs=dict(dtype=TensorProto.FLOAT),
                           opset=22))


# ---------------------------------------------------------------------------------------
# DFT / STFT / MelWeightMatrix


def dft_model(x, opset, dft_length=None, axis=None, **attrs):
    feeds, names = {"x": x}, ["x"]
    if dft_length is not None:
        feeds["n"] = np.array(dft_length, np.int64)
        names.append("n")
    if axis is not None:
        if opset >= 20:
            if dft_length is None:
                names.append("")
            feeds["axis"] = np.array(axis, np.int64)
            names.append("axis")
        else:
            attrs["axis"] = axis
    return node_model("DFT", feeds, ["y"], attrs=attrs, opset=opset, order=names), feeds


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("n", [7, 12, 16, 97])
@pytest.mark.parametrize("complex_in", [False, True])
@pytest.mark.parametrize("inverse,onesided", [(0, 0), (1, 0), (0, 1)])
def test_dft_matches_onnxruntime(opset, n, complex_in, inverse, onesided):
    x = rng(n).standard_normal((2, n, 3, 2 if complex_in else 1)).astype(F32)
    m, feeds = dft_model(x, opset, axis=1, inverse=inverse, onesided=onesided)
    # onnxruntime accumulates in float (an O(n^2) sum for lengths that are not powers of
    # two): looser for n = 97; the reference (numpy in double) is the tight oracle
    tol = 2e-3 if n == 97 else 1e-4
    check_against_ort(m, feeds, rtol=tol, atol=tol)
    check_against_reference(m, feeds, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("dft_length,axis", [(10, 2), (5, -2), (16, 1), (3, 1)])
def test_dft_length_and_axis_match_onnxruntime(opset, dft_length, axis):
    x = rng(3).standard_normal((2, 8, 6, 2)).astype(F64)
    m, feeds = dft_model(x, opset, dft_length=dft_length, axis=axis)
    check_against_ort(m, feeds, rtol=1e-9, atol=1e-9)


def test_dft_opset20_default_axis_is_last_signal_axis():
    x = rng(4).standard_normal((3, 5, 1)).astype(F32)
    m, feeds = dft_model(x, 20)
    y = check_against_ort(m, feeds, rtol=1e-5, atol=1e-5)[0]
    ref = np.fft.fft(x[..., 0], axis=1)
    np.testing.assert_allclose(y[..., 0] + 1j * y[..., 1], ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("L,dft_length", [(6, None), (6, 11), (9, 12), (4, 9)])
def test_dft_irfft_matches_numpy(opset, L, dft_length):
    # onnxruntime rejects onesided=1 with inverse=1; numpy's irfft is the oracle
    spec = rng(L).standard_normal((2, L, 3, 2))
    m, feeds = dft_model(spec.astype(F64), opset, dft_length=dft_length, axis=1, inverse=1,
                         onesided=1)
    y = run_ortlite(m, feeds)[0]
    n = dft_length if dft_length is not None else 2 * (L - 1)
    ref = np.fft.irfft(spec[..., 0] + 1j * spec[..., 1], n=n, axis=1)[..., np.newaxis]
    assert_same([y], [ref], rtol=1e-10, atol=1e-10)
    check_against_reference(m, feeds, rtol=1e-10, atol=1e-10)


def test_dft_half_types_and_large_prime_length():
    x = rng(5).standard_normal((1, 1009, 1)).astype(F32)
    m, feeds = dft_model(x, 20, axis=1)
    check_against_reference(m, feeds, rtol=1e-5, atol=1e-4)
    xh = x.astype(F16)
    y = run_ortlite(*dft_model(xh, 20, axis=1))[0]
    assert y.dtype == F16
    ref = np.fft.fft(xh[0, :, 0].astype(F64))
    np.testing.assert_allclose(y[0, :, 0].astype(F64), ref.real, rtol=2e-2, atol=0.2)


def test_dft_errors():
    x = np.zeros((2, 4, 1), F32)
    m, feeds = dft_model(x, 20, axis=2)
    with pytest.raises(ortlite.InvalidArgument, match="axis"):
        run_ortlite(m, feeds)
    m, feeds = dft_model(x, 20, dft_length=0, axis=1)
    with pytest.raises(ortlite.InvalidArgument, match="dft_length"):
        run_ortlite(m, feeds)
    bad = np.zeros((2, 4, 3), F32)
    with pytest.raises(ortlite.InvalidArgument, match="last dimension"):
        run_ortlite(*dft_model(bad, 17))
    xi = np.zeros((2, 4, 1), np.int32)
    with pytest.raises(ortlite.InvalidArgument, match="float"):
        run_ortlite(*dft_model(xi, 17))
    # the default IRFFT length 2 * (1 - 1) is empty
    with pytest.raises(ortlite.InvalidArgument, match="dft_length"):
        run_ortlite(*dft_model(np.zeros((2, 1, 2), F32), 20, axis=1, inverse=1, onesided=1))


def stft_model(x, step, window=None, frame_length=None, **attrs):
    feeds = {"x": x, "step": np.array(step, np.int64)}
    names = ["x", "step"]
    if window is not None:
        feeds["w"] = window
        names.append("w")
    if frame_length is not None:
        if window is None:
            names.append("")
        feeds["fl"] = np.array(frame_length, np.int64)
        names.append("fl")
    return node_model("STFT", feeds, ["y"], attrs=attrs, opset=17, order=names), feeds


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("onesided", [0, 1])
@pytest.mark.parametrize("with_window,frame_length,step", [(True, None, 4), (False, 10, 3),
                                                           (True, 16, 5)])
def test_stft_matches_onnxruntime(dtype, onesided, with_window, frame_length, step):
    x = rng(7).standard_normal((2, 64, 1)).astype(dtype)
    window = None
    if with_window:
        window = np.hanning(frame_length or 12).astype(dtype)
    m, feeds = stft_model(x, step, window, frame_length, onesided=onesided)
    check_against_ort(m, feeds, rtol=1e-4, atol=1e-4)


def test_stft_complex_signal_matches_reference():
    x = rng(8).standard_normal((1, 40, 2)).astype(F32)
    m, feeds = stft_model(x, 6, np.hamming(8).astype(F32), onesided=0)
    check_against_reference(m, feeds, rtol=1e-4, atol=1e-4)


def test_stft_errors():
    x = np.zeros((1, 16, 1), F32)
    with pytest.raises(ortlite.InvalidArgument, match="frame_step"):
        run_ortlite(*stft_model(x, 0, np.ones(4, F32)))
    with pytest.raises(ortlite.InvalidArgument, match="shorter than frame_length"):
        run_ortlite(*stft_model(x, 2, np.ones(32, F32)))
    with pytest.raises(ortlite.InvalidArgument, match="window"):
        run_ortlite(*stft_model(x, 2, np.ones(4, F64)))
    with pytest.raises(ortlite.InvalidArgument, match="signal"):
        run_ortlite(*stft_model(np.zeros((16, 1), F32), 2, np.ones(4, F32)))


def mel_model(bins, dft, rate, lo, hi, dtype=F32, **attrs):
    feeds = {"b": np.array(bins, np.int64), "n": np.array(dft, np.int64),
             "r": np.array(rate, np.int64), "lo": np.array(lo, dtype),
             "hi": np.array(hi, dtype)}
    out = attrs.get("output_datatype", TensorProto.FLOAT)
    return node_model("MelWeightMatrix", feeds, ["y"], attrs=attrs, opset=17,
                      out_elems=[out]), feeds


@pytest.mark.parametrize("bins,dft,rate,lo,hi", [(8, 16, 8192, 0.0, 4096.0),
                                                 (20, 512, 16000, 20.0, 8000.0),
                                                 (40, 1024, 22050, 0.0, 11025.0),
                                                 (13, 400, 16000, 300.0, 3400.0)])
def test_mel_weight_matrix_matches_onnxruntime_and_reference(bins, dft, rate, lo, hi):
    m, feeds = mel_model(bins, dft, rate, lo, hi)
    y = check_against_ort(m, feeds, rtol=1e-6, atol=1e-6)[0]
    assert y.shape == (dft // 2 + 1, bins)
    check_against_reference(m, feeds, rtol=1e-6, atol=1e-6)
    m, feeds = mel_model(bins, dft, rate, lo, hi, dtype=F64,
                         output_datatype=TensorProto.DOUBLE)
    check_against_reference(m, feeds, rtol=1e-12, atol=1e-12)


def test_mel_weight_matrix_errors():
    # the upper edge far past the Nyquist frequency would index past the last bin
    with pytest.raises(ortlite.InvalidArgument, match="bin"):
        run_ortlite(*mel_model(8, 16, 8000, 0.0, 20000.0))
    with pytest.raises(ortlite.InvalidArgument, match="sample_rate"):
        run_ortlite(*mel_model(8, 16, 0, 0.0, 100.0))
    with pytest.raises(ortlite.InvalidArgument, match="more than"):
        run_ortlite(*mel_model(1 << 24, 1 << 24, 8000, 0.0, 100.0))
    with pytest.raises(ortlite.InvalidArgument, match="output_datatype"):
        session(mel_model(8, 16, 8000, 0.0, 100.0, output_datatype=TensorProto.STRING)[0])


# ---- vectorized float activations and Pow strength reduction -----------------------------
# Elu Selu Celu LeakyRelu HardSigmoid HardSwish Softplus Softsign Mish ThresholdedRelu run a
# branch-free float loop (fast_math.h) compiled per instruction set; Pow with a scalar
# exponent of 0.5, 1, 2, 3 or -1 skips pow().

_ACT_ATTRS = {
    "Elu": [None, {"alpha": 0.5}], "Selu": [None, {"alpha": 1.5, "gamma": 2.0}],
    "Celu": [None, {"alpha": 2.5}], "LeakyRelu": [None, {"alpha": 0.2}],
    "HardSigmoid": [None, {"alpha": 0.3, "beta": 0.4}], "HardSwish": [None],
    "Softplus": [None], "Softsign": [None], "Mish": [None],
    "ThresholdedRelu": [None, {"alpha": 0.7}],
}
_ACT_OPSET = {"Mish": 18, "Celu": 12}
_ACT_EXTREMES = [0.0, -0.0, 1e-30, -1e-30, 1e-7, -1e-7, 1e-3, -1e-3, 0.4999, 0.5, -0.5,
                 -0.5001, 1.0, -1.0, 5.0, -5.0, 15.0, 19.9, 20.0, 20.1, 30.0, 44.0, 50.0,
                 -20.0, -30.0, -87.0, -88.0, -100.0, -104.0, -110.0, 88.0, 89.0, 100.0,
                 1e30, -1e30]


@pytest.mark.parametrize("op", list(_ACT_ATTRS))
def test_vectorized_activations_match_onnxruntime(op):
    opset = _ACT_OPSET.get(op, 17)
    for attrs in _ACT_ATTRS[op]:
        # sizes around the vector widths (tails) and one large enough to run in parallel
        for n, seed in [(1, 1), (7, 2), (16, 3), (33, 4), (1000, 5), (300 * 1001, 6)]:
            x = rand((n,), F32, seed, -12, 12)
            check(op, {"x": x}, attrs=attrs, opset=opset, tol=dict(rtol=2e-5, atol=2e-6))
        x = np.array(_ACT_EXTREMES, F32)
        check(op, {"x": x}, attrs=attrs, opset=opset, tol=dict(rtol=2e-5, atol=1e-6))
    # float16 through float blocks (numpy where onnxruntime has no float16 kernel)
    check(op, {"x": rand((4, 3, 5), F16, 7, -6, 6)}, ref=_f64(UNARY_FLOAT[op][0]), opset=opset)


def test_vectorized_activations_accuracy_and_specials():
    xs = np.concatenate([np.linspace(-30, 30, 60001, dtype=F32),
                         np.geomspace(1e-12, 1, 2001).astype(F32),
                         -np.geomspace(1e-12, 1, 2001).astype(F32)])
    x64 = xs.astype(F64)
    sp = np.logaddexp(0, x64)
    refs = {
        "Elu": (np.where(x64 >= 0, x64, np.expm1(x64)), 17),
        "Celu": (np.maximum(0, x64) + np.minimum(0, np.expm1(x64)), 12),
        "Selu": (SELU_G * np.where(x64 > 0, x64, SELU_A * np.expm1(x64)), 17),
        "Softplus": (sp, 17),
        "Mish": (x64 * np.tanh(sp), 18),
    }
    for op, (ref, opset) in refs.items():
        got = run_ortlite(model1(op, {"x": xs}, opset=opset), {"x": xs})[0]
        np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-37, err_msg=op)
    # NaN propagates; infinities
    special = np.array([np.nan, np.inf, -np.inf], F32)
    for op in ["Elu", "Selu", "Softplus", "Softsign", "LeakyRelu", "HardSwish"]:
        check(op, {"x": special}, opset=_ACT_OPSET.get(op, 17))
    got = run_ortlite(model1("Mish", {"x": special[:2]}, opset=18), {"x": special[:2]})[0]
    assert np.isnan(got[0]) and got[1] == np.inf


@pytest.mark.parametrize("e", [0.5, 1.0, 2.0, 3.0, -1.0, 4.0])
@pytest.mark.parametrize("dtype", [F32, F16, F64], ids=lambda d: np.dtype(d).name)
def test_pow_scalar_exponent_strength_reduction(e, dtype):
    for shape, seed in [((1,), 1), ((17,), 2), ((3, 64, 33), 3), ((300, 1001), 4)]:
        a = rand(shape, dtype, seed, 0.1, 4.0)
        # exponent as a constant initializer (known at load) and as a graph input
        node = helper.make_node("Pow", ["a", "b"], ["y"])
        init = helper.make_tensor("b", onnx_type_of(dtype), [], [e])
        m = make_model([node], [("a", a.dtype, list(a.shape))], [("y", a.dtype, None)],
                       initializers=[init])
        assert_same(run_ortlite(m, {"a": a}), run_ort(m, {"a": a}), **tolerance(dtype))
        check("Pow", {"a": a, "b": np.array(e, dtype)}, ref=np_pow)
    if e != 0.5:
        neg = rand((5, 40), dtype, 9, -3, 3)
        check("Pow", {"a": neg, "b": np.array(e, dtype)}, ref=np_pow)


def onnx_type_of(dtype):
    return {np.dtype(F32): TensorProto.FLOAT, np.dtype(F16): TensorProto.FLOAT16,
            np.dtype(F64): TensorProto.DOUBLE}[np.dtype(dtype)]


def test_pow_integer_scalar_exponents_stay_exact():
    a = np.array([-7, -3, -1, 0, 1, 2, 5, 1290, 46341], np.int32)
    for e in [1, 2, 3]:
        check("Pow", {"a": a, "b": np.array(e, np.int32)}, ref=np_pow)
    check("Pow", {"a": a[a != 0], "b": np.array(-1, np.int32)}, ref=np_pow)  # 0^-1: undefined
    a = np.array([-3, 2, 3 ** 13, 2 ** 31 + 1], np.int64)
    for e in [1, 2, 3]:
        check("Pow", {"a": a, "b": np.array(e, np.int64)}, ref=np_pow)


# --- Floor / Ceil / Round through the vectorized float loop ----------------------------------


@pytest.mark.parametrize("op,ref", [("Floor", np.floor), ("Ceil", np.ceil), ("Round", np.round)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_rounding_ops_match_numpy_on_special_values(op, ref, dtype):
    special = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997, -0.49999997, 1e-30,
               -1e-30, 8388607.5, 8388608.0, 16777217.0, -8388607.5, 3.4e38, -3.4e38,
               np.inf, -np.inf, np.nan]
    x = np.concatenate([np.array(special, np.float64),
                        np.random.default_rng(9).uniform(-1e4, 1e4, 1000)]).astype(dtype)
    node = helper.make_node(op, ["x"], ["y"])
    elem = helpers.NP_TO_ONNX[np.dtype(dtype)]
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", elem, [x.size])],
                              [helper.make_tensor_value_info("y", elem, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    got = ortlite.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    want = ref(x)
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))


# The float exp / log / tanh / sigmoid / erf / Gelu / Softmax loops (src/compute/fast_*.cc)
# on every instruction-set path: ORTLITE_FAST_ISA caps the run-time choice, so each path
# runs in its own process (on a CPU without the instruction set the lower path is taken).
_FAST_ISA_SCRIPT = r"""
import sys
import numpy as np
import ortlite
from onnx import TensorProto, helper

def model(op, attrs, opset):
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    g = helper.make_graph([node], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m.SerializeToString()

data = dict(np.load(sys.argv[1]))
out = {}
for key in [k for k in data if k.startswith("x_")]:
    op, attr = key[2:].split("_")
    attrs = {"approximate": "tanh"} if attr == "tanh" else ({"axis": -1} if op.endswith("max") else {})
    s = ortlite.InferenceSession(model(op, attrs, 20), providers=["CPUExecutionProvider"])
    x = data[key]
    # the whole sweep, then every length 1..33 and 64 + 1..33 (the masked tails)
    out["y_" + key[2:]] = s.run(None, {"x": x})[0]
    for n in list(range(1, 34)) + [64 + k for k in range(1, 34)]:
        out[f"t{n}_" + key[2:]] = s.run(None, {"x": x[..., 7:7 + n]})[0]
np.savez(sys.argv[2], **out)
"""

_SPECIAL = np.array([0.0, -0.0, 1e-45, -1e-45, 1e-40, -1e-40, 1e-30, -1e-30, 1.0, -1.0, 0.625,
                     20.0, -20.0, 88.72, 88.73, 89.0, -87.5, -103.0, -104.0, -105.0, 1e30, -1e30,
                     np.inf, -np.inf, np.nan], F32)


def _fast_sweep(lo, hi, n=60000, seed=0):
    r = np.random.default_rng(seed)
    return np.concatenate([np.linspace(lo, hi, n), r.uniform(lo, hi, n), _SPECIAL]).astype(F32)


def _ulps(got, ref):
    """|got - ref| in float32 ulps of ref (ref in float64; the subnormal spacing below)."""
    with np.errstate(over="ignore", invalid="ignore"):
        sp = np.maximum(np.spacing(np.abs(ref).astype(F32)).astype(F64), 2.0 ** -149)
        return np.abs(got.astype(F64) - ref) / sp


def _gelu_tanh64(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


# op key: (input, float64 oracle, max ulps, extra absolute tolerance)
_FAST_CASES = {
    "Exp_": (_fast_sweep(-104, 89), np.exp, 3, 0),
    "Log_": (np.concatenate([_fast_sweep(1e-6, 10), np.exp(np.linspace(-103, 88, 20000)),
                             np.float32(2.0) ** np.arange(-149, 128, 0.37),
                             -_fast_sweep(0, 10, 100)]).astype(F32), np.log, 3, 0),
    "Tanh_": (_fast_sweep(-12, 12), np.tanh, 4, 0),
    "Sigmoid_": (_fast_sweep(-105, 30), lambda v: 1 / (1 + np.exp(-v)), 4, 0),
    "Erf_": (_fast_sweep(-6, 6), _erf, 4, 0),
    # Gelu: 1 + erf(x / sqrt 2) cancels for negative x on the SSE2 / AVX2 paths
    "Gelu_none": (_fast_sweep(-8, 8), lambda v: 0.5 * v * (1 + _erf(v / math.sqrt(2))), 4, 3e-7),
    "Gelu_tanh": (_fast_sweep(-8, 8), _gelu_tanh64, 4, 3e-7),
    "Sqrt_": (np.abs(_fast_sweep(0, 1e6)), np.sqrt, 0.5, 0),
}


def _softmax64(x, log):
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    s = np.sum(e, axis=-1, keepdims=True)
    return (x - m - np.log(s)) if log else e / s


@pytest.mark.parametrize("isa", ["sse2", "avx2", "avx512"])
def test_fast_float_functions_each_isa(isa, tmp_path):
    import os
    import subprocess
    import sys
    feeds = {"x_" + k: v[0] for k, v in _FAST_CASES.items()}
    sm = np.random.default_rng(1).uniform(-30, 30, (5, 1000)).astype(F32)
    feeds["x_Softmax_"] = sm
    feeds["x_LogSoftmax_"] = sm
    np.savez(tmp_path / "in.npz", **feeds)
    env = dict(os.environ, ORTLITE_FAST_ISA=isa)
    r = subprocess.run([sys.executable, "-c", _FAST_ISA_SCRIPT, str(tmp_path / "in.npz"),
                        str(tmp_path / "out.npz")], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = np.load(tmp_path / "out.npz")
    for key, (x, f, max_ulp, atol) in _FAST_CASES.items():
        with np.errstate(all="ignore"):
            ref = f(x.astype(F64))
        for name in [k for k in out.files if k.endswith("_" + key)]:
            got = out[name]
            n = got.shape[-1]
            sel = slice(None) if name.startswith("y_") else slice(7, 7 + n)
            xr, rr = x[sel], ref[sel]
            assert np.array_equal(np.isnan(got), np.isnan(rr)), (isa, name, xr[np.isnan(got)
                                                                              != np.isnan(rr)])
            ok = ~np.isnan(rr)
            err = _ulps(got[ok], rr[ok])
            with np.errstate(invalid="ignore"):
                bad = (err > max_ulp) & (np.abs(got[ok] - rr[ok]) > atol)
            assert not bad.any(), (isa, name, xr[ok][bad][:5], got[ok][bad][:5], rr[ok][bad][:5],
                                   err[bad].max())
            # the sign of a zero result: that of x (tanh, erf, Gelu and sqrt of +-0)
            if key in ("Tanh_", "Erf_", "Gelu_none", "Gelu_tanh", "Sqrt_"):
                z = ok & (rr == 0)
                assert np.array_equal(np.signbit(got[z]), np.signbit(xr[z])), (isa, name)
    for op, log in (("Softmax", False), ("LogSoftmax", True)):
        key = op + "_"
        for name in [k for k in out.files if k.endswith("_" + key)]:
            got = out[name]
            sel = slice(None) if name.startswith("y_") else slice(7, 7 + got.shape[-1])
            ref = _softmax64(sm[..., sel].astype(F64), log)
            # x - max rounds to float first: up to 60 * 2^-24 relative for the spread of 60
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=2e-6 if log else 1e-37,
                                       err_msg=f"{isa} {name}")


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("exp_dtype", [np.int64, np.int32, np.uint8])
@pytest.mark.parametrize("k", [2, 3])
def test_pow_integer_base_scalar_square_cube(dtype, exp_dtype, k):
    """x^2 and x^3 of integers with a scalar exponent: wrapping products, the same as the
    element-by-element path (the exponent as a full tensor) and numpy's wrapping power."""
    info = np.iinfo(dtype)
    x = np.random.default_rng(k).integers(info.min, info.max, size=1001, dtype=dtype)
    x[:6] = [0, 1, -1, 7, info.min, info.max]
    scalar = helpers.node_model("Pow", {"x": x}, ["y"], opset=15,
                                consts={"e": np.array(k, exp_dtype)})
    full = helpers.node_model("Pow", {"x": x}, ["y"], opset=15,
                              consts={"e": np.full(x.shape, k, exp_dtype)})
    with np.errstate(over="ignore"):
        expected = np.power(x, dtype(k))
    for threads in (1, 2):
        got = helpers.run_lite(scalar, {"x": x}, threads=threads)[0]
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(helpers.run_lite(full, {"x": x})[0], expected)


_CMP = {"Equal": np.equal, "Less": np.less, "Greater": np.greater, "LessOrEqual": np.less_equal,
        "GreaterOrEqual": np.greater_equal}


@pytest.mark.parametrize("op", sorted(_CMP))
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int8, np.uint8,
                                   np.int16, np.int32, np.int64, np.uint32, np.uint64])
@pytest.mark.parametrize("shapes", [((2, 3, 37, 41), (3, 1, 1)), ((129, 77), (77,)),
                                    ((5, 1, 17), (1, 19, 17)), ((1031,), ()),
                                    ((3, 1100), (3, 1100))])
def test_comparisons_match_numpy(op, dtype, shapes):
    """Comparisons in every integer width and the three float widths (float16 through float
    blocks), broadcast per channel, per row, both ways, against a scalar and element-wise
    over rows longer than one block; the ends of each type's range, +-0, +-inf and NaN for
    floats."""
    r = np.random.default_rng(len(op) + np.dtype(dtype).itemsize)
    a_shape, b_shape = shapes
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        pool = np.array([info.min, info.min + 1, 0, 1, 2, info.max - 1, info.max], dtype)
    else:
        pool = np.array([-np.inf, -1.5, -0.0, 0.0, 1.5, 2.0, np.inf, np.nan], dtype)
    a = r.choice(pool, size=a_shape).astype(dtype)
    b = np.asarray(r.choice(pool, size=b_shape)).astype(dtype)
    opset = 16 if op in ("LessOrEqual", "GreaterOrEqual") else 13
    m = helpers.node_model(op, {"a": a, "b": b}, ["y"], out_dtypes=[np.bool_], opset=opset)
    expected = _CMP[op](a, b)
    for threads in (1, 2):
        got = helpers.run_lite(m, {"a": a, "b": b}, threads=threads)[0]
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.int32, np.int64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Max", "Min", "Div"])
def test_int_binary_vector_loops(op, dtype, threads):
    """int32 / int64 binary ops run in the AVX-512 / AVX2 loop clones: every broadcast form
    (both operands running, one of them fixed along a row, a scalar), row lengths around the
    vector widths, wrap-around at the type's limits (as numpy wraps), exact against numpy."""
    from helpers import run_lite

    info = np.iinfo(dtype)
    g = np.random.default_rng(41)
    ref = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Max": np.maximum,
           "Min": np.minimum}
    for sa, sb in (((64, 1000), (1000,)), ((3, 37), (3, 37)), ((4, 1), (4, 17)),
                   ((5, 33), ()), ((), (2, 15)), ((1,), (1,)), ((7, 16, 9), (7, 1, 9))):
        a = g.integers(info.min, info.max, sa, dtype=dtype, endpoint=True)
        b = g.integers(info.min, info.max, sb, dtype=dtype, endpoint=True)
        if op == "Div":
            b = np.where(b == 0, 7, b).astype(dtype)
            b = np.where((b == -1), 3, b).astype(dtype)
            a = np.asarray(a // 3, dtype)  # no INT_MIN / -1
        if op == "Mul" and a.size and a.ndim:
            a.flat[0] = info.max
        m = make_model([helper.make_node(op, ["a", "b"], ["y"])],
                       [("a", dtype, list(sa)), ("b", dtype, list(sb))], [("y", dtype, None)])
        got = run_lite(m, {"a": a, "b": b}, threads)[0]
        if op == "Div":  # C division truncates toward zero
            q = np.abs(a.astype(object)) // np.abs(b.astype(object))
            want = np.array(np.where((a < 0) != (b < 0), -q, q), dtype=np.int64).astype(dtype)
        else:
            with np.errstate(over="ignore"):
                want = ref[op](a, b).astype(dtype)
        np.testing.assert_array_equal(got, want, err_msg=f"{op} {sa} {sb}")
