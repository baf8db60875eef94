"""Conv algorithms (src/providers/cpu/nn/conv.cc) against onnxruntime: the direct depthwise kernel
(stride 1 / 2 / 3, dilated, channel multiplier, 1-D, wide and narrow outputs), 1x1 GEMM on
the input, im2col + GEMM (normal and, for few output positions, transposed), Winograd
F(4x4, 3x3) for 3x3 stride-1 convolutions with 32 to 128 x 128 channels and F(2x2, 3x3) up to
256 x 256, grouped convolutions,
float16 / double, non-constant weights, 1 and 2 threads. Also the bad-input paths of the
ortlite-internal FusedConv."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import randn, run_lite, run_ort

F16, F32, F64 = np.float16, np.float32, np.float64


def conv_model(x_shape, w, bias=None, dtype=F32, const_w=True, opset=17, **attrs):
    inits, inputs = [], [helper.make_tensor_value_info("x", _elem(dtype), list(x_shape))]
    names = ["x", "w"]
    if const_w:
        inits.append(numpy_helper.from_array(w, "w"))
    else:
        inputs.append(helper.make_tensor_value_info("w", _elem(dtype), list(w.shape)))
    if bias is not None:
        inits.append(numpy_helper.from_array(bias, "b"))
        names.append("b")
    node = helper.make_node("Conv", names, ["y"], name="conv", **attrs)
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_tensor_value_info("y", _elem(dtype), None)],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _elem(dtype):
    return {np.dtype(F16): TensorProto.FLOAT16, np.dtype(F32): TensorProto.FLOAT,
            np.dtype(F64): TensorProto.DOUBLE}[np.dtype(dtype)]


def check(model, feeds, threads=1, rel=2e-5, ref_model=None):
    """ortlite against onnxruntime, with a tolerance relative to the largest output (Winograd
    and the fused GEMM sum in another order than onnxruntime's kernels)."""
    expected = run_ort(ref_model or model, feeds)[0]
    actual = run_lite(model, feeds, threads)[0]
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    scale = float(np.abs(expected.astype(F64)).max()) + 1e-6
    np.testing.assert_allclose(actual.astype(F64), expected.astype(F64), rtol=rel * 10,
                               atol=rel * scale)
    return actual


# (N, C, M, H, W, kernel, stride, pads, dilation, group)
CASES = [
    # depthwise
    (1, 32, 32, 40, 40, 3, 1, [1, 1, 1, 1], 1, 32),       # wide rows
    (1, 24, 24, 14, 11, 3, 1, [1, 1, 1, 1], 1, 24),       # narrow: flat span
    (2, 16, 16, 23, 17, 3, 2, [1, 1, 1, 1], 1, 16),       # stride 2, odd sizes
    (1, 8, 8, 70, 70, 3, 2, [0, 1, 1, 0], 1, 8),          # stride 2 wide, asymmetric pads
    (1, 8, 8, 20, 20, 5, 1, [4, 4, 4, 4], 2, 8),          # dilated 5x5
    (1, 8, 16, 20, 19, 3, 3, [1, 2, 1, 2], 1, 8),         # multiplier 2, stride 3
    (1, 12, 12, 9, 9, 7, 1, [3, 3, 3, 3], 1, 12),         # 7x7
    (1, 16, 16, 37, 50, 3, 2, [2, 2, 2, 2], 1, 16),       # stride 2, even left pad
    (1, 8, 8, 33, 40, 5, 2, [2, 2, 2, 2], 1, 8),          # 5x5 stride 2
    (1, 4, 4, 9, 100, 3, 2, [1, 1, 1, 1], 1, 4),          # stride 2, unmasked middle vectors
    (1, 8, 8, 12, 40, 4, 1, [0, 0, 0, 0], 1, 8),          # no padding, even kernel
    (1, 8, 8, 6, 7, 3, 1, [3, 3, 3, 3], 1, 8),            # pads beyond the kernel
    (2, 8, 8, 5, 7, 3, 1, [0, 2, 2, 0], 1, 8),            # narrow: one span, pads asymmetric
    (1, 4, 4, 8, 8, 5, 1, [2, 2, 2, 2], 1, 4),            # narrow 5x5
    (2, 4, 8, 12, 20, 3, 1, [1, 1, 1, 1], 1, 4),          # multiplier 2
    (1, 6, 12, 9, 40, 3, 2, [1, 1, 1, 1], 1, 6),          # multiplier 2, stride 2
    (2, 8, 16, 36, 33, 3, 1, [1, 1, 1, 1], 1, 8),         # bands of rows: multiplier 2, N = 2
    (1, 4, 4, 70, 64, 5, 2, [2, 1, 2, 1], 1, 4),          # bands of rows: 5x5 stride 2
    # Winograd F(4x4, 3x3) (32 channels and more)
    (1, 32, 32, 8, 8, 3, 1, [1, 1, 1, 1], 1, 1),
    (2, 32, 48, 17, 23, 3, 1, [1, 1, 1, 1], 1, 1),
    (1, 64, 64, 30, 30, 3, 1, [1, 1, 1, 1], 1, 1),
    (1, 40, 32, 19, 13, 3, 1, [0, 2, 1, 0], 1, 1),        # asymmetric pads
    (1, 32, 36, 6, 5, 3, 1, [0, 0, 0, 0], 1, 1),          # no padding, tiny
    (1, 32, 32, 15, 15, 3, 1, [2, 2, 2, 2], 1, 1),        # pads larger than the kernel needs
    # Winograd F(2x2, 3x3) (more than 128 x 128 up to 256 x 256 channels)
    (1, 256, 256, 14, 14, 3, 1, [1, 1, 1, 1], 1, 1),      # ResNet's third stage
    (1, 128, 160, 9, 11, 3, 1, [0, 2, 1, 0], 1, 1),       # odd sizes, asymmetric pads
    (2, 160, 200, 13, 6, 3, 1, [1, 1, 1, 1], 1, 1),       # a part-filled panel, N = 2
    (1, 136, 136, 40, 40, 3, 1, [1, 1, 1, 1], 1, 1),      # several bands of tile rows
    (1, 128, 130, 7, 37, 3, 1, [2, 2, 2, 2], 1, 1),       # 20 tiles a row, wide pads
    (1, 256, 96, 5, 6, 3, 1, [0, 1, 0, 1], 1, 1),         # 9 tiles: the smallest it takes
    (1, 256, 96, 6, 6, 3, 1, [0, 0, 0, 0], 1, 1),         # 4 x 4 output: im2col instead
    (1, 256, 128, 7, 7, 3, 1, [1, 1, 1, 1], 1, 1),        # 7 x 7: tiles overshoot, im2col
    (1, 512, 64, 8, 8, 3, 1, [1, 1, 1, 1], 1, 1),         # 16 tiles (12 + 4 rows), 2 panels
    (1, 1024, 32, 8, 8, 3, 1, [1, 1, 1, 1], 1, 1),        # one panel: bands for the threads
    # im2col + GEMM
    (1, 16, 16, 8, 8, 3, 1, [1, 1, 1, 1], 1, 1),          # 3x3 with too few channels for Winograd
    (1, 24, 40, 19, 13, 3, 1, [0, 2, 1, 0], 1, 1),        # the same, asymmetric pads
    (1, 32, 32, 9, 9, 3, 1, [1, 1, 1, 1], 2, 1),          # dilated 3x3: no Winograd
    (1, 300, 20, 10, 10, 3, 1, [1, 1, 1, 1], 1, 1),       # more channels than Winograd takes
    (1, 64, 96, 5, 5, 3, 1, [1, 1, 1, 1], 1, 1),          # few positions: transposed product
    (1, 64, 128, 14, 14, 3, 2, [1, 1, 1, 1], 1, 1),       # strided
    (1, 3, 16, 30, 30, 7, 2, [3, 3, 3, 3], 1, 1),         # 7x7 stem
    (2, 32, 64, 10, 10, 3, 1, [1, 1, 1, 1], 1, 4),        # grouped
    # im2col of a shifted input (strides 1, rows as wide as the output's)
    (1, 16, 48, 40, 40, 3, 1, [1, 1, 1, 1], 1, 1),        # several blocks of positions
    (1, 8, 24, 11, 13, 4, 1, [1, 1, 2, 2], 1, 1),         # even kernel, asymmetric pads
    (1, 16, 24, 12, 12, 3, 1, [0, 1, 0, 1], 1, 1),        # rows unpadded: fewer output rows
    (2, 16, 16, 9, 9, 3, 1, [2, 2, 2, 2], 2, 2),          # dilated, grouped, N = 2
    # im2col through the four phases of a stride-2 input (input twice the output)
    (1, 8, 24, 16, 20, 3, 2, [0, 0, 1, 1], 1, 1),         # no leading padding
    (2, 12, 20, 16, 16, 4, 2, [1, 1, 1, 1], 1, 2),        # even kernel, grouped, N = 2
    (1, 3, 24, 64, 48, 7, 2, [3, 3, 3, 3], 1, 1),         # 7x7 stem, several blocks
    # 1x1
    (1, 64, 40, 7, 7, 1, 1, [0, 0, 0, 0], 1, 1),          # transposed
    (2, 24, 72, 20, 20, 1, 1, [0, 0, 0, 0], 1, 1),
    (2, 64, 32, 7, 9, 1, 2, [0, 0, 0, 0], 1, 1),          # strided 1x1: im2col
    (1, 40, 48, 30, 30, 1, 2, [0, 0, 0, 0], 1, 1),        # one image: a block per thread
    # Transposed or not by depth: shallow products keep the plain one (no pass back)
    (1, 64, 128, 40, 40, 1, 2, [0, 0, 0, 0], 1, 1),       # K 64, positions split at 2 threads
    (1, 96, 160, 14, 14, 1, 1, [0, 0, 0, 0], 1, 1),       # K 96 at 14 x 14: plain
    (1, 160, 200, 7, 7, 1, 1, [0, 0, 0, 0], 1, 1),        # K 160 at 7 x 7: transposed
    # Transposed, Kg >= 2 Mg, one task: at 2 threads split over the input channels
    (1, 64, 64, 7, 7, 3, 1, [1, 1, 1, 1], 1, 1),          # 3x3 at 7 x 7
    (1, 32, 64, 14, 14, 3, 2, [1, 1, 1, 1], 1, 1),        # strided, 49 positions
    (1, 45, 60, 9, 9, 3, 1, [1, 1, 1, 1], 1, 1),          # odd depth (405), 60 channels
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:6])) + f"_s{c[6]}_g{c[9]}")
@pytest.mark.parametrize("threads", [1, 2])
def test_conv_algorithms(case, threads):
    N, C, M, H, W, k, s, pads, d, g = case
    w = randn((M, C // g, k, k), 1, scale=1.0 / np.sqrt(C // g * k * k))
    b = randn((M,), 2)
    model = conv_model((N, C, H, W), w, b, kernel_shape=[k, k], strides=[s, s], pads=pads,
                       dilations=[d, d], group=g)
    check(model, {"x": randn((N, C, H, W), 3)}, threads)


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("post", ["LeakyRelu", "Relu"])
def test_depthwise_bands_with_residual(threads, post):
    """Large depthwise planes at several threads: a band of output rows of every plane per
    thread, each band reading only the input rows it needs, then the residual Add and the
    activation (LeakyRelu on the finished band, Relu after the Add) fused into it."""
    C, H, W = 12, 47, 53
    w = randn((C, 1, 3, 3), 4, scale=0.3)
    b = randn((C,), 5)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=C, kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "r"], ["s"]),
             helper.make_node(post, ["s"], ["y"], **({"alpha": 0.1} if post == "LeakyRelu" else {}))]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, W]),
                     helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, C, H, W])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    check(model, {"x": randn((1, C, H, W), 6), "r": randn((1, C, H, W), 7)}, threads)


