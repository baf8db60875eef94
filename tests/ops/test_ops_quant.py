"""Quantization kernels (src/providers/cpu/quant): QuantizeLinear, DequantizeLinear,
DynamicQuantizeLinear, QLinearMatMul, QLinearConv, MatMulInteger, ConvInteger.

Compared with onnxruntime where it has a CPU kernel (opset <= 21 for QuantizeLinear /
DequantizeLinear, uint8 for ConvInteger, ...), else with onnx.reference.ReferenceEvaluator
or numpy on values where float and double arithmetic agree exactly."""

import functools

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import ortlite
import helpers
from helpers import NP_TO_ONNX, assert_same, run_lite, run_ort, session

F16, F32 = np.float16, np.float32
U8, I8, U16, I16, I32 = np.uint8, np.int8, np.uint16, np.int16, np.int32
# This file's one-node models: opset 21 unless given, IR version at most 10 for every opset.
node_model = functools.partial(helpers.node_model, opset=21, cap_newer=True)


def run_ref(model, feeds):
    return ReferenceEvaluator(model).run(None, feeds)


def check_ort(model, feeds):
    actual = run_lite(model, feeds)
    assert_same(actual, run_ort(model, feeds))
    return actual


def check_ort_or_ref(model, feeds):
    """Against onnxruntime; where the two differ, against onnx's reference implementation,
    which must then also show onnxruntime wrong: onnxruntime 1.23's integer kernels on CPUs
    with AMX-INT8 (Sapphire Rapids) get some uint8 products wrong (a 33x70 @ 70x17
    MatMulInteger off by up to 1.8e9), and its results are not the oracle there."""
    actual = run_lite(model, feeds)
    expected = run_ort(model, feeds)
    try:
        assert_same(actual, expected)
    except AssertionError:
        reference = run_ref(model, feeds)
        assert_same(actual, reference)
        with pytest.raises(AssertionError):
            assert_same(expected, reference)
    return actual


def check_ref(model, feeds, **tol):
    actual = run_lite(model, feeds)
    assert_same(actual, run_ref(model, feeds), **tol)
    return actual


def a(v, dtype):
    return np.asarray(v, dtype=dtype)


RNG = np.random.default_rng(0)


# onnxruntime's u8 x s8 kernels on CPUs without VNNI add pairs of products in saturating
# int16 (pmaddubsw): int8 operands compared with it stay within [-64, 63], where no pair
# can saturate, so the oracle is exact on every CPU.
I8_SAFE = 2


