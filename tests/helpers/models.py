"""Float models built with onnx.helper (seeded random weights) that several test files
run: an MLP, a small residual CNN and a transformer encoder layer, with symbolic batch /
sequence dims in the declared inputs; Builder makes more."""

import math

import numpy as np
from onnx import TensorProto, helper, numpy_helper


class Builder:
    """Collects nodes and seeded random initializers."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.n = 0

    def weight(self, shape, scale=None, name=None):
        name = name or f"w{len(self.inits)}"
        fan_in = shape[1] if len(shape) == 2 else (int(np.prod(shape[1:])) if len(shape) > 2
                                                   else 1)
        scale = scale if scale is not None else 1.0 / math.sqrt(fan_in)
        arr = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def const(self, arr, name=None):
        name = name or f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def op(self, op_type, inputs, n_out=1, out=None, **attrs):
        outs = [out] if out else [f"t{self.n}_{i}" for i in range(n_out)]
        self.n += 1
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def model(self, inputs, outputs, opset=17):
        graph = helper.make_graph(self.nodes, "model", inputs, outputs, initializer=self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return m


def mlp_model():
    b = Builder(1)
    x = "x"
    h = b.op("Gemm", [x, b.weight((128, 64)), b.weight((128,), 0.1)], transB=1)
    h = b.op("Relu", [h])
    h = b.op("Add", [b.op("MatMul", [h, b.weight((128, 96), 1 / math.sqrt(128))]),
                     b.weight((96,), 0.1)])
    h = b.op("Relu", [h])
    h = b.op("Gemm", [h, b.weight((96, 10), 1 / math.sqrt(96)), b.weight((1, 10), 0.1)],
             alpha=1.0, beta=1.0)
    h = b.op("Relu", [h])
    b.op("Softmax", [h], axis=-1, out="y")
    return b.model(
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])])


def cnn_model():
    b = Builder(2)

    def conv_bn(x, cin, cout, k=3, stride=1, relu=True):
        pad = k // 2
        h = b.op("Conv", [x, b.weight((cout, cin, k, k))], pads=[pad] * 4,
                 strides=[stride, stride], kernel_shape=[k, k])
        scale = b.const((1.0 + 0.1 * b.rng.standard_normal(cout)).astype(np.float32))
        bias = b.const((0.1 * b.rng.standard_normal(cout)).astype(np.float32))
        mean = b.const((0.1 * b.rng.standard_normal(cout)).astype(np.float32))
        var = b.const((1.0 + 0.2 * b.rng.random(cout)).astype(np.float32))
        h = b.op("BatchNormalization", [h, scale, bias, mean, var], epsilon=1e-5)
        return b.op("Relu", [h]) if relu else h

    h = conv_bn("x", 3, 16)
    h = b.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    # Residual block.
    r = conv_bn(h, 16, 16)
    r = conv_bn(r, 16, 16, relu=False)
    h = b.op("Relu", [b.op("Add", [h, r])])
    # Downsample, with a bias-carrying conv and a depthwise conv.
    h = conv_bn(h, 16, 32, stride=2)
    h = b.op("Conv", [h, b.weight((32, 1, 3, 3), 0.3), b.weight((32,), 0.1)], group=32,
             pads=[1, 1, 1, 1])
    h = b.op("Relu", [h])
    h = b.op("GlobalAveragePool", [h])
    h = b.op("Flatten", [h], axis=1)
    b.op("Gemm", [h, b.weight((10, 32)), b.weight((10,), 0.1)], transB=1, out="logits")
    return b.model(
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])])


def transformer_layer_model(d_model=64, heads=4, d_ff=128):
    b = Builder(3)
    dh = d_model // heads

    def layer_norm(x):
        g = b.const((1.0 + 0.1 * b.rng.standard_normal(d_model)).astype(np.float32))
        be = b.const((0.1 * b.rng.standard_normal(d_model)).astype(np.float32))
        return b.op("LayerNormalization", [x, g, be], axis=-1, epsilon=1e-5)

    def linear(x, din, dout):
        return b.op("Add", [b.op("MatMul", [x, b.weight((din, dout), 1 / math.sqrt(din))]),
                            b.weight((dout,), 0.1)])

    heads_shape = b.const(np.array([0, 0, heads, dh], np.int64))
    merged_shape = b.const(np.array([0, 0, d_model], np.int64))

    x = "x"
    h = layer_norm(x)
    q = b.op("Transpose", [b.op("Reshape", [linear(h, d_model, d_model), heads_shape])],
             perm=[0, 2, 1, 3])
    k = b.op("Transpose", [b.op("Reshape", [linear(h, d_model, d_model), heads_shape])],
             perm=[0, 2, 3, 1])
    v = b.op("Transpose", [b.op("Reshape", [linear(h, d_model, d_model), heads_shape])],
             perm=[0, 2, 1, 3])
    scores = b.op("Div", [b.op("MatMul", [q, k]), b.const(np.array(math.sqrt(dh), np.float32))])
    attn = b.op("Softmax", [scores], axis=-1)
    ctx = b.op("MatMul", [attn, v])
    ctx = b.op("Reshape", [b.op("Transpose", [ctx], perm=[0, 2, 1, 3]), merged_shape])
    x1 = b.op("Add", [x, linear(ctx, d_model, d_model)])
    h = layer_norm(x1)
    f = linear(h, d_model, d_ff)
    # erf-GELU: f * 0.5 * (1 + erf(f / sqrt(2)))
    e = b.op("Erf", [b.op("Div", [f, b.const(np.array(math.sqrt(2.0), np.float32))])])
    g = b.op("Mul", [b.op("Mul", [f, b.const(np.array(0.5, np.float32))]),
                     b.op("Add", [e, b.const(np.array(1.0, np.float32))])])
    f = linear(g, d_ff, d_model)
    b.op("Add", [x1, f], out="y")
    return b.model(
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", d_model])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", d_model])])
