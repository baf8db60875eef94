"""com.microsoft QOperator kernels (src/providers/cpu/quant): what onnxruntime's
quantize_static(quant_format=QOperator) and quantize_dynamic write (QLinearWhere with
ForceQuantizeNoInputCheck), and the com.microsoft QuantizeLinear / DequantizeLinear of
UseQDQContribOps, 4-bit types included. One-node models on seeded
data compared with onnxruntime's CPU kernels byte for byte (integer outputs) or to the last
bit (float outputs); bad inputs raise typed errors; the QOperator models of tools/tool_models.py
load and match."""

import os
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import NP_TO_ONNX, assert_same, int8_range, run_lite, run_ort

MS = "com.microsoft"
F32, U8, I8, I32 = np.float32, np.uint8, np.int8, np.int32
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build(op, inputs, out_type, attrs=None, consts=(), domain=MS):
    """One node with output Y. inputs: (name, array or None for an omitted input); names in
    `consts` become initializers."""
    names = [n if a is not None else "" for n, a in inputs]
    while names and not names[-1]:
        names.pop()
    node = helper.make_node(op, names, ["Y"], domain=domain, **(attrs or {}))
    arrays = {n: a for n, a in inputs if a is not None}
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, NP_TO_ONNX[a.dtype], list(a.shape))
         for n, a in arrays.items() if n not in consts],
        [helper.make_tensor_value_info("Y", NP_TO_ONNX[np.dtype(out_type)], None)],
        initializer=[numpy_helper.from_array(arrays[n], n) for n in consts if n in arrays])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(MS, 1)])
    model.ir_version = 8
    return model, {n: a for n, a in arrays.items() if n not in consts}


def check(op, inputs, out_type, attrs=None, consts=(), threads=None, **tol):
    model, feeds = build(op, inputs, out_type, attrs, consts)
    expected = run_ort(model, feeds)
    actual = run_lite(model, feeds, threads)
    assert_same(actual, expected, **(tol or dict(rtol=0, atol=0)))
    return actual[0]


def lite_error(op, inputs, out_type, attrs=None, consts=()):
    model, feeds = build(op, inputs, out_type, attrs, consts)
    with pytest.raises(ortlite.OrtliteError) as e:
        run_lite(model, feeds)
    return e.value


def qdata(dtype, shape, seed):
    # int8 within int8_range(): onnxruntime's u8 x s8 products saturate on CPUs without VNNI.
    rng = np.random.default_rng(seed)
    lo, hi = int8_range() if np.dtype(dtype) == np.int8 else (np.iinfo(dtype).min,
                                                               np.iinfo(dtype).max)
    return rng.integers(lo, hi + 1, size=shape).astype(dtype)


