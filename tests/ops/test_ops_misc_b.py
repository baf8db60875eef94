"""Random generators (RandomNormal, RandomUniform, *Like, Bernoulli, Multinomial), signal
ops (DFT, STFT, MelWeightMatrix), string ops (StringConcat, StringSplit, StringNormalizer,
RegexFullMatch), TensorScatter and BitCast.

Seeded random ops reproduce onnx.reference (numpy's RandomState stream) exactly; unseeded
ones are checked statistically. The rest is compared with onnxruntime where it runs the
case (opsets <= 23), else with onnx.reference.ReferenceEvaluator or numpy; plus the error
paths."""

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import ortlite
from helpers import NP_TO_ONNX, assert_same, run_ort, run_ortlite

F16, F32, F64 = np.float16, np.float32, np.float64
STR = object


def model(op, feeds, outputs, attrs=None, opset=17, out_dtypes=None, names=None,
          out_elems=None):
    """One node; feeds are graph inputs (name -> array). names: the node's input names
    ("" for an omitted input), default the feed names. out_elems: ONNX element types of
    the outputs (instead of out_dtypes)."""
    node = helper.make_node(op, names if names is not None else list(feeds), outputs,
                            **(attrs or {}))
    def elem(dtype):
        dtype = np.dtype(dtype)
        return NP_TO_ONNX[dtype] if dtype in NP_TO_ONNX else helper.np_dtype_to_tensor_dtype(dtype)

    ins = [helper.make_tensor_value_info(n, elem(np.asarray(a).dtype), list(a.shape))
           for n, a in feeds.items()]
    if out_elems is None:
        first = next(iter(feeds.values())) if feeds else np.zeros(1, F32)
        out_dtypes = out_dtypes or [first.dtype] * len(outputs)
        out_elems = [elem(d) for d in out_dtypes]
    outs = [helper.make_tensor_value_info(o, e, None) for o, e in zip(outputs, out_elems)]
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


def session(m):
    return ortlite.InferenceSession(m.SerializeToString())


def rng(seed=0):
    return np.random.default_rng(seed)


def strings(*values):
    return np.array(values, dtype=object)


# ---------------------------------------------------------------------------------------
# Random generators


@pytest.mark.parametrize("dtype", [TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16])
@pytest.mark.parametrize("op,attrs", [("RandomNormal", dict(mean=1.5, scale=2.5)),
                                      ("RandomUniform", dict(low=-2.0, high=3.0))])
def test_seeded_random_matches_reference(op, attrs, dtype):
    m = model(op, {}, ["y"], dict(shape=[3, 7], seed=3.0, dtype=dtype, **attrs), opset=22,
              out_elems=[dtype])
    vs_reference(m, {}, rtol=0, atol=0)


@pytest.mark.parametrize("op", ["RandomNormalLike", "RandomUniformLike"])
def test_seeded_random_like_matches_reference(op):
    x = np.zeros((4, 9), F32)
    vs_reference(model(op, {"x": x}, ["y"], dict(seed=123456.0), opset=22), {"x": x},
                 rtol=0, atol=0)
    # dtype overrides the input's type, which may then be any type
    xi = np.zeros((2, 5), np.int32)
    m = model(op, {"x": xi}, ["y"], dict(seed=9.0, dtype=TensorProto.DOUBLE), opset=22,
              out_dtypes=[F64])
    vs_reference(m, {"x": xi}, rtol=0, atol=0)


def test_seeded_random_repeats_across_runs_and_sessions():
    m = model("RandomNormal", {}, ["y"], dict(shape=[64], seed=5.0), opset=22)
    a = session(m).run(None, {})[0]
    s = session(m)
    assert np.array_equal(a, s.run(None, {})[0])
    assert np.array_equal(a, s.run(None, {})[0])
    other = model("RandomNormal", {}, ["y"], dict(shape=[64], seed=6.0), opset=22)
    assert not np.array_equal(a, session(other).run(None, {})[0])


