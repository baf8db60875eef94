"""The narrow element types (float8*, float8e8m0, float4e2m1, int4, uint4, int2, uint2),
their packed TensorProto forms, Cast / CastLike between them and every other type, the
numpy bridge (ml_dtypes arrays), and the opset 24-27 registrations of the tensor kernels.

Oracles: onnx's reference evaluator (ml_dtypes conversions, numpy_helper.saturate_cast and
to_float8e8m0) and onnx.numpy_helper for the packed forms; onnxruntime through a Cast chain
(numpy <-> float8 / int4 cannot cross its Python boundary) where it supports the type; exact
values where ortlite follows the ONNX specification over onnx.reference (see
docs/compatibility.md)."""

import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, defs, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import ortlite
from helpers import ROOT, make_model, run_ort, run_ortlite, subprocess_env

TP = TensorProto
# The samples include values that overflow numpy's own casts on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
FLOAT8 = [TP.FLOAT8E4M3FN, TP.FLOAT8E4M3FNUZ, TP.FLOAT8E5M2, TP.FLOAT8E5M2FNUZ]
NARROW_INT = [TP.INT4, TP.UINT4, TP.INT2, TP.UINT2]
NARROW = FLOAT8 + [TP.FLOAT8E8M0, TP.FLOAT4E2M1] + NARROW_INT
ML = {TP.FLOAT8E4M3FN: ml_dtypes.float8_e4m3fn, TP.FLOAT8E4M3FNUZ: ml_dtypes.float8_e4m3fnuz,
      TP.FLOAT8E5M2: ml_dtypes.float8_e5m2, TP.FLOAT8E5M2FNUZ: ml_dtypes.float8_e5m2fnuz,
      TP.FLOAT8E8M0: ml_dtypes.float8_e8m0fnu, TP.FLOAT4E2M1: ml_dtypes.float4_e2m1fn,
      TP.INT4: ml_dtypes.int4, TP.UINT4: ml_dtypes.uint4, TP.INT2: ml_dtypes.int2,
      TP.UINT2: ml_dtypes.uint2, TP.BFLOAT16: ml_dtypes.bfloat16}
NAMES = {TP.FLOAT8E4M3FN: "float8e4m3fn", TP.FLOAT8E4M3FNUZ: "float8e4m3fnuz",
         TP.FLOAT8E5M2: "float8e5m2", TP.FLOAT8E5M2FNUZ: "float8e5m2fnuz",
         TP.FLOAT8E8M0: "float8e8m0", TP.FLOAT4E2M1: "float4e2m1", TP.INT4: "int4",
         TP.UINT4: "uint4", TP.INT2: "int2", TP.UINT2: "uint2"}
BITS = {TP.INT4: 4, TP.UINT4: 4, TP.FLOAT4E2M1: 4, TP.INT2: 2, TP.UINT2: 2}


def tid(t):
    return NAMES.get(t) or TP.DataType.Name(t).lower()


def elem(dt):
    return dt if isinstance(dt, int) else helper.np_dtype_to_tensor_dtype(np.dtype(dt))


def cast_model(src, to, opset=25, **attrs):
    node = helper.make_node("Cast", ["x"], ["y"], to=elem(to), **attrs)
    return make_model([node], [("x", elem(src), None)], [("y", elem(to), None)], opset=opset)


def chain_model(src, mid, dst, opset=21, **attrs):
    """src -> mid -> dst: lets onnxruntime, which cannot hand out float8 / int4 arrays,
    check the conversion into `mid`."""
    nodes = [helper.make_node("Cast", ["x"], ["m"], to=elem(mid), **attrs),
             helper.make_node("Cast", ["m"], ["y"], to=elem(dst))]
    return make_model(nodes, [("x", elem(src), None)], [("y", elem(dst), None)], opset=opset)


def reference(model, feeds):
    return ReferenceEvaluator(model).run(None, feeds)[0]


def same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    gb, wb = got.view(np.uint8), want.view(np.uint8)
    bad = np.nonzero(gb != wb)[0]
    assert bad.size == 0, [(i, gb[i], wb[i]) for i in bad[:10]]


