"""ortlite vs onnxruntime, one operator at a time: one-node models, three or more shapes or
attribute sets per operator (small, medium, large, and those the real models use).

usage: python tools/bench_ops.py [--quick] [--only Conv,Resize,...] [--list] [--threads N]
                                 [--json build/bench_ops/bench_ops.json] [--write-docs]

Each case is a model of a single node built with onnx.helper (weights as initializers, the
data inputs as graph inputs, seeded random values). Both runtimes run in this one process at
intra_op_num_threads=1 (--threads N: both at N; the docs table is the 1-thread run),
interleaved as in tools/bench.py (a repetition of ortlite, then one of onnxruntime, ...;
median per-call time; before each repetition tools/settle.py waits for the other runtime's
spinning threads to go idle). Outputs are compared first; a case one runtime
cannot load or whose outputs differ is reported as such (no figures for a load failure).
The operators the real-model corpus (tools/bench_real.py, build/bench_real/models/) uses
and that no case covers are listed at the end.
"""

import argparse
import collections
import datetime
import json
import math
import os
import re
import shlex
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the in-place build: ortlite/_ortlite*.so
sys.path.insert(0, str(ROOT / "tools"))

import bench  # noqa: E402  (interleaved timing)
import bench_real  # noqa: E402  (comparison, geometric mean, tables, docs block)

OUT_DIR = ROOT / "build" / "bench_ops"
BEGIN = "<!-- bench_ops -->"
END = "<!-- /bench_ops -->"
OPSET = 17


class Settings:
    def __init__(self, quick):
        self.quick = quick
        self.reps = 3 if quick else 11
        self.rep_seconds = 0.005 if quick else 0.03
        self.gap_seconds = 0.0 if quick else 0.002  # one thread: no pools left spinning
        self.warm_seconds = 0.005 if quick else 0.05


# --- model construction ------------------------------------------------------------------------


def _rng(label):
    """A generator seeded from the case's label (stable across runs, unlike hash())."""
    return np.random.default_rng(sum((i + 1) * ord(ch) for i, ch in enumerate(label)))


class Case:
    """One benchmark case: op, a label, the node's inputs ((name, array, is_initializer)
    or ("", None, ...) for an omitted optional input), attributes, outputs' element types."""

    def __init__(self, op, label, inputs, attrs=None, outs=None, opset=OPSET, domain="",
                 tol=None, int_atol=0, out_types=None):
        self.op, self.label = op, label
        self.inputs, self.attrs = inputs, attrs or {}
        self.outs = outs  # list of numpy dtypes; default: the first input's
        self.opset, self.domain = opset, domain
        self.tol, self.int_atol = tol, int_atol
        self.out_types = out_types  # ready-made output ValueInfoProtos (sequences)

    @property
    def name(self):
        return f"{self.op} {self.label}"


def build_model(case):
    """(ModelProto, feeds) of a Case."""
    import onnx
    from onnx import helper, numpy_helper

    graph_inputs, inits, feeds, names = [], [], {}, []
    first = None
    for name, arr, const in case.inputs:
        names.append(name)
        if not name:
            continue
        arr = materialize(arr)
        first = np.asarray(arr).dtype if first is None else first
        if const:
            inits.append(numpy_helper.from_array(np.asarray(arr), name))
        else:
            elem = helper.np_dtype_to_tensor_dtype(np.asarray(arr).dtype)
            graph_inputs.append(helper.make_tensor_value_info(name, elem, list(np.shape(arr))))
            feeds[name] = np.asarray(arr)
    if case.out_types is not None:
        outputs = case.out_types
    else:
        outs = case.outs or [first]
        outputs = [helper.make_tensor_value_info(f"y{i}", helper.np_dtype_to_tensor_dtype(
            np.dtype(d)), None) for i, d in enumerate(outs)]
    attrs = case.attrs() if callable(case.attrs) else case.attrs
    node = helper.make_node(case.op, names, [o.name for o in outputs], domain=case.domain,
                            **attrs)
    graph = helper.make_graph([node], "one_node", graph_inputs, outputs, inits)
    opsets = [helper.make_opsetid("", case.opset if not case.domain else OPSET)]
    if case.domain == "ai.onnx.ml":
        opsets.append(helper.make_opsetid("ai.onnx.ml", 3))
    elif case.domain:
        opsets.append(helper.make_opsetid(case.domain, 1))
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    # (no onnx.checker: it wants output shapes, which the runtimes infer)
    return model, feeds


class Lazy:
    """An input drawn only when its model is built: listing or selecting cases stays cheap."""

    def __init__(self, make, shape, dtype):
        self.make, self.shape, self.dtype = make, tuple(shape), np.dtype(dtype)


def materialize(x):
    return x.make() if isinstance(x, Lazy) else x


def f32(rng, *shape, lo=-1.0, hi=1.0):
    """Uniform float32 in [lo, hi), drawn lazily from a generator seeded by rng."""
    seed = int(rng.integers(1 << 62))
    return Lazy(lambda: np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32),
                shape, np.float32)


def i64(*values):
    return np.array(values, dtype=np.int64)


def _shape_str(s):
    return "x".join(map(str, s))


# --- the cases ---------------------------------------------------------------------------------

EW = [(1, 1000), (1, 64, 56, 56), (1, 256, 80, 80)]  # 1k, 200k, 1.6M elements


def conv_cases():
    out = []
    # (label, x shape, out channels, kernel, attrs)
    specs = [
        ("3x3 p1 1x32x56x56->64", (1, 32, 56, 56), 64, (3, 3), dict(pads=[1, 1, 1, 1])),
        ("3x3 s2 stem 1x3x224x224->32", (1, 3, 224, 224), 32, (3, 3),
         dict(strides=[2, 2], pads=[1, 1, 1, 1])),
        ("3x3 s2 1x64x80x80->128", (1, 64, 80, 80), 128, (3, 3),
         dict(strides=[2, 2], pads=[1, 1, 1, 1])),
        ("1x1 1x256x14x14->256", (1, 256, 14, 14), 256, (1, 1), {}),
        ("3x3 p1 1x256x14x14->256 (ResNet)", (1, 256, 14, 14), 256, (3, 3),
         dict(pads=[1, 1, 1, 1])),
        ("3x3 p1 1x256x10x10->256", (1, 256, 10, 10), 256, (3, 3), dict(pads=[1, 1, 1, 1])),
        ("3x3 p1 1x512x7x7->512 (ResNet)", (1, 512, 7, 7), 512, (3, 3), dict(pads=[1, 1, 1, 1])),
        ("1x1 1x16x160x160->64", (1, 16, 160, 160), 64, (1, 1), {}),
        ("depthwise 3x3 1x144x56x56", (1, 144, 56, 56), 144, (3, 3),
         dict(group=144, pads=[1, 1, 1, 1])),
        ("depthwise 5x5 s2 1x240x28x28", (1, 240, 28, 28), 240, (5, 5),
         dict(group=240, strides=[2, 2], pads=[2, 2, 2, 2])),
        ("depthwise 3x3 s2 1x16x320x320", (1, 16, 320, 320), 16, (3, 3),
         dict(group=16, strides=[2, 2], pads=[1, 1, 1, 1])),
        ("groups=4 3x3 1x64x28x28->64", (1, 64, 28, 28), 64, (3, 3),
         dict(group=4, pads=[1, 1, 1, 1])),
        ("dilation 2 3x3 1x64x32x32", (1, 64, 32, 32), 64, (3, 3),
         dict(dilations=[2, 2], pads=[2, 2, 2, 2])),
        ("1-D k512 s160 1x1x1760->257 (STFT)", (1, 1, 1760), 257, (512,), dict(strides=[160])),
        ("1-D k256 s128 1x1x8000->258", (1, 1, 8000), 258, (256,), dict(strides=[128])),
        ("1-D k3 p1 1x64x1000->64", (1, 64, 1000), 64, (3,), dict(pads=[1, 1])),
        ("1-D k7 dilation 3 1x32x2000->32", (1, 32, 2000), 32, (7,),
         dict(dilations=[3], pads=[9, 9])),
        ("1-D depthwise k5 1x128x500", (1, 128, 500), 128, (5,), dict(group=128, pads=[2, 2])),
        ("3x3 s1 1x1x64x256->32 (captcha)", (1, 1, 64, 256), 32, (3, 3), dict(pads=[1, 1, 1, 1])),
        ("3x3 s1 stem 1x3x160x160->32", (1, 3, 160, 160), 32, (3, 3), dict(pads=[1, 1, 1, 1])),
    ]
    for label, xs, co, k, attrs in specs:
        rng = _rng(label)
        g = attrs.get("group", 1)
        w = f32(rng, co, xs[1] // g, *k, lo=-0.2, hi=0.2)
        b = f32(rng, co)
        out.append(Case("Conv", label, [("x", f32(rng, *xs), False), ("w", w, True),
                                        ("b", b, True)], dict(kernel_shape=list(k), **attrs)))
    return out


def conv_transpose_cases():
    out = []
    specs = [
        ("k2 s2 1x24x160x160->24 (OCR det)", (1, 24, 160, 160), 24, (2, 2), dict(strides=[2, 2])),
        ("k2 s2 1x64x40x40->64", (1, 64, 40, 40), 64, (2, 2), dict(strides=[2, 2])),
        ("k4 s2 p1 1x32x40x40->16", (1, 32, 40, 40), 16, (4, 4),
         dict(strides=[2, 2], pads=[1, 1, 1, 1])),
        ("k3 s1 p1 1x16x20x20->16", (1, 16, 20, 20), 16, (3, 3), dict(pads=[1, 1, 1, 1])),
        ("1-D k4 s2 1x64x500->32", (1, 64, 500), 32, (4,), dict(strides=[2], pads=[1, 1])),
    ]
    for label, xs, co, k, attrs in specs:
        rng = _rng(label)
        w = f32(rng, xs[1], co, *k, lo=-0.2, hi=0.2)
        out.append(Case("ConvTranspose", label, [("x", f32(rng, *xs), False), ("w", w, True),
                                                 ("b", f32(rng, co), True)],
                        dict(kernel_shape=list(k), **attrs)))
    return out


def pool_cases():
    out = []
    for op, label, xs, attrs in [
        ("MaxPool", "2x2 s2 1x64x112x112", (1, 64, 112, 112),
         dict(kernel_shape=[2, 2], strides=[2, 2])),
        ("MaxPool", "3x3 s2 p1 1x64x112x112", (1, 64, 112, 112),
         dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
        ("MaxPool", "3x3 s1 p1 1x128x40x40", (1, 128, 40, 40),
         dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
        ("MaxPool", "5x5 s1 p2 1x128x20x20 (SPPF)", (1, 128, 20, 20),
         dict(kernel_shape=[5, 5], pads=[2, 2, 2, 2])),
        ("MaxPool", "2x1 s2x1 1x64x32x100 (OCR)", (1, 64, 32, 100),
         dict(kernel_shape=[2, 1], strides=[2, 1])),
        ("AveragePool", "3x3 s1 p1 exclude-pad 1x64x56x56", (1, 64, 56, 56),
         dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=0)),
        ("AveragePool", "3x3 s1 p1 include-pad 1x64x56x56", (1, 64, 56, 56),
         dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1)),
        ("AveragePool", "2x2 s2 1x128x28x28", (1, 128, 28, 28),
         dict(kernel_shape=[2, 2], strides=[2, 2])),
        ("AveragePool", "3x2 s3x2 ceil 1x480x3x40 (OCR rec)", (1, 480, 3, 40),
         dict(kernel_shape=[3, 2], strides=[3, 2], ceil_mode=1)),
        ("AveragePool", "7x7 whole input 1x2048x7x7", (1, 2048, 7, 7),
         dict(kernel_shape=[7, 7])),
        ("MaxPool", "7x7 whole input 1x512x7x7", (1, 512, 7, 7), dict(kernel_shape=[7, 7])),
        # Small planes with short rows (the channels-in-lanes kernel).
        ("MaxPool", "2x2 s2 p1 1x256x14x14", (1, 256, 14, 14),
         dict(kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1])),
        ("MaxPool", "3x3 s2 p1 1x512x7x7", (1, 512, 7, 7),
         dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
        ("MaxPool", "3x3 s3 p1 1x64x56x56", (1, 64, 56, 56),
         dict(kernel_shape=[3, 3], strides=[3, 3], pads=[1, 1, 1, 1])),
        ("AveragePool", "3x3 s2 p1 exclude-pad 1x256x14x14", (1, 256, 14, 14),
         dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0)),
        ("AveragePool", "5x5 s2 p2 exclude-pad 1x64x40x40", (1, 64, 40, 40),
         dict(kernel_shape=[5, 5], strides=[2, 2], pads=[2, 2, 2, 2], count_include_pad=0)),
        ("AveragePool", "7x7 s2 p3 exclude-pad 1x32x40x40", (1, 32, 40, 40),
         dict(kernel_shape=[7, 7], strides=[2, 2], pads=[3, 3, 3, 3], count_include_pad=0)),
        ("AveragePool", "5x5 s1 p2 exclude-pad 1x128x20x20", (1, 128, 20, 20),
         dict(kernel_shape=[5, 5], pads=[2, 2, 2, 2], count_include_pad=0)),
        ("GlobalAveragePool", "1x64x56x56", (1, 64, 56, 56), {}),
        ("GlobalAveragePool", "1x960x7x7", (1, 960, 7, 7), {}),
        ("GlobalAveragePool", "1x16x160x160", (1, 16, 160, 160), {}),
    ]:
        rng = _rng(op + label)
        out.append(Case(op, label, [("x", f32(rng, *xs), False)], attrs))
    return out


