"""The vectorized elementwise paths outside float32 arithmetic: float16 unary ops (through
F16C blocks, Sign on the float16 bits), float64 Sign / Floor / Ceil / Round / Sqrt / Tanh, float
and float16 Sin / Cos, float IsInf, int32 Div, float Mod (fmod=1), the float16 casts, double to
8/16-bit integer casts and per-tensor QuantizeLinear. Compared bit for bit with onnxruntime or
numpy where the operation is exact (or correctly rounded), within a stated ulp bound where it
is not; tiny, odd (tails of the vector loops) and large sizes, special values, 1 and 2
threads, and every instruction-set path of the map loops (ORTLITE_FAST_ISA, in a fresh
process)."""

import numpy as np
import pytest
from onnx import TensorProto

import helpers
from helpers import node_model, run_ort, session

F16, F32, F64 = np.float16, np.float32, np.float64
SIZES = [1, 15, 17, 1000, 100003]
THREADS = [1, 2]


def ortlite_run(model, feeds, threads=1):
    return session(model, threads=threads, options=True).run(None, feeds)[0]


def all_halves():
    """Every float16 bit pattern."""
    return np.arange(65536, dtype=np.uint32).astype(np.uint16).view(F16)


def resized(x, n):
    return np.resize(x, n)


def same_bits(a, b):
    """Equal bit for bit, any NaN equal to any NaN."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    if a.dtype.kind != "f":
        return np.array_equal(a, b)
    u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    nan = np.isnan(a) & np.isnan(b)
    return bool(np.all((a.view(u) == b.view(u)) | nan))


def first_diff(a, b):
    a, b = np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)
    with np.errstate(invalid="ignore"):
        bad = ~((a == b) | (np.isnan(a) & np.isnan(b))) if a.dtype.kind == "f" else a != b
    i = np.flatnonzero(bad)[:5]
    return i, a[i], b[i]


def ulps64(got, ref):
    """|got - ref| in float64 ulps (both float64, same sign or zero)."""
    gi = got.view(np.int64).astype(object)
    ri = ref.view(np.int64).astype(object)
    f = np.vectorize(lambda v: v if v >= 0 else -(v & 0x7FFFFFFFFFFFFFFF), otypes=[object])
    return np.abs(f(gi) - f(ri)).astype(np.float64)


def ulps32(got, ref64):
    """|got - ref| in float32 ulps of the float64 reference."""
    with np.errstate(over="ignore", invalid="ignore"):
        sp = np.maximum(np.spacing(np.abs(ref64).astype(F32)).astype(F64), 2.0 ** -149)
        return np.abs(got.astype(F64) - ref64) / sp


# ---- float16 unary ----------------------------------------------------------------------

# Exact operations: onnxruntime computes them in float and rounds once, as ortlite does.
@pytest.mark.parametrize("op", ["Floor", "Ceil", "Round", "Sqrt", "Sign", "Abs", "Neg"])
@pytest.mark.parametrize("threads", THREADS)
def test_float16_exact_unary_every_value(op, threads):
    x = all_halves()
    m = node_model(op, {"x": x}, ["y"])
    got = ortlite_run(m, {"x": x}, threads)
    want = run_ort(m, {"x": x})[0]
    if op == "Sign":
        # onnxruntime's float16 Sign gives 0 for NaN (its comparisons are all false);
        # ortlite keeps NaN, as both do for float and double.
        nan = np.isnan(x)
        assert np.isnan(got[nan]).all()
        got, want = got[~nan], want[~nan]
    assert same_bits(got, want), (op, first_diff(got, want))


@pytest.mark.parametrize("op", ["Floor", "Ceil", "Round", "Sign", "Sqrt"])
@pytest.mark.parametrize("n", SIZES)
def test_float16_exact_unary_sizes(op, n):
    r = np.random.default_rng(n)
    x = (r.standard_normal(n) * 100).astype(F16)
    x[: min(n, 8)] = np.array([0.5, -0.5, 1.5, 2.5, -2.5, -0.0, 6e-8, -6e-8], F16)[: min(n, 8)]
    if op == "Sqrt":
        x = np.abs(x)
    m = node_model(op, {"x": x}, ["y"])
    for t in THREADS:
        got = ortlite_run(m, {"x": x}, t)
        want = run_ort(m, {"x": x})[0]
        assert same_bits(got, want), (op, n, t, first_diff(got, want))


def test_float16_sign_special_bits():
    x = np.array([0x0000, 0x8000, 0x0001, 0x8001, 0x7C00, 0xFC00, 0x7C01, 0xFE05, 0x3C00,
                  0x7BFF], np.uint16).view(F16)
    got = ortlite_run(node_model("Sign", {"x": x}, ["y"]), {"x": x}).view(np.uint16)
    assert got.tolist() == [0, 0, 0x3C00, 0xBC00, 0x3C00, 0xBC00, 0x7E00, 0xFE00, 0x3C00, 0x3C00]


@pytest.mark.parametrize("op,f", [("Sin", np.sin), ("Cos", np.cos)])
@pytest.mark.parametrize("threads", THREADS)
def test_float16_sin_cos_every_value(op, f, threads):
    """Float results within 1 float ulp round to the correctly rounded float16 except where
    the exact value lies within that ulp of a float16 halfway point: allow 1 float16 ulp
    there, checked against the float64 reference."""
    x = all_halves()
    got = ortlite_run(node_model(op, {"x": x}, ["y"]), {"x": x}, threads)
    with np.errstate(invalid="ignore"):
        ref = f(x.astype(F64))
    want = ref.astype(F16)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    d = np.abs(got[ok].astype(F64) - want[ok].astype(F64))
    sp = np.spacing(np.abs(want[ok])).astype(F64)
    assert (d <= sp).all()
    assert (got[ok] == want[ok]).mean() > 0.9999


# ---- float64 unary ----------------------------------------------------------------------

_F64_SPECIAL = np.array([0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 0.49999999999999994,
                         4503599627370495.5, 4503599627370496.0, -4503599627370497.0, 1e300,
                         -1e300, 5e-324, -5e-324, 2.2250738585072014e-308, np.inf, -np.inf,
                         np.nan, -np.nan, 0.625, -0.625, 0.6249999999999999, 22.0, -22.0, 710.0,
                         1e-8, -1e-8], F64)


def f64_input(n, seed=0):
    r = np.random.default_rng(seed)
    x = r.standard_normal(n) * np.exp2(r.integers(-10, 12, n))
    k = min(n, len(_F64_SPECIAL))
    x[:k] = _F64_SPECIAL[:k]
    return x


def np_sign(x):
    with np.errstate(invalid="ignore"):
        return np.where(np.isnan(x), x, np.sign(x)) + 0.0  # np.sign(-0.0) is -0.0; ONNX: 0


@pytest.mark.parametrize("op,f", [("Floor", np.floor), ("Ceil", np.ceil), ("Round", np.round),
                                  ("Sqrt", np.sqrt), ("Sign", np_sign)])
@pytest.mark.parametrize("n", SIZES)
def test_float64_exact_unary(op, f, n):
    x = f64_input(n, n)
    if op == "Sqrt":
        x[np.isfinite(x)] = np.abs(x[np.isfinite(x)])
    m = node_model(op, {"x": x}, ["y"])
    with np.errstate(invalid="ignore"):
        want = f(x)
    for t in THREADS:
        got = ortlite_run(m, {"x": x}, t)
        assert same_bits(got, want), (op, n, t, first_diff(got, want))
        assert np.array_equal(np.isnan(got), np.isnan(want))


@pytest.mark.parametrize("n", SIZES)
def test_float64_tanh_within_2_ulp(n):
    r = np.random.default_rng(n)
    x = np.concatenate([r.standard_normal(n) * 3, r.uniform(0.6, 0.7, n),
                        np.linspace(-0.625, 0.625, 101), _F64_SPECIAL])
    m = node_model("Tanh", {"x": x}, ["y"])
    want = np.tanh(x)
    for t in THREADS:
        got = ortlite_run(m, {"x": x}, t)
        assert np.array_equal(np.isnan(got), np.isnan(want))
        ok = ~np.isnan(want)
        assert np.array_equal(np.signbit(got[ok]), np.signbit(want[ok]))  # tanh(-0) = -0
        # numpy's tanh is itself within 1 ulp: 3 against it bounds 2 against the exact value
        assert ulps64(np.abs(got[ok]), np.abs(want[ok])).max() <= 3
        # onnxruntime's own double tanh is up to 7 ulp from numpy's
        assert np.allclose(got[ok], run_ort(m, {"x": x})[0][ok], rtol=2e-15, atol=0)


# ---- float Sin / Cos --------------------------------------------------------------------

_TRIG_SPECIAL = np.array([0.0, -0.0, 1e-45, -1e-45, 1e-30, 1.0, -1.0, np.pi / 2, np.pi, 1e6,
                          -1e6, 1048575.9, 1048576.0, 1048577.0, 102943.75, 16777216.0, 1e30,
                          -1e30, 3.4e38, -3.4e38, np.inf, -np.inf, np.nan], F32)


def trig_input(n, seed=0):
    r = np.random.default_rng(seed)
    x = np.concatenate([r.standard_normal(n) * 10, r.uniform(-2e6, 2e6, n // 4 + 1),
                        (np.arange(-300, 300) * (np.pi / 2)), _TRIG_SPECIAL]).astype(F32)
    return x


@pytest.mark.parametrize("op,f", [("Sin", np.sin), ("Cos", np.cos)])
@pytest.mark.parametrize("n", SIZES)
def test_float_sin_cos_within_1_ulp(op, f, n):
    x = trig_input(n, n)
    m = node_model(op, {"x": x}, ["y"])
    with np.errstate(invalid="ignore"):
        ref = f(x.astype(F64))
    for t in THREADS:
        got = ortlite_run(m, {"x": x}, t)
        assert np.array_equal(np.isnan(got), np.isnan(ref)), x[np.isnan(got) != np.isnan(ref)]
        ok = ~np.isnan(ref)
        err = ulps32(got[ok], ref[ok])
        assert err.max() <= 1.0, (x[ok][err > 1][:5], got[ok][err > 1][:5])
        # nearly always the correctly rounded float
        assert (got[ok] == ref[ok].astype(F32)).mean() > 0.9999
    # sin(-0) = -0, cos(+-0) = 1
    z = np.array([0.0, -0.0], F32)
    got = ortlite_run(node_model(op, {"x": z}, ["y"]), {"x": z})
    if op == "Sin":
        assert np.signbit(got).tolist() == [False, True]
    else:
        assert got.tolist() == [1.0, 1.0]


# ---- float IsInf ------------------------------------------------------------------------

@pytest.mark.parametrize("neg,pos", [(1, 1), (1, 0), (0, 1), (0, 0)])
@pytest.mark.parametrize("n", SIZES)
def test_float_isinf(neg, pos, n):
    r = np.random.default_rng(n)
    x = r.standard_normal(n).astype(F32)
    sp = np.array([np.inf, -np.inf, np.nan, 3.4e38, -3.4e38, 0.0, -0.0, 1e-45], F32)
    x[r.integers(0, n, max(1, n // 7))] = r.choice(sp, max(1, n // 7))
    attrs = {"detect_negative": neg, "detect_positive": pos}
    m = node_model("IsInf", {"x": x}, ["y"], out_dtypes=[np.bool_], attrs=attrs)
    want = (np.isposinf(x) & bool(pos)) | (np.isneginf(x) & bool(neg))
    for t in THREADS:
        assert np.array_equal(ortlite_run(m, {"x": x}, t), want)


# ---- int32 Div --------------------------------------------------------------------------

def trunc_div32(a, b):
    a = a.astype(np.int64)
    b = b.astype(np.int64)
    safe = np.where(b == 0, 1, b)
    q = np.abs(a) // np.abs(safe)
    q = np.where((a < 0) != (safe < 0), -q, q)
    return np.where(b == 0, 0, q).astype(np.int32)  # INT_MIN / -1 wraps to INT_MIN


DIV_SHAPES = [((1, 255, 80, 80), (1, 255, 80, 80)), ((1, 3, 224, 224), (3, 1, 1)),
              ((8, 12, 16, 128), (8, 1, 1, 128)), ((4096, 33), (4096, 1)), ((64, 1000), (1000,)),
              ((1, 17, 1, 31), (5, 1, 9, 1)), ((7,), (7,)), ((1,), (17,)), ((33,), ()),
              ((), (33,)), ((100003,), (100003,)), ((300, 1), (300, 12)), ((300, 12), (300, 1)),
              ((50, 7, 3), (50, 1, 3))]


@pytest.mark.parametrize("sa,sb", DIV_SHAPES)
@pytest.mark.parametrize("kind", ["small", "full"])
def test_int32_div(sa, sb, kind):
    r = np.random.default_rng(len(sa) * 100 + len(sb))
    i32 = np.iinfo(np.int32)
    if kind == "small":  # the float path: |a|, |b| < 2^24
        a = r.integers(-(1 << 24) + 1, 1 << 24, sa).astype(np.int32)
        b = r.integers(-60, 60, sb).astype(np.int32)
    else:
        a = r.integers(i32.min, i32.max, sa, endpoint=True).astype(np.int32)
        b = r.integers(i32.min, i32.max, sb, endpoint=True).astype(np.int32)
        if b.ndim:
            b.flat[::3] = r.integers(-5, 6, b.flat[::3].shape)
            b.flat[::7] = -1
            b.flat[::11] = 0
        if a.ndim:
            a.flat[::5] = i32.min
            a.flat[::13] = i32.max
    m = node_model("Div", {"a": a, "b": b}, ["y"])
    shape = np.broadcast_shapes(sa, sb)
    want = trunc_div32(np.broadcast_to(a, shape), np.broadcast_to(b, shape))
    for t in THREADS:
        got = ortlite_run(m, {"a": a, "b": b}, t)
        assert np.array_equal(got, want), (sa, sb, kind, first_diff(got, want))
    if not (b == 0).any():
        assert np.array_equal(got, run_ort(m, {"a": a, "b": b})[0])


def test_int32_div_edges():
    i32 = np.iinfo(np.int32)
    a = np.array([i32.min, i32.min, i32.max, -7, 7, -7, 7, 0, 5, i32.min, 16777217, -16777217]
                 * 2, np.int32)
    b = np.array([-1, 1, -1, 2, -2, -2, 2, 0, 0, 0, 3, 3] * 2, np.int32)
    got = ortlite_run(node_model("Div", {"a": a, "b": b}, ["y"]), {"a": a, "b": b})
    assert got.tolist() == [i32.min, i32.min, -i32.max, -3, -3, 3, 3, 0, 0, 0, 5592405,
                            -5592405] * 2


# ---- float Mod (fmod) -------------------------------------------------------------------

_FMOD_SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.17549435e-38,
                          3.4e38, -3.4e38, 1.0, -1.0, 0.7, -0.7, 5e8, 6e8, 1e30, 7.0, -7.0, 0.5],
                         F32)


@pytest.mark.parametrize("sa,sb", [((1000000,), ()), ((100003,), (100003,)), ((15,), (15,)),
                                   ((1,), (1,)), ((64, 1000), (1000,)),
                                   ((1, 17, 1, 31), (5, 1, 9, 1)), ((), (40,))])
def test_float_fmod_exact(sa, sb):
    r = np.random.default_rng(sum(sa) + sum(sb))
    a = np.asarray(r.standard_normal(sa) * np.exp2(r.integers(-20, 40, sa))).astype(F32)
    b = np.asarray(r.standard_normal(sb) * np.exp2(r.integers(-10, 10, sb))).astype(F32)
    if not sb:
        b = np.array(0.7, F32)
    if a.size >= len(_FMOD_SPECIAL):
        a.flat[: len(_FMOD_SPECIAL)] = _FMOD_SPECIAL
    if b.size >= 40:
        b.flat[:40] = np.resize(_FMOD_SPECIAL, 40)[::-1]
    m = node_model("Mod", {"a": a, "b": b}, ["y"], attrs={"fmod": 1})
    shape = np.broadcast_shapes(sa, sb)
    with np.errstate(invalid="ignore"):
        want = np.fmod(np.broadcast_to(a, shape), np.broadcast_to(b, shape))
    for t in THREADS:
        got = ortlite_run(m, {"a": a, "b": b}, t)
        assert same_bits(got, want), first_diff(got, want)  # zero results keep a's sign
    assert same_bits(got, run_ort(m, {"a": a, "b": b})[0])


# ---- Cast -------------------------------------------------------------------------------

def cast_source(dt, n, seed=0):
    r = np.random.default_rng(seed)
    if dt == F16:
        return resized(all_halves(), n)
    if dt == F32:
        with np.errstate(over="ignore"):
            x = np.concatenate([all_halves().astype(F32), (r.standard_normal(n) * np.exp2(
                r.integers(-30, 20, n))).astype(F32)])
        return r.permutation(x)[:n]
    if dt == F64:
        x = r.standard_normal(n) * np.exp2(r.integers(-30, 20, n))
        # just above float16 halfway points: rounding straight from double would go up,
        # through float (as onnxruntime does) the float is the halfway point and ties to even
        h = np.arange(1, 31745, dtype=np.uint32).astype(np.uint16).view(F16)
        with np.errstate(over="ignore"):
            nxt = np.nextafter(h, F16(np.inf))
        mid = (h.astype(F64) + nxt.astype(F64)) / 2
        mid = mid + np.abs(mid) * 2.0 ** -30
        k = min(n, len(mid))
        x[:k] = mid[:k]
        sp = np.array([np.nan, np.inf, -np.inf, -0.0, 65504, 65520, 65519.99, 1e300, -1e300,
                       255.9, -1.5, 300, -300, 2.0 ** 31, -2.0 ** 31 - 1, 2.0 ** -25,
                       2.0 ** -25 * (1 + 2.0 ** -40)])
        if n > k + len(sp):
            x[k:k + len(sp)] = sp
        return x
    if dt == np.bool_:
        return r.random(n) > 0.5
    info = np.iinfo(dt)
    return r.integers(info.min, info.max, n, dtype=dt, endpoint=True)


CAST_PAIRS = [(F64, F16), (F16, np.int64), (F16, np.uint8), (np.uint8, F16), (F16, F64),
              (F16, np.int32), (np.int64, F16), (np.int32, F16), (F64, np.uint8), (np.bool_, F16),
              (F64, np.int8), (F64, np.int16), (F64, np.uint16), (F16, np.int8),
              (F16, np.int16), (F16, np.uint16), (F16, np.bool_), (F16, F32), (F32, F16),
              (F64, np.bool_), (F64, np.int32), (F64, np.int64), (F64, F32), (F32, np.bool_),
              (F32, np.uint8), (F32, np.int8)]


@pytest.mark.parametrize("src,dst", CAST_PAIRS)
@pytest.mark.parametrize("n", [1, 15, 17, 70000])
def test_cast_matches_onnxruntime(src, dst, n):
    x = cast_source(src, n, n)
    m = node_model("Cast", {"x": x}, ["y"], out_dtypes=[np.dtype(dst)],
                   attrs={"to": helpers.onnx_type(dst)})
    want = run_ort(m, {"x": x})[0]
    for t in THREADS:
        got = ortlite_run(m, {"x": x}, t)
        assert same_bits(got, want), (src, dst, n, first_diff(got, want))


@pytest.mark.parametrize("src", [np.int8, np.int16, np.uint16, np.uint32])
def test_cast_small_ints_to_float16(src):
    """Types onnxruntime's Cast does not take to float16 here: numpy (int -> float -> half)."""
    x = cast_source(src, 70001, 3)
    m = node_model("Cast", {"x": x}, ["y"], out_dtypes=[np.dtype(F16)],
                   attrs={"to": TensorProto.FLOAT16})
    with np.errstate(over="ignore"):
        want = x.astype(F32).astype(F16)
    assert same_bits(ortlite_run(m, {"x": x}, 2), want)


