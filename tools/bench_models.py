"""Deterministic ONNX models for tools/bench.py, built with onnx.helper from seeded numpy
weights. Each builder returns (ModelProto, feeds): the same seed gives the same bytes.

Weights are scaled (He / 1/sqrt(fan_in)) so activations stay O(1) through the whole network:
the output comparison between the runtimes is then meaningful at a fixed tolerance.
"""

import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17  # LayerNormalization needs 17; the pinned onnxruntime runs up to 23
IR_VERSION = 8


class _Graph:
    """Accumulates nodes and initializers with unique names."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self._n = 0

    def name(self, prefix):
        self._n += 1
        return f"{prefix}_{self._n}"

    def const(self, arr, prefix="w"):
        n = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), n))
        return n

    def node(self, op, inputs, n_out=1, **attrs):
        outs = [self.name(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=self.name(op), **attrs))
        return outs[0] if n_out == 1 else outs

    def normal(self, shape, std):
        return (self.rng.standard_normal(shape) * std).astype(np.float32)

    def uniform(self, shape, lo, hi):
        return self.rng.uniform(lo, hi, shape).astype(np.float32)

    def model(self, inputs, outputs):
        graph = helper.make_graph(self.nodes, "bench", inputs, outputs, initializer=self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="ortlite-bench")
        m.ir_version = IR_VERSION
        return m

    # --- layers ---------------------------------------------------------------------------

    def conv(self, x, cin, cout, k, stride=1, group=1, bias=False):
        fan_in = cin // group * k * k
        w = self.const(self.normal((cout, cin // group, k, k), math.sqrt(2.0 / fan_in)))
        ins = [x, w]
        if bias:
            ins.append(self.const(self.normal((cout,), 0.05), "b"))
        p = k // 2
        return self.node("Conv", ins, kernel_shape=[k, k], strides=[stride, stride],
                         pads=[p, p, p, p], group=group)

    def bn(self, x, c):
        scale = self.const(self.uniform((c,), 0.5, 1.5), "gamma")
        bias = self.const(self.normal((c,), 0.1), "beta")
        mean = self.const(self.normal((c,), 0.1), "mean")
        var = self.const(self.uniform((c,), 0.5, 1.5), "var")
        return self.node("BatchNormalization", [x, scale, bias, mean, var], epsilon=1e-5)

    def gemm(self, x, k, n):
        w = self.const(self.normal((n, k), math.sqrt(2.0 / k)))
        b = self.const(self.normal((n,), 0.05), "b")
        return self.node("Gemm", [x, w, b], transB=1)


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def tiny(seed=0):
    """Two Adds on a (1, 100) input: what `run` costs beyond the arithmetic."""
    g = _Graph(seed)
    a = g.const(g.normal((100,), 1.0))
    b = g.const(g.normal((100,), 1.0))
    g.node("Add", [g.node("Add", ["x", a]), b])
    _rename_output(g, "y")
    m = g.model([_vi("x", [1, 100])], [_vi("y", [1, 100])])
    return m, {"x": g.normal((1, 100), 1.0)}


def _rename_output(g, out):
    """Renames the last node's output to `out` (the graph output name)."""
    g.nodes[-1].output[0] = out


def mlp(batch, seed=1):
    """Three Gemm+Relu layers of width 1024, then Softmax."""
    g = _Graph(seed)
    h = "x"
    for _ in range(3):
        h = g.node("Relu", [g.gemm(h, 1024, 1024)])
    g.node("Softmax", [h], axis=-1)
    _rename_output(g, "y")
    m = g.model([_vi("x", [batch, 1024])], [_vi("y", [batch, 1024])])
    return m, {"x": g.normal((batch, 1024), 1.0)}