def rand_q(shape, dtype, div=1):
    info = np.iinfo(dtype)
    v = RNG.integers(info.min // div, info.max // div, size=shape, endpoint=True)
    return np.asarray(v, dtype=dtype)


# ---------------------------------------------------------------------------------------
# QuantizeLinear


# Ties in both directions, values past both ends, infinities and NaN.
EDGE_X = a([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49, -3.51, 126.5, 127.5, -128.5, 254.5, 255.5,
            1e10, -1e10, np.inf, -np.inf, np.nan, 0.0, -0.0], F32)


@pytest.mark.parametrize("opset", [10, 13, 19, 21])
@pytest.mark.parametrize("zdt,zp", [(U8, 0), (U8, 7), (I8, 0), (I8, -3)])
def test_quantize_per_tensor_edges_vs_ort(opset, zdt, zp):
    m = node_model("QuantizeLinear", {"x": EDGE_X, "s": a(1.0, F32), "z": a(zp, zdt)}, ["y"],
                   [zdt], opset=opset)
    y = check_ort(m, {"x": EDGE_X, "s": a(1.0, F32), "z": a(zp, zdt)})[0]
    # Rounding is half to even and saturates: the numpy oracle agrees on the finite values.
    info = np.iinfo(zdt)
    finite = np.isfinite(EDGE_X)
    expect = np.clip(np.rint(EDGE_X[finite]) + zp, info.min, info.max)
    np.testing.assert_array_equal(y[finite], expect.astype(zdt))


@pytest.mark.parametrize("zdt", [U8, I8, U16, I16])
def test_quantize_random_scale_vs_ort(zdt):
    x = RNG.normal(0, 300, size=(3, 5, 7)).astype(F32)
    s, z = a(0.37, F32), a(3, zdt)
    m = node_model("QuantizeLinear", {"x": x, "s": s, "z": z}, ["y"], [zdt])
    check_ort(m, {"x": x, "s": s, "z": z})


def test_quantize_without_zero_point_is_uint8():
    x = a([-1.0, 0.4, 3.6, 300.0], F32)
    m = node_model("QuantizeLinear", {"x": x, "s": a(1.0, F32)}, ["y"], [U8], opset=13)
    y = check_ort(m, {"x": x, "s": a(1.0, F32)})[0]
    np.testing.assert_array_equal(y, a([0, 0, 4, 255], U8))


@pytest.mark.parametrize("axis", [0, 1, -1, 2])
@pytest.mark.parametrize("opset", [13, 21])
def test_quantize_per_axis_vs_ort(axis, opset):
    x = RNG.normal(0, 50, size=(2, 3, 4)).astype(F32)
    d = x.shape[axis]
    s = RNG.uniform(0.1, 2.0, size=d).astype(F32)
    z = RNG.integers(-20, 20, size=d).astype(I8)
    m = node_model("QuantizeLinear", {"x": x, "s": s, "z": z}, ["y"], [I8],
                   attrs={"axis": axis}, opset=opset)
    check_ort(m, {"x": x, "s": s, "z": z})


@pytest.mark.parametrize("shape,axis,block", [((3, 8), 1, 4), ((3, 7), 1, 3), ((6, 2, 5), 0, 4),
                                              ((2, 9, 3), -2, 2), ((4, 5), 1, 5)])
@pytest.mark.parametrize("zdt", [U8, I16, U16])
def test_quantize_blocked_vs_ort(shape, axis, block, zdt):
    x = RNG.normal(0, 100, size=shape).astype(F32)
    sshape = list(shape)
    sshape[axis] = -(-shape[axis] // block)
    s = RNG.uniform(0.2, 3.0, size=sshape).astype(F32)
    z = rand_q(sshape, zdt, div=4)
    m = node_model("QuantizeLinear", {"x": x, "s": s, "z": z}, ["y"], [zdt],
                   attrs={"axis": axis, "block_size": block})
    check_ort(m, {"x": x, "s": s, "z": z})
    check_ref(m, {"x": x, "s": s, "z": z})


def test_quantize_output_dtype_without_zero_point_vs_ort():
    x = RNG.normal(0, 1000, size=(4, 6)).astype(F32)
    m = node_model("QuantizeLinear", {"x": x, "s": a(0.5, F32)}, ["y"], [I16],
                   attrs={"output_dtype": TensorProto.INT16})
    y = check_ort(m, {"x": x, "s": a(0.5, F32)})[0]
    assert y.dtype == I16


def test_quantize_float16_follows_the_scale_precision():
    # Division in float16 (the scale's type): the reference evaluator divides in float16.
    x = RNG.normal(0, 20, size=(64,)).astype(F16)
    s, z = a(0.3, F16), a(5, U8)
    m = node_model("QuantizeLinear", {"x": x, "s": s, "z": z}, ["y"], [U8])
    check_ref(m, {"x": x, "s": s, "z": z})
    # Integer quotients: onnxruntime agrees. (Its float16 kernel does not round to nearest:
    # -3.75 gives -3, 0.75 gives 0, -1.5 gives -1.)
    x2 = (np.arange(-40, 40) * 0.5).astype(F16)
    m2 = node_model("QuantizeLinear", {"x": x2, "s": a(0.5, F16), "z": z}, ["y"], [U8])
    check_ort(m2, {"x": x2, "s": a(0.5, F16), "z": z})
    # Ties go to even, as the spec and the reference evaluator say.
    x3 = a([-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5], F16)
    m3 = node_model("QuantizeLinear", {"x": x3, "s": a(1, F16), "z": z}, ["y"], [U8])
    y = check_ref(m3, {"x": x3, "s": a(1, F16), "z": z})[0]
    np.testing.assert_array_equal(y, a([1, 3, 3, 5, 5, 7, 7, 9], U8))


@pytest.mark.parametrize("opset", [23, 25])
def test_quantize_precision_attribute_and_mixed_types_vs_numpy(opset):
    # onnxruntime has no CPU kernel past opset 21 and the reference evaluator of the pinned
    # onnx runs opset 23 / 25 nodes with its opset 21 class, which ignores 'precision': the
    # oracle is the spec's formula in numpy (float16 arithmetic rounds every result).
    x = RNG.normal(0, 20, size=(5, 6)).astype(F32)
    s = RNG.uniform(0.1, 1.0, size=(6,)).astype(F16)
    z = rand_q((6,), I8, div=8)

    def expect(q):
        return np.clip(np.rint(q.astype(np.float64)) + z, -128, 127).astype(I8)

    # x float, scale float16: the division runs in float16.
    feeds = {"x": x, "s": s, "z": z}
    y = run_lite(node_model("QuantizeLinear", feeds, ["y"], [I8], opset=opset), feeds)[0]
    np.testing.assert_array_equal(y, expect(x.astype(F16) / s))
    # precision = float16 with a float scale.
    feeds = {"x": x, "s": s.astype(F32), "z": z}
    m = node_model("QuantizeLinear", feeds, ["y"], [I8], opset=opset,
                   attrs={"precision": TensorProto.FLOAT16})
    np.testing.assert_array_equal(run_lite(m, feeds)[0], expect(x.astype(F16) / s))
    # precision = float with a float16 scale.
    feeds = {"x": x, "s": s, "z": z}
    m = node_model("QuantizeLinear", feeds, ["y"], [I8], opset=opset,
                   attrs={"precision": TensorProto.FLOAT})
    np.testing.assert_array_equal(run_lite(m, feeds)[0], expect(x / s.astype(F32)))


def test_quantize_int32_input_vs_numpy():
    x = a([-1000, -3, -1, 0, 1, 3, 5, 7, 1000, 2**30], I32)
    m = node_model("QuantizeLinear", {"x": x, "s": a(2.0, F32), "z": a(10, U8)}, ["y"], [U8])
    y = run_lite(m, {"x": x, "s": a(2.0, F32), "z": a(10, U8)})[0]
    np.testing.assert_array_equal(y, np.clip(np.rint(x / 2.0) + 10, 0, 255).astype(U8))


def test_quantize_parallel_large_input_vs_ort():
    x = RNG.normal(0, 40, size=(64, 1024)).astype(F32)
    s = RNG.uniform(0.1, 1.0, size=(64,)).astype(F32)
    z = rand_q((64,), U8)
    feeds = {"x": x, "s": s, "z": z}
    m = node_model("QuantizeLinear", feeds, ["y"], [U8], attrs={"axis": 0})
    so = ortlite.SessionOptions()
    so.intra_op_num_threads = 4
    y = ortlite.InferenceSession(m.SerializeToString(), sess_options=so).run(None, feeds)
    assert_same(y, run_ort(m, feeds))


# Narrow types (int4, uint4, int2, uint2, float8*, float4e2m1): numpy feeds cannot carry
# them, so the models take them from initializers and Cast the results to float.

NARROW_Q = [(TensorProto.INT4, [1], 21), (TensorProto.UINT4, [3], 21),
            (TensorProto.INT2, [0], 25), (TensorProto.UINT2, [1], 25),
            (TensorProto.FLOAT8E4M3FN, [0], 21), (TensorProto.FLOAT8E4M3FNUZ, [0], 21),
            (TensorProto.FLOAT8E5M2, [0], 21), (TensorProto.FLOAT8E5M2FNUZ, [0], 21),
            (TensorProto.FLOAT4E2M1, [0], 23)]


def narrow_model(op, qtype, x_spec, consts, attrs, opset):
    """op's output Cast to float; x_spec: graph input (name, elem, shape) or None when x is
    among the initializers (consts: TensorProtos)."""
    node = helper.make_node(op, ["x", "s", "z"], ["q"], **attrs)
    cast = helper.make_node("Cast", ["q"], ["y"], to=TensorProto.FLOAT)
    inputs = [helper.make_tensor_value_info(*x_spec)] if x_spec else []
    graph = helper.make_graph([node, cast], "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=consts)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


@pytest.mark.parametrize("qtype,zp,opset", NARROW_Q)
@pytest.mark.parametrize("saturate", [1, 0])
def test_quantize_narrow_types_vs_reference(qtype, zp, opset, saturate):
    x = RNG.normal(0, 6, size=(3, 8)).astype(F32)
    x[0, :6] = [0.35, 1.05, -1.75, 1000.0, -1000.0, np.nan]  # ties, both ends, NaN
    consts = [numpy_helper.from_array(a(0.7, F32), "s"), helper.make_tensor("z", qtype, [], zp)]
    m = narrow_model("QuantizeLinear", qtype, ("x", TensorProto.FLOAT, [3, 8]), consts,
                     {"saturate": saturate}, opset)
    if qtype not in (TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FNUZ,
                     TensorProto.FLOAT8E5M2, TensorProto.FLOAT8E5M2FNUZ):
        x[0, 5] = 0.0  # NaN has no integer or float4 result the oracle defines
    check_ref(m, {"x": x})


@pytest.mark.parametrize("qtype,zp,opset", NARROW_Q[:2] + NARROW_Q[4:5] + NARROW_Q[6:7])
def test_quantize_narrow_types_per_axis_vs_ort(qtype, zp, opset):
    x = RNG.normal(0, 6, size=(2, 3, 4)).astype(F32)
    consts = [numpy_helper.from_array(a([0.5, 1.0, 2.0], F32), "s"),
              helper.make_tensor("z", qtype, [3], zp * 3)]
    m = narrow_model("QuantizeLinear", qtype, ("x", TensorProto.FLOAT, [2, 3, 4]), consts,
                     {"axis": 1}, opset)
    check_ort(m, {"x": x})


@pytest.mark.parametrize("qtype,vals,zp,opset", [
    (TensorProto.INT4, [-8, -3, 0, 5, 7, 1], [2], 21),
    (TensorProto.UINT4, [0, 3, 8, 15, 9, 1], [4], 21),
    (TensorProto.INT2, [-2, -1, 0, 1, 1, 0], [-1], 25),
    (TensorProto.UINT2, [0, 1, 2, 3, 3, 2], [1], 25),
    (TensorProto.FLOAT8E4M3FN, [-448.0, -1.5, 0.0, 0.125, 3.5, 240.0], [0], 21),
    (TensorProto.FLOAT8E5M2, [-57344.0, -1.5, 0.0, 0.125, 3.5, 1024.0], [0], 21),
    (TensorProto.FLOAT4E2M1, [-6.0, -1.5, 0.0, 0.5, 3.0, 4.0], [0], 23),
])
def test_dequantize_narrow_types_vs_reference(qtype, vals, zp, opset):
    consts = [helper.make_tensor("x", qtype, [2, 3], vals),
              numpy_helper.from_array(a([0.5, 0.25], F32), "s"),
              helper.make_tensor("z", qtype, [2], zp * 2)]
    m = narrow_model("DequantizeLinear", qtype, None, consts, {"axis": 0}, opset)
    y = check_ref(m, {})[0]
    np.testing.assert_array_equal(y, ((np.array(vals, np.float64).reshape(2, 3) - zp[0])
                                      * [[0.5], [0.25]]).astype(F32))


def test_dequantize_float8_nonzero_zero_point_is_rejected():
    consts = [helper.make_tensor("x", TensorProto.FLOAT8E4M3FN, [2], [1.0, 2.0]),
              numpy_helper.from_array(a(1.0, F32), "s"),
              helper.make_tensor("z", TensorProto.FLOAT8E4M3FN, [], [1.0])]
    m = narrow_model("DequantizeLinear", None, None, consts, {}, 21)
    with pytest.raises(ortlite.InvalidArgument, match="zero point"):
        run_lite(m, {})


def test_float8e8m0_scale_vs_numpy():
    # float8e8m0 holds 2^(bits - 127): the scales 2^-2 and 2^3.
    s = helper.make_tensor("s", TensorProto.FLOAT8E8M0, [2], [0.25, 8.0])
    x = RNG.normal(0, 20, size=(2, 5)).astype(F32)
    q = helper.make_node("QuantizeLinear", ["x", "s"], ["q"], axis=0,
                         output_dtype=TensorProto.INT8)
    d = helper.make_node("DequantizeLinear", ["q", "s"], ["y"], axis=0,
                         output_dtype=TensorProto.FLOAT)
    graph = helper.make_graph([q, d], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
                              [helper.make_tensor_value_info("q", TensorProto.INT8, None),
                               helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[s])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])
    m.ir_version = 11
    qv, y = run_lite(m, {"x": x})
    scale = np.array([[0.25], [8.0]])
    expect = np.clip(np.rint(x / scale), -128, 127)
    np.testing.assert_array_equal(qv, expect.astype(I8))
    np.testing.assert_array_equal(y, (expect * scale).astype(F32))


# ---------------------------------------------------------------------------------------
# DequantizeLinear


@pytest.mark.parametrize("xdt", [U8, I8, U16, I16])
@pytest.mark.parametrize("sdt", [F32, F16])
def test_dequantize_per_tensor_vs_ort(xdt, sdt):
    x = rand_q((4, 5), xdt)
    s, z = a(0.125, sdt), a(np.iinfo(xdt).max // 3, xdt)
    m = node_model("DequantizeLinear", {"x": x, "s": s, "z": z}, ["y"], [sdt])
    check_ort(m, {"x": x, "s": s, "z": z})


def test_dequantize_int32_without_zero_point_vs_ort():
    x = a([-2**31, -5, 0, 7, 2**31 - 1], I32)
    m = node_model("DequantizeLinear", {"x": x, "s": a(0.5, F32)}, ["y"], [F32], opset=13)
    check_ort(m, {"x": x, "s": a(0.5, F32)})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_dequantize_per_axis_vs_ort(axis):
    x = rand_q((3, 4, 5), I8)
    d = x.shape[axis]
    s = RNG.uniform(0.01, 1.0, size=d).astype(F32)
    z = rand_q((d,), I8)
    m = node_model("DequantizeLinear", {"x": x, "s": s, "z": z}, ["y"], [F32],
                   attrs={"axis": axis}, opset=13)
    check_ort(m, {"x": x, "s": s, "z": z})


@pytest.mark.parametrize("shape,axis,block", [((4, 8), 1, 4), ((5, 7), 0, 2), ((3, 10, 2), 1, 3)])
def test_dequantize_blocked_vs_ort(shape, axis, block):
    x = rand_q(shape, U16)
    sshape = list(shape)
    sshape[axis] = -(-shape[axis] // block)
    s = RNG.uniform(0.01, 1.0, size=sshape).astype(F32)
    z = rand_q(sshape, U16)
    m = node_model("DequantizeLinear", {"x": x, "s": s, "z": z}, ["y"], [F32],
                   attrs={"axis": axis, "block_size": block})
    check_ort(m, {"x": x, "s": s, "z": z})


@pytest.mark.parametrize("out", [(TensorProto.FLOAT16, F16), (TensorProto.BFLOAT16, None),
                                 (TensorProto.FLOAT, F32)])
def test_dequantize_output_dtype_vs_numpy(out):
    code, np_type = out
    x = rand_q((3, 6), I16)
    s = RNG.uniform(0.01, 0.1, size=(6,)).astype(F32)
    z = rand_q((6,), I16, div=16)
    feeds = {"x": x, "s": s, "z": z}
    if np_type is None:
        # bfloat16 has no numpy type here: check the output through float32.
        node = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=1,
                                output_dtype=code)
        cast = helper.make_node("Cast", ["y"], ["y32"], to=TensorProto.FLOAT)
        graph = helper.make_graph(
            [node, cast], "g",
            [helper.make_tensor_value_info(n, NP_TO_ONNX[v.dtype], list(v.shape))
             for n, v in feeds.items()],
            [helper.make_tensor_value_info("y32", TensorProto.FLOAT, None)])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
        m.ir_version = 10
        y = run_lite(m, feeds)[0]
        exact = (x.astype(np.float64) - z) * s
        np.testing.assert_allclose(y, exact, rtol=2**-8)
        return
    # The reference evaluator of the pinned onnx ignores 'output_dtype' (see above): numpy,
    # multiplying in float32 and rounding once, as the reference does.
    m = node_model("DequantizeLinear", feeds, ["y"], [np_type], attrs={"output_dtype": code},
                   opset=23)
    y = run_lite(m, feeds)[0]
    assert y.dtype == np_type
    np.testing.assert_array_equal(y, ((x.astype(F32) - z) * s).astype(np_type))


# ---------------------------------------------------------------------------------------
# DynamicQuantizeLinear


@pytest.mark.parametrize("x", [
    RNG.normal(0, 3, size=(4, 7)).astype(F32),
    RNG.uniform(1, 5, size=(10,)).astype(F32),      # all positive: min clamps to 0
    RNG.uniform(-5, -1, size=(2, 3)).astype(F32),   # all negative: max clamps to 0
    np.zeros((3, 3), F32),                          # max == min: scale 1
    np.zeros((0, 4), F32),
    a([1.0, np.nan, -2.0, 0.5], F32),               # NaN is left out of the range
    a([[-0.5, 0.25], [1.75, 2.0]], F32),
])
def test_dynamic_quantize_vs_ort(x):
    m = node_model("DynamicQuantizeLinear", {"x": x}, ["y", "ys", "yz"], [U8, F32, U8], opset=11)
    y, ys, yz = check_ort(m, {"x": x})
    assert y.shape == x.shape and ys.shape == () and yz.shape == ()


def test_dynamic_quantize_vs_reference():
    x = RNG.normal(0, 3, size=(256,)).astype(F32)
    m = node_model("DynamicQuantizeLinear", {"x": x}, ["y", "ys", "yz"], [U8, F32, U8], opset=11)
    check_ref(m, {"x": x})


# ---------------------------------------------------------------------------------------
# MatMulInteger


MM_SHAPES = [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((4,), (4, 3)),
             ((3, 4), (4,)), ((2, 1, 3, 6), (3, 6, 2)), ((0, 4), (4, 3)), ((33, 70), (70, 17))]


@pytest.mark.parametrize("sa,sb", MM_SHAPES)
@pytest.mark.parametrize("const_b", [False, True])
def test_matmul_integer_uint8_vs_ort(sa, sb, const_b):
    A, B = rand_q(sa, U8), rand_q(sb, U8)
    za = a(RNG.integers(0, 255), U8)
    zb = rand_q((sb[-1],), U8) if len(sb) == 2 else a(7, U8)
    consts = {"B": B, "zb": zb} if const_b else {}
    inputs = {"A": A, "za": za} if const_b else {"A": A, "B": B, "za": za, "zb": zb}
    m = node_model("MatMulInteger", inputs, ["Y"], [I32], opset=10, consts=consts,
                   order=["A", "B", "za", "zb"])
    check_ort_or_ref(m, inputs)
    # The exact product, as an independent check of both oracles.
    expect = np.matmul(A.astype(np.int64) - za.astype(np.int64),
                       B.astype(np.int64) - zb.astype(np.int64))
    np.testing.assert_array_equal(run_lite(m, inputs)[0], expect.astype(I32))


@pytest.mark.parametrize("adt,bdt", [(I8, I8), (U8, I8), (I8, U8)])
def test_matmul_integer_signed_vs_numpy(adt, bdt):
    A, B = rand_q((2, 5, 9), adt), rand_q((9, 4), bdt)
    za, zb = rand_q((), adt), rand_q((4,), bdt)
    feeds = {"A": A, "B": B, "za": za, "zb": zb}
    y = run_lite(node_model("MatMulInteger", feeds, ["Y"], [I32], opset=10), feeds)[0]
    expect = (A.astype(np.int64) - za) @ (B.astype(np.int64) - zb)
    np.testing.assert_array_equal(y, expect.astype(I32))
    check_ref(node_model("MatMulInteger", feeds, ["Y"], [I32], opset=10), feeds)


def test_matmul_integer_per_row_a_zero_point_vs_numpy():
    A, B = rand_q((2, 3, 5), U8), rand_q((5, 4), U8)
    za = rand_q((3,), U8)  # [M]: one per row
    feeds = {"A": A, "B": B, "za": za}
    y = run_lite(node_model("MatMulInteger", feeds, ["Y"], [I32], opset=10), feeds)[0]
    expect = (A.astype(np.int64) - za[:, None]) @ B.astype(np.int64)
    np.testing.assert_array_equal(y, expect)
    # The N-D form [D, M, 1] gives a different zero point per batch too.
    za3 = rand_q((2, 3, 1), U8)
    feeds["za"] = za3
    y = run_lite(node_model("MatMulInteger", feeds, ["Y"], [I32], opset=10), feeds)[0]
    np.testing.assert_array_equal(y, (A.astype(np.int64) - za3) @ B.astype(np.int64))


def test_matmul_integer_empty_inner_dimension_gives_zeros():
    # (onnxruntime leaves this output uninitialized.)
    A, B = np.zeros((3, 0), U8), np.zeros((0, 2), U8)
    feeds = {"A": A, "B": B, "za": a(3, U8)}
    y = run_lite(node_model("MatMulInteger", feeds, ["Y"], [I32], opset=10), feeds)[0]
    np.testing.assert_array_equal(y, np.zeros((3, 2), I32))


def test_matmul_integer_wraps_at_32_bits():
    # 40000 products of 255 * 255 pass 2^31: the int32 result wraps.
    K = 40000
    A = np.full((1, K), 255, U8)
    B = np.full((K, 1), 255, U8)
    y = run_lite(node_model("MatMulInteger", {"A": A, "B": B}, ["Y"], [I32], opset=10),
                 {"A": A, "B": B})[0]
    assert y[0, 0] == np.int64(255 * 255 * K).astype(np.uint32).astype(I32)


# ---------------------------------------------------------------------------------------
# QLinearMatMul


def qlmm_feeds(sa, sb, dt, sdt=F32, per_col=False):
    A, B = rand_q(sa, dt), rand_q(sb, dt, div=I8_SAFE if dt == I8 else 1)
    n = sb[-1] if len(sb) > 1 else 1
    return {
        "a": A, "as": a(0.02, sdt), "az": rand_q((), dt, div=2),
        "b": B, "bs": (RNG.uniform(0.01, 0.05, size=(n,)) if per_col else a(0.03, F32)).astype(sdt),
        "bz": rand_q((n,), dt, div=2) if per_col else rand_q((), dt, div=2),
        "ys": a(0.5, sdt), "yz": rand_q((), dt, div=2),
    }


@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((2, 3, 8), (8, 5)), ((2, 3, 8), (2, 8, 5)),
                                   ((4,), (4, 3)), ((40, 64), (64, 24))])
@pytest.mark.parametrize("dt", [U8, I8])
@pytest.mark.parametrize("per_col", [False, True])
def test_qlinear_matmul_vs_ort(sa, sb, dt, per_col):
    feeds = qlmm_feeds(sa, sb, dt, per_col=per_col and len(sb) == 2)
    m = node_model("QLinearMatMul", feeds, ["y"], [dt], opset=10)
    check_ort_or_ref(m, feeds)


@pytest.mark.parametrize("dt", [U8, I8])
def test_qlinear_matmul_opset21_float16_scales_vs_ort(dt):
    feeds = qlmm_feeds((3, 16), (16, 6), dt, sdt=F16)
    m = node_model("QLinearMatMul", feeds, ["y"], [dt], opset=21)
    check_ort(m, feeds)


def test_qlinear_matmul_constant_b_vs_ort():
    feeds = qlmm_feeds((5, 32), (32, 7), U8, per_col=True)
    consts = {k: feeds.pop(k) for k in ("b", "bs", "bz")}
    m = node_model("QLinearMatMul", feeds, ["y"], [U8], opset=10, consts=consts,
                   order=["a", "as", "az", "b", "bs", "bz", "ys", "yz"])
    check_ort(m, feeds)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dt", [U8, I8])
@pytest.mark.parametrize("sa,sb", [((200, 96), (96, 150)), ((3, 70, 33), (33, 130)),
                                   ((1, 64), (64, 1000)), ((97, 5), (5, 17))])
def test_qlinear_matmul_tiles_requantized_as_written(sa, sb, dt, threads):
    """A per-tensor a_scale with one b: each tile of the int32 product is requantized right
    after the kernel writes it (several row and column blocks, split over threads). Exact
    against numpy doing onnxruntime's arithmetic (the int64 product, the multiplier a_scale *
    b_scale / y_scale in float32, its product with the sum in float32, half-to-even, plus
    the zero point, saturated; onnxruntime 1.23 itself gets some of these uint8 products
    wrong on AMX CPUs), and equal to the same node with a per-row a_scale of equal values,
    which requantizes row by row."""
    for per_col in (False, True):
        feeds = qlmm_feeds(sa, sb, dt, per_col=per_col)
        m = node_model("QLinearMatMul", feeds, ["y"], [dt], opset=10)
        got = run_lite(m, feeds, threads)[0]
        acc = np.matmul(feeds["a"].astype(np.int64) - feeds["az"].astype(np.int64),
                        feeds["b"].astype(np.int64) - feeds["bz"].astype(np.int64))
        mult = (feeds["as"].astype(F32) * feeds["bs"].astype(F32)) / feeds["ys"].astype(F32)
        real = acc.astype(F32) * mult.astype(F32)
        info = np.iinfo(dt)
        want = np.clip(np.rint(real).astype(np.int64) + int(feeds["yz"]), info.min, info.max)
        np.testing.assert_array_equal(got, want.astype(dt))
        if len(sa) == 2:
            rows = dict(feeds, **{"as": np.full((sa[0], 1), feeds["as"], F32),
                                  "az": np.full((sa[0], 1), feeds["az"], dt)})
            m2 = node_model("QLinearMatMul", rows, ["y"], [dt], opset=10)
            np.testing.assert_array_equal(run_lite(m2, rows, threads)[0], got)


def test_qlinear_matmul_per_row_a_vs_numpy():
    # Power-of-two scales keep float and double products equal, so numpy is exact.
    A, B = rand_q((2, 3, 6), U8), rand_q((6, 4), U8)
    feeds = {"a": A, "as": a([0.5, 0.25, 0.125], F32), "az": a([1, 2, 3], U8),
             "b": B, "bs": a(2.0**-6, F32), "bz": a(9, U8), "ys": a(1.0, F32), "yz": a(100, U8)}
    y = run_lite(node_model("QLinearMatMul", feeds, ["y"], [U8], opset=10), feeds)[0]
    acc = (A.astype(np.int64) - feeds["az"][:, None]) @ (B.astype(np.int64) - 9)
    real = acc * feeds["as"][:, None].astype(np.float64) * 2.0**-6
    np.testing.assert_array_equal(y, np.clip(np.rint(real) + 100, 0, 255).astype(U8))


def test_qlinear_matmul_rounding_ties_and_saturation():
    # acc = a * 1 with scales making acc / 2 land on .5: ties go to even, then saturate.
    A = a([[1], [3], [5], [7], [-1], [-3], [127], [-128]], I8)
    B = a([[1]], I8)
    feeds = {"a": A, "as": a(0.5, F32), "az": a(0, I8), "b": B, "bs": a(1.0, F32),
             "bz": a(0, I8), "ys": a(1.0, F32), "yz": a(-70, I8)}
    y = check_ort(node_model("QLinearMatMul", feeds, ["y"], [I8], opset=10), feeds)[0]
    np.testing.assert_array_equal(y[:, 0], a([-70, -68, -68, -66, -70, -72, -6, -128], I8))


# ---------------------------------------------------------------------------------------
# ConvInteger / QLinearConv


CONV_CASES = [
    # x shape, w shape, attrs
    ((1, 3, 7, 7), (4, 3, 3, 3), {}),
    ((2, 4, 8, 6), (6, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    ((1, 2, 9, 9), (3, 2, 3, 3), {"strides": [2, 2], "dilations": [2, 1], "pads": [1, 0, 2, 1]}),
    ((1, 3, 10), (5, 3, 4), {"auto_pad": "SAME_UPPER"}),
    ((2, 4, 5, 5), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),
    # Depthwise with a channel multiplier of 2, stride 2, dilation, uneven padding.
    ((1, 3, 11, 9), (6, 1, 3, 3), {"group": 3, "strides": [2, 2], "dilations": [1, 2],
                                   "pads": [1, 0, 2, 1]}),
    # 2-D im2col rows longer than a vector, stride 2, padding on every side.
    ((1, 5, 12, 40), (7, 5, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 8, 4, 4), (5, 8, 1, 1), {}),
    ((1, 2, 4, 4, 4), (3, 2, 2, 2, 2), {"strides": [1, 2, 1]}),
]


@pytest.mark.parametrize("xs,ws,attrs", CONV_CASES)
@pytest.mark.parametrize("const_w", [False, True])
def test_conv_integer_uint8_vs_ort(xs, ws, attrs, const_w):
    x, w = rand_q(xs, U8), rand_q(ws, U8)
    zx, zw = a(RNG.integers(0, 255), U8), a(RNG.integers(0, 255), U8)
    inputs = {"x": x, "zx": zx} if const_w else {"x": x, "w": w, "zx": zx, "zw": zw}
    consts = {"w": w, "zw": zw} if const_w else {}
    m = node_model("ConvInteger", inputs, ["y"], [I32], attrs=attrs, opset=10, consts=consts,
                   order=["x", "w", "zx", "zw"])
    check_ort(m, inputs)


@pytest.mark.parametrize("xdt,wdt", [(U8, U8), (I8, I8), (U8, I8)])
def test_conv_integer_per_channel_zero_point_vs_reference(xdt, wdt):
    x, w = rand_q((1, 3, 6, 6), xdt), rand_q((4, 3, 3, 3), wdt)
    feeds = {"x": x, "w": w, "zx": rand_q((), xdt), "zw": rand_q((4,), wdt)}
    m = node_model("ConvInteger", feeds, ["y"], [I32], attrs={"pads": [1, 1, 1, 1]}, opset=10)
    check_ref(m, feeds)


def qconv_feeds(xs, ws, xdt, wdt, per_channel, bias):
    M = ws[0]
    f = {"x": rand_q(xs, xdt), "xs": a(0.05, F32), "xz": rand_q((), xdt, div=2),
         "w": rand_q(ws, wdt, div=I8_SAFE if wdt == I8 else 1),
         "ws": (RNG.uniform(0.005, 0.02, size=(M,)) if per_channel else a(0.01, F32)).astype(F32),
         "wz": (np.zeros((M,), wdt) if per_channel else rand_q((), wdt, div=4)),
         "ys": a(0.7, F32), "yz": rand_q((), xdt, div=2)}
    if bias:
        f["B"] = RNG.integers(-5000, 5000, size=(M,)).astype(I32)
    return f


@pytest.mark.parametrize("xs,ws,attrs", CONV_CASES)
@pytest.mark.parametrize("xdt,wdt,per_channel", [(U8, U8, False), (U8, I8, True), (I8, I8, True)])
def test_qlinear_conv_vs_ort(xs, ws, attrs, xdt, wdt, per_channel):
    feeds = qconv_feeds(xs, ws, xdt, wdt, per_channel, bias=True)
    m = node_model("QLinearConv", feeds, ["y"], [xdt], attrs=attrs, opset=10)
    check_ort(m, feeds)


def test_qlinear_conv_constant_weights_no_bias_vs_ort():
    feeds = qconv_feeds((2, 4, 6, 6), (8, 4, 3, 3), U8, I8, True, bias=False)
    consts = {k: feeds.pop(k) for k in ("w", "ws", "wz")}
    m = node_model("QLinearConv", feeds, ["y"], [U8], attrs={"pads": [1, 1, 1, 1]}, opset=10,
                   consts=consts, order=["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"])
    check_ort(m, feeds)


def test_qlinear_conv_per_channel_weight_zero_point_vs_reference():
    # Power-of-two scales: the reference's double arithmetic equals float here.
    feeds = {"x": rand_q((1, 2, 5, 5), U8), "xs": a(0.25, F32), "xz": a(128, U8),
             "w": rand_q((3, 2, 3, 3), U8), "ws": a([2**-5, 2**-6, 2**-7], F32),
             "wz": a([100, 120, 140], U8), "ys": a(0.5, F32), "yz": a(90, U8),
             "B": a([1000, -2000, 30], I32)}
    m = node_model("QLinearConv", feeds, ["y"], [U8], opset=10)
    check_ref(m, feeds)


# Long dot products: the float GEMM runs over chunks of K (|value - zero point| up to 255
# keeps a chunk at 258 products); constant and fed weights, one and four threads.


def run_threads(model, feeds, threads):
    so = ortlite.SessionOptions()
    so.intra_op_num_threads = threads
    return ortlite.InferenceSession(model.SerializeToString(), sess_options=so).run(None, feeds)


@pytest.mark.parametrize("const_w", [False, True])
@pytest.mark.parametrize("threads", [1, 4])
def test_long_dot_products_vs_ort(const_w, threads):
    A = rand_q((6, 1000), U8)
    A[:, :300] = 255
    B = rand_q((1000, 5), U8)
    B[:300] = 255
    inputs = {"A": A, "za": a(0, U8)}
    consts = {"B": B, "zb": a(0, U8)}
    if not const_w:
        inputs.update(consts)
        consts = {}
    m = node_model("MatMulInteger", inputs, ["Y"], [I32], opset=10, consts=consts,
                   order=["A", "B", "za", "zb"])
    assert_same(run_threads(m, inputs, threads), run_ort(m, inputs))

    f = qconv_feeds((2, 64, 9, 9), (16, 64, 3, 3), U8, I8, True, bias=True)
    f["x"][:, :40] = 255
    f["xz"] = a(0, U8)
    f["w"][:, :40] = -64
    order = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "B"]
    consts = {k: f.pop(k) for k in ("w", "ws", "wz")} if const_w else {}
    f["ys"] = a(40.0, F32)
    m = node_model("QLinearConv", f, ["y"], [U8], attrs={"pads": [1, 1, 1, 1]}, opset=10,
                   consts=consts, order=order)
    assert_same(run_threads(m, f, threads), run_ort(m, f))

    x, w = rand_q((1, 64, 8, 8), U8), rand_q((8, 64, 3, 3), U8)
    x[:, :50] = 255
    w[:, :50] = 255
    inputs = {"x": x, "xz": a(0, U8)}
    consts = {"w": w, "wz": a(0, U8)}
    if not const_w:
        inputs.update(consts)
        consts = {}
    m = node_model("ConvInteger", inputs, ["y"], [I32], opset=10, consts=consts,
                   order=["x", "w", "xz", "wz"])
    assert_same(run_threads(m, inputs, threads), run_ort(m, inputs))


# ---------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize("feeds,attrs,match", [
    # zero point shape differs from the scale's
    ({"x": np.ones((2, 3), F32), "s": np.ones(3, F32), "z": np.zeros(2, U8)}, {},
     "must have the shape of 'y_scale'"),
    ({"x": np.ones((2, 3), F32), "s": a(1, F32), "z": np.zeros(3, U8)}, {}, "must match"),
    # per-axis scale of the wrong length / rank
    ({"x": np.ones((2, 3), F32), "s": np.ones(2, F32)}, {}, "1-D with 3 elements"),
    ({"x": np.ones((2, 3), F32), "s": np.ones((2, 3), F32)}, {}, "1-D with 3 elements"),
    # axis out of range
    ({"x": np.ones((2, 3), F32), "s": np.ones(3, F32)}, {"axis": 2}, "axis"),
    ({"x": np.ones(3, F32), "s": np.ones(3, F32)}, {}, "axis"),
    # blocked: wrong block count, per-tensor scale with a block size
    ({"x": np.ones((2, 8), F32), "s": np.ones((2, 3), F32)}, {"block_size": 4}, "ceil"),
    ({"x": np.ones((2, 8), F32), "s": np.ones((3, 2), F32)}, {"block_size": 4}, "ceil"),
    ({"x": np.ones((2, 8), F32), "s": a(1, F32)}, {"block_size": 4}, "block_size"),
    # types
    ({"x": np.ones(3, F32), "s": a(1, F32), "z": a(0, I32)}, {}, "y_zero_point"),
    ({"x": np.ones(3, np.float64), "s": a(1, F32)}, {}, "input 'x'"),
    ({"x": np.ones(3, F32), "s": a(1, F32), "z": a(0, U8)},
     {"output_dtype": TensorProto.INT8}, "output_dtype"),
])
def test_quantize_errors(feeds, attrs, match):
    out = feeds["z"].dtype if "z" in feeds else U8
    m = node_model("QuantizeLinear", feeds, ["y"], [out], attrs=attrs)
    with pytest.raises(ortlite.InvalidArgument, match=match):
        run_lite(m, feeds)