def resize_cases():
    out = []
    specs = [
        ("nearest asymmetric floor x2 1x64x40x40", (1, 64, 40, 40), "nearest", "asymmetric",
         "floor"),
        ("nearest asymmetric x2 1x256x20x20", (1, 256, 20, 20), "nearest", "asymmetric", "floor"),
        ("nearest asymmetric floor x4 1x32x40x40", (1, 32, 40, 40), "nearest", "asymmetric",
         "floor"),
        ("nearest half_pixel round_prefer_floor x2 1x32x80x80", (1, 32, 80, 80), "nearest",
         "half_pixel", "round_prefer_floor"),
        ("nearest tf_half_pixel_for_nn x2 1x32x40x40", (1, 32, 40, 40), "nearest",
         "tf_half_pixel_for_nn", "round_prefer_ceil"),
        ("linear half_pixel x2 1x96x80x80", (1, 96, 80, 80), "linear", "half_pixel", None),
        ("linear pytorch_half_pixel x4 1x24x40x40", (1, 24, 40, 40), "linear",
         "pytorch_half_pixel", None),
        ("linear align_corners x2 1x32x64x64", (1, 32, 64, 64), "linear", "align_corners", None),
        ("linear asymmetric x2 1x16x20x20", (1, 16, 20, 20), "linear", "asymmetric", None),
    ]
    for label, xs, mode, ctm, nm in specs:
        rng = _rng(label)
        # The label's " x2 " / " x4 " (a shape such as 1x64x40x40 contains "x4" too).
        scale = float(re.search(r" x(\d+) ", label).group(1))
        attrs = dict(mode=mode, coordinate_transformation_mode=ctm)
        if nm:
            attrs["nearest_mode"] = nm
        # tf_half_pixel_for_nn exists up to Resize-11, where roi is a required input
        v11 = ctm == "tf_half_pixel_for_nn"
        roi = ("roi", np.zeros(0, np.float32), True) if v11 else ("", None, True)
        out.append(Case("Resize", label, [("x", f32(rng, *xs), False), roi,
                                          ("scales", np.array([1, 1, scale, scale], np.float32),
                                           True)], attrs, opset=11 if v11 else 13))
    return out


def matmul_cases():
    out = []
    for label, a, b, bconst in [
        ("1x128x768 @ 768x768 (const)", (1, 128, 768), (768, 768), True),
        ("64x256 @ 256x256 (const)", (64, 256), (256, 256), True),
        ("1x96 @ 96x64 (const)", (1, 96), (96, 64), True),
        ("1x40x120 @ 120x6625 (OCR rec head)", (1, 40, 120), (120, 6625), True),
        ("1x12x128x64 @ 1x12x64x128 (attention)", (1, 12, 128, 64), (1, 12, 64, 128), False),
        ("1x8x40x32 @ 1x8x32x40 (OCR rec attention)", (1, 8, 40, 32), (1, 8, 32, 40), False),
        ("512x1000 @ 1000x10 (inputs)", (512, 1000), (1000, 10), False),
        ("1x200x768 @ 768x1 (const)", (1, 200, 768), (768, 1), True),
    ]:
        rng = _rng(label)
        out.append(Case("MatMul", label, [("a", f32(rng, *a), False), ("b", f32(rng, *b), bconst)]))
    for label, m, k, n, attrs in [
        ("1x1536 @ (96x1536)^T + b (wake word)", 1, 1536, 96, dict(transB=1)),
        ("64x512 @ 512x1000 + b", 64, 512, 1000, {}),
        ("1x2048 @ (1000x2048)^T + b", 1, 2048, 1000, dict(transB=1)),
        ("1x512 @ (6625x512)^T + b", 1, 512, 6625, dict(transB=1)),
        ("512x1000 @ (2x1000)^T + b", 512, 1000, 2, dict(transB=1)),
    ]:
        rng = _rng(label)
        bshape = (n, k) if attrs.get("transB") else (k, n)
        out.append(Case("Gemm", label, [("a", f32(rng, m, k), False),
                                        ("b", f32(rng, *bshape, lo=-0.1, hi=0.1), True),
                                        ("c", f32(rng, n), True)], attrs))
    return out


