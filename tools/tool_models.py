"""Seeded float models and the variants onnxruntime's own tools write from them: dynamic and
static quantization (QDQ and QOperator), int4 weights (MatMulNBitsQuantizer) and float16
(keep_io_types). Shared by tools/bench_tools.py and tests/models/test_tool_models.py.

The tools (onnxruntime.quantization, onnxruntime.transformers) are test and benchmark
dependencies only; they are imported inside the functions that use them.
"""

import logging

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F32 = np.float32


class _G:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, base):
        self.n += 1
        return f"{base}{self.n}"

    def const(self, arr, base="w"):
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def node(self, op, ins, **attrs):
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    def dense(self, x, k, n, relu=True):
        w = self.const((self.rng.standard_normal((k, n)) / np.sqrt(k)).astype(F32))
        b = self.const((self.rng.standard_normal(n) * 0.1).astype(F32), "b")
        y = self.node("Add", [self.node("MatMul", [x, w]), b])
        return self.node("Relu", [y]) if relu else y

    def conv(self, x, cin, cout, k=3, stride=1, relu=True):
        w = self.const((self.rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k))
                       .astype(F32))
        b = self.const((self.rng.standard_normal(cout) * 0.1).astype(F32), "b")
        y = self.node("Conv", [x, w, b], kernel_shape=[k, k], pads=[k // 2] * 4,
                      strides=[stride, stride])
        return self.node("Relu", [y]) if relu else y

    def model(self, inputs, out, opset=17):
        self.nodes[-1].output[0] = "y"  # the last node's output is read by no other node
        g = helper.make_graph(self.nodes, "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return m


def mlp(seed=0, k=256, hidden=512, n=64):
    """MatMul + Add + Relu, three layers; input x [batch, k]."""
    g = _G(seed)
    h = g.dense("x", k, hidden)
    h = g.dense(h, hidden, hidden)
    g.dense(h, hidden, n, relu=False)
    return g.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", k])], "y")


def cnn(seed=1):
    """Conv-Relu stem, a stride-2 Conv, a residual block, GlobalAveragePool, Gemm; input
    image [1, 3, 32, 32]."""
    g = _G(seed)
    h = g.conv("image", 3, 16)
    h = g.conv(h, 16, 32, stride=2)
    r = g.conv(h, 32, 32)
    r = g.conv(r, 32, 32, relu=False)
    h = g.node("Relu", [g.node("Add", [h, r])])
    h = g.node("Flatten", [g.node("GlobalAveragePool", [h])])
    w = g.const((g.rng.standard_normal((10, 32)) / np.sqrt(32)).astype(F32))
    b = g.const(np.zeros(10, F32), "b")
    g.node("Gemm", [h, w, b], transB=1)
    return g.model([helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 32, 32])],
                   "y")


def lstm(seed=2, seq=16, inp=32, hidden=64, classes=8):
    """LSTM over [seq, 1, inp], its last hidden state through a dense layer."""
    g = _G(seed)
    W = g.const((g.rng.standard_normal((1, 4 * hidden, inp)) / np.sqrt(inp)).astype(F32))
    R = g.const((g.rng.standard_normal((1, 4 * hidden, hidden)) / np.sqrt(hidden)).astype(F32))
    B = g.const((g.rng.standard_normal((1, 8 * hidden)) * 0.1).astype(F32), "b")
    out = g.name("lstm")
    yh = g.name("yh")
    g.nodes.append(helper.make_node("LSTM", ["x", W, R, B], [out, yh], hidden_size=hidden))
    h = g.node("Reshape", [yh, g.const(np.array([1, hidden], np.int64), "shape")])
    g.dense(h, hidden, classes, relu=False)
    return g.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, 1, inp])], "y")


FLOAT_MODELS = {"mlp": mlp, "cnn": cnn, "lstm": lstm}


def feeds(model, seed=0, batch=4):
    """Seeded feeds from the model's inputs (symbolic dims: `batch`)."""
    rng = np.random.default_rng(seed)
    out = {}
    for vi in model.graph.input:
        dims = [d.dim_value if d.HasField("dim_value") else batch
                for d in vi.type.tensor_type.shape.dim]
        out[vi.name] = rng.standard_normal(dims).astype(F32)
    return out


class _Reader:
    def __init__(self, model, n=8):
        self.items = [feeds(model, seed=100 + i) for i in range(n)]

    def get_next(self):
        return self.items.pop() if self.items else None

    def rewind(self):
        pass


def _quiet():
    logging.getLogger("onnxruntime").setLevel(logging.WARNING)
    for name in ("onnxruntime.quantization", "root"):
        logging.getLogger(name).setLevel(logging.WARNING)


def variant(kind, model, tmp_dir):
    """The model `kind` of onnxruntime's tools writes from float `model` (a ModelProto):
    "dynamic" (int8 weights), "dynamic_u8" (uint8 weights), "qdq", "qoperator", "nbits" or
    "fp16". tmp_dir: a pathlib.Path for the
    tools' files."""
    import onnx

    _quiet()
    src = tmp_dir / "float.onnx"
    dst = tmp_dir / f"{kind}.onnx"
    onnx.save(model, str(src))
    if kind in ("dynamic", "dynamic_u8"):
        from onnxruntime.quantization import QuantType, quantize_dynamic

        # onnxruntime's ConvInteger takes uint8 weights only: convolutional models are
        # quantized with QUInt8 weights for it.
        wt = QuantType.QInt8 if kind == "dynamic" else QuantType.QUInt8
        quantize_dynamic(str(src), str(dst), weight_type=wt)
    elif kind in ("qdq", "qoperator"):
        from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

        fmt = QuantFormat.QDQ if kind == "qdq" else QuantFormat.QOperator
        quantize_static(str(src), str(dst), _Reader(model), quant_format=fmt,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    elif kind == "nbits":
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

        q = MatMulNBitsQuantizer(model, block_size=32, is_symmetric=True)
        q.process()
        onnx.save(q.model.model, str(dst))
    elif kind == "fp16":
        from onnxruntime.transformers.float16 import convert_float_to_float16

        onnx.save(convert_float_to_float16(model, keep_io_types=True), str(dst))
    else:
        raise ValueError(f"unknown variant {kind!r}")
    return onnx.load(str(dst))


# (float model, variant, rtol, atol as a fraction of max|onnxruntime output|). Quantized
# variants differ from onnxruntime by flipped roundings: an activation value at a
# quantization step's midpoint, computed with a last-bit difference, lands one step apart
# (1/255 of its range) and that step propagates; a few steps of the output's range bound it.
# float16 keeps 11 significant bits per intermediate value.
CASES = [
    ("mlp", "dynamic", 2e-2, 2e-2), ("cnn", "dynamic_u8", 2e-2, 2e-2),
    ("lstm", "dynamic", 2e-2, 2e-2),
    ("mlp", "qdq", 2e-2, 3e-2), ("cnn", "qdq", 2e-2, 3e-2),
    ("mlp", "qoperator", 2e-2, 3e-2), ("cnn", "qoperator", 2e-2, 3e-2),
    ("mlp", "nbits", 1e-3, 1e-3),
    ("mlp", "fp16", 1e-2, 1e-2), ("cnn", "fp16", 1e-2, 1e-2),
]