# ---- QuantizeLinear ---------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(1, 64, 80, 80), (100003,), (17,), (1,), (1, 3, 224, 224)])
@pytest.mark.parametrize("qt,zp", [(np.uint8, 128), (np.int8, -3), (np.uint8, 0), (np.int8, 0)])
def test_quantize_per_tensor_float(shape, qt, zp):
    r = np.random.default_rng(sum(shape))
    x = (r.standard_normal(shape) * 3).astype(F32)
    flat = x.reshape(-1)
    sp = np.array([np.nan, np.inf, -np.inf, -0.0, 0.01, 0.03, -0.01, -0.03, 2.55, -2.57, 1e10,
                   -1e10], F32)
    k = min(flat.size, len(sp))
    flat[:k] = sp[:k]
    # exact halves of the scale: x / s lands on .5 (ties to even)
    m2 = min(flat.size - k, 1000)
    flat[k:k + m2] = (np.arange(m2) * 0.5 - 250).astype(F32) * F32(0.02)
    consts = {"s": np.array(0.02, F32), "z": np.array(zp, qt)}
    m = node_model("QuantizeLinear", {"x": x}, ["y"], out_dtypes=[np.dtype(qt)], consts=consts,
                   opset=19)
    want = run_ort(m, {"x": x})[0]
    for t in THREADS:
        got = ortlite_run(m, {"x": x}, t)
        assert np.array_equal(got, want), first_diff(got, want)