@pytest.mark.parametrize("feeds,attrs,match", [
    ({"x": np.ones((2, 3), U8), "s": np.ones(3, F32), "z": np.zeros(3, I8)}, {}, "x_zero_point"),
    ({"x": np.ones((2, 3), U8), "s": np.ones(3, F32), "z": np.zeros((1, 3), U8)}, {},
     "must have the shape"),
    ({"x": np.ones((2, 8), U8), "s": np.ones((2, 3), F32)}, {"block_size": 2}, "ceil"),
    ({"x": np.ones(3, I32), "s": a(1, F32), "z": a(2, I32)}, {}, "int32"),
    ({"x": np.ones(3, F32), "s": a(1, F32)}, {}, "input 'x'"),
    ({"x": np.ones(3, U8), "s": a(1, np.float64)}, {}, "x_scale"),
])
def test_dequantize_errors(feeds, attrs, match):
    m = node_model("DequantizeLinear", feeds, ["y"], [feeds["s"].dtype], attrs=attrs)
    with pytest.raises(ortlite.InvalidArgument, match=match):
        run_lite(m, feeds)


@pytest.mark.parametrize("op,attrs,exc,match", [
    ("QuantizeLinear", {"block_size": -1}, ortlite.InvalidGraph, "block_size"),
    ("DequantizeLinear", {"block_size": -2}, ortlite.InvalidGraph, "block_size"),
    ("QuantizeLinear", {"output_dtype": TensorProto.FLOAT}, ortlite.InvalidGraph, "output_dtype"),
    ("QuantizeLinear", {"output_dtype": TensorProto.FLOAT8E8M0}, ortlite.InvalidGraph,
     "float8e8m0"),
    ("QuantizeLinear", {"output_dtype": 99}, ortlite.InvalidGraph, "type code 99"),
    ("QuantizeLinear", {"precision": TensorProto.INT8}, ortlite.InvalidGraph, "precision"),
    ("DequantizeLinear", {"output_dtype": TensorProto.INT32}, ortlite.InvalidGraph,
     "output_dtype"),
])
def test_quantize_attribute_errors_at_load(op, attrs, exc, match):
    x = np.ones(3, F32 if op == "QuantizeLinear" else U8)
    m = node_model(op, {"x": x, "s": a(1, F32)}, ["y"], [U8 if op == "QuantizeLinear" else F32],
                   attrs=attrs, opset=23)
    with pytest.raises(exc, match=match):
        session(m)