def zp(dtype, seed):
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    return np.array(rng.integers(info.min // 2, info.max // 2 + 1), dtype)


def scale(seed, lo=0.002, hi=0.05):
    return np.array(np.random.default_rng(seed).uniform(lo, hi), F32)


DTYPES = [U8, I8]

# (A shape, B shape): same shape, a [C,1,1] bias over NCHW, scalars either side, a rank
# mismatch, and a two-sided broadcast.
BINARY_SHAPES = [
    ((1, 16, 14, 14), (1, 16, 14, 14)),
    ((1, 16, 14, 14), (16, 1, 1)),
    ((16, 1, 1), (1, 16, 14, 14)),
    ((1, 16, 14, 14), ()),
    ((), (2, 3, 40)),
    ((1, 16, 14, 14), (1,)),
    ((2, 3, 5), (5,)),
    ((4, 1), (1, 5)),
    ((3, 1, 7), (3, 6, 1)),
    ((1, 20000), (1, 20000)),
]


# ---- QLinearAdd / QLinearMul --------------------------------------------------------------

@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
def test_binary_matches_onnxruntime(op, dtype, shapes):
    sa, sb = shapes
    for seed in range(3):
        hi = 0.2 if op == "QLinearMul" else 0.05
        check(op, [("A", qdata(dtype, sa, seed)), ("A_scale", scale(seed + 10)),
                   ("A_zero_point", zp(dtype, seed + 20)), ("B", qdata(dtype, sb, seed + 1)),
                   ("B_scale", scale(seed + 11)), ("B_zero_point", zp(dtype, seed + 21)),
                   ("C_scale", scale(seed + 12, 0.01, hi)),
                   ("C_zero_point", zp(dtype, seed + 22))],
              dtype, consts=("A_scale", "A_zero_point", "B_scale", "B_zero_point", "C_scale",
                             "C_zero_point"))


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_binary_every_value_pair_and_omitted_zero_points(op, dtype):
    info = np.iinfo(dtype)
    vals = np.arange(info.min, info.max + 1)
    a = np.repeat(vals, 256).astype(dtype)
    b = np.tile(vals, 256).astype(dtype)
    for seed in range(4):
        check(op, [("A", a), ("A_scale", scale(seed)), ("A_zero_point", zp(dtype, seed)),
                   ("B", b), ("B_scale", scale(seed + 1)), ("B_zero_point", zp(dtype, seed + 1)),
                   ("C_scale", scale(seed + 2, 0.01, 0.1)), ("C_zero_point", zp(dtype, seed + 2))],
              dtype, threads=2)
    # Omitted zero points are 0 (onnxruntime's own type inference rejects such a node, so
    # ortlite is compared with itself given explicit zeros).
    zero = np.array(0, dtype)
    common = [("A", a), ("A_scale", scale(5)), ("B", b), ("B_scale", scale(6)),
              ("C_scale", scale(7, 0.01, 0.1))]
    def run(with_zeros):
        z = zero if with_zeros else None
        ins = [common[0], common[1], ("A_zero_point", z), common[2], common[3],
               ("B_zero_point", z), common[4], ("C_zero_point", z)]
        model, feeds = build(op, ins, dtype)
        return run_lite(model, feeds)[0]
    np.testing.assert_array_equal(run(False), run(True))


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_binary_bad_inputs(op):
    a = qdata(U8, (2, 3), 0)
    good = [("A", a), ("A_scale", scale(0)), ("A_zero_point", zp(U8, 0)), ("B", a),
            ("B_scale", scale(1)), ("B_zero_point", zp(U8, 1)), ("C_scale", scale(2)),
            ("C_zero_point", zp(U8, 2))]
    bad_zp = list(good)
    bad_zp[2] = ("A_zero_point", np.array(3, I8))
    e = lite_error(op, bad_zp, U8)
    assert isinstance(e, ortlite.InvalidArgument) and "A_zero_point" in str(e)
    bad_shape = list(good)
    bad_shape[3] = ("B", qdata(U8, (2, 4), 1))
    e = lite_error(op, bad_shape, U8)
    assert isinstance(e, ortlite.InvalidArgument) and "broadcast" in str(e)
    per_axis = list(good)
    per_axis[4] = ("B_scale", np.array([0.1, 0.2], F32))
    e = lite_error(op, per_axis, U8)
    assert isinstance(e, ortlite.InvalidArgument) and "B_scale" in str(e)
    mixed = list(good)
    mixed[3] = ("B", qdata(I8, (2, 3), 1))
    assert isinstance(lite_error(op, mixed, U8), ortlite.InvalidArgument)


def qlinear_add_u16_reference(a, az, as_, b, bz, bs, cz, cs):
    """onnxruntime's uint16 QLinearAdd (MLAS's raw helper), in numpy float32 steps: each side
    a product of its difference, the sum divided by c_scale, clamped to [-c_zp, 65535 - c_zp],
    plus c_zp, rounded half to even."""
    f = np.float32
    va = f(as_) * (a.astype(np.int32) - int(az)).astype(f)
    vb = f(bs) * (b.astype(np.int32) - int(bz)).astype(f)
    v = (va + vb) / f(cs)
    v = np.clip(v, f(-int(cz)), f(65535 - int(cz)))
    return np.rint(v + f(int(cz))).astype(np.uint16)


@pytest.mark.parametrize("shapes", [((2, 3, 40), (2, 3, 40)), ((2, 3, 40), (40,)),
                                    ((), (2, 3, 40)), ((4, 1), (1, 5)), ((1, 20000), (1, 20000))],
                         ids=str)
def test_qlinear_add_uint16_against_the_formula(shapes):
    # onnxruntime registers a uint16 QLinearAdd kernel, but 1.23.2's operator schema refuses
    # uint16 at load (checked below), so the oracle is its arithmetic written in numpy.
    sa, sb = shapes
    rng = np.random.default_rng(3)
    a = rng.integers(0, 65536, size=sa).astype(np.uint16)
    b = rng.integers(0, 65536, size=sb).astype(np.uint16)
    for seed in range(3):
        az, bz, cz = (np.array(v, np.uint16) for v in rng.integers(0, 65536, 3))
        as_, bs, cs = scale(seed, 1e-5, 1e-3), scale(seed + 1, 1e-5, 1e-3), scale(seed + 2, 1e-5, 2e-3)
        model, feeds = build("QLinearAdd", [("A", a), ("A_scale", as_), ("A_zero_point", az),
                                            ("B", b), ("B_scale", bs), ("B_zero_point", bz),
                                            ("C_scale", cs), ("C_zero_point", cz)], np.uint16,
                             consts=("A_scale", "A_zero_point", "B_scale", "B_zero_point",
                                     "C_scale", "C_zero_point"))
        want = qlinear_add_u16_reference(a, az, as_, b, bz, bs, cz, cs)
        for threads in (1, 2):
            (y,) = run_lite(model, feeds, threads)
            assert y.dtype == np.uint16
            np.testing.assert_array_equal(y, want)
        # Within one step of the exact sum (saturated).
        exact = ((a.astype(np.float64) - float(az)) * float(as_) +
                 (b.astype(np.float64) - float(bz)) * float(bs)) / float(cs) + float(cz)
        assert np.abs(y - np.clip(exact, 0, 65535)).max() <= 1.0
    import onnxruntime
    with pytest.raises(Exception, match="uint16"):
        onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_qlinear_mul_refuses_uint16():
    a = np.arange(6, dtype=np.uint16).reshape(2, 3)
    e = lite_error("QLinearMul", [("A", a), ("A_scale", scale(0)), ("A_zero_point", None),
                                  ("B", a), ("B_scale", scale(1)), ("B_zero_point", None),
                                  ("C_scale", scale(2)), ("C_zero_point", None)], np.uint16)
    assert isinstance(e, ortlite.InvalidArgument) and "uint8 or int8" in str(e)


# ---- QLinearWhere --------------------------------------------------------------------------

WHERE_SHAPES = [((2, 3, 4), (2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,), ()), ((3, 1), (1, 4), (3, 4)),
                ((), (5, 6), (5, 6)), ((1, 1, 4), (2, 3, 1), (2, 1, 4)), ((300, 70), (70,), (300, 1))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", WHERE_SHAPES, ids=str)
@pytest.mark.parametrize("params", ["distinct", "x_is_z", "both_are_z"])
@pytest.mark.parametrize("const", [True, False])
def test_qlinear_where_matches_onnxruntime(dtype, shapes, params, const):
    sc, sx, sy = shapes
    rng = np.random.default_rng(4)
    cond = rng.integers(0, 2, size=sc).astype(bool)
    zs, zz = scale(3, 0.01, 0.1), zp(dtype, 3)
    xs, xz = (zs, zz) if params != "distinct" else (scale(1), zp(dtype, 1))
    ys, yz = (zs, zz) if params == "both_are_z" else (scale(2, 0.01, 0.2), zp(dtype, 2))
    ins = [("condition", cond), ("X", qdata(dtype, sx, 5)), ("X_scale", xs), ("X_zero_point", xz),
           ("Yv", qdata(dtype, sy, 6)), ("Y_scale", ys), ("Y_zero_point", yz),
           ("Z_scale", zs), ("Z_zero_point", zz)]
    consts = ("X_scale", "X_zero_point", "Y_scale", "Y_zero_point", "Z_scale",
              "Z_zero_point") if const else ()
    check("QLinearWhere", ins, dtype, consts=consts, threads=2)


def test_qlinear_where_bad_inputs():
    good = [("condition", np.array([True, False])), ("X", qdata(U8, (2,), 0)),
            ("X_scale", scale(0)), ("X_zero_point", zp(U8, 0)), ("Yv", qdata(U8, (2,), 1)),
            ("Y_scale", scale(1)), ("Y_zero_point", zp(U8, 1)), ("Z_scale", scale(2)),
            ("Z_zero_point", zp(U8, 2))]
    bad = list(good)
    bad[4] = ("Yv", qdata(I8, (2,), 1))
    e = lite_error("QLinearWhere", bad, U8)
    assert isinstance(e, ortlite.InvalidArgument) and "'Y'" in str(e)
    bad = list(good)
    bad[0] = ("condition", np.array([1, 0], U8))
    e = lite_error("QLinearWhere", bad, U8)
    assert isinstance(e, ortlite.InvalidArgument) and "condition" in str(e)
    bad = list(good)
    bad[1] = ("X", qdata(U8, (3,), 0))
    assert isinstance(lite_error("QLinearWhere", bad, U8), ortlite.InvalidArgument)


def test_quantize_static_qoperator_where_model(tmp_path):
    # quantize_static in QOperator format writes QLinearWhere for a Where whose inputs it
    # quantizes (ForceQuantizeNoInputCheck); ortlite runs the model as onnxruntime does.
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    import onnx

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((16, 16)) * 0.3).astype(F32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["a"]),
             helper.make_node("Relu", ["x"], ["b"]),
             helper.make_node("Greater", ["x", "zero"], ["c"]),
             helper.make_node("Where", ["c", "a", "b"], ["wh"]),
             helper.make_node("MatMul", ["wh", "w"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     [4, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=[w, numpy_helper.from_array(np.array(0, F32), "zero")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    src, dst = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(m, str(src))

    class Reader:
        def __init__(self):
            self.items = [{"x": rng.standard_normal((4, 16)).astype(F32)} for _ in range(4)]

        def get_next(self):
            return self.items.pop() if self.items else None

    quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QOperator,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    extra_options={"ForceQuantizeNoInputCheck": True})
    q = onnx.load(str(dst))
    assert "QLinearWhere" in {n.op_type for n in q.graph.node}
    feeds = {"x": rng.standard_normal((4, 16)).astype(F32)}
    expected = run_ort(q, feeds)
    for threads in (1, 2):
        assert_same(run_lite(q, feeds, threads), expected, rtol=0, atol=0)


# ---- QLinearSigmoid / QLinearLeakyRelu ------------------------------------------------------

@pytest.mark.parametrize("op,attrs", [("QLinearSigmoid", {}), ("QLinearLeakyRelu", {}),
                                      ("QLinearLeakyRelu", {"alpha": 0.2})])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("const", [True, False], ids=["table_at_load", "table_per_run"])
def test_lookup_activations_match_onnxruntime(op, attrs, dtype, const):
    info = np.iinfo(dtype)
    x = np.concatenate([np.arange(info.min, info.max + 1),
                        qdata(dtype, (1 * 16 * 14 * 14,), 3)]).astype(dtype)
    for seed in range(6):
        inputs = [("X", x), ("X_scale", scale(seed, 0.005, 0.1)),
                  ("X_zero_point", zp(dtype, seed)), ("Y_scale", scale(seed + 1, 0.002, 0.02)),
                  ("Y_zero_point", zp(dtype, seed + 1))]
        consts = ("X_scale", "X_zero_point", "Y_scale", "Y_zero_point") if const else ()
        check(op, inputs, dtype, attrs, consts)
    check(op, [("X", x), ("X_scale", scale(9)), ("X_zero_point", None), ("Y_scale", scale(8)),
               ("Y_zero_point", np.array(0, dtype))], dtype, attrs)


def test_lookup_activation_bad_zero_point():
    e = lite_error("QLinearSigmoid", [("X", qdata(U8, (4,), 0)), ("X_scale", scale(0)),
                                      ("X_zero_point", np.array(1, I8)), ("Y_scale", scale(1)),
                                      ("Y_zero_point", np.array(1, U8))], U8)
    assert isinstance(e, ortlite.InvalidArgument) and "X_zero_point" in str(e)


# ---- QLinearSoftmax -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("opset,axis", [(13, -1), (13, 1), (13, None), (12, 1), (12, -1),
                                        (11, None)])
def test_softmax_matches_onnxruntime(dtype, opset, axis):
    x = qdata(dtype, (2, 10, 12), 4)
    attrs = {"opset": opset}
    if axis is not None:
        attrs["axis"] = axis
    y_zp = np.array(0 if dtype == U8 else -128, dtype)
    for seed in range(3):
        check("QLinearSoftmax", [("X", x), ("X_scale", scale(seed, 0.02, 0.2)),
                                 ("X_zero_point", zp(dtype, seed)),
                                 ("Y_scale", np.array(1 / 256, F32)), ("Y_zero_point", y_zp)],
              dtype, attrs, consts=("X_scale",) if seed else ())


# ---- QLinearConcat ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [1, -1, 0])
def test_concat_matches_onnxruntime(dtype, axis):
    ys, yz = scale(0), zp(dtype, 0)
    inputs = [("Y_scale", ys), ("Y_zero_point", yz)]
    consts = ["Y_scale", "Y_zero_point"]
    for k, c in enumerate([16, 8, 4]):
        shape = [1, 16, 7, 7]
        shape[axis] = c
        same = k == 1  # the output's scale and zero point: copied
        inputs += [(f"X{k}", qdata(dtype, shape, k)),
                   (f"S{k}", ys if same else scale(k + 5)),
                   (f"Z{k}", yz if same else zp(dtype, k + 5))]
        if k != 2:
            consts += [f"S{k}", f"Z{k}"]
    check("QLinearConcat", inputs, dtype, {"axis": axis}, consts)


def test_concat_bad_shapes():
    e = lite_error("QLinearConcat", [("Y_scale", scale(0)), ("Y_zero_point", zp(U8, 0)),
                                     ("X0", qdata(U8, (1, 4, 3), 0)), ("S0", scale(1)),
                                     ("Z0", zp(U8, 1)), ("X1", qdata(U8, (1, 4, 5), 1)),
                                     ("S1", scale(2)), ("Z1", zp(U8, 2))], U8, {"axis": 1})
    assert isinstance(e, ortlite.InvalidArgument)


# ---- QLinearGlobalAveragePool -------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,channels_last", [((1, 16, 14, 14), 0), ((2, 32, 8, 8), 0),
                                                 ((1, 14, 14, 16), 1), ((2, 5, 5, 3), 1),
                                                 ((2, 8, 30), 0)])
def test_global_average_pool_matches_onnxruntime(dtype, shape, channels_last):
    for seed in range(3):
        check("QLinearGlobalAveragePool",
              [("X", qdata(dtype, shape, seed)), ("x_scale", scale(seed)),
               ("x_zero_point", zp(dtype, seed)), ("y_scale", scale(seed + 1, 0.002, 0.01)),
               ("y_zero_point", zp(dtype, seed + 1))], dtype, {"channels_last": channels_last})


def test_global_average_pool_bad_rank():
    e = lite_error("QLinearGlobalAveragePool",
                   [("X", qdata(U8, (4, 5), 0)), ("x_scale", scale(0)),
                    ("x_zero_point", zp(U8, 0)), ("y_scale", scale(1)),
                    ("y_zero_point", zp(U8, 1))], U8)
    assert isinstance(e, ortlite.InvalidArgument)


# ---- QGemm --------------------------------------------------------------------------------

@pytest.mark.parametrize("ta,tb", [(U8, I8), (U8, U8), (I8, I8)], ids=str)
@pytest.mark.parametrize("trans", [(0, 0), (0, 1), (1, 0), (1, 1)], ids=str)
@pytest.mark.parametrize("bias", [None, "n", "scalar", "m1", "mn"])
@pytest.mark.parametrize("out", ["quant", "float"])
@pytest.mark.parametrize("per_col", [False, True])
def test_qgemm_matches_onnxruntime(ta, tb, trans, bias, out, per_col):
    M, K, N = 5, 37, 19
    a = qdata(ta, (K, M) if trans[0] else (M, K), 1)
    b = qdata(tb, (N, K) if trans[1] else (K, N), 2)
    rng = np.random.default_rng(3)
    bs = (rng.uniform(0.001, 0.01, N) if per_col else rng.uniform(0.001, 0.01, ())).astype(F32)
    bz = (qdata(tb, (N,), 4) // 4 if per_col else zp(tb, 4)).astype(tb)
    c = {None: None, "n": rng.integers(-3000, 3000, N), "scalar": np.array(77),
         "m1": rng.integers(-3000, 3000, (M, 1)), "mn": rng.integers(-3000, 3000, (M, N))}[bias]
    inputs = [("A", a), ("a_scale", scale(5)), ("a_zero_point", zp(ta, 5)), ("B", b),
              ("b_scale", bs), ("b_zero_point", bz),
              ("C", None if c is None else c.astype(I32))]
    if out == "quant":
        inputs += [("y_scale", scale(6, 0.05, 0.2)), ("y_zero_point", zp(ta, 6))]
    attrs = {"transA": trans[0], "transB": trans[1], "alpha": 0.75}
    check("QGemm", inputs, ta if out == "quant" else F32, attrs,
          consts=("B", "b_scale", "b_zero_point", "C"), rtol=1e-6, atol=0)


def test_qgemm_b_at_run_time_and_bad_inputs():
    a, b = qdata(U8, (4, 8), 0), qdata(I8, (8, 6), 1)
    inputs = [("A", a), ("a_scale", scale(0)), ("a_zero_point", zp(U8, 0)), ("B", b),
              ("b_scale", scale(1)), ("b_zero_point", zp(I8, 1)), ("C", None),
              ("y_scale", scale(2, 0.05, 0.1)), ("y_zero_point", zp(U8, 2))]
    check("QGemm", inputs, U8)
    bad = list(inputs)
    bad[3] = ("B", qdata(I8, (7, 6), 1))
    e = lite_error("QGemm", bad, U8)
    assert isinstance(e, ortlite.InvalidArgument) and "inner" in str(e)
    bad = list(inputs)
    bad[5] = ("b_zero_point", np.array(1, U8))
    e = lite_error("QGemm", bad, U8)
    assert isinstance(e, ortlite.InvalidArgument) and "b_zero_point" in str(e)


# ---- DynamicQuantizeMatMul ----------------------------------------------------------------

@pytest.mark.parametrize("tb", [I8, U8])
@pytest.mark.parametrize("a_shape", [(4, 64), (2, 3, 64), (1, 64)], ids=str)
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("per_col", [False, True])
@pytest.mark.parametrize("with_zp", [False, True])
def test_dynamic_quantize_matmul_matches_onnxruntime(tb, a_shape, bias, per_col, with_zp):
    N = 24
    rng = np.random.default_rng(7)
    a = rng.standard_normal(a_shape).astype(F32)
    b = qdata(tb, (64, N), 8)
    bs = (rng.uniform(0.001, 0.01, N) if per_col else rng.uniform(0.001, 0.01, (1,))).astype(F32)
    bz = None
    if with_zp:
        bz = (qdata(tb, (N,), 9) // 8 if per_col else zp(tb, 9).reshape(1)).astype(tb)
    inputs = [("A", a), ("B", b), ("b_scale", bs), ("b_zero_point", bz),
              ("bias", rng.standard_normal(N).astype(F32) if bias else None)]
    check("DynamicQuantizeMatMul", inputs, F32, consts=("B", "b_scale", "b_zero_point"),
          rtol=1e-6, atol=1e-7)


def test_dynamic_quantize_matmul_bad_a():
    e = lite_error("DynamicQuantizeMatMul", [("A", qdata(U8, (2, 4), 0)),
                                             ("B", qdata(I8, (4, 3), 1)),
                                             ("b_scale", np.array([0.1], F32))], F32)
    assert isinstance(e, ortlite.InvalidArgument)


# ---- the models onnxruntime's quantization tools write ------------------------------------

@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_quantize_static_qoperator_model_matches_onnxruntime(name, tmp_path):
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import tool_models

    model = tool_models.variant("qoperator", tool_models.FLOAT_MODELS[name](), tmp_path)
    ops = {n.op_type for n in model.graph.node if n.domain == MS}
    assert ops & {"QLinearAdd", "QGemm", "QLinearGlobalAveragePool"}
    feeds = tool_models.feeds(model)
    expected = run_ort(model, feeds)
    for threads in (1, 2):
        # The same arithmetic as onnxruntime in every kernel: equal to the last bit.
        assert_same(run_lite(model, feeds, threads), expected, rtol=0, atol=0)


# ---- com.microsoft QuantizeLinear / DequantizeLinear (UseQDQContribOps) -------------------

@pytest.mark.parametrize("dtype", [U8, I8, np.uint16, np.int16])
@pytest.mark.parametrize("axis", [None, 1, -1])
def test_contrib_quantize_dequantize_match_onnxruntime(dtype, axis):
    x = (np.random.default_rng(0).standard_normal((2, 16, 5, 6)) * 3).astype(F32)
    attrs = {} if axis is None else {"axis": axis}
    n = 1 if axis is None else x.shape[axis]
    rng = np.random.default_rng(1)
    s = rng.uniform(0.01, 0.05, n).astype(F32)
    z = qdata(dtype, (n,), 2) // 4
    if axis is None:
        s, z = s.reshape(()), z.reshape(())
    q = check("QuantizeLinear", [("x", x), ("y_scale", s), ("y_zero_point", z)], dtype, attrs,
              consts=("y_scale", "y_zero_point"))
    check("DequantizeLinear", [("x", q), ("x_scale", s), ("x_zero_point", z)], F32, attrs,
          consts=("x_scale",), rtol=0, atol=0)


@pytest.mark.parametrize("qtype", [TensorProto.INT4, TensorProto.UINT4], ids=["int4", "uint4"])
@pytest.mark.parametrize("axis", [None, 1, -1])
def test_contrib_quantize_dequantize_4bit_match_onnxruntime(qtype, axis):
    # com.microsoft QuantizeLinear -> DequantizeLinear with int4 / uint4 (numpy cannot carry
    # 4-bit tensors through onnxruntime's binding, so the graph takes and gives float).
    x = (np.random.default_rng(0).standard_normal((2, 6, 5, 3)) * 4).astype(F32)
    n = 1 if axis is None else x.shape[axis]
    rng = np.random.default_rng(1)
    s = rng.uniform(0.2, 0.6, n).astype(F32)
    lo, hi = (-8, 7) if qtype == TensorProto.INT4 else (0, 15)
    z = rng.integers(lo // 2, hi // 2 + 1, n)
    attrs = {} if axis is None else {"axis": axis}
    dims = [] if axis is None else [n]
    inits = [numpy_helper.from_array(s.reshape(dims), "s"),
             helper.make_tensor("z", qtype, dims, z.tolist())]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], domain=MS, **attrs),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], domain=MS, **attrs)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    expected = run_ort(m, {"x": x})
    got = run_lite(m, {"x": x})
    assert_same(got, expected, rtol=0, atol=0)
    # The data spans more than the 4-bit range: saturated codes and most others occur.
    assert len(np.unique(got[0])) > 8