def quant_cases():
    out = []
    u8 = np.uint8
    for label, a, b in [("1x128x256 @ 256x256", (1, 128, 256), (256, 256)),
                        ("32x512 @ 512x512", (32, 512), (512, 512)),
                        ("1x1x96 @ 96x64", (1, 1, 96), (96, 64))]:
        rng = _rng(label)
        out.append(Case("MatMulInteger", label, [
            ("a", rng.integers(0, 256, a).astype(u8), False),
            ("b", rng.integers(0, 256, b).astype(u8), True),
            ("a_zp", np.array(128, u8), True), ("b_zp", np.array(120, u8), True)],
            outs=[np.int32]))
    # int8 weights with zero point 0 (what onnxruntime's quantizer writes), uint8 output.
    for label, a, b in [("8x128x384 @ 384x1536", (8, 128, 384), (384, 1536)),
                        ("1x77x768 @ 768x768", (1, 77, 768), (768, 768)),
                        ("1x1x512 @ 512x512", (1, 1, 512), (512, 512))]:
        rng = _rng("QLinearMatMul " + label)
        out.append(Case("QLinearMatMul", label, [
            ("a", rng.integers(0, 256, a).astype(u8), False),
            ("as", np.array(0.02, np.float32), True), ("az", np.array(128, u8), True),
            ("b", rng.integers(-127, 128, b).astype(np.int8), True),
            ("bs", np.array(0.01, np.float32), True), ("bz", np.array(0, np.int8), True),
            ("ys", np.array(0.5, np.float32), True), ("yz", np.array(128, u8), True)],
            outs=[u8], int_atol=1))
    for xs in [(1, 1000), (1, 128, 768), (1, 64, 56, 56)]:
        rng = _rng(str(xs))
        out.append(Case("DynamicQuantizeLinear", _shape_str(xs),
                        [("x", f32(rng, *xs, lo=-3, hi=5), False)],
                        outs=[np.uint8, np.float32, np.uint8], int_atol=1))
    for label, xs, co, k, attrs in [
        ("3x3 p1 1x32x56x56->64", (1, 32, 56, 56), 64, 3, dict(pads=[1, 1, 1, 1])),
        ("1x1 1x64x28x28->128", (1, 64, 28, 28), 128, 1, {}),
        ("3x3 s2 1x16x112x112->32", (1, 16, 112, 112), 32, 3,
         dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    ]:
        rng = _rng(label)
        x = rng.integers(0, 256, xs).astype(u8)
        w = rng.integers(0, 256, (co, xs[1], k, k)).astype(u8)
        out.append(Case("QLinearConv", label, [
            ("x", x, False), ("xs", np.array(0.02, np.float32), True),
            ("xz", np.array(128, u8), True),
            ("w", w, True), ("ws", np.array(0.01, np.float32), True),
            ("wz", np.array(127, u8), True),
            ("ys", np.array(0.5, np.float32), True), ("yz", np.array(100, u8), True),
            ("b", rng.integers(-1000, 1000, co).astype(np.int32), True)],
            dict(kernel_shape=[k, k], **attrs), int_atol=1))
        out.append(Case("ConvInteger", label, [
            ("x", x, False), ("w", w, True), ("xz", np.array(128, u8), True),
            ("wz", np.array(127, u8), True)], dict(kernel_shape=[k, k], **attrs),
            outs=[np.int32]))
    return out


def binary_cases():
    out = []
    specs = [
        ("Add", "same 1x64x56x56", (1, 64, 56, 56), (1, 64, 56, 56)),
        ("Add", "bias 1x64x56x56 + 64x1x1", (1, 64, 56, 56), (64, 1, 1)),
        ("Add", "row 1x128x768 + 768", (1, 128, 768), (768,)),
        ("Add", "scalar 1x1000 + ()", (1, 1000), ()),
        ("Mul", "same 1x256x80x80", (1, 256, 80, 80), (1, 256, 80, 80)),
        ("Mul", "channel 1x96x80x80 * 1x96x1x1 (SE)", (1, 96, 80, 80), (1, 96, 1, 1)),
        ("Mul", "row 1x128x768 * 768", (1, 128, 768), (768,)),
        ("Mul", "outer 1x64x1x56 * 1x1x56x1", (1, 64, 1, 56), (1, 1, 56, 1)),
        ("Sub", "1x128x768 - 1x128x1", (1, 128, 768), (1, 128, 1)),
        ("Sub", "scalar 1x64x56x56 - ()", (1, 64, 56, 56), ()),
        ("Sub", "same 1x1000", (1, 1000), (1, 1000)),
        ("Div", "1x3x224x224 / 1x3x1x1", (1, 3, 224, 224), (1, 3, 1, 1)),
        ("Div", "1x128x768 / 1x128x1", (1, 128, 768), (1, 128, 1)),
        ("Div", "scalar 1x1000 / ()", (1, 1000), ()),
        ("Max", "same 1x64x38x16", (1, 64, 38, 16), (1, 64, 38, 16)),
        ("Max", "same 1x256x80x80", (1, 256, 80, 80), (1, 256, 80, 80)),
        ("Max", "scalar 1x1000", (1, 1000), ()),
        ("Max", "short rows 197x32x24x1 by 197x32x24x12", (197, 32, 24, 1), (197, 32, 24, 12)),
        ("Pow", "tensor exponent 1x64x56x56", (1, 64, 56, 56), (1, 64, 56, 56)),
        ("Pow", "tensor exponent 1x1000", (1, 1000), (1, 1000)),
        ("Pow", "exponent 0.5 1x128x768", (1, 128, 768), ()),
        ("Equal", "1x64x56x56 == ()", (1, 64, 56, 56), ()),
        ("Equal", "same 1x1000", (1, 1000), (1, 1000)),
        ("Equal", "same 1x256x80x80", (1, 256, 80, 80), (1, 256, 80, 80)),
        ("GreaterOrEqual", "1x64x56x56 >= ()", (1, 64, 56, 56), ()),
        ("GreaterOrEqual", "1x1000 >= 1x1000", (1, 1000), (1, 1000)),
        ("GreaterOrEqual", "1x256x80x80 >= 256x1x1", (1, 256, 80, 80), (256, 1, 1)),
    ]
    for op, label, a, b in specs:
        rng = _rng(op + label)
        lo = 0.1 if op in ("Pow", "Div") else -1.0
        av = f32(rng, *a, lo=lo, hi=2.0)
        if op == "Equal":
            av = rng.integers(0, 4, a).astype(np.float32)
            bv = rng.integers(0, 4, b).astype(np.float32)
        elif op == "Pow" and b == ():
            bv = np.array(0.5, np.float32)
        else:
            bv = f32(rng, *b, lo=lo, hi=2.0)
        outs = [np.bool_] if op in ("Equal", "GreaterOrEqual") else None
        out.append(Case(op, label, [("a", av, False), ("b", bv, b == () or len(b) < len(a))],
                        outs=outs))
    return out


def unary_cases():
    out = []
    specs = [
        ("Relu", {}, None), ("Sigmoid", {}, None), ("Tanh", {}, None),
        ("Elu", dict(alpha=1.0), None), ("LeakyRelu", dict(alpha=0.2), None),
        ("HardSigmoid", dict(alpha=0.2, beta=0.5), None), ("HardSwish", {}, None),
        ("Gelu", {}, 20), ("Gelu", dict(approximate="tanh"), 20),
        ("Erf", {}, None), ("Exp", {}, None), ("Log", {}, None), ("Sqrt", {}, None),
        ("Reciprocal", {}, None), ("Floor", {}, None), ("Abs", {}, None), ("Neg", {}, None),
        ("Identity", {}, None),
    ]
    for op, attrs, opset in specs:
        for xs in EW:
            label = _shape_str(xs) + (" tanh" if attrs.get("approximate") else "")
            rng = _rng(op + label)
            lo = 0.1 if op in ("Log", "Sqrt", "Reciprocal") else -4.0
            out.append(Case(op, label, [("x", f32(rng, *xs, lo=lo, hi=4.0), False)], attrs,
                            opset=opset or OPSET))
    for xs in EW:
        rng = _rng("clip" + str(xs))
        out.append(Case("Clip", "0..6 " + _shape_str(xs), [
            ("x", f32(rng, *xs, lo=-3, hi=9), False), ("lo", np.array(0, np.float32), True),
            ("hi", np.array(6, np.float32), True)]))
        for e in (2.0, 3.0):
            out.append(Case("Pow", f"^{e:g} {_shape_str(xs)}", [
                ("x", f32(rng, *xs, lo=-2, hi=2), False), ("e", np.array(e, np.float32), True)]))
    return out


def norm_cases():
    out = []
    for xs, axis in [((1, 1000), -1), ((1, 12, 128, 128), -1), ((1, 40, 6625), -1),
                     ((1, 22, 4, 2100), 1), ((64, 12, 128, 128), -1)]:
        rng = _rng("sm" + str(xs))
        out.append(Case("Softmax", f"axis {axis} {_shape_str(xs)}",
                        [("x", f32(rng, *xs, lo=-5, hi=5), False)], dict(axis=axis)))
    # Over a middle axis: narrow and wide column blocks (YOLOv8's box distribution is
    # [1, 4, 16, 8400] over the 16).
    for op, xs, axis in [("Softmax", (768, 12), 0), ("Softmax", (1, 4, 16, 8400), 2),
                         ("Softmax", (197, 2, 49, 8), 2), ("LogSoftmax", (768, 12), 0),
                         ("LogSoftmax", (1, 80, 8400), 1), ("LogSoftmax", (8, 1000), -1),
                         ("LogSoftmax", (1, 12, 128, 128), -1), ("Softmax", (4096, 4), 1),
                         ("LogSoftmax", (128, 768, 3), 2)]:
        rng = _rng(op + str(xs))
        out.append(Case(op, f"axis {axis} {_shape_str(xs)}",
                        [("x", f32(rng, *xs, lo=-5, hi=5), False)], dict(axis=axis)))
    for xs in [(1, 40, 120), (1, 128, 768), (8, 512, 256), (7, 384, 12)]:
        rng = _rng("ln" + str(xs))
        c = xs[-1]
        out.append(Case("LayerNormalization", _shape_str(xs), [
            ("x", f32(rng, *xs), False), ("g", f32(rng, c, lo=0.5, hi=1.5), True),
            ("b", f32(rng, c), True)], dict(axis=-1, epsilon=1e-5)))
    for xs in [(1, 64, 56, 56), (8, 768, 24), (1, 32, 128, 128)]:
        rng = _rng("in" + str(xs))
        c = xs[1]
        out.append(Case("InstanceNormalization", _shape_str(xs), [
            ("x", f32(rng, *xs), False), ("s", f32(rng, c, lo=0.5, hi=1.5), True),
            ("b", f32(rng, c), True)]))
    for xs in [(1, 64, 112, 112), (1, 256, 14, 14), (32, 256), (1, 1536, 8)]:
        rng = _rng("bn" + str(xs))
        c = xs[1]
        out.append(Case("BatchNormalization", _shape_str(xs), [
            ("x", f32(rng, *xs), False), ("s", f32(rng, c, lo=0.5, hi=1.5), True),
            ("b", f32(rng, c), True), ("m", f32(rng, c), True),
            ("v", f32(rng, c, lo=0.5, hi=2.0), True)], dict(epsilon=1e-5)))
    return out


def reduce_cases():
    out = []
    specs = [
        ("ReduceMean", "last 1x128x768", (1, 128, 768), [-1], 1),
        ("ReduceMean", "spatial 1x64x56x56", (1, 64, 56, 56), [2, 3], 1),
        ("ReduceMean", "all 1x1000", (1, 1000), [0, 1], 0),
        ("ReduceMean", "axis 1 1x256x80x80", (1, 256, 80, 80), [1], 1),
        ("ReduceMax", "last 1x40x6625", (1, 40, 6625), [-1], 1),
        ("ReduceMax", "all 1x64x56x56", (1, 64, 56, 56), [0, 1, 2, 3], 0),
        ("ReduceMax", "axis 1 1x1000", (1, 1000), [1], 1),
        ("ReduceMax", "axis 1 1x64x56x56", (1, 64, 56, 56), [1], 1),
        ("ReduceMin", "spatial 1x64x56x56", (1, 64, 56, 56), [2, 3], 0),
        ("ReduceMean", "middle 1x128x768 axis 1", (1, 128, 768), [1], 0),
        ("ReduceSum", "last 1x128x768", (1, 128, 768), [-1], 1),
        ("ReduceSum", "axis 1 1x64x56x56", (1, 64, 56, 56), [1], 1),
        ("ReduceSum", "all 1x1000", (1, 1000), [0, 1], 0),
        ("ReduceProd", "last 4x8", (4, 8), [-1], 0),
        ("ReduceProd", "axis 0 64x256", (64, 256), [0], 1),
        ("ReduceProd", "last 1x128x768", (1, 128, 768), [-1], 1),
        ("ReduceSumSquare", "last 1x128x768", (1, 128, 768), [-1], 1),
        ("ReduceSumSquare", "spatial 1x64x56x56", (1, 64, 56, 56), [2, 3], 1),
        ("ReduceSumSquare", "all 1x1000", (1, 1000), [0, 1], 0),
        ("ReduceL2", "last 1x128x768", (1, 128, 768), [-1], 1),
        ("ReduceL2", "axis 1 1x64x56x56", (1, 64, 56, 56), [1], 1),
        ("ReduceL2", "all 1x1000", (1, 1000), [0, 1], 0),
        ("ReduceL1", "middle 16x64x256x3 axis 2", (16, 64, 256, 3), [2], 1),
        ("ReduceMax", "middle 16x64x256x3 axis 2", (16, 64, 256, 3), [2], 1),
        ("ReduceMax", "middle 512x7x64 axis 1", (512, 7, 64), [1], 1),
        ("ReduceMax", "rows of 3 49x77x4x3", (49, 77, 4, 3), [3], 0),
        ("ReduceMax", "rows of 77 1x24x64x77 axes 0,3", (1, 24, 64, 77), [0, 3], 0),
        ("ReduceLogSumExp", "middle 16x64x256x3 axis 2", (16, 64, 256, 3), [2], 1),
        ("ReduceMean", "middle 64x3x1024 axis 1", (64, 3, 1024), [1], 1),
        ("ReduceMin", "middle 197x256x16 axis 1", (197, 256, 16), [1], 1),
        ("ReduceMax", "middle 197x256x12 axis 1", (197, 256, 12), [1], 1),
        ("ReduceSum", "middle 197x256x12 axis 1", (197, 256, 12), [1], 1),
        ("ReduceSum", "axes 0,2 of 77x77x16x4", (77, 77, 16, 4), [0, 2], 1),
        ("ReduceMean", "axes 1,3 of 16x8x16x8x4", (16, 8, 16, 8, 4), [1, 3], 1),
        ("ReduceMax", "axes 1,3 of 4x128x16x8", (4, 128, 16, 8), [1, 3], 1),
        ("ReduceMax", "axes 1,3 of 16x8x16x8x4", (16, 8, 16, 8, 4), [1, 3], 1),
        ("ReduceMin", "axes 1,2 of 3x256x256x3", (3, 256, 256, 3), [1, 2], 1),
    ]
    for op, label, xs, axes, keep in specs:
        rng = _rng(op + label)
        lo, hi = (0.9, 1.1) if op == "ReduceProd" else (-1.0, 1.0)
        out.append(Case(op, label, [("x", f32(rng, *xs, lo=lo, hi=hi), False),
                                    ("axes", i64(*axes), True)], dict(keepdims=keep), opset=18))
    # ArgMax / ArgMin: a detector's classes (rows of 80), a segmentation map's classes (axis
    # 1), a classifier's logits, short rows and few positions after the axis.
    for op, label, xs, axis in [("ArgMax", "rows of 80 1x8400x80", (1, 8400, 80), 2),
                                ("ArgMax", "axis 1 1x21x128x128", (1, 21, 128, 128), 1),
                                ("ArgMax", "rows of 1000 64x1000", (64, 1000), 1),
                                ("ArgMax", "rows of 16 384x197x16", (384, 197, 16), 2),
                                ("ArgMin", "middle 384x128x3 axis 1", (384, 128, 3), 1)]:
        rng = _rng(op + label)
        out.append(Case(op, label, [("x", f32(rng, *xs), False)], dict(axis=axis, keepdims=0),
                        outs=[np.int64]))
    return out


def tensor_cases():
    out = []
    for label, xs, perm in [("NHWC->NCHW 1x224x224x3", (1, 224, 224, 3), [0, 3, 1, 2]),
                            ("NCHW->NHWC 1x64x56x56", (1, 64, 56, 56), [0, 2, 3, 1]),
                            ("NHWC->NCHW 1x56x56x64", (1, 56, 56, 64), [0, 3, 1, 2]),
                            ("heads 1x128x12x64 (0,2,1,3)", (1, 128, 12, 64), [0, 2, 1, 3]),
                            ("last two 1x12x128x64", (1, 12, 128, 64), [0, 1, 3, 2]),
                            ("2-D 1000x512", (1000, 512), [1, 0]),
                            ("NCHW->NHWC 1x3x224x224", (1, 3, 224, 224), [0, 2, 3, 1]),
                            ("NHWC->NCHW 1x8x8x3 (tiny)", (1, 8, 8, 3), [0, 3, 1, 2])]:
        rng = _rng(label)
        out.append(Case("Transpose", label, [("x", f32(rng, *xs), False)], dict(perm=perm)))
    for label, xs, shape in [("1x128x768->1x128x12x64", (1, 128, 768), [1, 128, 12, 64]),
                             ("1x64x56x56->1x64x3136", (1, 64, 56, 56), [1, 64, -1]),
                             ("1x16x96->1x1536", (1, 16, 96), [1, -1])]:
        rng = _rng(label)
        out.append(Case("Reshape", label, [("x", f32(rng, *xs), False),
                                           ("s", i64(*shape), True)]))
    for label, shapes, axis in [("2x 1x64x40x40 axis 1", [(1, 64, 40, 40)] * 2, 1),
                                ("4x 1x128x20x20 axis 1", [(1, 128, 20, 20)] * 4, 1),
                                ("3 heads 1x2704/676/169x6 axis 1",
                                 [(1, 2704, 6), (1, 676, 6), (1, 169, 6)], 1),
                                ("4x 1x4 axis 0 (shapes)", [(4,)] * 4, 0)]:
        rng = _rng(label)
        ins = [(f"x{i}", f32(rng, *s) if len(s) > 1 else i64(1, 2, 3, 4), False)
               for i, s in enumerate(shapes)]
        out.append(Case("Concat", label, ins, dict(axis=axis)))
    for label, xs, st, en, ax, stp in [
            ("channels 1x64x56x56[:, :32]", (1, 64, 56, 56), [0], [32], [1], [1]),
            ("stride 2 last 1x128x768", (1, 128, 768), [0], [768], [2], [2]),
            ("crop 1x3x640x640", (1, 3, 640, 640), [16, 16], [624, 624], [2, 3], [1, 1]),
            ("shape 4 [2:]", (4,), [2], [4], [0], [1])]:
        rng = _rng(label)
        x = f32(rng, *xs) if len(xs) > 1 else i64(1, 3, 640, 640)
        out.append(Case("Slice", label, [("x", x, False), ("s", i64(*st), True),
                                         ("e", i64(*en), True), ("a", i64(*ax), True),
                                         ("p", i64(*stp), True)]))
    for label, data, idx, axis, dconst in [
            ("embedding 30522x768 [1x128]", (30522, 768), (1, 128), 0, True),
            ("channels 1x64x56x56 axis 1 [32]", (1, 64, 56, 56), (32,), 1, False),
            ("shape [4] scalar index", (4,), (), 0, False)]:
        rng = _rng(label)
        x = f32(rng, *data) if len(data) > 1 else i64(1, 3, 224, 224)
        ind = rng.integers(0, data[axis], idx).astype(np.int64) if idx else np.array(0, np.int64)
        out.append(Case("Gather", label, [("x", x, dconst), ("i", ind, not dconst)],
                        dict(axis=axis)))
    for label, xs, axis, split in [("2 halves 1x128x80x80 axis 1", (1, 128, 80, 80), 1, [64, 64]),
                                   ("qkv 1x128x2304 axis 2", (1, 128, 2304), 2, [768] * 3),
                                   ("4 1x64x56x56 axis 1", (1, 64, 56, 56), 1, [16] * 4),
                                   ("box/cls 1x84x2100 axis 1", (1, 84, 2100), 1, [4, 80])]:
        rng = _rng(label)
        out.append(Case("Split", label, [("x", f32(rng, *xs), False), ("s", i64(*split), True)],
                        dict(axis=axis), outs=[np.float32] * len(split)))
    for label, xs, to, src in [("f32->i64 1x64x56x56", (1, 64, 56, 56), np.int64, np.float32),
                               ("i64->f32 1x1536", (1, 1536), np.float32, np.int64),
                               ("f32->f16 1x128x768", (1, 128, 768), np.float16, np.float32),
                               ("bool->f32 1x256x80x80", (1, 256, 80, 80), np.float32, np.bool_),
                               ("f32->f32 1x1000", (1, 1000), np.float32, np.float32),
                               ("f64->i64 1x64x56x56", (1, 64, 56, 56), np.int64, np.float64),
                               ("f32->i32 1x64x56x56", (1, 64, 56, 56), np.int32, np.float32),
                               ("f32->u8 1x3x224x224", (1, 3, 224, 224), np.uint8, np.float32),
                               ("f32->bool 1x64x56x56", (1, 64, 56, 56), np.bool_, np.float32),
                               ("i64->bool 1x64x56x56", (1, 64, 56, 56), np.bool_, np.int64),
                               ("i64->f32 1x64x56x56", (1, 64, 56, 56), np.float32, np.int64),
                               ("f32->i64 1x16 (tiny)", (1, 16), np.int64, np.float32)]:
        rng = _rng(label)
        seed = int(rng.integers(1 << 62))
        x = Lazy(lambda xs=xs, src=src, seed=seed: (
            np.random.default_rng(seed).uniform(-100, 100, xs).astype(src) if src != np.bool_
            else np.random.default_rng(seed).random(xs) < 0.5), xs, src)
        from onnx import helper
        out.append(Case("Cast", label, [("x", x, False)],
                        dict(to=helper.np_dtype_to_tensor_dtype(np.dtype(to))), outs=[to]))
    for label, cs, xs, ys in [("mask 1x1x128x128, 1x12x128x128, ()", (1, 1, 128, 128),
                               (1, 12, 128, 128), ()),
                              ("same 1x64x56x56", (1, 64, 56, 56), (1, 64, 56, 56),
                               (1, 64, 56, 56)),
                              ("same 1x1000", (1, 1000), (1, 1000), (1, 1000))]:
        rng = _rng(label)
        out.append(Case("Where", label, [("c", rng.random(cs) < 0.5, False),
                                         ("x", f32(rng, *xs), False),
                                         ("y", f32(rng, *ys) if ys else np.array(-1e4, np.float32),
                                          ys == ())], outs=[np.float32]))
    for label, xs, ax in [("1x16x96 axis 0", (1, 16, 96), [0]),
                          ("1x1x1x2100 axes 1,2", (1, 1, 1, 2100), [1, 2]),
                          ("1x64x56x56 axis 0", (1, 64, 56, 56), [0])]:
        rng = _rng(label)
        out.append(Case("Squeeze", label, [("x", f32(rng, *xs), False), ("a", i64(*ax), True)]))
        out.append(Case("Unsqueeze", label.split(" axis")[0], [("x", f32(rng, *xs), False),
                                                              ("a", i64(0), True)]))
    for xs in [(1, 16, 96), (1, 512, 7, 7), (64, 64, 8, 8)]:
        rng = _rng("fl" + str(xs))
        out.append(Case("Flatten", _shape_str(xs), [("x", f32(rng, *xs), False)], dict(axis=1)))
    for label, xs, shape in [("1x1x96->16x1x96", (1, 1, 96), [16, 1, 96]),
                             ("64x1x1->1x64x56x56", (64, 1, 1), [1, 64, 56, 56]),
                             ("1x1x1x2100->1x2x64x2100", (1, 1, 1, 2100), [1, 2, 64, 2100])]:
        rng = _rng(label)
        out.append(Case("Expand", label, [("x", f32(rng, *xs), False), ("s", i64(*shape), True)]))
    rng = _rng("expand rows")
    out.append(Case("Expand", "4x12x1x12->4x12x128x12", [("x", f32(rng, 4, 12, 1, 12), False),
                                                         ("s", i64(4, 12, 128, 12), True)]))
    for label, xs, reps in [("64x128x4x12 by 1,1,3,3", (64, 128, 4, 12), [1, 1, 3, 3]),
                            ("1024x77 by 1,2", (1024, 77), [1, 2]),
                            ("77x32x32x3 by 3,2,3,2", (77, 32, 32, 3), [3, 2, 3, 2])]:
        rng = _rng("tile " + label)
        out.append(Case("Tile", label, [("x", f32(rng, *xs), False), ("r", i64(*reps), True)]))
    for label, xs, pads, mode in [("constant 1 1x3x224x224", (1, 3, 224, 224),
                                   [0, 0, 1, 1, 0, 0, 1, 1], "constant"),
                                  ("reflect 1x64x56x56", (1, 64, 56, 56), [0, 0, 1, 1, 0, 0, 1, 1],
                                   "reflect"),
                                  ("reflect 1x1x512 by 64 (STFT)", (1, 1, 512),
                                   [0, 0, 64, 0, 0, 64],
                                   "reflect"),
                                  ("edge 1x76x32x1", (1, 76, 32, 1), [0, 2, 2, 0, 0, 2, 2, 0],
                                   "edge"),
                                  ("reflect 1x64x80x80", (1, 64, 80, 80), [0, 0, 1, 1, 0, 0, 1, 1],
                                   "reflect"),
                                  ("edge 1x32x40x40", (1, 32, 40, 40), [0, 0, 2, 2, 0, 0, 2, 2],
                                   "edge"),
                                  ("constant 0 1x64x56x56 (HW)", (1, 64, 56, 56),
                                   [0, 0, 1, 1, 0, 0, 1, 1], "constant"),
                                  ("constant 1x2x3x4 (tiny)", (1, 2, 3, 4),
                                   [0, 0, 1, 1, 0, 0, 1, 1], "constant")]:
        rng = _rng(label)
        out.append(Case("Pad", label, [("x", f32(rng, *xs), False), ("p", i64(*pads), True)],
                        dict(mode=mode)))
    for label, idx, depth in [("1x1536 depth 257 (magika)", (1, 1536), 257),
                              ("32 depth 1000", (32,), 1000), ("128x128 depth 10", (128, 128), 10)]:
        rng = _rng(label)
        out.append(Case("OneHot", label, [
            ("i", rng.integers(0, depth, idx).astype(np.int64), False),
            ("d", np.array(depth, np.int64), True), ("v", np.array([0, 1], np.float32), True)],
            dict(axis=-1), outs=[np.float32]))
    for label, lim, dt in [("int64 0..100", 100, np.int64), ("int64 0..100000", 100000, np.int64),
                           ("float 0..10000", 10000, np.float32),
                           ("float 0..100", 100, np.float32)]:
        out.append(Case("Range", label, [("s", np.array(0, dt), False),
                                         ("l", np.array(lim, dt), False),
                                         ("d", np.array(1, dt), False)]))
    from onnx import helper, numpy_helper
    for shape in [(4,), (1, 64, 56, 56), (1, 256, 80, 80)]:
        out.append(Case("ConstantOfShape", _shape_str(shape), [("s", i64(*shape), False)],
                        dict(value=numpy_helper.from_array(np.array([0.5], np.float32))),
                        outs=[np.float32]))
        rng = _rng("shape" + str(shape))
        out.append(Case("Shape", _shape_str(shape), [("x", f32(rng, *shape), False)],
                        outs=[np.int64]))
    for shape in [(4,), (1, 64, 56, 56), (1, 256, 80, 80)]:
        rng = _rng("not" + str(shape))
        out.append(Case("Not", _shape_str(shape), [("x", rng.random(shape) < 0.5, False)]))
        out.append(Case("Size", _shape_str(shape), [("x", f32(rng, *shape), False)],
                        outs=[np.int64]))
    for xs, n in [((1, 64, 56, 56), 4), ((1, 128, 768), 3), ((12, 100), 12)]:
        rng = _rng("sts" + str(xs))
        seq = helper.make_tensor_sequence_value_info("y0", helper.np_dtype_to_tensor_dtype(
            np.dtype(np.float32)), None)
        out.append(Case("SplitToSequence", f"{_shape_str(xs)} into {n}",
                        [("x", f32(rng, *xs), False)], dict(axis=1 if xs[0] == 1 else 0),
                        out_types=[seq], opset=17))
    return out


def _if_cases():
    from onnx import TensorProto, helper
    out = []
    for xs in EW:
        rng = _rng("if" + str(xs))
        yt = helper.make_tensor_value_info("t", TensorProto.FLOAT, None)
        ye = helper.make_tensor_value_info("e", TensorProto.FLOAT, None)
        then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [], [yt])
        else_g = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["e"])], "else", [], [ye])
        c = Case("If", "Relu|Sigmoid " + _shape_str(xs), [("c", np.array(True), False)],
                 dict(then_branch=then_g, else_branch=else_g), outs=[np.float32])
        c.extra_inputs = [("x", f32(rng, *xs))]
        out.append(c)
    return out


