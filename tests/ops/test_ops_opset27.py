"""Opset-27 CausalConvWithState (src/providers/cpu/nn/causal_conv_with_state.cc) and
LinearAttention (linear_attention.cc). onnxruntime 1.23 runs neither op, so one-node models
are compared with onnx's reference implementation (onnx.reference.ReferenceEvaluator) on
random shapes beyond the ONNX node cases: several batch sizes, T = 1 (decode) and T > 1
(prefill), MHA / GQA / MQA head sharing, d_k != d_v, every update_rule and decay / beta form,
with and without past_state and bias, each activation, kernel size 1 and k > length, float,
float16 and bfloat16 (those two looser), a float state under float16 activations. Numpy
closed forms check the linear rule and the convolution independently of the reference, and
decode steps chained through present_state must equal one prefill call. Bad inputs raise
typed errors naming the node and the problem."""

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper
from onnx.reference import ReferenceEvaluator

import ortlite
from helpers import make_model, session

OPSET = 27
F32, F16, BF16 = np.float32, np.float16, ml_dtypes.bfloat16
RULES = ["linear", "gated", "delta", "gated_delta"]
# (rtol, atol) against the reference: float16 / bfloat16 outputs differ by a rounding of the
# float result at most (the reference also computes LinearAttention in float32).
TOL = {F32: (2e-5, 2e-5), F16: (1e-2, 1e-2), BF16: (4e-2, 4e-2)}


def elem(dt):
    return TP.BFLOAT16 if np.dtype(dt) == np.dtype(BF16) else helper.np_dtype_to_tensor_dtype(
        np.dtype(dt))


def one_node(op, feeds, outputs, name="n", **attrs):
    """A one-node opset-27 model, its inputs of unknown shape (a session runs on several).
    feeds: [(input name, array or None for an omitted input)]; outputs: [(name, dtype)], ""
    for an omitted one.
    Returns (model, feed dict)."""
    node = helper.make_node(op, [n if a is not None else "" for n, a in feeds],
                            [n for n, _ in outputs], name=name, **attrs)
    present = [(n, a) for n, a in feeds if a is not None]
    model = make_model([node], [(n, elem(a.dtype), None) for n, a in present],
                       [(n, elem(d), None) for n, d in outputs if n], opset=OPSET)
    return model, dict(present)


def run(model, feeds):
    return session(model).run(None, feeds)


def reference(model, feeds):
    return [np.asarray(r) for r in ReferenceEvaluator(model).run(None, feeds)]


def assert_close(got, want, dtype):
    rtol, atol = TOL[dtype]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, f"output {i}: {g.dtype} != {w.dtype}"
        assert g.shape == w.shape, f"output {i}: {g.shape} != {w.shape}"
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,
                                   atol=atol, err_msg=f"output {i}")


# ---------------------------------------------------------------------------------------
# CausalConvWithState


def conv_feeds(rng, B, C, L, K, bias, past, dtype=F32):
    return [("input", rng.standard_normal((B, C, L)).astype(dtype)),
            ("weight", (rng.standard_normal((C, 1, K)) / np.sqrt(K)).astype(dtype)),
            ("bias", rng.standard_normal(C).astype(dtype) if bias else None),
            ("past_state", rng.standard_normal((B, C, K - 1)).astype(dtype) if past else None)]


def conv_model(feeds, activation=None, name="n"):
    dtype = feeds[0][1].dtype
    attrs = {} if activation is None else {"activation": activation}
    return one_node("CausalConvWithState", feeds,
                    [("output", dtype), ("present_state", dtype)], name=name, **attrs)