def test_dynamic_quantize_rejects_non_float():
    m = node_model("DynamicQuantizeLinear", {"x": np.ones(3, F16)}, ["y", "ys", "yz"],
                   [U8, F32, U8], opset=11)
    with pytest.raises(ortlite.InvalidArgument, match="float"):
        run_lite(m, {"x": np.ones(3, F16)})


@pytest.mark.parametrize("feeds,match", [
    ({"A": np.ones((2, 3), U8), "B": np.ones((4, 2), U8)}, "inner dimensions"),
    ({"A": np.ones((2, 3), F32), "B": np.ones((3, 2), U8)}, "'A'"),
    ({"A": np.ones((2, 3), U8), "B": np.ones((3, 2), U8), "za": np.zeros(3, U8)}, "a_zero_point"),
    ({"A": np.ones((2, 3), U8), "B": np.ones((3, 2), U8), "za": a(0, I8)}, "a_zero_point"),
    ({"A": np.ones((2, 3), U8), "B": np.ones((3, 2), U8), "za": a(0, U8),
      "zb": np.zeros((3,), U8)}, "b_zero_point"),
    ({"A": np.ones((2, 2, 3), U8), "B": np.ones((3, 3, 2), U8)}, "broadcast"),
])
def test_matmul_integer_errors(feeds, match):
    m = node_model("MatMulInteger", feeds, ["Y"], [I32], opset=10)
    with pytest.raises(ortlite.InvalidArgument, match=match):
        run_lite(m, feeds)


