"""Load-time graph rewrites (src/graph/optimizer.cc) and the com.ortlite operators they
write (FusedConv, FusedExpandDepthwise, FusedMatMul, FusedGemm, Gelu, and com.microsoft
FastGelu for the tanh GELU): every model runs with
graph_optimization_level 0 (no rewrite) and 99, and both are compared with onnxruntime.
Whether a rewrite happened is visible in error messages, which name the node by its op
type ("FusedConv node 'conv'")."""

import math

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import randn, run_ort, session

F32 = np.float32
LEVELS = [ortlite.GraphOptimizationLevel.ORT_DISABLE_ALL, ortlite.GraphOptimizationLevel.ORT_ENABLE_ALL]


class G:
    """Builds a model: nodes, initializers, inputs and outputs by name."""

    def __init__(self, opset=17):
        self.nodes, self.inits, self.opset = [], [], opset

    def const(self, name, arr):
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def node(self, op, ins, outs, name=None, **attrs):
        self.nodes.append(helper.make_node(op, ins, outs, name=name or outs[0], **attrs))
        return outs[0]

    def model(self, inputs, outputs, graph_inputs_extra=()):
        vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in inputs]
        vi += list(graph_inputs_extra)
        vo = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs]
        g = helper.make_graph(self.nodes, "g", vi, vo, initializer=self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)])
        m.ir_version = 8
        return m


def check_levels(model, feeds, rel=2e-5, threads=1):
    """Both optimization levels against onnxruntime; returns the level-99 outputs."""
    expected = run_ort(model, feeds)
    out = None
    for level in LEVELS:
        out = session(model, threads, level).run(None, feeds)
        for a, e in zip(out, expected):
            assert a.shape == e.shape and a.dtype == e.dtype
            scale = float(np.abs(e).max()) + 1e-6
            np.testing.assert_allclose(a, e, rtol=rel * 10, atol=rel * scale)
    return out


def error_text(model, feeds, level=LEVELS[1]):
    """The error a run with bad feeds gives (input shapes undeclared, so that the kernels,
    not the feed check, see them)."""
    m = type(model)()
    m.CopyFrom(model)
    for vi in m.graph.input:
        vi.type.tensor_type.ClearField("shape")
    with pytest.raises(ortlite.OrtliteError) as e:
        session(m, 1, level).run(None, feeds)
    return str(e.value)