def all_codes(t):
    """Every element of a narrow type, as an ml_dtypes array."""
    n = 1 << BITS.get(t, 8)
    return np.arange(n, dtype=np.uint8).view(ML[t])


def float_samples():
    """Specials, every float16 value, values around the float8 / float4 ranges and
    random floats of every magnitude."""
    rng = np.random.default_rng(7)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, 3.4e38, -3.4e38,
                         448, 464, 465, 480, 240, 248, 57344, 61439, 61440, 6, 7, 5, 0.25,
                         0.75, 2.5, 3.5, 1e-3, 2.0 ** -9, 2.0 ** -10, 2.0 ** -17], np.float32)
    halves = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
    wide = (rng.standard_normal(4000) * 10.0 ** rng.integers(-12, 12, 4000)).astype(np.float32)
    return np.concatenate([specials, -specials, halves, wide])


# ---- float / float16 / double -> float8 ---------------------------------------------------

@pytest.mark.parametrize("to", FLOAT8, ids=tid)
@pytest.mark.parametrize("saturate", [1, 0])
def test_float_to_float8_matches_reference(to, saturate):
    x = float_samples()
    for src in (np.float32, np.float16, np.float64):
        xs = x.astype(src)
        m = cast_model(src, to, saturate=saturate)
        got = run_ortlite(m, {"x": xs})[0]
        assert got.dtype == ML[to]
        same_bits(got, reference(m, {"x": xs}))


@pytest.mark.parametrize("to", FLOAT8, ids=tid)
@pytest.mark.parametrize("saturate", [1, 0])
def test_float_to_float8_matches_onnxruntime(to, saturate):
    x = float_samples()
    if not saturate:
        # Without saturation onnxruntime 1.23 departs from the specification (and from
        # onnx.reference, checked above) for values that round past the largest float8:
        # float8e4m3fn gives the largest value instead of NaN, float8e5m2 NaN instead of
        # infinity.
        x = x[~(np.abs(x) > float(ml_dtypes.finfo(ML[to]).max))]
    m = chain_model(np.float32, to, np.float32, saturate=saturate)
    np.testing.assert_array_equal(run_ortlite(m, {"x": x})[0], run_ort(m, {"x": x})[0])


@pytest.mark.parametrize("t", FLOAT8 + [TP.FLOAT8E8M0, TP.FLOAT4E2M1], ids=tid)
def test_narrow_float_to_wider_types_is_exact(t):
    codes = all_codes(t)
    for dst in (np.float32, np.float64, np.float16):
        got = run_ortlite(cast_model(t, dst), {"x": codes})[0]
        np.testing.assert_array_equal(got, codes.astype(np.float32).astype(dst))
    got = run_ortlite(cast_model(t, TP.BFLOAT16), {"x": codes})[0]
    np.testing.assert_array_equal(got.astype(np.float32), codes.astype(np.float32))


@pytest.mark.parametrize("t", FLOAT8, ids=tid)
def test_float8_to_integers_and_bool_match_onnxruntime(t):
    codes = all_codes(t)
    values = codes.astype(np.float32)
    # -0 is left out: onnxruntime turns the float8 -0 into True (the specification: False).
    finite = codes[np.isfinite(values) & ~((values == 0) & np.signbit(values))]
    for dst in (np.int8, np.uint8, np.int16, np.int32, np.int64, np.bool_):
        # onnxruntime cannot take a float8 feed: the float8 values come from a float Cast.
        m = chain_model(np.float32, t, dst, opset=21)
        x = finite.astype(np.float32)
        np.testing.assert_array_equal(run_ortlite(m, {"x": x})[0], run_ort(m, {"x": x})[0])
    if t in (TP.FLOAT8E4M3FN, TP.FLOAT8E5M2):
        neg_zero = np.array([-0.0], np.float32).astype(ML[t])
        assert not run_ortlite(cast_model(t, np.bool_), {"x": neg_zero})[0][0]