def numpy_conv(x, w, b, past, activation):
    """The causal depthwise convolution in float64, straight from its definition."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    B, C, L = x.shape
    K = w.shape[2]
    pad = np.zeros((B, C, K - 1)) if past is None else past.astype(np.float64)
    row = np.concatenate([pad, x], axis=2)
    y = np.zeros((B, C, L))
    for j in range(K):
        y += w[None, :, 0, j, None] * row[:, :, j:j + L]
    if b is not None:
        y += b.astype(np.float64)[None, :, None]
    if activation in ("silu", "swish"):
        y = y / (1 + np.exp(-y))
    return y, row[:, :, L:]


# (B, C, L, K): k > L, kernel size 1, decode (L = 1), a single channel, wider rows.
CONV_SHAPES = [(1, 1, 6, 4), (2, 3, 8, 3), (2, 5, 1, 4), (3, 4, 2, 5), (2, 4, 7, 1),
               (1, 16, 33, 4)]


@pytest.mark.parametrize("B,C,L,K", CONV_SHAPES)
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("past", [False, True])
@pytest.mark.parametrize("activation", [None, "none", "silu", "swish"])
def test_causal_conv_against_reference(B, C, L, K, bias, past, activation):
    rng = np.random.default_rng(B * 1000 + C * 100 + L * 10 + K)
    feeds = conv_feeds(rng, B, C, L, K, bias, past)
    model, fd = conv_model(feeds, activation)
    got = run(model, fd)
    assert_close(got, reference(model, fd), F32)
    want_y, want_state = numpy_conv(*(a for _, a in feeds), activation)
    np.testing.assert_allclose(got[0], want_y, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[1], want_state.astype(F32))  # copied values: exact


@pytest.mark.parametrize("dtype", [F16, BF16])
@pytest.mark.parametrize("B,C,L,K", [(2, 4, 8, 4), (1, 3, 2, 5), (2, 6, 1, 3)])
@pytest.mark.parametrize("activation", [None, "silu"])
def test_causal_conv_half_types(dtype, B, C, L, K, activation):
    rng = np.random.default_rng(7 * L + K)
    feeds = conv_feeds(rng, B, C, L, K, True, True, dtype)
    model, fd = conv_model(feeds, activation)
    got = run(model, fd)
    assert_close(got, reference(model, fd), dtype)
    want_y, want_state = numpy_conv(*(a for _, a in feeds), activation)
    np.testing.assert_allclose(got[0].astype(np.float64), want_y, **dict(
        zip(("rtol", "atol"), TOL[dtype])))
    np.testing.assert_array_equal(got[1].astype(np.float64), want_state)


def test_causal_conv_chunks_chained_through_the_state_equal_one_call():
    rng = np.random.default_rng(3)
    B, C, L, K = 2, 6, 13, 4
    feeds = conv_feeds(rng, B, C, L, K, True, True)
    x, w, b, p = (a for _, a in feeds)
    model, fd = conv_model(feeds, "silu")
    full_y, full_state = run(model, fd)
    sess = session(model)
    ys, state = [], p
    for lo, hi in [(0, 1), (1, 3), (3, 4), (4, 9), (9, 13)]:  # decode steps and prefills
        y, state = sess.run(None, {"input": np.ascontiguousarray(x[:, :, lo:hi]),
                                   "weight": w, "bias": b, "past_state": state})
        ys.append(y)
    np.testing.assert_allclose(np.concatenate(ys, axis=2), full_y, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(state, full_state)


def test_causal_conv_rows_split_over_threads():
    rng = np.random.default_rng(5)
    feeds = conv_feeds(rng, 2, 48, 700, 4, True, True)
    model, fd = conv_model(feeds, "silu")
    want = reference(model, fd)
    for threads in (1, 3, 4):
        assert_close(session(model, threads=threads).run(None, fd), want, F32)


def test_causal_conv_without_the_present_state_output():
    rng = np.random.default_rng(6)
    feeds = conv_feeds(rng, 2, 3, 5, 3, True, True)
    model, fd = conv_model(feeds, "silu")
    node = model.graph.node[0]
    node.output[1] = ""
    del model.graph.output[1]
    (y,) = run(model, fd)
    np.testing.assert_allclose(y, numpy_conv(*(a for _, a in feeds), "silu")[0], rtol=1e-5,
                               atol=1e-5)


def test_causal_conv_empty_length_passes_the_state_through():
    rng = np.random.default_rng(4)
    feeds = conv_feeds(rng, 2, 3, 0, 4, True, True)
    model, fd = conv_model(feeds)
    y, state = run(model, fd)
    assert y.shape == (2, 3, 0)
    np.testing.assert_array_equal(state, fd["past_state"])


def test_causal_conv_silu_saturates_without_nan():
    x = np.array([[[-200.0, -90.0, 0.0, 90.0, 200.0]]], F32)
    w = np.ones((1, 1, 1), F32)
    model, fd = conv_model([("input", x), ("weight", w)], "silu")
    y, _ = run(model, fd)
    np.testing.assert_allclose(y, [[[-0.0, -0.0, 0.0, 90.0, 200.0]]], atol=1e-30)


def conv_error(feeds, match, activation=None, code=ortlite.InvalidArgument):
    model, fd = conv_model(feeds, activation, name="cc")
    with pytest.raises(code, match=match) as e:
        run(model, fd)
    assert "CausalConvWithState node 'cc'" in str(e.value)


def test_causal_conv_rejects_an_unknown_activation():
    rng = np.random.default_rng(0)
    model, _ = conv_model(conv_feeds(rng, 1, 2, 3, 2, False, False), "relu", name="cc")
    with pytest.raises(ortlite.InvalidGraph, match="CausalConvWithState node 'cc'.*'relu'"):
        session(model)


F = np.zeros


@pytest.mark.parametrize("feeds,match", [
    ([("input", F((2, 3), F32)), ("weight", F((2, 1, 3), F32))], r"'input' \[2,3\] must be 3-D"),
    ([("input", F((1, 2, 5), F32)), ("weight", F((2, 3), F32))], r"'weight' \[2,3\] must be"),
    ([("input", F((1, 2, 5), F32)), ("weight", F((3, 1, 2), F32))], r"channels = 2, 1, k"),
    ([("input", F((1, 2, 5), F32)), ("weight", F((2, 2, 2), F32))], r"'weight' \[2,2,2\]"),
    ([("input", F((1, 2, 5), F32)), ("weight", F((2, 1, 0), F32))], r"k >= 1"),
    ([("input", F((1, 2, 5), F32)), ("weight", F((2, 1, 3), F32)), ("bias", F(3, F32))],
     r"'bias' \[3\] must be 1-D \(channels = 2\)"),
    ([("input", F((1, 2, 5), F32)), ("weight", F((2, 1, 3), F32)), ("bias", None),
      ("past_state", F((1, 2, 3), F32))], r"'past_state' \[1,2,3\] must be \[1,2,2\]"),
    ([("input", F((1, 2, 5), F32)), ("weight", F((2, 1, 3), F32)), ("bias", None),
      ("past_state", F((2, 2, 2), F32))], r"'past_state' \[2,2,2\] must be \[1,2,2\]"),
    ([("input", F((1, 2, 5), F32)), ("weight", F((2, 1, 3), F16))],
     r"'weight' has element type float16, not the type of 'input' \(float\)"),
    ([("input", F((1, 2, 5), F32)), ("weight", F((2, 1, 3), F32)), ("bias", F(2, np.float64))],
     r"'bias' has element type double"),
    ([("input", F((1, 2, 5), np.float64)), ("weight", F((2, 1, 3), np.float64))],
     r"element type double; the op takes float, float16 or bfloat16"),
])
def test_causal_conv_bad_inputs(feeds, match):
    conv_error(feeds, match)


# ---------------------------------------------------------------------------------------
# LinearAttention


def la_feeds(rng, B, T, Hq, Hkv, dk, dv, rule, past=False, decay_per_key=True,
             beta_scalar=False, dtype=F32, state_dtype=None):
    """Inputs in the ranges the models feed: keys L2-normalized per head for the delta rules
    (as the spec asks), decay log(0.5..1), beta in (0, 1)."""
    q = rng.standard_normal((B, T, Hq * dk))
    k = rng.standard_normal((B, T, Hkv, dk))
    if rule in ("delta", "gated_delta"):
        k /= np.linalg.norm(k, axis=-1, keepdims=True)
    k = k.reshape(B, T, Hkv * dk)
    v = rng.standard_normal((B, T, Hkv * dv))
    decay = beta = state = None
    if rule in ("gated", "gated_delta"):
        decay = np.log(rng.uniform(0.5, 1.0, (B, T, Hkv * dk if decay_per_key else Hkv)))
    if rule in ("delta", "gated_delta"):
        beta = rng.uniform(0.05, 1.0, (B, T, 1 if beta_scalar else Hkv))
    if past:
        state = rng.standard_normal((B, Hkv, dk, dv)) * 0.5
    cast = lambda a, d=dtype: None if a is None else a.astype(d)  # noqa: E731
    return [("query", cast(q)), ("key", cast(k)), ("value", cast(v)),
            ("past_state", cast(state, state_dtype or dtype)), ("decay", cast(decay)),
            ("beta", cast(beta))]


def la_model(feeds, Hq, Hkv, rule=None, name="n", state_out=None, **attrs):
    dtype = feeds[0][1].dtype
    past = feeds[3][1] if len(feeds) > 3 else None
    state_dtype = state_out or (past.dtype if past is not None else dtype)
    if rule is not None:
        attrs["update_rule"] = rule
    while feeds and feeds[-1][1] is None:  # trailing omitted inputs are left off
        feeds = feeds[:-1]
    return one_node("LinearAttention", feeds, [("output", dtype), ("present_state", state_dtype)],
                    name=name, q_num_heads=Hq, kv_num_heads=Hkv, **attrs)


# (B, T, Hq, Hkv, dk, dv): decode, MHA, GQA with dk != dv, MQA, a long prefill, GQA decode.
LA_SHAPES = [(1, 1, 1, 1, 4, 4), (2, 5, 4, 4, 8, 8), (3, 7, 6, 2, 5, 3), (2, 6, 4, 1, 16, 8),
             (1, 17, 2, 2, 3, 12), (2, 1, 8, 2, 32, 16)]
# (rule, decay per key dim, beta (B, T, 1)) for every decay / beta form of each rule.
LA_FORMS = [("linear", True, False), ("gated", True, False), ("gated", False, False),
            ("delta", True, False), ("delta", True, True), ("gated_delta", True, False),
            ("gated_delta", False, False), ("gated_delta", True, True),
            ("gated_delta", False, True)]


@pytest.mark.parametrize("B,T,Hq,Hkv,dk,dv", LA_SHAPES)
@pytest.mark.parametrize("rule,per_key,beta_scalar", LA_FORMS)
@pytest.mark.parametrize("past", [False, True])
def test_linear_attention_against_reference(B, T, Hq, Hkv, dk, dv, rule, per_key, beta_scalar,
                                            past):
    rng = np.random.default_rng(B * 10000 + T * 100 + Hq * 10 + dk)
    feeds = la_feeds(rng, B, T, Hq, Hkv, dk, dv, rule, past, per_key, beta_scalar)
    model, fd = la_model(feeds, Hq, Hkv, rule)
    got = run(model, fd)
    assert got[0].shape == (B, T, Hq * dv) and got[1].shape == (B, Hkv, dk, dv)
    assert_close(got, reference(model, fd), F32)


def test_linear_attention_default_rule_is_gated_delta():
    rng = np.random.default_rng(11)
    feeds = la_feeds(rng, 2, 4, 4, 2, 8, 6, "gated_delta", past=True)
    model, fd = la_model(feeds, 4, 2)  # no update_rule attribute
    explicit, _ = la_model(feeds, 4, 2, "gated_delta")
    got = run(model, fd)
    assert_close(got, run(explicit, fd), F32)
    assert_close(got, reference(model, fd), F32)


@pytest.mark.parametrize("scale", [0.0, 0.25, -1.5])
@pytest.mark.parametrize("chunk_size", [None, 1, 3, 1024])
def test_linear_attention_scale_and_chunk_size(scale, chunk_size):
    rng = np.random.default_rng(12)
    feeds = la_feeds(rng, 2, 9, 4, 2, 6, 5, "gated_delta", past=True)
    attrs = {"scale": scale}
    if chunk_size is not None:
        attrs["chunk_size"] = chunk_size
    model, fd = la_model(feeds, 4, 2, **attrs)
    assert_close(run(model, fd), reference(model, fd), F32)


def numpy_linear(q, k, v, Hq, Hkv, past):
    """The linear rule in closed form: S_t = past + sum_{s <= t} k_s v_s^T, o_t = S_t^T q_t
    / sqrt(d_k), in float64 with cumulative sums."""
    B, T, _ = q.shape
    dk = q.shape[2] // Hq
    dv = v.shape[2] // Hkv
    q4 = q.reshape(B, T, Hq, dk).astype(np.float64)
    k4 = k.reshape(B, T, Hkv, dk).astype(np.float64)
    v4 = v.reshape(B, T, Hkv, dv).astype(np.float64)
    S = np.cumsum(np.einsum("bthd,bthm->bthdm", k4, v4), axis=1) + past[:, None]
    S = np.repeat(S, Hq // Hkv, axis=2)  # query head h reads kv head h // group
    o = np.einsum("bthd,bthdm->bthm", q4, S) / np.sqrt(dk)
    return o.reshape(B, T, Hq * dv), S[:, -1, ::Hq // Hkv]


@pytest.mark.parametrize("B,T,Hq,Hkv,dk,dv", LA_SHAPES)
def test_linear_attention_linear_rule_closed_form(B, T, Hq, Hkv, dk, dv):
    rng = np.random.default_rng(13 + T)
    feeds = la_feeds(rng, B, T, Hq, Hkv, dk, dv, "linear", past=True)
    model, fd = la_model(feeds, Hq, Hkv, "linear")
    out, state = run(model, fd)
    want_out, want_state = numpy_linear(fd["query"], fd["key"], fd["value"], Hq, Hkv,
                                        fd["past_state"])
    np.testing.assert_allclose(out, want_out, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(state, want_state, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rule", RULES)
def test_linear_attention_decode_steps_equal_one_prefill(rule):
    rng = np.random.default_rng(14)
    B, T, Hq, Hkv, dk, dv = 2, 7, 6, 3, 8, 4
    feeds = la_feeds(rng, B, T, Hq, Hkv, dk, dv, rule, past=True)
    model, fd = la_model(feeds, Hq, Hkv, rule)
    full_out, full_state = run(model, fd)
    sess = session(model)
    outs, state = [], fd["past_state"]
    for lo, hi in [(0, 1), (1, 2), (2, 5), (5, 6), (6, 7)]:  # decode steps and prefills
        step = {n: np.ascontiguousarray(a[:, lo:hi]) for n, a in fd.items() if n != "past_state"}
        out, state = sess.run(None, dict(step, past_state=state))
        outs.append(out)
    np.testing.assert_allclose(np.concatenate(outs, axis=1), full_out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(state, full_state, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [F16, BF16])
@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("B,T,Hq,Hkv,dk,dv,past", [(2, 4, 8, 4, 8, 8, False),
                                                   (1, 1, 4, 1, 16, 8, True),
                                                   (2, 6, 3, 3, 5, 7, True)])
def test_linear_attention_half_types(dtype, rule, B, T, Hq, Hkv, dk, dv, past):
    rng = np.random.default_rng(15 + T)
    feeds = la_feeds(rng, B, T, Hq, Hkv, dk, dv, rule, past, dtype=dtype)
    model, fd = la_model(feeds, Hq, Hkv, rule)
    got = run(model, fd)
    assert got[0].dtype == dtype and got[1].dtype == dtype
    assert_close(got, reference(model, fd), dtype)


@pytest.mark.parametrize("dtype,state_dtype", [(F16, F32), (BF16, F32), (F32, F16),
                                               (F16, BF16)])
def test_linear_attention_state_type_differs_from_activations(dtype, state_dtype):
    """present_state takes past_state's type (S), the output query's (T)."""
    rng = np.random.default_rng(16)
    feeds = la_feeds(rng, 2, 5, 4, 2, 8, 6, "gated_delta", past=True, dtype=dtype,
                     state_dtype=state_dtype)
    model, fd = la_model(feeds, 4, 2)
    got = run(model, fd)
    assert got[0].dtype == dtype and got[1].dtype == state_dtype
    want = reference(model, fd)
    tol = max(TOL[dtype], TOL[state_dtype])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol[0],
                                   atol=tol[1])


@pytest.mark.parametrize("rule", RULES)
def test_linear_attention_heads_split_over_threads(rule):
    rng = np.random.default_rng(19)
    B, T, Hq, Hkv, dk, dv = 3, 24, 8, 4, 32, 24
    feeds = la_feeds(rng, B, T, Hq, Hkv, dk, dv, rule, past=True)
    model, fd = la_model(feeds, Hq, Hkv, rule)
    want = reference(model, fd)
    for threads in (1, 3, 4):
        assert_close(session(model, threads=threads).run(None, fd), want, F32)


@pytest.mark.parametrize("dtype", [F32, F16])
def test_linear_attention_without_the_present_state_output(dtype):
    rng = np.random.default_rng(20)
    feeds = la_feeds(rng, 2, 5, 4, 2, 6, 3, "gated_delta", past=True, dtype=dtype)
    model, fd = la_model(feeds, 4, 2)
    want = reference(model, fd)[0]
    model.graph.node[0].output[1] = ""
    del model.graph.output[1]
    (out,) = run(model, fd)
    assert_close([out], [want], dtype)


def test_linear_attention_empty_sequence_passes_the_state_through():
    rng = np.random.default_rng(17)
    feeds = la_feeds(rng, 2, 0, 4, 2, 3, 5, "gated_delta", past=True)
    model, fd = la_model(feeds, 4, 2)
    out, state = run(model, fd)
    assert out.shape == (2, 0, 20)
    np.testing.assert_array_equal(state, fd["past_state"])


def la_error_model(shapes, Hq=4, Hkv=2, rule="gated_delta", dtypes=None, **attrs):
    names = ["query", "key", "value", "past_state", "decay", "beta"]
    dtypes = dtypes or {}
    feeds = [(n, None if s is None else np.zeros(s, dtypes.get(n, F32)))
             for n, s in zip(names, shapes)]
    return la_model(feeds, Hq, Hkv, rule, name="la", **attrs)


# Shapes with Hq = 4, Hkv = 2, d_k = 3, d_v = 5, B = 2, T = 6 unless a case changes one.
Q, K, V = (2, 6, 12), (2, 6, 6), (2, 6, 10)
GOOD = [Q, K, V, (2, 2, 3, 5), (2, 6, 2), (2, 6, 2)]


def with_shape(i, shape):
    s = list(GOOD)
    s[i] = shape
    return s


@pytest.mark.parametrize("shapes,match", [
    (with_shape(0, (2, 12)), r"query \[2,12\], key \[2,6,6\] and value \[2,6,10\] must be 3-D"),
    (with_shape(1, (2, 6, 2, 3)), r"must be 3-D"),
    (with_shape(1, (1, 6, 6)), r"must agree on \(B, T\)"),
    (with_shape(2, (2, 5, 10)), r"must agree on \(B, T\)"),
    (with_shape(0, (2, 6, 14)), r"query \[2,6,14\] is not divisible by q_num_heads \(4\)"),
    (with_shape(0, (2, 6, 0)), r"gives a head size d_k of 0"),
    (with_shape(1, (2, 6, 8)), r"key \[2,6,8\] must be kv_num_heads \* d_k = 2 \* 3"),
    (with_shape(2, (2, 6, 9)), r"value \[2,6,9\] is not divisible by kv_num_heads \(2\)"),
    (with_shape(3, (2, 2, 5, 3)), r"'past_state' \[2,2,5,3\] must be \[2,2,3,5\]"),
    (with_shape(3, (2, 2, 15)), r"'past_state' \[2,2,15\] must be \[2,2,3,5\]"),
    (with_shape(4, (2, 6, 3)), r"'decay' \[2,6,3\] must be \[2,6,2\] \(per head\) or \[2,6,6\]"),
    (with_shape(4, (2, 6)), r"'decay' \[2,6\] must be"),
    (with_shape(4, (2, 1, 2)), r"'decay' \[2,1,2\] must be"),
    (with_shape(5, (2, 6, 4)), r"'beta' \[2,6,4\] must be \[2,6,2\] or \[2,6,1\]"),
    (with_shape(5, (1, 6, 2)), r"'beta' \[1,6,2\] must be"),
])
def test_linear_attention_bad_shapes(shapes, match):
    model, fd = la_error_model(shapes)
    with pytest.raises(ortlite.InvalidArgument, match=match) as e:
        run(model, fd)
    assert "LinearAttention node 'la'" in str(e.value)


@pytest.mark.parametrize("dtypes,match", [
    ({"key": F16}, r"'key' has element type float16, not the type of 'query' \(float\)"),
    ({"beta": F16}, r"'beta' has element type float16"),
    ({"decay": np.float64}, r"'decay' has element type double"),
    ({n: np.float64 for n in ("query", "key", "value", "decay", "beta")},
     r"'query' has element type double; the op takes float, float16 or bfloat16"),
    ({"past_state": np.float64}, r"'past_state' has element type double"),
])
def test_linear_attention_bad_types(dtypes, match):
    model, fd = la_error_model(GOOD, dtypes=dtypes)
    with pytest.raises(ortlite.InvalidArgument, match=match) as e:
        run(model, fd)
    assert "LinearAttention node 'la'" in str(e.value)


@pytest.mark.parametrize("rule,present,attrs,match", [
    ("recurrent", (4, 5), {}, r"'update_rule' = 'recurrent' is unknown"),
    ("gated", (), {}, r"update_rule 'gated' needs input 'decay'"),
    ("gated_delta", (5,), {}, r"update_rule 'gated_delta' needs input 'decay'"),
    ("gated_delta", (4,), {}, r"update_rule 'gated_delta' needs input 'beta'"),
    ("delta", (), {}, r"update_rule 'delta' needs input 'beta'"),
    ("linear", (4,), {}, r"update_rule 'linear' takes no input 'decay'"),
    ("linear", (5,), {}, r"update_rule 'linear' takes no input 'beta'"),
    ("delta", (4, 5), {}, r"update_rule 'delta' takes no input 'decay'"),
    ("gated", (4, 5), {}, r"update_rule 'gated' takes no input 'beta'"),
    ("linear", (), {"q_num_heads": 3, "kv_num_heads": 2},
     r"q_num_heads \(3\) must be a positive multiple of kv_num_heads \(2\)"),
    ("linear", (), {"q_num_heads": 4, "kv_num_heads": 0}, r"kv_num_heads \(0\)"),
    ("linear", (), {"q_num_heads": -2, "kv_num_heads": -1}, r"positive multiple"),
    ("linear", (), {"chunk_size": 2.5}, r"chunk_size"),
])
def test_linear_attention_bad_attributes_fail_at_load(rule, present, attrs, match):
    shapes = [Q, K, V, None] + [GOOD[i] if i in present else None for i in (4, 5)]
    heads = {"Hq": attrs.pop("q_num_heads", 4), "Hkv": attrs.pop("kv_num_heads", 2)}
    model, _ = la_error_model(shapes, rule=rule, **heads, **attrs)
    with pytest.raises(ortlite.InvalidGraph, match=match) as e:
        session(model)
    assert "LinearAttention node 'la'" in str(e.value)


@pytest.mark.parametrize("missing", ["q_num_heads", "kv_num_heads"])
def test_linear_attention_head_counts_are_required(missing):
    rng = np.random.default_rng(18)
    feeds = la_feeds(rng, 1, 2, 2, 2, 4, 4, "linear")[:3]
    node = helper.make_node("LinearAttention", [n for n, _ in feeds], ["o", "s"],
                            update_rule="linear", **{k: 2 for k in ("q_num_heads", "kv_num_heads")
                                                     if k != missing})
    model = make_model([node], [(n, TP.FLOAT, list(a.shape)) for n, a in feeds],
                       [("o", TP.FLOAT, None), ("s", TP.FLOAT, None)], opset=OPSET)
    with pytest.raises(ortlite.InvalidGraph, match=f"required attribute '{missing}'"):
        session(model)