@pytest.mark.parametrize("threads", [3, 4])
def test_conv_im2col_blocks_split_inside_rows(threads):
    """Blocks of output positions that start and end inside output rows (the block size is
    evened out over 3 and 4 threads), read from a shifted input, row by row (stride 2, odd
    sizes) and through the phases of an even-sized stride-2 input."""
    for s, pads, hw in ((1, [1, 1, 1, 1], (37, 41)), (2, [1, 1, 1, 1], (37, 41)),
                        (1, [0, 2, 1, 0], (37, 41)), (2, [1, 1, 1, 1], (74, 82))):
        w = randn((40, 20, 3, 3), 1, scale=0.1)
        model = conv_model((1, 20) + hw, w, randn((40,), 2), kernel_shape=[3, 3],
                           strides=[s, s], pads=pads)
        check(model, {"x": randn((1, 20) + hw, 3)}, threads)


# Strides 1, at most 64 output channels per group: the implicit im2col (the GEMM reads the
# zero-padded input through a table of offsets), on the padded grid with a copy out (narrow
# rows) or row by row (rows that fill the 32-wide tiles), with no padding straight into Y.
IMPLICIT = [
    # (N, C, M, H, W, kernel, pads, dilation, group)
    (1, 16, 16, 16, 16, 3, [1, 1, 1, 1], 1, 1),      # grid, copied out
    (1, 3, 16, 32, 32, 3, [1, 1, 1, 1], 1, 1),       # row by row, 3 channels
    (2, 8, 24, 13, 45, 3, [0, 2, 1, 0], 1, 1),       # asymmetric pads, odd sizes, 2 images
    (1, 24, 24, 30, 40, 5, [2, 2, 2, 2], 1, 1),      # 5x5
    (1, 12, 20, 21, 64, 3, [2, 2, 2, 2], 2, 1),      # dilated, row by row
    (1, 16, 32, 10, 20, 3, [0, 0, 0, 0], 1, 1),      # no padding
    (1, 16, 12, 9, 40, 2, [0, 0, 0, 0], 1, 1),       # even kernel, no padding
    (1, 32, 64, 20, 20, 3, [1, 1, 1, 1], 1, 2),      # groups
    (1, 10, 64, 70, 70, 3, [1, 1, 1, 1], 1, 1),      # several bands
    (1, 6, 8, 7, 33, 3, [3, 3, 3, 3], 1, 1),         # pads beyond the kernel
]