# ---- float8e8m0 ----------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [1, 0])
def test_float_to_float8e8m0_matches_reference(mode, saturate):
    rng = np.random.default_rng(3)
    x = np.concatenate([
        np.array([0.0, 1.0, 1.5, 1.25, 1.75, 3.0, 0.124, 2.0 ** 127, 3.4e38, 2.0 ** -127,
                  2.0 ** -126, 1e-45, 1e-39, np.nan, 8.0, 0.75], np.float32),
        (rng.random(2000) * 10.0 ** rng.integers(-40, 38, 2000)).astype(np.float32)])
    m = cast_model(np.float32, TP.FLOAT8E8M0, saturate=saturate, round_mode=mode)
    got = run_ortlite(m, {"x": x})[0]
    same_bits(got, reference(m, {"x": x}))
    inf = np.array([np.inf, -np.inf, 0.0], np.float32)
    same_bits(run_ortlite(m, {"x": inf})[0], reference(m, {"x": inf}))


def test_float8e8m0_round_trip_and_defaults():
    codes = all_codes(TP.FLOAT8E8M0)
    back = run_ortlite(cast_model(TP.FLOAT8E8M0, np.float32), {"x": codes})[0]
    # "down": 2^-127 is a float32 subnormal, which "up" moves to 2^-126 (as onnx.reference).
    again = run_ortlite(cast_model(np.float32, TP.FLOAT8E8M0, round_mode="down"), {"x": back})[0]
    same_bits(again, codes)
    # round_mode defaults to "up", saturate to 1.
    x = np.array([3.0, 2.0 ** 127 * 1.5, 5.0], np.float32)
    got = run_ortlite(cast_model(np.float32, TP.FLOAT8E8M0), {"x": x})[0]
    np.testing.assert_array_equal(got.astype(np.float32), [4.0, 2.0 ** 127, 8.0])


# ---- float4e2m1 ----------------------------------------------------------------------------

def test_float_to_float4_matches_reference_except_nan():
    x = float_samples()
    m = cast_model(np.float32, TP.FLOAT4E2M1)
    got = run_ortlite(m, {"x": x})[0]
    finite = ~np.isnan(x)
    same_bits(got[finite], reference(m, {"x": x})[finite])
    # NaN -> +6 (ONNX's float4 specification; ml_dtypes, behind onnx.reference, gives -0).
    np.testing.assert_array_equal(got[~finite].view(np.uint8), 0x7)
    # saturate does not apply: float4 has no infinity or NaN.
    big = np.array([7.0, -100.0, np.inf], np.float32)
    nosat = run_ortlite(cast_model(np.float32, TP.FLOAT4E2M1, saturate=0), {"x": big})[0]
    np.testing.assert_array_equal(nosat.astype(np.float32), [6, -6, 6])


# ---- int4 / uint4 / int2 / uint2 -------------------------------------------------------------

@pytest.mark.parametrize("t", [TP.INT4, TP.UINT4], ids=tid)
def test_integers_to_int4_match_onnxruntime(t):
    for src, x in [(np.int32, np.arange(-40, 40, dtype=np.int32)),
                   (np.int64, np.array([2 ** 40 + 3, -2 ** 40 - 1, 17, -17], np.int64)),
                   (np.uint8, np.arange(256, dtype=np.uint8)),
                   (np.bool_, np.array([True, False])),
                   (np.float32, np.array([-9.75, -8.2, -1.2, 0.3, 3.9, 7.1, 15.8, 16.2, 1e10,
                                          np.nan, np.inf], np.float32))]:
        m = chain_model(src, t, np.int32)
        np.testing.assert_array_equal(run_ortlite(m, {"x": x})[0], run_ort(m, {"x": x})[0])