def rnn_cases():
    out = []
    for op, label, seq, inp, hid, direction in [
            ("LSTM", "16x1x96 h64 (wake word)", 16, 96, 64, "forward"),
            ("LSTM", "50x1x128 h128", 50, 128, 128, "forward"),
            ("LSTM", "64x1x512 h256 bidirectional (captcha)", 64, 512, 256, "bidirectional"),
            ("GRU", "16x1x96 h64", 16, 96, 64, "forward"),
            ("GRU", "50x1x128 h128", 50, 128, 128, "forward"),
            ("GRU", "64x1x256 h128 bidirectional", 64, 256, 128, "bidirectional")]:
        rng = _rng(op + label)
        nd = 2 if direction == "bidirectional" else 1
        g = 4 if op == "LSTM" else 3
        s = 1 / math.sqrt(hid)
        attrs = dict(hidden_size=hid, direction=direction)
        if op == "GRU":
            attrs["linear_before_reset"] = 1
        out.append(Case(op, label, [
            ("x", f32(rng, seq, 1, inp), False),
            ("w", f32(rng, nd, g * hid, inp, lo=-s, hi=s), True),
            ("r", f32(rng, nd, g * hid, hid, lo=-s, hi=s), True),
            ("b", f32(rng, nd, 2 * g * hid, lo=-s, hi=s), True)], attrs,
            outs=[np.float32] * (3 if op == "LSTM" else 2), opset=14))
    return out


