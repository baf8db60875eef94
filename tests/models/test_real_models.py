"""Real-world-shaped models, compared with onnxruntime: the small models the onnxruntime
wheel ships (onnxruntime/datasets), and generated models that mimic common architectures
(ResNet basic blocks, MobileNetV2 inverted residuals, a BERT-style encoder with an
attention mask, an LSTM sequence classifier, a YOLO-style detection head with Resize and
Concat). Weights are seeded; shapes are small so the whole file runs in a few seconds."""

import glob
import math
import os

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

import ortlite
from helpers import assert_same, run_ort
from helpers.models import Builder

F = TensorProto.FLOAT
TOL = dict(rtol=1e-4, atol=2e-5)


def compare(model, feeds, threads=(1, 2), tol=TOL):
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    expected = run_ort(data, feeds)
    for t in threads:
        so = ortlite.SessionOptions()
        so.intra_op_num_threads = t
        got = ortlite.InferenceSession(data, sess_options=so).run(None, feeds)
        assert_same(got, expected, **tol)
    return expected


# --- models the onnxruntime wheel ships ---------------------------------------------------

DATASETS = os.path.join(os.path.dirname(onnxruntime.__file__), "datasets")


def tensor_only_dataset_models():
    out = []
    for path in sorted(glob.glob(os.path.join(DATASETS, "*.onnx"))):
        m = onnx.load(path)
        if all(o.type.WhichOneof("value") == "tensor_type" for o in m.graph.output):
            out.append(path)
    return out