@pytest.mark.parametrize("t", NARROW_INT, ids=tid)
def test_float_to_narrow_int_rounds_half_to_even(t):
    # ONNX's int4 specification: round to the nearest integer, ties to even, then keep the
    # low bits. (onnxruntime 1.23 rounds ties away from zero, onnx.reference truncates.)
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 6.5, 7.5, 1.49, -1.51], np.float32)
    rounded = np.array([0, 2, 2, 0, -2, -2, 6, 8, 1, -2])
    bits = BITS[t]
    low = rounded & ((1 << bits) - 1)
    signed = t in (TP.INT4, TP.INT2)
    want = np.where(signed & (low >= 1 << (bits - 1)), low - (1 << bits), low)
    for src in (np.float32, np.float64, np.float16):
        got = run_ortlite(cast_model(src, t), {"x": x.astype(src)})[0]
        assert got.dtype == ML[t]
        np.testing.assert_array_equal(got.astype(np.int32), want)


@pytest.mark.parametrize("t", NARROW_INT, ids=tid)
def test_narrow_int_matches_reference_on_integers(t):
    x = np.arange(-20, 20, dtype=np.int64)
    for src in (np.int64, np.int8):
        m = cast_model(src, t)
        xs = x.astype(src)
        same_bits(run_ortlite(m, {"x": xs})[0], reference(m, {"x": xs}))
    # From float, onnx.reference casts with ml_dtypes, whose out-of-range results changed
    # between versions (0.5-0.6 keep the low bits, 0.7 gives 0): compare with it inside
    # the type's range only, and everywhere with the specification's result (round, then
    # keep the low bits, as from an integer).
    bits = BITS[t]
    signed = t in (TP.INT4, TP.INT2)
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    xf = x.astype(np.float32)
    m = cast_model(np.float32, t)
    got = run_ortlite(m, {"x": xf})[0]
    inside = (x >= lo) & (x <= hi)
    same_bits(got[inside], reference(m, {"x": xf[inside]}))
    low = x & ((1 << bits) - 1)
    want = np.where(signed & (low > hi), low - (1 << bits), low)
    assert got.dtype == ML[t]
    np.testing.assert_array_equal(got.astype(np.int64), want)
    codes = all_codes(t)
    for dst in (np.int8, np.uint8, np.int64, np.float32, np.float16, np.bool_):
        got = run_ortlite(cast_model(t, dst), {"x": codes})[0]
        np.testing.assert_array_equal(got, reference(cast_model(t, dst), {"x": codes}))


def test_narrow_to_narrow_and_round_trips():
    for t in NARROW:
        codes = all_codes(t)
        values = run_ortlite(cast_model(t, np.float32), {"x": codes})[0]
        mode = {"round_mode": "down"} if t == TP.FLOAT8E8M0 else {}
        back = run_ortlite(cast_model(np.float32, t, saturate=0, **mode), {"x": values})[0]
        if t == TP.FLOAT8E5M2:
            # Its NaN codes collapse into one.
            keep = ~np.isnan(values)
            same_bits(back[keep], codes[keep])
            assert np.isnan(back[~keep].astype(np.float32)).all()
        else:
            same_bits(back, codes)
    # Across narrow types: through the value, with the target's rounding.
    x = all_codes(TP.FLOAT8E4M3FN)
    for to in [TP.FLOAT8E5M2, TP.FLOAT4E2M1, TP.INT4, TP.UINT2, TP.FLOAT8E8M0]:
        got = run_ortlite(cast_model(TP.FLOAT8E4M3FN, to), {"x": x})[0]
        via = run_ortlite(cast_model(np.float32, to), {"x": x.astype(np.float32)})[0]
        same_bits(got, via)


def test_strings():
    s = np.array(["1.5", "-448", "1e9", "nan", "3"], object)
    got = run_ortlite(cast_model(object, TP.FLOAT8E4M3FN), {"x": s})[0]
    same_bits(got, numpy_helper.saturate_cast(s.astype(np.float32),
                                              np.dtype(ml_dtypes.float8_e4m3fn)))
    got = run_ortlite(cast_model(object, TP.INT4), {"x": np.array(["7", "-8", "9"], object)})[0]
    np.testing.assert_array_equal(got.astype(np.int32), [7, -8, -7])
    out = run_ortlite(cast_model(TP.INT4, object), {"x": np.array([-8, 7], ml_dtypes.int4)})[0]
    np.testing.assert_array_equal(out, np.array(["-8", "7"], object))
    out = run_ortlite(cast_model(TP.FLOAT8E5M2, object),
                      {"x": np.array([1.5, -57344, np.inf], ml_dtypes.float8_e5m2)})[0]
    np.testing.assert_array_equal(out, np.array(["1.5", "-57344", "INF"], object))
    with pytest.raises(ortlite.InvalidArgument, match="'abc'.*float8e5m2"):
        run_ortlite(cast_model(object, TP.FLOAT8E5M2), {"x": np.array(["abc"], object)})