@pytest.mark.parametrize("op", ["RandomNormal", "RandomUniform"])
def test_unseeded_random_differs_per_run(op):
    s = session(model(op, {}, ["y"], dict(shape=[32]), opset=22))
    a, b = s.run(None, {})[0], s.run(None, {})[0]
    assert not np.array_equal(a, b)


def test_random_normal_statistics():
    n = 40000
    y = session(model("RandomNormal", {}, ["y"], dict(shape=[n], mean=1.5, scale=2.0),
                      opset=22)).run(None, {})[0]
    assert y.dtype == F32 and y.shape == (n,)
    assert abs(y.mean() - 1.5) < 5 * 2.0 / np.sqrt(n)
    assert abs(y.std() - 2.0) < 0.05
    # about 68% within one standard deviation
    assert abs(np.mean(np.abs(y - 1.5) < 2.0) - 0.6827) < 0.015


def test_random_uniform_like_statistics():
    x = np.zeros((200, 200), F64)
    y = session(model("RandomUniformLike", {"x": x}, ["y"], dict(low=-1.0, high=3.0),
                      opset=22)).run(None, {"x": x})[0]
    assert y.dtype == F64 and y.shape == x.shape
    assert y.min() >= -1.0 and y.max() < 3.0
    assert abs(y.mean() - 1.0) < 5 * np.sqrt(16 / 12 / y.size)
    assert abs(y.var() - 16 / 12) < 0.05
    hist = np.histogram(y, bins=8, range=(-1, 3))[0] / y.size
    assert np.all(np.abs(hist - 1 / 8) < 0.01)


@pytest.mark.parametrize("xdtype,attrs,odtype", [
    (F64, {}, F64),
    (F32, dict(dtype=TensorProto.DOUBLE), F64),
    (F32, dict(dtype=TensorProto.INT32), np.int32),
    (F32, dict(dtype=TensorProto.BOOL), np.bool_),
])
def test_seeded_bernoulli_matches_reference(xdtype, attrs, odtype):
    p = rng(1).random(300).astype(xdtype)
    p[::7] = 0
    p[::11] = 1
    m = model("Bernoulli", {"p": p}, ["y"], dict(seed=7.0, **attrs), opset=22,
              out_dtypes=[odtype])
    y = vs_reference(m, {"p": p})[0]
    assert np.all(y[::7][p[::7] == 0] == 0) and np.all(y[::11] == 1)


def test_bernoulli_statistics_and_unseeded_runs_differ():
    p = np.full((100, 100), 0.3, F32)
    s = session(model("Bernoulli", {"p": p}, ["y"], opset=22))
    a, b = s.run(None, {"p": p})[0], s.run(None, {"p": p})[0]
    assert set(np.unique(a)) <= {0.0, 1.0}
    assert abs(a.mean() - 0.3) < 5 * np.sqrt(0.21 / a.size)
    assert not np.array_equal(a, b)


def test_multinomial_statistics_and_layout():
    probs = np.array([[0.1, 0.2, 0.7, 0.0], [0.25, 0.25, 0.25, 0.25]])
    with np.errstate(divide="ignore"):
        logits = (np.log(probs) + 3.0).astype(F32)  # unnormalized; -inf: never drawn
    n = 20000
    for dtype, np_dtype in [(TensorProto.INT32, np.int32), (TensorProto.INT64, np.int64)]:
        m = model("Multinomial", {"x": logits}, ["y"], dict(sample_size=n, dtype=dtype),
                  opset=15, out_dtypes=[np_dtype])
        y = session(m).run(None, {"x": logits})[0]
        assert y.dtype == np_dtype and y.shape == (2, n)
        for row in range(2):
            freq = np.bincount(y[row], minlength=4) / n
            assert np.all(np.abs(freq - probs[row]) < 5 * np.sqrt(0.25 / n)), freq
        assert not np.any(y[0] == 3)
        # the same layout and type as onnxruntime (its values come from another stream;
        # it has no Multinomial kernel for opset 22)
        ort = run_ort(m, {"x": logits})[0]
        assert ort.dtype == y.dtype and ort.shape == y.shape