def tree_attrs(rng, n_trees, depth, n_features):
    """Node attributes of n_trees full binary trees of the given depth (BRANCH_LEQ on random
    features and thresholds); returns (node attrs, [(tree, leaf node id)])."""
    a = collections.defaultdict(list)
    leaves = []
    n_int = 2 ** depth - 1
    for t in range(n_trees):
        for i in range(2 ** (depth + 1) - 1):
            a["nodes_treeids"].append(t)
            a["nodes_nodeids"].append(i)
            if i < n_int:
                a["nodes_featureids"].append(int(rng.integers(0, n_features)))
                a["nodes_values"].append(float(rng.normal()))
                a["nodes_modes"].append("BRANCH_LEQ")
                a["nodes_truenodeids"].append(2 * i + 1)
                a["nodes_falsenodeids"].append(2 * i + 2)
            else:
                a["nodes_featureids"].append(0)
                a["nodes_values"].append(0.0)
                a["nodes_modes"].append("LEAF")
                a["nodes_truenodeids"].append(0)
                a["nodes_falsenodeids"].append(0)
                leaves.append((t, i))
            a["nodes_hitrates"].append(1.0)
            a["nodes_missing_value_tracks_true"].append(0)
    return dict(a), leaves


def tree_cases():
    out = []
    for label, n, feats, trees, depth, classes in [
            ("1x10, 10 trees depth 4, 3 classes", 1, 10, 10, 4, 3),
            ("100x20, 100 trees depth 6, 5 classes", 100, 20, 100, 6, 5),
            ("1000x50, 300 trees depth 8, 2 classes", 1000, 50, 300, 8, 2)]:
        def classifier(label=label, trees=trees, depth=depth, feats=feats, classes=classes):
            rng = _rng("tc" + label)
            attrs, leaves = tree_attrs(rng, trees, depth, feats)
            for t, i in leaves:
                for c in range(classes):
                    attrs.setdefault("class_treeids", []).append(t)
                    attrs.setdefault("class_nodeids", []).append(i)
                    attrs.setdefault("class_ids", []).append(c)
                    attrs.setdefault("class_weights", []).append(float(rng.random()) / trees)
            attrs["classlabels_int64s"] = list(range(classes))
            attrs["post_transform"] = "NONE"
            return attrs

        def regressor(label=label, trees=trees, depth=depth, feats=feats):
            rng = _rng("tr" + label)
            attrs, leaves = tree_attrs(rng, trees, depth, feats)
            for t, i in leaves:
                attrs.setdefault("target_treeids", []).append(t)
                attrs.setdefault("target_nodeids", []).append(i)
                attrs.setdefault("target_ids", []).append(0)
                attrs.setdefault("target_weights", []).append(float(rng.normal()))
            attrs.update(n_targets=1, aggregate_function="SUM", post_transform="NONE")
            return attrs

        rng = _rng("tx" + label)
        out.append(Case("TreeEnsembleClassifier", label, [("x", f32(rng, n, feats, lo=-2, hi=2),
                                                           False)], classifier,
                        outs=[np.int64, np.float32], domain="ai.onnx.ml"))
        out.append(Case("TreeEnsembleRegressor", label.rsplit(",", 1)[0],
                        [("x", f32(rng, n, feats, lo=-2, hi=2), False)], regressor,
                        outs=[np.float32], domain="ai.onnx.ml"))
    return out


def lgbm_trees(rng, n_trees, max_leaves, max_depth, n_features, n_classes):
    """Attributes of a LightGBM-style multi-class TreeEnsembleClassifier: trees grown leaf-wise
    (each split turns a random leaf above max_depth into a node, so depths differ widely),
    BRANCH_LEQ with missing_value_tracks_true on some nodes, one weight per leaf for the class
    t % n_classes of tree t, SOFTMAX."""
    a = collections.defaultdict(list)
    for t in range(n_trees):
        nleaves = int(rng.integers(2, max_leaves + 1))
        # node: [feature, threshold, true, false, depth]; leaves have feature -1
        nodes = [[-1, 0.0, 0, 0, 0]]
        leaves = [0]
        while len(leaves) < nleaves:
            cands = [i for i in leaves if nodes[i][4] < max_depth]
            if not cands:
                break
            i = cands[int(rng.integers(0, len(cands)))]
            leaves.remove(i)
            d = nodes[i][4] + 1
            nodes.append([-1, 0.0, 0, 0, d])
            nodes.append([-1, 0.0, 0, 0, d])
            nodes[i][:4] = [int(rng.integers(0, n_features)), float(rng.normal()),
                            len(nodes) - 2, len(nodes) - 1]
            leaves += [len(nodes) - 2, len(nodes) - 1]
        for i, (f, th, tr, fa, _) in enumerate(nodes):
            a["nodes_treeids"].append(t)
            a["nodes_nodeids"].append(i)
            a["nodes_featureids"].append(max(f, 0))
            a["nodes_values"].append(th)
            a["nodes_modes"].append("BRANCH_LEQ" if f >= 0 else "LEAF")
            a["nodes_truenodeids"].append(tr)
            a["nodes_falsenodeids"].append(fa)
            a["nodes_missing_value_tracks_true"].append(int(f >= 0 and rng.random() < 0.5))
            a["nodes_hitrates"].append(1.0)
            if f < 0:
                a["class_treeids"].append(t)
                a["class_nodeids"].append(i)
                a["class_ids"].append(t % n_classes)
                a["class_weights"].append(float(rng.normal() * 0.1))
    a = dict(a)
    a.update(classlabels_int64s=list(range(n_classes)), post_transform="SOFTMAX")
    return a


def lgbm_cases():
    """TreeEnsembleClassifier as the LightGBM model of the real-model corpus (luscinia) has it:
    132 features, 11 classes, one tree per class and round, trees of 1 to ~700 leaves and
    depths up to ~16 (that model: 9988 trees, 4.85M nodes)."""
    out = []
    for label, n, trees, leaves, depth in [
            ("LightGBM 1x132, 9988 trees <= 31 leaves, 11 classes", 1, 9988, 31, 16),
            ("LightGBM 1x132, 1000 trees <= 500 leaves, 11 classes", 1, 1000, 500, 16),
            ("LightGBM 64x132, 1000 trees <= 500 leaves, 11 classes", 64, 1000, 500, 16),
            ("LightGBM 256x132, 1000 trees <= 500 leaves, 11 classes", 256, 1000, 500, 16)]:
        def attrs(label=label, trees=trees, leaves=leaves, depth=depth):
            return lgbm_trees(_rng("lg" + label), trees, leaves, depth, 132, 11)

        rng = _rng("lx" + label)
        out.append(Case("TreeEnsembleClassifier", label,
                        [("x", Lazy(lambda n=n, seed=int(rng.integers(1 << 62)): _nan_rows(
                            seed, n, 132), (n, 132), np.float32), False)],
                        attrs, outs=[np.int64, np.float32], domain="ai.onnx.ml"))
    for label, n, labels in [("1x11 int64 labels", 1, list(range(11))),
                             ("256x11 int64 labels", 256, list(range(11))),
                             ("1000x3 string labels", 1000, ["a", "b", "c"])]:
        from onnx import TensorProto, helper

        key = TensorProto.INT64 if isinstance(labels[0], int) else TensorProto.STRING
        out_t = helper.make_value_info("z", helper.make_sequence_type_proto(
            helper.make_map_type_proto(key, helper.make_tensor_type_proto(TensorProto.FLOAT, []))))
        attrs = ({"classlabels_int64s": labels} if key == TensorProto.INT64
                 else {"classlabels_strings": labels})
        rng = _rng("zm" + label)
        out.append(Case("ZipMap", label, [("x", f32(rng, n, len(labels), lo=0, hi=1), False)],
                        attrs, domain="ai.onnx.ml", out_types=[out_t]))
    return out


