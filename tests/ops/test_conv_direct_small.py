"""The direct AVX-512 convolution for small dense layers (cvx::direct_run, for stems with
strides 2 and wide rows cvx::direct_s2_run, and for strides 1 on rows that fill their vectors
cvx::direct_s1_run, in src/compute/conv_avx512.cc: group 1, 16 output
channels from any number of input channels or 32 from up to 32; 64 or 96, 32 a pass, for
stems of up to 4 input channels with 5x5 or larger kernels, and 64 to 128 with strides 2
from up to 32 input channels;
outputs up to 32x32 (any size up to 4 input channels or with strides 2), strides 1 / 2, kernels
up to 7x7) against onnxruntime: every tile width (full and partial rows of 16 / 12 pixels, 4 to
32 wide outputs), odd and asymmetric pads, pads beyond the kernel, 1-channel and 32-channel
inputs, bias or none, the fused Relu / Clip / LeakyRelu and residual Add that the optimizer
folds into the convolution, batches, NaN inputs, 1 and 2 threads, and sizes just outside the
kernel's range (which run the other algorithms)."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import randn, run_lite, run_ort


def conv_net(x_shape, w, bias, strides, pads, post=None, residual=False):
    """Conv (then an activation and/or the input added back), with a constant W."""
    inits = [numpy_helper.from_array(w, "w")]
    names = ["x", "w"]
    if bias is not None:
        inits.append(numpy_helper.from_array(bias, "b"))
        names.append("b")
    nodes = [helper.make_node("Conv", names, ["c"], name="conv", strides=strides, pads=pads,
                              kernel_shape=list(w.shape[2:]))]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))]
    out = "c"
    if residual:
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, None))
        nodes.append(helper.make_node("Add", [out, "r"], ["s"], name="add"))
        out = "s"
    if post is not None:
        op, attrs = post
        extra = []
        if op == "Clip":
            inits += [numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
                      numpy_helper.from_array(np.array(6.0, np.float32), "hi")]
            extra = ["lo", "hi"]
        nodes.append(helper.make_node(op, [out] + extra, ["y"], name="act", **attrs))
        out = "y"
    graph = helper.make_graph(nodes, "g", inputs,
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def check(model, feeds, threads=1):
    expected = run_ort(model, feeds)[0]
    actual = run_lite(model, feeds, threads)[0]
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    scale = float(np.abs(expected).max()) + 1e-6
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=2e-5 * scale)
    return actual


# (N, C, M, H, W, kernel (kh, kw), stride, pads)
CASES = [
    (1, 3, 16, 32, 32, (3, 3), 1, [1, 1, 1, 1]),     # the demo's stem: two full 16-pixel tiles
    (1, 16, 16, 16, 16, (3, 3), 1, [1, 1, 1, 1]),    # one full tile per row
    (1, 16, 32, 16, 16, (3, 3), 2, [1, 1, 1, 1]),    # 32 channels, stride 2: an 8-pixel tile
    (1, 32, 32, 32, 32, (3, 3), 1, [1, 1, 1, 1]),    # 32 -> 32: 12 + 12 + 8 pixels
    (2, 8, 16, 13, 11, (3, 3), 1, [1, 1, 1, 1]),     # odd sizes, batch 2
    (1, 1, 16, 20, 20, (5, 5), 1, [2, 2, 2, 2]),     # one input channel
    (1, 4, 32, 27, 29, (7, 7), 2, [3, 3, 3, 3]),     # 7x7 stride 2 (a stem)
    (1, 16, 16, 9, 9, (1, 1), 1, [0, 0, 0, 0]),      # 1x1
    (1, 16, 32, 17, 17, (1, 1), 2, [0, 0, 0, 0]),    # 1x1 stride 2
    (1, 12, 16, 10, 30, (1, 3), 1, [0, 1, 0, 1]),    # 1x3, wide rows
    (1, 12, 32, 30, 10, (3, 1), 1, [1, 0, 1, 0]),    # 3x1
    (1, 8, 16, 14, 14, (3, 3), 1, [0, 2, 1, 0]),     # asymmetric pads
    (1, 8, 32, 6, 5, (3, 3), 1, [3, 3, 3, 3]),       # pads beyond the kernel
    (1, 16, 16, 8, 8, (2, 2), 2, [0, 0, 0, 0]),      # even kernel, no padding
    (1, 16, 32, 7, 7, (4, 4), 1, [1, 2, 2, 1]),      # even kernel, odd pads
    (1, 32, 16, 4, 4, (3, 3), 1, [1, 1, 1, 1]),      # a 4-pixel tile
    (1, 24, 32, 19, 21, (5, 5), 2, [2, 2, 2, 2]),    # 5x5 stride 2, odd
    (3, 5, 16, 25, 26, (3, 3), 2, [1, 0, 0, 1]),     # stride 2, batch 3
    (1, 16, 32, 1, 1, (1, 1), 1, [0, 0, 0, 0]),      # a single pixel
    (1, 16, 16, 33, 33, (3, 3), 1, [0, 0, 0, 0]),    # 31x31 output, no padding
    (1, 3, 16, 224, 224, (3, 3), 2, [1, 1, 1, 1]),   # a stem: any output size up to 4 channels
    (1, 4, 32, 45, 67, (3, 3), 1, [1, 1, 1, 1]),     # 4 channels, wide odd rows
    (2, 3, 32, 97, 131, (5, 5), 2, [2, 1, 2, 1]),    # 5x5 stride 2 stem, batch 2
    (1, 3, 64, 224, 224, (7, 7), 2, [3, 3, 3, 3]),   # the ResNet stem: two passes of 32
    (2, 3, 96, 41, 37, (5, 5), 1, [2, 2, 2, 2]),     # three passes, odd sizes, batch 2
    (1, 4, 64, 30, 33, (5, 5), 2, [2, 1, 2, 1]),     # asymmetric pads
    (1, 3, 64, 40, 40, (3, 3), 2, [1, 1, 1, 1]),     # 3x3 stem, 64 channels: strides 2
    # Stems with strides 2 and rows of 64 outputs or more: the kernel with the pixels in
    # the lanes (tiles of three 16-pixel vectors across rows, 8 channels at a time).
    (1, 3, 32, 224, 224, (3, 3), 2, [1, 1, 1, 1]),   # MobileNetV2's stem
    (1, 4, 64, 70, 150, (7, 7), 2, [3, 2, 3, 4]),    # asymmetric pads, 75-pixel rows
    (1, 2, 96, 33, 140, (6, 6), 2, [2, 2, 3, 3]),    # even kernel, 96 outputs
    (2, 2, 32, 40, 128, (2, 2), 2, [0, 0, 0, 0]),    # 2x2 windows, batch 2
    (1, 3, 64, 9, 200, (5, 5), 2, [2, 3, 2, 3]),     # few rows, odd left pad
    # Strides 2: direct at any output size
    (1, 16, 32, 160, 160, (3, 3), 2, [1, 1, 1, 1]),  # YOLOv8's second layer
    (1, 24, 32, 97, 113, (3, 3), 2, [1, 0, 1, 0]),   # odd sizes, asymmetric pads
    (2, 8, 16, 70, 66, (5, 5), 2, [2, 2, 2, 2]),     # 16 channels, 5x5, batch 2
    (1, 32, 64, 80, 80, (3, 3), 2, [1, 1, 1, 1]),    # 64 outputs from 32: two passes
    # 16 outputs from any number of input channels (weights past L1 for the larger ones)
    (1, 256, 16, 14, 14, (3, 3), 2, [1, 1, 1, 1]),   # 7 x 7 output, 2304 taps
    (1, 128, 16, 28, 28, (3, 3), 1, [1, 1, 1, 1]),
    (1, 512, 16, 7, 7, (3, 3), 1, [1, 1, 1, 1]),
    (2, 96, 16, 14, 13, (5, 5), 1, [2, 1, 2, 3]),    # 5x5, asymmetric pads, batch 2
    (1, 48, 16, 41, 39, (3, 3), 2, [0, 1, 1, 0]),    # stride 2, odd sizes
    (1, 20, 128, 41, 39, (3, 3), 2, [1, 0, 1, 2]),   # 128 outputs: four passes, odd sizes
    (1, 3, 96, 64, 70, (3, 3), 2, [1, 1, 1, 1]),     # a 3x3 stem of 96 channels
    (1, 48, 64, 30, 30, (3, 3), 2, [1, 1, 1, 1]),    # 48 input channels: im2col + GEMM
    # Strides 1 with rows that fill their 16-lane vectors to 7/8 or more: the pixels in the
    # lanes from direct_pad's copy (tiles of three vectors across rows, 8 channels a time).
    (1, 32, 32, 28, 28, (3, 3), 1, [1, 1, 1, 1]),    # 28 = 16 + 12: a masked vector a row
    (1, 3, 32, 50, 62, (3, 3), 1, [1, 1, 1, 1]),     # 62-pixel rows, odd row count
    (1, 3, 64, 21, 32, (7, 7), 1, [3, 3, 3, 3]),     # 7x7, 64 channels in 8-channel groups
    (2, 5, 16, 17, 48, (5, 5), 1, [2, 1, 2, 3]),     # asymmetric pads, batch 2
    (1, 2, 32, 9, 30, (2, 4), 1, [0, 2, 1, 1]),      # even kernel, odd pads
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:5])) + f"k{c[5][0]}{c[5][1]}s{c[6]}")
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_direct_against_onnxruntime(case, bias):
    N, C, M, H, W, k, s, pads = case
    w = randn((M, C) + k, 1, scale=1.0 / np.sqrt(C * k[0] * k[1]))
    b = randn((M,), 2) if bias else None
    x = randn((N, C, H, W), 3)
    check(conv_net(x.shape, w, b, [s, s], pads), {"x": x})


POSTS = [("Relu", {}), ("Clip", {}), ("LeakyRelu", {"alpha": 0.1})]


@pytest.mark.parametrize("post", POSTS, ids=[p[0] for p in POSTS])
@pytest.mark.parametrize("residual", [False, True], ids=["plain", "residual"])
@pytest.mark.parametrize("shape", [(1, 16, 16, 16, 16), (2, 16, 32, 12, 12)], ids=["16", "32"])
def test_fused_epilogues(post, residual, shape):
    N, C, M, H, W = shape
    w = randn((M, C, 3, 3), 4, scale=0.2)
    b = randn((M,), 5)
    x = randn((N, C, H, W), 6)
    feeds = {"x": x}
    if residual:
        feeds["r"] = randn((N, M, H, W), 7)
    check(conv_net(x.shape, w, b, [1, 1], [1, 1, 1, 1], post=post, residual=residual), feeds)


def test_residual_broadcast():
    """An Add whose other input broadcasts ([M, 1, 1]) is not Y's shape."""
    w = randn((16, 8, 3, 3), 8, scale=0.3)
    x = randn((1, 8, 10, 10), 9)
    check(conv_net(x.shape, w, None, [1, 1], [1, 1, 1, 1], post=("Relu", {}), residual=True),
          {"x": x, "r": randn((16, 1, 1), 10)})