def test_castlike():
    node = helper.make_node("CastLike", ["x", "t"], ["y"], saturate=0)
    m = make_model([node], [("x", TP.FLOAT, None), ("t", TP.FLOAT8E4M3FN, None)],
                   [("y", TP.FLOAT8E4M3FN, None)], opset=25)
    x = np.array([1.0, 500.0, -3.3], np.float32)
    got = run_ortlite(m, {"x": x, "t": np.zeros(1, ml_dtypes.float8_e4m3fn)})[0]
    same_bits(got, reference(m, {"x": x, "t": np.zeros(1, ml_dtypes.float8_e4m3fn)}))
    assert np.isnan(got[1].astype(np.float32))


# ---- packed tensors in the model -----------------------------------------------------------

@pytest.mark.parametrize("t", NARROW, ids=tid)
def test_initializers_raw_and_typed(t):
    rng = np.random.default_rng(int(t))
    for n in (1, 4, 7):
        codes = rng.integers(0, 1 << BITS.get(t, 8), n, dtype=np.uint8)
        arr = codes.view(ML[t])
        raw = numpy_helper.from_array(arr, "w")
        typed = helper.make_tensor("w", t, [n], arr.astype(np.float32).tolist(), raw=False)
        for tensor in (raw, typed):
            node = helper.make_node("Identity", ["w"], ["y"])
            m = make_model([node], [], [("y", t, None)], initializers=[tensor], opset=25)
            got = run_ortlite(m, {})[0]
            want = numpy_helper.to_array(tensor)
            if t == TP.FLOAT8E5M2:  # make_tensor turns NaN codes into one NaN
                keep = ~np.isnan(want.astype(np.float32))
                got, want = got[keep], want[keep]
            same_bits(got, want)


def test_external_data_packed(tmp_path):
    w = np.array([1, -2, 3, -8, 7, 0, 5], ml_dtypes.int4)
    tensor = numpy_helper.from_array(w, "w")
    node = helper.make_node("Identity", ["w"], ["y"])
    m = make_model([node], [], [("y", TP.INT4, None)], initializers=[tensor], opset=25)
    path = str(tmp_path / "m.onnx")
    onnx.save_model(m, path, save_as_external_data=True, location="w.bin",
                    size_threshold=0)
    assert os.path.getsize(tmp_path / "w.bin") == 4  # packed: ceil(7 / 2)
    got = ortlite.InferenceSession(path).run(None, {})[0]
    same_bits(got, w)


def test_packed_size_errors():
    bad = TP(name="w", data_type=TP.INT4, dims=[5], raw_data=b"\x01\x02")  # needs 3 bytes
    node = helper.make_node("Identity", ["w"], ["y"])
    m = make_model([node], [], [("y", TP.INT4, None)], initializers=[bad], opset=25)
    with pytest.raises(ortlite.InvalidGraph, match="raw_data holds 2 bytes.*int4 need 3"):
        ortlite.InferenceSession(m.SerializeToString())
    bad = helper.make_tensor("w", TP.UINT2, [5], [1, 2, 3, 0, 1], raw=False)
    del bad.int32_data[1:]  # 5 elements need 2 packed values
    m = make_model([node], [], [("y", TP.UINT2, None)], initializers=[bad], opset=25)
    with pytest.raises(ortlite.InvalidGraph, match="1 values in int32_data.*need 2"):
        ortlite.InferenceSession(m.SerializeToString())


# ---- data movement kernels at opsets 24-27 ---------------------------------------------------