def _nan_rows(seed, n, c):
    """n x c standard normal features with 2% NaN (missing values), float32."""
    r = np.random.default_rng(seed)
    x = r.normal(size=(n, c)).astype(np.float32)
    x[r.random(size=x.shape) < 0.02] = np.nan
    return x


def minilm_cases():
    """The shapes of the sentence-embedding MiniLMs of the real-model corpus (hidden 384, 12
    heads of 32, FFN 1536) at 1x128 and 8x64 tokens."""
    out = []
    for label, a, b, bconst in [
            ("MiniLM 1x128x384 @ 384x384 (q/k/v/out)", (1, 128, 384), (384, 384), True),
            ("MiniLM 8x64x384 @ 384x1536 (FFN up)", (8, 64, 384), (384, 1536), True),
            ("MiniLM 1x128x1536 @ 1536x384 (FFN down)", (1, 128, 1536), (1536, 384), True),
            ("MiniLM 1x12x128x32 @ 1x12x32x128 (scores)", (1, 12, 128, 32), (1, 12, 32, 128),
             False),
            ("MiniLM 8x12x64x64 @ 8x12x64x32 (context)", (8, 12, 64, 64), (8, 12, 64, 32),
             False)]:
        rng = _rng(label)
        out.append(Case("MatMul", label, [("a", f32(rng, *a), False),
                                          ("b", f32(rng, *b, lo=-0.1, hi=0.1), bconst)]))
    for xs in [(1, 128, 384), (8, 64, 384)]:
        rng = _rng("mln" + str(xs))
        out.append(Case("LayerNormalization", "MiniLM " + _shape_str(xs), [
            ("x", f32(rng, *xs, lo=-3, hi=3), False), ("g", f32(rng, 384, lo=0.5, hi=1.5), True),
            ("b", f32(rng, 384), True)], dict(axis=-1, epsilon=1e-12)))
    for xs in [(1, 12, 128, 128), (8, 12, 64, 64)]:
        rng = _rng("msm" + str(xs))
        out.append(Case("Softmax", "MiniLM " + _shape_str(xs),
                        [("x", f32(rng, *xs, lo=-8, hi=8), False)], dict(axis=-1)))
        out.append(Case("Div", "MiniLM scores " + _shape_str(xs) + " / ()",
                        [("a", f32(rng, *xs), False), ("b", np.array(5.657, np.float32), True)]))
        out.append(Case("Add", "MiniLM mask " + _shape_str(xs) + f" + {xs[0]}x1x1x{xs[3]}",
                        [("a", f32(rng, *xs), False),
                         ("b", f32(rng, xs[0], 1, 1, xs[3]), False)]))
        x = f32(rng, *xs)
        out.append(Case("IsNaN", "MiniLM " + _shape_str(xs), [("x", x, False)], outs=[np.bool_]))
        out.append(Case("Where", "MiniLM NaN to 0 " + _shape_str(xs), [
            ("c", Lazy(lambda s=xs, seed=int(rng.integers(1 << 62)): np.random.default_rng(
                seed).random(s) < 0.01, xs, np.bool_), False),
            ("x", np.array(0, np.float32), True), ("y", f32(rng, *xs), False)],
            outs=[np.float32]))
        out.append(Case("Transpose", "MiniLM heads " + _shape_str(
            (xs[0], xs[2], xs[1], 32)) + " perm 0213",
            [("x", f32(rng, xs[0], xs[2], xs[1], 32), False)], dict(perm=[0, 2, 1, 3])))
    for xs in [(1, 128, 1536), (8, 64, 1536)]:
        rng = _rng("merf" + str(xs))
        out.append(Case("Erf", "MiniLM Gelu " + _shape_str(xs), [("x", f32(rng, *xs, lo=-3,
                                                                          hi=3), False)]))
        out.append(Case("Mul", "MiniLM Gelu " + _shape_str(xs) + " * ()",
                        [("a", f32(rng, *xs), False), ("b", np.array(0.7071, np.float32), True)]))
        out.append(Case("Add", "MiniLM " + _shape_str(xs) + " + 1536",
                        [("a", f32(rng, *xs), False), ("b", f32(rng, 1536), True)]))
    for ids in [(1, 128), (8, 64), (32, 16)]:
        rng = _rng("memb" + str(ids))
        out.append(Case("Gather", f"MiniLM embedding 30522x384 [{_shape_str(ids)}]", [
            ("w", f32(rng, 30522, 384), True),
            ("i", rng.integers(0, 30522, ids).astype(np.int64), False)], dict(axis=0)))
    for a, b in [((1, 1, 128, 1), (1, 1, 1, 128)), ((8, 1, 64, 64), (8, 1, 64, 64)),
                 ((1, 1000), (1, 1000))]:
        rng = _rng("and" + str(a))
        out.append(Case("And", f"{_shape_str(a)} & {_shape_str(b)}", [
            ("a", rng.random(a) < 0.5, False), ("b", rng.random(b) < 0.5, False)]))
    out.append(Case("IsNaN", "1x1000", [("x", f32(_rng("isnan1k"), 1, 1000), False)],
                    outs=[np.bool_]))
    for b, s in [(1, 128), (8, 64), (32, 16)]:
        rng = _rng("gnd" + str(b))
        idx = np.zeros((b, 1, 1, s, 2), np.int64)
        idx[..., 0] = np.arange(b).reshape(b, 1, 1, 1)
        idx[..., 1] = np.arange(s)
        out.append(Case("GatherND", f"MiniLM mask {b}x{s} by {_shape_str(idx.shape)}", [
            ("x", rng.random((b, s)) < 0.9, False), ("i", idx, True)], dict(batch_dims=0)))
    return out


def _typed(rng, shape, dtype, lo=-1.0, hi=1.0):
    """Like f32 in any numeric type: uniform in [lo, hi) (integers: [lo, hi))."""
    seed, dt = int(rng.integers(1 << 62)), np.dtype(dtype)

    def make():
        g = np.random.default_rng(seed)
        if dt.kind in "iu":
            return g.integers(int(lo), int(hi), size=shape).astype(dt)
        return g.uniform(lo, hi, shape).astype(dt)

    return Lazy(make, shape, dt)


def breadth_cases():
    """Shapes, element types and operators outside the model corpus, where a generic path
    once ran many times slower than onnxruntime: integer Resize, one-row and integer
    products, contrib attention pieces, Einsum, box suppression, small generators."""
    out = []
    ms = "com.microsoft"
    r = _rng("resize linear u8")
    out.append(Case("Resize", "linear half_pixel x2 uint8 1x3x240x320",
                    [("x", _typed(r, (1, 3, 240, 320), np.uint8, 0, 256), False),
                     ("", None, True), ("scales", np.array([1, 1, 2, 2], np.float32), True)],
                    # ortlite rounds the blended value half to even, as the ONNX reference
                    # does; onnxruntime truncates it: they differ by one at most.
                    dict(mode="linear", coordinate_transformation_mode="half_pixel"), opset=13,
                    int_atol=1))
    r = _rng("matmul decoder")
    out.append(Case("MatMul", "2x12x1x64 @ 2x12x64x200 (decoder scores)",
                    [("a", f32(r, 2, 12, 1, 64), False), ("b", f32(r, 2, 12, 64, 200), False)]))
    r = _rng("matmul int32")
    out.append(Case("MatMul", "int32 128x256 @ 256x128",
                    [("a", _typed(r, (128, 256), np.int32, -100, 100), False),
                     ("b", _typed(r, (256, 128), np.int32, -100, 100), False)]))
    r = _rng("fused matmul")
    out.append(Case("FusedMatMul", "8x128x64 @ (8x128x64)^T alpha 0.125",
                    [("a", f32(r, 8, 128, 64), False), ("b", f32(r, 8, 128, 64), False)],
                    dict(transB=1, alpha=0.125), domain=ms))
    r = _rng("mha")
    out.append(Case("MultiHeadAttention", "1x128x768 12 heads",
                    [(n, f32(r, 1, 128, 768), False) for n in ("q", "k", "v")],
                    dict(num_heads=12), domain=ms))
    r = _rng("rope")
    out.append(Case("RotaryEmbedding", "1x128x768 12 heads",
                    [("x", f32(r, 1, 128, 768), False),
                     ("pos", np.arange(128, dtype=np.int64)[None], True),
                     ("cos", f32(r, 256, 32), True), ("sin", f32(r, 256, 32), True)],
                    dict(num_heads=12), domain=ms))
    r = _rng("nms")
    xy = np.random.default_rng(5).uniform(0, 500, (1, 2000, 2)).astype(np.float32)
    wh = np.random.default_rng(6).uniform(5, 80, (1, 2000, 2)).astype(np.float32)
    out.append(Case("NonMaxSuppression", "2000 boxes x 80 classes, max 100",
                    [("boxes", np.concatenate([xy, xy + wh], -1), False),
                     ("scores", f32(r, 1, 80, 2000, lo=0, hi=1), False),
                     ("max", np.array([100], np.int64), True),
                     ("iou", np.array([0.5], np.float32), True),
                     ("thr", np.array([0.3], np.float32), True)], outs=[np.int64], opset=11))
    out.append(Case("EyeLike", "512x512", [("x", np.zeros((512, 512), np.float32), False)],
                    dict(k=1)))
    r = _rng("col2im")
    out.append(Case("Col2Im", "64 x 3x3 blocks into 56x56, pad 1",
                    [("x", f32(r, 1, 64 * 9, 56 * 56), False),
                     ("image", np.array([56, 56], np.int64), True),
                     ("block", np.array([3, 3], np.int64), True)], dict(pads=[1, 1, 1, 1]),
                    opset=18))
    r = _rng("affine grid")
    out.append(Case("AffineGrid", "2x2x3 -> 2x3x64x64",
                    [("theta", f32(r, 2, 2, 3), False),
                     ("size", np.array([2, 3, 64, 64], np.int64), True)], opset=20))
    out += _breadth_elementwise() + _breadth_moves() + _breadth_norms() + _breadth_einsum()
    return out