@pytest.mark.parametrize("qtype", [TensorProto.INT4, TensorProto.UINT4], ids=["int4", "uint4"])
@pytest.mark.parametrize("per_column", [False, True])
def test_contrib_dequantize_4bit_weight_into_matmul(qtype, per_column):
    # A 4-bit constant weight (an odd number of codes: the last byte half used) through the
    # com.microsoft DequantizeLinear into MatMul: the QDQ weight layout with 4-bit weights.
    K, N = 7, 5
    rng = np.random.default_rng(2)
    lo, hi = (-8, 7) if qtype == TensorProto.INT4 else (0, 15)
    w = rng.integers(lo, hi + 1, size=(K, N))
    s = rng.uniform(0.05, 0.2, N if per_column else 1).astype(F32)
    z = rng.integers(lo, hi + 1, N if per_column else 1)
    dims = [N] if per_column else []
    inits = [helper.make_tensor("w", qtype, [K, N], w.reshape(-1).tolist()),
             numpy_helper.from_array(s.reshape(dims), "s"),
             helper.make_tensor("z", qtype, dims, z.tolist())]
    nodes = [helper.make_node("DequantizeLinear", ["w", "s", "z"], ["wd"], domain=MS,
                              **({"axis": 1} if per_column else {})),
             helper.make_node("MatMul", ["x", "wd"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     [3, K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    x = rng.standard_normal((3, K)).astype(F32)
    ref = x.astype(np.float64) @ ((w - z) * s.astype(np.float64))
    (got,) = run_lite(m, {"x": x})
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    assert_same([got], run_ort(m, {"x": x}), rtol=1e-6, atol=1e-6)


# ---- QLinearAveragePool -------------------------------------------------------------------

AVG_POOL_CASES = [
    ((1, 16, 14, 14), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 16, 14, 14), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                       "count_include_pad": 1}),
    ((1, 16, 14, 14), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 16, 14, 14), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1,
                       "count_include_pad": 1, "pads": [0, 0, 1, 1]}),
    ((1, 8, 7, 9), {"kernel_shape": [2, 3], "auto_pad": "SAME_UPPER"}),
    ((1, 8, 7, 9), {"kernel_shape": [2, 3], "auto_pad": "SAME_LOWER", "strides": [2, 1]}),
    ((1, 8, 7, 9), {"kernel_shape": [2, 2], "auto_pad": "VALID"}),
    ((2, 8, 7, 7), {"kernel_shape": [7, 7]}),
    ((2, 4, 20), {"kernel_shape": [4], "strides": [3], "pads": [1, 2]}),
    ((1, 3, 6, 5, 4), {"kernel_shape": [2, 3, 2], "strides": [2, 1, 2],
                       "pads": [1, 0, 1, 0, 1, 0]}),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,attrs", AVG_POOL_CASES, ids=str)
@pytest.mark.parametrize("channels_last", [0, 1])
def test_average_pool_matches_onnxruntime(dtype, shape, attrs, channels_last):
    if channels_last:
        shape = (shape[0],) + shape[2:] + (shape[1],)
    for seed in range(2):
        check("QLinearAveragePool",
              [("X", qdata(dtype, shape, seed)), ("x_scale", scale(seed)),
               ("x_zero_point", zp(dtype, seed)), ("y_scale", scale(seed + 1, 0.002, 0.02)),
               ("y_zero_point", zp(dtype, seed + 1))], dtype,
              dict(attrs, channels_last=channels_last))


def test_average_pool_bad_rank():
    e = lite_error("QLinearAveragePool", [("X", qdata(U8, (1, 4, 5), 0)), ("x_scale", scale(0)),
                                          ("x_zero_point", zp(U8, 0)), ("y_scale", scale(1)),
                                          ("y_zero_point", zp(U8, 1))], U8,
                   {"kernel_shape": [2, 2]})
    assert isinstance(e, ortlite.InvalidArgument)


# ---- QLinearConv's direct packing (output rows of a multiple of 16 positions) -------------

@pytest.mark.parametrize("tx", DTYPES)
@pytest.mark.parametrize("cin,hw,stride,dil,pad", [(3, 16, 1, 1, 1), (16, 32, 2, 1, 1),
                                                   (5, 34, 2, 1, 0), (32, 16, 1, 2, 2),
                                                   (7, 33, 2, 1, 1), (4, 18, 1, 1, 0)])
def test_qlinear_conv_matches_onnxruntime(tx, cin, hw, stride, dil, pad):
    rng = np.random.default_rng(cin)
    inputs = [("x", qdata(tx, (1, cin, hw, hw), 1)), ("x_scale", scale(1)),
              ("x_zero_point", zp(tx, 1)), ("w", qdata(I8, (8, cin, 3, 3), 2)),
              ("w_scale", rng.uniform(0.001, 0.01, 8).astype(F32)),
              ("w_zero_point", np.zeros(8, I8)), ("y_scale", scale(3, 0.05, 0.2)),
              ("y_zero_point", zp(tx, 3)), ("B", rng.integers(-500, 500, 8).astype(I32))]
    model, feeds = build("QLinearConv", inputs, tx,
                         {"kernel_shape": [3, 3], "strides": [stride] * 2,
                          "dilations": [dil] * 2, "pads": [pad] * 4},
                         consts=("w", "w_scale", "w_zero_point", "B"), domain="")
    assert_same(run_lite(model, feeds), run_ort(model, feeds), rtol=0, atol=0)


# ---- QEmbedLayerNormalization --------------------------------------------------------------

def qembed_inputs(dtype, segment, mask, B=2, S=7, H=32, V=50):
    rng = np.random.default_rng(11)
    ins = [("input_ids", rng.integers(0, V, (B, S)).astype(I32)),
           ("segment_ids", rng.integers(0, 2, (B, S)).astype(I32) if segment else None),
           ("word_embedding_quant", qdata(dtype, (V, H), 1)),
           ("position_embedding_quant", qdata(dtype, (16, H), 2)),
           ("segment_embedding_quant", qdata(dtype, (2, H), 3) if segment else None),
           ("layer_norm_weight_quant", qdata(dtype, (H,), 4)),
           ("layer_norm_bias_quant", qdata(dtype, (H,), 5)),
           ("mask", (rng.random((B, S)) < 0.7).astype(I32) if mask else None)]
    names = ["word_embedding", "position_embedding", "segment_embedding", "layer_norm_weight",
             "layer_norm_bias"]
    ins += [(f"{n}_scale", scale(20 + k) if segment or k != 2 else None)
            for k, n in enumerate(names)]
    ins += [(f"{n}_zero_point", zp(dtype, 30 + k) if segment or k != 2 else None)
            for k, n in enumerate(names)]
    return ins


def qembed_model(ins, outputs=("Y", "mask_index")):
    names = [n if a is not None else "" for n, a in ins]
    node = helper.make_node("QEmbedLayerNormalization", names, list(outputs), domain=MS,
                            epsilon=1e-5)
    arrays = {n: a for n, a in ins if a is not None}
    consts = [n for n in arrays if "embedding" in n or "layer_norm" in n]
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, NP_TO_ONNX[a.dtype], list(a.shape))
         for n, a in arrays.items() if n not in consts],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)] +
        ([helper.make_tensor_value_info("mask_index", TensorProto.INT32, None)]
         if len(outputs) > 1 else []),
        initializer=[numpy_helper.from_array(arrays[n], n) for n in consts])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(MS, 1)])
    model.ir_version = 8
    return model, {n: a for n, a in arrays.items() if n not in consts}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("segment", [True, False])