@pytest.mark.parametrize("change,match", [
    ({"ys": np.ones(2, F32)}, "y_scale"),
    ({"bs": np.ones(3, F32)}, "b_scale"),
    ({"az": a(0, I8)}, "a_zero_point"),
    ({"yz": a(0, I32)}, "y_zero_point"),
    ({"as": a(1, np.float64)}, "a_scale"),
])
def test_qlinear_matmul_errors(change, match):
    feeds = qlmm_feeds((2, 4), (4, 5), U8)
    feeds.update(change)
    m = node_model("QLinearMatMul", feeds, ["y"], [U8], opset=10)
    with pytest.raises(ortlite.InvalidArgument, match=match):
        run_lite(m, feeds)


@pytest.mark.parametrize("change,match", [
    ({"wz": np.zeros(3, U8)}, "w_zero_point"),
    ({"xz": np.zeros(2, U8)}, "x_zero_point"),
    ({"w": np.ones((4, 2, 3, 3), U8)}, "channels"),
    ({"x": np.ones((1, 3, 5), U8)}, "same rank"),
    ({"x": np.ones((1, 3, 5, 5), F32)}, "'x'"),
])
def test_conv_integer_errors(change, match):
    feeds = {"x": np.ones((1, 3, 5, 5), U8), "w": np.ones((4, 3, 3, 3), U8), "xz": a(0, U8),
             "wz": a(0, U8)}
    feeds.update(change)
    m = node_model("ConvInteger", feeds, ["y"], [I32], opset=10)
    with pytest.raises(ortlite.InvalidArgument, match=match):
        run_lite(m, feeds)