def _breadth_elementwise():
    out = []
    plane = (1, 64, 112, 112)
    for op, dt in [("Sign", np.float16), ("Floor", np.float16), ("Cos", np.float16),
                   ("Sin", np.float32), ("IsInf", np.float32), ("Tanh", np.float64),
                   ("Sqrt", np.float64)]:
        r = _rng(f"{op} {dt.__name__}")
        lo = 0.0 if op == "Sqrt" else -4.0
        out.append(Case(op, f"{np.dtype(dt).name} 1x64x112x112",
                        [("x", _typed(r, plane, dt, lo, 4.0), False)],
                        outs=[np.bool_] if op == "IsInf" else None))
    for label, a, b in [("int32 1x255x80x80 / 1x255x80x80", (1, 255, 80, 80), (1, 255, 80, 80)),
                        ("int32 8x12x128x128 / 8x1x1x128", (8, 12, 128, 128), (8, 1, 1, 128)),
                        ("int32 151296x12 / 151296x1", (151296, 12), (151296, 1))]:
        r = _rng(label)
        out.append(Case("Div", label, [("a", _typed(r, a, np.int32, -1000, 1000), False),
                                       ("b", _typed(r, b, np.int32, 1, 50), False)]))
    r = _rng("fmod")
    out.append(Case("Mod", "fmod float 1e6 by 0.7",
                    [("a", f32(r, 1000000, lo=-100, hi=100), False),
                     ("b", np.array(0.7, np.float32), True)], dict(fmod=1)))
    for src, dst in [(np.float64, np.float16), (np.float16, np.int64), (np.uint8, np.float16),
                     (np.bool_, np.float16)]:
        label = f"{np.dtype(src).name} -> {np.dtype(dst).name} 1x3x256x256"
        r = _rng(label)
        x = (_typed(r, (1, 3, 256, 256), np.uint8, 0, 2) if src == np.bool_ else
             _typed(r, (1, 3, 256, 256), src, 0, 255))
        if src == np.bool_:
            x = Lazy(lambda x=x: materialize(x).astype(np.bool_), x.shape, np.bool_)
        out.append(Case("Cast", label, [("x", x, False)],
                        dict(to=int(helper_tensor_type(dst))), outs=[dst]))
    r = _rng("dequantize blocks")
    out.append(Case("DequantizeLinear", "int8 256x128, blocks of 32 along axis 0",
                    [("x", _typed(r, (256, 128), np.int8, -128, 128), False),
                     ("s", f32(r, 8, 128, lo=0.01, hi=0.1), True)],
                    dict(axis=0, block_size=32), outs=[np.float32], opset=21))
    r = _rng("pow int")
    out.append(Case("Pow", "int64 1e5 ^ 2", [("x", _typed(r, (100000,), np.int64, -1000, 1000), False),
                                            ("e", np.array(2, np.int64), True)], opset=15))
    r = _rng("quantize u8")
    out.append(Case("QuantizeLinear", "float -> uint8 1x64x80x80",
                    [("x", f32(r, 1, 64, 80, 80, lo=-3, hi=3), False),
                     ("s", np.array(0.02, np.float32), True), ("z", np.array(128, np.uint8), True)],
                    outs=[np.uint8], int_atol=1))
    return out


def helper_tensor_type(dt):
    from onnx import helper

    return helper.np_dtype_to_tensor_dtype(np.dtype(dt))


def _breadth_moves():
    out = []
    for dt, shape, perm in [(np.uint8, (8, 12, 128, 64), [0, 1, 3, 2]),
                            (np.uint8, (1, 3, 224, 224), [0, 2, 3, 1]),
                            (np.float16, (1, 3, 224, 224), [0, 2, 3, 1]),
                            (np.int64, (1, 3, 224, 224), [0, 2, 3, 1])]:
        label = f"{np.dtype(dt).name} {_shape_str(shape)} perm {perm}"
        r = _rng(label)
        out.append(Case("Transpose", label, [("x", _typed(r, shape, dt, 0, 100), False)],
                        dict(perm=perm)))
    r = _rng("gather elements")
    out.append(Case("GatherElements", "64x1000 axis 1, indices 64x500",
                    [("x", f32(r, 64, 1000), False),
                     ("i", _typed(r, (64, 500), np.int64, 0, 1000), False)], dict(axis=1)))
    r = _rng("concat last")
    out.append(Case("Concat", "int64 64x128x3 + 64x128x5 axis -1",
                    [("a", _typed(r, (64, 128, 3), np.int64, 0, 9), False),
                     ("b", _typed(r, (64, 128, 5), np.int64, 0, 9), False)], dict(axis=-1)))
    for shape, axis in [((1, 64, 56, 56), 1), ((64, 1000), 0)]:
        label = f"{_shape_str(shape)} axis {axis}"
        r = _rng("cumsum " + label)
        out.append(Case("CumSum", label, [("x", f32(r, *shape), False),
                                          ("axis", np.array(axis, np.int64), True)]))
    for shape, axis, k in [((64, 1000), 1, 5), ((8, 128, 768), -1, 5), ((1, 8400, 80), 2, 1),
                           ((768, 8), 1, 1), ((1, 25200, 85), 1, 100), ((1, 80, 8400), 2, 300)]:
        label = f"k={k} {_shape_str(shape)} axis {axis}"
        r = _rng("topk " + label)
        out.append(Case("TopK", label, [("x", f32(r, *shape), False),
                                        ("k", np.array([k], np.int64), True)], dict(axis=axis),
                        outs=[np.float32, np.int64]))
    r = _rng("trilu")
    out.append(Case("Trilu", "8x512x512 upper", [("x", f32(r, 8, 512, 512), False)], dict(upper=1),
                    opset=14))
    out.append(Case("Trilu", "rows of 7 768x2x24x7 lower", [("x", f32(r, 768, 2, 24, 7), False)],
                    dict(upper=0), opset=14))
    out.append(Case("Trilu", "1x12x128x128 lower", [("x", f32(r, 1, 12, 128, 128), False)],
                    dict(upper=0), opset=14))
    r = _rng("nonzero")
    out.append(Case("NonZero", "1x64x80x80 half nonzero",
                    [("x", Lazy(lambda: (np.random.default_rng(4).random((1, 64, 80, 80)) > 0.5)
                                .astype(np.float32), (1, 64, 80, 80), np.float32), False)],
                    outs=[np.int64]))
    r = _rng("space to depth")
    out.append(Case("SpaceToDepth", "1x16x80x80 block 2", [("x", f32(r, 1, 16, 80, 80), False)],
                    dict(blocksize=2)))
    out.append(Case("DepthToSpace", "1x256x40x40 block 4 CRD", [("x", f32(r, 1, 256, 40, 40), False)],
                    dict(blocksize=4, mode="CRD")))
    r = _rng("gather last")
    out.append(Case("Gather", "64x256x100 axis -1, 50 indices",
                    [("x", f32(r, 64, 256, 100), False),
                     ("i", _typed(r, (50,), np.int64, 0, 100), True)], dict(axis=-1)))
    r = _rng("hardmax")
    out.append(Case("Hardmax", "64x1000 axis 1", [("x", f32(r, 64, 1000), False)], dict(axis=1)))
    r = _rng("unique")
    out.append(Case("Unique", "sorted, 100000 values, 1000 distinct",
                    [("x", Lazy(lambda: np.random.default_rng(3).integers(0, 1000, 100000)
                                .astype(np.float32), (100000,), np.float32), False)],
                    dict(sorted=1), outs=[np.float32, np.int64, np.int64, np.int64], opset=11))
    return out


def _breadth_norms():
    out = []
    r = _rng("mvn")
    out.append(Case("MeanVarianceNormalization", "1x64x40x40", [("x", f32(r, 1, 64, 40, 40), False)]))
    r = _rng("group norm")
    out.append(Case("GroupNormalization", "32 groups 1x256x32x32",
                    [("x", f32(r, 1, 256, 32, 32), False), ("s", f32(r, 256), True),
                     ("b", f32(r, 256), True)], dict(num_groups=32), opset=21))
    r = _rng("lp norm")
    out.append(Case("LpNormalization", "64x1000 axis 1 p 2", [("x", f32(r, 64, 1000), False)],
                    dict(axis=1, p=2)))
    r = _rng("reduce middle")
    out.append(Case("ReduceSum", "8x128x768 axes [1]",
                    [("x", f32(r, 8, 128, 768), False), ("axes", np.array([1], np.int64), True)],
                    opset=13))
    out.append(Case("ReduceMean", "8x128x768 axes [1]", [("x", f32(r, 8, 128, 768), False)],
                    dict(axes=[1])))
    out.append(Case("ReduceProd", "1e6 values", [("x", f32(r, 1000000, lo=0.999, hi=1.001), False)],
                    dict(axes=[0])))
    out.append(Case("ReduceLogSumExp", "1x64x56x56 axes [1]", [("x", f32(r, 1, 64, 56, 56), False)],
                    dict(axes=[1])))
    r = _rng("pools")
    out.append(Case("AveragePool", "3-D 2x2x2 s2 1x16x16x32x32", [("x", f32(r, 1, 16, 16, 32, 32), False)],
                    dict(kernel_shape=[2, 2, 2], strides=[2, 2, 2])))
    out.append(Case("MaxPool", "3x3 s2 dilation 2 1x64x112x112", [("x", f32(r, 1, 64, 112, 112), False)],
                    dict(kernel_shape=[3, 3], strides=[2, 2], pads=[2, 2, 2, 2], dilations=[2, 2])))
    out.append(Case("LpPool", "3x3 s2 p2 1x64x56x56", [("x", f32(r, 1, 64, 56, 56), False)],
                    dict(kernel_shape=[3, 3], strides=[2, 2], p=2)))
    for s in (1, 2):
        label = f"depthwise 7x7 s{s} 1x96x56x56"
        r = _rng(label)
        out.append(Case("Conv", label, [("x", f32(r, 1, 96, 56, 56), False),
                                        ("w", f32(r, 96, 1, 7, 7), True)],
                        dict(group=96, pads=[3, 3, 3, 3], strides=[s, s])))
    r = _rng("grid sample")
    out.append(Case("GridSample", "bilinear 1x32x64x64", [("x", f32(r, 1, 32, 64, 64), False),
                                                         ("g", f32(r, 1, 64, 64, 2), False)],
                    opset=16))
    return out


def _breadth_einsum():
    out = []
    f = np.float32
    for eq, shapes, dt in [("bij,bjk->bik", [(8, 128, 64), (8, 64, 128)], f),
                           ("bhqd,bhkd->bhqk", [(1, 12, 128, 64), (1, 12, 128, 64)], f),
                           ("bhqk,bhkd->bhqd", [(1, 12, 128, 128), (1, 12, 128, 64)], f),
                           ("ij->ji", [(512, 256)], f),
                           ("bn,anm,bm->ba", [(16, 64), (32, 64, 48), (16, 48)], f),
                           ("ijk->ik", [(64, 128, 7)], f), ("ij,j->ij", [(1024, 1024), (1024,)], f),
                           ("zij,zjk->zik", [(256, 8, 8), (256, 8, 8)], f),
                           ("bij,bjk->bik", [(8, 64, 32), (8, 32, 64)], np.int32)]:
        label = f"{eq} {np.dtype(dt).name} " + " ".join(_shape_str(x) for x in shapes)
        r = _rng(label)
        ins = [(f"x{i}", _typed(r, x, dt, -8, 8), False) for i, x in enumerate(shapes)]
        out.append(Case("Einsum", label, ins, dict(equation=eq)))
    return out