@pytest.mark.parametrize("t", [TP.FLOAT8E8M0, TP.INT2, TP.INT4, TP.FLOAT4E2M1, TP.FLOAT8E5M2],
                         ids=tid)
def test_shape_kernels_move_narrow_elements(t):
    x = all_codes(t)[:12].reshape(3, 4) if BITS.get(t, 8) == 8 else \
        np.resize(all_codes(t), 12).reshape(3, 4)
    shape = numpy_helper.from_array(np.array([4, 3], np.int64), "s")
    axes = numpy_helper.from_array(np.array([0], np.int64), "ax")
    pads = numpy_helper.from_array(np.array([1, 0, 0, 1], np.int64), "p")
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]),
             helper.make_node("Transpose", ["x"], ["tr"], perm=[1, 0]),
             helper.make_node("Concat", ["x", "x"], ["c"], axis=1),
             helper.make_node("Unsqueeze", ["x", "ax"], ["u"]),
             helper.make_node("Flatten", ["u"], ["f"], axis=0),
             helper.make_node("Pad", ["x", "p"], ["pd"], mode="edge"),
             helper.make_node("Identity", ["x"], ["i"]),
             helper.make_node("Shape", ["x"], ["sh"]),
             helper.make_node("Size", ["x"], ["sz"])]
    outs = [(n, t, None) for n in ("r", "tr", "c", "u", "f", "pd", "i")]
    outs += [("sh", TP.INT64, None), ("sz", TP.INT64, None)]
    for opset in (24, 25, 27):
        if t in (TP.INT2,) and opset < 25:
            continue
        m = make_model(nodes, [("x", t, [3, 4])], outs, initializers=[shape, axes, pads],
                       opset=opset)
        got = run_ortlite(m, {"x": x})
        want = [x.reshape(4, 3), x.T, np.concatenate([x, x], 1), x[None], x.reshape(1, 12),
                np.pad(x.view(np.uint8), [(1, 0), (0, 1)], mode="edge").view(x.dtype), x,
                np.array([3, 4]), np.array(12)]
        for g, w in zip(got[:7], want[:7]):
            same_bits(g, np.ascontiguousarray(w))
        np.testing.assert_array_equal(got[7], want[7])
        np.testing.assert_array_equal(got[8], want[8])


def test_constant_and_constant_of_shape():
    v = numpy_helper.from_array(np.array([1.5, -6], ml_dtypes.float4_e2m1fn), "v")
    one = numpy_helper.from_array(np.array([-3], ml_dtypes.int4), "one")
    nodes = [helper.make_node("Constant", [], ["c"], value=v),
             helper.make_node("ConstantOfShape", ["s"], ["f"], value=one)]
    m = make_model(nodes, [("s", TP.INT64, [2])], [("c", TP.FLOAT4E2M1, None),
                                                   ("f", TP.INT4, None)], opset=25)
    c, f = run_ortlite(m, {"s": np.array([2, 3], np.int64)})
    same_bits(c, np.array([1.5, -6], ml_dtypes.float4_e2m1fn))
    same_bits(f, np.full((2, 3), -3, ml_dtypes.int4))
    # ConstantOfShape allows float8 / int4 values from opset 21 only.
    m = make_model(nodes[1:], [("s", TP.INT64, [2])], [("f", TP.INT4, None)], opset=20)
    with pytest.raises(ortlite.NotImplemented, match="int4 is not supported at opset 20"):
        ortlite.InferenceSession(m.SerializeToString())