def resnet18(seed=2):
    """ResNet-18 layout at 1x3x224x224. BatchNormalization nodes stay in the graph (no
    folding into the convolutions here): folding is the runtime's job."""
    g = _Graph(seed)
    h = g.node("Relu", [g.bn(g.conv("image", 3, 64, 7, stride=2), 64)])
    h = g.node("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for block in range(2):
            s = stride if block == 0 else 1
            y = g.node("Relu", [g.bn(g.conv(h, cin, cout, 3, stride=s), cout)])
            y = g.bn(g.conv(y, cout, cout, 3), cout)
            shortcut = h
            if s != 1 or cin != cout:
                shortcut = g.bn(g.conv(h, cin, cout, 1, stride=s), cout)
            h = g.node("Relu", [g.node("Add", [y, shortcut])])
            cin = cout
    h = g.node("Flatten", [g.node("GlobalAveragePool", [h])], axis=1)
    g.gemm(h, 512, 1000)
    _rename_output(g, "logits")
    m = g.model([_vi("image", [1, 3, 224, 224])], [_vi("logits", [1, 1000])])
    return m, {"image": g.normal((1, 3, 224, 224), 1.0)}


def mobilenetv2(seed=3):
    """MobileNetV2 layout at 1x3x224x224: inverted residual blocks (1x1 expand, 3x3
    depthwise, 1x1 project), relu6 as Clip(0, 6). The convolutions carry biases, the way an
    exporter writes the network after folding BatchNormalization in eval mode."""
    g = _Graph(seed)
    lo = g.const(np.array(0.0, np.float32), "zero")
    hi = g.const(np.array(6.0, np.float32), "six")

    def relu6(x):
        return g.node("Clip", [x, lo, hi])

    h = relu6(g.conv("image", 3, 32, 3, stride=2, bias=True))
    cin = 32
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            y = h
            if t != 1:
                y = relu6(g.conv(y, cin, hidden, 1, bias=True))
            y = relu6(g.conv(y, hidden, hidden, 3, stride=stride, group=hidden, bias=True))
            y = g.conv(y, hidden, c, 1, bias=True)
            h = g.node("Add", [h, y]) if stride == 1 and cin == c else y
            cin = c
    h = relu6(g.conv(h, cin, 1280, 1, bias=True))
    h = g.node("Flatten", [g.node("GlobalAveragePool", [h])], axis=1)
    g.gemm(h, 1280, 1000)
    _rename_output(g, "logits")
    m = g.model([_vi("image", [1, 3, 224, 224])], [_vi("logits", [1, 1000])])
    return m, {"image": g.normal((1, 3, 224, 224), 1.0)}


def bert(layers=2, seq=128, hidden=768, heads=12, ffn=3072, seed=4):
    """BERT-base encoder layers: self-attention (MatMul/Add, Reshape/Transpose, scaled
    MatMul, Softmax), residual + LayerNormalization, FFN with erf-GELU spelled as
    Div/Erf/Add/Mul/Mul nodes. Batch 1, no attention mask."""
    g = _Graph(seed)
    dh = hidden // heads
    heads_shape = g.const(np.array([1, seq, heads, dh], np.int64), "shape")
    flat_shape = g.const(np.array([1, seq, hidden], np.int64), "shape")
    inv_sqrt_dh = g.const(np.array(1.0 / math.sqrt(dh), np.float32), "scale")
    sqrt2 = g.const(np.array(math.sqrt(2.0), np.float32), "sqrt2")
    one = g.const(np.array(1.0, np.float32), "one")
    half = g.const(np.array(0.5, np.float32), "half")

    def dense(x, k, n):
        w = g.const(g.normal((k, n), 1.0 / math.sqrt(k)))
        b = g.const(g.normal((n,), 0.02), "b")
        return g.node("Add", [g.node("MatMul", [x, w]), b])

    def layernorm(x):
        gamma = g.const(g.uniform((hidden,), 0.8, 1.2), "gamma")
        beta = g.const(g.normal((hidden,), 0.02), "beta")
        return g.node("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-12)

    h = "x"
    for _ in range(layers):
        def split_heads(x, perm):
            return g.node("Transpose", [g.node("Reshape", [x, heads_shape])], perm=perm)

        q = split_heads(dense(h, hidden, hidden), [0, 2, 1, 3])  # (1, H, S, dh)
        kt = split_heads(dense(h, hidden, hidden), [0, 2, 3, 1])  # (1, H, dh, S)
        v = split_heads(dense(h, hidden, hidden), [0, 2, 1, 3])
        scores = g.node("Mul", [g.node("MatMul", [q, kt]), inv_sqrt_dh])
        probs = g.node("Softmax", [scores], axis=-1)
        ctx = g.node("Transpose", [g.node("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        ctx = g.node("Reshape", [ctx, flat_shape])
        h = layernorm(g.node("Add", [dense(ctx, hidden, hidden), h]))
        f = dense(h, hidden, ffn)
        gelu = g.node("Mul", [g.node("Mul", [f, g.node("Add", [
            g.node("Erf", [g.node("Div", [f, sqrt2])]), one])]), half])
        h = layernorm(g.node("Add", [dense(gelu, ffn, hidden), h]))
    _rename_output(g, "y")
    m = g.model([_vi("x", [1, seq, hidden])], [_vi("y", [1, seq, hidden])])
    return m, {"x": g.normal((1, seq, hidden), 1.0)}


def matmul(n=1024, seed=5):
    """One n x n x n float32 MatMul with both operands as inputs (no weight pre-packing)."""
    g = _Graph(seed)
    g.nodes.append(helper.make_node("MatMul", ["a", "b"], ["c"], name="MatMul"))
    m = g.model([_vi("a", [n, n]), _vi("b", [n, n])], [_vi("c", [n, n])])
    return m, {"a": g.normal((n, n), 1.0), "b": g.normal((n, n), 1.0)}


def big_chain(mib=100, width=1024, seed=6):
    """A chain of MatMuls whose float32 weights total `mib` MiB: a model whose load time is
    dominated by its initializers."""
    g = _Graph(seed)
    per = width * width * 4
    count = max(1, (mib << 20) // per)
    h = "x"
    for _ in range(count):
        h = g.node("MatMul", [h, g.const(g.normal((width, width), 1.0 / math.sqrt(width)))])
    _rename_output(g, "y")
    m = g.model([_vi("x", [1, width])], [_vi("y", [1, width])])
    return m, {"x": g.normal((1, width), 1.0)}


def save(model, path):
    """Writes the model atomically: a concurrent run never loads a half-written file."""
    onnx.checker.check_model(model)
    path = str(path)
    tmp = f"{path}.{os.getpid()}.tmp"
    onnx.save_model(model, tmp)
    os.replace(tmp, path)