@pytest.mark.parametrize("path", tensor_only_dataset_models(), ids=os.path.basename)
def test_onnxruntime_dataset_model(path):
    m = onnx.load(path)
    rng = np.random.default_rng(0)
    feeds = {}
    for vi in m.graph.input:
        shape = [d.dim_value if d.dim_value > 0 else 2 for d in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    compare(path, feeds)


def test_dataset_folder_has_models():
    assert len(tensor_only_dataset_models()) >= 2


# --- ResNet-style ---------------------------------------------------------------------------


def conv_bn(b, x, c_in, c_out, k, stride=1, relu=True, groups=1):
    w = b.weight([c_out, c_in // groups, k, k])
    y = b.op("Conv", [x, w], kernel_shape=[k, k], strides=[stride, stride],
             pads=[k // 2] * 4, group=groups)
    scale = b.const((1.0 + 0.1 * b.rng.standard_normal(c_out)).astype(np.float32))
    bias = b.const((0.1 * b.rng.standard_normal(c_out)).astype(np.float32))
    mean = b.const((0.1 * b.rng.standard_normal(c_out)).astype(np.float32))
    var = b.const((1.0 + 0.1 * np.abs(b.rng.standard_normal(c_out))).astype(np.float32))
    y = b.op("BatchNormalization", [y, scale, bias, mean, var], epsilon=1e-5)
    return b.op("Relu", [y]) if relu else y


def resnet_model():
    b = Builder(10)
    x = conv_bn(b, "image", 3, 16, 7, stride=2)
    x = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = 16
    for c_out, stride in [(16, 1), (32, 2), (32, 1)]:
        y = conv_bn(b, x, c, c_out, 3, stride=stride)
        y = conv_bn(b, y, c_out, c_out, 3, relu=False)
        short = x if (stride == 1 and c == c_out) else conv_bn(b, x, c, c_out, 1, stride, False)
        x = b.op("Relu", [b.op("Add", [y, short])])
        c = c_out
    x = b.op("GlobalAveragePool", [x])
    x = b.op("Flatten", [x])
    x = b.op("Gemm", [x, b.weight([10, c]), b.const(np.zeros(10, np.float32))], transB=1)
    b.op("Softmax", [x], out="probs", axis=1)
    return b.model([helper.make_tensor_value_info("image", F, ["N", 3, 64, 64])],
                   [helper.make_tensor_value_info("probs", F, ["N", 10])])


def test_resnet_style_blocks():
    rng = np.random.default_rng(1)
    compare(resnet_model(), {"image": rng.standard_normal((2, 3, 64, 64)).astype(np.float32)})


# --- MobileNetV2-style ------------------------------------------------------------------------


def mobilenet_model():
    b = Builder(11)
    lo, hi = b.const(np.array(0, np.float32)), b.const(np.array(6, np.float32))

    def relu6(t):
        return b.op("Clip", [t, lo, hi])

    x = relu6(conv_bn(b, "image", 3, 16, 3, stride=2, relu=False))
    c = 16
    for c_out, stride, expand in [(16, 1, 1), (24, 2, 6), (24, 1, 6), (32, 2, 6)]:
        hidden = c * expand
        y = x if expand == 1 else relu6(conv_bn(b, x, c, hidden, 1, relu=False))
        y = relu6(conv_bn(b, y, hidden, hidden, 3, stride=stride, relu=False, groups=hidden))
        y = conv_bn(b, y, hidden, c_out, 1, relu=False)
        x = b.op("Add", [x, y]) if (stride == 1 and c == c_out) else y
        c = c_out
    x = b.op("GlobalAveragePool", [x])
    x = b.op("Reshape", [x, b.const(np.array([0, -1], np.int64))])
    b.op("MatMul", [x, b.weight([c, 5])], out="logits")
    return b.model([helper.make_tensor_value_info("image", F, [1, 3, 56, 56])],
                   [helper.make_tensor_value_info("logits", F, [1, 5])])


def test_mobilenet_style_inverted_residuals():
    rng = np.random.default_rng(2)
    compare(mobilenet_model(), {"image": rng.standard_normal((1, 3, 56, 56)).astype(np.float32)})


# --- BERT-style encoder -----------------------------------------------------------------------


def bert_model(layers=2, d=32, heads=4, ff=64, vocab=50):
    b = Builder(12)
    dh = d // heads
    emb = b.weight([vocab, d], scale=0.5)
    pos = b.weight([64, d], scale=0.1)
    x = b.op("Gather", [emb, "ids"])
    seq = b.op("Gather", [b.op("Shape", ["ids"]), b.const(np.array(1, np.int64))])
    start, axis0 = b.const(np.array([0], np.int64)), b.const(np.array([0], np.int64))
    p = b.op("Slice", [pos, start, b.op("Unsqueeze", [seq, axis0]), axis0])
    x = b.op("Add", [x, p])
    # mask [N, S] (1 keep, 0 pad) -> additive bias [N, 1, 1, S]
    m = b.op("Cast", ["mask"], to=F)
    m = b.op("Mul", [b.op("Sub", [b.const(np.array(1, np.float32)), m]),
                     b.const(np.array(-1e4, np.float32))])
    bias = b.op("Unsqueeze", [m, b.const(np.array([1, 2], np.int64))])

    def layer_norm(t):
        g = b.const((1 + 0.1 * b.rng.standard_normal(d)).astype(np.float32))
        beta = b.const((0.1 * b.rng.standard_normal(d)).astype(np.float32))
        return b.op("LayerNormalization", [t, g, beta], axis=-1, epsilon=1e-12)

    def split_heads(t):
        t = b.op("Reshape", [t, b.const(np.array([0, 0, heads, dh], np.int64))])
        return b.op("Transpose", [t], perm=[0, 2, 1, 3])

    for _ in range(layers):
        q = split_heads(b.op("Add", [b.op("MatMul", [x, b.weight([d, d])]),
                                     b.const(np.zeros(d, np.float32))]))
        k = split_heads(b.op("MatMul", [x, b.weight([d, d])]))
        v = split_heads(b.op("MatMul", [x, b.weight([d, d])]))
        s = b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])])
        s = b.op("Add", [b.op("Div", [s, b.const(np.array(math.sqrt(dh), np.float32))]), bias])
        a = b.op("MatMul", [b.op("Softmax", [s], axis=-1), v])
        a = b.op("Reshape", [b.op("Transpose", [a], perm=[0, 2, 1, 3]),
                             b.const(np.array([0, 0, d], np.int64))])
        x = layer_norm(b.op("Add", [x, b.op("MatMul", [a, b.weight([d, d])])]))
        h = b.op("Add", [b.op("MatMul", [x, b.weight([d, ff])]),
                         b.const(np.zeros(ff, np.float32))])
        # erf-GELU
        g = b.op("Mul", [h, b.op("Add", [b.op("Erf", [b.op("Div", [h, b.const(
            np.array(math.sqrt(2), np.float32))])]), b.const(np.array(1, np.float32))])])
        g = b.op("Mul", [g, b.const(np.array(0.5, np.float32))])
        x = layer_norm(b.op("Add", [x, b.op("MatMul", [g, b.weight([ff, d])])]))
    b.op("Identity", [x], out="hidden")
    return b.model([helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", "S"]),
                    helper.make_tensor_value_info("mask", TensorProto.INT64, ["N", "S"])],
                   [helper.make_tensor_value_info("hidden", F, ["N", "S", d])])


def test_bert_style_encoder_with_padding_mask():
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 50, size=(2, 12)).astype(np.int64)
    mask = np.ones((2, 12), np.int64)
    mask[1, 8:] = 0
    compare(bert_model(), {"ids": ids, "mask": mask}, tol=dict(rtol=1e-3, atol=1e-4))