@pytest.mark.parametrize("threads", [2, 3])
def test_strides_2_large_in_bands(threads):
    """A 16 -> 32 3x3 stride-2 layer at 120 x 96 (direct at any size with strides 2): its
    output rows in bands over the threads, with SiLU after it."""
    w = randn((32, 16, 3, 3), 21, scale=0.1)
    x = randn((1, 16, 120, 96), 22)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(randn((32,), 23), "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1],
                              kernel_shape=[3, 3]),
             helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["c", "s"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    check(model, {"x": x}, threads=threads)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(1, 32, 32, 32, 32), (4, 16, 16, 16, 16), (1, 3, 16, 8, 8)],
                         ids=["large", "batch", "tiny"])
def test_threads(threads, shape):
    N, C, M, H, W = shape
    w = randn((M, C, 3, 3), 11, scale=0.2)
    b = randn((M,), 12)
    x = randn((N, C, H, W), 13)
    a = check(conv_net(x.shape, w, b, [1, 1], [1, 1, 1, 1], post=("Relu", {})), {"x": x},
              threads=threads)
    assert (a >= 0).all()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("width", [90, 160], ids=["w45", "w80"])
@pytest.mark.parametrize("post", POSTS, ids=[p[0] for p in POSTS])
def test_stem_passes_in_bands_with_residual(threads, width, post):
    """A 64-channel 7x7 stem, its rows in bands over the threads, each band's passes writing
    its own rows of every channel, then the residual Add and the activation fused (Relu /
    Clip in registers, LeakyRelu after). 80-pixel rows run the kernel with the pixels in the
    lanes, 45-pixel rows direct_run."""
    w = randn((64, 3, 7, 7), 14, scale=0.1)
    b = randn((64,), 15)
    x = randn((1, 3, 96, width), 16)
    feeds = {"x": x, "r": randn((1, 64, 48, width // 2), 17)}
    check(conv_net(x.shape, w, b, [2, 2], [3, 3, 3, 3], post=post, residual=True), feeds,
          threads=threads)
    check(conv_net(x.shape, w, b, [2, 2], [3, 3, 3, 3], post=post), {"x": x}, threads=threads)


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("post", POSTS, ids=[p[0] for p in POSTS])
def test_strides_1_lanes_in_bands(threads, post):
    """Strides 1, 32-pixel rows (the pixels in the lanes) split into bands of rows over the
    threads, each band padding its own rows, with the residual Add and the activation."""
    w = randn((32, 3, 3, 3), 18, scale=0.3)
    b = randn((32,), 19)
    x = randn((1, 3, 41, 32), 20)
    feeds = {"x": x, "r": randn((1, 32, 41, 32), 21)}
    check(conv_net(x.shape, w, b, [1, 1], [1, 1, 1, 1], post=post, residual=True), feeds,
          threads=threads)


@pytest.mark.parametrize("post", [("Relu", {}), ("Clip", {})], ids=["Relu", "Clip"])
def test_nan_propagates(post):
    """A NaN input reaches every output that reads it, through the fused Relu / Clip too."""
    w = np.ones((16, 4, 3, 3), np.float32)
    x = np.zeros((1, 4, 8, 8), np.float32)
    x[0, 2, 4, 4] = np.nan
    y = run_lite(conv_net(x.shape, w, None, [1, 1], [1, 1, 1, 1], post=post), {"x": x})[0]
    nan = np.isnan(y[0])
    assert nan[:, 3:6, 3:6].all()
    assert nan.sum() == 16 * 9


@pytest.mark.parametrize("case", [
    (1, 16, 16, 34, 34, (3, 3), 1, [1, 1, 1, 1]),    # 34x34 output: past the kernel's range
    (1, 40, 16, 12, 12, (3, 3), 1, [1, 1, 1, 1]),    # 40 input channels
    (1, 16, 24, 12, 12, (3, 3), 1, [1, 1, 1, 1]),    # 24 output channels
    (1, 16, 16, 12, 12, (9, 9), 1, [4, 4, 4, 4]),    # 9x9 kernel
    (1, 16, 16, 18, 18, (3, 3), 3, [1, 1, 1, 1]),    # stride 3
], ids=["out34", "c40", "m24", "k9", "s3"])
def test_outside_range_still_correct(case):
    N, C, M, H, W, k, s, pads = case
    w = randn((M, C) + k, 14, scale=0.2)
    x = randn((N, C, H, W), 15)
    check(conv_net(x.shape, w, randn((M,), 16), [s, s], pads), {"x": x})


def test_dilated_and_uneven_strides_fall_back():
    w = randn((16, 8, 3, 3), 17, scale=0.2)
    x = randn((1, 8, 16, 16), 18)
    model = conv_net(x.shape, w, None, [1, 2], [1, 1, 1, 1])
    check(model, {"x": x})
    model = conv_net(x.shape, w, None, [1, 1], [2, 2, 2, 2])
    model.graph.node[0].attribute.append(helper.make_attribute("dilations", [2, 2]))
    check(model, {"x": x})


@pytest.mark.parametrize("shape", [(1, 8, 16, 16, 16), (2, 16, 32, 9, 9)], ids=["16", "32"])
def test_float16(shape):
    """float16 Conv computes in float through the same kernel: against onnxruntime's float
    result on the same (float16) values, within float16 rounding of the output."""
    N, C, M, H, W = shape
    w = randn((M, C, 3, 3), 19, scale=0.2).astype(np.float16)
    b = randn((M,), 20).astype(np.float16)
    x = randn((N, C, H, W), 21).astype(np.float16)
    ref = run_ort(conv_net(x.shape, w.astype(np.float32), b.astype(np.float32), [1, 1],
                           [1, 1, 1, 1], post=("Relu", {})), {"x": x.astype(np.float32)})[0]
    model = conv_net(x.shape, w, b, [1, 1], [1, 1, 1, 1], post=("Relu", {}))
    model.graph.input[0].type.tensor_type.elem_type = TensorProto.FLOAT16
    model.graph.output[0].type.tensor_type.elem_type = TensorProto.FLOAT16
    got = run_lite(model, {"x": x})[0]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), ref, rtol=2e-3, atol=2e-3)


_BANDS_CHILD = r"""
import sys
import numpy as np
import ortlite
models = np.load(sys.argv[1], allow_pickle=True)
outs = {}
for key in models.files:
    model, feeds = models[key]
    for threads in (2, 3):
        so = ortlite.SessionOptions()
        so.intra_op_num_threads = threads
        outs[f"{key}_t{threads}"] = ortlite.InferenceSession(model, so).run(None, feeds)[0]
np.savez(sys.argv[2], **outs)
"""


def test_one_image_in_bands_over_threads(tmp_path):
    """One image over 2 or 3 threads: its output rows are split in a band a thread (from a
    size of layer that ORTLITE_CONV_BAND_MIN_WORK=0 lowers to every layer, in a child
    process), each band padding its own input rows. Each band computes its pixels exactly as
    one thread does: the result equals the 1-thread one bit for bit, and onnxruntime's within
    rounding, for every single-image case above (top, bottom and side padding, strides 1 and
    2, images up to 224x224) and the fused epilogues (residual Add, LeakyRelu after the
    store)."""
    import subprocess
    import sys

    from helpers import subprocess_env

    cases = {}
    for i, (N, C, M, H, W, k, s, pads) in enumerate(c for c in CASES if c[0] == 1):
        w = randn((M, C) + k, 30 + i, scale=1.0 / np.sqrt(C * k[0] * k[1]))
        x = randn((N, C, H, W), 60 + i)
        cases[f"c{i}"] = (conv_net(x.shape, w, randn((M,), 90 + i), [s, s], pads,
                                   post=("Relu", {})), {"x": x})
    for post in POSTS:
        w = randn((16, 16, 3, 3), 4, scale=0.2)
        x = randn((1, 16, 16, 16), 6)
        cases[f"res_{post[0]}"] = (conv_net(x.shape, w, randn((16,), 5), [1, 1], [1, 1, 1, 1],
                                            post=post, residual=True),
                                   {"x": x, "r": randn((1, 16, 16, 16), 7)})
    packed = {}
    for key, (model, feeds) in cases.items():
        pair = np.empty(2, dtype=object)
        pair[0], pair[1] = model.SerializeToString(), feeds
        packed[key] = pair
    src, dst = tmp_path / "cases.npz", tmp_path / "outs.npz"
    np.savez(src, **packed)
    subprocess.run([sys.executable, "-c", _BANDS_CHILD, str(src), str(dst)], check=True,
                   env=subprocess_env(ORTLITE_CONV_BAND_MIN_WORK="0"), timeout=300)
    outs = np.load(dst)
    # The bands are the direct kernel's (AVX-512F); elsewhere the threads split the product
    # another way, and the results are only compared with onnxruntime.
    banded = _cpu_has("avx512f")
    for key, (model, feeds) in cases.items():
        one = run_lite(model, feeds, threads=1)[0]
        for threads in (2, 3):
            if banded:
                np.testing.assert_array_equal(outs[f"{key}_t{threads}"], one, err_msg=key)
            else:
                np.testing.assert_allclose(outs[f"{key}_t{threads}"], one, rtol=1e-5,
                                           atol=1e-5, err_msg=key)
        check(model, feeds)


def _cpu_has(flag):
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return flag in line.split()
    except OSError:
        pass
    return False