FAMILIES = {
    "conv": conv_cases, "convtranspose": conv_transpose_cases, "pool": pool_cases,
    "resize": resize_cases, "matmul": matmul_cases, "quant": quant_cases,
    "binary": binary_cases, "unary": unary_cases, "norm": norm_cases, "reduce": reduce_cases,
    "tensor": tensor_cases, "if": _if_cases, "rnn": rnn_cases, "tree": tree_cases,
    "lgbm": lgbm_cases, "minilm": minilm_cases, "breadth": breadth_cases,
}


def all_cases():
    cases = []
    for family, fn in FAMILIES.items():
        for c in fn():
            c.family = family
            cases.append(c)
    return cases


def build(case):
    """build_model, plus the graph inputs a subgraph reads (If)."""
    from onnx import helper

    model, feeds = build_model(case)
    for name, arr in getattr(case, "extra_inputs", []):
        arr = materialize(arr)
        model.graph.input.append(helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(arr.dtype), list(arr.shape)))
        feeds[name] = arr
    return model, feeds


def select(cases, only):
    """Cases matching one of the --only words, case-insensitive: a word that names an op or
    a family selects exactly those cases; any other word, cases whose name contains it."""
    if not only:
        return cases
    names = {c.op.lower() for c in cases} | {getattr(c, "family", "") for c in cases}
    words = [w.lower() for w in only]
    return [c for c in cases if any(
        (w == c.op.lower() or w == getattr(c, "family", "")) if w in names
        else w in c.name.lower() for w in words)]


def corpus_ops(model_dir):
    """Op types (domain-qualified outside the default domain) of every .onnx under model_dir,
    subgraphs included; {} when the corpus has not been downloaded."""
    import onnx

    found = collections.Counter()

    def walk(g):
        for n in g.node:
            found[n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"] += 1
            for a in n.attribute:
                if a.g is not None and a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                for sub in a.graphs:
                    walk(sub)

    for p in sorted(Path(model_dir).glob("**/*.onnx")):
        try:
            walk(onnx.load(str(p), load_external_data=False).graph)
        except Exception:  # noqa: BLE001 - a broken file is bench_real's to report
            pass
    return dict(found)


def uncovered(corpus, cases):
    have = {c.op if not c.domain or c.domain == "ai.onnx.ml" else f"{c.domain}.{c.op}"
            for c in cases}
    have |= {"Constant"}  # folded into initializers by every exporter's consumer; not a kernel
    return sorted(op for op in corpus if op.split(".")[-1] not in have and op not in have)


# --- measuring ---------------------------------------------------------------------------------


def measure(case, st, path, threads=1):
    import onnx
    import onnxruntime

    import ortlite

    row = {"name": case.name, "op": case.op, "family": case.family, "status": "ok"}
    model, feeds = build(case)
    onnx.save(model, str(path))
    sessions = {}
    for label, rt in (("ortlite", ortlite), ("onnxruntime", onnxruntime)):
        so = rt.SessionOptions()
        so.intra_op_num_threads = threads
        if label == "onnxruntime":
            so.log_severity_level = 3
        try:
            sessions[label] = rt.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
            outs = sessions[label].run(None, feeds)
        except Exception as e:  # noqa: BLE001
            row.update(status=f"{label} fails",
                       error=f"{type(e).__name__}: {e}".replace("\n", " ")[:300])
            return row
        sessions[label + "_out"] = outs
    rtol, atol_rel = case.tol or (bench_real.RTOL, bench_real.ATOL_REL)
    lite_out = [a for o in sessions["ortlite_out"] for a in bench_real.comparable(o)]
    ref_out = [a for o in sessions["onnxruntime_out"] for a in bench_real.comparable(o)]
    ok, diff, msg = bench_real.compare_outputs(lite_out, ref_out, rtol, atol_rel,
                                               int_atol=case.int_atol)
    row["max_abs_diff"] = diff
    if not ok:
        row.update(status="MISMATCH", error=msg)
    lite, ref = sessions["ortlite"], sessions["onnxruntime"]
    res = bench.interleaved([("ortlite", lambda: lite.run(None, feeds)),
                             ("onnxruntime", lambda: ref.run(None, feeds))], st)
    tl, tr = res["ortlite"][0], res["onnxruntime"][0]
    row.update(ortlite_s=tl, onnxruntime_s=tr, ratio=tr / tl,
               calls_per_rep={k: v[2] for k, v in res.items()})
    return row


def table(rows):
    """Failures and mismatches first, then the worst ratio first; a geometric-mean footer."""
    head = ["op", "case", "status", "max|diff|", "ortlite", "onnxruntime", "ort/lite"]
    rows = sorted(rows, key=lambda r: (r["status"] == "ok", r.get("ratio") or 0.0))
    lines = []
    for r in rows:
        d = r.get("max_abs_diff")
        lines.append([r["op"], r["name"][len(r["op"]) + 1:], r["status"],
                      "-" if d is None or (isinstance(d, float) and math.isnan(d)) else f"{d:.2g}",
                      bench_real.fmt_time(r.get("ortlite_s")),
                      bench_real.fmt_time(r.get("onnxruntime_s")),
                      f"{r['ratio']:.2f}" if r.get("ratio") else "-"])
    g = bench_real.geomean([r.get("ratio") for r in rows])
    lines.append(["geometric mean", f"{sum(1 for r in rows if r.get('ratio'))} cases", "", "",
                  "", "", f"{g:.2f}" if g else "-"])
    return head, lines


def per_op_geomeans(rows):
    by = collections.defaultdict(list)
    for r in rows:
        if r.get("ratio"):
            by[r["op"]].append(r["ratio"])
    return {op: bench_real.geomean(v) for op, v in by.items()}


def docs_block(report):
    head, lines = table(report["rows"])
    failures = [f"- {r['name']}: {r['status']}: {r.get('error', '')}" for r in report["rows"]
                if r["status"] != "ok"]
    failures = ("\nNot measured or not matching:\n\n" + "\n".join(failures) + "\n"
                if failures else "")
    missing = ", ".join(report["corpus_uncovered"]) or "none"
    return f"""## Operators (tools/bench_ops.py)

<!-- Generated by `make bench-ops BENCH_OPS_ARGS=--write-docs` from {report['json']};
the block is rewritten on each run. -->

One-node models, ortlite and onnxruntime in one process at one thread, interleaved;
median per-call time over {report['settings']['reps']} repetitions, {report['date']}
(the run took {report['duration_s']:.0f} s). Command: `{report['command']}`.
`ort/lite` above 1: ortlite is faster. Failures first, then the worst ratios.
Operators of the real-model corpus without a case: {missing}.

{bench_real.md_table(head, lines)}
{failures}"""


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer and shorter repetitions")
    p.add_argument("--only", default="",
                   help="comma-separated ops (Conv), families (" + ",".join(FAMILIES) +
                        ") or substrings of case names")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument("--docs-only", action="store_true",
                   help="measure nothing: rewrite the docs block from the --json results")
    p.add_argument("--threads", type=int, default=1,
                   help="intra_op_num_threads of both runtimes (default 1)")
    p.add_argument("--json", default=None,
                   help="default build/bench_ops/bench_ops.json (bench_ops_tN.json for N > 1)")
    p.add_argument("--write-docs", action="store_true",
                   help="write the table into docs/performance.md (a marked block)")
    a = p.parse_args(argv)
    a.only = [w.strip() for w in a.only.split(",") if w.strip()]
    if a.threads < 1:
        p.error("--threads must be >= 1")
    if a.write_docs and a.threads != 1:
        p.error("--write-docs writes the 1-thread table: leave --threads at 1")
    if a.json is None:
        name = "bench_ops.json" if a.threads == 1 else f"bench_ops_t{a.threads}.json"
        a.json = str(OUT_DIR / name)
    return a


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.docs_only:
        report = json.loads(Path(args.json).read_text())
        return bench_real.write_docs_block(report, BEGIN, END, docs_block)
    cases = select(all_cases(), args.only)
    if args.list:
        for c in cases:
            print(f"{c.family:14} {c.name}")
        print(f"{len(cases)} cases")
        return 0
    if not cases:
        print("--only matches no case (see --list)")
        return 2
    command = " ".join(shlex.quote(x) for x in
                       ["python", os.path.relpath(__file__, Path.cwd())] + list(argv))
    print(f"command: {command}", flush=True)
    started = time.perf_counter_ns()
    st = Settings(args.quick)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, c in enumerate(cases):
        try:
            r = measure(c, st, OUT_DIR / "case.onnx", args.threads)
        except Exception as e:  # noqa: BLE001 - one broken case must not hide the others
            r = {"name": c.name, "op": c.op, "family": c.family, "status": "error",
                 "error": f"{type(e).__name__}: {e}".replace("\n", " ")[:300]}
        rows.append(r)
        figs = (f"ortlite {bench_real.fmt_time(r['ortlite_s'])}, onnxruntime "
                f"{bench_real.fmt_time(r['onnxruntime_s'])}, ratio {r['ratio']:.2f}"
                if r.get("ratio") else "")
        err = f" [{r['status']}: {r.get('error', '')}]" if r["status"] != "ok" else ""
        print(f"[{i + 1}/{len(cases)}] {c.name}: {figs}{err}", flush=True)
    corpus = corpus_ops(ROOT / "build" / "bench_real" / "models")
    missing = uncovered(corpus, all_cases())
    duration = (time.perf_counter_ns() - started) / 1e9
    head, lines = table(rows)
    print()
    print(bench_real.text_table(head, lines))
    for r in rows:
        if r["status"] != "ok":
            print(f"  {r['name']}: {r['status']}: {r.get('error', '')}")
    print("\nper-op geometric mean of ort/lite, worst first:")
    print("  " + ", ".join(f"{op} {g:.2f}" for op, g in
                           sorted(per_op_geomeans(rows).items(), key=lambda kv: kv[1])))
    if corpus:
        print(f"corpus operators ({len(corpus)}) without a case: {', '.join(missing) or 'none'}")
    else:
        print("corpus operators: build/bench_real/models/ is empty (run make bench-real first)")
    print(f"total time: {duration:.1f} s")
    json_path = Path(args.json)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        shown = str(json_path.resolve().relative_to(ROOT))
    except ValueError:
        shown = str(json_path)
    report = {
        "command": command,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "duration_s": duration,
        "settings": {"quick": st.quick, "reps": st.reps, "rep_seconds": st.rep_seconds,
                     "gap_seconds": st.gap_seconds, "warm_seconds": st.warm_seconds,
                     "threads": args.threads},
        "geomean": bench_real.geomean([r.get("ratio") for r in rows]),
        "per_op_geomean": per_op_geomeans(rows),
        "corpus_ops": corpus,
        "corpus_uncovered": missing,
        "rows": rows,
        "json": shown,
    }
    json_path.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {json_path}")
    if args.write_docs:
        bench_real.write_docs_block(report, BEGIN, END, docs_block)
    return 1 if any(r["status"] != "ok" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