def conv_bn(g, x, cin, cout, name, seed, k=3, stride=1):
    w = g.const(name + "_w", randn((cout, cin, k, k), seed, 1.0 / math.sqrt(cin * k * k)))
    y = g.node("Conv", [x, w], [name], kernel_shape=[k, k], strides=[stride, stride],
               pads=[k // 2] * 4)
    r = np.random.default_rng(seed + 100)
    p = [g.const(f"{name}_{t}", r.uniform(lo, hi, cout).astype(F32))
         for t, lo, hi in (("s", 0.5, 1.5), ("b", -0.1, 0.1), ("m", -0.1, 0.1), ("v", 0.5, 1.5))]
    return g.node("BatchNormalization", [y] + p, [name + "_bn"], epsilon=1e-5)


# ---- Conv --------------------------------------------------------------------------------


@pytest.mark.parametrize("threads", [1, 2])
def test_resnet_block(threads):
    g = G()
    h = g.node("Relu", [conv_bn(g, "x", 16, 32, "c1", 1)], ["r1"])
    y = conv_bn(g, h, 32, 32, "c2", 2)
    s = conv_bn(g, "x", 16, 32, "sc", 3, k=1)
    g.node("Relu", [g.node("Add", [y, s], ["sum"])], ["out"])
    model = g.model([("x", (2, 16, 12, 12))], ["out"])
    feeds = {"x": randn((2, 16, 12, 12), 4)}
    check_levels(model, feeds, threads=threads)
    # The three convolutions became FusedConv (the BatchNormalization, Add and Relu nodes
    # are gone): a bad input is reported by the fused node.
    assert "FusedConv node 'c1'" in error_text(model, {"x": randn((2, 8, 12, 12), 4)})


@pytest.mark.parametrize("act, extra", [
    ("Relu", {}), ("LeakyRelu", {"alpha": 0.2}), ("Sigmoid", {}), ("Tanh", {}),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("Clip6", {}), ("Clip6old", {}),
    ("HardSwish", {}),
])
@pytest.mark.parametrize("depthwise", [False, True])
def test_conv_activation(act, extra, depthwise):
    opset = 6 if act == "Clip6old" else 17
    g = G(opset)
    c = 16
    w = g.const("w", randn((c, 1 if depthwise else c, 3, 3), 1, 0.5))
    b = g.const("b", randn((c,), 2))
    y = g.node("Conv", ["x", w, b], ["conv"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
               group=c if depthwise else 1)
    if act == "Clip6":
        g.node("Clip", [y, g.const("lo", np.array(0, F32)), g.const("hi", np.array(6, F32))],
               ["out"])
    elif act == "Clip6old":
        g.node("Clip", [y], ["out"], min=0.0, max=6.0)
    else:
        g.node(act, [y], ["out"], **extra)
    model = g.model([("x", (1, c, 9, 9))], ["out"])
    check_levels(model, {"x": randn((1, c, 9, 9), 3, 4.0)})
    assert "FusedConv node 'conv'" in error_text(model, {"x": randn((1, c + 1, 9, 9), 3)})


@pytest.mark.parametrize("order", ["x_first", "sigmoid_first"])
@pytest.mark.parametrize("depthwise", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_conv_silu(order, depthwise, threads):
    """Conv -> x * Sigmoid(x) (YOLO's SiLU) becomes one FusedConv with activation Silu."""
    g = G()
    c = 16
    w = g.const("w", randn((c, 1 if depthwise else c, 3, 3), 1, 0.5))
    y = g.node("Conv", ["x", w, g.const("b", randn((c,), 2))], ["conv"], kernel_shape=[3, 3],
               pads=[1, 1, 1, 1], group=c if depthwise else 1)
    s = g.node("Sigmoid", [y], ["sig"])
    g.node("Mul", [y, s] if order == "x_first" else [s, y], ["out"])
    model = g.model([("x", (2, c, 20, 24))], ["out"])
    check_levels(model, {"x": randn((2, c, 20, 24), 3, 4.0)}, threads=threads)
    assert "FusedConv node 'conv'" in error_text(model, {"x": randn((2, c + 1, 20, 24), 3)})


def test_conv_silu_not_fused_when_the_sigmoid_is_read_elsewhere():
    g = G()
    w = g.const("w", randn((8, 8, 3, 3), 1, 0.5))
    y = g.node("Conv", ["x", w], ["conv"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    s = g.node("Sigmoid", [y], ["sig"])
    g.node("Mul", [y, s], ["out"])
    model = g.model([("x", (1, 8, 9, 9))], ["out", "sig"])
    check_levels(model, {"x": randn((1, 8, 9, 9), 3)})
    err = error_text(model, {"x": randn((1, 9, 9, 9), 3)})
    assert "Conv node 'conv'" in err and "FusedConv" not in err


def hard_swish_chain(g, y, orders=(0, 0, 0), const_shape=(), div=6.0, add=3.0, hi=6.0):
    """(y * Clip(y + 3, 0, 6)) / 6 as Paddle exports write HardSwish; `orders` swaps the
    Add's and the Mul's operands."""
    three = g.const(y + "_three", np.full(const_shape, add, F32))
    t = g.node("Add", [y, three] if orders[0] == 0 else [three, y], [y + "_add"])
    c = g.node("Clip", [t, g.const(y + "_lo", np.array(0, F32)),
                        g.const(y + "_hi", np.array(hi, F32))], [y + "_clip"])
    m = g.node("Mul", [y, c] if orders[1] == 0 else [c, y], [y + "_mul"])
    return g.node("Div", [m, g.const(y + "_six", np.full(const_shape, div, F32))], [y + "_hs"])


@pytest.mark.parametrize("orders", [(0, 0, 0), (1, 1, 0)], ids=["x_first", "const_first"])
@pytest.mark.parametrize("const_shape", [(), (1,)], ids=["scalar", "rank1"])
@pytest.mark.parametrize("depthwise", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_conv_bn_hard_swish_chain(orders, const_shape, depthwise, threads):
    """Conv -> BatchNormalization -> Add 3, Clip 0 6, Mul, Div 6 (PP-OCR's HardSwish)
    becomes one FusedConv with activation HardSwishChain, whose values are those of the
    four nodes exactly (level 0 runs them one by one), NaN included."""
    g = G()
    c = 16
    w = g.const("w", randn((c, 1 if depthwise else c, 3, 3), 1, 0.5))
    y = g.node("Conv", ["x", w], ["conv"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
               group=c if depthwise else 1)
    r = np.random.default_rng(7)
    p = [g.const(f"bn_{t}", r.uniform(lo, hi, c).astype(F32))
         for t, lo, hi in (("s", 0.5, 1.5), ("b", -0.1, 0.1), ("m", -0.1, 0.1), ("v", 0.5, 1.5))]
    y = g.node("BatchNormalization", [y] + p, ["bn"], epsilon=1e-5)
    before = g.model([("x", (1, c, 20, 24))], ["bn"])  # the same FusedConv, unactivated
    hard_swish_chain(g, y, orders, const_shape)
    model = g.model([("x", (1, c, 20, 24))], ["bn_hs"])
    x = randn((1, c, 20, 24), 3, 4.0)
    x[0, 3, 5, 7] = np.nan
    x[0, 4, 0, 0] = -np.inf
    x[0, 4, 0, 1] = np.inf
    bn = session(before, threads, LEVELS[1]).run(None, {"x": x})[0]
    with np.errstate(invalid="ignore"):
        expected = (bn * np.minimum(np.maximum(bn + F32(3), F32(0)), F32(6))) / F32(6)
    np.testing.assert_array_equal(session(model, threads, LEVELS[1]).run(None, {"x": x})[0],
                                  expected)
    assert np.isnan(expected).any()
    x = randn((1, c, 20, 24), 3, 4.0)
    check_levels(model, {"x": x}, threads=threads)
    assert "FusedConv node 'conv'" in error_text(model, {"x": randn((1, c + 1, 20, 24), 3)})


@pytest.mark.parametrize("change", ["add4", "div5", "hi7", "clip_read", "mul_other"])
def test_hard_swish_chain_not_fused_when_it_differs(change):
    """Other constants, or a value of the chain read elsewhere: the nodes stay, and the
    Conv is fused alone (its output keeps two readers)."""
    g = G()
    w = g.const("w", randn((8, 8, 3, 3), 1, 0.5))
    y = g.node("Conv", ["x", w], ["conv"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    kw = {"add4": dict(add=4.0), "div5": dict(div=5.0), "hi7": dict(hi=7.0)}.get(change, {})
    out = hard_swish_chain(g, y, **kw)
    outs = [out]
    if change == "clip_read":
        outs.append("conv_clip")
    if change == "mul_other":
        g.nodes[2].input[0] = "x"  # the Mul reads x, not the Conv's output
    model = g.model([("x", (1, 8, 9, 9))], outs)
    out_ref = session(model, 1, LEVELS[0]).run(None, {"x": randn((1, 8, 9, 9), 3, 4.0)})
    out_opt = session(model, 1, LEVELS[1]).run(None, {"x": randn((1, 8, 9, 9), 3, 4.0)})
    for a, b in zip(out_opt, out_ref):
        np.testing.assert_array_equal(a, b)
    err = error_text(model, {"x": randn((1, 9, 9, 9), 3)})
    assert "Conv node 'conv'" in err and "FusedConv" not in err


@pytest.mark.parametrize("op", ["MatMul", "Gemm"])
def test_matmul_gemm_hard_swish_chain(op):
    """MatMul + bias, or Gemm, -> the HardSwish chain: one FusedMatMul / FusedGemm, the
    values of the nodes."""
    g = G()
    if op == "MatMul":
        y = g.node("Add", [g.node("MatMul", ["x", g.const("w", randn((64, 48), 1, 0.3))],
                                  ["mm"]), g.const("b", randn((48,), 2))], ["mmb"])
    else:
        y = g.node("Gemm", ["x", g.const("w", randn((48, 64), 1, 0.3)),
                            g.const("b", randn((48,), 2))], ["mmb"], transB=1)
    hard_swish_chain(g, y)
    before = g.model([("x", (5, 64))], ["mmb"])
    model = g.model([("x", (5, 64))], ["mmb_hs"])
    x = randn((5, 64), 3, 3.0)
    check_levels(model, {"x": x})
    y = session(before, 1, LEVELS[1]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(session(model, 1, LEVELS[1]).run(None, {"x": x})[0],
                                  (y * np.clip(y + F32(3), F32(0), F32(6))) / F32(6))
    assert f"Fused{op}" in error_text(model, {"x": randn((5, 63), 3)})


@pytest.mark.parametrize("act, extra", [
    ("HardSwish", {}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("LeakyRelu", {"alpha": 0.1}),
    ("Sigmoid", {}), ("HardSwishChain", {}),
])
@pytest.mark.parametrize("op", ["Conv1x1", "MatMul"])
def test_fused_activation_equals_the_unfused_node(act, extra, op):
    """An activation the fused GEMM applies after its blocks (1x1 Conv, MatMul + bias) gives
    the values of the operator it replaced exactly: level 0 runs the same product, then the
    activation's own kernel."""
    g = G()
    if op == "Conv1x1":
        y = g.node("Conv", ["x", g.const("w", randn((64, 32, 1, 1), 1, 0.3)),
                            g.const("b", randn((64,), 2))], ["c"], kernel_shape=[1, 1])
        shape = (1, 32, 24, 40)
    else:
        y = g.node("Add", [g.node("MatMul", ["x", g.const("w", randn((32, 64), 1, 0.3))],
                                  ["mm"]), g.const("b", randn((64,), 2))], ["c"])
        shape = (96, 32)
    if act == "HardSwishChain":
        out = hard_swish_chain(g, y)
    else:
        out = g.node(act, [y], ["act"], **extra)
    model = g.model([("x", shape)], [out])
    x = randn(shape, 3, 4.0)
    got = session(model, 1, LEVELS[1]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, session(model, 1, LEVELS[0]).run(None, {"x": x})[0])


@pytest.mark.parametrize("z_shape", [(1, 32, 8, 8), (1, 32, 1, 1), (1, 1, 8, 8), (2, 32, 8, 8)])
def test_conv_add_broadcast(z_shape):
    # Z of the conv's shape is added in the epilogue; one that broadcasts, or that makes the
    # output larger than the conv's, gives what Add gives.
    g = G()
    w = g.const("w", randn((32, 16, 3, 3), 1, 0.2))
    y = g.node("Conv", ["x", w], ["conv"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    g.node("Relu", [g.node("Add", ["z", y], ["sum"])], ["out"])
    model = g.model([("x", (1, 16, 8, 8)), ("z", z_shape)], ["out"])
    check_levels(model, {"x": randn((1, 16, 8, 8), 2), "z": randn(z_shape, 3)})


def test_conv_add_z_mismatch_is_an_error():
    g = G()
    w = g.const("w", randn((8, 8, 3, 3), 1))
    g.node("Add", [g.node("Conv", ["x", w], ["conv"], kernel_shape=[3, 3]), "z"], ["out"])
    model = g.model([("x", (1, 8, 6, 6)), ("z", (1, 8, 5, 5))], ["out"])
    feeds = {"x": randn((1, 8, 6, 6), 2), "z": randn((1, 8, 5, 5), 3)}
    for level in LEVELS:
        with pytest.raises(ortlite.InvalidArgument):
            session(model, 1, level).run(None, feeds)


def test_bn_output_is_a_graph_output():
    g = G()
    bn = conv_bn(g, "x", 8, 8, "c", 1)
    g.node("Relu", [bn], ["out"])
    model = g.model([("x", (1, 8, 6, 6))], ["c_bn", "out"])
    check_levels(model, {"x": randn((1, 8, 6, 6), 2)})
    # Nothing fused: the Conv stays a Conv.
    assert "Conv node 'c'" in error_text(model, {"x": randn((1, 4, 6, 6), 2)})


def test_conv_output_read_twice():
    g = G()
    w = g.const("w", randn((8, 8, 3, 3), 1))
    y = g.node("Conv", ["x", w], ["conv"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    g.node("Add", [g.node("Relu", [y], ["r"]), y], ["out"])
    model = g.model([("x", (1, 8, 6, 6))], ["out"])
    check_levels(model, {"x": randn((1, 8, 6, 6), 2)})
    assert "FusedConv" not in error_text(model, {"x": randn((1, 4, 6, 6), 2)})


def test_overridable_conv_weights():
    # W and the BatchNormalization scale are initializers that are also graph inputs: a feed
    # may replace them, so neither is folded and the fed values are used.
    g = G()
    bn = conv_bn(g, "x", 8, 8, "c", 1)
    g.node("Relu", [bn], ["out"])
    extra = [helper.make_tensor_value_info("c_w", TensorProto.FLOAT, [8, 8, 3, 3]),
             helper.make_tensor_value_info("c_s", TensorProto.FLOAT, [8])]
    model = g.model([("x", (1, 8, 6, 6))], ["out"], extra)
    x = randn((1, 8, 6, 6), 2)
    check_levels(model, {"x": x})
    feeds = {"x": x, "c_w": randn((8, 8, 3, 3), 9), "c_s": np.full(8, 2.0, F32)}
    expected = run_ort(model, feeds)[0]
    for level in LEVELS:
        np.testing.assert_allclose(session(model, 1, level).run(None, feeds)[0], expected,
                                   rtol=1e-4, atol=1e-4)


def test_session_options_initializer_replaces_folded_weights():
    g = G()
    g.node("Relu", [conv_bn(g, "x", 8, 8, "c", 1)], ["out"])
    model = g.model([("x", (1, 8, 6, 6))], ["out"])
    w2 = randn((8, 8, 3, 3), 7)
    ref = G()
    ref.inits = [i if i.name != "c_w" else numpy_helper.from_array(w2, "c_w") for i in g.inits]
    ref.nodes = g.nodes
    expected = run_ort(ref.model([("x", (1, 8, 6, 6))], ["out"]), {"x": randn((1, 8, 6, 6), 2)})[0]
    so = ortlite.SessionOptions()
    w2_value = ortlite.OrtValue.ortvalue_from_numpy(w2)
    so.add_initializer("c_w", w2_value)
    s = ortlite.InferenceSession(model.SerializeToString(), so)
    np.testing.assert_allclose(s.run(None, {"x": randn((1, 8, 6, 6), 2)})[0], expected, rtol=1e-4,
                               atol=1e-4)


def test_mobilenet_block():
    g = G()
    lo, hi = g.const("lo", np.array(0, F32)), g.const("hi", np.array(6, F32))
    c, e = 16, 96
    w1, b1 = g.const("w1", randn((e, c, 1, 1), 1, 0.3)), g.const("b1", randn((e,), 2, 0.1))
    w2, b2 = g.const("w2", randn((e, 1, 3, 3), 3, 0.3)), g.const("b2", randn((e,), 4, 0.1))
    w3, b3 = g.const("w3", randn((c, e, 1, 1), 5, 0.1)), g.const("b3", randn((c,), 6, 0.1))
    h = g.node("Clip", [g.node("Conv", ["x", w1, b1], ["e"], kernel_shape=[1, 1]), lo, hi], ["e6"])
    h = g.node("Clip", [g.node("Conv", [h, w2, b2], ["d"], kernel_shape=[3, 3],
                               pads=[1, 1, 1, 1], group=e), lo, hi], ["d6"])
    h = g.node("Conv", [h, w3, b3], ["p"], kernel_shape=[1, 1])
    g.node("Add", ["x", h], ["out"])
    model = g.model([("x", (1, c, 28, 28))], ["out"])
    check_levels(model, {"x": randn((1, c, 28, 28), 7)})


# ---- 1x1 Conv + depthwise Conv: FusedExpandDepthwise ------------------------------------


def act_node(g, kind, x, out, lo_hi):
    if kind == "Clip6":
        return g.node("Clip", [x, *lo_hi], [out])
    if kind == "LeakyRelu":
        return g.node("LeakyRelu", [x], [out], alpha=0.1)
    if kind:
        return g.node(kind, [x], [out])
    return x


def bn_params(g, name, n, seed):
    r = np.random.default_rng(seed)
    return [g.const(f"{name}_{t}", r.uniform(lo, hi, n).astype(F32))
            for t, lo, hi in (("s", 0.5, 1.5), ("b", -0.1, 0.1), ("m", -0.1, 0.1), ("v", 0.5, 1.5))]


def expand_dw(c, e, shape, k=3, stride=1, pads=(1, 1, 1, 1), acts=("Clip6", "Clip6"),
              bn=False, dilation=1, bias=True, seed=0):
    """x -> 1x1 Conv (c -> e) [+ BN] [+ act] -> depthwise k x k Conv [+ BN] [+ act]."""
    g = G()
    lo_hi = (g.const("lo", np.array(0, F32)), g.const("hi", np.array(6, F32)))
    ins = ["x", g.const("w1", randn((e, c, 1, 1), seed + 1, 1.0 / math.sqrt(c)))]
    if bias:
        ins.append(g.const("b1", randn((e,), seed + 2, 0.1)))
    h = g.node("Conv", ins, ["e"], kernel_shape=[1, 1])
    if bn:
        h = g.node("BatchNormalization", [h] + bn_params(g, "bn1", e, seed + 3), ["e_bn"])
    h = act_node(g, acts[0], h, "e_act", lo_hi)
    ins = [h, g.const("w2", randn((e, 1, k, k), seed + 4, 1.0 / k))]
    if bias:
        ins.append(g.const("b2", randn((e,), seed + 5, 0.1)))
    h = g.node("Conv", ins, ["d"], kernel_shape=[k, k], strides=[stride, stride], pads=list(pads),
               dilations=[dilation, dilation], group=e)
    if bn:
        h = g.node("BatchNormalization", [h] + bn_params(g, "bn2", e, seed + 6), ["d_bn"])
    act_node(g, acts[1], h, "out", lo_hi)
    if not acts[1]:
        g.nodes[-1].output[0] = "out"
    return g.model([("x", shape)], ["out"])


# (C, expanded C, N, H, W, kernel, stride, pads, activations): images of 196 pixels or more
# run as tasks of (band of rows, 32 channels) (several bands here, and a partial group of
# channels), smaller ones as the two convolutions one after the other.
EXPAND_DW = [
    (8, 48, 1, 80, 80, 3, 1, (1, 1, 1, 1), ("Clip6", "Clip6")),
    (8, 48, 1, 77, 83, 3, 2, (1, 1, 1, 1), ("Relu", "Relu")),        # odd sizes, stride 2
    (6, 40, 2, 64, 70, 3, 2, (0, 1, 1, 0), ("Clip6", "Clip6")),      # asymmetric pads, N = 2
    (4, 36, 1, 90, 75, 5, 1, (2, 2, 2, 2), ("", "")),                # 5x5, no activation
    (4, 36, 1, 90, 75, 3, 1, (3, 2, 3, 2), ("LeakyRelu", "Sigmoid")),  # pads beyond the kernel
    (5, 40, 1, 81, 81, 5, 2, (2, 2, 2, 2), ("Clip6", "Tanh")),       # 5x5 stride 2
    (16, 96, 1, 12, 15, 3, 1, (1, 1, 1, 1), ("Clip6", "Clip6")),     # small: two steps
    (16, 80, 1, 14, 14, 3, 1, (1, 1, 1, 1), ("Clip6", "Clip6")),     # 196 pixels: bands
    (24, 144, 2, 14, 14, 3, 2, (1, 1, 1, 1), ("Relu", "")),          # 14x14 stride 2, N = 2
    (8, 48, 1, 80, 80, 3, 3, (1, 1, 1, 1), ("Clip6", "Clip6")),      # stride 3
    # Small images channels-last: the product's column runs, each followed by its channels'
    # depthwise output on the thread that computed them (a product split at 2 and 3 threads)
    (160, 960, 1, 7, 7, 3, 1, (1, 1, 1, 1), ("Clip6", "Clip6")),     # MobileNetV2's 7 x 7
    (96, 200, 2, 9, 11, 3, 2, (1, 0, 0, 1), ("Relu", "HardSwish")),  # stride 2, 200 channels
    (64, 120, 1, 6, 6, 5, 1, (2, 2, 2, 2), ("", "Sigmoid")),         # 5x5, act after
    (24, 40, 1, 13, 13, 3, 1, (1, 1, 1, 1), ("LeakyRelu", "")),      # 40: a partial vector
]


@pytest.mark.parametrize("case", EXPAND_DW,
                         ids=lambda c: f"{c[0]}x{c[1]}_{c[3]}x{c[4]}_k{c[5]}s{c[6]}")
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_expand_depthwise(case, threads):
    c, e, n, h, w, k, s, pads, acts = case
    model = expand_dw(c, e, (n, c, h, w), k, s, pads, acts)
    check_levels(model, {"x": randn((n, c, h, w), 9, 2.0)}, threads=threads)
    assert "FusedExpandDepthwise node 'e'" in error_text(model, {"x": randn((n, c + 1, h, w), 9)})


@pytest.mark.parametrize("threads", [1, 2])
def test_expand_depthwise_batchnorm_and_dilation(threads):
    # BatchNormalization after both convolutions (folded: w_scale on both halves), and a
    # dilated depthwise kernel (the two convolutions one after the other).
    for dilation, shape in ((1, (1, 8, 75, 80)), (2, (1, 8, 75, 80)), (1, (2, 8, 9, 11))):
        model = expand_dw(8, 48, shape, pads=(dilation,) * 4, bn=True, dilation=dilation,
                          bias=False, acts=("Relu", "Clip6"))
        check_levels(model, {"x": randn(shape, 5)}, threads=threads)


def test_expand_depthwise_nan_and_inf_kept():
    model = expand_dw(4, 40, (1, 4, 80, 80), acts=("", "Relu"))
    x = randn((1, 4, 80, 80), 3)
    x[0, 1, 10, 10] = np.nan
    x[0, 2, 40, 79] = np.inf
    expected = run_ort(model, {"x": x})[0]
    for level in LEVELS:
        np.testing.assert_allclose(session(model, 1, level).run(None, {"x": x})[0], expected,
                                   rtol=2e-4, atol=2e-4)


def test_expand_depthwise_not_fused():
    # The 1x1 output is also a graph output; a depthwise multiplier of 2; a 1x1 conv with
    # stride 2: each stays as it was.
    model = expand_dw(8, 16, (1, 8, 12, 12))
    model.graph.output.append(helper.make_tensor_value_info("e_act", TensorProto.FLOAT, None))
    check_levels(model, {"x": randn((1, 8, 12, 12), 1)})
    assert "FusedExpandDepthwise" not in error_text(model, {"x": randn((1, 9, 12, 12), 1)})
    g = G()
    h = g.node("Conv", ["x", g.const("w1", randn((8, 4, 1, 1), 1))], ["e"], kernel_shape=[1, 1])
    g.node("Conv", [h, g.const("w2", randn((16, 1, 3, 3), 2))], ["out"], kernel_shape=[3, 3],
           pads=[1, 1, 1, 1], group=8)
    model = g.model([("x", (1, 4, 10, 10))], ["out"])
    check_levels(model, {"x": randn((1, 4, 10, 10), 3)})
    assert "FusedExpandDepthwise" not in error_text(model, {"x": randn((1, 5, 10, 10), 3)})
    g = G()
    h = g.node("Conv", ["x", g.const("w1", randn((8, 4, 1, 1), 1))], ["e"], kernel_shape=[1, 1],
               strides=[2, 2])
    g.node("Conv", [h, g.const("w2", randn((8, 1, 3, 3), 2))], ["out"], kernel_shape=[3, 3],
           pads=[1, 1, 1, 1], group=8)
    model = g.model([("x", (1, 4, 10, 10))], ["out"])
    check_levels(model, {"x": randn((1, 4, 10, 10), 3)})
    assert "FusedExpandDepthwise" not in error_text(model, {"x": randn((1, 5, 10, 10), 3)})


# ---- MatMul, Gemm, GELU -----------------------------------------------------------------


def gelu(g, f, order):
    sqrt2, one, half = g.const("sqrt2", np.array(math.sqrt(2), F32)), g.const(
        "one", np.array(1, F32)), g.const("half", np.array(0.5, F32))
    if order == "div":
        t = g.node("Div", [f, sqrt2], ["t"])
    else:
        t = g.node("Mul", [g.const("isq", np.array(1 / math.sqrt(2), F32)), f], ["t"])
    a = g.node("Add", [one, g.node("Erf", [t], ["erf"])], ["a"])
    if order in ("div", "mul"):  # (x * a) * 0.5
        return g.node("Mul", [g.node("Mul", [f, a], ["m1"]), half], ["out"])
    if order == "half_first":  # (x * 0.5) * a
        return g.node("Mul", [g.node("Mul", [half, f], ["h"]), a], ["out"])
    return g.node("Mul", [f, g.node("Mul", [a, half], ["m1"])], ["out"])  # x * (a * 0.5)


@pytest.mark.parametrize("order", ["div", "mul", "half_first", "half_on_a"])
def test_matmul_bias_gelu(order):
    g = G()
    w, b = g.const("w", randn((64, 96), 1, 0.2)), g.const("b", randn((96,), 2))
    f = g.node("Add", [g.node("MatMul", ["x", w], ["mm"]), b], ["f"])
    gelu(g, f, order)
    model = g.model([("x", (2, 5, 64))], ["out"])
    check_levels(model, {"x": randn((2, 5, 64), 3)})
    assert "FusedMatMul node 'mm'" in error_text(model, {"x": randn((2, 5, 63), 3)})


def test_gelu_alone_and_graph_output_inside():
    g = G()
    gelu(g, "x", "div")
    model = g.model([("x", (3, 50))], ["out"])
    check_levels(model, {"x": randn((3, 50), 1, 3.0)})
    # The Erf output is also a graph output: no Gelu node.
    model2 = g.model([("x", (3, 50))], ["out", "erf"])
    check_levels(model2, {"x": randn((3, 50), 1, 3.0)})


def tanh_gelu(g, f, cube, order, c1=0.044715):
    """0.5 f (1 + tanh(sqrt(2 / pi) (f + c1 f^3))), f^3 and the outer product as given."""
    if cube == "pow":
        f3 = g.node("Pow", [f, g.const("three", np.array(3, F32))], ["f3"])
    elif cube == "mul3":  # (f * f) * f
        f3 = g.node("Mul", [g.node("Mul", [f, f], ["f2"]), f], ["f3"])
    else:  # f * (f * f)
        f3 = g.node("Mul", [f, g.node("Mul", [f, f], ["f2"])], ["f3"])
    u = g.node("Add", [f, g.node("Mul", [g.const("c1", np.array(c1, F32)), f3], ["cf3"])], ["u"])
    t = g.node("Tanh", [g.node("Mul", [u, g.const("c2", np.array(math.sqrt(2 / math.pi), F32))],
                               ["su"])], ["tanh"])
    a = g.node("Add", [t, g.const("one", np.array(1, F32))], ["a"])
    half = g.const("half", np.array(0.5, F32))
    if order == "x_a_half":
        return g.node("Mul", [g.node("Mul", [f, a], ["m1"]), half], ["out"])
    if order == "half_first":
        return g.node("Mul", [g.node("Mul", [f, half], ["h"]), a], ["out"])
    return g.node("Mul", [f, g.node("Mul", [half, a], ["m1"])], ["out"])


def profiled_ops(model, feeds, tmp_path):
    import json
    import os
    so = ortlite.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "prof")
    s = ortlite.InferenceSession(model.SerializeToString(), so)
    s.run(None, feeds)
    path = s.end_profiling()
    with open(path) as fh:
        ops = [e["args"]["op_name"] for e in json.load(fh) if e.get("cat") == "Node"]
    os.remove(path)
    return ops


@pytest.mark.parametrize("cube", ["pow", "mul3", "mulsq"])
@pytest.mark.parametrize("order", ["x_a_half", "half_first", "half_on_a"])
def test_tanh_gelu_becomes_fast_gelu(cube, order, tmp_path):
    # GPT-2's gelu_new as exporters write it: one com.microsoft FastGelu (as onnxruntime's
    # FastGeluFusion), within float rounding of the nodes it replaces.
    g = G()
    w, b = g.const("w", randn((64, 96), 1, 0.2)), g.const("b", randn((96,), 2))
    f = g.node("Add", [g.node("MatMul", ["x", w], ["mm"]), b], ["f"])
    tanh_gelu(g, f, cube, order)
    model = g.model([("x", (2, 5, 64))], ["out"])
    feeds = {"x": randn((2, 5, 64), 3, 2.0)}
    out = check_levels(model, feeds)
    assert profiled_ops(model, feeds, tmp_path) == ["FusedMatMul", "FastGelu"]
    x = feeds["x"].astype(np.float64) @ numpy_helper.to_array(g.inits[0]).astype(np.float64)
    x += numpy_helper.to_array(g.inits[1])
    ref = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(out[0], ref, rtol=1e-5, atol=1e-5)


def test_tanh_gelu_with_other_constants_or_shared_values_stays(tmp_path):
    g = G()
    tanh_gelu(g, "x", "pow", "x_a_half", c1=0.05)
    model = g.model([("x", (3, 50))], ["out"])
    feeds = {"x": randn((3, 50), 1, 3.0)}
    check_levels(model, feeds)
    assert "FastGelu" not in profiled_ops(model, feeds, tmp_path)
    g = G()
    tanh_gelu(g, "x", "pow", "x_a_half")
    model = g.model([("x", (3, 50))], ["out", "tanh"])  # tanh is also a graph output
    check_levels(model, feeds)
    assert "FastGelu" not in profiled_ops(model, feeds, tmp_path)


@pytest.mark.parametrize("threads", [1, 2])
def test_attention_scores(threads):
    # Batched MatMul * scalar (alpha), then Softmax; MatMul + bias + Relu with a 1-D A.
    g = G()
    s = g.node("Mul", [g.node("MatMul", ["q", "k"], ["qk"]), g.const("sc", np.array(0.125, F32))],
               ["scores"])
    g.node("Softmax", [s], ["out"], axis=-1)
    model = g.model([("q", (2, 3, 16, 8)), ("k", (2, 3, 8, 16))], ["out"])
    check_levels(model, {"q": randn((2, 3, 16, 8), 1), "k": randn((2, 3, 8, 16), 2)},
                 threads=threads)
    g2 = G()
    w, b = g2.const("w", randn((40, 33), 1)), g2.const("b", randn((33,), 2))
    g2.node("Relu", [g2.node("Add", [b, g2.node("MatMul", ["x", w], ["mm"])], ["f"])], ["out"])
    model2 = g2.model([("x", (40,))], ["out"])
    check_levels(model2, {"x": randn((40,), 3)})


@pytest.mark.parametrize("threads", [1, 2])
def test_attention_scores_divided_by_a_scalar(threads, tmp_path):
    # MatMul / sqrt(head size), as BERT and GPT-2 exports write it: a FusedMatMul with alpha
    # 1 / c (the quotient and the product with the reciprocal may differ in the last bit).
    g = G()
    s = g.node("Div", [g.node("MatMul", ["q", "k"], ["qk"]),
                       g.const("sc", np.array(math.sqrt(32), F32))], ["scores"])
    g.node("Softmax", [s], ["out"], axis=-1)
    model = g.model([("q", (2, 4, 32, 32)), ("k", (2, 4, 32, 32))], ["out"])
    feeds = {"q": randn((2, 4, 32, 32), 1), "k": randn((2, 4, 32, 32), 2)}
    check_levels(model, feeds, threads=threads)
    assert profiled_ops(model, feeds, tmp_path) == ["FusedMatMul", "Softmax"]
    # Divided by the product, or by a value known only at run time: left alone.
    for num, den in (("sc", "qk"), ("qk", "d")):
        g = G()
        g.const("sc", np.array(2.0, F32))
        g.node("Div", [g.node("MatMul", ["q", "k"], ["qk"]) if num == "qk" else num,
                       g.node("MatMul", ["q", "k"], ["qk"]) if den == "qk" else den], ["out"])
        ins = [("q", (2, 3, 4)), ("k", (2, 4, 3))] + ([("d", ())] if den == "d" else [])
        model = g.model(ins, ["out"])
        feeds = {"q": randn((2, 3, 4), 1), "k": randn((2, 4, 3), 2)}
        if den == "d":
            feeds["d"] = np.array(3.0, F32)
        check_levels(model, feeds)
        assert "FusedMatMul" not in profiled_ops(model, feeds, tmp_path)


def test_attention_scale_of_shape_1_is_fused_when_the_product_has_rank(tmp_path):
    # Exporters also write the scale as a [1] tensor. It keeps the product's shape when an
    # operand has rank >= 2: graph inputs of rank 4, or Transposes to rank 4 (BERT's heads).
    g = G()
    qt = g.node("Transpose", ["q"], ["qt"], perm=[0, 2, 1, 3])
    kt = g.node("Transpose", ["k"], ["kt"], perm=[0, 2, 3, 1])
    s = g.node("Mul", [g.node("MatMul", [qt, kt], ["qk"]), g.const("sc", np.array([0.125], F32))],
               ["scores"])
    g.node("Softmax", [s], ["out"], axis=-1)
    model = g.model([("q", (1, 16, 2, 8)), ("k", (1, 16, 2, 8))], ["out"])
    feeds = {"q": randn((1, 16, 2, 8), 1), "k": randn((1, 16, 2, 8), 2)}
    check_levels(model, feeds)
    assert profiled_ops(model, feeds, tmp_path) == ["Transpose", "Transpose", "FusedMatMul",
                                                     "Softmax"]
    g = G()
    g.node("Div", [g.node("MatMul", ["q", "k"], ["qk"]), g.const("sc", np.array([4.0], F32))],
           ["out"])
    model = g.model([("q", (2, 3, 8)), ("k", (2, 8, 5))], ["out"])
    feeds = {"q": randn((2, 3, 8), 1), "k": randn((2, 8, 5), 2)}
    check_levels(model, feeds)
    assert profiled_ops(model, feeds, tmp_path) == ["FusedMatMul"]
    # Two 1-D operands: the product is a scalar and the [1] factor makes it [1]. Not fused.
    g = G()
    g.node("Mul", [g.node("MatMul", ["a", "b"], ["ab"]), g.const("sc", np.array([0.5], F32))],
           ["out"])
    model = g.model([("a", (8,)), ("b", (8,))], ["out"])
    feeds = {"a": randn((8,), 1), "b": randn((8,), 2)}
    out = check_levels(model, feeds)
    assert out[0].shape == (1,)
    assert "FusedMatMul" not in profiled_ops(model, feeds, tmp_path)


@pytest.mark.parametrize("divisor,numerator", [(0.0, False), (np.inf, False), (4.0, True)])
def test_matmul_divided_by_zero_inf_or_into_a_scalar_is_not_fused(divisor, numerator):
    g = G()
    c = g.const("c", np.array(divisor, F32))
    mm = g.node("MatMul", ["x", g.const("w", randn((16, 8), 1))], ["mm"])
    g.node("Div", [c, mm] if numerator else [mm, c], ["out"])
    model = g.model([("x", (3, 16))], ["out"])
    x = randn((3, 16), 2)
    x[0, :] = 0  # 0 / 0
    out = session(model, 1, LEVELS[1]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(out, run_ort(model, {"x": x})[0])
    assert "FusedMatMul" not in error_text(model, {"x": randn((3, 15), 2)})


def test_matmul_bias_not_matching_is_left_alone():
    # A [1, N] bias would change the output rank of a 1-D product: not fused.
    g = G()
    w, b = g.const("w", randn((16, 8), 1)), g.const("b", randn((1, 8), 2))
    g.node("Add", [g.node("MatMul", ["x", w], ["mm"]), b], ["out"])
    model = g.model([("x", (16,))], ["out"])
    check_levels(model, {"x": randn((16,), 3)})


@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("cshape,beta", [((48,), 0.5), ((7, 48), 1.0), ((7, 48), 0.5),
                                         ((7, 1), 2.0), ((), 1.0)])
@pytest.mark.parametrize("act", [("LeakyRelu", dict(alpha=0.05)), ("Sigmoid", {}),
                                 ("Relu", {})])
def test_gemm_activation(trans_b, cshape, beta, act):
    g = G()
    w = g.const("w", randn((48, 64) if trans_b else (64, 48), 1, 0.2))
    c = g.const("c", randn(cshape, 2))
    g.node(act[0], [g.node("Gemm", ["x", w, c], ["gm"], transB=trans_b, alpha=0.7,
                           beta=beta)], ["out"], **act[1])
    model = g.model([("x", (7, 64))], ["out"])
    check_levels(model, {"x": randn((7, 64), 3)})
    assert "FusedGemm node 'gm'" in error_text(model, {"x": randn((7, 63), 3)})



def _act_ref(kind, y):
    if kind == "Relu":
        return np.maximum(y, 0.0)
    if kind == "Clip":
        return np.clip(y, -0.2, 0.3)
    if kind == "LeakyRelu":
        return np.where(y >= 0, y, 0.1 * y)
    if kind == "Sigmoid":
        return 1.0 / (1.0 + np.exp(-y))
    return y


# (M, K, N, transB): odd sizes, partial tiles and panels, K past one cache block (1024) and
# past two, and the thread splits (at 3 threads): column panels claimed one at a time
# (37 x 2100 x 161), one at a time with the next claimed ahead (37 x 1100 x 400), in runs
# of two claimed ahead (30 x 64 x 800), in runs (5 x 64 x 800), and row blocks (few
# columns: 200 x 70 x 40).
@pytest.mark.parametrize("m,k,n,trans_b", [(1, 1100, 97, 1), (13, 5, 33, 0), (37, 2100, 161, 1),
                                           (37, 1100, 400, 0), (30, 64, 800, 1),
                                           (5, 64, 800, 0), (200, 70, 40, 1), (70, 1, 1, 1)])
@pytest.mark.parametrize("threads", [1, 3])
def test_fused_gemm_shapes_and_epilogues(m, k, n, trans_b, threads):
    """Gemm with constant weights (the fused GEMM with its epilogue in registers, or after
    the tile for Sigmoid) against float64 numpy, for every form of C and every activation."""
    x = randn((m, k), 3)
    w = randn((n, k), 1, 1.0 / math.sqrt(k))
    ref_mm = x.astype(np.float64) @ w.astype(np.float64).T
    cases = [  # (activation, C shape, alpha, beta)
        (None, None, 1.3, 1.0),
        ("Relu", (n,), 1.0, 1.0),
        ("Clip", (m, 1), 0.7, 0.5),
        ("LeakyRelu", (m, n), 1.0, 1.0),
        ("Sigmoid", (), 1.0, 2.0),
    ]
    for act, cshape, alpha, beta in cases:
        g = G()
        wc = g.const("w", w if trans_b else np.ascontiguousarray(w.T))
        ins = ["x", wc]
        ref = alpha * ref_mm
        if cshape is not None:
            c = randn(cshape, 2)
            ins.append(g.const("c", c))
            ref = ref + beta * c.astype(np.float64)
        y = g.node("Gemm", ins, ["gm"], transB=trans_b, alpha=alpha, beta=beta)
        if act == "Clip":
            g.node("Clip", [y, g.const("lo", np.float32(-0.2)), g.const("hi", np.float32(0.3))],
                   ["out"])
        elif act == "LeakyRelu":
            g.node("LeakyRelu", [y], ["out"], alpha=0.1)
        elif act is not None:
            g.node(act, [y], ["out"])
        else:
            g.node("Identity", [y], ["out"])
        ref = _act_ref(act, ref)
        model = g.model([("x", (m, k))], ["out"])
        for level in LEVELS:
            out = session(model, threads, level).run(None, {"x": x})[0]
            assert out.shape == (m, n) and out.dtype == np.float32
            np.testing.assert_allclose(out, ref, rtol=1e-5, atol=2e-5 * (np.abs(ref).max() + 1),
                                       err_msg=f"{act} C {cshape} level {level}")


# ---- constant folding --------------------------------------------------------------------


def test_constant_folding_shape_chain():
    g = G()
    shp = g.node("Shape", [g.const("c", randn((4, 6), 1))], ["shp"])
    first = g.node("Gather", [shp, g.const("i0", np.array([0], np.int64))], ["first"], axis=0)
    newshape = g.node("Concat", [first, g.const("m1", np.array([-1], np.int64))], ["ns"], axis=0)
    g.node("Reshape", ["x", newshape], ["out"])
    model = g.model([("x", (2, 2, 6))], ["out"])
    check_levels(model, {"x": randn((2, 2, 6), 2)})


def test_folded_node_output_that_is_a_graph_output():
    g = G()
    g.node("Cast", [g.const("c", np.arange(6, dtype=np.int64))], ["cast"], to=TensorProto.FLOAT)
    g.node("Add", ["x", "cast"], ["out"])
    model = g.model([("x", (6,))], ["out", "cast"])
    out = check_levels(model, {"x": randn((6,), 2)})
    out[1][0] = 42.0  # a copy the caller owns: the session's constant stays as it was
    again = session(model, 1, LEVELS[1]).run(None, {"x": randn((6,), 2)})[1]
    assert again[0] == 0.0