def test_range_float16_and_bfloat16_at_opset_27():
    for dt in (np.float16, ml_dtypes.bfloat16):
        for stash in (None, 1, 11):
            attrs = {} if stash is None else {"stash_type": stash}
            node = helper.make_node("Range", ["a", "b", "c"], ["y"], **attrs)
            t = elem(dt) if dt is np.float16 else TP.BFLOAT16
            m = make_model([node], [(n, t, []) for n in "abc"], [("y", t, None)], opset=27)
            feeds = {"a": np.array(1000, dt), "b": np.array(1100, dt), "c": np.array(3.5, dt)}
            got = run_ortlite(m, feeds)[0]
            np.testing.assert_array_equal(got, reference(m, feeds))
    node = helper.make_node("Range", ["a", "b", "c"], ["y"], stash_type=10)
    m = make_model([node], [(n, TP.FLOAT16, []) for n in "abc"], [("y", TP.FLOAT16, None)],
                   opset=27)
    with pytest.raises(ortlite.InvalidGraph, match="stash_type"):
        ortlite.InferenceSession(m.SerializeToString())
    node = helper.make_node("Range", ["a", "b", "c"], ["y"])
    m = make_model([node], [(n, TP.FLOAT16, []) for n in "abc"], [("y", TP.FLOAT16, None)],
                   opset=23)
    one = np.array(1, np.float16)
    with pytest.raises(ortlite.NotImplemented, match="float16.*from opset 27"):
        run_ortlite(m, {"a": one, "b": one, "c": one})


def test_tensor_kernels_cover_opsets_24_to_27():
    """The tensor kernels are registered up to opset 27 because opsets 24-27 changed these
    operators only by new element types, besides the attributes their kernels read (Cast's
    round_mode, Range's stash_type): this checks both against the onnx schemas."""
    regs = {}
    for domain, op, since, until, provider in ortlite._ortlite._registered_ops():
        if domain == "" and provider == "CPUExecutionProvider":
            regs.setdefault(op, []).append((since, until))
    handled = {("Cast", "round_mode"), ("CastLike", "round_mode"), ("Range", "stash_type")}
    ops = ["Cast", "CastLike", "Constant", "ConstantOfShape", "Reshape", "Flatten", "Squeeze",
           "Unsqueeze", "Identity", "Transpose", "Pad", "Shape", "Size", "Range", "Concat",
           "Gather", "Slice", "Split", "Expand", "Tile"]
    for op in ops:
        for opset in range(24, 28):
            assert any(s <= opset <= u for s, u in regs[op]), f"{op}: no kernel at {opset}"
            schema = defs.get_schema(op, opset)
            if schema.since_version != opset:
                continue
            prev = defs.get_schema(op, opset - 1)
            new_attrs = set(schema.attributes) - set(prev.attributes)
            assert all((op, a) in handled for a in new_attrs), (op, opset, new_attrs)
            assert [i.name for i in schema.inputs] == [i.name for i in prev.inputs], (op, opset)
            assert [o.name for o in schema.outputs] == [o.name for o in prev.outputs]


# ---- errors ----------------------------------------------------------------------------------

def test_narrow_type_before_its_opset_is_invalid():
    for to, opset, since in [(TP.FLOAT8E4M3FN, 13, 19), (TP.INT4, 19, 21),
                             (TP.FLOAT4E2M1, 21, 23), (TP.FLOAT8E8M0, 23, 24),
                             (TP.INT2, 24, 25)]:
        m = cast_model(np.float32, to, opset=opset)
        with pytest.raises(ortlite.InvalidGraph, match=f"{tid(to)} needs opset {since}"):
            ortlite.InferenceSession(m.SerializeToString())
    node = helper.make_node("CastLike", ["x", "t"], ["y"])
    m = make_model([node], [("x", TP.FLOAT, None), ("t", TP.INT4, None)],
                   [("y", TP.INT4, None)], opset=19)
    with pytest.raises(ortlite.InvalidGraph, match="target_type: element type int4 needs opset"):
        run_ortlite(m, {"x": np.ones(2, np.float32), "t": np.zeros(1, ml_dtypes.int4)})


def test_bad_attributes():
    m = cast_model(np.float32, TP.FLOAT8E8M0, round_mode="sideways")
    with pytest.raises(ortlite.InvalidGraph, match="round_mode.*sideways"):
        ortlite.InferenceSession(m.SerializeToString())
    m = cast_model(np.float32, TP.FLOAT8E4M3FN, saturate=2)
    with pytest.raises(ortlite.InvalidGraph, match="saturate"):
        ortlite.InferenceSession(m.SerializeToString())