@pytest.mark.parametrize("change,match", [
    ({"ws": np.ones(3, F32)}, "w_scale"),
    ({"B": np.ones(3, I32)}, "'B'"),
    ({"B": np.ones(4, np.int64)}, "'B'"),
    ({"ys": np.ones(2, F32)}, "y_scale"),
])
def test_qlinear_conv_errors(change, match):
    feeds = qconv_feeds((1, 3, 5, 5), (4, 3, 3, 3), U8, U8, False, bias=True)
    feeds.update(change)
    m = node_model("QLinearConv", feeds, ["y"], [U8], opset=10)
    with pytest.raises(ortlite.InvalidArgument, match=match):
        run_lite(m, feeds)


def test_qlinear_conv_bad_group_is_rejected_at_load():
    feeds = qconv_feeds((1, 3, 5, 5), (4, 3, 3, 3), U8, U8, False, bias=False)
    m = node_model("QLinearConv", feeds, ["y"], [U8], attrs={"group": 0}, opset=10)
    with pytest.raises(ortlite.InvalidGraph, match="group"):
        session(m)


# ---------------------------------------------------------------------------------------
# The 8-bit integer GEMM (src/compute/int8_gemm.*): shapes that hit every tile edge, all
# four u8 / s8 combinations, scalar and per-column zero points, extreme values, the kernels
# below the CPU's best (ORTLITE_INT8_ISA), and the convolutions on it. numpy's int64 product
# is exact; onnxruntime is compared where its kernels are exact on every CPU (int8 operands
# limited with I8_SAFE: see above).

GEMM_SHAPES = [((1, 128, 256), (256, 256)), ((1, 1, 7), (7, 3)), ((3, 17, 33), (33, 65)),
               ((2, 1, 5, 33), (3, 33, 20)), ((7, 9), (9, 16)), ((6, 64), (64, 129))]
DT_PAIRS = [(U8, U8), (U8, I8), (I8, U8), (I8, I8)]


def mm_exact(A, B, za, zb):
    return ((A.astype(np.int64) - za) @ (B.astype(np.int64) - zb)).astype(I32)


def mm_model(A, B, za, zb, const_b):
    inputs = {"A": A, "za": za}
    consts = {"B": B, "zb": zb}
    if not const_b:
        inputs.update(consts)
        consts = {}
    m = node_model("MatMulInteger", inputs, ["Y"], [I32], opset=10, consts=consts,
                   order=["A", "B", "za", "zb"])
    return m, inputs


@pytest.mark.parametrize("sa,sb", GEMM_SHAPES)
@pytest.mark.parametrize("adt,bdt", DT_PAIRS)
@pytest.mark.parametrize("per_col", [False, True])
@pytest.mark.parametrize("const_b", [False, True])
def test_int8_gemm_matmul_integer_vs_numpy_and_ort(sa, sb, adt, bdt, per_col, const_b):
    A = rand_q(sa, adt, div=I8_SAFE if adt == I8 else 1)
    B = rand_q(sb, bdt, div=I8_SAFE if bdt == I8 else 1)
    za = rand_q((), adt, div=2)
    # A per-column zero point of a batched b: one row of N per matrix (onnxruntime's form).
    zshape = tuple(sb[:-2]) + (1, sb[-1]) if len(sb) > 2 else (sb[-1],)
    zb = rand_q(zshape, bdt, div=2) if per_col else rand_q((), bdt, div=2)
    m, inputs = mm_model(A, B, za, zb, const_b)
    y = run_lite(m, inputs)[0]
    np.testing.assert_array_equal(y, mm_exact(A, B, za, zb))
    if (adt, bdt) != (I8, U8):  # onnxruntime has no int8 x uint8 kernel
        assert_same([y], run_ort(m, inputs))


@pytest.mark.parametrize("adt,bdt", DT_PAIRS)
@pytest.mark.parametrize("const_b", [False, True])
def test_int8_gemm_extreme_values_vs_numpy(adt, bdt, const_b):
    # Every byte at its type's ends, zero points too: the u8 x s8 products reach 255 * 128
    # and four of them in a lane must not saturate anywhere.
    lo_a, hi_a = np.iinfo(adt).min, np.iinfo(adt).max
    lo_b, hi_b = np.iinfo(bdt).min, np.iinfo(bdt).max
    for K in (4, 5, 256, 1001):
        A = np.where(RNG.integers(0, 2, size=(9, K)) == 1, hi_a, lo_a).astype(adt)
        B = np.where(RNG.integers(0, 2, size=(K, 37)) == 1, hi_b, lo_b).astype(bdt)
        A[0], B[:, 0] = hi_a, lo_b
        A[1], B[:, 1] = lo_a, hi_b
        for za, zb in ((lo_a, hi_b), (hi_a, lo_b), (0, 0)):
            za, zb = a(za, adt), np.full((37,), zb, bdt)
            zb[3] = lo_b
            m, inputs = mm_model(A, B, za, zb, const_b)
            np.testing.assert_array_equal(run_lite(m, inputs)[0], mm_exact(A, B, za, zb))
    if adt == U8 and bdt == U8:  # onnxruntime's u8 x u8 kernels are exact everywhere
        assert_same(run_lite(m, inputs), run_ort(m, inputs))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_int8_gemm_threads_vs_numpy(threads):
    A, B = rand_q((2, 150, 300), U8), rand_q((300, 200), I8)
    za, zb = rand_q((), U8), rand_q((200,), I8)
    m, inputs = mm_model(A, B, za, zb, True)
    np.testing.assert_array_equal(run_threads(m, inputs, threads)[0], mm_exact(A, B, za, zb))


