"""Neg, Abs and Reciprocal through the map loops (AVX-512 / AVX2 clones and the baseline):
float64, float32 and the integers element by element, float16 Neg / Abs on the sign bit and
float16 Reciprocal through float blocks. All of these are exact (or correctly rounded) IEEE
operations, so they are compared bit for bit with numpy and onnxruntime: tiny, odd (tails of
the vector loops) and large sizes, special values (signed zeros, infinities, NaN of either
sign, subnormals, the most negative integers, whose negation wraps), 1 and 2 threads, and
every instruction-set path of the map loops (ORTLITE_FAST_ISA, in a fresh process). Float64
Exp (vectorized, fdlibm's method) within 2 ulp, with exact overflow / underflow / NaN.

Also the float16 rewrite's treatment of lone nodes (src/graph/fp16_rewrite.cc): a float16
unary node whose neighbours stay float16 runs its own float16 kernel (no Casts around it),
with the same bits as the float op rounded once to float16; chains are still converted.
Float16 Neg / Abs bits are checked with graph optimizations off as well."""

import numpy as np
import pytest

from onnx import TensorProto, helper, numpy_helper

import ortlite
import helpers
from helpers import make_model, node_model, node_ops, optimized_session, run_ort, session

F16, F32, F64 = np.float16, np.float32, np.float64
SIZES = [1, 15, 17, 1000, 100003]
THREADS = [1, 2]


def ortlite_run(model, feeds, threads=1):
    return session(model, threads=threads, options=True).run(None, feeds)[0]