def test_arithmetic_on_narrow_types_is_not_implemented():
    node = helper.make_node("Add", ["a", "b"], ["y"])
    m = make_model([node], [("a", TP.INT4, None), ("b", TP.INT4, None)], [("y", TP.INT4, None)],
                   opset=21)
    x = np.array([1, 2], ml_dtypes.int4)
    with pytest.raises(ortlite.NotImplemented, match="int4"):
        run_ortlite(m, {"a": x, "b": x})


# ---- numpy bridge ----------------------------------------------------------------------------

def test_feeds_outputs_and_ortvalues():
    m = cast_model(TP.FLOAT8E4M3FN, TP.FLOAT8E4M3FN)  # Cast to the same type copies
    sess = ortlite.InferenceSession(m.SerializeToString())
    assert sess.get_inputs()[0].type == "tensor(float8e4m3fn)"
    x = np.array([1.5, -448, 0.125], ml_dtypes.float8_e4m3fn)
    y = sess.run(None, {"x": x})[0]
    same_bits(y, x)
    with pytest.raises(ortlite.InvalidArgument, match=r"Actual: \(tensor\(uint8\)\)"):
        sess.run(None, {"x": x.view(np.uint8)})
    # Lists are converted with the declared type.
    same_bits(sess.run(None, {"x": [1.5, -448.0, 0.125]})[0], x)
    ov = ortlite.OrtValue.ortvalue_from_numpy(x)
    assert ov.data_type() == "tensor(float8e4m3fn)" and ov.element_type() == TP.FLOAT8E4M3FN
    same_bits(ov.numpy(), x)
    z = ortlite.OrtValue.ortvalue_from_shape_and_type([2, 3], TP.INT4)
    assert z.data_type() == "tensor(int4)" and z.shape() == [2, 3]
    same_bits(z.numpy(), np.zeros((2, 3), ml_dtypes.int4))
    z = ortlite.OrtValue.ortvalue_from_shape_and_type([2], ml_dtypes.float8_e8m0fnu)
    assert z.element_type() == TP.FLOAT8E8M0
    # bfloat16 uses ml_dtypes too.
    b = run_ortlite(cast_model(np.float32, TP.BFLOAT16), {"x": np.array([1.0, 3.14159],
                                                                       np.float32)})[0]
    same_bits(b, np.array([1.0, 3.14159], np.float32).astype(ml_dtypes.bfloat16))


def test_node_arg_types_match_onnxruntime():
    for t in (TP.FLOAT8E4M3FN, TP.FLOAT8E5M2FNUZ, TP.INT4, TP.UINT4):
        m = cast_model(t, np.float32, opset=21)
        import onnxruntime
        ort = onnxruntime.InferenceSession(m.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
        assert ortlite.InferenceSession(m.SerializeToString()).get_inputs()[0].type == \
            ort.get_inputs()[0].type


def test_ml_dtypes_version_is_the_one_under_test():
    # make test runs this file twice: with the lock's ml_dtypes and with the oldest one
    # pyproject.toml's ml-dtypes extra allows (ORTLITE_EXPECT_ML_DTYPES names it).
    expected = os.environ.get("ORTLITE_EXPECT_ML_DTYPES")
    lock = os.path.join(ROOT,
                        "requirements-lock.txt")
    if not expected:
        with open(lock) as f:
            pins = dict(line.strip().split("==") for line in f if "==" in line)
        expected = pins["ml_dtypes"]
    assert ml_dtypes.__version__ == expected


def test_without_ml_dtypes_narrow_outputs_raise_not_implemented(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(cast_model(np.float32, TP.INT4, opset=21).SerializeToString())
    code = (
        "import sys; sys.modules['ml_dtypes'] = None\n"
        "import numpy as np, ortlite\n"
        f"s = ortlite.InferenceSession({str(path)!r})\n"
        "print(s.run(None, {'x': np.ones(2, np.float32)}))\n")
    env = subprocess_env()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "NotImplemented: " in out.stderr and "install ml_dtypes" in out.stderr, out.stderr