@pytest.mark.parametrize("mask", [True, False])
def test_qembed_layer_norm_matches_onnxruntime(dtype, segment, mask):
    model, feeds = qembed_model(qembed_inputs(dtype, segment, mask))
    assert_same(run_lite(model, feeds), run_ort(model, feeds), rtol=0, atol=0)


def test_qembed_layer_norm_bad_index():
    ins = qembed_inputs(U8, True, True)
    ins[0] = ("input_ids", np.full((2, 7), 50, I32))
    model, feeds = qembed_model(ins)
    with pytest.raises(ortlite.InvalidArgument, match="input_ids"):
        run_lite(model, feeds)


# ---- QAttention ----------------------------------------------------------------------------

@pytest.mark.parametrize("tw", [I8, U8])
@pytest.mark.parametrize("per_col", [False, True])
@pytest.mark.parametrize("mask,past,unidir", [(False, False, 0), (True, False, 0),
                                              (False, True, 0), (True, False, 1)])
def test_qattention_matches_onnxruntime(tw, per_col, mask, past, unidir):
    B, S, Din, N, H = 2, 5, 24, 4, 8
    D = N * H
    rng = np.random.default_rng(5)
    ws = (rng.uniform(0.002, 0.01, 3 * D) if per_col else rng.uniform(0.002, 0.01, ())).astype(F32)
    wz = (qdata(tw, (3 * D,), 6) // 8 if per_col else zp(tw, 6)).astype(tw)
    inputs = [("input", qdata(U8, (B, S, Din), 1)), ("weight", qdata(tw, (Din, 3 * D), 2)),
              ("bias", rng.standard_normal(3 * D).astype(F32)),
              ("input_scale", np.array(0.02, F32)), ("weight_scale", ws),
              ("mask_index", np.array([S, 3], I32) if mask else None),
              ("input_zero_point", zp(U8, 7)), ("weight_zero_point", wz),
              ("past", rng.standard_normal((2, B, N, 3, H)).astype(F32) if past else None)]
    names = [n if a is not None else "" for n, a in inputs]
    outputs = ["Y", "present"] if past else ["Y"]
    node = helper.make_node("QAttention", names, outputs, domain=MS, num_heads=N,
                            unidirectional=unidir)
    arrays = {n: a for n, a in inputs if a is not None}
    consts = ["weight", "weight_scale", "weight_zero_point", "bias"]
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, NP_TO_ONNX[a.dtype], list(a.shape))
         for n, a in arrays.items() if n not in consts],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        initializer=[numpy_helper.from_array(arrays[n], n) for n in consts])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(MS, 1)])
    model.ir_version = 8
    feeds = {n: a for n, a in arrays.items() if n not in consts}
    assert_same(run_lite(model, feeds), run_ort(model, feeds), rtol=1e-5, atol=1e-5)