@pytest.mark.parametrize("isa", ["generic", "avx2", "avxvnni", "avx512vnni", "amx"])
def test_int8_gemm_kernel_sets_vs_numpy(isa, tmp_path):
    # Each kernel set the CPU runs (ORTLITE_INT8_ISA only caps the choice), in a fresh
    # process since the choice is made once.
    import subprocess
    import sys
    import textwrap
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np
        import helpers
        from helpers import run_lite
        rng = np.random.default_rng(1)
        # From 8 rows and K 128 the AMX tiles run: full and partial row tiles (16, 32 a
        # call), K in and past whole 64-byte tile steps, more than one 256-column call; K 61
        # to 64 from 32 rows and 256 columns too.
        for (M, K, N) in [(1, 7, 3), (5, 33, 65), (13, 256, 40), (6, 1001, 17), (8, 128, 16),
                          (17, 129, 33), (32, 192, 257), (33, 257, 300), (40, 1000, 31),
                          (32, 64, 300), (45, 61, 256), (31, 64, 512)]:
            for adt, bdt in [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.uint8),
                             (np.int8, np.int8)]:
                ia, ib = np.iinfo(adt), np.iinfo(bdt)
                A = rng.integers(ia.min, ia.max, size=(M, K), endpoint=True).astype(adt)
                B = rng.integers(ib.min, ib.max, size=(K, N), endpoint=True).astype(bdt)
                A[0, :] = ia.max
                B[:, 0] = ib.min
                za = np.asarray(ia.max, adt)
                zb = rng.integers(ib.min, ib.max, size=(N,), endpoint=True).astype(bdt)
                feeds = {"A": A, "B": B, "za": za, "zb": zb}
                m = helpers.node_model("MatMulInteger", feeds, ["Y"], [np.int32], opset=10)
                y = run_lite(m, feeds)[0]
                e = ((A.astype(np.int64) - za) @ (B.astype(np.int64) - zb)).astype(np.int32)
                np.testing.assert_array_equal(y, e)
        print("ok")
    """))
    import os
    env = dict(os.environ, ORTLITE_INT8_ISA=isa)
    tests_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join([tests_dir, env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("sa,sb", GEMM_SHAPES[:4])
@pytest.mark.parametrize("dt", [U8, I8])
@pytest.mark.parametrize("per_col", [False, True])
def test_int8_gemm_qlinear_matmul_vs_ort(sa, sb, dt, per_col):
    feeds = qlmm_feeds(sa, sb, dt, per_col=per_col)
    if per_col and len(sb) > 2:  # one row of N per matrix of b (onnxruntime's form)
        n = sb[-1]
        feeds["bs"] = RNG.uniform(0.01, 0.05, size=sb[:-2] + (1, n)).astype(F32)
        feeds["bz"] = rand_q(sb[:-2] + (1, n), dt, div=2)
    check_ort(node_model("QLinearMatMul", feeds, ["y"], [dt], opset=10), feeds)
    consts = {k: feeds.pop(k) for k in ("b", "bs", "bz")}
    if len(sb) == 2:
        m = node_model("QLinearMatMul", feeds, ["y"], [dt], opset=10, consts=consts,
                       order=["a", "as", "az", "b", "bs", "bz", "ys", "yz"])
        check_ort(m, feeds)


INT8_CONV_CASES = [
    ((1, 64, 28, 28), (128, 64, 1, 1), {}),
    ((1, 16, 9, 11), (24, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 8, 10, 9), (12, 8, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 8, 7, 7), (6, 4, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    ((1, 6, 8, 8), (10, 3, 1, 1), {"group": 2, "strides": [2, 2]}),
    # One input channel feeding many outputs (a first layer over a grey image: the GEMM,
    # not the depthwise loop), and a depthwise conv with a channel multiplier of 8.
    ((1, 1, 20, 37), (24, 1, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 9, 9), (16, 1, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
]


@pytest.mark.parametrize("xs,ws,attrs", INT8_CONV_CASES)
@pytest.mark.parametrize("const_w", [False, True])
def test_int8_gemm_conv_integer_uint8_vs_ort(xs, ws, attrs, const_w):
    x, w = rand_q(xs, U8), rand_q(ws, U8)
    x.flat[::7] = 255
    w.flat[::5] = 0
    zx, zw = a(RNG.integers(0, 255), U8), a(RNG.integers(0, 255), U8)
    inputs = {"x": x, "zx": zx} if const_w else {"x": x, "w": w, "zx": zx, "zw": zw}
    consts = {"w": w, "zw": zw} if const_w else {}
    m = node_model("ConvInteger", inputs, ["y"], [I32], attrs=attrs, opset=10, consts=consts,
                   order=["x", "w", "zx", "zw"])
    check_ort(m, inputs)


@pytest.mark.parametrize("xs,ws,attrs", INT8_CONV_CASES[1:])
@pytest.mark.parametrize("xdt,wdt", [(I8, I8), (U8, I8), (I8, U8)])
def test_int8_gemm_conv_integer_signed_vs_reference(xs, ws, attrs, xdt, wdt):
    feeds = {"x": rand_q(xs, xdt), "w": rand_q(ws, wdt), "zx": rand_q((), xdt),
             "zw": rand_q((ws[0],), wdt)}
    m = node_model("ConvInteger", feeds, ["y"], [I32], attrs=attrs, opset=10)
    check_ref(m, feeds)


@pytest.mark.parametrize("xs,ws,attrs", INT8_CONV_CASES)
@pytest.mark.parametrize("xdt,wdt,per_channel", [(U8, U8, False), (U8, I8, True), (I8, I8, True)])
@pytest.mark.parametrize("const_w", [False, True])
def test_int8_gemm_qlinear_conv_vs_ort(xs, ws, attrs, xdt, wdt, per_channel, const_w):
    feeds = qconv_feeds(xs, ws, xdt, wdt, per_channel, bias=True)
    order = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "B"]
    consts = {k: feeds.pop(k) for k in ("w", "ws", "wz")} if const_w else {}
    m = node_model("QLinearConv", feeds, ["y"], [xdt], attrs=attrs, opset=10, consts=consts,
                   order=order)
    check_ort_or_ref(m, feeds)


# The convolutions whose B is gathered by tap offsets (int8gemm::pack_b_conv, AVX-512 VBMI /
# VNNI): from x padded once with its zero point for 2-D convolutions of width stride 1 or
# 2, from x itself for pointwise ones. Blocks of positions that start mid-row (several
# blocks a plane), panels of 16 positions across output rows (widths not a multiple of 16,
# below 16: up to 4 rows a panel), K not a multiple of 4, Cin 1 / 3 / 16 / 64, groups,
# dilations, uneven pads; width stride 3 and the depthwise loop for contrast.
GATHER_CONV_CASES = [
    ((1, 16, 112, 112), (32, 16, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 32, 56, 56), (64, 32, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 3, 33, 35), (8, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 1, 20, 37), (24, 1, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((2, 64, 7, 7), (32, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 8, 9, 6), (4, 8, 2, 2), {"dilations": [2, 2], "pads": [0, 1, 1, 0]}),
    ((1, 16, 19, 23), (16, 4, 3, 3), {"group": 4, "strides": [2, 2], "dilations": [2, 2],
                                      "pads": [2, 1, 0, 2]}),
    ((1, 12, 9, 40), (6, 12, 5, 5), {"strides": [1, 2], "pads": [2, 2, 2, 2]}),
    ((1, 4, 10, 10), (4, 4, 3, 3), {"strides": [3, 3]}),
    # Depthwise (int8gemm::depthwise_padded): rows of 1 to 4 vectors and a tail, a channel
    # multiplier of 2, dilation, height stride 2 with width stride 1, width stride 3.
    ((1, 16, 20, 20), (16, 1, 3, 3), {"group": 16, "pads": [1, 1, 1, 1]}),
    ((1, 8, 9, 131), (8, 1, 3, 3), {"group": 8, "strides": [1, 2], "pads": [1, 1, 1, 1]}),
    ((1, 6, 12, 100), (12, 1, 5, 5), {"group": 6, "dilations": [2, 1], "pads": [4, 2, 4, 2]}),
    ((2, 24, 28, 28), (24, 1, 3, 3), {"group": 24, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 4, 7, 57), (4, 1, 3, 3), {"group": 4, "strides": [2, 1]}),
    ((1, 8, 7, 30), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}),
    ((1, 5, 11, 9), (5, 1, 3, 3), {"group": 5, "dilations": [1, 2], "pads": [1, 2, 1, 2]}),
    ((1, 4, 10, 10), (4, 1, 3, 3), {"group": 4, "strides": [3, 3]}),
    ((1, 64, 14, 14), (48, 64, 1, 1), {}),
    ((2, 16, 5, 5), (8, 16, 1, 1), {}),
    ((1, 6, 4, 50), (6, 3, 1, 1), {"group": 2}),
]


@pytest.mark.parametrize("xs,ws,attrs", GATHER_CONV_CASES)
@pytest.mark.parametrize("const_w", [False, True])
def test_gather_conv_integer_uint8_vs_ort(xs, ws, attrs, const_w):
    x, w = rand_q(xs, U8), rand_q(ws, U8)
    x.flat[::7] = 255
    x.flat[::11] = 0
    zx, zw = a(RNG.integers(0, 255), U8), a(RNG.integers(0, 255), U8)
    inputs = {"x": x, "zx": zx} if const_w else {"x": x, "w": w, "zx": zx, "zw": zw}
    consts = {"w": w, "zw": zw} if const_w else {}
    m = node_model("ConvInteger", inputs, ["y"], [I32], attrs=attrs, opset=10, consts=consts,
                   order=["x", "w", "zx", "zw"])
    check_ort_or_ref(m, inputs)


@pytest.mark.parametrize("xs,ws,attrs", GATHER_CONV_CASES)
@pytest.mark.parametrize("xdt,wdt,per_channel", [(U8, U8, False), (U8, I8, True), (I8, I8, True),
                                                 (U8, I8, False)])
def test_gather_qlinear_conv_vs_ort(xs, ws, attrs, xdt, wdt, per_channel):
    feeds = qconv_feeds(xs, ws, xdt, wdt, per_channel, bias=True)
    order = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "B"]
    consts = {k: feeds.pop(k) for k in ("w", "ws", "wz")}
    m = node_model("QLinearConv", feeds, ["y"], [xdt], attrs=attrs, opset=10, consts=consts,
                   order=order)
    check_ort_or_ref(m, feeds)


@pytest.mark.parametrize("isa", ["avx2", "avx512vnni"])
def test_gather_conv_same_below_and_at_the_best_kernel_set(isa, tmp_path):
    # The gather and the padded depthwise loop need AVX-512 VBMI / VNNI: with
    # ORTLITE_INT8_ISA=avx2 the im2col packing and the bounds-checked loop run instead. Both
    # give the exact sums (numpy's int64 convolution through a strided view).
    import os
    import subprocess
    import sys
    import textwrap
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        import helpers
        from helpers import run_lite
        rng = np.random.default_rng(3)
        for xs, ws, s, p in [((1, 16, 30, 30), (8, 16, 3, 3), 2, 1),
                             ((1, 1, 30, 70), (1, 1, 3, 3), 1, 1),
                             ((1, 1, 30, 70), (1, 1, 3, 3), 2, 1),
                             ((1, 3, 17, 21), (5, 3, 3, 3), 1, 1),
                             ((1, 32, 6, 6), (4, 32, 3, 3), 1, 0),
                             ((1, 24, 9, 9), (16, 24, 1, 1), 1, 0)]:
            for xdt, wdt in [(np.uint8, np.int8), (np.int8, np.int8), (np.uint8, np.uint8)]:
                ix, iw = np.iinfo(xdt), np.iinfo(wdt)
                x = rng.integers(ix.min, ix.max, size=xs, endpoint=True).astype(xdt)
                w = rng.integers(iw.min, iw.max, size=ws, endpoint=True).astype(wdt)
                zx = np.asarray(ix.max, xdt)
                zw = rng.integers(iw.min, iw.max, size=(ws[0],), endpoint=True).astype(wdt)
                feeds = {"x": x, "w": w, "zx": zx, "zw": zw}
                k = ws[2]
                m = helpers.node_model("ConvInteger", feeds, ["y"], [np.int32], opset=10,
                                       attrs={"strides": [s, s], "pads": [p] * 4})
                y = run_lite(m, feeds)[0]
                xp = np.pad(x.astype(np.int64) - int(zx), ((0, 0), (0, 0), (p, p), (p, p)))
                oh = (xs[2] + 2 * p - k) // s + 1
                ow = (xs[3] + 2 * p - k) // s + 1
                win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))
                win = win[:, :, ::s, ::s][:, :, :oh, :ow]
                wz = w.astype(np.int64) - zw.astype(np.int64)[:, None, None, None]
                e = np.einsum("ncyxij,mcij->nmyx", win, wz).astype(np.int32)
                np.testing.assert_array_equal(y, e)
        print("ok")
    """))
    env = dict(os.environ, ORTLITE_INT8_ISA=isa)
    tests_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join([tests_dir, env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16, np.int32])