def test_multinomial_seeded_is_deterministic():
    x = rng(2).standard_normal((3, 6)).astype(F64)
    m = model("Multinomial", {"x": x}, ["y"], dict(sample_size=50, seed=11.0), opset=22,
              out_dtypes=[np.int32])
    a = session(m).run(None, {"x": x})[0]
    assert np.array_equal(a, session(m).run(None, {"x": x})[0])
    assert a.min() >= 0 and a.max() < 6


def test_random_errors():
    with pytest.raises(ortlite.InvalidGraph, match="shape"):
        session(model("RandomNormal", {}, ["y"], dict(seed=1.0), opset=22))
    with pytest.raises(ortlite.InvalidArgument, match="dtype"):
        session(model("RandomUniform", {}, ["y"], dict(shape=[2], dtype=TensorProto.INT32),
                      opset=22))
    with pytest.raises(ortlite.InvalidArgument, match="negative"):
        session(model("RandomNormal", {}, ["y"], dict(shape=[2, -1]), opset=22))
    xi = np.zeros(3, np.int64)
    s = session(model("RandomUniformLike", {"x": xi}, ["y"], opset=22, out_dtypes=[F32]))
    with pytest.raises(ortlite.InvalidArgument, match="dtype"):
        s.run(None, {"x": xi})
    p = np.array([0.5, 1.5], F32)
    s = session(model("Bernoulli", {"p": p}, ["y"], opset=22))
    with pytest.raises(ortlite.InvalidArgument, match=r"probability"):
        s.run(None, {"p": p})
    with pytest.raises(ortlite.InvalidArgument, match=r"probability"):
        s.run(None, {"p": np.array([0.5, np.nan], F32)})
    x = np.array([[-np.inf, -np.inf]], F32)
    s = session(model("Multinomial", {"x": x}, ["y"], opset=22, out_dtypes=[np.int32]))
    with pytest.raises(ortlite.InvalidArgument, match="no finite"):
        s.run(None, {"x": x})
    x1 = np.zeros(3, F32)
    with pytest.raises(ortlite.InvalidArgument, match="batch_size"):
        run_ortlite(model("Multinomial", {"x": x1}, ["y"], opset=22, out_dtypes=[np.int32]),
                    {"x": x1})
    with pytest.raises(ortlite.InvalidArgument, match="dtype"):
        session(model("Multinomial", {"x": x}, ["y"], dict(dtype=TensorProto.FLOAT), opset=22))


# ---------------------------------------------------------------------------------------
# DFT / STFT / MelWeightMatrix