# ---- every instruction-set path of the map loops ----------------------------------------



def test_map_loops_same_on_every_isa(tmp_path):
    """The map loops (FMA contraction off) give the same bits on the SSE2, AVX2 and AVX-512
    paths: Sin / Cos (float, float16), and the float64 Tanh, Sigmoid, Sign, Floor, Ceil and
    Round."""
    feeds = {}
    x = trig_input(3000, 1)
    for op in ("Sin", "Cos"):
        feeds[op + "_f"] = x
        with np.errstate(over="ignore"):
            feeds[op + "_h"] = x.astype(F16)
    d = np.concatenate([f64_input(3000, 2) * 3, np.random.default_rng(3).uniform(-1, 1, 2000)])
    for op in ("Tanh", "Sigmoid", "Sign", "Floor", "Ceil", "Round"):
        feeds[op + "_d"] = d
    outs = helpers.unary_outputs_per_isa(feeds, tmp_path)
    for key in outs["sse2"].files:
        for isa in ("avx2", "avx512"):
            assert same_bits(outs[isa][key], outs["sse2"][key]), (isa, key)


@pytest.mark.parametrize("threads", [1, 2])
def test_sigmoid_float64_vectorized(threads):
    """float64 Sigmoid through the vectorized exp: within 4 ulp of 1 / (1 + exp(-x)) (e^x / (1 +
    e^x) below 0) in numpy's double, +-inf to 1 and 0, NaN kept, +-0 to 0.5, large inputs to
    exactly 1 and to subnormal-or-zero values as numpy gives them."""
    x = np.concatenate([f64_input(5000, 7) * 4, np.linspace(-800, 800, 3201),
                        [np.inf, -np.inf, np.nan, 0.0, -0.0, 36.0, 37.5, -745.0, -709.0]])
    m = node_model("Sigmoid", {"x": x}, ["y"])
    got = helpers.run_lite(m, {"x": x}, threads)[0]
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(-np.abs(x))
        want = np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(x))
    ok = ~np.isnan(x)
    np.testing.assert_allclose(got[ok], want[ok], rtol=4 * np.finfo(np.float64).eps, atol=1e-320)
    assert got[-9] == 1.0 and got[-8] == 0.0 and got[-6] == 0.5 and got[-5] == 0.5
