"""Recurrent kernels (src/providers/cpu/nn/rnn.cc): RNN, GRU, LSTM. Compared with onnxruntime,
whose CPU kernels take float32 and layout 0 only: layout 1 is checked against onnxruntime on
the transposed (layout 0) problem, double and float16 against onnxruntime in float32 on the
same (float32-representable) values."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import NP_TO_ONNX, assert_same, ort_u8s8_saturates, run_lite, run_ort

F16, F32, F64 = np.float16, np.float32, np.float64
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
OPS = list(GATES)
DIRECTIONS = ["forward", "reverse", "bidirectional"]
TOL = dict(rtol=1e-4, atol=1e-5)


def input_names(op):
    names = ["X", "W", "R", "B", "sequence_lens", "initial_h"]
    return names + ["initial_c", "P"] if op == "LSTM" else names


def make_arrays(op, direction="forward", S=4, B=3, I=5, H=4, extra=(), seed=0, scale=1.0,
                lens=None):
    """Random layout-0 inputs: X, W, R and the optional inputs named in `extra`."""
    rng = np.random.default_rng(seed)
    D = 2 if direction == "bidirectional" else 1
    G = GATES[op]

    def u(*shape):
        return (rng.uniform(-1, 1, size=shape) * scale).astype(F32)

    a = {"X": u(S, B, I), "W": u(D, G * H, I), "R": u(D, G * H, H)}
    if "B" in extra:
        a["B"] = u(D, 2 * G * H)
    if "sequence_lens" in extra:
        a["sequence_lens"] = (np.array(lens, np.int32) if lens is not None
                              else rng.integers(1, S + 1, size=B).astype(np.int32))
    if "initial_h" in extra:
        a["initial_h"] = u(D, B, H)
    if "initial_c" in extra:
        a["initial_c"] = u(D, B, H)
    if "P" in extra:
        a["P"] = u(D, 3 * H)
    return a


def build(op, arrays, outputs, attrs, opset=17, consts=()):
    """One node; arrays named in `consts` become initializers, the rest graph inputs;
    "" in `outputs` omits that output."""
    names = input_names(op)
    used = [n if n in arrays else "" for n in names]
    while used and not used[-1]:
        used.pop()
    node = helper.make_node(op, used, list(outputs), **attrs)
    dt = NP_TO_ONNX[arrays["X"].dtype]
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, NP_TO_ONNX[a.dtype], list(a.shape))
         for n, a in arrays.items() if n not in consts],
        [helper.make_tensor_value_info(o, dt, None) for o in outputs if o],
        initializer=[numpy_helper.from_array(arrays[n], n) for n in consts])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)
    return model


def check(op, arrays, outputs=("Y", "Y_h"), attrs=None, opset=17, consts=(), threads=None,
          **tol):
    model = build(op, arrays, outputs, attrs or {}, opset, consts)
    feeds = {n: a for n, a in arrays.items() if n not in consts}
    expected = run_ort(model, feeds)
    actual = run_lite(model, feeds, threads)
    assert_same(actual, expected, **(tol or TOL))
    return actual


def default_outputs(op):
    return ("Y", "Y_h", "Y_c") if op == "LSTM" else ("Y", "Y_h")


# ---------------------------------------------------------------------------------------
# against onnxruntime, layout 0, float32


@pytest.mark.parametrize("opset", [7, 14, 22])
@pytest.mark.parametrize("op", OPS)
def test_opsets(op, opset):
    check(op, make_arrays(op, extra=("B",)), default_outputs(op), {"hidden_size": 4}, opset)


def optional_sets(op):
    sets = [(), ("B",), ("sequence_lens",), ("initial_h",),
            ("B", "sequence_lens", "initial_h")]
    if op == "LSTM":
        sets += [("initial_c",), ("P",),
                 ("B", "sequence_lens", "initial_h", "initial_c", "P")]
    return sets


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("op", OPS)
def test_optional_inputs(op, direction):
    for i, extra in enumerate(optional_sets(op)):
        arrays = make_arrays(op, direction, extra=extra, seed=i)
        check(op, arrays, default_outputs(op), {"hidden_size": 4, "direction": direction})


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("op", OPS)
def test_constant_weights(op, direction):
    # Constant W and R are packed at load; the results must not change.
    extra = optional_sets(op)[-1]
    arrays = make_arrays(op, direction, extra=extra, seed=7)
    check(op, arrays, default_outputs(op), {"hidden_size": 4, "direction": direction},
          consts=("W", "R", "B"))


@pytest.mark.parametrize("op", OPS)
def test_optional_outputs(op):
    variants = [("Y",), ("", "Y_h"), ("Y", "Y_h")]
    if op == "LSTM":
        variants += [("", "", "Y_c"), ("Y", "", "Y_c"), ("", "Y_h", "Y_c")]
    for direction in ["forward", "bidirectional"]:
        for i, outs in enumerate(variants):
            extra = ("B", "sequence_lens", "initial_h") + (("initial_c",) if op == "LSTM" else ())
            arrays = make_arrays(op, direction, extra=extra, seed=10 + i, lens=[4, 2, 3])
            check(op, arrays, outs, {"hidden_size": 4, "direction": direction})


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("op", OPS)
def test_sequence_lens(op, direction):
    # Rows shorter than seq_length: zeros past the length in Y, the last valid step in Y_h.
    extra = ("B", "sequence_lens", "initial_h")
    arrays = make_arrays(op, direction, S=5, B=4, extra=extra, lens=[5, 1, 3, 2], seed=3)
    y = check(op, arrays, ("Y", "Y_h"), {"hidden_size": 4, "direction": direction})[0]
    assert np.all(y[1:, :, 1] == 0) and np.all(y[3:, :, 2] == 0)


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
def test_sequence_lens_zero(op):
    extra = ("B", "sequence_lens", "initial_h") + (("initial_c",) if op == "LSTM" else ())
    for lens in ([0, 3, 2], [0, 0, 0]):
        arrays = make_arrays(op, "bidirectional", S=3, extra=extra, lens=lens, seed=4)
        check(op, arrays, default_outputs(op), {"hidden_size": 4, "direction": "bidirectional"})


def test_rnn_sequence_lens_zero():
    # An empty sequence gives zeros in Y and Y_h (as GRU and LSTM in onnxruntime).
    extra = ("B", "sequence_lens", "initial_h")
    arrays = make_arrays("RNN", "bidirectional", S=3, extra=extra, lens=[0, 3, 2], seed=5)
    model = build("RNN", arrays, ("Y", "Y_h"), {"hidden_size": 4, "direction": "bidirectional"})
    y, yh = run_lite(model, arrays)
    assert np.all(y[:, :, 0] == 0) and np.all(yh[:, 0] == 0)
    assert np.all(y[2, :, 2] == 0) and not np.any(np.all(y[:2, :, 2] == 0, axis=-1))
    # The other rows equal a run without the empty one.
    rest = {k: (v[:, 1:] if k in ("X", "initial_h") else v[1:] if k == "sequence_lens" else v)
            for k, v in arrays.items()}
    y2, yh2 = run_lite(build("RNN", rest, ("Y", "Y_h"),
                             {"hidden_size": 4, "direction": "bidirectional"}), rest)
    np.testing.assert_allclose(y[:, :, 1:], y2, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(yh[:, 1:], yh2, rtol=1e-6, atol=1e-7)


RNN_ACTS = [("Relu", None, None), ("Tanh", None, None), ("Sigmoid", None, None),
            ("Affine", 0.7, 0.1), ("LeakyRelu", 0.2, None), ("ThresholdedRelu", 0.1, None),
            ("ScaledTanh", 0.8, 1.5), ("HardSigmoid", 0.3, 0.4), ("Elu", 0.9, None),
            ("Softsign", None, None), ("Softplus", None, None)]


@pytest.mark.parametrize("act,alpha,beta", RNN_ACTS)
def test_rnn_activations(act, alpha, beta):
    for direction in ["forward", "bidirectional"]:
        D = 2 if direction == "bidirectional" else 1
        attrs = {"hidden_size": 4, "direction": direction, "activations": [act] * D}
        # onnxruntime's RNN reads alpha / beta by direction; one value per direction agrees
        # with reading them in the order of the activations that take them.
        if alpha is not None:
            attrs["activation_alpha"] = [alpha, alpha / 2][:D]
        if beta is not None:
            attrs["activation_beta"] = [beta, beta / 2][:D]
        arrays = make_arrays("RNN", direction, extra=("B", "initial_h"), seed=2)
        check("RNN", arrays, ("Y", "Y_h"), attrs)


@pytest.mark.parametrize("acts,alpha,beta", [
    (["HardSigmoid", "Softsign", "LeakyRelu", "ScaledTanh"], [0.3, 0.05, 0.9], [0.4, 1.2]),
    (["Sigmoid", "Elu", "Relu", "Affine"], [0.8, 0.6], [0.2]),
    (["LeakyRelu", "ThresholdedRelu", "HardSigmoid", "Softplus"], None, None),  # defaults
    (["sigmoid", "TANH", "Sigmoid", "tanh"], None, None),  # any case
])
def test_gru_activations(acts, alpha, beta):
    attrs = {"hidden_size": 4, "direction": "bidirectional", "activations": acts}
    if alpha:
        attrs["activation_alpha"] = alpha
    if beta:
        attrs["activation_beta"] = beta
    check("GRU", make_arrays("GRU", "bidirectional", extra=("B",), seed=6), ("Y", "Y_h"), attrs)


@pytest.mark.parametrize("acts,alpha,beta", [
    (["HardSigmoid", "ScaledTanh", "Affine", "Sigmoid", "Elu", "Softsign"],
     [0.25, 0.9, 0.7, 1.1], [0.45, 1.3, 0.05]),
    (["Sigmoid", "Relu", "LeakyRelu", "HardSigmoid", "Tanh", "Softplus"], None, None),
])
def test_lstm_activations(acts, alpha, beta):
    attrs = {"hidden_size": 4, "direction": "bidirectional", "activations": acts}
    if alpha:
        attrs["activation_alpha"] = alpha
    if beta:
        attrs["activation_beta"] = beta
    arrays = make_arrays("LSTM", "bidirectional", extra=("B", "P", "initial_c"), seed=8)
    check("LSTM", arrays, ("Y", "Y_h", "Y_c"), attrs)


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("op", OPS)
def test_clip(op, direction):
    extra = ("B", "initial_h") + (("P",) if op == "LSTM" else ())
    arrays = make_arrays(op, direction, extra=extra, seed=9, scale=2.0)
    attrs = {"hidden_size": 4, "direction": direction, "clip": 0.4}
    clipped = check(op, arrays, default_outputs(op), attrs)
    del attrs["clip"]
    plain = run_lite(build(op, arrays, default_outputs(op), attrs), arrays)
    assert not np.allclose(clipped[0], plain[0])  # the clip mattered


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_gru_linear_before_reset(direction):
    for i, extra in enumerate([(), ("B", "sequence_lens", "initial_h")]):
        arrays = make_arrays("GRU", direction, extra=extra, seed=20 + i)
        attrs = {"hidden_size": 4, "direction": direction, "linear_before_reset": 1}
        check("GRU", arrays, ("Y", "Y_h"), attrs)
        check("GRU", arrays, ("Y", "Y_h"), attrs, consts=("W", "R"))


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_lstm_input_forget(direction):
    arrays = make_arrays("LSTM", direction, extra=("B", "P", "initial_h", "initial_c",
                                                    "sequence_lens"), seed=30)
    check("LSTM", arrays, ("Y", "Y_h", "Y_c"),
          {"hidden_size": 4, "direction": direction, "input_forget": 1})


@pytest.mark.parametrize("op", OPS)
def test_hidden_size_from_r(op):
    # hidden_size is optional in ONNX (R gives it); onnxruntime needs it.
    arrays = make_arrays(op, "bidirectional", extra=("B",))
    attrs = {"direction": "bidirectional"}
    expected = run_ort(build(op, arrays, default_outputs(op), dict(attrs, hidden_size=4)), arrays)
    assert_same(run_lite(build(op, arrays, default_outputs(op), attrs), arrays), expected, **TOL)


@pytest.mark.parametrize("op", OPS)
def test_larger_multithreaded(op):
    extra = ("B", "sequence_lens", "initial_h") + (("initial_c", "P") if op == "LSTM" else ())
    for consts in [(), ("W", "R")]:
        arrays = make_arrays(op, "bidirectional", S=6, B=5, I=24, H=40, extra=extra, seed=11,
                             scale=0.3)
        check(op, arrays, default_outputs(op), {"hidden_size": 40, "direction": "bidirectional"},
              consts=consts, threads=2, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("op,H", [("LSTM", 384), ("GRU", 448)])
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("threads", [1, 2])
def test_bidirectional_large_r(op, H, batch, threads):
    """R of 2 to 6 MiB a direction: at 2 threads each direction runs on both threads in turn
    (its R split between them) instead of a direction a thread; a batch's steps are products
    of the fused GEMM where R is constant."""
    extra = ("B", "sequence_lens", "initial_h") + (("initial_c", "P") if op == "LSTM" else ())
    for consts in [(), ("W", "R")]:
        arrays = make_arrays(op, "bidirectional", S=5, B=batch, I=32, H=H, extra=extra, seed=12,
                             scale=0.1, lens=[4, 5, 2][:batch])
        check(op, arrays, default_outputs(op), {"hidden_size": H, "direction": "bidirectional"},
              consts=consts, threads=threads, rtol=1e-4, atol=2e-5)


def test_empty_batch_and_sequence():
    for S, B in [(0, 2), (3, 0)]:
        arrays = make_arrays("LSTM", "bidirectional", S=S, B=B, extra=("B",))
        model = build("LSTM", arrays, ("Y", "Y_h", "Y_c"), {"hidden_size": 4,
                                                            "direction": "bidirectional"})
        y, yh, yc = run_lite(model, arrays)
        assert y.shape == (S, 2, B, 4) and yh.shape == (2, B, 4) and yc.shape == (2, B, 4)
        assert not np.any(yh) and not np.any(yc)


# ---------------------------------------------------------------------------------------
# layout 1: onnxruntime on the transposed problem


def to_layout1(arrays):
    out = dict(arrays)
    out["X"] = np.ascontiguousarray(arrays["X"].transpose(1, 0, 2))
    for n in ("initial_h", "initial_c"):
        if n in arrays:
            out[n] = np.ascontiguousarray(arrays[n].transpose(1, 0, 2))
    return out


@pytest.mark.parametrize("opset", [14, 22])
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("op", OPS)
def test_layout1(op, direction, opset):
    extra = ("B", "sequence_lens", "initial_h") + (("initial_c", "P") if op == "LSTM" else ())
    arrays = make_arrays(op, direction, S=5, B=3, extra=extra, lens=[5, 2, 4], seed=12)
    outs = default_outputs(op)
    attrs = {"hidden_size": 4, "direction": direction}
    expected = run_ort(build(op, arrays, outs, attrs, opset), arrays)
    arrays1 = to_layout1(arrays)
    actual = run_lite(build(op, arrays1, outs, dict(attrs, layout=1), opset), arrays1)
    expected = [expected[0].transpose(2, 0, 1, 3)] + [e.transpose(1, 0, 2) for e in expected[1:]]
    assert_same(actual, expected, **TOL)


# ---------------------------------------------------------------------------------------
# double and float16 (onnxruntime: float32 only)


@pytest.mark.parametrize("dtype,tol", [(F64, dict(rtol=1e-5, atol=1e-6)),
                                       (F16, dict(rtol=2e-2, atol=2e-2))])
@pytest.mark.parametrize("op", OPS)
def test_other_float_types(op, dtype, tol):
    extra = ("B", "sequence_lens", "initial_h") + (("initial_c", "P") if op == "LSTM" else ())
    arrays = make_arrays(op, "bidirectional", extra=extra, seed=13)
    arrays = {k: (v.astype(dtype).astype(F32) if v.dtype == F32 else v) for k, v in arrays.items()}
    outs = default_outputs(op)
    attrs = {"hidden_size": 4, "direction": "bidirectional"}
    if op == "GRU":
        attrs["linear_before_reset"] = 1
    expected = run_ort(build(op, arrays, outs, attrs), arrays)
    typed = {k: (v.astype(dtype) if v.dtype == F32 else v) for k, v in arrays.items()}
    for consts in [(), ("W", "R")]:
        actual = run_lite(build(op, typed, outs, attrs, consts=consts),
                          {k: v for k, v in typed.items() if k not in consts})
        for a, e in zip(actual, expected):
            assert a.dtype == dtype and a.shape == e.shape
            np.testing.assert_allclose(a.astype(F64), e.astype(F64), **tol)


@pytest.mark.parametrize("op", OPS)
def test_bfloat16(op):
    # numpy has no bfloat16: the model casts the float inputs to bfloat16 and the outputs back.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    arrays = make_arrays(op, "bidirectional", extra=("B", "initial_h"), seed=14)
    arrays = {k: v.astype(ml_dtypes.bfloat16).astype(F32) for k, v in arrays.items()}
    attrs = {"hidden_size": 4, "direction": "bidirectional"}
    expected = run_ort(build(op, arrays, ("Y", "Y_h"), attrs, opset=22), arrays)
    names = [n if n in arrays else "" for n in input_names(op)][:6]
    nodes = [helper.make_node("Cast", [n], [n + "_bf"], to=TensorProto.BFLOAT16) for n in arrays]
    nodes.append(helper.make_node(op, [n + "_bf" if n else "" for n in names], ["y", "yh"],
                                  **attrs))
    nodes += [helper.make_node("Cast", [o], [o.upper()], to=TensorProto.FLOAT)
              for o in ("y", "yh")]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(a.shape))
         for n, a in arrays.items()],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("Y", "YH")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    model.ir_version = 10
    actual = run_lite(model, arrays)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------------------------------
# errors


def load(op, arrays, attrs, outputs=("Y", "Y_h"), opset=17):
    return ortlite.InferenceSession(build(op, arrays, outputs, attrs, opset).SerializeToString())


@pytest.mark.parametrize("op", OPS)
def test_bad_shapes(op):
    base = make_arrays(op, extra=("B", "initial_h"))
    G = GATES[op]
    cases = [
        ("W", np.zeros((1, G * 4, 6), F32), r"'W' must have shape \[1,%d,5\]" % (G * 4)),
        ("W", np.zeros((2, G * 4, 5), F32), "'W'"),
        ("R", np.zeros((1, G * 4, 5), F32), "'R'"),
        ("R", np.zeros((G * 4, 4), F32), "'R' must be 3-D"),
        ("B", np.zeros((1, G * 4), F32), "'B'"),
        ("initial_h", np.zeros((1, 2, 4), F32), "'initial_h'"),
        ("X", np.zeros((4, 5), F32), "'X' must be 3-D"),
    ]
    for name, bad, match in cases:
        arrays = dict(base, **{name: bad})
        sess = load(op, arrays, {"hidden_size": 4})
        with pytest.raises(ortlite.InvalidArgument, match=match):
            sess.run(None, arrays)


def test_lstm_bad_shapes():
    base = make_arrays("LSTM", extra=("initial_c", "P"))
    for name, bad in [("initial_c", np.zeros((1, 3, 5), F32)), ("P", np.zeros((1, 16), F32))]:
        arrays = dict(base, **{name: bad})
        with pytest.raises(ortlite.InvalidArgument, match=name):
            load("LSTM", arrays, {"hidden_size": 4}).run(None, arrays)


@pytest.mark.parametrize("op", OPS)
def test_hidden_size_mismatch(op):
    arrays = make_arrays(op)
    for consts in [(), ("W", "R")]:
        model = build(op, arrays, ("Y",), {"hidden_size": 5}, consts=consts)
        sess = ortlite.InferenceSession(model.SerializeToString())
        with pytest.raises(ortlite.InvalidArgument, match="hidden_size' = 5"):
            sess.run(None, {k: v for k, v in arrays.items() if k not in consts})


def test_huge_hidden_size():
    # An empty R may claim any hidden size: refused before any buffer is sized from it.
    for attrs in [{"hidden_size": 2**58}, {}]:
        arrays = dict(make_arrays("LSTM"), R=np.zeros((1, 0, 2**58), F32))
        with pytest.raises(ortlite.InvalidArgument, match="'W' must have shape"):
            load("LSTM", arrays, attrs).run(None, arrays)
    arrays = make_arrays("LSTM")
    with pytest.raises(ortlite.InvalidArgument, match="too large"):
        load("LSTM", arrays, {"hidden_size": 2**62}).run(None, arrays)


@pytest.mark.parametrize("attrs,match", [
    ({"direction": "sideways"}, "direction"),
    ({"activations": ["Tanh", "Swish"]}, "unknown activation 'Swish'"),
    ({"activations": ["Sigmoid"]}, "'activations' has 1 entries"),
    ({"hidden_size": 0}, "hidden_size"),
    ({"clip": 0.0}, "clip"),
    ({"clip": -1.0}, "clip"),
    ({"layout": 2}, "layout"),
])
def test_bad_attributes(attrs, match):
    arrays = make_arrays("GRU")
    with pytest.raises(ortlite.InvalidGraph, match=match):
        load("GRU", arrays, dict({"hidden_size": 4}, **attrs))


def test_layout_before_opset14():
    arrays = make_arrays("RNN")
    with pytest.raises(ortlite.InvalidGraph, match="layout"):
        load("RNN", arrays, {"hidden_size": 4, "layout": 0}, opset=13)


def test_bad_sequence_lens():
    for lens, match in [([1, 5, 2], r"holds 5 at batch 1"), ([1, -1, 2], "holds -1"),
                        ([1, 2], r"shape \[3\]")]:
        arrays = dict(make_arrays("LSTM"), sequence_lens=np.array(lens, np.int32))
        with pytest.raises(ortlite.InvalidArgument, match=match):
            load("LSTM", arrays, {"hidden_size": 4}).run(None, arrays)
    arrays = dict(make_arrays("LSTM"), sequence_lens=np.array([1, 2, 3], np.int64))
    with pytest.raises(ortlite.InvalidArgument, match="int32"):
        load("LSTM", arrays, {"hidden_size": 4}).run(None, arrays)


def test_bad_types():
    arrays = make_arrays("RNN")
    mixed = dict(arrays, W=arrays["W"].astype(F64))
    with pytest.raises(ortlite.InvalidArgument, match="'W' has type double"):
        load("RNN", mixed, {"hidden_size": 4}).run(None, mixed)
    ints = {k: v.astype(np.int32) for k, v in arrays.items()}
    with pytest.raises(ortlite.InvalidArgument, match="'X' must be"):
        load("RNN", ints, {"hidden_size": 4}).run(None, ints)


# ---------------------------------------------------------------------------------------
# com.microsoft DynamicQuantizeLSTM, as onnxruntime's quantize_dynamic writes it from LSTM.
#
# Both runtimes quantize X (all steps at once) and H_{t-1} (per step) to uint8 with
# DynamicQuantizeLinear's scale and zero point and multiply exactly in integers, so the
# outputs agree to float rounding (1e-5) as long as the quantized operands are the same.
# With sequence_lens in both directions, onnxruntime's H_{t-1} range differs in some steps
# (rows already past their length): an element then quantizes one step apart, which moves
# a gate input by h_scale * |w| <= (2 / 255) * 0.5 ~ 4e-3 for these weights; 2e-2 covers a
# few such steps compounding over the sequence.


def dq_lstm_model(S, B, I, H, direction, states, lens, seed, tmp_path):
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    rng = np.random.default_rng(seed)
    D = 2 if direction == "bidirectional" else 1
    inits = [numpy_helper.from_array(rng.uniform(-0.5, 0.5, s).astype(F32), n)
             for n, s in (("W", (D, 4 * H, I)), ("R", (D, 4 * H, H)), ("B", (D, 8 * H)))]
    gi = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [S, B, I])]
    feeds = {"X": rng.uniform(-2, 2, (S, B, I)).astype(F32)}
    if lens:
        gi.append(helper.make_tensor_value_info("seq", TensorProto.INT32, [B]))
        feeds["seq"] = rng.integers(1, S + 1, B).astype(np.int32)
    if states:
        for n in ("h0", "c0"):
            gi.append(helper.make_tensor_value_info(n, TensorProto.FLOAT, [D, B, H]))
            feeds[n] = rng.uniform(-1, 1, (D, B, H)).astype(F32)
    ins = ["X", "W", "R", "B", "seq" if lens else "", "h0" if states else "",
           "c0" if states else ""]
    node = helper.make_node("LSTM", ins, ["Y", "Yh", "Yc"], hidden_size=H, direction=direction)
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Yh", "Yc")]
    m = helper.make_model(helper.make_graph([node], "g", gi, outs, inits),
                          opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    fp, qp = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(m, str(fp))
    # reduce_range (7-bit weights) where onnxruntime's u8 x s8 products saturate without
    # VNNI, as onnxruntime advises for such CPUs: its results are exact then.
    quantize_dynamic(str(fp), str(qp), weight_type=QuantType.QInt8,
                     reduce_range=ort_u8s8_saturates())
    q = onnx.load(str(qp))
    assert [n.op_type for n in q.graph.node] == ["DynamicQuantizeLSTM"]
    return q, feeds


@pytest.mark.parametrize("S,B,I,H,direction,states,lens", [
    (1, 1, 8, 16, "forward", False, False),
    (7, 1, 8, 16, "forward", False, False),
    (7, 3, 10, 20, "forward", True, False),
    (7, 3, 10, 20, "forward", False, True),
    (7, 3, 10, 20, "reverse", True, True),
    (1, 3, 6, 8, "reverse", False, True),
    (7, 3, 10, 20, "bidirectional", True, False),
    (7, 3, 10, 20, "bidirectional", True, True),
    (7, 3, 32, 64, "bidirectional", False, True),
])
def test_dynamic_quantize_lstm_vs_ort(S, B, I, H, direction, states, lens, tmp_path):
    m, feeds = dq_lstm_model(S, B, I, H, direction, states, lens, 1, tmp_path)
    atol = 2e-2 if (lens and direction == "bidirectional") else 1e-5
    assert_same(run_lite(m, feeds), run_ort(m, feeds), rtol=0, atol=atol)


def test_dynamic_quantize_lstm_weights_given_at_run_time(tmp_path):
    # W, R and their scales / zero points as graph inputs: packed per run.
    m, feeds = dq_lstm_model(7, 3, 10, 20, "forward", True, False, 2, tmp_path)
    expected = run_ort(m, feeds)
    g = m.graph
    for init in list(g.initializer):
        arr = numpy_helper.to_array(init)
        feeds[init.name] = arr
        g.input.append(helper.make_tensor_value_info(init.name, NP_TO_ONNX[arr.dtype],
                                                     list(arr.shape)))
    del g.initializer[:]
    assert_same(run_lite(m, feeds), expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("threads", [2, 3])
def test_bidirectional_directions_side_by_side(op, threads):
    """Bidirectional layers whose directions run on separate threads (small cells at any
    thread count, every cell at two threads) and a large cell at three threads (split
    products): both layouts, ragged sequence lengths, against onnxruntime."""
    extra = ("B", "sequence_lens", "initial_h") + (("initial_c", "P") if op == "LSTM" else ())
    for S, B, I, H in ((7, 4, 16, 24), (3, 8, 32, 256)):
        arrays = make_arrays(op, "bidirectional", S=S, B=B, I=I, H=H, extra=extra, seed=13,
                             scale=0.2)
        attrs = {"hidden_size": H, "direction": "bidirectional"}
        check(op, arrays, default_outputs(op), attrs, threads=threads, rtol=1e-4, atol=2e-5)
        # layout 1: batch first
        a1 = dict(arrays)
        a1["X"] = np.ascontiguousarray(arrays["X"].transpose(1, 0, 2))
        for n in ("initial_h", "initial_c"):
            if n in arrays:
                a1[n] = np.ascontiguousarray(arrays[n].transpose(1, 0, 2))
        model = build(op, a1, default_outputs(op), dict(attrs, layout=1))
        got = run_lite(model, a1, threads)
        want = run_lite(build(op, arrays, default_outputs(op), attrs), arrays, 1)
        np.testing.assert_allclose(got[0], want[0].transpose(2, 0, 1, 3), rtol=1e-4, atol=2e-5)
        np.testing.assert_allclose(got[1], want[1].transpose(1, 0, 2), rtol=1e-4, atol=2e-5)