@pytest.mark.parametrize("case", IMPLICIT, ids=lambda c: "x".join(map(str, c[:6])) + f"_d{c[7]}_g{c[8]}")
@pytest.mark.parametrize("threads", [1, 2])
def test_conv_implicit_im2col(case, threads):
    N, C, M, H, W, k, pads, d, g = case
    w = randn((M, C // g, k, k), 1, scale=1.0 / np.sqrt(C // g * k * k))
    model = conv_model((N, C, H, W), w, randn((M,), 2), kernel_shape=[k, k], pads=pads,
                       dilations=[d, d], group=g)
    check(model, {"x": randn((N, C, H, W), 3)}, threads)


@pytest.mark.parametrize("kernel,pads", [([1, 5], [0, 2, 0, 2]), ([7, 1], [3, 0, 3, 0])])
def test_conv_implicit_im2col_rectangular_kernels(kernel, pads):
    w = randn((16, 8) + tuple(kernel), 1, scale=0.1)
    model = conv_model((1, 8, 24, 40), w, randn((16,), 2), kernel_shape=kernel, pads=pads)
    check(model, {"x": randn((1, 8, 24, 40), 3)}, 2)


@pytest.mark.parametrize("width", [16, 32, 45, 64])
@pytest.mark.parametrize("act", ["Relu", "Sigmoid"])
@pytest.mark.parametrize("residual", [True, False], ids=["sum", "nosum"])
@pytest.mark.parametrize("threads", [1, 2])
def test_conv_implicit_im2col_with_sum_and_activation(width, act, residual, threads):
    """Conv [+ Add] + activation, fused into one FusedConv at load: the sum and the activation
    are applied on the copy out of the grid, in registers, or (Sigmoid, row by row) once
    over each channel's rows of a band after its products."""
    w = randn((16, 16, 3, 3), 1, scale=0.1)
    shape = [1, 16, 12, width]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "z"], ["s"]) if residual else
             helper.make_node("Identity", ["c"], ["s"]),
             helper.make_node(act, ["s"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape),
                     helper.make_tensor_value_info("z", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(randn((16,), 2), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    check(model, {"x": randn(tuple(shape), 3), "z": randn(tuple(shape), 4)}, threads)


@pytest.mark.parametrize("pads,stride", [([1, 1], 2), ([1, 1], 1), ([0, 2], 1)])
@pytest.mark.parametrize("group", [1, 8])
def test_conv_1d(group, pads, stride):
    w = randn((16, 16 // group, 3), 1)
    model = conv_model((2, 16, 37), w, randn((16,), 2), kernel_shape=[3], strides=[stride],
                       pads=pads, group=group)
    check(model, {"x": randn((2, 16, 37), 3)})


def test_conv_3d_dense_same_padding():
    w = randn((12, 6, 3, 3, 3), 1, scale=0.1)
    model = conv_model((2, 6, 5, 7, 9), w, randn((12,), 2), kernel_shape=[3, 3, 3],
                       pads=[1, 1, 1, 1, 1, 1])
    check(model, {"x": randn((2, 6, 5, 7, 9), 3)})


def test_conv_3d_depthwise():
    w = randn((8, 1, 3, 3, 3), 1)
    model = conv_model((1, 8, 6, 7, 8), w, randn((8,), 2), kernel_shape=[3, 3, 3],
                       pads=[1, 1, 1, 1, 1, 1], group=8)
    check(model, {"x": randn((1, 8, 6, 7, 8), 3)})


@pytest.mark.parametrize("shape", [(1, 32, 32, 12, 12, 3, 1), (1, 32, 32, 12, 12, 3, 32),
                                   (1, 16, 24, 9, 9, 1, 1)])
def test_conv_weights_fed_at_run_time(shape):
    N, C, M, H, W, k, g = shape
    w = randn((M, C // g, k, k), 1)
    model = conv_model((N, C, H, W), w, const_w=False, kernel_shape=[k, k], pads=[k // 2] * 4,
                       group=g)
    check(model, {"x": randn((N, C, H, W), 3), "w": w})


@pytest.mark.parametrize("group", [1, 16])
def test_conv_float16(group):
    # Weights eligible for Winograd / the fused GEMM: prepared from float16 in float.
    w = randn((32, 32 // group, 3, 3), 1, dtype=F16, scale=0.2)
    model = conv_model((1, 32, 16, 16), w, randn((32,), 2, dtype=F16), dtype=F16,
                       kernel_shape=[3, 3],
                       pads=[1, 1, 1, 1], group=group)
    check(model, {"x": randn((1, 32, 16, 16), 3, dtype=F16)}, rel=3e-3)


def test_conv_double_matches_float_reference():
    # onnxruntime has no double Conv: compare with its float result.
    w = randn((32, 32, 3, 3), 1, dtype=F64, scale=0.1)
    x = randn((1, 32, 12, 12), 3, dtype=F64)
    model = conv_model((1, 32, 12, 12), w, dtype=F64, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    ref = conv_model((1, 32, 12, 12), w.astype(F32), kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    expected = run_ort(ref, {"x": x.astype(F32)})[0]
    actual = run_lite(model, {"x": x}, threads=1)[0]
    assert actual.dtype == F64
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4)


# ---- FusedConv: bad input ------------------------------------------------------------------


def fused_conv_model(attrs, n_inputs=2, w=None, z_shape=None):
    w = w if w is not None else randn((8, 8, 3, 3), 1)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 6, 6])]
    names = ["x", "w"]
    inits = [numpy_helper.from_array(w, "w")]
    if n_inputs >= 3:
        names.append("")
    if n_inputs >= 4:
        names.append("z")
        inputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, list(z_shape)))
    if n_inputs >= 5:
        names.append("x")
    node = helper.make_node("FusedConv", names, ["y"], domain="com.ortlite", name="fc",
                            kernel_shape=[3, 3], pads=[1, 1, 1, 1], **attrs)
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.ortlite", 1)])
    model.ir_version = 8
    return model


def test_fused_conv_runs_with_activation_and_sum():
    w = randn((8, 8, 3, 3), 1)
    x, z = randn((1, 8, 6, 6), 2), randn((1, 8, 6, 6), 3)
    model = fused_conv_model({"activation": "Clip", "activation_params": [-0.5, 0.5]}, 4, w,
                             (1, 8, 6, 6))
    ref = conv_model((1, 8, 6, 6), w, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    expected = np.clip(run_ort(ref, {"x": x})[0] + z, -0.5, 0.5)
    actual = run_lite(model, {"x": x, "z": z}, threads=1)[0]
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs, n_inputs, match", [
    ({"activation": "Swish"}, 2, "unknown activation 'Swish'"),
    ({"activation": "Clip", "activation_params": [0.0]}, 2, "takes 2 activation_params"),
    ({"activation": "Relu", "w_scale": [1.0, 2.0]}, 2, "w_scale"),
    ({"activation": "Relu"}, 5, "at most 4 inputs"),
])
def test_fused_conv_bad_attributes(attrs, n_inputs, match):
    with pytest.raises(ortlite.InvalidGraph, match=match):
        run_lite(fused_conv_model(attrs, n_inputs, z_shape=(1, 8, 6, 6)),
                 {"x": randn((1, 8, 6, 6), 2), "z": randn((1, 8, 6, 6), 3)}, threads=1)


def test_fused_conv_sum_shape_mismatch():
    model = fused_conv_model({"activation": "Relu"}, 4, z_shape=(1, 8, 5, 6))
    with pytest.raises(ortlite.InvalidArgument, match="does not broadcast"):
        run_lite(model, {"x": randn((1, 8, 6, 6), 2), "z": randn((1, 8, 5, 6), 3)}, threads=1)


def test_fused_conv_sum_wrong_type():
    model = fused_conv_model({"activation": ""}, 4, z_shape=(1, 8, 6, 6))
    model.graph.input[1].type.tensor_type.elem_type = TensorProto.DOUBLE
    with pytest.raises(ortlite.InvalidArgument, match="summed input Z"):
        run_lite(model, {"x": randn((1, 8, 6, 6), 2), "z": randn((1, 8, 6, 6), 3, dtype=F64)},
                 threads=1)


# One input channel per group with a long window into many output channels (STFT-style 1-D
# Conv: im2col + GEMM) and short windows (the direct depthwise kernel), both sides of the
# switch between them.
@pytest.mark.parametrize("x_shape,w_shape,attrs", [
    ((1, 1, 1760), (257, 1, 512), {"strides": [160]}),
    ((1, 1, 8000), (258, 1, 256), {"strides": [128]}),
    ((2, 1, 3000), (257, 1, 512), {"strides": [160]}),                # batch 2, read in place
    ((1, 2, 2000), (260, 1, 300), {"strides": [100], "group": 2}),    # per group, in place
    ((1, 1, 1800), (130, 1, 512), {"strides": [160], "pads": [0, 200]}),  # end pad: im2col
    ((1, 1, 1800), (130, 1, 256), {"strides": [160], "dilations": [2]}),  # dilated: im2col
    ((1, 1, 1761), (64, 1, 512), {"strides": [1]}),                   # stride 1, in place
    ((2, 1, 900), (16, 1, 50), {"strides": [3], "pads": [5, 7]}),
    ((1, 1, 40, 40), (12, 1, 7, 7), {"pads": [3, 3, 3, 3]}),
    ((1, 1, 40, 40), (12, 1, 8, 8), {"strides": [2, 2]}),
    ((1, 4, 30, 30), (8, 1, 8, 8), {"group": 4}),
])
@pytest.mark.parametrize("threads", [1, 2])
def test_single_input_channel_long_windows(x_shape, w_shape, attrs, threads):
    w = randn(w_shape, 1)
    b = randn(w_shape[0], 2)
    check(conv_model(x_shape, w, b, **attrs), {"x": randn(x_shape, 3)}, threads=threads)


# (C, M, H, W, act): deep pointwise products after a depthwise convolution, at 2 threads
# split over the input channels (Kg >= 2 Mg) with the two partial products added on the way
# back to channel-major; shallower ones, and 1 thread, keep the split by output channels,
# each run of channels copied back by the thread that computed it.
KSPLIT = [
    (384, 64, 14, 14, "Clip"),   # MobileNetV2's projection, + residual
    (131, 60, 7, 7, "Relu"),     # odd depth, channels not a multiple of 16
    (960, 160, 7, 7, None),      # 49 positions, 10 blocks of 16 channels
    (200, 100, 5, 9, "Relu"),    # 45 positions
    (256, 200, 7, 7, None),      # Kg < 2 Mg: split by output channels
    (160, 960, 7, 7, "Clip"),    # 30 column panels claimed in runs, each copied back at once
]


@pytest.mark.parametrize("case", KSPLIT, ids=lambda c: "x".join(map(str, c[:4])) + f"_{c[4]}")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("residual", [False, True])
def test_pointwise_after_depthwise_split_over_input_channels(case, threads, residual):
    C, M, H, W, act = case
    shape = [1, C, H, W]
    inits = [numpy_helper.from_array(randn((C, 1, 3, 3), 1, scale=0.3), "wd"),
             numpy_helper.from_array(randn((C,), 2), "bd"),
             numpy_helper.from_array(randn((M, C, 1, 1), 3, scale=1.0 / np.sqrt(C)), "wp"),
             numpy_helper.from_array(randn((M,), 4), "bp"),
             numpy_helper.from_array(np.array(-0.5, F32), "lo"),
             numpy_helper.from_array(np.array(0.5, F32), "hi")]
    nodes = [helper.make_node("Conv", ["x", "wd", "bd"], ["d"], kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1], group=C),
             helper.make_node("Conv", ["d", "wp", "bp"], ["p"], kernel_shape=[1, 1])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)]
    feeds = {"x": randn(tuple(shape), 5)}
    out = "p"
    if residual:
        inputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, M, H, W]))
        feeds["z"] = randn((1, M, H, W), 6)
        nodes.append(helper.make_node("Add", ["p", "z"], ["s"]))
        out = "s"
    if act == "Clip":
        nodes.append(helper.make_node("Clip", [out, "lo", "hi"], ["y"]))
    elif act:
        nodes.append(helper.make_node(act, [out], ["y"]))
    else:
        nodes.append(helper.make_node("Identity", [out], ["y"]))
    graph = helper.make_graph(nodes, "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    y = check(model, feeds, threads)
    # The same values at 1 and 2 threads, up to the order of the partial sums.
    if threads == 2:
        np.testing.assert_allclose(y, run_lite(model, feeds, 1)[0], rtol=1e-5, atol=1e-5)


def graph_model(nodes, inits, x_shape):
    """A float model of `nodes` from input x (shape x_shape) to output y."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         list(x_shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def residual_block_model(C, H, W, act):
    """Conv -> BatchNormalization -> Add(x) -> act: ortlite's optimizer folds it into one
    FusedConv (w_scale, Z, activation)."""
    rng = np.random.default_rng(7)
    w = (rng.standard_normal((C, C, 3, 3)) / np.sqrt(9 * C)).astype(F32)
    bn = [rng.uniform(0.5, 1.5, C), rng.standard_normal(C) * 0.1, rng.standard_normal(C) * 0.1,
          rng.uniform(0.5, 1.5, C)]
    inits = [numpy_helper.from_array(w, "w")] + [
        numpy_helper.from_array(v.astype(F32), n) for v, n in zip(bn, ["s", "b", "m", "v"])]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
             helper.make_node("Add", ["n", "x"], ["a"])]
    nodes.append(helper.make_node(act, ["a"], ["y"]) if act else
                 helper.make_node("Identity", ["a"], ["y"]))
    return graph_model(nodes, inits, (1, C, H, W))


@pytest.mark.parametrize("act", ["Relu", "Sigmoid", None])
@pytest.mark.parametrize("threads", [1, 2])
def test_winograd2_residual_block(act, threads):
    # 256 channels at 14 x 14 (Winograd F(2x2, 3x3)) with the folded BatchNormalization's
    # scale, its shift as the bias, the residual as Z and the activation after it.
    model = residual_block_model(256, 14, 14, act)
    check(model, {"x": randn((1, 256, 14, 14), 3)}, threads)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(64, 20, 20), (32, 37, 30), (256, 13, 14)],
                         ids=["F4-20x20", "F4-bands", "F2"])
def test_winograd_epilogue_after_the_transform(shape, threads):
    # The activations the output transform cannot apply (Sigmoid, SiLU) and the residual Z
    # run once over each task's finished rows of a channel, for F(4x4) and F(2x2).
    C, H, W = shape
    check(residual_block_model(C, H, W, "Sigmoid"), {"x": randn((1, C, H, W), 3)}, threads)
    w = randn((C, C, 3, 3), 1, scale=1.0 / np.sqrt(9 * C))
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["c", "s"], ["y"])]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(randn((C,), 2), "b")]
    check(graph_model(nodes, inits, (1, C, H, W)), {"x": randn((1, C, H, W), 4)}, threads)


@pytest.mark.parametrize("act", ["Relu", "Clip"])
def test_winograd2_activation_in_registers(act):
    # Bias and Relu / Clip (no Z) are applied in the output transform.
    C, M, H, W = 160, 192, 12, 10
    w = randn((M, C, 3, 3), 1, scale=1.0 / np.sqrt(9 * C))
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(randn((M,), 2), "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1])]
    if act == "Relu":
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    else:
        inits += [numpy_helper.from_array(np.array(-0.3, F32), "lo"),
                  numpy_helper.from_array(np.array(0.4, F32), "hi")]
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"]))
    model = graph_model(nodes, inits, (1, C, H, W))
    for threads in (1, 2):
        check(model, {"x": randn((1, C, H, W), 3)}, threads)


@pytest.mark.parametrize("channels", [64, 256])
def test_winograd_nan_and_inf_stay_in_their_windows(channels):
    # Winograd F(4x4, 3x3) (64 channels) and F(2x2, 3x3) (256): the outputs whose windows
    # hold a NaN or an infinity are the non-finite ones, as in a direct convolution
    # (onnxruntime's), and no others; NaN stays NaN. An infinity can come out as NaN where a
    # direct convolution gives +-inf (the transforms subtract it from itself;
    # docs/compatibility.md).
    C = M = channels
    H = W = 10
    w = randn((M, C, 3, 3), 1, scale=1.0 / np.sqrt(9 * C))
    model = conv_model((1, C, H, W), w, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    x = randn((1, C, H, W), 3)
    x[0, 5, 2, 3] = np.nan
    x[0, 9, 7, 7] = np.inf
    expected = run_ort(model, {"x": x})[0]
    actual = run_lite(model, {"x": x}, threads=1)[0]
    np.testing.assert_array_equal(np.isfinite(actual), np.isfinite(expected))
    assert np.isnan(actual[:, :, 1:4, 2:5]).all()
    fin = np.isfinite(expected)
    np.testing.assert_allclose(actual[fin], expected[fin], rtol=2e-4, atol=2e-4)