def dft_model(x, opset, dft_length=None, axis=None, **attrs):
    feeds, names = {"x": x}, ["x"]
    if dft_length is not None:
        feeds["n"] = np.array(dft_length, np.int64)
        names.append("n")
    if axis is not None:
        if opset >= 20:
            if dft_length is None:
                names.append("")
            feeds["axis"] = np.array(axis, np.int64)
            names.append("axis")
        else:
            attrs["axis"] = axis
    return model("DFT", feeds, ["y"], attrs, opset=opset, names=names), feeds


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("n", [7, 12, 16, 97])
@pytest.mark.parametrize("complex_in", [False, True])
@pytest.mark.parametrize("inverse,onesided", [(0, 0), (1, 0), (0, 1)])
def test_dft_matches_onnxruntime(opset, n, complex_in, inverse, onesided):
    x = rng(n).standard_normal((2, n, 3, 2 if complex_in else 1)).astype(F32)
    m, feeds = dft_model(x, opset, axis=1, inverse=inverse, onesided=onesided)
    # onnxruntime accumulates in float (an O(n^2) sum for lengths that are not powers of
    # two): looser for n = 97; the reference (numpy in double) is the tight oracle
    tol = 2e-3 if n == 97 else 1e-4
    vs_ort(m, feeds, rtol=tol, atol=tol)
    vs_reference(m, feeds, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("dft_length,axis", [(10, 2), (5, -2), (16, 1), (3, 1)])
def test_dft_length_and_axis_match_onnxruntime(opset, dft_length, axis):
    x = rng(3).standard_normal((2, 8, 6, 2)).astype(F64)
    m, feeds = dft_model(x, opset, dft_length=dft_length, axis=axis)
    vs_ort(m, feeds, rtol=1e-9, atol=1e-9)


def test_dft_opset20_default_axis_is_last_signal_axis():
    x = rng(4).standard_normal((3, 5, 1)).astype(F32)
    m, feeds = dft_model(x, 20)
    y = vs_ort(m, feeds, rtol=1e-5, atol=1e-5)[0]
    ref = np.fft.fft(x[..., 0], axis=1)
    np.testing.assert_allclose(y[..., 0] + 1j * y[..., 1], ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("L,dft_length", [(6, None), (6, 11), (9, 12), (4, 9)])
def test_dft_irfft_matches_numpy(opset, L, dft_length):
    # onnxruntime rejects onesided=1 with inverse=1; numpy's irfft is the oracle
    spec = rng(L).standard_normal((2, L, 3, 2))
    m, feeds = dft_model(spec.astype(F64), opset, dft_length=dft_length, axis=1, inverse=1,
                         onesided=1)
    y = run_ortlite(m, feeds)[0]
    n = dft_length if dft_length is not None else 2 * (L - 1)
    ref = np.fft.irfft(spec[..., 0] + 1j * spec[..., 1], n=n, axis=1)[..., np.newaxis]
    assert_same([y], [ref], rtol=1e-10, atol=1e-10)
    vs_reference(m, feeds, rtol=1e-10, atol=1e-10)


def test_dft_half_types_and_large_prime_length():
    x = rng(5).standard_normal((1, 1009, 1)).astype(F32)
    m, feeds = dft_model(x, 20, axis=1)
    vs_reference(m, feeds, rtol=1e-5, atol=1e-4)
    xh = x.astype(F16)
    y = run_ortlite(*dft_model(xh, 20, axis=1))[0]
    assert y.dtype == F16
    ref = np.fft.fft(xh[0, :, 0].astype(F64))
    np.testing.assert_allclose(y[0, :, 0].astype(F64), ref.real, rtol=2e-2, atol=0.2)


def test_dft_errors():
    x = np.zeros((2, 4, 1), F32)
    m, feeds = dft_model(x, 20, axis=2)
    with pytest.raises(ortlite.InvalidArgument, match="axis"):
        run_ortlite(m, feeds)
    m, feeds = dft_model(x, 20, dft_length=0, axis=1)
    with pytest.raises(ortlite.InvalidArgument, match="dft_length"):
        run_ortlite(m, feeds)
    bad = np.zeros((2, 4, 3), F32)
    with pytest.raises(ortlite.InvalidArgument, match="last dimension"):
        run_ortlite(*dft_model(bad, 17))
    xi = np.zeros((2, 4, 1), np.int32)
    with pytest.raises(ortlite.InvalidArgument, match="float"):
        run_ortlite(*dft_model(xi, 17))
    # the default IRFFT length 2 * (1 - 1) is empty
    with pytest.raises(ortlite.InvalidArgument, match="dft_length"):
        run_ortlite(*dft_model(np.zeros((2, 1, 2), F32), 20, axis=1, inverse=1, onesided=1))


def stft_model(x, step, window=None, frame_length=None, **attrs):
    feeds = {"x": x, "step": np.array(step, np.int64)}
    names = ["x", "step"]
    if window is not None:
        feeds["w"] = window
        names.append("w")
    if frame_length is not None:
        if window is None:
            names.append("")
        feeds["fl"] = np.array(frame_length, np.int64)
        names.append("fl")
    return model("STFT", feeds, ["y"], attrs, opset=17, names=names), feeds


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("onesided", [0, 1])
@pytest.mark.parametrize("with_window,frame_length,step", [(True, None, 4), (False, 10, 3),
                                                           (True, 16, 5)])
def test_stft_matches_onnxruntime(dtype, onesided, with_window, frame_length, step):
    x = rng(7).standard_normal((2, 64, 1)).astype(dtype)
    window = None
    if with_window:
        window = np.hanning(frame_length or 12).astype(dtype)
    m, feeds = stft_model(x, step, window, frame_length, onesided=onesided)
    vs_ort(m, feeds, rtol=1e-4, atol=1e-4)


def test_stft_complex_signal_matches_reference():
    x = rng(8).standard_normal((1, 40, 2)).astype(F32)
    m, feeds = stft_model(x, 6, np.hamming(8).astype(F32), onesided=0)
    vs_reference(m, feeds, rtol=1e-4, atol=1e-4)


def test_stft_errors():
    x = np.zeros((1, 16, 1), F32)
    with pytest.raises(ortlite.InvalidArgument, match="frame_step"):
        run_ortlite(*stft_model(x, 0, np.ones(4, F32)))
    with pytest.raises(ortlite.InvalidArgument, match="shorter than frame_length"):
        run_ortlite(*stft_model(x, 2, np.ones(32, F32)))
    with pytest.raises(ortlite.InvalidArgument, match="window"):
        run_ortlite(*stft_model(x, 2, np.ones(4, F64)))
    with pytest.raises(ortlite.InvalidArgument, match="signal"):
        run_ortlite(*stft_model(np.zeros((16, 1), F32), 2, np.ones(4, F32)))


def mel_model(bins, dft, rate, lo, hi, dtype=F32, **attrs):
    feeds = {"b": np.array(bins, np.int64), "n": np.array(dft, np.int64),
             "r": np.array(rate, np.int64), "lo": np.array(lo, dtype),
             "hi": np.array(hi, dtype)}
    out = attrs.get("output_datatype", TensorProto.FLOAT)
    return model("MelWeightMatrix", feeds, ["y"], attrs, opset=17, out_elems=[out]), feeds


@pytest.mark.parametrize("bins,dft,rate,lo,hi", [(8, 16, 8192, 0.0, 4096.0),
                                                 (20, 512, 16000, 20.0, 8000.0),
                                                 (40, 1024, 22050, 0.0, 11025.0),
                                                 (13, 400, 16000, 300.0, 3400.0)])
def test_mel_weight_matrix_matches_onnxruntime_and_reference(bins, dft, rate, lo, hi):
    m, feeds = mel_model(bins, dft, rate, lo, hi)
    y = vs_ort(m, feeds, rtol=1e-6, atol=1e-6)[0]
    assert y.shape == (dft // 2 + 1, bins)
    vs_reference(m, feeds, rtol=1e-6, atol=1e-6)
    m, feeds = mel_model(bins, dft, rate, lo, hi, dtype=F64,
                         output_datatype=TensorProto.DOUBLE)
    vs_reference(m, feeds, rtol=1e-12, atol=1e-12)


def test_mel_weight_matrix_errors():
    # the upper edge far past the Nyquist frequency would index past the last bin
    with pytest.raises(ortlite.InvalidArgument, match="bin"):
        run_ortlite(*mel_model(8, 16, 8000, 0.0, 20000.0))
    with pytest.raises(ortlite.InvalidArgument, match="sample_rate"):
        run_ortlite(*mel_model(8, 16, 0, 0.0, 100.0))
    with pytest.raises(ortlite.InvalidArgument, match="more than"):
        run_ortlite(*mel_model(1 << 24, 1 << 24, 8000, 0.0, 100.0))
    with pytest.raises(ortlite.InvalidArgument, match="output_datatype"):
        session(mel_model(8, 16, 8000, 0.0, 100.0, output_datatype=TensorProto.STRING)[0])
