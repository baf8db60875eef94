"""TopK, CumProd, Col2Im, MaxUnpool, RoiAlign, MaxRoiPool, Upsample, DeformConv, Swish.
Compared with onnxruntime where it has a CPU kernel for the opset and element type
(opsets <= 23), else with onnx.reference.ReferenceEvaluator or a numpy oracle written
here; plus the error paths."""

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import ortlite
from helpers import NP_TO_ONNX, assert_same, run_ort, run_ortlite

F16, F32, F64 = np.float16, np.float32, np.float64


def model(op, feeds, outputs, attrs=None, opset=17, out_dtypes=None, names=None):
    """One node; feeds are graph inputs (name -> array). names: the node's input names
    ("" for an omitted input), default the feed names."""
    node = helper.make_node(op, names if names is not None else list(feeds), outputs,
                            **(attrs or {}))
    first = next(iter(feeds.values()))
    out_dtypes = out_dtypes or [first.dtype] * len(outputs)
    ins = [helper.make_tensor_value_info(n, NP_TO_ONNX[a.dtype], list(a.shape))
           for n, a in feeds.items()]
    outs = [helper.make_tensor_value_info(o, NP_TO_ONNX[np.dtype(d)], None)
            for o, d in zip(outputs, out_dtypes)]
    g = helper.make_graph([node], "g", ins, outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10 if opset <= 23 else m.ir_version
    return m


def vs_ort(m, feeds, **tol):
    expected = run_ort(m, feeds)
    actual = run_ortlite(m, feeds)
    assert_same(actual, expected, **tol)
    return actual


def vs_reference(m, feeds, **tol):
    expected = ReferenceEvaluator(m).run(None, feeds)
    actual = run_ortlite(m, feeds)
    assert_same(actual, [np.asarray(e) for e in expected], **tol)
    return actual


def rng(seed=0):
    return np.random.default_rng(seed)


# ---------------------------------------------------------------------------------------
# Col2Im


@pytest.mark.parametrize("attrs", [
    {},
    dict(strides=[2, 1], pads=[1, 0, 0, 1], dilations=[1, 2]),
    dict(strides=[1, 2], pads=[0, 1, 1, 1]),
])
def test_col2im_matches_onnxruntime(attrs):
    image, block = [5, 6], [2, 3]
    s = attrs.get("strides", [1, 1])
    p = attrs.get("pads", [0, 0, 0, 0])
    d = attrs.get("dilations", [1, 1])
    L = 1
    for i in range(2):
        L *= (image[i] + p[i] + p[i + 2] - (d[i] * (block[i] - 1) + 1)) // s[i] + 1
    x = rng(8).standard_normal((2, 3 * 6, L)).astype(F32)
    feeds = {"x": x, "image": np.array(image, np.int64), "block": np.array(block, np.int64)}
    vs_ort(model("Col2Im", feeds, ["y"], attrs, opset=18), feeds, rtol=1e-5, atol=1e-5)


def test_col2im_3d_and_integer_types_match_reference():
    x = rng(9).integers(-4, 5, size=(1, 2 * 8, 12)).astype(np.int32)
    feeds = {"x": x, "image": np.array([3, 4, 3], np.int64),
             "block": np.array([2, 2, 2], np.int64)}
    vs_reference(model("Col2Im", feeds, ["y"], opset=18), feeds)
    feeds["x"] = x.astype(F64)
    vs_reference(model("Col2Im", feeds, ["y"], opset=18), feeds)


def test_col2im_errors():
    feeds = {"x": np.zeros((1, 4, 5), F32), "image": np.array([3, 3], np.int64),
             "block": np.array([2, 2], np.int64)}
    with pytest.raises(ortlite.InvalidArgument, match=r"\[N, C \* 4, 4\]"):
        run_ortlite(model("Col2Im", feeds, ["y"], opset=18), feeds)
    feeds["block"] = np.array([4, 2], np.int64)
    with pytest.raises(ortlite.InvalidArgument, match="does not fit"):
        run_ortlite(model("Col2Im", feeds, ["y"], opset=18), feeds)
    feeds["block"] = np.array([2], np.int64)
    with pytest.raises(ortlite.InvalidArgument, match="same number"):
        run_ortlite(model("Col2Im", feeds, ["y"], opset=18), feeds)
    feeds["block"] = np.array([2, 0], np.int64)
    with pytest.raises(ortlite.InvalidArgument, match=r"\[1, 2\^31\]"):
        run_ortlite(model("Col2Im", feeds, ["y"], opset=18), feeds)
    feeds["block"] = np.array([2, 2], np.int64)
    with pytest.raises(ortlite.InvalidArgument, match="strides"):
        run_ortlite(model("Col2Im", feeds, ["y"], dict(strides=[1, 1, 1]), opset=18), feeds)


# ---------------------------------------------------------------------------------------
# MaxUnpool


def maxpool_with_indices(x, kernel, strides, opset=12):
    m = model("MaxPool", {"x": x}, ["y", "i"], dict(kernel_shape=kernel, strides=strides),
              opset=opset, out_dtypes=[x.dtype, np.int64])
    return run_ort(m, {"x": x})


@pytest.mark.parametrize("opset", [9, 11, 22])
def test_maxunpool_inverts_maxpool_like_onnxruntime(opset):
    x = rng(10).standard_normal((2, 3, 6, 8)).astype(F32)
    y, i = maxpool_with_indices(x, [2, 2], [2, 2])
    m = model("MaxUnpool", {"y": y, "i": i}, ["z"], dict(kernel_shape=[2, 2], strides=[2, 2]),
              opset=opset)
    if opset <= 11:
        vs_ort(m, {"y": y, "i": i})
    else:
        vs_reference(m, {"y": y, "i": i})


def test_maxunpool_output_shape_pads_at_the_end_like_the_reference():
    x = rng(11).standard_normal((1, 2, 4, 4)).astype(F32)
    y, i = maxpool_with_indices(x, [2, 2], [2, 2])
    shape = np.array([1, 2, 5, 6], np.int64)
    m = model("MaxUnpool", {"y": y, "i": i, "s": shape}, ["z"],
              dict(kernel_shape=[2, 2], strides=[2, 2]), opset=11)
    (z,) = vs_reference(m, {"y": y, "i": i, "s": shape})
    assert z.shape == (1, 2, 5, 6)


def test_maxunpool_double_and_1d_match_reference():
    y = rng(12).standard_normal((1, 2, 3)).astype(F64)
    i = np.array([[[0, 3, 5], [6, 8, 11]]], np.int64)
    m = model("MaxUnpool", {"y": y, "i": i}, ["z"], dict(kernel_shape=[2], strides=[2]),
              opset=11)
    vs_reference(m, {"y": y, "i": i})


def test_maxunpool_errors():
    y = np.ones((1, 1, 2, 2), F32)
    attrs = dict(kernel_shape=[2, 2], strides=[2, 2])
    i = np.array([[[[0, 1], [2, 16]]]], np.int64)
    with pytest.raises(ortlite.InvalidArgument, match="index 16 .* out of range"):
        run_ortlite(model("MaxUnpool", {"y": y, "i": i}, ["z"], attrs, opset=11), {"y": y, "i": i})
    i = np.zeros((1, 1, 2, 2), np.int64)
    s = np.array([1, 1, 3, 4], np.int64)
    with pytest.raises(ortlite.InvalidArgument, match="output_shape"):
        run_ortlite(model("MaxUnpool", {"y": y, "i": i, "s": s}, ["z"], attrs, opset=11),
                    {"y": y, "i": i, "s": s})
    i32 = np.zeros((1, 1, 2, 2), np.int32)
    with pytest.raises(ortlite.InvalidArgument, match="'I' must be int64"):
        run_ortlite(model("MaxUnpool", {"y": y, "i": i32}, ["z"], attrs, opset=11),
                    {"y": y, "i": i32})
    with pytest.raises(ortlite.InvalidArgument, match="rank 3"):
        run_ortlite(model("MaxUnpool", {"y": y, "i": i}, ["z"], dict(kernel_shape=[2]),
                          opset=11), {"y": y, "i": i})
    m = model("MaxUnpool", {"y": y, "i": i}, ["z"], dict(strides=[2, 2]), opset=11)
    with pytest.raises(ortlite.InvalidGraph, match="kernel_shape"):
        run_ortlite(m, {"y": y, "i": i})


# ---------------------------------------------------------------------------------------
# RoiAlign (onnxruntime runs opsets 10 and 16; opset 22 against the reference)


def roi_feeds(dtype=F32, seed=13):
    r = rng(seed)
    x = r.standard_normal((2, 3, 10, 12)).astype(dtype)
    rois = np.array([[0, 0, 9, 9], [1.5, 2.2, 7.9, 8.1], [-2, -1, 4, 3], [3, 3, 3.2, 3.1],
                     [6, 5, 20, 14]], dtype)
    bi = np.array([0, 1, 1, 0, 1], np.int64)
    return {"x": x, "rois": rois, "bi": bi}


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
def test_roialign_matches_onnxruntime(mode, ctm, sampling_ratio):
    feeds = roi_feeds()
    attrs = dict(mode=mode, coordinate_transformation_mode=ctm, output_height=3,
                 output_width=4, sampling_ratio=sampling_ratio, spatial_scale=0.9)
    vs_ort(model("RoiAlign", feeds, ["y"], attrs, opset=16), feeds, rtol=1e-5, atol=1e-5)


def test_roialign_opset10_double_and_opset22_half():
    feeds = roi_feeds(F64)
    attrs = dict(output_height=2, output_width=2)
    vs_ort(model("RoiAlign", feeds, ["y"], attrs, opset=10), feeds, rtol=1e-10, atol=1e-10)
    feeds = roi_feeds(F16)
    vs_reference(model("RoiAlign", feeds, ["y"], dict(attrs, mode="max"), opset=22), feeds,
                 rtol=1e-2, atol=1e-2)


def test_roialign_errors():
    feeds = roi_feeds()
    feeds["bi"] = np.array([0, 1, 2, 0, 1], np.int64)
    with pytest.raises(ortlite.InvalidArgument, match="batch_indices"):
        run_ortlite(model("RoiAlign", feeds, ["y"], opset=16), feeds)
    feeds = roi_feeds()
    feeds["rois"] = feeds["rois"][:, :3].copy()
    with pytest.raises(ortlite.InvalidArgument, match=r"rois' must be \[num_rois, 4\]"):
        run_ortlite(model("RoiAlign", feeds, ["y"], opset=16), feeds)
    feeds = roi_feeds()
    feeds["rois"][1, 2] = np.inf
    with pytest.raises(ortlite.InvalidArgument, match="roi 1"):
        run_ortlite(model("RoiAlign", feeds, ["y"], opset=16), feeds)
    feeds = roi_feeds()
    with pytest.raises(ortlite.InvalidArgument, match="mode"):
        run_ortlite(model("RoiAlign", feeds, ["y"], dict(mode="min"), opset=16), feeds)
    with pytest.raises(ortlite.InvalidArgument, match="coordinate_transformation_mode"):
        run_ortlite(model("RoiAlign", feeds, ["y"],
                          dict(coordinate_transformation_mode="align_corners"), opset=16), feeds)


# ---------------------------------------------------------------------------------------
# MaxRoiPool


def max_roi_pool_oracle(x, rois, pooled, scale):
    """Max over each bin (onnxruntime's bin boundaries), 0 for an empty bin."""
    ph_n, pw_n = pooled
    _, c, h, w = x.shape
    out = np.zeros((len(rois), c, ph_n, pw_n), x.dtype)
    for n, r in enumerate(rois):
        b = int(r[0])
        sw, sh, ew, eh = (int(np.round(v * np.float32(scale))) for v in r[1:])
        rh, rw = max(eh - sh + 1, 1), max(ew - sw + 1, 1)
        bh, bw = np.float32(rh) / np.float32(ph_n), np.float32(rw) / np.float32(pw_n)
        for ph in range(ph_n):
            hs = min(max(int(np.floor(ph * bh)) + sh, 0), h)
            he = min(max(int(np.ceil((ph + 1) * bh)) + sh, 0), h)
            for pw in range(pw_n):
                ws = min(max(int(np.floor(pw * bw)) + sw, 0), w)
                we = min(max(int(np.ceil((pw + 1) * bw)) + sw, 0), w)
                if he > hs and we > ws:
                    out[n, :, ph, pw] = x[b, :, hs:he, ws:we].max(axis=(1, 2))
    return out


def test_maxroipool_matches_onnxruntime_on_non_negative_input():
    x = rng(14).uniform(0, 1, (2, 3, 9, 11)).astype(F32)
    rois = np.array([[0, 0, 0, 8, 8], [1, 2.4, 1.6, 9.5, 6.5], [1, -3, -2, 2, 1],
                     [0, 5, 5, 5, 5], [1, 10, 8, 30, 20]], F32)
    feeds = {"x": x, "rois": rois}
    m = model("MaxRoiPool", feeds, ["y"], dict(pooled_shape=[3, 2], spatial_scale=0.8), opset=1)
    (y,) = vs_ort(m, feeds)
    np.testing.assert_array_equal(y, max_roi_pool_oracle(x, rois, (3, 2), 0.8))


def test_maxroipool_negative_values_and_double():
    # onnxruntime starts its max from the smallest positive float, so it cannot be the
    # oracle for negative inputs.
    x = -rng(15).uniform(1, 2, (1, 2, 6, 6)).astype(F64)
    rois = np.array([[0, 0, 0, 5, 5], [0, 1, 2, 3, 4]], F64)
    feeds = {"x": x, "rois": rois}
    (y,) = run_ortlite(model("MaxRoiPool", feeds, ["y"], dict(pooled_shape=[2, 2]), opset=22),
                       feeds)
    np.testing.assert_array_equal(y, max_roi_pool_oracle(x, rois, (2, 2), 1.0))


def test_maxroipool_errors():
    x = np.ones((1, 1, 4, 4), F32)
    feeds = {"x": x, "rois": np.array([[1, 0, 0, 2, 2]], F32)}
    with pytest.raises(ortlite.InvalidArgument, match="batch index 1"):
        run_ortlite(model("MaxRoiPool", feeds, ["y"], dict(pooled_shape=[1, 1])), feeds)
    feeds = {"x": x, "rois": np.array([[0, 0, 2, 2]], F32)}
    with pytest.raises(ortlite.InvalidArgument, match=r"\[num_rois, 5\]"):
        run_ortlite(model("MaxRoiPool", feeds, ["y"], dict(pooled_shape=[1, 1])), feeds)
    feeds = {"x": x, "rois": np.array([[0, 0, 0, 2, 2]], F32)}
    with pytest.raises(ortlite.InvalidArgument, match="pooled_shape"):
        run_ortlite(model("MaxRoiPool", feeds, ["y"], dict(pooled_shape=[0, 1])), feeds)
    with pytest.raises(ortlite.InvalidGraph, match="pooled_shape"):
        run_ortlite(model("MaxRoiPool", feeds, ["y"]), feeds)
    feeds = {"x": x, "rois": np.array([[0, np.nan, 0, 2, 2]], F32)}
    with pytest.raises(ortlite.InvalidArgument, match="not finite"):
        run_ortlite(model("MaxRoiPool", feeds, ["y"], dict(pooled_shape=[1, 1])), feeds)


# ---------------------------------------------------------------------------------------
# Upsample


@pytest.mark.parametrize("dtype", [F32, F16, np.uint8, np.int8, np.int32])
@pytest.mark.parametrize("mode,scales", [
    ("nearest", [1, 1, 2, 3]), ("nearest", [1, 2, 1.5, 2.7]), ("nearest", [2, 1, 1, 1]),
    ("linear", [1, 1, 2, 2.5]), ("linear", [1, 1, 1.7, 3]),
])
def test_upsample9_matches_onnxruntime(dtype, mode, scales):
    x = (rng(16).uniform(0, 50, (2, 3, 4, 5))).astype(dtype)
    feeds = {"x": x, "s": np.array(scales, F32)}
    tol = dict(rtol=1e-2, atol=1e-2) if dtype == F16 else dict(rtol=1e-5, atol=1e-5)
    vs_ort(model("Upsample", feeds, ["y"], dict(mode=mode), opset=9), feeds, **tol)


def test_upsample_linear_2d_and_3d_match_onnxruntime():
    x = rng(17).standard_normal((3, 5)).astype(F32)
    feeds = {"x": x, "s": np.array([2, 1.5], F32)}
    vs_ort(model("Upsample", feeds, ["y"], dict(mode="linear"), opset=9), feeds)
    x = rng(18).standard_normal((2, 3, 4)).astype(F32)
    feeds = {"x": x, "s": np.array([1, 2, 2], F32)}
    vs_ort(model("Upsample", feeds, ["y"], dict(mode="linear"), opset=9), feeds)


def test_upsample7_scales_attribute_and_string_nearest():
    x = rng(19).standard_normal((1, 2, 3, 3)).astype(F32)
    for mode in ("nearest", "linear"):
        vs_ort(model("Upsample", {"x": x}, ["y"], dict(mode=mode, scales=[1.0, 1.0, 2.0, 1.5]),
                     opset=7), {"x": x})
    s = np.array([["a", "b"], ["c", "d"]], dtype=object)
    feeds = {"x": s, "s": np.array([2, 3], F32)}
    (y,) = run_ortlite(model("Upsample", feeds, ["y"], opset=9), feeds)
    np.testing.assert_array_equal(y, np.repeat(np.repeat(s, 2, axis=0), 3, axis=1))


def test_upsample_errors():
    x = np.ones((1, 1, 2, 2), F32)
    for scales, pat in (([1, 1, 0.5, 2], ">= 1"), ([1, 2], "rank 4"),
                        ([1, 1, np.nan, 1], ">= 1"), ([1, 1, 1e30, 1], "too large")):
        feeds = {"x": x, "s": np.array(scales, F32)}
        with pytest.raises(ortlite.InvalidArgument, match=pat):
            run_ortlite(model("Upsample", feeds, ["y"], opset=9), feeds)
    feeds = {"x": x, "s": np.array([1, 1, 2, 2], F32)}
    with pytest.raises(ortlite.InvalidArgument, match="mode"):
        run_ortlite(model("Upsample", feeds, ["y"], dict(mode="cubic"), opset=9), feeds)
    feeds = {"x": x, "s": np.array([1, 1, 2, 2], F64)}
    with pytest.raises(ortlite.InvalidArgument, match="float"):
        run_ortlite(model("Upsample", feeds, ["y"], opset=9), feeds)
    with pytest.raises(ortlite.InvalidGraph, match="scales"):
        run_ortlite(model("Upsample", {"x": x}, ["y"], opset=7), {"x": x})


# ---------------------------------------------------------------------------------------
# DeformConv (onnxruntime has no CPU kernel: the reference implements 2-D)


def deform_feeds(n=2, c=4, oc=6, hw=(6, 7), k=(3, 2), group=2, og=2, strides=(1, 1),
                 pads=(1, 0, 1, 1), dil=(1, 2), bias=True, mask=True, dtype=F32, seed=20):
    r = rng(seed)
    oh = (hw[0] + pads[0] + pads[2] - (dil[0] * (k[0] - 1) + 1)) // strides[0] + 1
    ow = (hw[1] + pads[1] + pads[3] - (dil[1] * (k[1] - 1) + 1)) // strides[1] + 1
    feeds = {"x": r.standard_normal((n, c, *hw)).astype(dtype),
             "w": r.standard_normal((oc, c // group, *k)).astype(dtype),
             "offset": (1.5 * r.standard_normal((n, og * k[0] * k[1] * 2, oh, ow))).astype(dtype)}
    if bias:
        feeds["b"] = r.standard_normal(oc).astype(dtype)
    if mask:
        feeds["mask"] = r.uniform(0, 1, (n, og * k[0] * k[1], oh, ow)).astype(dtype)
    attrs = dict(group=group, offset_group=og, strides=list(strides), pads=list(pads),
                 dilations=list(dil))
    return feeds, attrs


@pytest.mark.parametrize("opset", [19, 22])
def test_deformconv_matches_reference(opset):
    # Small: the reference runs one GridSample per (image, channel pair, output position).
    feeds, attrs = deform_feeds(n=1, hw=(4, 5), oc=4)
    vs_reference(model("DeformConv", feeds, ["y"], attrs, opset=opset), feeds, rtol=1e-4,
                 atol=1e-4)


def deform_conv_oracle(x, w, off, b, mask, group, og, strides, pads, dil):
    """2-D deformable convolution in float64, bilinear samples with zeros outside."""
    n_, c_, h, wd = x.shape
    oc, icg, kh, kw = w.shape
    oh, ow = off.shape[2:]
    off = off.reshape(n_, og, kh * kw, 2, oh, ow)
    mask = np.ones((n_, og, kh * kw, oh, ow)) if mask is None else mask.reshape(
        n_, og, kh * kw, oh, ow)

    def sample(img, py, px):
        v = 0.0
        y0, x0 = int(np.floor(py)), int(np.floor(px))
        for yy in (y0, y0 + 1):
            for xx in (x0, x0 + 1):
                if 0 <= yy < h and 0 <= xx < wd:
                    v += (1 - abs(py - yy)) * (1 - abs(px - xx)) * img[yy, xx]
        return v

    out = np.zeros((n_, oc, oh, ow))
    ocg = oc // group
    for n in range(n_):
        for c in range(c_):
            g, o = c // icg, c // (c_ // og)
            for i in range(oh):
                for j in range(ow):
                    for a in range(kh):
                        for e in range(kw):
                            k = a * kw + e
                            py = i * strides[0] - pads[0] + a * dil[0] + off[n, o, k, 0, i, j]
                            px = j * strides[1] - pads[1] + e * dil[1] + off[n, o, k, 1, i, j]
                            v = sample(x[n, c], py, px) * mask[n, o, k, i, j]
                            out[n, g * ocg:(g + 1) * ocg, i, j] += w[g * ocg:(g + 1) * ocg,
                                                                     c % icg, a, e] * v
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def test_deformconv_double_matches_numpy_oracle():
    # The reference implementation samples in reduced precision (about 1e-6 off for
    # double); this oracle is float64 throughout.
    for kw in (dict(bias=False, group=1, og=1, strides=(2, 2), pads=(0, 0, 0, 0), dil=(1, 1)),
               dict(mask=False)):
        feeds, attrs = deform_feeds(dtype=F64, **kw)
        names = ["x", "w", "offset", "b" if "b" in feeds else "", "mask" if "mask" in feeds else ""]
        while names[-1] == "":
            names.pop()
        (y,) = run_ortlite(model("DeformConv", feeds, ["y"], attrs, opset=19, names=names), feeds)
        expected = deform_conv_oracle(feeds["x"], feeds["w"], feeds["offset"], feeds.get("b"),
                                      feeds.get("mask"), attrs["group"], attrs["offset_group"],
                                      attrs["strides"], attrs["pads"], attrs["dilations"])
        np.testing.assert_allclose(y, expected, rtol=1e-12, atol=1e-12)


def test_deformconv_1d_equals_2d_with_a_unit_axis():
    feeds, attrs = deform_feeds(hw=(1, 9), k=(1, 3), pads=(0, 1, 0, 1), dil=(1, 1))
    feeds["offset"][:, 0::2] = 0  # no offset along the unit axis
    (y2,) = run_ortlite(model("DeformConv", feeds, ["y"], attrs, opset=19), feeds)
    f1 = {"x": feeds["x"][:, :, 0], "w": feeds["w"][:, :, 0],
          "offset": feeds["offset"][:, 1::2, 0].copy(), "b": feeds["b"],
          "mask": feeds["mask"][:, :, 0]}
    a1 = dict(group=2, offset_group=2, strides=[1], pads=[1, 1], dilations=[1])
    (y1,) = run_ortlite(model("DeformConv", f1, ["y"], a1, opset=19), f1)
    np.testing.assert_allclose(y1, y2[:, :, 0], rtol=1e-5, atol=1e-5)


def test_deformconv_errors():
    feeds, attrs = deform_feeds()
    feeds["offset"] = feeds["offset"][:, :-2].copy()
    with pytest.raises(ortlite.InvalidArgument, match="input 'offset'"):
        run_ortlite(model("DeformConv", feeds, ["y"], attrs, opset=19), feeds)
    feeds, attrs = deform_feeds()
    feeds["mask"] = feeds["mask"][:, :, :1].copy()
    with pytest.raises(ortlite.InvalidArgument, match="input 'mask'"):
        run_ortlite(model("DeformConv", feeds, ["y"], attrs, opset=19), feeds)
    feeds, attrs = deform_feeds()
    with pytest.raises(ortlite.InvalidArgument, match="channels"):
        run_ortlite(model("DeformConv", feeds, ["y"], dict(attrs, group=3), opset=19), feeds)
    feeds, attrs = deform_feeds()
    feeds["b"] = feeds["b"].astype(F64)
    with pytest.raises(ortlite.InvalidArgument, match="element type"):
        run_ortlite(model("DeformConv", feeds, ["y"], attrs, opset=19), feeds)