def same_bits(a, b):
    """Equal bit for bit (NaN included: Neg / Abs keep the payload and set the sign)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    if a.dtype.kind != "f":
        return np.array_equal(a, b)
    u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    return np.array_equal(a.view(u), b.view(u))


def same_values(a, b):
    """Equal bit for bit except that any NaN matches any NaN."""
    a, b = np.asarray(a), np.asarray(b)
    u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    nan = np.isnan(a) & np.isnan(b)
    return bool(np.all((a.view(u) == b.view(u)) | nan)) and np.array_equal(np.isnan(a),
                                                                             np.isnan(b))


def float_input(dt, n, seed):
    r = np.random.default_rng(seed)
    with np.errstate(over="ignore"):  # float16: beyond 65504 becomes inf
        x = (r.standard_normal(n) * np.exp2(r.integers(-20, 20, n))).astype(dt)
    fi = np.finfo(dt)
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, fi.tiny, -fi.tiny,
                   fi.smallest_subnormal, -fi.smallest_subnormal, fi.max, -fi.max, 1.0, -1.0,
                   3.0, -7.0], dt)
    k = min(n, len(sp))
    x[:k] = sp[:k]
    return x


def int_input(dt, n, seed):
    r = np.random.default_rng(seed)
    ii = np.iinfo(dt)
    x = r.integers(ii.min, ii.max, n, dtype=dt, endpoint=True)
    sp = np.array([ii.min, ii.max, 0, -1, 1, ii.min + 1], dt)
    k = min(n, len(sp))
    x[:k] = sp[:k]
    return x


def np_reciprocal(x):
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        return (np.ones((), x.dtype) / x).astype(x.dtype)


def np_neg(x):
    if x.dtype.kind == "f":
        u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize]
        sign = u(1) << u(8 * x.dtype.itemsize - 1)
        return (x.view(u) ^ sign).view(x.dtype)
    return (np.zeros((), x.dtype) - x).astype(x.dtype)  # wraps at the minimum


def np_abs(x):
    if x.dtype.kind == "f":
        u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize]
        mask = ~(u(1) << u(8 * x.dtype.itemsize - 1))
        return (x.view(u) & mask).view(x.dtype)
    with np.errstate(over="ignore"):
        return np.abs(x)  # abs(min) wraps to min, as in onnxruntime


@pytest.mark.parametrize("dt", [F64, F32, F16])
@pytest.mark.parametrize("op,f", [("Neg", np_neg), ("Abs", np_abs)])
@pytest.mark.parametrize("n", SIZES)
def test_float_neg_abs_bits(dt, op, f, n):
    """Sign bit flipped / cleared, NaN payloads kept (as numpy and IEEE 754 do)."""
    x = float_input(dt, n, n)
    m = node_model(op, {"x": x}, ["y"])
    want = f(x)
    for t in THREADS:
        got = ortlite_run(m, {"x": x}, t)
        assert same_bits(got, want), (op, dt, n, t)
    got = ortlite_run(m, {"x": x})
    # onnxruntime agrees on every value (NaN compared as NaN)
    assert same_values(got, run_ort(m, {"x": x})[0])


OFF = ortlite.GraphOptimizationLevel.ORT_DISABLE_ALL


def all_halves():
    return np.arange(65536, dtype=np.uint32).astype(np.uint16).view(F16)


@pytest.mark.parametrize("level", [None, OFF])
def test_float16_neg_abs_every_value(level):
    """On the float16 bits: signalling NaNs stay signalling, payloads kept."""
    x = all_halves()
    for op, f in (("Neg", np_neg), ("Abs", np_abs)):
        m = node_model(op, {"x": x}, ["y"])
        for t in THREADS:
            so = ortlite.SessionOptions()
            so.intra_op_num_threads = t
            if level is not None:
                so.graph_optimization_level = level
            got = ortlite.InferenceSession(m.SerializeToString(), so).run(None, {"x": x})[0]
            assert same_bits(got, f(x)), (op, t, level)


@pytest.mark.parametrize("dt", [F64, F32, F16])
@pytest.mark.parametrize("n", SIZES)
def test_float_reciprocal(dt, n):
    x = float_input(dt, n, n + 1)
    m = node_model("Reciprocal", {"x": x}, ["y"])
    # float16: onnxruntime divides in float and rounds once to float16, like ortlite
    with np.errstate(over="ignore"):
        want = (np_reciprocal(x.astype(F32)).astype(F16) if dt == F16 else np_reciprocal(x))
    for t in THREADS:
        got = ortlite_run(m, {"x": x}, t)
        assert same_values(got, want), (dt, n, t)
    assert same_values(ortlite_run(m, {"x": x}), run_ort(m, {"x": x})[0])


@pytest.mark.parametrize("dt", [np.int64, np.int32, np.int16, np.int8])
@pytest.mark.parametrize("op,f", [("Neg", np_neg), ("Abs", np_abs)])
@pytest.mark.parametrize("n", SIZES)
def test_int_neg_abs(dt, op, f, n):
    x = int_input(dt, n, n)
    m = node_model(op, {"x": x}, ["y"])
    want = f(x)
    for t in THREADS:
        got = ortlite_run(m, {"x": x}, t)
        assert got.dtype == x.dtype and np.array_equal(got, want), (op, dt, n, t)
    if dt in (np.int64, np.int32):
        # onnxruntime (which wraps too) on the values without the minimum
        y = x[x != np.iinfo(dt).min]
        m2 = node_model(op, {"x": y}, ["y"])
        assert np.array_equal(ortlite_run(m2, {"x": y}), run_ort(m2, {"x": y})[0])


@pytest.mark.parametrize("dt", [np.uint64, np.uint32, np.uint8])
def test_unsigned_abs(dt):
    x = np.random.default_rng(0).integers(0, np.iinfo(dt).max, 1003, dtype=dt, endpoint=True)
    m = node_model("Abs", {"x": x}, ["y"])
    assert np.array_equal(ortlite_run(m, {"x": x}), x)


# ---- float64 Exp ------------------------------------------------------------------------

def exp_special():
    return np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 709.782712893384,
                     709.7827128933841, 710.0, -745.1332191019411, -745.1332191019412, -746.0,
                     -708.3964185322641, -708.4, -720.0, 1e-300, -1e-300, 5e-324, 1.0, -1.0,
                     0.34657359027997264, 1e308, -1e308], F64)


def ulps(got, ref):
    """|got - ref| in units of the spacing at ref (finite, nonzero ref)."""
    return np.abs(got - ref) / np.spacing(np.abs(ref))


@pytest.mark.parametrize("n", SIZES)
def test_float64_exp_within_2_ulp(n):
    """numpy's exp is within 1 ulp, so 1 against it bounds 2 against the exact value;
    overflow, underflow (subnormal results rounded once), NaN and the infinities exact."""
    r = np.random.default_rng(n)
    x = np.concatenate([r.uniform(-750, 712, n), r.standard_normal(n) * 5,
                        r.uniform(-745.2, -708, n), exp_special()])
    m = node_model("Exp", {"x": x}, ["y"])
    with np.errstate(all="ignore"):
        want = np.exp(x)
    for t in THREADS:
        got = ortlite_run(m, {"x": x}, t)
        assert np.array_equal(np.isnan(got), np.isnan(want))
        ok = ~np.isnan(want)
        exact = ok & ((want == 0) | np.isinf(want) | (want == 1))
        assert np.array_equal(got[exact], want[exact])
        rest = ok & ~exact
        assert ulps(got[rest], want[rest]).max() <= 1.0, (n, t)
    # onnxruntime's (Eigen's) double exp agrees to a few ulp on the normal range
    normal = ok & (want > 2.2250738585072014e-308) & np.isfinite(want)
    ref = run_ort(m, {"x": x})[0]
    assert np.allclose(got[normal], ref[normal], rtol=1e-15, atol=0)




def test_map_loops_same_on_every_isa(tmp_path):
    feeds = {}
    for dt in (F64, F32, F16):
        x = float_input(dt, 3000, 5)
        for op in ("Neg", "Abs", "Reciprocal"):
            feeds[f"{op}_{np.dtype(dt).name}"] = x
    r = np.random.default_rng(7)
    feeds["Exp_float64"] = np.concatenate([r.uniform(-750, 712, 3000), exp_special()])
    for dt in (np.int64, np.int32, np.int8):
        for op in ("Neg", "Abs"):
            feeds[f"{op}_{np.dtype(dt).name}"] = int_input(dt, 3000, 6)
    outs = helpers.unary_outputs_per_isa(feeds, tmp_path)
    for key in outs["sse2"].files:
        for isa in ("avx2", "avx512"):
            assert same_bits(outs[isa][key], outs["sse2"][key]), (isa, key)


# ---- float16 rewrite: lone nodes keep their float16 kernel ------------------------------

LONE_OPS = [("Relu", {}), ("LeakyRelu", {"alpha": 0.1}), ("HardSigmoid", {}), ("HardSwish", {}),
            ("Sigmoid", {}), ("Tanh", {}), ("Elu", {"alpha": 0.7}), ("Softplus", {}),
            ("Exp", {}), ("Erf", {}), ("Sin", {}), ("Cos", {}), ("Abs", {}), ("Neg", {}),
            ("Reciprocal", {}), ("Sqrt", {}), ("Log", {})]


def cast_op_cast_model(op, attrs):
    """float16 -> float -> op in float -> float16: what the rewrite made of a lone node."""
    nodes = [helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT),
             helper.make_node(op, ["xf"], ["yf"], **attrs),
             helper.make_node("Cast", ["yf"], ["y"], to=TensorProto.FLOAT16)]
    return make_model(nodes, [("x", TensorProto.FLOAT16, None)],
                      [("y", TensorProto.FLOAT16, None)])


@pytest.mark.parametrize("op,attrs", LONE_OPS)
def test_lone_float16_node_runs_float16_kernel_same_bits(op, attrs):
    """Every float16 input: the lone node (its float16 kernel, no Casts) gives the bits of
    the float op rounded to float16, as the rewritten node did (NaN as NaN)."""
    x = all_halves()
    lone = make_model([helper.make_node(op, ["x"], ["y"], **attrs)],
                      [("x", TensorProto.FLOAT16, None)], [("y", TensorProto.FLOAT16, None)])
    s = optimized_session(lone)
    assert node_ops(s) == [op], node_ops(s)
    with np.errstate(all="ignore"):
        got = s.run(None, {"x": x})[0]
        want = optimized_session(cast_op_cast_model(op, attrs)).run(None, {"x": x})[0]
    assert same_values(got, want), op
    for t in THREADS:
        x2 = np.resize(x[(x.view(np.uint16) & 0x7C00) != 0x7C00], 100003)
        so = ortlite.SessionOptions()
        so.intra_op_num_threads = t
        g2 = ortlite.InferenceSession(lone.SerializeToString(), so).run(None, {"x": x2})[0]
        assert same_values(g2, optimized_session(cast_op_cast_model(op, attrs)).run(
            None, {"x": x2})[0]), (op, t)


def fp16_graph(nodes, outputs=("y",), inputs=("x",)):
    return make_model(nodes, [(n, TensorProto.FLOAT16, None) for n in inputs],
                      [(n, TensorProto.FLOAT16, None) for n in outputs])


def test_chain_still_rewritten():
    """Relu -> Exp: converted together (one Cast in, one out), values as before."""
    m = fp16_graph([helper.make_node("Relu", ["x"], ["r"]),
                    helper.make_node("Exp", ["r"], ["y"])])
    s = optimized_session(m)
    assert node_ops(s).count("Cast") == 2, node_ops(s)
    x = (np.random.default_rng(0).standard_normal(1003) * 3).astype(F16)
    got = s.run(None, {"x": x})[0]
    want = np.exp(np.maximum(x.astype(F32), 0)).astype(F16)  # no float16 rounding between
    assert np.allclose(got.astype(F32), want.astype(F32), rtol=1e-3, atol=0)


def test_lone_next_to_converted_producer_is_converted():
    """A MatMul (always converted) feeding Relu: Relu reads the float value, so it stays in
    the float chain; a Relu fed by a graph input and read by Floor (never converted) is
    lone and keeps its float16 kernel."""
    w = np.random.default_rng(1).standard_normal((8, 8)).astype(F16)
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["h"]),
                    helper.make_node("Relu", ["h"], ["y"])],
                   [("x", TensorProto.FLOAT16, None)], [("y", TensorProto.FLOAT16, None)],
                   [numpy_helper.from_array(w, "w")])
    ops = node_ops(optimized_session(m))
    assert "Cast" in ops and ops.count("Cast") == 2, ops
    m2 = fp16_graph([helper.make_node("Relu", ["x"], ["r"]),
                     helper.make_node("Floor", ["r"], ["y"])])
    assert node_ops(optimized_session(m2)) == ["Relu", "Floor"]
    x = (np.random.default_rng(2).standard_normal(77) * 5).astype(F16)
    assert np.array_equal(optimized_session(m2).run(None, {"x": x})[0],
                          np.floor(np.maximum(x, F16(0))))


def test_lone_reader_of_converted_consumer_is_converted():
    """Abs read by Sigmoid (converted): the pair is a chain, converted together."""
    m = fp16_graph([helper.make_node("Abs", ["x"], ["a"]),
                    helper.make_node("Sigmoid", ["a"], ["y"])])
    ops = node_ops(optimized_session(m))
    assert ops.count("Cast") == 2 and "Abs" in ops and "Sigmoid" in ops, ops


def test_lone_node_after_float_cast_is_converted():
    """Relu of a float16 Cast of a float input: the Cast goes, Relu runs in float."""
    m = make_model([helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
                    helper.make_node("Relu", ["h"], ["y"])],
                   [("x", TensorProto.FLOAT, None)], [("y", TensorProto.FLOAT16, None)])
    ops = node_ops(optimized_session(m))
    assert ops.count("Cast") == 1, ops
    x = np.random.default_rng(3).standard_normal(50).astype(F32)
    got = optimized_session(m).run(None, {"x": x})[0]
    assert np.array_equal(got, np.maximum(x, 0).astype(F16))


@pytest.mark.parametrize("op", ["Sqrt", "Log"])
def test_float16_nan_results_are_quiet_canonical(op):
    """Float16 kernels write a NaN result as the quiet NaN 0x7e00 with its sign (as
    Float16::from_float does), also in the F16C blocks that hold NaN; the other lanes of
    those blocks are the correctly rounded float results."""
    x = all_halves()
    m = node_model(op, {"x": x}, ["y"])
    for t in THREADS:
        so = ortlite.SessionOptions()
        so.intra_op_num_threads = t
        so.graph_optimization_level = OFF
        got = ortlite.InferenceSession(m.SerializeToString(), so).run(None, {"x": x})[0]
        with np.errstate(all="ignore"):
            want = getattr(np, op.lower())(x.astype(F32)).astype(F16)
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(got), nan)
        assert (got.view(np.uint16)[nan] & 0x7FFF == 0x7E00).all()
        if op == "Sqrt":
            assert np.array_equal(got[~nan], want[~nan])
        else:  # fast log: infinities exact, the rest within a float16 ulp
            fin = np.isfinite(want)
            assert np.array_equal(got[~nan & ~fin], want[~nan & ~fin])
            d = np.abs(got[fin].astype(F64) - want[fin].astype(F64))
            assert (d <= np.spacing(np.abs(want[fin])).astype(F64)).all()