@pytest.mark.parametrize("layout", ["tensor", "axis", "block"])
def test_dequantize_linear_float_exact(dtype, layout):
    """float(x - zero_point) * scale, bit for bit, over each type's full range (zero points
    at the ends too; int32 has none): per tensor, per axis and per block of 4 along axis 0,
    odd sizes, 1 and 2 threads."""
    info = np.iinfo(dtype)
    r = np.random.default_rng(np.dtype(dtype).itemsize * 10 + len(layout))
    x = r.integers(info.min, info.max, size=(12, 37), dtype=dtype, endpoint=True)
    x[0, :3] = [info.min, info.max, 0]
    pshape = {"tensor": (), "axis": (37,), "block": (3, 37)}[layout]
    scale = r.uniform(0.001, 3, size=pshape).astype(np.float32)
    consts = {"s": scale}
    zp = np.zeros(pshape, dtype)
    if dtype != np.int32:
        zp = r.integers(info.min, info.max, size=pshape, dtype=dtype, endpoint=True)
        consts["z"] = zp
    attrs = {"tensor": {}, "axis": {"axis": 1}, "block": {"axis": 0, "block_size": 4}}[layout]
    m = helpers.node_model("DequantizeLinear", {"x": x}, ["y"], out_dtypes=[np.float32],
                           attrs=attrs, opset=21, consts=consts)
    s_full, z_full = scale, zp.astype(np.int64)
    if layout == "axis":
        s_full, z_full = scale[None, :], z_full[None, :]
    elif layout == "block":
        s_full, z_full = np.repeat(scale, 4, axis=0), np.repeat(z_full, 4, axis=0)
    expected = (x.astype(np.int64) - z_full).astype(np.float32) * s_full
    for threads in (1, 2):
        got = run_lite(m, {"x": x}, threads=threads)[0]
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 32, 16, 16), (48, 32, 1, 1), {}),                                # pointwise
    ((1, 8, 14, 20), (12, 8, 3, 3), {"pads": [1, 1, 1, 1]}),              # 2-D, stride 1
    ((1, 8, 25, 33), (12, 8, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
])
def test_int8_conv_one_image_split_by_positions(xs, ws, attrs, threads):
    """One image and group whose positions fit one block: each thread takes a block of
    positions and packs its own B. QLinearConv against onnxruntime (onnx's reference where
    onnxruntime's AMX products are off), ConvInteger exactly against onnx's reference and the
    one-thread result."""
    feeds = qconv_feeds(xs, ws, U8, I8, True, bias=True)
    m = node_model("QLinearConv", feeds, ["y"], [U8], attrs=attrs, opset=10)
    expected = run_ort(m, feeds)
    actual = run_lite(m, feeds, threads)
    try:
        assert_same(actual, expected)
    except AssertionError:
        assert_same(actual, run_ref(m, feeds))
    x, w = rand_q(xs, U8), rand_q(ws, U8)
    inputs = {"x": x, "w": w, "xz": a(3, U8), "wz": a(100, U8)}
    m = node_model("ConvInteger", inputs, ["y"], [I32], attrs=attrs, opset=10,
                   order=["x", "w", "xz", "wz"])
    got = run_lite(m, inputs, threads)[0]
    want = run_lite(m, inputs, 1)[0]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, run_ref(m, inputs)[0])