# --- LSTM sequence classifier -----------------------------------------------------------------


def lstm_model(hidden=16, vocab=30, emb_dim=8, classes=3):
    b = Builder(13)
    x = b.op("Gather", [b.weight([vocab, emb_dim], scale=0.5), "tokens"])  # [S, N, E]
    w = b.weight([2, 4 * hidden, emb_dim])
    r = b.weight([2, 4 * hidden, hidden])
    bias = b.weight([2, 8 * hidden], scale=0.1)
    y, y_h = b.op("LSTM", [x, w, r, bias, "lens"], n_out=2, hidden_size=hidden,
                  direction="bidirectional")
    # y_h: [2, N, H] -> [N, 2H]
    h = b.op("Reshape", [b.op("Transpose", [y_h], perm=[1, 0, 2]),
                         b.const(np.array([0, -1], np.int64))])
    b.op("Gemm", [h, b.weight([classes, 2 * hidden]), b.const(np.zeros(classes, np.float32))],
         out="logits", transB=1)
    b.op("ReduceMean", [y], out="pooled", axes=[0], keepdims=0)
    return b.model([helper.make_tensor_value_info("tokens", TensorProto.INT64, ["S", "N"]),
                    helper.make_tensor_value_info("lens", TensorProto.INT32, ["N"])],
                   [helper.make_tensor_value_info("logits", F, ["N", classes]),
                    helper.make_tensor_value_info("pooled", F, None)])


def test_lstm_sequence_classifier_with_lengths():
    rng = np.random.default_rng(4)
    tokens = rng.integers(0, 30, size=(7, 3)).astype(np.int64)
    lens = np.array([7, 4, 1], np.int32)
    compare(lstm_model(), {"tokens": tokens, "lens": lens})


# --- YOLO-style detection head ----------------------------------------------------------------


def yolo_head_model(anchors=3, classes=4):
    b = Builder(14)
    c1 = conv_bn(b, "image", 3, 16, 3, stride=2)           # /2
    c2 = conv_bn(b, c1, 16, 32, 3, stride=2)               # /4
    c3 = conv_bn(b, c2, 32, 64, 3, stride=2)               # /8
    lateral = conv_bn(b, c3, 64, 32, 1)
    scales = b.const(np.array([1, 1, 2, 2], np.float32))
    up = b.op("Resize", [lateral, "", scales], mode="nearest")  # back to /4
    merged = b.op("Concat", [up, c2], axis=1)
    p4 = conv_bn(b, merged, 64, 32, 3)
    outs = []
    for feat, c in [(c3, 64), (p4, 32)]:
        n_out = anchors * (5 + classes)
        y = b.op("Conv", [feat, b.weight([n_out, c, 1, 1]), b.const(
            (0.1 * b.rng.standard_normal(n_out)).astype(np.float32))])
        # [N, A*(5+C), H, W] -> [N, H*W*A, 5+C]
        y = b.op("Reshape", [y, b.const(np.array([0, anchors, 5 + classes, -1], np.int64))])
        y = b.op("Transpose", [y], perm=[0, 3, 1, 2])
        y = b.op("Reshape", [y, b.const(np.array([0, -1, 5 + classes], np.int64))])
        outs.append(b.op("Sigmoid", [y]))
    b.op("Concat", outs, out="detections", axis=1)
    return b.model([helper.make_tensor_value_info("image", F, [1, 3, 64, 64])],
                   [helper.make_tensor_value_info("detections", F, None)])


def test_yolo_style_head_with_resize_and_concat():
    rng = np.random.default_rng(5)
    (det,) = compare(yolo_head_model(),
                     {"image": rng.standard_normal((1, 3, 64, 64)).astype(np.float32)})
    assert det.shape == (1, (8 * 8 + 16 * 16) * 3, 9)
